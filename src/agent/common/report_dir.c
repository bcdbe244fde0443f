/*
 * report_dir.c - the report directory, held open by descriptor (see
 * report_dir.h).
 *
 * The threat: hangwatch may run as root (`sudo hangwatch run -- service`)
 * while the report directory's path, or the directory itself, is somewhere
 * another user can write.  Working by path, such a user could swap the
 * directory or a report for a symlink and make root write (or read) a file
 * of their choosing, predict a temporary name and plant it first, or plant
 * hang-*.json files that eat the daily limit.
 *
 * The rules:
 *   - The directory is checked once, when hangwatch starts, and refused with
 *     a reason when unfit: not a directory, a symlink as its last component,
 *     owned by a user other than the agent's (or root), writable by its
 *     group or by others, or not writable by the agent.
 *   - The whole path is walked from / (a relative one from the working
 *     directory's absolute path), one component at a time with openat and
 *     O_NOFOLLOW, and a missing directory is made with mkdirat in its
 *     parent, mode 0700: no component is looked up by path twice.  Each
 *     directory on the way must be the agent user's or root's, and not
 *     writable by other users unless it is sticky (/tmp), where only the
 *     owner of the next component can replace it, and that owner must be
 *     the agent's user or root too.  A symbolic link on the way is followed
 *     only when it is the agent user's or root's (its parent is then one
 *     nobody else can change it in); another user's link, or a directory
 *     another user owns or may write to, is refused, naming it.  The
 *     descriptor keeps pointing at the directory finally opened whatever
 *     happens to the path afterwards.
 *   - Every file is made, read, renamed and listed relative to that
 *     descriptor, with O_NOFOLLOW, never by path.
 *   - Temporary files have random names and are created with O_EXCL, mode
 *     0600; a planted file or symlink with the final name is replaced by the
 *     rename, never followed.
 *   - Only regular files named hang-*.json owned by the agent's user count
 *     toward the limits, and only such files are read back.
 */
#include "report_dir.h"

#include "random_id.h"
#include "write_all.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct hw_report_dir {
    int fd;       /* the directory, opened O_DIRECTORY|O_NOFOLLOW */
    char *path;   /* as given, for messages */
    uid_t owner;  /* the agent's effective uid when it was opened */
};

static void say_why(char *why, size_t why_len, const char *format, ...)
{
    if (!why || why_len == 0)
        return;
    va_list ap;
    va_start(ap, format);
    vsnprintf(why, why_len, format, ap);
    va_end(ap);
}

/* `path` without trailing slashes ("dir/" would follow a symlink "dir"). */
static char *without_trailing_slashes(const char *path)
{
    char *copy = strdup(path);
    if (!copy)
        return NULL;
    size_t len = strlen(copy);
    while (len > 1 && copy[len - 1] == '/')
        copy[--len] = '\0';
    return copy;
}

static void random_hex(char *out, size_t digits)
{
    unsigned char bytes[32];
    size_t need = (digits + 1) / 2;
    if (need > sizeof bytes)
        need = sizeof bytes;
    hw_random_bytes(bytes, need);
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < digits; i++)
        out[i] = hex[(bytes[i / 2] >> (i % 2 ? 0 : 4)) & 0xf];
    out[digits] = '\0';
}

/* Create a new 0600 file with an unpredictable name in the directory.
 * Returns its descriptor and name, or -errno. */
static int create_temp_file(int dir_fd, char name[32])
{
    for (int attempt = 0; attempt < 16; attempt++) {
        char digits[17];
        random_hex(digits, 16);
        snprintf(name, 32, ".hang-%s.tmp", digits);
        int fd = openat(dir_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0)
            return fd;
        if (errno != EEXIST)
            return -errno;
    }
    return -EEXIST;
}

/* Why the path could not be opened as a directory, for people, and the
 * errno that says it: ELOOP for a symlink (Linux says ENOTDIR when
 * O_DIRECTORY meets O_NOFOLLOW), ENOTDIR for anything else not a directory. */
static int explain_open_failure(const char *path, int err, char *why, size_t why_len)
{
    struct stat st;
    if (lstat(path, &st) == 0) {
        if (S_ISLNK(st.st_mode)) {
            say_why(why, why_len,
                    "it is a symbolic link, which hangwatch does not follow there; give the directory itself");
            return ELOOP;
        }
        if (S_ISREG(st.st_mode)) {
            say_why(why, why_len, "it is a regular file, not a directory");
            return ENOTDIR;
        }
        if (!S_ISDIR(st.st_mode)) {
            say_why(why, why_len, "it is not a directory");
            return ENOTDIR;
        }
    }
    say_why(why, why_len, "cannot open it: %s", strerror(err));
    return err;
}

#define MAX_LINKS 40 /* symbolic links followed on the way, as the kernel's limit */

/* Follow symbolic link `name` in `*dir` (hw_walk_to_dir): only the agent
 * user's or root's; the rest of the path is then its target followed by
 * what was left (`*at`), walked from / or from `*dir`.  0, or -errno with
 * the reason. */
static int follow_link(int *dir, char **rest, char **at, char *walked, int *links, const char *name,
                       const struct stat *st, uid_t me, char *why, size_t why_len)
{
    if (st->st_uid != me && st->st_uid != 0) {
        say_why(why, why_len,
                "%s is a symbolic link of uid %u, another user, who could point it anywhere; give a path without it",
                walked, (unsigned)st->st_uid);
        return -EPERM;
    }
    char target[4096];
    ssize_t tl = readlinkat(*dir, name, target, sizeof target - 1);
    if (tl < 0 || ++*links > MAX_LINKS) {
        int rc = tl < 0 ? -errno : -ELOOP;
        say_why(why, why_len, "cannot follow %s: %s", walked, strerror(-rc));
        return rc;
    }
    target[tl] = '\0';
    char *next = NULL;
    if (asprintf(&next, "%s%s", target, *at) < 0) {
        say_why(why, why_len, "out of memory");
        return -ENOMEM;
    }
    /* The link's own place stays out of the walked path's message. */
    char *slash = strrchr(walked, '/');
    if (slash != NULL)
        *slash = '\0';
    if (target[0] == '/') {
        int root = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (root < 0) {
            int rc = -errno;
            free(next);
            say_why(why, why_len, "cannot open /: %s", strerror(-rc));
            return rc;
        }
        close(*dir);
        *dir = root;
        walked[0] = '\0';
    }
    free(*rest);
    *rest = next;
    *at = next;
    return 0;
}

int hw_walk_to_dir(const char *path, unsigned flags, char *why, size_t why_len)
{
    uid_t me = geteuid();
    char *rest = NULL;
    if (path[0] == '/') {
        rest = strdup(path);
    } else {
        char cwd[4096];
        if (getcwd(cwd, sizeof cwd) == NULL) {
            int err = errno;
            say_why(why, why_len, "cannot find the working directory: %s", strerror(err));
            return -err;
        }
        if (asprintf(&rest, "%s/%s", cwd, path) < 0)
            rest = NULL;
    }
    char walked[8192] = ""; /* the path as walked, for messages */
    int dir = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int rc = 0, links = 0;
    if (rest == NULL || dir < 0) {
        rc = dir < 0 ? -errno : -ENOMEM;
        say_why(why, why_len, dir < 0 ? "cannot open /: %s" : "%s", strerror(-rc));
        goto out;
    }
    char *at = rest;
    for (;;) {
        while (*at == '/')
            at++;
        if (*at == '\0')
            break; /* `dir` is the last directory */
        char *end = strchr(at, '/');
        size_t n = end ? (size_t)(end - at) : strlen(at);
        char name[256];
        if (n >= sizeof name) {
            rc = -ENAMETOOLONG;
            say_why(why, why_len, "a component of the path is too long");
            goto out;
        }
        memcpy(name, at, n);
        name[n] = '\0';
        at += n;
        if (strcmp(name, ".") == 0)
            continue;
        struct stat parent;
        if (fstat(dir, &parent) != 0) {
            rc = -errno;
            say_why(why, why_len, "cannot stat %s: %s", walked[0] ? walked : "/", strerror(-rc));
            goto out;
        }
        if (strcmp(name, "..") != 0 && (parent.st_mode & (S_IWGRP | S_IWOTH)) && !(parent.st_mode & S_ISVTX)) {
            rc = -EPERM;
            say_why(why, why_len,
                    "%s is writable by %s (mode %04o), who could replace %s in it; choose a directory elsewhere",
                    walked[0] ? walked : "/", (parent.st_mode & S_IWOTH) ? "other users" : "its group",
                    (unsigned)(parent.st_mode & 07777), name);
            goto out;
        }
        size_t wl = strlen(walked);
        if (strcmp(name, "..") == 0) {
            char *slash = strrchr(walked, '/');
            if (slash != NULL)
                *slash = '\0';
        } else if (wl + 1 + n < sizeof walked) {
            walked[wl] = '/';
            memcpy(walked + wl + 1, name, n + 1);
        }
        struct stat st;
        if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
            if (errno != ENOENT || !(flags & HW_WALK_MAKE_MISSING)) {
                rc = -errno;
                say_why(why, why_len, "cannot look at %s: %s", walked, strerror(-rc));
                goto out;
            }
            if (mkdirat(dir, name, 0700) != 0 && errno != EEXIST) {
                rc = -errno;
                say_why(why, why_len, "cannot create %s: %s", walked, strerror(-rc));
                goto out;
            }
            if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
                rc = -errno;
                say_why(why, why_len, "cannot look at %s: %s", walked, strerror(-rc));
                goto out;
            }
        }
        bool last = *at == '\0' || at[strspn(at, "/")] == '\0';
        if (S_ISLNK(st.st_mode) && last && !(flags & HW_WALK_FOLLOW_LAST)) {
            rc = -ELOOP;
            say_why(why, why_len,
                    "it is a symbolic link, which hangwatch does not follow there; give the directory itself");
            goto out;
        }
        if (S_ISLNK(st.st_mode)) {
            rc = follow_link(&dir, &rest, &at, walked, &links, name, &st, me, why, why_len);
            if (rc != 0)
                goto out;
            continue;
        }
        /* O_PATH: a directory on the way need only be searchable. */
        int child = openat(dir, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (child < 0) {
            rc = -explain_open_failure(walked, errno, why, why_len);
            goto out;
        }
        close(dir);
        dir = child;
        if (!last && fstat(dir, &st) == 0 && st.st_uid != me && st.st_uid != 0) {
            rc = -EPERM;
            say_why(why, why_len,
                    "%s is owned by uid %u, another user, who could replace what is in it; choose a directory of "
                    "your own",
                    walked, (unsigned)st.st_uid);
            goto out;
        }
    }
out:
    free(rest);
    if (rc == 0) {
        /* The last directory, opened for reading its entries. */
        int readable = openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (readable < 0) {
            rc = -errno;
            say_why(why, why_len, "cannot open it: %s", strerror(-rc));
        }
        close(dir);
        dir = readable;
    }
    if (rc != 0) {
        if (dir >= 0)
            close(dir);
        return rc;
    }
    return dir;
}

/* The checks on the opened directory.  0, or -errno with the reason. */
static int check_fit(int fd, const char *path, uid_t me, char *why, size_t why_len)
{
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int err = errno;
        say_why(why, why_len, "cannot stat it: %s", strerror(err));
        return -err;
    }
    if (!S_ISDIR(st.st_mode)) {
        say_why(why, why_len, "it is not a directory");
        return -ENOTDIR;
    }
    if (st.st_uid != me && st.st_uid != 0) {
        say_why(why, why_len,
                "it is owned by uid %u, not by uid %u that hangwatch runs as; chown it to uid %u or choose another "
                "directory",
                (unsigned)st.st_uid, (unsigned)me, (unsigned)me);
        return -EPERM;
    }
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) && (st.st_mode & S_ISVTX)) {
        /* /tmp, /var/tmp, /dev/shm: shared by design, never to be changed */
        size_t len = strlen(path);
        say_why(why, why_len,
                "it is a directory shared with %s (mode %04o), who could plant or replace reports; choose a "
                "directory of your own, such as %s%shangwatch-reports (hangwatch makes it, mode 0700)",
                (st.st_mode & S_IWOTH) ? "other users" : "its group", (unsigned)(st.st_mode & 07777), path,
                len > 0 && path[len - 1] == '/' ? "" : "/");
        return -EPERM;
    }
    if (st.st_mode & (S_IWGRP | S_IWOTH)) {
        say_why(why, why_len,
                "it is writable by %s (mode %04o), who could plant or replace reports; run 'chmod go-w %s' or "
                "choose another directory",
                (st.st_mode & S_IWOTH) ? "other users" : "its group", (unsigned)(st.st_mode & 07777), path);
        return -EPERM;
    }
    /* A probe, because only trying tells: root ignores the mode bits but
     * not a read-only mount or an immutable directory. */
    char probe[32];
    int probe_fd = create_temp_file(fd, probe);
    if (probe_fd < 0) {
        say_why(why, why_len, "hangwatch cannot create files in it: %s", strerror(-probe_fd));
        return probe_fd;
    }
    close(probe_fd);
    if (unlinkat(fd, probe, 0) != 0) {
        int err = errno;
        say_why(why, why_len, "hangwatch cannot remove files from it: %s", strerror(err));
        return -err;
    }
    return 0;
}

int hw_report_dir_open(const char *path, hw_report_dir **out, char *why, size_t why_len)
{
    *out = NULL;
    if (!path || !*path) {
        say_why(why, why_len, "the path is empty");
        return -EINVAL;
    }
    char *clean = without_trailing_slashes(path);
    hw_report_dir *d = calloc(1, sizeof *d);
    char *kept = strdup(path);
    int rc = 0;
    int fd = -1;
    if (!clean || !d || !kept) {
        say_why(why, why_len, "out of memory");
        rc = -ENOMEM;
        goto fail;
    }
    uid_t me = geteuid();
    fd = hw_walk_to_dir(clean, HW_WALK_MAKE_MISSING, why, why_len);
    if (fd < 0) {
        rc = fd;
        goto fail;
    }
    rc = check_fit(fd, path, me, why, why_len);
    if (rc != 0)
        goto fail;
    d->fd = fd;
    d->path = kept;
    d->owner = me;
    free(clean);
    *out = d;
    return 0;
fail:
    if (fd >= 0)
        close(fd);
    free(clean);
    free(d);
    free(kept);
    return rc;
}

void hw_report_dir_close(hw_report_dir *d)
{
    if (!d)
        return;
    close(d->fd);
    free(d->path);
    free(d);
}

int hw_report_dir_fd(const hw_report_dir *d)
{
    return d ? d->fd : -1;
}

const char *hw_report_dir_path(const hw_report_dir *d)
{
    return d ? d->path : "";
}

/* A plain name in the directory: no slash, not "." or "..". */
static bool plain_name(const char *name)
{
    return name && *name && !strchr(name, '/') && strcmp(name, ".") != 0 && strcmp(name, "..") != 0;
}

int hw_report_dir_write(hw_report_dir *d, const char *file_name, const char *text, size_t len)
{
    if (!d)
        return -EBADF;
    if (!plain_name(file_name))
        return -EINVAL;
    char tmp[32];
    int fd = create_temp_file(d->fd, tmp);
    if (fd < 0)
        return fd;
    int rc = 0;
    if (fchmod(fd, 0600) != 0) /* whatever the umask took away */
        rc = -errno;
    if (rc == 0)
        rc = hw_write_all(fd, text, len);
    if (rc == 0 && fsync(fd) != 0)
        rc = -errno;
    if (close(fd) != 0 && rc == 0)
        rc = -errno;
    /* renameat replaces whatever has the final name, a planted symlink
     * included, without following it. */
    if (rc == 0 && renameat(d->fd, tmp, d->fd, file_name) != 0)
        rc = -errno;
    if (rc != 0) {
        unlinkat(d->fd, tmp, 0);
        return rc;
    }
    /* The rename is durable once the directory is; the report itself is
     * complete either way, so a failure here is not the report's. */
    (void)fsync(d->fd);
    return 0;
}

int hw_report_dir_read(hw_report_dir *d, const char *file_name, char **text, size_t *len)
{
    *text = NULL;
    if (len)
        *len = 0;
    if (!d)
        return -EBADF;
    if (!plain_name(file_name))
        return -EINVAL;
    /* O_NONBLOCK: a FIFO opens at once (and is then refused) instead of
     * waiting for a writer. */
    int fd = openat(d->fd, file_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return -errno;
    int rc = 0;
    char *buf = NULL;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        rc = -errno;
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = -EINVAL;
        goto out;
    }
    if (st.st_uid != d->owner) {
        rc = -EPERM;
        goto out;
    }
    if ((uint64_t)st.st_size > HW_REPORT_MAX_BYTES) {
        rc = -EFBIG;
        goto out;
    }
    size_t cap = (size_t)st.st_size;
    buf = malloc(cap + 1);
    if (!buf) {
        rc = -ENOMEM;
        goto out;
    }
    size_t used = 0;
    for (;;) {
        if (used == cap) {
            /* It grew since fstat: read on, up to the cap. */
            if (cap >= HW_REPORT_MAX_BYTES) {
                char extra;
                ssize_t n = read(fd, &extra, 1);
                if (n > 0)
                    rc = -EFBIG;
                else if (n < 0)
                    rc = -errno;
                break;
            }
            size_t bigger = cap * 2 + 4096;
            if (bigger > HW_REPORT_MAX_BYTES)
                bigger = HW_REPORT_MAX_BYTES;
            char *grown = realloc(buf, bigger + 1);
            if (!grown) {
                rc = -ENOMEM;
                break;
            }
            buf = grown;
            cap = bigger;
        }
        ssize_t n = read(fd, buf + used, cap - used);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            rc = -errno;
            break;
        }
        if (n == 0)
            break;
        used += (size_t)n;
    }
    if (rc == 0) {
        buf[used] = '\0';
        *text = buf;
        buf = NULL;
        if (len)
            *len = used;
    }
out:
    free(buf);
    close(fd);
    return rc;
}

/* hang-*.json, as the agent names its reports. */
static bool report_name(const char *name)
{
    size_t len = strlen(name);
    return len >= sizeof "hang-.json" - 1 && strncmp(name, "hang-", 5) == 0 && strcmp(name + len - 5, ".json") == 0;
}

int hw_report_dir_file_size(hw_report_dir *d, const char *file_name, uint64_t *bytes)
{
    if (!d)
        return -EBADF;
    if (!plain_name(file_name))
        return -EINVAL;
    struct stat st;
    if (fstatat(d->fd, file_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return -errno;
    if (!S_ISREG(st.st_mode))
        return -EINVAL;
    *bytes = (uint64_t)st.st_size;
    return 0;
}

hw_report_dir_usage hw_report_dir_usage_now(hw_report_dir *d)
{
    hw_report_dir_usage usage = {0, 0};
    if (!d)
        return usage;
    /* A fresh open file description: readdir's position is not shared with
     * d->fd or with an earlier count. */
    int list_fd = openat(d->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (list_fd < 0)
        return usage;
    DIR *listing = fdopendir(list_fd);
    if (!listing) {
        close(list_fd);
        return usage;
    }
    time_t day_ago = time(NULL) - 24 * 3600;
    struct dirent *e;
    while ((e = readdir(listing)) != NULL) {
        if (!report_name(e->d_name))
            continue;
        struct stat st;
        if (fstatat(d->fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        if (!S_ISREG(st.st_mode) || st.st_uid != d->owner)
            continue;
        usage.bytes += (uint64_t)st.st_size;
        if (st.st_mtime >= day_ago)
            usage.reports_last_day++;
    }
    closedir(listing);
    return usage;
}
