/*
 * hang_cause.h - why a hung loop took so long: the `time` section of a
 * hang report and its verdict (decisions.md §44).
 *
 * The agent reads what the kernel already counts for the hung thread over a
 * window of the stretch (its time on a CPU and waiting for one, from
 * schedstat; its cgroup's CPU throttling; its major faults) and what it is
 * blocked in at the look (the system call, the kernel's wait channel, the
 * file descriptor in words).  This file holds those figures as plain data
 * and the rules that turn them into a cause: pure, so that the rules are
 * unit-tested apart from /proc.
 */
#ifndef HANGWATCH_HANG_CAUSE_H
#define HANGWATCH_HANG_CAUSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef enum hw_cause {
    HW_CAUSE_UNKNOWN = 0, /* no figures (no schedstat, no window) */
    HW_CAUSE_WORKING,     /* mostly on a CPU */
    HW_CAUSE_STARVED,     /* mostly runnable, waiting for a CPU */
    HW_CAUSE_THROTTLED,   /* its cgroup's CPU limit held it */
    HW_CAUSE_BLOCKED,     /* mostly asleep in the kernel: blocked_on says on what */
    HW_CAUSE_PAGING,      /* mostly asleep on page faults (major faults, outside any system call) */
    HW_CAUSE_MIXED,       /* none of these dominates */
} hw_cause;

typedef enum hw_blocked_on {
    HW_BLOCKED_ON_NONE = 0,
    HW_BLOCKED_ON_IO,      /* a file, a pipe, a terminal, a device */
    HW_BLOCKED_ON_NETWORK, /* a socket */
    HW_BLOCKED_ON_LOCK,    /* a futex, a file lock */
    HW_BLOCKED_ON_CHILD,   /* waiting for a child process */
    HW_BLOCKED_ON_SLEEP,   /* a sleep, or a wait with no descriptor */
    HW_BLOCKED_ON_OTHER,
} hw_blocked_on;

/* What a futex wait waits on.  The mutex kinds come from the lock's own
 * bytes (its __kind); the others from the C library function the captured
 * stack waits in (hw_look_classify_lock). */
typedef enum hw_lock_kind {
    HW_LOCK_UNKNOWN = 0,
    HW_LOCK_MUTEX,         /* a plain pthread mutex */
    HW_LOCK_ROBUST_MUTEX,  /* PTHREAD_MUTEX_ROBUST: the lock word is its owner's thread id */
    HW_LOCK_PI_MUTEX,      /* priority inheritance (FUTEX_LOCK_PI): the same */
    HW_LOCK_SHARED_MUTEX,  /* PTHREAD_PROCESS_SHARED: its owner may be another process's thread */
    HW_LOCK_RWLOCK_READ,   /* an rwlock, waiting to read (a writer holds or waits) */
    HW_LOCK_RWLOCK_WRITE,  /* an rwlock, waiting to write (a writer or readers hold it) */
    HW_LOCK_CONDVAR,       /* a condition variable: no holder, it waits to be signalled */
    HW_LOCK_SEMAPHORE,     /* a semaphore: no holder, it waits for a post */
    HW_LOCK_BARRIER,       /* a barrier: it waits for the other threads to arrive */
    HW_LOCK_INTERNAL,      /* the C library's own lock (malloc's arena, a stdio stream) */
} hw_lock_kind;

/* "a mutex", "a condition variable", ... */
const char *hw_lock_kind_words(hw_lock_kind kind);
/* "mutex", "condition_variable", ... (the report's lock.kind) */
const char *hw_lock_kind_name(hw_lock_kind kind);
/* The kind a report's lock.kind names (HW_LOCK_UNKNOWN: none of them). */
hw_lock_kind hw_lock_kind_of_name(const char *name);
/* What a report's lock holder holds, in words: its time.blocked_in.lock's
 * kind ("a mutex" for a report without one: the only kind there was). */
const char *hw_report_lock_words(const char *kind_name);
/* Has a lock of this kind a holder to name? */
bool hw_lock_kind_has_holder(hw_lock_kind kind);

/* What a file descriptor is, as far as the verdict cares. */
typedef enum hw_fd_class {
    HW_FD_CLASS_NONE = 0, /* no descriptor, or unknown */
    HW_FD_CLASS_SOCKET,
    HW_FD_CLASS_IO, /* a file, a pipe, anything else with a descriptor */
} hw_fd_class;

/* The thread's state at one look (/proc/PID/task/TID/{stat,syscall,wchan}). */
/* Who is at the other end of what a blocked thread waits for, when it is on
 * this machine (agent/capture/wait_peer.h): the process holding the other
 * end of its TCP or unix socket (or listening on the port it connected
 * to), the writer of the pipe it reads, the child it waits for. */
typedef struct hw_wait_peer {
    pid_t pid;            /* 0: none named */
    char name[16];        /* its comm (the process's bytes: escape to print) */
    const char *role;     /* static: "peer", "listener", "writer", "child" */
    char state;           /* its state letter (its thread that holds the end, or the child's) */
    long syscall;         /* the system call it is in, -1 running or unknown */
    char wchan[48];       /* the kernel function it sleeps in ("" unknown): what a restart_syscall resumes */
    const char *missing;  /* static: why none is named when one was looked for, else NULL */
} hw_wait_peer;

typedef struct hw_blocked_look {
    bool valid;
    char state;          /* R, S, D, T, t, ... */
    bool in_syscall;     /* false: running, or blocked outside a system call (a page fault) */
    bool syscall_unreadable; /* its /proc syscall file is another user's (not root, no CAP_DAC_READ_SEARCH):
                                in_syscall is not known */
    long syscall;        /* its number (x86-64), when in_syscall */
    uint64_t args[6];
    char wchan[64];      /* the kernel function it sleeps in, "" if unknown */
    int fd;              /* the descriptor the call is on, -1 if none */
    char fd_kind[12];    /* "tcp", "pipe", "file", ... ("" if none) */
    char fd_text[256];   /* the descriptor in words ("TCP 127.0.0.1:40312 → 127.0.0.1:5432 (ESTABLISHED)") */
    char fd_object[32];  /* the socket or pipe it was when described ("socket:[81234]"), else "" */
    hw_fd_class fd_class;
    /* poll, ppoll, select, pselect6: how many descriptors the call waits on,
     * read from the process (fd is the first of them); -1 unknown.  0 with
     * a timeout is a sleep (Python 3.8-3.10's time.sleep is a select). */
    int wait_fd_count;
    hw_wait_peer peer;
    /* the call is one the kernel restarted after a stop (restart_syscall),
     * resolved from the stack's wait function (hw_restarted_syscall) */
    bool restarted;
    /* a futex wait on a lock (a glibc pthread_mutex_t, or a PI futex): the
     * thread that holds it, read from the lock in the process's memory
     * (0: not a lock, or no owner that is a thread of the process), and
     * the chain of holders from there, each waiting for the next one's
     * lock (holders[0] is lock_owner); `deadlock`: the chain came back to
     * a thread already in it */
    int lock_owner;
    uint64_t lock_address;
    hw_lock_kind lock_kind;
    int lock_readers;         /* an rwlock held for reading: by how many threads (0 unknown) */
    int lock_owner_pid;       /* a process-shared lock's owner in another process: that process */
    char lock_owner_name[16]; /* ... its comm (the process's bytes: escape to print) */
    const char *lock_missing; /* static: why no holder is named, when one was looked for */
#define HW_LOCK_BYTES 64
#define HW_LOCK_BYTES_BEFORE 16
    /* the lock's memory at the look, from HW_LOCK_BYTES_BEFORE before the
     * futex word (an rwlock's word is inside it), for its kind's layout */
    uint8_t lock_bytes[HW_LOCK_BYTES];
    bool lock_bytes_valid;
#define HW_LOCK_CHAIN_MAX 8
    int holders[HW_LOCK_CHAIN_MAX];
    size_t holder_count;
    bool deadlock;
    int deadlock_back_to; /* the thread the chain came back to (the hung one, or a holder) */
} hw_blocked_look;

/* The `time` section of one report: the hung thread over a window. */
typedef struct hw_time_section {
    bool present;             /* false: `missing` says why there are no figures */
    const char *missing;      /* a static sentence */
    const char *window_from;  /* "wait_return" (the kernel observer's counters at the loop wait's return),
                                 "stretch_start" (a reading while the loop last waited), "stop" (one at the
                                 last look that found its process stopped, where the stretch's clock
                                 starts again), "earlier_look" or "cpu_window" */
    uint64_t window_ns;       /* from the window's start to the reading */
    uint64_t window_offset_ns; /* the window's start minus the stretch's start */
    /* the window covers less than HW_TIME_WHOLE_SHARE of the stretch up to
     * its end: the verdict is of part of it */
    bool partial;
    bool has_schedstat;
    uint64_t on_cpu_ns, runqueue_ns, blocked_ns; /* blocked: the rest of the window but stopped_ns */
    uint64_t stopped_ns; /* held stopped by hangwatch's captures (decisions.md §44) */
    /* of runqueue_ns, the wait for a CPU the kernel had not counted yet (a
     * thread that never slept in the window, waiting for a CPU at its end) */
    uint64_t runqueue_pending_ns;
    bool has_faults;
    uint64_t major_faults;
    /* of on_cpu_ns, in user space and in the kernel (/proc's tick-sampled
     * split, held to on_cpu_ns) */
    bool has_cputime;
    uint64_t user_ns, system_ns;
    /* the process's CPU cgroup (the nearest with a quota) */
    bool has_cgroup;
    const char *cgroup_missing; /* why not, when !has_cgroup (static) */
    char cgroup[512];
    int cgroup_version;
    bool cgroup_limited;
    uint64_t quota_us, period_us;
    uint64_t throttled_ns, throttled_periods; /* over the window; throttled_ns at most the window */
    const char *throttle_missing; /* why there are no throttling figures (static), else NULL */
    /* pressure stall figures at the reading (cpu, memory, io "some avg10"), -1 when unknown: the
     * process's own cgroup's (v2) where the kernel keeps them, else the machine's */
    double psi_cpu, psi_memory, psi_io;
    bool psi_of_cgroup;
    hw_blocked_look look; /* what it was blocked in at the reading */
    /* what it slept in over the window, from the agent's looks at the
     * stretch (core/sleep_tally.h), when that is the verdict's reason and
     * not `look`: the looks found it running at the end, or asleep in
     * another kind of wait more often; slept_looks of `looks` found it so */
    hw_blocked_look slept;
    unsigned slept_looks, looks;
    hw_cause cause;
    hw_blocked_on blocked_on; /* when cause is blocked (or paging) */
    /* the largest other share of at least HW_CAUSE_SECONDARY_SHARE
     * (HW_CAUSE_UNKNOWN: none): working, starved (waiting for a CPU beyond
     * the quota's throttling), throttled or blocked, and its time */
    hw_cause secondary;
    uint64_t secondary_ns;
} hw_time_section;

/* The verdict's rules, on the fractions of the window (decisions.md §44):
 * throttled when the cgroup was throttled for at least half the window;
 * else working when on a CPU for at least 60 %; starved when waiting for a
 * CPU at least half; when runnable (on a CPU or waiting for one) 60 %, the
 * larger of working and starved; then on the thread's own time (the window
 * but its waits for a CPU and hangwatch's stops): blocked (or paging:
 * asleep outside any system call in state D, or with at least
 * HW_CAUSE_PAGING_FAULTS_PER_S major faults a second and no system call)
 * when asleep at least 60 % of it, working when on a CPU 60 % of it; else
 * mixed.  A thread
 * waiting for a CPU at least half the window whose cgroup's quota held it
 * for at least half of that wait is throttled, not starved: the quota, not
 * the neighbours, kept the CPU from it.  A second cause is named beside
 * the first when its share is at least a fifth of the window. */
#define HW_CAUSE_THROTTLED_SHARE 0.5
#define HW_CAUSE_WORKING_SHARE 0.6
#define HW_CAUSE_STARVED_SHARE 0.5
#define HW_CAUSE_BLOCKED_SHARE 0.6
#define HW_CAUSE_SECONDARY_SHARE 0.2
/* Asleep with this many major faults a second and no system call to sleep
 * in: paging. */
#define HW_CAUSE_PAGING_FAULTS_PER_S 50.0
/* A window this much of its stretch or more is the whole hang's. */
#define HW_TIME_WHOLE_SHARE 0.9

/* The user and system time /proc shows for a thread whose kernel counts
 * (tick-sampled) are `utime` and `stime` and whose time on a CPU is
 * `rtime` (all ns): its split of rtime in their proportion, as the
 * kernel's cputime_adjust makes it (without its memory of what it showed
 * before). */
void hw_cputime_adjust(uint64_t utime, uint64_t stime, uint64_t rtime, uint64_t *user, uint64_t *system);

/* Fill t->cause and t->blocked_on from its figures and its look (its
 * `slept` look when there is one). */
void hw_cause_decide(hw_time_section *t);

/* The look that says what the thread slept in: `slept` when valid, else
 * `look`. */
const hw_blocked_look *hw_time_blocked_look(const hw_time_section *t);

/* What a thread blocked in system call `nr` on a descriptor of class
 * `fd` waits for. */
hw_blocked_on hw_blocked_on_classify(long nr, hw_fd_class fd);

/* Does system call `nr` take a file descriptor as its first argument? */
bool hw_syscall_takes_fd(long nr);

/* Does system call `nr` wait on a set of descriptors it is given (poll,
 * ppoll, select, pselect6)? */
bool hw_syscall_waits_on_set(long nr);

/* A thread stopped in a sleep, a futex wait or a poll (by a debugger, or
 * by hangwatch's own captures) goes on in restart_syscall: the kernel
 * resumes the call it was in, and /proc says only "219".  The call is the
 * one the thread's innermost wait function makes: that function's name
 * (`symbol`, the C library's: clock_nanosleep, __futex_abstimed_wait_common,
 * poll ...) gives its number; -1 when it is none of those. */
long hw_restarted_syscall(const char *symbol);

/* Put the restarted call in place of restart_syscall in `look`, from the
 * innermost `count` function names of its thread's stack (NULL entries
 * skipped): true when it was one and is now resolved. */
bool hw_look_resolve_restart(hw_blocked_look *look, const char *const *innermost, size_t count);

/* A futex wait's lock named by the C library function the captured stack
 * waits in (`innermost`: its innermost native functions, some NULL): an
 * rwlock (its writer from the lock's bytes, or how many readers hold it),
 * a condition variable, a semaphore, a barrier, the C library's own lock;
 * a mutex keeps the kind its bytes gave.  A kind without a holder clears
 * the owner.  True when the look changed.  The writer is only a candidate:
 * the caller checks that it is a thread of the process. */
bool hw_look_classify_lock(hw_blocked_look *look, const char *const *innermost, size_t count);

/* A system call's name ("recvfrom"), or NULL for one this table lacks. */
const char *hw_syscall_name(long nr);

const char *hw_cause_name(hw_cause cause);          /* "working", ... ("unknown") */
const char *hw_blocked_on_name(hw_blocked_on what); /* "io", "network", ... ("" for none) */

/* One clause in words for the stderr line and `show`: "0.2 s on CPU, 1.8 s
 * throttled by cgroup /sys/fs/cgroup/cpu/app (quota 20 ms per 100 ms)",
 * "2.0 s blocked in recvfrom on TCP ..." ...; "" when there are no
 * figures.  Returns `out`. */
char *hw_time_clause(const hw_time_section *t, char *out, size_t len);

#endif
