/*
 * http_gate.c - connections let in once their request's headers have all
 * arrived (http_gate.h).
 *
 * One thread polls the listening socket, a pipe that wakes it to stop, and
 * every waiting connection.  A waiting connection is looked at with
 * recv(MSG_PEEK) each time it becomes readable: the bytes stay in the
 * socket for the server to read.  It is let in when "\r\n\r\n" is among
 * them, closed when the client closes, when its headers grow past the
 * bound, when its deadline passes, or when it is the oldest of a full table
 * and another arrives.
 */
#include "http_gate.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct waiting {
    int fd;                      /* -1: a free entry */
    uint64_t deadline_ms;
    uint64_t arrived;            /* order of arrival, for the oldest */
    struct sockaddr_storage addr;
    socklen_t addr_len;
} waiting;

struct hw_http_gate {
    int listen_fd;
    int wake[2];
    size_t max_header_bytes;
    hw_http_gate_pass pass;
    void *ctx;
    pthread_t thread;
    waiting waiting[HW_HTTP_GATE_PENDING];
    uint64_t arrivals;
    char *peek; /* max_header_bytes + 1 */
};

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void drop(waiting *w)
{
    if (w->fd >= 0)
        close(w->fd);
    w->fd = -1;
}

/* A free entry, or the oldest one's, which is closed to make room. */
static waiting *room(hw_http_gate *g)
{
    waiting *oldest = NULL;
    for (size_t i = 0; i < HW_HTTP_GATE_PENDING; i++) {
        if (g->waiting[i].fd < 0)
            return &g->waiting[i];
        if (oldest == NULL || g->waiting[i].arrived < oldest->arrived)
            oldest = &g->waiting[i];
    }
    drop(oldest);
    return oldest;
}

static void take_new(hw_http_gate *g)
{
    for (;;) {
        struct sockaddr_storage addr;
        socklen_t len = sizeof addr;
        int fd = accept4(g->listen_fd, (struct sockaddr *)&addr, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return; /* EAGAIN: no more now; anything else: the next poll says again */
        waiting *w = room(g);
        *w = (waiting){.fd = fd, .deadline_ms = now_ms() + HW_HTTP_GATE_DEADLINE_MS, .arrived = g->arrivals++,
                       .addr = addr, .addr_len = len};
    }
}

/* Look at what a waiting connection has sent: let it in, keep it, or close
 * it. */
static void look(hw_http_gate *g, waiting *w)
{
    ssize_t n = recv(w->fd, g->peek, g->max_header_bytes, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (n <= 0) {
        drop(w); /* closed by the client, or an error */
        return;
    }
    g->peek[n] = '\0';
    bool complete = false;
    for (ssize_t i = 0; i + 3 < n && !complete; i++)
        complete = memcmp(g->peek + i, "\r\n\r\n", 4) == 0;
    if (complete) {
        int fd = w->fd;
        w->fd = -1;
        g->pass(g->ctx, fd, (const struct sockaddr *)&w->addr, w->addr_len);
    } else if ((size_t)n >= g->max_header_bytes) {
        drop(w); /* headers over the bound: the server would refuse them too */
    }
}

static void *gate_main(void *arg)
{
    hw_http_gate *g = arg;
    struct pollfd fds[HW_HTTP_GATE_PENDING + 2];
    size_t index_of[HW_HTTP_GATE_PENDING + 2];
    for (;;) {
        uint64_t now = now_ms(), next = UINT64_MAX;
        size_t n = 0;
        fds[n++] = (struct pollfd){.fd = g->wake[0], .events = POLLIN};
        fds[n++] = (struct pollfd){.fd = g->listen_fd, .events = POLLIN};
        for (size_t i = 0; i < HW_HTTP_GATE_PENDING; i++) {
            waiting *w = &g->waiting[i];
            if (w->fd < 0)
                continue;
            if (w->deadline_ms <= now) {
                drop(w); /* its headers did not come in time, however it trickled */
                continue;
            }
            if (w->deadline_ms < next)
                next = w->deadline_ms;
            index_of[n] = i;
            fds[n++] = (struct pollfd){.fd = w->fd, .events = POLLIN};
        }
        int timeout = next == UINT64_MAX ? -1 : (int)(next - now);
        if (poll(fds, n, timeout) < 0 && errno != EINTR)
            continue;
        if (fds[0].revents != 0)
            return NULL; /* stop */
        for (size_t k = 2; k < n; k++)
            if (fds[k].revents != 0)
                look(g, &g->waiting[index_of[k]]);
        if (fds[1].revents & POLLIN)
            take_new(g);
    }
}

int hw_http_gate_start(int listen_fd, size_t max_header_bytes, hw_http_gate_pass pass, void *ctx,
                       hw_http_gate **out)
{
    *out = NULL;
    hw_http_gate *g = calloc(1, sizeof *g);
    char *peek = malloc(max_header_bytes + 1);
    if (g == NULL || peek == NULL || max_header_bytes < 4) {
        free(g);
        free(peek);
        return -ENOMEM;
    }
    *g = (hw_http_gate){.listen_fd = listen_fd, .max_header_bytes = max_header_bytes, .pass = pass, .ctx = ctx,
                        .peek = peek};
    for (size_t i = 0; i < HW_HTTP_GATE_PENDING; i++)
        g->waiting[i].fd = -1;
    int flags = fcntl(listen_fd, F_GETFL);
    if (flags < 0 || fcntl(listen_fd, F_SETFL, flags | O_NONBLOCK) != 0 || pipe2(g->wake, O_CLOEXEC) != 0) {
        int err = errno;
        free(peek);
        free(g);
        return -err;
    }
    int rc = pthread_create(&g->thread, NULL, gate_main, g);
    if (rc != 0) {
        close(g->wake[0]);
        close(g->wake[1]);
        free(peek);
        free(g);
        return -rc;
    }
    *out = g;
    return 0;
}

void hw_http_gate_stop(hw_http_gate *g)
{
    if (g == NULL)
        return;
    char stop = 1;
    ssize_t w;
    do
        w = write(g->wake[1], &stop, 1);
    while (w < 0 && errno == EINTR);
    pthread_join(g->thread, NULL);
    for (size_t i = 0; i < HW_HTTP_GATE_PENDING; i++)
        drop(&g->waiting[i]);
    close(g->listen_fd);
    close(g->wake[0]);
    close(g->wake[1]);
    free(g->peek);
    free(g);
}
