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
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

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
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = 0};
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, 0, &ev) != 0) {
        perror("epoll");
        return 1;
    }
    char buf[256];
    size_t used = 0;
    printf("ready\n");
    fflush(stdout);
    for (;;) {
        struct epoll_event got;
        int n = epoll_wait(ep, &got, 1, -1);
        if (n <= 0)
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
