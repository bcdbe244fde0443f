/*
 * container_id.c - a process's container, pod or unit from its cgroup path
 * (container_id.h).
 */
#include "container_id.h"

#include <stdio.h>
#include <string.h>

#define ID_LEN 64
#define MAX_PATH_LEN 4096

static bool is_hex_id(const char *s, size_t len)
{
    if (len != ID_LEN)
        return false;
    for (size_t i = 0; i < len; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

static bool ends_with(const char *s, size_t len, const char *suffix)
{
    size_t n = strlen(suffix);
    return len >= n && memcmp(s + len - n, suffix, n) == 0;
}

static bool starts_with(const char *s, size_t len, const char *prefix)
{
    size_t n = strlen(prefix);
    return len >= n && memcmp(s, prefix, n) == 0;
}

static void copy(char *out, size_t size, const char *s, size_t len)
{
    if (len >= size)
        len = size - 1;
    memcpy(out, s, len);
    out[len] = '\0';
}

/* A pod UID: 36 characters of hex and dashes (or underscores, the systemd
 * driver's), given with dashes. */
static bool take_pod_uid(const char *s, size_t len, hw_container *out)
{
    if (len != 36)
        return false;
    char uid[37];
    for (size_t i = 0; i < len; i++) {
        char ch = s[i] == '_' ? '-' : s[i];
        bool dash_place = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash_place ? ch != '-' : !((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f')))
            return false;
        uid[i] = ch;
    }
    uid[36] = '\0';
    memcpy(out->pod_uid, uid, sizeof uid);
    return true;
}

/* One path component: a container id in one of its forms, a pod, a unit
 * or a slice. */
static void read_component(const char *c, size_t len, const char *parent, size_t parent_len, hw_container *out)
{
    static const struct {
        const char *prefix;
        const char *runtime;
    } scoped[] = {{"docker-", "docker"}, {"cri-containerd-", "containerd"}, {"crio-", "cri-o"}, {"libpod-", "podman"}};
    if (ends_with(c, len, ".scope")) {
        for (size_t i = 0; i < sizeof scoped / sizeof scoped[0]; i++) {
            size_t n = strlen(scoped[i].prefix);
            if (starts_with(c, len, scoped[i].prefix) && is_hex_id(c + n, len - n - 6)) {
                copy(out->id, sizeof out->id, c + n, ID_LEN);
                snprintf(out->runtime, sizeof out->runtime, "%s", scoped[i].runtime);
                return;
            }
        }
    }
    if (is_hex_id(c, len)) { /* the cgroupfs driver: the parent says whose */
        copy(out->id, sizeof out->id, c, len);
        if (parent_len == 6 && memcmp(parent, "docker", 6) == 0)
            snprintf(out->runtime, sizeof out->runtime, "docker");
        return;
    }
    if (starts_with(c, len, "pod") && take_pod_uid(c + 3, len - 3, out))
        return; /* /kubepods/burstable/podUID */
    const char *pod = len > 10 ? strstr(c, "-pod") : NULL; /* kubepods-burstable-podUID.slice */
    if (pod != NULL && pod < c + len && starts_with(c, len, "kubepods") && ends_with(c, len, ".slice") &&
        take_pod_uid(pod + 4, (size_t)(c + len - 6 - (pod + 4)), out))
        return;
    if (ends_with(c, len, ".service") || ends_with(c, len, ".scope"))
        copy(out->unit, sizeof out->unit, c, len);
    else if (ends_with(c, len, ".slice"))
        copy(out->slice, sizeof out->slice, c, len);
}

bool hw_container_from_cgroup(const char *path, hw_container *out)
{
    memset(out, 0, sizeof *out);
    if (path == NULL || path[0] != '/' || strnlen(path, MAX_PATH_LEN + 1) > MAX_PATH_LEN)
        return false;
    const char *parent = "";
    size_t parent_len = 0;
    for (const char *p = path + 1; *p;) {
        const char *end = strchr(p, '/');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len > 0)
            read_component(p, len, parent, parent_len, out);
        parent = p;
        parent_len = len;
        p += len + (end ? 1 : 0);
    }
    if (out->id[0] && out->pod_uid[0])
        out->kind = HW_CONTAINER_KUBERNETES;
    else if (out->id[0] && strcmp(out->runtime, "podman") == 0)
        out->kind = HW_CONTAINER_PODMAN;
    else if (out->id[0])
        out->kind = HW_CONTAINER_DOCKER;
    else if (out->unit[0])
        out->kind = HW_CONTAINER_SYSTEMD;
    if (out->id[0]) /* a container's scope is not a unit of the user's */
        out->unit[0] = '\0';
    return out->kind != HW_CONTAINER_NONE;
}

const char *hw_container_kind_name(hw_container_kind kind)
{
    switch (kind) {
    case HW_CONTAINER_SYSTEMD:
        return "systemd";
    case HW_CONTAINER_DOCKER:
        return "docker";
    case HW_CONTAINER_PODMAN:
        return "podman";
    case HW_CONTAINER_KUBERNETES:
        return "kubernetes";
    case HW_CONTAINER_NONE:
        break;
    }
    return "none";
}

void hw_container_label(const hw_container *c, char *out, unsigned long len)
{
    if (len == 0)
        return;
    if (c->id[0])
        snprintf(out, len, "%.12s", c->id);
    else
        snprintf(out, len, "%s", c->unit);
}
