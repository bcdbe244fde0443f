/*
 * flame_graph.h - flame graphs of stacks, for `hangwatch html` and
 * `hangwatch export`, built in one place:
 *
 *   - the frame table: distinct frames, each found by its identity, which
 *     says what makes two frames one and is the caller's choice (html
 *     merges a function's lines, speedscope keeps each line a frame of its
 *     own); export's speedscope file keeps its shared frames in one;
 *   - the tree of samples (hw_flame): the samples of many reports (early
 *     sampling's rings, hw_sampled) merged into one tree, each path from
 *     the root a stack, outermost first, each node counting the samples
 *     through it; `hangwatch html` draws one for each group of hangs.
 *     Its frames are merged by language, function and file (lines differ
 *     from sample to sample in one function: each node keeps the range it
 *     saw).  Bounded: a graph's nodes, its depth and the nodes of all
 *     graphs together; what does not fit is counted, not drawn.
 */
#ifndef HANGWATCH_FLAME_GRAPH_H
#define HANGWATCH_FLAME_GRAPH_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "report_summary.h"

/* ---- the frame table ---- */

/* A frame's identity: a malloc'd text, the same for frames that are one
 * (NULL when out of memory). */
typedef char *(*hw_frame_identity_fn)(const hw_sframe *f);

typedef struct hw_frame_table {
    hw_frame_identity_fn identity;
    hw_sframe *frames; /* copies, in the order they were added */
    size_t count;
    json_t *index; /* identity -> index into frames */
} hw_frame_table;

/* An empty table whose frames are one when `identity` says so. */
void hw_frame_table_init(hw_frame_table *t, hw_frame_identity_fn identity);

/* The index of the frame of identity `id` (t->identity's), or -1 when
 * there is none. */
long hw_frame_table_find(const hw_frame_table *t, const char *id);

/* Add a copy of `f`, whose identity is `id` (not in the table yet): its
 * index, or -1 when out of memory. */
long hw_frame_table_add(hw_frame_table *t, const hw_sframe *f, const char *id);

/* The index of `f`: found by its identity, else added.  -1 when out of
 * memory. */
long hw_frame_table_index(hw_frame_table *t, const hw_sframe *f);

void hw_frame_table_free(hw_frame_table *t);

/* ---- the tree of samples ---- */

#define HW_FLAME_MAX_NODES 4000         /* nodes of one flame graph */
#define HW_FLAME_MAX_NODES_TOTAL 400000 /* of all of them */
#define HW_FLAME_MAX_DEPTH 256          /* levels below the root */

typedef struct hw_flame_node {
    uint32_t parent, frame; /* the root: UINT32_MAX, UINT32_MAX */
    uint32_t first_child, next_sibling;
    uint64_t count;             /* samples through it */
    int64_t line_min, line_max; /* of its frames in those samples; 0 when unknown */
    bool point;                 /* on the Point Stack's path */
} hw_flame_node;

#define HW_FLAME_NO_NODE UINT32_MAX

/* The samples of one group, as a tree: node 0 is the root (every sample),
 * each path from it a stack, outermost first. */
typedef struct hw_flame {
    hw_frame_table table; /* distinct frames (language, function, file) */
    hw_flame_node *nodes;
    size_t node_count, node_cap;
    uint64_t samples;  /* every sample added (the root's count) */
    uint64_t cut;      /* samples whose stacks were cut short by the limits */
    uint64_t left_out; /* samples the reports themselves left out */
    size_t reports;    /* reports that gave samples */
} hw_flame;

/* An empty graph. */
void hw_flame_init(hw_flame *f);

/* Add one report's samples to the graph `f`; *nodes_total counts the
 * nodes of every graph, for HW_FLAME_MAX_NODES_TOTAL.  0, or -1 when out
 * of memory. */
int hw_flame_add(hw_flame *f, const hw_sampled *sam, size_t *nodes_total);

/* Mark the path of `point` (innermost first) from the root, as far as the
 * flame graph has it. */
void hw_flame_mark(hw_flame *f, const hw_sframe *point, size_t count);

void hw_flame_free(hw_flame *f);

#endif
