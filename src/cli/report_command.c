/*
 * report_command.c - the command line of the commands that read many
 * reports, and the reading they share (report_command.h): options, paths,
 * the checks in their order, the walk over the paths and the messages
 * when nothing could be read.
 */
#include "report_command.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "foreign_text.h"

int hw_usage_error(const char *command, const char *message, const char *arg)
{
    fputs("hangwatch: ", stderr);
    fputs(message, stderr);
    if (arg != NULL) {
        fputs(" '", stderr);
        hw_put_text(stderr, arg);
        fputc('\'', stderr);
    }
    fprintf(stderr, "\nTry 'hangwatch %s --help'.\n", command);
    return 2;
}

/* The option of `cmd` that argument `a` is, or NULL; *value is what
 * follows '=' in "--long=VALUE", else NULL. */
static const hw_report_option *option_of(const hw_report_command *cmd, const char *a, const char **value)
{
    *value = NULL;
    for (size_t k = 0; k < cmd->option_count; k++) {
        const hw_report_option *o = &cmd->options[k];
        size_t n = strlen(o->long_name);
        if (o->short_name != NULL && strcmp(a, o->short_name) == 0)
            return o;
        if (strncmp(a, o->long_name, n) == 0 && a[n] == '\0')
            return o;
        if (o->has_value && strncmp(a, o->long_name, n) == 0 && a[n] == '=') {
            *value = a + n + 1;
            return o;
        }
    }
    return NULL;
}

/* The command line: the paths into `paths`.  -1 to go on, or the exit
 * status to stop with. */
static int take_command_line(const hw_report_command *cmd, int argc, char **argv, void *ctx, char **paths,
                             size_t *count)
{
    bool options_done = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const hw_report_option *o = NULL;
        const char *value = NULL;
        if (!options_done && strcmp(a, "--") == 0) {
            options_done = true;
        } else if (!options_done && (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)) {
            fputs(cmd->help, stdout);
            return 0;
        } else if (!options_done && (o = option_of(cmd, a, &value)) != NULL) {
            if (o->has_value && value == NULL) {
                if (i + 1 >= argc)
                    return hw_usage_error(cmd->name, "option needs a value:", a);
                value = argv[++i];
            }
            int rc = o->take(value, ctx);
            if (rc != 0)
                return rc;
        } else if (!options_done && a[0] == '-' && a[1] != '\0') {
            char message[64];
            snprintf(message, sizeof message, "unknown option for %s:", cmd->name);
            return hw_usage_error(cmd->name, message, a);
        } else {
            paths[(*count)++] = argv[i];
        }
    }
    return -1;
}

typedef struct taking {
    const hw_report_command *cmd;
    void *ctx;
    bool oom;
} taking;

static void take_one(const char *path, json_t *root, void *ctx)
{
    taking *t = ctx;
    if (!t->oom && t->cmd->take_report(path, root, t->ctx) != 0)
        t->oom = true;
    json_decref(root);
}

bool hw_report_command_read(const hw_report_command *cmd, int argc, char **argv, void *ctx,
                            hw_report_walk_counts *counts, int *status)
{
    memset(counts, 0, sizeof *counts);
    char **paths = calloc((size_t)argc, sizeof *paths);
    size_t count = 0;
    if (paths == NULL) {
        *status = 1;
        return false;
    }
    int rc = take_command_line(cmd, argc, argv, ctx, paths, &count);
    if (rc < 0 && cmd->check_options != NULL && (rc = cmd->check_options(ctx)) == 0)
        rc = -1;
    if (rc < 0 && count == 0)
        rc = hw_usage_error(cmd->name, cmd->needs_paths, NULL);
    if (rc < 0 && cmd->before_reading != NULL && (rc = cmd->before_reading(ctx)) == 0)
        rc = -1;
    if (rc < 0) {
        taking t = {cmd, ctx, false};
        hw_report_walk(paths, count, take_one, &t, counts);
        if (t.oom) {
            fputs("hangwatch: out of memory while reading the reports\n", stderr);
            rc = 1;
        } else if (counts->reports == 0) {
            fprintf(stderr, "hangwatch: no report could be read%s\n", cmd->none_read);
            rc = 1;
        }
    }
    free(paths);
    *status = rc < 0 ? 0 : rc;
    return rc < 0;
}

int hw_take_output_option(const char *command, const char *value, const char **output)
{
    if (*output != NULL)
        return hw_usage_error(command, "-o is given twice", NULL);
    if (value[0] == '\0')
        return hw_usage_error(command, "-o needs a file name (or - for standard output)", NULL);
    *output = value;
    return 0;
}
