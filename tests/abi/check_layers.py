#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""The library's includes point down the layers, never up or sideways.

locks/ holds the frame (init.c, kl_internal.h, hooks.h, hooks.c: the one seam) and three
layer folders. What each may include with a quoted #include:

    substrate/    the substrate and kl_internal.h; never hooks.h, a primitive or an
                  instrument (a wait or a fence that reported to the seam would loop)
    primitives/   the substrate, other primitives, kl_internal.h and hooks.h; never an
                  instrument's private header (primitives reach instruments only through
                  the seam)
    instruments/  the substrate, other instruments, kl_internal.h and hooks.h; never a
                  primitive's private header
    frame         anything (it wires the instruments to the seam)

Internal includes are bare ("thread.h"), so a header's base name must be unique across
locks/. Headers found outside locks/ (kl_arch.h, kl_rseq.h: arch/) are not checked.
Each message names the including file, the line and the header.

    check_layers.py LOCKS_DIR
"""
import re
import sys
from pathlib import Path

LAYERS = ('substrate', 'primitives', 'instruments')
FRAME = 'frame'
# Which layers (and which frame headers) each layer may include.
ALLOWED = {
    'substrate': ({'substrate'}, {'kl_internal.h'}),
    'primitives': ({'substrate', 'primitives'}, {'kl_internal.h', 'hooks.h'}),
    'instruments': ({'substrate', 'instruments'}, {'kl_internal.h', 'hooks.h'}),
}
NOUN = {'substrate': 'a substrate file', 'primitives': 'a primitive',
        'instruments': 'an instrument'}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def layer_of(path, root):
    rel = path.relative_to(root)
    return rel.parts[0] if len(rel.parts) > 1 and rel.parts[0] in LAYERS else FRAME


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    root = Path(argv[1]).resolve()
    files = sorted(p for p in root.rglob('*') if p.suffix in ('.c', '.h') and p.is_file())
    where = {}
    errors = []
    for p in files:
        if p.suffix == '.h':
            if p.name in where:
                errors.append(f'{p.relative_to(root)}: the header name {p.name} is also '
                              f'{where[p.name].relative_to(root)} (bare includes need one)')
            where[p.name] = p
    for p in files:
        layer = layer_of(p, root)
        if layer == FRAME:
            continue
        layers_ok, frame_ok = ALLOWED[layer]
        for n, line in enumerate(p.read_text(errors='replace').splitlines(), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            name = Path(m.group(1)).name
            target = where.get(name)
            if target is None:
                continue
            tlayer = layer_of(target, root)
            if tlayer == FRAME and name in frame_ok or tlayer in layers_ok:
                continue
            what = name if tlayer == FRAME else f'{tlayer}/{name}'
            errors.append(f'{p.relative_to(root)}:{n}: {NOUN[layer]} includes {what}, '
                          f'which lies above or beside its layer')
    for e in errors:
        print('check_layers: ' + e, file=sys.stderr)
    if not errors:
        print(f'check_layers: {len(files)} files in {root.name}/, every include points down')
    return 1 if errors else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
