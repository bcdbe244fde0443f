/*
 * html_data.c - the data of `hangwatch html`'s page (html.c): the reports
 * read one at a time into summaries and flame graphs (hw_html_add, the
 * graphs built by flame_graph.c), then everything the page shows as one
 * JSON value (hw_html_data), which html_page.c writes into the page for
 * its script to draw:
 *
 *   - the hang groups, grouped and figured exactly as `hangwatch stats`
 *     does (hang_groups.h);
 *   - for each group (the DETAILED_GROUPS largest): the hung thread's stack
 *     of its newest report, with file:line and the culprit, that report's
 *     other threads (read again from the report), and, where the reports
 *     carry early sampling's samples, a flame graph of all the samples of
 *     the group's reports, the Point Stack of the newest one marked;
 *   - a timeline per process: each hang (a stretch, hang_stretches.h) from
 *     its start to its end, its detection marked.
 *
 * Kept apart from the page so that what is taken from reports (foreign
 * input: names may hold anything) is built in one place, as JSON values
 * only, never as markup.  Everything is bounded: a group's flame graph,
 * all flame graphs together, the frames and threads shown, the groups
 * shown in detail and the hangs on the timeline; what is left out is
 * counted in the data, and so on the page.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flame_graph.h"
#include "foreign_text.h"
#include "hang_groups.h"
#include "hang_stretches.h"
#include "html.h"
#include "html_internal.h"
#include "core/hang_cause.h"
#include "core/hw_version.h"
#include "report_read.h"
#include "report_summary.h"

/* ---- limits ------------------------------------------------------------------ */

#define TABLE_GROUPS 5000           /* groups in the table */
#define DETAILED_GROUPS 100         /* groups with a section of their own */
#define GROUP_PROCESSES 20          /* process names of a group */
#define SHOWN_FRAMES 256            /* of the hung thread's stack */
#define POINT_FRAMES 256            /* of the Point Stack */
#define OTHER_THREADS 64            /* other threads of a group's report */
#define OTHER_FRAMES 8              /* innermost frames of each */
#define LANES 100                   /* processes on the timeline */
#define LANE_HANGS 2000             /* hangs of each */

struct hw_html {
    hw_summaries all;
    hw_flame *flames;
    size_t flame_count, flame_cap;
    json_t *flame_index; /* grouping key -> index into flames */
    size_t nodes_total;
    /* the samples of later reports of hangs (stretch_report_index > 0),
     * kept until their hang's first report is known (page_data): they are
     * drawn in that report's group */
    struct later_samples {
        size_t report; /* index into all */
        hw_sampled sam;
    } *later;
    size_t later_count, later_cap;
};

static hw_flame *flame_of_key(hw_html *h, const char *key)
{
    if (h->flame_index == NULL && (h->flame_index = json_object()) == NULL)
        return NULL;
    json_t *at = json_object_get(h->flame_index, key);
    if (at != NULL)
        return &h->flames[json_integer_value(at)];
    if (h->flame_count == h->flame_cap) {
        size_t cap = h->flame_cap ? h->flame_cap * 2 : 16;
        hw_flame *grown = realloc(h->flames, cap * sizeof *grown);
        if (grown == NULL)
            return NULL;
        h->flames = grown;
        h->flame_cap = cap;
    }
    if (json_object_set_new_nocheck(h->flame_index, key, json_integer((json_int_t)h->flame_count)) != 0)
        return NULL;
    hw_flame *f = &h->flames[h->flame_count++];
    hw_flame_init(f);
    return f;
}

static const hw_flame *flame_find_key(const hw_html *h, const char *key)
{
    json_t *at = h->flame_index ? json_object_get(h->flame_index, key) : NULL;
    return at ? &h->flames[json_integer_value(at)] : NULL;
}

/* ---- the reports, one at a time ---------------------------------------------- */

hw_html *hw_html_new(void)
{
    return calloc(1, sizeof(hw_html));
}

void hw_html_free(hw_html *h)
{
    if (h == NULL)
        return;
    hw_summaries_free(&h->all);
    for (size_t i = 0; i < h->flame_count; i++)
        hw_flame_free(&h->flames[i]);
    free(h->flames);
    json_decref(h->flame_index);
    for (size_t i = 0; i < h->later_count; i++)
        hw_sampled_free(&h->later[i].sam);
    free(h->later);
    free(h);
}

/* Keep the samples of report `report`, a later report of its hang. */
static int keep_later(hw_html *h, size_t report, hw_sampled *sam)
{
    if (h->later_count == h->later_cap) {
        size_t cap = h->later_cap ? h->later_cap * 2 : 16;
        struct later_samples *grown = realloc(h->later, cap * sizeof *grown);
        if (grown == NULL)
            return -1;
        h->later = grown;
        h->later_cap = cap;
    }
    h->later[h->later_count++] = (struct later_samples){.report = report, .sam = *sam};
    *sam = (hw_sampled){0}; /* kept */
    return 0;
}

/* Draw the kept samples of later reports in the flame of their hang's
 * group (head[i]: the first report of report i's hang). */
static int add_later(hw_html *h, const size_t *head)
{
    int rc = 0;
    for (size_t i = 0; i < h->later_count; i++) {
        if (rc == 0) {
            hw_flame *f = flame_of_key(h, h->all.s[head[h->later[i].report]].key);
            rc = f != NULL ? hw_flame_add(f, &h->later[i].sam, &h->nodes_total) : -1;
        }
        hw_sampled_free(&h->later[i].sam);
    }
    h->later_count = 0;
    return rc;
}

int hw_html_add(hw_html *h, json_t *root, const char *path)
{
    if (hw_summaries_add(&h->all, path, root) != 0)
        return -1;
    const hw_hang_summary *s = &h->all.s[h->all.count - 1];
    if (!s->is_hang)
        return 0;
    hw_sampled sam;
    if (hw_sampled_of(root, &sam) != 0)
        return -1;
    int rc = 0;
    if (sam.stack_count > 0 && s->stretch_index > 0) {
        rc = keep_later(h, h->all.count - 1, &sam);
    } else if (sam.stack_count > 0) {
        hw_flame *f = flame_of_key(h, s->key);
        rc = f != NULL ? hw_flame_add(f, &sam, &h->nodes_total) : -1;
    }
    hw_sampled_free(&sam);
    return rc;
}

size_t hw_html_hang_count(const hw_html *h)
{
    size_t n = 0;
    for (size_t i = 0; i < h->all.count; i++)
        n += h->all.s[i].is_hang;
    return n;
}

/* ---- the data as JSON ---------------------------------------------------------- */

/* An add that fails only when out of memory, and then leaves the field
 * out (as `stats --json` does); jansson takes NULL objects and values. */
static void set(json_t *o, const char *key, json_t *v)
{
    json_object_set_new(o, key, v);
}

static json_t *jint(int64_t v)
{
    return json_integer((json_int_t)v);
}

static json_t *frame_json(const hw_sframe *f)
{
    json_t *o = json_object();
    set(o, "name", hw_json_text(f->name));
    if (f->file != NULL)
        set(o, "file", hw_json_text(f->file));
    if (f->line > 0)
        set(o, "line", jint(f->line));
    if (f->line_is_start)
        set(o, "line_is_start", json_true());
    if (f->object != NULL)
        set(o, "object", hw_json_text(f->object));
    if (strcmp(f->language, "native") != 0)
        set(o, "language", json_string(f->language));
    return o;
}

static json_t *frames_json(const hw_sframe *frames, size_t count, size_t max, bool repeat)
{
    json_t *a = json_array();
    for (size_t i = 0; i < count && i < max; i++) {
        json_t *f = frame_json(&frames[i]);
        if (repeat)
            set(f, "repeat", jint(frames[i].repeat_count));
        json_array_append_new(a, f);
    }
    return a;
}

/* A flame graph for the page: its frames (each saying whether it is the
 * user's code, for the page's "only your code"), its nodes, and which frame
 * is the report's culprit (`culprit`, may be NULL), to be marked. */
static json_t *flame_json(const hw_flame *f, const hw_sframe *culprit)
{
    json_t *frames = json_array();
    for (size_t i = 0; i < f->table.count; i++) {
        const hw_sframe *fr = &f->table.frames[i];
        json_t *o = json_object();
        set(o, "name", hw_json_text(fr->name));
        if (fr->file != NULL)
            set(o, "file", hw_json_text(fr->file));
        if (fr->object != NULL)
            set(o, "object", hw_json_text(fr->object));
        if (strcmp(fr->language, "native") != 0)
            set(o, "language", json_string(fr->language));
        if (fr->in_app == 1)
            set(o, "in_app", json_true());
        json_array_append_new(frames, o);
    }
    /* [parent, frame, samples, first line, last line, on the Point Stack];
     * a parent comes before its children */
    json_t *nodes = json_array();
    for (size_t i = 0; i < f->node_count; i++) {
        const hw_flame_node *n = &f->nodes[i];
        json_int_t parent = n->parent == HW_FLAME_NO_NODE ? -1 : (json_int_t)n->parent;
        json_int_t frame = n->frame == HW_FLAME_NO_NODE ? -1 : (json_int_t)n->frame;
        json_array_append_new(nodes, json_pack("[I, I, o, I, I, i]", parent, frame, hw_json_u64(n->count),
                                               (json_int_t)n->line_min, (json_int_t)n->line_max, n->point ? 1 : 0));
    }
    json_t *o = json_object();
    set(o, "frames", frames);
    set(o, "nodes", nodes);
    set(o, "samples", hw_json_u64(f->samples));
    set(o, "reports", hw_json_u64(f->reports));
    set(o, "cut", hw_json_u64(f->cut));
    set(o, "left_out", hw_json_u64(f->left_out));
    long culprit_frame = -1;
    char *id = culprit ? f->table.identity(culprit) : NULL;
    if (id != NULL)
        culprit_frame = hw_frame_table_find(&f->table, id);
    free(id);
    set(o, "culprit", jint(culprit_frame));
    return o;
}

/* The report's other threads, compactly: name, id, status, innermost frames. */
static json_t *other_threads_json(json_t *root, size_t *more)
{
    json_t *threads = json_object_get(json_object_get(root, "crash"), "threads");
    json_t *apm = json_object_get(root, "hangwatch");
    json_int_t hung = hw_int_at(json_object_get(apm, "hung_thread"), "report_array_index", -1);
    json_t *items = json_object_get(json_object_get(json_object_get(apm, "collection"), "scene_threads"), "items");
    json_t *out = json_array();
    *more = 0;
    for (size_t i = 0; i < json_array_size(threads); i++) {
        if ((json_int_t)i == hung)
            continue;
        if (json_array_size(out) >= OTHER_THREADS) {
            (*more)++;
            continue;
        }
        json_t *t = json_array_get(threads, i);
        json_t *o = json_object();
        set(o, "name", hw_json_text(hw_str_at(t, "name", "?")));
        set(o, "tid", jint(hw_int_at(t, "thread_identifier", -1)));
        const char *python_name = hw_str_at(t, "python_name", NULL);
        if (python_name != NULL)
            set(o, "python_name", hw_json_text(python_name));
        for (size_t k = 0; k < json_array_size(items); k++) {
            json_t *it = json_array_get(items, k);
            if (hw_int_at(it, "report_array_index", -1) == (json_int_t)i) {
                set(o, "status", hw_json_text(hw_str_at(it, "status", "?")));
                const char *error = hw_str_at(it, "error", NULL);
                if (error != NULL)
                    set(o, "error", hw_json_text(error));
                break;
            }
        }
        hw_sframe *frames = NULL;
        size_t count = 0, frames_more = 0;
        if (hw_sframes_of(json_object_get(t, "backtrace"), OTHER_FRAMES, &frames, &count, &frames_more) == 0) {
            set(o, "frames", frames_json(frames, count, OTHER_FRAMES, false));
            set(o, "more", hw_json_u64(frames_more));
            hw_sframes_free(frames, count);
        }
        json_array_append_new(out, o);
    }
    return out;
}

/* The thread holding what the hung thread waits for (hangwatch.gil_holder
 * or lock_holder), its stack and culprit, to be shown beside the hung
 * thread's: the hang is where it is.  NULL when there is none. */
static json_t *holder_json(json_t *root)
{
    json_t *apm = json_object_get(root, "hangwatch");
    json_t *lock = json_object_get(json_object_get(json_object_get(apm, "time"), "blocked_in"), "lock");
    const char *const kinds[][2] = {{"gil_holder", "the GIL"},
                                    {"lock_holder", hw_report_lock_words(hw_str_at(lock, "kind", NULL))}};
    for (size_t k = 0; k < 2; k++) {
        json_t *holder = json_object_get(apm, kinds[k][0]);
        json_int_t at = hw_int_at(holder, "report_array_index", -1);
        json_t *t = at >= 0 ? json_array_get(json_object_get(json_object_get(root, "crash"), "threads"), (size_t)at)
                            : NULL;
        hw_sframe *frames = NULL;
        size_t count = 0, more = 0;
        if (!json_is_object(t) ||
            hw_sframes_of(json_object_get(t, "backtrace"), SHOWN_FRAMES, &frames, &count, &more) != 0)
            continue;
        json_t *o = json_object();
        set(o, "holds", json_string(kinds[k][1]));
        set(o, "name", hw_json_text(hw_str_at(t, "name", "?")));
        set(o, "tid", jint(hw_int_at(t, "thread_identifier", -1)));
        const char *python_name = hw_str_at(t, "python_name", NULL);
        if (python_name != NULL)
            set(o, "python_name", hw_json_text(python_name));
        set(o, "stack", frames_json(frames, count, SHOWN_FRAMES, false));
        set(o, "more", hw_json_u64(more));
        json_int_t culprit = hw_int_at(holder, "culprit_frame", -1);
        set(o, "culprit", jint(culprit >= 0 && (size_t)culprit < count ? culprit : -1));
        hw_sframes_free(frames, count);
        return o;
    }
    return NULL;
}

static json_t *detail_json(const hw_html *h, const hw_hang_summary *rep, hw_html_reload_fn reload, void *ctx)
{
    json_t *d = json_object();
    set(d, "report", hw_json_text(rep->path));
    set(d, "process", hw_json_text(rep->process_name));
    set(d, "pid", jint(rep->pid));
    set(d, "tid", jint(rep->tid));
    set(d, "thread", hw_json_text(rep->thread_name));
    set(d, "hang_type", hw_json_text(rep->hang_type));
    if (rep->seen_known)
        set(d, "seen_ms", jint(rep->seen_ms));
    set(d, "busy_us", hw_json_u64(rep->block_us));
    if (rep->final_known)
        set(d, "final_us", hw_json_u64(rep->final_us));
    if (rep->hang_end != NULL)
        set(d, "hang_end", hw_json_text(rep->hang_end));
    if (rep->cause != NULL)
        set(d, "cause", json_string(rep->cause));
    if (rep->time_known) {
        json_t *t = json_object();
        set(t, "window_us", hw_json_u64(rep->window_us));
        set(t, "on_cpu_us", hw_json_u64(rep->on_cpu_us));
        set(t, "runqueue_us", hw_json_u64(rep->runqueue_us));
        set(t, "blocked_us", hw_json_u64(rep->blocked_us));
        set(t, "throttled_us", hw_json_u64(rep->throttled_us));
        set(d, "time", t);
    }
    set(d, "stack", frames_json(rep->frames, rep->frame_count, SHOWN_FRAMES, false));
    set(d, "stack_more", hw_json_u64((rep->frame_count > SHOWN_FRAMES ? rep->frame_count - SHOWN_FRAMES : 0) +
                                     rep->frames_more));
    if (rep->frames_omitted > 0 && rep->frames_omitted_at < SHOWN_FRAMES) {
        set(d, "stack_omitted", hw_json_u64(rep->frames_omitted));
        set(d, "stack_omitted_at", hw_json_u64(rep->frames_omitted_at));
    }
    set(d, "culprit", jint(rep->culprit == HW_NO_FRAME ? -1 : (int64_t)rep->culprit));
    if (rep->runtime_note != NULL)
        set(d, "runtime_note", hw_json_text(rep->runtime_note));
    if (rep->point_count > 0) {
        json_t *p = json_object();
        set(p, "frames", frames_json(rep->point, rep->point_count, POINT_FRAMES, true));
        set(p, "more", hw_json_u64(rep->point_count > POINT_FRAMES ? rep->point_count - POINT_FRAMES : 0));
        set(p, "samples", hw_json_u64(rep->sample_count));
        set(p, "interval_us", hw_json_u64(rep->sample_interval_us));
        set(d, "point", p);
    }
    const hw_flame *f = flame_find_key(h, rep->key);
    if (f != NULL && f->node_count > 1)
        set(d, "flame", flame_json(f, rep->culprit == HW_NO_FRAME ? NULL : &rep->frames[rep->culprit]));

    /* The other threads are read again from the report: only for the
     * groups shown, so that thousands of reports need not be held. */
    json_t *root = reload != NULL ? reload(rep->path, ctx) : NULL;
    if (root == NULL) {
        set(d, "threads_note", json_string("the report could not be read again for its other threads"));
    } else if (strcmp(hw_str_at(json_object_get(root, "hangwatch"), "grouping_key", "?"), rep->key) != 0 &&
               strcmp(rep->key, "?") != 0) {
        set(d, "threads_note", json_string("the report changed since it was read: its other threads are not shown"));
    } else {
        size_t more = 0;
        set(d, "threads", other_threads_json(root, &more));
        set(d, "threads_more", hw_json_u64(more));
        json_t *holder = holder_json(root);
        if (holder != NULL)
            set(d, "holder", holder);
    }
    json_decref(root);
    return d;
}

static json_t *group_json(const hw_stats_group *g)
{
    json_t *o = json_object();
    set(o, "key", hw_json_text(g->key));
    set(o, "count", hw_json_u64(g->hangs));
    set(o, "total_us", hw_json_u64(g->total_us));
    set(o, "median_us", hw_json_u64(g->median_us));
    set(o, "worst_us", hw_json_u64(g->worst_us));
    set(o, "open", hw_json_u64(g->open_hangs));
    set(o, "follow_up_reports", hw_json_u64(g->follow_ups));
    set(o, "reports", hw_json_u64(g->reports));
    if (g->seen_known) {
        set(o, "first_ms", jint(g->first_seen_ms));
        set(o, "last_ms", jint(g->last_seen_ms));
    }
    json_t *p = json_array();
    for (size_t k = 0; k < g->process_count && k < GROUP_PROCESSES; k++)
        json_array_append_new(p, hw_json_text(g->processes[k]));
    set(o, "processes", p);
    set(o, "processes_more", hw_json_u64(g->process_count > GROUP_PROCESSES ? g->process_count - GROUP_PROCESSES : 0));
    set(o, "culprit", g->has_culprit ? frame_json(&g->culprit) : json_null());
    return o;
}

/* Is report a a better one to show for its group than b: one that names a
 * culprit, then the newest (as hang_groups.c takes the group's culprit)? */
static bool shows_better(const hw_hang_summary *a, const hw_hang_summary *b)
{
    bool ca = a->culprit != HW_NO_FRAME, cb = b->culprit != HW_NO_FRAME;
    if (ca != cb)
        return ca;
    return a->seen_known && (!b->seen_known || a->seen_ms > b->seen_ms);
}

/* ---- the timeline ---------------------------------------------------------------- */

typedef struct bar {
    size_t group;
    int64_t tid;
    const char *thread;
    int64_t start_us, detect_us, end_us; /* end_us -1: never recorded */
} bar;

typedef struct lane {
    int64_t pid;
    const char *process;
    bar *bars;
    size_t count, cap, more;
    int64_t first_us;
} lane;

static int by_lane_start(const void *pa, const void *pb)
{
    const lane *a = pa, *b = pb;
    if (a->first_us != b->first_us)
        return a->first_us < b->first_us ? -1 : 1;
    return (a->pid > b->pid) - (a->pid < b->pid);
}

static int by_bar_start(const void *pa, const void *pb)
{
    const bar *a = pa, *b = pb;
    if (a->start_us != b->start_us)
        return a->start_us < b->start_us ? -1 : 1;
    return (a->tid > b->tid) - (a->tid < b->tid);
}

/* The lane of the process `s` ran in, made when new (`lane_index`: a
 * process's id -> its index in `lanes`, which has room for every one);
 * NULL when out of memory. */
static lane *lane_of(lane *lanes, size_t *lane_count, json_t *lane_index, const hw_hang_summary *s, int64_t start)
{
    /* a process: its pid and name (pids are reused, on other machines too) */
    char *id = NULL;
    if (asprintf(&id, "%" PRId64 "/%s", s->pid, s->process_name) < 0)
        return NULL;
    json_t *at = json_object_get(lane_index, id);
    lane *l = at != NULL ? &lanes[json_integer_value(at)] : NULL;
    if (l == NULL) {
        if (json_object_set_new_nocheck(lane_index, id, json_integer((json_int_t)*lane_count)) != 0) {
            free(id);
            return NULL;
        }
        l = &lanes[(*lane_count)++];
        *l = (lane){s->pid, s->process_name, NULL, 0, 0, 0, start};
    }
    free(id);
    return l;
}

/* Each hang on the lane of its process: start (detection less busy time),
 * detection, end (start plus the final duration, when recorded).  Hangs
 * that do not say when, or whose group is not in the table, are counted
 * in *unplaced.  0, or -1 when out of memory. */
static int lanes_of(const hw_html *h, const hw_stretches *all, const size_t *group_of, lane *lanes, size_t *lane_count,
                    size_t *unplaced)
{
    json_t *lane_index = json_object();
    if (lane_index == NULL)
        return -1;
    int rc = 0;
    for (size_t k = 0; rc == 0 && k < all->count; k++) {
        const hw_stretch *hs = &all->stretches[k];
        const hw_hang_summary *s = hs->first;
        size_t group = group_of[s - h->all.s];
        if (!hs->start_known || group == SIZE_MAX) {
            (*unplaced)++;
            continue;
        }
        int64_t start = hs->start_us;
        lane *l = lane_of(lanes, lane_count, lane_index, s, start);
        if (l == NULL) {
            rc = -1;
            break;
        }
        if (start < l->first_us)
            l->first_us = start;
        if (l->count >= LANE_HANGS) {
            l->more++;
            continue;
        }
        if (l->count == l->cap) {
            size_t cap = l->cap ? l->cap * 2 : 8;
            bar *grown = realloc(l->bars, cap * sizeof *grown);
            if (grown == NULL) {
                rc = -1;
                break;
            }
            l->bars = grown;
            l->cap = cap;
        }
        /* it ends at its start plus the longest final duration its reports say */
        int64_t detect = hw_stretch_time_at(start, s->block_us);
        int64_t end = -1;
        if (hs->ended && hw_stretch_time_at(start, hs->final_us) > end)
            end = hw_stretch_time_at(start, hs->final_us);
        l->bars[l->count++] = (bar){group, s->tid, s->thread_name, start, detect, end >= detect ? end : -1};
    }
    json_decref(lane_index);
    return rc;
}

/* A thread is in one hang at a time: an end known only to the agent's
 * last look (final_duration_precision_us, later when its watch thread was
 * in a capture) that runs past the thread's next hang's start is cut
 * there, as `export` nests its timelines.  The bars are by start. */
static void cut_at_next_start(lane *l)
{
    for (size_t b = 0; b < l->count; b++) {
        bar *x = &l->bars[b];
        for (size_t c = b + 1; c < l->count; c++) {
            if (l->bars[c].tid != x->tid)
                continue;
            if (x->end_us > l->bars[c].start_us)
                x->end_us = l->bars[c].start_us > x->detect_us ? l->bars[c].start_us : x->detect_us;
            break;
        }
    }
}

/* The lanes, the first to begin first, at most LANES of them (the others
 * counted in *lanes_more), as JSON. */
static json_t *lanes_json(lane *lanes, size_t lane_count, size_t *lanes_more)
{
    if (lane_count > 1)
        qsort(lanes, lane_count, sizeof *lanes, by_lane_start);
    json_t *out = json_array();
    for (size_t i = 0; i < lane_count; i++) {
        lane *l = &lanes[i];
        if (i >= LANES) {
            *lanes_more += 1;
            continue;
        }
        if (l->count > 1)
            qsort(l->bars, l->count, sizeof *l->bars, by_bar_start);
        cut_at_next_start(l);
        json_t *bars = json_array(), *threads = json_array();
        for (size_t b = 0; b < l->count; b++) {
            const bar *x = &l->bars[b];
            bool named = false;
            for (size_t k = 0; k < b && !named; k++)
                named = l->bars[k].tid == x->tid;
            if (!named)
                json_array_append_new(threads, json_pack("[I, o]", (json_int_t)x->tid, hw_json_text(x->thread)));
            json_array_append_new(bars, json_pack("[I, I, I, I, I]", (json_int_t)x->group, (json_int_t)x->tid,
                                                  (json_int_t)x->start_us, (json_int_t)x->detect_us,
                                                  (json_int_t)x->end_us));
        }
        json_t *o = json_object();
        set(o, "pid", jint(l->pid));
        set(o, "process", hw_json_text(l->process));
        set(o, "hangs", bars);
        set(o, "threads", threads);
        set(o, "more", hw_json_u64(l->more));
        json_array_append_new(out, o);
    }
    return out;
}

/*
 * The hangs (stretches, as `stats` counts them: hang_stretches.h) of each
 * process, on a time axis.  `group_of[i]` is summary i's group in the
 * table, or SIZE_MAX.  NULL when out of memory.
 */
static json_t *timeline_json(const hw_html *h, const size_t *group_of, size_t *unplaced, size_t *lanes_more)
{
    *unplaced = *lanes_more = 0;
    hw_stretches all;
    if (hw_stretches_of(h->all.s, h->all.count, &all) != 0)
        return NULL;
    lane *lanes = all.count ? calloc(all.count, sizeof *lanes) : NULL;
    size_t lane_count = 0;
    json_t *out = NULL;
    if ((all.count == 0 || lanes != NULL) && lanes_of(h, &all, group_of, lanes, &lane_count, unplaced) == 0)
        out = lanes_json(lanes, lane_count, lanes_more);
    for (size_t i = 0; i < lane_count; i++)
        free(lanes[i].bars);
    free(lanes);
    hw_stretches_free(&all);
    return out;
}

/* ---- the page's data, all of it ---------------------------------------------- */

static json_t *page_data(hw_html *h, const hw_stats *st, const hw_report_walk_counts *counts, long long generated_ms,
                         hw_html_reload_fn reload, void *ctx)
{
    size_t shown = st->group_count < TABLE_GROUPS ? st->group_count : TABLE_GROUPS;
    json_t *index = json_object();
    size_t *group_of = h->all.count ? calloc(h->all.count, sizeof *group_of) : NULL;
    size_t *rep = shown ? calloc(shown, sizeof *rep) : NULL;
    /* a follow-up report is in the group of its hang's first report */
    size_t *head = h->all.count ? calloc(h->all.count, sizeof *head) : NULL;
    json_t *data = NULL;
    if (index == NULL || (h->all.count && (group_of == NULL || head == NULL)) || (shown && rep == NULL) ||
        hw_link_hangs(h->all.s, h->all.count, head) != 0 || add_later(h, head) != 0)
        goto done;
    for (size_t g = 0; g < shown; g++) {
        json_object_set_new_nocheck(index, st->groups[g].key, json_integer((json_int_t)g));
        rep[g] = SIZE_MAX;
    }
    for (size_t i = 0; i < h->all.count; i++) {
        json_t *at = h->all.s[i].is_hang ? json_object_get(index, h->all.s[head[i]].key) : NULL;
        group_of[i] = at ? (size_t)json_integer_value(at) : SIZE_MAX;
        size_t g = group_of[i];
        if (g != SIZE_MAX && head[i] == i && (rep[g] == SIZE_MAX || shows_better(&h->all.s[i], &h->all.s[rep[g]])))
            rep[g] = i;
    }
    json_t *groups = json_array();
    for (size_t g = 0; g < shown; g++) {
        json_t *o = group_json(&st->groups[g]);
        if (g < DETAILED_GROUPS && rep[g] != SIZE_MAX) {
            const hw_hang_summary *r = &h->all.s[rep[g]];
            json_t *at = h->flame_index ? json_object_get(h->flame_index, r->key) : NULL;
            if (at != NULL)
                hw_flame_mark(&h->flames[json_integer_value(at)], r->point, r->point_count);
            set(o, "detail", detail_json(h, r, reload, ctx));
        }
        json_array_append_new(groups, o);
    }
    size_t unplaced = 0, lanes_more = 0;
    json_t *timeline = timeline_json(h, group_of, &unplaced, &lanes_more);
    if (timeline == NULL) {
        json_decref(groups);
        goto done;
    }
    data = json_object();
    set(data, "generator", json_string("hangwatch " HW_VERSION_STRING));
    set(data, "generated_ms", json_integer((json_int_t)generated_ms));
    set(data, "reports", hw_json_u64(counts->reports));
    set(data, "unreadable", hw_json_u64(counts->failed));
    set(data, "hangs", hw_json_u64(st->hangs));
    set(data, "not_hangs", hw_json_u64(st->not_hangs));
    set(data, "group_count", hw_json_u64(st->group_count));
    set(data, "detailed", hw_json_u64(shown < DETAILED_GROUPS ? shown : DETAILED_GROUPS));
    set(data, "groups", groups);
    set(data, "timeline", timeline);
    set(data, "timeline_unplaced", hw_json_u64(unplaced));
    set(data, "timeline_lanes_more", hw_json_u64(lanes_more));
done:
    json_decref(index);
    free(group_of);
    free(head);
    free(rep);
    return data;
}

json_t *hw_html_data(hw_html *h, const hw_report_walk_counts *counts, long long generated_ms, hw_html_reload_fn reload,
                     void *ctx, hw_stats *st)
{
    if (hw_stats_build(st, h->all.s, h->all.count) != 0)
        return NULL;
    return page_data(h, st, counts, generated_ms, reload, ctx);
}
