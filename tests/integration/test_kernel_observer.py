"""The kernel observer: `hangwatch watch -p PID` on running processes, and
`hangwatch run` on programs the preloaded observer cannot see (static,
raw syscall()).  Tried as an operator would, as root.

The cases exit 77 (skipped) only where the kernel observer cannot exist:
not root, or a kernel without BTF.  Where it can, a failure is a failure.
Usage: test_kernel_observer.py BIN_DIR SOURCE_DIR CASE
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import hwtest
from hwtest import check, wait_for

SKIP = 77


def need_kernel_observer():
    if os.geteuid() != 0:
        print("SKIP: the kernel observer needs root (or CAP_BPF and CAP_PERFMON)")
        sys.exit(SKIP)
    if not os.path.exists("/sys/kernel/btf/vmlinux"):
        print("SKIP: this kernel has no BTF")
        sys.exit(SKIP)


class Target:
    """A test loop program (kernel-loop unless `program` says) started on its own, not under hangwatch."""

    def __init__(self, *args, program="kernel-loop", path=None):
        self.proc = subprocess.Popen([path or hwtest.binary(program), *args], stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        check(line.startswith("ready "), f"the target did not start: {line!r}")
        self.pid = self.proc.pid

    def finish(self, timeout=30):
        out, _ = self.proc.communicate(timeout=timeout)
        return out

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def watch(pids, *options, timeout=60, env=None):
    report_dir = tempfile.mkdtemp(prefix="hw-it-")
    os.rmdir(report_dir)
    args = [hwtest.binary("hangwatch"), "watch", "--report-dir", report_dir, *options]
    for pid in pids:
        args += ["-p", str(pid)]
    return report_dir, subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def finish_watch(report_dir, proc, timeout=60):
    out, err = proc.communicate(timeout=timeout)
    return hwtest.Run(proc.returncode, out, err, report_dir, 0)


def status_of(pid):
    """State letter, TracerPid and pending signals of a live process."""
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    return fields["State"][0], int(fields["TracerPid"]), int(fields["SigPnd"], 16), int(fields["ShdPnd"], 16)


def detaching_processes():
    """Processes that detach an ended agent's programs (link_reaper.c, HW_DETACHING_COMM)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() == "hw-detaching":
                    found.append(int(pid))
        except OSError:
            pass
    return found


def check_untouched(pid):
    state, tracer, pending, shared = status_of(pid)
    check(state in "SR", f"pid {pid} is left in state {state}")
    check(tracer == 0, f"pid {pid} is still traced by {tracer}")
    check(pending == 0 and shared == 0, f"pid {pid} has signals pending: {pending:x} {shared:x}")


def hung_symbols(report):
    threads = report["crash"]["threads"]
    hung = threads[report["hangwatch"]["hung_thread"]["report_array_index"]]
    return [f.get("symbol_name", "?") for f in hung["backtrace"]["contents"]]


def check_slept(out, reports=(), seconds=3.0):
    """The target's sleep(SECONDS) took its time while watched: at most 50 ms more than what its
    thread waited for a CPU meanwhile (a busy machine's, not the watcher's: a stop or a probe's
    trap is not counted there) and what hangwatch's own stops of it in that stretch held it, as
    REPORTS' time sections say (a stop over the sleep's end delays its return by what is left of
    the stop; a sleep interrupted earlier goes on to its own end)."""
    m = re.search(r"^slept (\d+\.\d+) (\d+\.\d+)$", out, re.M)
    check(m is not None, f"the target did not say how long it slept: {out!r}")
    took, queued = float(m.group(1)), float(m.group(2))
    stopped = 0.0
    for report in reports:
        section = report["hangwatch"].get("time", {})
        stopped += section.get("at_end", section).get("stopped_us", 0) / 1e6
    check(seconds - 0.01 <= took <= seconds + 0.05 + queued + stopped,
          f"the program's sleep({seconds:g}) took {took:.3f} s while watched ({queued:.3f} s of it waiting for a "
          f"CPU, {stopped:.3f} s held by hangwatch's stops)")


def case_watch_running_program():
    """A loop started on its own, watched a second later, hangs 3 s: one report, its sleep undisturbed."""
    need_kernel_observer()
    target = Target("hang", "2.5")
    try:
        started = time.monotonic()
        wait_for(lambda: time.monotonic() - started >= 1.0, "a second of the program running on its own")
        report_dir, proc = watch([target.pid])
        out = target.finish()
        r = finish_watch(report_dir, proc, timeout=30)
        check(r.returncode == 0, "watch did not exit 0 after the program ended\n" + r.describe())
        check(len(r.reports) == 1, f"{len(r.reports)} reports\n" + r.describe())
        check("render_report_synchronously" in hung_symbols(r.reports[0]), "the culprit is not named\n" + r.describe())
        check("render_report_synchronously" in r.stderr, "the stderr line does not name the culprit\n" + r.stderr)
        observer = r.reports[0]["hangwatch"].get("observer")
        if "kernel observer (fentry)" in r.stderr:  # a kernel with BPF tracing programs (as tests/vm's)
            check(observer == "kernel_fentry" and "pays" not in r.stderr, f"{observer}\n{r.stderr}")
        else:
            check("since fentry cannot be had (" in r.stderr and "every process of this machine pays" in r.stderr
                  and "--attach uprobe" in r.stderr, "the tracepoints' cost to every process is not said\n" + r.stderr)
            check(observer == "kernel_tracepoint", str(r.reports[0]["hangwatch"]))
        check_slept(out, r.reports)
    finally:
        target.kill()


def uprobe_offsets(agent_pid):
    """The uprobes the agent holds (bpftool perf list): [(file, offset)]; and whether it holds anything else."""
    out = subprocess.run(["bpftool", "-j", "perf", "list"], capture_output=True, text=True, timeout=30)
    check(out.returncode == 0, f"bpftool perf list: {out.stderr}")
    import json
    mine = [e for e in json.loads(out.stdout or "[]") if e.get("pid") == agent_pid]
    probes = [(e["filename"], int(e["offset"])) for e in mine if e.get("fd_type") == "uprobe"]
    return probes, [e for e in mine if e.get("fd_type") != "uprobe"]


def code_byte(pid, path, offset):
    """The byte of file `path` at file `offset` as mapped in `pid` now (None if it does not map it there)."""
    real = os.stat(path)
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) < 6 or "x" not in parts[1] or int(parts[4]) != real.st_ino:
                continue
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            file_off = int(parts[2], 16)
            if file_off <= offset < file_off + (hi - lo):
                with open(f"/proc/{pid}/mem", "rb") as mem:
                    mem.seek(lo + offset - file_off)
                    return mem.read(1)[0]
    return None


def case_watch_uprobe():
    """--attach uprobe: probes only in the watched process's wait functions
    (its memory holds the breakpoints, another process running the same
    libc has none), no tracepoint; its 3 s hang is caught with the culprit
    and the report says how it was observed."""
    need_kernel_observer()
    target = Target("hang", "2.5")
    other = Target("idle", "30")
    try:
        report_dir, proc = watch([target.pid], "--attach", "uprobe")
        line = proc.stderr.readline()
        check(f"watching pid {target.pid} through the kernel observer (uprobe)" in line, line)
        probes, others = uprobe_offsets(proc.pid)
        check(probes, "the agent holds no uprobe")
        check(not others, f"the agent holds other perf events: {others}")
        path, offset = probes[0]
        # A path the kernel resolved for the agent: its own view of the file here.
        prefix = f"/proc/{target.pid}/root"
        host_path = path[len(prefix):] if path.startswith(prefix + "/") else path
        check(os.path.isfile(host_path), path)
        with open(host_path, "rb") as f:
            f.seek(offset)
            original = f.read(1)[0]
        check(code_byte(target.pid, host_path, offset) == 0xCC, "no breakpoint in the watched process")
        check(code_byte(other.pid, host_path, offset) == original,
              "the process that is not watched has a breakpoint too")
        out = target.finish()
        r = finish_watch(report_dir, proc, timeout=30)
        check(r.returncode == 0, r.describe())
        check(len(r.reports) == 1, f"{len(r.reports)} reports\n" + r.describe())
        check("render_report_synchronously" in hung_symbols(r.reports[0]), r.describe())
        check(r.reports[0]["hangwatch"].get("observer") == "kernel_uprobe", str(r.reports[0]["hangwatch"].get("observer")))
        check("every process of this machine pays" not in r.stderr, r.stderr)
        check_slept(out, r.reports)
        check(code_byte(other.pid, host_path, offset) == original, "a breakpoint was left in the other process")
    finally:
        target.kill()
        other.kill()
    # A loop waiting through raw system calls: uprobes cannot see it, and it is said.
    raw = Target("raw", "30")
    try:
        def blocked():
            with open(f"/proc/{raw.pid}/syscall") as f:
                return f.read().split()[0] in ("232", "281", "7", "271")
        wait_for(blocked, "the raw loop to wait", 30)
        report_dir, proc = watch([raw.pid], "--attach", "uprobe")
        r = finish_watch(report_dir, proc, timeout=30)
        check(r.returncode == 2 and "outside the wait functions --attach uprobe probes" in r.stderr
              and "--attach tracepoint" in r.stderr, r.describe())
        check_untouched(raw.pid)
    finally:
        raw.kill()


NOBODY = 65534


def nobody_readable_copy(program, parent):
    """A copy of the test program `program` in `parent` (user nobody's): an agent running as nobody reads a
    root process's binary by its path only (/proc/PID/map_files is root's), and the build tree may be in a
    directory only root can enter (a home, a private temporary directory)."""
    path = shutil.copy2(hwtest.binary(program), os.path.join(parent, program))
    os.chmod(path, 0o755)
    return path


def as_nobody(caps, args):
    """`args` run as user nobody holding exactly the capabilities `caps` (setpriv)."""
    spec = ",".join("+" + c for c in caps)
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", f"--inh-caps={spec}",
            f"--ambient-caps={spec}"] + args


def case_watch_least_privilege():
    """Not root: `watch -p --attach uprobe` as a user with only the capabilities it needs catches the
    hang; with one of them dropped it exits 2 naming it."""
    need_kernel_observer()
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        print("SKIP: needs root and setpriv to become another user with capabilities")
        sys.exit(SKIP)
    # This kernel's uprobe events ask for CAP_SYS_ADMIN (docs/security.md).
    needed = ["bpf", "perfmon", "sys_ptrace", "sys_admin"]
    parent = tempfile.mkdtemp(prefix="hw-it-nobody-")
    os.chmod(parent, 0o755)
    os.chown(parent, NOBODY, NOBODY)
    target = Target("hang", "2.5", path=nobody_readable_copy("kernel-loop", parent))
    try:
        for drop, named in ((("bpf", "sys_admin"), "lacks CAP_BPF"), (("sys_ptrace",), "CAP_SYS_PTRACE"),
                            (("sys_admin",), "CAP_SYS_ADMIN")):
            p = subprocess.run(as_nobody([c for c in needed if c not in drop],
                                         [hwtest.binary("hangwatch"), "watch", "--attach", "uprobe", "--report-dir",
                                          os.path.join(parent, "r-" + drop[0]), "-p", str(target.pid)]),
                               capture_output=True, text=True, timeout=60)
            check(p.returncode == 2 and named in p.stderr, f"without {drop}: exit {p.returncode}\n{p.stderr}")
        report_dir = os.path.join(parent, "reports")
        proc = subprocess.Popen(as_nobody(needed, [hwtest.binary("hangwatch"), "watch", "--attach", "uprobe",
                                                   "--report-dir", report_dir, "-p", str(target.pid)]),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        target.finish()
        r = finish_watch(report_dir, proc, timeout=30)
        check(r.returncode == 0 and len(r.reports) == 1, r.describe())
        check("render_report_synchronously" in hung_symbols(r.reports[0]), r.describe())
        check(os.stat(r.report_paths[0]).st_uid == NOBODY, "the report is not the user's")
    finally:
        target.kill()
        shutil.rmtree(parent, ignore_errors=True)


def case_watch_other_user_idle():
    """Not root, another user's idle loop (its /proc syscall file unreadable, mode 0400): watching it
    makes no false hang while it idles in its wait, and its real hang is caught."""
    need_kernel_observer()
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        print("SKIP: needs root and setpriv to become another user with capabilities")
        sys.exit(SKIP)
    needed = ["bpf", "perfmon", "sys_ptrace", "sys_admin"]  # this kernel's uprobe events ask for CAP_SYS_ADMIN
    parent = tempfile.mkdtemp(prefix="hw-it-nobody-")
    os.chmod(parent, 0o755)
    os.chown(parent, NOBODY, NOBODY)
    loop = subprocess.Popen([nobody_readable_copy("time-scenarios", parent)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    proc = None
    try:
        check(loop.stdout.readline().startswith("ready"), "the loop did not start")
        report_dir = os.path.join(parent, "reports")
        proc = subprocess.Popen(as_nobody(needed, [hwtest.binary("hangwatch"), "watch", "--attach", "uprobe",
                                                   "--report-dir", report_dir, "-p", str(loop.pid)]),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        announced = proc.stderr.readline()
        check(f"watching pid {loop.pid}" in announced, f"watch did not start: {announced!r}")
        # Idle in epoll_wait for longer than the threshold: nothing to report.
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline:
            check(not os.path.isdir(report_dir) or os.listdir(report_dir) == [],
                  "an idle loop was reported: " + str(os.listdir(report_dir)))
            time.sleep(0.1)
        for command in ("work 2500", "poll 2500"):
            loop.stdin.write(command + "\n")
            loop.stdin.flush()
            said = [loop.stdout.readline() for _ in range(2)] if command.startswith("poll") else [loop.stdout.readline()]
            check(said[-1].startswith("did " + command), f"the loop did not do {command}: {said}")
        loop.stdin.write("quit\n")
        loop.stdin.flush()
        loop.wait(timeout=30)
        r = finish_watch(report_dir, proc, timeout=30)
        check(r.returncode == 0 and len(r.reports) == 2, r.describe())
        named = [hung_symbols(report) for report in r.reports]
        check(any("compute_invoice" in n for n in named) and any("wait_for_quote" in n for n in named),
              f"not the work and the socket poll: {named}\n" + r.describe())
        check("outside any system call" not in r.stderr, "a sleep whose system call was unreadable was "
              "called one outside any system call:\n" + r.stderr)
    finally:
        loop.kill()
        loop.wait()
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        shutil.rmtree(parent, ignore_errors=True)


WORKER_EXITS = r"""
const { Worker } = require('worker_threads');
function renderAfterTheWorker() { const end = Date.now() + 2600; while (Date.now() < end) {} }
console.log('ready');
setTimeout(() => {
  // A worker with a loop of its own, which ends normally half a second later.
  const w = new Worker('setTimeout(() => process.exit(0), 500); setInterval(() => {}, 50);', { eval: true });
  w.on('exit', () => { console.log('worker exited'); setTimeout(renderAfterTheWorker, 3000); });
}, 1000);
setTimeout(() => {}, 9000);
"""


def case_watch_worker_exit():
    """--threads loops on node: a worker thread whose loop ends normally is not a hang (of it or of the
    idle main thread); the main thread's own hang after it is reported, once."""
    need_kernel_observer()
    node = shutil.which("node")
    if node is None:
        print("SKIP: no node")
        sys.exit(SKIP)
    for attach in ("tracepoint", "uprobe"):
        target = subprocess.Popen([node, "-e", WORKER_EXITS], stdout=subprocess.PIPE, text=True)
        try:
            check(target.stdout.readline().strip() == "ready", "node did not start")
            report_dir, proc = watch([target.pid], "--attach", attach, "--threads", "loops")
            announced = proc.stderr.readline()
            check(f"watching pid {target.pid}" in announced, f"watch did not start: {announced!r}")
            check(target.stdout.readline().strip() == "worker exited", "the worker did not exit")
            target.wait(timeout=30)
            r = finish_watch(report_dir, proc)
            check(r.returncode == 0 and len(r.reports) == 1, f"--attach {attach}\n" + r.describe())
            check(any(name.endswith("renderAfterTheWorker") for name in hung_symbols(r.reports[0])), r.describe())
            check(r.reports[0]["hangwatch"]["hung_thread"]["thread_identifier"] == target.pid,
                  "the hang is not the main thread's\n" + r.describe())
        finally:
            target.kill()
            target.wait()


# A loop that starts its child when told on stdin (the agent watches it by then: --follow takes the
# processes forked from then on).
SPAWNER = r"""
import selectors, subprocess, sys
print("ready", flush=True)
sel = selectors.DefaultSelector()
sel.register(sys.stdin, selectors.EVENT_READ)
child = None
while child is None or child.poll() is None:
    if sel.select(0.1) and child is None:
        sys.stdin.readline()
        sel.unregister(sys.stdin)
        child = subprocess.Popen([sys.argv[1], "hang", "1"], stdout=subprocess.DEVNULL)
"""


def case_watch_follow_exec():
    """--follow: a child that executes another program mapping the same C library (Python's
    subprocess: fork, exec) is watched like its parent, its hang reported, under either attachment
    and again and again (the child may be caught in the middle of its exec)."""
    need_kernel_observer()
    for attach in ("uprobe", "uprobe", "uprobe", "tracepoint"):
        # A uprobe's attach waits for each detach under way (the kernel's one lock of trace events, held
        # through a grace period: link_reaper.h): with an earlier run's twenty being detached, the child's
        # twenty attaches once outlasted its hang.  Other agents' detaching is not the agent's to avoid.
        wait_for(lambda: not detaching_processes(), "earlier agents' programs to be detached", 60)
        target = subprocess.Popen(["/usr/bin/python3", "-c", SPAWNER, hwtest.binary("kernel-loop")],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            check(target.stdout.readline().strip() == "ready", "the spawner did not start")
            report_dir, proc = watch([target.pid], "--attach", attach, "--follow")
            announced = proc.stderr.readline()
            check(f"watching pid {target.pid}" in announced, f"watch did not start: {announced!r}")
            # The child only now: an attach that waited for the kernel (an earlier run's programs still
            # being detached) once came after a child forked on a timer, which --follow rightly left alone.
            target.stdin.write("go\n")
            target.stdin.flush()
            target.wait(timeout=30)
            r = finish_watch(report_dir, proc)
            check(r.returncode == 0 and len(r.reports) == 1 and r.reports[0]["report"]["pid"] != target.pid,
                  f"--attach {attach}: the executed child's hang was not reported once\n" + r.describe())
            check("render_report_synchronously" in hung_symbols(r.reports[0]), r.describe())
            check("without going through glibc" not in r.stderr and "is not watched" not in r.stderr, r.stderr)
        finally:
            target.kill()
            target.wait()


CHILDREN_SPAWNER = r"""
import subprocess, sys
print("ready", flush=True)
sys.stdin.readline()
children = [subprocess.Popen([sys.argv[1], "idle", "0.5"], stdout=subprocess.DEVNULL) for _ in range(int(sys.argv[2]))]
for child in children:
    child.wait()
"""


def case_watch_follow_many_end():
    """watch --follow --attach uprobe of a process whose twelve children have all ended ends when it does: the
    children's probes (some 240, each detach a grace period, about 100 ms here) are detached by a process of
    their own after the agent has exited, not by the agent's exit."""
    need_kernel_observer()
    wait_for(lambda: not detaching_processes(), "earlier agents' programs to be detached", 60)
    target = subprocess.Popen(["/usr/bin/python3", "-c", CHILDREN_SPAWNER, hwtest.binary("kernel-loop"), "12"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        check(target.stdout.readline().strip() == "ready", "the spawner did not start")
        report_dir, proc = watch([target.pid], "--attach", "uprobe", "--follow")
        announced = proc.stderr.readline()
        check(f"watching pid {target.pid}" in announced, f"watch did not start: {announced!r}")
        target.stdin.write("go\n")
        target.stdin.flush()
        target.wait(timeout=60)
        ended = time.monotonic()
        r = finish_watch(report_dir, proc)
        took = time.monotonic() - ended
        check(r.returncode == 0 and r.reports == [] and "is not watched" not in r.stderr, r.describe())
        # Its end: the watch thread's next look, the reaper's detach under way, and in a sanitized build
        # LeakSanitizer's scan (about 2 s here).  That slow exit is what lost the race every time when the
        # detaching process did not wait for the agent: 34 s for these twelve.
        check(took < 10.0, f"watch ended {took:.2f} s after the last watched process\n" + r.describe())
    finally:
        target.kill()
        target.wait()


def case_watch_leaves_no_trace():
    """watch ends (duration, SIGKILL mid-hang): the program is not stopped, not traced, no signal pending; a
    --duration run ends on time."""
    need_kernel_observer()
    target = Target("idle", "60")
    try:
        # An earlier test's programs still being detached (by a process named hw-detaching) would make this
        # run's attach wait for the kernel: timed from when there is none.
        # (LeakSanitizer's scan at exit, up to a second in a sanitized build, is not the command's own time.)
        quiet_leaks = dict(os.environ, ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0")
        for attach in ("tracepoint", "uprobe"):
            wait_for(lambda: not detaching_processes(), "earlier agents' programs to be detached", 60)
            started = time.monotonic()
            report_dir, proc = watch([target.pid], "--duration", "1500ms", "--attach", attach, env=quiet_leaks)
            r = finish_watch(report_dir, proc)
            took = time.monotonic() - started
            check(r.returncode == 0 and r.reports == [], f"--duration run, --attach {attach}\n" + r.describe())
            # The programs' detaching (a grace period each, 1.3 s in all here), and the uprobes' the agent had
            # not detached yet (some twenty, 60-80 ms each), is left to a process of its own: the command ends
            # on time (bench part 14 measures by how much; this bound allows a sanitizer's start and a busy
            # machine).
            check(took < 1.5 + 0.5, f"--duration 1500ms --attach {attach} took {took:.2f} s")
            check_untouched(target.pid)
    finally:
        target.kill()
    # SIGKILL while it samples a hung loop every millisecond
    target = Target("hang", "0.5")
    try:
        report_dir, proc = watch([target.pid], "--early-sampling", "--sample-interval", "1ms", "--threshold", "1s")
        wait_for(lambda: os.path.isdir(report_dir) and any(n.endswith(".json") for n in os.listdir(report_dir)),
                 "the hang's report")
        proc.kill()
        proc.wait()
        shutil.rmtree(report_dir, ignore_errors=True)
        wait_for(lambda: status_of(target.pid)[1] == 0, "the target to be released")
        if status_of(target.pid)[0] != "Z":  # (a late report leaves it little time: it may have finished already)
            check_untouched(target.pid)
        out = target.finish()
        check_slept(out)
    finally:
        target.kill()


def case_watch_idle_and_spin():
    """An idle loop for 8 s and a loop spinning on epoll_wait(..., 0) for 5 s: no report."""
    need_kernel_observer()
    for mode, secs in (("idle", "8"), ("spin", "5")):
        target = Target(mode, secs)
        try:
            report_dir, proc = watch([target.pid])
            target.finish()
            r = finish_watch(report_dir, proc)
            check(r.returncode == 0, f"{mode}\n" + r.describe())
            check(r.reports == [], f"a {mode} loop was reported\n" + r.describe())
        finally:
            target.kill()


def case_watch_loop_threads():
    """--threads loops: a loop thread that is not the main one hangs: reported on that thread."""
    need_kernel_observer()
    target = Target("thread", "1.5")
    try:
        report_dir, proc = watch([target.pid], "--threads", "loops")
        out = target.finish()
        r = finish_watch(report_dir, proc)
        check(r.returncode == 0 and len(r.reports) == 1, f"{len(r.reports)} reports\n" + r.describe())
        hung = r.reports[0]["hangwatch"]["hung_thread"]["thread_identifier"]
        check(hung != target.pid, "the hang was put on the main thread")
        check("render_report_synchronously" in hung_symbols(r.reports[0]), r.describe())
        check_slept(out, r.reports)
    finally:
        target.kill()
    # without --threads loops that thread is not watched
    target = Target("thread", "1.5")
    try:
        report_dir, proc = watch([target.pid])
        target.finish()
        r = finish_watch(report_dir, proc)
        check(r.returncode == 0 and r.reports == [], "a non-main thread was watched by default\n" + r.describe())
    finally:
        target.kill()


def case_watch_follow():
    """--follow: a process the watched one forks is watched from its start; without it, not; under
    either attachment."""
    need_kernel_observer()
    for attach, follow in (("tracepoint", True), ("tracepoint", False), ("uprobe", True), ("uprobe", False)):
        target = Target("fork", "1")
        try:
            report_dir, proc = watch([target.pid], "--attach", attach, *(["--follow"] if follow else []))
            announced = proc.stderr.readline()  # blocks until attached, or '' if watch ended
            check(f"watching pid {target.pid}" in announced, f"watch did not start: {announced!r}")
            os.kill(target.pid, signal.SIGUSR1)  # fork now that the observer is attached
            out = target.finish()
            r = finish_watch(report_dir, proc)
            child = int(re.search(r"^child (\d+)$", out, re.M).group(1))
            check(r.returncode == 0, r.describe())
            if follow:
                check(len(r.reports) == 1 and r.reports[0]["report"]["pid"] == child,
                      f"the child's hang was not reported\n" + r.describe())
                check("render_report_synchronously" in hung_symbols(r.reports[0]), r.describe())
            else:
                check(r.reports == [], "a child was watched without --follow\n" + r.describe())
        finally:
            target.kill()
    # run --observer kernel follows the program's children by default
    for attach in ("tracepoint", "uprobe"):
        r = hwtest.run(["--observer", "kernel", "--attach", attach, "--", hwtest.binary("kernel-loop"), "fork", "1"])
        try:
            child = int(re.search(r"^child (\d+)$", r.stdout, re.M).group(1))
            check(r.returncode == 0 and len(r.reports) == 1 and r.reports[0]["report"]["pid"] == child,
                  f"--attach {attach}\n" + r.describe())
        finally:
            hwtest.cleanup(r)


def case_run_static_program():
    """A statically linked epoll loop under run: its hang is reported with the culprit's name, under
    either attachment (uprobes go in the program's own file before it runs)."""
    need_kernel_observer()
    for attach in ("tracepoint", "uprobe"):
        r = hwtest.run(["--attach", attach, "--", hwtest.binary("kernel-loop-static"), "hang", "1"])
        try:
            check(r.returncode == 0, r.describe())
            check("statically linked" not in r.stderr, "still warned\n" + r.stderr)
            check(len(r.reports) == 1, f"--attach {attach}: {len(r.reports)} reports\n" + r.describe())
            check("render_report_synchronously" in hung_symbols(r.reports[0]), r.describe())
            check(r.reports[0]["hangwatch"].get("observer") == f"kernel_{attach}", str(r.reports[0]["hangwatch"]))
            check_slept(r.stdout, r.reports)
        finally:
            hwtest.cleanup(r)


def case_run_raw_syscall_program():
    """A loop waiting through syscall(SYS_epoll_wait): moved to the kernel observer, its hang reported."""
    need_kernel_observer()
    r = hwtest.run(["--", hwtest.binary("kernel-loop"), "raw", "3"])
    try:
        check(r.returncode == 0, r.describe())
        check("watched through the kernel observer" in r.stderr, r.stderr)
        check(len(r.reports) == 1, f"{len(r.reports)} reports\n" + r.describe())
        check("render_report_synchronously" in hung_symbols(r.reports[0]), r.describe())
    finally:
        hwtest.cleanup(r)
    r = hwtest.run(["--observer", "kernel", "--", hwtest.binary("kernel-loop"), "raw", "1"])
    try:
        check(r.returncode == 0 and len(r.reports) == 1, "--observer kernel\n" + r.describe())
        check("render_report_synchronously" in hung_symbols(r.reports[0]), r.describe())
    finally:
        hwtest.cleanup(r)


def run_noting_times(args, env=None):
    """`hangwatch run ARGS` to its end (as hwtest.run), and when each line of its output came, in
    seconds from the start: [(seconds, line)]."""
    report_dir = tempfile.mkdtemp(prefix="hw-it-")
    os.rmdir(report_dir)
    start = time.monotonic()
    proc = subprocess.Popen([hwtest.binary("hangwatch"), "run", "--report-dir", report_dir] + args,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, **(env or {})))
    lines, out = [], {"stdout": [], "stderr": []}

    def read(stream, name):
        for line in stream:
            lines.append((time.monotonic() - start, line.rstrip("\n")))
            out[name].append(line)
    readers = [threading.Thread(target=read, args=(proc.stdout, "stdout")),
               threading.Thread(target=read, args=(proc.stderr, "stderr"))]
    for t in readers:
        t.start()
    code = proc.wait(timeout=120)
    for t in readers:
        t.join()
    return hwtest.Run(code, "".join(out["stdout"]), "".join(out["stderr"]), report_dir,
                      time.monotonic() - start), lines


def check_uring_hang_under_run(env=None, sleep=4.5):
    """`run -- uring-loop hang 0.8 4.5` (4.5 s asleep, 0.8 s after it starts, its eighth turn): moved
    to the kernel observer, its one hang reported with the culprit, its sleep untouched.  The agent's
    looks at the launch must find two waits: 0.3 s (three turns) was too few for six agents beside
    two CPU hogs, whose other agents' kernel observers being loaded held the CPUs from the looks.
    The observer counts a stretch it finds under way from the move, so the sleep must outlast the
    move by the threshold: 4.5 s leaves the move 3.3 s (with 3 s, a loaded sanitized run's move
    2.5 s in left too little)."""
    r, lines = run_noting_times(["--", hwtest.binary("uring-loop"), "hang", "0.8", str(sleep)], env=env)
    try:
        check(r.returncode == 0, r.describe())
        check("watched through the kernel observer" in r.stderr, r.stderr)
        # when the move was said, after the program's start: the observer counts a stretch it finds
        # under way from the move, so a move later than the sleep's end less the threshold (3.3 s
        # after the start for 4.5 s) leaves too little
        ready = next((t for t, line in lines if line.startswith("ready")), None)
        moved = next((t for t, line in lines if "watched through the kernel observer" in line), None)
        said = f"the move was said {moved - ready:.3f} s after the program's start" if ready and moved else ""
        check(len(r.reports) == 1, f"{len(r.reports)} reports; {said}\n" + r.describe())
        check("rebuild_index_synchronously" in hung_symbols(r.reports[0]), r.describe())
        check_slept(r.stdout, r.reports, seconds=sleep)
    finally:
        hwtest.cleanup(r)


def case_io_uring_program():
    """A loop waiting through io_uring_enter(GETEVENTS): its waits are seen, its hang reported, under run and watch.
    Under run, the hang starts 0.8 s after start: the loop is found within its first turns, not at the threshold."""
    need_kernel_observer()
    check_uring_hang_under_run()
    # Watched from outside: idle turns are waits (no report), the sleep is one hang.
    target = Target("hang", "4", program="uring-loop")
    try:
        report_dir, proc = watch([target.pid])
        out = target.finish()
        r = finish_watch(report_dir, proc)
        check(r.returncode == 0 and len(r.reports) == 1, f"{len(r.reports)} reports\n" + r.describe())
        check("rebuild_index_synchronously" in hung_symbols(r.reports[0]), r.describe())
        check(int(re.search(r"done after (\d+) turns", out).group(1)) >= 30, out)
    finally:
        target.kill()


def case_moved_while_attaching():
    """The loop leaves the wait it was found in before its entry is in the kernel observer's map
    (HANGWATCH_KOBS_LOOK_DELAY_MS, a knob for this test, holds the two 900 ms apart, past the hang's
    start 0.8 s in; the window is
    otherwise two system calls wide, met once under a loaded test run): the wait's end went
    unseen, so the thread is looked at again and, found elsewhere, set from its registers in a
    stop; the hang that follows is reported (without that: none).  The knob's 900 ms come on top
    of the move's own time, so the sleep is 6 s: 4.5 s left a move said 3.8 s in, in a loaded
    sanitized run, too little."""
    need_kernel_observer()
    check_uring_hang_under_run(env={"HANGWATCH_KOBS_LOOK_DELAY_MS": "900"}, sleep=6.0)


def container_root(program):
    """A root file system holding `program` as /app/prog and the libraries
    it links (a path the agent's own file system does not have)."""
    root = tempfile.mkdtemp(prefix="hw-it-container-")
    os.makedirs(os.path.join(root, "app"))
    os.makedirs(os.path.join(root, "proc"))
    shutil.copy(program, os.path.join(root, "app", "prog"))
    libs = subprocess.run(["ldd", program], capture_output=True, text=True, check=True).stdout
    for lib in re.findall(r"(/\S+) \(0x", libs):
        dest = os.path.join(root, lib.lstrip("/"))
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copy(lib, dest)
    return root


def case_watch_container():
    """A loop in its own pid and mount namespace, on its own root (as a
    container runs it), watched from outside: its 3 s hang is reported with
    the culprit named from its own file, and both pids."""
    need_kernel_observer()
    if shutil.which("unshare") is None:
        print("SKIP: no unshare (util-linux)")
        sys.exit(SKIP)
    root = container_root(hwtest.binary("loop-scenarios"))
    outer = subprocess.Popen(["unshare", "--pid", "--mount", "--fork", f"--mount-proc={root}/proc",
                              "chroot", root, "/app/prog", "abca", "3"], stdout=subprocess.PIPE, text=True)
    try:
        def inner():
            for kid in hwtest.children(outer.pid):
                try:
                    if os.readlink(f"/proc/{kid}/exe").endswith("/app/prog"):
                        return kid
                except OSError:
                    pass
            return None
        hwtest.wait_for(inner, "the program in its namespace", 30)
        pid = inner()
        check(not os.path.exists("/app/prog"), "this machine has an /app/prog of its own: the test proves nothing")
        stack = subprocess.run([hwtest.binary("hangwatch"), "stack", str(pid)], capture_output=True, text=True,
                               timeout=60)
        check(stack.returncode == 0 and "main" in stack.stdout, stack.stdout + stack.stderr)
        report_dir, proc = watch([pid])
        outer.communicate(timeout=60)
        r = finish_watch(report_dir, proc, timeout=30)
        check(r.returncode == 0, r.describe())
        check(r.reports, "no report\n" + r.describe())
        first = r.reports[0]
        check(first["report"]["pid"] == pid, f"pid {first['report']['pid']}, not {pid}")
        check(first["report"].get("namespace_pid") == 1, f"namespace_pid {first['report'].get('namespace_pid')}")
        names = hung_symbols(first)
        check(any(n.startswith("block_in_") for n in names) and "on_abca_timer" in names,
              f"the culprit is not named: {names}\n" + r.describe())
        shown = subprocess.run([hwtest.binary("hangwatch"), "show", r.report_paths[0]], capture_output=True, text=True)
        check(f"(pid {pid}, 1 in its pid namespace)" in shown.stdout, shown.stdout)
        check(f"hang in prog (pid {pid}, 1 in its pid namespace)" in r.stderr, "the live line: " + r.stderr)
    finally:
        if outer.poll() is None:
            outer.kill()
            outer.wait()
        shutil.rmtree(root, ignore_errors=True)


CONTAINER_PYTHON = """
import asyncio, os, time

def crunch_numbers():
    started = time.monotonic()
    while time.monotonic() - started < 3:
        pass

async def main():
    while not os.path.exists("/tmp/go"):
        await asyncio.sleep(0.05)
    crunch_numbers()

asyncio.run(main())
"""


CONTAINER_NODE = """
const fs = require("fs");
function crunchNumbers() {
    const started = Date.now();
    let x = 0;
    while (Date.now() - started < 3000) x++;
    return x;
}
const timer = setInterval(() => {
    if (fs.existsSync("/tmp/go")) {
        clearInterval(timer);
        crunchNumbers();
    }
}, 50);
"""


def watch_in_container(interpreter, script_name, script, attach, expected):
    """`interpreter` (a path of this machine's /usr) runs `script` in its own
    pid and mount namespace, where /usr is bound at /opt/usr (a path this
    machine does not have) in a mount namespace of its own; `watch -p
    --attach ATTACH` from outside: the hang's frames include `expected`."""
    real = os.path.realpath(interpreter)
    check(real.startswith("/usr/"), real)
    root = tempfile.mkdtemp(prefix="hw-it-container-")
    for d in ("opt/usr", "lib", "lib64", "proc", "tmp"):
        os.makedirs(os.path.join(root, d))
    with open(os.path.join(root, "tmp", script_name), "w") as f:
        f.write(script)
    inside = "/opt" + real
    script_cmd = (f"mount --bind /usr {root}/opt/usr && mount --bind /lib {root}/lib && "
                  f"mount --bind /lib64 {root}/lib64 && exec chroot {root} {inside} /tmp/{script_name}")
    outer = subprocess.Popen(["unshare", "--pid", "--mount", "--fork", f"--mount-proc={root}/proc", "sh", "-c",
                              script_cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc = None
    try:
        def inner():
            for kid in hwtest.children(outer.pid):
                try:
                    if os.readlink(f"/proc/{kid}/exe").endswith(inside):
                        return kid
                except OSError:
                    pass
            return None
        hwtest.wait_for(inner, f"{script_name} in its namespace", 30)
        pid = inner()
        check(not os.path.exists(inside), f"this machine has {inside} of its own: the test proves nothing")
        report_dir, proc = watch([pid], "--attach", attach)
        line = proc.stderr.readline()
        while line and "watching pid" not in line:
            line = proc.stderr.readline()
        check("watching pid" in line, line)
        open(os.path.join(root, "tmp", "go"), "w").close()
        out, err = outer.communicate(timeout=60)
        check(outer.returncode == 0, f"the container's program failed: {err}")
        r = finish_watch(report_dir, proc, timeout=30)
        check(r.returncode == 0, r.describe())
        check(r.reports, "no report\n" + r.describe())
        check(r.reports[0]["report"].get("namespace_pid") == 1, str(r.reports[0]["report"]))
        names = hung_symbols(r.reports[0])
        check(all(n in names for n in expected), f"no {expected} in {names}\n" + r.describe())
    finally:
        for p in (outer, proc):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(root, ignore_errors=True)


def case_watch_container_python():
    """Python in a container, its interpreter at a path this machine does not have: its hang's Python
    frames are read, though the thread ids Python keeps are the container's."""
    need_kernel_observer()
    if shutil.which("unshare") is None:
        print("SKIP: no unshare (util-linux)")
        sys.exit(SKIP)
    watch_in_container("/usr/bin/python3", "crunch.py", CONTAINER_PYTHON, "tracepoint", ["crunch_numbers", "main"])


def case_watch_container_node():
    """node in a container, watched through uprobes: the uprobes go in the C library by the path the
    kernel resolves for the agent, and V8's metadata is read from a node this machine has at no path."""
    need_kernel_observer()
    if shutil.which("unshare") is None or shutil.which("node") is None:
        print("SKIP: no unshare (util-linux) or no node")
        sys.exit(SKIP)
    watch_in_container(shutil.which("node"), "crunch.js", CONTAINER_NODE, "uprobe", ["crunchNumbers"])


def case_watch_errors():
    """Bad input and missing rights: exit 2 and one sentence."""
    hw = hwtest.binary("hangwatch")

    def run(args, user=None):
        cmd = [hw, *args]
        if user is not None:
            cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", "--inh-caps=-all"] + cmd
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30)

    for args, needle in ((["watch"], "needs processes"), (["watch", "-p", "abc"], "invalid -p"),
                         (["watch", "-p", "0"], "invalid -p"), (["watch", "-p", "1", "--duration", "x"], "--duration"),
                         (["watch", "-p", "1", "--", "ls"], "takes no program"),
                         (["watch", "-p", "1", "--no-follow"], "belongs to hangwatch run"),
                         (["run", "--follow", "--", "true"], "--follow belongs to hangwatch watch"),
                         (["run", "--observer", "magic", "--", "true"], "--observer"),
                         (["watch", "-p", "1", "--attach", "kprobe"], "invalid --attach 'kprobe' (auto, fentry, tracepoint or uprobe)"),
                         (["watch", "--comm", "nginx"], "add --all"),
                         (["watch", "--all", "--attach", "uprobe"], "--all cannot use --attach uprobe"),
                         (["watch", "--all", "--exclude", "pid=3"], "invalid --exclude 'pid=3'"),
                         (["watch", "--all", "--comm", "a-name-too-long-for-comm"], "invalid --comm"),
                         (["watch", "--all", "--cgroup", "kubepods"], "a path pattern starting with '/'"),
                         (["watch", "--all", "--user", "no-such-user-here"], "no such user"),
                         (["run", "--all", "--", "true"], "belong to hangwatch watch")):
        p = run(args)
        check(p.returncode == 2 and needle in p.stderr, f"{args}: exit {p.returncode}\n{p.stderr}")
    if os.geteuid() == 0:
        pid = 4194000
        while os.path.exists(f"/proc/{pid}"):
            pid -= 1
        p = run(["watch", "-p", str(pid), "--report-dir", tempfile.mkdtemp(prefix="hw-it-") + "/r"])
        check(p.returncode == 2 and "no such process" in p.stderr, p.stderr)
        # --attach fentry is had (tests/vm runs it on a kernel that has it),
        # or refused with the reason: never a silent fallback.
        p = run(["watch", "-p", str(os.getpid()), "--attach", "fentry", "--duration", "200ms",
                 "--report-dir", tempfile.mkdtemp(prefix="hw-it-") + "/r"])
        check((p.returncode == 0 and "kernel observer (fentry)" in p.stderr) or
              (p.returncode == 2 and "(--attach fentry): this kernel" in p.stderr), f"exit {p.returncode}: {p.stderr}")
        with tempfile.TemporaryDirectory() as d:
            os.chown(d, 65534, 65534)  # the unprivileged user's own directory for its reports
            p = run(["watch", "-p", "1", "--report-dir", os.path.join(d, "r")], user=65534)
            lines = p.stderr.strip().splitlines()
            check(p.returncode == 2, f"exit {p.returncode}\n{p.stderr}")
            check(len(lines) == 1 and "CAP_BPF" in lines[0] and "sudo" in lines[0], p.stderr)


if __name__ == "__main__":
    hwtest.main({
        "watch_running_program": case_watch_running_program,
        "watch_leaves_no_trace": case_watch_leaves_no_trace,
        "watch_idle_and_spin": case_watch_idle_and_spin,
        "watch_loop_threads": case_watch_loop_threads,
        "watch_follow": case_watch_follow,
        "run_static_program": case_run_static_program,
        "run_raw_syscall_program": case_run_raw_syscall_program,
        "io_uring_program": case_io_uring_program,
        "moved_while_attaching": case_moved_while_attaching,
        "watch_errors": case_watch_errors,
        "watch_container": case_watch_container,
        "watch_uprobe": case_watch_uprobe,
        "watch_least_privilege": case_watch_least_privilege,
        "watch_other_user_idle": case_watch_other_user_idle,
        "watch_worker_exit": case_watch_worker_exit,
        "watch_follow_exec": case_watch_follow_exec,
        "watch_follow_many_end": case_watch_follow_many_end,
        "watch_container_python": case_watch_container_python,
        "watch_container_node": case_watch_container_node,
    })
