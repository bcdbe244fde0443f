/*
 * wait_probes.h - where to put the kernel observer's uprobes in one
 * process (--attach uprobe): the entry of each wait function its mapped
 * files define (glibc's epoll_wait, epoll_pwait, epoll_pwait2, poll, ppoll,
 * select, pselect; the same names in a static binary), and the instruction
 * right after each `syscall` instruction in them, where the system call's
 * result is in rax.
 *
 * A probe is a breakpoint written into the process's code: it must sit on
 * an instruction's first byte or it corrupts the program.  The function
 * entry is one by definition; the places after `syscall` are found by
 * decoding the function with Capstone from its first byte, instruction by
 * instruction, never by searching for the opcode's bytes.  Functions over
 * HW_WAIT_PROBE_MAX_CODE bytes, or that do not decode whole, are not
 * probed.
 */
#ifndef HANGWATCH_WAIT_PROBES_H
#define HANGWATCH_WAIT_PROBES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define HW_WAIT_PROBE_MAX 64
#define HW_WAIT_PROBE_MAX_CODE 4096
/* Executable files looked at per process: a GTK program maps some 120, a
 * browser several hundred; the C library, mapped first, comes last in the
 * maps (the highest address), so the bound must hold them all. */
#define HW_WAIT_PROBE_MAX_FILES 4096

typedef struct hw_wait_probe {
    char path[320];   /* the file, by a path the kernel resolves to it now (ours, /proc/PID/root/..., map_files) */
    uint64_t offset;  /* in the file */
    bool entry;       /* a wait function's entry, else the instruction after a syscall */
    uint64_t address; /* where it is in the process now (0: not mapped yet, a launch's program) */
    char function[24];
    uint32_t call;    /* which wait function (HW_WAIT_CALL_*, core/abi/wait_point.h) */
} hw_wait_probe;

/* The probes for `pid`, at most `max`: how many, or -errno with a sentence
 * in `why` (none found: -ENOENT). */
int hw_wait_probes_find(pid_t pid, hw_wait_probe *out, size_t max, char *why, size_t why_len);

/* The same for one ELF file, `path` (its text segment mapped or not): how
 * many probes were added to out[*count...]; for tests. */
int hw_wait_probes_in_file(const char *path, hw_wait_probe *out, size_t max, size_t *count);

#endif
