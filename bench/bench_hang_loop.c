/*
 * bench_hang_loop.c - the detection-latency benchmark's target: an epoll
 * loop whose timer callback hangs, again and again, at random phases, and
 * writes down exactly when each hang began so bench/run.py can tell how long
 * after the threshold hangwatch noticed it.
 *
 *   bench-hang-loop OUT SEED THRESHOLD_MS IDLE_MIN_MS IDLE_SPREAD_MS DUR_MS:COUNT...
 *
 * The hangs (COUNT of each duration, in a shuffled order) alternate between
 * busy-spinning and sleeping in clock_nanosleep.  Before each one the loop
 * waits IDLE_MIN_MS + uniform(0, IDLE_SPREAD_MS) in epoll_wait, so hang
 * starts fall at random phases of the agent's check schedule.
 *
 * Right after epoll_wait returns (where the observer stamped the busy start
 * a few hundred nanoseconds earlier) the callback reads
 * CLOCK_MONOTONIC_COARSE, CLOCK_MONOTONIC and CLOCK_REALTIME.  When the
 * observer stamps with the time-stamp counter, the agent's busy start is
 * CLOCK_MONOTONIC at that moment (to within a microsecond or so), so
 *   detected (monotonic) = mono_start + block_duration_us;
 * when it stamps with the coarse clock, the coarse reading is, but for a
 * tick falling in those nanoseconds, the very stamp the agent measures
 * block_duration_us from, so
 *   detected (monotonic) = coarse_start + block_duration_us.
 * Either way the latency after the threshold is detected - mono_start -
 * threshold, to the microsecond.  mono_start - coarse_start is also how far
 * the coarse clock lagged behind at that moment (the agent allows two ticks
 * for it, on coarse-stamped pages).  The output's first line,
 * "# clock tsc|coarse", says which (observer_active.h).
 * CLOCK_REALTIME lets the driver pair each report (detected_at_unix_ms) with
 * its hang.
 *
 * A spinning hang also watches its own clock: every gap of more than 50 us
 * between two consecutive readings from 10 ms before the threshold on is
 * noted (up to MAX_GAPS).  The ptrace stop for the report is one of them
 * (the others are interrupts, preemptions and later comparison captures);
 * bench/run.py takes the first one that begins after the detection time
 * the report implies and lasts at least half the report's stopped_us, which
 * tells when the program was really stopped for its stack and for how long,
 * as the program itself saw it.  Output, after the clock line, one
 * line per hang, tab-separated:
 *
 *   index kind dur_ms rt_start_ns mono_start_ns coarse_start_ns end_ns gaps
 *
 * where gaps is "-" or a comma-separated list of at_ns:len_ns.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "observer_active.h"

#define MAX_HANGS 200
#define GAP_NS 50000ull
#define MAX_GAPS 256

typedef struct hang {
    int dur_ms;
    int spin;
    uint64_t rt_start, mono_start, coarse_start, end;
    int gap_count;
    uint64_t gap_at[MAX_GAPS], gap_ns[MAX_GAPS];
} hang;

static hang hangs[MAX_HANGS];
static int hang_count;
static volatile uint64_t sink;

static uint64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* xorshift64*: a seeded, reproducible schedule. */
static uint64_t rng_state;
static uint64_t rng(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}

__attribute__((noinline)) static void spin_hang(hang *h, uint64_t threshold_ns)
{
    uint64_t end = h->mono_start + (uint64_t)h->dur_ms * 1000000ull;
    uint64_t watch_from = h->mono_start + threshold_ns - 10000000ull;
    uint64_t prev = clock_ns(CLOCK_MONOTONIC);
    while (prev < end) {
        for (int i = 0; i < 20; i++)
            sink = sink * 31 + (uint64_t)i;
        uint64_t t = clock_ns(CLOCK_MONOTONIC);
        if (t - prev > GAP_NS && prev >= watch_from && h->gap_count < MAX_GAPS) {
            h->gap_at[h->gap_count] = prev;
            h->gap_ns[h->gap_count++] = t - prev;
        }
        prev = t;
    }
}

__attribute__((noinline)) static void sleep_hang(hang *h)
{
    struct timespec until = {(time_t)((h->mono_start + (uint64_t)h->dur_ms * 1000000ull) / 1000000000ull),
                             (long)((h->mono_start + (uint64_t)h->dur_ms * 1000000ull) % 1000000000ull)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) == EINTR)
        ;
}

static void arm(int tfd, uint64_t delay_ns)
{
    struct itimerspec spec = {0};
    spec.it_value.tv_sec = (time_t)(delay_ns / 1000000000ull);
    spec.it_value.tv_nsec = (long)(delay_ns % 1000000000ull);
    if (timerfd_settime(tfd, 0, &spec, NULL) != 0) {
        perror("timerfd_settime");
        exit(1);
    }
}

int main(int argc, char **argv)
{
    if (argc < 7) {
        fprintf(stderr, "usage: %s OUT SEED THRESHOLD_MS IDLE_MIN_MS IDLE_SPREAD_MS DUR_MS:COUNT...\n", argv[0]);
        return 2;
    }
    const char *out_path = argv[1];
    rng_state = strtoull(argv[2], NULL, 10) | 1u;
    uint64_t threshold_ns = strtoull(argv[3], NULL, 10) * 1000000ull;
    uint64_t idle_min_ns = strtoull(argv[4], NULL, 10) * 1000000ull;
    uint64_t idle_spread_ns = strtoull(argv[5], NULL, 10) * 1000000ull;
    for (int a = 6; a < argc; a++) {
        int dur, count;
        if (sscanf(argv[a], "%d:%d", &dur, &count) != 2 || dur <= 0 || count < 0 ||
            hang_count + count > MAX_HANGS) {
            fprintf(stderr, "bench-hang-loop: bad hang spec '%s'\n", argv[a]);
            return 2;
        }
        for (int i = 0; i < count; i++)
            hangs[hang_count++].dur_ms = dur;
    }
    for (int i = hang_count - 1; i > 0; i--) { /* Fisher-Yates */
        int j = (int)(rng() % (uint64_t)(i + 1));
        int t = hangs[i].dur_ms;
        hangs[i].dur_ms = hangs[j].dur_ms;
        hangs[j].dur_ms = t;
    }
    for (int i = 0; i < hang_count; i++)
        hangs[i].spin = i % 2 == 0;

    int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event add = {.events = EPOLLIN, .data.fd = tfd};
    if (tfd < 0 || ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &add) != 0) {
        perror("bench-hang-loop: epoll");
        return 1;
    }

    /* First hang after the agent has surely seen us register and go idle. */
    arm(tfd, 300000000ull + rng() % (idle_spread_ns + 1));
    int next = 0;
    while (next < hang_count) {
        struct epoll_event ev;
        int n = epoll_wait(ep, &ev, 1, -1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n != 1) {
            perror("bench-hang-loop: epoll_wait");
            return 1;
        }
        /* The callback: note when it began, as precisely as we can. */
        hang *h = &hangs[next++];
        h->coarse_start = clock_ns(CLOCK_MONOTONIC_COARSE);
        h->mono_start = clock_ns(CLOCK_MONOTONIC);
        h->rt_start = clock_ns(CLOCK_REALTIME);
        uint64_t expirations;
        if (read(tfd, &expirations, sizeof expirations) != (ssize_t)sizeof expirations) {
            perror("bench-hang-loop: read timerfd");
            return 1;
        }
        if (h->spin)
            spin_hang(h, threshold_ns);
        else
            sleep_hang(h);
        h->end = clock_ns(CLOCK_MONOTONIC);
        arm(tfd, idle_min_ns + rng() % (idle_spread_ns + 1));
    }

    FILE *out = fopen(out_path, "w");
    if (out == NULL) {
        perror(out_path);
        return 1;
    }
    fprintf(out, "# clock %s\n", observer_clock());
    for (int i = 0; i < hang_count; i++) {
        const hang *h = &hangs[i];
        fprintf(out, "%d\t%s\t%d\t%llu\t%llu\t%llu\t%llu\t", i, h->spin ? "spin" : "sleep", h->dur_ms,
                (unsigned long long)h->rt_start, (unsigned long long)h->mono_start,
                (unsigned long long)h->coarse_start, (unsigned long long)h->end);
        for (int g = 0; g < h->gap_count; g++)
            fprintf(out, "%s%llu:%llu", g ? "," : "", (unsigned long long)h->gap_at[g],
                    (unsigned long long)h->gap_ns[g]);
        fprintf(out, "%s\n", h->gap_count ? "" : "-");
    }
    if (fclose(out) != 0) {
        perror(out_path);
        return 1;
    }
    return 0;
}
