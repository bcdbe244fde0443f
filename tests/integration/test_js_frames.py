#!/usr/bin/python3
"""test_js_frames.py - JavaScript frames read from V8's own records with
the postmortem metadata node carries: no flag, no perf map, in a node
hangwatch did not start (js_frames.h, docs/runtime-frames.md).

  express_watch   an express server started plainly; `watch -p`; a request
                  hangs in renderHugeTable(): named with server file and a
                  line, above express's handle (layer.js); the stderr line
                  names it
  express_run     the same under `hangwatch run`: the same names, the
                  child's NODE_OPTIONS exactly the user's, no perf map
  stack_names     `hangwatch stack` of a running node: an async function, a
                  class method, an object's method, an arrow function, as
                  V8 names them, each at a line of its own body
  worker_loops    a worker_threads worker spinning in crunch() while the
                  main thread spins in TableRenderer.render, --threads
                  loops, two CPU hogs beside: both named, each in its own
                  thread's report
  point_stack     early sampling of a node: the Point Stack's frames are
                  JavaScript functions, named
  metadata_off    `stack --js-frames off`: no JavaScript frame, and the
                  hung thread says why
  gc_pause        compactHeap() runs two full collections: the report and
                  the line say garbage collection and its phase, the
                  culprit is compactHeap, one report for the pause
  alloc_spin      an allocation-heavy 9 s spin: one report, culprit
                  buildRows; 20 of 20 `stack` captures name buildRows
  optimised_line  a loop optimised while it ran, under run and watch: its
                  line is its function's first, and report, show and page
                  say so

express comes from the npm registry once (scripts/fetch-npm.sh express, kept
in the build tree; HW_EXPRESS_CACHE says where).
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import urllib.request

import hwtest
from hwtest import check

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))


def node():
    path = shutil.which("node")
    if path is None:
        print("SKIP: node is not installed (scripts/ensure-deps.sh test installs it)")
        sys.exit(SKIP)
    return path


def program(name):
    return os.path.join(SOURCE, "tests", "programs", name)


def express_modules():
    cache = os.environ.get("HW_EXPRESS_CACHE") or os.path.join(tempfile.gettempdir(), "hw-express-cache")
    p = subprocess.run([os.path.join(SOURCE, "scripts", "fetch-npm.sh"), "express", cache], capture_output=True,
                       text=True, timeout=600)
    check(p.returncode == 0, "express could not be installed:\n" + p.stderr)
    return p.stdout.strip()


def find(frames, name):
    for i, f in enumerate(frames):
        if f.get("language") == "javascript" and f.get("symbol_name") == name:
            return i
    return -1


def lines_of(out):
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^line (\S+) (\d+)$", out, re.M)}


class Server:
    """express_server.js, started plainly or under `hangwatch run`."""

    def __init__(self, under=None, env=None):
        self.port = hwtest.free_port()
        full_env = dict(os.environ, NODE_PATH=express_modules())
        full_env.pop("NODE_OPTIONS", None)
        full_env.update(env or {})
        cmd = [node(), program("express_server.js"), str(self.port)]
        if under is not None:
            cmd = [hwtest.binary("hangwatch"), "run", "--report-dir", under, "--"] + cmd
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full_env)
        self.out = ""
        while "listening" not in self.out:
            line = self.proc.stdout.readline()
            check(line != "", f"the server did not start: {self.out!r}")
            self.out += line
        self.pid = int(re.search(r"^pid (\d+)$", self.out, re.M).group(1))
        self.lines = lines_of(self.out)

    def get(self, path, timeout=30):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=timeout) as r:
            return r.read().decode()

    def request_table(self):
        """GET /table in the background (it takes 3 s): the thread."""
        result = {}

        def ask():
            result["body"] = self.get("/table")
        t = threading.Thread(target=ask)
        t.start()
        return t, result

    def stop(self):
        try:
            self.get("/quit", timeout=10)
        except OSError:
            pass
        try:
            out, err = self.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
        return self.out + out, err

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def check_express_stack(frames, lines):
    """renderHugeTable at a line of its body, with the server's file, above
    express's handle (layer.js), in the hung stack."""
    i = find(frames, "renderHugeTable")
    check(i >= 0, "renderHugeTable is not in the hung stack:\n" + hwtest.describe_frames(frames))
    f = frames[i]
    at = lines["renderHugeTable"]
    check(f["source_file"].endswith("express_server.js") and at <= f["source_line"] <= at + 7,
          f"renderHugeTable is at {f.get('source_file')}:{f.get('source_line')}, its body at {at}..{at + 7}")
    check(f["in_app"] and f["origin"] == "app", f"renderHugeTable is not the program's own: {f}")
    handle = [k for k, g in enumerate(frames) if g.get("language") == "javascript" and
              g.get("symbol_name", "").endswith("handle") and g.get("source_file", "").endswith("layer.js")]
    check(handle and handle[0] > i, "express's handle (layer.js) is not below it:\n" + hwtest.describe_frames(frames))
    check(frames[handle[0]]["origin"] == "package", f"express's frame is not a package's: {frames[handle[0]]}")


def case_express_watch():
    """A plain `node server.js`; `hangwatch watch -p`; a request hangs it."""
    if os.geteuid() != 0:
        print("SKIP: hangwatch watch needs root here (the kernel observer)")
        return SKIP
    server = Server()
    report_dir = tempfile.mkdtemp(prefix="hw-it-")
    watch = subprocess.Popen([hwtest.binary("hangwatch"), "watch", "--report-dir", report_dir, "-p", str(server.pid)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = watch.stderr.readline()
        check(f"watching pid {server.pid}" in first, f"watch did not start: {first!r}")
        t, result = server.request_table()
        t.join(60)
        check("rendered some cells" in result.get("body", ""), f"the request failed: {result}")
        hwtest.wait_for(lambda: any(n.endswith(".json") for n in os.listdir(report_dir)), "the hang's report", 30)
        server.stop()
        _, err = watch.communicate(timeout=30)
        err = first + err
        r = hwtest.Run(watch.returncode, "", err, report_dir, 0)
        check(r.returncode == 0, "watch did not exit 0 after the server ended\n" + r.describe())
        check(len(r.reports) == 1, f"{len(r.reports)} reports\n" + r.describe())
        report = r.reports[0]
        check_express_stack(hwtest.frames(report), server.lines)
        check(report["hangwatch"]["capture"].get("js_frames") == "metadata", f"{report['hangwatch']['capture']}")
        check(re.search(r"renderHugeTable \(express_server\.js:\d+\)", err), "the stderr line does not name it:\n" + err)
    finally:
        server.kill()
        if watch.poll() is None:
            watch.kill()
            watch.wait()
        shutil.rmtree(report_dir, ignore_errors=True)


def case_express_run():
    """`hangwatch run -- node server.js`: the same names; NODE_OPTIONS as the user set it; no perf map."""
    report_dir = tempfile.mkdtemp(prefix="hw-it-")
    server = Server(under=report_dir, env={"NODE_OPTIONS": "--max-old-space-size=300"})
    try:
        with open(f"/proc/{server.pid}/environ", "rb") as f:
            env = dict(e.split(b"=", 1) for e in f.read().split(b"\0") if b"=" in e)
        check(env.get(b"NODE_OPTIONS") == b"--max-old-space-size=300", f"NODE_OPTIONS is {env.get(b'NODE_OPTIONS')}")
        t, result = server.request_table()
        t.join(60)
        check("rendered some cells" in result.get("body", ""), f"the request failed: {result}")
        check(not os.path.exists(f"/tmp/perf-{server.pid}.map"), "node wrote a perf map")
        out, err = server.stop()
        r = hwtest.Run(server.proc.returncode, out, err, report_dir, 0)
        check(r.returncode == 0, r.describe())
        check(len(r.reports) == 1, f"{len(r.reports)} reports\n" + r.describe())
        check_express_stack(hwtest.frames(r.reports[0]), server.lines)
        check(re.search(r"renderHugeTable \(express_server\.js:\d+\)", err), "the stderr line does not name it:\n" + err)
    finally:
        server.kill()
        shutil.rmtree(report_dir, ignore_errors=True)


class Spinner:
    """node_names.js, started plainly; ready once its main thread spins."""

    def __init__(self, *args):
        self.proc = subprocess.Popen([node(), program("node_names.js"), *args], stdout=subprocess.PIPE, text=True)
        self.out = ""
        while "ready" not in self.out:
            line = self.proc.stdout.readline()
            check(line != "", f"node_names.js did not start: {self.out!r}")
            self.out += line
        self.lines = lines_of(self.out)

    def kill(self):
        self.proc.kill()
        self.proc.wait()


def in_body(frame, lines, name):
    return frame.get("source_file", "").endswith("node_names.js") and \
        lines[name] <= frame.get("source_line", 0) <= lines[name] + 6


def stack_of(pid, *options):
    """`hangwatch stack PID --json`: the report, once the main thread's
    innermost JavaScript frame is TableRenderer.render (the spin starts
    just after "ready"); with options (--js-frames off), once it runs
    JavaScript at all (V8's builtins that run it are on its stack)."""
    d = tempfile.mkdtemp(prefix="hw-it-")
    try:
        path = os.path.join(d, "stack.json")
        report = {}

        def taken():
            p = hwtest.hw("stack", str(pid), "--json", path, *options)
            check(p.returncode == 0, f"stack failed: {p.stderr}")
            report["r"] = hwtest.load_report(path)
            report["text"] = p.stdout
            frames = hwtest.frames(report["r"])
            if options:
                return any(f.get("symbol_name", "").startswith("Builtins_Interpreter") for f in frames)
            js = [f for f in frames if f.get("language") == "javascript"]
            return js and js[0].get("symbol_name") == "TableRenderer.render"
        hwtest.wait_for(taken, "the main thread to spin in TableRenderer.render", 30)
        return report["r"], report["text"]
    finally:
        shutil.rmtree(d, ignore_errors=True)


def case_stack_names():
    """An async function, a class method, an object's method, an arrow function: named as V8 names them."""
    spinner = Spinner()
    try:
        report, text = stack_of(spinner.proc.pid)
        frames = hwtest.frames(report)
        names = [(f.get("symbol_name"), f) for f in frames if f.get("language") == "javascript"]
        order = [n for n, _ in names]
        want = ["TableRenderer.render", "Object.draw", "drawArrow", "renderPage"]
        check(order[:4] == want, f"the JavaScript frames are {order}, not {want} first:\n" +
              hwtest.describe_frames(frames))
        for (name, f), key in zip(names, ["render", "draw", "drawArrow", "renderPage"]):
            check(in_body(f, spinner.lines, key), f"{name} is at {f.get('source_line')}, its body at "
                  f"{spinner.lines[key]}")
        check(report["hangwatch"]["capture"].get("js_frames") == "metadata", f"{report['hangwatch']['capture']}")
        check("TableRenderer.render  at " in text, "the text does not name it:\n" + text)
    finally:
        spinner.kill()


def case_worker_loops():
    """A worker spinning in crunch(), the main thread in TableRenderer.render: each named in its thread.

    Beside two CPU hogs: the main thread's hang comes 50 ms after the
    worker's, while the first report is being made (its first symbol
    lookups load libraries), and must still be captured while it lasts."""
    with hwtest.CpuHogs():
        r = hwtest.run(["--threads", "loops", "--", node(), program("node_names.js"), "worker", "3"], timeout=90)
    try:
        check(r.returncode == 0, r.describe())
        lines = lines_of(r.stdout)
        seen = {}
        for report in r.reports:
            frames = hwtest.frames(report)
            tid = report["hangwatch"]["hung_thread"]["thread_identifier"]
            for name in ("crunch", "TableRenderer.render"):
                i = find(frames, name)
                if i >= 0:
                    check(in_body(frames[i], lines, "crunch" if name == "crunch" else "render"),
                          f"{name} at the wrong line: {frames[i]}")
                    seen.setdefault(name, set()).add(tid)
        check(set(seen) == {"crunch", "TableRenderer.render"}, f"named: {seen}\n" + r.describe())
        check(not (seen["crunch"] & seen["TableRenderer.render"]), f"both in one thread: {seen}")
        check(r.reports[0]["report"]["pid"] not in seen["crunch"], "crunch was in the main thread")
    finally:
        hwtest.cleanup(r)


def case_point_stack():
    """Early sampling of a node: the Point Stack's JavaScript frames are named."""
    r = hwtest.run(["--early-sampling", "--", node(), program("node_names.js"), "main", "3"], timeout=90)
    try:
        check(r.returncode == 0, r.describe())
        check(len(r.reports) >= 1, r.describe())
        ps = r.reports[0]["hangwatch"]["collection"]["main_thread"]
        check(ps.get("state") == "collected", f"main thread: {ps}")
        names = [f.get("symbol_name") for f in ps["backtrace"]["contents"] if f.get("language") == "javascript"]
        check("TableRenderer.render" in names and "renderPage" in names, f"Point Stack's JavaScript: {names}")
        check("early samples of Python and node processes stop the thread" in r.stderr, r.stderr)
        # every code mapping of node is named (V8 maps its builtins a second time, next to its code), its
        # offsets in the file; and each sample's JavaScript frames sit inside node's native stack
        size = os.path.getsize(os.path.realpath(node()))
        samples = ps["samples"]
        for f in hwtest.frames(r.reports[0]) + samples["frames"] + ps["backtrace"]["contents"]:
            if f.get("object_name") == os.path.basename(os.path.realpath(node())) and "object_offset" in f:
                check(0 <= f["object_offset"] < size, f"object_offset {f['object_offset']} beyond node's {size} bytes: {f}")
                check(not re.fullmatch(r"node\S*\+0x[0-9a-f]+", f.get("symbol_name", "")), f"an unnamed node frame: {f}")
        for st in samples["stacks"]:
            at = [(samples["frames"][i].get("language", "native"), samples["frames"][i].get("symbol_name")) for i in st["frames"]]
            start = [k for k, (_, name) in enumerate(at) if name == "_start"]
            js = [k for k, (lang, _) in enumerate(at) if lang == "javascript"]
            check(not start or not js or max(js) < start[0], f"JavaScript frames outward of _start: {at}")
    finally:
        hwtest.cleanup(r)


def case_gc_pause():
    """Two full collections called from compactHeap(): the report and the line say garbage
    collection and its phase, name compactHeap as the culprit, and the pause is one report."""
    r = hwtest.run(["--threshold", "300ms", "--", node(), "--expose-gc", program("node_gc.js"), "pause", "3000000"],
                   timeout=180)
    try:
        check(r.returncode == 0 and "pause done" in r.stdout, r.describe())
        mine = []
        for report in r.reports:
            frames = hwtest.frames(report)
            i = find(frames, "compactHeap")
            if i >= 0 and report["hangwatch"]["hang_type"] == "hang":
                mine.append((report, frames, i))
        check(len(mine) == 1, f"{len(mine)} reports of compactHeap's pause (one is right)\n" + r.describe())
        report, frames, i = mine[0]
        gc = report["hangwatch"].get("gc")
        check(gc is not None and gc["runtime"] == "v8" and
              gc["phase"] in ("mark-compact", "sweeping", "garbage collection"), f"the report's gc: {gc}")
        check(gc["frame"] < i and "Heap::" in gc["function"], f"the collector's outermost frame: {gc} (culprit at {i})")
        check(report["hangwatch"]["hung_thread"]["culprit_frame"] == i,
              f"the culprit is frame {report['hangwatch']['hung_thread'].get('culprit_frame')}, compactHeap is {i}")
        check(re.search(r"in garbage collection( \([a-z -]+\))? under compactHeap \(node_gc\.js:\d+\)", r.stderr),
              "the line does not say it:\n" + r.stderr)
        shown = hwtest.hw("show", r.report_paths[r.reports.index(report)])
        check("in garbage collection: " + gc["phase"] in shown.stdout, shown.stdout)
    finally:
        hwtest.cleanup(r)


def case_alloc_spin():
    """An allocation-heavy 9 s spin in buildRows(): one report, whose culprit is buildRows; and
    20 of 20 `stack` captures of the spinning thread name it, collector or not."""
    r = hwtest.run(["--", node(), program("node_gc.js"), "alloc", "9"], timeout=120)
    try:
        check(r.returncode == 0 and "alloc done" in r.stdout, r.describe())
        check(len(r.reports) == 1, f"{len(r.reports)} reports of one 9 s spin\n" + r.describe())
        frames = hwtest.frames(r.reports[0])
        culprit = r.reports[0]["hangwatch"]["hung_thread"].get("culprit_frame", -1)
        check(culprit >= 0 and frames[culprit].get("symbol_name") == "buildRows",
              "the culprit is not buildRows:\n" + hwtest.describe_frames(frames))
    finally:
        hwtest.cleanup(r)
    proc = subprocess.Popen([node(), program("node_gc.js"), "alloc", "120"], stdout=subprocess.PIPE, text=True)
    d = tempfile.mkdtemp(prefix="hw-it-")
    try:
        check("ready" in proc.stdout.readline(), "node_gc.js did not start")
        path = os.path.join(d, "stack.json")

        def spinning():
            p = hwtest.hw("stack", str(proc.pid), "--json", path)
            return p.returncode == 0 and find(hwtest.frames(hwtest.load_report(path)), "buildRows") >= 0
        hwtest.wait_for(spinning, "the main thread to spin in buildRows", 30)
        in_gc = 0
        for k in range(20):
            p = hwtest.hw("stack", str(proc.pid), "--json", path)
            check(p.returncode == 0, f"stack failed: {p.stderr}")
            report = hwtest.load_report(path)
            frames = hwtest.frames(report)
            check(find(frames, "buildRows") >= 0, f"capture {k + 1} of 20 has no buildRows:\n" +
                  hwtest.describe_frames(frames))
            in_gc += report["hangwatch"].get("gc") is not None
        print(f"20 of 20 captures named buildRows, {in_gc} of them in garbage collection")
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(d, ignore_errors=True)


def case_optimised_line():
    """A loop V8 optimised while it ran: its frame's line is the function's first, and the report,
    `show` and the page say so, never silently; under run and watch alike."""
    for mode in ("run", "watch"):
        d = tempfile.mkdtemp(prefix="hw-it-")
        try:
            if mode == "run":
                r = hwtest.run(["--", node(), program("node_hot.js"), "3"], report_dir=d, timeout=90)
                check(r.returncode == 0 and "hot done" in r.stdout, r.describe())
                out, reports, paths = r.stdout, r.reports, r.report_paths
            else:
                proc = subprocess.Popen([node(), program("node_hot.js"), "5"], stdout=subprocess.PIPE,
                                        text=True)
                first = proc.stdout.readline()
                watcher = subprocess.Popen([hwtest.binary("hangwatch"), "watch", "-q", "-p", str(proc.pid),
                                            "--report-dir", d], stderr=subprocess.PIPE, text=True)
                try:
                    rest, _ = proc.communicate(timeout=60)
                    out = first + rest
                    hwtest.wait_for(lambda: watcher.poll() is not None, "watch to end with its program", 30)
                finally:
                    if watcher.poll() is None:
                        watcher.kill()
                    watcher.communicate()
                check("hot done" in out, f"{mode}: node_hot.js said {out!r}")
                paths = sorted(glob.glob(os.path.join(d, "*.json")))
                reports = [hwtest.load_report(p) for p in paths]
            with open(program("node_hot.js")) as fp:
                first_line = 1 + [k for k, text in enumerate(fp) if text.startswith("function spinHot(")][0]
            check(len(reports) >= 1, f"{mode}: no report")
            frames = hwtest.frames(reports[0])
            i = find(frames, "spinHot")
            check(i >= 0, f"{mode}: spinHot is not in the stack:\n" + hwtest.describe_frames(frames))
            f = frames[i]
            flagged = f.get("source_line_is_function_start") is True
            check(flagged == (f["source_line"] == first_line),
                  f"{mode}: spinHot at line {f['source_line']} (its first is {first_line}), flagged {flagged}")
            check(flagged, f"{mode}: the optimised loop's frame is not marked (line {f['source_line']})")
            shown = hwtest.hw("show", paths[0])
            check(f"node_hot.js:{first_line} (the function's first line: where in it is not known" in shown.stdout,
                  f"{mode}: show does not say it:\n" + shown.stdout)
            page = os.path.join(d, "page.html")
            p = hwtest.hw("html", "-o", page, d)
            check(p.returncode == 0, p.stderr)
            with open(page, encoding="utf-8") as fp:
                data = json.loads(re.search(r'<script type="application/json" id="hw-data">(.*?)</script>',
                                            fp.read(), re.S).group(1))
            stack = data["groups"][0]["detail"]["stack"]
            hot = [s for s in stack if s["name"] == "spinHot"]
            check(hot and hot[0].get("line_is_start") is True, f"{mode}: the page's frame: {hot}")
        finally:
            shutil.rmtree(d, ignore_errors=True)


def case_metadata_off():
    """`stack --js-frames off`: no JavaScript frame, and the report says how to get them."""
    spinner = Spinner()
    try:
        report, _ = stack_of(spinner.proc.pid, "--js-frames", "off")
        frames = hwtest.frames(report)
        check(not [f for f in frames if f.get("language") == "javascript"], hwtest.describe_frames(frames))
        hung = report["crash"]["threads"][report["hangwatch"]["hung_thread"]["report_array_index"]]
        check("--js-frames auto" in hung.get("runtime_frames_error", ""), f"{hung.get('runtime_frames_error')}")
        p = hwtest.hw("stack", str(spinner.proc.pid), "--js-frames", "sometimes")
        check(p.returncode == 2 and "invalid --js-frames 'sometimes'" in p.stderr, p.stderr)
    finally:
        spinner.kill()


if __name__ == "__main__":
    hwtest.main({
        "express_watch": case_express_watch,
        "express_run": case_express_run,
        "stack_names": case_stack_names,
        "worker_loops": case_worker_loops,
        "point_stack": case_point_stack,
        "metadata_off": case_metadata_off,
        "gc_pause": case_gc_pause,
        "optimised_line": case_optimised_line,
        "alloc_spin": case_alloc_spin,
    })
