/*
 * js_layout.c - V8's postmortem metadata, by name, into the layout the
 * readers use (js_internal.h: hw_js_layout_from, hw_js_metadata_names),
 * with every value checked for the range the readers rely on.  Pure: the
 * values come through a callback (from a process in js_find.c, from the
 * input in the fuzz target).
 *
 * One value the readers need is not in the metadata: where a BytecodeArray
 * keeps its source position table.  It is the field after the constant
 * pool and the handler table, and what is read there is checked to be a
 * ByteArray before it is used (js_names.c).
 */
#include <stddef.h>
#include <string.h>

#include "js_internal.h"

/* ---- the metadata, by name --------------------------------------------- */

typedef enum field_kind { OFFSET, TYPE_NUMBER, MASK } field_kind;

typedef struct metadata_field {
    const char *name; /* without the v8dbg_ prefix */
    size_t where;     /* offsetof in hw_js_layout */
    field_kind kind;
    bool is_u16;      /* stored as uint16_t (types, string tags) */
} metadata_field;

#define OFF(f) offsetof(hw_js_layout, f)
static const metadata_field fields[] = {
    {"off_fp_context", OFF(fp_context), OFFSET, false},
    {"off_fp_function", OFF(fp_function), OFFSET, false},
    {"off_fp_bytecode_array", OFF(fp_bytecode_array), OFFSET, false},
    {"off_fp_bytecode_offset", OFF(fp_bytecode_offset), OFFSET, false},
    {"off_fp_args", OFF(fp_args), OFFSET, false},
    {"class_HeapObject__map__Map", OFF(map), OFFSET, false},
    {"class_Map__instance_type__uint16_t", OFF(map_instance_type), OFFSET, false},
    {"class_Map__constructor_or_back_pointer__Object", OFF(map_constructor), OFFSET, false},
    {"class_JSFunction__shared__SharedFunctionInfo", OFF(function_shared), OFFSET, false},
    {"class_SharedFunctionInfo__name_or_scope_info__Object", OFF(shared_name_or_scope), OFFSET, false},
    {"class_SharedFunctionInfo__script_or_debug_info__HeapObject", OFF(shared_script), OFFSET, false},
    {"class_SharedFunctionInfo__function_data__Object", OFF(shared_function_data), OFFSET, false},
    {"class_Script__source__Object", OFF(script_source), OFFSET, false},
    {"class_Script__name__Object", OFF(script_name), OFFSET, false},
    {"class_Script__line_ends__Object", OFF(script_line_ends), OFFSET, false},
    {"class_String__length__int32_t", OFF(string_length), OFFSET, false},
    {"class_SeqOneByteString__chars__char", OFF(seq_chars), OFFSET, false},
    {"class_ConsString__first__String", OFF(cons_first), OFFSET, false},
    {"class_ConsString__second__String", OFF(cons_second), OFFSET, false},
    {"class_SlicedString__parent__String", OFF(sliced_parent), OFFSET, false},
    {"class_SlicedString__offset__SMI", OFF(sliced_offset), OFFSET, false},
    {"class_ThinString__actual__String", OFF(thin_actual), OFFSET, false},
    {"class_ExternalString__resource__Object", OFF(external_resource), OFFSET, false},
    {"class_UncompiledData__start_position__int32_t", OFF(uncompiled_start), OFFSET, false},
    {"class_UncompiledData__inferred_name__String", OFF(uncompiled_inferred_name), OFFSET, false},
    {"class_FixedArrayBase__length__SMI", OFF(fixed_array_length), OFFSET, false},
    {"class_FixedArray__data__uintptr_t", OFF(fixed_array_data), OFFSET, false},
    {"class_BytecodeArray__data__uintptr_t", OFF(bytecode_data), OFFSET, false},
    {"class_Code__bytecode_or_interpreter_data__HeapObject", OFF(code_bytecode), OFFSET, false},
    {"type_SharedFunctionInfo__SHARED_FUNCTION_INFO_TYPE", OFF(type_shared), TYPE_NUMBER, true},
    {"type_Script__SCRIPT_TYPE", OFF(type_script), TYPE_NUMBER, true},
    {"type_ScopeInfo__SCOPE_INFO_TYPE", OFF(type_scope_info), TYPE_NUMBER, true},
    {"type_FixedArray__FIXED_ARRAY_TYPE", OFF(type_fixed_array), TYPE_NUMBER, true},
    {"type_BytecodeArray__BYTECODE_ARRAY_TYPE", OFF(type_bytecode_array), TYPE_NUMBER, true},
    {"type_ByteArray__BYTE_ARRAY_TYPE", OFF(type_byte_array), TYPE_NUMBER, true},
    {"type_Code__CODE_TYPE", OFF(type_code), TYPE_NUMBER, true},
    {"SpecialAPIObjectType", OFF(first_object_type), TYPE_NUMBER, true},
    {"type_Map__MAP_TYPE", OFF(type_map), TYPE_NUMBER, true},
    {"FirstNonstringType", OFF(first_nonstring), TYPE_NUMBER, true},
    {"StringRepresentationMask", OFF(string_representation_mask), MASK, true},
    {"StringEncodingMask", OFF(string_encoding_mask), MASK, true},
    {"OneByteStringTag", OFF(one_byte_tag), MASK, true},
    {"SeqStringTag", OFF(seq_tag), MASK, true},
    {"ConsStringTag", OFF(cons_tag), MASK, true},
    {"ExternalStringTag", OFF(external_tag), MASK, true},
    {"SlicedStringTag", OFF(sliced_tag), MASK, true},
    {"ThinStringTag", OFF(thin_tag), MASK, true},
    {"HeapObjectTag", OFF(heap_object_tag), MASK, false},
    {"HeapObjectTagMask", OFF(heap_object_tag_mask), MASK, false},
    {"SmiTagMask", OFF(smi_tag_mask), MASK, false},
    {"scopeinfo_idx_first_vars", OFF(scope_info_first_vars), OFFSET, false},
    {"scopeinfo_idx_ncontextlocals", OFF(scope_info_context_locals), OFFSET, false},
};
#undef OFF

/* The uncompiled-data types, whose numbers make a range. */
static const char *const uncompiled_types[] = {
    "type_UncompiledDataWithoutPreparseData__UNCOMPILED_DATA_WITHOUT_PREPARSE_DATA_TYPE",
    "type_UncompiledDataWithPreparseData__UNCOMPILED_DATA_WITH_PREPARSE_DATA_TYPE",
    "type_UncompiledDataWithoutPreparseDataWithJob__UNCOMPILED_DATA_WITHOUT_PREPARSE_DATA_WITH_JOB_TYPE",
    "type_UncompiledDataWithPreparseDataAndJob__UNCOMPILED_DATA_WITH_PREPARSE_DATA_AND_JOB_TYPE",
};

/* The other values the readers need, by name. */
static const char *const extra_values[] = {"TaggedSize", "SmiShiftSize", "SmiTag"};

size_t hw_js_metadata_names(const char **names, size_t room)
{
    size_t n = 0;
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++, n++)
        if (n < room)
            names[n] = fields[i].name;
    for (size_t i = 0; i < sizeof extra_values / sizeof extra_values[0]; i++, n++)
        if (n < room)
            names[n] = extra_values[i];
    for (size_t i = 0; i < sizeof uncompiled_types / sizeof uncompiled_types[0]; i++, n++)
        if (n < room)
            names[n] = uncompiled_types[i];
    return n;
}

/* A heap object's field the readers take out of a read of at most
 * HW_JS_MAX_OBJECT_READ bytes: inside it, 8-byte words aligned as V8's. */
static bool word_offset_ok(int32_t off)
{
    return off >= 0 && off + 8 <= (int32_t)HW_JS_MAX_OBJECT_READ;
}

const char *hw_js_layout_from(hw_js_layout *out, bool (*value)(void *ctx, const char *name, int32_t *v), void *ctx)
{
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        int32_t v;
        if (!value(ctx, fields[i].name, &v))
            return fields[i].name;
        if (fields[i].is_u16) {
            if (v < 0 || v > 0xffff)
                return fields[i].name;
            uint16_t u = (uint16_t)v;
            memcpy((char *)out + fields[i].where, &u, sizeof u);
        } else {
            memcpy((char *)out + fields[i].where, &v, sizeof v);
        }
    }
    int32_t tagged = 0, shift = 0, tag_size = 1;
    if (!value(ctx, "TaggedSize", &tagged) || tagged != 8)
        return "TaggedSize (8: V8 built without pointer compression)";
    if (!value(ctx, "SmiShiftSize", &shift) || shift < 0 || shift > 31)
        return "SmiShiftSize";
    int32_t smi_tag = 0;
    if (!value(ctx, "SmiTag", &smi_tag) || smi_tag != 0)
        return "SmiTag";
    out->smi_shift = (uint32_t)(shift + tag_size);
    out->type_uncompiled_first = 0xffff;
    for (size_t i = 0; i < sizeof uncompiled_types / sizeof uncompiled_types[0]; i++) {
        int32_t v;
        if (!value(ctx, uncompiled_types[i], &v) || v < 0 || v > 0xffff)
            return uncompiled_types[i];
        if (v < out->type_uncompiled_first)
            out->type_uncompiled_first = (uint16_t)v;
        if (v > out->type_uncompiled_last)
            out->type_uncompiled_last = (uint16_t)v;
    }
    /* Ranges the readers rely on. */
    const hw_js_layout *L = out;
    if (L->heap_object_tag_mask == 0 || L->heap_object_tag_mask > 7 ||
        (L->heap_object_tag & ~L->heap_object_tag_mask) != 0 || L->heap_object_tag == 0)
        return "HeapObjectTag";
    if (L->smi_tag_mask == 0 || (L->smi_tag_mask & L->heap_object_tag) == 0)
        return "SmiTagMask";
    const int32_t fp_slots[] = {L->fp_context, L->fp_function, L->fp_bytecode_array, L->fp_bytecode_offset};
    for (size_t i = 0; i < 4; i++)
        if (fp_slots[i] >= 0 || fp_slots[i] < -256 || fp_slots[i] % 8 != 0)
            return "off_fp_*";
    if (L->fp_args < 16 || L->fp_args > 256 || L->fp_args % 8 != 0)
        return "off_fp_args";
    /* The one field the metadata does not give: the bytecode's source
     * position table, after its constant pool and handler table. */
    out->bytecode_source_positions = L->fixed_array_length + 24;
    const int32_t words[] = {L->map, L->function_shared, L->shared_name_or_scope, L->shared_script,
                             L->shared_function_data, L->script_source, L->script_name, L->script_line_ends,
                             L->cons_first, L->cons_second, L->sliced_parent, L->sliced_offset, L->thin_actual,
                             L->external_resource, L->uncompiled_inferred_name, L->fixed_array_length,
                             L->fixed_array_data, L->map_constructor, L->code_bytecode,
                             L->bytecode_source_positions};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (!word_offset_ok(words[i]))
            return "class offsets";
    if (L->map_instance_type < 0 || L->map_instance_type + 2 > (int32_t)HW_JS_MAX_OBJECT_READ ||
        L->string_length < 0 || L->string_length + 4 > (int32_t)HW_JS_MAX_OBJECT_READ ||
        L->uncompiled_start < 0 || L->uncompiled_start + 4 > (int32_t)HW_JS_MAX_OBJECT_READ ||
        L->seq_chars < 0 || L->seq_chars > (int32_t)HW_JS_MAX_OBJECT_READ || L->bytecode_data < 0 ||
        L->bytecode_data > (int32_t)HW_JS_MAX_OBJECT_READ)
        return "class offsets";
    if (L->scope_info_first_vars < 1 || L->scope_info_first_vars > 8 || L->scope_info_context_locals < 0 ||
        L->scope_info_context_locals >= L->scope_info_first_vars)
        return "scopeinfo_idx_*";
    if (L->first_nonstring == 0 || L->string_representation_mask == 0 || L->string_encoding_mask == 0)
        return "string tags";
    return NULL;
}
