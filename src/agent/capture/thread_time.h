/*
 * thread_time.h - what the kernel counts for a hung thread, read at two
 * moments and turned into a report's `time` section (core/hang_cause.h).
 *
 * A reading is the thread's schedstat (time on a CPU, time runnable but
 * waiting for one), its major faults, and its process's CPU cgroup's
 * throttling counters.  A reading taken while the loop waits stays valid
 * until its next stretch starts (a sleeping thread's counters do not move),
 * so the agent takes one at its looks (at most one per wait and per
 * stretch) and the difference to a reading after the capture is the
 * stretch's.  Every file is read with a bounded buffer; a counter the
 * kernel does not have is left out with the reason, never guessed.  Reads
 * happen on the watch thread, never while the process is stopped.
 */
#ifndef HANGWATCH_THREAD_TIME_H
#define HANGWATCH_THREAD_TIME_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

#include "agent/capture/cgroup_cpu.h"
#include "core/hang_cause.h"

typedef struct hw_thread_counters {
    bool valid;
    uint64_t at_ns; /* CLOCK_MONOTONIC when read */
    bool has_schedstat;
    uint64_t on_cpu_ns, runqueue_ns;
    uint64_t timeslices; /* times it was given a CPU (schedstat's third figure; 0 where absent) */
    bool has_faults;
    uint64_t major_faults;
    bool has_cputime; /* its user and system time as /proc shows them (clock ticks, in ns) */
    uint64_t user_ns, system_ns;
    bool has_throttle;
    uint64_t throttled_ns, throttled_periods;
    /* how long hangwatch's own captures have held the thread stopped so
     * far (the agent's count, exact; the caller fills it in) */
    uint64_t agent_stopped_ns;
    /* the thread's voluntary context switches (/proc/.../status): each
     * sleep is one, and so is each stop by a capture (agent_stops, the
     * agent's count of them, filled in by the caller) */
    bool has_switches;
    uint64_t voluntary_switches, agent_stops;
    char state; /* its state letter at the reading ('R', 'S', ...; 0 unknown) */
    /* which of the process's CPU cgroups (the caller's count of its moves):
     * throttling counters of two different ones do not subtract */
    unsigned cgroup_generation;
} hw_thread_counters;

/* Read thread `tid` of `pid` now, and `cgroup`'s counters (NULL, or one
 * with version 0: none). */
void hw_thread_counters_read(pid_t pid, pid_t tid, hw_cgroup_cpu *cgroup, hw_thread_counters *out);

/* What the thread is blocked in now: state, system call and arguments,
 * wait channel (taken right before a capture: once its stop is over, a
 * thread takes a moment to be back in its call).  Then, after the
 * capture, the descriptor the call is on, in words. */
void hw_blocked_look_take(pid_t pid, pid_t tid, hw_blocked_look *out);
/* The same without the wait channel and a lock's holders: its state, its
 * call, the descriptor (a poll's first), for the tally of what a stretch
 * sleeps in (core/sleep_tally.h), taken every 100 ms of a long one. */
void hw_blocked_look_brief(pid_t pid, pid_t tid, hw_blocked_look *out);
void hw_blocked_look_describe_fd(pid_t pid, hw_blocked_look *look);

/* A look that found the thread running (just let go by an earlier stop,
 * early sampling's, on its way back into its call) corrected from the
 * capture's stop, which found it in a system call: `regs`, the stopped
 * thread's registers, when the stop interrupted one (orig_rax, and rax a
 * restart code) or came after the kernel set the call up again (rip on
 * its `syscall` instruction, rax that call or restart_syscall: a busy
 * machine leaves it runnable there).  True when `look` now says that call. */
bool hw_blocked_look_from_stop(pid_t pid, pid_t tid, const struct user_regs_struct *regs, hw_blocked_look *look);

/* The owner of the lock a thread blocked in `futex` (system call
 * arguments `args`) waits for: a glibc pthread_mutex_t's __owner, or a PI
 * futex's word, read from process `pid`'s memory and taken only when it
 * looks like a held lock whose owner is another thread of `pid`; else 0.
 * Used by hw_blocked_look_take, which follows the chain of holders. */
pid_t hw_lock_owner(pid_t pid, pid_t waiter, const uint64_t args[6]);

/*
 * A loop thread's wait for a CPU after it was woken from its wait and
 * before its stretch began: `in_wait` read while it slept in its wait (the
 * window's start, taken for the stretch's), `in_stretch` at a look that
 * found the stretch under way.  The kernel adds a wait for a CPU to the
 * run-queue figure when the thread gets the CPU, and counts that as a
 * timeslice.  Asleep at `in_wait`, the thread had to be given a CPU to
 * return from its wait and start its stretch (the observer stamps it
 * then); given a CPU exactly once since, every wait for one it had was
 * before that, all of it before the stretch.  True with *wait_ns then;
 * false where that cannot be told (given a CPU more than once: some of
 * the waits may be the stretch's).
 */
bool hw_wait_before_stretch(const hw_thread_counters *in_wait, const hw_thread_counters *in_stretch,
                            uint64_t *wait_ns);

/* The time section from `from` (taken at `window_start_ns`'s moment or
 * earlier, see window_from) to `to`, with `cgroup`'s description and the
 * verdict.  `from` NULL or invalid: no figures, `missing` says why. */
void hw_time_section_fill(hw_time_section *t, const hw_thread_counters *from, const hw_thread_counters *to,
                          const hw_cgroup_cpu *cgroup, int cgroup_error, uint64_t window_start_ns,
                          uint64_t stretch_start_ns, const char *window_from, const hw_blocked_look *look);

/* The pressure stall figures ("some avg10", %) of cpu, memory and io:
 * `cgroup`'s own directory's (v2: DIR/cpu.pressure...) when it has them
 * (true), else the machine's (/proc/pressure; false); -1 each when the
 * kernel has none. */
bool hw_pressure_read(const hw_cgroup_cpu *cgroup, double *cpu, double *memory, double *io);

#endif
