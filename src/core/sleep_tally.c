/*
 * sleep_tally.c - the kinds of sleep the agent's looks found a stretch in
 * (sleep_tally.h).
 */
#include "sleep_tally.h"

#include <string.h>

bool hw_look_asleep(const hw_blocked_look *look)
{
    if (!look->valid || look->syscall_unreadable)
        return false;
    if (look->state == 'D')
        return true;
    return look->in_syscall && look->state != 'R';
}

static bool same_kind(const hw_sleep_kind *k, const hw_blocked_look *look)
{
    if (k->in_syscall != look->in_syscall)
        return false;
    return !k->in_syscall || (k->syscall == look->syscall && k->fd == look->fd);
}

bool hw_look_same_sleep(const hw_blocked_look *a, const hw_blocked_look *b)
{
    hw_sleep_kind k = {.in_syscall = a->in_syscall, .syscall = a->syscall, .fd = a->fd};
    return hw_look_asleep(a) && hw_look_asleep(b) && same_kind(&k, b);
}

void hw_sleep_tally_add(hw_sleep_tally *t, uint64_t seq, const hw_blocked_look *look)
{
    if (t->seq != seq) {
        memset(t, 0, sizeof *t);
        t->seq = seq;
    }
    if (!look->valid)
        return;
    t->looks++;
    if (!hw_look_asleep(look))
        return;
    for (unsigned i = 0; i < t->kinds; i++) {
        if (same_kind(&t->kind[i], look)) {
            t->kind[i].looks++;
            return;
        }
    }
    if (t->kinds == HW_SLEEP_KINDS)
        return;
    t->kind[t->kinds++] = (hw_sleep_kind){.in_syscall = look->in_syscall,
                                          .state = look->state,
                                          .syscall = look->syscall,
                                          .fd = look->fd,
                                          .wait_fd_count = look->wait_fd_count,
                                          .looks = 1};
    memcpy(t->kind[t->kinds - 1].args, look->args, sizeof look->args);
}

bool hw_sleep_tally_top(const hw_sleep_tally *t, uint64_t seq, hw_blocked_look *out, unsigned *looks)
{
    if (t->seq != seq || t->kinds == 0)
        return false;
    const hw_sleep_kind *best = &t->kind[0];
    for (unsigned i = 1; i < t->kinds; i++)
        if (t->kind[i].looks > best->looks)
            best = &t->kind[i];
    memset(out, 0, sizeof *out);
    out->valid = true;
    out->state = best->state;
    out->in_syscall = best->in_syscall;
    out->syscall = best->syscall;
    out->fd = best->fd;
    out->wait_fd_count = best->wait_fd_count;
    memcpy(out->args, best->args, sizeof out->args);
    *looks = best->looks;
    return true;
}
