/*
 * unwind.c - DWARF CFI unwinding of captured threads with elfutils libdwfl
 * (unwind.h), through the session of a symbolizer (symbolizer.c) that
 * names each frame found.
 *
 * Thread state: dwfl_attach_state can be called once per Dwfl, so the
 * symbolizer attaches itself with callbacks that serve "the thread being
 * unwound now": hw_unwind_thread points `current` at a captured thread and
 * calls dwfl_getthread_frames; next_thread/get_thread report only that tid,
 * set_initial_registers hands over its registers in DWARF order and
 * memory_read serves its stack copy, falling back to process_vm_readv of the
 * live process (which may fail, or see memory that has changed since), a
 * WINDOW_BYTES window at a time: a recursion deeper than the copy has its
 * outer frames read in few system calls.
 *
 * libdwfl 0.188 ends a walk "normally" when the return address cannot be
 * read; a memory_read failure in that last step is reported as an error.
 *
 * A walk ends normally when the CFI marks the return address undefined
 * (_start, clone3); anything else that stops it is reported in out->error
 * with the frames found so far.  A repeated (pc, sp) pair among the first
 * SEEN_SLOTS / 2 frames, a stack pointer that does not grow after them,
 * WALK_LIMIT frames or WALK_BUDGET_NS end a runaway walk.
 *
 * A stack deeper than max_frames keeps its innermost frames and its
 * OUTERMOST_KEPT outermost ones (main and the loop that called into the
 * deep recursion), and says how many lie between (out->skipped, at
 * out->skipped_at).
 */
#include "symbolizer_internal.h"

#include <elfutils/libdw.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/uio.h>
#include <time.h>

#if !defined(__x86_64__)
#error "unwind.c supports x86_64 only (initial register set in DWARF numbering)"
#endif

#define DEFAULT_MAX_FRAMES 256
#define WALK_LIMIT 1000000    /* frames walked at most, kept or skipped, for a report */
#define SAMPLE_WALK_LIMIT 1024 /* ... for a sample (hw_unwind_thread) */
#define WALK_BUDGET_NS 3000000000ull /* and time spent walking past the frames kept */
#define SEEN_SLOTS 2048       /* (pc, sp) pairs remembered: the first SEEN_SLOTS / 2 frames */
#define OUTERMOST_KEPT 32     /* of a stack cut short, its outermost frames kept */
#define WINDOW_BYTES (64u * 1024) /* the live stack beyond the copy, read this much at a time */
#define DWARF_REG_RSP 7
#define X86_64_DWARF_REGS 17  /* rax..r15 (0-15) and the return address column 16 = rip */

/* ---- the captured threads, as libdwfl sees them ------------------------ */

static pid_t next_thread(Dwfl *dwfl, void *arg, void **thread_argp)
{
    (void)dwfl;
    hw_symbolizer *sym = arg;
    if (*thread_argp != NULL || sym->current == NULL)
        return 0;
    *thread_argp = sym;
    return sym->current->tid;
}

static bool get_thread(Dwfl *dwfl, pid_t tid, void *arg, void **thread_argp)
{
    (void)dwfl;
    hw_symbolizer *sym = arg;
    if (sym->current == NULL || sym->current->tid != tid)
        return false;
    *thread_argp = sym;
    return true;
}

static bool memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *arg)
{
    (void)dwfl;
    hw_symbolizer *sym = arg;
    const hw_thread_snapshot *t = sym->current;
    if (t != NULL && t->stack != NULL && t->stack_len >= sizeof *result && addr >= t->stack_start &&
        addr - t->stack_start <= t->stack_len - sizeof *result) {
        memcpy(result, t->stack + (addr - t->stack_start), sizeof *result);
        return true;
    }
    /* Through the thread's own tid: the leader may be a zombie without an mm. */
    pid_t from = t != NULL ? t->tid : sym->pid;
    if (sym->window != NULL && sym->window_tid == from && addr >= sym->window_start &&
        addr - sym->window_start <= sym->window_len - sizeof *result && sym->window_len >= sizeof *result) {
        memcpy(result, sym->window + (addr - sym->window_start), sizeof *result);
        return true;
    }
    if (from > 0 && t != NULL && addr >= t->stack_start) {
        /* Above the copy (the stack's older part): a window from here up. */
        if (sym->window == NULL)
            sym->window = malloc(WINDOW_BYTES);
        uint64_t start = addr & ~(uint64_t)7;
        struct iovec local = {.iov_base = sym->window, .iov_len = WINDOW_BYTES};
        struct iovec remote = {.iov_base = (void *)(uintptr_t)start, .iov_len = WINDOW_BYTES};
        ssize_t got = sym->window ? process_vm_readv(from, &local, 1, &remote, 1, 0) : -1;
        if (got >= (ssize_t)(addr - start + sizeof *result)) {
            sym->window_start = start;
            sym->window_len = (size_t)got;
            sym->window_tid = from;
            memcpy(result, sym->window + (addr - start), sizeof *result);
            return true;
        }
    }
    if (from > 0) {
        struct iovec local = {.iov_base = result, .iov_len = sizeof *result};
        struct iovec remote = {.iov_base = (void *)(uintptr_t)addr, .iov_len = sizeof *result};
        if (process_vm_readv(from, &local, 1, &remote, 1, 0) == (ssize_t)sizeof *result)
            return true;
    }
    sym->read_failed = true;
    sym->read_fail_addr = addr;
    return false;
}

static bool set_initial_registers(Dwfl_Thread *thread, void *thread_arg)
{
    hw_symbolizer *sym = thread_arg;
    const struct user_regs_struct *r = &sym->current->regs;
    const Dwarf_Word regs[X86_64_DWARF_REGS] = {
        r->rax, r->rdx, r->rcx, r->rbx, r->rsi, r->rdi, r->rbp, r->rsp, r->r8,
        r->r9,  r->r10, r->r11, r->r12, r->r13, r->r14, r->r15, r->rip,
    };
    if (!dwfl_thread_state_registers(thread, 0, X86_64_DWARF_REGS, regs))
        return false;
    dwfl_thread_state_register_pc(thread, r->rip);
    return true;
}

static const Dwfl_Thread_Callbacks thread_callbacks = {
    .next_thread = next_thread,
    .get_thread = get_thread,
    .memory_read = memory_read,
    .set_initial_registers = set_initial_registers,
    .detach = NULL,
    .thread_detach = NULL,
};

void hw_unwind_attach(hw_symbolizer *sym, pid_t pid)
{
    sym->attached = dwfl_attach_state(sym->dwfl, NULL, pid, &thread_callbacks, sym);
    if (!sym->attached && asprintf(&sym->attach_error, "cannot unwind: %s", dwfl_errmsg(-1)) < 0)
        sym->attach_error = NULL;
}

/* ---- the walk ---------------------------------------------------------- */

typedef struct seen_pair {
    bool used;
    uint64_t pc, sp;
} seen_pair;

typedef struct walk {
    hw_symbolizer *sym;
    hw_backtrace *out;
    size_t max, cap;
    size_t inner;    /* frames kept from the innermost on, when the stack is cut */
    seen_pair *seen; /* SEEN_SLOTS entries */
    size_t walked;
    uint64_t last_sp;
    uint64_t started_ns;
    /* the last OUTERMOST_KEPT frames walked past `inner`, a ring */
    struct {
        uint64_t pc;
        bool activation;
    } tail[OUTERMOST_KEPT];
    size_t tail_count;
    bool whole; /* hw_unwind_thread_whole: walk it all, keep the outermost */
    bool nomem;
    char *error; /* set by the callback when it stops the walk */
} walk;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Record (pc, sp); true if it was there already. */
static bool seen_before(walk *w, uint64_t pc, uint64_t sp)
{
    size_t mask = SEEN_SLOTS - 1;
    for (size_t j = hw_hash_addr(pc ^ (sp * 0x9e3779b97f4a7c15ull)) & mask;; j = (j + 1) & mask) {
        if (!w->seen[j].used) {
            w->seen[j] = (seen_pair){.used = true, .pc = pc, .sp = sp};
            return false;
        }
        if (w->seen[j].pc == pc && w->seen[j].sp == sp)
            return true;
    }
}

static int frame_cb(Dwfl_Frame *state, void *arg)
{
    walk *w = arg;
    hw_backtrace *out = w->out;
    if (!w->whole && w->walked >= SAMPLE_WALK_LIMIT)
        return DWARF_CB_ABORT;
    /* Reset before dwfl_frame_pc, which may already unwind the next frame
     * (to tell whether this one is an activation). */
    w->sym->read_failed = false;
    Dwarf_Addr pc;
    bool activation = false;
    if (!dwfl_frame_pc(state, &pc, &activation)) {
        if (asprintf(&w->error, "no pc for frame %zu: %s", w->walked, dwfl_errmsg(-1)) < 0)
            w->error = NULL;
        return DWARF_CB_ABORT;
    }
    Dwarf_Word sp;
    if (dwfl_frame_reg(state, DWARF_REG_RSP, &sp) == 0) {
        /* A loop: a pair seen before among the first frames, later a stack
         * pointer that does not grow (callers lie above their callees). */
        bool looped = w->walked < SEEN_SLOTS / 2 ? seen_before(w, pc, sp) : sp <= w->last_sp;
        if (looped) {
            if (asprintf(&w->error, "unwind loop at pc 0x%" PRIx64 " sp 0x%" PRIx64, (uint64_t)pc, (uint64_t)sp) < 0)
                w->error = NULL;
            return DWARF_CB_ABORT;
        }
        w->last_sp = sp;
    }
    w->walked++;
    if (w->tail_count > 0 && (w->walked & 1023) == 0 && now_ns() - w->started_ns > WALK_BUDGET_NS) {
        if (asprintf(&w->error, "the walk took longer than %llu ms: stopped after %zu frames",
                     WALK_BUDGET_NS / 1000000, w->walked) < 0)
            w->error = NULL;
        return DWARF_CB_ABORT;
    }
    if (out->count >= w->inner && !w->whole) {
        out->skipped++; /* a sample's innermost frames are all it keeps */
        return DWARF_CB_OK;
    }
    if (out->count >= w->inner) {
        /* Past the innermost part: only the outermost frames are kept. */
        if (w->tail_count == 0)
            w->started_ns = now_ns(); /* the budget is for the frames not kept */
        w->tail[w->tail_count % OUTERMOST_KEPT].pc = pc;
        w->tail[w->tail_count % OUTERMOST_KEPT].activation = activation;
        w->tail_count++;
        return w->walked >= WALK_LIMIT ? DWARF_CB_ABORT : DWARF_CB_OK;
    }
    if (out->count == w->cap) {
        size_t ncap = w->cap ? w->cap * 2 : 32;
        if (ncap > w->max)
            ncap = w->max;
        hw_frame *frames = realloc(out->frames, ncap * sizeof *frames);
        if (frames == NULL) {
            w->nomem = true;
            return DWARF_CB_ABORT;
        }
        out->frames = frames;
        w->cap = ncap;
    }
    if (!hw_symbolizer_fill_frame(w->sym, &out->frames[out->count++], pc, activation)) {
        w->nomem = true;
        return DWARF_CB_ABORT;
    }
    (void)dwfl_errno(); /* errors from the lookups are not the walk's */
    return w->walked >= WALK_LIMIT ? DWARF_CB_ABORT : DWARF_CB_OK;
}

static char *walk_error(hw_symbolizer *sym)
{
    char *msg = NULL;
    int e = dwfl_errno();
    int r;
    if (e != 0)
        r = asprintf(&msg, "%s", dwfl_errmsg(e));
    else if (sym->read_failed)
        r = asprintf(&msg, "cannot read memory at 0x%" PRIx64, sym->read_fail_addr);
    else
        r = asprintf(&msg, "unwinding stopped");
    return r < 0 ? NULL : msg;
}

static int unwind(hw_symbolizer *sym, const hw_thread_snapshot *thread, size_t max_frames, bool whole,
                  hw_backtrace *out)
{
    if (out == NULL)
        return -EINVAL;
    memset(out, 0, sizeof *out);
    if (sym == NULL || thread == NULL)
        return -EINVAL;
    if (thread->status != HW_THREAD_CAPTURED) {
        if (asprintf(&out->error, "thread not captured (%s)", hw_thread_status_name(thread->status)) < 0)
            return -ENOMEM;
        return 0;
    }
    if (max_frames == 0)
        max_frames = DEFAULT_MAX_FRAMES;
    if (max_frames > WALK_LIMIT)
        max_frames = WALK_LIMIT;

    if (!sym->attached) {
        /* No unwinder: at least the innermost frame. */
        out->frames = calloc(1, sizeof *out->frames);
        if (out->frames == NULL || !hw_symbolizer_fill_frame(sym, &out->frames[0], thread->regs.rip, true)) {
            hw_backtrace_free(out);
            return -ENOMEM;
        }
        out->count = 1;
        out->error = hw_dup_or_null(sym->attach_error != NULL ? sym->attach_error : "cannot unwind");
        return 0;
    }

    walk w = {.sym = sym, .out = out, .max = max_frames, .started_ns = now_ns(), .whole = whole};
    /* All of it when it fits; else the innermost and OUTERMOST_KEPT. */
    w.inner = whole && max_frames > 2 * OUTERMOST_KEPT ? max_frames - OUTERMOST_KEPT : max_frames;
    w.seen = calloc(SEEN_SLOTS, sizeof *w.seen);
    if (w.seen == NULL)
        return -ENOMEM;
    sym->current = thread;
    sym->read_failed = false;
    (void)dwfl_errno();
    int r = dwfl_getthread_frames(sym->dwfl, thread->tid, frame_cb, &w);
    char *error = w.error;
    if (r == -1 && error == NULL) {
        error = walk_error(sym);
    } else if (r == 0 && sym->read_failed) {
        /* libdwfl takes a return address it could not read for the end of
         * the stack; the outermost frames (_start, clone3) need no read. */
        if (asprintf(&error, "cannot read memory at 0x%" PRIx64 " (beyond the stack copy)", sym->read_fail_addr) < 0)
            error = NULL;
    }
    (void)dwfl_errno();
    sym->current = NULL;
    sym->window_len = 0; /* the next thread's window is its own */
    free(w.seen);
    /* The frames walked past the innermost part: all of them when they fit
     * in max_frames, else the outermost OUTERMOST_KEPT after a gap. */
    if (!w.nomem && w.tail_count > 0) {
        size_t room = max_frames - out->count;
        size_t keep = w.tail_count <= room ? w.tail_count : (room < OUTERMOST_KEPT ? room : OUTERMOST_KEPT);
        size_t first = w.tail_count - keep; /* index among the tail frames walked */
        hw_frame *frames = realloc(out->frames, (out->count + keep) * sizeof *frames);
        if (frames == NULL) {
            w.nomem = true;
        } else {
            out->frames = frames;
            if (first > 0) {
                out->skipped = first;
                out->skipped_at = out->count;
            }
            for (size_t i = first; i < w.tail_count && !w.nomem; i++) {
                size_t at = w.tail_count > OUTERMOST_KEPT ? i % OUTERMOST_KEPT : i;
                if (!hw_symbolizer_fill_frame(sym, &out->frames[out->count], w.tail[at].pc, w.tail[at].activation))
                    w.nomem = true;
                else
                    out->count++;
            }
        }
    }
    if (w.nomem) {
        free(error);
        hw_backtrace_free(out);
        return -ENOMEM;
    }
    out->error = error;
    return 0;
}

int hw_unwind_thread(hw_symbolizer *sym, const hw_thread_snapshot *thread, size_t max_frames, hw_backtrace *out)
{
    return unwind(sym, thread, max_frames, false, out);
}

int hw_unwind_thread_whole(hw_symbolizer *sym, const hw_thread_snapshot *thread, size_t max_frames,
                           hw_backtrace *out)
{
    return unwind(sym, thread, max_frames, true, out);
}
