"""Integration tests of hangwatch's exports beyond one machine
(docs/metrics.md, docs/decisions.md §29-30), against the real servers:

- Prometheus (Debian's prometheus) scrapes `hangwatch run --metrics-listen`
  while the watched program hangs twice, and its HTTP API must read the
  hang counter and the duration histogram's count at 2; promtool checks
  the exposition text by Prometheus's own rules;
- the metrics textfile, bad options, hostile HTTP clients.

Every server is started here on 127.0.0.1 on a free port and stopped at the
end; waiting is polling with generous deadlines.
"""
import json
import os
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
        hangs = 'hangwatch_hangs_total{process="hang-on-command",hang_type="hang"}'
        count = 'hangwatch_hang_duration_seconds_count{process="hang-on-command",hang_type="hang"}'
        # The series are there at 0 before the first hang (so increase() sees it).
        prom.wait_value("up", 1, "Prometheus to scrape hangwatch")
        prom.wait_value(hangs, 0, "the hang counter at 0 before any hang")
        w.hang(600)
        w.hang(500)
        prom.wait_value(hangs, 2, "the hang counter to read 2")
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
        series = 'hangwatch_hangs_total{process="hang-on-command",detector="runloop",hang_type="hang"}'

        def reads(value):
            with open(path) as f:
                return sample(f.read(), series) == value
        # Written before the program started, then again once it registered.
        check(os.path.exists(path), "no metrics file once the program runs")
        hwtest.wait_for(lambda: reads(0), "the file to show the program at 0 hangs", 20)
        check(os.stat(path).st_mode & 0o777 == 0o644, f"mode {oct(os.stat(path).st_mode)}")
        w.hang(500)
        hwtest.wait_for(lambda: reads(1), "the file to count the hang", 20)
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
        for series in ('hangwatch_hangs_total{process="api-metrics",detector="runloop",hang_type="hang"}',
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


CASES = {
    "prometheus_scrapes_two_hangs": case_prometheus_scrapes_two_hangs,
    "metrics_file": case_metrics_file,
    "bad_options": case_bad_options,
    "hostile_clients": case_hostile_clients,
    "library_metrics": case_library_metrics,
}

if __name__ == "__main__":
    hwtest.main(CASES)
