"""bench/process_tree.py - what a process tree is doing, for a run that
did not end.

A measurement or a test that waits for `hangwatch run` and times out kills
it; what it was doing then is the only evidence of why.  describe_tree
reads it from /proc before the kill: each thread of the process and of its
descendants, where it sleeps in the kernel and how much CPU it has had.
Used by bench/line_delay.py and tests/integration/hwtest.py.
"""
import os


def describe_tree(pid):
    """Each thread of `pid` and of its descendants: name, state, policy, real-time priority, where it
    sleeps in the kernel, and its CPU time in ticks (what a run that did not end was doing)."""
    out = []
    for p in [pid] + descendants(pid):
        try:
            tids = sorted(os.listdir(f"/proc/{p}/task"), key=int)
        except OSError:
            continue
        for tid in tids:
            base = f"/proc/{p}/task/{tid}"
            try:
                with open(f"{base}/stat") as f:
                    stat = f.read()
                with open(f"{base}/wchan") as f:
                    wchan = f.read()
            except OSError:
                continue
            comm = stat[stat.index("(") + 1:stat.rindex(")")]
            fields = stat[stat.rindex(")") + 2:].split()  # fields[0] is stat's third, the state
            out.append(f"  {p}/{tid} {comm}: state {fields[0]}, policy {fields[38]}, real-time priority "
                       f"{fields[37]}, in {wchan or '-'}, {fields[11]}+{fields[12]} ticks")
    return "\n".join(out)


def descendants(pid):
    """The processes below `pid` (its children, theirs, ...), as /proc says now."""
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            tids = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{p}/task/{tid}/children") as f:
                    kids = [int(c) for c in f.read().split()]
            except OSError:
                continue
            found.extend(kids)
            todo.extend(kids)
    return found
