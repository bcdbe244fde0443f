"""python_line_tables.py - a Python process built to make hangwatch read as much as it can: 32
threads, each 128 frames deep in distinct code objects whose line table is 256 KiB of valid "no
location" entries (all legal API: code.replace), then the main thread's loop hangs, spinning for
SECONDS (default 3).  Prints "ready" once the threads wait, "spin T" (CLOCK_MONOTONIC) as the hang
starts (attacker_loop.py), "done" at the end.  CPython 3.11 and later (their location table
format)."""
import sys
import threading

from attacker_loop import ready_then_hang

DEPTH, THREADS = 128, 32
SECONDS = float(sys.argv[1]) if len(sys.argv) > 1 else 3
NO_LOCATION = bytes([0x80 | (15 << 3) | 0]) * (256 * 1024)  # code 15: no location, one code unit each


def make_chain(tag):
    """A call chain of DEPTH distinct functions (each its own code object), waiting at its end."""
    functions = []
    for i in range(DEPTH):
        namespace = {}
        exec(compile(f"def f{i}(nxt, ev):\n    return nxt(ev)\n", f"chain_{tag}_{i}.py", "exec"), namespace)
        f = namespace[f"f{i}"]
        f.__code__ = f.__code__.replace(co_linetable=NO_LOCATION)
        functions.append(f)

    def link(i):
        if i == DEPTH:
            return lambda ev: ev.wait()
        nxt = link(i + 1)
        return lambda ev, f=functions[i], nxt=nxt: f(nxt, ev)
    return link(0)


def main():
    ev = threading.Event()
    threads = [threading.Thread(target=make_chain(t), args=(ev,)) for t in range(THREADS)]
    for t in threads:
        t.start()
    ready_then_hang(SECONDS)
    ev.set()
    for t in threads:
        t.join()
    print("done", flush=True)


main()
