"""Python and JavaScript frames in reports (docs/runtime-frames.md, docs/report-format.md).

Each case runs a real interpreter under `hangwatch run` and checks that the
hung thread's stack names the user's function with its file and line, in
its place among the native frames, as a Python or Node developer would
look for it.  Usage: test_runtime_frames.py BIN_DIR SOURCE_DIR CASE
"""
import glob
import os
import re
import shutil
import tempfile
import subprocess
import sys

import hwtest
from hwtest import check

SKIP = 77
DEBIAN_PYTHON = "/usr/bin/python3"


def program(name):
    return os.path.join(hwtest.SOURCE_DIR, "tests", "programs", name)


def other_python311():
    """A CPython 3.11 that is not Debian's (a pyenv or source build), or None."""
    candidates = [shutil.which("python3"), shutil.which("python3.11")]
    candidates += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.11*/bin/python3.11")))
    candidates += sorted(glob.glob("/usr/local/bin/python3.11")) + sorted(glob.glob("/opt/*/bin/python3.11"))
    for c in candidates:
        if not c or not os.access(c, os.X_OK):
            continue
        real = os.path.realpath(c)
        if real.startswith("/usr/bin/"):
            continue
        out = subprocess.run([c, "-c", "import sys; print(sys.version_info[:2] == (3, 11))"], capture_output=True,
                             text=True)
        if out.stdout.strip() == "True":
            return c
    return None


def lines(run):
    """The 'line MARKER N' lines python_frames.py prints."""
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^line (\S+) (\d+)$", run.stdout, re.M)}


def find(frames, name, language="python"):
    for i, f in enumerate(frames):
        if f.get("language") == language and f.get("symbol_name") == name:
            return i
    return -1


describe = hwtest.describe_frames


def run_python(python, mode, options=()):
    r = hwtest.run(list(options) + ["--", python, program("python_frames.py"), mode])
    check(r.returncode == 0 and f"{mode} done" in r.stdout, r.describe())
    return r


def one_hang_report(r):
    hangs = [rep for rep in r.reports if rep["hangwatch"]["hang_type"] == "hang"]
    check(len(hangs) >= 1, "no hang report\n" + r.describe())
    return hangs[0]


def check_sleep_report(r):
    at = lines(r)
    report = one_hang_report(r)
    frames = hwtest.frames(report)
    i = find(frames, "handle_request_synchronously")
    check(i >= 0, "handle_request_synchronously is not in the hung stack:\n" + describe(frames))
    f = frames[i]
    check(f["source_file"].endswith("python_frames.py") and f["source_line"] == at["sleep-call"],
          f"wrong place for handle_request_synchronously: {f}")
    # below sleep: the native sleep is on top; above the event loop's frames
    check(frames[0].get("language") is None and "sleep" in frames[0].get("symbol_name", ""),
          "the native sleep is not the innermost frame:\n" + describe(frames))
    serve = find(frames, "serve")
    check(serve > i and frames[serve]["source_line"] == at["serve-call"], "serve() not below it:\n" + describe(frames))
    loop = find(frames, "BaseEventLoop._run_once")
    check(loop > serve, "the event loop's own frames are not below the coroutine:\n" + describe(frames))
    # Python frames sit directly above the native evaluation call that runs them
    for k, fr in enumerate(frames):
        if fr.get("language") == "python":
            nxt = frames[k + 1] if k + 1 < len(frames) else None
            check(nxt is None or nxt.get("language") == "python" or
                  nxt.get("symbol_name", "").startswith("_PyEval_EvalFrameDefault"),
                  f"frame #{k} is not followed by Python or the eval loop:\n" + describe(frames))
    line = f"handle_request_synchronously (python_frames.py:{at['sleep-call']})"
    check(line in r.stderr, f"the stderr line does not name {line}:\n{r.stderr}")
    return report


def case_py_sleep_debian():
    """/usr/bin/python3: a coroutine calls a function that sleeps 3 s."""
    r = run_python(DEBIAN_PYTHON, "sleep")
    try:
        check_sleep_report(r)
        shown = subprocess.run([hwtest.binary("hangwatch"), "show", r.report_paths[0]], capture_output=True, text=True)
        check(re.search(r"py\s+handle_request_synchronously\s+at \S*python_frames\.py:\d+", shown.stdout),
              "show does not print the Python frame distinctly:\n" + shown.stdout)
    finally:
        hwtest.cleanup(r)


def case_py_sleep_other_build():
    """Another CPython 3.11 build (pyenv, source): the same report."""
    python = other_python311()
    if python is None:
        print("SKIP: no CPython 3.11 other than Debian's is installed")
        sys.exit(SKIP)
    r = run_python(python, "sleep")
    try:
        check_sleep_report(r)
    finally:
        hwtest.cleanup(r)


def case_py_extension_spin():
    """A Python function spinning in OpenSSL's PBKDF2: native frames on top, then the Python caller."""
    r = run_python(DEBIAN_PYTHON, "pbkdf2")
    try:
        at = lines(r)
        frames = hwtest.frames(one_hang_report(r))
        i = find(frames, "derive_key_slowly")
        check(i > 0 and frames[i]["source_line"] == at["pbkdf2-call"],
              "derive_key_slowly at its pbkdf2 call is not in the stack:\n" + describe(frames))
        native_top = frames[:i]
        check(all(f.get("language") is None for f in native_top), "Python frames above the extension")
        check(any("libcrypto" in f.get("object_name", "") for f in native_top),
              "OpenSSL's frames are not on top:\n" + describe(frames))
        check(any(f.get("symbol_name") == "pbkdf2_hmac" or "_hashlib" in f.get("object_name", "")
                  for f in native_top), "the extension's own frame is missing:\n" + describe(frames))
    finally:
        hwtest.cleanup(r)


def case_py_threads():
    """Three threads waiting in three functions: each scene thread has its own."""
    r = run_python(DEBIAN_PYTHON, "threads")
    try:
        at = lines(r)
        report = one_hang_report(r)
        threads = report["crash"]["threads"]
        for name, marker in (("thread_alpha", "alpha-wait"), ("thread_beta", "beta-wait"),
                             ("thread_gamma", "gamma-wait")):
            owners = [t for t in threads if find(t["backtrace"]["contents"], name) >= 0]
            check(len(owners) == 1, f"{name} is in {len(owners)} threads")
            t = owners[0]
            check(not t["crashed"], f"{name} is on the hung thread")
            f = t["backtrace"]["contents"][find(t["backtrace"]["contents"], name)]
            check(f["source_line"] == at[marker], f"{name} at line {f['source_line']}, not {at[marker]}")
            check(find(t["backtrace"]["contents"], "Thread.run") >= 0, f"{name}'s thread has no Thread.run")
        check(find(hwtest.frames(report), "handle_request_synchronously") >= 0, "the hung thread lost its frames")
        shown = subprocess.run([hwtest.binary("hangwatch"), "show", r.report_paths[0]], capture_output=True, text=True)
        others = [line for line in shown.stdout.split("other threads:")[-1].splitlines() if ", py " in line]
        check(len(others) >= 3, "show's other-thread lines do not name their Python frames:\n" + shown.stdout)
    finally:
        hwtest.cleanup(r)


def case_py_glib():
    """A PyGObject main loop: the blocking callback is named."""
    r = run_python(DEBIAN_PYTHON, "glib")
    try:
        at = lines(r)
        frames = hwtest.frames(one_hang_report(r))
        i = find(frames, "glib_main.<locals>.on_timeout_blocking")
        check(i >= 0 and frames[i]["source_line"] == at["glib-sleep"],
              "the GLib callback is not named:\n" + describe(frames))
        check(any(f.get("symbol_name") == "g_main_loop_run" for f in frames[i:]),
              "GLib's loop is not below the callback:\n" + describe(frames))
    finally:
        hwtest.cleanup(r)


def case_py_point_stack():
    """Early sampling of a pure-Python spin: the Point Stack's top is the Python function."""
    r = run_python(DEBIAN_PYTHON, "spin", ["--early-sampling"])
    try:
        report = one_hang_report(r)
        main = report["hangwatch"]["collection"]["main_thread"]
        check(main["state"] == "collected", f"no Point Stack: {main.get('state')} {main.get('reason')}")
        ps = main["backtrace"]["contents"]
        python = [f for f in ps if f.get("language") == "python"]
        check(python and python[0]["symbol_name"] == "spin_in_python",
              "the Point Stack's innermost Python frame is not spin_in_python:\n" + describe(ps))
        check(all(f.get("repeat_count", 0) >= 1 for f in python), "Python frames without repeat counts")
        # counts are per instruction, as Matrix's are per address: the spinning
        # frame moves, its caller's call site stays
        serve = [f for f in python if f["symbol_name"] == "serve"]
        check(serve and serve[0]["repeat_count"] >= 2, "serve()'s call site not counted over samples:\n" + describe(ps))
        check(main["top_repeat_count"] >= 1, f"the samples' tops never repeated: {main['top_repeat_count']}")
        # every sample (for hangwatch html's flame graph) names its Python frames too
        samples = main["samples"]
        named = [f.get("symbol_name") for f in samples["frames"] if f.get("language") == "python"]
        check("spin_in_python" in named and "serve" in named, f"samples' Python frames: {named}")
        through = sum(st["count"] for st in samples["stacks"]
                      if any(samples["frames"][i].get("symbol_name") == "spin_in_python" for i in st["frames"]))
        check(through >= main["sample_count"] - 1, f"{through} of {main['sample_count']} samples in spin_in_python")
    finally:
        hwtest.cleanup(r)


def case_py_grouping():
    """Two runs of the same Python hang share a grouping key; another hang does not."""
    keys = []
    for mode in ("sleep", "sleep", "pbkdf2"):
        r = run_python(DEBIAN_PYTHON, mode)
        try:
            keys.append(one_hang_report(r)["hangwatch"]["grouping_key"])
        finally:
            hwtest.cleanup(r)
    check(keys[0] == keys[1], f"the same hang grouped apart: {keys}")
    check(keys[0] != keys[2], f"two different hangs grouped together: {keys}")


def run_corrupt(mode):
    layout = os.path.join(hwtest.SOURCE_DIR, "src", "agent", "symbols", "python_layouts.h")
    check(os.path.exists(layout), f"{layout} is missing")
    r = hwtest.run(["--", DEBIAN_PYTHON, program("python_corrupt.py"), layout, mode])
    check(r.returncode == 0 and "python_corrupt: done" in r.stdout, r.describe())
    report = one_hang_report(r)
    hung = report["crash"]["threads"][report["hangwatch"]["hung_thread"]["report_array_index"]]
    return r, hung


def case_py_corrupt_loop():
    """A frame record that names itself as its caller: one frame, and the reason."""
    r, hung = run_corrupt("loop")
    try:
        frames = hung["backtrace"]["contents"]
        check(find(frames, "hang_with_broken_frame") >= 0, "the hung function is not named:\n" + describe(frames))
        check(sum(1 for f in frames if f.get("language") == "python") == 1, "frames beyond the loop:\n" +
              describe(frames))
        check(hung.get("runtime_frames_error") == "the frame chain loops", f"reason: {hung.get('runtime_frames_error')}")
    finally:
        hwtest.cleanup(r)


def case_py_corrupt_garbage():
    """A caller pointer into unmapped memory: a partial stack, and the reason."""
    r, hung = run_corrupt("garbage")
    try:
        frames = hung["backtrace"]["contents"]
        check(find(frames, "hang_with_broken_frame") >= 0, "the hung function is not named:\n" + describe(frames))
        check("could not be read" in hung.get("runtime_frames_error", ""), f"reason: {hung.get('runtime_frames_error')}")
    finally:
        hwtest.cleanup(r)


def case_py_corrupt_code():
    """A code object pointer to an object that is not code: that frame is "?", the rest are named."""
    r, hung = run_corrupt("code")
    try:
        frames = hung["backtrace"]["contents"]
        names = [f["symbol_name"] for f in frames if f.get("language") == "python"]
        check(names[:3] == ["hang_with_broken_frame", "?", "Handle._run"], f"frames: {names}")
        check("code object" in hung.get("runtime_frames_error", ""), f"reason: {hung.get('runtime_frames_error')}")
    finally:
        hwtest.cleanup(r)


def case_py_unsupported_version():
    """An interpreter of a version whose frames are not read: the native report says why."""
    r = hwtest.run(["--", hwtest.binary("python3.14-standin")])
    try:
        check(r.returncode == 0 and "python_standin: done" in r.stdout, r.describe())
        report = one_hang_report(r)
        hung = report["crash"]["threads"][report["hangwatch"]["hung_thread"]["report_array_index"]]
        frames = hung["backtrace"]["contents"]
        check(any(f.get("symbol_name") == "standin_blocking_callback" for f in frames),
              "the native stack is missing:\n" + describe(frames))
        check(hung.get("runtime_frames_error", "").startswith(
            "Python 3.14.0: frames not read (hangwatch reads CPython 3.8 to 3.13"),
              f"reason: {hung.get('runtime_frames_error')}")
    finally:
        hwtest.cleanup(r)


def node():
    path = shutil.which("node") or shutil.which("nodejs")
    if path is None:
        print("SKIP: node is not installed (scripts/ensure-deps.sh test installs it)")
        sys.exit(SKIP)
    return path


def run_node(options=(), env=None):
    r = hwtest.run(list(options) + ["--", node(), program("node_frames.js")], env=env)
    check(r.returncode == 0 and "rendered some cells" in r.stdout, r.describe())
    r.node_pid = int(re.search(r"^pid (\d+)$", r.stdout, re.M).group(1))
    r.node_options = re.search(r"^NODE_OPTIONS=(.*)$", r.stdout, re.M).group(1)
    return r


def perf_map(pid):
    return f"/tmp/perf-{pid}.map"


def check_render_frame(r, frames, at):
    """renderHugeTable named in the hung stack with its file, a line in its body, its caller below."""
    i = find(frames, "renderHugeTable", "javascript")
    check(i >= 0, "renderHugeTable is not in the hung stack:\n" + describe(frames))
    f = frames[i]
    # Its start line from a perf map; the statement it is at from V8's records.
    check(f["source_file"].endswith("node_frames.js") and at["renderHugeTable"] <= f["source_line"] <=
          at["renderHugeTable"] + 7, f"wrong place for renderHugeTable: {f}")
    # V8 calls a timer's callback as a method of its Timeout, and names it so.
    caller = max(find(frames, "onRenderTimer", "javascript"), find(frames, "Timeout.onRenderTimer", "javascript"))
    check(caller > i, "its caller is not below it:\n" + describe(frames))
    check(any(fr.get("symbol_name", "").startswith("uv_run") for fr in frames[i:]),
          "libuv's loop is not below the JavaScript frames:\n" + describe(frames))
    check(re.search(r"renderHugeTable \(node_frames\.js:\d+\)", r.stderr),
          "the stderr line does not name renderHugeTable:\n" + r.stderr)


def case_node_named():
    """By default, a node with V8's metadata: named from V8's own records, no flag, no map."""
    r = run_node()
    try:
        report = one_hang_report(r)
        check_render_frame(r, hwtest.frames(report), lines(r))
        check(report["hangwatch"]["capture"].get("js_frames") == "metadata",
              f"capture says {report['hangwatch']['capture']}")
        check(r.node_options == "", f"NODE_OPTIONS was {r.node_options!r}")
        check(not os.path.exists(perf_map(r.node_pid)), f"{perf_map(r.node_pid)} was written")
    finally:
        hwtest.cleanup(r)


def case_node_perf_map():
    """--js-frames perf-map: the flags, a map that names the frames, removed after."""
    r = run_node(["--js-frames", "perf-map"])
    try:
        report = one_hang_report(r)
        check_render_frame(r, hwtest.frames(report), lines(r))
        check(report["hangwatch"]["capture"].get("js_frames") == "perf-map",
              f"capture says {report['hangwatch']['capture']}")
        check("--perf-basic-prof-only-functions" in r.node_options, f"NODE_OPTIONS was {r.node_options!r}")
        check(not os.path.exists(perf_map(r.node_pid)), f"{perf_map(r.node_pid)} was left behind")
    finally:
        hwtest.cleanup(r)


def case_node_without_flags():
    """--js-frames off (and its old spelling --no-js-frames): NODE_OPTIONS untouched, no map, no
    names, and the report says how to get them."""
    for option in (["--js-frames", "off"], ["--no-js-frames"]):
        r = run_node(option, env={"NODE_OPTIONS": "--max-old-space-size=200"})
        try:
            check(r.node_options == "--max-old-space-size=200", f"NODE_OPTIONS was changed: {r.node_options!r}")
            check(not os.path.exists(perf_map(r.node_pid)), "a perf map was written")
            report = one_hang_report(r)
            hung = report["crash"]["threads"][report["hangwatch"]["hung_thread"]["report_array_index"]]
            check(find(hung["backtrace"]["contents"], "renderHugeTable", "javascript") < 0, "named without a map?")
            check("--js-frames auto" in hung.get("runtime_frames_error", ""),
                  f"the report does not say how to enable names: {hung.get('runtime_frames_error')}")
            check("js_frames" not in report["hangwatch"]["capture"], "capture names a source of names")
        finally:
            hwtest.cleanup(r)


def case_node_without_metadata():
    """A "node" without V8's metadata (another program under that name),
    with --js-frames metadata (no perf map asked for): said once on stderr,
    however many captures follow."""
    with tempfile.TemporaryDirectory() as d:
        fake = os.path.join(d, "node")
        shutil.copy(hwtest.binary("loop-scenarios"), fake)
        r = hwtest.run(["--js-frames", "metadata", "--early-sampling", "--", fake, "cpuspin", "3"])
        try:
            check(r.returncode == 0 and len(r.reports) >= 1, r.describe())
            said = r.stderr.count("JavaScript frames will not be named: it has no V8 postmortem metadata")
            check(said == 1, f"said {said} times:\n{r.stderr}")
        finally:
            hwtest.cleanup(r)


def case_node_keeps_user_options():
    """The user's NODE_OPTIONS are kept as they are; under perf-map the flags are added to them; a
    map the user asked for is the user's and stays."""
    r = run_node(env={"NODE_OPTIONS": "--max-old-space-size=200"})
    try:
        check(r.node_options == "--max-old-space-size=200", f"NODE_OPTIONS: {r.node_options!r}")
    finally:
        hwtest.cleanup(r)
    r = run_node(["--js-frames", "perf-map"], env={"NODE_OPTIONS": "--max-old-space-size=200"})
    try:
        check(r.node_options.startswith("--max-old-space-size=200 ") and "--perf-basic-prof-only-functions" in
              r.node_options, f"NODE_OPTIONS: {r.node_options!r}")
    finally:
        hwtest.cleanup(r)
    # The flags hangwatch's notice tells users to set: with the map's alone, a function V8 had not
    # compiled yet when the capture came (a busy machine gives node little CPU time) runs in the
    # interpreter's shared code, which no map line names.
    users = "--perf-basic-prof-only-functions --interpreted-frames-native-stack"
    r = run_node(["--js-frames", "perf-map"], env={"NODE_OPTIONS": users})
    try:
        check(r.node_options == users, f"NODE_OPTIONS: {r.node_options!r}")
        check(os.path.exists(perf_map(r.node_pid)), "the user's own perf map was removed")
        frames = hwtest.frames(one_hang_report(r))
        check(find(frames, "renderHugeTable", "javascript") >= 0, "not named from the user's map:\n" + describe(frames))
    finally:
        if os.path.exists(perf_map(r.node_pid)):
            os.unlink(perf_map(r.node_pid))
        hwtest.cleanup(r)


if __name__ == "__main__":
    hwtest.main({
        "py_sleep_debian": case_py_sleep_debian,
        "py_sleep_other_build": case_py_sleep_other_build,
        "py_extension_spin": case_py_extension_spin,
        "py_threads": case_py_threads,
        "py_glib": case_py_glib,
        "py_point_stack": case_py_point_stack,
        "py_grouping": case_py_grouping,
        "py_corrupt_loop": case_py_corrupt_loop,
        "py_corrupt_garbage": case_py_corrupt_garbage,
        "py_corrupt_code": case_py_corrupt_code,
        "py_unsupported_version": case_py_unsupported_version,
        "node_named": case_node_named,
        "node_perf_map": case_node_perf_map,
        "node_without_metadata": case_node_without_metadata,
        "node_without_flags": case_node_without_flags,
        "node_keeps_user_options": case_node_keeps_user_options,
    })
