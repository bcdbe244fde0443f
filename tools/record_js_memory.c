/*
 * record_js_memory.c - the seeds of fuzz/fuzz_js_memory.c: what the
 * agent's V8 readers read of a real node, recorded as that target's input
 * (its format is at the top of fuzz_js_memory.c).
 *
 *   record-js-memory NODE SCRIPT OUT [ARG...]
 *
 * Runs NODE SCRIPT ARG... as our child, waits for it to print "ready"
 * (and a moment, for its spin to begin), then does what the agent does:
 * finds V8's metadata, captures every thread with the frame reader, names
 * the frames.  Every read goes through hw_js_peek, which this program
 * defines (the agent's is js_peek.c, left out of the link) to read the
 * child and keep a copy of what it read (record_memory.h).  The metadata's
 * values, the threads' registers and stack copies and the copies are
 * written to OUT.  Exit 0, or 1 with the reason on stderr.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/capture/capture.h"
#include "agent/capture/proc_task.h"
#include "agent/symbols/js_internal.h"
#include "record_memory.h"

#define MAX_THREADS 4u
#define MAX_VALUES 64u
#define STACK_BYTES (32u * 1024) /* of each thread's copy, from its stack pointer */

bool hw_js_peek(pid_t pid, uint64_t addr, void *buf, size_t len)
{
    return record_memory_read(pid, addr, buf, len);
}

/* The metadata's values, in hw_js_metadata_names' order (0 when absent). */
static size_t metadata_values(pid_t pid, const char *maps, size_t maps_len, int32_t *values)
{
    char path[600];
    bool seen[MAX_VALUES];
    if (!hw_js_module_path(pid, maps, maps_len, path, sizeof path))
        return 0;
    const char *names[MAX_VALUES];
    size_t count = hw_js_metadata_names(names, MAX_VALUES);
    if (hw_js_read_metadata(path, values, seen, count) == 0)
        return 0;
    for (size_t i = 0; i < count; i++)
        if (!seen[i])
            values[i] = 0;
    return count;
}

static int write_input(const char *path, const int32_t *values, size_t value_count, const hw_process_snapshot *snap)
{
    const hw_thread_snapshot *order[MAX_THREADS];
    uint32_t n = 0;
    for (size_t t = 0; t < snap->thread_count && n < MAX_THREADS; t++)
        if (snap->threads[t].is_target)
            order[n++] = &snap->threads[t];
    /* Then the threads that run JavaScript (workers), then the rest. */
    for (int pass = 0; pass < 2; pass++)
        for (size_t t = 0; t < snap->thread_count && n < MAX_THREADS; t++)
            if (!snap->threads[t].is_target && (snap->threads[t].interp.count > 0) == (pass == 0))
                order[n++] = &snap->threads[t];
    FILE *f = fopen(path, "wb");
    if (f == NULL) {
        fprintf(stderr, "record-js-memory: %s: %s\n", path, strerror(errno));
        return 1;
    }
    uint32_t head[2] = {(uint32_t)value_count, n};
    fwrite(head, 1, sizeof head, f);
    fwrite(values, sizeof *values, value_count, f);
    for (uint32_t t = 0; t < n; t++) {
        const hw_thread_snapshot *th = order[t];
        uint32_t len = th->stack_len < STACK_BYTES ? (uint32_t)th->stack_len : STACK_BYTES;
        uint64_t regs[3] = {th->regs.rip, th->regs.rbp, th->stack_start};
        fwrite(regs, 1, sizeof regs, f);
        fwrite(&len, 1, sizeof len, f);
        fwrite(th->stack, 1, len, f);
    }
    record_memory_write_segments(f);
    if (fclose(f) != 0) {
        fprintf(stderr, "record-js-memory: %s: %s\n", path, strerror(errno));
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s NODE SCRIPT OUT [ARG...]\n", argv[0]);
        return 2;
    }
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, NULL); /* capture.h's rules */
    char *args[32] = {argv[1], argv[2]};
    for (int i = 4; i < argc && i - 2 < 31; i++)
        args[i - 2] = argv[i];
    int in = -1;
    pid_t pid = record_memory_start(args, &in);
    if (pid < 0) {
        fprintf(stderr, "record-js-memory: %s %s did not print \"ready\"\n", argv[1], argv[2]);
        return 1;
    }
    usleep(300 * 1000); /* the spin begins after "ready" */
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    size_t maps_len = 0;
    char *maps = hw_proc_read_whole(path, &maps_len);
    static hw_js_reader reader;
    hw_js_find(pid, maps, maps_len, &reader.target);
    int32_t values[MAX_VALUES] = {0};
    size_t value_count = reader.target.readable ? metadata_values(pid, maps, maps_len, values) : 0;
    free(maps);
    int rc = 1;
    if (!reader.target.readable || value_count == 0) {
        fprintf(stderr, "record-js-memory: %s: %s\n", argv[1],
                reader.target.found ? reader.target.why_not : "no V8 metadata found");
    } else {
        hw_capture_options opts;
        hw_capture_options_default(&opts, pid);
        opts.interp_frames = HW_JS_MAX_FRAMES;
        opts.while_stopped = hw_js_read_stacks;
        opts.while_stopped_ctx = &reader;
        hw_process_snapshot snap;
        if (hw_capture_process(pid, &opts, &snap) == 0) {
            hw_js_namer *namer = hw_js_namer_new(&reader.target, pid);
            hw_runtime_names *names = hw_js_name_threads(namer, &snap, false);
            hw_runtime_names_free(names, snap.thread_count);
            hw_js_namer_free(namer);
            rc = write_input(argv[3], values, value_count, &snap);
        } else {
            fprintf(stderr, "record-js-memory: the capture of pid %d failed\n", (int)pid);
        }
        hw_process_snapshot_free(&snap);
    }
    close(in);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    record_memory_free();
    return rc;
}
