/*
 * kobs_start.h - how a thread starts out when the kernel observer begins
 * to watch it (kernel_observer.c's watch_process): waiting, when it is
 * found blocked in a wait call, else busy from now (or, for watch --all,
 * not a loop until its first wait).
 *
 * The look at the thread and its entry in the observer's map are two
 * steps, and the observer sees only the wait calls that begin and end once
 * the entry is in.  A wait that ended between them went unseen (the thread
 * stayed "waiting" through whatever it did next: a hang missed), and one
 * that began between them too (it stayed "busy" through the wait: an idle
 * loop taken for a hang).  So the thread is looked at once more after its
 * entry is in; when it is no longer where the first look found it, it is
 * stopped once, as a capture stops it, and its entry and slot are set from
 * its registers while it is stopped, when no wait can begin or end.
 */
#ifndef HANGWATCH_KOBS_START_H
#define HANGWATCH_KOBS_START_H

#include <stdbool.h>
#include <sys/types.h>

#include <bpf/libbpf.h>

#include "agent/capture/capture.h"
#include "bpf/wait_observer.h"
#include "core/abi/loop_state.h"

/* Is `pid`'s main thread blocked in a wait system call now?  Then *call
 * is what /proc/PID/syscall says of it, or, when that file is refused (a
 * watcher with CAP_SYS_PTRACE but not root), what its registers say: it is
 * stopped once for them. */
bool hw_kobs_is_waiting_now(pid_t pid, hw_task_syscall_info *call);

/* The thread is blocked in the wait `call`: that wait is its loop's
 * (wait_point.h, rule 4), and its slot says so. */
void hw_kobs_prime_loop_wait(struct hw_kobs_thread *t, hw_loop_slot *slot, const hw_task_syscall_info *call);

/* After `pid`'s entry went into `threads` (its slot `slot`, its first look
 * `found_waiting` in `waiting`): make the entry and the slot true (above).
 * `quiet`: a thread not waiting is not a loop until its first wait.
 * `must_stop`: stop it in any case (fentry, whose fexit sees only the ends
 * of calls entered after it was attached: the stopped wait is entered
 * again).  True when the thread was stopped (its wait, if any, restarted). */
bool hw_kobs_settle_start(struct bpf_map *threads, pid_t pid, hw_loop_slot *slot, bool found_waiting,
                          const hw_task_syscall_info *waiting, bool quiet, bool must_stop);

#endif
