/*
 * test_proc_task.c - the /proc readers every part of the agent shares
 * (agent/capture/proc_task.h): the capped whole-file reader (its cap, its
 * "cut" answer, empty and missing files) and the parser of a thread's
 * /proc/PID/task/TID/syscall line, on lines as the kernel writes them, on
 * this test's own threads, and on lines of other shapes.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/capture/proc_task.h"
#include "core/abi/wait_point.h"

/* A temporary file holding `len` bytes of `text`; its path in `path`. */
static void write_temp(char path[64], const char *text, size_t len)
{
    snprintf(path, 64, "/tmp/hw-proc-task-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, len), (ssize_t)len);
    close(fd);
}

static void test_capped_whole_file(void **state)
{
    (void)state;
    char path[64];
    write_temp(path, "one\ntwo\n", 8);
    size_t len = 99;
    bool cut = true;
    int err = 1;
    char *text = hw_proc_read_capped(path, 1024, &len, &cut, &err);
    assert_non_null(text);
    assert_int_equal(len, 8);
    assert_false(cut);
    assert_int_equal(err, 0);
    assert_string_equal(text, "one\ntwo\n");
    free(text);
    /* exactly the cap: not cut, since nothing follows */
    text = hw_proc_read_capped(path, 8, &len, &cut, &err);
    assert_non_null(text);
    assert_int_equal(len, 8);
    assert_false(cut);
    free(text);
    unlink(path);
}

static void test_capped_cut(void **state)
{
    (void)state;
    /* longer than the first read, so that the buffer grows before the cap */
    size_t big = 100000;
    char *content = malloc(big);
    assert_non_null(content);
    for (size_t i = 0; i < big; i++)
        content[i] = (char)('a' + i % 26);
    char path[64];
    write_temp(path, content, big);
    size_t len;
    bool cut;
    int err;
    char *text = hw_proc_read_capped(path, 70001, &len, &cut, &err);
    assert_non_null(text);
    assert_int_equal(len, 70001);
    assert_true(cut);
    assert_int_equal(text[70001], '\0');
    assert_memory_equal(text, content, 70001);
    free(text);
    text = hw_proc_read_capped(path, big * 4, &len, &cut, &err);
    assert_non_null(text);
    assert_int_equal(len, big);
    assert_false(cut);
    assert_memory_equal(text, content, big);
    free(text);
    /* the old reader keeps its meaning: the whole file, NULL when empty */
    text = hw_proc_read_whole(path, &len);
    assert_non_null(text);
    assert_int_equal(len, big);
    free(text);
    unlink(path);
    free(content);
}

static void test_capped_empty_and_missing(void **state)
{
    (void)state;
    char path[64];
    write_temp(path, "", 0);
    size_t len = 5;
    bool cut = true;
    int err = 1;
    char *text = hw_proc_read_capped(path, 64, &len, &cut, &err);
    assert_non_null(text);
    assert_int_equal(len, 0);
    assert_false(cut);
    assert_string_equal(text, "");
    free(text);
    assert_null(hw_proc_read_whole(path, &len));
    assert_int_equal(len, 0);
    unlink(path);
    assert_null(hw_proc_read_capped(path, 64, &len, &cut, &err));
    assert_int_equal(err, -ENOENT);
    /* a cap of 0 reads nothing and says whether there was anything */
    text = hw_proc_read_capped("/proc/self/stat", 0, &len, &cut, &err);
    assert_non_null(text);
    assert_int_equal(len, 0);
    assert_true(cut);
    free(text);
}

static void test_syscall_line_shapes(void **state)
{
    (void)state;
    hw_task_syscall_info c;
    assert_true(hw_syscall_line_parse("232 0x4 0x7ffd1c 0x40 0xffffffffffffffff 0x0 0x8 0x7ffd00 0x7f12345678\n", &c));
    assert_true(c.blocked);
    assert_int_equal(c.nr, 232);
    assert_int_equal(c.args[0], 4);
    assert_int_equal(c.args[1], 0x7ffd1c);
    assert_int_equal(c.args[3], UINT64_MAX);
    assert_int_equal(c.args[5], 8);
    assert_int_equal(c.sp, 0x7ffd00);
    assert_int_equal(c.pc, 0x7f12345678);
    /* blocked outside a system call (a page fault): only sp and pc */
    assert_true(hw_syscall_line_parse("-1 0x7ffd00 0x401000", &c));
    assert_true(c.blocked);
    assert_int_equal(c.nr, -1);
    assert_int_equal(c.args[0], 0);
    assert_int_equal(c.sp, 0x7ffd00);
    assert_int_equal(c.pc, 0x401000);
    assert_true(hw_syscall_line_parse("running\n", &c));
    assert_false(c.blocked);
    assert_int_equal(c.nr, -1);
    assert_int_equal(c.pc, 0);
}

static void test_syscall_line_other_shapes(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "",
        "\n",
        "x",
        "232",                              /* no arguments */
        "232 0x1 0x2 0x3 0x4 0x5 0x6 0x7",  /* one field short */
        "232 0x1 0x2 0x3 0x4 0x5 0x6 0x7 0x8 0x9", /* one too many */
        "232 1 2 3 4 5 6 7 8",              /* not 0x */
        "232 0x1 0x2 0x3 0x4 0x5 0x6 0x7 0xZ",
        "232 0x1 0x2 0x3 0x4 0x5 0x6 0x7 0x8 junk",
        "-2 0x1 0x2",
        "-1 0x1",
        "99999999999999999999999 0x1 0x2 0x3 0x4 0x5 0x6 0x7 0x8",
        "232 0x1 0x2 0x3 0x4 0x5 0x6 0x7 0x1ffffffffffffffff",
        "232x 0x1 0x2 0x3 0x4 0x5 0x6 0x7 0x8",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        hw_task_syscall_info c;
        c.nr = 7;
        if (hw_syscall_line_parse(bad[i], &c))
            fail_msg("taken: \"%s\"", bad[i]);
        assert_int_equal(c.nr, -1);
        assert_false(c.blocked);
    }
}

static int release_pipe[2];
static volatile int reader_ready;

static void *blocked_reader(void *arg)
{
    (void)arg;
    char byte;
    reader_ready = 1;
    while (read(release_pipe[0], &byte, 1) < 0) /* until the test writes */
        ;
    return NULL;
}

/* A thread of this test blocked in read on a pipe: read as the kernel
 * has it. */
static void test_syscall_of_a_real_thread(void **state)
{
    (void)state;
    assert_int_equal(pipe(release_pipe), 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, blocked_reader, NULL), 0);
    pid_t *tids = NULL;
    size_t count = 0;
    bool seen = false;
    hw_task_syscall_info c = {0};
    for (int tries = 0; tries < 1000 && !seen; tries++) { /* up to 10 s */
        struct timespec pause = {0, 10 * 1000 * 1000};
        nanosleep(&pause, NULL);
        if (!reader_ready)
            continue;
        free(tids);
        tids = NULL;
        assert_int_equal(hw_task_list(getpid(), &tids, &count), 0);
        for (size_t i = 0; i < count && !seen; i++)
            seen = tids[i] != getpid() && hw_task_syscall_read(getpid(), tids[i], &c) == 0 && c.nr == SYS_read;
    }
    free(tids);
    assert_int_equal(write(release_pipe[1], "x", 1), 1);
    pthread_join(t, NULL);
    close(release_pipe[0]);
    close(release_pipe[1]);
    assert_true(seen);
    assert_true(c.blocked);
    assert_int_equal(c.args[0], (uint64_t)release_pipe[0]);
    assert_int_equal(c.args[2], 1);
    assert_true(c.pc != 0);
    assert_true(c.sp != 0);
    assert_int_equal(hw_task_syscall(getpid(), 999999999), -1);
    hw_task_syscall_info gone;
    assert_true(hw_task_syscall_read(getpid(), 999999999, &gone) < 0);
}

/* What a wait system call waits on, from its arguments: the loop's-wait
 * rule's object and rank (wait_point.h), and not for other calls. */
static void test_wait_syscall_described(void **state)
{
    (void)state;
    uint64_t object;
    uint32_t rank, kind;
    hw_task_syscall_info call = {.blocked = true, .nr = SYS_epoll_wait, .args = {7, 0x1000, 64, (uint64_t)-1}};
    assert_true(hw_wait_syscall_describe(&call, &object, &rank, &kind));
    assert_int_equal(object, 7);
    assert_int_equal(rank, HW_WAIT_RANK_MANY);
    assert_int_equal(kind, HW_WAIT_CALL_EPOLL_WAIT);
    call = (hw_task_syscall_info){.blocked = true, .nr = SYS_poll, .args = {0x7ffd0000, 1, 3000}};
    assert_true(hw_wait_syscall_describe(&call, &object, &rank, &kind));
    assert_int_equal(object, 0x7ffd0000);
    assert_int_equal(rank, HW_WAIT_RANK_ONE);
    assert_int_equal(kind, HW_WAIT_CALL_POLL);
    /* time.sleep on Python 3.8-3.10: select(0, NULL, NULL, NULL, &tv) */
    call = (hw_task_syscall_info){.blocked = true, .nr = SYS_select, .args = {0, 0, 0, 0, 0x7ffd1000}};
    assert_true(hw_wait_syscall_describe(&call, &object, &rank, &kind));
    assert_int_equal(rank, HW_WAIT_RANK_SLEEP);
    assert_true(hw_is_wait_syscall(SYS_pselect6));
    call.nr = SYS_read;
    assert_false(hw_wait_syscall_describe(&call, &object, &rank, &kind));
    assert_false(hw_is_wait_syscall(SYS_read));
    assert_false(hw_is_wait_syscall(-1));
}

/* A name with a newline of its own (prctl PR_SET_NAME) is read whole:
 * only the kernel's final newline goes. */
static void test_comm_with_a_newline(void **state)
{
    (void)state;
    char before[16] = "", name[16], path[64];
    assert_int_equal(prctl(PR_GET_NAME, before, 0, 0, 0), 0);
    assert_int_equal(prctl(PR_SET_NAME, "x\"} 9\nup 1", 0, 0, 0), 0);
    snprintf(path, sizeof path, "/proc/self/task/%d/comm", (int)syscall(SYS_gettid));
    hw_proc_read_comm(path, name);
    prctl(PR_SET_NAME, before, 0, 0, 0);
    assert_string_equal(name, "x\"} 9\nup 1");
    memset(name, 'z', sizeof name);
    hw_proc_read_comm("/nonexistent/comm", name);
    assert_string_equal(name, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_capped_whole_file),
        cmocka_unit_test(test_capped_cut),
        cmocka_unit_test(test_capped_empty_and_missing),
        cmocka_unit_test(test_syscall_line_shapes),
        cmocka_unit_test(test_syscall_line_other_shapes),
        cmocka_unit_test(test_syscall_of_a_real_thread),
        cmocka_unit_test(test_wait_syscall_described),
        cmocka_unit_test(test_comm_with_a_newline),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
