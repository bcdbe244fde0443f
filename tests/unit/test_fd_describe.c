/*
 * test_fd_describe.c - what a descriptor is, in words
 * (agent/capture/fd_describe.h), on real descriptors the test opens in
 * itself: a pipe, a file in a scratch directory (and the same file once
 * deleted), TCP on 127.0.0.1 (listener, both ends of a connection, a socket
 * neither listening nor connected), TCP on ::1 when this machine has IPv6
 * loopback (skipped otherwise), UDP bound and connected, unix sockets bound
 * to a path and to an abstract name, an unnamed socketpair, a netlink
 * socket, an eventfd, and a closed descriptor.  The connection is also
 * described through a child process that inherited it (another pid, as the
 * agent sees a watched program).  Then the bounds: a table cap that the
 * tables exceed, and output buffers too small for the text, which is cut
 * at a whole UTF-8 character.  Last, a wait's other end looked for after
 * its descriptor was closed or reused (wait_peer.h).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <linux/netlink.h>

#include <cmocka.h>

#include "agent/capture/fd_describe.h"
#include "agent/capture/thread_time.h"
#include "agent/capture/wait_peer.h"

#define ARROW "\xe2\x86\x92"

static char scratch[256];

static int make_scratch(void **state)
{
    (void)state;
    char made[] = "/tmp/hw-fd-describe-XXXXXX";
    if (mkdtemp(made) == NULL || realpath(made, scratch) == NULL)
        return -1;
    return 0;
}

static int remove_scratch(void **state)
{
    (void)state;
    char command[300];
    snprintf(command, sizeof command, "rm -rf '%s'", scratch);
    return system(command) == 0 ? 0 : -1;
}

/* ---- helpers ------------------------------------------------------------ */

static hw_fd_kind describe(int fd, char *out, size_t len)
{
    hw_fd_kind kind = hw_fd_describe(getpid(), fd, out, len);
    assert_true(len == 0 || strlen(out) < len);
    return kind;
}

static void expect(int fd, hw_fd_kind kind, const char *text)
{
    char got[512];
    hw_fd_kind got_kind = describe(fd, got, sizeof got);
    if (got_kind != kind || strcmp(got, text) != 0)
        fail_msg("fd %d: %s \"%s\", not %s \"%s\"", fd, hw_fd_kind_name(got_kind), got, hw_fd_kind_name(kind), text);
}

static unsigned long long inode_of(int fd)
{
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    return (unsigned long long)st.st_ino;
}

/* Does this kernel name a socket's protocol (fd_describe then reads only
 * its table, and knows a TCP socket that no table lists)? */
static bool kernel_names_protocols(int fd)
{
    char path[64], name[32];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    return getxattr(path, "system.sockprotoname", name, sizeof name) > 0;
}

/* "127.0.0.1:40312" or "[::1]:5432" of a socket's own or peer's address. */
static void address_text(int fd, bool peer, char *out, size_t len)
{
    struct sockaddr_storage a;
    socklen_t n = sizeof a;
    assert_int_equal(peer ? getpeername(fd, (struct sockaddr *)&a, &n) : getsockname(fd, (struct sockaddr *)&a, &n), 0);
    char host[INET6_ADDRSTRLEN];
    if (a.ss_family == AF_INET6) {
        struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&a;
        assert_non_null(inet_ntop(AF_INET6, &v6->sin6_addr, host, sizeof host));
        snprintf(out, len, "[%s]:%u", host, ntohs(v6->sin6_port));
    } else {
        struct sockaddr_in *v4 = (struct sockaddr_in *)&a;
        assert_non_null(inet_ntop(AF_INET, &v4->sin_addr, host, sizeof host));
        snprintf(out, len, "%s:%u", host, ntohs(v4->sin_port));
    }
}

/* A listener on `loopback` (127.0.0.1 or ::1), a client connected to it and
 * the server's end; false (nothing open) when the family cannot be used. */
typedef struct connection {
    int listener, client, server;
} connection;

static bool open_connection(int family, connection *c)
{
    struct sockaddr_storage a;
    memset(&a, 0, sizeof a);
    socklen_t n;
    if (family == AF_INET6) {
        struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&a;
        v6->sin6_family = AF_INET6;
        v6->sin6_addr = in6addr_loopback;
        n = sizeof *v6;
    } else {
        struct sockaddr_in *v4 = (struct sockaddr_in *)&a;
        v4->sin_family = AF_INET;
        v4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        n = sizeof *v4;
    }
    c->listener = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->listener < 0)
        return false;
    if (bind(c->listener, (struct sockaddr *)&a, n) != 0 || listen(c->listener, 4) != 0 ||
        getsockname(c->listener, (struct sockaddr *)&a, &n) != 0) {
        close(c->listener);
        return false;
    }
    c->client = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(c->client >= 0);
    assert_int_equal(connect(c->client, (struct sockaddr *)&a, n), 0);
    c->server = accept4(c->listener, NULL, NULL, SOCK_CLOEXEC);
    assert_true(c->server >= 0);
    return true;
}

static void close_connection(connection *c)
{
    close(c->client);
    close(c->server);
    close(c->listener);
}

/* The three sockets of a connection, described exactly. */
static void expect_connection(const connection *c)
{
    char client[64], server[64], text[256];
    address_text(c->client, false, client, sizeof client);
    address_text(c->server, false, server, sizeof server);
    snprintf(text, sizeof text, "TCP %s " ARROW " %s (ESTABLISHED)", client, server);
    expect(c->client, HW_FD_TCP, text);
    snprintf(text, sizeof text, "TCP %s " ARROW " %s (ESTABLISHED)", server, client);
    expect(c->server, HW_FD_TCP, text);
    snprintf(text, sizeof text, "TCP %s (LISTEN)", server);
    expect(c->listener, HW_FD_TCP, text);
}

/* ---- files and pipes ------------------------------------------------------ */

static void test_pipe(void **state)
{
    (void)state;
    int p[2];
    assert_int_equal(pipe(p), 0);
    char text[64];
    snprintf(text, sizeof text, "pipe:[%llu]", inode_of(p[0]));
    expect(p[0], HW_FD_PIPE, text);
    expect(p[1], HW_FD_PIPE, text);
    close(p[0]);
    close(p[1]);
}

static void test_regular_file(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/a file \xc3\xa9.txt", scratch);
    int fd = open(path, O_CREAT | O_RDWR | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    expect(fd, HW_FD_FILE, path);
    assert_int_equal(unlink(path), 0);
    char deleted[600];
    snprintf(deleted, sizeof deleted, "%s (deleted)", path);
    expect(fd, HW_FD_FILE, deleted);
    close(fd);
}

static void test_other_descriptors(void **state)
{
    (void)state;
    int fd = eventfd(0, EFD_CLOEXEC);
    assert_true(fd >= 0);
    expect(fd, HW_FD_OTHER, "anon_inode:[eventfd]");
    close(fd);
}

static void test_closed_descriptor(void **state)
{
    (void)state;
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    close(fd);
    char text[64];
    snprintf(text, sizeof text, "fd %d (unreadable: %s)", fd, strerror(ENOENT));
    expect(fd, HW_FD_UNKNOWN, text);
    expect(-1, HW_FD_UNKNOWN, "fd -1 (unreadable: No such file or directory)");
    /* A process that is not there. */
    char got[128];
    assert_int_equal(hw_fd_describe(-5, 0, got, sizeof got), HW_FD_UNKNOWN);
    assert_string_equal(got, "fd 0 (unreadable: No such file or directory)");
}

/* ---- sockets -------------------------------------------------------------- */

static void test_tcp_ipv4(void **state)
{
    (void)state;
    connection c;
    assert_true(open_connection(AF_INET, &c));
    expect_connection(&c);
    char text[256];
    assert_int_equal(describe(c.client, text, sizeof text), HW_FD_TCP);
    assert_non_null(strstr(text, "127.0.0.1:"));
    assert_non_null(strstr(text, ARROW));
    assert_non_null(strstr(text, "(ESTABLISHED)"));
    close_connection(&c);
}

static void test_tcp_ipv6(void **state)
{
    (void)state;
    connection c;
    if (!open_connection(AF_INET6, &c)) {
        print_message("no IPv6 loopback here (%s): skipping TCP on ::1\n", strerror(errno));
        return;
    }
    expect_connection(&c);
    char text[256];
    assert_int_equal(describe(c.client, text, sizeof text), HW_FD_TCP);
    assert_true(strncmp(text, "TCP [::1]:", 10) == 0);
    close_connection(&c);
}

static void test_tcp_neither_listening_nor_connected(void **state)
{
    (void)state;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    char text[128];
    if (kernel_names_protocols(fd)) {
        snprintf(text, sizeof text, "TCP socket:[%llu], neither listening nor connected", inode_of(fd));
        expect(fd, HW_FD_TCP, text);
    } else {
        snprintf(text, sizeof text, "socket:[%llu]", inode_of(fd));
        expect(fd, HW_FD_SOCKET_OTHER, text);
    }
    close(fd);
}

static void test_udp(void **state)
{
    (void)state;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int bound = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    int connected = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    assert_true(bound >= 0 && connected >= 0);
    assert_int_equal(bind(bound, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t n = sizeof a;
    assert_int_equal(getsockname(bound, (struct sockaddr *)&a, &n), 0);
    assert_int_equal(connect(connected, (struct sockaddr *)&a, sizeof a), 0);

    char local[64], peer[64], text[256];
    address_text(bound, false, local, sizeof local);
    snprintf(text, sizeof text, "UDP %s", local);
    expect(bound, HW_FD_UDP, text);
    address_text(connected, false, local, sizeof local);
    address_text(connected, true, peer, sizeof peer);
    snprintf(text, sizeof text, "UDP %s " ARROW " %s", local, peer);
    expect(connected, HW_FD_UDP, text);
    close(bound);
    close(connected);
}

static void test_unix_sockets(void **state)
{
    (void)state;
    /* Bound to a path. */
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    int path_len = snprintf(a.sun_path, sizeof a.sun_path, "%s/app.sock", scratch);
    assert_true(path_len > 0 && (size_t)path_len < sizeof a.sun_path);
    int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(listener >= 0);
    assert_int_equal(bind(listener, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(listener, 1), 0);
    char text[300];
    snprintf(text, sizeof text, "unix socket %s", a.sun_path);
    expect(listener, HW_FD_UNIX, text);
    /* A client of it has no name of its own. */
    int client = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(client >= 0);
    assert_int_equal(connect(client, (struct sockaddr *)&a, sizeof a), 0);
    expect(client, HW_FD_UNIX, "unix socket (unnamed)");

    /* Bound to an abstract name. */
    struct sockaddr_un abstract = {.sun_family = AF_UNIX};
    int name_len = snprintf(abstract.sun_path + 1, sizeof abstract.sun_path - 1, "hangwatch-test-%d", (int)getpid());
    int named = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    assert_true(named >= 0);
    assert_int_equal(
        bind(named, (struct sockaddr *)&abstract, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + name_len)),
        0);
    snprintf(text, sizeof text, "unix socket @hangwatch-test-%d", (int)getpid());
    expect(named, HW_FD_UNIX, text);

    /* A socketpair. */
    int pair[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
    expect(pair[0], HW_FD_UNIX, "unix socket (unnamed)");
    expect(pair[1], HW_FD_UNIX, "unix socket (unnamed)");

    close(pair[0]);
    close(pair[1]);
    close(named);
    close(client);
    close(listener);
}

static void test_other_socket(void **state)
{
    (void)state;
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (fd < 0) {
        print_message("no netlink socket here (%s): skipped\n", strerror(errno));
        return;
    }
    char text[128];
    if (kernel_names_protocols(fd))
        snprintf(text, sizeof text, "socket:[%llu] (NETLINK)", inode_of(fd));
    else
        snprintf(text, sizeof text, "socket:[%llu]", inode_of(fd));
    expect(fd, HW_FD_SOCKET_OTHER, text);
    close(fd);
}

static void test_another_process(void **state)
{
    (void)state;
    connection c;
    assert_true(open_connection(AF_INET, &c));
    int ready[2];
    assert_int_equal(pipe(ready), 0);
    /* The child keeps the connection's descriptors (made CLOEXEC, but it
     * does not exec): they are the same sockets under another pid. */
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        close(ready[0]);
        char byte = 1;
        if (write(ready[1], &byte, 1) != 1)
            _exit(1);
        pause();
        _exit(0);
    }
    close(ready[1]);
    char byte;
    assert_int_equal(read(ready[0], &byte, 1), 1);
    close(ready[0]);

    char mine[256], theirs[256];
    assert_int_equal(describe(c.client, mine, sizeof mine), HW_FD_TCP);
    assert_int_equal(hw_fd_describe(child, c.client, theirs, sizeof theirs), HW_FD_TCP);
    assert_string_equal(theirs, mine);
    assert_int_equal(hw_fd_describe(child, ready[1], theirs, sizeof theirs), HW_FD_PIPE);
    kill(child, SIGKILL);
    int status;
    assert_int_equal(waitpid(child, &status, 0), child);
    close_connection(&c);
}

/* ---- bounds --------------------------------------------------------------- */

static void test_table_cap(void **state)
{
    (void)state;
    connection c;
    assert_true(open_connection(AF_INET, &c));
    /* No table's header and first line fit in 64 bytes: the socket is not
     * found, and the text says why. */
    char text[256], want[128];
    assert_int_equal(hw_fd_describe_capped(getpid(), c.client, 64, text, sizeof text), HW_FD_SOCKET_OTHER);
    snprintf(want, sizeof want, "socket:[%llu] (", inode_of(c.client));
    assert_true(strncmp(text, want, strlen(want)) == 0);
    assert_non_null(strstr(text, "/net/tcp is over 64 bytes, not searched whole)"));
    assert_int_equal(hw_fd_describe_capped(getpid(), c.client, 0, text, sizeof text), HW_FD_SOCKET_OTHER);
    assert_non_null(strstr(text, "is over 0 bytes"));
    /* A cap the table fits in finds it. */
    assert_int_equal(hw_fd_describe_capped(getpid(), c.client, 1u << 20, text, sizeof text), HW_FD_TCP);
    assert_int_equal(hw_fd_describe(getpid(), c.client, want, sizeof want), HW_FD_TCP);
    assert_string_equal(text, want);
    close_connection(&c);
}

static void test_small_output_buffers(void **state)
{
    (void)state;
    connection c;
    assert_true(open_connection(AF_INET, &c));
    char full[256];
    assert_int_equal(describe(c.client, full, sizeof full), HW_FD_TCP);
    size_t arrow_at = (size_t)(strstr(full, ARROW) - full);

    /* Every size: a prefix of the full text, whole characters only. */
    for (size_t len = 1; len <= strlen(full) + 1; len++) {
        char got[256];
        memset(got, 'Z', sizeof got);
        assert_int_equal(describe(c.client, got, len), HW_FD_TCP);
        size_t n = strlen(got);
        assert_true(n < len);
        assert_memory_equal(got, full, n);
        if (n > arrow_at && n < arrow_at + 3)
            fail_msg("cut inside the arrow: %zu bytes", n);
        if (len - 1 <= arrow_at)
            assert_int_equal(n, len - 1);
        else if (len - 1 < arrow_at + 3)
            assert_int_equal(n, arrow_at); /* the arrow does not fit whole */
        else
            assert_int_equal(n, len - 1 < strlen(full) ? len - 1 : strlen(full));
        assert_int_equal(got[len], 'Z'); /* nothing past the buffer */
    }
    /* len 0: nothing is written. */
    char untouched[4] = "abc";
    assert_int_equal(describe(c.client, untouched, 0), HW_FD_TCP);
    assert_string_equal(untouched, "abc");
    assert_int_equal(hw_fd_describe(getpid(), c.client, NULL, 0), HW_FD_TCP);
    close_connection(&c);
}

/* The other end of a wait is looked for after the capture, by the report:
 * a descriptor closed, or handed to another pipe, by then is said so, and
 * never taken for the one the thread waited on. */
static void test_peer_after_the_wait(void **state)
{
    (void)state;
    int p[2];
    assert_int_equal(pipe(p), 0);
    hw_blocked_look look = {.valid = true, .in_syscall = true, .syscall = SYS_read, .fd = p[0]};
    hw_blocked_look_describe_fd(getpid(), &look);
    assert_string_equal(look.fd_kind, "pipe");
    assert_true(strncmp(look.fd_object, "pipe:[", 6) == 0);
    hw_wait_peer_find(getpid(), (pid_t)syscall(SYS_gettid), &look);
    assert_int_equal(look.peer.pid, getpid()); /* its writer: p[1], ours */
    assert_string_equal(look.peer.role, "writer");
    assert_null(look.peer.missing);

    close(p[0]);
    hw_wait_peer_find(getpid(), (pid_t)syscall(SYS_gettid), &look);
    assert_int_equal(look.peer.pid, 0);
    assert_non_null(look.peer.missing);
    assert_non_null(strstr(look.peer.missing, "closed"));

    int q[2];
    assert_int_equal(pipe(q), 0);
    assert_int_equal(q[0], look.fd); /* the lowest free number: the one closed */
    hw_wait_peer_find(getpid(), (pid_t)syscall(SYS_gettid), &look);
    assert_int_equal(look.peer.pid, 0);
    assert_non_null(look.peer.missing);
    assert_non_null(strstr(look.peer.missing, "another one's"));

    /* A file's descriptor has no other end, and nothing is missing. */
    hw_blocked_look file = {.valid = true, .in_syscall = true, .syscall = SYS_read, .fd = open("/dev/null", O_RDONLY)};
    hw_blocked_look_describe_fd(getpid(), &file);
    assert_string_equal(file.fd_object, "");
    hw_wait_peer_find(getpid(), (pid_t)syscall(SYS_gettid), &file);
    assert_null(file.peer.missing);
    close(file.fd);
    close(p[1]);
    close(q[0]);
    close(q[1]);
}

static void test_kind_names(void **state)
{
    (void)state;
    assert_string_equal(hw_fd_kind_name(HW_FD_FILE), "file");
    assert_string_equal(hw_fd_kind_name(HW_FD_PIPE), "pipe");
    assert_string_equal(hw_fd_kind_name(HW_FD_TCP), "tcp");
    assert_string_equal(hw_fd_kind_name(HW_FD_UDP), "udp");
    assert_string_equal(hw_fd_kind_name(HW_FD_UNIX), "unix");
    assert_string_equal(hw_fd_kind_name(HW_FD_SOCKET_OTHER), "socket");
    assert_string_equal(hw_fd_kind_name(HW_FD_OTHER), "other");
    assert_string_equal(hw_fd_kind_name(HW_FD_UNKNOWN), "unknown");
    assert_string_equal(hw_fd_kind_name((hw_fd_kind)99), "unknown");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pipe),
        cmocka_unit_test_setup_teardown(test_regular_file, make_scratch, remove_scratch),
        cmocka_unit_test(test_other_descriptors),
        cmocka_unit_test(test_closed_descriptor),
        cmocka_unit_test(test_tcp_ipv4),
        cmocka_unit_test(test_tcp_ipv6),
        cmocka_unit_test(test_tcp_neither_listening_nor_connected),
        cmocka_unit_test(test_udp),
        cmocka_unit_test_setup_teardown(test_unix_sockets, make_scratch, remove_scratch),
        cmocka_unit_test(test_other_socket),
        cmocka_unit_test(test_another_process),
        cmocka_unit_test(test_table_cap),
        cmocka_unit_test(test_small_output_buffers),
        cmocka_unit_test(test_peer_after_the_wait),
        cmocka_unit_test(test_kind_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
