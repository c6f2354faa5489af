# mk/fuzz.mk - `make fuzz`: builds the libFuzzer targets under build-fuzz/
# with ASan and UBSan and runs each for FUZZ_TIME seconds on a copy of its
# seed corpus (so the committed seeds never grow):
#   fuzz_proto  the wire decoder: accepted frames re-encode to the same message
#   fuzz_model  frames applied to the daemon's model: renders stay JSON
#   fuzz_ctl    control requests through the daemon's client code, as several
#               uids: replies are JSON, and no uid sees another's processes
#   fuzz_jv     the clients' JSON parser: what it accepts round-trips
#   fuzz_dump   the dump builder on any reply: the JSON text written straight
#               from it parses and equals jansson's print of the tree
# Without libFuzzer (libclang-rt-14-dev, an optional package) it says so and
# skips.  Needs `make all` first for the BPF skeleton the daemon includes.

FUZZ_TIME ?= 60
FUZZ_DIR := build-fuzz
FUZZ_CC ?= clang
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_CFLAGS := -g -O1 -std=c11 -D_GNU_SOURCE -fno-omit-frame-pointer -Iinclude -Iproto \
	-Iruntime -Icommon -I$(BUILD)/bpf $(PKG_CFLAGS) $(FUZZ_SAN) -fsanitize=fuzzer-no-link -MMD -MP
FUZZ_TARGETS := fuzz_proto fuzz_model fuzz_ctl fuzz_jv fuzz_dump

# Each target's seeds: frames for the decoder and the model.
FUZZ_SEEDS_fuzz_proto := tests/fuzz/corpus
FUZZ_SEEDS_fuzz_model := tests/fuzz/corpus
FUZZ_SEEDS_fuzz_ctl := tests/fuzz/corpus-ctl
FUZZ_SEEDS_fuzz_jv := tests/fuzz/corpus-jv
FUZZ_SEEDS_fuzz_dump := tests/fuzz/corpus-dump

FUZZ_DAEMON_SRCS := $(filter-out daemon/main.c,$(call part_srcs,daemon)) $(call part_srcs,bpf) \
	$(call part_srcs,dump) $(PROTO_SRCS) $(COMMON_SRCS)
fuzz_objs = $(patsubst %.c,$(FUZZ_DIR)/obj/%.o,$(1))
FUZZ_OBJS_fuzz_proto := $(call fuzz_objs,$(PROTO_SRCS))
FUZZ_OBJS_fuzz_jv := $(call fuzz_objs,common/jv.c)
FUZZ_OBJS_fuzz_dump := $(call fuzz_objs,$(call part_srcs,dump) common/jv.c common/jtext.c \
	common/termtext.c)
FUZZ_OBJS_fuzz_model := $(call fuzz_objs,$(FUZZ_DAEMON_SRCS))
FUZZ_OBJS_fuzz_ctl := $(call fuzz_objs,$(FUZZ_DAEMON_SRCS))

$(FUZZ_DIR)/obj/%.o: %.c
	@mkdir -p $(@D)
	$(E) FUZZCC $<
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -c $< -o $@

$(addprefix $(FUZZ_DIR)/obj/,$(patsubst %.c,%.o,$(call part_srcs,bpf))): $(BUILD)/bpf/stacks.skel.h

.SECONDEXPANSION:
$(FUZZ_DIR)/%: $(FUZZ_DIR)/obj/tests/fuzz/%.o $$(FUZZ_OBJS_$$*)
	$(E) FUZZLD $@
	$(Q)$(FUZZ_CC) $(FUZZ_SAN) -fsanitize=fuzzer -rdynamic -o $@ $^ $(LIBS_ALL)

# Whether FUZZ_CC links libFuzzer at all (libclang-rt-14-dev).
FUZZ_PROBE = printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n)\n{ return 0; }\n' | \
	$(FUZZ_CC) -x c -fsanitize=fuzzer -o /dev/null - 2>/dev/null

fuzz:
	@if ! $(FUZZ_PROBE); then echo "skip: fuzz: $(FUZZ_CC) cannot link libFuzzer" \
		"(libclang-rt-14-dev, an optional package: 'make deps' as root)"; exit 0; fi; \
	$(MAKE) --no-print-directory all && \
	$(MAKE) --no-print-directory $(addprefix $(FUZZ_DIR)/,$(FUZZ_TARGETS)) && \
	for t in $(FUZZ_TARGETS); do \
		rm -rf $(FUZZ_DIR)/corpus-$$t && mkdir -p $(FUZZ_DIR)/corpus-$$t $(FUZZ_DIR)/artifacts && \
		case $$t in fuzz_proto|fuzz_model) seeds=$(FUZZ_SEEDS_fuzz_proto);; \
			fuzz_ctl) seeds=$(FUZZ_SEEDS_fuzz_ctl);; fuzz_dump) seeds=$(FUZZ_SEEDS_fuzz_dump);; \
			*) seeds=$(FUZZ_SEEDS_fuzz_jv);; esac; \
		cp $$seeds/* $(FUZZ_DIR)/corpus-$$t/ && \
		echo "fuzz: $$t for $(FUZZ_TIME) s" && \
		$(FUZZ_DIR)/$$t -max_total_time=$(FUZZ_TIME) -max_len=70000 -print_final_stats=1 \
			-artifact_prefix=$(FUZZ_DIR)/artifacts/$$t- $(FUZZ_DIR)/corpus-$$t \
			>$(FUZZ_DIR)/$$t.log 2>&1 || { tail -60 $(FUZZ_DIR)/$$t.log; \
			echo "fuzz: $$t failed; the input is in $(FUZZ_DIR)/artifacts/"; exit 1; }; \
		grep -E '^stat::number_of_executed_units' $(FUZZ_DIR)/$$t.log; \
	done

.PRECIOUS: $(FUZZ_DIR)/obj/%.o
-include $(shell find $(FUZZ_DIR)/obj -name '*.d' 2>/dev/null)
