/*
 * test_capture_unwind.c - snapshot.c, symbolizer.c and unwind.c against a
 * real process.
 *
 * Runs capture_target (path in argv[1] or $HW_CAPTURE_TARGET), waits until
 * its threads sit in known system calls (/proc/PID/task/TID/syscall, polled
 * with a deadline), stops and copies them with hw_capture_process and unwinds
 * the copies with libdwfl.  Checks: the frames and their source lines, the
 * images and build-ids, that sleep(2) still lasts two seconds across ten
 * captures, that queued signals are neither lost nor duplicated, that a
 * stopped (SIGSTOP) process stays stopped, that a thread that cannot stop
 * times out and is released, zombies, an exited main thread, the vDSO, the
 * time a thread is held stopped, a process that is gone (process_exited),
 * a process held by another tracer (who it is), captures on helper
 * threads made ahead of time, and the bound on the threads one capture
 * takes (which come first).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/capture/capture.h"
#include "agent/symbols/symbols.h"

#define DEADLINE_MS 10000 /* generous: conditions are polled, not slept for */

static const char *target_path;
static char target_real[PATH_MAX]; /* as the kernel names it in maps */

typedef struct target {
    pid_t pid;
    pid_t tids[3]; /* main, cond_waiter_function, pipe_reader_function */
    int out_fd;    /* its stdout */
    int in_fd;     /* its stdin */
    char buf[512];
    size_t buf_len;
} target;

static target current; /* the running target; the teardown kills it if a test failed half-way */

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* One line of the target's stdout, waiting at most until the deadline. */
static bool read_line(target *t, char *line, size_t size, uint64_t deadline)
{
    for (;;) {
        char *nl = memchr(t->buf, '\n', t->buf_len);
        if (nl != NULL) {
            size_t n = (size_t)(nl - t->buf);
            if (n >= size)
                n = size - 1;
            memcpy(line, t->buf, n);
            line[n] = '\0';
            size_t used = (size_t)(nl - t->buf) + 1;
            memmove(t->buf, t->buf + used, t->buf_len - used);
            t->buf_len -= used;
            return true;
        }
        uint64_t now = now_ms();
        if (now >= deadline || t->buf_len == sizeof t->buf)
            return false;
        struct pollfd p = {.fd = t->out_fd, .events = POLLIN};
        int r = poll(&p, 1, (int)(deadline - now));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return false;
        ssize_t n = read(t->out_fd, t->buf + t->buf_len, sizeof t->buf - t->buf_len);
        if (n <= 0)
            return false;
        t->buf_len += (size_t)n;
    }
}

static void spawn(target *t, const char *mode)
{
    memset(t, 0, sizeof *t);
    int out[2], in[2];
    assert_int_equal(pipe2(out, O_CLOEXEC), 0);
    assert_int_equal(pipe2(in, O_CLOEXEC), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(in[0], 0);
        dup2(out[1], 1);
        execl(target_path, target_path, mode, (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    close(in[0]);
    t->pid = pid;
    t->out_fd = out[0];
    t->in_fd = in[1];
    char line[128];
    assert_true(read_line(t, line, sizeof line, now_ms() + DEADLINE_MS));
    int main_tid, a, b;
    assert_int_equal(sscanf(line, "ready %d %d %d", &main_tid, &a, &b), 3);
    assert_int_equal(main_tid, pid);
    t->tids[0] = main_tid;
    t->tids[1] = a;
    t->tids[2] = b;
}

static void reap(target *t)
{
    if (t->pid > 0) {
        kill(t->pid, SIGKILL);
        while (waitpid(t->pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    if (t->out_fd > 0)
        close(t->out_fd);
    if (t->in_fd > 0)
        close(t->in_fd);
    memset(t, 0, sizeof *t);
}

static int teardown(void **state)
{
    (void)state;
    hw_capture_helpers_stop(); /* if a test of them failed half-way */
    if (current.pid > 0 || current.out_fd > 0 || current.in_fd > 0)
        reap(&current);
    return 0;
}

/* The system call tid is blocked in, -1 if running or unknown. */
static long syscall_of(pid_t pid, pid_t tid)
{
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/task/%d/syscall", (int)pid, (int)tid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    long nr = -1;
    if (fgets(buf, sizeof buf, f) != NULL) {
        char *end;
        long v = strtol(buf, &end, 10);
        if (end != buf)
            nr = v;
    }
    fclose(f);
    return nr;
}

static void wait_in_syscall(pid_t pid, pid_t tid, long nr)
{
    uint64_t deadline = now_ms() + DEADLINE_MS;
    while (syscall_of(pid, tid) != nr) {
        if (now_ms() > deadline)
            fail_msg("thread %d never blocked in system call %ld", (int)tid, nr);
        pause_ms(1);
    }
}

static void wait_target_blocked(const target *t)
{
    wait_in_syscall(t->pid, t->tids[0], SYS_clock_nanosleep);
    wait_in_syscall(t->pid, t->tids[1], SYS_futex);
    wait_in_syscall(t->pid, t->tids[2], SYS_read);
}

static char thread_state(pid_t pid, pid_t tid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)pid, (int)tid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    return p != NULL && p[1] == ' ' ? p[2] : 0;
}

static void wait_state(pid_t pid, pid_t tid, char state)
{
    uint64_t deadline = now_ms() + DEADLINE_MS;
    while (thread_state(pid, tid) != state) {
        if (now_ms() > deadline)
            fail_msg("thread %d never reached state %c (is %c)", (int)tid, state, thread_state(pid, tid));
        pause_ms(1);
    }
}

/* "__GI___clock_nanosleep" -> "clock_nanosleep", "__sleep" -> "sleep". */
static const char *plain_name(const char *name)
{
    if (name == NULL)
        return "";
    if (strncmp(name, "__GI_", 5) == 0)
        name += 5;
    while (*name == '_')
        name++;
    return name;
}

static const hw_thread_snapshot *find_thread(const hw_process_snapshot *snap, pid_t tid)
{
    for (size_t i = 0; i < snap->thread_count; i++)
        if (snap->threads[i].tid == tid)
            return &snap->threads[i];
    return NULL;
}

/* Index of the first frame at or after `from` named `name`, or -1. */
static long find_frame(const hw_backtrace *bt, size_t from, const char *name)
{
    for (size_t i = from; i < bt->count; i++)
        if (strcmp(plain_name(bt->frames[i].symbol_name), name) == 0)
            return (long)i;
    return -1;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = s != NULL ? strlen(s) : 0, b = strlen(suffix);
    return s != NULL && a >= b && strcmp(s + a - b, suffix) == 0;
}

static void print_backtrace(const char *title, const hw_backtrace *bt)
{
    printf("%s: %zu frames%s%s\n", title, bt->count, bt->error ? ", stopped: " : "", bt->error ? bt->error : "");
    for (size_t i = 0; i < bt->count; i++) {
        const hw_frame *f = &bt->frames[i];
        const char *obj = f->object_path ? strrchr(f->object_path, '/') : NULL;
        printf("  #%-2zu 0x%016llx %-28s %-18s +0x%-6llx %s:%d\n", i, (unsigned long long)f->instruction_addr,
               f->symbol_name ? f->symbol_name : "??", obj ? obj + 1 : (f->object_path ? f->object_path : "??"),
               (unsigned long long)f->object_offset, f->source_file ? f->source_file : "-", f->source_line);
    }
}

/* The main thread's chain: libc nanosleep, sleep, middle_function,
 * outer_function, main, in that order, ending normally. */
static void check_main_chain(const hw_backtrace *bt)
{
    assert_null(bt->error);
    assert_true(bt->count >= 5);
    const char *top = plain_name(bt->frames[0].symbol_name);
    assert_true(strcmp(top, "clock_nanosleep") == 0 || strcmp(top, "nanosleep") == 0);
    assert_true(ends_with(bt->frames[0].object_path, "/libc.so.6"));
    assert_true(bt->frames[0].is_activation);
    long i = find_frame(bt, 1, "sleep");
    assert_true(i > 0);
    const char *demo[] = {"middle_function", "outer_function", "main"};
    for (size_t k = 0; k < 3; k++) {
        long j = find_frame(bt, (size_t)i + 1, demo[k]);
        if (j < 0)
            fail_msg("no %s after frame %ld", demo[k], i);
        const hw_frame *f = &bt->frames[j];
        assert_false(f->is_activation);
        assert_true(ends_with(f->source_file, "capture_target.c"));
        assert_true(f->source_line > 0);
        assert_non_null(f->object_path);
        assert_string_equal(f->object_path, target_real);
        assert_true(f->symbol_addr != 0 && f->symbol_addr < f->instruction_addr);
        i = j;
    }
}

static void check_build_id(const char *id)
{
    assert_non_null(id);
    assert_int_equal(strlen(id), 40);
    for (const char *p = id; *p; p++)
        assert_true((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'));
}

static void test_capture_and_unwind_all_threads(void **state)
{
    (void)state;
    target *t = &current;
    spawn(t, "hang");
    wait_target_blocked(t);

    hw_capture_options opts;
    hw_capture_options_default(&opts, t->pid);
    hw_process_snapshot snap;
    assert_int_equal(hw_capture_process(t->pid, &opts, &snap), 0);
    assert_int_equal(snap.pid, t->pid);
    assert_int_equal(snap.thread_count, 3);
    assert_int_equal(snap.enumerated_thread_count, 3);
    assert_false(snap.process_exited);
    assert_non_null(snap.maps);
    assert_true(snap.maps_len > 0);
    assert_true(snap.stop_wall_ns > 0);
    const char *base = strrchr(target_path, '/');
    char comm[16];
    snprintf(comm, sizeof comm, "%.15s", base != NULL ? base + 1 : target_path);
    assert_string_equal(snap.process_name, comm);
    for (size_t k = 0; k < 3; k++) {
        const hw_thread_snapshot *th = find_thread(&snap, t->tids[k]);
        assert_non_null(th);
        assert_string_equal(hw_thread_status_name(th->status), "captured");
        assert_int_equal(th->error, 0);
        assert_int_equal(th->is_main, k == 0);
        assert_int_equal(th->is_target, k == 0);
        assert_true(th->stopped_ns > 0 && th->stopped_ns <= snap.stop_wall_ns);
        assert_non_null(th->stack);
        assert_true(th->stack_len > 128);
        assert_true(th->stack_len <= (k == 0 ? opts.target_stack_bytes : opts.other_stack_bytes));
        assert_int_equal(th->stack_start, th->regs.rsp - 128);
        assert_int_equal(th->injected_signal, 0);
        assert_false(th->group_stopped);
    }

    char *error = NULL;
    hw_symbolizer *sym = hw_symbolizer_new(t->pid, snap.maps, snap.maps_len, &error);
    if (sym == NULL)
        fail_msg("hw_symbolizer_new: %s", error ? error : "?");
    assert_null(error);

    hw_backtrace bt;
    assert_int_equal(hw_unwind_thread(sym, find_thread(&snap, t->tids[0]), 64, &bt), 0);
    print_backtrace("main thread", &bt);
    check_main_chain(&bt);

    /* Same thread again (cached lookups) gives the same frames. */
    hw_backtrace again;
    assert_int_equal(hw_unwind_thread(sym, find_thread(&snap, t->tids[0]), 64, &again), 0);
    assert_int_equal(again.count, bt.count);
    for (size_t i = 0; i < bt.count; i++) {
        assert_int_equal(again.frames[i].instruction_addr, bt.frames[i].instruction_addr);
        assert_string_equal(plain_name(again.frames[i].symbol_name), plain_name(bt.frames[i].symbol_name));
    }
    hw_backtrace_free(&again);

    /* max_frames drops the rest and counts it. */
    hw_backtrace cut;
    assert_int_equal(hw_unwind_thread(sym, find_thread(&snap, t->tids[0]), 2, &cut), 0);
    assert_int_equal(cut.count, 2);
    assert_int_equal(cut.skipped, bt.count - 2);
    assert_null(cut.error);
    hw_backtrace_free(&cut);
    hw_backtrace_free(&bt);

    /* The other threads, with the same symbolizer. */
    const char *entry[] = {NULL, "cond_waiter_function", "pipe_reader_function"};
    for (size_t k = 1; k < 3; k++) {
        assert_int_equal(hw_unwind_thread(sym, find_thread(&snap, t->tids[k]), 64, &bt), 0);
        print_backtrace(entry[k], &bt);
        assert_null(bt.error);
        long i = find_frame(&bt, 1, entry[k]);
        assert_true(i > 0);
        assert_true(ends_with(bt.frames[i].source_file, "capture_target.c"));
        assert_true(find_frame(&bt, (size_t)i + 1, "start_thread") > i);
        hw_backtrace_free(&bt);
    }

    const hw_image *images;
    size_t n = hw_symbolizer_images(sym, &images);
    assert_true(n >= 2);
    bool have_target = false, have_libc = false;
    for (size_t i = 0; i < n; i++) {
        const hw_image *img = &images[i];
        assert_non_null(img->path);
        assert_true(img->start < img->end);
        if (i > 0)
            assert_true(images[i - 1].start < img->start);
        if (img->build_id != NULL)
            assert_true(strspn(img->build_id, "0123456789abcdef") == strlen(img->build_id));
        if (strcmp(img->path, target_real) == 0) {
            have_target = true;
            check_build_id(img->build_id);
        }
        if (ends_with(img->path, "/libc.so.6")) {
            have_libc = true;
            check_build_id(img->build_id);
            assert_true(img->bias != 0);
        }
    }
    assert_true(have_target);
    assert_true(have_libc);

    hw_symbolizer_free(sym);
    hw_process_snapshot_free(&snap);
    assert_null(snap.threads);

    /* Only one thread, not the main one. */
    hw_capture_options_default(&opts, t->tids[1]);
    opts.all_threads = false;
    opts.target_stack_bytes = 4096;
    assert_int_equal(hw_capture_process(t->pid, &opts, &snap), 0);
    assert_int_equal(snap.thread_count, 1);
    assert_int_equal(snap.enumerated_thread_count, 3);
    assert_int_equal(snap.threads[0].tid, t->tids[1]);
    assert_true(snap.threads[0].is_target);
    assert_false(snap.threads[0].is_main);
    assert_int_equal(snap.threads[0].status, HW_THREAD_CAPTURED);
    assert_int_equal(snap.threads[0].stack_len, 4096);
    hw_process_snapshot_free(&snap);

    /* A target that is not one of its threads is reported, not touched. */
    hw_capture_options_default(&opts, getpid());
    opts.all_threads = false;
    assert_int_equal(hw_capture_process(t->pid, &opts, &snap), 0);
    assert_int_equal(snap.thread_count, 1);
    assert_int_equal(snap.threads[0].status, HW_THREAD_EXITED);
    assert_int_equal(snap.stop_wall_ns, 0);
    assert_false(snap.process_exited);
    hw_process_snapshot_free(&snap);
    reap(t);
}

/* sleep(2) lasts two seconds although the thread is stopped ten times. */
static void test_capture_is_transparent(void **state)
{
    (void)state;
    target *t = &current;
    spawn(t, "timed");
    wait_target_blocked(t);
    hw_capture_options opts;
    hw_capture_options_default(&opts, t->pid);
    for (int k = 0; k < 10; k++) {
        hw_process_snapshot snap;
        assert_int_equal(hw_capture_process(t->pid, &opts, &snap), 0);
        assert_int_equal(snap.thread_count, 3);
        for (size_t i = 0; i < snap.thread_count; i++)
            assert_int_equal(snap.threads[i].status, HW_THREAD_CAPTURED);
        assert_false(snap.process_exited);
        hw_process_snapshot_free(&snap);
        pause_ms(100); /* the workload's spacing, not a wait for a condition */
    }
    char line[128];
    assert_true(read_line(t, line, sizeof line, now_ms() + DEADLINE_MS));
    printf("target: %s (stopped 10 times)\n", line);
    int status;
    assert_int_equal(waitpid(t->pid, &status, 0), t->pid);
    t->pid = 0;
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    reap(t);
}

/* A thread in epoll_wait with no timeout, stopped by ten captures: the
 * kernel returns EINTR from the epoll waits after any stop, and the capture
 * turns that into a restart, so the wait ends only with the byte the test
 * writes (the target says whether it was interrupted). */
static void test_epoll_wait_is_restarted(void **state)
{
    (void)state;
    target *t = &current;
    spawn(t, "epoll");
    wait_in_syscall(t->pid, t->tids[0], SYS_epoll_wait);
    hw_capture_options opts;
    hw_capture_options_default(&opts, t->pid);
    for (int k = 0; k < 10; k++) {
        hw_process_snapshot snap;
        assert_int_equal(hw_capture_process(t->pid, &opts, &snap), 0);
        assert_int_equal(snap.threads[0].status, HW_THREAD_CAPTURED);
        assert_false(snap.process_exited);
        hw_process_snapshot_free(&snap);
        /* back in its wait before the next stop */
        wait_in_syscall(t->pid, t->tids[0], SYS_epoll_wait);
    }
    assert_int_equal(write(t->in_fd, "x", 1), 1);
    char line[128];
    assert_true(read_line(t, line, sizeof line, now_ms() + DEADLINE_MS));
    printf("target: %s (stopped 10 times)\n", line);
    assert_string_equal(line, "epoll woke");
    int status;
    assert_int_equal(waitpid(t->pid, &status, 0), t->pid);
    t->pid = 0;
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    reap(t);
}

/* A zombie child: nothing to stop; its status is consumed and returned. */
static void test_zombie_child(void **state)
{
    (void)state;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(7);
    siginfo_t si;
    assert_int_equal(waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT), 0); /* a zombie now */

    hw_process_snapshot snap;
    assert_int_equal(hw_capture_process(pid, NULL, &snap), 0);
    assert_int_equal(snap.thread_count, 1);
    assert_int_equal(snap.threads[0].status, HW_THREAD_EXITED);
    assert_true(snap.threads[0].is_main);
    assert_null(snap.threads[0].stack);
    assert_true(snap.process_exited);
    assert_true(snap.reaped);
    assert_true(WIFEXITED(snap.exit_status));
    assert_int_equal(WEXITSTATUS(snap.exit_status), 7);
    hw_process_snapshot_free(&snap);
    errno = 0;
    assert_int_equal(waitpid(pid, NULL, WNOHANG), -1);
    assert_int_equal(errno, ECHILD);

    /* Gone entirely: no threads, and the snapshot says the process ended. */
    assert_int_equal(hw_capture_process(pid, NULL, &snap), -ESRCH);
    assert_int_equal(snap.thread_count, 0);
    assert_true(snap.process_exited);
    assert_false(snap.reaped);
    hw_process_snapshot_free(&snap);
}

/* A zombie we are not the parent of: its status comes from /proc. */
static void test_zombie_grandchild(void **state)
{
    (void)state;
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        pid_t gc = fork();
        if (gc == 0)
            _exit(9);
        siginfo_t si;
        if (waitid(P_PID, (id_t)gc, &si, WEXITED | WNOWAIT) != 0)
            _exit(1);
        if (write(p[1], &gc, sizeof gc) != (ssize_t)sizeof gc)
            _exit(1);
        pause();
        _exit(0);
    }
    close(p[1]);
    pid_t gc = 0;
    assert_int_equal(read(p[0], &gc, sizeof gc), (ssize_t)sizeof gc);
    close(p[0]);

    hw_process_snapshot snap;
    assert_int_equal(hw_capture_process(gc, NULL, &snap), 0);
    assert_int_equal(snap.thread_count, 1);
    assert_int_equal(snap.threads[0].status, HW_THREAD_EXITED);
    assert_true(snap.process_exited);
    assert_false(snap.reaped);
    assert_true(WIFEXITED(snap.exit_status));
    assert_int_equal(WEXITSTATUS(snap.exit_status), 9);
    hw_process_snapshot_free(&snap);

    kill(child, SIGKILL);
    assert_int_equal(waitpid(child, NULL, 0), child);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* How long the target thread alone is held stopped. */
static void test_stop_time(void **state)
{
    (void)state;
    target *t = &current;
    spawn(t, "hang");
    wait_target_blocked(t);
    hw_capture_options opts;
    hw_capture_options_default(&opts, t->pid);
    opts.all_threads = false;
    enum { N = 21 };
    uint64_t stopped[N], wall[N];
    for (int k = 0; k < N; k++) {
        hw_process_snapshot snap;
        assert_int_equal(hw_capture_process(t->pid, &opts, &snap), 0);
        assert_int_equal(snap.thread_count, 1);
        assert_int_equal(snap.enumerated_thread_count, 3);
        assert_int_equal(snap.threads[0].tid, t->pid);
        assert_int_equal(snap.threads[0].status, HW_THREAD_CAPTURED);
        stopped[k] = snap.threads[0].stopped_ns;
        wall[k] = snap.stop_wall_ns;
        hw_process_snapshot_free(&snap);
    }
    qsort(stopped, N, sizeof *stopped, cmp_u64);
    qsort(wall, N, sizeof *wall, cmp_u64);
    printf("target thread stopped: median %.1f us (min %.1f, max %.1f), stop wall median %.1f us\n",
           (double)stopped[N / 2] / 1e3, (double)stopped[0] / 1e3, (double)stopped[N - 1] / 1e3,
           (double)wall[N / 2] / 1e3);
    assert_true(stopped[N / 2] < 50ull * 1000 * 1000);

    /* All threads, for comparison. */
    opts.all_threads = true;
    for (int k = 0; k < N; k++) {
        hw_process_snapshot snap;
        assert_int_equal(hw_capture_process(t->pid, &opts, &snap), 0);
        assert_int_equal(snap.thread_count, 3);
        wall[k] = snap.stop_wall_ns;
        hw_process_snapshot_free(&snap);
    }
    qsort(wall, N, sizeof *wall, cmp_u64);
    printf("all 3 threads: stop wall median %.1f us\n", (double)wall[N / 2] / 1e3);
    reap(t);
}

/* A process stopped by SIGSTOP is captured and stays stopped. */
static void test_group_stop_is_kept(void **state)
{
    (void)state;
    target *t = &current;
    spawn(t, "hang");
    wait_target_blocked(t);
    int status;
    assert_int_equal(kill(t->pid, SIGSTOP), 0);
    assert_int_equal(waitpid(t->pid, &status, WUNTRACED), t->pid);
    assert_true(WIFSTOPPED(status) && WSTOPSIG(status) == SIGSTOP);
    for (size_t k = 0; k < 3; k++)
        wait_state(t->pid, t->tids[k], 'T');

    hw_process_snapshot snap;
    assert_int_equal(hw_capture_process(t->pid, NULL, &snap), 0);
    assert_int_equal(snap.thread_count, 3);
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(snap.threads[i].status, HW_THREAD_CAPTURED);
        assert_true(snap.threads[i].group_stopped);
        assert_int_equal(snap.threads[i].injected_signal, 0);
    }
    hw_symbolizer *sym = hw_symbolizer_new(t->pid, snap.maps, snap.maps_len, NULL);
    assert_non_null(sym);
    hw_backtrace bt;
    assert_int_equal(hw_unwind_thread(sym, find_thread(&snap, t->pid), 0, &bt), 0);
    assert_true(find_frame(&bt, 0, "middle_function") > 0);
    hw_backtrace_free(&bt);
    hw_symbolizer_free(sym);
    hw_process_snapshot_free(&snap);

    /* Back in the group-stop, with no new report to the parent. */
    for (size_t k = 0; k < 3; k++)
        wait_state(t->pid, t->tids[k], 'T');
    assert_int_equal(waitpid(t->pid, &status, WNOHANG | WUNTRACED), 0);

    assert_int_equal(kill(t->pid, SIGCONT), 0);
    assert_int_equal(waitpid(t->pid, &status, WCONTINUED), t->pid);
    assert_true(WIFCONTINUED(status));
    wait_target_blocked(t);
    reap(t);
}

typedef struct sender {
    pid_t pid;
    atomic_bool stop;
    unsigned long sent;
} sender;

static void *send_signals(void *arg)
{
    sender *s = arg;
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD); /* as capture.h asks of the agent's other threads */
    pthread_sigmask(SIG_BLOCK, &chld, NULL);
    while (!atomic_load(&s->stop)) {
        union sigval v = {.sival_int = 0};
        if (sigqueue(s->pid, SIGRTMIN, v) == 0)
            s->sent++;
        else if (errno == EAGAIN)
            sched_yield(); /* queue full: let the target catch up */
        else
            break;
    }
    return NULL;
}

/* Queued signals arriving while we stop the process are all delivered once:
 * one caught in a signal-delivery-stop is handed back at the detach, and a
 * thread that did not stop in time (the machine gave it no CPU for the
 * whole stop timeout: seen once in a parallel sanitizer run) gets its signal
 * when it is released.  Such timeouts are allowed, named, and bounded. */
static void test_signals_are_not_lost(void **state)
{
    (void)state;
    target *t = &current;
    spawn(t, "signals");
    wait_in_syscall(t->pid, t->tids[0], SYS_read);
    sender s = {.pid = t->pid};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, send_signals, &s), 0);
    unsigned captures = 0, injected = 0, timed_out = 0;
    hw_capture_options opts;
    hw_capture_options_default(&opts, t->pid);
    for (int k = 0; k < 300; k++) {
        hw_process_snapshot snap;
        assert_int_equal(hw_capture_process(t->pid, &opts, &snap), 0);
        for (size_t i = 0; i < snap.thread_count; i++) {
            if (snap.threads[i].status == HW_THREAD_TIMEOUT) {
                char why[128];
                printf("capture %d: thread %d %s\n", k, (int)snap.threads[i].tid,
                       hw_thread_timeout_reason(&snap.threads[i], why, sizeof why));
                timed_out++;
                continue;
            }
            assert_int_equal(snap.threads[i].status, HW_THREAD_CAPTURED);
            if (snap.threads[i].injected_signal != 0) {
                assert_int_equal(snap.threads[i].injected_signal, SIGRTMIN);
                injected++;
            }
        }
        captures++;
        hw_process_snapshot_free(&snap);
    }
    atomic_store(&s.stop, true);
    assert_int_equal(pthread_join(th, NULL), 0);
    close(t->in_fd); /* EOF: the target reports its count */
    t->in_fd = 0;
    char line[128];
    assert_true(read_line(t, line, sizeof line, now_ms() + DEADLINE_MS));
    unsigned long got = 0;
    assert_int_equal(sscanf(line, "signals %lu", &got), 1);
    printf("%lu signals sent, %lu handled, %u captures, %u caught in delivery and handed back, %u threads not "
           "stopped in time\n",
           s.sent, got, captures, injected, timed_out);
    assert_true(s.sent > 0);
    assert_true(timed_out <= captures / 10); /* a stall, not a capture that cannot stop a signalled thread */
    assert_int_equal(got, s.sent);
    int status;
    assert_int_equal(waitpid(t->pid, &status, 0), t->pid);
    t->pid = 0;
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    reap(t);
}

/* A thread caught anywhere in a busy loop, often inside the vDSO, unwinds
 * to main. */
static void test_spinning_thread_and_vdso(void **state)
{
    (void)state;
    target *t = &current;
    spawn(t, "spin");
    wait_in_syscall(t->pid, t->tids[1], SYS_futex);
    wait_in_syscall(t->pid, t->tids[2], SYS_read);
    hw_capture_options opts;
    hw_capture_options_default(&opts, t->pid);
    opts.all_threads = false;
    int spinning = 0, in_vdso = 0;
    bool has_vdso = false;
    /* The spinning target maps nothing new: one symbolizer, built from the
     * first snapshot, serves every sample (building one per sample loads
     * the DWARF each time, which under ASan outlasts the deadline). */
    hw_symbolizer *sym = NULL;
    uint64_t deadline = now_ms() + DEADLINE_MS;
    while (spinning < 40) {
        assert_true(now_ms() < deadline);
        hw_process_snapshot snap;
        assert_int_equal(hw_capture_process(t->pid, &opts, &snap), 0);
        assert_int_equal(snap.threads[0].status, HW_THREAD_CAPTURED);
        if (sym == NULL) {
            has_vdso = strstr(snap.maps, "[vdso]") != NULL;
            char *error = NULL;
            sym = hw_symbolizer_new(t->pid, snap.maps, snap.maps_len, &error);
            assert_non_null(sym);
        }
        hw_backtrace bt;
        assert_int_equal(hw_unwind_thread(sym, &snap.threads[0], 0, &bt), 0);
        long spin = find_frame(&bt, 0, "spin_function");
        if (spin >= 0 || spinning > 0) { /* before the first, it may still be on its way */
            if (spin < 0 || bt.error != NULL)
                print_backtrace("spinning thread", &bt);
            assert_true(spin >= 0);
            assert_null(bt.error);
            assert_true(find_frame(&bt, (size_t)spin, "middle_function") > spin);
            assert_true(find_frame(&bt, (size_t)spin, "main") > spin);
            if (bt.frames[0].object_path != NULL && strcmp(bt.frames[0].object_path, "[vdso]") == 0) {
                if (in_vdso++ == 0)
                    print_backtrace("caught in the vDSO", &bt);
                /* frame 0 may be a static helper without a symbol; the
                 * exported entry point is on the way out */
                long entry = find_frame(&bt, 0, "vdso_clock_gettime");
                if (entry < 0)
                    entry = find_frame(&bt, 0, "clock_gettime");
                assert_true(entry >= 0 && entry < spin);
                assert_true(ends_with(bt.frames[entry].object_path, "[vdso]") ||
                            ends_with(bt.frames[entry].object_path, "/libc.so.6"));
            }
            spinning++;
        }
        if (in_vdso == 1 && spinning == 1) {
            const hw_image *images;
            size_t n = hw_symbolizer_images(sym, &images);
            bool listed = false;
            for (size_t i = 0; i < n; i++)
                listed |= strcmp(images[i].path, "[vdso]") == 0 && images[i].build_id != NULL;
            assert_true(listed);
        }
        hw_backtrace_free(&bt);
        hw_process_snapshot_free(&snap);
        pause_ms(2);
    }
    hw_symbolizer_free(sym);
    printf("%d samples of the spinning thread, %d inside the vDSO\n", spinning, in_vdso);
    if (has_vdso)
        assert_true(in_vdso > 0);
    reap(t);
}

/* A short stack copy of a process that is gone: the walk stops where the
 * copy ends, keeps the frames it has and says why. */
static void test_unwind_stops_at_end_of_copy(void **state)
{
    (void)state;
    target *t = &current;
    spawn(t, "hang");
    wait_target_blocked(t);
    hw_capture_options opts;
    hw_capture_options_default(&opts, t->pid);
    opts.all_threads = false;
    opts.target_stack_bytes = 128 + 64; /* the red zone and 64 bytes above rsp */
    hw_process_snapshot snap;
    assert_int_equal(hw_capture_process(t->pid, &opts, &snap), 0);
    assert_int_equal(snap.threads[0].status, HW_THREAD_CAPTURED);
    assert_int_equal(snap.threads[0].stack_len, 128 + 64);
    reap(t); /* no live memory to fall back on */

    hw_symbolizer *sym = hw_symbolizer_new(snap.pid, snap.maps, snap.maps_len, NULL);
    assert_non_null(sym);
    hw_backtrace bt;
    assert_int_equal(hw_unwind_thread(sym, &snap.threads[0], 0, &bt), 0);
    print_backtrace("64 bytes of stack", &bt);
    assert_true(bt.count >= 1 && bt.count < 5);
    assert_non_null(bt.error);
    assert_true(strlen(bt.error) > 0);
    hw_backtrace_free(&bt);
    hw_symbolizer_free(sym);
    hw_process_snapshot_free(&snap);
}

static pid_t tracer_of(pid_t pid, pid_t tid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/task/%d/status", (int)pid, (int)tid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    pid_t tracer = -1;
    while (fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, "TracerPid:", 10) == 0)
            tracer = (pid_t)strtol(line + 10, NULL, 10);
    fclose(f);
    return tracer;
}

/* The "vfork" target, settled: its main thread a vfork parent in
 * uninterruptible sleep (it cannot stop), the other two in a futex wait
 * and a read. */
static void spawn_vfork_parent(target *t)
{
    spawn(t, "vfork");
    wait_state(t->pid, t->tids[0], 'D');
    wait_in_syscall(t->pid, t->tids[1], SYS_futex);
    wait_in_syscall(t->pid, t->tids[2], SYS_read);
}

/* Let its vfork child end; the main thread goes on to sleep(), which it
 * reaches only if no stop was left pending on it. */
static void let_vfork_child_end(target *t)
{
    assert_int_equal(write(t->in_fd, "x", 1), 1);
    char line[64];
    assert_true(read_line(t, line, sizeof line, now_ms() + DEADLINE_MS));
    assert_string_equal(line, "vfork done");
    wait_target_blocked(t);
}

/* One capture of `t` in which every thread is captured. */
static void capture_every_thread(target *t, const hw_capture_options *opts)
{
    hw_process_snapshot snap;
    assert_int_equal(hw_capture_process(t->pid, opts, &snap), 0);
    for (size_t i = 0; i < snap.thread_count; i++)
        assert_int_equal(snap.threads[i].status, HW_THREAD_CAPTURED);
    hw_process_snapshot_free(&snap);
}

/* A thread that cannot stop (a vfork parent waits in a killable sleep) times
 * out, the others are captured, and it is not left traced: once its child
 * is gone it runs on, and the next capture gets it. */
static void test_timeout_releases_thread(void **state)
{
    (void)state;
    target *t = &current;
    spawn_vfork_parent(t);

    hw_capture_options opts;
    hw_capture_options_default(&opts, t->pid);
    opts.stop_timeout_ms = 100;
    hw_process_snapshot snap;
    assert_int_equal(hw_capture_process(t->pid, &opts, &snap), 0);
    assert_int_equal(snap.thread_count, 3);
    const hw_thread_snapshot *main_thread = find_thread(&snap, t->pid);
    assert_string_equal(hw_thread_status_name(main_thread->status), "timeout");
    assert_int_equal(main_thread->error, ETIMEDOUT);
    assert_null(main_thread->stack);
    assert_int_equal(find_thread(&snap, t->tids[1])->status, HW_THREAD_CAPTURED);
    assert_int_equal(find_thread(&snap, t->tids[2])->status, HW_THREAD_CAPTURED);
    hw_symbolizer *sym = hw_symbolizer_new(t->pid, snap.maps, snap.maps_len, NULL);
    assert_non_null(sym);
    hw_backtrace bt;
    assert_int_equal(hw_unwind_thread(sym, main_thread, 0, &bt), 0);
    assert_int_equal(bt.count, 0);
    assert_non_null(bt.error);
    hw_backtrace_free(&bt);
    hw_symbolizer_free(sym);
    hw_process_snapshot_free(&snap);
    for (size_t k = 0; k < 3; k++)
        assert_int_equal(tracer_of(t->pid, t->tids[k]), 0);

    let_vfork_child_end(t);

    capture_every_thread(t, &opts);
    reap(t);
}

/* Captures on helpers made ahead of time, as the agent takes them
 * (helper_thread.h): each takes the waiting helper and none creates a
 * thread; a thread that cannot stop is released by that helper's end, as
 * by a helper made on the spot; the next capture finds the next helper. */
static void wait_for_waiting_helper(void)
{
    uint64_t deadline = now_ms() + DEADLINE_MS;
    while (!hw_capture_helper_waiting()) {
        assert_true(now_ms() < deadline);
        pause_ms(1);
    }
}

static void test_waiting_helpers(void **state)
{
    (void)state;
    target *t = &current;
    spawn_vfork_parent(t);
    assert_int_equal(hw_capture_helpers_start(true), 0);
    unsigned long taken_before, created_before, taken_after, created_after;
    hw_capture_helpers_counts(&taken_before, &created_before);

    hw_capture_options opts;
    hw_capture_options_default(&opts, t->pid);
    opts.stop_timeout_ms = 100;
    hw_process_snapshot snap;
    assert_int_equal(hw_capture_process(t->pid, &opts, &snap), 0);
    assert_int_equal(find_thread(&snap, t->pid)->status, HW_THREAD_TIMEOUT);
    assert_int_equal(find_thread(&snap, t->tids[1])->status, HW_THREAD_CAPTURED);
    hw_process_snapshot_free(&snap);
    for (size_t k = 0; k < 3; k++)
        assert_int_equal(tracer_of(t->pid, t->tids[k]), 0);

    let_vfork_child_end(t);
    for (int round = 0; round < 5; round++) {
        wait_for_waiting_helper();
        capture_every_thread(t, &opts);
    }
    hw_capture_helpers_counts(&taken_after, &created_after);
    hw_capture_helpers_stop();
    assert_int_equal(taken_after - taken_before, 6);
    assert_int_equal(created_after, created_before);
    reap(t);
}

/* Captures under way at once (hw_capture_start): a vfork parent's, whose
 * main thread cannot stop and holds its session for its whole timeout,
 * started first, does not hold back two captures of other processes
 * started after it: they are finished, every thread captured, while the
 * first is still under way (its main thread still traced), and it then
 * ends with its timeout as alone. */
static void test_captures_under_way_at_once(void **state)
{
    (void)state;
    target *slow = &current, quick[2];
    spawn_vfork_parent(slow);
    for (int k = 0; k < 2; k++) {
        spawn(&quick[k], "hang");
        wait_target_blocked(&quick[k]);
    }
    hw_capture_options slow_opts, opts;
    hw_capture_options_default(&slow_opts, slow->pid);
    slow_opts.stop_timeout_ms = 5000; /* longer than the others can take on a busy machine */
    hw_process_snapshot slow_snap, snap[2];
    hw_capture_flight *slow_flight, *flight[2];
    assert_int_equal(hw_capture_start(slow->pid, &slow_opts, &slow_snap, &slow_flight), 0);
    wait_state(slow->pid, slow->tids[1], 't'); /* its session has begun */
    for (int k = 0; k < 2; k++) {
        hw_capture_options_default(&opts, quick[k].pid);
        assert_int_equal(hw_capture_start(quick[k].pid, &opts, &snap[k], &flight[k]), 0);
    }
    for (int k = 1; k >= 0; k--) {
        assert_int_equal(hw_capture_finish(flight[k]), 0);
        assert_int_equal(snap[k].thread_count, 3);
        for (size_t i = 0; i < snap[k].thread_count; i++)
            assert_int_equal(snap[k].threads[i].status, HW_THREAD_CAPTURED);
        hw_process_snapshot_free(&snap[k]);
    }
    assert_int_not_equal(tracer_of(slow->pid, slow->pid), 0);
    assert_int_equal(hw_capture_finish(slow_flight), 0);
    assert_int_equal(find_thread(&slow_snap, slow->pid)->status, HW_THREAD_TIMEOUT);
    assert_int_equal(find_thread(&slow_snap, slow->tids[1])->status, HW_THREAD_CAPTURED);
    hw_process_snapshot_free(&slow_snap);
    for (size_t k = 0; k < 3; k++)
        assert_int_equal(tracer_of(slow->pid, slow->tids[k]), 0);
    let_vfork_child_end(slow);
    for (int k = 0; k < 2; k++)
        reap(&quick[k]);
    reap(slow);
}

/* The main thread called pthread_exit: it is a zombie, the process lives. */
static void test_leader_exited(void **state)
{
    (void)state;
    target *t = &current;
    spawn(t, "leader_exit");
    wait_state(t->pid, t->pid, 'Z');
    wait_in_syscall(t->pid, t->tids[1], SYS_futex);
    wait_in_syscall(t->pid, t->tids[2], SYS_read);
    hw_process_snapshot snap;
    assert_int_equal(hw_capture_process(t->pid, NULL, &snap), 0);
    assert_int_equal(snap.thread_count, 3);
    assert_int_equal(find_thread(&snap, t->pid)->status, HW_THREAD_EXITED);
    assert_int_equal(find_thread(&snap, t->tids[1])->status, HW_THREAD_CAPTURED);
    assert_int_equal(find_thread(&snap, t->tids[2])->status, HW_THREAD_CAPTURED);
    assert_false(snap.process_exited);
    assert_false(snap.reaped);
    assert_non_null(snap.maps); /* from a live thread */
    hw_symbolizer *sym = hw_symbolizer_new(t->pid, snap.maps, snap.maps_len, NULL);
    assert_non_null(sym);
    hw_backtrace bt;
    assert_int_equal(hw_unwind_thread(sym, find_thread(&snap, t->tids[2]), 0, &bt), 0);
    assert_null(bt.error);
    assert_true(find_frame(&bt, 0, "pipe_reader_function") > 0);
    hw_backtrace_free(&bt);
    hw_symbolizer_free(sym);
    hw_process_snapshot_free(&snap);
    reap(t);
}

/* Another tracer holds the process (as strace -p or gdb would): its threads
 * are denied, and the snapshot names the tracer, escaped for the agent's
 * line.  The tracer is a child of ours that forks the target and seizes it
 * (a parent may trace its child under any Yama setting). */
static void test_traced_by_another_tracer(void **state)
{
    (void)state;
    static const char tracer_comm[] = "hw\033tracer"; /* an ESC byte, as a hostile name would have */
    int p[2];
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    pid_t tracer = fork();
    assert_true(tracer >= 0);
    if (tracer == 0) {
        pid_t test = getppid(), self = getpid();
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != test)
            _exit(1); /* the test ended before the signal was asked for */
        prctl(PR_SET_NAME, tracer_comm);
        pid_t traced = fork();
        if (traced == 0) {
            /* Ends with its tracer, also when the tracer was killed before
             * this line ran (it was left running, holding ctest's pipe). */
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != self)
                _exit(0);
            for (;;)
                pause();
        }
        if (traced < 0 || ptrace(PTRACE_SEIZE, traced, NULL, NULL) != 0)
            _exit(1);
        if (write(p[1], &traced, sizeof traced) != (ssize_t)sizeof traced)
            _exit(1);
        for (;;)
            pause();
    }
    close(p[1]);
    pid_t traced = 0;
    assert_int_equal(read(p[0], &traced, sizeof traced), (ssize_t)sizeof traced);
    close(p[0]);
    assert_int_equal(tracer_of(traced, traced), tracer);

    hw_process_snapshot snap;
    assert_int_equal(hw_capture_process(traced, NULL, &snap), 0);
    assert_int_equal(snap.thread_count, 1);
    assert_int_equal(snap.threads[0].status, HW_THREAD_DENIED);
    assert_int_equal(snap.threads[0].error, EPERM);
    assert_false(snap.process_exited);
    assert_int_equal(snap.tracer_pid, tracer);
    assert_string_equal(snap.tracer_name, tracer_comm);
    char reason[128], expected[128];
    snprintf(expected, sizeof expected, "traced by pid %d (hw\\x1btracer)", (int)tracer);
    assert_ptr_equal(hw_capture_denied_reason(&snap, reason, sizeof reason), reason);
    assert_string_equal(reason, expected);
    hw_process_snapshot_free(&snap);

    kill(tracer, SIGKILL);
    assert_int_equal(waitpid(tracer, NULL, 0), tracer);
}

/* A thread of ours that traces the target, as the helper of an earlier
 * capture that timed out on it does until it exits: the capture waits for
 * it to let go instead of naming the agent itself as the tracer. */
typedef struct own_tracer {
    pid_t tid;
    int ready[2]; /* the tracer says it has seized */
    int leave[2]; /* the test says it may exit */
} own_tracer;

static void *own_tracer_main(void *arg)
{
    own_tracer *o = arg;
    char c = ptrace(PTRACE_SEIZE, o->tid, NULL, NULL) == 0 ? 'y' : 'n';
    if (write(o->ready[1], &c, 1) != 1)
        return NULL;
    (void)read(o->leave[0], &c, 1);
    pause_ms(150); /* still tracing when the capture first asks */
    return NULL;   /* the kernel lets the thread go as this one exits */
}

static void test_waits_for_own_tracer(void **state)
{
    (void)state;
    target *t = &current;
    spawn(t, "hang");
    wait_target_blocked(t);
    own_tracer o = {.tid = t->tids[1]};
    assert_int_equal(pipe2(o.ready, O_CLOEXEC), 0);
    assert_int_equal(pipe2(o.leave, O_CLOEXEC), 0);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, own_tracer_main, &o), 0);
    char c = 0;
    assert_int_equal(read(o.ready[0], &c, 1), 1);
    assert_int_equal(c, 'y');
    assert_int_not_equal(tracer_of(t->pid, o.tid), 0);
    assert_int_equal(write(o.leave[1], "x", 1), 1);

    hw_process_snapshot snap;
    assert_int_equal(hw_capture_process(t->pid, NULL, &snap), 0);
    const hw_thread_snapshot *held = find_thread(&snap, o.tid);
    assert_non_null(held);
    assert_int_equal(held->status, HW_THREAD_CAPTURED);
    assert_int_equal(snap.tracer_pid, 0);
    for (size_t i = 0; i < snap.thread_count; i++)
        assert_int_equal(snap.threads[i].status, HW_THREAD_CAPTURED);
    hw_process_snapshot_free(&snap);
    assert_int_equal(pthread_join(th, NULL), 0);
    for (int k = 0; k < 2; k++) {
        close(o.ready[k]);
        close(o.leave[k]);
    }
    reap(t);
}

/* A bound on the threads one capture takes: the target, the main thread
 * and the threads to keep come first, then the lowest thread ids; the
 * rest are counted, never seized. */
static void test_thread_bound(void **state)
{
    (void)state;
    target *t = &current;
    spawn(t, "hang");
    wait_target_blocked(t);
    pid_t low = t->tids[1] < t->tids[2] ? t->tids[1] : t->tids[2];
    pid_t high = t->tids[1] < t->tids[2] ? t->tids[2] : t->tids[1];
    hw_capture_options opts;
    hw_capture_options_default(&opts, t->pid);
    assert_int_equal(opts.max_threads, HW_CAPTURE_MAX_THREADS);
    opts.max_threads = 2;
    hw_process_snapshot snap;
    assert_int_equal(hw_capture_process(t->pid, &opts, &snap), 0); /* the main thread, then the oldest */
    assert_int_equal(snap.thread_count, 2);
    assert_int_equal(snap.enumerated_thread_count, 3);
    assert_int_equal(snap.threads_left_out, 1);
    assert_non_null(find_thread(&snap, t->pid));
    assert_non_null(find_thread(&snap, low));
    assert_null(find_thread(&snap, high));
    hw_process_snapshot_free(&snap);
    assert_int_equal(tracer_of(t->pid, high), 0);

    opts.target_tid = high; /* the target and a thread to keep before the rest */
    opts.keep_tids[0] = t->pid;
    opts.keep_count = 1;
    assert_int_equal(hw_capture_process(t->pid, &opts, &snap), 0);
    assert_int_equal(snap.thread_count, 2);
    assert_non_null(find_thread(&snap, high));
    assert_true(find_thread(&snap, high)->is_target);
    assert_non_null(find_thread(&snap, t->pid));
    assert_null(find_thread(&snap, low));
    hw_process_snapshot_free(&snap);

    opts.max_threads = 1; /* the target alone */
    assert_int_equal(hw_capture_process(t->pid, &opts, &snap), 0);
    assert_int_equal(snap.thread_count, 1);
    assert_int_equal(snap.threads[0].tid, high);
    assert_int_equal(snap.threads_left_out, 2);
    hw_process_snapshot_free(&snap);

    opts.max_threads = 0; /* no bound */
    assert_int_equal(hw_capture_process(t->pid, &opts, &snap), 0);
    assert_int_equal(snap.thread_count, 3);
    assert_int_equal(snap.threads_left_out, 0);
    for (size_t i = 0; i < snap.thread_count; i++)
        assert_int_equal(snap.threads[i].status, HW_THREAD_CAPTURED);
    hw_process_snapshot_free(&snap);
    reap(t);
}

static void test_api_edges(void **state)
{
    (void)state;
    assert_string_equal(hw_thread_status_name(HW_THREAD_CAPTURED), "captured");
    assert_string_equal(hw_thread_status_name(HW_THREAD_EXITED), "exited");
    assert_string_equal(hw_thread_status_name(HW_THREAD_TIMEOUT), "timeout");
    assert_string_equal(hw_thread_status_name(HW_THREAD_DENIED), "denied");

    hw_capture_options o;
    hw_capture_options_default(&o, 1234);
    assert_int_equal(o.target_tid, 1234);
    assert_true(o.all_threads);
    assert_int_equal(o.target_stack_bytes, 512 * 1024);
    assert_int_equal(o.other_stack_bytes, 64 * 1024);
    assert_int_equal(o.stop_timeout_ms, 500);

    hw_process_snapshot snap;
    assert_int_equal(hw_capture_process(0, &o, &snap), -EINVAL);
    hw_process_snapshot_free(&snap);
    /* Our own threads cannot be traced by us ... */
    assert_int_equal(hw_capture_process(getpid(), NULL, &snap), 0);
    assert_true(snap.thread_count >= 1);
    assert_int_equal(snap.threads[0].status, HW_THREAD_DENIED);
    assert_int_equal(snap.threads[0].error, EPERM);
    /* ... but not because another tracer holds them. */
    assert_int_equal(snap.tracer_pid, 0);
    char reason[64];
    assert_null(hw_capture_denied_reason(&snap, reason, sizeof reason));

    char *error = NULL;
    assert_null(hw_symbolizer_new(getpid(), NULL, 0, &error));
    assert_non_null(error);
    free(error);
    hw_symbolizer *sym = hw_symbolizer_new(getpid(), snap.maps, snap.maps_len, &error);
    assert_non_null(sym);
    hw_backtrace bt;
    assert_int_equal(hw_unwind_thread(sym, &snap.threads[0], 0, &bt), 0);
    assert_int_equal(bt.count, 0);
    assert_non_null(bt.error);
    hw_backtrace_free(&bt);
    hw_symbolizer_free(sym);
    hw_process_snapshot_free(&snap);
}

int main(int argc, char **argv)
{
    target_path = argc > 1 ? argv[1] : getenv("HW_CAPTURE_TARGET");
    if (target_path == NULL || access(target_path, X_OK) != 0 || realpath(target_path, target_real) == NULL) {
        fprintf(stderr, "usage: %s CAPTURE_TARGET (or set HW_CAPTURE_TARGET)\n", argv[0]);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_capture_and_unwind_all_threads, teardown),
        cmocka_unit_test_teardown(test_capture_is_transparent, teardown),
        cmocka_unit_test_teardown(test_epoll_wait_is_restarted, teardown),
        cmocka_unit_test_teardown(test_zombie_child, teardown),
        cmocka_unit_test_teardown(test_zombie_grandchild, teardown),
        cmocka_unit_test_teardown(test_stop_time, teardown),
        cmocka_unit_test_teardown(test_group_stop_is_kept, teardown),
        cmocka_unit_test_teardown(test_signals_are_not_lost, teardown),
        cmocka_unit_test_teardown(test_spinning_thread_and_vdso, teardown),
        cmocka_unit_test_teardown(test_unwind_stops_at_end_of_copy, teardown),
        cmocka_unit_test_teardown(test_timeout_releases_thread, teardown),
        cmocka_unit_test_teardown(test_captures_under_way_at_once, teardown),
        cmocka_unit_test_teardown(test_waiting_helpers, teardown),
        cmocka_unit_test_teardown(test_leader_exited, teardown),
        cmocka_unit_test_teardown(test_traced_by_another_tracer, teardown),
        cmocka_unit_test_teardown(test_waits_for_own_tracer, teardown),
        cmocka_unit_test_teardown(test_thread_bound, teardown),
        cmocka_unit_test_teardown(test_api_edges, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
