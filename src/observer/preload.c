/*
 * preload.c - the observer for unmodified programs, loaded with LD_PRELOAD
 * by `hangwatch run`.
 *
 * Most programs never call an observer, so the loop's wait call is made the
 * observer: we interpose the wait calls glibc exports (epoll_wait,
 * epoll_pwait, epoll_pwait2, poll, ppoll, select, pselect, the fortified
 * __poll_chk / __ppoll_chk, and sigsuspend for loops driven by signals).
 * On a watched thread (the main thread; every loop thread with
 * HANGWATCH_THREADS=loops), entering the loop's own wait is BEFORE_WAITING
 * and its return is AFTER_WAITING; a zero-timeout call is a return to the
 * wait point like any other, so a loop spinning on epoll_wait(..., 0) is
 * busy only between calls and never hung.  A wait nested in a callback is
 * work (wait_point.h).
 *
 * The hot path is a few plain stores plus one clock read: the time-stamp
 * counter when the agent says it is usable (docs/decisions.md §2), else the
 * vDSO's CLOCK_MONOTONIC_COARSE.  No locks, no allocation, and no system
 * call but the program's own wait, which the wrapper makes itself where
 * libc's wrapper is nothing but that system call (call_direct).  What it
 * reads is on as few pages as possible: one 128-byte block of its own, the
 * slot's page, its code; TLS only off the fast path.  All set-up
 * (memfd, mmap, telling the agent: page_client.c) happens once, in the
 * constructor, before main(), and again in a forked child, from an
 * async-signal-safe atfork handler.  If anything in the set-up fails, the
 * library stays inert: the program runs exactly as without it, apart from
 * one line on stderr saying it is not watched.  Registration never blocks
 * (page_client.c gives a full agent queue 200 ms at most).  Wait calls
 * libc makes internally (getaddrinfo, ...) use libc's private aliases and
 * are not seen.
 *
 * The main thread is marked busy from the constructor on: a program that
 * works longer than the threshold before it first waits has a launch hang.
 */
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "core/abi/registration.h"
#include "core/abi/shared_page.h"
#include "core/abi/wait_point.h"
#include "coarse_clock.h"
#include "page_client.h"
#include "core/abi/tsc_read.h"

#define HW_EXPORT __attribute__((visibility("default")))
/* A wait wrapper: exported, and aligned so that its code (under 1 KiB)
 * lies in one page: with page-table isolation every page the way back
 * from the wait touches costs a page walk (see `hot` below). */
#define HW_WRAPPER HW_EXPORT __attribute__((aligned(1024)))

/* The wrapped functions: their index in `hot.real` and in `hot.direct`. */
enum {
    F_EPOLL_WAIT,
    F_EPOLL_PWAIT,
    F_EPOLL_PWAIT2,
    F_POLL,
    F_PPOLL,
    F_SELECT,
    F_PSELECT,
    F_POLL_CHK,
    F_PPOLL_CHK,
    F_SIGSUSPEND,
    F_COUNT
};

/*
 * Everything a wrapper reads on its way in, in one 128-byte block (so on
 * one page).  Together with the slot's page and the wrapper's own code that
 * is all the hot path touches: with kernel page-table isolation and no PCID
 * every system call empties the TLB, and each page touched between two wait
 * calls costs a page walk (docs/benchmarks.md, part 1).
 */
static struct hot {
    /*
     * The fast path: the loop's own wait call of one watched thread (the
     * first to learn its wait point, normally the main thread), known by its
     * call site, the object it waits on (wait_point.h) and its stack
     * pointer.  No other thread can call from that stack pointer (it lies
     * on the owner's stack, in use), so a match needs no per-thread state:
     * TLS is read only off the fast path.  Written only by the owner,
     * cleared when it exits or in a forked child.
     */
    _Atomic uintptr_t loop_sp, loop_site;
    _Atomic uint64_t loop_object;
    _Atomic(hw_loop_slot *) loop_slot;
    /* glibc's __libc_single_threaded: while it says so, libc makes the
     * functions of `direct` as a plain system call, and so does the wrapper
     * (see call_direct below). */
    const volatile char *single_threaded;
    uint32_t direct; /* bit F_*: the next definition is libc's own, replaceable by its system call */
    bool tsc;        /* stamp with the time-stamp counter (the agent said so), else the coarse clock */
    void *real[F_COUNT]; /* the next definitions, resolved in the constructor, or lazily */
} hot __attribute__((aligned(128)));

_Static_assert(sizeof(struct hot) <= 128, "the hot block fits in 128 bytes, so never straddles a page");

static hw_shared_page *g_page;
static hw_publish_warning g_unsaid; /* a forked child's failure to register, said at its first loop wait */

/* The slot this thread publishes to; NULL on threads we do not watch.  Read
 * only off the fast path. */
static __thread hw_loop_slot *tls_slot __attribute__((tls_model("initial-exec")));

/* Which waits of this thread are its loop's own (wait_point.h). */
static __thread hw_wait_point tls_wait_point __attribute__((tls_model("initial-exec")));
static bool g_every_wait_is_the_loop; /* HANGWATCH_WAIT_SITE=any */

/* HANGWATCH_THREADS=loops: every thread that waits in a loop gets a slot the
 * first time it calls a wait function (a one-time cost per thread; threads
 * that wait on locks, condition variables or semaphores for work never call
 * one and are never watched). */
static bool g_watch_all_loops;
static __thread bool tls_claim_tried __attribute__((tls_model("initial-exec")));
static pthread_key_t g_slot_key;

/* Nobody has the fast path (stack pointer first: no call matches from then on). */
static void drop_fast_path(void)
{
    atomic_store_explicit(&hot.loop_sp, 0, memory_order_relaxed);
    atomic_store_explicit(&hot.loop_site, 0, memory_order_relaxed);
    atomic_store_explicit(&hot.loop_object, 0, memory_order_relaxed);
    atomic_store_explicit(&hot.loop_slot, NULL, memory_order_relaxed);
}

/* The thread ended: its slot is free again (and not busy). */
static void release_slot(void *arg)
{
    hw_loop_slot *slot = arg;
    if (atomic_load_explicit(&hot.loop_slot, memory_order_relaxed) == slot)
        drop_fast_path(); /* before this stack can become another thread's */
    uint64_t seq = atomic_load_explicit(&slot->seq, memory_order_relaxed);
    if (seq & 1u)
        atomic_store_explicit(&slot->seq, seq + 1, memory_order_release);
    atomic_store_explicit(&slot->tid, 0, memory_order_release);
    tls_slot = NULL;
}

static hw_loop_slot *claim_slot(void)
{
    tls_claim_tried = true;
    hw_shared_page *page = g_page;
    if (page == NULL)
        return NULL;
    int32_t tid = (int32_t)syscall(SYS_gettid);
    for (unsigned i = 1; i < HW_PAGE_SLOTS; i++) {
        hw_loop_slot *slot = &page->slots[i];
        int32_t expected = 0;
        if (atomic_compare_exchange_strong(&slot->tid, &expected, tid)) {
            pthread_setspecific(g_slot_key, slot);
            return slot;
        }
    }
    return NULL; /* more loop threads than slots: the rest go unwatched */
}

typedef int (*epoll_wait_fn)(int, struct epoll_event *, int, int);
typedef int (*epoll_pwait_fn)(int, struct epoll_event *, int, int, const sigset_t *);
typedef int (*epoll_pwait2_fn)(int, struct epoll_event *, int, const struct timespec *, const sigset_t *);
typedef int (*poll_fn)(struct pollfd *, nfds_t, int);
typedef int (*ppoll_fn)(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *);
typedef int (*select_fn)(int, fd_set *, fd_set *, fd_set *, struct timeval *);
typedef int (*pselect_fn)(int, fd_set *, fd_set *, fd_set *, const struct timespec *, const sigset_t *);
typedef int (*poll_chk_fn)(struct pollfd *, nfds_t, int, size_t);
typedef int (*ppoll_chk_fn)(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *, size_t);
typedef int (*sigsuspend_fn)(const sigset_t *);

static const char *const g_names[F_COUNT] = {
    [F_EPOLL_WAIT] = "epoll_wait", [F_EPOLL_PWAIT] = "epoll_pwait", [F_EPOLL_PWAIT2] = "epoll_pwait2",
    [F_POLL] = "poll",             [F_PPOLL] = "ppoll",             [F_SELECT] = "select",
    [F_PSELECT] = "pselect",       [F_POLL_CHK] = "__poll_chk",     [F_PPOLL_CHK] = "__ppoll_chk",
    [F_SIGSUSPEND] = "sigsuspend",
};

/* The next definition of function `f` (resolved lazily too: another
 * library's constructor may wait before ours); NULL if there is none. */
static inline void *real_fn(unsigned f)
{
    void *fn = hot.real[f];
    if (__builtin_expect(fn == NULL, 0))
        fn = hot.real[f] = dlsym(RTLD_NEXT, g_names[f]);
    return fn;
}

/* dlsym's result as a function pointer of the wrapper's type (POSIX
 * guarantees the conversion). */
#define AS_FN(type, p) ((type)(uintptr_t)(p))

/* A time stamp from the clock `tsc` says (hot.tsc's choice). */
static inline uint64_t stamp_with(bool tsc)
{
    return tsc ? hw_tsc_read() : hw_coarse_now_ns();
}

static inline uint64_t stamp_now(void)
{
    return stamp_with(hot.tsc);
}

/* Make `slot`'s owner (the calling thread) the owner of the fast path for
 * its loop wait `c`, unless another loop thread has it.  The stack pointer
 * goes last: until it matches, nothing does. */
static void take_fast_path(hw_loop_slot *slot, const hw_wait_call *c)
{
    hw_loop_slot *owner = atomic_load_explicit(&hot.loop_slot, memory_order_relaxed);
    if (owner != slot &&
        !(owner == NULL && atomic_compare_exchange_strong(&hot.loop_slot, &owner, slot)))
        return;
    atomic_store_explicit(&hot.loop_sp, 0, memory_order_relaxed);
    atomic_store_explicit(&hot.loop_site, c->site, memory_order_relaxed);
    atomic_store_explicit(&hot.loop_object, c->object, memory_order_relaxed);
    atomic_store_explicit(&hot.loop_sp, c->sp, memory_order_relaxed);
}

/* Tell the agent what this thread now takes to be its loop's wait. */
static void publish_loop_wait(hw_loop_slot *slot, const hw_wait_point *wp)
{
    atomic_store_explicit(&slot->loop_wait_site, wp->loop_site, memory_order_relaxed);
    atomic_store_explicit(&slot->loop_wait_object, wp->loop_object, memory_order_relaxed);
    if (wp->learned == HW_WAIT_LEARNED_MOVED)
        atomic_store_explicit(&slot->loop_wait_moves,
                              atomic_load_explicit(&slot->loop_wait_moves, memory_order_relaxed) + 1,
                              memory_order_relaxed);
    atomic_store_explicit(&slot->loop_wait_info, hw_loop_wait_info(wp->loop_call, wp->loop_rank, wp->learned),
                          memory_order_release);
}

/* The rule's verdict on the wait `c` of this thread (wait_point.h), with
 * what it learned published. */
static bool is_loop_wait(hw_loop_slot *slot, hw_wait_call *c)
{
    hw_wait_point *wp = &tls_wait_point;
    c->turn = atomic_load_explicit(&slot->seq, memory_order_relaxed);
    uint64_t site = wp->loop_site, object = wp->loop_object;
    uint32_t learned = wp->learned;
    bool loop = hw_wait_point_is_loop(wp, c);
    if (wp->learned != learned || wp->loop_site != site || wp->loop_object != object)
        publish_loop_wait(slot, wp);
    if (!loop)
        atomic_store_explicit(&slot->nested_waits, atomic_load_explicit(&slot->nested_waits, memory_order_relaxed) + 1,
                              memory_order_relaxed);
    return loop;
}

/* Off the fast path: this thread's slot and wait point, from TLS. */
__attribute__((noinline)) static hw_loop_slot *before_waiting_slow(hw_wait_call c)
{
    hw_loop_slot *slot = tls_slot;
    if (slot == NULL) {
        if (g_page == NULL && atomic_load_explicit(&g_unsaid.length, memory_order_relaxed) != 0)
            hw_page_say_warning(&g_unsaid); /* a forked child that did not register, now in a loop */
        if (!g_watch_all_loops || tls_claim_tried)
            return NULL;
        slot = tls_slot = claim_slot();
        if (slot == NULL)
            return NULL;
    }
    if (!g_every_wait_is_the_loop) {
        if (!is_loop_wait(slot, &c))
            return NULL; /* a wait inside a callback: still work */
        if (tls_wait_point.learned != HW_WAIT_LEARNED_NOT_YET && tls_wait_point.loop_site == c.site &&
            tls_wait_point.loop_object == c.object)
            take_fast_path(slot, &c); /* the wait point is learned: next time, the fast path */
    } else {
        take_fast_path(slot, &c); /* every wait is the loop's: the last one repeats most */
    }
    hw_observe(slot, HW_ACTIVITY_BEFORE_WAITING, 0);
    return slot;
}

/* Called with the wrapper's caller's return address and stack position,
 * and what the call waits on (wait_point.h). */
static inline hw_loop_slot *before_waiting(uintptr_t site, uintptr_t sp, uint64_t object, uint32_t rank, uint32_t call)
{
    if (__builtin_expect(sp == atomic_load_explicit(&hot.loop_sp, memory_order_relaxed) &&
                             site == atomic_load_explicit(&hot.loop_site, memory_order_relaxed) &&
                             object == atomic_load_explicit(&hot.loop_object, memory_order_relaxed),
                         1)) {
        hw_loop_slot *slot = atomic_load_explicit(&hot.loop_slot, memory_order_relaxed);
        hw_observe(slot, HW_ACTIVITY_BEFORE_WAITING, 0);
        return slot;
    }
    return before_waiting_slow(
        (hw_wait_call){.site = site, .sp = sp, .turn = 0, .object = object, .rank = rank, .call = call});
}

/* `tsc`: hot.tsc, read before the wait (see WRAP_CALL). */
static inline void after_waiting(hw_loop_slot *slot, bool tsc)
{
    if (slot)
        hw_observe(slot, HW_ACTIVITY_AFTER_WAITING, stamp_with(tsc));
}

/*
 * The wait as a system call of our own, where that is exactly what libc
 * would do: on x86-64, for epoll_wait, epoll_pwait and poll, whose glibc
 * wrappers are a bare system call while the process is single-threaded
 * (no cancellation can then be pending), when the next definition is
 * libc's.  Calling libc instead adds a call level whose return comes after
 * the system call, with its own page of code: about half of the observer's
 * cost per loop turn on a machine that flushes its TLB at every system call
 * (docs/decisions.md §2).
 */
#if defined(__x86_64__)
#define HAVE_DIRECT 1
static inline long direct_syscall6(long nr, long a1, long a2, long a3, long a4, long a5, long a6)
{
    long ret;
    register long r10 __asm__("r10") = a4;
    register long r8 __asm__("r8") = a5;
    register long r9 __asm__("r9") = a6;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "0"(nr), "D"(a1), "S"(a2), "d"(a3), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    return ret;
}
#else
#define HAVE_DIRECT 0
static inline long direct_syscall6(long nr, long a1, long a2, long a3, long a4, long a5, long a6)
{
    (void)nr, (void)a1, (void)a2, (void)a3, (void)a4, (void)a5, (void)a6;
    return -ENOSYS;
}
#endif

/*
 * Right after the system call, touch the stack before anything else.  The
 * system call emptied the TLB; the way back to the caller (the pops, the
 * return) needs the stack's page, the slot's stores need the slot's, and
 * the stack's page walk must not wait behind the slot's.  Measured: about
 * 12 ns per loop turn without this, nothing measurable with it
 * (docs/benchmarks.md, part 1).  libc's own wrapper returns at once, so its
 * stack access comes first too.
 */
static inline void touch_stack_first(long ret)
{
    volatile long kept = ret;
    (void)kept;
}

static inline bool call_direct(unsigned f)
{
    return (hot.direct >> f & 1u) && *hot.single_threaded;
}

/* A system call's result as libc returns it. */
static inline int libc_result(long ret)
{
    if (__builtin_expect((unsigned long)ret > -4096ul, 0)) {
        errno = (int)-ret;
        return -1;
    }
    return (int)ret;
}

#define SITE ((uintptr_t)__builtin_return_address(0))
#define STACK ((uintptr_t)__builtin_frame_address(0))

/* A wrapper: observe, make the wait (as a system call where call_direct
 * allows; ENOSYS if libc lacks the function), observe.  WAITS_ON is the
 * call's (object, rank, HW_WAIT_CALL_*), in parentheses (wait_point.h).
 * Which clock stamps the wake-up is read before the wait: after it, with
 * page-table isolation, the hot block's page would cost a page walk of its
 * own. */
#define WAITS_ARGS(object, rank, call) object, rank, call
#define WRAP_CALL(f, WAITS_ON, type, ...)                                                                              \
    do {                                                                                                               \
        type fn = AS_FN(type, real_fn(f));                                                                             \
        if (fn == NULL) {                                                                                              \
            errno = ENOSYS;                                                                                            \
            return -1;                                                                                                 \
        }                                                                                                              \
        hw_loop_slot *slot = before_waiting(SITE, STACK, WAITS_ARGS WAITS_ON);                                         \
        bool tsc = hot.tsc;                                                                                            \
        int ret = fn(__VA_ARGS__);                                                                                     \
        after_waiting(slot, tsc);                                                                                      \
        return ret;                                                                                                    \
    } while (0)

/* The same with the direct system call `nr` first. */
#define WRAP_DIRECT(f, nr, a1, a2, a3, a4, a5, a6, WAITS_ON, type, ...)                                                \
    do {                                                                                                               \
        if (HAVE_DIRECT && __builtin_expect(call_direct(f), 1)) {                                                      \
            hw_loop_slot *slot = before_waiting(SITE, STACK, WAITS_ARGS WAITS_ON);                                     \
            bool tsc = hot.tsc;                                                                                        \
            long ret = direct_syscall6(nr, (long)(a1), (long)(a2), (long)(a3), (long)(a4), (long)(a5), (long)(a6));  \
            touch_stack_first(ret);                                                                                    \
            after_waiting(slot, tsc);                                                                                  \
            return libc_result(ret);                                                                                   \
        }                                                                                                              \
        WRAP_CALL(f, WAITS_ON, type, __VA_ARGS__);                                                                     \
    } while (0)

/* What each wait waits on (wait_point.h), from its arguments alone. */
#define EPOLL_ON(epfd, call) ((uint64_t)(uint32_t)(epfd), HW_WAIT_RANK_MANY, call)
#define POLL_ON(fds, nfds, call) ((uint64_t)(uintptr_t)(fds), hw_wait_rank_of_poll(nfds), call)
#define SELECT_ON(object, call) ((object), hw_wait_rank_of_select(object), call)
#define SELECT_OBJECT(n, r, w, e) hw_wait_select_object(n, (uintptr_t)(r), (uintptr_t)(w), (uintptr_t)(e))
#define SIGNALS_ON(call) (HW_WAIT_OBJECT_SIGNALS, HW_WAIT_RANK_MANY, call)

HW_WRAPPER int epoll_wait(int epfd, struct epoll_event *events, int maxevents, int timeout)
{
    WRAP_DIRECT(F_EPOLL_WAIT, SYS_epoll_wait, epfd, events, maxevents, timeout, 0, 0,
                EPOLL_ON(epfd, HW_WAIT_CALL_EPOLL_WAIT), epoll_wait_fn, epfd, events, maxevents, timeout);
}

HW_WRAPPER int epoll_pwait(int epfd, struct epoll_event *events, int maxevents, int timeout, const sigset_t *mask)
{
    /* The kernel's sigset is 64 bits on x86-64, as glibc passes it. */
    WRAP_DIRECT(F_EPOLL_PWAIT, SYS_epoll_pwait, epfd, events, maxevents, timeout, mask, 8,
                EPOLL_ON(epfd, HW_WAIT_CALL_EPOLL_PWAIT), epoll_pwait_fn, epfd, events, maxevents, timeout, mask);
}

HW_WRAPPER int epoll_pwait2(int epfd, struct epoll_event *events, int maxevents, const struct timespec *timeout,
                           const sigset_t *mask)
{
    WRAP_CALL(F_EPOLL_PWAIT2, EPOLL_ON(epfd, HW_WAIT_CALL_EPOLL_PWAIT2), epoll_pwait2_fn, epfd, events, maxevents,
              timeout, mask);
}

HW_WRAPPER int poll(struct pollfd *fds, nfds_t nfds, int timeout)
{
    WRAP_DIRECT(F_POLL, SYS_poll, fds, nfds, timeout, 0, 0, 0, POLL_ON(fds, nfds, HW_WAIT_CALL_POLL), poll_fn, fds,
                nfds, timeout);
}

HW_WRAPPER int ppoll(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout, const sigset_t *mask)
{
    WRAP_CALL(F_PPOLL, POLL_ON(fds, nfds, HW_WAIT_CALL_PPOLL), ppoll_fn, fds, nfds, timeout, mask);
}

HW_WRAPPER int select(int nfds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds, struct timeval *timeout)
{
    WRAP_CALL(F_SELECT, SELECT_ON(SELECT_OBJECT(nfds, readfds, writefds, exceptfds), HW_WAIT_CALL_SELECT), select_fn,
              nfds, readfds, writefds, exceptfds, timeout);
}

HW_WRAPPER int pselect(int nfds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds, const struct timespec *timeout,
                      const sigset_t *mask)
{
    WRAP_CALL(F_PSELECT, SELECT_ON(SELECT_OBJECT(nfds, readfds, writefds, exceptfds), HW_WAIT_CALL_PSELECT),
              pselect_fn, nfds, readfds, writefds, exceptfds, timeout, mask);
}

HW_WRAPPER int __poll_chk(struct pollfd *fds, nfds_t nfds, int timeout, size_t fdslen)
{
    WRAP_CALL(F_POLL_CHK, POLL_ON(fds, nfds, HW_WAIT_CALL_POLL), poll_chk_fn, fds, nfds, timeout, fdslen);
}

HW_WRAPPER int __ppoll_chk(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout, const sigset_t *mask,
                          size_t fdslen)
{
    WRAP_CALL(F_PPOLL_CHK, POLL_ON(fds, nfds, HW_WAIT_CALL_PPOLL), ppoll_chk_fn, fds, nfds, timeout, mask, fdslen);
}

/* A loop driven by signals (nginx's master, many daemons' supervisors)
 * waits in sigsuspend. */
HW_WRAPPER int sigsuspend(const sigset_t *mask)
{
    WRAP_CALL(F_SIGSUSPEND, SIGNALS_ON(HW_WAIT_CALL_SIGSUSPEND), sigsuspend_fn, mask);
}

/* ---- set-up: runs once, before main(), never on the hot path ---- */

/* glibc 2.32 and later (sys/single_threaded.h); weak, so that an older
 * libc leaves it NULL and the wrappers always call libc. */
extern char __libc_single_threaded __attribute__((weak));

static void resolve_real_functions(void)
{
    for (unsigned f = 0; f < F_COUNT; f++)
        (void)real_fn(f);
    if (!HAVE_DIRECT || &__libc_single_threaded == NULL)
        return;
    /* Direct system calls only in place of libc's own function: another
     * library interposed behind us (a sanitizer's, a test double) is
     * called. */
    void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
    if (libc == NULL)
        return;
    static const unsigned direct[] = {F_EPOLL_WAIT, F_EPOLL_PWAIT, F_POLL};
    uint32_t bits = 0;
    for (size_t i = 0; i < sizeof direct / sizeof direct[0]; i++) {
        unsigned f = direct[i];
        if (hot.real[f] != NULL && dlsym(libc, g_names[f]) == hot.real[f])
            bits |= 1u << f;
    }
    dlclose(libc);
    hot.single_threaded = &__libc_single_threaded;
    hot.direct = bits;
}

/* The agent's socket name, kept for forked children (getenv is not
 * async-signal-safe after a fork in a threaded program; this copy is). */
static char g_socket_name[108];
static bool g_follow_children;

/*
 * Create this process's page, mark its main thread busy from now on (a
 * launch, or a forked child that has not reached its loop yet), and hand the
 * page to the agent.  Only system calls: safe in a child right after fork().
 * Returns the main thread's slot, or NULL: the process then runs unwatched,
 * and one line on stderr says so (page_client.h): at once, or for a
 * forked child (`forked`) at its first loop wait, so that a child that
 * executes a program, which says it itself, says it once.
 */
static hw_loop_slot *start_watching(bool forked)
{
    uint32_t clock = hot.tsc ? HW_PAGE_CLOCK_TSC : HW_PAGE_CLOCK_COARSE;
    hw_shared_page *page = hw_page_publish_or_warn(g_socket_name, clock, HW_PAGE_FLAG_LAUNCHING | HW_PAGE_FLAG_LOOP_WAITS,
                                                   stamp_now(), forked ? &g_unsaid : NULL);
    if (page == NULL)
        return NULL;
    g_page = page;
    return &page->slots[0];
}

/*
 * In a forked child: the parent's page is the parent's.  The thread that
 * forked is the child's main thread; with following on (the default) the
 * child gets a page of its own and is watched like any other process.
 */
static void on_fork_child(void)
{
    drop_fast_path(); /* the parent's loop thread and slot */
    tls_slot = NULL;
    tls_claim_tried = true; /* the forking thread becomes the child's main thread */
    if (g_watch_all_loops)
        pthread_setspecific(g_slot_key, NULL); /* its old slot is the parent's */
    memset(&tls_wait_point, 0, sizeof tls_wait_point);
    if (g_page != NULL) {
        munmap(g_page, HW_PAGE_SIZE);
        g_page = NULL;
    }
    atomic_store_explicit(&g_unsaid.length, 0, memory_order_relaxed); /* the parent's, if it had one */
    if (g_follow_children)
        tls_slot = start_watching(true);
}

__attribute__((constructor)) static void hangwatch_observer_init(void)
{
    int saved_errno = errno;
    resolve_real_functions();
    const char *clock = getenv(HW_ENV_CLOCK);
    hot.tsc = HW_HAVE_TSC && clock != NULL && strcmp(clock, "tsc") == 0;
    const char *wait_site = getenv("HANGWATCH_WAIT_SITE");
    g_every_wait_is_the_loop = wait_site != NULL && strcmp(wait_site, "any") == 0;
    const char *socket_name = getenv(HW_ENV_AGENT_SOCKET);
    if (socket_name == NULL || *socket_name == '\0' || strlen(socket_name) >= sizeof g_socket_name)
        goto out;
    memcpy(g_socket_name, socket_name, strlen(socket_name) + 1);

    /* --no-follow: only the process hangwatch started is watched; programs
     * it executes later inherit the variables but stay inert. */
    const char *only_pid = getenv(HW_ENV_ONLY_PID);
    if (only_pid != NULL && strtol(only_pid, NULL, 10) != (long)getpid())
        goto out;
    g_follow_children = only_pid == NULL;
    const char *threads = getenv("HANGWATCH_THREADS");
    g_watch_all_loops = threads != NULL && strcmp(threads, "loops") == 0 &&
                        pthread_key_create(&g_slot_key, release_slot) == 0;

    tls_slot = start_watching(false);
    if (tls_slot != NULL)
        pthread_atfork(NULL, NULL, on_fork_child);

out:
    errno = saved_errno;
}
