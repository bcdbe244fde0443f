/*
 * stack_target.c - a running program whose stacks test_stack.py takes with
 * `hangwatch stack PID`, started by the test, not by hangwatch.
 *
 *   stack-target nested    prints "ready", then sleeps 3 s in
 *                          main -> wait_for_orders -> nap_in_nested_function
 *                          -> sleep(3); prints "slept SECONDS" (its own
 *                          CLOCK_MONOTONIC measure of that sleep) and exits 0,
 *                          so the test can tell a disturbed sleep
 *   stack-target threads   two more threads block in functions of their own,
 *                          worker_a_waits_on_condition (pthread_cond_wait)
 *                          and worker_b_reads_a_pipe (read); prints
 *                          "ready MAIN_TID A_TID B_TID" and the main thread
 *                          sleeps in nap_in_nested_function until killed
 *   stack-target stub      prints "ready", then spins in sum_distances,
 *                          which calls libc's labs (a few instructions; built
 *                          with -fno-builtin-labs) through the program's PLT,
 *                          until killed: now and then a capture stops it in
 *                          the stub ("labs@plt")
 *
 * Built with the test targets' flags (-O2 -g, frame pointers, no sibling
 * calls): each function of a chain is noinline and does work after its call,
 * so none is folded into another or turned into a jump.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t never_signalled = PTHREAD_COND_INITIALIZER;
static int block_pipe[2];
static atomic_int worker_tids[2];

double nap_in_nested_function(unsigned seconds);
double wait_for_orders(unsigned seconds);
void *worker_a_waits_on_condition(void *arg);
void *worker_b_reads_a_pipe(void *arg);
void sum_distances(void);

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) double nap_in_nested_function(unsigned seconds)
{
    double start = now_s();
    unsigned left = sleep(seconds);
    double slept = now_s() - start;
    sink += left; /* work after the call: it stays a call */
    return slept;
}

__attribute__((noinline)) double wait_for_orders(unsigned seconds)
{
    sink += seconds * 3u;
    double slept = nap_in_nested_function(seconds);
    sink ^= 0x5au;
    return slept;
}

__attribute__((noinline)) void *worker_a_waits_on_condition(void *arg)
{
    (void)arg;
    atomic_store(&worker_tids[0], (int)syscall(SYS_gettid));
    pthread_mutex_lock(&lock);
    for (;;)
        pthread_cond_wait(&never_signalled, &lock);
    sink++;
    return NULL;
}

__attribute__((noinline)) void *worker_b_reads_a_pipe(void *arg)
{
    (void)arg;
    atomic_store(&worker_tids[1], (int)syscall(SYS_gettid));
    char byte;
    ssize_t n = read(block_pipe[0], &byte, 1);
    sink += (unsigned long)n;
    return NULL;
}

__attribute__((noinline)) void sum_distances(void)
{
    for (long i = 0;; i++)
        sink += (unsigned long)labs(i - 1000); /* not a builtin here: a call through the PLT */
}

int main(int argc, char **argv)
{
    if (argc != 2 ||
        (strcmp(argv[1], "nested") != 0 && strcmp(argv[1], "threads") != 0 && strcmp(argv[1], "stub") != 0)) {
        fprintf(stderr, "usage: stack-target nested|threads|stub\n");
        return 2;
    }
    if (strcmp(argv[1], "stub") == 0) {
        printf("ready\n");
        fflush(stdout);
        sum_distances();
    }
    if (strcmp(argv[1], "nested") == 0) {
        printf("ready\n");
        fflush(stdout);
        double slept = wait_for_orders(3);
        printf("slept %.6f\n", slept);
        return 0;
    }
    if (pipe(block_pipe) != 0)
        return 1;
    pthread_t a, b;
    if (pthread_create(&a, NULL, worker_a_waits_on_condition, NULL) != 0 ||
        pthread_create(&b, NULL, worker_b_reads_a_pipe, NULL) != 0)
        return 1;
    pthread_setname_np(a, "worker-a");
    pthread_setname_np(b, "worker-b");
    while (atomic_load(&worker_tids[0]) == 0 || atomic_load(&worker_tids[1]) == 0) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    printf("ready %d %d %d\n", (int)getpid(), atomic_load(&worker_tids[0]), atomic_load(&worker_tids[1]));
    fflush(stdout);
    for (;;)
        wait_for_orders(60);
}
