/*
 * python_machinery.h - which C functions of a CPython interpreter are its
 * own machinery: the evaluation loop, the calls between Python and C, the
 * interpreter's start.  When a Python program's stack has no Python frames
 * (a version whose frames are not read), these say nothing of where the
 * program was; the innermost interpreter frame that is not one of them
 * (time_sleep, a regular expression's matcher, _PyLong_Add) does, and the
 * grouping key (agent) and the culprit (`hangwatch stats`, `html`) start
 * there.  Pure.
 */
#ifndef HANGWATCH_PYTHON_MACHINERY_H
#define HANGWATCH_PYTHON_MACHINERY_H

#include <stdbool.h>

#include "core/in_app.h"

/* Is `symbol` (a C function's name, NULL: unnamed) part of CPython's
 * machinery?  An unnamed frame is. */
bool hw_python_machinery(const char *symbol);

/* Is a frame of that machinery, or of a process's start, by its origin
 * (core/in_app.h) and symbol (NULL: unnamed)?  Only a native frame of the
 * runtime or the system can be: a program's own `main` is its code. */
bool hw_frame_is_machinery(bool native, hw_frame_origin origin, const char *symbol);

#endif
