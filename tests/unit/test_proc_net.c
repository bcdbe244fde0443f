/*
 * test_proc_net.c - finding a socket by its inode in the kernel's socket
 * tables (core/parse/proc_net.h).
 *
 * The tables are ones a Linux 6.1 machine wrote for sockets made for the
 * purpose (a listener on 127.0.0.1 and a connection to it, the same on
 * ::1, a listener on ::ffff:127.0.0.1, UDP on both, unix sockets bound to
 * a path and to an abstract name, unbound ones), plus addresses written by
 * hand in the same form.  Then what the agent may be handed instead:
 * missing inodes, lines cut anywhere, the last line without its newline,
 * garbage in every field, NUL bytes, a path holding a newline that makes
 * up a line, lines of megabytes.  Every text is passed in a buffer of
 * exactly its length, with no NUL after it, so that ASan sees any read
 * past the end.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/parse/proc_net.h"

/* ---- tables as the kernel writes them ---------------------------------- */

static const char TCP_TABLE[] =
    "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode            "
    "                                         \n"
    "   0: 00000000:07E8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1520 1 "
    "000000005ee7ca58 100 0 0 10 0                      \n"
    "   1: 0100007F:E9E1 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2608704 1 "
    "00000000574e8731 100 0 0 10 0                   \n"
    "   2: 0100007F:BF82 0100007F:E9E1 01 00000000:00000000 00:00000000 00000000     0        0 2608705 2 "
    "0000000087160f88 20 0 0 10 -1                   \n"
    "   3: 0100007F:E9E1 0100007F:BF82 01 00000000:00000000 00:00000000 00000000     0        0 2608706 1 "
    "00000000a167797d 20 0 0 10 -1                   \n"
    "   4: 0100007F:9D78 0100007F:1538 06 00000000:00000000 03:00001770 00000000     0        0 0 3 "
    "0000000000000000                                            \n";

static const char TCP6_TABLE[] =
    "  sl  local_address                         remote_address                        st tx_queue rx_queue tr "
    "tm->when retrnsmt   uid  timeout inode\n"
    "   0: 0000000000000000FFFF00000100007F:A12D 00000000000000000000000000000000:0000 0A 00000000:00000000 "
    "00:00000000 00000000     0        0 2608712 1 000000002e5dea68 100 0 0 10 0\n"
    "   1: 00000000000000000000000001000000:9281 00000000000000000000000000000000:0000 0A 00000000:00000000 "
    "00:00000000 00000000     0        0 2608707 1 000000006b38e97a 100 0 0 10 0\n"
    "   2: 00000000000000000000000001000000:EAD6 00000000000000000000000001000000:9281 01 00000000:00000000 "
    "00:00000000 00000000     0        0 2608708 2 000000005fcabb7b 20 0 0 10 -1\n"
    "   3: 00000000000000000000000001000000:9281 00000000000000000000000001000000:EAD6 01 00000000:00000000 "
    "00:00000000 00000000     0        0 2608709 1 00000000cd729d77 20 0 0 10 -1\n"
    /* By hand: 2001:db8::1 port 443 to fe80::1:2 port 51000, uid 1000. */
    "   4: B80D0120000000000000000001000000:01BB 000080FE000000000000000002000100:C738 01 00000000:00000000 "
    "00:00000000 00000000  1000        0 77 1 0000000000000000 20 0 0 10 -1\n";

static const char UDP_TABLE[] =
    "   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer "
    "drops            \n"
    " 4197: 0100007F:DF53 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 2608710 2 "
    "00000000eba4ad15 0       \n"
    /* By hand: 10.1.2.3:40000 connected to 192.168.0.53:53. */
    " 4198: 0302010A:9C40 3500A8C0:0035 01 00000000:00000000 00:00000000 00000000  1000        0 2608720 2 "
    "00000000eba4ad16 0       \n";

static const char UDP6_TABLE[] =
    "  sl  local_address                         remote_address                        st tx_queue rx_queue tr "
    "tm->when retrnsmt   uid  timeout inode ref pointer drops\n"
    " 1080: 00000000000000000000000001000000:D326 00000000000000000000000001000000:0035 01 00000000:00000000 "
    "00:00000000 00000000     0        0 2608711 2 0000000036d8691e 0\n";

static const char UNIX_TABLE[] = "Num       RefCount Protocol Flags    Type St Inode Path\n"
                                 "00000000d7fce996: 00000002 00000000 00010000 0001 01 2608713 /tmp/hw-sample.sock\n"
                                 "0000000065496e5c: 00000003 00000000 00000000 0001 03  1517\n"
                                 "000000002924954b: 00000003 00000000 00000000 0001 03  1516\n"
                                 "00000000a8f135c1: 00000002 00000000 00000000 0001 01 2608714 @hw-abstract\n"
                                 "00000000a8f135c2: 00000002 00000000 00000000 0005 01 2608715 /run/my app/a b.sock\n"
                                 "00000000a8f135c3: 00000002 00000000 00000000 0002 01 2608716 @name@with@nuls\n";

/* ---- helpers ------------------------------------------------------------ */

/* `len` bytes of `text` in a buffer of exactly that size: no NUL after. */
static char *exact(const char *text, size_t len)
{
    char *copy = malloc(len > 0 ? len : 1);
    assert_non_null(copy);
    memcpy(copy, text, len);
    return copy;
}

static bool inet_find(const char *text, size_t len, unsigned long long inode, bool ipv6, hw_inet_socket *out)
{
    char *copy = exact(text, len);
    bool found = hw_proc_net_inet_find(copy, len, inode, ipv6, out);
    free(copy);
    return found;
}

static bool unix_find(const char *text, size_t len, unsigned long long inode, char *path, size_t path_len)
{
    char *copy = exact(text, len);
    bool found = hw_proc_net_unix_find(copy, len, inode, path, path_len);
    free(copy);
    return found;
}

static void expect_inet(const char *table, unsigned long long inode, bool ipv6, const char *local, const char *remote,
                        int state)
{
    hw_inet_socket s;
    if (!inet_find(table, strlen(table), inode, ipv6, &s))
        fail_msg("inode %llu not found", inode);
    assert_string_equal(s.local, local);
    assert_string_equal(s.remote, remote);
    assert_int_equal(s.state, state);
}

static void expect_no_inet(const char *table, unsigned long long inode, bool ipv6)
{
    hw_inet_socket s;
    memset(&s, 0x5a, sizeof s);
    if (inet_find(table, strlen(table), inode, ipv6, &s))
        fail_msg("inode %llu found: %s -> %s", inode, s.local, s.remote);
    for (size_t i = 0; i < sizeof s; i++)
        assert_int_equal(((unsigned char *)&s)[i], 0x5a); /* untouched */
}

/* A table of the header and one line. */
static void expect_line_refused(const char *line, unsigned long long inode, bool ipv6)
{
    char table[1024];
    snprintf(table, sizeof table, "  sl  local_address rem_address   st ...\n%s\n", line);
    expect_no_inet(table, inode, ipv6);
}

static void expect_unix(const char *table, unsigned long long inode, const char *path)
{
    char got[256];
    if (!unix_find(table, strlen(table), inode, got, sizeof got))
        fail_msg("inode %llu not found", inode);
    assert_string_equal(got, path);
}

static void expect_no_unix(const char *table, size_t len, unsigned long long inode)
{
    char got[16] = "untouched";
    assert_false(unix_find(table, len, inode, got, sizeof got));
    assert_string_equal(got, "untouched");
}

/* ---- the inet tables ---------------------------------------------------- */

static void test_ipv4_tcp(void **state)
{
    (void)state;
    expect_inet(TCP_TABLE, 2608705, false, "127.0.0.1:49026", "127.0.0.1:59873", 1);
    expect_inet(TCP_TABLE, 2608706, false, "127.0.0.1:59873", "127.0.0.1:49026", 1);
    expect_inet(TCP_TABLE, 2608704, false, "127.0.0.1:59873", "0.0.0.0:0", 10);
    expect_inet(TCP_TABLE, 1520, false, "0.0.0.0:2024", "0.0.0.0:0", 10);
}

/* The other end of a local connection: the swapped line, else the listener. */
static void test_ipv4_peer(void **state)
{
    (void)state;
    bool listening = true;
    /* 2608705 (49026 -> 59873) and 2608706 (59873 -> 49026) are the two ends */
    assert_int_equal(hw_proc_net_inet_peer(TCP_TABLE, strlen(TCP_TABLE), false, "127.0.0.1:49026", "127.0.0.1:59873",
                                           &listening),
                     2608706);
    assert_false(listening);
    /* a connection to 59873 not accepted yet: the socket listening on it */
    assert_int_equal(hw_proc_net_inet_peer(TCP_TABLE, strlen(TCP_TABLE), false, "127.0.0.1:40000", "127.0.0.1:59873",
                                           &listening),
                     2608704);
    assert_true(listening);
    /* to port 2024, listened on every address */
    assert_int_equal(hw_proc_net_inet_peer(TCP_TABLE, strlen(TCP_TABLE), false, "127.0.0.1:40001", "127.0.0.1:2024",
                                           &listening),
                     1520);
    /* another machine's port: none (the TIME_WAIT line, inode 0, is never one) */
    assert_int_equal(hw_proc_net_inet_peer(TCP_TABLE, strlen(TCP_TABLE), false, "127.0.0.1:40312", "127.0.0.1:5432",
                                           &listening),
                     0);
    assert_false(listening);
    assert_int_equal(hw_proc_net_inet_peer(TCP_TABLE, strlen(TCP_TABLE), false, "x", "no-port", &listening), 0);
}

static void test_ipv6_tcp(void **state)
{
    (void)state;
    expect_inet(TCP6_TABLE, 2608708, true, "[::1]:60118", "[::1]:37505", 1);
    expect_inet(TCP6_TABLE, 2608707, true, "[::1]:37505", "[::]:0", 10);
    expect_inet(TCP6_TABLE, 2608712, true, "[::ffff:127.0.0.1]:41261", "[::]:0", 10);
    expect_inet(TCP6_TABLE, 77, true, "[2001:db8::1]:443", "[fe80::1:2]:51000", 1);
}

static void test_udp(void **state)
{
    (void)state;
    expect_inet(UDP_TABLE, 2608710, false, "127.0.0.1:57171", "0.0.0.0:0", 7);
    expect_inet(UDP_TABLE, 2608720, false, "10.1.2.3:40000", "192.168.0.53:53", 1);
    expect_inet(UDP6_TABLE, 2608711, true, "[::1]:54054", "[::1]:53", 1);
}

static void test_missing_inode_and_inode_zero(void **state)
{
    (void)state;
    expect_no_inet(TCP_TABLE, 2608707, false);
    expect_no_inet(TCP_TABLE, 260870, false);   /* a prefix of inodes there */
    expect_no_inet(TCP_TABLE, 26087050, false); /* one digit more */
    expect_no_inet(TCP_TABLE, 0, false);        /* the TIME_WAIT line says 0 */
    expect_no_inet(TCP_TABLE, 1, false);        /* a number in other columns */
    expect_no_inet(TCP_TABLE, 100, false);
    expect_no_inet("", 0, false);
    expect_no_inet("\n\n\n", 1, false);
    hw_inet_socket s;
    assert_false(hw_proc_net_inet_find(NULL, 0, 1, false, &s));
}

static void test_wrong_family_is_not_found(void **state)
{
    (void)state;
    /* IPv4 lines read as IPv6 and the other way: the address lengths differ. */
    expect_no_inet(TCP_TABLE, 2608705, true);
    expect_no_inet(TCP6_TABLE, 2608708, false);
}

static void test_cut_lines(void **state)
{
    (void)state;
    const char *line = "   2: 0100007F:BF82 0100007F:E9E1 01 00000000:00000000 00:00000000 00000000     0        0 "
                       "2608705 2 0000000087160f88 20 0 0 10 -1\n";
    size_t n = strlen(line);
    hw_inet_socket s;
    /* Every cut of the line short of its newline: never found (the last
     * line has no newline, so it is a line cut short). */
    for (size_t cut = 0; cut < n; cut++)
        assert_false(inet_find(line, cut, 2608705, false, &s));
    assert_true(inet_find(line, n, 2608705, false, &s));
    assert_string_equal(s.local, "127.0.0.1:49026");

    /* Whole lines that end early: before the inode, right after it. */
    expect_line_refused("   2: 0100007F:BF82 0100007F:E9E1 01 00000000:00000000 00:00000000 00000000     0        0",
                        2608705, false);
    expect_line_refused("   2: 0100007F:BF82 0100007F:E9E1 01 00000000:00000000 00:00000000 00000000     0        0 "
                        "2608705",
                        2608705, false);
    expect_line_refused("   2: 0100007F:BF82 0100007F:E9E1 01 00000000:00000000 00:00000000 00000000     0        0 "
                        "2608705    ",
                        2608705, false);
    expect_line_refused("   2: 0100007F:BF82", 2608705, false);
    expect_line_refused("   2: 0100007F:BF", 2608705, false);

    /* A length shorter than the text: the line past it is not seen. */
    size_t through_line_2 = (size_t)(strstr(TCP_TABLE, "   3:") - TCP_TABLE);
    assert_true(inet_find(TCP_TABLE, through_line_2, 2608705, false, &s));
    assert_false(inet_find(TCP_TABLE, through_line_2, 2608706, false, &s));
    assert_false(inet_find(TCP_TABLE, through_line_2 - 1, 2608705, false, &s));
    assert_false(inet_find(TCP_TABLE, through_line_2 + 40, 2608706, false, &s));
}

static void test_garbage_in_fields(void **state)
{
    (void)state;
    static const char *const lines[] = {
        /* slot */
        "   2 0100007F:BF82 0100007F:E9E1 01 00000000:00000000 00:00000000 00000000 0 0 2608705 2 x",
        "   x: 0100007F:BF82 0100007F:E9E1 01 00000000:00000000 00:00000000 00000000 0 0 2608705 2 x",
        "   : 0100007F:BF82 0100007F:E9E1 01 00000000:00000000 00:00000000 00000000 0 0 2608705 2 x",
        /* addresses */
        "   2: 0100007G:BF82 0100007F:E9E1 01 00000000:00000000 00:00000000 00000000 0 0 2608705 2 x",
        "   2: 100007F:BF82 0100007F:E9E1 01 00000000:00000000 00:00000000 00000000 0 0 2608705 2 x",
        "   2: 00100007F:BF82 0100007F:E9E1 01 00000000:00000000 00:00000000 00000000 0 0 2608705 2 x",
        "   2: 0100007F:BF82F 0100007F:E9E1 01 00000000:00000000 00:00000000 00000000 0 0 2608705 2 x",
        "   2: 0100007F:BF8 0100007F:E9E1 01 00000000:00000000 00:00000000 00000000 0 0 2608705 2 x",
        "   2: 0100007F-BF82 0100007F:E9E1 01 00000000:00000000 00:00000000 00000000 0 0 2608705 2 x",
        "   2: 0100007F:-F82 0100007F:E9E1 01 00000000:00000000 00:00000000 00000000 0 0 2608705 2 x",
        "   2: 0100007F:BF82 0100007F:E9E 01 00000000:00000000 00:00000000 00000000 0 0 2608705 2 x",
        "   2: 0100007F:BF82 +100007F:E9E1 01 00000000:00000000 00:00000000 00000000 0 0 2608705 2 x",
        /* state */
        "   2: 0100007F:BF82 0100007F:E9E1 1 00000000:00000000 00:00000000 00000000 0 0 2608705 2 x",
        "   2: 0100007F:BF82 0100007F:E9E1 001 00000000:00000000 00:00000000 00000000 0 0 2608705 2 x",
        "   2: 0100007F:BF82 0100007F:E9E1 0x 00000000:00000000 00:00000000 00000000 0 0 2608705 2 x",
        /* inode */
        "   2: 0100007F:BF82 0100007F:E9E1 01 00000000:00000000 00:00000000 00000000 0 0 2608705x 2 x",
        "   2: 0100007F:BF82 0100007F:E9E1 01 00000000:00000000 00:00000000 00000000 0 0 +2608705 2 x",
        "   2: 0100007F:BF82 0100007F:E9E1 01 00000000:00000000 00:00000000 00000000 0 0 -2608705 2 x",
        /* a field missing before the inode: the inode is the 9th field */
        "   2: 0100007F:BF82 0100007F:E9E1 01 00000000:00000000 00:00000000 0 0 2608705 2 x",
        "garbage garbage garbage garbage garbage garbage garbage garbage garbage 2608705 garbage",
    };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
        expect_line_refused(lines[i], 2608705, false);
    /* The same line, well formed, is found (tabs separate fields too). */
    char table[256];
    snprintf(table, sizeof table, "\n%s\n",
             "\t2:\t0100007f:bf82 0100007F:E9E1 01 00000000:00000000 00:00000000 00000000 0 0 2608705 2 x");
    expect_inet(table, 2608705, false, "127.0.0.1:49026", "127.0.0.1:59873", 1);
}

static void test_inode_overflow_and_largest(void **state)
{
    (void)state;
    const char *big = "\n   2: 0100007F:BF82 0100007F:E9E1 01 0:0 0:0 0 0 0 18446744073709551615 2 x\n";
    expect_inet(big, 18446744073709551615ull, false, "127.0.0.1:49026", "127.0.0.1:59873", 1);
    /* 2^64 + 5 is 5 only without an overflow check. */
    expect_line_refused("   2: 0100007F:BF82 0100007F:E9E1 01 0:0 0:0 0 0 0 18446744073709551621 2 x", 5, false);
    expect_line_refused("   2: 0100007F:BF82 0100007F:E9E1 01 0:0 0:0 0 0 0 99999999999999999999999 2 x",
                        18446744073709551615ull, false);
}

static void test_nul_bytes(void **state)
{
    (void)state;
    char table[] = "header\n   2: 0100007F:BF82 0100007F:E9E1 01 0:0 0:0 0 0 0 2608705 2 xNx\n"
                   "   3: 0100007F:E9E1 0100007F:BF82 01 0:0 0:0 0 0 0 2608706 1 x\n";
    *strchr(table, 'N') = '\0'; /* a NUL after the inode's line's fields */
    size_t len = sizeof table - 1;
    hw_inet_socket s;
    assert_false(inet_find(table, len, 2608705, false, &s));
    assert_true(inet_find(table, len, 2608706, false, &s)); /* the next line is read */
    assert_string_equal(s.local, "127.0.0.1:59873");
}

static void test_random_bytes(void **state)
{
    (void)state;
    /* Nothing crashes or reads past the end, whatever the bytes. */
    uint64_t x = 0x9e3779b97f4a7c15ull;
    static const char alphabet[] = "0123456789ABCDEFabcdef: \n\t\0@/x";
    for (int round = 0; round < 2000; round++) {
        size_t len = (size_t)(round % 300);
        char *text = malloc(len + 1);
        assert_non_null(text);
        for (size_t i = 0; i < len; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            text[i] = round % 2 ? (char)(x & 0xff) : alphabet[x % (sizeof alphabet - 1)];
        }
        hw_inet_socket s;
        char path[8];
        unsigned long long inode = x % 4;
        char *copy = exact(text, len);
        (void)hw_proc_net_inet_find(copy, len, inode, round % 3 == 0, &s);
        (void)hw_proc_net_unix_find(copy, len, inode, path, sizeof path);
        free(copy);
        free(text);
    }
}

static void test_huge_lines(void **state)
{
    (void)state;
    /* A 4 MiB line before the socket's, and one that is all fields. */
    const size_t huge = 4u << 20;
    const char *tail = "\n   2: 0100007F:BF82 0100007F:E9E1 01 0:0 0:0 0 0 0 2608705 2 x\n";
    size_t len = huge + strlen(tail);
    char *text = malloc(len);
    assert_non_null(text);
    memset(text, 'A', huge);
    memcpy(text + huge, tail, strlen(tail));
    hw_inet_socket s;
    assert_true(hw_proc_net_inet_find(text, len, 2608705, false, &s));
    assert_string_equal(s.remote, "127.0.0.1:59873");
    for (size_t i = 0; i < huge; i++)
        text[i] = i % 2 ? ' ' : '7';
    assert_true(hw_proc_net_inet_find(text, len, 2608705, false, &s));
    assert_false(hw_proc_net_inet_find(text, len, 7, false, &s));
    char path[16];
    assert_false(hw_proc_net_unix_find(text, len, 7, path, sizeof path));

    /* The socket's own line megabytes long: its fields, then padding. */
    const char *head = "   2: 0100007F:BF82 0100007F:E9E1 01 0:0 0:0 0 0 0 2608705 2 ";
    memcpy(text, head, strlen(head));
    memset(text + strlen(head), 'p', len - strlen(head) - 1);
    text[len - 1] = '\n';
    assert_true(hw_proc_net_inet_find(text, len, 2608705, false, &s));
    assert_string_equal(s.local, "127.0.0.1:49026");
    free(text);
}

/* ---- the unix table ----------------------------------------------------- */

static void test_unix_paths(void **state)
{
    (void)state;
    expect_unix(UNIX_TABLE, 2608713, "/tmp/hw-sample.sock");
    expect_unix(UNIX_TABLE, 2608714, "@hw-abstract");
    expect_unix(UNIX_TABLE, 2608716, "@name@with@nuls");
    expect_unix(UNIX_TABLE, 2608715, "/run/my app/a b.sock");
    expect_unix(UNIX_TABLE, 1517, ""); /* not bound */
    expect_unix(UNIX_TABLE, 1516, "");
}

static void test_unix_missing_and_cut(void **state)
{
    (void)state;
    size_t len = strlen(UNIX_TABLE);
    expect_no_unix(UNIX_TABLE, len, 2608717);
    expect_no_unix(UNIX_TABLE, len, 151);
    expect_no_unix(UNIX_TABLE, len, 0);
    expect_no_unix(UNIX_TABLE, len, 1); /* a flags or type number */
    expect_no_unix("", 0, 1517);
    char path[8];
    assert_false(hw_proc_net_unix_find(NULL, 0, 1517, path, sizeof path));

    /* The last line without its newline is a cut line, path and all: at
     * no cut is it found with a path that is shorter than the socket's. */
    const char *line = "00000000d7fce996: 00000002 00000000 00010000 0001 01 2608713 /tmp/hw-sample.sock\n";
    size_t n = strlen(line);
    for (size_t cut = 0; cut < n; cut++)
        expect_no_unix(line, cut, 2608713);
    expect_unix(line, 2608713, "/tmp/hw-sample.sock");

    /* A length shorter than the text. */
    size_t through = (size_t)(strstr(UNIX_TABLE, "0000000065496e5c") - UNIX_TABLE);
    char got[64];
    assert_true(unix_find(UNIX_TABLE, through, 2608713, got, sizeof got));
    assert_string_equal(got, "/tmp/hw-sample.sock");
    expect_no_unix(UNIX_TABLE, through, 1517);
}

static void test_unix_path_bounded(void **state)
{
    (void)state;
    char got[8];
    assert_true(unix_find(UNIX_TABLE, strlen(UNIX_TABLE), 2608713, got, sizeof got));
    assert_string_equal(got, "/tmp/hw");
    char one[1] = {'x'};
    assert_true(unix_find(UNIX_TABLE, strlen(UNIX_TABLE), 2608713, one, sizeof one));
    assert_int_equal(one[0], '\0');
    assert_true(unix_find(UNIX_TABLE, strlen(UNIX_TABLE), 2608713, NULL, 0));

    /* A path of a megabyte: its first bytes. */
    const char *head = "00000000d7fce996: 00000002 00000000 00010000 0001 01 99 /";
    size_t len = strlen(head) + (1u << 20) + 1;
    char *text = malloc(len);
    assert_non_null(text);
    memcpy(text, head, strlen(head));
    memset(text + strlen(head), 'd', len - strlen(head) - 1);
    text[len - 1] = '\n';
    char path[256];
    assert_true(hw_proc_net_unix_find(text, len, 99, path, sizeof path));
    assert_int_equal(strlen(path), sizeof path - 1);
    assert_int_equal(path[0], '/');
    assert_int_equal(path[254], 'd');
    free(text);
}

static void test_unix_garbage(void **state)
{
    (void)state;
    static const char *const tables[] = {
        "00000000d7fce996 00000002 00000000 00010000 0001 01 42 /a\n",    /* no colon */
        "0000000gd7fce996: 00000002 00000000 00010000 0001 01 42 /a\n",   /* not hex */
        "00000000d7fce996: 0000000x 00000000 00010000 0001 01 42 /a\n",   /* refcount */
        "00000000d7fce996: 00000002 00000000 00010000 0001 0z 42 /a\n",   /* state */
        "00000000d7fce996: 00000002 00000000 00010000 0001 01 42x /a\n",  /* inode */
        "00000000d7fce996: 00000002 00000000 00010000 0001 01 0x2A /a\n", /* inode */
        "00000000d7fce996: 00000002 00000000 00010000 0001 42 /a\n",      /* a field short */
        "00000000d7fce996: 00000002 00000000 00010000 0001 01 42\t/a\n",  /* the kernel writes a space */
        "00000000d7fce996: 00000002 00000000 00010000 0001 01\n",
        ": 00000002 00000000 00010000 0001 01 42 /a\n",
    };
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++)
        expect_no_unix(tables[i], strlen(tables[i]), 42);

    char nul[] = "00000000d7fce996: 00000002 00000000 00010000 0001 01 42 /aNb\n";
    *strchr(nul, 'N') = '\0';
    expect_no_unix(nul, sizeof nul - 1, 42);
}

static void test_unix_path_making_up_a_line(void **state)
{
    (void)state;
    /* A socket bound to "/tmp/x\n00000000000000aa: 00000002 ... 2608713 /fake"
     * makes up a line claiming the inode of /tmp/hw-sample.sock: two lines
     * claim it with different paths, and neither is believed. */
    const char *forged = "Num       RefCount Protocol Flags    Type St Inode Path\n"
                         "00000000deadbeef: 00000002 00000000 00010000 0001 01 4242 /tmp/x\n"
                         "00000000000000aa: 00000002 00000000 00010000 0001 01 2608713 /fake\n"
                         "00000000d7fce996: 00000002 00000000 00010000 0001 01 2608713 /tmp/hw-sample.sock\n";
    expect_no_unix(forged, strlen(forged), 2608713);
    expect_unix(forged, 4242, "/tmp/x");
    /* The same line twice (a socket seen twice while the table was read). */
    const char *twice = "00000000d7fce996: 00000002 00000000 00010000 0001 01 2608713 /tmp/hw-sample.sock\n"
                        "00000000d7fce996: 00000002 00000000 00010000 0001 01 2608713 /tmp/hw-sample.sock\n";
    expect_unix(twice, 2608713, "/tmp/hw-sample.sock");
    const char *unbound_then_bound = "00000000d7fce996: 00000002 00000000 00000000 0001 01 2608713\n"
                                     "00000000d7fce996: 00000002 00000000 00010000 0001 01 2608713 /s\n";
    expect_no_unix(unbound_then_bound, strlen(unbound_then_bound), 2608713);
}

static void test_unix_path_with_newlines(void **state)
{
    (void)state;
    /* The kernel writes a path's newlines raw: the path goes on over the
     * lines after its entry, up to the next entry, and is read whole. */
    const char *table = "Num       RefCount Protocol Flags    Type St Inode Path\n"
                        "00000000deadbeef: 00000002 00000000 00010000 0001 01 4242 /tmp/x\"} 9\n"
                        "up 1\n"
                        "00000000: 1 2 not an entry\n"
                        "00000000d7fce996: 00000002 00000000 00010000 0001 01 99 /s\n";
    expect_unix(table, 4242, "/tmp/x\"} 9\nup 1\n00000000: 1 2 not an entry");
    expect_unix(table, 99, "/s");
}

/* ---- TCP states ---------------------------------------------------------- */

static void test_tcp_state_names(void **state)
{
    (void)state;
    static const char *const names[] = {"ESTABLISHED", "SYN_SENT",   "SYN_RECV", "FIN_WAIT1", "FIN_WAIT2",
                                        "TIME_WAIT",   "CLOSE",      "CLOSE_WAIT", "LAST_ACK", "LISTEN",
                                        "CLOSING",     "NEW_SYN_RECV", "BOUND_INACTIVE"};
    for (int i = 0; i < (int)(sizeof names / sizeof names[0]); i++)
        assert_string_equal(hw_tcp_state_name(i + 1), names[i]);
    assert_string_equal(hw_tcp_state_name(0), "UNKNOWN");
    assert_string_equal(hw_tcp_state_name(-1), "UNKNOWN");
    assert_string_equal(hw_tcp_state_name(14), "UNKNOWN");
    assert_string_equal(hw_tcp_state_name(255), "UNKNOWN");
    assert_string_equal(hw_tcp_state_name(-2147483647 - 1), "UNKNOWN");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ipv4_tcp),
        cmocka_unit_test(test_ipv4_peer),
        cmocka_unit_test(test_ipv6_tcp),
        cmocka_unit_test(test_udp),
        cmocka_unit_test(test_missing_inode_and_inode_zero),
        cmocka_unit_test(test_wrong_family_is_not_found),
        cmocka_unit_test(test_cut_lines),
        cmocka_unit_test(test_garbage_in_fields),
        cmocka_unit_test(test_inode_overflow_and_largest),
        cmocka_unit_test(test_nul_bytes),
        cmocka_unit_test(test_random_bytes),
        cmocka_unit_test(test_huge_lines),
        cmocka_unit_test(test_unix_paths),
        cmocka_unit_test(test_unix_missing_and_cut),
        cmocka_unit_test(test_unix_path_bounded),
        cmocka_unit_test(test_unix_garbage),
        cmocka_unit_test(test_unix_path_making_up_a_line),
        cmocka_unit_test(test_unix_path_with_newlines),
        cmocka_unit_test(test_tcp_state_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
