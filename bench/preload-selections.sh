#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# Every implementation the interposer can select, under three real programs - the check
# docs/preload.md's "every selection" paragraphs record, as one command. For glibc (no
# preload) and each KLOCK_MUTEX (adaptive, ticket, mcs, pthread; default rwlock) and
# KLOCK_RWLOCK (pcpu_rwsem, pthread; default mutex):
#   redis     redis-server --io-threads 2: a SET then a GET must give the value back;
#             redis-benchmark SET+GET (req/s); then the server's CPU ticks while idle
#   memcached memcached -t 4: a set then a get must give the value back; memaslap for
#             SECS (TPS); then the server's CPU ticks while idle
#   sysbench  sysbench threads --threads=4 --thread-locks=4 for SECS: exit 0 (events)
# Idle ticks are utime+stime (clock ticks, /proc/PID/stat) over IDLE_S seconds after the
# load: a waiter left spinning shows as ~IDLE_S*100 ticks (redis's own timers make a few).
# Exits 1 if any answer is wrong or any program fails. One run each: throughput figures
# here are indications (use bench/preload-programs.sh for A/B medians).
#   bench/preload-selections.sh [PRELOAD]
# SECS (default 2) and IDLE_S (default 2) in the environment. Needs memcached
# libmemcached-tools redis-server redis-tools sysbench (apt-get).
set -euo pipefail
cd "$(dirname "$0")/.."

secs=${SECS:-2} idle=${IDLE_S:-2}
pre=${1:-}
for p in "$pre" build-release/preload/libklock-preload.so build/preload/libklock-preload.so; do
	[ -n "$p" ] && [ -f "$p" ] && { pre=$(realpath "$p"); break; }
done
if [ ! -f "$pre" ]; then
	echo "preload-selections: no libklock-preload.so (build klock first)" >&2
	exit 2
fi
for t in memcached memcaslap redis-server redis-cli redis-benchmark sysbench python3; do
	command -v $t >/dev/null && continue
	echo "preload-selections: $t missing (apt-get install memcached libmemcached-tools" \
		"redis-server redis-tools sysbench)" >&2
	exit 2
done

bad=0
free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}
ticks() { # utime + stime of PID, in clock ticks
	awk '{ print $14 + $15 }' "/proc/$1/stat"
}
idle_ticks() { # PID: the ticks it uses in IDLE_S seconds
	local t0
	t0=$(ticks "$1")
	sleep "$idle"
	echo $(($(ticks "$1") - t0))
}
wait_up() { # COMMAND...: retries it for ~5 s until it succeeds
	for _ in $(seq 50); do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	return 1
}

redis_check() { # ENV...: prints "req/s answer idle-ticks"
	local port pid val ops
	port=$(free_port)
	env "$@" redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
		--io-threads 2 >/dev/null &
	pid=$!
	wait_up redis-cli -p "$port" ping || { echo "- down -"; kill $pid; return; }
	redis-cli -p "$port" set klock-key "v$port" >/dev/null
	val=$(redis-cli -p "$port" get klock-key)
	ops=$(redis-benchmark -p "$port" -q -n 50000 -c 50 -t set,get --csv |
		awk -F'"' '/^"(SET|GET)"/ { s += $4 } END { printf "%d", s }')
	echo "$ops $([ "$val" = "v$port" ] && echo ok || echo WRONG) $(idle_ticks $pid)"
	kill $pid
	wait $pid 2>/dev/null || true
}

memcached_get() { # PORT: set then get a key over the text protocol; prints the value
	python3 - "$1" <<'EOF'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.sendall(b"set klock-key 0 0 5\r\nvalue\r\nget klock-key\r\n")
buf = b""
while not buf.endswith(b"END\r\n"):
    chunk = s.recv(4096)
    if not chunk:
        break
    buf += chunk
lines = buf.split(b"\r\n")
print(lines[2].decode() if len(lines) > 2 and lines[0] == b"STORED" else "none")
EOF
}

memcached_check() { # ENV...: prints "TPS answer idle-ticks"
	local port pid val tps
	port=$(free_port)
	env "$@" memcached -t 4 -p "$port" -U 0 -l 127.0.0.1 -m 64 -u "$(id -un)" &
	pid=$!
	wait_up memcping --servers="127.0.0.1:$port" || { echo "- down -"; kill $pid; return; }
	val=$(memcached_get "$port")
	tps=$(memcaslap -s "127.0.0.1:$port" -T 2 -c 32 -t "${secs}s" 2>&1 |
		sed -n 's/.*TPS: \([0-9]*\).*/\1/p' | tail -1)
	echo "${tps:--} $([ "$val" = value ] && echo ok || echo WRONG) $(idle_ticks $pid)"
	kill $pid
	wait $pid 2>/dev/null || true
}

sysbench_check() { # ENV...: prints "events exit-status"
	local out rc=0
	out=$(env "$@" sysbench threads --threads=4 --thread-locks=4 --time="$secs" run 2>&1) || rc=$?
	echo "$(echo "$out" | sed -n 's/.*total number of events:[[:space:]]*\([0-9]*\).*/\1/p') $rc"
}

selections=("glibc" "KLOCK_MUTEX=adaptive" "KLOCK_MUTEX=ticket" "KLOCK_MUTEX=mcs"
	"KLOCK_MUTEX=pthread" "KLOCK_RWLOCK=pcpu_rwsem" "KLOCK_RWLOCK=pthread")
printf '%-24s %10s %6s %5s  %10s %6s %5s  %10s %4s\n' selection redis-req/s answer idle \
	memcd-TPS answer idle sysb-events rc
for sel in "${selections[@]}"; do
	if [ "$sel" = glibc ]; then envv=(); else envv=("LD_PRELOAD=$pre" "$sel"); fi
	read -r r_ops r_ok r_idle <<<"$(redis_check "${envv[@]}")"
	read -r m_tps m_ok m_idle <<<"$(memcached_check "${envv[@]}")"
	read -r s_ev s_rc <<<"$(sysbench_check "${envv[@]}")"
	printf '%-24s %10s %6s %5s  %10s %6s %5s  %10s %4s\n' "$sel" "$r_ops" "$r_ok" "$r_idle" \
		"$m_tps" "$m_ok" "$m_idle" "${s_ev:--}" "$s_rc"
	[ "$r_ok" = ok ] && [ "$m_ok" = ok ] && [ "$s_rc" = 0 ] && [ -n "$s_ev" ] || bad=1
done
echo "idle: clock ticks in ${idle} s after the load (100 a second = one CPU spinning)"
exit $bad
