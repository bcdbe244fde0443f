"""python_linetables - CPython's own answers for test_python_linetable.

Writes, for every code object of a few standard modules (functions nested
in functions and classes too), one line: its first line, its location table
in hex, and "unit:line" for each instruction that CPython's co_lines() maps
(line 0 where it says None).  The C decoder must give the same lines.

  python_linetables.py OUT_FILE
"""
import sys
import types


def code_objects(code):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from code_objects(const)


def main(path):
    import argparse, asyncio.base_events, json.decoder, textwrap  # noqa: E401 - modules with varied code
    count = 0
    with open(path, "w") as out:
        for module in (argparse, asyncio.base_events, json.decoder, textwrap):
            with open(module.__file__) as f:
                top = compile(f.read(), module.__file__, "exec")
            for code in code_objects(top):
                pairs = []
                for start, end, line in code.co_lines():
                    for offset in range(start, end, 2):
                        pairs.append(f"{offset // 2}:{line if line is not None else 0}")
                out.write(f"{code.co_firstlineno} {code.co_linetable.hex() or '-'} {' '.join(pairs)}\n")
                count += 1
    print(f"{count} code objects")


if __name__ == "__main__":
    main(sys.argv[1])
