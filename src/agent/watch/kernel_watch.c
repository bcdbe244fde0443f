/*
 * kernel_watch.c - processes watched through the kernel observer
 * (kernel_observer.h: eBPF at the wait system calls, a page per process
 * that the agent fills itself) rather than through an observer inside them.
 *
 * Four ways in: `hangwatch watch -p PID...` (running processes, left
 * exactly as they are), a program `hangwatch run` starts that cannot take
 * the preloaded observer (static, or --observer kernel), the new processes
 * of followed ones, and a process whose preloaded observer turned out not
 * to see its waits (raw system calls, io_uring), which is switched over.
 * Each goes into the table of watched processes like any other.
 */
#include <errno.h>
#include <poll.h>
#include <sys/uio.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "watch.h"

/* Watch `pid` through a page of the kernel observer (`pidfd` is its own):
 * NULL when the kernel observer would not or the table is full, with the
 * reason in `why` (nothing is kept then; the caller closes `pidfd`). */
static watched_process *watch_through_kernel(agent *a, pid_t pid, int pidfd, bool follow, hw_kobs_start start,
                                             const char *program, char *why, size_t why_len)
{
    const hw_agent_options *o = a->opts;
    const hw_shared_page *page =
        program != NULL ? hw_kobs_watch_launch(a->kobs, pid, program, o->every_wait_is_the_loop, o->all_loop_threads,
                                               follow, why, why_len)
                        : hw_kobs_watch(a->kobs, pid, o->every_wait_is_the_loop, o->all_loop_threads, follow, start,
                                        why, why_len);
    if (page == NULL)
        return NULL;
    watched_process *w = table_add(a, pid, pidfd, page);
    if (w == NULL) {
        hw_kobs_forget(a->kobs, page);
        snprintf(why, why_len, "the agent already watches as many processes as it can");
    }
    return w;
}

int kernel_observer_open(agent *a, char *why, size_t len)
{
    if (a->kobs != NULL)
        return 0;
    static const hw_kobs_attach kinds[] = {
        [HW_ATTACH_AUTO] = HW_KOBS_ATTACH_AUTO,
        [HW_ATTACH_FENTRY] = HW_KOBS_ATTACH_FENTRY,
        [HW_ATTACH_TRACEPOINT] = HW_KOBS_ATTACH_TRACEPOINT,
        [HW_ATTACH_UPROBE] = HW_KOBS_ATTACH_UPROBE,
    };
    return hw_kobs_open(&a->kobs, kinds[a->opts->attach], why, len);
}

/* Once a process is watched through the tracepoints the default fell back
 * to: why not fentry, what the tracepoints cost every other process, and
 * the alternative. */
static void say_tracepoint_cost(agent *a)
{
    const char *refusal = hw_kobs_fentry_refusal(a->kobs);
    if (a->opts->attach == HW_ATTACH_AUTO && refusal != NULL && !a->said_tracepoint_cost && !a->opts->quiet) {
        a->said_tracepoint_cost = true;
        fprintf(stderr, "hangwatch: the kernel observer is attached to the system calls' tracepoints, since fentry "
                        "cannot be had (%s): while it is, every process of this machine pays on each of its system "
                        "calls (+5 ns measured, +279 ns on a wait call, which also runs the observer's program: "
                        "docs/benchmarks.md's results, part 8); --attach uprobe costs only the watched "
                        "processes (two traps per wait call: 20 to 22 us measured on a virtual machine, under 2 us "
                        "on bare metal)\n",
                refusal);
    }
}

int kernel_watch_pids(agent *a)
{
    const hw_agent_options *opts = a->opts;
    char why[512];
    int rc = kernel_observer_open(a, why, sizeof why);
    if (rc != 0) {
        fprintf(stderr, "hangwatch: %s\n", why);
        return rc;
    }
    for (size_t i = 0; i < opts->watch_pid_count; i++) {
        pid_t pid = opts->watch_pids[i];
        int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (pidfd < 0) {
            int e = errno;
            fprintf(stderr, "hangwatch: cannot watch pid %d: %s\n", (int)pid,
                    e == ESRCH ? "no such process" : strerror(e));
            return -e;
        }
        /* Its hangs are captured with ptrace: the right to read its memory
         * is the same (ptrace's attach mode), asked now rather than at its
         * first hang.  Address 0 is never mapped: EFAULT means allowed. */
        char byte;
        struct iovec local = {&byte, 1}, remote = {NULL, 1};
        if (process_vm_readv(pid, &local, 1, &remote, 1, 0) < 0 && errno == EPERM) {
            fprintf(stderr, "hangwatch: cannot watch pid %d: its stacks could not be captured (ptrace is not allowed): "
                            "run as its user or root, or with CAP_SYS_PTRACE\n", (int)pid);
            close(pidfd);
            return -EPERM;
        }
        watched_process *w =
            watch_through_kernel(a, pid, pidfd, opts->follow_children, HW_KOBS_START_AS_FOUND, NULL, why, sizeof why);
        if (w == NULL) {
            fprintf(stderr, "hangwatch: cannot watch pid %d: %s\n", (int)pid, why);
            close(pidfd);
            return -ENOSPC;
        }
        /* The operator's sign that it holds (and the tests' sign that the
         * kernel observer is attached). */
        if (!opts->quiet)
            fprintf(stderr, "hangwatch: watching pid %d through the kernel observer (%s)%s\n", (int)pid,
                    hw_kobs_attach_name(a->kobs), opts->follow_children ? ", and the processes it forks" : "");
        if (!opts->quiet && hw_kobs_wait_end_unseen(a->kobs, w->page))
            fprintf(stderr, "hangwatch: note: pid %d is blocked in its wait call now and could not be stopped to restart "
                            "it, and fexit cannot see the end of a call made before it was attached: its next busy "
                            "stretch is not watched, the ones after it are (--attach uprobe or tracepoint see it)\n",
                    (int)pid);
    }
    say_tracepoint_cost(a);
    return 0;
}

int kernel_watch_machine(agent *a)
{
    char why[512];
    int rc = kernel_observer_open(a, why, sizeof why);
    if (rc == 0 && !hw_kobs_watch_execs(a->kobs, why, sizeof why))
        rc = -ENOTSUP;
    if (rc == 0 && (a->scan = machine_scan_new()) == NULL) {
        snprintf(why, sizeof why, "out of memory");
        rc = -ENOMEM;
    }
    if (rc != 0) {
        fprintf(stderr, "hangwatch: cannot watch the machine: %s\n", why);
        return rc;
    }
    if (!a->opts->quiet)
        fprintf(stderr, "hangwatch: watching every process of the machine that waits in a loop%s, through the kernel "
                        "observer (%s)\n",
                a->opts->selector_count > 0 ? " and that the selectors choose" : "", hw_kobs_attach_name(a->kobs));
    say_tracepoint_cost(a);
    rc = a->opts->watch_pid_count > 0 ? kernel_watch_pids(a) : 0;
    machine_scan_tick(a, a->scan, hw_monotonic_ns());
    return rc;
}

void kernel_watch_launched(agent *a, pid_t pid, const char *program)
{
    char why[512];
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pidfd < 0) {
        snprintf(why, sizeof why, "%s", strerror(errno));
    } else if (watch_through_kernel(a, pid, pidfd, !a->opts->no_follow, HW_KOBS_START_LAUNCHING, program, why,
                                    sizeof why)) {
        a->warned_unregistered = true; /* it never registers: nothing to warn about */
        say_tracepoint_cost(a);
        return;
    } else {
        close(pidfd);
    }
    fprintf(stderr, "hangwatch: warning: the program cannot be watched through the kernel observer: %s\n", why);
}

watched_process *kernel_watch_found(agent *a, pid_t pid, int pidfd, char *why, size_t len)
{
    watched_process *w = watch_through_kernel(a, pid, pidfd, true, HW_KOBS_START_QUIET, NULL, why, len);
    if (w != NULL && !a->opts->quiet) {
        char name[PROCESS_NAME_TEXT];
        fprintf(stderr, "hangwatch: watching pid %d (%s) through the kernel observer (%s)\n", (int)pid,
                process_name_text(pid, name), hw_kobs_attach_name(a->kobs));
    }
    return w;
}

/* Is `pid` a process (not a thread of one)?  /proc/PID/status's Tgid. */
static bool is_process(pid_t pid)
{
    return hw_proc_status_number(pid, "Tgid") == pid;
}

void kernel_watch_new_children(agent *a)
{
    pid_t pids[64];
    size_t n;
    while ((n = hw_kobs_take_execs(a->kobs, pids, 64)) > 0)
        for (size_t i = 0; i < n; i++)
            machine_scan_exec(a, a->scan, pids[i], hw_monotonic_ns());
    while ((n = hw_kobs_take_children(a->kobs, pids, 64)) > 0) {
        for (size_t i = 0; i < n; i++) {
            pid_t pid = pids[i];
            if (table_find(a, pid) || !is_process(pid))
                continue; /* a new thread, or known already */
            char why[512];
            int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
            if (pidfd < 0)
                continue; /* gone already */
            if (watch_through_kernel(a, pid, pidfd, true, HW_KOBS_START_LAUNCHING, NULL, why, sizeof why))
                continue;
            struct pollfd ended = {.fd = pidfd, .events = POLLIN};
            bool gone = poll(&ended, 1, 0) == 1; /* it ended while it was being attached: nothing was missed */
            close(pidfd);
            if (!a->opts->quiet && !gone)
                fprintf(stderr, "hangwatch: warning: pid %d, a new process of a watched one, is not watched: %s\n",
                        (int)pid, why);
        }
    }
}

void kernel_watch_switch(agent *a, watched_process *w)
{
    w->wants_kernel = false;
    char why[512] = "";
    const hw_shared_page *page = NULL;
    if (a->opts->attach == HW_ATTACH_UPROBE)
        snprintf(why, sizeof why, "--attach uprobe sees only waits through the wait functions");
    else if (kernel_observer_open(a, why, sizeof why) == 0)
        page = hw_kobs_watch(a->kobs, w->pid, a->opts->every_wait_is_the_loop, a->opts->all_loop_threads,
                             false /* its children register through the preload */, HW_KOBS_START_AS_FOUND, why,
                             sizeof why);
    if (page == NULL) {
        w->kernel_refused = true;
        if (!a->opts->quiet)
            fprintf(stderr,
                    "hangwatch: warning: pid %d waits without going through glibc's wrappers (a raw syscall() or "
                    "io_uring loop): its loop cannot be observed and its hangs cannot be seen; the kernel observer "
                    "could not be used: %s (see docs/limits.md)\n",
                    (int)w->pid, why);
        return;
    }
    finish_process(a, w, hw_monotonic_ns(), "agent_exited", -1); /* its loops start afresh */
    table_switch_page(a, w, page);
    if (!a->opts->quiet)
        fprintf(stderr,
                "hangwatch: pid %d waits without going through glibc's wrappers (a raw syscall() or io_uring "
                "loop): it is watched through the kernel observer from now on\n",
                (int)w->pid);
    say_tracepoint_cost(a);
}
