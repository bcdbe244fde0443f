/*
 * test_plt_names.c - PLT stubs named by their relocations
 * (src/agent/symbols/plt_names.c, core/parse/plt_entry.c).
 *
 * The oracle is binutils' objdump, which labels each stub "<NAME@plt>":
 * every stub objdump names in this test's own executable (built once as
 * the linker lays a PLT out by default, once with IBT's .plt.sec) gets the
 * same name and entry from hangwatch, at its first byte and inside it; an
 * address in .text is no stub; and a forged entry, a slot no relocation
 * names, reads as "[plt]".
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <fcntl.h>
#include <gelf.h>
#include <unistd.h>

#include "agent/symbols/plt_names.h"
#include "core/parse/plt_entry.h"

static Elf *open_self(int *fd)
{
    elf_version(EV_CURRENT);
    *fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    assert_true(*fd >= 0);
    Elf *elf = elf_begin(*fd, ELF_C_READ, NULL);
    assert_non_null(elf);
    return elf;
}

static void test_objdumps_stubs_named_alike(void **state)
{
    (void)state;
    int fd;
    Elf *elf = open_self(&fd);
    char self[4096], command[4200];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1); /* objdump's own would be objdump */
    assert_true(len > 0);
    self[len] = '\0';
    assert_null(strchr(self, '\''));
    snprintf(command, sizeof command, "objdump -d -j .plt -j .plt.sec -j .plt.got '%s' 2>/dev/null", self);
    FILE *dump = popen(command, "r");
    assert_non_null(dump);
    char line[512];
    int named = 0;
    while (fgets(line, sizeof line, dump) != NULL) {
        unsigned long long addr;
        char label[256];
        size_t n = 0;
        if (sscanf(line, "%llx <%255[^>]>:", &addr, label) != 2 || (n = strlen(label)) < 5 ||
            strcmp(label + n - 4, "@plt") != 0)
            continue;
        for (uint64_t inside = 0; inside < 6; inside += 5) {
            char *name = NULL;
            uint64_t entry = 0;
            if (!hw_plt_stub_name(elf, addr + inside, &name, &entry))
                fail_msg("%s at %#llx+%u: not a stub", label, addr, (unsigned)inside);
            assert_non_null(name);
            assert_string_equal(name, label);
            assert_int_equal(entry, addr);
            free(name);
        }
        named++;
    }
    pclose(dump);
    /* cmocka's and libc's functions are called through the PLT */
    assert_true(named >= 3);
    elf_end(elf);
    close(fd);
}

static void test_text_is_no_stub(void **state)
{
    (void)state;
    int fd;
    Elf *elf = open_self(&fd);
    size_t shstrndx;
    assert_int_equal(elf_getshdrstrndx(elf, &shstrndx), 0);
    bool seen = false;
    for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn != NULL; scn = elf_nextscn(elf, scn)) {
        GElf_Shdr sh;
        assert_non_null(gelf_getshdr(scn, &sh));
        if (strcmp(elf_strptr(elf, shstrndx, sh.sh_name), ".text") != 0)
            continue;
        char *name = NULL;
        uint64_t entry = 0;
        assert_false(hw_plt_stub_name(elf, sh.sh_addr + 16, &name, &entry));
        assert_null(name);
        seen = true;
    }
    assert_true(seen);
    elf_end(elf);
    close(fd);
}

static void test_entry_layouts(void **state)
{
    (void)state;
    hw_plt_target t;
    /* .plt, lazy: jmp *0x2fe2(%rip); push $3; jmp PLT0 */
    const unsigned char lazy[16] = {0xff, 0x25, 0xe2, 0x2f, 0, 0, 0x68, 3, 0, 0, 0, 0xe9, 0xc0, 0xff, 0xff, 0xff};
    assert_true(hw_plt_entry_target(lazy, sizeof lazy, 0x1030, 16, 0x1035, &t));
    assert_int_equal(t.entry, 0x1030);
    assert_true(t.has_slot);
    assert_int_equal(t.slot, 0x1036 + 0x2fe2);
    assert_true(t.has_index);
    assert_int_equal(t.index, 3);
    /* .plt.sec: endbr64; bnd jmp *-0x10(%rip); nop */
    const unsigned char sec[16] = {0xf3, 0x0f, 0x1e, 0xfa, 0xf2, 0xff, 0x25, 0xf0, 0xff, 0xff, 0xff, 0x0f, 0x1f, 0x44, 0, 0};
    assert_true(hw_plt_entry_target(sec, sizeof sec, 0x2000, 16, 0x200f, &t));
    assert_true(t.has_slot);
    assert_false(t.has_index);
    assert_int_equal(t.slot, 0x200b - 0x10);
    /* .plt with IBT: endbr64; push $7; bnd jmp PLT0 */
    const unsigned char ibt[16] = {0xf3, 0x0f, 0x1e, 0xfa, 0x68, 7, 0, 0, 0, 0xf2, 0xe9, 0xe1, 0xff, 0xff, 0xff, 0x90};
    assert_true(hw_plt_entry_target(ibt, sizeof ibt, 0x3000, 16, 0x3000, &t));
    assert_false(t.has_slot);
    assert_true(t.has_index);
    assert_int_equal(t.index, 7);
    /* .plt.got with 8-byte entries: the second entry */
    const unsigned char got8[16] = {0xff, 0x25, 0x10, 0, 0, 0, 0x66, 0x90, 0xff, 0x25, 0x20, 0, 0, 0, 0x66, 0x90};
    assert_true(hw_plt_entry_target(got8, sizeof got8, 0x4000, 8, 0x4009, &t));
    assert_int_equal(t.entry, 0x4008);
    assert_int_equal(t.slot, 0x400e + 0x20);
    /* outside, a partial entry, an entry of neither layout, a bad size */
    assert_false(hw_plt_entry_target(lazy, sizeof lazy, 0x1030, 16, 0x1040, &t));
    assert_false(hw_plt_entry_target(lazy, 10, 0x1030, 16, 0x1031, &t));
    const unsigned char junk[16] = {0x90, 0x90};
    assert_false(hw_plt_entry_target(junk, sizeof junk, 0, 16, 4, &t));
    assert_false(hw_plt_entry_target(lazy, sizeof lazy, 0x1030, 12, 0x1031, &t));
    /* a jump cut off by the entry's end is not read */
    const unsigned char cut[8] = {0x90, 0x90, 0x90, 0xff, 0x25, 1, 2, 3};
    assert_false(hw_plt_entry_target(cut, sizeof cut, 0, 8, 0, &t));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_objdumps_stubs_named_alike),
        cmocka_unit_test(test_text_is_no_stub),
        cmocka_unit_test(test_entry_layouts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
