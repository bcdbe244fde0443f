/*
 * service_notify.c - the agent as a systemd service (deploy/
 * hangwatch.service, Type=notify): it says READY once it watches, keeps
 * the service manager's watchdog fed from the watch thread itself (so a
 * watch thread that hangs is restarted: the agent must not hang either),
 * says RELOADING while it reads its --config file again (then READY), and
 * says STOPPING on its way out.  Through libsystemd's sd_notify;
 * without NOTIFY_SOCKET (not started by systemd) every call does nothing.
 */
#include <stdio.h>
#include <systemd/sd-daemon.h>

#include "watch.h"

void service_notify_ready(agent *a)
{
    uint64_t usec = 0;
    if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0)
        a->watchdog_interval_ns = usec * 1000ull / 2; /* twice per period, as sd_watchdog_enabled(3) advises */
    a->watchdog_next_ns = a->watchdog_interval_ns ? hw_monotonic_ns() + a->watchdog_interval_ns : UINT64_MAX;
    sd_notifyf(0, "READY=1\nSTATUS=watching %zu process%s", a->table.count, a->table.count == 1 ? "" : "es");
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
    sd_notifyf(0, "WATCHDOG=1\nSTATUS=watching %zu process%s", a->table.count, a->table.count == 1 ? "" : "es");
}

void service_notify_stopping(void)
{
    sd_notify(0, "STOPPING=1");
}

void service_notify_reloading(bool done)
{
    sd_notify(0, done ? "READY=1" : "RELOADING=1");
}
