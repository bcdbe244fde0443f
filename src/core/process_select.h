/*
 * process_select.h - which processes of the machine `hangwatch watch --all`
 * watches: the selectors of its command line (--comm, --exe, --cgroup,
 * --user, and --exclude KIND=VALUE of the same forms), held to what is
 * known of a process (its comm, executable, cgroup paths and user).
 *
 * A process is chosen when, for each kind of selector given, it matches
 * one of them (kinds AND, selectors of a kind OR), and no exclusion
 * matches it.  Paths are shell patterns (fnmatch, '*' crossing '/').
 * Pure code: the facts are read by the caller.
 */
#ifndef HANGWATCH_PROCESS_SELECT_H
#define HANGWATCH_PROCESS_SELECT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef enum hw_select_kind {
    HW_SELECT_COMM,   /* the process's comm, exactly */
    HW_SELECT_EXE,    /* its executable's path, a pattern */
    HW_SELECT_CGROUP, /* one of its cgroup paths, a pattern */
    HW_SELECT_USER,   /* its real user id */
} hw_select_kind;

typedef struct hw_process_selector {
    hw_select_kind kind;
    bool exclude;
    const char *pattern; /* COMM, EXE, CGROUP */
    uid_t uid;           /* USER */
} hw_process_selector;

/* What is known of a process (NULL or "" where unknown: no pattern
 * matches an unknown fact; an exclusion then does not apply). */
#define HW_SELECT_MAX_CGROUPS 16
typedef struct hw_process_facts {
    const char *comm;
    const char *exe;
    const char *cgroups[HW_SELECT_MAX_CGROUPS]; /* the paths of /proc/PID/cgroup's lines */
    size_t cgroup_count;
    bool uid_known;
    uid_t uid;
} hw_process_facts;

bool hw_process_selected(const hw_process_selector *selectors, size_t count, const hw_process_facts *facts);

/* Parse "--exclude" values, KIND=VALUE (comm=, exe=, cgroup=, user=):
 * the kind and the value's start, or false. */
bool hw_select_exclusion_parse(const char *text, hw_select_kind *kind, const char **value);

/* A --cgroup or --exe pattern must be a path pattern: starts with '/' or
 * '*', 1 to 4095 bytes. */
bool hw_select_path_pattern_valid(const char *pattern);

#endif
