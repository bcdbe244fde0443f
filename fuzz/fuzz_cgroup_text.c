/*
 * fuzz_cgroup_text.c - the parsers of core/parse/cgroup_text.h, which the
 * root-run agent applies to another process's /proc/PID/cgroup, its own
 * mountinfo and a cgroup's CPU files to say how a CPU quota throttled it.
 *
 * Feeds: the input bytes, NUL bytes and all, in a buffer of exactly their
 * length, to every parser: as a cgroup file (the v1 "cpu" path into output
 * buffers of every small size the first byte picks, and the v2 path), as
 * mountinfo (v1 "cpu" and cgroup2 mounts, with and without a cgroup path
 * that their roots must hold), as cpu.stat (each key both versions have),
 * as cgroup.controllers, and as the quota, period and cpu.max files.
 *
 * Proves: no crash, leak or read past the input; a path found is
 * NUL-terminated within its buffer, absolute and canonical (no empty, "."
 * or ".." component) and a copy of bytes of the input; a mount found has an
 * absolute mount point and a canonical root that holds the path asked for;
 * outputs are untouched when nothing is found; a limit found is positive.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/parse/cgroup_text.h"

#define CHECK(cond)                                                                                                    \
    do {                                                                                                               \
        if (!(cond))                                                                                                   \
            __builtin_trap();                                                                                          \
    } while (0)

#define UNTOUCHED 0xA5A5A5A5A5A5A5A5ull

static bool canonical(const char *path)
{
    if (path[0] != '/')
        return false;
    if (path[1] == '\0')
        return true;
    for (const char *p = path; *p != '\0';) {
        const char *next = strchr(p + 1, '/');
        size_t n = next != NULL ? (size_t)(next - p - 1) : strlen(p + 1);
        if (n == 0 || (n == 1 && p[1] == '.') || (n == 2 && p[1] == '.' && p[2] == '.'))
            return false;
        p = next != NULL ? next : p + 1 + n;
    }
    return true;
}

/* Is `s` (not empty) a run of bytes of in[0, len)? */
static bool from_input(const char *s, const uint8_t *in, size_t len)
{
    size_t n = strlen(s);
    if (n > len)
        return false;
    for (size_t i = 0; i + n <= len; i++)
        if (memcmp(in + i, s, n) == 0)
            return true;
    return false;
}

static void check_path(bool found, const char *out, size_t size, const uint8_t *in, size_t len)
{
    if (!found) {
        CHECK(size == 0 || out[0] == 'Z');
        return;
    }
    CHECK(memchr(out, '\0', size) != NULL);
    CHECK(canonical(out));
    CHECK(from_input(out, in, len));
}

static void check_mount(bool found, const hw_cgroup_mount *m, const char *cgroup_path)
{
    if (!found) {
        CHECK(m->mount_point[0] == 'Z' && m->root[0] == 'Z');
        return;
    }
    CHECK(memchr(m->mount_point, '\0', sizeof m->mount_point) != NULL);
    CHECK(memchr(m->root, '\0', sizeof m->root) != NULL);
    CHECK(m->mount_point[0] == '/');
    CHECK(canonical(m->root));
    if (cgroup_path != NULL) {
        const char *rest = hw_cgroup_relative_path(cgroup_path, m->root);
        CHECK(rest != NULL && rest[0] == '/');
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    char *text = malloc(len > 0 ? len : 1); /* exactly the input: ASan sees any read past it */
    CHECK(text != NULL);
    memcpy(text, data, len);

    /* /proc/PID/cgroup. */
    size_t sizes[3] = {len > 0 ? data[0] % 24 : 0, 64, HW_CGROUP_PATH_MAX};
    char *out = malloc(HW_CGROUP_PATH_MAX);
    CHECK(out != NULL);
    for (int i = 0; i < 3; i++) {
        memset(out, 'Z', HW_CGROUP_PATH_MAX);
        check_path(hw_cgroup_v1_path(text, len, "cpu", out, sizes[i]), out, sizes[i], data, len);
    }
    memset(out, 'Z', HW_CGROUP_PATH_MAX);
    check_path(hw_cgroup_v2_path(text, len, out, HW_CGROUP_PATH_MAX), out, HW_CGROUP_PATH_MAX, data, len);

    /* mountinfo. */
    hw_cgroup_mount *m = malloc(sizeof *m);
    CHECK(m != NULL);
    static const char *const paths[] = {NULL, "/", "/docker/abc/app", "/a b"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        memset(m, 'Z', sizeof *m);
        check_mount(hw_cgroup_v1_mount(text, len, "cpu", paths[i], m), m, paths[i]);
        memset(m, 'Z', sizeof *m);
        check_mount(hw_cgroup_v2_mount(text, len, paths[i], m), m, paths[i]);
    }
    /* Relative paths of the input's own v2 path against roots. */
    if (hw_cgroup_v2_path(text, len, out, HW_CGROUP_PATH_MAX)) {
        const char *rest = hw_cgroup_relative_path(out, "/");
        CHECK(rest == out);
        rest = hw_cgroup_relative_path(out, out);
        CHECK(rest != NULL && strcmp(rest, "/") == 0);
    }
    free(m);
    free(out);

    /* cpu.stat and cgroup.controllers. */
    static const char *const keys[] = {"nr_periods", "nr_throttled", "throttled_time", "throttled_usec", ""};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        uint64_t v = UNTOUCHED;
        hw_cgroup_key k = hw_cgroup_stat_value(text, len, keys[i], &v);
        CHECK(k == HW_CGROUP_KEY_FOUND || v == UNTOUCHED);
        CHECK(k != HW_CGROUP_KEY_FOUND || keys[i][0] != '\0');
    }
    bool has = hw_cgroup_controllers_has(text, len, "cpu");
    CHECK(!has || len >= 3);

    /* The limit files. */
    bool limited = true;
    uint64_t quota = UNTOUCHED, period = UNTOUCHED;
    if (hw_cgroup_v1_quota(text, len, &limited, &quota))
        CHECK(limited ? quota > 0 : quota == UNTOUCHED);
    else
        CHECK(quota == UNTOUCHED);
    if (hw_cgroup_v1_period(text, len, &period))
        CHECK(period > 0);
    limited = true;
    quota = period = UNTOUCHED;
    if (hw_cgroup_v2_cpu_max(text, len, &limited, &quota, &period)) {
        CHECK(period > 0);
        CHECK(limited ? quota > 0 : quota == UNTOUCHED);
    } else {
        CHECK(quota == UNTOUCHED && period == UNTOUCHED);
    }

    free(text);
    return 0;
}
