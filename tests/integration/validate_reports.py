"""validate_reports - check every *.json report in a directory against the
report schema (and hwtest's cross-field rules).  Usage: SCHEMA DIR."""
import glob
import os
import sys

import hwtest

if len(sys.argv) != 3:
    print("usage: validate_reports.py SCHEMA DIR", file=sys.stderr)
    sys.exit(2)
schema, directory = sys.argv[1], sys.argv[2]
hwtest.setup(None, os.path.dirname(os.path.dirname(os.path.abspath(schema))))
paths = sorted(glob.glob(os.path.join(directory, "*.json")))
if not paths:
    print(f"no reports in {directory}", file=sys.stderr)
    sys.exit(1)
try:
    for p in paths:
        hwtest.load_report(p)
except AssertionError as e:
    print(f"FAIL: {e}", file=sys.stderr)
    sys.exit(1)
print(f"{len(paths)} report(s) valid")
