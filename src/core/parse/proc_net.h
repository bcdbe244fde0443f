/*
 * proc_net.h - finding one socket, by its inode, in the kernel's socket
 * tables (/proc/PID/net/tcp, tcp6, udp, udp6 and unix), so that a hang
 * report can say what a blocked thread waits on: "127.0.0.1:40312" talking
 * to "127.0.0.1:5432", or "/run/app.sock".  Pure: no OS calls; the tables
 * are read by the agent (agent/capture/fd_describe.h).
 *
 * The text comes from the kernel, but a unix socket's path is chosen by
 * whoever bound it, and the agent that reads it may run as root, so it is
 * parsed as hostile input: the text has an explicit length (it need not end
 * in a NUL), lines may be of any length, and what is copied out is bounded.
 * The kernel ends every line with a newline: bytes after the last newline
 * are a line cut short (a read that stopped at a cap) and never match.  A
 * line holding a NUL byte never matches either.  Inode 0 never matches
 * (the kernel writes 0 for sockets without one, TIME_WAIT entries).
 *
 * The inet tables (tcp, tcp6, udp, udp6): a header line, then lines such as
 *   "   2: 0100007F:BF82 0100007F:E9E1 01 00000000:00000000 00:00000000 00000000  1000  0 2608705 2 ..."
 * whose blank-separated fields are the slot ("2:"), the local and remote
 * ADDRESS:PORT, the state (hex), queues, timer, retransmits, uid, timeout,
 * the inode (decimal), then more.  ADDRESS is the address's 32-bit words
 * (one for IPv4, four for IPv6), each as the host reads it from memory in
 * eight hex digits: 0100007F is 127.0.0.1 on a little-endian machine.
 * PORT is the port itself in four hex digits (BF82 is 49026).  A line is
 * taken only when all of that is well formed and a field follows the
 * inode.
 *
 * The unix table: a header line, then "NUM: REFCOUNT PROTOCOL FLAGS TYPE
 * ST INODE" with, for a bound socket, one space and its path: the rest of
 * the line, as the kernel writes it (an abstract name begins with '@' and
 * its NUL bytes are '@' too).  A path may hold a newline, so a socket's
 * path can make up a line that claims another socket's inode; when two
 * lines claim an inode with different paths, the answer is unclear and
 * hw_proc_net_unix_find says false.
 *
 * Texts found are the kernel's bytes: whoever prints them escapes them
 * (core/text_escape.h).
 */
#ifndef HANGWATCH_PROC_NET_H
#define HANGWATCH_PROC_NET_H

#include <stdbool.h>
#include <stddef.h>

/* "255.255.255.255:65535" or "[ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255]:65535" fit. */
#define HW_INET_TEXT_MAX 64

/* One line of an inet table, in words. */
typedef struct hw_inet_socket {
    char local[HW_INET_TEXT_MAX];  /* "127.0.0.1:40312", "[::1]:5432" */
    char remote[HW_INET_TEXT_MAX]; /* the same; "0.0.0.0:0" / "[::]:0" when there is no peer */
    int state;                     /* the kernel's TCP state number (hw_tcp_state_name) */
} hw_inet_socket;

/* The line of inet table `text` (`len` bytes; ipv6: tcp6 or udp6, whose
 * addresses are 32 hex digits) whose inode is `inode`, into *out.  False
 * when there is none (then *out is untouched). */
bool hw_proc_net_inet_find(const char *text, size_t len, unsigned long long inode, bool ipv6, hw_inet_socket *out);

/* The other end of a connection on this machine: the inode of the line of
 * inet table `text` whose local endpoint is `remote` and whose remote is
 * `local` (texts as hw_inet_socket writes them), else, with *listening
 * set, of the socket listening on `remote`'s port (on its address or on
 * every address: a connection not yet accepted has no inode of its own).
 * 0 when there is none. */
unsigned long long hw_proc_net_inet_peer(const char *text, size_t len, bool ipv6, const char *local, const char *remote,
                                         bool *listening);

/* The path of the socket with inode `inode` in unix table `text` (`len`
 * bytes), into path (at most path_len - 1 bytes and a NUL; "" for a socket
 * that is not bound).  False when no line, or lines that disagree, name
 * that inode (then path is untouched). */
bool hw_proc_net_unix_find(const char *text, size_t len, unsigned long long inode, char *path, size_t path_len);

/* The name of TCP state `state` as the kernel spells it ("ESTABLISHED",
 * "SYN_SENT", "LISTEN", ...), "UNKNOWN" for a number it does not have. */
const char *hw_tcp_state_name(int state);

#endif
