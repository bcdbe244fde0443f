/*
 * sentry_dsn.h - a Sentry DSN (--sentry-dsn, SENTRY_DSN), checked before
 * anything starts, and the two things sending needs from it: the envelope
 * endpoint's URL and the X-Sentry-Auth header.  Pure.
 *
 * The form Sentry gives out, and its SDKs parse:
 *
 *   SCHEME://PUBLIC_KEY[:SECRET_KEY]@HOST[:PORT][/PATH]/PROJECT_ID
 *
 * SCHEME is http or https; the keys are letters and digits (Sentry's are
 * 32 hex digits); HOST a host name, an IPv4 address or a bracketed IPv6
 * address; PORT 1..65535; PATH (a prefix some installs sit under) is made
 * of letters, digits and "-._~/" with no empty or dot segment; PROJECT_ID
 * is decimal.  No query, no fragment, no spaces or control characters, at
 * most HW_SENTRY_DSN_MAX bytes.  Whatever else is refused with a reason:
 * the DSN reaches a URL and an HTTP header, so nothing may smuggle in
 * another host, header or line.
 */
#ifndef HANGWATCH_SENTRY_DSN_H
#define HANGWATCH_SENTRY_DSN_H

#include <stdbool.h>
#include <stddef.h>

#define HW_SENTRY_DSN_MAX 1024

typedef struct hw_sentry_dsn {
    bool https;
    char public_key[65];
    char secret_key[65]; /* "" when the DSN has none (modern DSNs) */
    char host[256];      /* as written, brackets of an IPv6 address included */
    unsigned port;       /* 0: the scheme's own */
    char path[256];      /* "" or "/prefix" (no trailing slash) */
    char project_id[21];
} hw_sentry_dsn;

/* 0 and *out, or -1 and a reason in *why (*out untouched). */
int hw_sentry_dsn_parse(const char *text, hw_sentry_dsn *out, const char **why);

/* SCHEME://HOST[:PORT][PATH]/api/PROJECT_ID/envelope/ into buf: its
 * length, or -1 when it does not fit. */
int hw_sentry_envelope_url(const hw_sentry_dsn *dsn, char *buf, size_t len);

/* The DSN written back in its canonical form (for an envelope's header). */
int hw_sentry_dsn_format(const hw_sentry_dsn *dsn, char *buf, size_t len);

/* "X-Sentry-Auth: Sentry sentry_version=7, sentry_client=CLIENT,
 * sentry_key=KEY[, sentry_secret=SECRET]" into buf: its length, or -1. */
int hw_sentry_auth_header(const hw_sentry_dsn *dsn, const char *client, char *buf, size_t len);

#endif
