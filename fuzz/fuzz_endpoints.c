/*
 * fuzz_endpoints.c - the parsers of the values that name a server: a Sentry
 * DSN (--sentry-dsn, SENTRY_DSN, the DSN in a spooled envelope's header;
 * sentry_dsn.c) and --metrics-listen's ADDR:PORT (listen_address.c).
 *
 * Feeds: the input, NUL-terminated in a buffer of exactly its size plus
 * one, to both parsers.
 *
 * Proves: no out-of-bounds read, no UBSan report; both are deterministic;
 * failure leaves the output untouched and gives a reason; an accepted DSN
 * writes back (hw_sentry_dsn_format) to text that parses to the same DSN,
 * and its envelope URL and auth header hold no space, control character,
 * '@' after the scheme's host or other line: nothing in a DSN can reach
 * another host or add a header; an accepted address has a port from 1 to
 * 65535 and a host without ':' unless bracketed.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/parse/listen_address.h"
#include "core/parse/sentry_dsn.h"

#define CHECK(cond)                                                                                                    \
    do {                                                                                                               \
        if (!(cond))                                                                                                   \
            __builtin_trap();                                                                                          \
    } while (0)

static void no_controls(const char *s)
{
    for (; *s; s++)
        CHECK((unsigned char)*s > 0x20 || *s == ' ');
}

static void check_dsn(const char *text)
{
    hw_sentry_dsn a, b;
    memset(&a, 0x5a, sizeof a);
    memset(&b, 0x5a, sizeof b);
    const char *why_a = NULL, *why_b = NULL;
    int ra = hw_sentry_dsn_parse(text, &a, &why_a);
    int rb = hw_sentry_dsn_parse(text, &b, &why_b);
    CHECK(ra == rb);
    if (ra != 0) {
        CHECK(why_a != NULL && why_a[0] != '\0' && why_a == why_b);
        CHECK((unsigned char)a.host[0] == 0x5a);
        return;
    }
    CHECK(memcmp(&a, &b, sizeof a) == 0);
    char again[2048], url[1024], auth[1024];
    CHECK(hw_sentry_dsn_format(&a, again, sizeof again) > 0);
    hw_sentry_dsn c;
    memset(&c, 0, sizeof c);
    const char *why_c = NULL;
    CHECK(hw_sentry_dsn_parse(again, &c, &why_c) == 0);
    CHECK(c.https == a.https && c.port == a.port && strcmp(c.host, a.host) == 0 && strcmp(c.path, a.path) == 0 &&
          strcmp(c.project_id, a.project_id) == 0 && strcmp(c.public_key, a.public_key) == 0 &&
          strcmp(c.secret_key, a.secret_key) == 0);
    CHECK(hw_sentry_envelope_url(&a, url, sizeof url) > 0);
    CHECK(strchr(url, ' ') == NULL && strchr(url, '@') == NULL && strchr(url, '?') == NULL);
    no_controls(url);
    CHECK(hw_sentry_auth_header(&a, "hangwatch/0", auth, sizeof auth) > 0);
    no_controls(auth);
    CHECK(a.project_id[0] != '\0' && a.public_key[0] != '\0' && a.host[0] != '\0');
}

static void check_listen(const char *text)
{
    hw_listen_address a, b;
    memset(&a, 0x5a, sizeof a);
    memset(&b, 0x5a, sizeof b);
    const char *why_a = NULL, *why_b = NULL;
    int ra = hw_listen_address_parse(text, &a, &why_a);
    int rb = hw_listen_address_parse(text, &b, &why_b);
    CHECK(ra == rb);
    if (ra != 0) {
        CHECK(why_a != NULL && why_a[0] != '\0');
        CHECK((unsigned char)a.host[0] == 0x5a);
        return;
    }
    CHECK(memcmp(&a, &b, sizeof a) == 0);
    CHECK(a.port >= 1 && a.port <= 65535);
    CHECK(a.ipv6 || strchr(a.host, ':') == NULL);
    CHECK(strlen(a.host) < sizeof a.host);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    check_dsn(text);
    check_listen(text);
    free(text);
    return 0;
}
