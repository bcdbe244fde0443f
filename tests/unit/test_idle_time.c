/*
 * test_idle_time.c - hw_take_idle_time (watch_priority.c): a background
 * thread goes on idle time only where the agent may bring it back, and at
 * the nice it asked for in either case.  Each case runs in a child process
 * that first takes away what it must not have: CAP_SYS_NICE from its
 * effective set, RLIMIT_NICE set to a value.  The cases that keep
 * CAP_SYS_NICE need root and are skipped without it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <errno.h>
#include <linux/capability.h>
#include <sched.h>
#include <stdbool.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/common/watch_priority.h"

#define NICE 10

enum { KEEP_CAPABILITY = 1, DROP_CAPABILITY = 0 };

/* Child outcomes, as exit codes. */
enum { ON_IDLE_TIME_CAME_BACK = 10, AT_NICE_NOT_IDLE = 11, WRONG = 12, SET_UP_FAILED = 13 };

static bool drop_sys_nice(void)
{
    struct __user_cap_header_struct header = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct data[2];
    if (syscall(SYS_capget, &header, data) != 0)
        return false;
    data[CAP_SYS_NICE / 32].effective &= ~(1u << (CAP_SYS_NICE % 32));
    return syscall(SYS_capset, &header, data) == 0;
}

/* In a child: limits set, then hw_take_idle_time; what came of it. */
static int child_outcome(bool keep_capability, rlim_t nice_limit)
{
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        struct rlimit limit = {nice_limit, nice_limit};
        if (setrlimit(RLIMIT_NICE, &limit) != 0 || (!keep_capability && !drop_sys_nice()))
            _exit(SET_UP_FAILED);
        pid_t tid = gettid();
        bool idle = hw_take_idle_time(tid, NICE);
        errno = 0;
        int nice = getpriority(PRIO_PROCESS, (id_t)tid);
        int policy = sched_getscheduler(tid);
        if (nice != NICE)
            _exit(WRONG);
        if (!idle)
            _exit(policy == SCHED_OTHER ? AT_NICE_NOT_IDLE : WRONG);
        struct sched_param sp = {0};
        /* On idle time, and able to come back from it, as promised. */
        _exit(policy == SCHED_IDLE && sched_setscheduler(tid, SCHED_OTHER, &sp) == 0 ? ON_IDLE_TIME_CAME_BACK
                                                                                     : WRONG);
    }
    int status = 0;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

static void skip_unless_root(void)
{
    if (geteuid() != 0)
        skip();
}

static void test_with_cap_sys_nice_idle_time(void **state)
{
    (void)state;
    skip_unless_root();
    assert_int_equal(child_outcome(KEEP_CAPABILITY, 0), ON_IDLE_TIME_CAME_BACK);
}

/* The premise: without the right, the kernel keeps a thread on idle time. */
static void test_without_the_right_idle_time_is_for_good(void **state)
{
    (void)state;
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        struct rlimit limit = {0, 0};
        struct sched_param sp = {0};
        if (setrlimit(RLIMIT_NICE, &limit) != 0 || !drop_sys_nice() ||
            sched_setscheduler(0, SCHED_IDLE, &sp) != 0)
            _exit(SET_UP_FAILED);
        _exit(sched_setscheduler(0, SCHED_OTHER, &sp) != 0 && errno == EPERM ? AT_NICE_NOT_IDLE : WRONG);
    }
    int status = 0;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), AT_NICE_NOT_IDLE);
}

static void test_without_the_right_a_nice_instead(void **state)
{
    (void)state;
    assert_int_equal(child_outcome(DROP_CAPABILITY, 0), AT_NICE_NOT_IDLE);
}

/* RLIMIT_NICE 20 - NICE lets a thread come back at nice NICE, no less.
 * Raising the limit takes CAP_SYS_RESOURCE: skipped where the test lacks
 * it (a container's root may). */
static void test_a_nice_limit_that_allows_it(void **state)
{
    (void)state;
    int outcome = child_outcome(DROP_CAPABILITY, 20 - NICE);
    if (outcome == SET_UP_FAILED)
        skip();
    assert_int_equal(outcome, ON_IDLE_TIME_CAME_BACK);
    assert_int_equal(child_outcome(DROP_CAPABILITY, 20 - NICE - 1), AT_NICE_NOT_IDLE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_with_cap_sys_nice_idle_time),
        cmocka_unit_test(test_without_the_right_idle_time_is_for_good),
        cmocka_unit_test(test_without_the_right_a_nice_instead),
        cmocka_unit_test(test_a_nice_limit_that_allows_it),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
