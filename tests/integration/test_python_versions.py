"""Python frames on every CPython the machine has (docs/runtime-frames.md).

Each case is SCENARIO_VERSION: the scenario of tests/programs/python_versions.py
run by that interpreter under hangwatch, as a Python developer would, and
checked for the user's functions with their files and lines.  VERSION is
3_8 ... 3_13 (pyenv's), debian (/usr/bin/python3) or 3_7 (not read: it must
say so).  The `stack` and `watch` scenarios take a running interpreter
instead (`hangwatch stack PID`, `hangwatch watch -p PID`).  A version this
machine does not have is skipped by name (exit 77), never passed.

  test_python_versions.py BIN_DIR SOURCE_DIR CASE
"""
import os
import re
import json
import subprocess
import sys
import tempfile

import hwtest
from hwtest import check

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import pythons  # noqa: E402 (tests/pythons.py: the interpreters the tests run)


def interpreter(version):
    """The interpreter of `version` ("3.9", "debian"), or None (said)."""
    path = pythons.find(version)
    if path is None:
        print(f"Python {version}: not on this machine")
    return path


def program():
    return os.path.join(hwtest.SOURCE_DIR, "tests", "programs", "python_versions.py")


def lines(run):
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^line (\S+) (\d+)$", run.stdout, re.M)}


def find(frames, name, language="python"):
    for i, f in enumerate(frames):
        if f.get("language", "native") == language and f.get("symbol_name", "").split(".")[-1] == name:
            return i
    return -1


describe = hwtest.describe_frames


def run(python, mode, options=()):
    r = hwtest.run(["--threshold", "1s"] + list(options) + ["--", python, program(), mode], timeout=90)
    check(r.returncode == 0 and f"{mode} done" in r.stdout, r.describe())
    return r


def first_hang(r):
    hangs = [rep for rep in r.reports if rep["hangwatch"]["hang_type"] == "hang"]
    check(len(hangs) >= 1, "no hang report\n" + r.describe())
    return hangs[0]


def check_python_frame(frames, name, line, where):
    i = find(frames, name)
    check(i >= 0, f"{where}: {name} is not among the frames:\n{describe(frames)}")
    f = frames[i]
    check(os.path.basename(f.get("source_file", "")) == "python_versions.py" and f.get("source_line") == line,
          f"{where}: {name} at {f.get('source_file')}:{f.get('source_line')}, expected line {line}")
    return i


# ---- the scenarios ----

def case_sleep(python):
    """An asyncio handler calls slow_handler(), which sleeps 3 s."""
    r = run(python, "sleep")
    try:
        at = lines(r)
        rep = first_hang(r)
        frames = hwtest.frames(rep)
        s = check_python_frame(frames, "slow_handler", at["slow-sleep"], "the hung thread")
        h = check_python_frame(frames, "handle", at["handle-call"], "the hung thread")
        check(s < h, f"slow_handler must be inside handle:\n{describe(frames)}")
        native = [i for i, f in enumerate(frames) if f.get("symbol_name", "").startswith("_PyEval_EvalFrame")]
        check(native and native[0] > s, f"the Python frames must be above the evaluation loop:\n{describe(frames)}")
        check("slow_handler (python_versions.py:" in r.stderr, r.stderr)
        check_culprit(rep, frames, s, r)
    finally:
        hwtest.cleanup(r)


def check_culprit(rep, frames, index, r):
    """The culprit is frames[index], the user's function; the frames of the
    standard library and the interpreter are not the program's own, and
    hangwatch's own (the preload's wrappers under 3.8-3.10's select) are
    never named on the stderr line."""
    culprit = rep["hangwatch"]["hung_thread"].get("culprit_frame")
    check(culprit == index, f"culprit_frame {culprit}, expected {index}:\n{describe(frames)}")
    check(frames[index]["in_app"] is True and frames[index]["origin"] == "app", str(frames[index]))
    for f in frames:
        if f.get("language") == "python" and "/lib/python3" in f.get("source_file", ""):
            check(f["in_app"] is False and f["origin"] == "stdlib", f"a standard library frame: {f}")
        if f.get("object_name", "").startswith("python3") or f.get("object_name", "").startswith("libpython3"):
            check(f["in_app"] is False and f["origin"] == "runtime", f"an interpreter frame: {f}")
        if f.get("object_name", "").startswith("libhangwatch"):
            check(f["in_app"] is False and f["origin"] == "hangwatch", f"hangwatch's own frame: {f}")
    line = [ln for ln in r.stderr.splitlines() if ln.startswith("hangwatch: hang in")][0]
    check("libhangwatch" not in line and "preload.c" not in line, f"hangwatch's own frame on the line:\n{line}")


def case_spin(python):
    """A pure-Python spin of 3 s in spin_handler(): one report (its culprit
    does not move, whatever the interpreter runs under it), and early
    sampling's Point Stack names spin_handler."""
    r = run(python, "spin", ["--early-sampling", "--sample-interval", "20ms"])
    try:
        rep = first_hang(r)
        frames = hwtest.frames(rep)
        check(find(frames, "spin_handler") >= 0, f"spin_handler not in the hung stack:\n{describe(frames)}")
        check_culprit(rep, frames, find(frames, "spin_handler"), r)
        hangs = [p for p in r.reports if p["hangwatch"]["hang_type"] == "hang"]
        check(len(hangs) == 1, f"{len(hangs)} reports of one spin:\n" + r.stderr)
        check(r.stderr.count("early samples of Python and node processes stop the thread") == 1,
              "the ptrace samples of a Python process are said once:\n" + r.stderr)
        point = rep["hangwatch"]["collection"]["main_thread"]
        check(point.get("state") == "collected", f"early sampling: {point.get('state')} {point.get('reason')}")
        pframes = point["backtrace"]["contents"]
        check(find(pframes, "spin_handler") >= 0, f"spin_handler not in the Point Stack:\n{describe(pframes)}")
    finally:
        hwtest.cleanup(r)


def case_gil(python):
    """The loop waits for the GIL that cruncher holds in one C call: the report names the holder."""
    r = run(python, "gil")
    try:
        at = lines(r)
        rep = first_hang(r)
        holder = rep["hangwatch"].get("gil_holder")
        check(holder is not None, "no gil_holder in the first hang's report (its stack, then the run):\n"
              + describe(hwtest.frames(rep)) + "\n" + r.describe())
        check(holder["name"] != "" and holder["thread_identifier"] != rep["report"]["pid"], f"holder {holder}")
        check(holder.get("python_name") == "cruncher", f"the holder's Python name: {holder}")
        hframes = hwtest.frames(rep, holder["report_array_index"])
        check_python_frame(hframes, "crunch_numbers", at["crunch-call"], "the GIL's holder")
        check(f"waiting for the GIL held by thread {holder['thread_identifier']} (crunch_numbers at "
              f"python_versions.py:{at['crunch-call']})" in r.stderr, r.stderr)
        show = hwtest.hw("show", r.report_paths[r.reports.index(rep)])  # a launch hang may come first
        check(f"waiting for the GIL held by thread {holder['thread_identifier']} ({holder['name']}, Python's cruncher)"
              in show.stdout, show.stdout)
        # The hang is where the holder is: stats labels its group so.
        stats = hwtest.hw("stats", "--json", r.report_dir)
        check(stats.returncode == 0, stats.stderr)
        # (a busy machine may have made the interpreter's start a launch hang of its own: a group apart)
        key = rep["hangwatch"]["grouping_key"]
        groups = [g for g in json.loads(stats.stdout)["groups"] if g["grouping_key"] == key]
        check(len(groups) == 1 and groups[0]["culprit"]["function"] == "crunch_numbers",
              f"the GIL hang's group is not labelled by its holder: {[g['culprit'] for g in groups]}")
        # and so does the page, with the holder's stack beside the waiter's
        page = os.path.join(r.report_dir, "gil.html")
        p = hwtest.hw("html", "-o", page, r.report_dir)
        check(p.returncode == 0, p.stderr)
        with open(page, encoding="utf-8") as f:
            m = re.search(r'<script type="application/json" id="hw-data">(.*?)</script>', f.read(), re.S)
        check(m is not None, "the page has no data")
        group = [g for g in json.loads(m.group(1))["groups"] if g["key"] == key][0]
        check(group["culprit"]["name"].split(".")[-1] == "crunch_numbers", f"the page's label: {group['culprit']}")
        hd = group["detail"].get("holder")
        check(hd is not None and hd["holds"] == "the GIL" and hd.get("python_name") == "cruncher",
              f"the page's holder: {hd}")
        check(hd["culprit"] >= 0 and hd["stack"][hd["culprit"]]["name"].split(".")[-1] == "crunch_numbers",
              f"the holder's culprit on the page: {hd['culprit']} of {[f['name'] for f in hd['stack']]}")
        if python == pythons.find("debian"):
            import browser
            with browser.Browser() as b:
                b.open("file://" + os.path.abspath(page))
                drawn = b.evaluate("(() => { const h = document.querySelector('.stack-pair .holder'); return h ? "
                                   "[h.querySelector('h3').textContent, [...h.querySelectorAll('li.culprit')]"
                                   ".map(li => li.textContent)] : null; })()")
                check(drawn and "cruncher" in drawn[0] and len(drawn[1]) == 1 and "crunch_numbers" in drawn[1][0],
                      f"the holder's stack as drawn: {drawn}")
    finally:
        hwtest.cleanup(r)


def check_workers(report, at, where):
    """The three named threads, each with its Python name and its function."""
    threads = report["crash"]["threads"]
    for name, func, marker in (("worker_alpha", "alpha_sleeps", "alpha-wait"),
                               ("worker_beta", "beta_sleeps", "beta-wait"),
                               ("worker_gamma", "gamma_sleeps", "gamma-wait")):
        mine = [t for t in threads if t.get("python_name") == name]
        check(len(mine) == 1, f"{where}: no thread named {name}: {[t.get('python_name') for t in threads]}")
        frames = mine[0]["backtrace"]["contents"]
        check_python_frame(frames, func, at[marker], f"{where}: {name}")


def case_names(python):
    """Three threads named by threading.Thread(name=...) while the loop hangs."""
    r = run(python, "names")
    try:
        at = lines(r)
        rep = first_hang(r)
        check_python_frame(hwtest.frames(rep), "main_hangs", at["main-sleep"], "the hung thread")
        check_workers(rep, at, "the report")
    finally:
        hwtest.cleanup(r)


def case_stack(python):
    """`hangwatch stack PID` names the Python functions of every thread."""
    p = subprocess.Popen([python, program(), "idle"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    out = []
    try:
        for line in p.stdout:
            out.append(line)
            if line.strip() == "ready":
                break
        at = {m.group(1): int(m.group(2)) for m in re.finditer(r"^line (\S+) (\d+)$", "".join(out), re.M)}
        json_path = os.path.join(tempfile.mkdtemp(prefix="hw-stack-"), "stack.json")
        s = hwtest.hw("stack", str(p.pid), "--json", json_path)
        check(s.returncode == 0, f"stack: {s.returncode}\n{s.stdout}\n{s.stderr}")
        rep = hwtest.load_report(json_path)
        check_workers(rep, at, "hangwatch stack")
        for func in ("alpha_sleeps", "beta_sleeps", "gamma_sleeps"):
            check(func in s.stdout, f"{func} not printed:\n{s.stdout}")
    finally:
        p.stdin.close()
        p.wait(timeout=30)


def case_watch(python):
    """`hangwatch watch -p` attached to a running interpreter names slow_handler."""
    if os.geteuid() != 0 or not os.path.exists("/sys/kernel/btf/vmlinux"):
        print("SKIP: watch -p needs root and a kernel with BTF")
        return hwtest.SKIP
    p = subprocess.Popen([python, program(), "watch"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    watcher = None
    try:
        out = []
        for line in p.stdout:
            out.append(line)
            if line.strip() == "ready":
                break
        at = {m.group(1): int(m.group(2)) for m in re.finditer(r"^line (\S+) (\d+)$", "".join(out), re.M)}
        report_dir = tempfile.mkdtemp(prefix="hw-it-")
        os.rmdir(report_dir)
        watcher = subprocess.Popen([hwtest.binary("hangwatch"), "watch", "--threshold", "1s", "--report-dir",
                                    report_dir, "-p", str(p.pid)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True)
        first = watcher.stderr.readline()
        check(f"watching pid {p.pid}" in first, f"watch did not attach: {first!r}")
        p.stdin.write("go\n")
        p.stdin.flush()
        rest, err = p.communicate(timeout=60)
        check(p.returncode == 0 and "watch done" in rest, f"the program: exit {p.returncode}\n{rest}")
        wout, werr = watcher.communicate(timeout=60)
        r = hwtest.Run(watcher.returncode, wout, first + werr, report_dir, 0)
        try:
            check(r.returncode == 0, "watch did not exit 0 after the program ended\n" + r.describe())
            rep = first_hang(r)
            frames = hwtest.frames(rep)
            check_python_frame(frames, "slow_handler", at["slow-sleep"], "the hung thread")
            check_python_frame(frames, "watched", at["watch-call"], "the hung thread")
            check("slow_handler (python_versions.py:" in r.stderr, r.stderr)
        finally:
            hwtest.cleanup(r)
    finally:
        for proc in (p, watcher):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()


def case_not_read(python):
    """A version whose frames are not read says so, with its version; stats calls no _start the culprit."""
    r = run(python, "sleep")
    try:
        version = re.search(r"^python (\d+\.\d+)", r.stdout, re.M).group(1)
        check(re.search(rf"Python {re.escape(version)}[.0-9]*: frames not read", r.stderr), r.stderr)
        rep = first_hang(r)
        thread = rep["crash"]["threads"][rep["hangwatch"]["hung_thread"]["report_array_index"]]
        note = thread.get("runtime_frames_error", "")
        check(version in note and "not read" in note, f"runtime_frames_error {note!r}")
        stats = hwtest.hw("stats", "--json", r.report_dir)
        check(stats.returncode == 0, stats.stderr)
        groups = json.loads(stats.stdout)["groups"]
        culprits = [g.get("culprit", {}).get("function") for g in groups]
        check(culprits and all(c not in (None, "_start", "main") for c in culprits), f"culprits {culprits}")
    finally:
        hwtest.cleanup(r)


def case_select_idle(python):
    """A hand-written select loop that goes idle at any turn, whether before or after the
    interpreter specialized its call into select.select (3.11+: the select set's C frame moves up
    then), is idle: no hang, in each of fifteen children idle at turns 2 to 16."""
    r = run(python, "selectidle")
    children = {int(pid): int(k) for k, pid in re.findall(r"^child (\d+) (\d+)$", r.stdout, re.M)}
    idled = set(map(int, re.findall(r"^idle (\d+)$", r.stdout, re.M)))
    turned = set(map(int, re.findall(r"^turned (\d+)$", r.stdout, re.M)))
    check(sorted(children.values()) == list(range(2, 17)) and idled == turned == set(range(2, 17)), r.describe())

    def starved_then_gone(rep):
        # A child the machine starved of a CPU in its shutdown past the threshold, gone before its
        # stack could be taken (the agent tells a shutdown by its stack): the kernel's figures say
        # starved.  An idle loop taken for a busy one would be alive and asleep in select.
        t = rep["hangwatch"].get("time") or {}
        items = rep["hangwatch"]["collection"]["scene_threads"]["items"]
        gone = rep["hangwatch"].get("capture", {}).get("process_exited") is True or any(
            i["is_hung_thread"] and i["status"] == "exited" for i in items)
        return gone and "window_us" in t and t.get("cause") == "starved" == hwtest.cause_by_rule(t)

    hangs = [rep for rep in r.reports if rep["hangwatch"]["hang_type"] == "hang" and not starved_then_gone(rep)]
    check(hangs == [], "idle select loops were reported, idle at turns " +
          str(sorted(children.get(rep["report"]["pid"], -1) for rep in hangs)) + ":\n" + r.describe())


SCENARIOS = {"sleep": case_sleep, "spin": case_spin, "gil": case_gil, "names": case_names, "stack": case_stack,
             "watch": case_watch, "selectidle": case_select_idle}
READ = ("3.8", "3.9", "3.10", "3.11", "3.12", "3.13", "debian")
NOT_READ = ("3.7",)


def with_interpreter(scenario, version):
    def case():
        python = interpreter(version)
        if python is None:
            return hwtest.SKIP
        return scenario(python)
    return case


CASES = {f"{name}_{v.replace('.', '_')}": with_interpreter(f, v) for name, f in SCENARIOS.items() for v in READ}
CASES.update({f"notread_{v.replace('.', '_')}": with_interpreter(case_not_read, v) for v in NOT_READ})

if __name__ == "__main__":
    hwtest.main(CASES)
