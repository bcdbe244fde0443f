/*
 * text_escape.c - see text_escape.h.
 */
#include "text_escape.h"

#include <string.h>

const char *hw_escape_bytes(const char *in, size_t in_len, char *out, size_t out_size)
{
    static const char hex[] = "0123456789abcdef";
    size_t used = 0;
    for (size_t i = 0; i < in_len; i++) {
        unsigned char c = (unsigned char)in[i];
        char buf[4];
        size_t n;
        if (c == '\\' || c == '\n' || c == '\r' || c == '\t') {
            buf[0] = '\\';
            buf[1] = c == '\n' ? 'n' : c == '\r' ? 'r' : c == '\t' ? 't' : '\\';
            n = 2;
        } else if (c >= 0x20 && c < 0x7f) {
            buf[0] = (char)c;
            n = 1;
        } else {
            buf[0] = '\\';
            buf[1] = 'x';
            buf[2] = hex[c >> 4];
            buf[3] = hex[c & 15];
            n = 4;
        }
        if (used + n >= out_size)
            break;
        memcpy(out + used, buf, n);
        used += n;
    }
    out[used] = '\0';
    return out;
}

const char *hw_escape_text(const char *in, char *out, size_t out_size)
{
    if (in == NULL)
        in = "?";
    return hw_escape_bytes(in, strlen(in), out, out_size);
}
