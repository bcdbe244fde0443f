"""glib_hang - a GLib main loop (it waits in poll(), not epoll) whose timeout
callback blocks for 3 s, for hangwatch's tests (python3-gi)."""
import time

from gi.repository import GLib

loop = GLib.MainLoop()
ticks = 0


def on_tick():
    global ticks
    ticks += 1
    if ticks == 5:
        start = time.monotonic()
        time.sleep(3)  # blocks the main loop
        print(f"glib: callback blocked {time.monotonic() - start:.3f} s", flush=True)
    if ticks == 8:
        loop.quit()
        return False
    return True


GLib.timeout_add(50, on_tick)
loop.run()
