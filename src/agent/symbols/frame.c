/*
 * frame.c - frames and backtraces: their names, their function's identity,
 * freeing them (frame.h).
 */
#include "frame.h"

#include <stdlib.h>
#include <string.h>

const char *hw_frame_language_name(hw_frame_language language)
{
    switch (language) {
    case HW_LANG_PYTHON:
        return "python";
    case HW_LANG_JAVASCRIPT:
        return "javascript";
    case HW_LANG_NATIVE:
    default:
        return "native";
    }
}

void hw_frame_clear(hw_frame *f)
{
    free(f->symbol_name);
    free(f->object_path);
    free(f->source_file);
    memset(f, 0, sizeof *f);
}

void hw_backtrace_free(hw_backtrace *bt)
{
    if (bt == NULL)
        return;
    for (size_t i = 0; i < bt->count; i++)
        hw_frame_clear(&bt->frames[i]);
    free(bt->frames);
    free(bt->error);
    free(bt->runtime_error);
    free(bt->runtime_thread_name);
    memset(bt, 0, sizeof *bt);
}

uint64_t hw_frame_function_key(const hw_frame *f)
{
    if ((f->runtime_key & HW_RUNTIME_KEY_TAG) != 0)
        return f->runtime_key & ~((1ull << HW_RUNTIME_KEY_POSITION_BITS) - 1);
    return f->symbol_name ? f->symbol_addr : f->instruction_addr;
}
