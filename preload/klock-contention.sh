#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# klock-contention - contended klock locks of a running process, per lock and per caller,
# from klock's static probes (bpftrace). See klock-contention(1).
#   klock-contention -p PID [-d SECONDS] [-i SECONDS]
set -eu

me=klock-contention
usage() {
	echo "usage: $me -p PID [-d SECONDS] [-i SECONDS]" >&2
	exit 2
}
die() {
	echo "$me: $*" >&2
	exit 1
}

pid='' duration=0 interval=1
while getopts p:d:i:h opt; do
	case $opt in
	p) pid=$OPTARG ;;
	d) duration=$OPTARG ;;
	i) interval=$OPTARG ;;
	*) usage ;;
	esac
done
case $pid in '' | *[!0-9]*) usage ;; esac
case $duration in '' | *[!0-9]*) usage ;; esac
case $interval in '' | *[!0-9]* | 0) usage ;; esac

# The bpftrace program: next to this script (build tree), else the installed data folder.
here=$(cd "$(dirname "$0")" && pwd)
script=${KLOCK_CONTENTION_BT:-}
for c in "$here/klock-contention.bt" "$here/../share/klock/klock-contention.bt" \
	"@DATADIR@/klock/klock-contention.bt"; do
	[ -z "$script" ] && [ -f "$c" ] && script=$c
done
[ -n "$script" ] || die "klock-contention.bt not found (next to $0 or in @DATADIR@/klock)"

command -v bpftrace >/dev/null 2>&1 || die "bpftrace is not installed (Debian: bpftrace)"
[ "$(id -u)" -eq 0 ] || die "uprobes need root (or CAP_BPF and CAP_PERFMON)"
[ -r "/proc/$pid/maps" ] || die "no process $pid (or its maps cannot be read)"

# The klock objects the process has mapped: their probes, attached for this pid only.
libs=$(awk '$6 ~ /\/libklock(-preload)?\.so[.0-9]*$/ { print $6 }' "/proc/$pid/maps" | sort -u)
[ -n "$libs" ] || die "process $pid has neither libklock.so nor libklock-preload.so mapped"
points=''
for l in $libs; do
	readelf -n "$l" 2>/dev/null | grep -q 'Provider: klock' ||
		die "$l has no klock probes (built with -Dprobes=disabled, or no sys/sdt.h)"
	points="$points${points:+, }usdt:$l:klock:\\1"
done

prog=$(sed -e "s#KLOCK_PROBE(\([a-z_]*\))#$points#" -e "s/KLOCK_INTERVAL/$interval/g" \
	-e "s/KLOCK_DURATION/$duration/g" "$script")
echo "$me: pid $pid, probes in: $(echo $libs)" >&2

# mawk reads a pipe in blocks unless told otherwise: the tables would come late.
awk_interactive=''
awk -W version 2>&1 | grep -q mawk && awk_interactive='-W interactive'

# bpftrace prints each report as maps: @cnt[lock, kind, caller, caller's function]: N (and @sum, @max in ns,
# @name[lock]: text). The awk turns each into one table, busiest lock first.
bpftrace -B line -p "$pid" -e "$prog" 2>&1 | awk $awk_interactive -v pid="$pid" '
function fmt(ns) {
	ns += 0
	if (ns >= 1e9) return sprintf("%.2f s", ns / 1e9)
	if (ns >= 1e6) return sprintf("%.2f ms", ns / 1e6)
	if (ns >= 1e3) return sprintf("%.2f us", ns / 1e3)
	return sprintf("%d ns", ns)
}
BEGIN {
	split("mutex rwlock rmlock pcpu_rwsem seqlock ticket mcs hashlock cond", kinds, " ")
}
/^klock-contention: tracing/ { print; fflush(); next }
/^=== report/ { in_rep = 1; secs = $3; delete cnt; delete sum; delete mx; n = 0; next }
/^=== end/ {
	in_rep = 0
	printf("\n%s: pid %s, %d s\n", "klock-contention", pid, secs)
	printf("%10s %12s %12s %12s  %-10s %-24s %s\n", "contended", "total wait",
	       "avg wait", "max wait", "kind", "lock", "caller")
	for (i = 0; i < n; i++) order[i] = keys[i]
	# busiest first (insertion sort: a handful of rows)
	for (i = 1; i < n; i++) {
		k = order[i]
		for (j = i - 1; j >= 0 && cnt[order[j]] < cnt[k]; j--) order[j + 1] = order[j]
		order[j + 1] = k
	}
	for (i = 0; i < n; i++) {
		k = order[i]
		split(k, f, SUBSEP)
		lk = (f[1] in name) ? name[f[1]] : sprintf("0x%x", f[1])
		kd = (f[2] + 1 in kinds) ? kinds[f[2] + 1] : "lock"
		printf("%10d %12s %12s %12s  %-10s %-24s %s\n", cnt[k], fmt(sum[k]),
		       fmt(sum[k] / cnt[k]), fmt(mx[k]), kd, lk, f[3])
	}
	fflush()
	next
}
in_rep && /^@(cnt|sum|max)\[/ {
	map = substr($0, 2, 3)
	line = $0
	sub(/^@[a-z]*\[/, "", line)
	val = line
	sub(/.*\]: /, "", val)
	sub(/\]: [0-9]*$/, "", line)
	# the key: lock, kind, caller, its function (which may itself hold ", ")
	c1 = index(line, ", "); lockv = substr(line, 1, c1 - 1); rest = substr(line, c1 + 2)
	c2 = index(rest, ", "); kindv = substr(rest, 1, c2 - 1); rest = substr(rest, c2 + 2)
	c3 = index(rest, ", "); site = substr(rest, 1, c3 - 1); caller = substr(rest, c3 + 2)
	# once the process is gone bpftrace cannot name a caller: keep the name it had
	if (caller !~ /^0x/) fn[site] = caller
	else if (site in fn) caller = fn[site]
	k = lockv SUBSEP kindv SUBSEP caller
	if (map == "cnt") { if (!(k in cnt)) keys[n++] = k; cnt[k] = val }
	else if (map == "sum") sum[k] = val
	else mx[k] = val
	next
}
in_rep && /^@name\[/ {
	line = $0
	sub(/^@name\[/, "", line)
	a = line; sub(/\]: .*/, "", a)
	v = line; sub(/^[0-9]*\]: /, "", v)
	name[a] = v
	next
}
/^Attaching|^$|RLIMIT_MEMLOCK/ { next }
{ print > "/dev/stderr" }
'
