/*
 * js_maps.c - naming JavaScript frames in node without V8's metadata:
 * asking V8 for its perf map when hangwatch starts such a node, and
 * removing the maps it caused at the end.
 *
 * A node with V8's postmortem metadata (js_frames.h) needs none of this:
 * under --js-frames auto (the default) the flags are added only when the
 * node `run` will start lacks it: PROG itself when it is node, else, when
 * PROG is a script (npm, a shell script that starts node), the node first
 * on PATH.  Another program is not looked into.  The flags cost node's
 * start-up and every function it compiles (docs/benchmarks.md part 6).
 *
 * V8 writes /tmp/perf-PID.map (start, size, name of each function it
 * compiles) when started with --perf-basic-prof-only-functions, and with
 * --interpreted-frames-native-stack gives interpreted functions a code
 * address of their own too; symbolizer_jit.c names JIT frames from that
 * file (jit_map_file.h).  `hangwatch run` adds both flags to NODE_OPTIONS,
 * which node reads and every other program ignores, keeping what the user
 * set there; --js-frames metadata or off leaves NODE_OPTIONS alone.
 *
 * The files are removed when hangwatch ends, for the node processes it
 * watched that are gone by then, only if hangwatch's flags caused them (the
 * user's NODE_OPTIONS did not already ask for perf maps) and only a regular
 * file owned by that process's user (the name is in /tmp, where anyone may
 * put a file).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "watch.h"
#include "agent/symbols/symbols.h"
#define MAX_NODE_PROCESSES 4096

/* Does the file begin with "#!" (npm, a shell script)? */
static bool is_script(const char *path)
{
    char head[2] = {0};
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    bool script = read(fd, head, 2) == 2 && head[0] == '#' && head[1] == '!';
    close(fd);
    return script;
}

bool js_wants_perf_map(const agent *a)
{
    switch (a->opts->js_frames) {
    case HW_JS_FRAMES_PERF_MAP:
        return true;
    case HW_JS_FRAMES_METADATA:
    case HW_JS_FRAMES_OFF:
        return false;
    case HW_JS_FRAMES_AUTO:
        break;
    }
    char *program = resolve_program(a->opts->argv[0]);
    char *node = NULL;
    if (program != NULL && hw_is_node_executable(program))
        node = program;
    else if (program != NULL && is_script(program))
        node = resolve_program("node");
    /* No node to be started: nothing to name, nothing to slow down. */
    bool wants = node != NULL && !hw_js_file_has_metadata(node);
    if (node != program)
        free(node);
    free(program);
    return wants;
}

char *js_node_options(const char *existing, bool *ours)
{
    *ours = false;
    if (existing != NULL && strstr(existing, "--perf-basic-prof") != NULL) {
        /* The user asked for perf maps already: theirs to keep. */
        return strdup(existing);
    }
    *ours = true;
    char *value = NULL;
    if (existing == NULL || existing[0] == '\0')
        return strdup(HW_JIT_MAP_NODE_FLAGS);
    if (asprintf(&value, "%s %s", existing, HW_JIT_MAP_NODE_FLAGS) < 0)
        return NULL;
    return value;
}

void js_maps_note_process(agent *a, pid_t pid, const char *executable)
{
    if (!a->js_maps_ours || !hw_is_node_executable(executable) || a->node_count >= MAX_NODE_PROCESSES)
        return;
    char path[64];
    struct stat st;
    snprintf(path, sizeof path, "/proc/%d", (int)pid);
    if (stat(path, &st) != 0)
        return;
    if (a->node_count == a->node_cap) {
        size_t ncap = a->node_cap ? a->node_cap * 2 : 16;
        struct node_process *n = realloc(a->nodes, ncap * sizeof *n);
        if (n == NULL)
            return;
        a->nodes = n;
        a->node_cap = ncap;
    }
    a->nodes[a->node_count++] = (struct node_process){.pid = pid, .uid = st.st_uid};
}

void js_maps_remove(agent *a)
{
    int tmp = a->node_count ? open("/tmp", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
    for (size_t i = 0; tmp >= 0 && i < a->node_count; i++) {
        const struct node_process *n = &a->nodes[i];
        if (kill(n->pid, 0) == 0 || errno != ESRCH)
            continue; /* still running (or its pid already another's) */
        char name[64];
        struct stat st;
        snprintf(name, sizeof name, "perf-%d.map", (int)n->pid);
        if (fstatat(tmp, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) && st.st_uid == n->uid)
            unlinkat(tmp, name, 0);
    }
    if (tmp >= 0)
        close(tmp);
    free(a->nodes);
    a->nodes = NULL;
    a->node_count = a->node_cap = 0;
}
