/*
 * proc_net.c - see proc_net.h.  The tables are walked in place, line by
 * line, without copying a line: only the fields that identify a socket are
 * looked at, each checked for exactly the form the kernel writes, so a line
 * of any length costs one pass and anything else is skipped.  Addresses are
 * turned into text with inet_ntop (no OS call), which writes IPv6 the usual
 * short way ("::1", "::ffff:127.0.0.1").
 */
#include "proc_net.h"

#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/text_bits.h"

/* Fields of an inet table's line that are read: slot, local, remote, state,
 * queues, timer, retransmits, uid, timeout, inode, and one more, whose
 * presence shows that the inode was not cut short. */
#define INET_FIELDS 11
#define INET_INODE_FIELD 9
/* A unix table's: num, refcount, protocol, flags, type, state, inode. */
#define UNIX_FIELDS 7
#define UNIX_INODE_FIELD 6

/* Bytes of the text, not NUL-terminated. */
typedef struct span {
    const char *p;
    size_t n;
} span;

/* The next whole line of text[*at, len), without its newline, moving *at
 * past it; false when nothing but a cut line (no newline) is left. */
static bool next_line(const char *text, size_t len, size_t *at, span *line)
{
    if (*at >= len)
        return false;
    const char *start = text + *at;
    const char *newline = memchr(start, '\n', len - *at);
    if (newline == NULL)
        return false;
    line->p = start;
    line->n = (size_t)(newline - start);
    *at += line->n + 1;
    return true;
}

static bool is_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* The first `max` blank-separated fields of `line` into fields: how many
 * there are (at most max); *after is where the line goes on after the last
 * of them. */
static size_t split_fields(span line, span *fields, size_t max, size_t *after)
{
    size_t count = 0, i = 0;
    while (count < max) {
        while (i < line.n && is_blank(line.p[i]))
            i++;
        if (i == line.n)
            break;
        size_t start = i;
        while (i < line.n && !is_blank(line.p[i]))
            i++;
        fields[count].p = line.p + start;
        fields[count].n = i - start;
        count++;
    }
    *after = i;
    return count;
}

/* A decimal number of at most 64 bits, digits only. */
static bool parse_decimal(span f, unsigned long long *out)
{
    if (f.n == 0)
        return false;
    unsigned long long v = 0;
    for (size_t i = 0; i < f.n; i++) {
        if (f.p[i] < '0' || f.p[i] > '9')
            return false;
        unsigned d = (unsigned)(f.p[i] - '0');
        if (v > (ULLONG_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

/* Exactly `digits` (1 to 8) hex digits at p. */
static bool parse_hex_digits(const char *p, size_t digits, uint32_t *out)
{
    uint32_t v = 0;
    for (size_t i = 0; i < digits; i++) {
        int d = hw_hex_digit_value(p[i]);
        if (d < 0)
            return false;
        v = v << 4 | (uint32_t)d;
    }
    *out = v;
    return true;
}

static bool is_all_hex(span f)
{
    if (f.n == 0)
        return false;
    for (size_t i = 0; i < f.n; i++)
        if (hw_hex_digit_value(f.p[i]) < 0)
            return false;
    return true;
}

static bool is_all_decimal(span f)
{
    if (f.n == 0)
        return false;
    for (size_t i = 0; i < f.n; i++)
        if (f.p[i] < '0' || f.p[i] > '9')
            return false;
    return true;
}

/* A line's first field: a number (decimal in the inet tables, hex in the
 * unix table) and a colon. */
static bool is_slot(span f, bool hex)
{
    if (f.n < 2 || f.p[f.n - 1] != ':')
        return false;
    span number = {f.p, f.n - 1};
    return hex ? is_all_hex(number) : is_all_decimal(number);
}

/* An inet table's "WORDS:PORT" as "127.0.0.1:40312" or "[::1]:5432". */
static bool endpoint_text(span f, bool ipv6, char out[HW_INET_TEXT_MAX])
{
    size_t words = ipv6 ? 4 : 1, digits = words * 8;
    if (f.n != digits + 1 + 4 || f.p[digits] != ':')
        return false;
    unsigned char address[16];
    for (size_t w = 0; w < words; w++) {
        uint32_t word;
        if (!parse_hex_digits(f.p + 8 * w, 8, &word))
            return false;
        /* The kernel printed the word as this host reads it from memory;
         * put back in memory, its bytes are the address's, in network order. */
        memcpy(address + 4 * w, &word, sizeof word);
    }
    uint32_t port;
    if (!parse_hex_digits(f.p + digits + 1, 4, &port))
        return false;
    char host[INET6_ADDRSTRLEN];
    if (inet_ntop(ipv6 ? AF_INET6 : AF_INET, address, host, sizeof host) == NULL)
        return false;
    int n = ipv6 ? snprintf(out, HW_INET_TEXT_MAX, "[%s]:%u", host, (unsigned)port)
                 : snprintf(out, HW_INET_TEXT_MAX, "%s:%u", host, (unsigned)port);
    return n > 0 && n < HW_INET_TEXT_MAX;
}

/* The next line of text[*at, len) that is socket `inode`'s: its first
 * `count` fields in f (the inode the field at `inode_field`, the slot the
 * first, a unix table's or an inet table's), *after where the line goes on
 * after them.  Lines without them, of another inode, or holding a NUL
 * byte, are passed over; false at the end. */
static bool next_line_of_inode(const char *text, size_t len, size_t *at, unsigned long long inode, span *f,
                               size_t count, size_t inode_field, bool unix_table, span *line, size_t *after)
{
    while (next_line(text, len, at, line)) {
        unsigned long long line_inode;
        if (split_fields(*line, f, count, after) < count)
            continue;
        if (!parse_decimal(f[inode_field], &line_inode) || line_inode != inode)
            continue;
        if (memchr(line->p, '\0', line->n) != NULL || !is_slot(f[0], unix_table))
            continue;
        return true;
    }
    return false;
}

bool hw_proc_net_inet_find(const char *text, size_t len, unsigned long long inode, bool ipv6, hw_inet_socket *out)
{
    if (text == NULL || inode == 0)
        return false;
    size_t at = 0, after;
    span line, f[INET_FIELDS];
    while (next_line_of_inode(text, len, &at, inode, f, INET_FIELDS, INET_INODE_FIELD, false, &line, &after)) {
        hw_inet_socket found;
        uint32_t state;
        if (!endpoint_text(f[1], ipv6, found.local) || !endpoint_text(f[2], ipv6, found.remote))
            continue;
        if (f[3].n != 2 || !parse_hex_digits(f[3].p, 2, &state))
            continue;
        found.state = (int)state;
        *out = found;
        return true;
    }
    return false;
}

/* The port of "ADDRESS:PORT" text, and the address's length; false when malformed. */
static bool split_endpoint(const char *text, size_t *address_len, const char **port)
{
    const char *colon = strrchr(text, ':');
    if (colon == NULL || colon == text || colon[1] == '\0')
        return false;
    *address_len = (size_t)(colon - text);
    *port = colon + 1;
    return true;
}

static bool is_any_address(const char *text, size_t n)
{
    return (n == 7 && memcmp(text, "0.0.0.0", 7) == 0) || (n == 4 && memcmp(text, "[::]", 4) == 0);
}

#define TCP_LISTEN 0x0A

unsigned long long hw_proc_net_inet_peer(const char *text, size_t len, bool ipv6, const char *local, const char *remote,
                                         bool *listening)
{
    *listening = false;
    size_t remote_address_len;
    const char *remote_port;
    if (text == NULL || local == NULL || remote == NULL || !split_endpoint(remote, &remote_address_len, &remote_port))
        return 0;
    unsigned long long listener = 0;
    size_t at = 0, after;
    span line, f[INET_FIELDS];
    while (next_line(text, len, &at, &line)) {
        if (split_fields(line, f, INET_FIELDS, &after) < INET_FIELDS || memchr(line.p, '\0', line.n) != NULL ||
            !is_slot(f[0], false))
            continue;
        char l[HW_INET_TEXT_MAX], r[HW_INET_TEXT_MAX];
        unsigned long long inode;
        uint32_t state;
        if (!endpoint_text(f[1], ipv6, l) || !endpoint_text(f[2], ipv6, r) || !parse_decimal(f[INET_INODE_FIELD], &inode) ||
            inode == 0 || f[3].n != 2 || !parse_hex_digits(f[3].p, 2, &state))
            continue;
        if (strcmp(l, remote) == 0 && strcmp(r, local) == 0)
            return inode;
        size_t la;
        const char *lport;
        if (listener == 0 && state == TCP_LISTEN && split_endpoint(l, &la, &lport) && strcmp(lport, remote_port) == 0 &&
            ((la == remote_address_len && memcmp(l, remote, la) == 0) || is_any_address(l, la)))
            listener = inode;
    }
    *listening = listener != 0;
    return listener;
}

/* Is `line` a unix table entry (its slot, five hex numbers, an inode),
 * rather than the rest of a path with a newline in it? */
static bool is_unix_entry(span line)
{
    span f[UNIX_FIELDS];
    size_t after;
    unsigned long long inode;
    if (split_fields(line, f, UNIX_FIELDS, &after) < UNIX_FIELDS || !is_slot(f[0], true) ||
        !parse_decimal(f[UNIX_INODE_FIELD], &inode))
        return false;
    for (size_t i = 1; i < UNIX_INODE_FIELD; i++)
        if (!is_all_hex(f[i]))
            return false;
    return true;
}

/* A path the kernel wrote with its newlines raw goes on over the lines
 * that follow its entry, up to the next entry: `name` grown over them (the
 * newlines kept), *at past them. */
static span whole_unix_path(const char *text, size_t len, size_t *at, span name)
{
    size_t probe = *at;
    span next;
    while (next_line(text, len, &probe, &next) && !is_unix_entry(next)) {
        name.n = (size_t)(next.p + next.n - name.p);
        *at = probe;
    }
    return name;
}

bool hw_proc_net_unix_find(const char *text, size_t len, unsigned long long inode, char *path, size_t path_len)
{
    if (text == NULL || inode == 0)
        return false;
    span found = {NULL, 0};
    bool any = false;
    size_t at = 0, after;
    span line, f[UNIX_FIELDS];
    while (next_line_of_inode(text, len, &at, inode, f, UNIX_FIELDS, UNIX_INODE_FIELD, true, &line, &after)) {
        bool numbers = true;
        for (size_t i = 1; i < UNIX_INODE_FIELD; i++)
            numbers = numbers && is_all_hex(f[i]);
        if (!numbers)
            continue;
        span name; /* nothing after the inode, or one space and the path */
        if (after == line.n)
            name = (span){line.p + after, 0};
        else if (line.p[after] == ' ')
            name = (span){line.p + after + 1, line.n - after - 1};
        else
            continue;
        if (name.n > 0)
            name = whole_unix_path(text, len, &at, name);
        if (any && (name.n != found.n || memcmp(name.p, found.p, name.n) != 0))
            return false; /* two lines claim the inode: one was made up by a path */
        found = name;
        any = true;
    }
    if (!any)
        return false;
    if (path_len > 0) {
        size_t n = found.n < path_len - 1 ? found.n : path_len - 1;
        memcpy(path, found.p, n);
        path[n] = '\0';
    }
    return true;
}

const char *hw_tcp_state_name(int state)
{
    /* include/net/tcp_states.h */
    static const char *const names[] = {
        [1] = "ESTABLISHED", [2] = "SYN_SENT",  [3] = "SYN_RECV",       [4] = "FIN_WAIT1",
        [5] = "FIN_WAIT2",   [6] = "TIME_WAIT", [7] = "CLOSE",          [8] = "CLOSE_WAIT",
        [9] = "LAST_ACK",    [10] = "LISTEN",   [11] = "CLOSING",       [12] = "NEW_SYN_RECV",
        [13] = "BOUND_INACTIVE",
    };
    if (state <= 0 || (size_t)state >= sizeof names / sizeof names[0] || names[state] == NULL)
        return "UNKNOWN";
    return names[state];
}
