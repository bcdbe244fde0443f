/*
 * fuzz_registration.c - hw_registration_parse on arbitrary datagrams.
 *
 * Feeds: anyone on the machine can send the agent's socket a datagram with
 * any data and (within what the kernel checks) any ancillary data.  The
 * input is split as
 *   byte 0        length of the data part (at most the bytes that follow)
 *   byte 1        recvmsg flags: bit 0 MSG_TRUNC, bit 1 MSG_CTRUNC, bit 2 no
 *                 control buffer at all (NULL)
 *   next n bytes  the data part
 *   the rest      the control part (cmsghdr headers and bodies)
 * The data part is copied to a buffer of exactly its size and the control
 * part is the tail of the input, so ASan sees any read past either end.
 *
 * Proves: the parser never reads out of bounds or trips UBSan; it lists at
 * most HW_REGISTRATION_MAX_FDS descriptors, each non-negative and a value
 * present in the control bytes; an accepted message has credentials with a
 * positive pid, right magic and version, no truncation flag, and exactly
 * its page descriptor (and pidfd, if any) in the list the caller closes.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "core/abi/registration.h"
#include "core/abi/shared_page.h"

#define CHECK(cond)                                                                                                    \
    do {                                                                                                               \
        if (!(cond))                                                                                                   \
            __builtin_trap();                                                                                          \
    } while (0)

/* Is `fd` a 4-byte value at a 4-byte aligned offset of the control bytes?
 * (Headers are 16 bytes and bodies start aligned, so every descriptor the
 * parser can take sits at such an offset.) */
static bool in_control(const uint8_t *control, size_t len, int fd)
{
    for (size_t i = 0; i + sizeof fd <= len; i += sizeof fd) {
        int v;
        memcpy(&v, control + i, sizeof v);
        if (v == fd)
            return true;
    }
    return false;
}

static bool in_fds(const hw_registration_parsed *p, int fd)
{
    for (size_t i = 0; i < p->fd_count; i++)
        if (p->fds[i] == fd)
            return true;
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t size)
{
    if (size < 2)
        return 0;
    size_t data_len = in[0] <= size - 2 ? in[0] : size - 2;
    int flags = ((in[1] & 1) ? MSG_TRUNC : 0) | ((in[1] & 2) ? MSG_CTRUNC : 0);
    bool no_control = (in[1] & 4) != 0;
    const uint8_t *control = in + 2 + data_len;
    size_t control_len = size - 2 - data_len;

    uint8_t *data = malloc(data_len ? data_len : 1);
    CHECK(data != NULL);
    memcpy(data, in + 2, data_len);

    hw_registration_parsed p;
    memset(&p, 0xa5, sizeof p); /* the parser must set every field itself */
    int rc = hw_registration_parse(data, data_len, flags, no_control ? NULL : control, control_len, &p);

    CHECK(rc == 0 || rc == -EBADMSG);
    CHECK(p.fd_count <= HW_REGISTRATION_MAX_FDS);
    for (size_t i = 0; i < p.fd_count; i++)
        CHECK(!no_control && p.fds[i] >= 0 && in_control(control, control_len, p.fds[i]));
    if (no_control)
        CHECK(p.fd_count == 0 && p.page_fd == -1 && p.pidfd == -1 && !p.have_cred);
    if (p.page_fd != -1 || p.pidfd != -1)
        CHECK(p.fd_count > 0);
    if (rc == 0) {
        CHECK(p.have_cred && p.pid > 0);
        CHECK(flags == 0);
        CHECK(data_len == sizeof(hw_registration));
        hw_registration msg;
        memcpy(&msg, data, sizeof msg);
        CHECK(msg.magic == HW_REGISTRATION_MAGIC && msg.version == HW_PAGE_VERSION);
        CHECK(p.page_fd >= 0 && in_fds(&p, p.page_fd));
        CHECK(p.pidfd == -1 || (p.pidfd >= 0 && in_fds(&p, p.pidfd)));
        CHECK(p.fd_count == (p.pidfd == -1 ? 1u : 2u)); /* nothing else came */
    }
    free(data);
    return 0;
}
