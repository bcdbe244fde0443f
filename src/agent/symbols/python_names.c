/*
 * python_names.c - CPython's frames named, after the resume
 * (python_frames.h: hw_python_name_threads, hw_python_merge).
 *
 * The stop copied each frame's code object and instruction
 * (python_frames.c); here the code objects are read (names, file, first
 * line, line table: they do not change while a process runs, so they are
 * kept for the process's next captures and checked again before each use),
 * the instruction becomes a line (core/parse/python_linetable.h, in the
 * format of the version), and each thread's Python frames are put among
 * its native ones.  Before 3.11 code objects have no qualified name: the
 * function's name is all there is.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/parse/python_linetable.h"
#include "core/text_bits.h"
#include "python_internal.h"

#define MAX_CACHED_CODES 4096 /* per process; a full table starts again empty */
#define EVAL_FUNCTION "_PyEval_EvalFrameDefault"

/* Sample keys (frame.h's runtime keys): bit 63 (never set in a user-space
 * address), the code object (8-byte aligned, below 2^47) in bits 19-62, the
 * instruction index in bits 0-18. */
#define KEY_TAG HW_RUNTIME_KEY_TAG
#define KEY_UNIT_BITS HW_RUNTIME_KEY_POSITION_BITS
#define KEY_CODE_LIMIT (1ull << 47)

/* ---- naming code objects, after the resume -------------------------------- */

hw_python_namer *hw_python_namer_new(const hw_python_target *py, pid_t pid)
{
    if (py == NULL || !py->readable)
        return NULL;
    hw_python_namer *n = calloc(1, sizeof *n);
    if (n == NULL)
        return NULL;
    n->py = *py;
    n->pid = pid;
    n->read_per_naming = n->read_left = MAX_LINETABLE_READ_PER_NAMING;
    return n;
}

void hw_python_namer_names_only(hw_python_namer *n)
{
    if (n != NULL)
        n->read_per_naming = n->read_left = 0;
}

static void code_info_clear(code_info *c)
{
    free(c->name);
    free(c->file);
    free(c->linetable);
    memset(c, 0, sizeof *c);
}

size_t hw_python_namer_bytes(const hw_python_namer *n)
{
    return n == NULL ? 0 : sizeof *n + n->cap * sizeof *n->slots + n->cached_bytes;
}

void hw_python_namer_free(hw_python_namer *n)
{
    if (n == NULL)
        return;
    for (size_t i = 0; i < n->cap; i++)
        code_info_clear(&n->slots[i]);
    code_info_clear(&n->scratch);
    free(n->slots);
    free(n);
}

char *hw_python_read_str(const hw_python_namer *n, uint64_t addr)
{
    const hw_python_layout *L = &n->py.layout;
    unsigned char head[MAX_STRUCT_READ];
    if (L->compact_size > sizeof head || !hw_py_peek(n->pid, addr, head, L->compact_size))
        return NULL;
    if (hw_py_u64(head, L->object_type) != n->py.unicode_type)
        return NULL;
    int64_t length = (int64_t)hw_py_u64(head, L->unicode_length);
    uint32_t state = hw_py_u32(head, L->unicode_state);
    unsigned kind = (state >> L->unicode_kind_shift) & 7;
    bool compact = (state >> L->unicode_compact_bit) & 1, ascii = (state >> L->unicode_ascii_bit) & 1;
    if (length < 0 || !compact || (kind != 1 && kind != 2 && kind != 4))
        return NULL;
    size_t chars = (size_t)length < MAX_NAME_CHARS ? (size_t)length : MAX_NAME_CHARS;
    size_t units_bytes = chars * (ascii ? 1 : kind);
    unsigned char *raw = malloc(units_bytes + 1);
    char *text = malloc(chars * 4 + 1);
    if (raw == NULL || text == NULL ||
        (units_bytes > 0 && !hw_py_peek(n->pid, addr + (ascii ? L->ascii_size : L->compact_size), raw, units_bytes))) {
        free(raw);
        free(text);
        return NULL;
    }
    char *p = text;
    for (size_t i = 0; i < chars; i++) {
        uint32_t c;
        if (ascii || kind == 1) {
            c = raw[i];
            if (ascii && c >= 0x80)
                c = 0xfffd; /* the object says ASCII: it is not */
        } else if (kind == 2) {
            uint16_t u;
            memcpy(&u, raw + 2 * i, 2);
            c = u;
        } else {
            memcpy(&c, raw + 4 * i, 4);
            if (c > 0x10ffff)
                c = 0xfffd;
        }
        hw_put_utf8(&p, c);
    }
    *p = '\0';
    free(raw);
    return text;
}

/* A line table (a bytes object), within what this naming may still read:
 * `*cut` when it is one, but would pass that. */
static uint8_t *read_bytes(hw_python_namer *n, uint64_t addr, size_t *len, bool *cut)
{
    const hw_python_layout *L = &n->py.layout;
    unsigned char head[MAX_STRUCT_READ];
    *len = 0;
    *cut = false;
    if (L->bytes_sval > sizeof head || !hw_py_peek(n->pid, addr, head, L->bytes_sval))
        return NULL;
    if (hw_py_u64(head, L->object_type) != n->py.bytes_type)
        return NULL;
    int64_t size = (int64_t)hw_py_u64(head, L->var_object_size);
    if (size <= 0 || size > (int64_t)MAX_LINETABLE_BYTES)
        return NULL;
    if ((size_t)size > n->read_left) {
        *cut = true;
        return NULL;
    }
    n->read_left -= (size_t)size;
    uint8_t *data = malloc((size_t)size);
    if (data == NULL || !hw_py_peek(n->pid, addr + L->bytes_sval, data, (size_t)size)) {
        free(data);
        return NULL;
    }
    *len = (size_t)size;
    return data;
}

/* How many bytes of a code object are read: up to its last field used. */
static uint32_t code_head_bytes(const hw_python_layout *L)
{
    const uint32_t fields[] = {L->object_type, L->code_filename, L->code_name, L->code_qualname,
                               L->code_linetable, L->code_firstlineno, L->code_firsttraceable};
    uint32_t len = 0;
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (hw_py_has(fields[i]) && fields[i] > len)
            len = fields[i];
    return len + 8;
}

/* The code object's fixed part, if `addr` holds a code object. */
static bool read_code_head(const hw_python_namer *n, uint64_t addr, unsigned char *buf)
{
    const hw_python_layout *L = &n->py.layout;
    uint32_t len = code_head_bytes(L);
    return (addr & 7) == 0 && len <= MAX_STRUCT_READ && hw_py_peek(n->pid, addr, buf, len) &&
           hw_py_u64(buf, L->object_type) == n->py.code_type;
}

/* A field that holds a pointer, or 0 when the version has no such field. */
static uint64_t pointer_field(const unsigned char *buf, uint32_t field)
{
    return hw_py_has(field) ? hw_py_u64(buf, field) : 0;
}

/* Does the code object kept as `c` still look the same (same name, file
 * and line table objects, same first line)? */
static bool same_code(const hw_python_namer *n, const code_info *c, const unsigned char *buf)
{
    const hw_python_layout *L = &n->py.layout;
    int32_t first_line;
    memcpy(&first_line, buf + L->code_firstlineno, sizeof first_line);
    return c->valid && c->qualname_ptr == pointer_field(buf, L->code_qualname) &&
           c->filename_ptr == hw_py_u64(buf, L->code_filename) && c->linetable_ptr == hw_py_u64(buf, L->code_linetable) &&
           c->first_line == first_line;
}

static void read_code(hw_python_namer *n, uint64_t addr, const unsigned char *buf, code_info *c)
{
    const hw_python_layout *L = &n->py.layout;
    c->addr = addr;
    c->valid = true;
    c->qualname_ptr = pointer_field(buf, L->code_qualname);
    c->filename_ptr = hw_py_u64(buf, L->code_filename);
    c->linetable_ptr = hw_py_u64(buf, L->code_linetable);
    c->name = hw_python_read_str(n, c->qualname_ptr);
    if (c->name == NULL)
        c->name = hw_python_read_str(n, hw_py_u64(buf, L->code_name));
    c->file = hw_python_read_str(n, c->filename_ptr);
    int32_t first_line;
    memcpy(&first_line, buf + L->code_firstlineno, sizeof first_line);
    c->first_line = first_line;
    c->first_traceable = hw_py_has(L->code_firsttraceable) ? hw_py_u32(buf, L->code_firsttraceable) : 0;
    c->linetable = read_bytes(n, c->linetable_ptr, &c->linetable_len, &c->linetable_cut);
    c->bytes = c->linetable_len + (c->name ? strlen(c->name) + 1 : 0) + (c->file ? strlen(c->file) + 1 : 0);
}

static size_t slot_of(uint64_t addr, size_t cap)
{
    addr ^= addr >> 29;
    addr *= 0xbf58476d1ce4e5b9ull;
    addr ^= addr >> 32;
    return (size_t)addr & (cap - 1);
}

static bool grow(hw_python_namer *n)
{
    size_t ncap = n->cap ? n->cap * 2 : 256;
    if (ncap > MAX_CACHED_CODES * 2)
        return false;
    code_info *slots = calloc(ncap, sizeof *slots);
    if (slots == NULL)
        return false;
    for (size_t i = 0; i < n->cap; i++) {
        if (n->slots[i].addr == 0)
            continue;
        size_t j = slot_of(n->slots[i].addr, ncap);
        while (slots[j].addr != 0)
            j = (j + 1) & (ncap - 1);
        slots[j] = n->slots[i];
    }
    free(n->slots);
    n->slots = slots;
    n->cap = ncap;
    return true;
}

/* The names of the code object at `addr`: kept ones if the object there
 * still matches them (or can no longer be read: the process is gone), else
 * read now.  An address that holds no code object gives an invalid entry. */
static const code_info *code_at(hw_python_namer *n, uint64_t addr)
{
    unsigned char buf[MAX_STRUCT_READ];
    bool readable = read_code_head(n, addr, buf);
    code_info *c;
    if ((n->used * 2 >= n->cap && !grow(n) && n->used >= MAX_CACHED_CODES) ||
        n->cached_bytes > MAX_CACHED_CODE_BYTES - MAX_LINETABLE_BYTES) {
        /* Full: forget everything (bounded memory), keep going. */
        for (size_t i = 0; i < n->cap; i++)
            code_info_clear(&n->slots[i]);
        n->used = 0;
        n->cached_bytes = 0;
    }
    if (n->used * 2 >= n->cap) {
        c = &n->scratch; /* no memory for a table */
        code_info_clear(c);
    } else {
        size_t j = slot_of(addr, n->cap);
        while (n->slots[j].addr != 0 && n->slots[j].addr != addr)
            j = (j + 1) & (n->cap - 1);
        c = &n->slots[j];
        if (c->addr == addr && (!readable || (same_code(n, c, buf) && !(c->linetable_cut && n->read_left > 0))))
            return c;
        if (c->addr == 0)
            n->used++;
        n->cached_bytes -= c->bytes;
        code_info_clear(c);
    }
    c->addr = addr;
    if (readable)
        read_code(n, addr, buf, c);
    if (c != &n->scratch)
        n->cached_bytes += c->bytes;
    return c;
}

bool hw_python_code_names(hw_python_namer *n, uint64_t code, const char **name, const char **file)
{
    const code_info *c = code_at(n, code);
    if (!c->valid)
        return false;
    *name = c->name;
    *file = c->file;
    return true;
}

/* ---- frames ------------------------------------------------------------- */

static uint64_t make_key(uint64_t code, uint64_t unit)
{
    if (code == 0 || (code & 7) != 0 || code >= KEY_CODE_LIMIT || unit >= (1ull << KEY_UNIT_BITS))
        return 0;
    return KEY_TAG | (code >> 3) << KEY_UNIT_BITS | unit;
}

bool hw_python_key_is_python(uint64_t key)
{
    return (key & KEY_TAG) != 0;
}

/* Where a frame is in its code: the code unit of its current instruction,
 * and whether it has begun (false: it is being set up). */
typedef struct code_position {
    uint64_t unit;
    bool started;
} code_position;

static code_position position_of(const hw_python_layout *L, uint64_t code, uint64_t instr)
{
    code_position p = {0, false};
    if (L->frames == HW_PY_FRAME_OBJECTS) {
        int64_t lasti = (int64_t)instr; /* f_lasti: -1 before the first instruction */
        if (lasti >= 0) {
            p.unit = (uint64_t)lasti / (L->instr_in_bytes ? L->code_unit_size : 1);
            p.started = true;
        }
        return p;
    }
    uint64_t base = code + L->code_code_adaptive;
    if (instr >= base) {
        p.unit = (instr - base) / L->code_unit_size;
        p.started = true;
    }
    return p;
}

/* Fill `out` for code object `code` at position `at`.  False when the
 * frame is not worth showing: set up but not started yet (Python's own
 * tracebacks leave such frames out), which `owned_by_generator` exempts. */
static bool python_frame(hw_python_namer *n, uint64_t code, code_position at, uint64_t instr, bool owned_by_generator,
                         hw_frame *out, bool *unreadable)
{
    const hw_python_layout *L = &n->py.layout;
    const code_info *c = code_at(n, code);
    memset(out, 0, sizeof *out);
    out->language = HW_LANG_PYTHON;
    out->instruction_addr = instr;
    out->runtime_key = make_key(code, at.unit);
    if (!c->valid) {
        if (unreadable)
            *unreadable = true;
        out->symbol_name = strdup("?");
        return out->symbol_name != NULL;
    }
    bool incomplete = L->frames == HW_PY_INTERPRETER_FRAMES && (!at.started || at.unit < c->first_traceable);
    if (!owned_by_generator && incomplete)
        return false;
    out->symbol_name = strdup(c->name ? c->name : "?");
    out->source_file = c->file ? strdup(c->file) : NULL;
    if (c->linetable_cut)
        n->lines_cut++;
    int line = !at.started || c->linetable_cut
                   ? c->first_line
                   : hw_python_line_at((hw_python_lines)L->lines, c->linetable, c->linetable_len, c->first_line,
                                       (size_t)at.unit);
    out->source_line = line > 0 ? line : 0;
    return out->symbol_name != NULL;
}

int hw_python_frame_from_key(hw_python_namer *n, uint64_t key, hw_frame *out)
{
    memset(out, 0, sizeof *out);
    if (n == NULL || !hw_python_key_is_python(key))
        return -1;
    uint64_t code = ((key & ~KEY_TAG) >> KEY_UNIT_BITS) << 3;
    code_position at = {key & ((1ull << KEY_UNIT_BITS) - 1), true};
    if (!python_frame(n, code, at, 0, true, out, NULL))
        return -1;
    out->runtime_key = key;
    return 0;
}

/* A native frame of the evaluation function: by its name (".cold" parts
 * too), or, when frames are not named (the sampler's symbolizer tells
 * functions apart by their unwind entries only), by its start. */
static bool is_eval_frame(const hw_frame *f, uint64_t eval_function)
{
    if (f->language != HW_LANG_NATIVE)
        return false;
    if (f->symbol_name == NULL)
        return eval_function != 0 && f->symbol_addr == eval_function;
    size_t len = strlen(EVAL_FUNCTION);
    return strncmp(f->symbol_name, EVAL_FUNCTION, len) == 0 &&
           (f->symbol_name[len] == '\0' || f->symbol_name[len] == '.');
}

hw_runtime_names *hw_python_name_threads(hw_python_namer *n, const hw_process_snapshot *snap, bool target_only)
{
    if (n == NULL || snap == NULL || snap->thread_count == 0)
        return NULL;
    const hw_python_layout *L = &n->py.layout;
    hw_runtime_names *all = calloc(snap->thread_count, sizeof *all);
    if (all == NULL)
        return NULL;
    n->read_left = n->read_per_naming;
    for (size_t t = 0; t < snap->thread_count; t++) {
        const hw_interp_stack *st = &snap->threads[t].interp;
        hw_runtime_names *out = &all[t];
        out->runtime = HW_LANG_PYTHON;
        out->eval_function = n->py.eval_function;
        if (!st->present || (target_only && !snap->threads[t].is_target))
            continue;
        unsigned count = st->count;
        out->problem = st->error;
        /* A chain that comes back to a frame it passed loops: keep what
         * came before the repeat. */
        for (unsigned i = 1; i < count; i++)
            for (unsigned j = 0; j < i; j++)
                if (st->frames[i].frame_addr == st->frames[j].frame_addr) {
                    count = i;
                    out->problem = "the frame chain loops";
                    break;
                }
        if (st->truncated && out->problem == NULL)
            out->problem = "more Python frames than hangwatch reads: the outermost are left out";
        if (count == 0)
            continue;
        out->frames = calloc(count, sizeof *out->frames);
        out->is_entry = calloc(count, sizeof *out->is_entry);
        if (out->frames == NULL || out->is_entry == NULL) {
            free(out->frames);
            free(out->is_entry);
            out->frames = NULL;
            out->is_entry = NULL;
            continue;
        }
        out->count = count;
        unsigned cut_before = n->lines_cut;
        for (unsigned i = 0; i < count; i++) {
            const hw_interp_frame *f = &st->frames[i];
            out->is_entry[i] = f->is_entry;
            bool unreadable = false;
            bool generator = hw_py_has(L->frame_owned_by_generator) && f->owner == L->frame_owned_by_generator;
            if (!python_frame(n, f->code_addr, position_of(L, f->code_addr, f->instr_addr), f->instr_addr, generator,
                              &out->frames[i], &unreadable))
                hw_frame_clear(&out->frames[i]); /* kept empty: it still ends its run */
            if (unreadable && out->problem == NULL)
                out->problem = "a frame's code object could not be read: it is shown as \"?\"";
        }
        out->lines_cut = n->lines_cut - cut_before;
        if (!target_only)
            out->thread_name = hw_python_thread_name(n, st);
    }
    return all;
}

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

static bool copy_frame(const hw_frame *from, hw_frame *to)
{
    *to = *from;
    to->symbol_name = dup_or_null(from->symbol_name);
    to->object_path = dup_or_null(from->object_path);
    to->source_file = dup_or_null(from->source_file);
    return (from->symbol_name == NULL || to->symbol_name) && (from->object_path == NULL || to->object_path) &&
           (from->source_file == NULL || to->source_file);
}

int hw_python_merge(const hw_runtime_names *names, hw_backtrace *bt)
{
    if (names == NULL || bt == NULL)
        return 0;
    const char *problem = names->problem;
    hw_frame *merged = NULL;
    size_t m = 0;
    if (names->count > 0) {
        merged = calloc(bt->count + names->count, sizeof *merged);
        if (merged == NULL)
            return -ENOMEM;
        unsigned pi = 0;
        bool ok = true;
        bool unplaced = false;
        for (size_t k = 0; k < bt->count; k++) {
            if (is_eval_frame(&bt->frames[k], names->eval_function)) {
                /* This call runs Python frames up to its entry frame. */
                while (pi < names->count) {
                    bool entry = names->is_entry[pi];
                    if (names->frames[pi].symbol_name != NULL)
                        ok &= copy_frame(&names->frames[pi], &merged[m++]);
                    pi++;
                    if (entry)
                        break;
                }
            }
            merged[m++] = bt->frames[k];
        }
        for (; pi < names->count; pi++)
            if (names->frames[pi].symbol_name != NULL) {
                ok &= copy_frame(&names->frames[pi], &merged[m++]);
                unplaced = true;
            }
        if (!ok) {
            for (size_t k = 0; k < m; k++)
                if (merged[k].language == HW_LANG_PYTHON)
                    hw_frame_clear(&merged[k]);
            free(merged);
            return -ENOMEM;
        }
        if (unplaced && problem == NULL)
            problem = "some Python frames are placed last: the native unwind ended before their evaluation calls";
        free(bt->frames);
        bt->frames = merged;
        bt->count = m;
    }
    if (problem != NULL && bt->runtime_error == NULL)
        bt->runtime_error = strdup(problem);
    bt->runtime_lines_cut += names->lines_cut;
    if (names->thread_name != NULL && bt->runtime_thread_name == NULL)
        bt->runtime_thread_name = strdup(names->thread_name);
    return 0;
}
