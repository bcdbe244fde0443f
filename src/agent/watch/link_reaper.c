/*
 * link_reaper.c - a thread that destroys BPF links handed to it, so that
 * the watch thread never waits for the kernel's grace periods
 * (link_reaper.h says why).  The pending links are a growing array under
 * one mutex; the thread takes the whole array at a time and destroys it
 * outside the lock.  It runs at the normal priority: nothing waits for it
 * but the agent's own exit.  At exit, every program's links are left to a
 * process of their own (hw_links_destroy_at_exit).
 */
#include "link_reaper.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "agent/common/pi_mutex.h"

struct hw_link_reaper {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    struct bpf_link **pending;
    size_t count, capacity;
    bool stopping;
};

static void destroy_all(struct bpf_link *const *links, size_t count)
{
    for (size_t i = 0; i < count; i++)
        bpf_link__destroy(links[i]);
}

static void *reap(void *arg)
{
    hw_link_reaper *r = arg;
    pthread_mutex_lock(&r->lock);
    for (;;) {
        while (r->count == 0 && !r->stopping)
            pthread_cond_wait(&r->wake, &r->lock);
        if (r->count == 0)
            break; /* stopping, and nothing left */
        struct bpf_link **links = r->pending;
        size_t count = r->count;
        r->pending = NULL;
        r->count = r->capacity = 0;
        pthread_mutex_unlock(&r->lock);
        destroy_all(links, count);
        free(links);
        pthread_mutex_lock(&r->lock);
    }
    pthread_mutex_unlock(&r->lock);
    return NULL;
}

hw_link_reaper *hw_link_reaper_start(void)
{
    hw_link_reaper *r = calloc(1, sizeof *r);
    if (r == NULL)
        return NULL;
    hw_pi_mutex_init(&r->lock);
    pthread_cond_init(&r->wake, NULL);
    /* Not the watch thread's real-time priority, whoever starts it. */
    pthread_attr_t attr;
    struct sched_param normal = {.sched_priority = 0};
    bool started = pthread_attr_init(&attr) == 0;
    if (started) {
        pthread_attr_setinheritsched(&attr, PTHREAD_EXPLICIT_SCHED);
        pthread_attr_setschedpolicy(&attr, SCHED_OTHER);
        pthread_attr_setschedparam(&attr, &normal);
        started = pthread_create(&r->thread, &attr, reap, r) == 0;
        pthread_attr_destroy(&attr);
    }
    if (!started) {
        pthread_cond_destroy(&r->wake);
        pthread_mutex_destroy(&r->lock);
        free(r);
        return NULL;
    }
    return r;
}

void hw_link_reaper_give(hw_link_reaper *r, struct bpf_link *const *links, size_t count)
{
    if (count == 0)
        return;
    if (r != NULL) {
        pthread_mutex_lock(&r->lock);
        if (r->count + count > r->capacity) {
            size_t capacity = (r->count + count) * 2;
            struct bpf_link **grown = realloc(r->pending, capacity * sizeof *grown);
            if (grown != NULL) {
                r->pending = grown;
                r->capacity = capacity;
            }
        }
        bool taken = r->count + count <= r->capacity;
        if (taken) {
            memcpy(r->pending + r->count, links, count * sizeof *links);
            r->count += count;
            pthread_cond_signal(&r->wake);
        }
        pthread_mutex_unlock(&r->lock);
        if (taken)
            return;
    }
    /* No reaper, or no memory for the list: now, on this thread. */
    destroy_all(links, count);
}

void hw_link_reaper_stop(hw_link_reaper *r)
{
    if (r == NULL)
        return;
    pthread_mutex_lock(&r->lock);
    r->stopping = true;
    pthread_cond_signal(&r->wake);
    pthread_mutex_unlock(&r->lock);
    pthread_join(r->thread, NULL);
    free(r->pending);
    pthread_cond_destroy(&r->wake);
    pthread_mutex_destroy(&r->lock);
    free(r);
}

/* ---- at exit ---- */

static int compare_fds(const void *x, const void *y)
{
    int a = *(const int *)x, b = *(const int *)y;
    return (a > b) - (a < b);
}

/*
 * A process of its own that holds these descriptors and lets them go after
 * we have: detaching a program waits for the kernel's grace periods, one
 * attachment at a time (40-80 ms each here: the 18 of the tracepoint
 * attachment took 1.3 s of every `watch`'s exit, fentry's longer).  The
 * grandchild (reparented, reaped by init or the nearest subreaper) closes
 * every other descriptor, then these, detaching them, and exits; our
 * closes only drop references.  Only close_range, fork and _exit run in the
 * children: safe after fork in a threaded process.  False if it could not
 * be had (the caller detaches them itself).
 */
static bool release_in_background(int *fds, size_t n)
{
    if (n == 0)
        return true;
    qsort(fds, n, sizeof *fds, compare_fds);
    pid_t child = fork();
    if (child < 0)
        return false;
    if (child == 0) {
        if (fork() != 0)
            _exit(0); /* the grandchild holds them now (or nobody, if fork failed: the parent's are still open) */
        unsigned from = 0;
        for (size_t i = 0; i < n; i++) {
            if (fds[i] < 0 || (unsigned)fds[i] < from)
                continue;
            if ((unsigned)fds[i] > from)
                syscall(SYS_close_range, from, (unsigned)fds[i] - 1, 0);
            from = (unsigned)fds[i] + 1;
        }
        syscall(SYS_close_range, from, ~0u, 0);
        for (size_t i = 0; i < n; i++)
            close(fds[i]); /* now, before an exit that unmaps a large address space first (a sanitizer's) */
        _exit(0);
    }
    int status;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR)
        ;
    return true;
}

void hw_links_destroy_at_exit(struct bpf_link **links, size_t n)
{
    int fds[HW_LINKS_AT_EXIT_MAX];
    size_t count = 0;
    for (size_t i = 0; i < n && count < sizeof fds / sizeof *fds; i++)
        if (links[i] != NULL && bpf_link__fd(links[i]) >= 0)
            fds[count++] = bpf_link__fd(links[i]);
    (void)release_in_background(fds, count);
    for (size_t i = 0; i < n; i++) {
        bpf_link__destroy(links[i]); /* NULL is fine */
        links[i] = NULL;
    }
}
