#!/bin/sh
# fetch-express.sh - express, from the npm registry, for the tests of
# JavaScript frames in a real web server (tests/integration/test_js_frames.py).
#
#   scripts/fetch-express.sh CACHE_DIR
#
# Installs the versions tests/programs/express/package-lock.json pins (with
# their integrity hashes; `npm ci --ignore-scripts`, so no package's script
# runs) into CACHE_DIR/express-app (the build tree: make clean removes it)
# and prints the path of its node_modules.  An installed copy there is used
# as it is; installs run one at a time (flock on CACHE_DIR/.express.lock).
# Exits 1 saying what is missing when it cannot.
set -eu

cache=${1:-}
if [ -z "$cache" ]; then
    echo "usage: $0 CACHE_DIR" >&2
    exit 2
fi
here=$(cd "$(dirname "$0")/.." && pwd)
lock="$here/tests/programs/express/package-lock.json"
dest="$cache/express-app"
if [ -f "$dest/node_modules/express/package.json" ] && cmp -s "$lock" "$dest/package-lock.json"; then
    echo "$dest/node_modules"
    exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
    echo "fetch-express: npm is not installed, so express cannot be installed" \
        "(scripts/ensure-deps.sh test installs it)" >&2
    exit 1
fi
mkdir -p "$cache"
# One install at a time (the tests that need it run in parallel): the
# others wait here, then find the copy it made.
exec 9>"$cache/.express.lock"
flock 9
if [ -f "$dest/node_modules/express/package.json" ] && cmp -s "$lock" "$dest/package-lock.json"; then
    echo "$dest/node_modules"
    exit 0
fi
tmp=$(mktemp -d "$cache/.express.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cp "$here/tests/programs/express/package.json" "$lock" "$tmp/"
if ! (cd "$tmp" && timeout 300 npm ci --ignore-scripts --no-audit --no-fund --silent) >"$tmp/npm.log" 2>&1; then
    echo "fetch-express: 'npm ci' of tests/programs/express failed (is the npm registry reachable?):" >&2
    cat "$tmp/npm.log" >&2
    exit 1
fi
# Under the lock no other install writes here; what is there is stale.
rm -rf "$dest"
mv "$tmp" "$dest"
trap - EXIT
if ! [ -f "$dest/node_modules/express/package.json" ]; then
    echo "fetch-express: could not put express in $dest" >&2
    exit 1
fi
echo "$dest/node_modules"
