/*
 * jit_map_file.c - /tmp/perf-PID.map read safely by a root agent (see
 * jit_map_file.h): open without following links or blocking, check what
 * was opened through its descriptor, read at most the cap, parse.
 */
#include "jit_map_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void jit_map_path(pid_t pid, char *buf, size_t len)
{
    snprintf(buf, len, "/tmp/perf-%ld.map", (long)pid);
}

/* Set *error to a formatted sentence (if error is not NULL); returns NULL
 * with errno = err, for `return fail(...)`. */
static hw_jit_map *fail(char **error, int err, const char *format, ...)
{
    if (error) {
        va_list ap;
        va_start(ap, format);
        if (vasprintf(error, format, ap) < 0)
            *error = NULL;
        va_end(ap);
    }
    errno = err;
    return NULL;
}

/* Read up to `cap` bytes of `fd` (a file that may still grow; `size_hint`
 * is its size when checked) into a malloc'd *out; 0 or -errno. */
static int read_capped(int fd, size_t size_hint, size_t cap, char **out, size_t *len)
{
    size_t have = size_hint < cap ? size_hint : cap;
    if (have < 4096)
        have = 4096 < cap ? 4096 : cap;
    char *buf = malloc(have);
    if (!buf)
        return -ENOMEM;
    size_t used = 0;
    for (;;) {
        if (used == have) {
            if (have == cap)
                break; /* the rest is not read */
            size_t bigger = have > cap / 2 ? cap : have * 2;
            char *grown = realloc(buf, bigger);
            if (!grown) {
                free(buf);
                return -ENOMEM;
            }
            buf = grown;
            have = bigger;
        }
        ssize_t n = read(fd, buf + used, have - used);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            int err = errno;
            free(buf);
            return -err;
        }
        if (n == 0)
            break;
        used += (size_t)n;
    }
    *out = buf;
    *len = used;
    return 0;
}

/* /tmp/perf-<pid>.map opened and checked (regular, one link, the owner's
 * or root's): its descriptor and *st, or -1 with errno and *error set. */
static int open_checked(pid_t pid, uid_t owner_uid, struct stat *st, char **error)
{
    char path[64];
    jit_map_path(pid, path, sizeof path);
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        int err = errno;
        if (err == ENOENT)
            fail(error, err, "no perf map %s: start node with " HW_JIT_MAP_NODE_FLAGS " to name its "
                 "JavaScript frames", path);
        else if (err == ELOOP)
            fail(error, err, "%s refused: it is a symbolic link", path);
        else
            fail(error, err, "cannot open %s: %s", path, strerror(err));
        return -1;
    }
    int err = 0;
    if (fstat(fd, st) != 0) {
        err = errno;
        fail(error, err, "cannot stat %s: %s", path, strerror(err));
    } else if (!S_ISREG(st->st_mode)) {
        err = EINVAL;
        fail(error, err, "%s refused: not a regular file", path);
    } else if (st->st_uid != owner_uid && st->st_uid != 0) {
        err = EPERM;
        fail(error, err, "%s refused: owned by uid %lu, not by the program's user (uid %lu) or root", path,
             (unsigned long)st->st_uid, (unsigned long)owner_uid);
    } else if (st->st_nlink != 1) {
        err = EPERM;
        fail(error, err, "%s refused: it has %lu hard links (node's own file has one)", path,
             (unsigned long)st->st_nlink);
    }
    if (err != 0) {
        close(fd);
        errno = err;
        return -1;
    }
    return fd;
}

/* Up to `cap` bytes of `fd` from `offset`, whole lines only (the bytes
 * after the last newline are a line being written, or cut by the cap):
 * malloc'd *text of *len bytes; 0 or -errno. */
static int read_lines(int fd, off_t offset, size_t size_hint, size_t cap, char **text, size_t *len)
{
    if (offset > 0 && lseek(fd, offset, SEEK_SET) != offset)
        return -errno;
    int rc = read_capped(fd, size_hint, cap, text, len);
    if (rc != 0)
        return rc;
    const char *last_newline = *len > 0 ? memrchr(*text, '\n', *len) : NULL;
    *len = last_newline ? (size_t)(last_newline - *text) + 1 : 0;
    return 0;
}

hw_jit_map *hw_jit_map_load(pid_t pid, uid_t owner_uid, char **error)
{
    if (error)
        *error = NULL;
    struct stat st;
    int fd = open_checked(pid, owner_uid, &st, error);
    if (fd < 0)
        return NULL;
    char *text = NULL;
    size_t len = 0;
    int rc = read_lines(fd, 0, st.st_size > 0 ? (size_t)st.st_size : 0, HW_JIT_MAP_MAX_FILE_BYTES, &text, &len);
    close(fd);
    if (rc == -ENOMEM)
        return fail(error, ENOMEM, "perf map of pid %ld: out of memory", (long)pid);
    if (rc < 0)
        return fail(error, -rc, "cannot read the perf map of pid %ld: %s", (long)pid, strerror(-rc));
    hw_jit_map *map = hw_jit_map_parse(text, len, NULL);
    free(text);
    if (!map)
        return fail(error, ENOMEM, "perf map of pid %ld: out of memory", (long)pid);
    return map;
}

/* ---- kept per process -------------------------------------------------- */

typedef struct cached_map {
    pid_t pid; /* 0: a free slot */
    dev_t dev;
    ino_t inode;
    struct timespec mtime;
    off_t file_size;   /* when last read */
    size_t consumed;   /* bytes of whole lines parsed */
    bool cut;          /* the cap was reached: the rest is never read */
    unsigned in_use;
    uint64_t last_used;
    hw_jit_map *map;
} cached_map;

struct hw_jit_map_cache {
    size_t file_cap;
    cached_map maps[HW_JIT_MAP_CACHE_MAPS];
    uint64_t clock;
    hw_jit_map_cache_stats stats;
};

static _Thread_local hw_jit_map_cache *bound_cache;

hw_jit_map_cache *hw_jit_map_cache_new(size_t file_cap)
{
    hw_jit_map_cache *c = calloc(1, sizeof *c);
    if (c != NULL)
        c->file_cap = file_cap > 0 && file_cap < HW_JIT_MAP_MAX_FILE_BYTES ? file_cap : HW_JIT_MAP_MAX_FILE_BYTES;
    return c;
}

static void forget(cached_map *m)
{
    hw_jit_map_free(m->map);
    memset(m, 0, sizeof *m);
}

void hw_jit_map_cache_free(hw_jit_map_cache *c)
{
    if (c == NULL)
        return;
    if (bound_cache == c)
        bound_cache = NULL;
    for (size_t i = 0; i < HW_JIT_MAP_CACHE_MAPS; i++)
        forget(&c->maps[i]);
    free(c);
}

/* The slot for `pid`: its own, a free one, or the least recently used one
 * that no symbolizer holds (forgotten); NULL when every slot is held. */
static cached_map *slot_for(hw_jit_map_cache *c, pid_t pid)
{
    cached_map *victim = NULL;
    for (size_t i = 0; i < HW_JIT_MAP_CACHE_MAPS; i++) {
        cached_map *m = &c->maps[i];
        if (m->pid == pid)
            return m;
        if (m->in_use == 0 && (victim == NULL || m->pid == 0 || (victim->pid != 0 && m->last_used < victim->last_used)))
            victim = m;
    }
    if (victim != NULL && victim->pid != 0) {
        forget(victim);
        c->stats.evictions++;
    }
    return victim;
}

static bool same_file(const cached_map *m, const struct stat *st)
{
    return m->map != NULL && m->dev == st->st_dev && m->inode == st->st_ino;
}

static bool unchanged(const cached_map *m, const struct stat *st)
{
    return same_file(m, st) && m->file_size == st->st_size && m->mtime.tv_sec == st->st_mtim.tv_sec &&
           m->mtime.tv_nsec == st->st_mtim.tv_nsec;
}

const hw_jit_map *hw_jit_map_cache_get(hw_jit_map_cache *c, pid_t pid, uid_t owner_uid, bool *cut, char **error)
{
    if (error)
        *error = NULL;
    if (cut)
        *cut = false;
    if (c == NULL || pid <= 0) {
        errno = EINVAL;
        return NULL;
    }
    cached_map *m = slot_for(c, pid);
    if (m == NULL) {
        errno = EBUSY;
        return fail(error, EBUSY, "perf map of pid %ld: every cache slot is in use", (long)pid);
    }
    if (m->pid == pid && m->in_use > 0) {
        /* Held by a symbolizer: it keeps the map as it first read it. */
        m->in_use++;
        if (cut)
            *cut = m->cut;
        return m->map;
    }
    struct stat st;
    int fd = open_checked(pid, owner_uid, &st, error);
    if (fd < 0) {
        int err = errno;
        forget(m); /* gone or refused now: nothing kept */
        errno = err;
        return NULL;
    }
    if (m->pid == pid && (unchanged(m, &st) || (m->cut && same_file(m, &st) && st.st_size >= m->file_size))) {
        /* As read (a map cut at the cap is not read further). */
        close(fd);
        c->stats.reuses++;
    } else {
        /* V8 only appends: a file that grew is read from where the last
         * read stopped; anything else is read again from the start. */
        bool append = m->pid == pid && same_file(m, &st) && st.st_size > m->file_size;
        if (!append)
            forget(m);
        size_t room = c->file_cap - m->consumed;
        char *text = NULL;
        size_t len = 0;
        size_t hint = st.st_size > (off_t)m->consumed ? (size_t)(st.st_size - (off_t)m->consumed) : 0;
        int rc = read_lines(fd, (off_t)m->consumed, hint, room, &text, &len);
        close(fd);
        if (rc < 0) {
            forget(m);
            return fail(error, -rc, "cannot read the perf map of pid %ld: %s", (long)pid, strerror(-rc));
        }
        bool ok = append ? hw_jit_map_append(m->map, text, len, NULL) : (m->map = hw_jit_map_parse(text, len, NULL)) != NULL;
        free(text);
        if (!ok) {
            forget(m);
            return fail(error, ENOMEM, "perf map of pid %ld: out of memory", (long)pid);
        }
        c->stats.bytes_read += len;
        if (append)
            c->stats.tail_reads++;
        else
            c->stats.full_reads++;
        m->pid = pid;
        m->dev = st.st_dev;
        m->inode = st.st_ino;
        m->mtime = st.st_mtim;
        m->file_size = st.st_size;
        m->consumed += len;
        /* Whole lines up to the cap were taken: what is left over it is never read. */
        m->cut = st.st_size > (off_t)m->consumed && m->consumed + HW_JIT_MAP_MAX_LINE + 1 > c->file_cap;
    }
    m->in_use++;
    m->last_used = ++c->clock;
    if (cut)
        *cut = m->cut;
    return m->map;
}

void hw_jit_map_cache_put(hw_jit_map_cache *c, const hw_jit_map *map)
{
    for (size_t i = 0; c != NULL && map != NULL && i < HW_JIT_MAP_CACHE_MAPS; i++)
        if (c->maps[i].map == map && c->maps[i].in_use > 0) {
            c->maps[i].in_use--;
            return;
        }
}

void hw_jit_map_cache_get_stats(const hw_jit_map_cache *c, hw_jit_map_cache_stats *out)
{
    if (c != NULL)
        *out = c->stats;
    else
        memset(out, 0, sizeof *out);
}

void hw_jit_map_cache_bind(hw_jit_map_cache *c)
{
    bound_cache = c;
}

hw_jit_map_cache *hw_jit_map_cache_bound(void)
{
    return bound_cache;
}

bool hw_jit_map_exists(pid_t pid)
{
    char path[64];
    jit_map_path(pid, path, sizeof path);
    struct stat st;
    return lstat(path, &st) == 0 && S_ISREG(st.st_mode);
}
