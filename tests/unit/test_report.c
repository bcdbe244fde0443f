/*
 * test_report.c - the report model and its writer: the hung thread comes
 * first and report_array_index finds it, unknown fields are left out, the
 * file appears atomically with private permissions, the final duration is
 * added to a written report in place (the directory's own checks are in
 * test_report_dir.c), and a tracer that held the process is named.  If
 * HW_TEST_REPORT_OUT names a directory, the reports are also written there
 * for the schema check that follows this test.
 */
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/common/random_id.h"
#include "agent/report/report_model.h"

/* How a hang ended, for hw_report_set_final and hw_report_add_final_duration. */
#define END(final, precision, how, status)                                                                             \
    (&(const hw_hang_end){.final_ns = (final), .precision_ns = (precision), .end = (how), .wait_status = (status)})

static hw_frame make_frame(uint64_t pc, const char *sym, const char *obj, const char *file, int line)
{
    hw_frame f = {0};
    f.instruction_addr = pc;
    f.symbol_name = sym ? strdup(sym) : NULL;
    f.symbol_addr = sym ? pc - 0x10 : 0;
    f.object_path = obj ? strdup(obj) : NULL;
    f.object_addr = obj ? 0x400000 : 0;
    f.object_offset = obj ? pc - 0x400000 : 0;
    f.source_file = file ? strdup(file) : NULL;
    f.source_line = line;
    return f;
}

typedef struct fixture {
    hw_process_snapshot snap;
    hw_backtrace bts[2];
    hw_image images[1];
    hw_hang_info info;
} fixture;

static void make_fixture(fixture *fx)
{
    memset(fx, 0, sizeof *fx);
    hw_process_snapshot *s = &fx->snap;
    s->pid = 4242;
    strcpy(s->process_name, "demo");
    s->thread_count = 2;
    s->enumerated_thread_count = 2;
    s->stop_wall_ns = 85000;
    s->threads = calloc(2, sizeof *s->threads);
    s->threads[0] = (hw_thread_snapshot){.tid = 4243, .status = HW_THREAD_CAPTURED, .stopped_ns = 40000};
    strcpy(s->threads[0].name, "worker");
    s->threads[1] = (hw_thread_snapshot){.tid = 4242, .is_main = true, .is_target = true, .status = HW_THREAD_CAPTURED,
                                         .stopped_ns = 60000};
    strcpy(s->threads[1].name, "demo");

    fx->bts[0].count = 1;
    fx->bts[0].frames = calloc(1, sizeof(hw_frame));
    fx->bts[0].frames[0] = make_frame(0x7f0000001000, NULL, NULL, NULL, 0); /* nothing known */
    fx->bts[1].count = 3;
    fx->bts[1].frames = calloc(3, sizeof(hw_frame));
    fx->bts[1].frames[0] = make_frame(0x7f0000002000, "clock_nanosleep", "/usr/lib/libc.so.6", NULL, 0);
    fx->bts[1].frames[1] = make_frame(0x401234, "block_main_thread_for_four_seconds", "/opt/demo", "demo.c", 42);
    fx->bts[1].frames[2] = make_frame(0x405678, NULL, "/opt/demo", NULL, 0);
    hw_in_app_context in_app = {.executable = "/opt/demo"}; /* as the worker classifies them */
    hw_backtrace_classify(&fx->bts[0], &in_app);
    hw_backtrace_classify(&fx->bts[1], &in_app);

    fx->images[0] = (hw_image){.path = "/opt/demo", .start = 0x400000, .end = 0x410000, .bias = 0,
                               .build_id = "0123456789abcdef0123456789abcdef01234567"};
    fx->info = (hw_hang_info){.detector = "runloop", .check_mode = "exact", .hang_type = "hang", .hung_tid = 4242,
                              .block_duration_ns = 2004000000ull, .threshold_ns = 2000000000ull,
                              .detected_unix_ns = 1792729529123456789ll, .main_thread_state = "not_requested",
                              .main_thread_reason = "disabled"};
}

static void free_fixture(fixture *fx)
{
    for (int i = 0; i < 2; i++)
        hw_backtrace_free(&fx->bts[i]);
    free(fx->snap.threads);
}

static void test_hung_thread_comes_first(void **state)
{
    (void)state;
    fixture fx;
    make_fixture(&fx);
    char id[37];
    json_t *r = hw_report_build(&fx.info, &fx.snap, fx.bts, fx.images, 1, id);
    assert_non_null(r);
    assert_int_equal(strlen(id), 36);
    assert_string_equal(json_string_value(json_object_get(json_object_get(r, "report"), "id")), id);

    json_t *threads = json_object_get(json_object_get(r, "crash"), "threads");
    assert_int_equal(json_array_size(threads), 2);
    json_t *first = json_array_get(threads, 0);
    assert_int_equal(json_integer_value(json_object_get(first, "thread_identifier")), 4242);
    assert_true(json_is_true(json_object_get(first, "crashed")));

    json_t *apm = json_object_get(r, "hangwatch");
    assert_string_equal(json_string_value(json_object_get(apm, "module")), "hang");
    assert_int_equal(json_integer_value(json_object_get(apm, "block_duration_us")), 2004000);
    assert_int_equal(json_integer_value(json_object_get(apm, "runloop_threshold_us")), 2000000);
    json_t *hung = json_object_get(apm, "hung_thread");
    assert_int_equal(json_integer_value(json_object_get(hung, "report_array_index")), 0);
    /* the culprit: the program's own frame, not the C library's sleep */
    assert_int_equal(json_integer_value(json_object_get(hung, "culprit_frame")), 1);
    json_t *frames = json_object_get(json_object_get(first, "backtrace"), "contents");
    assert_true(json_is_false(json_object_get(json_array_get(frames, 0), "in_app")));
    assert_string_equal(json_string_value(json_object_get(json_array_get(frames, 0), "origin")), "system");
    assert_true(json_is_true(json_object_get(json_array_get(frames, 1), "in_app")));
    assert_string_equal(json_string_value(json_object_get(json_array_get(frames, 1), "origin")), "app");

    json_t *scene = json_object_get(json_object_get(apm, "collection"), "scene_threads");
    assert_int_equal(json_integer_value(json_object_get(scene, "enumerated_thread_count")), 2);
    json_t *items = json_object_get(scene, "items");
    for (size_t i = 0; i < json_array_size(items); i++) {
        json_t *item = json_array_get(items, i);
        json_int_t idx = json_integer_value(json_object_get(item, "report_array_index"));
        json_t *t = json_array_get(threads, (size_t)idx);
        assert_int_equal(json_integer_value(json_object_get(item, "thread_identifier")),
                         json_integer_value(json_object_get(t, "thread_identifier")));
        json_int_t frames = json_integer_value(json_object_get(item, "frame_count"));
        assert_int_equal((size_t)frames, json_array_size(json_object_get(json_object_get(t, "backtrace"), "contents")));
        if (json_is_true(json_object_get(item, "is_main_thread")))
            assert_int_equal(idx, 0);
    }
    json_t *main_state = json_object_get(json_object_get(apm, "collection"), "main_thread");
    assert_string_equal(json_string_value(json_object_get(main_state, "reason")), "disabled");
    json_decref(r);
    free_fixture(&fx);
}

static void test_unknown_fields_are_left_out(void **state)
{
    (void)state;
    fixture fx;
    make_fixture(&fx);
    char id[37];
    json_t *r = hw_report_build(&fx.info, &fx.snap, fx.bts, fx.images, 1, id);
    json_t *threads = json_object_get(json_object_get(r, "crash"), "threads");
    json_t *main_frames = json_object_get(json_object_get(json_array_get(threads, 0), "backtrace"), "contents");
    json_t *f1 = json_array_get(main_frames, 1);
    assert_string_equal(json_string_value(json_object_get(f1, "symbol_name")), "block_main_thread_for_four_seconds");
    assert_string_equal(json_string_value(json_object_get(f1, "source_file")), "demo.c");
    assert_int_equal(json_integer_value(json_object_get(f1, "source_line")), 42);
    assert_string_equal(json_string_value(json_object_get(f1, "object_name")), "demo");
    json_t *f2 = json_array_get(main_frames, 2);
    assert_null(json_object_get(f2, "symbol_name"));
    assert_null(json_object_get(f2, "source_file"));
    assert_int_equal(json_integer_value(json_object_get(f2, "object_offset")), 0x5678);
    json_t *bare = json_array_get(json_object_get(json_object_get(json_array_get(threads, 1), "backtrace"), "contents"), 0);
    assert_int_equal(json_object_size(bare), 3); /* only instruction_addr, and whose code: unknown */
    assert_true(json_is_false(json_object_get(bare, "in_app")));
    assert_string_equal(json_string_value(json_object_get(bare, "origin")), "unknown");
    json_t *image = json_array_get(json_object_get(r, "binary_images"), 0);
    assert_string_equal(json_string_value(json_object_get(image, "build_id")), "0123456789abcdef0123456789abcdef01234567");
    json_decref(r);
    free_fixture(&fx);
}

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            n++;
    closedir(d);
    return n;
}

static void remove_tree(const char *path)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    assert_int_equal(system(cmd), 0);
}

static hw_report_dir *open_dir_or_fail(const char *path)
{
    hw_report_dir *d = NULL;
    char why[256] = "";
    int rc = hw_report_dir_open(path, &d, why, sizeof why);
    if (rc != 0)
        fail_msg("hw_report_dir_open(%s): %d %s", path, rc, why);
    return d;
}

static void test_written_atomically_and_privately(void **state)
{
    (void)state;
    char base[] = "/tmp/hw-report-test-XXXXXX";
    assert_non_null(mkdtemp(base));
    char dir[256];
    snprintf(dir, sizeof dir, "%s/nested/reports", base);

    fixture fx;
    make_fixture(&fx);
    char id[37];
    json_t *r = hw_report_build(&fx.info, &fx.snap, fx.bts, fx.images, 1, id);
    mode_t old = umask(0);
    hw_report_dir *d = open_dir_or_fail(dir);
    int rc = hw_report_write(d, "hang-1.json", r);
    umask(old);
    assert_int_equal(rc, 0);

    char path[300];
    snprintf(path, sizeof path, "%s/hang-1.json", dir);
    struct stat st;
    assert_int_equal(stat(dir, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(count_entries(dir), 1); /* no temporary file left */

    json_error_t err;
    json_t *back = json_load_file(path, 0, &err);
    assert_non_null(back);
    assert_true(json_equal(back, r));
    json_decref(back);

    /* Same name again: the report is replaced whole, never half-written. */
    assert_int_equal(hw_report_write(d, "hang-1.json", r), 0);
    assert_int_equal(count_entries(dir), 1);

    const char *out = getenv("HW_TEST_REPORT_OUT");
    if (out && *out) {
        hw_report_dir *out_dir = open_dir_or_fail(out);
        assert_int_equal(hw_report_write(out_dir, "unit-report.json", r), 0);
        hw_report_dir_close(out_dir);
    }
    hw_report_dir_close(d);
    json_decref(r);
    free_fixture(&fx);
    remove_tree(base);
}

static void test_final_duration_is_added_in_place(void **state)
{
    (void)state;
    char base[] = "/tmp/hw-report-test-XXXXXX";
    assert_non_null(mkdtemp(base));
    fixture fx;
    make_fixture(&fx);
    char id[37];
    json_t *r = hw_report_build(&fx.info, &fx.snap, fx.bts, fx.images, 1, id);
    hw_report_dir *d = open_dir_or_fail(base);
    assert_int_equal(hw_report_write(d, "hang-2.json", r), 0);
    assert_int_equal(hw_report_add_final_duration(d, "hang-2.json", END(4500000000ull, 250000000ull, "returned_to_wait", -1)),
                     0);

    char path[300];
    snprintf(path, sizeof path, "%s/hang-2.json", base);
    json_error_t err;
    json_t *back = json_load_file(path, 0, &err);
    assert_non_null(back);
    json_t *apm = json_object_get(back, "hangwatch");
    assert_int_equal(json_integer_value(json_object_get(apm, "final_duration_us")), 4500000);
    assert_int_equal(json_integer_value(json_object_get(apm, "final_duration_precision_us")), 250000);
    assert_string_equal(json_string_value(json_object_get(apm, "hang_end")), "returned_to_wait");
    /* Everything else is as written. */
    assert_string_equal(json_string_value(json_object_get(json_object_get(back, "report"), "id")), id);
    assert_int_equal(count_entries(base), 1);
    json_decref(back);

    /* A report that is missing or not JSON is an error, not a crash. */
    assert_int_equal(hw_report_add_final_duration(d, "hang-missing.json", END(1, 1, "returned_to_wait", -1)), -ENOENT);
    assert_int_equal(hw_report_dir_write(d, "hang-3.json", "{\"report\": ", 11), 0);
    assert_int_equal(hw_report_add_final_duration(d, "hang-3.json", END(1, 1, "returned_to_wait", -1)), -EINVAL);

    hw_report_dir_close(d);
    json_decref(r);
    free_fixture(&fx);
    remove_tree(base);
}

/* A fatal hang: the process's death is in the report, by signal name or
 * exit status, and no process_end without one. */
static void test_fatal_hang_end_names_the_death(void **state)
{
    (void)state;
    fixture fx;
    make_fixture(&fx);
    char id[37];
    json_t *r = hw_report_build(&fx.info, &fx.snap, fx.bts, fx.images, 1, id);
    assert_int_equal(hw_report_set_final(r, END(3000000000ull, 10000000ull, "killed", 9 /* SIGKILL */)), 0);
    json_t *apm = json_object_get(r, "hangwatch");
    assert_string_equal(json_string_value(json_object_get(apm, "hang_end")), "killed");
    json_t *pe = json_object_get(apm, "process_end");
    assert_int_equal(json_integer_value(json_object_get(pe, "signal")), 9);
    assert_string_equal(json_string_value(json_object_get(pe, "signal_name")), "SIGKILL");
    assert_true(json_is_false(json_object_get(pe, "core_dumped")));
    assert_null(json_object_get(pe, "exit_status"));

    assert_int_equal(hw_report_set_final(r, END(1, 1, "exited", 3 << 8 /* exit(3) */)), 0);
    pe = json_object_get(apm, "process_end");
    assert_int_equal(json_integer_value(json_object_get(pe, "exit_status")), 3);
    assert_null(json_object_get(pe, "signal"));
    json_decref(r);

    r = hw_report_build(&fx.info, &fx.snap, fx.bts, fx.images, 1, id);
    assert_int_equal(hw_report_set_final(r, END(1, 1, "returned_to_wait", -1)), 0);
    assert_null(json_object_get(json_object_get(r, "hangwatch"), "process_end"));
    assert_int_equal(hw_report_set_final(json_object_get(r, "report"), END(1, 1, "killed", 9)), -EINVAL);
    json_decref(r);

    char name[32];
    assert_string_equal(hw_signal_name(6, name, sizeof name), "SIGABRT");
    assert_string_equal(hw_signal_name(40, name, sizeof name), "SIG40");
    assert_string_equal(hw_signal_name(-1, name, sizeof name), "SIG-1");
    free_fixture(&fx);
}

/* A capture refused because another tracer held the process names it in
 * hangwatch.capture; without one, neither field is there.  Also written to
 * HW_TEST_REPORT_OUT for the schema check. */
static void test_tracer_is_named(void **state)
{
    (void)state;
    fixture fx;
    make_fixture(&fx);
    char id[37];
    json_t *r = hw_report_build(&fx.info, &fx.snap, fx.bts, fx.images, 1, id);
    json_t *capture = json_object_get(json_object_get(r, "hangwatch"), "capture");
    assert_null(json_object_get(capture, "tracer_pid"));
    assert_null(json_object_get(capture, "tracer_name"));
    json_decref(r);

    fx.snap.threads[1].status = HW_THREAD_DENIED;
    fx.snap.threads[1].error = EPERM;
    fx.snap.tracer_pid = 1234;
    strcpy(fx.snap.tracer_name, "strace");
    r = hw_report_build(&fx.info, &fx.snap, fx.bts, fx.images, 1, id);
    capture = json_object_get(json_object_get(r, "hangwatch"), "capture");
    assert_int_equal(json_integer_value(json_object_get(capture, "tracer_pid")), 1234);
    assert_string_equal(json_string_value(json_object_get(capture, "tracer_name")), "strace");
    const char *out = getenv("HW_TEST_REPORT_OUT");
    if (out && *out) {
        hw_report_dir *out_dir = open_dir_or_fail(out);
        assert_int_equal(hw_report_write(out_dir, "unit-report-traced.json", r), 0);
        hw_report_dir_close(out_dir);
    }
    json_decref(r);

    /* A comm that is not UTF-8 cannot be a JSON string as it is. */
    strcpy(fx.snap.tracer_name, "gdb\xff");
    r = hw_report_build(&fx.info, &fx.snap, fx.bts, fx.images, 1, id);
    capture = json_object_get(json_object_get(r, "hangwatch"), "capture");
    assert_string_equal(json_string_value(json_object_get(capture, "tracer_name")), "gdb\\xff");
    json_decref(r);
    free_fixture(&fx);
}

static void test_uuids_are_v4_and_distinct(void **state)
{
    (void)state;
    char a[37], b[37];
    hw_new_uuid(a);
    hw_new_uuid(b);
    assert_int_equal(strlen(a), 36);
    assert_int_equal(a[14], '4');
    assert_non_null(strchr("89AB", a[19]));
    assert_string_not_equal(a, b);
}

/* Names from the watched process that are not UTF-8 (prctl allows any
 * bytes) are written escaped: the report is never lost over them. */
static void test_names_that_are_not_utf8_are_escaped(void **state)
{
    (void)state;
    fixture fx;
    make_fixture(&fx);
    strcpy(fx.snap.process_name, "demo\xfe");
    strcpy(fx.snap.threads[0].name, "work\xff\x1b");
    char id[37];
    json_t *r = hw_report_build(&fx.info, &fx.snap, fx.bts, fx.images, 1, id);
    assert_non_null(r);
    assert_string_equal(json_string_value(json_object_get(json_object_get(r, "report"), "process_name")),
                        "demo\\xfe");
    json_t *threads = json_object_get(json_object_get(r, "crash"), "threads");
    assert_string_equal(json_string_value(json_object_get(json_array_get(threads, 1), "name")), "work\\xff\\x1b");
    json_decref(r);
    free_fixture(&fx);
}

/* The grouping key of a stack of the program `executable`, its frames
 * classified as the worker classifies them. */
static void grouping_key_of(hw_backtrace *bt, const char *executable, char key[17])
{
    hw_in_app_context ctx = {.executable = executable};
    hw_backtrace_classify(bt, &ctx);
    hw_grouping_key(bt, key);
}

static hw_frame python_frame(const char *function, const char *file, int line)
{
    hw_frame f = make_frame(0x7f0000001000u + (uint64_t)line, function, NULL, file, line);
    f.symbol_addr = 0;
    f.language = HW_LANG_PYTHON;
    return f;
}

/* With Python frames, the grouping key is theirs alone: the interpreter's
 * native frames, their addresses and the install path do not split a
 * group; another function does.  Frames are written with "language" and,
 * for Python, without symbol_addr. */
static void test_runtime_frames_group_and_are_marked(void **state)
{
    (void)state;
    hw_frame a[] = {make_frame(0x401000, "clock_nanosleep", "/lib/libc.so.6", NULL, 0),
                    make_frame(0x5d64b4, NULL, "/usr/bin/python3.11", NULL, 0),
                    python_frame("handle_request", "/srv/v1/app.py", 5),
                    make_frame(0x52b9e0, "_PyEval_EvalFrameDefault", "/usr/bin/python3.11", NULL, 0)};
    hw_frame b[] = {make_frame(0x402000, "clock_nanosleep", "/lib/libc.so.6", NULL, 0),
                    python_frame("handle_request", "/opt/v2/app.py", 5),
                    make_frame(0x7f0000052b9e0, "_PyEval_EvalFrameDefault", "/opt/lib/libpython3.11.so", NULL, 0)};
    hw_frame c[] = {make_frame(0x401000, "clock_nanosleep", "/lib/libc.so.6", NULL, 0),
                    python_frame("handle_other_request", "/srv/v1/app.py", 9)};
    hw_backtrace ba = {.frames = a, .count = 4}, bb = {.frames = b, .count = 3}, bc = {.frames = c, .count = 2};
    char ka[17], kb[17], kc[17];
    grouping_key_of(&ba, "/usr/bin/python3.11", ka);
    grouping_key_of(&bb, "/opt/bin/python3.11", kb);
    grouping_key_of(&bc, "/usr/bin/python3.11", kc);
    assert_string_equal(ka, kb);
    assert_string_not_equal(ka, kc);

    fixture fx;
    make_fixture(&fx);
    hw_backtrace_free(&fx.bts[1]);
    fx.bts[1] = ba;
    fx.bts[1].runtime_error = strdup("the frame chain loops");
    char id[37];
    json_t *r = hw_report_build(&fx.info, &fx.snap, fx.bts, fx.images, 1, id);
    assert_non_null(r);
    json_t *hung = json_array_get(json_object_get(json_object_get(r, "crash"), "threads"), 0);
    json_t *py = json_array_get(json_object_get(json_object_get(hung, "backtrace"), "contents"), 2);
    assert_string_equal(json_string_value(json_object_get(py, "language")), "python");
    assert_string_equal(json_string_value(json_object_get(py, "symbol_name")), "handle_request");
    assert_null(json_object_get(py, "symbol_addr"));
    json_t *native = json_array_get(json_object_get(json_object_get(hung, "backtrace"), "contents"), 0);
    assert_null(json_object_get(native, "language"));
    assert_string_equal(json_string_value(json_object_get(hung, "runtime_frames_error")), "the frame chain loops");
    json_decref(r);
    fx.bts[1].frames = NULL; /* a[] is freed below */
    fx.bts[1].count = 0;
    free_fixture(&fx);
    for (size_t i = 0; i < 4; i++)
        hw_frame_clear(&a[i]);
    for (size_t i = 0; i < 3; i++)
        hw_frame_clear(&b[i]);
    for (size_t i = 0; i < 2; i++)
        hw_frame_clear(&c[i]);
}

/* A GC pause: its collector's functions change from look to look (marking,
 * then sweeping) under one entry point, and the key, which starts no deeper
 * than the collector's outermost frame, stays; the report names the pause
 * and its phase.  A collection under the user's own code keys at that code. */
static void test_gc_pause_keeps_its_key(void **state)
{
    (void)state;
    hw_frame marking[] = {
        make_frame(0x114b147, "v8::internal::MarkCompactCollector::ProcessMarkingWorklist(unsigned long)", "/usr/bin/node", NULL, 0),
        make_frame(0x1180000, "v8::internal::Heap::CollectGarbage(v8::internal::AllocationSpace)", "/usr/bin/node", NULL, 0),
        make_frame(0x1190000, "v8::internal::MemoryReducer::TimerTask::RunInternal()", "/usr/bin/node", NULL, 0),
        make_frame(0x2000000, "uv_run", "/usr/bin/node", NULL, 0)};
    hw_frame sweeping[] = {
        make_frame(0x1200000, "v8::internal::Sweeper::RawSweep(v8::internal::Page*)", "/usr/bin/node", NULL, 0),
        make_frame(0x1210000, "v8::internal::Heap::EnsureSweepingCompleted(int)", "/usr/bin/node", NULL, 0),
        make_frame(0x1180010, "v8::internal::Heap::CollectGarbage(v8::internal::AllocationSpace)", "/usr/bin/node", NULL, 0),
        make_frame(0x1190000, "v8::internal::MemoryReducer::TimerTask::RunInternal()", "/usr/bin/node", NULL, 0),
        make_frame(0x2000000, "uv_run", "/usr/bin/node", NULL, 0)};
    hw_backtrace bm = {.frames = marking, .count = 4}, bs = {.frames = sweeping, .count = 5};
    char km[17], ks[17];
    grouping_key_of(&bm, "/usr/bin/node", km);
    grouping_key_of(&bs, "/usr/bin/node", ks);
    assert_string_equal(km, ks);
    hw_gc_stop gc;
    assert_true(hw_frames_gc(bs.frames, bs.count, &gc));
    assert_int_equal(gc.phase, HW_GC_SWEEPING);
    assert_int_equal(gc.outermost, 2);
    assert_int_equal(hw_frames_site_start(bs.frames, bs.count), 2);
    /* JavaScript running inside the collector (a finalizer) is no pause */
    hw_frame finalizer[] = {
        make_frame(0x114b147, "v8::internal::Runtime_DateCurrentTime(int)", "/usr/bin/node", NULL, 0),
        python_frame("cleanup", "/srv/app.js", 3),
        make_frame(0x1180000, "v8::internal::Heap::CollectGarbage(v8::internal::AllocationSpace)", "/usr/bin/node", NULL, 0)};
    finalizer[1].language = HW_LANG_JAVASCRIPT;
    assert_false(hw_frames_gc(finalizer, 3, &gc));
    assert_int_equal(gc.phase, HW_GC_NONE);

    fixture fx;
    make_fixture(&fx);
    hw_backtrace_free(&fx.bts[1]);
    fx.bts[1] = bs;
    hw_in_app_context ctx = {.executable = "/usr/bin/node"};
    hw_backtrace_classify(&fx.bts[1], &ctx);
    char id[37];
    json_t *r = hw_report_build(&fx.info, &fx.snap, fx.bts, fx.images, 1, id);
    assert_non_null(r);
    json_t *g = json_object_get(json_object_get(r, "hangwatch"), "gc");
    assert_string_equal(json_string_value(json_object_get(g, "runtime")), "v8");
    assert_string_equal(json_string_value(json_object_get(g, "phase")), "sweeping");
    assert_int_equal(json_integer_value(json_object_get(g, "frame")), 2);
    assert_string_equal(json_string_value(json_object_get(g, "function")),
                        "v8::internal::Heap::CollectGarbage(v8::internal::AllocationSpace)");
    json_decref(r);
    fx.bts[1].frames = NULL;
    fx.bts[1].count = 0;
    free_fixture(&fx);
    for (size_t i = 0; i < 4; i++)
        hw_frame_clear(&marking[i]);
    for (size_t i = 0; i < 5; i++)
        hw_frame_clear(&sweeping[i]);
    for (size_t i = 0; i < 3; i++)
        hw_frame_clear(&finalizer[i]);
}

/* The grouping key of the same hang site does not depend on the build or
 * the machine: addresses, the executable's path and offsets in it, a shared
 * library's version, a compiler's clone suffixes and the C library's start
 * frames all differ between the two stacks below, which still agree; a
 * different function does not.  The report names its executable. */
static void test_grouping_key_ignores_builds_and_machines(void **state)
{
    (void)state;
    hw_frame a[] = {make_frame(0x7f0000101000, "clock_nanosleep", "/lib/x86_64-linux-gnu/libc.so.6", NULL, 0),
                    make_frame(0x401234, "hang_in_x", "/opt/a/prog", "prog.c", 10),
                    make_frame(0x401300, "on_tick.constprop.0", "/opt/a/prog", "prog.c", 20),
                    make_frame(0x7f0000201000, "g_main_dispatch", "/lib/libglib-2.0.so.0.7400.6", NULL, 0),
                    make_frame(0x401400, "main", "/opt/a/prog", "prog.c", 30),
                    make_frame(0x7f0000102000, "__libc_start_call_main", "/lib/x86_64-linux-gnu/libc.so.6", NULL, 0),
                    make_frame(0x7f0000103000, "__libc_start_main_impl", "/lib/x86_64-linux-gnu/libc.so.6", NULL, 0),
                    make_frame(0x401010, "_start", "/opt/a/prog", NULL, 0)};
    hw_frame b[] = {make_frame(0x7f1234501000, "clock_nanosleep", "/usr/lib64/libc.so.6", NULL, 0),
                    make_frame(0x55aa00402234, "hang_in_x", "/usr/local/bin/prog", "src/prog.c", 11),
                    make_frame(0x55aa00402400, "on_tick.isra.0", "/usr/local/bin/prog", "src/prog.c", 21),
                    make_frame(0x7f1234601000, "g_main_dispatch", "/usr/lib64/libglib-2.0.so.0.8000.0", NULL, 0),
                    make_frame(0x55aa00402500, "main", "/usr/local/bin/prog", "src/prog.c", 31),
                    make_frame(0x7f1234502000, "__libc_start_main", "/usr/lib64/libc.so.6", NULL, 0),
                    make_frame(0x55aa00401010, "_start", "/usr/local/bin/prog", NULL, 0)};
    hw_frame c[] = {make_frame(0x7f0000101000, "clock_nanosleep", "/lib/x86_64-linux-gnu/libc.so.6", NULL, 0),
                    make_frame(0x401534, "hang_in_y", "/opt/a/prog", "prog.c", 40),
                    make_frame(0x401300, "on_tick", "/opt/a/prog", "prog.c", 20),
                    make_frame(0x7f0000201000, "g_main_dispatch", "/lib/libglib-2.0.so.0.7400.6", NULL, 0),
                    make_frame(0x401400, "main", "/opt/a/prog", "prog.c", 30)};
    hw_backtrace ba = {.frames = a, .count = 8}, bb = {.frames = b, .count = 7}, bc = {.frames = c, .count = 5};
    char ka[17], kb[17], kc[17];
    grouping_key_of(&ba, "/opt/a/prog", ka);
    grouping_key_of(&bb, "/usr/local/bin/prog", kb);
    grouping_key_of(&bc, "/opt/a/prog", kc);
    assert_string_equal(ka, kb);
    assert_string_not_equal(ka, kc);

    fixture fx;
    make_fixture(&fx);
    fx.info.executable = "/opt/demo";
    char id[37];
    json_t *r = hw_report_build(&fx.info, &fx.snap, fx.bts, fx.images, 1, id);
    assert_non_null(r);
    assert_string_equal(json_string_value(json_object_get(json_object_get(r, "hangwatch"), "executable")), "/opt/demo");
    const char *out = getenv("HW_TEST_REPORT_OUT");
    if (out && *out) {
        hw_report_dir *out_dir = open_dir_or_fail(out);
        assert_int_equal(hw_report_write(out_dir, "unit-report-executable.json", r), 0);
        hw_report_dir_close(out_dir);
    }
    json_decref(r);
    free_fixture(&fx);
    for (size_t i = 0; i < 8; i++)
        hw_frame_clear(&a[i]);
    for (size_t i = 0; i < 7; i++)
        hw_frame_clear(&b[i]);
    for (size_t i = 0; i < 5; i++)
        hw_frame_clear(&c[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hung_thread_comes_first),
        cmocka_unit_test(test_unknown_fields_are_left_out),
        cmocka_unit_test(test_written_atomically_and_privately),
        cmocka_unit_test(test_final_duration_is_added_in_place),
        cmocka_unit_test(test_fatal_hang_end_names_the_death),
        cmocka_unit_test(test_tracer_is_named),
        cmocka_unit_test(test_names_that_are_not_utf8_are_escaped),
        cmocka_unit_test(test_uuids_are_v4_and_distinct),
        cmocka_unit_test(test_runtime_frames_group_and_are_marked),
        cmocka_unit_test(test_grouping_key_ignores_builds_and_machines),
        cmocka_unit_test(test_gc_pause_keeps_its_key),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
