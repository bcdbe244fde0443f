#!/usr/bin/python3
"""check_figures.py - the figures hangwatch quotes agree with the table they
come from.

A cost the agent states on stderr, or a doc repeats, is measured in
docs/benchmarks.md; when a measurement changes and a quote does not, users
are told something no table says.  Each quote below is found where it is
said and compared with its source:

  - the tracepoint attachment's cost to every process (the agent's notice in
    src/agent/watch/kernel_watch.c, docs/limits.md, docs/decisions.md, part
    8's text): the medians of part 8's two tracepoint rows for a process not
    watched (getppid, epoll_wait) in the results block, rounded; and its
    cost to the watched process (docs/limits.md): part 8's first row, to
    ten nanoseconds;
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

    # The tracepoints' tax on processes not watched: part 8's two rows of the
    # results block (this machine's kernel, not the QEMU guest's), their
    # medians rounded: a system call (getppid) and a wait call (epoll_wait).
    def result_row(what):
        m = one(r"(?m)^\|   --attach tracepoint, another process watched: " + what +
                r" of a process that is not, ns added per call \| [^|]*\| \+([0-9.]+) \|", bench,
                f"benchmarks.md results, part 8's tracepoint {what} row")
        return str(round(float(m.group(1))))
    said = (result_row(r"getppid\(\)"), result_row("epoll_wait"))
    limits = read(root, "docs/limits.md")
    quotes = {
        "the agent's notice (kernel_watch.c)": one(r"\+(\d+) ns measured, \+(\d+) ns on a wait call", notice,
                                                   "notice").groups(),
        "docs/limits.md": one(r"\+(\d+) ns per call measured \(`getppid\(\)`\), and \+(\d+) ns per wait call",
                              limits, "limits.md").groups(),
        "docs/decisions.md": one(r"measured, \+(\d+) ns\s+per system call.*?and \+(\d+) ns per wait call",
                                 read(root, "docs/decisions.md"), "decisions.md").groups(),
        "docs/benchmarks.md part 8's text": one(r"is \*not\* watched pays about \+(\d+) ns.*?and \+(\d+) ns on each "
                                                r"wait call", bench, "benchmarks.md").groups(),
    }
    for where, quoted in quotes.items():
        if quoted != said:
            failures.append(f"{where} says +{quoted[0]} ns per system call, +{quoted[1]} per wait call, for the "
                            f"tracepoints' cost; docs/benchmarks.md's results (part 8) say +{said[0]}, +{said[1]}")
    # ... and to the watched process's own wait calls (limits.md), the same way.
    watched = one(r"(?m)^\| 8 kernel observer, --attach tracepoint: `epoll_wait\(ep, ev, 8, 0\)` watched through it, "
                  r"ns added per call \| [^|]*\| \+([0-9.]+) \|", bench, "benchmarks.md results, part 8's first row")
    quoted = one(r"about \+(\d+) ns per wait call \(docs/benchmarks.md's results, part 8\)", limits,
                 "limits.md").group(1)
    if quoted != str(round(float(watched.group(1)), -1)).split(".")[0]:
        failures.append(f"docs/limits.md says +{quoted} ns per watched wait call for the tracepoints; part 8's "
                        f"results row says +{watched.group(1)}")

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
