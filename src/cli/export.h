/* export.h - `hangwatch export --format speedscope|chrome-trace -o FILE
 * REPORT.json|DIR...` (export.c): hangs for existing viewers. */
#ifndef HANGWATCH_EXPORT_H
#define HANGWATCH_EXPORT_H

#include <jansson.h>
#include <stddef.h>

#include "report_summary.h"

typedef enum hw_export_format { HW_EXPORT_SPEEDSCOPE, HW_EXPORT_CHROME_TRACE } hw_export_format;

/* The hangs among `s` (stutter and snapshots are left out) in `format`;
 * `sampled`, NULL or `count` entries, holds each report's early samples
 * (hw_sampled_of); `report_count` is said in the file.  NULL when out of
 * memory. */
json_t *hw_export_build(hw_export_format format, const hw_hang_summary *s, const hw_sampled *sampled, size_t count,
                        size_t report_count);

/* argv[0] is "export".  0, 1 (no hang could be exported: nothing written)
 * or 2 (usage error). */
int hw_export_main(int argc, char **argv);

#endif
