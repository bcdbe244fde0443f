"""python_frames - event loops whose hangs hangwatch must name in Python.

  python_frames.py sleep     an asyncio coroutine calls a plain function
                             that time.sleep(3)s
  python_frames.py pbkdf2    a coroutine calls a function that spins 3 s in
                             a C extension (hashlib.pbkdf2_hmac, OpenSSL)
  python_frames.py threads   three threads sleep in three functions while
                             the loop is blocked in time.sleep(3)
  python_frames.py spin      a coroutine spins 3 s in pure Python (for early
                             sampling's Point Stack)
  python_frames.py glib      a GLib main loop (PyGObject) whose timeout
                             callback blocks 3 s

The line numbers of the calls the tests look for are printed at start
("line NAME N"), so the tests never hard-code them.
"""
import asyncio
import hashlib
import inspect
import sys
import threading
import time


def line_of(marker):
    """The line of this file that ends with the comment `# <marker>`."""
    for number, text in enumerate(inspect.getsource(sys.modules[__name__]).splitlines(), 1):
        if text.rstrip().endswith("# " + marker):
            return number
    raise LookupError(marker)


def handle_request_synchronously():
    time.sleep(3)  # sleep-call


def derive_key_slowly():
    end = time.monotonic() + 3
    rounds = 0
    while time.monotonic() < end:
        hashlib.pbkdf2_hmac("sha256", b"password", b"salt", 200_000)  # pbkdf2-call
        rounds += 1
    return rounds


def spin_in_python():
    end = time.monotonic() + 3
    total = 0
    while time.monotonic() < end:  # spin-loop
        total += sum(range(50))  # spin-loop
    return total


def thread_alpha(stop):
    while not stop.wait(0.05):  # alpha-wait
        pass


def thread_beta(stop):
    while not stop.wait(0.07):  # beta-wait
        pass


def thread_gamma(stop):
    while not stop.wait(0.09):  # gamma-wait
        pass


async def serve(mode):
    await asyncio.sleep(0.3)  # let the loop turn over first, as a real service does
    if mode == "sleep":
        handle_request_synchronously()  # serve-call
    elif mode == "pbkdf2":
        derive_key_slowly()  # serve-call
    elif mode == "spin":
        spin_in_python()  # serve-call
    elif mode == "threads":
        stop = threading.Event()
        workers = [threading.Thread(target=f, args=(stop,), name=f.__name__) for f in
                   (thread_alpha, thread_beta, thread_gamma)]
        for w in workers:
            w.start()
        await asyncio.sleep(0.2)
        handle_request_synchronously()  # serve-threads-call
        stop.set()
        for w in workers:
            w.join()


def glib_main():
    from gi.repository import GLib

    loop = GLib.MainLoop()
    ticks = [0]

    def on_timeout_blocking():
        ticks[0] += 1
        if ticks[0] == 5:
            time.sleep(3)  # glib-sleep
        if ticks[0] == 8:
            loop.quit()
            return False
        return True

    GLib.timeout_add(50, on_timeout_blocking)
    loop.run()


def main():
    mode = sys.argv[1]
    for marker in ("sleep-call", "pbkdf2-call", "serve-call", "serve-threads-call", "alpha-wait", "beta-wait",
                   "gamma-wait", "glib-sleep"):
        print(f"line {marker} {line_of(marker)}", flush=True)
    if mode == "glib":
        glib_main()
    else:
        asyncio.run(serve(mode))
    print(f"python_frames: {mode} done", flush=True)


if __name__ == "__main__":
    main()
