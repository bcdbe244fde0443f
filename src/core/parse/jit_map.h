/*
 * jit_map.h - names for the JIT-compiled and interpreted frames of a
 * Node.js (V8) program, read from the perf map V8 writes when node runs with
 * --perf-basic-prof-only-functions --interpreted-frames-native-stack.
 *
 * A stack of a node program is mostly addresses in anonymous memory that no
 * ELF file describes.  V8 appends one line per code object it makes to
 * /tmp/perf-PID.map: "START SIZE NAME", START and SIZE in hex without 0x,
 * NAME the rest of the line.  Node 20 writes names such as
 *     JS:*renderHugeTable /srv/app/t.js:1:25
 *     JS:~ node:internal/main/run_main_module:1:1     (anonymous function)
 *     Builtin:ArrayPrototypePush      RegExp:^a+b$
 * node 18 "LazyCompile:*renderHugeTable /srv/app/t.js:1" (no column) and
 * "Function:~foo file:///srv/app/x.js:3".  This module turns such a text
 * into a map from addresses to names.  Pure: no OS calls (the file is read
 * by the agent, jit_map_file.h).
 *
 * The text comes from the watched program, and the agent that reads it may
 * run as root, so it is parsed as hostile input:
 *   - a line longer than HW_JIT_MAP_MAX_LINE bytes, or holding a NUL byte,
 *     is skipped, as is any line that is not "HEX blanks HEX blanks NAME"
 *     (blanks are spaces or tabs; one trailing CR is ignored);
 *   - a SIZE of 0, over HW_JIT_MAP_MAX_CODE_SIZE, or a range whose end
 *     START + SIZE does not fit in 64 bits is skipped;
 *   - after HW_JIT_MAP_MAX_ENTRIES entries, further lines are skipped.
 * Every line that does not become an entry, blank ones included, counts as
 * skipped: entries + skipped = lines (the bytes after the last newline, if
 * any, are a line).  Names keep their bytes as written, UTF-8 or not:
 * whoever prints them escapes them (text_escape.h).
 *
 * What NAME is split into:
 *   - kind: a capitalised word before the first colon ("JS", "Builtin",
 *     "Eval", "RegExp", "LazyCompile"...), as written; NULL if there is none
 *     (then the whole NAME is the function);
 *   - for the kinds that name JavaScript functions (JS, Eval, Script,
 *     Function, LazyCompile, InterpretedFunction) only: the tier marker
 *     right after the colon ('~' Ignition, '^' Sparkplug, '+' Maglev, '*'
 *     TurboFan; absent when V8 wrote none), then "FUNCTION FILE:LINE:COL" or
 *     "FUNCTION FILE:LINE", taken apart from the right so that files with
 *     colons (file:///..., node:internal/...) stay whole.  FUNCTION is up to
 *     the first space, except "get NAME"/"set NAME" (accessors) when the
 *     word after the space does not start a path; files may contain spaces.
 *     An empty FUNCTION is "(anonymous)".  Without a trailing ":LINE" the
 *     rest is the function, without a file;
 *   - other kinds (a RegExp's source may hold anything): the rest is the
 *     function, no tier, no file.
 *
 * Overlaps: V8 reuses addresses when code moves or dies and never says so;
 * a later line describes the code at its addresses now, so where ranges
 * overlap the LATER line wins (an earlier one still names the addresses no
 * later line covers).  Parsing flattens the lines into disjoint segments,
 * O(n log n) time and O(n) memory for n entries; a lookup is a binary
 * search, O(log n).
 */
#ifndef HANGWATCH_JIT_MAP_H
#define HANGWATCH_JIT_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Longest line read, newline excluded (V8 cuts names at 512 bytes or so). */
#define HW_JIT_MAP_MAX_LINE 4096
/* Most entries kept (a large program makes about 100k). */
#define HW_JIT_MAP_MAX_ENTRIES 2000000
/* Largest code object believed (no V8 code object comes near 1 GiB). */
#define HW_JIT_MAP_MAX_CODE_SIZE (UINT64_C(1) << 30)

typedef struct hw_jit_map hw_jit_map;

typedef struct hw_js_symbol {
    const char *function;    /* "renderHugeTable"; "(anonymous)" when empty; never NULL */
    const char *source_file; /* "/srv/app/t.js", "node:internal/...", "file:///..."; NULL if none */
    int source_line;         /* the function's definition; 0 if none */
    int source_column;       /* 0 if none (node 18 writes no column) */
    const char *kind;        /* "JS", "Builtin", "Eval", "RegExp", ... as written; NULL if none */
    char tier;               /* '~', '^', '+', '*', or 0 */
    uint64_t start, size;    /* the code's range [start, start + size) */
    size_t map_line;         /* the line of the map text it came from, from 1 */
} hw_js_symbol;

/*
 * Parse `len` bytes of `text` (NUL bytes allowed, no terminator needed).
 * Returns the map, NULL only when memory ran out.  `skipped_lines`, if not
 * NULL, gets the number of lines that did not become entries.
 */
hw_jit_map *hw_jit_map_parse(const char *text, size_t len, size_t *skipped_lines);

/*
 * Add the lines of `text` (more of the same file: V8 only appends) to
 * `map`, numbered on from its last line, as if the whole text had been
 * parsed at once: O(n log n) for the n entries now in the map.  False only
 * when memory ran out; the map must then be freed, not used.
 */
bool hw_jit_map_append(hw_jit_map *map, const char *text, size_t len, size_t *skipped_lines);

/*
 * The code at `pc`: the last line of the map whose range holds it.  Returns
 * false when no line does (or `map` is NULL).  The strings in `*out` stay
 * valid until the map is freed.  O(log n).
 */
bool hw_jit_map_lookup(const hw_jit_map *map, uint64_t pc, hw_js_symbol *out);

/* The number of entries (0 for NULL). */
size_t hw_jit_map_count(const hw_jit_map *map);

/* Entry `index` (0 .. count - 1) in the order of the map's lines, whether
 * later lines hide it or not; false when out of range. */
bool hw_jit_map_entry(const hw_jit_map *map, size_t index, hw_js_symbol *out);

void hw_jit_map_free(hw_jit_map *map);

#endif
