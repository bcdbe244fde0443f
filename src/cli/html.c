/*
 * html.c - `hangwatch html -o FILE REPORT.json|DIR...`: the hangs of many
 * reports as one self-contained HTML page, to open in any browser, from a
 * file, offline (docs/decisions.md §28):
 *
 *   - a summary table of the hang groups, grouped and figured exactly as
 *     `hangwatch stats` does, sortable by any column;
 *   - for each group: the hung thread's stack of its newest report, that
 *     report's other threads, and a flame graph of early sampling's samples
 *     where the reports carry them;
 *   - a timeline per process: each hang a bar from its start to its end,
 *     its detection marked.
 *
 * The work is in three files, one role each: this one is the command (its
 * options, reading the reports, writing the page out); html_data.c turns
 * the reports into the page's data, bounded, as JSON; html_page.c writes
 * the page around that data, with its template, script and
 * Content-Security-Policy.  Reports are foreign input: names may hold
 * anything.
 */
#include "html.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "foreign_text.h"
#include "html_internal.h"
#include "json_file.h"
#include "report_command.h"
#include "report_read.h"

static const char html_help[] =
    "usage: hangwatch html -o FILE REPORT.json|DIR...\n"
    "\n"
    "Writes one self-contained HTML page about the hangs of the reports given\n"
    "(and of the *.json files in the directories given): open it in a browser,\n"
    "from the file, offline; it loads nothing from anywhere.\n"
    "\n"
    "  - the hangs grouped as `hangwatch stats` groups them: count, total,\n"
    "    median and worst duration, first and last seen, processes, culprit;\n"
    "    click a column's title to sort by it\n"
    "  - for each group: the hung thread's stack in its newest report, with\n"
    "    file:line, the report's other threads, and with --early-sampling a\n"
    "    flame graph of the samples of all the group's reports (hover a frame\n"
    "    for its function, file:line, samples and share), the Point Stack\n"
    "    highlighted\n"
    "  - a timeline per process: each hang from its start to its end, its\n"
    "    detection marked\n"
    "\n"
    "  -o, --output FILE where to write (mode 0600, written atomically, never\n"
    "                    through a symbolic link); - for standard output\n"
    "\n"
    "A file that cannot be read or is not a report is named on stderr and\n"
    "skipped.  The exit status is 0 when a page was written, 1 when no hang\n"
    "could be read (nothing is written), 2 for a usage error.\n";

/* ---- the command ----------------------------------------------------------------- */

static json_t *reload_file(const char *path, void *ctx)
{
    (void)ctx;
    return hw_report_load(path, true);
}

/* What the command line says, and the page's data as the reports are read. */
typedef struct html_run {
    const char *output;
    hw_html *h;
} html_run;

static int take_output(const char *value, void *ctx)
{
    return hw_take_output_option("html", value, &((html_run *)ctx)->output);
}

static int check_options(void *ctx)
{
    if (((const html_run *)ctx)->output == NULL)
        return hw_usage_error("html", "html needs -o FILE (or -o - for standard output)", NULL);
    return 0;
}

/* The file is checked before anything is read (2 when it may not be
 * written); then the page's data is made ready. */
static int before_reading(void *ctx)
{
    html_run *run = ctx;
    if (strcmp(run->output, "-") != 0 && hw_json_file_check(run->output, "the page") != 0)
        return 2;
    if ((run->h = hw_html_new()) == NULL) {
        fputs("hangwatch: out of memory while reading the reports\n", stderr);
        return 1;
    }
    return 0;
}

static int take_report(const char *path, json_t *root, void *ctx)
{
    return hw_html_add(((html_run *)ctx)->h, root, path);
}

static const hw_report_option html_options[] = {
    {"--output", "-o", true, take_output},
};

static const hw_report_command html_command = {
    .name = "html",
    .help = html_help,
    .options = html_options,
    .option_count = sizeof html_options / sizeof html_options[0],
    .check_options = check_options,
    .needs_paths = "html needs reports or directories: hangwatch html -o FILE REPORT.json|DIR...",
    .before_reading = before_reading,
    .take_report = take_report,
    .none_read = ": no page written",
};

int hw_html_main(int argc, char **argv)
{
    html_run run = {NULL, NULL};
    hw_report_walk_counts counts;
    int rc;
    if (!hw_report_command_read(&html_command, argc, argv, &run, &counts, &rc)) {
        hw_html_free(run.h);
        return rc;
    }
    hw_html *h = run.h;
    bool to_stdout = strcmp(run.output, "-") == 0;
    size_t hangs = hw_html_hang_count(h);
    if (hangs == 0) {
        fputs("hangwatch: the reports hold no hang (only stutter or snapshots): no page written\n", stderr);
        hw_html_free(h);
        return 1;
    }
    if (hangs < counts.reports)
        fprintf(stderr, "hangwatch: %zu stutter or snapshot report%s set aside: not hangs\n", counts.reports - hangs,
                counts.reports - hangs == 1 ? "" : "s");
    char nonce[HW_HTML_NONCE_SIZE];
    hw_html_make_nonce(nonce);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    size_t len = 0;
    char *page = hw_html_render(h, &counts, nonce, (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000, reload_file,
                                NULL, &len);
    hw_html_free(h);
    if (page == NULL) {
        fputs("hangwatch: out of memory while making the page\n", stderr);
        rc = 1;
    } else if (to_stdout) {
        if (fwrite(page, 1, len, stdout) != len || fflush(stdout) != 0) {
            fputs("hangwatch: cannot write the page to standard output\n", stderr);
            rc = 1;
        }
    } else {
        int w = hw_text_file_write(run.output, "the page", page, len);
        if (w != 0 && w != -ELOOP) {
            hw_say_about(run.output);
            fprintf(stderr, "cannot write the page: %s\n", strerror(-w));
        }
        rc = w != 0;
    }
    free(page);
    return rc;
}
