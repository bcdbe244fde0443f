/*
 * wait_peer.c - see wait_peer.h.  Written here rather than taken from a
 * library: what `ss -p` and `lsof` do is a walk of /proc that has to be
 * bounded for a root agent on a machine of many processes, and the rest
 * is one netlink request and a few small /proc reads.
 */
#include "wait_peer.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "agent/capture/fd_describe.h"
#include "agent/capture/proc_task.h"
#include "agent/common/clock.h"
#include "core/parse/proc_net.h"

#define LINK_MAX_TEXT 64 /* "socket:[N]" and "pipe:[N]" fit; longer links are never a match */
#define CHILD_SETTLE_MS 50 /* how long a waited-for child is read again while it runs or is stopped */
#define NS_PER_MS 1000000ull

/* A decimal name of at most 9 digits (a pid, a descriptor), else -1. */
static long small_number(const char *s)
{
    long v = 0;
    size_t n = 0;
    for (; s[n] >= '0' && s[n] <= '9'; n++) {
        if (n == 9)
            return -1;
        v = v * 10 + (s[n] - '0');
    }
    return n > 0 && s[n] == '\0' ? v : -1;
}

/* Is descriptor `fd` of `pid` open for writing (fdinfo's flags)? */
static bool open_for_writing(const char *proc_root, pid_t pid, int fd)
{
    char path[256], buf[512];
    snprintf(path, sizeof path, "%s/%d/fdinfo/%d", proc_root, (int)pid, fd);
    if (hw_proc_read_small(path, buf, sizeof buf) <= 0)
        return false;
    const char *flags = strstr(buf, "flags:");
    if (flags == NULL)
        return false;
    unsigned long v = strtoul(flags + 6, NULL, 8);
    return (v & O_ACCMODE) != O_RDONLY;
}

bool hw_wait_peer_holder(const char *proc_root, const char *target, pid_t skip_pid, int skip_fd, bool writer,
                         pid_t *pid, int *fd, const char **why)
{
    DIR *proc = opendir(proc_root);
    if (proc == NULL) {
        *why = "the process list could not be read";
        return false;
    }
    uint64_t deadline = hw_monotonic_ns() + HW_WAIT_PEER_BUDGET_MS * NS_PER_MS;
    size_t procs = 0, fds = 0;
    bool denied = false, bounded = false, found = false;
    struct dirent *d;
    while (!found && !bounded && (d = readdir(proc)) != NULL) {
        long p = small_number(d->d_name);
        if (p <= 0)
            continue;
        if (++procs > HW_WAIT_PEER_MAX_PROCS || hw_monotonic_ns() > deadline) {
            bounded = true;
            break;
        }
        char path[256];
        snprintf(path, sizeof path, "%s/%ld/fd", proc_root, p);
        DIR *dir = opendir(path);
        if (dir == NULL) {
            denied |= errno == EACCES || errno == EPERM;
            continue;
        }
        struct dirent *e;
        while ((e = readdir(dir)) != NULL) {
            long f = small_number(e->d_name);
            if (f < 0)
                continue;
            if (++fds > HW_WAIT_PEER_MAX_FDS) {
                bounded = true;
                break;
            }
            char link[LINK_MAX_TEXT];
            ssize_t n = readlinkat(dirfd(dir), e->d_name, link, sizeof link - 1);
            if (n <= 0)
                continue;
            link[n] = '\0';
            if (strcmp(link, target) != 0 || (p == skip_pid && f == skip_fd))
                continue;
            if (writer && !open_for_writing(proc_root, (pid_t)p, (int)f))
                continue;
            *pid = (pid_t)p;
            *fd = (int)f;
            found = true;
            break;
        }
        closedir(dir);
    }
    closedir(proc);
    if (!found)
        *why = bounded  ? "not found within the search's bounds"
               : denied ? "not held by any process this user may read"
                        : "no process holds the other end";
    return found;
}

/* The inode of the TCP socket at the other end of `inode` (a socket of
 * `pid`), from its network namespace's tables; 0 when none is listed. */
static unsigned long long tcp_peer_inode(pid_t pid, unsigned long long inode, bool *listening)
{
    static const struct {
        const char *file;
        bool ipv6;
    } tables[] = {{"tcp", false}, {"tcp6", true}};
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/net/%s", (int)pid, tables[i].file);
        size_t len;
        bool cut;
        int err;
        char *text = hw_proc_read_capped(path, HW_FD_NET_TABLE_MAX, &len, &cut, &err);
        if (text == NULL)
            continue;
        hw_inet_socket s;
        unsigned long long peer = 0;
        bool mine = hw_proc_net_inet_find(text, len, inode, tables[i].ipv6, &s);
        if (mine)
            peer = hw_proc_net_inet_peer(text, len, tables[i].ipv6, s.local, s.remote, listening);
        free(text);
        if (mine)
            return peer;
    }
    return 0;
}

/* The inode of unix socket `inode`'s peer (sock_diag: only sockets of
 * the agent's own network namespace are found); 0 when it has none or
 * the kernel does not say. */
static unsigned long long unix_peer_inode(unsigned long long inode)
{
    if (inode > UINT32_MAX)
        return 0;
    int s = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (s < 0)
        return 0;
    struct timeval tv = {0, 200 * 1000};
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct {
        struct nlmsghdr nlh;
        struct unix_diag_req req;
    } msg;
    memset(&msg, 0, sizeof msg);
    msg.nlh.nlmsg_len = sizeof msg;
    msg.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    msg.nlh.nlmsg_flags = NLM_F_REQUEST;
    msg.req.sdiag_family = AF_UNIX;
    msg.req.udiag_states = ~0u;
    msg.req.udiag_ino = (uint32_t)inode;
    msg.req.udiag_show = UDIAG_SHOW_PEER;
    msg.req.udiag_cookie[0] = msg.req.udiag_cookie[1] = ~0u;
    struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
    unsigned long long peer = 0;
    if (sendto(s, &msg, sizeof msg, 0, (struct sockaddr *)&kernel, sizeof kernel) == (ssize_t)sizeof msg) {
        /* the answer: one message, a unix_diag_msg and its attributes (the kernel's, but bounded all the same) */
        union {
            struct nlmsghdr h;
            char bytes[4096];
        } answer;
        ssize_t n = recv(s, &answer, sizeof answer, 0);
        if (n >= (ssize_t)NLMSG_LENGTH(sizeof(struct unix_diag_msg)) && answer.h.nlmsg_type == SOCK_DIAG_BY_FAMILY &&
            answer.h.nlmsg_len <= (size_t)n) {
            const struct unix_diag_msg *m = NLMSG_DATA(&answer.h);
            size_t at = NLMSG_LENGTH(sizeof *m);
            at = NLMSG_ALIGN(at);
            while (at + sizeof(struct nlattr) <= answer.h.nlmsg_len) {
                const struct nlattr *a = (const struct nlattr *)(answer.bytes + at);
                if (a->nla_len < sizeof *a || at + a->nla_len > answer.h.nlmsg_len)
                    break;
                if (a->nla_type == UNIX_DIAG_PEER && a->nla_len >= NLA_HDRLEN + sizeof(uint32_t)) {
                    uint32_t v;
                    memcpy(&v, (const char *)a + NLA_HDRLEN, sizeof v);
                    peer = v;
                }
                at += NLA_ALIGN(a->nla_len);
            }
        }
    }
    close(s);
    return peer;
}

/* Is `pid` in the agent's own network namespace? */
static bool same_network_namespace(pid_t pid)
{
    char path[64];
    struct stat mine, theirs;
    snprintf(path, sizeof path, "/proc/%d/ns/net", (int)pid);
    return stat("/proc/self/ns/net", &mine) == 0 && stat(path, &theirs) == 0 && mine.st_ino == theirs.st_ino &&
           mine.st_dev == theirs.st_dev;
}

static void name_process(pid_t pid, hw_wait_peer *out)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
    ssize_t n = hw_proc_read_small(path, out->name, sizeof out->name);
    if (n <= 0)
        out->name[0] = '\0';
    else if (out->name[n - 1] == '\n')
        out->name[n - 1] = '\0';
}

/* Name the holder of `target` (not fd `fd` of `pid`) as `role`. */
static void name_holder(pid_t pid, int fd, const char *target, bool writer, const char *role, hw_wait_peer *out)
{
    pid_t holder;
    int holder_fd;
    const char *why = NULL;
    if (!hw_wait_peer_holder("/proc", target, pid, fd, writer, &holder, &holder_fd, &why)) {
        out->missing = why;
        return;
    }
    out->pid = holder;
    out->role = role;
    name_process(holder, out);
}

/* The child a wait4 or waitid waits for: a pid, or the thread's first child for "any". */
static pid_t waited_child(pid_t pid, pid_t tid, const hw_blocked_look *look)
{
    long long which = 0;
    if (look->syscall == SYS_wait4)
        which = (int32_t)look->args[0];
    else if (look->syscall == SYS_waitid)
        which = look->args[0] == 1 /* P_PID */ ? (long long)(int32_t)look->args[1] : look->args[0] == 0 ? -1 : 0;
    if (which > 0)
        return (pid_t)which;
    if (which != -1)
        return 0; /* a process group, a pidfd: not named */
    char path[80], buf[256];
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)pid, (int)tid);
    if (hw_proc_read_small(path, buf, sizeof buf) <= 0)
        return 0;
    long child = strtol(buf, NULL, 10);
    return child > 0 && child < INT32_MAX ? (pid_t)child : 0;
}

/* The child's state, read again every millisecond for up to
 * CHILD_SETTLE_MS while it is runnable or in a ptrace stop: the agent may be
 * capturing it at this very moment (a child hung as long as its parent is,
 * in a report of its own), and a thread let go of is runnable until it is
 * back in its call.  A child that truly runs stays R.  False if it cannot
 * be read. */
static bool settled_child_state(pid_t child, hw_task_stat *st)
{
    for (int waited = 0;; waited++) {
        if (hw_task_stat_read(child, child, st) != 0)
            return false;
        if ((st->state != 'R' && st->state != 't') || waited >= CHILD_SETTLE_MS)
            return true;
        struct timespec ms = {0, 1000 * 1000};
        nanosleep(&ms, NULL);
    }
}

void hw_wait_peer_find(pid_t pid, pid_t tid, hw_blocked_look *look)
{
    hw_wait_peer *out = &look->peer;
    memset(out, 0, sizeof *out);
    out->syscall = -1;
    if (!look->valid || !look->in_syscall)
        return;
    if (look->syscall == SYS_wait4 || look->syscall == SYS_waitid) {
        pid_t child = waited_child(pid, tid, look);
        if (child <= 0) {
            out->missing = "which child it waits for is not known";
            return;
        }
        hw_task_stat st;
        if (!settled_child_state(child, &st)) {
            out->missing = "the child could not be read";
            return;
        }
        out->pid = child;
        out->role = "child";
        out->state = st.state;
        name_process(child, out);
        hw_task_syscall_info call;
        if (hw_task_syscall_read(child, child, &call) == 0)
            out->syscall = call.nr;
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/wchan", (int)child);
        if (hw_proc_read_small(path, out->wchan, sizeof out->wchan) <= 0 || strcmp(out->wchan, "0") == 0)
            out->wchan[0] = '\0';
        return;
    }
    if (look->fd < 0)
        return;
    char path[64], link[LINK_MAX_TEXT];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)pid, look->fd);
    ssize_t n = readlink(path, link, sizeof link - 1);
    link[n > 0 ? n : 0] = '\0';
    /* Looked for after the capture (by the report): the wait may be over
     * and its descriptor closed, or given to another socket by now. */
    bool object_now = strncmp(link, "socket:[", 8) == 0 || strncmp(link, "pipe:[", 6) == 0;
    bool described = look->fd_kind[0] != '\0';
    if (described && (look->fd_object[0] != '\0' || object_now) && strcmp(link, look->fd_object) != 0) {
        out->missing = n > 0 ? "the descriptor was another one's by the time its other end was looked for (the wait "
                               "had ended)"
                             : "the descriptor was closed by the time its other end was looked for (the wait had "
                               "ended)";
        return;
    }
    if (n <= 0)
        return; /* not a socket or a pipe (fd_object would say), or gone with the process */
    unsigned long long inode = 0;
    if (strncmp(link, "pipe:[", 6) == 0) {
        name_holder(pid, look->fd, link, true, "writer", out);
        return;
    }
    if (sscanf(link, "socket:[%llu]", &inode) != 1 || inode == 0)
        return;
    unsigned long long peer = 0;
    const char *role = "peer";
    if (strcmp(look->fd_kind, "tcp") == 0) {
        bool listening = false;
        peer = tcp_peer_inode(pid, inode, &listening);
        if (listening)
            role = "listener";
        if (peer == 0) {
            out->missing = "the other end is not on this machine (not in the process's network namespace)";
            return;
        }
    } else if (strcmp(look->fd_kind, "unix") == 0) {
        if (!same_network_namespace(pid)) {
            out->missing = "the socket is in another network namespace than the agent's";
            return;
        }
        peer = unix_peer_inode(inode);
        if (peer == 0) {
            out->missing = "the kernel names no peer for it";
            return;
        }
    } else {
        return;
    }
    char target[LINK_MAX_TEXT];
    snprintf(target, sizeof target, "socket:[%llu]", peer);
    name_holder(pid, look->fd, target, false, role, out);
}
