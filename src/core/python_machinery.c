/*
 * python_machinery.c - see python_machinery.h.
 */
#include "python_machinery.h"

#include <string.h>

/* Prefixes of the names of CPython's evaluation and call machinery, and of
 * the start of a process that runs it. */
static const char *const machinery[] = {
    "_PyEval_",     "PyEval_",         "_PyFunction_",  "_PyObject_Call",   "PyObject_Call",
    "_PyObject_Vectorcall", "PyObject_Vectorcall", "_PyObject_MakeTpCall", "_PyVectorcall", "PyVectorcall_",
    "cfunction_",   "method_vectorcall", "vectorcall_", "slot_tp_call",     "_PyCFunction",
    "PyCFunction_Call", "function_code_fastcall", "call_function", "builtin_exec", "exec_code",
    "run_eval_code_obj", "run_mod",    "pyrun_",        "PyRun_",           "_PyRun_",
    "pymain_",      "Py_RunMain",      "Py_BytesMain",  "Py_Main",          "main",
    "_start",       "__libc_start",    "gen_send_ex",   "PyGen_",           "_PyGen_",
    "context_run",  "task_step",       "task_wakeup",   "TaskStepMethWrapper", "_Py_call",
};

bool hw_frame_is_machinery(bool native, hw_frame_origin origin, const char *symbol)
{
    return native && (origin == HW_ORIGIN_RUNTIME || origin == HW_ORIGIN_SYSTEM) && hw_python_machinery(symbol);
}

bool hw_python_machinery(const char *symbol)
{
    if (symbol == NULL)
        return true;
    for (size_t i = 0; i < sizeof machinery / sizeof machinery[0]; i++) {
        size_t n = strlen(machinery[i]);
        /* "main" and "_start" are whole names; the others prefixes */
        bool whole = strcmp(machinery[i], "main") == 0 || strcmp(machinery[i], "_start") == 0;
        if (whole ? strcmp(symbol, machinery[i]) == 0 : strncmp(symbol, machinery[i], n) == 0)
            return true;
    }
    return false;
}
