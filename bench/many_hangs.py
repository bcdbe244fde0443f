"""bench/many_hangs.py - part 11 of `make bench`: as many simultaneous
hangs as processes can be watched.

`hangwatch run --daily-limit 0 -- many-hangs 1000 6`: 1,000 children of
one process block their loops at the same moment for 6 s.  Every hang must
be on stderr (with its report, or saying that it has none and why) and in
the exit line; the figures are how many were announced, reported and
dropped (and counted), how long the agent took from the hangs' start to its
last report, and its peak memory (VmHWM, read while it runs).  Runs alone
too:

    /usr/bin/python3 bench/many_hangs.py BUILD_DIR [COUNT SECONDS [HOGS]]

The second row of the part is 1,000 hangs of 8 s with three CPU hogs
beside, as a busy machine gives them.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

COUNT = 1000
SECONDS = 6
DEADLINE_S = 600  # a run still going then is stopped, and says so


def measure(bin_dir, env=None, count=COUNT, seconds=SECONDS, hogs=0):
    """One run; with `hogs`, that many CPU-bound processes run beside it all along."""
    hog_procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(hogs)]
    try:
        result = measure_once(bin_dir, env, count, seconds)
    finally:
        for h in hog_procs:
            h.kill()
            h.wait()
    result["hogs"] = hogs
    return result


def measure_once(bin_dir, env, count, seconds):
    report_dir = tempfile.mkdtemp(prefix="hw-bench-many-")
    os.rmdir(report_dir)
    started = time.monotonic()
    proc = subprocess.Popen([os.path.join(bin_dir, "hangwatch"), "run", "--daily-limit", "0", "--max-dir-size", "0",
                             "--report-dir", report_dir, "--", os.path.join(bin_dir, "many-hangs"), str(count),
                             str(seconds)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    # Read both pipes while it runs: the agent writes a line per hang to
    # stderr, and a full pipe would hold its report writer up.
    streams = {"out": [], "err": []}
    readers = [threading.Thread(target=lambda f=f, k=k: streams[k].extend(f), daemon=True)
               for k, f in (("out", proc.stdout), ("err", proc.stderr))]
    for r in readers:
        r.start()
    peak_kb = 0
    finished = True
    try:
        while proc.poll() is None:
            if time.monotonic() - started > DEADLINE_S:
                finished = False
                proc.terminate()
                break
            try:
                with open(f"/proc/{proc.pid}/status") as f:
                    peak_kb = max([peak_kb] + [int(l.split()[1]) for l in f if l.startswith("VmHWM:")])
            except OSError:
                pass
            time.sleep(0.2)  # pacing the reads of the agent's memory
        proc.wait(timeout=120)
        for r in readers:
            r.join(timeout=60)
        out, err = "".join(streams["out"]), "".join(streams["err"])
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    took = time.monotonic() - started
    hung = set(int(p) for p in re.findall(r"^hang (\d+) \d+$", out, re.M))
    announced = set(int(p) for p in re.findall(r"^hangwatch: (?:launch )?hang in many-hangs \(pid (\d+)\)", err, re.M))
    no_report = len(re.findall(r"no report of this capture: the report writer was behind", err))
    unregistered = len(re.findall(r"could not register with the agent", err))
    m = re.search(r"^hangwatch: (\d+) hangs?", err, re.M)
    counted = int(m.group(1)) if m else 0
    reports = len([n for n in os.listdir(report_dir) if n.endswith(".json")]) if os.path.isdir(report_dir) else 0
    shutil.rmtree(report_dir, ignore_errors=True)
    # The parent, forking a thousand children, may hang too (its own launch
    # hang): it is announced and counted like any other.
    return {"count": count, "seconds": seconds, "hung": len(hung), "announced": len(announced & hung),
            "others": len(announced - hung), "unregistered": unregistered,
            "no_report": no_report, "counted": counted, "reports": reports, "exit": proc.returncode,
            "took": took, "peak_mib": peak_kb / 1024, "finished": finished}


def rows(m, row):
    ok = m["finished"] and m["exit"] == 0 and m["announced"] == m["hung"] == m["count"] and \
        m["counted"] == m["count"] + m["others"]
    beside = f", {m['hogs']} CPU hogs beside" if m.get("hogs") else ""
    row(f"11 {m['count']:,} simultaneous hangs of {m['seconds']} s{beside}: announced on stderr and counted at exit",
        "1 run", f"{m['announced']:,} / {m['counted']:,}",
        "-", f"{m['hung']:,} children hung"
        + (f" (and the parent: {m['others']} hang while forking them)" if m["others"] else "")
        + (f"; {m['unregistered']} could not register (said so, unwatched)" if m["unregistered"] else "")
        + f"; {m['reports']:,} reports written, {m['no_report']:,} announced without "
        f"one (queue full, counted); run took {m['took']:.1f} s"
        + ("" if m["finished"] else f" (stopped: not done within {DEADLINE_S} s)")
        + f"; agent's peak memory {m['peak_mib']:.0f} MiB",
        "every hang announced and counted", "pass" if ok else "FAIL")


if __name__ == "__main__":
    if len(sys.argv) not in (2, 4, 5):
        sys.exit("usage: many_hangs.py BUILD_DIR [COUNT SECONDS [HOGS]]")
    bin_dir = os.path.join(os.path.abspath(sys.argv[1]), "bin")
    args = tuple(int(a) for a in sys.argv[2:])
    result = measure(bin_dir, None, *args)
    out = []
    rows(result, lambda *cols: out.append(cols))
    for r in out:
        print("| " + " | ".join(str(c) for c in r) + " |")
