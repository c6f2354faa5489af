# mk/bpf.mk - the BPF stack source: vmlinux.h from the running kernel's BTF,
# stacks.bpf.c compiled for the BPF target, and its libbpf skeleton, which
# the user-side objects of bpf/ include.

BPF_CLANG ?= clang
BPFTOOL ?= bpftool
BPF_CFLAGS := -g -O2 -target bpf -D__TARGET_ARCH_x86 -I$(BUILD)/bpf -Ibpf -Wall -Wno-unused-function

$(BUILD)/bpf/vmlinux.h:
	@mkdir -p $(@D)
	$(E) GEN $@
	$(Q)$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > $@.tmp && mv $@.tmp $@

$(BUILD)/bpf/%.bpf.o: bpf/%.bpf.c bpf/%.h $(BUILD)/bpf/vmlinux.h
	@mkdir -p $(@D)
	$(E) BPF $<
	$(Q)$(BPF_CLANG) $(BPF_CFLAGS) -c $< -o $@

$(BUILD)/bpf/%.skel.h: $(BUILD)/bpf/%.bpf.o mk/bpf.mk
	$(E) SKEL $@
	$(Q)$(BPFTOOL) gen skeleton $< > $@.tmp && mv $@.tmp $@

$(BPF_USER_OBJS): $(BUILD)/bpf/stacks.skel.h

ALL_TARGETS += $(BUILD)/bpf/stacks.skel.h $(BPF_USER_OBJS)
.PRECIOUS: $(BUILD)/bpf/%.bpf.o

# The benchmark and the tests capture this helper.
$(BUILD)/bench/bench_bpf: $(BUILD)/tests/helpers/bpf_target
