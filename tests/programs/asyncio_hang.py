"""asyncio_hang - an asyncio program for hangwatch's tests.

  asyncio_hang.py blocking   a coroutine calls time.sleep(3): the event loop
                             is blocked (a hang)
  asyncio_hang.py awaiting   a coroutine awaits asyncio.sleep(3): the loop
                             waits, responsive (no hang)

Prints "asyncio: MODE took S s, Q s waiting for a CPU": the span's length by
the program's own clock, and how much of it the thread spent runnable but
not running (the kernel's schedstat: a busy machine's, not the watcher's).
"""
import asyncio
import sys
import time

from cpu_wait import queued_seconds


async def blocking_coroutine():
    time.sleep(3)


async def awaiting_coroutine():
    await asyncio.sleep(3)


async def main(mode):
    await asyncio.sleep(0.3)  # let the loop turn over first, as a real service does
    start, queued = time.monotonic(), queued_seconds()
    await (blocking_coroutine() if mode == "blocking" else awaiting_coroutine())
    print(f"asyncio: {mode} took {time.monotonic() - start:.3f} s, {queued_seconds() - queued:.3f} s waiting for a CPU",
          flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
