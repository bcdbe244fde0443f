/*
 * in_app.c - whose code a frame is, and a stack's culprit (in_app.h).
 */
#include "in_app.h"

#include <fnmatch.h>
#include <stdint.h>
#include <string.h>

#include "core/text_bits.h"

static const char *const origin_names[HW_ORIGIN_COUNT] = {
    [HW_ORIGIN_UNKNOWN] = "unknown", [HW_ORIGIN_APP] = "app",         [HW_ORIGIN_STDLIB] = "stdlib",
    [HW_ORIGIN_PACKAGE] = "package", [HW_ORIGIN_SYSTEM] = "system",   [HW_ORIGIN_RUNTIME] = "runtime",
    [HW_ORIGIN_HANGWATCH] = "hangwatch",
};

const char *hw_frame_origin_name(hw_frame_origin origin)
{
    return (unsigned)origin < HW_ORIGIN_COUNT ? origin_names[origin] : "unknown";
}

bool hw_frame_origin_parse(const char *name, hw_frame_origin *out)
{
    for (unsigned i = 0; name != NULL && i < HW_ORIGIN_COUNT; i++)
        if (strcmp(name, origin_names[i]) == 0) {
            *out = (hw_frame_origin)i;
            return true;
        }
    return false;
}

static bool starts_with(const char *text, const char *prefix)
{
    return strncmp(text, prefix, strlen(prefix)) == 0;
}

/* hangwatch's own shared objects: the preload, the library and its GLib
 * integration (libhangwatch.so.1, libhangwatch-preload.so ...). */
static bool is_hangwatch_object(const char *path)
{
    const char *base = hw_base_name(path);
    return starts_with(base, "libhangwatch.so") || starts_with(base, "libhangwatch-");
}

/* The interpreter's or V8's own code: python3.11, libpython3.11.so.1.0,
 * node, libnode.so.108, libv8.so. */
static bool is_runtime_object(const char *path)
{
    const char *base = hw_base_name(path);
    return starts_with(base, "python") || starts_with(base, "libpython") || strcmp(base, "node") == 0 ||
           starts_with(base, "libnode") || starts_with(base, "libv8");
}

/* "/lib/python3.11/", "/lib/python3/", "/lib/python2.7/": a Python
 * installation's library directory, in `path`? */
static bool in_python_lib_dir(const char *path)
{
    for (const char *at = strstr(path, "/lib/python"); at != NULL; at = strstr(at + 1, "/lib/python")) {
        const char *p = at + strlen("/lib/python");
        if (*p < '0' || *p > '9')
            continue;
        while ((*p >= '0' && *p <= '9') || *p == '.')
            p++;
        if (*p == '/')
            return true;
    }
    return false;
}

static bool in_python_packages(const char *path)
{
    return strstr(path, "/site-packages/") != NULL || strstr(path, "/dist-packages/") != NULL;
}

/* Under one of the system's library directories? */
static bool in_system_lib_dir(const char *path)
{
    static const char *const dirs[] = {"/lib/", "/lib32/", "/lib64/", "/usr/lib/", "/usr/lib32/", "/usr/lib64/",
                                       "/usr/libexec/"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
        if (starts_with(path, dirs[i]))
            return true;
    return false;
}

static hw_frame_origin python_file_origin(const char *file)
{
    if (file == NULL || starts_with(file, "<frozen"))
        return HW_ORIGIN_RUNTIME;
    if (in_python_packages(file))
        return HW_ORIGIN_PACKAGE;
    if (in_python_lib_dir(file))
        return HW_ORIGIN_STDLIB;
    return HW_ORIGIN_APP;
}

static hw_frame_origin javascript_file_origin(const char *file)
{
    if (file == NULL || file[0] == '\0' || starts_with(file, "node:") || starts_with(file, "internal/"))
        return HW_ORIGIN_RUNTIME;
    if (strstr(file, "/node_modules/") != NULL || starts_with(file, "node_modules/"))
        return HW_ORIGIN_PACKAGE;
    return HW_ORIGIN_APP;
}

hw_frame_origin hw_frame_origin_of(const hw_frame_place *p)
{
    if (!p->native)
        return p->javascript ? javascript_file_origin(p->source_file) : python_file_origin(p->source_file);
    const char *object = p->object_path;
    if (object == NULL || object[0] == '\0')
        return HW_ORIGIN_UNKNOWN;
    if (is_hangwatch_object(object))
        return HW_ORIGIN_HANGWATCH;
    if (is_runtime_object(object))
        return HW_ORIGIN_RUNTIME;
    if (object[0] == '[')
        return HW_ORIGIN_SYSTEM; /* [vdso], [vsyscall] */
    if (in_python_packages(object) || strstr(object, "/node_modules/") != NULL)
        return HW_ORIGIN_PACKAGE;
    if (in_python_lib_dir(object))
        return HW_ORIGIN_STDLIB;
    if (p->executable != NULL && strcmp(object, p->executable) == 0)
        return HW_ORIGIN_APP;
    if (in_system_lib_dir(object))
        return HW_ORIGIN_SYSTEM;
    return HW_ORIGIN_APP;
}

static bool is_glob(const char *pattern)
{
    return strpbrk(pattern, "*?[") != NULL;
}

bool hw_in_app_rule_valid(const char *pattern, const char **why)
{
    size_t len = pattern ? strnlen(pattern, 1024) : 0;
    if (len == 0 || len >= 1024) {
        *why = "a pattern of 1 to 1023 characters";
        return false;
    }
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)pattern[i] < 0x20 || pattern[i] == 0x7f) {
            *why = "no control characters";
            return false;
        }
    /* An unclosed '[' is matched by fnmatch as a plain character, which is
     * surely not what was meant. */
    for (const char *open = strchr(pattern, '['); open != NULL; open = strchr(open + 1, '['))
        if (strchr(open + 1, ']') == NULL) {
            *why = "a '[' without its ']'";
            return false;
        }
    return true;
}

bool hw_in_app_rule_matches(const char *pattern, const char *path)
{
    if (pattern == NULL || path == NULL || path[0] == '\0')
        return false;
    if (is_glob(pattern))
        return fnmatch(pattern, path, 0) == 0;
    size_t len = strlen(pattern);
    if (strncmp(path, pattern, len) != 0)
        return false;
    /* "/srv/app/vendor" holds "/srv/app/vendor/x.py", not "/srv/app/vendors" */
    return pattern[len - 1] == '/' || path[len] == '\0' || path[len] == '/';
}

bool hw_frame_in_app(const hw_frame_place *p, hw_frame_origin origin, const hw_in_app_rule *rules, size_t rule_count,
                     bool *by_rule)
{
    if (by_rule != NULL)
        *by_rule = false;
    if (origin == HW_ORIGIN_HANGWATCH)
        return false;
    bool in_app = origin == HW_ORIGIN_APP;
    for (size_t i = 0; i < rule_count; i++) {
        const char *pattern = rules[i].pattern;
        if (hw_in_app_rule_matches(pattern, p->source_file) ||
            (p->native && hw_in_app_rule_matches(pattern, p->object_path))) {
            in_app = rules[i].in_app;
            if (by_rule != NULL)
                *by_rule = true;
        }
    }
    return in_app;
}

bool hw_frame_is_call_stub(const char *symbol)
{
    if (symbol == NULL)
        return false;
    size_t len = strlen(symbol), suffix = sizeof HW_PLT_SUFFIX - 1;
    return strcmp(symbol, HW_PLT_UNNAMED) == 0 || (len > suffix && strcmp(symbol + len - suffix, HW_PLT_SUFFIX) == 0);
}

size_t hw_culprit_index(const hw_culprit_facts *f, size_t count)
{
    for (size_t i = 0; i < count; i++)
        if (f[i].in_app && !f[i].call_stub)
            return i;
    for (size_t i = 0; i < count; i++)
        if (f[i].runtime_frame && f[i].origin != HW_ORIGIN_HANGWATCH)
            return i;
    for (size_t i = 0; i < count; i++)
        if (f[i].origin == HW_ORIGIN_RUNTIME && f[i].named && !f[i].machinery && !f[i].call_stub)
            return i;
    for (size_t i = 0; i < count; i++)
        if (f[i].origin != HW_ORIGIN_HANGWATCH && f[i].named && !f[i].machinery && !f[i].call_stub)
            return i;
    for (size_t i = 0; i < count; i++)
        if (f[i].origin != HW_ORIGIN_HANGWATCH)
            return i;
    return SIZE_MAX;
}
