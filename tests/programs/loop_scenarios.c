/*
 * loop_scenarios.c - small event-loop programs the integration tests run
 * under hangwatch, one behaviour each:
 *
 *   idle SECS      wait in epoll_wait for SECS seconds, doing nothing
 *   busypoll SECS  spin on epoll_wait(..., 0) with a little work per turn
 *   cpuspin SECS   a timer callback burns the CPU for SECS seconds
 *   abca SECS      one callback blocked SECS in block_in_a(), then as long
 *                  in block_in_b(), block_in_c() and block_in_a() again
 *
 * Each prints one line, "scenario: <name> done in <seconds>", and exits 0.
 * Built like the demo (noinline, -fno-optimize-sibling-calls) so the stack in
 * a report names the functions below.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int make_timer(double first_seconds)
{
    int fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    if (fd < 0) {
        perror("timerfd_create");
        exit(1);
    }
    struct itimerspec spec = {0};
    spec.it_value.tv_sec = (time_t)first_seconds;
    spec.it_value.tv_nsec = (long)((first_seconds - (double)(time_t)first_seconds) * 1e9);
    if (spec.it_value.tv_sec == 0 && spec.it_value.tv_nsec == 0)
        spec.it_value.tv_nsec = 1;
    timerfd_settime(fd, 0, &spec, NULL);
    return fd;
}

static int make_epoll(int fd)
{
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
        perror("epoll");
        exit(1);
    }
    return ep;
}

static volatile uint64_t g_sink;

__attribute__((noinline)) static void spin_on_cpu(double seconds)
{
    double end = now_seconds() + seconds;
    while (now_seconds() < end)
        for (int i = 0; i < 1000; i++)
            g_sink = g_sink * 31 + (uint64_t)i;
}

__attribute__((noinline)) static void a_little_work(void)
{
    for (int i = 0; i < 200; i++)
        g_sink = g_sink * 17 + (uint64_t)i;
}

static int run_idle(double seconds)
{
    int timer = make_timer(seconds);
    int ep = make_epoll(timer);
    struct epoll_event ev;
    while (epoll_wait(ep, &ev, 1, -1) != 1)
        ;
    return 0;
}

static int run_busypoll(double seconds)
{
    int timer = make_timer(seconds);
    int ep = make_epoll(timer);
    struct epoll_event ev;
    unsigned long turns = 0;
    for (;;) {
        int n = epoll_wait(ep, &ev, 1, 0);
        if (n == 1)
            break;
        a_little_work();
        turns++;
    }
    fprintf(stderr, "scenario: busypoll made %lu turns\n", turns);
    return 0;
}

__attribute__((noinline)) static void on_spin_timer(double seconds)
{
    spin_on_cpu(seconds);
}

static void sleep_seconds(double seconds)
{
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

__attribute__((noinline)) static void block_in_a(double seconds)
{
    g_sink += 1; /* distinct bodies: -O2 would fold identical functions into one */
    sleep_seconds(seconds);
}

__attribute__((noinline)) static void block_in_b(double seconds)
{
    g_sink += 2; /* distinct bodies: -O2 would fold identical functions into one */
    sleep_seconds(seconds);
}

__attribute__((noinline)) static void block_in_c(double seconds)
{
    g_sink += 3; /* distinct bodies: -O2 would fold identical functions into one */
    sleep_seconds(seconds);
}

__attribute__((noinline)) static void on_abca_timer(double seconds)
{
    block_in_a(seconds);
    block_in_b(seconds);
    block_in_c(seconds);
    block_in_a(seconds);
}

/* Run `callback(seconds)` from a timer 0.2 s after start, then wait once
 * more (a real wait) so the busy stretch ends at the loop's wait point. */
static int run_from_timer(void (*callback)(double), double seconds)
{
    int timer = make_timer(0.2);
    int ep = make_epoll(timer);
    struct epoll_event ev;
    while (epoll_wait(ep, &ev, 1, -1) != 1)
        ;
    uint64_t expirations;
    if (read(timer, &expirations, sizeof expirations) < 0)
        return 1;
    callback(seconds);
    epoll_wait(ep, &ev, 1, 300);
    return 0;
}

static int run_cpuspin(double seconds)
{
    return run_from_timer(on_spin_timer, seconds);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s idle|busypoll|cpuspin|abca SECONDS\n", argv[0]);
        return 2;
    }
    double seconds = atof(argv[2]);
    double start = now_seconds();
    int rc;
    if (strcmp(argv[1], "idle") == 0)
        rc = run_idle(seconds);
    else if (strcmp(argv[1], "busypoll") == 0)
        rc = run_busypoll(seconds);
    else if (strcmp(argv[1], "cpuspin") == 0)
        rc = run_cpuspin(seconds);
    else if (strcmp(argv[1], "abca") == 0)
        rc = run_from_timer(on_abca_timer, seconds);
    else {
        fprintf(stderr, "unknown scenario %s\n", argv[1]);
        return 2;
    }
    printf("scenario: %s done in %.3f\n", argv[1], now_seconds() - start);
    return rc;
}
