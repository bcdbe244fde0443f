/*
 * fd_describe.c - see fd_describe.h.  One readlink says what the
 * descriptor is; a socket then costs a getxattr for its protocol and the
 * read of one /proc/PID/net table (all five when the protocol cannot be
 * read), each read whole up to the cap, since the kernel writes a table
 * afresh on every read and a socket's line may be anywhere in it.  A busy
 * server's tcp table is about 150 bytes a connection: the 8 MiB cap holds
 * some 55,000 of them.
 */
#include "fd_describe.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "agent/capture/proc_task.h"
#include "core/parse/proc_net.h"

#define ARROW "\xe2\x86\x92" /* U+2192 RIGHTWARDS ARROW, in UTF-8 */
#define LINK_TEXT_MAX 4096   /* the kernel writes no longer link (d_path fails past a page) */

/* A socket table under /proc/PID/net, and the protocol name
 * ("system.sockprotoname") of the sockets it lists. */
typedef struct net_table {
    const char *file;
    const char *protocol; /* for "UNIX", a prefix: UNIX, UNIX-STREAM, ... */
    hw_fd_kind kind;
    bool ipv6;
    const char *when_absent; /* why such a socket is not listed */
} net_table;

static const net_table net_tables[] = {
    {"tcp", "TCP", HW_FD_TCP, false, "neither listening nor connected"},
    {"tcp6", "TCPv6", HW_FD_TCP, true, "neither listening nor connected"},
    {"udp", "UDP", HW_FD_UDP, false, "not bound"},
    {"udp6", "UDPv6", HW_FD_UDP, true, "not bound"},
    {"unix", "UNIX", HW_FD_UNIX, false, NULL}, /* every unix socket is listed */
};
#define NET_TABLES (sizeof net_tables / sizeof net_tables[0])

const char *hw_fd_kind_name(hw_fd_kind kind)
{
    switch (kind) {
    case HW_FD_FILE:
        return "file";
    case HW_FD_PIPE:
        return "pipe";
    case HW_FD_TCP:
        return "tcp";
    case HW_FD_UDP:
        return "udp";
    case HW_FD_UNIX:
        return "unix";
    case HW_FD_SOCKET_OTHER:
        return "socket";
    case HW_FD_OTHER:
        return "other";
    case HW_FD_UNKNOWN:
        break;
    }
    return "unknown";
}

/* out[0, end) was cut at `end`: if that split a UTF-8 character, drop its
 * first bytes too, so the text stays whole characters. */
static void end_at_character(char *out, size_t end)
{
    size_t continuation = 0;
    while (continuation < 3 && continuation < end && ((unsigned char)out[end - 1 - continuation] & 0xC0) == 0x80)
        continuation++;
    if (continuation < end) {
        size_t lead_at = end - 1 - continuation;
        unsigned char lead = (unsigned char)out[lead_at];
        size_t length = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
        if (length > continuation + 1) {
            out[lead_at] = '\0';
            return;
        }
    }
    out[end] = '\0';
}

/* printf into out[len] (nothing when len is 0), cut at a character. */
static void say(char *out, size_t len, const char *format, ...) __attribute__((format(printf, 3, 4)));
static void say(char *out, size_t len, const char *format, ...)
{
    if (len == 0)
        return;
    va_list ap;
    va_start(ap, format);
    int n = vsnprintf(out, len, format, ap);
    va_end(ap);
    if (n < 0)
        out[0] = '\0';
    else if ((size_t)n >= len)
        end_at_character(out, len - 1);
}

/* The socket's protocol name ("TCP", "UDPv6", "UNIX-STREAM", "NETLINK"),
 * letters, digits and '-' only; "" when it cannot be read. */
static void socket_protocol(const char *link_path, char *name, size_t size)
{
    ssize_t n = getxattr(link_path, "system.sockprotoname", name, size - 1);
    if (n <= 0) {
        name[0] = '\0';
        return;
    }
    name[n] = '\0';
    for (ssize_t i = 0; i < n && name[i] != '\0'; i++) {
        char c = name[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) {
            name[0] = '\0'; /* not a protocol name the kernel writes */
            return;
        }
    }
}

static bool table_lists(const net_table *t, const char *protocol)
{
    if (t->kind == HW_FD_UNIX)
        return strncmp(protocol, t->protocol, strlen(t->protocol)) == 0;
    return strcmp(protocol, t->protocol) == 0;
}

/* A remote address of port 0 is no peer (a listening or unconnected socket). */
static bool has_peer(const char *remote)
{
    size_t n = strlen(remote);
    return !(n >= 2 && strcmp(remote + n - 2, ":0") == 0);
}

/* Look socket `inode` up in table t: its kind and *out when found,
 * HW_FD_UNKNOWN when not (*cut: the table went on past the cap). */
static hw_fd_kind find_in_table(pid_t pid, const net_table *t, unsigned long long inode, size_t cap, bool *cut,
                                char *out, size_t len)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/net/%s", (int)pid, t->file);
    size_t text_len;
    int err;
    char *text = hw_proc_read_capped(path, cap, &text_len, cut, &err);
    if (text == NULL)
        return HW_FD_UNKNOWN;
    hw_fd_kind kind = HW_FD_UNKNOWN;
    if (t->kind == HW_FD_UNIX) {
        char name[256];
        if (hw_proc_net_unix_find(text, text_len, inode, name, sizeof name)) {
            kind = HW_FD_UNIX;
            say(out, len, "unix socket %s", name[0] != '\0' ? name : "(unnamed)");
        }
    } else {
        hw_inet_socket s;
        if (hw_proc_net_inet_find(text, text_len, inode, t->ipv6, &s)) {
            kind = t->kind;
            const char *label = t->kind == HW_FD_TCP ? "TCP" : "UDP";
            char state[32] = "";
            if (t->kind == HW_FD_TCP) /* UDP's "state" only says whether it is connected */
                snprintf(state, sizeof state, " (%s)", hw_tcp_state_name(s.state));
            if (has_peer(s.remote))
                say(out, len, "%s %s " ARROW " %s%s", label, s.local, s.remote, state);
            else
                say(out, len, "%s %s%s", label, s.local, state);
        }
    }
    free(text);
    return kind;
}

static hw_fd_kind describe_socket(pid_t pid, const char *link_path, unsigned long long inode, size_t cap, char *out,
                                  size_t len)
{
    char protocol[32];
    socket_protocol(link_path, protocol, sizeof protocol);
    const net_table *cut_table = NULL, *protocol_table = NULL;
    for (size_t i = 0; i < NET_TABLES; i++) {
        const net_table *t = &net_tables[i];
        if (protocol[0] != '\0' && !table_lists(t, protocol))
            continue; /* known protocol: only its table */
        protocol_table = protocol[0] != '\0' ? t : NULL;
        bool cut = false;
        hw_fd_kind kind = find_in_table(pid, t, inode, cap, &cut, out, len);
        if (kind != HW_FD_UNKNOWN)
            return kind;
        if (cut && cut_table == NULL)
            cut_table = t;
    }
    char because[160] = "";
    if (cut_table != NULL) {
        char size[32];
        if (cap >= (1u << 20) && cap % (1u << 20) == 0)
            snprintf(size, sizeof size, "%zu MiB", cap >> 20);
        else
            snprintf(size, sizeof size, "%zu bytes", cap);
        snprintf(because, sizeof because, " (%s%s/proc/%d/net/%s is over %s, not searched whole)", protocol,
                 protocol[0] != '\0' ? ": " : "", (int)pid, cut_table->file, size);
    } else if (protocol_table != NULL && protocol_table->when_absent != NULL) {
        /* A socket of a listed protocol that its table does not list. */
        say(out, len, "%s socket:[%llu], %s", protocol_table->kind == HW_FD_TCP ? "TCP" : "UDP", inode,
            protocol_table->when_absent);
        return protocol_table->kind;
    } else if (protocol[0] != '\0') {
        snprintf(because, sizeof because, " (%s)", protocol);
    }
    say(out, len, "socket:[%llu]%s", inode, because);
    return HW_FD_SOCKET_OTHER;
}

/* "socket:[N]": N, or false when the link is not that. */
static bool socket_inode(const char *link, unsigned long long *inode)
{
    static const char prefix[] = "socket:[";
    if (strncmp(link, prefix, sizeof prefix - 1) != 0)
        return false;
    const char *p = link + sizeof prefix - 1;
    unsigned long long v = 0;
    size_t digits = 0;
    for (; *p >= '0' && *p <= '9'; p++, digits++) {
        if (digits == 19) /* at most 19 digits: no overflow, and more than any inode */
            return false;
        v = v * 10 + (unsigned long long)(*p - '0');
    }
    if (digits == 0 || strcmp(p, "]") != 0)
        return false;
    *inode = v;
    return true;
}

/* hw_fd_describe_capped, with the link of a socket or a pipe into
 * `object` (NULL: not wanted). */
static hw_fd_kind describe(pid_t pid, int fd, size_t table_cap, char *out, size_t len, char *object,
                           size_t object_len)
{
    char link_path[64], link[LINK_TEXT_MAX + 1];
    snprintf(link_path, sizeof link_path, "/proc/%d/fd/%d", (int)pid, fd);
    ssize_t n = readlink(link_path, link, LINK_TEXT_MAX);
    if (n < 0) {
        int e = errno;
        say(out, len, "fd %d (unreadable: %s)", fd, strerror(e));
        return HW_FD_UNKNOWN;
    }
    link[n] = '\0';
    bool is_pipe = strncmp(link, "pipe:[", 6) == 0;
    unsigned long long inode;
    bool is_socket = socket_inode(link, &inode);
    if (object != NULL && (is_pipe || is_socket))
        say(object, object_len, "%s", link);
    if (is_socket)
        return describe_socket(pid, link_path, inode, table_cap, out, len);
    say(out, len, "%s", link);
    if (is_pipe)
        return HW_FD_PIPE;
    if (link[0] == '/')
        return HW_FD_FILE;
    if (strncmp(link, "socket:", 7) == 0)
        return HW_FD_SOCKET_OTHER; /* not the kernel's "socket:[N]" */
    return HW_FD_OTHER;
}

hw_fd_kind hw_fd_describe_capped(pid_t pid, int fd, size_t table_cap, char *out, size_t len)
{
    return describe(pid, fd, table_cap, out, len, NULL, 0);
}

hw_fd_kind hw_fd_describe(pid_t pid, int fd, char *out, size_t len)
{
    return describe(pid, fd, HW_FD_NET_TABLE_MAX, out, len, NULL, 0);
}

hw_fd_kind hw_fd_describe_object(pid_t pid, int fd, char *out, size_t len, char *object, size_t object_len)
{
    if (object != NULL && object_len > 0)
        object[0] = '\0';
    return describe(pid, fd, HW_FD_NET_TABLE_MAX, out, len, object, object_len);
}
