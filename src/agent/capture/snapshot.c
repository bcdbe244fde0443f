/*
 * snapshot.c - stopping a process's threads with ptrace from the outside,
 * copying their registers and stacks, and letting them go (snapshot.h).
 *
 * Sequence: enumerate /proc/PID/task; PTRACE_SEIZE every thread, then
 * PTRACE_INTERRUPT every thread, then wait for each stop, so that all of them
 * are held at once; look again for threads created meanwhile; PTRACE_GETREGS
 * and process_vm_readv of each stack; PTRACE_DETACH everything.  Buffers are
 * touched before the first stop (or kept so: stack_scratch.h), so the
 * stopped window holds only system calls.
 *
 * Why a helper thread: a tracer is a *thread*, and a tracee can only be
 * detached while it sits in a ptrace stop.  A thread that does not stop in
 * time (uninterruptible sleep, a vfork parent) cannot be detached by us, and
 * with an interrupt pending it would stop for good as soon as it came back to
 * user space.  The kernel detaches all tracees of a thread that exits
 * (exit_ptrace), which also drops their pending interrupt.  So every capture
 * runs its ptrace session in a short-lived helper thread; whatever it could
 * not detach is released when it ends.  In the agent that thread was made
 * ahead of time and waits for its session (helper_thread.h: creating a
 * thread can wait for the loader's lock).  hw_capture_start hands the
 * session over and returns; hw_capture_finish waits for it: a caller may
 * have several processes' captures under way at once, each on its helper.
 *
 * Waiting: SIGCHLD is blocked in the calling thread and in the helper, which
 * sleeps in sigtimedwait(SIGCHLD) and re-checks waitpid(tid, __WALL |
 * WNOHANG) after every wake-up: a stop is seen as it happens, and none is
 * lost between the two calls.  Each sleep is capped at WAIT_SLICE_NS, for a
 * SIGCHLD another thread took or one ignored.  One consumed here may have
 * hidden one meant for the agent's own children (standard signals do not
 * queue): it is raised again before the mask is restored.  A stop still
 * not over after opts.overdue_ms calls opts.overdue from this wait.
 *
 * Transparency: PTRACE_INTERRUPT makes a blocking system call return with a
 * restart code; after the detach the kernel restarts it with the time left,
 * so sleep(2) still sleeps two seconds.  The epoll waits are the exception:
 * the kernel returns EINTR from them after any stop (signal(7)).  One with
 * no timeout, found at the interrupt stop returning EINTR, gets the restart
 * code ERESTARTNOHAND put in its return register instead, which makes the
 * kernel run it again when the thread resumes, as it does for poll (a
 * signal with a handler arriving meanwhile still turns it into EINTR).  A
 * timed one is left its EINTR: run again it would wait its whole timeout
 * anew (docs/limits.md).  Other stop kinds:
 *  - signal-delivery-stop (a signal arrived between SEIZE and the interrupt):
 *    registers are captured there and the signal is handed back with
 *    PTRACE_DETACH's data argument, so it is delivered as if we never came.
 *  - group-stop (PTRACE_EVENT_STOP with WSTOPSIG SIGSTOP, SIGTSTP, SIGTTIN or
 *    SIGTTOU: the process is being or was stopped by job control): registers
 *    are captured and the thread is detached with no signal; the kernel then
 *    puts it back into the group-stop (__ptrace_unlink re-arms it), so the
 *    process stays stopped until its SIGCONT, and its parent gets no extra
 *    stop notification.  thread->group_stopped records it.
 *
 * Exits: a thread that is gone (ESRCH, or a zombie: PTRACE_SEIZE gives EPERM
 * for those) or that reports WIFEXITED/WIFSIGNALED is HW_THREAD_EXITED.  When
 * the whole process has ended (its /proc entry is gone, or its leader is a
 * zombie with every other thread dead too), out->process_exited says so,
 * its status is recorded and, if we are its parent, consumed (out->reaped).
 *
 * Refusals: a live thread that PTRACE_SEIZE refuses with EPERM is usually
 * held by another tracer (strace -p, gdb): its TracerPid and that tracer's
 * comm go into the snapshot, so the report and the agent's line can say who.
 */
#include "snapshot.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/common/priority_lender.h"
#include "helper_thread.h"
#include "snapshot_helpers.h"
#include "stack_scratch.h"
#include "syscall_resume.h"

#if !defined(__x86_64__)
#error "snapshot.c supports x86_64 only (struct user_regs_struct, rsp, the 128-byte red zone)"
#endif

#define RED_ZONE_BYTES 128u                 /* x86_64 SysV: below rsp, may hold live data */
#define WAIT_SLICE_NS (5ull * 1000 * 1000)  /* longest single sigtimedwait, see above */
#define RESCAN_ROUNDS 3                     /* passes looking for threads born during the stop */
#define RELEASE_WAIT_NS (200ull * 1000 * 1000)
#define OWN_RELEASE_WAIT_NS (1000ull * 1000 * 1000) /* a session's wait for our own tracers */
#define NS_PER_MS 1000000ull
/* A target not stopped this long after it was asked, and runnable, waits
 * for a CPU to take its stop on: it is lent SCHED_FIFO 1 until it stops
 * (decisions.md §66).  The pending interrupt stops it on its way back to
 * user space, so it runs none of its own code at that priority; its own
 * policy is put back while it is stopped, before it runs again. */
#define STOP_LOAN_AFTER_NS (10ull * NS_PER_MS)
#define NS_PER_S 1000000000ull

/* ---- the ptrace session ------------------------------------------------- */

typedef struct tracee {
    bool seized;          /* attached and not yet detached or reaped */
    bool stopped;         /* a ptrace stop was reported and we have not resumed it */
    int inject;           /* signal to hand back at PTRACE_DETACH */
    uint64_t interrupted; /* when PTRACE_INTERRUPT was sent */
    size_t stack_cap;     /* bytes allocated at thread->stack */
    bool stack_kept;      /* ... one of the capturing thread's kept buffers (stack_scratch.h) */
} tracee;

typedef struct session {
    pid_t pid;
    pid_t target;
    hw_capture_options opts;
    uint64_t timeout_ns;
    uint64_t grace_ns; /* the other threads' time to stop once the target has */
    hw_process_snapshot *out;
    tracee *tr; /* parallel to out->threads */
    size_t cap; /* entries allocated in both */
    bool is_parent;
    bool consumed_sigchld;
    sigset_t sigchld;
    pid_t helper_tid;
    uint64_t first_interrupt, last_resume;
    uint64_t all_stopped; /* the waits for the stops over */
    uint64_t overdue_at; /* when to call opts.overdue (0: not, or called) */
    uint64_t own_release_deadline; /* own_tracer_let_go's, set at its first wait */
    pid_t *listed;        /* the threads /proc listed at the start, sorted */
    size_t listed_count;
    bool target_listed;
    bool on_caller; /* adding threads on the capturing thread: its kept buffers may be lent */
} session;

/* Append a thread entry (not yet seized); allocates and touches its stack
 * buffer now, before anything is stopped.  Index, or -ENOMEM. */
static ssize_t add_thread(session *s, pid_t tid)
{
    hw_process_snapshot *out = s->out;
    if (out->thread_count == s->cap) {
        size_t ncap = s->cap ? s->cap * 2 : 8;
        hw_thread_snapshot *t = realloc(out->threads, ncap * sizeof *t);
        if (t == NULL)
            return -ENOMEM;
        out->threads = t;
        tracee *r = realloc(s->tr, ncap * sizeof *r);
        if (r == NULL)
            return -ENOMEM;
        s->tr = r;
        s->cap = ncap;
    }
    size_t i = out->thread_count;
    hw_thread_snapshot *th = &out->threads[i];
    tracee *t = &s->tr[i];
    memset(th, 0, sizeof *th);
    memset(t, 0, sizeof *t);
    th->tid = tid;
    th->is_main = tid == s->pid;
    th->is_target = tid == s->target;
    th->status = HW_THREAD_EXITED; /* until it is captured */
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task/%d/comm", (int)s->pid, (int)tid);
    hw_proc_read_comm(path, th->name);
    size_t want = th->is_target ? s->opts.target_stack_bytes : s->opts.other_stack_bytes;
    if (want > 0) /* its pages in now, not while the thread waits */
        th->stack = s->on_caller ? hw_stack_scratch_take(want, &t->stack_kept) : hw_stack_scratch_touched(want);
    t->stack_cap = th->stack != NULL ? want : 0;
    if (s->opts.interp_frames > 0) {
        th->interp.frames = calloc(s->opts.interp_frames, sizeof *th->interp.frames);
        th->interp.capacity = s->opts.interp_frames;
        if (th->interp.frames == NULL) {
            free(th->stack);
            th->stack = NULL;
            return -ENOMEM;
        }
    }
    out->thread_count++;
    return (ssize_t)i;
}

/* A live thread refused us: note who else traces it (the first one seen). */
static void note_tracer(session *s, pid_t tid)
{
    hw_process_snapshot *out = s->out;
    if (out->tracer_pid > 0)
        return;
    pid_t tracer = hw_task_tracer(s->pid, tid);
    if (tracer <= 0)
        return;
    out->tracer_pid = tracer;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/comm", (int)tracer);
    hw_proc_read_comm(path, out->tracer_name);
}

/* Whether tid, refused to us, was let go by a thread of this process that
 * traced it, waited for until the session's OWN_RELEASE_WAIT_NS is spent.
 * The helper of an earlier capture that timed out on the thread lets it go
 * only as that helper exits (wait_released gives it RELEASE_WAIT_NS); on a
 * busy machine its exit took longer, and the next capture named the agent
 * itself as the thread's tracer (decisions.md §66).  Only before the stop:
 * no thread of the program is held stopped while this waits. */
static bool own_tracer_let_go(session *s, pid_t tid)
{
    if (s->first_interrupt != 0)
        return false;
    for (;;) {
        pid_t tracer = hw_task_tracer(s->pid, tid);
        char path[64];
        snprintf(path, sizeof path, "/proc/self/task/%d", (int)tracer);
        if (tracer <= 0 || access(path, F_OK) != 0)
            return tracer == 0;
        uint64_t now = hw_snapshot_now_ns();
        if (s->own_release_deadline == 0)
            s->own_release_deadline = now + OWN_RELEASE_WAIT_NS;
        if (now >= s->own_release_deadline)
            return false;
        struct timespec ms = {0, 1000 * 1000};
        nanosleep(&ms, NULL);
    }
}

static void seize(session *s, size_t i)
{
    hw_thread_snapshot *th = &s->out->threads[i];
    long r = ptrace(PTRACE_SEIZE, th->tid, NULL, NULL);
    int e = errno;
    if (r != 0 && e == EPERM && own_tracer_let_go(s, th->tid)) {
        r = ptrace(PTRACE_SEIZE, th->tid, NULL, NULL);
        e = errno;
    }
    if (r == 0) {
        s->tr[i].seized = true;
        return;
    }
    /* A zombie cannot be attached either (EPERM): tell it from a refusal. */
    if (e == ESRCH || hw_task_is_dead(s->pid, th->tid)) {
        th->status = HW_THREAD_EXITED;
        return;
    }
    th->status = HW_THREAD_DENIED;
    th->error = e;
    if (e == EPERM)
        note_tracer(s, th->tid);
}

static void interrupt(session *s, size_t i)
{
    tracee *t = &s->tr[i];
    if (!t->seized)
        return;
    t->interrupted = hw_snapshot_now_ns();
    if (s->first_interrupt == 0)
        s->first_interrupt = t->interrupted;
    /* ESRCH: it is exiting; waitpid will report that. */
    (void)ptrace(PTRACE_INTERRUPT, s->out->threads[i].tid, NULL, NULL);
}

static bool target_stopped(session *s);

/* Wait for tid's next report until `deadline`.  1 with *status, 0 on
 * timeout, -1 with errno (ECHILD: not ours to wait for any more). */
static int wait_report(session *s, pid_t tid, int *status, uint64_t deadline)
{
    for (;;) {
        pid_t r = waitpid(tid, status, __WALL | WNOHANG);
        if (r == tid)
            return 1;
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        uint64_t now = hw_snapshot_now_ns();
        if (s->overdue_at != 0 && now >= s->overdue_at) {
            s->overdue_at = 0;
            if (!target_stopped(s))
                s->opts.overdue(s->opts.overdue_ctx);
            continue;
        }
        if (now >= deadline)
            return 0;
        uint64_t left = deadline - now;
        if (left > WAIT_SLICE_NS)
            left = WAIT_SLICE_NS;
        if (s->overdue_at != 0 && s->overdue_at - now < left)
            left = s->overdue_at - now;
        struct timespec ts = {.tv_sec = (time_t)(left / NS_PER_S), .tv_nsec = (long)(left % NS_PER_S)};
        if (sigtimedwait(&s->sigchld, NULL, &ts) == SIGCHLD)
            s->consumed_sigchld = true;
        /* woken, timed out or interrupted: waitpid tells what happened */
    }
}

static void note_exit(session *s, size_t i, int status)
{
    hw_thread_snapshot *th = &s->out->threads[i];
    s->tr[i].seized = false; /* reaped by that waitpid: nothing to detach */
    s->tr[i].stopped = false;
    th->status = HW_THREAD_EXITED;
    th->error = 0;
    if (th->tid == s->pid) {
        /* The leader's exit is reported only once the whole group is gone.
         * As tracer and parent this waitpid reaped it; as tracer only, the
         * kernel passes the status on to the real parent. */
        s->out->process_exited = true;
        s->out->exit_status = status;
        s->out->reaped = s->is_parent;
    }
}

static void note_report(session *s, size_t i, int status)
{
    tracee *t = &s->tr[i];
    hw_thread_snapshot *th = &s->out->threads[i];
    if (WIFEXITED(status) || WIFSIGNALED(status)) {
        note_exit(s, i, status);
        return;
    }
    if (!WIFSTOPPED(status))
        return;
    int sig = WSTOPSIG(status);
    unsigned event = ((unsigned)status >> 16) & 0xffu;
    t->stopped = true;
    t->inject = 0;
    if (event == 0) {
        /* signal-delivery-stop: hand the signal back at detach */
        t->inject = sig;
        th->injected_signal = sig;
    } else if (event == PTRACE_EVENT_STOP && sig != SIGTRAP) {
        /* group-stop: detached with no signal, it goes back to the stop */
        th->group_stopped = true;
    }
}

/* Is the target in its stop, or past needing one (gone, or never seized)?
 * Its report is taken here if it came while another thread was waited for. */
static bool target_stopped(session *s)
{
    for (size_t i = 0; i < s->out->thread_count; i++) {
        if (s->out->threads[i].tid != s->target)
            continue;
        int status;
        if (s->tr[i].seized && !s->tr[i].stopped && waitpid(s->target, &status, __WALL | WNOHANG) == s->target)
            note_report(s, i, status);
        return s->tr[i].stopped || !s->tr[i].seized;
    }
    return true;
}

/* Our wait found nothing (timeout) or could not wait (ECHILD).  If the
 * thread is in a ptrace stop anyway (its report was taken by someone else),
 * PTRACE_GETSIGINFO works and tells the stop kind; use it. */
static bool probe_stopped(session *s, size_t i)
{
    siginfo_t si;
    pid_t tid = s->out->threads[i].tid;
    if (ptrace(PTRACE_GETSIGINFO, tid, NULL, &si) != 0)
        return false;
    int status;
    if (((unsigned)si.si_code >> 8) == PTRACE_EVENT_STOP) /* interrupt or group-stop */
        status = ((PTRACE_EVENT_STOP << 8 | (si.si_code & 0xff)) << 8) | 0x7f;
    else /* signal-delivery-stop of si_signo */
        status = (si.si_signo << 8) | 0x7f;
    note_report(s, i, status);
    return true;
}

/* The target not stopped STOP_LOAN_AFTER_NS after it was asked, for want
 * of a CPU, is lent one until it stops. */
static void await_stop(session *s, size_t i, uint64_t deadline)
{
    tracee *t = &s->tr[i];
    hw_thread_snapshot *th = &s->out->threads[i];
    if (!t->seized || t->stopped)
        return;
    int status;
    uint64_t loan_at = t->interrupted + STOP_LOAN_AFTER_NS;
    bool may_lend = th->is_target && loan_at < deadline;
    int r = wait_report(s, th->tid, &status, may_lend ? loan_at : deadline);
    if (r == 0 && may_lend) {
        hw_rt_loan loan;
        s->out->target_boosted = hw_rt_lend(s->pid, th->tid, 1, &loan);
        r = wait_report(s, th->tid, &status, deadline);
        (void)hw_rt_loan_end(&loan); /* stopped, or given up on: its own scheduling back */
    }
    if (r == 1) {
        note_report(s, i, status);
        return;
    }
    int e = r == 0 ? ETIMEDOUT : errno;
    if (probe_stopped(s, i))
        return;
    if (e == ECHILD || hw_task_is_dead(s->pid, th->tid)) {
        th->status = HW_THREAD_EXITED;
        return;
    }
    th->status = HW_THREAD_TIMEOUT; /* still seized: released when the helper ends */
    th->error = e;
    th->state_at_timeout = hw_task_state(s->pid, th->tid);
    th->timeout_ms = (unsigned)((deadline - s->tr[i].interrupted) / NS_PER_MS);
}

static ssize_t read_remote(pid_t tid, uint64_t addr, unsigned char *buf, size_t len)
{
    struct iovec local = {.iov_base = buf, .iov_len = len};
    struct iovec remote = {.iov_base = (void *)(uintptr_t)addr, .iov_len = len};
    return process_vm_readv(tid, &local, 1, &remote, 1, 0);
}

/* Copy from rsp - red zone upwards.  The kernel stops at the first
 * unreadable page and returns what it read (the end of the stack mapping);
 * if the very first page fails, start again at the next page boundary, which
 * is at or below rsp when only the red zone lay in the unreadable page. */
static void copy_stack(hw_thread_snapshot *th, size_t cap)
{
    if (th->stack == NULL || cap == 0)
        return;
    const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t sp = th->regs.rsp;
    uint64_t start = sp >= RED_ZONE_BYTES ? sp - RED_ZONE_BYTES : 0;
    while (start <= sp) {
        ssize_t n = read_remote(th->tid, start, th->stack, cap);
        if (n > 0) {
            th->stack_start = start;
            th->stack_len = (size_t)n;
            return;
        }
        if (n < 0 && errno == ESRCH)
            return;
        start = (start / page + 1) * page;
    }
}

/* Stopped by our interrupt on its way out of an epoll wait with no timeout
 * that the stop made return EINTR: put ERESTARTNOHAND in its return
 * register so that the kernel runs the call again at the resume (see the
 * top of this file).  The captured registers keep what was read. */
static void restart_untimed_epoll_wait(const hw_thread_snapshot *th)
{
    if (hw_syscall_is_untimed_epoll_eintr(&th->regs))
        (void)ptrace(PTRACE_POKEUSER, th->tid, (void *)offsetof(struct user_regs_struct, rax),
                     (void *)(intptr_t)-HW_KERNEL_ERESTARTNOHAND);
}

static void capture_one(session *s, size_t i)
{
    tracee *t = &s->tr[i];
    hw_thread_snapshot *th = &s->out->threads[i];
    if (!t->stopped)
        return;
    if (ptrace(PTRACE_GETREGS, th->tid, NULL, &th->regs) != 0) {
        /* ESRCH while stopped: killed (SIGKILL) meanwhile */
        th->error = errno;
        th->status = th->error == ESRCH ? HW_THREAD_EXITED : HW_THREAD_DENIED;
        if (th->status == HW_THREAD_EXITED)
            th->error = 0;
        return;
    }
    th->status = HW_THREAD_CAPTURED;
    th->error = 0;
    copy_stack(th, t->stack_cap);
    if (t->inject == 0 && !th->group_stopped)
        restart_untimed_epoll_wait(th);
}

static bool detach(session *s, size_t i)
{
    tracee *t = &s->tr[i];
    hw_thread_snapshot *th = &s->out->threads[i];
    if (!t->seized || !t->stopped)
        return true;
    if (ptrace(PTRACE_DETACH, th->tid, NULL, (void *)(intptr_t)t->inject) != 0)
        return false; /* ESRCH: it is being killed; reaped below */
    uint64_t now = hw_snapshot_now_ns();
    t->seized = false;
    t->stopped = false;
    th->stopped_ns = now - t->interrupted;
    s->last_resume = now;
    return true;
}

/* Threads that could not be detached because they were dying: collect their
 * exit so they do not linger as traced zombies (and so the process's status
 * is seen when the leader was one of them). */
static void reap_dying(session *s)
{
    for (size_t i = 0; i < s->out->thread_count; i++) {
        tracee *t = &s->tr[i];
        for (int tries = 0; tries < 4 && t->seized && t->stopped; tries++) {
            int status;
            uint64_t deadline = hw_snapshot_now_ns() + s->timeout_ns;
            int r = wait_report(s, s->out->threads[i].tid, &status, deadline);
            if (r != 1)
                break; /* left to the helper's exit */
            note_report(s, i, status);
            if (t->stopped)
                (void)detach(s, i);
        }
    }
}

static bool known_tid(const session *s, pid_t tid)
{
    for (size_t i = 0; i < s->out->thread_count; i++)
        if (s->out->threads[i].tid == tid)
            return true;
    return false;
}

/* Threads created between the enumeration and their creator's stop are
 * missed by the first pass: look again while everything else is held.
 * Only threads not listed at the start are new (those the bound left out
 * stay out); past the bound, a new thread is counted as left out, and at
 * the bound there is no second look (a thread born during the stop is
 * then neither taken nor counted). */
static void rescan(session *s)
{
    const size_t max = s->opts.max_threads;
    /* At the bound already: nothing born now could be taken, and listing
     * tens of thousands of threads again would only lengthen the stop. */
    if (max > 0 && s->out->thread_count >= max)
        return;
    for (int round = 0; round < RESCAN_ROUNDS; round++) {
        pid_t *tids;
        size_t n;
        if (hw_task_list(s->pid, &tids, &n) != 0)
            return;
        size_t before = s->out->thread_count;
        for (size_t k = 0; k < n; k++) {
            if (bsearch(&tids[k], s->listed, s->listed_count, sizeof *tids, hw_pid_compare) != NULL ||
                known_tid(s, tids[k]))
                continue;
            s->out->enumerated_thread_count++;
            if (max > 0 && s->out->thread_count >= max) {
                s->out->threads_left_out++;
                continue;
            }
            ssize_t i = add_thread(s, tids[k]);
            if (i < 0)
                break;
            seize(s, (size_t)i);
        }
        free(tids);
        size_t after = s->out->thread_count;
        if (after == before)
            return;
        for (size_t i = before; i < after; i++)
            interrupt(s, i);
        uint64_t deadline = hw_snapshot_now_ns() + s->grace_ns;
        for (size_t i = before; i < after; i++)
            await_stop(s, i, deadline);
    }
}

static void *session_main(void *arg)
{
    session *s = arg;
    s->helper_tid = gettid();
    /* Work in hand until the end: stuck behind a thread at idle time in
     * the allocator, it is lent to (priority_lender.h). */
    hw_rt_step_open();
    /* Stopping one thread (a sample) is fastest from the CPU it last ran on:
     * the stop and this helper's wake-up stay on one run queue (benchmarks.md). */
    if (!s->opts.all_threads) {
        int cpu = hw_task_last_cpu(s->out->pid, s->target);
        if (cpu >= 0 && cpu < CPU_SETSIZE) {
            cpu_set_t set;
            CPU_ZERO(&set);
            CPU_SET(cpu, &set);
            sched_setaffinity(0, sizeof set, &set);
        }
    }
    size_t n = s->out->thread_count;
    /* Where each thread runs, read before the stop so that it costs the
     * program nothing (a /proc read each: only for a few threads). */
    int *cpus = s->opts.all_threads && n <= 64 ? calloc(n ? n : 1, sizeof *cpus) : NULL;
    for (size_t i = 0; cpus && i < n; i++)
        cpus[i] = hw_task_last_cpu(s->out->pid, s->out->threads[i].tid);
    for (size_t i = 0; i < n; i++)
        seize(s, i);
    for (size_t i = 0; i < n; i++)
        interrupt(s, i);
    uint64_t deadline = s->first_interrupt + s->timeout_ns;
    if (s->opts.overdue != NULL && s->opts.overdue_ms > 0)
        s->overdue_at = s->first_interrupt + (uint64_t)s->opts.overdue_ms * NS_PER_MS;
    for (size_t i = 0; i < n; i++) /* the target first: the others hold it stopped only grace_ns more */
        if (s->out->threads[i].is_target)
            await_stop(s, i, deadline);
    uint64_t others = hw_snapshot_now_ns() + s->grace_ns;
    for (size_t i = 0; i < n; i++)
        if (!s->out->threads[i].is_target)
            await_stop(s, i, others < deadline ? others : deadline);
    s->all_stopped = hw_snapshot_now_ns();
    s->overdue_at = 0;
    if (s->opts.all_threads)
        rescan(s);
    for (size_t i = 0; i < s->out->thread_count; i++)
        capture_one(s, i);
    /* What an interpreter keeps that changes as it runs (its frame chain)
     * is read now, while nothing moves; and whatever else must be done
     * while the threads cannot run (kobs_start.h). */
    if (s->opts.while_stopped != NULL)
        s->opts.while_stopped(s->opts.while_stopped_ctx, s->out);
    /* Release last the threads that ran on the helper's own CPU: each
     * thread then finds its CPU free when it is woken, instead of being
     * woken onto another thread's CPU, where two of the program's threads
     * would share one CPU while the report worker takes the other
     * (docs/benchmarks.md, "Report worker"). */
    bool all_detached = true;
    int helper_cpu = cpus ? sched_getcpu() : -1;
    for (size_t i = 0; i < s->out->thread_count; i++)
        if (helper_cpu < 0 || i >= n || cpus[i] != helper_cpu)
            all_detached &= detach(s, i);
    for (size_t i = 0; helper_cpu >= 0 && i < n; i++)
        if (cpus[i] == helper_cpu)
            all_detached &= detach(s, i);
    free(cpus);
    if (!all_detached)
        reap_dying(s);
    hw_rt_step_leave();
    return NULL;
}

/* The session on a helper kept waiting (helper_thread.h). */
static void session_run(void *arg)
{
    (void)session_main(arg);
}

/* ---- after the session ------------------------------------------------- */

/* A thread that timed out is detached by the kernel when the helper exits,
 * which can be just after pthread_join returned (or after the helper
 * posted that its session is over).  Wait (bounded) until its
 * TracerPid no longer names the helper, so an immediate next capture can
 * attach again. */
static void wait_released(const session *s)
{
    uint64_t deadline = hw_snapshot_now_ns() + RELEASE_WAIT_NS;
    for (size_t i = 0; i < s->out->thread_count; i++) {
        if (!s->tr[i].seized)
            continue;
        for (;;) {
            if (hw_task_tracer(s->pid, s->out->threads[i].tid) != s->helper_tid)
                break;
            if (hw_snapshot_now_ns() >= deadline)
                return;
            struct timespec ts = {0, 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
}

/* After the resume: stacks read into kept buffers get buffers of their own. */
static void give_back_kept_stacks(session *s)
{
    for (size_t i = 0; i < s->out->thread_count; i++) {
        hw_thread_snapshot *th = &s->out->threads[i];
        if (!s->tr[i].stack_kept)
            continue;
        s->tr[i].stack_kept = false;
        th->stack = hw_stack_scratch_give_back(th->stack, th->status == HW_THREAD_CAPTURED ? th->stack_len : 0);
        th->stack_len = s->tr[i].stack_cap = th->stack != NULL ? th->stack_len : 0;
    }
}

/* Give the stack copies their final size (after the resume: realloc may
 * copy) and record the process's end if it has ended (snapshot_helpers.h). */
static void finish(session *s)
{
    hw_process_snapshot *out = s->out;
    give_back_kept_stacks(s);
    for (size_t i = 0; i < out->thread_count; i++) {
        hw_thread_snapshot *th = &out->threads[i];
        if (th->status != HW_THREAD_CAPTURED || th->stack_len == 0) {
            free(th->stack);
            th->stack = NULL;
            th->stack_len = 0;
            th->stack_start = 0;
        } else if (th->stack_len < s->tr[i].stack_cap) {
            unsigned char *smaller = realloc(th->stack, th->stack_len);
            if (smaller != NULL)
                th->stack = smaller;
        }
    }
    if (s->first_interrupt != 0 && s->last_resume > s->first_interrupt)
        out->stop_wall_ns = s->last_resume - s->first_interrupt;
    if (s->first_interrupt != 0 && s->all_stopped > s->first_interrupt)
        out->stopping_ns = s->all_stopped - s->first_interrupt;

    if (!s->opts.maps_later)
        hw_capture_read_maps(out, s->opts.maps_max);
    hw_snapshot_note_end(s->pid, s->opts.all_threads, s->is_parent, out);
}

/* With more threads than the bound: mark in `take` the target, the main
 * thread and the threads to keep, then the lowest tids (the oldest) up to
 * the bound.  How many were marked. */
static size_t choose_threads(const session *s, const pid_t *tids, size_t n, bool *take)
{
    const size_t max = s->opts.max_threads;
    size_t chosen = 0;
    pid_t first[2 + HW_CAPTURE_KEEP_MAX];
    size_t firsts = 0;
    first[firsts++] = s->target;
    first[firsts++] = s->pid;
    for (size_t i = 0; i < s->opts.keep_count && i < HW_CAPTURE_KEEP_MAX; i++)
        first[firsts++] = s->opts.keep_tids[i];
    for (size_t i = 0; i < firsts && chosen < max; i++) {
        const pid_t *at = bsearch(&first[i], tids, n, sizeof *tids, hw_pid_compare);
        if (at != NULL && !take[at - tids]) {
            take[at - tids] = true;
            chosen++;
        }
    }
    for (size_t k = 0; k < n && chosen < max; k++)
        if (!take[k]) {
            take[k] = true;
            chosen++;
        }
    return chosen;
}

/* The process's threads, listed now (kept in s->listed for the rescan),
 * and the entries of those the capture takes.  0 or -errno. */
static int list_threads(session *s)
{
    hw_process_snapshot *out = s->out;
    int r = hw_task_list(s->pid, &s->listed, &s->listed_count);
    if (r == -ENOENT || r == -ESRCH)
        out->process_exited = true; /* gone, and already reaped by its parent */
    if (r != 0)
        return r == -ENOENT ? -ESRCH : r;
    const pid_t *tids = s->listed;
    size_t n = s->listed_count;
    out->enumerated_thread_count = n;
    bool *take = NULL;
    if (s->opts.all_threads && s->opts.max_threads > 0 && n > s->opts.max_threads) {
        take = calloc(n, sizeof *take);
        if (take == NULL)
            return -ENOMEM;
        out->threads_left_out = n - choose_threads(s, tids, n, take);
    }
    s->target_listed = bsearch(&s->target, tids, n, sizeof *tids, hw_pid_compare) != NULL;
    for (size_t k = 0; k < n && r == 0; k++)
        if (take != NULL ? take[k] : s->opts.all_threads || tids[k] == s->target)
            r = add_thread(s, tids[k]) < 0 ? -ENOMEM : 0;
    free(take);
    if (r == 0 && !s->opts.all_threads && !s->target_listed)
        r = add_thread(s, s->target) < 0 ? -ENOMEM : 0; /* reported as exited, never seized */
    return r;
}

/* A capture under way (hw_capture_start): its session, on a helper. */
struct hw_capture_flight {
    session s;
    bool running;      /* a helper runs the session: hw_capture_finish waits for it */
    bool on_waiting;   /* ... the waiting helper, which posts `done`; else one made for it, joined */
    sem_t done;
    pthread_t helper;
    sigset_t old_mask; /* the caller's, before SIGCHLD was blocked for the session */
};

/* Hand the session to a helper: the one waiting (helper_thread.h), else
 * one made now.  0 or an errno value (no helper could be made). */
static int session_start(hw_capture_flight *f)
{
    session *s = &f->s;
    sigset_t all, saved;
    pthread_sigmask(SIG_BLOCK, &s->sigchld, &f->old_mask);
    if (sem_init(&f->done, 0, 0) == 0) {
        if (hw_capture_helper_take(session_run, s, &f->done, s->opts.avoid_cpu)) {
            f->on_waiting = f->running = true;
            return 0;
        }
        sem_destroy(&f->done);
    }
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &saved); /* the helper inherits it */
    int e = hw_helper_thread_create(&f->helper, session_main, s);
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    if (e != 0)
        pthread_sigmask(SIG_SETMASK, &f->old_mask, NULL);
    f->running = e == 0;
    return e;
}

static void session_wait(hw_capture_flight *f)
{
    bool in_step = hw_rt_step_close(); /* waiting for the session is not being stuck: its own step says */
    if (f->on_waiting) {
        while (sem_wait(&f->done) != 0 && errno == EINTR)
            ;
        sem_destroy(&f->done);
    } else {
        pthread_join(f->helper, NULL);
    }
    if (in_step)
        hw_rt_step_open();
    if (f->s.consumed_sigchld)
        kill(getpid(), SIGCHLD); /* it may have stood for one of ours */
    pthread_sigmask(SIG_SETMASK, &f->old_mask, NULL);
}

/* A capture that could not run: what it holds freed, `r` returned. */
static int abandon(hw_capture_flight *f, int r)
{
    hw_process_snapshot *out = f->s.out;
    bool exited = out->process_exited;
    pid_t pid = f->s.pid;
    free(f->s.listed);
    give_back_kept_stacks(&f->s);
    free(f->s.tr);
    free(f);
    hw_process_snapshot_free(out);
    out->pid = pid;
    out->exit_status = -1;
    out->process_exited = exited;
    return r;
}

int hw_capture_start(pid_t pid, const hw_capture_options *opts, hw_process_snapshot *out, hw_capture_flight **flight)
{
    if (flight == NULL || out == NULL)
        return -EINVAL;
    *flight = NULL;
    memset(out, 0, sizeof *out);
    out->pid = pid;
    out->exit_status = -1;
    if (pid <= 0)
        return -EINVAL;
    hw_capture_flight *f = calloc(1, sizeof *f);
    if (f == NULL)
        return -ENOMEM;
    session *s = &f->s;
    s->pid = pid;
    s->out = out;
    if (opts != NULL)
        s->opts = *opts;
    else
        hw_capture_options_default(&s->opts, pid);
    s->target = s->opts.target_tid > 0 ? s->opts.target_tid : pid;
    s->timeout_ns = (uint64_t)(s->opts.stop_timeout_ms > 0 ? s->opts.stop_timeout_ms : 500) * NS_PER_MS;
    s->grace_ns = s->opts.context_grace_ms > 0 ? (uint64_t)s->opts.context_grace_ms * NS_PER_MS : s->timeout_ns;
    sigemptyset(&s->sigchld);
    sigaddset(&s->sigchld, SIGCHLD);

    char path[64];
    snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
    hw_proc_read_comm(path, out->process_name);
    out->namespace_pid = hw_proc_namespace_pid(pid);
    struct stat owner;
    snprintf(path, sizeof path, "/proc/%d", (int)pid);
    if (stat(path, &owner) == 0) {
        out->owner_known = true;
        out->owner_uid = owner.st_uid;
    }
    hw_task_stat ps;
    if (hw_task_stat_read(pid, 0, &ps) == 0)
        s->is_parent = ps.ppid == getpid();

    s->on_caller = true; /* the threads listed now: the capturing thread's kept buffers */
    int r = list_threads(s);
    s->on_caller = false;
    bool run = r == 0 && (s->opts.all_threads ? out->thread_count > 0 : s->target_listed);
    if (run)
        r = -session_start(f);
    if (r != 0)
        return abandon(f, r);
    *flight = f;
    return 0;
}

int hw_capture_finish(hw_capture_flight *f)
{
    if (f == NULL)
        return -EINVAL;
    if (f->running) {
        session_wait(f);
        wait_released(&f->s);
    }
    free(f->s.listed);
    finish(&f->s);
    free(f->s.tr);
    free(f);
    return 0;
}

int hw_capture_process(pid_t pid, const hw_capture_options *opts, hw_process_snapshot *out)
{
    hw_capture_flight *f;
    int r = hw_capture_start(pid, opts, out, &f);
    return r != 0 ? r : hw_capture_finish(f);
}
