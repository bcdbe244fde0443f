"""test_stack - `hangwatch stack PID [--json FILE]`: the stack of every thread
of a running process that hangwatch did not start, taken on demand.

Each case starts its own target (tests/programs/stack_target.c, or Debian's
python3 on tests/programs/stack_sleeper.py), waits until each thread really
sits in its system call (/proc/PID/task/TID/syscall), runs `hangwatch stack`
on it and checks what it printed; the targets measure their own sleeps, so
a capture that disturbed them would show.  no_permission needs root and
exits 77 (skipped) otherwise.  Usage: test_stack.py BIN_DIR SOURCE_DIR CASE
"""
import os
import re
import select
import shutil
import stat
import subprocess
import sys
import tempfile
import time

import hwtest
from hwtest import check

# x86_64 system call numbers the targets block in.
SYS_READ, SYS_SELECT, SYS_NANOSLEEP, SYS_FUTEX, SYS_CLOCK_NANOSLEEP, SYS_PSELECT6 = 0, 23, 35, 202, 230, 270
SLEEPS = {SYS_NANOSLEEP, SYS_CLOCK_NANOSLEEP}
TRY_LINE = "Try 'hangwatch --help'."


def describe(p):
    return f"exit {p.returncode}\n--- stdout ---\n{p.stdout}\n--- stderr ---\n{p.stderr}"


def program(name):
    return os.path.join(hwtest.SOURCE_DIR, "tests", "programs", name)


class Target:
    """A program started by the test (not by hangwatch), read line by line
    from its stdout with deadlines."""

    def __init__(self, argv, **kwargs):
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs)
        self.pid = self.proc.pid
        self.buffer = b""

    def line(self, what, timeout=20):
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            check(left > 0, f"timed out waiting for {what} from pid {self.pid}")
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 4096)
                if not chunk:
                    hwtest.fail(f"pid {self.pid} ended its output before {what} (exit {self.proc.wait()}): "
                                f"{self.proc.stderr.read().decode(errors='replace')}")
                self.buffer += chunk
        text, self.buffer = self.buffer.split(b"\n", 1)
        return text.decode()

    def finish(self, timeout=20):
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            hwtest.fail(f"pid {self.pid} did not end in {timeout} s")

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.proc.stdout.close()
        self.proc.stderr.close()


def syscall_of(pid, tid):
    """The system call a thread is blocked in, or None (running, gone)."""
    try:
        with open(f"/proc/{pid}/task/{tid}/syscall") as f:
            first = f.read().split()[0]
    except (OSError, IndexError):
        return None
    return int(first) if first.lstrip("-").isdigit() else None


def wait_in_syscall(pid, tid, numbers, what):
    hwtest.wait_for(lambda: syscall_of(pid, tid) in numbers, f"{what} (tid {tid}) to block in {sorted(numbers)}",
                    timeout=20)


def stacks(stdout):
    """What `stack` printed, by thread: tid -> (heading, [frame lines])."""
    out = {}
    current = None
    for line in stdout.splitlines():
        m = re.match(r"^(main thread|thread) (\d+) \((.*)\), (?:\d+ frames:|not captured: .*)$", line)
        if m:
            current = int(m.group(2))
            out[current] = (line, [])
        elif current is not None and line.startswith("  #"):
            out[current][1].append(line)
        elif not line.startswith("  "):
            current = None
    return out


def frame_index(frame_lines, pattern):
    """Index of the first frame line matching `pattern`, or -1."""
    for i, line in enumerate(frame_lines):
        if re.search(pattern, line):
            return i
    return -1


def slept_seconds(target):
    line = target.line("its 'slept' line", timeout=20)
    m = re.match(r"^slept (\d+\.\d+)$", line)
    check(m, f"expected 'slept SECONDS', got {line!r}")
    return float(m.group(1))


def case_nested_sleep():
    """main -> wait_for_orders -> nap_in_nested_function -> sleep(3): the
    stack names the chain, and the sleep still lasts 3 s."""
    t = Target([hwtest.binary("stack-target"), "nested"])
    try:
        check(t.line("'ready'") == "ready", "stack-target did not say ready")
        wait_in_syscall(t.pid, t.pid, SLEEPS, "the main thread")
        p = hwtest.hw("stack", str(t.pid))
        check(p.returncode == 0, describe(p))
        check(p.stderr == "", f"stack wrote to stderr:\n{p.stderr}")
        check(p.stdout.startswith(f"stack of stack-target (pid {t.pid})\n"), f"header:\n{p.stdout}")
        check("busy" not in p.stdout and "hang in" not in p.stdout, f"a snapshot is no hang:\n{p.stdout}")
        by_tid = stacks(p.stdout)
        check(t.pid in by_tid and by_tid[t.pid][0].startswith(f"main thread {t.pid} (stack-target)"),
              f"no main thread stack:\n{p.stdout}")
        frames = by_tid[t.pid][1]
        nap = frame_index(frames, r"\bnap_in_nested_function\b")
        orders = frame_index(frames, r"\bwait_for_orders\b")
        main = frame_index(frames, r"  main  ")  # the function column, not a path that contains "main"
        check(0 <= nap < orders < main, f"expected nap_in_nested_function < wait_for_orders < main:\n{p.stdout}")
        check(frame_index(frames, r"\bstack_target\.c:\d+") >= 0, f"no file:line from debug info:\n{p.stdout}")
        slept = slept_seconds(t)
        check(abs(slept - 3.0) <= 0.05, f"the target's sleep(3) lasted {slept:.6f} s: the capture disturbed it")
        check(t.finish() == 0, f"stack-target exited {t.proc.returncode}")
    finally:
        t.kill()


def case_threads_and_json():
    """Three threads in three functions: every stack printed whole, and
    --json FILE a valid snapshot report (0600, written atomically, never
    through a symlink)."""
    t = Target([hwtest.binary("stack-target"), "threads"])
    d = tempfile.mkdtemp(prefix="hw-it-stack-")
    try:
        line = t.line("'ready MAIN A B'")
        m = re.match(r"^ready (\d+) (\d+) (\d+)$", line)
        check(m and int(m.group(1)) == t.pid, f"unexpected {line!r}")
        tids = {t.pid: "nap_in_nested_function", int(m.group(2)): "worker_a_waits_on_condition",
                int(m.group(3)): "worker_b_reads_a_pipe"}
        names = {t.pid: "stack-target", int(m.group(2)): "worker-a", int(m.group(3)): "worker-b"}
        wait_in_syscall(t.pid, t.pid, SLEEPS, "the main thread")
        wait_in_syscall(t.pid, int(m.group(2)), {SYS_FUTEX}, "worker-a")
        wait_in_syscall(t.pid, int(m.group(3)), {SYS_READ}, "worker-b")

        path = os.path.join(d, "snapshot.json")
        p = hwtest.hw("stack", str(t.pid), "--json", path)
        check(p.returncode == 0 and p.stderr == "", describe(p))
        # stdout: every thread's whole stack, each with its own function.
        by_tid = stacks(p.stdout)
        check(set(by_tid) == set(tids), f"threads printed {sorted(by_tid)}, expected {sorted(tids)}:\n{p.stdout}")
        for tid, function in tids.items():
            heading, frames = by_tid[tid]
            check(f" {tid} ({names[tid]}), " in heading, f"heading of {tid}: {heading!r}")
            check(frame_index(frames, rf"\b{function}\b") >= 0, f"thread {tid} lacks {function}:\n{p.stdout}")
            for other in set(tids.values()) - {function}:
                check(frame_index(frames, rf"\b{other}\b") < 0, f"thread {tid} shows {other}:\n{p.stdout}")
        check("other threads:" not in p.stdout, f"stack prints whole stacks, not one line per thread:\n{p.stdout}")

        # The file: a valid report of type snapshot, mode 0600, nothing else left.
        rep = hwtest.load_report(path)
        check(stat.S_IMODE(os.stat(path).st_mode) == 0o600, f"mode {oct(os.stat(path).st_mode)}")
        check(os.listdir(d) == ["snapshot.json"], f"left over: {os.listdir(d)}")
        apm = rep["hangwatch"]
        check(apm["hang_type"] == "snapshot" and apm["detector"] == "none" and apm["check_mode"] == "on_demand",
              f"hang_type {apm['hang_type']}, detector {apm['detector']}, check_mode {apm['check_mode']}")
        check(apm["block_duration_us"] == 0 and apm["runloop_threshold_us"] == 0, "a snapshot measures nothing")
        hung = apm["hung_thread"]
        check({k: hung.get(k) for k in ("thread_identifier", "report_array_index")} ==
              {"thread_identifier": t.pid, "report_array_index": 0}, f"hung_thread {hung}")
        # the snapshot's culprit: the main thread's innermost frame of the
        # program's own code
        contents = rep["crash"]["threads"][0]["backtrace"]["contents"]
        culprit = contents[hung["culprit_frame"]]
        check(culprit["in_app"] is True and culprit["origin"] == "app" and
              culprit.get("object_name") == "stack-target" and
              all(not f["in_app"] for f in contents[:hung["culprit_frame"]]), f"culprit {culprit}")
        # --not-in-app over the program itself: none of its frames is the
        # program's own, and the culprit leaves them
        ruled = os.path.join(d, "ruled.json")
        p = hwtest.hw("stack", str(t.pid), "--json", ruled, "--not-in-app", hwtest.binary("stack-target"))
        check(p.returncode == 0, describe(p))
        again = hwtest.load_report(ruled)
        frames_again = again["crash"]["threads"][0]["backtrace"]["contents"]
        mine = [f for f in frames_again if f.get("object_name") == "stack-target"]
        check(mine and all(f["in_app"] is False and f["origin"] == "app" for f in mine), str(mine))
        moved = frames_again[again["hangwatch"]["hung_thread"]["culprit_frame"]]
        check(moved.get("object_name") != "stack-target", f"the culprit under --not-in-app: {moved}")
        check(rep["report"]["pid"] == t.pid and rep["report"]["process_name"] == "stack-target", str(rep["report"]))
        items = apm["collection"]["scene_threads"]["items"]
        check(apm["collection"]["scene_threads"]["enumerated_thread_count"] == 3 and len(items) == 3,
              f"{len(items)} threads in the report")
        for i, th in enumerate(rep["crash"]["threads"]):
            tid = th["thread_identifier"]
            check(tid in tids, f"unknown thread {tid}")
            check(items[i]["status"] == "captured", f"thread {tid}: {items[i]['status']}")
            check(th["crashed"] == (tid == t.pid), f"thread {tid} crashed={th['crashed']}")
            check(tids[tid] in hwtest.symbols(hwtest.frames(rep, i)),
                  f"thread {tid} lacks {tids[tid]}: {hwtest.symbols(hwtest.frames(rep, i))}")

        # The same file again is replaced; a symlink in its place is refused.
        p = hwtest.hw("stack", str(t.pid), "--json=" + path)
        check(p.returncode == 0, describe(p))
        check(hwtest.load_report(path)["report"]["id"] != rep["report"]["id"], "the file was not replaced")
        victim = os.path.join(d, "victim")
        with open(victim, "w") as f:
            f.write("untouched\n")
        link = os.path.join(d, "link.json")
        os.symlink(victim, link)
        p = hwtest.hw("stack", str(t.pid), "--json", link)
        check(p.returncode == 2 and "symbolic link" in p.stderr, describe(p))
        with open(victim) as f:
            check(f.read() == "untouched\n", "the symlink's target was written")
        check(os.path.islink(link), "the symlink was replaced")
        # A thread id is not a process.
        p = hwtest.hw("stack", m.group(2))
        check(p.returncode == 2 and f"is a thread of process {t.pid}" in p.stderr, describe(p))
        check(t.proc.poll() is None, "the target died")
    finally:
        t.kill()
        shutil.rmtree(d, ignore_errors=True)


def case_python():
    """Debian's python3 sleeping in inner() called by outer(): both are named
    as py frames, inner first, with file and line; the sleep is undisturbed."""
    if sys.version_info[:2] != (3, 11):
        print(f"python {sys.version_info[:2]}: hangwatch reads CPython 3.11's frames")
        return hwtest.SKIP
    script = program("stack_sleeper.py")
    t = Target([sys.executable, script])
    try:
        check(t.line("'ready'") == "ready", "stack_sleeper.py did not say ready")
        wait_in_syscall(t.pid, t.pid, SLEEPS | {SYS_SELECT, SYS_PSELECT6}, "python's main thread")
        p = hwtest.hw("stack", str(t.pid))
        check(p.returncode == 0 and p.stderr == "", describe(p))
        by_tid = stacks(p.stdout)
        check(t.pid in by_tid, f"no main thread stack:\n{p.stdout}")
        frames = by_tid[t.pid][1]
        where = re.escape(script)
        inner = frame_index(frames, rf"#\d+\s+py\s+inner  at {where}:\d+(  <- culprit)?$")
        outer = frame_index(frames, rf"#\d+\s+py\s+outer  at {where}:\d+(  <- culprit)?$")
        main = frame_index(frames, rf"#\d+\s+py\s+main  at {where}:\d+(  <- culprit)?$")
        check(0 <= inner < outer < main, f"expected py frames inner < outer < main:\n{p.stdout}")
        check(frame_index(frames, r"_PyEval_EvalFrameDefault") >= 0, f"no native interpreter frames:\n{p.stdout}")
        slept = slept_seconds(t)
        check(abs(slept - 3.0) <= 0.05, f"time.sleep(3) lasted {slept:.6f} s: the capture disturbed it")
        check(t.finish() == 0, f"python exited {t.proc.returncode}")
    finally:
        t.kill()


def case_plt_stub():
    """A thread stopped in the program's PLT stub on its way to libc's
    labs: the frame is named "labs@plt" (not "stack-target+0x..."), and the
    culprit is its caller, sum_distances, not the stub.  The
    stub is a few of the spin's instructions: `stack` is taken until one
    capture lands in it."""
    t = Target([hwtest.binary("stack-target"), "stub"])
    d = tempfile.mkdtemp(prefix="hw-it-stack-")
    seen = []
    try:
        check(t.line("'ready'") == "ready", "stack-target did not say ready")
        path = os.path.join(d, "snapshot.json")

        def in_stub():
            p = hwtest.hw("stack", str(t.pid), "--json", path)
            check(p.returncode == 0, describe(p))
            rep = hwtest.load_report(path)
            contents = hwtest.frames(rep)
            seen[:] = [hwtest.describe_frames(contents[:3])]
            # never an unnamed frame of the program at the top
            top = contents[0]
            check(top.get("symbol_name") is not None or top.get("object_name") != "stack-target",
                  f"an unnamed frame of the program:\n{seen[0]}")
            if top.get("symbol_name") != "labs@plt":
                return False
            check(top.get("object_name") == "stack-target", f"the stub's object:\n{seen[0]}")
            culprit = rep["hangwatch"]["hung_thread"]["culprit_frame"]
            check(culprit == 1 and contents[1].get("symbol_name") == "sum_distances",
                  f"culprit #{culprit}, not the stub's caller:\n{seen[0]}")
            return True

        hwtest.wait_for(in_stub, "a capture in labs' PLT stub", timeout=120, seen=lambda: "\n".join(seen))
        check(t.proc.poll() is None, "the target died")
    finally:
        t.kill()
        shutil.rmtree(d, ignore_errors=True)


def free_pid():
    """A pid no process has (from the top of the pid range)."""
    with open("/proc/sys/kernel/pid_max") as f:
        pid = int(f.read()) - 1
    while os.path.exists(f"/proc/{pid}"):
        pid -= 1
    return pid


def case_bad_input():
    """Usage errors and a pid that is no process: exit 2, one sentence on
    stderr (and, for usage errors, the pointer to --help), never a crash."""
    gone = free_pid()
    cases = [
        ([], "stack needs a pid"),
        (["0"], "invalid pid '0'"),
        (["abc"], "invalid pid 'abc'"),
        (["-5"], "invalid pid '-5'"),
        (["12x"], "invalid pid '12x'"),
        (["99999999999"], "invalid pid '99999999999'"),
        ([""], "invalid pid ''"),
        ([str(gone)], f"no process with pid {gone}"),
        (["--frobnicate", "1"], "unknown option '--frobnicate'"),
        (["1", "-x"], "unknown option '-x'"),
        (["1", "--json"], "option '--json' needs a value"),
        (["1", "--json", ""], "--json needs a file name"),
        (["1", "--json", "a", "--json", "b"], "--json is given twice"),
        (["1", "2"], "stack takes one pid"),
    ]
    for args, needle in cases:
        p = hwtest.hw("stack", *args)
        what = f"hangwatch stack {' '.join(repr(a) for a in args)}"
        check(p.returncode == 2, f"{what}: {describe(p)}")
        check(p.stdout == "", f"{what}: printed on stdout:\n{p.stdout}")
        lines = [line for line in p.stderr.splitlines() if line != TRY_LINE]
        check(len(lines) == 1 and needle in lines[0], f"{what}: expected one line with {needle!r}:\n{p.stderr}")
        check("Sanitizer" not in p.stderr and "Segmentation" not in p.stderr, f"{what}: {p.stderr}")
    p = hwtest.hw("stack", "--help")
    check(p.returncode == 0 and "hangwatch stack PID [--json FILE]" in p.stdout, describe(p))
    p = hwtest.hw("--help")
    check(p.returncode == 0 and "hangwatch stack PID [--json FILE]" in p.stdout, "--help does not list stack")


def case_no_permission():
    """As nobody, against root's process: exit 2 with one sentence naming
    the ptrace right that is missing; the target is never touched."""
    if os.geteuid() != 0:
        print("needs root (to run hangwatch as nobody against root's process)")
        return hwtest.SKIP
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        print("needs setpriv (util-linux)")
        return hwtest.SKIP
    # A copy anyone may run: the build tree may sit in a private directory.
    d = tempfile.mkdtemp(prefix="hw-it-stack-")
    os.chmod(d, 0o755)
    copy = os.path.join(d, "hangwatch")
    shutil.copy(hwtest.binary("hangwatch"), copy)
    os.chmod(copy, 0o755)
    t = Target([hwtest.binary("stack-target"), "nested"])
    try:
        check(t.line("'ready'") == "ready", "stack-target did not say ready")
        wait_in_syscall(t.pid, t.pid, SLEEPS, "the main thread")
        p = subprocess.run([setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", copy, "stack", str(t.pid)],
                           capture_output=True, text=True, timeout=60, cwd=d)
        check(p.returncode == 2, describe(p))
        check(p.stdout == "", f"printed on stdout:\n{p.stdout}")
        lines = p.stderr.splitlines()
        check(len(lines) == 1, f"expected one line on stderr:\n{p.stderr}")
        check(f"pid {t.pid}" in lines[0] and "ptrace" in lines[0] and "CAP_SYS_PTRACE" in lines[0]
              and "another user" in lines[0], f"the message does not name the missing right:\n{p.stderr}")
        slept = slept_seconds(t)
        check(abs(slept - 3.0) <= 0.05, f"the target's sleep(3) lasted {slept:.6f} s")
        check(t.finish() == 0, f"stack-target exited {t.proc.returncode}")
    finally:
        t.kill()
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    hwtest.main({
        "nested_sleep": case_nested_sleep,
        "threads_and_json": case_threads_and_json,
        "plt_stub": case_plt_stub,
        "python": case_python,
        "bad_input": case_bad_input,
        "no_permission": case_no_permission,
    })
