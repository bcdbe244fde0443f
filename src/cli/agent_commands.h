/*
 * agent_commands.h - the commands that start the agent, each with its own
 * function: `hangwatch run` (start PROG and watch it), `watch` (watch
 * running processes through the kernel observer) and `attach` (internal:
 * started by the C library to watch the process that started it).  Their
 * options are parsed in agent_options.c; what each command needs besides
 * is checked here, then the report directory is opened and the agent runs.
 */
#ifndef HANGWATCH_AGENT_COMMANDS_H
#define HANGWATCH_AGENT_COMMANDS_H

/* argv[0] is the command's name.  Each returns the exit status: PROG's
 * own for run, 0 for watch and attach, 2 for a usage error, an unusable
 * report directory or what cannot be started or watched. */
int hw_run_main(int argc, char **argv);
int hw_watch_main(int argc, char **argv);
int hw_attach_main(int argc, char **argv);

#endif
