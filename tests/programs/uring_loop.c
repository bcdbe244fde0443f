/*
 * uring_loop - an event loop that waits through io_uring, never through
 * epoll, poll or select: each turn it queues a 100 ms timeout and waits for
 * a completion (io_uring_enter with IORING_ENTER_GETEVENTS).  The preloaded
 * observer cannot see such waits; the kernel observer can.
 *
 *   uring_loop hang DELAY [SLEEP]
 *                           turns idly, then after DELAY seconds calls
 *                           rebuild_index_synchronously(), which sleeps
 *                           SLEEP seconds (default 3), then turns 0.5 s more
 *   uring_loop idle SECS    turns idly for SECS seconds
 *
 * Prints "ready PID" first, "slept S Q" with the sleep's own measured length
 * and the seconds of it the thread waited for a CPU (cpu_queue.h), and
 * "done after N turns" at the end.
 */
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cpu_queue.h"

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static void rebuild_index_synchronously(double seconds)
{
    double start = now_seconds(), queued = queued_seconds();
    struct timespec left = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    while (nanosleep(&left, &left) != 0)
        ;
    printf("slept %.3f %.3f\n", now_seconds() - start, queued_seconds() - queued);
    fflush(stdout);
}

/* One turn's wait: a 100 ms timeout, and the wait for its completion. */
__attribute__((noinline)) static int wait_for_completion(struct io_uring *ring)
{
    struct __kernel_timespec timeout = {.tv_sec = 0, .tv_nsec = 100 * 1000 * 1000};
    struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
    if (sqe == NULL)
        return -1;
    io_uring_prep_timeout(sqe, &timeout, 0, 0);
    if (io_uring_submit(ring) < 0)
        return -1;
    struct io_uring_cqe *cqe;
    int rc = io_uring_wait_cqe(ring, &cqe);
    if (rc == 0)
        io_uring_cqe_seen(ring, cqe);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 3 || argc > 4 || (strcmp(argv[1], "hang") != 0 && strcmp(argv[1], "idle") != 0) ||
        (argc == 4 && strcmp(argv[1], "hang") != 0)) {
        fprintf(stderr, "usage: uring_loop hang DELAY [SLEEP] | idle SECS\n");
        return 2;
    }
    double secs = atof(argv[2]), sleep_seconds = argc == 4 ? atof(argv[3]) : 3.0;
    int hang = strcmp(argv[1], "hang") == 0;
    struct io_uring ring;
    int rc = io_uring_queue_init(8, &ring, 0);
    if (rc < 0) {
        fprintf(stderr, "uring_loop: io_uring_queue_init: %s\n", strerror(-rc));
        return 1;
    }
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    double start = now_seconds(), until = hang ? secs + 100 : secs;
    unsigned long turns = 0;
    int hung = 0;
    while (now_seconds() - start < until) {
        if (wait_for_completion(&ring) < 0 && turns == 0) {
            fprintf(stderr, "uring_loop: cannot wait through io_uring\n");
            return 1;
        }
        turns++;
        if (hang && !hung && now_seconds() - start >= secs) {
            hung = 1;
            rebuild_index_synchronously(sleep_seconds);
            until = now_seconds() - start + 0.5;
        }
    }
    io_uring_queue_exit(&ring);
    printf("done after %lu turns\n", turns);
    return 0;
}
