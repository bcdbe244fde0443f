/*
 * write_all.c - see write_all.h.
 */
#include "write_all.h"

#include <errno.h>
#include <unistd.h>

int hw_write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? -errno : -EIO;
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}
