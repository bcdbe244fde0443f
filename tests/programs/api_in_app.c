/*
 * api_in_app.c - the C library's in_app and not_in_app lists
 * (hangwatch_config, docs/report-format.md "Whose code"): a loop whose
 * callback settle_accounts() sleeps 2 s (threshold 1 s), started with
 *
 *   default    no lists: the program's own frames are in_app
 *   not-self   not_in_app = this program's own executable: none of its
 *              frames is in_app
 *   invalid    in_app = {"/srv/[app"}: hangwatch_start refuses (-EINVAL)
 *   too-many   65 patterns: refused (-EINVAL)
 *
 *   api-in-app REPORT_DIR default|not-self|invalid|too-many
 *
 * Prints "api-in-app: hangwatch_start: <strerror>" when the start fails
 * (and exits 3), else "api-in-app: done".
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <hangwatch.h>

#include <limits.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile uint64_t g_sink;

__attribute__((noinline)) static void settle_accounts(void)
{
    g_sink += 3; /* a body of its own (ICF) */
    struct timespec ts = {2, 0};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: api-in-app REPORT_DIR default|not-self|invalid|too-many\n");
        return 2;
    }
    const char *mode = argv[2];
    hangwatch_config cfg;
    hangwatch_config_init(&cfg);
    cfg.report_dir = argv[1];
    cfg.threshold_ns = 1000000000ull;
    static char self[PATH_MAX];
    static const char *not_in_app[2];
    static const char *invalid[] = {"/srv/[app", NULL};
    static const char *many[66];
    if (strcmp(mode, "not-self") == 0) {
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n <= 0)
            return 1;
        self[n] = '\0';
        not_in_app[0] = self;
        cfg.not_in_app = not_in_app;
    } else if (strcmp(mode, "invalid") == 0) {
        cfg.in_app = invalid;
    } else if (strcmp(mode, "too-many") == 0) {
        for (int i = 0; i < 65; i++)
            many[i] = "/srv/app";
        cfg.in_app = many;
    } else if (strcmp(mode, "default") != 0) {
        fprintf(stderr, "api-in-app: unknown mode %s\n", mode);
        return 2;
    }
    int rc = hangwatch_start(&cfg);
    if (rc != 0) {
        printf("api-in-app: hangwatch_start: %s\n", strerror(-rc));
        return 3;
    }
    hangwatch_loop *loop = hangwatch_loop_register();
    hangwatch_loop_activity(loop, HANGWATCH_ENTRY);
    for (int tick = 0; tick < 4; tick++) {
        hangwatch_loop_activity(loop, HANGWATCH_BEFORE_WAITING);
        poll(NULL, 0, 100);
        hangwatch_loop_activity(loop, HANGWATCH_AFTER_WAITING);
        if (tick == 1)
            settle_accounts();
    }
    hangwatch_loop_activity(loop, HANGWATCH_EXIT);
    hangwatch_loop_unregister(loop);
    hangwatch_stop();
    printf("api-in-app: done\n");
    return 0;
}
