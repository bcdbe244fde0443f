/*
 * random_id.h - unpredictable bytes and ids: report ids, socket and
 * temporary file names.  getrandom() without blocking: early in boot,
 * before the kernel's pool is ready, a report must still be written, so
 * the bytes then come from the clock and the pid (still unique within one
 * agent; O_EXCL and the private directory do the rest for file names).
 */
#ifndef HANGWATCH_RANDOM_ID_H
#define HANGWATCH_RANDOM_ID_H

#include <stddef.h>

void hw_random_bytes(void *buf, size_t len);

/* A fresh random (version 4) UUID in upper case, as the seed's ids. */
void hw_new_uuid(char out[37]);

#endif
