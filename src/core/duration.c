/*
 * duration.c - see duration.h.  Written by hand rather than with strtod so
 * that "1.5s" is exact in integer nanoseconds and a locale never changes
 * what the decimal point is.
 */
#include "duration.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

int hw_parse_duration(const char *text, uint64_t *out_ns, const char **why)
{
    const char *reason = NULL;
    if (text == NULL || *text == '\0') {
        reason = "empty duration";
        goto fail;
    }
    if (*text == '-') {
        reason = "negative duration";
        goto fail;
    }

    const char *p = text;
    uint64_t whole = 0;
    bool any_digit = false;
    while (*p >= '0' && *p <= '9') {
        if (whole > (UINT64_MAX - 9) / 10) {
            reason = "duration too large";
            goto fail;
        }
        whole = whole * 10 + (uint64_t)(*p - '0');
        any_digit = true;
        p++;
    }
    /* Up to 9 fractional digits, kept as a numerator over 10^9. */
    uint64_t frac_num = 0, frac_den = 1;
    if (*p == '.') {
        p++;
        while (*p >= '0' && *p <= '9') {
            if (frac_den < 1000000000ull) {
                frac_num = frac_num * 10 + (uint64_t)(*p - '0');
                frac_den *= 10;
            }
            any_digit = true;
            p++;
        }
    }
    if (!any_digit) {
        reason = "expected a number, e.g. 500ms or 2s";
        goto fail;
    }
    if (*p == '\0') {
        reason = "missing unit (use ns, us, ms, s or m, e.g. 500ms or 2s)";
        goto fail;
    }

    static const struct {
        const char *name;
        uint64_t ns;
    } units[] = {
        {"ns", 1ull}, {"us", 1000ull}, {"ms", 1000000ull}, {"s", 1000000000ull}, {"m", 60000000000ull},
    };
    uint64_t unit_ns = 0;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcmp(p, units[i].name) == 0) {
            unit_ns = units[i].ns;
            break;
        }
    }
    if (unit_ns == 0) {
        reason = "unknown unit (use ns, us, ms, s or m)";
        goto fail;
    }
    if (whole != 0 && unit_ns > UINT64_MAX / whole) {
        reason = "duration too large";
        goto fail;
    }
    uint64_t ns = whole * unit_ns;
    /* frac_den <= 10^9 and frac_num < frac_den, so this cannot overflow for
     * units up to a minute: frac_num * (unit_ns / frac_den) or the
     * remainder form below. */
    uint64_t frac_ns = unit_ns >= frac_den ? frac_num * (unit_ns / frac_den) : (frac_num * unit_ns) / frac_den;
    if (ns > UINT64_MAX - frac_ns) {
        reason = "duration too large";
        goto fail;
    }
    *out_ns = ns + frac_ns;
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
