/*
 * text_bits.h - small text helpers that parsers and report code share: a
 * hex digit's value, a path's base name, a code point written as UTF-8.
 * Pure, header-only (they are a few instructions each).
 */
#ifndef HANGWATCH_TEXT_BITS_H
#define HANGWATCH_TEXT_BITS_H

#include <stdint.h>
#include <string.h>

/* The value of hex digit `c` (either case), or -1. */
static inline int hw_hex_digit_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* What follows the last '/' of `path` (all of it when it has none). */
static inline const char *hw_base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* Write code point `c` as UTF-8 at *p (up to 4 bytes) and move *p past it;
 * a lone surrogate becomes U+FFFD. */
static inline void hw_put_utf8(char **p, uint32_t c)
{
    unsigned char *o = (unsigned char *)*p;
    if (c >= 0xd800 && c <= 0xdfff)
        c = 0xfffd; /* a lone surrogate has no UTF-8 form */
    if (c < 0x80) {
        *o++ = (unsigned char)c;
    } else if (c < 0x800) {
        *o++ = (unsigned char)(0xc0 | (c >> 6));
        *o++ = (unsigned char)(0x80 | (c & 63));
    } else if (c < 0x10000) {
        *o++ = (unsigned char)(0xe0 | (c >> 12));
        *o++ = (unsigned char)(0x80 | ((c >> 6) & 63));
        *o++ = (unsigned char)(0x80 | (c & 63));
    } else {
        *o++ = (unsigned char)(0xf0 | (c >> 18));
        *o++ = (unsigned char)(0x80 | ((c >> 12) & 63));
        *o++ = (unsigned char)(0x80 | ((c >> 6) & 63));
        *o++ = (unsigned char)(0x80 | (c & 63));
    }
    *p = (char *)o;
}

#endif
