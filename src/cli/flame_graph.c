/*
 * flame_graph.c - the flame graph of sampled stacks (flame_graph.h): the
 * distinct frames, each found by its identity, and the tree of nodes, each
 * node's children linked from it.
 */
#include "flame_graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/saturating.h"

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

/* The frame's index in f, or -1 when it has none. */
static long frame_find(const hw_flame *f, const char *id)
{
    json_t *at = f->frame_index ? json_object_get(f->frame_index, id) : NULL;
    return at ? (long)json_integer_value(at) : -1;
}

static long frame_add(hw_flame *f, const hw_sframe *fr, const char *id)
{
    if (f->frame_index == NULL && (f->frame_index = json_object()) == NULL)
        return -1;
    hw_flame_frame *grown = realloc(f->frames, (f->frame_count + 1) * sizeof *grown);
    if (grown == NULL)
        return -1;
    f->frames = grown;
    hw_flame_frame *n = &f->frames[f->frame_count];
    n->name = strdup(fr->name);
    n->file = fr->file ? strdup(fr->file) : NULL;
    n->object = fr->object ? strdup(fr->object) : NULL;
    n->language = fr->language;
    if (n->name == NULL || (fr->file && n->file == NULL) || (fr->object && n->object == NULL) ||
        json_object_set_new_nocheck(f->frame_index, id, json_integer((json_int_t)f->frame_count)) != 0) {
        free(n->name);
        free(n->file);
        free(n->object);
        return -1;
    }
    return (long)f->frame_count++;
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
        for (size_t k = st->depth; k-- > 0;) {
            const hw_sframe *fr = &sam->frames[st->frames[k]];
            char *id = frame_identity(fr);
            if (id == NULL)
                return -1;
            long frame = frame_find(f, id);
            uint32_t child = frame >= 0 ? child_of(f, node, (uint32_t)frame) : HW_FLAME_NO_NODE;
            if (child == HW_FLAME_NO_NODE) {
                if (levels >= HW_FLAME_MAX_DEPTH || f->node_count >= HW_FLAME_MAX_NODES ||
                    *nodes_total >= HW_FLAME_MAX_NODES_TOTAL) {
                    free(id);
                    f->cut = hw_add_sat(f->cut, st->count);
                    break;
                }
                if (frame < 0)
                    frame = frame_add(f, fr, id);
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
    for (size_t k = count; k-- > 0;) {
        char *id = frame_identity(&point[k]);
        long frame = id ? frame_find(f, id) : -1;
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
    for (size_t i = 0; i < f->frame_count; i++) {
        free(f->frames[i].name);
        free(f->frames[i].file);
        free(f->frames[i].object);
    }
    free(f->frames);
    free(f->nodes);
    json_decref(f->frame_index);
    memset(f, 0, sizeof *f);
}
