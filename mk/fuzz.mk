# mk/fuzz.mk - `make fuzz`: builds the libFuzzer target of the wire decoder
# under build-fuzz/ and runs it for FUZZ_TIME seconds on a copy of the seed
# corpus (so the committed seeds never grow).

FUZZ_TIME ?= 60
FUZZ_DIR := build-fuzz
FUZZ_CC ?= clang
FUZZ_FLAGS := -g -O1 -std=c11 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined -Iproto

$(FUZZ_DIR)/fuzz_proto: tests/fuzz/fuzz_proto.c proto/proto.c proto/proto.h
	@mkdir -p $(@D)
	$(E) FUZZCC $@
	$(Q)$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ tests/fuzz/fuzz_proto.c proto/proto.c

fuzz: $(FUZZ_DIR)/fuzz_proto
	@rm -rf $(FUZZ_DIR)/corpus && mkdir -p $(FUZZ_DIR)/corpus $(FUZZ_DIR)/artifacts
	@cp tests/fuzz/corpus/* $(FUZZ_DIR)/corpus/
	$(FUZZ_DIR)/fuzz_proto -max_total_time=$(FUZZ_TIME) -max_len=70000 \
		-artifact_prefix=$(FUZZ_DIR)/artifacts/ $(FUZZ_DIR)/corpus
