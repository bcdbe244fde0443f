/*
 * raw_syscall_loop.c - a loop that waits through syscall(SYS_epoll_wait, ...)
 * instead of glibc's wrapper, so the observer cannot see it: hangwatch must
 * say so rather than report nothing (or report a false launch hang).
 * Usage: raw-syscall-loop SECONDS
 */
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int seconds = argc > 1 ? atoi(argv[1]) : 3;
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev;
    syscall(SYS_epoll_wait, ep, &ev, 1, seconds * 1000);
    close(ep);
    return 0;
}
