/*
 * test_js_layout.c - V8's postmortem metadata into the readers' layout
 * (js_internal.h: hw_js_layout_from): node 20's values accepted as they
 * are, and a missing or out-of-range value refused by name; and the
 * JavaScript frames put in place among native ones (hw_js_merge).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "agent/symbols/js_internal.h"

typedef struct named_value {
    const char *name;
    int32_t value;
} named_value;

/* node 20.20's (V8 11.3) values, as its binary carries them. */
static const named_value node20[] = {
    {"off_fp_context", -8},
    {"off_fp_function", -16},
    {"off_fp_bytecode_array", -32},
    {"off_fp_bytecode_offset", -40},
    {"off_fp_args", 16},
    {"class_HeapObject__map__Map", 0},
    {"class_Map__instance_type__uint16_t", 12},
    {"class_Map__constructor_or_back_pointer__Object", 32},
    {"class_JSFunction__shared__SharedFunctionInfo", 24},
    {"class_SharedFunctionInfo__name_or_scope_info__Object", 16},
    {"class_SharedFunctionInfo__script_or_debug_info__HeapObject", 32},
    {"class_SharedFunctionInfo__function_data__Object", 8},
    {"class_Script__source__Object", 8},
    {"class_Script__name__Object", 16},
    {"class_Script__line_ends__Object", 56},
    {"class_String__length__int32_t", 12},
    {"class_SeqOneByteString__chars__char", 16},
    {"class_ConsString__first__String", 16},
    {"class_ConsString__second__String", 24},
    {"class_SlicedString__parent__String", 16},
    {"class_SlicedString__offset__SMI", 24},
    {"class_ThinString__actual__String", 16},
    {"class_ExternalString__resource__Object", 16},
    {"class_UncompiledData__start_position__int32_t", 16},
    {"class_UncompiledData__inferred_name__String", 8},
    {"class_FixedArrayBase__length__SMI", 8},
    {"class_FixedArray__data__uintptr_t", 16},
    {"class_BytecodeArray__data__uintptr_t", 54},
    {"class_Code__bytecode_or_interpreter_data__HeapObject", 16},
    {"type_SharedFunctionInfo__SHARED_FUNCTION_INFO_TYPE", 262},
    {"type_Script__SCRIPT_TYPE", 167},
    {"type_ScopeInfo__SCOPE_INFO_TYPE", 261},
    {"type_FixedArray__FIXED_ARRAY_TYPE", 175},
    {"type_BytecodeArray__BYTECODE_ARRAY_TYPE", 191},
    {"type_ByteArray__BYTE_ARRAY_TYPE", 190},
    {"type_Code__CODE_TYPE", 245},
    {"SpecialAPIObjectType", 1040},
    {"type_Map__MAP_TYPE", 255},
    {"FirstNonstringType", 128},
    {"StringRepresentationMask", 7},
    {"StringEncodingMask", 8},
    {"OneByteStringTag", 8},
    {"SeqStringTag", 0},
    {"ConsStringTag", 1},
    {"ExternalStringTag", 2},
    {"SlicedStringTag", 3},
    {"ThinStringTag", 5},
    {"HeapObjectTag", 1},
    {"HeapObjectTagMask", 3},
    {"SmiTagMask", 1},
    {"scopeinfo_idx_first_vars", 3},
    {"scopeinfo_idx_ncontextlocals", 2},
    {"TaggedSize", 8},
    {"SmiShiftSize", 31},
    {"SmiTag", 0},
    {"type_UncompiledDataWithoutPreparseData__UNCOMPILED_DATA_WITHOUT_PREPARSE_DATA_TYPE", 222},
    {"type_UncompiledDataWithPreparseData__UNCOMPILED_DATA_WITH_PREPARSE_DATA_TYPE", 220},
    {"type_UncompiledDataWithoutPreparseDataWithJob__UNCOMPILED_DATA_WITHOUT_PREPARSE_DATA_WITH_JOB_TYPE", 223},
    {"type_UncompiledDataWithPreparseDataAndJob__UNCOMPILED_DATA_WITH_PREPARSE_DATA_AND_JOB_TYPE", 221},
};

typedef struct values {
    const named_value *table;
    size_t count;
    const char *left_out;   /* this name is missing */
    const char *changed;    /* this name has `to` instead */
    int32_t to;
} values;

static bool lookup(void *ctx, const char *name, int32_t *v)
{
    const values *t = ctx;
    if (t->left_out != NULL && strcmp(name, t->left_out) == 0)
        return false;
    if (t->changed != NULL && strcmp(name, t->changed) == 0) {
        *v = t->to;
        return true;
    }
    for (size_t i = 0; i < t->count; i++)
        if (strcmp(t->table[i].name, name) == 0) {
            *v = t->table[i].value;
            return true;
        }
    return false;
}

static const char *layout_with(hw_js_layout *L, const char *left_out, const char *changed, int32_t to)
{
    values t = {node20, sizeof node20 / sizeof node20[0], left_out, changed, to};
    return hw_js_layout_from(L, lookup, &t);
}

static void node20_is_read(void **state)
{
    (void)state;
    hw_js_layout L;
    assert_null(layout_with(&L, NULL, NULL, 0));
    assert_int_equal(L.fp_function, -16);
    assert_int_equal(L.function_shared, 24);
    assert_int_equal(L.type_shared, 262);
    assert_int_equal(L.smi_shift, 32);
    assert_int_equal(L.heap_object_tag, 1);
    assert_int_equal(L.type_uncompiled_first, 220);
    assert_int_equal(L.type_uncompiled_last, 223);
    assert_int_equal(L.bytecode_source_positions, 32);
    assert_true(hw_js_is_smi(&L, 42ull << 32));
    assert_int_equal(hw_js_smi_value(&L, (uint64_t)-5 << 32), -5);
    assert_true(hw_js_is_heap_object(&L, 0x2a0000001001ull));
    assert_false(hw_js_is_heap_object(&L, 0x2a0000001000ull));
}

static void every_name_is_asked_for(void **state)
{
    (void)state;
    const char *names[80];
    size_t n = hw_js_metadata_names(names, 80);
    assert_int_equal(n, sizeof node20 / sizeof node20[0]);
    /* Each missing value refuses the layout, naming it. */
    for (size_t i = 0; i < n; i++) {
        hw_js_layout L;
        const char *why = layout_with(&L, names[i], NULL, 0);
        assert_non_null(why);
        assert_non_null(strstr(why, names[i]));
    }
}

static void values_out_of_range_are_refused(void **state)
{
    (void)state;
    hw_js_layout L;
    assert_non_null(strstr(layout_with(&L, NULL, "TaggedSize", 4), "pointer compression"));
    assert_string_equal(layout_with(&L, NULL, "off_fp_function", 16), "off_fp_*");
    assert_string_equal(layout_with(&L, NULL, "off_fp_context", -12), "off_fp_*");
    assert_string_equal(layout_with(&L, NULL, "class_JSFunction__shared__SharedFunctionInfo", 4000), "class offsets");
    assert_string_equal(layout_with(&L, NULL, "class_Script__name__Object", -8), "class offsets");
    assert_string_equal(layout_with(&L, NULL, "type_SharedFunctionInfo__SHARED_FUNCTION_INFO_TYPE", 70000),
                        "type_SharedFunctionInfo__SHARED_FUNCTION_INFO_TYPE");
    assert_string_equal(layout_with(&L, NULL, "HeapObjectTag", 0), "HeapObjectTag");
    assert_string_equal(layout_with(&L, NULL, "SmiShiftSize", 40), "SmiShiftSize");
    assert_string_equal(layout_with(&L, NULL, "scopeinfo_idx_first_vars", 100), "scopeinfo_idx_*");
}

/* ---- merging ---- */

static void native_frames(hw_backtrace *bt, const uint64_t *pcs, size_t n)
{
    memset(bt, 0, sizeof *bt);
    bt->frames = calloc(n, sizeof *bt->frames);
    assert_non_null(bt->frames);
    for (size_t i = 0; i < n; i++) {
        bt->frames[i].instruction_addr = pcs[i];
        bt->frames[i].symbol_name = strdup(pcs[i] == 0x100 ? "Builtins_InterpreterEntryTrampoline" : "native");
        bt->frames[i].object_path = strdup("/usr/bin/node");
    }
    bt->count = n;
}

static void js_frames(hw_runtime_names *names, const uint64_t *pcs, const char *const *fn, size_t n)
{
    memset(names, 0, sizeof *names);
    names->runtime = HW_LANG_JAVASCRIPT;
    names->frames = calloc(n, sizeof *names->frames);
    assert_non_null(names->frames);
    for (size_t i = 0; i < n; i++) {
        names->frames[i].instruction_addr = pcs[i];
        names->frames[i].language = HW_LANG_JAVASCRIPT;
        names->frames[i].symbol_name = fn[i] ? strdup(fn[i]) : NULL;
        names->frames[i].source_file = fn[i] ? strdup("/srv/app/server.js") : NULL;
        names->frames[i].source_line = (int)i + 10;
        names->frames[i].runtime_key = HW_RUNTIME_KEY_TAG | (i + 1);
    }
    names->count = (unsigned)n;
}

static void frames_are_named_in_place(void **state)
{
    (void)state;
    const uint64_t native[] = {0x10, 0x100, 0x200, 0x300, 0x400};
    const uint64_t js[] = {0x100, 0x300, 0x999};
    const char *const fn[] = {"renderHugeTable", NULL, "handle"};
    hw_backtrace bt;
    hw_runtime_names names;
    native_frames(&bt, native, 5);
    js_frames(&names, js, fn, 3);
    names.problem = "partial";
    assert_int_equal(hw_js_merge(&names, &bt), 0);
    /* renderHugeTable names the trampoline's frame; the frame without a
     * name leaves its native frame as it was; handle, which the native
     * walk never reached, goes last. */
    assert_int_equal(bt.count, 6);
    assert_string_equal(bt.frames[1].symbol_name, "renderHugeTable");
    assert_int_equal(bt.frames[1].language, HW_LANG_JAVASCRIPT);
    assert_null(bt.frames[1].object_path);
    assert_string_equal(bt.frames[1].source_file, "/srv/app/server.js");
    assert_int_equal(bt.frames[1].source_line, 10);
    assert_int_equal(bt.frames[1].runtime_key, HW_RUNTIME_KEY_TAG | 1);
    assert_string_equal(bt.frames[3].symbol_name, "native");
    assert_int_equal(bt.frames[3].language, HW_LANG_NATIVE);
    assert_string_equal(bt.frames[5].symbol_name, "handle");
    assert_int_equal(bt.frames[5].instruction_addr, 0x999);
    assert_string_equal(bt.runtime_error, "partial");
    hw_backtrace_free(&bt);
    for (unsigned i = 0; i < names.count; i++)
        hw_frame_clear(&names.frames[i]);
    free(names.frames);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(node20_is_read),
        cmocka_unit_test(every_name_is_asked_for),
        cmocka_unit_test(values_out_of_range_are_refused),
        cmocka_unit_test(frames_are_named_in_place),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
