"""python_corrupt - a Python loop that breaks its own interpreter's frame
records while it hangs, to prove that hangwatch reads a corrupt interpreter
state without crashing or hanging, and says what it could not read.

  python_corrupt.py LAYOUTS_H MODE

LAYOUTS_H is src/agent/symbols/python_layouts.h, the offsets of CPython's
structures that tools/python_layout_gen.c took from each version's headers;
the table of the running interpreter's version is used.  MODE:
  loop     the hung function's frame record names itself as its caller
  garbage  its caller pointer points at unmapped memory
  code     its caller's code object pointer points at a plain integer
           object (the caller's: the interpreter reads the running frame's
           own code object again right after the call)

The function sleeps 3 s in time.sleep with the record broken (the
interpreter does not look at it during a C call) and repairs it before it
returns, so the program itself ends normally.
"""
import asyncio
import ctypes
import re
import sys
import time


def layout(path):
    name = "hw_python_layout_%d_%d" % sys.version_info[:2]
    with open(path) as f:
        table = re.search(r"\b%s = \{(.*?)\n\};" % name, f.read(), re.S).group(1)
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"\.(\w+) = (\d+),", table)}


def word(addr):
    return ctypes.c_uint64.from_address(addr)


def hang_with_broken_frame(L, mode):
    get = ctypes.pythonapi.PyThreadState_Get
    get.restype = ctypes.c_void_p
    tstate = get()
    cframe = word(tstate + L["tstate_cframe"]).value
    frame = word(cframe + L["cframe_current_frame"]).value  # this function's frame record
    if mode == "code":
        field = word(frame + L["frame_previous"]).value + L["frame_code"]
    else:
        field = frame + L["frame_previous"]
    saved = word(field).value
    bogus = {"loop": frame, "garbage": 0x10, "code": id(12345678901234567890)}[mode]
    keep = 12345678901234567890  # noqa: F841 - keeps the integer alive
    word(field).value = bogus
    try:
        time.sleep(3)
    finally:
        word(field).value = saved


async def serve(L, mode):
    await asyncio.sleep(0.3)
    hang_with_broken_frame(L, mode)


if __name__ == "__main__":
    asyncio.run(serve(layout(sys.argv[1]), sys.argv[2]))
    print("python_corrupt: done", flush=True)
