/*
 * cpu_high.c - CPU-high reports (`--cpu-high PERCENT/DURATION`, Matrix's
 * CPU dump): a watched process that uses more than PERCENT of one CPU on
 * average over DURATION gets a report of type "cpu_high" with the window,
 * the process's and each thread's share, and the stacks of its hottest
 * threads sampled over the window (docs/decisions.md §34).
 *
 * Cheap while the process is cool: one read of /proc/PID/stat per tick
 * (1/32 of the window, at least 100 ms).  A tick over the percentage makes
 * it warm (until 8 ticks in a row under it): then each thread's CPU time is
 * read too, and the hottest threads
 * (at most CPU_HOT_THREADS, each over 10 % of a CPU in the last tick) get a
 * perf event each, the same kernel sampler as early sampling
 * (perf_sampler.h: no stop, a few microseconds per sample), whose samples
 * are kept raw in a ring per thread and unwound only for a report, by the
 * report worker.  The rule and its annealing (reports after 1, 2, 3, 5 ...
 * windows while it stays hot) are cpu_window.c's.
 *
 * Everything here comes from the kernel (/proc, perf records, checked by
 * perf_sampler.c) about the watched process; thread names are escaped
 * when printed and written as foreign text.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "watch.h"

#define CPU_MAX_THREADS 512
#define CPU_RING_SAMPLES 128 /* raw samples kept per sampled thread */
#define CPU_MIN_HOT_TENTHS 100 /* 10 % of a CPU in the last tick */
#define CPU_SAMPLE_STACK_BYTES 2048u /* the rest of a spinning thread's stack is read live when unwound */
#define CPU_COOL_TICKS 8 /* ticks in a row under the percentage (a quarter window) before it cools down */

typedef struct cpu_thread {
    pid_t tid;
    uint64_t base_ns;  /* its CPU time when the figures began (threads_since_ns) */
    uint64_t last_ns;  /* at the last warm tick */
    uint64_t tick_ns;  /* used in the last warm tick */
    bool seen;         /* found at the last warm tick */
    hw_thread_counters base; /* its counters when the figures began, or when first seen (the time section) */
} cpu_thread;

typedef struct cpu_hot_thread {
    pid_t tid; /* 0: a free place */
    hw_perf_sampler *perf;
    hw_thread_snapshot *ring; /* CPU_RING_SAMPLES raw samples, oldest at `first` (allocated while sampled) */
    uint64_t *ring_time;
    unsigned first, count;
} cpu_hot_thread;

struct cpu_watch {
    hw_cpu_window win;
    uint64_t next_tick_ns;
    uint64_t last_cpu_ns, last_time_ns; /* the previous tick's reading */
    bool warm;                          /* a recent tick was over the percentage */
    bool window_hot;                    /* the last whole window was over it */
    unsigned cool_ticks;                /* ticks in a row under it since */
    uint64_t threads_since_ns;          /* the threads' figures count from here */
    cpu_thread *threads; /* allocated while warm, up to CPU_MAX_THREADS */
    size_t thread_count, thread_cap;
    cpu_hot_thread hot[CPU_HOT_THREADS];
};

/* Sampling interval: at least early sampling's, and about 100 samples of a
 * busy thread per window. */
static uint64_t sample_interval(const agent *a)
{
    uint64_t per_window = a->opts->cpu_high.window_ns / 100;
    return per_window > a->opts->sample_interval_ns ? per_window : a->opts->sample_interval_ns;
}

static void drop_hot(cpu_hot_thread *h)
{
    hw_perf_sampler_close(h->perf);
    for (unsigned i = 0; h->ring && i < h->count; i++)
        free(h->ring[(h->first + i) % CPU_RING_SAMPLES].stack);
    free(h->ring);
    free(h->ring_time);
    memset(h, 0, sizeof *h);
}

void cpu_high_free(watched_process *w)
{
    if (w->cpu == NULL)
        return;
    for (unsigned i = 0; i < CPU_HOT_THREADS; i++)
        drop_hot(&w->cpu->hot[i]);
    free(w->cpu->threads);
    free(w->cpu);
    w->cpu = NULL;
}

/* The process has cooled down: per-thread figures and samplers end. */
static void cool_down(cpu_watch *cw)
{
    for (unsigned i = 0; i < CPU_HOT_THREADS; i++)
        drop_hot(&cw->hot[i]);
    free(cw->threads);
    cw->threads = NULL;
    cw->thread_count = cw->thread_cap = 0;
}

static cpu_thread *find_thread(cpu_watch *cw, pid_t tid)
{
    for (size_t i = 0; i < cw->thread_count; i++)
        if (cw->threads[i].tid == tid)
            return &cw->threads[i];
    return NULL;
}

/* Every thread's CPU time now; `fresh`: the figures start now (the threads
 * found are counted from here), else a thread not seen before was born
 * since and counts from zero. */
static void read_threads(cpu_watch *cw, watched_process *w, bool fresh)
{
    pid_t pid = w->pid;
    pid_t *tids = NULL;
    size_t n = 0;
    if (hw_task_list(pid, &tids, &n) != 0)
        return;
    uint64_t unit = hw_clock_tick_ns();
    for (size_t i = 0; i < cw->thread_count; i++)
        cw->threads[i].seen = false;
    for (size_t i = 0; i < n; i++) {
        hw_task_stat st;
        if (hw_task_stat_read(pid, tids[i], &st) != 0)
            continue;
        uint64_t cpu = st.cpu_ticks * unit;
        cpu_thread *t = find_thread(cw, tids[i]);
        if (t == NULL) {
            if (cw->thread_count == cw->thread_cap) {
                size_t cap = cw->thread_cap ? 2 * cw->thread_cap : 16;
                cpu_thread *more = cap <= CPU_MAX_THREADS ? realloc(cw->threads, cap * sizeof *more) : NULL;
                if (more == NULL)
                    continue;
                cw->threads = more;
                cw->thread_cap = cap;
            }
            t = &cw->threads[cw->thread_count++];
            *t = (cpu_thread){.tid = tids[i], .base_ns = fresh ? cpu : 0, .last_ns = fresh ? cpu : 0};
            hang_time_thread_reading(w, tids[i], &t->base);
        }
        t->tick_ns = cpu > t->last_ns ? cpu - t->last_ns : 0;
        t->last_ns = cpu;
        t->seen = true;
    }
    free(tids);
    /* Threads that ended leave their place. */
    size_t kept = 0;
    for (size_t i = 0; i < cw->thread_count; i++)
        if (cw->threads[i].seen)
            cw->threads[kept++] = cw->threads[i];
    cw->thread_count = kept;
}

/* Move the kernel's samples of a hot thread into its ring. */
static void drain_samples(cpu_hot_thread *h)
{
    hw_thread_snapshot t;
    uint64_t time_ns;
    while (h->perf && h->ring && hw_perf_sampler_next(h->perf, &t, &time_ns) == 1) {
        t.tid = h->tid;
        t.is_target = true;
        if (h->count == CPU_RING_SAMPLES) {
            free(h->ring[h->first].stack);
            h->first = (h->first + 1) % CPU_RING_SAMPLES;
            h->count--;
        }
        unsigned at = (h->first + h->count) % CPU_RING_SAMPLES;
        h->ring[at] = t;
        h->ring_time[at] = time_ns;
        h->count++;
    }
}

static bool is_hot(const cpu_thread *t, uint64_t tick_ns)
{
    return t->tick_ns * 1000 >= (uint64_t)CPU_MIN_HOT_TENTHS * tick_ns;
}

/* The hottest threads of the last tick (at most CPU_HOT_THREADS, each over
 * 10 % of a CPU in it) get a sampler; one that is no longer among them
 * keeps its own until another needs the place. */
static void sample_hottest(agent *a, cpu_watch *cw, uint64_t tick_ns)
{
    const cpu_thread *top[CPU_HOT_THREADS] = {0};
    for (size_t i = 0; i < cw->thread_count; i++) {
        const cpu_thread *t = &cw->threads[i];
        if (!is_hot(t, tick_ns))
            continue;
        for (unsigned k = 0; k < CPU_HOT_THREADS; k++) {
            if (top[k] == NULL || t->tick_ns > top[k]->tick_ns) {
                memmove(&top[k + 1], &top[k], (CPU_HOT_THREADS - 1 - k) * sizeof top[0]);
                top[k] = t;
                break;
            }
        }
    }
    for (unsigned k = 0; k < CPU_HOT_THREADS && top[k] != NULL; k++) {
        bool sampled = false;
        for (unsigned j = 0; j < CPU_HOT_THREADS; j++)
            sampled |= cw->hot[j].tid == top[k]->tid;
        if (sampled)
            continue;
        cpu_hot_thread *place = NULL;
        for (unsigned j = 0; j < CPU_HOT_THREADS && place == NULL; j++) {
            bool in_top = false;
            for (unsigned m = 0; m < CPU_HOT_THREADS; m++)
                in_top |= top[m] != NULL && top[m]->tid == cw->hot[j].tid;
            if (cw->hot[j].tid == 0 || !in_top)
                place = &cw->hot[j];
        }
        if (place == NULL)
            return;
        drop_hot(place);
        place->ring = calloc(CPU_RING_SAMPLES, sizeof *place->ring);
        place->ring_time = calloc(CPU_RING_SAMPLES, sizeof *place->ring_time);
        if (place->ring == NULL || place->ring_time == NULL) {
            drop_hot(place);
            return;
        }
        char why[160];
        place->perf = hw_perf_sampler_open(top[k]->tid, sample_interval(a), CPU_SAMPLE_STACK_BYTES,
                                           a->opts->samples_by_task_clock ? HW_PERF_TRIGGER_TASK_CLOCK
                                                                          : HW_PERF_TRIGGER_ANY,
                                           why, sizeof why);
        if (place->perf == NULL || hw_perf_sampler_enable(place->perf, true) != 0) {
            bool opened = place->perf != NULL;
            drop_hot(place);
            if (!a->said_no_cpu_samples && !a->opts->quiet) {
                a->said_no_cpu_samples = true;
                fprintf(stderr, "hangwatch: CPU-high reports come without samples of the hottest threads: %s\n",
                        opened ? "the perf event would not start" : why);
            }
            return;
        }
        place->tid = top[k]->tid;
    }
}

static int by_cpu_descending(const void *x, const void *y)
{
    const cpu_high_thread *a = x, *b = y;
    if (a->cpu_ns != b->cpu_ns)
        return a->cpu_ns > b->cpu_ns ? -1 : 1;
    return a->tid < b->tid ? -1 : a->tid > b->tid;
}

/* A CPU-high report: every thread captured, `tid` (the hottest) first,
 * nothing about a loop; handed to the worker with `cpu` (taken over). */
static void submit_cpu_high(agent *a, watched_process *w, cpu_watch *cw, pid_t tid, cpu_high_request *cpu)
{
    report_request *req = calloc(1, sizeof *req);
    if (!req) {
        cpu_high_request_free(cpu);
        return;
    }
    req->check = (hw_check){.verdict = HW_VERDICT_HANG, .busy_ns = cpu->window_ns};
    req->cpu = cpu;
    early_sampler_fill_request(NULL, 0, req);
    capture_for_request(a, w, tid, hw_monotonic_ns(), req, NULL, NULL);
    /* Where the hottest thread's time went over the thread figures' window. */
    const cpu_thread *t = find_thread(cw, tid);
    uint64_t stopped = 0;
    for (size_t i = 0; i < req->snap.thread_count; i++)
        if (req->snap.threads[i].tid == tid)
            stopped = req->snap.threads[i].stopped_ns;
    if (req->snap.process_exited)
        req->time.missing = "the process ended during the capture";
    else
        hang_time_cpu_section(w, tid, t != NULL ? &t->base : NULL, stopped, &req->time);
    submit_request(a, w, NULL, req, false);
    free(req);
}

/* Fill and hand over a cpu_high report for verdict `v`. */
static void report_now(agent *a, watched_process *w, cpu_watch *cw, const hw_cpu_verdict *v, uint64_t now)
{
    cpu_high_request *cpu = calloc(1, sizeof *cpu);
    if (cpu == NULL)
        return;
    cpu->percent = a->opts->cpu_high.percent;
    cpu->window_ns = v->window_ns;
    cpu->cpu_ns = v->cpu_ns;
    cpu->tenths = v->tenths;
    cpu->threads_window_ns = now > cw->threads_since_ns ? now - cw->threads_since_ns : 0;
    cpu->sample_interval_ns = sample_interval(a);
    /* The threads by their share, hottest first. */
    cpu_high_thread *all = calloc(cw->thread_count ? cw->thread_count : 1, sizeof *all);
    if (all == NULL) {
        free(cpu);
        return;
    }
    for (size_t i = 0; i < cw->thread_count; i++) {
        const cpu_thread *t = &cw->threads[i];
        all[i].tid = t->tid;
        all[i].cpu_ns = t->last_ns > t->base_ns ? t->last_ns - t->base_ns : 0;
    }
    qsort(all, cw->thread_count, sizeof *all, by_cpu_descending);
    cpu->thread_count = cw->thread_count < CPU_REPORT_THREADS ? cw->thread_count : CPU_REPORT_THREADS;
    for (size_t i = 0; i < cpu->thread_count; i++) {
        cpu->threads[i] = all[i];
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/task/%d/comm", (int)w->pid, (int)all[i].tid);
        hw_proc_read_comm(path, cpu->threads[i].name);
    }
    free(all);
    /* The samples of the window, moved out of the rings. */
    uint64_t from = now > v->window_ns ? now - v->window_ns : 0;
    for (unsigned j = 0; j < CPU_HOT_THREADS; j++) {
        cpu_hot_thread *h = &cw->hot[j];
        if (h->tid == 0 || h->ring == NULL)
            continue;
        drain_samples(h);
        cpu_high_sampled *s = &cpu->sampled[cpu->sampled_count];
        s->tid = h->tid;
        s->samples = calloc(h->count ? h->count : 1, sizeof *s->samples);
        if (s->samples == NULL)
            continue;
        for (unsigned i = 0; i < h->count; i++) {
            unsigned at = (h->first + i) % CPU_RING_SAMPLES;
            if (h->ring_time[at] >= from)
                s->samples[s->sample_count++] = h->ring[at];
            else
                free(h->ring[at].stack);
            h->ring[at].stack = NULL;
        }
        h->first = h->count = 0;
        cpu->sampled_count++;
    }
    pid_t hottest = cpu->thread_count > 0 ? cpu->threads[0].tid : w->pid;
    submit_cpu_high(a, w, cw, hottest, cpu);
    /* The next report's thread figures count from this one. */
    for (size_t i = 0; i < cw->thread_count; i++) {
        cw->threads[i].base_ns = cw->threads[i].last_ns;
        hang_time_thread_reading(w, cw->threads[i].tid, &cw->threads[i].base);
    }
    cw->threads_since_ns = now;
}

uint64_t cpu_high_check(agent *a, watched_process *w, uint64_t now)
{
    const hw_cpu_high_config *cfg = &a->opts->cpu_high;
    if (cfg->percent == 0)
        return UINT64_MAX;
    cpu_watch *cw = w->cpu;
    if (cw == NULL) {
        cw = w->cpu = calloc(1, sizeof *cw);
        if (cw == NULL)
            return UINT64_MAX;
        hw_cpu_window_init(&cw->win, cfg);
        cw->next_tick_ns = now;
    }
    if (now < cw->next_tick_ns)
        return cw->next_tick_ns;
    uint64_t tick = hw_cpu_tick_ns(cfg);
    cw->next_tick_ns = now + tick;
    hw_task_stat st;
    if (hw_task_stat_read(w->pid, 0, &st) != 0 || st.state == 'Z')
        return cw->next_tick_ns;
    uint64_t cpu_ns = st.cpu_ticks * hw_clock_tick_ns();
    uint64_t since = now > cw->last_time_ns ? now - cw->last_time_ns : 0;
    bool hot_tick = cw->last_time_ns != 0 && cpu_ns >= cw->last_cpu_ns && since > 0 &&
                    (cpu_ns - cw->last_cpu_ns) * 100 > (uint64_t)cfg->percent * since;
    /* Warm from a tick over the percentage until CPU_COOL_TICKS in a row
     * under it: a process that is hot on average dips (other programs take
     * its CPU for a tick on a busy machine), and its samples must go on;
     * and while its window is over it, whatever its ticks: its next report
     * needs the threads' figures and samples (a process at the edge, its
     * ticks under the percentage for a while, was reported with none). */
    cw->cool_ticks = hot_tick ? 0 : cw->cool_ticks + 1;
    bool warm = hot_tick || cw->window_hot || (cw->warm && cw->cool_ticks < CPU_COOL_TICKS);
    cw->last_cpu_ns = cpu_ns;
    cw->last_time_ns = now;
    if (warm) {
        if (!cw->warm)
            cw->threads_since_ns = now;
        read_threads(cw, w, !cw->warm);
        for (unsigned j = 0; j < CPU_HOT_THREADS; j++)
            drain_samples(&cw->hot[j]);
        if (cw->warm)
            sample_hottest(a, cw, since);
    } else if (cw->warm) {
        cool_down(cw);
    }
    cw->warm = warm;
    hw_cpu_verdict v = hw_cpu_window_add(&cw->win, now, cpu_ns);
    cw->window_hot = v.whole && v.hot;
    if (v.report)
        report_now(a, w, cw, &v, now);
    return cw->next_tick_ns;
}
