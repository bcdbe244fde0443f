/*
 * fleet_loops.c - a machine's worth of event loops, for the benchmark of
 * `hangwatch watch --all` (bench/fleet.py): many processes, several loop
 * threads each, every loop turning about RATE times a second, and a few of
 * them hanging at known moments.
 *
 *   fleet-loops PROCS THREADS RATE SECS HANGS HANG_MS
 *
 * Forks PROCS processes (1 to 1024) of THREADS loop threads each (1 to
 * 16); each thread runs an epoll_wait loop on an eventfd of its own with a
 * timeout that makes it turn RATE times a second, for SECS seconds.  HANGS
 * of the threads, spread over the processes and over the middle half of
 * the run, block HANG_MS in settle_the_ledger() (a nanosleep) in one turn,
 * each printing "hang PID TID UNIX_NS" as it begins.  Every process prints
 * "ready PID" once its threads turn and "turns PID N" (its loops' turns,
 * roughly: the count is not atomic) at its end; the parent exits once
 * every child has.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int threads_per_proc, rate, hang_ms;
static double secs;
static volatile unsigned long long turns;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long long realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

__attribute__((noinline)) static void settle_the_ledger(void)
{
    char line[96];
    int n = snprintf(line, sizeof line, "hang %d %ld %lld\n", (int)getpid(), (long)syscall(SYS_gettid), realtime_ns());
    ssize_t w = write(STDOUT_FILENO, line, (size_t)n);
    (void)w;
    struct timespec t = {hang_ms / 1000, (hang_ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0 && errno == EINTR)
        ;
}

/* A thread's loop; `hang_at` > 0: it hangs once that far into the run. */
static void *loop_thread(void *arg)
{
    double hang_at = *(double *)arg;
    int ep = epoll_create1(EPOLL_CLOEXEC), ev = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    struct epoll_event e = {.events = EPOLLIN};
    if (ep < 0 || ev < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, ev, &e) != 0)
        exit(1);
    int timeout_ms = rate > 0 && rate <= 1000 ? 1000 / rate : 1;
    double start = now_s(), end = start + secs;
    bool hung = false;
    for (double t = start; t < end; t = now_s()) {
        struct epoll_event got;
        epoll_wait(ep, &got, 1, timeout_ms);
        turns++;
        if (hang_at > 0 && !hung && t - start >= hang_at) {
            hung = true;
            settle_the_ledger();
        }
    }
    return NULL;
}

static void run_process(int index, int procs, int hangs)
{
    pthread_t t[16];
    double hang_at[16] = {0};
    /* hang k of HANGS goes to process k * PROCS / HANGS, its first thread,
     * at a moment in the run's middle half */
    for (int k = 0; k < hangs; k++)
        if (k * procs / hangs == index)
            hang_at[0] = secs / 4 + secs / 2 * k / hangs;
    for (int i = 0; i < threads_per_proc; i++)
        if (pthread_create(&t[i], NULL, loop_thread, &hang_at[i]) != 0)
            exit(1);
    usleep(100000);
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    for (int i = 0; i < threads_per_proc; i++)
        pthread_join(t[i], NULL);
    printf("turns %d %llu\n", (int)getpid(), turns);
}

int main(int argc, char **argv)
{
    if (argc != 7) {
        fprintf(stderr, "usage: fleet-loops PROCS THREADS RATE SECS HANGS HANG_MS\n");
        return 2;
    }
    int procs = atoi(argv[1]), hangs = atoi(argv[5]);
    threads_per_proc = atoi(argv[2]);
    rate = atoi(argv[3]);
    secs = atof(argv[4]);
    hang_ms = atoi(argv[6]);
    if (procs < 1 || procs > 1024 || threads_per_proc < 1 || threads_per_proc > 16 || rate < 1 || secs <= 0 ||
        hangs < 0 || hangs > procs || hang_ms < 0) {
        fprintf(stderr, "fleet-loops: bad arguments\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (int i = 0; i < procs; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            run_process(i, procs, hangs);
            _exit(0);
        }
        if (pid < 0)
            return 1;
    }
    while (wait(NULL) > 0 || errno == EINTR)
        ;
    return 0;
}
