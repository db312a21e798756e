#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# One redis run for bench/preload_ab.py, like bench/ab-memcached.sh: starts redis-server
# (--io-threads THREADS, no persistence) on a free local port - it inherits LD_PRELOAD, so
# preload_ab's B side runs the server on klock's locks - drives it with redis-benchmark
# (LD_PRELOAD removed: the client stays on glibc's locks on both sides) for REQUESTS SET
# and GET requests, prints "OPS: N" (SET and GET requests per second, summed) and stops
# the server.
#   bench/ab-redis.sh [THREADS] [REQUESTS] [CLIENTS]
set -euo pipefail

threads=${1:-2} reqs=${2:-100000} clients=${3:-50}
command -v redis-server >/dev/null || { echo "ab-redis: no redis-server (apt-get install redis-server redis-tools)" >&2; exit 2; }
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
	--io-threads "$threads" >/dev/null &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT
for _ in $(seq 50); do # up when it answers (at most ~5 s)
	env -u LD_PRELOAD redis-cli -p "$port" ping >/dev/null 2>&1 && break
	sleep 0.1
done
env -u LD_PRELOAD redis-benchmark -p "$port" -q -n "$reqs" -c "$clients" -t set,get --csv |
	awk -F'"' '/^"(SET|GET)"/ { s += $4 } END { printf "OPS: %d\n", s }'
