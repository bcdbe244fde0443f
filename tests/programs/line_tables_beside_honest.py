"""line_tables_beside_honest.py - an honest hang that crosses its threshold while hangwatch reads
the names of an attacker's capture.

Starts python_line_tables.py (32 threads 128 frames deep in code objects with 256 KiB line
tables, whose main loop then spins SECONDS) and hang_on_command (an honest epoll loop).  Once the
attacker's spin has begun, at its own clock's time T, the honest program is told to hang
SECONDS too, at T + OFFSET_MS: its threshold comes OFFSET_MS after the attacker's, while the
attacker's capture is being named.  Prints "offset MS" (the honest hang's start, measured, after
the attacker's) and "done" once both have ended.

usage: line_tables_beside_honest.py HANG_ON_COMMAND [SECONDS] [OFFSET_MS]"""
import os
import subprocess
import sys
import time

HONEST = sys.argv[1]
SECONDS = float(sys.argv[2]) if len(sys.argv) > 2 else 3
OFFSET_MS = float(sys.argv[3]) if len(sys.argv) > 3 else 15
ATTACKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "python_line_tables.py")

attacker = subprocess.Popen([sys.executable, ATTACKER, str(SECONDS)], stdout=subprocess.PIPE, text=True)
honest = subprocess.Popen([HONEST], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
if honest.stdout.readline().strip() != "ready" or attacker.stdout.readline().strip() != "ready":
    sys.exit("a program did not start")
line = attacker.stdout.readline().split()
if len(line) != 2 or line[0] != "spin":
    sys.exit(f"the attacker said {line!r}")
start = float(line[1]) + OFFSET_MS / 1000
while time.clock_gettime(time.CLOCK_MONOTONIC) < start:
    pass  # a few milliseconds: a sleep could overshoot them on a busy machine
told = time.clock_gettime(time.CLOCK_MONOTONIC)
honest.stdin.write(f"hang {int(SECONDS * 1000)}\n")
honest.stdin.flush()
print(f"offset {(told - float(line[1])) * 1000:.1f}", flush=True)
if not honest.stdout.readline().startswith("hung"):
    sys.exit("the honest program did not hang")
honest.stdin.write("quit\n")
honest.stdin.flush()
rest = attacker.stdout.read()
if honest.wait() != 0 or attacker.wait() != 0 or "done" not in rest:
    sys.exit("a program failed")
print("done", flush=True)
