/*
 * report_line.c - the line people see on stderr for each hang: what hung,
 * for how long, and where (the innermost frames, or why there is no stack),
 * up to where the report's path goes (report_write.c ends it).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/parse/duration.h"
#include "core/text_escape.h"
#include "report_internal.h"

const char *hw_report_frame_label(const hw_frame *f, char *buf, size_t len)
{
    char raw[320];
    if (f->language != HW_LANG_NATIVE && f->symbol_name && f->source_file) {
        /* the user's code: "handle_request (app.py:5)" */
        const char *base = strrchr(f->source_file, '/');
        if (f->source_line > 0)
            snprintf(raw, sizeof raw, "%s (%s:%d)", f->symbol_name, base ? base + 1 : f->source_file, f->source_line);
        else
            snprintf(raw, sizeof raw, "%s (%s)", f->symbol_name, base ? base + 1 : f->source_file);
        return hw_escape_text(raw, buf, len);
    }
    if (f->symbol_name)
        return hw_escape_text(f->symbol_name, buf, len);
    if (f->object_path) {
        const char *base = strrchr(f->object_path, '/');
        snprintf(raw, sizeof raw, "%s+0x%" PRIx64, base ? base + 1 : f->object_path, f->object_offset);
        return hw_escape_text(raw, buf, len);
    }
    snprintf(buf, len, "0x%" PRIx64, f->instruction_addr);
    return buf;
}

/* Why the hung thread has no stack, for the stderr line. */
static void no_stack_reason(const hw_process_snapshot *snap, char *buf, size_t len)
{
    snprintf(buf, len, ", no stack");
    for (size_t i = 0; i < snap->thread_count; i++) {
        const hw_thread_snapshot *t = &snap->threads[i];
        if (!t->is_target)
            continue;
        char tracer[96];
        if (t->status == HW_THREAD_DENIED && hw_capture_denied_reason(snap, tracer, sizeof tracer))
            snprintf(buf, len, ", no stack (%s)", tracer);
        else if (t->status == HW_THREAD_DENIED || t->status == HW_THREAD_TIMEOUT)
            snprintf(buf, len, ", no stack (%s: %s)", hw_thread_status_name(t->status),
                     t->error ? strerror(t->error) : "unknown");
        else if (t->status == HW_THREAD_EXITED)
            snprintf(buf, len, ", no stack (the thread exited)");
        return;
    }
    if (snap->process_exited)
        snprintf(buf, len, ", no stack (the process exited)");
}

/* Is this Python source file the interpreter's own (its standard
 * library, or a frozen module), rather than the program's or a package's? */
static bool interpreter_source(const char *path)
{
    return path == NULL || path[0] == '<' || (strstr(path, "/lib/python") != NULL && strstr(path, "-packages/") == NULL);
}

/* ", waiting for the GIL held by thread 4242 (crunch_numbers at
 * worker.py:12)": the holder, and where it is (its innermost Python frame
 * outside the standard library, else its innermost Python frame, else its
 * innermost named frame), escaped into `buf`. */
static void gil_holder_part(pid_t holder, const hw_backtrace *holder_bt, char *buf, size_t len)
{
    buf[0] = '\0';
    if (holder == 0)
        return;
    const hw_frame *where = NULL;
    for (size_t i = 0; holder_bt && i < holder_bt->count && where == NULL; i++)
        if (holder_bt->frames[i].language != HW_LANG_NATIVE && holder_bt->frames[i].symbol_name &&
            !interpreter_source(holder_bt->frames[i].source_file))
            where = &holder_bt->frames[i];
    for (size_t i = 0; holder_bt && i < holder_bt->count && where == NULL; i++)
        if (holder_bt->frames[i].language != HW_LANG_NATIVE && holder_bt->frames[i].symbol_name)
            where = &holder_bt->frames[i];
    for (size_t i = 0; holder_bt && i < holder_bt->count && where == NULL; i++)
        if (holder_bt->frames[i].symbol_name)
            where = &holder_bt->frames[i];
    char raw[400] = "", text[400];
    if (where && where->source_file && where->source_line > 0) {
        const char *base = strrchr(where->source_file, '/');
        snprintf(raw, sizeof raw, " (%s at %s:%d)", where->symbol_name, base ? base + 1 : where->source_file,
                 where->source_line);
    } else if (where) {
        snprintf(raw, sizeof raw, " (%s)", where->symbol_name);
    }
    snprintf(buf, len, ", waiting for the GIL held by thread %d%s", (int)holder, hw_escape_text(raw, text, sizeof text));
}

/* The line people see on stderr, up to where the report's path goes. */
char *hw_hang_line(const hw_agent_options *opts, const report_request *req, const hw_backtrace *bt, pid_t gil_holder,
                   const hw_backtrace *holder_bt)
{
    const hw_check *c = &req->check;
    const hw_process_snapshot *snap = &req->snap;
    char busy[32], thr[32];
    hw_format_duration(c->busy_ns / 1000000 * 1000000, busy, sizeof busy);
    hw_format_duration(opts->detector.threshold_ns, thr, sizeof thr);
    /* The innermost five frames; in a program that runs Python or
     * JavaScript, the innermost frame and then the user's functions (the
     * interpreter's own frames between them say nothing to its user). */
    bool runtime = false;
    for (size_t i = 0; bt && i < bt->count; i++)
        runtime |= bt->frames[i].language != HW_LANG_NATIVE;
    char frames[768] = "";
    size_t used = 0, shown = 0;
    for (size_t i = 0; bt && i < bt->count && shown < 5; i++) {
        if (runtime && i > 0 && bt->frames[i].language == HW_LANG_NATIVE)
            continue;
        char tmp[200];
        int n = snprintf(frames + used, sizeof frames - used, "%s%s", shown ? " < " : "",
                         hw_report_frame_label(&bt->frames[i], tmp, sizeof tmp));
        if (n < 0 || (size_t)n >= sizeof frames - used)
            break;
        used += (size_t)n;
        shown++;
    }
    char no_stack[160] = "";
    if (!used)
        no_stack_reason(snap, no_stack, sizeof no_stack);
    char who[96] = "main thread", name[64];
    for (size_t i = 0; i < snap->thread_count; i++)
        if (snap->threads[i].is_target && !snap->threads[i].is_main)
            snprintf(who, sizeof who, "thread %d (%s)", (int)snap->threads[i].tid,
                     hw_escape_text(snap->threads[i].name, name, sizeof name));
    /* What the detector measured: a busy stretch, an unanswered ping, or the
     * gap a late frame tick left (the hang is over by then). */
    const char *measured = opts->detector_kind == HW_DETECTOR_PING        ? "left a ping unanswered for"
                           : opts->detector_kind == HW_DETECTOR_FRAME_GAP ? "ran a frame tick late by"
                                                                             : "busy";
    char process[64], holder[512];
    gil_holder_part(gil_holder, holder_bt, holder, sizeof holder);
    char *line = NULL;
    if (asprintf(&line, "hangwatch: %s in %s (pid %d): %s %s %s (threshold %s)%s%s%s",
                 c->stutter ? "stutter" : c->launch ? "launch hang" : "hang",
                 hw_escape_text(snap->process_name, process, sizeof process), (int)snap->pid, who, measured, busy,
                 thr, used ? " in " : no_stack, frames, holder) < 0)
        return NULL;
    return line;
}
