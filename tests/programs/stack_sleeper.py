"""stack_sleeper - a Python program test_stack.py looks at with `hangwatch
stack PID` while it sleeps 3 s in a nested function (main -> outer -> inner
-> time.sleep).  Prints "ready" first and "slept SECONDS" (its own
monotonic measure of the sleep) at the end."""
import sys
import time


def inner():
    start = time.monotonic()
    time.sleep(3)
    return time.monotonic() - start


def outer():
    slept = inner()
    return slept


def main():
    print("ready", flush=True)
    print(f"slept {outer():.6f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
