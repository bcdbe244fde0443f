"""test_stats - `hangwatch stats` and `hangwatch export` on real reports.

The `collect` case (a CTest fixture the others require) runs a program with
three different hangs, one of them twice, under `hangwatch run
--early-sampling` with the default settings, as a user would, and the same
program built another way (other offsets, another build-id) under a
shorter threshold.  The other cases read what it left:

  stats_three_hangs        the table: 3 groups sorted by total time, the
                           repeated one with count 2, each with its culprit
  stats_json_matches_reports  --json agrees, figure for figure, with the
                           same grouping done here from the report files
  stats_across_builds      the other build's hangs join the same groups
  export_speedscope        valid against speedscope's own schema, weighted
                           as documented, loaded by speedscope's web app
  export_chrome_trace      hangs and stacks on the right pid/tid, nested
                           inside each hang, loaded by speedscope's Chrome
                           trace importer
  bad_input                bad files are named and skipped, the rest read;
                           nothing but bad input exits 1; foreign text is
                           escaped
  usage                    usage errors exit 2; --help tells the truth

HW_STATS_DIR names the fixture's directory, HW_SPEEDSCOPE_CACHE where
speedscope is kept once fetched (both in the build tree).
"""
import glob
import json
import os
import re
import shutil
import stat
import statistics
import subprocess
import tempfile

import hwtest
import speedscope_app
from hwtest import check

UNIT = 2.5  # threehangs: x sleeps UNIT twice, y spins 1.2 UNIT, z sleeps 1.6 UNIT
VARIANT_UNIT = 0.8


def fixture_dir():
    d = os.environ.get("HW_STATS_DIR")
    check(d, "HW_STATS_DIR is not set (tests/CMakeLists.txt sets it)")
    return d


def main_dir():
    return os.path.join(fixture_dir(), "hangwatch-reports")


def variant_dir():
    return os.path.join(fixture_dir(), "variant-reports")


def reports_in(d):
    paths = sorted(glob.glob(os.path.join(d, "*.json")))
    return paths, [hwtest.load_report(p) for p in paths]


def speedscope():
    cache = os.environ.get("HW_SPEEDSCOPE_CACHE")
    check(cache, "HW_SPEEDSCOPE_CACHE is not set (tests/CMakeLists.txt sets it)")
    return speedscope_app.package(hwtest.SOURCE_DIR, cache)


def culprit_of(rep):
    """The first frame of the hung stack in the program's own executable."""
    exe = os.path.basename(rep["hangwatch"]["executable"])
    for f in hwtest.frames(rep):
        if f.get("object_name") == exe:
            return f.get("symbol_name")
    return None


def case_collect():
    root = fixture_dir()
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    # As a user runs it: the default report directory, the default threshold.
    p = subprocess.run([hwtest.binary("hangwatch"), "run", "--early-sampling", "--",
                        hwtest.binary("loop-scenarios"), "threehangs", str(UNIT)],
                       capture_output=True, text=True, timeout=180, cwd=root)
    check(p.returncode == 0, f"exit {p.returncode}\n{p.stderr}")
    paths, reps = reports_in(main_dir())
    firsts = [r for r in reps if r["hangwatch"]["stretch_report_index"] == 0]
    check(len(firsts) == 4, f"expected 4 hangs, got {len(firsts)} in {paths}\n{p.stderr}")
    check(sorted(culprit_of(r) for r in firsts) == ["hang_in_x", "hang_in_x", "hang_in_y", "hang_in_z"],
          f"culprits: {[culprit_of(r) for r in firsts]}")
    for r in reps:
        check("final_duration_us" in r["hangwatch"], "a hang's end was not recorded")
        check(r["hangwatch"]["collection"]["main_thread"]["state"] == "collected", "no early sampling")

    variant = os.path.join(os.path.dirname(hwtest.binary("hangwatch")), "variant", "loop-scenarios")
    check(os.access(variant, os.X_OK), f"{variant} is not built")
    p = subprocess.run([hwtest.binary("hangwatch"), "run", "--early-sampling", "--threshold", "500ms",
                        "--report-dir", variant_dir(), "--", variant, "threehangs", str(VARIANT_UNIT)],
                       capture_output=True, text=True, timeout=120, cwd=root)
    check(p.returncode == 0, f"variant: exit {p.returncode}\n{p.stderr}")
    paths, reps = reports_in(variant_dir())
    check(len([r for r in reps if r["hangwatch"]["stretch_report_index"] == 0]) == 4,
          f"variant: expected 4 hangs in {paths}\n{p.stderr}")


ROW = re.compile(r"^([0-9a-f]{16}) +(\d+) +(\d+\.\d{3})s +(\d+\.\d{3})s +(\d+\.\d{3})s +"
                 r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) +(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) +(.+)$")


def table_rows(text):
    """(key, count, total, median, worst, first, last, processes, culprit) of each group, in order."""
    lines = text.splitlines()
    rows = []
    for i, line in enumerate(lines):
        m = ROW.match(line)
        if m:
            culprit = lines[i + 1].strip() if i + 1 < len(lines) else ""
            check(culprit.startswith("culprit: "), f"no culprit line after a group:\n{text}")
            rows.append((m.group(1), int(m.group(2)), float(m.group(3)), float(m.group(4)), float(m.group(5)),
                         m.group(6), m.group(7), m.group(8), culprit[len("culprit: "):]))
    return rows


def case_stats_three_hangs():
    """The acceptance: `hangwatch stats hangwatch-reports` prints the three
    groups sorted by total time, the repeated one with count 2, each with its
    culprit."""
    p = hwtest.hw("stats", "hangwatch-reports", cwd=fixture_dir())
    check(p.returncode == 0, f"exit {p.returncode}\n{p.stderr}")
    check(p.stderr == "", f"stats said something on stderr:\n{p.stderr}")
    check(p.stdout.startswith("4 hangs in 3 groups, from 4 reports\n"), p.stdout)
    check("GROUP" in p.stdout and "COUNT" in p.stdout and "TOTAL" in p.stdout and "MEDIAN" in p.stdout
          and "WORST" in p.stdout and "FIRST SEEN (UTC)" in p.stdout and "LAST SEEN (UTC)" in p.stdout, p.stdout)
    rows = table_rows(p.stdout)
    check(len(rows) == 3, f"expected 3 groups:\n{p.stdout}")
    culprits = [r[8].split(" ")[0] for r in rows]
    check(culprits == ["hang_in_x", "hang_in_z", "hang_in_y"], f"order or culprits: {culprits}\n{p.stdout}")
    check([r[1] for r in rows] == [2, 1, 1], f"counts: {[r[1] for r in rows]}\n{p.stdout}")
    totals = [r[2] for r in rows]
    check(totals == sorted(totals, reverse=True), f"not sorted by total: {totals}")
    # x slept UNIT twice, z 1.6 UNIT, y spun 1.2 UNIT: final durations are
    # upper bounds by the agent's 10 ms look
    for (lo, hi), total in zip([(2 * UNIT, 2 * UNIT + 0.3), (1.6 * UNIT, 1.6 * UNIT + 0.3),
                                (1.2 * UNIT, 1.2 * UNIT + 0.3)], totals):
        check(lo - 0.01 <= total <= hi, f"total {total} not in [{lo}, {hi}]\n{p.stdout}")
    x = rows[0]
    check(UNIT - 0.01 <= x[3] <= UNIT + 0.15 and x[3] <= x[4] <= UNIT + 0.15, f"median/worst of x: {x}")
    check(x[5] < x[6], f"x first seen {x[5]} is not before last seen {x[6]}")
    for r in rows:
        check(r[7] == "loop-scenarios", f"processes: {r[7]}")
        check(re.search(r" at \S*loop_scenarios\.c:\d+ \(loop-scenarios\)$", r[8]), f"culprit's place: {r[8]}")
    # The keys are the reports' keys.
    _, reps = reports_in(main_dir())
    check({r[0] for r in rows} == {rep["hangwatch"]["grouping_key"] for rep in reps}, "keys differ from reports'")


def expected_groups(reps):
    """The grouping done here, from the report files."""
    groups = {}
    for rep in reps:
        apm = rep["hangwatch"]
        g = groups.setdefault(apm["grouping_key"], {"durations": [], "seen": [], "processes": set(), "reports": 0,
                                                    "culprit": culprit_of(rep)})
        g["reports"] += 1
        g["seen"].append(apm["detected_at_unix_ms"])
        g["processes"].add(rep["report"]["process_name"])
        if apm["stretch_report_index"] == 0:
            g["durations"].append(apm.get("final_duration_us", apm["block_duration_us"]))
    return groups


def case_stats_json_matches_reports():
    p = hwtest.hw("stats", "--json", main_dir())
    check(p.returncode == 0, f"exit {p.returncode}\n{p.stderr}")
    out = json.loads(p.stdout)
    _, reps = reports_in(main_dir())
    expected = expected_groups(reps)
    check(out["reports"] == len(reps) and out["unreadable"] == 0 and out["hangs"] == 4 and out["not_hangs"] == 0,
          f"counts: {out}")
    check(len(out["groups"]) == len(expected), f"{len(out['groups'])} groups, expected {len(expected)}")
    totals = [g["total_us"] for g in out["groups"]]
    check(totals == sorted(totals, reverse=True), f"not sorted by total: {totals}")
    for g in out["groups"]:
        e = expected[g["grouping_key"]]
        d = sorted(e["durations"])
        n = len(d)
        median = d[n // 2] if n % 2 else (d[n // 2 - 1] + d[n // 2]) // 2
        check(g["count"] == n and g["total_us"] == sum(d) and g["median_us"] == median and g["worst_us"] == max(d),
              f"figures of {g['grouping_key']}: {g} vs {d}")
        check(g["first_seen_unix_ms"] == min(e["seen"]) and g["last_seen_unix_ms"] == max(e["seen"]),
              f"seen: {g} vs {e['seen']}")
        check(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", g["first_seen"]), g["first_seen"])
        check(g["processes"] == sorted(e["processes"]) and g["reports"] == e["reports"], f"{g} vs {e}")
        check(g["culprit"]["function"] == e["culprit"] and g["culprit"]["language"] == "native"
              and g["culprit"]["object"] == "loop-scenarios" and g["culprit"]["line"] > 0, f"culprit {g['culprit']}")
        check(g["open_hangs"] == 0 and g["follow_up_reports"] == 0, str(g))


def case_stats_across_builds():
    """Another build of the program (other offsets, another build-id) and
    other load addresses: its hangs join the same groups."""
    _, main = reports_in(main_dir())
    _, variant = reports_in(variant_dir())

    def image(rep):
        return [im for im in rep["binary_images"] if os.path.basename(im["name"]) == "loop-scenarios"][0]

    def frame(rep, name):
        return [f for f in hwtest.frames(rep) if f.get("symbol_name") == name][0]

    xm = [r for r in main if culprit_of(r) == "hang_in_x"][0]
    xv = [r for r in variant if culprit_of(r) == "hang_in_x"][0]
    check(image(xm)["build_id"] != image(xv)["build_id"], "the two builds have the same build-id")
    check(frame(xm, "hang_in_x")["object_offset"] != frame(xv, "hang_in_x")["object_offset"],
          "hang_in_x is at the same offset in both builds")
    check(frame(xm, "hang_in_x")["instruction_addr"] != frame(xv, "hang_in_x")["instruction_addr"],
          "the same address in both runs")
    p = hwtest.hw("stats", "--json", main_dir(), variant_dir())
    check(p.returncode == 0, f"exit {p.returncode}\n{p.stderr}")
    out = json.loads(p.stdout)
    by_culprit = {g["culprit"]["function"]: g for g in out["groups"]}
    check(len(out["groups"]) == 3 and set(by_culprit) == {"hang_in_x", "hang_in_y", "hang_in_z"},
          f"groups: {[(g['grouping_key'], g['culprit']) for g in out['groups']]}")
    check([by_culprit[n]["count"] for n in ("hang_in_x", "hang_in_y", "hang_in_z")] == [4, 2, 2],
          f"counts: {out['groups']}")
    check(out["groups"][0]["culprit"]["function"] == "hang_in_x", "x has the largest total")


def export(fmt, *paths, out_dir):
    path = os.path.join(out_dir, f"export.{fmt}.json")
    p = hwtest.hw("export", "--format", fmt, "-o", path, *paths)
    check(p.returncode == 0, f"export {fmt}: exit {p.returncode}\n{p.stderr}")
    check(stat.S_IMODE(os.stat(path).st_mode) == 0o600, "the export is not mode 0600")
    with open(path) as f:
        return path, json.load(f)


def case_export_speedscope():
    package = speedscope()
    _, reps = reports_in(main_dir())
    with tempfile.TemporaryDirectory() as d:
        path, doc = export("speedscope", main_dir(), out_dir=d)
        speedscope_app.validate(package, doc, path)
        frames = doc["shared"]["frames"]
        names = [p["name"] for p in doc["profiles"]]
        pid = reps[0]["report"]["pid"]
        check(len(doc["profiles"]) == 3 and names[0].endswith(": hung stacks")
              and names[1].endswith(": Point Stacks (early sampling)") and names[2].endswith(": early samples")
              and f"(pid {pid})" in names[0], f"profiles: {names}")
        hung, points, ring = doc["profiles"]
        # Each hang here had one report: its captured stack weighs the whole
        # hang, less what overlaps the next hang (its end is known to the
        # agent's last look, ~10 ms, or as late as the report says,
        # final_duration_precision_us: the watch thread may have been in a
        # capture; its start to a millisecond).
        by_time = sorted(reps, key=lambda r: r["hangwatch"]["detected_at_unix_ms"])
        expected = [r["hangwatch"]["final_duration_us"] for r in by_time]
        slack = [20000 + r["hangwatch"].get("final_duration_precision_us", 0) for r in by_time]
        weights = hung["weights"]
        check(len(weights) == 4 and all(f - d <= w <= f for w, f, d in zip(weights, expected, slack))
              and weights[-1] == expected[-1], f"weights {weights} vs final durations {expected} (less at most {slack})")
        check(hung["endValue"] == sum(weights) and hung["startValue"] == 0 and hung["unit"] == "microseconds",
              str({k: hung[k] for k in ("startValue", "endValue", "unit")}))
        for stack in hung["samples"]:
            named = [frames[i]["name"] for i in stack]
            check(named[0] == "_start" and "main" in named, f"not root first: {named}")
            check(any(n in named for n in ("hang_in_x", "hang_in_y", "hang_in_z")), f"no culprit in {named}")
        spans = sorted(r["hangwatch"]["collection"]["main_thread"]["sample_count"] *
                       r["hangwatch"]["collection"]["main_thread"]["sample_interval_us"] for r in reps)
        check(sorted(points["weights"]) == spans, f"Point Stack weights {points['weights']} vs {spans}")
        for stack in points["samples"]:
            named = [frames[i]["name"] for i in stack]
            check(any(n in named for n in ("hang_in_x", "hang_in_y", "hang_in_z")), f"Point Stack {named}")
        # Every sample of each hang's ring (one report per hang here), each
        # distinct stack weighted by its count x the interval.
        expected_ring = sorted(st["count"] * r["hangwatch"]["collection"]["main_thread"]["sample_interval_us"]
                               for r in reps for st in r["hangwatch"]["collection"]["main_thread"]["samples"]["stacks"])
        check(sorted(ring["weights"]) == expected_ring and ring["endValue"] == sum(expected_ring),
              f"early samples' weights {sorted(ring['weights'])} vs {expected_ring}")
        through = sum(w for stack, w in zip(ring["samples"], ring["weights"])
                      if any(frames[i]["name"] in ("hang_in_x", "hang_in_y", "hang_in_z") for i in stack))
        check(through >= sum(expected_ring) * 0.9, f"{through} of {sum(expected_ring)} us of samples in a culprit")
        for stack in ring["samples"]:  # root first: main above the culprit
            named = [frames[i]["name"] for i in stack]
            culprit = [k for k, n in enumerate(named) if n in ("hang_in_x", "hang_in_y", "hang_in_z")]
            check("main" not in named or not culprit or named.index("main") < culprit[0], f"not root first: {named}")
        located = [f for f in frames if f["name"] == "hang_in_z"]
        check(located and located[0].get("file", "").endswith("loop_scenarios.c") and located[0]["line"] > 0,
              f"hang_in_z's frame: {located}")
        loaded = speedscope_app.load(package, path)
        speedscope_app.expect_imported(loaded, "speedscope json file", doc["name"])
        check(doc["name"] == "hangwatch: 4 hangs from 4 reports", doc["name"])
        check(names[0] in loaded.dom, "speedscope does not show the first profile's name\n" + loaded.describe())


def case_export_chrome_trace():
    package = speedscope()
    _, reps = reports_in(main_dir())
    _, variant = reports_in(variant_dir())
    with tempfile.TemporaryDirectory() as d:
        path, doc = export("chrome-trace", main_dir(), variant_dir(), out_dir=d)
        events = doc["traceEvents"]
        check(doc.get("displayTimeUnit") == "ms", "displayTimeUnit")
        for rep in reps + variant:
            pid = rep["report"]["pid"]
            tid = rep["hangwatch"]["hung_thread"]["thread_identifier"]
            check(any(e["ph"] == "M" and e["name"] == "thread_name" and e["pid"] == pid and e["tid"] == tid
                      and e["args"]["name"] == "loop-scenarios" for e in events), f"no thread name for {pid}/{tid}")
            check(any(e["ph"] == "M" and e["name"] == "process_name" and e["pid"] == pid for e in events),
                  f"no process name for {pid}")
        hangs = [e for e in events if e["ph"] == "X" and e.get("cat") == "hang"]
        check(len(hangs) == 8, f"{len(hangs)} hang events, expected 8")
        finals = sorted(r["hangwatch"]["final_duration_us"] for r in reps + variant)
        durs = sorted(e["dur"] for e in hangs)
        # a hang's end may be cut where the next one began: by as much as its report says its end is
        # uncertain (final_duration_precision_us: the agent's look, ~10 ms, later on a loaded machine)
        slack = max([20000] + [r["hangwatch"].get("final_duration_precision_us", 0) + 1000 for r in reps + variant])
        check(all(f - slack <= x <= f for x, f in zip(durs, finals)), f"durations {durs} vs {finals} (slack {slack})")
        for rep in reps + variant:
            pid = rep["report"]["pid"]
            mine = [e for e in hangs if e["pid"] == pid]
            check(len(mine) == 4 and all(e["tid"] == rep["hangwatch"]["hung_thread"]["thread_identifier"]
                                         for e in mine), f"hang events of pid {pid}: {mine}")
            check(any(rep["hangwatch"]["grouping_key"] == e["args"]["grouping_key"] for e in mine), "keys")
        for h in hangs:
            culprit = h["name"][len("hang in "):]
            check(culprit in ("hang_in_x", "hang_in_y", "hang_in_z"), h["name"])
            inside = [e for e in events if e["ph"] == "X" and e.get("cat") == "stack" and e["pid"] == h["pid"]
                      and h["ts"] <= e["ts"] < h["ts"] + h["dur"]]
            check(inside and all(e["ts"] + e["dur"] <= h["ts"] + h["dur"] for e in inside),
                  f"stack slices of {h['name']} not inside it")
            check(culprit in [e["name"] for e in inside], f"{culprit} is not among its stack slices")
            names = [e["name"] for e in inside]
            check(names.index("main") < names.index(culprit), "slices not outermost first")
        points = [e for e in events if e["ph"] == "i" and e.get("cat") == "early_sampling"]
        check(len(points) == 8 and all(e["s"] == "t" and e["args"]["stack (repeat counts)"] for e in points),
              f"Point Stack instants: {points[:2]}")
        # ordered on each thread: no two hangs overlap
        for pid in {h["pid"] for h in hangs}:
            mine = sorted((h["ts"], h["ts"] + h["dur"]) for h in hangs if h["pid"] == pid)
            check(all(a[1] <= b[0] for a, b in zip(mine, mine[1:])), f"hangs overlap: {mine}")
        loaded = speedscope_app.load(package, path)
        speedscope_app.expect_imported(loaded, "Trace Event Format profile", os.path.basename(path))


def no_control_bytes(where, data):
    for i, b in enumerate(data):
        check(b == 0x0a or 0x20 <= b < 0x7f, f"{where}: byte 0x{b:02x} at {i} reached the terminal:\n{data!r}")


def case_bad_input():
    paths, reps = reports_in(main_dir())
    with tempfile.TemporaryDirectory() as d:
        rdir = os.path.join(d, "reports")
        os.makedirs(os.path.join(rdir, "machine-b"))
        shutil.copy(paths[0], os.path.join(rdir, "good.json"))
        shutil.copy(paths[1], os.path.join(rdir, "machine-b", "good.json"))
        with open(os.path.join(rdir, "not-a-report.json"), "w") as f:
            f.write('{"hello": [1, 2, 3]}')
        with open(paths[2], "rb") as f:
            text = f.read()
        with open(os.path.join(rdir, "truncated.json"), "wb") as f:
            f.write(text[: len(text) // 3])
        open(os.path.join(rdir, "empty.json"), "w").close()
        with open(os.path.join(rdir, "notes.txt"), "w") as f:
            f.write("not a report, and not named like one: not read\n")
        os.mkfifo(os.path.join(rdir, "fifo.json"))  # must not block the reader
        empty = os.path.join(d, "empty-dir")
        os.makedirs(empty)
        missing = os.path.join(d, "missing.json")
        args = [rdir, empty, missing]

        p = hwtest.hw("stats", *args, timeout=30)
        check(p.returncode == 0, f"stats with some bad input: exit {p.returncode}\n{p.stderr}")
        for name, why in (("not-a-report.json", "not a hangwatch report"), ("truncated.json", "not valid JSON"),
                          ("empty.json", "empty, not a report"), ("fifo.json", "not a regular file"),
                          ("empty-dir", "no report files (*.json) in this directory"),
                          ("missing.json", "cannot open: No such file or directory")):
            check(re.search(rf"^hangwatch: \S*{re.escape(name)}: {re.escape(why)}", p.stderr, re.M),
                  f"no message naming {name} ({why}):\n{p.stderr}")
        check("notes.txt" not in p.stderr, p.stderr)
        check(p.stdout.startswith("2 hangs in 2 groups, from 2 reports; 6 files or paths could not be read"),
              p.stdout)
        check(len(table_rows(p.stdout)) == 2, p.stdout)
        p = hwtest.hw("stats", "--json", *args, timeout=30)
        out = json.loads(p.stdout)
        check(p.returncode == 0 and out["reports"] == 2 and out["unreadable"] == 6, str(out))

        package = speedscope()
        for fmt in ("speedscope", "chrome-trace"):
            out_path = os.path.join(d, f"out-{fmt}.json")
            p = hwtest.hw("export", "--format", fmt, "-o", out_path, *args, timeout=30)
            check(p.returncode == 0 and "truncated.json: not valid JSON" in p.stderr, f"{fmt}: {p.stderr}")
            with open(out_path) as f:
                doc = json.load(f)
            if fmt == "speedscope":
                speedscope_app.validate(package, doc, out_path)
                check(len(doc["profiles"][0]["samples"]) == 2, "two hangs exported")

        # Nothing but bad input: exit 1, nothing written.
        for args in ([empty], [os.path.join(rdir, "truncated.json"), os.path.join(rdir, "not-a-report.json")]):
            p = hwtest.hw("stats", *args)
            check(p.returncode == 1 and "no report could be read" in p.stderr, f"stats {args}: {p.stderr}")
            out_path = os.path.join(d, "nothing.json")
            p = hwtest.hw("export", "--format", "speedscope", "-o", out_path, *args)
            check(p.returncode == 1 and "nothing exported" in p.stderr, f"export {args}: {p.stderr}")
            check(not os.path.exists(out_path), "export wrote a file from nothing")

        # Foreign text from a report is escaped in the table, kept (as
        # valid JSON) in --json and the exports.
        from test_cli import hostile_report
        hostile = os.path.join(d, "hostile")
        os.makedirs(hostile)
        with open(os.path.join(hostile, "h.json"), "w") as f:
            json.dump(hostile_report(), f)
        p = subprocess.run([hwtest.binary("hangwatch"), "stats", hostile], capture_output=True, timeout=30)
        check(p.returncode == 0, f"exit {p.returncode}: {p.stderr!r}")
        no_control_bytes("stats stdout", p.stdout)
        no_control_bytes("stats stderr", p.stderr)
        check(b"sym\\x1b]0;owned" in p.stdout and b"proc\\x1b]0;owned" in p.stdout, p.stdout)
        p = hwtest.hw("stats", "--json", hostile)
        check(p.returncode == 0 and json.loads(p.stdout)["groups"][0]["culprit"]["function"].startswith("sym\x1b"),
              p.stdout)
        for fmt in ("speedscope", "chrome-trace"):
            out_path = os.path.join(d, f"hostile-{fmt}.json")
            p = hwtest.hw("export", "--format", fmt, "-o", out_path, hostile)
            check(p.returncode == 0, f"{fmt}: exit {p.returncode} {p.stderr}")
            with open(out_path) as f:
                doc = json.load(f)
            if fmt == "speedscope":
                speedscope_app.validate(package, doc, out_path)


def expect_usage_error(args, needle):
    p = hwtest.hw(*args)
    check(p.returncode == 2, f"hangwatch {' '.join(args)}: exit {p.returncode}, expected 2\n{p.stderr}")
    check(needle in p.stderr, f"hangwatch {' '.join(args)}: message lacks {needle!r}:\n{p.stderr}")


def case_usage():
    expect_usage_error(["stats"], "stats needs reports or directories")
    expect_usage_error(["stats", "--frobnicate", "x"], "unknown option for stats: '--frobnicate'")
    expect_usage_error(["export", "-o", "x.json", "d"], "export needs --format")
    expect_usage_error(["export", "--format", "svg", "-o", "x.json", "d"], "unknown --format")
    expect_usage_error(["export", "--format", "speedscope", "d"], "export needs -o FILE")
    expect_usage_error(["export", "--format", "speedscope", "-o", "x.json"], "export needs reports or directories")
    expect_usage_error(["export", "--format"], "option needs a value: '--format'")
    with tempfile.TemporaryDirectory() as d:
        link = os.path.join(d, "link.json")
        os.symlink(os.path.join(d, "elsewhere.json"), link)
        expect_usage_error(["export", "--format", "chrome-trace", "-o", link, main_dir()], "symbolic link")
        check(not os.path.exists(os.path.join(d, "elsewhere.json")), "wrote through a symlink")
        # - is standard output
        p = hwtest.hw("export", "--format=chrome-trace", "-o", "-", main_dir())
        check(p.returncode == 0 and json.loads(p.stdout)["traceEvents"], p.stderr)
    p = hwtest.hw("--help")
    check(p.returncode == 0 and "hangwatch stats [--json] REPORT.json|DIR..." in p.stdout
          and "hangwatch export --format speedscope|chrome-trace -o FILE REPORT.json|DIR..." in p.stdout, p.stdout)
    p = hwtest.hw("stats", "--help")
    check(p.returncode == 0 and p.stdout.startswith("usage: hangwatch stats") and "--json" in p.stdout, p.stdout)
    p = hwtest.hw("export", "--help")
    check(p.returncode == 0 and p.stdout.startswith("usage: hangwatch export") and "chrome-trace" in p.stdout
          and "speedscope" in p.stdout and "docs/decisions.md" in p.stdout, p.stdout)


if __name__ == "__main__":
    hwtest.main({
        "collect": case_collect,
        "stats_three_hangs": case_stats_three_hangs,
        "stats_json_matches_reports": case_stats_json_matches_reports,
        "stats_across_builds": case_stats_across_builds,
        "export_speedscope": case_export_speedscope,
        "export_chrome_trace": case_export_chrome_trace,
        "bad_input": case_bad_input,
        "usage": case_usage,
    })
