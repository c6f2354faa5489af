# mk/50-programs.mk - the three programs, the examples, unit tests, benches.

$(BUILD)/bin/scoped: $(BUILD)/obj/daemon/main.o $(DAEMON_OBJS) $(DUMP_OBJS) $(BPF_USER_OBJS) $(PROTO_OBJS) $(COMMON_OBJS)
	@mkdir -p $(@D)
	$(E) LD $@
	$(Q)$(CC) $(SC_LDFLAGS) $(LDFLAGS) -o $@ $^ $(LIBS_ALL)

# scopecmd runs once per dump, and the dynamic loader is half of its start
# (on a virtual machine, where page faults are dear): it is linked as a
# static PIE where the compiler and static libc and jansson make one that
# runs (not under a sanitizer), else as usual.  No -rdynamic there: clang's
# static PIEs crash at start with it, and scopecmd looks up no symbol.
SCOPECMD_STATIC := $(if $(SANFLAGS),,$(shell t=$$(mktemp) && \
	printf 'int main(void){return 0;}' | $(CC) -static-pie -x c - -o $$t -ljansson 2>/dev/null && \
	$$t && echo -static-pie; rm -f $$t))
$(BUILD)/bin/scopecmd: $(BUILD)/obj/dumper/main.o $(DUMPER_OBJS) $(DUMP_OBJS) $(PROTO_OBJS) $(COMMON_OBJS)
	@mkdir -p $(@D)
	$(E) LD $@
	$(Q)$(CC) $(if $(SCOPECMD_STATIC),-static-pie,$(SC_LDFLAGS)) $(LDFLAGS) -o $@ $^ \
		$(if $(SCOPECMD_STATIC),-ljansson,$(LIBS_ALL))

$(BUILD)/bin/scopetop: $(BUILD)/obj/tui/main.o $(TUI_OBJS) $(DUMP_OBJS) $(PROTO_OBJS) $(COMMON_OBJS)
	@mkdir -p $(@D)
	$(E) LD $@
	$(Q)$(CC) $(SC_LDFLAGS) $(LDFLAGS) -o $@ $^ $(LIBS_ALL)

ifneq ($(wildcard daemon/main.c),)
ALL_TARGETS += $(BUILD)/bin/scoped
endif
ifneq ($(wildcard dumper/main.c),)
ALL_TARGETS += $(BUILD)/bin/scopecmd
endif
ifneq ($(wildcard tui/main.c),)
ALL_TARGETS += $(BUILD)/bin/scopetop
endif

# examples/<name>.c -> $(BUILD)/bin/<name>, linked against libscope.so
EXAMPLE_BINS := $(patsubst examples/%.c,$(BUILD)/bin/%,$(wildcard examples/*.c))
$(BUILD)/bin/%: $(BUILD)/obj/examples/%.o $(BUILD)/lib/libscope.so
	@mkdir -p $(@D)
	$(E) LD $@
	$(Q)$(CC) $(SC_LDFLAGS) $(LDFLAGS) -o $@ $< -L$(BUILD)/lib -lscope -Wl,-rpath,'$$ORIGIN/../lib' -lpthread
ALL_TARGETS += $(EXAMPLE_BINS)

# tests/unit/test_<x>.c -> $(BUILD)/tests/test_<x>: static libscope plus every
# library object of the other parts.
TEST_LINK := $(DAEMON_OBJS) $(DUMPER_OBJS) $(DUMP_OBJS) $(TUI_OBJS) $(BPF_USER_OBJS) $(COMMON_OBJS) $(BUILD)/lib/libscope.a
TEST_BINS := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(wildcard tests/unit/test_*.c))
$(BUILD)/tests/%: $(BUILD)/obj/tests/unit/%.o $(TEST_LINK)
	@mkdir -p $(@D)
	$(E) LD $@
	$(Q)$(CC) $(SC_LDFLAGS) $(LDFLAGS) -o $@ $< $(TEST_LINK) -lcmocka $(LIBS_ALL)

# tests/helpers/<x>.c -> $(BUILD)/tests/helpers/<x>: programs the e2e tests run
TEST_BINS += $(patsubst tests/helpers/%.c,$(BUILD)/tests/helpers/%,$(wildcard tests/helpers/*.c))
$(BUILD)/tests/helpers/%: $(BUILD)/obj/tests/helpers/%.o $(BUILD)/lib/libscope.so
	@mkdir -p $(@D)
	$(E) LD $@
	$(Q)$(CC) $(SC_LDFLAGS) $(LDFLAGS) -o $@ $< -L$(BUILD)/lib -lscope -Wl,-rpath,'$$ORIGIN/../../lib' -lpthread

# tests/helpers/plain_<x>.c: programs that never link libscope (dumped as
# any process is); the shorter stem makes this rule win over the one above.
$(BUILD)/tests/helpers/plain_%: $(BUILD)/obj/tests/helpers/plain_%.o
	@mkdir -p $(@D)
	$(E) LD $@
	$(Q)$(CC) $(SC_LDFLAGS) $(LDFLAGS) -o $@ $< -lpthread

# bench/<x>.c -> $(BUILD)/bench/<x>
BENCH_BINS := $(patsubst bench/%.c,$(BUILD)/bench/%,$(wildcard bench/*.c))
$(BUILD)/bench/%: $(BUILD)/obj/bench/%.o $(TEST_LINK)
	@mkdir -p $(@D)
	$(E) LD $@
	$(Q)$(CC) $(SC_LDFLAGS) $(LDFLAGS) -o $@ $< $(TEST_LINK) $(LIBS_ALL)
