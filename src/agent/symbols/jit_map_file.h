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

/* Whether /tmp/perf-<pid>.map is there as a regular file (lstat, symlinks
 * not followed; the owner is not checked). */
bool hw_jit_map_exists(pid_t pid);

#endif
