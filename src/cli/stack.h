/* stack.h - `hangwatch stack PID [--json FILE]`: the stack of every thread
 * of a running process, taken on demand without disturbing it (stack.c). */
#ifndef HANGWATCH_STACK_H
#define HANGWATCH_STACK_H

/* argv[0] is "stack".  The exit status: 0, 1 (nothing captured, --json not
 * written) or 2 (usage error, no such process, no right to ptrace it). */
int hw_stack_main(int argc, char **argv);

#endif
