/*
 * frame.c - frames and backtraces: their names, their function's identity,
 * whose code they are and their culprit, freeing them (frame.h).
 */
#include "frame.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/python_machinery.h"

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
    return f->symbol_addr != 0 ? f->symbol_addr : f->instruction_addr; /* named, or hw_symbolizer_functions_only */
}

void hw_frame_classify(hw_frame *f, const hw_in_app_context *ctx)
{
    hw_frame_place place = {
        .native = f->language == HW_LANG_NATIVE,
        .javascript = f->language == HW_LANG_JAVASCRIPT,
        .object_path = f->object_path,
        .source_file = f->source_file,
        .executable = ctx ? ctx->executable : NULL,
    };
    f->origin = hw_frame_origin_of(&place);
    f->in_app = hw_frame_in_app(&place, f->origin, ctx ? ctx->rules : NULL, ctx ? ctx->rule_count : 0,
                                NULL);
}

void hw_backtrace_classify(hw_backtrace *bt, const hw_in_app_context *ctx)
{
    for (size_t i = 0; bt && i < bt->count; i++)
        hw_frame_classify(&bt->frames[i], ctx);
}

bool hw_backtrace_has_runtime_frames(const hw_backtrace *bt)
{
    for (size_t i = 0; bt && i < bt->count; i++)
        if (bt->frames[i].language != HW_LANG_NATIVE)
            return true;
    return false;
}

size_t hw_frames_culprit(const hw_frame *frames, size_t count)
{
    enum { MAX = 1024 }; /* deeper frames are never the culprit */
    hw_culprit_facts facts[MAX];
    size_t n = count < MAX ? count : MAX;
    for (size_t i = 0; i < n; i++)
        facts[i] = (hw_culprit_facts){
            .origin = frames[i].origin,
            .in_app = frames[i].in_app,
            .runtime_frame = frames[i].language != HW_LANG_NATIVE,
            .named = frames[i].symbol_name != NULL,
            .machinery = hw_frame_is_machinery(frames[i].language == HW_LANG_NATIVE, frames[i].origin,
                                               frames[i].symbol_name),
            .call_stub = frames[i].language == HW_LANG_NATIVE && hw_frame_is_call_stub(frames[i].symbol_name),
        };
    return hw_culprit_index(facts, n);
}

bool hw_frames_gc(const hw_frame *frames, size_t count, hw_gc_stop *out)
{
    *out = (hw_gc_stop){.phase = HW_GC_NONE, .outermost = SIZE_MAX, .function = NULL};
    for (size_t i = 0; i < count && frames[i].language == HW_LANG_NATIVE; i++) {
        hw_gc_phase phase = hw_gc_phase_of(frames[i].symbol_name);
        if (phase == HW_GC_NONE)
            continue;
        if (out->phase == HW_GC_NONE || out->phase == HW_GC_COLLECTION)
            out->phase = phase; /* a phase's own function says more than the entry point */
        out->outermost = i;
        out->function = frames[i].symbol_name;
    }
    return out->phase != HW_GC_NONE;
}

size_t hw_frames_site_start(const hw_frame *frames, size_t count)
{
    size_t culprit = hw_frames_culprit(frames, count);
    hw_gc_stop gc;
    if (hw_frames_gc(frames, count, &gc) && (culprit == SIZE_MAX || culprit < gc.outermost))
        return gc.outermost;
    return culprit;
}

void hw_runtime_names_free(hw_runtime_names *names, size_t count)
{
    for (size_t t = 0; names && t < count; t++) {
        for (unsigned i = 0; i < names[t].count; i++)
            hw_frame_clear(&names[t].frames[i]);
        free(names[t].frames);
        free(names[t].is_entry);
        free(names[t].thread_name);
    }
    free(names);
}
