#!/usr/bin/python3
"""pythons - finds the Python interpreters the tests run, one per version
the project supports, so that every test looks for them the same way and
a missing one is skipped (exit 77) rather than passed.

The versions are 3.8 to 3.13, each from pyenv ($PYENV_ROOT, `pyenv root`,
~/.pyenv; versions/3.X.N/bin/python3.X, the newest N), and "debian", the
system's /usr/bin/python3 (Debian 12's 3.11).  Standard library only; runs
under /usr/bin/python3.

  pythons.py path VERSION   print the interpreter's path, or exit 77 with
                            "Python VERSION: not on this machine"
  pythons.py list           every version and its interpreter, or "-"
  pythons.py versions       the versions, one a line (CMake makes a test
                            of each)

As a module: VERSIONS, find(version), require(version), label(version);
find() also takes a version the project does not read (3.7), for the
tests of what such a version says.
"""
import os
import re
import subprocess
import sys

VERSIONS = ("3.8", "3.9", "3.10", "3.11", "3.12", "3.13", "debian")
DEBIAN = "/usr/bin/python3"
SKIP = 77  # CTest's SKIP_RETURN_CODE in this project


def label(version):
    """How a message names the version: "Python 3.9", "Debian's python3"."""
    return "Debian's python3 (%s)" % DEBIAN if version == "debian" else "Python " + version


def pyenv_roots():
    """Where pyenv may keep its versions, each once, in order of preference."""
    roots = []
    if os.environ.get("PYENV_ROOT"):
        roots.append(os.environ["PYENV_ROOT"])
    try:
        out = subprocess.run(["pyenv", "root"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             universal_newlines=True, timeout=10)
        if out.returncode == 0 and out.stdout.strip():
            roots.append(out.stdout.strip())
    except (OSError, subprocess.SubprocessError):
        pass
    roots.append(os.path.expanduser("~/.pyenv"))
    unique = []
    for root in roots:
        real = os.path.realpath(root)
        if real not in unique and os.path.isdir(os.path.join(real, "versions")):
            unique.append(real)
    return unique


def executable(path):
    return os.path.isfile(path) and os.access(path, os.X_OK)


def find(version):
    """The interpreter of `version` (one of VERSIONS, or another 3.X such as
    3.7, which tests use to check what an unsupported version says), or
    None."""
    if version not in VERSIONS and not re.match(r"^3\.\d+$", version):
        raise ValueError("unknown Python version %r (known: %s, or 3.X)" % (version, ", ".join(VERSIONS)))
    if version == "debian":
        return DEBIAN if executable(DEBIAN) else None
    release = re.compile(r"^%s\.(\d+)$" % re.escape(version))  # 3.13.0, not 3.13.0t or 3.13-dev
    for root in pyenv_roots():
        versions = os.path.join(root, "versions")
        found = []
        for name in os.listdir(versions):
            m = release.match(name)
            python = os.path.join(versions, name, "bin", "python" + version)
            if m and executable(python):
                found.append((int(m.group(1)), python))
        if found:
            return max(found)[1]
    return None


def require(version):
    """The interpreter of `version`, or exit 77 saying it is missing."""
    path = find(version)
    if path is None:
        print("%s: not on this machine" % label(version), file=sys.stderr)
        sys.exit(SKIP)
    return path


def main(argv):
    if len(argv) == 3 and argv[1] == "path" and argv[2] in VERSIONS:
        print(require(argv[2]))
        return 0
    if len(argv) == 2 and argv[1] == "versions":
        print("\n".join(VERSIONS))
        return 0
    if len(argv) == 2 and argv[1] == "list":
        for version in VERSIONS:
            print("%-7s %s" % (version, find(version) or "-"))
        return 0
    print("usage: pythons.py path {%s} | list | versions" % ",".join(VERSIONS), file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
