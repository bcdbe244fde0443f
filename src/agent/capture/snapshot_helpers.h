/*
 * snapshot_helpers.h - what snapshot.c uses of snapshot_helpers.c beyond
 * snapshot.h: the clock, and the process's end read after a session.
 */
#ifndef HANGWATCH_CAPTURE_SNAPSHOT_HELPERS_H
#define HANGWATCH_CAPTURE_SNAPSHOT_HELPERS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "snapshot.h"

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t hw_snapshot_now_ns(void);

/* After a session of `pid` (`all_threads`: every thread was taken;
 * `is_parent`: the agent is its parent): whether it has ended, in
 * out->process_exited, with its status in out->exit_status and, when it
 * is ours, consumed (out->reaped).  A leader still on its way out, every
 * thread of an all-threads capture gone, is given a moment (a process
 * being killed). */
void hw_snapshot_note_end(pid_t pid, bool all_threads, bool is_parent, hw_process_snapshot *out);

#endif
