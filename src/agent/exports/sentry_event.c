/*
 * sentry_event.c - see sentry_event.h.
 */
#include "sentry_event.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hang_cause.h"
#include "core/hw_version.h"
#include "core/text_bits.h"

int hw_sentry_debug_id(const char *build_id_hex, char out[37])
{
    unsigned char b[16] = {0};
    size_t n = build_id_hex ? strlen(build_id_hex) : 0;
    if (n == 0 || n % 2 != 0 || n > 128)
        return 0;
    for (size_t i = 0; i < n; i += 2) {
        int hi = hw_hex_digit_value(build_id_hex[i]), lo = hw_hex_digit_value(build_id_hex[i + 1]);
        if (hi < 0 || lo < 0)
            return 0;
        if (i / 2 < 16)
            b[i / 2] = (unsigned char)(hi << 4 | lo);
    }
    /* A GUID's Data1 (4 bytes), Data2 and Data3 (2 each) little-endian. */
    snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[3], b[2], b[1], b[0],
             b[5], b[4], b[7], b[6], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
    return 1;
}

static const char *str(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

/* A non-negative integer field, or -1. */
static json_int_t num(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_integer(v) && json_integer_value(v) >= 0 ? json_integer_value(v) : -1;
}

static json_t *hex_address(json_int_t v)
{
    char buf[24];
    snprintf(buf, sizeof buf, "0x%" PRIx64, (uint64_t)v);
    return json_string(buf);
}

/* The image an address falls in, from binary_images. */
static const json_t *image_at(const json_t *images, json_int_t addr)
{
    size_t i;
    const json_t *im;
    json_array_foreach(images, i, im)
    {
        json_int_t start = num(im, "image_addr"), size = num(im, "image_size");
        if (start >= 0 && size > 0 && addr >= start && addr - start < size)
            return im;
    }
    return NULL;
}

/* One report frame as a Sentry frame.  in_app is the report's (whose code
 * it is: report-format.md), which Sentry groups by; a report written
 * before frames said so: a Python or JavaScript frame, or one of the
 * program's executable. */
static json_t *frame_of(const json_t *f, const json_t *images, const char *executable)
{
    json_t *out = json_object();
    const json_t *in_app = json_object_get(f, "in_app");
    const char *language = str(f, "language");
    const char *function = str(f, "symbol_name");
    const char *file = str(f, "source_file");
    json_int_t line = num(f, "source_line");
    if (function)
        json_object_set_new(out, "function", json_string(function));
    if (file) {
        json_object_set_new(out, "filename", json_string(hw_base_name(file)));
        json_object_set_new(out, "abs_path", json_string(file));
    }
    if (line > 0)
        json_object_set_new(out, "lineno", json_integer(line));
    if (language) {
        /* The user's Python or JavaScript: named by its runtime, no native
         * address to symbolicate. */
        json_object_set_new(out, "platform", json_string(strcmp(language, "python") == 0 ? "python" : "javascript"));
        json_object_set_new(out, "in_app", json_is_boolean(in_app) ? json_boolean(json_is_true(in_app)) : json_true());
        return out;
    }
    json_int_t pc = num(f, "instruction_addr");
    if (pc >= 0)
        json_object_set_new(out, "instruction_addr", hex_address(pc));
    json_int_t sym = num(f, "symbol_addr");
    if (sym >= 0)
        json_object_set_new(out, "symbol_addr", hex_address(sym));
    json_int_t object = num(f, "object_addr");
    const json_t *im = object >= 0 ? image_at(images, object) : NULL;
    if (!im && pc >= 0)
        im = image_at(images, pc);
    const char *package = im ? str(im, "name") : str(f, "object_name");
    if (package)
        json_object_set_new(out, "package", json_string(package));
    if (json_is_boolean(in_app))
        json_object_set_new(out, "in_app", json_boolean(json_is_true(in_app)));
    else if (package)
        json_object_set_new(out, "in_app", json_boolean(executable && strcmp(package, executable) == 0));
    return out;
}

/* A thread's frames, outermost first (Sentry's order: innermost last). */
static json_t *stacktrace_of(const json_t *thread, const json_t *images, const char *executable)
{
    const json_t *frames = json_object_get(json_object_get(thread, "backtrace"), "contents");
    json_t *list = json_array();
    for (size_t i = json_array_size(frames); i-- > 0;) {
        const json_t *f = json_array_get(frames, i);
        if (json_is_object(f))
            json_array_append_new(list, frame_of(f, images, executable));
    }
    return json_pack("{s:o}", "frames", list);
}

static json_t *debug_images(const json_t *images)
{
    json_t *list = json_array();
    size_t i;
    const json_t *im;
    json_array_foreach(images, i, im)
    {
        const char *name = str(im, "name");
        json_int_t start = num(im, "image_addr"), size = num(im, "image_size");
        if (!name || start < 0 || size <= 0)
            continue;
        json_t *o = json_pack("{s:s, s:s, s:o, s:I}", "type", "elf", "code_file", name, "image_addr",
                              hex_address(start), "image_size", size);
        const char *build_id = str(im, "build_id");
        char debug_id[37];
        if (build_id && hw_sentry_debug_id(build_id, debug_id)) {
            json_object_set_new(o, "code_id", json_string(build_id));
            json_object_set_new(o, "debug_id", json_string(debug_id));
        }
        json_array_append_new(list, o);
    }
    return list;
}

/* "App hanging for 2.504 s" (final) or "... for at least 2.001 s". */
static void hang_message(const json_t *apm, const char *process, json_int_t pid, char *buf, size_t len)
{
    json_int_t final_us = num(apm, "final_duration_us");
    json_int_t busy_us = num(apm, "block_duration_us");
    const char *type = str(apm, "hang_type");
    const char *what = type && strcmp(type, "stutter") == 0 ? "App stuttering" : "App hanging";
    if (final_us >= 0)
        snprintf(buf, len, "%s for %" PRId64 ".%03" PRId64 " s in %s (pid %" PRId64 ")", what,
                 (int64_t)(final_us / 1000000), (int64_t)(final_us % 1000000 / 1000), process, (int64_t)pid);
    else
        snprintf(buf, len, "%s for at least %" PRId64 ".%03" PRId64 " s in %s (pid %" PRId64 ")", what,
                 (int64_t)(busy_us > 0 ? busy_us / 1000000 : 0), (int64_t)(busy_us > 0 ? busy_us % 1000000 / 1000 : 0),
                 process, (int64_t)pid);
}

/* Append `text` to the message in buf (of `len`, holding `used` bytes),
 * cut where it does not fit at a character's start, never inside one. */
static void append_text(char *buf, size_t len, const char *text)
{
    size_t used = strlen(buf), n = strlen(text);
    if (used + 1 >= len)
        return;
    if (n > len - 1 - used) {
        n = len - 1 - used;
        while (n > 0 && ((unsigned char)text[n] & 0xC0) == 0x80)
            n--; /* text[n] continues a character: cut before its start */
    }
    memcpy(buf + used, text, n);
    buf[used + n] = '\0';
}

/* The frame at `index` of thread crash.threads[at]'s stack, or NULL. */
static const json_t *culprit_frame_of(const json_t *threads, json_int_t at, json_int_t index)
{
    if (at < 0 || index < 0)
        return NULL;
    const json_t *t = json_array_get(threads, (size_t)at);
    const json_t *f = json_array_get(json_object_get(json_object_get(t, "backtrace"), "contents"), (size_t)index);
    return json_is_object(f) && str(f, "symbol_name") ? f : NULL;
}

/*
 * What the hang is labelled by, the user's code where it is: when the hung
 * thread waits for the GIL or a mutex another thread holds, the holder's
 * culprit (the hang is where the holder is, as the grouping key says), and
 * *holder is set to the holder's entry and *lock to what it holds; else the
 * hung thread's culprit.  NULL when the report names none.
 */
static const json_t *label_frame(const json_t *apm, const json_t *threads, const json_t **holder, const char **lock)
{
    const json_t *kind = json_object_get(json_object_get(json_object_get(json_object_get(apm, "time"), "blocked_in"),
                                                         "lock"),
                                         "kind");
    const char *const holders[][2] = {{"gil_holder", "the GIL"},
                                      {"lock_holder", hw_report_lock_words(json_string_value(kind))}};
    for (size_t k = 0; k < 2; k++) {
        const json_t *h = json_object_get(apm, holders[k][0]);
        const json_t *f = culprit_frame_of(threads, num(h, "report_array_index"), num(h, "culprit_frame"));
        if (f != NULL) {
            *holder = h;
            *lock = holders[k][1];
            return f;
        }
    }
    const json_t *hung = json_object_get(apm, "hung_thread");
    return culprit_frame_of(threads, num(hung, "report_array_index"), num(hung, "culprit_frame"));
}

/* "spin_handler (app.py:11)": a label frame's function and place. */
static void frame_place(const json_t *f, char *buf, size_t len)
{
    const char *file = str(f, "source_file");
    json_int_t line = num(f, "source_line");
    if (file && line > 0)
        snprintf(buf, len, " (%s:%" PRId64 ")", hw_base_name(file), (int64_t)line);
    else if (file)
        snprintf(buf, len, " (%s)", hw_base_name(file));
    else
        buf[0] = '\0';
}

/* The event's message, Sentry's title: hang_message's, and where: "... in
 * crunch_numbers (work.py:36)", or for a hang on a lock, "... waiting for
 * the GIL held by thread 4243 in crunch_numbers (work.py:36)".  Returns
 * the frame it names (label_frame's), NULL when none. */
static const json_t *titled_message(const json_t *apm, const json_t *threads, const char *process, json_int_t pid,
                                    char *message, size_t len)
{
    hang_message(apm, process, pid, message, len);
    const json_t *holder = NULL;
    const char *lock = NULL;
    const json_t *label = label_frame(apm, threads, &holder, &lock);
    if (label == NULL)
        return NULL;
    char place[300] = "";
    frame_place(label, place, sizeof place);
    if (holder != NULL) {
        char held[96];
        snprintf(held, sizeof held, ", waiting for %s held by thread %" PRId64 " in ", lock,
                 (int64_t)num(holder, "thread_identifier"));
        append_text(message, len, held);
    } else {
        append_text(message, len, " in ");
    }
    append_text(message, len, str(label, "symbol_name"));
    append_text(message, len, place);
    return label;
}

/* The report id as an event id: 32 lower-case hex digits. */
static int event_id_of(const char *id, char out[33])
{
    size_t n = 0;
    for (const char *p = id; p && *p; p++) {
        if (*p == '-')
            continue;
        int v = hw_hex_digit_value(*p);
        if (v < 0 || n == 32)
            return 0;
        out[n++] = "0123456789abcdef"[v];
    }
    out[n] = '\0';
    return n == 32;
}

/* The event's tags: the grouping key, detector, verdict and the fleet's
 * names, each a value hangwatch writes and at most 200 characters. */
static json_t *tags_of(const json_t *apm, const char *process, const json_t *label)
{
    json_t *tags = json_object();
    const char *key = str(apm, "grouping_key");
    if (key)
        json_object_set_new(tags, "hangwatch.grouping_key", json_string(key));
    if (str(apm, "detector"))
        json_object_set_new(tags, "hangwatch.detector", json_string(str(apm, "detector")));
    if (str(apm, "hang_type"))
        json_object_set_new(tags, "hangwatch.hang_type", json_string(str(apm, "hang_type")));
    json_object_set_new(tags, "process", json_string(process));
    if (label != NULL) {
        char culprit[512] = "";
        append_text(culprit, 200, str(label, "symbol_name")); /* a tag's value: at most 200 characters */
        json_object_set_new(tags, "hangwatch.culprit", json_string(culprit));
    }
    /* Where the time went (hangwatch.time): its verdict, as tags to
     * search and group by; only the names hangwatch writes. */
    const json_t *time = json_object_get(apm, "time");
    static const char *const causes[] = {"working", "starved", "throttled", "blocked", "paging", "mixed"};
    static const char *const blocked_on[] = {"io", "network", "lock", "child", "sleep", "other"};
    for (size_t k = 0; k < sizeof causes / sizeof causes[0]; k++)
        if (str(time, "cause") && strcmp(str(time, "cause"), causes[k]) == 0)
            json_object_set_new(tags, "hangwatch.cause", json_string(causes[k]));
    for (size_t k = 0; k < sizeof blocked_on / sizeof blocked_on[0]; k++)
        if (str(time, "blocked_on") && strcmp(str(time, "blocked_on"), blocked_on[k]) == 0)
            json_object_set_new(tags, "hangwatch.blocked_on", json_string(blocked_on[k]));
    /* Who it was for a fleet (hangwatch.container): the container, pod or unit */
    const json_t *container = json_object_get(apm, "container");
    static const char *const container_tags[][2] = {{"kind", "container.kind"}, {"label", "container"},
                                                    {"pod_uid", "k8s.pod.uid"},  {"pod_name", "k8s.pod.name"},
                                                    {"namespace", "k8s.namespace"}, {"unit", "systemd.unit"}};
    for (size_t k = 0; k < sizeof container_tags / sizeof container_tags[0]; k++) {
        if (str(container, container_tags[k][0]) == NULL)
            continue;
        char value[512] = "";
        append_text(value, 200, str(container, container_tags[k][0])); /* a tag's value: at most 200 characters */
        json_object_set_new(tags, container_tags[k][1], json_string(value));
    }
    return tags;
}

json_t *hw_sentry_event_from_report(const json_t *report, const char *server_name, const char **why)
{
    const json_t *head = json_object_get(report, "report");
    const json_t *apm = json_object_get(report, "hangwatch");
    const json_t *threads = json_object_get(json_object_get(report, "crash"), "threads");
    const json_t *images = json_object_get(report, "binary_images");
    char event_id[33];
    if (!json_is_object(head) || !json_is_object(apm) || !json_is_array(threads)) {
        *why = "not a hangwatch report";
        return NULL;
    }
    if (!event_id_of(str(head, "id"), event_id)) {
        *why = "the report has no id of 32 hex digits";
        return NULL;
    }
    if (!json_is_array(images))
        images = NULL;
    const char *process = str(head, "process_name") ? str(head, "process_name") : "?";
    json_int_t pid = num(head, "pid");
    const char *executable = str(apm, "executable");
    json_int_t hung_tid = num(json_object_get(apm, "hung_thread"), "thread_identifier");
    char message[512];
    const json_t *label = titled_message(apm, threads, process, pid, message, sizeof message);

    json_t *ev = json_object();
    json_object_set_new(ev, "event_id", json_string(event_id));
    json_int_t ms = num(apm, "detected_at_unix_ms");
    if (ms >= 0)
        json_object_set_new(ev, "timestamp", json_real((double)ms / 1000.0));
    json_object_set_new(ev, "platform", json_string("native"));
    json_object_set_new(ev, "level", json_string("error"));
    json_object_set_new(ev, "logger", json_string("hangwatch"));
    if (server_name && *server_name)
        json_object_set_new(ev, "server_name", json_string(server_name));
    json_object_set_new(ev, "message", json_pack("{s:s}", "formatted", message));
    if (label != NULL) {
        char culprit[512] = "";
        append_text(culprit, 200, str(label, "symbol_name")); /* Sentry keeps 200 characters */
        json_object_set_new(ev, "culprit", json_string(culprit));
    }
    json_object_set_new(ev, "sdk", json_pack("{s:s, s:s}", "name", "hangwatch", "version", HW_VERSION_STRING));

    /* Every thread; the hung one's stack is the exception's. */
    json_t *thread_list = json_array();
    json_t *hung_stack = NULL;
    size_t i;
    const json_t *t;
    json_array_foreach(threads, i, t)
    {
        json_int_t tid = num(t, "thread_identifier");
        if (tid < 0)
            continue;
        bool hung = tid == hung_tid;
        json_t *o = json_pack("{s:I, s:b, s:b, s:b}", "id", tid, "crashed", hung, "current", hung, "main", tid == pid);
        if (str(t, "name"))
            json_object_set_new(o, "name", json_string(str(t, "name")));
        json_t *st = stacktrace_of(t, images, executable);
        if (hung && !hung_stack)
            hung_stack = json_incref(st);
        json_object_set_new(o, "stacktrace", st);
        json_array_append_new(thread_list, o);
    }
    json_t *exception = json_pack("{s:s, s:s, s:{s:s, s:b}}", "type", "AppHang", "value", message, "mechanism",
                                  "type", "AppHang", "handled", 1);
    if (hung_tid >= 0)
        json_object_set_new(exception, "thread_id", json_integer(hung_tid));
    if (hung_stack) {
        /* Taken while the program ran on, not at a crash (as Sentry's SDKs
         * mark their app hangs' stacks). */
        json_t *st = json_deep_copy(hung_stack);
        json_decref(hung_stack);
        json_object_set_new(st, "snapshot", json_true());
        json_object_set_new(exception, "stacktrace", st);
    }
    json_object_set_new(ev, "exception", json_pack("{s:[o]}", "values", exception));
    json_object_set_new(ev, "threads", json_pack("{s:o}", "values", thread_list));
    if (images)
        json_object_set_new(ev, "debug_meta", json_pack("{s:o}", "images", debug_images(images)));

    json_t *tags = tags_of(apm, process, label);
    const char *key = str(apm, "grouping_key");
    json_object_set_new(ev, "tags", tags);
    if (key)
        json_object_set_new(ev, "fingerprint", json_pack("[s, s]", "hangwatch", key));

    json_t *ctx = json_object();
    static const char *const numbers[] = {"block_duration_us", "final_duration_us", "final_duration_precision_us",
                                          "runloop_threshold_us", "stretch_report_index"};
    for (size_t k = 0; k < sizeof numbers / sizeof numbers[0]; k++)
        if (num(apm, numbers[k]) >= 0)
            json_object_set_new(ctx, numbers[k], json_integer(num(apm, numbers[k])));
    if (str(apm, "hang_end"))
        json_object_set_new(ctx, "hang_end", json_string(str(apm, "hang_end")));
    if (str(apm, "check_mode"))
        json_object_set_new(ctx, "check_mode", json_string(str(apm, "check_mode")));
    const json_t *time = json_object_get(apm, "time");
    static const char *const time_numbers[] = {"window_us", "on_cpu_us", "runqueue_wait_us", "blocked_us",
                                               "stopped_us", "throttled_us"};
    for (size_t k = 0; k < sizeof time_numbers / sizeof time_numbers[0]; k++)
        if (num(time, time_numbers[k]) >= 0)
            json_object_set_new(ctx, time_numbers[k], json_integer(num(time, time_numbers[k])));
    if (pid >= 0)
        json_object_set_new(ctx, "pid", json_integer(pid));
    if (executable)
        json_object_set_new(ctx, "executable", json_string(executable));
    json_object_set_new(ctx, "type", json_string("hangwatch"));
    json_object_set_new(ev, "contexts", json_pack("{s:o, s:{s:s}}", "hangwatch", ctx, "os", "name", "Linux"));

    /* Under Sentry's size limit: other threads' stacks go first. */
    for (size_t k = json_array_size(thread_list); k-- > 0;) {
        char *text = json_dumps(ev, JSON_COMPACT);
        size_t n = text ? strlen(text) : 0;
        free(text);
        if (n <= HW_SENTRY_EVENT_MAX)
            break;
        json_t *th = json_array_get(thread_list, k);
        if (!json_is_true(json_object_get(th, "crashed")))
            json_object_del(th, "stacktrace");
    }
    return ev;
}

char *hw_sentry_envelope_from_report(const json_t *report, const char *dsn, const char *server_name,
                                     char event_id[33], size_t *len, const char **why)
{
    json_t *ev = hw_sentry_event_from_report(report, server_name, why);
    if (!ev)
        return NULL;
    char *payload = json_dumps(ev, JSON_COMPACT);
    snprintf(event_id, 33, "%s", str(ev, "event_id"));
    json_decref(ev);
    json_t *header = json_pack("{s:s}", "event_id", event_id);
    if (dsn)
        json_object_set_new(header, "dsn", json_string(dsn));
    char *head = json_dumps(header, JSON_COMPACT);
    json_decref(header);
    char *envelope = NULL;
    if (payload && head) {
        size_t payload_len = strlen(payload);
        if (asprintf(&envelope, "%s\n{\"type\":\"event\",\"length\":%zu,\"content_type\":\"application/json\"}\n%s\n",
                     head, payload_len, payload) < 0)
            envelope = NULL;
    }
    free(payload);
    free(head);
    if (!envelope) {
        *why = "out of memory";
        return NULL;
    }
    *len = strlen(envelope);
    return envelope;
}

/* The header line of an envelope, parsed. */
static json_t *envelope_header(const char *text, size_t len, size_t *header_len)
{
    const char *nl = memchr(text, '\n', len);
    *header_len = nl ? (size_t)(nl - text) : len;
    json_t *h = json_loadb(text, *header_len, 0, NULL);
    if (!json_is_object(h)) {
        json_decref(h);
        return NULL;
    }
    return h;
}

char *hw_sentry_envelope_dsn(const char *text, size_t len)
{
    size_t header_len;
    json_t *h = envelope_header(text, len, &header_len);
    const char *dsn = str(h, "dsn");
    char *copy = dsn ? strdup(dsn) : NULL;
    json_decref(h);
    return copy;
}

char *hw_sentry_envelope_with_dsn(const char *text, size_t len, const char *dsn, size_t *out_len)
{
    size_t header_len;
    json_t *h = envelope_header(text, len, &header_len);
    if (!h)
        return NULL;
    json_object_set_new(h, "dsn", json_string(dsn));
    char *head = json_dumps(h, JSON_COMPACT);
    json_decref(h);
    if (!head)
        return NULL;
    size_t head_len = strlen(head), rest = len - header_len;
    char *out = malloc(head_len + rest + 1);
    if (out) {
        memcpy(out, head, head_len);
        memcpy(out + head_len, text + header_len, rest);
        out[head_len + rest] = '\0';
        *out_len = head_len + rest;
    }
    free(head);
    return out;
}
