/*
 * container_of.c - a process's container, pod or unit (container_of.h).
 *
 * /proc/PID/cgroup has a line per hierarchy ("ID:CONTROLLERS:PATH"; under
 * cgroup v2 one, "0::PATH"); a container's path is the same in each that
 * places it.  The pod's name is its hostname (the kubelet sets it) and its
 * namespace the service account's, both files in the container's own root
 * (/proc/PID/root, when it is not the agent's): read when there, bounded,
 * one line each.
 */
#include "container_of.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "proc_task.h"

/* The first line of `path`, at most len - 1 bytes ("" when unreadable). */
static void first_line(const char *path, char *out, size_t len)
{
    if (hw_proc_read_small(path, out, len) <= 0)
        out[0] = '\0';
    out[strcspn(out, "\n")] = '\0';
}

void hw_container_of(pid_t pid, hw_container *out)
{
    memset(out, 0, sizeof *out);
    char path[96], buf[8192];
    snprintf(path, sizeof path, "/proc/%d/cgroup", (int)pid);
    if (hw_proc_read_small(path, buf, sizeof buf) <= 0)
        return;
    hw_container unit = {0};
    for (char *line = buf, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        char *colon = strchr(line, ':');
        colon = colon ? strchr(colon + 1, ':') : NULL;
        hw_container c;
        if (colon == NULL || !hw_container_from_cgroup(colon + 1, &c))
            continue;
        if (c.kind != HW_CONTAINER_SYSTEMD) {
            *out = c;
            break;
        }
        if (unit.kind == HW_CONTAINER_NONE)
            unit = c;
    }
    if (out->kind == HW_CONTAINER_NONE)
        *out = unit;
    if (out->kind != HW_CONTAINER_KUBERNETES)
        return;
    /* the container's own root, not the host's: its files are the pod's */
    struct stat ours, theirs;
    snprintf(path, sizeof path, "/proc/%d/root", (int)pid);
    if (stat("/proc/self/root", &ours) != 0 || stat(path, &theirs) != 0 ||
        (ours.st_dev == theirs.st_dev && ours.st_ino == theirs.st_ino))
        return;
    snprintf(path, sizeof path, "/proc/%d/root/etc/hostname", (int)pid);
    first_line(path, out->pod_name, sizeof out->pod_name);
    snprintf(path, sizeof path, "/proc/%d/root/var/run/secrets/kubernetes.io/serviceaccount/namespace", (int)pid);
    first_line(path, out->pod_namespace, sizeof out->pod_namespace);
}
