/*
 * link_reaper.h - detaching the kernel observer's uprobes off the watch
 * thread, and all its programs at exit without waiting.
 *
 * Closing a uprobe's perf event waits for the kernel's RCU grace period
 * (uprobe_unregister's synchronize): about 100 ms each on a busy kernel,
 * and a process has some twenty of them (an entry and each place after a
 * `syscall` in seven wait functions).  Done by the watch thread when a
 * process exits, that blocked it for two seconds: the other processes'
 * waits were not looked at, and one whose exit came meanwhile was taken
 * for a hang.  The reaper is a thread that only destroys the links it is
 * given; the watch thread hands them over and goes on.  A link waiting to
 * be destroyed belongs to a process that is gone (or no longer watched):
 * its probes fire for nobody meanwhile.
 */
#ifndef HANGWATCH_LINK_REAPER_H
#define HANGWATCH_LINK_REAPER_H

#include <stdbool.h>
#include <stddef.h>

struct bpf_link;
typedef struct hw_link_reaper hw_link_reaper;

/* Start the reaper; NULL when its thread cannot be had (links given to a
 * NULL reaper are destroyed at once, on the caller's thread). */
hw_link_reaper *hw_link_reaper_start(void);

/* Hand over `count` links: the reaper destroys them, and the caller no
 * longer owns them.  Never blocks on the kernel. */
void hw_link_reaper_give(hw_link_reaper *r, struct bpf_link *const *links, size_t count);

/*
 * Destroy no link meanwhile (paused), or again (not).  A uprobe's attach
 * and its detach both take the kernel's one lock of trace events
 * (event_mutex), and a detach holds it through its grace period: each of a
 * new process's twenty attaches waited for one of the reaper's detaches,
 * about 100 ms, while processes --follow had seen end were being detached
 * (two seconds in all, the watch thread's, and a child that hung in them
 * was not seen).  Paused, an attach waits for the detach under way at
 * most, once.
 */
void hw_link_reaper_pause(hw_link_reaper *r, bool paused);

/* End the thread (after the link it is destroying, if any) and free the
 * reaper; the links not destroyed yet are handed back, *left (the caller's
 * to free, with its *left_count links) for hw_links_destroy_at_exit.
 * NULL `r`: none.  A `watch --duration` whose uprobes were still pending
 * (some twenty, 60-80 ms each here) ended 1.5 s late when this destroyed
 * them. */
void hw_link_reaper_stop(hw_link_reaper *r, struct bpf_link ***left, size_t *left_count);

/*
 * Detach `links` (NULL ones skipped) as the agent ends, without waiting
 * for the kernel: a process of their own holds every attachment of the
 * agent and lets them go after it has ended (link_reaper.c,
 * release_in_background); the links are only freed here, their
 * descriptors left for the agent's exit to close.  Where that process
 * cannot be had, they are detached here and now.  For the agent's exit
 * only; the caller no longer owns the links.
 */
#define HW_DETACHING_COMM "hw-detaching" /* that process's name while it lives */
void hw_links_destroy_at_exit(struct bpf_link **links, size_t n);

#endif
