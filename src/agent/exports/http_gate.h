/*
 * http_gate.h - a doorway in front of the metrics server that lets a
 * connection in only once its request has fully arrived.
 *
 * A client that sends its request a byte at a time (slowloris) would hold
 * one of libmicrohttpd's connection slots for as long as it keeps sending,
 * since each byte restarts the server's idle timeout; a few dozen such
 * clients from one address could keep every scrape out.  The gate accepts
 * connections itself, on its own thread, and looks at what each has sent
 * (MSG_PEEK, nothing consumed) until the end of its headers is there; only
 * then is the connection handed to the server, which reads the request as
 * usual.  A connection whose headers have not all arrived within
 * HW_HTTP_GATE_DEADLINE_MS of its accept, whatever it sends, is closed; when
 * HW_HTTP_GATE_PENDING connections are waiting, a new one closes the oldest,
 * so a client that sends its request at once is always let in.
 */
#ifndef HANGWATCH_HTTP_GATE_H
#define HANGWATCH_HTTP_GATE_H

#include <stddef.h>
#include <sys/socket.h>

#define HW_HTTP_GATE_DEADLINE_MS 2000 /* from accept to the end of the headers */
#define HW_HTTP_GATE_PENDING 256      /* connections waiting for their headers at most */

typedef struct hw_http_gate hw_http_gate;

/* Called on the gate's thread with a connection whose headers have all
 * arrived; it owns `fd` from then on. */
typedef void (*hw_http_gate_pass)(void *ctx, int fd, const struct sockaddr *addr, socklen_t addr_len);

/* Start gating `listen_fd` (a listening socket, which the gate owns once
 * this succeeds): headers of at most `max_header_bytes`.  0, or -errno. */
int hw_http_gate_start(int listen_fd, size_t max_header_bytes, hw_http_gate_pass pass, void *ctx,
                       hw_http_gate **out);

/* Stop the gate's thread and close the listening socket and every waiting
 * connection (NULL is fine). */
void hw_http_gate_stop(hw_http_gate *g);

#endif
