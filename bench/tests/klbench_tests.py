#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""klbench's behaviour tests, one per command line: `klbench_tests.py TEST KLBENCH`.

  adapters  every registered adapter (but the broken one) runs a 0.2 s smoke, lock and
            table workloads, and its counters verify
  busted    the deliberately broken adapter is caught by the counter verification
  output    CSV columns, JSON structure and raw (ministat) files have the promised shape
  latency   `klbench latency` measures every figure it promises, as CSV
  scenarios every scenario runs (tiny budget) or says which lock it needs (exit 4)
  plot      --plot writes SVGs with gnuplot, and says so clearly without it
  ab        bench/preload_ab.py's ministat verdict: proven worse past the line, proven
            better, no difference, on a command whose figures are fixed per side
  info      klock-info (next to klbench) prints its operation costs and its CPU-stall
            table: every length bin, a rate and a share that are numbers in range
"""
import csv
import io
import json
import os
import subprocess
import sys
import tempfile

SKIP = 77
EXIT_VERIFY = 3
EXIT_UNAVAILABLE = 4

CSV_COLUMNS = ("scenario,lock,family,threads,write_pct,cs,think,placement,workload,"
               "stripes,keys,repeat,elapsed_s,reads,writes,ops_per_s,p50_ns,p99_ns,"
               "p999_ns,max_ns,read_p50_ns,read_p99_ns,read_p999_ns,write_p50_ns,"
               "write_p99_ns,write_p999_ns,samples,thr_min,thr_max,fair_ratio,"
               "fair_sd_pct,user_s,sys_s,vcsw,ivcsw,wakes_per_acq,lock_pct,"
               "lockstat_wait_pct,lockstat_contended_pct,retries_per_read,fences_per_op,"
               "sleeps_per_op,kwakes_per_op,asleep_handover_pct,verified").split(",")


def klb(kb, *args, env=None):
    p = subprocess.run([kb] + list(args), capture_output=True, text=True, env=env)
    return p.returncode, p.stdout, p.stderr


def adapters(kb):
    """(name, kind) of every adapter `klbench list` shows, and the names not built in."""
    rc, out, _ = klb(kb, "list")
    assert rc == 0, "klbench list failed"
    rows, missing = [], []
    for line in out.splitlines()[1:]:
        if not line.strip():
            break
        rows.append((line.split()[0], line.split()[2]))
    for line in out.splitlines():
        if line.startswith("not built in:"):
            missing = line.split(":")[1].split()
    return rows, missing


def fail(msg):
    print("FAIL:", msg)
    return 1


def rows_of(out):
    return list(csv.DictReader(io.StringIO(out)))


def test_adapters(kb):
    names, _ = adapters(kb)
    bad = 0
    # The peers this build was configured with (meson passes KLBENCH_EXPECT_PEERS): each
    # must be registered - a C++ adapter whose constructor did not run would otherwise
    # just be absent from the list and from this test.
    listed = {n for n, _ in names}
    for want in os.environ.get("KLBENCH_EXPECT_PEERS", "").split():
        if want not in listed:
            bad += fail(f"{want}: configured but not in `klbench list`")
    for name, kind in names:
        if name == "busted":
            continue
        for workload in (["--workload", "lock"], ["--workload", "table", "--stripes", "4"]):
            rc, out, err = klb(kb, "run", "-l", name, "-t", "2", "-w", "50", "-d", "0.2",
                               "--warmup", "0.02", "--no-table", "-q", "--csv", "-",
                               *workload)
            rows = rows_of(out)
            ok = rc == 0 and len(rows) == 1 and rows[0]["verified"] == "ok"
            ok = ok and int(rows[0]["writes"]) > 0
            if ok and kind == "rw":
                ok = int(rows[0]["reads"]) > 0
            label = f"{name} ({workload[1]})"
            if not ok:
                bad += fail(f"{label}: exit {rc}, rows {rows}, stderr {err.strip()}")
            else:
                print(f"ok: {label}: {rows[0]['reads']} reads, {rows[0]['writes']} writes "
                      "verified")
    return 1 if bad else 0


def test_busted(kb):
    # A lock that does nothing must lose updates with 4 writers; on a loaded 1-CPU
    # machine the threads may rarely interleave, so three chances.
    for attempt in range(3):
        rc, out, err = klb(kb, "run", "-l", "busted", "-t", "4", "-w", "100", "-c", "32",
                           "-d", "0.3", "-q", "--no-table")
        if rc == EXIT_VERIFY and "LOST" in err and "FAILED" in err:
            print("ok: busted caught:", err.strip().splitlines()[0])
            return 0
        print(f"attempt {attempt + 1}: exit {rc}: {err.strip()}")
    return fail("the busted lock was never caught: the verification does not work")


def same_memory_per_repeat(runs):
    """Every lock's run of repeat r uses the same placement (lock and counters at the same
    addresses) and different repeats use different ones: a lock's results must not depend
    on where the allocator happened to put it (engine.c, "placement")."""
    by_repeat = {}
    for run in runs:
        mem = run.get("memory")
        if mem is None:
            return "JSON run lacks 'memory'"
        if mem["slot"] != run["repeat"] % 8:
            return f"repeat {run['repeat']} used slot {mem['slot']}, want repeat % 8"
        where = (mem["lock"], mem["counters"])
        if by_repeat.setdefault(run["repeat"], where) != where:
            return (f"repeat {run['repeat']}: {run['lock']} ran at {where}, another lock at "
                    f"{by_repeat[run['repeat']]}")
    if len(set(by_repeat.values())) != len(by_repeat):
        return f"repeats share a placement: {by_repeat}"
    return None


def slot_filled_to_its_end(kb):
    """A table whose counters end exactly at a slot's end (16 MiB: the engine's page, then
    0x400 into the next, then 1048256 buckets x 2 words x 8 bytes) leaves no room for the
    lock: it must come from malloc, in every slot (the last slot ends the arena)."""
    rc, out, err = klb(kb, "run", "-q", "-l", "pthread_mutex", "--workload", "table",
                       "--keys", "1048256", "-c", "1", "-t", "1", "-r", "8", "-d", "0.01",
                       "--warmup", "0.01", "--json", "-", "--no-table")
    if rc != 0:
        return f"a table that fills a slot: klbench exited {rc}: {err}"
    slots = [run["memory"]["slot"] for run in json.loads(out)["runs"]]
    if slots != [-1] * 8:
        return f"a table that fills a slot ran in slots {slots}, want malloc's memory (-1)"
    return None


def test_output(kb):
    with tempfile.TemporaryDirectory() as d:
        c, j, raw = os.path.join(d, "r.csv"), os.path.join(d, "r.json"), os.path.join(d, "raw")
        rc, out, err = klb(kb, "run", "-l", "pthread_mutex,pthread_rwlock", "-t", "1,2",
                           "-w", "0,50", "-d", "0.05", "--warmup", "0.01", "-r", "3", "-q",
                           "--csv", c, "--json", j, "--raw", raw)
        if rc != 0:
            return fail(f"run failed ({rc}): {err}")
        header = open(c).readline().strip().split(",")
        if header != CSV_COLUMNS:
            return fail(f"CSV header changed: {header}")
        rows = list(csv.DictReader(open(c)))
        if len(rows) != 2 * 2 * 2 * 3:
            return fail(f"{len(rows)} CSV rows, want 24 (2 locks x 2 threads x 2 write% x 3)")
        if any(len(r) != len(CSV_COLUMNS) or r["verified"] != "ok" for r in rows):
            return fail("a CSV row has the wrong width or did not verify")
        if [r["repeat"] for r in rows[:8]] != ["0"] * 8:
            return fail("repeats are not interleaved (A B A B): first 8 rows not all repeat 0")
        doc = json.load(open(j))
        for key in ("klbench", "scenario", "machine", "runs"):
            if key not in doc:
                return fail(f"JSON lacks '{key}'")
        run = doc["runs"][0]
        for key in ("lock", "threads", "write_pct", "ops_per_s", "read_latency_ns",
                    "write_latency_ns", "fairness", "user_s", "sys_s", "vcsw", "ivcsw",
                    "wakes_per_acq", "fences_per_op", "sleeps_per_op", "kwakes_per_op",
                    "asleep_handover_pct", "lock_pct", "verified"):
            if key not in run:
                return fail(f"JSON run lacks '{key}'")
        if len(run["fairness"]["per_thread_ops"]) != run["threads"]:
            return fail("per_thread_ops does not have one entry per thread")
        if len(doc["runs"]) != 24:
            return fail("JSON has %d runs, want 24" % len(doc["runs"]))
        err = same_memory_per_repeat(doc["runs"])
        if err:
            return fail(err)
        err = slot_filled_to_its_end(kb)
        if err:
            return fail(err)
        files = sorted(os.listdir(raw))
        if len(files) != 8 * 3:
            return fail(f"raw: {len(files)} files, want 24 (8 configurations x 3 metrics)")
        for f in files:
            vals = open(os.path.join(raw, f)).read().split()
            if len(vals) != 3 or any(float(v) < 0 for v in vals):
                return fail(f"raw file {f} should hold 3 numbers, one per line")
        rc, out, _ = klb(kb, "compare", os.path.join(raw, "pthread_mutex-t1-w0-cs4.ops"),
                         os.path.join(raw, "pthread_mutex-t2-w0-cs4.ops"))
        if rc != 0 or "confidence" not in out:
            return fail("klbench compare does not read the raw files")
        rc, out, _ = klb(kb, "run", "-l", "pthread_mutex", "-t", "1", "-d", "0.02", "-q")
        body = [l for l in out.splitlines() if not l.startswith("#")]
        if rc != 0 or not out.startswith("# klbench run") or not body[0].startswith("lock "):
            return fail("the table is missing or malformed:\n" + out)
        if len(body) != 2 or body[1].split()[0] != "pthread_mutex" or body[1].split()[-1] != "ok":
            return fail("the table should have one pthread_mutex row that verified:\n" + out)
    print("ok: CSV (24 rows x %d columns), JSON, 24 raw files, table" % len(CSV_COLUMNS))
    return 0


def test_latency(kb):
    rc, out, err = klb(kb, "latency", "-l", "pthread_rwlock,pthread_mutex", "-r", "2",
                       "--iters", "4096", "--samples", "2", "--gap", "1ms", "--readers",
                       "0,1", "--csv", "-", "-q")
    if rc != 0:
        return fail(f"latency failed ({rc}): {err}")
    text = out[out.index("lock,family,measure"):]
    rows = rows_of(text)
    seen = {(r["lock"], r["measure"], r["readers"]) for r in rows}
    want = {("busted", "write_pair", "0"), ("pthread_mutex", "write_pair", "0"),
            ("pthread_rwlock", "read_pair", "0"), ("pthread_rwlock", "write_isolated", "1"),
            ("pthread_rwlock", "write_burst", "1"), ("kl_fence_heavy", "fence_heavy", "1"),
            ("busted", "write_pair_inline", "0"), ("pthread_mutex", "write_pair_inline", "0"),
            ("pthread_rwlock", "read_pair_inline", "0")}
    if not want <= seen:
        return fail(f"latency misses {want - seen}")
    if any(float(r["ns"]) <= 0 for r in rows if r["lock"] != "busted"):
        return fail("a latency is not positive")
    if "uncontended lock+unlock" not in out or "writer cost" not in out:
        return fail("latency tables missing")
    # Every adapter's own pair loop (inline pairs) runs, leaves its lock free (klbench
    # exits 3 otherwise) and is timed.
    names = {n for n, _ in adapters(kb)[0]}
    loops = {"kl_mutex": "write", "kl_rwlock": "read", "kl_rmlock": "read",
             "kl_pcpu_rwsem": "read", "pthread_mutex": "write", "pthread_rwlock": "read",
             "ck_rwlock": "read", "urcu_memb": "read"}
    loops = {n: side for n, side in loops.items() if n in names}
    rc, out, err = klb(kb, "latency", "-l", ",".join(loops), "-r", "1", "--iters", "4096",
                       "--readers", "0", "--samples", "1", "--gap", "1ms", "--csv", "-", "-q")
    if rc != 0:
        return fail(f"latency over the pair loops failed ({rc}): {err}")
    inl = {(r["lock"], r["measure"]) for r in rows_of(out[out.index("lock,family,measure"):])
           if float(r["ns"]) > 0}
    missing = {n for n, side in loops.items() if (n, side + "_pair_inline") not in inl}
    if missing:
        return fail(f"no inline pair figure for {sorted(missing)}")
    print(f"ok: latency: {len(rows)} measurements; inline pairs for {len(loops)} locks")
    return 0


def test_scenarios(kb):
    _, missing = adapters(kb)
    rc, out, _ = klb(kb, "scenario", "list")
    names = [l.split()[0] for l in out.splitlines()[2:] if l.strip()]
    bad = 0
    with tempfile.TemporaryDirectory() as d:
        for name in names:
            if name == "floors":
                continue   # a minute of measurements: run by hand (docs/klbench.md)
            rc, out, err = klb(kb, "scenario", name, "-d", "0.03", "--warmup", "0.01", "-r",
                               "3", "-q", "--out", d)
            if rc == EXIT_UNAVAILABLE:
                needed = [m for m in missing if f"needs {m}, not built in" in out]
                ok = len(needed) == 1
                print(f"{'ok' if ok else 'FAIL'}: {name}: needs {needed}")
            else:
                ok = rc == 0 and f"== {name}:" in out and os.path.exists(
                    os.path.join(d, name + ".txt"))
                print(f"{'ok' if ok else 'FAIL'}: {name}: exit {rc}")
            if not ok:
                bad += fail(f"{name}: exit {rc}\n{out}\n{err}")
        rc, out, _ = klb(kb, "scenario", "no-such-scenario")
        bad += rc != 2
    return 1 if bad else 0


def test_plot(kb):
    with tempfile.TemporaryDirectory() as d:
        svg = os.path.join(d, "t.svg")
        args = ["run", "-l", "pthread_mutex,pthread_spin", "-t", "1,2", "-d", "0.03", "-q",
                "--no-table", "--plot", svg]
        env = dict(os.environ, PATH="/nonexistent")
        rc, _, err = klb(kb, *args, env=env)
        if rc != 0 or "gnuplot is not installed" not in err:
            return fail(f"without gnuplot: exit {rc}, message {err!r}")
        print("ok: without gnuplot, a clear message and exit 0")
        if subprocess.run(["sh", "-c", "command -v gnuplot"], capture_output=True).returncode:
            print("SKIP: gnuplot is not installed; the SVG output was not checked")
            return SKIP
        rc, _, err = klb(kb, *args)
        # one latency CDF per lock, each titled with what it shows and the machine
        lats = [os.path.join(d, f"t-latency-{lock}.svg") for lock in ("pthread_mutex",
                                                                       "pthread_spin")]
        for f in [svg] + lats:
            if rc != 0 or not os.path.exists(f) or "<svg" not in open(f).read():
                return fail(f"{f} not written as SVG ({rc}, {err}; {os.listdir(d)})")
        for f, what in [(svg, "throughput against threads")] + [
                (f, "acquisition latency CDF of " + f.split("t-latency-")[1][:-4]) for f in lats]:
            text = open(f).read()
            if what not in text or "CPUs" not in text:
                return fail(f"{f}: title does not say '{what}' and the machine")
    print("ok: throughput SVG and one latency SVG per lock, titled, written")
    return 0


def test_usage(kb):
    """Bad input gets exit status 2 and a message that says what is wrong."""
    _, missing = adapters(kb)
    cases = [(["run", "-t", "0"], "thread counts"), (["run", "-w", "150"], "percentage"),
             (["run", "--sample", "3"], "power of two"), (["run", "-c", "0"], "--cs"),
             (["run", "-l", "no_such_lock"], "unknown lock"), (["run", "-d", "fast"], "duration"),
             (["run", "-p", "everywhere"], "placement"), (["compare", "-c", "97", "x"], "level"),
             (["frobnicate"], "unknown command"), (["run", "-t", "1-8*1"], "thread list")]
    if missing:
        cases.append((["run", "-l", missing[0]], f"needs {missing[0]}, not built in"))
    bad = 0
    for args, words in cases:
        rc, _, err = klb(kb, *args)
        ok = rc == 2 and words in err
        bad += not ok
        print(f"{'ok' if ok else 'FAIL'}: klbench {' '.join(args)}: exit {rc}: {err.strip()[:90]}")
    rc, out, _ = klb(kb, "run", "-l", "pthread_mutex", "-t", "1", "-p", "compact,scatter", "-d",
                     "0.02", "--warmup", "0", "-q", "--no-table", "--csv", "-")
    places = [r["placement"] for r in rows_of(out)]
    if rc != 0 or places != ["compact", "scatter"]:
        bad += fail(f"placements compact,scatter gave {places} (exit {rc})")
    return 1 if bad else 0


# A stand-in program for preload_ab.py: prints "rate: X", X = the side's base (B: under
# LD_PRELOAD) plus a fixed cycle of offsets, counted in a file, so the figures are known.
FAKE_PROGRAM = r'''
import os, sys
count, base_a, base_b = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
n = int(open(count).read()) if os.path.exists(count) else 0
open(count, "w").write(str(n + 1))
side = base_b if os.environ.get("LD_PRELOAD") else base_a
print("rate:", side + (-1, 0, 1)[(n // 2) % 3])
'''


def test_ab(kb):
    """preload_ab.py names the worse side with ministat, and the 5% line, from known runs."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "preload_ab.py")
    cases = [  # glibc's base, klock's base, --lower, what the verdict must say
        (100, 110, True, "klock worse by 10.0% +/- 1.2% (proven; past 5%: yes)"),
        (100, 104, True, "klock worse by 4.0% +/- 1.2% (proven; past 5%: not proven)"),
        (100, 106, True, "klock worse by 6.0% +/- 1.2% (proven; past 5%: not proven)"),
        (100, 110, False, "klock better by 10.0% +/- 1.2% (proven)"),
        (100, 100, True, "ministat (95%): no difference proven")]
    bad = 0
    with tempfile.TemporaryDirectory() as d:
        prog = os.path.join(d, "fake.py")
        with open(prog, "w") as f:
            f.write(FAKE_PROGRAM)
        for i, (a, b, lower, want) in enumerate(cases):
            cmd = [sys.executable, script, "-n", "6", "--klbench", kb, "--metric", "rate",
                   "--pattern", r"rate: ([0-9.]+)"] + (["--lower"] if lower else []) + \
                  [kb, "--", sys.executable, prog, os.path.join(d, f"n{i}"), str(a), str(b)]
            p = subprocess.run(cmd, capture_output=True, text=True)
            last = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""
            ok = p.returncode == 0 and want in last
            bad += not ok
            print(f"{'ok' if ok else 'FAIL'}: {a} vs {b}{' lower' if lower else ''}: {last!r}"
                  + ("" if ok else f" (want {want!r}; exit {p.returncode}: {p.stderr.strip()})"))
    return 1 if bad else 0


STALL_BINS = ["2-5 us", "5-10 us", "10-20 us", "20-50 us", "50-100 us", "100 us-1 ms",
              "over 1 ms"]


def test_info(kb):
    info = os.path.join(os.path.dirname(kb), "klock-info")
    p = subprocess.run([info], capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        return fail(f"klock-info exited {p.returncode}: {p.stderr.strip()}")
    lines = p.stdout.splitlines()
    if not any(line.startswith("wait/wake ping-pong, one way") for line in lines):
        return fail("no ping-pong line in klock-info's operation table")
    head = [i for i, line in enumerate(lines) if line.startswith("a running thread loses its CPU")]
    if len(head) != 1:
        return fail("no CPU-stall table in klock-info's output")
    rows = lines[head[0] + 1:head[0] + 1 + len(STALL_BINS)]
    for name, row in zip(STALL_BINS, rows + [""] * len(STALL_BINS)):
        fields = row[len(name):].split() if row.startswith(name) else []
        if len(fields) != 2 or not fields[1].endswith("%"):
            return fail(f"stall row {name!r} missing or malformed: {row!r}")
        rate, share = float(fields[0]), float(fields[1][:-1])
        if rate < 0 or not 0 <= share <= 100:
            return fail(f"stall row {name!r} out of range: {row!r}")
        print(f"ok: {row}")
    return 0


TESTS = {"usage": test_usage, "adapters": test_adapters, "busted": test_busted, "output": test_output,
         "latency": test_latency, "scenarios": test_scenarios, "plot": test_plot, "ab": test_ab,
         "info": test_info}

if __name__ == "__main__":
    sys.exit(TESTS[sys.argv[1]](os.path.abspath(sys.argv[2])))
