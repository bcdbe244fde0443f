"""test_api - the C library as a user gets it: installed with `cmake
--install` into a fresh prefix, a program built only against the installed
header and pkg-config file, reporting its own loop's six activities."""
import os
import re
import shutil
import subprocess
import tempfile

import hwtest
from hwtest import check, frames, symbols

BUILD_DIR = None


def install_prefix():
    prefix = tempfile.mkdtemp(prefix="hw-install-")
    p = subprocess.run(["cmake", "--install", BUILD_DIR, "--prefix", prefix], capture_output=True, text=True)
    check(p.returncode == 0, "cmake --install failed:\n" + p.stdout + p.stderr)
    return prefix


def build_against(prefix, source, output, package="hangwatch"):
    env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(prefix, "lib", "pkgconfig"))
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", package], capture_output=True, text=True, env=env)
    check(flags.returncode == 0, "pkg-config does not know hangwatch:\n" + flags.stderr)
    cc = os.environ.get("HW_TEST_CC") or "cc"
    extra = os.environ.get("HW_TEST_CFLAGS", "").split()  # a sanitized build's library needs them
    cmd = ([cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-g", "-O2", "-fno-optimize-sibling-calls", source,
            "-o", output] + extra + flags.stdout.split() + ["-Wl,-rpath," + os.path.join(prefix, "lib")])
    p = subprocess.run(cmd, capture_output=True, text=True)
    check(p.returncode == 0, f"building {source} against the installed hangwatch failed:\n{' '.join(cmd)}\n{p.stderr}")


def run_library_program(argv, timeout=120, cwd=None):
    """Run a program that uses the C library as a user would: no HANGWATCH_AGENT (the
    library finds its own agent) and no preload.  It must exit 0; returns its result."""
    env = {k: v for k, v in os.environ.items() if k not in ("HANGWATCH_AGENT", "LD_PRELOAD")}
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)
    check(p.returncode == 0, f"exit {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p


def run_installed_example(example, package, culprit, caller, events=False):
    """Install, build `example` only against the installed files, run it, check its one report."""
    prefix = install_prefix()
    work = tempfile.mkdtemp(prefix="hw-api-")
    try:
        # Only the installed files: the example (and the header it shares with the
        # others) is copied out of the tree.
        source = os.path.join(work, os.path.basename(example))
        for name in (example, "cpu_wait.h"):
            shutil.copy(os.path.join(hwtest.SOURCE_DIR, "examples", name), work)
        program = os.path.join(work, "example")
        build_against(prefix, source, program, package)
        reports = os.path.join(work, "reports")
        p = run_library_program([program, reports], timeout=60, cwd=work)
        took = hwtest.check_took(p.stdout, "the callback", 3.0, slack=0.2)
        paths = sorted(os.path.join(reports, n) for n in os.listdir(reports)) if os.path.isdir(reports) else []
        check(len(paths) == 1, f"expected exactly one report, got {paths}\n{p.stderr}")
        rep = hwtest.load_report(paths[0])
        names = symbols(frames(rep))
        i = names.index(culprit) if culprit in names else -1
        check(i > 0 and names[i + 1] == caller, f"the culprit is not on the hung stack: {names}")
        apm = rep["hangwatch"]
        check(2_000_000 < apm["block_duration_us"] < 2_100_000, f"block_duration_us {apm['block_duration_us']}")
        check(rep["report"]["pid"] == rep["hangwatch"]["hung_thread"]["thread_identifier"], "the main thread hung")
        if events:
            check(p.stdout.count("event: thread") == 1 and p.stdout.count("event: report") == 1
                  and p.stdout.count("event: hang over") == 1, "callbacks: one of each event\n" + p.stdout)
            m = re.search(r"event: report (\S+)", p.stdout)
            check(m and os.path.realpath(m.group(1)) == os.path.realpath(paths[0]), "the reported path\n" + p.stdout)
            m = re.search(r"hang over after ([0-9.]+) s", p.stdout)
            check(m and 2.95 <= float(m.group(1)) <= took + 0.3, "the final duration\n" + p.stdout)
        # hangwatch_stop() ended the agent: no `hangwatch attach` for this program is left.
        ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
        check(f"attach --pid={rep['report']['pid']} " not in ps, "the agent outlived hangwatch_stop():\n" + ps)
    finally:
        shutil.rmtree(prefix, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)


def case_installed_api_demo():
    run_installed_example("api_loop.c", "hangwatch", "api_demo_blocks_for_three_seconds", "on_tick", events=True)


def case_installed_glib_demo():
    """The GLib adapter, exact to GLib's poll: the 3 s hang is reported exactly once."""
    run_installed_example("glib_loop.c", "hangwatch-glib", "glib_demo_blocks_for_three_seconds", "on_tick")


def case_build_tree_events():
    """The library's event thread and the loop thread, in the build tree (run under
    ThreadSanitizer by `make test`): one event of each kind, in order."""
    work = tempfile.mkdtemp(prefix="hw-api-")
    try:
        p = run_library_program([hwtest.binary("hangwatch-api-demo"), os.path.join(work, "r")])
        check("ThreadSanitizer" not in p.stderr and "AddressSanitizer" not in p.stderr, p.stderr)
        events = [l.split("event: ")[1].split()[0] for l in p.stdout.splitlines() if "event: " in l]
        check(events == ["thread", "report", "hang"], f"events {events}\n{p.stdout}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run_glib_demo(detector):
    """The build tree's GLib demo under `detector`: (how long its callback took, validated reports)."""
    work = tempfile.mkdtemp(prefix="hw-api-")
    try:
        reports = os.path.join(work, "r")
        p = run_library_program([hwtest.binary("hangwatch-glib-demo"), reports, detector])
        took = hwtest.check_took(p.stdout, "the callback", 3.0, slack=0.2, label=f"{detector}: ")
        paths = sorted(os.path.join(reports, n) for n in os.listdir(reports)) if os.path.isdir(reports) else []
        return took, [hwtest.load_report(path) for path in paths]
    finally:
        shutil.rmtree(work, ignore_errors=True)


def case_glib_comparison_detectors():
    """The GLib adapter's frame tick and post function.  Frame gap: the late tick after the
    3 s hang is one report, found once the hang is over (the tick's stack, not the
    culprit).  Ping (posted with hangwatch_glib_post): the pings are answered (an
    unanswered one would be a report of the idle loop), and the one posted 1.5 s into the
    3 s hang is answered within its 2 s: the ping misses this hang, as seeds/000 says a
    ping sent late does.  A busy machine that stretches the block by the time the loop
    waited for a CPU stretches the gap by as much, and can make that ping late (one report)."""
    took, reports = run_glib_demo("frame-gap")
    check(len(reports) == 1, f"frame gap: one report, got {len(reports)}")
    h = reports[0]["hangwatch"]
    check(h["detector"] == "frame_gap" and 3_000_000 <= h["block_duration_us"] <= (took + 0.3) * 1e6,
          f"frame gap: {h['detector']} {h['block_duration_us']} us for a block of {took:.3f} s")
    check("glib_demo_blocks_for_three_seconds" not in symbols(frames(reports[0])), "the culprit is gone by then")
    took, reports = run_glib_demo("ping")
    durations = [r["hangwatch"]["block_duration_us"] for r in reports]
    if took < 3.4:  # the ping posted about 1.5 s into the block is answered within its 2 s
        check(reports == [], f"ping: reports {durations} for a block of {took:.3f} s")
    else:
        check(len(reports) <= 1 and all(r["hangwatch"]["detector"] == "ping" for r in reports),
              f"ping: reports {durations} for a block of {took:.3f} s")


def case_ping_lifecycle():
    """Ping detector, C library: 3 s before the loop registers, 2.5 s of loop, 3 s after
    it unregistered: the loop answered its pings, and nothing is reported, neither the
    start-up nor the time after the loop, when no posted task can run."""
    work = tempfile.mkdtemp(prefix="hw-api-")
    try:
        reports = os.path.join(work, "r")
        p = run_library_program([hwtest.binary("api-ping-lifecycle"), reports])
        m = re.search(r"pings: (\d+) answered: (\d+)", p.stdout)
        check(m and int(m.group(2)) >= 1, "the loop answered a ping:\n" + p.stdout)
        paths = os.listdir(reports) if os.path.isdir(reports) else []
        check(paths == [], f"no hang, but reports {paths}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def case_api_without_agent():
    """No agent to be found: hangwatch_start fails cleanly and the loop runs unwatched."""
    work = tempfile.mkdtemp(prefix="hw-api-")
    try:
        env = dict(os.environ, HANGWATCH_AGENT=os.path.join(work, "missing"))
        p = subprocess.run([hwtest.binary("hangwatch-api-demo"), os.path.join(work, "r")], capture_output=True,
                           text=True, timeout=60, env=env)
        check(p.returncode == 1 and "hangwatch_start" in p.stderr, f"exit {p.returncode}: {p.stderr}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    import sys
    # argv: BIN_DIR SOURCE_DIR CASE BUILD_DIR
    BUILD_DIR = sys.argv.pop()
    hwtest.main({
        "installed_api_demo": case_installed_api_demo,
        "installed_glib_demo": case_installed_glib_demo,
        "glib_comparison_detectors": case_glib_comparison_detectors,
        "ping_lifecycle": case_ping_lifecycle,
        "api_without_agent": case_api_without_agent,
        "build_tree_events": case_build_tree_events,
    })
