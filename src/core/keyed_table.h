/*
 * keyed_table.h - a bounded cache of fixed-size entries found by a 64-bit
 * key: open addressing, linear probing, grown by doubling up to a bound,
 * and, once at the bound, emptied whole when it fills.
 *
 * The agent keeps what it learned about another process (a code object's
 * names, a V8 function's, an address's symbol, a file's symbols) in tables
 * of this shape.  Each such table is fed by a process the agent does not
 * trust, so none may grow without a bound; forgetting everything at the
 * bound keeps memory flat at the price of reading again, which is what a
 * cache is for.
 *
 * An entry begins with its key (a uint64_t; 0 marks an empty slot, so 0 is
 * never a key) and is otherwise the caller's: `clear` releases what an
 * entry owns (NULL if nothing) before the table forgets it.  Single thread.
 */
#ifndef HANGWATCH_KEYED_TABLE_H
#define HANGWATCH_KEYED_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct hw_keyed_table {
    unsigned char *slots;
    size_t entry_size;
    size_t cap, used;
    size_t max_entries;         /* the bound: never more entries than this */
    void (*clear)(void *entry); /* releases what an entry owns; may be NULL */
    uint64_t forgotten;         /* times the table was emptied at its bound */
} hw_keyed_table;

/* An empty table of entries of `entry_size` bytes (at least a uint64_t,
 * the key first), holding at most `max_entries`. */
void hw_keyed_table_init(hw_keyed_table *t, size_t entry_size, size_t max_entries, void (*clear)(void *entry));

/* The entry with `key`, or NULL. */
void *hw_keyed_table_find(const hw_keyed_table *t, uint64_t key);

/* The entry with `key`, made if there is none (then *fresh is true and the
 * entry is all zero but for its key; the table may have been emptied to make
 * room, which moves every entry: pointers from earlier calls are stale).
 * NULL when `key` is 0 or memory runs out. */
void *hw_keyed_table_claim(hw_keyed_table *t, uint64_t key, bool *fresh);

/* Forget every entry (clearing each); the slots are kept. */
void hw_keyed_table_forget_all(hw_keyed_table *t);

/* Forget every entry and release the slots; the table can be used again. */
void hw_keyed_table_free(hw_keyed_table *t);

/* Every entry in turn, in no order: for (i = 0; (e = hw_keyed_table_next(t, &i));) */
void *hw_keyed_table_next(const hw_keyed_table *t, size_t *cursor);

#endif
