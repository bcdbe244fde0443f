/* html.h - `hangwatch html -o FILE REPORT.json|DIR...` (html.c, with
 * html_data.c and html_page.c): the hangs of many reports as one
 * self-contained HTML page. */
#ifndef HANGWATCH_HTML_H
#define HANGWATCH_HTML_H

#include <jansson.h>
#include <stddef.h>

#include "report_read.h"

/* argv[0] is "html".  0, 1 (no hang could be shown: nothing written) or 2
 * (usage error). */
int hw_html_main(int argc, char **argv);

/*
 * The page, built from reports one at a time (the command's steps, apart
 * for the fuzz target): hw_html_add each report (checked for its shape),
 * then hw_html_render.  Rendering reads the newest report of each group
 * shown in detail again, for its other threads, through `reload` (which
 * returns a new reference, or NULL after saying why).
 */
typedef struct hw_html hw_html;
typedef json_t *(*hw_html_reload_fn)(const char *path, void *ctx);

hw_html *hw_html_new(void);
/* 0, or -1 when out of memory. */
int hw_html_add(hw_html *h, json_t *root, const char *path);
/* How many of the reports added are hangs (the rest: stutter, snapshots). */
size_t hw_html_hang_count(const hw_html *h);
/*
 * The page as a malloc'd text of *len bytes (NUL-terminated), or NULL when
 * out of memory.  `nonce`: the page's Content-Security-Policy nonce
 * (base64 characters only); `generated_ms`: when, in Unix milliseconds.
 */
char *hw_html_render(hw_html *h, const hw_report_walk_counts *counts, const char *nonce, long long generated_ms,
                     hw_html_reload_fn reload, void *ctx, size_t *len);
void hw_html_free(hw_html *h);

#endif
