/*
 * api_metrics.c - the C library's agent exporting metrics (docs/metrics.md)
 * through its config: a loop that hangs once for 600 ms with a 300 ms
 * threshold, then stops the agent, whose last write of the metrics file
 * holds the final counts.
 *
 *   api-metrics REPORT_DIR METRICS_FILE [LISTEN]
 *
 * Prints "start: RC" (hangwatch_start's result) and, when it started,
 * "hung" after the hang; exits 0 either way.
 */
#define _POSIX_C_SOURCE 200809L

#include <hangwatch.h>

#include <stdio.h>
#include <time.h>

__attribute__((noinline)) static void api_metrics_hang(void)
{
    struct timespec ts = {0, 600000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static void pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    hangwatch_config cfg;
    hangwatch_config_init(&cfg);
    cfg.report_dir = argv[1];
    cfg.metrics_file = argv[2];
    cfg.metrics_listen = argc > 3 ? argv[3] : NULL;
    cfg.threshold_ns = 300000000ull;
    cfg.quiet = 1;
    int rc = hangwatch_start(&cfg);
    printf("start: %d\n", rc);
    fflush(stdout);
    if (rc != 0)
        return 0;
    hangwatch_loop *loop = hangwatch_loop_register();
    hangwatch_loop_activity(loop, HANGWATCH_ENTRY);
    for (int turn = 0; turn < 12; turn++) {
        hangwatch_loop_activity(loop, HANGWATCH_BEFORE_WAITING);
        pause_ms(50); /* the loop's wait */
        hangwatch_loop_activity(loop, HANGWATCH_AFTER_WAITING);
        if (turn == 4) {
            api_metrics_hang();
            printf("hung\n");
            fflush(stdout);
        }
    }
    hangwatch_loop_activity(loop, HANGWATCH_BEFORE_WAITING);
    pause_ms(200); /* the agent sees the end of the hang */
    hangwatch_loop_activity(loop, HANGWATCH_EXIT);
    hangwatch_stop();
    return 0;
}
