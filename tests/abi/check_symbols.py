#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Checks libklock.so's dynamic symbol table against the public headers.

Every exported (defined, global) symbol must start with kl_ and be declared with KL_API in
include/klock/*.h; every KL_API declaration must be exported. Anything else leaking out
(a kli_* internal, a helper without `static`) fails the test.
"""
import re
import subprocess
import sys
from pathlib import Path

# Symbols a sanitizer adds next to exported globals (ASan's ODR indicators), not ours.
SANITIZER = re.compile(r'^__odr_asan[._]')
DECL = re.compile(r'\bKL_API\b[^;{(]*?\b(kl_[A-Za-z0-9_]+)\s*\(', re.S)
DECL_VAR = re.compile(r'\bKL_API\b\s+(?:extern\s+)?[^;(]*?\b(kl_[A-Za-z0-9_]+)\s*;', re.S)


def exported(lib):
    out = subprocess.run(['nm', '-D', '--defined-only', lib], check=True,
                         capture_output=True, text=True).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in 'TDBRVWiu' and not SANITIZER.match(parts[2]):
            names.add(parts[2].split('@')[0])
    return names


def declared(headers):
    names = set()
    for h in headers:
        text = h.read_text()
        names.update(DECL.findall(text))
        names.update(DECL_VAR.findall(text))
    return names


def main():
    lib, incdir = sys.argv[1], Path(sys.argv[2])
    exp = exported(lib)
    dec = declared(sorted(incdir.glob('*.h')))
    bad_prefix = sorted(n for n in exp if not n.startswith('kl_'))
    undeclared = sorted(n for n in exp if n.startswith('kl_') and n not in dec)
    missing = sorted(dec - exp)
    for n in bad_prefix:
        print(f'exported but not kl_*: {n}')
    for n in undeclared:
        print(f'exported but not declared KL_API in a public header: {n}')
    for n in missing:
        print(f'declared KL_API but not exported: {n}')
    print(f'{len(exp)} symbols exported, {len(dec)} declared')
    return 1 if bad_prefix or undeclared or missing else 0


if __name__ == '__main__':
    sys.exit(main())
