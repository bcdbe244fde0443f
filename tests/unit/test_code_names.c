/*
 * test_code_names.c - names of code kept by file identity
 * (agent/symbols/code_names.h): one file is one number, any difference in
 * device, inode, path or build-id is another file, names come back as kept,
 * and the bounds forget rather than grow; and the symbolizers that use it:
 * a second process's lookup of the same code is answered from it, and the
 * watch thread's functions-only symbolizer (eh_frame_index.h) finds the
 * same function starts as the symbol table, without names.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "agent/capture/proc_task.h"
#include "agent/symbols/code_names.h"
#include "agent/symbols/symbolizer.h"
#include <unistd.h>

static const unsigned char build_id[20] = {0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
static const unsigned char other_id[20] = {0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 17};

static hw_code_file libc(void)
{
    hw_code_file f = {.dev = 0xfd00000001ull, .inode = 4242, .path = "/usr/lib/x86_64-linux-gnu/libc.so.6",
                      .build_id = build_id, .build_id_len = sizeof build_id};
    return f;
}

static void test_one_file_one_number(void **state)
{
    (void)state;
    hw_code_names *c = hw_code_names_new();
    assert_non_null(c);
    hw_code_file f = libc();
    uint32_t n = hw_code_names_file(c, &f);
    assert_true(n != 0);
    assert_int_equal(hw_code_names_file(c, &f), n);
    /* Each field tells files apart. */
    hw_code_file g = f;
    g.inode = 4243;
    uint32_t by_inode = hw_code_names_file(c, &g);
    g = f;
    g.dev = 0xfd00000002ull;
    uint32_t by_dev = hw_code_names_file(c, &g);
    g = f;
    g.path = "/home/mallory/libc.so.6";
    uint32_t by_path = hw_code_names_file(c, &g);
    g = f;
    g.build_id = other_id;
    uint32_t by_build_id = hw_code_names_file(c, &g);
    uint32_t all[] = {n, by_inode, by_dev, by_path, by_build_id};
    for (size_t i = 0; i < 5; i++) {
        assert_true(all[i] != 0);
        for (size_t j = 0; j < i; j++)
            assert_true(all[i] != all[j]);
    }
    /* No build-id: not kept. */
    g = f;
    g.build_id = NULL;
    g.build_id_len = 0;
    assert_int_equal(hw_code_names_file(c, &g), 0);
    hw_code_names_free(c);
}

static void test_names_come_back_as_kept(void **state)
{
    (void)state;
    hw_code_names *c = hw_code_names_new();
    hw_code_file f = libc();
    uint32_t n = hw_code_names_file(c, &f);
    hw_code_name out;
    assert_false(hw_code_names_find(c, n, 0xe4b03, &out));
    hw_code_name name = {.symbol_name = "clock_nanosleep", .symbol_offset = 0x23,
                         .source_file = "../sysdeps/unix/sysv/linux/clock_nanosleep.c", .source_line = 71};
    hw_code_names_add(c, n, 0xe4b03, &name);
    hw_code_name nothing = {0};
    hw_code_names_add(c, n, 0x10, &nothing); /* no symbol: kept as such */
    assert_true(hw_code_names_find(c, n, 0xe4b03, &out));
    assert_string_equal(out.symbol_name, "clock_nanosleep");
    assert_int_equal(out.symbol_offset, 0x23);
    assert_string_equal(out.source_file, "../sysdeps/unix/sysv/linux/clock_nanosleep.c");
    assert_int_equal(out.source_line, 71);
    assert_true(hw_code_names_find(c, n, 0x10, &out));
    assert_null(out.symbol_name);
    assert_null(out.source_file);
    /* Another file, same address: unknown. */
    hw_code_file g = f;
    g.inode++;
    assert_false(hw_code_names_find(c, hw_code_names_file(c, &g), 0xe4b03, &out));
    assert_false(hw_code_names_find(c, 0, 0xe4b03, &out));
    hw_code_names_stats st;
    hw_code_names_get_stats(c, &st);
    assert_int_equal(st.hits, 2);
    assert_int_equal(st.names, 2);
    assert_int_equal(st.files, 2);
    hw_code_names_free(c);
}

static void test_bounds_forget(void **state)
{
    (void)state;
    hw_code_names *c = hw_code_names_new();
    hw_code_file f = libc();
    uint32_t n = hw_code_names_file(c, &f);
    /* Long names: the byte bound comes first. */
    char *big = malloc(64 << 10);
    assert_non_null(big);
    memset(big, 'x', (64 << 10) - 1);
    big[(64 << 10) - 1] = '\0';
    hw_code_name name = {.symbol_name = big};
    size_t adds = (HW_CODE_NAMES_MAX_BYTES / (64 << 10)) * 2;
    for (size_t i = 0; i < adds; i++) {
        hw_code_names_add(c, n, i, &name);
        hw_code_names_stats st;
        hw_code_names_get_stats(c, &st);
        assert_true(st.bytes <= HW_CODE_NAMES_MAX_BYTES);
    }
    hw_code_names_stats st;
    hw_code_names_get_stats(c, &st);
    assert_true(st.forgotten >= 1);
    assert_true(st.names < adds);
    /* The newest is still there; the file kept its number. */
    hw_code_name out;
    assert_true(hw_code_names_find(c, n, adds - 1, &out));
    assert_int_equal(hw_code_names_file(c, &f), n);
    free(big);
    /* Many files: bounded too. */
    for (uint64_t i = 0; i < 10000; i++) {
        hw_code_file g = f;
        g.inode = 100000 + i;
        assert_true(hw_code_names_file(c, &g) != 0);
    }
    hw_code_names_get_stats(c, &st);
    assert_true(st.files <= 4096);
    hw_code_names_free(c);
}

static void test_bound_to_the_thread(void **state)
{
    (void)state;
    assert_null(hw_code_names_bound());
    hw_code_names *c = hw_code_names_new();
    hw_code_names_bind(c);
    assert_ptr_equal(hw_code_names_bound(), c);
    hw_code_names_free(c); /* freeing the bound one unbinds it */
    assert_null(hw_code_names_bound());
}

/* Two functions of this program with distinct bodies (no folding). */
__attribute__((noinline)) int code_names_probe_one(int x)
{
    return x * 3 + 1;
}

__attribute__((noinline)) long code_names_probe_two(long x)
{
    return x ^ (x >> 3) ^ 0x55;
}

static hw_symbolizer *self_symbolizer(void)
{
    size_t len = 0;
    char *maps = hw_proc_read_whole("/proc/self/maps", &len);
    assert_non_null(maps);
    hw_symbolizer *sym = hw_symbolizer_new(getpid(), maps, len, NULL);
    free(maps);
    assert_non_null(sym);
    return sym;
}

static void test_symbolizers_share_names(void **state)
{
    (void)state;
    hw_code_names *c = hw_code_names_new();
    hw_code_names_bind(c);
    uint64_t pcs[] = {(uint64_t)(uintptr_t)code_names_probe_one + 2, (uint64_t)(uintptr_t)code_names_probe_two + 3,
                      (uint64_t)(uintptr_t)getpid + 1};
    hw_frame first[3], second[3];
    hw_symbolizer *a = self_symbolizer();
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(hw_symbolize_frame(a, pcs[i], true, &first[i]), 0);
    hw_symbolizer_free(a);
    hw_code_names_stats before;
    hw_code_names_get_stats(c, &before);
    hw_symbolizer *b = self_symbolizer(); /* as another process of the same program would */
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(hw_symbolize_frame(b, pcs[i], true, &second[i]), 0);
    hw_symbolizer_free(b);
    hw_code_names_stats after;
    hw_code_names_get_stats(c, &after);
    assert_int_equal(after.hits - before.hits, 3);
    assert_string_equal(first[0].symbol_name, "code_names_probe_one");
    assert_string_equal(first[1].symbol_name, "code_names_probe_two");
    for (size_t i = 0; i < 3; i++) {
        assert_non_null(first[i].symbol_name);
        assert_string_equal(first[i].symbol_name, second[i].symbol_name);
        assert_int_equal(first[i].symbol_addr, second[i].symbol_addr);
        assert_int_equal(first[i].source_line, second[i].source_line);
        if (first[i].source_file != NULL)
            assert_string_equal(first[i].source_file, second[i].source_file);
        hw_frame_clear(&first[i]);
        hw_frame_clear(&second[i]);
    }
    hw_code_names_free(c);
}

static bool is_this_program(const char *path)
{
    static char self[4096];
    if (self[0] == '\0') {
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        assert_true(n > 0);
        self[n] = '\0';
    }
    return strcmp(path, self) == 0;
}

/* Symbols found by name once per file: the second process's search is
 * answered from the shared table, at its own load address. */
static void test_symbol_search_is_shared(void **state)
{
    (void)state;
    hw_code_names *c = hw_code_names_new();
    hw_code_names_bind(c);
    static const char *const names[] = {"code_names_probe_one", "code_names_probe_two", "no_such_symbol_here"};
    uint64_t first[3], second[3];
    hw_symbolizer *a = self_symbolizer();
    assert_int_equal(hw_symbolizer_find_symbols(a, is_this_program, names, first, 3, NULL), 2);
    hw_symbolizer_free(a);
    hw_symbolizer *b = self_symbolizer();
    char *module = NULL;
    assert_int_equal(hw_symbolizer_find_symbols(b, is_this_program, names, second, 3, &module), 2);
    hw_symbolizer_free(b);
    assert_non_null(module);
    assert_true(is_this_program(module));
    free(module);
    hw_code_names_stats st;
    hw_code_names_get_stats(c, &st);
    assert_int_equal(st.symbol_hits, 1);
    assert_int_equal(first[0], (uint64_t)(uintptr_t)code_names_probe_one);
    assert_int_equal(second[0], (uint64_t)(uintptr_t)code_names_probe_one);
    assert_int_equal(second[1], (uint64_t)(uintptr_t)code_names_probe_two);
    assert_int_equal(second[2], 0);
    /* Other names: looked up again. */
    static const char *const other[] = {"code_names_probe_two"};
    hw_symbolizer *d = self_symbolizer();
    assert_int_equal(hw_symbolizer_find_symbols(d, is_this_program, other, second, 1, NULL), 1);
    hw_symbolizer_free(d);
    hw_code_names_get_stats(c, &st);
    assert_int_equal(st.symbol_hits, 1);
    assert_int_equal(second[0], (uint64_t)(uintptr_t)code_names_probe_two);
    hw_code_names_free(c);
}

static void test_functions_only_finds_the_same_starts(void **state)
{
    (void)state;
    uint64_t pcs[] = {(uint64_t)(uintptr_t)code_names_probe_one + 2, (uint64_t)(uintptr_t)code_names_probe_two + 3,
                      (uint64_t)(uintptr_t)getpid + 1, (uint64_t)(uintptr_t)strlen + 4};
    hw_symbolizer *named = self_symbolizer();
    hw_symbolizer *bare = self_symbolizer();
    hw_symbolizer_functions_only(bare);
    for (size_t i = 0; i < sizeof pcs / sizeof pcs[0]; i++) {
        hw_frame n, f;
        assert_int_equal(hw_symbolize_frame(named, pcs[i], true, &n), 0);
        assert_int_equal(hw_symbolize_frame(bare, pcs[i], true, &f), 0);
        assert_null(f.symbol_name);
        assert_null(f.source_file);
        assert_true(f.symbol_addr != 0);
        assert_true(f.symbol_addr <= pcs[i]);
        if (i < 2) /* our own functions: the symbol's start is the unwind entry's */
            assert_int_equal(f.symbol_addr, n.symbol_addr);
        assert_int_equal(hw_frame_function_key(&f), f.symbol_addr);
        hw_frame_clear(&n);
        hw_frame_clear(&f);
    }
    /* Two functions, two keys. */
    hw_frame x, y;
    hw_symbolize_frame(bare, pcs[0], true, &x);
    hw_symbolize_frame(bare, pcs[1], true, &y);
    assert_true(hw_frame_function_key(&x) != hw_frame_function_key(&y));
    hw_frame_clear(&x);
    hw_frame_clear(&y);
    hw_symbolizer_free(named);
    hw_symbolizer_free(bare);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_file_one_number),
        cmocka_unit_test(test_names_come_back_as_kept),
        cmocka_unit_test(test_bounds_forget),
        cmocka_unit_test(test_bound_to_the_thread),
        cmocka_unit_test(test_symbolizers_share_names),
        cmocka_unit_test(test_symbol_search_is_shared),
        cmocka_unit_test(test_functions_only_finds_the_same_starts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
