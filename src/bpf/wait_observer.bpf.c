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
 * first wait call; with watch --all, a chosen process not yet seen waiting
 * is there as a candidate, marked at its first wait call); `threads` maps
 * each watched thread to
 * its page and slot and keeps its wait-point rule state
 * (src/core/abi/wait_point.h, the preloaded observer's rule: what the call
 * waits on, its rank, its site and depth), which the agent primes for a
 * thread found blocked in its wait.  The object and rank come from the
 * call's arguments, the user stack pointer and the return site from the
 * thread's user registers at the system call's entry (the wait function's
 * caller for the uprobes, whose attach cookie says which function it is).
 * What the rule decides is published in the thread's slot (loop_wait_*).
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
    unsigned long di;
    unsigned long si;
    unsigned long dx;
    unsigned long cx;
    unsigned long r10;
    unsigned long ax;
    unsigned long sp;
    unsigned long ip;
} __attribute__((preserve_access_index));

/* The counters of a thread the stretch start keeps (CO-RE: the running
 * kernel's offsets; a field its BTF lacks is left at 0). */
struct sched_entity {
    unsigned long long sum_exec_runtime;
} __attribute__((preserve_access_index));

struct sched_info {
    unsigned long long run_delay;
} __attribute__((preserve_access_index));

struct task_struct {
    struct sched_entity se;
    struct sched_info sched_info;
    unsigned long nvcsw;
    unsigned long maj_flt;
    unsigned long long utime;
    unsigned long long stime;
} __attribute__((preserve_access_index));

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
    __uint(max_entries, HW_KOBS_MAX_PAGES + HW_KOBS_MAX_CANDIDATES);
    __type(key, __u32);
    __type(value, struct hw_kobs_process);
} processes SEC(".maps");

/* Each slot's counters at its stretch's start (wait_observer.h). */
struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(map_flags, BPF_F_MMAPABLE);
    __uint(max_entries, HW_KOBS_MAX_PAGES * HW_KOBS_SLOTS);
    __type(key, __u32);
    __type(value, struct hw_kobs_stretch_start);
} stretch_starts SEC(".maps");

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

/* --threads loops: a thread of a watched process that makes a wait call
 * gets the page's next free slot (the main thread has slot 0). */
static __always_inline struct hw_kobs_thread *adopt_thread(__u32 tid)
{
    __u32 tgid = (__u32)(bpf_get_current_pid_tgid() >> 32);
    struct hw_kobs_process *proc = bpf_map_lookup_elem(&processes, &tgid);
    if (!proc)
        return 0;
    if (proc->candidate) {
        /* watch --all: a thread of a chosen process waits; the agent,
         * told by this mark, watches it (machine_scan.c) */
        if (!proc->waited)
            *(volatile __u32 *)&proc->waited = 1;
        return 0;
    }
    if (!proc->loop_threads)
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

/* What the wait call `call` with these first four arguments waits on
 * (wait_point.h), into c's object and rank. */
static __always_inline void describe_call(hw_wait_call *c, __u32 call, __u64 a0, __u64 a1, __u64 a2, __u64 a3)
{
    c->call = call;
    switch (call) {
    case HW_WAIT_CALL_POLL:
    case HW_WAIT_CALL_PPOLL:
        c->object = a0;
        c->rank = hw_wait_rank_of_poll(a1);
        break;
    case HW_WAIT_CALL_SELECT:
    case HW_WAIT_CALL_PSELECT:
        c->object = hw_wait_select_object((__s64)(int)a0, a1, a2, a3);
        c->rank = hw_wait_rank_of_select(c->object);
        break;
    default: /* the epoll waits, io_uring_enter: a descriptor */
        c->object = (__u32)a0;
        c->rank = HW_WAIT_RANK_MANY;
        break;
    }
}

/* Publish what the rule now takes to be the loop's wait (loop_state.h). */
static __always_inline void publish_loop_wait(struct hw_kobs_slot *s, const hw_wait_point *wp)
{
    *(volatile __u64 *)&s->loop_wait_site = wp->loop_site;
    *(volatile __u64 *)&s->loop_wait_object = wp->loop_object;
    if (wp->learned == HW_WAIT_LEARNED_MOVED)
        *(volatile __u32 *)&s->loop_wait_moves = s->loop_wait_moves + 1;
    *(volatile __u32 *)&s->loop_wait_info =
        (wp->loop_call & 0xffu) | (wp->loop_rank & 0xffu) << 8 | (wp->learned & 0xffu) << 16;
}

/* The wait call `call` begins, with these arguments: `site` tells the call
 * apart (the system call's return address for the tracepoints and fentry,
 * the wait function's caller for the uprobes) and `sp` its depth.
 * `probe_regs` NULL: read them from the task (the tracepoints, fentry). */
static __always_inline int wait_begins(int waits, __u32 call, __u64 a0, __u64 a1, __u64 a2, __u64 a3,
                                       struct pt_regs *probe_regs)
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
    struct hw_kobs_slot *s = slot_of(t);
    if (!s)
        return 0;
    hw_wait_call c = {0};
    if (probe_regs) {
        c.sp = BPF_CORE_READ(probe_regs, sp);
        if (bpf_probe_read_user(&c.site, sizeof c.site, (const void *)c.sp) != 0)
            return 0;
    } else {
        struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
        c.sp = BPF_CORE_READ(regs, sp);
        c.site = BPF_CORE_READ(regs, ip);
    }
    describe_call(&c, call, a0, a1, a2, a3);
    __u64 seq = *(volatile __u64 *)&s->seq;
    if (!t->every_wait) {
        hw_wait_point *wp = &t->wait_point;
        __u64 site = wp->loop_site, object = wp->loop_object;
        __u32 learned = wp->learned;
        c.turn = seq;
        int loop = hw_wait_point_is_loop(wp, &c);
        if (wp->learned != learned || wp->loop_site != site || wp->loop_object != object)
            publish_loop_wait(s, wp);
        if (!loop) {
            *(volatile __u32 *)&s->nested_waits = s->nested_waits + 1;
            return 0;
        }
    }
    t->in_loop_wait = 1;
    *(volatile __u32 *)&s->activity = HW_KOBS_BEFORE_WAITING;
    if (seq & 1)
        *(volatile __u64 *)&s->seq = seq + 1;
    return 0;
}

/* The current thread's counters into its slot's stretch start, for the
 * stretch with odd sequence number `seq`, before the slot publishes it. */
static __always_inline void keep_stretch_start(const struct hw_kobs_thread *t, __u64 seq)
{
    __u32 index = t->page * HW_KOBS_SLOTS + t->slot;
    struct hw_kobs_stretch_start *start = bpf_map_lookup_elem(&stretch_starts, &index);
    if (!start)
        return;
    struct task_struct *task = (struct task_struct *)bpf_get_current_task();
    __u64 flags = 0;
    start->on_cpu_ns = BPF_CORE_READ(task, se.sum_exec_runtime);
    if (bpf_core_field_exists(task->sched_info)) {
        start->runqueue_ns = BPF_CORE_READ(task, sched_info.run_delay);
        flags |= HW_KOBS_STARTS_SCHEDSTAT;
    }
    start->voluntary_switches = BPF_CORE_READ(task, nvcsw);
    start->major_faults = BPF_CORE_READ(task, maj_flt);
    start->utime_ns = BPF_CORE_READ(task, utime);
    start->stime_ns = BPF_CORE_READ(task, stime);
    start->flags = flags;
    *(volatile __u64 *)&start->seq = seq;
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
        keep_stretch_start(t, seq + 1);
        *(volatile __u64 *)&s->busy_start_ns = bpf_ktime_get_ns();
        *(volatile __u64 *)&s->seq = seq + 1;
    }
    *(volatile __u32 *)&s->activity = HW_KOBS_AFTER_WAITING;
    return 0;
}

#define WAIT_CALL(name, call)                                                                                          \
    SEC("tracepoint/syscalls/sys_enter_" #name)                                                                        \
    int enter_##name(struct sys_enter_record *ctx)                                                                     \
    {                                                                                                                  \
        return wait_begins(1, call, ctx->args[0], ctx->args[1], ctx->args[2], ctx->args[3], 0);                        \
    }                                                                                                                  \
    SEC("tracepoint/syscalls/sys_exit_" #name)                                                                         \
    int exit_##name(struct sys_exit_record *ctx)                                                                       \
    {                                                                                                                  \
        return wait_ends(ctx->ret);                                                                                    \
    }

WAIT_CALL(epoll_wait, HW_WAIT_CALL_EPOLL_WAIT)
WAIT_CALL(epoll_pwait, HW_WAIT_CALL_EPOLL_PWAIT)
WAIT_CALL(epoll_pwait2, HW_WAIT_CALL_EPOLL_PWAIT2)
WAIT_CALL(poll, HW_WAIT_CALL_POLL)
WAIT_CALL(ppoll, HW_WAIT_CALL_PPOLL)
WAIT_CALL(select, HW_WAIT_CALL_SELECT)
WAIT_CALL(pselect6, HW_WAIT_CALL_PSELECT)

/* io_uring_enter(fd, to_submit, min_complete, flags, ...) waits only when
 * asked for completions. */
SEC("tracepoint/syscalls/sys_enter_io_uring_enter")
int enter_io_uring_enter(struct sys_enter_record *ctx)
{
    return wait_begins((ctx->args[3] & IORING_ENTER_GETEVENTS) && (unsigned int)ctx->args[2] > 0,
                       HW_WAIT_CALL_IO_URING, ctx->args[0], 0, 0, 0, 0);
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
#define WAIT_FUNCTION(name, call)                                                                                      \
    SEC("fentry/__x64_sys_" #name)                                                                                     \
    int fentry_##name(unsigned long long *args)                                                                        \
    {                                                                                                                  \
        struct pt_regs *regs = (struct pt_regs *)args[0];                                                              \
        return wait_begins(1, call, BPF_CORE_READ(regs, di), BPF_CORE_READ(regs, si), BPF_CORE_READ(regs, dx),         \
                           BPF_CORE_READ(regs, r10), 0);                                                               \
    }                                                                                                                  \
    SEC("fexit/__x64_sys_" #name)                                                                                      \
    int fexit_##name(unsigned long long *args)                                                                         \
    {                                                                                                                  \
        return wait_ends((long)args[1]);                                                                               \
    }

WAIT_FUNCTION(epoll_wait, HW_WAIT_CALL_EPOLL_WAIT)
WAIT_FUNCTION(epoll_pwait, HW_WAIT_CALL_EPOLL_PWAIT)
WAIT_FUNCTION(epoll_pwait2, HW_WAIT_CALL_EPOLL_PWAIT2)
WAIT_FUNCTION(poll, HW_WAIT_CALL_POLL)
WAIT_FUNCTION(ppoll, HW_WAIT_CALL_PPOLL)
WAIT_FUNCTION(select, HW_WAIT_CALL_SELECT)
WAIT_FUNCTION(pselect6, HW_WAIT_CALL_PSELECT)

/* io_uring_enter's min_complete is its third argument (rdx), its flags the
 * fourth (r10 in the system call convention). */
SEC("fentry/__x64_sys_io_uring_enter")
int fentry_io_uring_enter(unsigned long long *args)
{
    struct pt_regs *regs = (struct pt_regs *)args[0];
    unsigned long min_complete = BPF_CORE_READ(regs, dx), flags = BPF_CORE_READ(regs, r10);
    return wait_begins((flags & IORING_ENTER_GETEVENTS) && (unsigned int)min_complete > 0, HW_WAIT_CALL_IO_URING,
                       BPF_CORE_READ(regs, di), 0, 0, 0, 0);
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
 * function (glibc's epoll_wait, poll, ...; its attach cookie says which,
 * HW_WAIT_CALL_*), whose arguments are in the function call's registers,
 * and the instruction right after each of its system call instructions,
 * where the result is in rax.  A system call restarted in the kernel does
 * not come back to that instruction until it is done. */
SEC("uprobe")
int wait_function_entry(struct pt_regs *ctx)
{
    return wait_begins(1, (__u32)bpf_get_attach_cookie(ctx), BPF_CORE_READ(ctx, di), BPF_CORE_READ(ctx, si),
                       BPF_CORE_READ(ctx, dx), BPF_CORE_READ(ctx, cx), ctx);
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

/* watch --all: a process of the machine exec'd a program; the agent looks
 * whether to watch it (attached only then; one ring write per exec). */
SEC("tracepoint/sched/sched_process_exec")
int on_exec(void *ctx)
{
    (void)ctx;
    __u32 news = (__u32)(bpf_get_current_pid_tgid() >> 32) | HW_KOBS_EXEC_NEWS;
    bpf_ringbuf_output(&new_children, &news, sizeof news, 0);
    return 0;
}

char LICENSE[] SEC("license") = "GPL";
