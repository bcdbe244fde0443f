/*
 * fuzz_perf_record.c - hw_perf_record_parse, which reads the records of the
 * early sampler's perf ring in the root-run agent.  The kernel writes the
 * records, but the stack bytes in them are the watched program's, and a
 * parser that trusted a length would read past the record.
 *
 * Feeds: the input as one record, with its header's size field set to the
 * input's length (so the parse reaches past the header), and as it is.
 *
 * Proves: no crash or overflow; a sample's stack copy lies inside the
 * record and is no longer than the room the record gives it; a record
 * whose size field disagrees with its length is refused.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/parse/perf_record.h"

#define CHECK(cond)                                                                                                    \
    do {                                                                                                               \
        if (!(cond))                                                                                                   \
            __builtin_trap();                                                                                          \
    } while (0)

static void parse_one(const unsigned char *rec, size_t len)
{
    hw_perf_sample s;
    uint64_t lost = 0;
    hw_perf_record_kind k = hw_perf_record_parse(rec, len, &s, &lost);
    if (len < 8 || hw_perf_record_size(rec) != len)
        CHECK(k == HW_PERF_RECORD_BAD);
    if (k == HW_PERF_RECORD_SAMPLE && s.stack_len > 0) {
        CHECK(s.stack >= rec && s.stack <= rec + len);
        CHECK(s.stack_len <= (size_t)(rec + len - s.stack));
        volatile unsigned char sink = s.stack[s.stack_len - 1]; /* inside: ASan would say otherwise */
        (void)sink;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 65535)
        return 0;
    unsigned char *rec = malloc(size ? size : 1);
    if (rec == NULL)
        return 0;
    memcpy(rec, data, size);
    parse_one(rec, size);
    if (size >= 8) {
        uint16_t len = (uint16_t)size;
        memcpy(rec + 6, &len, sizeof len);
        parse_one(rec, size);
    }
    free(rec);
    return 0;
}
