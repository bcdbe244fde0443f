/*
 * capture.h - the capture stage's interface: what the agent takes from a
 * watched process, from the outside, without changing what it does.
 *
 *   snapshot.h      every thread (or one) stopped together with ptrace for
 *                   well under a millisecond: registers, a copy of the top
 *                   of each stack, and a runtime's frames read in the stop;
 *   syscall_resume.h what a stopped thread's system call does when it is
 *                   let go (goes on, or returns);
 *   helper_thread.h the thread a ptrace session runs on, made ahead of
 *                   time so that a capture never waits to create it;
 *   perf_sampler.h  a running thread's samples taken by the kernel (a perf
 *                   event: no stop at all);
 *   proc_task.h     what /proc and the kernel count for a process and its
 *                   threads (state, system call, CPU time, tracer);
 *   thread_time.h   a hung thread's time over a window (schedstat, its CPU
 *                   cgroup's throttling: cgroup_cpu.h) and what it is
 *                   blocked in (a descriptor in words: fd_describe.h);
 *   wait_peer.h     who is at the other end of that wait on this machine
 *                   (a socket's or pipe's other process, the child);
 *   container_of.h  its container, Kubernetes pod or systemd unit.
 *
 * Everything captured is the watched program's memory or its word and is
 * handled as untrusted by whoever reads it next (the symbols stage).  The
 * other stages include this header, never the parts.
 */
#ifndef HANGWATCH_CAPTURE_H
#define HANGWATCH_CAPTURE_H

#include "container_of.h"
#include "helper_thread.h"
#include "perf_sampler.h"
#include "proc_task.h"
#include "snapshot.h"
#include "syscall_resume.h"
#include "thread_time.h"
#include "wait_peer.h"

#endif
