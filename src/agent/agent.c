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
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../core/duration.h"
#include "../core/registration.h"
#include "../core/shared_page.h"
#include "capture.h"
#include "report.h"
#include "unwind.h"

#define MAX_WATCHED 1024
#define MAX_FRAMES 256
#define REGISTRATION_GRACE_NS 1000000000ull

typedef struct watched_process {
    pid_t pid;
    const hw_shared_page *page; /* read-only view of the process's page */
    hw_detector detector;
    unsigned reports;
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
    char tmp[37];
    hw_new_uuid(tmp);
    snprintf(a->socket_name, sizeof a->socket_name, "@hangwatch-%d-%.8s", (int)getpid(), tmp);

    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -errno;
    int one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof one) != 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    struct sockaddr_un addr = {0};
    addr.sun_family = AF_UNIX;
    size_t n = strlen(a->socket_name);
    memcpy(addr.sun_path, a->socket_name, n);
    addr.sun_path[0] = '\0';
    if (bind(fd, (struct sockaddr *)&addr, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n)) != 0) {
        int e = errno;
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

/* Fork and exec the program.  Exec failures come back through a pipe. */
static int start_program(agent *a)
{
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

static void forget_watched(agent *a, watched_process *w)
{
    munmap((void *)w->page, HW_PAGE_SIZE);
    *w = a->watched[--a->watched_count];
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
        munmap((void *)w->page, HW_PAGE_SIZE);
    } else {
        if (a->watched_count == MAX_WATCHED) {
            munmap((void *)page, HW_PAGE_SIZE);
            return;
        }
        w = &a->watched[a->watched_count++];
    }
    memset(w, 0, sizeof *w);
    w->pid = cred->pid;
    w->page = page;
    hw_detector_init(&w->detector, &a->opts->detector, monotonic_ns());
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
    fprintf(stderr, "hangwatch: %s in %s (pid %d): main thread busy %s (threshold %s)%s%s; %s%s\n",
            c->launch ? "launch hang" : "hang", snap->process_name, (int)snap->pid, busy, thr,
            used ? " in " : ", no stack", frames, path ? "report " : "no report: ", path ? path : failure);
}

static void handle_hang(agent *a, watched_process *w, const hw_check *c, pid_t tid)
{
    int64_t detected_unix_ns = realtime_ns();
    hw_capture_options copt;
    hw_capture_options_default(&copt, tid);
    hw_process_snapshot snap;
    int rc = hw_capture_process(w->pid, &copt, &snap);
    if (rc < 0 && snap.thread_count == 0 && snap.process_exited == false && snap.process_name[0] == '\0') {
        /* The process is gone or cannot be looked at: still say so. */
        snprintf(snap.process_name, sizeof snap.process_name, "pid-%d", (int)w->pid);
    }
    if (snap.process_exited && snap.reaped && w->pid == a->child && !a->child_done) {
        a->child_done = true;
        a->child_status = snap.exit_status;
    }

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

    hw_hang_info info = {
        .detector = "runloop",
        .check_mode = hw_check_mode_name(a->opts->detector.mode),
        .hang_type = c->launch ? "launch_hang" : "hang",
        .hung_tid = tid,
        .block_duration_ns = c->busy_ns,
        .threshold_ns = a->opts->detector.threshold_ns,
        .detected_unix_ns = detected_unix_ns,
        .main_thread_state = "not_requested",
        .main_thread_reason = "disabled",
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
        int wrc = hw_report_write(a->opts->report_dir, file_name, report, &path);
        if (wrc != 0) {
            snprintf(errbuf, sizeof errbuf, "cannot write to %s: %s", a->opts->report_dir, strerror(-wrc));
            failure = errbuf;
        }
        json_decref(report);
    }
    w->reports++;
    say_hang(a, &snap, target_bt, c, path, failure);

    free(path);
    for (size_t i = 0; bts && i < snap.thread_count; i++)
        hw_backtrace_free(&bts[i]);
    free(bts);
    free(sym_error);
    if (sym)
        hw_symbolizer_free(sym);
    hw_process_snapshot_free(&snap);
}

static void check_process(agent *a, watched_process *w, uint64_t now)
{
    const hw_loop_slot *slot = &w->page->slots[0];
    hw_loop_reading r;
    if (!hw_loop_read(slot, &r, 8)) {
        w->detector.next_check_ns = now + 1000000; /* turning over fast: look again soon */
        return;
    }
    pid_t tid = (pid_t)atomic_load_explicit(&slot->tid, memory_order_relaxed);
    if (tid != w->pid)
        tid = w->pid; /* slot 0 is always the main thread; never trust the page */
    hw_check c = hw_detector_check(&w->detector, &r, now);
    if (c.verdict == HW_VERDICT_HANG)
        handle_hang(a, w, &c, tid);
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
        if (w)
            forget_watched(a, w);
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
    rc = start_program(a);
    /* Symbolizing must never reach for the network (debuginfod) while a
     * report is being made; the program keeps its own environment. */
    unsetenv("DEBUGINFOD_URLS");
    if (rc != 0) {
        if (rc != -ENOENT && rc != -EACCES && rc != -ENOEXEC && rc != -ENOTDIR && rc != -EISDIR)
            fprintf(stderr, "hangwatch: cannot start '%s': %s\n", opts->argv[0], strerror(-rc));
        close(a->signal_fd);
        close(a->registration_fd);
        free(a);
        return 2;
    }

    while (!a->child_done) {
        uint64_t now = monotonic_ns();
        uint64_t next = now + 60ull * 1000000000ull;
        for (size_t i = 0; i < a->watched_count; i++)
            if (a->watched[i].detector.next_check_ns < next)
                next = a->watched[i].detector.next_check_ns;
        if (!a->warned_unregistered && a->watched_count == 0 && a->started_ns + REGISTRATION_GRACE_NS < next)
            next = a->started_ns + REGISTRATION_GRACE_NS;

        struct pollfd fds[2] = {{a->signal_fd, POLLIN, 0}, {a->registration_fd, POLLIN, 0}};
        uint64_t wait_ns = next > now ? next - now : 0;
        struct timespec ts = {(time_t)(wait_ns / 1000000000ull), (long)(wait_ns % 1000000000ull)};
        int n = ppoll(fds, 2, &ts, NULL);
        if (n < 0 && errno != EINTR) {
            fprintf(stderr, "hangwatch: ppoll: %s\n", strerror(errno));
            break;
        }
        if (n > 0 && (fds[0].revents & POLLIN))
            handle_signals(a);
        if (n > 0 && (fds[1].revents & POLLIN))
            drain_registrations(a);
        if (a->child_done)
            break;

        now = monotonic_ns();
        for (size_t i = 0; i < a->watched_count && !a->child_done; i++)
            if (a->watched[i].detector.next_check_ns <= now)
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
    while (!a->child_done) {
        int status;
        pid_t p = waitpid(a->child, &status, 0);
        if (p == a->child) {
            a->child_done = true;
            a->child_status = status;
        } else if (p < 0 && errno != EINTR) {
            break;
        }
    }
    int code = a->child_done ? exit_code_for(a->child_status) : 1;
    while (a->watched_count > 0)
        forget_watched(a, &a->watched[0]);
    close(a->signal_fd);
    close(a->registration_fd);
    free(a);
    return code;
}
