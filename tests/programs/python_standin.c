/*
 * python_standin.c - a program that looks like a CPython interpreter of
 * another version to hangwatch (built as python3.14-standin: a file name
 * with "python", exporting _PyRuntime and Py_Version = 3.14.0), whose event
 * loop blocks 3 s.  Its report must say that this Python version's frames
 * are not read, and otherwise be the ordinary native report.
 */
#include <stdio.h>
#include <sys/epoll.h>
#include <unistd.h>

/* What hangwatch looks for in a Python interpreter (docs/runtime-frames.md). */
__attribute__((used, visibility("default"))) const unsigned long Py_Version = 0x030E00F0ul;
__attribute__((used, visibility("default"))) char _PyRuntime[4096];
__attribute__((used, visibility("default"))) char PyCode_Type[512];
__attribute__((used, visibility("default"))) char PyUnicode_Type[512];
__attribute__((used, visibility("default"))) char PyBytes_Type[512];

__attribute__((noinline)) static void standin_blocking_callback(void)
{
    sleep(3);
    __asm__ volatile("" ::: "memory");
}

int main(void)
{
    int ep = epoll_create1(0);
    struct epoll_event ev;
    for (int turn = 0; turn < 10; turn++) {
        epoll_wait(ep, &ev, 1, 30);
        if (turn == 5)
            standin_blocking_callback();
    }
    puts("python_standin: done");
    return 0;
}
