/*
 * hang_cause.c - the verdict of a hang's `time` section, and its words
 * (hang_cause.h).  The rules and their fractions are in decisions.md §44.
 */
#include "hang_cause.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>

#include "text_escape.h"

/* The blocking system calls a hung loop is found in, by what they wait
 * for; x86-64 numbers. */
typedef struct syscall_kind {
    long nr;
    const char *name;
    bool takes_fd;        /* its first argument is a descriptor */
    hw_blocked_on always; /* what it waits for whatever the descriptor (NONE: the descriptor says) */
} syscall_kind;

static const syscall_kind syscalls[] = {
    {SYS_read, "read", true, HW_BLOCKED_ON_NONE},
    {SYS_write, "write", true, HW_BLOCKED_ON_NONE},
    {SYS_readv, "readv", true, HW_BLOCKED_ON_NONE},
    {SYS_writev, "writev", true, HW_BLOCKED_ON_NONE},
    {SYS_pread64, "pread64", true, HW_BLOCKED_ON_NONE},
    {SYS_pwrite64, "pwrite64", true, HW_BLOCKED_ON_NONE},
    {SYS_preadv, "preadv", true, HW_BLOCKED_ON_NONE},
    {SYS_pwritev, "pwritev", true, HW_BLOCKED_ON_NONE},
    {SYS_recvfrom, "recvfrom", true, HW_BLOCKED_ON_NETWORK},
    {SYS_recvmsg, "recvmsg", true, HW_BLOCKED_ON_NETWORK},
    {SYS_recvmmsg, "recvmmsg", true, HW_BLOCKED_ON_NETWORK},
    {SYS_sendto, "sendto", true, HW_BLOCKED_ON_NETWORK},
    {SYS_sendmsg, "sendmsg", true, HW_BLOCKED_ON_NETWORK},
    {SYS_sendmmsg, "sendmmsg", true, HW_BLOCKED_ON_NETWORK},
    {SYS_connect, "connect", true, HW_BLOCKED_ON_NETWORK},
    {SYS_accept, "accept", true, HW_BLOCKED_ON_NETWORK},
    {SYS_accept4, "accept4", true, HW_BLOCKED_ON_NETWORK},
    {SYS_fsync, "fsync", true, HW_BLOCKED_ON_IO},
    {SYS_fdatasync, "fdatasync", true, HW_BLOCKED_ON_IO},
    {SYS_sync_file_range, "sync_file_range", true, HW_BLOCKED_ON_IO},
    {SYS_sendfile, "sendfile", true, HW_BLOCKED_ON_NONE},
    {SYS_splice, "splice", true, HW_BLOCKED_ON_NONE},
    {SYS_ioctl, "ioctl", true, HW_BLOCKED_ON_NONE},
    {SYS_flock, "flock", true, HW_BLOCKED_ON_LOCK},
    {SYS_fcntl, "fcntl", true, HW_BLOCKED_ON_LOCK},
    {SYS_open, "open", false, HW_BLOCKED_ON_IO},
    {SYS_openat, "openat", false, HW_BLOCKED_ON_IO},
    {SYS_sync, "sync", false, HW_BLOCKED_ON_IO},
    {SYS_futex, "futex", false, HW_BLOCKED_ON_LOCK},
    {SYS_wait4, "wait4", false, HW_BLOCKED_ON_CHILD},
    {SYS_waitid, "waitid", false, HW_BLOCKED_ON_CHILD},
    /* a vfork's parent (posix_spawn's too) waits for its child to exec */
    {SYS_clone, "clone", false, HW_BLOCKED_ON_CHILD},
    {SYS_clone3, "clone3", false, HW_BLOCKED_ON_CHILD},
    {SYS_vfork, "vfork", false, HW_BLOCKED_ON_CHILD},
    {SYS_nanosleep, "nanosleep", false, HW_BLOCKED_ON_SLEEP},
    {SYS_clock_nanosleep, "clock_nanosleep", false, HW_BLOCKED_ON_SLEEP},
    {SYS_pause, "pause", false, HW_BLOCKED_ON_SLEEP},
    {SYS_rt_sigsuspend, "rt_sigsuspend", false, HW_BLOCKED_ON_SLEEP},
    {SYS_rt_sigtimedwait, "rt_sigtimedwait", false, HW_BLOCKED_ON_SLEEP},
    {SYS_poll, "poll", false, HW_BLOCKED_ON_OTHER},
    {SYS_ppoll, "ppoll", false, HW_BLOCKED_ON_OTHER},
    {SYS_select, "select", false, HW_BLOCKED_ON_OTHER},
    {SYS_pselect6, "pselect6", false, HW_BLOCKED_ON_OTHER},
    {SYS_epoll_wait, "epoll_wait", true, HW_BLOCKED_ON_OTHER},
    {SYS_epoll_pwait, "epoll_pwait", true, HW_BLOCKED_ON_OTHER},
    {SYS_msgrcv, "msgrcv", false, HW_BLOCKED_ON_OTHER},
    {SYS_semop, "semop", false, HW_BLOCKED_ON_LOCK},
    {SYS_semtimedop, "semtimedop", false, HW_BLOCKED_ON_LOCK},
    {SYS_restart_syscall, "restart_syscall", false, HW_BLOCKED_ON_OTHER},
};

static const syscall_kind *find_syscall(long nr)
{
    for (size_t i = 0; i < sizeof syscalls / sizeof syscalls[0]; i++)
        if (syscalls[i].nr == nr)
            return &syscalls[i];
    return NULL;
}

const char *hw_syscall_name(long nr)
{
    const syscall_kind *k = find_syscall(nr);
    return k ? k->name : NULL;
}

bool hw_syscall_takes_fd(long nr)
{
    const syscall_kind *k = find_syscall(nr);
    return k != NULL && k->takes_fd;
}

bool hw_syscall_waits_on_set(long nr)
{
    return nr == SYS_poll || nr == SYS_ppoll || nr == SYS_select || nr == SYS_pselect6;
}

/* The C library's wait functions whose call the kernel restarts through
 * restart_syscall, and that call. */
static const struct {
    const char *function;
    long nr;
} restartable[] = {
    {"clock_nanosleep", SYS_clock_nanosleep},
    {"__clock_nanosleep", SYS_clock_nanosleep},
    {"__GI___clock_nanosleep", SYS_clock_nanosleep},
    {"__clock_nanosleep_time64", SYS_clock_nanosleep},
    {"nanosleep", SYS_nanosleep},
    {"__nanosleep", SYS_nanosleep},
    {"__GI___nanosleep", SYS_nanosleep},
    {"usleep", SYS_clock_nanosleep},
    {"sleep", SYS_clock_nanosleep},
    {"__sleep", SYS_clock_nanosleep},
    {"thrd_sleep", SYS_clock_nanosleep},
    {"__futex_abstimed_wait_common", SYS_futex},
    {"__futex_abstimed_wait_common64", SYS_futex},
    {"__GI___futex_abstimed_wait64", SYS_futex},
    {"__futex_abstimed_wait64", SYS_futex},
    {"__futex_abstimed_wait_cancelable64", SYS_futex},
    {"futex_wait", SYS_futex},
    {"poll", SYS_poll},
    {"__poll", SYS_poll},
    {"__GI___poll", SYS_poll},
    {"ppoll", SYS_ppoll},
    {"__ppoll", SYS_ppoll},
    {"__GI_ppoll", SYS_ppoll},
};

long hw_restarted_syscall(const char *symbol)
{
    for (size_t i = 0; symbol != NULL && i < sizeof restartable / sizeof restartable[0]; i++)
        if (strcmp(symbol, restartable[i].function) == 0)
            return restartable[i].nr;
    return -1;
}

bool hw_look_resolve_restart(hw_blocked_look *look, const char *const *innermost, size_t count)
{
    if (!look->valid || !look->in_syscall || look->syscall != SYS_restart_syscall)
        return false;
    for (size_t i = 0; i < count; i++) {
        if (innermost[i] == NULL)
            continue;
        long nr = hw_restarted_syscall(innermost[i]);
        if (nr < 0)
            return false; /* the innermost named function is no restartable wait */
        look->syscall = nr;
        look->restarted = true;
        return true;
    }
    return false;
}

/* ---- the lock a futex wait is on ---- */

static const struct {
    hw_lock_kind kind;
    const char *name;
    const char *words;
    bool has_holder;
} lock_kinds[] = {
    {HW_LOCK_UNKNOWN, "unknown", "a lock", true},
    {HW_LOCK_MUTEX, "mutex", "a mutex", true},
    {HW_LOCK_ROBUST_MUTEX, "robust_mutex", "a robust mutex", true},
    {HW_LOCK_PI_MUTEX, "pi_mutex", "a priority-inheriting mutex", true},
    {HW_LOCK_SHARED_MUTEX, "shared_mutex", "a process-shared mutex", true},
    {HW_LOCK_RWLOCK_READ, "rwlock_read", "an rwlock (to read)", true},
    {HW_LOCK_RWLOCK_WRITE, "rwlock_write", "an rwlock (to write)", true},
    {HW_LOCK_CONDVAR, "condition_variable", "a condition variable", false},
    {HW_LOCK_SEMAPHORE, "semaphore", "a semaphore", false},
    {HW_LOCK_BARRIER, "barrier", "a barrier", false},
    {HW_LOCK_INTERNAL, "internal_lock", "the C library's own lock", true},
};

static size_t lock_kind_index(hw_lock_kind kind)
{
    for (size_t i = 0; i < sizeof lock_kinds / sizeof lock_kinds[0]; i++)
        if (lock_kinds[i].kind == kind)
            return i;
    return 0;
}

const char *hw_lock_kind_words(hw_lock_kind kind)
{
    return lock_kinds[lock_kind_index(kind)].words;
}

const char *hw_lock_kind_name(hw_lock_kind kind)
{
    return lock_kinds[lock_kind_index(kind)].name;
}

hw_lock_kind hw_lock_kind_of_name(const char *name)
{
    for (size_t i = 0; name != NULL && i < sizeof lock_kinds / sizeof lock_kinds[0]; i++)
        if (strcmp(name, lock_kinds[i].name) == 0)
            return lock_kinds[i].kind;
    return HW_LOCK_UNKNOWN;
}

const char *hw_report_lock_words(const char *kind_name)
{
    hw_lock_kind kind = hw_lock_kind_of_name(kind_name);
    return kind == HW_LOCK_UNKNOWN ? "a mutex" : hw_lock_kind_words(kind);
}

bool hw_lock_kind_has_holder(hw_lock_kind kind)
{
    return lock_kinds[lock_kind_index(kind)].has_holder;
}

/* The C library's (glibc's) functions a futex wait is made in, by the
 * start of their names; the first of the innermost functions that is one
 * says the lock's kind.  The private lock wait before the shared one: its
 * name starts the same. */
static const struct {
    const char *prefix;
    hw_lock_kind kind;
} lock_functions[] = {
    {"pthread_rwlock_rdlock", HW_LOCK_RWLOCK_READ},
    {"pthread_rwlock_timedrdlock", HW_LOCK_RWLOCK_READ},
    {"pthread_rwlock_clockrdlock", HW_LOCK_RWLOCK_READ},
    {"__pthread_rwlock_rdlock", HW_LOCK_RWLOCK_READ},
    {"pthread_rwlock_wrlock", HW_LOCK_RWLOCK_WRITE},
    {"pthread_rwlock_timedwrlock", HW_LOCK_RWLOCK_WRITE},
    {"pthread_rwlock_clockwrlock", HW_LOCK_RWLOCK_WRITE},
    {"__pthread_rwlock_wrlock", HW_LOCK_RWLOCK_WRITE},
    {"pthread_cond_", HW_LOCK_CONDVAR},
    {"__pthread_cond_", HW_LOCK_CONDVAR},
    {"___pthread_cond_", HW_LOCK_CONDVAR},
    {"sem_wait", HW_LOCK_SEMAPHORE},
    {"sem_timedwait", HW_LOCK_SEMAPHORE},
    {"sem_clockwait", HW_LOCK_SEMAPHORE},
    {"__new_sem_wait", HW_LOCK_SEMAPHORE},
    {"__sem_wait", HW_LOCK_SEMAPHORE},
    {"pthread_barrier_wait", HW_LOCK_BARRIER},
    {"__pthread_barrier_wait", HW_LOCK_BARRIER},
    {"__lll_lock_wait_private", HW_LOCK_INTERNAL},
    {"pthread_mutex_", HW_LOCK_MUTEX},
    {"__pthread_mutex_", HW_LOCK_MUTEX},
    {"___pthread_mutex_", HW_LOCK_MUTEX},
    {"__lll_lock_wait", HW_LOCK_MUTEX},
};

static hw_lock_kind lock_function_kind(const char *name)
{
    for (size_t i = 0; name != NULL && i < sizeof lock_functions / sizeof lock_functions[0]; i++)
        if (strncmp(name, lock_functions[i].prefix, strlen(lock_functions[i].prefix)) == 0)
            return lock_functions[i].kind;
    return HW_LOCK_UNKNOWN;
}

static uint32_t u32_at(const uint8_t *bytes, size_t at)
{
    uint32_t v;
    memcpy(&v, bytes + at, sizeof v);
    return v;
}

/* glibc's pthread_rwlock_t (2.25 and later, x86-64): __readers (its count
 * above bit 3; bit 1: write-locked), __writers, __wrphase_futex,
 * __writers_futex, two pads, __cur_writer, __shared, __rwelision, pads,
 * __flags; a reader waits on __wrphase_futex, a writer on __writers_futex
 * or __wrphase_futex.  The lock starts where one of those two puts it and
 * its fields look like an rwlock's. */
#define RW_READERS 0
#define RW_CUR_WRITER 24
#define RW_SHARED 28
#define RW_FLAGS 48
#define RW_WRITE_LOCKED 2u
#define RW_READER_SHIFT 3
static void decode_rwlock(hw_blocked_look *look)
{
    /* __writers_futex, __wrphase_futex: a reader's is the second */
    static const size_t writer_futex_at[] = {12, 8}, reader_futex_at[] = {8, 12};
    const size_t *futex_at = look->lock_kind == HW_LOCK_RWLOCK_READ ? reader_futex_at : writer_futex_at;
    for (size_t i = 0; look->lock_bytes_valid && i < 2; i++) {
        size_t base = HW_LOCK_BYTES_BEFORE - futex_at[i];
        if (base + RW_FLAGS + 4 > HW_LOCK_BYTES || u32_at(look->lock_bytes, base + RW_FLAGS) > 2 ||
            u32_at(look->lock_bytes, base + RW_SHARED) > 1)
            continue;
        uint32_t readers = u32_at(look->lock_bytes, base + RW_READERS);
        uint32_t writer = u32_at(look->lock_bytes, base + RW_CUR_WRITER);
        look->lock_address -= futex_at[i];
        if ((readers & RW_WRITE_LOCKED) && writer > 0 && writer <= (uint32_t)INT32_MAX) {
            look->lock_owner = (int)writer;
        } else if (readers >> RW_READER_SHIFT) {
            look->lock_readers = (int)(readers >> RW_READER_SHIFT);
            look->lock_missing = "held for reading: which threads read is not kept";
        }
        return;
    }
    look->lock_missing = "its bytes are not an rwlock's";
}

bool hw_look_classify_lock(hw_blocked_look *look, const char *const *innermost, size_t count)
{
    if (!look->valid || !look->in_syscall || look->syscall != SYS_futex)
        return false;
    hw_lock_kind kind = HW_LOCK_UNKNOWN;
    for (size_t i = 0; i < count && kind == HW_LOCK_UNKNOWN; i++)
        kind = lock_function_kind(innermost[i]);
    if (kind == HW_LOCK_UNKNOWN || (kind == HW_LOCK_MUTEX && look->lock_kind != HW_LOCK_UNKNOWN))
        return false; /* not named, or a mutex its bytes told more of */
    if (kind == HW_LOCK_MUTEX && look->lock_kind == HW_LOCK_UNKNOWN) {
        look->lock_kind = kind;
        return true;
    }
    look->lock_kind = kind;
    look->lock_owner = 0;
    look->holder_count = 0;
    look->deadlock = false;
    look->lock_readers = 0;
    look->lock_owner_pid = 0;
    look->lock_missing = NULL;
    if (kind == HW_LOCK_RWLOCK_READ || kind == HW_LOCK_RWLOCK_WRITE)
        decode_rwlock(look);
    return true;
}

hw_blocked_on hw_blocked_on_classify(long nr, hw_fd_class fd)
{
    const syscall_kind *k = find_syscall(nr);
    if (k == NULL)
        return HW_BLOCKED_ON_OTHER;
    if (hw_syscall_waits_on_set(nr))
        return fd == HW_FD_CLASS_SOCKET ? HW_BLOCKED_ON_NETWORK
               : fd == HW_FD_CLASS_IO   ? HW_BLOCKED_ON_IO
                                        : HW_BLOCKED_ON_OTHER;
    if (k->always != HW_BLOCKED_ON_NONE)
        return k->always;
    if (fd == HW_FD_CLASS_SOCKET)
        return HW_BLOCKED_ON_NETWORK;
    return HW_BLOCKED_ON_IO;
}

const char *hw_cause_name(hw_cause cause)
{
    switch (cause) {
    case HW_CAUSE_WORKING:
        return "working";
    case HW_CAUSE_STARVED:
        return "starved";
    case HW_CAUSE_THROTTLED:
        return "throttled";
    case HW_CAUSE_BLOCKED:
        return "blocked";
    case HW_CAUSE_PAGING:
        return "paging";
    case HW_CAUSE_MIXED:
        return "mixed";
    case HW_CAUSE_UNKNOWN:
        break;
    }
    return "unknown";
}

const char *hw_blocked_on_name(hw_blocked_on what)
{
    switch (what) {
    case HW_BLOCKED_ON_IO:
        return "io";
    case HW_BLOCKED_ON_NETWORK:
        return "network";
    case HW_BLOCKED_ON_LOCK:
        return "lock";
    case HW_BLOCKED_ON_CHILD:
        return "child";
    case HW_BLOCKED_ON_SLEEP:
        return "sleep";
    case HW_BLOCKED_ON_OTHER:
        return "other";
    case HW_BLOCKED_ON_NONE:
        break;
    }
    return "";
}

static double share(uint64_t part, uint64_t whole)
{
    return whole ? (double)part / (double)whole : 0.0;
}

/* The largest share besides the verdict's, when it is one that matters. */
static void decide_secondary(hw_time_section *t, uint64_t throttled)
{
    /* a throttled thread's time shows as waiting for a CPU too */
    uint64_t queue_beyond_quota = t->runqueue_ns > throttled ? t->runqueue_ns - throttled : 0;
    const struct {
        hw_cause cause;
        uint64_t ns;
    } shares[] = {
        {HW_CAUSE_THROTTLED, throttled},
        {HW_CAUSE_STARVED, queue_beyond_quota},
        {HW_CAUSE_WORKING, t->on_cpu_ns},
        {HW_CAUSE_BLOCKED, t->blocked_ns},
    };
    t->secondary = HW_CAUSE_UNKNOWN;
    t->secondary_ns = 0;
    if (t->cause == HW_CAUSE_MIXED || t->cause == HW_CAUSE_UNKNOWN)
        return; /* mixed says its shares itself */
    for (size_t i = 0; i < sizeof shares / sizeof shares[0]; i++) {
        bool same = shares[i].cause == t->cause ||
                    (shares[i].cause == HW_CAUSE_BLOCKED && t->cause == HW_CAUSE_PAGING) ||
                    (shares[i].cause == HW_CAUSE_STARVED && t->cause == HW_CAUSE_THROTTLED);
        if (!same && share(shares[i].ns, t->window_ns) >= HW_CAUSE_SECONDARY_SHARE && shares[i].ns > t->secondary_ns) {
            t->secondary = shares[i].cause;
            t->secondary_ns = shares[i].ns;
        }
    }
}

void hw_cputime_adjust(uint64_t utime, uint64_t stime, uint64_t rtime, uint64_t *user, uint64_t *system)
{
    if (stime == 0)
        *system = 0;
    else if (utime == 0)
        *system = rtime;
    else
        *system = (uint64_t)((double)rtime * ((double)stime / ((double)stime + (double)utime)));
    *user = rtime - *system;
}

const hw_blocked_look *hw_time_blocked_look(const hw_time_section *t)
{
    return t->slept.valid ? &t->slept : &t->look;
}

void hw_cause_decide(hw_time_section *t)
{
    t->cause = HW_CAUSE_UNKNOWN;
    t->blocked_on = HW_BLOCKED_ON_NONE;
    t->secondary = HW_CAUSE_UNKNOWN;
    t->secondary_ns = 0;
    if (!t->present || !t->has_schedstat || t->window_ns == 0)
        return;
    uint64_t w = t->window_ns;
    /* the thread's own doing: the window but its waits for a CPU (the
     * machine's) and hangwatch's stops */
    uint64_t own = t->on_cpu_ns + t->blocked_ns;
    const hw_blocked_look *look = hw_time_blocked_look(t);
    uint64_t throttled = t->has_cgroup && t->cgroup_limited ? t->throttled_ns : 0;
    if (share(throttled, w) >= HW_CAUSE_THROTTLED_SHARE)
        t->cause = HW_CAUSE_THROTTLED;
    else if (share(t->on_cpu_ns, w) >= HW_CAUSE_WORKING_SHARE)
        t->cause = HW_CAUSE_WORKING;
    else if (share(t->runqueue_ns, w) >= HW_CAUSE_STARVED_SHARE)
        t->cause = share(throttled, t->runqueue_ns) >= 0.5 ? HW_CAUSE_THROTTLED : HW_CAUSE_STARVED;
    else if (share(t->on_cpu_ns + t->runqueue_ns, w) >= HW_CAUSE_WORKING_SHARE)
        /* runnable, on a busy machine: it worked for the larger part */
        t->cause = t->on_cpu_ns >= t->runqueue_ns ? HW_CAUSE_WORKING : HW_CAUSE_STARVED;
    else if (share(t->blocked_ns, own) >= HW_CAUSE_BLOCKED_SHARE) {
        /* asleep on faults: found so, or faulting fast with no system call to sleep in */
        bool faulting = look->valid && !look->in_syscall && look->state == 'D';
        bool fault_rate = t->has_faults && (double)t->major_faults >= HW_CAUSE_PAGING_FAULTS_PER_S * (double)w / 1e9;
        if (t->has_faults && t->major_faults > 0 && (faulting || (fault_rate && !(look->valid && look->in_syscall)))) {
            t->cause = HW_CAUSE_PAGING;
        } else {
            t->cause = HW_CAUSE_BLOCKED;
            t->blocked_on = look->valid && look->in_syscall ? hw_blocked_on_classify(look->syscall, look->fd_class)
                                                            : HW_BLOCKED_ON_OTHER;
            /* a poll or select on no descriptor: a sleep with a timeout */
            if (look->valid && look->in_syscall && hw_syscall_waits_on_set(look->syscall) &&
                look->wait_fd_count == 0)
                t->blocked_on = HW_BLOCKED_ON_SLEEP;
        }
    } else if (share(t->on_cpu_ns, own) >= HW_CAUSE_WORKING_SHARE) {
        t->cause = HW_CAUSE_WORKING;
    } else {
        t->cause = HW_CAUSE_MIXED;
    }
    decide_secondary(t, throttled);
}

/* Append to out[len] at *used, bounded. */
__attribute__((format(printf, 4, 5))) static void add(char *out, size_t len, size_t *used, const char *fmt, ...)
{
    if (*used >= len)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out + *used, len - *used, fmt, ap);
    va_end(ap);
    if (n > 0)
        *used = *used + (size_t)n < len ? *used + (size_t)n : len - 1;
}

static double seconds(uint64_t ns)
{
    return (double)ns / 1e9;
}

/* Text from the watched process, escaped for a terminal; the arrow
 * fd_describe writes between a socket's addresses stays an arrow. */
static const char *escaped(const char *in, char *out, size_t len)
{
    char tmp[1024];
    hw_escape_text(in, tmp, sizeof tmp);
    size_t used = 0;
    for (const char *p = tmp; *p && used + 4 < len;) {
        if (strncmp(p, "\\xe2\\x86\\x92", 12) == 0) {
            memcpy(out + used, "\xe2\x86\x92", 3);
            used += 3;
            p += 12;
        } else {
            out[used++] = *p++;
        }
    }
    out[used] = '\0';
    return out;
}

/* " on an rwlock, to write, held for reading by 3 threads": the lock of a
 * futex wait as far as it is known (its holder in this process is the
 * line's to name, with its stack). */
static void lock_in_words(const hw_blocked_look *look, char *out, size_t len, size_t *used)
{
    if (look->lock_kind != HW_LOCK_UNKNOWN)
        add(out, len, used, " on %s", hw_lock_kind_words(look->lock_kind));
    if (look->lock_kind != HW_LOCK_UNKNOWN && !hw_lock_kind_has_holder(look->lock_kind)) {
        add(out, len, used, " (it has no holder)");
        return;
    }
    if (look->lock_owner_pid > 0) {
        char name[80];
        hw_escape_text(look->lock_owner_name, name, sizeof name);
        add(out, len, used, ", held by thread %d of pid %d (%s)", look->lock_owner, look->lock_owner_pid, name);
    } else if (look->lock_readers > 0) {
        add(out, len, used, ", held for reading by %d thread%s", look->lock_readers, look->lock_readers == 1 ? "" : "s");
    } else if (look->lock_missing != NULL && look->lock_owner <= 0) {
        add(out, len, used, " (its holder is not known: %s)", look->lock_missing);
    }
}

/* "in recvfrom on TCP ... " for a blocked look. */
static void blocked_in(const hw_blocked_look *look, char *out, size_t len, size_t *used)
{
    if (!look->valid)
        return;
    if (look->syscall_unreadable) {
        add(out, len, used, " (in which system call is not known: its syscall file is another user's)%s%s",
            look->wchan[0] ? ", in " : "", look->wchan);
        return;
    }
    if (look->state == 'R') {
        /* running now: what it slept in earlier was not seen */
        add(out, len, used, " (in what is not known: it runs now, and no look found it asleep)");
        return;
    }
    if (!look->in_syscall) {
        add(out, len, used, " outside any system call%s%s", look->wchan[0] ? " in " : "", look->wchan);
        return;
    }
    const char *name = hw_syscall_name(look->syscall);
    if (name)
        add(out, len, used, " in %s", name);
    else
        add(out, len, used, " in system call %ld", look->syscall);
    if (look->restarted)
        add(out, len, used, " (restarted after a stop)");
    if (look->syscall == SYS_futex)
        lock_in_words(look, out, len, used);
    if (look->fd >= 0 && look->fd_text[0]) {
        char text[512];
        add(out, len, used, " on %s", escaped(look->fd_text, text, sizeof text));
        if (look->wait_fd_count > 1)
            add(out, len, used, " and %d other descriptor%s", look->wait_fd_count - 1,
                look->wait_fd_count == 2 ? "" : "s");
    } else if (look->wait_fd_count == 0 && hw_syscall_waits_on_set(look->syscall)) {
        add(out, len, used, " on no descriptor");
    }
    const hw_wait_peer *peer = &look->peer;
    if (peer->pid > 0 && peer->role != NULL) {
        char name[80];
        hw_escape_text(peer->name, name, sizeof name);
        const char *how = strcmp(peer->role, "child") == 0      ? "child"
                          : strcmp(peer->role, "writer") == 0   ? "written by"
                          : strcmp(peer->role, "listener") == 0 ? "not yet accepted by"
                                                                : "held by";
        add(out, len, used, ", %s pid %d (%s)", how, (int)peer->pid, name);
        const char *in = peer->syscall >= 0 ? hw_syscall_name(peer->syscall) : NULL;
        if (in && peer->syscall == SYS_restart_syscall)
            add(out, len, used, " in a call resumed after a stop");
        else if (in)
            add(out, len, used, " in %s", in);
    }
}

/* ", 1.5 s throttled by cgroup DIR (quota 20 ms per 100 ms)", `also` before the time. */
static void throttled_by(const hw_time_section *t, const char *also, uint64_t ns, char *out, size_t len, size_t *used)
{
    char dir[768];
    add(out, len, used, ", %s%.1f s throttled by cgroup %s (quota %llu ms per %llu ms)", also, seconds(ns),
        escaped(t->cgroup, dir, sizeof dir), (unsigned long long)(t->quota_us / 1000),
        (unsigned long long)(t->period_us / 1000));
}

char *hw_time_clause(const hw_time_section *t, char *out, size_t len)
{
    size_t used = 0;
    out[0] = '\0';
    if (!t->present || t->cause == HW_CAUSE_UNKNOWN)
        return out;
    add(out, len, &used, "%s", hw_cause_name(t->cause));
    if (t->cause == HW_CAUSE_BLOCKED)
        add(out, len, &used, " on %s", hw_blocked_on_name(t->blocked_on));
    add(out, len, &used, ": %.1f s on CPU", seconds(t->on_cpu_ns));
    if (t->has_cputime && t->on_cpu_ns >= 100000000ull && t->system_ns * 2 >= t->on_cpu_ns)
        add(out, len, &used, " (%.1f s of it in the kernel)", seconds(t->system_ns));
    switch (t->cause) {
    case HW_CAUSE_THROTTLED:
        throttled_by(t, "", t->throttled_ns, out, len, &used);
        break;
    case HW_CAUSE_STARVED:
        add(out, len, &used, ", %.1f s waiting for a CPU", seconds(t->runqueue_ns));
        break;
    case HW_CAUSE_BLOCKED:
    case HW_CAUSE_PAGING:
        add(out, len, &used, ", %.1f s asleep", seconds(t->blocked_ns));
        if (t->cause == HW_CAUSE_PAGING) {
            add(out, len, &used, " on %llu major faults", (unsigned long long)t->major_faults);
        } else {
            blocked_in(hw_time_blocked_look(t), out, len, &used);
            if (t->slept.valid)
                add(out, len, &used, " (%u of %u looks at the stretch)", t->slept_looks, t->looks);
        }
        break;
    case HW_CAUSE_MIXED:
        add(out, len, &used, ", %.1f s waiting for a CPU, %.1f s asleep", seconds(t->runqueue_ns),
            seconds(t->blocked_ns));
        break;
    case HW_CAUSE_WORKING:
    case HW_CAUSE_UNKNOWN:
        break;
    }
    switch (t->secondary) {
    case HW_CAUSE_THROTTLED:
        throttled_by(t, "also ", t->secondary_ns, out, len, &used);
        break;
    case HW_CAUSE_STARVED:
        add(out, len, &used, ", also %.1f s waiting for a CPU", seconds(t->secondary_ns));
        break;
    case HW_CAUSE_BLOCKED:
        add(out, len, &used, ", also %.1f s asleep", seconds(t->secondary_ns));
        break;
    default:
        break; /* working: the time on a CPU is said first */
    }
    add(out, len, &used, " of %.1f s", seconds(t->window_ns));
    if (t->partial)
        add(out, len, &used, " (partial: the stretch's first %.1f s are not in it)", seconds(t->window_offset_ns));
    return out;
}
