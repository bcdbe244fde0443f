/*
 * json_file.c - a JSON file written for the user, safely (json_file.h):
 * its directory reached and the file written as output_file.h says, every
 * refusal said with the file's name.
 */
#include "json_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/common/output_file.h"
#include "core/text_escape.h"

/* Why `path` cannot be written, said: "hangwatch: cannot write WHAT to
 * 'PATH': WHY". */
static void say_refusal(const char *path, const char *what, const char *why)
{
    char name[512];
    fprintf(stderr, "hangwatch: cannot write %s to '%s': %s\n", what, hw_escape_text(path, name, sizeof name), why);
}

int hw_json_file_check(const char *path, const char *what)
{
    char why[600];
    const char *name = NULL;
    int dir_fd = hw_output_dir_open(path, &name, why, sizeof why);
    if (dir_fd < 0) {
        say_refusal(path, what, why);
        return 2;
    }
    close(dir_fd);
    return 0;
}

/* `len` bytes of `text`, and `tail` (may be NULL), into `path` for good;
 * a failure is said here. */
static int write_file(const char *path, const char *what, const char *text, size_t len, const char *tail)
{
    char why[600];
    int rc = hw_output_file_write(path, text, len, tail, 0600, why, sizeof why);
    if (rc != 0) {
        say_refusal(path, what, why);
        return -ELOOP; /* said */
    }
    return 0;
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
