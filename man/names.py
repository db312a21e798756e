#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""The names each scdoc page documents, from its NAME section (the one list of them).

    names.py --links PAGE.scd...   one line per extra name: "LINK TARGET" (kl_mutex_lock.3
                                   kl_mutex.3), for man/meson.build's install_symlink()
    names.py --list PAGE.scd...    one line per page: "FILE PAGE NAME..."

A page's NAME section is its first paragraph after "# NAME": "name, name, ... - what".
"""
import re
import sys
from pathlib import Path

TITLE = re.compile(r'^([A-Za-z0-9_.:+-]+)\((\d)\)')


def page_names(path):
    """(page, section, [names]) of one .scd file."""
    lines = Path(path).read_text().splitlines()
    m = TITLE.match(lines[0]) if lines else None
    if m is None:
        raise SystemExit(f'{path}:1: first line is not "name(section)"')
    page, sec = m.group(1), m.group(2)
    try:
        i = lines.index('# NAME') + 1
    except ValueError:
        raise SystemExit(f'{path}: no "# NAME" section')
    while i < len(lines) and not lines[i].strip():
        i += 1
    para = []
    while i < len(lines) and lines[i].strip():
        para.append(lines[i].strip())
        i += 1
    text = ' '.join(para)
    if ' - ' not in text:
        raise SystemExit(f'{path}: NAME is not "name, ... - description"')
    names = [n.strip() for n in text.split(' - ', 1)[0].split(',') if n.strip()]
    return page, sec, names


def main():
    mode, files = sys.argv[1], sys.argv[2:]
    for f in files:
        page, sec, names = page_names(f)
        if mode == '--links':
            for n in names:
                if n != page:
                    print(f'{n}.{sec} {page}.{sec}')
        elif mode == '--list':
            print(Path(f).name, page, ' '.join(names))
        else:
            raise SystemExit(f'unknown mode {mode}')


if __name__ == '__main__':
    main()
