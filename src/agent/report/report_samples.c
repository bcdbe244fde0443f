/*
 * report_samples.c - early sampling's stacks put into a report.
 *
 * With early sampling the watch thread keeps the loop thread's samples as
 * raw addresses (a Point Stack chosen from the ring, and every sample of the
 * ring as distinct stacks; sampler_fill_request).  The report worker names
 * them here with the capture's own symbolizer, so that the watch thread
 * never symbolizes for a report: Python and JavaScript frames come as the
 * naming thread named their keys with the capture's (report_naming.c),
 * every other address is symbolized from the capture's maps.
 */
#include <stdlib.h>
#include <string.h>

#include "report_internal.h"

/* An address of early sampling symbolized with this capture's maps: as the
 * runtime frame its key was named (`named`, may be NULL), else
 * from the address (`exact`: where the thread was, not a return address). */
static void symbolize_sampled(hw_symbolizer *sym, uint64_t pc, bool exact, const hw_frame *named, hw_frame *out)
{
    if (named && named->language != HW_LANG_NATIVE && named->symbol_name) {
        *out = *named;
        out->symbol_name = strdup(named->symbol_name);
        out->source_file = named->source_file ? strdup(named->source_file) : NULL;
    } else {
        hw_symbolize_frame(sym, pc, exact, out);
    }
}

void hw_report_samples_build(hw_symbolizer *sym, const report_request *req, uint64_t interval_ns,
                             hw_report_samples *out)
{
    out->ps = (hw_point_stack){0};
    out->ring_frames = NULL;
    out->ring_frame_count = 0;
    if (!req->ps_depth || !sym)
        return;
    hw_in_app_context in_app = hw_request_in_app(req);
    for (size_t i = 0; i < req->ps_depth; i++) {
        symbolize_sampled(sym, req->ps_pcs[i], i == 0, req->ps_named ? &req->ps_named[i] : NULL,
                          &out->ps_frames[i]);
        hw_frame_classify(&out->ps_frames[i], &in_app);
    }
    /* and every sample's addresses, for a flame graph */
    hw_frame *ring_frames = NULL;
    if (req->ring.stack_count > 0 && (ring_frames = calloc(req->ring.addr_count, sizeof *ring_frames)) != NULL) {
        for (size_t i = 0; i < req->ring.addr_count; i++) {
            symbolize_sampled(sym, req->ring.addrs[i].pc, req->ring.addrs[i].innermost,
                              req->ring_named ? &req->ring_named[i] : NULL, &ring_frames[i]);
            hw_frame_classify(&ring_frames[i], &in_app);
        }
        out->ring_frames = ring_frames;
        out->ring_frame_count = req->ring.addr_count;
    }
    out->ps = (hw_point_stack){.frames = out->ps_frames,
                               .repeat_counts = req->ps_counts,
                               .frame_count = req->ps_depth,
                               .sample_count = req->ps_sample_count,
                               .ring_capacity = req->ps_ring_capacity,
                               .interval_ns = interval_ns,
                               .chosen_index = req->ps_chosen_index,
                               .top_repeat = req->ps_top_repeat,
                               .sources = req->ps_sources,
                               .kernel_trigger = req->ps_kernel_trigger,
                               .kernel_period_ns = req->ps_kernel_period_ns,
                               .stacks = ring_frames ? &req->ring : NULL,
                               .stack_frames = ring_frames};
}

void hw_report_samples_free(hw_report_samples *s)
{
    for (size_t i = 0; i < s->ps.frame_count; i++)
        hw_frame_clear(&s->ps_frames[i]);
    for (size_t i = 0; s->ring_frames && i < s->ring_frame_count; i++)
        hw_frame_clear(&s->ring_frames[i]);
    free(s->ring_frames);
    s->ring_frames = NULL;
    s->ring_frame_count = 0;
}
