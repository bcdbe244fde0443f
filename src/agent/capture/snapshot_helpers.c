/*
 * snapshot_helpers.c - the parts of a capture that touch no ptrace
 * session (snapshot.c is the session): its default options, what became of
 * the process once the session is over (ended, and reaped if it is ours;
 * whether every thread it listed had exited),
 * freeing a snapshot, and the words for a capture another tracer denied.
 */
#include "snapshot_helpers.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "proc_task.h"

#define LEADER_EXIT_WAIT_NS (100ull * 1000 * 1000) /* a dying process's leader becoming a zombie */

#include "core/text_escape.h"

void hw_capture_options_default(hw_capture_options *opts, pid_t target_tid)
{
    if (opts == NULL)
        return;
    memset(opts, 0, sizeof *opts);
    opts->target_tid = target_tid;
    opts->all_threads = true;
    opts->target_stack_bytes = 512 * 1024;
    opts->other_stack_bytes = 64 * 1024;
    opts->stop_timeout_ms = 500;
    opts->context_grace_ms = 100;
    opts->max_threads = HW_CAPTURE_MAX_THREADS;
    opts->avoid_cpu = -1;
}

uint64_t hw_snapshot_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Whether every thread of `pid` but its leader is gone or a zombie: a
 * process being killed lists its threads for a moment after they died. */
static bool other_threads_dead(pid_t pid)
{
    pid_t *tids;
    size_t n;
    int r = hw_task_list(pid, &tids, &n);
    if (r != 0)
        return r == -ENOENT || r == -ESRCH;
    bool all_dead = true;
    for (size_t k = 0; k < n && all_dead; k++)
        if (tids[k] != pid)
            all_dead = hw_task_is_dead(pid, tids[k]);
    free(tids);
    return all_dead;
}

bool hw_snapshot_every_thread_exited(const hw_process_snapshot *out)
{
    for (size_t i = 0; i < out->thread_count; i++)
        if (out->threads[i].status != HW_THREAD_EXITED)
            return false;
    return true;
}

/* Over when the leader is gone or a zombie with no thread left. */
void hw_snapshot_note_end(pid_t pid, bool all_threads, bool is_parent, hw_process_snapshot *out)
{
    if (out->process_exited)
        return;
    /* Over when the leader is gone or a zombie with no thread left.  When
     * every thread of an all-threads capture had exited, the leader may
     * still be on its way out (a process being killed): give it a moment. */
    hw_task_stat ps;
    int r = hw_task_stat_read(pid, 0, &ps);
    if (r == 0 && ps.state != 'Z' && ps.state != 'X' && all_threads && hw_snapshot_every_thread_exited(out)) {
        uint64_t deadline = hw_snapshot_now_ns() + LEADER_EXIT_WAIT_NS;
        while (r == 0 && ps.state != 'Z' && ps.state != 'X' && hw_snapshot_now_ns() < deadline) {
            struct timespec ts = {0, 1000 * 1000};
            nanosleep(&ts, NULL);
            r = hw_task_stat_read(pid, 0, &ps);
        }
    }
    if (r == 0 && ps.state != 'Z' && ps.state != 'X')
        return;
    if (r == 0) {
        if (!other_threads_dead(pid))
            return; /* the leader ended early; other threads run on */
    } else if (r != -ENOENT && r != -ESRCH) {
        return;
    }
    out->process_exited = true;
    out->exit_status = -1;
    if (is_parent) {
        int status;
        pid_t w;
        do
            w = waitpid(pid, &status, __WALL | WNOHANG);
        while (w < 0 && errno == EINTR);
        if (w == pid) {
            out->exit_status = status;
            out->reaped = true;
            return;
        }
    }
    if (r == 0 && ps.exit_code >= 0)
        out->exit_status = ps.exit_code;
}

const char *hw_capture_denied_reason(const hw_process_snapshot *snap, char *buf, size_t len)
{
    if (snap == NULL || snap->tracer_pid <= 0 || buf == NULL || len == 0)
        return NULL;
    if (snap->tracer_name[0] == '\0') {
        snprintf(buf, len, "traced by pid %d", (int)snap->tracer_pid);
        return buf;
    }
    char name[4 * sizeof snap->tracer_name];
    hw_escape_bytes(snap->tracer_name, strnlen(snap->tracer_name, sizeof snap->tracer_name), name, sizeof name);
    snprintf(buf, len, "traced by pid %d (%s)", (int)snap->tracer_pid, name);
    return buf;
}

void hw_process_snapshot_free(hw_process_snapshot *snap)
{
    if (snap == NULL)
        return;
    for (size_t i = 0; i < snap->thread_count; i++) {
        free(snap->threads[i].stack);
        free(snap->threads[i].interp.frames);
    }
    free(snap->threads);
    free(snap->maps);
    memset(snap, 0, sizeof *snap);
}
