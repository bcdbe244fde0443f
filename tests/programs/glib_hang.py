"""glib_hang - a GLib main loop (it waits in poll(), not epoll) whose timeout
callback blocks for 3 s, for hangwatch's tests (python3-gi).  Prints "glib:
callback took S s, Q s waiting for a CPU" (its own clock, and the kernel's
count of its waits for a CPU: a busy machine's, not the watcher's)."""
import time

from gi.repository import GLib

from cpu_wait import queued_seconds

loop = GLib.MainLoop()
ticks = 0


def on_tick():
    global ticks
    ticks += 1
    if ticks == 5:
        start, queued = time.monotonic(), queued_seconds()
        time.sleep(3)  # blocks the main loop
        print(f"glib: callback took {time.monotonic() - start:.3f} s, {queued_seconds() - queued:.3f} s waiting for "
              "a CPU", flush=True)
    if ticks == 8:
        loop.quit()
        return False
    return True


GLib.timeout_add(50, on_tick)
loop.run()
