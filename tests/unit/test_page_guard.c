/*
 * test_page_guard.c - the agent's last line against a page that shrinks
 * under its mapping (page_guard.c): pages are required to be sealed, but if
 * one faults anyway, the SIGBUS guard puts a zero page in its place, says
 * which page faulted, and the agent reads on instead of dying.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "agent/watch/watch.h"

static void test_shrunk_page_reads_as_zeros(void **state)
{
    (void)state;
    page_guard_install();
    int fd = memfd_create("guard-test", MFD_CLOEXEC); /* not sealed: it can shrink */
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, HW_PAGE_SIZE), 0);
    volatile uint64_t *page = mmap(NULL, HW_PAGE_SIZE, PROT_READ, MAP_SHARED, fd, 0);
    assert_true(page != MAP_FAILED);
    assert_int_equal(pwrite(fd, "\x2a", 1, 0), 1);
    assert_int_equal(page[0] & 0xff, 0x2a);

    watched_process w;
    memset(&w, 0, sizeof w);
    w.page = (const hw_shared_page *)page;
    page_guard_add(w.page);
    assert_false(page_guard_take_news());
    assert_false(page_guard_faulted(w.page));

    assert_int_equal(ftruncate(fd, 0), 0); /* the registrant's attack */
    assert_int_equal(page[0], 0);          /* a SIGBUS without the guard */
    assert_true(page_guard_take_news());
    assert_false(page_guard_take_news()); /* said once */
    assert_true(page_guard_faulted(w.page));

    page_guard_remove(w.page);
    assert_false(page_guard_faulted(w.page));
    munmap((void *)page, HW_PAGE_SIZE);
    close(fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shrunk_page_reads_as_zeros),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
