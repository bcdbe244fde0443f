/*
 * record_python_memory.c - the seeds of fuzz/fuzz_python_memory.c: what
 * the agent's Python readers read of a real interpreter, recorded as that
 * target's input (its format is at the top of fuzz_python_memory.c).
 *
 *   record-python-memory PYTHON SCRIPT OUT [ARG...]
 *
 * Runs PYTHON SCRIPT ARG... as our child with a pipe for stdin, waits for
 * it to print "ready", then does what the agent does: finds the
 * interpreter, captures every thread with the frame reader, names the
 * frames and the threads.  Every read goes through hw_py_peek, which this
 * program defines (the agent's is python_peek.c, left out of the link) to
 * read the child and keep a copy of what it read (record_memory.h).  The
 * copies, with the interpreter's addresses and the threads, are written to
 * OUT.  Exit 0, or 1 with the reason on stderr.
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
#include "agent/symbols/python_internal.h"
#include "agent/symbols/python_layouts.h"
#include "record_memory.h"

#define MAX_THREADS 8u

bool hw_py_peek(pid_t pid, uint64_t addr, void *buf, size_t len)
{
    return record_memory_read(pid, addr, buf, len);
}

static int write_input(const char *path, const hw_python_target *py, const hw_process_snapshot *snap)
{
    unsigned char header[176];
    memset(header, 0, sizeof header);
    /* The reader: the generated table of its version, or 3.13's debug offsets. */
    unsigned reader = 0;
    for (unsigned i = 0; i < sizeof hw_python_layouts / sizeof hw_python_layouts[0]; i++)
        if (hw_python_layouts[i]->major == py->layout.major && hw_python_layouts[i]->minor == py->layout.minor)
            reader = i;
    if (py->layout.minor >= 13)
        reader = 6;
    header[0] = (unsigned char)reader;
    /* The hung thread first, as the fuzz target takes it. */
    const hw_thread_snapshot *order[MAX_THREADS];
    size_t n = 0;
    for (size_t t = 0; t < snap->thread_count && n < MAX_THREADS; t++)
        if (snap->threads[t].is_target)
            order[n++] = &snap->threads[t];
    for (size_t t = 0; t < snap->thread_count && n < MAX_THREADS; t++)
        if (!snap->threads[t].is_target)
            order[n++] = &snap->threads[t];
    header[1] = (unsigned char)n;
    const uint64_t addrs[] = {py->runtime_addr, py->code_type, py->unicode_type, py->bytes_type, py->frame_type};
    memcpy(header + 8, addrs, sizeof addrs);
    for (size_t t = 0; t < n; t++) {
        uint32_t tid = (uint32_t)order[t]->tid;
        uint64_t fs = order[t]->regs.fs_base;
        memcpy(header + 48 + 16 * t, &tid, sizeof tid);
        memcpy(header + 48 + 16 * t + 8, &fs, sizeof fs);
    }
    FILE *f = fopen(path, "wb");
    if (f == NULL) {
        fprintf(stderr, "record-python-memory: %s: %s\n", path, strerror(errno));
        return 1;
    }
    fwrite(header, 1, sizeof header, f);
    record_memory_write_segments(f);
    if (fclose(f) != 0) {
        fprintf(stderr, "record-python-memory: %s: %s\n", path, strerror(errno));
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s PYTHON SCRIPT OUT [ARG...]\n", argv[0]);
        return 2;
    }
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, NULL); /* capture.h's rules */
    int in = -1;
    char *args[32] = {argv[1], argv[2]};
    for (int i = 4; i < argc && i - 2 < 31; i++)
        args[i - 2] = argv[i];
    pid_t pid = record_memory_start(args, &in);
    if (pid < 0) {
        fprintf(stderr, "record-python-memory: %s %s did not print \"ready\"\n", argv[1], argv[2]);
        return 1;
    }
    usleep(200 * 1000); /* let the threads reach their sleeps */
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    size_t maps_len = 0;
    char *maps = hw_proc_read_whole(path, &maps_len);
    hw_python_target py;
    hw_python_find(pid, maps, maps_len, &py);
    free(maps);
    int rc = 1;
    if (!py.readable) {
        fprintf(stderr, "record-python-memory: %s: %s\n", argv[1], py.found ? py.why_not : "no Python found");
    } else {
        hw_capture_options opts;
        hw_capture_options_default(&opts, pid);
        opts.interp_frames = HW_PY_MAX_FRAMES;
        opts.while_stopped = hw_python_read_stacks;
        opts.while_stopped_ctx = &py;
        hw_process_snapshot snap;
        if (hw_capture_process(pid, &opts, &snap) == 0) {
            hw_python_namer *namer = hw_python_namer_new(&py, pid);
            hw_runtime_names *names = hw_python_name_threads(namer, &snap, false);
            hw_runtime_names_free(names, snap.thread_count);
            hw_python_namer_free(namer);
            rc = write_input(argv[3], &py, &snap);
        } else {
            fprintf(stderr, "record-python-memory: the capture of pid %d failed\n", (int)pid);
        }
        hw_process_snapshot_free(&snap);
    }
    close(in);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    record_memory_free();
    return rc;
}
