/*
 * admission.c - which processes the agent watches, and the only door by
 * which one gets in: a registration datagram on the agent's socket.
 *
 * The socket is abstract, so every local user can send to it, and the agent
 * may run as root: each datagram is treated as an attack until proven
 * otherwise (docs/security.md).  A registration is accepted only when
 *   - it is well formed (hw_registration_parse), with the kernel's
 *     credentials and, where the kernel has it (Linux 6.5), a pidfd of the
 *     sender itself (SO_PASSPIDFD);
 *   - the sender is alive and is the watched program or one of its
 *     descendants: its parent chain in /proc reaches the tree's root (the
 *     agent under `run`, since it is the program's parent and subreaper; the
 *     program itself under `attach`).  The sender's pidfd is checked again
 *     after that walk, so a sender that died meanwhile (its pid free for
 *     reuse) is refused too;
 *   - the page is a sealed memfd (tmpfs, F_SEAL_SHRINK: it can never shrink
 *     under the agent's mapping) carrying a valid header made by the sender.
 * Anything else is refused, counted, said once, and never ptraced.
 *
 * A page that faults anyway (SIGBUS) must not take the agent down: a guard
 * replaces the faulting page by a zero page and marks it; the watch loop
 * then drops that process.  A flood of datagrams cannot starve detection:
 * at most a few dozen are read per wake-up.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent/capture/capture.h"
#include "agent/common/random_id.h"
#include "agent/exports/metrics.h"
#include "core/abi/registration.h"
#include "core/abi/socket_name.h"
#include "watch.h"

#define MAX_DATAGRAMS_PER_WAKE 64
#define MAX_TREE_DEPTH 4096

#ifndef F_GET_SEALS
#define F_GET_SEALS 1034
#endif
#ifndef F_SEAL_SHRINK
#define F_SEAL_SHRINK 0x0002
#endif

/* ---- the SIGBUS guard ---- */

/* Pages mapped from watched processes, and which of them faulted.  Written
 * only by the watch thread, read by the handler on the faulting thread
 * (only the watch thread reads pages). */
static void *volatile g_guarded[MAX_WATCHED];
static volatile sig_atomic_t g_faulted[MAX_WATCHED];
static volatile sig_atomic_t g_any_faulted; /* some page faulted since the last sweep */

static void on_sigbus(int sig, siginfo_t *info, void *context)
{
    (void)context;
    uintptr_t addr = (uintptr_t)info->si_addr;
    for (size_t i = 0; i < MAX_WATCHED; i++) {
        uintptr_t page = (uintptr_t)g_guarded[i];
        if (page != 0 && addr >= page && addr < page + HW_PAGE_SIZE) {
            /* A zero page in its place: the read that faulted is retried
             * and sees an empty page; the watch loop drops the process. */
            void *p = mmap((void *)page, HW_PAGE_SIZE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
            if (p != MAP_FAILED) {
                g_faulted[i] = 1;
                g_any_faulted = 1;
                return;
            }
        }
    }
    /* Not one of ours: the default action (a real bug must not be hidden). */
    signal(sig, SIG_DFL);
}

void registry_install_fault_guard(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, NULL);
}

void registry_guard_page(const void *page)
{
    for (size_t i = 0; i < MAX_WATCHED; i++) {
        if (g_guarded[i] == NULL) {
            g_faulted[i] = 0;
            g_guarded[i] = (void *)page;
            return;
        }
    }
}

void registry_unguard_page(const void *page)
{
    for (size_t i = 0; i < MAX_WATCHED; i++) {
        if (g_guarded[i] == page) {
            g_guarded[i] = NULL;
            g_faulted[i] = 0;
        }
    }
}

bool registry_take_fault_news(void)
{
    bool any = g_any_faulted != 0;
    g_any_faulted = 0;
    return any;
}

bool registry_page_faulted(const watched_process *w)
{
    for (size_t i = 0; i < MAX_WATCHED; i++)
        if (g_guarded[i] == (const void *)w->page)
            return g_faulted[i] != 0;
    return false;
}

/* ---- the socket ---- */

int registry_open_socket(agent *a)
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
    /* A pidfd of each sender (Linux 6.5); without it, pidfd_open below. */
    a->senders_have_pidfds = setsockopt(fd, SOL_SOCKET, SO_PASSPIDFD, &one, sizeof one) == 0;
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

/* ---- who may register ---- */

/* Is `pid` the tree's root or one of its descendants? */
static bool registry_in_tree(const agent *a, pid_t pid)
{
    for (int depth = 0; depth < MAX_TREE_DEPTH && pid > 0; depth++) {
        if (pid == a->tree_root)
            return true;
        if (pid == 1)
            return false;
        hw_task_stat st;
        if (hw_task_stat_read(pid, 0, &st) != 0 || st.ppid == pid)
            return false;
        pid = st.ppid;
    }
    return false;
}

/* Has the process behind `pidfd` exited? */
static bool pidfd_exited(int pidfd)
{
    struct pollfd p = {pidfd, POLLIN, 0};
    return poll(&p, 1, 0) != 0;
}

/* The sender's own pidfd (close-on-exec), or -1 when it has exited. */
static int sender_pidfd(const agent *a, const hw_registration_parsed *m)
{
    if (m->pidfd >= 0)
        return hw_pidfd_pid(m->pidfd) == m->pid ? fcntl(m->pidfd, F_DUPFD_CLOEXEC, 0) : -1;
    /* The kernel names senders by pidfd and had none for this one: it is
     * gone.  Never fall back to its pid number then. */
    if (a->senders_have_pidfds || m->pidfd_failed)
        return -1;
    return (int)syscall(SYS_pidfd_open, m->pid, 0); /* older kernels */
}

/* A page the agent can read without fear: a sealed tmpfs memfd, big enough. */
static const char *page_fd_problem(int fd)
{
    struct stat st;
    struct statfs sfs;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        return "not a memory file";
    if (fstatfs(fd, &sfs) != 0 || sfs.f_type != TMPFS_MAGIC)
        return "not a memory file";
    int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0 || !(seals & F_SEAL_SHRINK))
        return "not sealed against shrinking";
    if (st.st_size < (off_t)HW_PAGE_SIZE)
        return "too small";
    return NULL;
}

static void refuse(agent *a, const hw_registration_parsed *m, const char *why)
{
    a->refused++;
    hw_metrics_refused(a->metrics);
    if (a->said_refused || a->opts->quiet)
        return;
    a->said_refused = true;
    if (m->have_cred)
        fprintf(stderr,
                "hangwatch: refused a registration from pid %d (uid %u): %s; further refusals are only counted "
                "(docs/security.md)\n",
                (int)m->pid, (unsigned)m->uid, why);
    else
        fprintf(stderr, "hangwatch: refused a registration: %s; further refusals are only counted\n", why);
}

watched_process *registry_find(agent *a, pid_t pid)
{
    for (size_t i = 0; i < a->watched_count; i++)
        if (a->watched[i].pid == pid)
            return &a->watched[i];
    return NULL;
}

static void release_process(agent *a, watched_process *w)
{
    if (w->pidfd >= 0)
        close(w->pidfd);
    w->pidfd = -1;
    if (w->metrics_name[0])
        hw_metrics_watched(a->metrics, w->metrics_name, -1);
    w->metrics_name[0] = '\0';
    free_loops(a, w);
    cpu_high_free(w);
    hw_python_namer_free(w->python_namer);
    w->python_namer = NULL;
    if (w->page && hw_kobs_owns(a->kobs, w->page)) {
        hw_kobs_forget(a->kobs, w->page); /* the kernel observer's: not ours to unmap */
        w->page = NULL;
    } else if (w->page) {
        registry_unguard_page(w->page);
        munmap((void *)w->page, HW_PAGE_SIZE);
        w->page = NULL;
    }
}

void registry_forget(agent *a, watched_process *w)
{
    release_process(a, w);
    watched_process *last = &a->watched[--a->watched_count];
    if (w != last)
        *w = *last;
    memset(last, 0, sizeof *last); /* its pointers now belong to *w */
}

/* Watch process `pid` through `page` from now on. */
/* A time in CLOCK_MONOTONIC no later than the start of process `pid`, from
 * its start in clock ticks after boot (/proc/PID/stat), one tick early for
 * the conversion between the boot clock and the monotonic one; 0 when it
 * cannot be read. */
static uint64_t process_born_ns(pid_t pid)
{
    hw_task_stat st;
    long hz = sysconf(_SC_CLK_TCK);
    struct timespec boot;
    if (hw_task_stat_read(pid, 0, &st) != 0 || hz <= 0 || clock_gettime(CLOCK_BOOTTIME, &boot) != 0)
        return 0;
    uint64_t mono = hw_monotonic_ns();
    uint64_t tick = 1000000000ull / (uint64_t)hz;
    uint64_t boot_now = (uint64_t)boot.tv_sec * 1000000000ull + (uint64_t)boot.tv_nsec;
    if (st.start_ticks > (boot_now / tick))
        return 0; /* not a start we can believe */
    uint64_t age = boot_now - st.start_ticks * tick + tick;
    return age < mono ? mono - age : 0;
}

static void start_watching(agent *a, watched_process *w, pid_t pid, int pidfd, const hw_shared_page *page)
{
    memset(w, 0, sizeof *w);
    w->pidfd = pidfd;
    w->pid = pid;
    w->page = page;
    w->clock = page->clock; /* once: the program may write its page at any time */
    w->born_ns = process_born_ns(pid);
    w->end_status = -1;
    a->ever_registered = true;
    char link[64];
    snprintf(link, sizeof link, "/proc/%d/exe", (int)pid);
    ssize_t n = readlink(link, w->executable, sizeof w->executable - 1);
    w->executable[n > 0 ? n : 0] = '\0';
    js_maps_note_process(a, w->pid, w->executable);
    if (a->metrics) {
        snprintf(link, sizeof link, "/proc/%d/comm", (int)pid);
        hw_proc_read_comm(link, w->metrics_name);
        if (!w->metrics_name[0])
            snprintf(w->metrics_name, sizeof w->metrics_name, "?");
        hw_metrics_watched(a->metrics, w->metrics_name, 1);
    }
    look_for_python(w);
    w->next_wake_ns = hw_monotonic_ns(); /* look at it (and find its loops) now */
}

/* Check one well-formed registration (its sender, its place in the tree,
 * its page) and watch its sender. */
static void accept_registration(agent *a, const hw_registration_parsed *m)
{
    if (getuid() != 0 && m->uid != getuid()) {
        refuse(a, m, "another user's process");
        return;
    }
    /* A sender that has exited (a short command of the tree, or a forger
     * whose pid may already be another process's) is not watched.  That is
     * routine, so it is not said. */
    int pidfd = sender_pidfd(a, m);
    if (pidfd < 0)
        return;
    const char *why = NULL;
    if (!registry_in_tree(a, m->pid))
        why = "not the watched program or one of its descendants";
    else
        why = page_fd_problem(m->page_fd);
    if (why) {
        close(pidfd);
        refuse(a, m, why);
        return;
    }
    if (pidfd_exited(pidfd)) {
        /* It died during the checks: what they read may be another's. */
        close(pidfd);
        return;
    }
    const hw_shared_page *page = mmap(NULL, HW_PAGE_SIZE, PROT_READ, MAP_SHARED, m->page_fd, 0);
    if (page == MAP_FAILED) {
        close(pidfd);
        refuse(a, m, "its page cannot be mapped");
        return;
    }
    if (!hw_page_header_is_valid(page, m->pid)) {
        munmap((void *)page, HW_PAGE_SIZE);
        close(pidfd);
        refuse(a, m, "its page is not a hangwatch page of that process");
        return;
    }
    if (!clock_source_accepts(a, page->clock)) {
        munmap((void *)page, HW_PAGE_SIZE);
        close(pidfd);
        refuse(a, m, "its page is stamped with a clock this agent does not read");
        return;
    }
    watched_process *w = registry_find(a, m->pid);
    if (w) {
        /* Same pid again: the process exec'd a new image.  Start afresh. */
        finish_process(a, w, hw_monotonic_ns(), "exec", -1);
        release_process(a, w);
    } else {
        if (a->watched_count == MAX_WATCHED) {
            munmap((void *)page, HW_PAGE_SIZE);
            close(pidfd);
            refuse(a, m, "the agent already watches as many processes as it can");
            return;
        }
        w = &a->watched[a->watched_count++];
    }
    registry_guard_page(page);
    start_watching(a, w, m->pid, pidfd, page);
}

void registry_switch_to_kernel(agent *a, watched_process *w)
{
    w->wants_kernel = false;
    char why[512] = "";
    const hw_shared_page *page = NULL;
    if (a->kobs != NULL || hw_kobs_open(&a->kobs, why, sizeof why) == 0)
        page = hw_kobs_watch(a->kobs, w->pid, a->opts->every_wait_is_the_loop, a->opts->all_loop_threads,
                             false /* its children register through the preload */, HW_KOBS_START_AS_FOUND, why,
                             sizeof why);
    if (page == NULL) {
        w->kernel_refused = true;
        if (!a->opts->quiet)
            fprintf(stderr,
                    "hangwatch: warning: pid %d waits without going through glibc's wrappers (a raw syscall() or "
                    "io_uring loop): its loop cannot be observed and its hangs cannot be seen; the kernel observer "
                    "could not be used: %s (see docs/limits.md)\n",
                    (int)w->pid, why);
        return;
    }
    free_loops(a, w);
    registry_unguard_page(w->page);
    munmap((void *)w->page, HW_PAGE_SIZE);
    w->page = page;
    w->clock = page->clock; /* the kernel observer's: CLOCK_MONOTONIC */
    w->next_wake_ns = hw_monotonic_ns();
    if (!a->opts->quiet)
        fprintf(stderr,
                "hangwatch: pid %d waits without going through glibc's wrappers (a raw syscall() or io_uring "
                "loop): it is watched through the kernel observer from now on\n",
                (int)w->pid);
}

/* Is `pid` a process (not a thread of one)?  /proc/PID/status's Tgid. */
static bool is_process(pid_t pid)
{
    return hw_proc_status_number(pid, "Tgid") == pid;
}

void registry_watch_new_children(agent *a)
{
    pid_t pids[64];
    size_t n;
    while ((n = hw_kobs_take_children(a->kobs, pids, 64)) > 0) {
        for (size_t i = 0; i < n; i++) {
            pid_t pid = pids[i];
            if (registry_find(a, pid) || !is_process(pid))
                continue; /* a new thread, or known already */
            char why[512];
            int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
            if (pidfd < 0)
                continue; /* gone already */
            const hw_shared_page *page = hw_kobs_watch(a->kobs, pid, a->opts->every_wait_is_the_loop,
                                                       a->opts->all_loop_threads, true, HW_KOBS_START_LAUNCHING,
                                                       why, sizeof why);
            if (page != NULL && registry_add_kernel_watch(a, pid, pidfd, page))
                continue;
            if (page != NULL)
                hw_kobs_forget(a->kobs, page);
            close(pidfd);
            if (!a->opts->quiet)
                fprintf(stderr, "hangwatch: warning: pid %d, a new process of a watched one, is not watched: %s\n",
                        (int)pid, page ? "the agent already watches as many processes as it can" : why);
        }
    }
}

bool registry_add_kernel_watch(agent *a, pid_t pid, int pidfd, const hw_shared_page *page)
{
    if (a->watched_count == MAX_WATCHED)
        return false;
    start_watching(a, &a->watched[a->watched_count++], pid, pidfd, page);
    return true;
}

void registry_drain(agent *a)
{
    for (int i = 0; i < MAX_DATAGRAMS_PER_WAKE; i++) {
        hw_registration msg;
        struct iovec iov = {&msg, sizeof msg};
        union {
            char buf[CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(sizeof(int)) +
                     CMSG_SPACE(HW_REGISTRATION_MAX_FDS / 2 * sizeof(int))];
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
        hw_registration_parsed m;
        int rc = hw_registration_parse(&msg, (size_t)n, mh.msg_flags, mh.msg_control, mh.msg_controllen, &m);
        if (rc == 0)
            accept_registration(a, &m);
        else if (!m.pidfd_failed) /* else its sender is gone: nothing to refuse */
            refuse(a, &m, "a malformed message");
        for (size_t k = 0; k < m.fd_count; k++)
            close(m.fds[k]);
    }
}
