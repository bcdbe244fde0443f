/* test_endpoints.c - the values that name a server: --metrics-listen's
 * ADDR:PORT (listen_address.c) and a Sentry DSN (sentry_dsn.c), with the
 * URL and auth header sending builds from it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "core/parse/listen_address.h"
#include "core/parse/sentry_dsn.h"

static void listen_ok(const char *text, const char *host, unsigned port, int ipv6)
{
    hw_listen_address a;
    const char *why = NULL;
    assert_int_equal(hw_listen_address_parse(text, &a, &why), 0);
    assert_string_equal(a.host, host);
    assert_int_equal(a.port, port);
    assert_int_equal(a.ipv6, ipv6);
}

static const char *listen_fails(const char *text)
{
    hw_listen_address a;
    memset(&a, 0x5a, sizeof a);
    const char *why = NULL;
    assert_int_equal(hw_listen_address_parse(text, &a, &why), -1);
    assert_non_null(why);
    assert_int_equal((unsigned char)a.host[0], 0x5a); /* untouched */
    return why;
}

static void test_listen_addresses(void **state)
{
    (void)state;
    listen_ok("127.0.0.1:9464", "127.0.0.1", 9464, 0);
    listen_ok(":9464", "", 9464, 0);
    listen_ok("localhost:1", "localhost", 1, 0);
    listen_ok("[::1]:65535", "::1", 65535, 1);
    listen_ok("[::]:80", "::", 80, 1);
    assert_non_null(strstr(listen_fails("9464"), "no port"));
    assert_non_null(strstr(listen_fails("127.0.0.1:"), "no port"));
    assert_non_null(strstr(listen_fails("127.0.0.1:65536"), "above 65535"));
    assert_non_null(strstr(listen_fails("127.0.0.1:0"), "port 0"));
    assert_non_null(strstr(listen_fails("127.0.0.1:-1"), "decimal"));
    assert_non_null(strstr(listen_fails("127.0.0.1:94 64"), "decimal"));
    assert_non_null(strstr(listen_fails("::1:9464"), "brackets"));
    assert_non_null(strstr(listen_fails("[::1:9464"), "brackets"));
    assert_non_null(strstr(listen_fails("[zz]:9464"), "IPv6"));
    assert_non_null(strstr(listen_fails("host name:9464"), "character"));
    assert_non_null(strstr(listen_fails("-x:9464"), "starts with"));
    assert_non_null(listen_fails(""));
    assert_non_null(listen_fails(NULL));
}

static hw_sentry_dsn dsn_ok(const char *text)
{
    hw_sentry_dsn d;
    const char *why = NULL;
    int rc = hw_sentry_dsn_parse(text, &d, &why);
    if (rc != 0)
        fail_msg("'%s' refused: %s", text, why);
    return d;
}

static const char *dsn_fails(const char *text)
{
    hw_sentry_dsn d;
    memset(&d, 0x5a, sizeof d);
    const char *why = NULL;
    assert_int_equal(hw_sentry_dsn_parse(text, &d, &why), -1);
    assert_non_null(why);
    assert_int_equal((unsigned char)d.host[0], 0x5a);
    return why;
}

static void test_dsn_forms(void **state)
{
    (void)state;
    char buf[512];
    hw_sentry_dsn d = dsn_ok("https://0123456789abcdef0123456789abcdef@o1.ingest.sentry.io/42");
    assert_true(d.https);
    assert_string_equal(d.public_key, "0123456789abcdef0123456789abcdef");
    assert_string_equal(d.secret_key, "");
    assert_string_equal(d.host, "o1.ingest.sentry.io");
    assert_int_equal(d.port, 0);
    assert_string_equal(d.path, "");
    assert_string_equal(d.project_id, "42");
    assert_true(hw_sentry_envelope_url(&d, buf, sizeof buf) > 0);
    assert_string_equal(buf, "https://o1.ingest.sentry.io/api/42/envelope/");
    assert_true(hw_sentry_auth_header(&d, "hangwatch/0.1.0", buf, sizeof buf) > 0);
    assert_string_equal(buf, "X-Sentry-Auth: Sentry sentry_version=7, sentry_client=hangwatch/0.1.0, "
                             "sentry_key=0123456789abcdef0123456789abcdef");

    d = dsn_ok("http://pub:sec@127.0.0.1:9000/sentry/sub/7");
    assert_false(d.https);
    assert_string_equal(d.secret_key, "sec");
    assert_int_equal(d.port, 9000);
    assert_string_equal(d.path, "/sentry/sub");
    assert_true(hw_sentry_envelope_url(&d, buf, sizeof buf) > 0);
    assert_string_equal(buf, "http://127.0.0.1:9000/sentry/sub/api/7/envelope/");
    assert_true(hw_sentry_auth_header(&d, "c", buf, sizeof buf) > 0);
    assert_non_null(strstr(buf, ", sentry_key=pub, sentry_secret=sec"));
    assert_true(hw_sentry_dsn_format(&d, buf, sizeof buf) > 0);
    assert_string_equal(buf, "http://pub:sec@127.0.0.1:9000/sentry/sub/7");

    d = dsn_ok("http://k@[::1]:8080/1");
    assert_string_equal(d.host, "[::1]");
    assert_true(hw_sentry_envelope_url(&d, buf, sizeof buf) > 0);
    assert_string_equal(buf, "http://[::1]:8080/api/1/envelope/");
    /* Too small a buffer is refused, not cut. */
    assert_int_equal(hw_sentry_envelope_url(&d, buf, 10), -1);
}

static void test_dsn_refused(void **state)
{
    (void)state;
    assert_non_null(strstr(dsn_fails("ftp://k@h/1"), "https://"));
    assert_non_null(strstr(dsn_fails("https://h/1"), "public key"));
    assert_non_null(strstr(dsn_fails("https://@h/1"), "public key"));
    assert_non_null(strstr(dsn_fails("https://k@h"), "project id"));
    assert_non_null(strstr(dsn_fails("https://k@h/"), "project id"));
    assert_non_null(strstr(dsn_fails("https://k@h/abc"), "decimal"));
    assert_non_null(strstr(dsn_fails("https://k@h/1/"), "project id"));
    assert_non_null(strstr(dsn_fails("https://k@h:0/1"), "port 0"));
    assert_non_null(strstr(dsn_fails("https://k@h:99999/1"), "65535"));
    assert_non_null(strstr(dsn_fails("https://k@h:/1"), "no port"));
    assert_non_null(strstr(dsn_fails("https://k@h:8x/1"), "decimal"));
    assert_non_null(strstr(dsn_fails("https://k@h/1?x=1"), "query"));
    assert_non_null(strstr(dsn_fails("https://k@h/1#f"), "query"));
    assert_non_null(strstr(dsn_fails("https://k@h/a b/1"), "space"));
    assert_non_null(strstr(dsn_fails("https://k@h/1\r\nX-Evil: 1"), "control"));
    assert_non_null(strstr(dsn_fails("https://k@a@h/1"), "'@'"));
    assert_non_null(strstr(dsn_fails("https://k!@h/1"), "public key"));
    assert_non_null(strstr(dsn_fails("https://k:@h/1"), "secret key"));
    assert_non_null(strstr(dsn_fails("https://k@ho_st/1"), "host"));
    assert_non_null(strstr(dsn_fails("https://k@-h/1"), "host"));
    assert_non_null(strstr(dsn_fails("https://k@[::1/1"), "']'"));
    assert_non_null(strstr(dsn_fails("https://k@[::1]x/1"), "junk"));
    assert_non_null(strstr(dsn_fails("https://k@h/../1"), "segment"));
    assert_non_null(strstr(dsn_fails("https://k@h//1"), "segment"));
    assert_non_null(strstr(dsn_fails("https://k@h/a%2f/1"), "segment"));
    assert_non_null(strstr(dsn_fails("https://k@h/123456789012345678901"), "too long"));
    assert_non_null(dsn_fails(""));
    assert_non_null(dsn_fails(NULL));
    char long_dsn[2048] = "https://k@h/";
    memset(long_dsn + strlen(long_dsn), 'a', 1500);
    assert_non_null(strstr(dsn_fails(long_dsn), "longer"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_listen_addresses),
        cmocka_unit_test(test_dsn_forms),
        cmocka_unit_test(test_dsn_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
