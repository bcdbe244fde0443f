/*
 * hangwatch.h - the hangwatch C library: hang detection for a program's own
 * event loops.
 *
 * A loop thread alternates between waiting (in its wait call) and working.
 * The program tells hangwatch which by calling hangwatch_loop_activity() with
 * the six RunLoop activities at the matching points of its loop; hangwatch
 * declares a hang when a working stretch outlasts the threshold (2 s by
 * default), captures the hung thread and every other thread while the hang
 * is still going on, and writes a JSON report (docs/report-format.md).
 *
 * hangwatch_start() launches the hangwatch agent, a separate process: the
 * program itself never unwinds, symbolizes, allocates for or writes a
 * report, so a hang that holds malloc's or the loader's lock cannot deadlock
 * the capture.  hangwatch_loop_activity() is a few memory stores: no lock,
 * no allocation, no system call.
 *
 * Minimal use:
 *
 *     hangwatch_config cfg;
 *     hangwatch_config_init(&cfg);
 *     cfg.report_dir = "/var/tmp/myapp-hangs";
 *     hangwatch_start(&cfg);
 *     hangwatch_loop *loop = hangwatch_loop_register();
 *     hangwatch_loop_activity(loop, HANGWATCH_ENTRY);
 *     for (;;) {
 *         hangwatch_loop_activity(loop, HANGWATCH_BEFORE_WAITING);
 *         n = epoll_wait(...);
 *         hangwatch_loop_activity(loop, HANGWATCH_AFTER_WAITING);
 *         ... run the callbacks ...
 *     }
 *     hangwatch_loop_activity(loop, HANGWATCH_EXIT);
 *     hangwatch_stop();
 *
 * Build with: cc app.c $(pkg-config --cflags --libs hangwatch)
 * Every call is documented in docs/api.md.
 */
#ifndef HANGWATCH_H
#define HANGWATCH_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HANGWATCH_VERSION_MAJOR 0
#define HANGWATCH_VERSION_MINOR 1

/* The six loop activities, with iOS's RunLoop values.  AFTER_WAITING,
 * BEFORE_TIMERS and BEFORE_SOURCES mark the loop busy (the first of them
 * starts the busy clock); BEFORE_WAITING and EXIT mark it waiting; ENTRY
 * changes nothing. */
typedef enum hangwatch_activity {
    HANGWATCH_ENTRY = 1 << 0,
    HANGWATCH_BEFORE_TIMERS = 1 << 1,
    HANGWATCH_BEFORE_SOURCES = 1 << 2,
    HANGWATCH_BEFORE_WAITING = 1 << 5,
    HANGWATCH_AFTER_WAITING = 1 << 6,
    HANGWATCH_EXIT = 1 << 7,
} hangwatch_activity;

typedef enum hangwatch_check_mode {
    HANGWATCH_CHECK_EXACT = 0,    /* detect when the threshold is crossed (default) */
    HANGWATCH_CHECK_PERIODIC = 1, /* Matrix: look every check period */
} hangwatch_check_mode;

/* Which detector decides what is a hang.  RUNLOOP is hangwatch's own and
 * the one to use; the others are the alternatives the seeds describe, kept
 * so that they can be compared on the same program (docs/comparison.md). */
typedef enum hangwatch_detector {
    HANGWATCH_DETECTOR_RUNLOOP = 0,   /* busy stretches between waits (default) */
    HANGWATCH_DETECTOR_SEMAPHORE = 1, /* 5 x 50 ms state sampling, a ping while waiting */
    HANGWATCH_DETECTOR_PING = 2,      /* ANREye: a ping task, checked a threshold later */
    HANGWATCH_DETECTOR_FRAME_GAP = 3, /* a periodic loop tick that arrives late */
} hangwatch_detector;

typedef struct hangwatch_loop hangwatch_loop;

typedef void (*hangwatch_task_fn)(void *arg);

/*
 * The ping detectors' way into a loop: queue task(arg) to run on `loop`'s
 * thread as ordinary loop work, behind whatever is queued already (as
 * dispatch_async to the main queue does).  Called on a library thread; it
 * must not run the task itself.  GLib: hangwatch_glib_post().
 */
typedef void (*hangwatch_post_fn)(hangwatch_loop *loop, hangwatch_task_fn task, void *arg, void *post_data);

/* What the agent tells the program (see hangwatch_config's callbacks). */
typedef enum hangwatch_event_kind {
    HANGWATCH_EVENT_HANG = 1,    /* a loop crossed the threshold (before the capture) */
    HANGWATCH_EVENT_REPORT = 2,  /* a report was written: report_path names it */
    HANGWATCH_EVENT_HANG_END = 3, /* the hung loop waits again: final_duration_ns */
} hangwatch_event_kind;

typedef struct hangwatch_event {
    hangwatch_event_kind kind;
    int thread_id;              /* the hung loop thread (kernel tid) */
    uint64_t busy_ns;           /* busy time when detected */
    uint64_t final_duration_ns; /* HANG_END: the whole stretch */
    const char *report_path;    /* REPORT: the file (valid during the callback) */
} hangwatch_event;

/* Called on a thread of the library's, never on a loop thread; keep it short
 * and do not call hangwatch_stop() from it. */
typedef void (*hangwatch_event_fn)(const hangwatch_event *event, void *user_data);

typedef struct hangwatch_config {
    uint64_t threshold_ns;       /* busy time that makes a hang; 0 = 2 s */
    uint64_t check_period_ns;    /* 0 = 1 s */
    hangwatch_check_mode check_mode;
    int early_sampling;          /* nonzero: Matrix's early sampling and Point Stack */
    uint64_t sample_interval_ns; /* 0 = 50 ms */
    unsigned ring_size;          /* 0 = check period / sample interval */
    const char *report_dir;      /* NULL = "hangwatch-reports" (made 0700) */
    unsigned daily_limit;        /* reports per 24 h; 0 = 100 */
    uint64_t max_report_dir_bytes; /* 0 = 256 MiB */
    const char *agent_path;      /* the hangwatch executable; NULL = $HANGWATCH_AGENT,
                                    else the one installed with this library */
    int quiet;                   /* nonzero: the agent prints nothing per hang */
    int stutter;                 /* nonzero: also report stutter (docs/decisions.md);
                                    RUNLOOP detector only */
    hangwatch_event_fn on_event; /* NULL: no callbacks (and no library thread) */
    void *user_data;             /* passed to on_event */
    hangwatch_detector detector; /* RUNLOOP (default) */
    /* PING and SEMAPHORE: how pings reach a loop.  NULL: a ping counts as
     * answered when the loop next waits (as for an unmodified program). */
    hangwatch_post_fn post;
    void *post_data;             /* passed to post */
    uint64_t frame_interval_ns;  /* FRAME_GAP: the tick; 0 = 1/60 s */
    /* Exports beyond the machine (docs/metrics.md); NULL = off.  Appended
     * last: the struct grew, rebuild programs built against older headers. */
    const char *metrics_listen;  /* ADDR:PORT: serve Prometheus metrics at http://ADDR:PORT/metrics */
    const char *metrics_file;    /* write them to this file for node_exporter's textfile collector */
    const char *sentry_dsn;      /* send each report to Sentry as an event ($SENTRY_DSN is not read) */
    /* Which frames are the program's own (in_app; a hang's culprit is the
     * innermost of them: docs/report-format.md, "Whose code"): NULL-
     * terminated lists of path prefixes or globs, as --in-app and
     * --not-in-app; NULL = the default rules.  not_in_app's are applied
     * after in_app's, so a frame that matches both is not in_app.  At most
     * 64 patterns in all; more, or an invalid one, and hangwatch_start
     * returns -EINVAL.  Appended last, as above. */
    const char *const *in_app;
    const char *const *not_in_app;
} hangwatch_config;

/* Fill `cfg` with the defaults above. */
void hangwatch_config_init(hangwatch_config *cfg);

/*
 * Launch the agent and start watching this process.  Returns 0, or a
 * negative errno: -EALREADY if already started, -EINVAL for an unknown
 * detector, stutter with a detector other than RUNLOOP or an unusable
 * in_app pattern, -E2BIG when the options do not fit the agent's command
 * line (paths and patterns of several KiB), -ENOENT if the agent
 * executable cannot be found, -ETIMEDOUT if it did not come up within 5 s.
 * Call it once, from any thread, before registering loops.
 */
int hangwatch_start(const hangwatch_config *cfg);

/* Stop watching and end the agent; returns once it has exited (at most
 * about 2 s).  Safe to call more than once, and without a start. */
void hangwatch_stop(void);

/*
 * Register the calling thread's event loop.  The main thread always gets a
 * loop; other threads get one while slots last (62).  Returns NULL when
 * hangwatch is not started or no slot is left: hangwatch_loop_activity()
 * accepts NULL and does nothing, so a program need not check.
 */
hangwatch_loop *hangwatch_loop_register(void);

/* Report an activity of `loop`, from the thread that registered it.  The hot
 * path: a few memory stores, no lock, no system call. */
void hangwatch_loop_activity(hangwatch_loop *loop, hangwatch_activity activity);

/* The thread's loop is done (its thread may end).  NULL is accepted. */
void hangwatch_loop_unregister(hangwatch_loop *loop);

/*
 * An expected long operation on `loop`'s thread (a blocking save dialog, a
 * shutdown flush): between hangwatch_loop_pause() and
 * hangwatch_loop_resume() the loop is not watched, so nothing is reported
 * however long it takes, and at the resume its busy clock starts again (a
 * callback that goes on working after the resume gets a whole threshold
 * from there).  Activities reported while paused (a nested loop's waits)
 * are ignored.  Pauses nest: the loop is watched again at the resume that
 * matches the first pause.  From the loop's own thread; like
 * hangwatch_loop_activity() a few memory stores, no lock, no system call.
 * NULL is accepted.
 */
void hangwatch_loop_pause(hangwatch_loop *loop);
void hangwatch_loop_resume(hangwatch_loop *loop);

/*
 * FRAME_GAP: call from a timer on `loop` that fires every
 * hangwatch_frame_interval_ns(); a call that comes a threshold or more after
 * the previous one is a hang (reported when it comes, so after the hang).
 * From the loop's own thread; a few stores, no system call.  NULL accepted.
 */
void hangwatch_loop_frame(hangwatch_loop *loop);

/* The frame tick to run, or 0 when the frame-gap detector is not in use. */
uint64_t hangwatch_frame_interval_ns(void);

#ifdef __cplusplus
}
#endif

#endif
