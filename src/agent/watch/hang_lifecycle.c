/*
 * hang_lifecycle.c - a hang from its detection to its end.
 *
 * Detection (loop_checks.c) hands a hung stretch here.  What must happen
 * while the hang is going on happens here, on the watch thread: the capture
 * of every thread (ptrace; the program is stopped for well under a
 * millisecond), then the re-checks of Matrix's annealing, and the hang's end
 * with its final duration.  Everything slow (unwinding, symbols, writing) is
 * handed to the report worker, so twenty hangs at once are twenty prompt
 * captures, not twenty reports written one after the other.
 *
 * Launch hangs: every followed process starts busy, so a command that just
 * runs longer than the threshold (a `sleep 3` in a wrapper script) would be
 * a "launch hang".  Its capture is taken at the threshold as for any hang,
 * but the report is held until the process proves to be a loop by reaching
 * its wait point; a process that exits, or execs another program, without
 * ever reaching one was no loop and its held report is dropped.  One killed
 * by a signal, or still launching when the watch ends, is kept: a start-up
 * stuck until somebody gave up is the launch hang people need to see.
 *
 * A hang's tail: a re-check that lands as the hang ends catches whatever
 * the thread runs on its way back to its loop (a response writer, the
 * loop's bookkeeping), not a new place of the hang.  So a re-check whose
 * stretch is over by the end of its stop is dropped, and one that finds it
 * still going is held (loop_watch.followup) until the hang has gone on
 * HANG_TAIL_NS past the end of its stop (however long the stop took); a
 * hang that returns to its wait sooner drops it, counted (decisions.md
 * §39).
 *
 * The exports hear of each hang here: the metrics count it and its hung
 * time, and the C library's callbacks get its start and its end.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "agent/common/cpu_avoid.h"
#include "core/abi/events.h"
#include "watch.h"

/* Is stretch `seq` of this loop the process's launch?  Only the preloaded
 * observer's main thread starts busy at process start (its page says so);
 * the C library's loops and the other threads' slots start waiting, so
 * their first stretch is an ordinary one. */
bool is_launch(const watched_process *w, const loop_watch *l, uint64_t seq)
{
    return seq == 1 && l->slot == 0 &&
           (atomic_load_explicit(&w->page->flags, memory_order_acquire) & HW_PAGE_FLAG_LAUNCHING) != 0;
}

/* ---- capturing for a report ---- */

/* A hang's first capture: what is said of it while the capture still
 * waits for its thread. */
typedef struct unstopped_line {
    uint64_t detected_ns; /* the caller's */
    agent *a;             /* the rest, capture_for_report's */
    watched_process *w;
    loop_watch *l;
    const hw_check *c;
    const hw_blocked_look *look;
    const hw_thread_counters *end;
    report_request *req;
    bool counted; /* the metrics counted the hang then */
} unstopped_line;

/* The hung thread is not stopped CAPTURE_OVERDUE_MS into the capture: its
 * line at detection is said now (on the capture's session thread, the
 * watch thread waiting for it), with its time so far and its state, and
 * the metrics count it with that time's cause. */
static void say_unstopped(void *arg)
{
    unstopped_line *u = arg;
    hw_time_section time;
    hang_time_preview(u->a, u->w, u->l, u->c->seq, u->c->busy_start_ns, u->look, u->end, &time);
    if (!worker_announce_unstopped(u->a->worker, u->req, &time, hw_task_state(u->w->pid, u->l->tid)))
        return;
    hw_exports_hang_begin(u->a->exports, &u->l->metrics, u->w->metrics_name, u->c->launch, u->c->busy_start_ns,
                          u->detected_ns, time.cause, time.partial);
    u->counted = true;
}

/* A report's capture: what is read before the stop and used after it
 * (the capture itself under way or done in between). */
typedef struct report_capture {
    hw_check c;
    hw_blocked_look look;
    hw_thread_counters asleep_until;
    unstopped_line early; /* a hang's first: its line if the stop is late */
    request_capture rc;
} report_capture;

/* Before the capture of a report request for check `c` of loop `l`: what
 * is read of the thread while it still runs (report_capture_launch then
 * stops every thread; report_capture_complete adds the Point Stack chosen
 * from the samples so far: unwinding the kernel's raw samples takes tens
 * of milliseconds, and the stop comes first, at the moment detection asked
 * for). */
static void report_capture_look(agent *a, watched_process *w, loop_watch *l, const hw_check *c,
                                report_request *req, report_capture *rcap)
{
    /* Off the CPU the hung thread last ran on (a spinning one holds it)
     * first, for the reading before the capture, the capture, and all this
     * thread does after it until it sleeps again (cpu_avoid.h); its
     * helper too (hw_capture_helper_take). */
    int cpu = hw_task_last_cpu(w->pid, l->tid);
    rcap->rc.avoid_cpu = cpu;
    hw_cpu_avoid(cpu);
    worker_keep_off(a->worker, cpu); /* the naming thread must not hold that CPU from the stop */
    look_for_runtimes(a, w); /* before the frames are read and the samples named */
    rcap->c = *c;
    req->check = *c;
    req->stutter = l->last_stutter;
    /* What it is blocked in, read before the stop (after it, the thread
     * takes a moment to be back in its call); its time, after, but for a
     * thread asleep in a call: the stop wakes it, and on a busy machine
     * it then waits for a CPU to take the stop on, up to the stop's
     * timeout twice (captures.c).  That wait is the capture's, not the
     * program's: its window ends before the stop. */
    hw_blocked_look_take(w->pid, l->tid, &rcap->look);
    memset(&rcap->asleep_until, 0, sizeof rcap->asleep_until);
    if (hw_look_asleep(&rcap->look))
        hang_time_reading(w, l, &rcap->asleep_until);
}

/* The capture itself, started.  The busy time is measured right before the
 * stop, so the report's block duration is the moment its stacks show (the
 * frame gap's gap is over by then and stays).  A hang's first
 * (`detected_ns` not 0, when it was detected) says its line at detection
 * before the capture ends if its thread does not stop at once. */
static void report_capture_launch(agent *a, watched_process *w, loop_watch *l, report_request *req,
                                  uint64_t detected_ns, report_capture *rcap)
{
    uint64_t now = hw_monotonic_ns();
    if (a->opts->detector_kind != HW_DETECTOR_FRAME_GAP && rcap->c.busy_start_ns != 0 && now > rcap->c.busy_start_ns)
        req->check.busy_ns = now - rcap->c.busy_start_ns;
    rcap->early = (unstopped_line){.detected_ns = detected_ns, .a = a, .w = w, .l = l, .c = &rcap->c,
                                   .look = &rcap->look, .end = &rcap->asleep_until, .req = req};
    capture_request_start(a, w, l->tid, now, req, detected_ns != 0 ? say_unstopped : NULL,
                          detected_ns != 0 ? &rcap->early : NULL, &rcap->rc);
}

/* After the capture: the samples' Point Stack and the time section. */
static void report_capture_complete(agent *a, watched_process *w, loop_watch *l, report_request *req,
                                    report_capture *rcap)
{
    early_sampler_fill_request(l->sampler, rcap->c.seq, req);
    if (!req->snap.process_exited)
        hang_time_section(a, w, l, rcap->c.seq, rcap->c.busy_start_ns, &rcap->look, &rcap->asleep_until,
                          &req->time);
    else
        req->time.missing = "the process ended during the capture";
}

static void capture_for_report(agent *a, watched_process *w, loop_watch *l, const hw_check *c,
                               report_request *req)
{
    report_capture rcap;
    report_capture_look(a, w, l, c, req, &rcap);
    report_capture_launch(a, w, l, req, 0, &rcap);
    capture_request_finish(a, w, req, &rcap.rc);
    report_capture_complete(a, w, l, req, &rcap);
}

/* A report of something that is not a hang with a lifecycle (a semaphore
 * verdict, stutter). */
void report_without_hang(agent *a, watched_process *w, loop_watch *l, const hw_check *c)
{
    report_request *req = calloc(1, sizeof *req);
    if (!req)
        return;
    capture_for_report(a, w, l, c, req);
    hw_metrics_hang_detected(hw_exports_metrics(a->exports), w->metrics_name,
                             c->stutter ? HW_METRICS_STUTTER : HW_METRICS_HANG, req->time.cause, req->time.partial);
    submit_request(a, w, NULL, req, false);
    free(req);
}

/* ---- a hang's life ---- */

/* A hang begun: its request, and its capture under way or done. */
struct begun_hang {
    watched_process *w;
    loop_watch *l;
    hw_check c;
    uint64_t detected_ns;
    report_request *req;
    report_capture cap;
};

/* The capture of hang `b` is over: its line, its report, and the first
 * annealing look one check period on. */
static void hang_begin_complete(agent *a, struct begun_hang *b)
{
    watched_process *w = b->w;
    loop_watch *l = b->l;
    report_capture_complete(a, w, l, b->req, &b->cap);
    /* Counted once its cause is known (the capture's time section, or
     * what say_unstopped read). */
    if (!b->cap.early.counted)
        hw_exports_hang_begin(a->exports, &l->metrics, w->metrics_name, b->c.launch, l->hung_start_ns,
                              b->detected_ns, b->req->time.cause, b->req->time.partial);
    worker_announce(a->worker, b->req); /* the line now; the report's follows */
    submit_request(a, w, l->hang, b->req, false);
    free(b->req);
    free(b);
    l->next_capture_ns = hw_monotonic_ns() + a->opts->detector.check_period_ns;
}

/* Keep `b` for the end of the pass over the processes, if one is under way
 * and has room, and holds nothing of its process yet. */
static bool batch_takes(agent *a, struct begun_hang *b)
{
    hang_batch *hb = &a->begun;
    if (!hb->open || hb->count == HANG_BATCH_MAX || hang_batch_holds(a, b->w))
        return false;
    hb->items[hb->count++] = b;
    return true;
}

/* The stretch `c` is a new hang: capture it (now, or, when `may_wait`,
 * with the other hangs this pass over the processes found: hang_batch_run),
 * report it, and look again after one check period (annealing). */
static void begin_hang(agent *a, watched_process *w, loop_watch *l, hw_check c, bool may_wait)
{
    uint64_t now = hw_monotonic_ns();
    l->hung = true;
    l->hung_seq = c.seq;
    l->hung_start_ns = c.busy_start_ns;
    l->last_seen_hung_ns = now;
    l->last_seen_running_ns = now; /* the detector looked at its state just now */
    l->next_stop_look_ns = now + STOPPED_LOOK_NS;
    l->resets_seen = 0;
    l->wait_previous = l->wait_current = 1;
    /* A launch's reports wait until the process proves to be a loop
     * (docs/decisions.md, "Launch hangs"). */
    l->hang = worker_new_hang(c.launch);
    l->hang_look.valid = false;
    l->next_wake_ns = now + HANG_END_POLL_NS;
    l->next_capture_ns = now + a->opts->detector.check_period_ns; /* (from the capture's end, once over) */
    hw_exports_event(a->exports, HW_EVENT_HANG, l->tid, c.busy_ns, 0, NULL);
    struct begun_hang *b = calloc(1, sizeof *b);
    report_request *req = b != NULL ? calloc(1, sizeof *req) : NULL;
    if (req == NULL) {
        free(b);
        hw_exports_hang_begin(a->exports, &l->metrics, w->metrics_name, c.launch, l->hung_start_ns, now,
                              HW_CAUSE_UNKNOWN, false);
        return;
    }
    *b = (struct begun_hang){.w = w, .l = l, .c = c, .detected_ns = now, .req = req};
    if (may_wait && batch_takes(a, b))
        return;
    report_capture_look(a, w, l, &b->c, req, &b->cap);
    report_capture_launch(a, w, l, req, now, &b->cap);
    capture_request_finish(a, w, req, &b->cap.rc);
    hang_begin_complete(a, b);
}

void hang_begin(agent *a, watched_process *w, loop_watch *l, hw_check c)
{
    begin_hang(a, w, l, c, true);
}

void hang_batch_open(agent *a)
{
    a->begun.open = true;
}

bool hang_batch_holds(const agent *a, const watched_process *w)
{
    for (size_t i = 0; i < a->begun.count; i++)
        if (a->begun.items[i]->w == w)
            return true;
    return false;
}

/* The hangs the pass found, captured together: every one looked at while
 * none is stopped (one's stop must not be what another's look sees: a
 * child the parent waits for, found running as it woke for its own stop),
 * then every capture started, one process after another, then each waited
 * for (in the reverse order, as snapshot.h asks), then each reported.
 * Processes found hung at once are stopped at once, not each after the
 * others' captures: on a busy machine a hung thread can take tens of
 * milliseconds to get a CPU to stop on, and the tenth of them was captured
 * half a second late. */
void hang_batch_run(agent *a)
{
    hang_batch *hb = &a->begun;
    hb->open = false;
    for (size_t i = 0; i < hb->count; i++) {
        struct begun_hang *b = hb->items[i];
        report_capture_look(a, b->w, b->l, &b->c, b->req, &b->cap);
    }
    for (size_t i = 0; i < hb->count; i++) {
        struct begun_hang *b = hb->items[i];
        report_capture_launch(a, b->w, b->l, b->req, b->detected_ns, &b->cap);
    }
    for (size_t i = hb->count; i-- > 0;)
        capture_request_finish(a, hb->items[i]->w, hb->items[i]->req, &hb->items[i]->cap.rc);
    for (size_t i = 0; i < hb->count; i++)
        hang_begin_complete(a, hb->items[i]);
    hb->count = 0;
}

/* A hang one of the comparison detectors found: it started at `start_ns`
 * and has lasted `busy_ns`.  Never a launch. */
void hang_found(agent *a, watched_process *w, loop_watch *l, const hw_loop_reading *r, uint64_t start_ns,
                uint64_t busy_ns)
{
    hw_check c = {.verdict = HW_VERDICT_HANG, .seq = r->seq, .busy_start_ns = start_ns, .busy_ns = busy_ns};
    uint64_t wake = l->next_wake_ns;
    begin_hang(a, w, l, c, false); /* (captured now: it may be closed at once, check_frames) */
    l->next_wake_ns = wake; /* these detectors keep their own schedule */
}

/* Is the stretch reported as hung still going on? */
static bool still_hung(const watched_process *w, const loop_watch *l)
{
    hw_loop_reading r;
    return !hw_loop_read(&w->page->slots[l->slot], &r, 8) || (r.busy && r.seq == l->hung_seq);
}

/* The held follow-up of `l` goes to the worker (the hang went on past its
 * tail window, or ended otherwise than by returning to its wait). */
static void send_followup(agent *a, loop_watch *l)
{
    report_request *req = l->followup;
    l->followup = NULL;
    if (req == NULL)
        return;
    submit_request(a, l->process, l->hang, req, true);
    free(req);
}

void hang_release_followup(loop_watch *l)
{
    if (l->followup != NULL) {
        report_request_release(l->followup);
        free(l->followup);
        l->followup = NULL;
    }
}

/* The held follow-up of `l` caught the hang's tail: not written, counted
 * in the metrics, not said (nothing is lost: the hang's first report has
 * its stack, and gets its final duration). */
static void drop_followup(agent *a, loop_watch *l)
{
    if (l->followup == NULL)
        return;
    hw_metrics_report_dropped(hw_exports_metrics(a->exports), l->process->metrics_name,
                              HW_METRICS_DROP_HANG_TAIL);
    hang_release_followup(l);
}

/*
 * Matrix's annealing: a hung stretch is looked at again after 1, 2, 3, 5 ...
 * check periods and reported again only if its culprit moved, which resets
 * the wait to one period.  The capture happens here and now; comparing
 * stacks needs unwinding, which is the worker's.  So this schedule assumes
 * the stack stayed, and the worker says when it found one that moved
 * (worker_resets): the next look is then one period after that capture.
 * A worker kept from the CPU delays reports, never the looks.
 */
static void recheck(agent *a, watched_process *w, loop_watch *l, const hw_loop_reading *r, uint64_t now)
{
    uint64_t period = a->opts->detector.check_period_ns;
    uint64_t next = l->wait_previous + l->wait_current;
    l->wait_previous = l->wait_current;
    l->wait_current = next;
    l->next_capture_ns = now + next * period;
    report_request *req = calloc(1, sizeof *req);
    if (!req)
        return;
    hw_check c = {.verdict = HW_VERDICT_STILL_HUNG, .seq = r->seq, .busy_start_ns = l->hung_start_ns,
                  .busy_ns = now - l->hung_start_ns, .launch = is_launch(w, l, r->seq)};
    capture_for_report(a, w, l, &c, req);
    if (req->snap.process_exited || !still_hung(w, l)) {
        /* It ended meanwhile: the next look closes it. */
        report_request_release(req);
        free(req);
        return;
    }
    /* Held until the hang proves to go on (a check period shorter than
     * the tail window: the newer capture replaces the older). */
    hang_release_followup(l);
    l->followup = req;
}

/* A look at a loop that is still in the stretch reported as hung. */
void hang_look_again(agent *a, watched_process *w, loop_watch *l, const hw_loop_reading *r, uint64_t now)
{
    if (l->hang) {
        uint64_t moved_at = 0;
        uint64_t resets = worker_resets(l->hang, &moved_at);
        if (resets != l->resets_seen) {
            l->resets_seen = resets;
            l->wait_previous = l->wait_current = 1;
            l->next_capture_ns = moved_at + a->opts->detector.check_period_ns;
        }
    }
    hw_exports_hang_still_on(a->exports, &l->metrics, now);
    if (l->followup != NULL && now >= l->followup->resumed_ns + HANG_TAIL_NS)
        send_followup(a, l); /* still hung past its tail window */
    if (now >= l->next_capture_ns)
        recheck(a, w, l, r, now);
    uint64_t end_poll = now + HANG_END_POLL_NS;
    l->next_wake_ns = end_poll < l->next_capture_ns ? end_poll : l->next_capture_ns;
    if (l->followup != NULL && l->followup->resumed_ns + HANG_TAIL_NS < l->next_wake_ns)
        l->next_wake_ns = l->followup->resumed_ns + HANG_TAIL_NS;
}

/* The stretch reported as hung is over at `now` (see hang_finish);
 * `wait_status` is the process's when its death ended it, else -1. */
static void end_hang(agent *a, loop_watch *l, uint64_t now, const char *end, bool keep_launch, int wait_status)
{
    /* It ended between the last look that saw it hung and now. */
    uint64_t final_ns = now > l->hung_start_ns ? now - l->hung_start_ns : 0;
    hw_exports_event(a->exports, HW_EVENT_HANG_END, l->tid, 0, final_ns, NULL);
    uint64_t precision_ns = now > l->last_seen_hung_ns ? now - l->last_seen_hung_ns : 0;
    hw_exports_hang_end(a->exports, &l->metrics, now, final_ns, keep_launch);
    /* A follow-up not yet sent: the tail of a hang that returned to its
     * wait, or whose process exited on its own, unless a look saw it still
     * hung past its window; a hang that ended otherwise (the process was
     * killed, a stop) keeps it: where it was when that came. */
    bool returned = strcmp(end, "returned_to_wait") == 0 || strcmp(end, "paused") == 0 ||
                    strcmp(end, "ping_answered") == 0 || strcmp(end, "exited") == 0;
    if (l->followup != NULL && returned && l->last_seen_hung_ns < l->followup->resumed_ns + HANG_TAIL_NS)
        drop_followup(a, l);
    else
        send_followup(a, l);
    if (l->hang) {
        hw_hang_end e = {.final_ns = final_ns, .precision_ns = precision_ns, .end = end, .wait_status = wait_status};
        hang_time_section(a, l->process, l, l->hung_seq, l->hung_start_ns, NULL, NULL, &e.time);
        worker_submit_finish(a->worker, l->hang, &e, keep_launch);
    }
    l->hang = NULL;
    l->hung = false;
    l->detector.next_check_ns = now; /* the detector resumes now, not late */
}

/* The stretch reported as hung is over: its final duration goes into its
 * reports.  A launch's held reports are written if `keep_launch` (the
 * process reached its loop, was killed, or outlived the watch) and dropped
 * otherwise (it was a command that simply ran: no loop, no hang). */
void hang_finish(agent *a, loop_watch *l, uint64_t now, const char *end, bool keep_launch)
{
    end_hang(a, l, now, end, keep_launch, -1);
}

/* Close the hangs of a process that is gone (or that we stop watching): a
 * stretch its page shows already over ended by returning to its wait.  One
 * still going on when the process died is a fatal hang: it ends "killed" or
 * "exited" when the wait status is known (a launch stuck until someone
 * killed it is kept). */
void finish_process(agent *a, watched_process *w, uint64_t now, const char *end, int wait_status)
{
    bool watch_ends = strcmp(end, "agent_exited") == 0;
    bool died = strcmp(end, "process_exited") == 0;
    if (died && wait_status < 0)
        wait_status = w->end_status;
    bool known = died && wait_status >= 0;
    bool killed = known && WIFSIGNALED(wait_status);
    const char *death = !known ? end : killed ? "killed" : "exited";
    for (unsigned i = 0; i < HW_PAGE_SLOTS; i++) {
        loop_watch *l = w->loops[i];
        if (!l || !l->hung)
            continue;
        hw_loop_reading r;
        bool over = hw_loop_read(&w->page->slots[i], &r, 8) && r.seq != l->hung_seq;
        if (over)
            end_hang(a, l, now, "returned_to_wait", true, -1);
        else
            end_hang(a, l, now, death, killed || watch_ends, known ? wait_status : -1);
    }
}
