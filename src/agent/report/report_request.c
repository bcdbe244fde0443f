/*
 * report_request.c - what a capture hands the report worker, and the first
 * step of every report: the capture unwound and named.
 *
 * A request holds the capture (registers and stack copies of every thread,
 * taken while the hang was going on), the runtime frames named right after
 * it, early sampling's stacks as addresses and a CPU-high report's samples.
 * Naming a capture makes one symbolizer from the memory map read at the
 * capture (so a process that is gone by now still gets its names) and
 * unwinds each captured thread with its runtime frames among the native
 * ones (symbols.h).  The worker and `hangwatch stack` both make their
 * reports through hw_name_capture and hw_report_of_capture.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report_internal.h"

void cpu_high_request_free(cpu_high_request *cpu)
{
    if (cpu == NULL)
        return;
    for (size_t j = 0; j < cpu->sampled_count; j++) {
        for (size_t i = 0; i < cpu->sampled[j].sample_count; i++)
            free(cpu->sampled[j].samples[i].stack);
        free(cpu->sampled[j].samples);
    }
    free(cpu);
}

void report_request_release(report_request *req)
{
    if (!req)
        return;
    hw_runtime_names_free(req->runtime_names, req->snap.thread_count);
    req->runtime_names = NULL;
    for (size_t i = 0; req->ps_named && i < req->ps_depth; i++)
        hw_frame_clear(&req->ps_named[i]);
    free(req->ps_named);
    req->ps_named = NULL;
    cpu_high_request_free(req->cpu);
    req->cpu = NULL;
    for (size_t i = 0; req->ring_named && i < req->ring.addr_count; i++)
        hw_frame_clear(&req->ring_named[i]);
    free(req->ring_named);
    req->ring_named = NULL;
    hw_ring_stacks_free(&req->ring);
    hw_process_snapshot_free(&req->snap);
}

/* ---- a capture named ---- */

hw_in_app_context hw_request_in_app(const report_request *req)
{
    return (hw_in_app_context){.rules = req->in_app_rules,
                               .rule_count = req->in_app_rule_count,
                               .executable = req->executable[0] ? req->executable : NULL};
}

/* Unwind thread i of the request's snapshot with its runtime frames, or say
 * why it cannot be. */
static void name_thread(const report_request *req, hw_named_capture *nc, size_t i)
{
    const hw_thread_snapshot *t = &req->snap.threads[i];
    if (!nc->bts || t->status != HW_THREAD_CAPTURED)
        return;
    if (nc->sym) {
        hw_unwind_with_runtime(nc->sym, t, HW_REPORT_MAX_FRAMES, req->runtime_names ? &req->runtime_names[i] : NULL,
                               &req->python, &req->js, req->executable, &nc->bts[i]);
        hw_in_app_context in_app = hw_request_in_app(req);
        hw_backtrace_classify(&nc->bts[i], &in_app);
    } else if (asprintf(&nc->bts[i].error, "no symbolizer for the process's memory map: %s",
                        nc->sym_error ? nc->sym_error : "its maps could not be read") < 0) {
        nc->bts[i].error = NULL;
    }
}

void hw_name_capture(const report_request *req, bool target_only, hw_named_capture *nc)
{
    const hw_process_snapshot *snap = &req->snap;
    *nc = (hw_named_capture){.target = SIZE_MAX};
    if (snap->maps)
        nc->sym = hw_symbolizer_new(req->pid, snap->maps, snap->maps_len, &nc->sym_error);
    if (nc->sym && snap->owner_known)
        hw_symbolizer_set_owner(nc->sym, snap->owner_uid); /* the process may be gone by now */
    /* Node's perf map, only for a node not read through V8's metadata. */
    hw_symbolizer_allow_js_map(nc->sym, !req->js.readable && hw_is_node_executable(req->executable));
    nc->bts = calloc(snap->thread_count ? snap->thread_count : 1, sizeof *nc->bts);
    for (size_t i = 0; i < snap->thread_count; i++)
        if (snap->threads[i].is_target)
            nc->target = i;
    if (nc->target != SIZE_MAX)
        name_thread(req, nc, nc->target);
    if (!target_only)
        hw_name_capture_rest(req, nc);
}

void hw_name_capture_rest(const report_request *req, hw_named_capture *nc)
{
    for (size_t i = 0; i < req->snap.thread_count; i++)
        if (i != nc->target)
            name_thread(req, nc, i);
}

const hw_backtrace *hw_named_target(const hw_named_capture *nc)
{
    return nc->bts && nc->target != SIZE_MAX ? &nc->bts[nc->target] : NULL;
}

void hw_named_capture_free(hw_named_capture *nc, size_t thread_count)
{
    for (size_t i = 0; nc->bts && i < thread_count; i++)
        hw_backtrace_free(&nc->bts[i]);
    free(nc->bts);
    if (nc->sym)
        hw_symbolizer_free(nc->sym);
    free(nc->sym_error);
    *nc = (hw_named_capture){.target = SIZE_MAX};
}

json_t *hw_report_of_capture(const report_request *req, const hw_named_capture *nc, const hw_hang_info *info,
                             char id[37])
{
    const hw_image *images = NULL;
    size_t image_count = nc->sym ? hw_symbolizer_images(nc->sym, &images) : 0;
    /* Where JavaScript names came from, when there are any: V8's own
     * records (js_frames.h), else node's perf map. */
    hw_hang_info with_source = *info;
    for (size_t i = 0; nc->bts && i < req->snap.thread_count && with_source.js_frames_from == NULL; i++)
        for (size_t k = 0; k < nc->bts[i].count; k++)
            if (nc->bts[i].frames[k].language == HW_LANG_JAVASCRIPT) {
                with_source.js_frames_from = req->js.readable ? "metadata" : "perf-map";
                break;
            }
    /* The loop's wait call's site, named as a frame (a return address). */
    hw_frame site;
    memset(&site, 0, sizeof site);
    if (info->loop_wait && info->loop_wait->site != 0 && nc->sym) {
        hw_symbolize_frame(nc->sym, info->loop_wait->site, false, &site); /* else the address alone */
        hw_in_app_context in_app = hw_request_in_app(req);
        hw_frame_classify(&site, &in_app);
        with_source.loop_wait_site = &site;
    }
    json_t *report = hw_report_build(&with_source, &req->snap, nc->bts, images, image_count, id);
    hw_frame_clear(&site);
    return report;
}

/* ---- who holds the GIL ---- */

/* Does this native frame take CPython's GIL (and block until it has it)? */
static bool takes_gil(const hw_frame *f)
{
    static const char *const names[] = {"take_gil", "PyEval_RestoreThread", "PyEval_AcquireThread",
                                        "PyEval_AcquireLock", "PyGILState_Ensure"};
    for (size_t i = 0; f->symbol_name && i < sizeof names / sizeof names[0]; i++)
        if (strcmp(f->symbol_name, names[i]) == 0)
            return true;
    return false;
}

pid_t hw_lock_holder_of(const report_request *req, const hw_named_capture *nc, const hw_backtrace **holder_bt)
{
    *holder_bt = NULL;
    pid_t holder = req->time.look.valid ? req->time.look.lock_owner : 0;
    if (holder <= 0 || holder == req->tid)
        return 0;
    for (size_t i = 0; i < req->snap.thread_count; i++)
        if (req->snap.threads[i].tid == holder) {
            if (nc->bts)
                *holder_bt = &nc->bts[i];
            return holder;
        }
    return 0;
}

pid_t hw_gil_holder_of(const report_request *req, const hw_named_capture *nc, const hw_backtrace **holder_bt)
{
    *holder_bt = NULL;
    const hw_backtrace *bt = hw_named_target(nc);
    pid_t holder = req->snap.interp_lock_holder;
    if (bt == NULL || holder == 0 || holder == req->tid)
        return 0;
    bool waiting = false;
    for (size_t i = 0; i < bt->count && bt->frames[i].language == HW_LANG_NATIVE && !waiting; i++)
        waiting = takes_gil(&bt->frames[i]);
    if (!waiting)
        return 0;
    for (size_t i = 0; i < req->snap.thread_count; i++)
        if (req->snap.threads[i].tid == holder && nc->bts)
            *holder_bt = &nc->bts[i];
    return holder;
}
