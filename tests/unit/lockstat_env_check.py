#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""KLOCK_LOCKSTAT=... runs of tests/unit/lockstat_demo.c write lockstat's report at exit.

usage: lockstat_env_check.py DEMO built|compiled-out

Checks, each in a fresh process:
  KLOCK_LOCKSTAT=1                 text report on stderr naming demo_lock and demo_worker
  KLOCK_LOCKSTAT=json,top=3 + KLOCK_LOCKSTAT_FILE=out.%p.json
                                   a JSON file (pid in its name) that parses, follows the
                                   schema and names the call site
  KLOCK_LOCKSTAT=bogus             a warning, then the default report
  KLOCK_LOCKSTAT unset or 0        no report
  (compiled-out builds)            KLOCK_LOCKSTAT=1 says lockstat is compiled out
"""
import json
import os
import subprocess
import sys
import tempfile

FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print(f'FAIL: {what}')


def run(demo, env_extra, cwd):
    env = {k: v for k, v in os.environ.items() if not k.startswith('KLOCK_LOCKSTAT')}
    env.update(env_extra)
    p = subprocess.run([demo], env=env, cwd=cwd, capture_output=True, text=True, timeout=60)
    check(p.returncode == 0, f'{env_extra}: demo exit status {p.returncode}: {p.stderr}')
    check('demo: done' in p.stdout, f'{env_extra}: demo output')
    return p


def check_text(demo, cwd):
    err = run(demo, {'KLOCK_LOCKSTAT': '1'}, cwd).stderr
    for needle in ('Elapsed time: ', '-- Sleep (mutex)', 'Total%  Count   Time/ms',
                   '<all>', 'demo_lock', 'demo_worker+0x',
                   '% of CPU time was spent waiting for locks', '-- Summary by lock'):
        check(needle in err, f'text report has {needle!r}:\n{err}')


def check_lock(lock, hold):
    keys = ('lock', 'name', 'kind', 'read', 'acquisitions', 'contended', 'failed',
            'spin_count', 'spin_ns', 'sleep_count', 'sleep_ns', 'wait_ns', 'wait_max_ns',
            'hold_ns', 'hold_max_ns', 'callers')
    for k in keys:
        check(k in lock, f'lock object has {k}')
    check(lock['contended'] >= 1, 'demo_lock was contended')
    check(lock['wait_ns'] >= lock['wait_max_ns'] > 0, 'wait_ns >= wait_max_ns > 0')
    check((lock['acquisitions'] is None) == (not hold), 'acquisitions null iff no hold times')
    syms = [c['symbol'] or '' for c in lock['callers']]
    check(any(s.startswith('demo_worker+0x') for s in syms), f'a caller is demo_worker: {syms}')
    for c in lock['callers']:
        check(c['caller'].startswith('0x'), 'caller address is hex')
        check(c['object'], 'caller object is named')


def check_json(demo, cwd):
    p = run(demo, {'KLOCK_LOCKSTAT': 'json,top=3', 'KLOCK_LOCKSTAT_FILE': 'out.%p.json'}, cwd)
    check(p.stderr == '', f'json run is quiet on stderr: {p.stderr!r}')
    files = [f for f in os.listdir(cwd) if f.startswith('out.') and f.endswith('.json')]
    check(len(files) == 1 and files[0][4:-5].isdigit(), f'one out.<pid>.json: {files}')
    if len(files) != 1:
        return
    with open(os.path.join(cwd, files[0])) as f:
        doc = json.load(f)
    for k in ('klock_lockstat', 'lockstat_built', 'recording', 'hold_times', 'sort',
              'elapsed_ns', 'threads', 'cpus', 'wait_ns', 'wait_pct', 'acquisitions',
              'contended', 'failed', 'dropped', 'locks'):
        check(k in doc, f'report has {k}')
    check(doc['klock_lockstat'] == 1, 'schema version 1')
    check(doc['lockstat_built'] is True, 'lockstat_built')
    check(doc['threads'] >= 2, 'two threads seen')
    check(0 < doc['wait_pct'] <= 100, f'0 < wait_pct <= 100: {doc["wait_pct"]}')
    check(len(doc['locks']) <= 3, 'top=3 honoured')
    demo = [lk for lk in doc['locks'] if lk['name'] == 'demo_lock']
    check(len(demo) == 1, 'demo_lock reported once')
    if demo:
        check_lock(demo[0], doc['hold_times'])


def main():
    demo, mode = os.path.abspath(sys.argv[1]), sys.argv[2]
    with tempfile.TemporaryDirectory() as cwd:
        if mode == 'compiled-out':
            err = run(demo, {'KLOCK_LOCKSTAT': '1'}, cwd).stderr
            check('compiled out' in err, f'compiled-out note: {err!r}')
        else:
            check_text(demo, cwd)
            check_json(demo, cwd)
            err = run(demo, {'KLOCK_LOCKSTAT': 'bogus'}, cwd).stderr
            check('KLOCK_LOCKSTAT=bogus' in err and 'Elapsed time: ' in err,
                  f'bad options: a warning, then the default report: {err!r}')
        for quiet in ({}, {'KLOCK_LOCKSTAT': '0'}):
            err = run(demo, quiet, cwd).stderr
            check(err == '', f'{quiet}: no report: {err!r}')
    print(f'{len(FAILURES)} failure(s)')
    return 1 if FAILURES else 0


if __name__ == '__main__':
    sys.exit(main())
