/* ring_stacks.c - see ring_stacks.h. */
#include "ring_stacks.h"

#include <stdlib.h>
#include <string.h>

typedef struct group {
    size_t sample; /* its oldest sample, the ring's index */
    size_t count;
    bool point_stack;
} group;

static int cmp_u64(uint64_t a, uint64_t b)
{
    return (a > b) - (a < b);
}

/* Samples in the order of their stacks (depth, then addresses), then by age. */
static int by_stack(const void *pa, const void *pb, void *ctx)
{
    const hw_sample_ring *ring = ctx;
    size_t ia = *(const size_t *)pa, ib = *(const size_t *)pb;
    const hw_sample *a = hw_ring_at(ring, ia), *b = hw_ring_at(ring, ib);
    if (a->depth != b->depth)
        return a->depth < b->depth ? -1 : 1;
    for (size_t k = 0; k < a->depth; k++) {
        int c = cmp_u64(a->pcs[k], b->pcs[k]);
        if (c != 0)
            return c;
    }
    return (ia > ib) - (ia < ib);
}

static bool same_stack(const hw_sample *a, const hw_sample *b)
{
    return a->depth == b->depth && memcmp(a->pcs, b->pcs, a->depth * sizeof a->pcs[0]) == 0;
}

static int by_count(const void *pa, const void *pb)
{
    const group *a = pa, *b = pb;
    if (a->count != b->count)
        return a->count > b->count ? -1 : 1;
    return (a->sample > b->sample) - (a->sample < b->sample);
}

static int by_addr(const void *pa, const void *pb)
{
    const hw_ring_addr *a = pa, *b = pb;
    int c = cmp_u64(a->pc, b->pc);
    return c != 0 ? c : (int)a->innermost - (int)b->innermost;
}

long hw_ring_stacks_find(const hw_ring_stacks *s, uint64_t pc, bool innermost)
{
    hw_ring_addr key = {pc, innermost};
    const hw_ring_addr *at = s->addr_count ? bsearch(&key, s->addrs, s->addr_count, sizeof key, by_addr) : NULL;
    return at ? (long)(at - s->addrs) : -1;
}

void hw_ring_stacks_free(hw_ring_stacks *s)
{
    free(s->addrs);
    free(s->stacks);
    free(s->frames);
    memset(s, 0, sizeof *s);
}

int hw_ring_stacks_of(const hw_sample_ring *ring, long point_index, size_t max_stacks, hw_ring_stacks *out)
{
    memset(out, 0, sizeof *out);
    size_t n = ring->count;
    if (n == 0)
        return 0;
    size_t *order = calloc(n, sizeof *order);
    group *groups = calloc(n, sizeof *groups);
    int rc = order && groups ? 0 : -1;
    size_t kept = 0, group_count = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (hw_ring_at(ring, i)->depth > 0)
            order[kept++] = i;
        else
            out->left_out++;
    }
    if (rc == 0 && kept > 1)
        qsort_r(order, kept, sizeof *order, by_stack, (void *)ring);
    for (size_t i = 0; rc == 0 && i < kept; i++) {
        const hw_sample *s = hw_ring_at(ring, order[i]);
        if (group_count == 0 || !same_stack(hw_ring_at(ring, groups[group_count - 1].sample), s))
            groups[group_count++] = (group){order[i], 0, false};
        group *g = &groups[group_count - 1];
        g->count++;
        if (point_index >= 0 && order[i] == (size_t)point_index)
            g->point_stack = true;
    }
    if (rc == 0 && group_count > 1)
        qsort(groups, group_count, sizeof *groups, by_count);
    size_t stacks = group_count < max_stacks ? group_count : max_stacks;
    for (size_t g = stacks; g < group_count; g++)
        out->left_out += groups[g].count;

    /* the addresses of the stacks kept, each once */
    size_t total = 0;
    for (size_t g = 0; g < stacks; g++)
        total += hw_ring_at(ring, groups[g].sample)->depth;
    hw_ring_addr *addrs = NULL;
    if (rc == 0 && stacks > 0) {
        out->stacks = calloc(stacks, sizeof *out->stacks);
        out->frames = calloc(total, sizeof *out->frames);
        addrs = calloc(total, sizeof *addrs);
        if (!out->stacks || !out->frames || !addrs)
            rc = -1;
    }
    size_t a = 0;
    for (size_t g = 0; rc == 0 && g < stacks; g++) {
        const hw_sample *s = hw_ring_at(ring, groups[g].sample);
        for (size_t k = 0; k < s->depth; k++)
            addrs[a++] = (hw_ring_addr){s->pcs[k], k == 0};
    }
    if (rc == 0 && a > 1)
        qsort(addrs, a, sizeof *addrs, by_addr);
    size_t distinct = 0;
    for (size_t i = 0; rc == 0 && i < a; i++)
        if (distinct == 0 || by_addr(&addrs[distinct - 1], &addrs[i]) != 0)
            addrs[distinct++] = addrs[i];
    out->addrs = addrs;
    out->addr_count = distinct;
    for (size_t g = 0; rc == 0 && g < stacks; g++) {
        const hw_sample *s = hw_ring_at(ring, groups[g].sample);
        hw_ring_stack *st = &out->stacks[g];
        *st = (hw_ring_stack){groups[g].count, s->depth, out->frame_count, groups[g].point_stack};
        for (size_t k = 0; k < s->depth; k++)
            out->frames[out->frame_count++] = (uint32_t)hw_ring_stacks_find(out, s->pcs[k], k == 0);
    }
    out->stack_count = rc == 0 ? stacks : 0;
    free(order);
    free(groups);
    if (rc != 0)
        hw_ring_stacks_free(out);
    return rc;
}
