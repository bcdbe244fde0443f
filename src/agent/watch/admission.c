/*
 * admission.c - the only door by which a process that registers gets in:
 * a registration message on a connection to the agent's socket.
 *
 * The socket is abstract, so every local user can connect to it, and the
 * agent may run as root: each message is treated as an attack until proven
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
 * What passes is handed back to the watch loop, which puts it in the table
 * of watched processes (watched_table.c); admission itself watches nothing.
 * The socket is read by the intake's thread (admission_intake.c), which
 * only parses; every check here is the watch thread's.  A flood of
 * messages cannot starve detection: at most a few dozen are checked per
 * wake-up.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent/capture/capture.h"
#include "agent/common/random_id.h"
#include "core/abi/registration.h"
#include "core/abi/socket_name.h"
#include "watch.h"

#define MAX_TREE_DEPTH 4096

#ifndef F_GET_SEALS
#define F_GET_SEALS 1034
#endif
#ifndef F_SEAL_SHRINK
#define F_SEAL_SHRINK 0x0002
#endif

/* ---- the socket ---- */

int admission_open_socket(agent *a)
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

    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -errno;
    int one = 1;
    /* Accepted connections inherit both options; a message sent before its
     * connection was accepted carries the sender's credentials anyway. */
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
    /* A backlog of as many as the agent watches: a burst of them forked at
     * once waits there whole, each message on its connection (decisions §59). */
    if (rc != 0 || bind(fd, (struct sockaddr *)&addr, addr_len) != 0 || listen(fd, MAX_WATCHED) != 0) {
        int e = rc != 0 ? -rc : errno;
        close(fd);
        return -e;
    }
    a->registration_fd = fd;
    a->intake = admission_intake_start(fd);
    return a->intake != NULL ? 0 : -(errno ? errno : ENOMEM);
}

void admission_close(agent *a)
{
    admission_intake_stop(a->intake); /* before the socket it reads */
    a->intake = NULL;
    if (a->registration_fd >= 0)
        close(a->registration_fd);
    a->registration_fd = -1;
}

/* ---- who may register ---- */

/* Is `pid` the tree's root or one of its descendants? */
static bool in_watched_tree(const agent *a, pid_t pid)
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
    hw_metrics_refused(hw_exports_metrics(a->exports));
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

/* Check one well-formed registration (its sender, its place in the tree,
 * its page): true, with what passed in `out`, or false after refusing it
 * (or quietly, when its sender is gone). */
static bool check_registration(agent *a, const hw_registration_parsed *m, admitted *out)
{
    if (getuid() != 0 && m->uid != getuid()) {
        refuse(a, m, "another user's process");
        return false;
    }
    /* A sender that has exited (a short command of the tree, or a forger
     * whose pid may already be another process's) is not watched.  That is
     * routine, so it is not said. */
    int pidfd = sender_pidfd(a, m);
    if (pidfd < 0)
        return false;
    const char *why = NULL;
    if (!in_watched_tree(a, m->pid))
        why = "not the watched program or one of its descendants";
    else
        why = page_fd_problem(m->page_fd);
    if (why) {
        close(pidfd);
        refuse(a, m, why);
        return false;
    }
    if (pidfd_exited(pidfd)) {
        /* It died during the checks: what they read may be another's. */
        close(pidfd);
        return false;
    }
    const hw_shared_page *page = mmap(NULL, HW_PAGE_SIZE, PROT_READ, MAP_SHARED, m->page_fd, 0);
    if (page == MAP_FAILED) {
        close(pidfd);
        refuse(a, m, "its page cannot be mapped");
        return false;
    }
    if (!hw_page_header_is_valid(page, m->pid)) {
        munmap((void *)page, HW_PAGE_SIZE);
        close(pidfd);
        refuse(a, m, "its page is not a hangwatch page of that process");
        return false;
    }
    if (!clock_source_accepts(a, page->clock)) {
        munmap((void *)page, HW_PAGE_SIZE);
        close(pidfd);
        refuse(a, m, "its page is stamped with a clock this agent does not read");
        return false;
    }
    *out = (admitted){.pid = m->pid, .uid = m->uid, .pidfd = pidfd, .page = page};
    return true;
}

void admission_refuse_full(agent *a, const admitted *m)
{
    munmap((void *)m->page, HW_PAGE_SIZE);
    close(m->pidfd);
    hw_registration_parsed who = {.have_cred = true, .pid = m->pid, .uid = m->uid};
    refuse(a, &who, "the agent already watches as many processes as it can");
}

size_t admission_drain(agent *a, admitted *out)
{
    admission_received in[MAX_ADMITTED_PER_WAKE];
    size_t n = admission_intake_take(a->intake, in, MAX_ADMITTED_PER_WAKE), admitted_count = 0;
    for (size_t i = 0; i < n; i++) {
        hw_registration_parsed *m = &in[i].m;
        if (in[i].well_formed) {
            if (check_registration(a, m, &out[admitted_count]))
                admitted_count++;
        } else if (!m->pidfd_failed) { /* else its sender is gone: nothing to refuse */
            refuse(a, m, "a malformed message");
        }
        for (size_t k = 0; k < m->fd_count; k++)
            close(m->fds[k]);
    }
    return admitted_count;
}
