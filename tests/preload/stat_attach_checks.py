#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Who klock-stat --attach trusts, and who the attach channel waits for.

    stat_attach_checks.py CHECK --stat KLOCK_STAT --channel STAT_CHANNEL

CHECK is one of:
  squatter     another process binds the abstract name klock-lockstat.<pid> of a live
               process before that process does, and answers like a lockstat channel:
               klock-stat --attach <pid> refuses it (naming the pid that holds the name),
               exits non-zero and prints none of its answer; the process itself says once
               on stderr that the channel's name is in use
  silent_peer  peers that connect and send nothing, half a request, or a request line far
               too long do not stop klock-stat --attach from being served, and the channel
               drops them
  hostile      the process at PID answers with hostile reports (terminal escapes, NUL and
               other control bytes, bad UTF-8, truncated or nested-too-deep JSON, an
               oversized answer): klock-stat never dies of a signal or a sanitizer error,
               never prints a control character, and its -j output is JSON or nothing

STAT_CHANNEL is tests/preload/stat_channel.c (serves the channel without the interposer).
"""
import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading

# Generous: the machine may be shared and loaded (KLTEST_SCALE stretches it further).
TIMEOUT = 120 * float(os.environ.get('KLTEST_SCALE', '1') or 1)
IN_USE = 'klock: lockstat attach channel unavailable: the name is in use'
# Bytes a terminal may act on: C0 controls but tab and newline, DEL, and C1 controls (raw
# or UTF-8 encoded).
CONTROL = re.compile(rb'[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]')


def fail(msg):
    raise SystemExit('FAIL: ' + msg)


def channel_name(pid):
    return '\0klock-lockstat.%d' % pid


class FakeChannel:
    """A listening socket under @name that answers each request line with answer(line)."""

    def __init__(self, name, answer):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(name)
        self.sock.listen(8)
        self.answer = answer
        self.requests = []
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            with c:
                c.settimeout(TIMEOUT)
                line = b''
                try:
                    while not line.endswith(b'\n'):
                        b = c.recv(4096)
                        if not b:
                            break
                        line += b
                    self.requests.append(line)
                    c.sendall(self.answer(line))
                except OSError:
                    pass

    def close(self):
        self.sock.close()


def start_channel(a, *args, env_extra=None):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith('KLOCK_') and k != 'LD_PRELOAD'}
    env['KLOCK_LOCKSTAT'] = 'json'
    env.update(env_extra or {})
    errf = tempfile.TemporaryFile()
    p = subprocess.Popen([a.channel, *args], env=env, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=errf)
    return p, errf


def wait_ready(p, errf):
    line = p.stdout.readline().decode()
    if not line.startswith('ready '):
        errf.seek(0)
        fail(f'stat-channel did not start: {line!r} {errf.read()!r}')
    return int(line.split()[1])


def stop_channel(p, errf):
    try:
        p.stdin.close()
    except OSError:
        pass
    p.wait(timeout=TIMEOUT)
    errf.seek(0)
    return errf.read().decode(errors='replace')


def check_squatter(a):
    p, errf = start_channel(a, '--wait-go')
    fake = FakeChannel(channel_name(p.pid), lambda line: b'ok\n' if line == b'reset\n' else
                       b'Lockstat report: made up by the squatter\n')
    try:
        p.stdin.write(b'go\n')
        p.stdin.flush()
        pid = wait_ready(p, errf)
        if pid != p.pid:
            fail(f'stat-channel says pid {pid}, started as {p.pid}')
        q = subprocess.run([a.stat, '--attach', str(pid), '-d', '0.1'], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=TIMEOUT)
    finally:
        fake.close()
        err = stop_channel(p, errf)
    out = (q.stdout + q.stderr).decode(errors='replace')
    if q.returncode == 0:
        fail(f'--attach {pid} accepted the squatter\'s channel: {out!r}')
    if 'made up by the squatter' in out:
        fail(f'--attach {pid} printed the squatter\'s answer: {out!r}')
    want = f'held by pid {os.getpid()} (uid {os.getuid()}), not by {pid}: refusing'
    if want not in out:
        fail(f'--attach {pid}: the refusal does not say who holds the name ({want!r}): {out!r}')
    if any(r.startswith(b'report') for r in fake.requests):
        fail(f'--attach {pid} asked the squatter for a report: {fake.requests}')
    if err.count(IN_USE) != 1:
        fail(f'the process did not say once that its channel\'s name is taken: {err!r}')
    print(f'ok: a squatter on klock-lockstat.{pid} is refused (exit {q.returncode}): '
          f'{q.stderr.decode().strip()!r}; the process said so once')
    return 0


def check_silent_peer(a):
    p, errf = start_channel(a)
    peers = []

    def connect_peer(first):
        # Blocking: a full backlog makes connect() wait, as it makes klock-stat's.
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(channel_name(pid))
        peers.append(s)
        if first:
            s.setblocking(False)
            try:
                s.send(first)
            except BlockingIOError:
                pass

    try:
        pid = wait_ready(p, errf)
        threads = [threading.Thread(target=connect_peer, args=(first,), daemon=True)
                   for first in (b'', b'rep', b'r' * 100000)]
        threads[0].start()
        threads[0].join(TIMEOUT)   # the silent peer is first in line
        for t in threads[1:]:
            t.start()
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, 'r.json')
            try:
                q = subprocess.run([a.stat, '--attach', str(pid), '-d', '0.1', '--json', '-o',
                                    out], stderr=subprocess.PIPE, timeout=TIMEOUT)
            except subprocess.TimeoutExpired:
                fail('--attach was not served while silent peers held the channel')
            if q.returncode != 0:
                fail(f'--attach: exit status {q.returncode}: {q.stderr.decode()!r}')
            with open(out) as f:
                j = json.load(f)
        if j['processes'][0]['report']['pid'] != pid:
            fail(f'--attach: not the process\'s report: {j}')
        for t in threads:
            t.join(TIMEOUT)
        if len(peers) != len(threads):
            fail('a silent peer could not even connect')
        for s in peers:
            s.settimeout(TIMEOUT)
            try:
                while s.recv(65536):
                    pass
            except socket.timeout:
                fail('a silent peer was never dropped')
            except ConnectionResetError:
                pass
    finally:
        for s in peers:
            s.close()
        stop_channel(p, errf)
    print(f'ok: --attach {pid} served past a silent, a slow and an overlong peer; '
          f'all three dropped')
    return 0


# Answers to "report": each is what a hostile or broken process might send.
HOSTILE = [
    b'Lockstat report\n\x1b]0;owned\x07\x1b[2J\x1b[31mred\n',
    b'Lockstat report\nNUL\x00inside\r\ncarriage\x08back\x7fdel\n',
    b'Lockstat report\n\xc2\x9b31m C1 CSI, \x9b raw, \xff\xfe bad UTF-8, \xe2\x82 cut\n',
    b'{"pid": 1, "locks": [',
    b'{"pid": 1, "name": "esc\x1b[2J", "locks": []}\n',
    b'{"pid": 1, "name": "esc\\u001b[2J", "locks": []}\n',
    b'[' * 200000,
    b'{"a":' * 50000 + b'1' + b'}' * 50000,
    b'',
    b'\n',
    b'ok\n',
    b'x' * (40 << 20),
    b'{"pid": 1}' + b'\x1b[2J',
    b'{"pid": 1e99999, "locks": [1, -0.5e+3, true, false, null, "\\ud800"]}\n',
]


def check_hostile(a):
    answer = {'report': b''}
    fake = FakeChannel(channel_name(os.getpid()), lambda line: b'ok\n' if line == b'reset\n'
                       else answer['report'])
    try:
        for i, h in enumerate(HOSTILE):
            answer['report'] = h
            for opts in ([], ['--json']):
                with tempfile.TemporaryDirectory() as d:
                    out = os.path.join(d, 'r.out')
                    q = subprocess.run([a.stat, '--attach', str(os.getpid()), '-d', '0.01',
                                        '-o', out, *opts], stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, timeout=TIMEOUT)
                    text = open(out, 'rb').read() if os.path.exists(out) else b''
                what = f'answer {i} ({h[:40]!r}{"..." if len(h) > 40 else ""}) {opts}'
                if q.returncode < 0 or b'Sanitizer' in q.stderr:
                    fail(f'{what}: klock-stat died: {q.returncode} {q.stderr[-2000:]!r}')
                for name, data in (('stdout', q.stdout), ('stderr', q.stderr),
                                   ('the report', text)):
                    m = CONTROL.search(data)
                    if m:
                        fail(f'{what}: control byte {m.group()!r} in {name}: {data[:200]!r}')
                if opts and q.returncode == 0:
                    try:
                        json.loads(text)
                    except ValueError:
                        fail(f'{what}: -j printed something that is not JSON: {text[:200]!r}')
                if q.returncode == 0 and len(text) > len(h) + 4096:
                    fail(f'{what}: more printed than answered')
    finally:
        fake.close()
    print(f'ok: {len(HOSTILE)} hostile answers, text and JSON: no crash, no control byte '
          f'printed, -j output always JSON')
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('check', choices=['squatter', 'silent_peer', 'hostile'])
    ap.add_argument('--stat', required=True)
    ap.add_argument('--channel', required=True)
    a = ap.parse_args()
    sys.exit(globals()['check_' + a.check](a) or 0)


if __name__ == '__main__':
    main()
