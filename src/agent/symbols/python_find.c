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
        hw_python_not_read(out, free_threaded ? "Python %s free-threaded (Py_GIL_DISABLED): frames not read (%s)"
                                    : "Python %s: frames not read (%s)",
                 HW_PY_SUPPORTED);
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
        snprintf(out->why_not, sizeof out->why_not, "PyPy: frames not read (%s)", HW_PY_SUPPORTED);
        return;
    }
    hw_symbolizer *sym = hw_symbolizer_new(pid, maps, maps_len, NULL);
    static const char *const names[] = {"_PyRuntime",     "Py_Version",   "PyCode_Type", "PyUnicode_Type",
                                        "PyBytes_Type",   "PyFrame_Type", "_PyEval_EvalFrameDefault"};
    uint64_t addrs[7] = {0};
    char *module = NULL;
    size_t found = sym ? hw_symbolizer_find_symbols(sym, python_module, names, addrs, 7, &module) : 0;
    hw_symbolizer_free(sym);
    const char *slash = module ? strrchr(module, '/') : NULL;
    const char *module_base = slash ? slash + 1 : module ? module : file;
    out->runtime_addr = addrs[0];
    out->code_type = addrs[2];
    out->unicode_type = addrs[3];
    out->bytes_type = addrs[4];
    out->frame_type = addrs[5];
    out->eval_function = addrs[6];
    if (found == 0) {
        /* No runtime to read (Python before 3.7, a stripped interpreter). */
        take_table(pid, 0, file, out);
        out->readable = false;
        if (out->why_not[0] == '\0')
            hw_python_not_read(out, "Python %s: frames not read (%s; its runtime's symbols are not there)", HW_PY_SUPPORTED);
    } else if (!hw_python_read_debug_offsets(pid, out)) {
        take_table(pid, addrs[1], module_base, out);
    }
    free(module);
    bool old_frames = out->readable && out->layout.frames == HW_PY_FRAME_OBJECTS;
    if (out->readable &&
        (out->code_type == 0 || out->unicode_type == 0 || out->bytes_type == 0 || (old_frames && out->frame_type == 0))) {
        out->readable = false;
        hw_python_not_read(out, "Python %s: frames not read (%s; its type objects are not exported)", HW_PY_SUPPORTED);
    }
}
