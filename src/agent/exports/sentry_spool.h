/*
 * sentry_spool.h - Sentry envelopes waiting to be sent, in the directory
 * `sentry-spool` of the report directory (docs/decisions.md §30).
 *
 * One file per event, named by its event id:
 *   EVENT_ID.envelope   waiting (never sent, or its server was unreachable)
 *   EVENT_ID.sending    claimed by the sender that holds the spool's lock,
 *                       which posts it and then deletes it
 * Envelopes enter by a temporary file renamed into place, and an event id
 * already in the spool is refused, so one report makes one envelope.  Only
 * the holder of the lock (flock on `.lock`: the agent's sender or
 * `hangwatch upload`) sends; it claims a file by renaming it, posts it,
 * and deletes it once the server has answered 2xx, or renames it back
 * when the server could not be reached.  A `.sending` file found by the
 * lock's next holder was left by a sender that stopped between its post and
 * its delete (killed, crashed, power lost): whether the server got it is
 * unknown, so it is sent again, and Sentry, which keeps one event per
 * event id, does not make a second event of it.
 *
 * Bounded: at most HW_SPOOL_MAX_EVENTS files and HW_SPOOL_MAX_BYTES bytes;
 * an envelope that would pass either is refused (the report itself stays
 * in the report directory).  Only regular files owned by the agent's user
 * with exactly these names are read; everything is done relative to the
 * directory's descriptor, never through a symlink.
 */
#ifndef HANGWATCH_SENTRY_SPOOL_H
#define HANGWATCH_SENTRY_SPOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HW_SPOOL_DIR "sentry-spool"
#define HW_SPOOL_MAX_EVENTS 1000
#define HW_SPOOL_MAX_BYTES (64ull << 20)
#define HW_SPOOL_MAX_ENVELOPE (4u << 20)

typedef struct hw_sentry_spool hw_sentry_spool;

/* Open (`create`: making it, 0700) the spool under the directory
 * `report_dir_fd`.  0, or -errno with a reason (-ENOENT: there is none). */
int hw_sentry_spool_open(int report_dir_fd, bool create, hw_sentry_spool **out, char *why, size_t why_len);
void hw_sentry_spool_close(hw_sentry_spool *s);

/* Tighter bounds than HW_SPOOL_MAX_EVENTS / _BYTES (for tests). */
void hw_sentry_spool_set_bounds(hw_sentry_spool *s, size_t max_events, uint64_t max_bytes);

/* Is `name` an envelope's file name: 32 lower-case hex digits, then
 * ".envelope" or ".sending"?  The event id goes to `id` (if not NULL). */
bool hw_spool_name_valid(const char *name, char id[33], bool *sending);

/* Add the envelope of `event_id`.  0, -EEXIST (already there), -ENOSPC
 * (the spool is full), -EINVAL (a bad id or size), or another -errno. */
int hw_sentry_spool_add(hw_sentry_spool *s, const char *event_id, const char *text, size_t len);

/* The spool's lock: only its holder sends.  `wait_ms` 0: try once.
 * 0, or -EWOULDBLOCK when another holds it. */
int hw_sentry_spool_lock(hw_sentry_spool *s, unsigned wait_ms);
void hw_sentry_spool_unlock(hw_sentry_spool *s);

/* The event ids waiting (both states), oldest first, at most `max`; the
 * total waiting (and their bytes) in *total / *bytes when not NULL. */
size_t hw_sentry_spool_list(hw_sentry_spool *s, char (*ids)[33], size_t max, size_t *total, uint64_t *bytes);

/* With the lock: claim `id` (to .sending) and read it (malloc'd).  0, or
 * -errno (-ENOENT: gone). */
int hw_sentry_spool_claim(hw_sentry_spool *s, const char *id, char **text, size_t *len);
/* Sent: delete it. */
void hw_sentry_spool_sent(hw_sentry_spool *s, const char *id);
/* Not sent: back to waiting. */
void hw_sentry_spool_unclaim(hw_sentry_spool *s, const char *id);

#endif
