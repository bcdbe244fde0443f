"""loop_cell - one row of the loop-library coverage matrix
(tests/integration/test_coverage.py): a real event loop of one library that
turns every 20 ms and, once told to go, blocks from one of its callbacks in
each way KINDS lists, one after the other, each in a function of its own
whose name says how (hold_the_loop_with_KIND), with GAP s of turning
between them; then turns a while longer and exits.

    loop_cell.py LIBRARY KINDS PORT GO_FILE DELAY HOLD [idle-first]

LIBRARY: asyncio (its default selector, epoll), asyncio_poll,
asyncio_select, uvloop, tornado, twisted, gevent (not monkey-patched: the
blocking call blocks its hub), glib (GLib.MainLoop through python3-gi),
gtk (a GTK 3 window on $DISPLAY whose button's clicked handler holds, each
hold a click through the X server), select_loop, poll_loop, epoll_loop
(hand-written loops of the select module).
KINDS, comma-separated: sleep, spin, http (urlopen with a timeout from the driver's slow
server at PORT, which answers after HOLD s), fifo (read a FIFO whose
writer comes after HOLD s), child (subprocess.run of sleep HOLD), lock (a
lock another thread holds for HOLD s), cext (a C extension's work:
zlib.compress, HOLD s of it), nested (glib and gtk only: a modal loop, a
GLib main loop run from the callback on the same context for HOLD s, or
gtk's modal dialog, which dispatches the program's events: not a hang);
or none: the loop turns
every 1 ms for 60 s.
It prints "ready PID" once its loop turns, waits until GO_FILE exists, and
blocks DELAY s later; "held KIND S" after each (the program's own measure
of the time its loop was held), "done" at the end.  With idle-first, its
loop does not turn in those DELAY s: it waits in its wait call all along
(an idle service, as `hangwatch watch` finds it), and says "idle" as it
begins.  Function bodies differ.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import zlib

LIBRARY, KINDS, PORT, GO_FILE, DELAY, HOLD = sys.argv[1], sys.argv[2].split(","), int(sys.argv[3]), sys.argv[4], \
    float(sys.argv[5]), float(sys.argv[6])
IDLE = KINDS == ["none"]
IDLE_FIRST = sys.argv[7:] == ["idle-first"]
TICK = 0.001 if IDLE else 0.02
TAIL = 60.0 if IDLE else 1.5
GAP = 1.2


def hold_the_loop_with_sleep():
    time.sleep(HOLD)


def hold_the_loop_with_spin():
    end = time.monotonic() + HOLD
    n = 0
    while time.monotonic() < end:
        n += 1
    return n


def hold_the_loop_with_http():
    with urllib.request.urlopen(f"http://127.0.0.1:{PORT}/{HOLD}", timeout=30) as r:
        return r.read()


def hold_the_loop_with_fifo():
    folder = tempfile.mkdtemp(prefix="hw-cell-")
    path = os.path.join(folder, "fifo")
    os.mkfifo(path)

    def write_later():
        time.sleep(HOLD)
        with open(path, "w") as f:
            f.write("late\n")
    writer = threading.Thread(target=write_later, daemon=True)
    writer.start()
    try:
        with open(path) as f:
            return f.read()
    finally:
        writer.join()
        shutil.rmtree(folder, ignore_errors=True)


def hold_the_loop_with_child():
    return subprocess.run(["sleep", str(HOLD)]).returncode


def hold_the_loop_with_lock():
    lock = threading.Lock()
    holding = threading.Event()

    def hold_it():
        with lock:
            holding.set()
            time.sleep(HOLD)
    threading.Thread(target=hold_it, daemon=True).start()
    holding.wait()
    with lock:
        return True


def hold_the_loop_with_cext():
    data = os.urandom(1 << 20)
    end = time.monotonic() + HOLD
    total = 0
    while time.monotonic() < end:
        total += len(zlib.compress(data, 9))
    return total


def hold_the_loop_with_nested():
    from gi.repository import GLib
    if LIBRARY == "gtk":
        # a modal dialog's own loop (Gtk.Dialog.run), closed after HOLD s
        from gi.repository import Gtk
        dialog = Gtk.Dialog(title="modal", modal=True)
        GLib.timeout_add(int(HOLD * 1000), lambda: dialog.response(Gtk.ResponseType.CLOSE) or False)
        dialog.run()
        dialog.destroy()
        return
    inner = GLib.MainLoop()
    GLib.timeout_add(int(HOLD * 1000), inner.quit)
    inner.run()


HOLDERS = {"nested": hold_the_loop_with_nested, "sleep": hold_the_loop_with_sleep, "spin": hold_the_loop_with_spin, "http": hold_the_loop_with_http,
           "fifo": hold_the_loop_with_fifo, "child": hold_the_loop_with_child, "lock": hold_the_loop_with_lock,
           "cext": hold_the_loop_with_cext}


class Cell:
    """What every library's loop does at each tick: say ready, wait for the
    go, block once, end after the tail.  `stop` ends the library's loop."""

    def __init__(self, stop, start_hold=None):
        self.stop = stop
        self.start_hold = start_hold or self.hold  # gtk's: a click on a button whose handler holds
        self.turns = 0
        self.next_at = None  # the next hold's time, once told to go
        self.holds = [] if IDLE else list(KINDS)
        self.end_at = None

    def hold(self, kind):
        """Block the loop as `kind` says, timed by the program's own clock;
        the next hold GAP s after."""
        start = time.monotonic()
        HOLDERS[kind]()
        print(f"held {kind} {time.monotonic() - start:.3f}", flush=True)
        self.next_at = time.monotonic() + GAP
        if not self.holds:
            self.end_at = time.monotonic() + TAIL

    def tick(self):
        """One turn: the time to the next one, or None to stop."""
        self.turns += 1
        now = time.monotonic()
        if self.turns == 3:
            print(f"ready {os.getpid()}", flush=True)
        if self.next_at is None and self.turns >= 3 and os.path.exists(GO_FILE):
            self.next_at = now + DELAY
            if IDLE:
                self.end_at = now + TAIL
            if IDLE_FIRST:
                print("idle", flush=True)
                return DELAY  # no turn until the first hold: idle in the wait
        if self.holds and self.next_at is not None and now >= self.next_at:
            self.next_at = float("inf")  # until the hold has run
            self.start_hold(self.holds.pop(0))
        if self.end_at is not None and now >= self.end_at:
            print("done", flush=True)
            self.stop()
            return None
        return TICK


def run_asyncio(loop):
    import asyncio
    asyncio.set_event_loop(loop)
    cell = Cell(loop.stop)

    def tick():
        after = cell.tick()
        if after is not None:
            loop.call_later(after, tick)
    loop.call_soon(tick)
    loop.run_forever()


def run_gtk():
    """A GTK 3 window (on $DISPLAY, an Xvfb the test starts) whose button's
    clicked handler holds the loop: each hold is a real click, pressed
    through the X server by xdotool (XTEST; GDK's own simulated click is a
    sent event, which GTK's XInput2 devices ignore) and dispatched by GTK
    from its connection's events, as a user's would be."""
    import gi
    gi.require_version("Gtk", "3.0")
    gi.require_version("GdkX11", "3.0")
    from gi.repository import GdkX11, GLib, Gtk  # noqa: F401 (GdkX11: the window's X id)
    window = Gtk.Window(title="loop_cell")
    button = Gtk.Button(label="hold the loop")
    window.add(button)
    window.show_all()
    clicks = []  # the kinds whose click is on its way

    def on_button_clicked(_button):
        cell.hold(clicks.pop(0))

    def click(kind):
        clicks.append(kind)
        where = button.get_allocation()
        subprocess.Popen(["xdotool", "mousemove", "--window", str(window.get_window().get_xid()),
                          str(where.x + where.width // 2), str(where.y + where.height // 2), "click", "1"])
    button.connect("clicked", on_button_clicked)
    cell = Cell(Gtk.main_quit, click)

    def tick():
        after = cell.tick()
        if after is not None:
            GLib.timeout_add(max(1, int(after * 1000)), tick)
        return False
    GLib.timeout_add(max(1, int(TICK * 1000)), tick)
    Gtk.main()


def main():
    if LIBRARY in ("asyncio", "asyncio_poll", "asyncio_select"):
        import asyncio
        import selectors
        selector = {"asyncio_poll": selectors.PollSelector, "asyncio_select": selectors.SelectSelector}.get(
            LIBRARY, selectors.DefaultSelector)()
        run_asyncio(asyncio.SelectorEventLoop(selector))
    elif LIBRARY == "uvloop":
        import uvloop
        run_asyncio(uvloop.new_event_loop())
    elif LIBRARY == "tornado":
        from tornado.ioloop import IOLoop
        io = IOLoop.current()
        cell = Cell(io.stop)

        def tick():
            after = cell.tick()
            if after is not None:
                io.call_later(after, tick)
        io.add_callback(tick)
        io.start()
    elif LIBRARY == "twisted":
        from twisted.internet import epollreactor
        epollreactor.install()
        from twisted.internet import reactor
        cell = Cell(reactor.stop)

        def tick():
            after = cell.tick()
            if after is not None:
                reactor.callLater(after, tick)
        reactor.callWhenRunning(tick)
        reactor.run(installSignalHandlers=False)
    elif LIBRARY == "gevent":
        import gevent
        import gevent.event
        done = gevent.event.Event()
        cell = Cell(done.set)

        def ticker():
            after = cell.tick()
            while after is not None:
                gevent.sleep(after)
                after = cell.tick()
        gevent.spawn(ticker)
        done.wait()
    elif LIBRARY == "glib":
        from gi.repository import GLib
        main_loop = GLib.MainLoop()
        cell = Cell(main_loop.quit)
        def tick():
            after = cell.tick()
            if after is not None:
                GLib.timeout_add(max(1, int(after * 1000)), tick)
            return False
        GLib.timeout_add(max(1, int(TICK * 1000)), tick)
        main_loop.run()
    elif LIBRARY == "gtk":
        run_gtk()
    elif LIBRARY in ("select_loop", "poll_loop", "epoll_loop"):
        import select
        import socket
        waker, other = socket.socketpair()
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        cell = Cell(lambda: None)
        if LIBRARY == "poll_loop":
            p = select.poll()
            p.register(waker, select.POLLIN)
            p.register(listener, select.POLLIN)
            wait = lambda timeout: p.poll(timeout * 1000)  # noqa: E731
        elif LIBRARY == "epoll_loop":
            e = select.epoll()
            e.register(waker, select.EPOLLIN)
            e.register(listener, select.EPOLLIN)
            wait = lambda timeout: e.poll(timeout)  # noqa: E731
        else:
            wait = lambda timeout: select.select([waker, listener], [], [], timeout)  # noqa: E731
        after = TICK
        while after is not None:
            wait(after)
            after = cell.tick()
    else:
        print(f"unknown library {LIBRARY}", file=sys.stderr)
        sys.exit(2)


main()
