/*
 * soak_tree.c - a tree of processes that hang, fork, exec, die and restart
 * at random for as long as asked: the program `make soak` (bench/soak.py)
 * runs under hangwatch for an hour to show that the agent keeps up with
 * process churn and leaves nothing behind (memory, descriptors, threads).
 *
 *   soak-tree N SECONDS [SEED]
 *
 * The root keeps N workers (1 to 256) alive for SECONDS, restarting any
 * that dies, then sends each SIGTERM and exits 0 once all (and every
 * orphaned grandchild, which it reaps as the tree's subreaper) are gone.
 * Each worker runs a poll() loop and, every 1 to 10 s, one event:
 *
 *   hang  (10 %)  a callback busy 2.2 to 4 s, spinning on the CPU and
 *                 sleeping in nanosleep by turns; one hang in 8 ends with
 *                 the worker's death (raise(SIGKILL) or _exit(3)): a fatal
 *                 hang
 *   work  (35 %)  a callback busy 5 to 95 ms
 *   fork  (25 %)  a grandchild that runs 3 to 8 loop turns and exits
 *   exec  (12 %)  execv("/proc/self/exe", "--worker" ...): the same worker
 *                 again in a fresh image, its random sequence carried on
 *   die   (18 %)  _exit(1..3) or raise(SIGKILL) while idle
 *
 * With 20 workers that is about 1,000 hangs an hour (a third of a CPU
 * spinning), and some 2,500 deaths, 1,400 execs and 2,800 grandchildren.
 *
 * Everything that happens is said on stdout, one write(2) per line so that
 * the lines of many processes never interleave (bench/soak.py parses them):
 *
 *   soak-tree: seed S, N workers, SECONDS s     the root, first
 *   start <pid> <slot> <generation>             the root started a worker
 *   hang <pid> <unix-ns> <planned-ms>           before a hang begins
 *   end <pid> <unix-ns> <busy-ms> HOW spin|sleep
 *                                               a hang is over: HOW is
 *                                               returned, or killed / exited
 *                                               for a fatal one (said just
 *                                               before the death)
 *   fork <pid> <child-pid> | exec <pid> | die <pid> exit|kill
 *   reaped <pid> exit <status> | reaped <pid> signal <signo>
 *   soak-tree: done ...                         the root, last
 *
 * A SIGTERM lets a worker finish the hang it is in (every hang announced
 * runs its planned time), wait for its grandchildren and exit 0.  The seed
 * (default: from the time and pid) makes each worker's sequence of events
 * replayable; their timing depends on the machine.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_WORKERS 256

/* Kept whole and under their own names (no .isra/.constprop clones): the
 * reports name these functions. */
#if defined(__clang__)
#define CALLBACK __attribute__((noinline))
#else
#define CALLBACK __attribute__((noinline, noipa))
#endif
#define NAMED CALLBACK
#define HANG_MIN_MS 2200
#define HANG_MAX_MS 4000

static volatile sig_atomic_t g_term;

static void on_term(int sig)
{
    (void)sig;
    g_term = 1;
}

static int64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static int64_t mono_ns(void)
{
    return clock_ns(CLOCK_MONOTONIC);
}

/* One line on stdout in one write(2): atomic on a pipe and on an O_APPEND file. */
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    char line[192];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n <= 0)
        return;
    if ((size_t)n >= sizeof line)
        n = (int)sizeof line - 1;
    ssize_t w = write(STDOUT_FILENO, line, (size_t)n);
    (void)w;
}

/* splitmix64: small, good enough, and its whole state is one number that
 * an exec can carry on the command line. */
static uint64_t next_random(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [lo, hi]. */
static int64_t random_between(uint64_t *state, int64_t lo, int64_t hi)
{
    return lo + (int64_t)(next_random(state) % (uint64_t)(hi - lo + 1));
}

static void install_term_handler(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_term;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL); /* no SA_RESTART: poll returns at once */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigprocmask(SIG_UNBLOCK, &set, NULL); /* blocked across a re-exec */
}

/* ---- the callbacks: not inlined, and bodies of their own, so that
 * neither inlining nor identical-code folding makes one function of two ---- */

static CALLBACK uint64_t hang_spinning_on_cpu(int64_t until_ns)
{
    volatile uint64_t acc = 1;
    while (mono_ns() < until_ns)
        for (unsigned i = 0; i < 4096; i++)
            acc = acc * 6364136223846793005ull + i;
    return acc;
}

static CALLBACK unsigned hang_sleeping_in_nanosleep(int64_t until_ns)
{
    unsigned naps = 0;
    for (int64_t now = mono_ns(); now < until_ns; now = mono_ns()) {
        int64_t left = until_ns - now;
        struct timespec ts = {(time_t)(left / 1000000000ll), (long)(left % 1000000000ll)};
        nanosleep(&ts, NULL); /* a signal only shortens one nap: the loop goes on */
        naps++;
    }
    return naps;
}

static CALLBACK double short_work(int64_t until_ns)
{
    volatile double x = 0.5;
    while (mono_ns() < until_ns)
        for (int i = 0; i < 512; i++)
            x = x * 3.7 * (1.0 - x);
    return x;
}

/* ---- a grandchild: a few turns of a loop of its own, then gone ---- */

static __attribute__((noreturn)) void grandchild_main(uint64_t rng)
{
    int turns = (int)random_between(&rng, 3, 8);
    for (int t = 0; t < turns; t++) {
        poll(NULL, 0, (int)random_between(&rng, 20, 200));
        short_work(mono_ns() + random_between(&rng, 1, 5) * 1000000ll);
    }
    _exit(0);
}

/* ---- a worker ---- */

static void reap_grandchildren(void)
{
    int status;
    while (waitpid(-1, &status, WNOHANG) > 0)
        ;
}

static int64_t next_event_ns(uint64_t *rng)
{
    return mono_ns() + random_between(rng, 1000, 10000) * 1000000ll;
}

/* A hang: announced, run for its planned time, its end said.  A fatal one
 * does not come back. */
static void do_hang(uint64_t *rng, int *kind)
{
    int64_t planned_ms = random_between(rng, HANG_MIN_MS, HANG_MAX_MS);
    bool fatal = random_between(rng, 0, 7) == 0;
    bool by_kill = random_between(rng, 0, 1) == 0;
    const char *kind_name = *kind ? "sleep" : "spin";
    int64_t start = mono_ns();
    say("hang %d %" PRId64 " %" PRId64 "\n", (int)getpid(), clock_ns(CLOCK_REALTIME), planned_ms);
    int64_t until = start + planned_ms * 1000000ll;
    if (*kind)
        hang_sleeping_in_nanosleep(until);
    else
        hang_spinning_on_cpu(until);
    *kind = !*kind;
    int64_t busy_ms = (mono_ns() - start) / 1000000ll;
    if (fatal) {
        say("end %d %" PRId64 " %" PRId64 " %s %s\n", (int)getpid(), clock_ns(CLOCK_REALTIME), busy_ms,
            by_kill ? "killed" : "exited", kind_name);
        if (by_kill)
            raise(SIGKILL);
        _exit(3);
    }
    say("end %d %" PRId64 " %" PRId64 " returned %s\n", (int)getpid(), clock_ns(CLOCK_REALTIME), busy_ms, kind_name);
}

static void do_exec(int slot, uint64_t rng, int kind)
{
    char slot_s[16], rng_s[24], kind_s[4];
    snprintf(slot_s, sizeof slot_s, "%d", slot);
    snprintf(rng_s, sizeof rng_s, "%" PRIx64, rng);
    snprintf(kind_s, sizeof kind_s, "%d", kind);
    char *argv[] = {"soak-tree", "--worker", slot_s, rng_s, kind_s, NULL};
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigprocmask(SIG_BLOCK, &set, NULL); /* until the new image has its handler */
    say("exec %d\n", (int)getpid());
    execv("/proc/self/exe", argv);
    say("exec-failed %d %s\n", (int)getpid(), strerror(errno));
    _exit(4);
}

static __attribute__((noreturn)) void worker_main(int slot, uint64_t rng, int kind)
{
    install_term_handler();
    prctl(PR_SET_NAME, "soak-tree"); /* after an exec of /proc/self/exe, "exe" */
    int64_t next = next_event_ns(&rng);
    while (!g_term) {
        int64_t now = mono_ns();
        int timeout_ms = now >= next ? 0 : (int)((next - now) / 1000000ll) + 1;
        poll(NULL, 0, timeout_ms > 250 ? 250 : timeout_ms); /* the loop's wait */
        reap_grandchildren();
        if (g_term || mono_ns() < next)
            continue;
        int64_t pick = random_between(&rng, 0, 99);
        if (pick < 10) {
            do_hang(&rng, &kind);
        } else if (pick < 45) {
            short_work(mono_ns() + random_between(&rng, 5, 95) * 1000000ll);
        } else if (pick < 70) {
            uint64_t child_rng = next_random(&rng);
            pid_t child = fork();
            if (child == 0)
                grandchild_main(child_rng);
            if (child > 0)
                say("fork %d %d\n", (int)getpid(), (int)child);
        } else if (pick < 82) {
            do_exec(slot, rng, kind);
        } else {
            bool by_kill = random_between(&rng, 0, 1) == 0;
            say("die %d %s\n", (int)getpid(), by_kill ? "kill" : "exit");
            if (by_kill)
                raise(SIGKILL);
            _exit((int)random_between(&rng, 1, 3));
        }
        next = next_event_ns(&rng);
    }
    /* Stopping: back in the loop's wait first (a hang just finished ends
     * there, not with the exit), then the grandchildren, waiting meanwhile. */
    poll(NULL, 0, 0);
    for (;;) {
        int status;
        pid_t p = waitpid(-1, &status, WNOHANG);
        if (p < 0 && errno == ECHILD)
            break;
        if (p <= 0)
            poll(NULL, 0, 20);
    }
    _exit(0);
}

/* ---- the root ---- */

typedef struct slot {
    pid_t pid; /* 0: none */
    unsigned generation;
} slot;

static uint64_t worker_seed(uint64_t seed, int slot_index, unsigned generation)
{
    uint64_t s = seed ^ ((uint64_t)slot_index << 32) ^ generation;
    return next_random(&s);
}

static NAMED pid_t start_worker(slot *s, int index, uint64_t seed)
{
    uint64_t rng = worker_seed(seed, index, s->generation);
    pid_t pid = fork();
    if (pid == 0)
        worker_main(index, rng, (int)(rng >> 63));
    if (pid > 0) {
        s->pid = pid;
        say("start %d %d %u\n", (int)pid, index, s->generation);
        s->generation++;
    } else {
        say("fork-failed %s\n", strerror(errno));
    }
    return pid;
}

static int root_main(int count, int seconds, uint64_t seed)
{
    install_term_handler(); /* an early SIGTERM stops the soak as its end would */
    prctl(PR_SET_CHILD_SUBREAPER, 1); /* orphaned grandchildren come to us */
    poll(NULL, 0, 0);                  /* the root's loop starts: not a launch */
    say("soak-tree: seed %" PRIu64 ", %d workers, %d s\n", seed, count, seconds);
    static slot slots[MAX_WORKERS];
    for (int i = 0; i < count; i++)
        start_worker(&slots[i], i, seed);
    int64_t end = mono_ns() + (int64_t)seconds * 1000000000ll;
    int64_t kill_at = 0;
    bool stopping = false;
    unsigned long restarts = 0, reaped_others = 0;
    for (;;) {
        poll(NULL, 0, 100);
        if (!stopping && (g_term || mono_ns() >= end)) {
            stopping = true;
            kill_at = mono_ns() + 30 * 1000000000ll;
            for (int i = 0; i < count; i++)
                if (slots[i].pid > 0)
                    kill(slots[i].pid, SIGTERM);
        }
        if (stopping && mono_ns() >= kill_at) { /* a worker that would not stop */
            for (int i = 0; i < count; i++)
                if (slots[i].pid > 0)
                    kill(slots[i].pid, SIGKILL);
            kill_at = mono_ns() + 3600 * 1000000000ll;
        }
        int status;
        pid_t p;
        while ((p = waitpid(-1, &status, WNOHANG)) > 0) {
            int i = 0;
            while (i < count && slots[i].pid != p)
                i++;
            if (i == count) {
                reaped_others++; /* a grandchild whose worker died */
                continue;
            }
            slots[i].pid = 0;
            if (WIFSIGNALED(status))
                say("reaped %d signal %d\n", (int)p, WTERMSIG(status));
            else
                say("reaped %d exit %d\n", (int)p, WEXITSTATUS(status));
            if (!stopping) {
                start_worker(&slots[i], i, seed);
                restarts++;
            }
        }
        if (stopping && p < 0 && errno == ECHILD)
            break;
    }
    say("soak-tree: done, %lu restarts, %lu orphaned grandchildren reaped\n", restarts, reaped_others);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "--worker") == 0) {
        int slot_index = atoi(argv[2]);
        uint64_t rng = strtoull(argv[3], NULL, 16);
        worker_main(slot_index, rng, atoi(argv[4]) != 0);
    }
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: soak-tree N SECONDS [SEED]\n");
        return 2;
    }
    int count = atoi(argv[1]);
    int seconds = atoi(argv[2]);
    if (count < 1 || count > MAX_WORKERS || seconds < 1) {
        fprintf(stderr, "soak-tree: N is 1 to %d, SECONDS at least 1\n", MAX_WORKERS);
        return 2;
    }
    uint64_t seed = argc == 4 ? strtoull(argv[3], NULL, 10)
                              : ((uint64_t)time(NULL) * 2654435761u ^ (uint64_t)getpid()) & 0xffffffffu;
    return root_main(count, seconds, seed);
}
