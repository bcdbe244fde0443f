/*
 * agent.c - `hangwatch run`: start the program with the observer preloaded,
 * learn its loop page, check it on the detector's schedule, and turn every
 * hang into a report.
 *
 * One thread, one ppoll() loop over two descriptors:
 *   - a signalfd for SIGCHLD (the program ended) and the termination signals
 *     we pass on to the program;
 *   - a datagram socket on which each monitored process registers its page
 *     (registration.h).
 * The ppoll timeout is the earliest next check any detector asked for, so the
 * agent sleeps exactly until something can have happened; the program is
 * never woken by it.
 *
 * A hang is handled synchronously: ptrace capture (the program is stopped for
 * well under a millisecond), then unwinding, symbolizing and writing, while
 * the program runs on.
 */
#include "agent.h"

#include <errno.h>
#include <dirent.h>
#include <elf.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../core/annealing.h"
#include "../core/duration.h"
#include "../core/events.h"
#include "../core/frame_gap.h"
#include "../core/ping_detector.h"
#include "../core/point_stack.h"
#include "../core/semaphore_detector.h"
#include "../core/stutter.h"
#include "../core/registration.h"
#include "../core/shared_page.h"
#include "../core/socket_name.h"
#include "capture.h"
#include "report.h"
#include "unwind.h"

#define MAX_WATCHED 1024
#define MAX_FRAMES 256
#define REGISTRATION_GRACE_NS 1000000000ull

#define MAX_STRETCH_REPORTS 16
#define HANG_END_POLL_NS 10000000ull       /* while hung, look for its end every 10 ms */
#define STUTTER_LOOK_NS 50000000ull        /* with --stutter, look at a loop every 50 ms */

/* Early sampling of one process's loop thread: a ring per busy stretch. */
typedef struct sampler {
    hw_sample_ring ring;
    hw_sample *samples;
    size_t *top_repeat;
    uint64_t seq;            /* the stretch the ring holds, 0 = none */
    uint64_t next_sample_ns;
    hw_symbolizer *sym;      /* kept for the stretch: maps rarely change */
} sampler;

/* One loop thread of a watched process: its slot, detector and hang state. */
typedef struct loop_watch {
    unsigned slot;              /* index in the process's page */
    pid_t tid;                  /* the thread, checked against /proc */
    hw_detector detector;
    uint64_t next_wake_ns;
    /* the stretch currently hung */
    bool hung;
    uint64_t hung_seq, hung_start_ns;
    uint64_t last_seen_hung_ns; /* the last look that found it still hung */
    uint64_t next_capture_ns;   /* next annealing check */
    hw_annealing anneal;
    unsigned stretch_reports;
    char *stretch_paths[MAX_STRETCH_REPORTS]; /* file names in the report directory */
    sampler *sampler; /* NULL unless early sampling is on */
    bool warned_unseen_wait;
    hw_stutter stutter; /* with --stutter */
    hw_semaphore_detector semaphore; /* with --detector semaphore */
    uint64_t semaphore_next_ns;      /* its next look (every 50 ms) */
    hw_stutter_verdict last_stutter;
    /* --detector ping (and the semaphore detector's ping while waiting) */
    hw_ping_detector ping;
    uint64_t ping_seq;  /* emulated answer: the loop's sequence at the post */
    bool ping_busy;     /* ... and whether it was busy then */
    /* --detector frame-gap */
    hw_frame_gap frames;       /* the emulated display link */
    uint64_t late_frames_seen; /* the library's late-tick count at the last look */
    uint64_t watch_start_ns;
    bool warned_no_frames;
} loop_watch;

typedef struct watched_process {
    pid_t pid;
    int pidfd; /* readable once the process has exited; -1 if unsupported */
    const hw_shared_page *page; /* read-only view of the process's page */
    char executable[256];       /* /proc/PID/exe at registration */
    uint64_t next_wake_ns;      /* earliest of its loops' */
    loop_watch *loops[HW_PAGE_SLOTS];
} watched_process;

typedef struct agent {
    const hw_agent_options *opts;
    int signal_fd;
    int registration_fd;
    char socket_name[64];
    sigset_t original_mask;
    struct sigaction original_sigpipe;
    pid_t child;
    bool child_done;
    int child_status;
    uint64_t started_ns;
    bool warned_unregistered;
    watched_process watched[MAX_WATCHED];
    size_t watched_count;
    unsigned report_serial;
    uint64_t last_report_bytes;
    int target_pidfd; /* attach mode: the watched program */
    int events_fd;    /* attach mode with callbacks: a datagram socket */
    struct sockaddr_un events_addr;
    socklen_t events_addr_len;
    bool done;        /* attach mode: stop now */
    bool pings_by_post; /* opts->pings_by_post, and the events socket to ask with */
    unsigned long dropped_reports;
    bool said_dropped;
} agent;

static uint64_t monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int64_t realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/* ---- start-up ---- */

static int open_registration_socket(agent *a)
{
    if (a->opts->socket_name) {
        if (strlen(a->opts->socket_name) < 2 || strlen(a->opts->socket_name) >= sizeof a->socket_name ||
            a->opts->socket_name[0] != '@')
            return -EINVAL;
        snprintf(a->socket_name, sizeof a->socket_name, "%s", a->opts->socket_name);
    } else {
        char tmp[37];
        hw_new_uuid(tmp);
        snprintf(a->socket_name, sizeof a->socket_name, "@hangwatch-%d-%.8s", (int)getpid(), tmp);
    }

    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -errno;
    int one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof one) != 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    struct sockaddr_un addr;
    socklen_t addr_len;
    int rc = hw_socket_address(a->socket_name, &addr, &addr_len);
    if (rc != 0 || bind(fd, (struct sockaddr *)&addr, addr_len) != 0) {
        int e = rc != 0 ? -rc : errno;
        close(fd);
        return -e;
    }
    a->registration_fd = fd;
    return 0;
}

static int open_signal_fd(agent *a)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGQUIT);
    if (sigprocmask(SIG_BLOCK, &set, &a->original_mask) != 0)
        return -errno;
    a->signal_fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    if (a->signal_fd < 0)
        return -errno;
    /* A closed stderr must not kill the agent (and with it the reports). */
    struct sigaction ign = {0};
    ign.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &ign, &a->original_sigpipe);
    return 0;
}

static char *preload_value(const char *preload_path)
{
    const char *existing = getenv("LD_PRELOAD");
    char *v = NULL;
    if (existing && *existing) {
        if (asprintf(&v, "%s:%s", preload_path, existing) < 0)
            return NULL;
    } else {
        v = strdup(preload_path);
    }
    return v;
}

/* The file execvp would run for `name`, or NULL. */
static char *resolve_program(const char *name)
{
    if (strchr(name, '/'))
        return strdup(name);
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/bin:/usr/bin:/bin";
    char *copy = strdup(path);
    char *result = NULL;
    for (char *save = NULL, *dir = copy ? strtok_r(copy, ":", &save) : NULL; dir; dir = strtok_r(NULL, ":", &save)) {
        char *candidate = NULL;
        if (asprintf(&candidate, "%s/%s", *dir ? dir : ".", name) < 0)
            break;
        if (access(candidate, X_OK) == 0) {
            result = candidate;
            break;
        }
        free(candidate);
    }
    free(copy);
    return result;
}

/* A 64-bit ELF executable without a PT_INTERP: no dynamic loader, so no
 * LD_PRELOAD.  Anything unreadable or not ELF counts as not static (a
 * script, whose interpreter is dynamic, is the usual case). */
static bool is_static_executable(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    Elf64_Ehdr eh;
    bool is_static = false;
    if (pread(fd, &eh, sizeof eh, 0) == (ssize_t)sizeof eh && memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 &&
        eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_phentsize == sizeof(Elf64_Phdr) && eh.e_phnum < 256) {
        is_static = true;
        for (unsigned i = 0; i < eh.e_phnum; i++) {
            Elf64_Phdr ph;
            if (pread(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + i * sizeof ph)) != (ssize_t)sizeof ph ||
                ph.p_type == PT_INTERP) {
                is_static = false;
                break;
            }
        }
    }
    close(fd);
    return is_static;
}

/* Fork and exec the program.  Exec failures come back through a pipe. */
static int start_program(agent *a)
{
    char *resolved = resolve_program(a->opts->argv[0]);
    if (resolved && is_static_executable(resolved) && !a->opts->quiet) {
        a->warned_unregistered = true; /* said here, more precisely */
        fprintf(stderr,
                "hangwatch: warning: %s is statically linked: the observer cannot be preloaded into it, so its "
                "hangs cannot be seen (see docs/limits.md)\n",
                resolved);
    }
    free(resolved);
    int errpipe[2];
    if (pipe2(errpipe, O_CLOEXEC) != 0)
        return -errno;
    char *preload = preload_value(a->opts->preload_path);
    if (!preload) {
        close(errpipe[0]);
        close(errpipe[1]);
        return -ENOMEM;
    }
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        free(preload);
        close(errpipe[0]);
        close(errpipe[1]);
        return -e;
    }
    if (pid == 0) {
        /* The program gets the signal state we were given, not ours. */
        sigaction(SIGPIPE, &a->original_sigpipe, NULL);
        sigprocmask(SIG_SETMASK, &a->original_mask, NULL);
        setenv("LD_PRELOAD", preload, 1);
        setenv(HW_ENV_AGENT_SOCKET, a->socket_name, 1);
        if (a->opts->every_wait_is_the_loop)
            setenv("HANGWATCH_WAIT_SITE", "any", 1);
        if (a->opts->all_loop_threads)
            setenv("HANGWATCH_THREADS", "loops", 1);
        if (a->opts->no_follow) {
            char self[32];
            snprintf(self, sizeof self, "%d", (int)getpid());
            setenv(HW_ENV_ONLY_PID, self, 1);
        }
        execvp(a->opts->argv[0], a->opts->argv);
        int e = errno;
        ssize_t w = write(errpipe[1], &e, sizeof e);
        (void)w;
        _exit(127);
    }
    free(preload);
    close(errpipe[1]);
    int child_errno = 0;
    ssize_t n;
    do
        n = read(errpipe[0], &child_errno, sizeof child_errno);
    while (n < 0 && errno == EINTR);
    close(errpipe[0]);
    if (n == (ssize_t)sizeof child_errno) {
        int status;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
            ;
        fprintf(stderr, "hangwatch: cannot run '%s': %s\n", a->opts->argv[0], strerror(child_errno));
        return -child_errno ? -child_errno : -ENOEXEC;
    }
    a->child = pid;
    return 0;
}

/* ---- registrations ---- */

static watched_process *find_watched(agent *a, pid_t pid)
{
    for (size_t i = 0; i < a->watched_count; i++)
        if (a->watched[i].pid == pid)
            return &a->watched[i];
    return NULL;
}

static void sampler_free(sampler *s)
{
    if (!s)
        return;
    if (s->sym)
        hw_symbolizer_free(s->sym);
    free(s->samples);
    free(s->top_repeat);
    free(s);
}

static sampler *sampler_new(size_t capacity)
{
    sampler *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->samples = calloc(capacity, sizeof *s->samples);
    s->top_repeat = calloc(capacity, sizeof *s->top_repeat);
    if (!s->samples || !s->top_repeat) {
        sampler_free(s);
        return NULL;
    }
    hw_ring_init(&s->ring, s->samples, s->top_repeat, capacity);
    return s;
}

static void loop_watch_free(loop_watch *l);
static void finish_process(agent *a, watched_process *w, uint64_t now, const char *end);

static void free_loops(watched_process *w)
{
    for (unsigned i = 0; i < HW_PAGE_SLOTS; i++) {
        loop_watch_free(w->loops[i]);
        w->loops[i] = NULL;
    }
}

static void forget_watched(agent *a, watched_process *w)
{
    if (w->pidfd >= 0)
        close(w->pidfd);
    free_loops(w);
    munmap((void *)w->page, HW_PAGE_SIZE);
    watched_process *last = &a->watched[--a->watched_count];
    if (w != last)
        *w = *last;
    memset(last, 0, sizeof *last); /* its pointers now belong to *w */
}

static bool page_is_valid(const hw_shared_page *page, pid_t sender)
{
    return page->magic == HW_PAGE_MAGIC && page->version == HW_PAGE_VERSION && page->page_size == HW_PAGE_SIZE &&
           page->slot_count == HW_PAGE_SLOTS && page->pid == sender;
}

static void accept_page(agent *a, int fd, const struct ucred *cred)
{
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < (off_t)HW_PAGE_SIZE)
        return;
    /* Only processes we could trace anyway may register. */
    if (cred->uid != getuid() && getuid() != 0)
        return;
    const hw_shared_page *page = mmap(NULL, HW_PAGE_SIZE, PROT_READ, MAP_SHARED, fd, 0);
    if (page == MAP_FAILED)
        return;
    if (!page_is_valid(page, cred->pid)) {
        munmap((void *)page, HW_PAGE_SIZE);
        return;
    }
    watched_process *w = find_watched(a, cred->pid);
    if (w) {
        /* Same pid again: the process exec'd a new image.  Start afresh. */
        finish_process(a, w, monotonic_ns(), "exec");
        free_loops(w);
        munmap((void *)w->page, HW_PAGE_SIZE);
        if (w->pidfd >= 0)
            close(w->pidfd);
    } else {
        if (a->watched_count == MAX_WATCHED) {
            munmap((void *)page, HW_PAGE_SIZE);
            return;
        }
        w = &a->watched[a->watched_count++];
    }
    memset(w, 0, sizeof *w);
    w->pidfd = (int)syscall(SYS_pidfd_open, cred->pid, 0);
    if (w->pidfd >= 0)
        fcntl(w->pidfd, F_SETFD, FD_CLOEXEC);
    w->pid = cred->pid;
    w->page = page;
    char link[64];
    snprintf(link, sizeof link, "/proc/%d/exe", (int)cred->pid);
    ssize_t n = readlink(link, w->executable, sizeof w->executable - 1);
    w->executable[n > 0 ? n : 0] = '\0';
    w->next_wake_ns = monotonic_ns(); /* look at it (and find its loops) now */
}

static void drain_registrations(agent *a)
{
    for (;;) {
        hw_registration msg;
        struct iovec iov = {&msg, sizeof msg};
        union {
            char buf[CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(4 * sizeof(int))];
            struct cmsghdr align;
        } control;
        struct msghdr mh = {0};
        mh.msg_iov = &iov;
        mh.msg_iovlen = 1;
        mh.msg_control = control.buf;
        mh.msg_controllen = sizeof control.buf;
        ssize_t n = recvmsg(a->registration_fd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return; /* EAGAIN: nothing more */
        }
        struct ucred cred = {0};
        bool have_cred = false;
        int fds[4];
        size_t nfds = 0;
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
            if (cm->cmsg_level != SOL_SOCKET)
                continue;
            if (cm->cmsg_type == SCM_CREDENTIALS && cm->cmsg_len >= CMSG_LEN(sizeof cred)) {
                memcpy(&cred, CMSG_DATA(cm), sizeof cred);
                have_cred = true;
            } else if (cm->cmsg_type == SCM_RIGHTS) {
                size_t count = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                for (size_t i = 0; i < count && nfds < 4; i++)
                    memcpy(&fds[nfds++], CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
            }
        }
        bool ok = n == (ssize_t)sizeof msg && !(mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) && have_cred && nfds == 1 &&
                  msg.magic == HW_REGISTRATION_MAGIC && msg.version == HW_PAGE_VERSION;
        if (ok)
            accept_page(a, fds[0], &cred);
        for (size_t i = 0; i < nfds; i++)
            close(fds[i]);
    }
}

/* ---- events for the C library's callbacks ---- */

const char *hw_detector_kind_name(hw_detector_kind kind)
{
    switch (kind) {
    case HW_DETECTOR_SEMAPHORE:
        return "semaphore";
    case HW_DETECTOR_PING:
        return "ping";
    case HW_DETECTOR_FRAME_GAP:
        return "frame_gap";
    case HW_DETECTOR_RUNLOOP:
    default:
        return "runloop";
    }
}

/* A message of `kind` about thread `tid`, everything else zero. */
static void start_message(hw_event_msg *m, uint32_t kind, pid_t tid)
{
    memset(m, 0, offsetof(hw_event_msg, report_path) + 1);
    m->magic = HW_EVENT_MAGIC;
    m->kind = kind;
    m->tid = (int32_t)tid;
}

static void send_message(agent *a, hw_event_msg *m, const char *path)
{
    size_t n = path ? strlen(path) : 0;
    if (n >= HW_EVENT_PATH_MAX)
        n = 0; /* too long to pass: the event goes without it */
    if (n)
        memcpy(m->report_path, path, n);
    m->report_path[n] = '\0';
    ssize_t sent = sendto(a->events_fd, m, offsetof(hw_event_msg, report_path) + n + 1, MSG_DONTWAIT | MSG_NOSIGNAL,
                          (struct sockaddr *)&a->events_addr, a->events_addr_len);
    (void)sent; /* a program that does not listen loses its events, nothing else */
}

static void send_event(agent *a, uint32_t kind, pid_t tid, uint64_t busy_ns, uint64_t final_ns, const char *path)
{
    if (a->events_fd < 0)
        return;
    hw_event_msg m;
    start_message(&m, kind, tid);
    m.busy_ns = busy_ns;
    m.final_ns = final_ns;
    send_message(a, &m, path);
}

/* Ask the program to post ping `token` to the loop in `slot`. */
static void send_ping(agent *a, const loop_watch *l)
{
    if (a->events_fd < 0)
        return;
    hw_event_msg m;
    start_message(&m, HW_EVENT_PING, l->tid);
    m.slot = l->slot;
    m.token = l->ping.token;
    send_message(a, &m, NULL);
}

static int open_events_socket(agent *a, const char *name)
{
    if (name[0] != '@')
        return -EINVAL;
    int rc = hw_socket_address(name, &a->events_addr, &a->events_addr_len);
    if (rc != 0)
        return rc;
    a->events_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    return a->events_fd >= 0 ? 0 : -errno;
}

/* If the capture saw our own child exit and consumed its status, keep it. */
static void note_child_exit(agent *a, const watched_process *w, const hw_process_snapshot *snap)
{
    if (snap->process_exited && snap->reaped && w->pid == a->child && !a->child_done) {
        a->child_done = true;
        a->child_status = snap->exit_status;
    }
}

/* Stop only thread `tid` of the process (a sample, an annealing check). */
static void capture_thread(agent *a, const watched_process *w, pid_t tid, hw_process_snapshot *snap)
{
    hw_capture_options copt;
    hw_capture_options_default(&copt, tid);
    copt.all_threads = false;
    hw_capture_process(w->pid, &copt, snap);
    note_child_exit(a, w, snap);
}

/* ---- early sampling ---- */

/* Take one sample of the loop thread into the ring. */
static void take_sample(agent *a, watched_process *w, loop_watch *l, uint64_t now)
{
    pid_t tid = l->tid;
    sampler *s = l->sampler;
    hw_process_snapshot snap;
    capture_thread(a, w, tid, &snap);
    if (!s->sym && snap.maps)
        s->sym = hw_symbolizer_new(w->pid, snap.maps, snap.maps_len, NULL);
    for (size_t i = 0; s->sym && i < snap.thread_count; i++) {
        if (!snap.threads[i].is_target || snap.threads[i].status != HW_THREAD_CAPTURED)
            continue;
        hw_backtrace bt = {0};
        hw_unwind_thread(s->sym, &snap.threads[i], HW_SAMPLE_MAX_FRAMES, &bt);
        uint64_t pcs[HW_SAMPLE_MAX_FRAMES];
        size_t n = 0;
        for (; n < bt.count && n < HW_SAMPLE_MAX_FRAMES; n++)
            pcs[n] = bt.frames[n].instruction_addr;
        /* Runs are counted per top *function*: a spin moves its pc. */
        uint64_t top_key = 0;
        if (bt.count > 0)
            top_key = bt.frames[0].symbol_name ? bt.frames[0].symbol_addr : bt.frames[0].instruction_addr;
        if (n > 0)
            hw_ring_add(&s->ring, pcs, n, top_key, now);
        hw_backtrace_free(&bt);
    }
    hw_process_snapshot_free(&snap);
}

/* Sample if one is due for the current busy stretch; returns when the next
 * one is due (UINT64_MAX while the loop waits: nothing to sample). */
static uint64_t sample_if_due(agent *a, watched_process *w, loop_watch *l, const hw_loop_reading *r, uint64_t now)
{
    sampler *s = l->sampler;
    uint64_t interval = a->opts->sample_interval_ns;
    if (!r->busy) {
        s->seq = 0;
        return now + interval; /* look again soon: the next stretch's first sample */
    }
    if (s->seq != r->seq) {
        /* A new stretch: a new ring (an idle stack is the wait call). */
        hw_ring_clear(&s->ring);
        if (s->sym) {
            hw_symbolizer_free(s->sym);
            s->sym = NULL;
        }
        s->seq = r->seq;
        s->next_sample_ns = r->busy_start_ns + interval;
    }
    if (now >= s->next_sample_ns) {
        take_sample(a, w, l, now);
        s->next_sample_ns += interval;
        if (s->next_sample_ns <= now)
            s->next_sample_ns = now + interval;
    }
    return s->next_sample_ns;
}

/* Function keys of the newest sample, for annealing; 0 if none. */
static size_t newest_sample_keys(sampler *s, uint64_t *keys, size_t max)
{
    if (!s || s->ring.count == 0 || !s->sym)
        return 0;
    const hw_sample *newest = hw_ring_at(&s->ring, s->ring.count - 1);
    size_t n = 0;
    for (; n < newest->depth && n < max; n++) {
        hw_frame f = {0};
        hw_symbolize_frame(s->sym, newest->pcs[n], n == 0, &f);
        keys[n] = f.symbol_name ? f.symbol_addr : f.instruction_addr;
        hw_frame_clear(&f);
    }
    return n;
}

/* ---- hang handling ---- */

static const char *frame_label(const hw_frame *f, char *buf, size_t len)
{
    if (f->symbol_name)
        return f->symbol_name;
    if (f->object_path) {
        const char *base = strrchr(f->object_path, '/');
        snprintf(buf, len, "%s+0x%" PRIx64, base ? base + 1 : f->object_path, f->object_offset);
    } else {
        snprintf(buf, len, "0x%" PRIx64, f->instruction_addr);
    }
    return buf;
}

static void say_hang(const agent *a, const hw_process_snapshot *snap, const hw_backtrace *bt, const hw_check *c,
                     const char *path, const char *failure)
{
    if (a->opts->quiet)
        return;
    char busy[32], thr[32];
    hw_format_duration(c->busy_ns / 1000000 * 1000000, busy, sizeof busy);
    hw_format_duration(a->opts->detector.threshold_ns, thr, sizeof thr);
    char frames[512] = "";
    size_t used = 0;
    for (size_t i = 0; bt && i < bt->count && i < 5; i++) {
        char tmp[128];
        int n = snprintf(frames + used, sizeof frames - used, "%s%s", i ? " < " : "",
                         frame_label(&bt->frames[i], tmp, sizeof tmp));
        if (n < 0 || (size_t)n >= sizeof frames - used)
            break;
        used += (size_t)n;
    }
    char who[64] = "main thread";
    for (size_t i = 0; i < snap->thread_count; i++)
        if (snap->threads[i].is_target && !snap->threads[i].is_main)
            snprintf(who, sizeof who, "thread %d (%s)", (int)snap->threads[i].tid, snap->threads[i].name);
    /* What the detector measured: a busy stretch, an unanswered ping, or the
     * gap a late frame tick left (the hang is over by then). */
    const char *measured = a->opts->detector_kind == HW_DETECTOR_PING        ? "left a ping unanswered for"
                           : a->opts->detector_kind == HW_DETECTOR_FRAME_GAP ? "ran a frame tick late by"
                                                                             : "busy";
    fprintf(stderr, "hangwatch: %s in %s (pid %d): %s %s %s (threshold %s)%s%s; %s%s\n",
            c->stutter ? "stutter" : c->launch ? "launch hang" : "hang", snap->process_name, (int)snap->pid, who,
            measured, busy, thr,
            used ? " in " : ", no stack", frames, path ? "report " : "no report: ", path ? path : failure);
}

/* Function keys of a backtrace for the annealing comparison. */
static size_t function_keys(const hw_backtrace *bt, uint64_t *keys, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; bt && i < bt->count && n < max; i++) {
        const hw_frame *f = &bt->frames[i];
        keys[n++] = f->symbol_name ? f->symbol_addr : f->instruction_addr;
    }
    return n;
}

/* The state letter of the thread ('R', 'S', 'T', 't', ...), '?' if gone. */
static char thread_state(pid_t pid, pid_t tid)
{
    hw_task_stat st;
    return hw_task_stat_read(pid, tid, &st) == 0 ? st.state : '?';
}

/* Matrix's daily limit and the directory cap: may this report be written? */
static bool report_allowed(agent *a)
{
    hw_report_dir_usage u = hw_report_dir_usage_now(a->opts->report_dir_handle);
    uint64_t expected = a->last_report_bytes > 8192 ? a->last_report_bytes : 8192;
    hw_limit_verdict v = hw_report_allowed(&a->opts->limits, &u, expected);
    if (v == HW_LIMIT_OK)
        return true;
    a->dropped_reports++;
    if (!a->said_dropped && !a->opts->quiet) {
        a->said_dropped = true;
        if (v == HW_LIMIT_DAILY)
            fprintf(stderr,
                    "hangwatch: %s already holds %u reports from the last 24 h (the daily limit): further hangs "
                    "are detected but not written (--daily-limit changes it)\n",
                    a->opts->report_dir, u.reports_last_day);
        else
            fprintf(stderr,
                    "hangwatch: %s would grow past its size cap of %llu bytes: further hangs are detected but not "
                    "written (--max-dir-size changes it)\n",
                    a->opts->report_dir, (unsigned long long)a->opts->limits.max_dir_bytes);
    }
    return false;
}

/* System calls an event loop waits in. */
static bool is_wait_syscall(long nr)
{
    switch (nr) {
    case SYS_poll:
    case SYS_ppoll:
    case SYS_select:
    case SYS_pselect6:
    case SYS_epoll_wait:
    case SYS_epoll_pwait:
#ifdef SYS_epoll_pwait2
    case SYS_epoll_pwait2:
#endif
#ifdef SYS_io_uring_enter
    case SYS_io_uring_enter:
#endif
        return true;
    default:
        return false;
    }
}

/* How the detector in force looks: "exact" or "periodic" for the runloop
 * detector; the semaphore and ping detectors look every period; the frame
 * gap is known when the late tick arrives. */
static const char *check_mode_name(const hw_agent_options *o)
{
    switch (o->detector_kind) {
    case HW_DETECTOR_SEMAPHORE:
    case HW_DETECTOR_PING:
        return "periodic";
    case HW_DETECTOR_FRAME_GAP:
        return "on_arrival";
    case HW_DETECTOR_RUNLOOP:
    default:
        return hw_check_mode_name(o->detector.mode);
    }
}

/* Capture, unwind and write one report of every thread. */
static void write_report(agent *a, watched_process *w, loop_watch *l, const hw_check *c)
{
    if (!report_allowed(a))
        return;
    pid_t tid = l->tid;
    int64_t detected_unix_ns = realtime_ns();
    hw_capture_options copt;
    hw_capture_options_default(&copt, tid);
    hw_process_snapshot snap;
    int rc = hw_capture_process(w->pid, &copt, &snap);
    if (rc < 0 && snap.process_name[0] == '\0')
        snprintf(snap.process_name, sizeof snap.process_name, "pid-%d", (int)w->pid);
    note_child_exit(a, w, &snap);

    char *sym_error = NULL;
    hw_symbolizer *sym = snap.maps ? hw_symbolizer_new(w->pid, snap.maps, snap.maps_len, &sym_error) : NULL;
    hw_backtrace *bts = calloc(snap.thread_count ? snap.thread_count : 1, sizeof *bts);
    const hw_backtrace *target_bt = NULL;
    for (size_t i = 0; bts && sym && i < snap.thread_count; i++) {
        if (snap.threads[i].status != HW_THREAD_CAPTURED)
            continue;
        hw_unwind_thread(sym, &snap.threads[i], MAX_FRAMES, &bts[i]);
        if (snap.threads[i].is_target)
            target_bt = &bts[i];
    }
    const hw_image *images = NULL;
    size_t image_count = sym ? hw_symbolizer_images(sym, &images) : 0;

    /* The first report of a hung stretch also seeds the annealing comparison. */
    if (l->hung && !l->anneal.have_saved) {
        uint64_t keys[HW_ANNEAL_MAX_FRAMES];
        size_t n = function_keys(target_bt, keys, HW_ANNEAL_MAX_FRAMES);
        hw_annealing_step(&l->anneal, keys, n);
    }

    /* Early sampling: the Point Stack of this stretch's ring. */
    hw_point_stack ps = {0};
    hw_frame ps_frames[HW_SAMPLE_MAX_FRAMES];
    unsigned ps_counts[HW_SAMPLE_MAX_FRAMES];
    const char *ms_state = "not_requested", *ms_reason = "disabled";
    sampler *smp = l->sampler;
    if (smp) {
        ms_state = "empty";
        ms_reason = "no_samples";
        long idx = smp->seq == c->seq ? hw_ring_point_stack(&smp->ring) : -1;
        if (idx >= 0 && smp->sym) {
            const hw_sample *chosen = hw_ring_at(&smp->ring, (size_t)idx);
            hw_ring_repeat_counts(&smp->ring, (size_t)idx, ps_counts);
            for (size_t i = 0; i < chosen->depth; i++)
                hw_symbolize_frame(smp->sym, chosen->pcs[i], i == 0, &ps_frames[i]);
            ps = (hw_point_stack){.frames = ps_frames,
                                  .repeat_counts = ps_counts,
                                  .frame_count = chosen->depth,
                                  .sample_count = smp->ring.count,
                                  .ring_capacity = smp->ring.capacity,
                                  .interval_ns = a->opts->sample_interval_ns,
                                  .chosen_index = (size_t)idx,
                                  .top_repeat = hw_ring_repeat_at(&smp->ring, (size_t)idx)};
            ms_state = "collected";
            ms_reason = "early_sampling";
        }
    }

    hw_hang_info info = {
        .detector = hw_detector_kind_name(a->opts->detector_kind),
        .check_mode = check_mode_name(a->opts),
        .hang_type = c->stutter ? "stutter" : c->launch ? "launch_hang" : "hang",
        .hung_tid = tid,
        .block_duration_ns = c->busy_ns,
        .threshold_ns = a->opts->detector.threshold_ns,
        .detected_unix_ns = detected_unix_ns,
        .main_thread_state = ms_state,
        .main_thread_reason = ms_reason,
        .executable = w->executable[0] ? w->executable : NULL,
        .stretch_report_index = l->stretch_reports,
        .point_stack = ps.frame_count ? &ps : NULL,
        .stutter_window_ns = c->stutter ? l->last_stutter.window_ns : 0,
        .stutter_busy_ns = l->last_stutter.busy_ns,
        .stutter_stalls = l->last_stutter.stalls,
    };
    char id[37];
    json_t *report = hw_report_build(&info, &snap, bts, images, image_count, id);
    char *path = NULL;
    const char *failure = "out of memory";
    char errbuf[256];
    if (report) {
        char file_name[128];
        time_t secs = (time_t)(detected_unix_ns / 1000000000);
        struct tm tm;
        gmtime_r(&secs, &tm);
        char stamp[32];
        strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
        snprintf(file_name, sizeof file_name, "hang-%s-%d-%u.json", stamp, (int)w->pid, ++a->report_serial);
        int wrc = hw_report_write(a->opts->report_dir_handle, file_name, report);
        if (wrc != 0) {
            snprintf(errbuf, sizeof errbuf, "cannot write to %s: %s", a->opts->report_dir, strerror(-wrc));
            failure = errbuf;
        } else if (asprintf(&path, "%s/%s", hw_report_dir_path(a->opts->report_dir_handle), file_name) < 0) {
            path = NULL;
        } else {
            uint64_t bytes;
            if (hw_report_dir_file_size(a->opts->report_dir_handle, file_name, &bytes) == 0)
                a->last_report_bytes = bytes;
            send_event(a, HW_EVENT_REPORT, tid, c->busy_ns, 0, path);
            if (l->hung && l->stretch_reports < MAX_STRETCH_REPORTS)
                l->stretch_paths[l->stretch_reports] = strdup(file_name);
        }
        json_decref(report);
    }
    if (l->hung) /* a hang's reports get its final duration later */
        l->stretch_reports++;
    say_hang(a, &snap, target_bt, c, path, failure);

    free(path);
    for (size_t i = 0; i < ps.frame_count; i++)
        hw_frame_clear(&ps_frames[i]);
    for (size_t i = 0; bts && i < snap.thread_count; i++)
        hw_backtrace_free(&bts[i]);
    free(bts);
    free(sym_error);
    if (sym)
        hw_symbolizer_free(sym);
    hw_process_snapshot_free(&snap);
}

/* Is the stretch reported as hung still going on? */
static bool still_hung(const watched_process *w, const loop_watch *l)
{
    hw_loop_reading r;
    return !hw_loop_read(&w->page->slots[l->slot], &r, 8) || (r.busy && r.seq == l->hung_seq);
}

/* A later check of a stretch already reported: Matrix's annealing. */
static void recheck_hang(agent *a, watched_process *w, loop_watch *l, const hw_check *c, uint64_t now)
{
    pid_t tid = l->tid;
    if (l->sampler && l->sampler->seq == c->seq && l->sampler->ring.count > 0) {
        /* With early sampling, Matrix filters on the newest sample. */
        uint64_t keys[HW_ANNEAL_MAX_FRAMES];
        size_t n = newest_sample_keys(l->sampler, keys, HW_ANNEAL_MAX_FRAMES);
        hw_anneal_decision d = hw_annealing_step(&l->anneal, keys, n);
        l->next_capture_ns = now + d.wait_periods * a->opts->detector.check_period_ns;
        if (d.report)
            write_report(a, w, l, c);
        return;
    }
    hw_process_snapshot snap;
    capture_thread(a, w, tid, &snap);
    uint64_t keys[HW_ANNEAL_MAX_FRAMES];
    size_t n = 0;
    hw_symbolizer *sym = snap.maps ? hw_symbolizer_new(w->pid, snap.maps, snap.maps_len, NULL) : NULL;
    for (size_t i = 0; sym && i < snap.thread_count; i++) {
        if (!snap.threads[i].is_target || snap.threads[i].status != HW_THREAD_CAPTURED)
            continue;
        hw_backtrace bt = {0};
        hw_unwind_thread(sym, &snap.threads[i], MAX_FRAMES, &bt);
        n = function_keys(&bt, keys, HW_ANNEAL_MAX_FRAMES);
        hw_backtrace_free(&bt);
    }
    if (sym)
        hw_symbolizer_free(sym);
    bool exited = snap.process_exited;
    hw_process_snapshot_free(&snap);
    if (exited || !still_hung(w, l))
        return; /* it ended meanwhile: the next look closes it */

    hw_anneal_decision d = hw_annealing_step(&l->anneal, keys, n);
    l->next_capture_ns = now + d.wait_periods * a->opts->detector.check_period_ns;
    if (d.report)
        write_report(a, w, l, c);
}

/* The stretch reported as hung is over: add its final duration. */
static void finish_hang(agent *a, loop_watch *l, uint64_t now, const char *end)
{
    /* It ended between the last look that saw it hung and now. */
    uint64_t final_ns = now > l->hung_start_ns ? now - l->hung_start_ns : 0;
    send_event(a, HW_EVENT_HANG_END, l->tid, 0, final_ns, NULL);
    uint64_t precision_ns = now > l->last_seen_hung_ns ? now - l->last_seen_hung_ns : 0;
    size_t kept = l->stretch_reports < MAX_STRETCH_REPORTS ? l->stretch_reports : MAX_STRETCH_REPORTS;
    for (size_t i = 0; i < kept; i++) {
        if (l->stretch_paths[i]) {
            int rc = hw_report_add_final_duration(a->opts->report_dir_handle, l->stretch_paths[i], final_ns,
                                                  precision_ns, end);
            if (rc != 0 && !a->opts->quiet)
                fprintf(stderr, "hangwatch: cannot add the final duration to %s/%s: %s\n",
                        hw_report_dir_path(a->opts->report_dir_handle), l->stretch_paths[i], strerror(-rc));
        }
        free(l->stretch_paths[i]);
        l->stretch_paths[i] = NULL;
    }
    l->hung = false;
    l->stretch_reports = 0;
    l->detector.next_check_ns = now; /* the detector resumes now, not late */
    hw_annealing_reset(&l->anneal);
}

/* A hang one of the comparison detectors found: it started at `start_ns`
 * and has lasted `busy_ns`.  Its reports get a final duration when
 * finish_hang() closes it. */
static void report_found_hang(agent *a, watched_process *w, loop_watch *l, const hw_loop_reading *r, uint64_t start_ns,
                              uint64_t busy_ns, uint64_t now)
{
    l->hung = true;
    l->hung_seq = r->seq;
    l->hung_start_ns = start_ns;
    l->last_seen_hung_ns = now;
    hw_annealing_reset(&l->anneal);
    send_event(a, HW_EVENT_HANG, l->tid, busy_ns, 0, NULL);
    hw_check c = {.verdict = HW_VERDICT_HANG, .seq = r->seq, .busy_start_ns = start_ns, .busy_ns = busy_ns};
    write_report(a, w, l, &c);
}

/*
 * The sub-thread ping (ping_detector.h).  A ping is posted by the program's
 * own post function when the C library was given one (answered when its
 * task stores the token in the slot); otherwise the loop's next pass
 * through its wait is the answer, as a task queued on it would run there.
 * `waiting_only`: post only while the loop waits (the semaphore detector's
 * ping, seeds/002).
 */
static void check_ping(agent *a, watched_process *w, loop_watch *l, const hw_loop_reading *r, uint64_t now,
                       bool waiting_only)
{
    const hw_loop_slot *slot = &w->page->slots[l->slot];
    bool answered = a->pings_by_post
                        ? atomic_load_explicit(&slot->ping_answered, memory_order_acquire) >= l->ping.token
                        : !l->ping_busy || r->seq != l->ping_seq;
    bool may_post = !waiting_only || (!r->busy && r->activity == HW_ACTIVITY_BEFORE_WAITING);
    /* A C-library loop that has not reported an activity yet, or has
     * exited, runs no tasks: it is not pinged, and a ping it owes counts as
     * answered. */
    bool loop_runs = (r->seq != 0 || r->activity != 0) && r->activity != HW_ACTIVITY_EXIT;
    answered = answered || !loop_runs;
    may_post = may_post && loop_runs;
    hw_ping_step_result res = hw_ping_step(&l->ping, now, answered, may_post);
    if (res.answered_late && l->hung)
        finish_hang(a, l, now, "ping_answered");
    if (res.missed)
        report_found_hang(a, w, l, r, l->ping.posted_ns, res.waited_ns, now);
    else if (l->hung)
        l->last_seen_hung_ns = now;
    if (res.post) {
        l->ping_seq = r->seq;
        l->ping_busy = r->busy;
        if (a->pings_by_post)
            send_ping(a, l);
    }
    l->next_wake_ns = l->ping.next_ns;
}

/*
 * The frame gap (frame_gap.h): the program's own ticks when the C library
 * reports them, else the agent's emulated display link.  A late tick is a
 * hang that is already over: it is reported and closed at once.
 */
static void check_frames(agent *a, watched_process *w, loop_watch *l, const hw_loop_reading *r, uint64_t now)
{
    uint64_t interval = a->opts->frame_interval_ns;
    l->next_wake_ns = now + interval;
    uint64_t gap = 0;
    if (a->opts->frames_from_loop) {
        const hw_loop_slot *slot = &w->page->slots[l->slot];
        uint64_t late = atomic_load_explicit(&slot->late_frames, memory_order_acquire);
        if (late != l->late_frames_seen) {
            l->late_frames_seen = late;
            gap = atomic_load_explicit(&slot->late_frame_gap_ns, memory_order_relaxed);
        }
        if (!l->warned_no_frames && now > l->watch_start_ns + REGISTRATION_GRACE_NS &&
            atomic_load_explicit(&slot->frames, memory_order_relaxed) == 0) {
            l->warned_no_frames = true;
            if (!a->opts->quiet)
                fprintf(stderr,
                        "hangwatch: warning: the frame-gap detector has had no frame from thread %d's loop after 1 s: "
                        "call hangwatch_loop_frame() from a timer on it (docs/api.md)\n",
                        (int)l->tid);
        }
    } else {
        gap = hw_frame_gap_look(&l->frames, r, now);
    }
    if (gap == 0)
        return;
    if (gap > now)
        gap = now; /* the page is the program's: never trust it to make sense */
    report_found_hang(a, w, l, r, now - gap, gap, now);
    /* It ended at the late tick, within one interval before this look. */
    l->last_seen_hung_ns = now > interval ? now - interval : 0;
    finish_hang(a, l, now, "returned_to_wait");
    l->next_wake_ns = monotonic_ns() + interval;
}

/* Is stretch `seq` of this loop the process's launch?  Only the preloaded
 * observer's main thread starts busy at process start (its page says so);
 * the C library's loops and the other threads' slots start waiting, so
 * their first stretch is an ordinary one. */
static bool is_launch(const watched_process *w, const loop_watch *l, uint64_t seq)
{
    return seq == 1 && l->slot == 0 &&
           (atomic_load_explicit(&w->page->flags, memory_order_acquire) & HW_PAGE_FLAG_LAUNCHING) != 0;
}

static void check_loop(agent *a, watched_process *w, loop_watch *l, hw_loop_reading r, uint64_t now)
{
    pid_t tid = l->tid;
    switch (a->opts->detector_kind) {
    case HW_DETECTOR_SEMAPHORE: {
        /* The seeds' semaphore detector, as it was: every 50 ms, and the
         * ping while the loop waits. */
        if (now >= l->semaphore_next_ns) {
            l->semaphore_next_ns = now + l->semaphore.interval_ns;
            if (hw_semaphore_step(&l->semaphore, &r)) {
                hw_check c = {.verdict = HW_VERDICT_HANG, .seq = r.seq, .busy_start_ns = r.busy_start_ns,
                              .busy_ns = r.busy && now > r.busy_start_ns ? now - r.busy_start_ns : 0};
                write_report(a, w, l, &c);
            }
        }
        check_ping(a, w, l, &r, now, true);
        if (l->semaphore_next_ns < l->next_wake_ns)
            l->next_wake_ns = l->semaphore_next_ns;
        return;
    }
    case HW_DETECTOR_PING:
        check_ping(a, w, l, &r, now, false);
        return;
    case HW_DETECTOR_FRAME_GAP:
        check_frames(a, w, l, &r, now);
        return;
    case HW_DETECTOR_RUNLOOP:
    default:
        break;
    }
    if (l->hung) {
        if (r.seq == l->hung_seq) {
            l->last_seen_hung_ns = now;
            if (now >= l->next_capture_ns) {
                hw_check c = {.verdict = HW_VERDICT_STILL_HUNG, .seq = r.seq, .busy_start_ns = l->hung_start_ns,
                              .busy_ns = now - l->hung_start_ns, .launch = is_launch(w, l, r.seq)};
                recheck_hang(a, w, l, &c, now);
            }
            uint64_t end_poll = now + HANG_END_POLL_NS;
            l->next_wake_ns = end_poll < l->next_capture_ns ? end_poll : l->next_capture_ns;
            return;
        }
        finish_hang(a, l, now, "returned_to_wait");
    }

    hw_check c = hw_detector_check(&l->detector, &r, now);
    c.launch = c.launch && is_launch(w, l, r.seq);
    l->next_wake_ns = l->detector.next_check_ns;
    if (a->opts->stutter && c.verdict != HW_VERDICT_HANG) {
        hw_stutter_verdict v = hw_stutter_observe(&l->stutter, &r, now);
        if (v.stutter && r.busy) {
            /* Stuck in one of the stalls right now: capture it. */
            l->last_stutter = v;
            hw_check sc = c;
            sc.stutter = true;
            sc.launch = false;
            write_report(a, w, l, &sc);
        }
        if (now + STUTTER_LOOK_NS < l->next_wake_ns)
            l->next_wake_ns = now + STUTTER_LOOK_NS;
    }
    if (c.verdict != HW_VERDICT_HANG)
        return;

    /* A stopped process (SIGSTOP, job control, a debugger) is not hung: its
     * loop cannot run.  Restart its busy clock and look again later. */
    char state = thread_state(w->pid, tid);
    /* A process that has never reached a loop and is waiting for a child
     * (a shell, make, a wrapper script) is supervising, not launching: the
     * child is watched on its own. */
    long blocked_in = c.launch ? hw_task_syscall(w->pid, tid) : -1;
    bool supervising = blocked_in == SYS_wait4 || blocked_in == SYS_waitid;
    /* Still "launching" but blocked in a wait system call that never went
     * through glibc's wrappers: a raw syscall() or io_uring loop the
     * observer cannot see.  Say so instead of reporting a launch hang. */
    bool unseen_wait = is_wait_syscall(blocked_in) || (c.launch && l->warned_unseen_wait);
    if (unseen_wait && !l->warned_unseen_wait) {
        l->warned_unseen_wait = true; /* also with --quiet: it keeps later launch checks quiet */
        if (!a->opts->quiet)
            fprintf(stderr,
                "hangwatch: warning: pid %d waits in system call %ld without going through glibc's wrappers (a raw "
                    "syscall() or io_uring loop): its loop cannot be observed and its hangs cannot be seen (see "
                    "docs/limits.md)\n",
                    (int)w->pid, blocked_in);
    }
    if (state == 'T' || state == 't' || supervising || unseen_wait) {
        hw_detector_restart_clock(&l->detector, r.seq, now);
        l->next_wake_ns = now + hw_detector_poll_interval(&a->opts->detector);
        return;
    }

    l->hung = true;
    l->hung_seq = r.seq;
    l->last_seen_hung_ns = now;
    send_event(a, HW_EVENT_HANG, l->tid, c.busy_ns, 0, NULL);
    l->hung_start_ns = c.busy_start_ns;
    hw_annealing_reset(&l->anneal);
    write_report(a, w, l, &c);
    l->next_capture_ns = monotonic_ns() + a->opts->detector.check_period_ns;
    l->next_wake_ns = now + HANG_END_POLL_NS;
}

static loop_watch *loop_watch_new(agent *a, const watched_process *w, unsigned slot, pid_t tid, uint64_t now)
{
    loop_watch *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    l->slot = slot;
    l->tid = tid;
    hw_detector_init(&l->detector, &a->opts->detector, now);
    l->next_wake_ns = l->detector.next_check_ns;
    hw_annealing_reset(&l->anneal);
    if (a->opts->early_sampling)
        l->sampler = sampler_new(a->opts->ring_size);
    hw_stutter_config scfg;
    hw_stutter_config_default(&scfg, a->opts->detector.threshold_ns);
    hw_stutter_init(&l->stutter, &scfg, now);
    hw_semaphore_init(&l->semaphore);
    hw_ping_init(&l->ping, a->opts->detector.threshold_ns, now);
    hw_frame_gap_init(&l->frames, a->opts->detector.threshold_ns);
    l->late_frames_seen = atomic_load_explicit(&w->page->slots[slot].late_frames, memory_order_acquire);
    l->watch_start_ns = now;
    return l;
}

static void loop_watch_free(loop_watch *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < MAX_STRETCH_REPORTS; i++)
        free(l->stretch_paths[i]);
    sampler_free(l->sampler);
    free(l);
}

/* Does thread `tid` belong to process `pid`?  (The page says so; check.) */
static bool thread_of(pid_t pid, pid_t tid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task/%d", (int)pid, (int)tid);
    struct stat st;
    return tid > 0 && stat(path, &st) == 0;
}

/* The loop threads the page announces: slot 0 (the main thread) always,
 * the others with --threads=loops.  A slot whose thread changed starts
 * afresh. */
static void refresh_loops(agent *a, watched_process *w, uint64_t now)
{
    unsigned slots = a->opts->all_loop_threads ? HW_PAGE_SLOTS : 1;
    for (unsigned i = 0; i < slots; i++) {
        pid_t tid = i == 0 ? w->pid : (pid_t)atomic_load_explicit(&w->page->slots[i].tid, memory_order_acquire);
        loop_watch *l = w->loops[i];
        if (l && l->tid == tid)
            continue;
        if (l) {
            if (l->hung)
                finish_hang(a, l, now, "thread_exited");
            loop_watch_free(l);
            w->loops[i] = NULL;
        }
        if (tid > 0 && (i == 0 || thread_of(w->pid, tid)))
            w->loops[i] = loop_watch_new(a, w, i, tid, now);
    }
}

static void check_process(agent *a, watched_process *w, uint64_t now)
{
    refresh_loops(a, w, now);
    w->next_wake_ns = UINT64_MAX;
    for (unsigned i = 0; i < HW_PAGE_SLOTS; i++) {
        loop_watch *l = w->loops[i];
        if (!l)
            continue;
        if (l->next_wake_ns <= now) {
            hw_loop_reading r;
            if (!hw_loop_read(&w->page->slots[i], &r, 8)) {
                l->next_wake_ns = now + 1000000; /* turning over fast: look again soon */
            } else {
                uint64_t sample_at = l->sampler ? sample_if_due(a, w, l, &r, now) : UINT64_MAX;
                check_loop(a, w, l, r, now);
                if (sample_at < l->next_wake_ns)
                    l->next_wake_ns = sample_at;
            }
        }
        if (l->next_wake_ns < w->next_wake_ns)
            w->next_wake_ns = l->next_wake_ns;
    }
    /* New loop threads are found on the next look. */
    uint64_t rescan = now + hw_detector_poll_interval(&a->opts->detector);
    if (a->opts->all_loop_threads && rescan < w->next_wake_ns)
        w->next_wake_ns = rescan;
}

/* Close the hangs of a process that is gone (or that we stop watching): a
 * stretch its page shows already over ended by returning to its wait. */
static void finish_process(agent *a, watched_process *w, uint64_t now, const char *end)
{
    for (unsigned i = 0; i < HW_PAGE_SLOTS; i++) {
        loop_watch *l = w->loops[i];
        if (!l || !l->hung)
            continue;
        hw_loop_reading r;
        bool over = hw_loop_read(&w->page->slots[i], &r, 8) && r.seq != l->hung_seq;
        finish_hang(a, l, now, over ? "returned_to_wait" : end);
    }
}

/* ---- the loop ---- */

static void reap_children(agent *a)
{
    for (;;) {
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid <= 0)
            return;
        if (pid == a->child && !a->child_done) {
            a->child_done = true;
            a->child_status = status;
        }
        watched_process *w = find_watched(a, pid);
        if (w) {
            finish_process(a, w, monotonic_ns(), "process_exited");
            forget_watched(a, w);
        }
    }
}

static void handle_signals(agent *a)
{
    struct signalfd_siginfo si;
    while (read(a->signal_fd, &si, sizeof si) == (ssize_t)sizeof si) {
        if (si.ssi_signo == SIGCHLD)
            continue; /* reaped below */
        /* Signals from the terminal reach the program by themselves (same
         * process group); pass on only those a process sent to us. */
        if (a->opts->attach_pid > 0) {
            a->done = true; /* attach mode: any termination signal ends us */
            continue;
        }
        bool from_process = si.ssi_code == SI_USER || si.ssi_code == SI_QUEUE || si.ssi_code == SI_TKILL;
        if (from_process && a->child > 0 && !a->child_done)
            kill(a->child, (int)si.ssi_signo);
    }
    reap_children(a);
}

static int exit_code_for(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return 1;
}

int hw_agent_run(const hw_agent_options *opts)
{
    agent *a = calloc(1, sizeof *a);
    if (!a) {
        fprintf(stderr, "hangwatch: out of memory\n");
        return 2;
    }
    a->opts = opts;
    a->signal_fd = a->registration_fd = -1;
    int rc = open_signal_fd(a);
    if (rc == 0)
        rc = open_registration_socket(a);
    if (rc != 0) {
        fprintf(stderr, "hangwatch: cannot set up the agent: %s\n", strerror(-rc));
        free(a);
        return 2;
    }
    a->started_ns = monotonic_ns();
    a->target_pidfd = -1;
    a->events_fd = -1;
    if (opts->attach_pid > 0 && opts->events_socket && open_events_socket(a, opts->events_socket) != 0)
        fprintf(stderr, "hangwatch: cannot send events to %s: callbacks are off%s\n", opts->events_socket,
                opts->pings_by_post ? ", and pings are answered at the loop's next wait" : "");
    a->pings_by_post = opts->pings_by_post && a->events_fd >= 0;
    if (opts->attach_pid > 0) {
        /* Watch a running program (the C library started us). */
        a->target_pidfd = (int)syscall(SYS_pidfd_open, opts->attach_pid, 0);
        a->warned_unregistered = true;
        int32_t self = (int32_t)getpid();
        if (opts->ready_fd >= 0) {
            ssize_t w = write(opts->ready_fd, &self, sizeof self);
            (void)w;
            close(opts->ready_fd);
        }
        rc = a->target_pidfd >= 0 ? 0 : -errno;
    } else {
        /* Orphaned descendants (a daemon's workers) are re-parented to us, so
         * they stay tracers' children and get reaped. */
        prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        rc = start_program(a);
    }
    /* Symbolizing must never reach for the network (debuginfod) while a
     * report is being made; the program keeps its own environment. */
    unsetenv("DEBUGINFOD_URLS");
    if (rc != 0) {
        if (opts->attach_pid > 0)
            fprintf(stderr, "hangwatch: cannot watch pid %d: %s\n", (int)opts->attach_pid, strerror(-rc));
        else if (rc != -ENOENT && rc != -EACCES && rc != -ENOEXEC && rc != -ENOTDIR && rc != -EISDIR)
            fprintf(stderr, "hangwatch: cannot start '%s': %s\n", opts->argv[0], strerror(-rc));
        close(a->signal_fd);
        close(a->registration_fd);
        free(a);
        return 2;
    }

    while (!a->child_done && !a->done) {
        uint64_t now = monotonic_ns();
        uint64_t next = now + 60ull * 1000000000ull;
        for (size_t i = 0; i < a->watched_count; i++)
            if (a->watched[i].next_wake_ns < next)
                next = a->watched[i].next_wake_ns;
        if (!a->warned_unregistered && a->watched_count == 0 && a->started_ns + REGISTRATION_GRACE_NS < next)
            next = a->started_ns + REGISTRATION_GRACE_NS;

        /* The agent's own descriptors, then one pidfd per watched process. */
        struct pollfd fds[2 + MAX_WATCHED];
        pid_t fd_pid[2 + MAX_WATCHED];
        nfds_t nfds = 2;
        fds[0] = (struct pollfd){a->signal_fd, POLLIN, 0};
        fds[1] = (struct pollfd){a->registration_fd, POLLIN, 0};
        if (a->target_pidfd >= 0) {
            fd_pid[nfds] = 0; /* the attached program itself */
            fds[nfds++] = (struct pollfd){a->target_pidfd, POLLIN, 0};
        }
        for (size_t i = 0; i < a->watched_count; i++) {
            if (a->watched[i].pidfd < 0)
                continue;
            fd_pid[nfds] = a->watched[i].pid;
            fds[nfds++] = (struct pollfd){a->watched[i].pidfd, POLLIN, 0};
        }
        uint64_t wait_ns = next > now ? next - now : 0;
        struct timespec ts = {(time_t)(wait_ns / 1000000000ull), (long)(wait_ns % 1000000000ull)};
        int n = ppoll(fds, nfds, &ts, NULL);
        if (n < 0 && errno != EINTR) {
            fprintf(stderr, "hangwatch: ppoll: %s\n", strerror(errno));
            break;
        }
        if (n > 0 && (fds[0].revents & POLLIN))
            handle_signals(a);
        if (n > 0 && (fds[1].revents & POLLIN))
            drain_registrations(a);
        for (nfds_t i = 2; n > 0 && i < nfds; i++) {
            if (!(fds[i].revents & (POLLIN | POLLHUP)))
                continue;
            if (fd_pid[i] == 0) {
                a->done = true; /* the attached program has ended */
                continue;
            }
            watched_process *gone = find_watched(a, fd_pid[i]);
            if (gone) {
                /* A watched process ended (our child or not). */
                finish_process(a, gone, monotonic_ns(), "process_exited");
                forget_watched(a, gone);
            }
        }
        if (a->child_done || a->done)
            break;

        now = monotonic_ns();
        for (size_t i = 0; i < a->watched_count && !a->child_done; i++)
            if (a->watched[i].next_wake_ns <= now)
                check_process(a, &a->watched[i], now);
        if (!a->warned_unregistered && a->watched_count == 0 && now >= a->started_ns + REGISTRATION_GRACE_NS) {
            a->warned_unregistered = true;
            fprintf(stderr,
                    "hangwatch: warning: '%s' has not registered a loop observer after 1 s; hangs in it cannot be "
                    "seen (a static binary, a program that clears LD_PRELOAD, or one that has not started its "
                    "loop yet; see docs/limits.md)\n",
                    opts->argv[0]);
        }
    }

    /* Wait for the program if the loop ended for another reason. */
    while (!a->child_done && opts->attach_pid <= 0) {
        int status;
        pid_t p = waitpid(a->child, &status, 0);
        if (p == a->child) {
            a->child_done = true;
            a->child_status = status;
        } else if (p < 0 && errno != EINTR) {
            break;
        }
    }
    int code = opts->attach_pid > 0 ? 0 : a->child_done ? exit_code_for(a->child_status) : 1;
    if (a->dropped_reports > 0 && !opts->quiet)
        fprintf(stderr, "hangwatch: %lu hang report%s not written because of the report limits\n",
                a->dropped_reports, a->dropped_reports == 1 ? " was" : "s were");
    while (a->watched_count > 0) {
        watched_process *w = &a->watched[0];
        finish_process(a, w, monotonic_ns(), w->pid == a->child ? "process_exited" : "agent_exited");
        forget_watched(a, w);
    }
    if (a->target_pidfd >= 0)
        close(a->target_pidfd);
    if (a->events_fd >= 0)
        close(a->events_fd); /* after the last hang-end events went out */
    close(a->signal_fd);
    close(a->registration_fd);
    free(a);
    return code;
}
