"""beside_honest.py - an honest hang that crosses its threshold while hangwatch handles an
attacker's hang.

Starts ATTACKER (a Python program that hangs as attacker_loop.py does: "ready", then "spin T" with
T its CLOCK_MONOTONIC as its loop's hang begins, and "done" at its end; it gets SECONDS as its
argument) and
hang_on_command (an honest epoll loop).  Once the attacker's spin has begun, the honest program
is told to hang SECONDS too, at T + OFFSET_MS: its threshold comes OFFSET_MS after the
attacker's, while the agent handles the attacker's capture.  Prints "offset MS" (the honest
hang's start, measured, after the attacker's), "told T" (when the honest program was told, on CLOCK_MONOTONIC) and "done" once both
have ended.

usage: beside_honest.py HANG_ON_COMMAND ATTACKER.py [SECONDS] [OFFSET_MS]"""
import os
import subprocess
import sys
import time

HONEST, ATTACKER = sys.argv[1], sys.argv[2]
SECONDS = float(sys.argv[3]) if len(sys.argv) > 3 else 3
OFFSET_MS = float(sys.argv[4]) if len(sys.argv) > 4 else 15
if not os.path.isabs(ATTACKER):
    ATTACKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), ATTACKER)

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
print(f"told {told:.6f}", flush=True)
if not honest.stdout.readline().startswith("hung"):
    sys.exit("the honest program did not hang")
honest.stdin.write("quit\n")
honest.stdin.flush()
rest = attacker.stdout.read()
if honest.wait() != 0 or attacker.wait() != 0 or "done" not in rest:
    sys.exit("a program failed")
print("done", flush=True)
