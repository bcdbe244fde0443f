/*
 * hangwatch.c - the C library behind include/hangwatch.h.
 *
 * hangwatch_start() launches the agent (`hangwatch attach`) as a detached
 * grandchild in its own session, so it is never the program's child (the
 * program's own waitpid(-1) loops and SIGCHLD handlers never see it) and a
 * Ctrl-C aimed at the program does not reach it; the agent ends by itself
 * when the program does.  The program then allows the agent to ptrace it
 * (PR_SET_PTRACER, needed under Yama), creates its loop page and hands it
 * over exactly as the preloaded observer does (page_client.h).
 *
 * hangwatch_loop_activity() is the observer: the same inline state machine
 * as the preload's (loop_state.h), a few stores into the thread's slot;
 * hangwatch_loop_pause() and _resume() are a few more (an expected long
 * operation: the stretch ends at the pause, a new one starts at the
 * resume, and the slot says paused meanwhile).  It
 * stamps busy starts with CLOCK_MONOTONIC_COARSE, and its page says so
 * (shared_page.h): the agent that the library starts is never asked to
 * vouch for the time-stamp counter, and allows the coarse clock's slack.
 *
 * Stopping, and a fork in the program, replace the shared page by a private
 * one at the same address: loop handles held by the program keep working and
 * simply stop being watched, and a forked child can never write into its
 * parent's page.
 */
#include "hangwatch.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/abi/events.h"
#include "core/frame_gap.h"
#include "core/in_app.h"
#include "core/abi/loop_state.h"
#include "core/abi/shared_page.h"
#include "core/abi/socket_name.h"
#include "observer/coarse_clock.h"
#include "observer/page_client.h"

#define HW_API __attribute__((visibility("default")))
#define AGENT_START_TIMEOUT_MS 5000
#define AGENT_STOP_TIMEOUT_MS 2000
#define HW_LIB_MAX_IN_APP_RULES 64 /* the agent's bound on --in-app and --not-in-app */

#ifndef HW_INSTALLED_AGENT
#define HW_INSTALLED_AGENT "/usr/local/bin/hangwatch"
#endif

_Static_assert((int)HANGWATCH_ENTRY == (int)HW_ACTIVITY_ENTRY &&
                   (int)HANGWATCH_BEFORE_TIMERS == (int)HW_ACTIVITY_BEFORE_TIMERS &&
                   (int)HANGWATCH_BEFORE_SOURCES == (int)HW_ACTIVITY_BEFORE_SOURCES &&
                   (int)HANGWATCH_BEFORE_WAITING == (int)HW_ACTIVITY_BEFORE_WAITING &&
                   (int)HANGWATCH_AFTER_WAITING == (int)HW_ACTIVITY_AFTER_WAITING &&
                   (int)HANGWATCH_EXIT == (int)HW_ACTIVITY_EXIT,
               "public and internal activity values agree");

struct hangwatch_loop {
    hw_loop_slot *slot; /* NULL: not watched */
    _Atomic uint64_t ping_token; /* the ping posted last (events thread -> loop thread) */
    uint64_t last_frame_ns;      /* the loop thread's own: its previous frame tick */
    unsigned pause_depth;        /* the loop thread's own: pauses not yet resumed */
    bool busy_at_pause;          /* ... and whether the loop was busy at the first */
};

static struct {
    pthread_mutex_t lock; /* start, stop, register: never the hot path */
    bool started;
    bool atfork_installed;
    pid_t agent_pid;
    hw_shared_page *page;
    hangwatch_loop loops[HW_PAGE_SLOTS]; /* [0] is the main thread's */
    /* callbacks: a socket the agent sends events to, and the thread that
     * reads it and calls on_event */
    int events_fd;
    bool events_thread_running;
    pthread_t events_thread;
    hangwatch_event_fn on_event;
    void *user_data;
    /* the comparison detectors */
    hangwatch_post_fn post;
    void *post_data;
    _Atomic uint64_t threshold_ns;      /* read by hangwatch_loop_frame() */
    _Atomic uint64_t frame_interval_ns; /* 0 unless FRAME_GAP runs */
} g = {.lock = PTHREAD_MUTEX_INITIALIZER, .events_fd = -1};

static const char *detector_name(hangwatch_detector d)
{
    switch (d) {
    case HANGWATCH_DETECTOR_SEMAPHORE:
        return "semaphore";
    case HANGWATCH_DETECTOR_PING:
        return "ping";
    case HANGWATCH_DETECTOR_FRAME_GAP:
        return "frame-gap";
    case HANGWATCH_DETECTOR_RUNLOOP:
    default:
        return "runloop";
    }
}

/* Does the agent ask us to post pings (through the program's post function)? */
static bool posts_pings(const hangwatch_config *cfg)
{
    return cfg->post != NULL &&
           (cfg->detector == HANGWATCH_DETECTOR_PING || cfg->detector == HANGWATCH_DETECTOR_SEMAPHORE);
}

HW_API void hangwatch_config_init(hangwatch_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->check_mode = HANGWATCH_CHECK_EXACT;
}

/* Swap the shared page for a private zeroed one at the same address. */
static void detach_page(void)
{
    if (g.page == NULL)
        return;
    void *p = mmap(g.page, HW_PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    (void)p; /* on failure the old mapping stays: writes still land harmlessly in it */
    g.page = NULL;
}

static void on_fork_child(void)
{
    /* The event thread does not exist in the child; its socket is the
     * parent's business. */
    if (g.events_fd >= 0)
        close(g.events_fd);
    g.events_fd = -1;
    g.events_thread_running = false;
    /* The child is not watched: its loops write into a private page, and
     * its hangwatch_stop() must not end the parent's agent. */
    detach_page();
    g.started = false;
    g.agent_pid = 0;
    pthread_mutex_init(&g.lock, NULL);
}

/* The agent: the config's, $HANGWATCH_AGENT, the one installed next to this
 * library (found from where the library itself is), or the configured path. */
static const char *agent_path(const hangwatch_config *cfg, char *buf, size_t len)
{
    if (cfg->agent_path && *cfg->agent_path)
        return cfg->agent_path;
    const char *env = getenv("HANGWATCH_AGENT");
    if (env && *env)
        return env;
#ifdef HW_AGENT_FROM_LIBDIR
    Dl_info info;
    if (dladdr((void *)hangwatch_start, &info) != 0 && info.dli_fname != NULL) {
        const char *slash = strrchr(info.dli_fname, '/');
        if (slash != NULL) {
            snprintf(buf, len, "%.*s/%s", (int)(slash - info.dli_fname), info.dli_fname, HW_AGENT_FROM_LIBDIR);
            if (access(buf, X_OK) == 0)
                return buf;
        }
    }
#endif
    (void)buf;
    (void)len;
    return HW_INSTALLED_AGENT;
}

/* The agent's command line; strings live in `buf`. */
typedef struct argv_builder {
    char *argv[40 + 2 * HW_LIB_MAX_IN_APP_RULES];
    int argc;
    char buf[8192 + HW_LIB_MAX_IN_APP_RULES * 1040]; /* paths (report dir, metrics file), a DSN of up to
                                                        1 KiB and the in_app patterns */
    size_t used;
    bool overflow; /* something did not fit: the command line is not to be used */
} argv_builder;

static void arg(argv_builder *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void arg(argv_builder *b, const char *fmt, ...)
{
    if (b->argc >= (int)(sizeof b->argv / sizeof b->argv[0]) - 1 || b->used >= sizeof b->buf) {
        b->overflow = true;
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->buf + b->used, sizeof b->buf - b->used, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof b->buf - b->used) {
        b->overflow = true;
        return;
    }
    b->argv[b->argc++] = b->buf + b->used;
    b->argv[b->argc] = NULL;
    b->used += (size_t)n + 1;
}

static void build_argv(argv_builder *b, const hangwatch_config *cfg, const char *path, const char *socket_name,
                       const char *events_socket)
{
    memset(b, 0, sizeof *b);
    arg(b, "%s", path);
    arg(b, "attach");
    arg(b, "--pid=%d", (int)getpid());
    arg(b, "--socket=%s", socket_name);
    arg(b, "--ready-fd=3");
    if (cfg->threshold_ns)
        arg(b, "--threshold=%lluns", (unsigned long long)cfg->threshold_ns);
    if (cfg->check_period_ns)
        arg(b, "--check-period=%lluns", (unsigned long long)cfg->check_period_ns);
    arg(b, "--check-mode=%s", cfg->check_mode == HANGWATCH_CHECK_PERIODIC ? "periodic" : "exact");
    if (cfg->early_sampling)
        arg(b, "--early-sampling");
    if (cfg->sample_interval_ns)
        arg(b, "--sample-interval=%lluns", (unsigned long long)cfg->sample_interval_ns);
    if (cfg->ring_size)
        arg(b, "--ring-size=%u", cfg->ring_size);
    if (cfg->report_dir && *cfg->report_dir)
        arg(b, "--report-dir=%s", cfg->report_dir);
    if (cfg->daily_limit)
        arg(b, "--daily-limit=%u", cfg->daily_limit);
    if (cfg->max_report_dir_bytes)
        arg(b, "--max-dir-size=%llu", (unsigned long long)cfg->max_report_dir_bytes);
    if (cfg->quiet)
        arg(b, "--quiet");
    if (cfg->stutter)
        arg(b, "--stutter");
    arg(b, "--detector=%s", detector_name(cfg->detector));
    if (posts_pings(cfg))
        arg(b, "--pings-by-post");
    if (cfg->detector == HANGWATCH_DETECTOR_FRAME_GAP) {
        arg(b, "--frames-from-loop");
        if (cfg->frame_interval_ns)
            arg(b, "--frame-interval=%lluns", (unsigned long long)cfg->frame_interval_ns);
    }
    if (events_socket)
        arg(b, "--events-socket=%s", events_socket);
    if (cfg->metrics_listen && *cfg->metrics_listen)
        arg(b, "--metrics-listen=%s", cfg->metrics_listen);
    if (cfg->metrics_file && *cfg->metrics_file)
        arg(b, "--metrics-file=%s", cfg->metrics_file);
    if (cfg->sentry_dsn && *cfg->sentry_dsn)
        arg(b, "--sentry-dsn=%s", cfg->sentry_dsn);
    for (size_t i = 0; cfg->in_app && cfg->in_app[i]; i++)
        arg(b, "--in-app=%s", cfg->in_app[i]);
    for (size_t i = 0; cfg->not_in_app && cfg->not_in_app[i]; i++)
        arg(b, "--not-in-app=%s", cfg->not_in_app[i]);
}

/* Are the config's in_app rules usable: at most HW_LIB_MAX_IN_APP_RULES
 * patterns, each valid (core/in_app.h)? */
static bool in_app_rules_valid(const hangwatch_config *cfg)
{
    size_t n = 0;
    const char *why = NULL;
    for (int list = 0; list < 2; list++) {
        const char *const *rules = list == 0 ? cfg->in_app : cfg->not_in_app;
        for (size_t i = 0; rules && rules[i]; i++, n++)
            if (n >= HW_LIB_MAX_IN_APP_RULES || !hw_in_app_rule_valid(rules[i], &why))
                return false;
    }
    return true;
}

/* ---- callbacks, and pings ---- */

/* A ping's task, run by the program's loop: the ping is answered. */
static void answer_ping(void *arg)
{
    hangwatch_loop *loop = arg;
    if (loop->slot != NULL)
        atomic_store_explicit(&loop->slot->ping_answered,
                              atomic_load_explicit(&loop->ping_token, memory_order_relaxed), memory_order_release);
}

static void *events_main(void *arg)
{
    (void)arg;
    static hw_event_msg m; /* this thread's only */
    for (;;) {
        ssize_t n = recv(g.events_fd, &m, sizeof m - 1, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return NULL; /* shut down */
        if ((size_t)n < offsetof(hw_event_msg, report_path) + 1 || m.magic != HW_EVENT_MAGIC)
            continue;
        if (m.kind == 0)
            return NULL; /* hangwatch_stop(): every event before it was delivered */
        ((char *)&m)[n] = '\0'; /* the path is terminated whatever was sent */
        hangwatch_event ev = {
            .kind = (hangwatch_event_kind)m.kind,
            .thread_id = m.tid,
            .busy_ns = m.busy_ns,
            .final_duration_ns = m.final_ns,
            .report_path = m.report_path[0] ? m.report_path : NULL,
        };
        if (m.kind >= HW_EVENT_HANG && m.kind <= HW_EVENT_HANG_END && g.on_event)
            g.on_event(&ev, g.user_data);
        if (m.kind == HW_EVENT_PING && g.post && m.slot < HW_PAGE_SLOTS) {
            hangwatch_loop *loop = &g.loops[m.slot];
            atomic_store_explicit(&loop->ping_token, m.token, memory_order_relaxed);
            g.post(loop, answer_ping, loop, g.post_data);
        }
    }
}

/* Bind the socket the agent reports to; its name goes into `name`. */
static int open_events(char *name, size_t len, const char *base)
{
    snprintf(name, len, "%s-events", base);
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    struct sockaddr_un addr;
    socklen_t addr_len;
    int rc = hw_socket_address(name, &addr, &addr_len);
    if (rc != 0 || bind(fd, (struct sockaddr *)&addr, addr_len) != 0) {
        int e = rc != 0 ? -rc : errno;
        close(fd);
        return -e;
    }
    return fd;
}

static void close_events(void)
{
    if (g.events_fd < 0)
        return;
    /* A stop message queued behind the agent's last events: the thread
     * delivers those, then ends. */
    struct sockaddr_un self;
    socklen_t len = sizeof self;
    hw_event_msg stop = {.magic = HW_EVENT_MAGIC, .kind = 0};
    bool queued = getsockname(g.events_fd, (struct sockaddr *)&self, &len) == 0 &&
                  sendto(g.events_fd, &stop, offsetof(hw_event_msg, report_path) + 1, MSG_DONTWAIT,
                         (struct sockaddr *)&self, len) > 0;
    if (!queued)
        shutdown(g.events_fd, SHUT_RDWR); /* wakes the thread's recv() */
    if (g.events_thread_running)
        pthread_join(g.events_thread, NULL);
    g.events_thread_running = false;
    close(g.events_fd);
    g.events_fd = -1;
}

/*
 * Start the agent as a grandchild in a session of its own; it writes its
 * pid to fd 3 once it listens.  Returns its pid, or -errno.
 */
static pid_t spawn_agent(char *const argv[])
{
    int ready[2];
    if (pipe2(ready, O_CLOEXEC) != 0)
        return -errno;
    pid_t middle = fork();
    if (middle < 0) {
        int e = errno;
        close(ready[0]);
        close(ready[1]);
        return -e;
    }
    if (middle == 0) {
        /* Only async-signal-safe calls from here to exec. */
        if (fork() != 0)
            _exit(0); /* the agent is re-parented away from the program */
        setsid();
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        static const int reset[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGCHLD, SIGPIPE};
        for (size_t i = 0; i < sizeof reset / sizeof reset[0]; i++)
            signal(reset[i], SIG_DFL);
        if (dup2(ready[1], 3) < 0)
            _exit(127);
        execv(argv[0], argv);
        _exit(127);
    }
    close(ready[1]);
    while (waitpid(middle, NULL, 0) < 0 && errno == EINTR)
        ;
    struct pollfd pfd = {ready[0], POLLIN, 0};
    int32_t agent = 0;
    int n;
    do
        n = poll(&pfd, 1, AGENT_START_TIMEOUT_MS);
    while (n < 0 && errno == EINTR);
    ssize_t got = n > 0 ? read(ready[0], &agent, sizeof agent) : -1;
    close(ready[0]);
    if (n == 0)
        return -ETIMEDOUT;
    if (got != (ssize_t)sizeof agent || agent <= 0)
        return -ECHILD; /* it could not be started (exec failed, bad arguments) */
    return (pid_t)agent;
}

static void end_agent(pid_t agent)
{
    int pidfd = (int)syscall(SYS_pidfd_open, agent, 0);
    kill(agent, SIGTERM);
    if (pidfd < 0)
        return;
    struct pollfd pfd = {pidfd, POLLIN, 0};
    int n;
    do
        n = poll(&pfd, 1, AGENT_STOP_TIMEOUT_MS);
    while (n < 0 && errno == EINTR);
    if (n == 0)
        kill(agent, SIGKILL);
    close(pidfd);
}

HW_API int hangwatch_start(const hangwatch_config *cfg)
{
    hangwatch_config defaults;
    if (cfg == NULL) {
        hangwatch_config_init(&defaults);
        cfg = &defaults;
    }
    pthread_mutex_lock(&g.lock);
    int rc = 0;
    if (g.started) {
        rc = -EALREADY;
        goto out;
    }
    if ((unsigned)cfg->detector > HANGWATCH_DETECTOR_FRAME_GAP ||
        (cfg->stutter && cfg->detector != HANGWATCH_DETECTOR_RUNLOOP)) {
        rc = -EINVAL; /* an unknown detector, or stutter without the runloop detector */
        goto out;
    }
    if (!in_app_rules_valid(cfg)) {
        rc = -EINVAL; /* too many in_app patterns, or one the agent would refuse */
        goto out;
    }
    static char found[4096]; /* under g.lock */
    const char *path = agent_path(cfg, found, sizeof found);
    if (access(path, X_OK) != 0) {
        rc = -ENOENT;
        goto out;
    }
    unsigned char rnd[4] = {0};
    if (getrandom(rnd, sizeof rnd, GRND_NONBLOCK) != (ssize_t)sizeof rnd)
        memcpy(rnd, &(uint32_t){(uint32_t)hw_coarse_now_ns()}, sizeof rnd);
    char socket_name[64];
    snprintf(socket_name, sizeof socket_name, "@hangwatch-lib-%d-%02x%02x%02x%02x", (int)getpid(), rnd[0], rnd[1],
             rnd[2], rnd[3]);

    /* Fresh loop handles, before the event thread can post a ping to one. */
    for (unsigned i = 0; i < HW_PAGE_SLOTS; i++) {
        g.loops[i].slot = NULL;
        atomic_store_explicit(&g.loops[i].ping_token, 0, memory_order_relaxed);
        g.loops[i].last_frame_ns = 0;
        g.loops[i].pause_depth = 0;
        g.loops[i].busy_at_pause = false;
    }

    char events_name[96];
    bool need_events = cfg->on_event != NULL || posts_pings(cfg);
    g.post = posts_pings(cfg) ? cfg->post : NULL;
    g.post_data = cfg->post_data;
    atomic_store(&g.threshold_ns, cfg->threshold_ns ? cfg->threshold_ns : 2000000000ull);
    atomic_store(&g.frame_interval_ns, 0);
    if (need_events) {
        int fd = open_events(events_name, sizeof events_name, socket_name);
        if (fd < 0) {
            rc = fd;
            goto out;
        }
        g.events_fd = fd;
        g.on_event = cfg->on_event;
        g.user_data = cfg->user_data;
        if (pthread_create(&g.events_thread, NULL, events_main, NULL) != 0) {
            close_events();
            rc = -EAGAIN;
            goto out;
        }
        g.events_thread_running = true;
    }

    static argv_builder b; /* under g.lock */
    build_argv(&b, cfg, path, socket_name, need_events ? events_name : NULL);
    if (b.overflow) {
        /* never an agent started without some of what was asked */
        close_events();
        rc = -E2BIG;
        goto out;
    }
    pid_t agent = spawn_agent(b.argv);
    if (agent < 0) {
        close_events();
        rc = (int)agent;
        goto out;
    }
    prctl(PR_SET_PTRACER, (unsigned long)agent, 0, 0, 0); /* Yama: let it trace us */

    hw_shared_page *page = hw_page_publish(socket_name, HW_PAGE_CLOCK_COARSE, 0, 0);
    if (page == NULL) {
        end_agent(agent);
        close_events();
        rc = -EIO;
        goto out;
    }
    g.page = page;
    g.agent_pid = agent;
    if (!g.atfork_installed && pthread_atfork(NULL, NULL, on_fork_child) == 0)
        g.atfork_installed = true;
    if (cfg->detector == HANGWATCH_DETECTOR_FRAME_GAP)
        atomic_store(&g.frame_interval_ns,
                     cfg->frame_interval_ns ? cfg->frame_interval_ns : HW_FRAME_INTERVAL_DEFAULT_NS);
    g.started = true;
out:
    pthread_mutex_unlock(&g.lock);
    return rc;
}

HW_API void hangwatch_stop(void)
{
    pthread_mutex_lock(&g.lock);
    if (g.started) {
        detach_page();
        if (g.agent_pid > 0)
            end_agent(g.agent_pid);
        g.agent_pid = 0;
        close_events();
        atomic_store(&g.frame_interval_ns, 0);
        g.started = false;
    }
    pthread_mutex_unlock(&g.lock);
}

HW_API hangwatch_loop *hangwatch_loop_register(void)
{
    pthread_mutex_lock(&g.lock);
    hangwatch_loop *loop = NULL;
    if (g.started) {
        pid_t tid = (pid_t)syscall(SYS_gettid);
        if (tid == getpid()) {
            loop = &g.loops[0];
            loop->slot = &g.page->slots[0];
        } else {
            for (unsigned i = 1; i < HW_PAGE_SLOTS && loop == NULL; i++) {
                int32_t expected = 0;
                if (atomic_compare_exchange_strong(&g.page->slots[i].tid, &expected, (int32_t)tid)) {
                    loop = &g.loops[i];
                    loop->slot = &g.page->slots[i];
                }
            }
        }
    }
    pthread_mutex_unlock(&g.lock);
    return loop;
}

HW_API void hangwatch_loop_activity(hangwatch_loop *loop, hangwatch_activity activity)
{
    if (loop == NULL || loop->slot == NULL || !hw_activity_is_valid((uint32_t)activity) || loop->pause_depth > 0)
        return;
    bool may_start = activity == HANGWATCH_AFTER_WAITING || activity == HANGWATCH_BEFORE_TIMERS ||
                     activity == HANGWATCH_BEFORE_SOURCES;
    hw_observe(loop->slot, (hw_activity)activity, may_start ? hw_coarse_now_ns() : 0);
}

/* A pause marks the slot paused (for the comparison detectors and the
 * hang's end) and ends the busy stretch, as a wait would: the agent sees a
 * loop that is not busy, whatever it knows of pauses.  The resume starts a
 * new stretch, stamped now, if the loop was busy at the pause, then clears
 * the mark (release: an agent that sees it cleared sees the new stretch). */
HW_API void hangwatch_loop_pause(hangwatch_loop *loop)
{
    if (loop == NULL || loop->slot == NULL || loop->pause_depth++ > 0)
        return;
    hw_loop_slot *slot = loop->slot;
    loop->busy_at_pause = (atomic_load_explicit(&slot->seq, memory_order_relaxed) & 1u) != 0;
    atomic_store_explicit(&slot->paused, HW_LOOP_PAUSED, memory_order_release);
    hw_observe(slot, HW_ACTIVITY_BEFORE_WAITING, 0);
}

HW_API void hangwatch_loop_resume(hangwatch_loop *loop)
{
    if (loop == NULL || loop->slot == NULL || loop->pause_depth == 0 || --loop->pause_depth > 0)
        return;
    hw_loop_slot *slot = loop->slot;
    if (loop->busy_at_pause)
        hw_observe(slot, HW_ACTIVITY_AFTER_WAITING, hw_coarse_now_ns());
    loop->last_frame_ns = 0; /* no frame gap across the pause */
    atomic_store_explicit(&slot->paused, 0, memory_order_release);
}

HW_API void hangwatch_loop_unregister(hangwatch_loop *loop)
{
    if (loop == NULL || loop->slot == NULL)
        return;
    pthread_mutex_lock(&g.lock);
    hw_observe(loop->slot, HW_ACTIVITY_EXIT, 0);
    if (loop != &g.loops[0])
        atomic_store_explicit(&loop->slot->tid, 0, memory_order_release); /* the slot is free again */
    loop->slot = NULL;
    pthread_mutex_unlock(&g.lock);
}

HW_API void hangwatch_loop_frame(hangwatch_loop *loop)
{
    if (loop == NULL || loop->slot == NULL)
        return;
    hw_loop_slot *slot = loop->slot;
    if (loop->pause_depth > 0) {
        loop->last_frame_ns = 0; /* a tick during a pause (a nested loop's) measures nothing */
        return;
    }
    /* The precise clock (vDSO, no system call): a tick runs 60 times a
     * second, not on every loop turn, and a gap stamped with the coarse
     * clock can come out up to one tick short of the stall it spans. */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t now_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    uint64_t gap = hw_frame_tick(&loop->last_frame_ns, now_ns,
                                 atomic_load_explicit(&g.threshold_ns, memory_order_relaxed));
    /* Only this thread writes these: plain increments, published in order. */
    atomic_store_explicit(&slot->frames, atomic_load_explicit(&slot->frames, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    if (gap != 0) {
        atomic_store_explicit(&slot->late_frame_gap_ns, gap, memory_order_relaxed);
        atomic_store_explicit(&slot->late_frames, atomic_load_explicit(&slot->late_frames, memory_order_relaxed) + 1,
                              memory_order_release);
    }
}

HW_API uint64_t hangwatch_frame_interval_ns(void)
{
    return atomic_load_explicit(&g.frame_interval_ns, memory_order_relaxed);
}
