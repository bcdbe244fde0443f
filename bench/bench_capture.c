/*
 * bench_capture.c - how long hw_capture_process (src/agent/capture/snapshot.h) holds
 * a target stopped: the number that says whether hangwatch changes the
 * program it watches.  It forks a sleeping target (ptrace needs it to be our
 * child under Yama scope 1, just as `hangwatch run` is the program's parent)
 * and captures it COUNT times with the options the agent uses, the stack
 * copy sizes included.
 *
 *   bench-capture THREADS COUNT all|target|floor|look
 *
 * THREADS is the target's thread count (1 = only the main thread); the
 * others block in pause() like the main thread.  "target" captures only the
 * main thread (all_threads = false), "all" every thread.  "floor" is the
 * yardstick: the same system calls by hand, in the same order and also from
 * a short-lived helper thread, on the main thread only (PTRACE_SEIZE,
 * PTRACE_INTERRUPT, waitpid + sigtimedwait, PTRACE_GETREGS, process_vm_readv
 * of the stack into a buffer touched beforehand, PTRACE_DETACH) and nothing
 * else: what a stop costs on this machine whatever the code around it.
 * "look" times what the agent reads of the hung thread right before the
 * stop (hw_blocked_look_take: its stat, wait channel and system call; a
 * `time` section's blocked_in), which delays the stop's start by that
 * much; one line "look CALL_NS" each.  One line per capture on stdout:
 *
 *   capture STOP_WALL_NS MAX_THREAD_STOPPED_NS CALL_NS CAPTURED THREADS
 *
 * STOP_WALL_NS is snap.stop_wall_ns (first PTRACE_INTERRUPT to last
 * detach), MAX_THREAD_STOPPED_NS the largest thread's stopped_ns, CALL_NS
 * the whole hw_capture_process call (set-up, helper thread, /proc reads
 * included), CAPTURED how many threads came back with registers.
 *
 * Like the agent, this process keeps SIGCHLD blocked (capture.h's rules).
 * Captures are 2 ms apart so each one starts from a target that has gone
 * back to sleep, as in real use where captures are rare.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/capture/capture.h"
#include "agent/capture/thread_time.h"

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void *sleeper(void *arg)
{
    (void)arg;
    for (;;)
        pause();
    return NULL;
}

/* The target: THREADS threads in pause(); writes one byte when all exist. */
static void run_target(int threads, int ready_fd)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    for (int i = 1; i < threads; i++) {
        pthread_t t;
        if (pthread_create(&t, &attr, sleeper, NULL) != 0)
            _exit(3);
    }
    char c = 'r';
    if (write(ready_fd, &c, 1) != 1)
        _exit(3);
    close(ready_fd);
    for (;;)
        pause();
}

/* ---- floor: the bare minimum, by hand ---- */

#define FLOOR_STACK_BYTES (512u * 1024u) /* as hw_capture_options_default */

typedef struct floor_session {
    pid_t pid;
    unsigned char *stack;
    uint64_t interrupted, resumed;
    bool ok;
} floor_session;

static void *floor_main(void *arg)
{
    floor_session *f = arg;
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    if (ptrace(PTRACE_SEIZE, f->pid, NULL, NULL) != 0)
        return NULL;
    f->interrupted = now_ns();
    ptrace(PTRACE_INTERRUPT, f->pid, NULL, NULL);
    int status;
    pid_t w;
    while ((w = waitpid(f->pid, &status, __WALL | WNOHANG)) == 0) {
        struct timespec slice = {0, 5000000};
        sigtimedwait(&chld, NULL, &slice);
    }
    struct user_regs_struct regs;
    if (w == f->pid && WIFSTOPPED(status) && ptrace(PTRACE_GETREGS, f->pid, NULL, &regs) == 0) {
        struct iovec local = {f->stack, FLOOR_STACK_BYTES};
        struct iovec remote = {(void *)(uintptr_t)(regs.rsp - 128), FLOOR_STACK_BYTES};
        f->ok = process_vm_readv(f->pid, &local, 1, &remote, 1, 0) > 0;
    }
    ptrace(PTRACE_DETACH, f->pid, NULL, NULL);
    f->resumed = now_ns();
    return NULL;
}

static bool floor_capture(pid_t pid, uint64_t *stopped_ns)
{
    floor_session f = {.pid = pid, .stack = malloc(FLOOR_STACK_BYTES)};
    if (f.stack == NULL)
        return false;
    memset(f.stack, 0, FLOOR_STACK_BYTES);
    pthread_t helper;
    if (pthread_create(&helper, NULL, floor_main, &f) == 0)
        pthread_join(helper, NULL);
    free(f.stack);
    *stopped_ns = f.ok ? f.resumed - f.interrupted : 0;
    return f.ok;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

int main(int argc, char **argv)
{
    const char *mode = argc == 4 ? argv[3] : "";
    if (strcmp(mode, "all") != 0 && strcmp(mode, "target") != 0 && strcmp(mode, "floor") != 0 &&
        strcmp(mode, "look") != 0) {
        fprintf(stderr, "usage: %s THREADS COUNT all|target|floor|look\n", argv[0]);
        return 2;
    }
    int threads = atoi(argv[1]);
    int count = atoi(argv[2]);
    bool all = strcmp(mode, "all") == 0;
    bool floor_only = strcmp(mode, "floor") == 0;
    if (threads < 1 || threads > 4096 || count < 1 || (floor_only && threads != 1)) {
        fprintf(stderr, "bench-capture: bad arguments\n");
        return 2;
    }

    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, NULL);

    int pipefd[2];
    if (pipe(pipefd) != 0) {
        perror("pipe");
        return 1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 1;
    }
    if (pid == 0) {
        close(pipefd[0]);
        run_target(threads, pipefd[1]);
    }
    close(pipefd[1]);
    char c;
    if (read(pipefd[0], &c, 1) != 1) {
        fprintf(stderr, "bench-capture: the target did not start\n");
        return 1;
    }
    close(pipefd[0]);
    sleep_ms(50); /* let every thread reach pause() */

    int failures = 0;
    for (int k = 0; k < count; k++) {
        if (strcmp(mode, "look") == 0) {
            hw_blocked_look look;
            uint64_t t0 = now_ns();
            hw_blocked_look_take(pid, pid, &look);
            uint64_t t1 = now_ns();
            failures += !look.valid || !look.in_syscall;
            printf("look %llu\n", (unsigned long long)(t1 - t0));
            sleep_ms(2);
            continue;
        }
        if (floor_only) {
            uint64_t stopped = 0, t0 = now_ns();
            bool ok = floor_capture(pid, &stopped);
            uint64_t t1 = now_ns();
            failures += !ok;
            printf("capture %llu %llu %llu %d 1\n", (unsigned long long)stopped, (unsigned long long)stopped,
                   (unsigned long long)(t1 - t0), ok ? 1 : 0);
            sleep_ms(2);
            continue;
        }
        hw_capture_options opts;
        hw_capture_options_default(&opts, pid);
        opts.all_threads = all;
        hw_process_snapshot snap;
        uint64_t t0 = now_ns();
        int rc = hw_capture_process(pid, &opts, &snap);
        uint64_t t1 = now_ns();
        uint64_t max_stopped = 0;
        size_t captured = 0;
        for (size_t i = 0; i < snap.thread_count; i++) {
            if (snap.threads[i].stopped_ns > max_stopped)
                max_stopped = snap.threads[i].stopped_ns;
            captured += snap.threads[i].status == HW_THREAD_CAPTURED;
        }
        if (rc != 0 || captured != (all ? (size_t)threads : 1u) || snap.process_exited)
            failures++;
        printf("capture %llu %llu %llu %zu %zu\n", (unsigned long long)snap.stop_wall_ns,
               (unsigned long long)max_stopped, (unsigned long long)(t1 - t0), captured, snap.thread_count);
        hw_process_snapshot_free(&snap);
        sleep_ms(2);
    }

    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    if (failures) {
        fprintf(stderr, "bench-capture: %d of %d captures incomplete\n", failures, count);
        return 1;
    }
    return 0;
}
