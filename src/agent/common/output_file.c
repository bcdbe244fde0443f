/*
 * output_file.c - writing the user's files safely (output_file.h says
 * what is checked and why).
 */
#include "output_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "random_id.h"
#include "report_dir.h"
#include "write_all.h"

int hw_output_dir_open(const char *path, const char **name, char *why, size_t why_len)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (*base == '\0' || strcmp(base, ".") == 0 || strcmp(base, "..") == 0) {
        snprintf(why, why_len, "it names a directory, not a file");
        return -EISDIR;
    }
    char *dir = slash == NULL ? strdup(".") : slash == path ? strdup("/") : strndup(path, (size_t)(slash - path));
    if (dir == NULL) {
        snprintf(why, why_len, "out of memory");
        return -ENOMEM;
    }
    int fd = hw_walk_to_dir(dir, HW_WALK_FOLLOW_LAST, why, why_len);
    free(dir);
    if (fd < 0)
        return fd;
    struct stat st;
    uid_t me = geteuid();
    int rc = 0;
    if (fstat(fd, &st) != 0) {
        rc = -errno;
        snprintf(why, why_len, "cannot look at its directory: %s", strerror(-rc));
    } else if (st.st_uid != me && st.st_uid != 0) {
        rc = -EPERM;
        snprintf(why, why_len, "its directory is owned by uid %u, another user, who could replace the file in it; "
                 "write it in a directory of your own", (unsigned)st.st_uid);
    } else if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)) {
        rc = -EPERM;
        snprintf(why, why_len, "its directory is writable by %s (mode %04o), who could replace the file in it",
                 (st.st_mode & S_IWOTH) ? "other users" : "its group", (unsigned)(st.st_mode & 07777));
    }
    if (rc == 0 && fstatat(fd, base, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        if (S_ISLNK(st.st_mode)) {
            rc = -ELOOP;
            snprintf(why, why_len, "it is a symbolic link, which hangwatch does not write through");
        } else if (!S_ISREG(st.st_mode)) {
            rc = -EEXIST;
            snprintf(why, why_len, "it exists and is not a regular file");
        }
    }
    if (rc != 0) {
        close(fd);
        return rc;
    }
    *name = base;
    return fd;
}

int hw_output_file_write_at(int dir_fd, const char *name, const char *text, size_t len, const char *tail,
                            mode_t mode, char *why, size_t why_len)
{
    char tmp[64];
    int fd = -1;
    for (int attempt = 0; attempt < 16 && fd < 0; attempt++) {
        unsigned char bytes[8];
        hw_random_bytes(bytes, sizeof bytes);
        snprintf(tmp, sizeof tmp, ".hangwatch-%02x%02x%02x%02x%02x%02x%02x%02x.tmp", bytes[0], bytes[1], bytes[2],
                 bytes[3], bytes[4], bytes[5], bytes[6], bytes[7]);
        fd = openat(dir_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    if (fd < 0) {
        int err = errno;
        snprintf(why, why_len, "cannot create a file in its directory: %s", strerror(err));
        return -err;
    }
    int rc = 0;
    if (fchmod(fd, mode) != 0) /* whatever the umask took away, or added */
        rc = -errno;
    if (rc == 0)
        rc = hw_write_all(fd, text, len);
    if (rc == 0 && tail != NULL)
        rc = hw_write_all(fd, tail, strlen(tail));
    if (rc == 0 && fsync(fd) != 0)
        rc = -errno;
    if (close(fd) != 0 && rc == 0)
        rc = -errno;
    /* renameat replaces whatever has the final name, a link planted since
     * the check included, without following it. */
    if (rc == 0 && renameat(dir_fd, tmp, dir_fd, name) != 0)
        rc = -errno;
    if (rc != 0) {
        unlinkat(dir_fd, tmp, 0);
        snprintf(why, why_len, "%s", strerror(-rc));
    }
    return rc;
}

int hw_output_file_write(const char *path, const char *text, size_t len, const char *tail, mode_t mode, char *why,
                         size_t why_len)
{
    const char *name = NULL;
    int dir_fd = hw_output_dir_open(path, &name, why, why_len);
    if (dir_fd < 0)
        return dir_fd;
    int rc = hw_output_file_write_at(dir_fd, name, text, len, tail, mode, why, why_len);
    close(dir_fd);
    return rc;
}
