#!/usr/bin/python3
"""compare/run.py - `make compare`: every scenario under every detector, side
by side, one table.

Runs compare-scenarios (a hand-written loop watched through the C library)
once per (scenario, detector), sets the reports each run wrote against what
the program says it did, prints the table and puts it into
docs/comparison.md between the "results" markers (the discussion around it
is prose kept by hand).  Then the verdict corpus
(tests/integration/test_causes.py: hangs each made of one known thing,
beside two CPU hogs) and its accuracy, between the "causes" markers.
Progress goes to stderr.

    /usr/bin/python3 compare/run.py [--build build] [--doc docs/comparison.md | --no-doc]
                                    [--scenarios a,b] [--detectors x,y]

Columns, per run:
  reports     how many reports were written (0 = not detected)
  latency     from the start of the first stall to the first detection
  culprit     whether the first report's hung-thread stack holds the
              function that stalled (for the queue, which has no culprit,
              whether it blames a queued task); for aba, also which of A and
              B each report caught, in order
  stall       the stalls' actual length minus the asked length, the worst
              one (sleeps are one relative nanosleep, so a detector that
              disturbed the sleeping thread would show here)
Standard library only, Debian's /usr/bin/python3.
"""

import argparse
import datetime
import glob
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

DETECTORS = ["runloop-exact", "runloop-periodic", "runloop-stutter", "semaphore", "ping", "frame-gap"]

# Where the stack of a scenario's stall moves, a letter per phase: the
# culprit column then also lists the phases the reports caught, in order.
PHASES = {"aba": {"culprit_blocked_in_a": "A", "culprit_blocked_in_b": "B"}}

# scenario: (what it is, a hang is there to find?, the culprit functions)
SCENARIOS = {
    "sleep4": ("a callback sleeps 4 s", True, ["culprit_sleep_4s"]),
    "spin3": ("a callback spins 3 s", True, ["culprit_spin_3s"]),
    "late_ping": ("800 ms of work, then 1.7 s more (the ping comes 800 ms in)", True, ["culprit_late_ping"]),
    "queue30": ("30 queued tasks of 100 ms", False, ["queued_task_100ms"]),
    "stutter": ("1 s stalls 0.3 s apart, six of them", False, ["culprit_stutter_1s"]),
    "stall1900": ("one 1.9 s stall (threshold 2 s)", False, ["culprit_spin_1900ms"]),
    "stall2100": ("one 2.1 s stall", True, ["culprit_spin_2100ms"]),
    "aba": ("one callback blocked 3 s in A, 3 s in B, 3 s in A", True, ["culprit_aba"]),
    "idle20": ("20 s idle", False, []),
}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def hung_stack(report):
    """Function names on the hung thread's stack in a report."""
    idx = report["hangwatch"]["hung_thread"].get("report_array_index")
    threads = report["crash"]["threads"]
    if idx is None or idx >= len(threads):
        return []
    return [f.get("symbol_name") or "" for f in threads[idx]["backtrace"]["contents"]]


def run_one(build, scenario, detector, workdir, timeout=120):
    """Run one scenario under one detector; returns the measured row."""
    reports_dir = os.path.join(workdir, "%s-%s" % (scenario, detector))
    results_path = reports_dir + ".json"
    shutil.rmtree(reports_dir, ignore_errors=True)
    env = dict(os.environ, HANGWATCH_AGENT=os.path.join(build, "bin", "hangwatch"))
    proc = subprocess.run([os.path.join(build, "bin", "compare-scenarios"), scenario, detector, reports_dir,
                           results_path], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError("compare-scenarios %s %s failed (%d): %s" % (scenario, detector, proc.returncode,
                                                                        proc.stderr.strip()))
    with open(results_path) as f:
        results = json.load(f)
    files = []
    for path in sorted(glob.glob(os.path.join(reports_dir, "*.json"))):
        with open(path) as f:
            files.append((path, json.load(f)))
    files.sort(key=lambda pr: pr[1]["hangwatch"]["detected_at_unix_ms"])
    reports = [r for _, r in files]
    stalls = [s for s in results["stalls"] if s["nominal_ms"] > 0]
    first_start = min((s["start_unix_ms"] for s in results["stalls"]), default=None)
    row = {
        "scenario": scenario,
        "detector": detector,
        "reports": len(reports),
        "latency_s": None,
        "culprit": None,
        "stall_change_ms": max((s["actual_ms"] - s["nominal_ms"] for s in stalls), key=abs, default=0.0),
        "hang_types": sorted({r["hangwatch"]["hang_type"] for r in reports}),
        "first_stack": [],
        "block_s": None,
        "pings_posted": results.get("pings_posted", 0),
        "runqueue_wait_s": results.get("loop_runqueue_wait_ms", 0.0) / 1000.0,  # the loop thread's, whole run
        "report_files": files,  # (path, report), first detected first
    }
    if reports:
        first = reports[0]
        if first_start is not None:
            row["latency_s"] = (first["hangwatch"]["detected_at_unix_ms"] - first_start) / 1000.0
        stack = hung_stack(first)
        row["first_stack"] = stack[:6]
        culprits = SCENARIOS[scenario][2]
        row["culprit"] = any(c in stack for c in culprits) if culprits else None
        row["block_s"] = first["hangwatch"]["block_duration_us"] / 1e6
    phases = PHASES.get(scenario)
    if phases:
        seen = []
        for r in reports:
            letter = next((phases[f] for f in hung_stack(r) if f in phases), "?")
            if seen and seen[-1][0] == letter:
                seen[-1][1] += 1
            else:
                seen.append([letter, 1])
        if any(l != "?" for l, _ in seen):  # none of A and B: nothing to list
            row["phases"] = ", ".join(l if n == 1 else "%s×%d" % (l, n) for l, n in seen)
    return row


def fmt_row(row):
    lat = "%.2f s" % row["latency_s"] if row["latency_s"] is not None else "-"
    if row["culprit"] is None:
        culprit = "-"
    else:
        culprit = "yes" if row["culprit"] else "no (%s)" % (row["first_stack"][0] if row["first_stack"] else "?")
        if row.get("phases"):
            culprit += " (%s)" % row["phases"]
    change = "%+.1f ms" % row["stall_change_ms"]
    kinds = "" if row["hang_types"] in ([], ["hang"]) else " (%s)" % ", ".join(row["hang_types"])
    return "| %s | %d%s | %s | %s | %s |" % (row["detector"], row["reports"], kinds, lat, culprit, change)


def build_table(rows):
    out = []
    by_scenario = {}
    for r in rows:
        by_scenario.setdefault(r["scenario"], []).append(r)
    for scenario, srows in by_scenario.items():
        what, has_hang, _ = SCENARIOS[scenario]
        out.append("**%s**: %s (%s)" % (scenario, what, "a hang to find" if has_hang else "no hang to report"))
        out.append("")
        out.append("| detector | reports | latency | culprit on stack | stall length change |")
        out.append("|---|---|---|---|---|")
        for r in srows:
            out.append(fmt_row(r))
        out.append("")
    return "\n".join(out)


def build_summary(rows):
    """One line per scenario, one column per detector: reports written."""
    detectors = []
    for r in rows:
        if r["detector"] not in detectors:
            detectors.append(r["detector"])
    out = ["| scenario | " + " | ".join(detectors) + " |", "|---" * (len(detectors) + 1) + "|"]
    by_key = {(r["scenario"], r["detector"]): r for r in rows}
    for scenario in SCENARIOS:
        if not any((scenario, d) in by_key for d in detectors):
            continue
        cells = []
        for d in detectors:
            r = by_key.get((scenario, d))
            cells.append("-" if r is None else str(r["reports"]))
        out.append("| %s | %s |" % (scenario, " | ".join(cells)))
    return "\n".join(out)


def machine():
    try:
        with open("/proc/cpuinfo") as f:
            model = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "?")
    except OSError:
        model = "?"
    return "%s, %d CPUs, Linux %s" % (model, os.cpu_count() or 0, platform.release())


def run_causes(build):
    """The verdict corpus (tests/integration/test_causes.py), run beside two
    CPU hogs: its table and accuracy line, or why there are none."""
    script = os.path.join(ROOT, "tests", "integration", "test_causes.py")
    log("compare: the verdict corpus (about a minute)")
    run = subprocess.run(["/usr/bin/python3", script, os.path.join(build, "bin"), ROOT, "corpus"],
                         capture_output=True, text=True, timeout=900)
    try:
        with open(os.path.join(build, "causes", "causes.md")) as f:
            table = f.read()
    except OSError:
        table = ""
    if run.returncode != 0:
        table += "\nThe corpus failed: %s\n" % (run.stderr.strip().splitlines() or ["?"])[-1]
    return table


def update_doc(doc, text, part="results", writer="compare/run.py"):
    begin, end = "<!-- %s: begin (%s writes this part) -->" % (part, writer), "<!-- %s: end -->" % part
    with open(doc) as f:
        content = f.read()
    if begin not in content or end not in content:
        log("compare: %s has no results markers; not updated" % doc)
        return
    head, rest = content.split(begin, 1)
    _, tail = rest.split(end, 1)
    with open(doc, "w") as f:
        f.write(head + begin + "\n" + text + "\n" + end + tail)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--doc", default=os.path.join(ROOT, "docs", "comparison.md"))
    ap.add_argument("--no-doc", action="store_true")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--detectors", default=",".join(DETECTORS))
    args = ap.parse_args()
    scenarios = [s for s in args.scenarios.split(",") if s]
    detectors = [d for d in args.detectors.split(",") if d]
    for s in scenarios:
        if s not in SCENARIOS:
            ap.error("unknown scenario %r (known: %s)" % (s, ", ".join(SCENARIOS)))
    for d in detectors:
        if d not in DETECTORS:
            ap.error("unknown detector %r (known: %s)" % (d, ", ".join(DETECTORS)))
    program = os.path.join(args.build, "bin", "compare-scenarios")
    if not os.access(program, os.X_OK):
        ap.error("%s is missing: build first (make)" % program)

    rows = []
    work = tempfile.mkdtemp(prefix="hangwatch-compare-")
    try:
        for s in scenarios:
            for d in detectors:
                log("compare: %s under %s" % (s, d))
                rows.append(run_one(args.build, s, d, work))
    except (RuntimeError, OSError, ValueError, subprocess.TimeoutExpired) as e:
        log("compare: %s" % e)
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    text = "Run %s on %s; threshold 2 s.\n\nReports written:\n\n%s\n\n%s" % (
        stamp, machine(), build_summary(rows), build_table(rows))
    print(text)
    causes = "Run %s on %s.\n\n%s" % (stamp, machine(), run_causes(args.build))
    print(causes)
    if not args.no_doc:
        update_doc(args.doc, text)
        update_doc(args.doc, causes, part="causes")
        log("compare: tables written to %s" % args.doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
