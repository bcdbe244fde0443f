/*
 * sentry_sender.c - see sentry_sender.h.
 */
#include "sentry_sender.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/common/optional_libs.h"
#include "agent/common/priority_lender.h"
#include "agent/common/watch_priority.h"
#include "core/hw_version.h"
#include "sentry_event.h"

#define FIRST_PAUSE_S 1
#define LONGEST_PAUSE_S 60
#define REQUEST_TIMEOUT_S 30
#define LAST_ATTEMPT_TIMEOUT_S 3
#define MAX_PER_FLUSH 256

typedef enum post_result { POST_OK, POST_RETRY, POST_REJECTED } post_result;

typedef struct transfer {
    const atomic_bool *abort;
    long retry_after_s;
    struct timespec abort_seen; /* when stop's flag was first seen with the body sent; 0 before */
} transfer;

/* Stop's flag ends a request at once, unless its body is out: the server
 * may have taken the event, and ending now would send it again in the last
 * attempt (a duplicate at the receiver).  Its answer is then awaited a
 * little, LAST_ATTEMPT_TIMEOUT_S at most. */
static int on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
    (void)dltotal;
    (void)dlnow;
    transfer *t = arg;
    if (t->abort == NULL || !atomic_load(t->abort))
        return 0;
    if (ultotal <= 0 || ulnow < ultotal)
        return 1;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (t->abort_seen.tv_sec == 0 && t->abort_seen.tv_nsec == 0)
        t->abort_seen = now;
    return now.tv_sec - t->abort_seen.tv_sec > LAST_ATTEMPT_TIMEOUT_S ? 1 : 0;
}

static size_t discard_body(char *data, size_t size, size_t n, void *arg)
{
    (void)data;
    (void)arg;
    return size * n; /* the event id Sentry answers with is ours already */
}

static size_t on_header(char *data, size_t size, size_t n, void *arg)
{
    transfer *t = arg;
    size_t len = size * n;
    if (len > 12 && strncasecmp(data, "Retry-After:", 12) == 0) {
        long s = strtol(data + 12, NULL, 10);
        if (s > 0)
            t->retry_after_s = s > 3600 ? 3600 : s;
    }
    return len;
}

/* POST one envelope.  `curl` is reused across a flush (one connection). */
static post_result post(CURL *curl, const hw_sentry_dsn *dsn, const char *body, size_t len, long timeout_s,
                        transfer *t, char *err, size_t err_len)
{
    const hw_curl_api *cu = hw_curl_api_load(NULL, 0); /* loaded: a flush began */
    char url[700], auth[400], client[64];
    snprintf(client, sizeof client, "%s%s", HW_SENTRY_CLIENT, HW_VERSION_STRING);
    if (hw_sentry_envelope_url(dsn, url, sizeof url) < 0 || hw_sentry_auth_header(dsn, client, auth, sizeof auth) < 0) {
        snprintf(err, err_len, "the DSN makes too long a URL");
        return POST_REJECTED;
    }
    struct curl_slist *headers = NULL;
    headers = cu->slist_append(headers, "Content-Type: application/x-sentry-envelope");
    headers = cu->slist_append(headers, auth);
    char errbuf[CURL_ERROR_SIZE] = "";
    cu->easy_setopt(curl, CURLOPT_URL, url);
    cu->easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    cu->easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
    cu->easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    cu->easy_setopt(curl, CURLOPT_POST, 1L);
    cu->easy_setopt(curl, CURLOPT_POSTFIELDS, body);
    cu->easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    cu->easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    cu->easy_setopt(curl, CURLOPT_USERAGENT, client);
    cu->easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, timeout_s < 10 ? timeout_s : 10L);
    cu->easy_setopt(curl, CURLOPT_TIMEOUT, timeout_s);
    cu->easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
    cu->easy_setopt(curl, CURLOPT_WRITEFUNCTION, discard_body);
    cu->easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
    cu->easy_setopt(curl, CURLOPT_HEADERDATA, t);
    cu->easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
    cu->easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
    cu->easy_setopt(curl, CURLOPT_XFERINFODATA, t);
    t->retry_after_s = 0;
    CURLcode rc = cu->easy_perform(curl);
    cu->slist_free_all(headers);
    cu->easy_setopt(curl, CURLOPT_HTTPHEADER, NULL);
    cu->easy_setopt(curl, CURLOPT_ERRORBUFFER, NULL);
    if (rc != CURLE_OK) {
        snprintf(err, err_len, "cannot reach %.100s: %.120s", dsn->host, errbuf[0] ? errbuf : cu->easy_strerror(rc));
        return POST_RETRY;
    }
    long status = 0;
    cu->easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    if (status >= 200 && status < 300)
        return POST_OK;
    snprintf(err, err_len, "%.100s answered HTTP %ld", dsn->host, status);
    if (status == 429 || status >= 500 || status < 200)
        return POST_RETRY;
    return POST_REJECTED;
}

void hw_sentry_flush(hw_sentry_spool *spool, const hw_sentry_dsn *dsn, long timeout_s, const atomic_bool *abort,
                     hw_metrics *m, hw_sentry_flush_result *r)
{
    memset(r, 0, sizeof *r);
    const hw_curl_api *cu = hw_curl_api_load(r->error, sizeof r->error);
    if (!cu) {
        r->unreachable = true;
        return;
    }
    char (*ids)[33] = malloc(MAX_PER_FLUSH * sizeof *ids);
    CURL *curl = cu->easy_init();
    if (!ids || !curl) {
        snprintf(r->error, sizeof r->error, "out of memory");
        r->unreachable = true;
        goto out;
    }
    size_t n = hw_sentry_spool_list(spool, ids, MAX_PER_FLUSH, NULL, NULL);
    transfer t = {.abort = abort};
    for (size_t i = 0; i < n && !(abort && atomic_load(abort)); i++) {
        char *text = NULL;
        size_t len = 0;
        if (hw_sentry_spool_claim(spool, ids[i], &text, &len) != 0)
            continue; /* gone, or not ours to read */
        hw_sentry_dsn own;
        const hw_sentry_dsn *to = dsn;
        if (!to) {
            /* `hangwatch upload` without a DSN: the one the envelope was made for. */
            char *written = hw_sentry_envelope_dsn(text, len);
            const char *why = NULL;
            if (written && hw_sentry_dsn_parse(written, &own, &why) == 0)
                to = &own;
            free(written);
        }
        post_result res = POST_REJECTED;
        if (to) {
            res = post(curl, to, text, len, timeout_s, &t, r->error, sizeof r->error);
        } else {
            snprintf(r->error, sizeof r->error, "an envelope names no valid DSN (give --sentry-dsn)");
            res = POST_RETRY;
        }
        free(text);
        if (res == POST_OK) {
            hw_sentry_spool_sent(spool, ids[i]);
            r->sent++;
            hw_metrics_sentry_sent(m);
        } else if (res == POST_REJECTED) {
            hw_sentry_spool_sent(spool, ids[i]);
            r->rejected++;
            hw_metrics_sentry_dropped(m, HW_METRICS_SENTRY_REJECTED);
        } else {
            hw_sentry_spool_unclaim(spool, ids[i]);
            r->unreachable = true;
            r->retry_after_s = t.retry_after_s;
            break;
        }
    }
out:
    if (curl)
        cu->easy_cleanup(curl);
    free(ids);
    size_t total = 0;
    char none[1][33];
    hw_sentry_spool_list(spool, none, 0, &total, NULL);
    r->left = total;
    hw_metrics_sentry_spooled(m, total);
}

/* ---- the agent's sender thread ---- */

struct hw_sentry_sender {
    hw_sentry_dsn dsn;
    char dsn_text[HW_SENTRY_DSN_MAX + 1];
    char *spool_path; /* for messages */
    hw_sentry_spool *spool;
    hw_metrics *m;
    bool quiet;
    pthread_t thread;
    _Atomic pid_t tid; /* the sending thread's, once it runs (0 before) */
    pthread_mutex_t lock;
    pthread_cond_t wake;
    bool kicked, stopping;
    atomic_bool abort;
    /* the thread's own */
    bool said_unreachable;
    long pause_s;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* One attempt at everything waiting.  True when the server took all. */
static bool flush_now(hw_sentry_sender *s, long timeout_s, const atomic_bool *abort)
{
    if (hw_sentry_spool_lock(s->spool, 0) != 0)
        return false; /* `hangwatch upload` is sending: try later */
    hw_sentry_flush_result r;
    hw_sentry_flush(s->spool, &s->dsn, timeout_s, abort, s->m, &r);
    hw_sentry_spool_unlock(s->spool);
    if (r.unreachable) {
        if (!s->said_unreachable && !s->quiet)
            fprintf(stderr,
                    "hangwatch: Sentry: %s; %zu event%s wait%s in %s and will be sent when it can be reached (or by "
                    "hangwatch upload)\n",
                    r.error, r.left, r.left == 1 ? "" : "s", r.left == 1 ? "s" : "", s->spool_path);
        s->said_unreachable = true;
        s->pause_s = r.retry_after_s > 0 ? r.retry_after_s : s->pause_s ? s->pause_s * 2 : FIRST_PAUSE_S;
        if (s->pause_s > LONGEST_PAUSE_S && r.retry_after_s == 0)
            s->pause_s = LONGEST_PAUSE_S;
        return false;
    }
    if (r.rejected && !s->quiet)
        fprintf(stderr, "hangwatch: Sentry refused %zu event%s for good (%s); their reports are kept\n", r.rejected,
                r.rejected == 1 ? "" : "s", r.error);
    if (s->said_unreachable && r.sent && !s->quiet)
        fprintf(stderr, "hangwatch: Sentry can be reached again: %zu waiting event%s sent\n", r.sent,
                r.sent == 1 ? "" : "s");
    s->said_unreachable = false;
    s->pause_s = 0;
    return r.left == 0;
}

/* Nothing waits from earlier runs: is the server there at all?  Said once. */
static void check_reachable(hw_sentry_sender *s)
{
    const hw_curl_api *cu = hw_curl_api_load(NULL, 0); /* loaded before the sender started */
    CURL *curl = cu->easy_init();
    if (!curl)
        return;
    char url[700], errbuf[CURL_ERROR_SIZE] = "";
    hw_sentry_envelope_url(&s->dsn, url, sizeof url);
    transfer t = {.abort = &s->abort};
    cu->easy_setopt(curl, CURLOPT_URL, url);
    cu->easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    cu->easy_setopt(curl, CURLOPT_CONNECT_ONLY, 1L);
    cu->easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    cu->easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, 10L);
    cu->easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
    cu->easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
    cu->easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
    cu->easy_setopt(curl, CURLOPT_XFERINFODATA, &t);
    CURLcode rc = cu->easy_perform(curl);
    if (rc != CURLE_OK && !atomic_load(&s->abort) && !s->quiet) {
        fprintf(stderr, "hangwatch: Sentry: cannot reach %s: %s; events will wait in %s until it can be reached\n",
                s->dsn.host, errbuf[0] ? errbuf : cu->easy_strerror(rc), s->spool_path);
        s->said_unreachable = true;
    }
    cu->easy_cleanup(curl);
}

static void *sender_main(void *arg)
{
    hw_sentry_sender *s = arg;
    /* Sending is never urgent: idle time only, like the report worker. */
    const char *policy = getenv("HANGWATCH_WORKER_POLICY");
    if (!policy || strcmp(policy, "normal") != 0)
        (void)hw_take_idle_time(gettid(), HW_BACKGROUND_NICE);
    atomic_store(&s->tid, gettid());
    size_t waiting = 0;
    char none[1][33];
    hw_sentry_spool_list(s->spool, none, 0, &waiting, NULL);
    hw_metrics_sentry_spooled(s->m, waiting);
    bool pending = waiting > 0;
    if (!pending)
        check_reachable(s);
    uint64_t next_try = now_ns();
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (!s->stopping && !(pending && now_ns() >= next_try) && !(s->kicked && s->pause_s == 0)) {
            if (pending) {
                struct timespec until = {(time_t)(next_try / 1000000000ull), (long)(next_try % 1000000000ull)};
                pthread_cond_timedwait(&s->wake, &s->lock, &until);
            } else {
                pthread_cond_wait(&s->wake, &s->lock);
            }
            if (s->kicked)
                pending = true;
        }
        if (s->stopping)
            break;
        s->kicked = false;
        pthread_mutex_unlock(&s->lock);
        pending = !flush_now(s, REQUEST_TIMEOUT_S, &s->abort);
        next_try = now_ns() + (uint64_t)(s->pause_s ? s->pause_s : FIRST_PAUSE_S) * 1000000000ull;
        pthread_mutex_lock(&s->lock);
    }
    pthread_mutex_unlock(&s->lock);
    /* The last attempt, for the reports of hangs that ended with the watch:
     * a short timeout of its own, not aborted by stop's flag. */
    flush_now(s, LAST_ATTEMPT_TIMEOUT_S, NULL);
    return NULL;
}

int hw_sentry_sender_start(const char *dsn_text, int report_dir_fd, const char *report_dir_path, bool quiet,
                           hw_metrics *m, hw_sentry_sender **out, char *why, size_t why_len)
{
    *out = NULL;
    hw_sentry_sender *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(why, why_len, "out of memory");
        return -ENOMEM;
    }
    const char *reason = NULL;
    if (hw_sentry_dsn_parse(dsn_text, &s->dsn, &reason) != 0) {
        snprintf(why, why_len, "invalid Sentry DSN: %s", reason);
        free(s);
        return -EINVAL;
    }
    hw_sentry_dsn_format(&s->dsn, s->dsn_text, sizeof s->dsn_text);
    char spool_why[160];
    int rc = hw_sentry_spool_open(report_dir_fd, true, &s->spool, spool_why, sizeof spool_why);
    if (rc != 0) {
        snprintf(why, why_len, "cannot use %s/%s for Sentry events: %s", report_dir_path, HW_SPOOL_DIR, spool_why);
        free(s);
        return rc;
    }
    if (asprintf(&s->spool_path, "%s/%s", report_dir_path, HW_SPOOL_DIR) < 0)
        s->spool_path = NULL;
    s->m = m;
    s->quiet = quiet;
    atomic_init(&s->abort, false);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&s->wake, &attr);
    pthread_condattr_destroy(&attr);
    pthread_mutex_init(&s->lock, NULL);
    if (pthread_create(&s->thread, NULL, sender_main, s) != 0) {
        snprintf(why, why_len, "cannot start the Sentry sender");
        hw_sentry_spool_close(s->spool);
        pthread_cond_destroy(&s->wake);
        pthread_mutex_destroy(&s->lock);
        free(s->spool_path);
        free(s);
        return -EAGAIN;
    }
    *out = s;
    return 0;
}

const char *hw_sentry_sender_dsn(const hw_sentry_sender *s)
{
    return s->dsn_text;
}

void hw_sentry_sender_submit(hw_sentry_sender *s, const char *event_id, const char *envelope, size_t len)
{
    if (!s)
        return;
    int rc = hw_sentry_spool_add(s->spool, event_id, envelope, len);
    if (rc == -ENOSPC) {
        hw_metrics_sentry_dropped(s->m, HW_METRICS_SENTRY_SPOOL_FULL);
        return;
    }
    if (rc != 0 && rc != -EEXIST) {
        hw_metrics_sentry_dropped(s->m, HW_METRICS_SENTRY_UNREADABLE);
        return;
    }
    pthread_mutex_lock(&s->lock);
    s->kicked = true;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->lock);
}

void hw_sentry_sender_stop(hw_sentry_sender *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    s->stopping = true;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->lock);
    /* A request in progress (up to 30 s against a silent server) ends now;
     * the last attempt that follows has its own short timeout. */
    atomic_store(&s->abort, true);
    struct sched_param sp = {0};
    pid_t tid = atomic_load(&s->tid);
    if (tid > 0)
        hw_thread_policy_set(tid, SCHED_OTHER, &sp);
    pthread_join(s->thread, NULL);
    hw_sentry_spool_close(s->spool);
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->lock);
    free(s->spool_path);
    free(s);
}
