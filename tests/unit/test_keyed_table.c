/*
 * test_keyed_table.c - the bounded keyed cache (core/keyed_table.h): what is
 * claimed is found, growth keeps every entry, the bound empties the table
 * (clearing each entry once), key 0 is refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "core/keyed_table.h"

typedef struct item {
    uint64_t key;
    uint64_t value;
    char *owned;
} item;

static int cleared;

static void clear_item(void *e)
{
    item *it = e;
    free(it->owned);
    cleared++;
}

static void test_claim_find_and_grow(void **state)
{
    (void)state;
    hw_keyed_table t;
    hw_keyed_table_init(&t, sizeof(item), 100000, clear_item);
    cleared = 0;
    for (uint64_t k = 1; k <= 5000; k++) {
        bool fresh = false;
        item *it = hw_keyed_table_claim(&t, k * 7919, &fresh);
        assert_non_null(it);
        assert_true(fresh);
        assert_int_equal(it->value, 0);
        it->value = k;
        it->owned = malloc(8);
    }
    assert_int_equal(t.used, 5000);
    for (uint64_t k = 1; k <= 5000; k++) {
        item *it = hw_keyed_table_find(&t, k * 7919);
        assert_non_null(it);
        assert_int_equal(it->value, k);
        bool fresh = true;
        assert_ptr_equal(hw_keyed_table_claim(&t, k * 7919, &fresh), it);
        assert_false(fresh);
    }
    assert_null(hw_keyed_table_find(&t, 3));
    size_t cursor = 0, seen = 0;
    while (hw_keyed_table_next(&t, &cursor) != NULL)
        seen++;
    assert_int_equal(seen, 5000);
    assert_int_equal(t.forgotten, 0);
    hw_keyed_table_free(&t);
    assert_int_equal(cleared, 5000);
}

static void test_bound_forgets_all(void **state)
{
    (void)state;
    hw_keyed_table t;
    hw_keyed_table_init(&t, sizeof(item), 64, clear_item);
    cleared = 0;
    for (uint64_t k = 1; k <= 64; k++) {
        item *it = hw_keyed_table_claim(&t, k, NULL);
        assert_non_null(it);
        it->owned = malloc(4);
    }
    assert_int_equal(t.used, 64);
    size_t cap = t.cap;
    /* The 65th empties the table first. */
    item *it = hw_keyed_table_claim(&t, 1000, NULL);
    assert_non_null(it);
    assert_int_equal(cleared, 64);
    assert_int_equal(t.forgotten, 1);
    assert_int_equal(t.used, 1);
    assert_int_equal(t.cap, cap); /* never grows past the bound */
    assert_null(hw_keyed_table_find(&t, 5));
    assert_ptr_equal(hw_keyed_table_find(&t, 1000), it);
    hw_keyed_table_free(&t);
    assert_int_equal(cleared, 65);
    /* Usable again after free. */
    assert_non_null(hw_keyed_table_claim(&t, 9, NULL));
    hw_keyed_table_free(&t);
}

static void test_key_zero_is_refused(void **state)
{
    (void)state;
    hw_keyed_table t;
    hw_keyed_table_init(&t, sizeof(item), 8, NULL);
    bool fresh = true;
    assert_null(hw_keyed_table_claim(&t, 0, &fresh));
    assert_false(fresh);
    assert_null(hw_keyed_table_find(&t, 0));
    assert_non_null(hw_keyed_table_claim(&t, 1, NULL));
    assert_null(hw_keyed_table_find(&t, 0));
    hw_keyed_table_forget_all(&t);
    assert_int_equal(t.used, 0);
    assert_null(hw_keyed_table_find(&t, 1));
    hw_keyed_table_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_claim_find_and_grow),
        cmocka_unit_test(test_bound_forgets_all),
        cmocka_unit_test(test_key_zero_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
