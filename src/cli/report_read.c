/*
 * report_read.c - reading report files back (report_read.h): the size cap,
 * parsing, the shape check and the search of directories that `hangwatch
 * show`, `stats`, `export` and `html` share.  Nothing here trusts a
 * file: a bad one is named in a message and the others are still read.
 */
#include "report_read.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "foreign_text.h"

#define MAX_DEPTH 32 /* directory levels searched below an argument */

static int read_failed(const char *path, const char *what, int error)
{
    hw_say_about(path);
    fprintf(stderr, "%s: %s\n", what, strerror(error));
    return 1;
}

static int too_large(const char *path, const char *amount, unsigned long long bytes)
{
    hw_say_about(path);
    fprintf(stderr, "too large for a report (%s%llu bytes, at most %u MiB)\n", amount, bytes,
            HW_REPORT_MAX_BYTES >> 20);
    return 1;
}

int hw_report_read_file(const char *path, bool regular_only, char **text, size_t *len)
{
    *text = NULL;
    *len = 0;
    /* O_NONBLOCK: opening a FIFO does not wait for a writer; it is refused
     * below when only regular files are wanted, and read blocking again
     * otherwise. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | (regular_only ? O_NONBLOCK : 0));
    if (fd < 0)
        return read_failed(path, "cannot open", errno);
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return read_failed(path, "cannot read", e);
    }
    if (S_ISDIR(st.st_mode) || (regular_only && !S_ISREG(st.st_mode))) {
        close(fd);
        if (S_ISDIR(st.st_mode))
            return read_failed(path, "cannot read", EISDIR);
        hw_say_about(path);
        fputs("not a regular file, not read\n", stderr);
        return 1;
    }
    if (S_ISREG(st.st_mode) && (unsigned long long)st.st_size > HW_REPORT_MAX_BYTES) {
        close(fd);
        return too_large(path, "", (unsigned long long)st.st_size);
    }
    /* Read at most one byte past the cap: a pipe or a file that grows is
     * refused the same way, without holding more. */
    size_t cap = S_ISREG(st.st_mode) ? (size_t)st.st_size + 1 : 65536;
    char *buf = malloc(cap);
    size_t got = 0;
    int rc = 0;
    while (buf != NULL) {
        if (got == cap) {
            if (cap > HW_REPORT_MAX_BYTES)
                break;
            size_t bigger_cap = cap * 2 > (size_t)HW_REPORT_MAX_BYTES + 1 ? (size_t)HW_REPORT_MAX_BYTES + 1 : cap * 2;
            char *bigger = realloc(buf, bigger_cap);
            if (bigger == NULL) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = bigger;
            cap = bigger_cap;
        }
        ssize_t n = read(fd, buf + got, cap - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = read_failed(path, "cannot read", errno);
            break;
        }
        if (n == 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    if (buf == NULL && rc == 0)
        rc = read_failed(path, "cannot read", ENOMEM);
    else if (rc == 0 && got > HW_REPORT_MAX_BYTES)
        rc = too_large(path, "more than ", HW_REPORT_MAX_BYTES);
    if (rc != 0) {
        free(buf);
        return rc;
    }
    *text = buf;
    *len = got;
    return 0;
}

json_t *hw_report_parse(const char *label, const char *text, size_t len)
{
    json_error_t err;
    /* JSON_ALLOW_NUL: a "\u0000" inside a string is shown (escaped), not a
     * reason to refuse the whole report. */
    json_t *root = json_loadb(text != NULL ? text : "", text != NULL ? len : 0, JSON_ALLOW_NUL, &err);
    if (root == NULL) {
        hw_say_about(label);
        if (len == 0)
            fputs("empty, not a report\n", stderr);
        else {
            fprintf(stderr, "not valid JSON (line %d: ", err.line);
            hw_put_text(stderr, err.text);
            fputs("); a truncated or damaged report?\n", stderr);
        }
    }
    return root;
}

bool hw_report_check_shape(const char *label, json_t *root)
{
    if (json_is_object(json_object_get(root, "report")) && json_is_object(json_object_get(root, "hangwatch")) &&
        json_is_array(json_object_get(json_object_get(root, "crash"), "threads")))
        return true;
    hw_say_about(label);
    fputs("not a hangwatch report (no report, crash.threads or hangwatch section)\n", stderr);
    return false;
}

json_t *hw_report_load(const char *path, bool regular_only)
{
    char *text = NULL;
    size_t len = 0;
    if (hw_report_read_file(path, regular_only, &text, &len) != 0)
        return NULL;
    json_t *root = hw_report_parse(path, text, len);
    free(text);
    if (root != NULL && !hw_report_check_shape(path, root)) {
        json_decref(root);
        root = NULL;
    }
    return root;
}

/* ---- searching directories ---------------------------------------------- */

typedef struct walk {
    hw_report_fn each;
    void *ctx;
    hw_report_walk_counts *counts;
} walk;

static void load_one(walk *w, const char *path, bool regular_only)
{
    json_t *root = hw_report_load(path, regular_only);
    if (root == NULL) {
        w->counts->failed++;
        return;
    }
    w->counts->reports++;
    w->each(path, root, w->ctx);
}

static bool ends_with_json(const char *name)
{
    size_t n = strlen(name);
    return n > 5 && strcmp(name + n - 5, ".json") == 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The *.json files below `dir`, depth first in name order; how many were
 * found (read or not). */
static size_t walk_dir(walk *w, const char *dir, unsigned depth)
{
    DIR *d = opendir(dir);
    if (d == NULL) {
        read_failed(dir, "cannot open the directory", errno);
        w->counts->failed++;
        return 0;
    }
    char **names = NULL;
    size_t count = 0, cap = 0;
    struct dirent *e;
    errno = 0;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (count == cap) {
            size_t bigger = cap ? cap * 2 : 64;
            char **grown = realloc(names, bigger * sizeof *names);
            if (grown == NULL)
                break;
            names = grown;
            cap = bigger;
        }
        names[count] = strdup(e->d_name);
        if (names[count] != NULL)
            count++;
    }
    closedir(d);
    if (count > 1)
        qsort(names, count, sizeof *names, by_name);
    size_t found = 0;
    for (size_t i = 0; i < count; i++) {
        char *path = NULL;
        if (asprintf(&path, "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", names[i]) < 0)
            path = NULL;
        struct stat st;
        if (path != NULL && lstat(path, &st) == 0) {
            if (S_ISDIR(st.st_mode)) {
                if (depth < MAX_DEPTH)
                    found += walk_dir(w, path, depth + 1);
            } else if (ends_with_json(names[i])) {
                /* A symbolic link is followed to a file, never to a directory
                 * (a loop).  What is not a regular file (a FIFO, a device)
                 * is named and never opened: opening some devices does
                 * something. */
                found++;
                struct stat target;
                if (S_ISLNK(st.st_mode) && stat(path, &target) != 0) {
                    read_failed(path, "cannot open", errno);
                    w->counts->failed++;
                } else if (!S_ISREG(S_ISLNK(st.st_mode) ? target.st_mode : st.st_mode)) {
                    hw_say_about(path);
                    fputs("not a regular file, not read\n", stderr);
                    w->counts->failed++;
                } else {
                    load_one(w, path, true);
                }
            }
        }
        free(path);
        free(names[i]);
    }
    free(names);
    return found;
}

void hw_report_walk(char *const *paths, size_t count, hw_report_fn each, void *ctx, hw_report_walk_counts *counts)
{
    walk w = {each, ctx, counts};
    for (size_t i = 0; i < count; i++) {
        const char *path = paths[i];
        struct stat st;
        if (stat(path, &st) != 0) {
            read_failed(path, "cannot open", errno);
            counts->failed++;
        } else if (S_ISDIR(st.st_mode)) {
            if (walk_dir(&w, path, 0) == 0) {
                hw_say_about(path);
                fputs("no report files (*.json) in this directory\n", stderr);
                counts->failed++;
            }
        } else {
            load_one(&w, path, false);
        }
    }
}
