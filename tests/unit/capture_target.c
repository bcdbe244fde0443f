/*
 * capture_target.c - the program test_capture_unwind stops and unwinds.
 *
 * Its main thread blocks in a known call chain, main -> outer_function ->
 * middle_function -> sleep (or spin_function, vfork_function), while two
 * more threads block
 * in cond_waiter_function (pthread_cond_wait) and pipe_reader_function
 * (read on a pipe).  Once the threads are on their way to block it prints
 * "ready MAIN_TID COND_TID PIPE_TID" on stdout; the test then waits in
 * /proc/PID/task/TID/syscall until each one really sits in its system call.
 *
 * Modes (argv[1]):
 *   hang     sleep(5) in a loop, forever (the test kills it)
 *   timed    one sleep(2), measured with CLOCK_MONOTONIC; prints
 *            "slept SECONDS" and exits 0 if it lasted 1.95..2.2 s, else 3
 *   spin     spin_function calls clock_gettime (the vDSO) for up to 60 s
 *   signals  counts SIGRTMIN in a handler (main thread only) while main
 *            blocks in read(0); at EOF on stdin prints "signals COUNT", exits 0
 *   vfork    vfork_function: a vfork child reads one byte from stdin, then
 *            the parent prints "vfork done" and goes on as in hang
 *   leader_exit  the main thread calls pthread_exit, the others block on
 *   epoll    epoll_function waits in epoll_wait(-1) on stdin; a call that
 *            returns without the byte the test writes (EINTR) prints
 *            "epoll interrupted" and exits 3, else "epoll woke" and exit 0
 *
 * Build with -O2 -g -fno-optimize-sibling-calls (frame pointers optional):
 * the chain's functions are external and noinline, and each does work after
 * its call so no call becomes a jump.
 */
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { MODE_HANG, MODE_TIMED, MODE_SPIN, MODE_SIGNALS, MODE_VFORK, MODE_LEADER_EXIT, MODE_EPOLL };

static volatile int mode;
static volatile unsigned sleep_seconds = 5;
static volatile unsigned long sink;
static atomic_ulong signal_count;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t never_signalled = PTHREAD_COND_INITIALIZER;
static int block_pipe[2];
static sem_t started;
static atomic_int thread_tids[2];

void *cond_waiter_function(void *arg);
void *pipe_reader_function(void *arg);
void spin_function(void);
void vfork_function(void);
void epoll_function(void);
void middle_function(void);
void outer_function(void);

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) void *cond_waiter_function(void *arg)
{
    (void)arg;
    atomic_store(&thread_tids[0], gettid());
    pthread_mutex_lock(&lock);
    sem_post(&started);
    for (;;)
        pthread_cond_wait(&never_signalled, &lock);
    return NULL;
}

__attribute__((noinline)) void *pipe_reader_function(void *arg)
{
    (void)arg;
    atomic_store(&thread_tids[1], gettid());
    sem_post(&started);
    char c;
    ssize_t n = read(block_pipe[0], &c, 1); /* nobody writes */
    sink += (unsigned long)n;
    return NULL;
}

__attribute__((noinline)) void spin_function(void)
{
    double end = now_s() + 60.0;
    struct timespec ts;
    do {
        clock_gettime(CLOCK_MONOTONIC, &ts);
        sink += (unsigned long)ts.tv_nsec;
    } while ((double)ts.tv_sec + (double)ts.tv_nsec / 1e9 < end);
}

/* The parent of a vfork waits for its child in a killable sleep, which
 * PTRACE_INTERRUPT does not break: the capture times out on it. */
__attribute__((noinline)) void vfork_function(void)
{
    pid_t child = vfork();
    if (child == 0) {
        char c;
        syscall(SYS_read, 0, &c, 1); /* until the test writes a byte */
        _exit(0);
    }
    if (child > 0)
        waitpid(child, NULL, 0);
    printf("vfork done\n");
    fflush(stdout);
}

/* An event loop's wait with no timeout: a stop (the capture's) must not
 * make it return. */
__attribute__((noinline)) void epoll_function(void)
{
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = 0};
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, 0, &ev) != 0)
        exit(2);
    int n = epoll_wait(ep, &ev, 1, -1);
    if (n == 1)
        printf("epoll woke\n");
    else
        printf("epoll interrupted (%s)\n", n < 0 ? strerror(errno) : "no event");
    fflush(stdout);
    exit(n == 1 ? 0 : 3);
}

__attribute__((noinline)) void middle_function(void)
{
    if (mode == MODE_SPIN)
        spin_function();
    else if (mode == MODE_EPOLL)
        epoll_function();
    else if (mode == MODE_VFORK)
        vfork_function();
    else
        sink += sleep(sleep_seconds);
    sink++;
}

__attribute__((noinline)) void outer_function(void)
{
    middle_function();
    sink++;
}

static void on_signal(int sig)
{
    (void)sig;
    atomic_fetch_add(&signal_count, 1);
}

int main(int argc, char **argv)
{
    const char *m = argc > 1 ? argv[1] : "hang";
    if (strcmp(m, "hang") == 0)
        mode = MODE_HANG;
    else if (strcmp(m, "timed") == 0)
        mode = MODE_TIMED, sleep_seconds = 2;
    else if (strcmp(m, "spin") == 0)
        mode = MODE_SPIN;
    else if (strcmp(m, "signals") == 0)
        mode = MODE_SIGNALS;
    else if (strcmp(m, "vfork") == 0)
        mode = MODE_VFORK;
    else if (strcmp(m, "leader_exit") == 0)
        mode = MODE_LEADER_EXIT;
    else if (strcmp(m, "epoll") == 0)
        mode = MODE_EPOLL;
    else {
        fprintf(stderr, "usage: %s hang|timed|spin|signals|vfork|leader_exit|epoll\n", argv[0]);
        return 2;
    }
    sigset_t rt;
    sigemptyset(&rt);
    sigaddset(&rt, SIGRTMIN);
    if (mode == MODE_SIGNALS) {
        /* Only the main thread takes them (the others inherit the block), so
         * all are handled before main reads EOF and prints the count. */
        pthread_sigmask(SIG_BLOCK, &rt, NULL);
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sa.sa_flags = SA_RESTART;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGRTMIN, &sa, NULL);
    }
    if (pipe(block_pipe) != 0 || sem_init(&started, 0, 0) != 0)
        return 2;
    pthread_t a, b;
    if (pthread_create(&a, NULL, cond_waiter_function, NULL) != 0 ||
        pthread_create(&b, NULL, pipe_reader_function, NULL) != 0)
        return 2;
    sem_wait(&started);
    sem_wait(&started);
    printf("ready %d %d %d\n", (int)gettid(), atomic_load(&thread_tids[0]), atomic_load(&thread_tids[1]));
    fflush(stdout);

    switch (mode) {
    case MODE_TIMED: {
        double t0 = now_s();
        outer_function();
        double slept = now_s() - t0;
        printf("slept %.6f\n", slept);
        fflush(stdout);
        return slept >= 1.95 && slept <= 2.2 ? 0 : 3;
    }
    case MODE_SIGNALS: {
        pthread_sigmask(SIG_UNBLOCK, &rt, NULL);
        char buf[64];
        while (read(0, buf, sizeof buf) > 0)
            ;
        printf("signals %lu\n", atomic_load(&signal_count));
        fflush(stdout);
        return 0;
    }
    case MODE_SPIN:
        outer_function();
        return 0;
    case MODE_VFORK:
        outer_function();
        mode = MODE_HANG;
        for (;;)
            outer_function();
    case MODE_LEADER_EXIT:
        pthread_exit(NULL);
    default:
        for (;;)
            outer_function();
    }
}
