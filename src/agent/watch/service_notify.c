/*
 * service_notify.c - the agent as a systemd service (deploy/
 * hangwatch.service, Type=notify): it says READY once it watches, keeps
 * the service manager's watchdog fed from the watch thread itself (so a
 * watch thread that hangs is restarted: the agent must not hang either),
 * says RELOADING while it reads its --config file again (then READY), and
 * says STOPPING on its way out.  Through libsystemd's sd_notify, loaded
 * only when NOTIFY_SOCKET is set; without it (not started by systemd)
 * every call does nothing.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "agent/common/optional_libs.h"
#include "watch.h"

/* libsystemd, loaded only under a service manager (NOTIFY_SOCKET set):
 * anywhere else every call here does nothing, as sd_notify would. */
static const hw_systemd_api *systemd(void)
{
    return getenv("NOTIFY_SOCKET") ? hw_systemd_api_load(NULL, 0) : NULL;
}

__attribute__((format(printf, 1, 2))) static void notify(const char *format, ...)
{
    const hw_systemd_api *sd = systemd();
    if (!sd)
        return;
    char state[256];
    va_list ap;
    va_start(ap, format);
    vsnprintf(state, sizeof state, format, ap);
    va_end(ap);
    sd->notify(0, state);
}

void service_notify_ready(agent *a)
{
    uint64_t usec = 0;
    const hw_systemd_api *sd = systemd();
    if (sd && sd->watchdog_enabled(0, &usec) > 0 && usec > 0)
        a->watchdog_interval_ns = usec * 1000ull / 2; /* twice per period, as sd_watchdog_enabled(3) advises */
    a->watchdog_next_ns = a->watchdog_interval_ns ? hw_monotonic_ns() + a->watchdog_interval_ns : UINT64_MAX;
    notify("READY=1\nSTATUS=watching %zu process%s", a->table.count, a->table.count == 1 ? "" : "es");
}

uint64_t service_watchdog_due(const agent *a)
{
    return a->watchdog_interval_ns ? a->watchdog_next_ns : UINT64_MAX;
}

void service_watchdog_tick(agent *a, uint64_t now)
{
    if (a->watchdog_interval_ns == 0 || now < a->watchdog_next_ns)
        return;
    a->watchdog_next_ns = now + a->watchdog_interval_ns;
    notify("WATCHDOG=1\nSTATUS=watching %zu process%s", a->table.count, a->table.count == 1 ? "" : "es");
}

void service_notify_stopping(void)
{
    notify("STOPPING=1");
}

void service_notify_reloading(bool done)
{
    notify(done ? "READY=1" : "RELOADING=1");
}
