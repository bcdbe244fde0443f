"""test_cli - the command line's contract: help, version, usage errors exit 2
with a clear message, the program's exit status passes through, bad input
to `show` is an error, never a crash, and nothing from a report reaches the
terminal unescaped; the observer never blocks a program whose agent cannot
take its registration."""
import os
import shutil
import re
import signal
import subprocess
import tempfile

import hwtest
from hwtest import check


def hw(*args, timeout=30):
    return hwtest.hw(*args, timeout=timeout)


def expect_usage_error(args, needle):
    p = hw(*args)
    check(p.returncode == 2, f"hangwatch {' '.join(args)}: exit {p.returncode}, expected 2\n{p.stderr}")
    check(needle in p.stderr, f"hangwatch {' '.join(args)}: message lacks {needle!r}:\n{p.stderr}")
    check("Segmentation" not in p.stderr and "Aborted" not in p.stderr, p.stderr)


def case_help_and_version():
    p = hw("--help")
    check(p.returncode == 0, p.stderr)
    for word in ("run", "show", "--threshold", "--check-period", "--check-mode", "--report-dir", "500ms"):
        check(word in p.stdout, f"--help does not mention {word}")
    p = hw("run", "--help")
    check(p.returncode == 0 and "--threshold" in p.stdout, "run --help")
    p = hw("--version")
    check(p.returncode == 0 and p.stdout.startswith("hangwatch "), p.stdout)


def case_usage_errors():
    expect_usage_error([], "a command is needed")
    expect_usage_error(["frobnicate"], "unknown command 'frobnicate'")
    expect_usage_error(["run"], "run needs a program")
    expect_usage_error(["run", "--"], "run needs a program")
    expect_usage_error(["run", "--threshold", "2", "--", "true"], "missing unit")
    expect_usage_error(["run", "--threshold", "fast", "--", "true"], "invalid --threshold 'fast'")
    expect_usage_error(["run", "--threshold", "0s", "--", "true"], "greater than zero")
    expect_usage_error(["run", "--check-period", "-1s", "--", "true"], "negative")
    expect_usage_error(["run", "--threshold", "--", "true"], "not a number")
    expect_usage_error(["run", "--threshold", "1e309s", "--", "true"], "too large")
    expect_usage_error(["run", "--check-mode", "sometimes", "--", "true"], "invalid --check-mode")
    expect_usage_error(["run", "--bogus", "--", "true"], "unknown option '--bogus'")
    expect_usage_error(["run", "--threshold"], "needs a value")
    expect_usage_error(["run", "--", "/nonexistent/program"], "cannot run '/nonexistent/program'")
    expect_usage_error(["run", "--", "no-such-program-hangwatch"], "No such file")
    expect_usage_error(["show"], "at least one report")
    expect_usage_error(["run", "--daily-limit", "many", "--", "true"], "invalid --daily-limit")
    expect_usage_error(["run", "--daily-limit", "-3", "--", "true"], "invalid --daily-limit")
    expect_usage_error(["run", "--max-dir-size", "10MB", "--", "true"], "invalid --max-dir-size")
    expect_usage_error(["run", "--ring-size", "0", "--", "true"], "invalid --ring-size")
    expect_usage_error(["run", "--wait-site", "main", "--", "true"], "invalid --wait-site")
    expect_usage_error(["run", "--threads", "all", "--", "true"], "invalid --threads")
    expect_usage_error(["run", "--sample-interval", "fast", "--", "true"], "invalid --sample-interval")
    expect_usage_error(["run", "--detector", "fps", "--", "true"], "use runloop, semaphore, ping or frame-gap")
    expect_usage_error(["run", "--detector", "ping", "--stutter", "--", "true"], "runloop detector only")
    expect_usage_error(["run", "--frame-interval", "60Hz", "--", "true"], "invalid --frame-interval")
    expect_usage_error(["run", "--pings-by-post", "--", "true"], "belong to hangwatch attach")


def case_exit_status():
    with tempfile.TemporaryDirectory() as d:
        rd = os.path.join(d, "r")
        p = hw("run", "--report-dir", rd, "--", "sh", "-c", "exit 7")
        check(p.returncode == 7, f"exit status not passed through: {p.returncode} {p.stderr}")
        p = hw("run", "--report-dir", rd, "--", "sh", "-c", "kill -TERM $$")
        check(p.returncode == 128 + signal.SIGTERM, f"death by signal: {p.returncode} {p.stderr}")
        p = hw("run", "--report-dir", rd, "--", "true")
        check(p.returncode == 0 and p.stderr == "", f"true: {p.returncode} {p.stderr}")
        # The program's own flags are not hangwatch's.
        p = hw("run", "--report-dir", rd, "--", "sh", "-c", "echo $0 $1", "x", "--threshold")
        check(p.returncode == 0 and p.stdout.strip() == "x --threshold", p.stdout + p.stderr)


def case_signals_forwarded():
    """SIGTERM sent to hangwatch reaches the program; hangwatch exits with its status."""
    with tempfile.TemporaryDirectory() as d:
        proc = subprocess.Popen([hwtest.binary("hangwatch"), "run", "--report-dir", os.path.join(d, "r"), "--",
                                 hwtest.binary("loop-scenarios"), "idle", "60"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        child = hwtest.program_of(proc.pid)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
        check(proc.returncode == 128 + signal.SIGTERM, f"exit {proc.returncode}: {err}")
        check(not os.path.exists(f"/proc/{child}"), "the program outlived hangwatch")


def case_show_bad_input():
    with tempfile.TemporaryDirectory() as d:
        bad = os.path.join(d, "bad.json")
        with open(bad, "w") as f:
            f.write('{"report": {"id": ')
        p = hw("show", bad)
        check(p.returncode == 1 and "not valid JSON" in p.stderr, p.stderr)
        other = os.path.join(d, "other.json")
        with open(other, "w") as f:
            f.write('{"hello": [1, 2, 3]}')
        p = hw("show", other)
        check(p.returncode == 1 and "not a hangwatch report" in p.stderr, p.stderr)
        wrong = os.path.join(d, "wrong.json")
        with open(wrong, "w") as f:
            f.write('{"report": {"pid": "x"}, "crash": {"threads": [1, {"backtrace": 3}]},'
                    ' "hangwatch": {"hung_thread": {"report_array_index": 99}}}')
        p = hw("show", wrong)
        check(p.returncode == 0, f"a report with wrong field types must not crash show: {p.returncode} {p.stderr}")
        p = hw("show", os.path.join(d, "missing.json"))
        check(p.returncode == 1 and "missing.json" in p.stderr, p.stderr)
        p = hw("show", "--help")
        check(p.returncode == 0 and p.stdout.startswith("usage: hangwatch show") and "--every-stack" in p.stdout,
              f"show --help: {p.returncode} {p.stdout} {p.stderr}")
        p = hw("show", "--bogus", other)
        check(p.returncode == 2 and "unknown option for show: '--bogus'" in p.stderr, p.stderr)
        p = hw("show", "--every-stack")
        check(p.returncode == 2 and "needs at least one report" in p.stderr, p.stderr)
        dashed = os.path.join(d, "-dashed.json")
        shutil.copy(other, dashed)
        p = hw("show", "--", dashed)
        check(p.returncode == 1 and "not a hangwatch report" in p.stderr, f"a file after --: {p.stderr}")


def hostile_report():
    """A report whose every string carries terminal control bytes."""
    bad = "\x1b]0;owned\x07\x1b[2J\r\x9b"
    frame = {"instruction_addr": 4096, "symbol_name": "sym" + bad, "symbol_addr": 4080, "object_name": "obj" + bad,
             "object_addr": 0, "object_offset": 4096, "source_file": "file" + bad, "source_line": 7}
    return {
        "report": {"id": "id" + bad, "timestamp": 1, "type": "standard", "process_name": "proc" + bad, "pid": 42},
        "crash": {"threads": [
            {"index": 0, "name": "hung" + bad, "thread_identifier": 42, "crashed": True, "current_thread": False,
             "backtrace": {"skipped": 0, "contents": [frame, {"instruction_addr": 1, "object_name": "o" + bad}]},
             "unwind_error": "unwind" + bad},
            {"index": 1, "name": "other" + bad, "thread_identifier": 43, "crashed": False, "current_thread": False,
             "backtrace": {"skipped": 0, "contents": [frame]}}]},
        "binary_images": [],
        "hangwatch": {
            "module": "hang", "detector": "det" + bad, "check_mode": "mode" + bad, "hang_type": "hang",
            "block_duration_us": 9223372036854775807, "runloop_threshold_us": -1,
            "hung_thread": {"thread_identifier": 42, "report_array_index": 0}, "detected_at_unix_ms": 1,
            "capture": {"method": "ptrace" + bad, "stopped_us": 1, "max_thread_stopped_us": 1,
                        "process_exited": False, "tracer_pid": 1234, "tracer_name": "strace" + bad},
            "grouping_key": "key" + bad, "stretch_report_index": 0,
            "final_duration_us": 5, "hang_end": "end" + bad,
            "collection": {
                "scene_threads": {"enumerated_thread_count": 2, "items": [
                    {"thread_identifier": 42, "name": "hung" + bad, "is_main_thread": True, "is_hung_thread": True,
                     "status": "captured", "frame_count": 2, "report_array_index": 0},
                    {"thread_identifier": 43, "name": "other" + bad, "is_main_thread": False,
                     "is_hung_thread": False, "status": "denied" + bad, "error": "error" + bad, "frame_count": 1,
                     "report_array_index": 1}]},
                "main_thread": {"state": "collected", "reason": "early_sampling", "sample_count": 3,
                                "point_stack_index": 9223372036854775807, "top_repeat_count": 9223372036854775807,
                                "backtrace": {"contents": [dict(frame, repeat_count=2)]}}}},
    }


def no_control_bytes(where, data):
    """Nothing but printable ASCII and newlines reached the terminal."""
    for i, b in enumerate(data):
        check(b == 0x0a or 0x20 <= b < 0x7f, f"{where}: byte 0x{b:02x} at {i} reached the terminal:\n{data!r}")


def case_show_escapes_foreign_text():
    """Every string from a report is printed escaped; a file too large for a
    report is refused before it is read."""
    import json
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "hostile.json")
        with open(path, "w") as f:
            json.dump(hostile_report(), f)
        p = subprocess.run([hwtest.binary("hangwatch"), "show", path], capture_output=True, timeout=30)
        check(p.returncode == 0, f"exit {p.returncode}: {p.stderr!r}")
        no_control_bytes("stdout", p.stdout)
        no_control_bytes("stderr", p.stderr)
        out = p.stdout.decode()
        for name in ("proc", "id", "key", "sym", "obj", "file", "hung", "other", "unwind", "end", "error",
                     "det", "mode", "ptrace"):
            check(name + "\\x1b]0;owned\\x07\\x1b[2J\\r\\xc2\\x9b" in out, f"{name} is not shown escaped:\n{out}")
        check("not captured: traced by pid 1234 (strace\\x1b" in out, out)

        # Control bytes in a file that is not JSON (the parser quotes it) and
        # in the file's own name.
        odd = os.path.join(d, "odd\x1b[31m.json")
        with open(odd, "wb") as f:
            f.write(b'{"report": \x1b[2J}')
        p = subprocess.run([hwtest.binary("hangwatch"), "show", odd], capture_output=True, timeout=30)
        check(p.returncode == 1 and b"not valid JSON" in p.stderr, repr(p.stderr))
        no_control_bytes("stderr", p.stderr)

        # 200 MB (sparse): refused at once, not read into memory.
        big = os.path.join(d, "big.json")
        with open(big, "wb") as f:
            f.truncate(200 * 1000 * 1000)
        p = hw("show", big)
        check(p.returncode == 1, f"exit {p.returncode}: {p.stderr}")
        check("big.json: too large for a report (200000000 bytes, at most 64 MiB)" in p.stderr, p.stderr)
        # Something that is not a regular file is capped while it is read.
        p = hw("show", "/dev/zero")
        check(p.returncode == 1 and "too large for a report (more than 67108864 bytes" in p.stderr, p.stderr)


def case_registration_never_blocks():
    """An agent whose queue is full (stopped, busy or flooded) never holds a
    program up in its constructor: the program runs, unwatched, and each
    process says so once on stderr."""
    import socket
    import time
    preload = os.path.realpath(os.path.join(hwtest.BIN, "..", "lib", "hangwatch", "libhangwatch-preload.so"))
    check(os.access(preload, os.R_OK), f"{preload} is not built")
    name = f"hw-test-full-agent-{os.getpid()}"
    agent = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    agent.bind("\0" + name)
    agent.listen(0)  # room for one connection, never accepted: its backlog stays full
    flood = []
    try:
        while len(flood) < 64:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            s.setblocking(False)
            flood.append(s)
            s.connect("\0" + name)
    except BlockingIOError:
        flood.pop().close()
    check(0 < len(flood) < 64, f"could not fill the stand-in agent's backlog ({len(flood)} connections)")
    env = dict(os.environ, LD_PRELOAD=preload, HANGWATCH_AGENT_SOCKET="@" + name)
    try:
        start = time.monotonic()
        p = subprocess.run(["sh", "-c", "echo $$; /bin/true; exit 3"], capture_output=True, text=True, env=env,
                           timeout=60)
        took = time.monotonic() - start
        # bash registers (the backlog has room for one), then it is
        # full: bash forks (dash uses vfork) and the child executes true:
        # one pid, two images, one line; so for the subshell that executes
        # sleep.
        agent.accept()[0].close()
        forked = subprocess.run(["bash", "-c", "echo $$; /bin/true; (echo $BASHPID; sleep 0.1); exit 4"],
                                capture_output=True, text=True, env=env, timeout=60)
    finally:
        for s in flood:
            s.close()
        agent.close()
    check(p.returncode == 3, f"exit {p.returncode}: {p.stderr}")
    # Two processes (sh and the true it executes), each gives up within its
    # 200 ms; a loaded machine gets ample slack, a blocked one never ends.
    check(took < 10, f"took {took:.1f} s")
    lines = p.stderr.splitlines()
    check(len(lines) == 2 and all("could not register with the agent" in l and l.endswith("it is not watched")
                                  for l in lines), p.stderr)
    sh_pid = int(p.stdout.split()[0])
    check(sum(f"(pid {sh_pid})" in l for l in lines) == 1, f"the shell (pid {sh_pid}) did not say it once:\n{p.stderr}")
    check("queue stayed full" in lines[0], p.stderr)
    check(forked.returncode == 4, f"exit {forked.returncode}: {forked.stderr}")
    said = [int(l.split("(pid ")[1].split(")")[0]) for l in forked.stderr.splitlines() if "could not register" in l]
    check(len(said) == len(set(said)), f"a pid said it twice:\n{forked.stderr}")
    bash_pid, subshell_pid = (int(x) for x in forked.stdout.split()[:2])
    check(bash_pid not in said, f"bash (pid {bash_pid}) had room to register:\n{forked.stderr}")
    check(subshell_pid in said, f"the subshell (pid {subshell_pid}) did not say it:\n{forked.stderr}")
    check(len(said) == 2, f"not one line each for true's and sleep's processes:\n{forked.stderr}")


def case_unwritable_report_dir():
    """A report directory that cannot be made is refused before the program
    starts: exit 2 with the reason (a full disk, found later, is in
    test_report_dir's full_disk)."""
    with tempfile.TemporaryDirectory() as d:
        blocker = os.path.join(d, "file")
        open(blocker, "w").close()
        marker = os.path.join(d, "ran")
        p = hw("run", "--report-dir", os.path.join(blocker, "reports"), "--", "touch", marker, timeout=60)
        check(p.returncode == 2, f"exit {p.returncode}: {p.stderr}")
        check("cannot use report directory" in p.stderr, p.stderr)
        check(not os.path.exists(marker), "the program ran although its reports had nowhere to go")


def case_report_limits():
    """The daily limit and the directory cap drop reports, say so once, and count them."""
    scen = [hwtest.binary("loop-scenarios"), "abca", "0.6"]
    fast = ["--threshold", "300ms", "--check-period", "250ms"]
    r = hwtest.run(fast + ["--daily-limit", "2", "--"] + scen)
    try:
        check(r.returncode == 0, r.describe())
        check(len(r.reports) == 2, f"{len(r.reports)} reports with --daily-limit 2\n" + r.describe())
        check(r.stderr.count("the daily limit") == 1, "the limit must be said exactly once\n" + r.stderr)
        # How many more the annealing wanted depends on timing: at least one.
        dropped = re.search(r"(\d+) hang reports? (?:was|were) not written", r.stderr)
        check(dropped and int(dropped.group(1)) >= 1, r.stderr)
        # A second run into the same directory: the day's budget is spent.
        again = hwtest.run(fast + ["--daily-limit", "2", "--"] + scen, report_dir=r.report_dir)
        dropped = re.search(r"(\d+) hang reports? (?:was|were) not written", again.stderr)
        check(len(again.reports) == 2 and dropped and int(dropped.group(1)) >= 2, again.describe())
    finally:
        hwtest.cleanup(r)
    r = hwtest.run(fast + ["--max-dir-size", "1K", "--"] + scen)
    try:
        check(r.returncode == 0 and r.reports == [], r.describe())
        check(r.stderr.count("size cap") == 1, r.stderr)
    finally:
        hwtest.cleanup(r)


def case_unobservable_programs():
    """What the interposer cannot see is said on stderr, not silently ignored."""
    with tempfile.TemporaryDirectory() as d:
        # --observer preload: what the preloaded observer alone cannot see
        p = hw("run", "--observer", "preload", "--report-dir", os.path.join(d, "r"), "--",
               hwtest.binary("loop-scenarios-static"), "cpuspin",
               "2.5", timeout=60)
        check(p.returncode == 0, p.stderr)
        check("is statically linked" in p.stderr and "docs/limits.md" in p.stderr, p.stderr)
        p = hw("run", "--observer", "preload", "--report-dir", os.path.join(d, "r2"), "--",
               hwtest.binary("raw-syscall-loop"), "5", timeout=60)
        check(p.returncode == 0, p.stderr)
        check("without going through glibc's wrappers" in p.stderr, p.stderr)
        check("launch hang" not in p.stderr, "a raw-syscall wait was reported as a launch hang\n" + p.stderr)
        check(not os.path.exists(os.path.join(d, "r2")) or os.listdir(os.path.join(d, "r2")) == [], "reports written")


if __name__ == "__main__":
    hwtest.main({
        "help_and_version": case_help_and_version,
        "usage_errors": case_usage_errors,
        "exit_status": case_exit_status,
        "signals_forwarded": case_signals_forwarded,
        "show_bad_input": case_show_bad_input,
        "show_escapes_foreign_text": case_show_escapes_foreign_text,
        "registration_never_blocks": case_registration_never_blocks,
        "unwritable_report_dir": case_unwritable_report_dir,
        "report_limits": case_report_limits,
        "unobservable_programs": case_unobservable_programs,
    })
