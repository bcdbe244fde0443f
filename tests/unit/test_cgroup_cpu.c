/*
 * test_cgroup_cpu.c - finding a process's CPU cgroup and reading how much
 * its quota throttled it (agent/capture/cgroup_cpu.h).
 *
 * On fake trees in a temporary directory (a proc_root with self/mountinfo
 * and PID/cgroup, a sys_root with the hierarchies' files): v1 where the
 * process's cgroup has no quota but its parent has 20000/100000 (the parent
 * is found, and read again as its files change); v1 without any quota (the
 * own directory); v2 with cpu.max on the process's cgroup or above it, a
 * process in the v2 root, v2 preferred over v1; an escaped mount point, a
 * mount whose root is not "/", and a cgroup outside it; and what is not
 * found or does not parse: no cpu line, v2 without the CPU controller and
 * no v1, a path outside the cgroup namespace, a malformed quota, a process
 * that is gone.  The pressure figures: the own v2 cgroup's files, else the
 * machine's.  Every tree made is removed.
 *
 * Then, as root on a machine with a v2 or v1 CPU controller, a real cgroup
 * hw-test-PID with 20 ms per 100 ms holding a spinning child: it must be
 * found, limited, and throttled.  Skipped when not root, without a
 * controller, or where cgroups cannot be made (a container's read-only
 * /sys/fs/cgroup); the cgroup and the child are removed in any case.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/capture/cgroup_cpu.h"
#include "agent/capture/proc_task.h"
#include "agent/capture/thread_time.h"
#include "core/parse/cgroup_text.h"

#define FAKE_PID 4242

/* ---- fake trees --------------------------------------------------------- */

static char tree[64];      /* the temporary directory */
static char proc_root[96]; /* tree/proc */

static void make_parents(char *path)
{
    for (char *slash = strchr(path + 1, '/'); slash != NULL; slash = strchr(slash + 1, '/')) {
        *slash = '\0';
        if (mkdir(path, 0755) != 0 && errno != EEXIST)
            fail_msg("mkdir %s: %s", path, strerror(errno));
        *slash = '/';
    }
}

/* Write `text` to tree/RELATIVE, making its directories. */
static void put(const char *relative, const char *text)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", tree, relative);
    make_parents(path);
    FILE *f = fopen(path, "w");
    if (f == NULL)
        fail_msg("%s: %s", path, strerror(errno));
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)type;
    (void)ftw;
    return remove(path);
}

static int make_tree(void **state)
{
    (void)state;
    strcpy(tree, "/tmp/hw-cgroup-cpu-XXXXXX");
    if (mkdtemp(tree) == NULL)
        return -1;
    snprintf(proc_root, sizeof proc_root, "%s/proc", tree);
    return 0;
}

static int remove_tree(void **state)
{
    (void)state;
    return nftw(tree, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* tree + path: what hw_cgroup_cpu_find answers with sys_root = tree. */
static const char *in_tree(const char *path)
{
    static char buf[1024];
    snprintf(buf, sizeof buf, "%s%s", tree, path);
    return buf;
}

static int find(hw_cgroup_cpu *c)
{
    memset(c, 0x5a, sizeof *c); /* whatever was there before */
    return hw_cgroup_cpu_find(proc_root, tree, FAKE_PID, c);
}

static void assert_nothing(const hw_cgroup_cpu *c)
{
    assert_string_equal(c->dir, "");
    assert_int_equal(c->version, 0);
    assert_false(c->limited);
    assert_int_equal(c->quota_us, 0);
    assert_int_equal(c->nr_throttled, 0);
}

/* A hybrid (v1 + v2 without controllers) machine, as Ubuntu 20.04's. */
static const char hybrid_mountinfo[] =
    "25 22 0:23 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755\n"
    "26 25 0:24 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate\n"
    "30 25 0:28 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:14 - cgroup cgroup rw,memory\n"
    "31 25 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:15 - cgroup cgroup "
    "rw,cpu,cpuacct\n";

static const char hybrid_cgroup[] = "5:memory:/app/worker\n"
                                    "4:cpu,cpuacct:/app/worker\n"
                                    "1:name=systemd:/app/worker\n"
                                    "0::/app/worker\n";

static const char v1_zero_stat[] = "nr_periods 0\nnr_throttled 0\nthrottled_time 0\nnr_bursts 0\nburst_time 0\n";

#define V1 "sys/fs/cgroup/cpu,cpuacct"

static void put_hybrid(const char *app_quota)
{
    put("proc/self/mountinfo", hybrid_mountinfo);
    put("proc/4242/cgroup", hybrid_cgroup);
    put(V1 "/cpu.cfs_quota_us", "-1\n");
    put(V1 "/cpu.cfs_period_us", "100000\n");
    put(V1 "/cpu.stat", v1_zero_stat);
    put(V1 "/app/cpu.cfs_quota_us", app_quota);
    put(V1 "/app/cpu.cfs_period_us", "100000\n");
    put(V1 "/app/cpu.stat", "nr_periods 40\nnr_throttled 12\nthrottled_time 1800000000\nnr_bursts 0\nburst_time 0\n");
    put(V1 "/app/worker/cpu.cfs_quota_us", "-1\n");
    put(V1 "/app/worker/cpu.cfs_period_us", "100000\n");
    put(V1 "/app/worker/cpu.stat", "nr_periods 7\nnr_throttled 0\nthrottled_time 0\n");
    /* v2 is there, without any controller. */
    put("sys/fs/cgroup/unified/cgroup.controllers", "\n");
    put("sys/fs/cgroup/unified/app/worker/cpu.stat", "usage_usec 5\nuser_usec 3\nsystem_usec 2\n");
}

/* ---- v1 ----------------------------------------------------------------- */

static void test_v1_parent_quota(void **state)
{
    (void)state;
    put_hybrid("20000\n");
    hw_cgroup_cpu c;
    assert_int_equal(find(&c), 0);
    assert_int_equal(c.version, 1);
    assert_string_equal(c.dir, in_tree("/sys/fs/cgroup/cpu,cpuacct/app"));
    assert_true(c.limited);
    assert_int_equal(c.quota_us, 20000);
    assert_int_equal(c.period_us, 100000);
    assert_int_equal(c.nr_periods, 40);
    assert_int_equal(c.nr_throttled, 12);
    assert_int_equal(c.throttled_ns, 1800000000);

    /* Read again as the counters move and the limit changes. */
    put(V1 "/app/cpu.stat", "nr_periods 50\nnr_throttled 20\nthrottled_time 2500000000\n");
    put(V1 "/app/cpu.cfs_period_us", "50000\n");
    assert_int_equal(hw_cgroup_cpu_read(&c), 0);
    assert_int_equal(c.nr_periods, 50);
    assert_int_equal(c.nr_throttled, 20);
    assert_int_equal(c.throttled_ns, 2500000000);
    assert_int_equal(c.period_us, 50000);
    put(V1 "/app/cpu.cfs_quota_us", "-1\n");
    assert_int_equal(hw_cgroup_cpu_read(&c), 0);
    assert_false(c.limited);
    assert_int_equal(c.quota_us, 0);
    assert_string_equal(c.dir, in_tree("/sys/fs/cgroup/cpu,cpuacct/app"));

    /* A malformed file leaves the last reading as it was. */
    put(V1 "/app/cpu.stat", "nr_periods lots\n");
    hw_cgroup_cpu before = c;
    assert_int_equal(hw_cgroup_cpu_read(&c), -EINVAL);
    assert_memory_equal(&c, &before, sizeof c);
    put(V1 "/app/cpu.stat", "nr_periods 1\n");
    put(V1 "/app/cpu.cfs_quota_us", "0\n");
    assert_int_equal(hw_cgroup_cpu_read(&c), -EINVAL);

    hw_cgroup_cpu none;
    memset(&none, 0, sizeof none);
    assert_int_equal(hw_cgroup_cpu_read(&none), -ENOENT);
}

static void test_v1_no_quota(void **state)
{
    (void)state;
    put_hybrid("-1\n");
    hw_cgroup_cpu c;
    assert_int_equal(find(&c), 0);
    assert_int_equal(c.version, 1);
    assert_string_equal(c.dir, in_tree("/sys/fs/cgroup/cpu,cpuacct/app/worker"));
    assert_false(c.limited);
    assert_int_equal(c.quota_us, 0);
    assert_int_equal(c.period_us, 0);
    assert_int_equal(c.nr_periods, 7); /* the own directory's counters */
    assert_int_equal(c.throttled_ns, 0);
}

static void test_v1_quota_on_own_and_root(void **state)
{
    (void)state;
    put_hybrid("20000\n");
    put(V1 "/app/worker/cpu.cfs_quota_us", "5000\n");
    put(V1 "/app/worker/cpu.cfs_period_us", "10000\n");
    hw_cgroup_cpu c;
    assert_int_equal(find(&c), 0);
    assert_string_equal(c.dir, in_tree("/sys/fs/cgroup/cpu,cpuacct/app/worker")); /* the nearest */
    assert_int_equal(c.quota_us, 5000);
    assert_int_equal(c.period_us, 10000);

    /* A quota on the hierarchy's root only. */
    put(V1 "/app/worker/cpu.cfs_quota_us", "-1\n");
    put(V1 "/app/cpu.cfs_quota_us", "-1\n");
    put(V1 "/cpu.cfs_quota_us", "300000\n");
    assert_int_equal(find(&c), 0);
    assert_string_equal(c.dir, in_tree("/sys/fs/cgroup/cpu,cpuacct"));
    assert_true(c.limited);
    assert_int_equal(c.quota_us, 300000);
}

static void test_v1_malformed(void **state)
{
    (void)state;
    hw_cgroup_cpu c;
    put_hybrid("twenty thousand\n");
    assert_int_equal(find(&c), -EINVAL);
    assert_nothing(&c);
    put_hybrid("20000\n");
    put(V1 "/app/cpu.cfs_period_us", "0\n");
    assert_int_equal(find(&c), -EINVAL);
    assert_nothing(&c);
    put(V1 "/app/cpu.cfs_period_us", "100000\n");
    put(V1 "/app/cpu.stat", "nr_periods 1\nnr_throttled 99999999999999999999999\n");
    assert_int_equal(find(&c), -EINVAL);
    assert_nothing(&c);
    /* The process's cgroup is gone. */
    put("proc/4242/cgroup", "4:cpu,cpuacct:/gone\n");
    assert_int_equal(find(&c), -ENOENT);
    assert_nothing(&c);
}

/* ---- v2 ----------------------------------------------------------------- */

static const char unified_mountinfo[] =
    "21 26 0:20 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw\n"
    "29 21 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 "
    "rw,nsdelegate,memory_recursiveprot\n";

#define V2 "sys/fs/cgroup"
#define V2_STAT_USAGE "usage_usec 1000\nuser_usec 600\nsystem_usec 400\n"

static void put_unified(void)
{
    put("proc/self/mountinfo", unified_mountinfo);
    put("proc/4242/cgroup", "0::/system.slice/app.service\n");
    put(V2 "/cgroup.controllers", "cpuset cpu io memory hugetlb pids rdma misc\n");
    put(V2 "/cpu.stat", V2_STAT_USAGE);
    put(V2 "/system.slice/cpu.max", "max 100000\n");
    put(V2 "/system.slice/cpu.stat", V2_STAT_USAGE "nr_periods 0\nnr_throttled 0\nthrottled_usec 0\n");
    put(V2 "/system.slice/app.service/cpu.max", "20000 100000\n");
    put(V2 "/system.slice/app.service/cpu.stat",
        V2_STAT_USAGE "nr_periods 50\nnr_throttled 10\nthrottled_usec 1800000\nnr_bursts 0\nburst_usec 0\n");
}

static void test_v2_own_quota(void **state)
{
    (void)state;
    put_unified();
    hw_cgroup_cpu c;
    assert_int_equal(find(&c), 0);
    assert_int_equal(c.version, 2);
    assert_string_equal(c.dir, in_tree("/sys/fs/cgroup/system.slice/app.service"));
    assert_true(c.limited);
    assert_int_equal(c.quota_us, 20000);
    assert_int_equal(c.period_us, 100000);
    assert_int_equal(c.nr_periods, 50);
    assert_int_equal(c.nr_throttled, 10);
    assert_int_equal(c.throttled_ns, 1800000000); /* from microseconds */

    put(V2 "/system.slice/app.service/cpu.max", "max 100000\n");
    put(V2 "/system.slice/app.service/cpu.stat", "nr_periods 51\nnr_throttled 10\nthrottled_usec 18446744073709551\n");
    assert_int_equal(hw_cgroup_cpu_read(&c), 0);
    assert_false(c.limited);
    assert_int_equal(c.nr_periods, 51);
    assert_int_equal(c.throttled_ns, 18446744073709551000u);
    put(V2 "/system.slice/app.service/cpu.stat", "throttled_usec 18446744073709552\n");
    assert_int_equal(hw_cgroup_cpu_read(&c), 0);
    assert_int_equal(c.throttled_ns, UINT64_MAX); /* saturated, not wrapped */
    assert_int_equal(c.nr_periods, 0);            /* not shown: 0 */
}

static void test_v2_parent_quota(void **state)
{
    (void)state;
    put_unified();
    put(V2 "/system.slice/cpu.max", "50000 100000\n");
    put(V2 "/system.slice/app.service/cpu.max", "max 100000\n");
    hw_cgroup_cpu c;
    assert_int_equal(find(&c), 0);
    assert_int_equal(c.version, 2);
    assert_string_equal(c.dir, in_tree("/sys/fs/cgroup/system.slice"));
    assert_string_equal(c.own_dir, in_tree("/sys/fs/cgroup/system.slice/app.service"));
    assert_int_equal(c.quota_us, 50000);

    /* The pressure figures are the process's own cgroup's where it has
     * them, the machine's otherwise. */
    double cpu, memory, io;
    put(V2 "/system.slice/app.service/cpu.pressure",
        "some avg10=12.50 avg60=3.00 avg300=1.00 total=123456\nfull avg10=1.00 avg60=0.00 avg300=0.00 total=5\n");
    put(V2 "/system.slice/app.service/memory.pressure", "some avg10=0.25 avg60=0.00 avg300=0.00 total=1\n");
    assert_true(hw_pressure_read(&c, &cpu, &memory, &io));
    assert_true(cpu > 12.49 && cpu < 12.51);
    assert_true(memory > 0.24 && memory < 0.26);
    assert_true(io < 0); /* no io.pressure: unknown, not 0 */
    hw_cgroup_cpu v1 = c;
    v1.version = 1;
    assert_false(hw_pressure_read(&v1, &cpu, &memory, &io));

    /* The CPU controller not enabled for the process's cgroup (no cpu.max
     * there), but its parent's quota holds it all the same. */
    char path[1024];
    snprintf(path, sizeof path, "%s/" V2 "/system.slice/app.service/cpu.max", tree);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(find(&c), 0);
    assert_string_equal(c.dir, in_tree("/sys/fs/cgroup/system.slice"));
    assert_true(c.limited);

    /* No quota anywhere: the own directory, its counters absent (0). */
    put(V2 "/system.slice/cpu.max", "max 100000\n");
    put(V2 "/system.slice/app.service/cpu.stat", V2_STAT_USAGE);
    assert_int_equal(find(&c), 0);
    assert_string_equal(c.dir, in_tree("/sys/fs/cgroup/system.slice/app.service"));
    assert_false(c.limited);
    assert_int_equal(c.nr_periods, 0);
    assert_int_equal(c.nr_throttled, 0);
}

static void test_v2_root_process(void **state)
{
    (void)state;
    put_unified();
    put("proc/4242/cgroup", "0::/\n");
    hw_cgroup_cpu c;
    assert_int_equal(find(&c), 0);
    assert_int_equal(c.version, 2);
    assert_string_equal(c.dir, in_tree("/sys/fs/cgroup"));
    assert_false(c.limited);

    /* The root cgroup has no cpu.max; without "cpu" in its controllers v2
     * has no CPU controller, and there is no v1 to fall back on. */
    put(V2 "/cgroup.controllers", "memory pids\n");
    assert_int_equal(find(&c), -ENOENT);
    assert_nothing(&c);
}

static void test_v2_preferred(void **state)
{
    (void)state;
    /* A hybrid machine whose v2 carries the CPU controller for this
     * process: v2 is taken, although v1 has a quota too. */
    put_hybrid("20000\n");
    put("sys/fs/cgroup/unified/app/worker/cpu.max", "30000 100000\n");
    put("sys/fs/cgroup/unified/app/worker/cpu.stat", "nr_periods 3\nnr_throttled 1\nthrottled_usec 20\n");
    hw_cgroup_cpu c;
    assert_int_equal(find(&c), 0);
    assert_int_equal(c.version, 2);
    assert_string_equal(c.dir, in_tree("/sys/fs/cgroup/unified/app/worker"));
    assert_int_equal(c.quota_us, 30000);
    assert_int_equal(c.throttled_ns, 20000);

    /* A v2 directory that is not there: v1. */
    put("proc/4242/cgroup", "4:cpu,cpuacct:/app/worker\n0::/elsewhere\n");
    assert_int_equal(find(&c), 0);
    assert_int_equal(c.version, 1);
    assert_string_equal(c.dir, in_tree("/sys/fs/cgroup/cpu,cpuacct/app"));
}

/* ---- mounts ------------------------------------------------------------- */

static void test_escaped_mount_point(void **state)
{
    (void)state;
    put("proc/self/mountinfo", "31 25 0:29 / /sys/fs/cgroup/my\\040cpu rw - cgroup cgroup rw,cpu\n");
    put("proc/4242/cgroup", "3:cpu:/a b\n");
    put("sys/fs/cgroup/my cpu/cpu.cfs_quota_us", "-1\n");
    put("sys/fs/cgroup/my cpu/a b/cpu.cfs_quota_us", "10000\n");
    put("sys/fs/cgroup/my cpu/a b/cpu.cfs_period_us", "100000\n");
    put("sys/fs/cgroup/my cpu/a b/cpu.stat", v1_zero_stat);
    hw_cgroup_cpu c;
    assert_int_equal(find(&c), 0);
    assert_string_equal(c.dir, in_tree("/sys/fs/cgroup/my cpu/a b"));
    assert_int_equal(c.quota_us, 10000);
}

static void test_mount_root_not_slash(void **state)
{
    (void)state;
    /* A container's mount of /docker/abc: the cgroup path loses that prefix. */
    put("proc/self/mountinfo", "50 40 0:29 /docker/abc /sys/fs/cgroup/cpu ro - cgroup cgroup rw,cpu,cpuacct\n");
    put("proc/4242/cgroup", "4:cpu,cpuacct:/docker/abc/app\n");
    put("sys/fs/cgroup/cpu/cpu.cfs_quota_us", "50000\n");
    put("sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n");
    put("sys/fs/cgroup/cpu/cpu.stat", v1_zero_stat);
    put("sys/fs/cgroup/cpu/app/cpu.cfs_quota_us", "-1\n");
    put("sys/fs/cgroup/cpu/app/cpu.stat", v1_zero_stat);
    hw_cgroup_cpu c;
    assert_int_equal(find(&c), 0);
    /* The walk stops at the mount: the limit seen is the container's. */
    assert_string_equal(c.dir, in_tree("/sys/fs/cgroup/cpu"));
    assert_int_equal(c.quota_us, 50000);
    put("sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1\n");
    assert_int_equal(find(&c), 0);
    assert_string_equal(c.dir, in_tree("/sys/fs/cgroup/cpu/app"));
    assert_false(c.limited);

    /* A cgroup outside the mount is not guessed at. */
    put("proc/4242/cgroup", "4:cpu,cpuacct:/docker/abcd/app\n");
    assert_int_equal(find(&c), -ENOENT);
    assert_nothing(&c);
}

/* ---- not found ---------------------------------------------------------- */

static void test_not_found(void **state)
{
    (void)state;
    hw_cgroup_cpu c;
    put_hybrid("20000\n");
    /* No cpu line. */
    put("proc/4242/cgroup", "5:memory:/app/worker\n1:name=systemd:/app/worker\n");
    assert_int_equal(find(&c), -ENOENT);
    assert_nothing(&c);
    /* Only a v2 line, and v2 without the CPU controller. */
    put("proc/4242/cgroup", "0::/app/worker\n");
    assert_int_equal(find(&c), -ENOENT);
    /* Outside the agent's cgroup namespace. */
    put("proc/4242/cgroup", "4:cpu,cpuacct:/../app/worker\n");
    assert_int_equal(find(&c), -ENOENT);
    /* A cpu line but no mount of that hierarchy. */
    put("proc/4242/cgroup", hybrid_cgroup);
    put("proc/self/mountinfo", "25 22 0:23 / /sys/fs/cgroup ro - tmpfs tmpfs ro\n");
    assert_int_equal(find(&c), -ENOENT);
    put("proc/self/mountinfo", "");
    assert_int_equal(find(&c), -ENOENT);
    assert_nothing(&c);
    /* A process that is gone. */
    assert_int_equal(hw_cgroup_cpu_find(proc_root, tree, 4243, &c), -ENOENT);
    assert_nothing(&c);
    /* No mountinfo. */
    char path[1024];
    snprintf(path, sizeof path, "%s/proc/self/mountinfo", tree);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(find(&c), -ENOENT);
    assert_int_equal(hw_cgroup_cpu_find(proc_root, tree, 0, &c), -EINVAL);
    assert_int_equal(hw_cgroup_cpu_find(NULL, tree, FAKE_PID, &c), -EINVAL);
}

static void test_long_cgroup_file(void **state)
{
    (void)state;
    /* A cgroup file over the 1 MiB read: the cut last line is dropped, not
     * taken for a shorter path. */
    put_hybrid("20000\n");
    size_t filler = (1u << 20) - 20;
    size_t n = filler + 64;
    char *text = malloc(n + 1);
    assert_non_null(text);
    memset(text, 'x', filler);
    text[filler - 1] = '\n';
    snprintf(text + filler, n + 1 - filler, "4:cpu,cpuacct:/app/worker\n");
    put("proc/4242/cgroup", text);
    hw_cgroup_cpu c;
    assert_int_equal(find(&c), -ENOENT); /* "4:cpu,cpuacct:/app/w" would have been a guess */
    /* Under the cap, the same line is read. */
    memset(text, 'x', 1000);
    text[999] = '\n';
    snprintf(text + 1000, n + 1 - 1000, "4:cpu,cpuacct:/app/worker\n");
    put("proc/4242/cgroup", text);
    assert_int_equal(find(&c), 0);
    assert_string_equal(c.dir, in_tree("/sys/fs/cgroup/cpu,cpuacct/app"));
    free(text);
}

/* ---- this machine ------------------------------------------------------- */

static void test_own_process(void **state)
{
    (void)state;
    /* Whatever this machine has, finding the test's own cgroup answers
     * consistently. */
    hw_cgroup_cpu c;
    int r = hw_cgroup_cpu_find("/proc", "", getpid(), &c);
    if (r != 0) {
        assert_int_equal(r, -ENOENT);
        assert_nothing(&c);
        print_message("this process: no CPU cgroup found\n");
        return;
    }
    assert_true(c.version == 1 || c.version == 2);
    assert_int_equal(c.dir[0], '/');
    print_message("this process: cgroup v%d %s, %s\n", c.version, c.dir, c.limited ? "limited" : "no quota");
    assert_int_equal(hw_cgroup_cpu_read(&c), 0);
}

/* The real cgroup made and the child in it, for the teardown to remove. */
typedef struct real_cgroup {
    char dir[512];
    bool made;
    pid_t child;
} real_cgroup;

static real_cgroup real;

static int write_file(const char *dir, const char *name, const char *text)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = write(fd, text, strlen(text));
    int e = n < 0 ? -errno : 0;
    close(fd);
    return e;
}

static void sleep_ms(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0 && errno == EINTR)
        ;
}

static int real_setup(void **state)
{
    (void)state;
    memset(&real, 0, sizeof real);
    return 0;
}

static int real_teardown(void **state)
{
    (void)state;
    if (real.child > 0) {
        kill(real.child, SIGKILL);
        waitpid(real.child, NULL, 0);
    }
    /* The cgroup empties once the child is reaped; give the kernel a moment. */
    for (int i = 0; real.made && i < 100 && rmdir(real.dir) != 0 && errno == EBUSY; i++)
        sleep_ms(10);
    if (real.made && access(real.dir, F_OK) == 0)
        fprintf(stderr, "could not remove %s\n", real.dir);
    return 0;
}

/* The real hierarchy to make a cgroup in: v2 when its root can give the
 * CPU controller to a child, else v1's cpu.  Its directory (mount point)
 * and version into *dir and *version; false when there is none. */
static bool real_hierarchy(char *dir, size_t size, int *version)
{
    size_t len;
    char *mounts = hw_proc_read_whole("/proc/self/mountinfo", &len);
    if (mounts == NULL)
        return false;
    hw_cgroup_mount *m = malloc(sizeof *m);
    assert_non_null(m);
    bool found = false;
    char path[4200], buf[4096];
    if (hw_cgroup_v2_mount(mounts, len, NULL, m) && (size_t)snprintf(dir, size, "%s", m->mount_point) < size) {
        snprintf(path, sizeof path, "%s/cgroup.controllers", dir);
        ssize_t n = hw_proc_read_small(path, buf, sizeof buf);
        if (n > 0 && hw_cgroup_controllers_has(buf, (size_t)n, "cpu")) {
            snprintf(path, sizeof path, "%s/cgroup.subtree_control", dir);
            n = hw_proc_read_small(path, buf, sizeof buf);
            found = (n >= 0 && hw_cgroup_controllers_has(buf, (size_t)n, "cpu"))
                    || write_file(dir, "cgroup.subtree_control", "+cpu") == 0;
            *version = 2;
        }
    }
    if (!found && hw_cgroup_v1_mount(mounts, len, "cpu", NULL, m)) {
        *version = 1;
        found = (size_t)snprintf(dir, size, "%s", m->mount_point) < size;
    }
    free(m);
    free(mounts);
    return found;
}

static void test_real_throttling(void **state)
{
    (void)state;
    if (geteuid() != 0) {
        print_message("not root: no real cgroup made\n");
        skip();
    }
    char parent[400];
    int version = 0;
    if (!real_hierarchy(parent, sizeof parent, &version)) {
        print_message("no cgroup CPU controller here\n");
        skip();
    }
    snprintf(real.dir, sizeof real.dir, "%s/hw-test-%d", parent, (int)getpid());
    if (mkdir(real.dir, 0755) != 0) {
        print_message("cannot make %s: %s\n", real.dir, strerror(errno));
        skip();
    }
    real.made = true;
    int r = version == 2 ? write_file(real.dir, "cpu.max", "20000 100000")
                         : write_file(real.dir, "cpu.cfs_period_us", "100000");
    if (r == 0 && version == 1)
        r = write_file(real.dir, "cpu.cfs_quota_us", "20000");
    assert_int_equal(r, 0);

    real.child = fork();
    assert_true(real.child >= 0);
    if (real.child == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        for (volatile unsigned long spin = 0;; spin++)
            ;
    }
    char pid_text[32];
    snprintf(pid_text, sizeof pid_text, "%d", (int)real.child);
    assert_int_equal(write_file(real.dir, "cgroup.procs", pid_text), 0);
    sleep_ms(300);

    hw_cgroup_cpu c;
    assert_int_equal(hw_cgroup_cpu_find("/proc", "", real.child, &c), 0);
    assert_int_equal(c.version, version);
    assert_string_equal(c.dir, real.dir);
    assert_true(c.limited);
    assert_int_equal(c.quota_us, 20000);
    assert_int_equal(c.period_us, 100000);
    /* 300 ms is three periods of 20 ms allowed; on a busy machine the
     * child may have had less, so wait up to 3 s more for a throttle. */
    for (int i = 0; c.nr_throttled == 0 && i < 30; i++) {
        sleep_ms(100);
        assert_int_equal(hw_cgroup_cpu_read(&c), 0);
    }
    print_message("real v%d cgroup %s: quota %" PRIu64 " us per %" PRIu64 " us, %" PRIu64 " periods, %" PRIu64
                  " throttled, %.1f ms throttled\n",
                  c.version, c.dir, c.quota_us, c.period_us, c.nr_periods, c.nr_throttled, c.throttled_ns / 1e6);
    assert_true(c.nr_periods > 0);
    assert_true(c.nr_throttled > 0);
    assert_true(c.throttled_ns > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_v1_parent_quota, make_tree, remove_tree),
        cmocka_unit_test_setup_teardown(test_v1_no_quota, make_tree, remove_tree),
        cmocka_unit_test_setup_teardown(test_v1_quota_on_own_and_root, make_tree, remove_tree),
        cmocka_unit_test_setup_teardown(test_v1_malformed, make_tree, remove_tree),
        cmocka_unit_test_setup_teardown(test_v2_own_quota, make_tree, remove_tree),
        cmocka_unit_test_setup_teardown(test_v2_parent_quota, make_tree, remove_tree),
        cmocka_unit_test_setup_teardown(test_v2_root_process, make_tree, remove_tree),
        cmocka_unit_test_setup_teardown(test_v2_preferred, make_tree, remove_tree),
        cmocka_unit_test_setup_teardown(test_escaped_mount_point, make_tree, remove_tree),
        cmocka_unit_test_setup_teardown(test_mount_root_not_slash, make_tree, remove_tree),
        cmocka_unit_test_setup_teardown(test_not_found, make_tree, remove_tree),
        cmocka_unit_test_setup_teardown(test_long_cgroup_file, make_tree, remove_tree),
        cmocka_unit_test(test_own_process),
        cmocka_unit_test_setup_teardown(test_real_throttling, real_setup, real_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
