/*
 * listen_address.h - the ADDR:PORT of --metrics-listen, split and checked
 * before anything is bound.  Pure: no resolution, no socket; the agent
 * binds what this accepts (metrics_server.c).
 *
 * Accepted: HOST:PORT where HOST is an IPv4 address, a host name
 * (letters, digits, '-' and '.', as in /etc/hosts: "localhost"), a
 * bracketed IPv6 address ("[::1]:9464"), or empty (":9464", every
 * interface, as Prometheus exporters spell it); PORT is 1 to 65535 in
 * decimal.  Anything else is refused with a reason.
 */
#ifndef HANGWATCH_LISTEN_ADDRESS_H
#define HANGWATCH_LISTEN_ADDRESS_H

#include <stddef.h>

#define HW_LISTEN_HOST_MAX 254

typedef struct hw_listen_address {
    char host[HW_LISTEN_HOST_MAX]; /* without brackets; "" = every interface */
    unsigned port;                 /* 1..65535 */
    int ipv6;                      /* the host was bracketed */
} hw_listen_address;

/* 0 and *out, or -1 and a reason in *why (*out untouched). */
int hw_listen_address_parse(const char *text, hw_listen_address *out, const char **why);

#endif
