/*
 * record_memory.c - reads of a child's memory kept as fuzz seeds, and the
 * child started (record_memory.h).
 */
#include "record_memory.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_RECORDED (64u << 20) /* bytes kept at most */

typedef struct recorded {
    uint64_t addr;
    uint32_t len;
    unsigned char *bytes;
} recorded;

static recorded *reads;
static size_t read_count, read_cap, read_bytes;

bool record_memory_read(pid_t pid, uint64_t addr, void *buf, size_t len)
{
    if (addr == 0 || addr + len < addr)
        return false;
    struct iovec local = {.iov_base = buf, .iov_len = len};
    struct iovec remote = {.iov_base = (void *)(uintptr_t)addr, .iov_len = len};
    if (process_vm_readv(pid, &local, 1, &remote, 1, 0) != (ssize_t)len)
        return false;
    for (size_t i = 0; i < read_count; i++)
        if (reads[i].addr == addr && reads[i].len == len)
            return true; /* the first copy is what the stop saw */
    if (read_bytes + len > MAX_RECORDED)
        return true;
    if (read_count == read_cap) {
        size_t cap = read_cap ? 2 * read_cap : 256;
        recorded *more = realloc(reads, cap * sizeof *more);
        if (more == NULL)
            return true;
        reads = more;
        read_cap = cap;
    }
    unsigned char *copy = malloc(len);
    if (copy == NULL)
        return true;
    memcpy(copy, buf, len);
    reads[read_count++] = (recorded){addr, (uint32_t)len, copy};
    read_bytes += len;
    return true;
}

void record_memory_write_segments(FILE *f)
{
    for (size_t i = 0; i < read_count; i++) {
        fwrite(&reads[i].addr, 1, 8, f);
        fwrite(&reads[i].len, 1, 4, f);
        fwrite(reads[i].bytes, 1, reads[i].len, f);
    }
}

void record_memory_free(void)
{
    for (size_t i = 0; i < read_count; i++)
        free(reads[i].bytes);
    free(reads);
    reads = NULL;
    read_count = read_cap = read_bytes = 0;
}

pid_t record_memory_start(char *const *argv, int *in)
{
    int out[2], to[2];
    if (pipe(out) != 0 || pipe(to) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(out[1], 1);
        dup2(to[0], 0);
        close(out[0]);
        close(out[1]);
        close(to[0]);
        close(to[1]);
        execv(argv[0], argv);
        _exit(127);
    }
    close(out[1]);
    close(to[0]);
    *in = to[1];
    FILE *f = fdopen(out[0], "r");
    char line[256];
    while (f != NULL && fgets(line, sizeof line, f) != NULL)
        if (strcmp(line, "ready\n") == 0) {
            /* stdout stays open (unread) so the child never gets SIGPIPE */
            return pid;
        }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}
