/*
 * wait_peer.h - the other party of a blocked thread's wait, when it is on
 * this machine: "blocked in recvfrom on TCP 127.0.0.1:40312 → 127.0.0.1:8080,
 * held by pid 4242 (gunicorn)" says whom to look at next, where the
 * descriptor alone says only where.
 *
 * A TCP connection's other end is the line of the process's own network
 * namespace's table (/proc/PID/net/tcp, tcp6) whose endpoints are this
 * one's swapped, or, not yet accepted, the socket listening on its port; a
 * unix socket's is the kernel's record of its peer (sock_diag, in the
 * agent's own network namespace); a pipe's is its other descriptors open
 * for writing.  The process holding that socket or pipe is found the way
 * `ss -p` and `lsof` find it, by reading every process's descriptors under
 * /proc, bounded (HW_WAIT_PEER_MAX_PROCS processes, HW_WAIT_PEER_MAX_FDS
 * descriptors, HW_WAIT_PEER_BUDGET_MS of time), once per report, after the
 * capture.  A child waited for (wait4, waitid) is named from its pid, or the
 * thread's first child for "any".  What cannot be known is said
 * (peer.missing): another user's processes, a namespace the agent is not
 * in, a bound hit.  Everything read is the other processes' and the
 * kernel's: names are escaped by whoever prints them.
 */
#ifndef HANGWATCH_WAIT_PEER_H
#define HANGWATCH_WAIT_PEER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "core/hang_cause.h"

#define HW_WAIT_PEER_MAX_PROCS 32768
#define HW_WAIT_PEER_MAX_FDS 1000000
#define HW_WAIT_PEER_BUDGET_MS 200

/* Fill look->peer for thread `tid` of `pid`, blocked as `look` says (its
 * descriptor described: fd_kind set).  Nothing when the call has no other
 * party to name. */
void hw_wait_peer_find(pid_t pid, pid_t tid, hw_blocked_look *look);

/* The process holding descriptor link `target` ("socket:[N]", "pipe:[N]"),
 * other than descriptor `skip_fd` of `skip_pid`; open for writing only, if
 * `writer`.  Searches `proc_root` ("/proc"; tests pass another).  True and
 * *pid, *fd when found; else false with *why. */
bool hw_wait_peer_holder(const char *proc_root, const char *target, pid_t skip_pid, int skip_fd, bool writer,
                         pid_t *pid, int *fd, const char **why);

#endif
