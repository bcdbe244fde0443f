/*
 * fuzz_jit_map.c - hw_jit_map_parse and hw_jit_map_lookup, which read
 * the perf map a watched node program writes (/tmp/perf-PID.map) inside
 * the root-run agent.
 *
 * Feeds: the input bytes as the map's text, NUL bytes and all; then looks
 * up the edges of the first and last entries' ranges (start - 1, start,
 * start + size - 1, start + size) and addresses made from the input's bytes.
 *
 * Proves: no crash, leak or overflow; every line is either an entry or
 * counted as skipped; every entry has a non-empty range within the limits
 * that does not wrap, a function name, a tier among ~ ^ + * or none, and
 * comes from the line it says, in line order, whose first two fields are
 * its start and size in hex; a lookup finds an entry exactly when a plain
 * scan over the entries finds one whose range holds the address, and then
 * the same entry as the scan's last (the later line wins), with the pc
 * inside its range.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/text_bits.h"
#include "core/parse/jit_map.h"

#define CHECK(cond)                                                                                                    \
    do {                                                                                                               \
        if (!(cond))                                                                                                   \
            __builtin_trap();                                                                                          \
    } while (0)

#define EDGE_ENTRIES 32 /* entries at each end whose edges are looked up */
#define INPUT_PCS 64    /* addresses made from the input */

/* The hex number at in[*i] (leading zeros allowed), moving *i past it. */
static uint64_t read_hex(const uint8_t *in, size_t end, size_t *i)
{
    uint64_t v = 0;
    for (; *i < end && hw_hex_digit_value((char)(in[*i])) >= 0; (*i)++)
        v = v << 4 | (uint64_t)hw_hex_digit_value((char)(in[*i]));
    return v;
}

static void check_entry(const hw_js_symbol *s, const uint8_t *in, size_t len, const size_t *line_at, size_t lines)
{
    CHECK(s->size >= 1 && s->size <= HW_JIT_MAP_MAX_CODE_SIZE);
    CHECK(s->start <= UINT64_MAX - s->size);
    CHECK(s->function != NULL && s->function[0] != '\0');
    CHECK(s->tier == 0 || s->tier == '~' || s->tier == '^' || s->tier == '+' || s->tier == '*');
    CHECK(s->source_file == NULL || s->source_file[0] != '\0');
    CHECK(s->source_file != NULL || (s->source_line == 0 && s->source_column == 0));
    CHECK(s->source_line >= 0 && s->source_column >= 0);
    CHECK(s->kind == NULL || s->kind[0] != '\0');
    CHECK(strchr(s->function, '\n') == NULL);

    /* Its line starts with its start and size. */
    CHECK(s->map_line >= 1 && s->map_line <= lines);
    size_t i = line_at[s->map_line - 1];
    size_t end = s->map_line < lines ? line_at[s->map_line] - 1 : len;
    CHECK(read_hex(in, end, &i) == s->start);
    while (i < end && (in[i] == ' ' || in[i] == '\t'))
        i++;
    CHECK(read_hex(in, end, &i) == s->size);
}

/* The last entry holding pc, by a plain scan: its index, or -1. */
static long scan(const hw_js_symbol *all, size_t n, uint64_t pc)
{
    for (size_t i = n; i-- > 0;)
        if (pc >= all[i].start && pc - all[i].start < all[i].size)
            return (long)i;
    return -1;
}

static void check_lookup(const hw_jit_map *m, const hw_js_symbol *all, size_t n, uint64_t pc)
{
    hw_js_symbol got;
    bool found = hw_jit_map_lookup(m, pc, &got);
    long want = scan(all, n, pc);
    CHECK(found == (want >= 0));
    if (!found)
        return;
    CHECK(pc >= got.start && pc - got.start < got.size);
    CHECK(got.map_line == all[want].map_line);
    CHECK(got.function == all[want].function && got.start == all[want].start && got.size == all[want].size);
}

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t len);

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t len)
{
    /* Where each line starts. */
    size_t lines = 0;
    size_t *line_at = malloc((len + 1) * sizeof *line_at);
    CHECK(line_at != NULL);
    for (size_t i = 0; i < len; i++)
        if (i == 0 || in[i - 1] == '\n')
            line_at[lines++] = i;

    size_t skipped = SIZE_MAX;
    hw_jit_map *m = hw_jit_map_parse((const char *)in, len, &skipped);
    CHECK(m != NULL);
    size_t n = hw_jit_map_count(m);
    CHECK(n + skipped == lines);

    hw_js_symbol *all = malloc((n + 1) * sizeof *all);
    CHECK(all != NULL);
    for (size_t i = 0; i < n; i++) {
        CHECK(hw_jit_map_entry(m, i, &all[i]));
        check_entry(&all[i], in, len, line_at, lines);
        CHECK(i == 0 || all[i].map_line > all[i - 1].map_line);
    }
    hw_js_symbol none;
    CHECK(!hw_jit_map_entry(m, n, &none));

    for (size_t k = 0; k < n && k < 2 * EDGE_ENTRIES; k++) {
        const hw_js_symbol *e = &all[k < EDGE_ENTRIES ? k : n - 1 - (k - EDGE_ENTRIES)];
        check_lookup(m, all, n, e->start - 1); /* wraps at 0: still an address */
        check_lookup(m, all, n, e->start);
        check_lookup(m, all, n, e->start + e->size - 1);
        check_lookup(m, all, n, e->start + e->size);
    }
    /* Addresses from the input: eight bytes at a time, and near the
     * entries' starts. */
    for (size_t k = 0; k < INPUT_PCS && k * 8 < len; k++) {
        uint64_t pc = 0;
        memcpy(&pc, in + k * 8, len - k * 8 < 8 ? len - k * 8 : 8);
        check_lookup(m, all, n, pc);
        if (n > 0)
            check_lookup(m, all, n, all[pc % n].start + (pc >> 32) % (2 * all[pc % n].size));
    }
    check_lookup(m, all, n, 0);
    check_lookup(m, all, n, UINT64_MAX);

    free(all);
    hw_jit_map_free(m);
    free(line_at);
    return 0;
}
