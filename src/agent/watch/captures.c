/*
 * captures.c - capturing a watched process, and handing the capture to
 * the report worker.
 *
 * A capture (capture.h) stops the process's threads for well under a
 * millisecond.  What the watched process needs of it is decided here: a
 * process that runs Python or node has its interpreter's frames read in
 * the same stop (python_frames.h, js_frames.h); their names, and a memory
 * map past its first 128 KiB, are read right after it by the report's naming
 * thread (report_naming.c), not here: how long that takes is the watched
 * process's to choose.  A capture that finds a child of the agent dead
 * reaps it, and its wait status is kept for the hang's end.
 *
 * The hang lifecycle, early sampling and CPU-high reports all capture
 * through here; whatever becomes a report goes to the worker through
 * submit_request, which counts (and says once) a capture the worker had no
 * room for.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "watch.h"

/* If the capture saw a child of ours exit and consumed its status, keep it:
 * our own child's for the exit status, any's for its hangs' end. */
static void note_child_exit(agent *a, watched_process *w, const hw_process_snapshot *snap)
{
    if (snap->process_exited && snap->reaped && snap->exit_status >= 0)
        w->end_status = snap->exit_status; /* for its hangs' end (finish_process) */
    if (snap->process_exited && snap->reaped && w->pid == a->child)
        keep_child_status(a, snap->exit_status);
}

/* Python's and V8's frames are read in the same stop as the registers
 * (python_frames.h, js_frames.h), so the interpreter is looked for when
 * the process registers (its interpreter binary, libpython or node is
 * mapped by then), not in a hang's path: that costs up to about 10 ms with
 * a cold file cache.
 * While there is none, again before a capture every PYTHON_LOOK_AGAIN_NS (a
 * program may load libpython late).  Only processes with a module named
 * *python* cost more than reading their maps. */
void look_for_runtimes(agent *a, watched_process *w)
{
    uint64_t now = hw_monotonic_ns();
    if (w->python.found || w->js.target.found || (w->python_looked && now < w->python_next_look_ns))
        return;
    w->python_looked = true;
    w->python_next_look_ns = now + PYTHON_LOOK_AGAIN_NS;
    size_t len = 0;
    bool cut = false;
    char *maps = hw_proc_read_maps(w->pid, 0, HW_WATCH_MAPS_MAX, &len, &cut);
    hw_python_find(w->pid, maps, len, &w->python);
    /* V8 comes with the executable (or libnode, mapped before main): one
     * look is enough. */
    bool js_just_looked = false;
    if (!w->python.found && !w->js_looked && a->opts->js_frames != HW_JS_FRAMES_OFF &&
        a->opts->js_frames != HW_JS_FRAMES_PERF_MAP) {
        w->js_looked = js_just_looked = true;
        hw_js_find(w->pid, maps, len, &w->js.target);
    }
    free(maps);
    /* A runtime whose frames are not read says so, once per process (its
     * reports say it too). */
    if (w->python.found && !w->python.readable && !a->opts->quiet)
        fprintf(stderr, "hangwatch: pid %d runs %s\n", (int)w->pid, w->python.why_not);
    /* A node whose functions will have no names at all (no metadata to
     * read, and no perf map asked for): said once. */
    if (js_just_looked && !w->js.target.readable && !a->js_maps_ours && !a->opts->quiet &&
        hw_is_node_executable(w->executable))
        fprintf(stderr,
                "hangwatch: pid %d (node): JavaScript frames will not be named: %s; start node with "
                "NODE_OPTIONS=\"%s\" for a perf map\n",
                (int)w->pid, w->js.target.found ? w->js.target.why_not : "it has no V8 postmortem metadata",
                HW_JIT_MAP_NODE_FLAGS);
}

/* Whose code a namer names: `w`, and the runtime it runs. */
static hw_namer_process namer_process(const watched_process *w)
{
    return (hw_namer_process){.serial = w->serial, .pid = w->pid, .py = &w->python, .js = &w->js.target};
}

hw_runtime_names *name_sample_frames(agent *a, watched_process *w, const hw_process_snapshot *snap)
{
    hw_namer_process p = namer_process(w);
    return hw_runtime_namers_name(a->sample_namers, &p, snap, true);
}

static void capture_options(agent *a, watched_process *w, pid_t tid, hw_capture_options *copt)
{
    hw_capture_options_default(copt, tid);
    /* In a process with more threads than a capture takes, its loops are
     * taken first (then the oldest of the rest). */
    for (unsigned s = 0; s < HW_PAGE_SLOTS && copt->keep_count < HW_CAPTURE_KEEP_MAX; s++)
        if (w->loops[s] != NULL && w->loops[s]->tid > 0)
            copt->keep_tids[copt->keep_count++] = w->loops[s]->tid;
    look_for_runtimes(a, w);
    if (w->python.readable) {
        copt->interp_frames = HW_PY_MAX_FRAMES;
        copt->while_stopped = hw_python_read_stacks;
        copt->while_stopped_ctx = &w->python;
    } else if (w->js.target.readable) {
        copt->interp_frames = HW_JS_MAX_FRAMES;
        copt->while_stopped = hw_js_read_stacks;
        copt->while_stopped_ctx = &w->js;
    }
}

/* How long the capture held each of `w`'s loop threads stopped, added to
 * that loop's count (its `time` section's stopped_us). */
static void count_agent_stops(watched_process *w, const hw_process_snapshot *snap)
{
    for (size_t i = 0; i < snap->thread_count; i++) {
        if (snap->threads[i].stopped_ns == 0)
            continue;
        for (unsigned s = 0; s < HW_PAGE_SLOTS; s++) {
            loop_watch *l = w->loops[s];
            if (l != NULL && l->tid == snap->threads[i].tid) {
                l->agent_stopped_ns += snap->threads[i].stopped_ns;
                l->agent_stops++;
                /* the stretch the stop was in: the loop's, right after it */
                uint64_t seq = atomic_load_explicit(&w->page->slots[s].seq, memory_order_acquire);
                if (seq != l->stretch_stops_seq) {
                    l->stretch_stops_seq = seq;
                    l->stretch_stopped_ns = l->stretch_stops = 0;
                }
                l->stretch_stopped_ns += snap->threads[i].stopped_ns;
                l->stretch_stops++;
            }
        }
    }
}

void capture_thread(agent *a, watched_process *w, pid_t tid, hw_process_snapshot *snap)
{
    hw_capture_options copt;
    capture_options(a, w, tid, &copt);
    copt.all_threads = false;
    copt.maps_later = true; /* a sample's symbolizer reads its own, bounded (HW_WATCH_MAPS_MAX) */
    hw_capture_process(w->pid, &copt, snap);
    count_agent_stops(w, snap);
    note_child_exit(a, w, snap);
}

/* What kept `w`'s loop state, as the report's hangwatch.observer says it. */
static const char *observer_name(const agent *a, const watched_process *w)
{
    if (a->opts->attach_pid > 0)
        return "library";
    if (!hw_kobs_owns(a->kobs, w->page))
        return "preload";
    const char *attach = hw_kobs_attach_name(a->kobs);
    return strcmp(attach, "fentry") == 0 ? "kernel_fentry"
           : strcmp(attach, "uprobe") == 0 ? "kernel_uprobe"
                                            : "kernel_tracepoint";
}

/* What `tid`'s observer took to be its loop's wait, if its page says. */
static hw_loop_wait_seen loop_wait_of(const watched_process *w, pid_t tid)
{
    hw_loop_wait_seen seen = {.known = false};
    if (!(atomic_load_explicit(&w->page->flags, memory_order_acquire) & HW_PAGE_FLAG_LOOP_WAITS))
        return seen;
    for (unsigned s = 0; s < HW_PAGE_SLOTS; s++) {
        const hw_loop_slot *slot = &w->page->slots[s];
        if (w->loops[s] == NULL || w->loops[s]->tid != tid)
            continue;
        uint32_t info = atomic_load_explicit(&slot->loop_wait_info, memory_order_acquire);
        seen.known = true;
        seen.site = atomic_load_explicit(&slot->loop_wait_site, memory_order_relaxed);
        seen.object = atomic_load_explicit(&slot->loop_wait_object, memory_order_relaxed);
        seen.call = info & 0xffu;
        seen.rank = info >> 8 & 0xffu;
        seen.learned = info >> 16 & 0xffu;
        seen.nested_waits = atomic_load_explicit(&slot->nested_waits, memory_order_relaxed);
        seen.moves = atomic_load_explicit(&slot->loop_wait_moves, memory_order_relaxed);
        break;
    }
    return seen;
}

/* The loop thread timed out of its stop while runnable: starved. */
static bool target_waited_for_a_cpu(const hw_process_snapshot *snap)
{
    for (size_t i = 0; i < snap->thread_count; i++)
        if (snap->threads[i].is_target)
            return snap->threads[i].status == HW_THREAD_TIMEOUT && snap->threads[i].state_at_timeout == 'R';
    return false;
}

void capture_request_start(agent *a, watched_process *w, pid_t tid, uint64_t now, report_request *req,
                           void (*overdue)(void *ctx), void *ctx, request_capture *rc)
{
    capture_options(a, w, tid, &rc->copt);
    rc->copt.overdue = overdue;
    rc->copt.overdue_ctx = ctx;
    rc->copt.overdue_ms = CAPTURE_OVERDUE_MS;
    /* the map's rest, past what this thread reads, is read by the naming thread */
    rc->copt.maps_max = HW_WATCH_MAPS_MAX;
    rc->copt.avoid_cpu = rc->avoid_cpu;
    req->hung_cpu_known = rc->avoid_cpu >= 0;
    req->hung_cpu = rc->avoid_cpu;
    req->python = w->python;
    req->js = w->js.target;
    req->pid = w->pid;
    req->process_serial = w->serial;
    req->tid = tid;
    req->observer = observer_name(a, w);
    req->loop_wait = loop_wait_of(w, tid);
    snprintf(req->executable, sizeof req->executable, "%s", w->executable);
    req->in_app_rules = a->opts->in_app_rules;
    req->in_app_rule_count = a->opts->in_app_rule_count;
    req->threshold_ns = a->opts->detector.threshold_ns;
    req->detected_unix_ns = hw_realtime_ns();
    req->captured_ns = now;
    rc->result = hw_capture_start(w->pid, &rc->copt, &req->snap, &rc->flight);
}

void capture_request_finish(agent *a, watched_process *w, report_request *req, request_capture *rc)
{
    int r = rc->flight != NULL ? hw_capture_finish(rc->flight) : rc->result;
    rc->flight = NULL;
    if (r >= 0 && !req->snap.process_exited && target_waited_for_a_cpu(&req->snap)) {
        /* On a machine busy enough that the loop did not get a CPU to
         * stop on in time: once more, before the hang has no stack.  Not
         * once the process has ended: this capture may have reaped it (our
         * child), and its status, which ends `run`, would go with it. */
        count_agent_stops(w, &req->snap);
        hw_process_snapshot_free(&req->snap);
        rc->copt.overdue = NULL; /* the first said what it had to */
        r = hw_capture_process(w->pid, &rc->copt, &req->snap);
        req->snap.retried_after_timeout = true;
    }
    req->resumed_ns = hw_monotonic_ns();
    count_agent_stops(w, &req->snap);
    if (r < 0 && req->snap.process_name[0] == '\0')
        snprintf(req->snap.process_name, sizeof req->snap.process_name, "pid-%d", (int)w->pid);
    note_child_exit(a, w, &req->snap);
}

void capture_for_request(agent *a, watched_process *w, pid_t tid, uint64_t now, report_request *req,
                         void (*overdue)(void *ctx), void *ctx)
{
    request_capture rc = {.avoid_cpu = -1};
    capture_request_start(a, w, tid, now, req, overdue, ctx, &rc);
    capture_request_finish(a, w, req, &rc);
}

void submit_request(agent *a, watched_process *w, hang_record *hang, report_request *req, bool recheck)
{
    if (worker_submit_report(a->worker, hang, req, recheck))
        return;
    hw_metrics_report_dropped(hw_exports_metrics(a->exports), w->metrics_name, HW_METRICS_DROP_QUEUE_FULL);
    if (!recheck)
        worker_submit_dropped(a->worker, hang, req); /* a hang's first: still announced and counted */
    report_request_release(req);
    a->queue_dropped++;
    if (!a->said_queue_dropped && !a->opts->quiet) {
        a->said_queue_dropped = true;
        fprintf(stderr, "hangwatch: the report writer is behind: a capture was dropped (further drops are counted)\n");
    }
}
