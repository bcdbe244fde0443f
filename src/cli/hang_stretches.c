/*
 * hang_stretches.c - the reports of one busy stretch linked, and when it
 * began and ended (hang_stretches.h).
 */
#include "hang_stretches.h"

#include <stdlib.h>
#include <string.h>

bool hw_stretch_start_us(const hw_hang_summary *s, int64_t *start_us)
{
    int64_t detected_us;
    if (!s->seen_known || __builtin_mul_overflow(s->seen_ms, (int64_t)1000, &detected_us))
        return false;
    if (s->block_us > (uint64_t)INT64_MAX)
        return false;
    return !__builtin_sub_overflow(detected_us, (int64_t)s->block_us, start_us);
}

typedef struct linked {
    size_t index;
    int64_t start_us;
    const hw_hang_summary *s;
} linked;

static int cmp_i64(int64_t a, int64_t b)
{
    return a < b ? -1 : a > b;
}

static int by_thread_then_start(const void *pa, const void *pb)
{
    const linked *a = pa, *b = pb;
    int c = cmp_i64(a->s->pid, b->s->pid);
    if (c == 0)
        c = cmp_i64(a->s->tid, b->s->tid);
    if (c == 0)
        c = cmp_i64(a->start_us, b->start_us);
    return c != 0 ? c : (a->index > b->index) - (a->index < b->index);
}

static int by_stretch_index(const void *pa, const void *pb)
{
    const linked *a = pa, *b = pb;
    if (a->s->stretch_index != b->s->stretch_index)
        return a->s->stretch_index < b->s->stretch_index ? -1 : 1;
    int c = cmp_i64(a->start_us, b->start_us);
    return c != 0 ? c : (a->index > b->index) - (a->index < b->index);
}

int hw_link_stretches(const hw_hang_summary *s, size_t count, size_t *stretch)
{
    linked *l = count ? calloc(count, sizeof *l) : NULL;
    if (count && l == NULL)
        return -1;
    size_t n = 0;
    for (size_t i = 0; i < count; i++) {
        stretch[i] = i;
        int64_t start;
        /* A report that does not say when it was seen, or of what thread,
         * is a stretch of its own. */
        if (s[i].pid > 0 && s[i].tid > 0 && hw_stretch_start_us(&s[i], &start))
            l[n++] = (linked){i, start, &s[i]};
    }
    if (n > 1)
        qsort(l, n, sizeof *l, by_thread_then_start);
    /* Clusters: the same thread, each start within the slack of the one
     * before.  In stretch-index order, a 0 opens a stretch and the later
     * reports join the last one opened (or open one, when their first
     * report is missing). */
    for (size_t first = 0; first < n;) {
        size_t end = first + 1;
        while (end < n && l[end].s->pid == l[first].s->pid && l[end].s->tid == l[first].s->tid &&
               /* sorted: the difference is >= 0 and exact in unsigned arithmetic */
               (uint64_t)l[end].start_us - (uint64_t)l[end - 1].start_us <= HW_STRETCH_SLACK_US)
            end++;
        qsort(&l[first], end - first, sizeof *l, by_stretch_index);
        size_t head = l[first].index;
        for (size_t k = first; k < end; k++) {
            if (l[k].s->stretch_index == 0 || k == first)
                head = l[k].index;
            stretch[l[k].index] = head;
        }
        first = end;
    }
    free(l);
    return 0;
}

int64_t hw_stretch_time_at(int64_t start_us, uint64_t after_us)
{
    if (after_us > (uint64_t)INT64_MAX || start_us > INT64_MAX - (int64_t)after_us)
        return INT64_MAX;
    return start_us + (int64_t)after_us;
}

/* ---- the hangs among many summaries ------------------------------------------ */

int hw_link_hangs(const hw_hang_summary *s, size_t count, size_t *head)
{
    size_t *hang_index = count ? calloc(count, sizeof *hang_index) : NULL;
    hw_hang_summary *hangs = count ? calloc(count, sizeof *hangs) : NULL;
    size_t *link = count ? calloc(count, sizeof *link) : NULL;
    int rc = (count && (hang_index == NULL || hangs == NULL || link == NULL)) ? -1 : 0;
    size_t n = 0;
    for (size_t i = 0; rc == 0 && i < count; i++) {
        head[i] = i;
        if (s[i].is_hang) {
            hangs[n] = s[i]; /* a shallow copy: hw_link_stretches only reads */
            hang_index[n++] = i;
        }
    }
    if (rc == 0 && hw_link_stretches(hangs, n, link) != 0)
        rc = -1;
    for (size_t k = 0; rc == 0 && k < n; k++)
        head[hang_index[k]] = hang_index[link[k]];
    free(hang_index);
    free(hangs);
    free(link);
    return rc;
}

/* Add report `r` to its stretch `st`: 0, or -1 when out of memory. */
static int add_report(hw_stretch *st, const hw_hang_summary *r)
{
    const hw_hang_summary **grown = realloc(st->reports, (st->report_count + 1) * sizeof *grown);
    if (grown == NULL)
        return -1;
    st->reports = grown;
    st->reports[st->report_count++] = r;
    if (r->final_known) {
        st->ended = true;
        if (r->final_us > st->final_us)
            st->final_us = r->final_us;
    }
    return 0;
}

int hw_stretches_of(const hw_hang_summary *s, size_t count, hw_stretches *out)
{
    memset(out, 0, sizeof *out);
    size_t *head = count ? calloc(count, sizeof *head) : NULL;
    size_t *slot = count ? calloc(count, sizeof *slot) : NULL; /* a first report's stretch */
    int rc = (count && (head == NULL || slot == NULL)) ? -1 : 0;
    if (rc == 0 && hw_link_hangs(s, count, head) != 0)
        rc = -1;
    if (rc == 0 && count > 0 && (out->stretches = calloc(count, sizeof *out->stretches)) == NULL)
        rc = -1;
    for (size_t i = 0; rc == 0 && i < count; i++) {
        if (!s[i].is_hang || head[i] != i)
            continue;
        hw_stretch *st = &out->stretches[out->count];
        slot[i] = out->count++;
        st->first = &s[i];
        st->start_known = hw_stretch_start_us(&s[i], &st->start_us);
        if (!st->start_known)
            st->start_us = 0;
    }
    for (size_t i = 0; rc == 0 && i < count; i++)
        if (s[i].is_hang && add_report(&out->stretches[slot[head[i]]], &s[i]) != 0)
            rc = -1;
    free(head);
    free(slot);
    if (rc != 0)
        hw_stretches_free(out);
    return rc;
}

void hw_stretches_free(hw_stretches *all)
{
    for (size_t i = 0; i < all->count; i++)
        free(all->stretches[i].reports);
    free(all->stretches);
    memset(all, 0, sizeof *all);
}
