/*
 * exports.c - the exports stage's handle (exports.h): Prometheus metrics
 * (metrics.h, metrics_server.h), Sentry events (sentry_sender.h) and the C
 * library's event socket, started before the program and stopped after the
 * last report.  The watch thread's part in them is a few counter updates
 * and datagrams; everything that formats, serves, writes or sends runs on
 * threads of their own (docs/decisions.md §29-30).
 */
#include "exports.h"

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "agent/common/optional_libs.h"
#include "agent/common/report_dir.h"
#include "core/abi/events.h"
#include "core/abi/socket_name.h"

struct hw_exports {
    bool quiet;
    hw_metrics *metrics;            /* NULL without --metrics-listen / --metrics-file (or --config) */
    hw_metrics_exporter *exporter;  /* the /metrics server and the textfile writer */
    /* NULL without a Sentry DSN.  A reload (hw_exports_reconfigure, on the
     * watch thread) may swap it while the worker sends: both under the lock. */
    hw_sentry_sender *sentry;
    pthread_mutex_t sentry_lock;
    pthread_t retiring;             /* a replaced sender's last attempt, off the watch thread */
    bool retiring_on;
    const struct hw_report_dir *report_dir;
    char *listen, *file, *dsn;      /* what the exporters run with (copies), for a reload to compare */
    char server_name[256];          /* the host's name, for Sentry events */
    int events_fd;                  /* attach mode with callbacks: a datagram socket, else -1 */
    struct sockaddr_un events_addr;
    socklen_t events_addr_len;
};

static int start_metrics(hw_exports *ex, const hw_agent_options *o)
{
    ex->metrics = hw_metrics_new(hw_detector_kind_name(o->detector_kind));
    if (!ex->metrics) {
        fprintf(stderr, "hangwatch: out of memory\n");
        return -ENOMEM;
    }
    char why[512];
    int rc = hw_metrics_exporter_start(ex->metrics, o->metrics_listen, o->metrics_file, &ex->exporter, why,
                                       sizeof why);
    if (rc != 0)
        fprintf(stderr, "hangwatch: %s\n", why);
    return rc;
}

/* A sender for `dsn` into *out: 0, or -errno with why.  libcurl's global
 * state is counted: one init per sender, one cleanup when it stops. */
static int new_sender(hw_exports *ex, const char *dsn, hw_sentry_sender **out, char *why, size_t why_len)
{
    const hw_curl_api *cu = hw_curl_api_load(why, why_len);
    if (!cu)
        return -ENOENT;
    cu->global_init(CURL_GLOBAL_DEFAULT); /* before the sender's thread uses libcurl */
    int rc = hw_sentry_sender_start(dsn, hw_report_dir_fd(ex->report_dir), hw_report_dir_path(ex->report_dir),
                                    ex->quiet, ex->metrics, out, why, why_len);
    if (rc != 0)
        cu->global_cleanup();
    return rc;
}

/* The cleanup that pairs with new_sender's init (the library is loaded:
 * a sender exists). */
static void curl_release(void)
{
    hw_curl_api_load(NULL, 0)->global_cleanup();
}

static int start_sentry(hw_exports *ex, const hw_agent_options *o)
{
    char why[512];
    int rc = new_sender(ex, o->sentry_dsn, &ex->sentry, why, sizeof why);
    if (rc != 0)
        fprintf(stderr, "hangwatch: %s\n", why);
    return rc;
}

static char *copy_of(const char *text)
{
    return text != NULL ? strdup(text) : NULL;
}

int hw_exports_start(const hw_agent_options *o, hw_exports **out)
{
    *out = NULL;
    hw_exports *ex = calloc(1, sizeof *ex);
    if (!ex) {
        fprintf(stderr, "hangwatch: out of memory\n");
        return -ENOMEM;
    }
    ex->quiet = o->quiet;
    ex->events_fd = -1;
    ex->report_dir = o->report_dir_handle;
    if (gethostname(ex->server_name, sizeof ex->server_name - 1) != 0)
        ex->server_name[0] = '\0'; /* Sentry events' server_name (a reload may start them) */
    pthread_mutex_init(&ex->sentry_lock, NULL);
    ex->listen = copy_of(o->metrics_listen);
    ex->file = copy_of(o->metrics_file);
    ex->dsn = copy_of(o->sentry_dsn);
    int rc = 0;
    if (o->metrics_listen || o->metrics_file || o->config_path)
        rc = start_metrics(ex, o); /* with --config, counted from the start: a reload may export them */
    if (rc == 0 && o->sentry_dsn)
        rc = start_sentry(ex, o);
    if (rc != 0) {
        hw_exports_stop(ex);
        return rc;
    }
    *out = ex;
    return 0;
}

void hw_exports_stop(hw_exports *ex)
{
    if (!ex)
        return;
    if (ex->retiring_on)
        pthread_join(ex->retiring, NULL);
    if (ex->sentry) {
        hw_sentry_sender_stop(ex->sentry); /* one last attempt at what waits */
        curl_release();
    }
    hw_metrics_exporter_stop(ex->exporter); /* the textfile's last write has the final counts */
    hw_metrics_free(ex->metrics);
    if (ex->events_fd >= 0)
        close(ex->events_fd); /* after the last hang-end events went out */
    pthread_mutex_destroy(&ex->sentry_lock);
    free(ex->listen);
    free(ex->file);
    free(ex->dsn);
    free(ex);
}

/* ---- a reload (watch --config) ---- */

static bool same_text(const char *x, const char *y)
{
    return (x == NULL && y == NULL) || (x != NULL && y != NULL && strcmp(x, y) == 0);
}

/* A replaced sender's last attempt (a few seconds at most against a
 * server that does not answer), on a thread of its own. */
static void *retire_sender(void *sender)
{
    hw_sentry_sender_stop(sender);
    curl_release();
    return NULL;
}

/* The metrics exported at `listen` and `file` from now on: 0, or -1 with
 * why (the old exporter running again). */
static int reconfigure_metrics(hw_exports *ex, const char *listen, const char *file, char *why, size_t why_len)
{
    if (ex->metrics == NULL) {
        snprintf(why, why_len, "the metrics were not counted from the start: restart hangwatch");
        return -1;
    }
    char *new_listen = copy_of(listen), *new_file = copy_of(file);
    if ((listen && !new_listen) || (file && !new_file)) {
        free(new_listen);
        free(new_file);
        snprintf(why, why_len, "out of memory");
        return -1;
    }
    hw_metrics_exporter_stop(ex->exporter); /* its port is free for the new one */
    ex->exporter = NULL;
    int rc = listen || file ? hw_metrics_exporter_start(ex->metrics, listen, file, &ex->exporter, why, why_len) : 0;
    if (rc != 0) {
        char again[256];
        if ((ex->listen || ex->file) &&
            hw_metrics_exporter_start(ex->metrics, ex->listen, ex->file, &ex->exporter, again, sizeof again) != 0)
            fprintf(stderr, "hangwatch: the metrics are not exported any more: %s\n", again);
        free(new_listen);
        free(new_file);
        return -1;
    }
    free(ex->listen);
    free(ex->file);
    ex->listen = new_listen;
    ex->file = new_file;
    return 0;
}

/* Sentry events to `dsn` (NULL: none) from now on: 0, or -1 with why. */
static int reconfigure_sentry(hw_exports *ex, const char *dsn, char *why, size_t why_len)
{
    char *new_dsn = copy_of(dsn);
    hw_sentry_sender *fresh = NULL;
    if (dsn && (!new_dsn || new_sender(ex, dsn, &fresh, why, why_len) != 0)) {
        if (!new_dsn)
            snprintf(why, why_len, "out of memory");
        free(new_dsn);
        return -1;
    }
    pthread_mutex_lock(&ex->sentry_lock);
    hw_sentry_sender *old = ex->sentry;
    ex->sentry = fresh;
    pthread_mutex_unlock(&ex->sentry_lock);
    if (ex->retiring_on) {
        pthread_join(ex->retiring, NULL); /* the one replaced before: its few seconds are long over */
        ex->retiring_on = false;
    }
    if (old != NULL && pthread_create(&ex->retiring, NULL, retire_sender, old) == 0)
        ex->retiring_on = true;
    else if (old != NULL)
        retire_sender(old);
    free(ex->dsn);
    ex->dsn = new_dsn;
    return 0;
}

int hw_exports_reconfigure(hw_exports *ex, const char *listen, const char *file, const char *dsn, char *said,
                           size_t said_len)
{
    bool metrics = !same_text(ex->listen, listen) || !same_text(ex->file, file);
    bool sentry = !same_text(ex->dsn, dsn);
    if (!metrics && !sentry)
        return 0;
    char why[400];
    if (metrics && reconfigure_metrics(ex, listen, file, why, sizeof why) != 0) {
        snprintf(said, said_len, "%s", why);
        return -1;
    }
    int rc = sentry ? reconfigure_sentry(ex, dsn, why, sizeof why) : 0;
    if (rc != 0 && !metrics) {
        snprintf(said, said_len, "%s", why);
        return -1;
    }
    snprintf(said, said_len, "%s%s%s%s%s%s%s%s", metrics ? "metrics " : "",
             metrics ? (listen ? "served on " : "not served") : "", metrics && listen ? listen : "",
             metrics ? (file ? ", written to " : ", no textfile") : "", metrics && file ? file : "",
             metrics && sentry ? "; " : "",
             sentry ? (rc != 0 ? "Sentry not changed: " : dsn ? "Sentry events to the new DSN" : "no Sentry events")
                    : "",
             sentry && rc != 0 ? why : "");
    return 1;
}

hw_metrics *hw_exports_metrics(const hw_exports *ex)
{
    return ex ? ex->metrics : NULL;
}

/* ---- the library's event socket ---- */

int hw_exports_open_events(hw_exports *ex, const char *name)
{
    if (name[0] != '@')
        return -EINVAL;
    int rc = hw_socket_address(name, &ex->events_addr, &ex->events_addr_len);
    if (rc != 0)
        return rc;
    ex->events_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    return ex->events_fd >= 0 ? 0 : -errno;
}

bool hw_exports_has_events(const hw_exports *ex)
{
    return ex && ex->events_fd >= 0;
}

/* A message of `kind` about thread `tid`, everything else zero. */
static void start_message(hw_event_msg *m, uint32_t kind, pid_t tid)
{
    memset(m, 0, offsetof(hw_event_msg, report_path) + 1);
    m->magic = HW_EVENT_MAGIC;
    m->kind = kind;
    m->tid = (int32_t)tid;
}

static void send_message(hw_exports *ex, hw_event_msg *m, const char *path)
{
    size_t n = path ? strlen(path) : 0;
    if (n >= HW_EVENT_PATH_MAX)
        n = 0; /* too long to pass: the event goes without it */
    if (n)
        memcpy(m->report_path, path, n);
    m->report_path[n] = '\0';
    ssize_t sent = sendto(ex->events_fd, m, offsetof(hw_event_msg, report_path) + n + 1, MSG_DONTWAIT | MSG_NOSIGNAL,
                          (struct sockaddr *)&ex->events_addr, ex->events_addr_len);
    (void)sent; /* a program that does not listen loses its events, nothing else */
}

void hw_exports_event(hw_exports *ex, uint32_t kind, pid_t tid, uint64_t busy_ns, uint64_t final_ns,
                      const char *path)
{
    if (!hw_exports_has_events(ex))
        return;
    hw_event_msg m;
    start_message(&m, kind, tid);
    m.busy_ns = busy_ns;
    m.final_ns = final_ns;
    send_message(ex, &m, path);
}

void hw_exports_ping(hw_exports *ex, pid_t tid, unsigned slot, uint64_t token)
{
    if (!hw_exports_has_events(ex))
        return;
    hw_event_msg m;
    start_message(&m, HW_EVENT_PING, tid);
    m.slot = slot;
    m.token = token;
    send_message(ex, &m, NULL);
}

/* ---- a hang's metrics, on the watch thread ---- */

void hw_exports_hang_begin(hw_exports *ex, hw_hang_metrics *hm, const char *process, bool launch, uint64_t start_ns,
                           uint64_t now, hw_cause cause, bool partial)
{
    hw_metrics *m = hw_exports_metrics(ex);
    if (!m)
        return;
    snprintf(hm->process, sizeof hm->process, "%s", process);
    hm->launch = launch;
    hm->counted_ns = now;
    hm->cause = cause;
    hm->partial = partial;
    if (launch)
        return; /* a launch is a hang only if the process turns out to be a loop */
    hw_metrics_hang_detected(m, hm->process, HW_METRICS_HANG, hm->cause, hm->partial);
    hw_metrics_loops_hung(m, hm->process, 1);
    /* It has been busy since its start. */
    hw_metrics_hung_time(m, hm->process, now > start_ns ? now - start_ns : 0);
}

void hw_exports_hang_still_on(hw_exports *ex, hw_hang_metrics *hm, uint64_t now)
{
    hw_metrics *m = hw_exports_metrics(ex);
    if (!m || hm->launch || now <= hm->counted_ns)
        return;
    hw_metrics_hung_time(m, hm->process, now - hm->counted_ns);
    hm->counted_ns = now;
}

void hw_exports_hang_end(hw_exports *ex, hw_hang_metrics *hm, uint64_t now, uint64_t final_ns, bool keep_launch)
{
    hw_metrics *m = hw_exports_metrics(ex);
    if (!m)
        return;
    if (hm->launch) {
        if (!keep_launch)
            return; /* a command that simply ran: no loop, no hang */
        hw_metrics_hang_detected(m, hm->process, HW_METRICS_LAUNCH_HANG, hm->cause, hm->partial);
        hw_metrics_hung_time(m, hm->process, final_ns);
        hw_metrics_hang_ended(m, hm->process, HW_METRICS_LAUNCH_HANG, final_ns);
        return;
    }
    hw_exports_hang_still_on(ex, hm, now);
    hw_metrics_loops_hung(m, hm->process, -1);
    hw_metrics_hang_ended(m, hm->process, HW_METRICS_HANG, final_ns);
}

/* ---- written reports ---- */

bool hw_exports_want_content(const hw_exports *ex)
{
    if (!ex)
        return false;
    pthread_mutex_lock((pthread_mutex_t *)&ex->sentry_lock);
    bool want = ex->sentry != NULL;
    pthread_mutex_unlock((pthread_mutex_t *)&ex->sentry_lock);
    return want;
}

/* A complete report's Sentry event goes into the spool. */
static void send_to_sentry(hw_exports *ex, const hw_published_report *r)
{
    const char *why = "unreadable";
    char event_id[33];
    size_t len = 0;
    char *envelope = r->report ? hw_sentry_envelope_from_report(r->report, hw_sentry_sender_dsn(ex->sentry),
                                                                ex->server_name, event_id, &len, &why)
                               : NULL;
    if (!envelope) {
        hw_metrics_sentry_dropped(ex->metrics, HW_METRICS_SENTRY_UNREADABLE);
        if (!ex->quiet)
            fprintf(stderr, "hangwatch: no Sentry event for %s: %s\n", r->file_name, why);
        return;
    }
    hw_sentry_sender_submit(ex->sentry, event_id, envelope, len);
    free(envelope);
}

void hw_exports_publish(hw_exports *ex, const hw_published_report *r)
{
    if (!ex)
        return;
    if (r->written) {
        const json_t *container = json_object_get(json_object_get(r->report, "hangwatch"), "container");
        char key[96];
        hw_metrics_key(r->process, json_string_value(json_object_get(container, "label")), key, sizeof key);
        hw_metrics_report_written(ex->metrics, key, hw_metrics_hang_type_of(r->hang_type));
        hw_exports_event(ex, HW_EVENT_REPORT, r->tid, r->busy_ns, 0, r->path);
    }
    if (!r->complete)
        return;
    pthread_mutex_lock(&ex->sentry_lock); /* a reload may be swapping the sender */
    if (ex->sentry)
        send_to_sentry(ex, r);
    pthread_mutex_unlock(&ex->sentry_lock);
}
