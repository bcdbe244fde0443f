/*
 * page_guard.c - a watched process's page that faults must not take the
 * agent down.
 *
 * Pages come from other processes as sealed memfds (admission.c checks
 * that they cannot shrink), but the agent may run as root and reads them
 * all the time: if one faults anyway (SIGBUS), the guard replaces it by a
 * zero page and marks it; the watch loop then stops watching that process.
 * A fault anywhere else is not hidden: the default action follows.
 */
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "watch.h"

/* Pages mapped from watched processes, and which of them faulted.  Written
 * only by the watch thread, read by the handler on the faulting thread
 * (only the watch thread reads pages). */
static void *volatile g_guarded[MAX_WATCHED];
static volatile sig_atomic_t g_faulted[MAX_WATCHED];
static volatile sig_atomic_t g_any_faulted; /* some page faulted since the last sweep */

static void on_sigbus(int sig, siginfo_t *info, void *context)
{
    (void)context;
    uintptr_t addr = (uintptr_t)info->si_addr;
    for (size_t i = 0; i < MAX_WATCHED; i++) {
        uintptr_t page = (uintptr_t)g_guarded[i];
        if (page != 0 && addr >= page && addr < page + HW_PAGE_SIZE) {
            /* A zero page in its place: the read that faulted is retried
             * and sees an empty page; the watch loop drops the process. */
            void *p = mmap((void *)page, HW_PAGE_SIZE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
            if (p != MAP_FAILED) {
                g_faulted[i] = 1;
                g_any_faulted = 1;
                return;
            }
        }
    }
    /* Not one of ours: the default action (a real bug must not be hidden). */
    signal(sig, SIG_DFL);
}

void page_guard_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, NULL);
}

void page_guard_add(const void *page)
{
    for (size_t i = 0; i < MAX_WATCHED; i++) {
        if (g_guarded[i] == NULL) {
            g_faulted[i] = 0;
            g_guarded[i] = (void *)page;
            return;
        }
    }
}

void page_guard_remove(const void *page)
{
    for (size_t i = 0; i < MAX_WATCHED; i++) {
        if (g_guarded[i] == page) {
            g_guarded[i] = NULL;
            g_faulted[i] = 0;
        }
    }
}

bool page_guard_take_news(void)
{
    bool any = g_any_faulted != 0;
    g_any_faulted = 0;
    return any;
}

bool page_guard_faulted(const void *page)
{
    for (size_t i = 0; i < MAX_WATCHED; i++)
        if (g_guarded[i] == page)
            return g_faulted[i] != 0;
    return false;
}
