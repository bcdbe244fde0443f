/*
 * fuzz_cli_values.c - the parsers of command-line values: hw_parse_duration
 * (--threshold, --check-period, --sample-interval, --frame-interval),
 * hw_parse_size (--max-dir-size) and hw_cpu_high_parse (--cpu-high).
 *
 * Feeds: the input, NUL-terminated in a buffer of exactly its size plus
 * one (so ASan sees any read past the terminator), to both parsers.
 *
 * Proves: no out-of-bounds read, no UBSan report (overflow included); a
 * parser is deterministic; success leaves a value consistent with the text
 * (a size is a multiple of its unit; a duration of a whole number of units
 * is that number times the unit), failure leaves the output untouched and
 * gives a non-empty reason.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu_window.h"
#include "core/parse/duration.h"
#include "core/report_limits.h"

#define CHECK(cond)                                                                                                    \
    do {                                                                                                               \
        if (!(cond))                                                                                                   \
            __builtin_trap();                                                                                          \
    } while (0)

#define UNTOUCHED 0x5a5a5a5a5a5a5a5aull

/* The whole number at the start of `text`, if it has only digits and then
 * `suffix`; false when there is none or it does not fit. */
static bool whole_then(const char *text, const char *suffix, uint64_t *out)
{
    uint64_t v = 0;
    const char *p = text;
    if (*p < '0' || *p > '9')
        return false;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
            return false;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    if (strcmp(p, suffix) != 0)
        return false;
    *out = v;
    return true;
}

typedef int (*value_parser)(const char *text, uint64_t *out, const char **why);

/* Parse `text` twice: both parses agree; a refusal leaves the value
 * untouched and gives a reason.  True with the value when it parsed. */
static bool parses_consistently(value_parser parse, const char *text, uint64_t *value)
{
    uint64_t a = UNTOUCHED, b = UNTOUCHED;
    const char *why_a = NULL, *why_b = NULL;
    int ra = parse(text, &a, &why_a);
    int rb = parse(text, &b, &why_b);
    CHECK(ra == rb && (ra == 0 || ra == -1));
    if (ra != 0) {
        CHECK(a == UNTOUCHED && b == UNTOUCHED);
        CHECK(why_a != NULL && why_a[0] != '\0' && why_a == why_b);
        return false;
    }
    CHECK(a == b);
    *value = a;
    return true;
}

static void duration(const char *text)
{
    uint64_t a;
    if (!parses_consistently(hw_parse_duration, text, &a))
        return;
    CHECK(text[0] != '-' && text[0] != '\0');
    static const struct {
        const char *unit;
        uint64_t ns;
    } units[] = {{"ns", 1}, {"us", 1000}, {"ms", 1000000}, {"s", 1000000000}, {"m", 60000000000}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        uint64_t whole;
        if (whole_then(text, units[i].unit, &whole))
            CHECK(whole <= UINT64_MAX / units[i].ns && a == whole * units[i].ns);
    }
    /* What hangwatch prints back (hw_format_duration, exact for every
     * value) parses to the same duration. */
    char buf[64];
    hw_format_duration(a, buf, sizeof buf);
    uint64_t again = UNTOUCHED;
    CHECK(hw_parse_duration(buf, &again, NULL) == 0);
    CHECK(again == a);
}

static void size(const char *text)
{
    uint64_t a;
    if (!parses_consistently(hw_parse_size, text, &a))
        return;
    static const struct {
        const char *suffix;
        uint64_t mult;
    } sfx[] = {{"", 1},       {"K", 1024},       {"k", 1024},
               {"M", 1 << 20}, {"m", 1 << 20},    {"G", 1ull << 30},
               {"g", 1ull << 30}};
    bool matched = false;
    for (size_t i = 0; i < sizeof sfx / sizeof sfx[0]; i++) {
        uint64_t whole;
        if (whole_then(text, sfx[i].suffix, &whole)) {
            CHECK(whole <= UINT64_MAX / sfx[i].mult && a == whole * sfx[i].mult);
            matched = true;
        }
    }
    CHECK(matched); /* nothing but digits and one suffix is accepted */
}

/* --cpu-high: deterministic; a refusal gives a reason and leaves the value
 * untouched; an acceptance is a percentage in range, the number the text
 * starts with, and a window of at least 1 s (60 s without one). */
static void cpu_high(const char *text)
{
    hw_cpu_high_config a = {7, 7}, b = {7, 7};
    const char *why_a = NULL, *why_b = NULL;
    int ra = hw_cpu_high_parse(text, &a, &why_a);
    int rb = hw_cpu_high_parse(text, &b, &why_b);
    CHECK(ra == rb && (ra == 0 || ra == -1));
    if (ra != 0) {
        CHECK(a.percent == 7 && a.window_ns == 7 && why_a != NULL && why_a[0] != '\0');
        return;
    }
    CHECK(a.percent == b.percent && a.window_ns == b.window_ns);
    CHECK(a.percent >= 1 && a.percent <= HW_CPU_HIGH_MAX_PERCENT);
    CHECK(a.window_ns >= 1000000000ull);
    CHECK(strtoul(text, NULL, 10) == a.percent);
    if (strchr(text, '/') == NULL)
        CHECK(a.window_ns == HW_CPU_HIGH_DEFAULT_WINDOW_NS);
}

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t len);

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t len)
{
    char *text = malloc(len + 1);
    CHECK(text != NULL);
    memcpy(text, in, len);
    text[len] = '\0';
    duration(text);
    size(text);
    cpu_high(text);
    free(text);
    return 0;
}
