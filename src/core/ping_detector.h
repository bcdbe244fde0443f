/*
 * ping_detector.h - the sub-thread ping detector (ANREye, seeds/000 and
 * seeds/002), kept so that every approach the seeds describe can be run
 * and compared (`--detector ping`).
 *
 * A watcher posts a tiny task to the loop, sleeps for the threshold, and
 * then looks whether the task has run.  If not, the loop is declared hung
 * and its stack is captured; the watcher then waits for the late answer
 * before it posts again.  An answered ping is followed by the next one as
 * soon as the threshold's sleep is over, so the loop gets one ping per
 * threshold.
 *
 * Its known flaws are kept, because they are what the comparison is about:
 * a stall that began before the ping was posted is only measured from the
 * post (a 2.5 s stall pinged 0.8 s in is never seen), and a ping queued
 * behind many short tasks times out although no single task was long.
 *
 * Who posts and who answers is the caller's business (the agent posts
 * through the program's own post function, or takes the loop's next wait
 * as the answer).  Pure code: the caller supplies the time and says whether
 * the current ping has been answered.
 */
#ifndef HANGWATCH_PING_DETECTOR_H
#define HANGWATCH_PING_DETECTOR_H

#include <stdbool.h>
#include <stdint.h>

typedef struct hw_ping_detector {
    uint64_t timeout_ns;     /* the sleep: the hang threshold */
    uint64_t answer_poll_ns; /* after a miss, how often to look for the answer */
    uint64_t token;          /* the current ping's number (1, 2, ...); 0 = none yet */
    uint64_t posted_ns;      /* when the current ping was posted */
    bool outstanding;        /* the current ping has not been seen answered */
    bool missed;             /* ... and its timeout has been reported */
    uint64_t next_ns;        /* when the caller should step again */
} hw_ping_detector;

/* What one step decided; several can be true at once (a late answer and the
 * next post). */
typedef struct hw_ping_step_result {
    bool post;          /* post ping `token` now */
    bool missed;        /* the ping timed out: a hang, waited_ns so far */
    bool answered_late; /* a missed ping was answered: the hang lasted waited_ns */
    uint64_t waited_ns; /* since the ping was posted */
} hw_ping_step_result;

void hw_ping_init(hw_ping_detector *d, uint64_t timeout_ns, uint64_t now_ns);

/*
 * One look at `now_ns`.  `answered`: has the current ping's task run (ignored
 * when none is outstanding)?  `may_post`: may a new ping be posted now (the
 * semaphore detector pings only a loop that waits)?  Sets d->next_ns; a look
 * before it changes nothing but an answer.
 */
hw_ping_step_result hw_ping_step(hw_ping_detector *d, uint64_t now_ns, bool answered, bool may_post);

#endif
