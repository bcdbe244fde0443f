/*
 * runtime_frames.c - a captured thread's native and runtime frames
 * together (runtime_frames.h).
 */
#include "runtime_frames.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jit_map_file.h"

bool hw_is_node_executable(const char *executable)
{
    const char *slash = strrchr(executable, '/');
    const char *base = slash ? slash + 1 : executable;
    if (strncmp(base, "node", 4) != 0)
        return false;
    const char *rest = base + 4;
    return rest[0] == '\0' || strcmp(rest, "js") == 0 || (rest[0] >= '0' && rest[0] <= '9') || rest[0] == '-' ||
           rest[0] == '.';
}

int hw_runtime_merge(const hw_runtime_names *names, hw_backtrace *bt)
{
    if (names == NULL)
        return 0;
    return names->runtime == HW_LANG_JAVASCRIPT ? hw_js_merge(names, bt) : hw_python_merge(names, bt);
}

void hw_unwind_with_runtime(hw_symbolizer *sym, const hw_thread_snapshot *t, size_t max_frames,
                            const hw_runtime_names *names, const hw_python_target *py, const hw_js_target *js,
                            const char *executable, hw_backtrace *bt)
{
    hw_unwind_thread_whole(sym, t, max_frames, bt);
    if (names != NULL)
        hw_runtime_merge(names, bt);
    else if (py != NULL && py->found && py->why_not[0] != '\0' && t->is_target && bt->runtime_error == NULL)
        bt->runtime_error = strdup(py->why_not);
    else if (js != NULL && js->found && js->why_not[0] != '\0' && t->is_target && bt->runtime_error == NULL)
        bt->runtime_error = strdup(js->why_not);
    if (js != NULL && js->readable)
        return; /* V8's frames are read from its metadata: no perf map to miss */
    if (t->is_target && bt->runtime_error == NULL && hw_symbolizer_js_map_cut(sym) &&
        asprintf(&bt->runtime_error, "node's perf map is larger than the %u MiB read of it: functions it names "
                 "after that point have no names", (unsigned)(HW_JIT_MAP_MAX_FILE_BYTES >> 20)) < 0)
        bt->runtime_error = NULL;
    /* A node that was running JavaScript (JIT code, or V8's builtins that
     * run it) whose functions have no names: say how to get them. */
    if (!t->is_target || bt->runtime_error != NULL || executable == NULL || !hw_is_node_executable(executable) ||
        hw_backtrace_has_runtime_frames(bt))
        return;
    bool ran_javascript = false;
    for (size_t k = 0; k < bt->count; k++) {
        const hw_frame *f = &bt->frames[k];
        ran_javascript |= (f->object_path == NULL && f->symbol_name == NULL) ||
                          (f->symbol_name != NULL && strncmp(f->symbol_name, "Builtins_", 9) == 0);
    }
    int js_errno = hw_symbolizer_js_map_errno(sym);
    if (ran_javascript &&
        asprintf(&bt->runtime_error,
                 "JavaScript frames are not named: V8's metadata was not read (--js-frames perf-map or off, or a "
                 "node built without it) and %s; use --js-frames auto, or start node with NODE_OPTIONS=\"%s\"",
                 js_errno == 0 || js_errno == ENOENT ? "node wrote no perf map" : strerror(js_errno),
                 HW_JIT_MAP_NODE_FLAGS) < 0)
        bt->runtime_error = NULL;
}
