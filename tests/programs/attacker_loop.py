"""attacker_loop.py - the loop an attacking test program hangs in, as beside_honest.py expects it:
"ready", a second of selector turns (so that the agent sees a loop), then "spin T" (T its
CLOCK_MONOTONIC as the hang begins) and a spin of SECONDS.  Imported by python_line_tables.py and
many_mappings.py, from their own folder."""
import selectors
import time


def ready_then_hang(seconds):
    print("ready", flush=True)
    selector = selectors.DefaultSelector()
    end = time.monotonic() + 1
    while time.monotonic() < end:
        selector.select(0.05)
    start = time.monotonic()
    print("spin", time.clock_gettime(time.CLOCK_MONOTONIC), flush=True)
    while time.monotonic() - start < seconds:
        pass
