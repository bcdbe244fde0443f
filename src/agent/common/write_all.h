/*
 * write_all.h - writing a whole buffer to a descriptor, for every file the
 * agent writes itself (reports, the metrics textfile, the Sentry spool).
 */
#ifndef HANGWATCH_WRITE_ALL_H
#define HANGWATCH_WRITE_ALL_H

#include <stddef.h>

/* Write all of buf to fd, again after EINTR: 0, or -errno (-EIO for a
 * write that wrote nothing). */
int hw_write_all(int fd, const char *buf, size_t len);

#endif
