/*
 * runtime_namers.h - the namers of Python and JavaScript code of every
 * watched process, kept by one thread, bounded in all.
 *
 * A namer (python_frames.h, js_frames.h) keeps what it read of one
 * process's code for the next capture; each is bounded on its own
 * (python_internal.h, js_internal.h).  A set keeps one per process, known
 * by a serial the agent never gives twice (a pid is reused), and holds the
 * sum of them all within `max_bytes`: past it, another process's namer is
 * dropped, the largest first, and made again, empty, at that process's next
 * naming.  A set is used by one thread: the report's naming thread keeps
 * one, the watch thread (early samples) another.
 */
#ifndef HANGWATCH_RUNTIME_NAMERS_H
#define HANGWATCH_RUNTIME_NAMERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "frame.h"
#include "js_frames.h"
#include "python_frames.h"

/* The process whose code is named: its serial, its pid, and the runtime it
 * runs (Python when py->readable, else V8 when js->readable). */
typedef struct hw_namer_process {
    uint64_t serial;
    pid_t pid;
    const hw_python_target *py;
    const hw_js_target *js;
} hw_namer_process;

typedef struct hw_runtime_namers hw_runtime_namers;

/* A set whose namers keep at most `max_bytes` in all; `purpose` names it in
 * the one line said on stderr when a namer is first dropped ("" for the
 * reports'), unless `quiet`.  With `names_only`, its namers read names and
 * files but no line tables or sources (hw_python_namer_names_only).  NULL
 * when out of memory. */
hw_runtime_namers *hw_runtime_namers_new(size_t max_bytes, const char *purpose, bool quiet, bool names_only);
void hw_runtime_namers_free(hw_runtime_namers *set);

/* The runtime frames of `snap` named with p's namer (made on first use),
 * one entry per thread, or NULL when it runs neither runtime or none were
 * read; then the set is brought back within its bound. */
hw_runtime_names *hw_runtime_namers_name(hw_runtime_namers *set, const hw_namer_process *p,
                                         const hw_process_snapshot *snap, bool target_only);

/* A sample's runtime frame, by its key, named again with p's namer: 0, or -1. */
int hw_runtime_namers_frame_from_key(hw_runtime_namers *set, const hw_namer_process *p, uint64_t key, hw_frame *out);

/* The process is gone: its namer is freed. */
void hw_runtime_namers_forget(hw_runtime_namers *set, uint64_t serial);

/* What the set's namers keep now, in bytes. */
size_t hw_runtime_namers_bytes(const hw_runtime_namers *set);

#endif
