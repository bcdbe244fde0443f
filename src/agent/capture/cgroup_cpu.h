/*
 * cgroup_cpu.h - the CPU cgroup of a watched process and how much its CPU
 * limit (the CFS quota) has throttled it, so that a hang report can say
 * "1.8 s throttled by cgroup /sys/fs/cgroup/cpu/app (quota 20 ms per
 * 100 ms)": a loop that is not scheduled is not a loop that hangs in code.
 *
 * Both cgroup versions: v1's cpu controller (cpu.cfs_quota_us,
 * cpu.cfs_period_us, cpu.stat's throttled_time in ns) and v2's unified
 * hierarchy (cpu.max, cpu.stat's throttled_usec).  The process's cgroup
 * comes from /proc/PID/cgroup, where the hierarchy is mounted from the
 * agent's own /proc/self/mountinfo; the texts are parsed by
 * core/parse/cgroup_text.h.  Every read is bounded, and what cannot be read
 * or does not parse is an error, never a guess.
 */
#ifndef HANGWATCH_CGROUP_CPU_H
#define HANGWATCH_CGROUP_CPU_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct hw_cgroup_cpu {
    char dir[512];         /* the limiting cgroup's directory, e.g. /sys/fs/cgroup/cpu,cpuacct/app; "" if none found */
    char own_dir[512];     /* the process's own cgroup's directory in that hierarchy (v2: where its
                              cpu.pressure, memory.pressure and io.pressure are) */
    int version;           /* 1 or 2; 0 when the process's CPU cgroup could not be found */
    bool limited;          /* a CPU quota is set on dir */
    uint64_t quota_us, period_us; /* the limit, when limited (0 otherwise) */
    uint64_t nr_periods, nr_throttled, throttled_ns; /* dir's cpu.stat counters (v2's throttled_usec turned into ns) */
} hw_cgroup_cpu;

/*
 * Find process `pid`'s CPU cgroup: its own cgroup directory, then up to the
 * hierarchy's root, the nearest one with a quota set (that is the one that
 * throttles it); without any quota, its own directory (limited false).
 * Reads the counters too.  `proc_root` and `sys_root` are "/proc" and ""
 * normally; tests point them at a fake tree.  0, or -errno (-ENOENT: no CPU
 * controller / not found), with nothing guessed (*out is then zeroed).
 *
 * The v2 hierarchy is taken when it has the CPU controller for the process:
 * a cpu.max in its directory or one above it, or "cpu" in the v2 mount
 * root's cgroup.controllers (a process in the root cgroup); otherwise v1's
 * cpu controller.  Paths in /proc/PID/cgroup are relative to the hierarchy's
 * root as mounted (mountinfo's field 4): a cgroup outside every mount of its
 * hierarchy is not found.  A counter cpu.stat does not show is 0 (v2's
 * cpu.stat shows none where the CPU controller is not enabled).
 */
int hw_cgroup_cpu_find(const char *proc_root, const char *sys_root, pid_t pid, hw_cgroup_cpu *out);

/* Read dir's counters again (the limit too); 0 or -errno (*c unchanged). */
int hw_cgroup_cpu_read(hw_cgroup_cpu *c);

#endif
