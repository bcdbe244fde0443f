/*
 * python_frames.c - CPython's thread states and frame chains, read while
 * the threads are stopped (python_frames.h: hw_python_read_stacks, the
 * capture's while_stopped reader), and the thread that holds the GIL.
 *
 * Only what changes as the program runs is read here, with system calls
 * and no allocation: each thread state, matched to a captured thread, and
 * its chain of frames (the frame record, its code object, the instruction
 * it is at).  Code objects are named after the resume (python_names.c).
 * Two shapes of chain, by version (python_layout.h):
 *
 *   3.8-3.10  PyFrameObject, from the thread state's `frame` by f_back;
 *             every frame is run by a C-level evaluation of its own, so
 *             every frame is an entry frame.  Each record's type is
 *             checked: these versions are known only by their file name.
 *   3.11+     _PyInterpreterFrame, from the current frame (the thread
 *             state's, or its _PyCFrame's) by `previous`; 3.11 marks the
 *             outermost frame of each C-level evaluation (is_entry), 3.12
 *             and 3.13 put a shim frame owned by the C stack below it,
 *             which is not shown.
 *
 * A thread state is matched to its thread by the kernel's tid (3.11+;
 * only outside a pid namespace: inside a container it is the container's),
 * or by pthread_self(), which on x86-64 glibc and musl is the thread's fs
 * base: a register the capture copied.  The limits of python_internal.h hold.
 */
#include "python_internal.h"

/* The captured thread a thread state belongs to: by the kernel's tid, or
 * by pthread_self(), the thread's fs base. */
static hw_thread_snapshot *thread_of_state(hw_process_snapshot *snap, const hw_python_layout *L,
                                           const unsigned char *tstate)
{
    uint64_t native = hw_py_has(L->tstate_native_thread_id) ? hw_py_u64(tstate, L->tstate_native_thread_id) : 0;
    uint64_t pthread = hw_py_u64(tstate, L->tstate_thread_id);
    for (size_t i = 0; i < snap->thread_count; i++) {
        hw_thread_snapshot *t = &snap->threads[i];
        if (t->status != HW_THREAD_CAPTURED)
            continue;
        /* The tid Python recorded is the one of its own pid namespace (a
         * container's): it matches only outside one; the fs base always. */
        if ((native != 0 && (uint64_t)t->tid == native) || (pthread != 0 && t->regs.fs_base == pthread))
            return t;
    }
    return NULL;
}

/* Frame records of a thread's ordinary calls lie together in its data
 * stack (3.11+), each caller below its callee: one read of the
 * WINDOW_BYTES that end at a frame usually holds its callers too, so a deep
 * chain costs a few system calls rather than one per frame (the stop lasts
 * that much less).  A window that cannot be read (it reaches below the
 * mapping) falls back to the frame alone. */
#define WINDOW_BYTES 8192u

typedef struct frame_window {
    unsigned char bytes[WINDOW_BYTES];
    uint64_t start, len;
} frame_window;

static const unsigned char *frame_at(pid_t pid, frame_window *w, uint64_t frame, uint32_t size)
{
    if (frame >= w->start && frame - w->start <= w->len && w->len - (frame - w->start) >= size)
        return w->bytes + (frame - w->start);
    uint64_t end = frame + size;
    if (end < frame)
        return NULL;
    uint64_t start = end > WINDOW_BYTES ? end - WINDOW_BYTES : 0;
    if (start == 0 || !hw_py_peek(pid, start, w->bytes, (size_t)(end - start))) {
        start = frame;
        if (!hw_py_peek(pid, start, w->bytes, size)) {
            w->len = 0;
            return NULL;
        }
    }
    w->start = start;
    w->len = end - start;
    return w->bytes + (frame - w->start);
}

/* The frame record at `frame`, read whole (frame objects are the heap's:
 * no window). */
static const unsigned char *record_at(const hw_python_target *py, pid_t pid, frame_window *w, uint64_t frame)
{
    const hw_python_layout *L = &py->layout;
    if ((frame & 7) != 0)
        return NULL;
    if (L->frames == HW_PY_INTERPRETER_FRAMES)
        return frame_at(pid, w, frame, L->frame_size);
    w->start = frame;
    w->len = L->frame_size;
    if (!hw_py_peek(pid, frame, w->bytes, L->frame_size) || hw_py_u64(w->bytes, L->object_type) != py->frame_type)
        return NULL;
    return w->bytes;
}

/* Record one frame of `buf`; false when the walk must stop (no room). */
static bool add_frame(const hw_python_layout *L, hw_interp_stack *st, uint64_t frame, const unsigned char *buf)
{
    if (st->count == st->capacity) {
        st->truncated = true;
        return false;
    }
    hw_interp_frame *f = &st->frames[st->count++];
    f->frame_addr = frame;
    f->code_addr = hw_py_u64(buf, L->frame_code);
    if (L->frames == HW_PY_FRAME_OBJECTS) {
        int32_t lasti;
        memcpy(&lasti, buf + L->frame_instr, sizeof lasti);
        f->instr_addr = (uint64_t)(int64_t)lasti;
        f->is_entry = true; /* one C-level evaluation per frame */
        f->owner = 0;
    } else {
        f->instr_addr = hw_py_u64(buf, L->frame_instr);
        f->is_entry = hw_py_has(L->frame_is_entry) && buf[L->frame_is_entry] != 0;
        f->owner = buf[L->frame_owner];
    }
    return true;
}

static void walk_frames(const hw_python_target *py, pid_t pid, hw_thread_snapshot *t, uint64_t frame)
{
    const hw_python_layout *L = &py->layout;
    hw_interp_stack *st = &t->interp;
    frame_window w;
    w.start = w.len = 0;
    /* Shim frames take no room: a chain of them that loops must still end.
     * Each evaluation call has one shim and at least one frame of its own. */
    for (unsigned steps = 0; frame != 0; steps++) {
        if (steps > 2 * st->capacity + 1) {
            st->truncated = true;
            st->error = "the frame chain loops";
            return;
        }
        const unsigned char *buf = record_at(py, pid, &w, frame);
        if (buf == NULL) {
            st->error = "a frame record could not be read (the chain is broken)";
            return;
        }
        uint64_t previous = hw_py_u64(buf, L->frame_previous);
        if (hw_py_has(L->frame_owned_by_cstack) && buf[L->frame_owner] == L->frame_owned_by_cstack) {
            /* The shim a C-level evaluation starts with: the frame above
             * it is that evaluation's outermost. */
            if (st->count > 0)
                st->frames[st->count - 1].is_entry = true;
        } else if (!add_frame(L, st, frame, buf)) {
            return;
        }
        frame = previous;
    }
}

/* The innermost frame of thread state `tstate` (0: none). */
static uint64_t current_frame(const hw_python_layout *L, pid_t pid, const unsigned char *tstate, const char **error)
{
    if (hw_py_has(L->tstate_frame))
        return hw_py_u64(tstate, L->tstate_frame);
    uint64_t cframe = hw_py_u64(tstate, L->tstate_cframe), frame = 0;
    if (cframe != 0 && !hw_py_peek(pid, cframe + L->cframe_current_frame, &frame, sizeof frame))
        *error = "the thread's current frame could not be read";
    return frame;
}

/* How many bytes of a thread state are read: up to its last field used. */
static uint32_t tstate_bytes(const hw_python_layout *L)
{
    const uint32_t fields[] = {L->tstate_next, L->tstate_thread_id, L->tstate_native_thread_id, L->tstate_frame,
                               L->tstate_cframe};
    uint32_t len = 0;
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (hw_py_has(fields[i]) && fields[i] > len)
            len = fields[i];
    return len + 8;
}

/* The thread state that holds the GIL of interpreter `interp` (or the
 * runtime's, before 3.12), or 0 when it is not held. */
static uint64_t gil_holder(const hw_python_target *py, pid_t pid, uint64_t interp)
{
    const hw_python_layout *L = &py->layout;
    uint64_t gil = 0;
    if (hw_py_has(L->runtime_gil))
        gil = py->runtime_addr + L->runtime_gil;
    else if (!hw_py_has(L->interp_gil_ptr) || !hw_py_peek(pid, interp + L->interp_gil_ptr, &gil, sizeof gil))
        return 0;
    int32_t locked = 0;
    uint64_t holder = 0;
    if (gil == 0 || !hw_py_peek(pid, gil + L->gil_locked, &locked, sizeof locked) || locked == 0 ||
        !hw_py_peek(pid, gil + L->gil_last_holder, &holder, sizeof holder))
        return 0;
    return holder;
}

void hw_python_read_stacks(void *ctx, hw_process_snapshot *snap)
{
    const hw_python_target *py = ctx;
    if (py == NULL || !py->readable || snap == NULL)
        return;
    const hw_python_layout *L = &py->layout;
    uint32_t tstate_len = tstate_bytes(L);
    if (tstate_len > MAX_STRUCT_READ || L->frame_size > MAX_STRUCT_READ)
        return;
    pid_t pid = snap->pid;
    uint64_t interp = 0;
    if (!hw_py_peek(pid, py->runtime_addr + L->runtime_interpreters_head, &interp, sizeof interp))
        return;
    /* Stop once every captured thread and the GIL's holder are found.  A
     * sample has one thread, and no use for the holder. */
    size_t wanted = 0;
    for (size_t i = 0; i < snap->thread_count; i++)
        wanted += snap->threads[i].status == HW_THREAD_CAPTURED && snap->threads[i].interp.frames != NULL;
    uint64_t holder = wanted > 1 ? gil_holder(py, pid, interp) : 0; /* the main interpreter's */
    unsigned seen = 0;
    unsigned char buf[MAX_STRUCT_READ];
    for (unsigned k = 0; interp != 0 && k < MAX_INTERPRETERS && (wanted > 0 || holder != 0); k++) {
        uint64_t tstate = 0, next_interp = 0;
        if (!hw_py_peek(pid, interp + L->interp_threads_head, &tstate, sizeof tstate) ||
            !hw_py_peek(pid, interp + L->interp_next, &next_interp, sizeof next_interp))
            return;
        for (; tstate != 0 && seen < MAX_THREAD_STATES && (wanted > 0 || holder != 0); seen++) {
            if ((tstate & 7) != 0 || !hw_py_peek(pid, tstate, buf, tstate_len))
                break;
            hw_thread_snapshot *t = thread_of_state(snap, L, buf);
            if (t != NULL && tstate == holder) {
                snap->interp_lock_holder = t->tid;
                holder = 0;
            }
            if (t != NULL && t->interp.frames != NULL && !t->interp.present) {
                t->interp.present = true;
                t->interp.state_addr = tstate;
                const char *error = NULL;
                uint64_t frame = current_frame(L, pid, buf, &error);
                t->interp.error = error;
                walk_frames(py, pid, t, frame);
                wanted--;
            }
            tstate = hw_py_u64(buf, L->tstate_next);
        }
        interp = next_interp;
    }
}
