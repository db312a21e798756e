#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""kltorture --help names every long option (long_opts[] in kltorture.c, except the
re-exec child's internal argument) and every environment variable the sources read
(getenv("...") or a "KLTORTURE_*" literal), and exits 0 with the text on stdout.

    check_help.py KLTORTURE SOURCE...
"""
import re
import subprocess
import sys
from pathlib import Path

OPT = re.compile(r'\{\s*"([a-z][a-z-]*)"\s*,\s*(?:no|required|optional)_argument')
# getenv("X") and helpers such as env_double("KLTORTURE_SECS", ...)
ENV = re.compile(r'getenv\("([A-Z_][A-Z0-9_]*)"\)|"(KLTORTURE_[A-Z0-9_]+)"')


def main():
    prog, sources = sys.argv[1], [Path(p) for p in sys.argv[2:]]
    opts, envs = set(), set()
    for src in sources:
        text = src.read_text()
        opts.update(OPT.findall(text))
        envs.update(a or b for a, b in ENV.findall(text))
    res = subprocess.run([prog, '--help'], capture_output=True, text=True)
    if res.returncode != 0:
        print(f'{prog} --help exited {res.returncode}: {res.stderr}')
        return 1
    text = res.stdout
    missing = [f'--{o}' for o in sorted(opts) if f'--{o}' not in text]
    missing += [e for e in sorted(envs) if e not in text]
    for m in missing:
        print(f'kltorture --help does not mention {m} (edit usage() in tests/torture/kltorture.c)')
    print(f'{len(opts)} options, {len(envs)} environment variables checked')
    if not opts or not envs:
        print('found no options or no getenv() calls: the patterns no longer match the sources')
        return 1
    return 1 if missing else 0


if __name__ == '__main__':
    sys.exit(main())
