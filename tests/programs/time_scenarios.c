/*
 * time_scenarios.c - a loop whose hangs spend their time in different ways,
 * for the tests of a report's `time` section (where the time went: on a
 * CPU, waiting for one, throttled, blocked on what).
 *
 * It waits in epoll_wait on stdin (with --turn-every MS, for MS ms at most:
 * a loop that turns all the time); each line is a command:
 *   close MS1 MS2  close_the_books() computes for MS1 ms of CPU time, then
 *                  sleeps MS2 ms (a hang of two halves)
 *   rush MS1 MS2   rest_then_rush() sleeps MS1 ms, then spins MS2 ms
 *   work MS        compute_invoice() computes for MS ms of its own CPU
 *                  time (CLOCK_THREAD_CPUTIME_ID): 2.5 s of it is a working
 *                  hang; in a cgroup limited to 20 %, 0.6 s of it takes
 *                  about 3 s (throttled); starved of the CPU it takes long
 *   spin MS        spin_for_wall_time() spins for MS ms of wall time,
 *                  however little of it it gets (starved beside spinners),
 *                  and prints how much CPU time it had
 *   recv PORT      fetch_price() connects to 127.0.0.1:PORT, sends "ask\n"
 *                  and waits for the answer line (blocked on the network)
 *   poll MS        wait_for_quote() waits MS ms in poll() on one socket of
 *                  a pair that nobody writes to: a socket's own wait for
 *                  its timeout, nested in the loop's callback (every
 *                  Python socket with a timeout waits this way)
 *   nap MS         rest_between_orders() sleeps MS ms in nanosleep (a
 *                  relative sleep: stopped, the kernel resumes it as
 *                  restart_syscall)
 *   tick MS        wait_a_tick() waits MS ms in select() on no descriptor
 *                  (Python 3.8-3.10's time.sleep)
 *   pipe MS        read_report() reads a pipe whose writer, a child,
 *                  writes after MS ms (blocked on I/O); prints "writer PID"
 *   unix MS        ask_the_ledger() reads a unix socket whose peer, a
 *                  child, answers after MS ms; prints "peer PID"
 *   child MS       wait_for_export() waits for a child that sleeps MS ms
 *                  (blocked on a child); prints "child PID"
 *   mutex MS       update_totals() locks a mutex a second thread ("cache")
 *                  holds for MS ms in flush_cache() (blocked on a lock)
 *   deadlock       post_to_journal() holds the ledger's mutex and waits for
 *                  the journal's, which a second thread ("journal") holds
 *                  while it waits for the ledger's in post_to_ledger():
 *                  it prints "locking" and never returns
 *   quit           exit 0 (so does the end of stdin)
 * It prints "ready PID" once its loop waits, and "did COMMAND" after each.
 * Function bodies differ, so -O2 folds none of them.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "stdin_commands.h"

static double clock_seconds(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static volatile unsigned long long invoice_total;

__attribute__((noinline)) static void compute_invoice(long ms)
{
    double end = clock_seconds(CLOCK_THREAD_CPUTIME_ID) + (double)ms / 1000.0;
    unsigned long long x = 88172645463325252ull;
    while (clock_seconds(CLOCK_THREAD_CPUTIME_ID) < end) {
        for (int i = 0; i < 10000; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        invoice_total += x;
    }
}

static volatile unsigned long long spins;

/* Prints the CPU time it got: the program's own view of a starved spin. */
__attribute__((noinline)) static void spin_for_wall_time(long ms)
{
    double cpu = clock_seconds(CLOCK_THREAD_CPUTIME_ID);
    double end = clock_seconds(CLOCK_MONOTONIC) + (double)ms / 1000.0;
    while (clock_seconds(CLOCK_MONOTONIC) < end)
        spins++;
    printf("spun on a CPU for %.3f s\n", clock_seconds(CLOCK_THREAD_CPUTIME_ID) - cpu);
}

__attribute__((noinline)) static void fetch_price(int port)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (s < 0 || connect(s, (struct sockaddr *)&addr, sizeof addr) != 0) {
        perror("connect");
        exit(1);
    }
    if (write(s, "ask\n", 4) != 4)
        exit(1);
    char buf[64];
    ssize_t n = recv(s, buf, sizeof buf, 0);
    printf("price %zd bytes\n", n);
    close(s);
}

/* Sleeps SLEEP_MS, then spins for SPIN_MS of wall time: asleep for most of
 * its hang, running when it is caught late in it. */
__attribute__((noinline)) static void rest_then_rush(long sleep_ms, long spin_ms)
{
    struct timespec left = {sleep_ms / 1000, (sleep_ms % 1000) * 1000000L};
    while (nanosleep(&left, &left) != 0 && errno == EINTR)
        ;
    double end = clock_seconds(CLOCK_MONOTONIC) + (double)spin_ms / 1000.0;
    while (clock_seconds(CLOCK_MONOTONIC) < end)
        spins += 3;
    printf("rushed\n");
}

/* Half and half: computes for WORK_MS of CPU time, then sleeps SLEEP_MS. */
__attribute__((noinline)) static void close_the_books(long work_ms, long sleep_ms)
{
    double end = clock_seconds(CLOCK_THREAD_CPUTIME_ID) + (double)work_ms / 1000.0;
    unsigned long long x = 0x9e3779b97f4a7c15ull;
    while (clock_seconds(CLOCK_THREAD_CPUTIME_ID) < end) {
        for (int i = 0; i < 8000; i++)
            x = x * 6364136223846793005ull + 1442695040888963407ull;
        invoice_total ^= x;
    }
    struct timespec left = {sleep_ms / 1000, (sleep_ms % 1000) * 1000000L};
    while (nanosleep(&left, &left) != 0 && errno == EINTR)
        ;
    printf("closed the books\n");
}

__attribute__((noinline)) static void wait_for_quote(long ms)
{
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, pair) != 0)
        exit(1);
    struct pollfd p = {.fd = pair[0], .events = POLLIN};
    int ready = poll(&p, 1, (int)ms);
    printf("quote ready %d\n", ready);
    close(pair[0]);
    close(pair[1]);
}

__attribute__((noinline)) static void rest_between_orders(long ms)
{
    struct timespec left = {ms / 1000, (ms % 1000) * 1000000L};
    /* a stop's signal ends no relative sleep (the kernel restarts it), but
     * a real one would: sleep on for what is left */
    while (nanosleep(&left, &left) != 0 && errno == EINTR)
        ;
    printf("rested %ld ms\n", ms);
}

__attribute__((noinline)) static void wait_a_tick(long ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    int rc = select(0, NULL, NULL, NULL, &tv);
    printf("ticked %d\n", rc);
}

__attribute__((noinline)) static void read_report(long ms)
{
    int fds[2];
    if (pipe(fds) != 0)
        exit(1);
    pid_t writer = fork();
    if (writer == 0) {
        close(fds[0]);
        usleep((useconds_t)ms * 1000);
        if (write(fds[1], "report\n", 7) != 7)
            _exit(1);
        _exit(0);
    }
    close(fds[1]);
    printf("writer %d\n", (int)writer);
    fflush(stdout);
    char buf[16];
    ssize_t n = read(fds[0], buf, sizeof buf);
    printf("report %zd bytes\n", n);
    close(fds[0]);
    waitpid(writer, NULL, 0);
}

__attribute__((noinline)) static void ask_the_ledger(long ms)
{
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, pair) != 0)
        exit(1);
    pid_t ledger = fork();
    if (ledger == 0) {
        close(pair[0]);
        usleep((useconds_t)ms * 1000);
        if (write(pair[1], "balance 42\n", 11) != 11)
            _exit(1);
        _exit(0);
    }
    close(pair[1]);
    printf("peer %d\n", (int)ledger);
    fflush(stdout);
    char buf[32];
    ssize_t n = recv(pair[0], buf, sizeof buf, 0);
    printf("ledger said %zd bytes\n", n);
    close(pair[0]);
    waitpid(ledger, NULL, 0);
}

__attribute__((noinline)) static void wait_for_export(long ms)
{
    pid_t exporter = fork();
    if (exporter == 0) {
        struct timespec rest = {ms / 1000, (ms % 1000) * 1000000L};
        nanosleep(&rest, NULL);
        _exit(3);
    }
    printf("child %d\n", (int)exporter);
    fflush(stdout);
    int status = 0;
    waitpid(exporter, &status, 0);
    printf("export exited %d\n", WEXITSTATUS(status));
}

static pthread_mutex_t totals_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t holding;
static long hold_ms;

__attribute__((noinline)) static void flush_cache(void)
{
    pthread_mutex_lock(&totals_lock);
    pthread_barrier_wait(&holding);
    usleep((useconds_t)hold_ms * 1000);
    pthread_mutex_unlock(&totals_lock);
}

static void *cache_thread(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "cache");
    flush_cache();
    return NULL;
}

/* deadlock: the loop holds the ledger and wants the journal; a second
 * thread holds the journal and wants the ledger.  Neither ever returns. */
static pthread_mutex_t ledger_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t journal_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t both_holding;

__attribute__((noinline)) static void post_to_ledger(void)
{
    pthread_mutex_lock(&journal_lock);
    pthread_barrier_wait(&both_holding);
    pthread_mutex_lock(&ledger_lock);
    invoice_total += 2;
}

static void *journal_thread(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "journal");
    post_to_ledger();
    return NULL;
}

__attribute__((noinline)) static void post_to_journal(void)
{
    pthread_barrier_init(&both_holding, NULL, 2);
    pthread_mutex_lock(&ledger_lock);
    pthread_t t;
    if (pthread_create(&t, NULL, journal_thread, NULL) != 0)
        exit(1);
    pthread_barrier_wait(&both_holding);
    printf("locking\n");
    fflush(stdout);
    pthread_mutex_lock(&journal_lock);
    invoice_total += 3;
}

__attribute__((noinline)) static void update_totals(long ms)
{
    hold_ms = ms;
    pthread_barrier_init(&holding, NULL, 2);
    pthread_t t;
    if (pthread_create(&t, NULL, cache_thread, NULL) != 0)
        exit(1);
    pthread_barrier_wait(&holding); /* it holds the lock now */
    pthread_mutex_lock(&totals_lock);
    invoice_total++;
    pthread_mutex_unlock(&totals_lock);
    pthread_join(t, NULL);
    pthread_barrier_destroy(&holding);
}

static void on_command(const char *line)
{
    long n = 0, m = 0;
    if (sscanf(line, "close %ld %ld", &n, &m) == 2)
        close_the_books(n, m);
    else if (sscanf(line, "rush %ld %ld", &n, &m) == 2)
        rest_then_rush(n, m);
    else if (sscanf(line, "work %ld", &n) == 1)
        compute_invoice(n);
    else if (sscanf(line, "spin %ld", &n) == 1)
        spin_for_wall_time(n);
    else if (sscanf(line, "recv %ld", &n) == 1)
        fetch_price((int)n);
    else if (sscanf(line, "poll %ld", &n) == 1)
        wait_for_quote(n);
    else if (sscanf(line, "pipe %ld", &n) == 1)
        read_report(n);
    else if (sscanf(line, "unix %ld", &n) == 1)
        ask_the_ledger(n);
    else if (sscanf(line, "child %ld", &n) == 1)
        wait_for_export(n);
    else if (sscanf(line, "nap %ld", &n) == 1)
        rest_between_orders(n);
    else if (sscanf(line, "tick %ld", &n) == 1)
        wait_a_tick(n);
    else if (sscanf(line, "mutex %ld", &n) == 1)
        update_totals(n);
    else if (strcmp(line, "deadlock") == 0)
        post_to_journal();
    else if (strncmp(line, "quit", 4) == 0)
        exit(0);
    else
        return;
    printf("did %s\n", line);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    char ready[32];
    snprintf(ready, sizeof ready, "ready %d\n", (int)getpid());
    int turn_ms = argc == 3 && strcmp(argv[1], "--turn-every") == 0 ? atoi(argv[2]) : -1;
    return serve_stdin_commands(on_command, ready, turn_ms);
}
