/*
 * sentry_dsn.c - see sentry_dsn.h.
 */
#include "sentry_dsn.h"

#include <stdio.h>
#include <string.h>

static int fail(const char **why, const char *reason)
{
    *why = reason;
    return -1;
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool is_alnum(char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* Copy [p, p+n) into dst (size dstlen) if it fits. */
static bool copy_part(char *dst, size_t dstlen, const char *p, size_t n)
{
    if (n >= dstlen)
        return false;
    memcpy(dst, p, n);
    dst[n] = '\0';
    return true;
}

static bool key_ok(const char *p, size_t n)
{
    if (n == 0 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!is_alnum(p[i]))
            return false;
    return true;
}

static bool host_ok(const char *p, size_t n)
{
    if (n == 0 || n > 255)
        return false;
    if (p[0] == '[') {
        if (n < 3 || p[n - 1] != ']')
            return false;
        for (size_t i = 1; i + 1 < n; i++) {
            char c = p[i];
            if (!(is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == ':' || c == '.'))
                return false;
        }
        return true;
    }
    if (p[0] == '-' || p[0] == '.')
        return false;
    for (size_t i = 0; i < n; i++)
        if (!(is_alnum(p[i]) || p[i] == '-' || p[i] == '.'))
            return false;
    return true;
}

/* A path prefix: "" or "/seg[/seg...]", segments of unreserved characters,
 * none empty, "." or "..". */
static bool path_ok(const char *p, size_t n)
{
    if (n == 0)
        return true;
    if (p[0] != '/')
        return false;
    size_t seg_start = 1;
    for (size_t i = 1; i <= n; i++) {
        if (i == n || p[i] == '/') {
            size_t len = i - seg_start;
            if (len == 0)
                return false;
            if ((len == 1 && p[seg_start] == '.') || (len == 2 && p[seg_start] == '.' && p[seg_start + 1] == '.'))
                return false;
            seg_start = i + 1;
            continue;
        }
        char c = p[i];
        if (!(is_alnum(c) || c == '-' || c == '.' || c == '_' || c == '~'))
            return false;
    }
    return true;
}

int hw_sentry_dsn_parse(const char *text, hw_sentry_dsn *out, const char **why)
{
    if (text == NULL || text[0] == '\0')
        return fail(why, "empty");
    size_t total = strnlen(text, HW_SENTRY_DSN_MAX + 1);
    if (total > HW_SENTRY_DSN_MAX)
        return fail(why, "longer than 1024 characters");
    for (size_t i = 0; i < total; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c <= 0x20 || c >= 0x7f)
            return fail(why, "it contains a space, a control character or a non-ASCII byte");
    }
    hw_sentry_dsn d;
    memset(&d, 0, sizeof d);
    const char *p;
    if (strncmp(text, "https://", 8) == 0) {
        d.https = true;
        p = text + 8;
    } else if (strncmp(text, "http://", 7) == 0) {
        p = text + 7;
    } else {
        return fail(why, "it must start with https:// or http://");
    }
    if (strpbrk(p, "?#"))
        return fail(why, "a DSN has no query or fragment ('?', '#')");

    /* PUBLIC_KEY[:SECRET_KEY]@ */
    const char *at = strchr(p, '@');
    const char *slash = strchr(p, '/');
    if (at == NULL || (slash != NULL && slash < at))
        return fail(why, "no public key: expected SCHEME://KEY@HOST/PROJECT_ID");
    if (strchr(at + 1, '@'))
        return fail(why, "more than one '@'");
    const char *colon = memchr(p, ':', (size_t)(at - p));
    const char *key_end = colon ? colon : at;
    if (!key_ok(p, (size_t)(key_end - p)))
        return fail(why, "the public key must be 1 to 64 letters and digits");
    copy_part(d.public_key, sizeof d.public_key, p, (size_t)(key_end - p));
    if (colon) {
        if (!key_ok(colon + 1, (size_t)(at - colon - 1)))
            return fail(why, "the secret key must be 1 to 64 letters and digits");
        copy_part(d.secret_key, sizeof d.secret_key, colon + 1, (size_t)(at - colon - 1));
    }

    /* HOST[:PORT] up to the first '/' */
    const char *h = at + 1;
    slash = strchr(h, '/');
    if (slash == NULL)
        return fail(why, "no project id: expected SCHEME://KEY@HOST/PROJECT_ID");
    const char *host_end = slash;
    const char *port_colon = NULL;
    if (h[0] == '[') {
        const char *close = memchr(h, ']', (size_t)(slash - h));
        if (close == NULL)
            return fail(why, "an IPv6 host needs its closing ']'");
        if (close + 1 < slash) {
            if (close[1] != ':')
                return fail(why, "junk after the IPv6 host");
            port_colon = close + 1;
        }
    } else {
        port_colon = memchr(h, ':', (size_t)(slash - h));
    }
    if (port_colon)
        host_end = port_colon;
    if (!host_ok(h, (size_t)(host_end - h)))
        return fail(why, "the host is not a host name or an IP address");
    if (!copy_part(d.host, sizeof d.host, h, (size_t)(host_end - h)))
        return fail(why, "the host is too long");
    if (port_colon) {
        const char *q = port_colon + 1;
        if (q == slash)
            return fail(why, "no port after ':'");
        unsigned long port = 0;
        for (; q < slash; q++) {
            if (!is_digit(*q))
                return fail(why, "the port is not a decimal number");
            port = port * 10 + (unsigned long)(*q - '0');
            if (port > 65535)
                return fail(why, "the port is above 65535");
        }
        if (port == 0)
            return fail(why, "port 0");
        d.port = (unsigned)port;
    }

    /* [/PATH]/PROJECT_ID */
    const char *last = strrchr(slash, '/');
    const char *project = last + 1;
    size_t project_len = strlen(project);
    if (project_len == 0)
        return fail(why, "no project id after the last '/'");
    if (project_len > 20)
        return fail(why, "the project id is too long");
    for (size_t i = 0; i < project_len; i++)
        if (!is_digit(project[i]))
            return fail(why, "the project id must be a decimal number");
    memcpy(d.project_id, project, project_len + 1);
    size_t path_len = (size_t)(last - slash);
    if (!path_ok(slash, path_len))
        return fail(why, "the path before the project id has an empty, '.' or '..' segment or a character "
                         "a DSN path does not have");
    if (!copy_part(d.path, sizeof d.path, slash, path_len))
        return fail(why, "the path is too long");
    *out = d;
    return 0;
}

static int fits(int n, size_t len)
{
    return n < 0 || (size_t)n >= len ? -1 : n;
}

static void port_text(const hw_sentry_dsn *dsn, char buf[16])
{
    if (dsn->port)
        snprintf(buf, 16, ":%u", dsn->port);
    else
        buf[0] = '\0';
}

int hw_sentry_envelope_url(const hw_sentry_dsn *dsn, char *buf, size_t len)
{
    char port[16];
    port_text(dsn, port);
    return fits(snprintf(buf, len, "%s://%s%s%s/api/%s/envelope/", dsn->https ? "https" : "http", dsn->host, port,
                         dsn->path, dsn->project_id),
                len);
}

int hw_sentry_dsn_format(const hw_sentry_dsn *dsn, char *buf, size_t len)
{
    char port[16];
    port_text(dsn, port);
    return fits(snprintf(buf, len, "%s://%s%s%s@%s%s%s/%s", dsn->https ? "https" : "http", dsn->public_key,
                         dsn->secret_key[0] ? ":" : "", dsn->secret_key, dsn->host, port, dsn->path, dsn->project_id),
                len);
}

int hw_sentry_auth_header(const hw_sentry_dsn *dsn, const char *client, char *buf, size_t len)
{
    if (dsn->secret_key[0])
        return fits(snprintf(buf, len,
                             "X-Sentry-Auth: Sentry sentry_version=7, sentry_client=%s, sentry_key=%s, "
                             "sentry_secret=%s",
                             client, dsn->public_key, dsn->secret_key),
                    len);
    return fits(snprintf(buf, len, "X-Sentry-Auth: Sentry sentry_version=7, sentry_client=%s, sentry_key=%s", client,
                         dsn->public_key),
                len);
}
