/*
 * json_file.h - writing a JSON file for the user (`stack --json`,
 * `export -o`), or another text file (`html -o`): never through another
 * user's symbolic link or directory anywhere on its path, never over a
 * symbolic link or something that is not a regular file, atomically (a
 * reader sees the old file or the whole new one) and private (mode 0600:
 * stacks name a program's files and functions, as reports do);
 * src/agent/common/output_file.h.
 */
#ifndef HANGWATCH_JSON_FILE_H
#define HANGWATCH_JSON_FILE_H

#include <jansson.h>
#include <stddef.h>

/* May `path` be written?  Its directory reachable as output_file.h asks,
 * the name not a symlink, a directory or another special file.  0, or 2
 * after saying why ("cannot write WHAT to 'PATH': ..."). */
int hw_json_file_check(const char *path, const char *what);

/* Write `json` (json_dumps `flags`, and a final newline) to `path`: a
 * temporary file next to it, mode 0600, then rename, which replaces a name
 * and never follows a symlink put there since the check.  0, -ENOMEM, or
 * -ELOOP once the reason was said. */
int hw_json_file_write(const char *path, const char *what, json_t *json, size_t flags);

/* The same for `len` bytes of any text (`hangwatch html -o`), written as
 * they are. */
int hw_text_file_write(const char *path, const char *what, const char *text, size_t len);

#endif
