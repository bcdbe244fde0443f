/*
 * js_merge.c - named JavaScript frames put into the native stack
 * (js_frames.h: hw_js_merge), in the report worker: each one renames the
 * native frame at its instruction address (the JIT's or the
 * interpreter's), matched in order, innermost first; those the native walk
 * did not reach go last, in order.  Kept apart from the naming
 * (js_names.c), which reads the process; this reads nothing of it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "js_frames.h"

static bool rename_frame(const hw_frame *js, hw_frame *native)
{
    char *name = js->symbol_name ? strdup(js->symbol_name) : NULL;
    char *file = js->source_file ? strdup(js->source_file) : NULL;
    if ((js->symbol_name && name == NULL) || (js->source_file && file == NULL)) {
        free(name);
        free(file);
        return false;
    }
    free(native->symbol_name);
    free(native->source_file);
    free(native->object_path);
    native->symbol_name = name;
    native->source_file = file;
    native->source_line = js->source_line;
    native->line_is_function_start = js->line_is_function_start;
    native->object_path = NULL;
    native->object_addr = native->object_offset = 0;
    native->symbol_addr = 0;
    native->language = HW_LANG_JAVASCRIPT;
    native->runtime_key = js->runtime_key;
    return true;
}

int hw_js_merge(const hw_runtime_names *names, hw_backtrace *bt)
{
    if (names == NULL || bt == NULL || names->count == 0)
        return 0;
    size_t next = 0; /* native frames are matched in order, innermost first */
    unsigned unplaced = 0;
    for (unsigned i = 0; i < names->count; i++) {
        const hw_frame *js = &names->frames[i];
        if (js->symbol_name == NULL)
            continue; /* nothing to say about it */
        size_t k = next;
        while (k < bt->count && bt->frames[k].instruction_addr != js->instruction_addr)
            k++;
        if (k == bt->count) {
            unplaced = names->count - i;
            break;
        }
        if (!rename_frame(js, &bt->frames[k]))
            return -ENOMEM;
        next = k + 1;
    }
    if (unplaced > 0) {
        /* The native walk stopped before these: they go last, in order. */
        hw_frame *grown = realloc(bt->frames, (bt->count + unplaced) * sizeof *grown);
        if (grown == NULL)
            return -ENOMEM;
        bt->frames = grown;
        for (unsigned i = names->count - unplaced; i < names->count; i++) {
            if (names->frames[i].symbol_name == NULL)
                continue;
            hw_frame *f = &bt->frames[bt->count];
            memset(f, 0, sizeof *f);
            f->instruction_addr = names->frames[i].instruction_addr;
            if (!rename_frame(&names->frames[i], f))
                return -ENOMEM;
            bt->count++;
        }
    }
    if (names->problem != NULL && bt->runtime_error == NULL)
        bt->runtime_error = strdup(names->problem);
    bt->runtime_lines_cut += names->lines_cut;
    return 0;
}
