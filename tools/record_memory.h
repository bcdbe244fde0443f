/*
 * record_memory.h - what the recorders of fuzz seeds share
 * (record_python_memory.c, record_js_memory.c): a read of a child's memory
 * that keeps a copy of what it read, the copies written as the fuzz
 * targets' segments, and the child started and waited for.
 */
#ifndef HANGWATCH_RECORD_MEMORY_H
#define HANGWATCH_RECORD_MEMORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* Read `len` bytes of `pid` at `addr` (process_vm_readv) and keep the
 * first copy of each (address, length) read: false when it cannot be read. */
bool record_memory_read(pid_t pid, uint64_t addr, void *buf, size_t len);

/* Write every kept copy as {u64 address, u32 length, bytes}. */
void record_memory_write_segments(FILE *f);

/* Forget every kept copy. */
void record_memory_free(void);

/* Run argv[0] with the arguments argv[1..] (NULL-terminated) with a pipe
 * for stdin (kept open in *in) and wait for it to print "ready": its pid,
 * or -1 (it is killed). */
pid_t record_memory_start(char *const *argv, int *in);

#endif
