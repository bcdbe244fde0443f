/*
 * page_client.c - see page_client.h.
 *
 * Registration must never hold the program up: it runs in constructors and
 * in a child right after fork(), and the agent may be stopped, busy, or
 * flooded.  The agent listens on a sequenced-packet socket: a sender
 * connects, sends its one message and closes, and the message waits in the
 * kernel on the connection until the agent accepts it.  The wait is only
 * for a place in the listen backlog (as many as the agent watches), never
 * for the agent to read, so a burst of a thousand processes forked at once
 * goes through whatever the agent's pace (decisions §59).  A full backlog is
 * waited out in a blocking connect() bounded by SO_SNDTIMEO, the whole attempt
 * at most REGISTRATION_BUDGET_MS: long enough for an agent that is draining
 * a fork storm, short enough that nobody notices a process that gives up.
 * Everything here is a system call on stack buffers: no stdio, no malloc,
 * async-signal-safe.
 */
#include "page_client.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "core/abi/registration.h"
#include "core/abi/socket_name.h"

#define REGISTRATION_BUDGET_MS 200
#define PAGE_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

/* Why a registration failed, for the one line that says so. */
typedef struct publish_failure {
    const char *step; /* what was being done */
    int error;        /* its errno */
} publish_failure;

static int64_t monotonic_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Sets the send timeout (it bounds connect() too) to what is left of the
 * budget; false when none is left or it cannot be set. */
static bool budget_left(int sock, int64_t deadline, publish_failure *failure)
{
    int64_t left = deadline - monotonic_ms();
    if (left <= 0) {
        *failure = (publish_failure){"the agent's queue stayed full for 200 ms", 0};
        return false;
    }
    struct timeval timeout = {.tv_sec = (time_t)(left / 1000), .tv_usec = (suseconds_t)(left % 1000) * 1000};
    if (setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout) != 0) {
        *failure = (publish_failure){"setting the send timeout", errno};
        return false;
    }
    return true;
}

/* Is a datagram socket bound under that name (an agent of before the
 * listening socket)?  Asked only once a registration has failed. */
static bool reads_datagrams(const struct sockaddr_un *addr, socklen_t addr_len)
{
    int sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (sock < 0)
        return false;
    bool bound = connect(sock, (const struct sockaddr *)addr, addr_len) == 0;
    close(sock);
    return bound;
}

/* Connect to the agent, waiting for room in its backlog within the budget. */
static bool connect_agent(int sock, const struct sockaddr_un *addr, socklen_t addr_len, int64_t deadline,
                          publish_failure *failure)
{
    for (;;) {
        if (!budget_left(sock, deadline, failure))
            return false;
        if (connect(sock, (const struct sockaddr *)addr, addr_len) == 0)
            return true;
        if (errno == EINTR || errno == EAGAIN)
            continue; /* a signal, or the timeout: the budget says whether to go on */
        int error = errno;
        if (error == ECONNREFUSED && reads_datagrams(addr, addr_len))
            *failure = (publish_failure){"the agent at its socket is an older hangwatch, which reads datagrams", 0};
        else
            *failure = (publish_failure){"no agent at its socket", error};
        return false;
    }
}

/* Send the page's descriptor; 0, or -1 with *failure filled in. */
static int send_registration(const char *socket_name, int memfd, publish_failure *failure)
{
    struct sockaddr_un addr;
    socklen_t addr_len;
    int rc = hw_socket_address(socket_name, &addr, &addr_len);
    if (rc != 0) {
        *failure = (publish_failure){"the agent's socket name is unusable", -rc};
        return -1;
    }
    int sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (sock < 0) {
        *failure = (publish_failure){"socket", errno};
        return -1;
    }
    const int64_t deadline = monotonic_ms() + REGISTRATION_BUDGET_MS;
    if (!connect_agent(sock, &addr, addr_len, deadline, failure)) {
        close(sock);
        return -1;
    }

    hw_registration msg = {HW_REGISTRATION_MAGIC, HW_PAGE_VERSION, (int32_t)getpid(), 0};
    struct iovec iov = {&msg, sizeof msg};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } control;
    memset(&control, 0, sizeof control);
    struct msghdr mh = {0};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = control.buf;
    mh.msg_controllen = sizeof control.buf;
    struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &memfd, sizeof(int));

    /* The connection's own queue is empty: the message goes in at once.  A
     * signal before it did is the only reason to send again. */
    ssize_t sent;
    while ((sent = sendmsg(sock, &mh, MSG_NOSIGNAL)) < 0 && errno == EINTR) {
        if (!budget_left(sock, deadline, failure)) {
            close(sock);
            return -1;
        }
    }
    if (sent != (ssize_t)sizeof msg) {
        *failure = sent >= 0 ? (publish_failure){"the agent took part of the message", EMSGSIZE}
                             : (publish_failure){"sending to the agent", errno};
        close(sock);
        return -1;
    }
    close(sock);
    return 0;
}

/* Make a sealed, mapped, filled-in page and hand it over.  The page, or NULL
 * with *failure filled in. */
static hw_shared_page *publish(const char *socket_name, uint32_t clock, uint32_t flags, uint64_t now_ns,
                               publish_failure *failure)
{
    int memfd = memfd_create("hangwatch-loop", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (memfd < 0) {
        *failure = (publish_failure){"memfd_create", errno};
        return NULL;
    }
    /* Sealed to its one size before the agent ever maps it: a page that
     * could shrink would make the agent's reads fault (SIGBUS). */
    if (ftruncate(memfd, HW_PAGE_SIZE) != 0) {
        *failure = (publish_failure){"ftruncate", errno};
        close(memfd);
        return NULL;
    }
    if (fcntl(memfd, F_ADD_SEALS, PAGE_SEALS) != 0) {
        *failure = (publish_failure){"sealing the page", errno};
        close(memfd);
        return NULL;
    }
    hw_shared_page *page = mmap(NULL, HW_PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
    if (page == MAP_FAILED) {
        *failure = (publish_failure){"mmap", errno};
        close(memfd);
        return NULL;
    }
    page->magic = HW_PAGE_MAGIC;
    page->version = HW_PAGE_VERSION;
    page->page_size = HW_PAGE_SIZE;
    page->pid = (int32_t)getpid();
    page->slot_count = HW_PAGE_SLOTS;
    page->clock = clock;
    hw_loop_slot *main_slot = &page->slots[0];
    atomic_store_explicit(&main_slot->tid, (int32_t)getpid(), memory_order_relaxed);
    if (flags & HW_PAGE_FLAG_LAUNCHING) {
        hw_observe(main_slot, HW_ACTIVITY_ENTRY, 0);
        hw_observe(main_slot, HW_ACTIVITY_BEFORE_SOURCES, now_ns);
    }
    atomic_store_explicit(&page->flags, flags, memory_order_release);
    int rc = send_registration(socket_name, memfd, failure);
    close(memfd);
    if (rc != 0) {
        munmap(page, HW_PAGE_SIZE);
        return NULL;
    }
    return page;
}

hw_shared_page *hw_page_publish(const char *socket_name, uint32_t clock, uint32_t flags, uint64_t now_ns)
{
    int saved_errno = errno;
    publish_failure failure;
    hw_shared_page *page = publish(socket_name, clock, flags, now_ns, &failure);
    errno = saved_errno;
    return page;
}

/* ---- the one line on stderr, built without stdio ---- */

typedef struct line_buffer {
    char text[320];
    size_t used;
} line_buffer;

static void append_text(line_buffer *line, const char *s)
{
    while (*s != '\0' && line->used < sizeof line->text)
        line->text[line->used++] = *s++;
}

static void append_number(line_buffer *line, unsigned long value)
{
    char digits[24];
    size_t n = 0;
    do {
        digits[n++] = (char)('0' + value % 10);
        value /= 10;
    } while (value != 0);
    while (n > 0 && line->used < sizeof line->text)
        line->text[line->used++] = digits[--n];
}

/* A few errno values by name (strerror is not async-signal-safe). */
static const char *errno_text(int error)
{
    switch (error) {
    case ECONNREFUSED:
        return "connection refused";
    case ENOENT:
        return "no such file";
    case EACCES:
    case EPERM:
        return "permission denied";
    case EMFILE:
    case ENFILE:
        return "too many open files";
    case ENOMEM:
        return "out of memory";
    case ENOBUFS:
        return "no buffer space";
    case EINVAL:
        return "invalid argument";
    case ENAMETOOLONG:
        return "name too long";
    default:
        return NULL;
    }
}

static void write_line(const char *text, size_t length)
{
    ssize_t written;
    do
        written = write(STDERR_FILENO, text, length);
    while (written < 0 && errno == EINTR);
}

hw_shared_page *hw_page_publish_or_warn(const char *socket_name, uint32_t clock, uint32_t flags,
                                        uint64_t now_ns, hw_publish_warning *later)
{
    int saved_errno = errno;
    publish_failure failure;
    hw_shared_page *page = publish(socket_name, clock, flags, now_ns, &failure);
    if (page == NULL) {
        line_buffer line = {.used = 0};
        append_text(&line, "hangwatch: this process (pid ");
        append_number(&line, (unsigned long)getpid());
        append_text(&line, ") could not register with the agent (");
        append_text(&line, failure.step);
        if (failure.error != 0) {
            append_text(&line, ": ");
            const char *text = errno_text(failure.error);
            if (text != NULL) {
                append_text(&line, text);
            } else {
                append_text(&line, "errno ");
                append_number(&line, (unsigned long)failure.error);
            }
        }
        append_text(&line, "): it is not watched\n");
        if (later != NULL) {
            memcpy(later->text, line.text, line.used);
            atomic_store_explicit(&later->length, line.used, memory_order_release);
        } else {
            write_line(line.text, line.used);
        }
    }
    errno = saved_errno;
    return page;
}

void hw_page_say_warning(hw_publish_warning *w)
{
    size_t length = atomic_exchange_explicit(&w->length, 0, memory_order_acquire);
    if (length == 0 || length > sizeof w->text)
        return;
    int saved_errno = errno;
    write_line(w->text, length);
    errno = saved_errno;
}
