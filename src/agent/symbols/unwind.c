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
 * live process (which may fail, or see memory that has changed since).
 *
 * libdwfl 0.188 ends a walk "normally" when the return address cannot be
 * read; a memory_read failure in that last step is reported as an error.
 *
 * A walk ends normally when the CFI marks the return address undefined
 * (_start, clone3); anything else that stops it is reported in out->error
 * with the frames found so far.  A repeated (pc, sp) pair or WALK_LIMIT
 * frames end a runaway walk.
 */
#include "symbolizer_internal.h"

#include <elfutils/libdw.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/uio.h>

#if !defined(__x86_64__)
#error "unwind.c supports x86_64 only (initial register set in DWARF numbering)"
#endif

#define DEFAULT_MAX_FRAMES 256
#define WALK_LIMIT 1024       /* frames walked at most, kept or skipped */
#define SEEN_SLOTS 2048       /* > WALK_LIMIT: the (pc, sp) set never fills */
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
    seen_pair *seen; /* SEEN_SLOTS entries */
    size_t walked;
    bool nomem;
    char *error; /* set by the callback when it stops the walk */
} walk;

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
    if (dwfl_frame_reg(state, DWARF_REG_RSP, &sp) == 0 && seen_before(w, pc, sp)) {
        if (asprintf(&w->error, "unwind loop at pc 0x%" PRIx64 " sp 0x%" PRIx64, (uint64_t)pc, (uint64_t)sp) < 0)
            w->error = NULL;
        return DWARF_CB_ABORT;
    }
    w->walked++;
    if (out->count >= w->max) {
        out->skipped++;
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

int hw_unwind_thread(hw_symbolizer *sym, const hw_thread_snapshot *thread, size_t max_frames, hw_backtrace *out)
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

    walk w = {.sym = sym, .out = out, .max = max_frames};
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
    free(w.seen);
    if (w.nomem) {
        free(error);
        hw_backtrace_free(out);
        return -ENOMEM;
    }
    out->error = error;
    return 0;
}
