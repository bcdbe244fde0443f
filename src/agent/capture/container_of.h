/*
 * container_of.h - a process's container, Kubernetes pod or systemd unit
 * (core/parse/container_id.h), from its /proc/PID/cgroup, for the report,
 * the line, the metrics' label and Sentry's tags.
 */
#ifndef HANGWATCH_CONTAINER_OF_H
#define HANGWATCH_CONTAINER_OF_H

#include <sys/types.h>

#include "core/parse/container_id.h"

/* Process `pid`'s (kind HW_CONTAINER_NONE when it has none, or is gone):
 * the first of its cgroup paths that names a container, else one that
 * names a unit; a Kubernetes pod's name and namespace from the container's
 * own /etc/hostname and service account, when it has them. */
void hw_container_of(pid_t pid, hw_container *out);

#endif
