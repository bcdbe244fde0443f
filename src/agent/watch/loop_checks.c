/*
 * loop_checks.c - looking at each watched loop on its detector's schedule.
 *
 * For every loop thread a process's page announces (the main thread; every
 * loop thread with --threads=loops) this keeps the detector in force: the
 * runloop detector (Matrix's busy stretches, exact or periodic), or one of
 * the seeds' alternatives kept for comparison (the semaphore's 50 ms state
 * samples, ANREye's ping, the frame gap).  It decides *that* something is a
 * hang and hands it to hang_lifecycle.c; early_sampler.c takes early
 * sampling's samples when they are due.
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

/* Stopped by a signal (SIGSTOP, job control: 'T') or held by a tracer (a
 * debugger at a breakpoint, after an attach: 't').  The agent's own
 * captures are over by the time it looks (same thread). */
static bool thread_stopped(pid_t pid, pid_t tid)
{
    char state = hw_task_state(pid, tid);
    return state == 'T' || state == 't';
}

/* The loop's process was seen stopped in busy stretch `seq`: its loop
 * cannot run, so nothing of the stretch so far is held against it; the
 * busy clock (and stutter's) starts again now, and its state is looked at
 * again soon so that the clock starts again close to when it runs again
 * (decisions.md §33); the `time` section's window starts there too. */
static void hold_stopped(watched_process *w, loop_watch *l, uint64_t seq, uint64_t now)
{
    hang_time_note_stop(w, l, seq);
    hw_detector_restart_clock(&l->detector, seq, now);
    hw_stutter_restart(&l->stutter, seq, now);
    l->held = true;
    l->next_wake_ns = now + STOPPED_LOOK_NS;
}

/*
 * The sub-thread ping (ping_detector.h).  A ping is posted by the program's
 * own post function when the C library was given one (answered when its
 * task stores the token in the slot); otherwise the loop's next pass
 * through its wait is the answer, as a task queued on it would run there.
 * `waiting_only`: post only while the loop waits (the semaphore detector's
 * ping, seeds/002).
 */
/* Are the slots' ping and frame fields the C library's?  An observer that
 * learns the loop's wait keeps other things there (loop_state.h). */
static bool slots_are_the_library_s(const watched_process *w)
{
    return !(atomic_load_explicit(&w->page->flags, memory_order_acquire) & HW_PAGE_FLAG_LOOP_WAITS);
}

static void check_ping(agent *a, watched_process *w, loop_watch *l, const hw_loop_reading *r, uint64_t now,
                       bool waiting_only)
{
    const hw_loop_slot *slot = &w->page->slots[l->slot];
    bool answered = a->pings_by_post && slots_are_the_library_s(w)
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
            hw_exports_ping(a->exports, l->tid, l->slot, l->ping.token);
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
    if (a->opts->frames_from_loop && slots_are_the_library_s(w)) {
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
        w->wants_kernel = true; /* the agent moves it to the kernel observer (kernel_watch.c) */
    else if (!a->opts->quiet)
        fprintf(stderr,
                "hangwatch: warning: pid %d waits in system call %ld without going through glibc's wrappers (a raw "
                "syscall() or io_uring loop): its loop cannot be observed and its hangs cannot be seen (see "
                "docs/limits.md)\n",
                (int)w->pid, nr);
}

/* A process still launching is looked at about every 50 ms during its
 * first threshold: a loop waiting through raw system calls or io_uring is
 * found from its first turns, so a hang it has soon after start is not
 * taken for a launch (and lost when it never reaches a seen wait point).
 * Two looks in a row must find it in a wait call: one start-up poll (a DNS
 * lookup inside libc) is not a loop.  A look that finds it "running" (on a
 * CPU, or woken and waiting for one: the kernel says the same of both)
 * breaks no row: on a busy machine a loop woken by its timer waits for a
 * CPU, and looks in step with that timer (50 ms against a 100 ms timeout)
 * found it so at every other look and never moved it (a loaded test run
 * lost a hang so).  The looks are spread over 40..60 ms, so that they keep
 * in step with no loop's period.  Later, the look at each threshold
 * (check_loop) goes on finding it, at no cost to a long quiet launch. */
#define LAUNCH_LOOK_MIN_NS 40000000ull
#define LAUNCH_LOOK_SPREAD_NS 20000000ull

static uint64_t next_launch_look(loop_watch *l, uint64_t now)
{
    /* a small multiplicative hash of the thread and the look's number */
    uint32_t h = ((uint32_t)l->tid ^ (++l->launch_looks * 0x9e3779b9u)) * 0x85ebca6bu;
    return now + LAUNCH_LOOK_MIN_NS + (uint64_t)(h >> 8) % LAUNCH_LOOK_SPREAD_NS;
}

static void look_at_launch(agent *a, watched_process *w, loop_watch *l, uint64_t now)
{
    long nr = hw_task_syscall(w->pid, l->tid);
    if (nr >= 0 && !hw_is_wait_syscall(nr))
        l->launch_waits_seen = 0;
    else if (nr >= 0 && ++l->launch_waits_seen >= 2)
        found_unseen_wait(a, w, l, nr);
    uint64_t next = next_launch_look(l, now);
    if (!l->warned_unseen_wait && next < l->next_wake_ns)
        l->next_wake_ns = next;
}

/* The seeds' other detectors, kept for comparison (--detector): false for
 * the runloop detector, which check_loop follows. */
static bool check_other_detector(agent *a, watched_process *w, loop_watch *l, const hw_loop_reading *r,
                                 uint64_t now)
{
    switch (a->opts->detector_kind) {
    case HW_DETECTOR_SEMAPHORE:
        /* The seeds' semaphore detector, as it was: every 50 ms, and the
         * ping while the loop waits. */
        if (now >= l->semaphore_next_ns) {
            l->semaphore_next_ns = now + l->semaphore.interval_ns;
            if (hw_semaphore_step(&l->semaphore, r)) {
                hw_check c = {.verdict = HW_VERDICT_HANG, .seq = r->seq, .busy_start_ns = r->busy_start_ns,
                              .busy_ns = r->busy && now > r->busy_start_ns ? now - r->busy_start_ns : 0};
                report_without_hang(a, w, l, &c);
            }
        }
        check_ping(a, w, l, r, now, true);
        if (l->semaphore_next_ns < l->next_wake_ns)
            l->next_wake_ns = l->semaphore_next_ns;
        return true;
    case HW_DETECTOR_PING:
        check_ping(a, w, l, r, now, false);
        return true;
    case HW_DETECTOR_FRAME_GAP:
        check_frames(a, w, l, r, now);
        return true;
    case HW_DETECTOR_RUNLOOP:
    default:
        return false;
    }
}

/* A loop whose stretch was reported as hung: still in it (true: looked at
 * again, or ended by a stop), or out of it (false: the hang is over and the
 * loop is checked afresh). */
static bool check_hung_loop(agent *a, watched_process *w, loop_watch *l, const hw_loop_reading *r, uint64_t now)
{
    if (r->seq != l->hung_seq) {
        /* A pause ends the stretch as a wait does (hangwatch_loop_pause). */
        hang_finish(a, l, now, hw_loop_paused(&w->page->slots[l->slot]) ? "paused" : "returned_to_wait", true);
        return false;
    }
    if (now >= l->next_stop_look_ns) {
        l->next_stop_look_ns = now + STOPPED_LOOK_NS;
        if (thread_stopped(w->pid, l->tid)) {
            /* Stopped while hung (a debugger attached to look at the hang,
             * SIGSTOP): the hang ends here, between the last look that saw
             * it run and now. */
            l->last_seen_hung_ns = l->last_seen_running_ns;
            hang_finish(a, l, now, "stopped", true);
            hold_stopped(w, l, r->seq, now);
            return true;
        }
        l->last_seen_running_ns = now;
    }
    l->last_seen_hung_ns = now;
    hang_look_again(a, w, l, r, now);
    if (l->next_stop_look_ns < l->next_wake_ns)
        l->next_wake_ns = l->next_stop_look_ns;
    return true;
}

/* --stutter: the stretch as the detector counts it (from its restart, if
 * the process was stopped in it) into the stutter window; a loop stuck in
 * one of the stalls right now is captured. */
static void check_stutter(agent *a, watched_process *w, loop_watch *l, const hw_loop_reading *r,
                          const hw_check *c, uint64_t now)
{
    hw_loop_reading sr = *r;
    if (sr.busy && sr.seq == l->detector.restart_seq && sr.busy_start_ns < l->detector.restart_ns)
        sr.busy_start_ns = l->detector.restart_ns;
    hw_stutter_verdict v = hw_stutter_observe(&l->stutter, &sr, now);
    if (v.stutter && r->busy) {
        l->last_stutter = v;
        hw_check sc = *c;
        sc.stutter = true;
        sc.launch = false;
        report_without_hang(a, w, l, &sc);
    }
    if (now + STUTTER_LOOK_NS < l->next_wake_ns)
        l->next_wake_ns = now + STUTTER_LOOK_NS;
}

/* The runloop detector said hang: is it one?  A stopped process (SIGSTOP,
 * job control, a debugger) is not hung: its loop cannot run, so its busy
 * clock restarts and it is looked at again soon.  Nor is one still
 * launching that waits for a child, or that waits where its observer
 * cannot see. */
static void check_hang_verdict(agent *a, watched_process *w, loop_watch *l, const hw_loop_reading *r,
                               hw_check c, uint64_t now)
{
    bool stopped = thread_stopped(w->pid, l->tid);
    /* A process that has never reached a loop and is waiting for a child
     * (a shell, make, a wrapper script) is supervising, not launching: the
     * child is watched on its own. */
    long blocked_in = c.launch ? hw_task_syscall(w->pid, l->tid) : -1;
    bool supervising = blocked_in == SYS_wait4 || blocked_in == SYS_waitid;
    /* Still "launching" but blocked in a wait system call that never went
     * through glibc's wrappers: a raw syscall() or io_uring loop the
     * observer cannot see.  Say so instead of reporting a launch hang. */
    bool unseen_wait = hw_is_wait_syscall(blocked_in) || (c.launch && l->warned_unseen_wait);
    if (unseen_wait && !l->warned_unseen_wait)
        found_unseen_wait(a, w, l, blocked_in);
    if (stopped) {
        hold_stopped(w, l, r->seq, now);
        return;
    }
    if (supervising || unseen_wait) {
        hw_detector_restart_clock(&l->detector, r->seq, now);
        l->next_wake_ns = now + hw_detector_poll_interval(&a->opts->detector);
        return;
    }
    hang_begin(a, w, l, c);
}

/* A loop whose hangs cannot be told is never silent (decisions.md §15):
 * a main thread that has made no loop wait in its first NO_LOOP_WAIT_NS,
 * or whose loop's wait has moved UNCLEAR_WAIT_MOVES times, is counted and,
 * for the processes the user named (the program run, the pids watched),
 * said once on stderr with what to do. */
#define NO_LOOP_WAIT_NS 10000000000ull
#define UNCLEAR_WAIT_MOVES 8u

static bool named_by_the_user(const agent *a, const watched_process *w)
{
    if (w->pid == a->child)
        return true;
    for (size_t i = 0; i < a->opts->watch_pid_count; i++)
        if (a->opts->watch_pids[i] == w->pid)
            return true;
    return false;
}

static void say_if_unseen(agent *a, watched_process *w, loop_watch *l, const hw_loop_reading *r, uint64_t now)
{
    if (l->said_unseen || l->warned_unseen_wait || l->slot != 0 || a->opts->all_loop_threads)
        return;
    const hw_loop_slot *slot = &w->page->slots[l->slot];
    bool learns = (atomic_load_explicit(&w->page->flags, memory_order_acquire) & HW_PAGE_FLAG_LOOP_WAITS) != 0;
    uint32_t moves = learns ? atomic_load_explicit(&slot->loop_wait_moves, memory_order_relaxed) : 0;
    bool no_wait = r->busy && r->seq == 1 && now >= l->watch_start_ns + NO_LOOP_WAIT_NS;
    if (!no_wait && moves < UNCLEAR_WAIT_MOVES)
        return;
    l->said_unseen = true;
    hw_metrics_loop_unseen(hw_exports_metrics(a->exports), w->metrics_name,
                           no_wait ? HW_METRICS_UNSEEN_NO_LOOP_WAIT : HW_METRICS_UNSEEN_WAIT_UNCLEAR);
    if (a->opts->quiet || !named_by_the_user(a, w))
        return;
    char name[PROCESS_NAME_TEXT];
    process_name_text(w->pid, name);
    if (no_wait)
        fprintf(stderr,
                "hangwatch: note: pid %d (%s) has made no event-loop wait (epoll, poll, select) on its main thread "
                "in its first 10 s: a hang is told at a loop's wait, so none of its can be; if its loop runs on "
                "another thread, use --threads loops; or tell hangwatch where its loop turns with the C library "
                "(docs/api.md)\n",
                (int)w->pid, name);
    else
        fprintf(stderr,
                "hangwatch: note: pid %d (%s): its loop's wait has moved %u times between calls that each looked "
                "like the loop's, so it cannot be told from waits nested in callbacks and a hang may be missed: "
                "--wait-site any takes every wait for the loop's, or tell hangwatch where its loop turns with the C "
                "library (docs/api.md, docs/decisions.md section 15)\n",
                (int)w->pid, name, moves);
}

/* A busy stretch over before the look at its threshold, which came late
 * (hw_check.ended_unseen: the agent's watch thread did not run on time, a
 * frozen machine, or a capture that held it): it may have been a hang
 * nobody saw, and that is never silent either.  Counted, and said on
 * stderr for the processes the user named, the first UNSEEN_END_LINES
 * times per loop; the total is said with the hangs' at the end. */
#define UNSEEN_END_LINES 3u

static void say_unseen_end(agent *a, const watched_process *w, loop_watch *l, const hw_check *c)
{
    if (is_launch(w, l, c->unseen_seq))
        return; /* a start-up that was no loop is no hang: a command is not a launch hang */
    l->unseen_ends++;
    a->unseen_ends++;
    hw_metrics_stretch_unseen(hw_exports_metrics(a->exports), w->metrics_name);
    if (a->opts->quiet || !named_by_the_user(a, w) || l->unseen_ends > UNSEEN_END_LINES)
        return;
    char name[PROCESS_NAME_TEXT], lasted[64];
    process_name_text(w->pid, name);
    if (c->unseen_min_ns > 0)
        snprintf(lasted, sizeof lasted, "%.2f to %.2f s", (double)c->unseen_min_ns / 1e9,
                 (double)c->unseen_max_ns / 1e9);
    else
        snprintf(lasted, sizeof lasted, "up to %.2f s", (double)c->unseen_max_ns / 1e9);
    fprintf(stderr,
            "hangwatch: note: pid %d (%s): a busy stretch of its %s thread ended unseen after %s: hangwatch's "
            "look at its threshold came %.2f s late (the machine ran hangwatch late, or a capture held it), so "
            "it may have been a hang%s\n",
            (int)w->pid, name, l->slot == 0 ? "main" : "loop", lasted, (double)c->unseen_late_ns / 1e9,
            l->unseen_ends == UNSEEN_END_LINES ? " (further ones are counted, not said)" : "");
}

/* Does thread `tid` belong to process `pid`?  (The page says so; check.) */
static bool thread_of(pid_t pid, pid_t tid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task/%d", (int)pid, (int)tid);
    struct stat st;
    return tid > 0 && stat(path, &st) == 0;
}

/*
 * A loop thread other than the main one that ended (a node worker, a
 * thread pool's loop) while its slot said busy: the kernel observer sees
 * no thread exit, and the preloaded observer none that bypasses its
 * destructor.  Its end is not a hang, and never a hang of its process: a
 * hang of its own ends there ("thread_exited"), the slot is freed and the
 * loop is no longer looked at.  Looked for only once it has been busy for
 * a threshold, where a hang would begin or go on.
 */
static bool loop_thread_ended(agent *a, watched_process *w, loop_watch *l, const hw_loop_reading *r, uint64_t now)
{
    if (l->slot == 0 || !r->busy || now < r->busy_start_ns + a->opts->detector.threshold_ns ||
        thread_of(w->pid, l->tid))
        return false;
    if (l->hung)
        hang_finish(a, l, now, "thread_exited", false);
    hw_kobs_thread_ended(a->kobs, w->page, l->slot);
    l->thread_gone = true;
    l->next_wake_ns = UINT64_MAX;
    return true;
}

static void check_loop(agent *a, watched_process *w, loop_watch *l, hw_loop_reading r, uint64_t now)
{
    pid_t tid = l->tid;
    if (loop_thread_ended(a, w, l, &r, now))
        return;
    say_if_unseen(a, w, l, &r, now);
    if (check_other_detector(a, w, l, &r, now))
        return;
    if (l->hung && check_hung_loop(a, w, l, &r, now))
        return;
    if (l->held) {
        /* Stopped at the last look: still?  Then its clock starts again. */
        if (r.busy && thread_stopped(w->pid, tid)) {
            hold_stopped(w, l, r.seq, now);
            return;
        }
        l->held = false;
    }

    hw_check c = hw_detector_check(&l->detector, &r, now);
    if (c.ended_unseen)
        say_unseen_end(a, w, l, &c);
    c.launch = c.launch && is_launch(w, l, r.seq);
    l->next_wake_ns = l->detector.next_check_ns;
    /* A process another tracer holds (a debugger that attached, strace) may
     * be stopped at any moment: look at its state every STOPPED_LOOK_NS
     * while it is busy, so a breakpoint held for less than the threshold is
     * not taken for part of a hang either. */
    if (c.verdict == HW_VERDICT_BUSY && hw_task_tracer(w->pid, tid) > 0) {
        if (thread_stopped(w->pid, tid)) {
            hold_stopped(w, l, r.seq, now);
            return;
        }
        if (now + STOPPED_LOOK_NS < l->next_wake_ns)
            l->next_wake_ns = now + STOPPED_LOOK_NS;
    }
    if (c.verdict != HW_VERDICT_HANG && r.busy && !l->warned_unseen_wait && is_launch(w, l, r.seq) &&
        !hw_kobs_owns(a->kobs, w->page) && now < l->watch_start_ns + a->opts->detector.threshold_ns)
        look_at_launch(a, w, l, now);
    if (a->opts->stutter && c.verdict != HW_VERDICT_HANG)
        check_stutter(a, w, l, &r, &c, now);
    if (c.verdict == HW_VERDICT_HANG)
        check_hang_verdict(a, w, l, &r, c, now);
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
        l->sampler = early_sampler_new(a->opts->ring_size);
    hw_stutter_config scfg;
    hw_stutter_config_default(&scfg, a->opts->detector.threshold_ns);
    hw_stutter_init(&l->stutter, &scfg, now);
    hw_semaphore_init(&l->semaphore);
    hw_ping_init(&l->ping, a->opts->detector.threshold_ns, now);
    hw_frame_gap_init(&l->frames, a->opts->detector.threshold_ns);
    l->late_frames_seen =
        slots_are_the_library_s(w) ? atomic_load_explicit(&w->page->slots[slot].late_frames, memory_order_acquire) : 0;
    l->watch_start_ns = now;
    l->process = (watched_process *)w;
    return l;
}

static void loop_watch_free(loop_watch *l)
{
    if (!l)
        return;
    early_sampler_free(l->sampler);
    hang_release_followup(l);
    free(l);
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
        if (l && l->tid == tid && !l->thread_gone)
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
                hw_detector_note_turning(&l->detector,
                                         atomic_load_explicit(&w->page->slots[i].seq, memory_order_acquire), now);
                l->next_wake_ns = now + 1000000; /* turning over fast: look again soon */
            } else {
                /* A stopped thread has nothing to sample (and a debugger's
                 * would refuse a stop). */
                uint64_t sample_at = l->sampler && !l->held ? early_sampler_tick(a, w, l, &r, now) : UINT64_MAX;
                check_loop(a, w, l, r, now);
                uint64_t reading_at = hang_time_note_look(a, w, l, &r, now);
                uint64_t sleep_look_at = hang_time_note_sleep(a, w, l, &r, now);
                if (sleep_look_at < reading_at)
                    reading_at = sleep_look_at;
                if (sample_at < l->next_wake_ns)
                    l->next_wake_ns = sample_at;
                /* (the other detectors' looks keep their own schedules) */
                if (reading_at < l->next_wake_ns && a->opts->detector_kind == HW_DETECTOR_RUNLOOP)
                    l->next_wake_ns = reading_at;
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

/* Every loop of a process: its hangs are closed by the caller first
 * (finish_process). */
void free_loops(watched_process *w)
{
    for (unsigned i = 0; i < HW_PAGE_SLOTS; i++) {
        loop_watch_free(w->loops[i]);
        w->loops[i] = NULL;
    }
}
