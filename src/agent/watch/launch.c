/*
 * launch.c - starting the program to watch: the observer preloaded, the
 * agent's socket named in its environment, the signals the agent handles
 * itself blocked (they arrive on a signalfd) and restored for the program.
 *
 * A statically linked program cannot take the observer (no dynamic loader,
 * no LD_PRELOAD): that is said before it starts.  An exec failure comes back
 * through a close-on-exec pipe, so "cannot run" is known before the agent
 * starts watching anything.  The child is made by vfork (no copy of the
 * agent's memory), except for a launch the kernel observer must watch from
 * its first instruction.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/abi/registration.h"
#include "watch.h"

int launch_open_signal_fd(agent *a)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGQUIT);
    if (sigprocmask(SIG_BLOCK, &set, &a->original_mask) != 0)
        return -errno;
    a->signal_fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    if (a->signal_fd < 0)
        return -errno;
    /* A closed stderr must not kill the agent (and with it the reports). */
    struct sigaction ign = {0};
    ign.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &ign, &a->original_sigpipe);
    return 0;
}

static char *preload_value(const char *preload_path)
{
    const char *existing = getenv("LD_PRELOAD");
    char *v = NULL;
    if (existing && *existing) {
        if (asprintf(&v, "%s:%s", preload_path, existing) < 0)
            return NULL;
    } else {
        v = strdup(preload_path);
    }
    return v;
}

char *resolve_program(const char *name)
{
    if (strchr(name, '/'))
        return strdup(name);
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/bin:/usr/bin:/bin";
    char *copy = strdup(path);
    char *result = NULL;
    for (char *save = NULL, *dir = copy ? strtok_r(copy, ":", &save) : NULL; dir; dir = strtok_r(NULL, ":", &save)) {
        char *candidate = NULL;
        if (asprintf(&candidate, "%s/%s", *dir ? dir : ".", name) < 0)
            break;
        if (access(candidate, X_OK) == 0) {
            result = candidate;
            break;
        }
        free(candidate);
    }
    free(copy);
    return result;
}

/* A 64-bit ELF executable without a PT_INTERP: no dynamic loader, so no
 * LD_PRELOAD.  Anything unreadable or not ELF counts as not static (a
 * script, whose interpreter is dynamic, is the usual case). */
static bool is_static_executable(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    Elf64_Ehdr eh;
    bool is_static = false;
    if (pread(fd, &eh, sizeof eh, 0) == (ssize_t)sizeof eh && memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 &&
        eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_phentsize == sizeof(Elf64_Phdr) && eh.e_phnum < 256) {
        is_static = true;
        for (unsigned i = 0; i < eh.e_phnum; i++) {
            Elf64_Phdr ph;
            if (pread(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + i * sizeof ph)) != (ssize_t)sizeof ph ||
                ph.p_type == PT_INTERP) {
                is_static = false;
                break;
            }
        }
    }
    close(fd);
    return is_static;
}

/* Does the program get the kernel observer (kernel_observer.h) instead of
 * the preload?  With --observer kernel, or for a static executable with
 * --observer auto when the kernel observer can be loaded.  -errno when
 * --observer kernel cannot be had (said). */
static int choose_kernel_observer(agent *a, bool *use_kernel)
{
    const hw_agent_options *o = a->opts;
    char *resolved = resolve_program(o->argv[0]);
    bool is_static = resolved && is_static_executable(resolved);
    *use_kernel = o->observer == HW_OBSERVER_KERNEL || (o->observer == HW_OBSERVER_AUTO && is_static);
    char why[512] = "";
    int rc = 0;
    if (*use_kernel && a->kobs == NULL && (rc = kernel_observer_open(a, why, sizeof why)) != 0) {
        *use_kernel = false;
        if (o->observer == HW_OBSERVER_KERNEL) {
            fprintf(stderr, "hangwatch: %s\n", why);
            free(resolved);
            return rc;
        }
    }
    if (is_static && !*use_kernel && !o->quiet) {
        a->warned_unregistered = true; /* said here, more precisely */
        fprintf(stderr,
                "hangwatch: warning: %s is statically linked: the observer cannot be preloaded into it, so its "
                "hangs cannot be seen%s%s (see docs/limits.md)\n",
                resolved, why[0] ? "; the kernel observer could not be used: " : "", why);
    }
    free(resolved);
    return 0;
}

/* The program's environment, made before the fork: ours with the
 * observer's variables set (or replaced). */
#define ONLY_PID_DIGITS 12
typedef struct child_env {
    char **vars;           /* for execvpe */
    char *own[8];          /* the strings made here */
    size_t own_count;
    char *own_pid_digits;  /* HW_ENV_ONLY_PID's value, written in the child */
} child_env;

static bool env_set(child_env *e, size_t *n, const char *name, const char *value)
{
    size_t name_len = strlen(name);
    for (size_t i = 0; i < *n; i++)
        if (strncmp(e->vars[i], name, name_len) == 0 && e->vars[i][name_len] == '=') {
            e->vars[i] = e->vars[--*n]; /* replaced: the last moves here */
            break;
        }
    char *v = NULL;
    if (asprintf(&v, "%s=%s", name, value) < 0)
        return false;
    e->own[e->own_count++] = v;
    e->vars[(*n)++] = v;
    return true;
}

static void child_env_free(child_env *e)
{
    for (size_t i = 0; i < e->own_count; i++)
        free(e->own[i]);
    free(e->vars);
    memset(e, 0, sizeof *e);
}

static bool child_env_make(const agent *a, const char *preload, const char *node_options, child_env *e)
{
    extern char **environ;
    size_t count = 0;
    while (environ[count] != NULL)
        count++;
    e->vars = calloc(count + 8, sizeof *e->vars);
    if (!e->vars)
        return false;
    memcpy(e->vars, environ, count * sizeof *e->vars);
    size_t n = count;
    const hw_agent_options *o = a->opts;
    bool ok = (!preload || env_set(e, &n, "LD_PRELOAD", preload)) &&
              env_set(e, &n, HW_ENV_AGENT_SOCKET, a->socket_name) &&
              env_set(e, &n, HW_ENV_CLOCK, a->clock.tsc_usable ? "tsc" : "coarse") && /* clock_source.c */
              (!node_options || env_set(e, &n, "NODE_OPTIONS", node_options)) &&
              (!o->every_wait_is_the_loop || env_set(e, &n, "HANGWATCH_WAIT_SITE", "any")) &&
              (!o->all_loop_threads || env_set(e, &n, "HANGWATCH_THREADS", "loops")) &&
              (!o->no_follow || env_set(e, &n, HW_ENV_ONLY_PID, "            ")); /* ONLY_PID_DIGITS */
    if (!ok) {
        child_env_free(e);
        return false;
    }
    if (o->no_follow)
        e->own_pid_digits = strchr(e->own[e->own_count - 1], '=') + 1;
    e->vars[n] = NULL;
    return true;
}

/* `value` in decimal into `out` (`len` bytes, the rest NUL): in the forked
 * child, where snprintf's locale and allocation are not to be trusted. */
static void write_decimal(char *out, size_t len, pid_t value)
{
    char digits[16];
    size_t n = 0;
    unsigned long v = (unsigned long)value;
    do
        digits[n++] = (char)('0' + v % 10);
    while ((v /= 10) != 0 && n < sizeof digits);
    size_t i = 0;
    for (; i < n && i < len; i++)
        out[i] = digits[n - 1 - i];
    for (; i < len; i++)
        out[i] = '\0';
}

/* The child, from its fork to its exec.  The program gets the signal
 * state and descriptor limit we were given, not ours.  Between fork and
 * exec only what cannot take a lock another thread held at the fork (no
 * allocation: the worker may have been in malloc; a sanitizer's allocator
 * is not reset in the child), and, after vfork, only system calls: the
 * child runs in our memory, with the parent's thread suspended, until its
 * exec (or _exit). */
static _Noreturn void run_child(const agent *a, bool use_kernel, const int gopipe[2], const int errpipe[2],
                                const child_env *env)
{
    sigaction(SIGPIPE, &a->original_sigpipe, NULL);
    sigprocmask(SIG_SETMASK, &a->original_mask, NULL);
    if (a->nofile_raised)
        setrlimit(RLIMIT_NOFILE, &a->original_nofile);
    if (use_kernel) {
        char go;
        close(gopipe[1]);
        while (read(gopipe[0], &go, 1) < 0 && errno == EINTR)
            ;
    }
    if (env->own_pid_digits)
        write_decimal(env->own_pid_digits, ONLY_PID_DIGITS, getpid());
    execvpe(a->opts->argv[0], a->opts->argv, env->vars);
    int e = errno;
    ssize_t w = write(errpipe[1], &e, sizeof e);
    (void)w;
    _exit(127);
}

/* The child made and started on its way: its pid, or -1 (errno).  vfork,
 * not fork: copying the agent's page tables and tearing the copy down again
 * at the exec took 4-6 ms of every program's start (decisions §60).  Only
 * the kernel observer's launch forks: its child waits for the go, which
 * vfork's suspended parent could never give. */
static pid_t start_child(const agent *a, bool use_kernel, const int gopipe[2], const int errpipe[2],
                         const child_env *env)
{
    pid_t pid = use_kernel ? fork() : vfork();
    if (pid == 0)
        run_child(a, use_kernel, gopipe, errpipe, env);
    return pid;
}

/* Fork and exec the program.  Exec failures come back through a pipe. */
int launch_program(agent *a)
{
    bool use_kernel = false;
    int rc = choose_kernel_observer(a, &use_kernel);
    if (rc != 0)
        return rc;
    int gopipe[2] = {-1, -1}; /* the child execs once the kernel observer watches it */
    int errpipe[2] = {-1, -1};
    char *preload = NULL, *node_options = NULL;
    pid_t pid = -1;
    child_env env = {0};
    if ((use_kernel && pipe2(gopipe, O_CLOEXEC) != 0) || pipe2(errpipe, O_CLOEXEC) != 0) {
        rc = -errno;
    } else if ((preload = preload_value(a->opts->preload_path)) == NULL) {
        rc = -ENOMEM;
    } else if (js_wants_perf_map(a) &&
               !(node_options = js_node_options(getenv("NODE_OPTIONS"), &a->js_maps_ours))) {
        /* node names its JavaScript functions for us (js_maps.c) */
        rc = -ENOMEM;
    } else if (!child_env_make(a, use_kernel ? NULL : preload, node_options, &env)) {
        rc = -ENOMEM;
    } else if ((pid = start_child(a, use_kernel, gopipe, errpipe, &env)) < 0) {
        rc = -errno;
    }
    if (rc != 0) {
        child_env_free(&env);
        free(node_options);
        free(preload);
        for (int i = 0; i < 2; i++) {
            if (gopipe[i] >= 0)
                close(gopipe[i]);
            if (errpipe[i] >= 0)
                close(errpipe[i]);
        }
        return rc;
    }
    child_env_free(&env);
    free(preload);
    free(node_options);
    close(errpipe[1]);
    if (use_kernel) {
        close(gopipe[0]);
        char *program = resolve_program(a->opts->argv[0]);
        kernel_watch_launched(a, pid, program); /* from its first instruction: a launch */
        free(program);
        close(gopipe[1]); /* go: the child execs now */
    }
    int child_errno = 0;
    ssize_t n;
    do
        n = read(errpipe[0], &child_errno, sizeof child_errno);
    while (n < 0 && errno == EINTR);
    close(errpipe[0]);
    if (n == (ssize_t)sizeof child_errno) {
        int status;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
            ;
        fprintf(stderr, "hangwatch: cannot run '%s': %s\n", a->opts->argv[0], strerror(child_errno));
        return -child_errno ? -child_errno : -ENOEXEC;
    }
    a->child = pid;
    return 0;
}

int launch_exit_code(int status)
{
    if (status < 0)
        return 1; /* not known */
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return 1;
}
