/*
 * agent.h - the hangwatch agent: runs a program with the observer preloaded
 * (or watches running processes), watches its loop page, and on a hang
 * captures, unwinds, symbolizes and writes the report.  It is a separate
 * process from the program it watches, so nothing it does can deadlock on
 * the program's locks, and if it dies the program goes on untouched.
 *
 * This is the agent's one entry point, for the command line.  How it is
 * built, stage by stage (watch, capture, symbols, report, exports):
 * docs/architecture.md.
 */
#ifndef HANGWATCH_AGENT_H
#define HANGWATCH_AGENT_H

#include "agent/common/options.h"

/*
 * Run argv under watch until it exits; or, with attach_pid, watch that
 * process, or with watch_pids those, until they exit, a termination signal
 * arrives (or duration_ns has passed), and return 0.  Returns the exit
 * status to give the shell: the program's own, 128+N if signal N killed
 * it, or 2 when the program could not be started or a process could not be
 * watched (with a message on stderr).
 */
int hw_agent_run(const hw_agent_options *opts);

#endif
