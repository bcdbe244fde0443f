"""bench/fleet.py - part 13 of `make bench`: one agent for a machine's
worth of loops.

`hangwatch watch --all --exe '*/fleet-loops'` is started, then
`fleet-loops 200 4 1000 40 10 3000`: 200 processes of 4 loop threads
each, every loop turning about 1,000 times a second (as many as the machine
lets it), 10 of them hanging 3 s at known moments.  The figures: every hang
reported (by the program's own word, "hang PID TID"), the detection's
delay after the threshold (a report's block_duration_us less the
threshold: the largest of the ten is their p99), the agent's CPU time over
the steady part of the run as a share of one core, its peak memory
(VmHWM), and the turns the loops made (what the machine let them).  Runs
alone too:

    /usr/bin/python3 bench/fleet.py BUILD_DIR [PROCS THREADS RATE SECS HANGS]
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

PROCS, THREADS, RATE, SECS, HANGS, HANG_MS = 200, 4, 1000, 40, 10, 3000
THRESHOLD_US = 2_000_000


def cpu_seconds(pid):
    """utime + stime of process `pid` so far, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def status_kib(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def measure(bin_dir, env=None, procs=PROCS, threads=THREADS, rate=RATE, secs=SECS, hangs=HANGS):
    report_dir = tempfile.mkdtemp(prefix="hw-bench-fleet-")
    os.rmdir(report_dir)
    agent = subprocess.Popen([os.path.join(bin_dir, "hangwatch"), "watch", "--all", "--exe", "*/fleet-loops",
                              "--daily-limit", "0", "--report-dir", report_dir, "-q"],
                             stderr=subprocess.PIPE, text=True, env=env)
    err = []
    reader = threading.Thread(target=lambda: err.extend(agent.stderr), daemon=True)
    reader.start()
    time.sleep(1.0)  # the agent's first scan of the machine
    started = time.monotonic()
    fleet = subprocess.Popen([os.path.join(bin_dir, "fleet-loops"), str(procs), str(threads), str(rate), str(secs),
                              str(hangs), str(HANG_MS)], stdout=subprocess.PIPE, text=True)
    out = []
    fleet_reader = threading.Thread(target=lambda: out.extend(fleet.stdout), daemon=True)
    fleet_reader.start()
    # the steady part: from a few seconds in (every process found) to a few before the end
    time.sleep(min(6.0, secs / 4))
    cpu0, t0 = cpu_seconds(agent.pid), time.monotonic()
    time.sleep(max(1.0, secs - min(6.0, secs / 4) - 4.0))
    cpu1, t1 = cpu_seconds(agent.pid), time.monotonic()
    peak_kib = status_kib(agent.pid, "VmHWM")
    fleet.wait(timeout=secs + 120)
    fleet_reader.join(timeout=30)
    time.sleep(3.0)  # the last hang's final update
    agent.terminate()
    agent.wait(timeout=60)
    reader.join(timeout=30)
    text = "".join(out)
    hung = {(int(p), int(t)) for p, t in re.findall(r"^hang (\d+) (\d+) \d+$", text, re.M)}
    turns = sum(int(n) for n in re.findall(r"^turns \d+ (\d+)$", text, re.M))
    reported, delays = set(), []
    if os.path.isdir(report_dir):
        for name in os.listdir(report_dir):
            if not name.endswith(".json"):
                continue
            with open(os.path.join(report_dir, name)) as f:
                r = json.load(f)
            apm = r["hangwatch"]
            if apm.get("hang_type") != "hang" or apm.get("stretch_report_index", 0) != 0:
                continue
            reported.add((r["report"]["pid"], apm["hung_thread"]["thread_identifier"]))
            delays.append(apm["block_duration_us"] - THRESHOLD_US)
    shutil.rmtree(report_dir, ignore_errors=True)
    delays.sort()
    return {"procs": procs, "threads": threads, "rate": rate, "secs": secs, "hangs": len(hung),
            "reported": len(hung & reported), "others": len(reported - hung),
            "delay_median_ms": delays[len(delays) // 2] / 1000 if delays else None,
            "delay_max_ms": delays[-1] / 1000 if delays else None,
            "cpu_share": (cpu1 - cpu0) / (t1 - t0) if t1 > t0 else None, "peak_mib": peak_kib / 1024,
            "turn_rate": turns / (procs * threads * secs), "took": time.monotonic() - started,
            "agent_exit": agent.returncode}


def rows(m, row):
    ok = m["hangs"] == HANGS and m["reported"] == m["hangs"] and m["others"] == 0 and m["delay_max_ms"] is not None \
        and m["delay_max_ms"] <= 2.0 and m["cpu_share"] is not None and m["cpu_share"] <= 0.02 and m["peak_mib"] <= 100
    row(f"13 watch --all over {m['procs']} processes x {m['threads']} loop threads (asked to turn {m['rate']:,}/s), "
        f"{HANGS} hangs of {HANG_MS / 1000:.0f} s",
        "1 run", f"{m['reported']} of {m['hangs']} reported; detection p99 {m['delay_max_ms']:.2f} ms; "
        f"agent {100 * m['cpu_share']:.2f} % of a core, {m['peak_mib']:.0f} MiB",
        "-", f"the loops turned {m['turn_rate']:,.0f} times a second each (what the machine let them); detection "
        f"median {m['delay_median_ms']:.2f} ms after the threshold; {m['others']} other reports; run took "
        f"{m['took']:.0f} s",
        "every hang, p99 <= 2 ms, <= 2 % of a core, <= 100 MiB", "pass" if ok else "FAIL")


if __name__ == "__main__":
    if len(sys.argv) not in (2, 7):
        sys.exit("usage: fleet.py BUILD_DIR [PROCS THREADS RATE SECS HANGS]")
    bin_dir = os.path.join(os.path.abspath(sys.argv[1]), "bin")
    args = [int(a) for a in sys.argv[2:]]
    result = measure(bin_dir, None, *args)
    print(json.dumps(result, indent=1))
    lines = []
    rows(result, lambda *cols: lines.append(cols))
    for r in lines:
        print("| " + " | ".join(str(c) for c in r) + " |")
