/*
 * test_wait_point.c - the rule that tells the loop's own wait from waits
 * nested in callbacks (wait_point.h), on the sequences of wait calls real
 * loops make: uvloop and asyncio with a blocking socket call, a Python
 * select loop whose callback sleeps, GLib's nested main loop, node's
 * spawnSync, a loop that starts after waits of its own, and the cases that
 * could fool it.  Stacks grow down: deeper means a lower stack pointer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "core/abi/wait_point.h"

#define LOOP_SITE 0x401000u
#define LOOP_SP 0x7ffff000u
#define NESTED_SITE 0x402000u
#define NESTED_SP (LOOP_SP - 0x400u)
#define SHALLOW_SP (LOOP_SP + 0xc000u) /* Python's select_select has a 48 KiB frame under the loop's select */
#define EPFD 3u
#define OTHER_EPFD 9u
#define POLL_ARRAY 0x55550000u
#define SOCKET_POLLFD 0x7fff1000u /* a socket's own pollfd, on the stack */

/* A thread's sequence of waits, with the turn (the slot's seq) the
 * observer passes: it changes at every wait the rule takes as the loop's,
 * as the observer's own stores change it. */
typedef struct thread_waits {
    hw_wait_point wp;
    uint64_t turn;
} thread_waits;

static bool wait_call(thread_waits *t, uint64_t site, uint64_t sp, uint64_t object, uint32_t rank)
{
    hw_wait_call c = {.site = site, .sp = sp, .turn = t->turn, .object = object, .rank = rank,
                      .call = HW_WAIT_CALL_POLL};
    bool loop = hw_wait_point_is_loop(&t->wp, &c);
    if (loop)
        t->turn += 2; /* waiting, then busy again */
    return loop;
}

static bool epoll_at(thread_waits *t, uint64_t site, uint64_t sp, uint64_t epfd)
{
    return wait_call(t, site, sp, epfd, HW_WAIT_RANK_MANY);
}

static bool socket_poll(thread_waits *t, uint64_t site, uint64_t sp)
{
    return wait_call(t, site, sp, SOCKET_POLLFD, HW_WAIT_RANK_ONE);
}

static bool sleep_select(thread_waits *t, uint64_t site, uint64_t sp)
{
    return wait_call(t, site, sp, 0, HW_WAIT_RANK_SLEEP);
}

static thread_waits fresh(void)
{
    thread_waits t;
    memset(&t, 0, sizeof t);
    return t;
}

/* uvloop: the loop waits once (asyncio.sleep), then the first callback's
 * urlopen polls its socket three times from one site (connect, send,
 * recv) before the loop waits again.  The polls rank below the epoll seen
 * first: work, though they repeat first. */
static void test_uvloop_first_callback_polls_a_socket(void **state)
{
    (void)state;
    thread_waits t = fresh();
    assert_true(epoll_at(&t, LOOP_SITE, LOOP_SP, EPFD));
    assert_false(socket_poll(&t, NESTED_SITE, NESTED_SP));
    assert_false(socket_poll(&t, NESTED_SITE, NESTED_SP));
    assert_false(socket_poll(&t, NESTED_SITE, NESTED_SP)); /* the 3 s recv: still work */
    assert_int_equal(t.wp.learned, HW_WAIT_LEARNED_NOT_YET);
    assert_true(epoll_at(&t, LOOP_SITE, LOOP_SP, EPFD));
    assert_int_equal(t.wp.learned, HW_WAIT_LEARNED_REPEATED);
    assert_int_equal(t.wp.loop_object, EPFD);
    for (int i = 0; i < 100; i++) /* however many polls a big download makes */
        assert_false(socket_poll(&t, NESTED_SITE, NESTED_SP));
    assert_true(epoll_at(&t, LOOP_SITE, LOOP_SP, EPFD));
}

/* A hand-written select loop under Python 3.11+: the callback runs in the
 * same C frame as the loop, so its socket's poll is *shallower* than the
 * loop's select (select_select's big frame); depth says nothing, the rank
 * says it all.  Python 3.8-3.10's time.sleep is select(0, NULL, ...): a
 * sleep, never the loop's. */
static void test_python_select_loop_with_shallower_callback_waits(void **state)
{
    (void)state;
    thread_waits t = fresh();
    uint64_t fd_sets = LOOP_SP + 0x100u;
    assert_true(wait_call(&t, LOOP_SITE, LOOP_SP, fd_sets, HW_WAIT_RANK_MANY));
    assert_true(wait_call(&t, LOOP_SITE, LOOP_SP, fd_sets, HW_WAIT_RANK_MANY));
    assert_int_equal(t.wp.learned, HW_WAIT_LEARNED_REPEATED);
    for (int request = 0; request < 5; request++) {
        assert_false(socket_poll(&t, NESTED_SITE, SHALLOW_SP));        /* connect */
        assert_false(socket_poll(&t, NESTED_SITE + 0x40u, SHALLOW_SP)); /* send */
        assert_false(socket_poll(&t, NESTED_SITE + 0x80u, SHALLOW_SP)); /* recv */
        assert_false(sleep_select(&t, 0x403000u, SHALLOW_SP));          /* time.sleep(3) */
        assert_true(wait_call(&t, LOOP_SITE, LOOP_SP, fd_sets, HW_WAIT_RANK_MANY));
    }
    assert_int_equal(t.wp.loop_site, LOOP_SITE);
}

/* Before any loop wait is seen, a sleep counts (nothing better is known);
 * once a descriptor wait is seen, a sleep elsewhere is a callback's. */
static void test_sleep_counts_only_until_something_better_is_seen(void **state)
{
    (void)state;
    thread_waits t = fresh();
    assert_true(sleep_select(&t, 0x403000u, LOOP_SP));
    assert_true(sleep_select(&t, 0x403000u, LOOP_SP));
    assert_int_equal(t.wp.learned, HW_WAIT_LEARNED_NOT_YET); /* a sleep is never learned */
    assert_true(epoll_at(&t, LOOP_SITE, LOOP_SP, EPFD));
    assert_false(sleep_select(&t, 0x403000u, LOOP_SP));
    assert_true(epoll_at(&t, LOOP_SITE, LOOP_SP, EPFD));
    assert_false(sleep_select(&t, 0x403000u, LOOP_SP));
    /* the loop's own select with nothing in its sets this turn */
    assert_true(sleep_select(&t, LOOP_SITE, LOOP_SP));
}

/* GLib: a modal dialog runs g_main_loop_run on the same context, deeper,
 * from the same site on the same poll array: the program's events are
 * dispatched, so those waits are the loop's.  A sync call that iterates a
 * private context (its own array) is work. */
static void test_nested_main_loop_on_the_same_context_is_the_loop(void **state)
{
    (void)state;
    thread_waits t = fresh();
    assert_true(wait_call(&t, LOOP_SITE, LOOP_SP, POLL_ARRAY, HW_WAIT_RANK_MANY));
    assert_true(wait_call(&t, LOOP_SITE, LOOP_SP, POLL_ARRAY, HW_WAIT_RANK_MANY));
    for (int i = 0; i < 50; i++) /* the dialog's loop */
        assert_true(wait_call(&t, LOOP_SITE, NESTED_SP, POLL_ARRAY, HW_WAIT_RANK_MANY));
    assert_true(wait_call(&t, LOOP_SITE, LOOP_SP, POLL_ARRAY, HW_WAIT_RANK_MANY));
    for (int i = 0; i < 5; i++) /* a private context, iterated a few times */
        assert_false(wait_call(&t, LOOP_SITE, NESTED_SP, POLL_ARRAY + 0x1000u, HW_WAIT_RANK_MANY));
    assert_true(wait_call(&t, LOOP_SITE, LOOP_SP, POLL_ARRAY, HW_WAIT_RANK_MANY));
}

/* node's spawnSync and execSync run a second libuv loop (its own epoll
 * instance) from a callback: the same site, deeper, another object. */
static void test_spawn_sync_second_loop_is_work(void **state)
{
    (void)state;
    thread_waits t = fresh();
    epoll_at(&t, LOOP_SITE, LOOP_SP, EPFD);
    epoll_at(&t, LOOP_SITE, LOOP_SP, EPFD);
    for (int call = 0; call < 3; call++) {
        for (int i = 0; i < 4; i++)
            assert_false(epoll_at(&t, LOOP_SITE, NESTED_SP, OTHER_EPFD + (uint64_t)call));
        assert_true(epoll_at(&t, LOOP_SITE, LOOP_SP, EPFD));
    }
    assert_int_equal(t.wp.loop_object, EPFD);
}

/* A select on two descriptors once at start-up, then a loop that polls
 * one descriptor: the one-off is not waited for forever.  No deeper than
 * the one-off, the loop takes its place at its second turn; deeper (as a
 * callback's socket poll would be), at its MOVE_AFTER-th. */
static void test_start_up_one_off_then_a_loop_of_lower_rank(void **state)
{
    (void)state;
    thread_waits t = fresh();
    assert_true(wait_call(&t, NESTED_SITE, LOOP_SP - 0x80u, 0x7fff2000u, HW_WAIT_RANK_MANY));
    assert_false(wait_call(&t, LOOP_SITE, LOOP_SP, POLL_ARRAY, HW_WAIT_RANK_ONE));
    assert_true(wait_call(&t, LOOP_SITE, LOOP_SP, POLL_ARRAY, HW_WAIT_RANK_ONE));
    assert_int_equal(t.wp.learned, HW_WAIT_LEARNED_MOVED);
    thread_waits deeper = fresh();
    assert_true(wait_call(&deeper, NESTED_SITE, LOOP_SP + 0x80u, 0x7fff2000u, HW_WAIT_RANK_MANY));
    for (int i = 1; i < HW_WAIT_POINT_MOVE_AFTER; i++)
        assert_false(wait_call(&deeper, LOOP_SITE, LOOP_SP, POLL_ARRAY, HW_WAIT_RANK_ONE));
    assert_true(wait_call(&deeper, LOOP_SITE, LOOP_SP, POLL_ARRAY, HW_WAIT_RANK_ONE));
    for (int i = 0; i < 10; i++)
        assert_true(wait_call(&t, LOOP_SITE, LOOP_SP, POLL_ARRAY, HW_WAIT_RANK_ONE));
    /* its callbacks' socket polls, deeper, are work */
    assert_false(socket_poll(&t, NESTED_SITE + 0x40u, NESTED_SP));
    assert_false(socket_poll(&t, NESTED_SITE + 0x40u, NESTED_SP));
}

/* A program that connects with a socket timeout at start-up (its polls
 * repeat and are learned), then runs its epoll loop: the loop's wait ranks
 * higher and takes the place once it repeats. */
static void test_start_up_socket_waits_then_the_loop(void **state)
{
    (void)state;
    thread_waits t = fresh();
    assert_true(socket_poll(&t, NESTED_SITE, LOOP_SP + 0x200u));
    assert_true(socket_poll(&t, NESTED_SITE, LOOP_SP + 0x200u));
    assert_int_equal(t.wp.loop_rank, HW_WAIT_RANK_ONE);
    assert_false(epoll_at(&t, LOOP_SITE, LOOP_SP, EPFD)); /* once: not yet */
    assert_true(epoll_at(&t, LOOP_SITE, LOOP_SP, EPFD));
    assert_int_equal(t.wp.learned, HW_WAIT_LEARNED_MOVED);
    assert_int_equal(t.wp.loop_object, EPFD);
    assert_false(socket_poll(&t, NESTED_SITE, NESTED_SP));
    assert_false(socket_poll(&t, NESTED_SITE, NESTED_SP));
    assert_true(epoll_at(&t, LOOP_SITE, LOOP_SP, EPFD));
}

/* asyncio.run(setup()) then asyncio.run(main()): the first loop's epoll
 * instance is closed and the second has another; from the loop's site at
 * the same depth, its first wait is the loop's, moved.  So is a poll loop's
 * wait on its array reallocated (Python's select.poll, GLib): the first
 * wait on the new array may be a long idle one.  From another site, two
 * waits with none of the old loop's between move it. */
static void test_a_second_loop_at_the_same_depth_moves_it(void **state)
{
    (void)state;
    thread_waits t = fresh();
    epoll_at(&t, LOOP_SITE, LOOP_SP, EPFD);
    epoll_at(&t, LOOP_SITE, LOOP_SP, EPFD);
    assert_true(epoll_at(&t, LOOP_SITE, LOOP_SP, OTHER_EPFD));
    assert_int_equal(t.wp.learned, HW_WAIT_LEARNED_MOVED);
    assert_int_equal(t.wp.loop_object, OTHER_EPFD);
    assert_true(wait_call(&t, LOOP_SITE, LOOP_SP, POLL_ARRAY, HW_WAIT_RANK_MANY));
    assert_true(wait_call(&t, LOOP_SITE, LOOP_SP, POLL_ARRAY + 0x1000u, HW_WAIT_RANK_MANY));
    assert_int_equal(t.wp.loop_object, POLL_ARRAY + 0x1000u);
    assert_false(epoll_at(&t, NESTED_SITE, LOOP_SP, EPFD));
    assert_true(epoll_at(&t, NESTED_SITE, LOOP_SP, EPFD));
    assert_int_equal(t.wp.loop_site, NESTED_SITE);
}

/* A nested wait that repeats, but with a wait of the loop's between each
 * time, never moves the loop (a callback that polls once per request). */
static void test_a_wait_each_turn_between_loop_waits_does_not_move_it(void **state)
{
    (void)state;
    thread_waits t = fresh();
    epoll_at(&t, LOOP_SITE, LOOP_SP, EPFD);
    epoll_at(&t, LOOP_SITE, LOOP_SP, EPFD);
    for (int i = 0; i < 100; i++) {
        assert_false(epoll_at(&t, NESTED_SITE, LOOP_SP + 0x100u, OTHER_EPFD)); /* shallower, same rank */
        assert_true(epoll_at(&t, LOOP_SITE, LOOP_SP, EPFD));
    }
    assert_int_equal(t.wp.learned, HW_WAIT_LEARNED_REPEATED);
}

/* A start-up loop (a temporary epoll instance, then closed) learned first,
 * and the real loop deeper: after HW_WAIT_POINT_MOVE_AFTER of its waits
 * with none of the old one's, the learned loop is taken to be gone. */
static void test_a_deeper_loop_that_keeps_waiting_moves_it_at_last(void **state)
{
    (void)state;
    thread_waits t = fresh();
    epoll_at(&t, LOOP_SITE, LOOP_SP, EPFD);
    epoll_at(&t, LOOP_SITE, LOOP_SP, EPFD);
    for (int i = 1; i < HW_WAIT_POINT_MOVE_AFTER; i++)
        assert_false(epoll_at(&t, NESTED_SITE, NESTED_SP, OTHER_EPFD));
    assert_true(epoll_at(&t, NESTED_SITE, NESTED_SP, OTHER_EPFD));
    assert_int_equal(t.wp.learned, HW_WAIT_LEARNED_MOVED);
    assert_true(epoll_at(&t, NESTED_SITE, NESTED_SP, OTHER_EPFD));
}

/* Primed from the wait a thread was blocked in when watching began: the
 * object is the loop's; its site comes with its next wait; a callback's
 * socket polls in the first turn are work. */
static void test_primed_from_the_thread_s_wait(void **state)
{
    (void)state;
    thread_waits t = fresh();
    hw_wait_point_prime(&t.wp, EPFD, HW_WAIT_RANK_MANY, HW_WAIT_CALL_EPOLL_WAIT);
    assert_false(socket_poll(&t, NESTED_SITE, NESTED_SP));
    assert_false(socket_poll(&t, NESTED_SITE, NESTED_SP));
    assert_false(sleep_select(&t, 0x403000u, NESTED_SP));
    assert_true(epoll_at(&t, LOOP_SITE, LOOP_SP, EPFD));
    assert_int_equal(t.wp.loop_site, LOOP_SITE);
    assert_int_equal(t.wp.learned, HW_WAIT_LEARNED_PRIMED);
    assert_false(epoll_at(&t, LOOP_SITE, NESTED_SP, OTHER_EPFD));
}

/* The same identity from a new stack position (Python 3.12's select moves
 * by a few bytes between turns) is still the loop's. */
static void test_the_loop_s_wait_from_a_moved_stack_is_the_loop(void **state)
{
    (void)state;
    thread_waits t = fresh();
    epoll_at(&t, LOOP_SITE, LOOP_SP, EPFD);
    epoll_at(&t, LOOP_SITE, LOOP_SP - 0x60u, EPFD);
    assert_int_equal(t.wp.learned, HW_WAIT_LEARNED_REPEATED);
    assert_true(epoll_at(&t, LOOP_SITE, LOOP_SP, EPFD));
    assert_true(epoll_at(&t, LOOP_SITE, LOOP_SP - 0x60u, EPFD));
}

/* CPython 3.11+: select.select's call from the loop's bytecode is
 * specialized after a few turns and skips the generic call's C frames, so
 * select_select's frame, and the fd_set in it, move up by the same amount.
 * The first wait of the shallower call (the one that idles, if the loop
 * goes idle on that turn) is the loop's at once; a callback's select from
 * deeper frames, at the same distance from its stack pointer, is not; nor
 * is a shallower call whose set is not on the stack. */
static void test_python_select_loop_specialized_mid_run(void **state)
{
    (void)state;
    const uint64_t generic_sp = LOOP_SP, specialized_sp = LOOP_SP + 0x60u, set_above = 0xc100u;
    thread_waits t = fresh();
    wait_call(&t, LOOP_SITE, generic_sp, generic_sp + set_above, HW_WAIT_RANK_MANY);
    wait_call(&t, LOOP_SITE, generic_sp, generic_sp + set_above, HW_WAIT_RANK_MANY);
    assert_int_equal(t.wp.learned, HW_WAIT_LEARNED_REPEATED);
    assert_true(wait_call(&t, LOOP_SITE, specialized_sp, specialized_sp + set_above, HW_WAIT_RANK_MANY));
    assert_int_equal(t.wp.learned, HW_WAIT_LEARNED_MOVED);
    assert_int_equal(t.wp.loop_object, specialized_sp + set_above);
    assert_true(wait_call(&t, LOOP_SITE, specialized_sp, specialized_sp + set_above, HW_WAIT_RANK_MANY));
    /* a callback's select.select through C frames of its own */
    assert_false(wait_call(&t, LOOP_SITE, NESTED_SP, NESTED_SP + set_above, HW_WAIT_RANK_MANY));
    assert_true(wait_call(&t, LOOP_SITE, specialized_sp, specialized_sp + set_above, HW_WAIT_RANK_MANY));
    /* shallower, but elsewhere in its frame, or off the stack */
    assert_false(wait_call(&t, LOOP_SITE, specialized_sp + 0x40u, specialized_sp + 0x40u + set_above + 0x10u, HW_WAIT_RANK_MANY));
    assert_false(wait_call(&t, LOOP_SITE, specialized_sp + 0x80u, POLL_ARRAY, HW_WAIT_RANK_MANY));
    assert_int_equal(t.wp.loop_object, specialized_sp + set_above);
}

/* A poll loop waiting for its children's pidfds: the set shrinks as they
 * exit (the array reallocated) down to one descriptor, the last child's,
 * from the same call at the same depth.  That is still the loop's wait,
 * not a callback's socket poll (which is deeper, and stays work); and so
 * is the set when it grows again. */
static void test_poll_loop_down_to_one_descriptor_is_the_loop(void **state)
{
    (void)state;
    thread_waits t = fresh();
    wait_call(&t, LOOP_SITE, LOOP_SP, POLL_ARRAY, HW_WAIT_RANK_MANY);
    wait_call(&t, LOOP_SITE, LOOP_SP, POLL_ARRAY, HW_WAIT_RANK_MANY);
    assert_int_equal(t.wp.learned, HW_WAIT_LEARNED_REPEATED);
    assert_true(wait_call(&t, LOOP_SITE, LOOP_SP, POLL_ARRAY + 0x40u, HW_WAIT_RANK_MANY));
    assert_true(wait_call(&t, LOOP_SITE, LOOP_SP, POLL_ARRAY + 0x80u, HW_WAIT_RANK_ONE));
    assert_true(wait_call(&t, LOOP_SITE, LOOP_SP, POLL_ARRAY + 0x80u, HW_WAIT_RANK_ONE));
    assert_false(socket_poll(&t, NESTED_SITE, NESTED_SP));
    assert_false(wait_call(&t, LOOP_SITE, NESTED_SP, SOCKET_POLLFD, HW_WAIT_RANK_ONE)); /* the same call, deeper */
    assert_true(wait_call(&t, LOOP_SITE, LOOP_SP, POLL_ARRAY, HW_WAIT_RANK_MANY));
    assert_int_equal(t.wp.loop_rank, HW_WAIT_RANK_MANY);
    assert_false(sleep_select(&t, NESTED_SITE, NESTED_SP));
}

static void test_busy_polling_loop_is_its_own_wait(void **state)
{
    (void)state;
    thread_waits t = fresh();
    for (int i = 0; i < 1000; i++)
        assert_true(epoll_at(&t, LOOP_SITE, LOOP_SP, EPFD));
}

static void test_ranks_and_objects_from_arguments(void **state)
{
    (void)state;
    assert_int_equal(hw_wait_rank_of_poll(0), HW_WAIT_RANK_SLEEP);
    assert_int_equal(hw_wait_rank_of_poll(1), HW_WAIT_RANK_ONE);
    assert_int_equal(hw_wait_rank_of_poll(7), HW_WAIT_RANK_MANY);
    assert_int_equal(hw_wait_select_object(0, 0, 0, 0), 0);
    assert_int_equal(hw_wait_select_object(0, 0x1000, 0, 0), 0); /* nfds 0: nothing is looked at */
    assert_int_equal(hw_wait_select_object(4, 0, 0x2000, 0x3000), 0x2000);
    assert_int_equal(hw_wait_rank_of_select(0), HW_WAIT_RANK_SLEEP);
    assert_int_equal(hw_wait_rank_of_select(0x2000), HW_WAIT_RANK_MANY);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_uvloop_first_callback_polls_a_socket),
        cmocka_unit_test(test_python_select_loop_with_shallower_callback_waits),
        cmocka_unit_test(test_sleep_counts_only_until_something_better_is_seen),
        cmocka_unit_test(test_nested_main_loop_on_the_same_context_is_the_loop),
        cmocka_unit_test(test_spawn_sync_second_loop_is_work),
        cmocka_unit_test(test_start_up_socket_waits_then_the_loop),
        cmocka_unit_test(test_start_up_one_off_then_a_loop_of_lower_rank),
        cmocka_unit_test(test_a_second_loop_at_the_same_depth_moves_it),
        cmocka_unit_test(test_a_wait_each_turn_between_loop_waits_does_not_move_it),
        cmocka_unit_test(test_a_deeper_loop_that_keeps_waiting_moves_it_at_last),
        cmocka_unit_test(test_primed_from_the_thread_s_wait),
        cmocka_unit_test(test_the_loop_s_wait_from_a_moved_stack_is_the_loop),
        cmocka_unit_test(test_python_select_loop_specialized_mid_run),
        cmocka_unit_test(test_poll_loop_down_to_one_descriptor_is_the_loop),
        cmocka_unit_test(test_busy_polling_loop_is_its_own_wait),
        cmocka_unit_test(test_ranks_and_objects_from_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
