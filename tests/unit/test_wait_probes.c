/*
 * test_wait_probes.c - where --attach uprobe probes a process
 * (agent/watch/wait_probes.h): glibc's wait functions, each entry and the
 * instruction after each of its system calls, found by decoding; and
 * nothing in a file that has none.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/watch/wait_probes.h"

static hw_wait_probe probes[HW_WAIT_PROBE_MAX];

static void read_at(const char *path, uint64_t offset, unsigned char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(pread(fd, buf, len, (off_t)offset), (ssize_t)len);
    close(fd);
}

static void test_glibc_wait_functions(void **state)
{
    (void)state;
    char why[256];
    int n = hw_wait_probes_find(getpid(), probes, HW_WAIT_PROBE_MAX, why, sizeof why);
    if (n <= 0)
        fail_msg("no probes: %s", why);
    bool entry_of[8] = {0}, exit_of[8] = {0};
    static const char *const names[] = {"epoll_wait", "epoll_pwait", "poll", "ppoll", "select"};
    for (int i = 0; i < n; i++) {
        const hw_wait_probe *p = &probes[i];
        struct stat st;
        assert_int_equal(stat(p->path, &st), 0); /* a path the kernel resolves to the file */
        assert_true(p->address != 0);             /* and where it is in this process */
        for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
            if (strcmp(p->function, names[k]) == 0) {
                entry_of[k] |= p->entry;
                exit_of[k] |= !p->entry;
            }
        if (!p->entry) {
            /* Right after a `syscall` (0f 05). */
            unsigned char insn[2];
            read_at(p->path, p->offset - 2, insn, 2);
            assert_int_equal(insn[0], 0x0f);
            assert_int_equal(insn[1], 0x05);
        }
    }
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        if (!entry_of[k] || !exit_of[k])
            fail_msg("%s: entry %d, after a system call %d", names[k], entry_of[k], exit_of[k]);
    }
}

static void test_a_file_without_them(void **state)
{
    (void)state;
    size_t count = 0;
    /* This test program defines none of the wait functions. */
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    assert_true(len > 0);
    self[len] = '\0';
    assert_int_equal(hw_wait_probes_in_file(self, probes, HW_WAIT_PROBE_MAX, &count), 0);
    assert_int_equal(count, 0);
    assert_true(hw_wait_probes_in_file("/nonexistent/file", probes, HW_WAIT_PROBE_MAX, &count) < 0);
    assert_true(hw_wait_probes_in_file("/dev/null", probes, HW_WAIT_PROBE_MAX, &count) < 0);
    /* Not an ELF file. */
    assert_int_equal(hw_wait_probes_in_file("/proc/self/cmdline", probes, HW_WAIT_PROBE_MAX, &count), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_glibc_wait_functions),
        cmocka_unit_test(test_a_file_without_them),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
