/*
 * cgroup_text.h - the texts that say which CPU cgroup a process is in and
 * how hard that cgroup's CPU limit holds it: /proc/PID/cgroup, the agent's
 * /proc/self/mountinfo, and a cgroup's cpu.stat, cpu.cfs_quota_us,
 * cpu.cfs_period_us (cgroup v1) and cpu.max (v2).  Pure: no OS calls; the
 * agent reads the files (agent/capture/cgroup_cpu.h).
 *
 * Every text is (text, len): no terminator needed, NUL bytes allowed (a
 * line holding one is malformed).  Lines end at '\n'; the bytes after the
 * last newline are a line too.  /proc/PID/cgroup comes from the watched
 * process's side (its cgroup names are chosen by whoever may create cgroups
 * there, a delegated container included) and the agent that reads it may
 * run as root, so it is parsed as hostile input: a path is copied only when
 * it fits the caller's buffer, and only when it is absolute and canonical
 * (no empty, "." or ".." component: the kernel writes "/.." for a cgroup
 * outside the reader's cgroup namespace, which no mount of the reader's
 * shows).  What does not parse is refused, never guessed at: the functions
 * return false (or HW_CGROUP_KEY_MALFORMED) and leave their outputs alone.
 */
#ifndef HANGWATCH_CGROUP_TEXT_H
#define HANGWATCH_CGROUP_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Longest cgroup path or mount point kept, terminator included (PATH_MAX). */
#define HW_CGROUP_PATH_MAX 4096

/* ---- /proc/PID/cgroup: "HIERARCHY-ID:CONTROLLERS:PATH" per hierarchy ---- */

/* The path of the v1 hierarchy whose comma-separated controller list holds
 * `controller` as a whole word ("cpu" is in "4:cpu,cpuacct:/app", not in
 * "3:cpuacct:/"), copied NUL-terminated into out[out_size].  False when no
 * line names it, when two lines do (a forged line: a cgroup name may hold a
 * newline), or when the path is malformed or does not fit. */
bool hw_cgroup_v1_path(const char *text, size_t len, const char *controller, char *out, size_t out_size);

/* The same for the v2 (unified) line, "0::PATH". */
bool hw_cgroup_v2_path(const char *text, size_t len, char *out, size_t out_size);

/* ---- /proc/self/mountinfo ---------------------------------------------- */

typedef struct hw_cgroup_mount {
    char mount_point[HW_CGROUP_PATH_MAX]; /* "/sys/fs/cgroup/cpu,cpuacct", unescaped */
    char root[HW_CGROUP_PATH_MAX];        /* the hierarchy directory mounted there (field 4), unescaped; "/" usually */
} hw_cgroup_mount;

/* The first mount (fstype "cgroup") of the v1 hierarchy whose super options
 * hold `controller` as a whole comma-separated word, and whose root holds
 * `cgroup_path` (hw_cgroup_relative_path; NULL: any root).  Mountinfo writes
 * space, tab, newline and backslash in paths as \040, \011, \012 and \134
 * (any \OOO is decoded); a line with a backslash that starts no such
 * escape, an escape making a NUL byte, a relative mount point, a root that
 * is not canonical, or a path that does not fit is skipped. */
bool hw_cgroup_v1_mount(const char *text, size_t len, const char *controller, const char *cgroup_path,
                        hw_cgroup_mount *out);

/* The same for the first cgroup2 mount. */
bool hw_cgroup_v2_mount(const char *text, size_t len, const char *cgroup_path, hw_cgroup_mount *out);

/* `path` (a cgroup path as /proc/PID/cgroup writes it) seen from a mount
 * whose root is `root`: the rest of `path` after `root` ("/" when they are
 * the same), or NULL when `path` is not `root` or below it ("/app" is not
 * below "/ap").  Points into `path`, or at a static "/". */
const char *hw_cgroup_relative_path(const char *path, const char *root);

/* ---- a cgroup's files --------------------------------------------------- */

/* Is `controller` one of the space-separated words of a v2
 * cgroup.controllers or cgroup.subtree_control text? */
bool hw_cgroup_controllers_has(const char *text, size_t len, const char *controller);

typedef enum hw_cgroup_key {
    HW_CGROUP_KEY_ABSENT,   /* no line has the key */
    HW_CGROUP_KEY_FOUND,    /* *value set */
    HW_CGROUP_KEY_MALFORMED /* the key's line is not "KEY DECIMAL" in 64 bits */
} hw_cgroup_key;

/* The number of the first "KEY VALUE" line of a cpu.stat whose key is
 * `key` (nr_periods, nr_throttled, throttled_time (v1, ns), throttled_usec
 * (v2)...). */
hw_cgroup_key hw_cgroup_stat_value(const char *text, size_t len, const char *key, uint64_t *value);

/* A v1 cpu.cfs_quota_us: "-1" (no limit: *limited false, *quota_us
 * untouched) or a positive number of microseconds.  Trailing whitespace is
 * allowed; anything else (another negative number, 0, junk) is refused. */
bool hw_cgroup_v1_quota(const char *text, size_t len, bool *limited, uint64_t *quota_us);

/* A v1 cpu.cfs_period_us: a positive number of microseconds. */
bool hw_cgroup_v1_period(const char *text, size_t len, uint64_t *period_us);

/* A v2 cpu.max: "max PERIOD" (no limit: *limited false, *quota_us untouched)
 * or "QUOTA PERIOD", both positive microseconds; trailing whitespace allowed. */
bool hw_cgroup_v2_cpu_max(const char *text, size_t len, bool *limited, uint64_t *quota_us, uint64_t *period_us);

#endif
