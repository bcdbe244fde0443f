/*
 * duration.c - see duration.h.  Written by hand rather than with strtod so
 * that "1.5s" is exact in integer nanoseconds and a locale never changes
 * what the decimal point is; and so that a refusal can say precisely what
 * is wrong with the text (a sign, no number at all, a missing or unknown
 * unit, junk after it, a value beyond 2^64 ns).
 */
#include "duration.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define EXPONENT_CAP 1000000L /* far beyond any duration; keeps the arithmetic below in range */

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool is_letter(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool starts_number(const char *p)
{
    return is_digit(p[0]) || (p[0] == '.' && is_digit(p[1]));
}

/* Does `p` start with `word`, ignoring case, followed by no other letter? */
static bool is_word(const char *p, const char *word)
{
    size_t n = strlen(word);
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        if (c != word[i])
            return false;
    }
    return !is_letter(p[n]);
}

/* A decimal number as written: its digits without the point, and where the
 * point falls among them once the exponent is applied (point == 2 for
 * "12.5" and for "1.25e1"; it may lie before the first digit or after the
 * last). */
typedef struct decimal {
    const char *int_digits, *frac_digits;
    size_t int_len, frac_len;
    long point;
} decimal;

static int digit_at(const decimal *d, long i)
{
    if (i < 0 || (size_t)i >= d->int_len + d->frac_len)
        return 0;
    return (size_t)i < d->int_len ? d->int_digits[i] - '0' : d->frac_digits[(size_t)i - d->int_len] - '0';
}

/* The number times unit_ns, truncated to whole nanoseconds, exactly; false
 * when it exceeds UINT64_MAX.  Whole part: digits before the point.  The
 * fraction's share, floor(unit_ns * 0.ddd...), is computed from its last
 * digit back (floor((a + floor(x)) / 10) == floor((a + x) / 10)). */
static bool to_ns(const decimal *d, uint64_t unit_ns, uint64_t *out)
{
    long digits = (long)(d->int_len + d->frac_len);
    uint64_t whole = 0;
    for (long i = 0; i < d->point; i++) {
        int digit = digit_at(d, i);
        if (whole > (UINT64_MAX - (uint64_t)digit) / 10)
            return false;
        whole = whole * 10 + (uint64_t)digit;
    }
    uint64_t fraction_ns = 0; /* < unit_ns */
    long first = d->point > 0 ? d->point : 0;
    for (long i = digits - 1; i >= first; i--)
        fraction_ns = ((uint64_t)digit_at(d, i) * unit_ns + fraction_ns) / 10;
    for (long i = first - 1; i >= d->point && fraction_ns != 0; i--)
        fraction_ns /= 10; /* zeros between the point and the first digit */
    if (whole > (UINT64_MAX - fraction_ns) / unit_ns)
        return false;
    *out = whole * unit_ns + fraction_ns;
    return true;
}

int hw_parse_duration(const char *text, uint64_t *out_ns, const char **why)
{
    const char *reason = NULL;
    if (text == NULL || *text == '\0') {
        reason = "empty duration";
        goto fail;
    }
    if (*text == '-' && starts_number(text + 1)) {
        reason = "negative duration";
        goto fail;
    }
    if (*text == '+' && starts_number(text + 1)) {
        reason = "a sign is not accepted (write e.g. 2s)";
        goto fail;
    }
    if (is_word(text, "nan") || is_word(text, "inf") || is_word(text, "infinity")) {
        reason = "not a number (e.g. 500ms or 2s)";
        goto fail;
    }
    if (!starts_number(text)) {
        reason = "not a number (e.g. 500ms or 2s)";
        goto fail;
    }
    if (text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
        reason = "hexadecimal numbers are not accepted (write it in decimal, e.g. 16s)";
        goto fail;
    }

    /* The number: digits, an optional fraction, an optional exponent. */
    const char *p = text;
    decimal number = {.int_digits = p};
    while (is_digit(*p))
        p++;
    number.int_len = (size_t)(p - text);
    number.frac_digits = p;
    if (*p == '.') {
        number.frac_digits = ++p;
        while (is_digit(*p))
            p++;
        number.frac_len = (size_t)(p - number.frac_digits);
    }
    bool nonzero = false;
    for (long i = 0; i < (long)(number.int_len + number.frac_len) && !nonzero; i++)
        nonzero = digit_at(&number, i) != 0;
    long exponent = 0;
    if ((*p == 'e' || *p == 'E') && (is_digit(p[1]) || ((p[1] == '+' || p[1] == '-') && is_digit(p[2])))) {
        p++;
        bool negative = *p == '-';
        if (*p == '+' || *p == '-')
            p++;
        for (; is_digit(*p); p++)
            if (exponent < EXPONENT_CAP)
                exponent = exponent * 10 + (*p - '0');
        if (negative)
            exponent = -exponent;
    } else if ((*p == 'e' || *p == 'E') && (p[1] == '+' || p[1] == '-')) {
        reason = "exponent without digits (e.g. 1e3s)";
        goto fail;
    }
    number.point = (long)number.int_len + exponent;
    if (!nonzero)
        number.point = 0; /* zero is zero at any scale */

    if (*p == '\0') {
        reason = "missing unit (use ns, us, ms, s or m, e.g. 500ms or 2s)";
        goto fail;
    }
    if (*p == ' ' || *p == '\t') {
        reason = "space between the number and the unit (write e.g. 2s)";
        goto fail;
    }
    if (!is_letter(*p)) {
        reason = "unexpected character after the number (use e.g. 500ms, 1.5s or 2s)";
        goto fail;
    }

    static const struct {
        const char *name;
        uint64_t ns;
    } units[] = {
        {"ns", 1ull}, {"us", 1000ull}, {"ms", 1000000ull}, {"s", 1000000000ull}, {"m", 60000000000ull},
    };
    size_t unit_len = 0;
    while (is_letter(p[unit_len]))
        unit_len++;
    uint64_t unit_ns = 0;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strlen(units[i].name) == unit_len && strncmp(p, units[i].name, unit_len) == 0) {
            unit_ns = units[i].ns;
            break;
        }
    }
    if (unit_ns == 0) {
        reason = "unknown unit (use ns, us, ms, s or m)";
        goto fail;
    }
    if (p[unit_len] != '\0') {
        reason = "unexpected characters after the unit";
        goto fail;
    }
    uint64_t ns;
    if (!to_ns(&number, unit_ns, &ns)) {
        reason = "duration too large (out of range: at most about 584 years)";
        goto fail;
    }
    *out_ns = ns;
    return 0;

fail:
    if (why)
        *why = reason;
    return -1;
}

void hw_format_duration(uint64_t ns, char *buf, size_t len)
{
    if (ns >= 1000000000ull && ns % 1000000ull == 0) {
        uint64_t ms = ns / 1000000ull;
        if (ms % 1000 == 0)
            snprintf(buf, len, "%llus", (unsigned long long)(ms / 1000));
        else
            snprintf(buf, len, "%llu.%03llus", (unsigned long long)(ms / 1000), (unsigned long long)(ms % 1000));
        /* trim trailing zeros of the fraction: 1.500s -> 1.5s */
        char *dot = strchr(buf, '.');
        if (dot) {
            char *s = strchr(dot, 's');
            while (s > dot + 1 && s[-1] == '0') {
                memmove(s - 1, s, strlen(s) + 1);
                s--;
            }
        }
    } else if (ns >= 1000000ull && ns % 1000000ull == 0) {
        snprintf(buf, len, "%llums", (unsigned long long)(ns / 1000000ull));
    } else if (ns >= 1000ull && ns % 1000ull == 0) {
        snprintf(buf, len, "%lluus", (unsigned long long)(ns / 1000ull));
    } else {
        snprintf(buf, len, "%lluns", (unsigned long long)ns);
    }
}
