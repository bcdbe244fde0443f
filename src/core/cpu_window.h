/*
 * cpu_window.h - the CPU-high rule (`--cpu-high PERCENT/DURATION`, Matrix's
 * CPU dump): a process that used more than PERCENT of one CPU on average
 * over the last DURATION is reported, and while it stays that hot it is
 * reported again at growing intervals (1, 2, 3, 5 ... windows: Matrix's
 * annealing, not one report per window).  It has cooled down, and its next
 * hot window is reported at once, only when its average has stayed under
 * PERCENT for a whole window: a process that hovers at PERCENT (on a busy
 * machine, others take its CPU for a tick now and then) crossed it again
 * and again and was reported at each crossing, a second apart.
 *
 * The agent feeds the process's total CPU time (all its threads, the dead
 * ones included, as /proc/PID/stat counts it) at every tick; the window is
 * measured between the newest reading at least DURATION old and now, so
 * one window is always whole.  Pure code: the caller passes times and CPU
 * times; everything is saturating and a CPU time that goes backwards (a
 * reused pid, an unreadable file read as 0) starts the window afresh.
 */
#ifndef HANGWATCH_CPU_WINDOW_H
#define HANGWATCH_CPU_WINDOW_H

#include <stdbool.h>
#include <stdint.h>

#define HW_CPU_WINDOW_POINTS 64u
#define HW_CPU_HIGH_DEFAULT_WINDOW_NS 60000000000ull /* 60 s when only PERCENT is given */
#define HW_CPU_HIGH_MAX_PERCENT 100000u            /* 1000 CPUs */

typedef struct hw_cpu_high_config {
    unsigned percent;   /* of one CPU, > 0 */
    uint64_t window_ns; /* > 0 */
} hw_cpu_high_config;

typedef struct hw_cpu_point {
    uint64_t time_ns;
    uint64_t cpu_ns;
} hw_cpu_point;

typedef struct hw_cpu_window {
    hw_cpu_high_config cfg;
    hw_cpu_point points[HW_CPU_WINDOW_POINTS]; /* a ring, oldest first from `first` */
    unsigned first, count;
    uint64_t next_report_ns;              /* annealing: no report before */
    uint64_t cool_since_ns;               /* under the percentage since (0: not) */
    uint64_t wait_previous, wait_current; /* Fibonacci, in windows */
} hw_cpu_window;

typedef struct hw_cpu_verdict {
    bool whole;          /* a whole window has been seen */
    bool hot;            /* ... and its average is over the percentage */
    bool report;         /* write a report now */
    uint64_t window_ns;  /* the span measured (at least cfg.window_ns when whole) */
    uint64_t cpu_ns;     /* CPU time used in it */
    uint64_t tenths;     /* its average in tenths of a percent of one CPU */
} hw_cpu_verdict;

/* How often to read the process's CPU time: 1/32 of the window, at least
 * 100 ms (so the ring always holds a whole window). */
uint64_t hw_cpu_tick_ns(const hw_cpu_high_config *cfg);

void hw_cpu_window_init(hw_cpu_window *w, const hw_cpu_high_config *cfg);

/* One reading: the process had used `cpu_ns` of CPU by `now_ns`. */
hw_cpu_verdict hw_cpu_window_add(hw_cpu_window *w, uint64_t now_ns, uint64_t cpu_ns);

/* Parse "PERCENT[%][/DURATION]" ("80%/60s", "150", "50%/2s"): PERCENT a
 * whole number from 1 to HW_CPU_HIGH_MAX_PERCENT, DURATION as
 * hw_parse_duration takes it, at least 1 s (60 s when left out).  0, or -1
 * with *why (when not NULL) set to a static sentence and *out untouched. */
int hw_cpu_high_parse(const char *text, hw_cpu_high_config *out, const char **why);

#endif
