/*
 * registration.h - the one message a monitored process sends the agent at
 * start-up: "here is my loop page".
 *
 * The message is a datagram on the agent's abstract Unix socket (named by
 * HANGWATCH_AGENT_SOCKET, "@name" meaning the abstract namespace), carrying
 * this struct as data and the page's memfd as SCM_RIGHTS.  The agent turns
 * on SO_PASSCRED, so the kernel attaches the sender's real pid and uid; the
 * agent believes those, not the pid written here.
 */
#ifndef HANGWATCH_REGISTRATION_H
#define HANGWATCH_REGISTRATION_H

#include <stdint.h>

#define HW_ENV_AGENT_SOCKET "HANGWATCH_AGENT_SOCKET"
/* Set by `hangwatch run --no-follow`: only this pid registers. */
#define HW_ENV_ONLY_PID "HANGWATCH_ONLY_PID"
#define HW_REGISTRATION_MAGIC 0x68777265u /* "hwre" */

typedef struct hw_registration {
    uint32_t magic;
    uint32_t version; /* HW_PAGE_VERSION */
    int32_t pid;
    int32_t reserved;
} hw_registration;

#endif
