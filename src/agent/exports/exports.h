/*
 * exports.h - the exports stage's interface: where hangs and written
 * reports go beyond the report directory.
 *
 *   the metrics    Prometheus counters of hangs, reports and drops,
 *                  served on /metrics and written to node_exporter's
 *                  textfile (metrics.h, metrics_server.h; docs/metrics.md);
 *   Sentry         one event per complete report, spooled and sent by a
 *                  thread of its own (sentry_event.h, sentry_spool.h,
 *                  sentry_sender.h; docs/decisions.md §30);
 *   the library's  a datagram per hang, report and hang end to the program
 *   event socket   that started the agent through the C library, for its
 *                  callbacks (core/abi/events.h).
 *
 * One handle holds them all.  The watch thread tells it of hangs (their
 * start, that they go on, their end); the report worker publishes each
 * report it writes through one call, hw_exports_publish, and each sink takes
 * what it needs from it.  Nothing here calls back into the stages that use
 * it, and nothing here blocks them: formatting, serving, writing and sending
 * run on threads of their own.
 */
#ifndef HANGWATCH_EXPORTS_H
#define HANGWATCH_EXPORTS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/common/options.h"
#include "metrics.h"
#include "metrics_server.h"
#include "sentry_event.h"
#include "sentry_sender.h"
#include "sentry_spool.h"

typedef struct hw_exports hw_exports;

/* Start what the options ask for (the metrics and their server or file,
 * the Sentry sender) before the program starts: 0, or -errno after saying
 * why on stderr (a port in use: the agent then exits 2). */
int hw_exports_start(const hw_agent_options *opts, hw_exports **out);

/* Stop, after the report worker has published its last report: the
 * metrics' last textfile has the final counts, the sender makes one last
 * attempt at what waits.  NULL is fine. */
void hw_exports_stop(hw_exports *ex);

/* watch --config read again: the metrics served on `listen` and written to
 * `file`, Sentry events sent to `dsn` (each NULL: none) from now on, the
 * counters kept.  1 when something changed (`said` says what), 0 when
 * nothing did, -1 when it could not be done (`said` says why; what ran
 * goes on).  A replaced sender makes its last attempt on a thread of its
 * own.  On the watch thread. */
int hw_exports_reconfigure(hw_exports *ex, const char *listen, const char *file, const char *dsn, char *said,
                           size_t said_len);

/* The counters, or NULL without --metrics-listen / --metrics-file (every
 * hw_metrics_ call takes NULL and does nothing). */
hw_metrics *hw_exports_metrics(const hw_exports *ex);

/* ---- the library's event socket ---- */

/* Send events to the abstract socket `name` ("@..."): 0, or -errno. */
int hw_exports_open_events(hw_exports *ex, const char *name);
bool hw_exports_has_events(const hw_exports *ex);
/* An event of `kind` (core/abi/events.h) about thread `tid`; `path` may be
 * NULL.  Lost when nobody listens. */
void hw_exports_event(hw_exports *ex, uint32_t kind, pid_t tid, uint64_t busy_ns, uint64_t final_ns,
                      const char *path);
/* Ask the program to post ping `token` to the loop in `slot`. */
void hw_exports_ping(hw_exports *ex, pid_t tid, unsigned slot, uint64_t token);

/* ---- a hang's metrics, on the watch thread ---- */

/* What the metrics keep of one hang in progress (its loop holds it). */
typedef struct hw_hang_metrics {
    char process[96];    /* its process's metrics key when it began (hw_metrics_key) */
    bool launch;         /* a launch: counted only once kept */
    uint64_t counted_ns; /* hung time counted up to here (monotonic) */
    hw_cause cause;      /* where its time went, at its detection */
    bool partial;        /* ... found over part of the hang */
} hw_hang_metrics;

/* A hang of `process`, busy since `start_ns`, began at `now` (a launch is
 * counted only once kept); it is still on at `now`; it ended with
 * `final_ns` (a launch's `keep_launch`: the process proved a loop). */
void hw_exports_hang_begin(hw_exports *ex, hw_hang_metrics *hm, const char *process, bool launch, uint64_t start_ns,
                           uint64_t now, hw_cause cause, bool partial);
void hw_exports_hang_still_on(hw_exports *ex, hw_hang_metrics *hm, uint64_t now);
void hw_exports_hang_end(hw_exports *ex, hw_hang_metrics *hm, uint64_t now, uint64_t final_ns, bool keep_launch);

/* ---- written reports, from the report worker ---- */

/* One report the worker wrote, at one of two moments: when it is written
 * (`written`: counted, its path sent to the library), and when its content
 * is final (`complete`: its final duration in, or none to wait for; Sentry
 * makes its event then).  A report with nothing to wait for is both at
 * once. */
typedef struct hw_published_report {
    const char *file_name; /* in the report directory */
    const char *path;      /* the directory's path and the file's name, or NULL */
    pid_t tid;             /* the hung (or hottest) thread */
    uint64_t busy_ns;      /* busy when detected */
    const char *process;   /* report.process_name */
    const char *hang_type; /* hangwatch.hang_type */
    const json_t *report;  /* the report as written (with its final duration when complete), or NULL */
    bool written, complete;
} hw_published_report;

/* Hand a written report to every sink that wants it. */
void hw_exports_publish(hw_exports *ex, const hw_published_report *r);

/* Does a sink want complete reports' content (Sentry does)?  Else the
 * worker need not keep a report until its hang ends. */
bool hw_exports_want_content(const hw_exports *ex);

#endif
