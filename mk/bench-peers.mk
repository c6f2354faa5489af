# mk/bench-peers.mk - the scheduler benchmark's peers (TBB, OpenMP, GLib),
# run by bench_sched side by side with libscope.  Each is built only when
# its package is installed (scripts/deps.sh lists them); bench_sched says
# which one it skips and why.

PEERS_DIR := $(BUILD)/bench-peers
PEER_CFLAGS := -O2 -g -Ibench -Ibench/peers -pthread
CXX ?= c++

ifneq ($(wildcard /usr/include/tbb/task_group.h /usr/include/oneapi/tbb/task_group.h),)
$(PEERS_DIR)/peer_tbb: bench/peers/peer_tbb.cc bench/peers/peer_work.h
	@mkdir -p $(@D)
	$(E) CXX $<
	$(Q)$(CXX) -std=c++17 $(PEER_CFLAGS) -o $@ $< -ltbb
BENCH_BINS += $(PEERS_DIR)/peer_tbb
endif

ifneq ($(shell echo 'int main(void){return 0;}' | $(CC) -fopenmp -x c - -o /dev/null 2>/dev/null && echo y),)
$(PEERS_DIR)/peer_omp: bench/peers/peer_omp.c bench/peers/peer_work.h bench/bench.h
	@mkdir -p $(@D)
	$(E) CC $<
	$(Q)$(CC) -std=c11 -D_GNU_SOURCE -fopenmp $(PEER_CFLAGS) -o $@ $< -lm
BENCH_BINS += $(PEERS_DIR)/peer_omp
endif

GLIB_FLAGS := $(shell pkg-config --cflags --libs glib-2.0 2>/dev/null)
ifneq ($(GLIB_FLAGS),)
$(PEERS_DIR)/peer_glib: bench/peers/peer_glib.c bench/peers/peer_work.h bench/bench.h
	@mkdir -p $(@D)
	$(E) CC $<
	$(Q)$(CC) -std=c11 -D_GNU_SOURCE $(PEER_CFLAGS) -o $@ $< $(GLIB_FLAGS) -lm
BENCH_BINS += $(PEERS_DIR)/peer_glib
endif
