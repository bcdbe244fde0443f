/*
 * kernel_observer.h - watching a process's loop from the kernel
 * (src/bpf/wait_observer.bpf.c), for processes the preloaded observer
 * cannot be in: already running (`hangwatch watch -p PID`), statically
 * linked, or waiting through raw system calls or io_uring.
 *
 * Each watched process gets a page in the layout of hw_shared_page, kept by
 * the kernel at its wait calls' entries and exits and mapped into the
 * agent, so the detectors, the capture and the reports are the same as with
 * the preloaded observer.  The page is the agent's own (the watched program
 * cannot write it), but its contents still describe the program's behaviour
 * and are read like any page.
 *
 * Needs CAP_BPF and CAP_PERFMON (or root), a kernel with BPF and BTF; the
 * fentry attachment also BPF tracing programs (with the kernel's function
 * tracer); the tracepoint attachment the system-call tracepoints and tracefs
 * (mounted here when it is not), the uprobe one the kernel's uprobe PMU
 * (and tracefs only for --follow, whose fork tracepoint it uses).
 */
#ifndef HANGWATCH_KERNEL_OBSERVER_H
#define HANGWATCH_KERNEL_OBSERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/abi/shared_page.h"

typedef struct hw_kernel_observer hw_kernel_observer;

/* Where the kernel observer's programs run (--attach). */
typedef enum hw_kobs_attach {
    /* fentry where it can be had, else the tracepoints (the reason kept:
     * hw_kobs_fentry_refusal) */
    HW_KOBS_ATTACH_AUTO,
    /* fentry/fexit on the wait system calls' kernel functions: only their
     * callers run the trampoline (needs BPF tracing programs and BTF) */
    HW_KOBS_ATTACH_FENTRY,
    /* the wait system calls' tracepoints: every process of the machine
     * takes the slow system call path while they are attached */
    HW_KOBS_ATTACH_TRACEPOINT,
    /* uprobes in each watched process's wait functions (wait_probes.h):
     * nothing for other processes, a trap per wait call for the watched
     * one; io_uring waits are not seen */
    HW_KOBS_ATTACH_UPROBE,
} hw_kobs_attach;

/* Load the kernel observer and attach it the way `attach` says.  0, or
 * -errno with one sentence in `why` saying what is missing and how to get
 * it. */
int hw_kobs_open(hw_kernel_observer **out, hw_kobs_attach attach, char *why, size_t len);

/* The attachment in use: "fentry", "tracepoint" or "uprobe"; and the name
 * of any attachment kind ("auto" too). */
const char *hw_kobs_attach_name(const hw_kernel_observer *k);
const char *hw_kobs_attach_kind_name(hw_kobs_attach attach);

/* Why `auto` did not take fentry (NULL if it did, or was not asked). */
const char *hw_kobs_fentry_refusal(const hw_kernel_observer *k);

/* How a process's main thread starts out when it begins to be watched. */
typedef enum hw_kobs_start {
    HW_KOBS_START_AS_FOUND, /* waiting if it is blocked in a wait call now, else busy from now */
    HW_KOBS_START_LAUNCHING, /* busy since process start (a program about to be started) */
    /* waiting if it is blocked in a wait call now, else not a loop until
     * its first wait call (watch --all: a process chosen for another
     * thread's wait, whose main thread may never be a loop) */
    HW_KOBS_START_QUIET,
} hw_kobs_start;

/* Watch process `pid`'s main thread (slot 0) and, with `loop_threads`
 * (--threads loops), every other thread of it that makes a wait call;
 * with `follow`, the processes it forks are told (below).
 * `every_wait`: --wait-site any.  Returns its page (valid until hw_kobs_forget or hw_kobs_close), or
 * NULL with a sentence in `why` (all pages in use, no memory). */
const hw_shared_page *hw_kobs_watch(hw_kernel_observer *k, pid_t pid, bool every_wait, bool loop_threads,
                                    bool follow, hw_kobs_start start, char *why, size_t len);

/* The same for a process about to execute `program` (a launch): under the
 * uprobe attachment its probes also go in that file, which it does not map
 * yet (a static program's own wait functions). */
const hw_shared_page *hw_kobs_watch_launch(hw_kernel_observer *k, pid_t pid, const char *program, bool every_wait,
                                           bool loop_threads, bool follow, char *why, size_t len);

/* With `follow`, the kernel tells of the processes a watched process
 * forks: a descriptor that becomes readable when it has (-1 if it cannot
 * be polled), and the ids it told of since the last call (at most `max`;
 * thread ids of new threads come too: the caller keeps only processes). */
int hw_kobs_children_fd(hw_kernel_observer *k);
/* watch --all: attach the exec tracepoint, and take the processes that
 * exec'd since (told through the same descriptor as the children). */
bool hw_kobs_watch_execs(hw_kernel_observer *k, char *why, size_t len);
size_t hw_kobs_take_execs(hw_kernel_observer *k, pid_t *out, size_t max);
size_t hw_kobs_take_children(hw_kernel_observer *k, pid_t *out, size_t max);

/* Stop watching the process that has `page`. */
void hw_kobs_forget(hw_kernel_observer *k, const hw_shared_page *page);

/* watch --all: `pid` is chosen but not seen waiting yet.  Marked as a
 * candidate (at most HW_KOBS_MAX_CANDIDATES; false when it cannot be),
 * the first wait call of any of its threads says so to
 * hw_kobs_candidate_waited: a loop under load, its threads runnable
 * whenever /proc is looked at, is found all the same.  Watching it
 * replaces the mark; hw_kobs_candidate_remove drops one left. */
bool hw_kobs_candidate_add(hw_kernel_observer *k, pid_t pid);
bool hw_kobs_candidate_waited(const hw_kernel_observer *k, pid_t pid);
void hw_kobs_candidate_remove(hw_kernel_observer *k, pid_t pid);

/* The thread of `page`'s slot `slot` has ended: the observer forgets it
 * and the slot is free (not busy, no thread); nothing for a page that is
 * not the observer's. */
void hw_kobs_thread_ended(hw_kernel_observer *k, const hw_shared_page *page, unsigned slot);

/* Was `page`'s main thread found blocked in a wait call under the fentry
 * attachment?  fexit cannot see that call's end (its trampoline returns
 * only from calls entered after it was attached): the stretch after it is
 * not watched; from the next wait call on, the loop is. */
bool hw_kobs_wait_end_unseen(const hw_kernel_observer *k, const hw_shared_page *page);

/* A loop thread's own counters where its busy stretch `seq` (odd) began,
 * read by the kernel at its loop wait's return (wait_observer.h). */
typedef struct hw_kobs_stretch_counters {
    uint64_t on_cpu_ns, runqueue_ns; /* schedstat's two figures (runqueue: has_runqueue) */
    bool has_runqueue;
    uint64_t voluntary_switches, major_faults;
    uint64_t utime_ns, stime_ns; /* as the kernel samples them: split on_cpu_ns with hw_cputime_adjust */
} hw_kobs_stretch_counters;

/* Slot `slot` of `page`'s counters at the start of its stretch `seq`: true
 * when the kernel kept them for that very stretch (and it still goes on). */
bool hw_kobs_stretch_start(const hw_kernel_observer *k, const hw_shared_page *page, unsigned slot, uint64_t seq,
                           hw_kobs_stretch_counters *out);

/* Is `page` one of the kernel observer's? */
bool hw_kobs_owns(const hw_kernel_observer *k, const hw_shared_page *page);

/* Detach everything, at the agent's end (what the kernel does too if the
 * agent dies): the waits for the kernel left to a process of their own
 * (link_reaper.h, hw_links_destroy_at_exit). */
void hw_kobs_close(hw_kernel_observer *k);

#endif
