/*
 * test_page_client.c - the monitored side of registration (page_client.c)
 * against a stand-in agent: a sequenced-packet socket this test listens on
 * and reads (or leaves with its backlog full).  Checks that the page
 * arrives sealed at its one size, that a full backlog never blocks the
 * caller (it gives up within its budget and leaves errno alone), that an
 * agent which accepts meanwhile still gets the page, that a burst of
 * processes registering at once all get through an agent that reads
 * nothing until they are done, and that a failure is said in exactly one
 * line.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "observer/page_client.h"
#include "core/abi/registration.h"
#include "core/abi/shared_page.h"
#include "core/abi/socket_name.h"

#define WATCHDOG_SECONDS 20 /* a registration that blocks kills the test instead of hanging it */
#define BUDGET_LIMIT_MS 1000 /* the client promises 200 ms; allow a loaded machine five times that */

static char agent_name[64];

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A stand-in agent socket under a name unique to this process and test,
 * listening with room for `backlog` connections (and one more: the
 * kernel's count). */
static int listen_agent(const char *tag, int backlog)
{
    snprintf(agent_name, sizeof agent_name, "@hw-test-page-client-%d-%s", (int)getpid(), tag);
    struct sockaddr_un addr;
    socklen_t len = 0;
    assert_int_equal(hw_socket_address(agent_name, &addr, &len), 0);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&addr, len), 0);
    assert_int_equal(listen(fd, backlog), 0);
    return fd;
}

static int bind_agent(const char *tag)
{
    return listen_agent(tag, 4);
}

/* Connections that fill the agent's backlog, each with a one-byte message. */
#define FILLERS_MAX 64
static int fillers[FILLERS_MAX];
static int filler_count;

static void fill_queue(void)
{
    struct sockaddr_un addr;
    socklen_t len = 0;
    assert_int_equal(hw_socket_address(agent_name, &addr, &len), 0);
    for (filler_count = 0; filler_count < FILLERS_MAX; filler_count++) {
        int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        assert_true(fd >= 0);
        if (connect(fd, (struct sockaddr *)&addr, len) != 0) {
            assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
            close(fd);
            break;
        }
        assert_int_equal(send(fd, "x", 1, 0), 1);
        fillers[filler_count] = fd;
    }
    assert_true(filler_count > 0 && filler_count < FILLERS_MAX);
}

static void close_fillers(void)
{
    while (filler_count > 0)
        close(fillers[--filler_count]);
}

/* Accept one connection and read its message: the SCM_RIGHTS descriptor
 * (or -1) and its size, or -1 when no connection waits. */
static ssize_t receive(int agent, int *fd_out, void *data, size_t size)
{
    *fd_out = -1;
    int conn = accept4(agent, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (conn < 0)
        return -1;
    struct pollfd p = {.fd = conn, .events = POLLIN};
    poll(&p, 1, 5000); /* the senders here send right after their connect */
    union {
        char buf[CMSG_SPACE(sizeof(int) * 4)];
        struct cmsghdr align;
    } control;
    struct iovec iov = {data, size};
    struct msghdr mh = {0};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = control.buf;
    mh.msg_controllen = sizeof control.buf;
    ssize_t n = recvmsg(conn, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); n >= 0 && cm != NULL; cm = CMSG_NXTHDR(&mh, cm))
        if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
            memcpy(fd_out, CMSG_DATA(cm), sizeof(int));
    close(conn);
    return n < 0 ? 0 : n;
}

/* Accept connections until one carries a registration; its page descriptor. */
static int receive_registration(int agent)
{
    int64_t deadline = now_ms() + 10000;
    while (now_ms() < deadline) {
        hw_registration msg;
        int fd;
        ssize_t n = receive(agent, &fd, &msg, sizeof msg);
        if (n == (ssize_t)sizeof msg && msg.magic == HW_REGISTRATION_MAGIC) {
            assert_int_equal(msg.pid, getpid());
            assert_true(fd >= 0);
            return fd;
        }
        if (fd >= 0)
            close(fd);
        if (n < 0) {
            struct pollfd p = {.fd = agent, .events = POLLIN};
            poll(&p, 1, 100);
        }
    }
    fail_msg("no registration arrived");
    return -1;
}

static void test_page_arrives_sealed(void **state)
{
    (void)state;
    int agent = bind_agent("sealed");
    hw_shared_page *page = hw_page_publish(agent_name, HW_PAGE_CLOCK_TSC, 0, 0);
    assert_non_null(page);
    int fd = receive_registration(agent);

    int seals = fcntl(fd, F_GET_SEALS);
    assert_true(seals >= 0);
    assert_int_equal(seals & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL), F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    assert_int_equal(st.st_size, HW_PAGE_SIZE);
    /* What a hostile registrant would do after the agent mapped the page. */
    errno = 0;
    assert_int_equal(ftruncate(fd, 0), -1);
    assert_int_equal(errno, EPERM);
    errno = 0;
    assert_int_equal(fcntl(fd, F_ADD_SEALS, 0), -1); /* and the seals cannot be changed */
    assert_int_equal(errno, EPERM);

    const hw_shared_page *seen = mmap(NULL, HW_PAGE_SIZE, PROT_READ, MAP_SHARED, fd, 0);
    assert_true(seen != MAP_FAILED);
    assert_true(hw_page_header_is_valid(seen, (int32_t)getpid()));
    assert_int_equal(seen->clock, HW_PAGE_CLOCK_TSC); /* the agent learns which clock the stamps count */
    munmap((void *)seen, HW_PAGE_SIZE);
    close(fd);
    munmap(page, HW_PAGE_SIZE);
    close(agent);
}

static void test_full_queue_does_not_block(void **state)
{
    (void)state;
    int agent = bind_agent("full");
    fill_queue();
    alarm(WATCHDOG_SECONDS);
    errno = EDOM; /* the caller's errno, which must survive */
    int64_t start = now_ms();
    hw_shared_page *page = hw_page_publish(agent_name, HW_PAGE_CLOCK_COARSE, HW_PAGE_FLAG_LAUNCHING, 1);
    int64_t took = now_ms() - start;
    alarm(0);
    assert_int_equal(errno, EDOM);
    assert_null(page);
    printf("gave up after %lld ms\n", (long long)took);
    assert_true(took < BUDGET_LIMIT_MS);
    close_fillers();
    close(agent);
}

typedef struct drainer {
    int agent;
    int64_t delay_ms;
    int page_fd; /* the registration's descriptor, once seen */
} drainer;

/* An agent that comes back to its socket a little later and accepts what
 * waits (the fillers first, which makes room for the registration). */
static void *drain_later(void *arg)
{
    drainer *d = arg;
    struct timespec ts = {0, (long)d->delay_ms * 1000000L}; /* the scenario: an agent busy for a while */
    nanosleep(&ts, NULL);
    d->page_fd = receive_registration(d->agent);
    return NULL;
}

static void test_draining_agent_gets_the_page(void **state)
{
    (void)state;
    int agent = bind_agent("drain");
    fill_queue();
    drainer d = {agent, 50, -1};
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, drain_later, &d), 0);
    alarm(WATCHDOG_SECONDS);
    hw_shared_page *page = hw_page_publish(agent_name, HW_PAGE_CLOCK_COARSE, 0, 0);
    alarm(0);
    assert_int_equal(pthread_join(thread, NULL), 0);
    assert_non_null(page);
    assert_true(d.page_fd >= 0);
    close(d.page_fd);
    munmap(page, HW_PAGE_SIZE);
    close_fillers();
    close(agent);
}

#define BURST_SENDERS 300
/* A sender's exit status: how long it took to register, in ms (at most
 * this), or GAVE_UP. */
#define TOOK_MAX_MS 250
#define GAVE_UP 255

static _Noreturn void register_and_tell(int start_fd)
{
    char c;
    while (read(start_fd, &c, 1) < 0 && errno == EINTR)
        ; /* the start: the parent closes its end */
    int64_t start = now_ms();
    hw_shared_page *page = hw_page_publish(agent_name, HW_PAGE_CLOCK_COARSE, 0, 0);
    int64_t took = now_ms() - start;
    _exit(page == NULL ? GAVE_UP : took < TOOK_MAX_MS ? (int)took : TOOK_MAX_MS);
}

/* BURST_SENDERS processes register at the same moment with a stand-in agent
 * that reads nothing until every one of them has ended: each must get in
 * without waiting for the agent (its message waits on its connection in the
 * agent's backlog), so the agent's pace, whatever the machine's load, never
 * makes one give up.  A datagram socket's queue (10 by default) made them
 * wait for the reader: 95-172 of 300 gave up when it got a CPU late. */
static void test_burst_of_senders_all_get_through(void **state)
{
    (void)state;
    int agent = listen_agent("burst", BURST_SENDERS);
    int start[2];
    assert_int_equal(pipe2(start, O_CLOEXEC), 0);
    pid_t senders[BURST_SENDERS];
    for (int i = 0; i < BURST_SENDERS; i++) {
        senders[i] = fork();
        assert_true(senders[i] >= 0);
        if (senders[i] == 0) {
            close(start[1]);
            register_and_tell(start[0]);
        }
    }
    close(start[0]);
    close(start[1]); /* all go */
    int gave_up = 0, slowest = 0;
    for (int i = 0; i < BURST_SENDERS; i++) {
        int status = 0;
        assert_int_equal(waitpid(senders[i], &status, 0), senders[i]);
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : GAVE_UP;
        if (code == GAVE_UP)
            gave_up++;
        else
            slowest = code > slowest ? code : slowest;
    }
    int received = 0;
    for (;;) {
        hw_registration msg;
        int fd;
        ssize_t n = receive(agent, &fd, &msg, sizeof msg);
        if (n < 0)
            break; /* every sender has ended: what waits is all there is */
        if (fd >= 0)
            close(fd);
        received += n == (ssize_t)sizeof msg && msg.magic == HW_REGISTRATION_MAGIC;
    }
    printf("burst: %d of %d registered with nobody reading, %d gave up; the slowest took %d ms\n", received,
           BURST_SENDERS, gave_up, slowest);
    assert_int_equal(gave_up, 0);
    assert_int_equal(received, BURST_SENDERS);
    close(agent);
}

/* Call hw_page_publish_or_warn with stderr caught (the line left in
 * `later`, if not NULL, then said twice); what was printed. */
static hw_shared_page *publish_catching_stderr_later(char *out, size_t size, hw_publish_warning *later)
{
    int pipe_fds[2];
    assert_int_equal(pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK), 0);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    assert_true(saved >= 0);
    assert_int_equal(dup2(pipe_fds[1], STDERR_FILENO), STDERR_FILENO);
    alarm(WATCHDOG_SECONDS);
    errno = ERANGE;
    hw_shared_page *page = hw_page_publish_or_warn(agent_name, HW_PAGE_CLOCK_COARSE, HW_PAGE_FLAG_LAUNCHING, 1, later);
    int errno_after = errno;
    if (later != NULL) {
        char none[8];
        assert_true(read(pipe_fds[0], none, sizeof none) < 0); /* nothing yet */
        hw_page_say_warning(later);
        hw_page_say_warning(later);
    }
    alarm(0);
    assert_int_equal(dup2(saved, STDERR_FILENO), STDERR_FILENO);
    close(saved);
    close(pipe_fds[1]);
    ssize_t n = read(pipe_fds[0], out, size - 1);
    close(pipe_fds[0]);
    out[n > 0 ? n : 0] = '\0';
    assert_int_equal(errno_after, ERANGE);
    return page;
}

static hw_shared_page *publish_catching_stderr(char *out, size_t size)
{
    return publish_catching_stderr_later(out, size, NULL);
}

static size_t count_char(const char *s, char c)
{
    size_t n = 0;
    for (; *s; s++)
        n += *s == c;
    return n;
}

static void test_failure_is_said_once(void **state)
{
    (void)state;
    char said[512], pid_part[64];
    snprintf(pid_part, sizeof pid_part, "this process (pid %d) could not register", (int)getpid());

    int agent = bind_agent("said");
    fill_queue();
    assert_null(publish_catching_stderr(said, sizeof said));
    printf("said: %s", said);
    assert_non_null(strstr(said, pid_part));
    assert_non_null(strstr(said, "queue stayed full"));
    assert_non_null(strstr(said, "it is not watched"));
    assert_int_equal(count_char(said, '\n'), 1);
    assert_int_equal(said[strlen(said) - 1], '\n');
    close_fillers();
    close(agent);

    /* Left for later (a forked child): said once when asked, however often. */
    agent = bind_agent("later");
    fill_queue();
    static hw_publish_warning later;
    assert_null(publish_catching_stderr_later(said, sizeof said, &later));
    assert_non_null(strstr(said, pid_part));
    assert_int_equal(count_char(said, '\n'), 1);
    close_fillers();
    close(agent);

    /* Nobody listens under that name any more. */
    assert_null(publish_catching_stderr(said, sizeof said));
    printf("said: %s", said);
    assert_non_null(strstr(said, pid_part));
    assert_non_null(strstr(said, "no agent at its socket: connection refused"));
    assert_int_equal(count_char(said, '\n'), 1);

    /* An agent of an older make, reading datagrams under that name. */
    struct sockaddr_un addr;
    socklen_t len = 0;
    assert_int_equal(hw_socket_address(agent_name, &addr, &len), 0);
    agent = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    assert_int_equal(bind(agent, (struct sockaddr *)&addr, len), 0);
    assert_null(publish_catching_stderr(said, sizeof said));
    printf("said: %s", said);
    assert_non_null(strstr(said, "the agent at its socket is an older hangwatch, which reads datagrams"));
    assert_int_equal(count_char(said, '\n'), 1);
    close(agent);

    /* Success says nothing. */
    agent = bind_agent("quiet");
    hw_shared_page *page = publish_catching_stderr(said, sizeof said);
    assert_non_null(page);
    assert_string_equal(said, "");
    close(receive_registration(agent));
    munmap(page, HW_PAGE_SIZE);
    close(agent);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_page_arrives_sealed),
        cmocka_unit_test(test_full_queue_does_not_block),
        cmocka_unit_test(test_draining_agent_gets_the_page),
        cmocka_unit_test(test_burst_of_senders_all_get_through),
        cmocka_unit_test(test_failure_is_said_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
