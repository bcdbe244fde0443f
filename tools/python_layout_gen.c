/*
 * python_layout_gen.c - prints the hw_python_layout table
 * (src/agent/symbols/python_layout.h) of the CPython version whose headers
 * it is compiled against, 3.8 to 3.13, and for 3.13 also the
 * hw_python_debug_layout table (where _PyRuntime.debug_offsets keeps each
 * offset the agent reads).
 *
 * Every number comes from CPython's own headers (offsetof, sizeof and their
 * constants), so the agent's offsets are never copied by hand.  Compiled
 * with Py_BUILD_CORE against a version's include directory, its internal/
 * headers too, and the agent's src/ (for python_layout.h):
 *
 *   cc -Wall -Wextra -I src -I .../include/python3.X tools/python_layout_gen.c
 *
 * One exception: 3.8, 3.9 and 3.10 install no header that defines
 * PyDictKeysObject or PyDictKeyEntry (they are in CPython's
 * Objects/dict-common.h), so for those versions the dict keys' and entries'
 * offsets come from the build's debug info: tools/python_layouts.sh reads
 * them from its libpython's DWARF with gdb and passes them as -DHW_DWARF_*
 * definitions, which the generator checks against what the headers do say
 * (the fields' sizes, sizeof(PyInterpreterState)).  Where an object's
 * managed dict and values are (3.11+) is what the headers' own inline
 * functions return for a stand-in object, less its address.
 *
 * tools/python_layouts.sh does that for every version to write
 * src/agent/symbols/python_layouts.h, and the python_layout_3_X tests do it
 * again to check that file.  The bits of PyASCIIObject's `state` bit field
 * have no offsetof: they are found by setting each field in a zeroed object
 * and looking at which bit of the 32-bit word changed.  The generator prints
 * each table's fields in the struct's order and fails if one is missing, so
 * the tables stay complete when the struct grows.
 */
#define Py_BUILD_CORE 1
#include <Python.h>

#if PY_VERSION_HEX < 0x03080000 || PY_VERSION_HEX >= 0x030E0000
#error "python_layout_gen knows CPython 3.8 to 3.13"
#endif
#ifdef Py_GIL_DISABLED
#error "python_layout_gen describes the default build of CPython, not the free-threaded one"
#endif

#if PY_VERSION_HEX < 0x03090000
/* 3.8: _PyRuntimeState and PyInterpreterState are both in pycore_pystate.h;
   frameobject.h is not part of Python.h yet. */
#include <frameobject.h>
#include <internal/pycore_pystate.h>
#elif PY_VERSION_HEX < 0x030B0000
/* 3.9, 3.10: PyFrameObject is still public (frameobject.h, not in Python.h). */
#include <frameobject.h>
#include <internal/pycore_interp.h>
#include <internal/pycore_runtime.h>
#else
/* 3.11+: _PyInterpreterFrame (pycore_frame.h); in 3.13 it brings
   pycore_code.h, which has _Py_CODEUNIT.  The dict keys, entries and values
   are in pycore_dict.h, where an object keeps its dict in pycore_object.h. */
#include <internal/pycore_frame.h>
#include <internal/pycore_interp.h>
#include <internal/pycore_runtime.h>
/* 3.13's pycore_object.h (which pycore_dict.h includes) has an inline
   function whose parameter is unused in the default build
   (_PyObject_HasDeferredRefcount): -Wextra's warning about it is CPython's,
   not the generator's. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include <internal/pycore_dict.h>
#include <internal/pycore_object.h>
#pragma GCC diagnostic pop
#endif

#if PY_VERSION_HEX < 0x030B0000
/* 3.8-3.10: the dict keys and entries, from the build's DWARF (see above). */
#if !defined(HW_DWARF_KEYS_SIZE) || !defined(HW_DWARF_KEYS_SIZE_BYTES) || !defined(HW_DWARF_KEYS_NENTRIES) ||      \
    !defined(HW_DWARF_KEYS_NENTRIES_BYTES) || !defined(HW_DWARF_KEYS_INDICES) || !defined(HW_DWARF_ENTRY_SIZE) ||    \
    !defined(HW_DWARF_ENTRY_KEY) || !defined(HW_DWARF_ENTRY_KEY_BYTES) || !defined(HW_DWARF_ENTRY_VALUE) ||          \
    !defined(HW_DWARF_ENTRY_VALUE_BYTES) || !defined(HW_DWARF_INTERP_SIZE)
#error "CPython 3.8-3.10 have PyDictKeysObject and PyDictKeyEntry in no installed header: tools/python_layouts.sh passes them from libpython's DWARF (-DHW_DWARF_*)"
#endif
_Static_assert(HW_DWARF_INTERP_SIZE == sizeof(PyInterpreterState),
               "the DWARF is of another build than these headers: its struct _is has another size");
_Static_assert(HW_DWARF_KEYS_SIZE_BYTES == sizeof(Py_ssize_t) && HW_DWARF_KEYS_NENTRIES_BYTES == sizeof(Py_ssize_t),
               "the DWARF's dk_size and dk_nentries are not a Py_ssize_t");
_Static_assert(HW_DWARF_ENTRY_KEY_BYTES == sizeof(PyObject *) && HW_DWARF_ENTRY_VALUE_BYTES == sizeof(PyObject *),
               "the DWARF's me_key and me_value are not a pointer");
#endif

#include "agent/symbols/python_layout.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One table being printed: the next field must start at `next`. */
typedef struct table {
    const char *type;
    size_t next, size;
} table;

static void put(table *t, size_t offset, size_t size, const char *name, unsigned long long value, const char *text)
{
    if (offset != t->next || size != sizeof(uint32_t)) {
        fprintf(stderr, "python_layout_gen: %s.%s is not the next 32-bit field of the struct\n", t->type, name);
        exit(1);
    }
    if (text == NULL && value >= HW_PY_NONE) {
        fprintf(stderr, "python_layout_gen: %s.%s = %llu does not fit\n", t->type, name, value);
        exit(1);
    }
    t->next = offset + size;
    if (text != NULL)
        printf("    .%s = %s,\n", name, text);
    else
        printf("    .%s = %llu,\n", name, value);
}

static void finish(const table *t)
{
    if (t->next != t->size) {
        fprintf(stderr, "python_layout_gen: %s has fields after offset %zu that were not printed\n", t->type, t->next);
        exit(1);
    }
    printf("};\n");
}

/* The macros' prefixes are LAY_ and DBG_ because unistd.h, which Python.h
   includes, already has an L_SET. */
#define FIELD(type, m) offsetof(type, m), sizeof(((type *)0)->m), #m
/* A number from CPython's headers. */
#define LAY_SET(m, value) put(&t, FIELD(hw_python_layout, m), (unsigned long long)(value), NULL)
/* A field this version does not have. */
#define LAY_NONE(m) put(&t, FIELD(hw_python_layout, m), 0, "HW_PY_NONE")
/* One of python_layout.h's own enumerators, printed by name. */
#define LAY_ENUM(m, value) put(&t, FIELD(hw_python_layout, m), (unsigned long long)(value), #value)

static unsigned state_bit(const PyASCIIObject *o)
{
    uint32_t word;
    memcpy(&word, (const char *)o + offsetof(PyASCIIObject, state), sizeof word);
    for (unsigned bit = 0; bit < 32; bit++)
        if (word & (1u << bit))
            return bit;
    return 32;
}

/* The bits of PyASCIIObject.state: kind (3 bits), compact, ascii. */
static void unicode_state_bits(unsigned *kind_shift, unsigned *compact_bit, unsigned *ascii_bit)
{
    PyASCIIObject o;
    memset(&o, 0, sizeof o);
    o.state.kind = 1;
    *kind_shift = state_bit(&o);
    memset(&o, 0, sizeof o);
    o.state.compact = 1;
    *compact_bit = state_bit(&o);
    memset(&o, 0, sizeof o);
    o.state.ascii = 1;
    *ascii_bit = state_bit(&o);
    if (sizeof o.state != 4 || *kind_shift > 29 || *compact_bit > 31 || *ascii_bit > 31) {
        fprintf(stderr, "python_layout_gen: unexpected PyASCIIObject.state layout\n");
        exit(1);
    }
}

/* From the start of the table to the thread state. */
static void print_threads(table *tp)
{
    table t = *tp;
    LAY_SET(major, PY_MAJOR_VERSION);
    LAY_SET(minor, PY_MINOR_VERSION);
#if PY_VERSION_HEX < 0x030B0000
    LAY_ENUM(frames, HW_PY_FRAME_OBJECTS);
#else
    LAY_ENUM(frames, HW_PY_INTERPRETER_FRAMES);
#endif
#if PY_VERSION_HEX < 0x030A0000
    LAY_ENUM(lines, HW_PY_LINES_LNOTAB);
    LAY_SET(instr_in_bytes, 1); /* f_lasti: the byte offset of the last instruction */
#else
#if PY_VERSION_HEX < 0x030B0000
    LAY_ENUM(lines, HW_PY_LINES_310);
#else
    LAY_ENUM(lines, HW_PY_LINES_LOCATIONS);
#endif
    LAY_SET(instr_in_bytes, 0); /* 3.10's f_lasti counts code units, 3.11+ keep a pointer */
#endif
    LAY_SET(runtime_interpreters_head, offsetof(_PyRuntimeState, interpreters.head));
#if PY_VERSION_HEX < 0x030C0000
    LAY_SET(runtime_gil, offsetof(_PyRuntimeState, ceval.gil));
#else
    LAY_NONE(runtime_gil);
#endif
    LAY_SET(interp_next, offsetof(PyInterpreterState, next));
#if PY_VERSION_HEX < 0x030B0000
    LAY_SET(interp_threads_head, offsetof(PyInterpreterState, tstate_head));
    LAY_NONE(interp_gil_ptr);
#elif PY_VERSION_HEX < 0x030C0000
    LAY_SET(interp_threads_head, offsetof(PyInterpreterState, threads.head));
    LAY_NONE(interp_gil_ptr);
#else
    LAY_SET(interp_threads_head, offsetof(PyInterpreterState, threads.head));
    LAY_SET(interp_gil_ptr, offsetof(PyInterpreterState, ceval.gil));
#endif
    LAY_SET(gil_last_holder, offsetof(struct _gil_runtime_state, last_holder));
    LAY_SET(gil_locked, offsetof(struct _gil_runtime_state, locked));
    LAY_SET(tstate_next, offsetof(PyThreadState, next));
    LAY_SET(tstate_thread_id, offsetof(PyThreadState, thread_id));
#if PY_VERSION_HEX < 0x030B0000
    LAY_NONE(tstate_native_thread_id);
    LAY_SET(tstate_frame, offsetof(PyThreadState, frame));
    LAY_NONE(tstate_cframe);
#elif PY_VERSION_HEX < 0x030D0000
    LAY_SET(tstate_native_thread_id, offsetof(PyThreadState, native_thread_id));
    LAY_NONE(tstate_frame);
    LAY_SET(tstate_cframe, offsetof(PyThreadState, cframe));
#else
    LAY_SET(tstate_native_thread_id, offsetof(PyThreadState, native_thread_id));
    LAY_SET(tstate_frame, offsetof(PyThreadState, current_frame));
    LAY_NONE(tstate_cframe);
#endif
    LAY_SET(tstate_size, sizeof(PyThreadState));
    *tp = t;
}

/* The frame records, from the thread state's frame on. */
static void print_frames(table *tp)
{
    table t = *tp;
#if PY_VERSION_HEX < 0x030B0000
    LAY_NONE(cframe_current_frame);
    LAY_SET(frame_code, offsetof(PyFrameObject, f_code));
    LAY_SET(frame_previous, offsetof(PyFrameObject, f_back));
    LAY_SET(frame_instr, offsetof(PyFrameObject, f_lasti));
    LAY_NONE(frame_is_entry);
    LAY_NONE(frame_owner);
    LAY_SET(frame_size, sizeof(PyFrameObject));
    LAY_NONE(frame_owned_by_generator);
    LAY_NONE(frame_owned_by_cstack);
#else
#if PY_VERSION_HEX < 0x030D0000
    LAY_SET(cframe_current_frame, offsetof(_PyCFrame, current_frame));
    LAY_SET(frame_code, offsetof(_PyInterpreterFrame, f_code));
    LAY_SET(frame_previous, offsetof(_PyInterpreterFrame, previous));
    LAY_SET(frame_instr, offsetof(_PyInterpreterFrame, prev_instr));
#else
    LAY_NONE(cframe_current_frame);
    LAY_SET(frame_code, offsetof(_PyInterpreterFrame, f_executable));
    LAY_SET(frame_previous, offsetof(_PyInterpreterFrame, previous));
    LAY_SET(frame_instr, offsetof(_PyInterpreterFrame, instr_ptr));
#endif
#if PY_VERSION_HEX < 0x030C0000
    LAY_SET(frame_is_entry, offsetof(_PyInterpreterFrame, is_entry));
#else
    LAY_NONE(frame_is_entry);
#endif
    LAY_SET(frame_owner, offsetof(_PyInterpreterFrame, owner));
    LAY_SET(frame_size, sizeof(_PyInterpreterFrame));
    LAY_SET(frame_owned_by_generator, FRAME_OWNED_BY_GENERATOR);
#if PY_VERSION_HEX < 0x030C0000
    LAY_NONE(frame_owned_by_cstack);
#else
    LAY_SET(frame_owned_by_cstack, FRAME_OWNED_BY_CSTACK);
#endif
#endif
    *tp = t;
}

/* The objects a frame leads to: code, bytes, str. */
static void print_objects(table *tp)
{
    table t = *tp;
    LAY_SET(object_type, offsetof(PyObject, ob_type));
    LAY_SET(var_object_size, offsetof(PyVarObject, ob_size));
    LAY_SET(code_filename, offsetof(PyCodeObject, co_filename));
    LAY_SET(code_name, offsetof(PyCodeObject, co_name));
#if PY_VERSION_HEX < 0x030B0000
    LAY_NONE(code_qualname);
#else
    LAY_SET(code_qualname, offsetof(PyCodeObject, co_qualname));
#endif
#if PY_VERSION_HEX < 0x030A0000
    LAY_SET(code_linetable, offsetof(PyCodeObject, co_lnotab));
#else
    LAY_SET(code_linetable, offsetof(PyCodeObject, co_linetable));
#endif
    LAY_SET(code_firstlineno, offsetof(PyCodeObject, co_firstlineno));
#if PY_VERSION_HEX < 0x030B0000
    LAY_NONE(code_firsttraceable);
    LAY_NONE(code_code_adaptive);
#else
    LAY_SET(code_firsttraceable, offsetof(PyCodeObject, _co_firsttraceable));
    LAY_SET(code_code_adaptive, offsetof(PyCodeObject, co_code_adaptive));
#endif
    LAY_SET(code_unit_size, sizeof(_Py_CODEUNIT));
    LAY_SET(bytes_sval, offsetof(PyBytesObject, ob_sval));
    LAY_SET(unicode_length, offsetof(PyASCIIObject, length));
    LAY_SET(unicode_state, offsetof(PyASCIIObject, state));
    LAY_SET(ascii_size, sizeof(PyASCIIObject));
    LAY_SET(compact_size, sizeof(PyCompactUnicodeObject));
    unsigned kind_shift, compact_bit, ascii_bit;
    unicode_state_bits(&kind_shift, &compact_bit, &ascii_bit);
    LAY_SET(unicode_kind_shift, kind_shift);
    LAY_SET(unicode_compact_bit, compact_bit);
    LAY_SET(unicode_ascii_bit, ascii_bit);
    *tp = t;
}

#if PY_VERSION_HEX >= 0x030B0000
/* A stand-in object, zeroed, of a type with a managed dict (and in 3.13
   inline values), for the headers' inline functions that find its dict and
   values.  It sits in the middle of a zeroed block, so that every word they
   point at, before or after it, is in the block; 3.12's check of its
   dict-or-values word puts its stand-in values and dict after the object. */
#define STANDIN_BLOCK 512
#define STANDIN_AT 256
static PyTypeObject standin_type;

static unsigned char *standin_block(PyObject **obj)
{
    unsigned char *block = calloc(1, STANDIN_BLOCK);
    if (block == NULL) {
        fprintf(stderr, "python_layout_gen: out of memory\n");
        exit(1);
    }
#if PY_VERSION_HEX < 0x030D0000
    standin_type.tp_flags = Py_TPFLAGS_MANAGED_DICT;
#else
    standin_type.tp_flags = Py_TPFLAGS_MANAGED_DICT | Py_TPFLAGS_INLINE_VALUES;
#endif
    standin_type.tp_basicsize = sizeof(PyObject); /* 3.13's _PyObject_InlineValues asserts it */
    *obj = (PyObject *)(block + STANDIN_AT);
    Py_SET_TYPE(*obj, &standin_type);
    return block;
}

/* How many bytes before the object p is (p is in its block). */
static size_t before(const PyObject *obj, const void *p)
{
    if ((const char *)p > (const char *)obj) {
        fprintf(stderr, "python_layout_gen: a pointer the headers give is after the object, not before\n");
        exit(1);
    }
    return (size_t)((const char *)obj - (const char *)p);
}
#endif

/* What finds a thread's Python name: its frame's first local (`self`), the
   object's type, where the object keeps its attributes (dict, managed dict,
   values), and the dict's keys, entries and values. */
static void print_names(table *tp)
{
    table t = *tp;
#if PY_VERSION_HEX < 0x030B0000
    LAY_SET(frame_localsplus, offsetof(PyFrameObject, f_localsplus));
#else
    LAY_SET(frame_localsplus, offsetof(_PyInterpreterFrame, localsplus));
#endif
    LAY_SET(type_flags, offsetof(PyTypeObject, tp_flags));
    LAY_SET(type_basicsize, offsetof(PyTypeObject, tp_basicsize));
    LAY_SET(type_dictoffset, offsetof(PyTypeObject, tp_dictoffset));
    LAY_SET(heaptype_cached_keys, offsetof(PyHeapTypeObject, ht_cached_keys));
#if PY_VERSION_HEX < 0x030B0000
    LAY_SET(tpflags_managed_dict, 0);
    LAY_SET(tpflags_inline_values, 0);
    LAY_NONE(object_dict_before); /* the dict is at tp_dictoffset */
    LAY_NONE(object_values_before);
    LAY_SET(values_tagged, 0);
    LAY_NONE(values_inline);
#else
    PyObject *obj;
    unsigned char *block = standin_block(&obj);
    LAY_SET(tpflags_managed_dict, Py_TPFLAGS_MANAGED_DICT);
#if PY_VERSION_HEX < 0x030D0000
    LAY_SET(tpflags_inline_values, 0);
#else
    LAY_SET(tpflags_inline_values, Py_TPFLAGS_INLINE_VALUES);
#endif
#if PY_VERSION_HEX < 0x030C0000
    /* 3.11: a pointer to the values, and one to the dict, before the object */
    LAY_SET(object_dict_before, before(obj, _PyObject_ManagedDictPointer(obj)));
    LAY_SET(object_values_before, before(obj, _PyObject_ValuesPointer(obj)));
    LAY_SET(values_tagged, 0);
    LAY_NONE(values_inline);
#elif PY_VERSION_HEX < 0x030D0000
    /* 3.12: one word before the object, the dict or, tagged, the values.
       Check that the word is what python_layout.h says: values stored by
       the headers are the pointer less 1 (its low bit set), read back as
       values; a dict (aligned) is not. */
    PyDictOrValues *dorv = _PyObject_DictOrValuesPointer(obj);
    LAY_SET(object_dict_before, before(obj, dorv));
    LAY_NONE(object_values_before);
    PyDictValues *values = (PyDictValues *)(block + STANDIN_AT + 2 * sizeof(PyObject));
    PyObject *dict = (PyObject *)(block + STANDIN_AT + 4 * sizeof(PyObject));
    _PyDictOrValues_SetValues(dorv, values);
    int tagged = (uintptr_t)dorv->values + 1 == (uintptr_t)values && _PyDictOrValues_IsValues(*dorv) &&
                 _PyDictOrValues_GetValues(*dorv) == values;
    dorv->dict = dict;
    tagged = tagged && !_PyDictOrValues_IsValues(*dorv) && _PyDictOrValues_GetDict(*dorv) == dict;
    if (!tagged) {
        fprintf(stderr, "python_layout_gen: 3.12's dict-or-values word is not tagged as python_layout.h says\n");
        exit(1);
    }
    LAY_SET(values_tagged, 1);
    LAY_NONE(values_inline);
#else
    /* 3.13: the dict before the object, the values inline after its header */
    LAY_SET(object_dict_before, before(obj, _PyObject_ManagedDictPointer(obj)));
    LAY_NONE(object_values_before);
    LAY_SET(values_tagged, 0);
    LAY_SET(values_inline, (size_t)((const char *)_PyObject_InlineValues(obj) - (const char *)obj));
#endif
    free(block);
#endif
    LAY_SET(dict_keys, offsetof(PyDictObject, ma_keys));
    LAY_SET(dict_values, offsetof(PyDictObject, ma_values));
#if PY_VERSION_HEX < 0x030B0000
    LAY_SET(keys_size, HW_DWARF_KEYS_SIZE);
    LAY_NONE(keys_log2_index_bytes);
    LAY_NONE(keys_kind);
    LAY_SET(keys_nentries, HW_DWARF_KEYS_NENTRIES);
    LAY_SET(keys_indices, HW_DWARF_KEYS_INDICES);
    LAY_NONE(dict_keys_general);
    LAY_SET(entry_size, HW_DWARF_ENTRY_SIZE);
    LAY_SET(entry_key, HW_DWARF_ENTRY_KEY);
    LAY_SET(entry_value, HW_DWARF_ENTRY_VALUE);
    LAY_NONE(unicode_entry_size);
    LAY_NONE(unicode_entry_key);
    LAY_NONE(unicode_entry_value);
    /* No PyDictValues: ma_values points at the array of values itself. */
    _Static_assert(_Generic(((PyDictObject *)0)->ma_values, PyObject * *: 1, default: 0),
                   "ma_values is not a PyObject **");
    LAY_SET(values_values, 0);
#else
    LAY_NONE(keys_size);
    LAY_SET(keys_log2_index_bytes, offsetof(PyDictKeysObject, dk_log2_index_bytes));
    LAY_SET(keys_kind, offsetof(PyDictKeysObject, dk_kind));
    LAY_SET(keys_nentries, offsetof(PyDictKeysObject, dk_nentries));
    LAY_SET(keys_indices, offsetof(PyDictKeysObject, dk_indices));
    LAY_SET(dict_keys_general, DICT_KEYS_GENERAL);
    LAY_SET(entry_size, sizeof(PyDictKeyEntry));
    LAY_SET(entry_key, offsetof(PyDictKeyEntry, me_key));
    LAY_SET(entry_value, offsetof(PyDictKeyEntry, me_value));
    LAY_SET(unicode_entry_size, sizeof(PyDictUnicodeEntry));
    LAY_SET(unicode_entry_key, offsetof(PyDictUnicodeEntry, me_key));
    LAY_SET(unicode_entry_value, offsetof(PyDictUnicodeEntry, me_value));
    LAY_SET(values_values, offsetof(PyDictValues, values));
#endif
    *tp = t;
}

#if PY_VERSION_HEX >= 0x030D0000
#define DBG_SET(m, member) put(&t, FIELD(hw_python_debug_layout, m), offsetof(_Py_DebugOffsets, member), NULL)

/* 3.13: where _PyRuntime.debug_offsets keeps each offset the agent reads. */
static void print_debug_layout(void)
{
    table t = {"hw_python_debug_layout", 0, sizeof(hw_python_debug_layout)};
    printf("/* CPython %d.%d's _Py_DebugOffsets, from %s's headers. */\n", PY_MAJOR_VERSION, PY_MINOR_VERSION,
           PY_VERSION);
    printf("static const hw_python_debug_layout hw_python_debug_layout_%d_%d = {\n", PY_MAJOR_VERSION,
           PY_MINOR_VERSION);
    put(&t, FIELD(hw_python_debug_layout, major), PY_MAJOR_VERSION, NULL);
    put(&t, FIELD(hw_python_debug_layout, minor), PY_MINOR_VERSION, NULL);
    put(&t, FIELD(hw_python_debug_layout, debug_offsets_in_runtime), offsetof(_PyRuntimeState, debug_offsets), NULL);
    put(&t, FIELD(hw_python_debug_layout, debug_offsets_size), sizeof(_Py_DebugOffsets), NULL);
    DBG_SET(cookie, cookie);
    DBG_SET(version, version);
    DBG_SET(free_threaded, free_threaded);
    DBG_SET(runtime_interpreters_head, runtime_state.interpreters_head);
    DBG_SET(interp_size, interpreter_state.size);
    DBG_SET(interp_next, interpreter_state.next);
    DBG_SET(interp_threads_head, interpreter_state.threads_head);
    DBG_SET(interp_ceval_gil, interpreter_state.ceval_gil);
    DBG_SET(interp_gil_runtime_state, interpreter_state.gil_runtime_state);
    DBG_SET(interp_gil_runtime_state_locked, interpreter_state.gil_runtime_state_locked);
    DBG_SET(interp_gil_runtime_state_holder, interpreter_state.gil_runtime_state_holder);
    DBG_SET(interp_imports_modules, interpreter_state.imports_modules);
    DBG_SET(tstate_size, thread_state.size);
    DBG_SET(tstate_next, thread_state.next);
    DBG_SET(tstate_current_frame, thread_state.current_frame);
    DBG_SET(tstate_thread_id, thread_state.thread_id);
    DBG_SET(tstate_native_thread_id, thread_state.native_thread_id);
    DBG_SET(frame_size, interpreter_frame.size);
    DBG_SET(frame_previous, interpreter_frame.previous);
    DBG_SET(frame_executable, interpreter_frame.executable);
    DBG_SET(frame_instr_ptr, interpreter_frame.instr_ptr);
    DBG_SET(frame_owner, interpreter_frame.owner);
    DBG_SET(code_size, code_object.size);
    DBG_SET(code_filename, code_object.filename);
    DBG_SET(code_name, code_object.name);
    DBG_SET(code_qualname, code_object.qualname);
    DBG_SET(code_linetable, code_object.linetable);
    DBG_SET(code_firstlineno, code_object.firstlineno);
    DBG_SET(code_co_code_adaptive, code_object.co_code_adaptive);
    DBG_SET(object_ob_type, pyobject.ob_type);
    DBG_SET(bytes_ob_sval, bytes_object.ob_sval);
    DBG_SET(unicode_state, unicode_object.state);
    DBG_SET(unicode_length, unicode_object.length);
    DBG_SET(unicode_asciiobject_size, unicode_object.asciiobject_size);
    finish(&t);
}
#endif

int main(void)
{
#if PY_VERSION_HEX < 0x030B0000
    printf("/* CPython %d.%d, from %s's headers (its dict keys and entries: from its libpython's DWARF). */\n",
           PY_MAJOR_VERSION, PY_MINOR_VERSION, PY_VERSION);
#else
    printf("/* CPython %d.%d, from %s's headers. */\n", PY_MAJOR_VERSION, PY_MINOR_VERSION, PY_VERSION);
#endif
    printf("static const hw_python_layout hw_python_layout_%d_%d = {\n", PY_MAJOR_VERSION, PY_MINOR_VERSION);
    table t = {"hw_python_layout", 0, sizeof(hw_python_layout)};
    print_threads(&t);
    print_frames(&t);
    print_objects(&t);
    print_names(&t);
    finish(&t);
#if PY_VERSION_HEX >= 0x030D0000
    print_debug_layout();
#endif
    return 0;
}
