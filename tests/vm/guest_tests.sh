#!/bin/sh
# guest_tests.sh - the /init of the kernel observer's virtual machine
# (tests/vm/kernel_observer_vm.py builds it into an initramfs with busybox,
# hangwatch, bpftool and the test loops, and boots Debian's stock kernel on
# it).  It runs the kernel observer's tests on that kernel, where fentry
# can be had, and prints one line per test on the console:
#
#   VMRESULT NAME pass
#   VMRESULT NAME fail WHAT WENT WRONG
#
# then powers the machine off.  Waiting is polling with a deadline.
. /guest_common.sh # mounts, PATH, poll
# bpftool prog show then has each program's run count.
echo 1 >/proc/sys/kernel/bpf_stats_enabled
echo "VMINFO kernel $(uname -r)"

# Each test adds what went wrong to $problems.
problem() { problems="$problems; $(echo "$*" | tr '\n' ' ')"; }
# verdict NAME [WHAT WAS SEEN]
verdict() {
    name=$1
    shift
    if [ -z "$problems" ]; then echo "VMRESULT $name pass $*"; else echo "VMRESULT $name fail${problems#;}"; fi
}

# begin NAME [LOOP ARGS...]: a test called NAME, its files in d=/tmp/NAME;
# with LOOP ARGS, `kernel-loop LOOP ARGS` started (its pid in $loop, its
# output in $d/out) and waited for until it says ready.
begin() {
    problems=""
    d=/tmp/$1
    shift
    mkdir -p "$d"
    [ $# -gt 0 ] || return 0
    kernel-loop "$@" >"$d/out" &
    loop=$!
    poll "$d/out" ready 30 || problem "the loop did not start"
}

# start_watch DIR PID [OPTIONS...]: hangwatch watch -p PID, its stderr in
# DIR/err, its reports in DIR/r; waits for its "watching pid" line.
start_watch() {
    dir=$1
    pid=$2
    shift 2
    hangwatch watch -p "$pid" --report-dir "$dir/r" "$@" 2>"$dir/err" &
    watcher=$!
    poll "$dir/err" "watching pid $pid" 60 || problem "no 'watching pid' line: $(cat "$dir/err")"
}

# check_one_report DIR CULPRIT: one hang report, naming CULPRIT, kept by the
# fentry attachment, and said on stderr.
check_one_report() {
    count=$(ls "$1"/r/hang-*.json 2>/dev/null | wc -l)
    [ "$count" = 1 ] || problem "$count hang reports, not 1"
    grep -q "\"observer\": *\"kernel_fentry\"" "$1"/r/hang-*.json || problem "the report's observer is not kernel_fentry"
    grep -q "$2" "$1"/r/hang-*.json || problem "the report does not name $2"
    grep "hangwatch: hang in" "$1/err" | grep -q "$2" || problem "no stderr hang line naming $2: $(cat "$1/err")"
}

# A loop watched by default: auto takes fentry, says nothing about a cost
# to every process, attaches no perf event (no system-call tracepoint),
# and catches the hang with its culprit.
test_watch_auto() {
    begin watch_auto hang 300
    start_watch $d $loop
    grep -q "through the kernel observer (fentry)" $d/err || problem "auto did not take fentry: $(cat $d/err)"
    bpftool perf list >$d/perf 2>&1
    bpftool link list >$d/links 2>&1
    [ ! -s $d/perf ] || problem "perf events are attached: $(cat $d/perf)"
    grep -q "trace_fentry" $d/links || problem "no fentry link: $(cat $d/links)"
    grep -q "trace_fexit" $d/links || problem "no fexit link"
    kill -USR1 $loop
    wait $loop
    wait $watcher
    grep -q "pays on each of its system calls" $d/err && problem "auto said the tracepoints' cost: $(cat $d/err)"
    check_one_report $d render_report_synchronously
    grep -q '"window_from": *"wait_return"' $d/r/hang-*.json ||
        problem "the time window is not from the loop wait's return: $(grep -o '"window_from": *"[a-z_]*"' $d/r/hang-*.json)"
    verdict watch_auto "$(grep 'hangwatch: hang in' $d/err)"
}

# A process that is not watched: its wait calls run the trampoline (the
# fentry program's run count grows by them) and nothing else: no thread
# of it enters the observer's table, no report; a watched loop beside it
# stays idle.
test_not_watched() {
    begin not_watched idle 300
    start_watch $d $loop --attach fentry
    before=$(bpftool prog show name fentry_epoll_wait | sed -n 's/.*run_cnt \([0-9]*\).*/\1/p')
    kernel-loop spin 2 >$d/spin &
    spinner=$!
    poll $d/spin ready 30 || problem "the spinner did not start"
    bpftool map dump name threads >$d/threads 2>&1
    wait $spinner
    after=$(bpftool prog show name fentry_epoll_wait | sed -n 's/.*run_cnt \([0-9]*\).*/\1/p')
    turns=$(sed -n 's/done after \([0-9]*\) turns/\1/p' $d/spin)
    [ -n "$before" ] && [ -n "$after" ] && [ -n "$turns" ] || problem "no run counts ($before, $after) or turns ($turns)"
    [ $((after - before)) -ge "${turns:-1}" ] || problem "fentry ran $((after - before)) times for $turns wait calls"
    grep -q "\"key\": $loop," $d/threads || problem "the watched loop is not in the observer's table: $(cat $d/threads)"
    grep -q "\"key\": $spinner," $d/threads && problem "the spinner, not watched, is in the observer's table"
    kill $loop
    wait $watcher
    count=$(ls $d/r/hang-*.json 2>/dev/null | wc -l)
    [ "$count" = 0 ] || problem "$count reports of an idle loop and a process not watched"
    verdict not_watched "the spinner's $turns wait calls ran the fentry program $((after - before)) times; not in the table"
}

# --follow: the child a watched loop forks is watched, its hang reported.
test_follow() {
    begin follow fork 1
    start_watch $d $loop --follow
    kill -USR1 $loop
    poll $d/out child 30 || problem "no child"
    wait $loop
    wait $watcher
    child=$(sed -n 's/^child \([0-9]*\)/\1/p' $d/out)
    check_one_report $d render_report_synchronously
    grep -q "\"pid\": *$child," $d/r/hang-*.json || problem "the report is not of the child $child"
    verdict follow "child $child: $(grep 'hangwatch: hang in' $d/err)"
}

# A loop waiting through syscall(SYS_epoll_wait): the kernel functions see
# it (uprobes in the wait functions cannot).
test_raw_syscall() {
    begin raw_syscall raw 300
    start_watch $d $loop --attach fentry
    kill -USR1 $loop
    wait $loop
    wait $watcher
    check_one_report $d render_report_synchronously
    verdict raw_syscall "$(grep 'hangwatch: hang in' $d/err)"
}

# An idle loop, blocked in epoll_wait when watch attaches under fentry:
# the very next busy stretch is a hang and is caught (the agent restarts
# the wait it found, so that fexit sees its end: no note of an unseen
# end), and so is the next, a socket's own poll in a callback (the wait
# the thread was in is the loop's, primed: that poll is work).
test_first_hang_after_attach() {
    begin first_hang_after_attach
    mkfifo $d/in
    time-scenarios <$d/in >$d/out &
    loop=$!
    exec 3>$d/in
    poll $d/out ready 30 || problem "the program did not start"
    start_watch $d $loop
    grep -q "(fentry)" $d/err || problem "not through fentry: $(cat $d/err)"
    grep -q "note: pid $loop is blocked" $d/err && problem "the wait's end was left unseen: $(cat $d/err)"
    echo "work 2500" >&3
    poll $d/out "did work 2500" 60 || problem "the work did not end"
    poll "$d/r/hang-*.json" compute_invoice 30 || problem "the first busy stretch after attaching was not reported"
    echo "poll 3000" >&3
    poll $d/out "did poll 3000" 60 || problem "the poll did not end"
    poll "$d/r/hang-*.json" wait_for_quote 30 || problem "the callback's socket poll was not reported"
    echo quit >&3
    exec 3>&-
    wait $loop
    wait $watcher
    count=$(ls $d/r/hang-*.json 2>/dev/null | wc -l)
    [ "$count" = 2 ] || problem "$count hang reports, not 2: $(cat $d/err)"
    grep -q '"decided": *"primed"' $d/r/hang-*.json || problem "the loop's wait is not the one it was found in"
    [ "$(grep -c '"window_from": *"wait_return"' $d/r/hang-*.json | grep -c ':[1-9]')" = 2 ] ||
        problem "a time window is not from the loop wait's return: $(grep -o '"window_from": *"[a-z_]*"' $d/r/hang-*.json)"
    verdict first_hang_after_attach "$(grep -c 'hangwatch: hang in' $d/err) hangs: $(grep 'hangwatch: hang in' $d/err | sed 's/.*busy/busy/; s/;.*//' | tr '\n' ' ')"
}

# The same for an asyncio loop (Debian's Python, the coverage matrix's
# program): idle in a 10 s wait (a call_later, as `await asyncio.sleep`)
# when watch attaches; its wait has a timeout, so the agent's stop makes it
# return EINTR once and Python enters it again, through the trampoline.
# Then a time.sleep(3) and a urlopen(timeout=30) against a server that
# answers after 3 s (busybox nc on loopback): each one report, its
# function the culprit (the socket's poll inside urlopen is work).
test_asyncio_first_hang_after_attach() {
    begin asyncio_first_hang_after_attach
    command -v python3 >/dev/null || { problem "no Python in the machine"; verdict asyncio_first_hang_after_attach; return; }
    ip link set lo up
    printf '#!/bin/sh\nsleep 3\nprintf "HTTP/1.0 200 OK\\r\\nContent-Length: 2\\r\\n\\r\\nok"\n' >$d/answer
    chmod +x $d/answer
    nc -ll -p 8080 -e $d/answer &
    server=$!
    python3 /loop_cell.py asyncio sleep,http 8080 $d/go 10 3 idle-first >$d/out 2>$d/python-err &
    loop=$!
    poll $d/out ready 120 || problem "the asyncio loop did not start: $(cat $d/python-err)"
    touch $d/go
    poll $d/out idle 60 || problem "the loop did not go idle"
    start_watch $d $loop
    grep -q held $d/out && problem "watch was ready only after the idle wait had ended"
    grep -q "(fentry)" $d/err || problem "not through fentry: $(cat $d/err)"
    poll $d/out done 180 || { problem "the loop did not end: $(cat $d/out) $(tail -n 3 $d/python-err)"; kill $loop; }
    wait $loop
    wait $watcher
    kill $server
    count=$(ls $d/r/hang-*.json 2>/dev/null | wc -l)
    [ "$count" = 2 ] || problem "$count hang reports, not 2: $(cat $d/err)"
    for culprit in hold_the_loop_with_sleep hold_the_loop_with_http; do
        grep "hangwatch: hang in" $d/err | grep -q $culprit || problem "no hang line naming $culprit: $(cat $d/err)"
    done
    grep -q '"decided": *"primed"' $d/r/hang-*.json || problem "the loop's wait is not the one it was found in"
    verdict asyncio_first_hang_after_attach "$(grep 'hangwatch: hang in' $d/err | sed 's/.*hang in/hang in/; s/;.*//' | tr '\n' ' ')$(grep held $d/out | tr '\n' ' ')"
}

# as_nobody CAPS COMMAND...: COMMAND as user nobody (65534) holding exactly
# the capabilities CAPS (comma-separated, e.g. bpf,perfmon), util-linux's
# setpriv (by its path: busybox's shell would run its own applet).
as_nobody() {
    caps=$(echo "$1" | sed 's/\([a-z_]*\)/+\1/g')
    shift
    /usr/bin/setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps="$caps" --ambient-caps="$caps" "$@"
}

# Not root: with CAP_BPF, CAP_PERFMON and CAP_SYS_PTRACE alone, watch takes
# fentry and catches the hang; with one of them dropped it exits 2 naming
# it.
test_least_privilege() {
    begin least_privilege hang 300
    chown 65534:65534 $d
    for drop in bpf perfmon sys_ptrace; do
        caps=$(echo bpf,perfmon,sys_ptrace | sed "s/$drop//; s/,,/,/; s/^,//; s/,\$//")
        as_nobody "$caps" hangwatch watch --report-dir $d/r-$drop -p $loop 2>$d/err-$drop
        status=$?
        named=$(echo "CAP_$drop" | tr a-z A-Z)
        echo "VMINFO least_privilege without $drop: exit $status: $(cat $d/err-$drop)"
        [ $drop = sys_ptrace ] || named="lacks $named"
        [ $status = 2 ] && grep -q "$named" $d/err-$drop ||
            problem "without $drop: exit $status, not naming $named: $(cat $d/err-$drop)"
    done
    as_nobody bpf,perfmon,sys_ptrace hangwatch watch --report-dir $d/r -p $loop 2>$d/err &
    watcher=$!
    poll $d/err "watching pid $loop" 60 || problem "no 'watching pid' line: $(cat $d/err)"
    grep -q "(fentry)" $d/err || problem "not through fentry: $(cat $d/err)"
    kill -USR1 $loop
    wait $loop
    wait $watcher
    check_one_report $d render_report_synchronously
    owner=$(stat -c %u $d/r/hang-*.json 2>/dev/null)
    [ "$owner" = 65534 ] || problem "the report belongs to uid $owner, not nobody"
    verdict least_privilege "as nobody with CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE: $(grep -c 'hangwatch: hang in' $d/err) hang"
}

# Not root, another user's idle loop (root's, blocked in epoll_wait): its
# /proc syscall file is refused to nobody, so whether it waits is read from
# its registers; no report while it idles 3 s, then its work is caught.
test_other_user_idle() {
    begin other_user_idle
    chown 65534:65534 $d
    mkfifo $d/in
    time-scenarios <$d/in >$d/out &
    loop=$!
    exec 3>$d/in
    poll $d/out ready 30 || problem "the program did not start"
    as_nobody bpf,perfmon,sys_ptrace hangwatch watch --report-dir $d/r -p $loop 2>$d/err &
    watcher=$!
    poll $d/err "watching pid $loop" 60 || problem "no 'watching pid' line: $(cat $d/err)"
    sleep 3 # an idle stretch longer than the threshold, looked at below
    count=$(ls $d/r/hang-*.json 2>/dev/null | wc -l)
    [ "$count" = 0 ] || problem "the idle loop was reported ($count): $(cat $d/err)"
    echo "work 2500" >&3
    poll $d/out "did work 2500" 60 || problem "the work did not end"
    # a report late on an emulated guest beside a loaded host is waited for
    # below, and the failure says what the watcher said and reported
    poll "$d/r/hang-*.json" compute_invoice 60 || problem "the work was not reported within 60 s"
    echo quit >&3
    exec 3>&-
    wait $loop
    wait $watcher
    grep -q compute_invoice $d/r/hang-*.json 2>/dev/null ||
        problem "no report names compute_invoice: $(cat $d/err)"
    count=$(ls $d/r/hang-*.json 2>/dev/null | wc -l)
    [ "$count" = 1 ] || problem "$count hang reports, not 1: $(cat $d/err)"
    verdict other_user_idle "$(grep 'hangwatch: hang in' $d/err | sed 's/;.*//')"
}

# A loop in a cgroup v2 limited to 20 % of a CPU (cpu.max "20000 100000")
# doing 0.6 s of work: the hang's time section says throttled, names the
# cgroup and its quota, and takes the pressure figures from the cgroup.
test_cgroup_v2_throttled() {
    begin cgroup_v2_throttled
    cg=/sys/fs/cgroup/app
    mount -t cgroup2 none /sys/fs/cgroup || problem "cgroup2 could not be mounted"
    echo +cpu >/sys/fs/cgroup/cgroup.subtree_control || problem "no cpu controller in cgroup v2"
    mkdir -p $cg && echo "20000 100000" >$cg/cpu.max || problem "no cpu.max"
    mkfifo $d/in
    # the program enters the cgroup before it starts; its commands come
    # through the fifo, held open on descriptor 3
    sh -c "echo \$\$ >$cg/cgroup.procs && exec time-scenarios" <$d/in >$d/out &
    loop=$!
    exec 3>$d/in
    poll $d/out ready 30 || problem "the program did not start"
    start_watch $d $loop
    echo "work 1" >&3
    poll $d/out "did work 1\$" 30 || problem "the loop did not turn"
    echo "work 600" >&3
    poll $d/out "did work 600" 60 || problem "the work did not end"
    poll "$d/r/hang-*.json" final_duration_us 30 || problem "no final update of the hang"
    echo quit >&3
    exec 3>&-
    wait $loop
    wait $watcher
    r=$(ls $d/r/hang-*.json 2>/dev/null | head -n 1)
    [ -n "$r" ] || problem "no hang report: $(cat $d/err); the program said: $(cat $d/out); cpu.stat: $(cat $cg/cpu.stat)"
    grep -q '"cause": *"throttled"' "$r" ||
        problem "the cause is not throttled: $(grep -o '"\(cause\|window_from\|throttled_[a-z]*\|runqueue_wait_us\|on_cpu_us\)": *"*[a-z0-9_ ]*"*' "$r" | tr '\n' ' ')"
    grep -q '"path": *"/sys/fs/cgroup/app"' "$r" || problem "the cgroup is not named"
    grep -q '"version": *2' "$r" || problem "not cgroup v2"
    grep -q '"quota_us": *20000' "$r" || problem "the quota is not 20000 us"
    if [ -e /proc/pressure/cpu ]; then
        grep -q '"of": *"cgroup"' "$r" || problem "the pressure figures are not the cgroup's"
    fi
    grep "hangwatch: hang in" $d/err | grep -q "throttled by cgroup /sys/fs/cgroup/app" ||
        problem "the stderr line does not name the cgroup: $(grep 'hangwatch: hang in' $d/err)"
    verdict cgroup_v2_throttled "$(grep -o '"throttled_us": *[0-9]*' "$r" | head -n 1) of $(grep -o '"window_us": *[0-9]*' "$r" | head -n 1)"
}

# HW_VM_TESTS (from the kernel's command line): the tests to run,
# comma-separated (kernel_observer_vm.py's list, or the ones asked for).
for t in $(echo "$HW_VM_TESTS" | tr , ' '); do
    "test_$t"
done
echo "VMDONE"
sync
reboot -f
