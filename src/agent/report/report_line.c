/*
 * report_line.c - the lines people see on stderr for each hang: the
 * report's (what hung, for how long, and where: the innermost frames, or
 * why there is no stack; up to where the report's path goes, which
 * report_write.c adds), and the one said at detection, before any
 * unwinding (hw_detection_line, written by report_herald.c).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/parse/duration.h"
#include "core/text_bits.h"
#include "core/text_escape.h"
#include "report_internal.h"

const char *hw_report_frame_label(const hw_frame *f, char *buf, size_t len)
{
    char raw[320];
    if (f->language != HW_LANG_NATIVE && f->symbol_name && f->source_file) {
        /* the user's code: "handle_request (app.py:5)" */
        if (f->source_line > 0)
            snprintf(raw, sizeof raw, "%s (%s:%d)", f->symbol_name, hw_base_name(f->source_file), f->source_line);
        else
            snprintf(raw, sizeof raw, "%s (%s)", f->symbol_name, hw_base_name(f->source_file));
        return hw_escape_text(raw, buf, len);
    }
    if (f->symbol_name)
        return hw_escape_text(f->symbol_name, buf, len);
    if (f->object_path) {
        snprintf(raw, sizeof raw, "%s+0x%" PRIx64, hw_base_name(f->object_path), f->object_offset);
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
        else if (t->status == HW_THREAD_TIMEOUT && t->timeout_ms > 0)
            snprintf(buf, len, ", no stack (%s)", hw_thread_timeout_reason(t, tracer, sizeof tracer));
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

/* ", waiting for the GIL held by thread 4242 (crunch_numbers at
 * worker.py:12)": the holder, and where it is (its culprit), escaped into
 * `buf`. */
static void holder_part(pid_t holder, const char *what, const hw_backtrace *holder_bt, char *buf, size_t len)
{
    buf[0] = '\0';
    if (holder == 0)
        return;
    size_t culprit = holder_bt ? hw_frames_culprit(holder_bt->frames, holder_bt->count) : SIZE_MAX;
    const hw_frame *where =
        culprit != SIZE_MAX && holder_bt->frames[culprit].symbol_name ? &holder_bt->frames[culprit] : NULL;
    char raw[400] = "", text[400];
    if (where && where->source_file && where->source_line > 0) {
        snprintf(raw, sizeof raw, " (%s at %s:%d)", where->symbol_name, hw_base_name(where->source_file),
                 where->source_line);
    } else if (where) {
        snprintf(raw, sizeof raw, " (%s)", where->symbol_name);
    }
    snprintf(buf, len, ", waiting for %s held by thread %d%s", what, (int)holder, hw_escape_text(raw, text, sizeof text));
}

/* Append " < " (unless first) and `text` to frames[used..]; false when it
 * does not fit. */
static bool append_part(char *frames, size_t size, size_t *used, bool first, const char *text)
{
    int n = snprintf(frames + *used, size - *used, "%s%s", first ? "" : " < ", text);
    if (n < 0 || (size_t)n >= size - *used)
        return false;
    *used += (size_t)n;
    return true;
}

/* The hung stack as the line shows it: its innermost named frame, the
 * library frames between it and the culprit summarized, the culprit, and
 * the program's own frames outwards (in a program that runs Python or
 * JavaScript, only its runtime frames: the interpreter's own native frames
 * say nothing to its user), at most five named in all; hangwatch's own
 * frames are never shown. */
static size_t stack_part(const hw_backtrace *bt, char *frames, size_t size)
{
    size_t used = 0, shown = 0;
    frames[0] = '\0';
    if (bt == NULL || bt->count == 0)
        return 0;
    size_t culprit = hw_frames_culprit(bt->frames, bt->count);
    if (culprit == SIZE_MAX)
        return 0;
    bool runtime = hw_backtrace_has_runtime_frames(bt);
    /* the leaf: the innermost named frame that is not hangwatch's */
    size_t leaf = 0;
    while (leaf < culprit &&
           (bt->frames[leaf].origin == HW_ORIGIN_HANGWATCH || bt->frames[leaf].symbol_name == NULL))
        leaf++;
    char tmp[200];
    if (culprit > 0) {
        if (leaf < culprit) {
            append_part(frames, size, &used, true, hw_report_frame_label(&bt->frames[leaf], tmp, sizeof tmp));
            shown++;
        }
        size_t between = 0;
        for (size_t i = 0; i < culprit; i++)
            between += i != leaf && bt->frames[i].origin != HW_ORIGIN_HANGWATCH;
        if (between > 0) {
            char summary[64];
            snprintf(summary, sizeof summary, "... %zu library frame%s ...", between, between == 1 ? "" : "s");
            append_part(frames, size, &used, used == 0, summary);
        }
    }
    /* the culprit, then the program's own frames outwards, the library
     * frames between them summarized */
    append_part(frames, size, &used, used == 0, hw_report_frame_label(&bt->frames[culprit], tmp, sizeof tmp));
    shown++;
    size_t pending = 0;
    for (size_t i = culprit + 1; i < bt->count; i++) {
        const hw_frame *f = &bt->frames[i];
        if (f->origin == HW_ORIGIN_HANGWATCH || (runtime && f->language == HW_LANG_NATIVE))
            continue;
        if (!f->in_app) {
            pending++;
            continue;
        }
        if (shown == 5) {
            pending++;
            break;
        }
        if (pending > 0) {
            char summary[64];
            snprintf(summary, sizeof summary, "... %zu library frame%s ...", pending, pending == 1 ? "" : "s");
            append_part(frames, size, &used, false, summary);
            pending = 0;
        }
        if (!append_part(frames, size, &used, false, hw_report_frame_label(f, tmp, sizeof tmp)))
            return used;
        shown++;
    }
    if (pending > 0) /* more of the stack beyond what is named */
        append_part(frames, size, &used, false, "...");
    return used;
}

/* A stack inside a garbage collector, as the line says it: "garbage
 * collection (mark-compact) under buildRows (app.js:12) < ...", the
 * program's own frames from its culprit outwards when the collection runs
 * under them.  0 when the stack is in no collector. */
static size_t gc_part(const hw_backtrace *bt, char *frames, size_t size)
{
    hw_gc_stop gc;
    if (bt == NULL || !hw_frames_gc(bt->frames, bt->count, &gc))
        return 0;
    int n = gc.phase == HW_GC_COLLECTION
                ? snprintf(frames, size, "garbage collection")
                : snprintf(frames, size, "garbage collection (%s)", hw_gc_phase_name(gc.phase));
    if (n < 0 || (size_t)n >= size)
        return 0;
    size_t culprit = hw_frames_culprit(bt->frames, bt->count);
    if (culprit == SIZE_MAX || culprit <= gc.outermost)
        return (size_t)n;
    /* the rest as stack_part says it, from the culprit */
    hw_backtrace from_culprit = *bt;
    from_culprit.frames += culprit;
    from_culprit.count -= culprit;
    size_t used = (size_t)n;
    if (used + 8 < size) {
        memcpy(frames + used, " under ", 8);
        used += 7;
        size_t more = stack_part(&from_culprit, frames + used, size - used);
        if (more == 0)
            frames[used -= 7] = '\0';
        used += more;
    }
    return used;
}

/* The line people see on stderr, up to where the report's path goes. */
const char *hw_line_pid(const hw_process_snapshot *snap, pid_t pid, char *buf, size_t len)
{
    if (snap != NULL && snap->namespace_pid > 0 && snap->namespace_pid != pid)
        snprintf(buf, len, "pid %d, %d in its pid namespace", (int)pid, (int)snap->namespace_pid);
    else
        snprintf(buf, len, "pid %d", (int)pid);
    const hw_container *c = snap != NULL ? &snap->container : NULL;
    size_t used = strlen(buf);
    if (c == NULL || c->kind == HW_CONTAINER_NONE || c->kind == HW_CONTAINER_SYSTEMD || used >= len)
        return buf;
    /* a container's: its short id, and a pod's namespace/name (the
     * container's own words, escaped) */
    char label[16], ns[80], name[80];
    hw_container_label(c, label, sizeof label);
    if (c->kind == HW_CONTAINER_KUBERNETES && c->pod_name[0])
        snprintf(buf + used, len - used, ", pod %s%s%s, container %s", hw_escape_text(c->pod_namespace, ns, sizeof ns),
                 c->pod_namespace[0] ? "/" : "", hw_escape_text(c->pod_name, name, sizeof name), label);
    else
        snprintf(buf + used, len - used, ", container %s", label);
    return buf;
}

/* Whose loop hung, as the lines say it: "main thread", "thread 42 (io)". */
static const char *line_who(const hw_process_snapshot *snap, char *who, size_t len)
{
    char name[64];
    snprintf(who, len, "main thread");
    for (size_t i = 0; i < snap->thread_count; i++)
        if (snap->threads[i].is_target && !snap->threads[i].is_main)
            snprintf(who, len, "thread %d (%s)", (int)snap->threads[i].tid,
                     hw_escape_text(snap->threads[i].name, name, sizeof name));
    return who;
}

/* What the detector measured: a busy stretch, an unanswered ping, or the
 * gap a late frame tick left (the hang is over by then). */
static const char *line_measured(const hw_agent_options *opts)
{
    return opts->detector_kind == HW_DETECTOR_PING        ? "left a ping unanswered for"
           : opts->detector_kind == HW_DETECTOR_FRAME_GAP ? "ran a frame tick late by"
                                                           : "busy";
}

char *hw_hang_line(const hw_agent_options *opts, const report_request *req, const hw_backtrace *bt, pid_t holder,
                   const char *what, const hw_backtrace *holder_bt)
{
    const hw_check *c = &req->check;
    const hw_process_snapshot *snap = &req->snap;
    char busy[32], thr[32];
    hw_format_duration(c->busy_ns / 1000000 * 1000000, busy, sizeof busy);
    hw_format_duration(req->threshold_ns, thr, sizeof thr);
    char frames[1024];
    size_t used = gc_part(bt, frames, sizeof frames);
    if (used == 0)
        used = stack_part(bt, frames, sizeof frames);
    char no_stack[160] = "";
    if (!used)
        no_stack_reason(snap, no_stack, sizeof no_stack);
    char who[96];
    line_who(snap, who, sizeof who);
    const char *measured = line_measured(opts);
    char process[64], holding[512], why[1024];
    holder_part(holder, what, holder_bt, holding, sizeof holding);
    /* A cycle of lock holders back to it: "; deadlock: threads 100 -> 101 -> 100" */
    const hw_blocked_look *look = &req->time.look;
    if (look->valid && look->deadlock) {
        size_t used = strlen(holding);
        int n = snprintf(holding + used, sizeof holding - used, "; deadlock: threads %d", (int)req->tid);
        for (size_t i = 0; n > 0 && i < look->holder_count && used + (size_t)n < sizeof holding; i++) {
            used += (size_t)n;
            n = snprintf(holding + used, sizeof holding - used, " -> %d", look->holders[i]);
        }
        if (n > 0 && used + (size_t)n < sizeof holding) {
            used += (size_t)n;
            snprintf(holding + used, sizeof holding - used, " -> %d", look->deadlock_back_to);
        }
    }
    /* Where its time went (hangwatch.time): "; throttled: 0.2 s on CPU, ..." */
    hw_time_clause(&req->time, why, sizeof why);
    char *line = NULL, pid[256];
    if (asprintf(&line, "hangwatch: %s in %s (%s): %s %s %s (threshold %s)%s%s%s%s%s",
                 c->stutter ? "stutter" : c->launch ? "launch hang" : "hang",
                 hw_escape_text(snap->process_name, process, sizeof process),
                 hw_line_pid(snap, snap->pid, pid, sizeof pid), who, measured, busy,
                 thr, used ? " in " : no_stack, frames, holding, why[0] ? "; " : "", why) < 0)
        return NULL;
    return line;
}

/* ---- the line at detection (report_herald.c says it) ---- */

/* `pc` as the module mapped there names it: "libfoo.so.1+0x1a2b" (the
 * file offset, as addr2line and the report's frames count), "[vdso]+0x9f0",
 * "anonymous memory 0x7f..." (JIT code, a runtime's own), or the bare
 * address. */
static void raw_frame(const hw_process_snapshot *snap, uint64_t pc, char *buf, size_t len)
{
    const char *text = snap->maps, *end = snap->maps ? snap->maps + snap->maps_len : NULL;
    for (const char *at = text; at != NULL && at < end;) {
        const char *nl = memchr(at, '\n', (size_t)(end - at));
        const char *stop = nl ? nl : end;
        unsigned long long lo, hi, offset;
        int path_at = 0;
        char line[600];
        size_t n = (size_t)(stop - at) < sizeof line - 1 ? (size_t)(stop - at) : sizeof line - 1;
        memcpy(line, at, n);
        line[n] = '\0';
        at = stop + 1;
        if (sscanf(line, "%llx-%llx %*s %llx %*s %*s %n", &lo, &hi, &offset, &path_at) < 3 || pc < lo || pc >= hi)
            continue;
        const char *path = path_at > 0 ? line + path_at : "";
        if (path[0] == '\0') {
            snprintf(buf, len, "anonymous memory 0x%" PRIx64, pc);
            return;
        }
        if (path[0] != '/') { /* the kernel's own: "[vdso]+0x9f0" */
            char name[64];
            snprintf(buf, len, "%s+0x%llx", hw_escape_text(path, name, sizeof name), (unsigned long long)(pc - lo));
            return;
        }
        char name[160];
        snprintf(buf, len, "%s+0x%llx", hw_escape_text(hw_base_name(path), name, sizeof name),
                 (unsigned long long)(pc - lo + offset));
        return;
    }
    snprintf(buf, len, "0x%" PRIx64, pc);
}

/* The line at detection, with `where` (", at ..." or what kept the thread
 * from its stop) after the threshold, and `time`'s clause. */
static bool detection_line(const hw_agent_options *opts, const report_request *req, const char *who,
                           const char *where, const hw_time_section *time, char *out, size_t len)
{
    const hw_process_snapshot *snap = &req->snap;
    char busy[32], thr[32], process[64], pid[256], why[1024];
    hw_format_duration(req->check.busy_ns / 1000000 * 1000000, busy, sizeof busy);
    hw_format_duration(req->threshold_ns, thr, sizeof thr);
    hw_time_clause(time, why, sizeof why);
    int n = snprintf(out, len, "hangwatch: hang detected in %s (%s): %s %s %s (threshold %s)%s%s%s; its report follows\n",
                     hw_escape_text(snap->process_name, process, sizeof process),
                     hw_line_pid(snap, snap->pid, pid, sizeof pid), who, line_measured(opts), busy, thr, where,
                     why[0] ? "; " : "", why);
    if (n < 0)
        return false;
    if ((size_t)n >= len && len >= 2) {
        out[len - 2] = '\n'; /* cut, still a line */
        out[len - 1] = '\0';
    }
    return true;
}

bool hw_detection_line(const hw_agent_options *opts, const report_request *req, char *out, size_t len)
{
    const hw_process_snapshot *snap = &req->snap;
    const hw_thread_snapshot *target = NULL;
    for (size_t i = 0; i < snap->thread_count; i++)
        if (snap->threads[i].is_target && snap->threads[i].status == HW_THREAD_CAPTURED)
            target = &snap->threads[i];
    char who[96], at[200], where[260] = "";
    if (target != NULL) {
        raw_frame(snap, target->regs.rip, at, sizeof at);
        snprintf(where, sizeof where, ", at %s (raw address: the report names it)", at);
    }
    return detection_line(opts, req, line_who(snap, who, sizeof who), where, &req->time, out, len);
}

bool hw_detection_line_unstopped(const hw_agent_options *opts, const report_request *req, const hw_time_section *time,
                                 char state, char *out, size_t len)
{
    char who[96] = "main thread", name[16], escaped[64], where[96];
    if (req->tid != req->pid) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/task/%d/comm", (int)req->pid, (int)req->tid);
        hw_proc_read_comm(path, name);
        snprintf(who, sizeof who, "thread %d (%s)", (int)req->tid, hw_escape_text(name, escaped, sizeof escaped));
    }
    /* A stop is a signal the thread takes on its way back to user space:
     * it must run to stop (snapshot.c). */
    const char *why = state == 'R' ? "waiting for a CPU, " : state == 'D' ? "in uninterruptible sleep, " : "";
    if (state == 't') /* its stop came between the deadline and this read */
        snprintf(where, sizeof where, ", stopped late (the report names where)");
    else if (state >= 'A' && state <= 'Z')
        snprintf(where, sizeof where, ", not stopped yet (%sstate %c)", why, state);
    else
        snprintf(where, sizeof where, ", not stopped yet");
    return detection_line(opts, req, who, where, time, out, len);
}
