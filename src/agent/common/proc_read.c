/*
 * proc_read.c - see proc_read.h.  Every reader takes the file as the kernel
 * wrote it at that moment: a thread may be gone by the next read, and
 * callers treat an error as "gone".
 */
#include "proc_read.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

ssize_t hw_proc_read_small(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    size_t got = 0;
    while (got + 1 < size) {
        ssize_t n = read(fd, buf + got, size - 1 - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            close(fd);
            return -e;
        }
        if (n == 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    buf[got] = '\0';
    return (ssize_t)got;
}

int hw_task_stat_read(pid_t pid, pid_t tid, hw_task_stat *ps)
{
    char path[64], buf[1024];
    if (tid > 0)
        snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)pid, (int)tid);
    else
        snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    ssize_t n = hw_proc_read_small(path, buf, sizeof buf);
    if (n < 0)
        return (int)n;
    char *p = strrchr(buf, ')'); /* comm may contain spaces and parentheses */
    if (p == NULL)
        return -EINVAL;
    ps->state = 0;
    ps->ppid = 0;
    ps->exit_code = -1;
    ps->processor = -1;
    ps->cpu_ticks = ps->user_ticks = ps->system_ticks = 0;
    ps->start_ticks = 0;
    ps->major_faults = 0;
    /* Fields after the comm, numbered as in proc(5): 3 = state, 4 = ppid,
     * 12 = majflt, 14 = utime, 15 = stime, 22 = starttime, 39 = processor,
     * 52 = exit_code. */
    int field = 3;
    char *save = NULL;
    for (char *tok = strtok_r(p + 1, " \n", &save); tok != NULL; tok = strtok_r(NULL, " \n", &save), field++) {
        if (field == 3)
            ps->state = tok[0];
        else if (field == 4)
            ps->ppid = (pid_t)strtol(tok, NULL, 10);
        else if (field == 12)
            ps->major_faults = strtoull(tok, NULL, 10);
        else if (field == 14)
            ps->user_ticks = strtoull(tok, NULL, 10);
        else if (field == 15)
            ps->system_ticks = strtoull(tok, NULL, 10);
        else if (field == 22)
            ps->start_ticks = strtoull(tok, NULL, 10);
        else if (field == 39)
            ps->processor = (int)strtol(tok, NULL, 10);
        else if (field == 52)
            ps->exit_code = (int)strtol(tok, NULL, 10);
    }
    ps->cpu_ticks = ps->user_ticks + ps->system_ticks;
    return ps->state != 0 ? 0 : -EINVAL;
}

bool hw_syscall_line_parse(const char *line, hw_task_syscall_info *out)
{
    memset(out, 0, sizeof *out);
    out->nr = -1;
    if (strncmp(line, "running", 7) == 0)
        return true;
    char *end = NULL;
    errno = 0;
    long nr = strtol(line, &end, 10);
    if (end == line || errno != 0 || nr < -1 || (*end != ' ' && *end != '\0'))
        return false;
    /* "-1 SP PC" outside a system call, "NR A1..A6 SP PC" inside one */
    uint64_t fields[8];
    size_t want = nr >= 0 ? 8 : 2, got = 0;
    while (got < want && *end == ' ') {
        const char *start = end + 1;
        if (start[0] != '0' || start[1] != 'x')
            return false;
        errno = 0;
        unsigned long long v = strtoull(start, &end, 16);
        if (end == start || errno != 0)
            return false;
        fields[got++] = v;
    }
    if (got != want || (*end != '\0' && *end != '\n'))
        return false;
    out->blocked = true;
    out->nr = nr;
    if (nr >= 0)
        memcpy(out->args, fields, sizeof out->args);
    out->sp = fields[want - 2];
    out->pc = fields[want - 1];
    return true;
}

int hw_task_syscall_read(pid_t pid, pid_t tid, hw_task_syscall_info *out)
{
    char path[64], line[HW_SYSCALL_LINE_MAX];
    snprintf(path, sizeof path, "/proc/%d/task/%d/syscall", (int)pid, (int)tid);
    ssize_t n = hw_proc_read_small(path, line, sizeof line);
    if (n <= 0) {
        memset(out, 0, sizeof *out);
        out->nr = -1;
        return n < 0 ? (int)n : -ENODATA;
    }
    return hw_syscall_line_parse(line, out) ? 0 : -EINVAL;
}

long hw_task_syscall(pid_t pid, pid_t tid)
{
    hw_task_syscall_info info;
    if (hw_task_syscall_read(pid, tid, &info) != 0)
        return -1; /* unreadable */
    return info.nr; /* -1 when running or outside a system call */
}

char hw_task_state(pid_t pid, pid_t tid)
{
    hw_task_stat st;
    return hw_task_stat_read(pid, tid, &st) == 0 ? st.state : '?';
}

bool hw_has_capability(int bit)
{
    char buf[4096];
    if (hw_proc_read_small("/proc/self/status", buf, sizeof buf) <= 0)
        return true;
    const char *line = strstr(buf, "\nCapEff:");
    return line == NULL || (strtoull(line + 8, NULL, 16) >> bit & 1);
}
