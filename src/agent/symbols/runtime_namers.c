/*
 * runtime_namers.c - one namer of Python or JavaScript code per watched
 * process, the sum of what they keep bounded (runtime_namers.h).
 *
 * Each watched process can make its own namer keep up to its per-process
 * bound (16 MiB of Python line tables, 32 MiB of V8 sources' line ends);
 * a thousand processes could then make the agent keep gigabytes.  The set
 * holds them all to one bound: after each naming, while the sum is past it,
 * the largest namer of another process is dropped (the one naming keeps
 * its own, itself bounded).  A dropped process loses nothing but time: its
 * next capture reads its names again.  The set is a plain array searched
 * from the end, one entry per process that was named: at most as many as
 * the agent watches, and one naming costs far more than the search.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/common/write_all.h"
#include "runtime_namers.h"

typedef struct namer_entry {
    uint64_t serial;
    pid_t pid;
    hw_python_namer *python;
    hw_js_namer *js;
} namer_entry;

struct hw_runtime_namers {
    namer_entry *entries;
    size_t count, cap;
    size_t max_bytes;
    char purpose[48];
    bool quiet;
    bool names_only;
    bool said_dropped;
};

hw_runtime_namers *hw_runtime_namers_new(size_t max_bytes, const char *purpose, bool quiet, bool names_only)
{
    hw_runtime_namers *set = calloc(1, sizeof *set);
    if (set == NULL)
        return NULL;
    set->max_bytes = max_bytes;
    snprintf(set->purpose, sizeof set->purpose, "%s", purpose != NULL ? purpose : "");
    set->quiet = quiet;
    set->names_only = names_only;
    return set;
}

static void entry_clear(namer_entry *e)
{
    hw_python_namer_free(e->python);
    hw_js_namer_free(e->js);
    e->python = NULL;
    e->js = NULL;
}

void hw_runtime_namers_free(hw_runtime_namers *set)
{
    if (set == NULL)
        return;
    for (size_t i = 0; i < set->count; i++)
        entry_clear(&set->entries[i]);
    free(set->entries);
    free(set);
}

static size_t entry_bytes(const namer_entry *e)
{
    return hw_python_namer_bytes(e->python) + hw_js_namer_bytes(e->js);
}

size_t hw_runtime_namers_bytes(const hw_runtime_namers *set)
{
    size_t total = 0;
    for (size_t i = 0; i < set->count; i++)
        total += entry_bytes(&set->entries[i]);
    return total;
}

/* p's entry, added when it has none; NULL when out of memory. */
static namer_entry *entry_of(hw_runtime_namers *set, const hw_namer_process *p)
{
    for (size_t i = set->count; i-- > 0;)
        if (set->entries[i].serial == p->serial)
            return &set->entries[i];
    if (set->count == set->cap) {
        size_t cap = set->cap ? set->cap * 2 : 16;
        namer_entry *grown = realloc(set->entries, cap * sizeof *grown);
        if (grown == NULL)
            return NULL;
        set->entries = grown;
        set->cap = cap;
    }
    namer_entry *e = &set->entries[set->count++];
    *e = (namer_entry){.serial = p->serial, .pid = p->pid};
    return e;
}

/* e's namer for p's runtime, made on first use; false when it runs none
 * that is read, or out of memory. */
static bool ready(const hw_runtime_namers *set, namer_entry *e, const hw_namer_process *p)
{
    if (p->py != NULL && p->py->readable) {
        if (e->python == NULL && (e->python = hw_python_namer_new(p->py, p->pid)) != NULL && set->names_only)
            hw_python_namer_names_only(e->python);
        return e->python != NULL;
    }
    if (p->js != NULL && p->js->readable) {
        if (e->js == NULL && (e->js = hw_js_namer_new(p->js, p->pid)) != NULL && set->names_only)
            hw_js_namer_names_only(e->js);
        return e->js != NULL;
    }
    return false;
}

static void say_dropped(hw_runtime_namers *set, const namer_entry *e)
{
    if (set->said_dropped || set->quiet)
        return;
    set->said_dropped = true;
    /* write(2), not stdio: stderr's stream lock is the idle worker's too */
    char line[360];
    int n = snprintf(line, sizeof line,
                     "hangwatch: the names kept of watched processes' Python and JavaScript code%s passed %zu MiB: "
                     "those of pid %d (%zu KiB) were dropped, to be read again at its next capture (further drops "
                     "are not said)\n",
                     set->purpose, set->max_bytes >> 20, (int)e->pid, entry_bytes(e) >> 10);
    if (n > 0)
        (void)hw_write_all(STDERR_FILENO, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

/* Bring the sum back within the bound, keeping `naming`'s namer. */
static void keep_bounded(hw_runtime_namers *set, uint64_t naming)
{
    size_t total = hw_runtime_namers_bytes(set);
    while (total > set->max_bytes) {
        namer_entry *largest = NULL;
        for (size_t i = 0; i < set->count; i++) {
            namer_entry *e = &set->entries[i];
            if (e->serial != naming && entry_bytes(e) > 0 && (largest == NULL || entry_bytes(e) > entry_bytes(largest)))
                largest = e;
        }
        if (largest == NULL)
            return;
        say_dropped(set, largest);
        total -= entry_bytes(largest);
        entry_clear(largest);
    }
}

/* Whether p runs a runtime whose frames are read (no entry is kept for one
 * that does not). */
static bool runs_runtime(const hw_namer_process *p)
{
    return (p->py != NULL && p->py->readable) || (p->js != NULL && p->js->readable);
}

/* p's entry with its namer ready, or NULL (no runtime read, no memory). */
static namer_entry *namer_for(hw_runtime_namers *set, const hw_namer_process *p)
{
    if (!runs_runtime(p))
        return NULL;
    namer_entry *e = entry_of(set, p);
    return e != NULL && ready(set, e, p) ? e : NULL;
}

hw_runtime_names *hw_runtime_namers_name(hw_runtime_namers *set, const hw_namer_process *p,
                                         const hw_process_snapshot *snap, bool target_only)
{
    namer_entry *e = namer_for(set, p);
    if (e == NULL)
        return NULL;
    hw_runtime_names *names = e->python != NULL ? hw_python_name_threads(e->python, snap, target_only)
                                                : hw_js_name_threads(e->js, snap, target_only);
    keep_bounded(set, p->serial);
    return names;
}

int hw_runtime_namers_frame_from_key(hw_runtime_namers *set, const hw_namer_process *p, uint64_t key, hw_frame *out)
{
    namer_entry *e = namer_for(set, p);
    if (e == NULL)
        return -1;
    return e->python != NULL ? hw_python_frame_from_key(e->python, key, out) : hw_js_frame_from_key(e->js, key, out);
}

void hw_runtime_namers_forget(hw_runtime_namers *set, uint64_t serial)
{
    for (size_t i = 0; set != NULL && i < set->count; i++) {
        if (set->entries[i].serial != serial)
            continue;
        entry_clear(&set->entries[i]);
        set->entries[i] = set->entries[--set->count];
        return;
    }
}
