/*
 * cgroup_text.c - see cgroup_text.h.  Every parser walks its text as
 * (pointer, length) spans, one line at a time, and copies out only what it
 * has checked, so that a text without a terminator, with NUL bytes, cut
 * short or made up is read within its bounds and refused as a whole.
 */
#include "cgroup_text.h"

#include <string.h>

/* A piece of a text: n bytes at p, no terminator. */
typedef struct span {
    const char *p;
    size_t n;
} span;

/* The line at *pos (without its newline), moving *pos past it; false at the
 * end of the text. */
static bool next_line(const char *text, size_t len, size_t *pos, span *line)
{
    if (*pos >= len)
        return false;
    const char *start = text + *pos;
    const char *newline = memchr(start, '\n', len - *pos);
    line->p = start;
    line->n = newline != NULL ? (size_t)(newline - start) : len - *pos;
    *pos += line->n + (newline != NULL ? 1 : 0);
    return true;
}

static bool has_nul(span s)
{
    return memchr(s.p, '\0', s.n) != NULL;
}

static bool span_is(span s, const char *word)
{
    size_t n = strlen(word);
    return s.n == n && memcmp(s.p, word, n) == 0;
}

static bool is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool all_digits(span s)
{
    if (s.n == 0)
        return false;
    for (size_t i = 0; i < s.n; i++)
        if (!is_digit(s.p[i]))
            return false;
    return true;
}

/* Is `word` (not empty) one of the pieces of `list` between `separator`s? */
static bool list_has(span list, char separator, const char *word)
{
    if (word[0] == '\0')
        return false;
    size_t start = 0;
    for (size_t i = 0; i <= list.n; i++) {
        if (i == list.n || list.p[i] == separator) {
            span piece = {list.p + start, i - start};
            if (span_is(piece, word))
                return true;
            start = i + 1;
        }
    }
    return false;
}

/* Is `s` "/" or "/a/b" with no empty, "." or ".." component and no NUL? */
static bool is_canonical_path(span s)
{
    if (s.n == 0 || s.p[0] != '/' || has_nul(s))
        return false;
    if (s.n == 1)
        return true;
    size_t start = 1;
    for (size_t i = 1; i <= s.n; i++) {
        if (i == s.n || s.p[i] == '/') {
            span component = {s.p + start, i - start};
            if (component.n == 0 || span_is(component, ".") || span_is(component, ".."))
                return false;
            start = i + 1;
        }
    }
    return true;
}

/* Copy `s` NUL-terminated into out[out_size]; false when it does not fit. */
static bool copy_out(span s, char *out, size_t out_size)
{
    if (out == NULL || s.n >= out_size)
        return false;
    memcpy(out, s.p, s.n);
    out[s.n] = '\0';
    return true;
}

/* ---- /proc/PID/cgroup ---------------------------------------------------- */

/* A line "ID:CONTROLLERS:PATH" taken apart (PATH may hold colons). */
static bool cgroup_line(span line, span *id, span *controllers, span *path)
{
    const char *first = memchr(line.p, ':', line.n);
    if (first == NULL)
        return false;
    size_t after_first = (size_t)(first - line.p) + 1;
    const char *second = memchr(first + 1, ':', line.n - after_first);
    if (second == NULL)
        return false;
    id->p = line.p;
    id->n = (size_t)(first - line.p);
    controllers->p = first + 1;
    controllers->n = (size_t)(second - (first + 1));
    path->p = second + 1;
    path->n = line.n - (size_t)(second + 1 - line.p);
    return all_digits(*id);
}

/* The path of the one line naming v1 `controller` (NULL: the v2 line "0::");
 * false when none or several do. */
static bool find_cgroup_line(const char *text, size_t len, const char *controller, char *out, size_t out_size)
{
    size_t pos = 0, matches = 0;
    span line, id, controllers, path, found = {NULL, 0};
    while (next_line(text, len, &pos, &line)) {
        if (!cgroup_line(line, &id, &controllers, &path))
            continue;
        bool wanted = controller != NULL ? list_has(controllers, ',', controller)
                                         : span_is(id, "0") && controllers.n == 0;
        if (wanted) {
            matches++;
            found = path;
        }
    }
    if (matches != 1 || !is_canonical_path(found))
        return false;
    return copy_out(found, out, out_size);
}

bool hw_cgroup_v1_path(const char *text, size_t len, const char *controller, char *out, size_t out_size)
{
    if (text == NULL || controller == NULL || controller[0] == '\0')
        return false;
    return find_cgroup_line(text, len, controller, out, out_size);
}

bool hw_cgroup_v2_path(const char *text, size_t len, char *out, size_t out_size)
{
    if (text == NULL)
        return false;
    return find_cgroup_line(text, len, NULL, out, out_size);
}

/* ---- /proc/self/mountinfo ------------------------------------------------ */

/* The field at *pos of a line whose fields are separated by spaces. */
static bool next_field(span line, size_t *pos, span *field)
{
    while (*pos < line.n && line.p[*pos] == ' ')
        (*pos)++;
    if (*pos >= line.n)
        return false;
    size_t start = *pos;
    while (*pos < line.n && line.p[*pos] != ' ')
        (*pos)++;
    field->p = line.p + start;
    field->n = *pos - start;
    return true;
}

static bool is_octal(char c)
{
    return c >= '0' && c <= '7';
}

/* Undo mountinfo's \OOO escapes of `s` into out[out_size], NUL-terminated. */
static bool unescape(span s, char *out, size_t out_size)
{
    size_t o = 0;
    for (size_t i = 0; i < s.n; i++) {
        char c = s.p[i];
        if (c == '\0')
            return false;
        if (c == '\\') {
            if (s.n - i < 4 || !is_octal(s.p[i + 1]) || !is_octal(s.p[i + 2]) || !is_octal(s.p[i + 3]))
                return false;
            unsigned value = (unsigned)(s.p[i + 1] - '0') * 64 + (unsigned)(s.p[i + 2] - '0') * 8
                             + (unsigned)(s.p[i + 3] - '0');
            if (value == 0 || value > 255)
                return false;
            c = (char)(unsigned char)value;
            i += 3;
        }
        if (o + 1 >= out_size)
            return false;
        out[o++] = c;
    }
    out[o] = '\0';
    return true;
}

/* A mountinfo line's root, mount point, filesystem type and super options:
 * "ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE
 * SUPER_OPTIONS". */
static bool mountinfo_line(span line, span *root, span *mount_point, span *fstype, span *super_options)
{
    size_t pos = 0;
    span field;
    for (int i = 0; i < 6; i++) {
        if (!next_field(line, &pos, &field))
            return false;
        if (i == 3)
            *root = field;
        else if (i == 4)
            *mount_point = field;
    }
    do {
        if (!next_field(line, &pos, &field))
            return false;
    } while (!span_is(field, "-"));
    span source;
    return next_field(line, &pos, fstype) && next_field(line, &pos, &source)
           && next_field(line, &pos, super_options);
}

/* The first mount of fstype `type` (and, for "cgroup", carrying
 * `controller`) whose root holds `cgroup_path`. */
static bool find_mount(const char *text, size_t len, const char *type, const char *controller,
                       const char *cgroup_path, hw_cgroup_mount *out)
{
    size_t pos = 0;
    span line, root, mount_point, fstype, super_options;
    while (next_line(text, len, &pos, &line)) {
        if (!mountinfo_line(line, &root, &mount_point, &fstype, &super_options) || !span_is(fstype, type))
            continue;
        if (controller != NULL && !list_has(super_options, ',', controller))
            continue;
        hw_cgroup_mount m;
        if (!unescape(mount_point, m.mount_point, sizeof m.mount_point) || m.mount_point[0] != '/')
            continue;
        if (!unescape(root, m.root, sizeof m.root)
            || !is_canonical_path((span){m.root, strlen(m.root)}))
            continue;
        if (cgroup_path != NULL && hw_cgroup_relative_path(cgroup_path, m.root) == NULL)
            continue;
        *out = m;
        return true;
    }
    return false;
}

bool hw_cgroup_v1_mount(const char *text, size_t len, const char *controller, const char *cgroup_path,
                        hw_cgroup_mount *out)
{
    if (text == NULL || controller == NULL || controller[0] == '\0' || out == NULL)
        return false;
    return find_mount(text, len, "cgroup", controller, cgroup_path, out);
}

bool hw_cgroup_v2_mount(const char *text, size_t len, const char *cgroup_path, hw_cgroup_mount *out)
{
    if (text == NULL || out == NULL)
        return false;
    return find_mount(text, len, "cgroup2", NULL, cgroup_path, out);
}

const char *hw_cgroup_relative_path(const char *path, const char *root)
{
    if (path == NULL || root == NULL || path[0] != '/' || root[0] != '/')
        return NULL;
    size_t n = strlen(root);
    while (n > 0 && root[n - 1] == '/')
        n--;
    if (n == 0)
        return path; /* the root is "/" */
    if (strncmp(path, root, n) != 0)
        return NULL;
    if (path[n] == '\0')
        return "/";
    return path[n] == '/' ? path + n : NULL;
}

/* ---- a cgroup's files ---------------------------------------------------- */

bool hw_cgroup_controllers_has(const char *text, size_t len, const char *controller)
{
    if (text == NULL || controller == NULL || controller[0] == '\0')
        return false;
    size_t i = 0;
    while (i < len) {
        while (i < len && is_blank(text[i]))
            i++;
        size_t start = i;
        while (i < len && !is_blank(text[i]))
            i++;
        if (span_is((span){text + start, i - start}, controller))
            return true;
    }
    return false;
}

/* The decimal number at s.p[*i] (at least one digit, within 64 bits),
 * moving *i past it. */
static bool parse_u64(span s, size_t *i, uint64_t *value)
{
    size_t start = *i;
    uint64_t v = 0;
    for (; *i < s.n && is_digit(s.p[*i]); (*i)++) {
        uint64_t digit = (uint64_t)(s.p[*i] - '0');
        if (v > (UINT64_MAX - digit) / 10)
            return false;
        v = v * 10 + digit;
    }
    if (*i == start)
        return false;
    *value = v;
    return true;
}

static bool rest_is_blank(span s, size_t i)
{
    for (; i < s.n; i++)
        if (!is_blank(s.p[i]))
            return false;
    return true;
}

/* Move *i past spaces and tabs; false when there were none. */
static bool skip_separator(span s, size_t *i)
{
    size_t start = *i;
    while (*i < s.n && (s.p[*i] == ' ' || s.p[*i] == '\t'))
        (*i)++;
    return *i > start;
}

hw_cgroup_key hw_cgroup_stat_value(const char *text, size_t len, const char *key, uint64_t *value)
{
    if (text == NULL || key == NULL || key[0] == '\0')
        return HW_CGROUP_KEY_ABSENT;
    size_t pos = 0;
    span line;
    while (next_line(text, len, &pos, &line)) {
        size_t i = 0;
        while (i < line.n && line.p[i] != ' ' && line.p[i] != '\t')
            i++;
        if (!span_is((span){line.p, i}, key))
            continue;
        uint64_t v;
        if (!skip_separator(line, &i) || !parse_u64(line, &i, &v) || !rest_is_blank(line, i))
            return HW_CGROUP_KEY_MALFORMED;
        *value = v;
        return HW_CGROUP_KEY_FOUND;
    }
    return HW_CGROUP_KEY_ABSENT;
}

bool hw_cgroup_v1_quota(const char *text, size_t len, bool *limited, uint64_t *quota_us)
{
    if (text == NULL)
        return false;
    span s = {text, len};
    size_t i = 0;
    uint64_t v;
    bool negative = len > 0 && text[0] == '-';
    if (negative)
        i++;
    if (!parse_u64(s, &i, &v) || !rest_is_blank(s, i))
        return false;
    if (negative) {
        if (v != 1)
            return false; /* the kernel writes -1 and no other negative */
        *limited = false;
        return true;
    }
    if (v == 0)
        return false;
    *limited = true;
    *quota_us = v;
    return true;
}

bool hw_cgroup_v1_period(const char *text, size_t len, uint64_t *period_us)
{
    if (text == NULL)
        return false;
    span s = {text, len};
    size_t i = 0;
    uint64_t v;
    if (!parse_u64(s, &i, &v) || !rest_is_blank(s, i) || v == 0)
        return false;
    *period_us = v;
    return true;
}

bool hw_cgroup_v2_cpu_max(const char *text, size_t len, bool *limited, uint64_t *quota_us, uint64_t *period_us)
{
    if (text == NULL)
        return false;
    span s = {text, len};
    size_t i = 0;
    uint64_t quota = 0, period;
    bool unlimited = len >= 3 && memcmp(text, "max", 3) == 0;
    if (unlimited)
        i = 3;
    else if (!parse_u64(s, &i, &quota) || quota == 0)
        return false;
    if (!skip_separator(s, &i) || !parse_u64(s, &i, &period) || period == 0 || !rest_is_blank(s, i))
        return false;
    *limited = !unlimited;
    if (!unlimited)
        *quota_us = quota;
    *period_us = period;
    return true;
}
