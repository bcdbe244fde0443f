/*
 * jit_map.c - see jit_map.h.
 *
 * Layout: the entries in the order of their lines, their strings in one
 * arena (32-bit offsets), and the address space cut into disjoint segments,
 * each naming the entry that wins there (or none), sorted by address.  The
 * segments are made by a sweep over the entries' starts and ends in address
 * order, keeping the entries that cover the sweep point in a max-heap by
 * line order (ended ones are dropped lazily when they reach the top): the
 * heap's top is the winner.  n entries give at most 2n segments.
 */
#include "jit_map.h"

#include <stdlib.h>
#include <string.h>

#include "core/text_bits.h"

#define NO_STRING UINT32_MAX  /* an offset meaning "none" */
#define NO_ENTRY UINT32_MAX   /* a segment no entry covers */
#define MAX_ARENA (UINT32_MAX - 1)

static const char anonymous[] = "(anonymous)";

typedef struct entry {
    uint64_t start, size;
    uint64_t map_line;
    uint32_t function, source_file, kind; /* arena offsets or NO_STRING */
    int32_t source_line, source_column;
    char tier;
} entry;

struct hw_jit_map {
    entry *entries;
    size_t count;
    char *arena;
    size_t arena_used, arena_cap;
    /* Segment i covers [seg_from[i], seg_from[i + 1]) (the last one up to
     * 2^64) and belongs to entry seg_entry[i], or to none. */
    uint64_t *seg_from;
    uint32_t *seg_entry;
    size_t segments;
    uint64_t lines; /* lines parsed so far: the next one's number is lines + 1 */
};

/* ---- parsing a line --------------------------------------------------- */

static bool is_blank(char c)
{
    return c == ' ' || c == '\t';
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool is_alpha(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* Hex digits at `p` (at least one, the value fitting in 64 bits) into *v;
 * returns the first byte after them, or NULL. */
static const char *parse_hex(const char *p, const char *end, uint64_t *v)
{
    uint64_t x = 0;
    const char *q = p;
    for (; q < end && hw_hex_digit_value(*q) >= 0; q++) {
        if (x >> 60)
            return NULL;
        x = x << 4 | (uint64_t)hw_hex_digit_value(*q);
    }
    if (q == p)
        return NULL;
    *v = x;
    return q;
}

/* Decimal digits ending just before `end` (1..9 of them, so they fit in an
 * int) and starting after `lo`: returns their start, or NULL. */
static const char *digits_before(const char *lo, const char *end, int *v)
{
    const char *p = end;
    while (p > lo && is_digit(p[-1]) && end - p < 10)
        p--;
    if (p == end || end - p > 9 || (p > lo && is_digit(p[-1])))
        return NULL;
    int x = 0;
    for (const char *q = p; q < end; q++)
        x = x * 10 + (*q - '0');
    *v = x;
    return p;
}

/* Does [p, end) start like a file: "/", ".", "<", or a URL scheme
 * ("file:", "node:", "http:")? */
static bool starts_path(const char *p, const char *end)
{
    if (p == end)
        return false;
    if (*p == '/' || *p == '.' || *p == '<')
        return true;
    if (!is_alpha(*p))
        return false;
    for (p++; p < end; p++) {
        if (*p == ':')
            return true;
        if (!is_alpha(*p) && !is_digit(*p) && *p != '+' && *p != '-' && *p != '.')
            return false;
    }
    return false;
}

static bool is_js_kind(const char *k, size_t n)
{
    static const char *const kinds[] = {"JS",       "Eval",        "Script",
                                        "Function", "LazyCompile", "InterpretedFunction"};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (strlen(kinds[i]) == n && memcmp(kinds[i], k, n) == 0)
            return true;
    return false;
}

/* The pieces of a NAME, as byte ranges of the line. */
typedef struct name_parts {
    const char *kind, *kind_end;         /* kind == NULL: none */
    const char *function, *function_end; /* empty: anonymous */
    const char *file, *file_end;         /* file == NULL: none */
    int line, column;
    char tier;
} name_parts;

/* "FUNCTION FILE" (the position already cut off): where FUNCTION ends, or
 * NULL when there is no space to split at. */
static const char *function_end(const char *p, const char *end)
{
    const char *space = memchr(p, ' ', (size_t)(end - p));
    if (!space)
        return NULL;
    /* An accessor's name is "get x" / "set x". */
    if (space - p == 3 && (memcmp(p, "get", 3) == 0 || memcmp(p, "set", 3) == 0) &&
        !starts_path(space + 1, end)) {
        const char *second = memchr(space + 1, ' ', (size_t)(end - space - 1));
        if (second && second > space + 1)
            return second;
    }
    return space;
}

static void split_name(const char *name, const char *end, name_parts *np)
{
    memset(np, 0, sizeof *np);
    const char *body = name;
    bool js = false;
    if (name < end && *name >= 'A' && *name <= 'Z') {
        const char *k = name;
        while (k < end && (is_alpha(*k) || is_digit(*k) || *k == '_'))
            k++;
        if (k < end && *k == ':') {
            np->kind = name;
            np->kind_end = k;
            body = k + 1;
            js = is_js_kind(name, (size_t)(k - name));
        }
    }
    np->function = body;
    np->function_end = end;
    if (!js)
        return;
    if (body < end && (*body == '~' || *body == '^' || *body == '+' || *body == '*'))
        np->tier = *body++;
    np->function = body;

    /* From the right: ":LINE:COL" or ":LINE". */
    int last, line = 0, column = 0;
    const char *d = digits_before(body, end, &last);
    const char *head_end = NULL;
    if (d && d > body && d[-1] == ':') {
        int first;
        const char *d2 = digits_before(body, d - 1, &first);
        if (d2 && d2 > body && d2[-1] == ':') {
            line = first;
            column = last;
            head_end = d2 - 1;
        } else {
            line = last;
            head_end = d - 1;
        }
    }
    const char *split = head_end ? function_end(body, head_end) : NULL;
    if (split && split + 1 < head_end) {
        np->function_end = split;
        np->file = split + 1;
        np->file_end = head_end;
        np->line = line;
        np->column = column;
        return;
    }
    /* No position: all of it names the function ("JS:~ foo" has a space
     * where the name of the missing file would follow). */
    while (body < end && *body == ' ')
        body++;
    np->function = body;
}

/* ---- building --------------------------------------------------------- */

typedef struct builder {
    hw_jit_map *map;
    size_t entries_cap;
    bool out_of_memory;
} builder;

/* Copy [p, end) into the arena as a string; NO_STRING when it is full. */
static uint32_t keep(builder *b, const char *p, const char *end)
{
    hw_jit_map *m = b->map;
    size_t n = (size_t)(end - p);
    if (n + 1 > MAX_ARENA - m->arena_used)
        return NO_STRING;
    if (m->arena_used + n + 1 > m->arena_cap) {
        size_t cap = m->arena_cap ? m->arena_cap : 4096;
        while (cap < m->arena_used + n + 1)
            cap = cap > MAX_ARENA / 2 ? MAX_ARENA : cap * 2;
        char *a = realloc(m->arena, cap);
        if (!a) {
            b->out_of_memory = true;
            return NO_STRING;
        }
        m->arena = a;
        m->arena_cap = cap;
    }
    uint32_t at = (uint32_t)m->arena_used;
    memcpy(m->arena + at, p, n);
    m->arena[at + n] = '\0';
    m->arena_used += n + 1;
    return at;
}

/* One line without its newline: true if it became an entry. */
static bool add_line(builder *b, const char *p, const char *end, uint64_t map_line)
{
    hw_jit_map *m = b->map;
    if (end - p > HW_JIT_MAP_MAX_LINE || memchr(p, '\0', (size_t)(end - p)))
        return false;
    if (end > p && end[-1] == '\r')
        end--;
    uint64_t start, size;
    const char *q = parse_hex(p, end, &start);
    if (!q || q == end || !is_blank(*q))
        return false;
    while (q < end && is_blank(*q))
        q++;
    q = parse_hex(q, end, &size);
    if (!q || q == end || !is_blank(*q))
        return false;
    while (q < end && is_blank(*q))
        q++;
    if (q == end)
        return false; /* no name */
    if (size == 0 || size > HW_JIT_MAP_MAX_CODE_SIZE || start > UINT64_MAX - size)
        return false;
    if (m->count >= HW_JIT_MAP_MAX_ENTRIES)
        return false;

    name_parts np;
    split_name(q, end, &np);
    if (m->count == b->entries_cap) {
        size_t cap = b->entries_cap ? b->entries_cap * 2 : 256;
        entry *e = realloc(m->entries, cap * sizeof *e);
        if (!e) {
            b->out_of_memory = true;
            return false;
        }
        m->entries = e;
        b->entries_cap = cap;
    }
    size_t arena_before = m->arena_used;
    entry e = {.start = start, .size = size, .map_line = map_line, .tier = np.tier,
               .function = NO_STRING, .source_file = NO_STRING, .kind = NO_STRING};
    bool kept = true;
    if (np.function_end > np.function)
        kept = (e.function = keep(b, np.function, np.function_end)) != NO_STRING;
    if (kept && np.file) {
        kept = (e.source_file = keep(b, np.file, np.file_end)) != NO_STRING;
        e.source_line = np.line;
        e.source_column = np.column;
    }
    if (kept && np.kind)
        kept = (e.kind = keep(b, np.kind, np.kind_end)) != NO_STRING;
    if (!kept) {
        m->arena_used = arena_before;
        return false;
    }
    m->entries[m->count++] = e;
    return true;
}

/* ---- the segments ----------------------------------------------------- */

static uint64_t entry_start(const entry *e)
{
    return e->start;
}

static uint64_t entry_end(const entry *e)
{
    return e->start + e->size; /* fits: checked when parsed */
}

/* Sort `idx` (n entry numbers) by key(entry), stably; bottom-up merge sort
 * with `tmp` of the same size.  Returns the sorted array (idx or tmp). */
static uint32_t *sort_by(const entry *entries, uint32_t *idx, uint32_t *tmp, size_t n,
                         uint64_t (*key)(const entry *))
{
    uint32_t *from = idx, *to = tmp;
    for (size_t width = 1; width < n; width *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * width) {
            size_t mid = lo + width < n ? lo + width : n;
            size_t hi = lo + 2 * width < n ? lo + 2 * width : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi)
                to[k++] = key(&entries[from[j]]) < key(&entries[from[i]]) ? from[j++] : from[i++];
            while (i < mid)
                to[k++] = from[i++];
            while (j < hi)
                to[k++] = from[j++];
        }
        uint32_t *t = from;
        from = to;
        to = t;
    }
    return from;
}

static void heap_push(uint32_t *heap, size_t *n, uint32_t v)
{
    size_t i = (*n)++;
    while (i > 0 && heap[(i - 1) / 2] < v) {
        heap[i] = heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    heap[i] = v;
}

static void heap_pop(uint32_t *heap, size_t *n)
{
    uint32_t v = heap[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && heap[c + 1] > heap[c])
            c++;
        if (heap[c] <= v)
            break;
        heap[i] = heap[c];
        i = c;
    }
    if (*n > 0)
        heap[i] = v;
}

static bool build_segments(hw_jit_map *m)
{
    size_t n = m->count;
    if (n == 0)
        return true;
    uint32_t *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    uint32_t *c = malloc(n * sizeof *c), *d = malloc(n * sizeof *d);
    uint32_t *heap = malloc(n * sizeof *heap);
    unsigned char *ended = calloc(n, 1);
    m->seg_from = malloc(2 * n * sizeof *m->seg_from);
    m->seg_entry = malloc(2 * n * sizeof *m->seg_entry);
    bool ok = a && b && c && d && heap && ended && m->seg_from && m->seg_entry;
    if (ok) {
        for (size_t i = 0; i < n; i++)
            a[i] = c[i] = (uint32_t)i;
        const uint32_t *by_start = sort_by(m->entries, a, b, n, entry_start);
        const uint32_t *by_end = sort_by(m->entries, c, d, n, entry_end);
        size_t s = 0, e = 0, top = 0;
        uint32_t current = NO_ENTRY;
        while (s < n || e < n) {
            uint64_t x;
            if (s < n && e < n) {
                uint64_t xs = m->entries[by_start[s]].start, xe = entry_end(&m->entries[by_end[e]]);
                x = xs < xe ? xs : xe;
            } else {
                x = s < n ? m->entries[by_start[s]].start : entry_end(&m->entries[by_end[e]]);
            }
            /* The winner is computed after every event at x: a range
             * ending at x does not cover it, one starting there does. */
            for (; e < n && entry_end(&m->entries[by_end[e]]) == x; e++)
                ended[by_end[e]] = 1;
            for (; s < n && m->entries[by_start[s]].start == x; s++)
                heap_push(heap, &top, by_start[s]);
            while (top > 0 && ended[heap[0]])
                heap_pop(heap, &top);
            uint32_t winner = top > 0 ? heap[0] : NO_ENTRY;
            if (winner != current) {
                m->seg_from[m->segments] = x;
                m->seg_entry[m->segments] = winner;
                m->segments++;
                current = winner;
            }
        }
        /* Every start opened a segment or changed nothing, every end
         * likewise: at most 2n segments, the last one empty. */
        uint64_t *f = realloc(m->seg_from, m->segments * sizeof *f);
        if (f)
            m->seg_from = f;
        uint32_t *g = realloc(m->seg_entry, m->segments * sizeof *g);
        if (g)
            m->seg_entry = g;
    }
    free(a);
    free(b);
    free(c);
    free(d);
    free(heap);
    free(ended);
    return ok;
}

/* ---- the API ---------------------------------------------------------- */

/* Add the lines of `text` to b's map and make its segments again; false
 * when memory ran out (the map is then unusable). */
static bool add_text(builder *b, const char *text, size_t len, size_t *skipped)
{
    hw_jit_map *m = b->map;
    const char *p = text, *end = len > 0 ? text + len : text;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *line_end = nl ? nl : end;
        m->lines++;
        if (!add_line(b, p, line_end, m->lines))
            (*skipped)++;
        if (b->out_of_memory)
            return false;
        p = nl ? nl + 1 : end;
    }
    free(m->seg_from);
    free(m->seg_entry);
    m->seg_from = NULL;
    m->seg_entry = NULL;
    m->segments = 0;
    if (!build_segments(m))
        return false;
    /* Give back what growing by doubling left over. */
    if (m->count > 0 && m->count < b->entries_cap) {
        entry *e = realloc(m->entries, m->count * sizeof *e);
        if (e)
            m->entries = e;
    }
    return true;
}

hw_jit_map *hw_jit_map_parse(const char *text, size_t len, size_t *skipped_lines)
{
    size_t skipped = 0;
    if (skipped_lines)
        *skipped_lines = 0;
    hw_jit_map *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    builder b = {.map = m};
    if (!add_text(&b, text, len, &skipped)) {
        hw_jit_map_free(m);
        return NULL;
    }
    if (skipped_lines)
        *skipped_lines = skipped;
    return m;
}

bool hw_jit_map_append(hw_jit_map *map, const char *text, size_t len, size_t *skipped_lines)
{
    size_t skipped = 0;
    if (skipped_lines)
        *skipped_lines = 0;
    if (!map)
        return false;
    builder b = {.map = map, .entries_cap = map->count};
    bool ok = add_text(&b, text, len, &skipped);
    if (skipped_lines)
        *skipped_lines = skipped;
    return ok;
}

static void fill(const hw_jit_map *m, size_t i, hw_js_symbol *out)
{
    const entry *e = &m->entries[i];
    out->function = e->function == NO_STRING ? anonymous : m->arena + e->function;
    out->source_file = e->source_file == NO_STRING ? NULL : m->arena + e->source_file;
    out->source_line = e->source_line;
    out->source_column = e->source_column;
    out->kind = e->kind == NO_STRING ? NULL : m->arena + e->kind;
    out->tier = e->tier;
    out->start = e->start;
    out->size = e->size;
    out->map_line = (size_t)e->map_line;
}

bool hw_jit_map_lookup(const hw_jit_map *map, uint64_t pc, hw_js_symbol *out)
{
    if (!map || map->segments == 0 || pc < map->seg_from[0])
        return false;
    /* The last segment starting at or before pc. */
    size_t lo = 0, hi = map->segments; /* seg_from[lo] <= pc < seg_from[hi] */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (map->seg_from[mid] <= pc)
            lo = mid;
        else
            hi = mid;
    }
    uint32_t i = map->seg_entry[lo];
    if (i == NO_ENTRY)
        return false;
    const entry *e = &map->entries[i];
    if (pc < e->start || pc - e->start >= e->size)
        return false; /* cannot happen: the segments lie within their entry */
    fill(map, i, out);
    return true;
}

size_t hw_jit_map_count(const hw_jit_map *map)
{
    return map ? map->count : 0;
}

bool hw_jit_map_entry(const hw_jit_map *map, size_t index, hw_js_symbol *out)
{
    if (!map || index >= map->count)
        return false;
    fill(map, index, out);
    return true;
}

void hw_jit_map_free(hw_jit_map *map)
{
    if (!map)
        return;
    free(map->entries);
    free(map->arena);
    free(map->seg_from);
    free(map->seg_entry);
    free(map);
}
