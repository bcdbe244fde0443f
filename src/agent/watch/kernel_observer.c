/*
 * kernel_observer.c - loading the kernel observer (wait_observer.bpf.c,
 * through its libbpf skeleton) and handing out its pages
 * (kernel_observer.h).
 *
 * One object holds the programs of every attachment; only those of the
 * attachment in use are loaded (the others' autoload is turned off), so a
 * kernel without BPF tracing programs still loads the tracepoints' or the
 * uprobes'.  `auto` tries fentry/fexit first and falls back to the
 * tracepoints, keeping the reason.  The tracepoints are found through
 * tracefs; a machine that has not mounted it gets it mounted at
 * /sys/kernel/tracing (what systemd does on most distributions).  The
 * attachments are file descriptors of the agent: if the agent dies, even by
 * SIGKILL, the kernel detaches them, and nothing is left in the watched
 * program, which was never touched.
 */
#include "kernel_observer.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "agent/capture/capture.h"
#include "agent/common/clock.h"
#include "kobs_start.h"
#include "link_reaper.h"
#include "wait_probes.h"
#include "bpf/wait_observer.h"
#include "wait_observer.skel.h"

/* The kernel's page is hw_shared_page, field for field. */
_Static_assert(sizeof(struct hw_kobs_page) == sizeof(hw_shared_page), "page size");
_Static_assert(offsetof(struct hw_kobs_page, slots) == offsetof(hw_shared_page, slots), "slots");
_Static_assert(sizeof(struct hw_kobs_slot) == sizeof(hw_loop_slot), "slot size");
_Static_assert(offsetof(struct hw_kobs_slot, seq) == offsetof(hw_loop_slot, seq), "seq");
_Static_assert(offsetof(struct hw_kobs_slot, busy_start_ns) == offsetof(hw_loop_slot, busy_start_ns), "start");
_Static_assert(offsetof(struct hw_kobs_slot, activity) == offsetof(hw_loop_slot, activity), "activity");
_Static_assert(offsetof(struct hw_kobs_slot, tid) == offsetof(hw_loop_slot, tid), "tid");
_Static_assert(HW_KOBS_SLOTS - 1 == HW_PAGE_SLOTS, "slot count");
_Static_assert(offsetof(struct hw_kobs_page, next_slot) == offsetof(hw_shared_page, kernel_next_slot), "next_slot");
_Static_assert(HW_KOBS_BEFORE_WAITING == HW_ACTIVITY_BEFORE_WAITING, "activity values");
_Static_assert(HW_KOBS_AFTER_WAITING == HW_ACTIVITY_AFTER_WAITING, "activity values");

#define TRACEFS "/sys/kernel/tracing"

#define MAX_PENDING_CHILDREN 1024
#define MAX_SHARED_LINKS 32 /* fentry/fexit or tracepoint programs */
#define STARTS_BYTES ((size_t)HW_KOBS_MAX_PAGES * HW_KOBS_SLOTS * sizeof(struct hw_kobs_stretch_start))
_Static_assert(sizeof(struct hw_kobs_stretch_start) == 64, "a stretch start per cache line");
_Static_assert(STARTS_BYTES % 4096 == 0, "the stretch starts fill whole pages");

/* The uprobes of one watched process (--attach uprobe). */
typedef struct process_probes {
    struct bpf_link *links[HW_WAIT_PROBE_MAX];
    size_t count;
    hw_wait_probe where[HW_WAIT_PROBE_MAX]; /* the places probed, for the processes it forks */
    size_t where_count;
} process_probes;

struct hw_kernel_observer {
    struct hw_wait_observer *skel;
    hw_kobs_attach attach; /* fentry, tracepoint or uprobe: never auto */
    char fentry_refusal[256]; /* auto fell back to the tracepoints: why */
    struct bpf_link *links[MAX_SHARED_LINKS]; /* fentry or tracepoint: the wait calls' programs */
    size_t link_count;
    process_probes *probes[HW_KOBS_MAX_PAGES]; /* uprobe: per page */
    hw_link_reaper *reaper;                    /* uprobe: destroys a process's probes off the watch thread */
    struct bpf_link *fork_link;                /* with --follow (and --all): the fork tracepoint */
    struct bpf_link *exec_link;                /* with --all: the exec tracepoint */
    hw_shared_page *pages; /* HW_KOBS_MAX_PAGES pages, mapped from the BPF map */
    const struct hw_kobs_stretch_start *starts; /* HW_KOBS_MAX_PAGES * HW_KOBS_SLOTS, mapped read-only */
    bool used[HW_KOBS_MAX_PAGES];
    bool wait_end_unseen[HW_KOBS_MAX_PAGES]; /* fentry: found in a wait whose end fexit cannot see */
    struct ring_buffer *children; /* new processes of watched ones (--follow) */
    pid_t pending[MAX_PENDING_CHILDREN];
    size_t pending_count;
    pid_t pending_execs[MAX_PENDING_CHILDREN]; /* --all: processes that exec'd */
    size_t pending_exec_count;
};

/* News of a process: forked (a child of a watched one), or exec'd
 * (HW_KOBS_EXEC_NEWS). */
static int note_child(void *ctx, void *data, size_t size)
{
    hw_kernel_observer *k = ctx;
    uint32_t news;
    if (size < sizeof news)
        return 0;
    memcpy(&news, data, sizeof news);
    bool exec = (news & HW_KOBS_EXEC_NEWS) != 0;
    pid_t pid = (pid_t)(news & ~HW_KOBS_EXEC_NEWS);
    pid_t *list = exec ? k->pending_execs : k->pending;
    size_t *count = exec ? &k->pending_exec_count : &k->pending_count;
    if (pid > 0 && *count < MAX_PENDING_CHILDREN)
        list[(*count)++] = pid; /* a full list drops the rest: found by the next scan, or unwatched */
    return 0;
}

static char last_libbpf_message[256];

/* libbpf's messages are kept, not printed: the user gets one sentence. */
static int keep_libbpf_message(enum libbpf_print_level level, const char *fmt, va_list args)
{
    if (level == LIBBPF_WARN)
        vsnprintf(last_libbpf_message, sizeof last_libbpf_message, fmt, args);
    return 0;
}

static bool tracefs_ready(void)
{
    struct stat st;
    return stat(TRACEFS "/events/syscalls", &st) == 0 || stat("/sys/kernel/debug/tracing/events/syscalls", &st) == 0;
}

static int say(char *why, size_t len, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, len, fmt, ap);
    va_end(ap);
    return rc;
}

#define CAP_PERFMON_BIT 38
#define CAP_BPF_BIT 39
#define CAP_SYS_ADMIN_BIT 21

/* Does this process hold CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN, which
 * older kernels asked for instead)?  From /proc/self/status's CapEff. */
static bool may_load_bpf(void)
{
    return (hw_has_capability(CAP_BPF_BIT) && hw_has_capability(CAP_PERFMON_BIT)) || hw_has_capability(CAP_SYS_ADMIN_BIT);
}

/* The sentence for a refusal for want of rights: which of CAP_BPF and
 * CAP_PERFMON this process lacks (as far as CapEff tells), and how to get
 * them. */
static int say_needs_capabilities(char *why, size_t len)
{
    bool bpf = hw_has_capability(CAP_BPF_BIT), perfmon = hw_has_capability(CAP_PERFMON_BIT);
    return say(why, len, -EPERM,
               "the kernel observer needs CAP_BPF and CAP_PERFMON (or root)%s%s%s: run hangwatch with sudo, give it "
               "the capabilities ('setcap cap_bpf,cap_perfmon,cap_sys_ptrace+ep hangwatch'), or start the container "
               "with --cap-add BPF --cap-add PERFMON --cap-add SYS_PTRACE",
               bpf && perfmon ? "" : "; this process lacks ", !bpf ? (perfmon ? "CAP_BPF" : "CAP_BPF and ") : "",
               !perfmon ? "CAP_PERFMON" : "");
}

/* tracefs, mounted if it is not (what systemd does); 0 or -errno with why. */
static int need_tracefs(char *why, size_t len, const char *for_what)
{
    if (tracefs_ready() || mount("nodev", TRACEFS, "tracefs", 0, NULL) == 0 || tracefs_ready())
        return 0;
    int e = errno;
    return say(why, len, e == EPERM ? -EPERM : -ENOTSUP,
               "%s needs tracefs and it could not be mounted (%s): run 'mount -t tracefs nodev " TRACEFS "' as root",
               for_what, strerror(e));
}

/* Which attachment a program of the object belongs to, by its section. */
/* Which attachment a program is of; *is_news: the fork and exec
 * tracepoints', loaded with any and attached when asked for. */
static hw_kobs_attach program_attachment(const struct bpf_program *prog, bool *is_news)
{
    const char *sec = bpf_program__section_name(prog);
    *is_news = strncmp(sec, "tracepoint/sched/", 17) == 0;
    if (strncmp(sec, "fentry/", 7) == 0 || strncmp(sec, "fexit/", 6) == 0)
        return HW_KOBS_ATTACH_FENTRY;
    if (strncmp(sec, "uprobe", 6) == 0)
        return HW_KOBS_ATTACH_UPROBE;
    return HW_KOBS_ATTACH_TRACEPOINT;
}

/* The kernel function a fentry/fexit program attaches to. */
static const char *fentry_target(const struct bpf_program *prog)
{
    const char *slash = strchr(bpf_program__section_name(prog), '/');
    return slash != NULL ? slash + 1 : "";
}

/* Can fentry/fexit be had here?  0, or -errno with the reason: the kernel
 * loads no BPF tracing programs, or its BTF does not name the wait system
 * calls' functions.  Functions it lacks beyond epoll_wait's (an older
 * kernel without epoll_pwait2) are left out of `skipped`, a bit per
 * program in the object's order. */
static int fentry_available(struct hw_wait_observer *skel, uint64_t *skipped, char *why, size_t len)
{
    *skipped = 0;
    if (libbpf_probe_bpf_prog_type(BPF_PROG_TYPE_TRACING, NULL) != 1)
        return say(why, len, -ENOTSUP, "this kernel does not load BPF tracing programs (fentry/fexit)");
    struct btf *vmlinux = btf__load_vmlinux_btf();
    if (vmlinux == NULL)
        return say(why, len, -ENOTSUP, "this kernel's BTF could not be read: %s", strerror(errno));
    int rc = 0, index = 0;
    struct bpf_program *prog;
    bpf_object__for_each_program(prog, skel->obj)
    {
        bool is_fork;
        if (program_attachment(prog, &is_fork) == HW_KOBS_ATTACH_FENTRY && index < 64 &&
            btf__find_by_name_kind(vmlinux, fentry_target(prog), BTF_KIND_FUNC) < 0) {
            if (strstr(fentry_target(prog), "sys_epoll_wait") != NULL) {
                rc = say(why, len, -ENOTSUP, "this kernel's BTF does not name %s", fentry_target(prog));
                break;
            }
            *skipped |= 1ull << index;
        }
        index++;
    }
    btf__free(vmlinux);
    return rc;
}

/* Open the object with only `attach`'s programs (and the fork
 * tracepoint's) to be loaded, load it, and attach the wait calls'
 * programs (the uprobes go in each process as it is watched).  0 or an
 * errno value, with the reason in `why`. */
static int load_as(hw_kernel_observer *k, hw_kobs_attach attach, char *why, size_t len)
{
    k->attach = attach;
    k->skel = hw_wait_observer__open();
    if (k->skel == NULL)
        return say(why, len, errno ? errno : EINVAL, "the kernel observer could not be opened: %s", strerror(errno));
    uint64_t skipped = 0;
    if (attach == HW_KOBS_ATTACH_FENTRY) {
        int rc = fentry_available(k->skel, &skipped, why, len);
        if (rc != 0)
            return -rc;
    } else if (attach == HW_KOBS_ATTACH_TRACEPOINT) {
        int rc = need_tracefs(why, len, "the kernel observer");
        if (rc != 0)
            return -rc;
    }
    int index = 0;
    struct bpf_program *prog;
    bpf_object__for_each_program(prog, k->skel->obj)
    {
        bool is_fork;
        hw_kobs_attach belongs = program_attachment(prog, &is_fork);
        bool wanted = is_fork || (belongs == attach && !(index < 64 && (skipped >> index & 1)));
        bpf_program__set_autoload(prog, wanted);
        index++;
    }
    last_libbpf_message[0] = '\0';
    if (hw_wait_observer__load(k->skel) != 0) {
        int e = errno ? errno : EINVAL;
        return say(why, len, e, "it could not be loaded: %s%s%s", strerror(e),
                   last_libbpf_message[0] ? "; libbpf: " : "", last_libbpf_message);
    }
    if (attach == HW_KOBS_ATTACH_UPROBE)
        return 0;
    bpf_object__for_each_program(prog, k->skel->obj)
    {
        bool is_fork;
        if (!bpf_program__autoload(prog) || program_attachment(prog, &is_fork) != attach || is_fork)
            continue;
        struct bpf_link *link = k->link_count < MAX_SHARED_LINKS ? bpf_program__attach(prog) : NULL;
        if (link == NULL) {
            int e = errno ? errno : ENOSPC;
            return say(why, len, e, "%s could not be attached: %s%s%s", bpf_program__section_name(prog), strerror(e),
                       last_libbpf_message[0] ? "; libbpf: " : "", last_libbpf_message);
        }
        k->links[k->link_count++] = link;
    }
    return 0;
}

/* (At the agent's exit hw_kobs_close has taken the links already.) */
static void unload(hw_kernel_observer *k)
{
    for (size_t i = 0; i < k->link_count; i++)
        bpf_link__destroy(k->links[i]);
    k->link_count = 0;
    hw_wait_observer__destroy(k->skel);
    k->skel = NULL;
}

/* libbpf's messages end with a newline. */
static void trim_end(char *text)
{
    size_t n = strlen(text);
    while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == ' '))
        text[--n] = '\0';
}

int hw_kobs_open(hw_kernel_observer **out, hw_kobs_attach attach, char *why, size_t len)
{
    *out = NULL;
    if (!may_load_bpf())
        return say_needs_capabilities(why, len);
    struct stat st;
    if (stat("/sys/kernel/btf/vmlinux", &st) != 0)
        return say(why, len, -ENOTSUP,
                   "this kernel has no BTF (/sys/kernel/btf/vmlinux), which the kernel observer needs "
                   "(CONFIG_DEBUG_INFO_BTF)");
    if (attach == HW_KOBS_ATTACH_UPROBE && stat("/sys/bus/event_source/devices/uprobe/type", &st) != 0)
        return say(why, len, -ENOTSUP, "--attach uprobe: this kernel has no uprobe PMU (CONFIG_UPROBE_EVENTS)");
    libbpf_set_print(keep_libbpf_message);
    hw_kernel_observer *k = calloc(1, sizeof *k);
    if (k == NULL)
        return say(why, len, -ENOMEM, "out of memory");
    char reason[512] = "";
    int e = load_as(k, attach == HW_KOBS_ATTACH_AUTO ? HW_KOBS_ATTACH_FENTRY : attach, reason, sizeof reason);
    if (e != 0 && attach == HW_KOBS_ATTACH_AUTO && e != EPERM) {
        trim_end(reason);
        snprintf(k->fentry_refusal, sizeof k->fentry_refusal, "%s", reason);
        unload(k);
        e = load_as(k, HW_KOBS_ATTACH_TRACEPOINT, reason, sizeof reason);
    }
    if (e == 0) {
        void *m = mmap(NULL, (size_t)HW_KOBS_MAX_PAGES * HW_PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED,
                       bpf_map__fd(k->skel->maps.pages), 0);
        if (m == MAP_FAILED) {
            e = errno;
            snprintf(reason, sizeof reason, "its pages could not be mapped: %s", strerror(e));
        } else {
            k->pages = m;
        }
    }
    if (e == 0) {
        void *m = mmap(NULL, STARTS_BYTES, PROT_READ, MAP_SHARED, bpf_map__fd(k->skel->maps.stretch_starts), 0);
        if (m == MAP_FAILED) {
            e = errno;
            snprintf(reason, sizeof reason, "its stretch starts could not be mapped: %s", strerror(e));
        } else {
            k->starts = m;
        }
    }
    if (e == 0) {
        k->children = ring_buffer__new(bpf_map__fd(k->skel->maps.new_children), note_child, k, NULL);
        if (k->children == NULL) {
            e = errno ? errno : ENOMEM;
            snprintf(reason, sizeof reason, "its ring buffer could not be made: %s", strerror(e));
        }
    }
    if (e == 0 && k->attach == HW_KOBS_ATTACH_UPROBE)
        k->reaper = hw_link_reaper_start(); /* NULL: probes are destroyed on the watch thread */
    if (e != 0) {
        if (e == EPERM)
            say_needs_capabilities(why, len);
        else
            say(why, len, 0, "the kernel observer cannot be attached %s%s: %s",
                attach == HW_KOBS_ATTACH_UPROBE ? "with " : "to the ",
                attach == HW_KOBS_ATTACH_FENTRY  ? "wait system calls' functions (--attach fentry)"
                : attach == HW_KOBS_ATTACH_UPROBE ? "uprobes"
                                                  : "wait system calls' tracepoints",
                reason);
        trim_end(why);
        hw_kobs_close(k);
        return -e;
    }
    *out = k;
    return 0;
}

/* The page's place among the observer's pages (the page is one of them). */
static size_t page_index(const hw_kernel_observer *k, const hw_shared_page *page)
{
    return (size_t)((const char *)page - (const char *)k->pages) / HW_PAGE_SIZE;
}

const char *hw_kobs_attach_kind_name(hw_kobs_attach attach)
{
    switch (attach) {
    case HW_KOBS_ATTACH_FENTRY:
        return "fentry";
    case HW_KOBS_ATTACH_UPROBE:
        return "uprobe";
    case HW_KOBS_ATTACH_TRACEPOINT:
        return "tracepoint";
    case HW_KOBS_ATTACH_AUTO:
        break;
    }
    return "auto";
}

const char *hw_kobs_attach_name(const hw_kernel_observer *k)
{
    return hw_kobs_attach_kind_name(k != NULL ? k->attach : HW_KOBS_ATTACH_TRACEPOINT);
}

const char *hw_kobs_fentry_refusal(const hw_kernel_observer *k)
{
    return k != NULL && k->fentry_refusal[0] ? k->fentry_refusal : NULL;
}

/* A process's uprobes go, destroyed by the reaper (each waits for a grace
 * period of the kernel's: link_reaper.h). */
static void remove_probes(hw_kernel_observer *k, size_t index)
{
    process_probes *p = k->probes[index];
    if (p == NULL)
        return;
    hw_link_reaper_give(k->reaper, p->links, p->count);
    free(p);
    k->probes[index] = NULL;
}

/* --follow under fentry or uprobes: the fork tracepoint, attached at the
 * first process that asks (the tracepoint attachment has it already). */
static bool attach_fork_tracepoint(hw_kernel_observer *k, char *why, size_t len)
{
    if (k->fork_link != NULL)
        return true;
    if (need_tracefs(why, len, "--follow") != 0)
        return false;
    k->fork_link = bpf_program__attach(k->skel->progs.on_fork);
    if (k->fork_link == NULL) {
        say(why, len, 0, "--follow: the fork tracepoint could not be attached: %s", strerror(errno));
        return false;
    }
    return true;
}

/* --attach uprobe: probes in `pid`'s wait functions, for page `index`. */
/* The probes of `pid`'s parent, when it is watched with probes, or NULL. */
static const process_probes *parent_probes(const hw_kernel_observer *k, pid_t pid)
{
    hw_task_stat st;
    if (hw_task_stat_read(pid, 0, &st) != 0 || st.ppid <= 0)
        return NULL;
    for (size_t i = 0; i < HW_KOBS_MAX_PAGES; i++) {
        const hw_shared_page *page = (const hw_shared_page *)((const char *)k->pages + i * HW_PAGE_SIZE);
        if (k->used[i] && k->probes[i] != NULL && page->pid == st.ppid)
            return k->probes[i];
    }
    return NULL;
}

/*
 * `waiting`: the wait call the process was found blocked in, or NULL.
 * `forked`: a new process of a watched one.  Such a child is probed where
 * its parent is (the files it maps right after the fork are the parent's),
 * not where its own maps say: it may be in the middle of an exec, its new
 * image not mapped yet ("no wait function"), and a probe is on a file,
 * not on a process's mapping of it: once the exec'd program maps the same
 * C library, the kernel puts the child's probes in it.
 */
static bool put_probes(hw_kernel_observer *k, size_t index, pid_t pid, const char *program,
                       const hw_task_syscall_info *waiting, bool forked, char *why, size_t len)
{
    hw_wait_probe found[HW_WAIT_PROBE_MAX];
    const process_probes *parent = forked && program == NULL ? parent_probes(k, pid) : NULL;
    int n = 0;
    if (parent != NULL) {
        memcpy(found, parent->where, parent->where_count * sizeof *found);
        n = (int)parent->where_count;
    } else {
        n = hw_wait_probes_find(pid, found, HW_WAIT_PROBE_MAX, why, len);
    }
    if (program != NULL) {
        /* Before its exec: what it maps now is ours (the same system
         * libc a dynamic program maps); its own file comes too. */
        size_t count = n > 0 ? (size_t)n : 0;
        hw_wait_probes_in_file(program, found, HW_WAIT_PROBE_MAX, &count);
        n = (int)count;
        if (n == 0)
            snprintf(why, len, "no wait function with a system call of its own in %s or the C library", program);
    }
    if (n <= 0)
        return false;
    if (program == NULL && waiting != NULL) {
        /* Its wait's end is seen only if it waits in a probed function. */
        uint64_t pc = waiting->pc;
        bool probed = false;
        for (int i = 0; i < n; i++)
            probed |= !found[i].entry && found[i].address == pc;
        if (!probed) {
            say(why, len, 0,
                "it is blocked in a wait system call outside the wait functions --attach uprobe probes (a raw "
                "syscall() or io_uring loop, at 0x%" PRIx64 "): its loop cannot be seen that way; use --attach "
                "tracepoint",
                pc);
            return false;
        }
    }
    process_probes *p = calloc(1, sizeof *p);
    if (p == NULL) {
        say(why, len, 0, "out of memory");
        return false;
    }
    k->probes[index] = p;
    hw_link_reaper_pause(k->reaper, true);
    for (int i = 0; i < n; i++) {
        LIBBPF_OPTS(bpf_uprobe_opts, opts, .retprobe = false, .bpf_cookie = found[i].call);
        struct bpf_program *prog =
            found[i].entry ? k->skel->progs.wait_function_entry : k->skel->progs.wait_function_syscall_done;
        struct bpf_link *link = bpf_program__attach_uprobe_opts(prog, pid, found[i].path, (size_t)found[i].offset, &opts);
        if (link == NULL) {
            int e = errno;
            say(why, len, 0, "a uprobe in %s (%s, offset 0x%" PRIx64 ") could not be attached: %s%s", found[i].path,
                found[i].function, found[i].offset, strerror(e),
                (e == EACCES || e == EPERM) && !hw_has_capability(CAP_SYS_ADMIN_BIT)
                    ? " (this kernel's uprobe events ask for CAP_SYS_ADMIN: CAP_PERFMON is not enough)"
                    : "");
            hw_link_reaper_pause(k->reaper, false);
            remove_probes(k, index);
            return false;
        }
        p->links[p->count++] = link;
    }
    hw_link_reaper_pause(k->reaper, false);
    memcpy(p->where, found, (size_t)n * sizeof *found);
    p->where_count = (size_t)n;
    return true;
}

static const hw_shared_page *watch_process(hw_kernel_observer *k, pid_t pid, const char *program, bool every_wait,
                                           bool loop_threads, bool follow, hw_kobs_start start, char *why, size_t len);

const hw_shared_page *hw_kobs_watch(hw_kernel_observer *k, pid_t pid, bool every_wait, bool loop_threads,
                                    bool follow, hw_kobs_start start, char *why, size_t len)
{
    return watch_process(k, pid, NULL, every_wait, loop_threads, follow, start, why, len);
}

const hw_shared_page *hw_kobs_watch_launch(hw_kernel_observer *k, pid_t pid, const char *program, bool every_wait,
                                           bool loop_threads, bool follow, char *why, size_t len)
{
    return watch_process(k, pid, program, every_wait, loop_threads, follow, HW_KOBS_START_LAUNCHING, why, len);
}

/* Only to test what kobs_start.h guards against: the look at a thread and
 * its entry in the map this many milliseconds apart (at most 2 s), so that
 * the thread surely moves in between. */
static void delay_for_tests(void)
{
    const char *v = getenv("HANGWATCH_KOBS_LOOK_DELAY_MS");
    long ms = v != NULL ? strtol(v, NULL, 10) : 0;
    if (ms > 0 && ms <= 2000) {
        struct timespec t = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
        nanosleep(&t, NULL);
    }
}

static const hw_shared_page *watch_process(hw_kernel_observer *k, pid_t pid, const char *program, bool every_wait,
                                           bool loop_threads, bool follow, hw_kobs_start start, char *why, size_t len)
{
    unsigned index = 0;
    while (index < HW_KOBS_MAX_PAGES && k->used[index])
        index++;
    if (index == HW_KOBS_MAX_PAGES) {
        say(why, len, 0, "the kernel observer already watches %d processes", HW_KOBS_MAX_PAGES);
        return NULL;
    }
    hw_shared_page *page = (hw_shared_page *)((char *)k->pages + (size_t)index * HW_PAGE_SIZE);
    memset(page, 0, sizeof *page);
    page->magic = HW_PAGE_MAGIC;
    page->version = HW_PAGE_VERSION;
    page->page_size = HW_PAGE_SIZE;
    page->pid = pid;
    page->slot_count = HW_PAGE_SLOTS;
    page->kernel_next_slot = 1; /* slot 0 is the main thread's */
    page->clock = HW_PAGE_CLOCK_MONOTONIC; /* bpf_ktime_get_ns */
    page->flags = HW_PAGE_FLAG_LOOP_WAITS;
    struct hw_kobs_thread t = {.page = index, .slot = 0, .every_wait = every_wait};
    hw_loop_slot *slot = &page->slots[0];
    hw_task_syscall_info waiting = {0};
    bool restart_wait = false;
    bool found_waiting = (start == HW_KOBS_START_AS_FOUND || start == HW_KOBS_START_QUIET) &&
                         hw_kobs_is_waiting_now(pid, &waiting);
    delay_for_tests();
    if (found_waiting) {
        /* Blocked in a wait call now: its exit will be seen, except by
         * fexit, whose trampoline only returns from calls made after it
         * was attached: it is stopped once more below, its entry in the
         * map, and the call it goes on with is entered anew. */
        t.in_loop_wait = 1;
        hw_kobs_prime_loop_wait(&t, slot, &waiting);
        k->wait_end_unseen[index] = k->attach == HW_KOBS_ATTACH_FENTRY;
        restart_wait = k->wait_end_unseen[index];
        atomic_store_explicit(&slot->activity, HW_ACTIVITY_BEFORE_WAITING, memory_order_relaxed);
    } else if (start == HW_KOBS_START_QUIET) {
        /* not a loop until it waits: idle (seq 0) until its first wait ends */
        k->wait_end_unseen[index] = false;
        atomic_store_explicit(&slot->activity, HW_ACTIVITY_BEFORE_WAITING, memory_order_relaxed);
    } else {
        k->wait_end_unseen[index] = false;
        atomic_store_explicit(&slot->busy_start_ns, hw_monotonic_ns(), memory_order_relaxed);
        atomic_store_explicit(&slot->activity, HW_ACTIVITY_AFTER_WAITING, memory_order_relaxed);
        atomic_store_explicit(&slot->seq, 1, memory_order_release);
        if (start == HW_KOBS_START_LAUNCHING)
            atomic_store_explicit(&page->flags, HW_PAGE_FLAG_LAUNCHING | HW_PAGE_FLAG_LOOP_WAITS, memory_order_release);
    }
    atomic_store_explicit(&slot->tid, pid, memory_order_release);
    __u32 tid = (__u32)pid;
    if (bpf_map__update_elem(k->skel->maps.threads, &tid, sizeof tid, &t, sizeof t, BPF_ANY) != 0) {
        say(why, len, 0, "the kernel observer cannot watch pid %d: %s", (int)pid, strerror(errno));
        memset(page, 0, sizeof *page);
        return NULL;
    }
    struct hw_kobs_process proc = {
        .page = index, .loop_threads = loop_threads, .every_wait = every_wait, .follow = follow};
    if (bpf_map__update_elem(k->skel->maps.processes, &tid, sizeof tid, &proc, sizeof proc, BPF_ANY) != 0) {
        say(why, len, 0, "the kernel observer cannot watch pid %d: %s", (int)pid, strerror(errno));
        bpf_map__delete_elem(k->skel->maps.threads, &tid, sizeof tid, BPF_ANY);
        memset(page, 0, sizeof *page);
        return NULL;
    }
    if ((follow && !attach_fork_tracepoint(k, why, len)) ||
        (k->attach == HW_KOBS_ATTACH_UPROBE &&
         !put_probes(k, index, pid, program, found_waiting ? &waiting : NULL, start == HW_KOBS_START_LAUNCHING,
                     why, len))) {
        bpf_map__delete_elem(k->skel->maps.processes, &tid, sizeof tid, BPF_ANY);
        bpf_map__delete_elem(k->skel->maps.threads, &tid, sizeof tid, BPF_ANY);
        memset(page, 0, sizeof *page);
        return NULL;
    }
    k->used[index] = true;
    /* Its entry is in the map now: what the thread did since the look is
     * made true (kobs_start.h), and under fentry the wait it was found in
     * is entered again, its end then seen. */
    if (start != HW_KOBS_START_LAUNCHING &&
        hw_kobs_settle_start(k->skel->maps.threads, pid, slot, found_waiting, &waiting,
                             start == HW_KOBS_START_QUIET, restart_wait) &&
        restart_wait)
        k->wait_end_unseen[index] = false;
    return page;
}

bool hw_kobs_wait_end_unseen(const hw_kernel_observer *k, const hw_shared_page *page)
{
    if (!hw_kobs_owns(k, page))
        return false;
    return k->wait_end_unseen[page_index(k, page)];
}

bool hw_kobs_stretch_start(const hw_kernel_observer *k, const hw_shared_page *page, unsigned slot, uint64_t seq,
                           hw_kobs_stretch_counters *out)
{
    if (!hw_kobs_owns(k, page) || k->starts == NULL || slot >= HW_PAGE_SLOTS || !(seq & 1))
        return false;
    const _Atomic uint64_t *slot_seq = &page->slots[slot].seq;
    const volatile struct hw_kobs_stretch_start *start = &k->starts[page_index(k, page) * HW_KOBS_SLOTS + slot];
    /* loop_state.h's order, as wait_observer.h says: the start's seq, then
     * its counters, then the slot's seq again */
    if (atomic_load_explicit(slot_seq, memory_order_acquire) != seq || start->seq != seq)
        return false;
    atomic_thread_fence(memory_order_acquire);
    out->on_cpu_ns = start->on_cpu_ns;
    out->runqueue_ns = start->runqueue_ns;
    out->has_runqueue = (start->flags & HW_KOBS_STARTS_SCHEDSTAT) != 0;
    out->voluntary_switches = start->voluntary_switches;
    out->major_faults = start->major_faults;
    out->utime_ns = start->utime_ns;
    out->stime_ns = start->stime_ns;
    atomic_thread_fence(memory_order_acquire);
    return start->seq == seq && atomic_load_explicit(slot_seq, memory_order_acquire) == seq;
}

bool hw_kobs_owns(const hw_kernel_observer *k, const hw_shared_page *page)
{
    const char *p = (const char *)page, *base = k ? (const char *)k->pages : NULL;
    return base != NULL && p >= base && p < base + (size_t)HW_KOBS_MAX_PAGES * HW_PAGE_SIZE;
}

void hw_kobs_forget(hw_kernel_observer *k, const hw_shared_page *page)
{
    if (!hw_kobs_owns(k, page))
        return;
    size_t index = page_index(k, page);
    __u32 pid = (__u32)page->pid;
    bpf_map__delete_elem(k->skel->maps.processes, &pid, sizeof pid, BPF_ANY);
    for (unsigned s = 0; s < HW_PAGE_SLOTS; s++) {
        __u32 tid = (__u32)atomic_load_explicit(&page->slots[s].tid, memory_order_relaxed);
        if (tid != 0)
            bpf_map__delete_elem(k->skel->maps.threads, &tid, sizeof tid, BPF_ANY);
    }
    remove_probes(k, index);
    memset((void *)page, 0, HW_PAGE_SIZE);
    k->used[index] = false;
}

bool hw_kobs_candidate_add(hw_kernel_observer *k, pid_t pid)
{
    if (k == NULL || pid <= 0)
        return false;
    __u32 key = (__u32)pid;
    struct hw_kobs_process proc = {.candidate = 1};
    /* never over a watched process's entry */
    return bpf_map__update_elem(k->skel->maps.processes, &key, sizeof key, &proc, sizeof proc, BPF_NOEXIST) == 0;
}

bool hw_kobs_candidate_waited(const hw_kernel_observer *k, pid_t pid)
{
    if (k == NULL || pid <= 0)
        return false;
    __u32 key = (__u32)pid;
    struct hw_kobs_process proc;
    return bpf_map__lookup_elem(k->skel->maps.processes, &key, sizeof key, &proc, sizeof proc, 0) == 0 &&
           proc.candidate && proc.waited;
}

void hw_kobs_candidate_remove(hw_kernel_observer *k, pid_t pid)
{
    if (k == NULL || pid <= 0)
        return;
    __u32 key = (__u32)pid;
    struct hw_kobs_process proc;
    if (bpf_map__lookup_elem(k->skel->maps.processes, &key, sizeof key, &proc, sizeof proc, 0) == 0 &&
        proc.candidate)
        bpf_map__delete_elem(k->skel->maps.processes, &key, sizeof key, BPF_ANY);
}

void hw_kobs_thread_ended(hw_kernel_observer *k, const hw_shared_page *page, unsigned slot)
{
    if (!hw_kobs_owns(k, page) || slot >= HW_PAGE_SLOTS)
        return;
    hw_loop_slot *s = (hw_loop_slot *)&page->slots[slot]; /* the agent's own page */
    __u32 tid = (__u32)atomic_load_explicit(&s->tid, memory_order_relaxed);
    if (tid != 0)
        bpf_map__delete_elem(k->skel->maps.threads, &tid, sizeof tid, BPF_ANY);
    uint64_t seq = atomic_load_explicit(&s->seq, memory_order_relaxed);
    if (seq & 1u)
        atomic_store_explicit(&s->seq, seq + 1, memory_order_release);
    atomic_store_explicit(&s->tid, 0, memory_order_release);
}

int hw_kobs_children_fd(hw_kernel_observer *k)
{
    return k && k->children ? ring_buffer__epoll_fd(k->children) : -1;
}

bool hw_kobs_watch_execs(hw_kernel_observer *k, char *why, size_t len)
{
    if (k->exec_link != NULL)
        return true;
    if (need_tracefs(why, len, "--all") != 0)
        return false;
    k->exec_link = bpf_program__attach(k->skel->progs.on_exec);
    if (k->exec_link == NULL) {
        say(why, len, 0, "--all: the exec tracepoint could not be attached: %s", strerror(errno));
        return false;
    }
    return true;
}

/* The ring's news read, then up to `max` pids of one list (`exec`: the
 * processes that exec'd, else the new children) moved into `out`. */
static size_t take_pending(hw_kernel_observer *k, bool exec, pid_t *out, size_t max)
{
    if (k == NULL || k->children == NULL)
        return 0;
    ring_buffer__consume(k->children);
    pid_t *list = exec ? k->pending_execs : k->pending;
    size_t *count = exec ? &k->pending_exec_count : &k->pending_count;
    size_t n = *count < max ? *count : max;
    memcpy(out, list, n * sizeof *out);
    memmove(list, list + n, (*count - n) * sizeof *list);
    *count -= n;
    return n;
}

size_t hw_kobs_take_execs(hw_kernel_observer *k, pid_t *out, size_t max)
{
    return take_pending(k, true, out, max);
}

size_t hw_kobs_take_children(hw_kernel_observer *k, pid_t *out, size_t max)
{
    return take_pending(k, false, out, max);
}

void hw_kobs_close(hw_kernel_observer *k)
{
    if (k == NULL)
        return;
    ring_buffer__free(k->children);
    for (size_t i = 0; i < HW_KOBS_MAX_PAGES; i++)
        remove_probes(k, i);
    /* One batch: the uprobes the reaper had not destroyed yet, the fork
     * and exec programs' links, and the wait calls'. */
    struct bpf_link **pending;
    size_t n;
    hw_link_reaper_stop(k->reaper, &pending, &n);
    struct bpf_link *shared[MAX_SHARED_LINKS + 2];
    size_t m = 0;
    for (size_t i = 0; i < k->link_count; i++)
        shared[m++] = k->links[i];
    shared[m++] = k->fork_link;
    shared[m++] = k->exec_link;
    struct bpf_link **all = n > 0 ? realloc(pending, (n + m) * sizeof *all) : NULL;
    if (all != NULL) {
        memcpy(all + n, shared, m * sizeof *all);
        hw_links_destroy_at_exit(all, n + m);
        free(all);
    } else {
        if (n > 0) /* no room to join them: a process for these too */
            hw_links_destroy_at_exit(pending, n);
        free(pending);
        hw_links_destroy_at_exit(shared, m);
    }
    k->link_count = 0;
    if (k->pages)
        munmap(k->pages, (size_t)HW_KOBS_MAX_PAGES * HW_PAGE_SIZE);
    if (k->starts)
        munmap((void *)k->starts, STARTS_BYTES);
    unload(k);
    free(k);
}
