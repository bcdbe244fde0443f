"""Integration tests of hangwatch's exports beyond one machine
(docs/metrics.md, docs/decisions.md §29-30), against the real servers:

- Prometheus (Debian's prometheus) scrapes `hangwatch run --metrics-listen`
  while the watched program hangs twice, and its HTTP API must read the
  hang counter and the duration histogram's count at 2; promtool checks
  the exposition text by Prometheus's own rules;
- the metrics textfile, bad options, hostile HTTP clients;
- a Sentry envelope receiver (Python's http.server on 127.0.0.1) that parses
  every envelope with the Sentry SDK's own parser (Debian's
  python3-sentry-sdk, `sentry_sdk.envelope.Envelope.deserialize`) and
  checks the app-hang event; taken down and brought back, it must get an
  event made meanwhile exactly once, from the agent or `hangwatch upload`.

Every server is started here on 127.0.0.1 on a free port and stopped at the
end; waiting is polling with generous deadlines.
"""
import glob
import http.server
import json
import os
import re
import threading
import uuid
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hwtest  # noqa: E402
from hwtest import check  # noqa: E402

PROMETHEUS = "/usr/bin/prometheus"
PROMTOOL = "/usr/bin/promtool"


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Watched:
    """`hangwatch run [options] -- hang-on-command`: a loop that hangs when told."""

    def __init__(self, options, report_dir=None, env=None):
        self.owned = report_dir is None
        self.report_dir = report_dir or tempfile.mkdtemp(prefix="hw-exp-")
        if self.owned:
            os.rmdir(self.report_dir)
        full_env = dict(os.environ)
        full_env.update(env or {})
        self.stderr_path = os.path.join(tempfile.gettempdir(), f"hw-exp-stderr-{os.getpid()}-{id(self)}")
        self.stderr_file = open(self.stderr_path, "w+")
        self.proc = subprocess.Popen(
            [hwtest.binary("hangwatch"), "run", "--report-dir", self.report_dir] + options
            + ["--", hwtest.binary("hang-on-command")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr_file, text=True, env=full_env)
        self.expect("ready", 20)

    def expect(self, word, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.2)
            if ready:
                line = self.proc.stdout.readline()
                if not line:
                    hwtest.fail(f"the program ended before saying '{word}'\n{self.stderr()}")
                if line.startswith(word):
                    return line
        hwtest.fail(f"timed out waiting for the program to say '{word}'\n{self.stderr()}")

    def hang(self, ms):
        self.proc.stdin.write(f"hang {ms}\n")
        self.proc.stdin.flush()
        self.expect("hung", 30)

    def stderr(self):
        self.stderr_file.flush()
        with open(self.stderr_path) as f:
            return f.read()

    def finish(self, timeout=30):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write("quit\n")
                self.proc.stdin.flush()
            except BrokenPipeError:
                pass
        code = self.proc.wait(timeout)
        return code

    def reports(self):
        return sorted(p for p in os.listdir(self.report_dir) if p.endswith(".json")) \
            if os.path.isdir(self.report_dir) else []

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.stderr_file.close()
        os.unlink(self.stderr_path)
        if self.owned:
            shutil.rmtree(self.report_dir, ignore_errors=True)


def scrape(port, timeout=5):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=timeout) as r:
        check(r.status == 200, f"status {r.status}")
        ctype = r.headers["Content-Type"]
        check(ctype.startswith("text/plain; version=0.0.4"), f"Content-Type {ctype}")
        return r.read().decode()


def sample(text, series):
    """The value of `series` (name{labels} exactly as rendered) in exposition text, or None."""
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.split(" ")[-1])
    return None


def promtool_check(text, where):
    p = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, timeout=30)
    check(p.returncode == 0, f"promtool check metrics on {where}: {p.stdout}{p.stderr}")


class Prometheus:
    """Debian's Prometheus, scraping one target every second, on its own port and storage."""

    def __init__(self, target):
        self.dir = tempfile.mkdtemp(prefix="hw-prom-")
        self.port = free_port()
        config = os.path.join(self.dir, "prometheus.yml")
        with open(config, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
                    "scrape_configs:\n  - job_name: hangwatch\n    static_configs:\n"
                    f"      - targets: ['{target}']\n")
        self.log = open(os.path.join(self.dir, "log"), "w+")
        self.proc = subprocess.Popen(
            [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={self.dir}/data",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
            stdout=self.log, stderr=subprocess.STDOUT)

    def query(self, expr):
        """The instant vector of `expr`: [(labels, value)], [] while Prometheus is not up."""
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                body = json.load(r)
        except OSError:
            check(self.proc.poll() is None, f"prometheus exited:\n{self.logs()}")
            return []
        check(body.get("status") == "success", f"query {expr}: {body}")
        return [(x["metric"], float(x["value"][1])) for x in body["data"]["result"]]

    def wait_value(self, expr, want, what, timeout=60):
        seen = []

        def reached():
            nonlocal seen
            seen = self.query(expr)
            return any(v == want for _, v in seen)
        try:
            hwtest.wait_for(reached, what, timeout)
        except AssertionError:
            hwtest.fail(f"{what}: Prometheus says {expr} = {seen}\n{self.logs()}")
        time.sleep(0.2)  # polite to the API between polls of different series
        return seen

    def logs(self):
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()[-3000:]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def case_prometheus_scrapes_two_hangs():
    """Prometheus, scraping a watched program with two hangs, shows the counter and the histogram's count at 2."""
    if not os.access(PROMETHEUS, os.X_OK):
        print("prometheus is not installed (scripts/ensure-deps.sh test)")
        return hwtest.SKIP
    port = free_port()
    w = Watched(["--threshold", "300ms", "--metrics-listen", f"127.0.0.1:{port}"])
    prom = None
    try:
        promtool_check(scrape(port), "the first scrape")
        prom = Prometheus(f"127.0.0.1:{port}")
        # Its hangs sleep: where their time went is "blocked" (on a sleep) on
        # an idle machine; on a busy one the wake-up may wait for a CPU long
        # enough to make another verdict right, so the counter by cause is
        # held to each report's own verdict.
        hangs = 'hangwatch_hangs_total{process="hang-on-command",hang_type="hang",cause="%s"}'
        count = 'hangwatch_hang_duration_seconds_count{process="hang-on-command",hang_type="hang"}'
        # The series are there at 0 before the first hang (so increase() sees it).
        prom.wait_value("up", 1, "Prometheus to scrape hangwatch")
        prom.wait_value(hangs % "blocked", 0, "the hang counter at 0 before any hang")
        w.hang(600)
        w.hang(500)
        prom.wait_value('sum(hangwatch_hangs_total{process="hang-on-command",hang_type="hang"})', 2,
                        "the hang counter to read 2")
        hwtest.wait_for(lambda: len(w.reports()) == 2, "two reports", 30)
        causes = [hwtest.load_report(os.path.join(w.report_dir, r))["hangwatch"].get("time", {})
                  .get("cause", "unknown") for r in w.reports()]
        for cause in set(causes):
            prom.wait_value(hangs % cause, causes.count(cause), f"the hang counter of cause {cause}")
        seen = prom.wait_value(count, 2, "the duration histogram's count to read 2")
        labels = seen[0][0]
        check(labels.get("detector") == "runloop" and "pid" not in labels, f"labels {labels}")
        # Both final durations (0.5 and 0.6 s) fall in the (0.5, 1] and [0, 1] buckets.
        prom.wait_value('hangwatch_hang_duration_seconds_bucket{process="hang-on-command",le="1"}', 2,
                        "both hangs at or under 1 s in the histogram")
        prom.wait_value('hangwatch_hang_duration_seconds_bucket{process="hang-on-command",le="0.25"}', 0,
                        "no hang at or under 0.25 s")
        total = prom.query('hangwatch_hang_duration_seconds_sum{process="hang-on-command"}')
        check(total and 1.0 <= total[0][1] <= 1.5, f"sum of final durations {total}")
        prom.wait_value('hangwatch_reports_written_total{process="hang-on-command",hang_type="hang"}', 2,
                        "two reports written")
        prom.wait_value('hangwatch_watched_processes{process="hang-on-command"}', 1, "one watched process")
        final = scrape(port)
        promtool_check(final, "the scrape after two hangs")
        check(sample(final, 'hangwatch_loops_hung{process="hang-on-command"}') == 0, final)
        hung = sample(final, 'hangwatch_hung_seconds_total{process="hang-on-command",detector="runloop"}')
        check(hung is not None and 1.0 <= hung <= 1.5, f"hung seconds {hung}")
        check(len(w.reports()) == 2, f"reports {w.reports()}")
    finally:
        if prom:
            prom.stop()
        code = w.finish()
        err = w.stderr()
        w.close()
    check(code == 0, f"hangwatch exit {code}\n{err}")


def case_metrics_file():
    """--metrics-file: written at start, rewritten atomically after a hang, final counts at the end, 0644."""
    d = tempfile.mkdtemp(prefix="hw-textfile-")
    path = os.path.join(d, "hangwatch.prom")
    w = Watched(["--threshold", "300ms", "--metrics-file", path])
    try:
        series = 'hangwatch_hangs_total{process="hang-on-command",detector="runloop",hang_type="hang",cause="blocked"}'

        def reads(value):
            with open(path) as f:
                return sample(f.read(), series) == value
        # Written before the program started, then again once it registered.
        check(os.path.exists(path), "no metrics file once the program runs")
        hwtest.wait_for(lambda: reads(0), "the file to show the program at 0 hangs", 20)
        check(os.stat(path).st_mode & 0o777 == 0o644, f"mode {oct(os.stat(path).st_mode)}")
        w.hang(500)

        def counted():
            with open(path) as f:
                text = f.read()
            return "\n".join(ln for ln in text.splitlines() if ln.startswith("hangwatch_hangs_total")) + \
                "\nstderr:\n" + w.stderr()
        hwtest.wait_for(lambda: reads(1), "the file to count the hang", 20, seen=counted)
        with open(path) as f:
            promtool_check(f.read(), path)
    finally:
        code = w.finish()
        err = w.stderr()
        w.close()
    try:
        check(code == 0, f"exit {code}\n{err}")
        with open(path) as f:
            text = f.read()
        check(sample(text, 'hangwatch_watched_processes{process="hang-on-command"}') == 0,
              f"the last write has the final counts:\n{text}")
        check(os.listdir(d) == ["hangwatch.prom"], f"temporary files left: {os.listdir(d)}")
    finally:
        shutil.rmtree(d, ignore_errors=True)


def case_metrics_drops():
    """Hangs over the daily limit are counted as hangs and as dropped reports, by reason."""
    d = tempfile.mkdtemp(prefix="hw-drops-")
    path = os.path.join(d, "hangwatch.prom")
    w = Watched(["--threshold", "300ms", "--daily-limit", "1", "--quiet", "--metrics-file", path])
    try:
        w.hang(500)
        w.hang(500)
    finally:
        code = w.finish()
        err = w.stderr()
        w.close()
    try:
        check(code == 0, f"exit {code}\n{err}")
        with open(path) as f:
            text = f.read()
        want = {'hangwatch_hangs_total{process="hang-on-command",detector="runloop",hang_type="hang",cause="blocked"}': 2,
                'hangwatch_reports_written_total{process="hang-on-command",hang_type="hang"}': 1,
                'hangwatch_reports_dropped_total{process="hang-on-command",reason="daily_limit"}': 1,
                'hangwatch_reports_dropped_total{process="hang-on-command",reason="write_error"}': 0,
                'hangwatch_hang_duration_seconds_count{process="hang-on-command",detector="runloop",hang_type="hang"}': 2}
        for series, value in want.items():
            check(sample(text, series) == value, f"{series} should be {value}:\n{text}")
    finally:
        shutil.rmtree(d, ignore_errors=True)


def case_watch_metrics():
    """`hangwatch watch -p PID --metrics-listen`: a running program's hang, counted and served."""
    if os.geteuid() != 0 or not os.path.exists("/sys/kernel/btf/vmlinux"):
        print("the kernel observer needs root and BTF")
        return hwtest.SKIP
    target = subprocess.Popen([hwtest.binary("hang-on-command")], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    check(target.stdout.readline().startswith("ready"), "the target did not start")
    port = free_port()
    d = tempfile.mkdtemp(prefix="hw-watch-")
    agent = subprocess.Popen([hwtest.binary("hangwatch"), "watch", "--report-dir", os.path.join(d, "r"),
                              "--threshold", "300ms", "--metrics-listen", f"127.0.0.1:{port}", "-p",
                              str(target.pid)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    hangs = 'hangwatch_hangs_total{process="hang-on-command",detector="runloop",hang_type="hang",cause="blocked"}'

    def serves(value):
        try:
            return sample(scrape(port, timeout=2), hangs) == value
        except OSError:
            return False
    try:
        hwtest.wait_for(lambda: serves(0), "watch to serve the target's counter at 0", 30)
        target.stdin.write("hang 600\n")
        target.stdin.flush()
        check(target.stdout.readline().startswith("hung"), "the target did not hang")
        hwtest.wait_for(lambda: serves(1), "the hang to be counted", 30)
    finally:
        target.stdin.write("quit\n")
        target.stdin.flush()
        target.wait(30)
        out, err = agent.communicate(timeout=60)
        shutil.rmtree(d, ignore_errors=True)
    check(agent.returncode == 0, f"watch exit {agent.returncode}\n{err}")


def run_expecting_usage_error(options, message):
    """hangwatch run OPTIONS -- touch MARK must exit 2 saying `message`, and never start the program."""
    d = tempfile.mkdtemp(prefix="hw-bad-")
    mark = os.path.join(d, "started")
    try:
        p = subprocess.run([hwtest.binary("hangwatch"), "run", "--report-dir", os.path.join(d, "r")] + options
                           + ["--", "/usr/bin/touch", mark], capture_output=True, text=True, timeout=30)
        check(p.returncode == 2, f"{options}: exit {p.returncode}, expected 2\n{p.stderr}")
        check(message in p.stderr, f"{options}: expected '{message}' in:\n{p.stderr}")
        check(not os.path.exists(mark), f"{options}: the program was started")
    finally:
        shutil.rmtree(d, ignore_errors=True)


def case_bad_options():
    """A malformed address, a port in use, an unwritable metrics file: exit 2 before the program starts."""
    for value, message in [("9464", "no port"), ("127.0.0.1:99999", "above 65535"),
                           ("[::1:9464", "brackets"), ("", "empty")]:
        run_expecting_usage_error(["--metrics-listen", value], f"invalid --metrics-listen '{value}'")
        run_expecting_usage_error(["--metrics-listen", value], message)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        run_expecting_usage_error(["--metrics-listen", f"127.0.0.1:{port}"],
                                  f"cannot listen on 127.0.0.1:{port}: the port is in use by another program")
    run_expecting_usage_error(["--metrics-file", "/nonexistent-dir/x.prom"],
                              "cannot write the metrics file /nonexistent-dir/x.prom")
    run_expecting_usage_error(["--metrics-file", "/tmp/"], "invalid --metrics-file")
    # The same for watch, which checks before it watches anything.
    p = subprocess.run([hwtest.binary("hangwatch"), "watch", "-p", str(os.getpid()), "--metrics-listen", "x"],
                       capture_output=True, text=True, timeout=30)
    check(p.returncode == 2 and "invalid --metrics-listen" in p.stderr, f"watch: {p.returncode} {p.stderr}")


def case_hostile_clients():
    """Clients that stall, flood headers or open too many connections hold slots, never detection."""
    port = free_port()
    w = Watched(["--threshold", "300ms", "--metrics-listen", f"127.0.0.1:{port}"])
    stalled = []
    try:
        # More stalled half-requests than the server has slots.
        for _ in range(24):
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            stalled.append(s)
        # A request whose headers never end within the server's bound.
        flood = socket.create_connection(("127.0.0.1", port), timeout=5)
        try:
            flood.sendall(b"GET /metrics HTTP/1.1\r\n" + b"X-Flood: " + b"a" * 200000 + b"\r\n\r\n")
        except OSError:
            pass  # the server may close it before all is sent
        flood.close()
        # Detection and capture go on exactly as before.
        w.hang(600)
        hwtest.wait_for(lambda: len(w.reports()) == 1, "the report of the hang", 20)
        with open(os.path.join(w.report_dir, w.reports()[0])) as f:
            apm = json.load(f)["hangwatch"]
        check(apm["block_duration_us"] <= 300000 + 100000, f"detected late: {apm['block_duration_us']} us")
        for s in stalled:
            s.close()
        stalled = []

        # Once the stalled clients are gone, scrapes are served again.
        def served():
            try:
                return "hangwatch_hangs_total" in scrape(port, timeout=2)
            except OSError:
                return False
        hwtest.wait_for(served, "a scrape to be served after the stalled clients left", 30)
        # Other methods and paths get an answer, not the metrics.
        req = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", data=b"x" * 100000, method="POST")
        try:
            urllib.request.urlopen(req, timeout=5)
            hwtest.fail("POST /metrics was accepted")
        except urllib.error.HTTPError as e:
            check(e.code == 405, f"POST: {e.code}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5)
            hwtest.fail("GET / was answered with metrics")
        except urllib.error.HTTPError as e:
            check(e.code == 404, f"GET /: {e.code}")
    finally:
        for s in stalled:
            s.close()
        code = w.finish()
        err = w.stderr()
        w.close()
    check(code == 0, f"exit {code}\n{err}")


def case_slowloris():
    """200 connections from one address, each trickling a header line at a
    time and reconnecting when closed, for 8 s: a scrape during the attack
    is answered within 1 s every time."""
    port = free_port()
    w = Watched(["--metrics-listen", f"127.0.0.1:{port}"])
    stop = threading.Event()
    opened = [0]

    def attack():
        conns = []
        while not stop.is_set():
            while len(conns) < 200 and not stop.is_set():
                try:
                    s = socket.create_connection(("127.0.0.1", port), timeout=2)
                    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
                    conns.append(s)
                    opened[0] += 1
                except OSError:
                    break
            alive = []
            for s in conns:
                try:
                    s.sendall(b"X-Slow: a\r\n")  # one more line: never the end of the headers
                    alive.append(s)
                except OSError:
                    s.close()
            conns = alive
            stop.wait(0.5)
        for s in conns:
            s.close()

    attacker = threading.Thread(target=attack)
    attacker.start()
    times = []
    try:
        hwtest.wait_for(lambda: opened[0] >= 200, "200 slow connections", 20)
        for _ in range(8):
            started = time.monotonic()
            text = scrape(port, timeout=5)
            times.append(time.monotonic() - started)
            check("hangwatch_hangs_total" in text, "the scrape did not get the metrics")
            stop.wait(0.8)
        check(max(times) < 1.0, f"scrapes during the attack took {['%.3f' % t for t in times]} s")
        check(opened[0] > 200, f"the slow connections were never closed by the server ({opened[0]} opened)")
    finally:
        stop.set()
        attacker.join(30)
        code = w.finish()
        err = w.stderr()
        w.close()
    check(code == 0, f"exit {code}\n{err}")


def case_library_metrics():
    """The C library's agent exports through its config: the textfile counts the hang; a
    port in use makes hangwatch_start fail (-ECHILD) with the agent's reason on stderr."""
    d = tempfile.mkdtemp(prefix="hw-libmetrics-")
    env = {k: v for k, v in os.environ.items() if k not in ("HANGWATCH_AGENT", "LD_PRELOAD")}
    try:
        path = os.path.join(d, "lib.prom")
        p = subprocess.run([hwtest.binary("api-metrics"), os.path.join(d, "r"), path], capture_output=True,
                           text=True, timeout=60, env=env)
        check(p.returncode == 0 and "start: 0" in p.stdout and "hung" in p.stdout, f"{p.stdout}\n{p.stderr}")
        with open(path) as f:
            text = f.read()
        for series in ('hangwatch_hangs_total{process="api-metrics",detector="runloop",hang_type="hang",cause="blocked"}',
                       'hangwatch_hang_duration_seconds_count{process="api-metrics",detector="runloop",hang_type="hang"}',
                       'hangwatch_reports_written_total{process="api-metrics",hang_type="hang"}'):
            check(sample(text, series) == 1, f"{series} in the library agent's last write:\n{text}")
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen(1)
            port = taken.getsockname()[1]
            p = subprocess.run([hwtest.binary("api-metrics"), os.path.join(d, "r"), path, f"127.0.0.1:{port}"],
                               capture_output=True, text=True, timeout=60, env=env)
        check(p.returncode == 0 and "start: -10" in p.stdout, f"expected -ECHILD: {p.stdout}\n{p.stderr}")
        check("the port is in use by another program" in p.stderr, p.stderr)
    finally:
        shutil.rmtree(d, ignore_errors=True)


# ---- Sentry ----

SENTRY_KEY = "0123456789abcdef0123456789abcdef"
SENTRY_PROJECT = "42"


class SentryReceiver:
    """Sentry's envelope endpoint on 127.0.0.1: every POST to /api/PROJECT/envelope/ with our
    key is parsed with the Sentry SDK's envelope parser and kept; it can be stopped and
    started again on the same port."""

    def __init__(self, port=None):
        from sentry_sdk.envelope import Envelope  # Debian's python3-sentry-sdk
        self.Envelope = Envelope
        self.port = port or free_port()
        self.envelopes = []  # (headers, event)
        self.problems = []
        self.answers = []  # statuses to answer the next POSTs with before 200 (not kept)
        self.posts = 0
        self.lock = threading.Lock()
        self.server = None
        self.start()

    def start(self):
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                auth = self.headers.get("X-Sentry-Auth", "")
                if self.path != f"/api/{SENTRY_PROJECT}/envelope/" or f"sentry_key={SENTRY_KEY}" not in auth:
                    receiver.problems.append(f"{self.path} {auth}")
                    self.send_response(403)
                    self.end_headers()
                    return
                with receiver.lock:
                    receiver.posts += 1
                    status = receiver.answers.pop(0) if receiver.answers else 200
                if status != 200:
                    self.send_response(status)
                    if status == 429:
                        self.send_header("Retry-After", "1")
                    self.end_headers()
                    return
                try:
                    envelope = receiver.Envelope.deserialize(body)
                    event = envelope.get_event()
                except Exception as e:  # noqa: BLE001 - a parse failure is what is tested
                    receiver.problems.append(f"unparsable envelope: {e!r}: {body[:200]!r}")
                    event = None
                with receiver.lock:
                    receiver.envelopes.append((envelope.headers if event else {}, event))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(json.dumps({"id": (event or {}).get("event_id")}).encode())

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        if self.server:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def events(self):
        with self.lock:
            return list(self.envelopes)

    def dsn(self):
        return f"http://{SENTRY_KEY}@127.0.0.1:{self.port}/{SENTRY_PROJECT}"


def build_id(path):
    out = subprocess.run(["readelf", "-n", path], capture_output=True, text=True, check=True).stdout
    m = re.search(r"Build ID: ([0-9a-f]+)", out)
    check(m is not None, f"no build-id in {path}")
    return m.group(1)


def check_event(headers, event, report, culprit_binary):
    """An app-hang event as Sentry's SDKs make them, from this report."""
    where = f"event {event.get('event_id')}"
    rid = report["report"]["id"].replace("-", "").lower()
    check(event["event_id"] == rid and headers.get("event_id") == rid, f"{where}: event id is not the report id {rid}")
    exc = event["exception"]["values"][0]
    check(exc["type"] == "AppHang" and exc["mechanism"]["type"] == "AppHang", f"{where}: exception {exc}")
    final_s = report["hangwatch"]["final_duration_us"] / 1e6
    check(f"App hanging for {final_s:.3f}"[:-1] in exc["value"], f"{where}: value {exc['value']} vs {final_s}")
    frames = exc["stacktrace"]["frames"]
    names = [f.get("function") for f in frames]
    check("hang_for_the_test" in names[-4:], f"{where}: culprit not in the last frames (innermost last): {names}")
    check(names[-1] != "main" and names.index("main") < names.index("hang_for_the_test"), f"{where}: order {names}")
    culprit = frames[names.index("hang_for_the_test")]
    check(culprit.get("filename") == "hang_on_command.c" and culprit.get("lineno", 0) > 0, f"{where}: {culprit}")
    check(culprit.get("package") == os.path.realpath(culprit_binary) and culprit.get("in_app") is True,
          f"{where}: culprit's package {culprit}")
    for f in frames:
        check(re.fullmatch(r"0x[0-9a-f]+", f.get("instruction_addr", "")), f"{where}: frame without address {f}")
    threads = event["threads"]["values"]
    check(len(threads) == len(report["crash"]["threads"]), f"{where}: {len(threads)} threads")
    hung = [t for t in threads if t["crashed"]]
    check(len(hung) == 1 and hung[0]["id"] == exc["thread_id"] == report["hangwatch"]["hung_thread"]["thread_identifier"],
          f"{where}: hung thread {hung}")
    images = event["debug_meta"]["images"]
    bid = build_id(culprit_binary)
    mine = [im for im in images if im.get("code_id") == bid]
    check(len(mine) == 1 and mine[0]["code_file"] == os.path.realpath(culprit_binary), f"{where}: images {images}")
    # Sentry's ELF debug id: the build-id's first 16 bytes as a little-endian GUID.
    want = str(uuid.UUID(bytes_le=bytes.fromhex(bid)[:16].ljust(16, b"\0")))
    check(mine[0]["debug_id"] == want, f"{where}: debug_id {mine[0]['debug_id']}, expected {want}")
    tags = event["tags"]
    check(tags.get("hangwatch.grouping_key") == report["hangwatch"]["grouping_key"]
          and tags.get("hangwatch.detector") == "runloop" and tags.get("hangwatch.hang_type") == "hang",
          f"{where}: tags {tags}")
    # The verdict of where its time went, as in the report (a sleep: blocked on sleep).
    cause = report["hangwatch"].get("time", {}).get("cause")
    check(cause and tags.get("hangwatch.cause") == cause, f"{where}: tags {tags}, report cause {cause}")
    if cause == "blocked":
        check(tags.get("hangwatch.blocked_on") == report["hangwatch"]["time"]["blocked_on"], f"{where}: tags {tags}")


def sentry_available():
    try:
        import sentry_sdk.envelope  # noqa: F401
        return True
    except ImportError:
        print("python3-sentry-sdk is not installed (scripts/ensure-deps.sh test)")
        return False


def load_reports(w):
    return [hwtest.load_report(os.path.join(w.report_dir, n)) for n in w.reports()]


def spooled(w):
    return glob.glob(os.path.join(w.report_dir, "sentry-spool", "*.envelope")) + \
        glob.glob(os.path.join(w.report_dir, "sentry-spool", "*.sending"))


def case_sentry_events():
    """One app-hang event per hang, parsed by the Sentry SDK, with the culprit and its image."""
    if not sentry_available():
        return hwtest.SKIP
    rx = SentryReceiver()
    w = Watched(["--threshold", "300ms", "--sentry-dsn", rx.dsn()])
    try:
        w.hang(600)
        w.hang(500)
        hwtest.wait_for(lambda: len(rx.events()) >= 2, "two events at the receiver", 30)
        reports = {r["report"]["id"].replace("-", "").lower(): r for r in load_reports(w)}
        check(len(reports) == 2, f"reports {list(reports)}")
        for headers, event in rx.events():
            check(event is not None, f"an envelope the SDK could not parse: {rx.problems}")
            check(event["event_id"] in reports, f"an event of no report: {event['event_id']}")
            check_event(headers, event, reports[event["event_id"]], hwtest.binary("hang-on-command"))
    finally:
        code = w.finish()
        err = w.stderr()
        w.close()
        rx.stop()
    check(code == 0 and not rx.problems, f"exit {code} {rx.problems}\n{err}")
    check(len(rx.events()) == 2, f"{len(rx.events())} events for two hangs")


def case_sentry_launch_hang():
    """A launch hang's report is complete when it is written (the process proved to be a loop,
    its final duration is in): its event goes out then, like any other complete report's."""
    if not sentry_available():
        return hwtest.SKIP
    rx = SentryReceiver()
    try:
        r = hwtest.run(["--threshold", "1s", "--sentry-dsn", rx.dsn(), "--",
                        hwtest.binary("loop-scenarios"), "launch", "1.6"])
        try:
            check(r.returncode == 0 and len(r.reports) == 1, r.describe())
            report = r.reports[0]
            check(report["hangwatch"]["hang_type"] == "launch_hang" and "final_duration_us" in report["hangwatch"],
                  f"a launch hang with its final duration: {report['hangwatch']}")
            hwtest.wait_for(lambda: len(rx.events()) >= 1, "the launch hang's event at the receiver", 30)
            headers, event = rx.events()[0]
            rid = report["report"]["id"].replace("-", "").lower()
            check(event is not None and event["event_id"] == rid, f"event {event} for report {rid}: {rx.problems}")
            check(event["tags"].get("hangwatch.hang_type") == "launch_hang", f"tags {event['tags']}")
            final_s = report["hangwatch"]["final_duration_us"] / 1e6
            value = event["exception"]["values"][0]["value"]
            check(f"App hanging for {final_s:.3f}"[:-1] in value, f"value {value} vs {final_s}")
            check(len(rx.events()) == 1 and not rx.problems, f"{len(rx.events())} events {rx.problems}")
        finally:
            hwtest.cleanup(r)
    finally:
        rx.stop()


def case_sentry_spool_exactly_once():
    """Receiver down: the event waits in the spool; back up: the agent sends it, once. Down
    until the agent ends: `hangwatch upload` sends it, once; a second upload sends nothing."""
    if not sentry_available():
        return hwtest.SKIP
    rx = SentryReceiver()
    rx.stop()
    w = Watched(["--threshold", "300ms", "--sentry-dsn", rx.dsn()])
    try:
        w.hang(500)
        hwtest.wait_for(lambda: spooled(w) and "cannot reach 127.0.0.1" in w.stderr(),
                        "the event to wait in the spool, said on stderr", 30)
        rx.start()
        hwtest.wait_for(lambda: len(rx.events()) == 1, "the agent to send the waiting event", 60)
        hwtest.wait_for(lambda: not spooled(w), "the spool to be empty once sent", 10)
        first = rx.events()[0][1]["event_id"]
        # Down again until the agent has ended: only upload can send this one.
        rx.stop()
        w.hang(400)
        hwtest.wait_for(lambda: len(w.reports()) == 2, "the second report", 20)
        code = w.finish()
        check(code == 0, f"exit {code}\n{w.stderr()}")
        check(len(spooled(w)) == 1, f"the second event waits: {spooled(w)}\n{w.stderr()}")
        rx.start()
        up = subprocess.run([hwtest.binary("hangwatch"), "upload", w.report_dir], capture_output=True, text=True,
                            timeout=60, env={k: v for k, v in os.environ.items() if k != "SENTRY_DSN"})
        check(up.returncode == 0 and "1 event sent" in up.stdout, f"upload: {up.returncode}\n{up.stdout}{up.stderr}")
        again = subprocess.run([hwtest.binary("hangwatch"), "upload", "--sentry-dsn", rx.dsn(), w.report_dir],
                               capture_output=True, text=True, timeout=60)
        check(again.returncode == 0 and "0 events sent" in again.stdout, f"second upload: {again.stdout}{again.stderr}")
        ids = [e["event_id"] for _, e in rx.events()]
        reports = sorted(r["report"]["id"].replace("-", "").lower() for r in load_reports(w))
        check(sorted(ids) == reports and ids[0] == first, f"events {ids}, reports {reports}")
        check(not rx.problems, f"{rx.problems}")
    finally:
        w.close()
        rx.stop()


def case_sentry_server_answers():
    """A 503 or 429 is tried again (the event arrives once, after it); a 400 is given up for
    good: deleted from the spool, said, and counted in the metrics."""
    if not sentry_available():
        return hwtest.SKIP
    rx = SentryReceiver()
    d = tempfile.mkdtemp(prefix="hw-answers-")
    prom = os.path.join(d, "m.prom")
    w = Watched(["--threshold", "300ms", "--sentry-dsn", rx.dsn(), "--metrics-file", prom])
    try:
        rx.answers = [503, 429]
        w.hang(400)
        hwtest.wait_for(lambda: len(rx.events()) == 1, "the event after a 503 and a 429", 30)
        check(rx.posts == 3, f"{rx.posts} posts for one event answered 503, 429, 200")
        rx.answers = [400]
        w.hang(400)
        hwtest.wait_for(lambda: rx.posts == 4 and not spooled(w), "the refused event to be deleted", 30)
    finally:
        code = w.finish()
        err = w.stderr()
        w.close()
        rx.stop()
    try:
        check(code == 0, f"exit {code}\n{err}")
        check(len(rx.events()) == 1 and rx.posts == 4, f"{len(rx.events())} events, {rx.posts} posts")
        check("Sentry refused 1 event for good" in err and "HTTP 400" in err, err)
        with open(prom) as f:
            text = f.read()
        for series, value in [("hangwatch_sentry_events_sent_total", 1),
                              ('hangwatch_sentry_events_dropped_total{reason="rejected"}', 1),
                              ("hangwatch_sentry_spool_events", 0)]:
            check(sample(text, series) == value, f"{series} should be {value}:\n{text}")
    finally:
        shutil.rmtree(d, ignore_errors=True)


def case_sentry_bad_input():
    """A malformed DSN (option or SENTRY_DSN) is exit 2 before the program starts, without
    printing the key; an unreachable server is said at start, and the program runs as ever."""
    secret = "s3cr3tk3y"
    for dsn, message in [(f"ftp://{secret}@h/1", "https://"), (f"https://{secret}@h/abc", "decimal"),
                         (f"https://{secret}@h/1\r\nX: y", "control"), ("https://h/1", "public key")]:
        run_expecting_usage_error(["--sentry-dsn", dsn], "invalid --sentry-dsn")
        run_expecting_usage_error(["--sentry-dsn", dsn], message)
    d = tempfile.mkdtemp(prefix="hw-bad-")
    try:
        p = subprocess.run([hwtest.binary("hangwatch"), "run", "--report-dir", os.path.join(d, "r"), "--",
                            "/bin/true"], capture_output=True, text=True, timeout=30,
                           env=dict(os.environ, SENTRY_DSN=f"https://{secret}@h/x"))
        check(p.returncode == 2 and "invalid SENTRY_DSN" in p.stderr and secret not in p.stderr, p.stderr)
        # Nothing listens there: said at start; the program's exit status is hangwatch's.
        port = free_port()
        p = subprocess.run([hwtest.binary("hangwatch"), "run", "--report-dir", os.path.join(d, "r"), "--sentry-dsn",
                            f"http://{SENTRY_KEY}@127.0.0.1:{port}/1", "--", "/bin/sh", "-c", "sleep 1; exit 3"],
                           capture_output=True, text=True, timeout=60)
        check(p.returncode == 3, f"exit {p.returncode}\n{p.stderr}")
        check(f"cannot reach 127.0.0.1" in p.stderr, f"unreachable server not said:\n{p.stderr}")
        up = subprocess.run([hwtest.binary("hangwatch"), "upload", "--sentry-dsn", "nonsense", d],
                            capture_output=True, text=True, timeout=30)
        check(up.returncode == 2 and "invalid Sentry DSN" in up.stderr, up.stderr)
        up = subprocess.run([hwtest.binary("hangwatch"), "upload", os.path.join(d, "missing")],
                            capture_output=True, text=True, timeout=30)
        check(up.returncode == 2 and "not a report directory" in up.stderr, up.stderr)
    finally:
        shutil.rmtree(d, ignore_errors=True)



def thread_policy(pid, tid):
    """(scheduling policy, real-time priority) of a thread, from its stat."""
    with open(f"/proc/{pid}/task/{tid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[38]), int(fields[37])


def voluntary_switches(pid, tid):
    with open(f"/proc/{pid}/task/{tid}/status") as f:
        return int(re.search(r"^voluntary_ctxt_switches:\s+(\d+)", f.read(), re.M).group(1))


def case_exit_holds_no_real_time():
    """Once its program has ended, the agent's last work (here: its Sentry sender's last attempt, up to
    3 s against a server that never answers) holds no CPU at a real-time priority: its main thread leaves
    SCHED_FIFO when the watch ends (it used to hold it through the exit: a sanitized agent's exit spun at
    SCHED_FIFO for up to a second, and other agents' looks came that late), and the priority lender, above
    every watch thread on the machine, stays asleep through its waits."""
    if os.geteuid() != 0:
        print("SKIP: real-time priorities need root")
        return hwtest.SKIP
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)  # never accepted, never answered
    w = Watched(["--threshold", "300ms", "--sentry-dsn", f"http://key@127.0.0.1:{silent.getsockname()[1]}/1"])
    agent = w.proc.pid
    try:
        program = hwtest.program_of(agent)
        check(thread_policy(agent, agent)[0] == 1, "the watch thread is not at SCHED_FIFO while it watches")
        lenders = [int(t) for t in os.listdir(f"/proc/{agent}/task") if thread_policy(agent, t) == (1, 3)]
        check(len(lenders) == 1, f"no priority lender among the agent's threads: {lenders}")
        w.hang(500)
        hwtest.wait_for(lambda: len(w.reports()) == 1, "the hang's report", 30)
        w.proc.stdin.write("quit\n")
        w.proc.stdin.flush()
        hwtest.wait_for(lambda: not os.path.exists(f"/proc/{program}"), "the program's end", 30)
        hwtest.wait_for(lambda: w.proc.poll() is not None or thread_policy(agent, agent)[0] == 0,
                        "the agent's main thread to leave real time after the watch", 2)
        check(w.proc.poll() is None, f"the agent ended before its last attempt was over:\n{w.stderr()}")
        before = voluntary_switches(agent, lenders[0])
        time.sleep(1.0)  # a stretch of the agent's wait for its sender, during which the lender is measured
        after = voluntary_switches(agent, lenders[0])
        check(w.proc.poll() is None, f"the agent ended within the measured second:\n{w.stderr()}")
        check(after - before < 20, f"the lender woke {after - before} times in a second of the agent's exit")
        code = w.finish()
        check(code == 0, f"exit {code}\n{w.stderr()}")
    finally:
        w.close()
        silent.close()

CASES = {
    "prometheus_scrapes_two_hangs": case_prometheus_scrapes_two_hangs,
    "metrics_file": case_metrics_file,
    "metrics_drops": case_metrics_drops,
    "bad_options": case_bad_options,
    "watch_metrics": case_watch_metrics,
    "hostile_clients": case_hostile_clients,
    "slowloris": case_slowloris,
    "library_metrics": case_library_metrics,
    "sentry_events": case_sentry_events,
    "sentry_launch_hang": case_sentry_launch_hang,
    "sentry_spool_exactly_once": case_sentry_spool_exactly_once,
    "sentry_server_answers": case_sentry_server_answers,
    "sentry_bad_input": case_sentry_bad_input,
    "exit_holds_no_real_time": case_exit_holds_no_real_time,
}

if __name__ == "__main__":
    hwtest.main(CASES)
