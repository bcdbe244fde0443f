"""launch_cells - start the coverage matrix's rows under one `hangwatch run`
(tests/integration/test_coverage.py) and wait for them all.

    launch_cells.py OUT_DIR ROW_NAME ARGV_JSON [ROW_NAME ARGV_JSON ...]

Each row's program runs with its output in OUT_DIR/ROW_NAME.out; the
launcher prints "ROW_NAME PID" for each, then waits for all of them in a
poll loop on their pidfds (a loop of its own, so that hangwatch takes it
for the event loop it is and not for a launch that never ends), and exits
0 when every one has exited 0, 1 otherwise.
"""
import json
import os
import select
import subprocess
import sys


def main():
    out_dir, rest = sys.argv[1], sys.argv[2:]
    procs = {}
    for name, argv in zip(rest[0::2], rest[1::2]):
        with open(os.path.join(out_dir, name + ".out"), "w") as out:
            p = subprocess.Popen(json.loads(argv), stdout=out, stderr=subprocess.STDOUT)
        procs[os.pidfd_open(p.pid)] = (name, p)
        print(f"{name} {p.pid}", flush=True)
    waiting = select.poll()
    for fd in procs:
        waiting.register(fd, select.POLLIN)
    failed = False
    left = len(procs)
    while left:
        for fd, _ in waiting.poll(1000):
            name, p = procs[fd]
            waiting.unregister(fd)
            left -= 1
            if p.wait() != 0:
                failed = True
                print(f"{name} exited {p.returncode}", flush=True)
    sys.exit(1 if failed else 0)


main()
