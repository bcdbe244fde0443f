/*
 * fake_wait.c - libbench-fake-wait.so, an epoll_wait that returns 0 at once
 * without entering the kernel.  Preloaded behind the observer in the
 * program alone (`hangwatch run -- env
 * LD_PRELOAD=libhangwatch-preload.so:libbench-fake-wait.so PROG`: the agent
 * waits in epoll_wait too, and must keep the real one), it becomes the "real"
 * epoll_wait the observer calls, so bench/run.py can time the observer's own
 * work per loop turn with warm caches and TLB: the part of its cost that is
 * the code itself, as opposed to what every system call does to the code
 * around it.  Never used outside the benchmarks.
 */
#include <sys/epoll.h>

__attribute__((visibility("default"))) int epoll_wait(int epfd, struct epoll_event *events, int maxevents,
                                                      int timeout)
{
    (void)epfd;
    (void)events;
    (void)maxevents;
    (void)timeout;
    __asm__ volatile("" ::: "memory"); /* a call that is really made */
    return 0;
}
