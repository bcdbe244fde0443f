/*
 * metrics.c - see metrics.h.  Metric names and meanings: docs/metrics.md.
 */
#include "metrics.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/common/pi_mutex.h"
#include "core/hw_version.h"
#include "core/text_escape.h"

const uint64_t hw_metrics_bucket_ns[HW_METRICS_BUCKETS] = {
    100000000ull,   250000000ull,   500000000ull,   1000000000ull,  2000000000ull,
    3000000000ull,  5000000000ull,  10000000000ull, 20000000000ull, 30000000000ull,
    60000000000ull, 120000000000ull, 300000000000ull, 600000000000ull,
};
static const char *const bucket_le[HW_METRICS_BUCKETS] = {"0.1", "0.25", "0.5", "1",  "2",   "3",   "5",
                                                          "10",  "20",   "30",  "60", "120", "300", "600"};
static const char *const hang_type_names[HW_METRICS_HANG_TYPES] = {"hang", "launch_hang", "stutter", "cpu_high"};
static const char *const drop_names[HW_METRICS_DROP_REASONS] = {"daily_limit", "size_cap", "write_error",
                                                                "queue_full", "out_of_memory", "ignored",
                                                                "hang_tail", "shutdown"};
static const char *const unseen_names[HW_METRICS_UNSEEN_REASONS] = {"no_loop_wait", "wait_unclear"};
static const char *const sentry_drop_names[HW_METRICS_SENTRY_DROPS] = {"spool_full", "rejected", "unreadable"};

typedef struct process_counts {
    char name[72]; /* the comm escaped (hw_escape_text): printable ASCII */
    char container[72]; /* its container's or unit's label, escaped ("": none) */
    int64_t watched;
    int64_t loops_hung;
    uint64_t hung_ns;
    uint64_t hangs[HW_METRICS_HANG_TYPES][HW_METRICS_CAUSES]; /* by type and cause (hw_cause) */
    uint64_t partial[HW_METRICS_HANG_TYPES]; /* of which the cause was found over part of the hang */
    uint64_t bucket[HW_METRICS_HANG_TYPES][HW_METRICS_BUCKETS]; /* per bucket, not cumulative */
    uint64_t duration_count[HW_METRICS_HANG_TYPES];
    uint64_t duration_sum_ns[HW_METRICS_HANG_TYPES];
    uint64_t reports[HW_METRICS_HANG_TYPES];
    uint64_t dropped[HW_METRICS_DROP_REASONS];
    uint64_t unseen[HW_METRICS_UNSEEN_REASONS];
    uint64_t stretches_unseen;
} process_counts;

/* Everything rendering reads: copied whole under the lock. */
typedef struct counts {
    size_t process_count;
    process_counts procs[HW_METRICS_MAX_PROCESSES + 1]; /* the last: "(other)" */
    uint64_t refused;
    bool sentry_on;
    uint64_t sentry_sent;
    uint64_t sentry_dropped[HW_METRICS_SENTRY_DROPS];
    uint64_t sentry_spooled;
} counts;

struct hw_metrics {
    pthread_mutex_t lock;
    char detector[32];
    int64_t start_unix;
    uint64_t version;
    counts c;
};

hw_metrics *hw_metrics_new(const char *detector)
{
    hw_metrics *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    hw_pi_mutex_init(&m->lock);
    snprintf(m->detector, sizeof m->detector, "%s", detector ? detector : "runloop");
    m->start_unix = (int64_t)time(NULL);
    return m;
}

void hw_metrics_free(hw_metrics *m)
{
    if (!m)
        return;
    pthread_mutex_destroy(&m->lock);
    free(m);
}

/* The counts of `process` (under the lock): a new entry while there is
 * room, "(other)" after that. */
const char *hw_metrics_key(const char *process, const char *container, char *out, size_t len)
{
    if (container && container[0])
        snprintf(out, len, "%s%c%s", process ? process : "", HW_METRICS_CONTAINER_SEPARATOR, container);
    else
        snprintf(out, len, "%s", process ? process : "");
    return out;
}

static process_counts *find(hw_metrics *m, const char *process)
{
    /* "name" or "name<separator>container" */
    char raw[72], name[72], container[72] = "";
    const char *sep = process ? strchr(process, HW_METRICS_CONTAINER_SEPARATOR) : NULL;
    snprintf(raw, sizeof raw, "%.*s", sep ? (int)(sep - process) : 71, process ? process : "");
    hw_escape_text(raw[0] ? raw : "?", name, sizeof name);
    if (sep && sep[1])
        hw_escape_text(sep + 1, container, sizeof container);
    counts *c = &m->c;
    for (size_t i = 0; i < c->process_count; i++)
        if (strcmp(c->procs[i].name, name) == 0 && strcmp(c->procs[i].container, container) == 0)
            return &c->procs[i];
    if (c->process_count < HW_METRICS_MAX_PROCESSES) {
        process_counts *p = &c->procs[c->process_count++];
        snprintf(p->name, sizeof p->name, "%s", name);
        snprintf(p->container, sizeof p->container, "%s", container);
        return p;
    }
    process_counts *other = &c->procs[HW_METRICS_MAX_PROCESSES];
    if (other->name[0] == '\0')
        snprintf(other->name, sizeof other->name, "%s", HW_METRICS_OTHER);
    return other;
}

#define UPDATE(m, stmt)                                                                                                \
    do {                                                                                                               \
        if (!(m))                                                                                                      \
            return;                                                                                                    \
        pthread_mutex_lock(&(m)->lock);                                                                                \
        stmt;                                                                                                          \
        (m)->version++;                                                                                                \
        pthread_mutex_unlock(&(m)->lock);                                                                              \
    } while (0)

static unsigned type_index(hw_metrics_hang_type t)
{
    return (unsigned)t < HW_METRICS_HANG_TYPES ? (unsigned)t : HW_METRICS_HANG;
}

void hw_metrics_watched(hw_metrics *m, const char *process, int delta)
{
    UPDATE(m, find(m, process)->watched += delta);
}

void hw_metrics_hang_detected(hw_metrics *m, const char *process, hw_metrics_hang_type type, hw_cause cause,
                              bool partial)
{
    unsigned c = (unsigned)cause < HW_METRICS_CAUSES ? (unsigned)cause : HW_CAUSE_UNKNOWN;
    UPDATE(m, {
        process_counts *p = find(m, process);
        p->hangs[type_index(type)][c]++;
        p->partial[type_index(type)] += partial;
    });
}

void hw_metrics_loops_hung(hw_metrics *m, const char *process, int delta)
{
    UPDATE(m, find(m, process)->loops_hung += delta);
}

void hw_metrics_hung_time(hw_metrics *m, const char *process, uint64_t ns)
{
    UPDATE(m, find(m, process)->hung_ns += ns);
}

static void observe(process_counts *p, unsigned t, uint64_t final_ns)
{
    for (size_t b = 0; b < HW_METRICS_BUCKETS; b++) {
        if (final_ns <= hw_metrics_bucket_ns[b]) {
            p->bucket[t][b]++;
            break;
        }
    }
    p->duration_count[t]++;
    p->duration_sum_ns[t] += final_ns;
}

void hw_metrics_hang_ended(hw_metrics *m, const char *process, hw_metrics_hang_type type, uint64_t final_ns)
{
    UPDATE(m, observe(find(m, process), type_index(type), final_ns));
}

void hw_metrics_report_written(hw_metrics *m, const char *process, hw_metrics_hang_type type)
{
    UPDATE(m, find(m, process)->reports[type_index(type)]++);
}

void hw_metrics_report_dropped(hw_metrics *m, const char *process, hw_metrics_drop_reason reason)
{
    if ((unsigned)reason >= HW_METRICS_DROP_REASONS)
        return;
    UPDATE(m, find(m, process)->dropped[reason]++);
}

void hw_metrics_loop_unseen(hw_metrics *m, const char *process, hw_metrics_unseen_reason reason)
{
    if ((unsigned)reason >= HW_METRICS_UNSEEN_REASONS)
        return;
    UPDATE(m, find(m, process)->unseen[reason]++);
}

void hw_metrics_stretch_unseen(hw_metrics *m, const char *process)
{
    UPDATE(m, find(m, process)->stretches_unseen++);
}

void hw_metrics_refused(hw_metrics *m)
{
    UPDATE(m, m->c.refused++);
}

void hw_metrics_sentry_sent(hw_metrics *m)
{
    UPDATE(m, (m->c.sentry_on = true, m->c.sentry_sent++));
}

void hw_metrics_sentry_dropped(hw_metrics *m, hw_metrics_sentry_drop reason)
{
    if ((unsigned)reason >= HW_METRICS_SENTRY_DROPS)
        return;
    UPDATE(m, (m->c.sentry_on = true, m->c.sentry_dropped[reason]++));
}

void hw_metrics_sentry_spooled(hw_metrics *m, uint64_t waiting)
{
    UPDATE(m, (m->c.sentry_on = true, m->c.sentry_spooled = waiting));
}

uint64_t hw_metrics_version(hw_metrics *m)
{
    if (!m)
        return 0;
    pthread_mutex_lock(&m->lock);
    uint64_t v = m->version;
    pthread_mutex_unlock(&m->lock);
    return v;
}

hw_metrics_hang_type hw_metrics_hang_type_of(const char *name)
{
    for (unsigned t = 0; name && t < HW_METRICS_HANG_TYPES; t++)
        if (strcmp(name, hang_type_names[t]) == 0)
            return (hw_metrics_hang_type)t;
    return HW_METRICS_HANG;
}

/* ---- the exposition format ---- */

/* A label value: backslash and double quote escaped (the names are
 * printable ASCII already, hw_escape_text). */
static void put_label_value(FILE *f, const char *v);

/* A process's label values: its name, and `",container="` its container's
 * label where it has one (written inside the process label's quotes). */
static void put_process(FILE *f, const process_counts *p)
{
    put_label_value(f, p->name);
    if (p->container[0]) {
        fputs("\",container=\"", f);
        put_label_value(f, p->container);
    }
}

static void put_label_value(FILE *f, const char *v)
{
    for (; *v; v++) {
        if (*v == '\\' || *v == '"')
            fputc('\\', f);
        if (*v == '\n') {
            fputs("\\n", f);
            continue;
        }
        fputc(*v, f);
    }
}

static void family(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void seconds(FILE *f, uint64_t ns)
{
    fprintf(f, "%llu.%09llu", (unsigned long long)(ns / 1000000000ull), (unsigned long long)(ns % 1000000000ull));
}

/* Is hang type t of p to be shown?  "hang" always (a counter must exist
 * at 0 before its first increase), the others once they happened. */
static bool shown(const process_counts *p, unsigned t)
{
    uint64_t hangs = 0;
    for (unsigned c = 0; c < HW_METRICS_CAUSES; c++)
        hangs += p->hangs[t][c];
    return t == HW_METRICS_HANG || hangs || p->duration_count[t] || p->reports[t];
}

static void render(FILE *f, const char *detector, int64_t start_unix, const counts *c)
{
    size_t n = c->process_count;
    const process_counts *procs[HW_METRICS_MAX_PROCESSES + 1];
    for (size_t i = 0; i < n; i++)
        procs[i] = &c->procs[i];
    if (c->procs[HW_METRICS_MAX_PROCESSES].name[0])
        procs[n++] = &c->procs[HW_METRICS_MAX_PROCESSES];

    family(f, "hangwatch_build_info", "gauge", "The hangwatch agent: its version and detector (always 1).");
    fprintf(f, "hangwatch_build_info{version=\"%s\",detector=\"%s\"} 1\n", HW_VERSION_STRING, detector);
    family(f, "hangwatch_start_time_seconds", "gauge", "When the agent started, in Unix time.");
    fprintf(f, "hangwatch_start_time_seconds %lld\n", (long long)start_unix);

    family(f, "hangwatch_watched_processes", "gauge", "Processes watched now, by name.");
    for (size_t i = 0; i < n; i++) {
        fputs("hangwatch_watched_processes{process=\"", f);
        put_process(f, procs[i]);
        fprintf(f, "\"} %lld\n", (long long)(procs[i]->watched > 0 ? procs[i]->watched : 0));
    }

    family(f, "hangwatch_hangs_total", "counter",
           "Hangs detected (launch hangs once the process proved to be a loop; stutter with --stutter), by "
           "where their time went (cause).");
    for (size_t i = 0; i < n; i++)
        for (unsigned t = 0; t < HW_METRICS_HANG_TYPES; t++) {
            if (!shown(procs[i], t) || t == HW_METRICS_CPU_HIGH)
                continue; /* a CPU-high report is not a hang */
            /* Every cause at 0 from the start, so increase() sees each. */
            for (unsigned c = 0; c < HW_METRICS_CAUSES; c++) {
                fputs("hangwatch_hangs_total{process=\"", f);
                put_process(f, procs[i]);
                fprintf(f, "\",detector=\"%s\",hang_type=\"%s\",cause=\"%s\"} %llu\n", detector,
                        hang_type_names[t], hw_cause_name((hw_cause)c), (unsigned long long)procs[i]->hangs[t][c]);
            }
        }

    family(f, "hangwatch_partial_verdicts_total", "counter",
           "Of hangwatch_hangs_total, the hangs whose cause was found over part of the hang (its window covers "
           "less than 90 % of the stretch): a less certain cause.");
    for (size_t i = 0; i < n; i++)
        for (unsigned t = 0; t < HW_METRICS_HANG_TYPES; t++) {
            if (!shown(procs[i], t) || t == HW_METRICS_CPU_HIGH)
                continue;
            fputs("hangwatch_partial_verdicts_total{process=\"", f);
            put_process(f, procs[i]);
            fprintf(f, "\",detector=\"%s\",hang_type=\"%s\"} %llu\n", detector, hang_type_names[t],
                    (unsigned long long)procs[i]->partial[t]);
        }

    family(f, "hangwatch_hang_duration_seconds", "histogram",
           "Final durations of hangs that are over: the whole busy stretch, in seconds.");
    for (size_t i = 0; i < n; i++)
        for (unsigned t = 0; t < HW_METRICS_HANG_TYPES; t++) {
            if (!shown(procs[i], t) || t == HW_METRICS_STUTTER || t == HW_METRICS_CPU_HIGH)
                continue; /* stutter and CPU-high have no end, hence no final duration */
            uint64_t cumulative = 0;
            for (size_t b = 0; b <= HW_METRICS_BUCKETS; b++) {
                if (b < HW_METRICS_BUCKETS)
                    cumulative += procs[i]->bucket[t][b];
                fputs("hangwatch_hang_duration_seconds_bucket{process=\"", f);
                put_process(f, procs[i]);
                fprintf(f, "\",detector=\"%s\",hang_type=\"%s\",le=\"%s\"} %llu\n", detector, hang_type_names[t],
                        b < HW_METRICS_BUCKETS ? bucket_le[b] : "+Inf",
                        (unsigned long long)(b < HW_METRICS_BUCKETS ? cumulative : procs[i]->duration_count[t]));
            }
            fputs("hangwatch_hang_duration_seconds_sum{process=\"", f);
            put_process(f, procs[i]);
            fprintf(f, "\",detector=\"%s\",hang_type=\"%s\"} ", detector, hang_type_names[t]);
            seconds(f, procs[i]->duration_sum_ns[t]);
            fputs("\nhangwatch_hang_duration_seconds_count{process=\"", f);
            put_process(f, procs[i]);
            fprintf(f, "\",detector=\"%s\",hang_type=\"%s\"} %llu\n", detector, hang_type_names[t],
                    (unsigned long long)procs[i]->duration_count[t]);
        }

    family(f, "hangwatch_hung_seconds_total", "counter",
           "Busy time of watched loops in hung stretches, counted while the hang lasts (seconds).");
    for (size_t i = 0; i < n; i++) {
        fputs("hangwatch_hung_seconds_total{process=\"", f);
        put_process(f, procs[i]);
        fprintf(f, "\",detector=\"%s\"} ", detector);
        seconds(f, procs[i]->hung_ns);
        fputc('\n', f);
    }

    family(f, "hangwatch_loops_hung", "gauge", "Watched loop threads hung right now.");
    for (size_t i = 0; i < n; i++) {
        fputs("hangwatch_loops_hung{process=\"", f);
        put_process(f, procs[i]);
        fprintf(f, "\"} %lld\n", (long long)(procs[i]->loops_hung > 0 ? procs[i]->loops_hung : 0));
    }

    family(f, "hangwatch_reports_written_total", "counter", "Hang reports written to the report directory.");
    for (size_t i = 0; i < n; i++)
        for (unsigned t = 0; t < HW_METRICS_HANG_TYPES; t++) {
            if (!shown(procs[i], t))
                continue;
            fputs("hangwatch_reports_written_total{process=\"", f);
            put_process(f, procs[i]);
            fprintf(f, "\",hang_type=\"%s\"} %llu\n", hang_type_names[t], (unsigned long long)procs[i]->reports[t]);
        }

    family(f, "hangwatch_reports_dropped_total", "counter",
           "Hang reports not written, by reason (the hang was still detected and counted).");
    for (size_t i = 0; i < n; i++)
        for (unsigned r = 0; r < HW_METRICS_DROP_REASONS; r++) {
            fputs("hangwatch_reports_dropped_total{process=\"", f);
            put_process(f, procs[i]);
            fprintf(f, "\",reason=\"%s\"} %llu\n", drop_names[r], (unsigned long long)procs[i]->dropped[r]);
        }

    family(f, "hangwatch_loops_unseen_total", "counter",
           "Watched loops whose hangs cannot be told, by reason: no event-loop wait seen, or a loop wait that "
           "cannot be told from waits nested in callbacks (docs/limits.md).");
    for (size_t i = 0; i < n; i++)
        for (unsigned r = 0; r < HW_METRICS_UNSEEN_REASONS; r++) {
            fputs("hangwatch_loops_unseen_total{process=\"", f);
            put_process(f, procs[i]);
            fprintf(f, "\",reason=\"%s\"} %llu\n", unseen_names[r], (unsigned long long)procs[i]->unseen[r]);
        }

    family(f, "hangwatch_stretches_unseen_total", "counter",
           "Busy stretches over before hangwatch's look at their threshold, which came late (the machine ran "
           "hangwatch late, or a capture held it): each may have been a hang nobody saw.");
    for (size_t i = 0; i < n; i++) {
        fputs("hangwatch_stretches_unseen_total{process=\"", f);
        put_process(f, procs[i]);
        fprintf(f, "\"} %llu\n", (unsigned long long)procs[i]->stretches_unseen);
    }

    family(f, "hangwatch_registrations_refused_total", "counter",
           "Loop registrations refused: from outside the watched tree, or malformed (docs/security.md).");
    fprintf(f, "hangwatch_registrations_refused_total %llu\n", (unsigned long long)c->refused);

    if (c->sentry_on) {
        family(f, "hangwatch_sentry_events_sent_total", "counter", "Hang events Sentry accepted.");
        fprintf(f, "hangwatch_sentry_events_sent_total %llu\n", (unsigned long long)c->sentry_sent);
        family(f, "hangwatch_sentry_events_dropped_total", "counter", "Hang events given up, by reason.");
        for (unsigned r = 0; r < HW_METRICS_SENTRY_DROPS; r++)
            fprintf(f, "hangwatch_sentry_events_dropped_total{reason=\"%s\"} %llu\n", sentry_drop_names[r],
                    (unsigned long long)c->sentry_dropped[r]);
        family(f, "hangwatch_sentry_spool_events", "gauge", "Hang events waiting in the spool to be sent.");
        fprintf(f, "hangwatch_sentry_spool_events %llu\n", (unsigned long long)c->sentry_spooled);
    }
}

char *hw_metrics_render(hw_metrics *m, size_t *len)
{
    if (!m)
        return NULL;
    counts *copy = malloc(sizeof *copy);
    if (!copy)
        return NULL;
    pthread_mutex_lock(&m->lock);
    memcpy(copy, &m->c, sizeof *copy);
    pthread_mutex_unlock(&m->lock);
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    if (!f) {
        free(copy);
        return NULL;
    }
    render(f, m->detector, m->start_unix, copy);
    free(copy);
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    if (len)
        *len = size;
    return text;
}
