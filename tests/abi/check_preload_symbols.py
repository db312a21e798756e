#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Checks libklock-preload.so's dynamic symbol table against preload/preload.map.

The interposer must export exactly the pthread functions its version script lists (a
missing one means programs quietly keep glibc's for it; anything more - a kl_* of its
private copy of klock - would interpose on a program's own libklock.so).
"""
import re
import subprocess
import sys


def main():
    lib, mapfile = sys.argv[1], sys.argv[2]
    text = open(mapfile).read()
    body = text[text.index('global:') + len('global:'):text.index('local:')]
    want = set(re.findall(r'([A-Za-z_][A-Za-z0-9_]*)\s*;', body))
    out = subprocess.run(['nm', '-D', '--defined-only', lib], check=True,
                         capture_output=True, text=True).stdout
    have = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in 'TDBRVWiu':
            have.add(parts[2].split('@')[0])
    bad = False
    for n in sorted(want - have):
        print(f'listed in preload.map but not exported: {n}')
        bad = True
    for n in sorted(have - want):
        print(f'exported but not an interposer: {n}')
        bad = True
    if not bad:
        print(f'{len(have)} interposers exported, nothing else')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
