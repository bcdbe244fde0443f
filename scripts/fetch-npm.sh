#!/bin/sh
# fetch-npm.sh - a test's npm packages, from the npm registry: those
# tests/programs/NAME/package-lock.json pins (express for the tests of
# JavaScript frames in a real web server, kubernetes-models for the
# DaemonSet's check against Kubernetes' schemas).
#
#   scripts/fetch-npm.sh NAME CACHE_DIR
#
# Installs the versions NAME's package-lock.json pins (with their integrity
# hashes; `npm ci --ignore-scripts`, so no package's script runs) into
# CACHE_DIR/NAME-app (the build tree: make clean removes it) and prints the
# path of its node_modules.  An installed copy there is used as it is;
# installs run one at a time (flock on CACHE_DIR/.NAME.lock: two tests
# fetching at once must not remove the copy the other just put there).
# Exits 1 saying what is missing when it cannot.
set -eu

name=${1:-}
cache=${2:-}
if [ -z "$name" ] || [ -z "$cache" ]; then
    echo "usage: $0 NAME CACHE_DIR" >&2
    exit 2
fi
here=$(cd "$(dirname "$0")/.." && pwd)
source_dir="$here/tests/programs/$name"
lock="$source_dir/package-lock.json"
dest="$cache/$name-app"
if ! [ -f "$lock" ]; then
    echo "fetch-npm: no $lock" >&2
    exit 2
fi
installed() {
    [ -d "$dest/node_modules" ] && cmp -s "$lock" "$dest/package-lock.json"
}
if installed; then
    echo "$dest/node_modules"
    exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
    echo "fetch-npm: npm is not installed, so $name's packages cannot be installed" \
        "(scripts/ensure-deps.sh test installs it)" >&2
    exit 1
fi
mkdir -p "$cache"
# One install at a time: the others wait here, then find the copy it made.
exec 9>"$cache/.$name.lock"
flock 9
if installed; then
    echo "$dest/node_modules"
    exit 0
fi
tmp=$(mktemp -d "$cache/.$name.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cp "$source_dir/package.json" "$lock" "$tmp/"
if ! (cd "$tmp" && timeout 300 npm ci --ignore-scripts --no-audit --no-fund --silent) >"$tmp/npm.log" 2>&1; then
    echo "fetch-npm: 'npm ci' of tests/programs/$name failed (is the npm registry reachable?):" >&2
    cat "$tmp/npm.log" >&2
    exit 1
fi
# Under the lock no other install writes here; what is there is stale.
rm -rf "$dest"
mv "$tmp" "$dest"
trap - EXIT
if ! installed; then
    echo "fetch-npm: could not put $name's packages in $dest" >&2
    exit 1
fi
echo "$dest/node_modules"
