#!/bin/sh
# fetch-speedscope.sh - speedscope, from the npm registry, for the tests of
# `hangwatch export`: its built web app (dist/release/index.html), which the
# tests load exports into in headless Chromium, and its file format's JSON
# Schema (dist/release/file-format-schema.json), which they validate against.
#
#   scripts/fetch-speedscope.sh CACHE_DIR
#
# Fetches one pinned version with the machine's npm (`npm pack`, nothing is
# installed or run), checks the tarball's SHA-512, unpacks it into
# CACHE_DIR/speedscope-VERSION (the build tree: make clean removes it) and
# prints the path of its package directory.  An unpacked copy already there
# is used as it is; fetches run one at a time (flock on
# CACHE_DIR/.speedscope.lock), since the tests that call this run in
# parallel.  Exits 1 saying what is missing when it cannot.
set -eu

version=1.25.0
sha512=7297fd1d64d97f58a32d7049ae4f3b55eff9e2d9d8c7aae57f48144e1be7de8a24ea1eb784b5d539088c7f8e0f4fe5e8579d3770f7ef7e24f980fe6fa23a7a02

cache=${1:-}
if [ -z "$cache" ]; then
    echo "usage: $0 CACHE_DIR" >&2
    exit 2
fi
dest="$cache/speedscope-$version"
if [ -f "$dest/package/dist/release/index.html" ] && [ -f "$dest/package/dist/release/file-format-schema.json" ]; then
    echo "$dest/package"
    exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
    echo "fetch-speedscope: npm is not installed, so speedscope@$version cannot be fetched" \
        "(scripts/ensure-deps.sh test installs it)" >&2
    exit 1
fi
mkdir -p "$cache"
# One fetch at a time (the tests that need it run in parallel): the others
# wait here, then find the copy it made.
exec 9>"$cache/.speedscope.lock"
flock 9
if [ -f "$dest/package/dist/release/index.html" ] && [ -f "$dest/package/dist/release/file-format-schema.json" ]; then
    echo "$dest/package"
    exit 0
fi
tmp=$(mktemp -d "$cache/.speedscope.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
if ! (cd "$tmp" && timeout 300 npm pack --silent "speedscope@$version") >"$tmp/npm.log" 2>&1; then
    echo "fetch-speedscope: 'npm pack speedscope@$version' failed (is the npm registry reachable?):" >&2
    cat "$tmp/npm.log" >&2
    exit 1
fi
tarball="$tmp/speedscope-$version.tgz"
if ! echo "$sha512  $tarball" | sha512sum -c --quiet - >/dev/null 2>&1; then
    echo "fetch-speedscope: $tarball is not the speedscope@$version this script expects (SHA-512 differs)" >&2
    exit 1
fi
mkdir "$tmp/unpacked"
tar -xzf "$tarball" -C "$tmp/unpacked"
# Under the lock no other fetch writes here; what is there is incomplete.
rm -rf "$dest"
mv "$tmp/unpacked" "$dest"
if ! [ -f "$dest/package/dist/release/index.html" ]; then
    echo "fetch-speedscope: could not put speedscope@$version in $dest" >&2
    exit 1
fi
echo "$dest/package"
