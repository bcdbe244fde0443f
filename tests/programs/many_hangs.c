/*
 * many_hangs.c - many processes whose loops hang at the same moment, for the
 * test that hangwatch captures every one of them promptly.
 *
 *   many-hangs N SECS   fork N children (1 to 1024, as many as hangwatch
 *                       watches); each runs a poll() loop until a
 *                       common moment one second from now, then a callback
 *                       blocks SECS seconds in nanosleep; the parent idles
 *                       in its own loop until all have exited
 *
 * Each child prints "hang <pid> <unix ns>" as its callback starts: its own
 * clock for when its hang began, to compare with the reports.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int64_t realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static __attribute__((noinline)) void block_all_children_at_once(double secs)
{
    char line[64];
    int n = snprintf(line, sizeof line, "hang %d %lld\n", (int)getpid(), (long long)realtime_ns());
    ssize_t w = write(STDOUT_FILENO, line, (size_t)n);
    (void)w;
    struct timespec ts = {(time_t)secs, (long)((secs - (double)(time_t)secs) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static __attribute__((noreturn)) void child_loop(int64_t moment_ns, double secs)
{
    while (realtime_ns() < moment_ns)
        poll(NULL, 0, 5);
    block_all_children_at_once(secs);
    poll(NULL, 0, 0); /* back to the loop's wait: the hang ends */
    _exit(0);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: many-hangs N SECS\n");
        return 2;
    }
    int count = atoi(argv[1]);
    double secs = atof(argv[2]);
    if (count < 1 || count > 1024 || secs <= 0) {
        fprintf(stderr, "many-hangs: bad arguments\n");
        return 2;
    }
    poll(NULL, 0, 0); /* the parent's loop starts: not a launch */
    int64_t moment = realtime_ns() + 1000000000ll;
    fflush(stdout);
    for (int i = 0; i < count; i++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            return 1;
        }
        if (pid == 0)
            child_loop(moment, secs);
    }
    int left = count, failed = 0;
    while (left > 0) {
        int status;
        pid_t p = waitpid(-1, &status, WNOHANG);
        if (p > 0) {
            left--;
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                failed++;
        } else if (p < 0 && errno != EINTR) {
            break;
        } else {
            poll(NULL, 0, 20);
        }
    }
    printf("many-hangs: %d children done, %d failed\n", count, failed);
    return failed ? 1 : 0;
}
