"""cpu_wait - how long the calling thread has waited for a CPU, for the test
programs that say how long a span of theirs took: a busy machine makes a
span longer by that much, and hangwatch does not."""


def queued_seconds():
    """The thread's time runnable but not running so far, by the kernel's
    schedstat (0 without it)."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0
