#!/bin/sh
# scripts/bench-agent-series.sh [RUNS] - runs bench_agent RUNS times (default
# 9), as `make bench` runs it, and prints per run, for the fork workload
# against the real daemon: the medians of per-round time ratios to the
# agent-off baseline of the same round, with their 95% intervals (agent
# connected, receiver SIGSTOPped), the CPU per fork of the program, the
# agent and the daemon, how often per fork a program thread was preempted
# (connected), and the events delivered per fork; then the median over the
# runs, and the same two ratios against the decode-only sink; last, every
# round of every run against the daemon pooled: the median of those rounds'
# ratios with its 95% interval (the figure a series is for), for the agent
# connected, the receiver SIGSTOPped, the empty observer and the A/A arm
# (the baseline again: what the series makes of two identical arms).
#
# Each run's interval says how far that run alone can be trusted; a series
# shows how the level moves from one hour to the next on shared cores.
# BENCH_AGENT_REPS and BENCH_AGENT_SCOPES pass through (see bench_agent.c).
# Build first: make all build/bench/bench_agent.
set -eu
TOP=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
B=$TOP/$BUILD/bench/bench_agent
RUNS=${1:-9}
[ -x "$B" ] || { echo "bench-agent-series: build $B first (make all $BUILD/bench/bench_agent)" >&2; exit 1; }
out=$(mktemp)
rounds=$(mktemp)
trap 'rm -f "$out" "$rounds"' EXIT
i=0
while [ "$i" -lt "$RUNS" ]; do
	i=$((i + 1))
	BENCH_AGENT_ROUNDS=1 "$B" | awk -v run="$i" -v rounds="$rounds" '
		/receiver: scoped/ { daemon = 1 }
		daemon && /^  rounds, (agent connected|receiver SIGSTOPped|agent off again|empty observer) / {
			mode = $3 == "connected" ? "connected" : $3 == "SIGSTOPped" ? "stopped" : $3 == "off" ? "A/A" : "empty"
			for (f = 3; f <= NF && $f !~ /^[0-9.]+$/; f++) continue
			for (; f <= NF && $f ~ /^[0-9.]+$/; f++) print mode, $f >> rounds
			next
		}
		/^  rounds, / { next }
		/ratios, connected/ { if (daemon) { on = $6; oni = $7 } else son = $6 }
		/ratios, stopped/ { if (daemon) { st = $6; sti = $7 } else sst = $6 }
		/^    agent connected +[0-9]+ \// { if (daemon) { prog = $3; agent = $5; rx = $7 } }
		/^    agent connected +[0-9]+\.[0-9]+ \// { if (daemon) { pre = $5 } }
		/delivered per fork/ { if (daemon) ev = $(NF - 1) }
		END { printf "run %2d  daemon: connected %s stopped %s  cpu/fork program %s agent %s daemon %s  preempted/fork %s  events/fork %s  |  sink: connected %s stopped %s  |  intervals: connected %s stopped %s\n", run, on, st, prog, agent, rx, pre, ev, son, sst, oni, sti }' | tee -a "$out"
done
awk 'function median(a, n,   i, j, t) {
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	{ n = NR; on[n] = $5; st[n] = $7; son[n] = $22; sst[n] = $24; if ($5 < 1.10) under++ }
	END {
		printf "median over %d runs, daemon: connected %.3f (%d runs under 1.10), stopped %.3f; sink: connected %.3f, stopped %.3f\n", n, median(on, n), under, median(st, n), median(son, n), median(sst, n)
	}' "$out"
# The pooled median of every round's ratio and its distribution-free 95%
# interval: ranks k and n+1-k, k the largest with P(B < k) <= 2.5% for
# B ~ Binomial(n, 1/2) (as bench/bench.h computes it).
sort -k1,1 -k2,2g "$rounds" | awk '
	function report(mode, n,   j, lc, cum, p, k) {
		lc = 0; cum = 0; k = 0
		for (j = 0; j < n; j++) {
			p = exp(lc - n * log(2))
			if (cum + p > 0.025) break
			cum += p; k = j + 1
			lc += log(n - j) - log(j + 1)
		}
		printf "pooled over %d rounds, daemon, %s: median %.3f, 95%% interval %s\n", n, mode,
			n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2,
			k ? sprintf("%.3f-%.3f", v[k], v[n + 1 - k]) : "(too few rounds)"
	}
	$1 != cur { if (n) report(cur, n); cur = $1; n = 0 }
	{ v[++n] = $2 }
	END { if (n) report(cur, n) }'
