"""bench/line_delay.py - part 15 of `make bench`: how soon after the
threshold a hang is said on stderr, with two CPU hogs beside.

`hangwatch run --threshold 500ms -- bench-hang-loop ...`: a loop whose hangs
of 900 ms alternate between spinning and sleeping, each one's start written
down by the program itself (CLOCK_MONOTONIC, bench_hang_loop.c).  The
agent's stderr is read as it comes, each line stamped with CLOCK_MONOTONIC
on arrival by a reader at SCHED_FIFO where it may be (so that the hogs do
not delay the reading itself).  For hang k, the k-th "hang detected" line
(the line at detection, report_herald.c) and the k-th "hang in" line (the
report's) are each measured from the hang's start + the threshold.  Runs
alone too:

    /usr/bin/python3 bench/line_delay.py BUILD_DIR [HANGS]

tests/integration/test_run.py runs a short version of it as a test.
"""
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import machine_stalls
from process_tree import describe_tree

HANGS = 20
THRESHOLD_MS = 500
HANG_MS = 900
BUDGET_MS = 10.0  # the line at detection, after the threshold, for a spinning program
HOGS = 2


def start_hogs(n=HOGS):
    return [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(n)]


def stop_hogs(hogs):
    for h in hogs:
        h.kill()
        h.wait()


def read_lines(stream, lines):
    """Each line of `stream` with CLOCK_MONOTONIC ns at its arrival."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))  # this thread only
    except (OSError, AttributeError):
        pass  # not root: the reading may then lag a little behind the writing
    for line in stream:
        lines.append((time.monotonic_ns(), line))


def measure(bin_dir, env=None, hangs=HANGS, hogs=HOGS):
    work = tempfile.mkdtemp(prefix="hw-bench-line-")
    out = os.path.join(work, "hangs.tsv")
    running = start_hogs(hogs)
    stalls = machine_stalls.start()
    try:
        argv = [os.path.join(bin_dir, "hangwatch"), "run", "--report-dir", os.path.join(work, "r"),
                "--threshold", f"{THRESHOLD_MS}ms", "--daily-limit", "0", "--max-dir-size", "0", "--",
                os.path.join(bin_dir, "bench-hang-loop"), out, "7", str(THRESHOLD_MS), "300", "300",
                f"{HANG_MS}:{hangs}"]
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
        lines = []
        reader = threading.Thread(target=read_lines, args=(proc.stderr, lines), daemon=True)
        reader.start()
        try:
            proc.wait(timeout=30 + hangs * 3)
        except subprocess.TimeoutExpired:
            state = describe_tree(proc.pid)
            proc.kill()
            proc.wait()
            reader.join(timeout=30)
            raise RuntimeError(f"hangwatch run did not end in {30 + hangs * 3} s; its threads and its program's "
                               f"then:\n{state}\n{machine_stalls.describe(stalls)}; its stderr:\n"
                               + "".join(l for _, l in lines)[-3000:])
        reader.join(timeout=30)
        if proc.returncode != 0:
            raise RuntimeError(f"hangwatch run exited {proc.returncode}: {''.join(l for _, l in lines)[-2000:]}")
        hangs = []
        with open(out) as f:
            for line in f:
                if line.startswith("#"):
                    continue
                fields = line.split("\t")
                hangs.append((fields[1], int(fields[4]), int(fields[6])))  # kind, mono_start_ns, end_ns
    finally:
        stalls.stop()
        stop_hogs(running)
        shutil.rmtree(work, ignore_errors=True)
    at_detection = [t for t, l in lines if l.startswith("hangwatch: hang detected in bench-hang-loop")]
    with_report = [t for t, l in lines if l.startswith("hangwatch: hang in bench-hang-loop")]
    notes = [l for _, l in lines if "ended unseen" in l]
    thr_ns = THRESHOLD_MS * 1000000
    said = match_lines(at_detection, hangs, thr_ns)
    said_hangs = [hangs[i] for _, i in said]

    def delays(pairs, kind, less_stalls=False):
        return [(t - start - thr_ns - (machine_stalls.overlap_ns(stalls.stalls, start + thr_ns, t)
                                       if less_stalls else 0)) / 1e6
                for t, (k, start, _) in pairs if k == kind]

    # A hang with no line: how long the agent could have caught it (from its threshold to its end),
    # and how much of that the machine ran nothing at all (machine_stalls.py).
    unsaid = [{"index": i, "kind": k, "window_ms": (end - start - thr_ns) / 1e6,
               "stalled_ms": machine_stalls.overlap_ns(stalls.stalls, start + thr_ns, end) / 1e6}
              for i, (k, start, end) in enumerate(hangs) if i not in {j for _, j in said}]
    return {"hangs": len(hangs), "said_at_detection": len(at_detection), "said_with_report": len(with_report),
            "unsaid": unsaid, "unseen_notes": len(notes),
            "detection": {k: delays([(t, hangs[i]) for t, i in said], k) for k in ("spin", "sleep")},
            "report": {k: delays(list(zip(with_report, said_hangs)), k) for k in ("spin", "sleep")}, "hogs": hogs,
            # the same, less the time the machine itself ran nothing (machine_stalls.py)
            "detection_less_stalls": {k: delays([(t, hangs[i]) for t, i in said], k, True)
                                      for k in ("spin", "sleep")},
            "stalls": machine_stalls.describe(stalls),
            "stderr": "".join(l for _, l in lines)}


def match_lines(arrivals, hangs, thr_ns):
    """Each line at detection's hang: the last hang whose threshold had passed when the line came
    (a line is written at detection, after the threshold, and before the next hang's); (arrival, index)
    pairs, in order, each hang at most once."""
    pairs, used = [], set()
    for t in arrivals:
        passed = [i for i, (_, start, _) in enumerate(hangs) if start + thr_ns <= t]
        if passed and passed[-1] not in used:
            used.add(passed[-1])
            pairs.append((t, passed[-1]))
    return pairs


def rows(m, row):
    def stats(xs):
        return (f"{statistics.median(xs):.2f}", f"{max(xs):.2f}") if xs else ("-", "-")

    spin = m["detection"]["spin"]
    med, worst = stats(spin)
    ok = spin and m["said_at_detection"] == m["hangs"] and statistics.median(spin) <= BUDGET_MS
    row(f"15 the line at detection after the threshold, spinning program, {m['hogs']} CPU hogs beside, ms",
        f"{len(spin)} hangs", med, worst,
        f"{m['said_at_detection']} of {m['hangs']} hangs said at detection; stamped on arrival by a SCHED_FIFO "
        f"reader; sleeping hangs {'/'.join(stats(m['detection']['sleep']))} (median/max); {m['stalls']}",
        f"<= {BUDGET_MS:.0f} ms", "met" if ok else "**MISSED**")
    rmed, rworst = stats(m["report"]["spin"])
    row("  the report's line (symbolized stack, report's path), spinning program, ms",
        f"{len(m['report']['spin'])} hangs", rmed, rworst,
        f"sleeping hangs {'/'.join(stats(m['report']['sleep']))} (median/max); the worker runs on idle time", "", "")


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: line_delay.py BUILD_DIR [HANGS]")
    result = measure(os.path.join(os.path.abspath(sys.argv[1]), "bin"),
                     hangs=int(sys.argv[2]) if len(sys.argv) == 3 else HANGS)
    table = []
    rows(result, lambda *cols: table.append(cols))
    for r in table:
        print("| " + " | ".join(str(c) for c in r) + " |")
