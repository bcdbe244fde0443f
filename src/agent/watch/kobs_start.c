/*
 * kobs_start.c - how a thread starts out when the kernel observer begins
 * to watch it, made true whatever the thread did meanwhile (kobs_start.h).
 */
#include "kobs_start.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>

#include "agent/common/clock.h"

/* Stop `pid`'s main thread once, as a capture stops it, and let it go: its
 * registers into *regs.  A wait call it was blocked in is restarted by the
 * kernel (the capture's stop sees to epoll_wait's restart: decisions.md
 * §1).  True when it was stopped and let go. */
static bool stop_once(pid_t pid, struct user_regs_struct *regs)
{
    hw_capture_options o;
    hw_capture_options_default(&o, pid);
    o.all_threads = false;
    o.target_stack_bytes = o.other_stack_bytes = 0;
    hw_process_snapshot snap;
    bool stopped = hw_capture_process(pid, &o, &snap) == 0 && snap.thread_count == 1 &&
                   snap.threads[0].status == HW_THREAD_CAPTURED;
    if (stopped)
        *regs = snap.threads[0].regs;
    hw_process_snapshot_free(&snap);
    return stopped;
}

/* The system call the registers of a stopped thread show it in, as
 * /proc/PID/syscall would have said it (nr -1: none). */
static void call_from_registers(const struct user_regs_struct *r, long nr, hw_task_syscall_info *call)
{
    memset(call, 0, sizeof *call);
    call->blocked = true;
    call->nr = nr;
    const uint64_t args[6] = {r->rdi, r->rsi, r->rdx, r->r10, r->r8, r->r9};
    memcpy(call->args, args, sizeof args);
    call->sp = r->rsp;
    call->pc = r->rip;
}

/*
 * /proc/PID/syscall is mode 0400 and its user's: a watcher that is not root
 * but holds CAP_SYS_PTRACE (all it needs to capture) is refused it for
 * another user's process, and taking the thread for busy then made an idle
 * loop a hang.  The same facts are in the thread's registers, which ptrace
 * may read: a system call the stop interrupted shows as its number in
 * orig_rax with EINTR or a restart code in rax.
 */
bool hw_kobs_is_waiting_now(pid_t pid, hw_task_syscall_info *call)
{
    int rc = hw_task_syscall_read(pid, pid, call);
    if (rc == 0)
        return hw_is_wait_syscall(call->nr);
    struct user_regs_struct r;
    if ((rc != -EACCES && rc != -EPERM) || !stop_once(pid, &r))
        return false;
    call_from_registers(&r, hw_syscall_interrupted(&r), call);
    return hw_is_wait_syscall(call->nr);
}

void hw_kobs_prime_loop_wait(struct hw_kobs_thread *t, hw_loop_slot *slot, const hw_task_syscall_info *call)
{
    uint64_t object;
    uint32_t rank, kind;
    if (!hw_wait_syscall_describe(call, &object, &rank, &kind))
        return;
    hw_wait_point_prime(&t->wait_point, object, rank, kind);
    atomic_store_explicit(&slot->loop_wait_object, object, memory_order_relaxed);
    atomic_store_explicit(&slot->loop_wait_info, hw_loop_wait_info(kind, rank, HW_WAIT_LEARNED_PRIMED),
                          memory_order_release);
}

typedef struct settling {
    struct bpf_map *threads;
    pid_t pid;
    hw_loop_slot *slot;
    bool quiet;
} settling;

/* In the stop: the entry and the slot as the registers say, the way the
 * observer's programs would have set them (wait_observer.bpf.c's
 * wait_begins and wait_ends), none of which can run for the thread now. */
static void set_from_registers(void *ctx, hw_process_snapshot *snap)
{
    settling *s = ctx;
    if (snap->thread_count == 0 || snap->threads[0].tid != s->pid || snap->threads[0].status != HW_THREAD_CAPTURED)
        return;
    const struct user_regs_struct *r = &snap->threads[0].regs;
    long nr;
    bool waits_on = hw_syscall_resumes(r, &nr) && hw_is_wait_syscall(nr);
    __u32 tid = (__u32)s->pid;
    struct hw_kobs_thread t;
    if (bpf_map__lookup_elem(s->threads, &tid, sizeof tid, &t, sizeof t, 0) != 0)
        return;
    uint64_t seq = atomic_load_explicit(&s->slot->seq, memory_order_acquire);
    if (waits_on) {
        if (!t.in_loop_wait) {
            hw_task_syscall_info call;
            call_from_registers(r, nr, &call);
            hw_kobs_prime_loop_wait(&t, s->slot, &call);
            t.in_loop_wait = 1;
        }
        atomic_store_explicit(&s->slot->activity, HW_ACTIVITY_BEFORE_WAITING, memory_order_relaxed);
        if (seq & 1)
            atomic_store_explicit(&s->slot->seq, seq + 1, memory_order_release);
    } else {
        /* Out of any wait when let go (a timed epoll wait the stop ended
         * returns EINTR): busy from now, unless it is not a loop yet. */
        t.in_loop_wait = 0;
        if (!(seq & 1) && !(s->quiet && seq == 0)) {
            atomic_store_explicit(&s->slot->busy_start_ns, hw_monotonic_ns(), memory_order_relaxed);
            atomic_store_explicit(&s->slot->activity, HW_ACTIVITY_AFTER_WAITING, memory_order_relaxed);
            atomic_store_explicit(&s->slot->seq, seq + 1, memory_order_release);
        }
    }
    (void)bpf_map__update_elem(s->threads, &tid, sizeof tid, &t, sizeof t, BPF_EXIST);
}

static bool same_call(const hw_task_syscall_info *a, const hw_task_syscall_info *b)
{
    return a->nr == b->nr && a->sp == b->sp && a->pc == b->pc && memcmp(a->args, b->args, sizeof a->args) == 0;
}

bool hw_kobs_settle_start(struct bpf_map *threads, pid_t pid, hw_loop_slot *slot, bool found_waiting,
                          const hw_task_syscall_info *waiting, bool quiet, bool must_stop)
{
    hw_task_syscall_info again;
    if (!must_stop && hw_task_syscall_read(pid, pid, &again) == 0) {
        /* Where the first look found it: every change from here on is seen
         * (a wait that ended and began again in between ends seen too). */
        bool waiting_now = hw_is_wait_syscall(again.nr);
        if (found_waiting ? waiting_now && same_call(&again, waiting) : !waiting_now)
            return false;
    }
    hw_capture_options o;
    hw_capture_options_default(&o, pid);
    o.all_threads = false;
    o.target_stack_bytes = o.other_stack_bytes = 0;
    settling s = {.threads = threads, .pid = pid, .slot = slot, .quiet = quiet};
    o.while_stopped = set_from_registers;
    o.while_stopped_ctx = &s;
    hw_process_snapshot snap;
    bool stopped = hw_capture_process(pid, &o, &snap) == 0 && snap.thread_count == 1 &&
                   snap.threads[0].status == HW_THREAD_CAPTURED;
    hw_process_snapshot_free(&snap);
    return stopped;
}
