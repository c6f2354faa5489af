#!/bin/sh
# scripts/bench-agent-series.sh [RUNS] - runs bench_agent's fork workload
# against the real daemon RUNS times (default 9) and prints each run's
# medians of per-round time ratios (agent connected / receiver stopped, to
# the agent-off baseline of the same round) with the CPU per fork of the
# program, the agent and the daemon, then the median over the runs.
#
# One run's median swings with whatever else the shared cores do (on the
# 2-vCPU development machines, 1.02-1.47 for the same build on one day), so
# a figure for the README comes from a series, not from one `make bench`.
# Build first: make all build/bench/bench_agent.
set -eu
TOP=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
B=$TOP/$BUILD/bench/bench_agent
RUNS=${1:-9}
[ -x "$B" ] || { echo "bench-agent-series: build $B first (make all $BUILD/bench/bench_agent)" >&2; exit 1; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
i=0
while [ "$i" -lt "$RUNS" ]; do
	i=$((i + 1))
	BENCH_AGENT_ONLY=daemon "$B" | awk -v run="$i" '
		/ratios, connected/ { on = $NF }
		/ratios, stopped/ { st = $NF }
		/^    agent connected / { prog = $3; agent = $5; rx = $7 }
		/delivered per fork/ { ev = $(NF - 1) }
		END { printf "run %2d  connected %s  stopped %s  cpu/fork program %s agent %s daemon %s  events/fork %s\n", run, on, st, prog, agent, rx, ev }' | tee -a "$out"
done
awk '{ on[NR] = $4; st[NR] = $6; n = NR }
	function median(a, n,   i, j, t) {
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	END {
		under = 0; for (i = 1; i <= n; i++) if (on[i] < 1.10) under++
		printf "median over %d runs: connected %.3f (%d under 1.10), stopped %.3f\n", n, median(on, n), under, median(st, n)
	}' "$out"
