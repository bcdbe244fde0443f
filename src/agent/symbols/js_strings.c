/*
 * js_strings.c - V8's strings read from a node's memory, for js_names.c:
 * every representation V8 uses (sequential one- and two-byte, cons, thin,
 * sliced, external), depth-bounded, handed out in chunks so that a long
 * one (a script's source) is never copied whole.
 */
#include <stdlib.h>
#include <string.h>

#include "core/text_bits.h"
#include "js_internal.h"

#define CHUNK 8192 /* units read at once */

bool hw_js_read_string_head(pid_t pid, const hw_js_layout *L, uint64_t str, hw_js_string_head *h)
{
    if (!hw_js_instance_type(pid, L, str, &h->type, NULL) || h->type >= L->first_nonstring)
        return false;
    /* The largest header any representation has: up to the external
     * resource's cached data pointer. */
    size_t need = (size_t)L->external_resource + 16;
    const int32_t ends[] = {L->string_length + 4, L->cons_second + 8, L->sliced_offset + 8, L->thin_actual + 8};
    for (size_t i = 0; i < 4; i++)
        if ((size_t)ends[i] > need)
            need = (size_t)ends[i];
    if (need > sizeof h->raw || !hw_js_peek(pid, hw_js_field(L, str, 0), h->raw, need)) {
        /* A short sequential string may end its page: the length is enough. */
        need = (size_t)L->string_length + 4;
        memset(h->raw, 0, sizeof h->raw);
        if (!hw_js_peek(pid, hw_js_field(L, str, 0), h->raw, need))
            return false;
    }
    int32_t len;
    memcpy(&len, h->raw + L->string_length, sizeof len);
    if (len < 0)
        return false;
    h->length = len;
    return true;
}

static bool read_units(pid_t pid, uint64_t addr, uint64_t from, uint64_t count, bool two_byte, hw_js_units_fn fn,
                       void *ctx)
{
    unsigned char buf[CHUNK];
    size_t unit = two_byte ? 2 : 1;
    while (count > 0) {
        size_t n = count > CHUNK / unit ? CHUNK / unit : (size_t)count;
        if (!hw_js_peek(pid, addr + from * unit, buf, n * unit) || !fn(ctx, buf, n, two_byte))
            return false;
        from += n;
        count -= n;
    }
    return true;
}

/* Hand units [from, from + count) of string `str` to `fn`, in order. */
bool hw_js_visit_string(pid_t pid, const hw_js_layout *L, uint64_t str, uint64_t from, uint64_t count, hw_js_units_fn fn,
                         void *ctx, int depth)
{
    hw_js_string_head h;
    if (depth > HW_JS_MAX_STRING_DEPTH || !hw_js_read_string_head(pid, L, str, &h) || from > (uint64_t)h.length ||
        count > (uint64_t)h.length - from)
        return false;
    if (count == 0)
        return true;
    uint16_t rep = h.type & L->string_representation_mask;
    bool two_byte = (h.type & L->string_encoding_mask) != L->one_byte_tag;
    if (rep == L->seq_tag)
        return read_units(pid, hw_js_field(L, str, L->seq_chars), from, count, two_byte, fn, ctx);
    if (rep == L->external_tag) {
        uint64_t data = hw_js_u64(h.raw, L->external_resource + 8);
        return data != 0 && read_units(pid, data, from, count, two_byte, fn, ctx);
    }
    if (rep == L->thin_tag)
        return hw_js_visit_string(pid, L, hw_js_u64(h.raw, L->thin_actual), from, count, fn, ctx, depth + 1);
    if (rep == L->sliced_tag) {
        uint64_t offset = hw_js_u64(h.raw, L->sliced_offset);
        if (!hw_js_is_smi(L, offset) || hw_js_smi_value(L, offset) < 0)
            return false;
        return hw_js_visit_string(pid, L, hw_js_u64(h.raw, L->sliced_parent), from + (uint64_t)hw_js_smi_value(L, offset),
                            count, fn, ctx, depth + 1);
    }
    if (rep == L->cons_tag) {
        uint64_t first = hw_js_u64(h.raw, L->cons_first), second = hw_js_u64(h.raw, L->cons_second);
        hw_js_string_head fh;
        if (!hw_js_read_string_head(pid, L, first, &fh) || fh.length > h.length)
            return false;
        uint64_t first_len = (uint64_t)fh.length;
        if (from < first_len) {
            uint64_t n = count < first_len - from ? count : first_len - from;
            if (!hw_js_visit_string(pid, L, first, from, n, fn, ctx, depth + 1))
                return false;
            from += n;
            count -= n;
        }
        return count == 0 || hw_js_visit_string(pid, L, second, from - first_len, count, fn, ctx, depth + 1);
    }
    return false;
}

typedef struct utf8_out {
    char text[HW_JS_MAX_NAME_CHARS + 8];
    size_t len;
} utf8_out;

static bool append_utf8(void *ctx, const unsigned char *data, size_t units, bool two_byte)
{
    utf8_out *o = ctx;
    for (size_t i = 0; i < units && o->len + 4 <= HW_JS_MAX_NAME_CHARS; i++) {
        /* Control characters kept: whatever shows a name escapes it
         * (text_escape.h), so a file name with a newline reads "a\nb". */
        uint32_t c = two_byte ? (uint32_t)data[2 * i] | (uint32_t)data[2 * i + 1] << 8 : data[i];
        char *p = o->text + o->len;
        hw_put_utf8(&p, c);
        o->len = (size_t)(p - o->text);
    }
    return true;
}

/* A string as UTF-8 (at most HW_JS_MAX_NAME_CHARS bytes), or NULL. */
char *hw_js_read_name(pid_t pid, const hw_js_layout *L, uint64_t str)
{
    hw_js_string_head h;
    if (!hw_js_read_string_head(pid, L, str, &h))
        return NULL;
    utf8_out o = {.len = 0};
    uint64_t count = h.length > HW_JS_MAX_NAME_CHARS ? HW_JS_MAX_NAME_CHARS : (uint64_t)h.length;
    if (!hw_js_visit_string(pid, L, str, 0, count, append_utf8, &o, 0))
        return NULL;
    o.text[o.len] = '\0';
    return strdup(o.text);
}
