/*
 * cgroup_cpu.c - see cgroup_cpu.h.  Finding goes: the process's cgroup
 * lines and the agent's mountinfo (each read whole up to LISTING_MAX
 * bytes), the hierarchy's directory for the process (the mount point under
 * `sys_root`, plus the cgroup path less the mount's root), then a walk up
 * from that directory to the mount point reading each limit file until one
 * holds a quota, and last the chosen directory's cpu.stat.  The v2
 * hierarchy is tried first, v1's cpu controller when v2 does not carry the
 * CPU controller for the process.
 */
#include "cgroup_cpu.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/capture/proc_task.h"
#include "core/parse/cgroup_text.h"

/* Most bytes read of /proc/PID/cgroup and mountinfo (a host with thousands
 * of container mounts stays well under it). */
#define LISTING_MAX (1u << 20)
/* A cgroup's limit and cpu.stat files (v2's cpu.stat is about 300 bytes). */
#define SMALL_FILE_MAX 4096
/* A directory or file path being built: a cgroup path and a mount point. */
#define PATH_BUF (2 * HW_CGROUP_PATH_MAX + 64)

/* Up to LISTING_MAX bytes of `path`, malloc'd and NUL-terminated, its
 * length in *len; when the file is longer, what follows the last newline
 * read is dropped, so that no line is taken cut short.  NULL and *err = -errno when
 * it cannot be read. */
static char *read_listing(const char *path, size_t *len, int *err)
{
    bool cut;
    char *buf = hw_proc_read_capped(path, LISTING_MAX, len, &cut, err);
    if (buf != NULL && cut) {
        while (*len > 0 && buf[*len - 1] != '\n')
            (*len)--;
        buf[*len] = '\0';
    }
    return buf;
}

/* `name` in directory `dir` into buf[SMALL_FILE_MAX]: its length, or -errno
 * (-EFBIG when it fills the buffer: a cut number would be a wrong one). */
static ssize_t read_cgroup_file(const char *dir, const char *name, char *buf)
{
    char path[PATH_BUF];
    int n = snprintf(path, sizeof path, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= sizeof path)
        return -ENAMETOOLONG;
    ssize_t got = hw_proc_read_small(path, buf, SMALL_FILE_MAX);
    if (got >= (ssize_t)SMALL_FILE_MAX - 1)
        return -EFBIG;
    return got;
}

/* The limit set on `dir`: 0 (quota and period 0 when there is none),
 * -ENOENT when `dir` has no limit file (v2 without the CPU controller
 * there), -EINVAL when it does not parse, or another -errno. */
static int read_limit(int version, const char *dir, bool *limited, uint64_t *quota_us, uint64_t *period_us)
{
    char buf[SMALL_FILE_MAX];
    bool is_limited = false;
    uint64_t quota = 0, period = 0;
    if (version == 2) {
        ssize_t n = read_cgroup_file(dir, "cpu.max", buf);
        if (n < 0)
            return (int)n;
        if (!hw_cgroup_v2_cpu_max(buf, (size_t)n, &is_limited, &quota, &period))
            return -EINVAL;
    } else {
        ssize_t n = read_cgroup_file(dir, "cpu.cfs_quota_us", buf);
        if (n < 0)
            return (int)n;
        if (!hw_cgroup_v1_quota(buf, (size_t)n, &is_limited, &quota))
            return -EINVAL;
        if (is_limited) {
            n = read_cgroup_file(dir, "cpu.cfs_period_us", buf);
            if (n < 0)
                return (int)n;
            if (!hw_cgroup_v1_period(buf, (size_t)n, &period))
                return -EINVAL;
        }
    }
    *limited = is_limited;
    *quota_us = is_limited ? quota : 0;
    *period_us = is_limited ? period : 0;
    return 0;
}

/* One cpu.stat counter: 0 and *value (0 when cpu.stat does not show it),
 * or -EINVAL. */
static int stat_counter(const char *text, size_t len, const char *key, uint64_t *value)
{
    switch (hw_cgroup_stat_value(text, len, key, value)) {
    case HW_CGROUP_KEY_FOUND:
        return 0;
    case HW_CGROUP_KEY_ABSENT:
        *value = 0;
        return 0;
    case HW_CGROUP_KEY_MALFORMED:
        break;
    }
    return -EINVAL;
}

/* c->dir's cpu.stat counters into c. */
static int read_counters(hw_cgroup_cpu *c)
{
    char buf[SMALL_FILE_MAX];
    ssize_t n = read_cgroup_file(c->dir, "cpu.stat", buf);
    if (n < 0)
        return (int)n;
    size_t len = (size_t)n;
    uint64_t periods, throttled, throttled_time;
    int r = stat_counter(buf, len, "nr_periods", &periods);
    if (r == 0)
        r = stat_counter(buf, len, "nr_throttled", &throttled);
    if (r == 0)
        r = stat_counter(buf, len, c->version == 2 ? "throttled_usec" : "throttled_time", &throttled_time);
    if (r != 0)
        return r;
    if (c->version == 2)
        throttled_time = throttled_time > UINT64_MAX / 1000 ? UINT64_MAX : throttled_time * 1000;
    c->nr_periods = periods;
    c->nr_throttled = throttled;
    c->throttled_ns = throttled_time;
    return 0;
}

/* Does the v2 directory `dir` list the CPU controller in cgroup.controllers? */
static bool v2_has_cpu_controller(const char *dir)
{
    char buf[SMALL_FILE_MAX];
    ssize_t n = read_cgroup_file(dir, "cgroup.controllers", buf);
    return n >= 0 && hw_cgroup_controllers_has(buf, (size_t)n, "cpu");
}

/* The process's cgroup `cgroup_path` in hierarchy `version`, mounted as
 * `mount` under `sys_root`: its limiting (or own) directory, limit and
 * counters into *out. */
static int find_in_hierarchy(int version, const char *sys_root, const hw_cgroup_mount *mount, const char *cgroup_path,
                             hw_cgroup_cpu *out)
{
    const char *relative = hw_cgroup_relative_path(cgroup_path, mount->root);
    if (relative == NULL)
        return -ENOENT;
    /* The mount point under sys_root, without a trailing slash ("" for a
     * hierarchy mounted at "/"), then the process's own directory. */
    char dir[PATH_BUF];
    int n = snprintf(dir, sizeof dir, "%s%s", sys_root, mount->mount_point);
    if (n < 0 || (size_t)n >= sizeof dir)
        return -ENAMETOOLONG;
    size_t base_len = (size_t)n;
    while (base_len > 0 && dir[base_len - 1] == '/')
        base_len--;
    dir[base_len] = '\0';
    const char *below = strcmp(relative, "/") == 0 ? "" : relative;
    n = snprintf(dir + base_len, sizeof dir - base_len, "%s", below);
    if (n < 0 || (size_t)n >= sizeof dir - base_len)
        return -ENAMETOOLONG;
    if (dir[0] == '\0')
        strcpy(dir, "/");
    size_t own_len = strlen(dir);
    struct stat st;
    if (stat(dir, &st) != 0)
        return -errno;
    if (!S_ISDIR(st.st_mode))
        return -ENOTDIR;

    /* Up from the own directory to the mount point: the nearest quota.  A
     * walk on a copy, cut one component at a time (the path is canonical). */
    char walk[PATH_BUF];
    memcpy(walk, dir, own_len + 1);
    size_t walk_len = own_len;
    bool controller = false, limited = false;
    uint64_t quota = 0, period = 0;
    for (;;) {
        int r = read_limit(version, walk, &limited, &quota, &period);
        if (r == 0) {
            controller = true;
            if (limited)
                break;
        } else if (r != -ENOENT || (version == 1 && walk_len == own_len)) {
            return r;
        }
        if (walk_len <= base_len || walk_len <= 1)
            break; /* the mount point was read */
        /* Cut "/NAME": every component of the cgroup path starts with a
         * slash at or after base_len. */
        while (walk[walk_len - 1] != '/')
            walk_len--;
        if (walk_len > 1)
            walk_len--; /* the slash too, unless it is the root "/" */
        walk[walk_len] = '\0';
    }
    /* No cpu.max on the way: the walk went up to the mount point, whose
     * cgroup.controllers says whether v2 has the CPU controller at all. */
    if (version == 2 && !controller && !v2_has_cpu_controller(walk))
        return -ENOENT; /* it is on v1, or nowhere */

    hw_cgroup_cpu c;
    memset(&c, 0, sizeof c);
    const char *chosen = limited ? walk : dir;
    if (strlen(chosen) >= sizeof c.dir || own_len >= sizeof c.own_dir)
        return -ENAMETOOLONG;
    strcpy(c.dir, chosen);
    memcpy(c.own_dir, dir, own_len + 1);
    c.version = version;
    c.limited = limited;
    c.quota_us = quota;
    c.period_us = period;
    int r = read_counters(&c);
    if (r != 0)
        return r;
    *out = c;
    return 0;
}

/* What finding needs besides the texts, off the stack (12 KiB). */
typedef struct scratch {
    char cgroup_path[HW_CGROUP_PATH_MAX];
    hw_cgroup_mount mount;
} scratch;

int hw_cgroup_cpu_find(const char *proc_root, const char *sys_root, pid_t pid, hw_cgroup_cpu *out)
{
    if (out == NULL)
        return -EINVAL;
    memset(out, 0, sizeof *out);
    if (proc_root == NULL || sys_root == NULL || pid <= 0)
        return -EINVAL;
    char path[PATH_BUF];
    int n = snprintf(path, sizeof path, "%s/%d/cgroup", proc_root, (int)pid);
    if (n < 0 || (size_t)n >= sizeof path)
        return -ENAMETOOLONG;
    size_t cgroups_len = 0, mounts_len = 0;
    int err;
    char *cgroups = read_listing(path, &cgroups_len, &err);
    if (cgroups == NULL)
        return err;
    n = snprintf(path, sizeof path, "%s/self/mountinfo", proc_root);
    char *mounts = NULL;
    if (n < 0 || (size_t)n >= sizeof path)
        err = -ENAMETOOLONG;
    else
        mounts = read_listing(path, &mounts_len, &err);
    scratch *s = malloc(sizeof *s);
    if (mounts == NULL || s == NULL) {
        free(cgroups);
        free(mounts);
        free(s);
        return mounts == NULL ? err : -ENOMEM;
    }

    hw_cgroup_cpu found;
    int result = -ENOENT;
    if (hw_cgroup_v2_path(cgroups, cgroups_len, s->cgroup_path, sizeof s->cgroup_path)
        && hw_cgroup_v2_mount(mounts, mounts_len, s->cgroup_path, &s->mount))
        result = find_in_hierarchy(2, sys_root, &s->mount, s->cgroup_path, &found);
    if (result != 0 && hw_cgroup_v1_path(cgroups, cgroups_len, "cpu", s->cgroup_path, sizeof s->cgroup_path)
        && hw_cgroup_v1_mount(mounts, mounts_len, "cpu", s->cgroup_path, &s->mount))
        result = find_in_hierarchy(1, sys_root, &s->mount, s->cgroup_path, &found);
    if (result == 0)
        *out = found;
    free(s);
    free(mounts);
    free(cgroups);
    return result;
}

int hw_cgroup_cpu_read(hw_cgroup_cpu *c)
{
    if (c == NULL || (c->version != 1 && c->version != 2) || c->dir[0] == '\0')
        return -ENOENT;
    hw_cgroup_cpu again = *c;
    int r = read_limit(again.version, again.dir, &again.limited, &again.quota_us, &again.period_us);
    if (r == -ENOENT && again.version == 2) {
        again.limited = false; /* no cpu.max there: no controller, no limit */
        again.quota_us = again.period_us = 0;
        r = 0;
    }
    if (r == 0)
        r = read_counters(&again);
    if (r != 0)
        return r;
    *c = again;
    return 0;
}
