/*
 * random_id.c - see random_id.h.
 */
#include "random_id.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

void hw_random_bytes(void *buf, size_t len)
{
    unsigned char *out = buf;
    size_t got = 0;
    while (got < len) {
        ssize_t n = getrandom(out + got, len - got, GRND_NONBLOCK);
        if (n > 0) {
            got += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ ((uint64_t)getpid() << 40);
        for (; got < len; got++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            out[got] = (unsigned char)(x >> 56);
        }
    }
}

void hw_new_uuid(char out[37])
{
    unsigned char b[16];
    hw_random_bytes(b, sizeof b);
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
    snprintf(out, 37, "%02X%02X%02X%02X-%02X%02X-%02X%02X-%02X%02X-%02X%02X%02X%02X%02X%02X", b[0], b[1], b[2], b[3],
             b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}
