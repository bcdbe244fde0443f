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

hw_jit_map *hw_jit_map_load(pid_t pid, uid_t owner_uid, char **error)
{
    if (error)
        *error = NULL;
    char path[64];
    jit_map_path(pid, path, sizeof path);
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        int err = errno;
        if (err == ENOENT)
            return fail(error, err, "no perf map %s: start node with " HW_JIT_MAP_NODE_FLAGS " to name its "
                        "JavaScript frames", path);
        if (err == ELOOP)
            return fail(error, err, "%s refused: it is a symbolic link", path);
        return fail(error, err, "cannot open %s: %s", path, strerror(err));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int err = errno;
        close(fd);
        return fail(error, err, "cannot stat %s: %s", path, strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return fail(error, EINVAL, "%s refused: not a regular file", path);
    }
    if (st.st_uid != owner_uid && st.st_uid != 0) {
        close(fd);
        return fail(error, EPERM, "%s refused: owned by uid %lu, not by the program's user (uid %lu) or root",
                    path, (unsigned long)st.st_uid, (unsigned long)owner_uid);
    }
    if (st.st_nlink != 1) {
        close(fd);
        return fail(error, EPERM, "%s refused: it has %lu hard links (node's own file has one)", path,
                    (unsigned long)st.st_nlink);
    }

    char *text = NULL;
    size_t len = 0;
    int rc = read_capped(fd, st.st_size > 0 ? (size_t)st.st_size : 0, HW_JIT_MAP_MAX_FILE_BYTES, &text, &len);
    close(fd);
    if (rc == -ENOMEM)
        return fail(error, ENOMEM, "%s: out of memory", path);
    if (rc < 0)
        return fail(error, -rc, "cannot read %s: %s", path, strerror(-rc));

    /* Whole lines only: a line cut by the cap, or still being written. */
    const char *last_newline = len > 0 ? memrchr(text, '\n', len) : NULL;
    len = last_newline ? (size_t)(last_newline - text) + 1 : 0;
    hw_jit_map *map = hw_jit_map_parse(text, len, NULL);
    free(text);
    if (!map)
        return fail(error, ENOMEM, "%s: out of memory", path);
    return map;
}

bool hw_jit_map_exists(pid_t pid)
{
    char path[64];
    jit_map_path(pid, path, sizeof path);
    struct stat st;
    return lstat(path, &st) == 0 && S_ISREG(st.st_mode);
}
