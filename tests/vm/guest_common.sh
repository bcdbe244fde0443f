# guest_common.sh - what every /init of hangwatch's virtual machines does
# first (tests/vm/guest_tests.sh, bench/vm_kernel_observer.sh):
# kernel_observer_vm.py puts it in the initramfs as /guest_common.sh and
# the init sources it.  It mounts what the tests read (/proc, /sys, /dev,
# a /tmp in memory, tracefs) and gives poll, the wait with a deadline.
PATH=/bin:/sbin:/usr/bin:/usr/sbin
export PATH
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null

# poll FILES PATTERN SECONDS: until a line of FILES (a path, or a pattern
# of paths such as "$d/r/hang-*.json", expanded at each try) matches
# PATTERN.
poll() {
    tries=$(($3 * 10))
    while [ "$tries" -gt 0 ]; do
        # shellcheck disable=SC2086 # FILES is expanded on purpose
        grep -q "$2" $1 2>/dev/null && return 0
        sleep 0.1
        tries=$((tries - 1))
    done
    return 1
}
