/*
 * test_cgroup_text.c - the parsers of the texts that say which CPU cgroup
 * a process is in and how its limit holds it (core/parse/cgroup_text.h).
 *
 * /proc/PID/cgroup as cgroup v1 (hybrid, with cpu,cpuacct together and
 * apart), v2 alone, paths with colons and spaces, and the paths refused
 * (outside the cgroup namespace, not canonical, a forged second line, too
 * long); mountinfo lines of real systems, escaped mount points and roots,
 * the choice among several mounts by the cgroup's path, and malformed
 * lines; roots and relative paths; cgroup.controllers; cpu.stat of both
 * versions, with keys that only start like the one asked for and numbers
 * that do not fit; the quota and period files and cpu.max.  Then texts cut
 * short (no terminator), garbage and every prefix of the real texts, which
 * must never be read past their length.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/parse/cgroup_text.h"

/* ---- texts from real systems ------------------------------------------ */

/* Ubuntu 20.04 (hybrid): cpu and cpuacct share a hierarchy. */
static const char hybrid_cgroup[] = "12:cpu,cpuacct:/system.slice/app.service\n"
                                    "11:cpuset:/\n"
                                    "10:memory:/system.slice/app.service\n"
                                    "9:devices:/system.slice/app.service\n"
                                    "3:net_cls,net_prio:/\n"
                                    "2:pids:/system.slice/app.service\n"
                                    "1:name=systemd:/system.slice/app.service\n"
                                    "0::/system.slice/app.service\n";

/* A machine whose cpu and cpuacct are mounted apart: cpuacct must not pass
 * for cpu. */
static const char apart_cgroup[] = "9:name=systemd:/\n"
                                   "2:cpuacct:/wrong\n"
                                   "1:cpu:/right\n"
                                   "0::/\n";

/* Debian 12 (v2 only). */
static const char unified_cgroup[] = "0::/user.slice/user-1000.slice/session-2.scope\n";

static const char hybrid_mountinfo[] =
    "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw,errors=remount-ro\n"
    "25 22 0:23 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755\n"
    "26 25 0:24 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate\n"
    "27 25 0:25 / /sys/fs/cgroup/systemd rw,nosuid,nodev,noexec,relatime shared:11 - cgroup cgroup "
    "rw,xattr,name=systemd\n"
    "30 25 0:28 / /sys/fs/cgroup/cpuacct rw,nosuid,nodev,noexec,relatime shared:14 - cgroup cgroup rw,cpuacct\n"
    "31 25 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:15 - cgroup cgroup "
    "rw,cpu,cpuacct\n"
    "32 25 0:30 / /sys/fs/cgroup/cpuset rw,nosuid,nodev,noexec,relatime shared:16 - cgroup cgroup rw,cpuset\n";

static const char unified_mountinfo[] =
    "21 26 0:20 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw\n"
    "29 21 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 "
    "rw,nsdelegate,memory_recursiveprot\n";

static const char v1_stat[] = "nr_periods 12\nnr_throttled 3\nthrottled_time 123456789\nnr_bursts 0\nburst_time 0\n";
static const char v2_stat[] = "usage_usec 1000\nuser_usec 600\nsystem_usec 400\nnr_periods 50\nnr_throttled 10\n"
                              "throttled_usec 1800000\nnr_bursts 0\nburst_usec 0\n";

/* ---- helpers ---------------------------------------------------------- */

static const char *v1_path(const char *text, const char *controller)
{
    static char out[HW_CGROUP_PATH_MAX];
    strcpy(out, "untouched");
    return hw_cgroup_v1_path(text, strlen(text), controller, out, sizeof out) ? out : NULL;
}

static const char *v2_path(const char *text)
{
    static char out[HW_CGROUP_PATH_MAX];
    strcpy(out, "untouched");
    return hw_cgroup_v2_path(text, strlen(text), out, sizeof out) ? out : NULL;
}

static hw_cgroup_mount mount_out;

static bool v1_mount(const char *text, const char *controller, const char *cgroup_path)
{
    memset(&mount_out, 0, sizeof mount_out);
    return hw_cgroup_v1_mount(text, strlen(text), controller, cgroup_path, &mount_out);
}

static bool v2_mount(const char *text, const char *cgroup_path)
{
    memset(&mount_out, 0, sizeof mount_out);
    return hw_cgroup_v2_mount(text, strlen(text), cgroup_path, &mount_out);
}

static hw_cgroup_key stat_value(const char *text, const char *key, uint64_t *value)
{
    *value = 777; /* left alone unless found */
    return hw_cgroup_stat_value(text, strlen(text), key, value);
}

/* A quota file: 1 limited (*quota set), 0 unlimited, -1 refused. */
static int v1_quota(const char *text, uint64_t *quota)
{
    bool limited = true;
    *quota = 777;
    if (!hw_cgroup_v1_quota(text, strlen(text), &limited, quota))
        return -1;
    return limited ? 1 : 0;
}

static int cpu_max(const char *text, uint64_t *quota, uint64_t *period)
{
    bool limited = true;
    *quota = 777;
    *period = 777;
    if (!hw_cgroup_v2_cpu_max(text, strlen(text), &limited, quota, period))
        return -1;
    return limited ? 1 : 0;
}

/* ---- /proc/PID/cgroup -------------------------------------------------- */

static void test_hybrid_cgroup_file(void **state)
{
    (void)state;
    assert_string_equal(v1_path(hybrid_cgroup, "cpu"), "/system.slice/app.service");
    assert_string_equal(v1_path(hybrid_cgroup, "cpuacct"), "/system.slice/app.service");
    assert_string_equal(v1_path(hybrid_cgroup, "cpuset"), "/");
    assert_string_equal(v1_path(hybrid_cgroup, "net_prio"), "/");
    assert_string_equal(v1_path(hybrid_cgroup, "name=systemd"), "/system.slice/app.service");
    assert_null(v1_path(hybrid_cgroup, "blkio"));
    assert_null(v1_path(hybrid_cgroup, "net")); /* a part of a name is not a name */
    assert_null(v1_path(hybrid_cgroup, ""));
    assert_string_equal(v2_path(hybrid_cgroup), "/system.slice/app.service");

    assert_string_equal(v1_path(apart_cgroup, "cpu"), "/right");
    assert_string_equal(v1_path(apart_cgroup, "cpuacct"), "/wrong");
    assert_string_equal(v2_path(apart_cgroup), "/");
}

static void test_unified_cgroup_file(void **state)
{
    (void)state;
    assert_null(v1_path(unified_cgroup, "cpu"));
    assert_string_equal(v2_path(unified_cgroup), "/user.slice/user-1000.slice/session-2.scope");
    /* No newline at the end, colons and spaces in the path. */
    assert_string_equal(v2_path("0::/a:b/c d"), "/a:b/c d");
    assert_string_equal(v1_path("4:cpu:/x:y", "cpu"), "/x:y");
    /* The v2 line has hierarchy 0 and no controllers. */
    assert_null(v2_path("1::/a\n"));
    assert_null(v2_path("0:cpu:/a\n"));
}

static void test_cgroup_paths_refused(void **state)
{
    (void)state;
    /* Outside the reader's cgroup namespace. */
    assert_null(v2_path("0::/../../system.slice/x\n"));
    assert_null(v1_path("4:cpu:/..\n", "cpu"));
    /* Not canonical. */
    assert_null(v2_path("0::app\n"));
    assert_null(v2_path("0::\n"));
    assert_null(v2_path("0::/a//b\n"));
    assert_null(v2_path("0::/a/\n"));
    assert_null(v2_path("0::/a/./b\n"));
    assert_string_equal(v2_path("0::/a/.b/..c\n"), "/a/.b/..c"); /* names that only start with dots */
    /* A NUL byte in the path. */
    static const char nul[] = "0::/a\0b\n";
    char out[64];
    assert_false(hw_cgroup_v2_path(nul, sizeof nul - 1, out, sizeof out));
    /* A second line naming the controller: forged (a cgroup name holding a
     * newline), so neither is believed. */
    assert_null(v1_path("4:cpu,cpuacct:/a\n7:cpu:/b\n", "cpu"));
    assert_null(v2_path("0::/evil\n0::/a\n"));
    /* Malformed lines are skipped, not taken. */
    assert_string_equal(v1_path("x:cpu:/bad\n:cpu:/bad2\ncpu:/bad3\n4:cpu:/good\n", "cpu"), "/good");
    /* Missing arguments. */
    assert_false(hw_cgroup_v1_path(NULL, 0, "cpu", out, sizeof out));
    assert_false(hw_cgroup_v1_path("4:cpu:/a", 8, NULL, out, sizeof out));
    assert_false(hw_cgroup_v2_path("0::/a", 5, NULL, 10));
}

static void test_cgroup_path_bounds(void **state)
{
    (void)state;
    char out[8];
    memset(out, 'z', sizeof out);
    /* "/abcdef" is 7 bytes: it fits in 8 with its NUL, "/abcdefg" does not. */
    assert_true(hw_cgroup_v2_path("0::/abcdef\n", 11, out, sizeof out));
    assert_string_equal(out, "/abcdef");
    memset(out, 'z', sizeof out);
    assert_false(hw_cgroup_v2_path("0::/abcdefg\n", 12, out, sizeof out));
    assert_int_equal(out[0], 'z'); /* untouched */
    assert_false(hw_cgroup_v2_path("0::/a\n", 6, out, 0));

    /* The length given is the text, whatever follows it. */
    static const char longer[] = "4:cpu:/appXXXX\n0::/more";
    char big[64];
    assert_true(hw_cgroup_v1_path(longer, 10, "cpu", big, sizeof big));
    assert_string_equal(big, "/app");
    assert_false(hw_cgroup_v2_path(longer, 16, big, sizeof big)); /* "0" alone */

    /* A path of HW_CGROUP_PATH_MAX bytes does not fit the longest buffer. */
    size_t n = HW_CGROUP_PATH_MAX + 8;
    char *text = malloc(n);
    char *path = malloc(HW_CGROUP_PATH_MAX);
    assert_non_null(text);
    assert_non_null(path);
    memcpy(text, "0::", 3);
    memset(text + 3, 'a', n - 3);
    text[3] = '/';
    assert_false(hw_cgroup_v2_path(text, 3 + HW_CGROUP_PATH_MAX, path, HW_CGROUP_PATH_MAX));
    assert_true(hw_cgroup_v2_path(text, 3 + HW_CGROUP_PATH_MAX - 1, path, HW_CGROUP_PATH_MAX));
    assert_int_equal(strlen(path), HW_CGROUP_PATH_MAX - 1);
    free(path);
    free(text);
}

/* ---- mountinfo -------------------------------------------------------- */

static void test_hybrid_mountinfo(void **state)
{
    (void)state;
    assert_true(v1_mount(hybrid_mountinfo, "cpu", NULL));
    assert_string_equal(mount_out.mount_point, "/sys/fs/cgroup/cpu,cpuacct");
    assert_string_equal(mount_out.root, "/");
    assert_true(v1_mount(hybrid_mountinfo, "cpuacct", NULL));
    assert_string_equal(mount_out.mount_point, "/sys/fs/cgroup/cpuacct"); /* the first */
    assert_true(v1_mount(hybrid_mountinfo, "name=systemd", "/x"));
    assert_string_equal(mount_out.mount_point, "/sys/fs/cgroup/systemd");
    assert_false(v1_mount(hybrid_mountinfo, "memory", NULL));
    assert_false(v1_mount(hybrid_mountinfo, "xattr=1", NULL));
    assert_false(v1_mount(hybrid_mountinfo, "rw,cpu", NULL));
    /* "ro" is a mount option of the tmpfs, not a cgroup controller. */
    assert_false(v1_mount(hybrid_mountinfo, "ro", NULL));
    assert_true(v2_mount(hybrid_mountinfo, "/system.slice/app.service"));
    assert_string_equal(mount_out.mount_point, "/sys/fs/cgroup/unified");
}

static void test_unified_mountinfo(void **state)
{
    (void)state;
    assert_false(v1_mount(unified_mountinfo, "cpu", NULL));
    assert_true(v2_mount(unified_mountinfo, NULL));
    assert_string_equal(mount_out.mount_point, "/sys/fs/cgroup");
    assert_string_equal(mount_out.root, "/");
    /* A line without optional fields, and one with several. */
    assert_true(v2_mount("7 1 0:5 / /cg rw - cgroup2 none rw\n", NULL));
    assert_string_equal(mount_out.mount_point, "/cg");
    assert_true(v2_mount("7 1 0:5 / /cg rw shared:1 master:2 unbindable - cgroup2 none rw", NULL));
    assert_string_equal(mount_out.mount_point, "/cg");
}

static void test_mountinfo_escapes(void **state)
{
    (void)state;
    assert_true(v1_mount("40 25 0:29 /docker/a\\040b /sys/fs/cgroup/my\\040cpu\\011x\\134y rw - cgroup cgroup rw,cpu\n",
                         "cpu", NULL));
    assert_string_equal(mount_out.mount_point, "/sys/fs/cgroup/my cpu\tx\\y");
    assert_string_equal(mount_out.root, "/docker/a b");

    /* Backslashes that start no escape, and an escaped NUL: the line is
     * skipped and the next one taken. */
    static const char *bad[] = {"/m\\04", "/m\\", "/m\\x41", "/m\\000", "/m\\400", "/m\\8aa", "/m\\\\"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[256];
        snprintf(text, sizeof text, "1 1 0:1 / %s rw - cgroup2 cgroup2 rw\n2 1 0:2 / /good rw - cgroup2 cgroup2 rw\n",
                 bad[i]);
        assert_true(v2_mount(text, NULL));
        assert_string_equal(mount_out.mount_point, "/good");
    }
    /* An escape is three digits; what follows is text. */
    assert_true(v2_mount("1 1 0:1 / /m\\0400 rw - cgroup2 cgroup2 rw\n", NULL));
    assert_string_equal(mount_out.mount_point, "/m 0");
}

static void test_mountinfo_roots(void **state)
{
    (void)state;
    /* A container's view: the hierarchy's /docker/abc mounted; a cgroup
     * elsewhere is not in this mount. */
    static const char text[] = "50 40 0:29 /docker/abc /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu,cpuacct\n"
                               "51 40 0:29 / /host/cpu rw - cgroup cgroup rw,cpu,cpuacct\n";
    assert_true(v1_mount(text, "cpu", "/docker/abc/app"));
    assert_string_equal(mount_out.mount_point, "/sys/fs/cgroup/cpu");
    assert_string_equal(mount_out.root, "/docker/abc");
    assert_true(v1_mount(text, "cpu", "/docker/abc"));
    assert_string_equal(mount_out.mount_point, "/sys/fs/cgroup/cpu");
    assert_true(v1_mount(text, "cpu", "/docker/abcd"));
    assert_string_equal(mount_out.mount_point, "/host/cpu");
    assert_true(v1_mount(text, "cpu", "/system.slice"));
    assert_string_equal(mount_out.mount_point, "/host/cpu");

    /* Roots that are not canonical, a relative mount point: skipped. */
    assert_false(v2_mount("1 1 0:1 /.. /cg rw - cgroup2 cgroup2 rw\n", NULL));
    assert_false(v2_mount("1 1 0:1 /a/ /cg rw - cgroup2 cgroup2 rw\n", NULL));
    assert_false(v2_mount("1 1 0:1 / cg rw - cgroup2 cgroup2 rw\n", NULL));

    assert_string_equal(hw_cgroup_relative_path("/a/b", "/"), "/a/b");
    assert_string_equal(hw_cgroup_relative_path("/a/b", "/a"), "/b");
    assert_string_equal(hw_cgroup_relative_path("/a/b", "/a/"), "/b");
    assert_string_equal(hw_cgroup_relative_path("/a", "/a"), "/");
    assert_string_equal(hw_cgroup_relative_path("/", "/"), "/");
    assert_null(hw_cgroup_relative_path("/ab", "/a"));
    assert_null(hw_cgroup_relative_path("/b", "/a"));
    assert_null(hw_cgroup_relative_path("/", "/a"));
    assert_null(hw_cgroup_relative_path("a", "/"));
    assert_null(hw_cgroup_relative_path("/a", ""));
    assert_null(hw_cgroup_relative_path(NULL, "/"));
}

static void test_mountinfo_malformed(void **state)
{
    (void)state;
    static const char *bad[] = {
        "",
        "\n\n",
        "1 1 0:1 / /cg rw cgroup2 cgroup2 rw\n",      /* no "-" */
        "1 1 0:1 / /cg rw - cgroup2 cgroup2\n",       /* no super options */
        "1 1 0:1 / /cg - cgroup2 cgroup2 rw\n",       /* "-" where the options are */
        "1 1 0:1 /\n",                                /* cut short */
        "1 1 0:1 / /cg rw - cgroup2x cgroup2 rw\n",   /* another type */
        "1 1 0:1 / /cg rw - cgroup cgroup rw,cpu\n", /* v1, not v2 */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_false(v2_mount(bad[i], NULL));
    assert_false(v1_mount("1 1 0:1 / /cg rw,cpu - tmpfs tmpfs rw\n", "cpu", NULL));
    assert_false(v1_mount("1 1 0:1 / /cg rw - cgroup cgroup rw,cpux\n", "cpu", NULL));
    assert_false(v1_mount("1 1 0:1 / /cg rw - cgroup cgroup rw,cpu", NULL, NULL));
    assert_false(hw_cgroup_v2_mount(unified_mountinfo, strlen(unified_mountinfo), NULL, NULL));
    static const char nul[] = "1 1 0:1 / /c\0g rw - cgroup2 cgroup2 rw\n";
    hw_cgroup_mount m;
    assert_false(hw_cgroup_v2_mount(nul, sizeof nul - 1, NULL, &m));
}

/* ---- a cgroup's files ------------------------------------------------- */

static void test_controllers(void **state)
{
    (void)state;
    static const char list[] = "cpuset cpu io memory hugetlb pids rdma misc\n";
    assert_true(hw_cgroup_controllers_has(list, strlen(list), "cpu"));
    assert_true(hw_cgroup_controllers_has(list, strlen(list), "misc"));
    assert_false(hw_cgroup_controllers_has("cpuset io\n", 10, "cpu"));
    assert_false(hw_cgroup_controllers_has("", 0, "cpu"));
    assert_false(hw_cgroup_controllers_has("\n", 1, "cpu"));
    assert_false(hw_cgroup_controllers_has(list, strlen(list), ""));
    assert_true(hw_cgroup_controllers_has("cpu", 3, "cpu"));
    assert_false(hw_cgroup_controllers_has("cpu", 2, "cpu")); /* "cp" */
}

static void test_cpu_stat(void **state)
{
    (void)state;
    uint64_t v;
    assert_int_equal(stat_value(v1_stat, "nr_periods", &v), HW_CGROUP_KEY_FOUND);
    assert_int_equal(v, 12);
    assert_int_equal(stat_value(v1_stat, "nr_throttled", &v), HW_CGROUP_KEY_FOUND);
    assert_int_equal(v, 3);
    assert_int_equal(stat_value(v1_stat, "throttled_time", &v), HW_CGROUP_KEY_FOUND);
    assert_int_equal(v, 123456789);
    assert_int_equal(stat_value(v1_stat, "throttled_usec", &v), HW_CGROUP_KEY_ABSENT);
    assert_int_equal(v, 777);

    assert_int_equal(stat_value(v2_stat, "throttled_usec", &v), HW_CGROUP_KEY_FOUND);
    assert_int_equal(v, 1800000);
    assert_int_equal(stat_value(v2_stat, "nr_periods", &v), HW_CGROUP_KEY_FOUND);
    assert_int_equal(v, 50);
    assert_int_equal(stat_value(v2_stat, "nr_throttled", &v), HW_CGROUP_KEY_FOUND);
    assert_int_equal(v, 10);
    assert_int_equal(stat_value(v2_stat, "throttled_time", &v), HW_CGROUP_KEY_ABSENT);
    /* A v2 cgroup without the CPU controller shows only usage. */
    assert_int_equal(stat_value("usage_usec 5\nuser_usec 3\nsystem_usec 2\n", "nr_periods", &v),
                     HW_CGROUP_KEY_ABSENT);

    /* Keys are whole words. */
    assert_int_equal(stat_value("nr_periods_x 5\nnr_periods 6\n", "nr_periods", &v), HW_CGROUP_KEY_FOUND);
    assert_int_equal(v, 6);
    assert_int_equal(stat_value("x_nr_periods 5\n", "nr_periods", &v), HW_CGROUP_KEY_ABSENT);
    assert_int_equal(stat_value("nr_periods 1\n", "nr_period", &v), HW_CGROUP_KEY_ABSENT);
    assert_int_equal(stat_value("nr_periods 1\n", "", &v), HW_CGROUP_KEY_ABSENT);
    /* The first line with the key counts; no newline at the end is fine. */
    assert_int_equal(stat_value("nr_periods 1\nnr_periods 2\n", "nr_periods", &v), HW_CGROUP_KEY_FOUND);
    assert_int_equal(v, 1);
    assert_int_equal(stat_value("nr_periods\t18446744073709551615", "nr_periods", &v), HW_CGROUP_KEY_FOUND);
    assert_int_equal(v, UINT64_MAX);

    static const char *malformed[] = {
        "nr_periods\n", "nr_periods \n", "nr_periods abc\n", "nr_periods 5x\n", "nr_periods -5\n",
        "nr_periods 18446744073709551616\n", "nr_periods 99999999999999999999999\n", "nr_periods 1 2\n",
        "nr_periods",
    };
    for (size_t i = 0; i < sizeof malformed / sizeof malformed[0]; i++) {
        assert_int_equal(stat_value(malformed[i], "nr_periods", &v), HW_CGROUP_KEY_MALFORMED);
        assert_int_equal(v, 777);
    }
    static const char nul[] = "nr_periods 1\0002\n";
    assert_int_equal(hw_cgroup_stat_value(nul, sizeof nul - 1, "nr_periods", &v), HW_CGROUP_KEY_MALFORMED);
    /* Cut after "nr_periods 1": the number is what the length holds. */
    assert_int_equal(hw_cgroup_stat_value(v1_stat, 12, "nr_periods", &v), HW_CGROUP_KEY_FOUND);
    assert_int_equal(v, 1);
}

static void test_v1_quota_and_period(void **state)
{
    (void)state;
    uint64_t q;
    assert_int_equal(v1_quota("-1\n", &q), 0);
    assert_int_equal(q, 777);
    assert_int_equal(v1_quota("-1", &q), 0);
    assert_int_equal(v1_quota("20000\n", &q), 1);
    assert_int_equal(q, 20000);
    assert_int_equal(v1_quota("1000 \r\n", &q), 1);
    assert_int_equal(q, 1000);
    static const char *refused[] = {"",   "\n",      "0\n",  "-2\n",   "-\n",   "--1\n",
                                    " 5", "5 junk", "abc", "+5\n",   "-1x\n", "99999999999999999999\n",
                                    "-0"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        assert_int_equal(v1_quota(refused[i], &q), -1);
        assert_int_equal(q, 777);
    }

    uint64_t period = 777;
    assert_true(hw_cgroup_v1_period("100000\n", 7, &period));
    assert_int_equal(period, 100000);
    period = 777;
    assert_false(hw_cgroup_v1_period("0\n", 2, &period));
    assert_false(hw_cgroup_v1_period("-1\n", 3, &period));
    assert_false(hw_cgroup_v1_period("", 0, &period));
    assert_false(hw_cgroup_v1_period("1e5\n", 4, &period));
    assert_int_equal(period, 777);
    assert_true(hw_cgroup_v1_period("100000\n", 3, &period)); /* the length holds "100" */
    assert_int_equal(period, 100);
}

static void test_v2_cpu_max(void **state)
{
    (void)state;
    uint64_t q, p;
    assert_int_equal(cpu_max("max 100000\n", &q, &p), 0);
    assert_int_equal(q, 777);
    assert_int_equal(p, 100000);
    assert_int_equal(cpu_max("20000 100000\n", &q, &p), 1);
    assert_int_equal(q, 20000);
    assert_int_equal(p, 100000);
    assert_int_equal(cpu_max("20000\t 100000", &q, &p), 1);
    static const char *refused[] = {"",
                                    "max",
                                    "max\n",
                                    "max 0\n",
                                    "20000\n",
                                    "0 100000\n",
                                    "-1 100000\n",
                                    "20000 100000 5\n",
                                    "maxi 100000\n",
                                    "MAX 100000\n",
                                    " 20000 100000\n",
                                    "20000 100000x\n",
                                    "20000 99999999999999999999\n",
                                    "max100000\n"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        assert_int_equal(cpu_max(refused[i], &q, &p), -1);
        assert_int_equal(q, 777);
        assert_int_equal(p, 777);
    }
    bool limited;
    assert_false(hw_cgroup_v2_cpu_max(NULL, 0, &limited, &q, &p));
    assert_false(hw_cgroup_v1_quota(NULL, 0, &limited, &q));
}

/* ---- cut short and garbage -------------------------------------------- */

/* Every parser on text[0, len), copied to a buffer of exactly len bytes
 * (ASan sees a read past it); outputs must be terminated and in bounds. */
static void run_all(const char *text, size_t len)
{
    char *copy = malloc(len > 0 ? len : 1);
    assert_non_null(copy);
    memcpy(copy, text, len);
    char path[32];
    if (hw_cgroup_v1_path(copy, len, "cpu", path, sizeof path))
        assert_true(path[0] == '/' && strlen(path) < sizeof path);
    if (hw_cgroup_v2_path(copy, len, path, sizeof path))
        assert_true(path[0] == '/' && strlen(path) < sizeof path);
    hw_cgroup_mount *m = malloc(sizeof *m);
    assert_non_null(m);
    if (hw_cgroup_v1_mount(copy, len, "cpu", NULL, m) || hw_cgroup_v2_mount(copy, len, "/a", m)) {
        assert_int_equal(m->mount_point[0], '/');
        assert_int_equal(m->root[0], '/');
    }
    free(m);
    uint64_t v, q, p;
    bool limited;
    (void)hw_cgroup_stat_value(copy, len, "nr_periods", &v);
    (void)hw_cgroup_controllers_has(copy, len, "cpu");
    (void)hw_cgroup_v1_quota(copy, len, &limited, &q);
    (void)hw_cgroup_v1_period(copy, len, &p);
    (void)hw_cgroup_v2_cpu_max(copy, len, &limited, &q, &p);
    free(copy);
}

static void test_every_prefix(void **state)
{
    (void)state;
    static const char *const texts[] = {hybrid_cgroup, apart_cgroup, unified_cgroup, hybrid_mountinfo,
                                        unified_mountinfo, v1_stat, v2_stat, "max 100000\n", "20000 100000\n",
                                        "-1\n"};
    for (size_t t = 0; t < sizeof texts / sizeof texts[0]; t++)
        for (size_t len = 0; len <= strlen(texts[t]); len++)
            run_all(texts[t], len);

    /* A line cut short is taken as it stands (the reader, cgroup_cpu.c,
     * drops a last line that a size cap cut). */
    char out[64];
    assert_true(hw_cgroup_v1_path(hybrid_cgroup, 22, "cpu", out, sizeof out));
    assert_string_equal(out, "/system");
}

static void test_garbage(void **state)
{
    (void)state;
    unsigned seed = 12345;
    char text[512];
    static const char alphabet[] = "0123456789:/ -,\\\n\tcpumaxgroup2.\0";
    for (int round = 0; round < 20000; round++) {
        size_t len = (size_t)(round % (int)sizeof text);
        for (size_t i = 0; i < len; i++) {
            seed = seed * 1103515245u + 12345u;
            unsigned r = seed >> 16;
            text[i] = round % 2 ? (char)(r & 0xff) : alphabet[r % (sizeof alphabet - 1)];
        }
        run_all(text, len);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hybrid_cgroup_file),
        cmocka_unit_test(test_unified_cgroup_file),
        cmocka_unit_test(test_cgroup_paths_refused),
        cmocka_unit_test(test_cgroup_path_bounds),
        cmocka_unit_test(test_hybrid_mountinfo),
        cmocka_unit_test(test_unified_mountinfo),
        cmocka_unit_test(test_mountinfo_escapes),
        cmocka_unit_test(test_mountinfo_roots),
        cmocka_unit_test(test_mountinfo_malformed),
        cmocka_unit_test(test_controllers),
        cmocka_unit_test(test_cpu_stat),
        cmocka_unit_test(test_v1_quota_and_period),
        cmocka_unit_test(test_v2_cpu_max),
        cmocka_unit_test(test_every_prefix),
        cmocka_unit_test(test_garbage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
