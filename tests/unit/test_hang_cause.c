/*
 * test_hang_cause.c - the verdict of a hang's `time` section
 * (core/hang_cause.h): each cause from the fractions decisions.md §44
 * gives, the boundaries, what a blocked call waits for by its system call
 * and descriptor (a poll's first descriptor, a call the kernel restarted
 * after a stop named from the stack), and the words of the stderr clause
 * (escaped).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>

#include <cmocka.h>

#include "core/hang_cause.h"

#define MS 1000000ull

/* A 2 s window split into on CPU, waiting for a CPU and asleep. */
static hw_time_section window(uint64_t on_ms, uint64_t queue_ms)
{
    hw_time_section t = {.present = true, .has_schedstat = true, .window_ns = 2000 * MS};
    t.on_cpu_ns = on_ms * MS;
    t.runqueue_ns = queue_ms * MS;
    t.blocked_ns = t.window_ns - t.on_cpu_ns - t.runqueue_ns;
    t.look.fd = -1;
    return t;
}

static void blocked_in(hw_time_section *t, long nr, int fd, hw_fd_class cls, const char *text)
{
    t->look.valid = true;
    t->look.state = 'S';
    t->look.in_syscall = true;
    t->look.syscall = nr;
    t->look.fd = fd;
    t->look.fd_class = cls;
    strcpy(t->look.fd_text, text);
}

static void working_when_mostly_on_cpu(void **state)
{
    (void)state;
    hw_time_section t = window(1900, 50);
    hw_cause_decide(&t);
    assert_int_equal(t.cause, HW_CAUSE_WORKING);
    t = window(1200, 0); /* exactly 60 % */
    hw_cause_decide(&t);
    assert_int_equal(t.cause, HW_CAUSE_WORKING);
    t = window(1199, 0);
    hw_cause_decide(&t);
    assert_int_not_equal(t.cause, HW_CAUSE_WORKING);
}

static void throttled_before_anything_else(void **state)
{
    (void)state;
    hw_time_section t = window(400, 1550);
    t.has_cgroup = true;
    t.cgroup_limited = true;
    t.throttled_ns = 1500 * MS;
    t.quota_us = 20000;
    t.period_us = 100000;
    strcpy(t.cgroup, "/sys/fs/cgroup/cpu,cpuacct/app");
    hw_cause_decide(&t);
    assert_int_equal(t.cause, HW_CAUSE_THROTTLED);
    char clause[512];
    hw_time_clause(&t, clause, sizeof clause);
    assert_string_equal(clause, "throttled: 0.4 s on CPU, 1.5 s throttled by cgroup /sys/fs/cgroup/cpu,cpuacct/app "
                                "(quota 20 ms per 100 ms) of 2.0 s");
    /* A cgroup without a limit never throttles: the queue wait is starvation. */
    t.cgroup_limited = false;
    hw_cause_decide(&t);
    assert_int_equal(t.cause, HW_CAUSE_STARVED);
    /* Under half the window throttled: not the cause. */
    t = window(1300, 100);
    t.has_cgroup = t.cgroup_limited = true;
    t.throttled_ns = 999 * MS;
    hw_cause_decide(&t);
    assert_int_equal(t.cause, HW_CAUSE_WORKING);
}

static void starved_when_waiting_for_a_cpu(void **state)
{
    (void)state;
    hw_time_section t = window(300, 1700);
    hw_cause_decide(&t);
    assert_int_equal(t.cause, HW_CAUSE_STARVED);
    char clause[256];
    assert_string_equal(hw_time_clause(&t, clause, sizeof clause),
                        "starved: 0.3 s on CPU, 1.7 s waiting for a CPU of 2.0 s");
}

static void blocked_on_what_the_call_waits_for(void **state)
{
    (void)state;
    hw_time_section t = window(10, 5);
    blocked_in(&t, SYS_recvfrom, 5, HW_FD_CLASS_SOCKET, "TCP 127.0.0.1:40312 \xe2\x86\x92 127.0.0.1:5432 (ESTABLISHED)");
    hw_cause_decide(&t);
    assert_int_equal(t.cause, HW_CAUSE_BLOCKED);
    assert_int_equal(t.blocked_on, HW_BLOCKED_ON_NETWORK);
    char clause[512];
    assert_string_equal(hw_time_clause(&t, clause, sizeof clause),
                        "blocked on network: 0.0 s on CPU, 2.0 s asleep in recvfrom on TCP 127.0.0.1:40312 "
                        "\xe2\x86\x92 127.0.0.1:5432 (ESTABLISHED) of 2.0 s");
    blocked_in(&t, SYS_read, 3, HW_FD_CLASS_IO, "pipe:[81234]");
    hw_cause_decide(&t);
    assert_int_equal(t.blocked_on, HW_BLOCKED_ON_IO);
    blocked_in(&t, SYS_read, 3, HW_FD_CLASS_SOCKET, "socket");
    hw_cause_decide(&t);
    assert_int_equal(t.blocked_on, HW_BLOCKED_ON_NETWORK);
    blocked_in(&t, SYS_futex, -1, HW_FD_CLASS_NONE, "");
    hw_cause_decide(&t);
    assert_int_equal(t.blocked_on, HW_BLOCKED_ON_LOCK);
    blocked_in(&t, SYS_wait4, -1, HW_FD_CLASS_NONE, "");
    hw_cause_decide(&t);
    assert_int_equal(t.blocked_on, HW_BLOCKED_ON_CHILD);
    blocked_in(&t, SYS_clone, -1, HW_FD_CLASS_NONE, "");
    hw_cause_decide(&t);
    assert_int_equal(t.blocked_on, HW_BLOCKED_ON_CHILD);
    assert_string_equal(hw_time_clause(&t, clause, sizeof clause),
                        "blocked on child: 0.0 s on CPU, 2.0 s asleep in clone of 2.0 s");
    blocked_in(&t, SYS_clock_nanosleep, -1, HW_FD_CLASS_NONE, "");
    hw_cause_decide(&t);
    assert_int_equal(t.blocked_on, HW_BLOCKED_ON_SLEEP);
    blocked_in(&t, 9999, -1, HW_FD_CLASS_NONE, "");
    hw_cause_decide(&t);
    assert_int_equal(t.blocked_on, HW_BLOCKED_ON_OTHER);
    assert_string_equal(hw_time_clause(&t, clause, sizeof clause),
                        "blocked on other: 0.0 s on CPU, 2.0 s asleep in system call 9999 of 2.0 s");
}

static void paging_when_asleep_on_faults(void **state)
{
    (void)state;
    hw_time_section t = window(100, 50);
    t.look.valid = true;
    t.look.state = 'D';
    t.look.in_syscall = false;
    t.has_faults = true;
    t.major_faults = 420;
    hw_cause_decide(&t);
    assert_int_equal(t.cause, HW_CAUSE_PAGING);
    t.major_faults = 0; /* asleep outside a system call without faults: blocked on something else */
    hw_cause_decide(&t);
    assert_int_equal(t.cause, HW_CAUSE_BLOCKED);
    assert_int_equal(t.blocked_on, HW_BLOCKED_ON_OTHER);
}

/* Runnable most of the window, neither share alone the rule's: the larger
 * of the two (a spin on a busy machine: 59 % on a CPU, 40 % waiting). */
static void runnable_on_a_busy_machine(void **state)
{
    (void)state;
    hw_time_section t = window(1180, 800);
    hw_cause_decide(&t);
    assert_int_equal(t.cause, HW_CAUSE_WORKING);
    assert_int_equal(t.secondary, HW_CAUSE_STARVED);
    t = window(900, 950);
    hw_cause_decide(&t);
    assert_int_equal(t.cause, HW_CAUSE_STARVED);
    assert_int_equal(t.secondary, HW_CAUSE_WORKING);
}

/* On a busy machine the waits for a CPU are the machine's: an fsync loop
 * 0.5 s on a CPU, 0.5 s waiting for one, 1 s asleep is blocked on its own
 * time; a thread faulting fast with no system call is paging. */
static void the_threads_own_time(void **state)
{
    (void)state;
    hw_time_section t = window(500, 500);
    blocked_in(&t, SYS_fsync, 3, HW_FD_CLASS_IO, "/var/lib/db/journal");
    hw_cause_decide(&t);
    assert_int_equal(t.cause, HW_CAUSE_BLOCKED);
    assert_int_equal(t.blocked_on, HW_BLOCKED_ON_IO);
    assert_int_equal(t.secondary, HW_CAUSE_STARVED);
    t = window(500, 500);
    t.has_faults = true;
    t.major_faults = 9392; /* in 2 s, asleep outside any call, found running */
    t.look.valid = true;
    t.look.state = 'R';
    hw_cause_decide(&t);
    assert_int_equal(t.cause, HW_CAUSE_PAGING);
    t.major_faults = 50; /* 25 a second: too few to say */
    hw_cause_decide(&t);
    assert_int_equal(t.cause, HW_CAUSE_BLOCKED);
    /* working for most of its own time */
    t = window(900, 600);
    hw_cause_decide(&t);
    assert_int_equal(t.cause, HW_CAUSE_WORKING);
}

static void system_time_is_said(void **state)
{
    (void)state;
    uint64_t user, system;
    hw_cputime_adjust(100, 300, 2000, &user, &system);
    assert_int_equal(system, 1500);
    assert_int_equal(user, 500);
    hw_cputime_adjust(0, 0, 2000, &user, &system);
    assert_int_equal(user, 2000);
    hw_time_section t = window(1500, 0);
    t.has_cputime = true;
    t.system_ns = 1200 * MS;
    t.user_ns = 300 * MS;
    hw_cause_decide(&t);
    char clause[256];
    assert_non_null(strstr(hw_time_clause(&t, clause, sizeof clause), "1.5 s on CPU (1.2 s of it in the kernel)"));
    t.system_ns = 100 * MS;
    assert_null(strstr(hw_time_clause(&t, clause, sizeof clause), "in the kernel"));
}

static void mixed_and_unknown(void **state)
{
    (void)state;
    hw_time_section t = window(700, 400);
    hw_cause_decide(&t);
    assert_int_equal(t.cause, HW_CAUSE_MIXED);
    t.has_schedstat = false;
    hw_cause_decide(&t);
    assert_int_equal(t.cause, HW_CAUSE_UNKNOWN);
    char clause[64];
    assert_string_equal(hw_time_clause(&t, clause, sizeof clause), "");
    t = window(700, 400);
    t.window_ns = 0;
    hw_cause_decide(&t);
    assert_int_equal(t.cause, HW_CAUSE_UNKNOWN);
}

static void foreign_text_is_escaped(void **state)
{
    (void)state;
    hw_time_section t = window(0, 0);
    blocked_in(&t, SYS_read, 4, HW_FD_CLASS_IO, "/tmp/\x1b[2Jevil");
    hw_cause_decide(&t);
    char clause[256];
    hw_time_clause(&t, clause, sizeof clause);
    assert_null(strchr(clause, '\x1b'));
    assert_non_null(strstr(clause, "/tmp/\\x1b[2Jevil"));
    /* a clause cut short stays terminated */
    char small[16];
    hw_time_clause(&t, small, sizeof small);
    assert_true(strlen(small) < sizeof small);
}

static void syscall_table(void **state)
{
    (void)state;
    assert_string_equal(hw_syscall_name(SYS_recvfrom), "recvfrom");
    assert_null(hw_syscall_name(-5));
    assert_true(hw_syscall_takes_fd(SYS_read));
    assert_false(hw_syscall_takes_fd(SYS_futex));
}

static void a_restarted_call_is_the_stacks_wait(void **state)
{
    (void)state;
    /* a capture stopped clock_nanosleep: the look after it sees restart_syscall */
    hw_time_section t = window(10, 5);
    blocked_in(&t, SYS_restart_syscall, -1, HW_FD_CLASS_NONE, "");
    hw_cause_decide(&t);
    assert_int_equal(t.blocked_on, HW_BLOCKED_ON_OTHER);
    const char *stack[] = {NULL, "__GI___clock_nanosleep", "__nanosleep", "rest_between_orders"};
    assert_true(hw_look_resolve_restart(&t.look, stack, 4));
    assert_int_equal(t.look.syscall, SYS_clock_nanosleep);
    assert_true(t.look.restarted);
    hw_cause_decide(&t);
    assert_int_equal(t.blocked_on, HW_BLOCKED_ON_SLEEP);
    char clause[256];
    assert_string_equal(hw_time_clause(&t, clause, sizeof clause),
                        "blocked on sleep: 0.0 s on CPU, 2.0 s asleep in clock_nanosleep (restarted after a stop) of "
                        "2.0 s");
    /* a futex wait restarted is a lock wait */
    blocked_in(&t, SYS_restart_syscall, -1, HW_FD_CLASS_NONE, "");
    t.look.restarted = false;
    const char *futex_stack[] = {"__futex_abstimed_wait_common", "pthread_cond_timedwait"};
    assert_true(hw_look_resolve_restart(&t.look, futex_stack, 2));
    assert_int_equal(t.look.syscall, SYS_futex);
    /* the innermost named function is no wait: nothing is guessed */
    blocked_in(&t, SYS_restart_syscall, -1, HW_FD_CLASS_NONE, "");
    t.look.restarted = false;
    const char *odd[] = {"my_own_syscall_stub", "clock_nanosleep"};
    assert_false(hw_look_resolve_restart(&t.look, odd, 2));
    assert_int_equal(t.look.syscall, SYS_restart_syscall);
    assert_false(t.look.restarted);
    /* only restart_syscall is resolved */
    blocked_in(&t, SYS_read, 3, HW_FD_CLASS_IO, "pipe:[1]");
    assert_false(hw_look_resolve_restart(&t.look, stack, 4));
    assert_int_equal(hw_restarted_syscall(NULL), -1);
    assert_int_equal(hw_restarted_syscall("poll"), SYS_poll);
}

static void a_poll_waits_on_its_descriptors(void **state)
{
    (void)state;
    /* a socket with a timeout: poll on one descriptor */
    hw_time_section t = window(10, 5);
    blocked_in(&t, SYS_poll, 7, HW_FD_CLASS_SOCKET, "TCP 127.0.0.1:40312 \xe2\x86\x92 127.0.0.1:8080 (ESTABLISHED)");
    t.look.wait_fd_count = 1;
    hw_cause_decide(&t);
    assert_int_equal(t.blocked_on, HW_BLOCKED_ON_NETWORK);
    char clause[512];
    hw_time_clause(&t, clause, sizeof clause);
    assert_non_null(strstr(clause, "asleep in poll on TCP 127.0.0.1:40312"));
    assert_null(strstr(clause, "other descriptor"));
    /* a pipe first among three */
    blocked_in(&t, SYS_ppoll, 3, HW_FD_CLASS_IO, "pipe:[81234]");
    t.look.wait_fd_count = 3;
    hw_cause_decide(&t);
    assert_int_equal(t.blocked_on, HW_BLOCKED_ON_IO);
    hw_time_clause(&t, clause, sizeof clause);
    assert_non_null(strstr(clause, "on pipe:[81234] and 2 other descriptors"));
    /* select on no descriptor: a sleep (time.sleep on CPython 3.8-3.10) */
    blocked_in(&t, SYS_pselect6, -1, HW_FD_CLASS_NONE, "");
    t.look.wait_fd_count = 0;
    hw_cause_decide(&t);
    assert_int_equal(t.blocked_on, HW_BLOCKED_ON_SLEEP);
    hw_time_clause(&t, clause, sizeof clause);
    assert_non_null(strstr(clause, "asleep in pselect6 on no descriptor"));
    /* the set unread: nothing is said of its descriptors */
    t.look.wait_fd_count = -1;
    hw_cause_decide(&t);
    assert_int_equal(t.blocked_on, HW_BLOCKED_ON_OTHER);
    hw_time_clause(&t, clause, sizeof clause);
    assert_null(strstr(clause, "descriptor"));
    /* an eventfd (neither socket nor file) is not guessed */
    blocked_in(&t, SYS_poll, 4, HW_FD_CLASS_NONE, "anon_inode:[eventfd]");
    t.look.wait_fd_count = 1;
    hw_cause_decide(&t);
    assert_int_equal(t.blocked_on, HW_BLOCKED_ON_OTHER);
    assert_true(hw_syscall_waits_on_set(SYS_select));
    assert_false(hw_syscall_waits_on_set(SYS_epoll_wait));
}

static void a_second_cause_that_matters_is_named(void **state)
{
    (void)state;
    /* 0.67 s throttled of 2.03 s, most of the run-queue wait: the quota
     * held it back, not the neighbours (was starved) */
    hw_time_section t = window(0, 0);
    t.window_ns = 2030 * MS;
    t.on_cpu_ns = 400 * MS;
    t.runqueue_ns = 1100 * MS;
    t.blocked_ns = 530 * MS;
    t.has_cgroup = t.cgroup_limited = true;
    t.throttled_ns = 670 * MS;
    t.quota_us = 20000;
    t.period_us = 100000;
    strcpy(t.cgroup, "/sys/fs/cgroup/cpu/app");
    hw_cause_decide(&t);
    assert_int_equal(t.cause, HW_CAUSE_THROTTLED);
    assert_int_equal(t.secondary, HW_CAUSE_BLOCKED); /* 0.53 s asleep: 26 % */
    /* working, with a third of the window throttled */
    t = window(1400, 600);
    t.has_cgroup = t.cgroup_limited = true;
    t.throttled_ns = 550 * MS;
    t.quota_us = 20000;
    t.period_us = 100000;
    strcpy(t.cgroup, "/sys/fs/cgroup/cpu/app");
    hw_cause_decide(&t);
    assert_int_equal(t.cause, HW_CAUSE_WORKING);
    assert_int_equal(t.secondary, HW_CAUSE_THROTTLED);
    assert_int_equal(t.secondary_ns, 550 * MS);
    char clause[512];
    assert_string_equal(hw_time_clause(&t, clause, sizeof clause),
                        "working: 1.4 s on CPU, also 0.6 s throttled by cgroup /sys/fs/cgroup/cpu/app (quota 20 ms per "
                        "100 ms) of 2.0 s");
    /* starved by neighbours, throttled a little: the wait beyond the
     * quota is the starvation, and the quota's share under a fifth is not named */
    t = window(500, 1500);
    t.has_cgroup = t.cgroup_limited = true;
    t.throttled_ns = 300 * MS;
    hw_cause_decide(&t);
    assert_int_equal(t.cause, HW_CAUSE_STARVED);
    assert_int_equal(t.secondary, HW_CAUSE_WORKING);
    /* blocked, and working a quarter of the window */
    t = window(500, 0);
    blocked_in(&t, SYS_clock_nanosleep, -1, HW_FD_CLASS_NONE, "");
    hw_cause_decide(&t);
    assert_int_equal(t.cause, HW_CAUSE_BLOCKED);
    assert_int_equal(t.secondary, HW_CAUSE_WORKING);
    /* nothing else over a fifth: none */
    t = window(1900, 50);
    hw_cause_decide(&t);
    assert_int_equal(t.secondary, HW_CAUSE_UNKNOWN);
    /* mixed names its shares itself */
    t = window(700, 400);
    hw_cause_decide(&t);
    assert_int_equal(t.cause, HW_CAUSE_MIXED);
    assert_int_equal(t.secondary, HW_CAUSE_UNKNOWN);
}

static hw_blocked_look futex_wait_at(uint64_t address)
{
    hw_blocked_look l = {.valid = true, .state = 'S', .in_syscall = true, .syscall = SYS_futex, .fd = -1};
    l.args[0] = l.lock_address = address;
    l.lock_bytes_valid = true;
    return l;
}

static void put_u32(hw_blocked_look *l, size_t at, uint32_t v)
{
    memcpy(l->lock_bytes + at, &v, sizeof v);
}

/* The lock of a futex wait, from the C library function it waits in: an
 * rwlock's writer or readers from its bytes, no holder for a condition
 * variable or a semaphore, a mutex's kind from its own bytes kept. */
static void lock_kinds_from_the_stack(void **state)
{
    (void)state;
    /* a reader waits on __wrphase_futex (the lock's 8th byte): the lock
     * starts 8 bytes into the bytes kept (16 before the word) */
    hw_blocked_look l = futex_wait_at(0x1008);
    put_u32(&l, 8 + 0, 2u | 1u);   /* __readers: write-locked, write phase */
    put_u32(&l, 8 + 24, 4242);     /* __cur_writer */
    const char *rd[] = {"__futex_abstimed_wait_common", "pthread_rwlock_rdlock", "main"};
    assert_true(hw_look_classify_lock(&l, rd, 3));
    assert_int_equal(l.lock_kind, HW_LOCK_RWLOCK_READ);
    assert_int_equal(l.lock_owner, 4242);
    assert_int_equal(l.lock_address, 0x1000);
    /* a writer waits on __writers_futex (the 12th) while 3 threads read */
    l = futex_wait_at(0x200c);
    put_u32(&l, 4 + 0, 3u << 3);
    const char *wr[] = {"__futex_abstimed_wait_common", "pthread_rwlock_wrlock"};
    assert_true(hw_look_classify_lock(&l, wr, 2));
    assert_int_equal(l.lock_kind, HW_LOCK_RWLOCK_WRITE);
    assert_int_equal(l.lock_owner, 0);
    assert_int_equal(l.lock_readers, 3);
    char clause[256];
    hw_time_section t = window(0, 0);
    t.look = l;
    hw_cause_decide(&t);
    assert_non_null(strstr(hw_time_clause(&t, clause, sizeof clause), "on an rwlock (to write), held for reading by 3"));
    /* bytes that are no rwlock's say so */
    l = futex_wait_at(0x3008);
    memset(l.lock_bytes, 0xff, sizeof l.lock_bytes);
    assert_true(hw_look_classify_lock(&l, rd, 3));
    assert_int_equal(l.lock_owner, 0);
    assert_non_null(l.lock_missing);
    /* a condition variable has no holder, whatever the bytes looked like */
    l = futex_wait_at(0x4028);
    l.lock_owner = 77;
    const char *cond[] = {"__futex_abstimed_wait_common", "pthread_cond_wait"};
    assert_true(hw_look_classify_lock(&l, cond, 2));
    assert_int_equal(l.lock_kind, HW_LOCK_CONDVAR);
    assert_int_equal(l.lock_owner, 0);
    t.look = l;
    assert_non_null(strstr(hw_time_clause(&t, clause, sizeof clause), "on a condition variable (it has no holder)"));
    const char *sem[] = {"__futex_abstimed_wait_common", "__new_sem_wait_slow64.constprop.0"};
    l = futex_wait_at(0x5000);
    assert_true(hw_look_classify_lock(&l, sem, 2));
    assert_int_equal(l.lock_kind, HW_LOCK_SEMAPHORE);
    /* a robust mutex its bytes told of stays one */
    l = futex_wait_at(0x6000);
    l.lock_kind = HW_LOCK_ROBUST_MUTEX;
    l.lock_owner = 99;
    const char *mutex[] = {"__pthread_mutex_lock_full", "main"};
    assert_false(hw_look_classify_lock(&l, mutex, 2));
    assert_int_equal(l.lock_kind, HW_LOCK_ROBUST_MUTEX);
    assert_int_equal(l.lock_owner, 99);
    /* no C library function named: nothing said */
    const char *unnamed[] = {NULL, "main"};
    l = futex_wait_at(0x7000);
    assert_false(hw_look_classify_lock(&l, unnamed, 2));
    assert_int_equal(l.lock_kind, HW_LOCK_UNKNOWN);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(working_when_mostly_on_cpu),   cmocka_unit_test(throttled_before_anything_else),
        cmocka_unit_test(starved_when_waiting_for_a_cpu), cmocka_unit_test(blocked_on_what_the_call_waits_for),
        cmocka_unit_test(paging_when_asleep_on_faults), cmocka_unit_test(runnable_on_a_busy_machine), cmocka_unit_test(lock_kinds_from_the_stack), cmocka_unit_test(the_threads_own_time),
        cmocka_unit_test(system_time_is_said), cmocka_unit_test(mixed_and_unknown),
        cmocka_unit_test(foreign_text_is_escaped),      cmocka_unit_test(syscall_table),
        cmocka_unit_test(a_restarted_call_is_the_stacks_wait), cmocka_unit_test(a_poll_waits_on_its_descriptors),
        cmocka_unit_test(a_second_cause_that_matters_is_named),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
