/*
 * config_file.h - `hangwatch watch --config FILE` (docs/config.md): the
 * options of `watch` from a file, one per line, read at the start and again
 * on SIGHUP.  The file's options come first and the command line's after
 * them, so what the command line says wins; both are checked by the same
 * parser (agent_options.h).  A reload that finds the file wrong keeps the
 * options in use and says why; options the agent cannot change while it
 * runs are named as waiting for a restart.
 */
#ifndef HANGWATCH_CONFIG_FILE_H
#define HANGWATCH_CONFIG_FILE_H

#include <stddef.h>

#include "agent_options.h"

/* The most bytes and lines a config file may have, and a line's length. */
#define HW_CONFIG_MAX_BYTES (64 * 1024)
#define HW_CONFIG_MAX_LINES 1024
#define HW_CONFIG_MAX_LINE 4096

/* A config file as the command line's words: "--NAME" and, for an option
 * that takes one, its value, in the file's order. */
typedef struct hw_config_words {
    char **words; /* each its own allocation */
    size_t count;
} hw_config_words;

/*
 * Read the config file at `path` into *out: 0, or -1 with the reason in
 * `why` (the file cannot be read, is writable by another user than root
 * and ours, is too long, or a line is not an option of `watch`, with its
 * number).  Each line is "NAME VALUE" or "NAME" (an option of `hangwatch
 * watch` without its leading "--"; the value is the rest of the line,
 * without the blanks around it); empty lines and lines starting with '#'
 * are skipped.
 */
int hw_config_read(const char *path, hw_config_words *out, char *why, size_t why_len);
void hw_config_words_free(hw_config_words *w);

typedef struct hw_config_session hw_config_session;

/* The FILE of "--config FILE" or "--config=FILE" among argv's options, or
 * NULL. */
const char *hw_config_path_in(int argc, char **argv);

/*
 * `hangwatch watch --config path`: parse argv with the file's words before
 * its own into *line, and set the options' reload_config and
 * release_config, whose state *session holds (free it after the agent
 * ran).  -1 when the options are good, else the exit status to stop with
 * (2 after saying why).
 */
int hw_config_parse_watch(const char *path, int argc, char **argv, hw_agent_command_line *line,
                          hw_config_session **session);
void hw_config_session_free(hw_config_session *s);

#endif
