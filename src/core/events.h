/*
 * events.h - what the agent sends a program that uses the C library when it
 * asked for callbacks: one datagram per event on the program's own abstract
 * socket (named by `hangwatch attach --events-socket`).  Sent with
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
};

typedef struct hw_event_msg {
    uint32_t magic;
    uint32_t kind;
    int32_t tid;
    int32_t reserved;
    uint64_t busy_ns;
    uint64_t final_ns;
    char report_path[HW_EVENT_PATH_MAX]; /* NUL-terminated, may be empty */
} hw_event_msg;

#endif
