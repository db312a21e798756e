#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""`klbench compare` must print exactly what Debian's ministat (20150715) prints on the
same files: every statistic, every confidence-interval line, every plot row.

usage: compare_ministat.py KLBENCH DATADIR

Each case runs both programs with the same arguments (and the same stdin), then
compares the outputs field by field - N, Min, Max, Median, Avg, Stddev per set, the
difference, its half-width, the percentages and the pooled s per comparison - and
then line by line (plot, headers, legends). A missing ministat skips the test (exit 77,
meson's "skipped") with a message."""
import os
import re
import shutil
import subprocess
import sys

SKIP = 77

CASES = [
    ["mutex-a.ops", "mutex-b.ops"],                        # a clear difference
    ["mutex-a.ops", "mutex-c.ops"],                        # no difference proven
    ["mutex-a.ops", "mutex-b.ops", "mutex-c.ops"],
    ["-c", "80", "mutex-a.ops", "mutex-c.ops"],
    ["-c", "90", "mutex-a.ops", "mutex-b.ops"],
    ["-c", "98", "lat-a.ns", "lat-b.ns"],
    ["-c", "99", "lat-a.ns", "lat-b.ns"],
    ["-c", "99.5", "mutex-a.ops", "mutex-b.ops"],
    ["lat-a.ns", "lat-b.ns"],                              # stacked duplicates
    ["-s", "lat-a.ns", "lat-b.ns", "mutex-a.ops"],
    ["-A", "mutex-a.ops", "mutex-b.ops"],
    ["-n", "big-a.txt", "big-b.txt", "small-a.txt"],
    ["big-a.txt", "big-b.txt"],                            # df > 100: normal quantiles
    ["-w", "40", "small-a.txt", "small-b.txt"],
    ["-w", "131", "big-a.txt", "big-b.txt"],
    ["flat.txt"],                                          # zero span
    ["flat.txt", "small-b.txt"],
    ["-C", "3", "-d", ", ", "cols.csv", "cols2.csv"],     # columns, comments, blanks
    ["mutex-a.ops", "mutex-b.ops", "mutex-c.ops", "lat-a.ns", "lat-b.ns", "big-a.txt",
     "big-b.txt"],                                          # seven sets, every symbol
]
STDIN_CASES = ["mutex-b.ops"]                             # no file: read stdin
FAILING_CASES = [["-C", "3", "-d", ",", "cols.csv"],      # bad data: both refuse (2)
                 ["small-a.txt", "missing-file"]]

VITALS = re.compile(r"^(.) +(\d+) +(\S+) +(\S+) +(\S+) +(\S+) +(\S+)$")
VITAL_NAMES = ["symbol", "N", "Min", "Max", "Median", "Avg", "Stddev"]


def run(cmd, datadir, stdin_file=None):
    stdin = open(os.path.join(datadir, stdin_file)) if stdin_file else subprocess.DEVNULL
    p = subprocess.run(cmd, cwd=datadir, stdin=stdin, capture_output=True, text=True)
    return p.returncode, p.stdout


def fields(line):
    m = VITALS.match(line)
    if m:
        return list(zip(VITAL_NAMES, m.groups()))
    m = re.match(r"^\t(\S+?)(%?) \+/- (\S+?)(%?)$", line)
    if m:
        kind = "percent" if m.group(2) else "difference"
        return [(kind, m.group(1)), (kind + " half-width", m.group(3))]
    m = re.match(r"^\t\(Student's t, pooled s = (\S+)\)$", line)
    if m:
        return [("pooled s", m.group(1))]
    return None


def compare(case, want, got):
    """Returns an error message, or None when the outputs are identical. Statistics are
    compared first, field by field, so that a wrong figure is named as such; then every
    line (legend, plot, headers)."""
    wl, gl = want.splitlines(), got.splitlines()
    wf = [f for f in map(fields, wl) if f is not None]
    gf = [f for f in map(fields, gl) if f is not None]
    for i, (fw, fg) in enumerate(zip(wf, gf)):
        for (name, a), (_, b) in zip(fw, fg):
            if a != b:
                return f"statistics line {i + 1}: {name} is {b}, ministat says {a}"
    if len(wf) != len(gf):
        return f"ministat prints {len(wf)} statistics lines, klbench {len(gf)}"
    for i, (w, g) in enumerate(zip(wl, gl)):
        if w != g:
            return f"line {i + 1} differs:\n  ministat: {w!r}\n  klbench:  {g!r}"
    if len(wl) != len(gl):
        return f"ministat prints {len(wl)} lines, klbench {len(gl)}"
    return None


def main():
    klbench, datadir = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    ministat = shutil.which("ministat")
    if ministat is None:
        print("SKIP: ministat is not installed (Debian: apt-get install ministat); "
              "klbench compare was not cross-checked")
        return SKIP
    failures = 0
    checks = [(c, None) for c in CASES] + [([], f) for f in STDIN_CASES]
    for case, stdin in checks:
        rw, want = run([ministat] + case, datadir, stdin)
        rg, got = run([klbench, "compare"] + case, datadir, stdin)
        err = compare(case, want, got)
        if err is None and rw != rg:
            err = f"exit status {rg}, ministat's {rw}"
        label = " ".join(case) + (f" < {stdin}" if stdin else "")
        if err:
            failures += 1
            print(f"FAIL: compare {label}: {err}")
        else:
            print(f"ok: compare {label} ({len(want.splitlines())} lines identical)")
    for case in FAILING_CASES:
        rw, _ = run([ministat] + case, datadir)
        rg, _ = run([klbench, "compare"] + case, datadir)
        ok = rw != 0 and rg != 0
        failures += not ok
        print(f"{'ok' if ok else 'FAIL'}: compare {' '.join(case)} refused "
              f"(klbench {rg}, ministat {rw})")
    print(f"{failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
