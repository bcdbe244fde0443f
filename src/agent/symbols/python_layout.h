/*
 * python_layout.h - where CPython keeps what the agent reads from a Python
 * process: the offsets of the interpreter's internal structures for one
 * Python version.
 *
 * The numbers are never written by hand: tools/python_layout_gen.c is
 * compiled against a version's own internal headers (python3.11-dev's
 * internal/pycore_*.h, with Py_BUILD_CORE) and prints a table with offsetof
 * and sizeof; the build does that and includes the result
 * (python_layout_3_11.h in the build tree).  See docs/python.md for the
 * versions that work and what users of the others see.
 */
#ifndef HANGWATCH_PYTHON_LAYOUT_H
#define HANGWATCH_PYTHON_LAYOUT_H

#include <stdint.h>

typedef struct hw_python_layout {
    unsigned major, minor;
    /* _PyRuntimeState */
    uint32_t runtime_interpreters_head;
    /* PyInterpreterState */
    uint32_t interp_next, interp_threads_head;
    /* PyThreadState */
    uint32_t tstate_next, tstate_native_thread_id, tstate_cframe, tstate_size;
    /* _PyCFrame */
    uint32_t cframe_current_frame;
    /* _PyInterpreterFrame */
    uint32_t frame_code, frame_previous, frame_prev_instr, frame_is_entry, frame_owner, frame_size;
    uint32_t frame_owned_by_generator; /* the owner value of a generator's frame */
    /* PyObject, PyVarObject */
    uint32_t object_type, var_object_size;
    /* PyCodeObject */
    uint32_t code_filename, code_name, code_qualname, code_linetable, code_firstlineno, code_firsttraceable,
        code_code_adaptive, code_unit_size;
    /* PyBytesObject */
    uint32_t bytes_sval;
    /* PyASCIIObject / PyCompactUnicodeObject */
    uint32_t unicode_length, unicode_state, ascii_size, compact_size;
    /* bits of the 32-bit `state` field: kind (3 bits), compact, ascii */
    uint32_t unicode_kind_shift, unicode_compact_bit, unicode_ascii_bit;
} hw_python_layout;

#endif
