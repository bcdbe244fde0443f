/*
 * metrics_server.h - the agent's metrics, exported for Prometheus: served
 * at http://ADDR:PORT/metrics (--metrics-listen) and written to a file for
 * node_exporter's textfile collector (--metrics-file).  docs/metrics.md
 * lists the metrics; docs/decisions.md §29 says why it is built this way.
 *
 * The HTTP server is libmicrohttpd's, on its own thread with its own
 * poll loop: a scrape copies the counts under the registry's lock and is
 * formatted and sent there, so a slow, stalled or hostile client can hold
 * at most a connection slot, never the watch thread or the report worker.
 * Connections are bounded (16, 8 per client address), requests too (16 KiB
 * of headers), and idle connections are closed after 10 s.  A connection
 * reaches the server only once its request has arrived whole, within 2 s of
 * its accept (http_gate.h): clients that trickle their request hold no
 * server slot, and a scrape is served while they try.
 *
 * The file is rewritten atomically (a temporary file in the same directory,
 * then rename) when the counts changed, at most once a second, and a last
 * time when the agent ends.
 */
#ifndef HANGWATCH_METRICS_SERVER_H
#define HANGWATCH_METRICS_SERVER_H

#include <stddef.h>

#include "metrics.h"

#define HW_METRICS_MAX_CONNECTIONS 16
#define HW_METRICS_MAX_CONNECTIONS_PER_CLIENT 8
#define HW_METRICS_CONNECTION_TIMEOUT_S 10
#define HW_METRICS_REQUEST_MEMORY 16384

typedef struct hw_metrics_exporter hw_metrics_exporter;

/*
 * Listen on `listen` (ADDR:PORT, listen_address.h; NULL: no server) and
 * write `file` (NULL: none) from `m`.  Both are set up before this returns:
 * the port is bound and the file written once.  0, or -errno with a
 * sentence for people in `why` ("127.0.0.1:9464 is in use by another
 * program"); nothing is left running then.
 */
int hw_metrics_exporter_start(hw_metrics *m, const char *listen, const char *file, hw_metrics_exporter **out,
                              char *why, size_t why_len);

/* The port the server listens on (0 without one). */
unsigned hw_metrics_exporter_port(const hw_metrics_exporter *e);

/* Stop serving; write the file a last time.  NULL is accepted. */
void hw_metrics_exporter_stop(hw_metrics_exporter *e);

#endif
