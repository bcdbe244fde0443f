/*
 * admission_intake.c - the registration socket read by a thread of its own,
 * at a real-time policy (below the watch thread's), into a bounded queue
 * the watch thread takes from.
 *
 * Why: the watch thread spends about 230 us on each registration it lets in
 * (the sender's checks, then the table's set-up), so 1,000 processes
 * started at once would take it past a sender's 200 ms budget
 * (page_client.c).  A sender only waits for a place in the listen backlog
 * (its message then waits in the kernel on its connection); this thread
 * accepts each connection as it comes, reads its one message (a few
 * microseconds) and the watch thread checks them at its own pace.
 *
 * A connection is read once and closed.  This thread, at its real-time
 * policy, often accepts a connection before its sender (at the normal
 * policy, on a busy machine) has sent: such a connection waits here, in an
 * epoll set, up to PENDING_WAIT_MS, as many of them as the queue holds.
 * While that many wait, no more are accepted (they wait in the backlog); a
 * connection dropped at its deadline tells its sender (EPIPE), who says it
 * is not watched.  (Keeping only the 64 oldest, a fork storm of 1,000 lost
 * 200 of them.)
 *
 * What it holds is untrusted: each message is parsed here
 * (hw_registration_parse, pure), a malformed one's descriptors are closed
 * at once and only the fact is passed on (to be refused, counted and said
 * by the watch thread), and a well-formed one brings at most two (its page
 * and its sender's pidfd).  The queue is bounded by the agent's descriptor
 * limit as well as by INTAKE_MAX: a flood fills it, then waits in the
 * kernel's backlog, and detection is never starved (the watch thread takes
 * at most MAX_ADMITTED_PER_WAKE per wake-up).
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent/common/clock.h"
#include "agent/common/watch_priority.h"
#include "core/abi/registration.h"
#include "watch.h"

/* As many as the agent can watch: one burst of them waits here whole. */
#define INTAKE_MAX 1024
/* Descriptors a well-formed registration brings: its page, its pidfd. */
#define FDS_PER_REGISTRATION 2
/* How long a connection accepted before its message came waits for it. */
#define PENDING_WAIT_MS 1000
/* Connections accepted in a row before the stop is looked at again. */
#define ACCEPTS_PER_ROUND 64
/* How long accepting rests after the kernel refused (no descriptor left). */
#define ACCEPT_REST_MS 100
/* The epoll tags of the two descriptors that are not pending connections. */
#define LISTENER_TAG UINT64_MAX
#define STOP_TAG (UINT64_MAX - 1)
#define EVENTS_PER_WAIT 64

typedef struct pending_connection {
    int fd; /* -1: a free slot */
    int64_t since_ms;
} pending_connection;

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
    /* The thread's own: connections waiting for their message in
     * `capacity` slots (a slot's index is its epoll tag), the free ones
     * stacked in free_slots. */
    int epoll_fd;
    pending_connection *pending;
    size_t *free_slots, free_count;
    int64_t next_expiry_ms; /* INT64_MAX: none waits */
    int64_t accept_rests_until_ms;
    bool listening;
};

static int64_t monotonic_ms(void)
{
    return (int64_t)(hw_monotonic_ns() / 1000000u);
}

static void close_fds(hw_registration_parsed *m)
{
    for (size_t k = 0; k < m->fd_count; k++)
        close(m->fds[k]);
    m->fd_count = 0;
    m->page_fd = m->pidfd = -1;
}

typedef enum message_state {
    MESSAGE_RECEIVED, /* in `out`, parsed */
    MESSAGE_NOT_YET,  /* the connection is open and empty */
    MESSAGE_NONE,     /* closed without one, or broken */
} message_state;

/* A connection's message into `out`. */
static message_state receive_one(int fd, admission_received *out)
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
        return errno == EAGAIN || errno == EWOULDBLOCK ? MESSAGE_NOT_YET : MESSAGE_NONE;
    if (n == 0 && mh.msg_controllen == 0)
        return MESSAGE_NONE; /* the end of the connection (or an empty packet: nothing either way) */
    out->well_formed = hw_registration_parse(&msg, (size_t)n, mh.msg_flags, mh.msg_control, mh.msg_controllen,
                                             &out->m) == 0;
    if (!out->well_formed)
        close_fds(&out->m); /* only the fact goes on */
    return MESSAGE_RECEIVED;
}

static void signal_fd(int fd)
{
    uint64_t one = 1;
    ssize_t w = write(fd, &one, sizeof one);
    (void)w; /* an eventfd at its maximum is readable anyway */
}

/* Wait until the queue has room: false when the intake is stopping. */
static bool wait_for_room(admission_intake *in)
{
    pthread_mutex_lock(&in->lock);
    while (in->count == in->capacity && !in->stopping)
        pthread_cond_wait(&in->room, &in->lock);
    bool stopping = in->stopping;
    pthread_mutex_unlock(&in->lock);
    return !stopping;
}

static void enqueue(admission_intake *in, admission_received *r)
{
    if (!wait_for_room(in)) {
        close_fds(&r->m);
        return;
    }
    pthread_mutex_lock(&in->lock);
    in->queue[(in->first + in->count) % in->capacity] = *r;
    in->count++;
    pthread_mutex_unlock(&in->lock);
    signal_fd(in->ready_fd);
}

/* Read connection `fd`'s message into the queue: true when the connection
 * is done with, false when its message has not come yet. */
static bool take_message(admission_intake *in, int fd)
{
    admission_received r;
    message_state state = receive_one(fd, &r);
    if (state == MESSAGE_RECEIVED)
        enqueue(in, &r);
    return state != MESSAGE_NOT_YET;
}

/* Accept connections while a slot is free and accepting does not rest. */
static void update_listening(admission_intake *in)
{
    bool listen = in->free_count > 0 && in->accept_rests_until_ms == 0;
    if (listen == in->listening)
        return;
    struct epoll_event ev = {.events = listen ? EPOLLIN : 0, .data.u64 = LISTENER_TAG};
    if (epoll_ctl(in->epoll_fd, EPOLL_CTL_MOD, in->socket_fd, &ev) == 0)
        in->listening = listen;
}

/* Wait for `fd`'s message in a free slot (the caller made sure of one). */
static void keep_pending(admission_intake *in, int fd, int64_t now_ms)
{
    size_t slot = in->free_slots[--in->free_count];
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = slot};
    if (epoll_ctl(in->epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0) {
        close(fd); /* its sender is told (EPIPE) */
        in->free_slots[in->free_count++] = slot;
        return;
    }
    in->pending[slot] = (pending_connection){fd, now_ms};
    if (now_ms + PENDING_WAIT_MS < in->next_expiry_ms)
        in->next_expiry_ms = now_ms + PENDING_WAIT_MS;
    update_listening(in);
}

static void release_pending(admission_intake *in, size_t slot)
{
    close(in->pending[slot].fd); /* which takes it out of the epoll set */
    in->pending[slot].fd = -1;
    in->free_slots[in->free_count++] = slot;
    update_listening(in);
}

/* Drop the connections that waited their whole time, end accepting's rest
 * when it is over; the wait until either is due next, -1 for never. */
static int next_timeout(admission_intake *in, int64_t now_ms)
{
    if (in->accept_rests_until_ms != 0 && in->accept_rests_until_ms <= now_ms) {
        in->accept_rests_until_ms = 0;
        update_listening(in);
    }
    if (in->next_expiry_ms <= now_ms) {
        in->next_expiry_ms = INT64_MAX;
        for (size_t slot = 0; slot < in->capacity; slot++) {
            if (in->pending[slot].fd < 0)
                continue;
            int64_t end = in->pending[slot].since_ms + PENDING_WAIT_MS;
            if (end <= now_ms)
                release_pending(in, slot);
            else if (end < in->next_expiry_ms)
                in->next_expiry_ms = end;
        }
    }
    int64_t next = in->next_expiry_ms;
    if (in->accept_rests_until_ms != 0 && in->accept_rests_until_ms < next)
        next = in->accept_rests_until_ms;
    return next == INT64_MAX ? -1 : (int)(next - now_ms);
}

static void accept_ready(admission_intake *in, int64_t now_ms)
{
    for (int k = 0; k < ACCEPTS_PER_ROUND && in->listening && in->free_count > 0; k++) {
        int fd = accept4(in->socket_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED) {
                in->accept_rests_until_ms = now_ms + ACCEPT_REST_MS; /* never spin on a refusal */
                update_listening(in);
            }
            return;
        }
        if (take_message(in, fd))
            close(fd);
        else
            keep_pending(in, fd, now_ms);
    }
}

static void *intake_main(void *arg)
{
    admission_intake *in = arg;
    hw_take_service_priority();
    struct epoll_event events[EVENTS_PER_WAIT];
    while (wait_for_room(in)) {
        int n = epoll_wait(in->epoll_fd, events, EVENTS_PER_WAIT, next_timeout(in, monotonic_ms()));
        int64_t now = monotonic_ms();
        for (int i = 0; i < n; i++) {
            uint64_t tag = events[i].data.u64;
            if (tag == LISTENER_TAG)
                accept_ready(in, now);
            else if (tag < in->capacity && in->pending[tag].fd >= 0 && take_message(in, in->pending[tag].fd))
                release_pending(in, (size_t)tag);
            /* STOP_TAG: wait_for_room says so */
        }
    }
    for (size_t slot = 0; slot < in->capacity; slot++)
        if (in->pending[slot].fd >= 0)
            close(in->pending[slot].fd);
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

/* The pending slots, all free, and the epoll set over the socket, the stop
 * and (later) them: 0, or -1 with errno set. */
static int watch_connections(admission_intake *in)
{
    in->pending = calloc(in->capacity, sizeof *in->pending);
    in->free_slots = calloc(in->capacity, sizeof *in->free_slots);
    if (in->pending == NULL || in->free_slots == NULL)
        return -1;
    for (size_t slot = 0; slot < in->capacity; slot++) {
        in->pending[slot].fd = -1;
        in->free_slots[in->free_count++] = in->capacity - 1 - slot;
    }
    in->next_expiry_ms = INT64_MAX;
    in->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    if (in->epoll_fd < 0)
        return -1;
    struct epoll_event listener = {.events = EPOLLIN, .data.u64 = LISTENER_TAG};
    struct epoll_event stop = {.events = EPOLLIN, .data.u64 = STOP_TAG};
    if (epoll_ctl(in->epoll_fd, EPOLL_CTL_ADD, in->socket_fd, &listener) != 0 ||
        epoll_ctl(in->epoll_fd, EPOLL_CTL_ADD, in->stop_fd, &stop) != 0)
        return -1;
    in->listening = true;
    return 0;
}

static void free_intake(admission_intake *in)
{
    int e = errno;
    if (in->ready_fd >= 0)
        close(in->ready_fd);
    if (in->stop_fd >= 0)
        close(in->stop_fd);
    if (in->epoll_fd >= 0)
        close(in->epoll_fd);
    pthread_cond_destroy(&in->room);
    pthread_mutex_destroy(&in->lock);
    free(in->queue);
    free(in->pending);
    free(in->free_slots);
    free(in);
    errno = e;
}

admission_intake *admission_intake_start(int socket_fd)
{
    admission_intake *in = calloc(1, sizeof *in);
    if (in == NULL)
        return NULL;
    in->socket_fd = socket_fd;
    in->epoll_fd = -1;
    in->capacity = intake_capacity();
    in->queue = calloc(in->capacity, sizeof *in->queue);
    in->ready_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    in->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    pthread_mutex_init(&in->lock, NULL);
    pthread_cond_init(&in->room, NULL);
    if (in->queue != NULL && in->ready_fd >= 0 && in->stop_fd >= 0 && watch_connections(in) == 0) {
        int rc = pthread_create(&in->thread, NULL, intake_main, in);
        if (rc == 0)
            return in;
        errno = rc;
    }
    free_intake(in);
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
    free_intake(in);
}
