#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# One memcached run for bench/preload_ab.py: starts `memcached -t THREADS` on a free local
# port (it inherits LD_PRELOAD, so preload_ab's B side runs the server on klock's locks),
# drives it with memaslap (Debian's `memcaslap`, libmemcached-tools) for SECS seconds with
# LD_PRELOAD removed (the client stays on glibc's locks on both sides), prints the
# client's report (its last "TPS: N" is the figure) and stops the server.
#   bench/ab-memcached.sh [THREADS] [SECS] [CLIENT_THREADS] [CONCURRENCY]
set -euo pipefail

threads=${1:-4} secs=${2:-3} cthreads=${3:-2} conc=${4:-32}
slap=$(command -v memaslap || command -v memcaslap || true)
[ -n "$slap" ] || { echo "ab-memcached: no memaslap/memcaslap (apt-get install libmemcached-tools)" >&2; exit 2; }
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
memcached -t "$threads" -p "$port" -U 0 -l 127.0.0.1 -m 256 -u "$(id -un)" &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT
for _ in $(seq 50); do # up when it answers (at most ~5 s)
	env -u LD_PRELOAD memcping --servers="127.0.0.1:$port" >/dev/null 2>&1 && break
	sleep 0.1
done
env -u LD_PRELOAD "$slap" -s "127.0.0.1:$port" -T "$cthreads" -c "$conc" -t "${secs}s"
