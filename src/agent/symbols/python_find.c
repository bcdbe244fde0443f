/*
 * python_find.c - the Python interpreter of a process, once per process
 * before its first capture (python_frames.h: hw_python_find).
 *
 * The interpreter is a module whose file name says python (the
 * interpreter binary or libpython3.X.so), found in the process's maps.  Its
 * symbols give the runtime (_PyRuntime) and the type objects every object
 * read later is checked against.  Its version picks the layout of the
 * structures to read (python_layouts.h, generated from each version's own
 * headers):
 *
 *   - 3.13 and later start _PyRuntime with _Py_DebugOffsets (the cookie
 *     "xdebugpy", the version, then the offsets of everything a debugger
 *     reads): the offsets are taken from the process itself, so a patch
 *     release whose structures moved is read right; a layout of those
 *     offsets hangwatch does not know (a later minor version) is refused
 *     with its version, never guessed;
 *   - 3.11 and 3.12 export Py_Version;
 *   - before 3.11 only the module's file name says the version (python3.9,
 *     libpython3.9.so.1.0); the frame walk then checks every frame record's
 *     type, so a file that lies about its version gives no frames rather
 *     than wrong ones.
 *
 * A version that is not read (3.7, 2.7, a free-threaded build, PyPy) is
 * found all the same, with the sentence reports and the stderr line give.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "python_internal.h"
#include "python_layouts.h"
#include "symbolizer.h"

#define SUPPORTED "hangwatch reads CPython 3.8 to 3.13"
#define DEBUG_COOKIE "xdebugpy"
#define MAX_DEBUG_OFFSET 65536u /* an offset in a debug table beyond this is not believed */

static bool python_module(const char *path)
{
    const char *slash = strrchr(path, '/');
    return strstr(slash ? slash + 1 : path, "python") != NULL;
}

/* "python3.12", "libpython3.9.so.1.0", "python3.13t": the version the file
 * name says (false when it says none), and whether it is a free-threaded
 * build (a 't' after the version). */
static bool version_of_name(const char *base, unsigned *major, unsigned *minor, bool *free_threaded)
{
    const char *p = strstr(base, "python");
    if (p == NULL)
        return false;
    p += 6;
    unsigned a = 0, b = 0;
    int used = 0;
    if (sscanf(p, "%u.%u%n", &a, &b, &used) != 2 || a < 2 || a > 9 || b > 99)
        return false;
    *major = a;
    *minor = b;
    *free_threaded = p[used] == 't';
    return true;
}

/* The first module of the maps whose file name names a Python (or PyPy)
 * version: its base name into `base`; false when there is none. */
static bool python_file_in_maps(const char *maps, size_t len, char *base, size_t base_len, bool *pypy)
{
    const char *end = maps + len;
    for (const char *line = maps; line < end;) {
        const char *nl = memchr(line, '\n', (size_t)(end - line));
        const char *stop = nl ? nl : end;
        const char *path = memchr(line, '/', (size_t)(stop - line));
        if (path != NULL) {
            const char *slash = path;
            for (const char *q = path; q < stop; q++)
                if (*q == '/')
                    slash = q;
            size_t n = (size_t)(stop - slash - 1);
            if (n > 0 && n < base_len) {
                memcpy(base, slash + 1, n);
                base[n] = '\0';
                unsigned a, b;
                bool t;
                *pypy = strstr(base, "pypy") != NULL;
                if (*pypy || version_of_name(base, &a, &b, &t))
                    return true;
            }
        }
        line = stop + 1;
    }
    return false;
}

static const hw_python_layout *table_of(unsigned major, unsigned minor)
{
    for (size_t i = 0; i < sizeof hw_python_layouts / sizeof hw_python_layouts[0]; i++)
        if (hw_python_layouts[i]->major == major && hw_python_layouts[i]->minor == minor)
            return hw_python_layouts[i];
    return NULL;
}

static void not_read(hw_python_target *out, const char *fmt, const char *reason)
{
    snprintf(out->why_not, sizeof out->why_not, fmt, out->version[0] ? out->version : "of an unknown version",
             reason);
}

/* ---- 3.13 and later: the process's own debug offsets ---- */

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
    if (!ok || gil_locked < gil_state || gil_holder < gil_state)
        return false;
    /* The GIL's fields, from the interpreter's own GIL state. */
    L->gil_locked = gil_locked - gil_state;
    L->gil_last_holder = gil_holder - gil_state;
    return true;
}

/* _PyRuntime begins with _Py_DebugOffsets (3.13+): take the layout from
 * it.  False when it does not (before 3.13); true with out->readable or
 * out->why_not set when it does. */
static bool read_debug_offsets(pid_t pid, hw_python_target *out)
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
        not_read(out, "Python %s free-threaded (Py_GIL_DISABLED): frames not read (%s)", SUPPORTED);
        return true;
    }
    if (major != 3 || minor != 13) {
        not_read(out, "Python %s: frames not read (%s; its debug offsets are laid out as hangwatch does not know)",
                 SUPPORTED);
        return true;
    }
    unsigned char *d = malloc(D->debug_offsets_size);
    if (d == NULL || !hw_py_peek(pid, out->runtime_addr, d, D->debug_offsets_size) ||
        !layout_from_debug(d, &out->layout))
        not_read(out, "Python %s: frames not read (%s: its debug offsets could not be read or make no sense)",
                 SUPPORTED);
    else
        out->readable = true;
    free(d);
    return true;
}

/* ---- before 3.13 ---- */

/* The version from Py_Version (3.11+) or the module's file name, and its
 * table. */
static void take_table(pid_t pid, uint64_t py_version_addr, const char *module, hw_python_target *out)
{
    unsigned major = 0, minor = 0;
    bool free_threaded = false;
    uint64_t version = 0;
    if (py_version_addr != 0 && hw_py_peek(pid, py_version_addr, &version, sizeof version) && version != 0) {
        major = (unsigned)(version >> 24) & 0xff;
        minor = (unsigned)(version >> 16) & 0xff;
        out->version_hex = version;
        snprintf(out->version, sizeof out->version, "%u.%u.%u", major, minor, (unsigned)(version >> 8) & 0xff);
    } else if (module != NULL && version_of_name(module, &major, &minor, &free_threaded)) {
        out->version_hex = (uint64_t)major << 24 | (uint64_t)minor << 16;
        snprintf(out->version, sizeof out->version, "%u.%u", major, minor);
    }
    const hw_python_layout *table = table_of(major, minor);
    if (table == NULL || free_threaded) {
        not_read(out, free_threaded ? "Python %s free-threaded (Py_GIL_DISABLED): frames not read (%s)"
                                    : "Python %s: frames not read (%s)",
                 SUPPORTED);
        return;
    }
    out->layout = *table;
    out->readable = true;
}

void hw_python_find(pid_t pid, const char *maps, size_t maps_len, hw_python_target *out)
{
    memset(out, 0, sizeof *out);
    char file[256];
    bool pypy = false;
    if (maps == NULL || !python_file_in_maps(maps, maps_len, file, sizeof file, &pypy))
        return;
    out->found = true;
    if (pypy) {
        snprintf(out->why_not, sizeof out->why_not, "PyPy: frames not read (%s)", SUPPORTED);
        return;
    }
    hw_symbolizer *sym = hw_symbolizer_new(pid, maps, maps_len, NULL);
    static const char *const names[] = {"_PyRuntime",  "Py_Version",  "PyCode_Type",
                                        "PyUnicode_Type", "PyBytes_Type", "PyFrame_Type"};
    uint64_t addrs[6] = {0};
    char *module = NULL;
    size_t found = sym ? hw_symbolizer_find_symbols(sym, python_module, names, addrs, 6, &module) : 0;
    hw_symbolizer_free(sym);
    const char *slash = module ? strrchr(module, '/') : NULL;
    const char *module_base = slash ? slash + 1 : module ? module : file;
    out->runtime_addr = addrs[0];
    out->code_type = addrs[2];
    out->unicode_type = addrs[3];
    out->bytes_type = addrs[4];
    out->frame_type = addrs[5];
    if (found == 0) {
        /* No runtime to read (Python before 3.7, a stripped interpreter). */
        take_table(pid, 0, file, out);
        out->readable = false;
        if (out->why_not[0] == '\0')
            not_read(out, "Python %s: frames not read (%s; its runtime's symbols are not there)", SUPPORTED);
    } else if (!read_debug_offsets(pid, out)) {
        take_table(pid, addrs[1], module_base, out);
    }
    free(module);
    bool old_frames = out->readable && out->layout.frames == HW_PY_FRAME_OBJECTS;
    if (out->readable &&
        (out->code_type == 0 || out->unicode_type == 0 || out->bytes_type == 0 || (old_frames && out->frame_type == 0))) {
        out->readable = false;
        not_read(out, "Python %s: frames not read (%s; its type objects are not exported)", SUPPORTED);
    }
}
