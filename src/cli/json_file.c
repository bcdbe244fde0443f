/*
 * json_file.c - a JSON file written for the user, safely (json_file.h):
 * checked, then written beside its place under a temporary name and
 * renamed into it.
 */
#include "json_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/text_escape.h"

int hw_json_file_check(const char *path, const char *what)
{
    char name[512];
    struct stat st;
    if (lstat(path, &st) != 0)
        return 0; /* a new file (or a directory we will be told about) */
    if (S_ISLNK(st.st_mode)) {
        fprintf(stderr, "hangwatch: refusing to write %s to '%s': it is a symbolic link\n", what,
                hw_escape_text(path, name, sizeof name));
        return 2;
    }
    if (!S_ISREG(st.st_mode)) {
        fprintf(stderr, "hangwatch: cannot write %s to '%s': it exists and is not a regular file\n", what,
                hw_escape_text(path, name, sizeof name));
        return 2;
    }
    return 0;
}

static int write_all(int fd, const char *p, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* `len` bytes of `text`, and `tail` (may be NULL), into `path` for good. */
static int write_file(const char *path, const char *what, const char *text, size_t len, const char *tail)
{
    if (hw_json_file_check(path, what) != 0)
        return -ELOOP;
    char *tmp = NULL;
    if (asprintf(&tmp, "%s.XXXXXX", path) < 0)
        return -ENOMEM;
    int rc = 0;
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) {
        rc = -errno;
    } else {
        if (fchmod(fd, 0600) != 0)
            rc = -errno;
        if (rc == 0)
            rc = write_all(fd, text, len);
        if (rc == 0 && tail != NULL)
            rc = write_all(fd, tail, strlen(tail));
        if (rc == 0 && fsync(fd) != 0)
            rc = -errno;
        if (close(fd) != 0 && rc == 0)
            rc = -errno;
        if (rc == 0 && rename(tmp, path) != 0)
            rc = -errno;
        if (rc != 0)
            unlink(tmp);
    }
    free(tmp);
    return rc;
}

int hw_json_file_write(const char *path, const char *what, json_t *json, size_t flags)
{
    char *text = json_dumps(json, flags);
    if (text == NULL)
        return -ENOMEM;
    int rc = write_file(path, what, text, strlen(text), "\n");
    free(text);
    return rc;
}

int hw_text_file_write(const char *path, const char *what, const char *text, size_t len)
{
    return write_file(path, what, text, len, NULL);
}
