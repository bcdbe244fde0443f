/*
 * sentry_event.h - a hang report as a Sentry event, in an envelope
 * (docs/decisions.md §30), shaped as Sentry's own SDKs send app hangs:
 *
 *   exception   type and mechanism "AppHang", value "App hanging for 2.504 s
 *               in my-server (pid 4242)" (the final duration when the report
 *               has it, else "at least" the busy time at detection), the
 *               hung thread's stack as its stacktrace, outermost frame first
 *               and innermost LAST, as Sentry orders frames (function,
 *               filename, abs_path, lineno, instruction_addr, symbol_addr,
 *               package, in_app; Python and JavaScript frames with their
 *               platform and no address)
 *   threads     every thread of the report (id, name, crashed, main), with
 *               its stack (the hung one's is the exception's)
 *   debug_meta  every ELF image: code_id = its build-id, debug_id derived
 *               from it as Sentry does for ELF (the first 16 bytes as a
 *               little-endian GUID), code_file, image_addr, image_size
 *   tags        hangwatch.grouping_key, hangwatch.detector,
 *               hangwatch.hang_type, process; fingerprint [hangwatch,
 *               grouping key]: Sentry groups as `hangwatch stats` does
 *   event_id    the report's id, as 32 lower-case hex digits
 *
 * Built from the report's JSON (the file the agent wrote, read back once
 * the hang is over and its final duration is in), with jansson, the JSON
 * library the reports are written with.  Pure; the report is our own file
 * but is still checked field by field, and the event is kept under
 * HW_SENTRY_EVENT_MAX bytes by leaving out other threads' stacks first.
 */
#ifndef HANGWATCH_SENTRY_EVENT_H
#define HANGWATCH_SENTRY_EVENT_H

#include <jansson.h>
#include <stddef.h>

#define HW_SENTRY_EVENT_MAX (900u * 1024u) /* Sentry's limit for an event is 1 MB */

/* Sentry's debug id of an ELF image from its build-id (hex): the first 16
 * bytes (zero-padded) as a GUID whose first three fields are little-endian,
 * "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx".  False for a malformed id. */
int hw_sentry_debug_id(const char *build_id_hex, char out[37]);

/* The event (a JSON object, new reference) for `report`, or NULL with a
 * reason.  `server_name` may be NULL. */
json_t *hw_sentry_event_from_report(const json_t *report, const char *server_name, const char **why);

/*
 * The envelope for `report`: header {"event_id", "dsn"}, one item of type
 * "event".  `dsn` is the DSN in its canonical form (may be NULL).
 * malloc'd text (*len bytes) and the event id in `event_id`, or NULL with
 * a reason.
 */
char *hw_sentry_envelope_from_report(const json_t *report, const char *dsn, const char *server_name,
                                     char event_id[33], size_t *len, const char **why);

/* The envelope `text` with its header's "dsn" replaced by `dsn` (for
 * `hangwatch upload --sentry-dsn`), malloc'd, or NULL when `text` has no
 * JSON header line. */
char *hw_sentry_envelope_with_dsn(const char *text, size_t len, const char *dsn, size_t *out_len);

/* The "dsn" of an envelope's header (malloc'd), or NULL. */
char *hw_sentry_envelope_dsn(const char *text, size_t len);

#endif
