"""test_culprit - the user's culprit (docs/report-format.md, "Whose code";
decisions.md §39), tried as a developer would:

  qsort          a C program whose sort_orders() calls qsort with a
                 comparator that sleeps: the culprit is the program's own
                 frame, never qsort or msort_with_tmp; libc's frames are
                 not in_app, the program's are
  urllib         an aiohttp handler fetch_exchange_rates() calls
                 urllib.request.urlopen on a local server that answers
                 after 3 s: the culprit (stderr, show, stats) is
                 fetch_exchange_rates; socket.py, urllib and aiohttp are
                 not in_app
  spin9          a 9 s pure-Python spin in spin_handler() (Debian's
                 python3, default threshold and period): exactly one
                 report, its final duration about 9 s
  pbkdf2         a Python call of hashlib.pbkdf2_hmac looping for 3 s: one
                 report (what OpenSSL runs under the user's frame moves at
                 every look; the culprit does not)
  dashboard      thirty 740-760 ms hangs in render_dashboard(), each
                 followed by 5 ms in write_headers(), with --threshold
                 500ms --check-period 250ms: one group of 30 in stats,
                 culprit render_dashboard, no report names write_headers,
                 the tails are counted
  not_in_app     --not-in-app 'DIR/vendor/*' moves the culprit out of a
                 vendored module into the caller
  library_rules  the C library's in_app/not_in_app lists reach the agent
                 (not_in_app over the program itself: none of its frames
                 is in_app); an invalid pattern or one too many is refused
                 by hangwatch_start, before any agent starts
"""
import http.server
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request

import hwtest
from hwtest import check

DEBIAN_PYTHON = "/usr/bin/python3"


hung_frames = hwtest.frames  # the hung thread's, by default


def culprit(rep):
    frames = hung_frames(rep)
    i = rep["hangwatch"]["hung_thread"].get("culprit_frame")
    check(i is not None and 0 <= i < len(frames), f"culprit_frame {i} of {len(frames)} frames")
    return frames[i]


describe = hwtest.describe_frames


def hang_lines(r):
    return [ln for ln in r.stderr.splitlines() if ln.startswith("hangwatch: hang in")]


def show(path):
    p = hwtest.hw("show", path)
    check(p.returncode == 0, p.stderr)
    return p.stdout


def stats_json(report_dir):
    p = hwtest.hw("stats", "--json", report_dir)
    check(p.returncode == 0, p.stderr)
    return json.loads(p.stdout)


def case_qsort():
    r = hwtest.run(["--", hwtest.binary("loop-scenarios"), "qsort", "3"], timeout=60)
    try:
        check(r.returncode == 0 and len(r.reports) >= 1, r.describe())
        rep = r.reports[0]
        frames = hung_frames(rep)
        c = culprit(rep)
        check(c.get("symbol_name") in ("compare_orders", "sort_orders"), f"culprit {c}:\n{describe(frames)}")
        check(c["in_app"] is True and c["origin"] == "app", str(c))
        for f in frames:
            name = f.get("symbol_name", "")
            if name.startswith("msort_with_tmp") or name in ("qsort", "qsort_r", "clock_nanosleep"):
                check(f["in_app"] is False and f["origin"] == "system", f"a C library frame: {f}")
            if name in ("sort_orders", "compare_orders", "main"):
                check(f["in_app"] is True, f"the program's own frame: {f}")
        line = hang_lines(r)[0]
        m = re.search(r" in (.*); report ", line)
        check(m and "compare_orders" in m.group(1) and "sort_orders" in m.group(1), line)
        check("... " in m.group(1) and "library frame" in m.group(1), f"the library frames summarized:\n{line}")
        out = show(r.report_paths[0])
        check(re.search(r"\b(compare_orders|sort_orders)\b.*<- culprit", out), out)
        g = stats_json(r.report_dir)["groups"][0]
        check(g["culprit"]["function"] == c["symbol_name"], f"stats' culprit {g['culprit']}")
    finally:
        hwtest.cleanup(r)


class SlowHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        time.sleep(3)
        body = b'{"EUR": 1.0}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


AIO_FETCH = '''import sys, urllib.request
from aiohttp import web
async def fetch_exchange_rates(request):
    with urllib.request.urlopen(sys.argv[1], timeout=30) as r:  # fetch-line
        return web.Response(body=r.read())
app = web.Application()
app.router.add_get("/rates", fetch_exchange_rates)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[2]), print=lambda *a: print("serving", flush=True))
'''


def case_urllib():
    """An aiohttp handler that calls urllib on a slow server (both real
    servers on 127.0.0.1)."""
    try:
        subprocess.run([DEBIAN_PYTHON, "-c", "import aiohttp"], check=True, capture_output=True, timeout=60)
    except subprocess.CalledProcessError:
        check(False, "python3-aiohttp is not installed (scripts/ensure-deps.sh test installs it)")
    slow = http.server.ThreadingHTTPServer(("127.0.0.1", 0), SlowHandler)
    threading.Thread(target=slow.serve_forever, daemon=True).start()
    d = tempfile.mkdtemp(prefix="hw-it-aio-")
    script = os.path.join(d, "aio_fetch.py")
    with open(script, "w") as f:
        f.write(AIO_FETCH)
    port = hwtest.free_port()
    server = hwtest.Background([DEBIAN_PYTHON, script, f"http://127.0.0.1:{slow.server_address[1]}/rates",
                                str(port)])
    try:
        def answers():
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/nothing", timeout=2):
                    return True
            except urllib.error.HTTPError:
                return True  # a 404: the server is up
            except OSError:
                return False
        hwtest.wait_for(answers, "the aiohttp server to answer")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/rates", timeout=30) as r:
            check(r.read() == b'{"EUR": 1.0}', "the rates")
        server.proc.send_signal(signal.SIGINT)  # passed on: aiohttp's run_app ends
        r = server.finish(timeout=30)
        check(len(r.reports) >= 1, r.describe())
        rep = r.reports[0]
        frames = hung_frames(rep)
        c = culprit(rep)
        check(c.get("symbol_name") == "fetch_exchange_rates" and c.get("source_file") == script and
              c.get("source_line") == 4, f"culprit {c}:\n{describe(frames)}")
        lib = [f for f in frames if f.get("language") == "python" and
               os.path.basename(f.get("source_file", "")) in ("socket.py", "request.py", "client.py")]
        check(lib, f"no frame of socket.py or urllib:\n{describe(frames)}")
        check(all(f["in_app"] is False and f["origin"] == "stdlib" for f in lib), describe(lib))
        aio = [f for f in frames if "/aiohttp/" in f.get("source_file", "")]
        check(aio and all(f["in_app"] is False and f["origin"] == "package" for f in aio),
              f"aiohttp's own frames:\n{describe(aio or frames)}")
        line = hang_lines(r)[0]
        check("fetch_exchange_rates (aio_fetch.py:4)" in line and "library frames" in line, line)
        # why: a socket's poll with a timeout is a wait on the network, the slow server named (this process)
        t = rep["hangwatch"].get("time", {})
        b = t.get("blocked_in", {})
        slow_port = slow.server_address[1]
        check(t.get("cause") == "blocked" and t.get("blocked_on") == "network", json.dumps(t))
        check(f"127.0.0.1:{slow_port}" in b.get("fd_is", "") and b.get("peer", {}).get("pid") == os.getpid(),
              json.dumps(b))
        check(f"127.0.0.1:{slow_port}" in line and f"held by pid {os.getpid()}" in line, line)
        out = show(r.report_paths[0])
        check(re.search(r"fetch_exchange_rates  at .*aio_fetch.py:4  <- culprit", out), out)
        g = stats_json(r.report_dir)["groups"][0]
        check(g["culprit"]["function"] == "fetch_exchange_rates", f"stats' culprit {g['culprit']}")
    finally:
        server.cleanup()
        slow.shutdown()
        shutil.rmtree(d, ignore_errors=True)


SPIN = '''import asyncio, time
def spin_handler():
    end = time.monotonic() + 9
    total = 0
    while time.monotonic() < end:
        total += sum(range(50))
    return total
async def main():
    await asyncio.sleep(0.2)
    spin_handler()
    await asyncio.sleep(0.2)
asyncio.run(main())
print("spun")
'''


def case_spin9():
    with tempfile.TemporaryDirectory() as d:
        script = os.path.join(d, "spin.py")
        with open(script, "w") as f:
            f.write(SPIN)
        r = hwtest.run(["--", DEBIAN_PYTHON, script], timeout=90)
        try:
            check(r.returncode == 0 and "spun" in r.stdout, r.describe())
            hangs = [p for p in r.reports if p["hangwatch"]["hang_type"] == "hang"]
            check(len(hangs) == 1 and len(hang_lines(r)) == 1, f"{len(hangs)} reports of one spin:\n{r.stderr}")
            check(culprit(hangs[0]).get("symbol_name") == "spin_handler", describe(hung_frames(hangs[0])))
            final = hangs[0]["hangwatch"].get("final_duration_us", 0)
            check(8_900_000 <= final <= 10_000_000, f"final duration {final} us")
        finally:
            hwtest.cleanup(r)


PBKDF2 = '''import asyncio, hashlib, time
def derive_keys():
    end = time.monotonic() + 3
    while time.monotonic() < end:
        hashlib.pbkdf2_hmac("sha256", b"secret", b"salt", 20000)  # derive-line
async def main():
    await asyncio.sleep(0.2)
    derive_keys()
    await asyncio.sleep(0.2)
asyncio.run(main())
print("derived")
'''


def case_pbkdf2():
    with tempfile.TemporaryDirectory() as d:
        script = os.path.join(d, "derive.py")
        with open(script, "w") as f:
            f.write(PBKDF2)
        r = hwtest.run(["--threshold", "1s", "--", DEBIAN_PYTHON, script], timeout=90)
        try:
            check(r.returncode == 0 and "derived" in r.stdout, r.describe())
            hangs = [p for p in r.reports if p["hangwatch"]["hang_type"] == "hang"]
            check(len(hangs) == 1, f"{len(hangs)} reports of one hang:\n{r.stderr}")
            c = culprit(hangs[0])
            check(c.get("symbol_name") == "derive_keys", f"culprit {c}:\n{describe(hung_frames(hangs[0]))}")
            final = hangs[0]["hangwatch"].get("final_duration_us", 0)
            check(2_800_000 <= final <= 4_000_000, f"final duration {final} us")
        finally:
            hwtest.cleanup(r)


def case_dashboard():
    r = hwtest.run(["--threshold", "500ms", "--check-period", "250ms", "--",
                    hwtest.binary("loop-scenarios"), "dashboard", "30"], timeout=170)
    try:
        check(r.returncode == 0, r.describe())
        hangs = [p for p in r.reports if p["hangwatch"]["hang_type"] == "hang"]
        for p in hangs:
            names = [f.get("symbol_name", "") for f in hung_frames(p)]
            check("write_headers" not in names,
                  f"a report of a hang's tail (stretch_report_index {p['hangwatch']['stretch_report_index']}, "
                  f"busy {p['hangwatch']['block_duration_us']} us when captured):\n" + describe(hung_frames(p)))
            check(culprit(p).get("symbol_name") == "render_dashboard", describe(hung_frames(p)))
        st = stats_json(r.report_dir)
        check(len(st["groups"]) == 1, f"{len(st['groups'])} groups: {[g['grouping_key'] for g in st['groups']]}")
        g = st["groups"][0]
        check(g["count"] == 30 and g["culprit"]["function"] == "render_dashboard", str(g))
        check(all(gr["count"] > 0 for gr in st["groups"]), "a group of zero hangs")
        check("follow-up report" not in r.stderr, "the tails' follow-ups were said:\n" + r.stderr)
        print(f"{len(hangs)} reports of 30 hangs")
    finally:
        hwtest.cleanup(r)


VENDORED_APP = '''import asyncio, sys
sys.path.insert(0, sys.argv[1])
from vendor import chart
def render_report():
    return chart.draw_chart(3)  # report-line
async def main():
    await asyncio.sleep(0.2)
    render_report()
asyncio.run(main())
print("drawn")
'''

VENDORED_CHART = '''import time
def draw_chart(seconds):
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:  # chart-line
        n += 1
    return n
'''


def case_not_in_app():
    with tempfile.TemporaryDirectory() as d:
        os.mkdir(os.path.join(d, "vendor"))
        with open(os.path.join(d, "vendor", "__init__.py"), "w"):
            pass
        with open(os.path.join(d, "vendor", "chart.py"), "w") as f:
            f.write(VENDORED_CHART)
        app = os.path.join(d, "app.py")
        with open(app, "w") as f:
            f.write(VENDORED_APP)
        culprits = {}
        for rules in ([], ["--not-in-app", os.path.join(d, "vendor", "*")]):
            r = hwtest.run(rules + ["--", DEBIAN_PYTHON, app, d], timeout=90)
            try:
                check(r.returncode == 0 and "drawn" in r.stdout and r.reports, r.describe())
                c = culprit(r.reports[0])
                culprits[bool(rules)] = c.get("symbol_name")
                chart = [f for f in hung_frames(r.reports[0]) if f.get("symbol_name") == "draw_chart"]
                check(chart and chart[0]["in_app"] is (not rules) and chart[0]["origin"] == "app",
                      f"the vendored frame with {rules}: {chart}")
            finally:
                hwtest.cleanup(r)
        check(culprits == {False: "draw_chart", True: "render_report"}, f"culprits {culprits}")


def run_api_in_app(mode):
    """tests/programs/api_in_app.c in `mode`: (exit status, stdout, reports)."""
    work = tempfile.mkdtemp(prefix="hw-api-")
    try:
        reports = os.path.join(work, "r")
        env = {k: v for k, v in os.environ.items() if k not in ("HANGWATCH_AGENT", "LD_PRELOAD")}
        p = subprocess.run([hwtest.binary("api-in-app"), reports, mode], capture_output=True, text=True, timeout=60,
                           env=env)
        paths = sorted(os.path.join(reports, n) for n in os.listdir(reports)) if os.path.isdir(reports) else []
        return p.returncode, p.stdout + p.stderr, [hwtest.load_report(path) for path in paths]
    finally:
        shutil.rmtree(work, ignore_errors=True)


def case_library_rules():
    for mode, own_in_app in (("default", True), ("not-self", False)):
        rc, out, reports = run_api_in_app(mode)
        check(rc == 0 and "api-in-app: done" in out and reports, f"{mode}: exit {rc}\n{out}")
        frames = hung_frames(reports[0])
        own = [f for f in frames if f.get("object_name") == "api-in-app"]
        check(any(f.get("symbol_name") == "settle_accounts" for f in own), f"{mode}:\n{describe(frames)}")
        check(all(f["in_app"] is own_in_app and f["origin"] == "app" for f in own), f"{mode}:\n{describe(frames)}")
        if own_in_app:
            check(culprit(reports[0]).get("symbol_name") == "settle_accounts", describe(frames))
    for mode in ("invalid", "too-many"):
        rc, out, reports = run_api_in_app(mode)
        check(rc == 3 and "hangwatch_start: Invalid argument" in out and not reports, f"{mode}: exit {rc}\n{out}")


if __name__ == "__main__":
    hwtest.main({
        "qsort": case_qsort,
        "urllib": case_urllib,
        "spin9": case_spin9,
        "pbkdf2": case_pbkdf2,
        "dashboard": case_dashboard,
        "not_in_app": case_not_in_app,
        "library_rules": case_library_rules,
    })
