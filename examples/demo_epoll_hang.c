/*
 * demo_epoll_hang.c - the demo: an ordinary epoll event loop whose timer
 * callback blocks the main thread for four seconds, as the seed's
 * HTHangValidation demo does with Thread.sleep(forTimeInterval: 4).
 *
 *   main -> run_event_loop -> on_timer_tick -> trigger_foreground_hang
 *        -> block_main_thread_for_four_seconds -> sleep(4)
 *
 * It prints how long the sleep really took (hangwatch must not shorten it)
 * and how much of that it waited for a CPU (a busy machine's share),
 * keeps looping for a little while and exits 0.  The functions are noinline
 * and the file is built with -fno-optimize-sibling-calls so every frame
 * stays on the stack for the report.
 */
#include "cpu_wait.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define TICK_MS 100
#define HANG_AT_TICK 3
#define LAST_TICK 10

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static void block_main_thread_for_four_seconds(void)
{
    double start = now_seconds(), waited = cpu_wait_seconds();
    sleep(4);
    printf("demo: sleep(4) on the main thread took %.3f s, %.3f s waiting for a CPU\n", now_seconds() - start,
           cpu_wait_seconds() - waited);
    fflush(stdout);
}

__attribute__((noinline)) static void trigger_foreground_hang(void)
{
    block_main_thread_for_four_seconds();
}

__attribute__((noinline)) static void on_timer_tick(int tick)
{
    if (tick == HANG_AT_TICK)
        trigger_foreground_hang();
}

__attribute__((noinline)) static int run_event_loop(int timer_fd)
{
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) {
        perror("epoll_create1");
        return 1;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = timer_fd};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, timer_fd, &ev) != 0) {
        perror("epoll_ctl");
        return 1;
    }
    int tick = 0;
    while (tick < LAST_TICK) {
        struct epoll_event events[8];
        int n = epoll_wait(ep, events, 8, -1);
        for (int i = 0; i < n; i++) {
            uint64_t expirations;
            if (read(events[i].data.fd, &expirations, sizeof expirations) == (ssize_t)sizeof expirations)
                on_timer_tick(++tick);
        }
    }
    close(ep);
    return 0;
}

int main(void)
{
    int timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    if (timer_fd < 0) {
        perror("timerfd_create");
        return 1;
    }
    struct itimerspec spec = {
        .it_interval = {0, TICK_MS * 1000000L},
        .it_value = {0, TICK_MS * 1000000L},
    };
    timerfd_settime(timer_fd, 0, &spec, NULL);
    printf("demo: event loop running; tick %d will block the main thread in sleep(4)\n", HANG_AT_TICK);
    fflush(stdout);
    int rc = run_event_loop(timer_fd);
    close(timer_fd);
    printf("demo: loop finished\n");
    return rc;
}
