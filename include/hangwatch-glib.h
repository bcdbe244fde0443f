/*
 * hangwatch-glib.h - hangwatch for GLib main loops.
 *
 * GLib waits in the poll function of each GMainContext.  The adapter
 * replaces that function with one that reports BEFORE_WAITING before the
 * real poll and AFTER_WAITING after it, so the busy stretches hangwatch
 * measures are exactly GLib's own: dispatching sources, between two polls.
 * Nested main loops run through the same poll function and count as the
 * loop's waits, as nested RunLoop runs do in Matrix.  With the frame-gap
 * detector, attaching also adds the frame tick (a timeout source).
 *
 *     hangwatch_start(NULL);
 *     hangwatch_glib_attach(NULL);   // the default context, on this thread
 *     g_main_loop_run(loop);
 *
 * Build with: cc app.c $(pkg-config --cflags --libs hangwatch-glib)
 */
#ifndef HANGWATCH_GLIB_H
#define HANGWATCH_GLIB_H

#include <glib.h>
#include <hangwatch.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Watch `context` (NULL: the default main context), which the calling
 * thread runs.  Call after hangwatch_start().  Returns the loop handle (as
 * hangwatch_loop_register), or NULL if hangwatch is not started, no slot is
 * left, or a context is already attached.
 */
hangwatch_loop *hangwatch_glib_attach(GMainContext *context);

/* Restore the context's own poll function and unregister its loop. */
void hangwatch_glib_detach(void);

/*
 * An expected long operation on the attached context's thread:
 * hangwatch_loop_pause() / hangwatch_loop_resume() on its loop (nothing is
 * reported in between, the busy clock starts again at the resume; the
 * polls of a nested main loop meanwhile are ignored).  From the thread
 * that runs the context; nothing happens when no context is attached.
 */
void hangwatch_glib_pause(void);
void hangwatch_glib_resume(void);

/*
 * A hangwatch_post_fn for GLib, for the ping detectors: posts the task as a
 * default-priority idle source on `context` (a GMainContext *; NULL: the
 * attached context, else the default one), like g_main_context_invoke()
 * from another thread.
 *     cfg.detector = HANGWATCH_DETECTOR_PING;
 *     cfg.post = hangwatch_glib_post;
 */
void hangwatch_glib_post(hangwatch_loop *loop, hangwatch_task_fn task, void *arg, void *context);

#ifdef __cplusplus
}
#endif

#endif
