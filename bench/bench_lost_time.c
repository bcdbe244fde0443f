/*
 * bench_lost_time.c - the report-worker benchmark's target: how much CPU
 * time does a program lose to hangwatch after a hang has been captured,
 * while the agent's report worker unwinds, symbolizes and writes the report?
 *
 *   bench-lost-time HANG_MS [THREADS]
 *
 * The capture itself stops the program for well under a millisecond.  What
 * follows is the report worker's work, tens to hundreds of milliseconds of
 * CPU; it runs at SCHED_IDLE so that it only uses CPU time the watched
 * program does not want (bench/run.py compares it with the normal policy,
 * HANGWATCH_WORKER_POLICY=normal).  Whether that holds can only be seen from
 * inside the program: the agent cannot tell when it takes a CPU from
 * someone, and a program that sleeps loses nothing however busy the agent
 * is.  So this program wants every CPU at once, and notes every moment it
 * did not get one.
 *
 * The main thread is a poll() loop on a 10 ms timerfd (so the observer sees
 * a loop that waits) and, after ten turns, its callback busy-spins for
 * HANG_MS: a hang.  At the same moment THREADS - 1 more threads (THREADS is
 * the number of online CPUs unless given) start spinning until the same end
 * time, so the program wants every CPU of the machine for the whole hang.
 * Every spinning thread reads CLOCK_MONOTONIC in a tight loop and notes
 * each gap of more than GAP_NS between two consecutive readings (when it
 * began and how long it was) in a preallocated array: nothing is allocated
 * or printed while spinning.  A gap is time that thread did not run: the
 * capture's ptrace stop is one short gap in every thread at the same moment;
 * a competing thread shows up as many gaps of about one scheduler slice
 * (a few ms) after it; interrupts and other machine load as gaps too, the
 * same with either worker policy.  Each thread also notes when it finds
 * itself on another CPU (sched_getcpu), so the driver can tell when two
 * of the program's threads shared one CPU while another CPU ran something
 * else.
 *
 * Output, after the hang (the program is back in its loop for a few more
 * turns first, so the agent sees the hang end):
 *
 *   observer active|inert
 *   clock tsc|coarse                   (what the observer stamps with)
 *   threads N
 *   hang MONO_START_NS COARSE_START_NS END_NS
 *   gap THREAD AT_NS LEN_NS CPU        (one per gap; THREAD 0 is the main thread;
 *                                       CPU is where the thread ran after it)
 *   cpu THREAD AT_NS CPU               (the thread ran on CPU from AT_NS on; the
 *                                       first is where it began spinning)
 *   overflow THREAD COUNT              (gaps or CPU changes that did not fit, if any)
 *   agent PID TID POLICY RUNTIME0_NS RUNTIME1_NS MIGRATIONS0 MIGRATIONS1 PREEMPTED0 PREEMPTED1
 *                                      (one per thread of our parent, the agent,
 *                                       alive at the hang's start and end)
 *
 * MONO_START_NS and COARSE_START_NS are CLOCK_MONOTONIC and
 * CLOCK_MONOTONIC_COARSE read first thing in the callback.  The report's
 * block_duration_us is measured from the observer's stamp taken as poll()
 * returned: with the time-stamp counter that is MONO_START_NS to within a
 * microsecond or so, with the coarse clock it is COARSE_START_NS (but for a
 * tick in between); so the driver knows, to the microsecond, when the agent
 * detected the hang.
 *
 * The "agent" lines say, from /proc/PID/task/TID/sched read at the hang's
 * start and end (never while spinning), how much CPU each of the agent's
 * threads used in between, how often it moved between CPUs and how often
 * it was preempted (involuntary switches): the report worker's share is
 * what the program could lose to it.
 */
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "observer_active.h"

#define GAP_NS 50000ull
#define MAX_GAPS 8192
#define MAX_MOVES 4096
#define MAX_THREADS 64
#define LOOP_TURNS_BEFORE 10
#define LOOP_TURNS_AFTER 3
#define MAX_AGENT_THREADS 16

typedef struct gap {
    uint64_t at, len;
    int cpu;
} gap;

typedef struct move {
    uint64_t at;
    int cpu;
} move;

typedef struct spinner {
    pthread_t thread;
    int count;
    unsigned long overflow;
    gap gaps[MAX_GAPS];
    int last_cpu;
    int move_count;
    move moves[MAX_MOVES];
} spinner;

/* One of the agent's threads as its /proc/PID/task/TID/sched file shows it,
 * at the hang's start and end. */
typedef struct agent_thread {
    int tid;
    int policy;
    uint64_t runtime_ns[2];
    uint64_t migrations[2];
    uint64_t preempted[2];
    int seen[2];
} agent_thread;

static spinner spinners[MAX_THREADS];
static agent_thread agent_threads[MAX_AGENT_THREADS];
static int agent_thread_count;
static pthread_barrier_t go;
static _Atomic uint64_t hang_end_ns;
/* On separate cache lines: the threads write them all the time. */
static _Alignas(64) volatile uint64_t sink_main;
static _Alignas(64) volatile uint64_t sink_helper;

static uint64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

__attribute__((noinline)) static void note_gap(spinner *s, uint64_t at, uint64_t len)
{
    if (s->count < MAX_GAPS) {
        gap *g = &s->gaps[s->count++];
        g->at = at;
        g->len = len;
        g->cpu = sched_getcpu();
    } else {
        s->overflow++;
    }
}

/* "se.sum_exec_runtime : 61.460100" (ms) -> ns; the other fields are integers. */
static uint64_t sched_field(const char *text, const char *name, int is_ms)
{
    const char *at = strstr(text, name);
    if (at == NULL || (at = strchr(at, ':')) == NULL)
        return 0;
    if (!is_ms)
        return strtoull(at + 1, NULL, 10);
    char *dot;
    uint64_t ms = strtoull(at + 1, &dot, 10), frac = 0;
    int digits = 0;
    if (*dot == '.')
        for (const char *d = dot + 1; *d >= '0' && *d <= '9' && digits < 6; d++, digits++)
            frac = frac * 10 + (uint64_t)(*d - '0');
    for (; digits < 6; digits++)
        frac *= 10;
    return ms * 1000000ull + frac;
}

/* The agent (`hangwatch run` is our parent) as the scheduler saw it: how
 * much CPU each of its threads had used, and how often it changed CPU.
 * Read outside the spinning, at the hang's start (which = 0) and end (1). */
__attribute__((noinline)) static void snapshot_agent(int which)
{
    char path[64];
    int agent = (int)getppid();
    snprintf(path, sizeof path, "/proc/%d/task", agent);
    DIR *d = opendir(path);
    if (d == NULL)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        int tid = atoi(e->d_name);
        if (tid <= 0)
            continue;
        char file[96], text[4096];
        snprintf(file, sizeof file, "/proc/%d/task/%d/sched", agent, tid);
        FILE *f = fopen(file, "r");
        if (f == NULL)
            continue;
        size_t n = fread(text, 1, sizeof text - 1, f);
        fclose(f);
        text[n] = '\0';
        agent_thread *t = NULL;
        for (int i = 0; i < agent_thread_count && t == NULL; i++)
            if (agent_threads[i].tid == tid)
                t = &agent_threads[i];
        if (t == NULL && agent_thread_count < MAX_AGENT_THREADS) {
            t = &agent_threads[agent_thread_count++];
            t->tid = tid;
        }
        if (t == NULL)
            continue;
        t->policy = (int)sched_field(text, "\npolicy", 0);
        t->runtime_ns[which] = sched_field(text, "se.sum_exec_runtime", 1);
        t->migrations[which] = sched_field(text, "se.nr_migrations", 0);
        t->preempted[which] = sched_field(text, "nr_involuntary_switches", 0);
        t->seen[which] = 1;
    }
    closedir(d);
}

/* Where the thread runs now, noted when it changed (sched_getcpu is a
 * memory read with rseq, a vDSO call otherwise: cheap next to the clock). */
__attribute__((noinline)) static void note_cpu(spinner *s, uint64_t at, int cpu)
{
    s->last_cpu = cpu;
    if (s->move_count < MAX_MOVES) {
        s->moves[s->move_count].at = at;
        s->moves[s->move_count++].cpu = cpu;
    } else {
        s->overflow++;
    }
}

/* The hung loop thread's spin (thread 0). */
__attribute__((noinline)) static void spin_in_callback(spinner *s, uint64_t end)
{
    uint64_t prev = clock_ns(CLOCK_MONOTONIC);
    s->last_cpu = -1;
    while (prev < end) {
        for (int i = 0; i < 16; i++)
            sink_main = sink_main * 33 + (uint64_t)i;
        uint64_t t = clock_ns(CLOCK_MONOTONIC);
        if (t - prev > GAP_NS)
            note_gap(s, prev, t - prev);
        int cpu = sched_getcpu();
        if (cpu != s->last_cpu)
            note_cpu(s, t, cpu);
        prev = t;
    }
}

/* The other threads' spin: the same measurement, its own code, so each
 * thread's stack in the report says which kind it is. */
__attribute__((noinline)) static void spin_beside(spinner *s, uint64_t end)
{
    uint64_t prev = clock_ns(CLOCK_MONOTONIC);
    s->last_cpu = -1;
    for (;;) {
        uint64_t t = clock_ns(CLOCK_MONOTONIC);
        if (t - prev > GAP_NS)
            note_gap(s, prev, t - prev);
        int cpu = sched_getcpu();
        if (s->last_cpu != cpu)
            note_cpu(s, t, cpu);
        prev = t;
        if (t >= end)
            break;
        sink_helper ^= t >> 3;
    }
}

__attribute__((noinline)) static void *helper_main(void *arg)
{
    spinner *s = arg;
    pthread_barrier_wait(&go);
    spin_beside(s, atomic_load(&hang_end_ns));
    return NULL;
}

/* The loop's callback that hangs: every thread spins until the same end. */
__attribute__((noinline)) static void hang_callback(uint64_t hang_ns, uint64_t *mono_start, uint64_t *coarse_start)
{
    *coarse_start = clock_ns(CLOCK_MONOTONIC_COARSE);
    *mono_start = clock_ns(CLOCK_MONOTONIC);
    atomic_store(&hang_end_ns, *mono_start + hang_ns);
    snapshot_agent(0);
    pthread_barrier_wait(&go);
    spin_in_callback(&spinners[0], *mono_start + hang_ns);
    snapshot_agent(1);
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s HANG_MS [THREADS]\n", argv[0]);
        return 2;
    }
    uint64_t hang_ns = strtoull(argv[1], NULL, 10) * 1000000ull;
    long threads = argc == 3 ? strtol(argv[2], NULL, 10) : sysconf(_SC_NPROCESSORS_ONLN);
    if (hang_ns == 0 || threads < 1 || threads > MAX_THREADS) {
        fprintf(stderr, "bench-lost-time: bad arguments\n");
        return 2;
    }

    if (pthread_barrier_init(&go, NULL, (unsigned)threads) != 0) {
        fprintf(stderr, "bench-lost-time: pthread_barrier_init failed\n");
        return 1;
    }
    for (long i = 1; i < threads; i++) {
        int rc = pthread_create(&spinners[i].thread, NULL, helper_main, &spinners[i]);
        if (rc != 0) {
            fprintf(stderr, "bench-lost-time: pthread_create: %s\n", strerror(rc));
            return 1;
        }
    }

    int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    struct itimerspec every = {.it_interval = {0, 10000000}, .it_value = {0, 10000000}};
    if (tfd < 0 || timerfd_settime(tfd, 0, &every, NULL) != 0) {
        perror("bench-lost-time: timerfd");
        return 1;
    }
    uint64_t mono_start = 0, coarse_start = 0, end = 0;
    for (int turn = 0; turn < LOOP_TURNS_BEFORE + 1 + LOOP_TURNS_AFTER; turn++) {
        struct pollfd p = {.fd = tfd, .events = POLLIN};
        int n = poll(&p, 1, -1);
        if (n < 0 && errno == EINTR) {
            turn--;
            continue;
        }
        if (n != 1) {
            perror("bench-lost-time: poll");
            return 1;
        }
        uint64_t expirations;
        if (read(tfd, &expirations, sizeof expirations) != (ssize_t)sizeof expirations) {
            perror("bench-lost-time: read timerfd");
            return 1;
        }
        if (turn == LOOP_TURNS_BEFORE) {
            hang_callback(hang_ns, &mono_start, &coarse_start);
            end = clock_ns(CLOCK_MONOTONIC);
        }
    }
    for (long i = 1; i < threads; i++)
        pthread_join(spinners[i].thread, NULL);

    printf("observer %s\n", observer_active() ? "active" : "inert");
    printf("clock %s\n", observer_clock());
    printf("threads %ld\n", threads);
    printf("hang %llu %llu %llu\n", (unsigned long long)mono_start, (unsigned long long)coarse_start,
           (unsigned long long)end);
    for (long i = 0; i < threads; i++) {
        const spinner *s = &spinners[i];
        for (int g = 0; g < s->count; g++)
            printf("gap %ld %llu %llu %d\n", i, (unsigned long long)s->gaps[g].at,
                   (unsigned long long)s->gaps[g].len, s->gaps[g].cpu);
        for (int m = 0; m < s->move_count; m++)
            printf("cpu %ld %llu %d\n", i, (unsigned long long)s->moves[m].at, s->moves[m].cpu);
        if (s->overflow)
            printf("overflow %ld %lu\n", i, s->overflow);
    }
    for (int i = 0; i < agent_thread_count; i++) {
        const agent_thread *t = &agent_threads[i];
        if (t->seen[0] && t->seen[1])
            printf("agent %d %d %d %llu %llu %llu %llu %llu %llu\n", (int)getppid(), t->tid, t->policy,
                   (unsigned long long)t->runtime_ns[0], (unsigned long long)t->runtime_ns[1],
                   (unsigned long long)t->migrations[0], (unsigned long long)t->migrations[1],
                   (unsigned long long)t->preempted[0], (unsigned long long)t->preempted[1]);
    }
    return fflush(stdout) == 0 ? 0 : 1;
}
