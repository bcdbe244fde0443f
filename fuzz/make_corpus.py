#!/usr/bin/python3
"""make_corpus.py - writes the seed corpora of the fuzz targets into
fuzz/corpus/NAME/ (committed; run again after changing it).

The seeds are what the fuzzers start from: well-formed inputs that reach
deep into the code (a registration the agent accepts, a valid page with busy
and idle loops and a script of looks, a real report), plus malformed ones
next to them.  Binary layouts are those of x86_64 Linux: struct cmsghdr is
{size_t len; int level; int type;} (16 bytes, bodies aligned to 8), struct
ucred is {pid, uid, gid}.  The input formats are described at the top of
each fuzz_NAME.c.  python_linetable's seeds are real line tables from the
Python interpreters tests/pythons.py finds (3.8 or 3.9, 3.10, Debian's
python3 or 3.11+); when one is missing, that corpus is left as committed.
python_memory's seeds are what the agent's Python readers read of each of
those interpreters, recorded by `--recorder BUILD/bin/record-python-memory`
(tools/record_python_memory.c); without it that corpus is left alone.
js_memory's are what the V8 readers read of the node on PATH, recorded by
`--js-recorder BUILD/bin/record-js-memory` (tools/record_js_memory.c).
"""
import json
import os
import shutil
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
import pythons  # noqa: E402 - tests/pythons.py finds the interpreters

SOL_SOCKET, SCM_RIGHTS, SCM_CREDENTIALS, SCM_PIDFD = 1, 1, 2, 4
MSG_TRUNC_BIT, MSG_CTRUNC_BIT, NO_CONTROL_BIT = 1, 2, 4
REG_MAGIC, PAGE_VERSION = 0x68777265, 1
PAGE_MAGIC, PAGE_SIZE, PAGE_SLOTS = 0x68616E6777746368, 4096, 63
NS_MS, NS_S = 1000000, 1000000000


def write_corpus(name, seeds):
    d = os.path.join(HERE, "corpus", name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    for fname, data in seeds.items():
        if isinstance(data, str):
            data = data.encode()
        with open(os.path.join(d, fname), "wb") as f:
            f.write(data)


# --- registration: [data length][flag bits][data][control] ----------------

def align8(n):
    return (n + 7) & ~7


def cmsg(level, ctype, body, length=None):
    """One cmsghdr with its body, padded to the next header."""
    if length is None:
        length = 16 + len(body)
    raw = struct.pack("<Qii", length, level, ctype) + body
    return raw + b"\0" * (align8(len(raw)) - len(raw))


def cred(pid=4242, uid=1000, gid=1000):
    return cmsg(SOL_SOCKET, SCM_CREDENTIALS, struct.pack("<iII", pid, uid, gid))


def rights(*fds):
    return cmsg(SOL_SOCKET, SCM_RIGHTS, struct.pack("<%di" % len(fds), *fds))


def pidfd(fd):
    return cmsg(SOL_SOCKET, SCM_PIDFD, struct.pack("<i", fd))


def reg_msg(magic=REG_MAGIC, version=PAGE_VERSION, pid=4242):
    return struct.pack("<IIii", magic, version, pid, 0)


def reg_input(data, control, flags=0):
    return bytes([len(data), flags]) + data + control


def registration_seeds():
    ok = reg_msg()
    return {
        "ok-cred-rights": reg_input(ok, cred() + rights(7)),
        "ok-cred-rights-pidfd": reg_input(ok, cred() + rights(7) + pidfd(9)),
        "ok-pidfd-rights-cred": reg_input(ok, pidfd(9) + rights(7) + cred()),
        "bad-no-cred": reg_input(ok, rights(7) + pidfd(9)),
        "bad-no-fd": reg_input(ok, cred() + pidfd(9)),
        "bad-two-fds": reg_input(ok, cred() + rights(7, 8)),
        "bad-two-rights": reg_input(ok, cred() + rights(7) + rights(8)),
        "bad-many-fds": reg_input(ok, cred() + rights(*range(10, 22))),
        "bad-two-pidfds": reg_input(ok, cred() + rights(7) + pidfd(9) + pidfd(10)),
        "bad-cmsg-len-too-big": reg_input(ok, cred() + cmsg(SOL_SOCKET, SCM_RIGHTS, struct.pack("<i", 7), 4096)),
        "bad-cmsg-len-too-small": reg_input(ok, cmsg(SOL_SOCKET, SCM_RIGHTS, b"", 8) + cred() + rights(7)),
        "bad-short-cred": reg_input(ok, cmsg(SOL_SOCKET, SCM_CREDENTIALS, b"\x01\x02\x03") + rights(7)),
        "bad-pid-zero": reg_input(ok, cred(pid=0) + rights(7)),
        "bad-truncated": reg_input(ok, cred() + rights(7), MSG_TRUNC_BIT),
        "bad-ctruncated": reg_input(ok, cred() + rights(7), MSG_CTRUNC_BIT),
        "bad-no-control": reg_input(ok, cred() + rights(7), NO_CONTROL_BIT),
        "bad-magic": reg_input(reg_msg(magic=0x12345678), cred() + rights(7)),
        "bad-version": reg_input(reg_msg(version=2), cred() + rights(7)),
        "bad-short-data": reg_input(ok[:12], cred() + rights(7)),
        "bad-long-data": reg_input(ok + b"\0\0\0\0", cred() + rights(7)),
        "bad-other-level": reg_input(ok, cmsg(0, SCM_RIGHTS, struct.pack("<i", 7)) + cred()),
        # fuzz_registration found this: a forged negative pidfd let more through
        "bad-forged-pidfds": reg_input(ok, cred() + pidfd(-9) + pidfd(10) * 8 + rights(7)),
        "bad-negative-fd": reg_input(ok, cred() + rights(-1)),
        "odd-rights-body": reg_input(ok, cred() + cmsg(SOL_SOCKET, SCM_RIGHTS, b"\x07\0\0\0\x08\0")),
    }


# --- page: [settings][script length][script][page bytes] ------------------

ACT = {"entry": 0, "before_timers": 1, "before_sources": 2, "before_waiting": 3, "after_waiting": 4, "exit": 5}
ACT_VALUE = {"entry": 1, "before_timers": 2, "before_sources": 4, "before_waiting": 32, "after_waiting": 64,
             "exit": 128}
FIELD = {"seq": 0, "busy_start_ns": 1, "activity": 2, "tid": 3, "ping_answered": 4, "frames": 5, "late_frames": 6,
         "late_frame_gap_ns": 7, "paused": 8}


def settings(threshold=0, period=0, slack=4 * NS_MS, periodic=False, pings_by_post=False, waiting_only=False,
             pid=4242, now=1000 * NS_S):
    mode = (1 if periodic else 0) | (2 if pings_by_post else 0) | (4 if waiting_only else 0)
    return struct.pack("<QQIBiQ", threshold, period, slack, mode, pid, now << 2)


def advance(ns):
    shift = 0
    while ns >= 1 << 32:
        ns >>= 1
        shift += 1
    return bytes([0 | (shift << 2)]) + struct.pack("<I", ns)


def store(slot, field, value):
    return bytes([1, slot, FIELD[field]]) + struct.pack("<Q", value)


def observe(slot, activity):
    return bytes([2 | (ACT[activity] << 2), slot])


LOOK = bytes([3])


def slot(seq=0, start=0, activity=0, tid=0):
    return struct.pack("<QQIiQQQQI4x", seq, start, activity, tid, 0, 0, 0, 0, 0)


def page(slots, pid=4242, magic=PAGE_MAGIC, flags=0):
    header = struct.pack("<QIIiII20x16x", magic, PAGE_VERSION, PAGE_SIZE, pid, PAGE_SLOTS, flags)
    assert len(header) == 64
    return header + b"".join(slots)


def page_input(sett, script, pg):
    return sett + struct.pack("<H", len(script)) + script + pg


def page_seeds():
    now = 1000 * NS_S
    busy_idle = page([slot(3, now - 500 * NS_MS, ACT_VALUE["after_waiting"], 4242),
                      slot(4, 0, ACT_VALUE["before_waiting"], 4243),
                      slot(1, now - 3 * NS_S, ACT_VALUE["before_sources"], 4244)], flags=1)
    looks = (LOOK + advance(300 * NS_MS)) * 4 + LOOK + advance(3 * NS_S) + LOOK
    # A loop turning over: busy 300 ms, waiting 100 ms, repeatedly (stutter).
    stutter = b""
    for _ in range(16):
        stutter += observe(1, "after_waiting") + LOOK + advance(300 * NS_MS) + LOOK
        stutter += observe(1, "before_waiting") + advance(100 * NS_MS) + LOOK
    hang_then_end = (observe(0, "before_waiting") + LOOK + observe(0, "after_waiting") + LOOK +
                     advance(2500 * NS_MS) + LOOK + advance(1 * NS_S) + LOOK + observe(0, "before_waiting") + LOOK)
    hostile = (LOOK + store(0, "busy_start_ns", (1 << 64) - 1) + store(0, "seq", 7) + LOOK + advance(1 * NS_S) +
               LOOK + store(2, "busy_start_ns", now + 3600 * NS_S) + LOOK + store(0, "seq", (1 << 64) - 1) +
               LOOK + store(1, "ping_answered", (1 << 64) - 1) + store(1, "activity", 0xFFFFFFFF) + LOOK +
               advance(20 * NS_S) + LOOK)
    frames = (observe(0, "before_waiting") + LOOK + advance(16 * NS_MS) + LOOK + observe(0, "after_waiting") +
              advance(400 * NS_MS) + LOOK + observe(0, "before_waiting") + observe(0, "after_waiting") + LOOK)
    return {
        "busy-idle-looks": page_input(settings(), looks, busy_idle),
        "periodic": page_input(settings(periodic=True), looks, busy_idle),
        "ping-by-post": page_input(settings(pings_by_post=True, threshold=200 * NS_MS), looks + hang_then_end,
                                   busy_idle),
        "semaphore-ping": page_input(settings(waiting_only=True, threshold=50 * NS_MS), looks * 2, busy_idle),
        "stutter": page_input(settings(), stutter, busy_idle),
        "hang-then-end": page_input(settings(), hang_then_end, busy_idle),
        "hostile-times": page_input(settings(), hostile, busy_idle),
        "frame-gap": page_input(settings(threshold=100 * NS_MS), frames, busy_idle),
        "huge-threshold": page_input(settings(threshold=(1 << 64) - 6, period=(1 << 64) - 8), looks, busy_idle),
        "bad-header": page_input(settings(), looks, page([slot(3, 0, 64, 1)], magic=0, pid=1)),
        # The C library's pause word (hangwatch_loop_pause): its value, and others, while pinged.
        "paused-word": page_input(settings(pings_by_post=True, threshold=200 * NS_MS),
                                  observe(0, "after_waiting") + store(0, "paused", 1) + observe(0, "before_waiting") +
                                  LOOK + advance(1 * NS_S) + LOOK + store(0, "paused", 0xDEADBEEF) + LOOK +
                                  advance(1 * NS_S) + store(0, "paused", 0) + observe(0, "after_waiting") + LOOK,
                                  busy_idle),
        "empty": b"",
    }


# --- cli values: the text of one option value ---------------------------

def cli_seeds():
    values = ["2s", "500ms", "1.5s", "250us", "7ns", "1m", "0s", ".25s", "1.123456789s", "16.667ms",
              "100M", "256M", "1G", "4096", "0", "64k",
              "--", "-1s", "", "s", ".", "2", "2 s", "2sec", "1e309s", "nan", "inf", "0x10s",
              "18446744073709551616ns", "18446744073709551615ns", "307445734561825860m", "307445734561825861m",
              "99999999999999999999.999999999999s", "1.0000000000000000001s", "17179869184G", "17179869183G",
              "18446744073709551615", "1\x00s", "\xff\xfe5s", "5ms\n",
              # --cpu-high PERCENT[%][/DURATION]
              "80%/5s", "150", "80%", "0%/1s", "50/500ms", "100000%/24h", "100001", "80%/", "80%%"]
    return {"v%02d" % i: v.encode("latin-1") for i, v in enumerate(values)}


# --- escape: raw bytes -----------------------------------------------------

def escape_seeds():
    return {
        "ascii": b"hangwatch-demo",
        "esc": b"\x1b[2J\x1b]0;pwned\x07name",
        "backslash": b"C:\\path\\x41",
        "utf8": "Grüße 名前".encode(),
        "controls": bytes(range(0, 32)) + b"\x7f\x80\xff",
        "empty": b"",
    }


# --- show: report text ----------------------------------------------------

def report():
    frame = lambda pc, sym, obj, off, src=None, line=None: dict(
        {"instruction_addr": pc, "symbol_name": sym, "symbol_addr": pc - 32, "object_name": obj,
         "object_addr": pc - off, "object_offset": off},
        **({"source_file": src, "source_line": line} if src else {}))
    return {
        "report": {"id": "0C5E7A4B-3F0D-4B8E-9C51-6D2F0A9B1E77", "timestamp": 1796060462, "type": "standard",
                   "process_name": "hangwatch-demo", "pid": 4242, "version": "hangwatch 0.1.0"},
        "crash": {"threads": [
            {"index": 0, "name": "hangwatch-demo", "thread_identifier": 4242, "crashed": True,
             "current_thread": False, "backtrace": {"skipped": 0, "contents": [
                 frame(140245160404250, "clock_nanosleep", "libc.so.6", 853274),
                 frame(93870450250051, "block_main_thread", "hangwatch-demo", 4419, "examples/demo.c", 43)]}},
            {"index": 1, "name": "worker", "thread_identifier": 4243, "crashed": False, "current_thread": False,
             "backtrace": {"skipped": 0, "contents": [frame(140245160404100, "futex_wait", "libc.so.6", 853100)]}}]},
        "binary_images": [{"image_addr": 93870450245632, "image_size": 20480, "load_bias": 93870450245632,
                           "name": "hangwatch-demo", "build_id": "5b6c"}],
        "hangwatch": {
            "module": "hang", "detector": "runloop", "check_mode": "exact", "hang_type": "hang",
            "block_duration_us": 2004108, "runloop_threshold_us": 2000000,
            "hung_thread": {"thread_identifier": 4242, "report_array_index": 0},
            "detected_at_unix_ms": 1796060462513, "grouping_key": "clock_nanosleep<block_main_thread",
            "capture": {"method": "ptrace", "stopped_us": 160, "max_thread_stopped_us": 150,
                        "process_exited": False},
            "final_duration_us": 4001234, "hang_end": "returned_to_wait",
            "collection": {
                "scene_threads": {"enumerated_thread_count": 2, "items": [
                    {"thread_identifier": 4242, "name": "hangwatch-demo", "is_main_thread": True,
                     "is_hung_thread": True, "status": "captured", "frame_count": 2, "report_array_index": 0},
                    {"thread_identifier": 4243, "name": "worker", "is_main_thread": False,
                     "is_hung_thread": False, "status": "captured", "frame_count": 1, "report_array_index": 1}]},
                "main_thread": {"state": "captured", "sample_count": 20, "point_stack_index": 3,
                                "top_repeat_count": 4, "backtrace": {"contents": [
                                    dict(frame(140245160404250, "clock_nanosleep", "libc.so.6", 853274),
                                         repeat_count=20)]}}}}}


def show_seeds():
    good = report()
    text = json.dumps(good, indent=1)
    hostile = json.loads(text)
    hostile["report"]["process_name"] = "\x1b[2Jevil\\name"
    hostile["hangwatch"]["hung_thread"]["report_array_index"] = -5
    hostile["hangwatch"]["collection"]["scene_threads"]["items"][1]["report_array_index"] = 9223372036854775807
    hostile["crash"]["threads"][0]["backtrace"]["contents"][0]["instruction_addr"] = -1
    types = json.loads(text)
    types["hangwatch"]["block_duration_us"] = "2s"
    types["crash"]["threads"][0]["backtrace"] = [1, 2]
    types["hangwatch"]["collection"]["scene_threads"]["items"] = {"0": None}
    fatal = json.loads(text)
    fatal["hangwatch"].update({"hang_end": "killed", "final_duration_us": 3012345,
                               "process_end": {"signal": 9, "signal_name": "SIG\x1bKILL", "core_dumped": True}})
    exited = json.loads(text)
    exited["hangwatch"].update({"hang_end": "exited", "process_end": {"exit_status": "3"}})
    cpu = json.loads(text)
    cpu["hangwatch"].update({"hang_type": "cpu_high", "detector": "cpu_usage", "check_mode": "periodic"})
    cpu["hangwatch"]["cpu_high"] = {
        "window_us": 5004000, "threshold_percent": 80, "process_percent": 98.9, "threads_window_us": 4800000,
        "sample_interval_us": 50000, "threads": [
            {"thread_identifier": 4243, "name": "worker", "percent": 1e308, "sample_count": 96, "stacks": [
                {"count": 90, "backtrace": {"skipped": 0, "contents": good["crash"]["threads"][0]["backtrace"]["contents"]}},
                {"count": "6", "backtrace": [1]}]},
            {"thread_identifier": 4242, "name": "hangwatch-demo", "percent": -1, "sample_count": 0}]}
    return {
        "report": text,
        "report-fatal": json.dumps(fatal),
        "report-exited-wrong-type": json.dumps(exited),
        "report-cpu-high": json.dumps(cpu),
        "report-compact": json.dumps(good, separators=(",", ":")),
        "report-hostile": json.dumps(hostile),
        "report-wrong-types": json.dumps(types),
        "truncated": text[: len(text) // 2],
        "not-a-report": '{"report": 1, "crash": {"threads": {}}}',
        "array": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
        "nul-inside": text[:40] + "\0" + text[40:],
        "empty": "",
    }


# --- stats: report text, with what stats and export read --------------------

def stats_seeds():
    seeds = show_seeds()
    sampled = report()
    sampled["hangwatch"]["executable"] = "/opt/demo/hangwatch-demo"
    sampled["hangwatch"]["collection"]["main_thread"].update(
        {"state": "collected", "reason": "early_sampling", "sample_interval_us": 50000, "ring_capacity": 20})
    later = json.loads(json.dumps(sampled))
    later["hangwatch"]["stretch_report_index"] = 2
    later["hangwatch"]["block_duration_us"] = 6000000
    python = json.loads(json.dumps(sampled))
    python["crash"]["threads"][0]["backtrace"]["contents"].insert(
        1, {"instruction_addr": 77, "language": "python", "symbol_name": "handle", "source_file": "app.py",
            "source_line": 5})
    extreme = json.loads(json.dumps(sampled))
    extreme["hangwatch"].update({"detected_at_unix_ms": 9223372036854775807, "block_duration_us": 9223372036854775807,
                                 "final_duration_us": 9223372036854775807, "stretch_report_index": 0})
    extreme["hangwatch"]["collection"]["main_thread"].update(
        {"sample_count": 9223372036854775807, "sample_interval_us": 9223372036854775807})
    stutter = json.loads(json.dumps(sampled))
    stutter["hangwatch"]["hang_type"] = "stutter"
    # every sample of the ring (for `hangwatch html`'s flame graph), with a
    # stack naming a frame that is not there, a count of the wrong type and
    # a name that would end the page's script
    samples = json.loads(json.dumps(sampled))
    sframes = samples["crash"]["threads"][0]["backtrace"]["contents"]
    samples["hangwatch"]["collection"]["main_thread"]["samples"] = {
        "frames": sframes + [dict(sframes[0], symbol_name="</script><!--<script>")],
        "stacks": [{"count": 12, "frames": [0, 1], "point_stack": True}, {"count": 5, "frames": [2, 1]},
                   {"count": 2, "frames": [7]}, {"count": "1", "frames": [0]}, {"count": 1, "frames": []}],
        "left_out": 1}
    seeds.update({"report-sampled": json.dumps(sampled), "report-later": json.dumps(later),
                  "report-python": json.dumps(python), "report-extreme": json.dumps(extreme),
                  "report-stutter": json.dumps(stutter), "report-samples": json.dumps(samples)})
    return seeds


def endpoints_seeds():
    """Sentry DSNs and ADDR:PORT values, good and bad (fuzz_endpoints.c)."""
    values = [
        "https://0123456789abcdef0123456789abcdef@o1.ingest.sentry.io/42",
        "http://pub:sec@127.0.0.1:9000/sentry/sub/7",
        "http://k@[::1]:8080/1",
        "https://k@h/../1", "https://k@h/1?x=1", "https://k@h:99999/1", "https://k@a@h/1",
        "https://k@h/1\r\nX-Evil: 1", "ftp://k@h/1", "https://@h/1", "https://k@h/",
        "127.0.0.1:9464", ":9464", "[::1]:9464", "localhost:1", "::1:9464", "127.0.0.1:0", "[zz]:1",
    ]
    return {f"v{i:02d}": v for i, v in enumerate(values)}


# --- python_linetable: [format][first line / 16, int16 LE][line table] -------

LINE_FORMATS = (("lnotab", 0, ("3.8", "3.9")), ("310", 1, ("3.10",)),
                ("locations", 2, ("debian", "3.11", "3.12", "3.13")))
TABLES_OF_TEXTWRAP = """
import textwrap, sys, types
def codes(c):
    yield c
    for k in c.co_consts:
        if isinstance(k, types.CodeType):
            yield from codes(k)
with open(textwrap.__file__) as f:
    top = compile(f.read(), textwrap.__file__, "exec")
lnotab = sys.version_info < (3, 10)
for c in codes(top):
    print(c.co_firstlineno, (c.co_lnotab if lnotab else c.co_linetable).hex())
"""


def python_linetable_seeds():
    """Real tables: the first three code objects of textwrap and the two with
    the longest tables (up to 600 bytes), as each format's interpreter
    compiles them (tests/pythons.py finds it), then half pairs
    and a format that is none.  None when an interpreter is missing: the
    committed corpus then stays as it is."""
    seeds = {}
    for name, number, versions in LINE_FORMATS:
        python = next((p for p in map(pythons.find, versions) if p), None)
        if python is None:
            print("python_linetable: no interpreter for %s (%s); corpus left alone" % (name, ", ".join(versions)))
            return None
        out = subprocess.run([python, "-c", TABLES_OF_TEXTWRAP], check=True, stdout=subprocess.PIPE,
                             universal_newlines=True).stdout
        tables = [(int(first), bytes.fromhex(hexed)) for first, hexed in (ln.split() for ln in out.splitlines())]
        small = [t for t in tables if len(t[1]) <= 600]
        picked = small[:3] + sorted(small[3:], key=lambda t: len(t[1]))[-2:]  # the first, the longest
        for i, (first, table) in enumerate(picked):
            seeds["%s-textwrap-%d" % (name, i)] = struct.pack("<Bh", number, first // 16) + table
    seeds["lnotab-half-pair"] = struct.pack("<Bh", 0, 1) + bytes([4, 1, 2])
    seeds["310-half-pair-no-line"] = struct.pack("<Bh", 1, 1) + bytes([4, 0, 2, 0x80, 0, 127, 6])
    seeds["no-format"] = struct.pack("<Bh", 3, 1) + bytes([0x80, 0x00])
    return seeds


# --- python_memory: what the readers read of each real interpreter -----------

def python_memory_seeds(recorder):
    """Each interpreter tests/pythons.py finds, running
    tests/programs/python_versions.py idle (named threads asleep in Python
    calls, an asyncio loop waiting), as tools/record_python_memory.c
    records the agent's reads of it.  None when the recorder was not given
    or an interpreter is missing: the committed corpus then stays."""
    if recorder is None:
        print("python_memory: no --recorder (BUILD/bin/record-python-memory); corpus left alone")
        return None
    program = os.path.join(os.path.dirname(HERE), "tests", "programs", "python_versions.py")
    seeds = {}
    # Inputs the fuzzer once crashed on stay, as they are.
    kept = os.path.join(HERE, "corpus", "python_memory")
    for name in sorted(os.listdir(kept)) if os.path.isdir(kept) else ():
        if name.startswith("regression-"):
            with open(os.path.join(kept, name), "rb") as f:
                seeds[name] = f.read()
    for version in pythons.VERSIONS:
        python = pythons.find(version)
        if python is None:
            print("python_memory: %s is not on this machine; corpus left alone" % pythons.label(version))
            return None
        out = os.path.join(HERE, "corpus", ".python-memory-%s" % version)
        subprocess.run([recorder, python, program, out, "idle"], check=True, stdout=subprocess.DEVNULL)
        with open(out, "rb") as f:
            seeds["%s-idle" % version] = f.read()
        os.unlink(out)
    return seeds


# --- js_memory: what the V8 readers read of a real node ----------------------

def js_memory_seeds(recorder):
    """node (the one on PATH) running tests/programs/node_names.js with a
    worker, both spinning in JavaScript, as tools/record_js_memory.c records
    the agent's reads of it.  None without the recorder or node: the
    committed corpus then stays."""
    node = shutil.which("node")
    if recorder is None or node is None:
        print("js_memory: no --js-recorder (BUILD/bin/record-js-memory) or no node; corpus left alone")
        return None
    program = os.path.join(os.path.dirname(HERE), "tests", "programs", "node_names.js")
    seeds = {}
    kept = os.path.join(HERE, "corpus", "js_memory")
    for name in sorted(os.listdir(kept)) if os.path.isdir(kept) else ():
        if name.startswith("regression-"):
            with open(os.path.join(kept, name), "rb") as f:
                seeds[name] = f.read()
    version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip()
    major = version.lstrip("v").split(".")[0]
    for args, label in ((["worker"], "worker"), ([], "main")):
        out = os.path.join(HERE, "corpus", ".js-memory")
        subprocess.run([recorder, node, program, out] + args, check=True, stdout=subprocess.DEVNULL)
        with open(out, "rb") as f:
            seeds["node%s-%s" % (major, label)] = f.read()
        os.unlink(out)
    return seeds


# --- plt_entry: [section address u64][looked-up address u64][entry size
# selector: 0 -> 8, 1 -> 16, else the byte][the section's bytes] ---------

def plt_entry_seeds():
    def jmp_slot(disp, bnd=False):
        return (b"\xf2" if bnd else b"") + b"\xff\x25" + struct.pack("<i", disp)

    def plt_input(sec_addr, addr, selector, section):
        return struct.pack("<QQB", sec_addr, addr, selector) + section

    endbr = b"\xf3\x0f\x1e\xfa"
    plt0 = b"\xff\x35" + struct.pack("<i", 0x2fe2) + jmp_slot(0x2fe4) + b"\x0f\x1f\x40\x00"
    lazy = b"".join(jmp_slot(0x2fe2 - 16 * i) + b"\x68" + struct.pack("<I", i) +
                    b"\xe9" + struct.pack("<i", -16 * (i + 2)) for i in range(3))
    ibt_plt = b"".join(endbr + b"\x68" + struct.pack("<I", i) + b"\xf2\xe9" + struct.pack("<i", -32) + b"\x90"
                       for i in range(3))
    plt_sec = b"".join(endbr + jmp_slot(0x2e00 - 16 * i, bnd=True) + b"\x0f\x1f\x44\x00\x00" for i in range(3))
    got8 = b"".join(jmp_slot(0x3dca - 8 * i) + b"\x66\x90" for i in range(2))
    return {
        "seed-lazy": plt_input(0x1020, 0x1035, 1, plt0 + lazy),
        "seed-plt0": plt_input(0x1020, 0x1020, 1, plt0 + lazy),
        "seed-ibt-plt": plt_input(0x1020, 0x1034, 1, ibt_plt),
        "seed-plt-sec": plt_input(0x1220, 0x1231, 1, plt_sec),
        "seed-plt-got": plt_input(0x1210, 0x1219, 0, got8),
        "seed-partial": plt_input(0x1020, 0x1028, 1, lazy[:10]),
    }


def main():
    recorder = js_recorder = None
    args = sys.argv[1:]
    while len(args) >= 2 and args[0] in ("--recorder", "--js-recorder"):
        if args[0] == "--recorder":
            recorder = os.path.abspath(args[1])
        else:
            js_recorder = os.path.abspath(args[1])
        args = args[2:]
    if args:
        print("usage: make_corpus.py [--recorder BUILD/bin/record-python-memory] "
              "[--js-recorder BUILD/bin/record-js-memory]", file=sys.stderr)
        return 2
    write_corpus("registration", registration_seeds())
    write_corpus("page", page_seeds())
    write_corpus("cli_values", cli_seeds())
    write_corpus("escape", escape_seeds())
    write_corpus("show", show_seeds())
    write_corpus("stats", stats_seeds())
    write_corpus("endpoints", endpoints_seeds())
    write_corpus("plt_entry", plt_entry_seeds())
    linetable = python_linetable_seeds()
    if linetable is not None:
        write_corpus("python_linetable", linetable)
    memory = python_memory_seeds(recorder)
    if memory is not None:
        write_corpus("python_memory", memory)
    js = js_memory_seeds(js_recorder)
    if js is not None:
        write_corpus("js_memory", js)
    return 0


if __name__ == "__main__":
    sys.exit(main())
