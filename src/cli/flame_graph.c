/*
 * flame_graph.c - flame graphs of stacks (flame_graph.h): the frame table,
 * its frames found by the identity its user chose, and the tree of
 * samples, whose frames are one table and whose nodes each link to their
 * children.
 */
#include "flame_graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/saturating.h"

/* ---- the frame table ---------------------------------------------------------- */

void hw_frame_table_init(hw_frame_table *t, hw_frame_identity_fn identity)
{
    memset(t, 0, sizeof *t);
    t->identity = identity;
}

long hw_frame_table_find(const hw_frame_table *t, const char *id)
{
    json_t *at = t->index ? json_object_get(t->index, id) : NULL;
    return at ? (long)json_integer_value(at) : -1;
}

long hw_frame_table_add(hw_frame_table *t, const hw_sframe *f, const char *id)
{
    if (t->index == NULL && (t->index = json_object()) == NULL)
        return -1;
    hw_sframe *grown = realloc(t->frames, (t->count + 1) * sizeof *grown);
    if (grown == NULL)
        return -1;
    t->frames = grown;
    if (hw_sframe_copy(f, &t->frames[t->count]) != 0)
        return -1;
    if (json_object_set_new_nocheck(t->index, id, json_integer((json_int_t)t->count)) != 0) {
        hw_sframes_free(&t->frames[t->count], 1);
        return -1;
    }
    return (long)t->count++;
}

long hw_frame_table_index(hw_frame_table *t, const hw_sframe *f)
{
    char *id = t->identity(f);
    if (id == NULL)
        return -1;
    long i = hw_frame_table_find(t, id);
    if (i < 0)
        i = hw_frame_table_add(t, f, id);
    free(id);
    return i;
}

void hw_frame_table_free(hw_frame_table *t)
{
    hw_sframes_free(t->frames, t->count);
    json_decref(t->index);
    hw_frame_table_init(t, t->identity);
}

/* ---- the tree of samples ------------------------------------------------------- */

/* A frame's identity in a flame graph: its language, function and file
 * (lines differ from sample to sample in one function). */
static char *frame_identity(const hw_sframe *fr)
{
    char *id = NULL;
    const char *file = fr->file ? fr->file : "";
    if (asprintf(&id, "%s|%zu:%s|%s", fr->language, strlen(fr->name), fr->name, file) < 0)
        return NULL;
    return id;
}

void hw_flame_init(hw_flame *f)
{
    memset(f, 0, sizeof *f);
    hw_frame_table_init(&f->table, frame_identity);
}

static uint32_t child_of(const hw_flame *f, uint32_t node, uint32_t frame)
{
    for (uint32_t c = f->nodes[node].first_child; c != HW_FLAME_NO_NODE; c = f->nodes[c].next_sibling)
        if (f->nodes[c].frame == frame)
            return c;
    return HW_FLAME_NO_NODE;
}

static int node_add(hw_flame *f, uint32_t parent, uint32_t frame, uint32_t *out)
{
    if (f->node_count == f->node_cap) {
        size_t cap = f->node_cap ? f->node_cap * 2 : 16;
        hw_flame_node *grown = realloc(f->nodes, cap * sizeof *grown);
        if (grown == NULL)
            return -1;
        f->nodes = grown;
        f->node_cap = cap;
    }
    uint32_t i = (uint32_t)f->node_count++;
    f->nodes[i] = (hw_flame_node){parent, frame, HW_FLAME_NO_NODE, HW_FLAME_NO_NODE, 0, 0, 0, false};
    if (parent != HW_FLAME_NO_NODE) {
        f->nodes[i].next_sibling = f->nodes[parent].first_child;
        f->nodes[parent].first_child = i;
    }
    *out = i;
    return 0;
}

static void note_line(hw_flame_node *n, int64_t line)
{
    if (line <= 0)
        return;
    if (n->line_min == 0 || line < n->line_min)
        n->line_min = line;
    if (line > n->line_max)
        n->line_max = line;
}

int hw_flame_add(hw_flame *f, const hw_sampled *sam, size_t *nodes_total)
{
    uint32_t root;
    if (f->node_count == 0) {
        if (node_add(f, HW_FLAME_NO_NODE, HW_FLAME_NO_NODE, &root) != 0)
            return -1;
        (*nodes_total)++;
    }
    f->reports++;
    f->left_out = hw_add_sat(f->left_out, sam->left_out);
    for (size_t s = 0; s < sam->stack_count; s++) {
        const hw_sampled_stack *st = &sam->stacks[s];
        uint32_t node = 0;
        f->nodes[0].count = hw_add_sat(f->nodes[0].count, st->count);
        f->samples = hw_add_sat(f->samples, st->count);
        size_t levels = 0;
        size_t runtime = hw_innermost_runtime_frame(sam->frames, st->frames, st->depth);
        for (size_t k = st->depth; k-- > 0;) {
            const hw_sframe *fr = &sam->frames[st->frames[k]];
            if (!hw_frame_drawn(fr, k, runtime))
                continue;
            char *id = f->table.identity(fr);
            if (id == NULL)
                return -1;
            long frame = hw_frame_table_find(&f->table, id);
            uint32_t child = frame >= 0 ? child_of(f, node, (uint32_t)frame) : HW_FLAME_NO_NODE;
            if (child == HW_FLAME_NO_NODE) {
                if (levels >= HW_FLAME_MAX_DEPTH || f->node_count >= HW_FLAME_MAX_NODES ||
                    *nodes_total >= HW_FLAME_MAX_NODES_TOTAL) {
                    free(id);
                    f->cut = hw_add_sat(f->cut, st->count);
                    break;
                }
                if (frame < 0)
                    frame = hw_frame_table_add(&f->table, fr, id);
                if (frame < 0 || node_add(f, node, (uint32_t)frame, &child) != 0) {
                    free(id);
                    return -1;
                }
                (*nodes_total)++;
            }
            free(id);
            f->nodes[child].count = hw_add_sat(f->nodes[child].count, st->count);
            note_line(&f->nodes[child], fr->line);
            node = child;
            levels++;
        }
    }
    return 0;
}

void hw_flame_mark(hw_flame *f, const hw_sframe *point, size_t count)
{
    if (f->node_count == 0)
        return;
    uint32_t node = 0;
    f->nodes[0].point = true;
    size_t runtime = hw_innermost_runtime_frame(point, NULL, count);
    for (size_t k = count; k-- > 0;) {
        if (!hw_frame_drawn(&point[k], k, runtime))
            continue;
        char *id = f->table.identity(&point[k]);
        long frame = id ? hw_frame_table_find(&f->table, id) : -1;
        free(id);
        uint32_t child = frame >= 0 ? child_of(f, node, (uint32_t)frame) : HW_FLAME_NO_NODE;
        if (child == HW_FLAME_NO_NODE)
            return;
        f->nodes[child].point = true;
        node = child;
    }
}

void hw_flame_free(hw_flame *f)
{
    hw_frame_table_free(&f->table);
    free(f->nodes);
    hw_flame_init(f);
}
