/*
 * machine_scan.c - `hangwatch watch --all`: the processes of the machine
 * whose threads wait in a loop, found by the agent itself, as one agent per
 * machine does (docs/decisions.md §46).
 *
 * Once a second the agent reads /proc's list of processes (the agent's pid
 * namespace: the host's holds every container's).  A process it has not
 * seen is held to the selectors (core/process_select.h: its comm,
 * executable, cgroups and user); one not chosen is passed over until it
 * execs another program (the exec tracepoint's news, kernel_observer.h).
 * A chosen one is watched as soon as one of its threads is found blocked in
 * a wait call (epoll_wait, poll, select, io_uring ...), its loop threads
 * then found by their waits (--threads loops); until then it is looked at
 * again after 1, 2, 4 ... 60 s, so a batch job costs a few reads a minute.
 * A look at /proc sees only the threads blocked at that moment, and a loop
 * on a saturated machine may be runnable at every look: so a chosen
 * process is also marked in the kernel observer's map (a candidate, no
 * page), and the first wait call of any of its threads sets the mark,
 * which each scan reads; it is watched at the next one.
 * Its forks are watched from their start (--follow); its exit cleans up as
 * any watched process's.  Kernel threads, hangwatch itself and any other
 * process running hangwatch's own executable are never watched.
 *
 * New selectors (watch --config read again) forget what was passed over and
 * let go of what is no longer chosen: the next scan, at once, chooses anew.
 *
 * Bounded: what the agent remembers of the machine's processes is a keyed
 * table of at most MAX_KNOWN entries (core/keyed_table.h), forgotten whole
 * and learned again at its bound; each look reads at most MAX_TASKS
 * threads of a process.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/keyed_table.h"
#include "core/process_select.h"
#include "core/text_escape.h"
#include "watch.h"

#define SCAN_INTERVAL_NS 1000000000ull
#define RETRY_MAX_NS 60000000000ull
#define MAX_KNOWN 65536
#define MAX_TASKS 256

typedef enum known_state {
    KNOWN_PENDING = 0, /* chosen, not yet seen waiting: look again at next_look_ns */
    KNOWN_PASSED,      /* not chosen (or cannot be watched): until it execs */
    KNOWN_WATCHED,     /* in the table (or was: its exit removes it from there) */
    KNOWN_GONE,        /* pending, then missing from /proc: a new process of that pid is new */
} known_state;

typedef struct known_process {
    uint64_t key; /* pid + 1 */
    uint64_t next_look_ns;
    hw_kernel_observer *marked; /* its candidate mark is in this observer's map, or NULL */
    uint32_t looks;
    uint32_t seen_scan; /* the last scan that found it in /proc */
    uint8_t state;      /* known_state */
} known_process;

struct machine_scan {
    hw_keyed_table known;
    uint64_t next_scan_ns;
    uint32_t scans;
    dev_t own_dev;
    ino_t own_ino;
    unsigned long watched, passed; /* for the summary line */
};

/* Its candidate mark dropped (a keyed table's clear: at forgetting too). */
static void unmark(void *entry)
{
    known_process *k = entry;
    if (k->marked != NULL)
        hw_kobs_candidate_remove(k->marked, (pid_t)(k->key - 1));
    k->marked = NULL;
}

/* Chosen and not yet waiting: marked, so its first wait call says so. */
static void mark(agent *a, known_process *k)
{
    if (k->marked == NULL && hw_kobs_candidate_add(a->kobs, (pid_t)(k->key - 1)))
        k->marked = a->kobs;
}

machine_scan *machine_scan_new(void)
{
    machine_scan *m = calloc(1, sizeof *m);
    if (m == NULL)
        return NULL;
    hw_keyed_table_init(&m->known, sizeof(known_process), MAX_KNOWN, unmark);
    struct stat st;
    if (stat("/proc/self/exe", &st) == 0) {
        m->own_dev = st.st_dev;
        m->own_ino = st.st_ino;
    }
    return m;
}

void machine_scan_free(machine_scan *m)
{
    if (m == NULL)
        return;
    hw_keyed_table_free(&m->known);
    free(m);
}

/* Is `pid` a kernel thread, or running hangwatch's own executable? */
static bool never_watched(const machine_scan *m, pid_t pid, const hw_task_stat *st)
{
    if (pid == getpid() || st->ppid == 2 || pid == 2)
        return true; /* kthreadd's children */
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/exe", (int)pid);
    struct stat exe;
    if (stat(path, &exe) != 0)
        return errno == ENOENT; /* a kernel thread has none; another user's we may not see */
    return exe.st_dev == m->own_dev && exe.st_ino == m->own_ino;
}

/* What the selectors hold a process to, read from /proc (bounded). */
typedef struct facts_buffers {
    char comm[16];
    char exe[PATH_MAX];
    char cgroup[8192];
} facts_buffers;

static void read_facts(pid_t pid, facts_buffers *b, hw_process_facts *f)
{
    memset(f, 0, sizeof *f);
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
    hw_proc_read_comm(path, b->comm);
    f->comm = b->comm;
    snprintf(path, sizeof path, "/proc/%d/exe", (int)pid);
    ssize_t n = readlink(path, b->exe, sizeof b->exe - 1);
    b->exe[n > 0 ? n : 0] = '\0';
    f->exe = b->exe;
    snprintf(path, sizeof path, "/proc/%d/cgroup", (int)pid);
    n = hw_proc_read_small(path, b->cgroup, sizeof b->cgroup);
    /* "ID:CONTROLLERS:PATH" lines: the paths */
    for (char *line = n > 0 ? b->cgroup : NULL, *next; line && *line && f->cgroup_count < HW_SELECT_MAX_CGROUPS;
         line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        char *colon = strchr(line, ':');
        colon = colon ? strchr(colon + 1, ':') : NULL;
        if (colon && colon[1] == '/')
            f->cgroups[f->cgroup_count++] = colon + 1;
    }
    long uid = hw_proc_status_number(pid, "Uid");
    f->uid_known = uid >= 0;
    f->uid = (uid_t)uid;
}

/* Is a thread of `pid` blocked in a wait call now? */
static bool waits_now(pid_t pid)
{
    pid_t *tids = NULL;
    size_t count = 0;
    if (hw_task_list(pid, &tids, &count) != 0)
        return false;
    bool waits = false;
    for (size_t i = 0; i < count && i < MAX_TASKS && !waits; i++) {
        hw_task_syscall_info call;
        waits = hw_task_syscall_read(pid, tids[i], &call) == 0 && hw_is_wait_syscall(call.nr);
    }
    free(tids);
    return waits;
}

/* Watch `pid` through the kernel observer; false when it could not be. */
static bool watch_it(agent *a, pid_t pid)
{
    char why[512];
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pidfd < 0)
        return false;
    watched_process *w = kernel_watch_found(a, pid, pidfd, why, sizeof why);
    if (w == NULL) {
        close(pidfd);
        return false;
    }
    return true;
}

/* A look at a process not watched: choose it or pass it over; watch it
 * when it waits, else look again later. */
static void look_at(agent *a, machine_scan *m, known_process *k, pid_t pid, bool fresh, uint64_t now)
{
    if (fresh) {
        hw_task_stat st;
        facts_buffers b;
        hw_process_facts f;
        if (hw_task_stat_read(pid, 0, &st) != 0 || never_watched(m, pid, &st)) {
            k->state = KNOWN_PASSED;
            return;
        }
        read_facts(pid, &b, &f);
        if (!hw_process_selected(a->opts->selectors, a->opts->selector_count, &f)) {
            unmark(k);
            k->state = KNOWN_PASSED;
            m->passed++;
            return;
        }
        mark(a, k);
    }
    if (k->state != KNOWN_PENDING)
        return;
    /* A thread of it made a wait call since it was marked (under load its
     * threads may be runnable at every look at /proc), or one is in one now. */
    bool waited = k->marked != NULL && hw_kobs_candidate_waited(k->marked, pid);
    if (!waited && now < k->next_look_ns)
        return;
    if ((waited || waits_now(pid)) && watch_it(a, pid)) {
        k->marked = NULL; /* its entry is a watched process's now */
        k->state = KNOWN_WATCHED;
        m->watched++;
        return;
    }
    if (waited)
        unmark(k); /* it could not be watched: the looks at /proc decide from here */
    uint64_t wait = SCAN_INTERVAL_NS << (k->looks < 6 ? k->looks : 6); /* 1, 2, 4 ... s */
    k->looks++;
    k->next_look_ns = now + (wait < RETRY_MAX_NS ? wait : RETRY_MAX_NS);
}

uint64_t machine_scan_due(const machine_scan *m)
{
    return m != NULL ? m->next_scan_ns : UINT64_MAX;
}

void machine_scan_tick(agent *a, machine_scan *m, uint64_t now)
{
    if (m == NULL || now < m->next_scan_ns)
        return;
    m->next_scan_ns = now + SCAN_INTERVAL_NS;
    DIR *proc = opendir("/proc");
    if (proc == NULL)
        return;
    uint32_t scan = ++m->scans;
    struct dirent *e;
    while ((e = readdir(proc)) != NULL) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end != '\0' || pid <= 0 || pid > INT32_MAX || table_find(a, (pid_t)pid) != NULL)
            continue;
        bool fresh = false;
        known_process *k = hw_keyed_table_claim(&m->known, (uint64_t)pid + 1, &fresh);
        if (k == NULL)
            continue;
        if (!fresh && k->state == KNOWN_WATCHED)
            k->state = KNOWN_PASSED; /* watched once, gone from the table: it ended, or could not stay */
        if (!fresh && k->state == KNOWN_GONE) {
            *k = (known_process){.key = k->key}; /* a new process of a pid seen before */
            fresh = true;
        }
        k->seen_scan = scan;
        look_at(a, m, k, (pid_t)pid, fresh, now);
    }
    closedir(proc);
    /* The pending ones that ended: their marks go */
    known_process *k;
    for (size_t i = 0; (k = hw_keyed_table_next(&m->known, &i)) != NULL;)
        if (k->state == KNOWN_PENDING && k->seen_scan != scan) {
            unmark(k);
            k->state = KNOWN_GONE;
        }
}

void machine_scan_exec(agent *a, machine_scan *m, pid_t pid, uint64_t now)
{
    if (m == NULL || pid <= 0 || table_find(a, pid) != NULL)
        return;
    bool fresh = false;
    known_process *k = hw_keyed_table_claim(&m->known, (uint64_t)pid + 1, &fresh);
    if (k == NULL)
        return;
    /* another program: chosen again or not; looked at once it reached its loop */
    unmark(k); /* a mark of the program before */
    k->state = KNOWN_PENDING;
    k->seen_scan = m->scans;
    k->looks = 0;
    k->next_look_ns = now + SCAN_INTERVAL_NS / 4;
    look_at(a, m, k, pid, true, now);
}

void machine_scan_reselect(agent *a, machine_scan *m)
{
    if (m == NULL)
        return;
    uint64_t now = hw_monotonic_ns();
    for (size_t i = 0; i < a->table.end; i++) {
        watched_process *w = a->table.slots[i];
        if (w == NULL)
            continue;
        facts_buffers b;
        hw_process_facts f;
        read_facts(w->pid, &b, &f);
        if (hw_process_selected(a->opts->selectors, a->opts->selector_count, &f))
            continue;
        char comm[64];
        if (!a->opts->quiet)
            fprintf(stderr, "hangwatch: pid %d (%s) is not chosen by the selectors any more: no longer watched\n",
                    (int)w->pid, hw_escape_text(b.comm, comm, sizeof comm));
        finish_process(a, w, now, "agent_exited", -1);
        table_remove(a, w);
    }
    /* everything else is looked at again at the next scan, now */
    hw_keyed_table_forget_all(&m->known);
    m->next_scan_ns = now;
}
