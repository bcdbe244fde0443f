/*
 * listen_address.c - see listen_address.h.
 */
#include "listen_address.h"

#include <string.h>

static int fail(const char **why, const char *reason)
{
    *why = reason;
    return -1;
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static int is_host_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) || c == '-' || c == '.';
}

static int is_ipv6_char(char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == ':' || c == '.';
}

int hw_listen_address_parse(const char *text, hw_listen_address *out, const char **why)
{
    if (text == NULL || text[0] == '\0')
        return fail(why, "empty: use ADDR:PORT, e.g. 127.0.0.1:9464");
    const char *colon = strrchr(text, ':');
    if (colon == NULL)
        return fail(why, "no port: use ADDR:PORT, e.g. 127.0.0.1:9464");
    hw_listen_address a;
    memset(&a, 0, sizeof a);
    const char *host = text;
    size_t host_len = (size_t)(colon - text);
    if (host_len > 0 && host[0] == '[') {
        if (host_len < 3 || host[host_len - 1] != ']')
            return fail(why, "an IPv6 address goes in brackets: [::1]:9464");
        host++;
        host_len -= 2;
        for (size_t i = 0; i < host_len; i++)
            if (!is_ipv6_char(host[i]))
                return fail(why, "not an IPv6 address inside the brackets");
        a.ipv6 = 1;
    } else {
        for (size_t i = 0; i < host_len; i++) {
            if (host[i] == ':')
                return fail(why, "an IPv6 address goes in brackets: [::1]:9464");
            if (!is_host_char(host[i]))
                return fail(why, "the address has a character no address or host name has");
        }
        if (host_len > 0 && (host[0] == '-' || host[0] == '.'))
            return fail(why, "the host name starts with '-' or '.'");
    }
    if (host_len >= sizeof a.host)
        return fail(why, "the host name is too long");
    memcpy(a.host, host, host_len);
    a.host[host_len] = '\0';

    const char *p = colon + 1;
    if (*p == '\0')
        return fail(why, "no port after ':'");
    unsigned long port = 0;
    for (; *p; p++) {
        if (!is_digit(*p))
            return fail(why, "the port is not a decimal number");
        port = port * 10 + (unsigned long)(*p - '0');
        if (port > 65535)
            return fail(why, "the port is above 65535");
    }
    if (port == 0)
        return fail(why, "port 0 is not a port to be scraped at");
    a.port = (unsigned)port;
    *out = a;
    return 0;
}
