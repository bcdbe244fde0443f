#!/bin/sh
# vm_fleet.sh - the /init of part 13's virtual machine (bench/fleet.py,
# measure_in_vm): `hangwatch watch --all --attach fentry` over fleet-loops
# on Debian's stock kernel, where fentry can be had.  HW_FLEET is
# fleet-loops' arguments (PROCS THREADS RATE SECS HANGS HANG_MS).  It prints
#
#   FLEET CPU_TICKS WINDOW_NS HWM_KIB CLK_TCK   the agent's CPU over the steady
#                                              part of the run, its peak memory
#   OUT LINE                                   each line fleet-loops printed
#   REPORT JSON                                each hang report, on one line
#   AGENT LINE                                 what the agent said
#
# and powers the machine off.
. /guest_common.sh # mounts, PATH, poll
# shellcheck disable=SC2086 # the arguments are split on purpose
set -- ${HW_FLEET:-40 4 100 30 5 3000}
secs=$4
steady_from=$((secs / 4))
steady_for=$((secs - steady_from - 4))
[ "$steady_for" -lt 1 ] && steady_for=1

uptime_ns() { awk '{ printf "%.0f\n", $1 * 1e9 }' /proc/uptime; }
cpu_ticks() { awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }

hangwatch watch --all --exe '*/fleet-loops' --attach fentry --daily-limit 0 --report-dir /tmp/r 2>/tmp/err &
agent=$!
poll /tmp/err "watching every process" 120 || echo "VMINFO the agent did not start: $(cat /tmp/err)"
fleet-loops "$@" >/tmp/out &
fleet=$!
sleep "$steady_from"
cpu0=$(cpu_ticks $agent)
t0=$(uptime_ns)
sleep "$steady_for"
cpu1=$(cpu_ticks $agent)
t1=$(uptime_ns)
hwm=$(awk '/^VmHWM:/ { print $2 }' /proc/$agent/status)
wait $fleet
# the last hang's final update
poll "/tmp/r/hang-*.json" final_duration_us 30
sleep 3
kill -INT $agent
wait $agent
echo "FLEET $((cpu1 - cpu0)) $((t1 - t0)) $hwm 100"
sed 's/^/OUT /' /tmp/out
for f in /tmp/r/hang-*.json; do
    [ -e "$f" ] && echo "REPORT $(tr -d '\n' <"$f")"
done
sed 's/^/AGENT /' /tmp/err
echo "VMDONE"
