/*
 * loop_cell.c - the coverage matrix's row for C loop libraries, as
 * loop_cell.py is for Python's: a libevent, libuv or GLib loop that turns
 * every 20 ms; once GO_FILE exists it blocks DELAY s later, from a timer
 * callback, in hold_the_loop_with_KIND for each of KINDS in turn, 1.2 s
 * of turning between them, then turns a while longer and exits ("none":
 * it only turns, every 1 ms, for 60 s).
 *
 *     loop-cell LIBRARY KINDS PORT GO_FILE DELAY HOLD
 *
 * LIBRARY: libevent, libuv, glib.  KINDS, comma-separated: sleep (nanosleep), spin, http (a
 * socket's own wait for its reply with a timeout, poll on one descriptor,
 * from the driver's slow server at PORT), fifo (read a FIFO whose writer,
 * a thread, comes after HOLD s), child (fork, exec sleep HOLD, waitpid),
 * lock (a mutex another thread holds HOLD s).  It prints "ready PID",
 * "held KIND S" and "done".  Function bodies differ, so -O2 folds none.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <glib.h>
#include <uv.h>

static const char *library, *kinds, *go_file;
static int port;
static double delay_s, hold_s;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static void hold_the_loop_with_sleep(void)
{
    struct timespec t = {(time_t)hold_s, (long)((hold_s - (double)(time_t)hold_s) * 1e9)};
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {
    }
}

static volatile unsigned long spun;

__attribute__((noinline)) static void hold_the_loop_with_spin(void)
{
    double end = now_s() + hold_s;
    while (now_s() < end)
        spun++;
}

__attribute__((noinline)) static void hold_the_loop_with_http(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (s < 0 || connect(s, (struct sockaddr *)&addr, sizeof addr) != 0) {
        perror("connect");
        exit(1);
    }
    char request[128];
    int n = snprintf(request, sizeof request, "GET /%g HTTP/1.0\r\n\r\n", hold_s);
    if (write(s, request, (size_t)n) != n)
        exit(1);
    char buf[512];
    for (;;) {
        struct pollfd p = {.fd = s, .events = POLLIN};
        if (poll(&p, 1, 30000) <= 0 || read(s, buf, sizeof buf) <= 0)
            break;
    }
    close(s);
}

static char fifo_path[64];

static void *write_fifo_later(void *arg)
{
    (void)arg;
    usleep((useconds_t)(hold_s * 1e6));
    int fd = open(fifo_path, O_WRONLY);
    if (fd >= 0) {
        if (write(fd, "late\n", 5) != 5)
            exit(1);
        close(fd);
    }
    return NULL;
}

__attribute__((noinline)) static void hold_the_loop_with_fifo(void)
{
    snprintf(fifo_path, sizeof fifo_path, "/tmp/hw-cell-fifo-%d", (int)getpid());
    unlink(fifo_path);
    if (mkfifo(fifo_path, 0600) != 0)
        exit(1);
    pthread_t t;
    pthread_create(&t, NULL, write_fifo_later, NULL);
    int fd = open(fifo_path, O_RDONLY);
    char buf[16];
    if (fd >= 0 && read(fd, buf, sizeof buf) < 0)
        exit(1);
    close(fd);
    pthread_join(t, NULL);
    unlink(fifo_path);
}

__attribute__((noinline)) static void hold_the_loop_with_child(void)
{
    char seconds[32];
    snprintf(seconds, sizeof seconds, "%g", hold_s);
    pid_t child = fork();
    if (child == 0) {
        execlp("sleep", "sleep", seconds, (char *)NULL);
        _exit(127);
    }
    int status;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
}

static pthread_mutex_t ledger = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t holding;

static void *hold_the_ledger(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&ledger);
    pthread_barrier_wait(&holding);
    usleep((useconds_t)(hold_s * 1e6));
    pthread_mutex_unlock(&ledger);
    return NULL;
}

__attribute__((noinline)) static void hold_the_loop_with_lock(void)
{
    pthread_barrier_init(&holding, NULL, 2);
    pthread_t t;
    pthread_create(&t, NULL, hold_the_ledger, NULL);
    pthread_barrier_wait(&holding);
    pthread_mutex_lock(&ledger);
    pthread_mutex_unlock(&ledger);
    pthread_join(t, NULL);
    pthread_barrier_destroy(&holding);
}

/* ---- what every library's timer does ---- */

static unsigned long turns;
static double next_at = -1, end_at = -1;
static const char *next_kind; /* the rest of KINDS, NULL when all are done */

static bool idle(void)
{
    return strcmp(kinds, "none") == 0;
}

/* One hold, `kind` the start of a comma-separated list. */
static void hold_the_loop(const char *kind)
{
    size_t len = strcspn(kind, ",");
    char name[16];
    snprintf(name, sizeof name, "%.*s", (int)(len < sizeof name ? len : sizeof name - 1), kind);
    double start = now_s();
    if (strcmp(name, "sleep") == 0)
        hold_the_loop_with_sleep();
    else if (strcmp(name, "spin") == 0)
        hold_the_loop_with_spin();
    else if (strcmp(name, "http") == 0)
        hold_the_loop_with_http();
    else if (strcmp(name, "fifo") == 0)
        hold_the_loop_with_fifo();
    else if (strcmp(name, "child") == 0)
        hold_the_loop_with_child();
    else if (strcmp(name, "lock") == 0)
        hold_the_loop_with_lock();
    printf("held %s %.3f\n", name, now_s() - start);
    fflush(stdout);
}

/* One turn: 1 to go on, 0 when the loop should stop. */
static int on_tick(void)
{
    turns++;
    double now = now_s();
    if (turns == 3) {
        printf("ready %d\n", (int)getpid());
        fflush(stdout);
    }
    if (next_at < 0 && turns >= 3 && access(go_file, F_OK) == 0) {
        next_at = now + delay_s;
        next_kind = idle() ? NULL : kinds;
        if (idle())
            end_at = now + 60;
    }
    if (next_kind != NULL && next_at >= 0 && now >= next_at) {
        hold_the_loop(next_kind);
        const char *comma = strchr(next_kind, ',');
        next_kind = comma ? comma + 1 : NULL;
        next_at = now_s() + 1.2;
        if (next_kind == NULL)
            end_at = now_s() + 1.5;
    }
    if (end_at >= 0 && now >= end_at) {
        printf("done\n");
        fflush(stdout);
        return 0;
    }
    return 1;
}

static unsigned tick_ms(void)
{
    return idle() ? 1 : 20;
}

static void libevent_tick(evutil_socket_t fd, short what, void *base)
{
    (void)fd, (void)what;
    if (!on_tick())
        event_base_loopbreak(base);
}

static int run_libevent(void)
{
    struct event_base *base = event_base_new();
    struct event *timer = event_new(base, -1, EV_PERSIST, libevent_tick, base);
    struct timeval every = {0, (suseconds_t)tick_ms() * 1000};
    event_add(timer, &every);
    event_base_dispatch(base);
    event_free(timer);
    event_base_free(base);
    return 0;
}

static void libuv_tick(uv_timer_t *timer)
{
    if (!on_tick())
        uv_stop(timer->loop);
}

static int run_libuv(void)
{
    uv_loop_t *loop = uv_default_loop();
    uv_timer_t timer;
    uv_timer_init(loop, &timer);
    uv_timer_start(&timer, libuv_tick, tick_ms(), tick_ms());
    uv_run(loop, UV_RUN_DEFAULT);
    return 0;
}

static gboolean glib_tick(gpointer main_loop)
{
    if (on_tick())
        return G_SOURCE_CONTINUE;
    g_main_loop_quit(main_loop);
    return G_SOURCE_REMOVE;
}

static int run_glib(void)
{
    GMainLoop *main_loop = g_main_loop_new(NULL, FALSE);
    g_timeout_add(tick_ms(), glib_tick, main_loop);
    g_main_loop_run(main_loop);
    g_main_loop_unref(main_loop);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 7) {
        fprintf(stderr, "usage: loop-cell libevent|libuv|glib KINDS PORT GO_FILE DELAY HOLD\n");
        return 2;
    }
    library = argv[1];
    kinds = argv[2];
    port = atoi(argv[3]);
    go_file = argv[4];
    delay_s = atof(argv[5]);
    hold_s = atof(argv[6]);
    if (strcmp(library, "libevent") == 0)
        return run_libevent();
    if (strcmp(library, "libuv") == 0)
        return run_libuv();
    if (strcmp(library, "glib") == 0)
        return run_glib();
    fprintf(stderr, "loop-cell: unknown library %s\n", library);
    return 2;
}
