/*
 * hangwatch_glib.c - the GLib adapter (include/hangwatch-glib.h): wrap a
 * GMainContext's poll function so that every poll is the loop's wait point.
 * One context at a time; the wrapper is called on the thread that runs the
 * context, the thread that registered the loop.
 */
#include "hangwatch-glib.h"

#define HW_API __attribute__((visibility("default")))

static GMainContext *g_context;
static GPollFunc g_original_poll;
static hangwatch_loop *g_loop;

static gint poll_as_wait_point(GPollFD *fds, guint nfds, gint timeout)
{
    hangwatch_loop_activity(g_loop, HANGWATCH_BEFORE_WAITING);
    gint ret = g_original_poll(fds, nfds, timeout);
    hangwatch_loop_activity(g_loop, HANGWATCH_AFTER_WAITING);
    return ret;
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
    return loop;
}

HW_API void hangwatch_glib_detach(void)
{
    if (g_context == NULL)
        return;
    g_main_context_set_poll_func(g_context, g_original_poll);
    hangwatch_loop_activity(g_loop, HANGWATCH_EXIT);
    hangwatch_loop_unregister(g_loop);
    g_main_context_unref(g_context);
    g_context = NULL;
    g_loop = NULL;
}
