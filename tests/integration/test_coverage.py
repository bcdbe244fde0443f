"""test_coverage - the loop-library coverage matrix: every real loop library
this machine has (Debian's python3-uvloop, -tornado, -twisted, -gevent, -gi
with GLib alone and a GTK 3 window on Xvfb, clicked through the X server,
asyncio on each selector, hand-written select/poll/epoll loops, node's
libuv, and libevent, libuv and GLib from C) blocked from a callback in every
way a handler blocks (a sleep, a CPU spin, an HTTP call with a timeout to a
slow local server, a FIFO's read, a child run synchronously, a lock another
thread holds, a C extension's work), under `hangwatch run` and under
`hangwatch watch -p` with each attachment this kernel has.

    matrix            each row is one process that blocks in each of its
                      ways in turn (tests/coverage/loop_cell.py, .js, .c);
                      the three modes run at once, each under its own agent.
                      Every hold must be reported once, with the user's own
                      holding function as the culprit, and nothing else.
                      The table (one row per library, one column per way,
                      a mark or each mode's failure) goes to
                      BUILD/coverage/coverage.md; `make coverage` copies it
                      to docs/coverage.md.
    idle_under_load   every row's loop turning every millisecond for a
                      minute, under run and under watch, with two CPU hogs
                      beside: no report, but for a loop the kernel held in
                      uninterruptible sleep outside its wait (a real stall:
                      its report must say blocked, in state D)
    nested_main_loop  a GLib main loop run from a callback on the loop's own
                      context for 2.5 s (a modal dialog's), and GTK's modal
                      Gtk.Dialog.run, under run and watch: it dispatches
                      the program's events, so no report (its waits are
                      the loop's, from a deeper call).
    pythons           asyncio and a hand-written select loop on every CPython
                      3.8-3.13 (pyenv's; a missing one fails the case),
                      idle in their wait for 4 s when watching begins, then
                      a 3 s time.sleep (select(0, ...) on 3.8-3.10) and a
                      3 s urlopen, at the default threshold: one report of
                      each, under run and watch, and one grouping key for
                      each hang on every version (upgrading Python keeps
                      its group).

With HW_TEST_KEEP set in the environment, a failing matrix keeps its work
directory (each mode's reports, each row's output) and says where.

A cell that is a known gap says so in the table with its reason (GAPS);
one that fails otherwise fails the test, and so does a gap that no longer
fails (the list must stay true).
"""
import http.server
import json
import os
import shutil
import socketserver
import subprocess
import sys
import tempfile
import threading
import time

import hwtest
from hwtest import check, fail

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import pythons  # noqa: E402 (tests/pythons.py)

PYTHON = "/usr/bin/python3"  # Debian's, with Debian's loop libraries
THRESHOLD = "1s"
HOLD = 1.4
KINDS = ["sleep", "spin", "http", "fifo", "child", "lock", "cext"]
PY_LIBRARIES = [("asyncio", "asyncio (epoll)"), ("asyncio_poll", "asyncio (poll)"),
                ("asyncio_select", "asyncio (select)"), ("uvloop", "uvloop"), ("tornado", "Tornado"),
                ("twisted", "Twisted (epoll reactor)"), ("gevent", "gevent (libev)"), ("glib", "GLib (python3-gi)"),
                ("gtk", "GTK 3 (python3-gi, Xvfb)"), ("select_loop", "hand-written select"), ("poll_loop", "hand-written poll"),
                ("epoll_loop", "hand-written epoll")]
C_LIBRARIES = [("libevent", "libevent (C)"), ("libuv", "libuv (C)"), ("glib", "GLib (C)")]
MODES = ["run", "watch tracepoint", "watch uprobe"]
NOT_A_KIND = {("node (libuv)", "http"): "node has no synchronous HTTP client",
              ("libevent (C)", "cext"): "C has no extension boundary",
              ("libuv (C)", "cext"): "C has no extension boundary",
              ("GLib (C)", "cext"): "C has no extension boundary"}
# Known gaps: (row, kind, mode or "*") -> why.  Each is a failure the table
# shows with its reason; the test fails when one of them passes.
GAPS = {}


def culprit_name(kind, row):
    if row == "node (libuv)":
        return "holdTheLoopWith" + kind.capitalize()
    return "hold_the_loop_with_" + kind


class SlowServer(http.server.BaseHTTPRequestHandler):
    """Answers GET /SECONDS after SECONDS."""

    def do_GET(self):
        time.sleep(float(self.path.strip("/") or 1))
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass


class XServer:
    """Xvfb on a display of its own choosing (`display`), for a mode's GTK
    row: each mode has its own, so that a click through the X server,
    which lands on the topmost window at its place, is on that row's
    window and no other mode's."""

    def __init__(self):
        if shutil.which("Xvfb") is None or shutil.which("xdotool") is None:
            fail("Xvfb and xdotool are not installed (scripts/ensure-deps.sh test installs xvfb and xdotool)")
        read_end, write_end = os.pipe()
        self.proc = subprocess.Popen(["Xvfb", "-displayfd", str(write_end), "-nolisten", "tcp", "-screen", "0",
                                      "640x480x24"], pass_fds=(write_end,), stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        os.close(write_end)
        with os.fdopen(read_end) as f:
            number = f.readline().strip()  # written once the server takes connections
        if not number.isdigit():
            self.stop()
            fail("Xvfb did not start")
        self.display = ":" + number

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def start_slow_server():
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), SlowServer)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def rows(port, go_file, kinds_for=None):
    """(name, argv, kinds) of every row; `kinds_for(name, kinds)` gives the
    kinds it runs (default: all it has)."""
    out = []
    here = os.path.join(hwtest.SOURCE_DIR, "tests", "coverage")
    pick = kinds_for or (lambda name, kinds: kinds)
    for i, (lib, name) in enumerate(PY_LIBRARIES):
        kinds = pick(name, KINDS)
        out.append((name, [PYTHON, os.path.join(here, "loop_cell.py"), lib, ",".join(kinds), str(port), go_file,
                           f"{1.0 + 0.17 * i:.2f}", str(HOLD)], kinds))
    kinds = pick("node (libuv)", [k for k in KINDS if ("node (libuv)", k) not in NOT_A_KIND])
    out.append(("node (libuv)", ["node", os.path.join(here, "loop_cell.js"), ",".join(kinds), str(port), go_file,
                                 f"{1.0 + 0.17 * len(out):.2f}", str(HOLD)], kinds))
    for lib, name in C_LIBRARIES:
        kinds = pick(name, [k for k in KINDS if (name, k) not in NOT_A_KIND])
        out.append((name, [hwtest.binary("loop-cell"), lib, ",".join(kinds), str(port), go_file,
                           f"{1.0 + 0.17 * len(out):.2f}", str(HOLD)], kinds))
    return out


def slug(name):
    return "".join(c if c.isalnum() else "_" for c in name)


class Mode:
    """One mode's agent and its rows' processes."""

    def __init__(self, mode, row_list, work, threshold=THRESHOLD):
        self.mode = mode
        self.threshold = threshold
        self.rows = row_list
        self.dir = os.path.join(work, slug(mode))
        os.makedirs(self.dir)
        self.report_dir = os.path.join(self.dir, "reports")
        self.pids = {}  # row name -> pid
        self.agent = None
        self.cells = []
        self.x_server = None

    def out_of(self, name):
        path = os.path.join(self.dir, slug(name) + ".out")
        try:
            with open(path) as f:
                return f.read()
        except OSError:
            return ""

    def start(self):
        common = ["--threshold", self.threshold, "--daily-limit", "0", "--report-dir", self.report_dir, "-q"]
        env = dict(os.environ)
        if any("gtk" in argv for _, argv, _ in self.rows):
            self.x_server = XServer()
            env["DISPLAY"] = self.x_server.display
        if self.mode == "run":
            launcher = [PYTHON, os.path.join(hwtest.SOURCE_DIR, "tests", "coverage", "launch_cells.py"), self.dir]
            for name, argv, _ in self.rows:
                launcher += [slug(name), json.dumps(argv)]
            self.agent = subprocess.Popen([hwtest.binary("hangwatch"), "run"] + common + ["--"] + launcher,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
            return
        for name, argv, _ in self.rows:
            with open(os.path.join(self.dir, slug(name) + ".out"), "w") as out:
                self.cells.append(subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env))
            self.pids[name] = self.cells[-1].pid

    def wait_ready(self):
        for name, _, _ in self.rows:
            hwtest.wait_for(lambda: "ready" in self.out_of(name), f"{self.mode}: {name} to turn", timeout=90)
            if self.mode == "run":
                pid = int(self.out_of(name).split("ready ")[1].split()[0])
                self.pids[name] = pid

    def attach(self):
        if self.mode == "run":
            return
        attachment = self.mode.split()[1]
        args = [hwtest.binary("hangwatch"), "watch", "--attach", attachment, "--threshold", self.threshold,
                "--daily-limit", "0",
                "--report-dir", self.report_dir]
        for pid in self.pids.values():
            args += ["-p", str(pid)]
        self.agent = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        seen = ""
        deadline = time.monotonic() + 60
        while seen.count("watching pid") < len(self.pids) and time.monotonic() < deadline:
            line = self.agent.stderr.readline()
            if not line:
                break
            seen += line
        check(seen.count("watching pid") == len(self.pids), f"{self.mode}: watch did not start:\n{seen}")
        self.attach_said = seen

    def finish(self, timeout=180):
        for p in self.cells:
            p.wait(timeout=timeout)
        out, err = self.agent.communicate(timeout=timeout)
        self.stderr = getattr(self, "attach_said", "") + err
        self.returncode = self.agent.returncode
        self.reports = []
        if os.path.isdir(self.report_dir):
            for f in sorted(os.listdir(self.report_dir)):
                if f.endswith(".json"):
                    self.reports.append(hwtest.load_report(os.path.join(self.report_dir, f)))

    def kill(self):
        for p in self.cells + ([self.agent] if self.agent else []):
            if p.poll() is None:
                p.kill()
                p.wait()
        if self.x_server:
            self.x_server.stop()


def culprit_of(report):
    """The culprit's function, without V8's receiver ("Object.f" is f)."""
    index = report["hangwatch"]["hung_thread"].get("culprit_frame")
    if index is None:
        return None
    name = hwtest.frames(report)[index].get("symbol_name")
    if name and hwtest.frames(report)[index].get("language") == "javascript":
        name = name.rsplit(".", 1)[-1]
    return name


def describe_extra(report):
    """A report no cell asked for, with what says when and why it was taken."""
    apm = report["hangwatch"]
    time_section = apm.get("time") or {}
    return (f"{apm['hang_type']}, busy {apm['block_duration_us']} us at detection, final "
            f"{apm.get('final_duration_us')} us, end {apm.get('hang_end')}, cause {time_section.get('cause')}, "
            f"loop wait {json.dumps(apm.get('loop_wait'))}, stretch report {apm.get('stretch_report_index')}: "
            + hwtest.describe_frames(hwtest.frames(report)[:6]).replace("\n", " |"))


def judge(mode, row_kinds):
    """{(row, kind): None (passed) or why not}, and the extra reports'
    descriptions, for one finished mode."""
    by_pid = {}
    for r in mode.reports:
        # A row's start-up (imports, under the load of every row starting at
        # once) may take longer than the threshold before its loop first
        # waits: a launch hang, true but not a cell's.
        if r["hangwatch"]["hang_type"] != "launch_hang":
            by_pid.setdefault(r["report"]["pid"], []).append(r)
    verdicts, extras = {}, []
    for name, kinds in row_kinds:
        out = mode.out_of(name)
        mine = by_pid.pop(mode.pids.get(name, -1), [])
        named = {}
        for r in mine:
            named.setdefault(culprit_of(r), []).append(r)
        for kind in kinds:
            want = culprit_name(kind, name)
            got = named.pop(want, [])
            if f"held {kind} " not in out:
                verdicts[(name, kind)] = f"the program did not hold ({out.strip().splitlines()[-1:] or 'no output'})"
            elif len(got) != 1:
                # what the row's other reports named (a stretch said as starved among them)
                others = [f"{culprit} ({describe_extra(r)})" for culprit, rs in named.items() for r in rs]
                verdicts[(name, kind)] = f"{len(got)} reports naming {want}" + (
                    "; the row's other reports: " + "; ".join(others) if others else "")
            else:
                verdicts[(name, kind)] = None
        for culprit, rs in named.items():
            # A stretch the machine stretched past the threshold (the loop waiting for a CPU more
            # than half of it: GTK's drawing under the load of every row at once) is a true hang,
            # said as starved, but not a cell's.
            rs = [r for r in rs if (r["hangwatch"].get("time") or {}).get("cause") != "starved"]
            if rs:
                extras.append(f"{mode.mode}: {name}: {len(rs)} report(s) whose culprit is {culprit}: "
                              + "; ".join(describe_extra(r) for r in rs))
    for pid, rs in by_pid.items():
        extras.append(f"{mode.mode}: {len(rs)} report(s) of pid {pid} ({rs[0]['report'].get('process_name')}), "
                      "not a row's: " + "; ".join(describe_extra(r) for r in rs))
    return verdicts, extras


def table(results, row_kinds):
    """docs/coverage.md's text."""
    lines = ["# Loop libraries × ways to block: what hangwatch reports", "",
             "Generated by `make coverage` (tests/integration/test_coverage.py, `matrix`): each row is one real "
             "process of that loop library, blocked from a callback in each way of the columns, "
             f"{HOLD} s each, under a {THRESHOLD} threshold; a cell is ✓ when every mode (" + ", ".join(
                 f"`{m}`" for m in MODES) + ") reported that hold once, with the user's own holding function as the "
             "hang's culprit, and nothing else (but stretches the machine starved of a CPU, said as such); "
             "otherwise it names each mode's failure. `—`: not a way this "
             "runtime can block. `make test` runs the same matrix and fails on any cell not listed as a known gap "
             "in the test.", "",
             "| library | " + " | ".join(KINDS) + " |", "|---|" + "---|" * len(KINDS)]
    for name, kinds in row_kinds:
        cells = []
        for kind in KINDS:
            if (name, kind) in NOT_A_KIND:
                cells.append("— (" + NOT_A_KIND[(name, kind)] + ")")
                continue
            failures = [f"{m}: {results[m].get((name, kind))}" for m in MODES if results[m].get((name, kind))]
            cells.append("✓" if not failures else "✗ " + "; ".join(failures))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def gap_of(name, kind, mode):
    return GAPS.get((name, kind, mode)) or GAPS.get((name, kind, "*"))


def case_matrix():
    """Every row x every way x every mode: one report each, the user's function its culprit."""
    server = start_slow_server()
    work = tempfile.mkdtemp(prefix="hw-coverage-")
    go_file = os.path.join(work, "go")
    row_list = rows(server.server_address[1], go_file)
    row_kinds = [(name, kinds) for name, _, kinds in row_list]
    modes = [Mode(m, row_list, work) for m in MODES]
    try:
        run_modes(modes, go_file)
        results, problems, all_extras = {}, [], []
        for m in modes:
            check(m.returncode == 0, f"{m.mode}: hangwatch exited {m.returncode}:\n{m.stderr}")
            verdicts, extras = judge(m, row_kinds)
            results[m.mode] = verdicts
            all_extras += extras
            for (name, kind), why in verdicts.items():
                gap = gap_of(name, kind, m.mode)
                if why and not gap:
                    problems.append(f"{m.mode}: {name} x {kind}: {why}")
                elif not why and gap:
                    problems.append(f"{m.mode}: {name} x {kind} passes, but is listed as a gap ({gap})")
        text = table(results, row_kinds)
        out_dir = os.path.join(os.path.dirname(hwtest.BIN), "coverage")
        os.makedirs(out_dir, exist_ok=True)
        with open(os.path.join(out_dir, "coverage.md"), "w") as f:
            f.write(text)
        print(text)
        check(not problems and not all_extras, "\n".join(problems + all_extras) + "\n\nagents said:\n" +
              "\n".join(f"{m.mode}:\n{m.stderr}" for m in modes))
    except BaseException:
        if os.environ.get("HW_TEST_KEEP"):
            keep = work
            work = None
            print(f"the matrix's reports and its rows' output are kept in {keep} (HW_TEST_KEEP)")
        raise
    finally:
        for m in modes:
            m.kill()
        server.shutdown()
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)


def case_idle_under_load():
    """Every row's loop turning every millisecond for a minute beside two CPU hogs: no report, but
    for a loop the kernel held in uninterruptible sleep outside its wait, or work the hogs kept from
    a CPU past the threshold (real stalls, said as such)."""
    work = tempfile.mkdtemp(prefix="hw-coverage-idle-")
    go_file = os.path.join(work, "go")
    row_list = rows(0, go_file, kinds_for=lambda name, kinds: ["none"])
    hogs = [subprocess.Popen([PYTHON, "-c", "while True: pass"]) for _ in range(2)]
    modes = [Mode(m, row_list, work) for m in ("run", "watch tracepoint")]
    try:
        run_modes(modes, go_file)
        for m in modes:
            check(m.returncode == 0, f"{m.mode}: hangwatch exited {m.returncode}:\n{m.stderr}")
            for name, _, _ in row_list:
                check("done" in m.out_of(name), f"{m.mode}: {name} did not finish: {m.out_of(name)[-300:]}")
            # Start-up beside the hogs may outlast the threshold before a
            # loop first waits: a launch hang, not the idle loop's.
            hangs = [r for r in m.reports if r["hangwatch"]["hang_type"] != "launch_hang"]
            stalls = [r for r in hangs if held_in_the_kernel(r)]
            if stalls:
                print(f"{m.mode}: {len(stalls)} loop(s) held in the kernel, reported as blocked (a real stall): " +
                      ", ".join(f"pid {r['report']['pid']} in {stall_place(r)}" for r in stalls))
            # Work the machine kept from a CPU past the threshold (GTK loading Mesa's LLVM at its
            # first draw, 0.86 s of 1 s waiting for a CPU beside the hogs): a real stall, said as
            # starved, not an idle loop taken for a hung one.
            starved = [r for r in hangs
                       if r not in stalls and (r["hangwatch"].get("time") or {}).get("cause") == "starved"]
            if starved:
                print(f"{m.mode}: {len(starved)} stretch(es) starved of a CPU past the threshold, reported as starved: "
                      + ", ".join(f"pid {r['report']['pid']} in {culprit_of(r)}" for r in starved))
            hangs = [r for r in hangs if r not in stalls and r not in starved]
            check(hangs == [], f"{m.mode}: idle loops were reported:\n" + "\n".join(
                f"pid {r['report']['pid']} ({r['report'].get('process_name')}): {culprit_of(r)}, "
                f"busy {r['hangwatch']['block_duration_us']} us, time {json.dumps(r['hangwatch'].get('time'))}\n"
                f"{hwtest.describe_frames(hwtest.frames(r)[:10])}" for r in hangs) + "\n" + m.stderr)
    finally:
        for h in hogs:
            h.kill()
            h.wait()
        for m in modes:
            m.kill()
        shutil.rmtree(work, ignore_errors=True)


# The wait system calls (x86-64): epoll_wait, epoll_pwait, epoll_pwait2, poll, ppoll, select,
# pselect6, io_uring_enter.
WAIT_SYSCALLS = {232, 281, 441, 7, 271, 23, 270, 426}


def held_in_the_kernel(report):
    """A real stall, not a false hang: the loop thread was found in uninterruptible sleep outside
    any wait call, and its time went to being blocked.  On this machine kind the kernel's memory
    monitor (kdamond, walking the reverse maps of the cells' shared heap) held a cell's brk() for
    seconds beside the hogs; the report said so, rightly.  Where the thread was at the capture
    (blocked_in) or where the looks found it asleep (slept_in: GTK's accessibility bridge forking
    dbus-launch at start-up, 0.67 s of 1 s in clone beside the hogs, runnable again by the capture)."""
    t = report["hangwatch"].get("time") or {}
    places = [t.get("blocked_in") or {}, t.get("slept_in") or {}]
    return t.get("cause") == "blocked" and any(
        p.get("state") == "D" and p.get("syscall_nr") not in WAIT_SYSCALLS for p in places)


def stall_place(report):
    """Where a stall held the thread: the wait channel of its capture, or the call the looks found it in."""
    t = report["hangwatch"]["time"]
    b, slept = t.get("blocked_in") or {}, t.get("slept_in") or {}
    return b.get("wchan") or slept.get("syscall") or "?"


def run_modes(modes, go_file, attach_after_go=False):
    """Start every mode's rows, wait until all turn, attach the watchers
    (before the go, or right after it, while idle-first rows wait), go, and
    wait for the end."""
    for m in modes:
        m.start()
    for m in modes:
        m.wait_ready()
    if not attach_after_go:
        for m in modes:
            m.attach()
    with open(go_file, "w"):
        pass
    if attach_after_go:
        for m in modes:
            for name, _, _ in m.rows:
                hwtest.wait_for(lambda: "idle" in m.out_of(name), f"{m.mode}: {name} to idle", timeout=30)
        for m in modes:
            m.attach()
    for m in modes:
        m.finish()


def case_nested_main_loop():
    """A GLib main loop nested on the same context (a modal dialog's: GLib's own, and GTK's
    Gtk.Dialog.run) is the loop waiting: no report."""
    work = tempfile.mkdtemp(prefix="hw-coverage-nested-")
    go_file = os.path.join(work, "go")
    cell = os.path.join(hwtest.SOURCE_DIR, "tests", "coverage", "loop_cell.py")
    row_list = [(f"{lib} nested", [PYTHON, cell, lib, "nested", "0", go_file, "0.5", "2.5"], ["nested"])
                for lib in ("glib", "gtk")]
    modes = [Mode(m, row_list, work) for m in MODES]
    try:
        run_modes(modes, go_file)
        for m in modes:
            check(m.returncode == 0, f"{m.mode}: hangwatch exited {m.returncode}:\n{m.stderr}")
            for name, _, _ in row_list:
                check("held nested" in m.out_of(name), f"{m.mode}: no nested loop ran in {name}")
            hangs = [r for r in m.reports if r["hangwatch"]["hang_type"] != "launch_hang"]
            check(hangs == [], f"{m.mode}: a nested main loop was reported:\n" + "\n".join(
                hwtest.describe_frames(hwtest.frames(r)[:8]) for r in hangs) + "\n" + m.stderr)
    finally:
        for m in modes:
            m.kill()
        shutil.rmtree(work, ignore_errors=True)


def case_pythons():
    """asyncio and a select loop on every CPython, idle when watched, then time.sleep and urlopen."""
    server = start_slow_server()
    work = tempfile.mkdtemp(prefix="hw-coverage-py-")
    go_file = os.path.join(work, "go")
    cell = os.path.join(hwtest.SOURCE_DIR, "tests", "coverage", "loop_cell.py")
    row_list = []
    for version in pythons.VERSIONS[:-1]:
        python = pythons.find(version)
        check(python is not None, f"Python {version} is not on this machine (pyenv's: tests/pythons.py)")
        for lib in ("asyncio", "select_loop"):
            row_list.append((f"{lib} {version}", [python, cell, lib, "sleep,http", str(server.server_address[1]),
                                                   go_file, "4", "3", "idle-first"], ["sleep", "http"]))
    modes = [Mode(m, row_list, work, threshold="2s") for m in MODES]
    try:
        run_modes(modes, go_file, attach_after_go=True)
        problems = []
        for m in modes:
            check(m.returncode == 0, f"{m.mode}: hangwatch exited {m.returncode}:\n{m.stderr}")
            verdicts, extras = judge(m, [(name, kinds) for name, _, kinds in row_list])
            problems += [f"{m.mode}: {name} x {kind}: {why}" for (name, kind), why in verdicts.items() if why]
            problems += extras
            keys = {}  # (library, culprit) -> {version: key}
            row_of = {m.pids[name]: name for name, _, _ in row_list if name in m.pids}
            for r in m.reports:
                name = row_of.get(r["report"]["pid"])
                if name and r["hangwatch"]["hang_type"] == "hang":
                    lib, version = name.split()
                    keys.setdefault((lib, culprit_of(r)), {})[version] = r["hangwatch"]["grouping_key"]
            problems += [f"{m.mode}: {lib} x {culprit}: grouped apart across versions: {by_version}"
                         for (lib, culprit), by_version in keys.items() if len(set(by_version.values())) != 1]
        check(not problems, "\n".join(problems) + "\n\nagents said:\n" +
              "\n".join(f"{m.mode}:\n{m.stderr}" for m in modes))
    finally:
        for m in modes:
            m.kill()
        server.shutdown()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    hwtest.main({"matrix": case_matrix, "idle_under_load": case_idle_under_load, "pythons": case_pythons,
                 "nested_main_loop": case_nested_main_loop})
