#!/usr/bin/python3
"""bench/node_flags.py - what the two node flags that give hangwatch names
for JavaScript frames cost the program:

    NODE_OPTIONS="--perf-basic-prof-only-functions --interpreted-frames-native-stack"

With them V8 appends a line to /tmp/perf-PID.map for every function it
compiles (one write() each, the stream is line-buffered), and every
interpreted function gets its own copy of the interpreter's entry
trampoline, so that a native stack walk sees which function an interpreter
frame runs.  Both costs fall on compiling, not on running compiled code.

    /usr/bin/python3 bench/node_flags.py [--node node] [--startup-runs 20] [--workload-runs 10]
                                         [--hangwatch BUILD/bin/hangwatch]

Two measurements, each as runs with and without the flags alternating in
ABBA order (so that a drift of the machine falls on both sides):
  a. start-up: `node -e 0`, wall time from spawn to exit, and its CPU time;
  b. a fixed amount of work timed inside node (process.hrtime): 10,000
     distinct functions compiled and called (each `new Function` is a new
     script: interpreted, then baseline-compiled), JSON and 2,000 distinct
     regular expressions, and a steady hot loop that is optimised once.
With a hangwatch binary (--hangwatch, as bench/run.py gives it), two more,
for what a node costs under hangwatch now that JavaScript frames are read
from V8's own records (js_frames.h) and no flag is added:
  c. node under `hangwatch run` (its default, --js-frames auto) against
     plain node, alternating: an app that defines 5,000 functions, its
     start-up as node itself times it (performance.now() when the app has
     loaded: from node's time origin, so hangwatch's own start is not
     counted) and spawn to exit; and the workload of b, phase by phase;
  d. the JavaScript frames read in the stop: `hangwatch stack` of a node
     whose main thread and a worker spin 30 JavaScript calls deep, with
     --js-frames auto and off alternating; per pair (stop with - stop
     without) / threads stopped, the median.
Prints a markdown table (medians, spread, ratio) on stdout, progress on
stderr.  bench/run.py runs the same as its part 6 ("node").  Every perf map
the runs make is deleted (the child is node itself, not a shell, so its pid
names the file).  Standard library only, Debian's /usr/bin/python3.
"""

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time

FLAGS = "--perf-basic-prof-only-functions --interpreted-frames-native-stack"
STARTUP_RUNS = 20   # per variant
WORKLOAD_RUNS = 10  # per variant
FUNCTIONS = 10000   # FUNCS in the workload
APP_FUNCTIONS = 5000  # functions the start-up app defines
STOP_PAIRS = 30     # `hangwatch stack` with and without JavaScript frames
RATIO_BUDGET = 1.05  # node under hangwatch run against plain node
STOP_BUDGET_US = 200  # JavaScript frames read in the stop, per thread stopped

# The workload: fixed work, timed in phases from inside node.
WORKLOAD = r"""
'use strict';
const FUNCS = %d, CALLS = 40, JSON_ROUNDS = 100000, REGEXPS = 2000, HOT_ROUNDS = 15, HOT_N = 1000000;
const now = () => process.hrtime.bigint();
const ms = (a, b) => Number(b - a) / 1e6;
let acc = 0;
const t0 = now();
for (let i = 0; i < FUNCS; i++) {
  const f = new Function('x', 'y',
    `let s = x; for (let k = 0; k < y; k++) s = (s * ${i % 97 + 3} + k) % 1000003; return s + ${i};`);
  for (let r = 0; r < CALLS; r++) acc = (acc + f(r, 8)) % 1000003;
}
const t1 = now();
for (let i = 0; i < JSON_ROUNDS; i++) {
  const s = JSON.stringify({i, name: 'n' + i, list: [i, i + 1, i + 2], nested: {a: i % 7}});
  acc = (acc + JSON.parse(s).nested.a + s.length) % 1000003;
}
for (let i = 0; i < REGEXPS; i++) {
  const re = new RegExp(`^(a${i}|b+)c*d{${i % 5 + 1}}$`);
  acc += re.test('a' + i + 'cc' + 'd'.repeat(i % 5 + 1)) ? 1 : 0;
}
const t2 = now();
function hot(n) { let s = 0; for (let k = 0; k < n; k++) s = (s + k * k) % 1000003; return s; }
for (let r = 0; r < HOT_ROUNDS; r++) acc = (acc + hot(HOT_N)) % 1000003;
const t3 = now();
console.log(JSON.stringify({compile: ms(t0, t1), json_regexp: ms(t1, t2), hot: ms(t2, t3), total: ms(t0, t3), acc}));
""".replace("%d", str(FUNCTIONS), 1)
# c: an app that defines APP_FUNCTIONS functions (as a server's modules
# do), then says how long node took to get there.
APP = "'use strict';\n" + "".join(
    f"function f{i}(x) {{ return (x * {i % 89 + 2} + {i}) % 1000003; }}\n" for i in range(APP_FUNCTIONS)) + \
    "let acc = 0;\n" + "".join(f"acc = f{i}(acc);\n" for i in range(0, APP_FUNCTIONS, 50)) + \
    "console.log(JSON.stringify({loaded: performance.now(), acc}));\n"

# d: a main thread and a worker spinning 30 JavaScript calls deep.
SPINNER = r"""
'use strict';
const { Worker, isMainThread } = require('worker_threads');
function spin(ms) { let s = 0; const end = Date.now() + ms; while (Date.now() < end) s += Math.sqrt(s + 1); return s; }
function deep(n, ms) { return n === 0 ? spin(ms) : deep(n - 1, ms) + 1; }
if (isMainThread) {
  new Worker(__filename);
  setTimeout(() => { console.log('ready'); deep(30, 600000); }, 200);
} else {
  deep(30, 600000);
}
"""

PHASES = (("total", "whole workload"), ("compile", "10,000 new functions, 40 calls each"),
          ("json_regexp", "JSON and 2,000 regexps"), ("hot", "hot loop, optimised once"))


def log(msg):
    print("bench: " + msg, file=sys.stderr, flush=True)


def median(xs):
    s = sorted(xs)
    n = len(s)
    if n == 0:
        return float("nan")
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2.0


def pct(xs, p):
    """Nearest-rank percentile: a value that was observed."""
    s = sorted(xs)
    if not s:
        return float("nan")
    return s[max(1, int(math.ceil(p / 100.0 * len(s)))) - 1]


def fmt(x, digits=1):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:,.{digits}f}"


def abba(pairs):
    """Which variant runs first in each pair: with, without, without, with, ..."""
    for i in range(pairs):
        yield (True, False) if i % 4 in (0, 3) else (False, True)


class Runner:
    def __init__(self, node):
        self.node = node
        self.env = {k: v for k, v in os.environ.items() if k != "NODE_OPTIONS" and not k.startswith("NODE_")}
        self.maps = []  # sizes of the perf maps seen, (lines, bytes)

    def run(self, args, flags):
        """Run node with `args`; returns (stdout, wall ms).  The
        perf map the run made, if any, is measured and deleted."""
        env = dict(self.env)
        if flags:
            env["NODE_OPTIONS"] = FLAGS
        started = time.perf_counter()
        p = subprocess.Popen([self.node, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             stdin=subprocess.DEVNULL)
        try:
            out, err = p.communicate(timeout=300)
        finally:
            self.take_map(p.pid, flags)
        wall = (time.perf_counter() - started) * 1e3
        if p.returncode != 0:
            sys.exit(f"bench: node {' '.join(args[:1])} failed ({p.returncode}): {err.decode(errors='replace')[-500:]}")
        return out.decode(), wall

    def take_map(self, pid, flags):
        path = f"/tmp/perf-{pid}.map"
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            if flags:
                sys.exit(f"bench: node ran with {FLAGS} but wrote no {path}")
            return
        if not flags:
            sys.exit(f"bench: {path} exists after a run without the flags")
        if os.path.isfile(path) and not os.path.islink(path) and st.st_uid == os.geteuid():
            with open(path, "rb") as f:
                self.maps.append((sum(1 for _ in f), st.st_size))
            os.unlink(path)

    def timed(self, args, flags):
        """(stdout, wall ms, CPU ms of the child) via wait4."""
        env = dict(self.env)
        if flags:
            env["NODE_OPTIONS"] = FLAGS
        started = time.perf_counter()
        p = subprocess.Popen([self.node, *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             stdin=subprocess.DEVNULL)
        try:
            _, status, usage = os.wait4(p.pid, 0)
            wall = (time.perf_counter() - started) * 1e3
            p.returncode = os.waitstatus_to_exitcode(status)
        finally:
            self.take_map(p.pid, flags)
        if p.returncode != 0:
            sys.exit(f"bench: node {' '.join(args)} failed ({p.returncode})")
        return wall, (usage.ru_utime + usage.ru_stime) * 1e3


def measure(node="node", startup_runs=STARTUP_RUNS, workload_runs=WORKLOAD_RUNS):
    """Both measurements; a dict for rows()."""
    r = Runner(node)
    version = subprocess.run([node, "--version"], stdout=subprocess.PIPE, text=True, env=r.env).stdout.strip()
    log(f"6a. node {version} start-up (`node -e 0`): {startup_runs} runs with and {startup_runs} without "
        f"NODE_OPTIONS=\"{FLAGS}\", alternating")
    r.run(["-e", "0"], False)  # warm the page cache
    r.run(["-e", "0"], True)
    r.maps.clear()
    start = {True: [], False: []}
    start_cpu = {True: [], False: []}
    pair_diff = []
    for order in abba(startup_runs):
        got = {}
        for flags in order:
            wall, cpu = r.timed(["-e", "0"], flags)
            start[flags].append(wall)
            start_cpu[flags].append(cpu)
            got[flags] = wall
        pair_diff.append(got[True] - got[False])
    start_maps = list(r.maps)
    r.maps.clear()

    log(f"6b. workload: {workload_runs} runs with and {workload_runs} without the flags, alternating")
    phases = {True: {k: [] for k, _ in PHASES}, False: {k: [] for k, _ in PHASES}}
    wall = {True: [], False: []}
    accs = set()
    for order in abba(workload_runs):
        for flags in order:
            out, ms = r.run(["-e", WORKLOAD], flags)
            res = json.loads(out.strip().splitlines()[-1])
            accs.add(res["acc"])
            for k, _ in PHASES:
                phases[flags][k].append(res[k])
            wall[flags].append(ms)
    if len(accs) != 1:
        sys.exit(f"bench: the workload computed different results: {sorted(accs)}")
    return {"version": version, "start": start, "start_cpu": start_cpu, "pair_diff": pair_diff,
            "start_maps": start_maps, "phases": phases, "wall": wall, "work_maps": list(r.maps),
            "startup_runs": startup_runs, "workload_runs": workload_runs}


def measure_hangwatch(node, hangwatch, startup_runs=STARTUP_RUNS, workload_runs=WORKLOAD_RUNS):
    """c and d: node under `hangwatch run` against plain node, and the
    JavaScript frames read in the stop."""
    r = Runner(node)
    scratch = tempfile.mkdtemp(prefix="hw-bench-node-")
    try:
        app = os.path.join(scratch, "app.js")
        with open(app, "w") as f:
            f.write(APP)

        def run(args, under):
            cmd = [node, *args]
            if under:
                cmd = [hangwatch, "run", "-q", "--report-dir", os.path.join(scratch, "reports"), "--"] + cmd
            started = time.perf_counter()
            p = subprocess.run(cmd, env=r.env, capture_output=True, timeout=300)
            wall = (time.perf_counter() - started) * 1e3
            if p.returncode != 0:
                sys.exit(f"bench: {' '.join(cmd[:6])} failed ({p.returncode}): {p.stderr.decode()[-500:]}")
            return json.loads(p.stdout.decode().strip().splitlines()[-1]), wall

        log(f"6c. node under `hangwatch run` and plain, alternating: an app of {APP_FUNCTIONS} functions, "
            f"{startup_runs} runs each, and the workload, {workload_runs} runs each")
        run([app], False)
        run([app], True)
        loaded = {True: [], False: []}
        app_wall = {True: [], False: []}
        for order in abba(startup_runs):
            for under in order:
                res, wall = run([app], under)
                loaded[under].append(res["loaded"])
                app_wall[under].append(wall)
        phases = {True: {k: [] for k, _ in PHASES}, False: {k: [] for k, _ in PHASES}}
        for order in abba(workload_runs):
            for under in order:
                res, _ = run(["-e", WORKLOAD], under)
                for k, _ in PHASES:
                    phases[under][k].append(res[k])

        log(f"6d. `hangwatch stack` of a node spinning 30 calls deep in two threads, {STOP_PAIRS} pairs with "
            "--js-frames auto and off")
        spinner = os.path.join(scratch, "spinner.js")
        with open(spinner, "w") as f:
            f.write(SPINNER)
        proc = subprocess.Popen([node, spinner], env=r.env, stdout=subprocess.PIPE, text=True)
        per_thread, threads, frames = [], [], []
        try:
            if proc.stdout.readline().strip() != "ready":
                sys.exit("bench: the spinner did not start")
            time.sleep(0.5)  # let both threads reach the spin (measurement warm-up, not a test)
            out = os.path.join(scratch, "stack.json")

            def stop_us(mode):
                p = subprocess.run([hangwatch, "stack", str(proc.pid), "--js-frames", mode, "--json", out],
                                   capture_output=True, timeout=60)
                if p.returncode != 0:
                    sys.exit(f"bench: hangwatch stack failed: {p.stderr.decode()[-300:]}")
                with open(out) as f:
                    rep = json.load(f)
                js = sum(1 for t in rep["crash"]["threads"] for fr in t["backtrace"]["contents"]
                         if fr.get("language") == "javascript")
                return rep["hangwatch"]["capture"]["stopped_us"], len(rep["crash"]["threads"]), js

            for order in abba(STOP_PAIRS):
                got = {}
                for with_js in order:
                    got[with_js] = stop_us("auto" if with_js else "off")
                per_thread.append((got[True][0] - got[False][0]) / got[True][1])
                threads.append(got[True][1])
                frames.append(got[True][2])
        finally:
            proc.kill()
            proc.wait()
        return {"loaded": loaded, "app_wall": app_wall, "phases": phases, "per_thread": per_thread,
                "threads": threads, "frames": frames, "startup_runs": startup_runs}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def hangwatch_rows(h, row):
    """Part 6c and 6d's rows."""
    def ratio_row(measure, a, b, extra=""):
        x = median(b) / median(a)
        row(measure, f"{len(a)} + {len(b)} runs", f"{fmt(median(a))} -> {fmt(median(b))}",
            f"{fmt(pct(a, 99))} -> {fmt(pct(b, 99))}", f"x{x:.3f}" + extra, f"x <= {RATIO_BUDGET}",
            "pass" if x <= RATIO_BUDGET else "FAIL")
    ratio_row(f"6c node start-up, an app of {APP_FUNCTIONS:,} functions loaded (node's own clock), "
              "plain -> under `hangwatch run`, ms", h["loaded"][False], h["loaded"][True])
    w = h["app_wall"]
    row("  the same, spawn to exit (hangwatch's own start included), ms", f"{len(w[False])} + {len(w[True])} runs",
        f"{fmt(median(w[False]))} -> {fmt(median(w[True]))}", f"{fmt(pct(w[False], 99))} -> {fmt(pct(w[True], 99))}",
        f"x{median(w[True]) / median(w[False]):.3f}")
    for key, what in PHASES:
        a, b = h["phases"][False][key], h["phases"][True][key]
        ratio_row(f"6c node workload under `hangwatch run`: {what}, ms", a, b)
    pt = h["per_thread"]
    med = median(pt)
    row(f"6d JavaScript frames read in the stop, per thread stopped ({median(h['threads']):.0f} threads, "
        f"{median(h['frames']):.0f} JavaScript frames), us", f"{len(pt)} pairs", fmt(med), fmt(pct(pt, 99)),
        f"(stop with - stop without) / threads; range {fmt(min(pt))}..{fmt(max(pt))}",
        f"<= {STOP_BUDGET_US} us", "pass" if med <= STOP_BUDGET_US else "FAIL")


def rows(r, row):
    """The table rows, through row(measure, n, median, p99, comparison[, budget, result]) as in bench/run.py."""
    s, c = r["start"], r["start_cpu"]
    lines = median([m[0] for m in r["start_maps"]])
    kib = median([m[1] for m in r["start_maps"]]) / 1024
    row(f"6 node {r['version']} start-up, `node -e 0`, wall ms", f"{len(s[False])} runs", fmt(median(s[False])),
        fmt(pct(s[False], 99)), f"p10..p90 {fmt(pct(s[False], 10))}..{fmt(pct(s[False], 90))}; CPU "
        f"{fmt(median(c[False]))} ms; alternating with the next row")
    row("  with NODE_OPTIONS=`" + FLAGS + "`, wall ms", f"{len(s[True])} runs", fmt(median(s[True])),
        fmt(pct(s[True], 99)),
        f"{median(s[True]) - median(s[False]):+.1f} ms, x{median(s[True]) / median(s[False]):.3f}; per pair "
        f"{median(r['pair_diff']):+.1f} (range {min(r['pair_diff']):+.1f}..{max(r['pair_diff']):+.1f}); "
        f"p10..p90 {fmt(pct(s[True], 10))}..{fmt(pct(s[True], 90))}; CPU {fmt(median(c[True]))} ms; "
        f"perf map {lines:,.0f} lines, {kib:,.0f} KiB")
    p = r["phases"]
    for key, what in PHASES:
        a, b = p[False][key], p[True][key]
        head = "6 node workload, timed in node:" if key == "total" else " "
        row(f"{head} {what}, without -> with the flags, ms", f"{len(a)} + {len(b)} runs",
            f"{fmt(median(a))} -> {fmt(median(b))}", f"{fmt(pct(a, 99))} -> {fmt(pct(b, 99))}",
            f"x{median(b) / median(a):.3f}; ranges {fmt(min(a))}..{fmt(max(a))} and {fmt(min(b))}..{fmt(max(b))}"
            + (f"; perf map {median([m[0] for m in r['work_maps']]):,.0f} lines, "
               f"{median([m[1] for m in r['work_maps']]) / 2**20:,.1f} MiB" if key == "total" else "")
            + (f"; {(median(b) - median(a)) / FUNCTIONS * 1e3:+.1f} us per new function" if key == "compile" else ""))
    w = r["wall"]
    row("  whole process (spawn to exit), without -> with, ms", f"{len(w[False])} + {len(w[True])} runs",
        f"{fmt(median(w[False]))} -> {fmt(median(w[True]))}", f"{fmt(pct(w[False], 99))} -> {fmt(pct(w[True], 99))}",
        f"x{median(w[True]) / median(w[False]):.3f}")
    if r.get("hangwatch"):
        hangwatch_rows(r["hangwatch"], row)


def table(r):
    out = []

    def row(measure, n, med, p99, comparison, budget="", result=""):
        out.append((measure, n, med, p99, comparison, budget, result))

    rows(r, row)
    head = ("measure", "n", "median", "p99", "comparison", "budget", "result")
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(x) + " |" for x in out]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--node", default="node")
    ap.add_argument("--startup-runs", type=int, default=STARTUP_RUNS, help="per variant")
    ap.add_argument("--workload-runs", type=int, default=WORKLOAD_RUNS, help="per variant")
    ap.add_argument("--hangwatch", help="the hangwatch binary, for parts c and d")
    args = ap.parse_args()
    node = shutil.which(args.node)
    if node is None:
        sys.exit(f"bench: {args.node} not found")
    started = time.monotonic()
    r = measure(node, args.startup_runs, args.workload_runs)
    if args.hangwatch:
        r["hangwatch"] = measure_hangwatch(node, os.path.abspath(args.hangwatch), args.startup_runs,
                                           args.workload_runs)
    log(f"took {time.monotonic() - started:.0f} s")
    print(table(r))


if __name__ == "__main__":
    main()
