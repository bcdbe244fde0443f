"""test_programs - real programs nobody here wrote, run unmodified under
hangwatch: redis-server, node, Python asyncio, a GLib main loop.

Each case needs its program (installed by scripts/ensure-deps.sh test); a
case whose program is missing exits 77, which CTest reports as skipped
with the reason printed."""
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import hwtest
from hwtest import check, frames, symbols

SKIP = 77


def need(program):
    path = shutil.which(program)
    if path is None:
        print(f"SKIP: {program} is not installed (scripts/ensure-deps.sh test installs it)")
        sys.exit(SKIP)
    return path


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(condition, what, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    hwtest.fail(f"timed out waiting for {what}")


class Background:
    """`hangwatch run` of a server in the background."""

    def __init__(self, args):
        self.report_dir = tempfile.mkdtemp(prefix="hw-it-")
        self.proc = subprocess.Popen([hwtest.binary("hangwatch"), "run", "--report-dir", self.report_dir, "--"] + args,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def finish(self, timeout=30):
        out, err = self.proc.communicate(timeout=timeout)
        return hwtest.Run(self.proc.returncode, out, err, self.report_dir, 0)

    def cleanup(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.report_dir, ignore_errors=True)


def redis_cli(port, *args, timeout=30):
    return subprocess.run([need("redis-cli"), "-p", str(port)] + list(args), capture_output=True, text=True,
                          timeout=timeout)


def start_redis():
    port = free_port()
    server = Background([need("redis-server"), "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                         "--appendonly", "no", "--enable-debug-command", "yes"])
    wait_for(lambda: redis_cli(port, "ping").stdout.strip() == "PONG", "redis-server to answer")
    return server, port


def case_redis_debug_sleep():
    server, port = start_redis()
    try:
        start = time.monotonic()
        check(redis_cli(port, "DEBUG", "SLEEP", "3").stdout.strip() == "OK", "DEBUG SLEEP failed")
        took = time.monotonic() - start
        check(2.95 <= took <= 3.6, f"DEBUG SLEEP 3 took {took:.3f} s under hangwatch")
        check(redis_cli(port, "ping").stdout.strip() == "PONG", "the server does not answer after the hang")
        redis_cli(port, "shutdown", "nosave")
        r = server.finish()
        check(len(r.reports) == 1, f"expected one report, got {len(r.reports)}\n" + r.describe())
        main = frames(r.reports[0])
        names = symbols(main)
        check("debugCommand" in names, f"Redis's own frames are missing: {names}")
        check(names.index("debugCommand") < names.index("processCommand") < names.index("aeMain"),
              f"Redis's call chain out of order: {names}")
        check(names[0] in ("clock_nanosleep", "__clock_nanosleep", "nanosleep", "__nanosleep", "usleep"),
              f"the top frame is not the sleeping libc call: {names[:3]}")
        # Redis is stripped: frames without a symbol still name object and offset,
        # and the object's build-id is in binary_images.
        images = {im["name"]: im for im in r.reports[0]["binary_images"]}
        for f in main:
            check("object_name" in f and "object_offset" in f, f"a frame without object/offset: {f}")
        redis_image = [im for name, im in images.items() if "redis" in os.path.basename(name)]
        check(redis_image and "build_id" in redis_image[0], "redis's build-id missing")
    finally:
        server.cleanup()


def case_redis_benchmark():
    """A busy but responsive server is not hung."""
    need("redis-benchmark")
    server, port = start_redis()
    try:
        b = subprocess.run([need("redis-benchmark"), "-p", str(port), "-n", "50000", "-c", "20", "-q",
                            "-t", "set,get,incr,lpush"], capture_output=True, text=True, timeout=120)
        check(b.returncode == 0, b.stderr)
        redis_cli(port, "shutdown", "nosave")
        r = server.finish()
        check(r.reports == [], "redis-benchmark made hangwatch report a hang\n" + r.describe())
    finally:
        server.cleanup()


def case_node_busy_timer():
    node = shutil.which("node") or shutil.which("nodejs")
    if node is None:
        need("node")
    script = os.path.join(hwtest.SOURCE_DIR, "tests", "programs", "node_busy_timer.js")
    r = hwtest.run(["--", node, script])
    try:
        check(r.returncode == 0, r.describe())
        check(len(r.reports) == 1, f"expected one report, got {len(r.reports)}\n" + r.describe())
        names = symbols(frames(r.reports[0]))
        check(any(n.startswith("node::") for n in names), f"node's own (demangled) frames missing: {names}")
        check(any(n.startswith("uv_run") for n in names), f"libuv's loop missing: {names}")
    finally:
        hwtest.cleanup(r)


def python3():
    return "/usr/bin/python3"


def case_asyncio_blocking():
    r = hwtest.run(["--", python3(), os.path.join(hwtest.SOURCE_DIR, "tests", "programs", "asyncio_hang.py"),
                    "blocking"])
    try:
        check(r.returncode == 0 and "blocking took 3.0" in r.stdout, r.describe())
        check(len(r.reports) == 1, f"time.sleep(3) in a coroutine: {len(r.reports)} reports\n" + r.describe())
        check(symbols(frames(r.reports[0]))[0] in ("clock_nanosleep", "__clock_nanosleep"), "not sleeping?")
    finally:
        hwtest.cleanup(r)


def case_asyncio_awaiting():
    r = hwtest.run(["--", python3(), os.path.join(hwtest.SOURCE_DIR, "tests", "programs", "asyncio_hang.py"),
                    "awaiting"])
    try:
        check(r.returncode == 0 and "awaiting took 3.0" in r.stdout, r.describe())
        check(r.reports == [], "await asyncio.sleep(3) was reported\n" + r.describe())
    finally:
        hwtest.cleanup(r)


def case_glib_main_loop():
    probe = subprocess.run([python3(), "-c", "from gi.repository import GLib"], capture_output=True)
    if probe.returncode != 0:
        print("SKIP: python3-gi is not installed (scripts/ensure-deps.sh test installs it)")
        sys.exit(SKIP)
    r = hwtest.run(["--", python3(), os.path.join(hwtest.SOURCE_DIR, "tests", "programs", "glib_hang.py")])
    try:
        check(r.returncode == 0 and "callback blocked 3.0" in r.stdout, r.describe())
        check(len(r.reports) == 1, f"expected one report, got {len(r.reports)}\n" + r.describe())
        names = symbols(frames(r.reports[0]))
        check(any(n.startswith("g_main") for n in names), f"GLib's main loop frames missing: {names}")
    finally:
        hwtest.cleanup(r)


if __name__ == "__main__":
    hwtest.main({
        "redis_debug_sleep": case_redis_debug_sleep,
        "redis_benchmark": case_redis_benchmark,
        "node_busy_timer": case_node_busy_timer,
        "asyncio_blocking": case_asyncio_blocking,
        "asyncio_awaiting": case_asyncio_awaiting,
        "glib_main_loop": case_glib_main_loop,
    })
