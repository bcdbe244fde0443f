/*
 * report_summary.c - a report reduced to what stats, export and html use
 * (report_summary.h): copied out of the JSON so that the report can be
 * freed, every field checked for its type and range first.  Also the
 * choice of a hang's culprit frame and the list of many reports'
 * summaries.
 */
#include "report_summary.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "foreign_text.h"
#include "core/in_app.h"
#include "core/python_machinery.h"
#include "core/saturating.h"
#include "core/text_bits.h"

static const char *const cause_labels[HW_CAUSE_LABELS] = {
    "working",         "starved",         "throttled",     "blocked on io", "blocked on network",
    "blocked on lock", "blocked on child", "blocked on sleep", "blocked on other", "blocked",
    "paging",          "mixed",
};

const char *hw_cause_label_at(size_t index)
{
    return index < HW_CAUSE_LABELS ? cause_labels[index] : NULL;
}

const char *hw_cause_label(const char *cause, const char *blocked_on)
{
    if (cause == NULL)
        return NULL;
    static const char blocked_on_prefix[] = "blocked on ";
    const size_t prefix_len = sizeof blocked_on_prefix - 1;
    if (strcmp(cause, "blocked") == 0 && blocked_on != NULL) {
        for (size_t i = 0; i < HW_CAUSE_LABELS; i++)
            if (strncmp(cause_labels[i], blocked_on_prefix, prefix_len) == 0 &&
                strcmp(cause_labels[i] + prefix_len, blocked_on) == 0)
                return cause_labels[i];
    }
    for (size_t i = 0; i < HW_CAUSE_LABELS; i++)
        if (strcmp(cause_labels[i], cause) == 0)
            return cause_labels[i];
    return NULL;
}

/* A non-negative integer field, or false. */
static bool uint_at(json_t *obj, const char *key, uint64_t *out)
{
    json_t *v = json_object_get(obj, key);
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return false;
    *out = (uint64_t)json_integer_value(v);
    return true;
}

/* A copy of the string at `key`, or of `fallback` (which may be NULL).
 * *oom is set when a copy could not be made. */
static char *dup_at(json_t *obj, const char *key, const char *fallback, bool *oom)
{
    const char *s = hw_str_at(obj, key, fallback);
    if (s == NULL)
        return NULL;
    char *copy = strdup(s);
    if (copy == NULL)
        *oom = true;
    return copy;
}

static const char *language_of(json_t *frame)
{
    const char *language = hw_str_at(frame, "language", "native");
    if (strcmp(language, "python") == 0)
        return "python";
    if (strcmp(language, "javascript") == 0)
        return "javascript";
    return "native";
}

static void frame_clear(hw_sframe *f)
{
    free(f->name);
    free(f->file);
    free(f->object);
    memset(f, 0, sizeof *f);
}

/* One frame of a report, as a summary keeps it.  0, or -1 (out of memory). */
static int frame_of(json_t *frame, hw_sframe *out)
{
    bool oom = false;
    memset(out, 0, sizeof *out);
    out->language = language_of(frame);
    const char *symbol = hw_str_at(frame, "symbol_name", NULL);
    const char *object = hw_str_at(frame, "object_name", NULL);
    uint64_t offset;
    if (symbol != NULL && symbol[0] != '\0') {
        out->name = strdup(symbol);
        out->named = true;
    } else if (object != NULL && uint_at(frame, "object_offset", &offset)) {
        if (asprintf(&out->name, "%s+0x%" PRIx64, object, offset) < 0)
            out->name = NULL;
    } else if (object != NULL) {
        if (asprintf(&out->name, "%s+?", object) < 0)
            out->name = NULL;
    } else {
        out->name = strdup("??");
    }
    oom = out->name == NULL;
    out->file = dup_at(frame, "source_file", NULL, &oom);
    json_int_t line = hw_int_at(frame, "source_line", 0);
    out->line = line > 0 ? line : 0;
    out->line_is_start = out->line > 0 && json_is_true(json_object_get(frame, "source_line_is_function_start"));
    out->object = dup_at(frame, "object_name", NULL, &oom);
    json_int_t repeat = hw_int_at(frame, "repeat_count", 0);
    out->repeat_count = repeat > 0 ? repeat : 0;
    json_t *in_app = json_object_get(frame, "in_app");
    out->in_app = json_is_boolean(in_app) ? json_is_true(in_app) : -1;
    hw_frame_origin origin;
    if (hw_frame_origin_parse(hw_str_at(frame, "origin", NULL), &origin))
        out->origin = hw_frame_origin_name(origin);
    if (oom) {
        frame_clear(out);
        return -1;
    }
    return 0;
}

/* The frames of a JSON array of frames, at most `max`. */
static int frames_in(json_t *contents, size_t max, hw_sframe **frames, size_t *count, size_t *more)
{
    size_t n = json_array_size(contents);
    *frames = NULL;
    *count = 0;
    if (more != NULL)
        *more = n > max ? n - max : 0;
    if (n > max)
        n = max;
    if (n == 0)
        return 0;
    hw_sframe *f = calloc(n, sizeof *f);
    if (f == NULL)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (frame_of(json_array_get(contents, i), &f[i]) != 0) {
            hw_sframes_free(f, i);
            return -1;
        }
    }
    *frames = f;
    *count = n;
    return 0;
}

/* The frames of a backtrace object's "contents", at most
 * HW_SUMMARY_MAX_FRAMES.  0, or -1 (out of memory). */
static int frames_of(json_t *backtrace, hw_sframe **frames, size_t *count)
{
    return frames_in(json_object_get(backtrace, "contents"), HW_SUMMARY_MAX_FRAMES, frames, count, NULL);
}

int hw_sframes_of(json_t *backtrace, size_t max, hw_sframe **frames, size_t *count, size_t *more)
{
    return frames_in(json_object_get(backtrace, "contents"), max, frames, count, more);
}

void hw_sframes_free(hw_sframe *frames, size_t count)
{
    for (size_t i = 0; i < count; i++)
        frame_clear(&frames[i]);
    free(frames);
}

int hw_sframe_copy(const hw_sframe *from, hw_sframe *to)
{
    hw_sframe f = *from;
    f.name = strdup(from->name);
    f.file = from->file ? strdup(from->file) : NULL;
    f.object = from->object ? strdup(from->object) : NULL;
    if (f.name == NULL || (from->file && f.file == NULL) || (from->object && f.object == NULL)) {
        free(f.name);
        free(f.file);
        free(f.object);
        return -1;
    }
    *to = f;
    return 0;
}

void hw_sampled_free(hw_sampled *s)
{
    hw_sframes_free(s->frames, s->frame_count);
    for (size_t i = 0; i < s->stack_count; i++)
        free(s->stacks[i].frames);
    free(s->stacks);
    memset(s, 0, sizeof *s);
}

int hw_sampled_of(json_t *root, hw_sampled *out)
{
    memset(out, 0, sizeof *out);
    json_t *samples = json_object_get(
        json_object_get(json_object_get(json_object_get(root, "hangwatch"), "collection"), "main_thread"), "samples");
    json_t *stacks = json_object_get(samples, "stacks");
    if (!json_is_array(stacks) || json_array_size(stacks) == 0)
        return 0;
    uint64_t left_out;
    if (uint_at(samples, "left_out", &left_out))
        out->left_out = left_out;
    if (frames_in(json_object_get(samples, "frames"), HW_SAMPLED_MAX_FRAMES, &out->frames, &out->frame_count, NULL) != 0)
        return -1;
    size_t n = json_array_size(stacks);
    out->stacks = calloc(n < HW_SAMPLED_MAX_STACKS ? n : HW_SAMPLED_MAX_STACKS, sizeof *out->stacks);
    if (out->stacks == NULL) {
        hw_sampled_free(out);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *st = json_array_get(stacks, i);
        json_t *frames = json_object_get(st, "frames");
        uint64_t count;
        if (!uint_at(st, "count", &count) || count == 0)
            continue;
        size_t depth = json_array_size(frames);
        bool usable = out->stack_count < HW_SAMPLED_MAX_STACKS && depth > 0 && depth <= HW_SUMMARY_MAX_FRAMES;
        for (size_t k = 0; usable && k < depth; k++) {
            json_t *v = json_array_get(frames, k);
            usable = json_is_integer(v) && json_integer_value(v) >= 0 &&
                     (uint64_t)json_integer_value(v) < out->frame_count;
        }
        if (!usable) {
            out->left_out = hw_add_sat(out->left_out, count);
            continue;
        }
        hw_sampled_stack *s = &out->stacks[out->stack_count];
        if ((s->frames = calloc(depth, sizeof *s->frames)) == NULL) {
            hw_sampled_free(out);
            return -1;
        }
        for (size_t k = 0; k < depth; k++)
            s->frames[k] = (uint32_t)json_integer_value(json_array_get(frames, k));
        s->depth = depth;
        s->count = count;
        s->point_stack = json_is_true(json_object_get(st, "point_stack"));
        out->samples = hw_add_sat(out->samples, count);
        out->stack_count++;
    }
    if (out->stack_count == 0)
        hw_sampled_free(out); /* nothing to draw; left_out goes with it */
    return 0;
}

/* The culprit of frames that say whose code they are (core/in_app.h);
 * false when they do not. */
static bool culprit_by_origin(const hw_sframe *frames, size_t count, size_t *culprit)
{
    hw_culprit_facts *facts = calloc(count ? count : 1, sizeof *facts);
    if (facts == NULL)
        return false;
    bool said = count > 0;
    for (size_t i = 0; i < count && said; i++) {
        hw_frame_origin origin = HW_ORIGIN_UNKNOWN;
        said = frames[i].in_app >= 0 && frames[i].origin != NULL && hw_frame_origin_parse(frames[i].origin, &origin);
        bool native = strcmp(frames[i].language, "native") == 0;
        facts[i] = (hw_culprit_facts){
            .origin = origin,
            .in_app = frames[i].in_app == 1,
            .runtime_frame = !native,
            .named = frames[i].named,
            .machinery = hw_frame_is_machinery(native, origin, frames[i].named ? frames[i].name : NULL),
            .call_stub = native && frames[i].named && hw_frame_is_call_stub(frames[i].name),
        };
    }
    if (said) {
        size_t index = hw_culprit_index(facts, count);
        *culprit = index == SIZE_MAX ? HW_NO_FRAME : index;
    }
    free(facts);
    return said;
}

size_t hw_culprit_frame(const hw_sframe *frames, size_t count, const char *executable, const char *process_name)
{
    size_t culprit;
    if (culprit_by_origin(frames, count, &culprit))
        return culprit;
    for (size_t i = 0; i < count; i++)
        if (strcmp(frames[i].language, "native") != 0)
            return i;
    for (size_t i = 0; i < count; i++)
        if (frames[i].object != NULL && strstr(frames[i].object, "python") != NULL &&
            !hw_python_machinery(frames[i].named ? frames[i].name : NULL))
            return i;
    if (executable != NULL && executable[0] != '\0') {
        const char *exe = hw_base_name(executable);
        for (size_t i = 0; i < count; i++)
            if (frames[i].object != NULL && strcmp(frames[i].object, exe) == 0)
                return i;
    }
    if (process_name != NULL && process_name[0] != '\0' && strcmp(process_name, "?") != 0) {
        size_t len = strlen(process_name);
        for (size_t i = 0; i < count; i++)
            if (frames[i].object != NULL && strncmp(frames[i].object, process_name, len) == 0)
                return i;
    }
    for (size_t i = 0; i < count; i++)
        if (frames[i].named)
            return i;
    return HW_NO_FRAME;
}

/* The summary's label: the culprit of the thread that holds what the hung
 * thread waits for (the GIL, a mutex), where the report names one, else
 * the hung thread's.  0, or -1 when out of memory. */
static int label_of(json_t *apm, json_t *threads, hw_hang_summary *out)
{
    json_t *holder = json_object_get(apm, "gil_holder");
    if (!json_is_object(holder))
        holder = json_object_get(apm, "lock_holder");
    json_int_t at = hw_int_at(holder, "report_array_index", -1), chosen = hw_int_at(holder, "culprit_frame", -1);
    json_t *thread = at >= 0 ? json_array_get(threads, (size_t)at) : NULL;
    if (json_is_object(thread) && chosen >= 0) {
        hw_sframe *frames = NULL;
        size_t count = 0, more = 0;
        if (frames_in(json_object_get(json_object_get(thread, "backtrace"), "contents"), HW_SUMMARY_MAX_FRAMES,
                      &frames, &count, &more) != 0)
            return -1;
        int rc = 0;
        if ((uint64_t)chosen < count) {
            rc = hw_sframe_copy(&frames[chosen], &out->label);
            out->has_label = rc == 0;
            out->label_tid = hw_int_at(holder, "thread_identifier", -1);
        }
        hw_sframes_free(frames, count);
        if (rc != 0 || out->has_label)
            return rc;
    }
    if (out->culprit == HW_NO_FRAME)
        return 0;
    if (hw_sframe_copy(&out->frames[out->culprit], &out->label) != 0)
        return -1;
    out->has_label = true;
    out->label_tid = out->tid;
    return 0;
}

int hw_hang_summary_of(json_t *root, const char *path, hw_hang_summary *out)
{
    memset(out, 0, sizeof *out);
    out->culprit = HW_NO_FRAME;
    out->pid = out->tid = -1;
    json_t *report = json_object_get(root, "report");
    json_t *apm = json_object_get(root, "hangwatch");
    json_t *threads = json_object_get(json_object_get(root, "crash"), "threads");
    bool oom = false;

    out->path = strdup(path);
    oom |= out->path == NULL;
    const char *key = hw_str_at(apm, "grouping_key", "?");
    out->key = strdup(key[0] != '\0' ? key : "?");
    oom |= out->key == NULL;
    out->hang_type = dup_at(apm, "hang_type", "hang", &oom);
    out->is_hang = out->hang_type != NULL &&
                   (strcmp(out->hang_type, "hang") == 0 || strcmp(out->hang_type, "launch_hang") == 0);
    out->process_name = dup_at(report, "process_name", "?", &oom);
    json_int_t pid = hw_int_at(report, "pid", -1);
    out->pid = pid > 0 ? pid : -1;
    (void)uint_at(apm, "stretch_report_index", &out->stretch_index);

    uint64_t ms;
    if (uint_at(apm, "detected_at_unix_ms", &ms) && ms <= (uint64_t)INT64_MAX) {
        out->seen_known = true;
        out->seen_ms = (int64_t)ms;
    } else if (uint_at(report, "timestamp", &ms) && ms <= (uint64_t)(INT64_MAX / 1000)) {
        out->seen_known = true;
        out->seen_ms = (int64_t)ms * 1000;
    }
    (void)uint_at(apm, "block_duration_us", &out->block_us);
    out->final_known = uint_at(apm, "final_duration_us", &out->final_us);
    out->hang_end = dup_at(apm, "hang_end", NULL, &oom);
    json_t *time = json_object_get(apm, "time");
    out->cause = hw_cause_label(hw_str_at(time, "cause", NULL), hw_str_at(time, "blocked_on", NULL));
    out->cause_partial = out->cause != NULL && json_is_true(json_object_get(time, "partial"));
    out->time_known = uint_at(time, "window_us", &out->window_us) && uint_at(time, "on_cpu_us", &out->on_cpu_us) &&
                      uint_at(time, "runqueue_wait_us", &out->runqueue_us) &&
                      uint_at(time, "blocked_us", &out->blocked_us);
    (void)uint_at(time, "throttled_us", &out->throttled_us);

    /* The hung thread: crash.threads[hung_thread.report_array_index]. */
    json_t *hung = json_object_get(apm, "hung_thread");
    json_int_t index = hw_int_at(hung, "report_array_index", -1);
    json_t *thread = index >= 0 ? json_array_get(threads, (size_t)index) : NULL;
    json_int_t tid = hw_int_at(hung, "thread_identifier", hw_int_at(thread, "thread_identifier", -1));
    out->tid = tid > 0 ? tid : -1;
    out->thread_name = dup_at(thread, "name", "?", &oom);
    out->runtime_note = dup_at(thread, "runtime_frames_error", NULL, &oom);
    if (!oom && json_is_object(thread) &&
        frames_in(json_object_get(json_object_get(thread, "backtrace"), "contents"), HW_SUMMARY_MAX_FRAMES,
                  &out->frames, &out->frame_count, &out->frames_more) != 0)
        oom = true;
    json_t *hung_bt = json_object_get(thread, "backtrace");
    json_int_t omitted = hw_int_at(hung_bt, "frames_omitted", 0), omitted_at = hw_int_at(hung_bt, "frames_omitted_at", -1);
    if (omitted > 0 && omitted_at >= 0 && (uint64_t)omitted_at <= out->frame_count) {
        out->frames_omitted = (uint64_t)omitted;
        out->frames_omitted_at = (size_t)omitted_at;
    }
    json_int_t chosen = hw_int_at(hung, "culprit_frame", -1);
    if (!oom && chosen >= 0 && (uint64_t)chosen < out->frame_count)
        out->culprit = (size_t)chosen; /* the agent's choice */
    else if (!oom)
        out->culprit = hw_culprit_frame(out->frames, out->frame_count, hw_str_at(apm, "executable", NULL),
                                        out->process_name);

    if (!oom && label_of(apm, threads, out) != 0)
        oom = true;

    json_t *main_thread = json_object_get(json_object_get(apm, "collection"), "main_thread");
    if (!oom && frames_of(json_object_get(main_thread, "backtrace"), &out->point, &out->point_count) != 0)
        oom = true;
    (void)uint_at(main_thread, "sample_count", &out->sample_count);
    (void)uint_at(main_thread, "sample_interval_us", &out->sample_interval_us);

    if (oom) {
        hw_hang_summary_free(out);
        return -1;
    }
    return 0;
}

void hw_hang_summary_free(hw_hang_summary *s)
{
    if (s->has_label)
        frame_clear(&s->label);
    free(s->path);
    free(s->key);
    free(s->hang_type);
    free(s->process_name);
    free(s->thread_name);
    free(s->hang_end);
    free(s->runtime_note);
    for (size_t i = 0; i < s->frame_count; i++)
        frame_clear(&s->frames[i]);
    free(s->frames);
    for (size_t i = 0; i < s->point_count; i++)
        frame_clear(&s->point[i]);
    free(s->point);
    memset(s, 0, sizeof *s);
    s->culprit = HW_NO_FRAME;
}

/* ---- the summaries of many reports ---------------------------------------- */

int hw_summaries_add(hw_summaries *all, const char *path, json_t *root)
{
    if (all->count == all->cap) {
        size_t bigger = all->cap ? all->cap * 2 : 64;
        hw_hang_summary *grown = realloc(all->s, bigger * sizeof *grown);
        if (grown == NULL)
            return -1;
        all->s = grown;
        if (all->with_samples) {
            hw_sampled *more = realloc(all->sampled, bigger * sizeof *more);
            if (more == NULL)
                return -1;
            all->sampled = more;
        }
        all->cap = bigger;
    }
    if (all->with_samples && hw_sampled_of(root, &all->sampled[all->count]) != 0)
        return -1;
    if (hw_hang_summary_of(root, path, &all->s[all->count]) != 0) {
        if (all->with_samples)
            hw_sampled_free(&all->sampled[all->count]);
        return -1;
    }
    all->count++;
    return 0;
}

void hw_summaries_free(hw_summaries *all)
{
    for (size_t i = 0; i < all->count; i++) {
        hw_hang_summary_free(&all->s[i]);
        if (all->sampled)
            hw_sampled_free(&all->sampled[i]);
    }
    free(all->s);
    free(all->sampled);
    memset(all, 0, sizeof *all);
}

uint64_t hw_hang_duration_us(const hw_hang_summary *s)
{
    return s->final_known ? s->final_us : s->block_us;
}

size_t hw_innermost_runtime_frame(const hw_sframe *frames, const uint32_t *index, size_t depth)
{
    for (size_t k = 0; k < depth; k++)
        if (strcmp(frames[index ? index[k] : k].language, "native") != 0)
            return k;
    return HW_NO_FRAME;
}

bool hw_frame_drawn(const hw_sframe *f, size_t k, size_t innermost_runtime)
{
    if (innermost_runtime == HW_NO_FRAME || k <= innermost_runtime || strcmp(f->language, "native") != 0)
        return true;
    hw_frame_origin origin;
    if (f->origin == NULL || !hw_frame_origin_parse(f->origin, &origin))
        return true;
    return origin == HW_ORIGIN_APP || origin == HW_ORIGIN_PACKAGE;
}
