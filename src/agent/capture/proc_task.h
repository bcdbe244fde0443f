/*
 * proc_task.h - reading /proc for a process and its threads (proc_task.c).
 */
#ifndef HANGWATCH_PROC_TASK_H
#define HANGWATCH_PROC_TASK_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>

#include "agent/common/proc_read.h"

/* At most `cap` bytes of the file at `path`, malloc'd and NUL-terminated
 * (so cap + 1 bytes are allocated at most), their count in *len; *cut when
 * the file goes on past them.  NULL with *err = -errno when it cannot be
 * read; an empty file gives "". */
char *hw_proc_read_capped(const char *path, size_t cap, size_t *len, bool *cut, int *err);
/* `pid`'s memory map (as thread `tid` sees it, if not 0: a leader gone by
 * pthread_exit has none), at most `max` bytes (0: HW_PROC_READ_MAX) of
 * whole lines; *cut says that more was left.  malloc'd, or NULL. */
char *hw_proc_read_maps(pid_t pid, pid_t tid, size_t max, size_t *len, bool *cut);

/* Read a whole file of unknown size (maps).  malloc'd and NUL-terminated,
 * or NULL when it could not be read or was empty.  At most about
 * HW_PROC_READ_MAX bytes are read (a process's maps at the kernel's default
 * of 65,530 mappings are under 10 MiB). */
#define HW_PROC_READ_MAX (32u << 20)
char *hw_proc_read_whole(const char *path, size_t *len);

/* A comm file's name (at most 15 bytes), "" when unreadable. */
void hw_proc_read_comm(const char *path, char name[16]);

/* A clock tick of /proc's times (sysconf(_SC_CLK_TCK)), in ns. */
uint64_t hw_clock_tick_ns(void);

/* A line "Key:\tvalue..." of /proc/PID/status ("Tgid", "PPid"...): its
 * first number, or -1. */
long hw_proc_status_number(pid_t pid, const char *key);
/* The thread's /proc/PID/task/TID/syscall line, its trailing newline
 * removed, into `buf`: "NR ARGS... SP PC" while it is blocked in a system
 * call, "running" while it runs.  Its length, or <= 0 if unreadable. */
ssize_t hw_task_syscall_line(pid_t pid, pid_t tid, char *buf, size_t len);

/* Is system call `nr` one an event loop waits in (epoll_wait, poll,
 * select, io_uring_enter and their variants)? */
bool hw_is_wait_syscall(long nr);

/* What the wait system call a thread is blocked in waits on, from its
 * arguments (src/core/abi/wait_point.h): its object, rank and which call
 * (HW_WAIT_CALL_*).  False if `call` is not such a call. */
bool hw_wait_syscall_describe(const hw_task_syscall_info *call, uint64_t *object, uint32_t *rank, uint32_t *kind);

/* A path that the kernel resolves, for the agent, to the file `pid` maps
 * at [lo, hi) with `inode` (`path` is the maps line's): that path as the
 * agent sees it, the same path through the process's root (its mount
 * namespace, a container's), or the mapping itself
 * (/proc/PID/map_files/LO-HI, which root may open); each checked to be that
 * inode, since a file replaced or deleted since is not the code that runs.
 * False when none is. */
bool hw_proc_mapped_file_path(pid_t pid, const char *path, uint64_t lo, uint64_t hi, uint64_t inode, char *out,
                              size_t len);

/* The process's pid in its own pid namespace (a container's "1"): the
 * last field of NSpid in /proc/PID/status; 0 when it is the same as `pid`
 * or cannot be read. */
pid_t hw_proc_namespace_pid(pid_t pid);

/* A thread is over when its /proc entry is gone or it is a zombie. */
bool hw_task_is_dead(pid_t pid, pid_t tid);

/* The tids in /proc/PID/task, sorted (hw_pid_compare).  0 or -errno. */
int hw_task_list(pid_t pid, pid_t **tids, size_t *count);
int hw_pid_compare(const void *a, const void *b);

/* The thread's TracerPid: 0 when it is not traced, -1 when unreadable. */
pid_t hw_task_tracer(pid_t pid, pid_t tid);

/* The CPU the thread last ran on, or -1. */
int hw_task_last_cpu(pid_t pid, pid_t tid);

/* The pid a pidfd stands for (/proc/self/fdinfo), or -1 (also once the
 * process is reaped). */
pid_t hw_pidfd_pid(int pidfd);

#endif
