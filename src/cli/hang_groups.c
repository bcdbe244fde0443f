/*
 * hang_groups.c - grouping hangs by their grouping key and the figures of
 * each group (hang_groups.h).  Durations are whole microseconds from the
 * reports, added with saturation: a file anyone may have edited cannot make
 * a total wrap around.
 */
#include "hang_groups.h"

#include <stdlib.h>
#include <string.h>

#include "hang_stretches.h"
#include "core/saturating.h"

void hw_stats_init(hw_stats *st)
{
    memset(st, 0, sizeof *st);
}

/* `from` copied over the frame `to` (replaced only when the copy was made). */
static int copy_frame(const hw_sframe *from, hw_sframe *to)
{
    hw_sframe f;
    if (hw_sframe_copy(from, &f) != 0)
        return -1;
    free(to->name);
    free(to->file);
    free(to->object);
    *to = f;
    return 0;
}

/* A follow-up's culprit among where the group's hangs moved (each function
 * once).  0, or -1 when out of memory. */
static int note_moved(hw_stats_group *g, const hw_sframe *f)
{
    for (size_t i = 0; i < g->moved_count; i++)
        if (strcmp(g->moved[i].name, f->name) == 0)
            return 0;
    if (g->moved_count == HW_STATS_MOVED_MAX) {
        g->moved_more++;
        return 0;
    }
    if (hw_sframe_copy(f, &g->moved[g->moved_count]) != 0)
        return -1;
    g->moved_count++;
    return 0;
}

/* The group of `key`, made when new; NULL when out of memory. */
static hw_stats_group *group_of(hw_stats *st, const char *key)
{
    if (st->index == NULL && (st->index = json_object()) == NULL)
        return NULL;
    json_t *at = json_object_get(st->index, key);
    if (at != NULL)
        return &st->groups[json_integer_value(at)];
    if (st->group_count == st->group_cap) {
        size_t bigger = st->group_cap ? st->group_cap * 2 : 16;
        hw_stats_group *grown = realloc(st->groups, bigger * sizeof *grown);
        if (grown == NULL)
            return NULL;
        st->groups = grown;
        st->group_cap = bigger;
    }
    hw_stats_group *g = &st->groups[st->group_count];
    memset(g, 0, sizeof *g);
    g->key = strdup(key);
    if (g->key == NULL || json_object_set_new(st->index, key, json_integer((json_int_t)st->group_count)) != 0) {
        free(g->key);
        return NULL;
    }
    st->group_count++;
    return g;
}

static int add_process(hw_stats_group *g, const char *name)
{
    for (size_t i = 0; i < g->process_count; i++)
        if (strcmp(g->processes[i], name) == 0)
            return 0;
    char **grown = realloc(g->processes, (g->process_count + 1) * sizeof *grown);
    if (grown == NULL)
        return -1;
    g->processes = grown;
    if ((g->processes[g->process_count] = strdup(name)) == NULL)
        return -1;
    g->process_count++;
    return 0;
}

static int add_duration(hw_stats_group *g, uint64_t us)
{
    if (g->duration_count == g->duration_cap) {
        size_t bigger = g->duration_cap ? g->duration_cap * 2 : 8;
        uint64_t *grown = realloc(g->durations, bigger * sizeof *grown);
        if (grown == NULL)
            return -1;
        g->durations = grown;
        g->duration_cap = bigger;
    }
    g->durations[g->duration_count++] = us;
    return 0;
}

int hw_stats_add(hw_stats *st, const hw_hang_summary *s, const hw_hang_summary *first)
{
    st->reports++;
    if (!s->is_hang) {
        st->not_hangs++;
        return 0;
    }
    bool opens_stretch = first == s || first == NULL || !first->is_hang;
    hw_stats_group *g = group_of(st, opens_stretch ? s->key : first->key);
    if (g == NULL)
        return -1;
    g->reports++;
    if (opens_stretch) {
        uint64_t us = hw_hang_duration_us(s);
        if (add_duration(g, us) != 0)
            return -1;
        g->hangs++;
        st->hangs++;
        g->total_us = hw_add_sat(g->total_us, us);
        if (us > g->worst_us)
            g->worst_us = us;
        if (!s->final_known)
            g->open_hangs++;
        for (size_t c = 0; s->cause != NULL && c < HW_CAUSE_LABELS; c++)
            if (s->cause == hw_cause_label_at(c))
                g->causes[c]++;
        g->partial_causes += s->cause_partial;
    } else {
        g->follow_ups++;
        if (s->has_label && note_moved(g, &s->label) != 0)
            return -1;
    }
    if (s->seen_known) {
        if (!g->seen_known || s->seen_ms < g->first_seen_ms)
            g->first_seen_ms = s->seen_ms;
        if (!g->seen_known || s->seen_ms > g->last_seen_ms)
            g->last_seen_ms = s->seen_ms;
        g->seen_known = true;
    }
    if (add_process(g, s->process_name) != 0)
        return -1;
    /* The culprit of the newest hang that names one (the latest build's
     * file and line; a follow-up's moved elsewhere). */
    if (opens_stretch && s->has_label &&
        (!g->has_culprit || (s->seen_known && (!g->culprit_seen_known || s->seen_ms > g->culprit_seen_ms)))) {
        if (copy_frame(&s->label, &g->culprit) != 0)
            return -1;
        g->has_culprit = true;
        g->culprit_seen_known = s->seen_known;
        g->culprit_seen_ms = s->seen_ms;
    }
    return 0;
}

static int cmp_u64(const void *pa, const void *pb)
{
    uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;
    return (a > b) - (a < b);
}

static int cmp_str(const void *pa, const void *pb)
{
    return strcmp(*(char *const *)pa, *(char *const *)pb);
}

static int by_total(const void *pa, const void *pb)
{
    const hw_stats_group *a = pa, *b = pb;
    if (a->total_us != b->total_us)
        return a->total_us > b->total_us ? -1 : 1;
    if (a->hangs != b->hangs)
        return a->hangs > b->hangs ? -1 : 1;
    return strcmp(a->key, b->key);
}

void hw_stats_finish(hw_stats *st)
{
    for (size_t i = 0; i < st->group_count; i++) {
        hw_stats_group *g = &st->groups[i];
        size_t n = g->duration_count;
        if (n > 1)
            qsort(g->durations, n, sizeof *g->durations, cmp_u64);
        if (n == 0)
            g->median_us = 0;
        else if (n % 2 == 1)
            g->median_us = g->durations[n / 2];
        else /* the mean of the middle two, without overflowing */
            g->median_us = g->durations[n / 2 - 1] + (g->durations[n / 2] - g->durations[n / 2 - 1]) / 2;
        if (g->process_count > 1)
            qsort(g->processes, g->process_count, sizeof *g->processes, cmp_str);
    }
    if (st->group_count > 1)
        qsort(st->groups, st->group_count, sizeof *st->groups, by_total);
    /* the index would point to the old places */
    json_decref(st->index);
    st->index = NULL;
}

int hw_stats_build(hw_stats *st, const hw_hang_summary *s, size_t count)
{
    /* Stretches are linked among hangs only; what is no hang opens its own. */
    size_t *head = count ? calloc(count, sizeof *head) : NULL;
    int rc = (count && head == NULL) || hw_link_hangs(s, count, head) != 0 ? -1 : 0;
    for (size_t i = 0; rc == 0 && i < count; i++)
        rc = hw_stats_add(st, &s[i], &s[head[i]]);
    free(head);
    if (rc == 0)
        hw_stats_finish(st);
    return rc;
}

void hw_stats_free(hw_stats *st)
{
    for (size_t i = 0; i < st->group_count; i++) {
        hw_stats_group *g = &st->groups[i];
        free(g->key);
        for (size_t k = 0; k < g->process_count; k++)
            free(g->processes[k]);
        free(g->processes);
        free(g->durations);
        free(g->culprit.name);
        free(g->culprit.file);
        free(g->culprit.object);
        for (size_t m = 0; m < g->moved_count; m++) {
            free(g->moved[m].name);
            free(g->moved[m].file);
            free(g->moved[m].object);
        }
    }
    free(st->groups);
    json_decref(st->index);
    memset(st, 0, sizeof *st);
}
