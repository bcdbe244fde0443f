/*
 * bench_sampling_cost.c - what early sampling (and a hang's capture) costs
 * a spinning loop thread, measured from inside it.
 *
 *   bench-sampling-cost SPIN_MS [GAPS_FILE]
 *
 * The main thread is a poll() loop on a 10 ms timerfd (so the observer sees
 * a loop); after ten turns one callback spins for SPIN_MS, reading
 * CLOCK_MONOTONIC in a tight loop and adding up every gap of more than
 * GAP_NS between two consecutive readings: time the thread did not run.
 * A kernel sample (a timer interrupt and a stack copy), a ptrace stop, an
 * agent thread taking the CPU, and the machine's own interrupts all show up
 * as gaps; the driver (bench/sampling_cost.py) subtracts the same
 * program's gaps without hangwatch, measured alternately in the same run.
 * Nothing is allocated or printed while spinning.
 *
 * With GAPS_FILE, every gap is also written there after the spin, one line
 * each, "START_NS LENGTH_NS" (CLOCK_MONOTONIC; its first line is "TID
 * SPIN_START_NS SPIN_END_NS"), so that the driver can tell which gap held
 * which of the kernel's timer interrupts (it traces them meanwhile).
 *
 * Output after the loop ends (a few more turns after the spin, so the agent
 * sees the stretch end):
 *
 *   observer active|inert
 *   spin SPIN_NS gaps COUNT GAP_TOTAL_NS LONGEST_NS short COUNT SHORT_TOTAL_NS stops COUNT STOP_TOTAL_NS
 *
 * "stops" are the gaps over STOP_CHECK_NS in which the thread switched out
 * voluntarily (its rusage's ru_nvcsw grew): a thread that only spins never
 * does, a ptrace stop (the agent's capture) does, and a preemption by other
 * work does not.  They are the agent's stops of the thread, as the thread
 * saw them, told apart from the machine's other work without subtracting
 * another run's.
 *
 * Short gaps (under 1 ms) are interrupts, kernel samples, ptrace stops and
 * brief wake-ups of other threads (the agent's); longer ones are mostly
 * scheduler slices given to other programs, which on a shared machine
 * swamp everything else, so the driver shows both.
 */
#include <poll.h>
#include <stdint.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "observer_active.h"

#define GAP_NS 1000ull
#define STOP_CHECK_NS 10000ull /* a gap this long is looked at for a voluntary switch (a stop is longer) */
#define SHORT_GAP_NS 1000000ull /* below: interrupts, samples, stops; above: scheduler slices */
#define MAX_NOTED_GAPS (1u << 17) /* a busy 4 s spin here has up to ~30,000 */

/* Each gap's start and length, for GAPS_FILE; touched before the spin. */
static uint64_t gap_start_ns[MAX_NOTED_GAPS], gap_length_ns[MAX_NOTED_GAPS];
static unsigned noted_gaps;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

typedef struct gaps {
    uint64_t count, total_ns, longest_ns, spin_ns, start_ns;
    uint64_t short_count, short_ns; /* gaps under SHORT_GAP_NS */
    uint64_t stop_count, stop_ns;   /* gaps with a voluntary switch: stops */
} gaps;

/* The calling thread's voluntary context switches so far. */
static long voluntary_switches(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_THREAD, &ru) == 0 ? ru.ru_nvcsw : 0;
}

__attribute__((noinline)) static void spin_and_note_gaps(uint64_t spin_ns, gaps *g)
{
    long switches = voluntary_switches();
    uint64_t start = now_ns(), prev = start, end = start + spin_ns;
    for (;;) {
        uint64_t t = now_ns();
        uint64_t d = t - prev;
        if (d > STOP_CHECK_NS) {
            long now_switches = voluntary_switches();
            if (now_switches != switches) {
                g->stop_count++;
                g->stop_ns += d;
                switches = now_switches;
            }
            t = now_ns(); /* the look itself is not spin time */
        }
        if (d > GAP_NS) {
            g->count++;
            g->total_ns += d;
            if (d > g->longest_ns)
                g->longest_ns = d;
            if (d < SHORT_GAP_NS) {
                g->short_count++;
                g->short_ns += d;
            }
            if (noted_gaps < MAX_NOTED_GAPS) {
                gap_start_ns[noted_gaps] = prev;
                gap_length_ns[noted_gaps++] = d;
            }
        }
        prev = t;
        if (t >= end)
            break;
    }
    g->spin_ns = prev - start;
    g->start_ns = start;
}

static int write_gaps(const char *path, const gaps *g)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -1;
    fprintf(f, "%ld %llu %llu\n", (long)syscall(SYS_gettid), (unsigned long long)g->start_ns,
            (unsigned long long)(g->start_ns + g->spin_ns));
    for (unsigned i = 0; i < noted_gaps; i++)
        fprintf(f, "%llu %llu\n", (unsigned long long)gap_start_ns[i], (unsigned long long)gap_length_ns[i]);
    return fclose(f);
}

int main(int argc, char **argv)
{
    if ((argc != 2 && argc != 3) || atol(argv[1]) <= 0) {
        fprintf(stderr, "usage: bench-sampling-cost SPIN_MS [GAPS_FILE]\n");
        return 2;
    }
    memset(gap_start_ns, 0, sizeof gap_start_ns); /* its pages are faulted in now, not in the spin */
    memset(gap_length_ns, 0, sizeof gap_length_ns);
    uint64_t spin_ns = (uint64_t)atol(argv[1]) * 1000000ull;
    int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    struct itimerspec every_10ms = {{0, 10000000}, {0, 10000000}};
    if (tfd < 0 || timerfd_settime(tfd, 0, &every_10ms, NULL) != 0) {
        perror("timerfd");
        return 1;
    }
    gaps g = {0};
    for (int turn = 0; turn < 30; turn++) {
        struct pollfd p = {tfd, POLLIN, 0};
        if (poll(&p, 1, 1000) > 0) {
            uint64_t expirations;
            if (read(tfd, &expirations, sizeof expirations) < 0)
                return 1;
        }
        if (turn == 10)
            spin_and_note_gaps(spin_ns, &g);
    }
    if (argc == 3 && write_gaps(argv[2], &g) != 0) {
        perror(argv[2]);
        return 1;
    }
    printf("observer %s\n", observer_active() ? "active" : "inert");
    printf("spin %llu gaps %llu %llu %llu short %llu %llu stops %llu %llu\n", (unsigned long long)g.spin_ns,
           (unsigned long long)g.count, (unsigned long long)g.total_ns, (unsigned long long)g.longest_ns,
           (unsigned long long)g.short_count, (unsigned long long)g.short_ns, (unsigned long long)g.stop_count,
           (unsigned long long)g.stop_ns);
    return 0;
}
