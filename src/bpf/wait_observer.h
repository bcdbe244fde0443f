/*
 * wait_observer.h - what the kernel observer (wait_observer.bpf.c) and the
 * agent (src/agent/watch/kernel_observer.c) share: the layout of its pages, which
 * is hw_shared_page's (src/core/abi/shared_page.h; kernel_observer.c checks the
 * two agree at compile time), and its per-thread record.  Plain types only:
 * this header is compiled for the BPF target too.
 */
#ifndef HANGWATCH_WAIT_OBSERVER_H
#define HANGWATCH_WAIT_OBSERVER_H

#define HW_KOBS_MAX_PAGES 64        /* processes watched at once */
#define HW_KOBS_MAX_THREADS 4096    /* threads watched at once */
#define HW_KOBS_EVENTS_BYTES 65536  /* ring of new children's pids for the agent */
#define HW_KOBS_SLOTS 64            /* slots per page (63 used, as HW_PAGE_SLOTS) */
#define HW_KOBS_WAIT_CANDIDATES 4   /* as HW_WAIT_POINT_CANDIDATES */
#define HW_KOBS_BEFORE_WAITING 32u  /* HW_ACTIVITY_BEFORE_WAITING */
#define HW_KOBS_AFTER_WAITING 64u   /* HW_ACTIVITY_AFTER_WAITING */

struct hw_kobs_slot {
    unsigned long long seq;
    unsigned long long busy_start_ns;
    unsigned int activity;
    int tid;
    unsigned long long unused[5];
};

struct hw_kobs_page {
    unsigned char header[28];
    unsigned int next_slot; /* hw_shared_page.kernel_next_slot: the next free slot (--threads loops) */
    unsigned char header_rest[32];
    struct hw_kobs_slot slots[HW_KOBS_SLOTS - 1];
};

/* A watched process, for its threads that are not watched yet. */
struct hw_kobs_process {
    unsigned int page;
    unsigned int loop_threads; /* --threads loops: a thread's first wait call gives it a slot */
    unsigned int every_wait;
    unsigned int follow; /* watch --follow: its new processes are told to the agent */
};

struct hw_kobs_thread {
    unsigned int page;
    unsigned int slot;
    unsigned int every_wait;   /* --wait-site any */
    unsigned int in_loop_wait; /* inside the loop's own wait call */
    unsigned long long loop_sp, loop_site;
    unsigned long long seen_sp[HW_KOBS_WAIT_CANDIDATES];
    unsigned long long seen_site[HW_KOBS_WAIT_CANDIDATES];
    unsigned int next_seen;
    unsigned int pad;
};

#endif
