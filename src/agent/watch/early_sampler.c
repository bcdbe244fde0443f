/*
 * early_sampler.c - Matrix's early sampling (--early-sampling): while a
 * loop is busy, its thread's stack every sample interval into a ring, from
 * which a report takes the Point Stack (the most telling stack: the longest
 * run of the same top function, the newest on a tie; seeds/000 and 004)
 * and every sample, for a flame graph.
 *
 * While the loop thread runs, the kernel samples it (perf_sampler.h): no
 * stop.  When the agent finds no new kernel sample and the thread is off its
 * CPU (a sleep in a callback), the thread is stopped once (ptrace) and that
 * stack is then reused for as long as the thread stays blocked in the same
 * system call at the same place (/proc/PID/task/TID/syscall unchanged:
 * number, arguments, stack pointer, pc).  A process running Python is
 * always stopped: its interpreter's frame chain can only be read stopped.
 * Without perf events, every sample stops the thread.
 *
 * Kernel samples are kept raw (registers and stack copy) and unwound only
 * when a report or an annealing check needs them; the sampler's symbolizer
 * is the watch thread's own, kept for one busy stretch.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/point_stack.h"
#include "core/ring_stacks.h"
#include "watch.h"

/* Early sampling of one loop thread: a ring per busy stretch. */
struct early_sampler {
    hw_sample_ring ring;
    hw_sample *samples;
    size_t *top_repeat;
    uint64_t seq;            /* the stretch the ring holds, 0 = none */
    uint64_t next_sample_ns;
    uint64_t stretch_start_ns;
    hw_symbolizer *sym;      /* the watch thread's own, kept for the stretch */
    /* kernel samples (perf_sampler.h), when the loop thread can have them;
     * kept raw (registers and stack copy, per ring slot) and unwound only
     * when a report or an annealing check needs them */
    struct hw_perf_sampler *perf;
    hw_thread_snapshot *raw; /* ring capacity entries; stack == NULL: nothing pending */
    size_t raw_pending;
    bool perf_on;            /* enabled for the current busy stretch */
    bool perf_refused;       /* cannot be had: every sample stops the thread */
    pid_t perf_tid;          /* the thread it samples */
    bool perf_is_main;
    /* the stack taken while the thread was blocked, reused while it stays so */
    char parked_line[160];   /* its /proc/PID/task/TID/syscall line then */
    uint64_t parked_pcs[HW_SAMPLE_MAX_FRAMES];
    size_t parked_depth;
    uint64_t parked_top;
};

void early_sampler_free(early_sampler *s)
{
    if (!s)
        return;
    if (s->sym)
        hw_symbolizer_free(s->sym);
    hw_perf_sampler_close(s->perf);
    for (size_t i = 0; s->raw && i < s->ring.capacity; i++)
        free(s->raw[i].stack);
    free(s->raw);
    free(s->samples);
    free(s->top_repeat);
    free(s);
}

early_sampler *early_sampler_new(size_t capacity)
{
    early_sampler *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->samples = calloc(capacity, sizeof *s->samples);
    s->top_repeat = calloc(capacity, sizeof *s->top_repeat);
    s->raw = calloc(capacity, sizeof *s->raw);
    if (!s->samples || !s->top_repeat || !s->raw) {
        early_sampler_free(s);
        return NULL;
    }
    hw_ring_init(&s->ring, s->samples, s->top_repeat, capacity);
    return s;
}

static void drop_raw(early_sampler *s, size_t slot);

/* Unwind `t` (a copy of the loop thread's registers and stack) and add it to
 * the ring; `names`: its Python frames, or NULL.  With `park`, it is also
 * kept as the stack to reuse while the thread stays blocked. */
static void add_sample(early_sampler *s, const hw_thread_snapshot *t, const hw_runtime_names *names, uint64_t time_ns,
                       hw_sample_source source, bool park)
{
    hw_backtrace bt = {0};
    hw_unwind_thread(s->sym, t, HW_SAMPLE_MAX_FRAMES, &bt);
    hw_runtime_merge(names, &bt);
    uint64_t pcs[HW_SAMPLE_MAX_FRAMES];
    size_t n = 0;
    for (; n < bt.count && n < HW_SAMPLE_MAX_FRAMES; n++)
        pcs[n] = bt.frames[n].runtime_key ? bt.frames[n].runtime_key : bt.frames[n].instruction_addr;
    /* Runs are counted per top *function*: a spin moves its pc.  In a
     * program that runs Python, the innermost Python function is the top:
     * the interpreter's own C frames change at every sample. */
    uint64_t top_key = 0;
    if (bt.count > 0)
        top_key = hw_frame_function_key(&bt.frames[0]);
    for (size_t k = 0; k < bt.count; k++)
        if (bt.frames[k].language != HW_LANG_NATIVE) {
            top_key = hw_frame_function_key(&bt.frames[k]);
            break;
        }
    if (n > 0) {
        drop_raw(s, s->ring.tail); /* the slot it overwrites */
        hw_ring_add_from(&s->ring, pcs, n, top_key, time_ns, source);
        if (park) {
            memcpy(s->parked_pcs, pcs, n * sizeof pcs[0]);
            s->parked_depth = n;
            s->parked_top = top_key;
        }
    }
    hw_backtrace_free(&bt);
}

/* Samples kept raw: unwinding one costs the agent a few hundred
 * microseconds of CPU, which on a machine with every CPU busy is taken
 * from the program itself; most rings are never looked at (no hang). */
#define MAX_RAW_PENDING 64

static void drop_raw(early_sampler *s, size_t slot)
{
    if (s->raw[slot].stack) {
        free(s->raw[slot].stack);
        s->raw[slot].stack = NULL;
        s->raw_pending--;
    }
}

/* Unwind the ring's raw samples in place (their top keys were set from the
 * pc when they were added, and stay). */
static void unwind_raw_samples(early_sampler *s)
{
    for (size_t slot = 0; s->raw_pending > 0 && slot < s->ring.capacity; slot++) {
        hw_thread_snapshot *t = &s->raw[slot];
        if (!t->stack)
            continue;
        hw_backtrace bt = {0};
        if (s->sym)
            hw_unwind_thread(s->sym, t, HW_SAMPLE_MAX_FRAMES, &bt);
        hw_sample *sample = &s->samples[slot];
        size_t n = 0;
        for (; n < bt.count && n < HW_SAMPLE_MAX_FRAMES; n++)
            sample->pcs[n] = bt.frames[n].runtime_key ? bt.frames[n].runtime_key : bt.frames[n].instruction_addr;
        if (n > 0)
            sample->depth = n; /* else the pc alone stays */
        hw_backtrace_free(&bt);
        drop_raw(s, slot);
    }
}

/* Add kernel sample `t` to the ring raw: its pc, the pc's function as the
 * top key; `t`'s stack copy is taken over. */
static void add_raw_sample(early_sampler *s, hw_thread_snapshot *t, uint64_t time_ns)
{
    if (s->raw_pending >= MAX_RAW_PENDING)
        unwind_raw_samples(s);
    hw_frame f = {0};
    hw_symbolize_frame(s->sym, t->regs.rip, true, &f);
    uint64_t top_key = hw_frame_function_key(&f);
    hw_frame_clear(&f);
    size_t slot = s->ring.tail;
    uint64_t pc = t->regs.rip;
    hw_ring_add_from(&s->ring, &pc, 1, top_key, time_ns, HW_SAMPLE_KERNEL);
    drop_raw(s, slot);
    if (t->stack) {
        s->raw[slot] = *t;
        s->raw_pending++;
        t->stack = NULL;
    }
}

/* The sampler's symbolizer for `w`.  This is the watch thread: it tells
 * functions apart by their unwind entries and reads no symbol table, debug
 * file or perf map, files a process chooses and may make as large as it
 * likes; the report worker names the samples' frames (symbolizer.h). */
static hw_symbolizer *new_symbolizer(const watched_process *w, const char *maps, size_t len)
{
    hw_symbolizer *sym = hw_symbolizer_new(w->pid, maps, len, NULL);
    hw_symbolizer_allow_js_map(sym, false);
    hw_symbolizer_functions_only(sym);
    return sym;
}

/* The sampler's symbolizer, made from the process's memory map as the
 * watch thread reads it (HW_WATCH_MAPS_MAX): false when it cannot be. */
static bool sampler_symbolizer(const watched_process *w, const loop_watch *l, early_sampler *s)
{
    size_t len = 0;
    bool cut = false;
    char *maps = hw_proc_read_maps(w->pid, l->tid, HW_WATCH_MAPS_MAX, &len, &cut);
    if (maps)
        s->sym = new_symbolizer(w, maps, len);
    free(maps);
    return s->sym != NULL;
}

/* Stop the loop thread and take one sample into the ring. */
static void take_stopped_sample(agent *a, watched_process *w, loop_watch *l, uint64_t now, bool park)
{
    early_sampler *s = l->sampler;
    hw_process_snapshot snap;
    capture_thread(a, w, l->tid, &snap);
    if (!s->sym)
        (void)sampler_symbolizer(w, l, s);
    for (size_t i = 0; s->sym && i < snap.thread_count; i++) {
        if (!snap.threads[i].is_target || snap.threads[i].status != HW_THREAD_CAPTURED)
            continue;
        hw_runtime_names *names = name_sample_frames(a, w, &snap);
        add_sample(s, &snap.threads[i], names ? &names[i] : NULL, now, HW_SAMPLE_STOPPED, park);
        hw_runtime_names_free(names, snap.thread_count);
    }
    hw_process_snapshot_free(&snap);
}

/* Open the loop thread's perf event, once; false (and ptrace samples from
 * then on) when perf events cannot be had, said once per agent. */
static bool perf_ready(agent *a, watched_process *w, loop_watch *l)
{
    early_sampler *s = l->sampler;
    if (s->perf)
        return true;
    if (s->perf_refused || a->opts->samples_by_ptrace)
        return false;
    look_for_runtimes(a, w);
    if (w->python.readable || w->js.target.readable) {
        s->perf_refused = true; /* its frames are read stopped */
        if (!a->said_runtime_stops && !a->opts->quiet) {
            a->said_runtime_stops = true;
            fprintf(stderr, "hangwatch: early samples of Python and node processes stop the thread (ptrace), so "
                            "that their Python or JavaScript frames are read with its stack\n");
        }
        return false;
    }
    char why[160];
    s->perf_tid = l->tid;
    s->perf_is_main = l->tid == w->pid;
    s->perf = hw_perf_sampler_open(l->tid, a->opts->sample_interval_ns, HW_PERF_SAMPLE_STACK_BYTES,
                                   a->opts->samples_by_task_clock ? HW_PERF_TRIGGER_TASK_CLOCK : HW_PERF_TRIGGER_ANY, why,
                                   sizeof why);
    if (s->perf)
        return true;
    if (errno == ESRCH)
        return false; /* the thread is gone, not the kernel's sampling: nothing to say or remember */
    s->perf_refused = true;
    if (!a->said_no_perf_sampling && !a->opts->quiet) {
        a->said_no_perf_sampling = true;
        fprintf(stderr, "hangwatch: early samples stop the thread (ptrace) instead of being taken by the kernel: %s\n",
                why);
    }
    return false;
}

/* Move the kernel's samples from its ring into ours; how many came. */
static unsigned drain_kernel_samples(early_sampler *s)
{
    if (!s->perf || !s->perf_on || !s->sym)
        return 0;
    hw_thread_snapshot t;
    uint64_t time_ns;
    unsigned taken = 0;
    while (hw_perf_sampler_next(s->perf, &t, &time_ns) == 1) {
        t.tid = s->perf_tid;
        t.is_target = true;
        t.is_main = s->perf_is_main;
        if (time_ns >= s->stretch_start_ns) /* not a sample of the previous stretch */
            add_raw_sample(s, &t, time_ns);
        free(t.stack);
        taken++;
    }
    return taken;
}

/* One sampling tick of a busy stretch through the kernel: the samples it
 * took since the last tick (their count), or, if none and the thread is
 * off its CPU, its blocked stack (taken once, then reused). */
static unsigned take_kernel_samples(agent *a, watched_process *w, loop_watch *l, uint64_t now)
{
    early_sampler *s = l->sampler;
    if (!s->sym && !sampler_symbolizer(w, l, s))
        return 0;
    unsigned taken = drain_kernel_samples(s);
    if (taken > 0) {
        s->parked_line[0] = '\0';
        return taken;
    }
    char state = hw_task_state(w->pid, l->tid);
    if (state != 'S' && state != 'D')
        return 0; /* running or runnable: the kernel samples it as it runs */
    char line[sizeof s->parked_line];
    if (hw_task_syscall_line(w->pid, l->tid, line, sizeof line) <= 0)
        line[0] = '\0';
    if (line[0] != '\0' && strcmp(line, s->parked_line) == 0 && s->parked_depth > 0) {
        drop_raw(s, s->ring.tail);
        hw_ring_add_from(&s->ring, s->parked_pcs, s->parked_depth, s->parked_top, now, HW_SAMPLE_REUSED);
        return 0;
    }
    s->parked_depth = 0;
    take_stopped_sample(a, w, l, now, true);
    snprintf(s->parked_line, sizeof s->parked_line, "%s", line);
    return 0;
}

/* While the kernel samples a running thread, the agent need not look at
 * every interval: it reads the ring every 100 ms, or sooner if the ring
 * would fill first (half of it), never more often than the interval.  Each
 * look is a wake-up of the real-time watch thread, which can preempt the
 * thread on its own CPU (docs/decisions.md §35). */
#define KERNEL_DRAIN_NS 100000000ull
static uint64_t kernel_drain_period(const early_sampler *s, uint64_t interval)
{
    uint64_t half_ring = hw_perf_sampler_ring_samples(s->perf) / 2 *
                         hw_perf_sampler_period_ns(s->perf);
    uint64_t period = half_ring < KERNEL_DRAIN_NS ? half_ring : KERNEL_DRAIN_NS;
    return period > interval ? period : interval;
}

uint64_t early_sampler_tick(agent *a, watched_process *w, loop_watch *l, const hw_loop_reading *r, uint64_t now)
{
    early_sampler *s = l->sampler;
    uint64_t interval = a->opts->sample_interval_ns;
    if (!r->busy) {
        s->seq = 0;
        if (s->perf_on && hw_perf_sampler_enable(s->perf, false) == 0)
            s->perf_on = false;
        return now + interval; /* look again soon: the next stretch's first sample */
    }
    if (s->seq != r->seq) {
        /* A new stretch: a new ring (an idle stack is the wait call). */
        hw_ring_clear(&s->ring);
        for (size_t slot = 0; s->raw_pending > 0 && slot < s->ring.capacity; slot++)
            drop_raw(s, slot);
        if (s->sym) {
            hw_symbolizer_free(s->sym);
            s->sym = NULL;
        }
        s->seq = r->seq;
        s->next_sample_ns = r->busy_start_ns + interval;
        s->stretch_start_ns = r->busy_start_ns;
        s->parked_line[0] = '\0';
        s->parked_depth = 0;
    }
    if (now >= s->next_sample_ns) {
        if (perf_ready(a, w, l) && (s->perf_on || hw_perf_sampler_enable(s->perf, true) == 0)) {
            s->perf_on = true;
            if (take_kernel_samples(a, w, l, now) > 0) { /* running: the kernel samples it */
                s->next_sample_ns = now + kernel_drain_period(s, interval);
                return s->next_sample_ns;
            }
        } else { /* no perf event, or it would not start: stop the thread */
            take_stopped_sample(a, w, l, now, false);
        }
        s->next_sample_ns += interval;
        if (s->next_sample_ns <= now)
            s->next_sample_ns = now + interval;
    }
    return s->next_sample_ns;
}

void early_sampler_fill_request(early_sampler *s, uint64_t seq, report_request *req)
{
    req->main_thread_state = "not_requested";
    req->main_thread_reason = "disabled";
    if (!s)
        return;
    req->main_thread_state = "empty";
    req->main_thread_reason = "no_samples";
    drain_kernel_samples(s);
    if (s->seq == seq)
        unwind_raw_samples(s);
    long idx = s->seq == seq ? hw_ring_point_stack(&s->ring) : -1;
    if (idx < 0)
        return;
    const hw_sample *chosen = hw_ring_at(&s->ring, (size_t)idx);
    hw_ring_repeat_counts(&s->ring, (size_t)idx, req->ps_counts);
    req->ps_depth = chosen->depth < HW_SAMPLE_MAX_FRAMES ? chosen->depth : HW_SAMPLE_MAX_FRAMES;
    memcpy(req->ps_pcs, chosen->pcs, req->ps_depth * sizeof req->ps_pcs[0]);
    req->ps_sample_count = s->ring.count;
    req->ps_ring_capacity = s->ring.capacity;
    req->ps_chosen_index = (size_t)idx;
    req->ps_top_repeat = hw_ring_repeat_at(&s->ring, (size_t)idx);
    hw_ring_count_sources(&s->ring, req->ps_sources);
    if (s->perf) {
        req->ps_kernel_trigger = hw_perf_trigger_name(hw_perf_sampler_trigger(s->perf));
        req->ps_kernel_period_ns = hw_perf_sampler_period_ns(s->perf);
    }
    /* Every sample, for a flame graph (none when out of memory). */
    if (hw_ring_stacks_of(&s->ring, idx, HW_REPORT_MAX_SAMPLE_STACKS, &req->ring) != 0)
        memset(&req->ring, 0, sizeof req->ring);
    /* Their Python or JavaScript frames (keys) are named with the capture's,
     * off this thread (report_naming.c). */
    req->main_thread_state = "collected";
    req->main_thread_reason = "early_sampling";
}
