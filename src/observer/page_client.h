/*
 * page_client.h - the monitored side's half of registration: create the
 * loop page (a memfd), map it, and hand it to the agent over its datagram
 * socket (registration.h).  Shared by the preloaded observer and the C
 * library.  Only system calls, no allocation: safe in a child right after
 * fork() in a threaded program.
 */
#ifndef HANGWATCH_PAGE_CLIENT_H
#define HANGWATCH_PAGE_CLIENT_H

#include <stdbool.h>
#include <stdint.h>

#include "../core/shared_page.h"

/*
 * Create and register this process's page.  With `busy_from_now`, the main
 * thread's slot starts busy at `now_ns` (a launch); otherwise it starts
 * waiting.  Returns the mapped page, or NULL (the process then runs
 * unwatched).
 */
hw_shared_page *hw_page_publish(const char *socket_name, bool busy_from_now, uint64_t now_ns);

#endif
