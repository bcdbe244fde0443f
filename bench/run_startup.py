"""bench/run_startup.py - part 14 of `make bench`: what `hangwatch run`
itself adds to a program's start and exit.

Wall time from spawn to exit, seen from outside, of `true` and of
`hangwatch run -- true` (the agent ready before the program starts, gone
after it exits: everything `run` adds to any program), and of `node -e 0`
against `hangwatch run -- node -e 0`; each pair of variants alternating in
ABBA order so that a drift of the machine falls on both sides.  Medians of
RUNS per variant, the per-pair differences' median and range.  Runs alone
too:

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
NODE_RUNS = 20
ADDED_BUDGET_MS = 5.0  # run -- true against true
NODE_RATIO_BUDGET = 1.05


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
        return m
    finally:
        shutil.rmtree(report_dir, ignore_errors=True)


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
        row("  `hangwatch run -- node -e 0` against `node -e 0`, spawn to exit, ms", f"{len(n['diffs'])} pairs",
            f"{plain:.1f} -> {watched:.1f}", "",
            f"x{ratio:.3f}; +{statistics.median(n['diffs']):.2f} ms per pair "
            f"(range {min(n['diffs']):+.2f}..{max(n['diffs']):+.2f})",
            f"<= x{NODE_RATIO_BUDGET}", "met" if ratio <= NODE_RATIO_BUDGET else "**MISSED**")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: run_startup.py BUILD_DIR")
    result = measure(os.path.join(os.path.abspath(sys.argv[1]), "bin"))
    out = []
    rows(result, lambda *cols: out.append(cols))
    for r in out:
        print("| " + " | ".join(str(c) for c in r) + " |")
