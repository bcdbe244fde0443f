/*
 * python_debug_offsets.c - the layout of a CPython 3.13 process from the
 * process itself (python_internal.h: hw_python_read_debug_offsets).
 *
 * From 3.13, _PyRuntime begins with _Py_DebugOffsets: the cookie
 * "xdebugpy", the version (PY_VERSION_HEX), whether the build is
 * free-threaded, then the offsets of what a debugger reads, as 64-bit
 * numbers.  Where those numbers are within the record is fixed per minor
 * version (python_layout.h, hw_python_debug_layout_3_13); the numbers
 * themselves are the process's, so a patch release whose structures moved
 * is read right.  A later minor version, whose record may be laid out
 * otherwise, is refused with its version, never guessed.
 *
 * The record is the program's memory: each offset is bounded, the GIL's
 * fields must lie after the GIL's state, and anything that does not hold
 * refuses the process with a reason rather than reading it wrong.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "python_internal.h"
#include "python_layouts.h"

#define DEBUG_COOKIE "xdebugpy"
#define MAX_DEBUG_OFFSET 65536u /* an offset in a debug table beyond this is not believed */

void hw_python_not_read(hw_python_target *out, const char *fmt, const char *reason)
{
    snprintf(out->why_not, sizeof out->why_not, fmt, out->version[0] ? out->version : "of an unknown version",
             reason);
}

/* Is the field at `field`, `width` bytes wide, within `size` bytes?  A
 * field the version does not have is. */
static bool fits(uint32_t field, uint32_t width, uint32_t size)
{
    return field == HW_PY_NONE || (field <= size && size - field >= width);
}

bool hw_python_layout_fits(const hw_python_layout *L)
{
    uint32_t instr_width = L->frames == HW_PY_FRAME_OBJECTS ? 4 : 8;
    return L->frame_size <= MAX_STRUCT_READ && L->compact_size <= MAX_STRUCT_READ && L->bytes_sval <= MAX_STRUCT_READ &&
           /* a frame record, read whole */
           fits(L->frame_code, 8, L->frame_size) && fits(L->frame_previous, 8, L->frame_size) &&
           fits(L->frame_instr, instr_width, L->frame_size) && fits(L->frame_is_entry, 1, L->frame_size) &&
           fits(L->frame_owner, 1, L->frame_size) &&
           (L->frames != HW_PY_FRAME_OBJECTS || fits(L->object_type, 8, L->frame_size)) &&
           /* a str's header, read up to its characters */
           fits(L->object_type, 8, L->compact_size) && fits(L->unicode_length, 8, L->compact_size) &&
           fits(L->unicode_state, 4, L->compact_size) &&
           /* a bytes object's header, read up to its bytes */
           fits(L->object_type, 8, L->bytes_sval) && fits(L->var_object_size, 8, L->bytes_sval);
}

static bool debug_u64(const unsigned char *d, uint32_t pos, uint64_t *v)
{
    if (pos == HW_PY_NONE || pos + 8 > hw_python_debug_layout_3_13.debug_offsets_size)
        return false;
    *v = hw_py_u64(d, pos);
    return true;
}

/* One offset of the debug table into a layout field: false when it is out
 * of bounds. */
static bool debug_field(const unsigned char *d, uint32_t pos, uint32_t *field)
{
    uint64_t v;
    if (!debug_u64(d, pos, &v) || v >= MAX_DEBUG_OFFSET)
        return false;
    *field = (uint32_t)v;
    return true;
}

/* The layout of a 3.13 process from its debug offsets: everything the
 * table has, and the 3.13 table for what it has not (constants such as the
 * frame owners, the string's state bits). */
static bool layout_from_debug(const unsigned char *d, hw_python_layout *L)
{
    const hw_python_debug_layout *D = &hw_python_debug_layout_3_13;
    *L = hw_python_layout_3_13;
    uint32_t gil_state = 0, gil_locked = 0, gil_holder = 0;
    bool ok = debug_field(d, D->runtime_interpreters_head, &L->runtime_interpreters_head) &&
              debug_field(d, D->interp_next, &L->interp_next) &&
              debug_field(d, D->interp_threads_head, &L->interp_threads_head) &&
              debug_field(d, D->interp_ceval_gil, &L->interp_gil_ptr) &&
              debug_field(d, D->interp_gil_runtime_state, &gil_state) &&
              debug_field(d, D->interp_gil_runtime_state_locked, &gil_locked) &&
              debug_field(d, D->interp_gil_runtime_state_holder, &gil_holder) &&
              debug_field(d, D->tstate_size, &L->tstate_size) && debug_field(d, D->tstate_next, &L->tstate_next) &&
              debug_field(d, D->tstate_current_frame, &L->tstate_frame) &&
              debug_field(d, D->tstate_thread_id, &L->tstate_thread_id) &&
              debug_field(d, D->tstate_native_thread_id, &L->tstate_native_thread_id) &&
              debug_field(d, D->frame_size, &L->frame_size) && debug_field(d, D->frame_previous, &L->frame_previous) &&
              debug_field(d, D->frame_executable, &L->frame_code) &&
              debug_field(d, D->frame_instr_ptr, &L->frame_instr) &&
              debug_field(d, D->frame_owner, &L->frame_owner) &&
              debug_field(d, D->code_filename, &L->code_filename) && debug_field(d, D->code_name, &L->code_name) &&
              debug_field(d, D->code_qualname, &L->code_qualname) &&
              debug_field(d, D->code_linetable, &L->code_linetable) &&
              debug_field(d, D->code_firstlineno, &L->code_firstlineno) &&
              debug_field(d, D->code_co_code_adaptive, &L->code_code_adaptive) &&
              debug_field(d, D->object_ob_type, &L->object_type) &&
              debug_field(d, D->bytes_ob_sval, &L->bytes_sval) &&
              debug_field(d, D->unicode_state, &L->unicode_state) &&
              debug_field(d, D->unicode_length, &L->unicode_length) &&
              debug_field(d, D->unicode_asciiobject_size, &L->ascii_size);
    if (!ok || gil_locked < gil_state || gil_holder < gil_state || !hw_python_layout_fits(L))
        return false;
    /* The GIL's fields, from the interpreter's own GIL state. */
    L->gil_locked = gil_locked - gil_state;
    L->gil_last_holder = gil_holder - gil_state;
    return true;
}

bool hw_python_read_debug_offsets(pid_t pid, hw_python_target *out)
{
    const hw_python_debug_layout *D = &hw_python_debug_layout_3_13;
    unsigned char head[24];
    if (D->debug_offsets_in_runtime != 0 || !hw_py_peek(pid, out->runtime_addr, head, sizeof head) ||
        memcmp(head, DEBUG_COOKIE, 8) != 0)
        return false;
    uint64_t version = hw_py_u64(head, D->version), free_threaded = hw_py_u64(head, D->free_threaded);
    unsigned major = (unsigned)(version >> 24) & 0xff, minor = (unsigned)(version >> 16) & 0xff;
    out->version_hex = version;
    snprintf(out->version, sizeof out->version, "%u.%u.%u", major, minor, (unsigned)(version >> 8) & 0xff);
    if (free_threaded != 0) {
        hw_python_not_read(out, "Python %s free-threaded (Py_GIL_DISABLED): frames not read (%s)", HW_PY_SUPPORTED);
        return true;
    }
    if (major != 3 || minor != 13) {
        hw_python_not_read(out, "Python %s: frames not read (%s; its debug offsets are laid out as hangwatch does not know)",
                 HW_PY_SUPPORTED);
        return true;
    }
    unsigned char *d = malloc(D->debug_offsets_size);
    if (d == NULL || !hw_py_peek(pid, out->runtime_addr, d, D->debug_offsets_size) ||
        !layout_from_debug(d, &out->layout))
        hw_python_not_read(out, "Python %s: frames not read (%s: its debug offsets could not be read or make no sense)",
                 HW_PY_SUPPORTED);
    else
        out->readable = true;
    free(d);
    return true;
}
