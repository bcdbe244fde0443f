"""bench/sampling_cost.py - part 10 of `make bench`: what early sampling, and
a hang's report capture, cost a spinning loop thread, measured from inside
the program (bench_sampling_cost.c: it notes every gap of more than 1 µs
between two consecutive clock readings while its callback spins).

Each round runs the same program once per configuration, in an order that
rotates from round to round:

- plain: without hangwatch (the machine's own interrupts and load);
- kernel sampler in the timer tick, task clock and ptrace, at 50 ms and
  5 ms: `hangwatch run --early-sampling --sampler kernel|task-clock|ptrace
  --sample-interval I --threshold 60s` (no hang is reported: only sampling
  runs);
- capture: `hangwatch run --threshold 1s` without sampling: the report's
  capture of every thread at 1 s, the annealing checks after it (one stop
  of the hung thread per check period, 1 s), a new report when a check
  finds another top function, and the report worker's work.

Two ways to count the loss:

- **Attributed to the kernel's interrupts** (the budget's figure). While the
  program runs, the kernel's own tracing records every timer interrupt that
  lands on the spinning thread (irq_vectors:local_timer_entry) and every
  expiry of a perf event's own timer (timer:hrtimer_expire_entry on
  perf_swevent_hrtimer), in CLOCK_MONOTONIC time; the program writes down
  every gap.  Each interrupt falls in one gap, and that gap's length is what
  the thread lost to it.  The task clock's sample is an interrupt of its
  own: its cost is its gap.  The tick's sample rides on a timer interrupt
  the thread takes anyway: its cost is how much longer a tick that carried
  a sample is than one that did not (lower quartiles of their gaps, per
  round; see tick_sample_extra).  This needs root and tracefs (mounted here
  when missing); without them only the second count is shown.
- **The whole run**: the configuration's total of gaps under 1 ms minus the
  plain run's of the same round, divided by the samples the interval gives.
  On a shared 2-core machine other programs' interrupts and slices swamp
  this figure; it also holds what the agent's own wake-ups cost.

Runs alone too:

    /usr/bin/python3 bench/sampling_cost.py BUILD_DIR [ROUNDS]
"""
import bisect
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

SPIN_MS = 4000
ROUNDS = 5
SHORT_GAP_NS = 1000000
CONFIGS = (  # name, --sampler, interval in ms (None: plain, 0: capture)
    ("plain", None, None),
    ("kernel 50ms", "kernel", 50),
    ("kernel 5ms", "kernel", 5),
    ("task-clock 50ms", "task-clock", 50),
    ("task-clock 5ms", "task-clock", 5),
    ("ptrace 50ms", "ptrace", 50),
    ("ptrace 5ms", "ptrace", 5),
    ("capture", None, 0),
)
TRACE_INSTANCE = "/sys/kernel/tracing/instances/hangwatch-bench"
TRACE_LINE = re.compile(r"^\s*(.+?)-(\d+)\s+\[\d+\]\s+\S+\s+(\d+)\.(\d+):\s+(\w+):(.*)$")


def tick_ns():
    return round(time.clock_getres(getattr(time, "CLOCK_MONOTONIC_COARSE", 6)) * 1e9)


def ticks_per_sample(interval_ms):
    t = tick_ns()
    return max(1, (interval_ms * 1000000 + t // 2) // t)


class Tracer:
    """A tracefs instance of its own recording the timer interrupts and
    perf timer expiries, with CLOCK_MONOTONIC timestamps."""

    def __init__(self):
        self.why = None
        if os.geteuid() != 0:
            self.why = "not root"
            return
        if not os.path.isdir("/sys/kernel/tracing/instances"):
            subprocess.run(["mount", "-t", "tracefs", "nodev", "/sys/kernel/tracing"], capture_output=True)
        try:
            if not os.path.isdir(TRACE_INSTANCE):
                os.mkdir(TRACE_INSTANCE)
            self._write("trace_clock", "mono")
            self._write("buffer_size_kb", "8192")
            self._write("events/timer/hrtimer_expire_entry/filter", "function.function == perf_swevent_hrtimer")
            self._write("events/timer/hrtimer_expire_entry/enable", "1")
            self._write("events/irq_vectors/local_timer_entry/enable", "1")
        except OSError as e:
            self.why = f"tracefs: {e}"
            self.close()

    def _write(self, name, text):
        with open(os.path.join(TRACE_INSTANCE, name), "w") as f:
            f.write(text)

    def clear(self):
        self._write("trace", "")

    def events(self, tid):
        """{"tick": [ns...], "perf": [ns...]}: the thread's timer interrupts
        and perf timer expiries (microsecond resolution)."""
        out = {"tick": [], "perf": []}
        with open(os.path.join(TRACE_INSTANCE, "trace")) as f:
            for line in f:
                m = TRACE_LINE.match(line)
                if not m or int(m.group(2)) != tid:
                    continue
                ns = int(m.group(3)) * 1000000000 + int(m.group(4).ljust(9, "0")[:9])
                if m.group(5) == "local_timer_entry":
                    out["tick"].append(ns)
                elif m.group(5) == "hrtimer_expire_entry":
                    out["perf"].append(ns)
        return out

    def close(self):
        if os.path.isdir(TRACE_INSTANCE):
            try:
                self._write("events/timer/hrtimer_expire_entry/enable", "0")
                self._write("events/irq_vectors/local_timer_entry/enable", "0")
                os.rmdir(TRACE_INSTANCE)
            except OSError:
                pass


def gaps_at(events, gaps, s0, s1):
    """The length of the gap each event (µs resolution) fell in, 0 if none."""
    starts = [g[0] for g in gaps]
    out = []
    for e in events:
        if not s0 <= e <= s1:
            continue
        i = bisect.bisect_right(starts, e + 1000) - 1
        out.append(gaps[i][1] if i >= 0 and e < gaps[i][0] + gaps[i][1] else 0)
    return out


def quartile(values):
    """The lower quartile: the machine's other load disturbs it least."""
    v = sorted(values)
    return v[len(v) // 4] if v else 0


def tick_sample_extra(run, plain, n_ticks):
    """How much longer a tick that carried a sample was, in ns.  Every tick
    (n_ticks 1): against the plain run's ticks.  Every Nth: the sampler
    counts the same timer interrupts as the trace, so the sampled ticks are
    one residue of their index mod N (unknown which, as the event is enabled
    a little after the spin starts: the first 200 ms are left out); the
    residue whose ticks are longest, against the others of the same run."""
    if n_ticks == 1:
        return quartile(run) - quartile(plain) if run and plain else None
    skip = 200000000 // (tick_ns() or 1)
    ticks = run[skip:]
    if len(ticks) < 4 * n_ticks:
        return None
    by_phase = [quartile(ticks[k::n_ticks]) for k in range(n_ticks)]
    best = max(range(n_ticks), key=lambda k: by_phase[k])
    others = [g for k in range(n_ticks) if k != best for g in ticks[k::n_ticks]]
    return by_phase[best] - quartile(others)


def _run_once(bin_dir, env, sampler, interval_ms, tracer):
    fd, gaps_file = tempfile.mkstemp(prefix="hw-gaps-")
    os.close(fd)
    program = [os.path.join(bin_dir, "bench-sampling-cost"), str(SPIN_MS), gaps_file]
    reports = None
    if interval_ms is None:
        args = program
    else:
        reports = tempfile.mkdtemp(prefix="hw-bench-")
        os.rmdir(reports)
        args = [os.path.join(bin_dir, "hangwatch"), "run", "-q", "--report-dir", reports]
        if sampler:
            args += ["--threshold", "60s", "--early-sampling", "--sampler", sampler,
                     "--sample-interval", f"{interval_ms}ms"]
        else:
            args += ["--threshold", "1s"]
        args += ["--"] + program
    if tracer:
        tracer.clear()
    p = subprocess.run(args, env=env, capture_output=True, text=True, timeout=120)
    made = sorted(os.listdir(reports)) if reports and os.path.isdir(reports) else []
    if sampler and made:  # keep what it said, for the error below
        with open(os.path.join(reports, made[0])) as f:
            made.append(f.read()[:4000])
    if reports:
        subprocess.run(["rm", "-rf", reports])
    with open(gaps_file) as f:
        gap_lines = f.read().split("\n")
    os.unlink(gaps_file)
    if p.returncode != 0:
        sys.exit(f"bench: {' '.join(args)} failed ({p.returncode}): {p.stderr}")
    lines = p.stdout.split("\n")
    active = lines[0] == "observer active"
    if active != (interval_ms is not None):
        sys.exit(f"bench: the observer was {'active' if active else 'inert'} in a {sampler or 'plain'} run")
    if sampler and made:
        sys.exit(f"bench: a {sampler} {interval_ms} ms sampling run reported a hang: {made}\n{p.stderr}")
    if interval_ms == 0 and not made:
        sys.exit("bench: the capture run wrote no report")
    f = lines[1].split()
    out = {"spin_ns": int(f[1]), "gaps": int(f[3]), "gap_ns": int(f[4]), "longest_ns": int(f[5]),
           "short_ns": int(f[8]), "stops": int(f[10]), "stop_ns": int(f[11]), "reports": len(made)}
    if tracer:
        tid, s0, s1 = map(int, gap_lines[0].split())
        gaps = [tuple(map(int, g.split())) for g in gap_lines[1:] if g]
        ev = tracer.events(tid)
        out["tick_gaps"] = [min(g, SHORT_GAP_NS) for g in gaps_at(ev["tick"], gaps, s0, s1)]
        out["perf_gaps"] = [g for g in gaps_at(ev["perf"], gaps, s0, s1) if g < SHORT_GAP_NS]
    return out


def measure(bin_dir, env=None, rounds=ROUNDS):
    env = env or dict(os.environ)
    tracer = Tracer()
    why = tracer.why
    if why:
        tracer = None
    runs = {name: [] for name, _, _ in CONFIGS}
    try:
        for r in range(rounds):
            order = CONFIGS[r % len(CONFIGS):] + CONFIGS[:r % len(CONFIGS)]
            got = {name: _run_once(bin_dir, env, sampler, interval, tracer) for name, sampler, interval in order}
            for name in got:
                runs[name].append(got[name])
    finally:
        if tracer:
            tracer.close()
    out = {"tick_ns": tick_ns(), "untraced": why}
    plain = runs["plain"]
    for name, sampler, interval in CONFIGS:
        if name == "plain":
            continue
        lost_all = [x["gap_ns"] - p["gap_ns"] for x, p in zip(runs[name], plain)]
        lost = [x["short_ns"] - p["short_ns"] for x, p in zip(runs[name], plain)]
        spin = statistics.median(x["spin_ns"] for x in runs[name])
        m = {"n": len(lost), "lost_med_ns": statistics.median(lost), "lost_best_ns": min(lost),
             "lost_max_ns": max(lost), "share": statistics.median(lost) / spin,
             "reports": statistics.median(x["reports"] for x in runs[name]),
             "lost_all_med_ns": statistics.median(lost_all)}
        if interval:
            period_ms = interval
            if sampler == "kernel" and not why:
                period_ms = ticks_per_sample(interval) * out["tick_ns"] / 1e6
            samples = spin / (period_ms * 1e6)
            m["period_ms"] = period_ms
            m["samples"] = samples
            m["per_sample_med_us"] = m["lost_med_ns"] / samples / 1e3
            m["per_sample_best_us"] = m["lost_best_ns"] / samples / 1e3
            m["per_sample_max_us"] = m["lost_max_ns"] / samples / 1e3
        if not why and sampler in ("kernel", "task-clock"):
            if sampler == "task-clock":  # each sample's own interrupt: its gap
                per_round = [statistics.median(x["perf_gaps"]) if x["perf_gaps"] else 0 for x in runs[name]]
                m["attr_count"] = statistics.median(len(x["perf_gaps"]) for x in runs[name])
                m["attr_q1_us"] = statistics.median(quartile(x["perf_gaps"]) for x in runs[name]) / 1e3
            else:  # rides on the tick: how much longer its sampled ticks are
                n_ticks = ticks_per_sample(interval)
                per_round = []
                for x, p in zip(runs[name], plain):
                    extra = tick_sample_extra(x["tick_gaps"], p["tick_gaps"], n_ticks)
                    if extra is not None:
                        per_round.append(extra)
                m["ticks_per_sample"] = n_ticks
                m["tick_q1_us"] = statistics.median(quartile(x["tick_gaps"]) for x in runs[name]) / 1e3
            m["attr_rounds_us"] = [v / 1e3 for v in per_round]
            m["attr_med_us"] = statistics.median(per_round) / 1e3
            m["attr_share"] = m["attr_med_us"] * 1e3 / (m["period_ms"] * 1e6)
        out[name] = m
    out["plain"] = {"gap_ms": statistics.median(p["gap_ns"] for p in plain) / 1e6,
                    "short_ms": statistics.median(p["short_ns"] for p in plain) / 1e6,
                    "stops_max": max(p["stops"] for p in plain)}
    cap = runs["capture"]
    out["capture"].update({"stops_med": statistics.median(x["stops"] for x in cap),
                           "stop_med_us": statistics.median(x["stop_ns"] for x in cap) / 1e3,
                           "stop_max_us": max(x["stop_ns"] for x in cap) / 1e3,
                           "per_stop_med_us": statistics.median(x["stop_ns"] / x["stops"] for x in cap if x["stops"])
                           / 1e3 if any(x["stops"] for x in cap) else 0.0,
                           "per_report_med_us": statistics.median(x["stop_ns"] / max(x["reports"], 1) for x in cap)
                           / 1e3})
    if not why:
        out["plain"]["tick_q1_us"] = statistics.median(quartile(p["tick_gaps"]) for p in plain) / 1e3
    return out


def rows(m, row):
    plain = m["plain"]
    for name in ("kernel 50ms", "kernel 5ms", "task-clock 50ms", "task-clock 5ms"):
        x = m[name]
        if "attr_med_us" not in x:
            continue
        met = x["attr_med_us"] <= 25 and (not name.endswith("50ms") or x["attr_share"] <= 0.001)
        budget = "≤ 25 µs per sample" + ("; ≤ 0.1 % at 50 ms" if name.endswith("50ms") else "")
        rounds = ", ".join(f"{v:.1f}" for v in x["attr_rounds_us"])
        if name.startswith("kernel"):
            how = (f"in the timer tick, every {x['ticks_per_sample']} tick(s) of {m['tick_ns'] / 1e6:g} ms "
                   f"({x['period_ms']:g} ms): how much longer a sampled tick's gap is (lower quartiles; "
                   + ("against the plain run's ticks: " if x["ticks_per_sample"] == 1 else
                      "against the same run's other ticks; all ticks: ")
                   + f"{plain['tick_q1_us']:.1f} plain, {x['tick_q1_us']:.1f} here)")
        else:
            how = (f"on its own timer interrupt: the gap each sample's interrupt fell in, median of "
                   f"{x['attr_count']:.0f} per round (lower quartile {x['attr_q1_us']:.1f}; an ordinary timer "
                   f"interrupt's gap: {plain['tick_q1_us']:.1f})")
        row(f"10 early sampling, {name}: a spinning thread's time lost per sample, attributed, µs",
            f"{x['n']} rounds", f"{x['attr_med_us']:.1f}", "",
            f"{how}; rounds {rounds}; {x['attr_share'] * 100:.3f} % of the thread's time", budget,
            "met" if met else "**MISSED**")
    for name in ("kernel 50ms", "kernel 5ms", "task-clock 50ms", "task-clock 5ms", "ptrace 50ms", "ptrace 5ms"):
        x = m[name]
        row(f"  {name}, the whole run: gaps under 1 ms minus the plain run's, per sample, µs", f"{x['n']} rounds",
            f"{x['per_sample_med_us']:.1f}", "",
            f"best round {x['per_sample_best_us']:.1f}, worst {x['per_sample_max_us']:.1f}; "
            f"{x['share'] * 100:.3f} % of the spin; {x['samples']:.0f} samples per round; the plain run's gaps "
            f"under 1 ms: {plain['short_ms']:.1f} ms per {SPIN_MS / 1000:.0f} s (other programs' slices: "
            f"{plain['gap_ms']:.0f} ms more)", "", "")
    if m["untraced"]:
        row("  (no attribution: " + m["untraced"] + ")", "", "", "", "", "", "")
    c = m["capture"]
    row("  a hang's report (capture of every thread, annealing checks, report worker): spinning thread's time "
        "lost, µs", f"{c['n']} rounds", f"{c['lost_med_ns'] / 1e3:.0f}", "",
        f"best round {c['lost_best_ns'] / 1e3:.0f}, worst {c['lost_max_ns'] / 1e3:.0f}; the re-checks of a "
        f"{SPIN_MS / 1000:.0f} s hang with a 1 s threshold and its reports (median {c['reports']:.0f}: a new one "
        "when a re-check finds another top function)", "shown", "")
    row("  the same, attributed: the hung thread's stops (gaps in which it switched voluntarily, as a spin never "
        "does and a ptrace stop does), µs per report", f"{c['n']} rounds", f"{c['per_report_med_us']:.0f}", "",
        f"all stops over the hang {c['stop_med_us']:.0f} (max {c['stop_max_us']:.0f}), {c['stops_med']:.0f} "
        f"stops (the capture and the re-checks), {c['per_stop_med_us']:.0f} each; the plain runs' such gaps: "
        f"{plain['stops_max']} at most (the method's noise); the agent's other threads work off the hung "
        "thread's CPU (decisions.md §63), so a preemption by them, which this count would miss, does not come", "≤ 1 ms", "met" if c["per_report_med_us"] <= 1000 else "**MISSED**")


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    res = measure(os.path.join(sys.argv[1], "bin"), rounds=int(sys.argv[2]) if len(sys.argv) == 3 else ROUNDS)
    lines = []
    rows(res, lambda *r: lines.append(" | ".join(r)))
    print("\n".join(lines))
