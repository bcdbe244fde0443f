/*
 * report_naming.c - what a capture needs read from the process right after
 * it, read off the watch thread: the rest of its memory map (the watch
 * thread reads the first 128 KiB), the names of its Python and JavaScript
 * frames, and for a hang's first, who is at the other end of its wait.
 *
 * A capture reads the interpreter's frames in its stop (code objects,
 * V8 function objects: addresses); their names, files and lines are read
 * from the process's memory right after it, while the process most likely
 * still runs that code.  That reading is the watched process's to make
 * long: a code object's line table, a script's source are as large as it
 * likes, within budgets (python_internal.h, js_internal.h) that still
 * allow tens of milliseconds per capture.  Done on the watch thread, every
 * other process's hang crossing its threshold meanwhile was captured that
 * much later (issue [24]).  So with the memory map, which a process with
 * 65,530 mappings makes 6 MiB long (40-50 ms).  This thread does both
 * instead, at a real-time priority one below the watch thread's
 * (watch_priority.h), so that they are read as promptly as before and the
 * machine's other work cannot hold them back, while the watch thread goes
 * on watching and preempts it where they share a CPU.
 *
 * The report worker has the capture already, in its queue, in order with
 * the hang's other jobs; it waits for the names before it unwinds that
 * capture (worker_names_ready).  The namers kept between captures are this
 * thread's alone (runtime_namers.h, bounded in all), and a process gone is
 * forgotten in turn with its last capture's naming.
 */
#include <pthread.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent/common/pi_mutex.h"
#include "agent/common/priority_lender.h"
#include "agent/common/watch_priority.h"
#include "report_internal.h"

typedef struct naming_task {
    report_request *req; /* NULL: forget the process `serial` */
    uint64_t serial;
    struct naming_task *next;
} naming_task;

struct report_naming {
    report_worker *worker;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    naming_task *head, *tail;
    bool stopping;
    hw_runtime_namers *namers; /* this thread's only */
    pid_t tid;                  /* 0 until it runs */
    hw_cpu_placement placement; /* the submitting thread's */
};

/* Early sampling's Point Stack and ring keep a runtime frame as its key
 * (frame.h): key `i` of `count` named into (*named)[i], the array made at
 * its first runtime key. */
static void name_key(report_naming *n, const hw_namer_process *p, uint64_t key, hw_frame **named, size_t count,
                     size_t i)
{
    if (!hw_python_key_is_python(key))
        return;
    if (*named == NULL && (*named = calloc(count, sizeof **named)) == NULL)
        return;
    (void)hw_runtime_namers_frame_from_key(n->namers, p, key, &(*named)[i]);
}

static void name_one(report_naming *n, report_request *req)
{
    if (req->snap.thread_count > 0)
        hw_capture_read_maps(&req->snap, 0); /* the rest of a map cut in the capture, first */
    hw_namer_process p = {.serial = req->process_serial, .pid = req->pid, .py = &req->python, .js = &req->js};
    hw_runtime_names *names = hw_runtime_namers_name(n->namers, &p, &req->snap, false);
    /* written before worker_names_ready hands them over */
    for (size_t i = 0; i < req->ps_depth; i++)
        name_key(n, &p, req->ps_pcs[i], &req->ps_named, req->ps_depth, i);
    for (size_t i = 0; i < req->ring.addr_count; i++)
        name_key(n, &p, req->ring.addrs[i].pc, &req->ring_named, req->ring.addr_count, i);
    /* Who is at the other end of a hang's wait, while it most likely still
     * waits: on idle time the worker came to it after the wait had ended
     * and its descriptor was closed.  A hang's first capture only (a walk
     * of /proc, bounded: wait_peer.h); the worker looks for its re-checks'
     * that it writes. */
    hw_blocked_look *look = &req->time.look;
    if (req->check.verdict == HW_VERDICT_HANG && req->time.present && look->valid && look->in_syscall) {
        hw_wait_peer_find(req->pid, req->tid, look);
        req->peer_looked = true;
    }
    worker_names_ready(n->worker, req, names);
}

static void *naming_main(void *arg)
{
    report_naming *n = arg;
    hw_take_service_priority();
    pthread_mutex_lock(&n->lock);
    n->tid = (pid_t)syscall(SYS_gettid);
    for (;;) {
        while (n->head == NULL && !n->stopping)
            pthread_cond_wait(&n->wake, &n->lock);
        naming_task *t = n->head;
        if (t == NULL)
            break; /* stopping, and every task done */
        n->head = t->next;
        if (n->head == NULL)
            n->tail = NULL;
        pthread_mutex_unlock(&n->lock);
        hw_rt_step_open(); /* stuck behind the worker in the allocator, it is lent to (priority_lender.h) */
        if (t->req != NULL)
            name_one(n, t->req);
        else
            hw_runtime_namers_forget(n->namers, t->serial);
        free(t);
        (void)hw_rt_step_close();
        pthread_mutex_lock(&n->lock);
    }
    pthread_mutex_unlock(&n->lock);
    hw_rt_step_leave();
    hw_leave_real_time();
    return NULL;
}

report_naming *naming_start(report_worker *wk, size_t namers_max_bytes, bool quiet)
{
    report_naming *n = calloc(1, sizeof *n);
    if (n == NULL)
        return NULL;
    n->worker = wk;
    n->namers = hw_runtime_namers_new(namers_max_bytes, "", quiet, false);
    if (n->namers == NULL) {
        free(n);
        return NULL;
    }
    hw_pi_mutex_init(&n->lock);
    pthread_cond_init(&n->wake, NULL);
    if (pthread_create(&n->thread, NULL, naming_main, n) != 0) {
        pthread_mutex_destroy(&n->lock);
        pthread_cond_destroy(&n->wake);
        hw_runtime_namers_free(n->namers);
        free(n);
        return NULL;
    }
    return n;
}

/* Queue a task; false when out of memory. */
static bool queue_task(report_naming *n, report_request *req, uint64_t serial)
{
    naming_task *t = malloc(sizeof *t);
    if (t == NULL)
        return false;
    *t = (naming_task){.req = req, .serial = serial};
    pthread_mutex_lock(&n->lock);
    if (n->tail)
        n->tail->next = t;
    else
        n->head = t;
    n->tail = t;
    pthread_cond_signal(&n->wake);
    pthread_mutex_unlock(&n->lock);
    return true;
}

void naming_keep_off(report_naming *n, int cpu)
{
    pthread_mutex_lock(&n->lock);
    pid_t tid = n->tid;
    pthread_mutex_unlock(&n->lock);
    hw_cpu_placement_keep_off(&n->placement, tid, cpu);
}

void naming_submit(report_naming *n, report_request *req)
{
    /* Out of memory: the capture goes without its runtime names, as one
     * whose reading failed. */
    if (!queue_task(n, req, 0))
        worker_names_ready(n->worker, req, NULL);
}

void naming_forget(report_naming *n, uint64_t serial)
{
    /* Out of memory: its namer stays until the bound drops it. */
    (void)queue_task(n, NULL, serial);
}

void naming_stop(report_naming *n)
{
    if (n == NULL)
        return;
    pthread_mutex_lock(&n->lock);
    n->stopping = true;
    pthread_cond_signal(&n->wake);
    pthread_mutex_unlock(&n->lock);
    pthread_join(n->thread, NULL);
    pthread_mutex_destroy(&n->lock);
    pthread_cond_destroy(&n->wake);
    hw_runtime_namers_free(n->namers);
    free(n);
}
