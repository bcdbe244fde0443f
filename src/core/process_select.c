/*
 * process_select.c - `watch --all`'s selectors held to a process
 * (process_select.h).
 */
#include "process_select.h"

#include <fnmatch.h>
#include <string.h>

static bool known(const char *s)
{
    return s != NULL && s[0] != '\0';
}

static bool matches(const hw_process_selector *s, const hw_process_facts *f)
{
    switch (s->kind) {
    case HW_SELECT_COMM:
        return known(f->comm) && strcmp(f->comm, s->pattern) == 0;
    case HW_SELECT_EXE:
        return known(f->exe) && fnmatch(s->pattern, f->exe, 0) == 0;
    case HW_SELECT_CGROUP:
        for (size_t i = 0; i < f->cgroup_count && i < HW_SELECT_MAX_CGROUPS; i++)
            if (known(f->cgroups[i]) && fnmatch(s->pattern, f->cgroups[i], 0) == 0)
                return true;
        return false;
    case HW_SELECT_USER:
        return f->uid_known && f->uid == s->uid;
    }
    return false;
}

bool hw_process_selected(const hw_process_selector *selectors, size_t count, const hw_process_facts *facts)
{
    static const hw_select_kind kinds[] = {HW_SELECT_COMM, HW_SELECT_EXE, HW_SELECT_CGROUP, HW_SELECT_USER};
    for (size_t i = 0; i < count; i++)
        if (selectors[i].exclude && matches(&selectors[i], facts))
            return false;
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        bool given = false, any = false;
        for (size_t i = 0; i < count; i++) {
            if (selectors[i].exclude || selectors[i].kind != kinds[k])
                continue;
            given = true;
            any = any || matches(&selectors[i], facts);
        }
        if (given && !any)
            return false;
    }
    return true;
}

bool hw_select_exclusion_parse(const char *text, hw_select_kind *kind, const char **value)
{
    static const struct {
        const char *prefix;
        hw_select_kind kind;
    } forms[] = {{"comm=", HW_SELECT_COMM}, {"exe=", HW_SELECT_EXE}, {"cgroup=", HW_SELECT_CGROUP},
                 {"user=", HW_SELECT_USER}};
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        size_t n = strlen(forms[i].prefix);
        if (strncmp(text, forms[i].prefix, n) == 0 && text[n] != '\0') {
            *kind = forms[i].kind;
            *value = text + n;
            return true;
        }
    }
    return false;
}

bool hw_select_path_pattern_valid(const char *pattern)
{
    size_t n = strlen(pattern);
    return n > 0 && n < 4096 && (pattern[0] == '/' || pattern[0] == '*');
}
