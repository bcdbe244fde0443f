/*
 * sentry_sender.h - sending Sentry envelopes over HTTP(S) with libcurl,
 * from the spool (sentry_spool.h), off the detection path
 * (docs/decisions.md §30).
 *
 * The agent's sender is a thread of its own.  The report worker, once a
 * report is complete, builds its envelope (sentry_event.h), puts it in the
 * spool and wakes the sender; the sender takes the spool's lock, posts
 * every waiting envelope to the DSN's envelope endpoint, and deletes each
 * one the server accepted.  When the server cannot be reached (or answers
 * 429 or 5xx) the envelopes stay and the sender tries again after a pause
 * that doubles from 1 s up to 60 s (or what Retry-After says); a 4xx other
 * than 429 means the server will never take that envelope: it is deleted
 * and counted (its report is still in the report directory).  At start it
 * sends what earlier runs left, or checks that the server can be reached,
 * and says once, on stderr, when it cannot.  When the agent ends, the
 * sender makes one last attempt of at most a few seconds; what is left
 * waits for the next agent or `hangwatch upload`.
 */
#ifndef HANGWATCH_SENTRY_SENDER_H
#define HANGWATCH_SENTRY_SENDER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/parse/sentry_dsn.h"
#include "metrics.h"
#include "sentry_spool.h"

#define HW_SENTRY_CLIENT "hangwatch/" /* + version */

typedef struct hw_sentry_flush_result {
    size_t sent;          /* accepted by the server */
    size_t rejected;      /* refused for good (deleted) */
    size_t left;          /* still waiting in the spool */
    long retry_after_s;   /* the server asked for a pause (429/503), 0 if not */
    bool unreachable;     /* stopped at a failure to reach the server */
    char error[256];      /* the last failure, for people */
} hw_sentry_flush_result;

/*
 * Send what waits in `spool` (whose lock the caller holds): to `dsn`, or
 * when NULL to the DSN in each envelope's header.  Stops at the first
 * failure to reach a server.  Each request may take `timeout_s`; `abort`
 * (may be NULL) set to true ends the one in progress.  Counts into `m`.
 */
void hw_sentry_flush(hw_sentry_spool *spool, const hw_sentry_dsn *dsn, long timeout_s, const atomic_bool *abort,
                     hw_metrics *m, hw_sentry_flush_result *r);

typedef struct hw_sentry_sender hw_sentry_sender;

/* Start the agent's sender for `dsn_text` (already checked) with the
 * spool under `report_dir_fd`.  0, or -errno with a reason. */
int hw_sentry_sender_start(const char *dsn_text, int report_dir_fd, const char *report_dir_path, bool quiet,
                           hw_metrics *m, hw_sentry_sender **out, char *why, size_t why_len);

/* From the report worker: the envelope of a complete report.  Never
 * blocks on the network (a file in the spool, and a wake-up). */
void hw_sentry_sender_submit(hw_sentry_sender *s, const char *event_id, const char *envelope, size_t len);

/* The DSN in its canonical form, for envelope headers. */
const char *hw_sentry_sender_dsn(const hw_sentry_sender *s);

/* One last attempt (a few seconds at most), then stop.  NULL accepted. */
void hw_sentry_sender_stop(hw_sentry_sender *s);

#endif
