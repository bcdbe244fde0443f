/*
 * js_frames.h - the JavaScript functions a node thread was running, read
 * from V8's own records in the process's memory with the postmortem
 * metadata node carries (the v8dbg_* symbols llnode reads core files
 * with), and put in place among the thread's native frames.  No flag,
 * no perf map, nothing running inside node.
 *
 * The same four steps as python_frames.h, for the same reasons:
 *  1. hw_js_find, once per process: the module that carries the metadata
 *     (node, or libnode), and the offsets, tags and type numbers it gives
 *     (js_find.c);
 *  2. hw_js_read_stacks, in the capture while the threads are stopped:
 *     each thread's frame-pointer chain walked in its stack copy; a frame
 *     whose function slot holds a JSFunction (its SharedFunctionInfo
 *     checked against the metadata's type) is a JavaScript frame: its
 *     SharedFunctionInfo, the code address it runs at, and for an
 *     interpreted frame its bytecode array and offset (js_walk.c);
 *  3. hw_js_name_threads, right after the resume, on the report's naming
 *     thread (runtime_namers.h): the function's name
 *     (V8's string kinds: sequential, cons, thin, sliced, external), its
 *     script's name and the line, kept per process for the next captures
 *     (js_names.c);
 *  4. hw_js_merge, in the report worker: each JavaScript frame names the
 *     native frame it is (the one at its code address), in place
 *     (js_merge.c).
 *
 * Everything read is hostile: every pointer is checked for V8's tag, every
 * object's map for the type the metadata gives, lengths and depths are
 * bounded, and a chain that breaks gives a partial stack and a reason.
 */
#ifndef HANGWATCH_JS_FRAMES_H
#define HANGWATCH_JS_FRAMES_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/capture/capture.h"
#include "frame.h"
#include "python_frames.h"

#define HW_JS_MAX_FRAMES 128 /* JavaScript frames read per thread, innermost first */

/* What the metadata says, as the readers use it (js_find.c fills it). */
typedef struct hw_js_layout {
    int32_t fp_context, fp_function, fp_bytecode_array, fp_bytecode_offset;
    int32_t fp_args;               /* the receiver: the lowest of the arguments above the frame */
    int32_t map;                   /* HeapObject::map */
    int32_t map_instance_type;     /* Map::instance_type (uint16) */
    int32_t map_constructor;       /* Map::constructor_or_back_pointer */
    int32_t function_shared;       /* JSFunction::shared */
    int32_t shared_name_or_scope;  /* SharedFunctionInfo::name_or_scope_info */
    int32_t shared_script;         /* SharedFunctionInfo::script_or_debug_info */
    int32_t shared_function_data;  /* SharedFunctionInfo::function_data */
    int32_t script_source, script_name, script_line_ends;
    int32_t string_length, seq_chars, cons_first, cons_second, sliced_parent, sliced_offset, thin_actual,
        external_resource;
    int32_t uncompiled_start, uncompiled_inferred_name;
    int32_t fixed_array_length, fixed_array_data;
    int32_t bytecode_data;         /* BytecodeArray's first bytecode: where offsets count from */
    int32_t bytecode_source_positions; /* BytecodeArray::source_position_table (not in the metadata:
                                          the field after the handler table, checked by type) */
    int32_t code_bytecode;         /* Code::bytecode_or_interpreter_data (baseline code's bytecode) */
    uint16_t type_shared, type_script, type_scope_info, type_fixed_array, type_bytecode_array, type_byte_array,
        type_code, type_map, first_nonstring, type_uncompiled_first, type_uncompiled_last;
    uint16_t first_object_type;    /* SpecialAPIObjectType: receivers from here on are objects whose
                                      constructor names a method call ("Type.method") */
    uint16_t string_representation_mask, string_encoding_mask, one_byte_tag, seq_tag, cons_tag, external_tag,
        sliced_tag, thin_tag;
    uint32_t heap_object_tag, heap_object_tag_mask, smi_tag_mask;
    uint32_t smi_shift;            /* a Smi's value is its word shifted right by this */
    int32_t scope_info_first_vars, scope_info_context_locals;
} hw_js_layout;

/* One process's V8, as found: plain data, copied into requests. */
typedef struct hw_js_target {
    bool found;          /* the process runs V8 (its module has the metadata, or is node) */
    bool readable;       /* ... and its frames are read with `layout` */
    hw_js_layout layout;
    char module[128];    /* base name of the module with the metadata */
    char why_not[224];   /* found but not read: what reports and the stderr line say */
} hw_js_target;

/* Look for V8's metadata in process `pid` whose maps text is given. */
void hw_js_find(pid_t pid, const char *maps, size_t maps_len, hw_js_target *out);

/* Does the ELF file at `path` (node, say) carry V8's metadata?  False for
 * anything unreadable or not ELF. */
bool hw_js_file_has_metadata(const char *path);

/* The in-stop reader's state, one per process: the target and the maps of
 * V8's SharedFunctionInfos it has checked (so the next frames cost one read
 * less).  Used by one thread at a time. */
#define HW_JS_KNOWN_MAPS 8
#define HW_JS_RECEIVER_MAPS 256 /* receivers' maps remembered with their constructor */
typedef struct hw_js_reader {
    hw_js_target target;
    uint64_t shared_maps[HW_JS_KNOWN_MAPS];
    unsigned shared_map_count;
    struct {
        uint64_t map;         /* 0: empty */
        uint64_t constructor; /* its constructor's SharedFunctionInfo, 0: none to name */
    } receivers[HW_JS_RECEIVER_MAPS];
} hw_js_reader;

/* capture.h's while_stopped reader; ctx is a hw_js_reader *. */
void hw_js_read_stacks(void *ctx, hw_process_snapshot *snap);

/* Names of functions and scripts, read after the resume and kept for the
 * process's life (one thread uses it); each kept name is checked against
 * its SharedFunctionInfo again (one read) before it is used again. */
typedef struct hw_js_namer hw_js_namer;
hw_js_namer *hw_js_namer_new(const hw_js_target *js, pid_t pid);
void hw_js_namer_free(hw_js_namer *namer);
/* What the namer holds, in bytes (its tables and the names, line ends and
 * positions it keeps): the agent bounds the sum over every watched process. */
size_t hw_js_namer_bytes(const hw_js_namer *namer);
/* From now on the namer reads no source, line ends or position table: its
 * frames come without their line (early samples: see
 * hw_python_namer_names_only). */
void hw_js_namer_names_only(hw_js_namer *namer);

/* Name the JavaScript frames of a snapshot's threads (all, or only the
 * target): snap->thread_count entries (hw_runtime_names, parallel to each
 * thread's interp stack; frames[i].instruction_addr is the code address
 * the frame runs at), or NULL. */
hw_runtime_names *hw_js_name_threads(hw_js_namer *namer, const hw_process_snapshot *snap, bool target_only);

/* A JavaScript frame named again from its sample key (hw_frame.runtime_key,
 * which hw_js_name_threads sets), for a Point Stack: 0, or -1. */
int hw_js_frame_from_key(hw_js_namer *namer, uint64_t key, hw_frame *out);

/* Name each native frame of `bt` that a JavaScript frame runs at, in place;
 * JavaScript frames the native walk did not reach go last.  Problems go to
 * bt->runtime_error.  0, or -ENOMEM. */
int hw_js_merge(const hw_runtime_names *names, hw_backtrace *bt);

#endif
