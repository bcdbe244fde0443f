/*
 * foreign_text.c - foreign text printed escaped, put into JSON, and the
 * fields of a report read without trusting their types (foreign_text.h).
 */
#include "foreign_text.h"

#include <stdlib.h>
#include <string.h>

#include "core/text_escape.h"

#define ESCAPE_CHUNK 256 /* input bytes escaped at a time: at most 4 output bytes each */

void hw_put_bytes(FILE *out, const char *s, size_t len)
{
    char escaped[4 * ESCAPE_CHUNK + 1];
    for (size_t done = 0; done < len; done += ESCAPE_CHUNK) {
        size_t n = len - done < ESCAPE_CHUNK ? len - done : ESCAPE_CHUNK;
        fputs(hw_escape_bytes(s + done, n, escaped, sizeof escaped), out);
    }
}

void hw_put_text(FILE *out, const char *s)
{
    hw_put_bytes(out, s, strlen(s));
}

void hw_say_about(const char *label)
{
    fputs("hangwatch: ", stderr);
    hw_put_text(stderr, label);
    fputs(": ", stderr);
}

json_t *hw_json_text(const char *s)
{
    json_t *v = json_string(s);
    if (v == NULL) {
        size_t len = strlen(s);
        char *escaped = malloc(4 * len + 1);
        if (escaped != NULL)
            v = json_string(hw_escape_bytes(s, len, escaped, 4 * len + 1));
        free(escaped);
    }
    return v;
}

json_t *hw_json_u64(uint64_t v)
{
    return json_integer(v > (uint64_t)INT64_MAX ? INT64_MAX : (json_int_t)v);
}

const char *hw_str_at(json_t *obj, const char *key, const char *fallback)
{
    const char *s = json_string_value(json_object_get(obj, key));
    return s ? s : fallback;
}

json_int_t hw_int_at(json_t *obj, const char *key, json_int_t fallback)
{
    json_t *v = json_object_get(obj, key);
    return json_is_integer(v) ? json_integer_value(v) : fallback;
}
