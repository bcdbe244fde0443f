/*
 * test_show.c - `hangwatch show` on text it cannot trust (hw_show_text).
 * A report whose strings carry terminal control bytes is printed with every
 * one of them escaped; thousands of mutations of a real report (bytes
 * flipped, cut short, numbers at their limits) and plain garbage neither
 * crash it nor let a control byte through; text over the size cap is
 * refused without being read.  A snapshot (`hangwatch stack`) is printed as
 * the stack of a process, with every thread's whole stack when asked
 * (hw_show_json, HW_SHOW_EVERY_STACK), as safely.  Run under ASan+UBSan too.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <fcntl.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/show.h"

#define MUTATIONS 20000

static const char report_text[] =
    "{\"report\": {\"id\": \"0C5E\\u001b[2J\", \"timestamp\": 1, \"type\": \"standard\","
    " \"process_name\": \"demo\\u001b]0;x\\u0007\", \"pid\": 4242},"
    " \"crash\": {\"threads\": ["
    "  {\"index\": 0, \"name\": \"main\\r\", \"thread_identifier\": 4242, \"crashed\": true,"
    "   \"backtrace\": {\"skipped\": 0, \"contents\": ["
    "     {\"instruction_addr\": 140245160404250, \"symbol_name\": \"clock_nanosleep\\u009b\","
    "      \"object_name\": \"libc.so.6\", \"object_offset\": 853274, \"source_file\": \"a.c\\n\", \"source_line\": 4},"
    "     {\"instruction_addr\": 93870450250051, \"object_name\": \"demo\", \"object_offset\": 4419}]},"
    "   \"unwind_error\": \"stop\\u001b\"},"
    "  {\"index\": 1, \"name\": \"worker\", \"thread_identifier\": 4243,"
    "   \"backtrace\": {\"contents\": [{\"instruction_addr\": 1, \"symbol_name\": \"w\\u0001\"}]}}]},"
    " \"binary_images\": [],"
    " \"hangwatch\": {\"module\": \"hang\", \"detector\": \"runloop\", \"check_mode\": \"exact\","
    "  \"hang_type\": \"launch_hang\", \"block_duration_us\": 2004108, \"runloop_threshold_us\": 2000000,"
    "  \"hung_thread\": {\"thread_identifier\": 4242, \"report_array_index\": 0},"
    "  \"capture\": {\"method\": \"ptrace\", \"stopped_us\": 160, \"process_exited\": false,"
    "   \"tracer_pid\": 1234, \"tracer_name\": \"strace\\u001b\"},"
    "  \"grouping_key\": \"00ff\\u001b\", \"final_duration_us\": 4000000, \"hang_end\": \"returned\\u0000x\","
    "  \"collection\": {\"scene_threads\": {\"enumerated_thread_count\": 2, \"items\": ["
    "    {\"thread_identifier\": 4242, \"name\": \"main\", \"is_hung_thread\": true, \"status\": \"captured\","
    "     \"frame_count\": 2, \"report_array_index\": 0},"
    "    {\"thread_identifier\": 4243, \"name\": \"worker\\u001b\", \"is_hung_thread\": false,"
    "     \"status\": \"denied\\u001b\", \"error\": \"Operation not permitted\\u0007\", \"frame_count\": 1,"
    "     \"report_array_index\": 1}]},"
    "   \"main_thread\": {\"state\": \"collected\", \"sample_count\": 9223372036854775807,"
    "    \"point_stack_index\": 9223372036854775807, \"top_repeat_count\": -9223372036854775808,"
    "    \"backtrace\": {\"contents\": [{\"instruction_addr\": -1, \"repeat_count\": 3,"
    "      \"symbol_name\": \"spin\\u001b\"}]}}}}}";

/* Run hw_show_text on `len` bytes; what it printed (malloc'd) and its result.
 * stderr goes to /dev/null meanwhile: most mutations are not reports. */
static char *show(const char *text, size_t len, int *rc)
{
    char *printed = NULL;
    size_t printed_len = 0;
    FILE *out = open_memstream(&printed, &printed_len);
    assert_non_null(out);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    int null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
    assert_true(saved >= 0 && null_fd >= 0);
    dup2(null_fd, STDERR_FILENO);
    *rc = hw_show_text("mutant.json", text, len, out);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    close(null_fd);
    fclose(out);
    return printed;
}

/* The same through hw_show_json (no label) with `flags`, for text that
 * parses as JSON; NULL and *rc 1 otherwise. */
static char *show_json(const char *text, size_t len, unsigned flags, int *rc)
{
    json_t *root = json_loadb(text, len, JSON_ALLOW_NUL, NULL);
    *rc = 1;
    if (root == NULL)
        return NULL;
    char *printed = NULL;
    size_t printed_len = 0;
    FILE *out = open_memstream(&printed, &printed_len);
    assert_non_null(out);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    int null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
    assert_true(saved >= 0 && null_fd >= 0);
    dup2(null_fd, STDERR_FILENO);
    *rc = hw_show_json(NULL, root, flags, out);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    close(null_fd);
    fclose(out);
    json_decref(root);
    return printed;
}

/* report_text as a snapshot: hang_type "snapshot", no detector. */
static char *snapshot_text(void)
{
    const char *at = strstr(report_text, "\"launch_hang\"");
    assert_non_null(at);
    char *text = NULL;
    assert_true(asprintf(&text, "%.*s\"snapshot\"%s", (int)(at - report_text), report_text,
                         at + strlen("\"launch_hang\"")) > 0);
    return text;
}

static void assert_printable(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p != '\n' && (*p < 0x20 || *p >= 0x7f))
            fail_msg("byte 0x%02x reached the output at %zu:\n%s", *p, (size_t)(p - (const unsigned char *)s), s);
}

static void test_strings_are_escaped(void **state)
{
    (void)state;
    int rc;
    char *printed = show(report_text, sizeof report_text - 1, &rc);
    assert_int_equal(rc, 0);
    assert_printable(printed);
    assert_non_null(strstr(printed, "launch hang in demo\\x1b]0;x\\x07 (pid 4242)"));
    assert_non_null(strstr(printed, "report id 0C5E\\x1b[2J"));
    assert_non_null(strstr(printed, "group 00ff\\x1b;"));
    assert_non_null(strstr(printed, "not captured: traced by pid 1234 (strace\\x1b)"));
    assert_non_null(strstr(printed, "hung thread 4242 (main\\r), 2 frames:"));
    assert_non_null(strstr(printed, "clock_nanosleep\\xc2\\x9b  at a.c\\n:4  (libc.so.6)"));
    assert_non_null(strstr(printed, "demo+0x1143  (demo)"));
    assert_non_null(strstr(printed, "(unwinding stopped early: stop\\x1b)"));
    assert_non_null(strstr(printed, "(returned\\x00x)"));
    assert_non_null(strstr(printed, "4243 (worker\\x1b) denied\\x1b, 1 frames (Operation not permitted\\x07), in w\\x01"));
    assert_non_null(strstr(printed, "spin\\x1b"));
    free(printed);
}

static void test_snapshot_every_stack(void **state)
{
    (void)state;
    char *text = snapshot_text();
    int rc;
    /* show: "stack of", no busy line, the other threads one line each */
    char *printed = show(text, strlen(text), &rc);
    assert_int_equal(rc, 0);
    assert_printable(printed);
    assert_non_null(strstr(printed, "mutant.json: stack of demo\\x1b]0;x\\x07 (pid 4242)\n"));
    assert_null(strstr(printed, "busy"));
    assert_null(strstr(printed, "hang in"));
    assert_non_null(strstr(printed, "\nthread 4242 (main\\r), 2 frames:\n"));
    assert_non_null(strstr(printed, "other threads:\n  4243 (worker\\x1b) denied\\x1b, 1 frames"));
    free(printed);
    /* stack: no label, every thread whole, each one's status */
    printed = show_json(text, strlen(text), HW_SHOW_EVERY_STACK, &rc);
    assert_int_equal(rc, 0);
    assert_printable(printed);
    assert_memory_equal(printed, "stack of demo\\x1b]0;x\\x07 (pid 4242)\n", 37);
    assert_non_null(strstr(printed, "\nthread 4242 (main\\r), 2 frames:\n"));
    assert_non_null(strstr(printed, "\nthread 4243 (worker), not captured: denied\\x1b (Operation not permitted\\x07)\n"));
    assert_null(strstr(printed, "other threads:"));
    free(printed);
    free(text);
    /* not a report: said, nothing printed */
    printed = show_json("[1]", 3, HW_SHOW_EVERY_STACK, &rc);
    assert_int_equal(rc, 1);
    assert_string_equal(printed, "");
    free(printed);
}

static uint64_t next_random(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void test_mutations_never_crash(void **state)
{
    (void)state;
    static const char *const inserts[] = {"{", "}", "[", "]", "\"", ",", ":", "0", "-1", "1e999",
                                          "99999999999999999999", "null", "true", "\\u0000", "\\u001b", "\\ud800",
                                          "\x1b", "\xff", "\xc3\x28", "\"report_array_index\": -5"};
    const size_t base_len = sizeof report_text - 1;
    char *buf = malloc(base_len + 64);
    assert_non_null(buf);
    char *snapshot = snapshot_text();
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    size_t shown = 0;
    for (int i = 0; i < MUTATIONS; i++) {
        /* every other one a snapshot, printed whole as `stack` prints it */
        bool as_snapshot = i % 2 == 1;
        const char *base = as_snapshot ? snapshot : report_text;
        size_t len = as_snapshot ? strlen(snapshot) : base_len;
        memcpy(buf, base, len);
        int edits = 1 + (int)(next_random(&seed) % 4);
        for (int e = 0; e < edits; e++) {
            size_t at = (size_t)(next_random(&seed) % len);
            switch (next_random(&seed) % 4) {
            case 0: /* flip a byte */
                buf[at] = (char)next_random(&seed);
                break;
            case 1: /* cut short */
                len = at;
                break;
            case 2: { /* replace a stretch with a token */
                const char *ins = inserts[next_random(&seed) % (sizeof inserts / sizeof inserts[0])];
                size_t n = strlen(ins);
                if (at + n <= len)
                    memcpy(buf + at, ins, n);
                break;
            }
            default: /* delete a byte */
                if (len > 0) {
                    memmove(buf + at, buf + at + 1, len - at - 1);
                    len--;
                }
                break;
            }
            if (len == 0)
                break;
        }
        int rc;
        char *printed = show(buf, len, &rc);
        assert_true(rc == 0 || rc == 1);
        shown += rc == 0;
        assert_printable(printed);
        free(printed);
        if (as_snapshot) {
            printed = show_json(buf, len, HW_SHOW_EVERY_STACK, &rc);
            assert_true(rc == 0 || rc == 1);
            if (printed != NULL)
                assert_printable(printed);
            free(printed);
        }
    }
    free(snapshot);
    printf("%zu of %d mutations were still shown as reports\n", shown, MUTATIONS);
    assert_true(shown > 0); /* the mutations did reach the printing code */

    /* Plain garbage, and an empty or absent text. */
    for (int i = 0; i < 200; i++) {
        size_t len = (size_t)(next_random(&seed) % 64);
        for (size_t k = 0; k < len; k++)
            buf[k] = (char)next_random(&seed);
        int rc;
        free(show(buf, len, &rc));
        assert_int_equal(rc, 1);
    }
    int rc;
    free(show("", 0, &rc));
    assert_int_equal(rc, 1);
    free(show(NULL, 0, &rc));
    assert_int_equal(rc, 1);
    free(buf);
}

static void test_over_the_cap_is_not_read(void **state)
{
    (void)state;
    static const char small[] = "{}";
    int rc;
    /* The length alone decides: the bytes past `small` are never touched
     * (ASan would object). */
    char *printed = show(small, (size_t)HW_SHOW_MAX_BYTES + 1, &rc);
    assert_int_equal(rc, 1);
    assert_string_equal(printed, "");
    free(printed);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strings_are_escaped),
        cmocka_unit_test(test_snapshot_every_stack),
        cmocka_unit_test(test_mutations_never_crash),
        cmocka_unit_test(test_over_the_cap_is_not_read),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
