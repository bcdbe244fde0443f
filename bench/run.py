#!/usr/bin/python3
"""bench/run.py - hangwatch's benchmarks (`make bench`): runs every
measurement side by side in one go, prints ONE table on stdout and puts the
same table, with the machine it ran on, into docs/benchmarks.md between the
"results" markers (the method and the discussion around it are prose kept by
hand).  Progress goes to stderr.

    /usr/bin/python3 bench/run.py [--build build] [--doc docs/benchmarks.md | --no-doc]
                                  [--parts observer,capture,detection,lost,node,python,kernel,redis,sampling,many,fleet,start,line]

What is measured, and why this way, is in docs/benchmarks.md.  In short:
  1. observer cost per loop turn: epoll_wait(..., 0) in a loop, plain vs
     under `hangwatch run`, as alternating runs, as in-process pairs, as
     callgrind instruction counts, and with a wait that never enters the
     kernel (the observer's own work);
  2. how long one capture stops a sleeping single-threaded target;
  3. the same stopping every thread of 12- and 200-thread targets;
  4. how long after the threshold hangs are detected, exact vs periodic,
     and exact through the kernel observer;
  5. how much CPU time a program that wants every CPU loses after a
     capture, while the report worker works, at the normal policy vs at
     SCHED_IDLE, as the program itself sees it;
  6. what the node flags that name JavaScript frames cost node: start-up
     and a compile-heavy workload, with and without them; what node costs
     under `hangwatch run`, which reads V8's own records and adds no flag
     (start-up and the workload, against plain node); and what reading
     JavaScript frames adds to a capture's stop, per thread (node_flags.py,
     which also runs alone; skipped when there is no node);
  7. what reading Python's frame chains adds to a capture's stop, per
     thread stopped, for each CPython from 3.8 to 3.13 and Debian's
     (tests/pythons.py finds them; a missing one is a skipped row):
     all-thread captures of a sleeping Python process, alternately with
     and without the reader;
  8. what the kernel observer costs per system call, to the process it
     watches and to one it does not (kernel_observer.py, also runs alone);
  9. what watching redis-server costs its throughput: redis-benchmark
     against a server started plain and under `hangwatch run`, alternating
     (redis_side_by_side.py, also runs alone);
 10. what early sampling costs a spinning loop thread per sample (the
     kernel's samples and ptrace stops, at 50 ms and 5 ms), and what a
     hang's report costs it, measured from inside the program
     (sampling_cost.py, also runs alone);
 11. 1,000 simultaneous hangs: each announced and counted, how many
     reported, the agent's peak memory (many_hangs.py, also runs alone);
 13. one agent for a machine: `watch --all` over 200 processes of 4 loop
     threads turning as fast as the machine lets them (asked 1,000 a
     second), 10 hangs: every one reported, detection's p99 after the
     threshold, the agent's share of a core and its peak memory; and a
     smaller fleet under --attach fentry on Debian's stock kernel booted
     under QEMU (fleet.py, also runs alone; it needs root, as watch --all
     does);
 14. `hangwatch run`'s own start and exit: `run -- true` against `true`,
     and node under it against plain node, spawn to exit, ABBA pairs
     (run_startup.py, also runs alone);
 15. the line at detection: how soon after the threshold a hang is said
     on stderr, with two CPU hogs beside (line_delay.py, also runs alone).
Not run here: `make soak` (soak.py), an hour of hangs and process churn
under one agent, whose rows (numbered 12) it prints for the same table.
Every figure is a median / p99 over many samples, never one run, but for
part 11, one run whose figures are counts.  Standard
library only, Debian's /usr/bin/python3.
"""

import argparse
import ctypes
import ctypes.util
import datetime
import glob
import json
import math
import os
import platform
import random
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fleet  # noqa: E402 (part 13, next to this file)
import line_delay  # noqa: E402 (part 15, next to this file)
import kernel_observer  # noqa: E402 (part 8, next to this file)
import many_hangs  # noqa: E402 (part 11, next to this file)
import node_flags  # noqa: E402 (part 6, next to this file)
import redis_side_by_side  # noqa: E402 (part 9, next to this file)
import run_startup  # noqa: E402 (part 14, next to this file)
import sampling_cost  # noqa: E402 (part 10, next to this file)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
import pythons  # noqa: E402 (the interpreters of part 7, as the tests find them)

# Budgets (docs/benchmarks.md says where each comes from).
OBSERVER_BUDGET_NS = 15.0
STOP_BUDGET_US = 100.0
BUSY_STOP_BUDGET_US = 2000.0  # the same stop beside two CPU hogs, p99 (issue [23])
PYTHON_PER_THREAD_BUDGET_US = 200.0
EXACT_P99_BUDGET_MS = 2.0      # past the threshold, with exact busy starts

# Sizes, chosen so that the whole run takes about four minutes on 2 cores.
SPIN_RUN_PAIRS = 8            # alternating plain / watched processes
SPIN_RUN_ITERATIONS = 300000  # per process
SPIN_CHUNK = 5000             # iterations per timed chunk
AB_ITERATIONS = 500000        # per in-process paired run (50 pairs of chunks)
AB_RUNS = 8                   # processes: where code and data land differs from one to the next
AB_THREADED_RUNS = 4          # the same with a second thread (libc's multi-threaded path)
TOUCH_ITERATIONS = 2000000    # the page probe: one run, 200 pairs
FAKE_PAIRS = 5
FAKE_ITERATIONS = 5000000
FAKE_CHUNK = 100000
TOUCH_PAGES = 8
VG_COUNTS = (100000, 200000)  # two lengths, differenced: start-up cancels
CAPTURES_SINGLE = 100         # per run; CAPTURE_RUNS runs, each with a fresh target
CAPTURE_RUNS = 3
CAPTURES_THREADED = ((12, 60), (200, 50))
HANG_THRESHOLD_MS = 500
HANG_PERIOD_MS = 250
HANG_LONG = (850, 30)         # long enough for periodic mode to see every one
HANG_SHORT = (600, 10)        # threshold + 100 ms: periodic mode misses most
EXACT_HANGS = (75, 25)        # exact mode: 100 hangs, so that its p99 is not just the largest
HANG_IDLE_MIN_MS = 50
LOST_PAIRS = 8                # runs per worker policy, interleaved (ABBA order)
LOST_THRESHOLD_MS = 500
LOST_WINDOW_MS = 500          # lost time counted from the capture's stop on
LOST_BUSY_WORKER_MS = 10      # a worker that ran more than this during the hang
LOST_SHARED_MS = 20           # two threads on one CPU for longer than this in the window
PYTHON_DEPTH = 30             # Python calls below each sleeping thread's sleep
PYTHON_CAPTURES = ((1, 100), (8, 60))  # (threads, captures of each kind), for each interpreter
LOST_HANG_MS = 1100           # threshold + window + margin; the first re-check
                              # (threshold + 1 s check period) comes after it


def log(msg):
    print("bench: " + msg, file=sys.stderr, flush=True)


# ---- statistics -----------------------------------------------------------

def median(xs):
    s = sorted(xs)
    n = len(s)
    if n == 0:
        return float("nan")
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2.0


def pct(xs, p):
    """Nearest-rank percentile (p in 0..100): a value that was observed."""
    s = sorted(xs)
    if not s:
        return float("nan")
    k = max(1, int(math.ceil(p / 100.0 * len(s))))
    return s[k - 1]


def median_ci(xs):
    """Distribution-free 95% confidence interval of the median (binomial
    order statistics)."""
    s = sorted(xs)
    n = len(s)
    if n < 6:
        return (float("nan"), float("nan"))
    half = 1.96 * math.sqrt(n) / 2.0
    lo = max(0, int(math.floor(n / 2.0 - half)))
    hi = min(n - 1, int(math.ceil(n / 2.0 + half)))
    return (s[lo], s[hi])


def fmt(x, digits=1):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:,.{digits}f}"


# ---- running things -------------------------------------------------------

class Bench:
    def __init__(self, build):
        self.build = os.path.abspath(build)
        self.bin = os.path.join(self.build, "bin")
        self.hangwatch = os.path.join(self.bin, "hangwatch")
        self.preload = os.path.join(self.build, "lib", "hangwatch", "libhangwatch-preload.so")
        self.fake = os.path.join(self.build, "lib", "bench", "libbench-fake-wait.so")
        self.work = os.path.join(self.build, "bench-work")  # not build/bench: CMake owns that
        for path in (self.hangwatch, self.preload, self.fake,
                     os.path.join(self.bin, "bench-epoll-spin"),
                     os.path.join(self.bin, "bench-capture"),
                     os.path.join(self.bin, "bench-hang-loop"),
                     os.path.join(self.bin, "bench-lost-time")):
            if not os.path.exists(path):
                sys.exit(f"bench: {path} is missing: run `make` first")
        shutil.rmtree(self.work, ignore_errors=True)
        os.makedirs(self.work)
        self.env = dict(os.environ)
        # Report limits (a daily cap per directory) must not drop benchmark
        # reports; older builds have no such options.
        helptext = subprocess.run([self.hangwatch, "--help"], stdout=subprocess.PIPE, text=True).stdout
        self.no_limits = ["--daily-limit", "0"] if "--daily-limit" in helptext else []
        # Nothing inherited may change what is measured.
        for var in list(self.env):
            if var in ("LD_PRELOAD", "DEBUGINFOD_URLS") or var.startswith("HANGWATCH_"):
                del self.env[var]

    def run(self, argv, env_extra=None, timeout=300):
        env = dict(self.env)
        if env_extra:
            env.update(env_extra)
        p = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=timeout)
        if p.returncode != 0:
            sys.exit(f"bench: {' '.join(argv)} failed ({p.returncode}):\n{p.stderr[-2000:]}")
        return p

    def watched(self, argv, *options):
        """argv run under `hangwatch run` (quiet, reports in the work dir)."""
        reports = os.path.join(self.work, "reports-misc")
        return [self.hangwatch, "run", "-q", "--report-dir", reports, *options, "--", *argv]

    def spin(self, *args):
        return [os.path.join(self.bin, "bench-epoll-spin"), *[str(a) for a in args]]


def parse_spin(out, expect):
    lines = out.splitlines()
    if not lines or lines[0] != f"observer {expect}":
        sys.exit(f"bench: expected 'observer {expect}', got {lines[:1]}: the observer "
                 f"{'did not register' if expect == 'active' else 'was active'}")
    chunks, pairs = [], []
    for line in lines[1:]:
        f = line.split()
        if f[0] == "chunk":
            chunks.append(float(f[1]))
        elif f[0] == "pair":
            pairs.append((float(f[1]), float(f[2])))
    return chunks, pairs


# ---- 1. observer cost -----------------------------------------------------

def bench_observer(b):
    r = {}
    log(f"1a. epoll_wait(..., 0) loop: {SPIN_RUN_PAIRS} alternating plain / watched runs "
        f"of {SPIN_RUN_ITERATIONS} iterations")
    plain_chunks, watched_chunks, run_diffs = [], [], []
    for i in range(SPIN_RUN_PAIRS):
        order = ("plain", "watched") if i % 2 == 0 else ("watched", "plain")
        meds = {}
        for which in order:
            if which == "plain":
                c, _ = parse_spin(b.run(b.spin(SPIN_RUN_ITERATIONS, SPIN_CHUNK)).stdout, "inert")
                plain_chunks += c
            else:
                c, _ = parse_spin(b.run(b.watched(b.spin(SPIN_RUN_ITERATIONS, SPIN_CHUNK))).stdout,
                                  "active")
                watched_chunks += c
            meds[which] = median(c)
        run_diffs.append(meds["watched"] - meds["plain"])
    r["plain"] = (median(plain_chunks), pct(plain_chunks, 99), len(plain_chunks))
    r["watched"] = (median(watched_chunks), pct(watched_chunks, 99), len(watched_chunks))
    r["run_diff"] = median(run_diffs)
    r["run_diffs"] = run_diffs

    log(f"1b. paired in-process chunks (libc's epoll_wait vs the one calls bind to), {AB_RUNS} runs under "
        f"hangwatch alternating with {AB_RUNS} without the observer (noise floor); then {AB_THREADED_RUNS} + "
        f"{AB_THREADED_RUNS} with a second thread")
    for key, runs, extra in (("ab", AB_RUNS, ()), ("ab_threaded", AB_THREADED_RUNS, ("threaded",))):
        diffs, libc_ns, bound_ns, null, run_meds = [], [], [], [], []
        for _ in range(runs):
            _, pairs = parse_spin(b.run(b.watched(b.spin(AB_ITERATIONS, SPIN_CHUNK, "ab", *extra))).stdout, "active")
            diffs += [p - a for a, p in pairs]
            run_meds.append(median([p - a for a, p in pairs]))
            libc_ns += [a for a, _ in pairs]
            bound_ns += [p for _, p in pairs]
            _, pairs = parse_spin(b.run(b.spin(AB_ITERATIONS, SPIN_CHUNK, "ab", *extra)).stdout, "inert")
            null += [p - a for a, p in pairs]
        r[key] = {"diff": median(diffs), "ci": median_ci(diffs), "n": len(diffs), "runs": runs,
                  "run_min": min(run_meds), "run_max": max(run_meds),
                  "libc": median(libc_ns), "bound": median(bound_ns),
                  "null": median(null), "null_ci": median_ci(null), "null_n": len(null)}

    log(f"1c. the same with {TOUCH_PAGES} extra pages read after each epoll_wait instead of the observer")
    _, pairs = parse_spin(b.run(b.spin(TOUCH_ITERATIONS, SPIN_CHUNK, "touch", TOUCH_PAGES)).stdout, "inert")
    touch = [t - a for a, t in pairs]
    r["touch"] = {"diff": median(touch), "ci": median_ci(touch), "n": len(touch)}

    log(f"1d. the observer around an epoll_wait that never enters the kernel: {FAKE_PAIRS} alternating pairs")
    fake_plain, fake_watched = [], []
    for i in range(FAKE_PAIRS):
        env = {"LD_PRELOAD": b.fake}
        for which in (("plain", "watched") if i % 2 == 0 else ("watched", "plain")):
            if which == "plain":
                c, _ = parse_spin(b.run(b.spin(FAKE_ITERATIONS, FAKE_CHUNK), env).stdout, "inert")
                fake_plain += c
            else:
                # The fake in the program only, behind the observer: preloaded into the agent too, it made
                # the agent's own epoll_wait calls return at once, and its exit waited forever.
                argv = ["env", f"LD_PRELOAD={b.preload}:{b.fake}", *b.spin(FAKE_ITERATIONS, FAKE_CHUNK)]
                c, _ = parse_spin(b.run(b.watched(argv)).stdout, "active")
                fake_watched += c
    r["fake"] = {"plain": median(fake_plain), "watched": median(fake_watched),
                 "plain_p99": pct(fake_plain, 99), "watched_p99": pct(fake_watched, 99),
                 "n": len(fake_plain)}

    log(f"1e. callgrind instruction counts, {VG_COUNTS[0]} and {VG_COUNTS[1]} iterations, "
        "without and with the observer")
    counts = {}
    for variant in ("plain", "watched"):
        for n in VG_COUNTS:
            out = os.path.join(b.work, f"callgrind.{variant}.{n}")
            vg = ["valgrind", "-q", "--tool=callgrind", f"--callgrind-out-file={out}", *b.spin(n, 0)]
            # Under `hangwatch run` the preload and the agent's socket are in
            # valgrind's environment.  Debian's valgrind is a shell script
            # that execs valgrind.bin, which execs the statically linked
            # tool: the script's shell and the launcher load the observer and
            # register (the same pid, so the agent starts afresh each time,
            # as after any exec), the tool does not, and its client, the
            # benchmark program, registers last; it checks that its observer
            # is active.  A long threshold keeps valgrind's slow start-up
            # from counting as a launch hang.
            argv = b.watched(vg, "--threshold", "600s") if variant == "watched" else vg
            p = b.run(argv)
            parse_spin(p.stdout, "active" if variant == "watched" else "inert")
            with open(out) as f:
                m = re.search(r"^summary:\s+(\d+)", f.read(), re.M)
            counts[(variant, n)] = int(m.group(1))
    n1, n2 = VG_COUNTS
    per = {v: (counts[(v, n2)] - counts[(v, n1)]) / (n2 - n1) for v in ("plain", "watched")}
    r["callgrind"] = per
    return r


# ---- 2, 3. capture stop time ---------------------------------------------

def parse_captures(out):
    rows = []
    for line in out.splitlines():
        f = line.split()
        if f and f[0] == "capture":
            rows.append(tuple(int(x) for x in f[1:]))
    return rows


def bench_capture(b):
    r = {}
    cap = os.path.join(b.bin, "bench-capture")
    log(f"2. {CAPTURE_RUNS} x {CAPTURES_SINGLE} captures of a sleeping single-threaded target "
        f"(all_threads=false), alternating with as many bare ptrace stops (the floor)")
    stop, call, floor, run_meds, floor_meds = [], [], [], [], []
    for _ in range(CAPTURE_RUNS):
        rows = parse_captures(b.run([cap, "1", str(CAPTURES_SINGLE), "target"]).stdout)
        stop += [x[0] / 1000.0 for x in rows]
        call += [x[2] / 1000.0 for x in rows]
        run_meds.append(median([x[0] / 1000.0 for x in rows]))
        rows = parse_captures(b.run([cap, "1", str(CAPTURES_SINGLE), "floor"]).stdout)
        floor += [x[0] / 1000.0 for x in rows]
        floor_meds.append(median([x[0] / 1000.0 for x in rows]))
    r["single"] = {"n": len(stop), "med": median(stop), "p99": pct(stop, 99), "run_meds": run_meds,
                   "call_med": median(call), "call_p99": pct(call, 99)}
    r["floor"] = {"n": len(floor), "med": median(floor), "p99": pct(floor, 99), "run_meds": floor_meds}
    # The same beside two CPU hogs, from a process at the watch thread's
    # policy (SCHED_FIFO 2: the capture's helper runs at its caller's).
    log(f"2. {CAPTURES_SINGLE} captures of the same target beside {line_delay.HOGS} CPU hogs, at SCHED_FIFO 2")
    hogs = line_delay.start_hogs()
    try:
        rows = parse_captures(b.run(["chrt", "-f", "2", cap, "1", str(CAPTURES_SINGLE), "target"]).stdout)
    finally:
        line_delay.stop_hogs(hogs)
    busy = [x[0] / 1000.0 for x in rows]
    busy_call = [x[2] / 1000.0 for x in rows]
    r["busy"] = {"n": len(busy), "med": median(busy), "p99": pct(busy, 99), "call_med": median(busy_call),
                 "call_p99": pct(busy_call, 99)}
    out = b.run([cap, "1", str(CAPTURES_SINGLE), "look"]).stdout
    look = [int(f[1]) / 1000.0 for f in (line.split() for line in out.splitlines()) if f and f[0] == "look"]
    r["look"] = {"n": len(look), "med": median(look), "p99": pct(look, 99)}
    for threads, count in CAPTURES_THREADED:
        log(f"3. {count} all-thread captures of a {threads}-thread target")
        rows = parse_captures(b.run([cap, str(threads), str(count), "all"]).stdout)
        wall = [x[0] / 1000.0 for x in rows]
        mx = [x[1] / 1000.0 for x in rows]
        call = [x[2] / 1000.0 for x in rows]
        r[threads] = {"n": len(rows), "wall_med": median(wall), "wall_p99": pct(wall, 99),
                      "max_med": median(mx), "max_p99": pct(mx, 99),
                      "call_med": median(call), "call_p99": pct(call, 99)}
    return r


# ---- 7. Python frames in the stop ----------------------------------------

def bench_python(b):
    """For each interpreter (3.8-3.13 and Debian's), per thread stopped: the
    median over alternating pairs of (with - without) / threads.  An
    interpreter the machine lacks is a row that says so."""
    r = {}
    tool = os.path.join(b.bin, "bench-python-capture")
    for version in pythons.VERSIONS:
        python = pythons.find(version)
        if python is None:
            log(f"7. {pythons.label(version)}: not on this machine, skipped")
            r[version] = None
            continue
        r[version] = {}
        for threads, count in PYTHON_CAPTURES:
            log(f"7. {pythons.label(version)}: {count} pairs of all-thread captures of a {threads}-thread "
                f"process, {PYTHON_DEPTH} calls deep, with and without reading its frames")
            out = b.run([tool, python, str(threads), str(PYTHON_DEPTH), str(count)]).stdout
            rows = [line.split() for line in out.splitlines() if line.startswith("capture ")]
            with_frames = [int(x[2]) / 1000.0 for x in rows if x[1] == "python"]
            plain = [int(x[2]) / 1000.0 for x in rows if x[1] == "plain"]
            pairs = [(int(a[2]) - int(p[2])) / 1000.0 / threads for a, p in zip(rows[0::2], rows[1::2])
                     if a[1] == "python" and p[1] == "plain"]
            frames = [int(x[4]) for x in rows if x[1] == "python"]
            r[version][threads] = {"n": len(pairs), "python": median(with_frames), "plain": median(plain),
                                   "per_thread": median(pairs), "per_thread_p99": pct(pairs, 99),
                                   "frames": median(frames)}
    return r


def python_rows(py, row):
    for version, by_threads in py.items():
        name = pythons.label(version)
        if by_threads is None:
            row(f"7 Python frames read in the stop, {name}", "0", "-", "-", "not on this machine: skipped",
                f"median <= {PYTHON_PER_THREAD_BUDGET_US:.0f} us", "skipped")
            continue
        for threads, _ in PYTHON_CAPTURES:
            x = by_threads[threads]
            row(f"7 Python frames read in the stop, {name}, {threads}-thread process, us per thread stopped",
                f"{x['n']} pairs", fmt(x["per_thread"]), fmt(x["per_thread_p99"]),
                f"stop {fmt(x['plain'])} -> {fmt(x['python'])} us (medians); {fmt(x['frames'], 0)} Python frames "
                f"read per capture", f"median <= {PYTHON_PER_THREAD_BUDGET_US:.0f} us",
                verdict(x["per_thread"] <= PYTHON_PER_THREAD_BUDGET_US))


# ---- 4. detection latency -------------------------------------------------

WAIT_CALLS = ("epoll_wait", "epoll_pwait", "epoll_pwait2", "poll", "ppoll", "select", "pselect")


def hung_top_symbol(rep):
    """The innermost function of the hung thread's stack in a report."""
    hw = rep["hangwatch"]
    idx = hw.get("hung_thread", {}).get("report_array_index", 0)
    try:
        frames = rep["crash"]["threads"][idx]["backtrace"]["contents"]
        return frames[0].get("symbol_name", "") if frames else ""
    except (KeyError, IndexError, TypeError):
        return ""


def bench_detection(b, mode, seed, kernel=False):
    """kernel: watched through the kernel observer (`run --observer kernel`,
    as `watch` watches), whose busy start is the precise clock at the wait
    call's exit rather than the preloaded observer's coarse stamp."""
    n_long, n_short = EXACT_HANGS if mode == "exact" else (HANG_LONG[1], HANG_SHORT[1])
    n_hangs = n_long + n_short
    log(f"4. detection, {mode} mode{' (kernel observer)' if kernel else ''}: {n_hangs} hangs "
        f"({n_long} x {HANG_LONG[0]} ms, "
        f"{n_short} x {HANG_SHORT[0]} ms) at random phases, threshold {HANG_THRESHOLD_MS} ms, "
        f"period {HANG_PERIOD_MS} ms (about {n_hangs} s)")
    tag = f"{mode}-kernel" if kernel else mode
    reports = os.path.join(b.work, f"reports-{tag}")
    out = os.path.join(b.work, f"hangs-{tag}.tsv")
    prog = [os.path.join(b.bin, "bench-hang-loop"), out, str(seed), str(HANG_THRESHOLD_MS),
            str(HANG_IDLE_MIN_MS), str(HANG_PERIOD_MS), f"{HANG_LONG[0]}:{n_long}",
            f"{HANG_SHORT[0]}:{n_short}"]
    argv = [b.hangwatch, "run", "-q", "--report-dir", reports, "--threshold", f"{HANG_THRESHOLD_MS}ms",
            "--check-period", f"{HANG_PERIOD_MS}ms", "--check-mode", mode, *b.no_limits,
            *(["--observer", "kernel"] if kernel else []), "--", *prog]
    b.run(argv, timeout=600)

    hangs = []
    clock = "coarse"
    with open(out) as f:
        for line in f:
            if line.startswith("# clock "):
                clock = line.split()[2]
                continue
            idx, kind, dur, rt, mono, coarse, end, gaps = line.rstrip("\n").split("\t")
            gap_list = [] if gaps == "-" else [tuple(int(v) for v in g.split(":")) for g in gaps.split(",")]
            hangs.append({"kind": kind, "dur": int(dur), "rt": int(rt), "mono": int(mono),
                          "coarse": int(coarse), "end": int(end), "gaps": gap_list,
                          "report": None, "followups": []})
    stray = 0
    for path in sorted(glob.glob(os.path.join(reports, "*.json"))):
        with open(path) as f:
            rep = json.load(f)
        hw = rep["hangwatch"]
        det_ms = hw["detected_at_unix_ms"]
        # A report belongs to the last hang that began before it; a first
        # report must also come before that hang ended.
        started = [h for h in hangs if h["rt"] / 1e6 - 1 <= det_ms]
        match = started[-1] if started else None
        first = hw.get("stretch_report_index", 0) == 0
        if match is None or (first and det_ms > match["rt"] / 1e6 + match["dur"] + 50):
            stray += 1
        elif first and match["report"] is None:
            match["report"] = hw
        else:
            match["followups"].append(hung_top_symbol(rep))

    thr_ns = HANG_THRESHOLD_MS * 1000000
    lat, lag, sampled, setup, seen_stop, stop_spin, stop_sleep, final_err = [], [], [], [], [], [], [], []
    early = 0
    for h in hangs:
        lag.append((h["mono"] - h["coarse"]) / 1e6)
        hw = h["report"]
        if hw is None:
            continue
        if hw["runloop_threshold_us"] * 1000 != thr_ns:
            sys.exit("bench: a report's runloop_threshold_us is not the threshold we set")
        # Exact stamps (the kernel observer's, the counter's) began at
        # mono_start; coarse ones at the coarse reading (bench_hang_loop.c).
        detected = (h["mono"] if kernel or clock == "tsc" else h["coarse"]) + hw["block_duration_us"] * 1000
        lat.append((detected - h["mono"] - thr_ns) / 1e6)
        early += detected < h["mono"] + thr_ns
        stopped = hw.get("capture", {}).get("stopped_us")
        if "final_duration_us" in hw:
            final_err.append((hw["final_duration_us"] * 1000 - (h["end"] - h["mono"])) / 1e6)
        if h["kind"] == "spin":
            if stopped is not None:
                stop_spin.append(stopped)
            # The report's stop: the first gap after the detection that is
            # at least half as long as the stop the report gives (timer
            # interrupts make shorter gaps).
            after = [g for g in h["gaps"] if g[0] >= detected and g[1] >= (stopped or 0) * 500]
            if after:
                at, length = after[0]
                sampled.append((at - h["mono"] - thr_ns) / 1e6)
                setup.append((at - detected) / 1e6)
                seen_stop.append(length / 1000.0)
        elif stopped is not None:
            stop_sleep.append(stopped)
    long_ = [h for h in hangs if h["dur"] == HANG_LONG[0]]
    short = [h for h in hangs if h["dur"] == HANG_SHORT[0]]
    followups = [s for h in hangs for s in h["followups"]]
    return {"n": len(lat), "hangs": len(hangs), "stray": stray,
            "p50": median(lat), "p99": pct(lat, 99), "max": max(lat) if lat else float("nan"),
            "min": min(lat) if lat else float("nan"), "early": early,
            "lag_p50": median(lag), "lag_p99": pct(lag, 99), "lag_max": max(lag),
            "long_seen": sum(1 for h in long_ if h["report"]), "long_n": len(long_),
            "short_seen": sum(1 for h in short if h["report"]), "short_n": len(short),
            "sampled_p50": median(sampled), "sampled_p99": pct(sampled, 99), "sampled_n": len(sampled),
            "setup_p50": median(setup), "setup_p99": pct(setup, 99),
            "seen_stop_p50": median(seen_stop), "seen_stop_p99": pct(seen_stop, 99),
            "stop_spin_med": median(stop_spin), "stop_spin_p99": pct(stop_spin, 99),
            "stop_sleep_med": median(stop_sleep), "stop_sleep_p99": pct(stop_sleep, 99),
            "final_n": len(final_err), "final_p50": median(final_err), "final_p99": pct(final_err, 99),
            "final_max": max(final_err) if final_err else float("nan"),
            "followups": len(followups), "followups_waiting": sum(1 for s in followups if s in WAIT_CALLS),
            "seed": seed, "clock": "monotonic" if kernel else clock}


# ---- 5. time lost to the report worker ------------------------------------

def parse_lost(out):
    lines = out.splitlines()
    if not lines or lines[0] != "observer active":
        sys.exit(f"bench: bench-lost-time says {lines[:1]}: the observer did not register")
    r = {"gaps": {}, "cpus": {}, "agent": [], "overflow": 0, "clock": "coarse"}
    for line in lines[1:]:
        f = line.split()
        if f[0] == "clock":
            r["clock"] = f[1]
        elif f[0] == "threads":
            r["threads"] = int(f[1])
            r["gaps"] = {t: [] for t in range(r["threads"])}
            r["cpus"] = {t: [] for t in range(r["threads"])}
        elif f[0] == "hang":
            r["mono"], r["coarse"], r["end"] = (int(x) for x in f[1:4])
        elif f[0] == "gap":
            r["gaps"][int(f[1])].append((int(f[2]), int(f[3]), int(f[4])))
        elif f[0] == "cpu":
            r["cpus"][int(f[1])].append((int(f[2]), int(f[3])))
        elif f[0] == "overflow":
            r["overflow"] += int(f[2])
        elif f[0] == "agent":
            pid, tid, policy, rt0, rt1, mg0, mg1, pr0, pr1 = (int(x) for x in f[1:])
            r["agent"].append({"worker": tid != pid, "policy": policy, "cpu_ns": rt1 - rt0,
                               "migrations": mg1 - mg0, "preempted": pr1 - pr0})
    return r


def lost_in(gaps, lo, hi):
    """Nanoseconds of the gaps [at, at + len) that fall inside [lo, hi)."""
    return sum(max(0, min(at + ln, hi) - max(at, lo)) for at, ln, _ in gaps)


def shared_in(cpus, lo, hi):
    """Nanoseconds of [lo, hi) during which two of the threads were on one
    CPU, as far as they saw (each thread's CPU changes, in time order)."""
    cuts = sorted({lo, hi} | {at for moves in cpus.values() for at, _ in moves if lo < at < hi})
    shared = 0
    for a, z in zip(cuts, cuts[1:]):
        on = []
        for moves in cpus.values():
            now = [cpu for at, cpu in moves if at <= a]
            if now:
                on.append(now[-1])
        if len(on) != len(set(on)):
            shared += z - a
    return shared


def lost_run(b, policy, index):
    """One run of bench-lost-time under `hangwatch run`; None if it is
    invalid (no report, or the capture's stop not found)."""
    reports = os.path.join(b.work, f"reports-lost-{index:02d}-{policy}")
    prog = [os.path.join(b.bin, "bench-lost-time"), str(LOST_HANG_MS)]
    argv = [b.hangwatch, "run", "-q", "--report-dir", reports, "--threshold", f"{LOST_THRESHOLD_MS}ms",
            *b.no_limits, "--", *prog]
    p = b.run(argv, {"HANGWATCH_WORKER_POLICY": "normal"} if policy == "normal" else None)
    r = parse_lost(p.stdout)
    files = sorted(glob.glob(os.path.join(reports, "*.json")))
    if not files:
        log(f"5. run {index} ({policy}): no report was written; the run is invalid")
        return None
    with open(files[0]) as f:
        hw = json.load(f)["hangwatch"]
    if hw["runloop_threshold_us"] != LOST_THRESHOLD_MS * 1000:
        sys.exit("bench: a report's runloop_threshold_us is not the threshold we set")
    detected = (r["mono"] if r["clock"] == "tsc" else r["coarse"]) + hw["block_duration_us"] * 1000
    stopped_ns = hw.get("capture", {}).get("stopped_us", 0) * 1000
    # The capture's stop: the hung thread's (thread 0's) first gap from the
    # detection on that lasts at least half the report's stopped_us (as in
    # part 4; the agent's look that detected the hang is a gap of its own,
    # just before); the window starts where the first thread's stop began.
    hung = [g for g in r["gaps"][0] if g[0] >= detected and g[1] >= stopped_ns // 2]
    if not hung:
        log(f"5. run {index} ({policy}): the capture's stop is not among the hung thread's gaps; "
            "the run is invalid")
        return None
    at, ln, _ = hung[0]
    stop = [g for t in r["gaps"] for g in r["gaps"][t] if g[0] < at + ln and g[0] + g[1] > at]
    w0 = min(g[0] for g in stop)
    w1 = min(w0 + LOST_WINDOW_MS * 1000000, r["end"])
    gaps = [g for t in r["gaps"] for g in r["gaps"][t]]
    # For context, the same measure before the capture (from 50 ms into the
    # hang, when every thread spins, to 5 ms before the stop), scaled to the
    # window's length: what the machine's other load took anyway.
    b0, b1 = r["mono"] + 50000000, w0 - 5000000
    scale = (w1 - w0) / (b1 - b0) if b1 > b0 else float("nan")
    background = lost_in(gaps, b0, b1) * scale
    shared_before = shared_in(r["cpus"], b0, b1) * scale
    workers = [a for a in r["agent"] if a["worker"]]
    return {"lost_ms": lost_in(gaps, w0, w1) / 1e6, "window_ms": (w1 - w0) / 1e6,
            "stop_us": ln / 1e3,
            "background_ms": background / 1e6,
            "shared_ms": shared_in(r["cpus"], w0, w1) / 1e6, "shared_before_ms": shared_before / 1e6,
            "worker_cpu_ms": sum(a["cpu_ns"] for a in workers) / 1e6 if workers else float("nan"),
            "worker_migrations": sum(a["migrations"] for a in workers) if workers else 0,
            "worker_preempted": sum(a["preempted"] for a in workers) if workers else 0,
            "overflow": r["overflow"], "threads": r["threads"]}


def bench_lost(b):
    log(f"5. lost CPU time after a capture: {LOST_PAIRS} runs with the report worker at the normal "
        f"policy interleaved with {LOST_PAIRS} at SCHED_IDLE, {LOST_HANG_MS} ms hangs on every CPU, "
        f"threshold {LOST_THRESHOLD_MS} ms (about {LOST_PAIRS * 2 * (LOST_HANG_MS + 400) // 1000} s)")
    runs = {"normal": [], "idle": []}
    pairs = []
    invalid = 0
    for i in range(LOST_PAIRS):
        order = ("normal", "idle") if i % 2 == 0 else ("idle", "normal")
        got = {}
        for policy in order:
            x = lost_run(b, policy, i)
            if x is None:
                invalid += 1
                continue
            runs[policy].append(x)
            got[policy] = x
        if len(got) == 2:
            pairs.append(got["normal"]["lost_ms"] - got["idle"]["lost_ms"])
    if min(len(v) for v in runs.values()) < LOST_PAIRS // 2:
        sys.exit(f"bench: part 5 had {invalid} invalid runs of {2 * LOST_PAIRS}")
    r = {"invalid": invalid, "pair_diff": median(pairs), "pairs": len(pairs)}
    for policy, xs in runs.items():
        lost = [x["lost_ms"] for x in xs]
        worst = max(xs, key=lambda x: x["lost_ms"])
        r[policy] = {"n": len(xs), "med": median(lost), "p90": pct(lost, 90), "p99": pct(lost, 99),
                     "min": min(lost), "max": max(lost), "worst": worst,
                     "window": median([x["window_ms"] for x in xs]),
                     "stop": median([x["stop_us"] for x in xs]),
                     "background": median([x["background_ms"] for x in xs]),
                     "shared": median([x["shared_ms"] for x in xs]),
                     "shared_before": median([x["shared_before_ms"] for x in xs]),
                     "shared_runs": sum(1 for x in xs if x["shared_ms"] > LOST_SHARED_MS),
                     "busy_shared_runs": sum(1 for x in xs if x["shared_ms"] > LOST_SHARED_MS
                                             and x["worker_cpu_ms"] > LOST_BUSY_WORKER_MS),
                     "worker": median([x["worker_cpu_ms"] for x in xs]),
                     "worker_p99": pct([x["worker_cpu_ms"] for x in xs], 99),
                     "shared_p99": pct([x["shared_ms"] for x in xs], 99),
                     "migrations": median([x["worker_migrations"] for x in xs]),
                     "preempted": median([x["worker_preempted"] for x in xs]),
                     "busy_worker": sum(1 for x in xs if x["worker_cpu_ms"] > LOST_BUSY_WORKER_MS),
                     "overflow": sum(x["overflow"] for x in xs), "threads": xs[0]["threads"]}
    return r


# ---- the table ------------------------------------------------------------

def clock_res_ms():
    """CLOCK_MONOTONIC_COARSE's resolution, as the agent reads it."""
    class Timespec(ctypes.Structure):
        _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    ts = Timespec()
    if libc.clock_getres(6, ctypes.byref(ts)) != 0:  # 6 = CLOCK_MONOTONIC_COARSE
        return float("nan")
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6


def verdict(ok):
    return "met" if ok else "**MISSED**"


def revision():
    """The commit measured, and whether the sources differed from it."""
    try:
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--", "src", "CMakeLists.txt"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout.strip()
    except OSError:
        return "unknown revision"
    if not head:
        return "unknown revision"
    return f"commit {head}" + (" with uncommitted changes in src/" if dirty else "")


def machine():
    model = "?"
    flags = ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name") and model == "?":
                model = line.split(":", 1)[1].strip()
            if line.startswith("flags") and not flags:
                flags = line.split(":", 1)[1]
    try:
        with open("/sys/devices/system/cpu/vulnerabilities/meltdown") as f:
            meltdown = f.read().strip()
    except OSError:
        meltdown = "?"
    debian = "?"
    try:
        with open("/etc/debian_version") as f:
            debian = f.read().strip()
    except OSError:
        pass
    pcid = "pcid" in flags.split()
    return (f"{os.cpu_count()} CPU(s), {model}, Linux {platform.release()}, Debian {debian}; "
            f"meltdown: {meltdown}, PCID {'yes' if pcid else 'no'}; "
            f"load average at start {os.getloadavg()[0]:.2f}")


def table(o, c, d, lt=None, nf=None, py=None, ko=None, rs=None, sc=None, mh=None, fl=None, st=None, ld=None):
    rows = []
    o = o or {}
    c = c or {}
    d = d or {}
    lt = lt or {}

    def row(measure, n, med, p99, comparison, budget="", result=""):
        rows.append((measure, n, med, p99, comparison, budget, result))

    if o:
        observer_rows(o, row)
    if c:
        capture_rows(c, row)
    if d:
        detection_rows(d, row)
    if lt:
        lost_rows(lt, row)
    if nf:
        node_flags.rows(nf, row)
    if py:
        python_rows(py, row)
    if ko:
        kernel_observer.rows(ko, row)
    if rs:
        redis_side_by_side.rows(rs, row)
    if sc:
        sampling_cost.rows(sc, row)
    for m in mh or []:
        many_hangs.rows(m, row)
    if fl:
        fleet.rows(fl, row, fl.get("vm"))
    if st:
        run_startup.rows(st, row)
    if ld:
        line_delay.rows(ld, row)
    head = ("measure", "n", "median", "p99", "comparison", "budget", "result")
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for r in rows:
        lines.append("| " + " | ".join(r) + " |")
    return "\n".join(lines)


def observer_rows(o, row):
    ab = o["ab"]
    pm, p99p, pn = o["plain"]
    wm, wp99, wn = o["watched"]
    row("1 observer: `epoll_wait(ep, ev, 8, 0)` loop, plain, ns/turn", f"{pn} chunks",
        fmt(pm), fmt(p99p), f"{SPIN_RUN_PAIRS} runs alternating with the next row")
    rd = o["run_diffs"]
    row("  under `hangwatch run`, ns/turn", f"{wn} chunks", fmt(wm), fmt(wp99),
        f"{wm - pm:+.1f} ns, x{wm / pm:.3f}; per run pair {min(rd):+.0f}..{max(rd):+.0f}, median "
        f"{o['run_diff']:+.1f}: run-to-run drift swamps tens of ns, see next row", f"<= {OBSERVER_BUDGET_NS:.0f} ns",
        "(too noisy)")
    row("  paired in-process: observer's wrapper - libc's epoll_wait, ns/turn", f"{ab['n']} pairs",
        f"{ab['diff']:+.1f}", "",
        f"95% CI {ab['ci'][0]:+.1f}..{ab['ci'][1]:+.1f}; medians of the {ab['runs']} runs {ab['run_min']:+.1f}.."
        f"{ab['run_max']:+.1f}; libc {fmt(ab['libc'])} -> {fmt(ab['bound'])}, "
        f"x{ab['bound'] / ab['libc']:.3f}; same pairs without observer: {ab['null']:+.1f} "
        f"(CI {ab['null_ci'][0]:+.1f}..{ab['null_ci'][1]:+.1f})",
        f"<= {OBSERVER_BUDGET_NS:.0f} ns", verdict(ab["diff"] <= OBSERVER_BUDGET_NS))
    at = o["ab_threaded"]
    row("  the same with a second thread (libc's multi-threaded path), ns/turn", f"{at['n']} pairs",
        f"{at['diff']:+.1f}", "",
        f"95% CI {at['ci'][0]:+.1f}..{at['ci'][1]:+.1f}; medians of the {at['runs']} runs {at['run_min']:+.1f}.."
        f"{at['run_max']:+.1f}; libc {fmt(at['libc'])} -> {fmt(at['bound'])}; without observer: "
        f"{at['null']:+.1f} (CI {at['null_ci'][0]:+.1f}..{at['null_ci'][1]:+.1f})",
        f"<= {OBSERVER_BUDGET_NS:.0f} ns", verdict(at["diff"] <= OBSERVER_BUDGET_NS))
    t = o["touch"]
    row(f"  context: reading {TOUCH_PAGES} more pages after each epoll_wait, no observer, ns/turn",
        f"{t['n']} pairs", f"{t['diff']:+.1f}", "",
        f"95% CI {t['ci'][0]:+.1f}..{t['ci'][1]:+.1f}: page walks after each kernel entry")
    f = o["fake"]
    row("  observer's own work (wait that skips the kernel), ns/turn", f"{f['n']} chunks each",
        f"{fmt(f['plain'], 2)} -> {fmt(f['watched'], 2)}", f"{fmt(f['plain_p99'], 2)} -> {fmt(f['watched_p99'], 2)}",
        f"{f['watched'] - f['plain']:+.2f} ns", f"<= {OBSERVER_BUDGET_NS:.0f} ns",
        verdict(f["watched"] - f["plain"] <= OBSERVER_BUDGET_NS))
    cg = o["callgrind"]
    row("  callgrind, instructions/turn (noise-free)", f"{VG_COUNTS[1]}-{VG_COUNTS[0]} turns",
        f"{cg['plain']:.1f} -> {cg['watched']:.1f}", "", f"{cg['watched'] - cg['plain']:+.1f} instructions, "
        f"x{cg['watched'] / cg['plain']:.2f}")


def capture_rows(c, row):
    s, fl = c["single"], c["floor"]
    row("2 stop per capture, 1 sleeping thread, `all_threads=false`, us", f"{s['n']} captures",
        fmt(s["med"]), fmt(s["p99"]),
        f"medians of the {len(s['run_meds'])} runs {', '.join(fmt(m, 0) for m in s['run_meds'])}; bare ptrace "
        f"stop (floor) {fmt(fl['med'])} / p99 {fmt(fl['p99'])} (runs {', '.join(fmt(m, 0) for m in fl['run_meds'])}); "
        f"whole call {fmt(s['call_med'], 0)} / p99 {fmt(s['call_p99'], 0)}",
        f"median <= {STOP_BUDGET_US:.0f} us", verdict(s["med"] <= STOP_BUDGET_US))
    bz = c["busy"]
    row(f"  the same, {line_delay.HOGS} CPU hogs beside, the capturing process at SCHED_FIFO 2 (as the watch thread), us",
        f"{bz['n']} captures", fmt(bz["med"]), fmt(bz["p99"]),
        f"whole call {fmt(bz['call_med'], 0)} / p99 {fmt(bz['call_p99'], 0)}",
        f"p99 <= {BUSY_STOP_BUDGET_US:.0f} us", verdict(bz["p99"] <= BUSY_STOP_BUDGET_US))
    lk = c["look"]
    row("  the look before the stop (state, wait channel, system call), us", f"{lk['n']} looks",
        fmt(lk["med"]), fmt(lk["p99"]), "delays the stop's start by this; not in the stop")
    for threads, _ in CAPTURES_THREADED:
        x = c[threads]
        row(f"3 stop, all {threads} threads: `stop_wall_ns`, us", f"{x['n']} captures",
            fmt(x["wall_med"]), fmt(x["wall_p99"]),
            f"whole call {fmt(x['call_med'], 0)} / p99 {fmt(x['call_p99'], 0)}")
        row(f"  {threads} threads: longest one thread was stopped, us", f"{x['n']} captures",
            fmt(x["max_med"]), fmt(x["max_p99"]), "")


CLOCK_NAMES = {"tsc": "time-stamp counter", "coarse": "coarse clock", "monotonic": "precise clock"}


def detection_rows(d, row):
    for mode in ("exact", "periodic"):
        x = d[mode]
        budget = f"p99 <= {EXACT_P99_BUDGET_MS:.0f} ms" if mode == "exact" else ""
        result = verdict(x["p99"] <= EXACT_P99_BUDGET_MS) if mode == "exact" else ""
        row(f"4 detection after the threshold, {mode} mode, ms", f"{x['n']} hangs",
            fmt(x["p50"], 2), fmt(x["p99"], 2),
            f"busy starts stamped with the {CLOCK_NAMES[x['clock']]}; "
            f"range {fmt(x['min'], 2)}..{fmt(x['max'], 2)} ({x['early']} before the threshold); seen: "
            f"{x['long_seen']}/{x['long_n']} of {HANG_LONG[0]} ms, {x['short_seen']}/{x['short_n']} of "
            f"{HANG_SHORT[0]} ms hangs", budget, result)
        row(f"  {mode}: program stopped for its stack, after the threshold, ms", f"{x['sampled_n']} spins",
            fmt(x["sampled_p50"], 2), fmt(x["sampled_p99"], 2),
            f"detection to stop {fmt(x['setup_p50'], 2)} / p99 {fmt(x['setup_p99'], 2)} ms; stop as the "
            f"program saw it {fmt(x['seen_stop_p50'], 0)} / p99 {fmt(x['seen_stop_p99'], 0)} us, as reported "
            f"(`stopped_us`) {fmt(x['stop_spin_med'], 0)} / p99 {fmt(x['stop_spin_p99'], 0)} us; sleeping "
            f"hangs' `stopped_us` {fmt(x['stop_sleep_med'], 0)} / p99 {fmt(x['stop_sleep_p99'], 0)} us")
        row(f"  {mode}: `final_duration_us` - true hang length, ms", f"{x['final_n']} hangs",
            fmt(x["final_p50"], 2), fmt(x["final_p99"], 2),
            f"max {fmt(x['final_max'], 2)}; follow-up reports {x['followups']} "
            f"({x['followups_waiting']} with the hung thread already back in its wait call); "
            f"unmatched reports {x['stray']}")
    if "kernel" in d:
        x = d["kernel"]
        row("  exact mode through the kernel observer (as `hangwatch watch`), detection after the threshold, ms",
            f"{x['n']} hangs", fmt(x["p50"], 2), fmt(x["p99"], 2),
            f"range {fmt(x['min'], 2)}..{fmt(x['max'], 2)} ({x['early']} before the threshold); seen: "
            f"{x['long_seen']}/{x['long_n']} of {HANG_LONG[0]} ms, {x['short_seen']}/{x['short_n']} of "
            f"{HANG_SHORT[0]} ms hangs; `final_duration_us` - true length p50 {fmt(x['final_p50'], 2)} / p99 "
            f"{fmt(x['final_p99'], 2)} ms", f"p99 <= {EXACT_P99_BUDGET_MS:.0f} ms",
            verdict(x["p99"] <= EXACT_P99_BUDGET_MS))
    lags = [d[m] for m in ("exact", "periodic")]
    row("  coarse clock's lag behind CLOCK_MONOTONIC at hang start, ms", f"{sum(x['hangs'] for x in lags)} hangs",
        fmt(median([x["lag_p50"] for x in lags]), 2), fmt(max(x["lag_p99"] for x in lags), 2),
        f"max {fmt(max(x['lag_max'] for x in lags), 2)}; the detector allows two ticks "
        f"({fmt(2 * clock_res_ms(), 0)} ms) on coarse-stamped pages only")


def lost_rows(lt, row):
    n, i = lt["normal"], lt["idle"]
    for policy, x in (("normal", n), ("idle", i)):
        what = ("5 CPU time lost after a capture, report worker at the normal policy, ms" if policy == "normal"
                else "  report worker at SCHED_IDLE (hangwatch's default), ms")
        w = x["worst"]
        note = (f"p90 {fmt(x['p90'])}, range {fmt(x['min'])}..{fmt(x['max'])} (the worst run: worker "
                f"{fmt(w['worker_cpu_ms'])} ms, two threads on one CPU {fmt(w['shared_ms'])} ms, background "
                f"{fmt(w['background_ms'])} ms); background (the same sum before the capture, scaled to the "
                f"window) {fmt(x['background'])} ms")
        if policy == "normal":
            note = (f"summed over the program's {x['threads']} spinning threads, {fmt(x['window'], 0)} ms from "
                    f"the capture's stop on ({fmt(x['threads'] * x['window'], 0)} ms of CPU wanted); {note}")
        else:
            ratio = n["med"] / i["med"] if i["med"] > 0 else float("nan")
            note = (f"normal / SCHED_IDLE x{fmt(ratio, 2)} (medians), per interleaved pair "
                    f"{lt['pair_diff']:+.1f} ms ({lt['pairs']} pairs); {note}; invalid runs {lt['invalid']}")
        if x["overflow"]:
            note += f"; {x['overflow']} gaps or CPU changes not recorded (array full)"
        row(what, f"{x['n']} runs", fmt(x["med"]), fmt(x["p99"]), note)

    def both(key, digits=1):
        return f"{fmt(n[key], digits)} -> {fmt(i[key], digits)}"

    row("  context: the worker's CPU time during the hang, normal -> SCHED_IDLE, ms", f"{n['n']} / {i['n']} runs",
        both("worker"), f"{fmt(n['worker_p99'])} -> {fmt(i['worker_p99'])}",
        f"more than {LOST_BUSY_WORKER_MS} ms in {n['busy_worker']} / {i['busy_worker']} runs; involuntary "
        f"switches {both('preempted', 0)}, CPU changes {both('migrations', 0)} (medians)")
    row("  context: two of the program's threads on one CPU in the window, normal -> SCHED_IDLE, ms",
        f"{n['n']} / {i['n']} runs", both("shared"), f"{fmt(n['shared_p99'])} -> {fmt(i['shared_p99'])}",
        f"over {LOST_SHARED_MS} ms in {n['shared_runs']} / {i['shared_runs']} runs (of them with the worker over "
        f"{LOST_BUSY_WORKER_MS} ms: {n['busy_shared_runs']} / {i['busy_shared_runs']}); before the capture (scaled) "
        f"{both('shared_before')}; the hung thread's gap at the capture (its stop and any wait for a CPU "
        f"after it) {both('stop', 0)} us")


def write_doc(path, text):
    begin, end = "<!-- bench-results:begin -->", "<!-- bench-results:end -->"
    try:
        with open(path) as f:
            doc = f.read()
    except FileNotFoundError:
        doc = f"# Benchmarks\n\n{begin}\n{end}\n"
    if begin not in doc or end not in doc:
        log(f"{path} has no results markers; not updated")
        return
    head, rest = doc.split(begin, 1)
    _, tail = rest.split(end, 1)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(head + begin + "\n" + text + "\n" + end + tail)
    os.replace(tmp, path)
    log(f"results written to {os.path.relpath(path, ROOT)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--doc", default=os.path.join(ROOT, "docs", "benchmarks.md"))
    ap.add_argument("--no-doc", action="store_true", help="only print the table")
    ap.add_argument("--parts", default="observer,capture,detection,lost,node,python,kernel,redis,sampling,many,fleet,"
                    "start,line",
                    help="comma-separated subset to run (a partial run never updates the doc)")
    args = ap.parse_args()
    parts = set(args.parts.split(","))
    all_parts = {"observer", "capture", "detection", "lost", "node", "python", "kernel", "redis", "sampling",
                 "many", "fleet", "start", "line"}
    if not parts <= all_parts:
        sys.exit("bench: --parts takes observer, capture, detection, lost, node, python, kernel, redis, sampling, "
                 "many, fleet, start, line")
    if "observer" in parts and shutil.which("valgrind") is None:
        sys.exit("bench: valgrind is missing (scripts/ensure-deps.sh bench installs it)")
    if "redis" in parts:
        redis_side_by_side.need_programs()  # before anything runs

    started = time.monotonic()
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    measured = revision()  # what the build at the start was made of, not what the tree is at the end
    host = machine()
    b = Bench(args.build)
    o = bench_observer(b) if "observer" in parts else None
    c = bench_capture(b) if "capture" in parts else None
    rng = random.Random()
    d = None
    if "detection" in parts:
        d = {mode: bench_detection(b, mode, rng.randrange(1, 2**31)) for mode in ("exact", "periodic")}
        d["kernel"] = bench_detection(b, "exact", rng.randrange(1, 2**31), kernel=True)
    lt = bench_lost(b) if "lost" in parts else None
    nf = None
    if "node" in parts:
        node = shutil.which("node")
        if node:
            nf = node_flags.measure(node)
            nf["hangwatch"] = node_flags.measure_hangwatch(node, b.hangwatch)
        else:
            log("6. no node on the PATH: part 6 skipped (apt-get install nodejs)")
    py = bench_python(b) if "python" in parts else None
    ko = None
    if "kernel" in parts:
        log("8. the kernel observer switched on and off around a spinning epoll_wait(..., 0) and getppid() loop")
        ko = kernel_observer.measure(b.bin, b.env)
    rs = redis_side_by_side.measure(b.hangwatch, env=b.env) if "redis" in parts else None
    sc = None
    if "sampling" in parts:
        log("10. a spinning thread's time lost to early samples (kernel, ptrace) and to a hang's report")
        sc = sampling_cost.measure(b.bin, b.env)
    mh = None
    if "many" in parts:
        log(f"11. {many_hangs.COUNT} processes hanging {many_hangs.SECONDS} s at the same moment")
        mh = [many_hangs.measure(b.bin, b.env)]
        log(f"11. {many_hangs.COUNT} processes hanging 8 s at the same moment, three CPU hogs beside")
        mh.append(many_hangs.measure(b.bin, b.env, seconds=8, hogs=3))
    fl = None
    if "fleet" in parts:
        log(f"13. watch --all over {fleet.PROCS} processes of {fleet.THREADS} loop threads, {fleet.HANGS} hangs")
        fl = fleet.measure(b.bin, b.env)
        fl["vm"] = fleet.measure_in_vm(b.bin)
    st = None
    if "start" in parts:
        log("14. `hangwatch run -- true` against `true`, and node under it, spawn to exit")
        st = run_startup.measure(b.bin, b.env)
    ld = None
    if "line" in parts:
        log(f"15. the line at detection: {line_delay.HANGS} hangs beside {line_delay.HOGS} CPU hogs")
        ld = line_delay.measure(b.bin, b.env)
    took = time.monotonic() - started

    text = f"Run {when}, {measured}, on {host}; the whole run took {took:.0f} s."
    if d:
        text += (f"  Detection: threshold {HANG_THRESHOLD_MS} ms, check period {HANG_PERIOD_MS} ms, "
                 f"hang-schedule seeds exact {d['exact']['seed']}, periodic {d['periodic']['seed']}.")
    if lt:
        text += (f"  Lost time: threshold {LOST_THRESHOLD_MS} ms, {LOST_HANG_MS} ms hangs, "
                 f"window {LOST_WINDOW_MS} ms.")
    text += "\n\n" + table(o, c, d, lt, nf, py, ko, rs, sc, mh, fl, st, ld)
    print(text)
    if not args.no_doc and parts == all_parts:
        write_doc(args.doc, text)


if __name__ == "__main__":
    main()
