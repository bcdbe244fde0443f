/*
 * kernel_loop.c - event loops for the kernel observer's tests (hangwatch
 * watch, run --observer kernel): built dynamically and statically.
 *
 *   kernel_loop hang DELAY   turn every 100 ms; after DELAY seconds (or at
 *                            SIGUSR1, if sooner) a callback sleeps 3 s (a
 *                            hang), then 0.5 s more
 *   kernel_loop raw DELAY    the same, waiting through syscall(SYS_epoll_wait)
 *   kernel_loop idle SECS    turn every 100 ms for SECS seconds
 *   kernel_loop spin SECS    epoll_wait(..., 0) in a tight loop for SECS seconds
 *   kernel_loop thread DELAY a second thread runs the hanging loop of "hang";
 *                            the main thread turns idly until it is done
 *   kernel_loop fork DELAY   on SIGUSR1 (or after 5 s), a forked child runs
 *                            the hanging loop of "hang" (printing "child
 *                            PID"); the parent turns idly until the child
 *                            has exited
 *
 * Prints "ready PID" first and, for a hang, "slept S Q" with the sleep's own
 * measured length (the program's view of whether it was disturbed) and the
 * seconds of it the thread waited for a CPU (cpu_queue.h), and
 * "done" at the end.  Function bodies differ, so -O2 cannot fold them.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cpu_queue.h"

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static void render_report_synchronously(void)
{
    double start = now_seconds(), queued = queued_seconds();
    sleep(3);
    printf("slept %.3f %.3f\n", now_seconds() - start, queued_seconds() - queued);
    fflush(stdout);
}

__attribute__((noinline)) static int wait_for_events(int ep, int timeout_ms, int raw)
{
    struct epoll_event ev;
    if (raw)
        return (int)syscall(SYS_epoll_wait, ep, &ev, 1, timeout_ms);
    return epoll_wait(ep, &ev, 1, timeout_ms);
}

/* SIGUSR1: hang now (hang and raw), or fork now (fork). */
static volatile sig_atomic_t signalled;

static void on_sigusr1(int sig)
{
    (void)sig;
    signalled = 1;
}

static void take_sigusr1(void)
{
    struct sigaction sa = {.sa_handler = on_sigusr1};
    sigaction(SIGUSR1, &sa, NULL);
}

static int run_loop(double seconds, double hang_at, int raw, int timeout_ms)
{
    int ep = epoll_create1(0);
    double start = now_seconds();
    int hung = 0;
    unsigned long turns = 0;
    while (now_seconds() - start < seconds) {
        wait_for_events(ep, timeout_ms, raw);
        turns++;
        if (!hung && hang_at >= 0 && (signalled || now_seconds() - start >= hang_at)) {
            hung = 1;
            render_report_synchronously();
            seconds = now_seconds() - start + 0.5;
        }
    }
    printf("done after %lu turns\n", turns);
    return 0;
}

static double thread_hang_at;

static void *loop_thread(void *arg)
{
    (void)arg;
    run_loop(thread_hang_at + 100, thread_hang_at, 0, 100);
    return NULL;
}

static int main_waits_for_loop_thread(double hang_at)
{
    thread_hang_at = hang_at;
    pthread_t t;
    if (pthread_create(&t, NULL, loop_thread, NULL) != 0)
        return 1;
    int ep = epoll_create1(0);
    struct epoll_event ev;
    while (pthread_tryjoin_np(t, NULL) != 0)
        epoll_wait(ep, &ev, 1, 100);
    return 0;
}

static int parent_forks_a_loop(double hang_at)
{
    int ep = epoll_create1(0);
    struct epoll_event ev;
    take_sigusr1();
    double start = now_seconds();
    while (!signalled && now_seconds() - start < 5.0)
        epoll_wait(ep, &ev, 1, 100);
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        signalled = 0; /* its hang comes after its delay */
        printf("child %d\n", (int)getpid());
        fflush(stdout);
        _exit(run_loop(hang_at + 100, hang_at, 0, 100));
    }
    int status = 0;
    while (waitpid(child, &status, WNOHANG) == 0)
        epoll_wait(ep, &ev, 1, 100);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: kernel_loop hang|raw|idle|spin SECONDS\n");
        return 2;
    }
    double secs = atof(argv[2]);
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    if (strcmp(argv[1], "hang") == 0 || strcmp(argv[1], "raw") == 0) {
        take_sigusr1();
        return run_loop(secs + 100, secs, strcmp(argv[1], "raw") == 0, 100);
    }
    if (strcmp(argv[1], "idle") == 0)
        return run_loop(secs, -1, 0, 100);
    if (strcmp(argv[1], "spin") == 0)
        return run_loop(secs, -1, 0, 0);
    if (strcmp(argv[1], "thread") == 0)
        return main_waits_for_loop_thread(secs);
    if (strcmp(argv[1], "fork") == 0)
        return parent_forks_a_loop(secs);
    fprintf(stderr, "unknown mode %s\n", argv[1]);
    return 2;
}
