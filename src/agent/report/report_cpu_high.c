/*
 * report_cpu_high.c - the report worker's part of a CPU-high report
 * (--cpu-high; the watch thread's part, measuring and sampling, is
 * cpu_high.c).
 *
 * The request carries the process's and its threads' CPU figures and the
 * raw kernel samples of its hottest threads.  Here the samples are unwound
 * with the capture's symbolizer and grouped by stack (by function, the
 * innermost CPU_STACK_KEY_FRAMES frames), most frequent first, into the
 * report's cpu_high section; and the stderr line says the process's share
 * and its hottest thread's.  Kept apart from report_worker.c, which builds
 * every kind of report around this section.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/parse/duration.h"
#include "core/text_escape.h"
#include "report_internal.h"

static int by_count_descending(const void *x, const void *y)
{
    const cpu_stack_group *a = x, *b = y;
    return a->count != b->count ? (a->count > b->count ? -1 : 1) : 0;
}

/* Unwind sampled thread k's samples and group them by stack. */
static void group_samples(hw_symbolizer *sym, const hw_in_app_context *in_app, const cpu_high_sampled *s,
                          cpu_report_parts *p, size_t k)
{
    cpu_stack_group *groups = calloc(s->sample_count ? s->sample_count : 1, sizeof *groups);
    if (groups == NULL)
        return;
    size_t n = 0;
    for (size_t i = 0; sym && i < s->sample_count; i++) {
        hw_backtrace bt = {0};
        hw_unwind_thread(sym, &s->samples[i], HW_SAMPLE_MAX_FRAMES, &bt);
        hw_backtrace_classify(&bt, in_app);
        if (bt.count == 0) {
            hw_backtrace_free(&bt);
            continue;
        }
        uint64_t keys[CPU_STACK_KEY_FRAMES];
        size_t key_count = 0;
        for (; key_count < bt.count && key_count < CPU_STACK_KEY_FRAMES; key_count++)
            keys[key_count] = hw_frame_function_key(&bt.frames[key_count]);
        size_t g = 0;
        while (g < n && (groups[g].key_count != key_count ||
                         memcmp(groups[g].keys, keys, key_count * sizeof keys[0]) != 0))
            g++;
        if (g < n) {
            groups[g].count++;
            hw_backtrace_free(&bt);
            continue;
        }
        groups[n].bt = bt;
        memcpy(groups[n].keys, keys, key_count * sizeof keys[0]);
        groups[n].key_count = key_count;
        groups[n].count = 1;
        n++;
    }
    qsort(groups, n, sizeof *groups, by_count_descending);
    p->groups[k] = groups;
    p->group_count[k] = n;
}

void hw_cpu_parts_build(hw_symbolizer *sym, const hw_in_app_context *in_app, const cpu_high_request *cpu,
                        cpu_report_parts *p)
{
    memset(p, 0, sizeof *p);
    for (size_t k = 0; k < cpu->sampled_count; k++)
        group_samples(sym, in_app, &cpu->sampled[k], p, k);
    uint64_t span = cpu->threads_window_ns ? cpu->threads_window_ns : 1;
    for (size_t i = 0; i < cpu->thread_count; i++) {
        hw_cpu_thread_share *t = &p->shares[i];
        t->tid = cpu->threads[i].tid;
        t->name = cpu->threads[i].name;
        unsigned __int128 tenths = (unsigned __int128)cpu->threads[i].cpu_ns * 1000 / span;
        t->tenths = tenths > UINT64_MAX ? UINT64_MAX : (uint64_t)tenths;
        for (size_t k = 0; k < cpu->sampled_count; k++) {
            if (cpu->sampled[k].tid != t->tid)
                continue;
            t->sample_count = cpu->sampled[k].sample_count;
            size_t shown = p->group_count[k] < CPU_STACKS_SHOWN ? p->group_count[k] : CPU_STACKS_SHOWN;
            for (size_t g = 0; g < shown; g++)
                p->stacks[k][g] = (hw_cpu_stack){p->groups[k][g].bt.frames, p->groups[k][g].bt.count,
                                                 p->groups[k][g].count};
            t->stacks = p->stacks[k];
            t->stack_count = shown;
        }
    }
    p->info = (hw_cpu_high_info){.window_ns = cpu->window_ns,
                                 .threshold_percent = cpu->percent,
                                 .process_tenths = cpu->tenths,
                                 .threads_window_ns = cpu->threads_window_ns,
                                 .sample_interval_ns = cpu->sample_interval_ns,
                                 .threads = p->shares,
                                 .thread_count = cpu->thread_count};
}

void hw_cpu_parts_free(cpu_report_parts *p)
{
    for (size_t k = 0; k < CPU_HOT_THREADS; k++) {
        for (size_t g = 0; g < p->group_count[k]; g++)
            hw_backtrace_free(&p->groups[k][g].bt);
        free(p->groups[k]);
    }
}

/* "hangwatch: CPU high in NAME (pid N): 99.8% of one CPU over 5s (threshold
 * 80%); hottest thread 4243 (worker) 99.5% in spin < run; working: 5.0 s on
 * CPU of 5.0 s" (the hottest thread's time section, when it has one) */
char *hw_cpu_line(const report_request *req, const cpu_report_parts *p)
{
    const cpu_high_request *cpu = req->cpu;
    char window[32], process[64], name[64], frames[400] = "";
    hw_format_duration(cpu->window_ns / 1000000 * 1000000, window, sizeof window);
    const hw_cpu_thread_share *hot = p->info.thread_count > 0 ? &p->shares[0] : NULL;
    size_t used = 0;
    for (size_t f = 0; hot && hot->stack_count > 0 && f < hot->stacks[0].frame_count && f < 4; f++) {
        char tmp[200];
        int n = snprintf(frames + used, sizeof frames - used, "%s%s", f ? " < " : " in ",
                         hw_report_frame_label(&hot->stacks[0].frames[f], tmp, sizeof tmp));
        if (n < 0 || (size_t)n >= sizeof frames - used)
            break;
        used += (size_t)n;
    }
    char hottest[600] = "";
    if (hot)
        snprintf(hottest, sizeof hottest, "; hottest thread %d (%s) %.1f%%%s", (int)hot->tid,
                 hw_escape_text(hot->name, name, sizeof name), (double)hot->tenths / 10.0, frames);
    char why[1024];
    hw_time_clause(&req->time, why, sizeof why);
    char *line = NULL, pid[256];
    if (asprintf(&line, "hangwatch: CPU high in %s (%s): %.1f%% of one CPU over %s (threshold %u%%)%s%s%s",
                 hw_escape_text(req->snap.process_name, process, sizeof process),
                 hw_line_pid(&req->snap, req->pid, pid, sizeof pid),
                 (double)cpu->tenths / 10.0, window, cpu->percent, hottest, why[0] ? "; " : "", why) < 0)
        return NULL;
    return line;
}
