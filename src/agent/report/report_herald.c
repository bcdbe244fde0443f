/*
 * report_herald.c - the line at detection: a hang said on stderr within
 * milliseconds of its detection, before its report exists.
 *
 * The report worker runs on idle time (SCHED_IDLE), so on a busy machine,
 * or beside a program that spins on every CPU it has, its line came a
 * second or more after the hang was found (issue [23]: 1.07-1.43 s for a
 * spinning hang, +6.85 s for a 10 s spin).  What the capture knows at
 * detection needs no unwinding: who hung, for how long, where its time
 * went (the time section, settled in the capture) and the address it is
 * at, named by the module mapped there.  The watch thread formats that
 * line into a slot of a small ring (no allocation, a few microseconds) and
 * this thread, at a real-time priority (one below the watch thread's),
 * writes it with write(2), past stdio's lock: a stderr that blocks holds up this thread, never the
 * detection, and a report worker starved in its own fprintf holds up
 * neither.  The report's own
 * line, with the symbolized stack and the report's path, follows from the
 * worker as before.
 *
 * A full ring (a burst of more hangs than SLOTS before this thread ran)
 * drops the newest lines, counted: each of those hangs still has its
 * report's line.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/common/pi_mutex.h"
#include "agent/common/write_all.h"
#include "agent/common/watch_priority.h"
#include "report_internal.h"

#define SLOTS 64

struct report_herald {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    char lines[SLOTS][HW_DETECTION_LINE_MAX];
    unsigned first, count;
    unsigned long dropped;
    bool stopping;
};

static void *herald_main(void *arg)
{
    report_herald *h = arg;
    /* Real-time, below the watch thread (watch_priority.h): the machine's
     * other work cannot hold the line back.  It only writes lines the watch thread
     * made, a few a second at most. */
    hw_take_service_priority();
    char line[HW_DETECTION_LINE_MAX];
    pthread_mutex_lock(&h->lock);
    for (;;) {
        while (h->count == 0 && !h->stopping)
            pthread_cond_wait(&h->wake, &h->lock);
        if (h->count == 0)
            break; /* stopping, and every line out */
        memcpy(line, h->lines[h->first], sizeof line);
        h->first = (h->first + 1) % SLOTS;
        h->count--;
        pthread_mutex_unlock(&h->lock);
        /* One write(2), not stdio: stderr's stream lock is the report
         * worker's too, and a worker preempted in its own fprintf would
         * hold this line back for as long as it waits for a CPU.  Shorter
         * than PIPE_BUF: never interleaved with another line. */
        (void)hw_write_all(STDERR_FILENO, line, strlen(line));
        pthread_mutex_lock(&h->lock);
    }
    pthread_mutex_unlock(&h->lock);
    hw_leave_real_time();
    return NULL;
}

report_herald *herald_start(void)
{
    report_herald *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    hw_pi_mutex_init(&h->lock);
    pthread_cond_init(&h->wake, NULL);
    if (pthread_create(&h->thread, NULL, herald_main, h) != 0) {
        pthread_mutex_destroy(&h->lock);
        pthread_cond_destroy(&h->wake);
        free(h);
        return NULL;
    }
    return h;
}

void herald_say(report_herald *h, const char *line)
{
    if (!h)
        return;
    pthread_mutex_lock(&h->lock);
    if (h->count == SLOTS) {
        h->dropped++;
    } else {
        snprintf(h->lines[(h->first + h->count) % SLOTS], HW_DETECTION_LINE_MAX, "%s", line);
        h->count++;
        pthread_cond_signal(&h->wake);
    }
    pthread_mutex_unlock(&h->lock);
}

unsigned long herald_stop(report_herald *h)
{
    if (!h)
        return 0;
    pthread_mutex_lock(&h->lock);
    h->stopping = true;
    pthread_cond_signal(&h->wake);
    pthread_mutex_unlock(&h->lock);
    pthread_join(h->thread, NULL);
    unsigned long dropped = h->dropped;
    pthread_mutex_destroy(&h->lock);
    pthread_cond_destroy(&h->wake);
    free(h);
    return dropped;
}
