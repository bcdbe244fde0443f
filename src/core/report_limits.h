/*
 * report_limits.h - how many reports hangwatch may write: Matrix's daily
 * limit (dumpDailyLimit, 100 per 24 h by default) and a cap on the report
 * directory's size, so a program that hangs all day cannot fill the disk.
 * What is dropped is still detected, counted and said once on stderr.
 * Pure code: the agent measures the directory, this decides.
 */
#ifndef HANGWATCH_REPORT_LIMITS_H
#define HANGWATCH_REPORT_LIMITS_H

#include <stdbool.h>
#include <stdint.h>

#define HW_DAY_NS (24ull * 3600ull * 1000000000ull)

typedef struct hw_report_limits {
    unsigned daily_limit;   /* reports per rolling 24 h; 0 = no limit */
    uint64_t max_dir_bytes; /* 0 = no cap */
} hw_report_limits;

/* What the report directory holds now. */
typedef struct hw_report_dir_usage {
    unsigned reports_last_day; /* reports written in the last 24 h */
    uint64_t bytes;            /* size of all reports in it */
} hw_report_dir_usage;

typedef enum hw_limit_verdict {
    HW_LIMIT_OK = 0,
    HW_LIMIT_DAILY,    /* the daily limit is reached */
    HW_LIMIT_DIR_SIZE, /* the directory would grow past its cap */
} hw_limit_verdict;

/* May a report of about `expected_bytes` be written? */
hw_limit_verdict hw_report_allowed(const hw_report_limits *limits, const hw_report_dir_usage *usage,
                                   uint64_t expected_bytes);

/* Parse a size: a whole number with an optional K, M or G (powers of
 * 1024), e.g. "100M".  0 on success, -1 with a reason otherwise. */
int hw_parse_size(const char *text, uint64_t *out, const char **why);

#endif
