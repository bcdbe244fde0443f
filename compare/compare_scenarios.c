/*
 * compare_scenarios.c - the program `make compare` runs (compare/run.py):
 * one hand-written epoll loop, watched through the C library with the
 * detector named on the command line, living through one scenario of
 * stalls.  The same program and the same scenario for every detector is
 * what makes their rows comparable.
 *
 *   compare-scenarios SCENARIO DETECTOR REPORT_DIR RESULTS_JSON
 *
 * DETECTOR: runloop-exact, runloop-periodic, runloop-stutter (exact, with
 * stutter reports), semaphore, ping or frame-gap.  SCENARIO: see
 * scenario_names below.
 *
 * The loop is a typical Linux one, reporting its activities in CFRunLoop's
 * order.  Each turn it runs ONE task from its queue (as GLib runs one idle
 * source per iteration), waits in epoll_wait (without blocking while tasks
 * are queued), then runs its due timers.  The
 * ping detectors post into that same queue (the program's post function,
 * FIFO, as dispatch_async to the main queue), so a ping waits behind the
 * tasks queued before it.  The frame-gap detector's tick is a timerfd of
 * the loop, as CADisplayLink is a RunLoop source.
 *
 * Spinning stalls run to a wall-clock deadline, so that the stall is the
 * length the scenario names however noisy the machine; blocking stalls are
 * one relative sleep, so that a detector that disturbs a sleeping thread
 * shows as a sleep that took longer (or shorter) than asked.
 *
 * For the ping detector a scenario starts just before a ping is due (the
 * ping posted 50 ms into the first stall, its best case), except late_ping,
 * whose ping comes 800 ms into the stall (the case seeds/000 describes),
 * and queue30, whose 30 tasks are queued by the post function right
 * before that ping: a ping late by more than a second (the program's
 * threads on a loaded machine) would otherwise find the queue drained.
 *
 * At the end the program writes RESULTS_JSON: each stall's start (wall
 * clock), nominal and actual length and culprit function, for run.py to set
 * against the reports.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <hangwatch.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "cpu_queue.h" /* tests/programs: the thread's wait for a CPU */

#define MS 1000000ull
#define THRESHOLD_NS (2000 * MS)
/* Before the first stall (all but the ping): 1.75 s after the agent took the
 * loop, so that the periodic check, once a second from then, falls 0.25 s
 * into each second of a stall (see docs/comparison.md). */
#define START_DELAY_NS (1750 * MS)
#define TAIL_NS (THRESHOLD_NS + 1500 * MS) /* after the last stall: late detections */
#define MAX_STALLS 64
#define QUEUE_CAP 256

static const char *const scenario_names[] = {
    "sleep4",    /* one callback sleeps 4 s */
    "spin3",     /* one callback spins 3 s */
    "late_ping", /* 800 ms of work, then 1.7 s more, in one callback */
    "queue30",   /* 30 tasks of 100 ms queued at once */
    "stutter",   /* 1 s stalls 0.3 s apart, six of them */
    "stall1900", /* one 1.9 s stall: not a hang at 2 s */
    "stall2100", /* one 2.1 s stall: a hang */
    "aba",       /* one callback blocked 3 s in A, 3 s in B, 3 s in A */
    "idle20",    /* 20 s of nothing */
};

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000ull + (uint64_t)ts.tv_nsec / 1000000ull;
}

/* ---- what happened, for run.py ---- */

typedef struct stall_record {
    const char *culprit;
    uint64_t start_wall_ms;
    uint64_t nominal_ns, actual_ns;
} stall_record;

static stall_record g_stalls[MAX_STALLS];
static unsigned g_stall_count;

static void record_stall(const char *culprit, uint64_t nominal_ns, uint64_t start_wall, uint64_t t0, uint64_t t1)
{
    if (g_stall_count < MAX_STALLS)
        g_stalls[g_stall_count++] = (stall_record){culprit, start_wall, nominal_ns, t1 - t0};
}

/* ---- the stalls: named functions, so that a stack shows which ---- */

static void spin_until(uint64_t deadline)
{
    while (mono_ns() < deadline)
        __asm__ volatile("" ::: "memory");
}

static void sleep_for(uint64_t ns)
{
    struct timespec req = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)}, rem;
    while (nanosleep(&req, &rem) != 0 && errno == EINTR)
        req = rem;
}

#define SPIN_STALL(name, ms)                                                                                           \
    __attribute__((noinline)) static void name(void)                                                                   \
    {                                                                                                                  \
        uint64_t w = wall_ms(), t0 = mono_ns();                                                                        \
        spin_until(t0 + (ms) * MS);                                                                                    \
        record_stall(#name, (ms) * MS, w, t0, mono_ns());                                                              \
    }
#define SLEEP_STALL(name, ms)                                                                                          \
    __attribute__((noinline)) static void name(void)                                                                   \
    {                                                                                                                  \
        uint64_t w = wall_ms(), t0 = mono_ns();                                                                        \
        sleep_for((ms) * MS);                                                                                          \
        record_stall(#name, (ms) * MS, w, t0, mono_ns());                                                              \
    }

SLEEP_STALL(culprit_sleep_4s, 4000)
SPIN_STALL(culprit_spin_3s, 3000)
SPIN_STALL(culprit_first_800ms, 800)
SPIN_STALL(culprit_then_1700ms, 1700)
SPIN_STALL(queued_task_100ms, 100)
SPIN_STALL(culprit_stutter_1s, 1000)
SPIN_STALL(culprit_spin_1900ms, 1900)
SPIN_STALL(culprit_spin_2100ms, 2100)
SLEEP_STALL(culprit_blocked_in_a, 3000)
SLEEP_STALL(culprit_blocked_in_b, 3000)

/* late_ping: one callback, two stretches of work. */
__attribute__((noinline)) static void culprit_late_ping(void)
{
    culprit_first_800ms();
    culprit_then_1700ms();
}

__attribute__((noinline)) static void culprit_aba(void)
{
    culprit_blocked_in_a();
    culprit_blocked_in_b();
    culprit_blocked_in_a();
}

/* ---- the loop's task queue (the program's own; posts come from the
 * library's thread) ---- */

typedef struct task {
    hangwatch_task_fn fn;
    void *arg;
} task;

static struct {
    pthread_mutex_t lock;
    task items[QUEUE_CAP];
    unsigned head, count;
} g_queue = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int g_task_fd = -1;
static _Atomic unsigned g_pings_posted;
static _Atomic uint64_t g_last_post_ns;

static bool queue_push(hangwatch_task_fn fn, void *arg)
{
    pthread_mutex_lock(&g_queue.lock);
    bool ok = g_queue.count < QUEUE_CAP;
    if (ok)
        g_queue.items[(g_queue.head + g_queue.count++) % QUEUE_CAP] = (task){fn, arg};
    pthread_mutex_unlock(&g_queue.lock);
    uint64_t one = 1;
    if (ok && write(g_task_fd, &one, sizeof one) < 0)
        perror("compare-scenarios: eventfd");
    return ok;
}

static bool queue_pop(task *out)
{
    pthread_mutex_lock(&g_queue.lock);
    bool ok = g_queue.count > 0;
    if (ok) {
        *out = g_queue.items[g_queue.head];
        g_queue.head = (g_queue.head + 1) % QUEUE_CAP;
        g_queue.count--;
    }
    pthread_mutex_unlock(&g_queue.lock);
    return ok;
}

static bool queue_empty(void)
{
    pthread_mutex_lock(&g_queue.lock);
    bool empty = g_queue.count == 0;
    pthread_mutex_unlock(&g_queue.lock);
    return empty;
}

static _Atomic bool g_queue30_before_ping; /* queue30 under the ping detector: queue it with the next ping */
static void queued_task(void *arg);

/* hangwatch_post_fn: a ping joins the back of the queue. */
static void post_to_queue(hangwatch_loop *loop, hangwatch_task_fn fn, void *arg, void *data)
{
    (void)loop;
    (void)data;
    atomic_store(&g_last_post_ns, mono_ns());
    atomic_fetch_add(&g_pings_posted, 1);
    if (atomic_exchange(&g_queue30_before_ping, false))
        for (int i = 0; i < 30; i++)
            queue_push(queued_task, NULL);
    if (!queue_push(fn, arg))
        fprintf(stderr, "compare-scenarios: queue full, ping dropped\n");
}

/* ---- the scenario, driven by a one-shot timer ---- */

static const char *g_scenario;
static bool g_align_to_ping;
static int g_step_fd = -1;
static unsigned g_stage;     /* the next step's number */
static bool g_started, g_finished, g_quit;
static uint64_t g_end_ns;
static unsigned g_queued_left;

static void arm_step(uint64_t at_ns)
{
    struct itimerspec its = {.it_value = {(time_t)(at_ns / 1000000000ull), (long)(at_ns % 1000000000ull)}};
    timerfd_settime(g_step_fd, TFD_TIMER_ABSTIME, &its, NULL);
}

static void finish(void)
{
    g_finished = true;
    g_end_ns = mono_ns();
    arm_step(g_end_ns + TAIL_NS);
}

static void queued_task(void *arg)
{
    (void)arg;
    queued_task_100ms();
    if (--g_queued_left == 0)
        finish();
}

static void run_step(void)
{
    if (g_finished) {
        g_quit = true; /* the tail is over */
        return;
    }
    unsigned stage = g_stage++;
    const char *s = g_scenario;
    if (strcmp(s, "sleep4") == 0) {
        culprit_sleep_4s();
    } else if (strcmp(s, "spin3") == 0) {
        culprit_spin_3s();
    } else if (strcmp(s, "late_ping") == 0) {
        culprit_late_ping();
    } else if (strcmp(s, "queue30") == 0) {
        g_queued_left = 30;
        if (g_align_to_ping)
            atomic_store(&g_queue30_before_ping, true);
        else
            for (int i = 0; i < 30; i++)
                queue_push(queued_task, NULL);
        return; /* the last task finishes */
    } else if (strcmp(s, "stutter") == 0) {
        culprit_stutter_1s();
        if (stage < 5) {
            arm_step(mono_ns() + 300 * MS);
            return;
        }
    } else if (strcmp(s, "stall1900") == 0) {
        culprit_spin_1900ms();
    } else if (strcmp(s, "stall2100") == 0) {
        culprit_spin_2100ms();
    } else if (strcmp(s, "aba") == 0) {
        culprit_aba();
    } else if (strcmp(s, "idle20") == 0) {
        if (stage == 0) {
            record_stall("idle", 0, wall_ms(), 0, 0);
            arm_step(mono_ns() + 20000 * MS);
            return;
        }
    }
    finish();
}

/* Before the first stall: when to start it. */
static void maybe_schedule_start(uint64_t program_start_ns)
{
    if (g_started)
        return;
    if (!g_align_to_ping) {
        g_started = true;
        arm_step(program_start_ns + START_DELAY_NS);
        return;
    }
    /* Wait for the second ping (the cadence is set), then start so that the
     * next one comes `lead` into the first stall. */
    if (atomic_load(&g_pings_posted) < 2)
        return;
    uint64_t lead = strcmp(g_scenario, "late_ping") == 0 ? 800 * MS : 50 * MS;
    g_started = true;
    arm_step(atomic_load(&g_last_post_ns) + THRESHOLD_NS - lead);
}

/* ---- set-up and the loop ---- */

static int configure(const char *detector, const char *report_dir, hangwatch_config *cfg)
{
    hangwatch_config_init(cfg);
    cfg->threshold_ns = THRESHOLD_NS;
    cfg->report_dir = report_dir;
    cfg->quiet = 1;
    cfg->daily_limit = 1000;
    if (strcmp(detector, "runloop-exact") == 0) {
    } else if (strcmp(detector, "runloop-periodic") == 0) {
        cfg->check_mode = HANGWATCH_CHECK_PERIODIC;
    } else if (strcmp(detector, "runloop-stutter") == 0) {
        cfg->stutter = 1;
    } else if (strcmp(detector, "semaphore") == 0) {
        cfg->detector = HANGWATCH_DETECTOR_SEMAPHORE;
        cfg->post = post_to_queue;
    } else if (strcmp(detector, "ping") == 0) {
        cfg->detector = HANGWATCH_DETECTOR_PING;
        cfg->post = post_to_queue;
        g_align_to_ping = true;
    } else if (strcmp(detector, "frame-gap") == 0) {
        cfg->detector = HANGWATCH_DETECTOR_FRAME_GAP;
    } else {
        return -1;
    }
    return 0;
}

/* What the loop thread waited for a CPU over the run (cpu_queue.h): on a
 * busy machine a stall and the tick after it run late by this much. */
static double g_loop_queued_s;

static int write_results(const char *path, const char *detector, uint64_t started_wall_ms)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fprintf(f, "{\"scenario\": \"%s\", \"detector\": \"%s\", \"threshold_ms\": %llu, \"started_unix_ms\": %llu,\n",
            g_scenario, detector, (unsigned long long)(THRESHOLD_NS / MS), (unsigned long long)started_wall_ms);
    fprintf(f, " \"loop_runqueue_wait_ms\": %.3f,\n", g_loop_queued_s * 1e3);
    fprintf(f, " \"pings_posted\": %u, \"stalls\": [", atomic_load(&g_pings_posted));
    for (unsigned i = 0; i < g_stall_count; i++)
        fprintf(f, "%s\n  {\"culprit\": \"%s\", \"start_unix_ms\": %llu, \"nominal_ms\": %.3f, \"actual_ms\": %.3f}",
                i ? "," : "", g_stalls[i].culprit, (unsigned long long)g_stalls[i].start_wall_ms,
                (double)g_stalls[i].nominal_ns / 1e6, (double)g_stalls[i].actual_ns / 1e6);
    fprintf(f, "]}\n");
    return fclose(f);
}

static bool known_scenario(const char *name)
{
    for (size_t i = 0; i < sizeof scenario_names / sizeof scenario_names[0]; i++)
        if (strcmp(name, scenario_names[i]) == 0)
            return true;
    return false;
}

int main(int argc, char **argv)
{
    if (argc != 5 || !known_scenario(argv[1])) {
        fprintf(stderr, "usage: compare-scenarios SCENARIO DETECTOR REPORT_DIR RESULTS_JSON\nscenarios:");
        for (size_t i = 0; i < sizeof scenario_names / sizeof scenario_names[0]; i++)
            fprintf(stderr, " %s", scenario_names[i]);
        fprintf(stderr, "\n");
        return 2;
    }
    g_scenario = argv[1];
    hangwatch_config cfg;
    if (configure(argv[2], argv[3], &cfg) != 0) {
        fprintf(stderr, "compare-scenarios: unknown detector '%s' (runloop-exact, runloop-periodic, "
                        "runloop-stutter, semaphore, ping, frame-gap)\n",
                argv[2]);
        return 2;
    }
    /* The task queue's descriptor before the agent starts: its pings can be
     * posted (post_to_queue, on the library's events thread) from then on. */
    g_task_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    int rc = hangwatch_start(&cfg);
    if (rc != 0) {
        fprintf(stderr, "compare-scenarios: hangwatch_start: %s\n", strerror(-rc));
        return 1;
    }
    uint64_t start_ns = mono_ns(), start_wall = wall_ms(); /* the agent has the page now */
    hangwatch_loop *loop = hangwatch_loop_register();
    double queued_before = queued_seconds();

    int ep = epoll_create1(EPOLL_CLOEXEC);
    g_step_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    int frame_fd = -1;
    uint64_t frame_ns = hangwatch_frame_interval_ns();
    if (frame_ns) {
        frame_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
        struct itimerspec its = {.it_interval = {0, (long)frame_ns}, .it_value = {0, (long)frame_ns}};
        timerfd_settime(frame_fd, 0, &its, NULL);
    }
    int fds[3] = {g_task_fd, g_step_fd, frame_fd};
    for (int i = 0; i < 3; i++) {
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = fds[i]};
        if (fds[i] >= 0)
            epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &ev);
    }

    /* CFRunLoop's order, which the seeds' detectors were written for:
     * queued work (sources) runs after BEFORE_SOURCES, timers after
     * AFTER_WAITING. */
    hangwatch_loop_activity(loop, HANGWATCH_ENTRY);
    while (!g_quit) {
        hangwatch_loop_activity(loop, HANGWATCH_BEFORE_TIMERS);
        hangwatch_loop_activity(loop, HANGWATCH_BEFORE_SOURCES);
        task t;
        if (queue_pop(&t))
            t.fn(t.arg);
        maybe_schedule_start(start_ns);
        hangwatch_loop_activity(loop, HANGWATCH_BEFORE_WAITING);
        struct epoll_event evs[4];
        int n = epoll_wait(ep, evs, 4, queue_empty() ? -1 : 0);
        hangwatch_loop_activity(loop, HANGWATCH_AFTER_WAITING);
        uint64_t count;
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;
            if (read(fd, &count, sizeof count) != (ssize_t)sizeof count)
                continue;
            if (fd == frame_fd)
                hangwatch_loop_frame(loop);
            else if (fd == g_step_fd)
                run_step();
        }
    }
    hangwatch_loop_activity(loop, HANGWATCH_EXIT);
    g_loop_queued_s = queued_seconds() - queued_before;
    hangwatch_loop_unregister(loop);
    hangwatch_stop();
    if (write_results(argv[4], argv[2], start_wall) != 0) {
        perror("compare-scenarios: results");
        return 1;
    }
    return 0;
}
