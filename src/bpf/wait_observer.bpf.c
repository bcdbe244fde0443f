/*
 * wait_observer.bpf.c - the kernel-side loop observer: the same loop state
 * the preloaded observer keeps (src/core/abi/loop_state.h), kept by the kernel
 * at the entry and exit of the wait system calls, for programs the preload
 * cannot see into (already running, statically linked, waiting through raw
 * system calls or io_uring).  Loaded by src/agent/watch/kernel_observer.c.
 *
 * Attach points, one set loaded (kernel_observer.c turns the others'
 * autoload off, so a kernel without BPF tracing programs still loads this
 * object):
 *  - fentry/fexit on the wait system calls' kernel functions
 *    (__x64_sys_epoll_wait, ...): only callers of those functions run the
 *    trampoline and one hash lookup of their thread id;
 *  - the per-system-call tracepoints of the same calls
 *    (syscalls:sys_enter_epoll_wait, ...): the same lookup, but enabling
 *    any system-call tracepoint makes every system call of the machine take
 *    the kernel's slow path (docs/benchmarks.md part 8);
 *  - with --attach uprobe, probes in the watched process's own wait
 *    functions: nothing for anyone else.
 *
 * State: `pages` holds one 4 KiB page per watched process in the layout of
 * hw_shared_page, memory-mapped by the agent, which reads it exactly as it
 * reads a preloaded observer's page; `processes` says which processes are
 * watched (with --threads loops, each of their threads gets a slot at its
 * first wait call); `threads` maps each watched thread to
 * its page and slot and keeps its wait-point rule state
 * (src/core/abi/wait_point.h: the shallowest repeated (return site, stack
 * pointer) is the loop's own wait; a deeper wait is work).  The user stack
 * pointer and the return site are the thread's user registers at the
 * system call's entry.
 *
 * Writes follow loop_state.h's protocol: the busy start is stored before
 * the odd sequence number; both are volatile stores, which the compiler
 * keeps in order, and x86-64 keeps stores in order.
 *
 * Children: with --follow, sched:sched_process_fork tells the agent each
 * new process of a watched one through a ring buffer (a hash lookup on
 * every fork of the machine).
 *
 * Restarts: a wait interrupted by a stop (a capture's PTRACE_INTERRUPT, a
 * signal with SA_RESTART) exits with an internal restart code and is
 * entered again, or continued as restart_syscall: such an exit is not an
 * end of waiting, and restart_syscall's exit is watched too.
 */
#include <linux/bpf.h>
#include <linux/types.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#include "wait_observer.h"

/* The user registers at system call entry (CO-RE: offsets from the
 * running kernel's BTF). */
struct pt_regs {
    unsigned long ax;
    unsigned long dx;
    unsigned long r10;
    unsigned long sp;
    unsigned long ip;
} __attribute__((preserve_access_index));

struct task_struct;

/* The per-system-call tracepoints' records (tracefs format files). */
struct sys_enter_record {
    unsigned long long common;
    long nr;
    unsigned long args[6];
};

struct sys_exit_record {
    unsigned long long common;
    long nr;
    long ret;
};

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(map_flags, BPF_F_MMAPABLE);
    __uint(max_entries, HW_KOBS_MAX_PAGES);
    __type(key, __u32);
    __type(value, struct hw_kobs_page);
} pages SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, HW_KOBS_MAX_THREADS);
    __type(key, __u32);
    __type(value, struct hw_kobs_thread);
} threads SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, HW_KOBS_MAX_PAGES);
    __type(key, __u32);
    __type(value, struct hw_kobs_process);
} processes SEC(".maps");

/* New processes of watched ones (--follow), for the agent to watch. */
struct {
    __uint(type, BPF_MAP_TYPE_RINGBUF);
    __uint(max_entries, HW_KOBS_EVENTS_BYTES);
} new_children SEC(".maps");

/* sched:sched_process_fork's record; the field's offset comes from the
 * running kernel's BTF (it moved when the names became __data_loc). */
struct trace_event_raw_sched_process_fork {
    int child_pid;
} __attribute__((preserve_access_index));

#define ERESTARTSYS 512
#define ERESTART_RESTARTBLOCK 516
#define IORING_ENTER_GETEVENTS 1u

static __always_inline struct hw_kobs_slot *slot_of(const struct hw_kobs_thread *t)
{
    __u32 page = t->page, slot = t->slot;
    struct hw_kobs_page *p = bpf_map_lookup_elem(&pages, &page);
    if (!p || slot >= HW_KOBS_SLOTS - 1)
        return 0;
    return &p->slots[slot];
}

/* wait_point.h's rule, on the kernel's copy of the thread's state. */
static __always_inline int is_loop_wait(struct hw_kobs_thread *t, __u64 site, __u64 sp)
{
    if (t->every_wait)
        return 1;
    if (sp == t->loop_sp && site == t->loop_site)
        return 1;
    if (sp < t->loop_sp)
        return 0;
    for (int i = 0; i < HW_KOBS_WAIT_CANDIDATES; i++) {
        if (t->seen_site[i] == site && t->seen_sp[i] == sp) {
            t->loop_sp = sp;
            t->loop_site = site;
            return 1;
        }
    }
    __u32 k = t->next_seen % HW_KOBS_WAIT_CANDIDATES;
    if (k < HW_KOBS_WAIT_CANDIDATES) {
        t->seen_site[k] = site;
        t->seen_sp[k] = sp;
    }
    t->next_seen++;
    return 1;
}

/* --threads loops: a thread of a watched process that makes a wait call
 * gets the page's next free slot (the main thread has slot 0). */
static __always_inline struct hw_kobs_thread *adopt_thread(__u32 tid)
{
    __u32 tgid = (__u32)(bpf_get_current_pid_tgid() >> 32);
    struct hw_kobs_process *proc = bpf_map_lookup_elem(&processes, &tgid);
    if (!proc || !proc->loop_threads)
        return 0;
    __u32 page = proc->page;
    struct hw_kobs_page *p = bpf_map_lookup_elem(&pages, &page);
    if (!p)
        return 0;
    __u32 slot = __sync_fetch_and_add(&p->next_slot, 1);
    if (slot == 0 || slot >= HW_KOBS_SLOTS - 1)
        return 0; /* full: not watched */
    struct hw_kobs_thread t = {.page = page, .slot = slot, .every_wait = proc->every_wait};
    if (bpf_map_update_elem(&threads, &tid, &t, BPF_NOEXIST) != 0)
        return 0;
    *(volatile int *)&p->slots[slot].tid = (int)tid;
    return bpf_map_lookup_elem(&threads, &tid);
}

/* A wait call begins at (site, sp): `site` tells the call apart (the
 * system call's return address for the tracepoints, the wait function's
 * caller for the uprobes) and `sp` its depth.  `regs` NULL: read them from
 * the task (the tracepoints). */
static __always_inline int wait_begins(int waits, struct pt_regs *probe_regs)
{
    if (!waits)
        return 0;
    __u32 tid = (__u32)bpf_get_current_pid_tgid();
    struct hw_kobs_thread *t = bpf_map_lookup_elem(&threads, &tid);
    if (!t)
        t = adopt_thread(tid);
    if (!t)
        return 0;
    if (t->in_loop_wait)
        return 0; /* a restarted wait, or the same wait through a second wrapper */
    __u64 sp, site;
    if (probe_regs) {
        sp = BPF_CORE_READ(probe_regs, sp);
        if (bpf_probe_read_user(&site, sizeof site, (const void *)sp) != 0)
            return 0;
    } else {
        struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
        sp = BPF_CORE_READ(regs, sp);
        site = BPF_CORE_READ(regs, ip);
    }
    if (!is_loop_wait(t, site, sp))
        return 0;
    t->in_loop_wait = 1;
    struct hw_kobs_slot *s = slot_of(t);
    if (!s)
        return 0;
    __u64 seq = *(volatile __u64 *)&s->seq;
    *(volatile __u32 *)&s->activity = HW_KOBS_BEFORE_WAITING;
    if (seq & 1)
        *(volatile __u64 *)&s->seq = seq + 1;
    return 0;
}

static __always_inline int wait_ends(long ret)
{
    __u32 tid = (__u32)bpf_get_current_pid_tgid();
    struct hw_kobs_thread *t = bpf_map_lookup_elem(&threads, &tid);
    if (!t || !t->in_loop_wait)
        return 0;
    if (ret <= -ERESTARTSYS && ret >= -ERESTART_RESTARTBLOCK)
        return 0; /* to be restarted: still waiting */
    t->in_loop_wait = 0;
    struct hw_kobs_slot *s = slot_of(t);
    if (!s)
        return 0;
    __u64 seq = *(volatile __u64 *)&s->seq;
    if (!(seq & 1)) {
        *(volatile __u64 *)&s->busy_start_ns = bpf_ktime_get_ns();
        *(volatile __u64 *)&s->seq = seq + 1;
    }
    *(volatile __u32 *)&s->activity = HW_KOBS_AFTER_WAITING;
    return 0;
}

#define WAIT_CALL(name)                                                                                                \
    SEC("tracepoint/syscalls/sys_enter_" #name)                                                                        \
    int enter_##name(struct sys_enter_record *ctx)                                                                     \
    {                                                                                                                  \
        (void)ctx;                                                                                                     \
        return wait_begins(1, 0);                                                                                      \
    }                                                                                                                  \
    SEC("tracepoint/syscalls/sys_exit_" #name)                                                                         \
    int exit_##name(struct sys_exit_record *ctx)                                                                       \
    {                                                                                                                  \
        return wait_ends(ctx->ret);                                                                                    \
    }

WAIT_CALL(epoll_wait)
WAIT_CALL(epoll_pwait)
WAIT_CALL(epoll_pwait2)
WAIT_CALL(poll)
WAIT_CALL(ppoll)
WAIT_CALL(select)
WAIT_CALL(pselect6)

/* io_uring_enter(fd, to_submit, min_complete, flags, ...) waits only when
 * asked for completions. */
SEC("tracepoint/syscalls/sys_enter_io_uring_enter")
int enter_io_uring_enter(struct sys_enter_record *ctx)
{
    return wait_begins((ctx->args[3] & IORING_ENTER_GETEVENTS) && (unsigned int)ctx->args[2] > 0, 0);
}

SEC("tracepoint/syscalls/sys_exit_io_uring_enter")
int exit_io_uring_enter(struct sys_exit_record *ctx)
{
    return wait_ends(ctx->ret);
}

/* A wait continued after a stop (poll's and select's timeouts) ends here. */
SEC("tracepoint/syscalls/sys_exit_restart_syscall")
int exit_restart_syscall(struct sys_exit_record *ctx)
{
    return wait_ends(ctx->ret);
}

/* fentry/fexit: the same two moments at the kernel functions behind the
 * system calls.  Their arguments come as an array: the first is the
 * caller's user registers (x86-64's system call wrappers take them), and
 * fexit's second the return value, restart codes included, as the exit
 * tracepoint sees it. */
#define WAIT_FUNCTION(name)                                                                                            \
    SEC("fentry/__x64_sys_" #name)                                                                                     \
    int fentry_##name(unsigned long long *args)                                                                        \
    {                                                                                                                  \
        (void)args;                                                                                                    \
        return wait_begins(1, 0);                                                                                      \
    }                                                                                                                  \
    SEC("fexit/__x64_sys_" #name)                                                                                      \
    int fexit_##name(unsigned long long *args)                                                                         \
    {                                                                                                                  \
        return wait_ends((long)args[1]);                                                                               \
    }

WAIT_FUNCTION(epoll_wait)
WAIT_FUNCTION(epoll_pwait)
WAIT_FUNCTION(epoll_pwait2)
WAIT_FUNCTION(poll)
WAIT_FUNCTION(ppoll)
WAIT_FUNCTION(select)
WAIT_FUNCTION(pselect6)

/* io_uring_enter's min_complete is its third argument (rdx), its flags the
 * fourth (r10 in the system call convention). */
SEC("fentry/__x64_sys_io_uring_enter")
int fentry_io_uring_enter(unsigned long long *args)
{
    struct pt_regs *regs = (struct pt_regs *)args[0];
    unsigned long min_complete = BPF_CORE_READ(regs, dx), flags = BPF_CORE_READ(regs, r10);
    return wait_begins((flags & IORING_ENTER_GETEVENTS) && (unsigned int)min_complete > 0, 0);
}

SEC("fexit/__x64_sys_io_uring_enter")
int fexit_io_uring_enter(unsigned long long *args)
{
    return wait_ends((long)args[1]);
}

SEC("fexit/__x64_sys_restart_syscall")
int fexit_restart_syscall(unsigned long long *args)
{
    return wait_ends((long)args[1]);
}

/* --attach uprobe: the same two moments, from probes in the watched
 * process alone (kernel_observer.c puts them there): the entry of a wait
 * function (glibc's epoll_wait, poll, ...), and the instruction right after
 * each of its system call instructions, where the result is in rax.  A
 * system call restarted in the kernel does not come back to that
 * instruction until it is done. */
SEC("uprobe")
int wait_function_entry(struct pt_regs *ctx)
{
    return wait_begins(1, ctx);
}

SEC("uprobe")
int wait_function_syscall_done(struct pt_regs *ctx)
{
    return wait_ends((long)BPF_CORE_READ(ctx, ax));
}

/* A watched process with --follow forked: tell the agent the child's id
 * (a new thread of it comes here too; the agent keeps only processes).
 * Runs in the parent, on every fork of the machine: one hash lookup. */
SEC("tracepoint/sched/sched_process_fork")
int on_fork(struct trace_event_raw_sched_process_fork *ctx)
{
    __u32 tgid = (__u32)(bpf_get_current_pid_tgid() >> 32);
    struct hw_kobs_process *proc = bpf_map_lookup_elem(&processes, &tgid);
    if (!proc || !proc->follow)
        return 0;
    __u32 child = (__u32)BPF_CORE_READ(ctx, child_pid);
    bpf_ringbuf_output(&new_children, &child, sizeof child, 0);
    return 0;
}

char LICENSE[] SEC("license") = "GPL";
