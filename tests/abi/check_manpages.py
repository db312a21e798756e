#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Every function libklock.so exports has a man page, and every public header has one.

A function has a page when its name is in the NAME section of a man/*.3.scd page (that
name is then installed as a link to the page). The page for include/klock/X.h is the one
whose SYNOPSIS includes <klock/X.h>. Messages name the function and the file to edit.

    check_manpages.py LIBKLOCK.so INCLUDE_DIR MAN_DIR
"""
import re
import subprocess
import sys
from pathlib import Path

# man/names.py: the man folder of the source tree this checker sits in (at any depth).
sys.path.insert(0, str(next(d / 'man' for d in Path(__file__).resolve().parents
                            if (d / 'man' / 'names.py').is_file())))
from names import page_names  # noqa: E402

# nm -D types of functions: text, weak, indirect (ifunc).
FUNC_TYPES = 'TWi'
DECL = re.compile(r'\bKL_API\b[^;{(]*?\b(kl_[A-Za-z0-9_]+)\s*\(', re.S)
INCLUDE = re.compile(r'#include <klock/([a-z_]+\.h)>')


def exported_functions(lib):
    out = subprocess.run(['nm', '-D', '--defined-only', lib], check=True,
                         capture_output=True, text=True).stdout
    return {p[2].split('@')[0] for p in (l.split() for l in out.splitlines())
            if len(p) == 3 and p[1] in FUNC_TYPES and p[2].startswith('kl_')}


def main():
    lib, incdir, mandir = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    documented, header_page, bad = {}, {}, 0
    for scd in sorted(mandir.glob('*.3.scd')):
        _, _, names = page_names(scd)
        for n in names:
            documented[n] = scd.name
        for h in INCLUDE.findall(scd.read_text()):
            header_page.setdefault(h, scd.name)
    listed = (mandir / 'meson.build').read_text()
    for scd in sorted(mandir.glob('*.scd')):
        if f"'{scd.name[:-4]}'" not in listed:
            print(f'man/{scd.name} is not installed: add \'{scd.name[:-4]}\' to man_pages '
                  f'in man/meson.build')
            bad += 1
    declared_in = {}
    headers = sorted(incdir.glob('*.h'))
    for h in headers:
        for n in DECL.findall(h.read_text()):
            declared_in[n] = h.name
    for h in headers:
        if h.name not in header_page:
            print(f'include/klock/{h.name} has no man page: add man/kl_{h.stem}.3.scd '
                  f'(SYNOPSIS "#include <klock/{h.name}>") and list it in man/meson.build')
            bad += 1
    funcs = exported_functions(lib)
    for f in sorted(funcs - documented.keys()):
        hdr = declared_in.get(f)
        page = header_page.get(hdr, f'kl_{Path(hdr).stem}.3.scd' if hdr else '?')
        print(f'{f} has no man page: add "{f}" to the NAME list of man/{page} (the page '
              f'for include/klock/{hdr}) and describe it there')
        bad += 1
    print(f'{len(funcs)} exported functions, {len(funcs & documented.keys())} with a page; '
          f'{len(headers)} public headers')
    return 1 if bad or not funcs else 0


if __name__ == '__main__':
    sys.exit(main())
