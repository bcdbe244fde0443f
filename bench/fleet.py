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
(VmHWM), and the turns the loops made (what the machine let them).  The
same, smaller, under --attach fentry on Debian's stock kernel booted
under QEMU (measure_in_vm, bench/vm_fleet.sh).  Runs alone too:

    /usr/bin/python3 bench/fleet.py BUILD_DIR [vm | PROCS THREADS RATE SECS HANGS]
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
    reports = []
    if os.path.isdir(report_dir):
        for name in os.listdir(report_dir):
            if name.endswith(".json"):
                with open(os.path.join(report_dir, name)) as f:
                    reports.append(json.load(f))
    shutil.rmtree(report_dir, ignore_errors=True)
    m = summary("".join(out), reports, procs, threads, rate, secs)
    m.update({"cpu_share": (cpu1 - cpu0) / (t1 - t0) if t1 > t0 else None, "peak_mib": peak_kib / 1024,
              "took": time.monotonic() - started, "agent_exit": agent.returncode})
    return m


def summary(text, reports, procs, threads, rate, secs):
    """What fleet-loops said (`text`) held against the hang reports: the
    hangs, how many were reported, other reports, the detection delays,
    the turns."""
    hung = {(int(p), int(t)) for p, t in re.findall(r"^hang (\d+) (\d+) \d+$", text, re.M)}
    turns = sum(int(n) for n in re.findall(r"^turns \d+ (\d+)$", text, re.M))
    reported, starved, delays = set(), set(), []
    for r in reports:
        apm = r["hangwatch"]
        if apm.get("hang_type") != "hang" or apm.get("stretch_report_index", 0) != 0:
            continue
        thread = (r["report"]["pid"], apm["hung_thread"]["thread_identifier"])
        reported.add(thread)
        if (apm.get("time") or {}).get("cause") == "starved":
            starved.add(thread)
        delays.append(apm["block_duration_us"] - THRESHOLD_US)
    delays.sort()
    # A loop the saturated machine kept from a CPU past the threshold is a true
    # hang, said as starved: counted apart, not as a false report.
    return {"procs": procs, "threads": threads, "rate": rate, "secs": secs, "hangs": len(hung),
            "reported": len(hung & reported), "others": len(reported - hung - starved),
            "others_starved": len((reported & starved) - hung),
            "delay_median_ms": delays[len(delays) // 2] / 1000 if delays else None,
            "delay_max_ms": delays[-1] / 1000 if delays else None,
            "turn_rate": turns / (procs * threads * secs)}


# The virtual machine's fleet: software emulation runs a guest many times
# slower than this machine, so it is smaller (40 processes of 4 loops
# turning 100 times a second, 5 hangs).
VM_FLEET = (40, 4, 100, 30, 5)


def measure_in_vm(bin_dir, procs=VM_FLEET[0], threads=VM_FLEET[1], rate=VM_FLEET[2], secs=VM_FLEET[3],
                  hangs=VM_FLEET[4]):
    """The same under --attach fentry on Debian's stock kernel booted under
    QEMU (tests/vm/kernel_observer_vm.py makes the machine;
    bench/vm_fleet.sh is its /init): the figures as measure's, or None
    with the reason logged when the machine cannot be had."""
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "..", "tests", "vm"))
    import kernel_observer_vm as vm  # noqa: E402 (the tests' machine)
    build_dir = os.path.dirname(os.path.abspath(bin_dir))
    vm_dir = os.path.join(build_dir, "vm-fleet")
    os.makedirs(vm_dir, exist_ok=True)
    try:
        machine = vm.prepare(vm_dir, build_dir, os.path.join(here, "vm_fleet.sh"), ["hangwatch", "fleet-loops"])
    except RuntimeError as e:
        print(f"bench: part 13 in a virtual machine skipped: {e}", file=sys.stderr)
        return None
    console, ended, elapsed, accelerator = vm.run_vm(
        machine, os.path.join(vm_dir, "console.log"),
        f"HW_FLEET=\"{procs} {threads} {rate} {secs} {hangs} {HANG_MS}\"", cpus=1, deadline_s=900)
    print(f"bench: part 13 in a virtual machine: {accelerator}", file=sys.stderr)
    out, reports, fleet = [], [], None
    for line in console:
        if line.startswith("OUT "):
            out.append(line[4:].rstrip("\r\n") + "\n")
        elif line.startswith("REPORT "):
            try:
                reports.append(json.loads(line[7:]))
            except ValueError:
                print(f"bench: part 13 in a virtual machine: a report cut on the console ({vm_dir}/console.log)",
                      file=sys.stderr)
        elif line.startswith("FLEET "):
            fleet = [int(x) for x in line.split()[1:5]]
    if fleet is None:
        print(f"bench: part 13 in a virtual machine: no figures (the machine: {ended}, {elapsed:.0f} s; "
              f"{vm_dir}/console.log)", file=sys.stderr)
        return None
    ticks, window_ns, hwm_kib, clk_tck = fleet
    m = summary("".join(out), reports, procs, threads, rate, secs)
    m.update({"cpu_share": ticks / clk_tck / (window_ns / 1e9) if window_ns else None, "peak_mib": hwm_kib / 1024,
              "took": elapsed, "agent_exit": 0, "in_vm": accelerator})
    return m


def rows(m, row, vm=None):
    ok = m["hangs"] == HANGS and m["reported"] == m["hangs"] and m["others"] == 0 and m["delay_max_ms"] is not None \
        and m["delay_max_ms"] <= 2.0 and m["cpu_share"] is not None and m["cpu_share"] <= 0.02 and m["peak_mib"] <= 100
    row(f"13 watch --all over {m['procs']} processes x {m['threads']} loop threads (asked to turn {m['rate']:,}/s), "
        f"{HANGS} hangs of {HANG_MS / 1000:.0f} s",
        "1 run", f"{m['reported']} of {m['hangs']} reported; detection p99 {m['delay_max_ms']:.2f} ms; "
        f"agent {100 * m['cpu_share']:.2f} % of a core, {m['peak_mib']:.0f} MiB",
        "-", f"the loops turned {m['turn_rate']:,.0f} times a second each (what the machine let them); detection "
        f"median {m['delay_median_ms']:.2f} ms after the threshold; {m['others']} other reports (and "
        f"{m.get('others_starved', 0)} of loops the machine kept from a CPU past the threshold, said as starved); run took "
        f"{m['took']:.0f} s",
        "every hang, p99 <= 2 ms, <= 2 % of a core, <= 100 MiB", "pass" if ok else "FAIL")
    if vm is not None:
        vm_row(vm, row)


def vm_row(vm, row):
    found = vm["hangs"] > 0 and vm["reported"] == vm["hangs"] and vm["others"] == 0
    row(f"  Debian's stock kernel under QEMU, --attach fentry: {vm['procs']} processes x {vm['threads']} loop "
        f"threads (asked to turn {vm['rate']:,}/s), {vm['hangs']} hangs",
        "1 run", f"{vm['reported']} of {vm['hangs']} reported; detection p99 "
        f"{vm['delay_max_ms'] if vm['delay_max_ms'] is not None else float('nan'):.2f} ms; agent "
        f"{100 * (vm['cpu_share'] or 0):.2f} % of a core, {vm['peak_mib']:.0f} MiB",
        "-", f"emulated ({vm['in_vm'].split(':')[0]}, one CPU): compare with the rows of this machine by ratio only; the loops turned "
        f"{vm['turn_rate']:,.0f} times a second each; {vm['others']} other reports ({vm.get('others_starved', 0)} more "
        "said as starved)",
        "every hang", "pass" if found else "FAIL")


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3, 7) or (len(sys.argv) == 3 and sys.argv[2] != "vm"):
        sys.exit("usage: fleet.py BUILD_DIR [vm | PROCS THREADS RATE SECS HANGS]")
    bin_dir = os.path.join(os.path.abspath(sys.argv[1]), "bin")
    lines = []
    if sys.argv[2:] == ["vm"]:
        result = measure_in_vm(bin_dir)
        print(json.dumps(result, indent=1))
        if result is None:
            sys.exit(1)
        vm_row(result, lambda *cols: lines.append(cols))
    else:
        result = measure(bin_dir, None, *[int(a) for a in sys.argv[2:]])
        print(json.dumps(result, indent=1))
        rows(result, lambda *cols: lines.append(cols))
    for r in lines:
        print("| " + " | ".join(str(c) for c in r) + " |")
