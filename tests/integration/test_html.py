"""test_html - `hangwatch html`: the page opened in headless Chromium, as a
person would open it.

The reports are test_stats' fixture (`collect`): a program with three
different hangs, one of them twice, run under `hangwatch run
--early-sampling` with the default settings.  Each case writes a page and
opens it from its file in an offline browser (browser.py: the DevTools
protocol over a pipe), which must draw it with no console message, no
error and no request but the file itself:

  three_hangs   the acceptance: 3 groups, the repeated one with count 2,
                each with its culprit; the table agrees with `stats --json`
                and sorts; each group's stack marks its culprit; the flame
                graph of the spinning hang has that function as the widest
                frame under the loop's callback, the Point Stack outlined,
                hovering shows function, file:line, samples and share; one
                timeline with the four hangs in time order; a screenshot is
                kept (HW_ARTIFACT_DIR/html-report.png)
  hostile       names carrying markup, script ends, comment openers,
                quotes, U+2028/2029 and control bytes are shown as text and
                run nothing; the data block holds no '<'
  bad_input     bad files are named and skipped, the rest drawn; nothing
                but bad input (or no hang) exits 1 and writes nothing
  bounds        hundreds of groups, a huge stack, many threads and a huge
                set of samples: the page stays bounded, says what it left
                out and still draws
  usage         usage errors exit 2; -o - writes to standard output;
                never through a symbolic link; --help

HW_STATS_DIR names the fixture's directory, HW_ARTIFACT_DIR where the
screenshots are kept (both in the build tree).
"""
import copy
import glob
import json
import os
import re
import shutil
import stat
import tempfile

import browser
import hwtest
from hwtest import check


def fixture_dir():
    d = os.environ.get("HW_STATS_DIR")
    check(d, "HW_STATS_DIR is not set (tests/CMakeLists.txt sets it)")
    return d


def main_dir():
    return os.path.join(fixture_dir(), "hangwatch-reports")


def artifact(name):
    d = os.environ.get("HW_ARTIFACT_DIR")
    check(d, "HW_ARTIFACT_DIR is not set (tests/CMakeLists.txt sets it)")
    os.makedirs(d, exist_ok=True)
    return os.path.join(d, name)


def hw(*args, cwd=None, timeout=120, text=True):
    return hwtest.hw(*args, cwd=cwd, timeout=timeout, text=text)


def reports_in(d):
    paths = sorted(glob.glob(os.path.join(d, "*.json")))
    return paths, [hwtest.load_report(p) for p in paths]


DATA = re.compile(r'<script type="application/json" id="hw-data">(.*?)</script>', re.S)


def page_data(path):
    """The page's embedded data, as the page's script reads it."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    m = DATA.search(text)
    check(m is not None, f"{path} has no data element")
    check("<" not in m.group(1) and ">" not in m.group(1) and "&" not in m.group(1),
          "the data element holds '<', '>' or '&'")
    check(all(ord(c) < 128 for c in m.group(1)), "the data element holds more than ASCII")
    return json.loads(m.group(1)), text


def static_checks(text):
    """What the file itself (apart from its data) must not hold: anything
    that loads from elsewhere or makes markup from text."""
    text = DATA.sub('<script type="application/json" id="hw-data"></script>', text)
    check(text.startswith("<!DOCTYPE html>"), "not an HTML document")
    check(text.count("<script") == 2 and text.count("</script>") == 2, "not exactly the page's two scripts")
    for bad in ("<link", "<img", "<iframe", "src=", "href=", "@import", "url(", "fetch(", "XMLHttpRequest",
                "innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        check(bad not in text, f"the page holds {bad!r}")
    check(re.search(r"Content-Security-Policy\" content=\"default-src 'none'; script-src 'nonce-[A-Za-z0-9+/]{24}'; "
                    r"style-src 'nonce-[A-Za-z0-9+/]{24}';", text), "the page has no strict Content-Security-Policy")
    urls = set(re.findall(r"https?://[^\s\"')]+", text))
    check(urls <= {"http://www.w3.org/2000/svg"}, f"the page names URLs: {urls}")


def open_page(b, path):
    """Open the page from its file; nothing but it may be requested, nothing may be said."""
    url = "file://" + os.path.abspath(path)
    b.open(url)
    check(b.messages() == [], "the page logged something:\n" + "\n".join(b.messages()))
    check(b.requests() == [url], f"the page made requests besides its file: {b.requests()}")


def rendered(b):
    """The page as drawn: table rows, group sections, flame graph nodes and timeline bars."""
    return b.evaluate(r"""(() => {
      const box = e => { const r = e.getBoundingClientRect(); return [r.x, r.y, r.width, r.height]; };
      return {
        rows: [...document.querySelectorAll('#groups tbody tr')].map(tr => [...tr.cells].map(td => td.textContent)),
        sections: [...document.querySelectorAll('section.group')].map(sec => ({
          id: sec.id,
          title: sec.querySelector('h2').textContent,
          stack: [...sec.querySelector('ol.stack').children].map(li => li.textContent),
          culprit: [...sec.querySelectorAll('ol.stack')[0].querySelectorAll('li.culprit')].map(li => li.textContent),
          threads: (sec.querySelector('ul.threads') || sec.querySelector('details:last-of-type p') || {}).textContent,
          text: sec.textContent,
          flame: [...sec.querySelectorAll('svg.flame g.fg-node')].map(g => ({
            node: Number(g.dataset.node), depth: Number(g.dataset.depth), count: Number(g.dataset.count),
            point: g.classList.contains('fg-point'), label: g.textContent, box: box(g.querySelector('rect'))})),
        })),
        lanes: [...document.querySelectorAll('svg.timeline')].map(svg => [...svg.querySelectorAll('g.bar')].map(g => ({
          group: Number(g.dataset.group), box: box(g.querySelector('rect')),
          detect: box(g.querySelector('line.detect'))}))),
        text: document.body.textContent,
      };
    })()""")


def seconds(cell):
    m = re.fullmatch(r"([0-9.]+) (s|ms|\u00b5s)", cell.strip())
    check(m is not None, f"not a duration: {cell!r}")
    return float(m.group(1)) / {"s": 1, "ms": 1e3, "\u00b5s": 1e6}[m.group(2)]


def case_three_hangs():
    out = os.path.join(fixture_dir(), "hangs.html")
    if os.path.exists(out):
        os.unlink(out)
    p = hw("html", "-o", "hangs.html", "hangwatch-reports", cwd=fixture_dir())
    check(p.returncode == 0, f"exit {p.returncode}\n{p.stderr}")
    check(p.stderr == "", f"html said something on stderr:\n{p.stderr}")
    check(stat.S_IMODE(os.stat(out).st_mode) == 0o600, "the page is not mode 0600")
    data, text = page_data(out)
    static_checks(text)
    check(os.path.getsize(out) < 400_000, f"the page is {os.path.getsize(out)} bytes")

    # The same groups and figures as `hangwatch stats --json`.
    p = hw("stats", "--json", "hangwatch-reports", cwd=fixture_dir())
    stats = json.loads(p.stdout)
    check(data["reports"] == stats["reports"] == 4 and data["hangs"] == 4 and data["group_count"] == 3,
          f"counts: {data['reports']} reports, {data['hangs']} hangs, {data['group_count']} groups")
    for g, s in zip(data["groups"], stats["groups"]):
        check((g["key"], g["count"], g["total_us"], g["median_us"], g["worst_us"], g["first_ms"], g["last_ms"],
               g["processes"], g["culprit"]["name"], g["culprit"]["line"]) ==
              (s["grouping_key"], s["count"], s["total_us"], s["median_us"], s["worst_us"], s["first_seen_unix_ms"],
               s["last_seen_unix_ms"], s["processes"], s["culprit"]["function"], s["culprit"]["line"]),
              f"group differs from stats:\n{g}\n{s}")
    _, reps = reports_in(main_dir())

    with browser.Browser() as b:
        open_page(b, out)
        b.screenshot(artifact("html-report.png"))
        r = rendered(b)

        # The table: 3 groups by total time, the repeated one with count 2,
        # each with its culprit and its place.
        rows = r["rows"]
        check(len(rows) == 3, f"{len(rows)} rows: {rows}")
        check([row[1] for row in rows] == ["2", "1", "1"], f"counts: {[row[1] for row in rows]}")
        culprits = [row[8].split(" ")[0] for row in rows]
        check(culprits == ["hang_in_x", "hang_in_z", "hang_in_y"], f"culprits: {culprits}")
        for row, s in zip(rows, stats["groups"]):
            check(re.search(r"loop_scenarios\.c:\d+$", row[8]), f"culprit's place: {row[8]}")
            for cell, us in zip(row[2:5], (s["total_us"], s["median_us"], s["worst_us"])):
                check(abs(seconds(cell) - us / 1e6) <= 0.0006, f"{cell} is not {us} us")
            check(row[7] == "loop-scenarios", f"processes: {row[7]}")
            check(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", row[5]), f"first seen: {row[5]}")

        # Sortable: by count (largest first, then smallest), by culprit.
        def order(column_title):
            b.evaluate(f"[...document.querySelectorAll('#groups th button')].find(x => x.textContent === "
                       f"{json.dumps(column_title)}).click()")
            return [row[8].split(" ")[0] for row in rendered(b)["rows"]]
        check(order("Culprit") == ["hang_in_x", "hang_in_y", "hang_in_z"], "sorting by culprit")
        check(order("Culprit") == ["hang_in_z", "hang_in_y", "hang_in_x"], "sorting by culprit, reversed")
        check(order("Count")[0] == "hang_in_x", "sorting by count: the repeated hang first")
        check(order("Count")[2] == "hang_in_x", "sorting by count, reversed: the repeated hang last")
        check(b.evaluate("document.querySelector('#groups th[aria-sort]').textContent") == "Count",
              "the sorted column is not marked")

        # Each group: its stack with the culprit marked at its file:line.
        sections = r["sections"]
        check([s["title"] for s in sections] == ["#1 hang_in_x", "#2 hang_in_z", "#3 hang_in_y"],
              f"sections: {[s['title'] for s in sections]}")
        for sec, name in zip(sections, ("hang_in_x", "hang_in_z", "hang_in_y")):
            check(len(sec["culprit"]) == 1 and name in sec["culprit"][0] and "loop_scenarios.c:" in sec["culprit"][0],
                  f"{name}: culprit in the stack: {sec['culprit']}")
            check(any("on_hang_tick" in line and "loop_scenarios.c:" in line for line in sec["stack"]),
                  f"{name}: stack {sec['stack']}")
            check("Other threads of the newest report (0)" in sec["text"] and "no other thread" in sec["text"],
                  f"{name}: the other threads are not listed")

        # Flame graphs of the samples: every sample of the group's reports.
        by_name = {}
        for g, sec in zip(data["groups"], sections):
            fl = g["detail"]["flame"]
            name = g["culprit"]["name"]
            mine = [rep for rep in reps if rep["hangwatch"]["grouping_key"] == g["key"]]
            total = sum(rep["hangwatch"]["collection"]["main_thread"]["sample_count"] for rep in mine)
            check(fl["samples"] == total and fl["reports"] == len(mine) and fl["cut"] == 0,
                  f"{name}: {fl['samples']} samples of {fl['reports']} reports, expected {total} of {len(mine)}")
            check(len(sec["flame"]) == len(fl["nodes"]), f"{name}: {len(sec['flame'])} nodes drawn of {len(fl['nodes'])}")
            by_name[name] = (fl, sec["flame"])
        check("the samples of 2 reports" in sections[0]["text"], "x's flame graph does not say it holds 2 reports")

        # The spinning hang: the widest frame under the loop's callback
        # (on_hang_tick) is the spinning function, nearly as wide as it.
        fl, drawn = by_name["hang_in_y"]
        names = [fl["frames"][n[1]]["name"] if n[1] >= 0 else None for n in fl["nodes"]]
        drawn_by_node = {d["node"]: d for d in drawn}
        tick = names.index("on_hang_tick")
        children = [k for k, n in enumerate(fl["nodes"]) if n[0] == tick]
        widest = max(children, key=lambda k: drawn_by_node[k]["box"][2])
        check(names[widest] == "hang_in_y", f"the widest frame under on_hang_tick is {names[widest]}")
        tick_box, y_box = drawn_by_node[tick]["box"], drawn_by_node[widest]["box"]
        check(y_box[2] >= 0.9 * tick_box[2] and y_box[1] > tick_box[1], f"hang_in_y {y_box} under on_hang_tick {tick_box}")
        check(drawn_by_node[widest]["label"] == "hang_in_y", f"its label: {drawn_by_node[widest]['label']!r}")
        # Following the widest frame from the top ends in the spin.
        path, k = [], 0
        while True:
            kids = [c for c, n in enumerate(fl["nodes"]) if n[0] == k]
            if not kids:
                break
            k = max(kids, key=lambda c: fl["nodes"][c][2])
            if fl["nodes"][k][2] < 0.5 * fl["nodes"][0][2]:
                break
            path.append(names[k])
        check(path[-1] == "hang_in_y" or path[-2:-1] == ["hang_in_y"], f"the widest path: {path}")
        # The Point Stack is outlined, down to the spin.
        check(drawn_by_node[widest]["point"] and drawn_by_node[tick]["point"] and drawn_by_node[0]["point"],
              "the Point Stack is not outlined")
        # Hovering a frame: function, file:line, samples and share.
        x, y = b.evaluate(f"(() => {{ const g = document.querySelector('#g-3 g.fg-node[data-node=\"{widest}\"]'); "
                          "g.scrollIntoView({block: 'center'}); const r = g.querySelector('rect').getBoundingClientRect(); "
                          "return [r.x + r.width / 2, r.y + r.height / 2]; })()")
        b.hover(x, y)
        tip = b.evaluate("document.getElementById('tooltip').textContent").split("\n")
        samples = fl["nodes"][widest][2]
        pct = f"{100 * samples / fl['nodes'][0][2]:.1f} %"
        check(tip[0] == "hang_in_y" and re.search(r"loop_scenarios\.c:\d+", tip[1])
              and tip[2] == f"{samples} sample{'s' if samples != 1 else ''} ({pct})", f"tooltip: {tip}")
        check(b.evaluate("getComputedStyle(document.getElementById('tooltip')).display") == "block",
              "the tooltip is not shown")
        # Clicking a frame zooms to it (it then spans the graph), clicking it
        # again zooms out.
        zoom = ("(() => { const svg = document.querySelector('#g-3 svg.flame'); "
                "const g = [...svg.querySelectorAll('g.fg-node')].filter(g => g.dataset.depth > 0)"
                ".sort((a, b) => a.getBBox().width - b.getBBox().width)[0]; const n = g.dataset.node; "
                "g.querySelector('rect').dispatchEvent(new MouseEvent('click', {bubbles: true})); "
                "const w = () => document.querySelector('#g-3 g.fg-node[data-node=\"' + n + '\"] rect')"
                ".getBoundingClientRect().width; const full = document.querySelector('#g-3 svg.flame')"
                ".getBoundingClientRect().width; const zoomed = w(); "
                "document.querySelector('#g-3 g.fg-node[data-node=\"' + n + '\"] rect')"
                ".dispatchEvent(new MouseEvent('click', {bubbles: true})); return [zoomed, full, w()]; })()")
        zoomed, full, after = b.evaluate(zoom)
        check(zoomed >= full - 2 and after <= zoomed, f"zoom: {zoomed} of {full}, then {after}")
        # A sleeping hang: every sample in the sleep under its function.
        fl, drawn = by_name["hang_in_z"]
        names = [fl["frames"][n[1]]["name"] if n[1] >= 0 else None for n in fl["nodes"]]
        z = names.index("hang_in_z")
        check(fl["nodes"][z][2] == fl["nodes"][0][2], f"not every sample of z is in hang_in_z: {fl['nodes'][z]}")

        # The timeline: one process, its four hangs in time order, each
        # bar from start to end with its detection inside.
        lanes = r["lanes"]
        check(len(lanes) == 1 and len(lanes[0]) == 4, f"timeline: {lanes}")
        bars = lanes[0]
        check([bar["group"] for bar in bars] == [1, 3, 2, 1], f"bars' groups: {[bar['group'] for bar in bars]}")
        for a, c in zip(bars, bars[1:]):
            check(a["box"][0] + a["box"][2] <= c["box"][0] + 2, f"bars overlap: {a} {c}")
        for bar in bars:
            bx, dx = bar["box"], bar["detect"][0]
            check(bx[0] < dx < bx[0] + bx[2], f"detection outside its bar: {bar}")
        widths = [bar["box"][2] for bar in bars]
        # x slept UNIT, y spun 1.2 UNIT, z slept 1.6 UNIT
        check(widths[1] > widths[0] and widths[2] > widths[1], f"bar widths: {widths}")


# ---- hostile names ------------------------------------------------------------

HOSTILE = [
    '</script><img src=x onerror="window.__hw_owned=1">',
    '<!--<script>window.__hw_owned=2</script>',
    '"\'><svg onload=window.__hw_owned=3>',
    '& &amp; &lt; \u2028 \u2029 </style><style>*{display:none}</style>',
    '\x1b]0;owned\x07 \\xff \U0001F600',
]


def hostile_reports():
    """Reports whose every name is hostile: one per hostile string."""
    from test_cli import hostile_report
    out = []
    for i, bad in enumerate(HOSTILE):
        rep = hostile_report()
        rep["report"]["process_name"] = "proc" + bad
        rep["report"]["pid"] = 4200 + i
        apm = rep["hangwatch"]
        apm.update({"grouping_key": f"key{i}" + bad, "detected_at_unix_ms": 1796000000000 + i * 1000,
                    "block_duration_us": 2000000, "final_duration_us": 2500000, "hang_end": "end" + bad})
        apm["hung_thread"]["thread_identifier"] = 4200 + i
        threads = rep["crash"]["threads"]
        threads[0].update({"name": "hung" + bad, "thread_identifier": 4200 + i})
        threads[1]["name"] = "other" + bad
        frame = {"instruction_addr": 4096, "symbol_name": f"fn{i}" + bad, "symbol_addr": 4080,
                 "object_name": "obj" + bad, "object_addr": 0, "object_offset": 4096,
                 "source_file": "file" + bad + ".c", "source_line": 7}
        threads[0]["backtrace"]["contents"] = [frame, dict(frame, symbol_name="caller" + bad, source_line=9)]
        items = apm["collection"]["scene_threads"]["items"]
        items[0]["thread_identifier"] = 4200 + i
        items[1].update({"status": "denied" + bad, "error": "error" + bad})
        apm["collection"]["main_thread"] = {
            "state": "collected", "reason": "early_sampling", "sample_count": 5, "sample_interval_us": 50000,
            "backtrace": {"skipped": 0, "contents": [dict(frame, repeat_count=4)]},
            "samples": {"frames": [frame, dict(frame, symbol_name="caller" + bad, source_line=9)],
                        "stacks": [{"count": 4, "frames": [0, 1], "point_stack": True},
                                   {"count": 1, "frames": [1]},
                                   {"count": 7, "frames": [99]},
                                   {"count": "x", "frames": [0]}],
                        "left_out": 0}}
        out.append(rep)
    return out


def case_hostile():
    with tempfile.TemporaryDirectory() as d:
        rdir = os.path.join(d, "reports")
        os.makedirs(rdir)
        for i, rep in enumerate(hostile_reports()):
            with open(os.path.join(rdir, f"h{i}.json"), "w") as f:
                json.dump(rep, f)
        # raw bytes that are not UTF-8 make a file that is not JSON: named, skipped
        with open(os.path.join(rdir, "latin1.json"), "wb") as f:
            f.write(json.dumps(hostile_reports()[0]).replace("proc", "pr\\u00f6c", 1).encode()
                    .replace(b"pr\\u00f6c", b"pr\xf6c", 1))
        out = os.path.join(d, "hostile.html")
        p = hw("html", "-o", out, rdir, text=False)
        check(p.returncode == 0, f"exit {p.returncode}\n{p.stderr!r}")
        check(b"latin1.json: not valid JSON" in p.stderr, f"the non-UTF-8 file is not named: {p.stderr!r}")
        data, text = page_data(out)
        static_checks(text)
        check(data["hangs"] == len(HOSTILE) and data["unreadable"] == 1, f"{data['hangs']} hangs")
        for bad in HOSTILE:
            check(bad not in text, f"{bad!r} is in the file as it is")
        # the stacks with a frame that is not there or no count are dropped
        fl = data["groups"][0]["detail"]["flame"]
        check(fl["samples"] == 5 and fl["left_out"] == 7, f"samples {fl['samples']}, left out {fl['left_out']}")

        with browser.Browser() as b:
            open_page(b, out)
            check(b.evaluate("window.__hw_owned === undefined"), "a name ran as script")
            check(b.evaluate("document.querySelectorAll('img, iframe, object, embed, style:not(head style)').length") == 0,
                  "a name became an element")
            check(b.evaluate("document.querySelectorAll('script').length") == 2, "a name became a script")
            check(b.evaluate("document.querySelectorAll('svg').length") ==
                  b.evaluate("document.querySelectorAll('svg.flame, svg.timeline').length"), "a name became an svg")
            r = rendered(b)
            check(len(r["rows"]) == len(HOSTILE), f"{len(r['rows'])} rows")
            body = r["text"]
            for i, bad in enumerate(HOSTILE):
                for name in (f"fn{i}" + bad, "proc" + bad, f"key{i}" + bad, "hung" + bad, "other" + bad,
                             "file" + bad + ".c:7", "caller" + bad):
                    check(name in body, f"{name!r} is not shown as text")
            check(b.evaluate("getComputedStyle(document.getElementById('app')).display") != "none",
                  "a name's style applied")
            # the hover shows the name as text too
            box = b.evaluate("(() => { const g = [...document.querySelectorAll('svg.flame g.fg-node')]"
                             ".find(g => g.dataset.depth === '2'); g.scrollIntoView(); "
                             "const r = g.querySelector('rect').getBoundingClientRect(); "
                             "return [r.x + r.width / 2, r.y + r.height / 2]; })()")
            b.hover(box[0], box[1])
            tip = b.evaluate("document.getElementById('tooltip').textContent")
            check(any(tip.startswith(f"fn{i}" + bad) for i, bad in enumerate(HOSTILE)), f"tooltip: {tip!r}")
            check(b.messages() == [], "the page logged something:\n" + "\n".join(b.messages()))


# ---- bad input ----------------------------------------------------------------

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
        os.mkfifo(os.path.join(rdir, "fifo.json"))
        empty = os.path.join(d, "empty-dir")
        os.makedirs(empty)
        missing = os.path.join(d, "missing.json")
        out = os.path.join(d, "page.html")
        p = hw("html", "-o", out, rdir, empty, missing, timeout=60)
        check(p.returncode == 0, f"some bad input: exit {p.returncode}\n{p.stderr}")
        for name, why in (("not-a-report.json", "not a hangwatch report"), ("truncated.json", "not valid JSON"),
                          ("empty.json", "empty, not a report"), ("fifo.json", "not a regular file"),
                          ("empty-dir", "no report files (*.json) in this directory"),
                          ("missing.json", "cannot open: No such file or directory")):
            check(re.search(rf"^hangwatch: \S*{re.escape(name)}: {re.escape(why)}", p.stderr, re.M),
                  f"no message naming {name} ({why}):\n{p.stderr}")
        data, text = page_data(out)
        check(data["reports"] == 2 and data["unreadable"] == 6 and data["hangs"] == 2, str(data)[:300])
        with browser.Browser() as b:
            open_page(b, out)
            r = rendered(b)
            check(len(r["rows"]) == data["group_count"] and len(r["sections"]) == data["group_count"], str(r["rows"]))
            check("6 files or paths could not be read" in r["text"], "the page does not say what could not be read")

        # Nothing but bad input, or no hang: exit 1, nothing written.
        stutter = os.path.join(d, "stutter")
        os.makedirs(stutter)
        rep = copy.deepcopy(reps[0])
        rep["hangwatch"]["hang_type"] = "stutter"
        with open(os.path.join(stutter, "s.json"), "w") as f:
            json.dump(rep, f)
        for args, said in (([empty], "no report could be read"),
                           ([os.path.join(rdir, "truncated.json"), os.path.join(rdir, "not-a-report.json")],
                            "no report could be read"),
                           ([stutter], "the reports hold no hang")):
            nothing = os.path.join(d, "nothing.html")
            p = hw("html", "-o", nothing, *args)
            check(p.returncode == 1 and said in p.stderr and "no page written" in p.stderr, f"html {args}: {p.stderr}")
            check(not os.path.exists(nothing), "html wrote a page from nothing")


# ---- bounds ---------------------------------------------------------------------

def case_bounds():
    """Many groups, a huge stack, many threads, a huge set of samples: the
    page is bounded, says what it left out, and draws."""
    paths, reps = reports_in(main_dir())
    base = [r for r in reps if r["hangwatch"]["collection"]["main_thread"].get("samples")][0]
    with tempfile.TemporaryDirectory() as d:
        rdir = os.path.join(d, "reports")
        os.makedirs(rdir)
        groups = 105
        for i in range(groups):
            rep = copy.deepcopy(base)
            apm = rep["hangwatch"]
            apm["grouping_key"] = f"{i:016x}"
            apm["final_duration_us"] = 3_000_000 + (groups - i) * 1000  # the first ones are shown in detail
            apm["detected_at_unix_ms"] += i * 5000
            rep["report"]["pid"] = 1000 + i % 3
            if i == 0:  # a huge stack and many threads
                stack = rep["crash"]["threads"][0]["backtrace"]["contents"]
                rep["crash"]["threads"][0]["backtrace"]["contents"] = (stack * (3000 // len(stack) + 1))[:3000]
                other = {"index": 1, "name": "worker", "thread_identifier": 1, "crashed": False,
                         "current_thread": False, "backtrace": {"skipped": 0, "contents": stack * 10}}
                rep["crash"]["threads"] += [dict(other, thread_identifier=5000 + t, name=f"worker-{t}")
                                            for t in range(300)]
            if i == 1:  # samples: 400 distinct stacks of 100 frames over 5000 distinct frames
                frame = rep["crash"]["threads"][0]["backtrace"]["contents"][0]
                ms = apm["collection"]["main_thread"]
                frames = [dict(frame, symbol_name=f"f{k}") for k in range(5000)]
                ms["samples"] = {"frames": frames, "left_out": 0,
                                 "stacks": [{"count": 10, "frames": [(s * 7 + j * 13) % 5000 for j in range(100)]}
                                            for s in range(400)]}
                ms["sample_count"] = 4000
            with open(os.path.join(rdir, f"r{i:03}.json"), "w") as f:
                json.dump(rep, f)
        out = os.path.join(d, "page.html")
        p = hw("html", "-o", out, rdir, timeout=300)
        check(p.returncode == 0, f"exit {p.returncode}\n{p.stderr}")
        size = os.path.getsize(out)
        check(size < 1_500_000, f"the page is {size} bytes")
        data, text = page_data(out)
        check(len(data["groups"]) == groups and data["detailed"] == 100, f"{len(data['groups'])} groups")
        check(sum(1 for g in data["groups"] if "detail" in g) == 100, "not 100 groups in detail")
        big = [g for g in data["groups"] if g["key"] == f"{0:016x}"][0]["detail"]
        check(len(big["stack"]) == 256 and big["stack_more"] == 3000 - 256, f"stack {len(big['stack'])}")
        check(len(big["threads"]) == 64 and big["threads_more"] == 300 - 64 and
              all(len(t["frames"]) <= 8 for t in big["threads"]), f"threads {len(big['threads'])}")
        sampled = [g for g in data["groups"] if g["key"] == f"{1:016x}"][0]["detail"]["flame"]
        check(len(sampled["nodes"]) <= 4000 and sampled["cut"] > 0 and sampled["samples"] == 4000,
              f"flame: {len(sampled['nodes'])} nodes, {sampled['cut']} cut")
        lanes = data["timeline"]
        check(len(lanes) == 3 and sum(len(l["hangs"]) for l in lanes) == groups, f"{len(lanes)} lanes")
        with browser.Browser() as b:
            open_page(b, out)
            r = rendered(b)
            check(len(r["rows"]) == groups and len(r["sections"]) == 100, f"{len(r['rows'])} rows")
            check("2744 more frames" in r["text"] and "236 more threads" in r["text"]
                  and "stacks cut short" in r["text"], "the page does not say what it left out")


# ---- usage ----------------------------------------------------------------------

def expect_usage_error(args, needle):
    p = hw(*args)
    check(p.returncode == 2, f"hangwatch {' '.join(args)}: exit {p.returncode}, expected 2\n{p.stderr}")
    check(needle in p.stderr, f"hangwatch {' '.join(args)}: message lacks {needle!r}:\n{p.stderr}")


MACHINERY = ("_start", "__libc_start_main", "Py_BytesMain", "Py_RunMain", "_PyEval_EvalFrameDefault")


def case_python_flame():
    """An early-sampled Python spin: one merged stack per sample (Python frames in place of the
    interpreter frames that run them, no _start above a Python frame), the culprit marked, and
    "only your code" leaving the user's frames alone."""
    r = hwtest.run(["--early-sampling", "--", "/usr/bin/python3",
                    os.path.join(hwtest.SOURCE_DIR, "tests", "programs", "python_frames.py"), "spin"])
    try:
        check(r.returncode == 0 and "spin done" in r.stdout, r.describe())
        hangs = [p for p, rep in zip(r.report_paths, r.reports) if rep["hangwatch"]["hang_type"] == "hang"]
        check(hangs, "no hang report\n" + r.describe())
        samples = hwtest.load_report(hangs[0])["hangwatch"]["collection"]["main_thread"]["samples"]
        # in the report each sample's Python frames sit above the evaluation call that runs them
        for st in samples["stacks"]:
            names = [(samples["frames"][i].get("language", "native"), samples["frames"][i].get("symbol_name"))
                     for i in st["frames"]]
            start = [k for k, (lang, name) in enumerate(names) if name == "_start"]
            python = [k for k, (lang, name) in enumerate(names) if lang == "python"]
            check(python, f"a sample without Python frames: {names}")
            check(not start or max(python) < start[0], f"Python frames outward of _start: {names}")
        out = os.path.join(r.report_dir, "spin.html")
        p = hw("html", "-o", out, r.report_dir)
        check(p.returncode == 0, f"exit {p.returncode}\n{p.stderr}")
        data, text = page_data(out)
        static_checks(text)
        fl = [g["detail"]["flame"] for g in data["groups"] if g.get("detail", {}).get("flame")]
        check(len(fl) == 1, f"{len(fl)} flame graphs")
        fl = fl[0]
        check(fl["culprit"] >= 0 and fl["frames"][fl["culprit"]]["name"] == "spin_in_python",
              f"the flame graph's culprit: {fl['culprit']}")
        with browser.Browser() as b:
            open_page(b, out)
            b.screenshot(artifact("html-python-flame.png"))
            drawn = rendered(b)["sections"][0]["flame"]
            by_node = {n["node"]: n for n in drawn}
            names = {n["node"]: fl["frames"][fl["nodes"][n["node"]][1]]["name"] if fl["nodes"][n["node"]][1] >= 0
                     else "" for n in drawn}
            # no interpreter machinery above (callers of) a Python frame
            for k, node in enumerate(fl["nodes"]):
                frame = fl["frames"][node[1]] if node[1] >= 0 else None
                if frame and frame.get("language") == "python":
                    up = node[0]
                    while up > 0:
                        above = fl["frames"][fl["nodes"][up][1]]["name"]
                        check(above not in MACHINERY, f"{above} drawn above Python's {frame['name']}")
                        up = fl["nodes"][up][0]
            check("spin_in_python" in names.values(), f"spin_in_python not drawn: {sorted(set(names.values()))}")
            marked = b.evaluate("[...document.querySelectorAll('svg.flame g.fg-culprit')].map(g => g.textContent)")
            check(marked and all(m.startswith("spin_in") for m in marked), f"culprit marks: {marked}")
            # only your code: every frame drawn is the user's, and the samples are all still there
            b.evaluate("(() => { const c = document.querySelector('input.only-mine'); c.click(); return c.checked; })()")
            mine = rendered(b)["sections"][0]["flame"]
            own = {f["name"] for f in fl["frames"] if f.get("in_app")}
            labels = [n["label"] for n in mine if n["depth"] > 0]
            check(labels and all(any(o.startswith(lab.rstrip("\u2026")) for o in own) for lab in labels),
                  f"only your code drew {labels}, the user's frames being {sorted(own)}")
            check({"spin_in_python", "serve"} <= own, f"the user's frames: {sorted(own)}")
            root = [n for n in mine if n["depth"] == 0]
            check(root and root[0]["count"] == by_node[0]["count"],
                  f"only your code counts {root} samples of {by_node[0]['count']}")
            b.screenshot(artifact("html-python-flame-mine.png"))
    finally:
        hwtest.cleanup(r)


def case_usage():
    expect_usage_error(["html", "d"], "html needs -o FILE")
    expect_usage_error(["html", "-o", "x.html"], "html needs reports or directories")
    expect_usage_error(["html", "-o"], "option needs a value: '-o'")
    expect_usage_error(["html", "-o", "a.html", "-o", "b.html", "d"], "-o is given twice")
    expect_usage_error(["html", "--frobnicate", "-o", "x.html", "d"], "unknown option for html: '--frobnicate'")
    with tempfile.TemporaryDirectory() as d:
        link = os.path.join(d, "link.html")
        os.symlink(os.path.join(d, "elsewhere.html"), link)
        expect_usage_error(["html", "-o", link, main_dir()], "symbolic link")
        check(not os.path.exists(os.path.join(d, "elsewhere.html")), "wrote through a symlink")
        expect_usage_error(["html", "-o", d, main_dir()], "not a regular file")
        p = hw("html", "--output=-", main_dir())
        check(p.returncode == 0 and p.stdout.startswith("<!DOCTYPE html>") and p.stdout.endswith("</html>\n"),
              p.stderr)
        # an existing page is replaced, atomically, and stays private
        page = os.path.join(d, "page.html")
        with open(page, "w") as f:
            f.write("old")
        os.chmod(page, 0o644)
        p = hw("html", "-o", page, main_dir())
        check(p.returncode == 0 and stat.S_IMODE(os.stat(page).st_mode) == 0o600, p.stderr)
        check(open(page).read().startswith("<!DOCTYPE html>"), "the page was not replaced")
        check(sorted(os.listdir(d)) == ["link.html", "page.html"], f"left behind: {os.listdir(d)}")
    p = hw("--help")
    check(p.returncode == 0 and "hangwatch html -o FILE REPORT.json|DIR..." in p.stdout, p.stdout)
    p = hw("html", "--help")
    check(p.returncode == 0 and p.stdout.startswith("usage: hangwatch html -o FILE") and "flame graph" in p.stdout,
          p.stdout)


if __name__ == "__main__":
    hwtest.main({
        "three_hangs": case_three_hangs,
        "hostile": case_hostile,
        "bad_input": case_bad_input,
        "bounds": case_bounds,
        "usage": case_usage,
        "python_flame": case_python_flame,
    })
