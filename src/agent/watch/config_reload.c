/*
 * config_reload.c - `hangwatch watch --config FILE`, read again on SIGHUP
 * (docs/config.md).  The command line reads and checks the file
 * (hw_agent_options.reload_config); here the watch thread takes from it
 * what can change while the agent runs, and says each change on stderr:
 *
 *   the thresholds  --threshold, --check-period, --check-mode: every loop's
 *                   detector at once (a stretch in progress is judged by
 *                   the new threshold from its start);
 *   the selectors   --comm, --exe, --cgroup, --user, --exclude: every
 *                   process of the machine held to them again;
 *   the exporters   --metrics-listen, --metrics-file, --sentry-dsn: the
 *                   server, the textfile and the sender restarted with the
 *                   new ones, the counters kept.
 *
 * What it keeps it copies, so the reloaded options go back to the command
 * line at once.  The report worker goes by the options the agent started
 * with; a hang's threshold travels in its request.  Everything else the
 * file changes waits for a restart, and the command line says so.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/parse/duration.h"
#include "core/process_select.h"
#include "watch.h"

/* Every loop's detector (and the detectors that go by the threshold)
 * from the live options; each looks again now. */
static void apply_thresholds(agent *a, uint64_t now)
{
    const hw_detector_config *cfg = &a->live.detector;
    for (size_t i = 0; i < a->table.end; i++) {
        watched_process *w = a->table.slots[i];
        if (w == NULL)
            continue;
        for (size_t s = 0; s < HW_PAGE_SLOTS; s++) {
            loop_watch *l = w->loops[s];
            if (l == NULL)
                continue;
            l->detector.cfg.threshold_ns = cfg->threshold_ns;
            l->detector.cfg.check_period_ns = cfg->check_period_ns;
            l->detector.cfg.mode = cfg->mode;
            l->detector.next_check_ns = now;
            l->next_wake_ns = now;
            l->stutter.cfg.threshold_ns = cfg->threshold_ns;
            l->ping.timeout_ns = cfg->threshold_ns;
            l->frames.threshold_ns = cfg->threshold_ns;
        }
        w->next_wake_ns = now;
    }
}

static void free_selectors(hw_process_selector *s, size_t count)
{
    for (size_t i = 0; s != NULL && i < count; i++)
        free((char *)s[i].pattern);
    free(s);
}

static bool same_selectors(const hw_agent_options *x, const hw_agent_options *y)
{
    if (x->selector_count != y->selector_count)
        return false;
    for (size_t i = 0; i < x->selector_count; i++) {
        const hw_process_selector *p = &x->selectors[i], *q = &y->selectors[i];
        if (p->kind != q->kind || p->exclude != q->exclude || p->uid != q->uid ||
            (p->pattern == NULL) != (q->pattern == NULL) || (p->pattern && strcmp(p->pattern, q->pattern) != 0))
            return false;
    }
    return true;
}

/* The fresh selectors, copied into the agent's own: 0, or -1 (out of memory). */
static int take_selectors(agent *a, const hw_agent_options *fresh)
{
    size_t n = fresh->selector_count;
    hw_process_selector *own = calloc(n ? n : 1, sizeof *own);
    if (own == NULL)
        return -1;
    for (size_t i = 0; i < n; i++) {
        own[i] = fresh->selectors[i];
        own[i].pattern = fresh->selectors[i].pattern ? strdup(fresh->selectors[i].pattern) : NULL;
        if (fresh->selectors[i].pattern && own[i].pattern == NULL) {
            free_selectors(own, i);
            return -1;
        }
    }
    free_selectors(a->own_selectors, a->live.selector_count);
    a->own_selectors = own;
    a->live.selectors = own;
    a->live.selector_count = n;
    return 0;
}

/* The thresholds: each change said. */
static bool reload_thresholds(agent *a, const hw_agent_options *fresh, const char *path)
{
    hw_detector_config *now = &a->live.detector;
    const hw_detector_config *next = &fresh->detector;
    if (now->threshold_ns == next->threshold_ns && now->check_period_ns == next->check_period_ns &&
        now->mode == next->mode)
        return false;
    char said[256] = "", a0[32], a1[32];
    size_t used = 0;
    if (now->threshold_ns != next->threshold_ns) {
        hw_format_duration(now->threshold_ns, a0, sizeof a0);
        hw_format_duration(next->threshold_ns, a1, sizeof a1);
        used += (size_t)snprintf(said + used, sizeof said - used, ", threshold %s -> %s", a0, a1);
    }
    if (now->check_period_ns != next->check_period_ns) {
        hw_format_duration(now->check_period_ns, a0, sizeof a0);
        hw_format_duration(next->check_period_ns, a1, sizeof a1);
        used += (size_t)snprintf(said + used, sizeof said - used, ", check period %s -> %s", a0, a1);
    }
    if (now->mode != next->mode)
        snprintf(said + used, sizeof said - used, ", check mode %s -> %s", hw_check_mode_name(now->mode),
                 hw_check_mode_name(next->mode));
    fprintf(stderr, "hangwatch: %s: %s\n", path, said + 2);
    now->threshold_ns = next->threshold_ns;
    now->check_period_ns = next->check_period_ns;
    now->mode = next->mode;
    apply_thresholds(a, hw_monotonic_ns());
    return true;
}

/* The selectors of watch --all: each process held to them again. */
static bool reload_selectors(agent *a, const hw_agent_options *fresh, const char *path)
{
    if (same_selectors(&a->live, fresh))
        return false;
    if (!a->live.watch_all) {
        fprintf(stderr, "hangwatch: %s: the selectors choose among --all's processes: without --all they are "
                        "not used\n", path);
        return false;
    }
    if (take_selectors(a, fresh) != 0) {
        fprintf(stderr, "hangwatch: %s: the selectors were not changed: out of memory\n", path);
        return false;
    }
    fprintf(stderr, "hangwatch: %s: %zu selector%s now: every process is chosen again\n", path,
            fresh->selector_count, fresh->selector_count == 1 ? "" : "s");
    machine_scan_reselect(a, a->scan);
    return true;
}

/* The exporters: restarted with the fresh addresses, the counters kept. */
static bool reload_exporters(agent *a, const hw_agent_options *fresh, const char *path)
{
    char said[512];
    int rc = hw_exports_reconfigure(a->exports, fresh->metrics_listen, fresh->metrics_file, fresh->sentry_dsn, said,
                                    sizeof said);
    if (rc < 0)
        fprintf(stderr, "hangwatch: %s: the exporters were not changed: %s\n", path, said);
    else if (rc > 0)
        fprintf(stderr, "hangwatch: %s: %s\n", path, said);
    return rc > 0;
}

void config_reload(agent *a)
{
    a->reload_asked = false;
    service_notify_reloading(false);
    const hw_agent_options *fresh = a->base->reload_config(a->base->config_ctx);
    if (fresh == NULL) {
        service_notify_reloading(true);
        return; /* said, and the options in use kept */
    }
    const char *path = a->base->config_path;
    bool changed = reload_thresholds(a, fresh, path);
    changed |= reload_selectors(a, fresh, path);
    changed |= reload_exporters(a, fresh, path);
    if (!changed)
        fprintf(stderr, "hangwatch: %s read again: no change to the thresholds, selectors or exporters\n", path);
    a->base->release_config(a->base->config_ctx, fresh);
    service_notify_reloading(true);
}

void config_reload_free(agent *a)
{
    free_selectors(a->own_selectors, a->live.selector_count);
    a->own_selectors = NULL;
}
