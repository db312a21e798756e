#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""The static probes a tracer relies on are in the shipped objects, as documented.

    check_probes.py OBJECT...

Each OBJECT (libklock.so, libklock-preload.so) must carry, in its .note.stapsdt, the
probes of provider klock with the documented argument counts (docs/lockstat.md) and
nothing else of that provider; lock_name, and only lock_name, has a semaphore (the others
are never gated: a nop each, whether or not a tracer is attached). Reads `readelf -n`.
"""
import subprocess
import sys

# name -> number of arguments (docs/lockstat.md, locks/probes.h)
PROBES = {'contention_begin': 4, 'contention_end': 5, 'handoff': 4, 'revoke_begin': 2,
          'revoke_end': 4, 'lock_name': 2}
GATED = {'lock_name'}


def notes(obj):
    out = subprocess.run(['readelf', '-n', obj], capture_output=True, text=True,
                         check=True).stdout
    found, cur = [], None
    for line in out.splitlines():
        line = line.strip()
        if line.startswith('Provider:'):
            cur = {'provider': line.split()[1]}
            found.append(cur)
        elif cur is not None and line.startswith('Name:'):
            cur['name'] = line.split()[1]
        elif cur is not None and line.startswith('Location:'):
            cur['semaphore'] = int(line.rsplit('Semaphore:', 1)[1].strip(), 16)
        elif cur is not None and line.startswith('Arguments:'):
            cur['args'] = len(line.split()[1:])
    return [n for n in found if n['provider'] == 'klock']


def main():
    bad = []
    for obj in sys.argv[1:]:
        ns = notes(obj)
        names = {n['name'] for n in ns}
        if names != set(PROBES):
            bad.append(f'{obj}: probes {sorted(names)}, documented {sorted(PROBES)}')
        for n in ns:
            want = PROBES.get(n['name'])
            if want is not None and n.get('args', 0) != want:
                bad.append(f"{obj}: {n['name']} has {n.get('args')} arguments, not {want}")
            if (n['semaphore'] != 0) != (n['name'] in GATED):
                bad.append(f"{obj}: {n['name']} semaphore {n['semaphore']:#x}")
        print(f'{obj}: {len(ns)} probe sites, {len(names)} probes')
    for b in bad:
        print('FAIL:', b)
    sys.exit(1 if bad else 0)


if __name__ == '__main__':
    main()
