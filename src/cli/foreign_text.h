/*
 * foreign_text.h - text that hangwatch did not write (a report's names and
 * fields: anyone may have edited the file, and the names come from the
 * watched program) on its way out: printed to the terminal only escaped
 * (text_escape.h), put into JSON only as valid UTF-8, and read from a
 * report's JSON without trusting the type of any field.  Shared by every
 * command that reads reports back (show, stats, export, html).
 */
#ifndef HANGWATCH_FOREIGN_TEXT_H
#define HANGWATCH_FOREIGN_TEXT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Text from a report (or any foreign text), escaped, of any length. */
void hw_put_bytes(FILE *out, const char *s, size_t len);
void hw_put_text(FILE *out, const char *s);

/* "hangwatch: LABEL: " on stderr, the label escaped; the caller ends the line. */
void hw_say_about(const char *label);

/* Text from a report as a JSON string: as it is (valid UTF-8, as jansson
 * read it), else escaped.  NULL only when out of memory. */
json_t *hw_json_text(const char *s);
/* An unsigned count as a JSON integer, saturated at INT64_MAX. */
json_t *hw_json_u64(uint64_t v);

/* Fields of an object that may be anything: the string (or `fallback`),
 * the integer (or `fallback`). */
const char *hw_str_at(json_t *obj, const char *key, const char *fallback);
json_int_t hw_int_at(json_t *obj, const char *key, json_int_t fallback);

#endif
