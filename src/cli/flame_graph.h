/*
 * flame_graph.h - a flame graph of sampled stacks: the samples of many
 * reports (early sampling's rings, hw_sampled) merged into one tree, each
 * path from the root a stack, outermost first, each node counting the
 * samples through it.  `hangwatch html` draws one for each group of hangs.
 * Frames are merged by language, function and file (lines differ from
 * sample to sample in one function: each node keeps the range it saw).
 * Bounded: a graph's nodes, its depth and the nodes of all graphs
 * together; what does not fit is counted, not drawn.
 */
#ifndef HANGWATCH_FLAME_GRAPH_H
#define HANGWATCH_FLAME_GRAPH_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "report_summary.h"

#define HW_FLAME_MAX_NODES 4000         /* nodes of one flame graph */
#define HW_FLAME_MAX_NODES_TOTAL 400000 /* of all of them */
#define HW_FLAME_MAX_DEPTH 256          /* levels below the root */

typedef struct hw_flame_frame {
    char *name, *file, *object;
    const char *language;
} hw_flame_frame;

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
    hw_flame_frame *frames; /* distinct frames (language, name, file) */
    size_t frame_count;
    json_t *frame_index; /* a frame's identity -> its index */
    hw_flame_node *nodes;
    size_t node_count, node_cap;
    uint64_t samples;  /* every sample added (the root's count) */
    uint64_t cut;      /* samples whose stacks were cut short by the limits */
    uint64_t left_out; /* samples the reports themselves left out */
    size_t reports;    /* reports that gave samples */
} hw_flame;

/* Add one report's samples to the graph `f` (start from {0}); *nodes_total
 * counts the nodes of every graph, for HW_FLAME_MAX_NODES_TOTAL.  0, or -1
 * when out of memory. */
int hw_flame_add(hw_flame *f, const hw_sampled *sam, size_t *nodes_total);

/* Mark the path of `point` (innermost first) from the root, as far as the
 * flame graph has it. */
void hw_flame_mark(hw_flame *f, const hw_sframe *point, size_t count);

void hw_flame_free(hw_flame *f);

#endif
