#!/bin/sh
# run.sh - fuzz every target of a fuzz build for a while (`make fuzz`).
#
#   fuzz/run.sh BUILD_DIR SECONDS [NAME...]
#
# Each target (BUILD_DIR/bin/fuzz_NAME; all of them when no NAME is given)
# starts from its committed corpus fuzz/corpus/NAME and writes what it finds
# to BUILD_DIR/fuzz/new-corpus/NAME, never to the committed corpus; crash
# files go to BUILD_DIR/fuzz/artifacts/.  With FUZZ_MERGE=1 the new inputs
# that add coverage are then merged into fuzz/corpus/NAME (libFuzzer
# -merge=1), to be reviewed and committed.  Exits 1 if any target crashed.
set -eu

if [ $# -lt 2 ]; then
    echo "usage: $0 BUILD_DIR SECONDS [NAME...]" >&2
    exit 2
fi
build=$1
seconds=$2
shift 2
src=$(cd "$(dirname "$0")" && pwd)

if [ $# -eq 0 ]; then
    for bin in "$build"/bin/fuzz_*; do
        [ -x "$bin" ] && set -- "$@" "${bin##*/fuzz_}"
    done
fi
[ $# -gt 0 ] || { echo "no fuzz targets in $build/bin (configure with -DHANGWATCH_FUZZ=ON)" >&2; exit 2; }

failed=""
for name in "$@"; do
    bin=$build/bin/fuzz_$name
    [ -x "$bin" ] || { echo "no fuzz target $bin" >&2; exit 2; }
    corpus=$src/corpus/$name
    new=$build/fuzz/new-corpus/$name
    artifacts=$build/fuzz/artifacts
    mkdir -p "$corpus" "$new" "$artifacts"
    dict=""
    [ -f "$src/$name.dict" ] && dict="-dict=$src/$name.dict"
    echo "== fuzz_$name for ${seconds}s (new inputs in $new)"
    # shellcheck disable=SC2086
    if ! "$bin" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
        -artifact_prefix="$artifacts/fuzz_$name-" $dict "$new" "$corpus"; then
        failed="$failed $name"
        echo "== fuzz_$name FAILED: crash file in $artifacts (reproduce: $bin FILE)" >&2
        continue
    fi
    if [ "${FUZZ_MERGE:-0}" = 1 ]; then
        echo "== merging new inputs of fuzz_$name into $corpus"
        # shellcheck disable=SC2086
        "$bin" -merge=1 -rss_limit_mb=2048 -timeout=10 $dict "$corpus" "$new"
    fi
done

if [ -n "$failed" ]; then
    echo "fuzz: crashes in:$failed (see docs/fuzzing.md)" >&2
    exit 1
fi
echo "fuzz: no crash in $*"
