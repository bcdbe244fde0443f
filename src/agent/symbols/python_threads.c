/*
 * python_threads.c - a thread's name as Python's `threading` knows it
 * (threading.Thread(name="worker_alpha")), read after the resume.
 *
 * A thread that threading started runs Thread._bootstrap_inner (in
 * threading.py) at the bottom of its Python frames, and that frame's first
 * local is `self`, the Thread object, whose `_name` attribute is the name.
 * Finding an attribute takes the object's attributes as each version keeps
 * them (python_layout.h): an instance dict at the type's tp_dictoffset
 * (3.8-3.10); from 3.11 a dict managed by the interpreter just before the
 * object, or the bare values of a dict whose keys the type keeps for all its
 * instances (ht_cached_keys), in a pointer before the object (3.11), in a
 * word that says which it holds (3.12), or inline after the object's header
 * (3.13).  A dict's keys are read entry by entry, each key a str compared
 * with "_name".
 *
 * Everything read is the program's memory: objects' types are checked,
 * table sizes and entry counts bounded, and anything that does not fit is
 * no name rather than a wrong one.
 */
#include <stdlib.h>
#include <string.h>

#include "python_internal.h"

#define MAX_ENTRIES 256          /* entries of a dict looked through */
#define MAX_INDEX_BYTES (1u << 16)
#define ATTRIBUTE "_name"

/* A signed word of the program's memory. */
static bool peek_i64(pid_t pid, uint64_t addr, int64_t *v)
{
    return hw_py_peek(pid, addr, v, sizeof *v);
}

static bool peek_u64(pid_t pid, uint64_t addr, uint64_t *v)
{
    return hw_py_peek(pid, addr, v, sizeof *v);
}

static bool peek_u8(pid_t pid, uint64_t addr, uint8_t *v)
{
    return hw_py_peek(pid, addr, v, sizeof *v);
}

/* Is the str at `key` "_name"?  The interned "_name" found once is known by
 * its address from then on. */
static bool is_attribute(hw_python_namer *n, uint64_t key)
{
    uint64_t *known = &n->name_key;
    if (key == 0)
        return false;
    if (*known != 0)
        return key == *known;
    char *text = hw_python_read_str(n, key);
    bool match = text != NULL && strcmp(text, ATTRIBUTE) == 0;
    free(text);
    if (match)
        *known = key;
    return match;
}

/* The bytes of a keys object's index table. */
static bool index_bytes(const hw_python_layout *L, pid_t pid, uint64_t keys, uint64_t *bytes)
{
    if (hw_py_has(L->keys_log2_index_bytes)) {
        uint8_t log2 = 0;
        if (!peek_u8(pid, keys + L->keys_log2_index_bytes, &log2) || log2 > 16)
            return false;
        *bytes = 1ull << log2;
        return *bytes <= MAX_INDEX_BYTES;
    }
    int64_t size = 0;
    if (!hw_py_has(L->keys_size) || !peek_i64(pid, keys + L->keys_size, &size) || size <= 0 ||
        (uint64_t)size > MAX_INDEX_BYTES)
        return false;
    uint64_t width = size <= 0xff ? 1 : size <= 0xffff ? 2 : 4;
    *bytes = (uint64_t)size * width;
    return *bytes <= MAX_INDEX_BYTES;
}

/* The value of "_name" among the entries of keys object `keys`: from the
 * entries themselves, or from `values` (a split dict's, or an object's bare
 * values), at the entry's index.  0 when it is not there. */
static uint64_t lookup(hw_python_namer *n, uint64_t keys, uint64_t values)
{
    const hw_python_layout *L = &n->py.layout;
    pid_t pid = n->pid;
    int64_t entries = 0;
    uint64_t indices = 0;
    if (keys == 0 || !peek_i64(pid, keys + L->keys_nentries, &entries) || entries <= 0 ||
        !index_bytes(L, pid, keys, &indices))
        return 0;
    if (entries > MAX_ENTRIES)
        entries = MAX_ENTRIES;
    uint32_t size = L->entry_size, key_at = L->entry_key, value_at = L->entry_value;
    if (hw_py_has(L->keys_kind)) {
        uint8_t kind = 0;
        if (!peek_u8(pid, keys + L->keys_kind, &kind))
            return 0;
        if (kind != L->dict_keys_general) {
            size = L->unicode_entry_size;
            key_at = L->unicode_entry_key;
            value_at = L->unicode_entry_value;
        }
    }
    if (size == 0 || size > 64 || key_at + 8 > size || value_at + 8 > size)
        return 0;
    size_t bytes = (size_t)entries * size;
    unsigned char *table = malloc(bytes);
    uint64_t value = 0;
    if (table == NULL || !hw_py_peek(pid, keys + L->keys_indices + indices, table, bytes)) {
        free(table);
        return 0;
    }
    for (int64_t i = 0; i < entries; i++) {
        const unsigned char *e = table + (size_t)i * size;
        if (!is_attribute(n, hw_py_u64(e, key_at)))
            continue;
        if (values != 0) {
            if (!peek_u64(pid, values + L->values_values + (uint64_t)i * 8, &value))
                value = 0;
        } else {
            value = hw_py_u64(e, value_at);
        }
        break;
    }
    free(table);
    return value;
}

static uint64_t lookup_dict(hw_python_namer *n, uint64_t dict)
{
    const hw_python_layout *L = &n->py.layout;
    uint64_t keys = 0, values = 0;
    if (dict == 0 || (dict & 7) != 0 || !peek_u64(n->pid, dict + L->dict_keys, &keys) ||
        !peek_u64(n->pid, dict + L->dict_values, &values))
        return 0;
    return lookup(n, keys, values);
}

/* Where an object's attributes are: its dict, or its bare values and the
 * keys its type keeps for them.  The value of "_name", or 0. */
static uint64_t attribute_of(hw_python_namer *n, uint64_t obj)
{
    const hw_python_layout *L = &n->py.layout;
    pid_t pid = n->pid;
    uint64_t type = 0, flags = 0, cached_keys = 0;
    int64_t dictoffset = 0;
    if (obj == 0 || (obj & 7) != 0 || !peek_u64(pid, obj + L->object_type, &type) || type == 0 ||
        !peek_u64(pid, type + L->type_flags, &flags) || !peek_i64(pid, type + L->type_dictoffset, &dictoffset) ||
        !peek_u64(pid, type + L->heaptype_cached_keys, &cached_keys))
        return 0;
    if (L->tpflags_managed_dict != 0 && (flags & L->tpflags_managed_dict) != 0 && hw_py_has(L->object_dict_before)) {
        uint64_t word = 0, values = 0;
        if (!peek_u64(pid, obj - L->object_dict_before, &word))
            return 0;
        uint64_t dict = word;
        if (L->values_tagged && (word & 1) != 0) {
            dict = 0;
            values = word + 1; /* stored as the pointer less 1 */
        } else if (hw_py_has(L->object_values_before) && word == 0) {
            if (!peek_u64(pid, obj - L->object_values_before, &values))
                return 0;
        } else if (hw_py_has(L->values_inline) && word == 0 && L->tpflags_inline_values != 0 &&
                   (flags & L->tpflags_inline_values) != 0) {
            values = obj + L->values_inline;
        }
        return dict != 0 ? lookup_dict(n, dict) : lookup(n, cached_keys, values);
    }
    uint64_t dict = 0;
    if (dictoffset <= 0 || dictoffset > 4096 || !peek_u64(pid, obj + (uint64_t)dictoffset, &dict))
        return 0;
    return lookup_dict(n, dict);
}

/* Is frame `f` threading.Thread._bootstrap_inner? */
static bool is_bootstrap(hw_python_namer *n, const hw_interp_frame *f)
{
    const char *name = NULL, *file = NULL;
    if (!hw_python_code_names(n, f->code_addr, &name, &file) || name == NULL || file == NULL)
        return false;
    const char *dot = strrchr(name, '.');
    const char *slash = strrchr(file, '/');
    return strcmp(dot ? dot + 1 : name, "_bootstrap_inner") == 0 && strcmp(slash ? slash + 1 : file, "threading.py") == 0;
}

char *hw_python_thread_name(hw_python_namer *n, const hw_interp_stack *st)
{
    const hw_python_layout *L = &n->py.layout;
    if (!hw_py_has(L->frame_localsplus) || !hw_py_has(L->dict_keys))
        return NULL;
    /* The bootstrap frame is the outermost or next to it: look from there. */
    for (unsigned i = st->count; i-- > 0;) {
        const hw_interp_frame *f = &st->frames[i];
        if (!is_bootstrap(n, f))
            continue;
        uint64_t self = 0;
        if (!peek_u64(n->pid, f->frame_addr + L->frame_localsplus, &self))
            return NULL;
        uint64_t value = attribute_of(n, self);
        return value != 0 ? hw_python_read_str(n, value) : NULL;
    }
    return NULL;
}
