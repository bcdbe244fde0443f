#!/usr/bin/python3
"""bench/soak.py - `make soak`: an hour of hangs leaves nothing behind.

`hangwatch run` watches `soak-tree 20 SECONDS` (tests/programs/soak_tree.c):
20 workers that hang, fork, exec, die and are restarted at random for the
whole time, with early sampling, the metrics endpoint and Sentry on (a
Sentry envelope receiver of our own on 127.0.0.1).  Every 5 s the agent
(the `hangwatch run` process itself, which is the tree's parent) is
measured: VmRSS and VmHWM, open descriptors, threads, CPU time, the report
directory's size and file count, and its metrics.  The figures go to
OUT/soak.csv and a plot of them to OUT/soak.svg (four panels: RSS, fds,
threads, report directory; drawn here, no plotting library).  Next to
them: soak-tree.out (the tree's own account of its hangs and churn),
hangwatch.err, agent-fds.txt (the agent's descriptors at warm-up and at the
end, to tell what a leak is made of) and reports/.  The run uses copies of
hangwatch, its observer library and soak-tree in OUT/bin and OUT/lib, so
that a rebuild of BUILD_DIR during the hour changes nothing in it.

    /usr/bin/python3 bench/soak.py BUILD_DIR [--minutes M] [--out DIR]
        [--workers N] [--seed S] [--daily-limit N] [--interval S]

Defaults: 60 minutes, OUT = BUILD_DIR/soak, 20 workers, a seed from the
time, --daily-limit 0.  The daily limit is off so that every hang can be
followed to its own line on stderr (a report the limits refuse has none:
hangwatch counts those only in its exit line and the metrics); with
--daily-limit N the refused ones are accounted from that count.  The
directory's size cap stays at hangwatch's default (256M).

Which hangs must be detected.  soak-tree prints `hang PID UNIX-NS
PLANNED-MS` before each hang and `end PID UNIX-NS BUSY-MS HOW KIND` when it
is over (HOW: returned, or killed / exited when the hang ends with the
worker's death, a fatal hang).  Every planned hang is 2.2 to 4 s and a
worker asked to stop finishes the hang it is in, so every hang with an end
line has run at least 2.2 s against the 2 s threshold: these are
*required*.  A hang line without an end line (a process killed from
outside mid-hang; none when the run ends normally) is *cut*, counted
apart, with how many of those were detected anyway.  Each required hang is
exactly one of:

  reported     a report in the directory for its pid whose hang began
               (detected_at - block_duration) within 1 s of the hang line's
               time;
  dropped      hangwatch said on stderr "hang in ... (pid P) ...; no report:
               ..." (its queue was full, out of memory, a write error) and
               the pid has such a line left over;
  capped       hangwatch's exit line "N hang reports were not written because
               of the report limits" has some of its N left over;
  unaccounted  none of these.

Reports that match no hang line (a false hang), several reports for one
hang, stderr lines repeated word for word, report lines whose file is
missing and fatal hangs without their "fatal hang" line are listed as
findings.

Exit status: 0 when the run finished (the tree exited 0, hangwatch exited
with it), no required hang is unaccounted and nothing grew after warm-up;
1 otherwise.  Warm-up ends at W = min(10 min, a third of the run).  With
L = min(60 s, W / 2), the "baseline" window is [W - L, W] and the "end"
window the last L seconds before the tree was stopped:

  RSS      the end window's highest VmRSS is at most the baseline window's
           highest plus max(10 %, 8 MiB);
  fds      the end window's highest count is at most the highest seen up to
           W plus 8 (the agent holds descriptors per watched process and per
           hang in progress, so the count follows the churn: a leak over an
           hour of churn is hundreds);
  threads  the end window's highest count is at most the highest seen up to W.

Sentry: each report becomes one event whose id is the report's id; the
receiver counts envelopes and matches them to the reports.  Every report
should have reached it, or be left in REPORT_DIR/sentry-spool; that is
printed (and in the table) but not part of the exit status.

The table rows (`rows(measure(...), row)`, as bench/many_hangs.py's) have
bench/run.py's columns, for docs/benchmarks.md (`make bench` does not run
the soak: an hour is too long for it).  Standard library only, plus
Debian's python3-sentry-sdk to parse the envelopes when it is there.
"""
import argparse
import csv
import gzip
import http.server
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from xml.sax.saxutils import escape

SENTRY_KEY = "0123456789abcdef0123456789abcdef"
SENTRY_PROJECT = "1"
HANG_MATCH_S = 1.0  # a report's hang start vs the hang line's time
FDS_SLACK = 8
RSS_SLACK_FRACTION = 0.10
RSS_SLACK_MIB = 8.0
EXIT_GRACE_S = 180  # after the tree's time, for it to stop and the agent to finish


def log(*args):
    print(*args, file=sys.stderr, flush=True)


# ---- the Sentry envelope receiver ----

class SentryReceiver:
    """POST /api/PROJECT/envelope/ on 127.0.0.1: counts envelopes and keeps
    their event ids (parsed by the Sentry SDK when it is installed, else by
    reading the envelope's first line)."""

    def __init__(self):
        try:
            from sentry_sdk.envelope import Envelope
        except ImportError:
            Envelope = None
        self.lock = threading.Lock()
        self.envelopes = 0
        self.event_ids = []
        self.problems = []
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.headers.get("Content-Encoding", "") == "gzip":
                    body = gzip.decompress(body)
                auth = self.headers.get("X-Sentry-Auth", "")
                if self.path != f"/api/{SENTRY_PROJECT}/envelope/" or f"sentry_key={SENTRY_KEY}" not in auth:
                    with receiver.lock:
                        receiver.problems.append(f"refused: {self.path} {auth[:80]}")
                    self.send_response(403)
                    self.end_headers()
                    return
                event_id = None
                try:
                    if Envelope is not None:
                        env = Envelope.deserialize(body)
                        event = env.get_event()
                        event_id = (event or {}).get("event_id") or env.headers.get("event_id")
                    else:
                        event_id = json.loads(body.split(b"\n", 1)[0]).get("event_id")
                except Exception as e:  # noqa: BLE001 - an unparsable envelope is a finding
                    with receiver.lock:
                        receiver.problems.append(f"unparsable envelope: {e!r}")
                with receiver.lock:
                    receiver.envelopes += 1
                    receiver.event_ids.append(event_id)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(json.dumps({"id": event_id}).encode())

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def dsn(self):
        return f"http://{SENTRY_KEY}@127.0.0.1:{self.port}/{SENTRY_PROJECT}"

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- what is measured every few seconds ----

def proc_status(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            out[key] = value.strip()
    return out


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def dir_usage(path):
    size = files = 0
    for root, _dirs, names in os.walk(path):
        for n in names:
            try:
                size += os.lstat(os.path.join(root, n)).st_size
                files += 1
            except OSError:
                pass
    return size, files


def scrape(port):
    """Sums of the counters soak cares about, by metric (and by reason for the drops); None when unreachable."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=3) as r:
            text = r.read().decode()
    except OSError:
        return None
    sums = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r'^([a-zA-Z_:][\w:]*)(\{[^}]*\})?\s+(\S+)', line)
        if not m:
            continue
        name, labels, value = m.group(1), m.group(2) or "", float(m.group(3))
        sums[name] = sums.get(name, 0.0) + value
        r = re.search(r'reason="([^"]*)"', labels)
        if name == "hangwatch_reports_dropped_total" and r:
            key = f"dropped:{r.group(1)}"
            sums[key] = sums.get(key, 0.0) + value
    return sums


def fd_kinds(pid):
    """The agent's descriptors by what they are (to tell a leak's kind)."""
    kinds = dict.fromkeys(FD_KINDS, 0)
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        kind = ("fd_perf" if "perf_event" in target else "fd_pidfd" if "pidfd" in target
                else "fd_socket" if target.startswith("socket:") else "fd_pipe" if target.startswith("pipe:")
                else "fd_proc" if target.startswith("/proc/") else "fd_anon" if target.startswith("anon_inode:")
                else "fd_file")
        kinds[kind] += 1
    return kinds


FD_KINDS = ["fd_perf", "fd_pidfd", "fd_socket", "fd_pipe", "fd_proc", "fd_anon", "fd_file"]


def fd_listing(pid):
    out = []
    for fd in sorted(os.listdir(f"/proc/{pid}/fd"), key=int):
        try:
            out.append(f"{fd} -> {os.readlink(f'/proc/{pid}/fd/{fd}')}")
        except OSError:
            pass
    return out


def sample(agent_pid, report_dir, metrics_port, started):
    st = proc_status(agent_pid)
    kinds = fd_kinds(agent_pid)
    fds = len(os.listdir(f"/proc/{agent_pid}/fd"))
    threads = len(os.listdir(f"/proc/{agent_pid}/task"))
    size, files = dir_usage(report_dir) if os.path.isdir(report_dir) else (0, 0)
    m = scrape(metrics_port) or {}
    return {"elapsed_s": round(time.monotonic() - started, 1),
            "rss_kib": int(st["VmRSS"].split()[0]), "hwm_kib": int(st["VmHWM"].split()[0]),
            "fds": fds, "threads": threads, "cpu_s": round(cpu_seconds(agent_pid), 2),
            "report_dir_bytes": size, "report_dir_files": files,
            "hangs_total": int(m.get("hangwatch_hangs_total", -1)),
            "reports_dropped_total": int(m.get("hangwatch_reports_dropped_total", -1)),
            "reports_written_total": int(m.get("hangwatch_reports_written_total", -1)),
            "watched_processes": int(m.get("hangwatch_watched_processes", -1)),
            "sentry_sent_total": int(m.get("hangwatch_sentry_events_sent_total", -1)),
            "_dropped_by_reason": {k[8:]: int(v) for k, v in m.items() if k.startswith("dropped:")}, **kinds}


CSV_FIELDS = ["elapsed_s", "rss_kib", "hwm_kib", "fds", "threads", "cpu_s", "report_dir_bytes", "report_dir_files",
              "hangs_total", "reports_dropped_total", "reports_written_total", "watched_processes",
              "sentry_sent_total"] + FD_KINDS


def describe_agent(pid, tree_root):
    """Checks that `pid` is the agent: hangwatch itself, the tree's parent; and names its threads."""
    st = proc_status(pid)
    exe = os.readlink(f"/proc/{pid}/exe")
    names = []
    for tid in sorted(os.listdir(f"/proc/{pid}/task"), key=int):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                names.append(f.read().strip())
        except OSError:
            pass
    parent_ok = tree_root is not None and proc_status(tree_root).get("PPid") == str(pid)
    return f"agent pid {pid} ({st['Name']}, {exe}), parent of soak-tree {tree_root}: {parent_ok}; " \
           f"threads: {', '.join(names)}"


# ---- the run ----

def snapshot_binaries(bin_dir, out_dir):
    """Copies of hangwatch, its observer library and soak-tree under OUT: an hour is long enough for
    someone to rebuild the tree, and a process exec'd after that would load the new observer into a
    run of the old agent, or run a soak-tree whose file is gone (no names for its frames)."""
    lib = os.path.join(os.path.dirname(bin_dir), "lib", "hangwatch", "libhangwatch-preload.so")
    os.makedirs(os.path.join(out_dir, "bin"))
    os.makedirs(os.path.join(out_dir, "lib", "hangwatch"))
    for src, dst in ((os.path.join(bin_dir, "hangwatch"), "bin/hangwatch"),
                     (os.path.join(bin_dir, "soak-tree"), "bin/soak-tree"),
                     (lib, "lib/hangwatch/libhangwatch-preload.so")):
        shutil.copy2(src, os.path.join(out_dir, dst))
    return os.path.join(out_dir, "bin")


def run(bin_dir, out_dir, minutes, workers, seed, daily_limit, interval):
    seconds = max(1, int(round(minutes * 60)))
    report_dir = os.path.join(out_dir, "reports")
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    bin_dir = snapshot_binaries(bin_dir, out_dir)
    tree_out = os.path.join(out_dir, "soak-tree.out")
    agent_err = os.path.join(out_dir, "hangwatch.err")
    receiver = SentryReceiver()
    metrics_port = free_port()
    cmd = [os.path.join(bin_dir, "hangwatch"), "run", "--early-sampling",
           "--metrics-listen", f"127.0.0.1:{metrics_port}", "--sentry-dsn", receiver.dsn(),
           "--daily-limit", str(daily_limit), "--report-dir", report_dir, "--",
           os.path.join(bin_dir, "soak-tree"), str(workers), str(seconds)] + ([str(seed)] if seed is not None else [])
    log("soak: " + " ".join(cmd))
    env = dict(os.environ)
    env.pop("SENTRY_DSN", None)
    samples = []
    fd_lists = {}
    agent_note = None
    finished = True
    started = time.monotonic()
    with open(tree_out, "ab") as out, open(agent_err, "wb") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env,
                                start_new_session=True)
    try:
        next_at = started + interval  # the first once the agent is up
        while proc.poll() is None:
            now = time.monotonic()
            if now - started > seconds + EXIT_GRACE_S:
                finished = False
                log(f"soak: not finished {EXIT_GRACE_S} s after its time: stopping it")
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    pass
                break
            if now >= next_at:
                try:
                    s = sample(proc.pid, report_dir, metrics_port, started)
                    samples.append(s)
                    if s["elapsed_s"] <= seconds:  # the descriptors at warm-up and at the end, to tell a leak
                        listing = fd_listing(proc.pid)
                        if s["elapsed_s"] <= min(600.0, seconds / 3) or not fd_lists:
                            fd_lists["warm-up"] = (s["elapsed_s"], listing)
                        fd_lists["end"] = (s["elapsed_s"], listing)
                    if agent_note is None and s["elapsed_s"] >= 4:
                        agent_note = describe_agent(proc.pid, tree_root(proc.pid))
                        log("soak: " + agent_note)
                    if len(samples) % 12 == 1:
                        log(f"soak: {s['elapsed_s'] / 60:5.1f} min  RSS {s['rss_kib'] / 1024:.1f} MiB  "
                            f"fds {s['fds']}  threads {s['threads']}  reports {s['report_dir_files']}  "
                            f"hangs {s['hangs_total']}")
                except (OSError, KeyError, ValueError, IndexError):
                    pass  # the agent is exiting
                next_at += interval
            time.sleep(max(0.05, min(1.0, next_at - time.monotonic())))
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            finished = False
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # whatever is left of our own session
        except ProcessLookupError:
            pass
        if proc.poll() is None:
            proc.wait()
    took = time.monotonic() - started
    final_dir = dir_usage(report_dir) if os.path.isdir(report_dir) else (0, 0)
    with open(os.path.join(out_dir, "agent-fds.txt"), "w") as f:
        for when, (at, listing) in fd_lists.items():
            f.write(f"# the agent's descriptors at {at:.0f} s ({when})\n" + "\n".join(listing) + "\n\n")
    time.sleep(0.5)
    receiver.stop()
    return {"seconds": seconds, "workers": workers, "daily_limit": daily_limit, "samples": samples,
            "finished": finished, "exit": proc.returncode, "took": took, "report_dir": report_dir,
            "tree_out": tree_out, "agent_err": agent_err, "receiver": receiver, "agent_note": agent_note,
            "out_dir": out_dir, "final_dir": final_dir}


def tree_root(agent_pid):
    try:
        with open(f"/proc/{agent_pid}/task/{agent_pid}/children") as f:
            kids = f.read().split()
        return int(kids[0]) if kids else None
    except OSError:
        return None


# ---- accounting ----

def read_reports(report_dir):
    reports = []
    for name in sorted(os.listdir(report_dir)) if os.path.isdir(report_dir) else []:
        if not name.endswith(".json"):
            continue
        path = os.path.join(report_dir, name)
        try:
            with open(path) as f:
                r = json.load(f)
        except (OSError, ValueError) as e:
            reports.append({"name": name, "path": path, "error": repr(e)})
            continue
        hw = r.get("hangwatch", {})
        detected_ms = hw.get("detected_at_unix_ms", 0)
        reports.append({"name": name, "path": path, "pid": r.get("report", {}).get("pid"),
                        "id": r.get("report", {}).get("id", "").replace("-", "").lower(),
                        "hang_type": hw.get("hang_type"), "hang_end": hw.get("hang_end"),
                        "final_us": hw.get("final_duration_us"),
                        "start_s": (detected_ms - hw.get("block_duration_us", 0) / 1000) / 1000})
    return reports


LINE_REPORT = re.compile(r"^hangwatch: (hang|launch hang|stutter) in (.*?) \(pid (\d+)\): .*; report (\S+)$")
LINE_NO_REPORT = re.compile(r"^hangwatch: (hang|launch hang|stutter) in (.*?) \(pid (\d+)\): .*?; "
                            r"(no report(?::| \(| of this capture:).*|ignored: .*)$")
LINE_FATAL = re.compile(r"^hangwatch: fatal hang in (.*?) \(pid (\d+)\): the process (was killed by (\S+)|"
                        r"exited with status (\d+),) ([\d.]+) s into this hang(?:; report (\S+))?$")
LINE_TOTAL = re.compile(r"^hangwatch: (\d+) hangs?(?:, (\d+) fatal \(.*\))?(?:, \d+ ignored .*)?$")
LINE_LIMIT_SAID = re.compile(r"^hangwatch: .* (already holds \d+ reports from the last 24 h \(the daily limit\)|would "
                             r"grow past its size cap of \d+ bytes): further hangs are detected but not written")
LINE_BEHIND = re.compile(r"^hangwatch: (?:the report writer is behind: a capture was dropped|"
                         r"(\d+) captures? (?:was |were )?dropped because the report writer was behind)")
LINE_TAILS = re.compile(r"^hangwatch: (\d+) follow-up reports? (?:was|were) not written: the hang ended within")
LINE_LIMITED = re.compile(r"^hangwatch: (\d+) hang reports? (?:was|were) not written because of the report limits")


def busy_s(line):
    """The busy time a hang line says ("busy 2.004s", "busy 900ms"), in seconds."""
    mm = re.search(r" busy ([\d.]+)(ns|us|ms|s|m) ", line)
    if not mm:
        return 0.0
    return float(mm.group(1)) * {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0}[mm.group(2)]


def account(m):
    """Follows every hang soak-tree announced to what hangwatch made of it."""
    hangs = []  # in the order soak-tree said them
    open_hang = {}
    churn = {"fork": 0, "exec": 0, "die": 0, "start": 0, "reaped": 0}
    seed = None
    tree_done = False
    with open(m["tree_out"], errors="replace") as f:
        for line in f:
            w = line.split()
            if not w:
                continue
            if w[0] == "hang" and len(w) == 4:
                h = {"pid": int(w[1]), "start_s": int(w[2]) / 1e9, "planned_ms": int(w[3]), "end": None,
                     "reports": [], "fate": None}
                hangs.append(h)
                open_hang[h["pid"]] = h
            elif w[0] == "end" and len(w) == 6:
                h = open_hang.pop(int(w[1]), None)
                if h:
                    h.update(end=w[4], kind=w[5], busy_ms=int(w[3]))
            elif w[0] in churn:
                churn[w[0]] += 1
            elif line.startswith("soak-tree: seed"):
                seed = int(w[2].rstrip(","))
            elif line.startswith("soak-tree: done"):
                tree_done = True
    required = [h for h in hangs if h["end"] is not None and h["busy_ms"] >= 2200]
    cut = [h for h in hangs if h["end"] is None]
    short = [h for h in hangs if h["end"] is not None and h["busy_ms"] < 2200]  # none: the planned time is kept

    # Reports, matched to hangs by pid and start.
    reports = read_reports(m["report_dir"])
    by_pid = {}
    for h in hangs:
        by_pid.setdefault(h["pid"], []).append(h)
    spurious, broken = [], [r for r in reports if "error" in r]
    for r in reports:
        if "error" in r:
            continue
        best = min(by_pid.get(r["pid"], []), key=lambda h: abs(h["start_s"] - r["start_s"]), default=None)
        if best is not None and abs(best["start_s"] - r["start_s"]) <= HANG_MATCH_S:
            best["reports"].append(r)
        else:
            spurious.append(r)
    no_final = [r for r in reports if "error" not in r and r["final_us"] is None]
    name_to_hang = {r["name"]: h for h in hangs for r in h["reports"]}
    for hs in by_pid.values():
        for i, h in enumerate(hs):
            h["i"], h["no_report"] = i, []

    # hangwatch's stderr.  A pid's lines come in the order of its hangs; a
    # "no report" line at the threshold is its next hang's first, a later
    # one (a follow-up capture's) is about the hang its last line was.
    cur = {}
    orphan_no_report = []
    with open(m["agent_err"], errors="replace") as f:
        err_lines = [l.rstrip("\n") for l in f]
    report_lines, no_report_lines, fatal_lines, other = [], {}, {}, []
    total = fatal_total = limited = None
    tails = 0
    limit_said = []
    captures_dropped = 0
    seen, repeated = set(), []
    for line in err_lines:
        if line in seen and line.startswith("hangwatch: "):
            repeated.append(line)
        seen.add(line)
        if mm := LINE_REPORT.match(line):
            pid = int(mm.group(3))
            report_lines.append((pid, mm.group(4)))
            h = name_to_hang.get(os.path.basename(mm.group(4)))
            if h is not None:
                cur[pid] = h["i"]
        elif mm := LINE_NO_REPORT.match(line):
            pid = int(mm.group(3))
            no_report_lines.setdefault(pid, []).append(mm.group(4))
            hs = by_pid.get(pid, [])
            k = cur.get(pid, -1) + (1 if busy_s(line) < 2.5 else 0)
            if 0 <= k < len(hs):
                hs[k]["no_report"].append(line)
                cur[pid] = k
            else:
                orphan_no_report.append(line)
        elif mm := LINE_FATAL.match(line):
            fatal_lines.setdefault(int(mm.group(2)), []).append(line)
        elif mm := LINE_TOTAL.match(line):
            total, fatal_total = int(mm.group(1)), int(mm.group(2) or 0)
        elif mm := LINE_LIMITED.match(line):
            limited = int(mm.group(1))
        elif mm := LINE_TAILS.match(line):
            tails = int(mm.group(1))
        elif mm := LINE_LIMIT_SAID.match(line):
            limit_said.append(mm.group(1))
        elif mm := LINE_BEHIND.match(line):
            captures_dropped = int(mm.group(1) or captures_dropped or 1)
        else:
            other.append(line)
    missing_files = [p for _, p in report_lines if not os.path.exists(p)]
    report_names = {os.path.basename(p) for _, p in report_lines}
    silent_reports = [r["name"] for r in reports if r["name"] not in report_names]

    # Each required hang: reported, dropped, capped or unaccounted.
    capped_left = limited or 0
    for h in hangs:
        if h["reports"]:
            h["fate"] = "reported"
        elif h["no_report"]:
            h["fate"] = "dropped"
        elif h in required and capped_left > 0:
            capped_left -= 1
            h["fate"] = "capped"
        else:
            h["fate"] = "unaccounted" if h["end"] is not None else "missed"
    count = lambda hs, fate: sum(1 for h in hs if h["fate"] == fate)  # noqa: E731
    multi = [h for h in hangs if len(h["reports"]) > 1]
    said_both = [h for h in hangs if h["reports"] and h["no_report"]]
    fatal_expected = [h for h in required if h["end"] in ("killed", "exited") and h["fate"] == "reported"]
    fatal_missing = [h for h in fatal_expected if not fatal_lines.get(h["pid"])]
    fatal_wrong = [h for h in fatal_expected
                   if not any(r["hang_end"] == h["end"] for r in h["reports"])]
    returned_wrong = [h for h in required if h["end"] == "returned" and h["fate"] == "reported"
                      and not any(r["hang_end"] == "returned_to_wait" for r in h["reports"])]
    fatal_line_count = sum(len(v) for v in fatal_lines.values())

    # Sentry: events by report id.
    rx = m["receiver"]
    ids = [i for i in rx.event_ids if i]
    report_ids = {r["id"] for r in reports if "error" not in r}
    spool = os.path.join(m["report_dir"], "sentry-spool")
    spooled = len([n for n in os.listdir(spool) if n.endswith(".envelope")]) if os.path.isdir(spool) else 0

    samples = m["samples"]
    last = samples[-1] if samples else {}
    return {
        "seed": seed, "tree_done": tree_done, "churn": churn,
        "hangs": len(hangs), "required": len(required), "cut": len(cut), "cut_detected": count(cut, "reported")
        + count(cut, "dropped"), "short": len(short),
        "reported": count(required, "reported"), "dropped": count(required, "dropped"),
        "capped": count(required, "capped"), "unaccounted": count(required, "unaccounted"),
        "unaccounted_list": [h for h in required if h["fate"] == "unaccounted"],
        "fatal_required": sum(1 for h in required if h["end"] in ("killed", "exited")),
        "spin": sum(1 for h in required if h.get("kind") == "spin"),
        "reports": len(reports), "broken_reports": broken, "spurious": spurious, "multi": multi,
        "no_final": no_final, "report_lines": len(report_lines), "missing_files": missing_files,
        "silent_reports": silent_reports, "no_report_lines": sum(len(v) for v in no_report_lines.values()),
        "no_report_reasons": sorted({r for v in no_report_lines.values() for r in v}),
        "fatal_lines": fatal_line_count, "fatal_missing": fatal_missing, "fatal_wrong": fatal_wrong,
        "returned_wrong": returned_wrong, "total_line": total, "fatal_total": fatal_total, "limited": limited,
        "said_both": said_both, "captures_dropped": captures_dropped, "orphan_no_report": orphan_no_report,
        "repeated": repeated, "other": other, "tails": tails, "limit_said": limit_said,
        "envelopes": rx.envelopes, "events_matched": len(report_ids & set(ids)),
        "events_unknown": len(set(ids) - report_ids), "events_repeated": len(ids) - len(set(ids)),
        "spooled": spooled, "sentry_problems": rx.problems,
        "metrics_last": last,
    }


# ---- growth ----

def growth(m):
    samples = [s for s in m["samples"] if s["elapsed_s"] <= m["seconds"]]
    warm = min(600.0, m["seconds"] / 3)
    span = min(60.0, warm / 2)
    base = [s for s in samples if warm - span <= s["elapsed_s"] <= warm]
    upto = [s for s in samples if s["elapsed_s"] <= warm]
    end = [s for s in samples if s["elapsed_s"] >= m["seconds"] - span]
    after = [s for s in samples if s["elapsed_s"] >= warm]
    if not base or not end or not after:
        return {"ok": False, "why": "too few samples", "warm_s": warm}
    rss_base = max(s["rss_kib"] for s in base) / 1024
    rss_end = max(s["rss_kib"] for s in end) / 1024
    rss_allowed = max(rss_base * RSS_SLACK_FRACTION, RSS_SLACK_MIB)
    fds_warm_max = max(s["fds"] for s in upto)
    thr_warm_max = max(s["threads"] for s in upto)
    fds_end_max = max(s["fds"] for s in end)
    thr_end_max = max(s["threads"] for s in end)
    g = {"warm_s": warm, "span_s": span, "rss_base": rss_base, "rss_end": rss_end, "rss_allowed": rss_allowed,
         "rss_ok": rss_end - rss_base <= rss_allowed,
         "hwm_end": max(s["hwm_kib"] for s in samples) / 1024,
         "fds_warm": (min(s["fds"] for s in upto), fds_warm_max),
         "fds_after": (min(s["fds"] for s in after), max(s["fds"] for s in after)), "fds_end_max": fds_end_max,
         "fds_ok": fds_end_max <= fds_warm_max + FDS_SLACK,
         "thr_warm": (min(s["threads"] for s in upto), thr_warm_max),
         "thr_after": (min(s["threads"] for s in after), max(s["threads"] for s in after)),
         "thr_end_max": thr_end_max, "thr_ok": thr_end_max <= thr_warm_max,
         "cpu_s": samples[-1]["cpu_s"], "n_after": len(after)}
    g["ok"] = g["rss_ok"] and g["fds_ok"] and g["thr_ok"]
    return g


# ---- the plot ----

def span_text(seconds):
    """10 min, 1.5 min, 40 s."""
    return f"{seconds / 60:g} min" if seconds >= 60 and seconds % 30 == 0 else f"{seconds:.0f} s"


def nice_ticks(lo, hi, count=5, integers=False):
    """Round tick values covering [lo, hi] (whole numbers for a count)."""
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / count
    mag = 10 ** int(f"{raw:e}".split("e")[1])
    step = next(mag * k for k in (1, 2, 2.5, 5, 10) if mag * k >= raw and (not integers or float(mag * k).is_integer()))
    first = int(lo // step) * step
    ticks = []
    t = first
    while t <= hi + step * 1e-9:
        ticks.append(round(t, 10))
        t += step
    if ticks[-1] < hi:
        ticks.append(round(ticks[-1] + step, 10))
    return ticks


def tick_label(v):
    return f"{v:,.0f}" if abs(v - round(v)) < 1e-9 else f"{v:,.1f}" if abs(v * 10 - round(v * 10)) < 1e-6 else f"{v:g}"


def write_svg(path, m, acc, g):
    samples = m["samples"]
    minutes = [s["elapsed_s"] / 60 for s in samples]
    panels = [
        ("agent RSS, MiB (VmRSS; dashed: VmHWM)", [s["rss_kib"] / 1024 for s in samples],
         [s["hwm_kib"] / 1024 for s in samples], "#1f77b4"),
        ("open file descriptors", [s["fds"] for s in samples], None, "#d62728"),
        ("threads", [s["threads"] for s in samples], None, "#2ca02c"),
        ("report directory, MiB", [s["report_dir_bytes"] / 2 ** 20 for s in samples], None, "#9467bd"),
    ]
    width, left, right, top, ph, gap = 900, 80, 30, 80, 150, 50
    height = top + len(panels) * (ph + gap) + 10
    pw = width - left - right
    x_end = max(minutes[-1] if minutes else 1, m["seconds"] / 60)
    xt = nice_ticks(0, x_end, 10)
    x_max = xt[-1]
    sx = lambda v: left + v / x_max * pw  # noqa: E731
    title = f"hangwatch soak: {span_text(m['seconds'])}, seed {acc['seed']}, {m['workers']} workers"
    subtitle = (f"{acc['required']:,} hangs: {acc['reported']:,} reported, {acc['dropped']:,} dropped, "
                f"{acc['capped']:,} capped, {acc['unaccounted']:,} unaccounted; dashed line: end of warm-up "
                f"({span_text(g.get('warm_s', 0))})")
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{width / 2}" y="22" text-anchor="middle" font-size="16" font-weight="bold">'
           f'{escape(title)}</text>',
           f'<text x="{width / 2}" y="42" text-anchor="middle" fill="#555">{escape(subtitle)}</text>']
    for i, (ptitle, ys, ys2, colour) in enumerate(panels):
        y0 = top + i * (ph + gap)
        values = ys + (ys2 or [])
        hi = max(values + [0])
        integers = all(float(v).is_integer() for v in values)
        yt = nice_ticks(0, max(hi, 4 if integers else 0.1), 4, integers)  # from zero: growth shows as it is
        y_lo, y_hi = yt[0], yt[-1]
        sy = lambda v, y0=y0, y_lo=y_lo, y_hi=y_hi: y0 + ph - (v - y_lo) / (y_hi - y_lo) * ph  # noqa: E731
        out.append(f'<text x="{left}" y="{y0 - 8}" font-weight="bold">{escape(ptitle)}</text>')
        out.append(f'<rect x="{left}" y="{y0}" width="{pw}" height="{ph}" fill="none" stroke="#888"/>')
        for t in yt:
            y = sy(t)
            out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + pw}" y2="{y:.1f}" stroke="#eee"/>')
            out.append(f'<line x1="{left - 4}" y1="{y:.1f}" x2="{left}" y2="{y:.1f}" stroke="#888"/>')
            out.append(f'<text x="{left - 7}" y="{y + 4:.1f}" text-anchor="end">{tick_label(t)}</text>')
        for t in xt:
            x = sx(t)
            out.append(f'<line x1="{x:.1f}" y1="{y0 + ph}" x2="{x:.1f}" y2="{y0 + ph + 4}" stroke="#888"/>')
            out.append(f'<text x="{x:.1f}" y="{y0 + ph + 17}" text-anchor="middle">{tick_label(t)}</text>')
        if g.get("warm_s"):
            x = sx(g["warm_s"] / 60)
            out.append(f'<line x1="{x:.1f}" y1="{y0}" x2="{x:.1f}" y2="{y0 + ph}" stroke="#999" '
                       f'stroke-dasharray="4 3"/>')
        for series, dash in ((ys2, ' stroke-dasharray="5 3" stroke-opacity="0.6"'), (ys, "")):
            if series:
                pts = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in zip(minutes, series))
                out.append(f'<polyline points="{pts}" fill="none" stroke="{colour}" stroke-width="1.5"{dash}/>')
        if i == len(panels) - 1:
            out.append(f'<text x="{left + pw / 2}" y="{y0 + ph + 34}" text-anchor="middle">minutes</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def write_csv(path, samples):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS, extrasaction="ignore")
        w.writeheader()
        for s in samples:
            w.writerow(s)


# ---- the table ----

def rows(m, row):
    """bench/run.py's columns: measure, n, median, p99, comparison, budget, result."""
    acc, g = m["acc"], m["growth"]
    mins = span_text(m["seconds"])
    warm = span_text(g["warm_s"])
    ran = m["finished"] and m["exit"] == 0 and acc["tree_done"]
    row(f"12 soak, {mins}, {m['workers']} workers churning (seed {acc['seed']}): agent's RSS at warm-up ({warm}) "
        f"-> end, MiB", f"{len(m['samples'])} samples", f"{g['rss_base']:.1f} -> {g['rss_end']:.1f}", "",
        f"highest VmRSS in the {g['span_s']:.0f} s before each; +{g['rss_end'] - g['rss_base']:.1f} MiB; "
        f"VmHWM {g['hwm_end']:.1f} MiB; agent CPU {g['cpu_s']:.0f} s",
        f"<= +{RSS_SLACK_FRACTION:.0%} or +{RSS_SLACK_MIB:g} MiB", "pass" if g["rss_ok"] else "FAIL")
    row("  open fds after warm-up, min..max", f"{g['n_after']} samples",
        f"{g['fds_after'][0]}..{g['fds_after'][1]}", "",
        f"up to warm-up {g['fds_warm'][0]}..{g['fds_warm'][1]}; last {g['span_s']:.0f} s max {g['fds_end_max']}",
        f"<= warm-up max + {FDS_SLACK}", "pass" if g["fds_ok"] else "FAIL")
    row("  threads after warm-up, min..max", f"{g['n_after']} samples",
        f"{g['thr_after'][0]}..{g['thr_after'][1]}", "",
        f"up to warm-up {g['thr_warm'][0]}..{g['thr_warm'][1]}", "<= warm-up max", "pass" if g["thr_ok"] else "FAIL")
    size, files = m["final_dir"]
    row("  report directory at the end, MiB", f"{files:,} files", f"{size / 2 ** 20:.1f}", "",
        f"{acc['reports']:,} reports, {size / max(1, acc['reports']) / 1024:.1f} KiB each; the directory's size cap "
        "(--max-dir-size) is hangwatch's default, 256M", "", "")
    ok = ran and acc["unaccounted"] == 0
    c = acc["churn"]
    row("  hangs: planned / detected / reported / dropped / capped / unaccounted", f"{acc['hangs']:,} hangs",
        f"{acc['required']:,} / {acc['reported'] + acc['dropped'] + acc['capped']:,} / {acc['reported']:,} / "
        f"{acc['dropped']:,} / {acc['capped']:,} / {acc['unaccounted']:,}", "",
        f"every hang 2.2-4 s and run to its end ({acc['spin']:,} spinning, {acc['fatal_required']:,} ending in the "
        f"worker's death); {acc['cut']} cut short; {acc['reports']:,} reports, {len(acc['spurious'])} of no hang; "
        f"exit line {acc['total_line']} hangs; churn: {c['start']:,} worker starts, {c['fork']:,} forks, "
        f"{c['exec']:,} execs, {c['die']:,} deaths; --daily-limit {m['daily_limit']}"
        + ("" if ran else f"; run did not finish cleanly (exit {m['exit']})"),
        "every hang accounted for", "pass" if ok else "FAIL")
    sent_ok = acc["events_matched"] + acc["spooled"] >= acc["reports"]
    row("  Sentry envelopes received / reports written", "1 run", f"{acc['envelopes']:,} / {acc['reports']:,}", "",
        f"{acc['events_matched']:,} match a report's id; {acc['events_repeated']} repeated, "
        f"{acc['events_unknown']} unknown; {acc['spooled']} left in the spool",
        "every report sent or spooled", "pass" if sent_ok else "FAIL")


def summary(m, acc, g):
    lines = [f"soak-tree seed {acc['seed']}, {m['workers']} workers, {m['seconds']} s; run took {m['took']:.0f} s, "
             f"hangwatch exit {m['exit']}" + ("" if m["finished"] else " (stopped: not finished)")
             + ("" if acc["tree_done"] else "; soak-tree did not say it was done"),
             m["agent_note"] or "agent: never described",
             f"hangs announced {acc['hangs']:,}: required {acc['required']:,}, cut short {acc['cut']} "
             f"({acc['cut_detected']} of them detected anyway)",
             f"  reported {acc['reported']:,}, dropped {acc['dropped']:,}, capped {acc['capped']:,}, "
             f"unaccounted {acc['unaccounted']:,}",
             f"  hangwatch's exit line: {acc['total_line']} hangs, {acc['fatal_total']} fatal; limits refused "
             f"{acc['limited'] or 0}{' (' + '; '.join(acc['limit_said']) + ')' if acc['limit_said'] else ''}; "
             f"follow-up reports of a hang's tail not written {acc['tails']}; captures dropped with the report "
             f"writer behind {acc['captures_dropped']}; fatal hangs planned {acc['fatal_required']}, fatal lines "
             f"{acc['fatal_lines']}",
             f"reports {acc['reports']:,}; stderr report lines {acc['report_lines']:,}; no-report lines "
             f"{acc['no_report_lines']}" + (f" ({'; '.join(acc['no_report_reasons'])})" if acc["no_report_reasons"]
                                            else ""),
             f"Sentry: {acc['envelopes']:,} envelopes, {acc['events_matched']:,} matching reports, "
             f"{acc['events_repeated']} repeated, {acc['events_unknown']} unknown, {acc['spooled']} spooled"]
    last = acc["metrics_last"]
    if last:
        lines.append(f"last metrics ({last['elapsed_s']:.0f} s): hangs_total {last['hangs_total']}, "
                     f"reports_written_total {last['reports_written_total']}, reports_dropped_total "
                     f"{last['reports_dropped_total']} {last.get('_dropped_by_reason') or ''}, sentry sent "
                     f"{last['sentry_sent_total']}")
    if g.get("warm_s") is not None and "rss_base" in g:
        lines.append(f"growth after warm-up ({span_text(g['warm_s'])}): RSS {g['rss_base']:.1f} -> "
                     f"{g['rss_end']:.1f} MiB (allowed +{g['rss_allowed']:.1f}), fds {g['fds_after'][0]}.."
                     f"{g['fds_after'][1]} (warm-up {g['fds_warm'][0]}..{g['fds_warm'][1]}), threads "
                     f"{g['thr_after'][0]}..{g['thr_after'][1]} (warm-up {g['thr_warm'][0]}..{g['thr_warm'][1]})")
    findings = []
    for h in acc["unaccounted_list"][:20]:
        findings.append(f"unaccounted: pid {h['pid']} hang at {h['start_s']:.3f} planned {h['planned_ms']} ms, "
                        f"ended {h['end']} after {h['busy_ms']} ms ({h.get('kind')})")
    for r in acc["spurious"][:20]:
        findings.append(f"report of no hang: {r['name']} (pid {r['pid']}, {r['hang_type']}, start "
                        f"{r['start_s']:.3f}, end {r['hang_end']})")
    for h in acc["multi"][:10]:
        findings.append(f"{len(h['reports'])} reports for one hang: pid {h['pid']}: "
                        + ", ".join(r["name"] for r in h["reports"]))
    for r in acc["broken_reports"][:10]:
        findings.append(f"unreadable report {r['name']}: {r['error']}")
    for r in acc["no_final"][:10]:
        findings.append(f"report without final duration: {r['name']}")
    for p in acc["missing_files"][:10]:
        findings.append(f"stderr names a report that is not there: {p}")
    for n in acc["silent_reports"][:10]:
        findings.append(f"report with no line on stderr: {n}")
    for h in acc["fatal_missing"][:10]:
        findings.append(f"fatal hang without its 'fatal hang' line: pid {h['pid']} ({h['end']})")
    for h in acc["fatal_wrong"][:10]:
        findings.append(f"fatal hang whose report's hang_end is not {h['end']}: pid {h['pid']}: "
                        + ", ".join(f"{r['name']}={r['hang_end']}" for r in h["reports"]))
    for h in acc["returned_wrong"][:10]:
        findings.append(f"returned hang whose report's hang_end is not returned_to_wait: pid {h['pid']}: "
                        + ", ".join(f"{r['name']}={r['hang_end']}" for r in h["reports"]))
    for h in acc["said_both"][:10]:
        findings.append(f"hang said 'no report', then reported: pid {h['pid']}: {h['no_report'][0][:160]} ...; then "
                        + ", ".join(r["name"] for r in h["reports"]))
    for line in acc["orphan_no_report"][:10]:
        findings.append(f"'no report' line of no hang: {line}")
    for line in acc["repeated"][:10]:
        findings.append(f"stderr line repeated: {line}")
    if acc["total_line"] is not None and acc["total_line"] != acc["reported"] + acc["dropped"] + acc["capped"] \
            + acc["cut_detected"] + len({(r['pid'], round(r['start_s'])) for r in acc["spurious"]}):
        findings.append(f"exit line counts {acc['total_line']} hangs, the accounting finds "
                        f"{acc['reported'] + acc['dropped'] + acc['capped'] + acc['cut_detected']} "
                        f"(+{len(acc['spurious'])} reports of no hang)")
    for p in acc["sentry_problems"][:10]:
        findings.append(f"Sentry receiver: {p}")
    for line in acc["other"]:
        findings.append(f"other stderr: {line}")
    return lines, findings


def measure(bin_dir, out_dir, minutes=60.0, workers=20, seed=None, daily_limit=0, interval=5.0):
    """The whole soak: runs it, accounts for its hangs, judges growth, writes OUT/soak.csv and
    OUT/soak.svg; the run's record with its "acc" (accounting), "growth" and "ok"."""
    m = run(bin_dir, out_dir, minutes, workers, seed, daily_limit, interval)
    m["acc"] = acc = account(m)
    m["growth"] = g = growth(m)
    write_csv(os.path.join(out_dir, "soak.csv"), m["samples"])
    if m["samples"]:
        write_svg(os.path.join(out_dir, "soak.svg"), m, acc, g)
    m["ok"] = m["finished"] and m["exit"] == 0 and acc["tree_done"] and acc["unaccounted"] == 0 and g.get("ok", False)
    return m


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build")
    ap.add_argument("--minutes", type=float, default=60.0)
    ap.add_argument("--out", default=None, help="default BUILD/soak")
    ap.add_argument("--workers", type=int, default=20)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--daily-limit", type=int, default=0)
    ap.add_argument("--interval", type=float, default=5.0, help="seconds between samples")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    out_dir = os.path.abspath(a.out or os.path.join(build, "soak"))
    m = measure(os.path.join(build, "bin"), out_dir, a.minutes, a.workers, a.seed, a.daily_limit, a.interval)
    lines, findings = summary(m, m["acc"], m["growth"])
    print("\n".join(lines))
    if findings:
        print(f"findings ({len(findings)}):")
        print("\n".join("  " + f for f in findings))
    if "rss_base" in m["growth"]:
        print()
        table = []
        rows(m, lambda *cols: table.append(cols))
        for r in table:
            print("| " + " | ".join(str(c) for c in r) + " |")
    print(f"\nfiles: {out_dir}/soak.csv, {out_dir}/soak.svg, {out_dir}/soak-tree.out, {out_dir}/hangwatch.err, "
          f"{out_dir}/agent-fds.txt, {out_dir}/reports")
    why = m["growth"].get("why")
    print("soak: " + ("pass" if m["ok"] else "FAIL") + (f" ({why})" if why else ""))
    return 0 if m["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
