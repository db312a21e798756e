#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""klock-stat on a scripted program (tests/preload/stat_target.c): what a user relies on.

    klock_stat_checks.py CHECK --stat KLOCK_STAT --preload LIB --target STAT_TARGET

CHECK is one of:
  signal  a SIGTERM or SIGINT sent to klock-stat itself (how people stop a server they
          profile) reaches the command, the report is still printed, klock-stat exits
          128+signal, and no temporary folder is left behind
  setuid  a command that changes its user id (setpriv --reuid=nobody, as servers drop
          privileges) still gets its report (root only: skipped otherwise)
  sites   call sites are the program's: contended jemalloc arena mutexes are charged to
          the program's function, not to libjemalloc.so.2 (skipped without jemalloc); a
          wait inside an allocator with no program frame on the stack (a TSD destructor at
          thread exit, tests/preload/stat_exit_shim.c) is charged to libc's thread-exit code, not
          to the allocator; and a stripped program that rewrites argv[0] (setproctitle) is
          named by its file

  names   locks in static storage are named from the symbol table (target_lock,
          target_locks[N]); -M folds the 64-mutex array into one row target_locks[*] with
          the summed counts, -m folds a function's call sites into one caller row

  first_use  heap mutexes never initialised by a call (calloc()ed zeroes, tests/preload/stat_target.c
          --heap-static) are labelled by their first lock call, first@target_first_use+0x..,
          while the static locks the program also adopts on first use keep their symbol
          names (target_lock); -M folds the heap ones into one row first@...[*] with the
          summed counts

  window  -d SECONDS reports only what happened inside the window: the target contends
          one lock before the window closes and another after (it waits for the
          window's snapshot), and only the first is in the report

  hist    -H: the report carries a log2 histogram of each lock's waits: target_lock's one
          wait is in the bucket of its length (JSON wait_hist), and the text report draws it

  attach  klock-stat --attach PID on a target started under the interposer with
          KLOCK_LOCKSTAT set (not by klock-stat): the attach channel answers a raw "report"
          with the target's contention so far; klock-stat --attach -d resets at attach and
          reports only the interval (target_lock's contention, before the attach, is gone;
          the elapsed time is shorter than the target's life)

  filter  -L PATTERN keeps only the locks it names (target_locks[N], not target_lock),
          -F PATTERN only the call sites in the functions it names; --sort avg is passed on

  empty   -j always writes one JSON document: when no process of the command wrote a
          report (a missing command, a static program, one that a signal killed, also
          with -d or --all) it is an object with an empty processes list, and the note
          that no report came back goes to standard error

  where   every JSON caller, holder and stack frame carries its object's path and its
          offset there: addr2line -f -e OBJECT OFFSET names the function the symbol
          field names, and in a stripped copy of the program (symbol null) the pair is
          still there, the text report's file+offset

  fast_exit  a program that leaves by _exit() or _Exit() (skipping atexit) while another
          thread still holds a lock still gets its report, in JSON and in text, under its
          own pid, with the contention it recorded (target_lock)

  cpp     a C++ program's (tests/preload/stat_target_cpp.cpp) lock and caller are demangled in the
          text and JSON reports (tpool::thread_pool::lock_,
          tpool::thread_pool::set_concurrency(unsigned int)+0x..), JSON keeps the mangled
          names in "mangled", and -F / -L patterns select the demangled names (and still
          the mangled ones)

A check whose tool is missing exits 77 (meson: skipped).
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SKIP = 77
# Generous: the machine may be shared and loaded (KLTEST_SCALE stretches it further).
TIMEOUT = 120 * float(os.environ.get('KLTEST_SCALE', '1') or 1)
# Runs of a contention-dependent program before concluding that it never contended.
ATTEMPTS = 3
# The runtime a wait with no program frame is charged to (basename prefixes).
RUNTIME_OBJECTS = ('libc.so', 'ld-linux', 'libstdc++', 'libgcc_s')
JEMALLOC_PATHS = ('/usr/lib/x86_64-linux-gnu/libjemalloc.so.2',
                  '/usr/lib/aarch64-linux-gnu/libjemalloc.so.2', '/usr/lib/libjemalloc.so.2')


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith('KLOCK_') and k != 'LD_PRELOAD'}
    env.update(extra)
    return env


def fail(msg):
    raise SystemExit('FAIL: ' + msg)


def stat_cmd(a, *opts):
    return [a.stat, '--preload', a.preload, *opts, '--']


def callers(report):
    return [c for lock in report['locks'] for c in lock['callers']]


def run_json(a, cmd, env, *opts, rc=0):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, 'r.json')
        p = subprocess.run(stat_cmd(a, '--json', '-o', out, *opts) + cmd, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=TIMEOUT)
        if p.returncode != rc:
            sys.stderr.write(p.stderr.decode(errors='replace'))
            fail(f'{cmd}: klock-stat exit status {p.returncode}, expected {rc}')
        if not os.path.exists(out):
            fail(f'{cmd}: no report written: {p.stderr.decode(errors="replace")}')
        with open(out) as f:
            text = f.read()
        try:
            return json.loads(text)
        except ValueError:
            fail(f'{cmd}: not JSON: {text[:400]!r}')


# ---- signal ----------------------------------------------------------------------------

def stop_server(a, sig, tmp):
    """Starts klock-stat on a server-like target, signals klock-stat, returns its output."""
    out, errf = os.path.join(tmp, 'report.txt'), os.path.join(tmp, 'stderr.txt')
    env = clean_env(TMPDIR=tmp)
    with open(errf, 'wb') as ef:
        p = subprocess.Popen(stat_cmd(a, '-o', out) + [a.target, '--serve'], env=env,
                             stdout=subprocess.PIPE, stderr=ef)
    line = p.stdout.readline().split()
    target = int(line[1]) if len(line) == 2 and line[0] == b'ready' else None
    try:
        if target is None:
            p.kill()
            fail(f'the target did not start: {line!r} {open(errf).read()!r}')
        p.send_signal(sig)
        try:
            rc = p.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            p.kill()
            fail(f'klock-stat did not end after {sig.name} (not forwarded to the command?)')
        if p.returncode < 0:
            fail(f'klock-stat itself died of {sig.name}: no report, the command left running')
    finally:
        if target is not None:
            try:
                os.kill(target, signal.SIGKILL)   # only if it outlived klock-stat
            except ProcessLookupError:
                pass
        p.stdout.close()
    err = open(errf).read()
    os.unlink(errf)
    text = open(out).read() if os.path.exists(out) else ''
    return rc, text, err


def check_signal(a):
    for sig in (signal.SIGTERM, signal.SIGINT):
        with tempfile.TemporaryDirectory() as tmp:
            rc, text, err = stop_server(a, sig, tmp)
            left = [e for e in os.listdir(tmp) if e != 'report.txt']
        if rc != 128 + sig:
            fail(f'{sig.name}: exit status {rc}, expected {128 + sig} (the command\'s)')
        if 'target_wait_static+0x' not in text:
            fail(f'{sig.name}: no report naming target_wait_static: {text!r} {err!r}')
        if left:
            fail(f'{sig.name}: klock-stat left {left} in TMPDIR')
        print(f'ok: {sig.name} to klock-stat: forwarded (status {rc}), report printed, '
              'no folder left')
    return 0


# ---- setuid ----------------------------------------------------------------------------

def check_setuid(a):
    setpriv = shutil.which('setpriv')
    if os.geteuid() != 0 or setpriv is None:
        print('skip: needs root and setpriv (util-linux)')
        return SKIP
    cmd = [setpriv, '--reuid=nobody', '--regid=nogroup', '--clear-groups', a.target]
    j = run_json(a, cmd, clean_env())
    procs = [p for p in j['processes'] if any(c['symbol'] and
             c['symbol'].startswith('target_wait_static+') for c in callers(p['report']))]
    if not procs:
        fail(f'no report from the process that dropped privileges: {j}')
    print('ok: a command that dropped root for nobody still reports '
          f'(pid {procs[0]["pid"]}, {procs[0]["report"]["contended"]} contended)')
    return 0


# ---- sites -----------------------------------------------------------------------------

def check_jemalloc(a):
    lib = next((p for p in JEMALLOC_PATHS if os.path.exists(p)), None)
    if lib is None:
        print('skip: jemalloc is not installed (Debian: libjemalloc2)')
        return False
    for _ in range(ATTEMPTS):   # a busy host may run the churning threads one by one
        j = run_json(a, [a.target, '--malloc'], clean_env(LD_PRELOAD=lib))
        rep = j['processes'][0]['report']
        # Only contended acquisitions are charged past allocator frames (a slow-path
        # stack walk): -Dlockstat_hold=true builds also list every uncontended one.
        cs = [c for c in callers(rep) if c.get('contended', 0) > 0]
        if sum(1 for lk in rep['locks'] if lk.get('contended', 0) > 0) > 1:
            break
    else:
        print('skip: jemalloc\'s mutexes never contended in '
              f'{ATTEMPTS} runs: {[c["symbol"] for c in cs]}')
        return False
    for c in cs:
        if 'jemalloc' in (c['symbol'] or '') or 'jemalloc' in (c['object'] or ''):
            fail(f'a wait charged to jemalloc, not to the program: {c}')
    # A wait with no program frame on its stack (jemalloc's thread-exit flush, its
    # constructor) is charged to the runtime code that called the allocator (libc, ld.so):
    # check_exit_wait pins that case down; here only the program's own rows are checked.
    prog = [c for c in cs if c['object'] == a.target]
    others = [c for c in cs if c['object'] != a.target]
    for c in others:
        if not os.path.basename(c['object'] or '').startswith(RUNTIME_OBJECTS):
            fail(f'a wait charged outside the program and its runtime: {c}')
    syms = [c['symbol'] or '' for c in prog]
    mine = ('target_alloc_loop+', 'churn+', 'target_wait_static+')
    if not all(s.startswith(mine) for s in syms) or \
            not any(s.startswith(mine[:2]) for s in syms):
        fail(f'the program\'s functions are not the callers: {syms}')
    print(f'ok: with jemalloc, waits are charged to the program: {sorted(set(syms))}')
    return True


def check_retitled(a, tmp):
    strip = shutil.which('strip')
    if strip is None:
        print('skip: no strip (binutils)')
        return False
    exe = os.path.join(tmp, 'stat-target-stripped')
    shutil.copy(a.target, exe)
    subprocess.run([strip, exe], check=True)
    # -Dlockstat_hold=true builds record every acquisition: the main thread's own
    # (uncontended) lock in contend_once() is a caller there too - still the program's.
    for path, want in ((a.target, ('target_wait_static+0x', 'contend_once+0x')),
                       (exe, ('stat-target-stripped+0x',))):
        j = run_json(a, [path, '--title', 'a', 'b'], clean_env())
        cs = callers(j['processes'][0]['report'])
        labels = [(c['symbol'] or '') + ' ' + (c['object'] or '') for c in cs]
        if not cs or not all(any(w in (c['symbol'] or '') for w in want) or
                             (c['symbol'] is None and c['object'] == path) for c in cs):
            fail(f'{os.path.basename(path)} after setproctitle: callers {labels}, '
                 f'expected {want}')
        if any('retitled' in lbl for lbl in labels):
            fail(f'a caller named from the rewritten argv[0]: {labels}')
        comm = j['processes'][0]['report'].get('command')
        if comm != os.path.basename(path)[:15]:   # the kernel's comm: 15 characters
            fail(f'the process is not labelled by its command name: {comm!r}')
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, 'r.txt')
        subprocess.run(stat_cmd(a, '-o', out) + [exe, '--title', 'a'], env=clean_env(),
                       check=True, stdout=subprocess.DEVNULL, timeout=TIMEOUT)
        text = open(out).read()
    if 'stat-target-stripped+0x' not in text or 'retitled' in text:
        fail(f'text report of the stripped, retitled program:\n{text}')
    print('ok: a program that rewrote argv[0] is named from its own file '
          '(symbols, or file+offset when stripped)')
    return True


def check_exit_wait(a):
    skip_name = os.path.basename(a.exit_shim).split('.so')[0]
    env = clean_env(LD_PRELOAD=a.exit_shim, KLOCK_LOCKSTAT_SKIP=skip_name)
    j = run_json(a, [a.target, '--exit'], env)
    cs = [c for c in callers(j['processes'][0]['report']) if c.get('contended', 0) > 0]
    at_exit = [c for c in cs if c['object'] != a.target]
    if len(at_exit) != 1:
        fail(f'expected one contended wait outside the program (the exit flush): {cs}')
    obj = os.path.basename(at_exit[0]['object'] or '')
    if not obj.startswith(RUNTIME_OBJECTS):
        fail(f'a wait with no program frame is charged to {obj}, not to libc: {at_exit[0]}')
    print(f'ok: an allocator\'s wait at thread exit is charged to {obj} '
          f'({at_exit[0]["symbol"] or at_exit[0]["caller"]})')
    return True


def check_sites(a):
    with tempfile.TemporaryDirectory() as tmp:
        ran = check_retitled(a, tmp)
    ran = check_exit_wait(a) or ran
    ran = check_jemalloc(a) or ran
    return 0 if ran else SKIP


# ---- names and merging ------------------------------------------------------------------

def array_report(a, *opts, mode='--array', prefix='target_locks[', contended=False):
    """The target's report with --array: one in which the array has a row (with
    @contended, a row that counts contention: a lockstat hold-time build reports every
    lock it saw held, contended or not)."""
    for _ in range(ATTEMPTS):   # a busy host may run the threads one by one
        j = run_json(a, [a.target, mode], clean_env(), *opts)
        rep = j['processes'][0]['report']
        if any((lk['name'] or '').startswith(prefix) and
               (not contended or lk['contended'] > 0) for lk in rep['locks']):
            return rep
    print(f'skip: target_locks never contended in {ATTEMPTS} runs')
    raise SystemExit(SKIP)


def check_names(a):
    rep = array_report(a)
    names = [lk['name'] for lk in rep['locks']]
    if 'target_lock' not in names:
        fail(f'the static mutex is not named target_lock: {names}')
    elems = [n for n in names if n and n.startswith('target_locks[')]
    if not all(n[len('target_locks['):-1].isdigit() and
               int(n[len('target_locks['):-1]) < 64 for n in elems):
        fail(f'array elements not named target_locks[N]: {elems}')
    print(f'ok: static locks named: target_lock, {len(elems)} elements like {elems[0]}')
    rep = array_report(a, '-M', '-m', contended=True)
    rows = [lk for lk in rep['locks'] if (lk['name'] or '').startswith('target_locks')]
    if [lk['name'] for lk in rows] != ['target_locks[*]']:
        fail(f'-M: the array is not one row: {[lk["name"] for lk in rep["locks"]]}')
    others = sum(lk['contended'] for lk in rep['locks'] if lk is not rows[0])
    if rows[0]['contended'] != rep['contended'] - others or rows[0]['contended'] == 0:
        fail(f'-M: the merged row does not hold the summed counts: {rows[0]}')
    syms = [c['symbol'] for c in rows[0]['callers']]
    if syms != ['target_array_loop']:
        fail(f'-m: the array\'s callers are not one row for target_array_loop: {syms}')
    print(f'ok: -M -m: one row target_locks[*] ({rows[0]["contended"]} contended, '
          f'{rep["contended"]} in all), one caller target_array_loop')
    check_heap_names(a)
    return 0


def check_heap_names(a):
    want = 'init@target_heap_init+0x'
    rep = array_report(a, mode='--heap', prefix=want)
    heap = [lk['name'] for lk in rep['locks'] if lk['name'] != 'target_lock' and
            not (lk['name'] or '').startswith('target_obj')]
    if not heap or not all((n or '').startswith(want) for n in heap):
        fail(f'heap locks not labelled by their init call site: {heap}')
    rep = array_report(a, '-M', mode='--heap', prefix=want)
    rows = [lk for lk in rep['locks'] if (lk['name'] or '').startswith(want)]
    if len(rows) != 1 or not rows[0]['name'].endswith('[*]'):
        fail(f'-M: the heap locks of one init site are not one row: '
             f'{[lk["name"] for lk in rep["locks"]]}')
    print(f'ok: heap locks labelled {heap[0]}; under -M one row {rows[0]["name"]} '
          f'({rows[0]["contended"]} contended)')


STATIC_LOCKS = ('target_lock', 'target_obj')


def heap_static_report(a, *opts):
    """The target's report with --heap-static: one in which a heap lock was contended
    (any row not a static lock's, whatever its label: a wrong label fails, not skips)."""
    for _ in range(ATTEMPTS):   # a busy host may run the threads one by one
        j = run_json(a, [a.target, '--heap-static'], clean_env(), *opts)
        rep = j['processes'][0]['report']
        if any(not (lk['name'] or '').startswith(STATIC_LOCKS) for lk in rep['locks']):
            return rep
    print(f'skip: the heap locks never contended in {ATTEMPTS} runs')
    raise SystemExit(SKIP)


def check_first_use(a):
    want = 'first@target_first_use+0x'
    rep = heap_static_report(a)
    names = [lk['name'] or '' for lk in rep['locks']]
    if 'target_lock' not in names:
        fail(f'a static lock adopted on first use lost its symbol name: {names}')
    heap = [n for n in names if not n.startswith(STATIC_LOCKS)]
    if not all(n.startswith(want) and not n.endswith('[*]') for n in heap):
        fail(f'zeroed heap locks not labelled by their first use: {heap}')
    rep = heap_static_report(a, '-M')
    rows = [lk for lk in rep['locks'] if not (lk['name'] or '').startswith(STATIC_LOCKS)]
    if len(rows) != 1 or not rows[0]['name'].startswith(want) or \
            not rows[0]['name'].endswith('[*]'):
        fail(f'-M: the heap locks of one first-use site are not one row: '
             f'{[lk["name"] for lk in rep["locks"]]}')
    others = sum(lk['contended'] for lk in rep['locks'] if lk is not rows[0])
    if rows[0]['contended'] != rep['contended'] - others or rows[0]['contended'] == 0:
        fail(f'-M: the first-use row does not hold the summed counts: {rows[0]}')
    print(f'ok: {len(heap)} heap locks labelled like {heap[0]}; under -M one row '
          f'{rows[0]["name"]} ({rows[0]["contended"]} contended, {rep["contended"]} in all)')
    return 0


# ---- the window -------------------------------------------------------------------------

def check_window(a):
    j = run_json(a, [a.target, '--late'], clean_env(), '-d', '0.5')
    rep = j['processes'][0]['report']
    syms = [c['symbol'] or '' for c in callers(rep)]
    if not any(s.startswith('target_wait_static+') for s in syms):
        fail(f'-d: the contention inside the window is missing: {syms}')
    if any(s.startswith('target_after_window+') for s in syms):
        fail(f'-d: the report holds a contention from after the window: {syms}')
    if j['status'] != 0:
        fail(f'-d: the command did not run on to its end: status {j["status"]}')
    print(f'ok: -d 0.5: only the window ({rep["elapsed_ns"] / 1e9:.2f} s, callers {syms}); '
          'the command ran on to exit 0')
    return 0


# ---- -H ---------------------------------------------------------------------------------

def run_text(a, cmd, env, *opts):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, 'r.txt')
        p = subprocess.run(stat_cmd(a, '-o', out, *opts) + cmd, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=TIMEOUT)
        if p.returncode != 0 or not os.path.exists(out):
            fail(f'{cmd}: klock-stat exit status {p.returncode}: '
                 f'{p.stderr.decode(errors="replace")}')
        with open(out) as f:
            return f.read()


def check_hist(a):
    rep = run_json(a, [a.target], clean_env(), '-H')['processes'][0]['report']
    lk = [lk for lk in rep['locks'] if lk['name'] == 'target_lock']
    if len(lk) != 1:
        fail(f'target_lock not in the report: {[x["name"] for x in rep["locks"]]}')
    lk = lk[0]
    hist = lk.get('wait_hist')
    if not isinstance(hist, list) or len(hist) != 32:
        fail(f'-H: no 32-bucket wait_hist on target_lock: {lk}')
    if sum(hist) != lk['contended'] + lk['failed']:
        fail(f'-H: the histogram does not count every wait: {hist} vs {lk}')
    if lk['contended'] == 1:
        b = hist.index(1)
        if not (1 << b) <= lk['wait_max_ns'] < (1 << (b + 1)):
            fail(f'-H: the one wait ({lk["wait_max_ns"]} ns) is in bucket {b}')
    text = run_text(a, [a.target], clean_env(), '-H')
    if '-- Wait histograms (log2 ns)' not in text or 'target_lock (mutex): ' not in text:
        fail(f'-H: the text report has no histogram for target_lock:\n{text}')
    print(f'ok: -H: target_lock wait_hist {hist[:24]}..., max wait {lk["wait_max_ns"]} ns; '
          'text histogram drawn')
    return 0


# ---- holders ("contending points") ------------------------------------------------------

def check_holders(a):
    """A wait for target_holder_lock, held by the main thread that took it in
    target_hold_site() (after waiting, so every build records that site), is charged to
    target_hold_site in the lock's holders."""
    rep = run_json(a, [a.target, '--holder'], clean_env())['processes'][0]['report']
    lk = [lk for lk in rep['locks'] if lk['name'] == 'target_holder_lock']
    if len(lk) != 1:
        fail(f'target_holder_lock not in the report: {[x["name"] for x in rep["locks"]]}')
    lk = lk[0]
    waiters = sorted(c['symbol'] or c['caller'] for c in lk['callers'] if c['contended'])
    if len(waiters) != 2 or not waiters[0].startswith('target_hold_site+') or \
       not waiters[1].startswith('target_holder_wait+'):
        fail(f'expected waits in target_hold_site and target_holder_wait: {waiters}')
    hs = lk.get('holders')
    if not isinstance(hs, list):
        fail(f'no holders list on target_holder_lock: {lk}')
    named = [h for h in hs if (h['symbol'] or '').startswith('target_hold_site+')]
    # the first wait (for the primer, which took the lock uncontended) has no holder site
    if len(hs) != 1 or len(named) != 1 or named[0]['waits'] != 1:
        fail(f'the worker\'s wait is not charged to holder target_hold_site: {hs}')
    if not 0 < named[0]['wait_ns'] <= lk['wait_ns']:
        fail(f'holder wait_ns {named[0]["wait_ns"]} outside (0, {lk["wait_ns"]}]')
    text = run_text(a, [a.target, '--holder'], clean_env())
    if '-- Holders' not in text or \
       not re.search(r'target_holder_lock +target_hold_site\+0x', text):
        fail(f'the text report names no holder target_hold_site:\n{text}')
    print(f'ok: target_holder_lock\'s holder: {named[0]["symbol"]} '
          f'({named[0]["waits"]} wait, {named[0]["wait_ns"]} ns); text Holders section')
    return 0


# ---- -S: call stacks ----------------------------------------------------------------------

def check_stacks(a):
    """-S 3: the contended acquisition of target_lock in stat-target records its stack,
    target_wait_static <- waiter (the thread's start routine) <- libc; without -S none."""
    rep = run_json(a, [a.target], clean_env(), '-S', '3')['processes'][0]['report']
    lk = [lk for lk in rep['locks'] if lk['name'] == 'target_lock']
    if len(lk) != 1:
        fail(f'target_lock not in the report: {[x["name"] for x in rep["locks"]]}')
    sts = lk[0].get('stacks')
    if not isinstance(sts, list) or len(sts) != 1:
        fail(f'-S 3: expected one stack on target_lock: {lk[0]}')
    syms = [f['symbol'] or f['pc'] for f in sts[0]['frames']]
    if len(syms) != 3 or not syms[0].startswith('target_wait_static+') or \
       not syms[1].startswith('waiter+') or sts[0]['contended'] != 1:
        fail(f'-S 3: target_lock\'s stack is not target_wait_static <- waiter <- ...: {sts}')
    text = run_text(a, [a.target], clean_env(), '-S', '3')
    if not re.search(r'-- Stacks .*\n\ntarget_lock \(mutex\): 1 contended, [0-9.]+ ms\n'
                     r' +target_wait_static\+0x[0-9a-f]+\n +waiter\+0x', text):
        fail(f'-S 3: the text report shows no target_wait_static <- waiter stack:\n{text}')
    rep = run_json(a, [a.target], clean_env())['processes'][0]['report']
    if any('stacks' in lk for lk in rep['locks']):
        fail('stacks recorded without -S')
    print(f'ok: -S 3: target_lock\'s contended stack {syms}; none without -S')
    return 0


# ---- --attach ---------------------------------------------------------------------------

def attach_raw(pid, req):
    import socket
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as so:
        so.settimeout(TIMEOUT)
        so.connect('\0klock-lockstat.%d' % pid)
        so.sendall(req)
        data = b''
        while True:
            b = so.recv(65536)
            if not b:
                return data.decode()
            data += b


def check_attach(a):
    env = clean_env(LD_PRELOAD=a.preload, KLOCK_LOCKSTAT='json')
    t0 = time.monotonic()
    p = subprocess.Popen([a.target, '--serve'], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    try:
        line = p.stdout.readline().decode()
        if not line.startswith('ready '):
            fail(f'the target did not start: {line!r}')
        pid = int(line.split()[1])
        before = json.loads(attach_raw(pid, b'report json\n'))
        if before['pid'] != pid or not any(lk['name'] == 'target_lock' and lk['contended']
                                           for lk in before['locks']):
            fail(f'the attach channel\'s report lacks target_lock: {before}')
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, 'r.json')
            q = subprocess.run([a.stat, '--attach', str(pid), '-d', '0.3', '--json', '-o', out],
                               stderr=subprocess.PIPE, timeout=TIMEOUT)
            if q.returncode != 0:
                fail(f'--attach: exit status {q.returncode}: {q.stderr.decode()}')
            with open(out) as f:
                j = json.load(f)
        life = time.monotonic() - t0
        rep = j['processes'][0]['report']
        if j['processes'][0]['pid'] != pid or rep['pid'] != pid:
            fail(f'--attach: the report is not the target\'s: {j}')
        if any(lk['name'] == 'target_lock' for lk in rep['locks']):
            fail(f'--attach: the contention before the attach is in the interval: {rep}')
        if not 0 < rep['elapsed_ns'] < life * 1e9:
            fail(f'--attach: elapsed {rep["elapsed_ns"]} ns is not the interval '
                 f'(target alive {life:.2f} s)')
        if p.poll() is not None:
            fail('--attach: the target ended')
    finally:
        p.terminate()
        p.wait(timeout=TIMEOUT)
    print(f'ok: --attach {pid}: raw report had target_lock; the -d 0.3 interval '
          f'({rep["elapsed_ns"] / 1e9:.2f} s of the target\'s {life:.2f} s) does not')
    return 0


# ---- -L / -F / --sort avg -----------------------------------------------------------------

def check_filter(a):
    rep = array_report(a, '-L', 'target_locks*', '--sort', 'avg')
    names = [lk['name'] or '' for lk in rep['locks']]
    if not names or not all(n.startswith('target_locks[') for n in names):
        fail(f'-L target_locks*: other locks shown: {names}')
    if rep['sort'] != 'avg':
        fail(f'--sort avg: the report says sort {rep["sort"]}')
    rep = array_report(a, '-F', 'target_wait_static', prefix='target_lock')
    syms = [c['symbol'] or '' for c in callers(rep)]
    if not syms or not all(s.startswith('target_wait_static+') for s in syms):
        fail(f'-F target_wait_static: other call sites shown: {syms}')
    print(f'ok: -L: {len(names)} rows, all target_locks[N]; -F: callers {syms}; sort avg')
    return 0


# ---- -j with no report ------------------------------------------------------------------

STATIC_PROGRAMS = ('/sbin/ldconfig', '/usr/sbin/ldconfig')


def is_static(path):
    """An ELF program with no PT_INTERP (static or static-pie): it ignores LD_PRELOAD."""
    try:
        with open(path, 'rb') as f:
            head = f.read(4096)
    except OSError:
        return False
    return head[:4] == b'\x7fELF' and b'/ld-linux' not in head and b'ld.so' not in head


def no_report_cases():
    cases = [('a missing command', ['/nonexistent/klock-stat-test'], (), 127),
             ('a program a signal killed', ['sh', '-c', 'kill -KILL $$'], (), 128 + 9),
             ('-d, a program a signal killed', ['sh', '-c', 'kill -KILL $$'],
              ('-d', '5'), 128 + 9),
             ('--all, nothing to show', ['sh', '-c', 'kill -KILL $$'], ('--all',), 128 + 9)]
    static = [p for p in STATIC_PROGRAMS if is_static(p)]
    if static:
        cases.append(('a static program', [static[0], '-p'], (), 0))
    return cases


def check_empty(a):
    for what, cmd, opts, rc in no_report_cases():
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, 'r.json')
            p = subprocess.run(stat_cmd(a, '-j', '-o', out, *opts) + cmd, env=clean_env(),
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               timeout=TIMEOUT)
            err = p.stderr.decode(errors='replace')
            if p.returncode != rc:
                fail(f'{what}: klock-stat exit status {p.returncode}, expected {rc}: {err}')
            text = open(out).read() if os.path.exists(out) else ''
        try:
            j = json.loads(text)
        except ValueError:
            fail(f'{what}: -j wrote no JSON: {text[:400]!r}')
        if j.get('klock_stat') != 1 or j.get('processes') != [] or j.get('status') != rc:
            fail(f'{what}: expected an empty processes list and status {rc}: {j}')
        if 'wrote no lockstat report' not in err:
            fail(f'{what}: the note is not on standard error: {err!r}')
        print(f'ok: {what}: -j wrote {{"processes": []}}, status {rc}, the note on stderr')
    return 0


# ---- object and offset on every site ------------------------------------------------------

def sites_of(rep):
    """Every caller, holder and stack frame of a report."""
    for lk in rep['locks']:
        yield from lk['callers']
        yield from lk.get('holders', [])
        for st in lk.get('stacks', []):
            yield from st['frames']


def check_where(a):
    addr2line, strip = shutil.which('addr2line'), shutil.which('strip')
    if addr2line is None or strip is None:
        print('skip: no addr2line or strip (binutils)')
        return SKIP
    rep = run_json(a, [a.target, '--holder'], clean_env(), '-S', '3')['processes'][0]['report']
    named = 0
    for site in sites_of(rep):
        if not isinstance(site.get('object'), str) or \
                not re.fullmatch(r'0x[0-9a-f]+', site.get('offset') or ''):
            fail(f'a site without object and offset: {site}')
        sym = site['symbol'] or ''
        if site['object'] == a.target and '+0x' in sym:
            # -i: the functions inlined at that address, innermost first, then the
            # function the symbol table (and so the report) names
            out = subprocess.run([addr2line, '-f', '-i', '-e', site['object'], site['offset']],
                                 stdout=subprocess.PIPE, check=True).stdout.decode().split()
            if sym.split('+0x')[0] not in out[0::2]:
                fail(f'addr2line {site["offset"]} names {out[0::2]}, the report {sym}: {site}')
            named += 1
    if named == 0:
        fail(f'no site of the program to check with addr2line: {list(sites_of(rep))}')
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, 'stat-target-stripped')
        shutil.copy(a.target, exe)
        subprocess.run([strip, exe], check=True)
        rep = run_json(a, [exe], clean_env(), '-S', '3')['processes'][0]['report']
        text = run_text(a, [exe], clean_env())
    mine = [s for s in sites_of(rep) if s.get('object') == exe]
    if not mine or any(s['symbol'] is not None or s.get('offset') is None for s in mine):
        fail(f'the stripped program\'s sites lack object and offset: {list(sites_of(rep))}')
    missing = [s['offset'] for s in mine if 'stat-target-stripped+' + s['offset'] not in text
               and 'pc' not in s]
    if missing:
        fail(f'JSON offsets {missing} are not the text report\'s file+offset:\n{text}')
    print(f'ok: every site has object and offset; addr2line agrees on {named} named sites; '
          f'{len(mine)} sites in the stripped program, e.g. {mine[0]["offset"]}')
    return 0


# ---- _exit -------------------------------------------------------------------------------

def check_fast_exit(a):
    for how in ('--_exit', '--_Exit'):
        j = run_json(a, [a.target, how], clean_env())
        if len(j['processes']) != 1:
            fail(f'{how}: expected the program\'s report: {j}')
        proc = j['processes'][0]
        rep = proc['report']
        if rep['pid'] != proc['pid']:
            fail(f'{how}: the report is not the program\'s own: pid {rep["pid"]} '
                 f'in the record of {proc["pid"]}')
        if not any(lk['name'] == 'target_lock' and lk['contended'] > 0 for lk in rep['locks']):
            fail(f'{how}: target_lock\'s wait is not in the report: {rep["locks"]}')
        text = run_text(a, [a.target, how], clean_env())
        if 'target_lock' not in text or not text.startswith('Process: '):
            fail(f'{how}: the text report lacks target_lock:\n{text}')
        print(f'ok: {how}: the report of pid {proc["pid"]} came back (target_lock, '
              f'{rep["contended"]} contended), in JSON and in text')
    return 0


# ---- C++ names -------------------------------------------------------------------------------

CPP_LOCK = 'tpool::thread_pool::lock_'
CPP_LOCK_MANGLED = '_ZN5tpool11thread_pool5lock_E'
CPP_CALLER = 'tpool::thread_pool::set_concurrency(unsigned int)+0x'
CPP_CALLER_MANGLED = '_ZN5tpool11thread_pool15set_concurrencyEj+0x'


def cpp_callers(rep):
    return [c for lk in rep['locks'] if lk['name'] == CPP_LOCK for c in lk['callers']
            if c['contended']]


def check_cpp(a):
    if not a.cpp_target:
        print('skip: no C++ compiler')
        return SKIP
    rep = run_json(a, [a.cpp_target], clean_env())['processes'][0]['report']
    lk = [lk for lk in rep['locks'] if lk['name'] == CPP_LOCK]
    if len(lk) != 1 or lk[0].get('mangled') != CPP_LOCK_MANGLED:
        fail(f'the C++ lock is not named {CPP_LOCK} (mangled {CPP_LOCK_MANGLED}): '
             f'{[(x["name"], x.get("mangled")) for x in rep["locks"]]}')
    cs = cpp_callers(rep)
    if len(cs) != 1 or not (cs[0]['symbol'] or '').startswith(CPP_CALLER) or \
            not (cs[0].get('mangled') or '').startswith(CPP_CALLER_MANGLED):
        fail(f'the C++ caller is not {CPP_CALLER}.. (mangled {CPP_CALLER_MANGLED}..): '
             f'{lk[0]["callers"]}')
    text = run_text(a, [a.cpp_target], clean_env())
    if CPP_LOCK not in text or CPP_CALLER not in text or '_ZN5tpool' in text:
        fail(f'the text report does not show the demangled names:\n{text}')
    for opts in (('-F', 'tpool::*'), ('-F', '*set_concurrency*'), ('-F', '_ZN5tpool*'),
                 ('-L', 'tpool::*')):
        rep = run_json(a, [a.cpp_target], clean_env(), *opts)['processes'][0]['report']
        if len(cpp_callers(rep)) != 1:
            fail(f'{" ".join(opts)}: the C++ caller is not selected: {rep["locks"]}')
    rep = run_json(a, [a.cpp_target], clean_env(), '-F', 'other::*')['processes'][0]['report']
    if cpp_callers(rep):
        fail(f'-F other::*: the C++ caller is still shown: {rep["locks"]}')
    print(f'ok: C++ names demangled: {CPP_LOCK}, {cs[0]["symbol"]} (mangled {cs[0]["mangled"]}); '
          '-F tpool::* and -L tpool::* select them')
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('check', choices=['signal', 'setuid', 'sites', 'names', 'window', 'hist',
                                      'attach', 'filter', 'holders', 'stacks', 'first_use',
                                      'empty', 'where', 'fast_exit', 'cpp'])
    ap.add_argument('--stat', required=True)
    ap.add_argument('--preload', required=True)
    ap.add_argument('--target', required=True)
    ap.add_argument('--exit-shim', required=True)
    ap.add_argument('--cpp-target')
    a = ap.parse_args()
    sys.exit(globals()['check_' + a.check](a) or 0)


if __name__ == '__main__':
    main()
