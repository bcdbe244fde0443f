"""bench/kernel_observer.py - part 8 of `make bench`: what the kernel
observer (src/bpf/wait_observer.bpf.c) costs a program per wait call, when
it watches that program and when it watches another one.

A bench-epoll-spin process calls epoll_wait(ep, ev, 8, 0) in a loop and
stamps every chunk of calls with the time it ended.  While it runs,
`hangwatch watch` is switched on and off PHASES times (on: one second, off:
one second): watching the spinner itself ("watched"), or an idle loop next
to it ("another process watched": what everybody else on the machine pays),
once attached to the system calls' tracepoints and once with uprobes in
the watched process (--attach uprobe); then fentry beside the tracepoints,
the same way, on Debian's stock kernel booted under QEMU (measure_in_vm).
Chunks within SETTLE_S of a switch are left out; the figure is the median
over on/off phase pairs of (median on - median off), in ns per call, with
the range over the pairs.  Runs alone too:

    /usr/bin/python3 bench/kernel_observer.py BUILD_DIR [vm]

(`vm`: only the virtual machine's figures.)
"""
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

PHASES = 4
PHASE_S = 1.0
SETTLE_S = 0.25
CHUNK = 20000


def _spinner(bin_dir, mode, chunk):
    iterations = 400_000_000  # far more than needed: it is killed at the end
    return subprocess.Popen([os.path.join(bin_dir, "bench-epoll-spin"), str(iterations), str(chunk), mode],
                            stdout=subprocess.PIPE, text=True)


def _phases(bin_dir, target_pid, env, attach, phase_s):
    """Switch `hangwatch watch --attach ATTACH -p target_pid` on and off; the windows, each
    (started, on, stopping, ended).  On runs from when the agent says it watches the process (its
    programs attached: uprobes go in one by one, and a window timed from the command's start held
    mostly unprobed calls) to when it is told to stop; off, from one command's end to the next
    one's start.  The command's end is not the on window's: it takes its probes out first and
    then takes its time to finish, and a window to its end held three seconds of unprobed calls
    after three of probed ones (part 8's uprobe row read +64 ns where each probed call costs tens
    of microseconds: a median over chunks counted the many fast ones)."""
    windows = []
    for _ in range(PHASES):
        time.sleep(phase_s)  # an off phase: the driver paces the phases, nothing is waited for
        reports = tempfile.mkdtemp(prefix="hw-bench-")
        os.rmdir(reports)
        started = time.monotonic_ns()
        watch = subprocess.Popen([os.path.join(bin_dir, "hangwatch"), "watch", "--attach", attach,
                                  "--report-dir", reports, "-p", str(target_pid)], env=env, stderr=subprocess.PIPE,
                                 text=True)
        said = []
        for line in watch.stderr:  # until it watches (or ends)
            said.append(line)
            if line.startswith("hangwatch: watching pid"):
                break
        on = time.monotonic_ns()
        drain = threading.Thread(target=lambda: said.extend(watch.stderr), daemon=True)
        drain.start()
        time.sleep(phase_s)
        stopping = time.monotonic_ns()
        watch.send_signal(signal.SIGINT)
        watch.wait(timeout=30)
        drain.join(timeout=30)
        ended = time.monotonic_ns()
        if watch.returncode != 0:
            sys.exit(f"bench: hangwatch watch failed ({watch.returncode}): {''.join(said)}")
        windows.append((started, on, stopping, ended))
        subprocess.run(["rm", "-rf", reports])
    time.sleep(phase_s)
    return windows


def _cost(chunks, windows, phase_s, settle_s):
    """Per window, (median on - median off) in ns per call.  A window is (on, off), the virtual
    machine's, or _phases' (started, on, stopping, ended)."""
    settle = int(settle_s * 1e9)
    windows = [w if len(w) == 4 else (w[0], w[0], w[1], w[1]) for w in windows]
    diffs = []
    for k, (started, on, stopping, _) in enumerate(windows):
        before_start = windows[k - 1][3] if k else started - int(2 * phase_s * 1e9)
        during = [ns for ns, t in chunks if on + settle <= t <= stopping - settle]
        before = [ns for ns, t in chunks if before_start + settle <= t <= started - settle]
        if during and before:
            diffs.append(statistics.median(during) - statistics.median(before))
    return diffs


def measure(bin_dir, env=None):
    """This kernel's attachments, {"tracepoint": figures, "uprobe": figures},
    and fentry beside the tracepoints on Debian's stock kernel ("in_vm")."""
    out = {attach: measure_one(bin_dir, env, attach) for attach in ("tracepoint", "uprobe")}
    out["in_vm"] = measure_in_vm(bin_dir)
    return out


def measure_one(bin_dir, env, attach):
    env = env or dict(os.environ)
    out = {}
    # Uprobes go in one by one (each registration visits every process that
    # maps the file: about half a second for glibc), and a trapped call
    # costs tens of microseconds: longer phases, a longer settling time and
    # shorter chunks, so that chunks still fall inside their phase.
    uprobe = attach == "uprobe"
    phase_s, settle_s = (3.0, 1.0) if uprobe else (PHASE_S, SETTLE_S)
    for what in ("watched", "other", "other_getppid"):
        chunk = CHUNK // 20 if uprobe and what == "watched" else CHUNK
        spin = _spinner(bin_dir, "stamped-getppid" if what == "other_getppid" else "stamped", chunk)
        other = None
        lines = []
        try:
            first = spin.stdout.readline()
            if not first.startswith("observer"):
                sys.exit(f"bench: bench-epoll-spin did not start: {first!r}")
            # Its lines are read as they come: a full pipe would stop it.
            reader = threading.Thread(target=lambda: lines.extend(spin.stdout), daemon=True)
            reader.start()
            if what != "watched":
                other = subprocess.Popen([os.path.join(bin_dir, "kernel-loop"), "idle", "600"],
                                         stdout=subprocess.DEVNULL)
            windows = _phases(bin_dir, spin.pid if what == "watched" else other.pid, env, attach, phase_s)
        finally:
            spin.kill()
            spin.wait()
            if other:
                other.kill()
                other.wait()
        reader.join(timeout=30)
        chunks = []
        for line in lines:
            f = line.split()
            if len(f) == 3 and f[0] == "chunk":
                chunks.append((float(f[1]), int(float(f[2]))))
        diffs = _cost(chunks, windows, phase_s, settle_s)
        if not diffs:
            sys.exit("bench: part 8 has no chunks to compare")
        base = [ns for ns, _ in chunks]
        out[what] = {"n": len(diffs), "med": statistics.median(diffs), "min": min(diffs), "max": max(diffs),
                     "base": statistics.median(base)}
    return out


VM_PHASE_S = 2.0
VM_SETTLE_S = 0.5


def measure_in_vm(bin_dir):
    """fentry beside the tracepoints, measured the same way on Debian's stock
    kernel booted under QEMU (tests/vm/kernel_observer_vm.py makes the
    machine; bench/vm_kernel_observer.sh is its /init): {"fentry": figures,
    "tracepoint": figures}, or None with the reason logged when the machine
    cannot be had.  Emulated, a system call costs several times what it
    does here: compare the two attachments with each other, not with the
    rows measured on this machine.  One virtual CPU: with two, software
    emulation's cross-CPU code patching (attaching fentry rewrites the
    wait functions while the spinner runs them) left a CPU stuck in the
    kernel for minutes (soft lockups), which one CPU does not."""
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "..", "tests", "vm"))
    import kernel_observer_vm as vm  # noqa: E402 (the tests' machine)
    build_dir = os.path.dirname(os.path.abspath(bin_dir))
    vm_dir = os.path.join(build_dir, "vm-bench")
    os.makedirs(vm_dir, exist_ok=True)
    try:
        machine = vm.prepare(vm_dir, build_dir, os.path.join(here, "vm_kernel_observer.sh"),
                             ["hangwatch", "kernel-loop", "bench-epoll-spin"])
    except RuntimeError as e:
        print(f"bench: part 8 in a virtual machine skipped: {e}", file=sys.stderr)
        return None
    console, ended, elapsed, accelerator = vm.run_vm(machine, os.path.join(vm_dir, "console.log"),
                                                     f"HW_PHASES={PHASES} HW_PHASE_S={VM_PHASE_S:g}", cpus=1,
                                                     deadline_s=900)
    print(f"bench: part 8 in a virtual machine: {accelerator}", file=sys.stderr)
    windows, chunks = {}, {}
    for line in console:
        f = line.split()
        if len(f) == 5 and f[0] == "WINDOW":
            windows.setdefault((f[1], f[2]), []).append((int(f[3]), int(f[4])))
        elif len(f) == 5 and f[0] == "CHUNK":
            chunks.setdefault((f[1], f[2]), []).append((float(f[3]), int(float(f[4]))))
    out = {}
    for attach in ("fentry", "tracepoint"):
        figures = {}
        for what in ("watched", "other", "other_getppid"):
            got = chunks.get((attach, what), [])
            diffs = _cost(got, windows.get((attach, what), []), VM_PHASE_S, VM_SETTLE_S)
            if not diffs:
                print(f"bench: part 8 in a virtual machine: no figures for {attach} {what} (the machine: {ended}, "
                      f"{elapsed:.0f} s; {vm_dir}/console.log)", file=sys.stderr)
                return None
            figures[what] = {"n": len(diffs), "med": statistics.median(diffs), "min": min(diffs),
                             "max": max(diffs), "base": statistics.median(ns for ns, _ in got)}
        out[attach] = figures
    return out


def _verdict(f):
    """Measurable: a median over 5 ns that every on/off pair shows (its range
    above zero); a median the pairs straddle is the machine's noise."""
    return "missed" if f["med"] > 5 and f["min"] > 0 else "met"


def rows(both, row):
    in_vm = both.pop("in_vm", None)
    if in_vm:
        for attach, k in in_vm.items():
            w, o, g = k["watched"], k["other"], k["other_getppid"]
            where = f"Debian's stock kernel under QEMU, --attach {attach}"
            row(f"  {where}: `epoll_wait(ep, ev, 8, 0)` watched through it, ns added per call",
                f"{w['n']} on/off pairs", f"{w['med']:+.1f}", "",
                f"range over the pairs {w['min']:+.1f}..{w['max']:+.1f}; the call itself about {w['base']:.0f} ns "
                "emulated")
            for what, f, call in (("epoll_wait", o, "epoll_wait"), ("getppid()", g, "getppid()")):
                row(f"  {where}, another process watched: {what} of a process that is not, ns added per call",
                    f"{f['n']} on/off pairs", f"{f['med']:+.1f}", "",
                    f"range over the pairs {f['min']:+.1f}..{f['max']:+.1f}; the {call} itself about "
                    f"{f['base']:.0f} ns emulated", "nothing measurable" if attach == "fentry" or call == "getppid()"
                    else "", _verdict(f) if attach == "fentry" or call == "getppid()" else "")
    for attach, k in both.items():
        w, o, g = k["watched"], k["other"], k["other_getppid"]
        head = "8" if attach == "tracepoint" else " "
        row(f"{head} kernel observer, --attach {attach}: `epoll_wait(ep, ev, 8, 0)` watched through it, ns added "
            "per call", f"{w['n']} on/off pairs", f"{w['med']:+.1f}", "",
            f"range over the pairs {w['min']:+.1f}..{w['max']:+.1f}; the call itself about {w['base']:.0f} ns"
            + ("; part 1 gives the preloaded observer's" if attach == "tracepoint" else
               "; a trap into the kernel and back per probe (entry, and after the system call)"))
        row(f"  --attach {attach}, another process watched: epoll_wait of a process that is not, ns added per call",
            f"{o['n']} on/off pairs", f"{o['med']:+.1f}", "", f"range over the pairs {o['min']:+.1f}..{o['max']:+.1f}; "
            f"the call itself about {o['base']:.0f} ns", "nothing measurable", _verdict(o))
        row(f"  --attach {attach}, another process watched: getppid() of a process that is not, ns added per call",
            f"{g['n']} on/off pairs", f"{g['med']:+.1f}", "", f"range over the pairs {g['min']:+.1f}..{g['max']:+.1f}; "
            f"the call itself about {g['base']:.0f} ns"
            + (": enabled system-call tracepoints send every system call of the machine through the kernel's "
               "traced path (docs/benchmarks.md, part 8)" if attach == "tracepoint" else
               ": uprobes live in the watched process alone"),
            "nothing measurable", _verdict(g))


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3) or (len(sys.argv) == 3 and sys.argv[2] != "vm"):
        sys.exit(__doc__)
    if len(sys.argv) == 3:
        k = {"in_vm": measure_in_vm(os.path.join(sys.argv[1], "bin"))}
    else:
        k = measure(os.path.join(sys.argv[1], "bin"))
    lines = []
    rows(k, lambda *r: lines.append(" | ".join(r)))
    print("\n".join(lines))
