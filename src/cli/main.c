/*
 * main.c - the `hangwatch` command line.
 *
 *   hangwatch run [options] -- PROG [ARGS...]   watch PROG, write reports
 *   hangwatch show REPORT.json...               print a report for people
 *   hangwatch watch -p PID... [options]         watch running processes (kernel observer)
 *   hangwatch stack PID [--json FILE]           every thread's stack, now
 *   hangwatch stats [--json] REPORT.json|DIR... hangs grouped, by total time
 *   hangwatch export --format F -o FILE REPORT.json|DIR...  for speedscope, Perfetto
 *   hangwatch html -o FILE REPORT.json|DIR...   one self-contained HTML page
 *
 * Usage errors (an unknown flag, a malformed duration, no program) and an
 * unusable report directory print a message and exit 2 before anything is
 * started.
 *
 * This file only sends each command to its own function: run, watch and
 * attach are in agent_commands.c (their options in agent_options.c), the
 * usage text in cli_usage.c, the others in a file named for the command.
 */
#include <stdio.h>
#include <string.h>

#include "agent_commands.h"
#include "cli_usage.h"
#include "export.h"
#include "html.h"
#include "core/hw_version.h"
#include "show.h"
#include "stack.h"
#include "stats.h"
#include "upload.h"

int main(int argc, char **argv)
{
    if (argc < 2)
        return hw_cli_usage_error("%sa command is needed: run, watch, show, stack, stats, export or html", "");
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        fputs(hw_cli_usage_text, stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        printf("hangwatch %s\n", HW_VERSION_STRING);
        return 0;
    }
    if (strcmp(cmd, "run") == 0)
        return hw_run_main(argc - 1, argv + 1);
    if (strcmp(cmd, "attach") == 0)
        return hw_attach_main(argc - 1, argv + 1);
    if (strcmp(cmd, "watch") == 0)
        return hw_watch_main(argc - 1, argv + 1);
    if (strcmp(cmd, "show") == 0)
        return hw_show_main(argc - 1, argv + 1);
    if (strcmp(cmd, "stack") == 0)
        return hw_stack_main(argc - 1, argv + 1);
    if (strcmp(cmd, "stats") == 0)
        return hw_stats_main(argc - 1, argv + 1);
    if (strcmp(cmd, "export") == 0)
        return hw_export_main(argc - 1, argv + 1);
    if (strcmp(cmd, "upload") == 0)
        return hw_upload_main(argc - 1, argv + 1);
    if (strcmp(cmd, "html") == 0)
        return hw_html_main(argc - 1, argv + 1);
    return hw_cli_usage_error("unknown command '%s' (use run, watch, show, stack, stats, export, html or upload)", cmd);
}
