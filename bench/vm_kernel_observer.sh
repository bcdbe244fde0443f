#!/bin/sh
# vm_kernel_observer.sh - the /init of part 8's virtual machine
# (bench/kernel_observer.py, measure_in_vm): part 8's on/off method run on
# Debian's stock kernel, where the fentry attachment can be had, for fentry
# and the tracepoints side by side.  For each attachment and each of
# "watched" (bench-epoll-spin itself is watched), "other" (an idle loop
# beside it is) and "other_getppid" (the same, the spinner calling
# getppid()), it switches `hangwatch watch` on and off PHASES times and
# prints
#
#   WINDOW ATTACH WHAT ON_NS OFF_NS   (the spinner's clock: CLOCK_MONOTONIC,
#                                      which /proc/uptime equals here, as
#                                      nothing is ever suspended)
#   CHUNK ATTACH WHAT NS_PER_CALL END_NS
#
# and powers the machine off.  "on" starts at hangwatch's "watching pid"
# line (attached), "off" when it has exited.
. /guest_common.sh # mounts, PATH, poll
PHASES=${HW_PHASES:-4}
PHASE_S=${HW_PHASE_S:-2}

uptime_ns() { awk '{ printf "%.0f\n", $1 * 1e9 }' /proc/uptime; }

for attach in fentry tracepoint; do
    for what in watched other other_getppid; do
        mode=stamped
        [ $what = other_getppid ] && mode=stamped-getppid
        bench-epoll-spin 400000000 20000 $mode >/tmp/spin &
        spinner=$!
        target=$spinner
        idle=""
        if [ $what != watched ]; then
            kernel-loop idle 600 >/dev/null &
            idle=$!
            target=$idle
        fi
        for phase in $(seq "$PHASES"); do
            sleep "$PHASE_S"
            rm -rf /tmp/r /tmp/err
            hangwatch watch --attach $attach --report-dir /tmp/r -p $target 2>/tmp/err &
            watcher=$!
            poll /tmp/err "watching pid" 60 || echo "VMINFO no watching line: $(cat /tmp/err)"
            on=$(uptime_ns)
            sleep "$PHASE_S"
            kill -INT $watcher
            wait $watcher
            off=$(uptime_ns)
            echo "WINDOW $attach $what $on $off"
        done
        sleep "$PHASE_S"
        kill $spinner
        [ -n "$idle" ] && kill $idle
        wait
        # The kill may cut the spinner's last line: dropped, since the
        # console would join the next WINDOW line to it.
        [ -n "$(tail -c 1 /tmp/spin)" ] && sed -i '$d' /tmp/spin
        sed -n "s/^chunk /CHUNK $attach $what /p" /tmp/spin
    done
done
echo "VMDONE"
sync
reboot -f
