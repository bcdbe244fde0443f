/*
 * proc_read.h - the readers of /proc that allocate nothing and take no lock
 * but the kernel's: a small file into the caller's buffer, a thread's stat
 * line and its system call line, this process's capabilities.  Common to
 * the capture (proc_task.h builds on them) and to the priority lender,
 * which must not wait for the allocator's lock it is there to free.
 */
#ifndef HANGWATCH_PROC_READ_H
#define HANGWATCH_PROC_READ_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>

/* Read a small file into buf (NUL-terminated).  Bytes read, or -errno. */
ssize_t hw_proc_read_small(const char *path, char *buf, size_t size);

/* What /proc/PID/task/TID/stat says of a thread (tid <= 0: the process). */
typedef struct hw_task_stat {
    char state;    /* R, S, D, T (stopped), t (traced), Z, X, ... */
    pid_t ppid;
    int processor; /* CPU it last ran on, -1 if unknown */
    int exit_code; /* wait status of a dead task, -1 if absent */
    unsigned long long cpu_ticks; /* utime + stime, in clock ticks (the process's: its dead threads' too) */
    unsigned long long user_ticks, system_ticks; /* the two apart */
    unsigned long long start_ticks; /* when it started, in clock ticks after boot */
    unsigned long long major_faults; /* page faults that had to read from disk (the thread's own) */
} hw_task_stat;

/* 0, or -errno (-ENOENT when the thread is gone). */
int hw_task_stat_read(pid_t pid, pid_t tid, hw_task_stat *out);

/* What /proc/PID/task/TID/syscall says of a thread: "NR A1..A6 SP PC"
 * (hex) while it is blocked in system call NR, "-1 SP PC" while it is
 * blocked outside one (a page fault), "running" while it runs. */
typedef struct hw_task_syscall_info {
    bool blocked;      /* not "running" */
    long nr;           /* the system call, -1 when running or outside one */
    uint64_t args[6];  /* its arguments (0 outside one) */
    uint64_t sp, pc;   /* user stack pointer and pc (0 when running) */
} hw_task_syscall_info;
#define HW_SYSCALL_LINE_MAX 256 /* 9 fields of at most 18 characters */

/* Parse such a line (NUL-terminated, a trailing newline allowed).  False
 * for anything else. */
bool hw_syscall_line_parse(const char *line, hw_task_syscall_info *out);

/* Read and parse the thread's line: 0, or -errno (-EINVAL when the line
 * has another shape, -ENODATA when it is empty). */
int hw_task_syscall_read(pid_t pid, pid_t tid, hw_task_syscall_info *out);

/* The system call the thread is blocked in, or -1 when it is running,
 * outside one, or that cannot be read. */
long hw_task_syscall(pid_t pid, pid_t tid);

/* The thread's state letter ('R', 'S', 'D', 'T' stopped, 't' traced,
 * 'Z' ...), '?' when it is gone. */
char hw_task_state(pid_t pid, pid_t tid);

/* Does this process hold capability `bit` (CapEff of /proc/self/status)?
 * True when that cannot be read: the kernel will say when it refuses. */
bool hw_has_capability(int bit);

#endif
