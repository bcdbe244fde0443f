/*
 * js_walk.c - the JavaScript frames of each stopped thread (js_frames.h:
 * hw_js_read_stacks), run in the capture while the threads are stopped.
 *
 * V8 keeps a frame pointer in every frame it makes (and node's own code is
 * built with them), so a thread's frames are the chain that starts at its
 * rbp: each frame's first word is its caller's frame pointer, the next the
 * return address.  The chain is followed in the thread's stack copy (no
 * system call), only upwards, and ends where a link leaves the copy or
 * does not go up.  In a frame V8 made, the slot at off_fp_context holds a
 * context (a tagged pointer) in a JavaScript frame and a frame-type marker
 * (an even integer) in every other kind; a JavaScript frame's slot at
 * off_fp_function holds its JSFunction, whose SharedFunctionInfo is what
 * the frame is kept by: one read for the function's `shared` field, one
 * for the SharedFunctionInfo's map, checked against the maps of
 * SharedFunctionInfos already seen (or, the first time, against the
 * metadata's type number: two reads more).  A native frame whose slots
 * happen to look tagged fails that check and is left to the native
 * unwinder.
 *
 * An interpreted frame also keeps its bytecode array and the offset of the
 * current bytecode in two slots; they are recorded as found and checked
 * after the resume against the function's own bytecode (js_names.c).
 *
 * V8 names a method call by its receiver's type ("TableRenderer.render",
 * "Object.method"): the receiver (the lowest argument slot above the frame)
 * is read from the stack copy, and when it is an object (not the global
 * proxy, undefined or a primitive: a plain call), its map's constructor,
 * found through the map's back pointers, gives the type.  Maps are
 * remembered with their constructor, so a receiver costs one read (its
 * map) once its kind of object has been seen.
 *
 * Nothing is allocated: frames go into the room the capture made before
 * the stop.
 */
#include "js_internal.h"

#define WALK_LIMIT 4096 /* frame links followed at most per thread */

bool hw_js_instance_type(pid_t pid, const hw_js_layout *L, uint64_t object, uint16_t *type, uint64_t *map)
{
    uint64_t m = 0;
    if (!hw_js_is_heap_object(L, object) || !hw_js_peek(pid, hw_js_field(L, object, L->map), &m, sizeof m) ||
        !hw_js_is_heap_object(L, m))
        return false;
    uint16_t t = 0;
    if (!hw_js_peek(pid, hw_js_field(L, m, L->map_instance_type), &t, sizeof t))
        return false;
    *type = t;
    if (map != NULL)
        *map = m;
    return true;
}

/* Is `shared` a SharedFunctionInfo?  Remembers its map when it is. */
static bool is_shared_function_info(hw_js_reader *r, pid_t tid, uint64_t shared)
{
    const hw_js_layout *L = &r->target.layout;
    uint64_t map = 0;
    if (!hw_js_is_heap_object(L, shared) || !hw_js_peek(tid, hw_js_field(L, shared, L->map), &map, sizeof map))
        return false;
    for (unsigned i = 0; i < r->shared_map_count && i < HW_JS_KNOWN_MAPS; i++)
        if (r->shared_maps[i] == map)
            return true;
    uint16_t type = 0;
    uint64_t checked_map = 0;
    if (!hw_js_instance_type(tid, L, shared, &type, &checked_map) || type != L->type_shared || checked_map != map)
        return false;
    if (r->shared_map_count < HW_JS_KNOWN_MAPS)
        r->shared_maps[r->shared_map_count++] = map;
    return true;
}

#define MAX_BACK_POINTERS 16 /* a map's back pointers followed to its constructor at most */

/* The SharedFunctionInfo of the constructor of receiver `map`'s objects, or
 * 0: not an object whose type names a method call. */
static uint64_t constructor_of(hw_js_reader *r, pid_t tid, uint64_t map)
{
    const hw_js_layout *L = &r->target.layout;
    uint16_t type = 0;
    uint64_t meta = 0;
    if (!hw_js_peek(tid, hw_js_field(L, map, L->map_instance_type), &type, sizeof type) ||
        type < L->first_object_type || !hw_js_peek(tid, hw_js_field(L, map, L->map), &meta, sizeof meta))
        return 0;
    uint64_t at = map;
    for (int i = 0; i < MAX_BACK_POINTERS; i++) {
        uint64_t next = 0, next_map = 0;
        if (!hw_js_peek(tid, hw_js_field(L, at, L->map_constructor), &next, sizeof next) ||
            !hw_js_is_heap_object(L, next) || !hw_js_peek(tid, hw_js_field(L, next, L->map), &next_map, sizeof next_map))
            return 0;
        if (next_map == meta) { /* a map: the one this map came from */
            at = next;
            continue;
        }
        uint64_t shared = 0;
        return hw_js_peek(tid, hw_js_field(L, next, L->function_shared), &shared, sizeof shared) &&
                       is_shared_function_info(r, tid, shared)
                   ? shared
                   : 0;
    }
    return 0;
}

static uint64_t receiver_class(hw_js_reader *r, pid_t tid, uint64_t receiver)
{
    const hw_js_layout *L = &r->target.layout;
    uint64_t map = 0;
    if (!hw_js_is_heap_object(L, receiver) || !hw_js_peek(tid, hw_js_field(L, receiver, L->map), &map, sizeof map) ||
        !hw_js_is_heap_object(L, map))
        return 0;
    size_t slot = (size_t)((map >> 3) * 0x9e3779b97f4a7c15ull >> 56) % HW_JS_RECEIVER_MAPS;
    if (r->receivers[slot].map == map)
        return r->receivers[slot].constructor;
    uint64_t constructor = constructor_of(r, tid, map);
    r->receivers[slot].map = map;
    r->receivers[slot].constructor = constructor;
    return constructor;
}

static uint64_t stack_word(const hw_thread_snapshot *t, uint64_t addr)
{
    uint64_t v;
    memcpy(&v, t->stack + (addr - t->stack_start), sizeof v);
    return v;
}

/* Is the frame at `fp` (whole in the copy) a JavaScript frame?  Then its
 * SharedFunctionInfo into *shared. */
static bool js_frame_at(hw_js_reader *r, hw_thread_snapshot *t, uint64_t fp, uint64_t *shared)
{
    const hw_js_layout *L = &r->target.layout;
    uint64_t context = stack_word(t, fp + (uint64_t)(int64_t)L->fp_context);
    uint64_t function = stack_word(t, fp + (uint64_t)(int64_t)L->fp_function);
    return !hw_js_is_smi(L, context) && hw_js_is_heap_object(L, function) &&
           hw_js_peek(t->tid, hw_js_field(L, function, L->function_shared), shared, sizeof *shared) &&
           is_shared_function_info(r, t->tid, *shared);
}

/* Room a frame needs in the copy around its frame pointer: `below` under
 * it, `above` (the receiver's slot) over it. */
static void frame_reach(const hw_js_layout *L, uint64_t *below, uint64_t *above)
{
    int32_t lowest = 0;
    const int32_t slots[] = {L->fp_context, L->fp_function, L->fp_bytecode_array, L->fp_bytecode_offset};
    for (size_t i = 0; i < 4; i++)
        if (slots[i] < lowest)
            lowest = slots[i];
    *below = (uint64_t)(-(int64_t)lowest);
    *above = (uint64_t)L->fp_args;
}

/* Is a frame at `fp` whole in the copy (offsets from its start, so
 * nothing wraps)? */
static bool frame_in_copy(const hw_thread_snapshot *t, uint64_t fp, uint64_t below, uint64_t above)
{
    const uint64_t lo = t->stack_start, len = t->stack_len;
    return (fp & 7) == 0 && fp >= lo && fp - lo >= below && fp - lo <= len && len - (fp - lo) >= above + 8;
}

/* The JavaScript frames of the frame-pointer chain that starts at `fp`,
 * whose frame's pc is `pc`, into t->interp. */
static void walk_from(hw_js_reader *r, hw_thread_snapshot *t, uint64_t fp, uint64_t pc)
{
    const hw_js_layout *L = &r->target.layout;
    hw_interp_stack *st = &t->interp;
    uint64_t below, above;
    frame_reach(L, &below, &above);
    for (unsigned steps = 0; steps < WALK_LIMIT; steps++) {
        if (!frame_in_copy(t, fp, below, above))
            break;
        uint64_t caller_fp = stack_word(t, fp), return_addr = stack_word(t, fp + 8);
        uint64_t shared = 0;
        if (js_frame_at(r, t, fp, &shared)) {
            if (st->count == st->capacity) {
                st->truncated = true;
                break;
            }
            hw_interp_frame *f = &st->frames[st->count++];
            *f = (hw_interp_frame){.frame_addr = fp, .code_addr = shared, .pc = pc, .instr_addr = UINT64_MAX};
            uint64_t bytecode = stack_word(t, fp + (uint64_t)(int64_t)L->fp_bytecode_array);
            uint64_t offset = stack_word(t, fp + (uint64_t)(int64_t)L->fp_bytecode_offset);
            if (hw_js_is_heap_object(L, bytecode) && hw_js_is_smi(L, offset)) {
                /* The register holds the offset from the tagged array's start. */
                int64_t at = hw_js_smi_value(L, offset) - (L->bytecode_data - (int64_t)L->heap_object_tag);
                if (at >= 0 && at < (1 << 30)) {
                    f->aux = bytecode;
                    f->instr_addr = (uint64_t)at;
                }
            }
            f->receiver_class = receiver_class(r, t->tid, stack_word(t, fp + above));
            st->present = true;
        }
        if (caller_fp <= fp)
            break;
        fp = caller_fp;
        pc = return_addr;
    }
}

/*
 * Where the thread stopped in code built without frame pointers (libc's
 * malloc, OpenSSL's assembly, a GC's allocator), rbp is any value and the
 * chain is not there to follow from it; it goes on higher up the stack,
 * where V8's frames are (its exit frame into C++ first).  A place from
 * which CHAIN_LINKS links each lead higher inside the copy starts a
 * chain; the places above the stack pointer are tried, lowest first, at
 * most SCAN_TRIES chains and SCAN_BYTES of stack.  The frame at the place
 * itself is passed over (its pc is in its callee's frame, not known): its
 * caller is the first looked at, an exit frame's caller being JavaScript.
 *
 * Of rbp's chain and those, the longest is walked.  Every real chain ends
 * in the same outermost frames, and the one that starts at the lowest real
 * frame goes through all of them; a chain that starts at data which
 * happens to point into the stack (a spilled pointer to an object on it,
 * rbp used for data: printf's in V8's compiler pointed at the outermost
 * function) joins the real one higher up, past frames it skipped: in a
 * garbage collection under an allocation, buildRows and its callers were
 * lost that way and only the outermost timer callback named.  Counting
 * links reads only the copy; only the chain chosen is checked against the
 * heap.  If it holds no JavaScript frame, the first chain that does is
 * taken, as before.
 */
#define CHAIN_LINKS 3
#define SCAN_TRIES 24
#define SCAN_BYTES (256u * 1024u)

static bool chain_starts_at(const hw_thread_snapshot *t, uint64_t at)
{
    const uint64_t lo = t->stack_start, len = t->stack_len;
    uint64_t fp = at;
    for (unsigned i = 0; i < CHAIN_LINKS; i++) {
        if ((fp & 7) != 0 || fp < lo || fp - lo > len || len - (fp - lo) < 16)
            return false;
        uint64_t next = stack_word(t, fp);
        if (next <= fp)
            return false;
        fp = next;
    }
    return true;
}

/* The frames of the chain from `fp` that are whole in the copy. */
static unsigned chain_length(const hw_thread_snapshot *t, uint64_t fp, uint64_t below, uint64_t above)
{
    unsigned n = 0;
    while (n < WALK_LIMIT && frame_in_copy(t, fp, below, above)) {
        n++;
        uint64_t next = stack_word(t, fp);
        if (next <= fp)
            break;
        fp = next;
    }
    return n;
}

/* Call `each(at)` for the chain starts above the stack pointer, lowest
 * first, until it returns true or the scan's bounds are reached. */
typedef bool (*chain_visit)(hw_js_reader *r, hw_thread_snapshot *t, uint64_t at, void *ctx);

static void scan_chains(hw_js_reader *r, hw_thread_snapshot *t, chain_visit each, void *ctx)
{
    const uint64_t lo = t->stack_start, len = t->stack_len;
    uint64_t at = (t->regs.rsp + 7) & ~7ull;
    for (unsigned tries = 0; tries < SCAN_TRIES && at >= lo && at - lo <= len - 16 && at - t->regs.rsp < SCAN_BYTES;
         at += 8) {
        if (!chain_starts_at(t, at))
            continue;
        tries++;
        if (each(r, t, at, ctx))
            return;
    }
}

typedef struct longest_chain {
    uint64_t fp, pc;
    unsigned length;
    uint64_t below, above;
} longest_chain;

static bool keep_longest(hw_js_reader *r, hw_thread_snapshot *t, uint64_t at, void *ctx)
{
    (void)r;
    longest_chain *c = ctx;
    uint64_t fp = stack_word(t, at);
    unsigned n = chain_length(t, fp, c->below, c->above);
    if (n > c->length) {
        c->length = n;
        c->fp = fp;
        c->pc = stack_word(t, at + 8);
    }
    return false;
}

static bool first_with_javascript(hw_js_reader *r, hw_thread_snapshot *t, uint64_t at, void *ctx)
{
    (void)ctx;
    walk_from(r, t, stack_word(t, at), stack_word(t, at + 8));
    return t->interp.count > 0 || t->interp.truncated;
}

static void walk_thread(hw_js_reader *r, hw_thread_snapshot *t)
{
    hw_interp_stack *st = &t->interp;
    st->count = 0;
    st->truncated = false;
    st->error = NULL;
    st->present = false;
    if (t->stack == NULL || t->stack_len < 64)
        return;
    longest_chain best = {.fp = t->regs.rbp, .pc = t->regs.rip};
    frame_reach(&r->target.layout, &best.below, &best.above);
    best.length = chain_length(t, best.fp, best.below, best.above);
    scan_chains(r, t, keep_longest, &best);
    if (best.length > 0)
        walk_from(r, t, best.fp, best.pc);
    if (st->count == 0 && !st->truncated)
        scan_chains(r, t, first_with_javascript, NULL);
    if (st->count > 0)
        st->state_addr = t->regs.rbp;
}

void hw_js_read_stacks(void *ctx, hw_process_snapshot *snap)
{
    hw_js_reader *r = ctx;
    if (r == NULL || !r->target.readable)
        return;
    for (size_t i = 0; i < snap->thread_count; i++) {
        hw_thread_snapshot *t = &snap->threads[i];
        if (t->status == HW_THREAD_CAPTURED && t->interp.frames != NULL && t->interp.capacity > 0)
            walk_thread(r, t);
    }
}
