"""hwtest - helpers for hangwatch's integration tests.

Runs real programs under `hangwatch run`, collects the reports they leave,
validates every one against docs/report.schema.json with a real JSON Schema
validator, and offers small assertions that say what went wrong.  Waiting is
always polling for a condition under a generous deadline, never a bare sleep.
"""
import glob
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import jsonschema

SKIP = 77  # a case that returns it cannot run here (CTest's SKIP_RETURN_CODE)

BIN = None
SCHEMA = None
SOURCE_DIR = None



TICK_TRACEPOINT = "events/irq_vectors/local_timer_entry/id"


def tick_tracepoint_ready():
    """True when the kernel sampler can ride on the timer tick: tracefs with
    the tick's tracepoint, mounted here (as root) if no tracefs is mounted yet,
    as a machine without systemd leaves it."""
    for root in ("/sys/kernel/tracing", "/sys/kernel/debug/tracing"):
        if os.path.exists(os.path.join(root, TICK_TRACEPOINT)):
            return True
    if os.geteuid() == 0 and os.path.isdir("/sys/kernel/tracing"):
        subprocess.run(["mount", "-t", "tracefs", "nodev", "/sys/kernel/tracing"], capture_output=True)
    return os.path.exists(os.path.join("/sys/kernel/tracing", TICK_TRACEPOINT))


def tick_ns():
    """The kernel's tick, as its coarse clock's resolution gives it (clock id 6:
    CLOCK_MONOTONIC_COARSE, which the time module does not name)."""
    return round(time.clock_getres(getattr(time, "CLOCK_MONOTONIC_COARSE", 6)) * 1e9)


def setup(bin_dir, source_dir):
    global BIN, SCHEMA, SOURCE_DIR
    BIN = bin_dir
    SOURCE_DIR = source_dir
    with open(os.path.join(source_dir, "docs", "report.schema.json")) as f:
        SCHEMA = json.load(f)
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


def binary(name):
    path = os.path.join(BIN, name)
    if not os.access(path, os.X_OK):
        fail(f"{path} is not built")
    return path


def fail(message):
    raise AssertionError(message)


def check(condition, message):
    if not condition:
        fail(message)


class Run:
    """One finished `hangwatch run`: exit code, output, reports."""

    def __init__(self, returncode, stdout, stderr, report_dir, elapsed):
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        self.report_dir = report_dir
        self.elapsed = elapsed
        self.report_paths = sorted(glob.glob(os.path.join(report_dir, "*.json")))
        self.reports = [load_report(p) for p in self.report_paths]

    def describe(self):
        return (f"exit {self.returncode}\n--- stdout ---\n{self.stdout}\n--- stderr ---\n{self.stderr}"
                f"\n--- reports: {self.report_paths}")


def load_report(path):
    with open(path) as f:
        report = json.load(f)
    validate(report, path)
    return report


def validate(report, where="report"):
    validator = jsonschema.Draft202012Validator(SCHEMA)
    errors = sorted(validator.iter_errors(report), key=lambda e: list(e.path))
    if errors:
        fail(f"{where} does not match the schema:\n" +
             "\n".join(f"  {list(e.path)}: {e.message}" for e in errors[:10]))
    # Cross-field rules the schema cannot express.
    threads = report["crash"]["threads"]
    items = report["hangwatch"]["collection"]["scene_threads"]["items"]
    check(len(items) == len(threads), f"{where}: {len(items)} scene items but {len(threads)} threads")
    for item in items:
        t = threads[item["report_array_index"]]
        check(t["thread_identifier"] == item["thread_identifier"],
              f"{where}: report_array_index of thread {item['thread_identifier']} points elsewhere")
        check(item["frame_count"] == len(t["backtrace"]["contents"]),
              f"{where}: frame_count of thread {item['thread_identifier']} is wrong")
    samples = report["hangwatch"]["collection"]["main_thread"].get("samples")
    if samples is not None:
        n = len(samples["frames"])
        check(all(0 <= i < n for st in samples["stacks"] for i in st["frames"]),
              f"{where}: a sampled stack refers to a frame that is not there")
        counted = sum(st["count"] for st in samples["stacks"]) + samples["left_out"]
        check(counted == report["hangwatch"]["collection"]["main_thread"]["sample_count"],
              f"{where}: the sampled stacks count {counted} samples, not sample_count")
        check(len([st for st in samples["stacks"] if st.get("point_stack")]) <= 1,
              f"{where}: more than one sampled stack holds the Point Stack")
    hung = report["hangwatch"]["hung_thread"]
    if hung["report_array_index"] >= 0:
        check(threads[hung["report_array_index"]]["thread_identifier"] == hung["thread_identifier"],
              f"{where}: hung_thread.report_array_index points to another thread")


def run(args, timeout=60, report_dir=None, env=None, prog_env=None):
    """Run `hangwatch run [args]`; args include '--' and the program."""
    owned = report_dir is None
    if owned:
        report_dir = tempfile.mkdtemp(prefix="hw-it-")
        os.rmdir(report_dir)  # hangwatch must create it
    cmd = [binary("hangwatch"), "run", "--report-dir", report_dir] + list(args)
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    start = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full_env)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        fail(f"hangwatch run did not end in {timeout} s\n" + describe_stuck(p))
    elapsed = time.monotonic() - start
    r = Run(p.returncode, out, err, report_dir, elapsed)
    return r


def describe_stuck(p):
    """What the agent `p` that did not end, and its program, were doing: each thread's kernel state
    (bench/process_tree.py) and the agent's own stacks (`hangwatch stack`); then it and its
    descendants are killed, and what it had written is added."""
    sys.path.insert(0, os.path.join(SOURCE_DIR, "bench"))
    import process_tree
    state = process_tree.describe_tree(p.pid)
    try:
        stack = subprocess.run([binary("hangwatch"), "stack", str(p.pid)], capture_output=True, text=True,
                               timeout=30)
        stacks = stack.stdout + stack.stderr
    except subprocess.TimeoutExpired:
        stacks = "(hangwatch stack did not end in 30 s)"
    for pid in process_tree.descendants(p.pid):  # its program holds the same pipes
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    p.kill()
    out, err = p.communicate()
    return (f"its threads and its program's:\n{state}\nthe agent's stacks:\n{stacks[-6000:]}\n"
            f"--- stdout ---\n{out[-3000:]}\n--- stderr ---\n{err[-3000:]}")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Background:
    """`hangwatch run` of a server in the background."""

    def __init__(self, args, options=()):
        self.report_dir = tempfile.mkdtemp(prefix="hw-it-")
        self.proc = subprocess.Popen([binary("hangwatch"), "run", "--report-dir", self.report_dir] +
                                     list(options) + ["--"] + args,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def finish(self, timeout=30):
        out, err = self.proc.communicate(timeout=timeout)
        return Run(self.proc.returncode, out, err, self.report_dir, 0)

    def cleanup(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.report_dir, ignore_errors=True)


def cleanup(run_result):
    shutil.rmtree(run_result.report_dir, ignore_errors=True)


class CpuHogs:
    """Busy loops beside the test, as on a busy machine: `with CpuHogs():`."""

    def __init__(self, count=2):
        self.count = count
        self.procs = []

    def __enter__(self):
        self.procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(self.count)]
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.kill()
            p.wait()
        return False


def children(pid):
    """The pids of a process's children (empty if it is gone)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def status_fields(pid, tid=None):
    """/proc/PID/status (or a thread's, /proc/PID/task/TID/status) as {field: value}."""
    path = f"/proc/{pid}/status" if tid is None else f"/proc/{pid}/task/{tid}/status"
    fields = {}
    with open(path) as f:
        for line in f:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    return fields


def wait_for(condition, what, timeout=30, seen=None):
    """Poll `condition` until it is true, or fail after `timeout` seconds
    (saying what `seen()`, if given, returns then)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.02)
    fail(f"timed out waiting for {what}" + (f"; seen:\n{seen()}" if seen is not None else ""))


def program_of(hangwatch_pid, timeout=20):
    """The program a `hangwatch run` process started, once it has started."""
    wait_for(lambda: children(hangwatch_pid), "the program to start", timeout)
    return children(hangwatch_pid)[0]


def hw(*args, cwd=None, timeout=60, text=True):
    """Run `hangwatch ARGS...` and wait for it: the CompletedProcess, with
    its output captured."""
    return subprocess.run([binary("hangwatch")] + list(args), capture_output=True, text=text, timeout=timeout,
                          cwd=cwd)


def frames(report, index=None):
    threads = report["crash"]["threads"]
    if index is None:
        index = report["hangwatch"]["hung_thread"]["report_array_index"]
    return threads[index]["backtrace"]["contents"]


def describe_frames(frame_list):
    """A stack as failure messages show it: index, language, function,
    file:line, object, and whose code it is."""
    out = []
    for i, f in enumerate(frame_list):
        where = f" {os.path.basename(f['source_file'])}:{f.get('source_line')}" if "source_file" in f else ""
        obj = f" ({f['object_name']})" if "object_name" in f else ""
        owner = f" in_app={f['in_app']} origin={f['origin']}" if "in_app" in f else ""
        out.append(f"  #{i} [{f.get('language', 'native')}] {f.get('symbol_name', '?')}{where}{obj}{owner}")
    return "\n".join(out)


def symbols(frame_list):
    return [f.get("symbol_name", "?") for f in frame_list]


def check_took(out, what, seconds, slack=0.1, label=""):
    """The program said "WHAT took S s, Q s waiting for a CPU" (its own clock and the kernel's
    run-queue count): S is at least SECONDS and at most SECONDS + SLACK more than the time it waited
    for a CPU, which a busy machine gives and hangwatch does not.  LABEL opens the failure's message.
    Returns S, for what else the test times against the span."""
    m = re.search(rf"{re.escape(what)} took ([0-9.]+) s, ([0-9.]+) s waiting for a CPU", out)
    check(m is not None, f"{label}the program did not say how long {what} took: {out!r}")
    took, queued = float(m.group(1)), float(m.group(2))
    check(seconds - 0.005 <= took <= seconds + slack + queued,
          f"{label}{what} took {took:.3f} s for {seconds} s, {queued:.3f} s of it waiting for a CPU")
    return took

def cause_by_rule(t):
    """The verdict decisions.md §44's rules give a time section `t` (or its
    at_end) of a thread that was not throttled, from its shares on a CPU,
    waiting for one and asleep: "working", "starved", "blocked" (or
    paging, which the shares do not tell apart) or "mixed".  A test holds a
    busy machine's verdict to what the kernel counted this way, not to what
    an idle machine gives."""
    w, on, queue, asleep = t["window_us"], t["on_cpu_us"], t["runqueue_wait_us"], t["blocked_us"]
    if on >= 0.6 * w:
        return "working"
    if queue >= 0.5 * w:
        return "starved"
    if on + queue >= 0.6 * w:
        return "working" if on >= queue else "starved"
    own = on + asleep  # the thread's own time: not its waits for a CPU, nor hangwatch's stops
    if asleep >= 0.6 * own:
        return "blocked"
    if on >= 0.6 * own:
        return "working"
    return "mixed"


def main(cases):
    """Entry point: hwtest.main({name: function}) with argv BIN_DIR SOURCE_DIR CASE.
    A case that returns SKIP exits 77 (skipped)."""
    if len(sys.argv) != 4 or sys.argv[3] not in cases:
        print(f"usage: {sys.argv[0]} BIN_DIR SOURCE_DIR {'|'.join(sorted(cases))}", file=sys.stderr)
        sys.exit(2)
    setup(sys.argv[1], sys.argv[2])
    name = sys.argv[3]
    # Every temporary file and folder the case makes lives under one scratch
    # folder that goes when the case ends, whatever the case forgot.  Readable
    # by all, as /tmp is, for programs the case runs as another user.
    scratch = tempfile.mkdtemp(prefix=f"hw-{name}-")
    os.chmod(scratch, 0o755)
    tempfile.tempdir = scratch
    try:
        result = cases[name]()
    except AssertionError as e:
        print(f"FAIL {name}: {e}", file=sys.stderr)
        sys.exit(1)
    finally:
        tempfile.tempdir = None
        shutil.rmtree(scratch, ignore_errors=True)
    if result == SKIP:
        print(f"skip {name}")
        sys.exit(SKIP)
    print(f"ok {name}")
