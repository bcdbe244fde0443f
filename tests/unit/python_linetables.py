"""python_linetables - CPython's own answers for test_python_linetable, from
whichever interpreter runs it (3.8 to 3.13), in that version's table format.

Writes a first line "format FORMAT python VERSION", FORMAT being "lnotab"
(3.8, 3.9: co_lnotab), "310" (3.10: PEP 626's co_linetable) or "locations"
(3.11+: the location table), then, for every code object compiled from a
set of standard modules and a synthetic source made to stretch the formats
(functions nested in functions and classes too), one line: its first line,
its line table in hex ("-" when empty), and "unit:line" for each code unit
(2 bytes of bytecode) that CPython maps, line 0 where it has none.  The
lines are CPython's: co_lines() from 3.10 on; before, dis.findlinestarts(),
each unit taking the line of the last start at or before it.  Either is
checked, unit by unit, against the interpreter's own PyCode_Addr2Line (what
a frame's f_lineno gives when not tracing) through ctypes; a difference
fails the run.  The C decoder must give the same lines.

  python_linetables.py OUT_FILE
      under the interpreter to ask
  python_linetables.py --python VERSION OUT_FILE
      under /usr/bin/python3: runs the above under VERSION's interpreter
      (tests/pythons.py); when there is none, writes "missing REASON" to
      OUT_FILE for the C test and exits 77 (skipped)
"""
import ctypes
import dis
import importlib.util
import os
import subprocess
import sys
import tokenize
import types

MODULES = (
    "argparse", "asyncio.base_events", "json.decoder", "textwrap", "inspect", "typing", "difflib", "pydoc",
    "tarfile", "zipfile", "email.message", "email._header_value_parser", "logging", "unittest.case",
    "http.client", "http.server", "collections", "dataclasses", "enum", "ast", "configparser", "subprocess",
    "threading", "shutil", "tempfile", "_pydecimal", "_strptime", "calendar", "pickle", "dis",
)
SKIP = 77


def code_objects(code):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from code_objects(const)


def synthetic_source():
    """Code whose tables need the formats' rarer forms: line jumps over 127
    both ways (an expression over hundreds of lines goes back to its first
    line), ranges of bytecode over 255 bytes on one line, lines in the tens
    of thousands, lines with no code, nested functions and lambdas."""
    items = ", ".join("a%d" % (i % 7) for i in range(300))
    src = ["def far(a0, a1, a2, a3, a4, a5, a6):", "    x = max(a0,"]
    src += [""] * 300
    src += ["            a1)", "    y = [%s]" % items, "    z = [a2,"]
    src += [""] * 200
    src += ["         a3]", "    for i in range(3):", "        z += [i]"]
    src += ["        # nothing here"] * 400
    src += ["        z -= (lambda q: q +", "              1)(i)", "    while len(z) > 100:", "        z.pop()"]
    src += ["    return (x,", "            y,", "            z)"]
    src += [""] * 20000
    src += ["def high(a):", "    if a:", "        return [b * 2 for b in a]", "    return {%s}" % items[:400]]
    src += ["class Holder:", "    def method(self, a0, a1, a2, a3, a4, a5, a6):", "        return far(a0, a1, a2,",
            "            a3, a4, a5, a6)"]
    return "\n".join(src) + "\n"


def sources():
    """(file name, source text) of every module, then the synthetic one."""
    for name in MODULES:
        spec = importlib.util.find_spec(name)
        with tokenize.open(spec.origin) as f:
            yield spec.origin, f.read()
    yield "<synthetic>", synthetic_source()


def addr2line():
    """The interpreter's PyCode_Addr2Line(code, byte offset)."""
    f = ctypes.pythonapi.PyCode_Addr2Line
    f.argtypes = [ctypes.py_object, ctypes.c_int]
    f.restype = ctypes.c_int
    return f


def lines_of(code):
    """[(unit, line)] by CPython's Python-level answer for this version."""
    if sys.version_info >= (3, 10):
        return [(offset // 2, 0 if line is None else line)
                for start, end, line in code.co_lines() for offset in range(start, end, 2)]
    starts = list(dis.findlinestarts(code))
    pairs, i, line = [], 0, 0
    for offset in range(0, len(code.co_code), 2):
        while i < len(starts) and starts[i][0] <= offset:
            line = starts[i][1]
            i += 1
        pairs.append((offset // 2, line))
    return pairs


def write_tables(path):
    if sys.version_info >= (3, 11):
        fmt, table_of = "locations", lambda c: c.co_linetable
    elif sys.version_info >= (3, 10):
        fmt, table_of = "310", lambda c: c.co_linetable
    else:
        fmt, table_of = "lnotab", lambda c: c.co_lnotab
    c_line = addr2line()
    codes = units = 0
    with open(path, "w") as out:
        out.write("format %s python %s\n" % (fmt, sys.version.split()[0]))
        for filename, text in sources():
            for code in code_objects(compile(text, filename, "exec")):
                pairs = lines_of(code)
                for unit, line in pairs:
                    c = c_line(code, unit * 2)
                    if (c if c > 0 else 0) != line:
                        sys.exit("%s %s unit %d: PyCode_Addr2Line says %d, the Python answer %d"
                                 % (filename, code.co_name, unit, c, line))
                out.write("%d %s %s\n" % (code.co_firstlineno, table_of(code).hex() or "-",
                                          " ".join("%d:%d" % p for p in pairs)))
                codes += 1
                units += len(pairs)
    print("Python %s (%s): %d code objects, %d code units" % (sys.version.split()[0], fmt, codes, units))


def run_under(version, path):
    """Run write_tables under `version`'s interpreter, or say it is missing."""
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import pythons
    if os.path.exists(path):
        os.remove(path)
    python = pythons.find(version)
    if python is None:
        reason = "%s: not on this machine" % pythons.label(version)
        with open(path, "w") as out:
            out.write("missing %s\n" % reason)
        print(reason)
        return SKIP
    done = subprocess.run([python, os.path.abspath(__file__), path])
    if done.returncode != 0:
        return done.returncode
    with open(path) as f:
        header = f.readline().split()
    if version != "debian" and not header[3].startswith(version + "."):
        print("%s is Python %s, not %s" % (python, header[3], version))
        return 1
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--python":
        sys.exit(run_under(sys.argv[2], sys.argv[3]))
    if len(sys.argv) == 2:
        sys.exit(write_tables(sys.argv[1]))
    sys.exit(__doc__)
