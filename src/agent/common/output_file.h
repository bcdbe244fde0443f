/*
 * output_file.h - a file hangwatch writes for the user outside the report
 * directory (`html -o`, `export -o`, `stack --json`, `--metrics-file`),
 * with the report directory's care: hangwatch may run as root, and the
 * path may pass through directories other users can change.
 *
 * The file's directory is reached by the report directory's walk
 * (report_dir.h, hw_walk_to_dir): every component opened with O_NOFOLLOW,
 * another user's symbolic link or directory on the way refused, naming it,
 * and no directory made.  The directory itself must be the agent user's
 * or root's, and writable by nobody else unless it is sticky (/tmp).  The
 * file is written to a temporary file there (a random name, O_EXCL, the
 * mode asked for) and renamed over its name: a reader sees the old file or
 * the whole new one, and a symbolic link planted with the final name is
 * replaced, never followed.  An existing final name that is a symbolic
 * link or not a regular file is refused up front.
 */
#ifndef HANGWATCH_OUTPUT_FILE_H
#define HANGWATCH_OUTPUT_FILE_H

#include <stddef.h>
#include <sys/types.h>

/* The directory `path` is to be written in (a descriptor, opened for
 * reading) and *name, its last component within `path`; -errno with why,
 * the offending component named. */
int hw_output_dir_open(const char *path, const char **name, char *why, size_t why_len);

/* `text` (`len` bytes) and `tail` (NULL: none) into `path`, mode `mode`,
 * atomically.  0, or -errno with why. */
int hw_output_file_write(const char *path, const char *text, size_t len, const char *tail, mode_t mode, char *why,
                         size_t why_len);

/* The same into the directory `dir_fd` already opened by
 * hw_output_dir_open (a file written again and again: the metrics). */
int hw_output_file_write_at(int dir_fd, const char *name, const char *text, size_t len, const char *tail,
                            mode_t mode, char *why, size_t why_len);

#endif
