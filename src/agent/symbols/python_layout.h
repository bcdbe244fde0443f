/*
 * python_layout.h - where CPython keeps what the agent reads from a Python
 * process: the offsets of the interpreter's internal structures, one table
 * per CPython minor version (3.8 to 3.13).
 *
 * The numbers are never written by hand: tools/python_layout_gen.c is
 * compiled against each version's own headers (its internal ones too, with
 * Py_BUILD_CORE) and prints that version's table with offsetof and sizeof;
 * the tables are kept in python_layouts.h, and the `python_layout_3_X`
 * tests build the generator again against every version's headers this
 * machine has and check that it prints the same.  A field a version does
 * not have is HW_PY_NONE.  One exception to the headers: 3.8, 3.9 and 3.10
 * install none that defines PyDictKeysObject or PyDictKeyEntry (they are in
 * CPython's Objects/dict-common.h), so for those versions keys_size,
 * keys_nentries, keys_indices and entry_* come from the build's debug info
 * (its libpython's DWARF, read with gdb by tools/python_layouts.sh).
 */
#ifndef HANGWATCH_PYTHON_LAYOUT_H
#define HANGWATCH_PYTHON_LAYOUT_H

#include <stdint.h>

#include "core/parse/python_linetable.h" /* hw_python_lines: which line table a code object has */

/* A field the version does not have. */
#define HW_PY_NONE UINT32_MAX

/* How a version keeps a thread's frames. */
typedef enum hw_python_frames {
    HW_PY_FRAME_OBJECTS = 0,  /* 3.8-3.10: a chain of PyFrameObject (f_back), one C-level
                                 evaluation per frame; f_lasti is the instruction */
    HW_PY_INTERPRETER_FRAMES, /* 3.11+: a chain of _PyInterpreterFrame (previous) in the
                                 thread's data stack; the instruction is a pointer into
                                 the code object's co_code_adaptive */
} hw_python_frames;

typedef struct hw_python_layout {
    unsigned major, minor;
    uint32_t frames;            /* hw_python_frames */
    uint32_t lines;             /* hw_python_lines */
    uint32_t instr_in_bytes;    /* 3.8, 3.9: f_lasti counts bytes, not code units (1), else 0 */
    /* _PyRuntimeState */
    uint32_t runtime_interpreters_head;
    uint32_t runtime_gil;       /* the GIL's state in _PyRuntime (3.8-3.11: ceval.gil), else HW_PY_NONE */
    /* PyInterpreterState */
    uint32_t interp_next;
    uint32_t interp_threads_head; /* tstate_head (3.8-3.10), threads.head (3.11+) */
    uint32_t interp_gil_ptr;    /* 3.12+: ceval.gil, a pointer to the GIL's state, else HW_PY_NONE */
    /* struct _gil_runtime_state */
    uint32_t gil_last_holder;   /* the thread state that holds it (took it last) */
    uint32_t gil_locked;        /* an int (_Py_atomic_int before 3.13), non-zero while held */
    /* PyThreadState */
    uint32_t tstate_next;
    uint32_t tstate_thread_id;  /* pthread_self() of the thread (x86-64 glibc: its fs base) */
    uint32_t tstate_native_thread_id; /* the kernel's tid, HW_PY_NONE before 3.11 */
    uint32_t tstate_frame;      /* 3.8-3.10: frame (PyFrameObject *); 3.13: current_frame
                                   (_PyInterpreterFrame *); HW_PY_NONE in 3.11 and 3.12 */
    uint32_t tstate_cframe;     /* 3.11, 3.12: cframe (_PyCFrame *), else HW_PY_NONE */
    uint32_t tstate_size;
    /* _PyCFrame (3.11, 3.12) */
    uint32_t cframe_current_frame;
    /* the frame: PyFrameObject (3.8-3.10) or _PyInterpreterFrame (3.11+) */
    uint32_t frame_code;        /* f_code; f_executable (3.13) */
    uint32_t frame_previous;    /* f_back; previous */
    uint32_t frame_instr;       /* f_lasti (an int); prev_instr (3.11, 3.12); instr_ptr (3.13) */
    uint32_t frame_is_entry;    /* 3.11: is_entry (a char), else HW_PY_NONE */
    uint32_t frame_owner;       /* 3.11+: owner (a char), else HW_PY_NONE */
    uint32_t frame_size;        /* sizeof the frame record (without its locals) */
    uint32_t frame_owned_by_generator; /* FRAME_OWNED_BY_GENERATOR (3.11+), else HW_PY_NONE */
    uint32_t frame_owned_by_cstack;    /* FRAME_OWNED_BY_CSTACK (3.12+): the shim frame each C-level
                                          evaluation starts with, else HW_PY_NONE */
    /* PyObject, PyVarObject */
    uint32_t object_type, var_object_size;
    /* PyCodeObject */
    uint32_t code_filename, code_name;
    uint32_t code_qualname;     /* 3.11+, else HW_PY_NONE (the name is all there is) */
    uint32_t code_linetable;    /* co_lnotab (3.8, 3.9), co_linetable (3.10+): a bytes object */
    uint32_t code_firstlineno;
    uint32_t code_firsttraceable; /* _co_firsttraceable (3.11+), else HW_PY_NONE */
    uint32_t code_code_adaptive;  /* co_code_adaptive (3.11+), else HW_PY_NONE */
    uint32_t code_unit_size;    /* sizeof(_Py_CODEUNIT): 2 */
    /* PyBytesObject */
    uint32_t bytes_sval;
    /* PyASCIIObject / PyCompactUnicodeObject */
    uint32_t unicode_length, unicode_state, ascii_size, compact_size;
    /* bits of the 32-bit `state` field: kind (3 bits), compact, ascii */
    uint32_t unicode_kind_shift, unicode_compact_bit, unicode_ascii_bit;
    /* ---- a thread's Python name: threading.Thread's _name, found from the
     * `self` of the thread's Thread._bootstrap_inner frame ---- */
    uint32_t frame_localsplus;      /* f_localsplus (3.8-3.10), localsplus (3.11+): the frame's first local */
    /* PyTypeObject, PyHeapTypeObject */
    uint32_t type_flags, type_basicsize, type_dictoffset;
    uint32_t heaptype_cached_keys;  /* ht_cached_keys: the keys its instances' dicts share */
    uint32_t tpflags_managed_dict;  /* Py_TPFLAGS_MANAGED_DICT (3.11+), else 0 */
    uint32_t tpflags_inline_values; /* Py_TPFLAGS_INLINE_VALUES (3.13), else 0 */
    uint32_t object_dict_before;    /* 3.11+: how many bytes before an object its managed dict pointer is
                                       (3.12: its dict-or-values word), else HW_PY_NONE */
    uint32_t object_values_before;  /* 3.11: how many bytes before an object its values pointer is, else HW_PY_NONE */
    uint32_t values_tagged;         /* 3.12: a dict-or-values word with its low bit set holds values
                                       (the pointer less 1): 1, else 0 */
    uint32_t values_inline;         /* 3.13: where an object's inline values begin, from its start, else HW_PY_NONE */
    /* PyDictObject */
    uint32_t dict_keys, dict_values; /* ma_keys, ma_values */
    /* PyDictKeysObject */
    uint32_t keys_size;             /* dk_size (3.8-3.10), else HW_PY_NONE */
    uint32_t keys_log2_index_bytes; /* dk_log2_index_bytes (3.11+), else HW_PY_NONE */
    uint32_t keys_kind;             /* dk_kind (3.11+), else HW_PY_NONE */
    uint32_t keys_nentries;         /* dk_nentries */
    uint32_t keys_indices;          /* dk_indices: the index table, then the entries */
    uint32_t dict_keys_general;     /* DICT_KEYS_GENERAL (3.11+): entries with their hash, else HW_PY_NONE */
    /* PyDictKeyEntry (me_hash, me_key, me_value), and PyDictUnicodeEntry (3.11+: me_key, me_value) */
    uint32_t entry_size, entry_key, entry_value;
    uint32_t unicode_entry_size, unicode_entry_key, unicode_entry_value; /* HW_PY_NONE before 3.11 */
    /* PyDictValues: where its array of values begins (3.13: after capacity, size, embedded, valid) */
    uint32_t values_values;
} hw_python_layout;

/*
 * CPython 3.13+ publishes its own offsets in the process: _PyRuntime holds,
 * at debug_offsets_in_runtime (its start in 3.13), a _Py_DebugOffsets record
 * (internal/pycore_runtime.h): a cookie "xdebugpy", the version
 * (PY_VERSION_HEX) and, as 64-bit numbers, the offsets of the interpreter's
 * structures.  This table says where in that record each number the agent
 * reads is (offsetof within _Py_DebugOffsets); the record's layout is fixed
 * per minor version, so one table per version, generated like the others.
 *
 * Two of 3.13's numbers are not what their names suggest:
 * gil_runtime_state_locked and _holder are offsets within
 * PyInterpreterState (of its own GIL, interp->_gil), not within struct
 * _gil_runtime_state, so they hold only where interp->ceval.gil points at
 * interp->_gil; and interpreter_frame.size, like frame_size above, is the
 * C sizeof, which counts the first slot of localsplus.
 */
typedef struct hw_python_debug_layout {
    unsigned major, minor;
    uint32_t debug_offsets_in_runtime;  /* offsetof(_PyRuntimeState, debug_offsets) */
    uint32_t debug_offsets_size;        /* sizeof(_Py_DebugOffsets) */
    uint32_t cookie;                    /* cookie (char[8], "xdebugpy") */
    uint32_t version;                   /* version (the process's PY_VERSION_HEX) */
    uint32_t free_threaded;             /* free_threaded */
    uint32_t runtime_interpreters_head; /* runtime_state.interpreters_head */
    uint32_t interp_size;               /* interpreter_state.size */
    uint32_t interp_next;               /* interpreter_state.next */
    uint32_t interp_threads_head;       /* interpreter_state.threads_head */
    uint32_t interp_ceval_gil;          /* interpreter_state.ceval_gil */
    uint32_t interp_gil_runtime_state;  /* interpreter_state.gil_runtime_state */
    uint32_t interp_gil_runtime_state_locked; /* interpreter_state.gil_runtime_state_locked */
    uint32_t interp_gil_runtime_state_holder; /* interpreter_state.gil_runtime_state_holder */
    uint32_t interp_imports_modules;    /* interpreter_state.imports_modules */
    uint32_t tstate_size;               /* thread_state.size */
    uint32_t tstate_next;               /* thread_state.next */
    uint32_t tstate_current_frame;      /* thread_state.current_frame */
    uint32_t tstate_thread_id;          /* thread_state.thread_id */
    uint32_t tstate_native_thread_id;   /* thread_state.native_thread_id */
    uint32_t frame_size;                /* interpreter_frame.size */
    uint32_t frame_previous;            /* interpreter_frame.previous */
    uint32_t frame_executable;          /* interpreter_frame.executable */
    uint32_t frame_instr_ptr;           /* interpreter_frame.instr_ptr */
    uint32_t frame_owner;               /* interpreter_frame.owner */
    uint32_t code_size;                 /* code_object.size */
    uint32_t code_filename;             /* code_object.filename */
    uint32_t code_name;                 /* code_object.name */
    uint32_t code_qualname;             /* code_object.qualname */
    uint32_t code_linetable;            /* code_object.linetable */
    uint32_t code_firstlineno;          /* code_object.firstlineno */
    uint32_t code_co_code_adaptive;     /* code_object.co_code_adaptive */
    uint32_t object_ob_type;            /* pyobject.ob_type */
    uint32_t bytes_ob_sval;             /* bytes_object.ob_sval */
    uint32_t unicode_state;             /* unicode_object.state */
    uint32_t unicode_length;            /* unicode_object.length */
    uint32_t unicode_asciiobject_size;  /* unicode_object.asciiobject_size */
} hw_python_debug_layout;

#endif
