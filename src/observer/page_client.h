/*
 * page_client.h - the monitored side's half of registration: create the
 * loop page (a memfd), map it, and hand it to the agent in one message on
 * its socket (registration.h).  Shared by the preloaded observer and the C
 * library.  Only system calls, no allocation: safe in a child right after
 * fork() in a threaded program.
 */
#ifndef HANGWATCH_PAGE_CLIENT_H
#define HANGWATCH_PAGE_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/abi/shared_page.h"

/*
 * Create and register this process's page, whose busy starts are stamped
 * with `clock` (HW_PAGE_CLOCK_COARSE or _TSC, shared_page.h), and whose
 * header carries `flags` (HW_PAGE_FLAG_*): with HW_PAGE_FLAG_LAUNCHING, the
 * main thread's slot starts busy at `now_ns`, in that clock (a launch);
 * otherwise it starts waiting.  The page's memfd is sealed (it can neither
 * shrink nor grow, and the seals are final) before it is sent.  Never blocks: when the agent's
 * backlog is full it waits at most 200 ms for room, then gives up.  Returns
 * the mapped page, or NULL (the process then runs unwatched).  errno is left
 * as it was.
 */
hw_shared_page *hw_page_publish(const char *socket_name, uint32_t clock, uint32_t flags, uint64_t now_ns);

/* The line that says a process is not watched and why, built without
 * stdio; `length` 0: nothing to say (or said already). */
typedef struct hw_publish_warning {
    char text[320];
    _Atomic size_t length;
} hw_publish_warning;

/* The same, and when it fails, one line on stderr (a single write) says that
 * this process is not watched and why: now when `later` is NULL, else the
 * line is left in *later for hw_page_say_warning.  A forked child whose
 * registration fails says it later: if it executes a program, that program's
 * own registration says it (one line per process, not one per image). */
hw_shared_page *hw_page_publish_or_warn(const char *socket_name, uint32_t clock, uint32_t flags,
                                        uint64_t now_ns, hw_publish_warning *later);

/* Write a line left by hw_page_publish_or_warn, once, whichever thread
 * comes first (async-signal-safe). */
void hw_page_say_warning(hw_publish_warning *w);

#endif
