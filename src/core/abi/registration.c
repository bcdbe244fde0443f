/*
 * registration.c - checking a registration message (registration.h).
 *
 * The ancillary data is walked by hand, not with CMSG_NXTHDR alone: every
 * header's length is checked against what is left of the buffer, so a
 * malformed buffer (this function is fuzzed with arbitrary bytes) can never
 * make it read past the end.
 */
#include "registration.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "shared_page.h"

/* List a descriptor for the caller to close.  False when it cannot be kept:
 * a negative number (the kernel never passes one; -1 is our "none") or a
 * full list (a well-formed message brings at most two). */
static bool keep_fd(hw_registration_parsed *out, int fd)
{
    if (fd < 0 || out->fd_count >= HW_REGISTRATION_MAX_FDS)
        return false;
    out->fds[out->fd_count++] = fd;
    return true;
}

int hw_registration_parse(const void *data, size_t len, int msg_flags, const void *control, size_t controllen,
                          hw_registration_parsed *out)
{
    memset(out, 0, sizeof *out);
    out->pidfd = -1;
    out->page_fd = -1;
    size_t page_fds = 0, pidfds = 0;
    bool malformed = false;

    const unsigned char *p = control;
    size_t left = control ? controllen : 0;
    while (left >= sizeof(struct cmsghdr)) {
        struct cmsghdr cm;
        memcpy(&cm, p, sizeof cm);
        if (cm.cmsg_len < sizeof(struct cmsghdr) || cm.cmsg_len > left) {
            malformed = true;
            break;
        }
        const unsigned char *body = p + CMSG_LEN(0);
        size_t body_len = cm.cmsg_len - CMSG_LEN(0);
        if (cm.cmsg_level == SOL_SOCKET && cm.cmsg_type == SCM_RIGHTS) {
            for (size_t i = 0; i + sizeof(int) <= body_len; i += sizeof(int)) {
                int fd;
                memcpy(&fd, body + i, sizeof fd);
                if (!keep_fd(out, fd))
                    malformed = true;
                else if (page_fds++ == 0)
                    out->page_fd = fd;
            }
        } else if (cm.cmsg_level == SOL_SOCKET && cm.cmsg_type == SCM_PIDFD && body_len >= sizeof(int)) {
            int fd;
            memcpy(&fd, body, sizeof fd);
            /* Counted, not told by pidfd < 0: a forged negative first pidfd
             * must not let a second one through.  A negative one is how the
             * kernel says it could make none (the sender is gone). */
            if (pidfds++ != 0) {
                malformed = true;
                keep_fd(out, fd);
            } else if (fd < 0) {
                out->pidfd_failed = true;
                malformed = true;
            } else if (!keep_fd(out, fd)) {
                malformed = true;
            } else {
                out->pidfd = fd;
            }
        } else if (cm.cmsg_level == SOL_SOCKET && cm.cmsg_type == SCM_CREDENTIALS &&
                   body_len >= sizeof(struct ucred)) {
            struct ucred cred;
            memcpy(&cred, body, sizeof cred);
            out->have_cred = true;
            out->pid = cred.pid;
            out->uid = cred.uid;
            out->gid = cred.gid;
        }
        size_t step = CMSG_ALIGN(cm.cmsg_len);
        if (step >= left)
            break;
        p += step;
        left -= step;
    }

    hw_registration msg;
    if (malformed || data == NULL || len != sizeof msg || (msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || !out->have_cred ||
        out->pid <= 0 || page_fds != 1)
        return -EBADMSG;
    memcpy(&msg, data, sizeof msg);
    if (msg.magic != HW_REGISTRATION_MAGIC || msg.version != HW_PAGE_VERSION)
        return -EBADMSG;
    return 0;
}
