/*
 * watch_loop.c - `hangwatch run`, `watch` and `attach`: the agent's watch
 * loop, and hw_agent_run, which sets the agent up around it.
 *
 * One watch thread, one ppoll() over
 *   - a signalfd for SIGCHLD (a process ended) and the termination signals
 *     passed on to the program;
 *   - the registration socket (admission.c);
 *   - the kernel observer's news of new processes (kernel_watch.c);
 *   - one pidfd per watched process, readable when it ends;
 * whose timeout is the earliest next look any loop's detector asked for, so
 * the agent sleeps exactly until something can have happened and the
 * program is never woken by it.  The report worker (report/report.h) runs
 * beside it.  The parts and their reading order: watch.h.
 */
#include <errno.h>
#include <poll.h>
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

#include "agent/common/cpu_avoid.h"
#include "agent/common/priority_lender.h"
#include "agent/common/watch_priority.h"
#include "watch.h"

/* ---- processes that end ---- */

/* Close `w`'s hangs and stop watching it. */
static void forget_process(agent *a, watched_process *w, const char *end, int wait_status)
{
    finish_process(a, w, hw_monotonic_ns(), end, wait_status);
    table_remove(a, w);
}

/* `run`'s program ended with wait status `status` (-1: not learned): the
 * first status learned, from whichever wait or capture saw the end, is
 * the one `run` exits with (launch_exit_code). */
void keep_child_status(agent *a, int status)
{
    if (a->child_done)
        return;
    a->child_done = true;
    a->child_status = status;
}

static void reap_children(agent *a)
{
    for (;;) {
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid <= 0)
            return;
        if (pid == a->child)
            keep_child_status(a, status);
        watched_process *w = table_find(a, pid);
        if (w)
            forget_process(a, w, "process_exited", status);
    }
}

static void handle_signals(agent *a)
{
    struct signalfd_siginfo si;
    while (read(a->signal_fd, &si, sizeof si) == (ssize_t)sizeof si) {
        if (si.ssi_signo == SIGCHLD)
            continue; /* reaped below */
        if (si.ssi_signo == SIGHUP && a->base->reload_config != NULL) {
            a->reload_asked = true; /* watch --config: read the file again (config_reload.c) */
            continue;
        }
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

/* `run`'s program ended and its pidfd says so.  Its status is taken here
 * if nobody took it yet, or it is the one a capture took when it found the
 * program gone (w->end_status): `run` ends either way, never waiting for a
 * SIGCHLD whose status is already consumed. */
static void own_child_ended(agent *a, const watched_process *w)
{
    int status;
    pid_t p;
    do
        p = waitpid(a->child, &status, WNOHANG);
    while (p < 0 && errno == EINTR);
    if (p == 0)
        return; /* not reapable yet: its SIGCHLD is still to come */
    keep_child_status(a, p == a->child ? status : w->end_status);
    if (a->child_status < 0)
        fprintf(stderr, "hangwatch: warning: '%s' (pid %d) ended, but how it ended could not be learned\n",
                a->opts->argv[0], (int)a->child);
}

/* A watched process ended (our child or not) and its pidfd says so.  How
 * (a signal, an exit status) is known while it is a zombie nobody has
 * reaped, or when a capture reaped it (w->end_status). */
static void process_ended(agent *a, watched_process *w)
{
    hw_task_stat st;
    int status = hw_task_stat_read(w->pid, 0, &st) == 0 && st.state == 'Z' ? st.exit_code : -1;
    if (w->pid == a->child && a->opts->attach_pid <= 0 && !a->child_done)
        own_child_ended(a, w);
    if (w->pid == a->child && a->child_done && status < 0)
        status = a->child_status;
    forget_process(a, w, "process_exited", status);
}

/* A page that faulted (page_guard.c) is no longer read. */
static void drop_faulted_pages(agent *a)
{
    if (!page_guard_take_news())
        return;
    for (size_t i = 0; i < a->table.end; i++) {
        watched_process *w = a->table.slots[i];
        if (!w || !page_guard_faulted(w->page))
            continue;
        if (!a->opts->quiet)
            fprintf(stderr,
                    "hangwatch: pid %d's loop page became unreadable: it is no longer watched\n", (int)w->pid);
        forget_process(a, w, "agent_exited", -1);
    }
}

/* ---- processes that come ---- */

/* Watch what the admission let in.  The same pid again is a process that
 * exec'd a new image: it starts afresh. */
static void admit(agent *a)
{
    admitted in[MAX_ADMITTED_PER_WAKE];
    size_t n = admission_drain(a, in);
    for (size_t i = 0; i < n; i++) {
        watched_process *old = table_find(a, in[i].pid);
        if (old)
            forget_process(a, old, "exec", -1);
        if (!table_add(a, in[i].pid, in[i].pidfd, in[i].page))
            admission_refuse_full(a, &in[i]);
    }
}

/* ---- the loop ---- */

/* When the loop must look next: the earliest next look of any watched
 * process, the end of `watch --duration`, the registration warning, the
 * report worker's raise when a job waits too long (report.h), the
 * counter's first rate (clock_source.c). */
static uint64_t next_wake(const agent *a, uint64_t now, uint64_t deadline)
{
    uint64_t next = now + 60ull * 1000000000ull;
    if (deadline < next)
        next = deadline;
    uint64_t boost = worker_boost_due(a->worker);
    if (boost < next)
        next = boost;
    uint64_t scan = machine_scan_due(a->scan);
    if (scan < next)
        next = scan;
    uint64_t watchdog = service_watchdog_due(a);
    if (watchdog < next)
        next = watchdog;
    uint64_t rate = clock_source_due(a);
    if (rate < next)
        next = rate;
    for (size_t i = 0; i < a->table.end; i++)
        if (a->table.slots[i] && a->table.slots[i]->next_wake_ns < next)
            next = a->table.slots[i]->next_wake_ns;
    if (!a->warned_unregistered && !a->ever_registered && a->started_ns + REGISTRATION_GRACE_NS < next)
        next = a->started_ns + REGISTRATION_GRACE_NS;
    return next;
}

/* The poll set, a few descriptors however many processes are watched:
 * the signalfd, the registrations' intake, the attached program's pidfd,
 * the kernel observer's news, and the epoll of the watched processes'
 * pidfds (pidfds_epoll).  The places of the last three in `at` (0: none). */
enum { AT_TARGET, AT_NEWS, AT_PIDFDS, AT_COUNT };

static nfds_t poll_set(agent *a, struct pollfd *fds, nfds_t at[AT_COUNT])
{
    nfds_t nfds = 2;
    fds[0] = (struct pollfd){a->signal_fd, POLLIN, 0};
    fds[1] = (struct pollfd){admission_intake_fd(a->intake), POLLIN, 0};
    int own[AT_COUNT] = {a->target_pidfd, hw_kobs_children_fd(a->kobs), a->pidfds_epoll};
    for (int i = 0; i < AT_COUNT; i++) {
        at[i] = own[i] >= 0 ? nfds : 0;
        if (own[i] >= 0)
            fds[nfds++] = (struct pollfd){own[i], POLLIN, 0};
    }
    return nfds;
}

/* What ppoll found ready. */
static void handle_ready(agent *a, const struct pollfd *fds, const nfds_t at[AT_COUNT])
{
    if (fds[0].revents & POLLIN)
        handle_signals(a);
    if (fds[1].revents & POLLIN)
        admit(a);
    if (at[AT_NEWS] > 0 && (fds[at[AT_NEWS]].revents & POLLIN))
        kernel_watch_new_children(a);
    if (at[AT_TARGET] > 0 && (fds[at[AT_TARGET]].revents & (POLLIN | POLLHUP)))
        a->done = true; /* the attached program has ended */
    if (at[AT_PIDFDS] == 0 || !(fds[at[AT_PIDFDS]].revents & POLLIN))
        return;
    struct epoll_event ended[64];
    int n;
    while ((n = epoll_wait(a->pidfds_epoll, ended, 64, 0)) > 0)
        for (int i = 0; i < n; i++) {
            watched_process *gone = table_find(a, (pid_t)ended[i].data.u64);
            if (gone)
                process_ended(a, gone);
        }
}

/* Look at every watched process that is due. */
static void check_processes(agent *a)
{
    clock_source_refresh(a); /* before the stamps are read */
    hang_batch_open(a);
    for (size_t i = 0; i < a->table.end && !a->child_done; i++) {
        watched_process *w = a->table.slots[i];
        if (!w)
            continue;
        uint64_t t = hw_monotonic_ns(); /* checks take time: each its own now */
        if (w->next_wake_ns <= t)
            check_process(a, w, t);
        if (w->wants_kernel && !hang_batch_holds(a, w)) /* (the next pass, after its capture) */
            kernel_watch_switch(a, w);
    }
    hang_batch_run(a); /* the hangs this pass found, captured together */
}

/* Is a loop of a watched process in a hang now? */
static bool any_hung(const agent *a)
{
    for (size_t i = 0; i < a->table.end; i++) {
        const watched_process *w = a->table.slots[i];
        for (unsigned s = 0; w != NULL && s < HW_PAGE_SLOTS; s++)
            if (w->loops[s] != NULL && w->loops[s]->hung)
                return true;
    }
    return false;
}

/*
 * The watch thread runs at a real-time priority, where the agent may have
 * it (hw_take_watch_priority): it sleeps until a busy stretch
 * crosses the threshold, and then it must run at once, whatever else wants
 * the CPU.  At the normal policy a busy machine makes it wait for a slice;
 * docs/benchmarks.md (part 4) measured exact mode's p99 at 4.4-5.4 ms after
 * the threshold at the normal policy and 0.7 ms this way, on a machine kept
 * busy.  It only looks at pages and takes captures (the program is stopped
 * then anyway); everything slow is the report worker's, at SCHED_IDLE.
 */
static void watch(agent *a)
{
    hw_take_watch_priority();
    /* Every capture's helper thread made ahead of time, at this thread's
     * new priority: creating one can wait for the loader's lock.  Not
     * waited for: the first is ready a millisecond on, long before any
     * threshold, and the program's start does not wait for it. */
    hw_capture_helpers_start(false);
    const hw_agent_options *opts = a->opts;
    struct pollfd fds[2 + AT_COUNT];
    uint64_t deadline = opts->duration_ns ? a->started_ns + opts->duration_ns : UINT64_MAX;
    while (!a->child_done && !a->done) {
        uint64_t now = hw_monotonic_ns();
        if (a->watch_mode && ((a->table.count == 0 && !opts->watch_all) || now >= deadline))
            break; /* `watch`: every process has ended (--all: never), or the time is up */
        /* Off the hung threads' CPUs while they hang (hang_lifecycle.c,
         * report_capture_look): its looks for their end, every 10 ms,
         * would otherwise preempt a spinning one each time. */
        if (hw_cpu_avoiding() && !any_hung(a))
            hw_cpu_avoid_end();
        uint64_t next = next_wake(a, now, deadline);
        nfds_t at[AT_COUNT];
        nfds_t nfds = poll_set(a, fds, at);
        uint64_t wait_ns = next > now ? next - now : 0;
        struct timespec ts = {(time_t)(wait_ns / 1000000000ull), (long)(wait_ns % 1000000000ull)};
        (void)hw_rt_step_close();
        int n = ppoll(fds, nfds, &ts, NULL);
        hw_rt_step_open();
        if (n < 0 && errno != EINTR) {
            fprintf(stderr, "hangwatch: ppoll: %s\n", strerror(errno));
            break;
        }
        if (n > 0)
            handle_ready(a, fds, at);
        if (a->child_done || a->done)
            break;
        if (a->reload_asked)
            config_reload(a);
        drop_faulted_pages(a);
        check_processes(a);
        now = hw_monotonic_ns();
        worker_boost_if_late(a->worker, now);
        machine_scan_tick(a, a->scan, now);
        service_watchdog_tick(a, now);
        if (!a->warned_unregistered && !a->ever_registered && now >= a->started_ns + REGISTRATION_GRACE_NS) {
            a->warned_unregistered = true;
            fprintf(stderr,
                    "hangwatch: warning: '%s' has not registered a loop observer after 1 s; hangs in it cannot be "
                    "seen (a static binary, a program that clears LD_PRELOAD, or one that has not started its "
                    "loop yet; see docs/limits.md)\n",
                    opts->argv[0]);
        }
    }
    hw_capture_helpers_stop();
    /* The watch is over: what is left (the last reports, the exit) waits
     * for no hang.  It must not hold a CPU at a real-time priority:
     * LeakSanitizer's check at an ASan build's exit waited for its helper
     * in sched_yield, at this priority, for up to a second, and two agents
     * ending together held both CPUs from every other agent's watch thread
     * on the machine, whose looks came that late.  Nor is this thread a
     * step any more (priority_lender.h): its waits from here on are no
     * real-time thread's, and the lender, above every watch thread, has
     * nothing to lend for. */
    hw_rt_step_leave();
    hw_leave_real_time();
}

/* ---- the agent, set up and torn down ---- */

/* Stop what agent_start started (in the reverse order). */
static void agent_stop(agent *a, bool say_totals)
{
    /* Every capture becomes its report before we go. */
    worker_stop(a->worker, say_totals);
    a->worker = NULL;
    if (say_totals && !a->opts->quiet && a->unseen_ends > 0)
        fprintf(stderr,
                "hangwatch: %lu busy stretch%s ended before hangwatch's late look at %s threshold: %s may have "
                "been a hang nobody saw\n",
                a->unseen_ends, a->unseen_ends == 1 ? "" : "es", a->unseen_ends == 1 ? "its" : "their",
                a->unseen_ends == 1 ? "it" : "each");
    hw_runtime_namers_free(a->sample_namers);
    a->sample_namers = NULL;
    hw_exports_stop(a->exports); /* after the last report: its metrics and its event are in */
    a->exports = NULL;
    if (a->signal_fd >= 0)
        close(a->signal_fd);
    admission_close(a);
    if (a->pidfds_epoll >= 0)
        close(a->pidfds_epoll);
}

/* The agent's descriptor limit at its hard limit (at most 65,536): it
 * holds a pidfd of each process it watches (up to MAX_WATCHED) and the
 * descriptors of the registrations waiting in its intake, and the soft
 * limit's usual 1,024 would not hold both.  The program it starts gets the
 * limit it had back (launch.c). */
static void raise_descriptor_limit(agent *a)
{
    if (getrlimit(RLIMIT_NOFILE, &a->original_nofile) != 0)
        return;
    struct rlimit raised = a->original_nofile;
    raised.rlim_cur = raised.rlim_max < 65536 ? raised.rlim_max : 65536;
    if (raised.rlim_cur > a->original_nofile.rlim_cur)
        a->nofile_raised = setrlimit(RLIMIT_NOFILE, &raised) == 0;
}

/* What the agent needs before anything is watched: its signals, the
 * registration socket, the exports (an option that cannot work, a port in
 * use, is an error now), the events socket of the C library, the report
 * worker.  0, or an error said on stderr. */
static int agent_start(agent *a)
{
    const hw_agent_options *opts = a->opts;
    raise_descriptor_limit(a);
    /* Signals first: the report worker inherits the blocked set. */
    int rc = launch_open_signal_fd(a);
    if (rc == 0)
        rc = admission_open_socket(a);
    if (rc != 0) {
        fprintf(stderr, "hangwatch: cannot set up the agent: %s\n", strerror(-rc));
        return rc;
    }
    if ((rc = hw_exports_start(a->base, &a->exports)) != 0)
        return rc; /* said */
    if (opts->attach_pid > 0 && opts->events_socket && hw_exports_open_events(a->exports, opts->events_socket) != 0)
        fprintf(stderr, "hangwatch: cannot send events to %s: callbacks are off%s\n", opts->events_socket,
                opts->pings_by_post ? ", and pings are answered at the loop's next wait" : "");
    a->sample_namers = hw_runtime_namers_new(a->namers_max_bytes < HW_SAMPLE_NAMERS_MAX_BYTES
                                                 ? a->namers_max_bytes
                                                 : HW_SAMPLE_NAMERS_MAX_BYTES,
                                             " for early samples", opts->quiet, true);
    if (a->sample_namers == NULL || (a->worker = worker_start(a->base, a->exports, a->namers_max_bytes)) == NULL) {
        fprintf(stderr, "hangwatch: cannot set up the agent: %s\n", strerror(ENOMEM));
        return -ENOMEM;
    }
    a->pings_by_post = opts->pings_by_post && hw_exports_has_events(a->exports);
    return 0;
}

/* Watch a running program (the C library started us): it and its
 * descendants may register, nobody else.  0 or -errno. */
static int attach_to_program(agent *a)
{
    const hw_agent_options *opts = a->opts;
    a->tree_root = opts->attach_pid;
    a->target_pidfd = (int)syscall(SYS_pidfd_open, opts->attach_pid, 0);
    a->warned_unregistered = true;
    int32_t self = (int32_t)getpid();
    if (opts->ready_fd >= 0) {
        ssize_t w = write(opts->ready_fd, &self, sizeof self);
        (void)w;
        close(opts->ready_fd);
    }
    return a->target_pidfd >= 0 ? 0 : -errno;
}

/* Begin watching: the attached program, the processes of `watch -p`, or
 * the program we start.  0, or -errno (said, or said by the caller). */
static int begin_watching(agent *a)
{
    const hw_agent_options *opts = a->opts;
    if (opts->attach_pid > 0)
        return attach_to_program(a);
    if (opts->watch_pid_count > 0 || opts->watch_all) {
        a->watch_mode = true;
        a->warned_unregistered = true; /* nothing of ours is to register */
        a->tree_root = 0;              /* and no registration is accepted */
        return opts->watch_all ? kernel_watch_machine(a) : kernel_watch_pids(a);
    }
    /* The program and its descendants may register: we are their
     * ancestor.  Orphaned descendants (a daemon's workers) are re-parented
     * to us, so they stay in the tree and get reaped. */
    a->tree_root = getpid();
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    return launch_program(a);
}

/* Stop watching every process that is left: its hangs end as its process
 * did (our child), or as the watch does. */
static void forget_every_process(agent *a)
{
    for (size_t i = 0; i < a->table.end; i++) {
        watched_process *w = a->table.slots[i];
        if (!w)
            continue;
        bool is_child = w->pid == a->child && a->opts->attach_pid <= 0;
        forget_process(a, w, is_child ? "process_exited" : "agent_exited",
                       is_child && a->child_done ? a->child_status : -1);
    }
}

/* Wait for the program if the loop ended for another reason. */
static void wait_for_child(agent *a)
{
    while (!a->child_done && a->opts->attach_pid <= 0) {
        int status;
        pid_t p = waitpid(a->child, &status, 0);
        if (p == a->child)
            keep_child_status(a, status);
        else if (p < 0 && errno != EINTR)
            break;
    }
}

static void say_totals(const agent *a)
{
    if (a->opts->quiet)
        return;
    if (a->queue_dropped > 0)
        fprintf(stderr, "hangwatch: %lu capture%s dropped because the report writer was behind\n",
                a->queue_dropped, a->queue_dropped == 1 ? " was" : "s were");
    if (a->refused > 0)
        fprintf(stderr, "hangwatch: %lu registration%s refused (docs/security.md)\n", a->refused,
                a->refused == 1 ? " was" : "s were");
}

static int agent_run(const hw_agent_options *opts)
{
    agent *a = calloc(1, sizeof *a);
    if (!a) {
        fprintf(stderr, "hangwatch: out of memory\n");
        return 2;
    }
    a->base = opts;
    a->live = *opts;
    a->opts = &a->live;
    a->signal_fd = a->registration_fd = a->target_pidfd = -1;
    /* A smaller bound on names kept, only to test what reaching it does
     * (never larger). */
    const char *namers_mib = getenv("HANGWATCH_NAMERS_MAX_MIB");
    long mib = namers_mib != NULL ? strtol(namers_mib, NULL, 10) : 0;
    a->namers_max_bytes = mib > 0 && (unsigned long)mib < (HW_NAMERS_MAX_BYTES >> 20) ? (size_t)mib << 20
                                                                                      : HW_NAMERS_MAX_BYTES;
    a->pidfds_epoll = epoll_create1(EPOLL_CLOEXEC);
    if (a->pidfds_epoll < 0) {
        fprintf(stderr, "hangwatch: epoll_create1: %s\n", strerror(errno));
        free(a);
        return 2;
    }
    /* The observers' clock, for a program we start (the C library's and the
     * kernel observer's pages say their own), before any thread or child
     * can inherit the affinity this pins for a moment. */
    if (opts->attach_pid <= 0 && opts->watch_pid_count == 0 && !opts->watch_all)
        clock_source_init(a);
    if (agent_start(a) != 0) {
        agent_stop(a, false);
        free(a);
        return 2;
    }
    page_guard_install();
    a->started_ns = hw_monotonic_ns();
    int rc = begin_watching(a);
    /* Symbolizing must never reach for the network (debuginfod) while a
     * report is being made; the program keeps its own environment. */
    unsetenv("DEBUGINFOD_URLS");
    if (rc != 0) {
        if (opts->attach_pid > 0)
            fprintf(stderr, "hangwatch: cannot watch pid %d: %s\n", (int)opts->attach_pid, strerror(-rc));
        else if (a->watch_mode)
            ; /* said by kernel_watch_pids */
        else if (rc != -ENOENT && rc != -EACCES && rc != -ENOEXEC && rc != -ENOTDIR && rc != -EISDIR)
            fprintf(stderr, "hangwatch: cannot start '%s': %s\n", opts->argv[0], strerror(-rc));
        for (size_t i = 0; i < a->table.end; i++)
            if (a->table.slots[i])
                table_remove(a, a->table.slots[i]);
        machine_scan_free(a->scan); /* before the observer its candidates are marked in */
        hw_kobs_close(a->kobs);
        agent_stop(a, false);
        if (a->target_pidfd >= 0)
            close(a->target_pidfd);
        free(a);
        return 2;
    }

    /* Symbols looked up on this thread (an interpreter's runtime, when a
     * process registers) are kept by file identity: the processes of one
     * program cost one look (code_names.h). */
    hw_symbol_caches *caches = hw_symbol_caches_start();
    service_notify_ready(a);
    watch(a);
    (void)hw_rt_step_close(); /* what is left is the end: no detection waits for it */
    service_notify_stopping();
    hw_symbol_caches_stop(caches);

    wait_for_child(a);
    int code = opts->attach_pid > 0 || a->watch_mode ? 0 : a->child_done ? launch_exit_code(a->child_status) : 1;
    forget_every_process(a);
    agent_stop(a, true);
    js_maps_remove(a); /* after the last report that could name JavaScript */
    machine_scan_free(a->scan); /* before the observer its candidates are marked in */
    hw_kobs_close(a->kobs);
    config_reload_free(a);
    say_totals(a);
    if (a->target_pidfd >= 0)
        close(a->target_pidfd);
    free(a);
    return code;
}

int hw_agent_run(const hw_agent_options *opts)
{
    /* The lender first (priority_lender.h): this thread's set-up, and
     * then each of its wake-ups, is a step, and held up by one of the
     * agent's threads at idle time in a lock they share (the allocator's:
     * the report worker starts at once), it lends that thread its turn.
     * The set-up itself stays at the normal policy. */
    hw_priority_lender_start(hw_lender_priority());
    hw_rt_step_open();
    int code = agent_run(opts);
    hw_rt_step_leave();
    hw_priority_lender_stop();
    return code;
}
