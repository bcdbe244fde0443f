/*
 * js_internal.h - what the files that read V8 share among themselves
 * (js_frames.h is their interface to the rest):
 *
 *   js_find.c   the module with V8's postmortem metadata, and its values;
 *   js_layout.c those values checked into the layout the readers use;
 *   js_walk.c   the frame-pointer chains, read while the threads are
 *               stopped;
 *   js_names.c  functions, scripts and lines named after the resume, and
 *               the JavaScript frames put in place among the native ones;
 *   js_strings.c V8's strings, of every representation;
 *   js_peek.c   every read of the process's memory.
 *
 * A tagged word is a Smi (an integer, tag bit clear) or a pointer to a
 * heap object plus heap_object_tag; every heap object starts with its map,
 * whose instance type says what it is.  Nothing is trusted before its map
 * says so.
 */
#ifndef HANGWATCH_JS_INTERNAL_H
#define HANGWATCH_JS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "js_frames.h"

#define HW_JS_MAX_NAME_CHARS 512       /* a function's or script's name, in bytes of UTF-8 */
#define HW_JS_MAX_STRING_DEPTH 16      /* cons, thin and sliced strings followed at most */
#define HW_JS_MAX_SOURCE_BYTES (8u << 20) /* a script's source read at most, to count its lines */
#define HW_JS_MAX_LINE_ENDS (1u << 20) /* a script's line ends read at most */
#define HW_JS_MAX_OBJECT_READ 128u     /* the most bytes read at once from a heap object's header */
/* Per watched process (docs/security.md): what its namer keeps of
 * functions and scripts (names, line ends, source positions) at most, past
 * which it starts again empty, and the bytes of sources, line-end arrays
 * and source position tables one capture's naming reads from it at most: a
 * frame whose script or table would pass that has its function's first
 * line or no line, and its thread says so (runtime_lines_cut). */
#define HW_JS_MAX_CACHED_BYTES (32u << 20)
#define HW_JS_MAX_READ_PER_NAMING (2 * HW_JS_MAX_SOURCE_BYTES) /* a two-byte source at its bound fits */

/* Read `len` bytes of process `pid` at `addr`: false when any of it cannot
 * be read (or addr is 0).  Every read of the program's memory goes through
 * here (js_peek.c; the fuzz target puts a forged memory behind it). */
bool hw_js_peek(pid_t pid, uint64_t addr, void *buf, size_t len);

/* The names (without "v8dbg_") of every metadata value hw_js_layout_from
 * asks for, in a fixed order: up to `room` into names; returns how many
 * there are. */
size_t hw_js_metadata_names(const char **names, size_t room);

/* The metadata's values in the ELF file at `path`, in hw_js_metadata_names'
 * order: values[i] with seen[i] for each found, for the first `count`
 * names.  Returns how many were found (0: none, or not a readable ELF). */
size_t hw_js_read_metadata(const char *path, int32_t *values, bool *seen, size_t count);

/* The file of process `pid`'s module that may carry V8 (node, libnode),
 * from its maps text, as the agent can open it: false when there is none. */
bool hw_js_module_path(pid_t pid, const char *maps, size_t maps_len, char *path, size_t path_len);

/* Fill `out` from the metadata's values, each looked up by name through
 * `value` (false when the symbol is missing).  NULL when everything the
 * readers need is there and sane, else the name of what is missing or out
 * of range (static text). */
const char *hw_js_layout_from(hw_js_layout *out, bool (*value)(void *ctx, const char *name, int32_t *v), void *ctx);

static inline bool hw_js_is_smi(const hw_js_layout *L, uint64_t word)
{
    return (word & L->smi_tag_mask) == 0;
}

static inline bool hw_js_is_heap_object(const hw_js_layout *L, uint64_t word)
{
    return (word & L->heap_object_tag_mask) == L->heap_object_tag && word > 4096;
}

static inline int64_t hw_js_smi_value(const hw_js_layout *L, uint64_t word)
{
    return (int64_t)word >> L->smi_shift;
}

/* The untagged address of a heap object's field at `offset`. */
static inline uint64_t hw_js_field(const hw_js_layout *L, uint64_t object, int32_t offset)
{
    return object - L->heap_object_tag + (uint64_t)(int64_t)offset;
}

static inline uint64_t hw_js_u64(const unsigned char *buf, int32_t off)
{
    uint64_t v;
    memcpy(&v, buf + off, sizeof v);
    return v;
}

/* ---- strings (js_strings.c) ---- */

/* A string's header: its instance type, length in units, and raw bytes. */
typedef struct hw_js_string_head {
    uint16_t type;
    int64_t length;
    unsigned char raw[HW_JS_MAX_OBJECT_READ];
} hw_js_string_head;

/* Called with consecutive chunks of a string's units (two bytes each when
 * two_byte): false stops the visit, which then fails. */
typedef bool (*hw_js_units_fn)(void *ctx, const unsigned char *data, size_t units, bool two_byte);

/* Read the header of string `str`: false when it is not one. */
bool hw_js_read_string_head(pid_t pid, const hw_js_layout *L, uint64_t str, hw_js_string_head *h);

/* Hand units [from, from + count) of string `str` to `fn`, in order;
 * false when any part cannot be read or `fn` said stop. */
bool hw_js_visit_string(pid_t pid, const hw_js_layout *L, uint64_t str, uint64_t from, uint64_t count,
                        hw_js_units_fn fn, void *ctx, int depth);

/* A string as UTF-8 (at most HW_JS_MAX_NAME_CHARS bytes, malloc'd), or NULL. */
char *hw_js_read_name(pid_t pid, const hw_js_layout *L, uint64_t str);

/* Read the instance type of heap object `object` (two reads: its map, the
 * map's type).  False when it cannot be read or `object` is not tagged. */
bool hw_js_instance_type(pid_t pid, const hw_js_layout *L, uint64_t object, uint16_t *type, uint64_t *map);

#endif
