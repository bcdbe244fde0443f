"""bench/machine_stalls.py - when the machine itself ran nothing of ours.

A line-delay measurement times hangwatch's real-time threads against the
program's clock.  On a shared virtual machine the whole guest is sometimes
not run for most of a second (the host gave its CPUs to someone else): the
program, the agent and the reader all stop together, and the line comes
that much later, whatever hangwatch does.  A fresh CI run saw one: a line
916 ms late, the hung program itself held 0.5 s past its sleep, the line
written the moment the guest ran again.

A watcher process at the highest SCHED_FIFO priority wakes every
millisecond and notes each gap of more than STALL_NS between two wake-ups:
a gap that even it could not avoid is time no thread of the machine's
below it was given either (a frozen guest, or real-time throttling), and
the measurement allows exactly that time, and says so.  Without the right
to real time (not root) the watcher runs at the normal policy, and its
gaps are then not the machine's: `measured` is False and nothing is
allowed.  Its cost: about a thousand short wake-ups a second.
"""
import subprocess
import sys

STALL_NS = 20_000_000

WATCHER = r"""
import os, sys, time
real_time = True
try:
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(os.sched_get_priority_max(os.SCHED_FIFO)))
except (OSError, AttributeError):
    real_time = False
print("real-time" if real_time else "normal", flush=True)
limit = int(sys.argv[1])
last = time.monotonic_ns()
while True:
    time.sleep(0.001)
    now = time.monotonic_ns()
    if now - last > limit:
        print(last, now - last, flush=True)
    last = now
"""


class Watch:
    """Started by start(); stop() gives its stalls: (start_ns, length_ns) on CLOCK_MONOTONIC."""

    def __init__(self):
        self.proc = subprocess.Popen([sys.executable, "-c", WATCHER, str(STALL_NS)], stdout=subprocess.PIPE,
                                     text=True)
        self.measured = self.proc.stdout.readline().strip() == "real-time"
        self.stalls = []

    def stop(self):
        """Ends the watcher (again: nothing more); its stalls."""
        if self.proc.returncode is not None:
            return self.stalls
        self.proc.kill()
        out, _ = self.proc.communicate(timeout=30)
        for line in out.splitlines():
            fields = line.split()
            if len(fields) == 2 and fields[0].isdigit() and fields[1].isdigit():
                self.stalls.append((int(fields[0]), int(fields[1])))
        return self.stalls


def start():
    return Watch()


def overlap_ns(stalls, begin_ns, end_ns):
    """How much of [begin_ns, end_ns] the machine stalled."""
    return sum(max(0, min(end_ns, s + n) - max(begin_ns, s)) for s, n in stalls)


def describe(watch):
    if not watch.measured:
        return "machine stalls not measured (no right to real time)"
    if not watch.stalls:
        return f"the machine never stalled over {STALL_NS // 1_000_000} ms"
    longest = max(n for _, n in watch.stalls)
    return (f"the machine stalled {len(watch.stalls)} time(s) over {STALL_NS // 1_000_000} ms, the longest "
            f"{longest / 1e6:.0f} ms (a highest-priority real-time watcher missed its wake-ups)")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: machine_stalls.py SECONDS")
    import time
    w = start()
    time.sleep(float(sys.argv[1]))
    w.stop()
    print(describe(w))
    for s, n in w.stalls:
        print(s, n)
