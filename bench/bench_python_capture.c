/*
 * bench_python_capture.c - what reading Python's frame chains adds to a
 * capture's stop (python_frames.h): the same all-thread capture of a
 * sleeping Python process, alternately with and without the reader, as the
 * agent does it.
 *
 *   bench-python-capture PYTHON THREADS DEPTH COUNT
 *
 * The target is PYTHON running a small script: THREADS threads (the main
 * one included), each DEPTH Python calls deep, sleeping in time.sleep.  It
 * is our child, as under `hangwatch run`.  One line per capture on stdout:
 *
 *   capture MODE STOP_WALL_NS MAX_THREAD_STOPPED_NS PY_FRAMES THREADS
 *
 * MODE is "python" (frames read while stopped) or "plain"; PY_FRAMES is how
 * many Python frames were read in all.  Captures are 2 ms apart.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/capture/capture.h"
#include "agent/symbols/symbols.h"

static const char SCRIPT[] = "import sys, threading, time\n"
                             "threads, depth = int(sys.argv[1]), int(sys.argv[2])\n"
                             "def down(n, last):\n"
                             "    if n == 0:\n"
                             "        if last:\n"
                             "            print('ready', flush=True)\n"
                             "        time.sleep(1000)\n"
                             "    else:\n"
                             "        down(n - 1, last)\n"
                             "for i in range(threads - 1):\n"
                             "    threading.Thread(target=down, args=(depth, False), daemon=True).start()\n"
                             "time.sleep(0.2)\n"
                             "down(depth, True)\n";

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: %s PYTHON THREADS DEPTH COUNT\n", argv[0]);
        return 2;
    }
    int count = atoi(argv[4]);
    int out[2];
    if (pipe(out) != 0)
        return 1;
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, NULL); /* capture.h's rules */
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(out[1], 1);
        close(out[0]);
        close(out[1]);
        execl(argv[1], argv[1], "-c", SCRIPT, argv[2], argv[3], (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    char buf[16] = "";
    ssize_t n = read(out[0], buf, sizeof buf - 1);
    if (n <= 0 || strncmp(buf, "ready", 5) != 0) {
        fprintf(stderr, "bench-python-capture: the target did not start\n");
        kill(pid, SIGKILL);
        return 1;
    }
    sleep_ms(50);
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    size_t maps_len = 0;
    char *maps = hw_proc_read_whole(path, &maps_len);
    hw_python_target py;
    hw_python_find(pid, maps, maps_len, &py);
    free(maps);
    if (!py.readable) {
        fprintf(stderr, "bench-python-capture: %s: %s\n", argv[1], py.found ? py.why_not : "no Python found");
        kill(pid, SIGKILL);
        return 1;
    }
    int rc = 0;
    for (int i = 0; i < 2 * count && rc == 0; i++) {
        bool python = i % 2 == 0;
        hw_capture_options opts;
        hw_capture_options_default(&opts, pid);
        if (python) {
            opts.interp_frames = HW_PY_MAX_FRAMES;
            opts.while_stopped = hw_python_read_stacks;
            opts.while_stopped_ctx = &py;
        }
        hw_process_snapshot snap;
        if (hw_capture_process(pid, &opts, &snap) != 0) {
            rc = 1;
        } else {
            uint64_t max_stopped = 0;
            unsigned frames = 0;
            for (size_t t = 0; t < snap.thread_count; t++) {
                if (snap.threads[t].stopped_ns > max_stopped)
                    max_stopped = snap.threads[t].stopped_ns;
                frames += snap.threads[t].interp.count;
            }
            printf("capture %s %llu %llu %u %zu\n", python ? "python" : "plain", (unsigned long long)snap.stop_wall_ns,
                   (unsigned long long)max_stopped, frames, snap.thread_count);
        }
        hw_process_snapshot_free(&snap);
        sleep_ms(2);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return rc;
}
