"""python_versions - the hangs a Python developer makes, for every CPython
from 3.7 to 3.13 (the tests run it with each interpreter the machine has).

  python_versions.py sleep   an asyncio handler calls slow_handler(), which
                             time.sleep(3)s
  python_versions.py spin    a handler spins 3 s in pure Python in
                             spin_handler()
  python_versions.py gil     a second thread, cruncher, holds the GIL about
                             3 s inside one C call (a regular expression
                             that backtracks catastrophically, as in a
                             ReDoS) in crunch_numbers(); the loop's handler
                             sleeps 50 ms and then waits for the GIL
  python_versions.py names   threads named worker_alpha, worker_beta and
                             worker_gamma sleep in alpha_sleeps(),
                             beta_sleeps() and gamma_sleeps() while the
                             loop hangs 3 s in main_hangs()
  python_versions.py idle    the same three threads, and a loop that waits,
                             until stdin closes (for `hangwatch stack`)
  python_versions.py watch   a loop that waits until a line comes on stdin
                             (for `hangwatch watch -p` to attach first), then
                             turns over and calls slow_handler()
  python_versions.py selectidle
                             hand-written select.select loops, one per child
                             process, turning every 20 ms and going idle for
                             1.6 s at turn K, K from 2 to 16 (on 3.11+ the
                             interpreter specializes the loop's call into
                             select.select after a few turns, which moves the
                             C frame the select set lies in); each child
                             prints "child K PID", "idle K" and "turned K";
                             no hang

The line numbers the tests look for are printed at start ("line NAME N"),
so the tests never hard-code them; "ready" once the threads run.
"""
import asyncio
import inspect
import os
import re
import subprocess
import sys
import threading
import time


def line_of(marker):
    """The line of this file that ends with the comment `# <marker>`."""
    for number, text in enumerate(inspect.getsource(sys.modules[__name__]).splitlines(), 1):
        if text.rstrip().endswith("# " + marker):
            return number
    raise LookupError(marker)


def slow_handler():
    time.sleep(3)  # slow-sleep


def spin_handler():
    end = time.monotonic() + 3
    total = 0
    while time.monotonic() < end:  # spin-loop
        total += sum(range(50))  # spin-loop
    return total


def backtracking_length(seconds):
    """The length of 'a...ab' that (a+)+$ takes about `seconds` of CPU to
    reject: each 'a' more doubles the time.  Timed in CPU time, not on the
    clock: on a busy machine the clock also counts the waits for a CPU, and
    the hang came out shorter than the threshold."""
    cpu_time = getattr(time, "thread_time", time.process_time)  # 3.7 on; the process's before
    pattern = re.compile(r"(a+)+$")
    n, took = 14, 0.0
    while took < 0.05:
        n += 1
        start = cpu_time()
        pattern.match("a" * n + "b")
        took = cpu_time() - start
    while took < seconds:
        n += 1
        took *= 2
    return n


def crunch_numbers(n):
    return re.match(r"(a+)+$", "a" * n + "b")  # crunch-call


def alpha_sleeps(stop):
    while not stop.wait(0.05):  # alpha-wait
        pass


def beta_sleeps(stop):
    while not stop.wait(0.07):  # beta-wait
        pass


def gamma_sleeps(stop):
    while not stop.wait(0.09):  # gamma-wait
        pass


def main_hangs():
    time.sleep(3)  # main-sleep


def start_workers(stop):
    workers = [threading.Thread(target=f, args=(stop,), name=name)
               for f, name in ((alpha_sleeps, "worker_alpha"), (beta_sleeps, "worker_beta"),
                               (gamma_sleeps, "worker_gamma"))]
    for w in workers:
        w.start()
    return workers


async def handle(mode, gil_length=0):
    await asyncio.sleep(0.3)  # let the loop turn over first, as a real service does
    if mode == "sleep":
        slow_handler()  # handle-call
    elif mode == "spin":
        spin_handler()  # handle-call
    elif mode == "gil":
        cruncher = threading.Thread(target=crunch_numbers, args=(gil_length,), name="cruncher")
        cruncher.start()
        await asyncio.sleep(0.2)
        time.sleep(0.05)  # gil-wait
        cruncher.join()
    elif mode == "names":
        stop = threading.Event()
        workers = start_workers(stop)
        await asyncio.sleep(0.3)
        main_hangs()  # names-call
        stop.set()
        for w in workers:
            w.join()


async def idle():
    stop = threading.Event()
    workers = start_workers(stop)
    print("ready", flush=True)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.read)
    stop.set()
    for w in workers:
        w.join()


async def watched():
    loop = asyncio.get_running_loop()
    go = loop.create_future()
    loop.add_reader(sys.stdin.fileno(), lambda: go.done() or go.set_result(sys.stdin.readline()))
    print("ready", flush=True)
    await go
    loop.remove_reader(sys.stdin.fileno())
    await asyncio.sleep(0.3)
    slow_handler()  # watch-call


def select_loop_idle_at(k):
    """One child of selectidle: a select loop idle once, at turn `k`."""
    import select
    import socket
    waker, other = socket.socketpair()
    wait = lambda timeout: select.select([waker, other], [], [], timeout)  # noqa: E731
    say = lambda line: os.write(1, (line + "\n").encode())  # noqa: E731 (one write: children share stdout)
    say(f"child {k} {os.getpid()}")
    turns, after = 0, 0.02
    while after is not None:
        wait(after)
        turns += 1
        after = 0.02 if turns < k else 1.6 if turns == k else None
        if turns == k:
            say(f"idle {k}")
    say(f"turned {k}")


def select_loops_idle_at_every_turn():
    sys.stdout.flush()
    children = [subprocess.Popen([sys.executable, __file__, "selectidle-child", str(k)]) for k in range(2, 17)]
    for child in children:
        child.wait()


def main():
    mode = sys.argv[1]
    if mode == "selectidle-child":
        return select_loop_idle_at(int(sys.argv[2]))
    for marker in ("slow-sleep", "spin-loop", "crunch-call", "gil-wait", "alpha-wait", "beta-wait", "gamma-wait",
                   "main-sleep", "handle-call", "names-call", "watch-call"):
        print(f"line {marker} {line_of(marker)}", flush=True)
    print(f"python {sys.version_info[0]}.{sys.version_info[1]}.{sys.version_info[2]}", flush=True)
    if mode == "idle":
        asyncio.run(idle())
    elif mode == "selectidle":
        select_loops_idle_at_every_turn()
    elif mode == "watch":
        asyncio.run(watched())
    elif mode == "gil":
        # timed before the loop runs: on a busy machine the timing itself may outlast the
        # threshold, a stall of its own (a launch hang then) that is not the GIL's
        asyncio.run(handle(mode, backtracking_length(3.0)))
    else:
        asyncio.run(handle(mode))
    print(f"python_versions: {mode} done", flush=True)


if __name__ == "__main__":
    main()
