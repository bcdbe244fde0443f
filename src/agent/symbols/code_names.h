/*
 * code_names.h - what an address in a file's code is called (its function
 * and source line), kept by the identity of the file, so that the
 * symbolizers of many processes running the same binaries look each address
 * up once.
 *
 * A symbolizer (symbolizer.h) is one process's; a thousand processes of one
 * program that hang at once would each look up the same functions in the
 * same files, and glibc's debug file alone (compressed DWARF, inflated by
 * libdw at each first line lookup) costs ~50 ms a time.  This cache sits
 * beside the symbolizers of one thread: an address is first turned into the
 * file's own address (the module's load bias taken off), and the name is
 * kept under the file's identity: the device and inode the kernel mapped
 * (from the maps text), the path, and the build-id read from the file the
 * agent opened.  A process cannot make its own file pass for another's:
 * device and inode are the kernel's, and a file it controls has its own.
 *
 * Bounded: at most MAX_FILES identities and MAX_NAMES names, and
 * HW_CODE_NAMES_MAX_BYTES of strings; past a bound everything is forgotten
 * and looked up again.  One per thread: hw_code_names_bind gives the calling
 * thread's symbolizers one to share; a thread with none looks every address
 * up in its own symbolizer, as before.
 */
#ifndef HANGWATCH_CODE_NAMES_H
#define HANGWATCH_CODE_NAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HW_CODE_NAMES_MAX_BYTES (16u << 20)

typedef struct hw_code_names hw_code_names;

/* Who a file is. */
typedef struct hw_code_file {
    uint64_t dev, inode; /* from the maps line */
    const char *path;    /* the module's path */
    const unsigned char *build_id;
    size_t build_id_len;
} hw_code_file;

/* What an address is called; strings are the cache's, valid until the next
 * hw_code_names_add or hw_code_names_free. */
typedef struct hw_code_name {
    const char *symbol_name; /* NULL: no symbol covers it */
    uint64_t symbol_offset;  /* the address minus its symbol's start */
    const char *source_file; /* NULL: no line */
    int source_line;
} hw_code_name;

typedef struct hw_code_names_stats {
    uint64_t hits, misses, forgotten;
    uint64_t symbol_hits; /* hw_code_names_find_symbols answered */
    size_t names, files, bytes;
} hw_code_names_stats;

hw_code_names *hw_code_names_new(void);
void hw_code_names_free(hw_code_names *c);

/* The file's number in `c` (made now if new), 0 when it cannot be kept (no
 * build-id, no inode, out of memory). */
uint32_t hw_code_names_file(hw_code_names *c, const hw_code_file *file);

/* The name of `file_addr` in file `file_no`, if known. */
bool hw_code_names_find(hw_code_names *c, uint32_t file_no, uint64_t file_addr, hw_code_name *out);

/* Keep `name` for `file_addr` in file `file_no` (copied). */
void hw_code_names_add(hw_code_names *c, uint32_t file_no, uint64_t file_addr, const hw_code_name *name);

/* Symbols looked up by name in a file (hw_symbolizer_find_symbols): for
 * the set of names `names_key` stands for, each one's file address (0:
 * absent), at most HW_CODE_NAMES_MAX_LOOKUP of them. */
#define HW_CODE_NAMES_MAX_LOOKUP 8
bool hw_code_names_find_symbols(hw_code_names *c, uint32_t file_no, uint64_t names_key, uint64_t *file_addrs,
                                size_t count);
void hw_code_names_add_symbols(hw_code_names *c, uint32_t file_no, uint64_t names_key, const uint64_t *file_addrs,
                               size_t count);

void hw_code_names_get_stats(const hw_code_names *c, hw_code_names_stats *out);

/* The calling thread's cache for its symbolizers (NULL: none), and setting
 * it; the caller keeps ownership. */
void hw_code_names_bind(hw_code_names *c);
hw_code_names *hw_code_names_bound(void);

#endif
