/*
 * show.c - the human summary of a report.  It reads the JSON back with
 * jansson (never trusting it: any field may be missing or of the wrong type)
 * and prints what a person looks at first: what hung, for how long, the hung
 * thread's stack with file:line, then one line per other thread.
 */
#include "show.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdbool.h>
#include <string.h>

static const char *str_at(json_t *obj, const char *key, const char *fallback)
{
    const char *s = json_string_value(json_object_get(obj, key));
    return s ? s : fallback;
}

static json_int_t int_at(json_t *obj, const char *key, json_int_t fallback)
{
    json_t *v = json_object_get(obj, key);
    return json_is_integer(v) ? json_integer_value(v) : fallback;
}

static void print_frame(FILE *out, size_t i, json_t *f)
{
    json_int_t pc = int_at(f, "instruction_addr", 0);
    const char *sym = str_at(f, "symbol_name", NULL);
    const char *obj = str_at(f, "object_name", NULL);
    const char *file = str_at(f, "source_file", NULL);
    fprintf(out, "  #%-2zu 0x%016" PRIx64 "  ", i, (uint64_t)pc);
    if (sym)
        fprintf(out, "%s", sym);
    else if (obj)
        fprintf(out, "%s+0x%" PRIx64, obj, (uint64_t)int_at(f, "object_offset", 0));
    else
        fprintf(out, "??");
    if (file)
        fprintf(out, "  at %s:%" JSON_INTEGER_FORMAT, file, int_at(f, "source_line", 0));
    fprintf(out, "  (%s)\n", obj ? obj : "no object: JIT code or unmapped");
}

int hw_show_file(const char *path, FILE *out)
{
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err);
    if (!root) {
        fprintf(stderr, "hangwatch: %s: not valid JSON (line %d: %s)\n", path, err.line, err.text);
        return 1;
    }
    json_t *report = json_object_get(root, "report");
    json_t *apm = json_object_get(root, "hangwatch");
    json_t *threads = json_object_get(json_object_get(root, "crash"), "threads");
    if (!json_is_object(report) || !json_is_object(apm) || !json_is_array(threads)) {
        fprintf(stderr, "hangwatch: %s: not a hangwatch report (no report, crash.threads or hangwatch section)\n",
                path);
        json_decref(root);
        return 1;
    }
    json_t *hung = json_object_get(apm, "hung_thread");
    json_int_t index = int_at(hung, "report_array_index", 0);
    json_t *thread = json_array_get(threads, (size_t)(index >= 0 ? index : 0));

    const char *type = str_at(apm, "hang_type", "hang");
    fprintf(out, "%s: %s in %s (pid %" JSON_INTEGER_FORMAT ")\n", path,
            strcmp(type, "launch_hang") == 0 ? "launch hang" : strcmp(type, "stutter") == 0 ? "stutter" : "hang",
            str_at(report, "process_name", "?"), int_at(report, "pid", 0));
    /* What the detector measured (report-format.md, block_duration_us). */
    const char *detector = str_at(apm, "detector", "runloop");
    bool ping = strcmp(detector, "ping") == 0, frame_gap = strcmp(detector, "frame_gap") == 0;
    fprintf(out, "  %s %.3f s %s (threshold %.3f s, %s detector, %s check)\n",
            ping ? "a ping unanswered for" : frame_gap ? "a frame tick" : "busy",
            (double)int_at(apm, "block_duration_us", 0) / 1e6,
            frame_gap ? "late, seen after the hang" : "when detected",
            (double)int_at(apm, "runloop_threshold_us", 0) / 1e6, detector, str_at(apm, "check_mode", "?"));
    json_t *capture = json_object_get(apm, "capture");
    fprintf(out, "  group %s; captured by %s, program stopped for %" JSON_INTEGER_FORMAT " us; report id %s\n",
            str_at(apm, "grouping_key", "?"), str_at(capture, "method", "?"), int_at(capture, "stopped_us", 0),
            str_at(report, "id", "?"));

    if (json_is_object(thread)) {
        json_t *contents = json_object_get(json_object_get(thread, "backtrace"), "contents");
        fprintf(out, "\nhung thread %" JSON_INTEGER_FORMAT " (%s), %zu frames:\n", int_at(thread, "thread_identifier", 0),
                str_at(thread, "name", "?"), json_array_size(contents));
        for (size_t i = 0; i < json_array_size(contents); i++)
            print_frame(out, i, json_array_get(contents, i));
        const char *unwind_error = str_at(thread, "unwind_error", NULL);
        if (unwind_error)
            fprintf(out, "  (unwinding stopped early: %s)\n", unwind_error);
    }

    json_t *ms = json_object_get(json_object_get(apm, "collection"), "main_thread");
    json_t *ps = json_object_get(json_object_get(ms, "backtrace"), "contents");
    if (json_array_size(ps) > 0) {
        fprintf(out, "\nPoint Stack (early sampling: sample %" JSON_INTEGER_FORMAT " of %" JSON_INTEGER_FORMAT
                     ", top seen %" JSON_INTEGER_FORMAT " times in a row); repeat counts over the ring:\n",
                int_at(ms, "point_stack_index", 0) + 1, int_at(ms, "sample_count", 0),
                int_at(ms, "top_repeat_count", 0) + 1);
        for (size_t i = 0; i < json_array_size(ps); i++) {
            json_t *f = json_array_get(ps, i);
            fprintf(out, "  %3" JSON_INTEGER_FORMAT "x", int_at(f, "repeat_count", 0));
            print_frame(out, i, f);
        }
    }
    if (json_is_integer(json_object_get(apm, "final_duration_us")))
        fprintf(out, "\nthe hang lasted %.3f s in all (%s)\n", (double)int_at(apm, "final_duration_us", 0) / 1e6,
                str_at(apm, "hang_end", "?"));

    json_t *items = json_object_get(json_object_get(json_object_get(apm, "collection"), "scene_threads"), "items");
    if (json_array_size(items) > 1)
        fprintf(out, "\nother threads:\n");
    for (size_t i = 0; i < json_array_size(items); i++) {
        json_t *item = json_array_get(items, i);
        if (json_is_true(json_object_get(item, "is_hung_thread")))
            continue;
        json_t *t = json_array_get(threads, (size_t)int_at(item, "report_array_index", 0));
        json_t *contents = json_object_get(json_object_get(t, "backtrace"), "contents");
        json_t *top = json_array_get(contents, 0);
        fprintf(out, "  %" JSON_INTEGER_FORMAT " (%s) %s, %" JSON_INTEGER_FORMAT " frames%s%s\n",
                int_at(item, "thread_identifier", 0), str_at(item, "name", "?"), str_at(item, "status", "?"),
                int_at(item, "frame_count", 0), top ? ", in " : "", top ? str_at(top, "symbol_name", "?") : "");
    }
    json_decref(root);
    return 0;
}

int hw_show_main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "hangwatch: show needs at least one report file\nTry 'hangwatch --help'.\n");
        return 2;
    }
    int rc = 0;
    for (int i = 1; i < argc; i++) {
        if (i > 1)
            fputc('\n', stdout);
        if (hw_show_file(argv[i], stdout) != 0)
            rc = 1;
    }
    return rc;
}
