/*
 * helper_thread.h - the threads a capture's ptrace session runs on, made
 * at the caller's scheduling policy, and one kept waiting ahead of time so
 * that a capture never creates a thread.
 *
 * Why ahead of time: creating a thread takes the dynamic loader's TLS lock
 * (the C library sets up the new thread's thread-local storage under it),
 * and dlopen holds that lock while it maps a library.  The agent's slow
 * threads run at SCHED_IDLE and do load libraries lazily (libdw loads its
 * debuginfod client at the first symbol it cannot find locally; name
 * lookups load NSS modules).  On a busy machine such a thread waits
 * seconds for a CPU while holding the lock, and a capture that had to
 * create its helper waited with it: a second hang detected during the
 * first report was captured only after the program had ended
 * (docs/decisions.md §52).  A keeper thread makes the helpers, one at a
 * time and always one ahead: it is the one that waits for the lock then.
 * Each helper still runs one session and ends (its exit releases what it
 * could not detach, snapshot.c).
 */
#ifndef HANGWATCH_CAPTURE_HELPER_THREAD_H
#define HANGWATCH_CAPTURE_HELPER_THREAD_H

#include <pthread.h>
#include <semaphore.h>
#include <stdbool.h>

/* Start a thread that runs `fn(arg)` at the calling thread's scheduling
 * policy and priority (SCHED_RESET_ON_FORK would otherwise give it the
 * normal policy, and on a busy machine it would wait behind every other
 * thread while the program stays stopped).  0 or an errno value. */
int hw_helper_thread_create(pthread_t *thread, void *(*fn)(void *), void *arg);

/* Keep one helper waiting for the calling thread's captures, at its
 * policy, priority and CPU affinity; with `wait_for_first`, returns once
 * the first one waits (bounded), else at once (the agent: a capture that
 * comes before it creates its own, and a program's start does not wait the
 * millisecond the first helper takes).  0, or an errno value (captures
 * then create their helper as without it).  Idempotent. */
int hw_capture_helpers_start(bool wait_for_first);

/* Let the keeper and the waiting helper go (a bounded wait for them to
 * end); captures create their own helper again.  The calling thread's kept
 * stack buffers (stack_scratch.h) are freed too. */
void hw_capture_helpers_stop(void);

/* For the capture: hand `run(arg)` to the waiting helper, which posts
 * `done` after it and then ends.  It, and the keeper that makes the next
 * one meanwhile, run off `avoid_cpu` (the hung thread's: cpu_avoid.h; -1
 * none) where another CPU is theirs.  False when no helper is waiting: the
 * caller makes one (hw_helper_thread_create). */
bool hw_capture_helper_take(void (*run)(void *arg), void *arg, sem_t *done, int avoid_cpu);

/* Whether a helper waits now (tests: the keeper makes the next one a
 * moment after one is taken). */
bool hw_capture_helper_waiting(void);

/* How many captures took a waiting helper and how many had to create
 * one, since the process started (tests and benchmarks). */
void hw_capture_helpers_counts(unsigned long *taken, unsigned long *created);

#endif
