#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""A/B a command with and without libklock-preload.so, interleaved, medians.

    preload_ab.py [-n RUNS] [--env VAR=VALUE ...] [--metric wall|cpu|mops|rate]
                  [--pattern REGEX [--lower]] PRELOAD -- CMD ...

Runs CMD alternately plain (A, glibc's locks) and with LD_PRELOAD=PRELOAD (B, klock's),
RUNS times each (default 7), the order swapped every round (A B, B A, A B ...: whichever
runs second in a round is not always the same side), so that a noisy machine's drift hits
both sides alike, and
prints each side's runs, medians and the ratio B/A: for `wall` (elapsed seconds, lower is
better) a ratio below 1 means klock is faster; `cpu` is the command's user + system
CPU seconds (lower is better; less disturbed than wall time by other tenants of a
shared machine, but blind to time spent waiting); for `mops` (the last mops= figure that
CMD prints, e.g. bench/pthread-duel) above 1 means klock is faster; `rate` is the last
number that --pattern's first group captures in CMD's stdout (higher is better: a count
of events in a fixed time, memaslap's 'TPS'; with --lower, lower is: sysbench mutex's
'total time'). The command's output is compared between the sides
(it must be identical for `wall` and `cpu`), stdout discarded.
--env adds to both sides (KLOCK_MUTEX=... affects only B).

The medians' ratio alone cannot tell a real 5% from a noisy machine's spread (sysbench
mutex's runs spread +-25% on a 2-vCPU VM), so the runs also go through ministat's
Student's t (`klbench compare`, found next to PRELOAD's build or given with --klbench):
the last line says how much worse klock is, as a percentage of glibc's mean with its
confidence half-width, and whether that is proven (the interval excludes 0) and whether
it is proven past --line percent (default 5: no program should be slower by more).
"""
import argparse
import hashlib
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time


def one(cmd, env, metric, pattern=None):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wall = time.monotonic() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        sys.stderr.write(p.stderr.decode(errors='replace'))
        raise SystemExit(f'preload_ab: {cmd[0]} failed ({p.returncode})')
    if metric == 'mops':
        m = re.findall(rb'mops=([0-9.]+)', p.stdout)
        if not m:
            raise SystemExit('preload_ab: no mops= in the output')
        return float(m[-1]), p.stdout
    if metric == 'rate':
        m = re.findall(pattern.encode(), p.stdout)
        if not m:
            raise SystemExit(f'preload_ab: --pattern {pattern!r} matched nothing')
        return float(m[-1]), p.stdout
    if metric == 'cpu':
        return (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime), p.stdout
    return wall, p.stdout


def find_klbench(preload, given):
    """klbench from --klbench, else the build tree that holds PRELOAD (build/preload/x.so
    -> build/bench/klbench), else None (the verdict is then skipped)."""
    if given:
        return given
    cand = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(preload))),
                        'bench', 'klbench')
    return cand if os.access(cand, os.X_OK) else None


def ministat_diff(klbench, a, b, level):
    """ministat's verdict on B against baseline A: (percent, half-width percent), or
    None when no difference is proven at @level."""
    with tempfile.TemporaryDirectory() as d:
        fa, fb = os.path.join(d, 'glibc'), os.path.join(d, 'klock')
        for f, vs in ((fa, a), (fb, b)):
            with open(f, 'w') as fh:
                fh.write(''.join(f'{v!r}\n' for v in vs))
        out = subprocess.run([klbench, 'compare', '-A', '-c', str(level), fa, fb],
                             stdout=subprocess.PIPE, check=True, text=True).stdout
    m = re.search(r'^\s*(-?[0-9.e+-]+)% \+/- ([0-9.e+-]+)%$', out, re.M)
    if 'No difference proven' in out or m is None:
        return None
    return float(m.group(1)), float(m.group(2))


def verdict(diff, lower_better, level, line):
    """One line: how much worse klock is (percent of glibc's mean), and what is proven."""
    if diff is None:
        return f'ministat ({level}%): no difference proven'
    worse = diff[0] if lower_better else -diff[0]
    if worse - diff[1] > 0:
        past = 'yes' if worse - diff[1] > line else 'not proven'
        return (f'ministat ({level}%): klock worse by {worse:.1f}% +/- {diff[1]:.1f}% '
                f'(proven; past {line:g}%: {past})')
    return f'ministat ({level}%): klock better by {-worse:.1f}% +/- {diff[1]:.1f}% (proven)'


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('-n', '--runs', type=int, default=7)
    ap.add_argument('--env', action='append', default=[])
    ap.add_argument('--metric', choices=['wall', 'cpu', 'mops', 'rate'], default='wall')
    ap.add_argument('--pattern', help="--metric rate: a regex whose first group is the rate")
    ap.add_argument('--lower', action='store_true', help='--metric rate: lower is better')
    ap.add_argument('--klbench', help='klbench for the verdict (default: next to PRELOAD)')
    ap.add_argument('--confidence', type=float, default=95,
                    choices=[80, 90, 95, 98, 99, 99.5], help='the verdict\'s level')
    ap.add_argument('--line', type=float, default=5,
                    help='percent worse that the verdict checks (default 5)')
    ap.add_argument('preload')
    ap.add_argument('cmd', nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == '--' else a.cmd
    if (a.metric == 'rate') != (a.pattern is not None):
        ap.error('--pattern goes with --metric rate (and only with it)')
    base = {k: v for k, v in os.environ.items() if k != 'LD_PRELOAD'}
    for kv in a.env:
        k, v = kv.split('=', 1)
        base[k] = v
    pre = dict(base, LD_PRELOAD=os.path.abspath(a.preload))
    res = {'A': [], 'B': []}
    outs = set()
    for i in range(a.runs):
        sides = (('A', base), ('B', pre))
        for side, env in sides if i % 2 == 0 else sides[::-1]:
            v, out = one(cmd, env, a.metric, a.pattern)
            res[side].append(v)
            if a.metric in ('wall', 'cpu'):
                outs.add(hashlib.sha256(out).hexdigest())
    if len(outs) > 1:
        raise SystemExit('preload_ab: the output differs between runs or sides')
    unit = {'mops': 'Mops/s', 'rate': '(pattern)'}.get(a.metric, 's')
    for side, name in (('A', 'glibc'), ('B', 'klock')):
        print(f'{side} {name:6} median {statistics.median(res[side]):.4f} {unit}  runs: '
              + ' '.join(f'{v:.4f}' for v in res[side]))
    ratio = statistics.median(res['B']) / statistics.median(res['A'])
    better = ratio > 1 if a.metric == 'mops' or (a.metric == 'rate' and not a.lower) \
        else ratio < 1
    print(f'ratio B/A (klock/glibc) = {ratio:.3f} ({"klock" if better else "glibc"} better; '
          f'{a.metric}, medians of {a.runs} interleaved runs)')
    kb = find_klbench(a.preload, a.klbench)
    if kb is not None and a.runs >= 3:
        level = f'{a.confidence:g}'
        lower_better = not (a.metric == 'mops' or (a.metric == 'rate' and not a.lower))
        print(verdict(ministat_diff(kb, res['A'], res['B'], level), lower_better, level,
                      a.line))


if __name__ == '__main__':
    main()
