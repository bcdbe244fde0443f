"""test_report_dir - the report directory is checked before anything runs.

An unusable --report-dir (a regular file, a dangling symlink, a directory
others can write to) makes hangwatch exit 2 with the reason, and the program
is never started: each case runs `touch MARKER` as the program and checks
MARKER does not exist.  Reports another user planted do not count toward
--daily-limit, and a full disk costs the reports, not the program.  The
cases that need another user's files or a mount run as root only and exit
77 (skipped) otherwise.
"""
import errno
import glob
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile

import hwtest
from hwtest import check

NOBODY_UID = 65534
SKIP = 77

# A hang that ends quickly: 1.5 s of CPU in a timer callback, 0.5 s threshold.
QUICK_HANG = ["--threshold", "500ms", "--check-period", "250ms"]


def skip(why):
    print(f"skip: {why}")
    sys.exit(SKIP)


def expect_refused_before_start(report_dir, needles):
    """`hangwatch run --report-dir report_dir -- touch MARKER` exits 2, says why, and never runs touch."""
    with tempfile.TemporaryDirectory() as d:
        marker = os.path.join(d, "program-ran")
        p = hwtest.hw("run", "--report-dir", report_dir, "--", "touch", marker)
        check(p.returncode == 2, f"exit {p.returncode}, expected 2\n{p.stderr}")
        check(f"hangwatch: cannot use report directory '{report_dir}'" in p.stderr, p.stderr)
        for needle in needles:
            check(needle in p.stderr, f"the reason lacks {needle!r}:\n{p.stderr}")
        check(not os.path.exists(marker), "the program ran although the report directory is unusable")
        check(p.stderr.count("\n") == 1, f"one line expected:\n{p.stderr}")


def case_regular_file():
    expect_refused_before_start("/etc/passwd", ["regular file"])
    # attach (started by the C library) checks it just as early: it exits
    # instead of watching the process.
    try:
        p = hwtest.hw("attach", "--pid", str(os.getpid()), "--socket", "@hw-test-report-dir", "--report-dir", "/etc/passwd",
               timeout=20)
    except subprocess.TimeoutExpired:
        hwtest.fail("hangwatch attach went on watching with an unusable report directory")
    check(p.returncode == 2 and "cannot use report directory '/etc/passwd'" in p.stderr,
          f"attach: exit {p.returncode}\n{p.stderr}")


def case_dangling_symlink():
    with tempfile.TemporaryDirectory() as d:
        target = os.path.join(d, "missing", "reports")
        link = os.path.join(d, "reports")
        os.symlink(target, link)
        expect_refused_before_start(link, ["symbolic link"])
        check(not os.path.exists(target), "hangwatch created the directory the link points to")


def case_open_directory():
    with tempfile.TemporaryDirectory() as d:
        shared = os.path.join(d, "shared")
        os.mkdir(shared)
        os.chmod(shared, 0o777)
        expect_refused_before_start(shared, ["chmod go-w", "writable by other users"])
        check(os.listdir(shared) == [], f"something was written into the refused directory: {os.listdir(shared)}")
        # A shared directory such as /tmp is never to be changed: the advice
        # is a directory of the user's own in it.
        os.chmod(shared, 0o1777)
        expect_refused_before_start(shared, ["shared with other users", "hangwatch-reports"])
        r = hwtest.hw("run", "--report-dir", shared, "--", "true")
        check(r.returncode == 2 and "chmod" not in r.stderr, r.stderr)


def own_reports(report_dir):
    return sorted(p for p in glob.glob(os.path.join(report_dir, "hang-*.json"))
                  if os.lstat(p).st_uid == os.geteuid())


def case_planted_reports_not_counted():
    """Another user's hang-*.json files do not use up --daily-limit."""
    if os.geteuid() != 0:
        skip("planting another user's file needs root")
    report_dir = tempfile.mkdtemp(prefix="hw-it-")
    try:
        planted = os.path.join(report_dir, "hang-20260101T000000Z-1-1.json")
        with open(planted, "w") as f:
            f.write('{"planted": true}\n')
        os.chown(planted, NOBODY_UID, NOBODY_UID)
        p = hwtest.hw("run", "--report-dir", report_dir, "--daily-limit", "1", *QUICK_HANG, "--",
               hwtest.binary("loop-scenarios"), "cpuspin", "1.5")
        check(p.returncode == 0, f"exit {p.returncode}\n{p.stderr}")
        check("daily limit" not in p.stderr and "not written" not in p.stderr,
              f"the planted file counted toward the limit:\n{p.stderr}")
        mine = own_reports(report_dir)
        check(len(mine) == 1, f"expected one report of our own, got {mine}\n{p.stderr}")
        hwtest.load_report(mine[0])
        with open(planted) as f:
            check(f.read() == '{"planted": true}\n', "the planted file was changed")
        check(os.lstat(planted).st_uid == NOBODY_UID, "the planted file changed owner")
    finally:
        shutil.rmtree(report_dir, ignore_errors=True)


def fill(directory):
    """Write zeros into `directory` until its file system is full."""
    chunk = b"\0" * 4096
    fd = os.open(os.path.join(directory, "filler"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        while True:
            os.write(fd, chunk)
    except OSError as e:
        check(e.errno == errno.ENOSPC, f"filling the tmpfs: {e}")
    finally:
        os.close(fd)


def case_full_disk():
    """With the disk full the program runs on and its exit status is hangwatch's; stderr says why no report."""
    if os.geteuid() != 0:
        skip("mounting a small tmpfs needs root")
    base = tempfile.mkdtemp(prefix="hw-it-")
    mount_point = os.path.join(base, "full")
    os.mkdir(mount_point, 0o700)
    m = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", mount_point],
                       capture_output=True, text=True)
    if m.returncode != 0:
        os.rmdir(mount_point)
        os.rmdir(base)
        skip(f"cannot mount a tmpfs: {m.stderr.strip()}")
    try:
        fill(mount_point)
        # A hang whose stack moves from A to B to C and back: four reports
        # that the full disk cannot take.
        p = hwtest.hw("run", "--report-dir", mount_point, "--threshold", "300ms", "--check-period", "250ms", "--", "sh",
               "-c", f"{hwtest.binary('loop-scenarios')} abca 0.6 && exit 7")
        check(p.returncode == 7, f"exit {p.returncode}, expected the program's 7\n{p.stderr}")
        check("abca done" in p.stdout, f"the program did not finish its work\n{p.stdout}\n{p.stderr}")
        check(p.stderr.count("hangwatch: hang in") >= 2, f"the hang's reports were not announced\n{p.stderr}")
        check(p.stderr.count("No space left") == 2,
              f"the full disk must be said once, and once in the count at the end:\n{p.stderr}")
        counted = re.search(r"(\d+) hang reports? could not be written", p.stderr)
        check(counted and int(counted.group(1)) >= 2, f"the failures were not counted:\n{p.stderr}")
        check(sorted(os.listdir(mount_point)) == ["filler"],
              f"a report or a temporary file was left: {os.listdir(mount_point)}")
    finally:
        u = subprocess.run(["umount", mount_point], capture_output=True, text=True)
        if u.returncode != 0:
            subprocess.run(["umount", "-l", mount_point], capture_output=True, text=True)
        shutil.rmtree(base, ignore_errors=True)


def another_users_places(d):
    """In `d` (made 0755): a directory of ours, `victim` (0700); `their_link`, another user's symlink to it;
    and `theirs`, another user's directory.  Their paths, in that order."""
    os.chmod(d, 0o755)
    target = os.path.join(d, "victim")
    os.mkdir(target, 0o700)
    link = os.path.join(d, "their_link")
    os.symlink(target, link)
    os.lchown(link, NOBODY_UID, NOBODY_UID)
    theirs = os.path.join(d, "theirs")
    os.mkdir(theirs, 0o755)
    os.chown(theirs, NOBODY_UID, NOBODY_UID)
    return target, link, theirs


def case_other_users_path():
    """Every component of the path is checked: another user's symlink or
    directory on the way, or a directory anyone may write to, is refused
    naming it; nothing is made beyond it.  A link of our own is followed."""
    if os.geteuid() != 0:
        skip("needs root to give files to another user")
    with tempfile.TemporaryDirectory() as d:
        target, link, theirs = another_users_places(d)
        expect_refused_before_start(link + "/x", [f"{link} is a symbolic link of uid {NOBODY_UID}"])
        check(not os.path.exists(os.path.join(target, "x")), "hangwatch made a directory through their link")
        expect_refused_before_start(theirs + "/reports", [f"{theirs} is owned by uid {NOBODY_UID}"])
        check(not os.path.exists(os.path.join(theirs, "reports")), "hangwatch made a directory in theirs")
        open_dir = os.path.join(d, "open")
        os.mkdir(open_dir)
        os.chmod(open_dir, 0o777)
        expect_refused_before_start(open_dir + "/a/reports", [f"{open_dir} is writable by other users"])
        # Sticky and world-writable (as /tmp) is fine below it when the next
        # component is ours; a link of ours is followed.
        os.chmod(open_dir, 0o1777)
        ours = os.path.join(d, "our_link")
        os.symlink(open_dir, ours)
        p = hwtest.hw("run", "--report-dir", ours + "/a/reports", "--", "true")
        check(p.returncode == 0, f"exit {p.returncode}: {p.stderr}")
        check(os.path.isdir(os.path.join(open_dir, "a", "reports")), "the directory was not made")


def case_output_files():
    """Every other file hangwatch writes (`html -o`, `export -o`, `stack --json`, `run --metrics-file`) is
    reached as the report directory is: through another user's symlink or directory: exit 2 naming it, nothing
    written there; through a link of our own, written, mode 0600 (the metrics 0644, for node_exporter)."""
    if os.geteuid() != 0:
        skip("needs root to give files to another user")
    with tempfile.TemporaryDirectory() as d:
        target, link, theirs = another_users_places(d)
        ours = os.path.join(d, "our_link")
        os.symlink(target, ours)
        reports = os.path.join(os.environ["HW_STATS_DIR"], "hangwatch-reports")  # test_stats' fixture
        commands = {
            "html": lambda where: ["html", "-o", where + "/page.html", reports],
            "export": lambda where: ["export", "--format", "speedscope", "-o", where + "/export.json", reports],
            "stack": lambda where: ["stack", "--json", where + "/stack.json", str(os.getpid())],
            "metrics": lambda where: ["run", "--report-dir", os.path.join(d, "r"), "--metrics-file",
                                      where + "/m.prom", "--", "true"],
        }
        for name, args in commands.items():
            p = hwtest.hw(*args(link))
            check(p.returncode == 2 and f"{link} is a symbolic link of uid {NOBODY_UID}" in p.stderr,
                  f"{name} through their link: exit {p.returncode}: {p.stderr}")
            p = hwtest.hw(*args(theirs))
            check(p.returncode == 2 and f"owned by uid {NOBODY_UID}" in p.stderr,
                  f"{name} into their directory: exit {p.returncode}: {p.stderr}")
        check(os.listdir(target) == [] and os.listdir(theirs) == [], f"written: {os.listdir(target)} "
              f"{os.listdir(theirs)}")
        for name, args in commands.items():
            p = hwtest.hw(*args(ours))
            check(p.returncode == 0, f"{name} through our own link: exit {p.returncode}: {p.stderr}")
        modes = {n: stat.S_IMODE(os.stat(os.path.join(target, n)).st_mode) for n in os.listdir(target)}
        check(modes == {"page.html": 0o600, "export.json": 0o600, "stack.json": 0o600, "m.prom": 0o644}, modes)


if __name__ == "__main__":
    hwtest.main({
        "other_users_path": case_other_users_path,
        "output_files": case_output_files,
        "regular_file": case_regular_file,
        "dangling_symlink": case_dangling_symlink,
        "open_directory": case_open_directory,
        "planted_reports_not_counted": case_planted_reports_not_counted,
        "full_disk": case_full_disk,
    })
