"""bench/run_startup.py - part 14 of `make bench`: what `hangwatch run`
itself adds to a program's start and exit.

Wall time from spawn to exit, seen from outside, of `true` and of
`hangwatch run -- true` (the agent ready before the program starts, gone
after it exits: everything `run` adds to any program), and of `node -e 0`
against `hangwatch run -- node -e 0`; each pair of variants alternating in
ABBA order so that a drift of the machine falls on both sides.  Medians of
RUNS per variant, the per-pair differences' median and range.  As root,
also `hangwatch watch --duration 1s -p PID` of an idle process through the
kernel observer: by how much it outlasts its second, spawn to exit (runs
DETACH_PAUSE_S apart: the kernel detaches one run's programs one at a time
after it has ended, and a run that attaches meanwhile waits).  Runs
alone too:

    /usr/bin/python3 bench/run_startup.py BUILD_DIR
"""
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

RUNS = 40             # per variant
NODE_RUNS = 60        # node's own start varies by ms from run to run (20 pairs' differences: -20..+15 ms)
ADDED_BUDGET_MS = 5.0  # run -- true against true
NODE_RATIO_BUDGET = 1.05
DURATION_RUNS = 10
DURATION_BUDGET_MS = 100.0  # watch --duration: its end after its time
DETACH_PAUSE_S = 2.0  # between those runs: one run's detaching, left to a process of its own, ends before the next


def spawn_ms(cmd, env):
    started = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=True)
    return (time.perf_counter() - started) * 1000.0


def side_by_side(plain, watched, runs, env):
    """ABBA: plain, watched, watched, plain, ...; per-pair differences."""
    a, b = [], []
    for i in range(runs):
        if i % 2 == 0:
            a.append(spawn_ms(plain, env))
            b.append(spawn_ms(watched, env))
        else:
            b.append(spawn_ms(watched, env))
            a.append(spawn_ms(plain, env))
    diffs = [y - x for x, y in zip(a, b)]
    return {"plain": a, "watched": b, "diffs": diffs}


def measure(bin_dir, env=None):
    env = dict(env or os.environ)
    report_dir = tempfile.mkdtemp(prefix="hw-bench-start-")
    try:
        run = [os.path.join(bin_dir, "hangwatch"), "run", "--report-dir", report_dir, "--"]
        true = shutil.which("true") or "/usr/bin/true"
        spawn_ms([true], env)  # warm the page cache for both
        spawn_ms(run + [true], env)
        m = {"true": side_by_side([true], run + [true], RUNS, env)}
        node = shutil.which("node")
        if node:
            spawn_ms([node, "-e", "0"], env)
            m["node"] = side_by_side([node, "-e", "0"], run + [node, "-e", "0"], NODE_RUNS, env)
        if os.geteuid() == 0:
            m["duration"] = duration_overshoot(bin_dir, report_dir, env)
        return m
    finally:
        shutil.rmtree(report_dir, ignore_errors=True)


def duration_overshoot(bin_dir, report_dir, env):
    """ms past its 1 s that `watch --duration 1s` takes, spawn to exit; None where it cannot watch."""
    idle = subprocess.Popen(["sleep", "600"])
    try:
        over = []
        for _ in range(DURATION_RUNS):
            took = spawn_ms([os.path.join(bin_dir, "hangwatch"), "watch", "-q", "--duration", "1s", "--report-dir",
                             report_dir, "-p", str(idle.pid)], env)
            over.append(took - 1000.0)
            time.sleep(DETACH_PAUSE_S)
        return over
    except subprocess.CalledProcessError:
        return None
    finally:
        idle.kill()
        idle.wait()


def rows(m, row):
    t = m["true"]
    plain, watched = statistics.median(t["plain"]), statistics.median(t["watched"])
    added = statistics.median(t["diffs"])
    row("14 `hangwatch run -- true` against `true`, spawn to exit, ms", f"{len(t['diffs'])} pairs",
        f"{plain:.2f} -> {watched:.2f}", "",
        f"+{added:.2f} ms per pair (range {min(t['diffs']):+.2f}..{max(t['diffs']):+.2f}); ABBA order",
        f"<= +{ADDED_BUDGET_MS:.0f} ms", "met" if added <= ADDED_BUDGET_MS else "**MISSED**")
    n = m.get("node")
    if n:
        plain, watched = statistics.median(n["plain"]), statistics.median(n["watched"])
        ratio = watched / plain
        q1, _, q3 = statistics.quantiles(n["diffs"], n=4)
        row("  `hangwatch run -- node -e 0` against `node -e 0`, spawn to exit, ms", f"{len(n['diffs'])} pairs",
            f"{plain:.1f} -> {watched:.1f}", "",
            f"x{ratio:.3f}; +{statistics.median(n['diffs']):.2f} ms per pair "
            f"(quartiles {q1:+.2f}..{q3:+.2f}, range {min(n['diffs']):+.2f}..{max(n['diffs']):+.2f})",
            f"<= x{NODE_RATIO_BUDGET}", "met" if ratio <= NODE_RATIO_BUDGET else "**MISSED**")
    over = m.get("duration")
    if over:
        med = statistics.median(over)
        row("  `hangwatch watch --duration 1s -p PID` (kernel observer): its end after its second, ms",
            f"{len(over)} runs", f"{med:.1f}", f"{max(over):.1f}",
            f"range {min(over):+.1f}..{max(over):+.1f}; spawn to exit, the programs' load and detach included",
            f"<= {DURATION_BUDGET_MS:.0f} ms", "met" if med <= DURATION_BUDGET_MS else "**MISSED**")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: run_startup.py BUILD_DIR")
    result = measure(os.path.join(os.path.abspath(sys.argv[1]), "bin"))
    out = []
    rows(result, lambda *cols: out.append(cols))
    for r in out:
        print("| " + " | ".join(str(c) for c in r) + " |")
