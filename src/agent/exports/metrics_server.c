/*
 * metrics_server.c - see metrics_server.h.
 */
#include "metrics_server.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/common/optional_libs.h"
#include "agent/common/output_file.h"
#include "agent/common/random_id.h"
#include "http_gate.h"
#include "agent/common/write_all.h"
#include "core/parse/listen_address.h"
#include "core/text_escape.h"

#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"
#define FILE_INTERVAL_NS 1000000000ull
/* Connections the kernel holds for the gate to accept: more than a whole
 * gate's table (HW_HTTP_GATE_PENDING) coming back at once.  With 128, the
 * slowloris test's 200 reconnecting clients filled it while the gate waited
 * for a CPU on a busy machine; a scrape's SYN was dropped and sent again a
 * second later (its scrape took 1.007 s). */
#define LISTEN_BACKLOG 1024

struct hw_metrics_exporter {
    hw_metrics *m;
    /* the server, behind its gate (http_gate.h) */
    struct MHD_Daemon *daemon;
    hw_http_gate *gate;
    unsigned port;
    /* the textfile */
    int dir_fd;
    char *file_name; /* within dir_fd */
    char *file_path; /* for messages */
    pthread_t writer;
    bool writer_running;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    bool stopping;
    uint64_t written_version;
    bool said_write_error;
};

/* ---- the server ---- */

/* libmicrohttpd, loaded by start_server before anything here runs. */
static const hw_mhd_api *mhd(void)
{
    return hw_mhd_api_load(NULL, 0);
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *text)
{
    struct MHD_Response *r = mhd()->create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    mhd()->add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
    enum MHD_Result ok = mhd()->queue_response(c, status, r);
    mhd()->destroy_response(r);
    return ok;
}

/* One request: GET or HEAD /metrics.  Anything else is answered at once
 * (its body, if any, is never read into memory). */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    (void)version;
    (void)upload_data;
    (void)upload_data_size;
    (void)con_cls;
    hw_metrics_exporter *e = cls;
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET /metrics is served here\n");
    if (strcmp(url, "/metrics") != 0)
        return reply(c, MHD_HTTP_NOT_FOUND, "hangwatch serves its metrics at /metrics\n");
    size_t len = 0;
    char *text = hw_metrics_render(e->m, &len);
    if (!text)
        return reply(c, MHD_HTTP_SERVICE_UNAVAILABLE, "out of memory\n");
    struct MHD_Response *r = mhd()->create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(text);
        return MHD_NO;
    }
    mhd()->add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, CONTENT_TYPE);
    enum MHD_Result ok = mhd()->queue_response(c, MHD_HTTP_OK, r);
    mhd()->destroy_response(r);
    return ok;
}

/* Bind and listen on `text` (already parsed once by the command line).
 * The socket, or -errno with `why`. */
static int open_listener(const char *text, char *why, size_t why_len)
{
    hw_listen_address addr;
    const char *reason = NULL;
    if (hw_listen_address_parse(text, &addr, &reason) != 0) {
        snprintf(why, why_len, "invalid --metrics-listen '%s': %s", text, reason);
        return -EINVAL;
    }
    char port[8];
    snprintf(port, sizeof port, "%u", addr.port);
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    /* Every interface: IPv6's, taking IPv4 too, where the machine has IPv6. */
    hints.ai_family = addr.host[0] == '\0' ? AF_INET6 : AF_UNSPEC;
    int g = getaddrinfo(addr.host[0] ? addr.host : NULL, port, &hints, &res);
    if (g != 0 && addr.host[0] == '\0') {
        hints.ai_family = AF_INET;
        g = getaddrinfo(NULL, port, &hints, &res);
    }
    if (g != 0) {
        snprintf(why, why_len, "cannot listen on %s: %s", text, gai_strerror(g));
        return -EINVAL;
    }
    int err = EADDRNOTAVAIL;
    int fd = -1;
    for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
        if (fd < 0) {
            err = errno;
            continue;
        }
        int one = 1, zero = 0;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (ai->ai_family == AF_INET6 && addr.host[0] == '\0')
            setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, LISTEN_BACKLOG) != 0) {
            err = errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0) {
        if (err == EADDRINUSE)
            snprintf(why, why_len, "cannot listen on %s: the port is in use by another program", text);
        else if (err == EACCES)
            snprintf(why, why_len, "cannot listen on %s: permission denied (a port below 1024 needs root)", text);
        else
            snprintf(why, why_len, "cannot listen on %s: %s", text, strerror(err));
        return -err;
    }
    return fd;
}

static unsigned bound_port(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
        return 0;
    if (ss.ss_family == AF_INET)
        return ntohs(((struct sockaddr_in *)&ss)->sin_port);
    if (ss.ss_family == AF_INET6)
        return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    return 0;
}

/* A connection whose request has arrived whole: the server's from now on
 * (it closes the socket when it cannot take it). */
static void let_in(void *ctx, int fd, const struct sockaddr *addr, socklen_t addr_len)
{
    hw_metrics_exporter *e = ctx;
    (void)mhd()->add_connection(e->daemon, fd, addr, addr_len);
}

static int start_server(hw_metrics_exporter *e, const char *listen_text, char *why, size_t why_len)
{
    if (!hw_mhd_api_load(why, why_len))
        return -ENOENT;
    int fd = open_listener(listen_text, why, why_len);
    if (fd < 0)
        return fd;
    e->port = bound_port(fd);
    /* libmicrohttpd's own thread and poll loop; its options bound what a
     * client can take (metrics_server.h).  It gets only connections whose
     * request has arrived whole: the gate accepts them (http_gate.h). */
    e->daemon = mhd()->start_daemon(
        MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ITC | MHD_USE_NO_LISTEN_SOCKET, 0, NULL, NULL, on_request, e,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)HW_METRICS_MAX_CONNECTIONS, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
        (unsigned)HW_METRICS_MAX_CONNECTIONS_PER_CLIENT, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)HW_METRICS_CONNECTION_TIMEOUT_S, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        (size_t)HW_METRICS_REQUEST_MEMORY, MHD_OPTION_END);
    if (!e->daemon) {
        close(fd);
        snprintf(why, why_len, "cannot serve metrics on %s: libmicrohttpd did not start", listen_text);
        return -EIO;
    }
    int rc = hw_http_gate_start(fd, HW_METRICS_REQUEST_MEMORY, let_in, e, &e->gate);
    if (rc != 0) {
        close(fd);
        mhd()->stop_daemon(e->daemon);
        e->daemon = NULL;
        snprintf(why, why_len, "cannot serve metrics on %s: %s", listen_text, strerror(-rc));
        return rc;
    }
    return 0;
}

/* ---- the textfile ---- */

/* Write the counts to the file now.  0 or -errno. */
static int write_file(hw_metrics_exporter *e)
{
    size_t len = 0;
    char *text = hw_metrics_render(e->m, &len);
    if (!text)
        return -ENOMEM;
    unsigned char rnd[6];
    hw_random_bytes(rnd, sizeof rnd);
    char tmp[300];
    snprintf(tmp, sizeof tmp, ".%.200s.tmp-%02x%02x%02x%02x%02x%02x", e->file_name, rnd[0], rnd[1], rnd[2], rnd[3],
             rnd[4], rnd[5]);
    int fd = openat(e->dir_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
        free(text);
        return -errno;
    }
    int rc = hw_write_all(fd, text, len);
    free(text);
    /* Readable by node_exporter, which runs as its own user. */
    if (rc == 0 && fchmod(fd, 0644) != 0)
        rc = -errno;
    if (close(fd) != 0 && rc == 0)
        rc = -errno;
    if (rc == 0 && renameat(e->dir_fd, tmp, e->dir_fd, e->file_name) != 0)
        rc = -errno;
    if (rc != 0)
        unlinkat(e->dir_fd, tmp, 0);
    return rc;
}

static void write_file_or_say(hw_metrics_exporter *e)
{
    uint64_t v = hw_metrics_version(e->m);
    int rc = write_file(e);
    if (rc == 0) {
        e->written_version = v;
    } else if (!e->said_write_error) {
        e->said_write_error = true;
        char name[300];
        fprintf(stderr, "hangwatch: cannot write the metrics file %s: %s (will try again)\n",
                hw_escape_text(e->file_path, name, sizeof name), strerror(-rc));
    }
}

static void *writer_main(void *arg)
{
    hw_metrics_exporter *e = arg;
    pthread_mutex_lock(&e->lock);
    while (!e->stopping) {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += FILE_INTERVAL_NS / 1000000000ull;
        pthread_cond_timedwait(&e->wake, &e->lock, &until);
        if (e->stopping)
            break;
        pthread_mutex_unlock(&e->lock);
        if (hw_metrics_version(e->m) != e->written_version)
            write_file_or_say(e);
        pthread_mutex_lock(&e->lock);
    }
    pthread_mutex_unlock(&e->lock);
    return NULL;
}

static int start_file(hw_metrics_exporter *e, const char *path, char *why, size_t why_len)
{
    char shown[300], reason[400];
    hw_escape_text(path, shown, sizeof shown);
    /* Its directory reached as the report directory is (output_file.h):
     * never through another user's link or directory. */
    const char *base = NULL;
    e->dir_fd = hw_output_dir_open(path, &base, reason, sizeof reason);
    if (e->dir_fd == -EISDIR) {
        snprintf(why, why_len, "invalid --metrics-file '%s': %s", shown, reason);
        return -EINVAL;
    }
    if (e->dir_fd < 0) {
        snprintf(why, why_len, "cannot write the metrics file %s: %s", shown, reason);
        return e->dir_fd;
    }
    e->file_name = strdup(base);
    e->file_path = strdup(path);
    if (!e->file_name || !e->file_path) {
        snprintf(why, why_len, "out of memory");
        return -ENOMEM;
    }
    int rc = write_file(e);
    if (rc != 0) {
        snprintf(why, why_len, "cannot write the metrics file %s: %s", shown, strerror(-rc));
        return rc;
    }
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&e->wake, &attr);
    pthread_condattr_destroy(&attr);
    pthread_mutex_init(&e->lock, NULL);
    if (pthread_create(&e->writer, NULL, writer_main, e) != 0) {
        pthread_cond_destroy(&e->wake);
        pthread_mutex_destroy(&e->lock);
        snprintf(why, why_len, "cannot start the metrics file's writer");
        return -EAGAIN;
    }
    e->writer_running = true;
    return 0;
}

/* ---- both ---- */

int hw_metrics_exporter_start(hw_metrics *m, const char *listen_text, const char *file, hw_metrics_exporter **out,
                              char *why, size_t why_len)
{
    *out = NULL;
    hw_metrics_exporter *e = calloc(1, sizeof *e);
    if (!e) {
        snprintf(why, why_len, "out of memory");
        return -ENOMEM;
    }
    e->m = m;
    e->dir_fd = -1;
    int rc = 0;
    if (file)
        rc = start_file(e, file, why, why_len);
    if (rc == 0 && listen_text)
        rc = start_server(e, listen_text, why, why_len);
    if (rc != 0) {
        hw_metrics_exporter_stop(e);
        return rc;
    }
    *out = e;
    return 0;
}

unsigned hw_metrics_exporter_port(const hw_metrics_exporter *e)
{
    return e ? e->port : 0;
}

void hw_metrics_exporter_stop(hw_metrics_exporter *e)
{
    if (!e)
        return;
    hw_http_gate_stop(e->gate); /* closes the listening socket and the waiting connections */
    if (e->daemon)
        mhd()->stop_daemon(e->daemon);
    if (e->writer_running) {
        pthread_mutex_lock(&e->lock);
        e->stopping = true;
        pthread_cond_signal(&e->wake);
        pthread_mutex_unlock(&e->lock);
        pthread_join(e->writer, NULL);
        write_file_or_say(e); /* the final counts */
        pthread_cond_destroy(&e->wake);
        pthread_mutex_destroy(&e->lock);
    }
    if (e->dir_fd >= 0)
        close(e->dir_fd);
    free(e->file_name);
    free(e->file_path);
    free(e);
}
