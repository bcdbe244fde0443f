"""test_compare - the comparison detectors through the C library, on the
scenarios of `make compare` where the seeds say they differ (compare/run.py
runs them; every report is validated against the schema).

    test_compare.py BIN_DIR SOURCE_DIR CASE BUILD_DIR
"""
import os
import shutil
import sys
import tempfile

import hwtest
from hwtest import check, frames, symbols

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "compare"))
import run as compare  # noqa: E402  compare/run.py


def run_scenario(scenario, detector):
    work = tempfile.mkdtemp(prefix="hw-compare-")
    try:
        row = compare.run_one(BUILD_DIR, scenario, detector, work, timeout=150)
        for path, report in row["report_files"]:
            hwtest.validate(report, path)
        return row, [report for _, report in row["report_files"]]
    finally:
        shutil.rmtree(work, ignore_errors=True)


def case_queued_tasks():
    """30 queued 100 ms tasks: the ping, queued behind them, times out (the false stall
    seeds/002 describes), blaming whichever task runs; the runloop detector, which sees
    each task as its own stretch, reports nothing."""
    row, reports = run_scenario("queue30", "ping")
    check(row["pings_posted"] >= 2, f"pings were posted through the program's post function: {row}")
    check(len(reports) == 1, f"the ping's false stall: {row}")
    check(reports[0]["hangwatch"]["detector"] == "ping", "detector field")
    check("queued_task_100ms" in symbols(frames(reports[0])), f"blames a queued task: {row['first_stack']}")
    row, reports = run_scenario("queue30", "runloop-exact")
    check(reports == [], f"no task was a hang: {row}")


def case_late_ping():
    """800 ms of work and then 1.7 s more: the ping posted 800 ms in is answered 1.7 s
    later, within its threshold, so it misses the 2.5 s stall that the runloop detector
    reports at 2 s with the culprit on the stack."""
    row, reports = run_scenario("late_ping", "ping")
    check(row["pings_posted"] >= 3 and reports == [], f"the late ping sees nothing: {row}")
    row, reports = run_scenario("late_ping", "runloop-exact")
    check(len(reports) == 1, f"one report: {row}")
    check(reports[0]["hangwatch"]["hang_type"] == "hang", "a library loop's first stretch is no launch")
    check("culprit_then_1700ms" in symbols(frames(reports[0])), f"the culprit: {row['first_stack']}")
    check(1.95 <= row["latency_s"] <= 2.3, f"detected {row['latency_s']} s after the stall began")


def case_frame_gap():
    """The loop's own frame tick (hangwatch_loop_frame on a timerfd): a 3 s spin is found
    when the late tick runs, after the spin, with the tick's stack and a gap of ~3 s: at most
    200 ms more, and what the loop thread waited for a CPU (beside two CPU hogs the spin's end
    and the tick after it waited for one: a gap 3.21 s long)."""
    row, reports = run_scenario("spin3", "frame-gap")
    check(len(reports) == 1, f"one report: {row}")
    h = reports[0]["hangwatch"]
    check(h["detector"] == "frame_gap" and h["check_mode"] == "on_arrival", "detector fields")
    longest = 3_200_000 + round(row["runqueue_wait_s"] * 1e6)
    check(3_000_000 <= h["block_duration_us"] <= longest,
          f"gap {h['block_duration_us']} us (the loop thread waited {row['runqueue_wait_s']:.3f} s for a CPU "
          "in the whole run)")
    check(row["latency_s"] >= 3.0, f"found {row['latency_s']} s after the spin began, before it ended")
    check("culprit_spin_3s" not in symbols(frames(reports[0])), f"the culprit is gone: {row['first_stack']}")


if __name__ == "__main__":
    BUILD_DIR = sys.argv.pop()
    hwtest.main({
        "queued_tasks": case_queued_tasks,
        "late_ping": case_late_ping,
        "frame_gap": case_frame_gap,
    })
