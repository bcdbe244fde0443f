/*
 * jit_map_file.h - reading a node program's perf map, /tmp/perf-PID.map,
 * for jit_map.h to name its JavaScript frames.
 *
 * The agent may run as root, and /tmp is writable by everyone, so the file
 * is opened the way a root reader must open a file in someone else's
 * reach: never through a symlink (O_NOFOLLOW), never blocking on a FIFO
 * (O_NONBLOCK, then refused as not a regular file), and accepted only when
 * it is a regular file with one link, owned by the watched program's user
 * or by root.  Another user could otherwise plant the file before node
 * starts and name the program's frames at will, or, with a symlink or a
 * hard link, have root read a file they may not read and show its lines in
 * a report.  At most HW_JIT_MAP_MAX_FILE_BYTES are read.
 *
 * The path is the one V8 writes, with the pid as the agent sees it: a node
 * in its own pid and mount namespaces (a container) writes its file
 * elsewhere, under its own pid, and is not found here.
 */
#ifndef HANGWATCH_JIT_MAP_FILE_H
#define HANGWATCH_JIT_MAP_FILE_H

#include <stdbool.h>
#include <sys/types.h>

#include "core/parse/jit_map.h"

/* The most of a perf map read (a large program's is a few MiB). */
#define HW_JIT_MAP_MAX_FILE_BYTES (64u << 20)

/* How node must be started for its frames to have names. */
#define HW_JIT_MAP_NODE_FLAGS "--perf-basic-prof-only-functions --interpreted-frames-native-stack"

/*
 * Read and parse /tmp/perf-<pid>.map.  `owner_uid` is the watched
 * program's uid; the file must belong to it or to root.  Only whole lines
 * count: the bytes after the last newline are dropped (V8 ends every line
 * with one, so they are a line being written, or cut by the size cap).
 *
 * Returns the map, or NULL with errno set and, if `error` is not NULL, a
 * sentence in *error (malloc'd, for the caller to free; NULL if even that
 * failed):
 *   ENOENT  no file: node runs without HW_JIT_MAP_NODE_FLAGS (or is not node)
 *   ELOOP   a symbolic link
 *   EINVAL  not a regular file (a FIFO, a directory, ...)
 *   EPERM   another user's file, or a file with more than one link
 *   ENOMEM  out of memory
 *   other   from open, fstat or read
 */
hw_jit_map *hw_jit_map_load(pid_t pid, uid_t owner_uid, char **error);

/*
 * Perf maps kept per process, so that reports of one node read its map
 * once and then only what V8 appended.  A map is kept while its file's
 * device, inode, size and modification time are those last read; a file
 * that grew is read from where the last read stopped (whole lines) and
 * added (hw_jit_map_append); any other change reads it again.  At most
 * HW_JIT_MAP_CACHE_MAPS processes are kept (the least recently used one
 * goes first) and at most the cap of each file is ever read: a map over it
 * is used up to the cap (*cut is then true) and not read further.  One
 * thread's: hw_jit_map_cache_bind gives the calling thread's symbolizers
 * one to share; without one, each symbolizer reads the map itself.
 */
#define HW_JIT_MAP_CACHE_MAPS 4

typedef struct hw_jit_map_cache hw_jit_map_cache;

typedef struct hw_jit_map_cache_stats {
    uint64_t full_reads, tail_reads, reuses, evictions, bytes_read;
} hw_jit_map_cache_stats;

/* `file_cap`: the most read of one file (0 or over the maximum:
 * HW_JIT_MAP_MAX_FILE_BYTES). */
hw_jit_map_cache *hw_jit_map_cache_new(size_t file_cap);
void hw_jit_map_cache_free(hw_jit_map_cache *c);

/* pid's map, read, brought up to date or kept; held until
 * hw_jit_map_cache_put (a held map is not read again nor forgotten).  NULL
 * with errno and *error as hw_jit_map_load, or EBUSY when every slot is
 * held. */
const hw_jit_map *hw_jit_map_cache_get(hw_jit_map_cache *c, pid_t pid, uid_t owner_uid, bool *cut, char **error);
void hw_jit_map_cache_put(hw_jit_map_cache *c, const hw_jit_map *map);

void hw_jit_map_cache_get_stats(const hw_jit_map_cache *c, hw_jit_map_cache_stats *out);

void hw_jit_map_cache_bind(hw_jit_map_cache *c);
hw_jit_map_cache *hw_jit_map_cache_bound(void);

/* Whether /tmp/perf-<pid>.map is there as a regular file (lstat, symlinks
 * not followed; the owner is not checked). */
bool hw_jit_map_exists(pid_t pid);

#endif
