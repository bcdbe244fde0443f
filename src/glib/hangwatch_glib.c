/*
 * hangwatch_glib.c - the GLib adapter (include/hangwatch-glib.h): wrap a
 * GMainContext's poll function so that every poll is the loop's wait point.
 * One context at a time; the wrapper is called on the thread that runs the
 * context, the thread that registered the loop.  For the comparison
 * detectors it also posts ping tasks as default-priority idle sources and,
 * with the frame-gap detector, runs the frame tick as a timeout source.
 * hangwatch_glib_pause() and _resume() pause the attached loop.
 */
#include "hangwatch-glib.h"

#include <stdatomic.h>

#define HW_API __attribute__((visibility("default")))

static GMainContext *g_context;
static GPollFunc g_original_poll;
static hangwatch_loop *g_loop;
static GSource *g_frame_source;
/* Where hangwatch_glib_post sends pings given no context: the attached one
 * (read on the library's thread, hence atomic). */
static _Atomic(GMainContext *) g_post_context;

static gint poll_as_wait_point(GPollFD *fds, guint nfds, gint timeout)
{
    hangwatch_loop_activity(g_loop, HANGWATCH_BEFORE_WAITING);
    gint ret = g_original_poll(fds, nfds, timeout);
    hangwatch_loop_activity(g_loop, HANGWATCH_AFTER_WAITING);
    return ret;
}

static gboolean frame_tick(gpointer loop)
{
    hangwatch_loop_frame(loop);
    return G_SOURCE_CONTINUE;
}

typedef struct posted_task {
    hangwatch_task_fn task;
    void *arg;
} posted_task;

static gboolean run_posted_task(gpointer data)
{
    posted_task *p = data;
    p->task(p->arg);
    return G_SOURCE_REMOVE;
}

HW_API void hangwatch_glib_post(hangwatch_loop *loop, hangwatch_task_fn task, void *arg, void *context)
{
    (void)loop;
    posted_task *p = g_new(posted_task, 1);
    p->task = task;
    p->arg = arg;
    GSource *source = g_idle_source_new();
    g_source_set_priority(source, G_PRIORITY_DEFAULT);
    g_source_set_callback(source, run_posted_task, p, g_free);
    GMainContext *target = context ? (GMainContext *)context : atomic_load(&g_post_context);
    g_source_attach(source, target ? target : g_main_context_default());
    g_source_unref(source);
}

HW_API hangwatch_loop *hangwatch_glib_attach(GMainContext *context)
{
    if (g_context != NULL)
        return NULL;
    if (context == NULL)
        context = g_main_context_default();
    hangwatch_loop *loop = hangwatch_loop_register();
    if (loop == NULL)
        return NULL;
    g_context = g_main_context_ref(context);
    g_loop = loop;
    g_original_poll = g_main_context_get_poll_func(context);
    hangwatch_loop_activity(loop, HANGWATCH_ENTRY);
    g_main_context_set_poll_func(context, poll_as_wait_point);
    atomic_store(&g_post_context, context);
    guint64 frame_ns = hangwatch_frame_interval_ns();
    if (frame_ns != 0) {
        guint ms = (guint)((frame_ns + 999999) / 1000000);
        g_frame_source = g_timeout_source_new(ms ? ms : 1);
        g_source_set_callback(g_frame_source, frame_tick, loop, NULL);
        g_source_attach(g_frame_source, context);
    }
    return loop;
}

HW_API void hangwatch_glib_pause(void)
{
    hangwatch_loop_pause(g_loop); /* NULL when nothing is attached: nothing happens */
}

HW_API void hangwatch_glib_resume(void)
{
    hangwatch_loop_resume(g_loop);
}

HW_API void hangwatch_glib_detach(void)
{
    if (g_context == NULL)
        return;
    if (g_frame_source != NULL) {
        g_source_destroy(g_frame_source);
        g_source_unref(g_frame_source);
        g_frame_source = NULL;
    }
    g_main_context_set_poll_func(g_context, g_original_poll);
    atomic_store(&g_post_context, NULL);
    hangwatch_loop_activity(g_loop, HANGWATCH_EXIT);
    hangwatch_loop_unregister(g_loop);
    g_main_context_unref(g_context);
    g_context = NULL;
    g_loop = NULL;
}
