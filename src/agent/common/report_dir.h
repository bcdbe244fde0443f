/*
 * report_dir.h - the report directory, held open by descriptor.
 *
 * The agent may run as root and the directory's path may pass through
 * places other users control, so the directory is checked once, before the
 * program starts (hangwatch exits 2 with the reason when it is unusable),
 * and from then on every file is made, read and renamed relative to that
 * open descriptor (openat, O_NOFOLLOW), never by path.  A directory that
 * another user owns or can write to is refused: anyone who can write there
 * could plant or swap files hangwatch then reads or counts.  Temporary
 * files get unpredictable names.  Only files hangwatch wrote (regular files
 * named hang-*.json and owned by the agent's user) count toward the daily
 * limit and the size cap.
 */
#ifndef HANGWATCH_REPORT_DIR_H
#define HANGWATCH_REPORT_DIR_H

#include <stddef.h>
#include <stdint.h>

#include "core/report_limits.h"

typedef struct hw_report_dir hw_report_dir;

/* The largest report hangwatch reads back (to add a final duration). */
#define HW_REPORT_MAX_BYTES (64u << 20)

/*
 * Open `path` as the report directory, creating it (and missing parents)
 * with mode 0700 if needed, and check that it is fit: a directory (not a
 * symlink to one; symlinks among its parents are followed), owned by the
 * agent's user (or root), writable by it and by nobody else (no group or
 * other write bit; ACLs are not looked at).  Returns 0 and the handle, or
 * -errno with a sentence for people in `why` (what is wrong and how to fix
 * it), e.g. "it is a regular file, not a directory".
 */
int hw_report_dir_open(const char *path, hw_report_dir **out, char *why, size_t why_len);

/*
 * The walk hw_report_dir_open makes, for any directory (output_file.c's
 * too): `path` from / (a relative one from the working directory), one
 * component at a time with O_NOFOLLOW, each directory on the way the
 * agent user's or root's and not writable by others unless sticky, a
 * symbolic link followed only when it is the agent user's or root's
 * (another user's refused, naming it).  HW_WALK_MAKE_MISSING makes a
 * missing directory (mode 0700) instead of failing; HW_WALK_FOLLOW_LAST
 * follows the last component when it is such a link, where the report
 * directory refuses it.  The last directory's descriptor (opened for
 * reading; its own checks are the caller's), or -errno with why.
 */
#define HW_WALK_MAKE_MISSING 1u
#define HW_WALK_FOLLOW_LAST 2u
int hw_walk_to_dir(const char *path, unsigned flags, char *why, size_t why_len);

void hw_report_dir_close(hw_report_dir *d);

/* The path it was opened with, for messages. */
const char *hw_report_dir_path(const hw_report_dir *d);

/* Its descriptor, for what lives beside the reports (the Sentry spool). */
int hw_report_dir_fd(const hw_report_dir *d);

/* Write `len` bytes as `file_name` atomically: a 0600 temporary file with a
 * random name, fsync, renameat, fsync of the directory.  A reader never sees
 * a partial file.  0 or -errno (-ENOSPC when the disk is full). */

int hw_report_dir_write(hw_report_dir *d, const char *file_name, const char *text, size_t len);

/* Read `file_name` back (a regular file owned by the agent's user, no
 * symlink, at most HW_REPORT_MAX_BYTES).  0 and a malloc'd NUL-terminated
 * copy (and its length, if `len` is not NULL), or -errno: -ELOOP for a
 * symlink, -EINVAL for not a regular file, -EPERM for another owner, -EFBIG
 * past the cap. */
int hw_report_dir_read(hw_report_dir *d, const char *file_name, char **text, size_t *len);

/* The size of `file_name` (a regular file, not followed if a symlink).
 * 0 or -errno. */
int hw_report_dir_file_size(hw_report_dir *d, const char *file_name, uint64_t *bytes);

/* What hangwatch's own reports in it add up to: those of the last 24 h,
 * and their total size. */
hw_report_dir_usage hw_report_dir_usage_now(hw_report_dir *d);

#endif
