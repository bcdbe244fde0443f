/*
 * watched_table.c - the table of watched processes.
 *
 * Every process the agent watches, however it came (a registration the
 * admission let in, a process of the kernel observer's), has one entry
 * here, from the moment it is added to its teardown.  The entry is its
 * own allocation and keeps its place: a pointer the watch loop holds stays
 * that process's until table_remove, whatever else comes and goes, and a
 * walk of the table may remove the process it is at.
 *
 * The table owns what a process holds (its page, its pidfd, its loops with
 * their detectors and samplers, its CPU watch, the names of its Python
 * code) and frees all of it on removal.  Closing its hangs is the hang
 * lifecycle's (finish_process), done by the caller first, so the table
 * never calls upward.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "core/text_escape.h"
#include "watch.h"

/* A time in CLOCK_MONOTONIC no later than the start of process `pid`, from
 * its start in clock ticks after boot (/proc/PID/stat), one tick early for
 * the conversion between the boot clock and the monotonic one; 0 when it
 * cannot be read. */
static uint64_t process_born_ns(pid_t pid)
{
    hw_task_stat st;
    struct timespec boot;
    if (hw_task_stat_read(pid, 0, &st) != 0 || clock_gettime(CLOCK_BOOTTIME, &boot) != 0)
        return 0;
    uint64_t mono = hw_monotonic_ns();
    uint64_t tick = hw_clock_tick_ns();
    uint64_t boot_now = (uint64_t)boot.tv_sec * 1000000000ull + (uint64_t)boot.tv_nsec;
    if (st.start_ticks > (boot_now / tick))
        return 0; /* not a start we can believe */
    uint64_t age = boot_now - st.start_ticks * tick + tick;
    return age < mono ? mono - age : 0;
}

/* Fill a new entry: what the process is, read once. */
static void start_watching(agent *a, watched_process *w, pid_t pid, int pidfd, const hw_shared_page *page)
{
    w->pidfd = pidfd;
    w->pid = pid;
    w->serial = ++a->next_serial;
    w->page = page;
    w->clock = page->clock; /* once: the program may write its page at any time */
    w->born_ns = process_born_ns(pid);
    w->end_status = -1;
    a->ever_registered = true;
    char link[64];
    snprintf(link, sizeof link, "/proc/%d/exe", (int)pid);
    ssize_t n = readlink(link, w->executable, sizeof w->executable - 1);
    w->executable[n > 0 ? n : 0] = '\0';
    js_maps_note_process(a, w->pid, w->executable);
    hw_metrics *metrics = hw_exports_metrics(a->exports);
    if (metrics) {
        char comm[16], label[136];
        hw_container container;
        snprintf(link, sizeof link, "/proc/%d/comm", (int)pid);
        hw_proc_read_comm(link, comm);
        hw_container_of(pid, &container);
        hw_container_label(&container, label, sizeof label);
        hw_metrics_key(comm[0] ? comm : "?", label, w->metrics_name, sizeof w->metrics_name);
        hw_metrics_watched(metrics, w->metrics_name, 1);
    }
    look_for_runtimes(a, w);
    w->next_wake_ns = hw_monotonic_ns(); /* look at it (and find its loops) now */
}

watched_process *table_add(agent *a, pid_t pid, int pidfd, const hw_shared_page *page)
{
    watched_table *t = &a->table;
    size_t slot = 0;
    while (slot < MAX_WATCHED && t->slots[slot] != NULL)
        slot++;
    if (slot == MAX_WATCHED)
        return NULL;
    watched_process *w = calloc(1, sizeof *w);
    if (w == NULL)
        return NULL;
    if (!hw_kobs_owns(a->kobs, page))
        page_guard_add(page); /* a program's page: the guard covers it */
    start_watching(a, w, pid, pidfd, page);
    /* Its end wakes the watch thread (an epoll of every pidfd: the poll set
     * stays a few descriptors however many are watched). */
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (uint64_t)pid};
    if (pidfd >= 0 && a->pidfds_epoll >= 0)
        epoll_ctl(a->pidfds_epoll, EPOLL_CTL_ADD, pidfd, &ev);
    t->slots[slot] = w;
    t->count++;
    if (slot >= t->end)
        t->end = slot + 1;
    return w;
}

const char *process_name_text(pid_t pid, char out[PROCESS_NAME_TEXT])
{
    char path[64], comm[16];
    snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
    hw_proc_read_comm(path, comm);
    return hw_escape_text(comm[0] ? comm : "?", out, PROCESS_NAME_TEXT);
}

watched_process *table_find(agent *a, pid_t pid)
{
    for (size_t i = 0; i < a->table.end; i++)
        if (a->table.slots[i] != NULL && a->table.slots[i]->pid == pid)
            return a->table.slots[i];
    return NULL;
}

/* Give back `w`'s page: the kernel observer's is forgotten there, a
 * program's is unguarded and unmapped. */
static void release_page(agent *a, watched_process *w)
{
    if (w->page && hw_kobs_owns(a->kobs, w->page)) {
        hw_kobs_forget(a->kobs, w->page); /* the kernel observer's: not ours to unmap */
    } else if (w->page) {
        page_guard_remove(w->page);
        munmap((void *)w->page, HW_PAGE_SIZE);
    }
    w->page = NULL;
}

void table_remove(agent *a, watched_process *w)
{
    watched_table *t = &a->table;
    size_t slot = 0;
    while (slot < t->end && t->slots[slot] != w)
        slot++;
    if (slot == t->end)
        return; /* not ours */
    if (w->pidfd >= 0) {
        if (a->pidfds_epoll >= 0)
            epoll_ctl(a->pidfds_epoll, EPOLL_CTL_DEL, w->pidfd, NULL);
        close(w->pidfd);
    }
    if (w->metrics_name[0])
        hw_metrics_watched(hw_exports_metrics(a->exports), w->metrics_name, -1);
    free_loops(w);
    cpu_high_free(w);
    /* the names kept of its code: none can be asked for again */
    hw_runtime_namers_forget(a->sample_namers, w->serial);
    worker_forget_process(a->worker, w->serial);
    release_page(a, w);
    free(w);
    t->slots[slot] = NULL;
    t->count--;
    while (t->end > 0 && t->slots[t->end - 1] == NULL)
        t->end--;
}

void table_switch_page(agent *a, watched_process *w, const hw_shared_page *page)
{
    free_loops(w);
    release_page(a, w);
    w->page = page;
    w->clock = page->clock; /* the kernel observer's: CLOCK_MONOTONIC */
    w->next_wake_ns = hw_monotonic_ns();
}
