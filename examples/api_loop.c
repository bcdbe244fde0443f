/*
 * api_loop.c - a hand-written event loop that reports its six activities to
 * hangwatch through the C library (include/hangwatch.h), as a Cocoa RunLoop
 * reports them to Matrix's observer.  One of its timer callbacks blocks the
 * loop for three seconds; hangwatch's agent reports it while it happens.
 *
 *   hangwatch-api-demo [REPORT_DIR]
 *
 * Build against an installed hangwatch with
 *   cc api_loop.c $(pkg-config --cflags --libs hangwatch)
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, poll, sleep under -std=c11 */

#include <hangwatch.h>

#include "cpu_wait.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TICK_MS 100
#define HANG_AT_TICK 4
#define LAST_TICK 10

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static void api_demo_blocks_for_three_seconds(void)
{
    double start = now_seconds(), waited = cpu_wait_seconds();
    sleep(3);
    printf("api demo: the callback took %.3f s, %.3f s waiting for a CPU\n", now_seconds() - start,
           cpu_wait_seconds() - waited);
    fflush(stdout);
}

__attribute__((noinline)) static void on_tick(int tick)
{
    if (tick == HANG_AT_TICK)
        api_demo_blocks_for_three_seconds();
}

/* Called by hangwatch on a thread of its own. */
static void on_hangwatch_event(const hangwatch_event *ev, void *user_data)
{
    (void)user_data;
    switch (ev->kind) {
    case HANGWATCH_EVENT_HANG:
        printf("api demo: event: thread %d hung, busy %.3f s\n", ev->thread_id, (double)ev->busy_ns / 1e9);
        break;
    case HANGWATCH_EVENT_REPORT:
        printf("api demo: event: report %s\n", ev->report_path ? ev->report_path : "(unnamed)");
        break;
    case HANGWATCH_EVENT_HANG_END:
        printf("api demo: event: hang over after %.3f s\n", (double)ev->final_duration_ns / 1e9);
        break;
    }
    fflush(stdout);
}

int main(int argc, char **argv)
{
    hangwatch_config cfg;
    hangwatch_config_init(&cfg);
    if (argc > 1)
        cfg.report_dir = argv[1];
    cfg.on_event = on_hangwatch_event;
    int rc = hangwatch_start(&cfg);
    if (rc != 0) {
        fprintf(stderr, "api demo: hangwatch_start: %s\n", strerror(-rc));
        return 1;
    }
    hangwatch_loop *loop = hangwatch_loop_register();

    hangwatch_loop_activity(loop, HANGWATCH_ENTRY);
    double next_tick = now_seconds() + TICK_MS / 1000.0;
    for (int tick = 0; tick < LAST_TICK;) {
        hangwatch_loop_activity(loop, HANGWATCH_BEFORE_TIMERS);
        if (now_seconds() >= next_tick) {
            on_tick(++tick);
            next_tick += TICK_MS / 1000.0;
        }
        hangwatch_loop_activity(loop, HANGWATCH_BEFORE_SOURCES);
        /* (no sources in this demo) */
        hangwatch_loop_activity(loop, HANGWATCH_BEFORE_WAITING);
        int wait_ms = (int)((next_tick - now_seconds()) * 1000.0);
        poll(NULL, 0, wait_ms > 0 ? wait_ms : 0);
        hangwatch_loop_activity(loop, HANGWATCH_AFTER_WAITING);
    }
    hangwatch_loop_activity(loop, HANGWATCH_EXIT);

    hangwatch_loop_unregister(loop);
    hangwatch_stop();
    hangwatch_stop(); /* idempotent */
    printf("api demo: done\n");
    return 0;
}
