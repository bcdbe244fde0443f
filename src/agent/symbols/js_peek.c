/*
 * js_peek.c - every read of a node process's memory (js_internal.h:
 * hw_js_peek), one process_vm_readv each: an address that is not mapped
 * costs one failed system call, never a fault.  A file of its own so that
 * the fuzz target (fuzz/fuzz_js_memory.c) can put a forged memory behind
 * the readers instead.
 */
#include <sys/uio.h>

#include "js_internal.h"

bool hw_js_peek(pid_t pid, uint64_t addr, void *buf, size_t len)
{
    if (addr == 0 || addr + len < addr)
        return false;
    struct iovec local = {.iov_base = buf, .iov_len = len};
    struct iovec remote = {.iov_base = (void *)(uintptr_t)addr, .iov_len = len};
    return process_vm_readv(pid, &local, 1, &remote, 1, 0) == (ssize_t)len;
}
