#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Renders every built man page and fails on any warning: groff -ww (all warnings) with
the man and tbl preprocessors, and mandoc -T lint where mandoc is installed. Also
formats each page for an 80-column terminal (what man(1) shows) to catch a page that
renders empty.

    lint.py PAGE...
"""
import shutil
import subprocess
import sys


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


def main():
    bad = 0
    mandoc = shutil.which('mandoc')
    for page in sys.argv[1:]:
        rc, _, err = run(['groff', '-ww', '-t', '-man', '-z', page])
        if rc != 0 or err.strip():
            print(f'{page}: groff -ww:\n{err}')
            bad += 1
        rc, out, err = run(['groff', '-t', '-man', '-Tutf8', '-rLL=78n', page])
        if rc != 0 or len(out.split()) < 20:
            print(f'{page}: renders to almost nothing ({len(out.split())} words)')
            bad += 1
        if mandoc:
            # style-level messages are mandoc's taste, not errors: warnings and up only
            rc, out, err = run(['mandoc', '-T', 'lint', '-W', 'warning', page])
            if rc != 0 or out.strip():
                print(f'{page}: mandoc -T lint:\n{out}{err}')
                bad += 1
    print(f'{len(sys.argv) - 1} pages rendered, {bad} with warnings')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
