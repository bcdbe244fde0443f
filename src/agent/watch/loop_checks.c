/*
 * loop_checks.c - looking at each watched loop on its detector's schedule.
 *
 * For every loop thread a process's page announces (the main thread; every
 * loop thread with --threads=loops) this keeps the detector in force: the
 * runloop detector (Matrix's busy stretches, exact or periodic), or one of
 * the seeds' alternatives kept for comparison (the semaphore's 50 ms state
 * samples, ANREye's ping, the frame gap).  It decides *that* something is a
 * hang and hands it to hang_lifecycle.c; it also takes early sampling's
 * samples into the loop's ring.
 *
 * Everything read from the page is the program's word: a reading that makes
 * no sense (a start in the future, a thread that is not the process's) is
 * bounded or ignored, never trusted.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "watch.h"
#include "agent/capture/capture.h"
#include "agent/report/report_model.h"

static void sampler_free(sampler *s)
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

static sampler *sampler_new(size_t capacity)
{
    sampler *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->samples = calloc(capacity, sizeof *s->samples);
    s->top_repeat = calloc(capacity, sizeof *s->top_repeat);
    s->raw = calloc(capacity, sizeof *s->raw);
    if (!s->samples || !s->top_repeat || !s->raw) {
        sampler_free(s);
        return NULL;
    }
    hw_ring_init(&s->ring, s->samples, s->top_repeat, capacity);
    return s;
}


/* The state letter of the thread ('R', 'S', 'T', 't', ...), '?' if gone. */
static char thread_state(pid_t pid, pid_t tid)
{
    hw_task_stat st;
    return hw_task_stat_read(pid, tid, &st) == 0 ? st.state : '?';
}

/* Stopped by a signal (SIGSTOP, job control: 'T') or held by a tracer (a
 * debugger at a breakpoint, after an attach: 't').  The agent's own
 * captures are over by the time it looks (same thread). */
static bool thread_stopped(pid_t pid, pid_t tid)
{
    char state = thread_state(pid, tid);
    return state == 'T' || state == 't';
}

/* The loop's process was seen stopped in busy stretch `seq`: its loop
 * cannot run, so nothing of the stretch so far is held against it; the
 * busy clock (and stutter's) starts again now, and its state is looked at
 * again soon so that the clock starts again close to when it runs again
 * (decisions.md §33). */
static void hold_stopped(loop_watch *l, uint64_t seq, uint64_t now)
{
    hw_detector_restart_clock(&l->detector, seq, now);
    hw_stutter_restart(&l->stutter, seq, now);
    l->held = true;
    l->next_wake_ns = now + STOPPED_LOOK_NS;
}


/* ---- early sampling ----
 *
 * While the loop thread runs, the kernel samples it (perf_sampler.h): no
 * stop.  When the agent finds no new kernel sample and the thread is off its
 * CPU (a sleep in a callback), the thread is stopped once (ptrace) and that
 * stack is then reused for as long as the thread stays blocked in the same
 * system call at the same place (/proc/PID/task/TID/syscall unchanged:
 * number, arguments, stack pointer, pc).  A process running Python is
 * always stopped: its interpreter's frame chain can only be read stopped.
 * Without perf events, every sample stops the thread, as before. */

static void drop_raw(sampler *s, size_t slot);

/* Unwind `t` (a copy of the loop thread's registers and stack) and add it to
 * the ring; `names`: its Python frames, or NULL.  With `park`, it is also
 * kept as the stack to reuse while the thread stays blocked. */
static void add_sample(sampler *s, const hw_thread_snapshot *t, const hw_python_names *names, uint64_t time_ns,
                       hw_sample_source source, bool park)
{
    hw_backtrace bt = {0};
    hw_unwind_thread(s->sym, t, HW_SAMPLE_MAX_FRAMES, &bt);
    if (names)
        hw_python_merge(names, &bt);
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

static void drop_raw(sampler *s, size_t slot)
{
    if (s->raw[slot].stack) {
        free(s->raw[slot].stack);
        s->raw[slot].stack = NULL;
        s->raw_pending--;
    }
}

/* Unwind the ring's raw samples in place (their top keys were set from the
 * pc when they were added, and stay). */
static void unwind_raw_samples(sampler *s)
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
static void add_raw_sample(sampler *s, hw_thread_snapshot *t, uint64_t time_ns)
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

/* Stop the loop thread and take one sample into the ring. */
static void take_stopped_sample(agent *a, watched_process *w, loop_watch *l, uint64_t now, bool park)
{
    sampler *s = l->sampler;
    hw_process_snapshot snap;
    capture_thread(a, w, l->tid, &snap);
    if (!s->sym && snap.maps)
        s->sym = hw_symbolizer_new(w->pid, snap.maps, snap.maps_len, NULL);
    for (size_t i = 0; s->sym && i < snap.thread_count; i++) {
        if (!snap.threads[i].is_target || snap.threads[i].status != HW_THREAD_CAPTURED)
            continue;
        hw_python_names *names = hw_python_name_threads(python_namer(w), &snap, true);
        add_sample(s, &snap.threads[i], names ? &names[i] : NULL, now, HW_SAMPLE_STOPPED, park);
        hw_python_names_free(names, snap.thread_count);
    }
    hw_process_snapshot_free(&snap);
}

/* Open the loop thread's perf event, once; false (and ptrace samples from
 * then on) when perf events cannot be had, said once per agent. */
static bool perf_ready(agent *a, watched_process *w, loop_watch *l)
{
    sampler *s = l->sampler;
    if (s->perf)
        return true;
    if (s->perf_refused || a->opts->samples_by_ptrace)
        return false;
    look_for_python(w);
    if (w->python.layout != NULL) {
        s->perf_refused = true; /* its frames are read stopped */
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
    s->perf_refused = true;
    if (!a->said_no_perf_sampling && !a->opts->quiet) {
        a->said_no_perf_sampling = true;
        fprintf(stderr, "hangwatch: early samples stop the thread (ptrace) instead of being taken by the kernel: %s\n",
                why);
    }
    return false;
}

/* Move the kernel's samples from its ring into ours; how many came. */
static unsigned drain_kernel_samples(sampler *s)
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
    sampler *s = l->sampler;
    if (!s->sym) {
        char path[64];
        size_t len = 0;
        snprintf(path, sizeof path, "/proc/%d/maps", (int)w->pid);
        char *maps = hw_proc_read_whole(path, &len);
        if (maps)
            s->sym = hw_symbolizer_new(w->pid, maps, len, NULL);
        free(maps);
        if (!s->sym)
            return 0;
    }
    unsigned taken = drain_kernel_samples(s);
    if (taken > 0) {
        s->parked_line[0] = '\0';
        return taken;
    }
    char state = thread_state(w->pid, l->tid);
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
static uint64_t kernel_drain_period(const sampler *s, uint64_t interval)
{
    uint64_t half_ring = hw_perf_sampler_ring_samples(s->perf) / 2 *
                         hw_perf_sampler_period_ns(s->perf);
    uint64_t period = half_ring < KERNEL_DRAIN_NS ? half_ring : KERNEL_DRAIN_NS;
    return period > interval ? period : interval;
}

/* Sample if one is due for the current busy stretch; returns when the next
 * one is due (UINT64_MAX while the loop waits: nothing to sample). */
static uint64_t sample_if_due(agent *a, watched_process *w, loop_watch *l, const hw_loop_reading *r, uint64_t now)
{
    sampler *s = l->sampler;
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

/* Function keys of the newest sample, for annealing; 0 if none. */
size_t sampler_newest_keys(sampler *s, uint64_t *keys, size_t max)
{
    if (s) {
        drain_kernel_samples(s);
        unwind_raw_samples(s);
    }
    if (!s || s->ring.count == 0 || !s->sym)
        return 0;
    const hw_sample *newest = hw_ring_at(&s->ring, s->ring.count - 1);
    size_t n = 0;
    for (; n < newest->depth && n < max; n++) {
        hw_frame f = {0};
        if (hw_python_key_is_python(newest->pcs[n]))
            f.runtime_key = newest->pcs[n];
        else
            hw_symbolize_frame(s->sym, newest->pcs[n], n == 0, &f);
        keys[n] = hw_frame_function_key(&f);
        hw_frame_clear(&f);
    }
    return n;
}






/*
 * The sub-thread ping (ping_detector.h).  A ping is posted by the program's
 * own post function when the C library was given one (answered when its
 * task stores the token in the slot); otherwise the loop's next pass
 * through its wait is the answer, as a task queued on it would run there.
 * `waiting_only`: post only while the loop waits (the semaphore detector's
 * ping, seeds/002).
 */
static void check_ping(agent *a, watched_process *w, loop_watch *l, const hw_loop_reading *r, uint64_t now,
                       bool waiting_only)
{
    const hw_loop_slot *slot = &w->page->slots[l->slot];
    bool answered = a->pings_by_post
                        ? atomic_load_explicit(&slot->ping_answered, memory_order_acquire) >= l->ping.token
                        : !l->ping_busy || r->seq != l->ping_seq;
    bool may_post = !waiting_only || (!r->busy && r->activity == HW_ACTIVITY_BEFORE_WAITING);
    /* A C-library loop that has not reported an activity yet, or has
     * exited, runs no tasks: it is not pinged, and a ping it owes counts as
     * answered. */
    bool loop_runs = (r->seq != 0 || r->activity != 0) && r->activity != HW_ACTIVITY_EXIT;
    /* A paused loop (hangwatch_loop_pause) is in an operation the program
     * expects to be long: it is not pinged, and a ping it owes is let go. */
    bool paused = hw_loop_paused(slot);
    answered = answered || !loop_runs || paused;
    may_post = may_post && loop_runs && !paused;
    hw_ping_step_result res = hw_ping_step(&l->ping, now, answered, may_post);
    if (res.answered_late && l->hung)
        hang_finish(a, l, now, "ping_answered", true);
    if (res.missed)
        hang_found(a, w, l, r, l->ping.posted_ns, res.waited_ns);
    else if (l->hung)
        l->last_seen_hung_ns = now;
    if (res.post) {
        l->ping_seq = r->seq;
        l->ping_busy = r->busy;
        if (a->pings_by_post)
            send_ping(a, l);
    }
    l->next_wake_ns = l->ping.next_ns;
}

/*
 * The frame gap (frame_gap.h): the program's own ticks when the C library
 * reports them, else the agent's emulated display link.  A late tick is a
 * hang that is already over: it is reported and closed at once.
 */
static void check_frames(agent *a, watched_process *w, loop_watch *l, const hw_loop_reading *r, uint64_t now)
{
    uint64_t interval = a->opts->frame_interval_ns;
    l->next_wake_ns = now + interval;
    uint64_t gap = 0;
    if (a->opts->frames_from_loop) {
        const hw_loop_slot *slot = &w->page->slots[l->slot];
        uint64_t late = atomic_load_explicit(&slot->late_frames, memory_order_acquire);
        if (late != l->late_frames_seen) {
            l->late_frames_seen = late;
            gap = atomic_load_explicit(&slot->late_frame_gap_ns, memory_order_relaxed);
        }
        if (!l->warned_no_frames && now > l->watch_start_ns + REGISTRATION_GRACE_NS &&
            atomic_load_explicit(&slot->frames, memory_order_relaxed) == 0) {
            l->warned_no_frames = true;
            if (!a->opts->quiet)
                fprintf(stderr,
                        "hangwatch: warning: the frame-gap detector has had no frame from thread %d's loop after 1 s: "
                        "call hangwatch_loop_frame() from a timer on it (docs/api.md)\n",
                        (int)l->tid);
        }
    } else {
        gap = hw_frame_gap_look(&l->frames, r, now);
    }
    if (gap == 0)
        return;
    if (gap > now)
        gap = now; /* the page is the program's: never trust it to make sense */
    hang_found(a, w, l, r, now - gap, gap);
    /* It ended at the late tick, within one interval before this look. */
    l->last_seen_hung_ns = now > interval ? now - interval : 0;
    hang_finish(a, l, now, "returned_to_wait", true);
    l->next_wake_ns = hw_monotonic_ns() + interval;
}


/* Launching thread `l` was found blocked in wait system call `nr` that its
 * observer did not see (a raw syscall() or io_uring loop): move the process
 * to the kernel observer, or say its hangs cannot be seen. */
static void found_unseen_wait(agent *a, watched_process *w, loop_watch *l, long nr)
{
    l->warned_unseen_wait = true; /* also with --quiet: it keeps later launch checks quiet */
    if (a->opts->observer == HW_OBSERVER_AUTO && !w->kernel_refused && !hw_kobs_owns(a->kobs, w->page))
        w->wants_kernel = true; /* the agent moves it to the kernel observer (registry.c) */
    else if (!a->opts->quiet)
        fprintf(stderr,
                "hangwatch: warning: pid %d waits in system call %ld without going through glibc's wrappers (a raw "
                "syscall() or io_uring loop): its loop cannot be observed and its hangs cannot be seen (see "
                "docs/limits.md)\n",
                (int)w->pid, nr);
}

/* A process still launching is looked at every LAUNCH_LOOK_NS during its
 * first threshold: a loop waiting through raw system calls or io_uring is
 * found from its first turns, so a hang it has soon after start is not
 * taken for a launch (and lost when it never reaches a seen wait point).
 * Two looks in a row must find it in a wait call: one start-up poll (a DNS
 * lookup inside libc) is not a loop.  Later, the look at each threshold
 * (check_loop) goes on finding it, at no cost to a long quiet launch. */
#define LAUNCH_LOOK_NS 50000000ull

static void look_at_launch(agent *a, watched_process *w, loop_watch *l, uint64_t now)
{
    long nr = hw_task_syscall(w->pid, l->tid);
    if (!hw_is_wait_syscall(nr))
        l->launch_waits_seen = 0;
    else if (++l->launch_waits_seen >= 2)
        found_unseen_wait(a, w, l, nr);
    if (!l->warned_unseen_wait && now + LAUNCH_LOOK_NS < l->next_wake_ns)
        l->next_wake_ns = now + LAUNCH_LOOK_NS;
}

static void check_loop(agent *a, watched_process *w, loop_watch *l, hw_loop_reading r, uint64_t now)
{
    pid_t tid = l->tid;
    switch (a->opts->detector_kind) {
    case HW_DETECTOR_SEMAPHORE: {
        /* The seeds' semaphore detector, as it was: every 50 ms, and the
         * ping while the loop waits. */
        if (now >= l->semaphore_next_ns) {
            l->semaphore_next_ns = now + l->semaphore.interval_ns;
            if (hw_semaphore_step(&l->semaphore, &r)) {
                hw_check c = {.verdict = HW_VERDICT_HANG, .seq = r.seq, .busy_start_ns = r.busy_start_ns,
                              .busy_ns = r.busy && now > r.busy_start_ns ? now - r.busy_start_ns : 0};
                report_without_hang(a, w, l, &c);
            }
        }
        check_ping(a, w, l, &r, now, true);
        if (l->semaphore_next_ns < l->next_wake_ns)
            l->next_wake_ns = l->semaphore_next_ns;
        return;
    }
    case HW_DETECTOR_PING:
        check_ping(a, w, l, &r, now, false);
        return;
    case HW_DETECTOR_FRAME_GAP:
        check_frames(a, w, l, &r, now);
        return;
    case HW_DETECTOR_RUNLOOP:
    default:
        break;
    }
    if (l->hung) {
        if (r.seq == l->hung_seq) {
            if (now >= l->next_stop_look_ns) {
                l->next_stop_look_ns = now + STOPPED_LOOK_NS;
                if (thread_stopped(w->pid, tid)) {
                    /* Stopped while hung (a debugger attached to look at
                     * the hang, SIGSTOP): the hang ends here, between the
                     * last look that saw it run and now. */
                    l->last_seen_hung_ns = l->last_seen_running_ns;
                    hang_finish(a, l, now, "stopped", true);
                    hold_stopped(l, r.seq, now);
                    return;
                }
                l->last_seen_running_ns = now;
            }
            l->last_seen_hung_ns = now;
            hang_look_again(a, w, l, &r, now);
            if (l->next_stop_look_ns < l->next_wake_ns)
                l->next_wake_ns = l->next_stop_look_ns;
            return;
        }
        /* A pause ends the stretch as a wait does (hangwatch_loop_pause). */
        hang_finish(a, l, now, hw_loop_paused(&w->page->slots[l->slot]) ? "paused" : "returned_to_wait", true);
    }

    if (l->held) {
        /* Stopped at the last look: still?  Then its clock starts again. */
        if (r.busy && thread_stopped(w->pid, tid)) {
            hold_stopped(l, r.seq, now);
            return;
        }
        l->held = false;
    }

    hw_check c = hw_detector_check(&l->detector, &r, now);
    c.launch = c.launch && is_launch(w, l, r.seq);
    l->next_wake_ns = l->detector.next_check_ns;
    /* A process another tracer holds (a debugger that attached, strace) may
     * be stopped at any moment: look at its state every STOPPED_LOOK_NS
     * while it is busy, so a breakpoint held for less than the threshold is
     * not taken for part of a hang either. */
    if (c.verdict == HW_VERDICT_BUSY && hw_task_tracer(w->pid, tid) > 0) {
        if (thread_stopped(w->pid, tid)) {
            hold_stopped(l, r.seq, now);
            return;
        }
        if (now + STOPPED_LOOK_NS < l->next_wake_ns)
            l->next_wake_ns = now + STOPPED_LOOK_NS;
    }
    if (c.verdict != HW_VERDICT_HANG && r.busy && !l->warned_unseen_wait && is_launch(w, l, r.seq) &&
        !hw_kobs_owns(a->kobs, w->page) && now < l->watch_start_ns + a->opts->detector.threshold_ns)
        look_at_launch(a, w, l, now);
    if (a->opts->stutter && c.verdict != HW_VERDICT_HANG) {
        /* The stretch as the detector counts it: from its restart, if the
         * process was stopped in it. */
        hw_loop_reading sr = r;
        if (sr.busy && sr.seq == l->detector.restart_seq && sr.busy_start_ns < l->detector.restart_ns)
            sr.busy_start_ns = l->detector.restart_ns;
        hw_stutter_verdict v = hw_stutter_observe(&l->stutter, &sr, now);
        if (v.stutter && r.busy) {
            /* Stuck in one of the stalls right now: capture it. */
            l->last_stutter = v;
            hw_check sc = c;
            sc.stutter = true;
            sc.launch = false;
            report_without_hang(a, w, l, &sc);
        }
        if (now + STUTTER_LOOK_NS < l->next_wake_ns)
            l->next_wake_ns = now + STUTTER_LOOK_NS;
    }
    if (c.verdict != HW_VERDICT_HANG)
        return;

    /* A stopped process (SIGSTOP, job control, a debugger) is not hung: its
     * loop cannot run.  Restart its busy clock and look again soon. */
    bool stopped = thread_stopped(w->pid, tid);
    /* A process that has never reached a loop and is waiting for a child
     * (a shell, make, a wrapper script) is supervising, not launching: the
     * child is watched on its own. */
    long blocked_in = c.launch ? hw_task_syscall(w->pid, tid) : -1;
    bool supervising = blocked_in == SYS_wait4 || blocked_in == SYS_waitid;
    /* Still "launching" but blocked in a wait system call that never went
     * through glibc's wrappers: a raw syscall() or io_uring loop the
     * observer cannot see.  Say so instead of reporting a launch hang. */
    bool unseen_wait = hw_is_wait_syscall(blocked_in) || (c.launch && l->warned_unseen_wait);
    if (unseen_wait && !l->warned_unseen_wait)
        found_unseen_wait(a, w, l, blocked_in);
    if (stopped) {
        hold_stopped(l, r.seq, now);
        return;
    }
    if (supervising || unseen_wait) {
        hw_detector_restart_clock(&l->detector, r.seq, now);
        l->next_wake_ns = now + hw_detector_poll_interval(&a->opts->detector);
        return;
    }

    hang_begin(a, w, l, c);
}

static loop_watch *loop_watch_new(agent *a, const watched_process *w, unsigned slot, pid_t tid, uint64_t now)
{
    loop_watch *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    l->slot = slot;
    l->tid = tid;
    /* Only coarse-clock stamps need the slack (clock_source.c). */
    hw_detector_config cfg = a->opts->detector;
    cfg.clock_slack_ns = clock_source_slack(a, w);
    hw_detector_init(&l->detector, &cfg, now);
    l->next_wake_ns = l->detector.next_check_ns;
    if (a->opts->early_sampling)
        l->sampler = sampler_new(a->opts->ring_size);
    hw_stutter_config scfg;
    hw_stutter_config_default(&scfg, a->opts->detector.threshold_ns);
    hw_stutter_init(&l->stutter, &scfg, now);
    hw_semaphore_init(&l->semaphore);
    hw_ping_init(&l->ping, a->opts->detector.threshold_ns, now);
    hw_frame_gap_init(&l->frames, a->opts->detector.threshold_ns);
    l->late_frames_seen = atomic_load_explicit(&w->page->slots[slot].late_frames, memory_order_acquire);
    l->watch_start_ns = now;
    return l;
}

static void loop_watch_free(loop_watch *l)
{
    if (!l)
        return;
    sampler_free(l->sampler);
    free(l);
}

/* Does thread `tid` belong to process `pid`?  (The page says so; check.) */
static bool thread_of(pid_t pid, pid_t tid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task/%d", (int)pid, (int)tid);
    struct stat st;
    return tid > 0 && stat(path, &st) == 0;
}

/* The loop threads the page announces: slot 0 (the main thread) always,
 * the others with --threads=loops.  A slot whose thread changed starts
 * afresh. */
static void refresh_loops(agent *a, watched_process *w, uint64_t now)
{
    unsigned slots = a->opts->all_loop_threads ? HW_PAGE_SLOTS : 1;
    for (unsigned i = 0; i < slots; i++) {
        pid_t tid = i == 0 ? w->pid : (pid_t)atomic_load_explicit(&w->page->slots[i].tid, memory_order_acquire);
        loop_watch *l = w->loops[i];
        if (l && l->tid == tid)
            continue;
        if (l) {
            if (l->hung)
                hang_finish(a, l, now, "thread_exited", false);
            loop_watch_free(l);
            w->loops[i] = NULL;
        }
        if (tid > 0 && (i == 0 || thread_of(w->pid, tid)))
            w->loops[i] = loop_watch_new(a, w, i, tid, now);
    }
}

void check_process(agent *a, watched_process *w, uint64_t now)
{
    refresh_loops(a, w, now);
    w->next_wake_ns = UINT64_MAX;
    for (unsigned i = 0; i < HW_PAGE_SLOTS; i++) {
        loop_watch *l = w->loops[i];
        if (!l)
            continue;
        if (l->next_wake_ns <= now) {
            hw_loop_reading r;
            if (!clock_source_read(a, w, i, &r)) {
                l->next_wake_ns = now + 1000000; /* turning over fast: look again soon */
            } else {
                /* A stopped thread has nothing to sample (and a debugger's
                 * would refuse a stop). */
                uint64_t sample_at = l->sampler && !l->held ? sample_if_due(a, w, l, &r, now) : UINT64_MAX;
                check_loop(a, w, l, r, now);
                if (sample_at < l->next_wake_ns)
                    l->next_wake_ns = sample_at;
            }
        }
        if (l->next_wake_ns < w->next_wake_ns)
            w->next_wake_ns = l->next_wake_ns;
    }
    uint64_t cpu_tick = cpu_high_check(a, w, now);
    if (cpu_tick < w->next_wake_ns)
        w->next_wake_ns = cpu_tick;
    /* New loop threads are found on the next look. */
    uint64_t rescan = now + hw_detector_poll_interval(&a->opts->detector);
    if (a->opts->all_loop_threads && rescan < w->next_wake_ns)
        w->next_wake_ns = rescan;
}


/* Early sampling's Point Stack of stretch `seq`, as addresses, for a report. */
void sampler_fill_request(sampler *s, watched_process *w, uint64_t seq, report_request *req)
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
    /* Their Python frames are named now, while the process most likely lives. */
    hw_python_namer *namer = python_namer(w);
    for (size_t i = 0; namer && i < req->ps_depth; i++) {
        if (!hw_python_key_is_python(req->ps_pcs[i]))
            continue;
        if (!req->ps_named && !(req->ps_named = calloc(req->ps_depth, sizeof *req->ps_named)))
            break;
        hw_python_frame_from_key(namer, req->ps_pcs[i], &req->ps_named[i]);
    }
    for (size_t i = 0; namer && i < req->ring.addr_count; i++) {
        if (!hw_python_key_is_python(req->ring.addrs[i].pc))
            continue;
        if (!req->ring_named && !(req->ring_named = calloc(req->ring.addr_count, sizeof *req->ring_named)))
            break;
        hw_python_frame_from_key(namer, req->ring.addrs[i].pc, &req->ring_named[i]);
    }
    req->main_thread_state = "collected";
    req->main_thread_reason = "early_sampling";
}

/* Every loop of a process: its hangs are closed by the caller first. */
void free_loops(agent *a, watched_process *w)
{
    for (unsigned i = 0; i < HW_PAGE_SLOTS; i++) {
        loop_watch *l = w->loops[i];
        if (l && l->hung)
            hang_finish(a, l, hw_monotonic_ns(), "agent_exited", true);
        loop_watch_free(l);
        w->loops[i] = NULL;
    }
}
