#!/bin/sh
# ensure-deps.sh - make sure the Debian packages hangwatch builds and tests
# with are installed.  As root it installs what is missing (apt-get);
# otherwise it prints the exact command to run and fails.
#
#   scripts/ensure-deps.sh [build|test|fuzz|bench|compare|soak]
#
# clang's sanitizer and libFuzzer runtimes (libclang_rt.asan, .fuzzer, ...)
# are in libclang-rt-14-dev, which clang only recommends: it is listed
# explicitly for the purposes that build with them.
#
# The tests of `hangwatch export` load its files into speedscope's web app
# in Debian's headless Chromium; speedscope itself comes from the npm
# registry (scripts/fetch-speedscope.sh, cached in the build tree), fetched
# with the machine's npm: Debian's npm package is added only where no npm
# is installed (a Node.js that ships its own npm must not be replaced).
#
# The kernel observer's fentry attachment is tested on Debian's stock kernel
# booted under QEMU (tests/vm/): qemu-system-x86, with busybox-static and
# cpio for its initramfs; the kernel package itself is fetched by the test
# (apt-get download), never installed.
#
# The loop-library coverage matrix (tests/integration/test_coverage.py) runs
# real loop libraries: Debian's python3-uvloop, -tornado, -twisted, -gevent
# and -gi for /usr/bin/python3, and libevent and libuv from C.
#
# The build needs no Python headers (CPython's offsets are committed,
# src/agent/symbols/python_layouts.h); libpython3.11-dev is for the test
# that checks the 3.11 table against Debian's own headers
# (python_layout_debian_3_11).
set -eu

purpose=${1:-build}
packages="cmake make gcc clang pkg-config libc6-dev libdw-dev libelf-dev libjansson-dev libcmocka-dev libiberty-dev libglib2.0-dev libbpf-dev bpftool liburing-dev libcapstone-dev"
# Exports beyond the machine (docs/metrics.md): libmicrohttpd serves /metrics,
# libcurl sends Sentry events; the tests run Prometheus and parse envelopes
# with the Sentry SDK.
packages="$packages libmicrohttpd-dev libcurl4-openssl-dev"
# As a systemd service (deploy/hangwatch.service): sd_notify's READY and watchdog.
packages="$packages libsystemd-dev"
export_test_packages="prometheus python3-sentry-sdk"
case "$purpose" in
build) ;;
test) packages="$packages $export_test_packages clang libclang-rt-14-dev python3 libpython3.11-dev python3-jsonschema python3-aiohttp python3-uvloop python3-tornado python3-twisted python3-gevent libevent-dev libuv1-dev redis-server redis-tools python3-gi gir1.2-gtk-3.0 xvfb xdotool systemd nodejs nginx-light libnginx-mod-http-echo strace gdb chromium qemu-system-x86 busybox-static cpio"
    command -v npm >/dev/null 2>&1 || packages="$packages npm" ;;
fuzz) packages="$packages clang libclang-rt-14-dev" ;;
bench) packages="$packages clang valgrind python3 python3-jsonschema nodejs redis-server redis-tools qemu-system-x86 busybox-static cpio" ;;
compare) packages="$packages python3 python3-jsonschema" ;;
# make soak: bench/soak.py, its Sentry receiver parsing envelopes with the SDK.
soak) packages="$packages python3 python3-sentry-sdk" ;;
*) echo "usage: $0 [build|test|fuzz|bench|compare|soak]" >&2; exit 2 ;;
esac

missing=""
for p in $packages; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" = 0 ]; then
    echo "hangwatch: installing missing packages:$missing" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $missing >&2
else
    echo "hangwatch: missing Debian packages:$missing" >&2
    echo "install them with:  sudo apt-get install -y$missing" >&2
    exit 1
fi
