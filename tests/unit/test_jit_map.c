/*
 * test_jit_map.c - naming node's JavaScript frames from V8's perf map.
 *
 * The parser (jit_map.h): the names node 20 and node 18 write, anonymous
 * functions, files with colons and spaces, missing positions, tiers, kinds
 * whose text is not a position (RegExp); overlapping ranges, where the
 * later line wins; range boundaries; every kind of malformed line skipped
 * and counted; empty input; the entry cap; and, on 100k random entries,
 * every lookup against a plain scan for the last line holding the pc.
 *
 * The loader (jit_map_file.h) on real files at /tmp/perf-PID.map, the
 * only path it reads, for pids of children that have exited (so that no
 * live node's file is touched): a missing file, whole lines only, symlinks,
 * hard links, FIFOs (refused without hanging), directories, other users'
 * files (root only), and the size cap.  Every file made is removed.
 * Last, the symbolizer naming a JIT frame of a process that has exited.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/parse/jit_map.h"
#include "agent/symbols/symbols.h"

#define NOBODY_UID 65534

/* ---- helpers ---------------------------------------------------------- */

static hw_jit_map *parse(const char *text, size_t *skipped)
{
    hw_jit_map *m = hw_jit_map_parse(text, strlen(text), skipped);
    assert_non_null(m);
    return m;
}

static hw_js_symbol at(const hw_jit_map *m, uint64_t pc)
{
    hw_js_symbol s;
    if (!hw_jit_map_lookup(m, pc, &s))
        fail_msg("nothing at 0x%" PRIx64, pc);
    assert_true(pc >= s.start && pc - s.start < s.size);
    return s;
}

static void assert_miss(const hw_jit_map *m, uint64_t pc)
{
    hw_js_symbol s;
    if (hw_jit_map_lookup(m, pc, &s))
        fail_msg("0x%" PRIx64 " found in line %zu (%s)", pc, s.map_line, s.function);
}

static void assert_null_or_equal(const char *got, const char *want)
{
    if (want == NULL)
        assert_null(got);
    else
        assert_string_equal(got, want);
}

/* One entry's fields. */
static void expect(const hw_js_symbol *s, const char *kind, char tier, const char *function, const char *file,
                   int line, int column)
{
    assert_null_or_equal(s->kind, kind);
    assert_int_equal(s->tier, tier);
    assert_string_equal(s->function, function);
    assert_null_or_equal(s->source_file, file);
    assert_int_equal(s->source_line, line);
    assert_int_equal(s->source_column, column);
}

/* The name of a one-line map "1000 10 NAME". */
static hw_js_symbol one(hw_jit_map **m, const char *name)
{
    char line[512];
    snprintf(line, sizeof line, "1000 10 %s\n", name);
    size_t skipped = 99;
    *m = parse(line, &skipped);
    assert_int_equal(skipped, 0);
    assert_int_equal(hw_jit_map_count(*m), 1);
    return at(*m, 0x1000);
}

/* ---- names ------------------------------------------------------------ */

static void test_node20_names(void **state)
{
    (void)state;
    const char *text = "7f108afe47c0 1cc JS:*renderHugeTable /tmp/t.js:1:25\n"
                       "7f108afc3400 378 JS:~ node:internal/main/run_main_module:1:1\n"
                       "7f108afe2140 378 Eval:~ /tmp/t.js:1:1\n"
                       "55d0c0a00000 60 Builtin:ArrayPrototypePush\n"
                       "7f108afe3b80 11c JS:^renderHugeTable /tmp/t.js:1:25\n"
                       "7f108afe5000 200 JS:+step /srv/app/loop.js:40:7\n"
                       "7f108afe6000 80 RegExp:^(a|b)+ c:1:2$\n";
    size_t skipped = 99;
    hw_jit_map *m = parse(text, &skipped);
    assert_int_equal(skipped, 0);
    assert_int_equal(hw_jit_map_count(m), 7);

    hw_js_symbol s = at(m, 0x7f108afe47c0 + 0x10);
    expect(&s, "JS", '*', "renderHugeTable", "/tmp/t.js", 1, 25);
    assert_int_equal(s.start, 0x7f108afe47c0);
    assert_int_equal(s.size, 0x1cc);
    assert_int_equal(s.map_line, 1);
    s = at(m, 0x7f108afc3400);
    expect(&s, "JS", '~', "(anonymous)", "node:internal/main/run_main_module", 1, 1);
    s = at(m, 0x7f108afe2140);
    expect(&s, "Eval", '~', "(anonymous)", "/tmp/t.js", 1, 1);
    s = at(m, 0x55d0c0a00010);
    expect(&s, "Builtin", 0, "ArrayPrototypePush", NULL, 0, 0);
    s = at(m, 0x7f108afe3b80);
    expect(&s, "JS", '^', "renderHugeTable", "/tmp/t.js", 1, 25);
    s = at(m, 0x7f108afe5000);
    expect(&s, "JS", '+', "step", "/srv/app/loop.js", 40, 7);
    /* A regexp's source is not a function and a position. */
    s = at(m, 0x7f108afe6000);
    expect(&s, "RegExp", 0, "^(a|b)+ c:1:2$", NULL, 0, 0);
    assert_int_equal(s.map_line, 7);
    hw_jit_map_free(m);
}

static void test_node18_names(void **state)
{
    (void)state;
    const char *text = "3e9a2c043a40 2e4 LazyCompile:*renderHugeTable /tmp/t.js:1\n"
                       "3e9a2c044000 100 Function:~foo file:///x.js:3\n"
                       "3e9a2c045000 100 LazyCompile:~ /srv/app/server.js:12\n"
                       "3e9a2c046000 100 Script:~ /srv/app/server.js:1\n"
                       "3e9a2c047000 100 InterpretedFunction:bar /srv/b.js:9\n";
    size_t skipped = 99;
    hw_jit_map *m = parse(text, &skipped);
    assert_int_equal(skipped, 0);
    hw_js_symbol s = at(m, 0x3e9a2c043a40);
    expect(&s, "LazyCompile", '*', "renderHugeTable", "/tmp/t.js", 1, 0);
    s = at(m, 0x3e9a2c044000);
    expect(&s, "Function", '~', "foo", "file:///x.js", 3, 0);
    s = at(m, 0x3e9a2c045000);
    expect(&s, "LazyCompile", '~', "(anonymous)", "/srv/app/server.js", 12, 0);
    s = at(m, 0x3e9a2c046000);
    expect(&s, "Script", '~', "(anonymous)", "/srv/app/server.js", 1, 0);
    s = at(m, 0x3e9a2c047000);
    expect(&s, "InterpretedFunction", 0, "bar", "/srv/b.js", 9, 0);
    hw_jit_map_free(m);
}

static void test_files_with_colons_and_spaces(void **state)
{
    (void)state;
    hw_jit_map *m;
    hw_js_symbol s = one(&m, "JS:*f file:///srv/a:b/x.js:10:5");
    expect(&s, "JS", '*', "f", "file:///srv/a:b/x.js", 10, 5);
    hw_jit_map_free(m);
    s = one(&m, "JS:~handler node:internal/timers:512:19");
    expect(&s, "JS", '~', "handler", "node:internal/timers", 512, 19);
    hw_jit_map_free(m);
    s = one(&m, "JS:~ file:///C:/work/x.js:2:3");
    expect(&s, "JS", '~', "(anonymous)", "file:///C:/work/x.js", 2, 3);
    hw_jit_map_free(m);
    s = one(&m, "JS:^load /srv/My App/lib/x.js:7:1");
    expect(&s, "JS", '^', "load", "/srv/My App/lib/x.js", 7, 1);
    hw_jit_map_free(m);
    /* Accessors are named "get x" / "set x". */
    s = one(&m, "JS:~get size /srv/My App/m.js:4:6");
    expect(&s, "JS", '~', "get size", "/srv/My App/m.js", 4, 6);
    hw_jit_map_free(m);
    s = one(&m, "JS:*set value node:internal/url:80:2");
    expect(&s, "JS", '*', "set value", "node:internal/url", 80, 2);
    hw_jit_map_free(m);
    /* ...but a function called get is just that. */
    s = one(&m, "JS:~get /srv/My App/x.js:1:1");
    expect(&s, "JS", '~', "get", "/srv/My App/x.js", 1, 1);
    hw_jit_map_free(m);
    /* A script without a path. */
    s = one(&m, "JS:~run evalmachine.<anonymous>:3:9");
    expect(&s, "JS", '~', "run", "evalmachine.<anonymous>", 3, 9);
    hw_jit_map_free(m);
    /* Bytes as written, UTF-8 or not. */
    s = one(&m, "JS:~caf\xc3\xa9 /srv/\xff\x1b.js:1:2");
    expect(&s, "JS", '~', "caf\xc3\xa9", "/srv/\xff\x1b.js", 1, 2);
    hw_jit_map_free(m);
}

static void test_missing_positions(void **state)
{
    (void)state;
    hw_jit_map *m;
    hw_js_symbol s = one(&m, "JS:*foo");
    expect(&s, "JS", '*', "foo", NULL, 0, 0);
    hw_jit_map_free(m);
    s = one(&m, "JS:~ foo");
    expect(&s, "JS", '~', "foo", NULL, 0, 0);
    hw_jit_map_free(m);
    s = one(&m, "JS:~");
    expect(&s, "JS", '~', "(anonymous)", NULL, 0, 0);
    hw_jit_map_free(m);
    s = one(&m, "JS:");
    expect(&s, "JS", 0, "(anonymous)", NULL, 0, 0);
    hw_jit_map_free(m);
    /* A colon and digits but no space: not a position. */
    s = one(&m, "JS:*x.js:1:2");
    expect(&s, "JS", '*', "x.js:1:2", NULL, 0, 0);
    hw_jit_map_free(m);
    /* A position with an empty file is none. */
    s = one(&m, "JS:*f :1:2");
    expect(&s, "JS", '*', "f :1:2", NULL, 0, 0);
    hw_jit_map_free(m);
    /* Too many digits for a line number. */
    s = one(&m, "JS:*f /a.js:12345678901");
    expect(&s, "JS", '*', "f /a.js:12345678901", NULL, 0, 0);
    hw_jit_map_free(m);
    s = one(&m, "JS:*f /a.js:123456789:987654321");
    expect(&s, "JS", '*', "f", "/a.js", 123456789, 987654321);
    hw_jit_map_free(m);
    /* No kind: all of it is the function, whatever it looks like. */
    s = one(&m, "node:internal/x:1:1");
    expect(&s, NULL, 0, "node:internal/x:1:1", NULL, 0, 0);
    hw_jit_map_free(m);
    s = one(&m, "~foo /a.js:1:1");
    expect(&s, NULL, 0, "~foo /a.js:1:1", NULL, 0, 0);
    hw_jit_map_free(m);
    /* Other kinds keep their text whole. */
    s = one(&m, "Stub:CEntry ~x /a.js:1:1");
    expect(&s, "Stub", 0, "CEntry ~x /a.js:1:1", NULL, 0, 0);
    hw_jit_map_free(m);
}

static void test_tiers(void **state)
{
    (void)state;
    const char tiers[] = {'~', '^', '+', '*'};
    for (size_t i = 0; i < sizeof tiers; i++) {
        char name[64];
        snprintf(name, sizeof name, "JS:%cf /a.js:1:2", tiers[i]);
        hw_jit_map *m;
        hw_js_symbol s = one(&m, name);
        expect(&s, "JS", tiers[i], "f", "/a.js", 1, 2);
        hw_jit_map_free(m);
    }
    hw_jit_map *m;
    hw_js_symbol s = one(&m, "JS:f /a.js:1:2"); /* optimisation disabled: no marker */
    expect(&s, "JS", 0, "f", "/a.js", 1, 2);
    hw_jit_map_free(m);
    s = one(&m, "JS:**f /a.js:1:2"); /* one marker only */
    expect(&s, "JS", '*', "*f", "/a.js", 1, 2);
    hw_jit_map_free(m);
}

/* ---- ranges ----------------------------------------------------------- */

static void test_boundaries(void **state)
{
    (void)state;
    hw_jit_map *m = parse("1000 100 JS:~a /a.js:1:1\n"
                           "1100 80 JS:~b /a.js:2:1\n"
                           "2000 1 JS:~c /a.js:3:1\n",
                           NULL);
    assert_miss(m, 0);
    assert_miss(m, 0xfff);
    assert_string_equal(at(m, 0x1000).function, "a");
    assert_string_equal(at(m, 0x10ff).function, "a");
    assert_string_equal(at(m, 0x1100).function, "b"); /* adjacent: the next one's */
    assert_string_equal(at(m, 0x117f).function, "b");
    assert_miss(m, 0x1180);
    assert_miss(m, 0x1fff);
    assert_string_equal(at(m, 0x2000).function, "c");
    assert_miss(m, 0x2001);
    assert_miss(m, UINT64_MAX);
    hw_jit_map_free(m);

    /* The top of the address space: an end of 2^64 - 1 fits. */
    m = parse("fffffffffffffff0 f JS:~top\n", NULL);
    assert_int_equal(hw_jit_map_count(m), 1);
    assert_string_equal(at(m, UINT64_C(0xfffffffffffffffe)).function, "top");
    assert_miss(m, UINT64_MAX);
    hw_jit_map_free(m);
    m = parse("0 1 JS:~zero\n", NULL);
    assert_string_equal(at(m, 0).function, "zero");
    assert_miss(m, 1);
    hw_jit_map_free(m);
}

static void test_later_line_wins(void **state)
{
    (void)state;
    hw_jit_map *m = parse(
        /* moved code: the same range twice */
        "1000 100 JS:~old /a.js:1:1\n"
        "1000 100 JS:*new /a.js:1:1\n"
        /* a later small range inside an earlier big one */
        "2000 1000 JS:~big\n"
        "2400 100 JS:~small\n"
        /* an earlier small range inside a later big one: hidden */
        "5400 100 JS:~hidden\n"
        "5000 1000 JS:~cover\n"
        /* partial overlaps, both ways */
        "7000 200 JS:~left\n"
        "7100 200 JS:~right\n"
        "8100 200 JS:~after\n"
        "8000 200 JS:~before\n",
        NULL);
    assert_int_equal(hw_jit_map_count(m), 10);
    hw_js_symbol s = at(m, 0x1080);
    assert_string_equal(s.function, "new");
    assert_int_equal(s.tier, '*');
    assert_int_equal(s.map_line, 2);

    assert_string_equal(at(m, 0x2000).function, "big");
    assert_string_equal(at(m, 0x23ff).function, "big");
    assert_string_equal(at(m, 0x2400).function, "small");
    assert_string_equal(at(m, 0x24ff).function, "small");
    assert_string_equal(at(m, 0x2500).function, "big");
    assert_string_equal(at(m, 0x2fff).function, "big");
    assert_int_equal(at(m, 0x2500).start, 0x2000); /* the entry's own range, not the visible part */
    assert_int_equal(at(m, 0x2500).size, 0x1000);

    for (uint64_t pc = 0x5000; pc < 0x6000; pc += 0x80)
        assert_string_equal(at(m, pc).function, "cover");

    assert_string_equal(at(m, 0x70ff).function, "left");
    assert_string_equal(at(m, 0x7100).function, "right");
    assert_string_equal(at(m, 0x71ff).function, "right");
    assert_string_equal(at(m, 0x72ff).function, "right");
    assert_miss(m, 0x7300);

    assert_string_equal(at(m, 0x80ff).function, "before");
    assert_string_equal(at(m, 0x81ff).function, "before");
    assert_string_equal(at(m, 0x8200).function, "after");
    assert_string_equal(at(m, 0x82ff).function, "after");

    /* Every entry is still there, hidden or not, in line order. */
    hw_js_symbol e;
    assert_true(hw_jit_map_entry(m, 4, &e));
    assert_string_equal(e.function, "hidden");
    assert_int_equal(e.map_line, 5);
    assert_false(hw_jit_map_entry(m, 10, &e));
    hw_jit_map_free(m);
}

/* A xorshift generator: the same numbers on every run. */
static uint64_t next_random(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* 100k entries, many overlapping, and lookups checked against a scan. */
static void test_many_entries_against_a_scan(void **state)
{
    (void)state;
    enum { N = 100000, LOOKUPS = 1000 };
    uint64_t rng = 0x9e3779b97f4a7c15u;
    size_t cap = (size_t)N * 64;
    char *text = malloc(cap);
    assert_non_null(text);
    uint64_t *starts = malloc(N * sizeof *starts), *sizes = malloc(N * sizeof *sizes);
    assert_non_null(starts);
    assert_non_null(sizes);
    size_t len = 0;
    for (size_t i = 0; i < N; i++) {
        /* Code within 16 MiB, sizes up to 4 KiB: about 20 ranges over each address. */
        starts[i] = 0x7f0000000000u + next_random(&rng) % (16u << 20);
        sizes[i] = 1 + next_random(&rng) % 4096;
        len += (size_t)snprintf(text + len, cap - len, "%" PRIx64 " %" PRIx64 " JS:*f%zu /a.js:%zu:1\n", starts[i],
                                sizes[i], i, i + 1);
    }
    size_t skipped = 99;
    hw_jit_map *m = hw_jit_map_parse(text, len, &skipped);
    assert_non_null(m);
    assert_int_equal(skipped, 0);
    assert_int_equal(hw_jit_map_count(m), N);
    for (size_t k = 0; k < LOOKUPS; k++) {
        uint64_t pc = 0x7f0000000000u - 8192 + next_random(&rng) % ((16u << 20) + 16384);
        if (k % 3 == 0) /* on an edge */
            pc = starts[k] + (k % 2 ? sizes[k] : 0) - (k % 4 == 0);
        size_t want = SIZE_MAX;
        for (size_t i = N; i-- > 0;) {
            if (pc >= starts[i] && pc - starts[i] < sizes[i]) {
                want = i;
                break;
            }
        }
        hw_js_symbol s;
        bool found = hw_jit_map_lookup(m, pc, &s);
        if (want == SIZE_MAX) {
            if (found)
                fail_msg("0x%" PRIx64 ": found line %zu, none holds it", pc, s.map_line);
        } else {
            if (!found || s.map_line != want + 1)
                fail_msg("0x%" PRIx64 ": found %s line %zu, expected line %zu", pc, found ? "" : "no",
                         found ? s.map_line : 0, want + 1);
            assert_int_equal(s.source_line, want + 1);
        }
    }
    hw_jit_map_free(m);
    free(starts);
    free(sizes);
    free(text);
}

/* A map made in two parts (the file read, then what V8 appended) answers as
 * the whole text parsed at once: later lines still win, numbering goes on. */
static void test_append_is_parsing_the_whole(void **state)
{
    (void)state;
    enum { N = 4000, LOOKUPS = 3000 };
    uint64_t rng = 0x2545f4914f6cdd1du;
    size_t cap = (size_t)N * 64;
    char *text = malloc(cap);
    assert_non_null(text);
    size_t len = 0, half = 0;
    for (size_t i = 0; i < N; i++) {
        if (i == N / 2)
            half = len;
        uint64_t start = 0x7f0000000000u + next_random(&rng) % (1u << 20);
        len += (size_t)snprintf(text + len, cap - len, "%" PRIx64 " %" PRIx64 " JS:*f%zu /a.js:%zu:1\n", start,
                                1 + next_random(&rng) % 2048, i, i + 1);
    }
    hw_jit_map *whole = hw_jit_map_parse(text, len, NULL);
    hw_jit_map *parts = hw_jit_map_parse(text, half, NULL);
    assert_non_null(whole);
    assert_non_null(parts);
    assert_int_equal(hw_jit_map_count(parts), N / 2);
    size_t skipped = 99;
    assert_true(hw_jit_map_append(parts, text + half, len - half, &skipped));
    assert_int_equal(skipped, 0);
    assert_int_equal(hw_jit_map_count(parts), N);
    for (size_t k = 0; k < LOOKUPS; k++) {
        uint64_t pc = 0x7f0000000000u - 4096 + next_random(&rng) % ((1u << 20) + 8192);
        hw_js_symbol a, b;
        bool in_whole = hw_jit_map_lookup(whole, pc, &a), in_parts = hw_jit_map_lookup(parts, pc, &b);
        assert_int_equal(in_whole, in_parts);
        if (in_whole) {
            assert_int_equal(a.map_line, b.map_line);
            assert_string_equal(a.function, b.function);
        }
    }
    /* Nothing appended: nothing changes. */
    assert_true(hw_jit_map_append(parts, "", 0, NULL));
    assert_int_equal(hw_jit_map_count(parts), N);
    assert_false(hw_jit_map_append(NULL, "1 1 a\n", 6, NULL));
    hw_jit_map_free(whole);
    hw_jit_map_free(parts);
    free(text);
}

/* ---- what is skipped -------------------------------------------------- */

static void test_malformed_lines_are_skipped_and_counted(void **state)
{
    (void)state;
    const char *bad[] = {
        "zz 10 JS:~nonhex",
        "0x1000 10 JS:~prefixed",
        "1000 0x10 JS:~prefixed",
        "1000 1g JS:~nonhex",
        "-1000 10 JS:~signed",
        "1000 10",
        "1000 10 ",
        "1000 10\t \t",
        "1000",
        "1000 ",
        "",
        " 1000 10 JS:~indented",
        "1000 0 JS:~empty",
        "1000 40000001 JS:~huge",
        "1000 ffffffffffffffff JS:~huge",
        "ffffffffffffff00 100 JS:~wraps_to_zero",
        "ffffffffffffff00 200 JS:~wraps",
        "10000000000000000 10 JS:~start_overflows",
        "1000 10000000000000000 JS:~size_overflows",
        "1000,10 JS:~comma",
    };
    char text[4096] = "";
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        strcat(text, bad[i]);
        strcat(text, "\n");
    }
    strcat(text, "5000 10 JS:~good /a.js:1:1\n");
    size_t skipped = 0;
    hw_jit_map *m = parse(text, &skipped);
    assert_int_equal(skipped, sizeof bad / sizeof bad[0]);
    assert_int_equal(hw_jit_map_count(m), 1);
    hw_js_symbol s = at(m, 0x5000);
    assert_string_equal(s.function, "good");
    assert_int_equal(s.map_line, sizeof bad / sizeof bad[0] + 1);
    assert_miss(m, 0x1000);
    assert_miss(m, 0xffffffffffffff80u);
    hw_jit_map_free(m);

    /* The largest size believed, tabs and several blanks, upper-case hex,
     * leading zeros, CRLF. */
    m = parse("1000 40000000 JS:~largest\n"
              "80000000\t10  \tJS:~tabs\n"
              "ABCDEF00 10 JS:~upper\r\n"
              "00000000000000000000c0000000 10 JS:~zeros\n",
              &skipped);
    assert_int_equal(skipped, 0);
    assert_string_equal(at(m, 0x40000fff).function, "largest");
    assert_string_equal(at(m, 0x80000000).function, "tabs");
    assert_string_equal(at(m, 0xabcdef0f).function, "upper");
    assert_string_equal(at(m, 0xc0000000).function, "zeros");
    hw_jit_map_free(m);
}

static void test_line_length_nul_bytes_and_last_line(void **state)
{
    (void)state;
    /* "1000 10 " plus a name: lines of exactly the limit and one more. */
    size_t prefix = strlen("1000 10 ");
    char *text = malloc(3 * (HW_JIT_MAP_MAX_LINE + 2));
    assert_non_null(text);
    size_t len = 0;
    memcpy(text, "1000 10 ", prefix);
    memset(text + prefix, 'a', HW_JIT_MAP_MAX_LINE - prefix);
    len = HW_JIT_MAP_MAX_LINE;
    text[len++] = '\n';
    memcpy(text + len, "2000 10 ", prefix);
    memset(text + len + prefix, 'b', HW_JIT_MAP_MAX_LINE + 1 - prefix);
    len += HW_JIT_MAP_MAX_LINE + 1;
    text[len++] = '\n';
    size_t skipped = 0;
    hw_jit_map *m = hw_jit_map_parse(text, len, &skipped);
    assert_non_null(m);
    assert_int_equal(skipped, 1);
    assert_int_equal(strlen(at(m, 0x1000).function), HW_JIT_MAP_MAX_LINE - prefix);
    assert_miss(m, 0x2000);
    hw_jit_map_free(m);
    free(text);

    /* NUL bytes: the line is skipped, the next one is read. */
    static const char nul[] = "1000 10 JS:~a\0b\n2000 1\0 JS:~c\n3000 10 JS:~d\n";
    m = hw_jit_map_parse(nul, sizeof nul - 1, &skipped);
    assert_non_null(m);
    assert_int_equal(skipped, 2);
    assert_int_equal(hw_jit_map_count(m), 1);
    assert_string_equal(at(m, 0x3000).function, "d");
    assert_int_equal(at(m, 0x3000).map_line, 3);
    hw_jit_map_free(m);

    /* No newline at the end: the parser takes the last line (the loader
     * does not, see test_loader_reads_whole_lines). */
    m = parse("1000 10 JS:~a\n2000 10 JS:~b /a.js:4:2", &skipped);
    assert_int_equal(skipped, 0);
    hw_js_symbol s = at(m, 0x2000);
    expect(&s, "JS", '~', "b", "/a.js", 4, 2);
    hw_jit_map_free(m);
    /* Blank lines count as skipped; the text after the last newline is a
     * line only if there is some. */
    m = parse("\n\n1000 10 JS:~a\n\n", &skipped);
    assert_int_equal(skipped, 3);
    hw_jit_map_free(m);
}

static void test_empty_input(void **state)
{
    (void)state;
    size_t skipped = 99;
    hw_jit_map *m = hw_jit_map_parse("", 0, &skipped);
    assert_non_null(m);
    assert_int_equal(skipped, 0);
    assert_int_equal(hw_jit_map_count(m), 0);
    assert_miss(m, 0);
    assert_miss(m, 0x1000);
    hw_jit_map_free(m);
    m = hw_jit_map_parse(NULL, 0, NULL);
    assert_non_null(m);
    assert_int_equal(hw_jit_map_count(m), 0);
    hw_jit_map_free(m);
    /* A missing map answers nothing. */
    hw_js_symbol s;
    assert_false(hw_jit_map_lookup(NULL, 0x1000, &s));
    assert_false(hw_jit_map_entry(NULL, 0, &s));
    assert_int_equal(hw_jit_map_count(NULL), 0);
    hw_jit_map_free(NULL);
}

static void test_entry_cap(void **state)
{
    (void)state;
    size_t lines = HW_JIT_MAP_MAX_ENTRIES + 5;
    size_t cap = lines * 24;
    char *text = malloc(cap);
    assert_non_null(text);
    size_t len = 0;
    for (size_t i = 0; i < lines; i++)
        len += (size_t)snprintf(text + len, cap - len, "%zx 1 JS:f\n", i * 2);
    size_t skipped = 0;
    hw_jit_map *m = hw_jit_map_parse(text, len, &skipped);
    free(text);
    assert_non_null(m);
    assert_int_equal(hw_jit_map_count(m), HW_JIT_MAP_MAX_ENTRIES);
    assert_int_equal(skipped, 5);
    assert_int_equal(at(m, (HW_JIT_MAP_MAX_ENTRIES - 1) * 2).map_line, HW_JIT_MAP_MAX_ENTRIES);
    assert_miss(m, HW_JIT_MAP_MAX_ENTRIES * 2);
    hw_jit_map_free(m);
}

/* ---- the loader ------------------------------------------------------- */

typedef struct scratch {
    pid_t pid;         /* a pid no process has now */
    char path[64];     /* /tmp/perf-<pid>.map */
    char extra[96];    /* a second file (a link's target), if any */
} scratch;

/* Remove whatever is at `path` (a file, link, FIFO or empty directory). */
static void remove_path(const char *path)
{
    struct stat st;
    if (path[0] == '\0' || lstat(path, &st) != 0)
        return;
    if (S_ISDIR(st.st_mode))
        rmdir(path);
    else
        unlink(path);
}

/* The pid of a child that has exited and been reaped, with no perf map. */
static int make_scratch(void **state)
{
    scratch *s = calloc(1, sizeof *s);
    assert_non_null(s);
    for (int tries = 0; tries < 100; tries++) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0)
            _exit(0);
        assert_int_equal(waitpid(pid, NULL, 0), pid);
        snprintf(s->path, sizeof s->path, "/tmp/perf-%ld.map", (long)pid);
        struct stat st;
        if (lstat(s->path, &st) != 0 && errno == ENOENT) {
            s->pid = pid;
            break;
        }
    }
    assert_true(s->pid > 0);
    *state = s;
    return 0;
}

static int remove_scratch(void **state)
{
    scratch *s = *state;
    remove_path(s->path);
    remove_path(s->extra);
    free(s);
    return 0;
}

/* Create `path` anew (never through a planted file) with `len` bytes. */
static void write_new(const char *path, const char *text, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        fail_msg("create %s: %s", path, strerror(errno));
    while (len > 0) {
        ssize_t n = write(fd, text, len);
        assert_true(n > 0);
        text += n;
        len -= (size_t)n;
    }
    assert_int_equal(close(fd), 0);
}

/* Expect the load to fail with `err` and a message holding `needle`. */
static void expect_refused(const scratch *s, uid_t owner, int err, const char *needle)
{
    char *error = NULL;
    errno = 0;
    hw_jit_map *m = hw_jit_map_load(s->pid, owner, &error);
    int got = errno;
    if (m || got != err || !error || !strstr(error, needle))
        fail_msg("load: %p errno %d '%s', expected errno %d and '%s'", (void *)m, got, error ? error : "(none)",
                 err, needle);
    assert_non_null(strstr(error, s->path));
    free(error);
}

static const char node_map[] = "7f108afe47c0 1cc JS:*renderHugeTable /tmp/t.js:1:25\n"
                               "7f108afc3400 378 JS:~ node:internal/main/run_main_module:1:1\n";

static void test_loader_missing_file(void **state)
{
    scratch *s = *state;
    assert_false(hw_jit_map_exists(s->pid));
    expect_refused(s, getuid(), ENOENT, "no perf map");
    expect_refused(s, getuid(), ENOENT, HW_JIT_MAP_NODE_FLAGS);
    /* No message asked for: errno alone. */
    errno = 0;
    assert_null(hw_jit_map_load(s->pid, getuid(), NULL));
    assert_int_equal(errno, ENOENT);
}

static void test_loader_reads_whole_lines(void **state)
{
    scratch *s = *state;
    /* A line being written when the file was read: dropped. */
    char text[512];
    snprintf(text, sizeof text, "%s7f108afe6000 80 JS:*partial /tmp/t.j", node_map);
    write_new(s->path, text, strlen(text));
    assert_true(hw_jit_map_exists(s->pid));
    char *error = (char *)"unset";
    hw_jit_map *m = hw_jit_map_load(s->pid, getuid(), &error);
    assert_non_null(m);
    assert_null(error);
    assert_int_equal(hw_jit_map_count(m), 2);
    hw_js_symbol sym = at(m, 0x7f108afe47c0 + 0x1cb);
    expect(&sym, "JS", '*', "renderHugeTable", "/tmp/t.js", 1, 25);
    assert_miss(m, 0x7f108afe6000);
    hw_jit_map_free(m);

    /* An empty file is an empty map. */
    remove_path(s->path);
    write_new(s->path, "", 0);
    m = hw_jit_map_load(s->pid, getuid(), NULL);
    assert_non_null(m);
    assert_int_equal(hw_jit_map_count(m), 0);
    hw_jit_map_free(m);
}

static void test_loader_refuses_symlinks(void **state)
{
    scratch *s = *state;
    /* A readable file of ours behind the link: refused all the same. */
    snprintf(s->extra, sizeof s->extra, "%s.target", s->path);
    write_new(s->extra, node_map, strlen(node_map));
    assert_int_equal(symlink(s->extra, s->path), 0);
    assert_false(hw_jit_map_exists(s->pid));
    expect_refused(s, getuid(), ELOOP, "symbolic link");
    /* Dangling. */
    remove_path(s->extra);
    expect_refused(s, getuid(), ELOOP, "symbolic link");
}

static void test_loader_refuses_hard_links(void **state)
{
    scratch *s = *state;
    snprintf(s->extra, sizeof s->extra, "%s.other", s->path);
    write_new(s->extra, node_map, strlen(node_map));
    assert_int_equal(link(s->extra, s->path), 0);
    expect_refused(s, getuid(), EPERM, "2 hard links");
}

static void test_loader_refuses_fifos_and_directories(void **state)
{
    scratch *s = *state;
    assert_int_equal(mkfifo(s->path, 0644), 0);
    alarm(10); /* a blocking open would hang here: fail instead */
    expect_refused(s, getuid(), EINVAL, "not a regular file");
    alarm(0);
    assert_false(hw_jit_map_exists(s->pid));
    remove_path(s->path);
    assert_int_equal(mkdir(s->path, 0755), 0);
    expect_refused(s, getuid(), EINVAL, "not a regular file");
}

static void test_loader_checks_the_owner(void **state)
{
    if (geteuid() != 0)
        skip(); /* giving a file to another user needs root */
    scratch *s = *state;
    write_new(s->path, node_map, strlen(node_map));
    assert_int_equal(chown(s->path, NOBODY_UID, NOBODY_UID), 0);
    expect_refused(s, 1000, EPERM, "owned by uid 65534");
    expect_refused(s, 1000, EPERM, "(uid 1000)");
    hw_jit_map *m = hw_jit_map_load(s->pid, NOBODY_UID, NULL);
    assert_non_null(m);
    assert_int_equal(hw_jit_map_count(m), 2);
    hw_jit_map_free(m);
    /* Root's file is accepted for any program. */
    assert_int_equal(chown(s->path, 0, 0), 0);
    m = hw_jit_map_load(s->pid, 1000, NULL);
    assert_non_null(m);
    hw_jit_map_free(m);
}

static void test_loader_caps_the_size(void **state)
{
    scratch *s = *state;
    /* Fixed-length lines, one of them across the cap. */
    enum { LINE = 40 };
    size_t lines = HW_JIT_MAP_MAX_FILE_BYTES / LINE + 2;
    char *text = malloc(lines * LINE + 1);
    assert_non_null(text);
    for (size_t i = 0; i < lines; i++) {
        int n = snprintf(text + i * LINE, LINE + 1, "%012zx 10 JS:*f%08zx /a.js:1:1", 0x10000 + i * 0x10, i);
        assert_int_equal(n, LINE - 1);
        text[i * LINE + LINE - 1] = '\n';
    }
    write_new(s->path, text, lines * LINE);
    free(text);
    hw_jit_map *m = hw_jit_map_load(s->pid, getuid(), NULL);
    assert_non_null(m);
    size_t whole = HW_JIT_MAP_MAX_FILE_BYTES / LINE;
    assert_true(HW_JIT_MAP_MAX_FILE_BYTES % LINE != 0); /* a line does straddle the cap */
    assert_int_equal(hw_jit_map_count(m), whole);
    assert_int_equal(at(m, 0x10000 + (whole - 1) * 0x10).map_line, whole);
    assert_miss(m, 0x10000 + whole * 0x10);
    hw_jit_map_free(m);
}

/* Append `text` to `path` (the file V8 keeps writing). */
static void append_to(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    assert_int_equal(close(fd), 0);
}

/* Kept per process: read once, then only what was appended; a new file is
 * read whole; a held map is neither read again nor forgotten. */
static void test_cache_reads_each_byte_once(void **state)
{
    scratch *s = *state;
    write_new(s->path, node_map, strlen(node_map));
    hw_jit_map_cache *c = hw_jit_map_cache_new(0);
    assert_non_null(c);
    hw_jit_map_cache_stats st;
    bool cut = true;
    const hw_jit_map *m = hw_jit_map_cache_get(c, s->pid, getuid(), &cut, NULL);
    assert_non_null(m);
    assert_false(cut);
    assert_int_equal(hw_jit_map_count(m), 2);
    hw_jit_map_cache_put(c, m);
    /* Unchanged: kept. */
    const hw_jit_map *again = hw_jit_map_cache_get(c, s->pid, getuid(), NULL, NULL);
    assert_ptr_equal(again, m);
    hw_jit_map_cache_put(c, again);
    hw_jit_map_cache_get_stats(c, &st);
    assert_int_equal(st.full_reads, 1);
    assert_int_equal(st.reuses, 1);
    assert_int_equal(st.bytes_read, strlen(node_map));
    /* Appended, with a line still being written: only the new whole line is read. */
    const char *more = "7f108afe6000 80 JS:*appended /tmp/t.js:9:1\n7f108afe7000 80 JS:*half";
    append_to(s->path, more);
    m = hw_jit_map_cache_get(c, s->pid, getuid(), NULL, NULL);
    assert_non_null(m);
    assert_int_equal(hw_jit_map_count(m), 3);
    hw_js_symbol sym = at(m, 0x7f108afe6000 + 1);
    expect(&sym, "JS", '*', "appended", "/tmp/t.js", 9, 1);
    assert_int_equal(sym.map_line, 3);
    assert_miss(m, 0x7f108afe7000);
    hw_jit_map_cache_get_stats(c, &st);
    assert_int_equal(st.tail_reads, 1);
    assert_int_equal(st.bytes_read, strlen(node_map) + strlen("7f108afe6000 80 JS:*appended /tmp/t.js:9:1\n"));
    /* Held: the line finished meanwhile is not read until it is given back. */
    append_to(s->path, " /tmp/t.js:12:1\n");
    assert_ptr_equal(hw_jit_map_cache_get(c, s->pid, getuid(), NULL, NULL), m);
    assert_int_equal(hw_jit_map_count(m), 3);
    hw_jit_map_cache_put(c, m);
    hw_jit_map_cache_put(c, m);
    m = hw_jit_map_cache_get(c, s->pid, getuid(), NULL, NULL);
    assert_int_equal(hw_jit_map_count(m), 4);
    sym = at(m, 0x7f108afe7000);
    expect(&sym, "JS", '*', "half", "/tmp/t.js", 12, 1);
    hw_jit_map_cache_put(c, m);
    /* Another file in its place (a new inode): read whole again. */
    remove_path(s->path);
    write_new(s->path, "10 10 JS:*fresh /b.js:1:1\n", strlen("10 10 JS:*fresh /b.js:1:1\n"));
    m = hw_jit_map_cache_get(c, s->pid, getuid(), NULL, NULL);
    assert_non_null(m);
    assert_int_equal(hw_jit_map_count(m), 1);
    hw_jit_map_cache_put(c, m);
    hw_jit_map_cache_get_stats(c, &st);
    assert_int_equal(st.full_reads, 2);
    /* Refused now (given to another user): nothing kept. */
    if (geteuid() == 0) {
        assert_int_equal(chown(s->path, NOBODY_UID, NOBODY_UID), 0);
        errno = 0;
        assert_null(hw_jit_map_cache_get(c, s->pid, 1000, NULL, NULL));
        assert_int_equal(errno, EPERM);
        assert_non_null(m = hw_jit_map_cache_get(c, s->pid, NOBODY_UID, NULL, NULL));
        hw_jit_map_cache_put(c, m);
        hw_jit_map_cache_get_stats(c, &st);
        assert_int_equal(st.full_reads, 3);
    }
    hw_jit_map_cache_free(c);
}

/* A file over the cap is used up to it, said, and never read further. */
static void test_cache_cuts_at_its_cap(void **state)
{
    scratch *s = *state;
    enum { LINE = 40, LINES = 1000 };
    char *text = malloc(LINES * LINE + 1);
    assert_non_null(text);
    for (size_t i = 0; i < LINES; i++) {
        snprintf(text + i * LINE, LINE + 1, "%012zx 10 JS:*f%08zx /a.js:1:1", 0x10000 + i * 0x10, i);
        text[i * LINE + LINE - 1] = '\n';
    }
    write_new(s->path, text, LINES * LINE);
    free(text);
    hw_jit_map_cache *c = hw_jit_map_cache_new(LINE * 100 + LINE / 2); /* 100 whole lines and half one */
    bool cut = false;
    const hw_jit_map *m = hw_jit_map_cache_get(c, s->pid, getuid(), &cut, NULL);
    assert_non_null(m);
    assert_true(cut);
    assert_int_equal(hw_jit_map_count(m), 100);
    hw_jit_map_cache_put(c, m);
    append_to(s->path, "ffff0000 10 JS:*later /a.js:2:1\n");
    m = hw_jit_map_cache_get(c, s->pid, getuid(), &cut, NULL);
    assert_true(cut);
    assert_int_equal(hw_jit_map_count(m), 100);
    hw_jit_map_cache_put(c, m);
    hw_jit_map_cache_stats st;
    hw_jit_map_cache_get_stats(c, &st);
    assert_int_equal(st.full_reads, 1);
    assert_int_equal(st.reuses, 1);
    assert_int_equal(st.bytes_read, 100 * LINE);
    hw_jit_map_cache_free(c);
}

/* A report is often written after its process has exited (the worker
 * runs behind the capture): its JavaScript frames are still named, from the
 * map the process left and the owner the capture recorded. */
static void test_symbolizer_names_frames_of_an_exited_process(void **state)
{
    scratch *s = *state;
    write_new(s->path, node_map, strlen(node_map));
    /* One file mapping (this test's own executable, below the JIT range),
     * so that the symbolizer knows what is not a file. */
    char exe[256];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    assert_true(n > 0);
    exe[n] = '\0';
    char maps[512];
    snprintf(maps, sizeof maps, "555555554000-555555555000 r--p 00000000 00:00 0 %s\n", exe);
    strcat(maps, "7f108afc0000-7f108aff0000 r-xp 00000000 00:00 0 \n");
    uint64_t pc = 0x7f108afe47c0 + 0x40;

    hw_symbolizer *sym = hw_symbolizer_new(s->pid, maps, strlen(maps), NULL);
    assert_non_null(sym);
    hw_frame f = {0};
    /* Not a node named by its map: the map is not even looked at. */
    hw_symbolizer_set_owner(sym, getuid());
    hw_symbolize_frame(sym, pc, true, &f);
    assert_null(f.symbol_name);
    assert_int_equal(hw_symbolizer_js_map_errno(sym), 0);
    hw_frame_clear(&f);
    hw_symbolizer_free(sym);

    sym = hw_symbolizer_new(s->pid, maps, strlen(maps), NULL);
    assert_non_null(sym);
    hw_symbolizer_allow_js_map(sym, true);
    hw_symbolize_frame(sym, pc, true, &f);
    assert_null(f.symbol_name); /* /proc/PID is gone: whose file is it? */
    assert_int_equal(hw_symbolizer_js_map_errno(sym), ENOENT);
    hw_frame_clear(&f);
    hw_symbolizer_free(sym);

    sym = hw_symbolizer_new(s->pid, maps, strlen(maps), NULL);
    assert_non_null(sym);
    hw_symbolizer_allow_js_map(sym, true);
    hw_symbolizer_set_owner(sym, getuid());
    hw_symbolize_frame(sym, pc, true, &f);
    assert_non_null(f.symbol_name);
    assert_string_equal(f.symbol_name, "renderHugeTable");
    assert_int_equal(f.language, HW_LANG_JAVASCRIPT);
    assert_int_equal(f.source_line, 1);
    assert_int_equal(hw_symbolizer_js_map_errno(sym), 0);
    hw_frame_clear(&f);
    hw_symbolizer_free(sym);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_node20_names),
        cmocka_unit_test(test_node18_names),
        cmocka_unit_test(test_files_with_colons_and_spaces),
        cmocka_unit_test(test_missing_positions),
        cmocka_unit_test(test_tiers),
        cmocka_unit_test(test_boundaries),
        cmocka_unit_test(test_later_line_wins),
        cmocka_unit_test(test_many_entries_against_a_scan),
        cmocka_unit_test(test_malformed_lines_are_skipped_and_counted),
        cmocka_unit_test(test_line_length_nul_bytes_and_last_line),
        cmocka_unit_test(test_empty_input),
        cmocka_unit_test(test_entry_cap),
        cmocka_unit_test(test_append_is_parsing_the_whole),
        cmocka_unit_test_setup_teardown(test_loader_missing_file, make_scratch, remove_scratch),
        cmocka_unit_test_setup_teardown(test_loader_reads_whole_lines, make_scratch, remove_scratch),
        cmocka_unit_test_setup_teardown(test_loader_refuses_symlinks, make_scratch, remove_scratch),
        cmocka_unit_test_setup_teardown(test_loader_refuses_hard_links, make_scratch, remove_scratch),
        cmocka_unit_test_setup_teardown(test_loader_refuses_fifos_and_directories, make_scratch, remove_scratch),
        cmocka_unit_test_setup_teardown(test_loader_checks_the_owner, make_scratch, remove_scratch),
        cmocka_unit_test_setup_teardown(test_loader_caps_the_size, make_scratch, remove_scratch),
        cmocka_unit_test_setup_teardown(test_cache_reads_each_byte_once, make_scratch, remove_scratch),
        cmocka_unit_test_setup_teardown(test_cache_cuts_at_its_cap, make_scratch, remove_scratch),
        cmocka_unit_test_setup_teardown(test_symbolizer_names_frames_of_an_exited_process, make_scratch,
                                        remove_scratch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
