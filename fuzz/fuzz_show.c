/*
 * fuzz_show.c - `hangwatch show` on report text: hw_show_text, which parses
 * a report and prints its summary.
 *
 * Feeds: the input as the text of a report file (exactly its bytes, not
 * NUL-terminated, so ASan sees a read past the end), labelled as a file
 * name would be; the summary goes to /dev/null, opened once.  A report file
 * can be edited by anyone who can write to the report directory, and
 * `hangwatch show` may be run by root on it.
 *
 * Proves: no out-of-bounds access, leak (LeakSanitizer at exit of every
 * run), or UBSan report, whatever the JSON holds: wrong types, missing or
 * huge fields, negative or out-of-range indices, deep nesting; and the
 * result is 0 or 1, as hw_show_file's.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/show.h"

#define CHECK(cond)                                                                                                    \
    do {                                                                                                               \
        if (!(cond))                                                                                                   \
            __builtin_trap();                                                                                          \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t len);

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t len)
{
    static FILE *out;
    if (out == NULL) {
        out = fopen("/dev/null", "w");
        CHECK(out != NULL);
    }
    int rc = hw_show_text("fuzz-report.json", (const char *)in, len, out);
    CHECK(rc == 0 || rc == 1);
    return 0;
}
