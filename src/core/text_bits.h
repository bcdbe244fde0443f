/*
 * text_bits.h - small text helpers that parsers and report code share: a
 * hex digit's value and a path's base name.  Pure, header-only (they are a
 * few instructions each).
 */
#ifndef HANGWATCH_TEXT_BITS_H
#define HANGWATCH_TEXT_BITS_H

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

#endif
