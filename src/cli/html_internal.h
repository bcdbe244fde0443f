/*
 * html_internal.h - what the files of `hangwatch html` share among
 * themselves and with nothing else: html_data.c gives the page's data to
 * html_page.c, and html_page.c the page's nonce to html.c.  The public
 * steps (hw_html_new, _add, _render, ...) are in html.h.
 */
#ifndef HANGWATCH_HTML_INTERNAL_H
#define HANGWATCH_HTML_INTERNAL_H

#include <jansson.h>

#include "hang_groups.h"
#include "html.h"
#include "report_read.h"

/*
 * Everything the page shows, from the reports added to `h`, as one JSON
 * value, and into *st the groups (as `hangwatch stats` makes them; the
 * caller has initialised *st and frees it with hw_stats_free).  The
 * groups shown in detail are read again through `reload`.  NULL when out
 * of memory.
 */
json_t *hw_html_data(hw_html *h, const hw_report_walk_counts *counts, long long generated_ms, hw_html_reload_fn reload,
                     void *ctx, hw_stats *st);

/* A page's Content-Security-Policy nonce: 24 base64 characters and a NUL. */
#define HW_HTML_NONCE_SIZE 25
void hw_html_make_nonce(char out[HW_HTML_NONCE_SIZE]);

#endif
