#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
#
# bench/cpu-costs.sh OUTDIR KLBENCH [KLBENCH...]
#
# The costs that grow with the CPU count, counted on a small machine (docs/many-cores.md):
# heavy fences (membarrier), sleeps, wake-ups and FIFO hand-overs to a sleeping waiter, per
# acquisition, for kl_mutex, kl_ticket, kl_mcs and kl_rwlock (write-only) at 2, 4 and 8
# threads, first alone and then with two CPU-bound processes beside the benchmark (a server
# is never idle). Each KLBENCH (e.g. an old and a new build) runs every configuration in
# turn, repeats interleaved. Where bpftrace can attach to the membarrier syscall
# tracepoint (root, tracefs), it also counts the membarrier calls from outside the process:
# an independent check of klbench's own fence/op column (and the only count for a build that
# predates that column).
#
# Output: OUTDIR/summary.txt (one line per build, load, lock and thread count: medians),
# OUTDIR/raw.csv (every run). Environment: CPU_COSTS_REPEATS (default 5),
# CPU_COSTS_SECS (measured seconds per run, default 0.3), CPU_COSTS_THREADS ("2 4 8"),
# CPU_COSTS_LOCKS ("kl_mutex kl_ticket kl_mcs kl_rwlock"), CPU_COSTS_BPF=0 (no bpftrace:
# each run then takes its own time only, instead of a second more for the attach).
# bpftrace's count covers the whole process (warm-up and start-up included), so its per-op
# figure is an upper bound.
#
#   bash bench/cpu-costs.sh /tmp/costs build-release/bench/klbench
set -uo pipefail

if [ $# -lt 2 ]; then
	echo "usage: bench/cpu-costs.sh OUTDIR KLBENCH [KLBENCH...]" >&2
	exit 2
fi
out=$1
shift
mkdir -p "$out"
reps=${CPU_COSTS_REPEATS:-5}
secs=${CPU_COSTS_SECS:-0.3}
threads=${CPU_COSTS_THREADS:-2 4 8}
locks=${CPU_COSTS_LOCKS:-kl_mutex kl_ticket kl_mcs kl_rwlock}
# CPU-bound processes beside the benchmark in the loaded half.
HOGS=2

tracefs=/sys/kernel/tracing
bpf=no
if [ "${CPU_COSTS_BPF:-1}" != 0 ] && command -v bpftrace >/dev/null && [ "$(id -u)" = 0 ]; then
	[ -d $tracefs/events ] || mount -t tracefs nodev $tracefs 2>/dev/null
	[ -d $tracefs/events/syscalls ] && bpf=yes
fi
echo "cpu-costs: bpftrace membarrier count: $bpf" | tee "$out/summary.txt"

hog_pids=()
hogs_on() { for _ in $(seq $HOGS); do (while :; do :; done) & hog_pids+=($!); done; }
hogs_off() { [ ${#hog_pids[@]} -eq 0 ] || kill "${hog_pids[@]}" 2>/dev/null; wait 2>/dev/null; hog_pids=(); }
trap hogs_off EXIT

# One klbench run; prints "ops fence/op sleep/op kwake/op aho% membarriers" (- if unknown).
one() {
	local kb=$1 lock=$2 thr=$3 csv mb=- bt
	csv=$(mktemp)
	if [ $bpf = yes ]; then
		bt=$(mktemp)
		# a running total every 100 ms: the last line after klbench exits is the count
		# (a background job ignores SIGINT, so END would never run)
		bpftrace -q -e 'tracepoint:syscalls:sys_enter_membarrier /comm == "klbench"/ { @n = @n + 1; }
			interval:ms:100 { printf("membarriers %d\n", @n); }' >"$bt" 2>/dev/null &
		local bpid=$!
		sleep 1 # attach
	fi
	"$kb" run -q -l "$lock" -t "$thr" -w 100 -r 1 -d "$secs" --csv "$csv" >/dev/null 2>&1
	if [ $bpf = yes ]; then
		sleep 0.3
		kill $bpid 2>/dev/null; wait $bpid 2>/dev/null
		mb=$(awk '/membarriers/ { n = $2 } END { print n }' "$bt")
		[ -n "$mb" ] || mb=-
		rm -f "$bt"
	fi
	python3 - "$csv" "$mb" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
r = rows[-1] if rows else {}
ops = int(r.get('reads', 0) or 0) + int(r.get('writes', 0) or 0)
mb = sys.argv[2]
mbop = '-' if mb == '-' or ops == 0 else '%.6f' % (int(mb) / ops)
g = lambda k: r.get(k, '-') or '-'
print(r.get('ops_per_s', '-'), g('fences_per_op'), g('sleeps_per_op'), g('kwakes_per_op'),
      g('asleep_handover_pct'), mbop)
PY
	rm -f "$csv"
}

echo "build,load,lock,threads,repeat,ops_per_s,fences_per_op,sleeps_per_op,kwakes_per_op,asleep_handover_pct,membarriers_per_op" >"$out/raw.csv"
for load in idle busy; do
	[ $load = busy ] && hogs_on
	for r in $(seq "$reps"); do
		for lock in $locks; do
			for t in $threads; do
				for kb in "$@"; do
					line=$(one "$kb" "$lock" "$t")
					echo "$kb,$load,$lock,$t,$r,${line// /,}" >>"$out/raw.csv"
				done
			done
		done
	done
	hogs_off
done
python3 - "$out/raw.csv" >>"$out/summary.txt" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
keys = []
for r in rows:
    k = (r['build'], r['load'], r['lock'], r['threads'])
    if k not in keys:
        keys.append(k)
def med(vals):
    v = [float(x) for x in vals if x not in ('-', '', 'nan')]
    return statistics.median(v) if v else float('nan')
print('%-40s %-5s %-10s %4s %9s %10s %9s %9s %6s %10s' % ('build', 'load', 'lock', 'thr', 'ops/s',
      'fence/op', 'sleep/op', 'kwake/op', 'aho%', 'mb/op(bpf)'))
for k in sorted(keys, key=lambda k: (k[1], k[2], int(k[3]), k[0])):
    rs = [r for r in rows if (r['build'], r['load'], r['lock'], r['threads']) == k]
    m = {c: med([r[c] for r in rs]) for c in ('ops_per_s', 'fences_per_op', 'sleeps_per_op',
                                               'kwakes_per_op', 'asleep_handover_pct',
                                               'membarriers_per_op')}
    print('%-40s %-5s %-10s %4s %9.3g %10.6f %9.5f %9.5f %6.2f %10.6f' % (k[0][-40:], k[1], k[2],
          k[3], m['ops_per_s'], m['fences_per_op'], m['sleeps_per_op'], m['kwakes_per_op'],
          m['asleep_handover_pct'], m['membarriers_per_op']))
PY
cat "$out/summary.txt"
