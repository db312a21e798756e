#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
#
# tests/lockstat_callgrind.sh - proves that lockstat costs an uncontended fast path
# nothing: the instructions executed by N lock+unlock pairs, counted by callgrind, are the
# same with lockstat compiled out (-Dlockstat=false), compiled in but stopped, and
# compiled in and recording (an uncontended acquisition never reaches a slow path), and
# the same with the static probes compiled out (-Dprobes=disabled; the other builds have
# them where <sys/sdt.h> is installed): probes sit on slow paths only. The
# hold-time build (-Dlockstat_hold=true), which instruments fast paths on purpose, is
# shown for comparison and not held to that rule.
#
# usage: tests/lockstat_callgrind.sh [ADAPTER[:VARIANT] ...]
#   ADAPTER: a klock adapter of bench/lockops (kl_mutex, kl_rwlock, ...) or the test-only
#   "seamlock"; VARIANT: read (the shared side), try, timed, read-try, read-timed (those
#   entry points, uncontended); default: every adapter the driver lists, plain lock.
# env:   KLOCK_CG_DIR (build directory prefix, default build-cg), N1, N2 (pair counts).
#
# How: four release builds of tests/lockstat-fastpath; each count is callgrind's
# "summary" with --toggle-collect=fastpath_loop (only that loop, after a warm-up, is
# counted); per pair = (count(N2) - count(N1)) / (N2 - N1). Exit status 1 if any lock's
# counts differ between the three non-hold columns. Takes about a minute (builds first).
set -euo pipefail
cd "$(dirname "$0")/.."

DIR=${KLOCK_CG_DIR:-build-cg}
N1=${N1:-1000}
N2=${N2:-11000}
DRIVER=tests/lockstat-fastpath

command -v valgrind >/dev/null || { echo "lockstat_callgrind: valgrind is not installed" >&2; exit 2; }

build() { # dir, meson options...
	local dir=$1
	shift
	if [ ! -f "$dir/build.ninja" ]; then
		meson setup "$dir" --buildtype=release -Dtests=enabled -Dbench=disabled "$@" >/dev/null
	fi
	ninja -C "$dir" "$DRIVER" >/dev/null
}

build "$DIR-out" -Dlockstat=false
build "$DIR-in" -Dlockstat=true
build "$DIR-noprobe" -Dlockstat=true -Dprobes=disabled
build "$DIR-hold" -Dlockstat=true -Dlockstat_hold=true

# count DIR ADAPTER N MODE: instructions executed inside fastpath_loop.
count() {
	local out
	out=$(mktemp)
	valgrind --tool=callgrind --toggle-collect=fastpath_loop --callgrind-out-file="$out" \
		"$1/$DRIVER" "$2" "$3" cg "$4" >/dev/null 2>&1
	sed -n 's/^summary: *\([0-9]*\).*/\1/p' "$out"
	rm -f "$out"
}

# cell DIR ADAPTER MODE: "total@N2 per-pair"
cell() {
	local a b
	a=$(count "$1" "$2" "$N1" "$3")
	b=$(count "$1" "$2" "$N2" "$3")
	echo "$b $(( (b - a) / (N2 - N1) ))"
}

adapters=("$@")
if [ ${#adapters[@]} -eq 0 ]; then
	mapfile -t adapters < <("$DIR-in/$DRIVER" list)
fi

echo "callgrind Ir inside fastpath_loop: $N2 uncontended lock+unlock pairs (per pair in brackets)"
printf '%-22s %-18s %-18s %-18s %-18s %-18s %-18s %s\n' adapter "compiled out" "in, stopped" \
	"in, recording" "in, no probes" "hold, stopped" "hold, recording" verdict
status=0
for a in "${adapters[@]}"; do
	read -r o_t o_p < <(cell "$DIR-out" "$a" off)
	read -r s_t s_p < <(cell "$DIR-in" "$a" off)
	read -r r_t r_p < <(cell "$DIR-in" "$a" on)
	read -r n_t n_p < <(cell "$DIR-noprobe" "$a" off)
	read -r hs_t hs_p < <(cell "$DIR-hold" "$a" off)
	read -r hr_t hr_p < <(cell "$DIR-hold" "$a" on)
	verdict=identical
	if [ "$o_t" != "$s_t" ] || [ "$o_t" != "$r_t" ] || [ "$o_t" != "$n_t" ] || [ -z "$o_t" ]; then
		verdict=DIFFERENT
		status=1
	fi
	printf '%-22s %-18s %-18s %-18s %-18s %-18s %-18s %s\n' "$a" "$o_t [$o_p]" "$s_t [$s_p]" \
		"$r_t [$r_p]" "$n_t [$n_p]" "$hs_t [$hs_p]" "$hr_t [$hr_p]" "$verdict"
done
exit $status
