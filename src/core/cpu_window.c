/*
 * cpu_window.c - the CPU-high rule and its annealing (see cpu_window.h).
 */
#include "cpu_window.h"

#include <stdlib.h>
#include <string.h>

#include "core/parse/duration.h"
#include "saturating.h"

uint64_t hw_cpu_tick_ns(const hw_cpu_high_config *cfg)
{
    uint64_t tick = cfg->window_ns / 32;
    return tick < 100000000ull ? 100000000ull : tick;
}

void hw_cpu_window_init(hw_cpu_window *w, const hw_cpu_high_config *cfg)
{
    memset(w, 0, sizeof *w);
    w->cfg = *cfg;
    if (w->cfg.percent == 0)
        w->cfg.percent = 1;
    if (w->cfg.window_ns == 0)
        w->cfg.window_ns = 1;
    w->wait_previous = w->wait_current = 1;
}

static const hw_cpu_point *point_at(const hw_cpu_window *w, unsigned i)
{
    return &w->points[(w->first + i) % HW_CPU_WINDOW_POINTS];
}

/* x * y / z without overflow for the values here (CPU and wall times in
 * ns, a percentage), saturating. */
static uint64_t mul_div(uint64_t x, uint64_t y, uint64_t z)
{
    if (z == 0)
        return UINT64_MAX;
    unsigned __int128 r = (unsigned __int128)x * y / z;
    return r > UINT64_MAX ? UINT64_MAX : (uint64_t)r;
}

hw_cpu_verdict hw_cpu_window_add(hw_cpu_window *w, uint64_t now_ns, uint64_t cpu_ns)
{
    hw_cpu_verdict v = {0};
    if (w->count > 0) {
        const hw_cpu_point *last = point_at(w, w->count - 1);
        if (cpu_ns < last->cpu_ns || now_ns < last->time_ns)
            w->count = 0; /* went backwards: not the same process, or not a clock */
    }
    if (w->count == HW_CPU_WINDOW_POINTS) {
        w->first = (w->first + 1) % HW_CPU_WINDOW_POINTS;
        w->count--;
    }
    w->points[(w->first + w->count) % HW_CPU_WINDOW_POINTS] = (hw_cpu_point){now_ns, cpu_ns};
    w->count++;

    /* The newest reading at least a window old: the window runs from it. */
    uint64_t from = now_ns >= w->cfg.window_ns ? now_ns - w->cfg.window_ns : 0;
    const hw_cpu_point *start = NULL;
    for (unsigned i = 0; i + 1 < w->count; i++) {
        const hw_cpu_point *p = point_at(w, i);
        if (p->time_ns <= from && now_ns - p->time_ns >= w->cfg.window_ns)
            start = p;
    }
    if (start == NULL)
        return v;
    /* Readings older than the start are not needed again. */
    while (point_at(w, 0) != start) {
        w->first = (w->first + 1) % HW_CPU_WINDOW_POINTS;
        w->count--;
    }
    v.whole = true;
    v.window_ns = now_ns - start->time_ns;
    v.cpu_ns = cpu_ns - start->cpu_ns;
    v.tenths = mul_div(v.cpu_ns, 1000, v.window_ns);
    v.hot = v.tenths > (uint64_t)w->cfg.percent * 10;
    if (!v.hot) {
        /* Under it for a whole window: cooled down, and the next hot
         * window is reported at once. */
        if (w->cool_since_ns == 0)
            w->cool_since_ns = now_ns;
        if (now_ns - w->cool_since_ns >= w->cfg.window_ns) {
            w->next_report_ns = 0;
            w->wait_previous = w->wait_current = 1;
        }
        return v;
    }
    w->cool_since_ns = 0;
    if (now_ns >= w->next_report_ns) {
        v.report = true;
        uint64_t wait = w->wait_current;
        w->next_report_ns = hw_add_sat(now_ns, wait > UINT64_MAX / w->cfg.window_ns ? UINT64_MAX
                                                                                     : wait * w->cfg.window_ns);
        uint64_t next = hw_add_sat(w->wait_previous, w->wait_current);
        w->wait_previous = w->wait_current;
        w->wait_current = next;
    }
    return v;
}

int hw_cpu_high_parse(const char *text, hw_cpu_high_config *out, const char **why)
{
    const char *ignored;
    if (why == NULL)
        why = &ignored;
    const char *p = text;
    if (*p < '0' || *p > '9') {
        *why = "it must start with a whole number of percent of one CPU (80, 80%, 80%/60s)";
        return -1;
    }
    unsigned long percent = 0;
    while (*p >= '0' && *p <= '9') {
        percent = percent * 10 + (unsigned long)(*p - '0');
        if (percent > HW_CPU_HIGH_MAX_PERCENT) {
            *why = "the percentage is at most 100000 (1000 CPUs)";
            return -1;
        }
        p++;
    }
    if (percent == 0) {
        *why = "the percentage must be greater than zero";
        return -1;
    }
    if (*p == '%')
        p++;
    uint64_t window = HW_CPU_HIGH_DEFAULT_WINDOW_NS;
    if (*p == '/') {
        if (hw_parse_duration(p + 1, &window, why) != 0)
            return -1;
        if (window < 1000000000ull) {
            *why = "the duration must be at least 1s";
            return -1;
        }
    } else if (*p != '\0') {
        *why = "expected PERCENT[%][/DURATION], like 80%/60s";
        return -1;
    }
    out->percent = (unsigned)percent;
    out->window_ns = window;
    return 0;
}
