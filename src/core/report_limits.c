/* report_limits.c - see report_limits.h. */
#include "report_limits.h"

#include <stddef.h>

hw_limit_verdict hw_report_allowed(const hw_report_limits *limits, const hw_report_dir_usage *usage,
                                   uint64_t expected_bytes)
{
    if (limits->daily_limit != 0 && usage->reports_last_day >= limits->daily_limit)
        return HW_LIMIT_DAILY;
    if (limits->max_dir_bytes != 0 && usage->bytes + expected_bytes > limits->max_dir_bytes)
        return HW_LIMIT_DIR_SIZE;
    return HW_LIMIT_OK;
}

int hw_parse_size(const char *text, uint64_t *out, const char **why)
{
    const char *reason = "expected a whole number with an optional K, M or G, e.g. 100M";
    if (text == NULL || *text < '0' || *text > '9')
        goto fail;
    uint64_t v = 0;
    const char *p = text;
    while (*p >= '0' && *p <= '9') {
        if (v > (UINT64_MAX - 9) / 10) {
            reason = "size too large";
            goto fail;
        }
        v = v * 10 + (uint64_t)(*p++ - '0');
    }
    uint64_t mult = 1;
    if (*p == 'K' || *p == 'k')
        mult = 1024ull, p++;
    else if (*p == 'M' || *p == 'm')
        mult = 1024ull * 1024ull, p++;
    else if (*p == 'G' || *p == 'g')
        mult = 1024ull * 1024ull * 1024ull, p++;
    if (*p != '\0')
        goto fail;
    if (v != 0 && mult > UINT64_MAX / v) {
        reason = "size too large";
        goto fail;
    }
    *out = v * mult;
    return 0;
fail:
    if (why)
        *why = reason;
    return -1;
}
