# mk/00-core.mk - libscope (runtime + protocol) and the objects the programs
# and tests share.  Convention: each program's main() lives in <dir>/main.c;
# every other .c file of daemon/ dumper/ tui/ bpf/ is a library object that
# the unit tests link too.  dump/ (the thread dump: built from the daemon's
# reply, rendered, written to a file) has no main: scopecmd and scopetop
# both link it.

RUNTIME_SRCS := $(wildcard runtime/*.c runtime/agent/*.c)
PROTO_SRCS := $(wildcard proto/*.c)
# The parts of common/ the agent uses: socket paths and checks, /proc/PID/stat.
LIBSCOPE_COMMON_SRCS := common/procstat.c common/sockpath.c common/sockcheck.c
LIBSCOPE_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(RUNTIME_SRCS) $(PROTO_SRCS) $(LIBSCOPE_COMMON_SRCS))
LIBSCOPE_LIBS := -lunwind -lpthread

$(BUILD)/lib/libscope.a: $(LIBSCOPE_OBJS)
	@mkdir -p $(@D)
	$(E) AR $@
	$(Q)rm -f $@ && ar rcs $@ $^

$(BUILD)/lib/libscope.so: $(LIBSCOPE_OBJS)
	@mkdir -p $(@D)
	$(E) LD $@
	$(Q)$(CC) -shared -Wl,-soname,libscope.so.0 $(SC_LDFLAGS) $(LDFLAGS) -o $@ $^ $(LIBSCOPE_LIBS)
	$(Q)ln -sf libscope.so $(@D)/libscope.so.0

ALL_TARGETS += $(BUILD)/lib/libscope.a $(BUILD)/lib/libscope.so

# User-side sources of the other parts, split into mains and library objects.
part_srcs = $(filter-out %.bpf.c,$(wildcard $(1)/*.c))
DAEMON_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(filter-out daemon/main.c,$(call part_srcs,daemon)))
DUMPER_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(filter-out dumper/main.c,$(call part_srcs,dumper)))
DUMP_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(call part_srcs,dump))
TUI_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(filter-out tui/main.c,$(call part_srcs,tui)))
BPF_USER_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(call part_srcs,bpf))
PROTO_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(PROTO_SRCS))
COMMON_SRCS := $(wildcard common/*.c)
COMMON_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(COMMON_SRCS))

# OTEP 4947 advises the TLS descriptor dialect for otel_thread_ctx_v1 (what
# the profilers that read it expect of a shared library); where the compiler
# has no such flag the default dialect is one they read too.
TLSDESC_FLAG := $(shell $(CC) -mtls-dialect=gnu2 -fPIC -x c -c /dev/null -o /dev/null 2>/dev/null && echo -mtls-dialect=gnu2)
$(BUILD)/obj/runtime/otelctx.o: CFLAGS_runtime += $(TLSDESC_FLAG)
