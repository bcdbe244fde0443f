/*
 * hang_on_command.c - an event loop that hangs when told to, for the tests
 * of hangwatch's exports (Prometheus, Sentry): they decide when each hang
 * happens and how long it lasts, and the program stays up while a real
 * server scrapes or receives.
 *
 * It waits in epoll_wait on stdin; each line is a command:
 *   hang MS   the callback sleeps MS milliseconds in hang_for_the_test()
 *             (the culprit the tests look for), then prints "hung MS"
 *   quit      exit 0 (so does the end of stdin)
 * It prints "ready" once its loop waits.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "stdin_commands.h"

__attribute__((noinline)) void hang_for_the_test(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

__attribute__((noinline)) static void on_command(const char *line)
{
    long ms = 0;
    if (sscanf(line, "hang %ld", &ms) == 1 && ms >= 0) {
        hang_for_the_test(ms);
        printf("hung %ld\n", ms);
        fflush(stdout);
    } else if (strncmp(line, "quit", 4) == 0) {
        exit(0);
    }
}

int main(void)
{
    return serve_stdin_commands(on_command, "ready\n", -1);
}
