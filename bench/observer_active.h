/*
 * observer_active.h - for the benchmark programs: is hangwatch's observer
 * watching this process?  Its loop page is mapped once it registered (the
 * memfd is named "hangwatch-loop"), so a run "under hangwatch" that is not
 * actually watched is caught instead of measured.  And which clock it
 * stamps busy starts with: the one `hangwatch run` told it to use
 * (HANGWATCH_CLOCK), which decides how the driver reads the reports'
 * block_duration_us.
 */
#ifndef HANGWATCH_BENCH_OBSERVER_ACTIVE_H
#define HANGWATCH_BENCH_OBSERVER_ACTIVE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline int observer_active(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (f == NULL)
        return 0;
    char line[512];
    int found = 0;
    while (!found && fgets(line, sizeof line, f) != NULL)
        found = strstr(line, "hangwatch-loop") != NULL;
    fclose(f);
    return found;
}

/* "tsc" (exact stamps) or "coarse" (CLOCK_MONOTONIC_COARSE stamps). */
static inline const char *observer_clock(void)
{
    const char *clock = getenv("HANGWATCH_CLOCK");
    return clock != NULL && strcmp(clock, "tsc") == 0 ? "tsc" : "coarse";
}

#endif
