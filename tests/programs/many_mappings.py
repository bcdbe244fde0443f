"""many_mappings.py - a Python process built to make hangwatch read a long memory map: as many
mappings as the kernel allows (vm.max_map_count, 65,530 by default: every other page of one
region made read-only, all legal API), so that /proc/PID/maps is about 6 MiB; then its loop hangs,
spinning for SECONDS (default 3).  Prints "ready" once mapped, "spin T" (CLOCK_MONOTONIC) as the
hang starts (attacker_loop.py), "done" at the end."""
import ctypes
import errno
import mmap
import sys

from attacker_loop import ready_then_hang

SECONDS = float(sys.argv[1]) if len(sys.argv) > 1 else 3
PAGE = mmap.PAGESIZE
libc = ctypes.CDLL(None, use_errno=True)
libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)

with open("/proc/sys/vm/max_map_count") as f:
    count = int(f.read())
region = mmap.mmap(-1, 2 * PAGE * count, prot=mmap.PROT_READ | mmap.PROT_WRITE)
base = ctypes.addressof(ctypes.c_char.from_buffer(region))
for i in range(count):
    if libc.mprotect(base + 2 * PAGE * i, PAGE, mmap.PROT_READ) != 0:
        if ctypes.get_errno() == errno.ENOMEM:
            break  # the bound on mappings: as many as there can be
        sys.exit(f"mprotect: {ctypes.get_errno()}")
ready_then_hang(SECONDS)
print("done", flush=True)
