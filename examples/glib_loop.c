/*
 * glib_loop.c - a GLib main loop watched through the hangwatch GLib adapter.
 * A timeout callback blocks the main loop for three seconds on its fifth
 * tick; hangwatch reports it once, with the callback on the stack.
 *
 *   hangwatch-glib-demo [REPORT_DIR [DETECTOR]]
 *
 * DETECTOR is runloop (the default), semaphore, ping or frame-gap: the
 * seeds' alternatives, for comparison (docs/comparison.md).  The ping
 * detectors post their pings with hangwatch_glib_post; the frame-gap
 * detector's tick is added by hangwatch_glib_attach.
 *
 * Build against an installed hangwatch with
 *   cc glib_loop.c $(pkg-config --cflags --libs hangwatch-glib)
 */
#include <hangwatch-glib.h>

#include "cpu_wait.h"

#include <stdio.h>
#include <string.h>

static GMainLoop *g_main;
static int g_ticks;

__attribute__((noinline)) static void glib_demo_blocks_for_three_seconds(void)
{
    gint64 start = g_get_monotonic_time();
    double waited = cpu_wait_seconds();
    g_usleep(3 * G_USEC_PER_SEC);
    printf("glib demo: the callback took %.3f s, %.3f s waiting for a CPU\n",
           (double)(g_get_monotonic_time() - start) / 1e6, cpu_wait_seconds() - waited);
    fflush(stdout);
}

__attribute__((noinline)) static gboolean on_tick(gpointer data)
{
    (void)data;
    if (++g_ticks == 5)
        glib_demo_blocks_for_three_seconds();
    if (g_ticks == 10) {
        g_main_loop_quit(g_main);
        return G_SOURCE_REMOVE;
    }
    return G_SOURCE_CONTINUE;
}

static int pick_detector(const char *name, hangwatch_config *cfg)
{
    static const struct {
        const char *name;
        hangwatch_detector detector;
    } detectors[] = {{"runloop", HANGWATCH_DETECTOR_RUNLOOP},
                     {"semaphore", HANGWATCH_DETECTOR_SEMAPHORE},
                     {"ping", HANGWATCH_DETECTOR_PING},
                     {"frame-gap", HANGWATCH_DETECTOR_FRAME_GAP}};
    for (size_t i = 0; i < sizeof detectors / sizeof detectors[0]; i++) {
        if (strcmp(name, detectors[i].name) == 0) {
            cfg->detector = detectors[i].detector;
            cfg->post = hangwatch_glib_post; /* pings go to the default context */
            return 0;
        }
    }
    fprintf(stderr, "glib demo: unknown detector '%s' (runloop, semaphore, ping, frame-gap)\n", name);
    return -1;
}

int main(int argc, char **argv)
{
    hangwatch_config cfg;
    hangwatch_config_init(&cfg);
    if (argc > 1)
        cfg.report_dir = argv[1];
    if (argc > 2 && pick_detector(argv[2], &cfg) != 0)
        return 2;
    int rc = hangwatch_start(&cfg);
    if (rc != 0) {
        fprintf(stderr, "glib demo: hangwatch_start: %s\n", strerror(-rc));
        return 1;
    }
    if (hangwatch_glib_attach(NULL) == NULL) {
        fprintf(stderr, "glib demo: hangwatch_glib_attach failed\n");
        return 1;
    }
    g_main = g_main_loop_new(NULL, FALSE);
    g_timeout_add(100, on_tick, NULL);
    g_main_loop_run(g_main);
    g_main_loop_unref(g_main);
    hangwatch_glib_detach();
    hangwatch_stop();
    printf("glib demo: done\n");
    return 0;
}
