#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Checks libklock.so's dynamic symbol table against the public headers and its version script.

Every exported (defined, global) symbol must start with kl_ and be declared with KL_API in
include/klock/*.h; every KL_API declaration must be exported. Anything else leaking out
(a kli_* internal, a helper without `static`) fails the test. With a third argument, the
version script (locks/klock.map): it must list exactly the KL_API declarations, and every
export must carry its version node (KLOCK_1.0), so a symbol added to a header but not to the
script - which the script would then hide - is named here. With a fourth, the Debian symbols
file (debian/libklock1.symbols): it must list the same names, each at the node's version.
"""
import re
import subprocess
import sys
from pathlib import Path

# Symbols a sanitizer adds next to exported globals (ASan's ODR indicators), not ours.
SANITIZER = re.compile(r'^__odr_asan[._]')
DECL = re.compile(r'\bKL_API\b[^;{(]*?\b(kl_[A-Za-z0-9_]+)\s*\(', re.S)
DECL_VAR = re.compile(r'\bKL_API\b\s+(?:extern\s+)?[^;(]*?\b(kl_[A-Za-z0-9_]+)\s*;', re.S)


# The version script's one node: its name and the names listed under global:.
MAP_NODE = re.compile(r'^\s*(KLOCK_[0-9.]+)\s*\{\s*global:(.*?)local:', re.S | re.M)
COMMENT = re.compile(r'/\*.*?\*/', re.S)


def exported(lib):
    """{name: version node or ''} of every defined dynamic symbol."""
    out = subprocess.run(['nm', '-D', '--defined-only', lib], check=True,
                         capture_output=True, text=True).stdout
    names = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in 'TDBRVWiu' and not SANITIZER.match(parts[2]):
            name, _, version = parts[2].partition('@')
            names[name] = version.lstrip('@')
    return names


def version_script(path):
    m = MAP_NODE.search(COMMENT.sub('', Path(path).read_text()))
    if not m:
        sys.exit(f'{path}: no "NODE {{ global: ... local:" block')
    return m.group(1), set(re.findall(r'([A-Za-z_][A-Za-z0-9_]*)\s*;', m.group(2)))


def declared(headers):
    names = set()
    for h in headers:
        text = h.read_text()
        names.update(DECL.findall(text))
        names.update(DECL_VAR.findall(text))
    return names


def debian_symbols(path):
    """{name: version node} of the symbols file's entries (name@NODE minver)."""
    names = {}
    for line in Path(path).read_text().splitlines():
        if line.startswith(' ') and '@' in line:
            name, _, rest = line.strip().partition('@')
            names[name] = rest.split()[0]
    return names


def main():
    lib, incdir = sys.argv[1], Path(sys.argv[2])
    versions = exported(lib)
    exp = set(versions) - {n for n, v in versions.items() if n == v}  # the node's own symbol
    dec = declared(sorted(incdir.glob('*.h')))
    bad_map = []
    if len(sys.argv) > 3:
        node, listed = version_script(sys.argv[3])
        bad_map += [f'declared KL_API but not in {node} of the version script: {n}'
                    for n in sorted(dec - listed)]
        bad_map += [f'in the version script but not declared KL_API: {n}'
                    for n in sorted(listed - dec)]
        bad_map += [f'exported without version {node}: {n}@{versions[n] or "(none)"}'
                    for n in sorted(exp) if versions[n] != node]
    if len(sys.argv) > 4:
        deb = debian_symbols(sys.argv[4])
        deb.pop(node, None)  # the node's own entry, KLOCK_1.0@KLOCK_1.0
        bad_map += [f'in the version script but not in {sys.argv[4]}: {n}'
                    for n in sorted(listed - set(deb))]
        bad_map += [f'in {sys.argv[4]} but not in the version script: {n}'
                    for n in sorted(set(deb) - listed)]
        bad_map += [f'{sys.argv[4]}: {n}@{deb[n]}, the version script says {node}'
                    for n in sorted(set(deb) & listed) if deb[n] != node]
    bad_prefix = sorted(n for n in exp if not n.startswith('kl_'))
    undeclared = sorted(n for n in exp if n.startswith('kl_') and n not in dec)
    missing = sorted(dec - exp)
    for n in bad_prefix:
        print(f'exported but not kl_*: {n}')
    for n in undeclared:
        print(f'exported but not declared KL_API in a public header: {n}')
    for n in missing:
        print(f'declared KL_API but not exported: {n}')
    for line in bad_map:
        print(line)
    print(f'{len(exp)} symbols exported, {len(dec)} declared')
    return 1 if bad_prefix or undeclared or missing or bad_map else 0


if __name__ == '__main__':
    sys.exit(main())
