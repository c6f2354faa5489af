# Makefile - builds libscope, scoped, scopecmd, scopetop, the BPF programs,
# the examples, the tests and the benchmarks under $(BUILD)/.
#
#   make            everything          make test        all tests
#   make demo       the main job        make test-asan   tests under ASan+UBSan
#   make bench      benchmarks          make test-tsan   tests under TSan
#   make deps       Debian packages     make fuzz        libFuzzer targets
#   make install    under PREFIX (/usr/local), DESTDIR; make uninstall
#
# V=1 shows commands.  CI=true adds -Werror.  Each part adds its own rules in
# mk/<part>.mk; this file holds what they share.

BUILD ?= build
SAN ?=
CC ?= cc
V ?= 0
Q := $(if $(filter 1,$(V)),,@)
E := $(if $(filter 1,$(V)),@true,@printf '  %-7s %s\n')

ifeq ($(SAN),asan)
BUILD := build-asan
SANFLAGS := -fsanitize=address,undefined -fno-sanitize-recover=undefined
OPT := -O1
else ifeq ($(SAN),tsan)
BUILD := build-tsan
SANFLAGS := -fsanitize=thread
OPT := -O1
else
SANFLAGS :=
OPT := -O2
endif

WERROR := $(if $(filter true,$(CI)),-Werror,)
PKGS := jansson ncursesw libdw libelf libbpf cmocka libunwind
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)

# CFLAGS and LDFLAGS are the user's (`make CFLAGS=-O0`); what the build
# cannot work without lives in SC_CFLAGS and SC_LDFLAGS, which come first so
# that the user's flags still win where they overlap.
CFLAGS ?= $(OPT) -g
SC_CFLAGS := -std=c11 -D_GNU_SOURCE -fno-omit-frame-pointer -fPIC -Wall -Wextra $(WERROR) \
	  -MMD -MP -Iinclude -Iproto -Icommon -Idump -Iruntime -Iruntime/agent -I$(BUILD)/bpf $(PKG_CFLAGS) $(SANFLAGS)
SC_LDFLAGS := $(SANFLAGS) -rdynamic
# clang writes no .debug_aranges unless asked, and the symbolizer (libdw)
# finds no file:line without them.
SC_CFLAGS += $(if $(shell $(CC) --version 2>/dev/null | grep -q clang && echo y),-gdwarf-aranges)
LIBS_ALL := -lmicrohttpd -lcurl -ljansson -lncursesw -ltinfo -ldw -lelf -lbpf -lunwind -lz -lpthread -lm

# Per top-level directory extra flags (CFLAGS_runtime, CFLAGS_proto, ...).
CFLAGS_runtime := -DSCOPE_BUILDING_LIBRARY -fvisibility=hidden
CFLAGS_proto := -fvisibility=hidden
CFLAGS_common := -fvisibility=hidden

all:

# The compiler and flags of the last build are kept in $(FLAGS_STAMP); when
# they change (CC=clang, CI=true, CFLAGS=...) the stamp is rewritten, and
# every object, being older than it, is built again (as Redis does).
FLAGS_STAMP := $(BUILD)/flags.stamp
FLAGS_NOW := $(strip $(CC) | $(SC_CFLAGS) | $(CFLAGS) | $(SC_LDFLAGS) | $(LDFLAGS))
# `make install` builds nothing that `make all` did not (mk/install.mk), so
# it leaves the stamp alone: tests/e2e/install.sh runs it without CI=true.
ifeq ($(filter clean deps format format-all format-check install uninstall,$(MAKECMDGOALS)),)
ifneq ($(FLAGS_NOW),$(strip $(file <$(FLAGS_STAMP))))
$(shell mkdir -p $(BUILD))
$(file >$(FLAGS_STAMP),$(FLAGS_NOW))
endif
endif
$(FLAGS_STAMP):
	@mkdir -p $(@D) && printf '%s\n' '$(FLAGS_NOW)' >$@

$(BUILD)/obj/%.o: %.c $(FLAGS_STAMP)
	@mkdir -p $(@D)
	$(E) CC $<
	$(Q)$(CC) $(SC_CFLAGS) $(CFLAGS_$(firstword $(subst /, ,$<))) $(CFLAGS) -c $< -o $@

include $(sort $(wildcard mk/*.mk))

all: $(ALL_TARGETS)

deps:
	@sh scripts/deps.sh

test: deps
	@$(MAKE) --no-print-directory all $(TEST_BINS)
	@sh tests/run.sh $(BUILD)

test-asan:
	@$(MAKE) --no-print-directory SAN=asan test

test-tsan:
	@$(MAKE) --no-print-directory SAN=tsan test

# Programs the benchmarks run (bench_dump.sh, bench_plain.sh, bench_bpf):
# built with them, so that `make bench` on a fresh tree skips none.
BENCH_HELPERS := $(addprefix $(BUILD)/tests/helpers/,dump_many plain_threads plain_procfloor bpf_target)

bench: deps
	@$(MAKE) --no-print-directory all $(BENCH_BINS) $(BENCH_HELPERS)
	@sh bench/run.sh $(BUILD)

demo: deps
	@$(MAKE) --no-print-directory all
	@sh scripts/demo.sh $(BUILD)

# `make format` formats every C file of the tree (tracked, and new ones
# not ignored) as .clang-format says; `make format-check` (CI) fails, with
# the diff, when a tracked one is not.  The whole tree was formatted in one
# commit (issue 16), so the check covers all of it and needs no history.
C_FILES = $(shell git ls-files '*.c' '*.h' 2>/dev/null)
NEED_CLANG_FORMAT = command -v clang-format >/dev/null || { echo "skip: $@: clang-format \
	is not installed ('make deps' as root installs it)"; exit 0; }

format format-all:
	@$(NEED_CLANG_FORMAT)
	@clang-format -i $(C_FILES) $$(git ls-files --others --exclude-standard | grep -E '\.[ch]$$')

format-check:
	@$(NEED_CLANG_FORMAT)
	@bad=0; for f in $(C_FILES); do \
		d=$$(clang-format "$$f" | diff -u "$$f" -) && continue; \
		printf '%s\n' "$$d" | head -40; bad=$$((bad + 1)); \
	done; \
	if [ $$bad -gt 0 ]; then \
		echo "format-check: $$bad file(s) above are not as clang-format writes them ('make format')"; \
		exit 1; fi; \
	echo "format-check: all $(words $(C_FILES)) C files are formatted"

clean:
	rm -rf build build-asan build-tsan build-clang build-fuzz

.PHONY: all deps test test-asan test-tsan bench demo format format-check format-all clean fuzz

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
