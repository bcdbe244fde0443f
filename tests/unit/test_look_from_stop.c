/*
 * test_look_from_stop.c - a look that found the hung thread running,
 * corrected from the capture's stop (hw_blocked_look_from_stop): a stop
 * inside an interrupted call (rax a restart code), and a stop after the
 * kernel set the call up again (rip back on its `syscall` instruction, rax
 * the call or restart_syscall), which a busy machine leaves runnable on
 * its way back after early sampling's stops.  The registers are made up;
 * the instruction they point at is read from this process.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/capture/thread_time.h"

static const unsigned char syscall_instruction[2] = {0x0f, 0x05};
static const unsigned char two_nops[2] = {0x90, 0x90};

static hw_blocked_look running_look(void)
{
    hw_blocked_look look;
    memset(&look, 0, sizeof look);
    look.valid = true;
    look.state = 'R';
    look.fd = -1;
    look.wait_fd_count = -1;
    return look;
}

static struct user_regs_struct stopped_at(const unsigned char *code, long rax, long orig_rax)
{
    struct user_regs_struct regs;
    memset(&regs, 0, sizeof regs);
    regs.rip = (uintptr_t)code;
    regs.rax = (unsigned long long)rax;
    regs.orig_rax = (unsigned long long)orig_rax;
    return regs;
}

static void inside_the_interrupted_call(void **state)
{
    (void)state;
    hw_blocked_look look = running_look();
    struct user_regs_struct regs = stopped_at(two_nops, -516, SYS_clock_nanosleep);
    assert_true(hw_blocked_look_from_stop(getpid(), gettid(), &regs, &look));
    assert_true(look.in_syscall);
    assert_int_equal(look.syscall, SYS_clock_nanosleep);
    assert_int_equal(look.state, 'S');
}

/* rip back on the call's `syscall`, rax restart_syscall (a sleep, after
 * ERESTART_RESTARTBLOCK) or the call itself (a call restarted whole, after
 * ERESTARTSYS and its kin): the call, nanosleep here, either way. */
static void set_up_again(void **state)
{
    (void)state;
    const long set_up_as[] = {SYS_restart_syscall, SYS_nanosleep};
    for (size_t i = 0; i < sizeof set_up_as / sizeof set_up_as[0]; i++) {
        hw_blocked_look look = running_look();
        struct user_regs_struct regs = stopped_at(syscall_instruction, set_up_as[i], SYS_nanosleep);
        assert_true(hw_blocked_look_from_stop(getpid(), gettid(), &regs, &look));
        assert_true(look.in_syscall);
        assert_int_equal(look.syscall, SYS_nanosleep);
    }
}

/* read(2) returned 0: rax equals orig_rax, but rip is past the call. */
static void a_call_that_returned_is_not_one(void **state)
{
    (void)state;
    hw_blocked_look look = running_look();
    struct user_regs_struct regs = stopped_at(two_nops, SYS_read, SYS_read);
    assert_false(hw_blocked_look_from_stop(getpid(), gettid(), &regs, &look));
    assert_false(look.in_syscall);
    assert_int_equal(look.state, 'R');
    regs = stopped_at(syscall_instruction, 7, SYS_read);
    assert_false(hw_blocked_look_from_stop(getpid(), gettid(), &regs, &look));
    regs = stopped_at(syscall_instruction, SYS_restart_syscall, -1);
    assert_false(hw_blocked_look_from_stop(getpid(), gettid(), &regs, &look));
}

static void unreadable_code_is_not_a_call(void **state)
{
    (void)state;
    hw_blocked_look look = running_look();
    struct user_regs_struct regs = stopped_at(NULL, SYS_restart_syscall, SYS_nanosleep);
    assert_false(hw_blocked_look_from_stop(getpid(), gettid(), &regs, &look));
}

static void a_look_in_a_call_is_kept(void **state)
{
    (void)state;
    hw_blocked_look look = running_look();
    look.in_syscall = true;
    look.syscall = SYS_futex;
    struct user_regs_struct regs = stopped_at(syscall_instruction, SYS_restart_syscall, SYS_nanosleep);
    assert_false(hw_blocked_look_from_stop(getpid(), gettid(), &regs, &look));
    assert_int_equal(look.syscall, SYS_futex);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(inside_the_interrupted_call),
        cmocka_unit_test(set_up_again),
        cmocka_unit_test(a_call_that_returned_is_not_one),
        cmocka_unit_test(unreadable_code_is_not_a_call),
        cmocka_unit_test(a_look_in_a_call_is_kept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
