/*
 * fuzz_escape.c - hw_escape_bytes, which stands between every name that
 * comes from a watched program (or a report file) and a terminal.
 *
 * Feeds: the input bytes as the text, escaped into buffers of several sizes
 * (1, a small one whose size comes from the first byte, and one large enough
 * for everything), each allocated exactly so ASan sees any write past it.
 *
 * Proves: the output never exceeds its buffer, is always NUL-terminated,
 * holds only printable ASCII (no ESC can reach a terminal), is a prefix of
 * the full escaping made of whole escapes (truncation never cuts "\xHH",
 * "\n" or "\\"), and the large buffer gets all of it, which unescapes back to the
 * input.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/text_escape.h"

#define CHECK(cond)                                                                                                    \
    do {                                                                                                               \
        if (!(cond))                                                                                                   \
            __builtin_trap();                                                                                          \
    } while (0)

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* Unescape `s` into `out`; returns the byte count, or -1 when `s` is not a
 * sequence of whole escapes. */
static long unescape(const char *s, unsigned char *out)
{
    long n = 0;
    while (*s) {
        if (*s != '\\') {
            out[n++] = (unsigned char)*s++;
        } else if (s[1] == '\\' || s[1] == 'n' || s[1] == 'r' || s[1] == 't') {
            out[n++] = s[1] == 'n' ? '\n' : s[1] == 'r' ? '\r' : s[1] == 't' ? '\t' : '\\';
            s += 2;
        } else if (s[1] == 'x' && hexval(s[2]) >= 0 && hexval(s[3]) >= 0) {
            out[n++] = (unsigned char)(hexval(s[2]) * 16 + hexval(s[3]));
            s += 4;
        } else {
            return -1;
        }
    }
    return n;
}

static char *escape_into(const uint8_t *in, size_t len, size_t out_size)
{
    char *out = malloc(out_size);
    CHECK(out != NULL);
    memset(out, 'Z', out_size);
    const char *r = hw_escape_bytes((const char *)in, len, out, out_size);
    CHECK(r == out);
    size_t n = strnlen(out, out_size);
    CHECK(n < out_size); /* NUL-terminated inside the buffer */
    for (size_t i = 0; i < n; i++)
        CHECK(out[i] >= 0x20 && out[i] < 0x7f);
    return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t len);

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t len)
{
    size_t big = len * 4 + 1;
    char *full = escape_into(in, len, big);
    unsigned char *back = malloc(len + 1);
    CHECK(back != NULL);
    CHECK(unescape(full, back) == (long)len && memcmp(back, in, len) == 0);

    size_t sizes[] = {1, len > 0 ? (size_t)in[0] % 64 + 1 : 2, len + 1};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        char *part = escape_into(in, len, sizes[i]);
        size_t n = strlen(part);
        CHECK(strncmp(part, full, n) == 0); /* a prefix of the whole */
        long got = unescape(part, back);     /* of whole escapes */
        CHECK(got >= 0 && memcmp(back, in, (size_t)got) == 0);
        /* Cut only where the next escape did not fit. */
        if ((size_t)got < len) {
            size_t next = in[got] == '\\' ? 2 : (in[got] >= 0x20 && in[got] < 0x7f) ? 1 : 4;
            CHECK(n + next >= sizes[i]);
        }
        free(part);
    }
    free(back);
    free(full);
    return 0;
}
