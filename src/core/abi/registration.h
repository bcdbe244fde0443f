/*
 * registration.h - the one message a monitored process sends the agent at
 * start-up: "here is my loop page".
 *
 * The message is the one packet of a connection to the agent's abstract
 * Unix sequenced-packet socket (named by HANGWATCH_AGENT_SOCKET, "@name"
 * meaning the abstract namespace): the sender connects, sends this struct
 * as data with the page's memfd as SCM_RIGHTS, and closes.  The message
 * waits in the kernel until the agent accepts the connection, so a sender
 * never waits for the agent's pace, only for room in its listen backlog.  The agent turns
 * on SO_PASSCRED and SO_PASSPIDFD, so the kernel attaches the sender's real
 * pid and uid and a pidfd of the sender itself; the agent believes those,
 * not the pid written here.  Anyone on the machine can send to the socket:
 * the agent checks every message (hw_registration_parse) and then who sent
 * it (agent/watch/admission.c, docs/security.md).
 */
#ifndef HANGWATCH_REGISTRATION_H
#define HANGWATCH_REGISTRATION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define HW_ENV_AGENT_SOCKET "HANGWATCH_AGENT_SOCKET"
/* Set by `hangwatch run --no-follow`: only this pid registers. */
#define HW_ENV_ONLY_PID "HANGWATCH_ONLY_PID"
/* Set by `hangwatch run` for the preloaded observer: "tsc" to stamp busy
 * starts with the time-stamp counter, which the agent has found usable
 * (src/agent/watch/clock_source.c); anything else, the coarse clock.  Given to
 * `hangwatch run` itself, "coarse" makes the agent choose the coarse clock. */
#define HW_ENV_CLOCK "HANGWATCH_CLOCK"
#define HW_REGISTRATION_MAGIC 0x68777265u /* "hwre" */

/* Linux 6.5 has these; Debian 12's headers do not. */
#ifndef SO_PASSPIDFD
#define SO_PASSPIDFD 76
#endif
#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif
#ifndef SCM_PIDFD
#define SCM_PIDFD 0x04
#endif

typedef struct hw_registration {
    uint32_t magic;
    uint32_t version; /* HW_PAGE_VERSION */
    int32_t pid;
    int32_t reserved;
} hw_registration;

/* The most descriptors a registration message can bring in (the agent's
 * control buffer has room for no more; the kernel closes the rest). */
#define HW_REGISTRATION_MAX_FDS 8

/* What one received message holds. */
typedef struct hw_registration_parsed {
    bool have_cred;           /* SCM_CREDENTIALS were attached */
    pid_t pid;                /* ... the sender's pid, uid and gid */
    uid_t uid;
    gid_t gid;
    int pidfd;                /* SCM_PIDFD: the sender itself, -1 if none */
    bool pidfd_failed;        /* SCM_PIDFD came with an error instead (the sender is gone) */
    int page_fd;              /* the one SCM_RIGHTS descriptor, -1 if none */
    int fds[HW_REGISTRATION_MAX_FDS]; /* every descriptor that arrived: the caller closes them all */
    size_t fd_count;
} hw_registration_parsed;

/*
 * Parse a received message: `len` bytes of `data`, the recvmsg flags, and
 * `controllen` bytes of ancillary data.  Pure (it never looks behind a
 * descriptor).  Returns 0 for a well-formed registration (the struct of the
 * right size, magic and version, credentials, exactly one page descriptor,
 * at most one pidfd, no negative descriptor, nothing truncated), else
 * -EBADMSG.  Either way `out->fds` lists every descriptor the message
 * brought (up to HW_REGISTRATION_MAX_FDS; more makes it malformed), which
 * the caller must close.
 */
int hw_registration_parse(const void *data, size_t len, int msg_flags, const void *control, size_t controllen,
                          hw_registration_parsed *out);

#endif
