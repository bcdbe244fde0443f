/*
 * admission_intake.c - the registration socket read by a thread of its own,
 * at a real-time policy (below the watch thread's), into a bounded queue
 * the watch thread takes from.
 *
 * Why: the socket's queue holds net.unix.max_dgram_qlen datagrams (10 by
 * default) and a registering process waits at most 200 ms for room
 * (page_client.c).  The watch thread spends about 230 us on each
 * registration it lets in (the sender's checks, then the table's set-up),
 * so 1,000 processes started at once took it past 200 ms and the last ones
 * gave up, unwatched (bench part 11: 40 of 1,000).  Reading a datagram is a
 * few microseconds: this thread takes each one off the socket as it comes
 * and the watch thread checks them at its own pace, so a sender waits only
 * for the read, never for the checks of those before it.
 *
 * What it holds is untrusted: each datagram is parsed here
 * (hw_registration_parse, pure), a malformed one's descriptors are closed
 * at once and only the fact is passed on (to be refused, counted and said
 * by the watch thread), and a well-formed one brings at most two (its page
 * and its sender's pidfd).  The queue is bounded by the agent's descriptor
 * limit as well as by INTAKE_MAX: a flood fills it, then waits in the
 * kernel's queue as before, and detection is never starved (the watch
 * thread takes at most MAX_ADMITTED_PER_WAKE per wake-up).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent/common/watch_priority.h"
#include "core/abi/registration.h"
#include "watch.h"

/* As many as the agent can watch: one burst of them waits here whole. */
#define INTAKE_MAX 1024
/* Descriptors a well-formed registration brings: its page, its pidfd. */
#define FDS_PER_REGISTRATION 2

struct admission_intake {
    int socket_fd;
    int ready_fd; /* eventfd: readable while registrations wait here */
    int stop_fd;  /* eventfd: the thread's end */
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t room;
    admission_received *queue; /* a ring of `capacity` */
    size_t capacity, first, count;
    bool stopping;
};

static void close_fds(hw_registration_parsed *m)
{
    for (size_t k = 0; k < m->fd_count; k++)
        close(m->fds[k]);
    m->fd_count = 0;
    m->page_fd = m->pidfd = -1;
}

/* One datagram off the socket into `out`: true, or false when none waits. */
static bool receive_one(int fd, admission_received *out)
{
    hw_registration msg;
    struct iovec iov = {&msg, sizeof msg};
    union {
        char buf[CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(sizeof(int)) +
                 CMSG_SPACE(HW_REGISTRATION_MAX_FDS / 2 * sizeof(int))];
        struct cmsghdr align;
    } control;
    struct msghdr mh = {0};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = control.buf;
    mh.msg_controllen = sizeof control.buf;
    ssize_t n;
    while ((n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT)) < 0 && errno == EINTR)
        ;
    if (n < 0)
        return false;
    out->well_formed = hw_registration_parse(&msg, (size_t)n, mh.msg_flags, mh.msg_control, mh.msg_controllen,
                                             &out->m) == 0;
    if (!out->well_formed)
        close_fds(&out->m); /* only the fact goes on */
    return true;
}

static void signal_fd(int fd)
{
    uint64_t one = 1;
    ssize_t w = write(fd, &one, sizeof one);
    (void)w; /* an eventfd at its maximum is readable anyway */
}

static void *intake_main(void *arg)
{
    admission_intake *in = arg;
    hw_take_service_priority();
    for (;;) {
        pthread_mutex_lock(&in->lock);
        while (in->count == in->capacity && !in->stopping)
            pthread_cond_wait(&in->room, &in->lock);
        bool stopping = in->stopping;
        pthread_mutex_unlock(&in->lock);
        if (stopping)
            break;
        admission_received r;
        if (!receive_one(in->socket_fd, &r)) {
            struct pollfd p[2] = {{in->socket_fd, POLLIN, 0}, {in->stop_fd, POLLIN, 0}};
            (void)poll(p, 2, -1);
            continue;
        }
        pthread_mutex_lock(&in->lock);
        in->queue[(in->first + in->count) % in->capacity] = r;
        in->count++;
        pthread_mutex_unlock(&in->lock);
        signal_fd(in->ready_fd);
    }
    hw_leave_real_time();
    return NULL;
}

/* INTAKE_MAX, or fewer where the descriptor limit would not hold their
 * descriptors beside everything else the agent opens (a quarter of it). */
static size_t intake_capacity(void)
{
    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY)
        return INTAKE_MAX;
    size_t fit = (size_t)(limit.rlim_cur / 4 / FDS_PER_REGISTRATION);
    return fit < 16 ? 16 : fit < INTAKE_MAX ? fit : INTAKE_MAX;
}

admission_intake *admission_intake_start(int socket_fd)
{
    admission_intake *in = calloc(1, sizeof *in);
    if (in == NULL)
        return NULL;
    in->socket_fd = socket_fd;
    in->capacity = intake_capacity();
    in->queue = calloc(in->capacity, sizeof *in->queue);
    in->ready_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    in->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    pthread_mutex_init(&in->lock, NULL);
    pthread_cond_init(&in->room, NULL);
    if (in->queue != NULL && in->ready_fd >= 0 && in->stop_fd >= 0 &&
        pthread_create(&in->thread, NULL, intake_main, in) == 0)
        return in;
    int e = errno;
    if (in->ready_fd >= 0)
        close(in->ready_fd);
    if (in->stop_fd >= 0)
        close(in->stop_fd);
    pthread_cond_destroy(&in->room);
    pthread_mutex_destroy(&in->lock);
    free(in->queue);
    free(in);
    errno = e;
    return NULL;
}

int admission_intake_fd(const admission_intake *in)
{
    return in->ready_fd;
}

size_t admission_intake_take(admission_intake *in, admission_received *out, size_t max)
{
    uint64_t counter;
    ssize_t r = read(in->ready_fd, &counter, sizeof counter); /* cleared: what is left re-arms it below */
    (void)r;
    pthread_mutex_lock(&in->lock);
    size_t n = 0;
    for (; n < max && in->count > 0; n++) {
        out[n] = in->queue[in->first];
        in->first = (in->first + 1) % in->capacity;
        in->count--;
    }
    bool more = in->count > 0;
    if (n > 0)
        pthread_cond_signal(&in->room);
    pthread_mutex_unlock(&in->lock);
    if (more)
        signal_fd(in->ready_fd);
    return n;
}

void admission_intake_stop(admission_intake *in)
{
    if (in == NULL)
        return;
    pthread_mutex_lock(&in->lock);
    in->stopping = true;
    pthread_cond_signal(&in->room);
    pthread_mutex_unlock(&in->lock);
    signal_fd(in->stop_fd);
    pthread_join(in->thread, NULL);
    for (; in->count > 0; in->count--, in->first = (in->first + 1) % in->capacity)
        close_fds(&in->queue[in->first].m);
    close(in->ready_fd);
    close(in->stop_fd);
    pthread_cond_destroy(&in->room);
    pthread_mutex_destroy(&in->lock);
    free(in->queue);
    free(in);
}
