#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
#
# bench/many-cores-ab.sh OUTDIR
#
# Two builds of klbench side by side on a many-core machine, in one call of at most
# 9 minutes: the FIFO spinlocks, the mutexes and kl_rwlock against their peers, at 1-32
# threads, write-only (and the rwlocks again at 1% writes). Rounds alternate the builds
# (old new, new old, ...), each round one run of every configuration, so drift on the
# machine hits both builds alike; the summary gives per-configuration medians over the
# rounds, new/old, and the many-core floors' ratios for each build against the peers
# measured by that same build's process.
#
# Environment:
#   KLOCK_AB_OLD, KLOCK_AB_NEW  the two klbench commands (default build-old/bench/klbench
#                     and build-release/bench/klbench under this tree; a command may be a
#                     wrapper that starts a carried klbench through a carried loader)
#   KLOCK_AB_THREADS  thread counts (default 1,2,4,8,12,16,24,32)
#   KLOCK_AB_ROUNDS   rounds per build (default 5; fewer if the budget runs out)
#   KLOCK_AB_D        measured seconds per run (default 0.2), KLOCK_AB_WARMUP (0.05)
#   KLOCK_AB_BUDGET   seconds for all rounds (default 480: with start-up and summary
#                     under 9 minutes); a round that would end past it is not started
#   KLOCK_AB_LOCKS_EXCL, KLOCK_AB_LOCKS_RW  override the lock lists (write-only; 1% writes)
#
# Output in OUTDIR: machine.txt (lscpu, both klbench versions and lock lists),
# raw/<old|new>-r<N>-w<pct>.csv (every run), <old|new>.txt (the tables klbench printed),
# summary.txt (medians, new/old, the floors' ratios). A lock one build lacks is skipped
# for that build.
#
#   bash bench/many-cores-ab.sh docs/results/$(date +%F)-16cpu-ab
set -uo pipefail

if [ $# -ne 1 ]; then
	echo "usage: bench/many-cores-ab.sh OUTDIR (see the comment at its top)" >&2
	exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
out=$1
mkdir -p "$out/raw" || exit 1
out=$(cd "$out" && pwd)
start=$SECONDS
old=${KLOCK_AB_OLD:-$root/build-old/bench/klbench}
new=${KLOCK_AB_NEW:-$root/build-release/bench/klbench}
threads=${KLOCK_AB_THREADS:-1,2,4,8,12,16,24,32}
rounds=${KLOCK_AB_ROUNDS:-5}
dur=${KLOCK_AB_D:-0.2}
warm=${KLOCK_AB_WARMUP:-0.05}
budget=${KLOCK_AB_BUDGET:-480}
excl=${KLOCK_AB_LOCKS_EXCL:-kl_ticket,kl_mcs,kl_mutex,kl_rwlock,ck_spinlock_ticket,ck_spinlock_mcs,pthread_mutex,pthread_rwlock,absl_mutex}
rw=${KLOCK_AB_LOCKS_RW:-kl_rwlock,pthread_rwlock}
# A klbench call that runs this many times its expected length is cut off (a lock that
# collapses past the CPU count can hold its threads long after the run's end).
GRACE=3
GRACE_FIXED_S=20

for side in old new; do
	kb=${!side}
	$kb --version >/dev/null 2>&1 || { echo "many-cores-ab: $side klbench '$kb' does not run" >&2; exit 1; }
done

# have KB LIST: the locks of LIST that KB has built in, comma-separated
have() {
	local built l list=
	built=$($1 list | awk 'NR > 1 && NF == 0 { exit } NR > 1 { print $1 }')
	for l in ${2//,/ }; do grep -qx "$l" <<<"$built" && list=${list:+$list,}$l; done
	echo "$list"
}
declare -A locks
for side in old new; do
	locks[$side-w100]=$(have "${!side}" "$excl")
	locks[$side-w1]=$(have "${!side}" "$rw")
done

{
	echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "command: bench/many-cores-ab.sh $out"
	echo "git: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
	echo "threads $threads, rounds $rounds, ${dur} s runs (+${warm} s warm-up), budget ${budget} s"
	for side in old new; do
		rev=$(cat "$(dirname "${!side}")/revision" 2>/dev/null || echo "not recorded")
		echo "$side: ${!side}: $(${!side} --version 2>&1 | head -1), revision $rev"
		echo "  write-only: ${locks[$side-w100]}"
		echo "  1% writes:  ${locks[$side-w1]}"
	done
	command -v lscpu >/dev/null && lscpu
	echo "nproc: $(nproc)"
} >"$out/machine.txt" 2>&1

nthr=$(tr ',' '\n' <<<"$threads" | grep -c .)
n_runs() { tr ',' '\n' <<<"$1" | grep -c .; }
# one SIDE ROUND PCT: one run of every configuration at PCT% writes
one() {
	local side=$1 r=$2 pct=$3 l=${locks[$1-w$3]} n limit
	[ -n "$l" ] || return 0
	n=$(($(n_runs "$l") * nthr))
	limit=$(awk -v n="$n" -v d="$dur" -v w="$warm" -v g=$GRACE -v f=$GRACE_FIXED_S \
		'BEGIN { print int(n * (d + w) * g + f) }')
	echo "# round $r, $side, ${pct}% writes" >>"$out/$side.txt"
	timeout "$limit" ${!side} run -q -l "$l" -t "$threads" -w "$pct" -r 1 -d "$dur" \
		--warmup "$warm" --csv "$out/raw/$side-r$r-w$pct.csv" >>"$out/$side.txt" 2>&1 ||
		echo "# exit $? (limit ${limit} s)" >>"$out/$side.txt"
}
done_rounds=0
for r in $(seq 1 "$rounds"); do
	t0=$SECONDS
	order="old new"
	[ $((r % 2)) -eq 0 ] && order="new old"
	for side in $order; do
		one "$side" "$r" 100
		one "$side" "$r" 1
	done
	done_rounds=$r
	took=$((SECONDS - t0))
	echo "many-cores-ab: round $r in $took s ($((SECONDS - start)) s so far)"
	if [ $((SECONDS - start + took)) -gt "$budget" ]; then
		[ "$r" -lt "$rounds" ] && echo "many-cores-ab: stopping after $r rounds (budget ${budget} s)"
		break
	fi
done

# ---- summary: medians over the rounds, by the CSV's own column names -----------------
summarise() {
	awk -F, -v rounds="$done_rounds" '
	function med(s,   n, a, i, j, t) {
		n = split(s, a, " ")
		for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) {
			t = a[j]; a[j] = a[j - 1]; a[j - 1] = t
		}
		if (n == 0) return ""
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	function fmt(v) {
		if (v == "") return "-"
		if (v >= 1e6) return sprintf("%.2fM", v / 1e6)
		if (v >= 1e3) return sprintf("%.1fk", v / 1e3)
		return sprintf("%.0f", v)
	}
	FNR == 1 {
		np = split(FILENAME, p, "/"); fn = p[np]; side = substr(fn, 1, index(fn, "-") - 1)
		delete col
		for (i = 1; i <= NF; i++) col[$i] = i
		for (i = 1; i <= NF; i++) if ($i ~ /_per_|handover/ && $i != "ops_per_s" && $i != "retries_per_read" && !($i in cnt)) { cnt[$i] = 1; cnames[++ncnt] = $i }
		next
	}
	{
		k = $col["lock"] SUBSEP $col["write_pct"] SUBSEP $col["threads"]
		if (!(k in seen)) { seen[k] = 1; keys[++nk] = k }
		ops[side, k] = ops[side, k] " " $col["ops_per_s"]
		for (c in cnt) if (c in col) val[side, k, c] = val[side, k, c] " " $col[c]
	}
	END {
		printf "# medians of %d rounds per build; new/old of the medians\n", rounds
		printf "%-20s %4s %4s %9s %9s %7s", "lock", "wr%", "thr", "old ops/s", "new ops/s", "new/old"
		for (i = 1; i <= ncnt; i++) printf " %14s", "old " cnames[i]
		for (i = 1; i <= ncnt; i++) printf " %14s", "new " cnames[i]
		printf "\n"
		for (i = 1; i <= nk; i++) {
			split(keys[i], f, SUBSEP)
			o = med(ops["old", keys[i]]); n = med(ops["new", keys[i]])
			mo["old", keys[i]] = o; mo["new", keys[i]] = n
			printf "%-20s %4s %4s %9s %9s %7s", f[1], f[2], f[3], fmt(o), fmt(n),
				(o > 0 && n != "") ? sprintf("%.2f", n / o) : "-"
			for (s = 0; s < 2; s++) for (j = 1; j <= ncnt; j++) {
				v = med(val[s ? "new" : "old", keys[i], cnames[j]])
				printf " %14s", v == "" ? "-" : sprintf("%.4f", v)
			}
			printf "\n"
		}
		printf "\n# the many-core floors, each build against the peers its own process measured\n"
		printf "%4s  %-34s %8s %8s  %s\n", "thr", "ratio", "old", "new", "floor"
		nr = split("kl_ticket/ck_spinlock_ticket/100/0.9 kl_mcs/ck_spinlock_mcs/100/0.9 " \
			"kl_rwlock/kl_mutex/100/0.8 kl_mutex/pthread_mutex/100/2 " \
			"kl_rwlock/pthread_rwlock/1/-", rs, " ")
		for (i = 1; i <= nk; i++) {
			split(keys[i], f, SUBSEP)
			if (f[1] != "kl_ticket" && f[1] != "kl_rwlock") continue
			t = f[3]
			if (t in tdone) continue
			tdone[t] = 1
			for (j = 1; j <= nr; j++) {
				split(rs[j], q, "/")
				a = q[1] SUBSEP q[3] SUBSEP t; b = q[2] SUBSEP q[3] SUBSEP t
				if (!(a in seen) || !(b in seen)) continue
				printf "%4s  %-34s", t, q[1] "/" q[2] " w" q[3]
				for (s = 0; s < 2; s++) {
					x = mo[s ? "new" : "old", a]; y = mo[s ? "new" : "old", b]
					printf " %8s", (x != "" && y > 0) ? sprintf("%.2fx", x / y) : "-"
				}
				printf "  %s\n", q[4] == "-" ? "-" : ">= " q[4] "x"
			}
		}
	}' "$@"
}
files=("$out"/raw/*.csv)
if [ -e "${files[0]}" ]; then
	summarise "${files[@]}" >"$out/summary.txt"
	cat "$out/summary.txt"
else
	echo "many-cores-ab: no run finished" | tee "$out/summary.txt"
fi
echo "many-cores-ab: $done_rounds rounds in $((SECONDS - start)) s; results in $out"
