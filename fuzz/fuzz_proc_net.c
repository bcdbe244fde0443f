/*
 * fuzz_proc_net.c - hw_proc_net_inet_find, hw_proc_net_inet_peer and
 * hw_proc_net_unix_find, which read another process's socket tables (/proc/PID/net/tcp, tcp6, udp,
 * udp6, unix) inside the root-run agent; a unix socket's path in them is
 * whatever the process that bound it chose.
 *
 * Feeds: the input's first line as the inode sought (its decimal digits;
 * the first eight bytes as a number when the line has none), the whole
 * input as a table, read as IPv4 and as IPv6 inet tables and as a unix
 * table, with path buffers of every size from 0 to 9 bytes and a large one.
 * The buffer is exactly the input, with no NUL after it.
 *
 * Proves: no crash, leak or overflow; inode 0 is never found; an answer
 * leaves the output untouched when nothing is found; what is found does
 * not depend on the bytes after the last newline (a cut line is never
 * read); an inet socket's addresses are "A.B.C.D:PORT" or "[V6]:PORT" with
 * PORT at most 65535, and its state is 0-255 with a name; the inode is
 * written in the text in decimal; a unix socket's path is bytes of the
 * text (its newlines kept when it runs on over lines), holds no NUL, and
 * every smaller buffer gets a prefix of it, NUL-terminated.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/parse/proc_net.h"

#define CHECK(cond)                                                                                                    \
    do {                                                                                                               \
        if (!(cond))                                                                                                   \
            __builtin_trap();                                                                                          \
    } while (0)

#define SMALL_PATHS 10
#define PATH_MAX_TEXT 4096

/* The inode sought: the first line's leading digits, else its first bytes. */
static unsigned long long sought_inode(const uint8_t *in, size_t len)
{
    unsigned long long v = 0;
    size_t i = 0;
    for (; i < len && i < 20 && in[i] >= '0' && in[i] <= '9'; i++)
        v = v * 10 + (unsigned long long)(in[i] - '0'); /* wraps: any number will do */
    if (i > 0)
        return v;
    memcpy(&v, in, len < sizeof v ? len : sizeof v);
    return v;
}

/* Where the text's whole lines end: just past its last newline. */
static size_t whole_lines(const uint8_t *in, size_t len)
{
    while (len > 0 && in[len - 1] != '\n')
        len--;
    return len;
}

/* "A.B.C.D:PORT" or "[hex digits, colons, dots]:PORT", PORT <= 65535. */
static void check_endpoint(const char *text, bool ipv6)
{
    size_t n = strnlen(text, HW_INET_TEXT_MAX);
    CHECK(n > 0 && n < HW_INET_TEXT_MAX);
    const char *colon = strrchr(text, ':');
    CHECK(colon != NULL && colon[1] != '\0');
    unsigned long port = 0;
    for (const char *p = colon + 1; *p; p++) {
        CHECK(*p >= '0' && *p <= '9');
        port = port * 10 + (unsigned long)(*p - '0');
        CHECK(port <= 65535);
    }
    if (ipv6) {
        CHECK(text[0] == '[' && colon > text + 1 && colon[-1] == ']');
        for (const char *p = text + 1; p < colon - 1; p++)
            CHECK((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f') || *p == ':' || *p == '.');
    } else {
        unsigned dots = 0;
        for (const char *p = text; p < colon; p++) {
            CHECK((*p >= '0' && *p <= '9') || *p == '.');
            dots += *p == '.';
        }
        CHECK(dots == 3);
    }
}

static void check_inet(const uint8_t *in, size_t len, unsigned long long inode, bool ipv6)
{
    hw_inet_socket s, again, untouched;
    memset(&s, 0xa5, sizeof s);
    memset(&untouched, 0xa5, sizeof untouched);
    bool found = hw_proc_net_inet_find((const char *)in, len, inode, ipv6, &s);

    memset(&again, 0xa5, sizeof again);
    CHECK(hw_proc_net_inet_find((const char *)in, whole_lines(in, len), inode, ipv6, &again) == found);
    CHECK(memcmp(&again, &s, sizeof s) == 0);
    if (!found) {
        CHECK(memcmp(&s, &untouched, sizeof s) == 0);
        return;
    }
    CHECK(inode != 0);
    check_endpoint(s.local, ipv6);
    check_endpoint(s.remote, ipv6);
    CHECK(s.state >= 0 && s.state <= 255);
    CHECK(hw_tcp_state_name(s.state) != NULL);
    char digits[24];
    snprintf(digits, sizeof digits, "%llu", inode);
    CHECK(memmem(in, len, digits, strlen(digits)) != NULL);
    /* the other end of the socket found: an inode the text holds, never its own line's for a
     * connection to itself unless the text says so, and the same from the whole lines */
    bool listening, listening_again;
    unsigned long long peer = hw_proc_net_inet_peer((const char *)in, len, ipv6, s.local, s.remote, &listening);
    CHECK(hw_proc_net_inet_peer((const char *)in, whole_lines(in, len), ipv6, s.local, s.remote, &listening_again) ==
          peer);
    CHECK(listening == listening_again);
    CHECK(peer != 0 || !listening);
    if (peer != 0) {
        snprintf(digits, sizeof digits, "%llu", peer);
        CHECK(memmem(in, len, digits, strlen(digits)) != NULL);
    }
}

static void check_unix(const uint8_t *in, size_t len, unsigned long long inode)
{
    char *path = malloc(PATH_MAX_TEXT);
    CHECK(path != NULL);
    memset(path, 'Z', PATH_MAX_TEXT);
    bool found = hw_proc_net_unix_find((const char *)in, len, inode, path, PATH_MAX_TEXT);
    char again[PATH_MAX_TEXT];
    memset(again, 'Z', sizeof again);
    CHECK(hw_proc_net_unix_find((const char *)in, whole_lines(in, len), inode, again, sizeof again) == found);
    if (!found) {
        CHECK(path[0] == 'Z' && again[0] == 'Z');
    } else {
        CHECK(inode != 0);
        size_t n = strnlen(path, PATH_MAX_TEXT);
        CHECK(n < PATH_MAX_TEXT);
        CHECK(strcmp(path, again) == 0);
        CHECK(n == 0 || memmem(in, len, path, n) != NULL);
        char digits[24];
        snprintf(digits, sizeof digits, "%llu", inode);
        CHECK(memmem(in, len, digits, strlen(digits)) != NULL);
    }
    /* Smaller buffers, each exactly its size: a prefix, NUL-terminated. */
    for (size_t size = 0; size < SMALL_PATHS; size++) {
        char *small = malloc(size > 0 ? size : 1);
        CHECK(small != NULL);
        memset(small, 'Z', size > 0 ? size : 1);
        CHECK(hw_proc_net_unix_find((const char *)in, len, inode, size > 0 ? small : NULL, size) == found);
        if (found && size > 0) {
            size_t n = strnlen(small, size);
            CHECK(n < size);
            CHECK(memcmp(small, path, n) == 0);
            CHECK(n == size - 1 || path[n] == '\0');
        }
        free(small);
    }
    free(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t len);

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t len)
{
    unsigned long long inode = sought_inode(in, len);
    check_inet(in, len, inode, false);
    check_inet(in, len, inode, true);
    check_unix(in, len, inode);
    CHECK(!hw_proc_net_inet_find((const char *)in, len, 0, false, &(hw_inet_socket){{0}, {0}, 0}));
    bool listening;
    CHECK(hw_proc_net_inet_peer((const char *)in, len, false, "127.0.0.1:1", "no port", &listening) == 0);
    CHECK(!listening);
    return 0;
}
