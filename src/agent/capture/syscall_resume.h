/*
 * syscall_resume.h - what a thread stopped by a capture does with the
 * system call the stop interrupted, once it is let go: runs it on (the
 * kernel restarts it, or the capture made it restart) or returns from it.
 *
 * The capture (snapshot.c) decides the one case the kernel leaves to it:
 * an epoll wait with no timeout, which the stop makes return EINTR, is run
 * again (decisions.md §1); a timed one keeps its EINTR.  The kernel
 * observer asks the same question of a thread it starts to watch (a wait
 * that goes on is a wait whose end it will see).
 */
#ifndef HANGWATCH_SYSCALL_RESUME_H
#define HANGWATCH_SYSCALL_RESUME_H

#include <stdbool.h>
#include <sys/user.h>

#define HW_KERNEL_ERESTARTSYS 512         /* include/linux/errno.h: the kernel's own restart codes, */
#define HW_KERNEL_ERESTARTNOHAND 514      /* not in the C library's */
#define HW_KERNEL_ERESTART_RESTARTBLOCK 516

/* An epoll wait with no timeout that the stop made return EINTR (as read
 * at the stop, before the capture changed anything): the capture makes the
 * kernel run it again. */
bool hw_syscall_is_untimed_epoll_eintr(const struct user_regs_struct *r);

/* The system call the stop interrupted (its number in orig_rax, with EINTR
 * or a restart code in rax), or -1 when it was in none. */
long hw_syscall_interrupted(const struct user_regs_struct *r);

/* At the stop the thread was in system call *nr (hw_syscall_interrupted),
 * which it goes on with when let go: true; false when it returns from it,
 * or was in none. */
bool hw_syscall_resumes(const struct user_regs_struct *r, long *nr);

#endif
