/*
 * code_names.c - the names of code kept by file identity (code_names.h).
 *
 * Two bounded tables (core/keyed_table.h): files, keyed by a hash of their
 * identity and checked field by field, each given a number; names, keyed
 * by a hash of (file number, address) and checked likewise.  A hash that
 * two keys share costs a lookup, never a wrong name.
 */
#include "code_names.h"

#include <stdlib.h>
#include <string.h>

#include "core/keyed_table.h"

#define MAX_FILES 4096
#define MAX_NAMES 65536
#define MAX_LOOKUPS 1024
#define MAX_BUILD_ID 64

typedef struct file_entry {
    uint64_t key;
    uint64_t dev, inode;
    char *path;
    unsigned char build_id[MAX_BUILD_ID];
    size_t build_id_len;
    uint32_t number;
} file_entry;

typedef struct name_entry {
    uint64_t key;
    uint32_t file_no;
    uint64_t file_addr;
    char *symbol_name;
    uint64_t symbol_offset;
    char *source_file;
    int source_line;
} name_entry;

typedef struct lookup_entry {
    uint64_t key;
    uint32_t file_no;
    uint64_t names_key;
    size_t count;
    uint64_t file_addrs[HW_CODE_NAMES_MAX_LOOKUP];
} lookup_entry;

struct hw_code_names {
    hw_keyed_table files, names, lookups;
    uint32_t next_file_no;
    size_t bytes; /* of the strings names and files hold */
    uint64_t hits, misses, forgotten, symbol_hits;
};

static _Thread_local hw_code_names *bound;

static void clear_file(void *e)
{
    free(((file_entry *)e)->path);
}

static void clear_name(void *e)
{
    name_entry *n = e;
    free(n->symbol_name);
    free(n->source_file);
}

hw_code_names *hw_code_names_new(void)
{
    hw_code_names *c = calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    hw_keyed_table_init(&c->files, sizeof(file_entry), MAX_FILES, clear_file);
    hw_keyed_table_init(&c->names, sizeof(name_entry), MAX_NAMES, clear_name);
    hw_keyed_table_init(&c->lookups, sizeof(lookup_entry), MAX_LOOKUPS, NULL);
    return c;
}

void hw_code_names_free(hw_code_names *c)
{
    if (c == NULL)
        return;
    if (bound == c)
        bound = NULL;
    hw_keyed_table_free(&c->names);
    hw_keyed_table_free(&c->lookups);
    hw_keyed_table_free(&c->files);
    free(c);
}

/* Forget every name and file (a bound was reached). */
static void forget_all(hw_code_names *c)
{
    hw_keyed_table_forget_all(&c->names);
    hw_keyed_table_forget_all(&c->lookups);
    hw_keyed_table_forget_all(&c->files);
    c->bytes = 0;
    c->forgotten++;
}

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

static uint64_t hash_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = mix(h, b[i]);
    return h;
}

static uint64_t nonzero(uint64_t h)
{
    return h != 0 ? h : 1;
}

static bool same_file(const file_entry *e, const hw_code_file *f)
{
    return e->dev == f->dev && e->inode == f->inode && e->build_id_len == f->build_id_len &&
           memcmp(e->build_id, f->build_id, f->build_id_len) == 0 && e->path != NULL && strcmp(e->path, f->path) == 0;
}

uint32_t hw_code_names_file(hw_code_names *c, const hw_code_file *f)
{
    if (c == NULL || f == NULL || f->path == NULL || f->build_id == NULL || f->build_id_len == 0 ||
        f->build_id_len > MAX_BUILD_ID)
        return 0;
    size_t path_len = strlen(f->path);
    uint64_t key = mix(mix(0x636f64656e616d65ull, f->dev), f->inode);
    key = nonzero(hash_bytes(hash_bytes(key, f->build_id, f->build_id_len), f->path, path_len));
    file_entry *e = hw_keyed_table_find(&c->files, key);
    if (e != NULL)
        return same_file(e, f) ? e->number : 0; /* another file with the hash: not kept */
    if (c->files.used >= MAX_FILES || c->bytes + path_len + 1 > HW_CODE_NAMES_MAX_BYTES ||
        c->next_file_no == UINT32_MAX)
        forget_all(c); /* names refer to files by number: they go together */
    char *path = strdup(f->path);
    bool fresh = false;
    if (path == NULL || (e = hw_keyed_table_claim(&c->files, key, &fresh)) == NULL) {
        free(path);
        return 0;
    }
    e->dev = f->dev;
    e->inode = f->inode;
    e->path = path;
    memcpy(e->build_id, f->build_id, f->build_id_len);
    e->build_id_len = f->build_id_len;
    e->number = ++c->next_file_no;
    c->bytes += path_len + 1;
    return e->number;
}

static uint64_t name_key(uint32_t file_no, uint64_t file_addr)
{
    return nonzero(mix(mix(0x6e616d65ull, file_no), file_addr));
}

bool hw_code_names_find(hw_code_names *c, uint32_t file_no, uint64_t file_addr, hw_code_name *out)
{
    if (c == NULL || file_no == 0)
        return false;
    const name_entry *e = hw_keyed_table_find(&c->names, name_key(file_no, file_addr));
    if (e == NULL || e->file_no != file_no || e->file_addr != file_addr) {
        c->misses++;
        return false;
    }
    c->hits++;
    out->symbol_name = e->symbol_name;
    out->symbol_offset = e->symbol_offset;
    out->source_file = e->source_file;
    out->source_line = e->source_line;
    return true;
}

static size_t string_bytes(const char *s)
{
    return s != NULL ? strlen(s) + 1 : 0;
}

/* The bytes of the files' strings (what is left once the names are gone). */
static size_t files_bytes(const hw_code_names *c)
{
    size_t cursor = 0, n = 0;
    const file_entry *f;
    while ((f = hw_keyed_table_next(&c->files, &cursor)) != NULL)
        n += string_bytes(f->path);
    return n;
}

void hw_code_names_add(hw_code_names *c, uint32_t file_no, uint64_t file_addr, const hw_code_name *name)
{
    if (c == NULL || file_no == 0 || name == NULL)
        return;
    size_t bytes = string_bytes(name->symbol_name) + string_bytes(name->source_file);
    if (bytes > HW_CODE_NAMES_MAX_BYTES / 16)
        return; /* a name that size is not worth keeping */
    if (c->bytes + bytes > HW_CODE_NAMES_MAX_BYTES) {
        /* Forget the names; the files stay (their numbers are still right). */
        hw_keyed_table_forget_all(&c->names);
        c->bytes = files_bytes(c);
        c->forgotten++;
    }
    char *symbol = name->symbol_name != NULL ? strdup(name->symbol_name) : NULL;
    char *source = name->source_file != NULL ? strdup(name->source_file) : NULL;
    if ((name->symbol_name != NULL && symbol == NULL) || (name->source_file != NULL && source == NULL)) {
        free(symbol);
        free(source);
        return;
    }
    uint64_t forgotten_before = c->names.forgotten;
    bool fresh = false;
    name_entry *e = hw_keyed_table_claim(&c->names, name_key(file_no, file_addr), &fresh);
    if (e == NULL) {
        free(symbol);
        free(source);
        return;
    }
    if (c->names.forgotten != forgotten_before) {
        c->bytes = files_bytes(c); /* the table emptied itself at its bound */
        c->forgotten++;
    }
    if (!fresh) { /* another (file, address) with the same hash: the newer one stays */
        c->bytes -= string_bytes(e->symbol_name) + string_bytes(e->source_file);
        clear_name(e);
    }
    e->file_no = file_no;
    e->file_addr = file_addr;
    e->symbol_name = symbol;
    e->symbol_offset = name->symbol_offset;
    e->source_file = source;
    e->source_line = name->source_line;
    c->bytes += bytes;
}

static uint64_t lookup_key(uint32_t file_no, uint64_t names_key)
{
    return nonzero(mix(mix(0x6c6f6f6bull, file_no), names_key));
}

bool hw_code_names_find_symbols(hw_code_names *c, uint32_t file_no, uint64_t names_key, uint64_t *file_addrs,
                                size_t count)
{
    if (c == NULL || file_no == 0 || count > HW_CODE_NAMES_MAX_LOOKUP)
        return false;
    const lookup_entry *e = hw_keyed_table_find(&c->lookups, lookup_key(file_no, names_key));
    if (e == NULL || e->file_no != file_no || e->names_key != names_key || e->count != count)
        return false;
    memcpy(file_addrs, e->file_addrs, count * sizeof *file_addrs);
    c->symbol_hits++;
    return true;
}

void hw_code_names_add_symbols(hw_code_names *c, uint32_t file_no, uint64_t names_key, const uint64_t *file_addrs,
                               size_t count)
{
    if (c == NULL || file_no == 0 || count > HW_CODE_NAMES_MAX_LOOKUP)
        return;
    lookup_entry *e = hw_keyed_table_claim(&c->lookups, lookup_key(file_no, names_key), NULL);
    if (e == NULL)
        return;
    e->file_no = file_no;
    e->names_key = names_key;
    e->count = count;
    memcpy(e->file_addrs, file_addrs, count * sizeof *file_addrs);
}

void hw_code_names_get_stats(const hw_code_names *c, hw_code_names_stats *out)
{
    memset(out, 0, sizeof *out);
    if (c == NULL)
        return;
    out->hits = c->hits;
    out->misses = c->misses;
    out->forgotten = c->forgotten;
    out->symbol_hits = c->symbol_hits;
    out->names = c->names.used;
    out->files = c->files.used;
    out->bytes = c->bytes;
}

void hw_code_names_bind(hw_code_names *c)
{
    bound = c;
}

hw_code_names *hw_code_names_bound(void)
{
    return bound;
}
