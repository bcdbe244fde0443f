/*
 * js_names.c - V8's frames named after the resume (js_frames.h:
 * hw_js_name_threads; js_merge.c puts the names into the native stack).
 *
 * The stop kept each JavaScript frame's SharedFunctionInfo and code
 * address (js_walk.c).  Here, while the process most likely runs on:
 *
 *  - the function's name: SharedFunctionInfo::name_or_scope_info is the
 *    name itself (a string) until the function is compiled, then its
 *    ScopeInfo, which holds the name after the context locals (the
 *    function variable's, else the name V8 inferred, such as "obj.method"
 *    for an anonymous function assigned to a property) and then the
 *    function's start and end positions: the ScopeInfo's slots after the
 *    locals are scanned for the first string and the first pair of
 *    positions, each checked for its type.  A function not compiled yet
 *    keeps both in its UncompiledData.  No name: "(anonymous)", as V8's
 *    own stack traces say;
 *  - its script's name (Script::name: a path, a file:// URL, node:...);
 *  - the line of the function's start: the position counted in the
 *    script's line ends (Script::line_ends when V8 has computed them, else
 *    from the source, read once per script and kept);
 *  - strings of every representation V8 uses (js_strings.c).
 *
 * What is read is kept per process, by SharedFunctionInfo and by Script,
 * and checked again before each use: one read of the SharedFunctionInfo,
 * whose fields must be those the name was read from.  The garbage
 * collector moves objects; a SharedFunctionInfo that moved is read again
 * where it is now, at its next capture.
 *
 * Both are bounded (js_internal.h): what is kept, past which everything is
 * forgotten and read again, and what one naming reads of sources, line-end
 * arrays and position tables, past which a frame keeps its function's
 * first line (no line when its script's lines are not known) and is
 * counted; a cut script or table is read at a later naming.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "js_internal.h"

#define MAX_FUNCTIONS 16384 /* kept per process; a full table starts again empty */
#define MAX_SCRIPTS 2048
#define MAX_INLINED_LOCALS 75 /* V8 keeps this many context local names in the ScopeInfo itself */
#define SCOPE_SCAN_SLOTS 8    /* slots after the locals searched for the name and positions */
#define RECENT_RECEIVERS 256

typedef struct function_info {
    uint64_t shared;                /* 0: empty slot */
    uint64_t name_or_scope, script, function_data; /* the fields the name was read from */
    char *name;
    int64_t start;                  /* the function's start position, -1 unknown */
    /* its bytecode's source positions, decoded at the first interpreted
     * frame that needs them: code offsets and positions, ascending */
    uint64_t positions_of;          /* the BytecodeArray they are from, 0: not read */
    bool positions_cut;             /* not read for want of budget: read at a later naming */
    uint32_t *code_offsets;
    int64_t *positions;
    size_t position_count;
} function_info;

typedef struct script_info {
    uint64_t addr, source, name_field; /* 0: empty slot */
    char *name;
    uint32_t *line_ends;            /* positions of each '\n', ascending */
    size_t line_count;
    bool lines_known;               /* line_ends were read (a script may have no newline) */
    bool lines_cut;                 /* not read for want of budget: read at a later naming */
    bool lines_unread;              /* its source changed or went while it was read: read at a later naming */
    bool lines_pending;             /* found while names were read first: lines at first use */
} script_info;

struct hw_js_namer {
    hw_js_target js;
    pid_t pid;
    function_info *functions;
    size_t function_cap, function_count;
    script_info scripts[MAX_SCRIPTS];
    size_t script_count;
    size_t cached_bytes; /* names, line ends and positions kept: past HW_JS_MAX_CACHED_BYTES, forgotten */
    size_t read_left;    /* of this naming's read_per_naming */
    size_t read_per_naming; /* HW_JS_MAX_READ_PER_NAMING, or 0 (hw_js_namer_names_only) */
    unsigned lines_cut;  /* frames named without their line for want of budget, this naming */
    unsigned lines_unread; /* frames left with no line: their script moved, changed or went meanwhile */
    bool names_first;    /* reading every frame's name before any line: scripts' lines wait */
    /* The receiver type a sample key's frame was last named with (a key
     * holds only the function and the offset). */
    struct {
        uint64_t key, receiver_class;
    } receivers[RECENT_RECEIVERS];
};

/* ---- scripts and lines -------------------------------------------------- */

typedef struct newline_scan {
    uint32_t *ends;
    size_t count, cap;
    uint64_t position;
} newline_scan;

static bool note_newlines(void *ctx, const unsigned char *data, size_t units, bool two_byte)
{
    newline_scan *s = ctx;
    for (size_t i = 0; i < units; i++, s->position++) {
        bool nl = two_byte ? data[2 * i] == '\n' && data[2 * i + 1] == 0 : data[i] == '\n';
        if (!nl)
            continue;
        if (s->count == s->cap) {
            size_t cap = s->cap ? s->cap * 2 : 256;
            if (cap > HW_JS_MAX_LINE_ENDS)
                return false;
            uint32_t *e = realloc(s->ends, cap * sizeof *e);
            if (e == NULL)
                return false;
            s->ends = e;
            s->cap = cap;
        }
        s->ends[s->count++] = (uint32_t)s->position;
    }
    return true;
}

/* Take `bytes` from this naming's read budget: false, and the budget
 * kept, when they would pass it. */
static bool take_read(hw_js_namer *n, uint64_t bytes)
{
    if (bytes > n->read_left)
        return false;
    n->read_left -= (size_t)bytes;
    return true;
}

/* Script::line_ends as V8 computed them (a FixedArray of Smis), into s:
 * 1 read, 0 none there (or not sane), -1 past this naming's budget. */
static int line_ends_of_array(hw_js_namer *n, uint64_t array, script_info *s)
{
    const hw_js_layout *L = &n->js.layout;
    uint16_t type;
    uint64_t length_word;
    if (!hw_js_instance_type(n->pid, L, array, &type, NULL) || type != L->type_fixed_array ||
        !hw_js_peek(n->pid, hw_js_field(L, array, L->fixed_array_length), &length_word, sizeof length_word) ||
        !hw_js_is_smi(L, length_word))
        return 0;
    int64_t count = hw_js_smi_value(L, length_word);
    if (count < 0 || count > HW_JS_MAX_LINE_ENDS)
        return 0;
    if (!take_read(n, (uint64_t)count * 8))
        return -1;
    uint64_t *words = malloc((size_t)(count ? count : 1) * sizeof *words);
    uint32_t *ends = malloc((size_t)(count ? count : 1) * sizeof *ends);
    bool ok = words != NULL && ends != NULL &&
              (count == 0 ||
               hw_js_peek(n->pid, hw_js_field(L, array, L->fixed_array_data), words, (size_t)count * 8));
    for (int64_t i = 0; ok && i < count; i++) {
        int64_t v = hw_js_smi_value(L, words[i]);
        ok = hw_js_is_smi(L, words[i]) && v >= 0 && v <= UINT32_MAX && (i == 0 || (uint32_t)v > ends[i - 1]);
        if (ok)
            ends[i] = (uint32_t)v;
    }
    free(words);
    if (!ok) {
        free(ends);
        return 0;
    }
    s->line_ends = ends;
    s->line_count = (size_t)count;
    return 1;
}

/* The script's line ends: V8's own array when it made one, else counted
 * in the source; within this naming's budget, else s->lines_cut. */
static void find_lines(hw_js_namer *n, script_info *s, uint64_t line_ends_field)
{
    const hw_js_layout *L = &n->js.layout;
    int from_array = line_ends_of_array(n, line_ends_field, s);
    s->lines_cut = from_array < 0;
    s->lines_known = from_array > 0;
    s->lines_unread = false;
    if (from_array != 0) {
        n->cached_bytes += s->line_count * sizeof *s->line_ends;
        return;
    }
    hw_js_string_head h;
    if (!hw_js_read_string_head(n->pid, L, s->source, &h) || (uint64_t)h.length > HW_JS_MAX_SOURCE_BYTES)
        return;
    bool two_byte = (h.type & L->string_encoding_mask) != L->one_byte_tag;
    if (!take_read(n, (uint64_t)h.length * (two_byte ? 2 : 1))) {
        s->lines_cut = true;
        return;
    }
    newline_scan scan = {0};
    if (hw_js_visit_string(n->pid, L, s->source, 0, (uint64_t)h.length, note_newlines, &scan, 0)) {
        /* kept at its size: what is counted is what is held */
        if (scan.count == 0) {
            free(scan.ends);
            scan.ends = NULL;
        } else {
            uint32_t *fit = realloc(scan.ends, scan.count * sizeof *fit);
            if (fit != NULL)
                scan.ends = fit;
        }
        s->line_ends = scan.ends;
        s->line_count = scan.count;
        s->lines_known = true;
        n->cached_bytes += scan.count * sizeof *scan.ends;
    } else {
        free(scan.ends);
        s->lines_unread = true;
    }
}

static void script_clear(hw_js_namer *n, script_info *s)
{
    n->cached_bytes -= (s->name ? strlen(s->name) + 1 : 0) + s->line_count * sizeof *s->line_ends;
    free(s->name);
    free(s->line_ends);
    memset(s, 0, sizeof *s);
}

static void forget_scripts(hw_js_namer *n)
{
    for (size_t i = 0; i < n->script_count; i++)
        script_clear(n, &n->scripts[i]);
    n->script_count = 0;
}

static script_info *script_at(hw_js_namer *n, uint64_t script)
{
    const hw_js_layout *L = &n->js.layout;
    uint16_t type;
    unsigned char head[HW_JS_MAX_OBJECT_READ];
    size_t need = (size_t)L->script_line_ends + 8;
    if ((size_t)L->script_source + 8 > need)
        need = (size_t)L->script_source + 8;
    if ((size_t)L->script_name + 8 > need)
        need = (size_t)L->script_name + 8;
    if (!hw_js_instance_type(n->pid, L, script, &type, NULL) || type != L->type_script ||
        !hw_js_peek(n->pid, hw_js_field(L, script, 0), head, need))
        return NULL;
    uint64_t source = hw_js_u64(head, L->script_source), name = hw_js_u64(head, L->script_name);
    for (size_t i = 0; i < n->script_count; i++) {
        script_info *s = &n->scripts[i];
        if (s->addr != script || s->source != source || s->name_field != name)
            continue;
        if (!n->names_first && (s->lines_pending || ((s->lines_cut || s->lines_unread) && n->read_left > 0))) {
            s->lines_pending = false;
            find_lines(n, s, hw_js_u64(head, L->script_line_ends));
        }
        return s;
    }
    if (n->script_count == MAX_SCRIPTS)
        forget_scripts(n);
    script_info *s = &n->scripts[n->script_count++];
    *s = (script_info){.addr = script, .source = source, .name_field = name};
    s->name = hw_js_read_name(n->pid, L, name); /* undefined for code made by eval: no name */
    n->cached_bytes += s->name ? strlen(s->name) + 1 : 0;
    if (n->names_first)
        s->lines_pending = true;
    else
        find_lines(n, s, hw_js_u64(head, L->script_line_ends));
    return s;
}

static int line_of(const script_info *s, int64_t position)
{
    if (s == NULL || !s->lines_known || position < 0)
        return 0;
    size_t lo = 0, hi = s->line_count; /* lines whose end lies before `position` */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if ((int64_t)s->line_ends[mid] < position)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (int)lo + 1;
}

/* ---- functions ---------------------------------------------------------- */

/* The name and start position a ScopeInfo holds after its context locals. */
static void scan_scope_info(const hw_js_namer *n, uint64_t scope, char **name, int64_t *start)
{
    const hw_js_layout *L = &n->js.layout;
    uint64_t count_word;
    /* Slot i of a ScopeInfo lies after its map, 8 bytes each. */
    uint64_t slots = hw_js_field(L, scope, L->map + 8);
    if (!hw_js_peek(n->pid, slots + 8 * (uint64_t)L->scope_info_context_locals, &count_word, sizeof count_word) ||
        !hw_js_is_smi(L, count_word))
        return;
    int64_t locals = hw_js_smi_value(L, count_word);
    if (locals < 0 || locals > 100000)
        return;
    int64_t first = L->scope_info_first_vars + (locals < MAX_INLINED_LOCALS ? 2 * locals : 1 + locals);
    uint64_t words[SCOPE_SCAN_SLOTS];
    if (!hw_js_peek(n->pid, slots + 8 * (uint64_t)first, words, sizeof words))
        return;
    int run = 0;
    for (int i = 0; i < SCOPE_SCAN_SLOTS; i++) {
        if (hw_js_is_smi(L, words[i])) {
            /* Positions are the last two Smis of the first run of two or
             * more (a function variable's slot index may come first). */
            run++;
            if (run >= 2 && *start < 0) {
                int64_t a = hw_js_smi_value(L, words[i - 1]), b = hw_js_smi_value(L, words[i]);
                bool more = i + 1 < SCOPE_SCAN_SLOTS && hw_js_is_smi(L, words[i + 1]);
                if (!more && a >= 0 && b > a)
                    *start = a;
            }
            continue;
        }
        if (run >= 2)
            break; /* past the positions: the outer scope and beyond */
        run = 0;
        uint16_t type;
        if (*name == NULL && hw_js_instance_type(n->pid, L, words[i], &type, NULL) && type < L->first_nonstring) {
            char *s = hw_js_read_name(n->pid, L, words[i]);
            if (s != NULL && s[0] == '\0')
                free(s);
            else
                *name = s;
        }
    }
}

static void read_function(const hw_js_namer *n, function_info *f)
{
    const hw_js_layout *L = &n->js.layout;
    f->name = NULL;
    f->start = -1;
    uint16_t type;
    if (hw_js_instance_type(n->pid, L, f->name_or_scope, &type, NULL)) {
        if (type < L->first_nonstring) {
            f->name = hw_js_read_name(n->pid, L, f->name_or_scope);
        } else if (type == L->type_scope_info) {
            scan_scope_info(n, f->name_or_scope, &f->name, &f->start);
        }
    }
    /* Not compiled yet: UncompiledData has the inferred name and the start. */
    if (hw_js_instance_type(n->pid, L, f->function_data, &type, NULL) && type >= L->type_uncompiled_first &&
        type <= L->type_uncompiled_last) {
        int32_t start;
        uint64_t inferred;
        if (f->start < 0 &&
            hw_js_peek(n->pid, hw_js_field(L, f->function_data, L->uncompiled_start), &start, sizeof start) &&
            start >= 0)
            f->start = start;
        if ((f->name == NULL || f->name[0] == '\0') &&
            hw_js_peek(n->pid, hw_js_field(L, f->function_data, L->uncompiled_inferred_name), &inferred,
                       sizeof inferred)) {
            char *s = hw_js_read_name(n->pid, L, inferred);
            if (s != NULL && s[0] != '\0') {
                free(f->name);
                f->name = s;
            } else {
                free(s);
            }
        }
    }
    if (f->name != NULL && f->name[0] == '\0') {
        free(f->name);
        f->name = NULL;
    }
}

static size_t slot_of(uint64_t addr, size_t cap)
{
    uint64_t h = (addr >> 3) * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 20) & (cap - 1);
}

static size_t position_bytes(const function_info *f)
{
    return f->position_count * (sizeof *f->code_offsets + sizeof *f->positions);
}

static void forget_positions(hw_js_namer *n, function_info *f)
{
    n->cached_bytes -= position_bytes(f);
    free(f->code_offsets);
    free(f->positions);
    f->code_offsets = NULL;
    f->positions = NULL;
    f->position_count = 0;
}

static void function_info_clear(hw_js_namer *n, function_info *f)
{
    n->cached_bytes -= f->name ? strlen(f->name) + 1 : 0;
    free(f->name);
    forget_positions(n, f);
}

static void forget_functions(hw_js_namer *n)
{
    for (size_t i = 0; i < n->function_cap; i++)
        function_info_clear(n, &n->functions[i]);
    if (n->functions != NULL)
        memset(n->functions, 0, n->function_cap * sizeof *n->functions);
    n->function_count = 0;
}

static bool grow_functions(hw_js_namer *n)
{
    if (n->function_cap >= MAX_FUNCTIONS) {
        forget_functions(n);
        return true;
    }
    size_t cap = n->function_cap ? n->function_cap * 2 : 256;
    function_info *t = calloc(cap, sizeof *t);
    if (t == NULL)
        return false;
    for (size_t i = 0; i < n->function_cap; i++) {
        if (n->functions[i].shared == 0)
            continue;
        size_t s = slot_of(n->functions[i].shared, cap);
        while (t[s].shared != 0)
            s = (s + 1) & (cap - 1);
        t[s] = n->functions[i];
    }
    free(n->functions);
    n->functions = t;
    n->function_cap = cap;
    return true;
}

/* The function a SharedFunctionInfo names, read now or kept; NULL when it
 * is not (any more) a SharedFunctionInfo. */
static const function_info *function_at(hw_js_namer *n, uint64_t shared, script_info **script)
{
    const hw_js_layout *L = &n->js.layout;
    unsigned char head[HW_JS_MAX_OBJECT_READ];
    size_t need = (size_t)L->shared_name_or_scope + 8;
    if ((size_t)L->shared_script + 8 > need)
        need = (size_t)L->shared_script + 8;
    if ((size_t)L->shared_function_data + 8 > need)
        need = (size_t)L->shared_function_data + 8;
    uint16_t type;
    if (!hw_js_instance_type(n->pid, L, shared, &type, NULL) || type != L->type_shared ||
        !hw_js_peek(n->pid, hw_js_field(L, shared, 0), head, need))
        return NULL;
    function_info now = {.shared = shared,
                         .name_or_scope = hw_js_u64(head, L->shared_name_or_scope),
                         .script = hw_js_u64(head, L->shared_script),
                         .function_data = hw_js_u64(head, L->shared_function_data)};
    *script = script_at(n, now.script);
    if ((n->function_count + 1) * 2 > n->function_cap && !grow_functions(n))
        return NULL;
    size_t s = slot_of(shared, n->function_cap);
    while (n->functions[s].shared != 0 && n->functions[s].shared != shared)
        s = (s + 1) & (n->function_cap - 1);
    function_info *f = &n->functions[s];
    if (f->shared == shared && f->name_or_scope == now.name_or_scope && f->script == now.script &&
        f->function_data == now.function_data)
        return f;
    if (f->shared == 0)
        n->function_count++;
    function_info_clear(n, f);
    *f = now;
    read_function(n, f);
    n->cached_bytes += f->name ? strlen(f->name) + 1 : 0;
    return f;
}

/* ---- where an interpreted frame is ----------------------------------------- */

/* One of V8's variable-length integers in a source position table: 7 bits
 * a byte, low groups first, then zigzag-decoded. */
static bool read_vlq(const unsigned char *bytes, size_t len, size_t *at, int64_t *out)
{
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        if (*at >= len)
            return false;
        unsigned char b = bytes[(*at)++];
        v |= (uint64_t)(b & 0x7f) << shift;
        if ((b & 0x80) == 0) {
            *out = (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
            return true;
        }
    }
    return false;
}

#define MAX_POSITION_BYTES (1u << 20)

/* Decode bytecode array `bytecode`'s source position table into f: entries
 * of (code offset delta, with is_statement as its sign; position delta). */
static void read_positions(hw_js_namer *n, function_info *f, uint64_t bytecode)
{
    const hw_js_layout *L = &n->js.layout;
    f->positions_of = bytecode;
    f->positions_cut = false;
    uint64_t table = 0, length_word = 0;
    uint16_t type;
    if (!hw_js_peek(n->pid, hw_js_field(L, bytecode, L->bytecode_source_positions), &table, sizeof table) ||
        !hw_js_instance_type(n->pid, L, table, &type, NULL) || type != L->type_byte_array ||
        !hw_js_peek(n->pid, hw_js_field(L, table, L->fixed_array_length), &length_word, sizeof length_word) ||
        !hw_js_is_smi(L, length_word))
        return; /* V8 collects positions lazily: none until something asked */
    int64_t len = hw_js_smi_value(L, length_word);
    if (len <= 0 || len > MAX_POSITION_BYTES)
        return;
    if (!take_read(n, (uint64_t)len)) {
        f->positions_of = 0; /* read at a later naming */
        f->positions_cut = true;
        return;
    }
    unsigned char *bytes = malloc((size_t)len);
    size_t cap = (size_t)len / 2 + 1; /* an entry takes two bytes at least */
    uint32_t *offsets = malloc(cap * sizeof *offsets);
    int64_t *positions = malloc(cap * sizeof *positions);
    size_t count = 0;
    bool ok = bytes && offsets && positions &&
              hw_js_peek(n->pid, hw_js_field(L, table, L->fixed_array_data), bytes, (size_t)len);
    int64_t offset = 0, position = 0;
    for (size_t at = 0; ok && at < (size_t)len && count < cap;) {
        int64_t code_delta, position_delta;
        ok = read_vlq(bytes, (size_t)len, &at, &code_delta) && read_vlq(bytes, (size_t)len, &at, &position_delta);
        if (!ok)
            break;
        /* Deltas beyond any real table's end the decoding (and keep the
         * sums far from overflow). */
        int64_t code_step = code_delta >= 0 ? code_delta : -(code_delta + 1);
        ok = code_step <= UINT32_MAX && position_delta > -(INT64_C(1) << 40) && position_delta < (INT64_C(1) << 40);
        if (!ok)
            break;
        offset += code_step;
        position += position_delta;
        ok = offset <= UINT32_MAX && position > -(INT64_C(1) << 41) && position < (INT64_C(1) << 41) &&
             (count == 0 || (uint32_t)offset >= offsets[count - 1]);
        if (ok) {
            offsets[count] = (uint32_t)offset;
            positions[count++] = position;
        }
    }
    free(bytes);
    if (!ok || count == 0) {
        free(offsets);
        free(positions);
        return;
    }
    /* kept at their size: what is counted is what is held */
    uint32_t *fit_offsets = realloc(offsets, count * sizeof *offsets);
    int64_t *fit_positions = realloc(positions, count * sizeof *positions);
    f->code_offsets = fit_offsets != NULL ? fit_offsets : offsets;
    f->positions = fit_positions != NULL ? fit_positions : positions;
    f->position_count = count;
    n->cached_bytes += position_bytes(f);
}

/* The source position of bytecode offset `at` in frame `in` of function f:
 * the last entry at or before it, as V8's own stack traces take it; -1
 * when the frame's bytecode is not the function's or has no positions. */
static int64_t position_in(hw_js_namer *n, function_info *f, const hw_interp_frame *in)
{
    const hw_js_layout *L = &n->js.layout;
    f->positions_cut = false;
    if (in->aux == 0 || in->instr_addr == UINT64_MAX)
        return -1;
    bool ours = in->aux == f->function_data;
    uint16_t type;
    uint64_t bytecode = 0;
    if (!ours && hw_js_instance_type(n->pid, L, f->function_data, &type, NULL) && type == L->type_code &&
        hw_js_peek(n->pid, hw_js_field(L, f->function_data, L->code_bytecode), &bytecode, sizeof bytecode))
        ours = bytecode == in->aux; /* baseline code keeps the bytecode it was made from */
    if (!ours || !hw_js_instance_type(n->pid, L, in->aux, &type, NULL) || type != L->type_bytecode_array)
        return -1;
    if (f->positions_of != in->aux) {
        forget_positions(n, f);
        read_positions(n, f, in->aux);
    }
    int64_t found = -1;
    for (size_t i = 0; i < f->position_count && f->code_offsets[i] <= in->instr_addr; i++)
        found = f->positions[i];
    /* A SourcePosition: bit 0 clear for a script offset, which bits 1-30
     * hold plus one (the inlining id is above; 0 for bytecode). */
    if (found < 0 || (found & 1) != 0)
        return -1;
    return ((found >> 1) & 0x3fffffff) - 1;
}

/* ---- the namer ---------------------------------------------------------- */

hw_js_namer *hw_js_namer_new(const hw_js_target *js, pid_t pid)
{
    if (js == NULL || !js->readable)
        return NULL;
    hw_js_namer *n = calloc(1, sizeof *n);
    if (n == NULL)
        return NULL;
    n->js = *js;
    n->pid = pid;
    n->read_per_naming = n->read_left = HW_JS_MAX_READ_PER_NAMING;
    return n;
}

void hw_js_namer_names_only(hw_js_namer *n)
{
    if (n != NULL)
        n->read_per_naming = n->read_left = 0;
}

size_t hw_js_namer_bytes(const hw_js_namer *n)
{
    return n == NULL ? 0 : sizeof *n + n->function_cap * sizeof *n->functions + n->cached_bytes;
}

void hw_js_namer_free(hw_js_namer *n)
{
    if (n == NULL)
        return;
    forget_functions(n);
    free(n->functions);
    forget_scripts(n);
    free(n);
}

/* "Type.name" for a method call, as V8's stack traces write it: the type
 * is left out when the name already starts with it. */
static char *method_name(const char *type, const char *name)
{
    char *s = NULL;
    size_t tl = type ? strlen(type) : 0;
    if (tl == 0 || (name != NULL && strncmp(name, type, tl) == 0))
        return strdup(name ? name : "(anonymous)");
    if (asprintf(&s, "%s.%s", type, name ? name : "<anonymous>") < 0)
        return NULL;
    return s;
}

/* A frame's identity in a sample (frame.h's runtime keys): the
 * SharedFunctionInfo (untagged, 8-byte aligned, below 2^47) and the
 * bytecode offset, all ones when there is none. */
#define KEY_UNIT_BITS HW_RUNTIME_KEY_POSITION_BITS
#define KEY_NO_OFFSET ((1ull << KEY_UNIT_BITS) - 1)

static uint64_t make_key(const hw_js_layout *L, const hw_interp_frame *in)
{
    uint64_t shared = in->code_addr - L->heap_object_tag;
    if ((shared & 7) != 0 || shared >= (1ull << 47))
        return 0;
    uint64_t unit = in->instr_addr < KEY_NO_OFFSET ? in->instr_addr : KEY_NO_OFFSET;
    return HW_RUNTIME_KEY_TAG | (shared >> 3) << KEY_UNIT_BITS | unit;
}

static bool name_frame(hw_js_namer *n, const hw_interp_frame *in, hw_frame *out);

int hw_js_frame_from_key(hw_js_namer *n, uint64_t key, hw_frame *out)
{
    if (n == NULL || (key & HW_RUNTIME_KEY_TAG) == 0)
        return -1;
    const hw_js_layout *L = &n->js.layout;
    hw_interp_frame in = {.code_addr = ((key & ~HW_RUNTIME_KEY_TAG) >> KEY_UNIT_BITS) << 3 | L->heap_object_tag,
                          .instr_addr = (key & KEY_NO_OFFSET) == KEY_NO_OFFSET ? UINT64_MAX : key & KEY_NO_OFFSET};
    size_t slot = (size_t)(key * 0x9e3779b97f4a7c15ull >> 56) % RECENT_RECEIVERS;
    if (n->receivers[slot].key == key)
        in.receiver_class = n->receivers[slot].receiver_class;
    /* The bytecode is the function's own, if it still has it. */
    uint64_t data = 0;
    if (in.instr_addr != UINT64_MAX &&
        hw_js_peek(n->pid, hw_js_field(L, in.code_addr, L->shared_function_data), &data, sizeof data))
        in.aux = data;
    if (!name_frame(n, &in, out) || out->symbol_name == NULL) {
        hw_frame_clear(out);
        return -1;
    }
    out->instruction_addr = 0;
    out->runtime_key = key;
    return 0;
}

/* What the name of a frame leaves for its line (name_line). */
typedef struct frame_found {
    uint64_t script; /* the Script its function was read with, 0: none (no line) */
    int64_t start;   /* its function's start position, -1 unknown */
    unsigned from;   /* hw_js_name_threads: the captured frame it names */
} frame_found;

/* The function a frame is in, kept or read now (its name, its script's
 * name). */
static bool name_function(hw_js_namer *n, const hw_interp_frame *in, hw_frame *out, frame_found *found)
{
    memset(out, 0, sizeof *out);
    *found = (frame_found){.script = 0, .start = -1, .from = 0};
    out->instruction_addr = in->pc;
    out->language = HW_LANG_JAVASCRIPT;
    out->runtime_key = make_key(&n->js.layout, in);
    if (out->runtime_key != 0 && in->receiver_class != 0) {
        size_t slot = (size_t)(out->runtime_key * 0x9e3779b97f4a7c15ull >> 56) % RECENT_RECEIVERS;
        n->receivers[slot].key = out->runtime_key;
        n->receivers[slot].receiver_class = in->receiver_class;
    }
    if (n->cached_bytes >= HW_JS_MAX_CACHED_BYTES) {
        /* Full: forget everything (bounded memory), keep going.  One
         * frame adds at most two scripts' line ends and a table's
         * positions before the next look. */
        forget_functions(n);
        forget_scripts(n);
    }
    script_info *script = NULL;
    char *type = NULL;
    if (in->receiver_class != 0) {
        const function_info *c = function_at(n, in->receiver_class, &script);
        type = c != NULL && c->name != NULL ? strdup(c->name) : NULL;
    }
    function_info *f = (function_info *)function_at(n, in->code_addr, &script);
    if (f == NULL) {
        free(type);
        out->symbol_name = strdup("?");
        return out->symbol_name != NULL;
    }
    if (f->name == NULL && (script == NULL || script->name == NULL)) {
        /* V8's own machinery (an await's resumption, say): its native
         * frame keeps its name, as V8's stack traces leave it out. */
        free(type);
        return true;
    }
    out->symbol_name = method_name(type, f->name);
    free(type);
    if (script != NULL && script->name != NULL) {
        out->source_file = strdup(script->name);
        found->script = script->addr;
        found->start = f->start;
    }
    return out->symbol_name != NULL;
}

/* The function kept for SharedFunctionInfo `shared`, not read again. */
static function_info *function_kept(hw_js_namer *n, uint64_t shared)
{
    for (size_t s = n->function_cap ? slot_of(shared, n->function_cap) : 0;
         n->function_cap != 0 && n->functions[s].shared != 0; s = (s + 1) & (n->function_cap - 1))
        if (n->functions[s].shared == shared)
            return &n->functions[s];
    return NULL;
}

/* The line of a frame whose function name_function found: its script's
 * lines (read now if they were left for later), its bytecode's position. */
static void name_line(hw_js_namer *n, const hw_interp_frame *in, hw_frame *out, const frame_found *found)
{
    if (found->script == 0)
        return;
    if (n->cached_bytes >= HW_JS_MAX_CACHED_BYTES) {
        forget_functions(n);
        forget_scripts(n);
    }
    script_info *script = script_at(n, found->script); /* NULL if it moved since */
    function_info *f = function_kept(n, in->code_addr);
    int64_t at = f != NULL ? position_in(n, f, in) : -1;
    out->source_line = line_of(script, at >= 0 ? at : found->start);
    out->line_is_function_start = at < 0 && out->source_line > 0;
    if ((script != NULL && script->lines_cut) || (f != NULL && f->positions_cut))
        n->lines_cut++;
    else if (script == NULL || (script->lines_unread && !script->lines_known))
        n->lines_unread++;
}

static bool name_frame(hw_js_namer *n, const hw_interp_frame *in, hw_frame *out)
{
    frame_found found;
    if (!name_function(n, in, out, &found))
        return false;
    name_line(n, in, out, &found);
    return true;
}

/* Every frame's function is read before any frame's line: a line may need
 * a script's source counted (up to megabytes), while the process runs on
 * and its garbage collector moves the functions the stop found (a node
 * 100 frames deep in scripts of a million lines had its outer 85 frames
 * shown as "?" when each frame's line was read before the next frame's
 * name). */
hw_runtime_names *hw_js_name_threads(hw_js_namer *n, const hw_process_snapshot *snap, bool target_only)
{
    if (n == NULL || snap == NULL || snap->thread_count == 0)
        return NULL;
    hw_runtime_names *all = calloc(snap->thread_count, sizeof *all);
    frame_found **found = calloc(snap->thread_count, sizeof *found);
    if (all == NULL || found == NULL) {
        free(all);
        free(found);
        return NULL;
    }
    n->read_left = n->read_per_naming;
    n->names_first = true;
    for (size_t t = 0; t < snap->thread_count; t++) {
        const hw_interp_stack *st = &snap->threads[t].interp;
        hw_runtime_names *out = &all[t];
        out->runtime = HW_LANG_JAVASCRIPT;
        if (!st->present || st->count == 0 || (target_only && !snap->threads[t].is_target))
            continue;
        out->problem = st->error;
        if (st->truncated && out->problem == NULL)
            out->problem = "more JavaScript frames than hangwatch reads: the outermost are left out";
        out->frames = calloc(st->count, sizeof *out->frames);
        out->is_entry = calloc(st->count, sizeof *out->is_entry);
        found[t] = calloc(st->count, sizeof *found[t]);
        if (out->frames == NULL || out->is_entry == NULL || found[t] == NULL) {
            free(out->frames);
            free(out->is_entry);
            free(found[t]);
            out->frames = NULL;
            out->is_entry = NULL;
            found[t] = NULL;
            continue;
        }
        for (unsigned i = 0; i < st->count; i++) {
            hw_frame *f = &out->frames[out->count];
            if (!name_function(n, &st->frames[i], f, &found[t][out->count])) {
                hw_frame_clear(f);
                continue;
            }
            if (f->symbol_name != NULL && strcmp(f->symbol_name, "?") == 0 && out->problem == NULL)
                out->problem = "a JavaScript frame's function could not be read after the stop (moved by the "
                               "garbage collector, or not V8's): it is shown as \"?\"";
            found[t][out->count].from = i;
            out->count++;
        }
    }
    n->names_first = false;
    for (size_t t = 0; t < snap->thread_count; t++) {
        const hw_interp_stack *st = &snap->threads[t].interp;
        hw_runtime_names *out = &all[t];
        unsigned cut_before = n->lines_cut, unread_before = n->lines_unread;
        for (size_t k = 0; found[t] != NULL && k < out->count; k++)
            name_line(n, &st->frames[found[t][k].from], &out->frames[k], &found[t][k]);
        out->lines_cut = n->lines_cut - cut_before;
        if (n->lines_unread != unread_before && out->problem == NULL)
            out->problem = "some JavaScript frames have no line: their scripts moved, changed or were gone when "
                           "their lines were read (the process ran on after the stop, or exited)";
        free(found[t]);
    }
    free(found);
    return all;
}
