#!/usr/bin/python3
"""html-report-screenshot.py BUILD_DIR OUT.png - the README's picture of
`hangwatch html`, from a real run: tests/programs/loop_scenarios.c's
`threehangs` (three hangs, one of them twice) and `request` (a handler
spinning in three functions) under `hangwatch run --early-sampling`, their
reports made into a page, the top of the page photographed in headless
Chromium (tests/integration/browser.py), and the picture's colours reduced
by pngquant when it is installed (Debian's pngquant)."""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
import browser  # noqa: E402


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    bin_dir, out = os.path.join(os.path.abspath(sys.argv[1]), "bin"), os.path.abspath(sys.argv[2])
    hangwatch, scenarios = os.path.join(bin_dir, "hangwatch"), os.path.join(bin_dir, "loop-scenarios")
    with tempfile.TemporaryDirectory() as d:
        for args in (["threehangs", "2.5"], ["request", "6"]):
            subprocess.run([hangwatch, "run", "--early-sampling", "--", scenarios] + args, cwd=d, check=True)
        page = os.path.join(d, "hangs.html")
        subprocess.run([hangwatch, "html", "-o", page, "hangwatch-reports"], cwd=d, check=True)
        shot = os.path.join(d, "shot.png")
        with browser.Browser(width=1100, height=900) as b:
            b.open("file://" + page)
            if b.messages():
                print("\n".join(b.messages()), file=sys.stderr)
                return 1
            # down to the end of the first group's flame graph
            bottom = b.evaluate("document.querySelector('#g-1 .flame-chart').getBoundingClientRect().bottom "
                                "+ window.scrollY + 14")
            b.screenshot(shot, height=int(bottom))
        pngquant = shutil.which("pngquant")
        if pngquant:
            subprocess.run([pngquant, "--force", "--speed", "1", "--output", out, "64", shot], check=True)
        else:
            shutil.copy(shot, out)
    print(f"{out}: {os.path.getsize(out)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
