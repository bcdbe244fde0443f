/*
 * proc_task.c - what /proc says of a process and its threads, for the
 * capture and the agent, beyond the allocation-free readers of
 * agent/common/proc_read.c (a small file, a thread's stat and system call
 * lines): files of unknown size, a comm name, a status line, its tracer,
 * the list of a process's threads, the pid behind a pidfd, and a captured
 * process's memory map.  Every reader
 * takes the file as the kernel wrote it at that moment: a thread may be
 * gone by the next read, and callers treat an error as "gone".
 */
#include "proc_task.h"
#include "snapshot.h"

#include "core/abi/wait_point.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <inttypes.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The first read's buffer; it doubles up to the cap. */
#define CAPPED_FIRST_READ 16384u

char *hw_proc_read_capped(const char *path, size_t cap, size_t *len, bool *cut, int *err)
{
    *len = 0;
    *cut = false;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        *err = -errno;
        return NULL;
    }
    size_t size = cap < CAPPED_FIRST_READ ? cap : CAPPED_FIRST_READ, got = 0;
    char *buf = malloc(size + 1);
    *err = buf != NULL ? 0 : -ENOMEM;
    while (buf != NULL) {
        if (got == size) {
            if (size == cap) { /* full: is there more? */
                char probe;
                ssize_t n;
                do
                    n = read(fd, &probe, 1);
                while (n < 0 && errno == EINTR);
                *cut = n != 0; /* a failed read cannot show that the rest is empty */
                break;
            }
            size_t bigger = size > cap / 2 ? cap : size * 2;
            char *grown = realloc(buf, bigger + 1);
            if (grown == NULL) {
                free(buf);
                buf = NULL;
                *err = -ENOMEM;
                break;
            }
            buf = grown;
            size = bigger;
        }
        ssize_t n = read(fd, buf + got, size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            *err = -errno;
            free(buf);
            buf = NULL;
            break;
        }
        if (n == 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    if (buf == NULL)
        return NULL;
    buf[got] = '\0';
    *len = got;
    return buf;
}

/* Read a whole file of unknown size (maps).  malloc'd and NUL-terminated, or
 * NULL when it could not be read or was empty. */
char *hw_proc_read_whole(const char *path, size_t *len)
{
    bool cut;
    int err;
    char *buf = hw_proc_read_capped(path, HW_PROC_READ_MAX, len, &cut, &err);
    if (buf != NULL && *len == 0) {
        free(buf);
        buf = NULL;
    }
    return buf; /* past the cap, the rest is not read */
}

void hw_proc_read_comm(const char *path, char name[16])
{
    char buf[64];
    name[0] = '\0';
    ssize_t got = hw_proc_read_small(path, buf, sizeof buf);
    if (got <= 0)
        return;
    /* The kernel ends the name with one newline; a newline the program put
     * in its own name (prctl PR_SET_NAME) is part of it, kept whole for
     * the escaping that shows it, never a place to cut it. */
    size_t n = strlen(buf);
    if (n > 0 && buf[n - 1] == '\n')
        n--;
    if (n > 15)
        n = 15;
    memcpy(name, buf, n);
    name[n] = '\0';
}

uint64_t hw_clock_tick_ns(void)
{
    long hz = sysconf(_SC_CLK_TCK);
    return hz > 0 ? 1000000000ull / (uint64_t)hz : 10000000ull;
}

ssize_t hw_task_syscall_line(pid_t pid, pid_t tid, char *buf, size_t len)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task/%d/syscall", (int)pid, (int)tid);
    ssize_t n = hw_proc_read_small(path, buf, len);
    if (n <= 0)
        return n;
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\0'))
        buf[--n] = '\0';
    return n;
}

/* A line "Key:\tvalue..." of /proc/PID/status: its first number, or -1. */
long hw_proc_status_number(pid_t pid, const char *key)
{
    char path[64], buf[4096];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    if (hw_proc_read_small(path, buf, sizeof buf) <= 0)
        return -1;
    size_t klen = strlen(key);
    for (const char *line = buf; line != NULL && *line != '\0';) {
        if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
            char *end = NULL;
            long v = strtol(line + klen + 1, &end, 10);
            return end != line + klen + 1 ? v : -1;
        }
        line = strchr(line, '\n');
        if (line != NULL)
            line++;
    }
    return -1;
}

/* A thread is over when its /proc entry is gone or it is a zombie. */
bool hw_task_is_dead(pid_t pid, pid_t tid)
{
    hw_task_stat ps;
    int r = hw_task_stat_read(pid, tid, &ps);
    if (r == -ENOENT || r == -ESRCH)
        return true;
    return r == 0 && (ps.state == 'Z' || ps.state == 'X');
}

int hw_pid_compare(const void *a, const void *b)
{
    pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
    return (x > y) - (x < y);
}

/* The tids in /proc/PID/task, sorted.  0 or -errno. */
int hw_task_list(pid_t pid, pid_t **tids, size_t *count)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    *tids = NULL;
    *count = 0;
    DIR *dir = opendir(path);
    if (dir == NULL)
        return -errno;
    pid_t *v = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(dir)) != NULL) {
        char *end;
        long t = strtol(de->d_name, &end, 10);
        if (end == de->d_name || *end != '\0' || t <= 0)
            continue;
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            pid_t *bigger = realloc(v, ncap * sizeof *v);
            if (bigger == NULL) {
                free(v);
                closedir(dir);
                return -ENOMEM;
            }
            v = bigger;
            cap = ncap;
        }
        v[n++] = (pid_t)t;
    }
    closedir(dir);
    if (n > 1)
        qsort(v, n, sizeof *v, hw_pid_compare);
    *tids = v;
    *count = n;
    return 0;
}

/* The thread's TracerPid from /proc/PID/task/TID/status: 0 when it is not
 * traced, -1 when that cannot be read. */
pid_t hw_task_tracer(pid_t pid, pid_t tid)
{
    char path[64], buf[2048];
    snprintf(path, sizeof path, "/proc/%d/task/%d/status", (int)pid, (int)tid);
    if (hw_proc_read_small(path, buf, sizeof buf) < 0)
        return -1;
    const char *p = strstr(buf, "\nTracerPid:");
    return p != NULL ? (pid_t)strtol(p + 11, NULL, 10) : -1;
}

/* The CPU thread `tid` of `pid` last ran on, or -1. */
int hw_task_last_cpu(pid_t pid, pid_t tid)
{
    hw_task_stat ps;
    return hw_task_stat_read(pid, tid, &ps) == 0 ? ps.processor : -1;
}

/* The pid a pidfd stands for (/proc/self/fdinfo), or -1. */
pid_t hw_pidfd_pid(int pidfd)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/self/fdinfo/%d", pidfd);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    const char *line = strstr(buf, "\nPid:");
    if (line == NULL)
        return -1;
    long pid = strtol(line + 5, NULL, 10);
    return pid > 0 ? (pid_t)pid : -1;
}

/* The wait function (HW_WAIT_CALL_*) system call `nr` is, or
 * HW_WAIT_CALL_UNKNOWN for one that is not a loop's wait. */
static uint32_t wait_call_of(long nr)
{
    switch (nr) {
    case SYS_poll:
        return HW_WAIT_CALL_POLL;
    case SYS_ppoll:
        return HW_WAIT_CALL_PPOLL;
    case SYS_select:
        return HW_WAIT_CALL_SELECT;
    case SYS_pselect6:
        return HW_WAIT_CALL_PSELECT;
    case SYS_epoll_wait:
        return HW_WAIT_CALL_EPOLL_WAIT;
    case SYS_epoll_pwait:
        return HW_WAIT_CALL_EPOLL_PWAIT;
#ifdef SYS_epoll_pwait2
    case SYS_epoll_pwait2:
        return HW_WAIT_CALL_EPOLL_PWAIT2;
#endif
#ifdef SYS_io_uring_enter
    case SYS_io_uring_enter:
        return HW_WAIT_CALL_IO_URING;
#endif
    default:
        return HW_WAIT_CALL_UNKNOWN;
    }
}

bool hw_is_wait_syscall(long nr)
{
    return wait_call_of(nr) != HW_WAIT_CALL_UNKNOWN;
}

bool hw_wait_syscall_describe(const hw_task_syscall_info *call, uint64_t *object, uint32_t *rank, uint32_t *kind)
{
    const uint64_t *a = call->args;
    *kind = wait_call_of(call->nr);
    switch (*kind) {
    case HW_WAIT_CALL_UNKNOWN:
        return false;
    case HW_WAIT_CALL_POLL:
    case HW_WAIT_CALL_PPOLL:
        *object = a[0];
        *rank = hw_wait_rank_of_poll(a[1]);
        return true;
    case HW_WAIT_CALL_SELECT:
    case HW_WAIT_CALL_PSELECT:
        *object = hw_wait_select_object((int64_t)(int32_t)a[0], a[1], a[2], a[3]);
        *rank = hw_wait_rank_of_select(*object);
        return true;
    default: /* the epoll waits, io_uring_enter: a descriptor */
        *object = (uint32_t)a[0];
        *rank = HW_WAIT_RANK_MANY;
        return true;
    }
}

pid_t hw_proc_namespace_pid(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    size_t len = 0;
    char *text = hw_proc_read_whole(path, &len);
    if (text == NULL)
        return 0;
    long inner = 0;
    const char *line = strstr(text, "\nNSpid:");
    if (line != NULL) {
        const char *p = line + strlen("\nNSpid:");
        while (*p != '\0' && *p != '\n') {
            char *end;
            long v = strtol(p, &end, 10);
            if (end == p)
                break;
            inner = v;
            p = end;
        }
    }
    free(text);
    return inner > 0 && inner <= INT32_MAX && inner != (long)pid ? (pid_t)inner : 0;
}

/* Whether `out` (just written, not cut) is the file with `inode`. */
static bool is_inode(int written, size_t len, const char *out, uint64_t inode)
{
    struct stat st;
    return written > 0 && (size_t)written < len && stat(out, &st) == 0 && st.st_ino == inode;
}

bool hw_proc_mapped_file_path(pid_t pid, const char *path, uint64_t lo, uint64_t hi, uint64_t inode, char *out,
                              size_t len)
{
    return is_inode(snprintf(out, len, "%s", path), len, out, inode) ||
           is_inode(snprintf(out, len, "/proc/%d/root%s", (int)pid, path), len, out, inode) ||
           is_inode(snprintf(out, len, "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, (int)pid, lo, hi), len, out, inode);
}

char *hw_proc_read_maps(pid_t pid, pid_t tid, size_t max, size_t *len, bool *cut)
{
    char path[64];
    int err = 0;
    if (tid > 0)
        snprintf(path, sizeof path, "/proc/%d/task/%d/maps", (int)pid, (int)tid);
    else
        snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    char *maps = hw_proc_read_capped(path, max > 0 && max < HW_PROC_READ_MAX ? max : HW_PROC_READ_MAX, len, cut, &err);
    while (maps != NULL && *cut && *len > 0 && maps[*len - 1] != '\n')
        maps[--*len] = '\0'; /* a line cut short is left out */
    if (maps != NULL && *len == 0) {
        free(maps);
        maps = NULL;
    }
    return maps;
}

void hw_capture_read_maps(hw_process_snapshot *snap, size_t max)
{
    if (snap->maps != NULL && !snap->maps_cut)
        return;
    free(snap->maps);
    snap->maps = hw_proc_read_maps(snap->pid, 0, max, &snap->maps_len, &snap->maps_cut);
    /* A leader that called pthread_exit has no mm: ask a live thread. */
    for (size_t i = 0; snap->maps == NULL && i < snap->thread_count; i++)
        if (snap->threads[i].status == HW_THREAD_CAPTURED)
            snap->maps = hw_proc_read_maps(snap->pid, snap->threads[i].tid, max, &snap->maps_len, &snap->maps_cut);
    if (snap->maps == NULL)
        snap->maps_len = 0;
}
