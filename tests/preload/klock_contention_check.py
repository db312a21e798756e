#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""klock-contention on a running program, against klock-stat on the same run.

    klock_contention_check.py --tool KLOCK_CONTENTION --stat KLOCK_STAT --target TARGET

TARGET (tests/preload/contention_target.c) runs under klock-stat (the interposer, lockstat on) and
waits for SIGUSR1. klock-contention attaches to it by pid; once it says it is tracing, the
target contends contention_lock from contention_worker_loop(), says "done" and waits for
a second SIGUSR1 to exit. Checked:
  - the first table with contention (the tool prints one a second) names the lock
    (contention_lock, the name klock-stat gives it too) and the caller
    (contention_worker_loop);
  - the last table's contended count for that lock agrees with klock-stat's exit report
    of the same run within 10 %.
Skipped (exit 77, with the reason) where uprobes cannot be attached: not root, no
bpftrace, no uprobe support in the kernel.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

SKIP = 77
# How far the two counts may differ (the floor): 10 %.
TOLERANCE = 0.10
# Seconds the whole check may take before it is a failure (a hang, not a timing).
DEADLINE = 120
LOCK = 'contention_lock'
CALLER = 'contention_worker_loop'


def skip(why):
    print(f'SKIP: {why}')
    sys.exit(SKIP)


def fail(why):
    print(f'FAIL: {why}')
    sys.exit(1)


def why_not_traceable():
    if os.geteuid() != 0:
        return 'uprobes need root (run the suite as root, as CI does)'
    if shutil.which('bpftrace') is None:
        return 'bpftrace is not installed (Debian: bpftrace)'
    if not os.path.exists('/sys/bus/event_source/devices/uprobe'):
        return 'the kernel offers no uprobe event source (CONFIG_UPROBE_EVENTS)'
    return None


def tables(text):
    """Each table of the tool's output: a list of (count, lock, caller) rows."""
    out, rows = [], None
    for line in text.splitlines():
        if line.startswith('klock-contention: pid ') and line.endswith(' s'):
            rows = []
            out.append(rows)
        elif rows is not None and line.split() and line.split()[0].isdigit():
            f = line.split()
            # contended, total (2 words), avg (2), max (2), kind, lock, caller
            rows.append((int(f[0]), f[8], ' '.join(f[9:])))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--tool', required=True)
    ap.add_argument('--stat', required=True)
    ap.add_argument('--target', required=True)
    a = ap.parse_args()
    why = why_not_traceable()
    if why:
        skip(why)
    with tempfile.TemporaryDirectory() as d:
        report = os.path.join(d, 'stat.json')
        target = subprocess.Popen([a.stat, '--json', '-o', report, '--', a.target],
                                  stdout=subprocess.PIPE, text=True)
        ready = target.stdout.readline().split()
        if len(ready) != 2 or ready[0] != 'ready':
            fail(f'the target did not start: {ready}')
        pid = int(ready[1])
        tool = subprocess.Popen([a.tool, '-p', str(pid)], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        seen = []
        for line in tool.stdout:
            seen.append(line)
            if line.startswith('klock-contention: tracing'):
                break
        else:
            target.kill()
            text = ''.join(seen)
            if 'Operation not permitted' in text or 'Permission denied' in text:
                skip(f'bpftrace could not attach here: {text.strip()}')
            fail(f'klock-contention did not start tracing: {text}')
        os.kill(pid, signal.SIGUSR1)
        first = None
        for line in tool.stdout:   # until a table with a row (its first one)
            seen.append(line)
            tabs = [t for t in tables(''.join(seen)) if t]
            if tabs:
                first = tabs[0]
                break
        done = target.stdout.readline()
        if not done.startswith('done'):
            fail(f'the target did not finish its contended phase: {done!r}')
        os.kill(pid, signal.SIGUSR1)   # now exit: klock-stat writes its report
        try:
            rest, _ = tool.communicate(timeout=DEADLINE)
            target.communicate(timeout=DEADLINE)
        except subprocess.TimeoutExpired:
            tool.kill()
            target.kill()
            fail('klock-contention or the target did not finish')
        text = ''.join(seen) + rest
        print(text)
        tabs = [t for t in tables(text) if t]
        if first is None or not tabs:
            fail('klock-contention printed no contention')
        if not any(lk == LOCK and caller == CALLER for _, lk, caller in first):
            fail(f'the first table does not name {LOCK} and {CALLER}: {first}')
        tool_count = sum(c for c, lk, _ in tabs[-1] if lk == LOCK)
        with open(report) as f:
            rep = json.load(f)['processes'][0]['report']
        stat_count = sum(lk['contended'] for lk in rep['locks'] if lk['name'] == LOCK)
        if stat_count == 0:
            fail(f'klock-stat saw no contention on {LOCK}')
        diff = abs(tool_count - stat_count) / stat_count
        print(f'{LOCK}: klock-contention {tool_count}, klock-stat {stat_count} contended '
              f'({diff:.2%} apart)')
        if diff > TOLERANCE:
            fail(f'the counts differ by more than {TOLERANCE:.0%}')
    print('ok: klock-contention names the lock and its caller, and counts as klock-stat')


if __name__ == '__main__':
    main()
