/*
 * fuzz_in_app.c - whose code a frame is, and a stack's culprit
 * (core/in_app.h): the paths come from the watched program (a Python code
 * object's file name, an object's path in its maps) and the patterns from
 * the user, so neither may crash or mislead the agent.
 *
 * Feeds: the input split at its first two NUL bytes into a pattern, a path
 * and an executable path; the bytes after them as culprit facts, four per
 * frame.
 *
 * Proves: every call returns, the origin is one of the named ones and
 * parses back, a frame's verdict without rules is "origin is app", a
 * prefix pattern matches its own path, hangwatch's frames are never in_app
 * whatever the rule, and the culprit is in range, never hangwatch's unless
 * nothing else is there, the innermost in_app frame that is no PLT stub
 * when there is one, and a stub only when no other named frame could be.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/in_app.h"

#define CHECK(cond)                                                                                                    \
    do {                                                                                                               \
        if (!(cond))                                                                                                   \
            __builtin_trap();                                                                                          \
    } while (0)

/* The next NUL-terminated piece of data[*at..size), copied (malloc'd). */
static char *piece(const uint8_t *data, size_t size, size_t *at)
{
    size_t start = *at, end = start;
    while (end < size && data[end] != 0)
        end++;
    char *s = malloc(end - start + 1);
    if (s == NULL)
        abort();
    memcpy(s, data + start, end - start);
    s[end - start] = '\0';
    *at = end < size ? end + 1 : end;
    return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t at = 0;
    char *pattern = piece(data, size, &at);
    char *path = piece(data, size, &at);
    char *executable = piece(data, size, &at);

    for (int kind = 0; kind < 3; kind++) {
        hw_frame_place p = {.native = kind == 0, .javascript = kind == 2, .object_path = path,
                            .source_file = path, .executable = executable};
        hw_frame_origin origin = hw_frame_origin_of(&p);
        hw_frame_origin back;
        CHECK((unsigned)origin < HW_ORIGIN_COUNT);
        CHECK(hw_frame_origin_parse(hw_frame_origin_name(origin), &back) && back == origin);
        bool by_rule = true;
        CHECK(hw_frame_in_app(&p, origin, NULL, 0, &by_rule) == (origin == HW_ORIGIN_APP) && !by_rule);
        const char *why = NULL;
        if (hw_in_app_rule_valid(pattern, &why)) {
            hw_in_app_rule rules[2] = {{pattern, true}, {pattern, false}};
            bool matches = hw_in_app_rule_matches(pattern, path) ||
                           (p.native && hw_in_app_rule_matches(pattern, p.object_path));
            bool verdict = hw_frame_in_app(&p, origin, rules, 1, &by_rule);
            if (origin == HW_ORIGIN_HANGWATCH)
                CHECK(!verdict);
            else
                CHECK(verdict == (matches ? true : origin == HW_ORIGIN_APP) && by_rule == matches);
            CHECK(!hw_frame_in_app(&p, origin, rules, 2, NULL) || (!matches && origin == HW_ORIGIN_APP));
        } else {
            CHECK(why != NULL);
        }
    }
    if (path[0] != '\0' && strpbrk(path, "*?[") == NULL)
        CHECK(hw_in_app_rule_matches(path, path));

    size_t count = (size - at) / 4;
    if (count > 256)
        count = 256;
    hw_culprit_facts facts[256];
    for (size_t i = 0; i < count; i++) {
        const uint8_t *b = data + at + 4 * i;
        facts[i] = (hw_culprit_facts){.origin = (hw_frame_origin)(b[0] % HW_ORIGIN_COUNT),
                                      .in_app = b[1] & 1,
                                      .runtime_frame = b[1] & 2,
                                      .named = b[2] & 1,
                                      .machinery = b[3] & 1,
                                      .call_stub = b[3] & 2};
    }
    size_t culprit = hw_culprit_index(facts, count);
    bool any_other = false, any_in_app = false, any_plain_named = false;
    size_t first_in_app = SIZE_MAX;
    for (size_t i = 0; i < count; i++) {
        any_other |= facts[i].origin != HW_ORIGIN_HANGWATCH;
        bool in_app = facts[i].in_app && !facts[i].call_stub; /* a stub is passed over */
        if (in_app && first_in_app == SIZE_MAX)
            first_in_app = i;
        any_in_app |= in_app;
        any_plain_named |= facts[i].origin != HW_ORIGIN_HANGWATCH && facts[i].named && !facts[i].machinery &&
                           !facts[i].call_stub;
    }
    CHECK(culprit == SIZE_MAX || culprit < count);
    CHECK((culprit == SIZE_MAX) == (!any_other && !any_in_app));
    if (any_in_app)
        CHECK(culprit == first_in_app);
    else if (culprit != SIZE_MAX)
        CHECK(facts[culprit].origin != HW_ORIGIN_HANGWATCH);
    /* a stub is the culprit only when no frame but a runtime's could be */
    if (culprit != SIZE_MAX && facts[culprit].call_stub && !facts[culprit].runtime_frame)
        CHECK(!any_plain_named);
    free(pattern);
    free(path);
    free(executable);
    return 0;
}
