/*
 * syscall_resume.c - whether a stopped thread goes on with its system call
 * when let go (syscall_resume.h).
 */
#include "syscall_resume.h"

#include <errno.h>
#include <sys/syscall.h>

#define USER_CS_64 0x33 /* a 64-bit task's code segment (a 32-bit one's system calls differ) */

bool hw_syscall_is_untimed_epoll_eintr(const struct user_regs_struct *r)
{
    if (r->cs != USER_CS_64 || (long long)r->rax != -EINTR)
        return false;
    return ((r->orig_rax == SYS_epoll_wait || r->orig_rax == SYS_epoll_pwait) && (int)r->r10 == -1) ||
           (r->orig_rax == SYS_epoll_pwait2 && r->r10 == 0); /* a NULL timespec: no timeout */
}

static bool restarts(const struct user_regs_struct *r)
{
    long ret = (long)r->rax;
    return ret <= -HW_KERNEL_ERESTARTSYS && ret >= -HW_KERNEL_ERESTART_RESTARTBLOCK;
}

long hw_syscall_interrupted(const struct user_regs_struct *r)
{
    bool interrupted = restarts(r) || (long)r->rax == -EINTR;
    return (long)r->orig_rax >= 0 && interrupted ? (long)r->orig_rax : -1;
}

bool hw_syscall_resumes(const struct user_regs_struct *r, long *nr)
{
    *nr = hw_syscall_interrupted(r);
    return *nr >= 0 && (restarts(r) || hw_syscall_is_untimed_epoll_eintr(r));
}
