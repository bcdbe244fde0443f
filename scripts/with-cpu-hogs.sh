#!/bin/sh
# with-cpu-hogs.sh N COMMAND... - run COMMAND with N processes spinning on
# the CPU beside it (what a busy machine looks like to hangwatch and to the
# tests: `make test-under-load` runs the whole suite this way), and stop
# them afterwards whatever happens; COMMAND's exit status is the script's.
set -u
if [ $# -lt 2 ]; then
    echo "usage: $0 N COMMAND [ARG...]" >&2
    exit 2
fi
n=$1
shift
case $n in
'' | *[!0-9]*) echo "$0: N must be a number, not '$n'" >&2; exit 2 ;;
esac
hogs=""
i=0
while [ "$i" -lt "$n" ]; do
    sh -c 'while :; do :; done' &
    hogs="$hogs $!"
    i=$((i + 1))
done
stop() { [ -n "$hogs" ] && kill $hogs 2>/dev/null; hogs=""; }
trap 'stop; exit 130' INT TERM
echo "with-cpu-hogs: $n CPU hog(s) running beside: $*" >&2
"$@"
status=$?
stop
exit $status
