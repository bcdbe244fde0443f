/*
 * bench_epoll_spin.c - the observer-cost benchmark's target: a "loop" that
 * does nothing but call epoll_wait(ep, ev, 8, 0) ITERATIONS times on an epoll
 * set with one never-ready eventfd, the cheapest loop turn there is.  The
 * observer's work per turn (two stores on entry, one coarse-clock read and two
 * stores on return) is therefore as large a share of the turn as it can ever
 * be.  bench/run.py runs it plain and under `hangwatch run` and compares.
 *
 *   bench-epoll-spin ITERATIONS CHUNK [ab [threaded] | touch PAGES | stamped]
 *
 * Prints "observer active|inert" (active = the observer's shared page, the
 * memfd "hangwatch-loop", is mapped: it registered with an agent), then, if
 * CHUNK > 0, one line "chunk NS_PER_ITERATION" per CHUNK iterations, timed
 * with CLOCK_MONOTONIC.  Many short chunks instead of one long run let the
 * driver take medians and percentiles that a scheduler hiccup cannot move.
 * CHUNK = 0 does no timing at all (for the valgrind instruction counts, so
 * that they hold only the loop and start-up).
 *
 * "ab" is the paired in-process comparison: chunks alternate (ABBA order)
 * between calling libc's own epoll_wait (a pointer from dlsym on libc.so.6:
 * no observer) and the epoll_wait the program's calls bind to (a pointer
 * from dlsym(RTLD_DEFAULT): the observer's wrapper when it is preloaded).
 * Both halves run the same loop through a function pointer, so only the
 * function differs.  Each pair prints "pair NS_LIBC NS_BOUND".  The two
 * halves of a pair run milliseconds apart on the same CPU, so the machine's
 * drift, which between separate runs is larger than the observer's cost
 * here, cancels.  Without the preload both halves call the same function:
 * the pairs' spread is then the method's noise floor.  "ab threaded" does
 * the same in a process with a second, idle thread: libc's wait functions,
 * and so the observer's, then take their multi-threaded path (pthread
 * cancellation), which costs the observer a call level
 * (docs/decisions.md §2).
 *
 * "stamped" adds to each chunk line the CLOCK_MONOTONIC time (ns) its chunk
 * ended, so a driver can tell which chunks ran while something outside the
 * program was switched on (the kernel observer: bench/kernel_observer.py);
 * "stamped-getppid" does the same with getppid() calls instead of
 * epoll_wait, a system call no observer looks at.
 *
 * "touch PAGES" prices one thing the observer cannot avoid: memory it touches
 * that the bare loop does not.  Pairs are "pair NS_LIBC NS_LIBC_TOUCH", where
 * the second half calls libc's epoll_wait and then reads one byte from each
 * of PAGES distinct, already faulted-in pages (the observer's wrapper
 * reaches its own code, GOT, data, the shared slot page, libc's
 * clock_gettime and the vDSO's code and data).  Where every system call
 * flushes the TLB (kernel page-table isolation without PCID), each such page
 * costs a page walk per loop turn.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "observer_active.h"

typedef int (*epoll_wait_fn)(int, struct epoll_event *, int, int);

/* dlsym's result as a function pointer (POSIX guarantees they convert).
 * handle may be RTLD_DEFAULT, which is NULL. */
static epoll_wait_fn lookup(void *handle, const char *name)
{
    void *p = dlsym(handle, name);
    epoll_wait_fn fn;
    _Static_assert(sizeof fn == sizeof p, "function and object pointers differ in size");
    memcpy(&fn, &p, sizeof fn);
    return fn;
}

/* The second thread of "ab threaded": it only exists. */
static void *idle_thread(void *arg)
{
    (void)arg;
    for (;;)
        pause();
    return NULL;
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

#define MAX_TOUCH_PAGES 64
static volatile unsigned char *touch_area;
static unsigned long touch_sink;

/* ns per call of `n` calls of fn (fn NULL: epoll_wait through the PLT, as
 * a program calls it), each followed by a read of `pages` distinct pages. */
static double timed_chunk(epoll_wait_fn fn, int ep, long n, long *ready, int pages)
{
    struct epoll_event ev[8];
    double t0 = now_ns();
    if (pages > 0)
        for (long i = 0; i < n; i++) {
            *ready += fn(ep, ev, 8, 0);
            for (int p = 0; p < pages; p++) /* a different cache set in each page */
                touch_sink += touch_area[(size_t)p * 4096u + ((size_t)p * 64u) % 4096u];
        }
    else if (fn == NULL)
        for (long i = 0; i < n; i++)
            *ready += epoll_wait(ep, ev, 8, 0);
    else
        for (long i = 0; i < n; i++)
            *ready += fn(ep, ev, 8, 0);
    return (now_ns() - t0) / (double)n;
}

int main(int argc, char **argv)
{
    int ab = (argc == 4 || argc == 5) && strcmp(argv[3], "ab") == 0;
    int threaded = ab && argc == 5 && strcmp(argv[4], "threaded") == 0;
    int getppid_calls = argc == 4 && strcmp(argv[3], "stamped-getppid") == 0;
    int stamped = (argc == 4 && strcmp(argv[3], "stamped") == 0) || getppid_calls;
    int touch = argc == 5 && strcmp(argv[3], "touch") == 0 ? atoi(argv[4]) : 0;
    if ((argc != 3 && !ab && !stamped && !(touch > 0 && touch <= MAX_TOUCH_PAGES)) || (ab && argc == 5 && !threaded)) {
        fprintf(stderr, "usage: %s ITERATIONS CHUNK [ab [threaded] | touch PAGES(1-%d) | stamped]\n", argv[0],
                MAX_TOUCH_PAGES);
        return 2;
    }
    long iterations = strtol(argv[1], NULL, 10);
    long chunk = strtol(argv[2], NULL, 10);
    if (iterations <= 0 || chunk < 0 || ((ab || touch) && chunk == 0)) {
        fprintf(stderr, "bench-epoll-spin: bad arguments\n");
        return 2;
    }

    int efd = eventfd(0, EFD_CLOEXEC);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event add = {.events = EPOLLIN, .data.fd = efd};
    if (efd < 0 || ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, efd, &add) != 0) {
        perror("bench-epoll-spin: epoll");
        return 1;
    }
    printf("observer %s\n", observer_active() ? "active" : "inert");
    pthread_t idle;
    if (threaded && pthread_create(&idle, NULL, idle_thread, NULL) != 0) {
        fprintf(stderr, "bench-epoll-spin: cannot start the second thread\n");
        return 1;
    }

    long ready = 0;
    if (ab || touch) {
        void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
        epoll_wait_fn direct = libc ? lookup(libc, "epoll_wait") : NULL;
        if (direct == NULL) {
            fprintf(stderr, "bench-epoll-spin: cannot find libc's epoll_wait\n");
            return 1;
        }
        if (touch) {
            unsigned char *area = malloc((size_t)MAX_TOUCH_PAGES * 4096u);
            if (area == NULL)
                return 1;
            memset(area, 1, (size_t)MAX_TOUCH_PAGES * 4096u);
            touch_area = area;
        }
        /* B: what the program's calls bind to (ab), or libc's plus the page
         * reads (touch). */
        epoll_wait_fn b_fn = touch ? direct : lookup(RTLD_DEFAULT, "epoll_wait");
        if (b_fn == NULL) {
            fprintf(stderr, "bench-epoll-spin: cannot find epoll_wait\n");
            return 1;
        }
        for (long pair = 0; pair * 2 * chunk < iterations; pair++) {
            double a_ns, b_ns;
            if (pair % 2 == 0) {
                a_ns = timed_chunk(direct, ep, chunk, &ready, 0);
                b_ns = timed_chunk(b_fn, ep, chunk, &ready, touch);
            } else {
                b_ns = timed_chunk(b_fn, ep, chunk, &ready, touch);
                a_ns = timed_chunk(direct, ep, chunk, &ready, 0);
            }
            printf("pair %.3f %.3f\n", a_ns, b_ns);
        }
    } else if (chunk == 0) {
        struct epoll_event ev[8];
        for (long i = 0; i < iterations; i++)
            ready += epoll_wait(ep, ev, 8, 0);
    } else {
        for (long done = 0; done < iterations; done += chunk) {
            long n = iterations - done < chunk ? iterations - done : chunk;
            double ns;
            if (getppid_calls) {
                double t0 = now_ns();
                for (long i = 0; i < n; i++)
                    touch_sink += (unsigned long)syscall(SYS_getppid);
                ns = (now_ns() - t0) / (double)n;
            } else {
                ns = timed_chunk(NULL, ep, n, &ready, 0);
            }
            if (stamped)
                printf("chunk %.3f %.0f\n", ns, now_ns());
            else
                printf("chunk %.3f\n", ns);
        }
    }
    if (ready != 0) {
        fprintf(stderr, "bench-epoll-spin: epoll_wait reported %ld events, expected none\n", ready);
        return 1;
    }
    return 0;
}
