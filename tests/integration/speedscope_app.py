"""speedscope_app - speedscope's own checks on hangwatch's exports.

speedscope comes from the npm registry (scripts/fetch-speedscope.sh, cached
in the build tree): its file format's JSON Schema, and its built web app,
into which a file is loaded in Debian's headless Chromium the way the
speedscope command does it (index.html#localProfilePath=FILE.js, where the
script hands the file to speedscope.loadFileFromBase64).  What the app
logs to its console, and the page it leaves, say which importer took the
file and whether it failed.  Whatever is missing (npm, the registry,
Chromium) fails the test saying so: these checks are never skipped.
"""
import base64
import json
import os
import re
import shutil
import subprocess
import tempfile

import jsonschema

from hwtest import check, fail


def package(source_dir, cache_dir):
    """speedscope's npm package directory, fetched into cache_dir when needed."""
    script = os.path.join(source_dir, "scripts", "fetch-speedscope.sh")
    try:
        p = subprocess.run([script, cache_dir], capture_output=True, text=True, timeout=400)
    except subprocess.TimeoutExpired:
        fail(f"{script} did not finish within 400 s (the npm registry did not answer)")
    if p.returncode != 0:
        fail(f"speedscope could not be had, so the export cannot be checked by speedscope itself:\n{p.stderr}")
    path = p.stdout.strip()
    for name in ("index.html", "file-format-schema.json"):
        check(os.path.isfile(os.path.join(path, "dist", "release", name)), f"speedscope package lacks {name}: {path}")
    return path


def validate(package_dir, document, where):
    """Validate a speedscope file against speedscope's own schema."""
    with open(os.path.join(package_dir, "dist", "release", "file-format-schema.json")) as f:
        schema = json.load(f)
    validator = jsonschema.Draft7Validator(schema)
    errors = sorted(validator.iter_errors(document), key=lambda e: list(e.path))
    if errors:
        fail(f"{where} does not match speedscope's file-format-schema.json:\n" +
             "\n".join(f"  {list(e.path)}: {e.message[:300]}" for e in errors[:10]))


def chromium():
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        fail("chromium is not installed, so speedscope's web app cannot load the export "
             "(scripts/ensure-deps.sh test installs Debian's chromium)")
    return path


class Loaded:
    def __init__(self, title, dom, console):
        self.title = title
        self.dom = dom
        self.console = console

    def describe(self):
        return f"title {self.title!r}\n--- console ---\n" + "\n".join(self.console)


def load(package_dir, export_path, timeout=180):
    """Load export_path into speedscope's app in headless Chromium: the page's
    title and the app's console messages once it settled."""
    name = os.path.basename(export_path)
    with open(export_path, "rb") as f:
        data = base64.b64encode(f.read()).decode()
    with tempfile.TemporaryDirectory(prefix="hw-speedscope-") as d:
        script = os.path.join(d, "profile.js")
        with open(script, "w") as f:
            f.write(f"speedscope.loadFileFromBase64({json.dumps(name)}, {json.dumps(data)})\n")
        index = os.path.join(package_dir, "dist", "release", "index.html")
        url = f"file://{index}#localProfilePath={script}"
        cmd = [chromium(), "--headless", "--no-sandbox", "--enable-unsafe-swiftshader", "--no-first-run",
               f"--user-data-dir={os.path.join(d, 'chromium')}", "--enable-logging=stderr", "--v=0",
               "--virtual-time-budget=10000", "--dump-dom", url]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            fail(f"headless chromium did not finish loading {name} into speedscope within {timeout} s")
    console = [m.group(1) for m in re.finditer(r':CONSOLE[^\]]*\] "(.*)", source:', p.stderr)]
    m = re.search(r"<title>(.*?)</title>", p.stdout, re.S)
    check(m is not None, f"chromium printed no page (exit {p.returncode}):\n{p.stderr[-3000:]}")
    return Loaded(m.group(1), p.stdout, console)


def expect_imported(loaded, importer, title):
    """The app took the file with `importer` and shows it, without an error."""
    check(f"Importing as {importer}" in loaded.console,
          f"speedscope did not import the file as {importer}\n" + loaded.describe())
    for bad in ("Failed to load format", "Unrecognized format", "Tried to end", "still open at end of profile",
                "Something went wrong"):
        check(not any(bad in line for line in loaded.console) and bad not in loaded.dom,
              f"speedscope said '{bad}'\n" + loaded.describe())
    check(any(line.startswith("import: ") for line in loaded.console),
          "speedscope did not finish its import\n" + loaded.describe())
    check(loaded.title == f"{title} - speedscope", f"the page's title is not the profile's\n" + loaded.describe())
