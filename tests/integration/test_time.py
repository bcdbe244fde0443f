"""test_time - where a hang's time went (hangwatch.time, decisions.md §44).

Each case runs tests/programs/time_scenarios.c under `hangwatch run`, has
it hang one way (computing, throttled by its cgroup's CPU limit, starved of
the CPU by spinners of higher priority, waiting for a TCP server, reading a
pipe, waiting for a mutex) and checks the report's `time` section, its
cause, and the stderr line's words.  The servers and spinners are started
here and stopped at the end; cgroups are made and removed here.
"""
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import hwtest
from hwtest import SKIP, check, fail


class Scenario:
    """`hangwatch run [options] -- [prefix...] time-scenarios [args...]`, driven through its stdin;
    with watch=True, time-scenarios started alone and `hangwatch watch [options] -p PID` on it."""

    def __init__(self, prefix=(), options=(), args=(), watch=False, program="time-scenarios"):
        self.report_dir = tempfile.mkdtemp(prefix="hw-time-")
        os.rmdir(self.report_dir)
        self.stderr_file = tempfile.TemporaryFile("w+")
        program = [*prefix, hwtest.binary(program), *args]
        agent = [hwtest.binary("hangwatch"), "run" if not watch else "watch", "--report-dir", self.report_dir,
                 *options]
        self.agent = None
        self.proc = subprocess.Popen(program if watch else agent + ["--"] + program, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=None if watch else self.stderr_file, text=True)
        self.pending = b""  # its output read but not yet taken, by lines (a command prints several)
        self.lines = []  # every line it said
        self.pid = int(self.expect("ready", 30).split()[1])
        if watch:
            self.agent = subprocess.Popen(agent + ["-p", str(self.pid)], stderr=self.stderr_file, text=True)
            hwtest.wait_for(lambda: f"watching pid {self.pid}" in self.stderr(), "watch to start", 30)

    def expect(self, word, timeout):
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while time.monotonic() < deadline:
            while b"\n" in self.pending:
                line, self.pending = self.pending.split(b"\n", 1)
                text = line.decode(errors="replace")
                self.lines.append(text)
                if text.startswith(word):
                    return text
            ready, _, _ = select.select([fd], [], [], 0.2)
            if ready:
                chunk = os.read(fd, 4096)
                if not chunk:
                    fail(f"the program ended before saying '{word}'\n{self.stderr()}")
                self.pending += chunk
        fail(f"timed out waiting for the program to say '{word}'\n{self.stderr()}")

    def said(self, prefix):
        """The line it said that starts with `prefix`."""
        for line in self.lines:
            if line.startswith(prefix):
                return line
        fail(f"the program never said '{prefix}': {self.lines}")

    def send(self, command):
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def do(self, command, timeout=60):
        """Run `command`; then wait for its hang's final update (the time to
        its end is read while the process still runs)."""
        self.send(command)
        self.expect("did " + command.split()[0], timeout)
        hwtest.wait_for(self.finished, "the hang's final update", 30)

    def finished(self):
        """Every hang report has its final update (and there is one)."""
        if not os.path.isdir(self.report_dir):
            return False
        names = [n for n in os.listdir(self.report_dir) if n.startswith("hang-") and n.endswith(".json")]
        for name in names:
            try:
                with open(os.path.join(self.report_dir, name)) as f:
                    if "final_duration_us" not in json.load(f)["hangwatch"]:
                        return False
            except (OSError, ValueError, KeyError):
                return False
        return bool(names)

    def stderr(self):
        self.stderr_file.seek(0)
        return self.stderr_file.read()

    def finish(self):
        """Quit; the one hang report (schema-checked), and stderr."""
        self.proc.stdin.write("quit\n")
        self.proc.stdin.flush()
        code = (self.agent or self.proc).wait(30)
        check(code == 0, f"hangwatch exited {code}\n{self.stderr()}")
        names = sorted(n for n in os.listdir(self.report_dir) if n.endswith(".json")) \
            if os.path.isdir(self.report_dir) else []
        reports = [hwtest.load_report(os.path.join(self.report_dir, n)) for n in names]
        hangs = [r for r in reports if r["hangwatch"]["hang_type"] == "hang"]
        check(len(hangs) >= 1, f"{len(hangs)} hang reports\n{self.stderr()}")
        return hangs[0], self.stderr()

    def close(self):
        for p in (self.proc, self.agent):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
        self.stderr_file.close()
        shutil.rmtree(self.report_dir, ignore_errors=True)


def time_of(report, stderr):
    t = report["hangwatch"].get("time")
    check(isinstance(t, dict) and "window_us" in t, f"no time figures: {json.dumps(t)}\n{stderr}")
    return t


def show(report):
    """`hangwatch show` of the report (its time lines are checked too)."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(report, f)
    try:
        p = hwtest.hw("show", f.name)
        check(p.returncode == 0, p.stderr)
        return p.stdout
    finally:
        os.unlink(f.name)


def hang_line(stderr):
    lines = [ln for ln in stderr.splitlines() if ln.startswith("hangwatch: hang in")]
    check(lines, "no hang line on stderr\n" + stderr)
    return lines[0]


def on_cpu_ns(pid):
    """The main thread's time on a CPU so far (schedstat)."""
    with open(f"/proc/{pid}/task/{pid}/schedstat") as f:
        return int(f.read().split()[0])


def case_stopped():
    """SIGSTOP for 3 s early in 4 s of computing: the stretch's clock starts again where a look last
    saw it stopped, and so does the window (window_from "stop"); the capture's own stop is counted apart."""
    s = Scenario()
    try:
        before = on_cpu_ns(s.pid)
        s.send("work 4000")
        hwtest.wait_for(lambda: on_cpu_ns(s.pid) - before >= 200_000_000, "the loop computing", 30)
        os.kill(s.pid, signal.SIGSTOP)
        stopped_at = time.monotonic()
        try:
            time.sleep(3.0)  # the scenario: stopped past the threshold, so a look finds it stopped
        finally:
            os.kill(s.pid, signal.SIGCONT)
        continued_at = time.monotonic()
        s.expect("did work", 60)
        done_at = time.monotonic()
        hwtest.wait_for(s.finished, "the hang's final update", 30)
        report, err = s.finish()
        t = time_of(report, err)
        check(t["window_from"] == "stop" and t["window_offset_us"] == 0, json.dumps(t))
        # The window starts at the last look that saw it stopped: not before the stop, not after the continue.
        check(t["window_us"] <= (time.monotonic() - stopped_at) * 1e6, json.dumps(t))
        runnable_us = t["on_cpu_us"] + t["runqueue_wait_us"]
        check(t["cause"] == hwtest.cause_by_rule(t) and runnable_us >= 0.8 * t["window_us"], json.dumps(t))
        check(0 < t["stopped_us"] < 500_000, f"hangwatch's own stop in the window: {json.dumps(t)}")
        at_end = t.get("at_end", {})
        check(at_end.get("window_from") == "stop" and at_end.get("stopped_us", 0) >= t["stopped_us"], json.dumps(t))
        # the stretch the report measures is the part after the stop (on a busy machine the
        # computing left after it may take longer than its CPU time: held to the program's own clock)
        busy_s = report["hangwatch"]["final_duration_us"] / 1e6
        after_stop_s = done_at - continued_at
        check(busy_s < after_stop_s + 0.5, f"the stop was counted as part of the hang: {busy_s:.3f} s, "
              f"{after_stop_s:.3f} s of work after it")
        check("since its process was stopped" in show(report), show(report))
        check(continued_at - stopped_at >= 3.0, "the stop was shorter than meant")
    finally:
        s.close()


def case_working():
    """2.5 s of computing in compute_invoice(): runnable (on a CPU or waiting for one) >= 80 % of the
    window, and working, or starved where the kernel counted more waiting for a CPU than on one."""
    s = Scenario()
    try:
        s.do("work 2500")
        report, err = s.finish()
        t = time_of(report, err)
        check(t["cause"] == hwtest.cause_by_rule(t), json.dumps(t))
        check(t["on_cpu_us"] + t["runqueue_wait_us"] >= 0.8 * t["window_us"], json.dumps(t))
        check(t["window_from"] in ("stretch_start", "earlier_look") and t["window_us"] >= 1_000_000, json.dumps(t))
        # the capture's own stop is in the window and counted apart from the program's sleeps
        parts = t["blocked_us"] + t["stopped_us"] + t["on_cpu_us"] + t["runqueue_wait_us"]
        check(0 < t["stopped_us"] < 500_000 and abs(parts - t["window_us"]) <= 4, json.dumps(t))  # each in whole us
        check("compute_invoice" in hwtest.symbols(hwtest.frames(report)), "culprit missing")
        check(f"{t['cause']}:" in hang_line(err) and "s on CPU" in hang_line(err), hang_line(err))
        at_end = t.get("at_end", {})
        check(at_end.get("cause") == hwtest.cause_by_rule(at_end) and at_end["window_us"] >= t["window_us"],
              json.dumps(t))
        check(f"cause: {t['cause']}" in show(report), show(report))
    finally:
        s.close()


def case_whole_hang():
    """A loop that turns every 5 ms, hung by 1.2 s of computing then 2 s of sleep: the window starts at
    the busy start (the kernel observer's counters at the wait's return under watch, a look within 50 ms
    of it under run), so the computing at the stretch's start is in it; the verdicts follow the rules from
    the figures, at detection and at the end."""
    for watch in (False, True):
        s = Scenario(args=["--turn-every", "5"], watch=watch)
        try:
            s.do("close 1200 2000")
            report, err = s.finish()
            t = time_of(report, err)
            at_end = t.get("at_end", {})
            said = f"{'watch' if watch else 'run'}: {json.dumps(t)}"
            if watch:
                check(t["window_from"] == "wait_return" and t["window_offset_us"] == 0, said)
            else:
                check(t["window_from"] in ("stretch_start", "earlier_look") and t["window_offset_us"] <= 250_000, said)
            check(not t.get("partial") and not at_end.get("partial"), said)
            check(t["on_cpu_us"] + t["runqueue_wait_us"] >= 1_000_000, said)
            check(t["cause"] == hwtest.cause_by_rule(t) and at_end.get("window_from") == t["window_from"], said)
            check(at_end["blocked_us"] >= 1_500_000 and at_end["cause"] == hwtest.cause_by_rule(at_end), said)
        finally:
            s.close()


def case_slept_then_ran():
    """2.2 s of sleep, then 1.5 s of spinning, caught at a 2.5 s threshold while it spins: blocked on a
    sleep, from the looks at the stretch (slept_in), never 'asleep outside any system call'."""
    s = Scenario(options=["--threshold", "2500ms"])
    try:
        s.do("rush 2200 1500")
        report, err = s.finish()
        t = time_of(report, err)
        line = hang_line(err)
        check(t["cause"] == hwtest.cause_by_rule(t), json.dumps(t))
        if t["cause"] == "blocked":
            slept = t.get("slept_in", {})
            check(t.get("blocked_on") == "sleep" and slept.get("syscall") in ("nanosleep", "clock_nanosleep")
                  and slept["looks"] >= 5, json.dumps(t))
            check("outside any system call" not in line and "looks at the stretch" in line, line)
        at_end = t["at_end"]
        check(at_end["cause"] == hwtest.cause_by_rule(at_end), json.dumps(at_end))
        check(at_end["cause"] != "blocked" or at_end.get("blocked_on") == "sleep", json.dumps(at_end))
        check("outside any system call" not in show(report), show(report))
    finally:
        s.close()


def case_lock_kinds():
    """Each kind of lock a futex wait is on, named (lock-scenarios): an rwlock's writer, a robust mutex's
    owner, a process-shared mutex's owner in another process, and a condition variable and a semaphore
    as what they are, with no holder."""
    s = Scenario(program="lock-scenarios")
    try:
        holders = {}
        for what in ("rwlock", "robust", "shared", "cond", "sem"):
            s.send(f"{what} 2600")
            holders[what] = int(s.expect("child" if what == "shared" else "holder", 30).split()[1])
            s.expect("did " + what, 60)
            hwtest.wait_for(s.finished, "the hang's final update", 30)
        s.finish()
        reports = {}
        for name in os.listdir(s.report_dir):
            r = hwtest.load_report(os.path.join(s.report_dir, name))
            if r["hangwatch"]["hang_type"] == "hang":
                reports[culprit_names(r)] = r
        err = s.stderr()

        def lock_of(function):
            r = reports.get(function)
            check(r is not None, f"no report of {function}: {list(reports)}\n{err}")
            t = r["hangwatch"]["time"]
            check(t.get("blocked_on") == "lock", f"{function}: {json.dumps(t)}")
            return r, t["blocked_in"].get("lock", {})
        r, lock = lock_of("read_catalog")
        check(lock.get("kind") == "rwlock_read" and lock.get("owner") == holders["rwlock"], json.dumps(lock))
        check(r["hangwatch"].get("lock_holder", {}).get("thread_identifier") == holders["rwlock"], "no lock_holder")
        check(re.search(r"waiting for an rwlock \(to read\) held by thread \d+ \(rebuild_index", err), err)
        r, lock = lock_of("settle_account")
        check(lock.get("kind") == "robust_mutex" and lock.get("owner") == holders["robust"], json.dumps(lock))
        check("held by thread" in err and "audit_accounts" in err, err)
        r, lock = lock_of("reserve_seat")
        check(lock.get("kind") == "shared_mutex" and lock.get("owner_process", {}).get("pid") == holders["shared"]
              and lock["owner_process"].get("name") == "lock-scenarios", json.dumps(lock))
        check(f"of pid {holders['shared']} (lock-scenarios)" in err, err)
        check(f"waiting for a process-shared mutex held by thread {holders['shared']} of pid" in show(r), show(r))
        for function, kind, words in (("await_delivery", "condition_variable", "a condition variable"),
                                      ("await_ticket", "semaphore", "a semaphore")):
            r, lock = lock_of(function)
            check(lock.get("kind") == kind and "owner" not in lock and "lock_holder" not in r["hangwatch"],
                  json.dumps(lock))
            check(f"on {words} (it has no holder)" in err, err)
            check(f"waiting for {words} (it has no holder)" in show(r), show(r))
    finally:
        s.close()


def culprit_names(report):
    """The hung thread's culprit function."""
    index = report["hangwatch"]["hung_thread"].get("culprit_frame")
    return hwtest.frames(report)[index].get("symbol_name") if index is not None else None


def cpu_cgroup_dir():
    """The cgroup v1 cpu hierarchy's or the v2 root's directory, and the version, or (None, why)."""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            sep = fields.index("-")
            fstype, options = fields[sep + 1], fields[sep + 3].split(",")
            if fstype == "cgroup" and "cpu" in options:
                return fields[4], 1
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            sep = fields.index("-")
            if fields[sep + 1] == "cgroup2":
                root = fields[4]
                controllers = open(os.path.join(root, "cgroup.controllers")).read().split()
                if "cpu" in controllers:
                    return root, 2
    return None, "no CPU cgroup controller is mounted"


def quota_group(root, version, name):
    """A cgroup under `root` limited to 20 ms per 100 ms."""
    group = os.path.join(root, name)
    os.mkdir(group)
    if version == 1:
        open(os.path.join(group, "cpu.cfs_period_us"), "w").write("100000")
        open(os.path.join(group, "cpu.cfs_quota_us"), "w").write("20000")
    else:
        with open(os.path.join(root, "cgroup.subtree_control"), "w") as f:
            f.write("+cpu")
        open(os.path.join(group, "cpu.max"), "w").write("20000 100000")
    return group


def remove_group(group):
    for _ in range(50):
        try:
            os.rmdir(group)
            return
        except OSError:
            time.sleep(0.1)


def case_throttled():
    """0.6 s of computing in a cgroup limited to 20 %: cause throttled, >= 50 % of the window, the cgroup named."""
    if os.geteuid() != 0:
        print("SKIP: making a cgroup needs root")
        return SKIP
    root, version = cpu_cgroup_dir()
    if root is None:
        print(f"SKIP: {version}")
        return SKIP
    group = quota_group(root, version, f"hw-time-{os.getpid()}")
    s = None
    try:
        # The program joins the group before it becomes the loop; the agent stays out.
        s = Scenario(prefix=["/bin/sh", "-c", f'echo $$ > {group}/cgroup.procs && exec "$0"'])
        s.do("work 600", timeout=90)
        report, err = s.finish()
        t = time_of(report, err)
        check(t["cause"] == "throttled", json.dumps(t))
        check(t["throttled_us"] >= 0.5 * t["window_us"], json.dumps(t))
        cg = t.get("cgroup", {})
        check(cg.get("path") == group and cg.get("limited") and cg.get("quota_us") == 20000
              and cg.get("period_us") == 100000, json.dumps(cg))
        line = hang_line(err)
        check(f"throttled by cgroup {group} (quota 20 ms per 100 ms)" in line, line)
        check("cause: throttled" in show(report), show(report))
    finally:
        if s:
            s.close()
        remove_group(group)


def case_moved_into_quota():
    """Moved into a 20 % quota while it waits, 2 s before its hang: throttled, in the cgroup it is in now."""
    if os.geteuid() != 0:
        print("SKIP: making a cgroup needs root")
        return SKIP
    root, version = cpu_cgroup_dir()
    if root is None:
        print(f"SKIP: {version}")
        return SKIP
    group = quota_group(root, version, f"hw-time-moved-{os.getpid()}")
    s = None
    try:
        s = Scenario()
        # one hang in the cgroup it started in, so that its cgroup is known before the move
        s.do("work 2300", timeout=90)
        with open(os.path.join(group, "cgroup.procs"), "w") as f:
            f.write(str(s.pid))
        time.sleep(2)  # the move is 2 s before the hang, as an operator's would be
        s.do("work 600", timeout=90)
        s.send("quit")
        code = s.proc.wait(60)
        check(code == 0, f"hangwatch run exited {code}\n{s.stderr()}")
        names = sorted(n for n in os.listdir(s.report_dir) if n.startswith("hang-") and n.endswith(".json"))
        hangs = [hwtest.load_report(os.path.join(s.report_dir, n)) for n in names]
        hangs = [r for r in hangs if r["hangwatch"]["hang_type"] == "hang"]
        check(len(hangs) == 2, f"{len(hangs)} hang reports\n{s.stderr()}")
        first, second = (time_of(r, s.stderr()) for r in hangs)
        check(first.get("cgroup", {}).get("path") != group, json.dumps(first))
        cg = second.get("cgroup", {})
        check(cg.get("path") == group and cg.get("limited") and cg.get("quota_us") == 20000, json.dumps(cg))
        # throttled, by the kernel's count, as a 20 % quota does to 600 ms of work; on a busy machine
        # its waits for a CPU outside the quota's pauses can be the larger part: then the verdict is
        # starved, with the throttling second (a throttled thread's pause counts as a wait for a CPU)
        throttled, queued, window = second["throttled_us"], second["runqueue_wait_us"], second["window_us"]
        check(throttled >= 0.25 * window, json.dumps(second))
        if throttled >= 0.5 * window or throttled >= 0.5 * queued:
            check(second["cause"] == "throttled", json.dumps(second))
        else:
            check(second["cause"] == "starved" and second.get("secondary", {}).get("cause") == "throttled",
                  json.dumps(second))
    finally:
        if s:
            s.close()
        remove_group(group)


def case_starved():
    """At nice 19 on one CPU beside two spinners at nice -20 on it: cause starved (and the loop's own clock agrees)."""
    if os.geteuid() != 0:
        print("SKIP: nice -20 needs root")
        return SKIP
    cpu = str(max(os.sched_getaffinity(0)))
    s = Scenario(prefix=["nice", "-n", "19", "taskset", "-c", cpu])
    spinners = []
    try:
        # Started once the loop waits: starved from its start, it would
        # take long to get there.
        spinners = [subprocess.Popen(["nice", "-n", "-20", "taskset", "-c", cpu, "sh", "-c", "while :; do :; done"],
                                     start_new_session=True) for _ in range(2)]
        s.do("spin 3000")
        report, err = s.finish()
        t = time_of(report, err)
        check(t["cause"] == "starved", json.dumps(t))
        check(t["runqueue_wait_us"] >= 0.5 * t["window_us"], json.dumps(t))
        check("starved:" in hang_line(err) and "waiting for a CPU" in hang_line(err), hang_line(err))
        spun = float(s.said("spun on a CPU for").split()[5])
        check(spun < 1.5, f"the loop itself measured {spun:.3f} s on a CPU in its 3 s spin: not starved")
    finally:
        for sp in spinners:
            os.killpg(sp.pid, signal.SIGKILL)  # the shell and anything it started
            sp.wait()
        s.close()


SPIN_ON_ONE_CPU = """
import time
print("spinning", flush=True)
t = time.monotonic()
while time.monotonic() - t < 0.4:
    pass
"""


def runqueue_ns(pid):
    """The main thread's wait for a CPU so far (schedstat)."""
    with open(f"/proc/{pid}/task/{pid}/schedstat") as f:
        return int(f.read().split()[1])


def case_woken_late():
    """Woken from its wait while a real-time spinner holds its one CPU for 0.4 s, the loop thread waits for
    the CPU before it can run and start its stretch; then it sleeps 2.5 s in its callback.  That wait was
    before the stretch: the hang is blocked on its sleep, not starved (the window read in the wait before
    used to count it as the stretch's: decisions.md §44)."""
    if os.geteuid() != 0:
        print("SKIP: a real-time spinner needs root")
        return SKIP
    cpu = str(max(os.sched_getaffinity(0)))
    s = Scenario(prefix=["taskset", "-c", cpu], options=["--threshold", "1s"])
    spinner = None
    try:
        s.send("nap 1")
        s.expect("did nap", 30)
        # The agent looks at a waiting loop every 500 ms here, and keeps a reading of its counters
        # from the first look in the wait: two of them.  That the window starts there is checked below.
        time.sleep(1.2)
        queued = runqueue_ns(s.pid)
        spinner = subprocess.Popen(["chrt", "-f", "1", "taskset", "-c", cpu, "/usr/bin/python3", "-c",
                                    SPIN_ON_ONE_CPU], stdout=subprocess.PIPE, text=True)
        check(spinner.stdout.readline() == "spinning\n", "the spinner did not start")
        s.do("nap 2500")
        waited = (runqueue_ns(s.pid) - queued) / 1e9
        check(waited >= 0.2, f"the loop waited only {waited:.3f} s for its CPU: no wake-up held up")
        report, err = s.finish()
        t = time_of(report, err)
        check(t["window_from"] == "stretch_start", f"the window did not start in the wait: {json.dumps(t)}")
        check(t["cause"] == "blocked" and t["runqueue_wait_us"] < 0.1 * t["window_us"],
              f"the loop waited {waited:.3f} s for a CPU before its stretch: {json.dumps(t)}\n{err}")
        check("blocked on sleep:" in hang_line(err), hang_line(err))
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()
        s.close()


def case_starving_now():
    """Nice 19 beside three nice -10 spinners on its CPU, three hangs: each starved, never 'asleep' while runnable.

    The kernel adds a wait for a CPU to schedstat only once the thread gets
    one: a thread waiting at the window's end shows that wait as nothing.
    """
    if os.geteuid() != 0:
        print("SKIP: nice -10 needs root")
        return SKIP
    cpu = str(max(os.sched_getaffinity(0)))
    s = Scenario(prefix=["nice", "-n", "19", "taskset", "-c", cpu])
    spinners = []
    try:
        spinners = [subprocess.Popen(["nice", "-n", "-10", "taskset", "-c", cpu, "sh", "-c", "while :; do :; done"],
                                     start_new_session=True) for _ in range(3)]
        for _ in range(3):
            s.do("spin 3000", timeout=120)
        s.send("quit")
        code = s.proc.wait(60)
        check(code == 0, f"hangwatch run exited {code}\n{s.stderr()}")
        names = sorted(n for n in os.listdir(s.report_dir) if n.startswith("hang-") and n.endswith(".json"))
        reports = [hwtest.load_report(os.path.join(s.report_dir, n)) for n in names]
        hangs = [r for r in reports if r["hangwatch"]["hang_type"] == "hang"]
        check(len(hangs) == 3, f"{len(hangs)} hang reports of 3 starved spins\n{s.stderr()}")
        for r in hangs:
            t = time_of(r, s.stderr())
            verdicts = [t["cause"]] + ([t["at_end"]["cause"]] if "cause" in t.get("at_end", {}) else [])
            check(all(v == "starved" for v in verdicts), json.dumps(t))
            check(t["runqueue_wait_us"] >= 0.5 * t["window_us"], json.dumps(t))
            hung = [th for th in r["hangwatch"]["collection"]["scene_threads"]["items"] if th["is_hung_thread"]][0]
            # a stack, or exactly why not
            check(hung["status"] == "captured" or "waiting for a CPU" in hung.get("not_stopped_because", ""),
                  json.dumps(hung))
        check("asleep outside any system call" not in s.stderr(), s.stderr())
    finally:
        for sp in spinners:
            os.killpg(sp.pid, signal.SIGKILL)
            sp.wait()
        s.close()


class SlowServer:
    """A TCP server on 127.0.0.1 that answers each "ask" line after `delay` seconds."""

    def __init__(self, delay):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.port = self.sock.getsockname()[1]
        self.delay = delay
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        try:
            conn, _ = self.sock.accept()
        except OSError:
            return
        with conn:
            conn.recv(64)
            time.sleep(self.delay)
            conn.sendall(b"42\n")

    def close(self):
        self.sock.close()


def case_network():
    """recv from a local server that answers after 3 s: blocked on the network, its address and port named."""
    server = SlowServer(3.0)
    s = Scenario()
    try:
        s.do(f"recv {server.port}")
        report, err = s.finish()
        t = time_of(report, err)
        check(t["cause"] == "blocked" and t.get("blocked_on") == "network", json.dumps(t))
        b = t.get("blocked_in", {})
        check(b.get("syscall") in ("recvfrom", "recvmsg", "read") and b.get("fd_kind") == "tcp", json.dumps(b))
        check(f"127.0.0.1:{server.port}" in b.get("fd_is", "") and "ESTABLISHED" in b["fd_is"], json.dumps(b))
        line = hang_line(err)
        check("blocked on network" in line and f"127.0.0.1:{server.port}" in line, line)
        check(f"127.0.0.1:{server.port}" in show(report), show(report))
        # the other end is this test's own server
        peer = b.get("peer", {})
        check(peer.get("pid") == os.getpid() and peer.get("role") == "peer", json.dumps(b))
        check(f"held by pid {os.getpid()}" in line, line)
    finally:
        s.close()
        server.close()


def case_pipe():
    """read of a pipe whose writer waits 3 s: blocked on io, the pipe named."""
    s = Scenario()
    try:
        s.do("pipe 3000")
        report, err = s.finish()
        t = time_of(report, err)
        check(t["cause"] == "blocked" and t.get("blocked_on") == "io", json.dumps(t))
        b = t.get("blocked_in", {})
        check(b.get("syscall") == "read" and b.get("fd_kind") == "pipe" and b.get("fd_is", "").startswith("pipe:["),
              json.dumps(b))
        check("in read on pipe:[" in hang_line(err), hang_line(err))
        writer = int(s.said("writer ").split()[1])
        peer = b.get("peer", {})
        check(peer.get("pid") == writer and peer.get("role") == "writer" and peer.get("name") == "time-scenarios",
              json.dumps(b))
        check(f"written by pid {writer} (time-scenarios)" in hang_line(err), hang_line(err))
    finally:
        s.close()


def case_peers():
    """A unix socket's peer and a waited-for child: each named with its pid and name (the child with its call)."""
    s = Scenario()
    try:
        s.do("unix 3000")
        s.do("child 3000")
        s.send("quit")
        code = s.proc.wait(30)
        check(code == 0, f"hangwatch run exited {code}\n{s.stderr()}")
        names = sorted(n for n in os.listdir(s.report_dir) if n.startswith("hang-") and n.endswith(".json"))
        hangs = [hwtest.load_report(os.path.join(s.report_dir, n)) for n in names]
        hangs = [r for r in hangs if r["hangwatch"]["hang_type"] == "hang"]
        check(len(hangs) == 2, f"{len(hangs)} hang reports\n{s.stderr()}")
        by_kind = {}
        for r in hangs:
            b = time_of(r, s.stderr()).get("blocked_in", {})
            by_kind[b.get("fd_kind") or b.get("syscall")] = (r, b)
        check("unix" in by_kind and "wait4" in by_kind, json.dumps({k: v[1] for k, v in by_kind.items()}))
        ledger = int(s.said("peer ").split()[1])
        r, b = by_kind["unix"]
        check(time_of(r, "")["cause"] == "blocked" and time_of(r, "").get("blocked_on") == "network",
              json.dumps(time_of(r, "")))
        peer = b.get("peer", {})
        check(peer.get("pid") == ledger and peer.get("role") == "peer" and peer.get("name") == "time-scenarios",
              json.dumps(b))
        exporter = int(s.said("child ").split()[1])
        r, b = by_kind["wait4"]
        check(time_of(r, "")["cause"] == "blocked" and time_of(r, "").get("blocked_on") == "child", json.dumps(b))
        peer = b.get("peer", {})
        # its sleep, or that sleep resumed after a stop
        check(peer.get("pid") == exporter and peer.get("role") == "child" and peer.get("state") == "S"
              and peer.get("syscall") in ("nanosleep", "clock_nanosleep", "restart_syscall"), json.dumps(b))
        lines = [ln for ln in s.stderr().splitlines() if ln.startswith("hangwatch: hang in")]
        check(any(f"child pid {exporter} (time-scenarios) in " in ln for ln in lines), s.stderr())
        check(any(f"held by pid {ledger} (time-scenarios)" in ln for ln in lines), s.stderr())
    finally:
        s.close()


def case_restarted_sleep():
    """A relative sleep stopped again and again by early sampling's captures goes on in
    restart_syscall: still blocked on sleep, in nanosleep, restarted, in the report and at its end."""
    s = Scenario(options=["--early-sampling", "--sampler", "ptrace"])
    try:
        s.do("nap 3000")
        report, err = s.finish()
        t = time_of(report, err)
        b = t.get("blocked_in", {})
        check(t["cause"] == "blocked" and t.get("blocked_on") == "sleep", json.dumps(t))
        check(b.get("syscall") in ("nanosleep", "clock_nanosleep") and b.get("syscall") != "restart_syscall",
              json.dumps(b))
        end = t.get("at_end", {})
        check(end.get("cause") == "blocked" and end.get("blocked_on") == "sleep", json.dumps(end))
        check("blocked on sleep" in hang_line(err), hang_line(err))
    finally:
        s.close()


def case_poll_waits():
    """poll on one socket with a timeout (every Python socket with a timeout waits so): blocked on
    the network, the socket named; select on no descriptor (3.8-3.10's time.sleep): a sleep."""
    s = Scenario()
    try:
        s.do("poll 3000")
        report, err = s.finish()
        t = time_of(report, err)
        b = t.get("blocked_in", {})
        check(t["cause"] == "blocked" and t.get("blocked_on") == "network", json.dumps(t))
        check(b.get("syscall") == "poll" and b.get("wait_fds") == 1 and b.get("fd_kind") == "unix", json.dumps(b))
        check("in poll on " in hang_line(err), hang_line(err))
    finally:
        s.close()
    s = Scenario()
    try:
        s.do("tick 3000")
        report, err = s.finish()
        t = time_of(report, err)
        b = t.get("blocked_in", {})
        check(t["cause"] == "blocked" and t.get("blocked_on") == "sleep", json.dumps(t))
        check(b.get("syscall") in ("select", "pselect6") and b.get("wait_fds") == 0, json.dumps(b))
        check("on no descriptor" in hang_line(err), hang_line(err))
    finally:
        s.close()


def thread_named(report, tid):
    for t in report["crash"]["threads"]:
        if t.get("thread_identifier") == tid:
            return t
    fail(f"thread {tid} is not in the report")


def case_mutex():
    """A mutex held 3 s by a thread in flush_cache(): blocked on a lock, lock_holder that thread, its stack in
    the scene, the grouping key its culprit's, the stderr line naming flush_cache."""
    s = Scenario()
    try:
        s.do("mutex 3000")
        report, err = s.finish()
        t = time_of(report, err)
        check(t["cause"] == "blocked" and t.get("blocked_on") == "lock", json.dumps(t))
        b = t.get("blocked_in", {})
        check(b.get("syscall") == "futex" and b.get("lock", {}).get("owner", 0) > 0, json.dumps(b))
        holder = report["hangwatch"].get("lock_holder", {})
        check(holder.get("thread_identifier") == b["lock"]["owner"] and holder.get("name") == "cache",
              json.dumps(holder))
        stack = hwtest.symbols(hwtest.frames(report, holder["report_array_index"]))
        check("flush_cache" in stack, f"the holder's stack: {stack}")
        culprit = hwtest.frames(report, holder["report_array_index"])[holder["culprit_frame"]]
        check(culprit.get("symbol_name") == "flush_cache", json.dumps(culprit))
        line = hang_line(err)
        check(f"waiting for a mutex held by thread {holder['thread_identifier']} (flush_cache at time_scenarios.c:"
              in line, line)
        check("deadlock" not in report["hangwatch"], "a deadlock where there is none")
    finally:
        s.close()


def case_deadlock():
    """Two threads, each holding the mutex the other waits for: reported as a deadlock naming both."""
    s = Scenario()
    try:
        s.proc.stdin.write("deadlock\n")
        s.proc.stdin.flush()
        s.expect("locking", 30)
        hwtest.wait_for(lambda: os.path.isdir(s.report_dir) and any(
            n.startswith("hang-") and n.endswith(".json") for n in os.listdir(s.report_dir)), "the hang's report", 30)
        name = next(n for n in sorted(os.listdir(s.report_dir)) if n.startswith("hang-") and n.endswith(".json"))
        report = hwtest.load_report(os.path.join(s.report_dir, name))
        loop = report["hangwatch"]["hung_thread"]["thread_identifier"]
        holder = report["hangwatch"].get("lock_holder", {})
        dead = report["hangwatch"].get("deadlock", {})
        check(holder.get("name") == "journal", json.dumps(holder))
        check(dead.get("threads") == [loop, holder["thread_identifier"]] and dead.get("back_to") == loop,
              json.dumps(dead))
        stack = hwtest.symbols(hwtest.frames(report, holder["report_array_index"]))
        check("post_to_ledger" in stack, f"the holder's stack: {stack}")
        # The report's line is written right after its file is renamed into place: waited for, not assumed.
        hwtest.wait_for(lambda: "hangwatch: hang in" in s.stderr(), "the report's line on stderr", 30)
        line = hang_line(s.stderr())
        check(f"deadlock: threads {loop} -> {holder['thread_identifier']} -> {loop}" in line, line)
    finally:
        # It never returns: killed, and hangwatch run ends with it.
        try:
            os.kill(hwtest.program_of(s.proc.pid), signal.SIGKILL)
            s.proc.wait(30)
        except (AssertionError, ProcessLookupError):
            pass
        s.close()


def case_tools():
    """stats counts a group's hangs by cause (table and JSON), html shows the verdict and its figures."""
    s = Scenario()
    try:
        s.do("pipe 2500")
        s.do("pipe 2500")
        report, err = s.finish()
        check(report["hangwatch"]["time"].get("blocked_on") == "io", json.dumps(report["hangwatch"]["time"]))
        p = hwtest.hw("stats", s.report_dir)
        check(p.returncode == 0 and "    cause: blocked on io (2)" in p.stdout, p.stdout + p.stderr)
        p = hwtest.hw("stats", "--json", s.report_dir)
        groups = json.loads(p.stdout)["groups"]
        check(len(groups) == 1 and groups[0]["causes"] == {"blocked on io": 2} and groups[0]["partial_causes"] == 0,
              p.stdout)
        # A verdict over part of its hang is counted apart (a report's own word, time.partial).
        names = sorted(n for n in os.listdir(s.report_dir) if n.endswith(".json"))
        path = os.path.join(s.report_dir, names[0])
        with open(path) as f:
            first = json.load(f)
        first["hangwatch"]["time"]["partial"] = True
        hwtest.validate(first, path)
        with open(path, "w") as f:
            json.dump(first, f)
        p = hwtest.hw("stats", s.report_dir)
        check("    cause: blocked on io (2); 1 of them over part of the hang" in p.stdout, p.stdout + p.stderr)
        p = hwtest.hw("stats", "--json", s.report_dir)
        check(json.loads(p.stdout)["groups"][0]["partial_causes"] == 1, p.stdout)
        page = os.path.join(s.report_dir, "page.html")
        p = hwtest.hw("html", s.report_dir, "-o", page)
        check(p.returncode == 0, p.stderr)
        with open(page) as f:
            text = f.read()
        check('"cause":"blocked on io"' in text and '"on_cpu_us":' in text and "Where its time went" in text,
              "the page does not carry the verdict and its figures")
    finally:
        s.close()


CASES = {
    "working": case_working,
    "whole_hang": case_whole_hang,
    "slept_then_ran": case_slept_then_ran,
    "lock_kinds": case_lock_kinds,
    "stopped": case_stopped,
    "throttled": case_throttled,
    "starved": case_starved,
    "starving_now": case_starving_now,
    "woken_late": case_woken_late,
    "moved_into_quota": case_moved_into_quota,
    "peers": case_peers,
    "network": case_network,
    "pipe": case_pipe,
    "restarted_sleep": case_restarted_sleep,
    "poll_waits": case_poll_waits,
    "mutex": case_mutex,
    "deadlock": case_deadlock,
    "tools": case_tools,
}

if __name__ == "__main__":
    hwtest.main(CASES)
