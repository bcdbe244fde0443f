/*
 * snapshot.h - stopping a process's threads from the outside, copying their
 * registers and stacks, and letting them go again.
 *
 * The agent never runs code inside the monitored process.  It uses ptrace
 * (PTRACE_SEIZE + PTRACE_INTERRUPT, PTRACE_GETREGS, process_vm_readv,
 * PTRACE_DETACH): the target thread is stopped for tens of microseconds and
 * then resumes exactly where it was; a blocking call it was in is restarted by
 * the kernel with its remaining time, unlike a signal handler, which makes
 * sleep(), poll() and friends return early.  Unwinding happens afterwards on
 * the copy (unwind.h), while the program runs on.
 *
 * Rules for the calling process (the agent), because ptrace reports through
 * wait() and SIGCHLD, which are process-wide:
 *  - While a capture runs, no other thread of the agent may wait for the
 *    monitored process's threads (waitpid(-1, ...) or waitpid(pid, ...)):
 *    such a wait can take a stop report meant for the capture (which then
 *    only learns of the stop at its timeout, through PTRACE_GETSIGINFO) and
 *    gets a ptrace status it did not ask for.  Reap children from the thread
 *    that captures, or serialise the two.
 *  - Keep SIGCHLD blocked in the agent's other threads (the capture blocks it
 *    in the calling thread itself), so the stop notifications reach the
 *    capture.  If they do not, the capture still works, only each stop is
 *    noticed up to a few milliseconds late.
 *  - A SIGCHLD the capture consumed is raised again for the process
 *    afterwards, so a handler may see one spurious SIGCHLD per capture;
 *    handlers must loop on waitpid(..., WNOHANG) anyway.
 *  - The capture runs its ptrace session in a short-lived helper thread, so a
 *    thread that never stopped is detached by the kernel when that helper
 *    ends (see snapshot.c).
 */
#ifndef HANGWATCH_SNAPSHOT_H
#define HANGWATCH_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

#include "container_of.h"
#include "proc_task.h"

typedef enum hw_thread_status {
    HW_THREAD_CAPTURED = 0, /* registers and stack copied */
    HW_THREAD_EXITED,       /* the thread ended before or during the capture */
    HW_THREAD_TIMEOUT,      /* it did not stop in time (e.g. uninterruptible sleep) */
    HW_THREAD_DENIED,       /* ptrace refused (another tracer, permissions, seccomp) */
} hw_thread_status;

const char *hw_thread_status_name(hw_thread_status status);


/* One frame of a runtime (CPython's, V8's), as read while the thread was
 * stopped: only the parts that change as it runs (python_frames.h and
 * js_frames.h name the code after the resume). */
typedef struct hw_interp_frame {
    uint64_t frame_addr; /* the interpreter's frame record (V8: the frame pointer) */
    uint64_t code_addr;  /* its code object (V8: the SharedFunctionInfo) */
    uint64_t instr_addr; /* the instruction it is at: an address, or an offset into its code
                            (an older interpreter's, -1 before the first; V8: the bytecode
                            offset of an interpreted frame, else UINT64_MAX) */
    uint64_t pc;         /* V8: the code address the frame runs at (0 for Python) */
    uint64_t aux;        /* V8: an interpreted frame's bytecode array (0 for Python) */
    uint64_t receiver_class; /* V8: the SharedFunctionInfo of the receiver's constructor, when the
                                frame is a method call on an object ("Type.method"), else 0 */
    bool is_entry;       /* the outermost frame of one native evaluation call */
    uint8_t owner;       /* who owns the frame record (a thread's stack, a generator...) */
} hw_interp_frame;

/* A thread's interpreter frames, innermost first. */
typedef struct hw_interp_stack {
    hw_interp_frame *frames; /* room for `capacity` frames, allocated before the stop */
    unsigned capacity, count;
    bool present;            /* the thread has an interpreter thread state */
    uint64_t state_addr;     /* ... at this address */
    bool truncated;          /* more frames than room */
    const char *error;       /* static text: why the walk stopped early, else NULL */
} hw_interp_stack;

typedef struct hw_thread_snapshot {
    pid_t tid;
    char name[16];          /* /proc/PID/task/TID/comm */
    bool is_main;           /* tid == pid */
    bool is_target;         /* the loop thread the capture is about */
    hw_thread_status status;
    int error;              /* errno behind DENIED / TIMEOUT, else 0 */
    char state_at_timeout;  /* TIMEOUT: its state letter when the wait for its stop gave up (R: it waited
                               for a CPU all along; D: in uninterruptible sleep), 0 if unread */
    unsigned timeout_ms;    /* TIMEOUT: how long the stop was waited for */
    struct user_regs_struct regs;
    uint64_t stack_start;   /* address that stack[0] was copied from (rsp - 128: red zone) */
    size_t stack_len;       /* bytes copied */
    unsigned char *stack;   /* malloc'd copy, or NULL */
    uint64_t stopped_ns;    /* how long this thread was held stopped (interrupt to resume) */
    bool group_stopped;     /* it was in a job-control stop (SIGSTOP...) and was left in it */
    int injected_signal;    /* a signal caught in delivery and handed back at resume, else 0 */
    hw_interp_stack interp; /* filled by the capture's while_stopped reader, if any */
} hw_thread_snapshot;

/* Why a thread of status TIMEOUT was not stopped, in words ("not stopped
 * within 500 ms: it was waiting for a CPU (state R)"), into buf. */
const char *hw_thread_timeout_reason(const hw_thread_snapshot *t, char *buf, size_t len);

typedef struct hw_process_snapshot hw_process_snapshot;

struct hw_process_snapshot {
    pid_t pid;
    pid_t namespace_pid;    /* its pid in its own pid namespace (a container's), 0 if the same */
    hw_container container; /* its container, pod or unit (container_of.h): the report worker's to fill */
    bool retried_after_timeout; /* the caller's: this is a second try, the loop thread having not
                                   stopped in the first for want of a CPU */
    bool target_boosted;    /* the target waited for a CPU to stop on and was lent one (hw_rt_lend) */
    char process_name[16];  /* comm of the main thread */
    hw_thread_snapshot *threads;
    size_t thread_count;
    size_t enumerated_thread_count; /* threads found in /proc/PID/task */
    size_t threads_left_out; /* of those, not captured: more than max_threads */
    char *maps;             /* /proc/PID/maps text read right after the resume (NULL if gone) */
    size_t maps_len;
    bool maps_cut;          /* ... only its first maps_max bytes (whole lines): more is left */
    uint64_t stop_wall_ns;  /* first stop to last resume */
    uint64_t stopping_ns;   /* first stop asked to the last thread stopped (or given up on): on a busy
                               machine, mostly the threads' waits for a CPU to stop on */
    bool process_exited;    /* the process ended (before or during the capture) */
    int exit_status;        /* its wait status when process_exited, -1 if unknown */
    bool reaped;            /* we were its parent and consumed that status: do not wait again */
    pid_t tracer_pid;       /* another tracer (strace, gdb) held a thread we could not attach, else 0 */
    char tracer_name[16];   /* that tracer's comm, "" if unknown */
    bool owner_known;       /* owner_uid was read (the process existed when the capture began) */
    uid_t owner_uid;        /* the process's user, for files it owns that are read after it is gone */
    /* The thread that held the interpreter's lock (CPython's GIL) while the
     * threads were stopped, as the while_stopped reader found it; 0 when
     * nobody held it, or it is not known. */
    pid_t interp_lock_holder;
};

#define HW_CAPTURE_MAX_THREADS 256 /* the default bound on the threads one capture takes */
#define HW_CAPTURE_KEEP_MAX 64      /* threads named to be taken before the others */

typedef struct hw_capture_options {
    pid_t target_tid;          /* the hung thread (gets the larger stack copy) */
    bool all_threads;          /* stop every thread together, else only target */
    size_t target_stack_bytes; /* bytes to copy from the target's stack pointer */
    size_t other_stack_bytes;  /* bytes to copy for every other thread */
    int stop_timeout_ms;       /* give up on a thread that does not stop (<= 0: 500) */
    /* all_threads: once the target has stopped (or been given up on), the
     * time the others have left to stop (<= 0: stop_timeout_ms), since
     * those stopped wait for them: a thread that waits for a CPU on a busy
     * machine, or sleeps uninterruptibly, held the hung one stopped up to
     * stop_timeout_ms for a stack that is only context.  Default 100. */
    int context_grace_ms;
    /* all_threads with more threads than this (0: no bound): the target, the
     * main thread and keep_tids (the loop threads) are captured first, then
     * the lowest thread ids (the oldest threads) up to the bound; the rest
     * are counted in threads_left_out.  What a capture holds and how long
     * it stops the process grow with its thread count. */
    size_t max_threads;
    pid_t keep_tids[HW_CAPTURE_KEEP_MAX];
    size_t keep_count;
    /* Reading an interpreter's frames (python_frames.h): room for this many
     * frames per thread is allocated before the stop (0: none), and
     * while_stopped (NULL: none) is called in the ptrace session once every
     * thread's registers and stack are copied, before any is resumed. */
    unsigned interp_frames;
    void (*while_stopped)(void *ctx, hw_process_snapshot *snap);
    void *while_stopped_ctx;
    /* overdue (NULL: none) is called once, on the session's thread while
     * the capturing thread waits for it, if a thread has still not stopped
     * overdue_ms after the first interrupt (a thread that waits for a CPU
     * on a busy machine, or sleeps uninterruptibly): what the caller must
     * say at once need not wait up to stop_timeout_ms for it.  The
     * snapshot's threads are not filled yet; its pid, process_name and
     * namespace_pid are. */
    unsigned overdue_ms;
    void (*overdue)(void *ctx);
    void *overdue_ctx;
    /* The memory map: not read at all (maps_later), or read up to maps_max
     * bytes (0: HW_PROC_READ_MAX) and the rest left for hw_capture_read_maps,
     * off the capturing thread: a process can make it megabytes long
     * (65,530 mappings: 6 MiB, 40-50 ms to read). */
    bool maps_later;
    size_t maps_max;
    /* The CPU the hung thread was last seen on (-1: not known): the
     * session's helper runs on another where it may (cpu_avoid.h). */
    int avoid_cpu;
} hw_capture_options;

void hw_capture_options_default(hw_capture_options *opts, pid_t target_tid);

/*
 * Capture `pid` as `opts` says (NULL: the defaults, target = main thread).
 * Always fills `out` (statuses say what could not be captured; free it with
 * hw_process_snapshot_free even on failure).  Returns 0, or -errno if nothing
 * could be done at all (-ESRCH: no such process, -EINVAL, -ENOMEM, -EAGAIN).
 * If the process has exited (a zombie) or exits during the capture and we are
 * its parent, its wait status is consumed here: out->process_exited,
 * out->reaped and out->exit_status say so.  A process that is gone entirely
 * (-ESRCH) has out->process_exited set and no threads.  x86_64 only.
 */
int hw_capture_process(pid_t pid, const hw_capture_options *opts, hw_process_snapshot *out);

/* hw_capture_process in two halves, so that a thread can have several
 * processes' captures under way at once (each session runs on a helper
 * thread of its own).  hw_capture_start returns at once once the session
 * is handed over, with *flight set (0), or what hw_capture_process would
 * return on failure (*flight NULL; `out` filled as it says); each flight
 * is then given to hw_capture_finish exactly once, by the thread that
 * started it, which waits for its session and fills `out` (0).  SIGCHLD
 * stays blocked in that thread from the start to the finish, so flights
 * that overlap are finished in the reverse order of their starts. */
typedef struct hw_capture_flight hw_capture_flight;
int hw_capture_start(pid_t pid, const hw_capture_options *opts, hw_process_snapshot *out, hw_capture_flight **flight);
int hw_capture_finish(hw_capture_flight *flight);

void hw_process_snapshot_free(hw_process_snapshot *snap);

/* Whether every thread the snapshot lists had exited (true for none). */
bool hw_snapshot_every_thread_exited(const hw_process_snapshot *snap);

/* The process's memory map into snap->maps (a captured thread's when its
 * leader has none), at most `max` bytes (0: HW_PROC_READ_MAX), unless it
 * is there whole: what hw_capture_process does right after the resume,
 * and what reads the rest of a map it cut. */
void hw_capture_read_maps(hw_process_snapshot *snap, size_t max);

/*
 * Why threads of `snap` could not be captured, when another tracer held
 * them: "traced by pid 1234 (strace)" (the name escaped, text_escape.h)
 * written into `buf` (`len` > 0) and returned; NULL when no tracer was seen.
 */
const char *hw_capture_denied_reason(const hw_process_snapshot *snap, char *buf, size_t len);

#endif
