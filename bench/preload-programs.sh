#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# The real programs of the interposer's floors, each A/B'd by bench/preload_ab.py (A = glibc's locks, B =
# LD_PRELOAD=libklock-preload.so, interleaved, the order swapped every round, medians):
# sysbench mutex and threads, pbzip2 -p2, pigz, zstd -T2, memcached -t 4 driven by
# memaslap, redis-server driven by redis-benchmark, and a GIL-bound threaded python3. Prints
# each program's A/B block and a summary table last: the medians' ratio, and under it
# ministat's verdict (Student's t on the runs: worse by how much, and whether that is
# proven, and proven past 5%).
#   bench/preload-programs.sh [-n RUNS] [--env VAR=VALUE] [PRELOAD]
# KLOCK_AB_LINES sets the compressors' input (lines of `seq`, default 14000000: 108 MB).
# PRELOAD defaults to build-release/preload/libklock-preload.so (then build/). Needs
# sysbench pbzip2 pigz zstd memcached libmemcached-tools redis-server redis-tools
# (apt-get). Run it on an idle machine: single runs on a shared 2-vCPU VM move 2x.
set -euo pipefail
cd "$(dirname "$0")/.."

runs=5 envs=()
while [ $# -gt 0 ]; do
	case "$1" in
	-n) runs=$2; shift 2 ;;
	--env) envs+=(--env "$2"); shift 2 ;;
	*) break ;;
	esac
done
pre=${1:-}
for p in "$pre" build-release/preload/libklock-preload.so build/preload/libklock-preload.so; do
	[ -n "$p" ] && [ -f "$p" ] && { pre=$p; break; }
done
[ -f "$pre" ] || { echo "preload-programs: no libklock-preload.so (build klock first)" >&2; exit 2; }
for t in sysbench pbzip2 pigz zstd memcached redis-server redis-benchmark python3; do
	command -v $t >/dev/null || { echo "preload-programs: $t missing (apt-get install sysbench pbzip2 pigz zstd memcached libmemcached-tools redis-server redis-tools python3)" >&2; exit 2; }
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# 108 MB of text: on an idle 2-vCPU VM, zstd -T2 about 0.4 s, pigz 1.6 s, pbzip2 2.5 s
# (with 27 MB, zstd ran 0.1 s and 5 runs could not tell 15% from noise)
seq 1 "${KLOCK_AB_LINES:-14000000}" > "$work/mid.txt"
AB=(python3 bench/preload_ab.py -n "$runs" "${envs[@]}")
summary=()
ab() { # NAME, then preload_ab arguments up to the command
	local name=$1 out
	shift
	echo "== $name"
	out=$("${AB[@]}" "$@")
	echo "$out"
	summary+=("$(printf '%-44s %s\n%44s %s' "$name" \
		"$(echo "$out" | sed -n 's/^ratio B\/A (klock\/glibc) = //p')" "" \
		"$(echo "$out" | sed -n '/^ministat /p')")")
}

ab "sysbench mutex, 2 threads (total time)" --metric rate --lower \
	--pattern 'total time:\s+([0-9.]+)s' "$pre" -- sysbench mutex --threads=2 \
	--mutex-num=1 --mutex-loops=10000 --mutex-locks=200000 run
ab "sysbench threads, 4 thr, 4 locks (events)" --metric rate \
	--pattern 'total number of events:\s+([0-9]+)' "$pre" -- sysbench threads \
	--threads=4 --thread-locks=4 --time=3 run
ab "pbzip2 -p2 -9 (wall)" --metric wall "$pre" -- pbzip2 -p2 -c -9 "$work/mid.txt"
ab "pigz -p 2 (wall)" --metric wall "$pre" -- pigz -p 2 -c "$work/mid.txt"
ab "zstd -T2 -3 (wall)" --metric wall "$pre" -- zstd -T2 -3 -c "$work/mid.txt"
ab "memcached -t 4 + memaslap (TPS)" --metric rate --pattern 'TPS: ([0-9]+)' "$pre" -- \
	bench/ab-memcached.sh 4 3
ab "redis --io-threads 2, SET+GET (req/s)" --metric rate --pattern 'OPS: ([0-9]+)' "$pre" -- \
	bench/ab-redis.sh 2 100000
ab "python3, 4 GIL-bound threads (wall)" --metric wall "$pre" -- python3 bench/gil.py

echo "== summary: klock/glibc, medians of $runs interleaved runs (wall/time: < 1 klock better; events/TPS: > 1 klock better)"
printf '%s\n' "${summary[@]}"
