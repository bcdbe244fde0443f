/*
 * sentry_spool.c - see sentry_spool.h.
 */
#include "sentry_spool.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/common/random_id.h"
#include "agent/common/write_all.h"

struct hw_sentry_spool {
    int fd;      /* the spool directory */
    int lock_fd; /* its .lock, flock'ed while held */
    bool locked;
    size_t max_events;
    uint64_t max_bytes;
};

void hw_sentry_spool_set_bounds(hw_sentry_spool *s, size_t max_events, uint64_t max_bytes)
{
    s->max_events = max_events;
    s->max_bytes = max_bytes;
}

static int say(char *why, size_t why_len, int rc, const char *text)
{
    snprintf(why, why_len, "%s", text);
    return rc;
}

int hw_sentry_spool_open(int report_dir_fd, bool create, hw_sentry_spool **out, char *why, size_t why_len)
{
    *out = NULL;
    if (create && mkdirat(report_dir_fd, HW_SPOOL_DIR, 0700) != 0 && errno != EEXIST)
        return say(why, why_len, -errno, "the spool directory cannot be made");
    int fd = openat(report_dir_fd, HW_SPOOL_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return say(why, why_len, -errno, errno == ENOENT ? "there is no spool" : "the spool is not a directory");
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_uid != geteuid() || (st.st_mode & 022) != 0) {
        close(fd);
        return say(why, why_len, -EPERM, "the spool is not owned by this user or others can write to it");
    }
    int lock_fd = openat(fd, ".lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (lock_fd < 0) {
        int e = errno;
        close(fd);
        return say(why, why_len, -e, "the spool's lock file cannot be opened");
    }
    hw_sentry_spool *s = calloc(1, sizeof *s);
    if (!s) {
        close(lock_fd);
        close(fd);
        return say(why, why_len, -ENOMEM, "out of memory");
    }
    s->fd = fd;
    s->lock_fd = lock_fd;
    s->max_events = HW_SPOOL_MAX_EVENTS;
    s->max_bytes = HW_SPOOL_MAX_BYTES;
    *out = s;
    return 0;
}

void hw_sentry_spool_close(hw_sentry_spool *s)
{
    if (!s)
        return;
    hw_sentry_spool_unlock(s);
    close(s->lock_fd);
    close(s->fd);
    free(s);
}

bool hw_spool_name_valid(const char *name, char id[33], bool *sending)
{
    for (int i = 0; i < 32; i++) {
        char c = name[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return false;
    }
    bool is_sending = strcmp(name + 32, ".sending") == 0;
    if (!is_sending && strcmp(name + 32, ".envelope") != 0)
        return false;
    if (id) {
        memcpy(id, name, 32);
        id[32] = '\0';
    }
    if (sending)
        *sending = is_sending;
    return true;
}

static bool id_valid(const char *id)
{
    char name[48];
    snprintf(name, sizeof name, "%.32s.envelope", id ? id : "");
    return id && strlen(id) == 32 && hw_spool_name_valid(name, NULL, NULL);
}

/* A file of ours: regular, owned by us, not a symlink. */
static bool ours(int dir_fd, const char *name, struct stat *st)
{
    return fstatat(dir_fd, name, st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st->st_mode) && st->st_uid == geteuid();
}

typedef struct entry {
    char id[33];
    int64_t mtime_ns;
} entry;

static int by_age(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    if (x->mtime_ns != y->mtime_ns)
        return x->mtime_ns < y->mtime_ns ? -1 : 1;
    return strcmp(x->id, y->id);
}

size_t hw_sentry_spool_list(hw_sentry_spool *s, char (*ids)[33], size_t max, size_t *total, uint64_t *bytes)
{
    if (total)
        *total = 0;
    if (bytes)
        *bytes = 0;
    int fd = openat(s->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return 0;
    }
    entry *list = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        char id[33];
        struct stat st;
        if (!hw_spool_name_valid(de->d_name, id, NULL) || !ours(s->fd, de->d_name, &st))
            continue;
        if (total)
            (*total)++;
        if (bytes)
            *bytes += (uint64_t)st.st_size;
        if (n == cap) {
            size_t grown = cap ? cap * 2 : 64;
            entry *more = realloc(list, grown * sizeof *list);
            if (!more)
                break;
            list = more;
            cap = grown;
        }
        memcpy(list[n].id, id, 33);
        list[n].mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000ll + st.st_mtim.tv_nsec;
        n++;
    }
    closedir(d);
    if (n > 1)
        qsort(list, n, sizeof *list, by_age);
    size_t out = 0;
    for (size_t i = 0; i < n && out < max; i++) {
        /* an id both waiting and claimed (cannot happen by our renames) once */
        if (out > 0 && strcmp(ids[out - 1], list[i].id) == 0)
            continue;
        memcpy(ids[out++], list[i].id, 33);
    }
    free(list);
    return out;
}

int hw_sentry_spool_add(hw_sentry_spool *s, const char *event_id, const char *text, size_t len)
{
    if (!id_valid(event_id) || len == 0 || len > HW_SPOOL_MAX_ENVELOPE)
        return -EINVAL;
    char waiting[48], claimed[48], tmp[64];
    snprintf(waiting, sizeof waiting, "%s.envelope", event_id);
    snprintf(claimed, sizeof claimed, "%s.sending", event_id);
    struct stat st;
    if (fstatat(s->fd, waiting, &st, AT_SYMLINK_NOFOLLOW) == 0 || fstatat(s->fd, claimed, &st, AT_SYMLINK_NOFOLLOW) == 0)
        return -EEXIST;
    size_t count = 0;
    uint64_t bytes = 0;
    char none[1][33];
    hw_sentry_spool_list(s, none, 0, &count, &bytes);
    if (count + 1 > s->max_events || bytes + len > s->max_bytes)
        return -ENOSPC;
    unsigned char rnd[6];
    hw_random_bytes(rnd, sizeof rnd);
    snprintf(tmp, sizeof tmp, ".tmp-%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5]);
    int fd = openat(s->fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    int rc = hw_write_all(fd, text, len);
    if (rc == 0 && fsync(fd) != 0)
        rc = -errno;
    close(fd);
    /* renameat2(RENAME_NOREPLACE) would refuse an existing name too; the
     * check above and the single writer (the report worker) suffice. */
    if (rc == 0 && renameat(s->fd, tmp, s->fd, waiting) != 0)
        rc = -errno;
    if (rc != 0)
        unlinkat(s->fd, tmp, 0);
    else
        fsync(s->fd);
    return rc;
}

int hw_sentry_spool_lock(hw_sentry_spool *s, unsigned wait_ms)
{
    if (s->locked)
        return 0;
    for (unsigned waited = 0;; waited += 50) {
        if (flock(s->lock_fd, LOCK_EX | LOCK_NB) == 0) {
            s->locked = true;
            return 0;
        }
        if (errno != EWOULDBLOCK && errno != EINTR)
            return -errno;
        if (waited >= wait_ms)
            return -EWOULDBLOCK;
        poll(NULL, 0, 50);
    }
}

void hw_sentry_spool_unlock(hw_sentry_spool *s)
{
    if (s && s->locked) {
        flock(s->lock_fd, LOCK_UN);
        s->locked = false;
    }
}

int hw_sentry_spool_claim(hw_sentry_spool *s, const char *id, char **text, size_t *len)
{
    *text = NULL;
    if (!s->locked || !id_valid(id))
        return -EINVAL;
    char waiting[48], claimed[48];
    snprintf(waiting, sizeof waiting, "%s.envelope", id);
    snprintf(claimed, sizeof claimed, "%s.sending", id);
    struct stat st;
    /* A claimed file left by a sender that stopped is sent again as it is. */
    if (!ours(s->fd, claimed, &st)) {
        if (!ours(s->fd, waiting, &st))
            return -ENOENT;
        if (renameat(s->fd, waiting, s->fd, claimed) != 0)
            return -errno;
    }
    int fd = openat(s->fd, claimed, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return -errno;
    int rc = 0;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid())
        rc = -EPERM;
    else if (st.st_size <= 0 || (uint64_t)st.st_size > HW_SPOOL_MAX_ENVELOPE)
        rc = -EFBIG;
    char *buf = rc == 0 ? malloc((size_t)st.st_size + 1) : NULL;
    if (rc == 0 && !buf)
        rc = -ENOMEM;
    size_t got = 0;
    while (rc == 0 && got < (size_t)st.st_size) {
        ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            rc = n < 0 ? -errno : -EIO;
        else
            got += (size_t)n;
    }
    close(fd);
    if (rc != 0) {
        free(buf);
        return rc;
    }
    buf[got] = '\0';
    *text = buf;
    *len = got;
    return 0;
}

void hw_sentry_spool_sent(hw_sentry_spool *s, const char *id)
{
    char claimed[48];
    snprintf(claimed, sizeof claimed, "%.32s.sending", id);
    unlinkat(s->fd, claimed, 0);
    fsync(s->fd);
}

void hw_sentry_spool_unclaim(hw_sentry_spool *s, const char *id)
{
    char waiting[48], claimed[48];
    snprintf(waiting, sizeof waiting, "%.32s.envelope", id);
    snprintf(claimed, sizeof claimed, "%.32s.sending", id);
    renameat(s->fd, claimed, s->fd, waiting);
}
