/*
 * test_python_debug_offsets.c - CPython 3.13's own debug offsets, read from
 * a live interpreter, against the table generated from 3.13's headers
 * (python_layouts.h), and what the agent does when a process's debug
 * offsets lie.
 *
 *   test_python_debug_offsets PYTHON3.13
 *
 * The interpreter runs as our child, sleeping in three Python calls.  Its
 * _PyRuntime starts with _Py_DebugOffsets, which CPython itself never reads
 * (they are for tools like this one), so the tests may overwrite them in
 * the running process (process_vm_writev) to forge a version, a
 * free-threaded build, offsets out of range or offsets that point at the
 * wrong fields, and put back the original after each.
 */
#include <setjmp.h> /* cmocka.h needs setjmp.h, stdarg.h and stddef.h first */
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/capture/capture.h"
#include "agent/capture/proc_task.h"
#include "agent/symbols/python_layouts.h"
#include "agent/symbols/symbols.h"

static const char SCRIPT[] = "import time\n"
                             "def sleeper_three():\n"
                             "    print('ready', flush=True)\n"
                             "    time.sleep(600)\n"
                             "def sleeper_two():\n"
                             "    sleeper_three()\n"
                             "def sleeper_one():\n"
                             "    sleeper_two()\n"
                             "sleeper_one()\n";

static const char *python_path;
static pid_t child;
/* The read end of the child's stdout, open while it lives: print() may
 * write "ready" and its newline separately, and a newline written after
 * the reader closed its end kills the child with BrokenPipeError. */
static int child_stdout = -1;
static uint64_t runtime_addr;
static unsigned char original[4096]; /* the child's _Py_DebugOffsets as it started */

static int start_python(void **state)
{
    (void)state;
    int out[2];
    if (pipe(out) != 0)
        return -1;
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, NULL); /* capture.h's rules */
    child = fork();
    if (child == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(out[1], 1);
        close(out[0]);
        close(out[1]);
        execl(python_path, python_path, "-c", SCRIPT, (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    char buf[16] = "";
    ssize_t n = read(out[0], buf, sizeof buf - 1);
    child_stdout = out[0];
    if (n <= 0 || strncmp(buf, "ready", 5) != 0) {
        fprintf(stderr, "%s did not start\n", python_path);
        return -1;
    }
    return 0;
}

static int stop_python(void **state)
{
    (void)state;
    if (child > 0) {
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
    }
    if (child_stdout >= 0)
        close(child_stdout);
    child_stdout = -1;
    return 0;
}

static void find_python(hw_python_target *py)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)child);
    size_t len = 0;
    char *maps = hw_proc_read_whole(path, &len);
    assert_non_null(maps);
    hw_python_find(child, maps, len, py);
    free(maps);
    assert_true(py->found);
}

static void poke(uint64_t addr, const void *bytes, size_t len)
{
    struct iovec local = {(void *)bytes, len}, remote = {(void *)(uintptr_t)addr, len};
    assert_int_equal(process_vm_writev(child, &local, 1, &remote, 1, 0), (ssize_t)len);
}

static void peek(uint64_t addr, void *bytes, size_t len)
{
    struct iovec local = {bytes, len}, remote = {(void *)(uintptr_t)addr, len};
    assert_int_equal(process_vm_readv(child, &local, 1, &remote, 1, 0), (ssize_t)len);
}

/* Write the 64-bit number at `pos` of the child's debug offsets. */
static void forge(uint32_t pos, uint64_t value)
{
    poke(runtime_addr + hw_python_debug_layout_3_13.debug_offsets_in_runtime + pos, &value, sizeof value);
}

static void restore(void)
{
    poke(runtime_addr + hw_python_debug_layout_3_13.debug_offsets_in_runtime, original,
         hw_python_debug_layout_3_13.debug_offsets_size);
}

/* The layout read from the process is the generated 3.13 table, field by
 * field where it comes from the debug offsets, and as a whole. */
static void offsets_match_the_generated_table(void **state)
{
    (void)state;
    hw_python_target py;
    find_python(&py);
    assert_true(py.readable);
    assert_int_equal(py.layout.major, 3);
    assert_int_equal(py.layout.minor, 13);
    assert_true(strncmp(py.version, "3.13.", 5) == 0);
    runtime_addr = py.runtime_addr;

    /* _PyRuntime really does start with the debug offsets: this is what the
     * layout was read from. */
    const hw_python_debug_layout *D = &hw_python_debug_layout_3_13;
    assert_true(D->debug_offsets_size <= sizeof original);
    peek(runtime_addr + D->debug_offsets_in_runtime, original, D->debug_offsets_size);
    assert_memory_equal(original + D->cookie, "xdebugpy", 8);
    uint64_t version;
    memcpy(&version, original + D->version, sizeof version);
    assert_int_equal(version, py.version_hex);

    const hw_python_layout *T = &hw_python_layout_3_13;
    int differ = 0;
#define SAME(field)                                                                                                   \
    do {                                                                                                              \
        if (py.layout.field != T->field) {                                                                            \
            fprintf(stderr, "%s: the process says %u, the table %u\n", #field, py.layout.field, T->field);            \
            differ++;                                                                                                 \
        }                                                                                                             \
    } while (0)
    SAME(runtime_interpreters_head);
    SAME(interp_next);
    SAME(interp_threads_head);
    SAME(interp_gil_ptr);
    SAME(gil_locked);
    SAME(gil_last_holder);
    SAME(tstate_size);
    SAME(tstate_next);
    SAME(tstate_frame);
    SAME(tstate_thread_id);
    SAME(tstate_native_thread_id);
    SAME(frame_size);
    SAME(frame_previous);
    SAME(frame_code);
    SAME(frame_instr);
    SAME(frame_owner);
    SAME(code_filename);
    SAME(code_name);
    SAME(code_qualname);
    SAME(code_linetable);
    SAME(code_firstlineno);
    SAME(code_code_adaptive);
    SAME(object_type);
    SAME(bytes_sval);
    SAME(unicode_state);
    SAME(unicode_length);
    SAME(ascii_size);
#undef SAME
    assert_int_equal(differ, 0);
    assert_memory_equal(&py.layout, T, sizeof *T);
}

/* With the layout from the process, the capture names the three calls. */
static void frames_read_through_the_offsets(void **state)
{
    (void)state;
    hw_python_target py;
    find_python(&py);
    assert_true(py.readable);
    hw_capture_options opts;
    hw_capture_options_default(&opts, child);
    opts.interp_frames = HW_PY_MAX_FRAMES;
    opts.while_stopped = hw_python_read_stacks;
    opts.while_stopped_ctx = &py;
    hw_process_snapshot snap;
    assert_int_equal(hw_capture_process(child, &opts, &snap), 0);
    hw_python_namer *namer = hw_python_namer_new(&py, child);
    assert_non_null(namer);
    hw_runtime_names *names = hw_python_name_threads(namer, &snap, false);
    assert_non_null(names);
    const char *want[] = {"sleeper_three", "sleeper_two", "sleeper_one"};
    size_t seen = 0;
    for (size_t t = 0; t < snap.thread_count; t++)
        for (unsigned i = 0; i < names[t].count && seen < 3; i++)
            if (names[t].frames[i].symbol_name && strcmp(names[t].frames[i].symbol_name, want[seen]) == 0)
                seen++;
    assert_int_equal(seen, 3);
    hw_runtime_names_free(names, snap.thread_count);
    hw_python_namer_free(namer);
    hw_process_snapshot_free(&snap);
}

/* What hw_python_find says of the process after `forge`, put back after. */
static void expect_refused(const char *says)
{
    hw_python_target py;
    find_python(&py);
    restore();
    if (py.readable || strstr(py.why_not, says) == NULL)
        fail_msg("expected \"%s\", got readable=%d why_not=\"%s\"", says, py.readable, py.why_not);
}

static void a_later_version_is_refused_by_name(void **state)
{
    (void)state;
    forge(hw_python_debug_layout_3_13.version, 0x030e00f0ull); /* 3.14.0 */
    expect_refused("Python 3.14.0: frames not read");
}

static void a_free_threaded_build_is_refused(void **state)
{
    (void)state;
    forge(hw_python_debug_layout_3_13.free_threaded, 1);
    expect_refused("free-threaded");
}

static void an_offset_out_of_range_is_refused(void **state)
{
    (void)state;
    forge(hw_python_debug_layout_3_13.tstate_current_frame, 1ull << 40);
    expect_refused("debug offsets could not be read or make no sense");
    forge(hw_python_debug_layout_3_13.interp_gil_runtime_state_holder, 0); /* before the GIL's state */
    expect_refused("debug offsets could not be read or make no sense");
}

/* Offsets in range but wrong: each frame's "previous" where its code
 * object is, each thread state its own "next", the code object where the
 * previous frame is.  The capture reads what it reads, bounded; nothing
 * crashes or loops, and once the offsets are put back the process is read
 * right again. */
static void wrong_offsets_give_a_bounded_partial_stack(void **state)
{
    (void)state;
    const hw_python_debug_layout *D = &hw_python_debug_layout_3_13;
    uint64_t executable, previous;
    memcpy(&executable, original + D->frame_executable, sizeof executable);
    memcpy(&previous, original + D->frame_previous, sizeof previous);
    const uint32_t pos[] = {D->frame_previous, D->tstate_next, D->frame_executable};
    const uint64_t value[] = {executable, 0, previous};
    for (size_t k = 0; k < sizeof pos / sizeof pos[0]; k++) {
        forge(pos[k], value[k]);
        hw_python_target py;
        find_python(&py);
        hw_capture_options opts;
        hw_capture_options_default(&opts, child);
        opts.interp_frames = HW_PY_MAX_FRAMES;
        opts.while_stopped = hw_python_read_stacks;
        opts.while_stopped_ctx = &py;
        hw_process_snapshot snap;
        int rc = hw_capture_process(child, &opts, &snap);
        restore();
        assert_int_equal(rc, 0);
        for (size_t t = 0; t < snap.thread_count; t++)
            assert_true(snap.threads[t].interp.count <= HW_PY_MAX_FRAMES);
        if (py.readable) {
            hw_python_namer *namer = hw_python_namer_new(&py, child);
            hw_runtime_names *names = hw_python_name_threads(namer, &snap, false);
            for (size_t t = 0; names && t < snap.thread_count; t++) {
                hw_backtrace bt = {0};
                assert_int_equal(hw_python_merge(&names[t], &bt), 0);
                assert_true(bt.count <= HW_PY_MAX_FRAMES);
                hw_backtrace_free(&bt);
            }
            hw_runtime_names_free(names, snap.thread_count);
            hw_python_namer_free(namer);
        }
        hw_process_snapshot_free(&snap);
        /* The process is still the same, and read right again. */
        hw_python_target again;
        find_python(&again);
        assert_true(again.readable);
        assert_memory_equal(&again.layout, &hw_python_layout_3_13, sizeof again.layout);
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s PYTHON3.13\n", argv[0]);
        return 2;
    }
    python_path = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(offsets_match_the_generated_table),
        cmocka_unit_test(frames_read_through_the_offsets),
        cmocka_unit_test(a_later_version_is_refused_by_name),
        cmocka_unit_test(a_free_threaded_build_is_refused),
        cmocka_unit_test(an_offset_out_of_range_is_refused),
        cmocka_unit_test(wrong_offsets_give_a_bounded_partial_stack),
    };
    return cmocka_run_group_tests(tests, start_python, stop_python);
}
