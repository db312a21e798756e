#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Real programs under libklock-preload.so, unmodified, and klock-stat on them.

    preload_programs.py CHECK --preload LIB --stat KLOCK_STAT --smoke PROG
                              [--ctor-shim LIB] [--malloc-shim LIB]

CHECK is one of:
  smoke     tests/preload/preload_smoke.c under every KLOCK_MUTEX/KLOCK_RWLOCK choice (and an
            unknown one, which must warn and carry on): the same output as without it
  shims     the smoke program with a library whose constructor locks before the preload's
            constructor ran, and a malloc that takes a pthread mutex (as jemalloc does)
  attach    the same under every KLOCK_MUTEX choice, with the malloc shim strict (a malloc
            from inside the heap mutex's own lock call aborts): attaching a thread must
            not allocate (a self-deadlock with jemalloc)
  jemalloc  /bin/true and the smoke program with the real libjemalloc.so.2 preloaded, under
            every KLOCK_MUTEX choice, each under a timeout (skipped if not installed)
  sort      coreutils `sort --parallel=2` on a generated file: the same bytes
  xz        `xz -T2` with small blocks (so two threads really work), both directions: the
            same compressed bytes as without the preload, and the input back
  python    a threaded python3 script (the GIL is a pthread mutex + condvar): same output
  stat      klock-stat: names smoke_bump() as the hot mutex's caller (text and JSON),
            --top/--sort/--locks, exit statuses (the command's; 128+signal), a missing
            command, and the Debian programs above under it with their output unchanged

A program that is not installed makes its check exit 77, which meson reports as skipped.
"""
import argparse
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
TIMEOUT = 600
SMOKE_THREADS = '4'
SMOKE_ITERS = '60000'
# Runs of the smoke program before concluding that it never contended.
STAT_ATTEMPTS = 3
SORT_LINES = 300000          # sort uses a second thread from 2 x 128K lines
XZ_BYTES = 6 << 20           # with 512 KiB blocks: a dozen blocks for two threads
PYTHON_SCRIPT = r'''
import threading, queue
q = queue.Queue(maxsize=64)
lock = threading.Lock()
total = [0]
def producer(base):
    for i in range(20000):
        q.put(base + i)
    q.put(None)
def consumer():
    done = 0
    while done < 2:
        x = q.get()
        if x is None:
            done += 1
            continue
        with lock:
            total[0] += x
ts = [threading.Thread(target=producer, args=(b,)) for b in (0, 1000000)]
ts.append(threading.Thread(target=consumer))
for t in ts: t.start()
for t in ts: t.join()
print("python ok", total[0])
'''


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith('KLOCK_') and k != 'LD_PRELOAD'}
    env.update(extra)
    return env


def run(cmd, env, stdin=None, check_rc=0):
    p = subprocess.run(cmd, env=env, stdin=stdin, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=TIMEOUT)
    if check_rc is not None and p.returncode != check_rc:
        sys.stderr.write(p.stderr.decode(errors='replace'))
        raise SystemExit(f'FAIL: {cmd[0]}: exit status {p.returncode}, expected {check_rc}')
    return p


def same(a, b, what):
    if a != b:
        raise SystemExit(f'FAIL: {what}: output differs under the preload '
                         f'({hashlib.sha256(a).hexdigest()[:12]} vs '
                         f'{hashlib.sha256(b).hexdigest()[:12]})')
    print(f'ok: {what}: identical output ({len(a)} bytes)')


def program(name):
    for d in ('/usr/bin', '/bin'):
        p = os.path.join(d, name)
        if os.access(p, os.X_OK):
            return p
    return shutil.which(name)


def check_smoke(a):
    base = run([a.smoke, SMOKE_THREADS, SMOKE_ITERS], clean_env()).stdout
    for mutex in ('adaptive', 'ticket', 'mcs', 'pthread'):
        for rw in ('rwlock', 'pcpu_rwsem', 'pthread'):
            env = clean_env(LD_PRELOAD=a.preload, KLOCK_MUTEX=mutex, KLOCK_RWLOCK=rw)
            same(base, run([a.smoke, SMOKE_THREADS, SMOKE_ITERS], env).stdout,
                 f'smoke KLOCK_MUTEX={mutex} KLOCK_RWLOCK={rw}')
    p = run([a.smoke, SMOKE_THREADS, SMOKE_ITERS],
            clean_env(LD_PRELOAD=a.preload, KLOCK_MUTEX='bogus', KLOCK_RWLOCK='bogus'))
    same(base, p.stdout, 'smoke with unknown KLOCK_MUTEX/KLOCK_RWLOCK')
    err = p.stderr.decode()
    for var in ('KLOCK_MUTEX=bogus', 'KLOCK_RWLOCK=bogus'):
        if var not in err:
            raise SystemExit(f'FAIL: no message about {var}: {err!r}')
    print('ok: unknown implementations are reported:', err.strip().splitlines()[0])


def check_shims(a):
    base = run([a.smoke, SMOKE_THREADS, SMOKE_ITERS], clean_env()).stdout
    with tempfile.TemporaryDirectory() as d:
        env = clean_env(LD_PRELOAD=f'{a.preload}:{a.ctor_shim}:{a.malloc_shim}',
                        KLOCK_LOCKSTAT='1', KLOCK_LOCKSTAT_FILE=os.path.join(d, 'ls.%p'))
        p = run([a.smoke, SMOKE_THREADS, SMOKE_ITERS], env)
        same(base, p.stdout, 'smoke with a locking constructor and a locking malloc')
        if b'ctor-shim: locks ok' not in p.stderr:
            raise SystemExit(f'FAIL: the constructor shim did not run cleanly: {p.stderr!r}')
        reports = os.listdir(d)
        if len(reports) != (1 if a.lockstat else 0):
            raise SystemExit(f'FAIL: expected {a.lockstat} lockstat report(s), found {reports}')
    print('ok: locks before the preload\'s constructor, malloc under a klock mutex')


# A start-up hang is a failure, not a wait for meson's timeout.
HANG_TIMEOUT = 120
# The smoke program's iterations in the start-up checks (start-up is what they test).
STARTUP_ITERS = '5000'
# Runs per selection: the MCS hang with jemalloc showed in one of two runs.
JEMALLOC_RUNS = 3
JEMALLOC_PATHS = ('/usr/lib/x86_64-linux-gnu/libjemalloc.so.2',
                  '/usr/lib/aarch64-linux-gnu/libjemalloc.so.2', '/usr/lib/libjemalloc.so.2')


def run_bounded(cmd, env, what):
    try:
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=HANG_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise SystemExit(f'FAIL: {what}: no exit after {HANG_TIMEOUT} s (hung)')
    if p.returncode != 0:
        sys.stderr.write(p.stderr.decode(errors='replace'))
        raise SystemExit(f'FAIL: {what}: exit status {p.returncode}')
    return p


def check_attach(a):
    base = run([a.smoke, SMOKE_THREADS, STARTUP_ITERS], clean_env()).stdout
    for mutex in ('adaptive', 'ticket', 'mcs'):
        env = clean_env(LD_PRELOAD=f'{a.preload}:{a.ctor_shim}:{a.malloc_shim}',
                        KLOCK_MUTEX=mutex, KLTEST_MALLOC_SHIM_STRICT='1')
        what = f'KLOCK_MUTEX={mutex}: first lock in a constructor, under a locking malloc'
        p = run_bounded([a.smoke, SMOKE_THREADS, STARTUP_ITERS], env, what)
        same(base, p.stdout, what)
        if b'ctor-shim: locks ok' not in p.stderr:
            raise SystemExit(f'FAIL: the constructor shim did not run cleanly: {p.stderr!r}')


def check_jemalloc(a):
    lib = next((p for p in JEMALLOC_PATHS if os.path.exists(p)), None)
    if lib is None:
        print('skip: libjemalloc.so.2 is not installed (Debian: libjemalloc2)')
        raise SystemExit(SKIP)
    base = run([a.smoke, SMOKE_THREADS, STARTUP_ITERS], clean_env()).stdout
    for mutex in ('adaptive', 'ticket', 'mcs', 'pthread'):
        env = clean_env(LD_PRELOAD=f'{a.preload}:{lib}', KLOCK_MUTEX=mutex)
        for i in range(JEMALLOC_RUNS):
            run_bounded(['/bin/true'], env, f'/bin/true with jemalloc, KLOCK_MUTEX={mutex}')
            p = run_bounded([a.smoke, SMOKE_THREADS, STARTUP_ITERS], env,
                            f'smoke with jemalloc, KLOCK_MUTEX={mutex}')
            if p.stdout != base:
                same(base, p.stdout, f'smoke with jemalloc, KLOCK_MUTEX={mutex}')
        print(f'ok: jemalloc, KLOCK_MUTEX={mutex}: /bin/true and smoke x{JEMALLOC_RUNS}')


def check_sort(a):
    sort = program('sort')
    if sort is None:
        return SKIP
    rnd = random.Random(8)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, 'in.txt')
        with open(path, 'w') as f:
            for i in range(SORT_LINES):
                f.write(f'{rnd.getrandbits(48):012x} {i}\n')
        cmd = [sort, '--parallel=2', '-S', '8M', '-T', d, path]
        base = run(cmd, clean_env()).stdout
        same(base, run(cmd, clean_env(LD_PRELOAD=a.preload)).stdout, 'sort --parallel=2')
    return 0


def xz_input():
    rnd = random.Random(9)
    words = [bytes(rnd.choice(b'abcdefghij') for _ in range(rnd.randint(2, 9)))
             for _ in range(3000)]
    out = bytearray()
    while len(out) < XZ_BYTES:
        out += b' '.join(rnd.choice(words) for _ in range(12)) + b'\n'
    return bytes(out[:XZ_BYTES])


def check_xz(a):
    xz = program('xz')
    if xz is None:
        return SKIP
    data = xz_input()
    comp = [xz, '-T2', '-1', '--block-size=512KiB', '-c']
    base = subprocess.run(comp, input=data, stdout=subprocess.PIPE, env=clean_env(),
                          check=True, timeout=TIMEOUT).stdout
    pre = subprocess.run(comp, input=data, stdout=subprocess.PIPE,
                         env=clean_env(LD_PRELOAD=a.preload), check=True,
                         timeout=TIMEOUT).stdout
    same(base, pre, 'xz -T2 compression')
    back = subprocess.run([xz, '-d', '-T2', '-c'], input=pre, stdout=subprocess.PIPE,
                          env=clean_env(LD_PRELOAD=a.preload), check=True,
                          timeout=TIMEOUT).stdout
    same(data, back, 'xz -d -T2 round trip')
    return 0


def python_program():
    return program('python3')


def check_python(a):
    py = python_program()
    if py is None:
        return SKIP
    cmd = [py, '-c', PYTHON_SCRIPT]
    base = run(cmd, clean_env()).stdout
    same(base, run(cmd, clean_env(LD_PRELOAD=a.preload)).stdout, 'threaded python3')
    return 0


def stat_json(a, cmd, *opts, rc=0):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, 'report.json')
        p = run([a.stat, '--preload', a.preload, '--json', '-o', out, *opts, '--', *cmd],
                clean_env(), check_rc=rc)
        with open(out) as f:
            return p, json.load(f)


def callers(report):
    return [c for lock in report['locks'] for c in lock['callers']]


def check_stat_smoke(a):
    for attempt in range(STAT_ATTEMPTS):   # a busy host may run the threads one by one
        p, j = stat_json(a, [a.smoke, SMOKE_THREADS, SMOKE_ITERS])
        assert j['klock_stat'] == 1 and j['status'] == 0, j
        rep = j['processes'][0]['report']
        if rep['contended'] != 0:
            break
    syms = [c['symbol'] or '' for c in callers(rep)]
    if not any(s.startswith('smoke_bump+') for s in syms):
        raise SystemExit(f'FAIL: klock-stat did not name smoke_bump: {syms}')
    hottest = rep['locks'][0]['callers'][0]['symbol']
    print(f'ok: klock-stat --json names the hot mutex\'s caller ({hottest})')
    for attempt in range(STAT_ATTEMPTS):   # a busy host may run the threads one by one
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, 'report.txt')
            run([a.stat, '-o', out, '--', a.smoke, SMOKE_THREADS, SMOKE_ITERS], clean_env())
            text = open(out).read()
        if 'Contended acquisitions: 0,' not in text:
            break
    if 'smoke_bump+0x' not in text or '-- Summary by lock' not in text:
        raise SystemExit(f'FAIL: text report without smoke_bump:\n{text}')
    print('ok: klock-stat text report names smoke_bump')
    _, j = stat_json(a, [a.smoke, SMOKE_THREADS, SMOKE_ITERS], '--top', '1', '--sort',
                     'count', '--locks')
    rep = j['processes'][0]['report']
    if rep['sort'] != 'count' or len(rep['locks']) > 1 or callers(rep):
        raise SystemExit(f'FAIL: --top 1 --sort count --locks not honoured: {rep}')
    print('ok: --top, --sort count, --locks')


def check_stat_status(a):
    for cmd, rc in ((['sh', '-c', 'exit 7'], 7), (['sh', '-c', 'kill -TERM $$'], 128 + 15),
                    (['/nonexistent/klock-stat-test'], 127)):
        p = run([a.stat, '--preload', a.preload, '--', *cmd], clean_env(), check_rc=rc)
    print('ok: klock-stat exits with the command\'s status (7, 143 for SIGTERM, 127)')
    p = run([a.stat, '--', a.smoke, 'bad-args'], clean_env(), check_rc=2)
    print('ok: klock-stat finds the interposer next to itself')


def check_stat_programs(a):
    sort, py = program('sort'), python_program()
    if py is not None:
        p, j = stat_json(a, [py, '-c', PYTHON_SCRIPT])
        if b'python ok' not in p.stdout:
            raise SystemExit('FAIL: python3 under klock-stat')
        rep = j['processes'][0]['report']
        named = [c['symbol'] or c['caller'] for c in callers(rep)]
        print(f'ok: python3 under klock-stat: {len(rep["locks"])} contended locks, '
              f'callers {named[:4]}')
        for c in callers(rep):
            if c['symbol'] is None and c['object'] is None:
                raise SystemExit(f'FAIL: an unsymbolised caller: {c}')
    if sort is not None:
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, 'in.txt')
            rnd = random.Random(10)
            with open(path, 'w') as f:
                f.writelines(f'{rnd.getrandbits(40):010x}\n' for _ in range(SORT_LINES))
            cmd = [sort, '--parallel=2', '-S', '8M', '-T', d, path]
            base = run(cmd, clean_env()).stdout
            p, j = stat_json(a, cmd)
            same(base, p.stdout, 'sort --parallel=2 under klock-stat')


def check_stat(a):
    check_stat_smoke(a)
    check_stat_status(a)
    check_stat_programs(a)
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('check', choices=['smoke', 'shims', 'attach', 'jemalloc', 'sort', 'xz',
                                      'python', 'stat'])
    ap.add_argument('--preload', required=True)
    ap.add_argument('--stat', required=True)
    ap.add_argument('--smoke', required=True)
    ap.add_argument('--ctor-shim')
    ap.add_argument('--malloc-shim')
    ap.add_argument('--lockstat', type=int, default=1,
                    help='0: lockstat is compiled out (no exit reports expected)')
    a = ap.parse_args()
    rc = globals()['check_' + a.check](a)
    sys.exit(rc or 0)


if __name__ == '__main__':
    main()
