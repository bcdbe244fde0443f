/*
 * events.h - what the agent sends a program that uses the C library: one
 * datagram per event on the program's own abstract socket (named by
 * `hangwatch attach --events-socket`), for its callbacks, and for the ping
 * detector the request to post a ping task to one of its loops.  Sent with
 * MSG_DONTWAIT: a program that does not read cannot slow the agent down.
 */
#ifndef HANGWATCH_EVENTS_H
#define HANGWATCH_EVENTS_H

#include <stdint.h>

#define HW_EVENT_MAGIC 0x68776576u /* "hwev" */
#define HW_EVENT_PATH_MAX 1024

enum {
    HW_EVENT_HANG = 1,
    HW_EVENT_REPORT = 2,
    HW_EVENT_HANG_END = 3,
    HW_EVENT_PING = 4, /* post ping `token` to the loop in slot `slot` */
};

typedef struct hw_event_msg {
    uint32_t magic;
    uint32_t kind;
    int32_t tid;
    uint32_t slot;  /* PING: the loop's slot in the page */
    uint64_t busy_ns;
    uint64_t final_ns;
    uint64_t token; /* PING: the ping's number */
    char report_path[HW_EVENT_PATH_MAX]; /* NUL-terminated, may be empty */
} hw_event_msg;

#endif
