/*
 * fuzz_container_id.c - core/parse/container_id.h and core/process_select.h,
 * which the root-run agent applies to other processes' cgroup paths (their
 * names are a delegated cgroup's owner's to choose) and comms for
 * `watch --all`.
 *
 * Feeds: the input, NUL-terminated, as a cgroup path (and with a '/' put
 * in front), and as a process's facts held to selectors whose patterns are
 * slices of the input.
 *
 * Proves: no crash or read past the input; every field found is
 * NUL-terminated within its buffer; an id is 64 lower-case hex digits and
 * a copy of input bytes; a pod UID is 36 characters of hex and dashes; the
 * kind agrees with what was found; a label is the id's first 12 digits or
 * the unit.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/parse/container_id.h"
#include "core/process_select.h"

#define CHECK(cond)                                                                                                    \
    do {                                                                                                               \
        if (!(cond))                                                                                                   \
            __builtin_trap();                                                                                          \
    } while (0)

static bool terminated(const char *s, size_t size)
{
    return memchr(s, '\0', size) != NULL;
}

static void check_container(const char *path, const hw_container *c)
{
    CHECK(terminated(c->runtime, sizeof c->runtime) && terminated(c->id, sizeof c->id));
    CHECK(terminated(c->pod_uid, sizeof c->pod_uid) && terminated(c->unit, sizeof c->unit));
    CHECK(terminated(c->slice, sizeof c->slice));
    if (c->id[0]) {
        CHECK(strlen(c->id) == 64 && strstr(path, c->id) != NULL);
        for (size_t i = 0; i < 64; i++)
            CHECK((c->id[i] >= '0' && c->id[i] <= '9') || (c->id[i] >= 'a' && c->id[i] <= 'f'));
        CHECK(c->kind == HW_CONTAINER_DOCKER || c->kind == HW_CONTAINER_PODMAN || c->kind == HW_CONTAINER_KUBERNETES);
    }
    if (c->pod_uid[0]) {
        CHECK(strlen(c->pod_uid) == 36);
        for (size_t i = 0; i < 36; i++)
            CHECK(c->pod_uid[i] == '-' || (c->pod_uid[i] >= '0' && c->pod_uid[i] <= '9') ||
                  (c->pod_uid[i] >= 'a' && c->pod_uid[i] <= 'f'));
    }
    CHECK(c->kind != HW_CONTAINER_KUBERNETES || (c->id[0] && c->pod_uid[0]));
    CHECK(c->kind != HW_CONTAINER_SYSTEMD || c->unit[0]);
    char label[16];
    hw_container_label(c, label, sizeof label);
    CHECK(c->id[0] ? strncmp(label, c->id, 12) == 0 && strlen(label) == 12 : strncmp(label, c->unit, 15) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    char *text = malloc(len + 2);
    CHECK(text != NULL);
    text[0] = '/';
    memcpy(text + 1, data, len);
    text[len + 1] = '\0';
    hw_container c;
    bool found = hw_container_from_cgroup(text + 1, &c); /* as given */
    CHECK(!found || c.kind != HW_CONTAINER_NONE);
    if (found)
        check_container(text + 1, &c);
    found = hw_container_from_cgroup(text, &c); /* made absolute */
    CHECK(found == (c.kind != HW_CONTAINER_NONE));
    if (found)
        check_container(text, &c);

    /* the input's halves as a comm, an exe, cgroup paths and patterns */
    size_t half = len / 2;
    char *a = strndup((const char *)data, half), *b = strndup((const char *)data + half, len - half);
    CHECK(a != NULL && b != NULL);
    hw_process_facts f = {.comm = a, .exe = b, .cgroup_count = 2, .uid_known = len % 2 == 0, .uid = (uid_t)len};
    f.cgroups[0] = a;
    f.cgroups[1] = text;
    hw_process_selector s[4] = {{.kind = HW_SELECT_COMM, .pattern = b},
                                {.kind = HW_SELECT_EXE, .pattern = a},
                                {.kind = HW_SELECT_CGROUP, .pattern = b, .exclude = len % 3 == 0},
                                {.kind = HW_SELECT_USER, .uid = (uid_t)len}};
    bool chosen = hw_process_selected(s, 4, &f);
    CHECK(!chosen || strcmp(a, b) == 0); /* the comm must be the pattern itself */
    hw_select_kind kind;
    const char *value;
    if (hw_select_exclusion_parse(a, &kind, &value))
        CHECK(value > a && value[0] != '\0');
    free(a);
    free(b);
    free(text);
    return 0;
}
