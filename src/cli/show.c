/*
 * show.c - the human summary of a report.  It reads the JSON back with
 * jansson (never trusting it: any field may be missing or of the wrong type)
 * and prints what a person looks at first: what hung, for how long, the hung
 * thread's stack with file:line, then one line per other thread.  A
 * snapshot (`hangwatch stack`, hang_type "snapshot") is printed as the stack
 * of a process, and `stack` asks for every thread's whole stack
 * (HW_SHOW_EVERY_STACK).
 *
 * A report is foreign input: names in it come from the watched program, and
 * anyone may have edited the file.  So every string taken from it is printed
 * escaped (text_escape.h: no control byte reaches the terminal), numbers are
 * printed without arithmetic that could overflow, and a file larger than any
 * report (HW_SHOW_MAX_BYTES) is refused before it is read into memory.
 * Reading, parsing and the shape check are shared with stats and export
 * (report_read.c), and so is the escaped printing (foreign_text.c).
 */
#include "show.h"

#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "foreign_text.h"
#include "report_read.h"
#include "core/hang_cause.h"

/* The string at `key`, escaped, or `fallback` (ours, printed as it is). */
static void put_string_at(FILE *out, json_t *obj, const char *key, const char *fallback)
{
    json_t *v = json_object_get(obj, key);
    if (json_is_string(v))
        hw_put_bytes(out, json_string_value(v), json_string_length(v));
    else
        fputs(fallback, out);
}

/* `before`, obj's string `key`, `after`, when obj has that string: true
 * then, and nothing written otherwise. */
static bool put_string_if(FILE *out, json_t *obj, const char *key, const char *before, const char *after)
{
    json_t *v = json_object_get(obj, key);
    if (!json_is_string(v))
        return false;
    fputs(before, out);
    hw_put_bytes(out, json_string_value(v), json_string_length(v));
    fputs(after, out);
    return true;
}

/* A 0-based count shown 1-based, without overflowing at the top. */
static json_int_t one_based(json_int_t v)
{
    return v < LLONG_MAX ? v + 1 : v;
}

/* A frame of the user's Python or JavaScript code (report-format.md,
 * frame.language): marked "py" or "js" where native frames show their
 * address, with its function and file:line. */
static bool print_runtime_frame(FILE *out, size_t i, json_t *f, const char *mark_text)
{
    const char *language = hw_str_at(f, "language", "native");
    const char *mark = strcmp(language, "python") == 0 ? "py" : strcmp(language, "javascript") == 0 ? "js" : NULL;
    if (mark == NULL)
        return false;
    fprintf(out, "  #%-2zu %-18s  ", i, mark);
    put_string_at(out, f, "symbol_name", "??");
    if (put_string_if(out, f, "source_file", "  at ", "")) {
        json_int_t line = hw_int_at(f, "source_line", 0);
        if (line > 0)
            fprintf(out, ":%" JSON_INTEGER_FORMAT, line);
        if (line > 0 && json_is_true(json_object_get(f, "source_line_is_function_start")))
            fputs(" (the function's first line: where in it is not known, optimised code)", out);
    }
    fputs(mark_text, out);
    fputc('\n', out);
    return true;
}

/* What follows a frame's line: the culprit's mark, or that hangwatch's own
 * code is not the program's (report-format.md, frame.origin). */
static const char *frame_mark(json_t *f, bool culprit)
{
    if (culprit)
        return "  <- culprit";
    const char *origin = hw_str_at(f, "origin", NULL);
    return origin != NULL && strcmp(origin, "hangwatch") == 0 ? "  (hangwatch's own)" : "";
}

static void print_frame(FILE *out, size_t i, json_t *f, bool culprit)
{
    const char *mark = frame_mark(f, culprit);
    if (print_runtime_frame(out, i, f, mark))
        return;
    json_int_t pc = hw_int_at(f, "instruction_addr", 0);
    json_t *sym = json_object_get(f, "symbol_name");
    json_t *obj = json_object_get(f, "object_name");
    fprintf(out, "  #%-2zu 0x%016" PRIx64 "  ", i, (uint64_t)pc);
    if (json_is_string(sym)) {
        put_string_at(out, f, "symbol_name", "??");
    } else if (json_is_string(obj)) {
        put_string_at(out, f, "object_name", "??");
        fprintf(out, "+0x%" PRIx64, (uint64_t)hw_int_at(f, "object_offset", 0));
    } else {
        fputs("??", out);
    }
    if (put_string_if(out, f, "source_file", "  at ", ""))
        fprintf(out, ":%" JSON_INTEGER_FORMAT, hw_int_at(f, "source_line", 0));
    fputs("  (", out);
    put_string_at(out, f, "object_name", "no object: JIT code or unmapped");
    fputc(')', out);
    fputs(mark, out);
    fputc('\n', out);
}

/* "  not captured: traced by pid 1234 (strace)" when another tracer held
 * the process (report-format.md, capture.tracer_pid). */
static void print_tracer(FILE *out, json_t *capture)
{
    json_int_t tracer = hw_int_at(capture, "tracer_pid", 0);
    if (tracer <= 0)
        return;
    fprintf(out, "  not captured: traced by pid %" JSON_INTEGER_FORMAT, tracer);
    put_string_if(out, capture, "tracer_name", " (", ")");
    fputc('\n', out);
}

/* "  in garbage collection: mark-compact (v8::internal::Heap::CollectGarbage...)"
 * when the hung thread was stopped inside a collector (hangwatch.gc). */
static void print_gc(FILE *out, json_t *apm)
{
    json_t *gc = json_object_get(apm, "gc");
    if (!json_is_object(gc))
        return;
    fputs("  in garbage collection: ", out);
    put_string_at(out, gc, "phase", "?");
    put_string_if(out, gc, "function", " (", ")");
    fputc('\n', out);
}

/* What the observer took to be the loop's wait (hangwatch.loop_wait), and
 * how it decided. */
static void print_loop_wait(FILE *out, json_t *apm)
{
    json_t *w = json_object_get(apm, "loop_wait");
    if (!json_is_object(w))
        return;
    const char *decided = hw_str_at(w, "decided", "unknown");
    if (!put_string_if(out, w, "call", "  the loop's wait: ", "")) {
        fputs("  the loop's wait: none seen yet", out);
    } else {
        json_int_t fd = hw_int_at(w, "descriptor", -1);
        if (fd >= 0)
            fprintf(out, " on descriptor %" JSON_INTEGER_FORMAT, fd);
        json_t *site = json_object_get(w, "site");
        if (!put_string_if(out, site, "symbol_name", " from ", ""))
            put_string_if(out, site, "object_name", " from code in ", "");
        fprintf(out, ", %s",
                strcmp(decided, "repeated") == 0  ? "learned (it repeated)"
                : strcmp(decided, "primed") == 0  ? "the wait it was in when watching began"
                : strcmp(decided, "moved") == 0   ? "learned again (the loop moved)"
                : strcmp(decided, "not_yet") == 0 ? "not learned yet (the best seen so far)"
                                                  : "decided how is unknown");
    }
    json_int_t nested = hw_int_at(w, "nested_waits", 0);
    if (nested > 0)
        fprintf(out, "; %" JSON_INTEGER_FORMAT " wait%s taken as a callback's", nested, nested == 1 ? "" : "s");
    fputc('\n', out);
}

/* The scene item (collection.scene_threads.items[]) of the thread at
 * crash.threads[index], or NULL. */
static json_t *item_of(json_t *items, size_t index)
{
    for (size_t i = 0; i < json_array_size(items); i++) {
        json_t *item = json_array_get(items, i);
        json_int_t at = hw_int_at(item, "report_array_index", -1);
        if (at >= 0 && (uint64_t)at == (uint64_t)index)
            return item;
    }
    return NULL;
}

/* A thread's names: "worker" or "python3, Python's worker_alpha" (the
 * kernel's name, and the one Python's threading gave it). */
static void put_thread_names(FILE *out, json_t *thread)
{
    put_string_at(out, thread, "name", "?");
    put_string_if(out, thread, "python_name", ", Python's ", "");
}

static bool has_language(json_t *contents, const char *language)
{
    for (size_t i = 0; i < json_array_size(contents); i++) {
        json_t *l = json_object_get(json_array_get(contents, i), "language");
        if (json_is_string(l) && strcmp(json_string_value(l), language) == 0)
            return true;
    }
    return false;
}

/* One thread's whole stack under a heading: "WHAT 4242 (name), 9 frames:"
 * and its frames (the one at `culprit` marked; -1: none), or why it has
 * none when its scene item (may be NULL) says it was not captured. */
static void print_stack(FILE *out, const char *what, json_t *thread, json_t *item, json_int_t culprit)
{
    json_t *contents = json_object_get(json_object_get(thread, "backtrace"), "contents");
    fprintf(out, "\n%s %" JSON_INTEGER_FORMAT " (", what, hw_int_at(thread, "thread_identifier", 0));
    put_thread_names(out, thread);
    json_t *status = json_object_get(item, "status");
    if (json_is_string(status) && strcmp(json_string_value(status), "captured") != 0) {
        fputs("), not captured: ", out);
        put_string_at(out, item, "status", "?");
        put_string_if(out, item, "error", " (", ")");
        fputc('\n', out);
        return;
    }
    /* A stack cut short: its innermost frames, the gap, its outermost. */
    json_t *backtrace = json_object_get(thread, "backtrace");
    json_int_t omitted = hw_int_at(backtrace, "frames_omitted", 0);
    json_int_t omitted_at = hw_int_at(backtrace, "frames_omitted_at", -1);
    if (omitted > 0 && omitted_at >= 0)
        fprintf(out, "), %zu of %" JSON_INTEGER_FORMAT " frames:\n", json_array_size(contents),
                (json_int_t)json_array_size(contents) + omitted);
    else
        fprintf(out, "), %zu frames:\n", json_array_size(contents));
    for (size_t i = 0; i < json_array_size(contents); i++) {
        if (omitted > 0 && (json_int_t)i == omitted_at)
            fprintf(out, "  ... %" JSON_INTEGER_FORMAT " frames omitted ...\n", omitted);
        print_frame(out, i, json_array_get(contents, i), culprit >= 0 && (uint64_t)culprit == i);
    }
    put_string_if(out, thread, "unwind_error", "  (unwinding stopped early: ", ")\n");
    put_string_if(out, thread, "runtime_frames_error", "  (interpreter frames: ", ")\n");
    json_int_t lines_cut = hw_int_at(thread, "runtime_lines_cut", 0);
    if (lines_cut > 0 && has_language(contents, "javascript"))
        fprintf(out, "  (%" JSON_INTEGER_FORMAT " JavaScript frames at their function's first line or with no line: "
                     "reading their scripts' lines would have passed what one capture reads of a process)\n",
                lines_cut);
    else if (lines_cut > 0)
        fprintf(out, "  (%" JSON_INTEGER_FORMAT " Python frames at their function's first line: their line tables "
                     "would have passed what one capture reads of a process)\n", lines_cut);
}

/* The culprit frame of the thread at crash.threads[at] when it holds the
 * GIL the hung thread waits for (hangwatch.gil_holder), else -1. */
static json_int_t holder_culprit(json_t *apm, json_int_t at)
{
    json_t *gil = json_object_get(apm, "gil_holder");
    return json_is_object(gil) && hw_int_at(gil, "report_array_index", -1) == at ? hw_int_at(gil, "culprit_frame", -1)
                                                                                 : -1;
}

/* "  4243 (worker, Python's worker_alpha) captured, 5 frames, in poll, py serve at app.py:11" */
static void print_thread_line(FILE *out, json_t *item, json_t *t)
{
    json_t *contents = json_object_get(json_object_get(t, "backtrace"), "contents");
    json_t *top = json_array_get(contents, 0);
    fprintf(out, "  %" JSON_INTEGER_FORMAT " (", hw_int_at(item, "thread_identifier", 0));
    put_thread_names(out, item);
    fputs(") ", out);
    put_string_at(out, item, "status", "?");
    fprintf(out, ", %" JSON_INTEGER_FORMAT " frames", hw_int_at(item, "frame_count", 0));
    put_string_if(out, item, "error", " (", ")");
    if (top) {
        fputs(", in ", out);
        put_string_at(out, top, "symbol_name", "?");
    }
    /* and the innermost frame of the user's Python or JavaScript code */
    for (size_t k = 0; k < json_array_size(contents); k++) {
        json_t *f = json_array_get(contents, k);
        const char *language = hw_str_at(f, "language", "native");
        bool py = strcmp(language, "python") == 0, js = strcmp(language, "javascript") == 0;
        if (!py && !js)
            continue;
        if (f != top) {
            fputs(py ? ", py " : ", js ", out);
            put_string_at(out, f, "symbol_name", "?");
        }
        if (put_string_if(out, f, "source_file", " at ", "")) {
            if (hw_int_at(f, "source_line", 0) > 0)
                fprintf(out, ":%" JSON_INTEGER_FORMAT, hw_int_at(f, "source_line", 0));
        }
        break;
    }
    fputc('\n', out);
}

/* A JSON number (integer or real) at `key`, 0 when absent or not one. */
static double number_at(json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    return json_is_number(v) ? json_number_value(v) : 0.0;
}

/* A CPU-high report's threads by share and the hottest threads' sampled
 * stacks (report-format.md, cpu_high): "  32x  spin < run < start_thread". */
static void print_cpu_threads(FILE *out, json_t *cpu)
{
    json_t *threads = json_object_get(cpu, "threads");
    fprintf(out, "\nCPU by thread (over %.3f s):\n", (double)hw_int_at(cpu, "threads_window_us", 0) / 1e6);
    for (size_t i = 0; i < json_array_size(threads); i++) {
        json_t *t = json_array_get(threads, i);
        fprintf(out, "  %" JSON_INTEGER_FORMAT " (", hw_int_at(t, "thread_identifier", 0));
        put_string_at(out, t, "name", "?");
        fprintf(out, ") %.1f%%", number_at(t, "percent"));
        if (hw_int_at(t, "sample_count", 0) > 0)
            fprintf(out, ", %" JSON_INTEGER_FORMAT " samples", hw_int_at(t, "sample_count", 0));
        fputc('\n', out);
    }
    for (size_t i = 0; i < json_array_size(threads); i++) {
        json_t *t = json_array_get(threads, i);
        json_t *stacks = json_object_get(t, "stacks");
        if (json_array_size(stacks) == 0)
            continue;
        fprintf(out, "\nsampled stacks of thread %" JSON_INTEGER_FORMAT " (", hw_int_at(t, "thread_identifier", 0));
        put_string_at(out, t, "name", "?");
        fputs("), most frequent first:\n", out);
        for (size_t k = 0; k < json_array_size(stacks); k++) {
            json_t *st = json_array_get(stacks, k);
            json_t *contents = json_object_get(json_object_get(st, "backtrace"), "contents");
            fprintf(out, "  %4" JSON_INTEGER_FORMAT "x ", hw_int_at(st, "count", 0));
            for (size_t f = 0; f < json_array_size(contents) && f < 6; f++) {
                fputs(f ? " < " : " ", out);
                put_string_at(out, json_array_get(contents, f), "symbol_name", "??");
            }
            fputc('\n', out);
        }
    }
}

/* How the hang ended: its final duration, or for a fatal hang (the
 * process died during it, report-format.md process_end) how it died:
 * "the process was killed by SIGKILL 3.2 s into this hang". */
static void print_hang_end(FILE *out, json_t *apm)
{
    double final_s = (double)hw_int_at(apm, "final_duration_us", 0) / 1e6;
    const char *end = hw_str_at(apm, "hang_end", "?");
    json_t *death = json_object_get(apm, "process_end");
    if (strcmp(end, "killed") == 0 && json_is_string(json_object_get(death, "signal_name"))) {
        fputs("\nfatal: the process was killed by ", out);
        put_string_at(out, death, "signal_name", "?");
        fprintf(out, "%s %.1f s into this hang\n",
                json_is_true(json_object_get(death, "core_dumped")) ? " (core dumped)" : "", final_s);
        return;
    }
    if (strcmp(end, "exited") == 0 && json_is_integer(json_object_get(death, "exit_status"))) {
        fprintf(out, "\nfatal: the process exited with status %" JSON_INTEGER_FORMAT ", %.1f s into this hang\n",
                hw_int_at(death, "exit_status", 0), final_s);
        return;
    }
    fprintf(out, "\nthe hang lasted %.3f s in all (", final_s);
    put_string_at(out, apm, "hang_end", "?");
    fputs(")\n", out);
}

/* One window's figures of a `time` section (report-format.md, time). */
static void print_time_figures(FILE *out, json_t *t)
{
    fprintf(out, "%.3f s", (double)hw_int_at(t, "window_us", 0) / 1e6);
    if (json_is_integer(json_object_get(t, "on_cpu_us")))
        fprintf(out, ": %.3f s on CPU, %.3f s waiting for a CPU, %.3f s asleep",
                (double)hw_int_at(t, "on_cpu_us", 0) / 1e6, (double)hw_int_at(t, "runqueue_wait_us", 0) / 1e6,
                (double)hw_int_at(t, "blocked_us", 0) / 1e6);
    if (hw_int_at(t, "stopped_us", 0) > 0)
        fprintf(out, ", %.3f s held by hangwatch's captures", (double)hw_int_at(t, "stopped_us", 0) / 1e6);
    if (hw_int_at(t, "throttled_us", 0) > 0)
        fprintf(out, ", %.3f s throttled", (double)hw_int_at(t, "throttled_us", 0) / 1e6);
    if (hw_int_at(t, "major_faults", 0) > 0)
        fprintf(out, ", %" JSON_INTEGER_FORMAT " major faults", hw_int_at(t, "major_faults", 0));
    fputs("; cause: ", out);
    put_string_at(out, t, "cause", "?");
    put_string_if(out, t, "blocked_on", " (", ")");
    json_t *secondary = json_object_get(t, "secondary");
    if (json_is_object(secondary)) {
        fputs(", and ", out);
        put_string_at(out, secondary, "cause", "?");
        fprintf(out, " %.3f s", (double)hw_int_at(secondary, "us", 0) / 1e6);
    }
    fputc('\n', out);
}

/* Where the hung thread's time went (hangwatch.time): the window to the
 * detection and to the hang's end, the cgroup that limits it, what it was
 * blocked in. */
/* Who the process is for a fleet: "  in container 3f2a9c1b7d6e (docker)",
 * "  in pod shop/cart-5d9f (uid ...), container ... (containerd)", "  in
 * unit nginx.service (system.slice)". */
static void print_container(FILE *out, json_t *apm)
{
    json_t *c = json_object_get(apm, "container");
    const char *kind = hw_str_at(c, "kind", NULL);
    if (kind == NULL)
        return;
    if (strcmp(kind, "systemd") == 0) {
        fputs("  in unit ", out);
        put_string_at(out, c, "unit", "?");
        if (json_is_string(json_object_get(c, "slice"))) {
            fputs(" (", out);
            put_string_at(out, c, "slice", "?");
            fputc(')', out);
        }
        fputc('\n', out);
        return;
    }
    fputs("  in ", out);
    if (strcmp(kind, "kubernetes") == 0) {
        fputs("pod ", out);
        if (json_is_string(json_object_get(c, "pod_name"))) {
            if (json_is_string(json_object_get(c, "namespace"))) {
                put_string_at(out, c, "namespace", "?");
                fputc('/', out);
            }
            put_string_at(out, c, "pod_name", "?");
            fputs(" (uid ", out);
            put_string_at(out, c, "pod_uid", "?");
            fputs("), ", out);
        } else {
            put_string_at(out, c, "pod_uid", "?");
            fputs(", ", out);
        }
    }
    fputs("container ", out);
    put_string_at(out, c, "label", "?");
    fputs(" (", out);
    put_string_at(out, c, "runtime", kind);
    fputs(")\n", out);
}

/* The lock the hung thread waits for: its holder in this process (whose
 * stack is in the report), in another, its readers, or that it has none. */
static void print_lock(FILE *out, json_t *apm)
{
    json_t *lock = json_object_get(json_object_get(json_object_get(apm, "time"), "blocked_in"), "lock");
    json_t *holder = json_object_get(apm, "lock_holder");
    const char *kind = hw_str_at(lock, "kind", NULL);
    const char *words = hw_report_lock_words(kind);
    if (json_is_object(holder)) {
        fprintf(out, "  waiting for %s held by thread %" JSON_INTEGER_FORMAT " (", words,
                hw_int_at(holder, "thread_identifier", 0));
        put_thread_names(out, holder);
        fputs(")\n", out);
        return;
    }
    if (!json_is_object(lock) || kind == NULL || strcmp(kind, "unknown") == 0)
        return;
    fprintf(out, "  waiting for %s", words);
    json_t *process = json_object_get(lock, "owner_process");
    if (!hw_lock_kind_has_holder(hw_lock_kind_of_name(kind))) {
        fputs(" (it has no holder)", out);
    } else if (json_is_object(process)) {
        fprintf(out, " held by thread %" JSON_INTEGER_FORMAT " of pid %" JSON_INTEGER_FORMAT " (",
                hw_int_at(lock, "owner", 0), hw_int_at(process, "pid", 0));
        put_string_at(out, process, "name", "?");
        fputc(')', out);
    } else if (json_is_integer(json_object_get(lock, "readers"))) {
        fprintf(out, " held for reading by %" JSON_INTEGER_FORMAT " threads", hw_int_at(lock, "readers", 0));
    } else if (json_is_string(json_object_get(lock, "owner_missing"))) {
        fputs(" (its holder is not known: ", out);
        put_string_at(out, lock, "owner_missing", "?");
        fputc(')', out);
    }
    fputc('\n', out);
}

static void print_time(FILE *out, json_t *apm)
{
    json_t *t = json_object_get(apm, "time");
    if (!json_is_object(t))
        return;
    if (!json_is_integer(json_object_get(t, "window_us"))) {
        fputs("  time: not measured (", out);
        put_string_at(out, t, "missing", "?");
        fputs(")\n", out);
        return;
    }
    const char *from = hw_str_at(t, "window_from", "");
    fprintf(out, "  time over %s",
            strcmp(from, "stretch_start") == 0 ? "the stretch, "
            : strcmp(from, "stop") == 0        ? "the stretch since its process was stopped, "
            : strcmp(from, "cpu_window") == 0  ? "the report's window, "
                                               : "part of the stretch, ");
    print_time_figures(out, t);
    json_t *at_end = json_object_get(t, "at_end");
    if (json_is_integer(json_object_get(at_end, "window_us"))) {
        fputs("  to the hang's end, ", out);
        print_time_figures(out, at_end);
    }
    json_t *cg = json_object_get(t, "cgroup");
    if (json_is_object(cg) && json_is_true(json_object_get(cg, "limited"))) {
        fputs("  cgroup ", out);
        put_string_at(out, cg, "path", "?");
        fprintf(out, " (v%" JSON_INTEGER_FORMAT ", quota %.1f ms per %.1f ms): throttled in %" JSON_INTEGER_FORMAT
                     " periods\n",
                hw_int_at(cg, "version", 0), (double)hw_int_at(cg, "quota_us", 0) / 1e3,
                (double)hw_int_at(cg, "period_us", 0) / 1e3, hw_int_at(t, "throttled_periods", 0));
    }
    json_t *in = json_object_get(t, "blocked_in");
    if (put_string_if(out, in, "syscall", "  blocked in ", "")) {
        put_string_if(out, in, "fd_is", " on ", "");
        put_string_if(out, in, "wchan", " (kernel: ", ")");
        fputc('\n', out);
    }
}

static void print_report(const char *label, json_t *root, unsigned flags, FILE *out)
{
    json_t *report = json_object_get(root, "report");
    json_t *apm = json_object_get(root, "hangwatch");
    json_t *threads = json_object_get(json_object_get(root, "crash"), "threads");
    json_t *items = json_object_get(json_object_get(json_object_get(apm, "collection"), "scene_threads"), "items");
    json_t *hung = json_object_get(apm, "hung_thread");
    json_int_t index = hw_int_at(hung, "report_array_index", 0);
    json_t *thread = json_array_get(threads, (size_t)(index >= 0 ? index : 0));

    /* A snapshot (hangwatch stack) is no hang: its "hung" thread is the
     * main thread, and no detector measured anything. */
    const char *type = hw_str_at(apm, "hang_type", "hang");
    bool snapshot = strcmp(type, "snapshot") == 0;
    if (label != NULL) {
        hw_put_text(out, label);
        fputs(": ", out);
    }
    bool cpu_high = strcmp(type, "cpu_high") == 0;
    if (snapshot)
        fputs("stack of ", out);
    else
        fprintf(out, "%s in ",
                strcmp(type, "launch_hang") == 0 ? "launch hang"
                : strcmp(type, "stutter") == 0   ? "stutter"
                : cpu_high                       ? "CPU high"
                                                 : "hang");
    put_string_at(out, report, "process_name", "?");
    json_int_t namespace_pid = hw_int_at(report, "namespace_pid", 0);
    if (namespace_pid > 0)
        fprintf(out, " (pid %" JSON_INTEGER_FORMAT ", %" JSON_INTEGER_FORMAT " in its pid namespace)\n",
                hw_int_at(report, "pid", 0), namespace_pid);
    else
        fprintf(out, " (pid %" JSON_INTEGER_FORMAT ")\n", hw_int_at(report, "pid", 0));

    json_t *cpu = json_object_get(apm, "cpu_high");
    if (cpu_high) {
        fprintf(out, "  %.1f%% of one CPU over %.3f s (threshold %" JSON_INTEGER_FORMAT "%%)\n",
                number_at(cpu, "process_percent"), (double)hw_int_at(cpu, "window_us", 0) / 1e6,
                hw_int_at(cpu, "threshold_percent", 0));
    }
    /* What the detector measured (report-format.md, block_duration_us). */
    if (!snapshot && !cpu_high) {
        const char *detector = hw_str_at(apm, "detector", "runloop");
        bool ping = strcmp(detector, "ping") == 0, frame_gap = strcmp(detector, "frame_gap") == 0;
        fprintf(out, "  %s %.3f s %s (threshold %.3f s, ",
                ping ? "a ping unanswered for" : frame_gap ? "a frame tick" : "busy",
                (double)hw_int_at(apm, "block_duration_us", 0) / 1e6,
                frame_gap ? "late, seen after the hang" : "when detected",
                (double)hw_int_at(apm, "runloop_threshold_us", 0) / 1e6);
        put_string_at(out, apm, "detector", "runloop");
        fputs(" detector, ", out);
        put_string_at(out, apm, "check_mode", "?");
        fputs(" check)\n", out);
    }

    if (!snapshot)
        print_time(out, apm);

    /* Waiting for the GIL: the hang is where its holder is. */
    json_t *gil = json_object_get(apm, "gil_holder");
    if (json_is_object(gil)) {
        fprintf(out, "  waiting for the GIL held by thread %" JSON_INTEGER_FORMAT " (",
                hw_int_at(gil, "thread_identifier", 0));
        put_thread_names(out, gil);
        fputs(")\n", out);
    }

    print_lock(out, apm);
    print_container(out, apm);

    json_t *capture = json_object_get(apm, "capture");
    fputs("  group ", out);
    put_string_at(out, apm, "grouping_key", "?");
    fputs("; captured by ", out);
    put_string_at(out, capture, "method", "?");
    fprintf(out, ", program stopped for %" JSON_INTEGER_FORMAT " us; report id ", hw_int_at(capture, "stopped_us", 0));
    put_string_at(out, report, "id", "?");
    fputc('\n', out);
    print_tracer(out, capture);
    if (!snapshot)
        print_loop_wait(out, apm);
    print_gc(out, apm);

    if (json_is_object(thread)) {
        /* A hang report's hung thread keeps its heading and frames as they
         * always were; a snapshot's thread says when it was not captured. */
        json_t *item = snapshot ? item_of(items, (size_t)(index >= 0 ? index : 0)) : NULL;
        const char *what = cpu_high                                              ? "hottest thread"
                           : !snapshot                                           ? "hung thread"
                           : json_is_true(json_object_get(item, "is_main_thread")) ? "main thread"
                                                                                   : "thread";
        print_stack(out, what, thread, item, hw_int_at(json_object_get(apm, "hung_thread"), "culprit_frame", -1));
    }

    json_t *ms = json_object_get(json_object_get(apm, "collection"), "main_thread");
    json_t *ps = json_object_get(json_object_get(ms, "backtrace"), "contents");
    if (json_array_size(ps) > 0) {
        fprintf(out, "\nPoint Stack (early sampling: sample %" JSON_INTEGER_FORMAT " of %" JSON_INTEGER_FORMAT
                     ", top seen %" JSON_INTEGER_FORMAT " times in a row); repeat counts over the ring:\n",
                one_based(hw_int_at(ms, "point_stack_index", 0)), hw_int_at(ms, "sample_count", 0),
                one_based(hw_int_at(ms, "top_repeat_count", 0)));
        for (size_t i = 0; i < json_array_size(ps); i++) {
            json_t *f = json_array_get(ps, i);
            fprintf(out, "  %3" JSON_INTEGER_FORMAT "x", hw_int_at(f, "repeat_count", 0));
            print_frame(out, i, f, false);
        }
    }
    if (json_is_integer(json_object_get(apm, "final_duration_us")))
        print_hang_end(out, apm);
    if (cpu_high)
        print_cpu_threads(out, cpu);

    bool every_stack = (flags & HW_SHOW_EVERY_STACK) != 0;
    if (json_array_size(items) > 1 && !every_stack)
        fprintf(out, "\nother threads:\n");
    for (size_t i = 0; i < json_array_size(items); i++) {
        json_t *item = json_array_get(items, i);
        if (json_is_true(json_object_get(item, "is_hung_thread")))
            continue;
        json_int_t at = hw_int_at(item, "report_array_index", 0);
        json_t *t = json_array_get(threads, (size_t)(at >= 0 ? at : 0));
        if (every_stack)
            print_stack(out, json_is_true(json_object_get(item, "is_main_thread")) ? "main thread" : "thread", t,
                        item, holder_culprit(apm, at));
        else
            print_thread_line(out, item, t);
    }
    json_t *scene = json_object_get(json_object_get(apm, "collection"), "scene_threads");
    json_int_t left_out = hw_int_at(scene, "left_out_thread_count", 0);
    if (left_out > 0)
        fprintf(out,
                "  ... and %" JSON_INTEGER_FORMAT " more threads, not captured (of %" JSON_INTEGER_FORMAT
                "; the hung, main and loop threads are taken first, then the oldest)\n",
                left_out, hw_int_at(scene, "enumerated_thread_count", 0));
}

int hw_show_json(const char *label, json_t *root, unsigned flags, FILE *out)
{
    if (!hw_report_check_shape(label != NULL ? label : "report", root))
        return 1;
    print_report(label, root, flags, out);
    return 0;
}

static int show_text(const char *label, const char *text, size_t len, unsigned flags, FILE *out)
{
    if (label == NULL)
        label = "report";
    if (len > HW_SHOW_MAX_BYTES) {
        hw_say_about(label);
        fprintf(stderr, "too large for a report (%zu bytes, at most %u MiB)\n", len, HW_SHOW_MAX_BYTES >> 20);
        return 1;
    }
    json_t *root = hw_report_parse(label, text, len);
    if (!root)
        return 1;
    int rc = hw_show_json(label, root, flags, out);
    json_decref(root);
    return rc;
}

int hw_show_text(const char *label, const char *text, size_t len, FILE *out)
{
    return show_text(label, text, len, 0, out);
}

int hw_show_file(const char *path, unsigned flags, FILE *out)
{
    char *text = NULL;
    size_t len = 0;
    if (hw_report_read_file(path, false, &text, &len) != 0)
        return 1;
    int rc = show_text(path, text, len, flags, out);
    free(text);
    return rc;
}

/* One report of a directory, shown (hw_report_walk's callback). */
typedef struct shown {
    bool first;
    int rc;
    unsigned flags;
} shown;

static void show_walked(const char *path, json_t *root, void *ctx)
{
    shown *sh = ctx;
    if (!sh->first)
        fputc('\n', stdout);
    sh->first = false;
    if (hw_show_json(path, root, sh->flags, stdout) != 0)
        sh->rc = 1;
    json_decref(root);
}

static const char SHOW_HELP[] =
    "usage: hangwatch show [--every-stack] REPORT.json|DIR...\n"
    "Print each report for people: the hung thread's stack (the culprit marked: the innermost frame of\n"
    "the program's own code), the time section, and the other threads, one line each; a directory's\n"
    "reports (*.json, in name order) one after another.\n"
    "  --every-stack  every thread's whole stack, not a line per other thread\n"
    "  --             the arguments after it are files, even when they begin with '-'\n";

int hw_show_main(int argc, char **argv)
{
    unsigned flags = 0;
    int first = 1;
    for (; first < argc && argv[first][0] == '-' && argv[first][1] != '\0'; first++) {
        if (strcmp(argv[first], "--") == 0) {
            first++;
            break;
        }
        if (strcmp(argv[first], "--help") == 0 || strcmp(argv[first], "-h") == 0) {
            fputs(SHOW_HELP, stdout);
            return 0;
        }
        if (strcmp(argv[first], "--every-stack") != 0) {
            fputs("hangwatch: unknown option for show: '", stderr);
            hw_put_text(stderr, argv[first]);
            fputs("'\nTry 'hangwatch show --help'.\n", stderr);
            return 2;
        }
        flags |= HW_SHOW_EVERY_STACK;
    }
    if (first >= argc) {
        fprintf(stderr, "hangwatch: show needs at least one report file or directory\nTry 'hangwatch show --help'.\n");
        return 2;
    }
    shown sh = {.first = true, .rc = 0, .flags = flags};
    for (int i = first; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
            /* every report in it, in name order, as stats and html take them */
            hw_report_walk_counts counts;
            hw_report_walk(&argv[i], 1, show_walked, &sh, &counts);
            if (counts.failed > 0 || counts.reports == 0)
                sh.rc = 1;
            continue;
        }
        if (!sh.first)
            fputc('\n', stdout);
        sh.first = false;
        if (hw_show_file(argv[i], flags, stdout) != 0)
            sh.rc = 1;
    }
    return sh.rc;
}
