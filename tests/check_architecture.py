#!/usr/bin/env python3
"""check_architecture.py - the agent's shape, as docs/architecture.md draws
it, checked on the source and on the built objects.

  python3 check_architecture.py SOURCE_DIR [OBJECT...]

1. Stages.  src/agent is a pipeline of stage folders; each may depend only
   on the stages below it (DEPENDS_ON), so no include or call runs back up
   and none forms a cycle across two folders.  From outside a stage, only
   its interface header, agent/STAGE/STAGE.h, is included (agent/common's
   leaves are each their own interface).  The report stage includes nothing
   of the watch stage.
2. Calls.  The same rule on what the compiler made: every function an
   object of one stage calls that another stage's object defines must be
   of a stage it may depend on (nm: undefined symbols against defined ones).
   This catches a call made without an include (a declaration copied in).
3. Size.  No function in src/ over 150 lines, no source file over 900.

Prints each violation and exits 1 if there is any, else says what it
checked and exits 0.
"""
import os
import re
import subprocess
import sys

# Each stage and the stages it may include and call (below it).
DEPENDS_ON = {
    "watch": {"report", "symbols", "capture", "exports", "common"},
    "report": {"symbols", "capture", "exports", "common"},
    "symbols": {"capture", "common"},
    "capture": {"common"},
    "exports": {"common"},
    "common": set(),
}
MAX_FUNCTION_LINES = 150
MAX_FILE_LINES = 900
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def stage_of(rel):
    """The stage of a path relative to src/ ("agent/report/x.c"), or None."""
    parts = rel.split("/")
    if len(parts) >= 3 and parts[0] == "agent" and parts[1] in DEPENDS_ON:
        return parts[1]
    return None


def source_files(src):
    for root, _, names in os.walk(src):
        for name in sorted(names):
            if name.endswith((".c", ".h")):
                path = os.path.join(root, name)
                yield os.path.relpath(path, src), path


def check_includes(src, problems):
    checked = 0
    for rel, path in source_files(src):
        own = stage_of(rel)
        text = open(path, encoding="utf-8", errors="replace").read()
        for inc in INCLUDE.findall(text):
            if "/" not in inc:
                target = os.path.join(os.path.dirname(rel), inc)  # same folder
            else:
                target = inc
            theirs = stage_of(target)
            if theirs is None:
                if own is not None and target == "agent/agent.h" and own != "watch":
                    problems.append(f"{rel}: includes agent/agent.h, the watch stage's entry point")
                continue
            checked += 1
            if own is None or theirs == own:
                if own is None and theirs != "common" and target != f"agent/{theirs}/{theirs}.h":
                    problems.append(f"{rel}: includes {target}, not the {theirs} stage's interface "
                                    f"agent/{theirs}/{theirs}.h")
                continue
            if theirs not in DEPENDS_ON[own]:
                problems.append(f"{rel}: the {own} stage includes {target} of the {theirs} stage, "
                                f"which it may not depend on")
            elif theirs != "common" and target != f"agent/{theirs}/{theirs}.h":
                problems.append(f"{rel}: includes {target}, not the {theirs} stage's interface "
                                f"agent/{theirs}/{theirs}.h")
    return checked


def object_stage(path):
    """The stage of an object file built from src/agent/STAGE/x.c."""
    m = re.search(r"/src/agent/([a-z_]+)/[^/]+\.c\.o$", path)
    return m.group(1) if m and m.group(1) in DEPENDS_ON else None


def check_calls(objects, problems):
    defined = {}  # symbol -> stage
    needs = []    # (object, stage, undefined symbol)
    for obj in objects:
        stage = object_stage(obj)
        if stage is None:
            continue
        out = subprocess.run(["nm", "--defined-only", "-g", obj], capture_output=True, text=True, check=True)
        for line in out.stdout.splitlines():
            fields = line.split()
            if len(fields) == 3 and fields[1] in "TDBR":
                defined[fields[2]] = stage
        out = subprocess.run(["nm", "--undefined-only", obj], capture_output=True, text=True, check=True)
        for line in out.stdout.splitlines():
            needs.append((obj, stage, line.split()[-1]))
    checked = 0
    for obj, stage, sym in needs:
        theirs = defined.get(sym)
        if theirs is None or theirs == stage:
            continue
        checked += 1
        if theirs not in DEPENDS_ON[stage]:
            problems.append(f"{os.path.basename(obj)}: the {stage} stage calls {sym} of the {theirs} stage, "
                            f"which it may not depend on")
    return checked


def function_spans(lines):
    """(name, first line, line count) of each function: this code base opens
    a function body with '{' alone at column 0 and closes it with '}'."""
    i = 0
    while i < len(lines):
        if lines[i].rstrip() == "{":
            start = i - 1
            while start > 0 and "(" not in lines[start]:
                start -= 1
            m = re.search(r"([A-Za-z_]\w*)\s*\(", lines[start])
            name = m.group(1) if m else "?"
            j = i + 1
            while j < len(lines) and lines[j].rstrip() != "}":
                j += 1
            yield name, start + 1, j - start + 1
            i = j
        i += 1


def check_sizes(src, problems):
    functions = 0
    for rel, path in source_files(src):
        lines = open(path, encoding="utf-8", errors="replace").read().split("\n")
        if rel.endswith(".c") and len(lines) - 1 > MAX_FILE_LINES:
            problems.append(f"{rel}: {len(lines) - 1} lines (at most {MAX_FILE_LINES})")
        for name, first, count in function_spans(lines):
            functions += 1
            if count > MAX_FUNCTION_LINES:
                problems.append(f"{rel}:{first}: {name} is {count} lines (at most {MAX_FUNCTION_LINES})")
    return functions


def main():
    if len(sys.argv) < 2:
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    src = os.path.join(sys.argv[1], "src")
    objects = [o for arg in sys.argv[2:] for o in arg.split(";") if o]
    problems = []
    includes = check_includes(src, problems)
    calls = check_calls(objects, problems)
    functions = check_sizes(src, problems)
    for p in problems:
        print("architecture: " + p)
    if problems:
        return 1
    print(f"architecture: {includes} includes and {calls} calls across stage folders keep to the stages' order; "
          f"{functions} functions of at most {MAX_FUNCTION_LINES} lines, no file over {MAX_FILE_LINES}")
    return 0 if includes > 0 and calls > 0 and functions > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
