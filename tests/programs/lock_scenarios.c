/*
 * lock_scenarios.c - a loop whose hangs wait on every kind of lock, for the
 * tests of what a report says a futex wait waits on (hangwatch.time's
 * blocked_in.lock): who holds it, or that it has no holder.
 *
 * It waits in epoll_wait on stdin; each line is a command, MS the time
 * another party keeps the loop waiting:
 *   rwlock MS   read_catalog() takes an rwlock for reading that a thread
 *               ("indexer") holds for writing in rebuild_index()
 *   robust MS   settle_account() locks a robust mutex a thread ("auditor")
 *               holds in audit_accounts()
 *   shared MS   reserve_seat() locks a process-shared mutex (in shared
 *               memory) that a child process holds in hold_the_seats();
 *               prints "child PID"
 *   cond MS     await_delivery() waits on a condition variable a thread
 *               ("courier") signals after MS ms
 *   sem MS      await_ticket() waits on a semaphore a thread ("clerk")
 *               posts after MS ms
 *   quit        exit 0 (so does the end of stdin)
 * It prints "ready PID" once its loop waits, "holder TID" once the other
 * party holds what the loop will wait on (or is about to signal it), and
 * "did COMMAND" after each.  Function bodies differ, so -O2 folds none.
 */
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "stdin_commands.h"

static long hold_ms;
static pthread_barrier_t ready_to_wait;
static volatile unsigned long long tally;

static void say_holder(void)
{
    printf("holder %ld\n", (long)syscall(SYS_gettid));
    fflush(stdout);
}

static void rest_ms(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0)
        ;
}

/* Run `body` on a thread named `name` and wait until it holds its lock. */
static pthread_t start_party(const char *name, void *(*body)(void *))
{
    pthread_barrier_init(&ready_to_wait, NULL, 2);
    pthread_t t;
    if (pthread_create(&t, NULL, body, NULL) != 0)
        exit(1);
    pthread_setname_np(t, name);
    pthread_barrier_wait(&ready_to_wait);
    return t;
}

static void end_party(pthread_t t)
{
    pthread_join(t, NULL);
    pthread_barrier_destroy(&ready_to_wait);
}

/* ---- rwlock ---- */

static pthread_rwlock_t catalog = PTHREAD_RWLOCK_INITIALIZER;

__attribute__((noinline)) static void rebuild_index(void)
{
    pthread_rwlock_wrlock(&catalog);
    say_holder();
    pthread_barrier_wait(&ready_to_wait);
    rest_ms(hold_ms);
    tally += 11;
    pthread_rwlock_unlock(&catalog);
}

static void *indexer(void *arg)
{
    (void)arg;
    rebuild_index();
    return NULL;
}

__attribute__((noinline)) static void read_catalog(void)
{
    pthread_t t = start_party("indexer", indexer);
    pthread_rwlock_rdlock(&catalog);
    tally += 1;
    pthread_rwlock_unlock(&catalog);
    end_party(t);
}

/* ---- robust mutex ---- */

static pthread_mutex_t accounts;

__attribute__((noinline)) static void audit_accounts(void)
{
    pthread_mutex_lock(&accounts);
    say_holder();
    pthread_barrier_wait(&ready_to_wait);
    rest_ms(hold_ms);
    tally += 13;
    pthread_mutex_unlock(&accounts);
}

static void *auditor(void *arg)
{
    (void)arg;
    audit_accounts();
    return NULL;
}

__attribute__((noinline)) static void settle_account(void)
{
    pthread_t t = start_party("auditor", auditor);
    pthread_mutex_lock(&accounts);
    tally += 2;
    pthread_mutex_unlock(&accounts);
    end_party(t);
}

/* ---- process-shared mutex ---- */

__attribute__((noinline)) static void hold_the_seats(pthread_mutex_t *seats, pthread_barrier_t *held)
{
    pthread_mutex_lock(seats);
    pthread_barrier_wait(held);
    rest_ms(hold_ms);
    tally += 17;
    pthread_mutex_unlock(seats);
}

__attribute__((noinline)) static void reserve_seat(void)
{
    struct shared {
        pthread_mutex_t seats;
        pthread_barrier_t held;
    } *s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (s == MAP_FAILED)
        exit(1);
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
    pthread_mutex_init(&s->seats, &ma);
    pthread_barrierattr_t ba;
    pthread_barrierattr_init(&ba);
    pthread_barrierattr_setpshared(&ba, PTHREAD_PROCESS_SHARED);
    pthread_barrier_init(&s->held, &ba, 2);
    pid_t child = fork();
    if (child == 0) {
        hold_the_seats(&s->seats, &s->held);
        _exit(0);
    }
    pthread_barrier_wait(&s->held);
    printf("child %d\n", (int)child);
    fflush(stdout);
    pthread_mutex_lock(&s->seats);
    tally += 3;
    pthread_mutex_unlock(&s->seats);
    waitpid(child, NULL, 0);
    munmap(s, sizeof *s);
}

/* ---- condition variable ---- */

static pthread_mutex_t deliveries_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t delivered = PTHREAD_COND_INITIALIZER;
static int deliveries;

static void *courier(void *arg)
{
    (void)arg;
    say_holder();
    pthread_barrier_wait(&ready_to_wait);
    rest_ms(hold_ms);
    pthread_mutex_lock(&deliveries_lock);
    deliveries++;
    pthread_cond_signal(&delivered);
    pthread_mutex_unlock(&deliveries_lock);
    return NULL;
}

__attribute__((noinline)) static void await_delivery(void)
{
    pthread_mutex_lock(&deliveries_lock);
    int before = deliveries;
    pthread_t t = start_party("courier", courier);
    while (deliveries == before)
        pthread_cond_wait(&delivered, &deliveries_lock);
    pthread_mutex_unlock(&deliveries_lock);
    end_party(t);
}

/* ---- semaphore ---- */

static sem_t tickets;

static void *clerk(void *arg)
{
    (void)arg;
    say_holder();
    pthread_barrier_wait(&ready_to_wait);
    rest_ms(hold_ms);
    tally += 19;
    sem_post(&tickets);
    return NULL;
}

__attribute__((noinline)) static void await_ticket(void)
{
    pthread_t t = start_party("clerk", clerk);
    while (sem_wait(&tickets) != 0)
        ;
    tally += 5;
    end_party(t);
}

static void on_command(const char *line)
{
    char what[16];
    if (sscanf(line, "%15s %ld", what, &hold_ms) == 2) {
        if (strcmp(what, "rwlock") == 0)
            read_catalog();
        else if (strcmp(what, "robust") == 0)
            settle_account();
        else if (strcmp(what, "shared") == 0)
            reserve_seat();
        else if (strcmp(what, "cond") == 0)
            await_delivery();
        else if (strcmp(what, "sem") == 0)
            await_ticket();
        else
            return;
    } else if (strncmp(line, "quit", 4) == 0) {
        exit(0);
    } else {
        return;
    }
    printf("did %s\n", line);
    fflush(stdout);
}

int main(void)
{
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&accounts, &ma);
    sem_init(&tickets, 0, 0);
    char ready[32];
    snprintf(ready, sizeof ready, "ready %d\n", (int)getpid());
    return serve_stdin_commands(on_command, ready, -1);
}
