/*
 * keyed_table.c - the bounded open-addressed cache of keyed_table.h.
 *
 * The table is kept at most half full, so probes stay short; it doubles
 * until twice `max_entries` slots, and an entry that would pass the bound
 * first empties it.
 */
#include "keyed_table.h"

#include <stdlib.h>
#include <string.h>

static uint64_t key_of(const unsigned char *entry)
{
    uint64_t k;
    memcpy(&k, entry, sizeof k);
    return k;
}

static size_t home_slot(uint64_t key, size_t cap)
{
    key ^= key >> 30;
    key *= 0xbf58476d1ce4e5b9ull;
    key ^= key >> 27;
    key *= 0x94d049bb133111ebull;
    key ^= key >> 31;
    return (size_t)key & (cap - 1);
}

void hw_keyed_table_init(hw_keyed_table *t, size_t entry_size, size_t max_entries, void (*clear)(void *entry))
{
    memset(t, 0, sizeof *t);
    t->entry_size = entry_size < sizeof(uint64_t) ? sizeof(uint64_t) : entry_size;
    t->max_entries = max_entries > 0 ? max_entries : 1;
    t->clear = clear;
}

static unsigned char *slot_at(const hw_keyed_table *t, size_t i)
{
    return t->slots + i * t->entry_size;
}

void *hw_keyed_table_find(const hw_keyed_table *t, uint64_t key)
{
    if (key == 0 || t->cap == 0)
        return NULL;
    for (size_t i = home_slot(key, t->cap);; i = (i + 1) & (t->cap - 1)) {
        unsigned char *e = slot_at(t, i);
        uint64_t k = key_of(e);
        if (k == key)
            return e;
        if (k == 0)
            return NULL; /* never full: an empty slot ends every probe */
    }
}

static bool grow(hw_keyed_table *t)
{
    size_t ncap = t->cap ? t->cap * 2 : 64;
    unsigned char *n = calloc(ncap, t->entry_size);
    if (n == NULL)
        return false;
    for (size_t i = 0; i < t->cap; i++) {
        const unsigned char *e = slot_at(t, i);
        uint64_t k = key_of(e);
        if (k == 0)
            continue;
        size_t j = home_slot(k, ncap);
        while (key_of(n + j * t->entry_size) != 0)
            j = (j + 1) & (ncap - 1);
        memcpy(n + j * t->entry_size, e, t->entry_size);
    }
    free(t->slots);
    t->slots = n;
    t->cap = ncap;
    return true;
}

void *hw_keyed_table_claim(hw_keyed_table *t, uint64_t key, bool *fresh)
{
    if (fresh != NULL)
        *fresh = false;
    if (key == 0)
        return NULL;
    unsigned char *e = hw_keyed_table_find(t, key);
    if (e != NULL)
        return e;
    if (t->used >= t->max_entries) {
        hw_keyed_table_forget_all(t);
        t->forgotten++;
    }
    if ((t->used + 1) * 2 > t->cap && !grow(t))
        return NULL;
    size_t i = home_slot(key, t->cap);
    while (key_of(slot_at(t, i)) != 0)
        i = (i + 1) & (t->cap - 1);
    e = slot_at(t, i);
    memset(e, 0, t->entry_size);
    memcpy(e, &key, sizeof key);
    t->used++;
    if (fresh != NULL)
        *fresh = true;
    return e;
}

void hw_keyed_table_forget_all(hw_keyed_table *t)
{
    for (size_t i = 0; i < t->cap; i++) {
        unsigned char *e = slot_at(t, i);
        if (key_of(e) == 0)
            continue;
        if (t->clear != NULL)
            t->clear(e);
        memset(e, 0, t->entry_size);
    }
    t->used = 0;
}

void hw_keyed_table_free(hw_keyed_table *t)
{
    hw_keyed_table_forget_all(t);
    free(t->slots);
    t->slots = NULL;
    t->cap = 0;
}

void *hw_keyed_table_next(const hw_keyed_table *t, size_t *cursor)
{
    while (*cursor < t->cap) {
        unsigned char *e = slot_at(t, (*cursor)++);
        if (key_of(e) != 0)
            return e;
    }
    return NULL;
}
