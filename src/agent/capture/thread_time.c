/*
 * thread_time.c - readings of a thread's kernel counters and what it is
 * blocked in, for a hang report's `time` section (thread_time.h).
 */
#include "thread_time.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "agent/capture/fd_describe.h"
#include "agent/common/clock.h"
#include "agent/capture/proc_task.h"

/* "on_cpu_ns runqueue_ns timeslices" (/proc/PID/task/TID/schedstat, with
 * CONFIG_SCHED_INFO). */
static bool read_schedstat(pid_t pid, pid_t tid, uint64_t *on_cpu, uint64_t *queue, uint64_t *slices)
{
    char path[64], buf[128];
    snprintf(path, sizeof path, "/proc/%d/task/%d/schedstat", (int)pid, (int)tid);
    if (hw_proc_read_small(path, buf, sizeof buf) <= 0)
        return false;
    unsigned long long a, b, c = 0;
    if (sscanf(buf, "%llu %llu %llu", &a, &b, &c) < 2)
        return false;
    *on_cpu = a;
    *queue = b;
    *slices = c;
    return true;
}

bool hw_wait_before_stretch(const hw_thread_counters *in_wait, const hw_thread_counters *in_stretch,
                            uint64_t *wait_ns)
{
    if (!in_wait->valid || !in_stretch->valid || !in_wait->has_schedstat || !in_stretch->has_schedstat)
        return false;
    bool asleep = in_wait->state == 'S' || in_wait->state == 'D';
    if (!asleep || in_wait->timeslices == 0 || in_stretch->timeslices != in_wait->timeslices + 1 ||
        in_stretch->at_ns <= in_wait->at_ns || in_stretch->runqueue_ns < in_wait->runqueue_ns)
        return false;
    uint64_t wait = in_stretch->runqueue_ns - in_wait->runqueue_ns;
    uint64_t span = in_stretch->at_ns - in_wait->at_ns;
    *wait_ns = wait < span ? wait : span; /* the kernel's figure, held to the time between the readings */
    return true;
}

/* "voluntary_ctxt_switches:\tN" of /proc/PID/task/TID/status. */
static bool read_voluntary_switches(pid_t pid, pid_t tid, uint64_t *out)
{
    char path[64], buf[4096];
    snprintf(path, sizeof path, "/proc/%d/task/%d/status", (int)pid, (int)tid);
    if (hw_proc_read_small(path, buf, sizeof buf) <= 0)
        return false;
    const char *p = strstr(buf, "\nvoluntary_ctxt_switches:");
    if (p == NULL)
        return false;
    char *end;
    errno = 0;
    unsigned long long n = strtoull(p + 26, &end, 10);
    if (end == p + 26 || errno != 0)
        return false;
    *out = n;
    return true;
}

void hw_thread_counters_read(pid_t pid, pid_t tid, hw_cgroup_cpu *cgroup, hw_thread_counters *out)
{
    memset(out, 0, sizeof *out);
    hw_task_stat st;
    if (hw_task_stat_read(pid, tid, &st) == 0) {
        out->has_faults = out->has_cputime = true;
        out->major_faults = st.major_faults;
        out->state = st.state;
        out->user_ns = st.user_ticks * hw_clock_tick_ns();
        out->system_ns = st.system_ticks * hw_clock_tick_ns();
    }
    out->has_switches = read_voluntary_switches(pid, tid, &out->voluntary_switches);
    out->valid = out->has_faults; /* the thread is there to be read */
    if (cgroup != NULL && cgroup->version != 0 && hw_cgroup_cpu_read(cgroup) == 0) {
        out->has_throttle = true;
        out->throttled_ns = cgroup->throttled_ns;
        out->throttled_periods = cgroup->nr_throttled;
    }
    /* schedstat last, and the time right after it: the window's ends are
     * where the thread's own counters were read */
    out->has_schedstat = read_schedstat(pid, tid, &out->on_cpu_ns, &out->runqueue_ns, &out->timeslices);
    out->at_ns = hw_monotonic_ns();
}

/* Is `tid` a thread of process `pid`? */
static bool is_thread_of(pid_t pid, pid_t tid)
{
    char path[64];
    struct stat st;
    snprintf(path, sizeof path, "/proc/%d/task/%d", (int)pid, (int)tid);
    return tid > 0 && stat(path, &st) == 0;
}

#define FUTEX_OP_MASK 0x7f /* without FUTEX_PRIVATE_FLAG and FUTEX_CLOCK_REALTIME */
#define FUTEX_WAIT_OP 0
#define FUTEX_LOCK_PI_OP 6
#define FUTEX_WAIT_BITSET_OP 9
#define FUTEX_LOCK_PI2_OP 13
#define FUTEX_TID_BITS 0x3fffffffu
/* glibc's __kind bits */
#define MUTEX_ROBUST 16u
#define MUTEX_PI 32u
#define MUTEX_PP 64u
#define MUTEX_PSHARED 128u
#define MUTEX_KIND_UNSUPPORTED 0x7cu /* robust, PI, PP: their waits are not the plain lock word's */

/* Thread `owner` of another process than `pid` holds the lock (a
 * process-shared one): name its process, only where the thread id means
 * the same here (one pid namespace) and the agent's user may see that
 * process (root, or its own user's). */
static void other_process_owner(pid_t pid, pid_t owner, hw_blocked_look *out)
{
    char path[64], buf[2048];
    struct stat ours, theirs;
    snprintf(path, sizeof path, "/proc/%d/ns/pid", (int)pid);
    if (stat("/proc/self/ns/pid", &ours) != 0 || stat(path, &theirs) != 0 || ours.st_ino != theirs.st_ino) {
        out->lock_missing = "its owner is a thread of another process, in a pid namespace not the agent's";
        return;
    }
    snprintf(path, sizeof path, "/proc/%d/status", (int)owner);
    const char *tgid = hw_proc_read_small(path, buf, sizeof buf) > 0 ? strstr(buf, "\nTgid:") : NULL;
    const char *uid = tgid ? strstr(buf, "\nUid:") : NULL;
    long owner_pid = tgid ? strtol(tgid + 6, NULL, 10) : 0;
    long owner_uid = uid ? strtol(uid + 5, NULL, 10) : -1;
    if (owner_pid <= 0 || owner_uid < 0) {
        out->lock_missing = "its owner, a thread of another process, is gone";
        return;
    }
    if (geteuid() != 0 && (uid_t)owner_uid != geteuid()) {
        out->lock_missing = "its owner is a thread of another user's process";
        return;
    }
    out->lock_owner = owner;
    out->lock_owner_pid = (int)owner_pid;
    snprintf(path, sizeof path, "/proc/%ld/comm", owner_pid);
    if (hw_proc_read_small(path, out->lock_owner_name, sizeof out->lock_owner_name) > 0)
        out->lock_owner_name[strcspn(out->lock_owner_name, "\n")] = '\0';
}

/* The lock a thread of `pid` waits for in futex (arguments `args`): its
 * bytes around the word (for an rwlock, whose word is inside it), and for
 * a mutex its kind and owner.  glibc's pthread_mutex_t on x86-64: int
 * __lock, unsigned __count, int __owner, unsigned __nusers, int __kind;
 * the waiters sleep on __lock, which a plain mutex sets to 1 or 2 (2:
 * with waiters) and a robust one to its owner's thread id (with the
 * waiters bit); a PI mutex is locked with FUTEX_LOCK_PI, its word the
 * owner's.  Taken only when the call waits for the very value the lock
 * holds (a mutex, not a condition).  The owner must be another thread of
 * `pid`, or of a process the lock is shared with. */
static void read_lock(pid_t pid, pid_t waiter, const uint64_t args[6], hw_blocked_look *out)
{
    uint64_t addr = args[0];
    out->lock_address = addr;
    int32_t words[5];
    if (addr >= HW_LOCK_BYTES_BEFORE) {
        struct iovec local = {out->lock_bytes, HW_LOCK_BYTES},
                     remote = {(void *)(uintptr_t)(addr - HW_LOCK_BYTES_BEFORE), HW_LOCK_BYTES};
        out->lock_bytes_valid = process_vm_readv(pid, &local, 1, &remote, 1, 0) == (ssize_t)HW_LOCK_BYTES;
    }
    if (out->lock_bytes_valid) {
        memcpy(words, out->lock_bytes + HW_LOCK_BYTES_BEFORE, sizeof words);
    } else {
        struct iovec local = {words, sizeof words}, remote = {(void *)(uintptr_t)addr, sizeof words};
        if (process_vm_readv(pid, &local, 1, &remote, 1, 0) != (ssize_t)sizeof words)
            return;
    }
    unsigned op = (unsigned)args[1] & FUTEX_OP_MASK;
    uint32_t lock = (uint32_t)words[0], kind = (uint32_t)words[4];
    bool waits_for_it = (op == FUTEX_WAIT_OP || op == FUTEX_WAIT_BITSET_OP) && (uint32_t)args[2] == lock;
    pid_t owner = 0;
    if (op == FUTEX_LOCK_PI_OP || op == FUTEX_LOCK_PI2_OP) {
        owner = (pid_t)(lock & FUTEX_TID_BITS); /* a PI futex's word is its owner */
        out->lock_kind = HW_LOCK_PI_MUTEX;
    } else if (waits_for_it && (lock == 1 || lock == 2) && (kind & MUTEX_KIND_UNSUPPORTED) == 0) {
        owner = words[2];
        out->lock_kind = kind & MUTEX_PSHARED ? HW_LOCK_SHARED_MUTEX : HW_LOCK_MUTEX;
    } else if (waits_for_it && (kind & MUTEX_ROBUST) && !(kind & (MUTEX_PI | MUTEX_PP)) && (lock & FUTEX_TID_BITS)) {
        owner = (pid_t)(lock & FUTEX_TID_BITS);
        out->lock_kind = HW_LOCK_ROBUST_MUTEX;
    }
    if (owner <= 0 || owner == waiter)
        return;
    if (is_thread_of(pid, owner))
        out->lock_owner = owner;
    else if (kind & MUTEX_PSHARED)
        other_process_owner(pid, owner, out);
}

pid_t hw_lock_owner(pid_t pid, pid_t waiter, const uint64_t args[6])
{
    hw_blocked_look look = {.fd = -1};
    read_lock(pid, waiter, args, &look);
    return look.lock_owner_pid > 0 ? 0 : look.lock_owner;
}

/* From a thread waiting for a lock: its holder, the lock that one waits
 * for, ... up to HW_LOCK_CHAIN_MAX; a holder seen before is a deadlock. */
static void follow_lock_holders(pid_t pid, pid_t tid, hw_blocked_look *out)
{
    read_lock(pid, tid, out->args, out);
    pid_t next = out->lock_owner_pid > 0 ? 0 : out->lock_owner; /* another process's: not followed */
    while (next > 0 && out->holder_count < HW_LOCK_CHAIN_MAX) {
        for (size_t i = 0; i < out->holder_count; i++)
            if (out->holders[i] == next)
                out->deadlock = true;
        if (next == tid)
            out->deadlock = true;
        if (out->deadlock) {
            out->deadlock_back_to = next;
            return;
        }
        out->holders[out->holder_count++] = next;
        hw_task_syscall_info call;
        if (hw_task_syscall_read(pid, next, &call) != 0 || call.nr != SYS_futex)
            return; /* the holder runs, or waits for something else */
        next = hw_lock_owner(pid, next, call.args);
    }
}

#define WAIT_SET_POLLFDS 64 /* pollfd entries read of a poll's array */
#define WAIT_SET_BITS 1024  /* descriptors read of a select's sets (FD_SETSIZE) */

/* A poll's or select's descriptors, read from the process (untrusted: the
 * counts are bounded, the memory may be gone): how many it waits on, and
 * the first of them in out->fd.  wait_fd_count stays -1 when unreadable. */
static void read_wait_set(pid_t pid, hw_blocked_look *out)
{
    if (out->syscall == SYS_poll || out->syscall == SYS_ppoll) {
        uint64_t nfds = out->args[1];
        if (nfds == 0) {
            out->wait_fd_count = 0;
            return;
        }
        struct pollfd_words {
            int32_t fd;
            int16_t events, revents;
        } fds[WAIT_SET_POLLFDS];
        size_t n = nfds < WAIT_SET_POLLFDS ? (size_t)nfds : WAIT_SET_POLLFDS;
        struct iovec local = {fds, n * sizeof fds[0]}, remote = {(void *)(uintptr_t)out->args[0], n * sizeof fds[0]};
        if (process_vm_readv(pid, &local, 1, &remote, 1, 0) != (ssize_t)(n * sizeof fds[0]))
            return;
        int count = 0;
        for (size_t i = 0; i < n; i++) {
            if (fds[i].fd < 0)
                continue; /* poll skips a negative descriptor */
            if (count++ == 0)
                out->fd = fds[i].fd;
        }
        out->wait_fd_count = count + (nfds > n ? (int)(nfds - n < 65536 ? nfds - n : 65536) : 0);
        return;
    }
    /* select and pselect6: nfds, then the read, write and except sets */
    uint64_t nfds = out->args[0] < WAIT_SET_BITS ? out->args[0] : WAIT_SET_BITS;
    uint64_t words[WAIT_SET_BITS / 64] = {0};
    size_t nwords = (size_t)((nfds + 63) / 64);
    bool any_set = false;
    for (int s = 1; s <= 3 && nwords > 0; s++) {
        if (out->args[s] == 0)
            continue;
        uint64_t set[WAIT_SET_BITS / 64];
        struct iovec local = {set, nwords * 8}, remote = {(void *)(uintptr_t)out->args[s], nwords * 8};
        if (process_vm_readv(pid, &local, 1, &remote, 1, 0) != (ssize_t)(nwords * 8))
            return;
        for (size_t w = 0; w < nwords; w++)
            words[w] |= set[w];
        any_set = true;
    }
    int count = 0;
    for (uint64_t fd = 0; any_set && fd < nfds; fd++) {
        if (!(words[fd / 64] >> (fd % 64) & 1))
            continue;
        if (count++ == 0)
            out->fd = (int)fd;
    }
    out->wait_fd_count = count;
}

/* The call and its arguments, and what they lead to: the descriptor, a
 * lock's holders (not for a `brief` look), a poll's or select's set. */
static void set_call(pid_t pid, pid_t tid, long nr, const uint64_t args[6], bool brief, hw_blocked_look *out)
{
    out->syscall = nr;
    out->in_syscall = true;
    memcpy(out->args, args, sizeof out->args);
    if (hw_syscall_takes_fd(out->syscall) && out->args[0] <= (uint64_t)INT32_MAX)
        out->fd = (int)out->args[0];
    if (out->syscall == SYS_futex && !brief)
        follow_lock_holders(pid, tid, out);
    if (hw_syscall_waits_on_set(out->syscall))
        read_wait_set(pid, out);
}

#define ERESTARTSYS_CODE 512       /* the kernel's restart codes, as rax holds them negated */
#define ERESTART_RESTARTBLOCK_CODE 516

/* Is the instruction at `ip` in `pid` a `syscall` (0f 05)? */
static bool syscall_instruction_at(pid_t pid, uint64_t ip)
{
    unsigned char code[2];
    struct iovec local = {code, sizeof code};
    struct iovec remote = {(void *)(uintptr_t)ip, sizeof code};
    return process_vm_readv(pid, &local, 1, &remote, 1, 0) == (ssize_t)sizeof code && code[0] == 0x0f &&
           code[1] == 0x05;
}

/* Stopped inside the call's interruption (rax still the restart code), or
 * after the kernel set it up again and before it is entered (rip back on
 * its `syscall` instruction, rax the call again or restart_syscall). */
static bool stopped_on_the_way_back(pid_t pid, const struct user_regs_struct *regs)
{
    long rax = (long)regs->rax;
    long nr = (long)regs->orig_rax;
    if (nr < 0)
        return false;
    if (rax >= -ERESTART_RESTARTBLOCK_CODE && rax <= -ERESTARTSYS_CODE)
        return true;
    return (rax == nr || rax == SYS_restart_syscall) && syscall_instruction_at(pid, regs->rip);
}

bool hw_blocked_look_from_stop(pid_t pid, pid_t tid, const struct user_regs_struct *regs, hw_blocked_look *look)
{
    if (!look->valid || look->in_syscall || look->syscall_unreadable || !stopped_on_the_way_back(pid, regs))
        return false;
    const uint64_t args[6] = {regs->rdi, regs->rsi, regs->rdx, regs->r10, regs->r8, regs->r9};
    look->state = 'S';
    set_call(pid, tid, (long)regs->orig_rax, args, false, look);
    return true;
}

static void take_look(pid_t pid, pid_t tid, bool brief, hw_blocked_look *out)
{
    memset(out, 0, sizeof *out);
    out->fd = -1;
    out->wait_fd_count = -1;
    hw_task_stat st;
    if (hw_task_stat_read(pid, tid, &st) != 0)
        return;
    out->valid = true;
    out->state = st.state;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task/%d/wchan", (int)pid, (int)tid);
    if (!brief && (hw_proc_read_small(path, out->wchan, sizeof out->wchan) <= 0 || strcmp(out->wchan, "0") == 0))
        out->wchan[0] = '\0';
    hw_task_syscall_info call;
    int rc = hw_task_syscall_read(pid, tid, &call);
    out->syscall_unreadable = rc == -EACCES || rc == -EPERM;
    if (rc != 0 || call.nr < 0)
        return; /* running, blocked outside a system call, or unreadable */
    set_call(pid, tid, call.nr, call.args, brief, out);
}

void hw_blocked_look_take(pid_t pid, pid_t tid, hw_blocked_look *out)
{
    take_look(pid, tid, false, out);
}

void hw_blocked_look_brief(pid_t pid, pid_t tid, hw_blocked_look *out)
{
    take_look(pid, tid, true, out);
}

void hw_blocked_look_describe_fd(pid_t pid, hw_blocked_look *look)
{
    if (!look->valid || look->fd < 0)
        return;
    hw_fd_kind kind =
        hw_fd_describe_object(pid, look->fd, look->fd_text, sizeof look->fd_text, look->fd_object, sizeof look->fd_object);
    snprintf(look->fd_kind, sizeof look->fd_kind, "%s", hw_fd_kind_name(kind));
    look->fd_class = kind == HW_FD_TCP || kind == HW_FD_UDP || kind == HW_FD_UNIX || kind == HW_FD_SOCKET_OTHER
                         ? HW_FD_CLASS_SOCKET
                     : kind == HW_FD_UNKNOWN ? HW_FD_CLASS_NONE
                                             : HW_FD_CLASS_IO;
}

static uint64_t since(uint64_t later, uint64_t earlier)
{
    return later > earlier ? later - earlier : 0;
}

void hw_time_section_fill(hw_time_section *t, const hw_thread_counters *from, const hw_thread_counters *to,
                          const hw_cgroup_cpu *cgroup, int cgroup_error, uint64_t window_start_ns,
                          uint64_t stretch_start_ns, const char *window_from, const hw_blocked_look *look)
{
    memset(t, 0, sizeof *t);
    t->psi_cpu = t->psi_memory = t->psi_io = -1;
    if (look)
        t->look = *look;
    else
        t->look.fd = -1;
    if (from == NULL || !from->valid || to == NULL || !to->valid) {
        t->missing = to == NULL || !to->valid
                         ? "the thread could not be read (it is gone)"
                         : "no reading of the thread's counters from earlier in this stretch or the wait before it";
        return;
    }
    t->present = true;
    t->window_from = window_from;
    t->window_ns = since(to->at_ns, window_start_ns);
    t->window_offset_ns = since(window_start_ns, stretch_start_ns);
    t->partial = (double)t->window_ns < HW_TIME_WHOLE_SHARE * (double)since(to->at_ns, stretch_start_ns);
    t->has_schedstat = from->has_schedstat && to->has_schedstat;
    if (t->has_schedstat) {
        /* Held stopped by the agent's captures: asleep in the kernel's
         * count, but not the program's doing; the agent's count is exact.
         * The kernel's counters of a running thread lag up to a tick
         * (schedstat shows its runtime as of its last update), so each is
         * held to what is left of the window; blocked is the rest. */
        t->stopped_ns = since(to->agent_stopped_ns, from->agent_stopped_ns);
        if (t->stopped_ns > t->window_ns)
            t->stopped_ns = t->window_ns;
        uint64_t left = t->window_ns - t->stopped_ns;
        t->on_cpu_ns = since(to->on_cpu_ns, from->on_cpu_ns);
        if (t->on_cpu_ns > left)
            t->on_cpu_ns = left;
        t->runqueue_ns = since(to->runqueue_ns, from->runqueue_ns);
        if (t->runqueue_ns > left - t->on_cpu_ns)
            t->runqueue_ns = left - t->on_cpu_ns;
        t->blocked_ns = left - t->on_cpu_ns - t->runqueue_ns;
        /* The kernel adds a wait for a CPU to the run-queue figure only
         * when the thread gets one: a thread waiting right now shows that
         * wait as nothing, which the rest would call asleep.  A thread
         * awake at the window's start (it starts where the loop left its
         * wait, or the reading found it runnable) and runnable at its end
         * that made no voluntary switch of its own in between (each sleep
         * is one; the captures' stops, counted, are the others) never
         * slept: the rest was spent runnable.  A thread asleep all along
         * makes no switch either, hence the states. */
        bool awake_at_start = (window_from != NULL && (strcmp(window_from, "stretch_start") == 0 ||
                                                       strcmp(window_from, "wait_return") == 0)) ||
                              from->state == 'R';
        if (t->blocked_ns > 0 && awake_at_start && to->state == 'R' && from->has_switches && to->has_switches &&
            since(to->voluntary_switches, from->voluntary_switches) <= since(to->agent_stops, from->agent_stops)) {
            t->runqueue_pending_ns = t->blocked_ns;
            t->runqueue_ns += t->blocked_ns;
            t->blocked_ns = 0;
        }
    } else {
        t->missing = "the kernel keeps no schedstat for its threads (CONFIG_SCHED_INFO)";
    }
    t->has_faults = from->has_faults && to->has_faults;
    t->major_faults = t->has_faults ? since(to->major_faults, from->major_faults) : 0;
    t->has_cputime = t->has_schedstat && from->has_cputime && to->has_cputime;
    if (t->has_cputime) {
        /* clock ticks: the split, held to the exact time on a CPU */
        uint64_t user = since(to->user_ns, from->user_ns), system = since(to->system_ns, from->system_ns);
        t->system_ns = user + system > 0 ? (uint64_t)((double)t->on_cpu_ns * (double)system / (double)(user + system))
                                         : 0;
        t->user_ns = t->on_cpu_ns - t->system_ns;
    }
    if (cgroup != NULL && cgroup->version != 0) {
        t->has_cgroup = true;
        snprintf(t->cgroup, sizeof t->cgroup, "%s", cgroup->dir);
        t->cgroup_version = cgroup->version;
        t->cgroup_limited = cgroup->limited;
        t->quota_us = cgroup->quota_us;
        t->period_us = cgroup->period_us;
        if (from->cgroup_generation != to->cgroup_generation) {
            t->throttle_missing = "the process moved to this cgroup during the window";
        } else if (from->has_throttle && to->has_throttle) {
            /* Summed over the CPUs the group's run queues were throttled
             * on: held to the window, the thread's own clock. */
            t->throttled_ns = since(to->throttled_ns, from->throttled_ns);
            if (t->throttled_ns > t->window_ns)
                t->throttled_ns = t->window_ns;
            t->throttled_periods = since(to->throttled_periods, from->throttled_periods);
        } else {
            t->throttle_missing = "the cgroup's counters were not read at the window's start";
        }
    } else {
        t->cgroup_missing = cgroup_error == -ENOENT ? "no CPU controller holds the process"
                                                    : "its CPU cgroup could not be read";
    }
    t->psi_of_cgroup = hw_pressure_read(cgroup, &t->psi_cpu, &t->psi_memory, &t->psi_io);
    hw_cause_decide(t);
}

static double pressure_of(const char *path)
{
    char buf[256];
    if (hw_proc_read_small(path, buf, sizeof buf) <= 0)
        return -1;
    const char *some = strstr(buf, "some avg10=");
    return some ? strtod(some + 11, NULL) : -1;
}

bool hw_pressure_read(const hw_cgroup_cpu *cgroup, double *cpu, double *memory, double *io)
{
    if (cgroup != NULL && cgroup->version == 2 && cgroup->own_dir[0] != '\0') {
        char path[sizeof cgroup->own_dir + 32];
        snprintf(path, sizeof path, "%s/cpu.pressure", cgroup->own_dir);
        *cpu = pressure_of(path);
        if (*cpu >= 0) {
            snprintf(path, sizeof path, "%s/memory.pressure", cgroup->own_dir);
            *memory = pressure_of(path);
            snprintf(path, sizeof path, "%s/io.pressure", cgroup->own_dir);
            *io = pressure_of(path);
            return true;
        }
    }
    *cpu = pressure_of("/proc/pressure/cpu");
    *memory = pressure_of("/proc/pressure/memory");
    *io = pressure_of("/proc/pressure/io");
    return false;
}
