/*
 * report_model.c - building the JSON hang report and writing it safely (see
 * report_model.h and docs/report-format.md).  The files themselves are made and
 * read through the report directory's descriptor (report_dir.h).
 *
 * The hung thread always comes first in crash.threads, so
 * report_array_index 0 is the culprit in every report, as in the seed's.
 * Fields that are unknown (no symbol, no debug info) are left out rather than
 * written as null, as KSCrash does.
 */
#include "report_model.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/common/random_id.h"
#include "core/abi/wait_point.h"
#include "core/hw_version.h"
#include "core/text_bits.h"
#include "core/text_escape.h"

static json_int_t as_int(uint64_t v)
{
    return v > (uint64_t)INT64_MAX ? (json_int_t)INT64_MAX : (json_int_t)v;
}

/* A JSON string of text that came from the watched process (names, paths,
 * symbols): as it is when it is valid UTF-8, as JSON strings must be, else
 * its escaped form (text_escape.h), so an odd byte in a thread name never
 * costs the whole report. */
static json_t *foreign_text(const char *text, size_t max_len)
{
    size_t len = strnlen(text, max_len);
    json_t *s = json_stringn(text, len);
    if (s != NULL)
        return s;
    char *escaped = malloc(4 * len + 1);
    if (escaped == NULL)
        return NULL;
    s = json_string(hw_escape_bytes(text, len, escaped, 4 * len + 1));
    free(escaped);
    return s;
}

#define FOREIGN(text) foreign_text((text), (size_t)-1)

static json_t *frame_json(const hw_frame *f)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    json_object_set_new(o, "instruction_addr", json_integer(as_int(f->instruction_addr)));
    if (f->language != HW_LANG_NATIVE)
        json_object_set_new(o, "language", json_string(hw_frame_language_name(f->language)));
    if (f->symbol_name) {
        json_object_set_new(o, "symbol_name", FOREIGN(f->symbol_name));
        if (f->language != HW_LANG_PYTHON)
            json_object_set_new(o, "symbol_addr", json_integer(as_int(f->symbol_addr)));
    }
    if (f->object_path) {
        json_object_set_new(o, "object_name", FOREIGN(hw_base_name(f->object_path)));
        json_object_set_new(o, "object_addr", json_integer(as_int(f->object_addr)));
        json_object_set_new(o, "object_offset", json_integer(as_int(f->object_offset)));
    }
    if (f->source_file) {
        json_object_set_new(o, "source_file", FOREIGN(f->source_file));
        json_object_set_new(o, "source_line", json_integer(f->source_line));
        if (f->line_is_function_start)
            json_object_set_new(o, "source_line_is_function_start", json_true());
    }
    json_object_set_new(o, "in_app", json_boolean(f->in_app));
    json_object_set_new(o, "origin", json_string(hw_frame_origin_name(f->origin)));
    return o;
}

/* hangwatch.loop_wait: what the observer took to be the loop's wait call,
 * and how it decided (core/abi/wait_point.h); `site` its call site named,
 * or NULL. */
static json_t *loop_wait_json(const hw_loop_wait_seen *w, const hw_frame *site)
{
    static const char *const calls[HW_WAIT_CALL_COUNT] = {
        [HW_WAIT_CALL_UNKNOWN] = "unknown",         [HW_WAIT_CALL_EPOLL_WAIT] = "epoll_wait",
        [HW_WAIT_CALL_EPOLL_PWAIT] = "epoll_pwait", [HW_WAIT_CALL_EPOLL_PWAIT2] = "epoll_pwait2",
        [HW_WAIT_CALL_POLL] = "poll",               [HW_WAIT_CALL_PPOLL] = "ppoll",
        [HW_WAIT_CALL_SELECT] = "select",           [HW_WAIT_CALL_PSELECT] = "pselect",
        [HW_WAIT_CALL_SIGSUSPEND] = "sigsuspend",   [HW_WAIT_CALL_IO_URING] = "io_uring_enter",
    };
    static const char *const ranks[] = {[HW_WAIT_RANK_SLEEP] = "nothing", [HW_WAIT_RANK_ONE] = "one_descriptor",
                                        [HW_WAIT_RANK_MANY] = "event_set"};
    static const char *const how[HW_WAIT_LEARNED_COUNT] = {
        [HW_WAIT_LEARNED_NOT_YET] = "not_yet", [HW_WAIT_LEARNED_REPEATED] = "repeated",
        [HW_WAIT_LEARNED_PRIMED] = "primed", [HW_WAIT_LEARNED_MOVED] = "moved"};
    /* The page is the watched program's: out-of-range values are "unknown".
     * Not learned yet, the call is the best seen so far. */
    bool seen = w->call != HW_WAIT_CALL_UNKNOWN;
    json_t *o = json_pack("{s:s, s:I, s:I}", "decided", w->learned < HW_WAIT_LEARNED_COUNT ? how[w->learned] : "unknown",
                          "nested_waits", (json_int_t)w->nested_waits, "moves", (json_int_t)w->moves);
    if (o == NULL || !seen)
        return o;
    json_object_set_new(o, "call", json_string(w->call < HW_WAIT_CALL_COUNT ? calls[w->call] : "unknown"));
    json_object_set_new(o, "waits_on", json_string(w->rank <= HW_WAIT_RANK_MANY ? ranks[w->rank] : "unknown"));
    bool on_descriptor = w->call == HW_WAIT_CALL_EPOLL_WAIT || w->call == HW_WAIT_CALL_EPOLL_PWAIT ||
                         w->call == HW_WAIT_CALL_EPOLL_PWAIT2 || w->call == HW_WAIT_CALL_IO_URING;
    if (on_descriptor && w->object <= INT32_MAX)
        json_object_set_new(o, "descriptor", json_integer((json_int_t)w->object));
    else if (w->call != HW_WAIT_CALL_SIGSUSPEND)
        json_object_set_new(o, "set_address", json_integer(as_int(w->object)));
    if (site)
        json_object_set_new(o, "site", frame_json(site));
    return o;
}

static json_t *thread_json(const hw_thread_snapshot *t, const hw_backtrace *bt, size_t index)
{
    json_t *contents = json_array();
    if (t->status == HW_THREAD_CAPTURED && bt)
        for (size_t i = 0; i < bt->count; i++)
            json_array_append_new(contents, frame_json(&bt->frames[i]));
    bool cut = t->status == HW_THREAD_CAPTURED && bt && bt->skipped > 0;
    json_t *backtrace = json_pack("{s:o, s:I}", "contents", contents, "skipped", (json_int_t)(cut ? bt->skipped : 0));
    if (backtrace && cut) {
        /* Innermost frames, then this many left out, then the outermost. */
        json_object_set_new(backtrace, "frames_omitted", json_integer((json_int_t)bt->skipped));
        json_object_set_new(backtrace, "frames_omitted_at", json_integer((json_int_t)bt->skipped_at));
    }
    json_t *o = json_pack("{s:o, s:I, s:o, s:I, s:b, s:b}", "backtrace", backtrace, "index", (json_int_t)index,
                          "name", foreign_text(t->name, sizeof t->name), "thread_identifier", (json_int_t)t->tid, "crashed", t->is_target,
                          "current_thread", 0);
    if (o && bt && bt->error && t->status == HW_THREAD_CAPTURED)
        json_object_set_new(o, "unwind_error", FOREIGN(bt->error));
    if (o && bt && bt->runtime_error && t->status == HW_THREAD_CAPTURED)
        json_object_set_new(o, "runtime_frames_error", FOREIGN(bt->runtime_error));
    if (o && bt && bt->runtime_lines_cut > 0 && t->status == HW_THREAD_CAPTURED)
        json_object_set_new(o, "runtime_lines_cut", json_integer((json_int_t)bt->runtime_lines_cut));
    if (o && bt && bt->runtime_thread_name && t->status == HW_THREAD_CAPTURED)
        json_object_set_new(o, "python_name", FOREIGN(bt->runtime_thread_name));
    return o;
}

static json_t *images_json(const hw_image *images, size_t count)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < count; i++) {
        const hw_image *im = &images[i];
        json_t *o = json_pack("{s:I, s:I, s:I, s:o}", "image_addr", as_int(im->start), "image_size",
                              as_int(im->end - im->start), "load_bias", as_int(im->bias), "name", FOREIGN(im->path));
        if (o && im->build_id)
            json_object_set_new(o, "build_id", json_string(im->build_id));
        json_array_append_new(arr, o);
    }
    return arr;
}

static uint64_t fnv1a(uint64_t h, const char *text)
{
    for (const char *p = text; *p; p++) {
        h ^= (unsigned char)*p;
        h *= 1099511628211ull;
    }
    return h;
}

/* An object's name as the key sees it: its base name, without a shared
 * library's version ("libglib-2.0.so.0.7400.6" is "libglib-2.0.so"): the
 * same library has another version on another machine or after an
 * upgrade.  Returns the length of `name` to use. */
static size_t key_object_len(const char *name)
{
    const char *so = strstr(name, ".so.");
    return so ? (size_t)(so + 3 - name) : strlen(name);
}

/* A function's name without the suffixes compilers give the copies they
 * make of it, which differ between builds and compilers of the same code:
 * GCC's ".constprop.0", ".isra.0", ".part.0", ".cold", ".lto_priv.0", and
 * clang's ".llvm.123...".  (C and C++ names have no other '.'.)  Returns
 * the length of `name` to use. */
static size_t key_symbol_len(const char *name)
{
    static const char *const suffixes[] = {".constprop.", ".isra.", ".part.", ".cold", ".lto_priv.", ".llvm."};
    size_t len = strlen(name);
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        const char *at = strstr(name, suffixes[i]);
        if (at != NULL && (size_t)(at - name) < len)
            len = (size_t)(at - name);
    }
    return len > 0 ? len : strlen(name);
}

/* A Python function's name as every CPython gives it: 3.11 and later name
 * a frame by its qualified name ("BaseEventLoop._run_once",
 * "main.<locals>.tick"), 3.8-3.10 by its own ("_run_once", "tick"); the
 * key takes the last part, so that upgrading Python keeps a hang's group. */
static const char *key_python_name(const char *name)
{
    const char *dot = strrchr(name, '.');
    return dot != NULL && dot[1] != '\0' ? dot + 1 : name;
}

/* The C library's start of a process: below every hang alike, and named
 * differently by different versions of it (glibc 2.34 added
 * __libc_start_call_main), so a key that took it in would split a group
 * between machines. */
static bool is_process_start(const char *symbol)
{
    return strcmp(symbol, "__libc_start_call_main") == 0 || strcmp(symbol, "__libc_start_main") == 0 ||
           strcmp(symbol, "__libc_start_main_impl") == 0 || strcmp(symbol, "_start") == 0;
}

/* hangwatch.gc: the hung stack stopped inside a garbage collector, a GC
 * pause named so; NULL when it is not (bt may be NULL). */
static json_t *gc_json(const hw_backtrace *bt)
{
    hw_gc_stop gc;
    if (bt == NULL || !hw_frames_gc(bt->frames, bt->count, &gc))
        return NULL;
    return json_pack("{s:s, s:s, s:o, s:I}", "runtime", hw_gc_runtime(gc.phase), "phase", hw_gc_phase_name(gc.phase),
                     "function", FOREIGN(gc.function), "frame", (json_int_t)gc.outermost);
}

void hw_grouping_key(const hw_backtrace *bt, char out[17])
{
    uint64_t h = 1469598103934665603ull;
    size_t site = bt ? hw_frames_site_start(bt->frames, bt->count) : SIZE_MAX;
    size_t first = site == SIZE_MAX ? 0 : site;
    bool runtime = hw_backtrace_has_runtime_frames(bt);
    /* FNV-1a over up to 8 frames from the culprit outwards (what it called,
     * a library's leaf, varies between hangs at the same site).  A program
     * that runs Python or JavaScript: its runtime frames only ("file!function",
     * the file's base name so that installs in other places agree), the
     * interpreter's native frames between them saying nothing of the site.
     * Native code: "object!function", ending before the C library's start
     * of the process.  A Python function by its own name, not the qualified
     * one only 3.11 and later give (key_python_name).  Only names go in: no address, load address or
     * build-id, and no library version or compiler clone suffix
     * (decisions.md §12).  Inside a garbage collector the site starts at
     * its outermost frame (hw_frames_site_start): one pause, one key. */
    size_t taken = 0;
    for (size_t i = first; bt && i < bt->count && taken < 8; i++) {
        const hw_frame *f = &bt->frames[i];
        char part[512];
        if (f->language != HW_LANG_NATIVE) {
            const char *name = f->symbol_name ? f->symbol_name : "?";
            snprintf(part, sizeof part, "%s:%s!%s|", hw_frame_language_name(f->language),
                     f->source_file ? hw_base_name(f->source_file) : "?",
                     f->language == HW_LANG_PYTHON ? key_python_name(name) : name);
        } else if (runtime && i != site) {
            continue;
        } else {
            const char *object = f->object_path ? hw_base_name(f->object_path) : "?";
            int object_len = (int)key_object_len(object);
            if (f->symbol_name && is_process_start(f->symbol_name) && i > first)
                break;
            if (f->symbol_name)
                snprintf(part, sizeof part, "%.*s!%.*s|", object_len, object, (int)key_symbol_len(f->symbol_name),
                         f->symbol_name);
            else if (f->object_path)
                snprintf(part, sizeof part, "%.*s+0x%llx|", object_len, object,
                         (unsigned long long)f->object_offset);
            else
                snprintf(part, sizeof part, "?|");
        }
        h = fnv1a(h, part);
        taken++;
    }
    snprintf(out, 17, "%016llx", (unsigned long long)h);
}

/* collection.main_thread.samples: every sample of the ring as distinct
 * stacks ({"count", "frames": indexes into the frames, innermost first,
 * "point_stack" on the one the Point Stack is a sample of}), each distinct
 * address once in "frames", and the samples left out. */
static json_t *samples_json(const hw_ring_stacks *rs, const hw_frame *frames)
{
    json_t *fr = json_array();
    for (size_t i = 0; fr && i < rs->addr_count; i++)
        json_array_append_new(fr, frame_json(&frames[i]));
    json_t *stacks = json_array();
    for (size_t s = 0; stacks && s < rs->stack_count; s++) {
        const hw_ring_stack *st = &rs->stacks[s];
        json_t *idx = json_array();
        for (size_t k = 0; idx && k < st->depth; k++)
            json_array_append_new(idx, json_integer((json_int_t)rs->frames[st->first + k]));
        json_t *o = json_pack("{s:I, s:o}", "count", (json_int_t)st->count, "frames", idx);
        if (o && st->point_stack)
            json_object_set_new(o, "point_stack", json_true());
        json_array_append_new(stacks, o);
    }
    return json_pack("{s:o, s:o, s:I}", "frames", fr, "stacks", stacks, "left_out", (json_int_t)rs->left_out);
}

/* capture.tracer_pid and capture.tracer_name: who held the threads that
 * could not be captured. */
static void add_tracer(json_t *capture, const hw_process_snapshot *snap)
{
    json_object_set_new(capture, "tracer_pid", json_integer((json_int_t)snap->tracer_pid));
    json_object_set_new(capture, "tracer_name", foreign_text(snap->tracer_name, sizeof snap->tracer_name));
}

/* Order: the target thread first, then the rest in /proc order. */
static size_t *report_order(const hw_process_snapshot *snap)
{
    size_t *order = calloc(snap->thread_count ? snap->thread_count : 1, sizeof *order);
    if (!order)
        return NULL;
    size_t n = 0;
    for (size_t i = 0; i < snap->thread_count; i++)
        if (snap->threads[i].is_target)
            order[n++] = i;
    for (size_t i = 0; i < snap->thread_count; i++)
        if (!snap->threads[i].is_target)
            order[n++] = i;
    return order;
}

/* Tenths of a percent as a JSON number with one decimal (99.5). */
static json_t *percent_json(uint64_t tenths)
{
    return json_real((double)(tenths > 100000000ull ? 100000000ull : tenths) / 10.0);
}

/* hangwatch.cpu_high: the window, the process's and each thread's share,
 * and the sampled stacks of the hottest threads. */
static json_t *cpu_high_json(const hw_cpu_high_info *c)
{
    json_t *threads = json_array();
    for (size_t i = 0; threads && i < c->thread_count; i++) {
        const hw_cpu_thread_share *t = &c->threads[i];
        json_t *o = json_pack("{s:I, s:o, s:o, s:I}", "thread_identifier", (json_int_t)t->tid, "name",
                              foreign_text(t->name ? t->name : "", 16), "percent", percent_json(t->tenths),
                              "sample_count", (json_int_t)t->sample_count);
        if (o && t->stack_count > 0) {
            json_t *stacks = json_array();
            for (size_t k = 0; stacks && k < t->stack_count; k++) {
                json_t *contents = json_array();
                for (size_t f = 0; contents && f < t->stacks[k].frame_count; f++)
                    json_array_append_new(contents, frame_json(&t->stacks[k].frames[f]));
                json_array_append_new(stacks, json_pack("{s:I, s:{s:o, s:i}}", "count",
                                                        (json_int_t)t->stacks[k].count, "backtrace", "contents",
                                                        contents, "skipped", 0));
            }
            json_object_set_new(o, "stacks", stacks);
        }
        json_array_append_new(threads, o);
    }
    return json_pack("{s:I, s:i, s:o, s:I, s:I, s:o}", "window_us", as_int(c->window_ns / 1000), "threshold_percent",
                     (int)c->threshold_percent, "process_percent", percent_json(c->process_tenths),
                     "threads_window_us", as_int(c->threads_window_ns / 1000), "sample_interval_us",
                     as_int(c->sample_interval_ns / 1000), "threads", threads);
}

/* Why a scene thread has no stack: its errno, and for a stop that timed out, why in words. */
static void add_thread_status(json_t *item, const hw_thread_snapshot *t)
{
    if (item && t->error)
        json_object_set_new(item, "error", json_string(strerror(t->error)));
    char why[96];
    if (item && t->status == HW_THREAD_TIMEOUT && t->timeout_ms > 0)
        json_object_set_new(item, "not_stopped_because", json_string(hw_thread_timeout_reason(t, why, sizeof why)));
}

/* collection.main_thread: early sampling's Point Stack and samples, or
 * why there are none. */
static json_t *main_thread_json(const hw_hang_info *info)
{
    json_t *main_thread = json_pack("{s:s, s:s}", "state", info->main_thread_state, "reason", info->main_thread_reason);
    const hw_point_stack *ps = info->point_stack;
    if (main_thread && ps) {
        json_t *contents = json_array();
        for (size_t i = 0; i < ps->frame_count; i++) {
            json_t *f = frame_json(&ps->frames[i]);
            if (f)
                json_object_set_new(f, "repeat_count", json_integer(ps->repeat_counts[i]));
            json_array_append_new(contents, f);
        }
        json_object_set_new(main_thread, "sample_count", json_integer((json_int_t)ps->sample_count));
        json_object_set_new(main_thread, "ring_capacity", json_integer((json_int_t)ps->ring_capacity));
        json_object_set_new(main_thread, "sample_interval_us", json_integer(as_int(ps->interval_ns / 1000)));
        json_object_set_new(main_thread, "point_stack_index", json_integer((json_int_t)ps->chosen_index));
        json_object_set_new(main_thread, "top_repeat_count", json_integer((json_int_t)ps->top_repeat));
        if (ps->sources)
            json_object_set_new(main_thread, "sample_sources",
                                json_pack("{s:I, s:I, s:I}", "kernel", (json_int_t)ps->sources[HW_SAMPLE_KERNEL],
                                          "stopped", (json_int_t)ps->sources[HW_SAMPLE_STOPPED], "reused",
                                          (json_int_t)ps->sources[HW_SAMPLE_REUSED]));
        if (ps->sources && ps->sources[HW_SAMPLE_KERNEL] > 0 && ps->kernel_trigger)
            json_object_set_new(main_thread, "kernel_sampler",
                                json_pack("{s:s, s:I}", "trigger", ps->kernel_trigger, "interval_us",
                                          as_int(ps->kernel_period_ns / 1000)));
        json_object_set_new(main_thread, "backtrace", json_pack("{s:o, s:i}", "contents", contents, "skipped", 0));
        if (ps->stacks && ps->stack_frames && ps->stacks->stack_count > 0)
            json_object_set_new(main_thread, "samples", samples_json(ps->stacks, ps->stack_frames));
    }
    return main_thread;
}

json_t *hw_report_build(const hw_hang_info *info, const hw_process_snapshot *snap, const hw_backtrace *backtraces,
                        const hw_image *images, size_t image_count, char id[37])
{
    size_t *order = report_order(snap);
    if (!order)
        return NULL;
    hw_new_uuid(id);

    json_t *threads = json_array();
    json_t *items = json_array();
    json_int_t hung_index = -1, holder_index = -1;
    char grouping_key[17];
    const hw_backtrace *hung_bt = NULL, *holder_bt = NULL;
    const hw_thread_snapshot *holder = NULL;
    for (size_t k = 0; k < snap->thread_count; k++) {
        const hw_thread_snapshot *t = &snap->threads[order[k]];
        const hw_backtrace *bt = backtraces ? &backtraces[order[k]] : NULL;
        json_array_append_new(threads, thread_json(t, bt, k));
        size_t frames = (t->status == HW_THREAD_CAPTURED && bt) ? bt->count : 0;
        json_t *item = json_pack("{s:I, s:o, s:b, s:b, s:s, s:I, s:I}", "thread_identifier", (json_int_t)t->tid,
                                 "name", foreign_text(t->name, sizeof t->name), "is_main_thread", t->is_main, "is_hung_thread", t->is_target,
                                 "status", hw_thread_status_name(t->status), "frame_count", (json_int_t)frames,
                                 "report_array_index", (json_int_t)k);
        add_thread_status(item, t);
        if (item && bt && bt->runtime_thread_name && t->status == HW_THREAD_CAPTURED)
            json_object_set_new(item, "python_name", FOREIGN(bt->runtime_thread_name));
        json_array_append_new(items, item);
        if (t->is_target) {
            hung_index = (json_int_t)k;
            hung_bt = (t->status == HW_THREAD_CAPTURED) ? bt : NULL;
        } else if ((info->gil_holder_tid != 0 && t->tid == info->gil_holder_tid) ||
                   (info->lock_holder_tid != 0 && t->tid == info->lock_holder_tid)) {
            holder = t;
            holder_index = (json_int_t)k;
            holder_bt = (t->status == HW_THREAD_CAPTURED) ? bt : NULL;
        }
    }
    free(order);
    /* Waiting for the GIL, the hang is where its holder is. */
    hw_grouping_key(holder_bt && holder_bt->count > 0 ? holder_bt : hung_bt, grouping_key);
    size_t hung_culprit = hung_bt ? hw_frames_culprit(hung_bt->frames, hung_bt->count) : SIZE_MAX;
    size_t holder_culprit = holder_bt ? hw_frames_culprit(holder_bt->frames, holder_bt->count) : SIZE_MAX;

    uint64_t stopped_max = 0;
    for (size_t i = 0; i < snap->thread_count; i++)
        if (snap->threads[i].stopped_ns > stopped_max)
            stopped_max = snap->threads[i].stopped_ns;

    json_t *report =
        json_pack("{s:s, s:I, s:s, s:o, s:I, s:s}", "id", id, "timestamp", (json_int_t)(info->detected_unix_ns / 1000000000),
                  "type", "standard", "process_name", foreign_text(snap->process_name, sizeof snap->process_name), "pid", (json_int_t)snap->pid, "version",
                  "hangwatch " HW_VERSION_STRING);
    if (report && snap->namespace_pid > 0)
        json_object_set_new(report, "namespace_pid", json_integer(snap->namespace_pid));
    json_t *capture = json_pack("{s:s, s:I, s:I, s:b}", "method", "ptrace", "stopped_us", as_int(snap->stop_wall_ns / 1000),
                                "max_thread_stopped_us", as_int(stopped_max / 1000), "process_exited",
                                snap->process_exited);
    if (capture && snap->stop_wall_ns > 0)
        json_object_set_new(capture, "stopping_us", json_integer(as_int(snap->stopping_ns / 1000)));
    if (capture && snap->tracer_pid > 0)
        add_tracer(capture, snap);
    if (capture && snap->retried_after_timeout)
        json_object_set_new(capture, "retried", json_true());
    if (capture && snap->target_boosted)
        json_object_set_new(capture, "target_boosted", json_true());
    if (capture && info->js_frames_from != NULL)
        json_object_set_new(capture, "js_frames", json_string(info->js_frames_from));
    json_t *main_thread = main_thread_json(info);
    json_t *collection = json_pack("{s:{s:I, s:o}, s:o}", "scene_threads", "enumerated_thread_count",
                                   (json_int_t)snap->enumerated_thread_count, "items", items, "main_thread",
                                   main_thread);
    if (collection && snap->threads_left_out > 0) {
        /* More threads than one capture takes (snapshot.h, max_threads). */
        json_t *scene = json_object_get(collection, "scene_threads");
        json_object_set_new(scene, "left_out_thread_count", json_integer((json_int_t)snap->threads_left_out));
        json_object_set_new(scene, "chosen_by", json_string("hung_main_loops_then_oldest"));
    }
    json_t *apm = json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:{s:I, s:I}, s:I, s:o, s:o}", "module", "hang", "detector",
                            info->detector, "check_mode", info->check_mode, "hang_type", info->hang_type,
                            "block_duration_us", as_int(info->block_duration_ns / 1000), "runloop_threshold_us",
                            as_int(info->threshold_ns / 1000), "hung_thread", "thread_identifier",
                            (json_int_t)info->hung_tid, "report_array_index", hung_index, "detected_at_unix_ms",
                            (json_int_t)(info->detected_unix_ns / 1000000), "capture", capture, "collection",
                            collection);
    if (apm && info->observer != NULL)
        json_object_set_new(apm, "observer", json_string(info->observer));
    if (snap->container.kind != HW_CONTAINER_NONE)
        json_object_set_new(apm, "container", hw_container_json(&snap->container));
    if (apm && info->loop_wait != NULL)
        json_object_set_new(apm, "loop_wait", loop_wait_json(info->loop_wait, info->loop_wait_site));
    if (apm && hung_culprit != SIZE_MAX)
        json_object_set_new(json_object_get(apm, "hung_thread"), "culprit_frame",
                            json_integer((json_int_t)hung_culprit));
    json_t *gc = apm ? gc_json(hung_bt) : NULL;
    if (gc)
        json_object_set_new(apm, "gc", gc);
    if (apm && info->stutter_window_ns)
        json_object_set_new(apm, "stutter",
                            json_pack("{s:I, s:I, s:i}", "window_us", as_int(info->stutter_window_ns / 1000), "busy_us",
                                      as_int(info->stutter_busy_ns / 1000), "stalls", (int)info->stutter_stalls));
    if (apm && info->cpu_high)
        json_object_set_new(apm, "cpu_high", cpu_high_json(info->cpu_high));
    if (apm && info->time)
        json_object_set_new(apm, "time", hw_time_json(info->time));
    if (apm && holder) {
        json_t *gil = json_pack("{s:I, s:o, s:I}", "thread_identifier", (json_int_t)holder->tid, "name",
                                foreign_text(holder->name, sizeof holder->name), "report_array_index", holder_index);
        if (gil && holder_bt && holder_bt->runtime_thread_name)
            json_object_set_new(gil, "python_name", FOREIGN(holder_bt->runtime_thread_name));
        if (gil && holder_culprit != SIZE_MAX)
            json_object_set_new(gil, "culprit_frame", json_integer((json_int_t)holder_culprit));
        json_object_set_new(apm, info->gil_holder_tid != 0 ? "gil_holder" : "lock_holder", gil);
    }
    /* A cycle of lock holders back to the hung thread: a deadlock, every
     * thread of it named. */
    if (apm && info->time && info->time->look.valid && info->time->look.deadlock) {
        json_t *cycle = json_array();
        json_array_append_new(cycle, json_integer(info->hung_tid));
        for (size_t i = 0; i < info->time->look.holder_count; i++)
            json_array_append_new(cycle, json_integer(info->time->look.holders[i]));
        json_object_set_new(apm, "deadlock",
                            json_pack("{s:o, s:i}", "threads", cycle, "back_to", info->time->look.deadlock_back_to));
    }
    if (apm) {
        if (info->executable)
            json_object_set_new(apm, "executable", FOREIGN(info->executable));
        json_object_set_new(apm, "grouping_key", json_string(grouping_key));
        json_object_set_new(apm, "stretch_report_index", json_integer(info->stretch_report_index));
    }
    json_t *root = json_pack("{s:o, s:{s:o}, s:o, s:o}", "report", report, "crash", "threads", threads,
                             "binary_images", images_json(images, image_count), "hangwatch", apm);
    return root;
}

const char *hw_signal_name(int sig, char *buf, size_t len)
{
    const char *abbrev = sig > 0 && sig < 65 ? sigabbrev_np(sig) : NULL;
    if (abbrev != NULL)
        snprintf(buf, len, "SIG%s", abbrev);
    else
        snprintf(buf, len, "SIG%d", sig);
    return buf;
}

/* hangwatch.process_end of a fatal hang: how the process died. */
static json_t *process_end_json(int wait_status)
{
    if (WIFSIGNALED(wait_status)) {
        char name[32];
        int sig = WTERMSIG(wait_status);
        return json_pack("{s:i, s:s, s:b}", "signal", sig, "signal_name", hw_signal_name(sig, name, sizeof name),
                         "core_dumped", WCOREDUMP(wait_status) != 0);
    }
    return json_pack("{s:i}", "exit_status", WEXITSTATUS(wait_status));
}

/* A pressure figure, or nothing when the kernel has none (-1). */
static void set_pressure(json_t *o, const char *key, double value)
{
    if (value >= 0)
        json_object_set_new(o, key, json_real(value));
}

/* A futex wait's lock: where, what kind, who holds it (its chain of
 * holders), or why that is not known. */
static json_t *lock_json(const hw_blocked_look *look)
{
    char hex[24];
    snprintf(hex, sizeof hex, "0x%" PRIx64, look->lock_address);
    json_t *o = json_pack("{s:s, s:s}", "address", hex, "kind", hw_lock_kind_name(look->lock_kind));
    if (!o)
        return NULL;
    if (look->lock_owner > 0) {
        json_object_set_new(o, "owner", json_integer(look->lock_owner));
        json_t *holders = json_array();
        for (size_t i = 0; i < look->holder_count; i++)
            json_array_append_new(holders, json_integer(look->holders[i]));
        json_object_set_new(o, "holders", holders);
    }
    if (look->lock_owner_pid > 0)
        json_object_set_new(o, "owner_process", json_pack("{s:i, s:o}", "pid", look->lock_owner_pid, "name",
                                                          foreign_text(look->lock_owner_name,
                                                                       sizeof look->lock_owner_name)));
    if (look->lock_readers > 0)
        json_object_set_new(o, "readers", json_integer(look->lock_readers));
    if (look->lock_missing && look->lock_owner <= 0)
        json_object_set_new(o, "owner_missing", json_string(look->lock_missing));
    return o;
}

json_t *hw_container_json(const hw_container *c)
{
    json_t *o = json_pack("{s:s}", "kind", hw_container_kind_name(c->kind));
    if (!o)
        return NULL;
    char label[136];
    hw_container_label(c, label, sizeof label);
    const struct {
        const char *key, *value;
    } fields[] = {{"runtime", c->runtime}, {"id", c->id}, {"pod_uid", c->pod_uid}, {"pod_name", c->pod_name},
                  {"namespace", c->pod_namespace}, {"unit", c->unit}, {"slice", c->slice}, {"label", label}};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (fields[i].value[0])
            json_object_set_new(o, fields[i].key, FOREIGN(fields[i].value));
    return o;
}

static json_t *blocked_in_json(const hw_blocked_look *look)
{
    char state[2] = {look->state, '\0'};
    json_t *o = json_pack("{s:s}", "state", state);
    if (!o)
        return NULL;
    if (look->wchan[0])
        json_object_set_new(o, "wchan", FOREIGN(look->wchan));
    if (look->syscall_unreadable) {
        json_object_set_new(o, "syscall_unreadable", json_true());
        return o;
    }
    if (!look->in_syscall) {
        json_object_set_new(o, "in_syscall", json_false());
        return o;
    }
    const char *name = hw_syscall_name(look->syscall);
    json_object_set_new(o, "syscall", json_string(name ? name : "unknown"));
    json_object_set_new(o, "syscall_nr", json_integer(look->syscall));
    if (look->restarted)
        json_object_set_new(o, "restarted", json_true());
    if (hw_syscall_waits_on_set(look->syscall) && look->wait_fd_count >= 0)
        json_object_set_new(o, "wait_fds", json_integer(look->wait_fd_count));
    json_t *args = json_array();
    for (int i = 0; i < 6; i++) {
        char hex[24];
        snprintf(hex, sizeof hex, "0x%" PRIx64, look->args[i]);
        json_array_append_new(args, json_string(hex));
    }
    json_object_set_new(o, "args", args);
    if (look->lock_owner > 0 || look->lock_kind != HW_LOCK_UNKNOWN || look->lock_missing)
        json_object_set_new(o, "lock", lock_json(look));
    if (look->fd >= 0) {
        json_object_set_new(o, "fd", json_integer(look->fd));
        json_object_set_new(o, "fd_kind", json_string(look->fd_kind));
        json_object_set_new(o, "fd_is", FOREIGN(look->fd_text));
    }
    const hw_wait_peer *peer = &look->peer;
    if (peer->pid > 0 && peer->role != NULL) {
        json_t *p = json_pack("{s:s, s:i, s:o}", "role", peer->role, "pid", (int)peer->pid, "name",
                              foreign_text(peer->name, sizeof peer->name));
        if (p && peer->state) {
            char st[2] = {peer->state, '\0'};
            json_object_set_new(p, "state", json_string(st));
        }
        const char *in = peer->syscall >= 0 ? hw_syscall_name(peer->syscall) : NULL;
        if (p && in)
            json_object_set_new(p, "syscall", json_string(in));
        if (p && peer->wchan[0])
            json_object_set_new(p, "wchan", FOREIGN(peer->wchan));
        json_object_set_new(o, "peer", p);
    } else if (peer->missing) {
        json_object_set_new(o, "peer_missing", json_string(peer->missing));
    }
    return o;
}

json_t *hw_time_json(const hw_time_section *t)
{
    if (!t->present)
        return json_pack("{s:s}", "missing", t->missing ? t->missing : "not measured");
    json_t *o = json_pack("{s:I, s:s, s:I}", "window_us", as_int(t->window_ns / 1000), "window_from",
                          t->window_from ? t->window_from : "earlier_look", "window_offset_us",
                          as_int(t->window_offset_ns / 1000));
    if (!o)
        return NULL;
    if (t->partial)
        json_object_set_new(o, "partial", json_true());
    if (t->has_schedstat) {
        json_object_set_new(o, "on_cpu_us", json_integer(as_int(t->on_cpu_ns / 1000)));
        if (t->has_cputime) {
            json_object_set_new(o, "user_us", json_integer(as_int(t->user_ns / 1000)));
            json_object_set_new(o, "system_us", json_integer(as_int(t->system_ns / 1000)));
        }
        json_object_set_new(o, "runqueue_wait_us", json_integer(as_int(t->runqueue_ns / 1000)));
        json_object_set_new(o, "blocked_us", json_integer(as_int(t->blocked_ns / 1000)));
        json_object_set_new(o, "stopped_us", json_integer(as_int(t->stopped_ns / 1000)));
        if (t->runqueue_pending_ns > 0)
            json_object_set_new(o, "runqueue_pending_us", json_integer(as_int(t->runqueue_pending_ns / 1000)));
    } else {
        json_object_set_new(o, "missing", json_string(t->missing ? t->missing : "no schedstat"));
    }
    if (t->has_faults)
        json_object_set_new(o, "major_faults", json_integer(as_int(t->major_faults)));
    if (t->has_cgroup) {
        json_t *cg = json_pack("{s:o, s:i, s:b}", "path", FOREIGN(t->cgroup), "version", t->cgroup_version, "limited",
                               t->cgroup_limited);
        if (cg && t->cgroup_limited) {
            json_object_set_new(cg, "quota_us", json_integer(as_int(t->quota_us)));
            json_object_set_new(cg, "period_us", json_integer(as_int(t->period_us)));
        }
        json_object_set_new(o, "cgroup", cg);
        if (t->throttle_missing) {
            json_object_set_new(o, "throttled_missing", json_string(t->throttle_missing));
        } else {
            json_object_set_new(o, "throttled_us", json_integer(as_int(t->throttled_ns / 1000)));
            json_object_set_new(o, "throttled_periods", json_integer(as_int(t->throttled_periods)));
        }
    } else if (t->cgroup_missing) {
        json_object_set_new(o, "cgroup_missing", json_string(t->cgroup_missing));
    }
    json_t *pressure = json_object();
    set_pressure(pressure, "cpu_some_avg10", t->psi_cpu);
    set_pressure(pressure, "memory_some_avg10", t->psi_memory);
    set_pressure(pressure, "io_some_avg10", t->psi_io);
    if (json_object_size(pressure) > 0) {
        json_object_set_new(pressure, "of", json_string(t->psi_of_cgroup ? "cgroup" : "machine"));
        json_object_set_new(o, "pressure", pressure);
    }
    else
        json_decref(pressure);
    if (t->look.valid)
        json_object_set_new(o, "blocked_in", blocked_in_json(&t->look));
    if (t->slept.valid) {
        json_t *slept = blocked_in_json(&t->slept);
        json_object_set_new(slept, "looks", json_integer(t->slept_looks));
        json_object_set_new(slept, "of_looks", json_integer(t->looks));
        json_object_set_new(o, "slept_in", slept);
    }
    json_object_set_new(o, "cause", json_string(hw_cause_name(t->cause)));
    if (t->secondary != HW_CAUSE_UNKNOWN)
        json_object_set_new(o, "secondary", json_pack("{s:s, s:I}", "cause", hw_cause_name(t->secondary), "us",
                                                      as_int(t->secondary_ns / 1000)));
    if (t->blocked_on != HW_BLOCKED_ON_NONE)
        json_object_set_new(o, "blocked_on", json_string(hw_blocked_on_name(t->blocked_on)));
    return o;
}

int hw_report_set_final(json_t *report, const hw_hang_end *e)
{
    json_t *apm = json_object_get(report, "hangwatch");
    if (!json_is_object(apm))
        return -EINVAL;
    json_object_set_new(apm, "final_duration_us", json_integer(as_int(e->final_ns / 1000)));
    json_object_set_new(apm, "final_duration_precision_us", json_integer(as_int(e->precision_ns / 1000)));
    json_object_set_new(apm, "hang_end", json_string(e->end));
    if (e->wait_status >= 0)
        json_object_set_new(apm, "process_end", process_end_json(e->wait_status));
    json_t *time = json_object_get(apm, "time");
    if (json_is_object(time))
        json_object_set_new(time, "at_end", hw_time_json(&e->time));
    return 0;
}

int hw_report_add_final_duration(hw_report_dir *d, const char *file_name, const hw_hang_end *e)
{
    char *text = NULL;
    size_t len = 0;
    int rc = hw_report_dir_read(d, file_name, &text, &len);
    if (rc != 0)
        return rc;
    json_error_t err;
    json_t *root = json_loadb(text, len, 0, &err);
    free(text);
    if (!root)
        return -EINVAL;
    rc = hw_report_set_final(root, e);
    if (rc == 0)
        rc = hw_report_write(d, file_name, root);
    json_decref(root);
    return rc;
}

int hw_report_write(hw_report_dir *d, const char *file_name, json_t *report)
{
    char *text = json_dumps(report, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (!text)
        return -ENOMEM;
    size_t len = strlen(text);
    /* One more byte for the final newline: text ends in its NUL, replaced. */
    char *with_newline = realloc(text, len + 2);
    if (!with_newline) {
        free(text);
        return -ENOMEM;
    }
    with_newline[len] = '\n';
    with_newline[len + 1] = '\0';
    int rc = hw_report_dir_write(d, file_name, with_newline, len + 1);
    free(with_newline);
    return rc;
}
