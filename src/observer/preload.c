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
 * vDSO's CLOCK_MONOTONIC_COARSE: no locks, no allocation, no system call.  All set-up
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
#include <stddef.h>
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

#include "../core/registration.h"
#include "../core/shared_page.h"
#include "../core/wait_point.h"
#include "coarse_clock.h"
#include "page_client.h"
#include "tsc_read.h"

#define HW_EXPORT __attribute__((visibility("default")))

/* The slot this thread publishes to; NULL on threads we do not watch. */
static __thread hw_loop_slot *tls_slot __attribute__((tls_model("initial-exec")));

static hw_shared_page *g_page;

/* Stamp busy starts with the time-stamp counter (the agent found it usable
 * and said so, HANGWATCH_CLOCK=tsc), else with the coarse clock. */
static bool g_tsc;

static inline uint64_t stamp_now(void)
{
    return g_tsc ? hw_tsc_read() : hw_coarse_now_ns();
}

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

/* The thread ended: its slot is free again (and not busy). */
static void release_slot(void *arg)
{
    hw_loop_slot *slot = arg;
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

static struct {
    epoll_wait_fn epoll_wait;
    epoll_pwait_fn epoll_pwait;
    epoll_pwait2_fn epoll_pwait2;
    poll_fn poll;
    ppoll_fn ppoll;
    select_fn select;
    pselect_fn pselect;
    poll_chk_fn poll_chk;
    ppoll_chk_fn ppoll_chk;
    sigsuspend_fn sigsuspend;
} real;

static void *next_symbol(const char *name)
{
    return dlsym(RTLD_NEXT, name);
}

/* Resolve lazily too: another library's constructor may wait before ours. */
#define REAL(field, name)                                                                                              \
    (__builtin_expect(real.field != NULL, 1) ? real.field : (real.field = (__typeof__(real.field))next_symbol(name)))

/* Called with the wrapper's caller's return address and stack position. */
static inline hw_loop_slot *before_waiting(uintptr_t site, uintptr_t sp)
{
    hw_loop_slot *slot = tls_slot;
    if (slot == NULL) {
        if (!g_watch_all_loops || tls_claim_tried)
            return NULL;
        slot = tls_slot = claim_slot();
        if (slot == NULL)
            return NULL;
    }
    if (!g_every_wait_is_the_loop && !hw_wait_point_is_loop(&tls_wait_point, site, sp))
        return NULL; /* a wait inside a callback: still work */
    hw_observe(slot, HW_ACTIVITY_BEFORE_WAITING, 0);
    return slot;
}

static inline void after_waiting(hw_loop_slot *slot)
{
    if (slot)
        hw_observe(slot, HW_ACTIVITY_AFTER_WAITING, stamp_now());
}

/* A wrapper: observe, call the real function (ENOSYS if libc lacks it), observe. */
#define WRAP_CALL(field, name, ...)                                                                                    \
    do {                                                                                                               \
        __typeof__(real.field) fn = REAL(field, name);                                                                 \
        if (fn == NULL) {                                                                                              \
            errno = ENOSYS;                                                                                            \
            return -1;                                                                                                 \
        }                                                                                                              \
        hw_loop_slot *slot = before_waiting((uintptr_t)__builtin_return_address(0),                                    \
                                            (uintptr_t)__builtin_frame_address(0));                                    \
        int ret = fn(__VA_ARGS__);                                                                                     \
        after_waiting(slot);                                                                                           \
        return ret;                                                                                                    \
    } while (0)

HW_EXPORT int epoll_wait(int epfd, struct epoll_event *events, int maxevents, int timeout)
{
    WRAP_CALL(epoll_wait, "epoll_wait", epfd, events, maxevents, timeout);
}

HW_EXPORT int epoll_pwait(int epfd, struct epoll_event *events, int maxevents, int timeout, const sigset_t *mask)
{
    WRAP_CALL(epoll_pwait, "epoll_pwait", epfd, events, maxevents, timeout, mask);
}

HW_EXPORT int epoll_pwait2(int epfd, struct epoll_event *events, int maxevents, const struct timespec *timeout,
                           const sigset_t *mask)
{
    WRAP_CALL(epoll_pwait2, "epoll_pwait2", epfd, events, maxevents, timeout, mask);
}

HW_EXPORT int poll(struct pollfd *fds, nfds_t nfds, int timeout)
{
    WRAP_CALL(poll, "poll", fds, nfds, timeout);
}

HW_EXPORT int ppoll(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout, const sigset_t *mask)
{
    WRAP_CALL(ppoll, "ppoll", fds, nfds, timeout, mask);
}

HW_EXPORT int select(int nfds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds, struct timeval *timeout)
{
    WRAP_CALL(select, "select", nfds, readfds, writefds, exceptfds, timeout);
}

HW_EXPORT int pselect(int nfds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds, const struct timespec *timeout,
                      const sigset_t *mask)
{
    WRAP_CALL(pselect, "pselect", nfds, readfds, writefds, exceptfds, timeout, mask);
}

HW_EXPORT int __poll_chk(struct pollfd *fds, nfds_t nfds, int timeout, size_t fdslen)
{
    WRAP_CALL(poll_chk, "__poll_chk", fds, nfds, timeout, fdslen);
}

HW_EXPORT int __ppoll_chk(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout, const sigset_t *mask,
                          size_t fdslen)
{
    WRAP_CALL(ppoll_chk, "__ppoll_chk", fds, nfds, timeout, mask, fdslen);
}

/* A loop driven by signals (nginx's master, many daemons' supervisors)
 * waits in sigsuspend. */
HW_EXPORT int sigsuspend(const sigset_t *mask)
{
    WRAP_CALL(sigsuspend, "sigsuspend", mask);
}

/* ---- set-up: runs once, before main(), never on the hot path ---- */

static void resolve_real_functions(void)
{
    (void)REAL(epoll_wait, "epoll_wait");
    (void)REAL(epoll_pwait, "epoll_pwait");
    (void)REAL(epoll_pwait2, "epoll_pwait2");
    (void)REAL(poll, "poll");
    (void)REAL(ppoll, "ppoll");
    (void)REAL(select, "select");
    (void)REAL(pselect, "pselect");
    (void)REAL(poll_chk, "__poll_chk");
    (void)REAL(ppoll_chk, "__ppoll_chk");
    (void)REAL(sigsuspend, "sigsuspend");
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
 * and one line on stderr says so (page_client.h).
 */
static hw_loop_slot *start_watching(void)
{
    hw_shared_page *page =
        hw_page_publish_or_warn(g_socket_name, g_tsc ? HW_PAGE_CLOCK_TSC : HW_PAGE_CLOCK_COARSE, true, stamp_now());
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
    tls_slot = NULL;
    tls_claim_tried = true; /* the forking thread becomes the child's main thread */
    if (g_watch_all_loops)
        pthread_setspecific(g_slot_key, NULL); /* its old slot is the parent's */
    memset(&tls_wait_point, 0, sizeof tls_wait_point);
    if (g_page != NULL) {
        munmap(g_page, HW_PAGE_SIZE);
        g_page = NULL;
    }
    if (g_follow_children)
        tls_slot = start_watching();
}

__attribute__((constructor)) static void hangwatch_observer_init(void)
{
    int saved_errno = errno;
    resolve_real_functions();
    const char *clock = getenv(HW_ENV_CLOCK);
    g_tsc = HW_HAVE_TSC && clock != NULL && strcmp(clock, "tsc") == 0;
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

    tls_slot = start_watching();
    if (tls_slot != NULL)
        pthread_atfork(NULL, NULL, on_fork_child);

out:
    errno = saved_errno;
}
