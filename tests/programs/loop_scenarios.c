/*
 * loop_scenarios.c - small event-loop programs the integration tests run
 * under hangwatch, one behaviour each:
 *
 *   idle SECS      wait in epoll_wait for SECS seconds, doing nothing
 *   busypoll SECS  spin on epoll_wait(..., 0) with a little work per turn
 *   cpuspin SECS   a timer callback burns the CPU for SECS seconds (then
 *                  "queued Q": the thread's seconds waiting for a CPU)
 *   abca SECS      one callback blocked SECS in block_in_a(), then as long
 *                  in block_in_b(), block_in_c() and block_in_a() again
 *   threads12 SECS 11 threads parked in known functions while a callback on
 *                  the main thread spins for SECS seconds
 *   crowd SECS     the same with 2,000 parked threads (more than a capture
 *                  takes)
 *   launch SECS    spin SECS seconds before ever reaching the loop's wait
 *   nestedpoll SECS   a callback makes a synchronous poll() of SECS on one
 *                  socket (a synchronous network call)
 *   nestedepoll SECS  a callback waits SECS in a second, nested epoll
 *   shortnested SECS  an idle loop whose callback does a 10 ms nested poll
 *                  every 100 ms, for SECS seconds (responsive: no hang)
 *   flipflop SECS  for SECS seconds, a loop that waits 20 ms twice on one
 *                  epoll instance, then twice on another, from the same
 *                  call, and so on: whose wait is the loop's cannot be told
 *                  (it moves every second turn)
 *   startpoll SECS main() polls once before its loop, then the loop idles
 *                  and a callback sleeps SECS (one hang)
 *   forkstorm N    4 threads malloc and free without pause while the main
 *                  thread forks N children that each poll once and exit
 *   dlhang SECS    a callback blocks inside a dl_iterate_phdr callback,
 *                  holding the dynamic loader's lock
 *   stdiohang SECS a callback locks stdout (flockfile) and blocks
 *   churn SECS     1000 threads come and go while a callback spins
 *   loopthread SECS  the main thread idles in its loop while a second
 *                  thread, "io-loop", runs an epoll loop whose callback
 *                  sleeps SECS; a third, "pool-worker", waits SECS on a
 *                  condition variable for work (a pool, not a loop)
 *   stutter SECS   for SECS seconds, callbacks that block 1 s each, 0.3 s
 *                  apart (Matrix's issue #567: never one 2 s hang)
 *   threehangs UNIT  three different hangs, one of them twice, on ticks of
 *                  the loop 0.1 s apart: hang_in_x() sleeps UNIT, then
 *                  hang_in_y() spins 1.2 UNIT, hang_in_z() sleeps 1.6 UNIT,
 *                  and hang_in_x() sleeps UNIT again (for hangwatch stats:
 *                  totals x 2 UNIT > z 1.6 UNIT > y 1.2 UNIT)
 *   sleephang SECS a timer callback sleeps SECS in sleep_until_killed()
 *                  (the tests kill the program during it: a fatal hang)
 *   vforkhang SECS a timer callback prints "hang at T" (CLOCK_MONOTONIC
 *                  seconds) and waits in wait_for_child_exec() for a vfork
 *                  child that sleeps SECS before it exits: the thread
 *                  sleeps uninterruptibly, and no stop reaches it until the
 *                  child is gone
 *   vforkside SECS a side thread vforks a child that sleeps SECS + 1 (the
 *                  thread sleeps uninterruptibly, no stop reaches it) while
 *                  a timer callback prints "hang at T" and sleeps SECS in
 *                  sleep_beside_vfork()
 *   exithang SECS  a timer callback prints "hang at T" and sleeps 2 SECS in
 *                  sleep_until_exit() while a watchdog thread prints "exit
 *                  at T" and calls exit(3) SECS after start (a fatal hang
 *                  ended by the program's own exit)
 *   breakpoint SECS  a loop ticking every 0.1 s for SECS seconds whose
 *                  ticks call debugger_breaks_here() (where a debugger's
 *                  breakpoint holds the loop) and then work 0.4 s
 *   deep SECS      a timer callback recurses 100,000 calls deep in
 *                  descend_into_tree() and spins SECS seconds at the bottom:
 *                  a stack far deeper than a report keeps
 *   cpuhot SECS    the main thread idles in its loop while a worker thread,
 *                  "hot-worker", spins in spin_in_worker() for SECS seconds
 *   request SECS   a callback spins SECS seconds in handle_request(), in
 *                  slices of 3.1 ms in parse_request(), 7.3 ms in
 *                  render_template() (2.9 of them in escape_html(), which
 *                  it calls) and 4.7 ms in compress_reply(): a flame graph
 *                  of its samples shows the shares (hangwatch html)
 *   waits SECS     blocking calls that must behave exactly as without
 *                  hangwatch, each meant to take SECS: on the main thread
 *                  (inside one long callback) and on 4 other threads at the
 *                  same time; each prints "wait: <thread> <call> <result>
 *                  <errno> <seconds>"
 *   qsort SECS     sort_orders() sorts with qsort, whose comparator
 *                  compare_orders() sleeps SECS in all: the hang is in the
 *                  C library, the culprit the program's own code
 *   dashboard N    N turns of a 50 ms timer, each render_dashboard() for
 *                  740-760 ms then write_headers() for 5 ms
 *
 * Each prints one line, "scenario: <name> done in <seconds>", and exits 0.
 * Built like the demo (noinline, -fno-optimize-sibling-calls) so the stack in
 * a report names the functions below.
 */
#include <errno.h>
#include <link.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "cpu_queue.h"

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int make_timer(double first_seconds)
{
    int fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    if (fd < 0) {
        perror("timerfd_create");
        exit(1);
    }
    struct itimerspec spec = {0};
    spec.it_value.tv_sec = (time_t)first_seconds;
    spec.it_value.tv_nsec = (long)((first_seconds - (double)(time_t)first_seconds) * 1e9);
    if (spec.it_value.tv_sec == 0 && spec.it_value.tv_nsec == 0)
        spec.it_value.tv_nsec = 1;
    timerfd_settime(fd, 0, &spec, NULL);
    return fd;
}

static int make_epoll(int fd)
{
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
        perror("epoll");
        exit(1);
    }
    return ep;
}

static volatile uint64_t g_sink;

__attribute__((noinline)) static void spin_on_cpu(double seconds)
{
    double end = now_seconds() + seconds;
    while (now_seconds() < end)
        for (int i = 0; i < 1000; i++)
            g_sink = g_sink * 31 + (uint64_t)i;
}

__attribute__((noinline)) static void a_little_work(void)
{
    for (int i = 0; i < 200; i++)
        g_sink = g_sink * 17 + (uint64_t)i;
}

static int run_idle(double seconds)
{
    int timer = make_timer(seconds);
    int ep = make_epoll(timer);
    struct epoll_event ev;
    while (epoll_wait(ep, &ev, 1, -1) != 1)
        ;
    return 0;
}

static int run_flipflop(double seconds)
{
    int ep[2] = {epoll_create1(EPOLL_CLOEXEC), epoll_create1(EPOLL_CLOEXEC)};
    if (ep[0] < 0 || ep[1] < 0)
        return 1;
    struct epoll_event ev;
    double end = now_seconds() + seconds;
    for (unsigned turn = 0; now_seconds() < end; turn++)
        epoll_wait(ep[turn / 2 % 2], &ev, 1, 20);
    return 0;
}

static int run_busypoll(double seconds)
{
    int timer = make_timer(seconds);
    int ep = make_epoll(timer);
    struct epoll_event ev;
    unsigned long turns = 0;
    for (;;) {
        int n = epoll_wait(ep, &ev, 1, 0);
        if (n == 1)
            break;
        a_little_work();
        turns++;
    }
    fprintf(stderr, "scenario: busypoll made %lu turns\n", turns);
    return 0;
}

__attribute__((noinline)) static void on_spin_timer(double seconds)
{
    spin_on_cpu(seconds);
}

static void sleep_seconds(double seconds)
{
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

__attribute__((noinline)) static void block_in_a(double seconds)
{
    g_sink += 1; /* distinct bodies: -O2 would fold identical functions into one */
    sleep_seconds(seconds);
}

__attribute__((noinline)) static void block_in_b(double seconds)
{
    g_sink += 2; /* distinct bodies: -O2 would fold identical functions into one */
    sleep_seconds(seconds);
}

__attribute__((noinline)) static void block_in_c(double seconds)
{
    g_sink += 3; /* distinct bodies: -O2 would fold identical functions into one */
    sleep_seconds(seconds);
}

__attribute__((noinline)) static void on_abca_timer(double seconds)
{
    block_in_a(seconds);
    block_in_b(seconds);
    block_in_c(seconds);
    block_in_a(seconds);
}

/* ---- three hangs, one of them twice (hangwatch stats and export) ---- */

__attribute__((noinline)) static void hang_in_x(double seconds)
{
    g_sink += 21; /* distinct bodies: -O2 would fold identical functions into one */
    sleep_seconds(seconds);
}

__attribute__((noinline)) static void hang_in_y(double seconds)
{
    double end = now_seconds() + seconds; /* spins in its own body */
    while (now_seconds() < end)
        for (int i = 0; i < 1000; i++)
            g_sink = g_sink * 7 + (uint64_t)i;
}

__attribute__((noinline)) static void hang_in_z(double seconds)
{
    g_sink += 23; /* distinct bodies: -O2 would fold identical functions into one */
    sleep_seconds(seconds);
}

__attribute__((noinline)) static void on_hang_tick(int tick, double unit)
{
    if (tick == 1 || tick == 4)
        hang_in_x(unit);
    else if (tick == 2)
        hang_in_y(1.2 * unit);
    else
        hang_in_z(1.6 * unit);
}

/* ---- a request handler spinning in several functions (hangwatch html) ---- */

/* Spin for `seconds`, each body its own (-O2 would fold identical ones). */
__attribute__((noinline)) static void parse_request(double seconds)
{
    double end = now_seconds() + seconds;
    while (now_seconds() < end)
        for (int i = 0; i < 100; i++)
            g_sink = g_sink * 11 + (uint64_t)i;
}

__attribute__((noinline)) static void escape_html(double seconds)
{
    double end = now_seconds() + seconds;
    while (now_seconds() < end)
        for (int i = 0; i < 100; i++)
            g_sink = g_sink * 13 + (uint64_t)i;
}

__attribute__((noinline)) static void render_template(double seconds)
{
    double end = now_seconds() + seconds * 0.6;
    while (now_seconds() < end)
        for (int i = 0; i < 100; i++)
            g_sink = g_sink * 17 + (uint64_t)i;
    escape_html(seconds * 0.4);
}

__attribute__((noinline)) static void compress_reply(double seconds)
{
    double end = now_seconds() + seconds;
    while (now_seconds() < end)
        for (int i = 0; i < 100; i++)
            g_sink = g_sink * 19 + (uint64_t)i;
}

/* Slices far shorter than a sample interval, and of no common period with
 * it; read from memory, so that the compiler makes no copies of the
 * functions for constant arguments. */
static volatile double g_request_slices[3] = {0.0031, 0.0073, 0.0047};

__attribute__((noinline)) static void handle_request(double seconds)
{
    double end = now_seconds() + seconds;
    while (now_seconds() < end) {
        parse_request(g_request_slices[0]);
        render_template(g_request_slices[1]);
        compress_reply(g_request_slices[2]);
    }
}

/* A loop ticking every 0.1 s whose first four ticks each hang (the loop
 * waits in between, so each hang ends there), then exits. */
static int run_threehangs(double unit)
{
    int timer = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    struct itimerspec spec = {{0, 100000000L}, {0, 100000000L}};
    timerfd_settime(timer, 0, &spec, NULL);
    int ep = make_epoll(timer);
    for (int tick = 0; tick < 5;) {
        struct epoll_event ev;
        if (epoll_wait(ep, &ev, 1, -1) == 1) {
            uint64_t expirations;
            if (read(timer, &expirations, sizeof expirations) > 0 && ++tick <= 4)
                on_hang_tick(tick, unit);
        }
    }
    return 0;
}

/* Run `callback(seconds)` from a timer 0.2 s after start, then wait once
 * more (a real wait) so the busy stretch ends at the loop's wait point. */
/* 100,000 calls deep (about 5 MB of an 8 MB stack), then a spin. */
#define DEEP_CALLS 100000
static volatile unsigned long deep_sink;

__attribute__((noinline)) static unsigned long descend_into_tree(unsigned long depth, double seconds)
{
    if (depth == 0) {
        double end = now_seconds() + seconds;
        while (now_seconds() < end)
            deep_sink++;
        return deep_sink;
    }
    return descend_into_tree(depth - 1, seconds) + depth % 3;
}

static void hang_deep(double seconds)
{
    deep_sink += descend_into_tree(DEEP_CALLS, seconds);
}

static int run_from_timer(void (*callback)(double), double seconds)
{
    int timer = make_timer(0.2);
    int ep = make_epoll(timer);
    struct epoll_event ev;
    while (epoll_wait(ep, &ev, 1, -1) != 1)
        ;
    uint64_t expirations;
    if (read(timer, &expirations, sizeof expirations) < 0)
        return 1;
    callback(seconds);
    epoll_wait(ep, &ev, 1, 300);
    return 0;
}

__attribute__((noinline)) static void sleep_until_killed(double seconds)
{
    g_sink += 31; /* distinct bodies: -O2 would fold identical functions into one */
    sleep_seconds(seconds);
}

/* "WHAT at T": now, in CLOCK_MONOTONIC seconds, for the tests to time the
 * agent's figures against the program's own clock. */
static void say_when(const char *what)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    printf("%s at %.6f\n", what, (double)now.tv_sec + (double)now.tv_nsec / 1e9);
    fflush(stdout);
}

__attribute__((noinline)) static void sleep_until_exit(double seconds)
{
    g_sink += 41; /* distinct bodies: -O2 would fold identical functions into one */
    say_when("hang");
    sleep_seconds(seconds);
}

static char g_vfork_child_stack[64 * 1024] __attribute__((aligned(16)));

static int vfork_child_sleeps(void *arg)
{
    sleep_seconds(*(double *)arg);
    return 0;
}

/* vfork a child that sleeps *seconds, and wait for it: the parent waits in
 * a killable uninterruptible sleep, which a ptrace interrupt does not end. */
static void vfork_and_wait(double *seconds)
{
    pid_t child = clone(vfork_child_sleeps, g_vfork_child_stack + sizeof g_vfork_child_stack,
                        CLONE_VM | CLONE_VFORK | SIGCHLD, seconds);
    if (child > 0)
        while (waitpid(child, NULL, 0) < 0 && errno == EINTR)
            ;
}

__attribute__((noinline)) static void wait_for_child_exec(double seconds)
{
    g_sink += 51; /* distinct bodies: -O2 would fold identical functions into one */
    say_when("hang");
    vfork_and_wait(&seconds);
}

/* vforkside: the side thread, a vfork parent until its child has slept. */
static void *vfork_beside(void *arg)
{
    static double child_sleeps;
    child_sleeps = *(double *)arg + 1.0;
    vfork_and_wait(&child_sleeps);
    return NULL;
}

__attribute__((noinline)) static void sleep_beside_vfork(double seconds)
{
    g_sink += 61; /* distinct bodies: -O2 would fold identical functions into one */
    say_when("hang");
    sleep_seconds(seconds);
}

static int run_vforkside(double seconds)
{
    static double side;
    side = seconds;
    pthread_t thread;
    if (pthread_create(&thread, NULL, vfork_beside, &side) != 0)
        return 1;
    return run_from_timer(sleep_beside_vfork, seconds); /* the exit ends the side thread's wait */
}

static void *watchdog_gives_up(void *arg)
{
    sleep_seconds(*(double *)arg);
    say_when("exit");
    exit(3);
}

static int run_exithang(double seconds)
{
    static double after;
    after = seconds;
    pthread_t watchdog;
    if (pthread_create(&watchdog, NULL, watchdog_gives_up, &after) != 0)
        return 1;
    return run_from_timer(sleep_until_exit, 2 * seconds);
}

__attribute__((noinline)) static void debugger_breaks_here(void)
{
    g_sink += 37; /* distinct bodies: -O2 would fold identical functions into one */
}

__attribute__((noinline)) static void on_breakpoint_tick(double seconds)
{
    (void)seconds;
    debugger_breaks_here();
    double end = now_seconds() + 0.4;
    while (now_seconds() < end)
        for (int i = 0; i < 1000; i++)
            g_sink = g_sink * 11 + (uint64_t)i;
}

__attribute__((noinline)) static void spin_in_worker(double seconds)
{
    double end = now_seconds() + seconds; /* spins in its own body */
    while (now_seconds() < end)
        for (int i = 0; i < 1000; i++)
            g_sink = g_sink * 13 + (uint64_t)i;
}

/* Prints "worker queued Q of S" after its spin: the seconds of it the
 * worker waited for a CPU (a busy machine may give it less than the
 * process's --cpu-high share, and then no report is the right answer). */
static void *hot_worker(void *arg)
{
    pthread_setname_np(pthread_self(), "hot-worker");
    double seconds = *(double *)arg, queued = queued_seconds();
    spin_in_worker(seconds);
    printf("worker queued %.3f of %.3f\n", queued_seconds() - queued, seconds);
    fflush(stdout);
    return NULL;
}

/* The main thread idles in its loop while a worker spins for `seconds`. */
static int run_cpuhot(double seconds)
{
    pthread_t worker;
    if (pthread_create(&worker, NULL, hot_worker, &seconds) != 0)
        return 1;
    int rc = run_idle(seconds + 0.3);
    pthread_join(worker, NULL);
    return rc;
}

/* Prints "queued Q" at the end: the seconds the loop's thread waited for
 * a CPU over the run (a spin that overran its stretch by that much was the
 * busy machine's). */
static int run_cpuspin(double seconds)
{
    double queued = queued_seconds();
    int rc = run_from_timer(on_spin_timer, seconds);
    printf("queued %.3f\n", queued_seconds() - queued);
    fflush(stdout);
    return rc;
}

static struct timespec deadline_in(double seconds);
static int run_on_fifth_tick(void (*callback)(double), double seconds);

/* ---- nested waits ---- */

__attribute__((noinline)) static void synchronous_network_call(double seconds)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
        exit(1);
    struct pollfd pfd = {sv[0], POLLIN, 0};
    int n = poll(&pfd, 1, (int)(seconds * 1000)); /* the peer never answers */
    (void)n;
    close(sv[0]);
    close(sv[1]);
}

__attribute__((noinline)) static void wait_in_nested_epoll(double seconds)
{
    int inner = make_timer(seconds);
    int ep = make_epoll(inner);
    struct epoll_event ev;
    while (epoll_wait(ep, &ev, 1, -1) != 1)
        ;
    close(ep);
    close(inner);
}

static double g_short_nested_end;

__attribute__((noinline)) static void on_tick_with_short_nested_poll(double seconds)
{
    (void)seconds;
    synchronous_network_call(0.01);
}

static int run_ticks(void (*callback)(double), double seconds, double tick)
{
    int timer = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    struct itimerspec spec = {{0, (long)(tick * 1e9)}, {0, (long)(tick * 1e9)}};
    timerfd_settime(timer, 0, &spec, NULL);
    int ep = make_epoll(timer);
    g_short_nested_end = now_seconds() + seconds;
    while (now_seconds() < g_short_nested_end) {
        struct epoll_event ev;
        if (epoll_wait(ep, &ev, 1, -1) == 1) {
            uint64_t expirations;
            if (read(timer, &expirations, sizeof expirations) > 0)
                callback(seconds);
        }
    }
    return 0;
}

__attribute__((noinline)) static void sleeping_callback(double seconds)
{
    g_sink += 9;
    sleep_seconds(seconds);
}

/* A loop ticking every 50 ms that calls `callback(seconds)` on its 5th
 * tick and exits after its 10th: the loop has turned over before the hang,
 * as a real program's has. */
static int run_on_fifth_tick(void (*callback)(double), double seconds)
{
    int timer = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    struct itimerspec spec = {{0, 50000000L}, {0, 50000000L}};
    timerfd_settime(timer, 0, &spec, NULL);
    int ep = make_epoll(timer);
    for (int tick = 1; tick <= 10;) {
        struct epoll_event ev;
        if (epoll_wait(ep, &ev, 1, -1) == 1) {
            uint64_t expirations;
            if (read(timer, &expirations, sizeof expirations) > 0 && ++tick == 5)
                callback(seconds);
        }
    }
    return 0;
}

static int run_startpoll(double seconds)
{
    struct pollfd none = {-1, 0, 0};
    poll(&none, 1, 50); /* a one-off wait in main(), shallower than the loop */
    return run_on_fifth_tick(sleeping_callback, seconds);
}

static atomic_int g_storm_stop;

/* ---- capture under contention ---- */

static double g_block_seconds;

__attribute__((noinline)) static int block_holding_loader_lock(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)info;
    (void)size;
    (void)data;
    sleep_seconds(g_block_seconds);
    return 1; /* stop after the first object */
}

__attribute__((noinline)) static void hang_in_dl_iterate_phdr(double seconds)
{
    g_block_seconds = seconds;
    dl_iterate_phdr(block_holding_loader_lock, NULL);
}

__attribute__((noinline)) static void hang_with_stdout_locked(double seconds)
{
    flockfile(stdout);
    sleep_seconds(seconds);
    funlockfile(stdout);
}

static void *short_lived_thread(void *arg)
{
    (void)arg;
    sleep_seconds(0.005); /* live a little, so hundreds are alive at once */
    return NULL;
}

static void *thread_spawner(void *arg)
{
    (void)arg;
    while (!atomic_load(&g_storm_stop)) {
        pthread_t batch[250];
        int n = 0;
        for (; n < 250; n++)
            if (pthread_create(&batch[n], NULL, short_lived_thread, NULL) != 0)
                break;
        for (int i = 0; i < n; i++)
            pthread_join(batch[i], NULL);
    }
    return NULL;
}

static int run_churn(double seconds)
{
    pthread_t spawners[4]; /* up to 4 x 250 = 1000 threads alive at once */
    for (int i = 0; i < 4; i++)
        pthread_create(&spawners[i], NULL, thread_spawner, NULL);
    int rc = run_from_timer(on_spin_timer, seconds);
    atomic_store(&g_storm_stop, 1);
    for (int i = 0; i < 4; i++)
        pthread_join(spawners[i], NULL);
    return rc;
}

/* ---- loopthread ---- */

__attribute__((noinline)) static void io_loop_callback_blocks(double seconds)
{
    g_sink += 11;
    sleep_seconds(seconds);
}

static void *io_loop_thread(void *arg)
{
    double seconds = *(double *)arg;
    pthread_setname_np(pthread_self(), "io-loop");
    run_on_fifth_tick(io_loop_callback_blocks, seconds);
    return NULL;
}

static void *pool_worker_thread(void *arg)
{
    double seconds = *(double *)arg;
    pthread_setname_np(pthread_self(), "pool-worker");
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
    pthread_mutex_lock(&m);
    struct timespec dl = deadline_in(seconds + 1);
    pthread_cond_timedwait(&cv, &m, &dl); /* no work arrives */
    pthread_mutex_unlock(&m);
    return NULL;
}

static int run_loopthread(double seconds)
{
    static double s;
    s = seconds;
    pthread_t io, pool;
    pthread_create(&io, NULL, io_loop_thread, &s);
    pthread_create(&pool, NULL, pool_worker_thread, &s);
    int timer = make_timer(seconds + 1.5);
    int ep = make_epoll(timer);
    struct epoll_event ev;
    while (epoll_wait(ep, &ev, 1, -1) != 1)
        ;
    pthread_join(io, NULL);
    pthread_join(pool, NULL);
    return 0;
}

/* ---- stutter ---- */

__attribute__((noinline)) static void stall_for_one_second(void)
{
    g_sink += 13;
    sleep_seconds(1.0);
}

static int run_stutter(double seconds)
{
    int ep = -1, timer = -1;
    double end = now_seconds() + seconds;
    while (now_seconds() < end) {
        if (timer >= 0) {
            close(ep);
            close(timer);
        }
        timer = make_timer(0.3); /* 0.3 s of responsiveness */
        ep = make_epoll(timer);
        struct epoll_event ev;
        while (epoll_wait(ep, &ev, 1, -1) != 1)
            ;
        stall_for_one_second();
    }
    return 0;
}

/* ---- forkstorm ---- */

static void *malloc_churn(void *arg)
{
    (void)arg;
    while (!atomic_load(&g_storm_stop)) {
        void *p = malloc(64 + (size_t)(g_sink % 4096));
        g_sink += (uint64_t)(uintptr_t)p;
        free(p);
    }
    return NULL;
}

static int run_forkstorm(double count)
{
    pthread_t threads[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&threads[i], NULL, malloc_churn, NULL);
    int forks = (int)count, ok = 0;
    for (int i = 0; i < forks; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            struct pollfd none = {-1, 0, 0};
            poll(&none, 1, 0);
            void *p = malloc(100); /* malloc must work in the child */
            free(p);
            _exit(0);
        }
        int status;
        if (pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0)
            ok++;
    }
    atomic_store(&g_storm_stop, 1);
    for (int i = 0; i < 4; i++)
        pthread_join(threads[i], NULL);
    printf("forkstorm: %d of %d children ran\n", ok, forks);
    return ok == forks ? 0 : 1;
}

/* ---- threads12 ---- */

static int g_park_pipe[2];

__attribute__((noinline)) static void *parked_in_pipe_read(void *arg)
{
    (void)arg;
    char c;
    ssize_t n = read(g_park_pipe[0], &c, 1); /* never written: the process exits */
    (void)n;
    return NULL;
}

static int run_threads12(double seconds)
{
    if (pipe(g_park_pipe) != 0)
        return 1;
    for (int i = 0; i < 11; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, parked_in_pipe_read, NULL) != 0)
            return 1;
        pthread_detach(t);
    }
    return run_from_timer(on_spin_timer, seconds);
}

/* ---- crowd: more threads than a capture takes ---- */

#define CROWD_THREADS 2000

static int run_crowd(double seconds)
{
    if (pipe(g_park_pipe) != 0)
        return 1;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    for (int i = 0; i < CROWD_THREADS; i++) {
        pthread_t t;
        if (pthread_create(&t, &attr, parked_in_pipe_read, NULL) != 0) {
            fprintf(stderr, "crowd: thread %d of %d could not be created\n", i + 1, CROWD_THREADS);
            return 1;
        }
    }
    pthread_attr_destroy(&attr);
    return run_from_timer(on_spin_timer, seconds);
}

/* ---- launch ---- */

__attribute__((noinline)) static void slow_start_up(double seconds)
{
    g_sink += 7; /* not identical to on_spin_timer, or -O2 folds the two */
    spin_on_cpu(seconds);
}

static int run_launch(double seconds)
{
    slow_start_up(seconds);
    int timer = make_timer(0.1);
    int ep = make_epoll(timer);
    struct epoll_event ev;
    while (epoll_wait(ep, &ev, 1, -1) != 1)
        ;
    return 0;
}

/* ---- waits ---- */

static pthread_mutex_t g_print_lock = PTHREAD_MUTEX_INITIALIZER;

static __thread double g_queued_at_start;

/* A wait starts: its time, and how long the thread had waited for a CPU. */
static double start_wait(void)
{
    g_queued_at_start = queued_seconds();
    return now_seconds();
}

/* One line per wait: what it returned, how long it took (`start` to
 * `end`), and how much of that it waited for a CPU (a busy machine's, not
 * the call's: the tests allow it): the thread, and the helper that ends
 * the wait (`helper_queued`) if there is one. */
static void report_wait_ended(const char *who, const char *call, long result, int err, double start, double end,
                              double queued)
{
    double took = end - start;
    pthread_mutex_lock(&g_print_lock);
    printf("wait: %s %s %ld %d %.3f %.3f\n", who, call, result, err, took, queued);
    fflush(stdout);
    pthread_mutex_unlock(&g_print_lock);
}

static void report_wait(const char *who, const char *call, long result, int err, double start)
{
    report_wait_ended(who, call, result, err, start, now_seconds(), queued_seconds() - g_queued_at_start);
}

static struct timespec deadline_in(double seconds)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long ns = ts.tv_nsec + (long)((seconds - (double)(long)seconds) * 1e9);
    ts.tv_sec += (time_t)seconds + ns / 1000000000L;
    ts.tv_nsec = ns % 1000000000L;
    return ts;
}

typedef struct delayed_write {
    int fd;
    double after;
    sem_t *sem;
    double queued; /* the helper's own wait for a CPU, to its write or post */
} delayed_write;

static void *write_later(void *arg)
{
    delayed_write *d = arg;
    double queued = queued_seconds();
    sleep_seconds(d->after);
    if (d->sem)
        sem_post(d->sem);
    else if (write(d->fd, "x", 1) != 1)
        perror("write");
    d->queued = queued_seconds() - queued; /* read after the join */
    return NULL;
}

/* Every blocking call under test, from thread `who`. */
__attribute__((noinline)) static void wait_in_every_way(const char *who, double seconds)
{
    pthread_t helper;
    int fds[2];
    if (pipe(fds) != 0)
        exit(1);

    /* read() on a pipe written after `seconds`; the clock starts before the
     * writer's, which may start sleeping before pthread_create returns */
    delayed_write dw = {fds[1], seconds, NULL, 0};
    double t0 = start_wait();
    pthread_create(&helper, NULL, write_later, &dw);
    char c;
    ssize_t n = read(fds[0], &c, 1);
    int err = n < 0 ? errno : 0;
    double end = now_seconds(), queued = queued_seconds() - g_queued_at_start;
    pthread_join(helper, NULL);
    report_wait_ended(who, "read", (long)n, err, t0, end, queued + dw.queued);

    /* sem_wait posted after `seconds` */
    sem_t sem;
    sem_init(&sem, 0, 0);
    delayed_write dp = {-1, seconds, &sem, 0};
    t0 = start_wait();
    pthread_create(&helper, NULL, write_later, &dp);
    int rc = sem_wait(&sem);
    err = rc ? errno : 0;
    end = now_seconds();
    queued = queued_seconds() - g_queued_at_start;
    pthread_join(helper, NULL);
    report_wait_ended(who, "sem_wait", rc, err, t0, end, queued + dp.queued);

    /* sem_timedwait that times out */
    t0 = start_wait(); /* before the deadline: a preemption between the two must not look like an early return */
    struct timespec dl = deadline_in(seconds);
    rc = sem_timedwait(&sem, &dl);
    report_wait(who, "sem_timedwait", rc, rc ? errno : 0, t0);
    sem_destroy(&sem);

    /* pthread_cond_timedwait that times out */
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
    pthread_mutex_lock(&m);
    t0 = start_wait();
    dl = deadline_in(seconds);
    rc = pthread_cond_timedwait(&cv, &m, &dl);
    report_wait(who, "cond_timedwait", rc, rc, t0);
    pthread_mutex_unlock(&m);

    /* poll() with a timeout on a pipe that stays empty */
    struct pollfd pfd = {fds[0], POLLIN, 0};
    t0 = start_wait();
    rc = poll(&pfd, 1, (int)(seconds * 1000));
    report_wait(who, "poll", rc, rc < 0 ? errno : 0, t0);

    /* nanosleep */
    t0 = start_wait();
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    rc = nanosleep(&ts, NULL);
    report_wait(who, "nanosleep", rc, rc ? errno : 0, t0);
    close(fds[0]);
    close(fds[1]);
}

static double g_wait_seconds;

static void *other_thread_waits(void *arg)
{
    wait_in_every_way((const char *)arg, g_wait_seconds);
    return NULL;
}

__attribute__((noinline)) static void on_waits_timer(double seconds)
{
    wait_in_every_way("main", seconds);
}

static int run_waits(double seconds)
{
    static const char *names[] = {"worker1", "worker2", "worker3", "worker4"};
    pthread_t threads[4];
    g_wait_seconds = seconds;
    for (int i = 0; i < 4; i++)
        pthread_create(&threads[i], NULL, other_thread_waits, (void *)names[i]);
    int rc = run_from_timer(on_waits_timer, seconds);
    for (int i = 0; i < 4; i++)
        pthread_join(threads[i], NULL);
    return rc;
}

/* ---- the user's culprit (decisions.md §39) ---- */

/* qsort with a comparator that sleeps: the hang is in the C library's
 * msort_with_tmp, the user's code is compare_orders and sort_orders. */
static double g_compare_sleep;
static int g_compares_left;

__attribute__((noinline)) static int compare_orders(const void *a, const void *b)
{
    if (g_compares_left > 0) {
        g_compares_left--;
        sleep_seconds(g_compare_sleep);
    }
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

__attribute__((noinline)) static void sort_orders(double seconds)
{
    int orders[16];
    for (int i = 0; i < 16; i++)
        orders[i] = (i * 7919) % 16;
    g_compares_left = 10;
    g_compare_sleep = seconds / 10;
    qsort(orders, 16, sizeof orders[0], compare_orders);
    g_sink += (uint64_t)orders[0];
}

/* A dashboard that renders for 740-760 ms, then writes its headers for
 * 5 ms in the same turn: a re-check 750 ms into the turn falls as the hang
 * ends, in write_headers (the hang's tail). */
__attribute__((noinline)) static void render_dashboard(double seconds)
{
    double end = now_seconds() + seconds;
    while (now_seconds() < end)
        for (int i = 0; i < 1000; i++)
            g_sink = g_sink * 43 + (uint64_t)i + 7; /* a body of its own (ICF) */
}

__attribute__((noinline)) static void write_headers(double seconds)
{
    double end = now_seconds() + seconds;
    while (now_seconds() < end)
        for (int i = 0; i < 1000; i++)
            g_sink = g_sink * 59 + (uint64_t)i + 13; /* a body of its own (ICF) */
}

/* `count` turns of a 50 ms timer, each a dashboard render and its headers. */
static int run_dashboard(double count)
{
    int timer = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    struct itimerspec spec = {{0, 50000000}, {0, 50000000}};
    timerfd_settime(timer, 0, &spec, NULL);
    int ep = make_epoll(timer);
    for (int turn = 0; turn < (int)count;) {
        struct epoll_event ev;
        uint64_t expirations;
        if (epoll_wait(ep, &ev, 1, -1) != 1 || read(timer, &expirations, sizeof expirations) <= 0)
            continue;
        render_dashboard(0.740 + 0.010 * (turn % 3));
        write_headers(0.005);
        turn++;
    }
    close(ep);
    close(timer);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s SCENARIO SECONDS (see the comment at the top)\n", argv[0]);
        return 2;
    }
    double seconds = atof(argv[2]);
    double start = now_seconds();
    int rc;
    if (strcmp(argv[1], "idle") == 0)
        rc = run_idle(seconds);
    else if (strcmp(argv[1], "busypoll") == 0)
        rc = run_busypoll(seconds);
    else if (strcmp(argv[1], "flipflop") == 0)
        rc = run_flipflop(seconds);
    else if (strcmp(argv[1], "cpuspin") == 0)
        rc = run_cpuspin(seconds);
    else if (strcmp(argv[1], "abca") == 0)
        rc = run_from_timer(on_abca_timer, seconds);
    else if (strcmp(argv[1], "threehangs") == 0)
        rc = run_threehangs(seconds);
    else if (strcmp(argv[1], "request") == 0)
        rc = run_from_timer(handle_request, seconds);
    else if (strcmp(argv[1], "threads12") == 0)
        rc = run_threads12(seconds);
    else if (strcmp(argv[1], "crowd") == 0)
        rc = run_crowd(seconds);
    else if (strcmp(argv[1], "launch") == 0)
        rc = run_launch(seconds);
    else if (strcmp(argv[1], "waits") == 0)
        rc = run_waits(seconds);
    else if (strcmp(argv[1], "nestedpoll") == 0)
        rc = run_on_fifth_tick(synchronous_network_call, seconds);
    else if (strcmp(argv[1], "nestedepoll") == 0)
        rc = run_on_fifth_tick(wait_in_nested_epoll, seconds);
    else if (strcmp(argv[1], "shortnested") == 0)
        rc = run_ticks(on_tick_with_short_nested_poll, seconds, 0.1);
    else if (strcmp(argv[1], "dlhang") == 0)
        rc = run_from_timer(hang_in_dl_iterate_phdr, seconds);
    else if (strcmp(argv[1], "stdiohang") == 0)
        rc = run_from_timer(hang_with_stdout_locked, seconds);
    else if (strcmp(argv[1], "churn") == 0)
        rc = run_churn(seconds);
    else if (strcmp(argv[1], "stutter") == 0)
        rc = run_stutter(seconds);
    else if (strcmp(argv[1], "loopthread") == 0)
        rc = run_loopthread(seconds);
    else if (strcmp(argv[1], "forkstorm") == 0)
        rc = run_forkstorm(seconds);
    else if (strcmp(argv[1], "startpoll") == 0)
        rc = run_startpoll(seconds);
    else if (strcmp(argv[1], "sleephang") == 0)
        rc = run_from_timer(sleep_until_killed, seconds);
    else if (strcmp(argv[1], "vforkhang") == 0)
        rc = run_from_timer(wait_for_child_exec, seconds);
    else if (strcmp(argv[1], "exithang") == 0)
        rc = run_exithang(seconds);
    else if (strcmp(argv[1], "vforkside") == 0)
        rc = run_vforkside(seconds);
    else if (strcmp(argv[1], "breakpoint") == 0)
        rc = run_ticks(on_breakpoint_tick, seconds, 0.1);
    else if (strcmp(argv[1], "deep") == 0)
        rc = run_from_timer(hang_deep, seconds);
    else if (strcmp(argv[1], "cpuhot") == 0)
        rc = run_cpuhot(seconds);
    else if (strcmp(argv[1], "qsort") == 0)
        rc = run_from_timer(sort_orders, seconds);
    else if (strcmp(argv[1], "dashboard") == 0)
        rc = run_dashboard(seconds);
    else {
        fprintf(stderr, "unknown scenario %s\n", argv[1]);
        return 2;
    }
    printf("scenario: %s done in %.3f\n", argv[1], now_seconds() - start);
    return rc;
}
