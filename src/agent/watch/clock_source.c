/*
 * clock_source.c - which clock the preloaded observers stamp busy starts
 * with, and turning every page's stamps into CLOCK_MONOTONIC.
 *
 * The time-stamp counter is the cheapest clock there is (one instruction,
 * nothing in memory) and exact, where CLOCK_MONOTONIC_COARSE is up to two
 * 4 ms ticks early and needs that much slack in the detector.  But only the
 * agent can tell whether counter values from the program's CPU mean
 * anything on its own, so it decides, once, before it starts the program:
 *
 *   - the processor says the counter is invariant (constant rate, running
 *     in every power state: CPUID 0x80000007, EDX bit 8);
 *   - on every CPU the agent may run on, the counter agrees with
 *     CLOCK_MONOTONIC on one line to within SKEW_LIMIT_NS (a virtual
 *     machine whose virtual CPUs' counters were never synchronised fails
 *     here); the largest disagreement seen is kept as every conversion's
 *     allowance for "stamped on another CPU" (not checked where the
 *     kernel keeps its own time with the counter, clocksource "tsc":
 *     CLOCK_MONOTONIC is then the counter, so counters that disagreed
 *     between CPUs would break the clock the agent measures everything
 *     with alike, and the kernel chose it only after its own check, or on
 *     its hypervisor's word, and leaves it when its watchdog sees a drift;
 *     the agent's check pins itself to each CPU in turn, and on a busy
 *     machine each move waited for that CPU: 1-4 ms of every `run`'s
 *     start);
 *   - nobody asked for the coarse clock (HANGWATCH_CLOCK=coarse).
 *
 * If so, the observers are told (HANGWATCH_CLOCK=tsc, launch.c) and their
 * pages say so (shared_page.h); the agent pairs the counter with
 * CLOCK_MONOTONIC every time it wakes (tsc_clock.h: the rate gets finer as
 * it runs, a jump restarts it) and converts each busy start it reads to the
 * latest CLOCK_MONOTONIC time the stamp can stand for, so no stretch is ever
 * taken for longer than it is.  Otherwise the observers stamp with the
 * coarse clock, and only their pages get the detector's slack.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "core/abi/registration.h"
#include "core/tsc_clock.h"
#include "core/abi/tsc_read.h"
#include "watch.h"

#define SKEW_LIMIT_NS 20000ull   /* CPUs' counters further apart than this: not usable */
#define SAMPLE_TRIES 5           /* a pair is taken this often, the tightest kept */
#define MAX_GOOD_SPREAD_NS 20000 /* a pair looser than this (preempted, interrupted) is not used */
#define CHECK_SPAN_NS 200000ull   /* the CPUs are checked against two pairs this far apart */
#define MAX_CPUS_CHECKED 256
/* The allowance for "stamped on another CPU" when the kernel vouches for
 * the counters: its check at boot finds any warp between two CPUs that is
 * longer than their cache line's round trip, a fraction of a microsecond. */
#define KERNEL_CHECKED_SKEW_NS 1000ull
#define CLOCKSOURCE_PATH "/sys/devices/system/clocksource/clocksource0/current_clocksource"

/* The tightest of a few (counter, clock, counter) reads. */
static hw_tsc_sample take_sample(void)
{
    hw_tsc_sample best = {0};
    for (int i = 0; i < SAMPLE_TRIES; i++) {
        uint64_t before = hw_tsc_read_ordered();
        uint64_t ns = hw_monotonic_ns();
        uint64_t after = hw_tsc_read_ordered();
        hw_tsc_sample s = hw_tsc_sample_make(before, ns, after);
        if (i == 0 || s.spread < best.spread)
            best = s;
    }
    return best;
}

static bool tight(const hw_tsc_sample *s, uint64_t rough_mult)
{
    return hw_tsc_mul_shift32(s->spread, rough_mult) <= MAX_GOOD_SPREAD_NS;
}

static bool counter_is_invariant(void)
{
#if defined(__x86_64__) || defined(__i386__)
    unsigned eax, ebx, ecx, edx;
    if (!__get_cpuid(0x80000007u, &eax, &ebx, &ecx, &edx)) /* 0 if the leaf is not there */
        return false;
    return (edx & (1u << 8)) != 0;
#else
    return false;
#endif
}

/* The counter's distance from the straight line through `from` and `to`
 * at `s` (in ns, plus s's own uncertainty): only for pairs taken between
 * the two, microseconds apart, where a rough rate is exact enough. */
static uint64_t off_line_ns(hw_tsc_sample from, hw_tsc_sample to, hw_tsc_sample s)
{
    double ns_per_tick = (double)(to.ns - from.ns) / (double)(to.tsc - from.tsc);
    double predicted = (double)from.ns + ((double)s.tsc - (double)from.tsc) * ns_per_tick;
    double off = predicted > (double)s.ns ? predicted - (double)s.ns : (double)s.ns - predicted;
    return (uint64_t)off + (uint64_t)((double)s.spread * ns_per_tick) + 1;
}

/* Does the kernel keep its own time with the counter?  (Its choice is
 * read, not trusted blindly: the jump check of every wake-up stays.) */
static bool kernel_clock_is_tsc(const char *clocksource_path)
{
    FILE *f = fopen(clocksource_path, "re");
    if (f == NULL)
        return false;
    char name[32] = "";
    bool tsc = fgets(name, sizeof name, f) != NULL && strcmp(name, "tsc\n") == 0;
    fclose(f);
    return tsc;
}

/*
 * Take a pair on every CPU this thread may run on (`each_cpu`; else none:
 * the kernel vouched for them), between two pairs at
 * least CHECK_SPAN_NS apart on the first; *skew_ns: the largest distance
 * of a CPU's pair from the line through the two.  False, with `why`, if
 * the counters disagree or the pairs cannot be taken cleanly.
 *
 * No pause: the line only has to be right across these few hundred
 * microseconds (a rate off by the pairs' spread over the span, tens of
 * parts per million, moves a prediction by nanoseconds), so the program
 * starts at once.  The rate conversions use comes later: `cal` holds the
 * two pairs, and the agent's first wake-up at least HW_TSC_MIN_SPAN_NS on
 * (clock_source_due) measures it; until then no counter stamp converts
 * (hw_tsc_to_ns_latest saturates: no stretch can look hung).
 */
static bool check_cpus(hw_tsc_calibration *cal, bool each_cpu, uint64_t *skew_ns, char *why, size_t len)
{
    cpu_set_t original;
    bool pinned = each_cpu && sched_getaffinity(0, sizeof original, &original) == 0;
    hw_tsc_sample first = take_sample();
    hw_tsc_sample per_cpu[MAX_CPUS_CHECKED];
    int cpus[MAX_CPUS_CHECKED];
    size_t n = 0;
    for (int cpu = 0; pinned && cpu < CPU_SETSIZE && n < MAX_CPUS_CHECKED; cpu++) {
        if (!CPU_ISSET(cpu, &original))
            continue;
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        if (sched_setaffinity(0, sizeof one, &one) != 0)
            continue; /* offline since, or not ours after all */
        cpus[n] = cpu;
        per_cpu[n++] = take_sample();
    }
    if (pinned)
        sched_setaffinity(0, sizeof original, &original);
    hw_tsc_sample last = take_sample();
    while (last.ns - first.ns < CHECK_SPAN_NS && last.ns >= first.ns)
        last = take_sample();

    if (last.tsc <= first.tsc || last.ns <= first.ns) {
        snprintf(why, len, "the counter did not advance with CLOCK_MONOTONIC");
        return false;
    }
    double ns_per_tick = (double)(last.ns - first.ns) / (double)(last.tsc - first.tsc);
    if ((double)first.spread * ns_per_tick > MAX_GOOD_SPREAD_NS || (double)last.spread * ns_per_tick > MAX_GOOD_SPREAD_NS) {
        snprintf(why, len, "the counter could not be paired cleanly with CLOCK_MONOTONIC");
        return false;
    }
    uint64_t skew = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t off = off_line_ns(first, last, per_cpu[i]);
        if (off > SKEW_LIMIT_NS) {
            snprintf(why, len, "CPU %d's counter is %llu us off the others'", cpus[i],
                     (unsigned long long)(off / 1000));
            return false;
        }
        if (off > skew)
            skew = off;
    }
    hw_tsc_init(cal, 0);
    hw_tsc_add(cal, first);
    hw_tsc_add(cal, last);
    *skew_ns = skew;
    return true;
}

void clock_source_init(agent *a)
{
    clock_source_init_with(a, CLOCKSOURCE_PATH);
}

void clock_source_init_with(agent *a, const char *clocksource_path)
{
    clock_source *c = &a->clock;
    memset(c, 0, sizeof *c);
    const char *asked = getenv(HW_ENV_CLOCK);
    if (!HW_HAVE_TSC) {
        snprintf(c->why, sizeof c->why, "this processor has no time-stamp counter the observer can read");
        return;
    }
    if (asked != NULL && strcmp(asked, "coarse") == 0) {
        snprintf(c->why, sizeof c->why, "%s=coarse", HW_ENV_CLOCK);
        return;
    }
    if (!counter_is_invariant()) {
        snprintf(c->why, sizeof c->why, "the processor does not say its time-stamp counter is invariant");
        return;
    }
    bool kernel_checked = kernel_clock_is_tsc(clocksource_path);
    uint64_t skew = 0;
    hw_tsc_calibration cal;
    if (!check_cpus(&cal, !kernel_checked, &skew, c->why, sizeof c->why))
        return;
    if (kernel_checked)
        skew = KERNEL_CHECKED_SKEW_NS;
    /* Twice the skew seen: it was measured once, on pairs that have their
     * own uncertainty. */
    cal.skew_ns = 2 * skew;
    c->tsc = cal;
    c->rate_due_ns = cal.ref.ns + HW_TSC_MIN_SPAN_NS;
    c->tsc_usable = true;
}

void clock_source_refresh(agent *a)
{
    clock_source *c = &a->clock;
    if (!c->tsc_usable)
        return;
    hw_tsc_sample s = take_sample();
    if (!hw_tsc_ready(&c->tsc))
        c->rate_due_ns = s.ns + HW_TSC_MIN_SPAN_NS; /* if this one does not make it */
    if (!tight(&s, c->tsc.mult))
        return; /* preempted between the reads: the next wake-up takes another */
    if (!hw_tsc_add(&c->tsc, s) && !a->opts->quiet && !c->said_jump) {
        c->said_jump = true;
        fprintf(stderr, "hangwatch: the time-stamp counter jumped against CLOCK_MONOTONIC (a resumed or migrated "
                        "virtual machine?): its calibration starts again\n");
    }
}

uint64_t clock_source_due(const agent *a)
{
    const clock_source *c = &a->clock;
    if (!c->tsc_usable || hw_tsc_ready(&c->tsc))
        return UINT64_MAX;
    return c->rate_due_ns;
}

bool clock_source_accepts(const agent *a, uint32_t clock)
{
    switch (clock) {
    case HW_PAGE_CLOCK_COARSE:
    case HW_PAGE_CLOCK_MONOTONIC:
        return true;
    case HW_PAGE_CLOCK_TSC:
        return a->clock.tsc_usable;
    default:
        return false;
    }
}

uint64_t clock_source_slack(const agent *a, const watched_process *w)
{
    return w->clock == HW_PAGE_CLOCK_COARSE ? a->opts->detector.clock_slack_ns : 0;
}

bool clock_source_read(const agent *a, const watched_process *w, unsigned slot, hw_loop_reading *r)
{
    if (!hw_loop_read(&w->page->slots[slot], r, 8))
        return false;
    if (w->clock == HW_PAGE_CLOCK_TSC && r->busy)
        r->busy_start_ns = hw_tsc_to_ns_latest(&a->clock.tsc, r->busy_start_ns);
    /* No stretch began before its process did.  A stamp that says so (a
     * counter that jumped back before the calibration noticed, a page the
     * program scribbled on) would make a hang of any stretch at once; it is
     * taken as the process's start instead. */
    if (r->busy && r->busy_start_ns < w->born_ns)
        r->busy_start_ns = w->born_ns;
    return true;
}
