/*
 * fd_describe.h - what a file descriptor of another process is, in words,
 * so that a hang report can say "blocked in recvfrom on TCP
 * 127.0.0.1:40312 → 127.0.0.1:5432 (ESTABLISHED)" or "read on
 * pipe:[81234]" rather than a bare number.
 *
 * It reads /proc/PID/fd/FD's link.  A socket is looked up by its inode in
 * the process's own network namespace's tables (/proc/PID/net/tcp, tcp6,
 * udp, udp6, unix; parsed by core/parse/proc_net.h); which table is read
 * first comes from the socket's protocol name (the "system.sockprotoname"
 * attribute sockets carry), and only that one is read when the name is
 * known.  A TCP socket that its table does not list is neither listening
 * nor connected, a UDP one is not bound: they are said so.  Each table is
 * read up to a cap: past it, a socket not found in what was read is
 * described as "socket:[N]" with the reason.
 *
 * Everything read is the watched process's or the kernel's (a unix
 * socket's path, a file's name): the text keeps its bytes, whoever prints
 * it escapes it (core/text_escape.h).  The descriptor may be closed or
 * replaced while it is being described: the answer is then about whatever
 * the link named when it was read, or HW_FD_UNKNOWN.
 */
#ifndef HANGWATCH_FD_DESCRIBE_H
#define HANGWATCH_FD_DESCRIBE_H

#include <stddef.h>
#include <sys/types.h>

typedef enum hw_fd_kind {
    HW_FD_UNKNOWN,       /* the link could not be read: "fd 7 (unreadable: No such file or directory)" */
    HW_FD_FILE,          /* a path: "/var/lib/app/db" */
    HW_FD_PIPE,          /* "pipe:[81234]" */
    HW_FD_TCP,           /* "TCP 127.0.0.1:40312 → 127.0.0.1:5432 (ESTABLISHED)", "TCP [::1]:5432 (LISTEN)" */
    HW_FD_UDP,           /* "UDP 127.0.0.1:5353", "UDP 127.0.0.1:40000 → 127.0.0.1:53" */
    HW_FD_UNIX,          /* "unix socket /run/app.sock", "unix socket @name", "unix socket (unnamed)" */
    HW_FD_SOCKET_OTHER,  /* another socket, or one not found: "socket:[N] (NETLINK)" */
    HW_FD_OTHER,         /* anything else, as the link says: "anon_inode:[eventfd]" */
} hw_fd_kind;

/* How much of each /proc/PID/net table is read. */
#define HW_FD_NET_TABLE_MAX (8u << 20)

/* What fd `fd` of process `pid` is, in words, into out (always
 * NUL-terminated when len > 0, cut at a UTF-8 character's boundary); its
 * kind. */
hw_fd_kind hw_fd_describe(pid_t pid, int fd, char *out, size_t len);

/* hw_fd_describe reading at most `table_cap` bytes of each /proc/PID/net
 * table (hw_fd_describe's is HW_FD_NET_TABLE_MAX; tests take less). */
hw_fd_kind hw_fd_describe_capped(pid_t pid, int fd, size_t table_cap, char *out, size_t len);

/* hw_fd_describe, and the kernel's name of the socket or pipe behind it
 * into `object` ("socket:[81234]", "pipe:[81235]"; "" for anything
 * else): which one it was, should the descriptor be closed or reused
 * later. */
hw_fd_kind hw_fd_describe_object(pid_t pid, int fd, char *out, size_t len, char *object, size_t object_len);

/* "file", "pipe", "tcp", "udp", "unix", "socket", "other", "unknown". */
const char *hw_fd_kind_name(hw_fd_kind kind);

#endif
