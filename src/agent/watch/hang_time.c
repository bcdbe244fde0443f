/*
 * hang_time.c - the watch thread's side of a hang report's `time` section
 * (agent/capture/thread_time.h, decisions.md §44).
 *
 * At its looks the agent keeps one reading of each loop thread's counters:
 * taken while the loop waits, it stands for the start of the next stretch
 * (a sleeping thread's counters do not move); a stretch that began after a
 * wait the agent did not look at gets one at the first look that finds it
 * busy.  At most one reading per wait and per stretch, and one per 50 ms;
 * the detector looks at a loop about once per threshold: the cost is a few
 * small /proc reads every couple of seconds.  A capture's section is the difference
 * from that reading to one taken right after the capture (the threads run
 * again by then), or, for a thread asleep in a call, right before it (the
 * stop wakes it, and its wait for a CPU to stop on is the capture's), and
 * the final update's to one taken at the hang's end.
 * A look that finds the process stopped restarts the stretch's clock
 * (decisions.md §33), and takes a reading there: the thread's counters do
 * not move while it is stopped either, so the window starts where the
 * detector's stretch does.  Each reading carries the loop's count of the
 * time hangwatch's own captures held it stopped.  A CPU-high report's
 * section is its hottest thread's, from a reading taken when the report's
 * thread figures began (cpu_high.c) to one after the capture.
 */
#include "watch.h"

#include <stdatomic.h>
#include <string.h>

/* FNV-1a of the process's /proc/PID/cgroup: which cgroups it is in. */
static uint64_t membership_of(pid_t pid)
{
    char path[48], buf[4096];
    snprintf(path, sizeof path, "/proc/%d/cgroup", (int)pid);
    ssize_t n = hw_proc_read_small(path, buf, sizeof buf);
    uint64_t h = 1469598103934665603ull;
    for (ssize_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)buf[i]) * 1099511628211ull;
    return n > 0 ? h : 0;
}

/* The process's CPU cgroup, found again whenever the process has moved
 * to another cgroup (a small /proc read at each reading: a container
 * runtime or an operator moves a running service into a quota). */
static hw_cgroup_cpu *process_cgroup(watched_process *w)
{
    uint64_t membership = membership_of(w->pid);
    if (!w->cgroup_looked || (membership != 0 && membership != w->cgroup_membership)) {
        if (w->cgroup_looked)
            w->cgroup_generation++;
        w->cgroup_looked = true;
        w->cgroup_membership = membership;
        w->cgroup_error = hw_cgroup_cpu_find("/proc", "", w->pid, &w->cgroup);
        if (w->cgroup_error != 0)
            w->cgroup.version = 0;
    }
    return w->cgroup_error == 0 ? &w->cgroup : NULL;
}

/* Looks come as often as every sample with --early-sampling: a loop that
 * turns at each of them gets a reading at most this often. */
#define TIME_READING_MIN_INTERVAL_NS 50000000ull

/* A reading of loop `l`'s thread, with `cgroup` (process_cgroup's, just found). */
static void read_counters_in(watched_process *w, loop_watch *l, hw_cgroup_cpu *cgroup, hw_thread_counters *out)
{
    hw_thread_counters_read(w->pid, l->tid, cgroup, out);
    out->cgroup_generation = w->cgroup_generation;
    out->agent_stopped_ns = l->agent_stopped_ns;
    out->agent_stops = l->agent_stops;
}

static void read_counters(watched_process *w, loop_watch *l, hw_thread_counters *out)
{
    read_counters_in(w, l, process_cgroup(w), out);
}

void hang_time_note_stop(watched_process *w, loop_watch *l, uint64_t seq)
{
    read_counters(w, l, &l->time_base);
    l->time_base_seq = seq;
    l->time_base_stopped = true;
}

/* Does the kernel observer keep `w`'s stretch starts (wait_observer.h)? */
static bool kernel_keeps_starts(const agent *a, const watched_process *w)
{
    return hw_kobs_owns(a->kobs, w->page);
}

/* A reading of loop `l`'s thread, and the loop's stretch number right
 * after it: the loop may have turned while its counters were read. */
static uint64_t read_counters_then_seq(watched_process *w, loop_watch *l, hw_cgroup_cpu *cgroup,
                                       hw_thread_counters *out)
{
    read_counters_in(w, l, cgroup, out);
    atomic_thread_fence(memory_order_seq_cst);
    return atomic_load_explicit(&w->page->slots[l->slot].seq, memory_order_acquire);
}

/* The first look into stretch `seq` whose window starts at a reading in
 * the wait before it (see window_start_of): kept only if the stretch was
 * still under way when it was read. */
static void read_first_busy(watched_process *w, loop_watch *l, hw_cgroup_cpu *cgroup, uint64_t seq)
{
    hw_thread_counters reading;
    if (read_counters_then_seq(w, l, cgroup, &reading) != seq)
        return;
    l->first_busy = reading;
    l->first_busy_seq = seq;
}

uint64_t hang_time_note_look(agent *a, watched_process *w, loop_watch *l, const hw_loop_reading *r, uint64_t now)
{
    /* The kernel keeps each stretch's start: a reading is wanted only for
     * a cgroup's throttling, and none is without a quota (a move into one
     * is found at the hang's own reading).  Under watch --all, most loops. */
    if (kernel_keeps_starts(a, w) && w->cgroup_looked && !(w->cgroup_error == 0 && w->cgroup.limited))
        return UINT64_MAX;
    /* A reading from before the process moved to another cgroup does not
     * subtract from one after: take it again (in the wait, it still stands
     * for the stretch's start). */
    hw_cgroup_cpu *cgroup = process_cgroup(w);
    /* Looks every 50 ms while the loop turns, so that a stretch's first
     * reading is no later than that into it; where the kernel keeps each
     * stretch's start, only for the cgroup's throttling counters, which
     * are the group's (none without a quota). */
    bool cadence = !kernel_keeps_starts(a, w) || (cgroup != NULL && cgroup->limited);
    if (l->time_base.valid && l->time_base.cgroup_generation == w->cgroup_generation) {
        if (l->time_base_seq == r->seq)
            return UINT64_MAX; /* this wait's, or this stretch's, is kept */
        if (r->busy && l->time_base_seq + 1 == r->seq && !(l->time_base_seq & 1)) {
            /* taken in the wait right before this stretch: it stands for its start; one more, once, tells
             * whether the thread waited for a CPU before the stretch began */
            if (l->first_busy_seq != r->seq)
                read_first_busy(w, l, cgroup, r->seq);
            return UINT64_MAX;
        }
        uint64_t allowed = l->time_base.at_ns + TIME_READING_MIN_INTERVAL_NS;
        if (now < allowed)
            return r->busy || cadence ? allowed : UINT64_MAX; /* the loop turned: look again then */
    }
    hw_thread_counters reading;
    /* A reading stands for the next stretch's start only if the wait it was
     * taken in still went on after it: one whose stretch began meanwhile is
     * that stretch's earlier look (its sleeps so far are in it, and they are
     * no wait for a CPU), and one across more turns stands for none. */
    uint64_t seq_after = read_counters_then_seq(w, l, cgroup, &reading);
    uint64_t seq = r->seq;
    if (seq_after != r->seq) {
        if (r->busy || seq_after != r->seq + 1)
            return cadence ? now + TIME_READING_MIN_INTERVAL_NS : UINT64_MAX;
        seq = seq_after;
    }
    l->time_base = reading;
    l->time_base_seq = seq;
    l->time_base_stopped = false;
    return cadence ? now + TIME_READING_MIN_INTERVAL_NS : UINT64_MAX;
}

/* What a long stretch sleeps in: looked at every SLEEP_LOOK_NS from a
 * quarter of the threshold on (a stretch that short never costs a look). */
#define SLEEP_LOOK_NS 100000000ull

uint64_t hang_time_note_sleep(agent *a, watched_process *w, loop_watch *l, const hw_loop_reading *r, uint64_t now)
{
    if (!r->busy)
        return UINT64_MAX;
    uint64_t from = r->busy_start_ns + a->opts->detector.threshold_ns / 4;
    if (now < from)
        return from;
    if (l->sleeps.seq != r->seq || now >= l->next_sleep_look_ns) {
        hw_blocked_look look;
        hw_blocked_look_brief(w->pid, l->tid, &look);
        hw_sleep_tally_add(&l->sleeps, r->seq, &look);
        l->next_sleep_look_ns = now + SLEEP_LOOK_NS;
    }
    return l->next_sleep_look_ns;
}

/* What the thread slept in over the window, when that is not what `look`
 * (the capture's) says: the kind the looks at the stretch found most,
 * where `look` found it running, or asleep in a kind found less often. */
static void slept_in(watched_process *w, loop_watch *l, uint64_t seq, hw_time_section *t)
{
    unsigned looks = 0, current = 0;
    hw_blocked_look top;
    if (!hw_sleep_tally_top(&l->sleeps, seq, &top, &looks))
        return;
    for (unsigned i = 0; i < l->sleeps.kinds; i++) {
        hw_blocked_look k = {.valid = true,
                             .state = l->sleeps.kind[i].state,
                             .in_syscall = l->sleeps.kind[i].in_syscall,
                             .syscall = l->sleeps.kind[i].syscall,
                             .fd = l->sleeps.kind[i].fd};
        if (hw_look_same_sleep(&k, &t->look))
            current = l->sleeps.kind[i].looks;
    }
    if (hw_look_asleep(&t->look) && (hw_look_same_sleep(&top, &t->look) || current >= looks))
        return; /* the look says it */
    hw_blocked_look_describe_fd(w->pid, &top);
    t->slept = top;
    t->slept_looks = looks;
    t->looks = l->sleeps.looks;
    hw_cause_decide(t);
}

void hang_time_thread_reading(watched_process *w, pid_t tid, hw_thread_counters *out)
{
    hw_thread_counters_read(w->pid, tid, process_cgroup(w), out);
    out->cgroup_generation = w->cgroup_generation;
}

void hang_time_cpu_section(watched_process *w, pid_t tid, const hw_thread_counters *from, uint64_t capture_stop_ns,
                           hw_time_section *out)
{
    hw_thread_counters now;
    hang_time_thread_reading(w, tid, &now);
    now.agent_stopped_ns = from != NULL ? from->agent_stopped_ns + capture_stop_ns : capture_stop_ns;
    now.agent_stops = (from != NULL ? from->agent_stops : 0) + (capture_stop_ns > 0);
    uint64_t start = from != NULL && from->valid ? from->at_ns : 0;
    hw_time_section_fill(out, from, &now, process_cgroup(w), w->cgroup_error, start, start, "cpu_window", NULL);
    if (!out->present && now.valid)
        out->missing = "no reading of the thread's counters from the start of the report's window";
}

/* The loop's counters where stretch `seq` (begun at `stretch_start_ns`)
 * began, kept by the kernel at its loop wait's return (the kernel
 * observer's pages): the window is the whole stretch however often the
 * loop turns.  The cgroup's throttling counters are the group's, not the
 * thread's: they come from the agent's own reading of this cgroup, the
 * nearest before, or the first in the stretch, or none.  The captures' stops in this stretch are not
 * in its start. */
static bool kernel_stretch_start(const agent *a, watched_process *w, loop_watch *l, uint64_t seq,
                                 uint64_t stretch_start_ns, hw_thread_counters *out)
{
    if (l->kernel_start.valid && l->kernel_start_seq == seq) {
        *out = l->kernel_start; /* the hang's final update: as at its detection */
        return true;
    }
    hw_kobs_stretch_counters k;
    if (!kernel_keeps_starts(a, w) || !hw_kobs_stretch_start(a->kobs, w->page, l->slot, seq, &k))
        return false;
    memset(out, 0, sizeof *out);
    out->valid = true;
    out->at_ns = stretch_start_ns;
    out->state = 'R'; /* just back from its wait */
    out->has_schedstat = k.has_runqueue;
    out->on_cpu_ns = k.on_cpu_ns;
    out->runqueue_ns = k.runqueue_ns;
    out->has_faults = out->has_switches = true;
    out->major_faults = k.major_faults;
    out->voluntary_switches = k.voluntary_switches;
    out->has_cputime = true;
    hw_cputime_adjust(k.utime_ns, k.stime_ns, k.on_cpu_ns, &out->user_ns, &out->system_ns);
    out->cgroup_generation = w->cgroup_generation;
    /* the agent's reading before the stretch, or its first one in it (a
     * loop that turned again at once: the throttling from there on) */
    const hw_thread_counters *base = &l->time_base;
    if (base->valid && base->has_throttle && base->cgroup_generation == w->cgroup_generation &&
        (base->at_ns <= stretch_start_ns || l->time_base_seq == seq)) {
        out->has_throttle = true;
        out->throttled_ns = base->throttled_ns;
        out->throttled_periods = base->throttled_periods;
    }
    bool stopped_in_it = l->stretch_stops_seq == seq;
    out->agent_stopped_ns = l->agent_stopped_ns - (stopped_in_it ? l->stretch_stopped_ns : 0);
    out->agent_stops = l->agent_stops - (stopped_in_it ? l->stretch_stops : 0);
    l->kernel_start = *out;
    l->kernel_start_seq = seq;
    return true;
}

/* Where the window of stretch `seq` starts: the counters there (the
 * kernel's, copied into *at_start, or the agent's reading), with when and
 * which they are; NULL with none. */
static const hw_thread_counters *window_start_of(agent *a, watched_process *w, loop_watch *l, uint64_t seq,
                                                 uint64_t stretch_start_ns, hw_thread_counters *at_start,
                                                 uint64_t *window_start, const char **window_from)
{
    *window_start = stretch_start_ns;
    if (kernel_stretch_start(a, w, l, seq, stretch_start_ns, at_start)) {
        *window_from = "wait_return";
        return at_start;
    }
    if (!l->time_base.valid) {
        *window_start = 0;
        *window_from = NULL;
        return NULL;
    }
    uint64_t woken_wait;
    if (l->time_base_seq + 1 == seq && !(l->time_base_seq & 1)) {
        *window_from = "stretch_start"; /* read in the wait before the stretch */
        if (l->first_busy_seq == seq && l->first_busy.cgroup_generation == l->time_base.cgroup_generation &&
            hw_wait_before_stretch(&l->time_base, &l->first_busy, &woken_wait)) {
            /* its wait for a CPU after its wake-up was before the stretch */
            *at_start = l->time_base;
            at_start->runqueue_ns += woken_wait;
            return at_start;
        }
    } else if (l->time_base_seq == seq && l->time_base_stopped) {
        /* read while stopped, where the stretch's clock starts again */
        *window_start = stretch_start_ns > l->time_base.at_ns ? l->time_base.at_ns : stretch_start_ns;
        *window_from = "stop";
    } else if (l->time_base_seq == seq) {
        /* read at an earlier look in the stretch */
        *window_start = l->time_base.at_ns > stretch_start_ns ? l->time_base.at_ns : stretch_start_ns;
        *window_from = "earlier_look";
    } else {
        *window_start = 0;
        *window_from = NULL;
        return NULL;
    }
    return &l->time_base;
}

void hang_time_reading(watched_process *w, loop_watch *l, hw_thread_counters *out)
{
    read_counters(w, l, out);
}

/* Stretch `seq`'s section from its window's start to `end` (NULL: read
 * now, into *now); the counters the window starts from, NULL if none. */
static const hw_thread_counters *fill_section(agent *a, watched_process *w, loop_watch *l, uint64_t seq,
                                              uint64_t stretch_start_ns, const hw_blocked_look *look,
                                              const hw_thread_counters *end, hw_thread_counters *now,
                                              hw_thread_counters *at_start, hw_time_section *out)
{
    hw_cgroup_cpu *cgroup = process_cgroup(w); /* found again if the process moved */
    if (end != NULL && end->valid && end->cgroup_generation == w->cgroup_generation)
        *now = *end;
    else
        read_counters_in(w, l, cgroup, now);
    uint64_t window_start;
    const char *window_from;
    const hw_thread_counters *from =
        window_start_of(a, w, l, seq, stretch_start_ns, at_start, &window_start, &window_from);
    hw_time_section_fill(out, from, now, cgroup, w->cgroup_error, window_start, stretch_start_ns, window_from, look);
    return from;
}

void hang_time_section(agent *a, watched_process *w, loop_watch *l, uint64_t seq, uint64_t stretch_start_ns,
                       hw_blocked_look *look, const hw_thread_counters *end, hw_time_section *out)
{
    if (look)
        hw_blocked_look_describe_fd(w->pid, look);
    hw_thread_counters now, at_start;
    const hw_thread_counters *from = fill_section(a, w, l, seq, stretch_start_ns, look, end, &now, &at_start, out);
    if (look != NULL)
        hw_sleep_tally_add(&l->sleeps, seq, look); /* the capture's look counts too */
    if (look != NULL) {
        if (!l->hang_look.valid)
            l->hang_look = *look; /* the detection's */
        if (out->present)
            slept_in(w, l, seq, out);
    } else if (l->hang_look.valid && out->present) {
        /* The final verdict says what it was blocked on from the
         * detection's look, or from the looks at the whole stretch where
         * they say more; the detection's look is the capture's to show,
         * not this. */
        out->look = l->hang_look;
        hw_cause_decide(out);
        slept_in(w, l, seq, out);
        out->look.valid = false;
    }
    if (from == NULL) {
        /* The next section of this stretch (the final update) counts from here. */
        l->time_base = now;
        l->time_base_seq = seq;
        l->time_base_stopped = false;
    }
}

void hang_time_preview(agent *a, watched_process *w, loop_watch *l, uint64_t seq, uint64_t stretch_start_ns,
                       const hw_blocked_look *look, const hw_thread_counters *end, hw_time_section *out)
{
    hw_thread_counters now, at_start;
    (void)fill_section(a, w, l, seq, stretch_start_ns, look, end, &now, &at_start, out);
}
