#!/usr/bin/python3
"""check_figures.py - the figures hangwatch quotes agree with the table they
come from.

A cost the agent states on stderr, or a doc repeats, is measured in
docs/benchmarks.md; when a measurement changes and a quote does not, users
are told something no table says.  Each quote below is found where it is
said and compared with its source:

  - the tracepoint attachment's cost to every process (the agent's notice in
    src/agent/watch/kernel_watch.c, docs/limits.md, docs/decisions.md):
    within the range of part 8's tracepoint rows, rounded;
  - the uprobe attachment's cost to the watched loop (the same notice,
    docs/limits.md, docs/decisions.md, part 8's text): the range over the
    on/off pairs of part 8's uprobe row in the results block, in µs;
  - `hangwatch run`'s own start (docs/decisions.md §49): within the budget
    part 14 holds it to, as the table's budgets say;
  - the stop per capture the README quotes: part 2's rows of the results
    block (median and p99, alone and beside two CPU hogs).

    check_figures.py SOURCE_DIR
"""
import math
import os
import re
import sys


def read(root, path):
    with open(os.path.join(root, path), encoding="utf-8") as f:
        return f.read()


def one(pattern, text, where):
    m = re.search(pattern, text, re.S)
    if not m:
        sys.exit(f"figures: {where}: no match for {pattern!r} (a quote moved? update this check with it)")
    return m


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: check_figures.py SOURCE_DIR")
    root = sys.argv[1]
    bench = read(root, "docs/benchmarks.md")
    notice_src = read(root, "src/agent/watch/kernel_watch.c")
    notice = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', one(r"say_tracepoint_cost\(agent \*a\)\n\{(.*?)\n\}",
                                                              notice_src, "kernel_watch.c").group(1)))
    failures = []

    # The tracepoints' tax on processes not watched: part 8's table, its
    # tracepoint column.
    rows = re.findall(r"^\| `(?:getppid\(\)|epoll_wait)` of a process not watched, ns added per call \| \+([0-9.]+)",
                      bench, re.M)
    if len(rows) != 2:
        failures.append(f"docs/benchmarks.md part 8: expected the getppid() and epoll_wait tracepoint rows, found {rows}")
    else:
        lo, hi = math.floor(min(float(r) for r in rows)), math.ceil(max(float(r) for r in rows))
        quotes = {
            "the agent's notice (kernel_watch.c)": one(r"\+(\d+) ns measured", notice, "notice").group(1),
            "docs/limits.md": one(r"\+(\d+) ns per call measured", read(root, "docs/limits.md"), "limits.md").group(1),
            "docs/decisions.md": one(r"measured, \+(\d+) ns\s+per system call", read(root, "docs/decisions.md"),
                                     "decisions.md").group(1),
            "docs/benchmarks.md part 8's text": one(r"is \*not\* watched pays about \+(\d+) ns", bench,
                                                    "benchmarks.md").group(1),
        }
        for where, value in quotes.items():
            if not lo <= int(value) <= hi:
                failures.append(f"{where} says +{value} ns for the tracepoints' cost; part 8's table says "
                                f"+{min(rows)}..+{max(rows)}")

    # The uprobes' cost to the watched loop: part 8's uprobe row of the
    # results block (ns per call), its range over the on/off pairs in µs.
    row = one(r"(?m)^\|   kernel observer, --attach uprobe: `epoll_wait\(ep, ev, 8, 0\)` watched through it[^|]*\|"
              r"[^|]*\| [^|]*\| [^|]*\| range over the pairs ([-+][0-9.]+)\.\.([-+][0-9.]+);", bench,
              "benchmarks.md results, part 8's uprobe row")
    said = (str(math.floor(float(row.group(1)) / 1000)), str(math.ceil(float(row.group(2)) / 1000)))
    quotes = {
        "docs/benchmarks.md part 8's text": one(r"take (\d+)–(\d+) µs per wait call", bench,
                                                "benchmarks.md part 8").groups(),
        "the agent's notice (kernel_watch.c)": one(r"(\d+) to (\d+) us measured on a virtual machine", notice,
                                                   "notice").groups(),
        "docs/limits.md": one(r"two per wait call: about (\d+)–(\d+) µs per call", read(root, "docs/limits.md"),
                              "limits.md").groups(),
        "docs/decisions.md": one(r"two traps per wait call \(about\s+(\d+)–(\d+) µs",
                                 read(root, "docs/decisions.md"), "decisions.md").groups(),
    }
    for where, quoted in quotes.items():
        if quoted != said:
            failures.append(f"{where} says {quoted[0]}–{quoted[1]} µs per uprobed wait; "
                            f"docs/benchmarks.md's results (part 8's uprobe row) say {said[0]}–{said[1]} µs")

    # `run`'s own start: decisions §49 against part 14's budget.
    budget = float(one(r"`run -- true` against `true`, spawn to exit\) \| ≤ \+(\d+) ms", bench,
                       "benchmarks.md budgets").group(1))
    added = float(one(r"true` added [0-9.]+ ms before this change and adds ([0-9.]+) ms after",
                      read(root, "docs/decisions.md"), "decisions.md §49").group(1))
    if added > budget:
        failures.append(f"decisions.md §49 quotes run -- true at +{added} ms, over part 14's budget +{budget} ms")

    # The stop per capture the README quotes: part 2's rows of the results
    # block, median and p99, rounded to the microsecond.
    def results_row(label):
        m = one(r"(?m)^\| " + re.escape(label) + r"[^|]*\| [^|]*\| ([0-9,.]+) \| ([0-9,.]+) \|", bench,
                "benchmarks.md results, " + label)
        return [round(float(v.replace(",", ""))) for v in m.groups()]
    readme = read(root, "README.md")
    stops = {
        "a sleeping single-threaded program": (
            results_row("2 stop per capture, 1 sleeping thread"),
            one(r"median of (\d+) µs \(p99 (\d+) µs\) for a sleeping\s+single-threaded program", readme, "README")),
        "two CPU hogs beside it": (
            results_row("  the same, 2 CPU hogs beside"),
            one(r"(\d+) µs \(p99 (\d+) µs\) with two CPU hogs beside it", readme, "README")),
    }
    for what, (table, quote) in stops.items():
        quoted = [int(v) for v in quote.groups()]
        if quoted != table:
            failures.append(f"README.md quotes the stop for {what} as {quoted[0]} µs (p99 {quoted[1]}); "
                            f"docs/benchmarks.md's results say {table[0]} (p99 {table[1]})")

    for f in failures:
        print("figures: " + f)
    if failures:
        sys.exit(1)
    print("figures: every quoted figure agrees with docs/benchmarks.md")


if __name__ == "__main__":
    main()
