/*
 * perf_map_flood.c - a hostile neighbour for the agent: a loop whose short
 * busy stretches run in an anonymous executable page (as JIT code does),
 * next to a 64 MiB /tmp/perf-PID.map of tiny lines naming that page.  Any
 * process may write such a file; the agent must not let it cost the other
 * processes' hangs their timing, or the agent its memory.
 *
 *   perf-map-flood SECS PROG [ARG...]
 *
 * Starts PROG ARG... as its child (the honest process, watched alongside),
 * writes the map, prints "ready", then for SECS seconds turns its loop:
 * poll() 60 ms, then about 30 ms in the anonymous page (a third of a CPU:
 * what is measured is the agent's work, not two saturated CPUs).  Removes the map,
 * waits for PROG and exits with its status.
 */
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAP_BYTES (64u << 20)

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: perf-map-flood SECS PROG [ARG...]\n");
        return 2;
    }
    double seconds = atof(argv[1]);
    pid_t child = fork();
    if (child == 0) {
        execvp(argv[2], argv + 2);
        _exit(127);
    }
    /* sub rdi, 1; jnz -6; ret: a countdown loop in its own page */
    static const unsigned char code[] = {0x48, 0x83, 0xef, 0x01, 0x75, 0xfa, 0xc3};
    unsigned char *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED)
        return 1;
    memcpy(page, code, sizeof code);
    void (*count_down)(uint64_t) = (void (*)(uint64_t))(uintptr_t)page;

    char path[64];
    snprintf(path, sizeof path, "/tmp/perf-%d.map", (int)getpid());
    FILE *map = fopen(path, "w");
    if (map == NULL)
        return 1;
    for (size_t written = 0, i = 0; written < MAP_BYTES; i++) {
        int n = fprintf(map, "%lx 1 f%zu\n", (unsigned long)((uintptr_t)page + i % 4096), i);
        if (n <= 0)
            break;
        written += (size_t)n;
    }
    fclose(map);

    /* About 30 ms of counting down, measured once. */
    double t0 = now_seconds();
    count_down(10000000);
    double per = (now_seconds() - t0) / 10000000;
    uint64_t turn = per > 0 ? (uint64_t)(0.030 / per) : 10000000;

    printf("ready\n");
    fflush(stdout);
    double end = now_seconds() + seconds;
    while (now_seconds() < end) {
        poll(NULL, 0, 60);
        count_down(turn);
    }
    unlink(path);
    int status = 0;
    waitpid(child, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
