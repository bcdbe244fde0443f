/*
 * api_pause.c - an expected long operation in a library loop: a callback
 * "saves" for SECS (a sleep in save_for_a_long_time()), between
 * hangwatch_loop_pause() and hangwatch_loop_resume() with `pause` (nested
 * once, as a library inside the program might), without them with `plain`,
 * and then works 0.5 s more (work_after_the_save(), a spin).  The
 * threshold is 1 s: paused, nothing is a hang (the clock starts again at
 * the resume, and 0.5 s is under it); plain, the save is one hang.
 *
 *
 * With `late`, the callback is already a hang when it pauses: it sleeps
 * 1.5 s (late_in_the_save()) before pausing for SECS more; the hang ends at
 * the pause, and "paused S into the stretch" says when by the program's own
 * clock (from its return from the wait).
 *
 *   api-pause REPORT_DIR pause|plain|late SECS
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <hangwatch.h>

#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile uint64_t g_sink;

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static void save_for_a_long_time(double seconds)
{
    g_sink += 1; /* distinct bodies: -O2 would fold identical functions into one */
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

__attribute__((noinline)) static void work_after_the_save(double seconds)
{
    double end = now_seconds() + seconds;
    while (now_seconds() < end)
        for (int i = 0; i < 1000; i++)
            g_sink = g_sink * 31 + (uint64_t)i;
}

__attribute__((noinline)) static void late_in_the_save(double seconds)
{
    g_sink += 2; /* distinct bodies: -O2 would fold identical functions into one */
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

__attribute__((noinline)) static void on_save_tick(hangwatch_loop *loop, int paused, int late, double seconds,
                                                  double woke)
{
    if (late) {
        late_in_the_save(1.5);
        printf("paused %.6f into the stretch\n", now_seconds() - woke);
    }
    if (paused) {
        hangwatch_loop_pause(loop);
        hangwatch_loop_pause(loop); /* nested: the outer resume ends the pause */
    }
    save_for_a_long_time(seconds);
    if (paused) {
        hangwatch_loop_resume(loop);
        hangwatch_loop_resume(loop);
    }
    work_after_the_save(0.5);
}

int main(int argc, char **argv)
{
    if (argc != 4 || (strcmp(argv[2], "pause") != 0 && strcmp(argv[2], "plain") != 0 && strcmp(argv[2], "late") != 0)) {
        fprintf(stderr, "usage: api-pause REPORT_DIR pause|plain|late SECS\n");
        return 2;
    }
    hangwatch_config cfg;
    hangwatch_config_init(&cfg);
    cfg.report_dir = argv[1];
    cfg.threshold_ns = 1000000000ull;
    int rc = hangwatch_start(&cfg);
    if (rc != 0) {
        fprintf(stderr, "api-pause: hangwatch_start: %s\n", strerror(-rc));
        return 1;
    }
    hangwatch_loop *loop = hangwatch_loop_register();
    hangwatch_loop_activity(loop, HANGWATCH_ENTRY);
    for (int tick = 0; tick < 8; tick++) {
        hangwatch_loop_activity(loop, HANGWATCH_BEFORE_WAITING);
        poll(NULL, 0, 100);
        hangwatch_loop_activity(loop, HANGWATCH_AFTER_WAITING);
        double woke = now_seconds();
        if (tick == 3)
            on_save_tick(loop, strcmp(argv[2], "plain") != 0, strcmp(argv[2], "late") == 0, atof(argv[3]), woke);
    }
    hangwatch_loop_activity(loop, HANGWATCH_EXIT);
    hangwatch_loop_unregister(loop);
    hangwatch_stop();
    printf("api-pause: done\n");
    return 0;
}
