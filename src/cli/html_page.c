/*
 * html_page.c - `hangwatch html`'s page itself (html.c): a fixed template
 * (src/cli/html/report.css and report.js, embedded at build time as
 * html_assets.h) around the data of html_data.c, and the page's
 * Content-Security-Policy nonce.
 *
 * The data goes into one JSON text in a <script type="application/json">
 * element, in which every '<', '>' and '&' is written as a \u escape (so
 * neither "</script>" nor "<!--" can end or change the element) and
 * everything beyond ASCII too (U+2028 and U+2029 included).  The script
 * builds the page from it with DOM calls and textContent only, never
 * markup from data, and the page's Content-Security-Policy allows no
 * network access at all and only its own script and style (a fresh nonce
 * per page).  Kept apart from the data so that everything the page is made
 * of besides the data is in this one file and can be checked at a glance.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "agent/common/random_id.h"
#include "hang_groups.h"
#include "html.h"
#include "html_assets.h"
#include "html_internal.h"
#include "core/hw_version.h"

/* The data as JSON that is safe inside a <script> element: no '<', '>' or
 * '&' (each written as its \u escape, which JSON reads back the same),
 * nothing beyond ASCII.  0, or -1 when out of memory. */
static int put_script_json(FILE *out, const json_t *data)
{
    char *text = json_dumps(data, JSON_COMPACT | JSON_ENSURE_ASCII);
    if (text == NULL)
        return -1;
    for (const char *p = text; *p; p++) {
        switch (*p) {
        case '<':
            fputs("\\u003c", out);
            break;
        case '>':
            fputs("\\u003e", out);
            break;
        case '&':
            fputs("\\u0026", out);
            break;
        default:
            fputc(*p, out);
        }
    }
    free(text);
    return 0;
}

char *hw_html_render(hw_html *h, const hw_report_walk_counts *counts, const char *nonce, long long generated_ms,
                     hw_html_reload_fn reload, void *ctx, size_t *len)
{
    hw_stats st;
    hw_stats_init(&st);
    json_t *data = hw_html_data(h, counts, generated_ms, reload, ctx, &st);
    char *text = NULL;
    size_t size = 0;
    FILE *out = data != NULL ? open_memstream(&text, &size) : NULL;
    int rc = out != NULL ? 0 : -1;
    if (rc == 0) {
        fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n", out);
        /* Nothing may be loaded from anywhere; only this page's own script
         * and style run. */
        fprintf(out,
                "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
                "script-src 'nonce-%s'; style-src 'nonce-%s'; base-uri 'none'; form-action 'none'\">\n",
                nonce, nonce);
        fputs("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n", out);
        fputs("<meta name=\"generator\" content=\"hangwatch " HW_VERSION_STRING "\">\n", out);
        fprintf(out, "<title>hangwatch: %zu hang%s in %zu group%s</title>\n", st.hangs, st.hangs == 1 ? "" : "s",
                st.group_count, st.group_count == 1 ? "" : "s");
        fprintf(out, "<style nonce=\"%s\">\n%s</style>\n</head>\n<body>\n", nonce, hw_html_css);
        fputs("<noscript><p>This report is drawn by its own script, which is part of the file: allow JavaScript "
              "for this file to see it.</p></noscript>\n<main id=\"app\"></main>\n",
              out);
        fputs("<script type=\"application/json\" id=\"hw-data\">", out);
        rc = put_script_json(out, data);
        fprintf(out, "</script>\n<script nonce=\"%s\">\n%s</script>\n</body>\n</html>\n", nonce, hw_html_js);
        if (fclose(out) != 0)
            rc = -1;
    }
    json_decref(data);
    hw_stats_free(&st);
    if (rc != 0) {
        free(text);
        return NULL;
    }
    *len = size;
    return text;
}

/* The page's nonce: 18 random bytes in base64, 24 characters. */
void hw_html_make_nonce(char out[HW_HTML_NONCE_SIZE])
{
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    unsigned char r[18];
    hw_random_bytes(r, sizeof r);
    for (size_t i = 0, o = 0; i < sizeof r; i += 3) {
        uint32_t v = (uint32_t)r[i] << 16 | (uint32_t)r[i + 1] << 8 | r[i + 2];
        out[o++] = b64[v >> 18 & 63];
        out[o++] = b64[v >> 12 & 63];
        out[o++] = b64[v >> 6 & 63];
        out[o++] = b64[v & 63];
    }
    out[24] = '\0';
}
