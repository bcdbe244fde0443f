/*
 * api_ping_lifecycle.c - the ping detector through the C library around a
 * loop's life: 3 s of start-up before the loop registers, 2.5 s of an idle
 * loop that answers its pings (posted into its own queue through a pipe),
 * and 3 s after it unregistered.  None of it is a hang: a loop that has not
 * started or has exited runs no tasks and must not be reported for the
 * pings it cannot answer.
 *
 *   api-ping-lifecycle REPORT_DIR
 *
 * Prints "pings: N answered: M" (posted and run) at the end.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <hangwatch.h>

#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int g_pipe[2];
static _Atomic unsigned g_posted;
static unsigned g_answered;

typedef struct posted {
    hangwatch_task_fn task;
    void *arg;
} posted;

/* hangwatch_post_fn: the task goes through a pipe to the loop. */
static void post_through_pipe(hangwatch_loop *loop, hangwatch_task_fn task, void *arg, void *data)
{
    (void)loop;
    (void)data;
    posted p = {task, arg};
    if (write(g_pipe[1], &p, sizeof p) == (ssize_t)sizeof p)
        atomic_fetch_add(&g_posted, 1);
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: api-ping-lifecycle REPORT_DIR\n");
        return 2;
    }
    if (pipe(g_pipe) != 0)
        return 1;
    hangwatch_config cfg;
    hangwatch_config_init(&cfg);
    cfg.report_dir = argv[1];
    cfg.detector = HANGWATCH_DETECTOR_PING;
    cfg.post = post_through_pipe;
    int rc = hangwatch_start(&cfg);
    if (rc != 0) {
        fprintf(stderr, "api-ping-lifecycle: hangwatch_start: %s\n", strerror(-rc));
        return 1;
    }
    sleep(3); /* start-up: no loop yet */

    hangwatch_loop *loop = hangwatch_loop_register();
    hangwatch_loop_activity(loop, HANGWATCH_ENTRY);
    double end = now_seconds() + 2.5;
    while (now_seconds() < end) {
        hangwatch_loop_activity(loop, HANGWATCH_BEFORE_WAITING);
        struct pollfd pfd = {g_pipe[0], POLLIN, 0};
        int n = poll(&pfd, 1, 100);
        hangwatch_loop_activity(loop, HANGWATCH_AFTER_WAITING);
        posted p;
        if (n > 0 && read(g_pipe[0], &p, sizeof p) == (ssize_t)sizeof p) {
            p.task(p.arg);
            g_answered++;
        }
    }
    hangwatch_loop_activity(loop, HANGWATCH_EXIT);
    hangwatch_loop_unregister(loop);
    sleep(3); /* the loop is gone: pings posted now are never run */

    hangwatch_stop();
    printf("pings: %u answered: %u\n", atomic_load(&g_posted), g_answered);
    return 0;
}
