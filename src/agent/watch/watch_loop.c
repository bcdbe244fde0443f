/*
 * watch_loop.c - `hangwatch run` and `hangwatch attach`: the agent's watch loop.
 *
 * One watch thread, one ppoll() over
 *   - a signalfd for SIGCHLD (a process ended) and the termination signals
 *     passed on to the program;
 *   - the registration socket (registry.c);
 *   - one pidfd per watched process, readable when it ends;
 * whose timeout is the earliest next look any loop's detector asked for, so
 * the agent sleeps exactly until something can have happened and the
 * program is never woken by it.  The report worker (report_worker.c) runs
 * beside it.  The parts and their reading order: agent_internal.h.
 */
#include "agent/agent.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "watch.h"

/* ---- the loop ---- */

static void reap_children(agent *a)
{
    for (;;) {
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid <= 0)
            return;
        if (pid == a->child && !a->child_done) {
            a->child_done = true;
            a->child_status = status;
        }
        watched_process *w = registry_find(a, pid);
        if (w) {
            finish_process(a, w, hw_monotonic_ns(), "process_exited", status);
            registry_forget(a, w);
        }
    }
}

static void handle_signals(agent *a)
{
    struct signalfd_siginfo si;
    while (read(a->signal_fd, &si, sizeof si) == (ssize_t)sizeof si) {
        if (si.ssi_signo == SIGCHLD)
            continue; /* reaped below */
        /* Signals from the terminal reach the program by themselves (same
         * process group); pass on only those a process sent to us. */
        if (a->opts->attach_pid > 0 || a->watch_mode) {
            a->done = true; /* nothing of ours to pass it to: any termination signal ends us */
            continue;
        }
        bool from_process = si.ssi_code == SI_USER || si.ssi_code == SI_QUEUE || si.ssi_code == SI_TKILL;
        if (from_process && a->child > 0 && !a->child_done)
            kill(a->child, (int)si.ssi_signo);
    }
    reap_children(a);
}

/* A watched process ended (our child or not) and its pidfd says so.  How
 * (a signal, an exit status) is known while it is a zombie nobody has
 * reaped, or when a capture reaped it (w->end_status). */
static void process_ended(agent *a, watched_process *w)
{
    uint64_t now = hw_monotonic_ns();
    hw_task_stat st;
    int status = hw_task_stat_read(w->pid, 0, &st) == 0 && st.state == 'Z' ? st.exit_code : -1;
    finish_process(a, w, now, "process_exited", status);
    registry_forget(a, w);
}

/* A page that faulted (registry.c's guard) is no longer read. */
static void drop_faulted_pages(agent *a)
{
    if (!registry_take_fault_news())
        return;
    for (size_t i = 0; i < a->watched_count; i++) {
        watched_process *w = &a->watched[i];
        if (!registry_page_faulted(w))
            continue;
        if (!a->opts->quiet)
            fprintf(stderr,
                    "hangwatch: pid %d's loop page became unreadable: it is no longer watched\n", (int)w->pid);
        finish_process(a, w, hw_monotonic_ns(), "agent_exited", -1);
        registry_forget(a, w);
        i--;
    }
}

/* `hangwatch watch -p PID...`: each process through a page of the kernel
 * observer.  0, or -errno after saying why. */
static int start_kernel_watches(agent *a)
{
    const hw_agent_options *opts = a->opts;
    char why[512];
    a->watch_mode = true;
    a->warned_unregistered = true; /* nothing of ours is to register */
    a->tree_root = 0;              /* and no registration is accepted */
    int rc = hw_kobs_open(&a->kobs, why, sizeof why);
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
        const hw_shared_page *page =
            hw_kobs_watch(a->kobs, pid, opts->every_wait_is_the_loop, opts->all_loop_threads, opts->follow_children,
                          HW_KOBS_START_AS_FOUND, why, sizeof why);
        if (page == NULL || !registry_add_kernel_watch(a, pid, pidfd, page)) {
            fprintf(stderr, "hangwatch: cannot watch pid %d: %s\n", (int)pid,
                    page ? "the agent already watches as many processes as it can" : why);
            if (page)
                hw_kobs_forget(a->kobs, page);
            close(pidfd);
            return -ENOSPC;
        }
        /* The operator's sign that it holds (and the tests' sign that the
         * kernel observer is attached). */
        if (!opts->quiet)
            fprintf(stderr, "hangwatch: watching pid %d through the kernel observer%s\n", (int)pid,
                    opts->follow_children ? ", and the processes it forks" : "");
    }
    return 0;
}

/*
 * The watch thread at the lowest real-time priority, where the agent may
 * have it (root, CAP_SYS_NICE, an RLIMIT_RTPRIO): it sleeps until a busy
 * stretch crosses the threshold, and then it must run at once, whatever
 * else wants the CPU.  At the normal policy a busy machine makes it wait
 * for a slice; docs/benchmarks.md (part 4) measured exact mode's p99 at
 * 4.4-5.4 ms after the threshold at the normal policy and 0.7 ms this way,
 * on a machine kept busy.  It only looks at pages and takes captures (the
 * program is stopped then anyway); everything slow is the report worker's,
 * at SCHED_IDLE.  SCHED_RESET_ON_FORK: nothing it starts inherits it.
 * HANGWATCH_WATCH_POLICY=normal keeps the normal policy; without the right
 * to it, the normal policy is kept silently.
 */
static void raise_watch_priority(void)
{
    const char *policy = getenv("HANGWATCH_WATCH_POLICY");
    if (policy != NULL && strcmp(policy, "normal") == 0)
        return;
    struct sched_param sp = {.sched_priority = 1};
    (void)sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &sp); /* 0: this thread */
}

static void watch(agent *a)
{
    raise_watch_priority();
    const hw_agent_options *opts = a->opts;
    struct pollfd *fds = calloc(4 + MAX_WATCHED, sizeof *fds);
    pid_t *fd_pid = calloc(4 + MAX_WATCHED, sizeof *fd_pid);
    if (!fds || !fd_pid) {
        fprintf(stderr, "hangwatch: out of memory\n");
        free(fds);
        free(fd_pid);
        return;
    }
    uint64_t deadline = opts->duration_ns ? a->started_ns + opts->duration_ns : UINT64_MAX;
    while (!a->child_done && !a->done) {
        uint64_t now = hw_monotonic_ns();
        if (a->watch_mode && (a->watched_count == 0 || now >= deadline))
            break; /* `watch`: every process has ended, or the time is up */
        uint64_t next = now + 60ull * 1000000000ull;
        if (deadline < next)
            next = deadline;
        for (size_t i = 0; i < a->watched_count; i++)
            if (a->watched[i].next_wake_ns < next)
                next = a->watched[i].next_wake_ns;
        if (!a->warned_unregistered && !a->ever_registered && a->started_ns + REGISTRATION_GRACE_NS < next)
            next = a->started_ns + REGISTRATION_GRACE_NS;

        /* The agent's own descriptors, then one pidfd per watched process. */
        nfds_t nfds = 2;
        fds[0] = (struct pollfd){a->signal_fd, POLLIN, 0};
        fds[1] = (struct pollfd){a->registration_fd, POLLIN, 0};
        if (a->target_pidfd >= 0) {
            fd_pid[nfds] = 0; /* the attached program itself */
            fds[nfds++] = (struct pollfd){a->target_pidfd, POLLIN, 0};
        }
        int children_fd = hw_kobs_children_fd(a->kobs);
        nfds_t children_at = nfds;
        if (children_fd >= 0) {
            fd_pid[nfds] = -1; /* the kernel observer's news of new processes */
            fds[nfds++] = (struct pollfd){children_fd, POLLIN, 0};
        }
        for (size_t i = 0; i < a->watched_count; i++) {
            if (a->watched[i].pidfd < 0)
                continue;
            fd_pid[nfds] = a->watched[i].pid;
            fds[nfds++] = (struct pollfd){a->watched[i].pidfd, POLLIN, 0};
        }
        uint64_t wait_ns = next > now ? next - now : 0;
        struct timespec ts = {(time_t)(wait_ns / 1000000000ull), (long)(wait_ns % 1000000000ull)};
        int n = ppoll(fds, nfds, &ts, NULL);
        if (n < 0 && errno != EINTR) {
            fprintf(stderr, "hangwatch: ppoll: %s\n", strerror(errno));
            break;
        }
        if (n > 0 && (fds[0].revents & POLLIN))
            handle_signals(a);
        if (n > 0 && (fds[1].revents & POLLIN))
            registry_drain(a);
        if (n > 0 && children_fd >= 0 && (fds[children_at].revents & POLLIN))
            registry_watch_new_children(a);
        for (nfds_t i = 2; n > 0 && i < nfds; i++) {
            if (!(fds[i].revents & (POLLIN | POLLHUP)) || fd_pid[i] < 0)
                continue;
            if (fd_pid[i] == 0) {
                a->done = true; /* the attached program has ended */
                continue;
            }
            watched_process *gone = registry_find(a, fd_pid[i]);
            if (gone)
                process_ended(a, gone);
        }
        if (a->child_done || a->done)
            break;
        drop_faulted_pages(a);

        clock_source_refresh(a); /* before the stamps are read */
        for (size_t i = 0; i < a->watched_count && !a->child_done; i++) {
            uint64_t t = hw_monotonic_ns(); /* checks take time: each its own now */
            if (a->watched[i].next_wake_ns <= t)
                check_process(a, &a->watched[i], t);
            if (a->watched[i].wants_kernel)
                registry_switch_to_kernel(a, &a->watched[i]);
        }
        now = hw_monotonic_ns();
        if (!a->warned_unregistered && !a->ever_registered && now >= a->started_ns + REGISTRATION_GRACE_NS) {
            a->warned_unregistered = true;
            fprintf(stderr,
                    "hangwatch: warning: '%s' has not registered a loop observer after 1 s; hangs in it cannot be "
                    "seen (a static binary, a program that clears LD_PRELOAD, or one that has not started its "
                    "loop yet; see docs/limits.md)\n",
                    opts->argv[0]);
        }
    }
    free(fds);
    free(fd_pid);
}

int hw_agent_run(const hw_agent_options *opts)
{
    agent *a = calloc(1, sizeof *a);
    if (!a) {
        fprintf(stderr, "hangwatch: out of memory\n");
        return 2;
    }
    a->opts = opts;
    a->signal_fd = a->registration_fd = a->target_pidfd = a->events_fd = -1;
    /* The observers' clock, for a program we start (the C library's and the
     * kernel observer's pages say their own), before any thread or child
     * can inherit the affinity this pins for a moment. */
    if (opts->attach_pid <= 0 && opts->watch_pid_count == 0)
        clock_source_init(a);
    /* Signals first: the report worker inherits the blocked set. */
    int rc = launch_open_signal_fd(a);
    if (rc == 0)
        rc = registry_open_socket(a);
    if (rc == 0 && opts->attach_pid > 0 && opts->events_socket && open_events_socket(a, opts->events_socket) != 0)
        fprintf(stderr, "hangwatch: cannot send events to %s: callbacks are off%s\n", opts->events_socket,
                opts->pings_by_post ? ", and pings are answered at the loop's next wait" : "");
    if (rc == 0 && (a->worker = worker_start(a)) == NULL)
        rc = -ENOMEM;
    /* Metrics and Sentry, before the program starts: an option that cannot
     * work (a port in use) is an error now, said by exports_start. */
    bool exports_failed = false;
    if (rc == 0 && (rc = exports_start(a)) != 0) {
        exports_failed = true;
        worker_stop(a->worker, false);
    }
    if (rc != 0) {
        if (!exports_failed)
            fprintf(stderr, "hangwatch: cannot set up the agent: %s\n", strerror(-rc));
        if (a->signal_fd >= 0)
            close(a->signal_fd);
        if (a->registration_fd >= 0)
            close(a->registration_fd);
        if (a->events_fd >= 0)
            close(a->events_fd);
        free(a);
        return 2;
    }
    registry_install_fault_guard();
    a->started_ns = hw_monotonic_ns();
    a->pings_by_post = opts->pings_by_post && a->events_fd >= 0;
    if (opts->attach_pid > 0) {
        /* Watch a running program (the C library started us): it and its
         * descendants may register, nobody else. */
        a->tree_root = opts->attach_pid;
        a->target_pidfd = (int)syscall(SYS_pidfd_open, opts->attach_pid, 0);
        a->warned_unregistered = true;
        int32_t self = (int32_t)getpid();
        if (opts->ready_fd >= 0) {
            ssize_t w = write(opts->ready_fd, &self, sizeof self);
            (void)w;
            close(opts->ready_fd);
        }
        rc = a->target_pidfd >= 0 ? 0 : -errno;
    } else if (opts->watch_pid_count > 0) {
        rc = start_kernel_watches(a);
    } else {
        /* The program and its descendants may register: we are their
         * ancestor.  Orphaned descendants (a daemon's workers) are
         * re-parented to us, so they stay in the tree and get reaped. */
        a->tree_root = getpid();
        prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        rc = launch_program(a);
    }
    /* Symbolizing must never reach for the network (debuginfod) while a
     * report is being made; the program keeps its own environment. */
    unsetenv("DEBUGINFOD_URLS");
    if (rc != 0) {
        if (opts->attach_pid > 0)
            fprintf(stderr, "hangwatch: cannot watch pid %d: %s\n", (int)opts->attach_pid, strerror(-rc));
        else if (a->watch_mode)
            ; /* said by start_kernel_watches */
        else if (rc != -ENOENT && rc != -EACCES && rc != -ENOEXEC && rc != -ENOTDIR && rc != -EISDIR)
            fprintf(stderr, "hangwatch: cannot start '%s': %s\n", opts->argv[0], strerror(-rc));
        while (a->watched_count > 0)
            registry_forget(a, &a->watched[0]);
        hw_kobs_close(a->kobs);
        worker_stop(a->worker, false);
        exports_stop(a);
        close(a->signal_fd);
        close(a->registration_fd);
        free(a);
        return 2;
    }

    watch(a);

    /* Wait for the program if the loop ended for another reason. */
    while (!a->child_done && opts->attach_pid <= 0) {
        int status;
        pid_t p = waitpid(a->child, &status, 0);
        if (p == a->child) {
            a->child_done = true;
            a->child_status = status;
        } else if (p < 0 && errno != EINTR) {
            break;
        }
    }
    int code = opts->attach_pid > 0 || a->watch_mode ? 0 : a->child_done ? launch_exit_code(a->child_status) : 1;
    while (a->watched_count > 0) {
        watched_process *w = &a->watched[0];
        bool is_child = w->pid == a->child && opts->attach_pid <= 0;
        finish_process(a, w, hw_monotonic_ns(), is_child ? "process_exited" : "agent_exited",
                       is_child && a->child_done ? a->child_status : -1);
        registry_forget(a, w);
    }
    /* Every capture becomes its report before we go. */
    worker_stop(a->worker, true);
    a->worker = NULL;
    exports_stop(a); /* after the last report: its metrics and its event are in */
    js_maps_remove(a); /* after the last report that could name JavaScript */
    hw_kobs_close(a->kobs);
    if (a->queue_dropped > 0 && !opts->quiet)
        fprintf(stderr, "hangwatch: %lu capture%s dropped because the report writer was behind\n",
                a->queue_dropped, a->queue_dropped == 1 ? " was" : "s were");
    if (a->refused > 0 && !opts->quiet)
        fprintf(stderr, "hangwatch: %lu registration%s refused (docs/security.md)\n", a->refused,
                a->refused == 1 ? " was" : "s were");
    if (a->target_pidfd >= 0)
        close(a->target_pidfd);
    if (a->events_fd >= 0)
        close(a->events_fd); /* after the last hang-end events went out */
    close(a->signal_fd);
    close(a->registration_fd);
    free(a);
    return code;
}
