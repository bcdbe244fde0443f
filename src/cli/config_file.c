/*
 * config_file.c - `hangwatch watch --config FILE` (config_file.h,
 * docs/config.md): the file read into the command line's words, parsed
 * with the command line by the one option parser, and read again when the
 * agent asks (SIGHUP).  The format is the command line's own, one option
 * per line, so there is one set of names, values and checks, and no
 * parser of another format to trust; decisions.md §47.
 */
#include "config_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent_options.h"
#include "core/text_escape.h"

/* Options the agent takes from a reloaded file while it runs (the rest
 * wait for a restart): config_reload.c applies exactly these. */
static const char *const live_options[] = {"threshold", "check-period", "check-mode",   "comm",
                                           "exe",       "cgroup",       "user",         "exclude",
                                           "metrics-listen", "metrics-file", "sentry-dsn"};

struct hw_config_session {
    const char *path;
    int argc;
    char **argv;          /* the command line: its options follow the file's */
    hw_config_words start;  /* the file's words at the start: the agent's first options point into them */
    hw_config_words latest; /* the words of the last reload taken, if any */
};

/* The words of the file as the agent last took them. */
static const hw_config_words *last_taken(const hw_config_session *s)
{
    return s->latest.words != NULL ? &s->latest : &s->start;
}

/* What one reload made: the options first, so the agent's pointer is it. */
typedef struct reloaded {
    hw_agent_command_line line;
    hw_config_words words;
    char **argv;
} reloaded;

/* ---- reading ---- */

void hw_config_words_free(hw_config_words *w)
{
    for (size_t i = 0; i < w->count; i++)
        free(w->words[i]);
    free(w->words);
    memset(w, 0, sizeof *w);
}

/* Add a copy of `text` (with "--" before it when `dashes`) to *w. */
static int add_word(hw_config_words *w, const char *text, bool dashes)
{
    char *word = malloc(strlen(text) + 3);
    if (word == NULL)
        return -1;
    snprintf(word, strlen(text) + 3, "%s%s", dashes ? "--" : "", text);
    w->words[w->count++] = word;
    return 0;
}

/* The whole file, checked to be a regular file nobody else may change:
 * a root agent takes its report directory and Sentry DSN from it. */
static char *read_whole(const char *path, char *why, size_t why_len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        snprintf(why, why_len, "%s", strerror(errno));
        return NULL;
    }
    struct stat st;
    char *text = NULL;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        snprintf(why, why_len, "not a regular file");
    else if (st.st_uid != 0 && st.st_uid != geteuid())
        snprintf(why, why_len, "owned by uid %u: it must be root's or hangwatch's own", (unsigned)st.st_uid);
    else if (st.st_mode & (S_IWGRP | S_IWOTH))
        snprintf(why, why_len, "writable by its group or by others (chmod go-w)");
    else if (st.st_size > HW_CONFIG_MAX_BYTES)
        snprintf(why, why_len, "longer than %d bytes", HW_CONFIG_MAX_BYTES);
    else if ((text = calloc(1, (size_t)st.st_size + 2)) == NULL)
        snprintf(why, why_len, "out of memory");
    if (text != NULL) {
        size_t got = 0;
        ssize_t n;
        while (got <= (size_t)st.st_size && (n = read(fd, text + got, (size_t)st.st_size + 1 - got)) > 0)
            got += (size_t)n;
        if (got > (size_t)st.st_size) {
            snprintf(why, why_len, "it grew while it was read");
            free(text);
            text = NULL;
        } else {
            text[got] = '\0';
            if (strlen(text) != got) {
                snprintf(why, why_len, "it holds a NUL byte: not a text file");
                free(text);
                text = NULL;
            }
        }
    }
    close(fd);
    return text;
}

static bool blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r';
}

/* One line (cut out, NUL-ended): its words added to *w.  0, or -1 with why. */
static int take_line(char *line, unsigned number, hw_config_words *w, char *why, size_t why_len)
{
    if (strlen(line) > HW_CONFIG_MAX_LINE) {
        snprintf(why, why_len, "line %u is longer than %d characters", number, HW_CONFIG_MAX_LINE);
        return -1;
    }
    for (const char *c = line; *c; c++)
        if ((unsigned char)*c < 0x20 && *c != '\t' && *c != '\r') {
            snprintf(why, why_len, "line %u holds a control character", number);
            return -1;
        }
    while (blank(*line))
        line++;
    char *end = line + strlen(line);
    while (end > line && blank(end[-1]))
        *--end = '\0';
    if (*line == '\0' || *line == '#')
        return 0;
    char *name = line, *value = line;
    while (*value && !blank(*value))
        value++;
    if (*value)
        *value++ = '\0';
    while (blank(*value))
        value++;
    char shown[80];
    hw_escape_text(name, shown, sizeof shown);
    int takes = strncmp(name, "--", 2) == 0 ? -2 : hw_agent_option_takes_value(name);
    if (takes == -2)
        snprintf(why, why_len, "line %u: '%s': write the option without its leading '--'", number, shown);
    else if (takes < 0 || strcmp(name, "config") == 0 || strcmp(name, "help") == 0)
        snprintf(why, why_len, "line %u: '%s' is not an option of hangwatch watch", number, shown);
    else if (takes == 1 && *value == '\0')
        snprintf(why, why_len, "line %u: '%s' needs a value", number, shown);
    else if (takes == 0 && *value != '\0')
        snprintf(why, why_len, "line %u: '%s' takes no value", number, shown);
    else if (add_word(w, name, true) != 0 || (takes == 1 && add_word(w, value, false) != 0))
        snprintf(why, why_len, "out of memory");
    else
        return 0;
    return -1;
}

int hw_config_read(const char *path, hw_config_words *out, char *why, size_t why_len)
{
    memset(out, 0, sizeof *out);
    char *text = read_whole(path, why, why_len);
    if (text == NULL)
        return -1;
    out->words = calloc(2 * HW_CONFIG_MAX_LINES, sizeof *out->words);
    int rc = 0;
    if (out->words == NULL) {
        snprintf(why, why_len, "out of memory");
        rc = -1;
    }
    unsigned number = 0;
    for (char *line = text, *next; rc == 0 && line != NULL; line = next) {
        next = strchr(line, '\n');
        if (next != NULL)
            *next++ = '\0';
        if (++number > HW_CONFIG_MAX_LINES) {
            snprintf(why, why_len, "more than %d lines", HW_CONFIG_MAX_LINES);
            rc = -1;
        } else {
            rc = take_line(line, number, out, why, why_len);
        }
    }
    free(text);
    if (rc != 0)
        hw_config_words_free(out);
    return rc;
}

/* ---- parsing with the command line ---- */

/* argv[0], the file's words, then argv's own options: a new NULL-ended
 * array (the strings are not copied), or NULL. */
static char **joined_argv(int argc, char **argv, const hw_config_words *w, int *joined_argc)
{
    char **joined = calloc(w->count + (size_t)argc + 1, sizeof *joined);
    if (joined == NULL)
        return NULL;
    size_t n = 0;
    joined[n++] = argv[0];
    for (size_t i = 0; i < w->count; i++)
        joined[n++] = w->words[i];
    for (int i = 1; i < argc; i++)
        joined[n++] = argv[i];
    *joined_argc = (int)n;
    return joined;
}

/* The values `words` give option `name` ("--NAME"), in order, each
 * followed by a newline, in `out`. */
static void values_of(const hw_config_words *w, const char *name, char *out, size_t len)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < w->count; i++) {
        if (strncmp(w->words[i], "--", 2) != 0 || hw_agent_option_takes_value(w->words[i] + 2) < 0)
            continue; /* a value */
        bool valued = hw_agent_option_takes_value(w->words[i] + 2) == 1 && i + 1 < w->count;
        if (strcmp(w->words[i], name) == 0) {
            int n = snprintf(out + used, len - used, "%s\n", valued ? w->words[i + 1] : "");
            if (n < 0 || (size_t)n >= len - used)
                return;
            used += (size_t)n;
        }
        i += valued;
    }
}

static bool is_live(const char *name)
{
    for (size_t i = 0; i < sizeof live_options / sizeof live_options[0]; i++)
        if (strcmp(name + 2, live_options[i]) == 0)
            return true;
    return false;
}

/* Say which options the new words change that the agent cannot change
 * while it runs. */
static void say_waiting_for_restart(const hw_config_session *s, const hw_config_words *fresh)
{
    const hw_config_words *sets[2] = {last_taken(s), fresh};
    static const char *names[4 * HW_CONFIG_MAX_LINES];
    size_t count = 0;
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < sets[k]->count; i++) {
            const char *word = sets[k]->words[i];
            int takes = strncmp(word, "--", 2) == 0 ? hw_agent_option_takes_value(word + 2) : -1;
            if (takes < 0)
                continue;
            i += takes == 1;
            bool known = is_live(word);
            for (size_t j = 0; j < count && !known; j++)
                known = strcmp(names[j], word) == 0;
            if (!known)
                names[count++] = word;
        }
    static char before[HW_CONFIG_MAX_BYTES + HW_CONFIG_MAX_LINES], after[sizeof before];
    for (size_t j = 0; j < count; j++) {
        values_of(sets[0], names[j], before, sizeof before);
        values_of(fresh, names[j], after, sizeof after);
        if (strcmp(before, after) != 0)
            fprintf(stderr, "hangwatch: %s: %s changed: it takes effect when hangwatch restarts\n", s->path,
                    names[j] + 2);
    }
}

/* The agent's reload_config: the file read and parsed again. */
static const hw_agent_options *reload(void *ctx)
{
    hw_config_session *s = ctx;
    char why[512];
    reloaded *r = calloc(1, sizeof *r);
    if (r == NULL) {
        fprintf(stderr, "hangwatch: %s not reloaded: out of memory; the options in use are kept\n", s->path);
        return NULL;
    }
    if (hw_config_read(s->path, &r->words, why, sizeof why) != 0) {
        fprintf(stderr, "hangwatch: %s not reloaded: %s; the options in use are kept\n", s->path, why);
        free(r);
        return NULL;
    }
    int joined_argc = 0;
    r->argv = joined_argv(s->argc, s->argv, &r->words, &joined_argc);
    int rc = r->argv ? hw_agent_options_parse(HW_AGENT_WATCH, joined_argc, r->argv, &r->line) : 2;
    if (rc >= 0) {
        /* the parser said what was wrong */
        fprintf(stderr, "hangwatch: %s not reloaded: the options in use are kept\n", s->path);
        hw_config_words_free(&r->words);
        free(r->argv);
        free(r);
        return NULL;
    }
    say_waiting_for_restart(s, &r->words);
    return &r->line.opts;
}

/* The agent's release_config: it copied what it keeps. */
static void release(void *ctx, const hw_agent_options *fresh)
{
    hw_config_session *s = ctx;
    reloaded *r = (reloaded *)(void *)fresh; /* the options are its first member */
    hw_config_words_free(&s->latest);
    s->latest = r->words; /* what the next reload is compared with */
    free(r->argv);
    free(r);
}

const char *hw_config_path_in(int argc, char **argv)
{
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
            return argv[i + 1];
        if (strncmp(argv[i], "--config=", 9) == 0)
            return argv[i] + 9;
    }
    return NULL;
}

int hw_config_parse_watch(const char *path, int argc, char **argv, hw_agent_command_line *line,
                          hw_config_session **session)
{
    *session = NULL;
    char why[512], shown[256];
    hw_config_session *s = calloc(1, sizeof *s);
    if (s == NULL) {
        fprintf(stderr, "hangwatch: out of memory\n");
        return 2;
    }
    s->path = path;
    s->argc = argc;
    s->argv = argv;
    if (hw_config_read(s->path, &s->start, why, sizeof why) != 0) {
        fprintf(stderr, "hangwatch: cannot use --config '%s': %s\n", hw_escape_text(s->path, shown, sizeof shown),
                why);
        free(s);
        return 2;
    }
    int joined_argc = 0;
    char **joined = joined_argv(argc, argv, &s->start, &joined_argc);
    int rc = joined ? hw_agent_options_parse(HW_AGENT_WATCH, joined_argc, joined, line) : 2;
    free(joined); /* the options point at the strings, not the array */
    if (rc >= 0) {
        hw_config_session_free(s);
        return rc;
    }
    line->operands -= (int)s->start.count; /* where the command line's first operand is in argv */
    line->opts.reload_config = reload;
    line->opts.release_config = release;
    line->opts.config_ctx = s;
    *session = s;
    return -1;
}

void hw_config_session_free(hw_config_session *s)
{
    if (s == NULL)
        return;
    hw_config_words_free(&s->start);
    hw_config_words_free(&s->latest);
    free(s);
}
