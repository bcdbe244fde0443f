"""test_programs - real programs nobody here wrote, run unmodified under
hangwatch: redis-server, node, Python asyncio, a GLib main loop.

Each case needs its program (installed by scripts/ensure-deps.sh test); a
case whose program is missing exits 77, which CTest reports as skipped
with the reason printed."""
import os
import shutil
import subprocess
import sys
import tempfile
import time

import hwtest
from hwtest import Background, check, children, frames, free_port, symbols, wait_for

SKIP = 77


def need(program):
    path = shutil.which(program)
    if path is None:
        print(f"SKIP: {program} is not installed (scripts/ensure-deps.sh test installs it)")
        sys.exit(SKIP)
    return path


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
        check(r.returncode == 0, r.describe())
        hwtest.check_took(r.stdout, "blocking", 3.0)
        check(len(r.reports) == 1, f"time.sleep(3) in a coroutine: {len(r.reports)} reports\n" + r.describe())
        check(symbols(frames(r.reports[0]))[0] in ("clock_nanosleep", "__clock_nanosleep"), "not sleeping?")
    finally:
        hwtest.cleanup(r)


def case_asyncio_awaiting():
    r = hwtest.run(["--", python3(), os.path.join(hwtest.SOURCE_DIR, "tests", "programs", "asyncio_hang.py"),
                    "awaiting"])
    try:
        check(r.returncode == 0, r.describe())
        hwtest.check_took(r.stdout, "awaiting", 3.0)
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
        check(r.returncode == 0, r.describe())
        hwtest.check_took(r.stdout, "glib: callback", 3.0)
        check(len(r.reports) == 1, f"expected one report, got {len(r.reports)}\n" + r.describe())
        names = symbols(frames(r.reports[0]))
        check(any(n.startswith("g_main") for n in names), f"GLib's main loop frames missing: {names}")
    finally:
        hwtest.cleanup(r)


NGINX_CONF = """
load_module /usr/lib/nginx/modules/ngx_http_echo_module.so;
daemon off;
master_process on;
worker_processes 2;
pid {dir}/nginx.pid;
error_log {dir}/error.log;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    server {{
        listen 127.0.0.1:{port};
        location /hang {{ echo_blocking_sleep 3; echo hung; }}
        location / {{ echo ok; }}
    }}
}}
"""


def http_get(port, path, timeout=30):
    import urllib.request
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as resp:
        return resp.read().decode()


def run_nginx(options):
    nginx = need("nginx")
    if not os.path.exists("/usr/lib/nginx/modules/ngx_http_echo_module.so"):
        print("SKIP: libnginx-mod-http-echo is not installed (scripts/ensure-deps.sh test installs it)")
        sys.exit(SKIP)
    conf_dir = tempfile.mkdtemp(prefix="hw-nginx-")
    port = free_port()
    with open(os.path.join(conf_dir, "nginx.conf"), "w") as f:
        f.write(NGINX_CONF.format(dir=conf_dir, port=port))
    server = Background([nginx, "-p", conf_dir, "-c", os.path.join(conf_dir, "nginx.conf")], options)
    server.conf_dir = conf_dir

    def up():
        try:
            return http_get(port, "/", timeout=2).strip() == "ok"
        except OSError:
            return False

    wait_for(up, "nginx to answer")
    master = children(server.proc.pid)
    check(len(master) == 1, f"hangwatch should have one child (nginx's master): {master}")
    wait_for(lambda: len(children(master[0])) == 2, "nginx's two workers")
    return server, port, master[0], children(master[0])


def stop_nginx(server, master, workers):
    import signal
    server.proc.send_signal(signal.SIGTERM)  # passed on to nginx's master
    r = server.finish(timeout=30)
    check(r.returncode in (0, 128 + signal.SIGTERM), f"hangwatch exit {r.returncode}\n{r.stderr}")
    for pid in [master] + workers:
        wait_for(lambda: not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split(")")[1].split()[0] == "Z",
                 f"nginx process {pid} to end", timeout=20)
    shutil.rmtree(server.conf_dir, ignore_errors=True)
    return r


def case_nginx_worker_hang():
    """Master and workers are each watched; a worker's hang is reported with the worker's pid."""
    server, port, master, workers = run_nginx([])
    try:
        start = time.monotonic()
        check(http_get(port, "/hang").strip() == "hung", "the /hang request failed")
        took = time.monotonic() - start
        check(2.95 <= took <= 3.8, f"the blocking request took {took:.3f} s")
        check(http_get(port, "/").strip() == "ok", "nginx does not answer after the hang")
        r = stop_nginx(server, master, workers)
        check(len(r.reports) == 1, f"expected one report, got {len(r.reports)}\n" + r.describe())
        rep = r.reports[0]
        check(rep["report"]["pid"] in workers, f"report pid {rep['report']['pid']} is not a worker {workers}")
        names = symbols(frames(rep))
        # nginx is stripped: its static functions have no name, exported ones do.
        check("ngx_http_echo_exec_echo_blocking_sleep" in names and "ngx_process_events_and_timers" in names
              and "ngx_spawn_process" in names, f"the worker's own frames are missing: {names}")
    finally:
        server.cleanup()


def case_nginx_no_follow():
    """--no-follow watches nginx's master only: a worker's hang is not reported."""
    server, port, master, workers = run_nginx(["--no-follow"])
    try:
        check(http_get(port, "/hang").strip() == "hung", "the /hang request failed")
        r = stop_nginx(server, master, workers)
        check(r.reports == [], "--no-follow still reported a worker\n" + r.describe())
    finally:
        server.cleanup()


def case_exec_followed():
    """A program started by a shell (fork + exec) is followed; --no-follow turns that off."""
    prog = [hwtest.binary("loop-scenarios"), "cpuspin", "2.6"]
    shell = ["sh", "-c", '"$@"; true', "sh"] + prog
    r = hwtest.run(["--"] + shell)
    try:
        check(r.returncode == 0, r.describe())
        check(len(r.reports) == 1, "the exec'd grandchild was not followed\n" + r.describe())
        check(r.reports[0]["report"]["process_name"] == "loop-scenarios", r.reports[0]["report"]["process_name"])
    finally:
        hwtest.cleanup(r)
    r = hwtest.run(["--no-follow", "--"] + shell)
    try:
        check(r.returncode == 0 and r.reports == [], "--no-follow followed the shell's child\n" + r.describe())
    finally:
        hwtest.cleanup(r)


def case_fork_storm():
    """Forking while other threads hold malloc's locks does not deadlock a child:
    the observer's fork handler makes only system calls."""
    r = hwtest.run(["--"] + [hwtest.binary("loop-scenarios"), "forkstorm", "200"], timeout=120)
    try:
        check(r.returncode == 0 and "200 of 200 children ran" in r.stdout, r.describe())
    finally:
        hwtest.cleanup(r)


def case_agent_ends_with_program():
    """When the program is killed, hangwatch does not linger: it exits with the program's status."""
    import signal
    server = Background([hwtest.binary("loop-scenarios"), "idle", "120"])
    try:
        wait_for(lambda: len(children(server.proc.pid)) == 1, "the program to start")
        os.kill(children(server.proc.pid)[0], signal.SIGKILL)
        r = server.finish(timeout=20)
        check(r.returncode == 128 + signal.SIGKILL, f"exit {r.returncode}: {r.stderr}")
    finally:
        server.cleanup()


if __name__ == "__main__":
    hwtest.main({
        "redis_debug_sleep": case_redis_debug_sleep,
        "redis_benchmark": case_redis_benchmark,
        "node_busy_timer": case_node_busy_timer,
        "asyncio_blocking": case_asyncio_blocking,
        "asyncio_awaiting": case_asyncio_awaiting,
        "glib_main_loop": case_glib_main_loop,
        "nginx_worker_hang": case_nginx_worker_hang,
        "nginx_no_follow": case_nginx_no_follow,
        "exec_followed": case_exec_followed,
        "fork_storm": case_fork_storm,
        "agent_ends_with_program": case_agent_ends_with_program,
    })
