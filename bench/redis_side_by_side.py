#!/usr/bin/python3
"""bench/redis_side_by_side.py - part 9 of `make bench`: what watching a
real event-loop server costs its throughput.  redis-benchmark runs against
redis-server started plain and under `hangwatch run`, in alternating rounds,
and the figure is the ratio watched / plain of requests per second within
each pair of rounds, for SET and GET separately (goal: median >= 98 %).

Each round starts a fresh redis-server on a free port of 127.0.0.1 without
persistence (--save '' --appendonly no), waits until it answers PING
(polling, with a deadline), checks that it is watched exactly when it should
be (the observer's memfd "hangwatch-loop" is mapped in the server, as
bench/observer_active.h checks from inside), runs

    redis-benchmark -h 127.0.0.1 -p PORT -t set,get -n REQUESTS -c 50 -P 1 --csv

stops the server with SHUTDOWN NOSAVE and, for a watched round, checks that
hangwatch wrote no report: a busy but responsive server is not hung, so a
report is a false positive and stops the benchmark.  Pairs run in ABBA
order (plain, watched, watched, plain, ...) so that a drift of the machine
falls on both sides.  Server and client share one CPU (the last one, by
default; `hangwatch run` and its agent are pinned there too, so any work of
the agent competes with the server): left to the scheduler, whether the two
land on one CPU or on two changes throughput by a third from round to round
on a small VM, far more than what is measured.  On that CPU other
programs may still run: each round measures how much of the CPU they took
(its busy time in /proc/stat less the server's, the client's and the
agent's).  A steady load takes the same share from both rounds of a pair
and leaves their ratio alone; one that starts or stops between them does
not, so a pair whose two shares differ by more than OTHERS_MAX_DIFF points
is set aside and another pair run instead (at most PAIRS * MAX_TRIES pairs
in all); the table says how many were set aside and what they gave.
Runs alone too:

    /usr/bin/python3 bench/redis_side_by_side.py [--build build] [--pairs 8] [--requests 50000]
                                                 [--clients 50] [--cpu last|none|N]

Standard library only, Debian's /usr/bin/python3.
"""

import argparse
import csv
import glob
import math
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

PAIRS = 8                # plain / watched pairs of rounds, ABBA order
REQUESTS = 50000         # per test (SET, GET) and round
CLIENTS = 50             # redis-benchmark's default
CPU = "last"             # the one CPU server and client share ("none": not pinned)
WARMUP_REQUESTS = 10000  # one unmeasured round of each kind first
TESTS = ("SET", "GET")
RATIO_BUDGET_PCT = 98.0  # median watched / plain
OTHERS_MAX_DIFF = 5.0    # a pair counts only if others' share of the CPU differed by at most this many points
MAX_TRIES = 2            # at most PAIRS * MAX_TRIES pairs are run to get PAIRS clean ones
MIN_CLEAN = 5            # fewer clean pairs than this: the budget is not judged
READY_TIMEOUT_S = 20.0   # until a fresh server answers PING
WATCHED_TIMEOUT_S = 10.0  # until the observer's page is mapped in it
STOP_TIMEOUT_S = 20.0
BENCH_TIMEOUT_S = 300.0


def log(msg):
    print("bench: " + msg, file=sys.stderr, flush=True)


def median(xs):
    s = sorted(xs)
    n = len(s)
    if n == 0:
        return float("nan")
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2.0


def pct(xs, p):
    """Nearest-rank percentile: a value that was observed."""
    s = sorted(xs)
    if not s:
        return float("nan")
    return s[max(1, int(math.ceil(p / 100.0 * len(s)))) - 1]


def fmt(x, digits=1):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:,.{digits}f}"


def need_programs():
    """(redis-server, redis-benchmark), or one clear message and exit 1."""
    missing = [p for p in ("redis-server", "redis-benchmark") if shutil.which(p) is None]
    if missing:
        sys.exit(f"bench: {' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} missing: part 9 needs Debian's redis-server and "
                 "redis-tools (scripts/ensure-deps.sh bench installs them)")
    return shutil.which("redis-server"), shutil.which("redis-benchmark")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def command(port, *args, timeout=2.0):
    """One Redis command over RESP; the reply's first line and body as text
    (a bulk reply's body, else the line itself).  Raises OSError if the
    server is not there (yet)."""
    req = f"*{len(args)}\r\n" + "".join(f"${len(a.encode())}\r\n{a}\r\n" for a in args)
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(req.encode())
        if args[0].upper() == "SHUTDOWN":
            s.recv(4096)  # the server closes the connection as it exits
            return ""
        data = b""
        while b"\r\n" not in data:
            chunk = s.recv(65536)
            if not chunk:
                raise ConnectionError("connection closed")
            data += chunk
        line, rest = data.split(b"\r\n", 1)
        if line.startswith(b"$"):
            size = int(line[1:])
            while len(rest) < size + 2:
                chunk = s.recv(65536)
                if not chunk:
                    raise ConnectionError("connection closed")
                rest += chunk
            return rest[:size].decode(errors="replace")
        return line.decode(errors="replace")


def observer_mapped(pid):
    """Is hangwatch's observer registered in pid (its loop page mapped)?"""
    try:
        with open(f"/proc/{pid}/maps") as f:
            return any("hangwatch-loop" in line for line in f)
    except OSError:
        return False


def cpu_ms(pid):
    """utime + stime of pid (all its threads) so far, ms."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000.0 / os.sysconf("SC_CLK_TCK")


def cpu_ticks(cpu):
    """(busy, all) clock ticks of one CPU (None: all CPUs) so far, from
    /proc/stat; steal counts as busy (someone else had the CPU)."""
    name = "cpu" if cpu is None else f"cpu{cpu}"
    with open("/proc/stat") as f:
        for line in f:
            fields = line.split()
            if fields[0] == name:
                t = [int(x) for x in fields[1:9]]  # user nice system idle iowait irq softirq steal
                return sum(t) - t[3] - t[4], sum(t)
    sys.exit(f"bench: no {name} line in /proc/stat")


def parent_of(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("PPid:"):
                return int(line.split()[1])
    return -1


class Runner:
    def __init__(self, hangwatch, redis_server, redis_benchmark, env=None, cpu=None):
        self.hangwatch = hangwatch
        self.cpu = cpu
        self.server = redis_server
        self.benchmark = redis_benchmark
        env = dict(os.environ if env is None else env)
        # Nothing inherited may change what is measured.
        for var in list(env):
            if var in ("LD_PRELOAD", "DEBUGINFOD_URLS") or var.startswith("HANGWATCH_"):
                del env[var]
        self.env = env

    def pin(self):
        """In the child before exec: onto the chosen CPU (inherited by
        `hangwatch run`, its agent and the server it starts)."""
        if self.cpu is not None:
            os.sched_setaffinity(0, {self.cpu})

    def round(self, watched, requests, clients):
        """One fresh server, one redis-benchmark run; a dict of results."""
        work = tempfile.mkdtemp(prefix="hangwatch-bench-redis-")
        reports = os.path.join(work, "reports")  # hangwatch creates it (0700)
        logpath = os.path.join(work, "server.log")
        port = free_port()
        argv = [self.server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                "--dir", work, "--daemonize", "no", "--logfile", ""]
        if watched:
            argv = [self.hangwatch, "run", "--report-dir", reports, "--", *argv]
        what = "watched" if watched else "plain"
        keep = False
        with open(logpath, "w") as logf:
            proc = subprocess.Popen(argv, env=self.env, stdin=subprocess.DEVNULL, stdout=logf, stderr=logf,
                                    start_new_session=True, preexec_fn=self.pin)
        try:
            def fail(msg):
                nonlocal keep
                keep = True
                with open(logpath, errors="replace") as f:
                    tail = f.read()[-2000:]
                sys.exit(f"bench: {what} round: {msg}\n  server output ({logpath}):\n{tail}")

            deadline = time.monotonic() + READY_TIMEOUT_S
            while True:
                if proc.poll() is not None:
                    fail(f"redis-server exited ({proc.returncode}) before it answered on port {port}")
                try:
                    if command(port, "PING", timeout=1.0) == "+PONG":
                        break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    fail(f"redis-server did not answer PING within {READY_TIMEOUT_S:.0f} s")
                time.sleep(0.02)
            info = command(port, "INFO", "server")
            pid = int(next(line.split(":", 1)[1] for line in info.splitlines() if line.startswith("process_id:")))
            if watched:
                if parent_of(pid) != proc.pid:
                    fail(f"the server answering (pid {pid}) is not the one `hangwatch run` started")
                deadline = time.monotonic() + WATCHED_TIMEOUT_S
                while not observer_mapped(pid):
                    if time.monotonic() > deadline:
                        fail(f"redis-server (pid {pid}) runs under `hangwatch run` but its observer did not "
                             f"register (no hangwatch-loop mapping) within {WATCHED_TIMEOUT_S:.0f} s")
                    time.sleep(0.02)
            else:
                if pid != proc.pid:
                    fail(f"the server answering (pid {pid}) is not the one started (pid {proc.pid})")
                if observer_mapped(pid):
                    fail("a plain redis-server has hangwatch's observer mapped")
            cpu0 = cpu_ms(pid)
            agent0 = cpu_ms(proc.pid) if watched else 0.0
            client0 = resource.getrusage(resource.RUSAGE_CHILDREN)  # the client is the only child reaped
            ticks0 = cpu_ticks(self.cpu)
            b = subprocess.run([self.benchmark, "-h", "127.0.0.1", "-p", str(port), "-t", "set,get",
                                "-n", str(requests), "-c", str(clients), "-P", "1", "--csv"],
                               env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, timeout=BENCH_TIMEOUT_S, preexec_fn=self.pin)
            if b.returncode != 0:
                fail(f"redis-benchmark failed ({b.returncode}): {b.stderr[-1000:]}")
            # Still the same server, still watched (or not) at the end.
            if observer_mapped(pid) != watched:
                fail(f"the observer's mapping in redis-server changed during the run (watched={watched})")
            ticks1 = cpu_ticks(self.cpu)
            client1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = cpu_ms(pid) - cpu0
            agent = cpu_ms(proc.pid) - agent0 if watched else 0.0
            client = 1000.0 * (client1.ru_utime + client1.ru_stime - client0.ru_utime - client0.ru_stime)
            # What others took of the CPU(s) the round ran on: busy time
            # that was not the server's, the client's or the agent's.
            tick_ms = 1000.0 / os.sysconf("SC_CLK_TCK")
            busy = (ticks1[0] - ticks0[0]) * tick_ms
            span = (ticks1[1] - ticks0[1]) * tick_ms
            others = 100.0 * max(0.0, busy - cpu - client - agent) / span if span > 0 else float("nan")
            rps = {}
            for row in csv.reader(b.stdout.splitlines()):
                if len(row) >= 2 and row[0] in TESTS:
                    rps[row[0]] = float(row[1])
            if set(rps) != set(TESTS):
                fail(f"redis-benchmark's output has no requests/s for {', '.join(TESTS)}:\n{b.stdout[-1000:]}")
            try:
                command(port, "SHUTDOWN", "NOSAVE")
            except OSError:
                pass
            try:
                proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                fail(f"redis-server did not stop within {STOP_TIMEOUT_S:.0f} s of SHUTDOWN NOSAVE")
            if proc.returncode != 0:
                fail(f"{'hangwatch run' if watched else 'redis-server'} exited with {proc.returncode}")
            found = sorted(glob.glob(os.path.join(reports, "*")))
            if found:
                keep = True
                shown = subprocess.run([self.hangwatch, "show", *found], stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT, text=True, env=self.env).stdout
                sys.exit(f"bench: FALSE POSITIVE: hangwatch reported a hang in redis-server while it served "
                         f"redis-benchmark (kept in {reports}):\n{shown[-3000:]}")
            return {"rps": rps, "cpu_ms": cpu, "agent_ms": agent, "client_ms": client, "others_pct": others}
        finally:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()
            if not keep:
                shutil.rmtree(work, ignore_errors=True)


def abba(pairs):
    """Which variant runs first in each pair: plain first, then watched
    first, ...: the rounds go plain, watched, watched, plain, plain, ..."""
    for i in range(pairs):
        yield (False, True) if i % 2 == 0 else (True, False)


def resolve_cpu(spec):
    """"last" (the highest CPU this process may use), "none" or a number;
    returns the CPU or None."""
    allowed = sorted(os.sched_getaffinity(0))
    if spec == "none":
        return None
    if spec == "last":
        return allowed[-1]
    if not spec.isdigit() or int(spec) not in allowed:
        sys.exit(f"bench: --cpu takes last, none or one of the CPUs {', '.join(map(str, allowed))}")
    return int(spec)


def measure(hangwatch, pairs=PAIRS, requests=REQUESTS, clients=CLIENTS, env=None, cpu=CPU):
    """All the rounds; a dict for rows()."""
    server, benchmark = need_programs()
    if not os.access(hangwatch, os.X_OK):
        sys.exit(f"bench: {hangwatch} is missing: run `make` first")
    cpu = resolve_cpu(cpu)
    r = Runner(hangwatch, server, benchmark, env, cpu)
    version = subprocess.run([server, "--version"], stdout=subprocess.PIPE, text=True, env=r.env).stdout.split()
    version = next((v.split("=", 1)[1] for v in version if v.startswith("v=")), "?")
    log(f"9. Redis {version}: {pairs} pairs of rounds, plain and under `hangwatch run` in ABBA order, "
        f"each a fresh server and `redis-benchmark -t set,get -n {requests} -c {clients} -P 1`, "
        + (f"both on CPU {cpu}" if cpu is not None else "not pinned"))
    r.round(False, WARMUP_REQUESTS, clients)  # page cache, first-run effects
    r.round(True, WARMUP_REQUESTS, clients)
    done = []
    started = time.monotonic()
    orders = abba(pairs * MAX_TRIES)
    while sum(p["clean"] for p in done) < pairs and len(done) < pairs * MAX_TRIES:
        got = {}
        for watched in next(orders):
            got[watched] = r.round(watched, requests, clients)
        p = {"plain": got[False], "watched": got[True],
             "ratio": {t: 100.0 * got[True]["rps"][t] / got[False]["rps"][t] for t in TESTS},
             "clean": abs(got[False]["others_pct"] - got[True]["others_pct"]) <= OTHERS_MAX_DIFF}
        done.append(p)
        log(f"9. pair {len(done)}: " + ", ".join(
            f"{t} {got[False]['rps'][t]:,.0f} -> {got[True]['rps'][t]:,.0f} ({p['ratio'][t]:.1f} %)" for t in TESTS)
            + f"; others took {got[False]['others_pct']:.0f} % / {got[True]['others_pct']:.0f} % of the CPU"
            + f", server CPU {got[False]['cpu_ms']:.0f} / {got[True]['cpu_ms']:.0f} ms"
            + ("" if p["clean"] else f" (differ by over {OTHERS_MAX_DIFF:.0f} points: set aside)"))
    return {"version": version, "pairs": pairs, "requests": requests, "clients": clients, "cpu": cpu,
            "done": done, "took": time.monotonic() - started}


def rows(r, row):
    """The table rows, through row(measure, n, median, p99, comparison[, budget, result]) as in bench/run.py."""
    done = r["done"]
    clean = [p for p in done if p["clean"]]
    aside = len(done) - len(clean)
    use = clean if len(clean) >= min(MIN_CLEAN, r["pairs"]) else done  # too few clean pairs: all of them, undecided
    where = (f"server and client on CPU {r['cpu']}" if r["cpu"] is not None else "not pinned")
    for k, t in enumerate(TESTS):
        a = [p["plain"]["rps"][t] for p in use]
        b = [p["watched"]["rps"][t] for p in use]
        q = [p["ratio"][t] for p in use]
        head = (f"9 Redis {r['version']}: redis-benchmark {t}, plain -> under `hangwatch run`, requests/s"
                if k == 0 else f"  redis-benchmark {t}, plain -> under `hangwatch run`, requests/s")
        row(head, f"{len(a)} + {len(b)} rounds", f"{fmt(median(a), 0)} -> {fmt(median(b), 0)}", "",
            f"ranges {fmt(min(a), 0)}..{fmt(max(a), 0)} and {fmt(min(b), 0)}..{fmt(max(b), 0)}; each round a "
            f"fresh server, `-n {r['requests']} -c {r['clients']} -P 1`, {where}, ABBA order")
        note = (f"range {fmt(min(q))}..{fmt(max(q))}, IQR {fmt(pct(q, 25))}..{fmt(pct(q, 75))}; pairs: "
                + ", ".join(fmt(x) for x in q))
        if use is clean:
            result = "met" if median(q) >= RATIO_BUDGET_PCT else "**MISSED**"
            if aside:
                note += (f"; {aside} more pair(s) set aside, the share of the CPU others took differed by over "
                         f"{OTHERS_MAX_DIFF:.0f} points between their rounds: "
                         f"{', '.join(fmt(p['ratio'][t]) for p in done if not p['clean'])} (median of all "
                         f"{len(done)} pairs {fmt(median([p['ratio'][t] for p in done]))})")
        else:
            result = "(too noisy)"
            note += (f"; all pairs: in only {len(clean)} did others take the same share of the CPU (within "
                     f"{OTHERS_MAX_DIFF:.0f} points) in both rounds, too few to decide")
        row(f"  {t}: watched / plain within each pair, %", f"{len(q)} pairs", fmt(median(q)), "", note,
            f"median >= {RATIO_BUDGET_PCT:.0f} %", result)
    per = 2 * r["requests"] / 1000.0
    ca = [p["plain"]["cpu_ms"] / per for p in use]
    cb = [p["watched"]["cpu_ms"] / per for p in use]
    cq = [100.0 * p["watched"]["cpu_ms"] / p["plain"]["cpu_ms"] for p in use]
    ag = [p["watched"]["agent_ms"] for p in use]
    oa = [p["plain"]["others_pct"] for p in use]
    ob = [p["watched"]["others_pct"] for p in use]
    row("  context: redis-server's CPU time per 1,000 requests, plain -> watched, ms",
        f"{len(ca)} + {len(cb)} rounds", f"{fmt(median(ca), 2)} -> {fmt(median(cb), 2)}", "",
        f"watched / plain per pair {fmt(median(cq))} % (range {fmt(min(cq))}..{fmt(max(cq))}); the agent "
        f"(`hangwatch run` itself) used {fmt(median(ag), 0)} ms (median; max {fmt(max(ag), 0)}) per round of "
        f"{2 * r['requests']:,} requests; others took {fmt(median(oa))} / {fmt(median(ob))} % of the CPU "
        f"(medians, plain / watched); no report in any watched round, the observer mapped in each")


def table(r):
    out = []

    def row(measure, n, med, p99, comparison, budget="", result=""):
        out.append((measure, n, med, p99, comparison, budget, result))

    rows(r, row)
    head = ("measure", "n", "median", "p99", "comparison", "budget", "result")
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(x) + " |" for x in out]
    return "\n".join(lines)


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(root, "build"))
    ap.add_argument("--pairs", type=int, default=PAIRS, help="plain / watched pairs of rounds")
    ap.add_argument("--requests", type=int, default=REQUESTS, help="per test (SET, GET) and round")
    ap.add_argument("--clients", type=int, default=CLIENTS)
    ap.add_argument("--cpu", default=CPU, help="the CPU server and client share: last (default), none "
                    "(not pinned) or a number")
    args = ap.parse_args()
    if args.pairs < 1 or args.requests < 1 or args.clients < 1:
        sys.exit("bench: --pairs, --requests and --clients must be positive")
    started = time.monotonic()
    r = measure(os.path.join(os.path.abspath(args.build), "bin", "hangwatch"), args.pairs, args.requests,
                args.clients, cpu=args.cpu)
    log(f"took {time.monotonic() - started:.0f} s")
    print(table(r))


if __name__ == "__main__":
    main()
