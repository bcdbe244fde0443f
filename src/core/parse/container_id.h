/*
 * container_id.h - who a process is, as a fleet names it: its container
 * (docker, containerd, CRI-O, podman), its Kubernetes pod, or its systemd
 * unit, read from the path of its cgroup (/proc/PID/cgroup).  Node agents
 * of this field label by the same path; a report, a metric and a Sentry
 * event carry it so that a hang is found by the service it hit.
 *
 * The layouts read, both cgroup drivers:
 *   /system.slice/docker-ID.scope                  docker (systemd driver)
 *   /docker/ID                                     docker (cgroupfs driver)
 *   /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podUID_WITH_UNDERSCORES.slice/
 *       cri-containerd-ID.scope  (or crio-ID.scope, docker-ID.scope)
 *   /kubepods/burstable/podUID/ID                  Kubernetes (cgroupfs driver)
 *   /machine.slice/libpod-ID.scope, /user.slice/.../libpod-ID.scope   podman
 *   /system.slice/NAME.service, /user.slice/user-1000.slice/session-2.scope   systemd
 * ID is 64 hexadecimal digits; anything else is not a container id.  The
 * path is untrusted text (a delegated cgroup's names are its owner's):
 * bounded, and only the forms above are taken.  Pure code.
 */
#ifndef HANGWATCH_CONTAINER_ID_H
#define HANGWATCH_CONTAINER_ID_H

#include <stdbool.h>

typedef enum hw_container_kind {
    HW_CONTAINER_NONE = 0, /* the host, no unit either */
    HW_CONTAINER_SYSTEMD,  /* a systemd unit (a service, a scope), not in a container */
    HW_CONTAINER_DOCKER,
    HW_CONTAINER_PODMAN,
    HW_CONTAINER_KUBERNETES, /* a container of a Kubernetes pod */
} hw_container_kind;

typedef struct hw_container {
    hw_container_kind kind;
    char runtime[16];  /* "docker", "containerd", "cri-o", "podman", "" */
    char id[65];       /* the container's id, 64 hex digits, "" when none */
    char pod_uid[37];  /* Kubernetes: the pod's UID (with dashes) */
    char unit[128];    /* the innermost systemd unit (NAME.service, NAME.scope), "" when none */
    char slice[128];   /* the innermost slice, "" when none */
    /* Kubernetes, filled by the reader of the container's own files (not
     * from the path): the pod's name (its hostname) and namespace (its
     * service account's), as the container's bytes say them: escape to
     * print */
    char pod_name[64];
    char pod_namespace[64];
} hw_container;

/* Read `path` (one cgroup path, "/..."): true when it names anything. */
bool hw_container_from_cgroup(const char *path, hw_container *out);

/* "docker", "kubernetes", ... ("none"). */
const char *hw_container_kind_name(hw_container_kind kind);

/* The bounded label a metric carries: the container's short id (12), or
 * the unit, or "" (the host). */
void hw_container_label(const hw_container *c, char *out, unsigned long len);

#endif
