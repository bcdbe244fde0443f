/*
 * symbolizer_jit.c - naming JIT code: the symbolizer's lookup of an address
 * in anonymous memory, where no file lies behind the code and libdwfl has
 * nothing to say.
 *
 * node writes its JIT functions to a perf map when started with
 * HW_JIT_MAP_NODE_FLAGS (js_maps.c adds them under `hangwatch run` for a
 * node without V8's metadata); only for such a node is the map looked at
 * (hw_symbolizer_allow_js_map: any process could write one); it is read
 * once per symbolizer, at the first such address, and only if
 * it belongs to the process's user (jit_map_file.h): the owner the capture
 * saw (hw_symbolizer_set_owner), else /proc's while the process lives.
 * When it cannot be read, hw_symbolizer_js_map_errno keeps why, for the
 * hint on the hung thread (runtime_frames.c).
 */
#include "symbolizer_internal.h"

#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>

/* Anonymous memory is JIT code: named from node's perf map when it has
 * one (jit_map_file.h), else left without a name. */
void hw_symbolizer_allow_js_map(hw_symbolizer *sym, bool allowed)
{
    if (sym != NULL)
        sym->js_map_allowed = allowed;
}

void hw_symbolizer_lookup_jit(hw_symbolizer *sym, uint64_t addr, resolved *e)
{
    if (!sym->js_map_allowed)
        return; /* not a node named by its map: anonymous code stays unnamed */
    if (!sym->js_map_tried) {
        sym->js_map_tried = true;
        if (!sym->owner_known) {
            char path[64];
            struct stat st;
            snprintf(path, sizeof path, "/proc/%d", (int)sym->pid);
            if (stat(path, &st) != 0) {
                sym->js_map_errno = errno;
                return;
            }
            sym->owner_uid = st.st_uid;
            sym->owner_known = true;
        }
        hw_jit_map_cache *cache = hw_jit_map_cache_bound();
        if (cache != NULL) {
            /* Kept per process: read once, then only what was appended. */
            sym->js_map = hw_jit_map_cache_get(cache, sym->pid, sym->owner_uid, &sym->js_map_cut, NULL);
            sym->js_map_cache = sym->js_map != NULL ? cache : NULL;
        } else {
            sym->js_map_owned = hw_jit_map_load(sym->pid, sym->owner_uid, NULL);
            sym->js_map = sym->js_map_owned;
        }
        sym->js_map_errno = sym->js_map ? 0 : errno;
    }
    hw_js_symbol js;
    if (sym->js_map == NULL || !hw_jit_map_lookup(sym->js_map, addr, &js))
        return;
    e->language = HW_LANG_JAVASCRIPT;
    e->symbol_name = hw_dup_or_null(js.function);
    e->symbol_addr = js.start;
    if (js.source_file != NULL) {
        e->source_file = hw_dup_or_null(js.source_file);
        e->source_line = js.source_line;
    }
}

bool hw_symbolizer_js_map_cut(const hw_symbolizer *sym)
{
    return sym != NULL && sym->js_map != NULL && sym->js_map_cut;
}

void hw_symbolizer_release_js_map(hw_symbolizer *sym)
{
    if (sym->js_map_cache != NULL)
        hw_jit_map_cache_put(sym->js_map_cache, sym->js_map);
    hw_jit_map_free(sym->js_map_owned);
    sym->js_map = NULL;
    sym->js_map_owned = NULL;
    sym->js_map_cache = NULL;
}

int hw_symbolizer_js_map_errno(const hw_symbolizer *sym)
{
    return sym != NULL && sym->js_map_tried ? sym->js_map_errno : 0;
}
