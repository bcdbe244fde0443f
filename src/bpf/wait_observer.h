/*
 * wait_observer.h - what the kernel observer (wait_observer.bpf.c) and the
 * agent (src/agent/watch/kernel_observer.c) share: the layout of its pages, which
 * is hw_shared_page's (src/core/abi/shared_page.h; kernel_observer.c checks the
 * two agree at compile time), and its per-thread record, which holds the
 * loop's-wait rule's state (src/core/abi/wait_point.h, the same rule the
 * preloaded observer runs).  Plain types only: this header is compiled for
 * the BPF target too.
 */
#ifndef HANGWATCH_WAIT_OBSERVER_H
#define HANGWATCH_WAIT_OBSERVER_H

#include "core/abi/wait_point.h"

#define HW_KOBS_MAX_PAGES 1024      /* processes watched at once (watch --all: a machine's) */
#define HW_KOBS_MAX_CANDIDATES 4096 /* watch --all: processes chosen, not yet seen waiting */
#define HW_KOBS_MAX_THREADS 16384   /* threads watched at once */
#define HW_KOBS_EXEC_NEWS 0x80000000u /* a pid in the news ring with this bit: it exec'd (watch --all) */
#define HW_KOBS_EVENTS_BYTES 65536  /* ring of new children's pids for the agent */
#define HW_KOBS_SLOTS 64            /* slots per page (63 used, as HW_PAGE_SLOTS) */
#define HW_KOBS_BEFORE_WAITING 32u  /* HW_ACTIVITY_BEFORE_WAITING */
#define HW_KOBS_AFTER_WAITING 64u   /* HW_ACTIVITY_AFTER_WAITING */

struct hw_kobs_slot {
    unsigned long long seq;
    unsigned long long busy_start_ns;
    unsigned int activity;
    int tid;
    unsigned long long loop_wait_site;   /* hw_loop_slot's, from here on */
    unsigned long long loop_wait_object;
    unsigned int loop_wait_info;
    unsigned int nested_waits;
    unsigned int loop_wait_moves;
    unsigned int unused_[3];
};

struct hw_kobs_page {
    unsigned char header[28];
    unsigned int next_slot; /* hw_shared_page.kernel_next_slot: the next free slot (--threads loops) */
    unsigned char header_rest[32];
    struct hw_kobs_slot slots[HW_KOBS_SLOTS - 1];
};

/* A loop thread's own counters where its current busy stretch began, at
 * its loop wait's return (the kernel observer alone has that moment with
 * the thread's task at hand): the `time` section's window then starts at
 * the stretch's start however often the loop turns.  One per slot, in the
 * map `stretch_starts` (page * HW_KOBS_SLOTS + slot), mapped by the agent.
 * `seq` is the slot's odd sequence number of that stretch, written after
 * the counters and before the slot's own; a reader that sees it equal to
 * the slot's odd seq before and after reading the counters holds that
 * stretch's. */
struct hw_kobs_stretch_start {
    unsigned long long seq;
    unsigned long long on_cpu_ns;          /* schedstat's first figure: se.sum_exec_runtime */
    unsigned long long runqueue_ns;        /* its second: sched_info.run_delay */
    unsigned long long voluntary_switches; /* nvcsw */
    unsigned long long major_faults;       /* maj_flt */
    unsigned long long flags;              /* HW_KOBS_STARTS_* */
    unsigned long long utime_ns, stime_ns; /* user and system time as the kernel samples them (not /proc's) */
};

#define HW_KOBS_STARTS_SCHEDSTAT 1ull /* the kernel has run_delay (CONFIG_SCHED_INFO) */

/* A watched process, for its threads that are not watched yet. */
struct hw_kobs_process {
    unsigned int page;
    unsigned int loop_threads; /* --threads loops: a thread's first wait call gives it a slot */
    unsigned int every_wait;
    unsigned int follow; /* watch --follow: its new processes are told to the agent */
    /* watch --all: not watched yet (no page), chosen by the selectors; the
     * first wait call of any of its threads sets `waited` */
    unsigned int candidate;
    unsigned int waited;
};

struct hw_kobs_thread {
    unsigned int page;
    unsigned int slot;
    unsigned int every_wait;   /* --wait-site any */
    unsigned int in_loop_wait; /* inside the loop's own wait call */
    hw_wait_point wait_point;  /* which waits are the loop's (the agent may prime it) */
};

#endif
