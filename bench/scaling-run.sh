#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
#
# bench/scaling-run.sh OUTDIR [klbench options...]
#
# The many-core run: builds klbench (release), then sweeps the key workloads from 1
# thread to every CPU (doubling, plus the CPU count itself), with threads placed
# compact and scatter (hwloc), and writes CSV, JSON, raw (ministat) files and SVG plots
# to OUTDIR, plus machine.txt (what it ran on) and summary.txt (every table printed).
# Whatever the CPU count, the sweeps are budgeted to finish in under 8 minutes,
# build included (each part gets a fixed share of seconds; klbench shortens runs to fit).
# Extra arguments go to every klbench call (e.g. -l kl_mutex,pthread_mutex to narrow).
# KLOCK_SCALING_KLBENCH=PATH runs that klbench and builds nothing (a machine without the
# toolchain: carry a release build there, with the libraries it links).
#
#   bash bench/scaling-run.sh /tmp/scaling-$(hostname)
set -euo pipefail

if [ $# -lt 1 ]; then
	echo "usage: bench/scaling-run.sh OUTDIR [klbench options]" >&2
	exit 2
fi
out=$1
shift
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build-scaling
start=$SECONDS
# Seconds each part may use (sum + build < 480). KLOCK_SCALING_SCALE=0.1 shrinks them all
# (a quick check of the script itself; the numbers are then only indicative).
scale=${KLOCK_SCALING_SCALE:-1}
b() { awk -v s="$scale" -v b="$1" 'BEGIN { v = b * s; print (v < 1 ? 1 : v) }'; }
B_MUTEX=$(b 110) B_READ=$(b 110) B_TABLE=$(b 60) B_CROSS=$(b 50) B_RM=$(b 40) B_DUEL=$(b 30)
# A part that overruns its budget by this factor is cut off (the run continues).
GRACE=1.6

mkdir -p "$out"
out=$(cd "$out" && pwd)
kb=${KLOCK_SCALING_KLBENCH:-}
if [ -z "$kb" ]; then
	if [ ! -f "$build/build.ninja" ]; then
		meson setup "$build" "$root" --buildtype=release -Dtests=disabled >/dev/null
	fi
	ninja -C "$build" bench/klbench >/dev/null
	kb=$build/bench/klbench
fi
cpus=$(nproc)
echo "scaling-run: klbench built in $((SECONDS - start)) s; $cpus CPUs; results in $out"

{
	echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "command: bench/scaling-run.sh $out $*"
	echo "git: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
	"$kb" --version
	command -v lscpu >/dev/null && lscpu
	command -v lstopo-no-graphics >/dev/null && lstopo-no-graphics --no-io
	"$kb" list
} >"$out/machine.txt" 2>&1

# part NAME BUDGET klbench-args... : one klbench call, its output into summary.txt
part() {
	local name=$1 budget=$2 t0=$SECONDS rc=0
	shift 2
	echo "== $name (budget ${budget}s): klbench $*" | tee -a "$out/summary.txt"
	timeout "$(awk -v b="$budget" -v g="$GRACE" 'BEGIN { print int(b * g) + 30 }')" \
		"$kb" "$@" 2>&1 | tee -a "$out/summary.txt" || rc=$?
	echo "== $name done in $((SECONDS - t0)) s (exit $rc)" | tee -a "$out/summary.txt"
}

: >"$out/summary.txt"
# The built-in locks among the arguments, comma-separated (klbench refuses unknown ones).
built() {
	local have list=""
	have=$("$kb" list | awk 'NR > 1 && NF == 0 { exit } NR > 1 { print $1 }')
	for l in "$@"; do
		grep -qx "$l" <<<"$have" && list=${list:+$list,}$l
	done
	echo "$list"
}
common=(-q -t "1-cpus*2" -p compact,scatter)
# absl_mutex and tbb_queuing_mutex: the [peers] thread-sweep floor compares kl_mutex with them.
mutexes=$(built kl_mutex kl_ticket kl_mcs kl_rwlock pthread_mutex pthread_mutex_adaptive \
	pthread_spin pthread_rwlock ck_spinlock_ticket ck_spinlock_mcs absl_mutex tbb_queuing_mutex)
part mutex-sweep $B_MUTEX run "${common[@]}" -l "$mutexes" -w 100 --budget $B_MUTEX \
	--csv "$out/mutex-sweep.csv" --json "$out/mutex-sweep.json" --raw "$out/raw-mutex" \
	--plot "$out/mutex-sweep.svg" "$@"
part read-mostly-sweep $B_READ run "${common[@]}" -l rw -w 1 --budget $B_READ \
	--csv "$out/read-mostly-sweep.csv" --json "$out/read-mostly-sweep.json" \
	--raw "$out/raw-read-mostly" --plot "$out/read-mostly-sweep.svg" "$@"
part table-sweep $B_TABLE run "${common[@]}" -l "$(built kl_mutex pthread_mutex kl_hashlock)" \
	--workload table --stripes "1,$((cpus * 4))" -w 100 --budget $B_TABLE \
	--csv "$out/table-sweep.csv" --json "$out/table-sweep.json" \
	--plot "$out/table-sweep.svg" "$@"
part crossover $B_CROSS scenario crossover -q --budget $B_CROSS --out "$out" "$@"
part rmlock-vs-rwlock $B_RM scenario rmlock-vs-rwlock -q --budget $B_RM --out "$out" "$@"
part giant-duel $B_DUEL scenario giant-duel -q --budget $B_DUEL --out "$out" "$@"

echo "scaling-run: done in $((SECONDS - start)) s; see $out/summary.txt and $out/*.svg"
