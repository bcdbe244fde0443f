/*
 * stdin_commands.h - the event loop of the test programs that are driven
 * through their standard input (hang_on_command.c, time_scenarios.c): an
 * epoll_wait on stdin, each whole line handed to the program's command
 * function, a line too long for the buffer dropped.  The test decides what
 * runs and when; the loop's wait is a real epoll_wait, as hangwatch
 * watches it.
 */
#ifndef HW_TEST_STDIN_COMMANDS_H
#define HW_TEST_STDIN_COMMANDS_H

#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

/* Print `ready` (a whole line) once the loop is about to wait, then run
 * each line of stdin through on_command; the loop turns at least every
 * `turn_ms` (-1: only for a line).  Returns 0 at the end of stdin, 1 when
 * epoll cannot be had. */
static int serve_stdin_commands(void (*on_command)(const char *line), const char *ready, int turn_ms)
{
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = 0};
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, 0, &ev) != 0) {
        perror("epoll");
        return 1;
    }
    fputs(ready, stdout);
    fflush(stdout);
    char buf[256];
    size_t used = 0;
    for (;;) {
        struct epoll_event got;
        if (epoll_wait(ep, &got, 1, turn_ms) <= 0)
            continue;
        ssize_t r = read(0, buf + used, sizeof buf - 1 - used);
        if (r <= 0)
            return 0;
        used += (size_t)r;
        buf[used] = '\0';
        char *nl;
        while ((nl = strchr(buf, '\n')) != NULL) {
            *nl = '\0';
            on_command(buf);
            used -= (size_t)(nl + 1 - buf);
            memmove(buf, nl + 1, used + 1);
        }
        if (used == sizeof buf - 1)
            used = 0; /* a line too long: dropped */
    }
}

#endif
