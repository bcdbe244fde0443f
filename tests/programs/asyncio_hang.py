"""asyncio_hang - an asyncio program for hangwatch's tests.

  asyncio_hang.py blocking   a coroutine calls time.sleep(3): the event loop
                             is blocked (a hang)
  asyncio_hang.py awaiting   a coroutine awaits asyncio.sleep(3): the loop
                             waits, responsive (no hang)
"""
import asyncio
import sys
import time


async def blocking_coroutine():
    time.sleep(3)


async def awaiting_coroutine():
    await asyncio.sleep(3)


async def main(mode):
    await asyncio.sleep(0.3)  # let the loop turn over first, as a real service does
    start = time.monotonic()
    await (blocking_coroutine() if mode == "blocking" else awaiting_coroutine())
    print(f"asyncio: {mode} took {time.monotonic() - start:.3f} s", flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
