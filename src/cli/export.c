/*
 * export.c - `hangwatch export --format speedscope|chrome-trace -o FILE
 * REPORT.json|DIR...`: hangs in the formats of existing viewers, so that
 * they can be looked at in speedscope or Perfetto (or chrome://tracing).
 *
 * A report holds what was captured, not a profile: the hung thread's stack
 * at detection (and again each time the stack moved while the hang lasted:
 * annealing gives a stretch one report per stack), the busy time at each
 * capture, the hang's final duration once it ended, and with early sampling
 * the Point Stack (Matrix's most telling stack of the ring, with repeat
 * counts) and how many samples the ring held.  The exports contain exactly
 * that, placed in time and weighted as docs/decisions.md (§27) describes;
 * nothing is invented:
 *
 *   speedscope (its file format, https://www.speedscope.app/file-format-
 *   schema.json): for each hung thread a "sampled" profile of its captured
 *   stacks, each weighted by the time it stands for (from the previous
 *   capture of the stretch, or the stretch's start, to this one; the last
 *   also to the end), so a thread's weights add up to its hang time;
 *   where there are Point Stacks, a second profile of those, each weighted
 *   by its ring's span (samples x interval); and where reports carry every
 *   sample of the ring (collection.main_thread.samples), a third: each
 *   distinct sampled stack weighted by its count x the interval, from the
 *   last report of each hang that has them (a hang's follow-up reports
 *   hold the same ring, so their samples would be counted again).
 *
 *   chrome-trace (the Trace Event Format's JSON object form): each hang a
 *   complete ("X") event on its process and thread, from its start
 *   (detection less busy time) to its end; inside it each captured stack
 *   as nested complete events, one per frame, from its capture to the next
 *   capture or the end; the Point Stack as an instant event at detection;
 *   process and thread names as metadata ("M") events.
 *
 * The hangs' stretches are hang_stretches.c's and speedscope's shared
 * frames a frame table of flame_graph.c, as for `hangwatch html`.
 */
#include "export.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flame_graph.h"
#include "foreign_text.h"
#include "hang_stretches.h"
#include "core/hw_version.h"
#include "json_file.h"
#include "report_command.h"
#include "report_read.h"
#include "report_summary.h"
#include "core/saturating.h"
#include "core/text_escape.h"

static const char export_help[] =
    "usage: hangwatch export --format speedscope|chrome-trace -o FILE REPORT.json|DIR...\n"
    "\n"
    "Writes the hangs of the reports given (and of the *.json files in the\n"
    "directories given) in a format that existing viewers open:\n"
    "\n"
    "  speedscope     speedscope's JSON file format (open it at speedscope.app,\n"
    "                 or with the speedscope command): for each hung thread a\n"
    "                 sampled profile of its captured stacks weighted by the\n"
    "                 hang time each stands for; with --early-sampling, one\n"
    "                 of its Point Stacks weighted by the samples' span and\n"
    "                 one of every sample (each hang's last ring) weighted\n"
    "                 by count x interval\n"
    "  chrome-trace   Chrome's Trace Event JSON (open it in Perfetto,\n"
    "                 chrome://tracing or speedscope): each hang as a complete\n"
    "                 event on its process and thread, its captured stacks as\n"
    "                 nested events from their capture on, the Point Stack as\n"
    "                 an instant event, thread and process names as metadata\n"
    "\n"
    "  --format FORMAT   speedscope or chrome-trace\n"
    "  -o, --output FILE where to write (mode 0600, written atomically, never\n"
    "                    through a symbolic link); - for standard output\n"
    "\n"
    "A report holds the stacks captured, not every sample: docs/decisions.md\n"
    "says exactly what each export contains.  A file that cannot be read or\n"
    "is not a report is named on stderr and skipped; the exit status is 0\n"
    "when a hang was exported, 1 when none could be (nothing is written), 2\n"
    "for a usage error.\n";

/* ---- hangs in time ---------------------------------------------------------- */

/* One report of a stretch: its stack was captured at `at_us`. */
typedef struct capture {
    const hw_hang_summary *s;
    int64_t at_us;
} capture;

typedef struct stretch {
    const hw_hang_summary *first; /* the report that opens it */
    int64_t start_us, end_us;     /* Unix us (0-based when the reports do not say when) */
    bool ended;                   /* its final duration is known */
    uint64_t final_us;            /* then, as its reports say */
    uint64_t cut_us;              /* taken off its end: the next hang of its thread began (below) */
    capture *captures;            /* in time order */
    size_t capture_count;
} stretch;

/* A hung thread and its stretches, in time order. */
typedef struct hung_thread {
    int64_t pid, tid;
    const char *process_name, *thread_name;
    size_t *stretches; /* indexes into the stretch array */
    size_t count;
} hung_thread;

typedef struct timeline {
    stretch *stretches;
    size_t stretch_count;
    hung_thread *threads;
    size_t thread_count;
} timeline;

static int by_capture_time(const void *pa, const void *pb)
{
    const capture *a = pa, *b = pb;
    if (a->at_us != b->at_us)
        return a->at_us < b->at_us ? -1 : 1;
    return (a->s->stretch_index > b->s->stretch_index) - (a->s->stretch_index < b->s->stretch_index);
}

static int by_start(const void *pa, const void *pb, void *ctx)
{
    const stretch *st = ctx;
    const stretch *a = &st[*(const size_t *)pa], *b = &st[*(const size_t *)pb];
    if (a->start_us != b->start_us)
        return a->start_us < b->start_us ? -1 : 1;
    return (*(const size_t *)pa > *(const size_t *)pb) - (*(const size_t *)pa < *(const size_t *)pb);
}

static void timeline_free(timeline *t)
{
    for (size_t i = 0; i < t->stretch_count; i++)
        free(t->stretches[i].captures);
    free(t->stretches);
    for (size_t i = 0; i < t->thread_count; i++)
        free(t->threads[i].stretches);
    free(t->threads);
    memset(t, 0, sizeof *t);
}

/* Export's stretch from the one of hang_stretches.h: its captures in time
 * order and its end.  0, or -1 when out of memory. */
static int stretch_of(const hw_stretch *hs, stretch *st)
{
    st->first = hs->first;
    /* a report that does not say when (or says before 1970) starts at 0 */
    st->start_us = hs->start_known && hs->start_us >= 0 ? hs->start_us : 0;
    if ((st->captures = calloc(hs->report_count, sizeof *st->captures)) == NULL)
        return -1;
    /* Busy time is measured on one clock for the whole stretch: a capture
     * is at start + its busy time. */
    for (size_t c = 0; c < hs->report_count; c++)
        st->captures[c] = (capture){hs->reports[c], hw_stretch_time_at(st->start_us, hs->reports[c]->block_us)};
    st->capture_count = hs->report_count;
    if (st->capture_count > 1)
        qsort(st->captures, st->capture_count, sizeof *st->captures, by_capture_time);
    /* it ends at its last capture, or later where a report says its final duration */
    int64_t end = st->captures[st->capture_count - 1].at_us;
    st->ended = hs->ended;
    st->final_us = hs->final_us;
    if (hs->ended && hw_stretch_time_at(st->start_us, hs->final_us) > end)
        end = hw_stretch_time_at(st->start_us, hs->final_us);
    st->end_us = end;
    return 0;
}

/* The hung threads of t's stretches, each with its stretches in time order,
 * an earlier one cut where the next begins.  0, or -1 when out of memory. */
static int hung_threads_of(timeline *t)
{
    int rc = 0;
    for (size_t k = 0; rc == 0 && k < t->stretch_count; k++) {
        const hw_hang_summary *f = t->stretches[k].first;
        hung_thread *ht = NULL;
        for (size_t i = 0; i < t->thread_count && ht == NULL; i++)
            if (t->threads[i].pid == f->pid && t->threads[i].tid == f->tid)
                ht = &t->threads[i];
        if (ht == NULL) {
            hung_thread *grown = realloc(t->threads, (t->thread_count + 1) * sizeof *grown);
            if (grown == NULL) {
                rc = -1;
                break;
            }
            t->threads = grown;
            ht = &t->threads[t->thread_count++];
            *ht = (hung_thread){f->pid, f->tid, f->process_name, f->thread_name, NULL, 0};
        }
        size_t *grown = realloc(ht->stretches, (ht->count + 1) * sizeof *grown);
        if (grown == NULL) {
            rc = -1;
            break;
        }
        ht->stretches = grown;
        ht->stretches[ht->count++] = k;
    }
    for (size_t i = 0; rc == 0 && i < t->thread_count; i++) {
        hung_thread *ht = &t->threads[i];
        if (ht->count > 1)
            qsort_r(ht->stretches, ht->count, sizeof(size_t), by_start, t->stretches);
        /* A start is known to a millisecond (detection's wall-clock time
         * less the busy time) and an end to the agent's last look (its
         * final_duration_precision_us, about 10 ms): two hangs of a thread
         * one right after the other may overlap by that much.  The earlier
         * one ends where the next begins, so that events nest. */
        for (size_t k = 0; k + 1 < ht->count; k++) {
            stretch *a = &t->stretches[ht->stretches[k]], *b = &t->stretches[ht->stretches[k + 1]];
            if (a->end_us > b->start_us) {
                int64_t end = b->start_us > a->start_us ? b->start_us : a->start_us;
                a->cut_us = (uint64_t)a->end_us - (uint64_t)end;
                a->end_us = end;
            }
        }
    }
    return rc;
}

/* The hangs among `s` (hangs only: stutter and snapshots are not), as
 * stretches of hung threads.  0, or -1 when out of memory. */
static int timeline_of(const hw_hang_summary *s, size_t count, timeline *t)
{
    memset(t, 0, sizeof *t);
    hw_stretches all;
    if (hw_stretches_of(s, count, &all) != 0)
        return -1;
    int rc = 0;
    if (all.count > 0 && (t->stretches = calloc(all.count, sizeof *t->stretches)) == NULL)
        rc = -1;
    for (size_t k = 0; rc == 0 && k < all.count; k++) {
        rc = stretch_of(&all.stretches[k], &t->stretches[k]);
        if (rc == 0)
            t->stretch_count++;
    }
    if (rc == 0)
        rc = hung_threads_of(t);
    hw_stretches_free(&all);
    if (rc != 0)
        timeline_free(t);
    return rc;
}

/* ---- JSON helpers ------------------------------------------------------------ */

static json_t *jint(int64_t v)
{
    return json_integer((json_int_t)v);
}

/* b - a for a <= b, exact */
static json_t *jspan(int64_t a, int64_t b)
{
    return hw_json_u64((uint64_t)b - (uint64_t)a);
}

/* "flush_cache (cache.c:88)" */
static json_t *frame_line(const hw_sframe *f, bool with_repeat)
{
    char line[32] = "";
    char repeat[48] = "";
    if (f->line > 0)
        snprintf(line, sizeof line, ":%" PRId64, f->line);
    if (with_repeat)
        snprintf(repeat, sizeof repeat, " x%" PRId64, f->repeat_count);
    char *text = NULL;
    if (asprintf(&text, "%s%s%s%s%s%s", f->name, f->file ? " (" : "", f->file ? f->file : "", f->file ? line : "",
                 f->file ? ")" : "", repeat) < 0)
        return NULL;
    json_t *v = hw_json_text(text);
    free(text);
    return v;
}

static json_t *stack_lines(const hw_sframe *frames, size_t count, bool with_repeat)
{
    json_t *a = json_array();
    for (size_t i = 0; i < count; i++)
        json_array_append_new(a, frame_line(&frames[i], with_repeat));
    return a;
}

static const char *culprit_name(const hw_hang_summary *s)
{
    return s->has_label ? s->label.name : "unknown";
}

static char *thread_label(const hung_thread *ht)
{
    char *label = NULL;
    if (asprintf(&label, "%s (pid %" PRId64 "), thread %s (tid %" PRId64 ")", ht->process_name, ht->pid,
                 ht->thread_name, ht->tid) < 0)
        return NULL;
    return label;
}

/* ---- speedscope ----------------------------------------------------------- */

/* A frame's identity among speedscope's shared frames: its function, file
 * and line (speedscope shows each line a frame of its own). */
static char *speedscope_identity(const hw_sframe *f)
{
    json_t *id = json_pack("[s, s?, I]", f->name, f->file, (json_int_t)f->line);
    char *key = id ? json_dumps(id, JSON_COMPACT) : NULL;
    json_decref(id);
    return key;
}

/* shared.frames: each frame of the table as {name, file, line}.  NULL when
 * out of memory. */
static json_t *shared_frames(const hw_frame_table *ft)
{
    json_t *frames = json_array();
    for (size_t i = 0; frames != NULL && i < ft->count; i++) {
        const hw_sframe *f = &ft->frames[i];
        json_t *o = json_object();
        json_object_set_new(o, "name", hw_json_text(f->name));
        if (f->file != NULL)
            json_object_set_new(o, "file", hw_json_text(f->file));
        if (f->line > 0)
            json_object_set_new(o, "line", jint(f->line));
        if (json_array_append_new(frames, o) != 0) {
            json_decref(frames);
            frames = NULL;
        }
    }
    return frames;
}

/* Where the hung thread's stack was not captured, its stack is this one frame. */
static char not_captured_name[] = "(the hung thread's stack was not captured)";
static const hw_sframe not_captured = {.name = not_captured_name, .language = "native"};

/* A stack as speedscope wants it: frame indexes, outermost (root) first. */
static json_t *sampled_stack(hw_frame_table *ft, const hw_sframe *frames, size_t count)
{
    json_t *stack = json_array();
    if (count == 0) {
        long i = hw_frame_table_index(ft, &not_captured);
        if (i < 0 || json_array_append_new(stack, json_integer(i)) != 0) {
            json_decref(stack);
            return NULL;
        }
        return stack;
    }
    size_t runtime = hw_innermost_runtime_frame(frames, NULL, count);
    for (size_t k = count; k-- > 0;) {
        if (!hw_frame_drawn(&frames[k], k, runtime))
            continue;
        long i = hw_frame_table_index(ft, &frames[k]);
        if (i < 0 || json_array_append_new(stack, json_integer(i)) != 0) {
            json_decref(stack);
            return NULL;
        }
    }
    return stack;
}

typedef struct sampled {
    json_t *samples, *weights;
    uint64_t total;
} sampled;

static int add_sample(sampled *p, json_t *stack, uint64_t weight)
{
    if (stack == NULL)
        return -1;
    if (weight == 0) { /* nothing to weigh: speedscope would draw nothing */
        json_decref(stack);
        return 0;
    }
    p->total = hw_add_sat(p->total, weight);
    if (json_array_append_new(p->samples, stack) != 0 || json_array_append_new(p->weights, hw_json_u64(weight)) != 0)
        return -1;
    return 0;
}

static json_t *sampled_profile(const char *name, sampled *p)
{
    json_t *o = json_object();
    json_object_set_new(o, "type", json_string("sampled"));
    json_object_set_new(o, "name", hw_json_text(name));
    json_object_set_new(o, "unit", json_string("microseconds"));
    json_object_set_new(o, "startValue", json_integer(0));
    json_object_set_new(o, "endValue", hw_json_u64(p->total));
    json_object_set_new(o, "samples", p->samples);
    json_object_set_new(o, "weights", p->weights);
    return o;
}

/* A sampled stack of a report's ring, outermost (root) first. */
static json_t *ring_stack(hw_frame_table *ft, const hw_sampled *r, const hw_sampled_stack *st)
{
    json_t *stack = json_array();
    size_t runtime = hw_innermost_runtime_frame(r->frames, st->frames, st->depth);
    for (size_t k = st->depth; stack && k-- > 0;) {
        const hw_sframe *f = &r->frames[st->frames[k]];
        if (!hw_frame_drawn(f, k, runtime))
            continue;
        long i = hw_frame_table_index(ft, f);
        if (i < 0 || json_array_append_new(stack, json_integer(i)) != 0) {
            json_decref(stack);
            return NULL;
        }
    }
    return stack;
}

/* The ring samples of stretch `st`: those of its last report that has
 * any.  0, or -1 when out of memory. */
static int add_ring_samples(sampled *p, hw_frame_table *ft, const stretch *st, const hw_hang_summary *base,
                            const hw_sampled *all)
{
    for (size_t c = st->capture_count; all && c-- > 0;) {
        const hw_hang_summary *s = st->captures[c].s;
        const hw_sampled *r = &all[s - base];
        if (r->stack_count == 0)
            continue;
        uint64_t interval = s->sample_interval_us > 0 ? s->sample_interval_us : 1;
        for (size_t k = 0; k < r->stack_count; k++) {
            uint64_t weight;
            if (__builtin_mul_overflow(r->stacks[k].count, interval, &weight))
                weight = UINT64_MAX;
            if (r->stacks[k].depth > 0 && add_sample(p, ring_stack(ft, r, &r->stacks[k]), weight) != 0)
                return -1;
        }
        return 0;
    }
    return 0;
}

static json_t *speedscope_of(const timeline *t, const hw_hang_summary *base, const hw_sampled *all,
                             size_t report_count)
{
    hw_frame_table ft;
    hw_frame_table_init(&ft, speedscope_identity);
    json_t *profiles = json_array();
    bool oom = profiles == NULL;
    size_t hangs = 0;
    for (size_t h = 0; !oom && h < t->thread_count; h++) {
        const hung_thread *ht = &t->threads[h];
        sampled captured = {json_array(), json_array(), 0}, points = {json_array(), json_array(), 0};
        sampled ring = {json_array(), json_array(), 0};
        for (size_t k = 0; !oom && k < ht->count; k++) {
            const stretch *st = &t->stretches[ht->stretches[k]];
            hangs++;
            if (add_ring_samples(&ring, &ft, st, base, all) != 0)
                oom = true;
            /* Each captured stack stands for the time since the one before
             * (or the stretch's start); the last one also for the rest. */
            int64_t from = st->start_us;
            for (size_t c = 0; !oom && c < st->capture_count; c++) {
                const capture *cp = &st->captures[c];
                int64_t to = c + 1 < st->capture_count ? cp->at_us : st->end_us;
                uint64_t weight = to > from ? (uint64_t)to - (uint64_t)from : 0;
                from = to;
                if (add_sample(&captured, sampled_stack(&ft, cp->s->frames, cp->s->frame_count), weight) != 0)
                    oom = true;
                if (!oom && cp->s->point_count > 0) {
                    uint64_t span;
                    if (__builtin_mul_overflow(cp->s->sample_count, cp->s->sample_interval_us, &span))
                        span = UINT64_MAX;
                    if (add_sample(&points, sampled_stack(&ft, cp->s->point, cp->s->point_count), span) != 0)
                        oom = true;
                }
            }
        }
        char *label = thread_label(ht);
        char *name = NULL;
        if (!oom && label != NULL && json_array_size(captured.samples) > 0 &&
            asprintf(&name, "%s: hung stacks", label) >= 0) {
            json_array_append_new(profiles, sampled_profile(name, &captured));
            captured.samples = captured.weights = NULL;
        }
        free(name);
        name = NULL;
        if (!oom && label != NULL && json_array_size(points.samples) > 0 &&
            asprintf(&name, "%s: Point Stacks (early sampling)", label) >= 0) {
            json_array_append_new(profiles, sampled_profile(name, &points));
            points.samples = points.weights = NULL;
        }
        free(name);
        name = NULL;
        if (!oom && label != NULL && json_array_size(ring.samples) > 0 &&
            asprintf(&name, "%s: early samples", label) >= 0) {
            json_array_append_new(profiles, sampled_profile(name, &ring));
            ring.samples = ring.weights = NULL;
        }
        oom |= label == NULL;
        free(name);
        free(label);
        json_decref(captured.samples);
        json_decref(captured.weights);
        json_decref(points.samples);
        json_decref(points.weights);
        json_decref(ring.samples);
        json_decref(ring.weights);
    }
    json_t *frames = oom ? NULL : shared_frames(&ft);
    json_t *root = NULL;
    if (frames != NULL) {
        char title[160];
        snprintf(title, sizeof title, "hangwatch: %zu hang%s from %zu report%s", hangs, hangs == 1 ? "" : "s",
                 report_count, report_count == 1 ? "" : "s");
        root = json_object();
        json_object_set_new(root, "$schema", json_string("https://www.speedscope.app/file-format-schema.json"));
        json_object_set_new(root, "name", json_string(title));
        json_object_set_new(root, "exporter", json_string("hangwatch " HW_VERSION_STRING));
        json_object_set_new(root, "activeProfileIndex", json_integer(0));
        json_object_set_new(root, "shared", json_pack("{s:o}", "frames", frames));
        json_object_set_new(root, "profiles", json_incref(profiles));
    }
    hw_frame_table_free(&ft);
    json_decref(profiles);
    return root;
}

/* ---- Chrome's Trace Event Format ------------------------------------------ */

#define NO_TS INT64_MIN /* metadata events have no time */

static json_t *event(const char *ph, const char *name, const char *cat, int64_t pid, int64_t tid, int64_t ts)
{
    json_t *e = json_object();
    json_object_set_new(e, "name", hw_json_text(name));
    if (cat != NULL)
        json_object_set_new(e, "cat", json_string(cat));
    json_object_set_new(e, "ph", json_string(ph));
    json_object_set_new(e, "pid", jint(pid));
    json_object_set_new(e, "tid", jint(tid));
    if (ts != NO_TS)
        json_object_set_new(e, "ts", jint(ts));
    return e;
}

static json_t *reports_of(const stretch *st)
{
    json_t *a = json_array();
    for (size_t c = 0; c < st->capture_count; c++)
        json_array_append_new(a, hw_json_text(st->captures[c].s->path));
    return a;
}

/* One stretch: the hang, its stacks, its Point Stacks. */
static void stretch_events(json_t *events, const stretch *st, const hung_thread *ht)
{
    const hw_hang_summary *f = st->first;
    char *name = NULL;
    if (asprintf(&name, "hang in %s", culprit_name(f)) < 0)
        return;
    json_t *hang = event("X", name, "hang", ht->pid, ht->tid, st->start_us);
    free(name);
    json_object_set_new(hang, "dur", jspan(st->start_us, st->end_us));
    json_t *args = json_object();
    json_object_set_new(args, "grouping_key", hw_json_text(f->key));
    json_object_set_new(args, "hang_type", hw_json_text(f->hang_type));
    json_object_set_new(args, "busy_when_detected_us", hw_json_u64(f->block_us));
    if (st->ended)
        json_object_set_new(args, "final_duration_us", hw_json_u64(st->final_us));
    else
        json_object_set_new(args, "end", json_string("not recorded: the event ends at the last capture"));
    if (f->hang_end != NULL)
        json_object_set_new(args, "hang_end", hw_json_text(f->hang_end));
    if (st->cut_us > 0)
        json_object_set_new(args, "end_cut_us", hw_json_u64(st->cut_us));
    if (!f->seen_known)
        json_object_set_new(args, "time", json_string("unknown: the report does not say when it was detected"));
    json_object_set_new(args, "reports", reports_of(st));
    json_object_set_new(hang, "args", args);
    json_array_append_new(events, hang);

    for (size_t c = 0; c < st->capture_count; c++) {
        const capture *cp = &st->captures[c];
        int64_t until = c + 1 < st->capture_count ? st->captures[c + 1].at_us : st->end_us;
        const hw_hang_summary *s = cp->s;
        if (until > cp->at_us && s->frame_count > 0) {
            /* the stack as nested slices, outermost first */
            size_t runtime = hw_innermost_runtime_frame(s->frames, NULL, s->frame_count);
            for (size_t k = s->frame_count; k-- > 0;) {
                const hw_sframe *fr = &s->frames[k];
                if (!hw_frame_drawn(fr, k, runtime))
                    continue;
                json_t *e = event("X", fr->name, "stack", ht->pid, ht->tid, cp->at_us);
                json_object_set_new(e, "dur", jspan(cp->at_us, until));
                json_t *a = json_object();
                if (fr->file != NULL)
                    json_object_set_new(a, "file", hw_json_text(fr->file));
                if (fr->line > 0)
                    json_object_set_new(a, "line", jint(fr->line));
                if (fr->object != NULL)
                    json_object_set_new(a, "object", hw_json_text(fr->object));
                json_object_set_new(e, "args", a);
                json_array_append_new(events, e);
            }
        } else {
            /* nothing after it to span: the capture is an instant */
            json_t *e = event("i", "stack captured", "stack", ht->pid, ht->tid, cp->at_us);
            json_object_set_new(e, "s", json_string("t"));
            json_object_set_new(e, "args", json_pack("{s:o, s:o}", "report", hw_json_text(s->path), "stack",
                                                     stack_lines(s->frames, s->frame_count, false)));
            json_array_append_new(events, e);
        }
        if (s->point_count > 0) {
            char title[96];
            snprintf(title, sizeof title, "Point Stack of %" PRIu64 " samples", s->sample_count);
            json_t *e = event("i", title, "early_sampling", ht->pid, ht->tid, cp->at_us);
            json_object_set_new(e, "s", json_string("t"));
            json_object_set_new(e, "args", json_pack("{s:o, s:o, s:o, s:o}", "sample_count", hw_json_u64(s->sample_count),
                                                     "sample_interval_us", hw_json_u64(s->sample_interval_us), "report",
                                                     hw_json_text(s->path), "stack (repeat counts)",
                                                     stack_lines(s->point, s->point_count, true)));
            json_array_append_new(events, e);
        }
    }
}

static json_t *chrome_trace_of(const timeline *t, size_t report_count)
{
    json_t *events = json_array();
    if (events == NULL)
        return NULL;
    /* names first: a process's once, each thread's once */
    for (size_t h = 0; h < t->thread_count; h++) {
        const hung_thread *ht = &t->threads[h];
        bool process_named = false;
        for (size_t k = 0; k < h; k++)
            process_named |= t->threads[k].pid == ht->pid;
        if (!process_named) {
            json_t *e = event("M", "process_name", NULL, ht->pid, ht->tid, NO_TS);
            json_object_set_new(e, "args", json_pack("{s:o}", "name", hw_json_text(ht->process_name)));
            json_array_append_new(events, e);
        }
        json_t *e = event("M", "thread_name", NULL, ht->pid, ht->tid, NO_TS);
        json_object_set_new(e, "args", json_pack("{s:o}", "name", hw_json_text(ht->thread_name)));
        json_array_append_new(events, e);
    }
    for (size_t h = 0; h < t->thread_count; h++)
        for (size_t k = 0; k < t->threads[h].count; k++)
            stretch_events(events, &t->stretches[t->threads[h].stretches[k]], &t->threads[h]);
    json_t *root = json_object();
    json_object_set_new(root, "traceEvents", events);
    json_object_set_new(root, "displayTimeUnit", json_string("ms"));
    json_object_set_new(root, "otherData", json_pack("{s:s, s:I}", "exporter", "hangwatch " HW_VERSION_STRING,
                                                     "reports", (json_int_t)report_count));
    return root;
}

json_t *hw_export_build(hw_export_format format, const hw_hang_summary *s, const hw_sampled *sampled, size_t count,
                        size_t report_count)
{
    timeline t;
    if (timeline_of(s, count, &t) != 0)
        return NULL;
    json_t *out = format == HW_EXPORT_SPEEDSCOPE ? speedscope_of(&t, s, sampled, report_count)
                                                 : chrome_trace_of(&t, report_count);
    timeline_free(&t);
    return out;
}

/* ---- the command ------------------------------------------------------------ */

typedef enum format { FORMAT_NONE, FORMAT_SPEEDSCOPE, FORMAT_CHROME } format;

/* What the command line says, and the summaries of the reports read with
 * each one's early samples. */
typedef struct export_run {
    format fmt;
    const char *output;
    hw_summaries all;
} export_run;

static int take_format(const char *value, void *ctx)
{
    export_run *run = ctx;
    if (run->fmt != FORMAT_NONE)
        return hw_usage_error("export", "--format is given twice", NULL);
    if (strcmp(value, "speedscope") == 0)
        run->fmt = FORMAT_SPEEDSCOPE;
    else if (strcmp(value, "chrome-trace") == 0)
        run->fmt = FORMAT_CHROME;
    else
        return hw_usage_error("export", "unknown --format (use speedscope or chrome-trace):", value);
    return 0;
}

static int take_output(const char *value, void *ctx)
{
    return hw_take_output_option("export", value, &((export_run *)ctx)->output);
}

static int check_options(void *ctx)
{
    const export_run *run = ctx;
    if (run->fmt == FORMAT_NONE)
        return hw_usage_error("export", "export needs --format speedscope or --format chrome-trace", NULL);
    if (run->output == NULL)
        return hw_usage_error("export", "export needs -o FILE (or -o - for standard output)", NULL);
    return 0;
}

/* The file is checked before anything is read (2 when it may not be written). */
static int check_output_file(void *ctx)
{
    const export_run *run = ctx;
    if (strcmp(run->output, "-") != 0 && hw_json_file_check(run->output, "the export") != 0)
        return 2;
    return 0;
}

static int take_report(const char *path, json_t *root, void *ctx)
{
    return hw_summaries_add(&((export_run *)ctx)->all, path, root);
}

static const hw_report_option export_options[] = {
    {"--format", NULL, true, take_format},
    {"--output", "-o", true, take_output},
};

static const hw_report_command export_command = {
    .name = "export",
    .help = export_help,
    .options = export_options,
    .option_count = sizeof export_options / sizeof export_options[0],
    .check_options = check_options,
    .needs_paths = "export needs reports or directories: hangwatch export --format FORMAT -o FILE "
                   "REPORT.json|DIR...",
    .before_reading = check_output_file,
    .take_report = take_report,
    .none_read = ": nothing exported",
};

int hw_export_main(int argc, char **argv)
{
    export_run run = {FORMAT_NONE, NULL, {.with_samples = true}};
    hw_report_walk_counts counts;
    int rc;
    if (!hw_report_command_read(&export_command, argc, argv, &run, &counts, &rc)) {
        hw_summaries_free(&run.all);
        return rc;
    }
    const hw_hang_summary *s = run.all.s;
    size_t n = run.all.count;
    bool to_stdout = strcmp(run.output, "-") == 0;
    size_t not_hangs = 0;
    for (size_t i = 0; i < n; i++)
        not_hangs += !s[i].is_hang;
    if (not_hangs == n) {
        fputs("hangwatch: the reports hold no hang (only stutter or snapshots): nothing exported\n", stderr);
        hw_summaries_free(&run.all);
        return 1;
    }
    if (not_hangs > 0)
        fprintf(stderr, "hangwatch: %zu stutter, snapshot or CPU-high report%s left out: not hangs\n", not_hangs,
                not_hangs == 1 ? "" : "s");
    json_t *out = hw_export_build(run.fmt == FORMAT_SPEEDSCOPE ? HW_EXPORT_SPEEDSCOPE : HW_EXPORT_CHROME_TRACE, s,
                                  run.all.sampled, n, counts.reports);
    if (out == NULL) {
        fputs("hangwatch: out of memory while exporting\n", stderr);
        rc = 1;
    } else if (to_stdout) {
        if (json_dumpf(out, stdout, JSON_COMPACT) != 0 || fputc('\n', stdout) == EOF || fflush(stdout) != 0) {
            fputs("hangwatch: cannot write the export to standard output\n", stderr);
            rc = 1;
        }
    } else {
        int w = hw_json_file_write(run.output, "the export", out, JSON_COMPACT);
        if (w != 0 && w != -ELOOP) {
            hw_say_about(run.output);
            fprintf(stderr, "cannot write the export: %s\n", strerror(-w));
        }
        rc = w != 0;
    }
    json_decref(out);
    hw_summaries_free(&run.all);
    return rc;
}
