/*
 * link_reaper.c - a thread that destroys BPF links handed to it, so that
 * the watch thread never waits for the kernel's grace periods
 * (link_reaper.h says why).  The pending links are a growing array under
 * one mutex; the thread takes one link at a time off its end and destroys
 * it outside the lock, and takes none while an attachment is under way
 * (hw_link_reaper_pause).  It runs at the normal priority: nothing
 * waits for it but the agent's own exit, and that only for the link it is
 * destroying: at exit, the links still pending and every program's are
 * left to a process of their own (hw_links_destroy_at_exit).
 */
#include "link_reaper.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
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
    bool paused; /* an attachment under way: the kernel's lock is its */
    bool stopping;
};

static void destroy_all(struct bpf_link *const *links, size_t count)
{
    for (size_t i = 0; i < count; i++)
        bpf_link__destroy(links[i]);
}

/* One link at a time, so that stopping waits for one at most: the rest
 * is handed back (hw_link_reaper_stop). */
static void *reap(void *arg)
{
    hw_link_reaper *r = arg;
    pthread_mutex_lock(&r->lock);
    for (;;) {
        while ((r->count == 0 || r->paused) && !r->stopping)
            pthread_cond_wait(&r->wake, &r->lock);
        if (r->stopping)
            break;
        struct bpf_link *link = r->pending[--r->count];
        pthread_mutex_unlock(&r->lock);
        bpf_link__destroy(link);
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

void hw_link_reaper_pause(hw_link_reaper *r, bool paused)
{
    if (r == NULL)
        return;
    pthread_mutex_lock(&r->lock);
    r->paused = paused;
    if (!paused)
        pthread_cond_signal(&r->wake);
    pthread_mutex_unlock(&r->lock);
}

void hw_link_reaper_stop(hw_link_reaper *r, struct bpf_link ***left, size_t *left_count)
{
    *left = NULL;
    *left_count = 0;
    if (r == NULL)
        return;
    pthread_mutex_lock(&r->lock);
    r->stopping = true;
    pthread_cond_signal(&r->wake);
    pthread_mutex_unlock(&r->lock);
    pthread_join(r->thread, NULL);
    *left = r->pending;
    *left_count = r->count;
    pthread_cond_destroy(&r->wake);
    pthread_mutex_destroy(&r->lock);
    free(r);
}

/* ---- at exit ---- */

/* Is descriptor `fd` of this process an attachment (a perf event a
 * program is attached to, or a BPF link)?  Its path made by hand and
 * readlink only: safe after fork (no stdio, no allocation). */
static bool is_attachment(int fd)
{
    static const char prefix[] = "/proc/self/fd/";
    char path[sizeof prefix + 12], digits[12], target[64];
    size_t n = 0;
    unsigned v = (unsigned)fd;
    do
        digits[n++] = (char)('0' + v % 10);
    while ((v /= 10) != 0 && n < sizeof digits);
    memcpy(path, prefix, sizeof prefix - 1);
    for (size_t i = 0; i < n; i++)
        path[sizeof prefix - 1 + i] = digits[n - 1 - i];
    path[sizeof prefix - 1 + n] = '\0';
    ssize_t len = readlink(path, target, sizeof target - 1);
    if (len <= 0)
        return false;
    target[len] = '\0';
    return strcmp(target, "anon_inode:[perf_event]") == 0 || strcmp(target, "anon_inode:bpf_link") == 0;
}

/* Until process `pid` has exited (at once if it has already). */
static void wait_for_exit_of(pid_t pid)
{
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pidfd < 0)
        return; /* gone already */
    struct pollfd ended = {.fd = pidfd, .events = POLLIN};
    while (poll(&ended, 1, -1) < 0 && errno == EINTR)
        ;
    close(pidfd);
}

/*
 * A process of its own that holds the attachments and lets them go after
 * we have: detaching a program waits for the kernel's grace periods, one
 * attachment at a time (40-110 ms each here: the 18 of the tracepoint
 * attachment took 1.3 s of every `watch`'s exit, fentry's longer, and the
 * twenty uprobes of each process --follow found more).  The grandchild
 * (reparented, reaped by init or the nearest subreaper) closes every
 * descriptor that is not an attachment (the agent's sockets, the terminal
 * or pipe its output goes to), waits for the agent to have exited, then
 * closes the attachments, which detaches them, and exits.  The wait is what
 * makes it the last holder: had it closed them first, the agent's own exit
 * would have detached them, one grace period each (a `watch --follow` of a
 * process that had started forty children ended 104 s late).  Only
 * readlink, close, prctl, pidfd_open, poll, fork and _exit run in the
 * children: safe after fork in a threaded process.  False if it could not
 * be had.
 */
static bool release_in_background(void)
{
    struct rlimit limit;
    int max_fd = getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < 65536 ? (int)limit.rlim_cur : 65536;
    pid_t agent = getpid();
    pid_t child = fork();
    if (child < 0)
        return false;
    if (child == 0) {
        if (fork() != 0)
            _exit(0); /* the grandchild holds them now (or nobody, if fork failed: the parent's are still open) */
        prctl(PR_SET_NAME, (unsigned long)HW_DETACHING_COMM, 0, 0, 0); /* what `ps` shows meanwhile */
        for (int fd = 0; fd < max_fd; fd++)
            if (!is_attachment(fd))
                close(fd);
        wait_for_exit_of(agent);
        for (int fd = 0; fd < max_fd; fd++)
            close(fd); /* now, before an exit that unmaps a large address space first (a sanitizer's) */
        _exit(0);
    }
    int status;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR)
        ;
    return true;
}

void hw_links_destroy_at_exit(struct bpf_link **links, size_t n)
{
    /* Handed over, a link is only freed here: libbpf's detach (a perf
     * event's disable, then its close) would wait for the kernel in this
     * process.  Its descriptors stay open until the agent exits. */
    bool handed_over = release_in_background();
    for (size_t i = 0; i < n; i++) {
        if (links[i] != NULL && handed_over)
            bpf_link__disconnect(links[i]);
        bpf_link__destroy(links[i]); /* NULL is fine */
        links[i] = NULL;
    }
}
