/*
 * agent_commands.c - `hangwatch run`, `watch` and `attach`
 * (agent_commands.h): the options parsed alike (agent_options.c), then
 * what only the command asks for (a program for run, the observer library
 * found next to hangwatch; -p PID for watch; --pid and --socket for
 * attach), and the same start: the report directory opened and checked,
 * the clock slack set, the agent run.
 */
#include "agent_commands.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/common/report_dir.h"
#include "agent_options.h"
#include "cli_usage.h"
#include "config_file.h"

/* Coarse-stamped pages (the C library's, and the preloaded observer's where
 * the time-stamp counter is not used) carry CLOCK_MONOTONIC_COARSE, which
 * was measured to lag the precise clock by up to 1.7 ticks (6.9 ms with
 * 4 ms ticks): allow two ticks so that a reported hang is always a real one.
 * Only those pages get it (clock_source.c). */
static void set_clock_slack(hw_detector_config *cfg)
{
    struct timespec res;
    if (clock_getres(CLOCK_MONOTONIC_COARSE, &res) == 0)
        cfg->clock_slack_ns = 2 * ((uint64_t)res.tv_sec * 1000000000ull + (uint64_t)res.tv_nsec);
}

/* The observer library: $HANGWATCH_PRELOAD, else next to this executable. */
static char *find_preload(void)
{
    const char *env = getenv("HANGWATCH_PRELOAD");
    if (env && *env)
        return realpath(env, NULL);
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return NULL;
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (!slash)
        return NULL;
    *slash = '\0';
    char *candidate = NULL;
    if (asprintf(&candidate, "%s/../lib/hangwatch/libhangwatch-preload.so", self) < 0)
        return NULL;
    char *resolved = realpath(candidate, NULL);
    free(candidate);
    return resolved;
}

/* Open and check the report directory before anything starts: an unusable
 * one is an error now, not a silent loss at the first hang.  0, or -1 after
 * saying why. */
static int open_report_dir(hw_agent_options *opts)
{
    char why[512];
    int rc = hw_report_dir_open(opts->report_dir, &opts->report_dir_handle, why, sizeof why);
    if (rc != 0) {
        fprintf(stderr, "hangwatch: cannot use report directory '%s': %s\n", opts->report_dir, why);
        return -1;
    }
    return 0;
}

/* The start every command shares, once its own checks are done: the report
 * directory, the clock slack, the agent.  The agent's exit status, or 2
 * when the report directory cannot be used. */
static int start_agent(hw_agent_options *opts)
{
    if (open_report_dir(opts) != 0)
        return 2;
    set_clock_slack(&opts->detector);
    int code = hw_agent_run(opts);
    hw_report_dir_close(opts->report_dir_handle);
    return code;
}

/* `run` starts PROG (the arguments after the options) with the observer
 * library preloaded. */
int hw_run_main(int argc, char **argv)
{
    hw_agent_command_line line;
    int rc = hw_agent_options_parse(HW_AGENT_RUN, argc, argv, &line);
    if (rc >= 0)
        return rc;
    if (line.operands >= argc)
        return hw_cli_usage_error("%srun needs a program: hangwatch run [OPTIONS] -- PROG [ARGS...]", "");
    line.opts.argv = &argv[line.operands];

    char *preload = find_preload();
    if (!preload) {
        fprintf(stderr,
                "hangwatch: cannot find the observer library libhangwatch-preload.so (looked in ../lib/hangwatch "
                "next to the hangwatch executable); set HANGWATCH_PRELOAD to its path\n");
        return 2;
    }
    if (strpbrk(preload, ": ")) {
        fprintf(stderr, "hangwatch: the observer library's path '%s' contains ':' or ' ', which LD_PRELOAD cannot "
                        "carry; install hangwatch elsewhere\n",
                preload);
        free(preload);
        return 2;
    }
    line.opts.preload_path = preload;
    int code = start_agent(&line.opts);
    free(preload);
    return code;
}

static int watch_with(hw_agent_command_line *line, int argc, char **argv);

/* `watch` watches running processes (-p PID...) through the kernel
 * observer; --config reads its options from a file too (config_file.h). */
int hw_watch_main(int argc, char **argv)
{
    hw_agent_command_line line;
    hw_config_session *config = NULL;
    /* With --config the command line is parsed only with the file's
     * options before its own: alone it may lack what the file gives. */
    const char *path = hw_config_path_in(argc, argv);
    int rc = path != NULL ? -1 : hw_agent_options_parse(HW_AGENT_WATCH, argc, argv, &line);
    if (rc < 0 && path == NULL)
        path = line.opts.config_path; /* an abbreviation of --config getopt took */
    if (rc < 0 && path != NULL)
        rc = hw_config_parse_watch(path, argc, argv, &line, &config); /* the file's options, then the command line's */
    if (rc >= 0)
        return rc;
    rc = watch_with(&line, argc, argv);
    hw_config_session_free(config);
    return rc;
}

/* `watch`'s own checks of its parsed options, then the agent. */
static int watch_with(hw_agent_command_line *line, int argc, char **argv)
{
    if (line->watch_pid_count == 0 && !line->opts.watch_all)
        return hw_cli_usage_error("%swatch needs processes: hangwatch watch -p PID [-p PID...] [OPTIONS], or every "
                                  "loop of the machine: hangwatch watch --all [selectors] [OPTIONS]", "");
    if (line->operands < argc)
        return hw_cli_usage_error("watch takes no program ('%s'): use hangwatch run to start one",
                                  argv[line->operands]);
    line->opts.watch_pids = line->watch_pids;
    line->opts.watch_pid_count = line->watch_pid_count;
    return start_agent(&line->opts);
}

/* `attach` (internal, started by the C library) watches the running process
 * --pid and takes --socket and --ready-fd. */
int hw_attach_main(int argc, char **argv)
{
    hw_agent_command_line line;
    int rc = hw_agent_options_parse(HW_AGENT_ATTACH, argc, argv, &line);
    if (rc >= 0)
        return rc;
    if (line.opts.attach_pid <= 0 || line.opts.socket_name == NULL)
        return hw_cli_usage_error("%sattach needs --pid and --socket (it is started by the hangwatch library)", "");
    if (line.operands < argc)
        return hw_cli_usage_error("attach takes no program ('%s')", argv[line.operands]);
    return start_agent(&line.opts);
}
