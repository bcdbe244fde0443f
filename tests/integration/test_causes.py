"""test_causes - the verdict corpus (decisions.md §44): hangs whose cause is
known by construction, each run with two CPU hogs beside it, the report's
figures held to the kernel's own counters (the hung thread's schedstat,
read by this test before the hang and after it) and its verdict to what the
hang was made of.

    corpus   every case below under `hangwatch run`, one at a time, two CPU
             hogs running all along.  A case fails when its figures
             disagree with the kernel's, when a blocking case is not
             blocked on what it blocks on, or when a computing case's
             verdict is not the one the rules give its figures (on a busy
             machine a computing thread also waits for a CPU: working or
             starved).  The table (each case: what it was, the verdict at
             detection and at the end) and the accuracy (the verdicts that
             are what the hang was made of) go to BUILD/causes/causes.md
             and causes.json; `make compare` puts them into
             docs/comparison.md.
"""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hwtest  # noqa: E402
from hwtest import check  # noqa: E402
from test_time import (Scenario, SlowServer, cpu_cgroup_dir, quota_group, remove_group,  # noqa: E402
                       time_of)

class Case:
    """A hang made of one known thing: `command` to `program` (with agent
    `options` and program `args`; in a cgroup limited to 20 % when `quota`)
    holds its loop; "{port}" is a slow TCP server's.  It is `cause` (and
    `blocked_on`)."""

    def __init__(self, name, program, command, cause, blocked_on=None, options=(), args=(), quota=False):
        self.name, self.program, self.command, self.cause, self.blocked_on = name, program, command, cause, blocked_on
        self.options, self.args, self.quota = list(options), list(args), quota


CORPUS = [
    Case("computing", "time-scenarios", "work 2500", "working"),
    Case("computing in a 20 % quota", "time-scenarios", "work 600", "throttled", quota=True),
    Case("a sleep", "time-scenarios", "nap 3000", "blocked", "sleep"),
    Case("select on no descriptor", "time-scenarios", "tick 3000", "blocked", "sleep"),
    Case("a socket's poll with a timeout", "time-scenarios", "poll 3000", "blocked", "network"),
    Case("a TCP read from a slow server", "time-scenarios", "recv {port}", "blocked", "network"),
    Case("a pipe's read", "time-scenarios", "pipe 3000", "blocked", "io"),
    Case("a unix socket's read", "time-scenarios", "unix 3000", "blocked", "network"),
    Case("a child waited for", "time-scenarios", "child 3000", "blocked", "child"),
    Case("a mutex", "time-scenarios", "mutex 3000", "blocked", "lock"),
    Case("an rwlock", "lock-scenarios", "rwlock 3000", "blocked", "lock"),
    Case("a robust mutex", "lock-scenarios", "robust 3000", "blocked", "lock"),
    Case("a process-shared mutex", "lock-scenarios", "shared 3000", "blocked", "lock"),
    Case("a condition variable", "lock-scenarios", "cond 3000", "blocked", "lock"),
    Case("a semaphore", "lock-scenarios", "sem 3000", "blocked", "lock"),
    Case("a sleep, caught in the spin after it", "time-scenarios", "rush 2200 1500", "blocked", "sleep",
         options=["--threshold", "2500ms"]),
    Case("work then sleep, the loop turning every 5 ms", "time-scenarios", "close 2400 1000", "working",
         args=["--turn-every", "5"]),
]

# The kernel's counters and the report's may differ by what the thread did
# outside the stretch between this test's two readings (reading its
# command, printing) and by the scheduler tick a running thread's runtime
# lags: at most this much, in microseconds.
COUNTER_SLACK_US = 60_000


def schedstat(pid):
    """The main thread's time on a CPU and waiting for one so far, in us."""
    with open(f"/proc/{pid}/task/{pid}/schedstat") as f:
        on_cpu, queue = f.read().split()[:2]
    return int(on_cpu) // 1000, int(queue) // 1000


def verdict_of(t):
    cause = t.get("cause", "unknown")
    return f"{cause} on {t['blocked_on']}" if t.get("blocked_on") else cause


def run_case(case, port, group):
    """One case (in cgroup `group`, or None): its row, and what was wrong
    with it ("" when nothing)."""
    name, command, cause, blocked_on = case.name, case.command, case.cause, case.blocked_on
    prefix = ["/bin/sh", "-c", f'echo $$ > {group}/cgroup.procs && exec "$0" "$@"'] if group else []
    s = Scenario(program=case.program, options=case.options, args=case.args, prefix=prefix)
    try:
        before = schedstat(s.pid)
        s.send(command.format(port=port))
        s.expect("did " + command.split()[0], 90)
        after = schedstat(s.pid)
        hwtest.wait_for(s.finished, f"{name}: the hang's final update", 30)
        report, err = s.finish()
    finally:
        s.close()
    t = time_of(report, err)
    end = t.get("at_end", {})
    problems = []
    # the figures from the stretch's start to its end, within the kernel's own
    measured_cpu, measured_queue = after[0] - before[0], after[1] - before[1]
    if "on_cpu_us" not in end:
        problems.append(f"no figures to the hang's end: {json.dumps(end)}")
    else:
        # a window that starts into the stretch (its first reading came at a later look: on a loaded
        # machine, 0.54 s into a stretch of a loop turning every 5 ms) misses at most that much
        offset = end.get("window_offset_us", 0)
        if not measured_cpu - offset - COUNTER_SLACK_US <= end["on_cpu_us"] <= measured_cpu + COUNTER_SLACK_US:
            problems.append(f"on a CPU {end['on_cpu_us']} us, the kernel counted {measured_cpu} us "
                            f"(the window starting {offset} us into the stretch)")
        if end["runqueue_wait_us"] - end.get("runqueue_pending_us", 0) > measured_queue + COUNTER_SLACK_US:
            problems.append(f"waiting for a CPU {end['runqueue_wait_us']} us, the kernel counted {measured_queue} us")
    expected = f"{cause} on {blocked_on}" if blocked_on else cause
    if blocked_on is not None:
        right = verdict_of(t) == expected and verdict_of(end) == expected
        if not right:
            figures = {k: t.get(k) for k in ("window_from", "window_offset_us", "window_us", "on_cpu_us",
                                             "runqueue_wait_us", "blocked_us", "stopped_us")}
            problems.append(f"verdict {verdict_of(t)}, at the end {verdict_of(end)}, not {expected} "
                            f"(the capture's figures: {figures})")
    elif cause == "throttled":
        right = t.get("cause") == cause
        if not right or t.get("throttled_us", 0) < 0.5 * t["window_us"]:
            problems.append(f"verdict {verdict_of(t)}, throttled {t.get('throttled_us')} us of {t['window_us']}")
    else:
        right = t.get("cause") == cause
        for section, label in ((t, "verdict"), (end, "at the end")):
            if "cause" in section and section["cause"] != hwtest.cause_by_rule(section):
                problems.append(f"{label} {section['cause']}, its figures say {hwtest.cause_by_rule(section)}")
    row = {"case": name, "command": command.split()[0], "expected": expected, "verdict": verdict_of(t),
           "at_end": verdict_of(end), "as_made": right, "window_from": t.get("window_from"),
           "on_cpu_us": end.get("on_cpu_us"), "kernel_on_cpu_us": measured_cpu,
           "runqueue_wait_us": end.get("runqueue_wait_us"), "kernel_runqueue_us": measured_queue}
    return row, "; ".join(problems)


def table(rows, accuracy):
    lines = ["| case | made of | verdict | at the end | on a CPU (report / kernel) |", "|---|---|---|---|---|"]
    for r in rows:
        mark = "" if r["as_made"] else " (≠)"
        lines.append(f"| {r['case']} | {r['expected']} | {r['verdict']}{mark} | {r['at_end']} | "
                     f"{(r['on_cpu_us'] or 0) / 1e6:.2f} s / {r['kernel_on_cpu_us'] / 1e6:.2f} s |")
    lines.append("")
    lines.append(f"Verdict accuracy with two CPU hogs beside: {accuracy['right']} of {accuracy['cases']} "
                 f"({100.0 * accuracy['right'] / accuracy['cases']:.0f} %) are what the hang was made of.")
    return "\n".join(lines) + "\n"


def case_corpus():
    """Every case of CORPUS beside two CPU hogs: figures as the kernel's, verdicts as made."""
    server = None
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    rows, problems, skipped = [], [], []
    root, version = cpu_cgroup_dir() if os.geteuid() == 0 else (None, "making a cgroup needs root")
    try:
        for case in CORPUS:
            if case.quota and root is None:
                skipped.append(f"{case.name}: {version}")
                continue
            group = quota_group(root, version, f"hw-causes-{os.getpid()}") if case.quota else None
            if "{port}" in case.command:
                server = SlowServer(3.0)
            try:
                row, wrong = run_case(case, server.port if server else 0, group)
            finally:
                if group:
                    remove_group(group)
            if server:
                server.close()
                server = None
            rows.append(row)
            if wrong:
                problems.append(f"{case.name}: {wrong}")
    finally:
        for h in hogs:
            h.kill()
            h.wait()
        if server:
            server.close()
    accuracy = {"cases": len(rows), "right": sum(r["as_made"] for r in rows),
                "when": time.strftime("%Y-%m-%d"), "load": "two CPU hogs"}
    out_dir = os.path.join(os.path.dirname(hwtest.BIN), "causes")
    os.makedirs(out_dir, exist_ok=True)
    text = table(rows, accuracy) + "".join(f"\nNot run: {why}.\n" for why in skipped)
    with open(os.path.join(out_dir, "causes.md"), "w") as f:
        f.write(text)
    with open(os.path.join(out_dir, "causes.json"), "w") as f:
        json.dump({"accuracy": accuracy, "rows": rows}, f, indent=1)
    print(text)
    check(not problems, "\n".join(problems))


if __name__ == "__main__":
    hwtest.main({"corpus": case_corpus})
