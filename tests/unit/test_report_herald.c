/*
 * test_report_herald.c - the thread that writes the lines at detection
 * (src/agent/report/report_herald.c): lines said from several threads at
 * once all come out whole, each once, in the order each thread said them,
 * or are counted as dropped when the ring was full; stopping writes what
 * waits.  Run under ThreadSanitizer (label concurrency).
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/report/report_internal.h"

#define SAYERS 4
#define LINES_EACH 200

static report_herald *g_herald;

static void *say_lines(void *arg)
{
    int who = (int)(intptr_t)arg;
    for (int i = 0; i < LINES_EACH; i++) {
        char line[96];
        snprintf(line, sizeof line, "hangwatch: hang detected in t%d line %d; its report follows\n", who, i);
        herald_say(g_herald, line);
    }
    return NULL;
}

static void test_lines_whole_once_in_order(void **state)
{
    (void)state;
    char path[] = "/tmp/hw-herald-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(stderr);
    int saved = dup(2);
    assert_true(saved >= 0);
    assert_int_equal(dup2(fd, 2), 2);

    g_herald = herald_start();
    assert_non_null(g_herald);
    pthread_t threads[SAYERS];
    for (int i = 0; i < SAYERS; i++)
        assert_int_equal(pthread_create(&threads[i], NULL, say_lines, (void *)(intptr_t)i), 0);
    for (int i = 0; i < SAYERS; i++)
        pthread_join(threads[i], NULL);
    unsigned long dropped = herald_stop(g_herald);

    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    int next[SAYERS] = {0};
    unsigned long written = 0;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        int who = -1, index = -1;
        assert_int_equal(sscanf(line, "hangwatch: hang detected in t%d line %d; its report follows\n", &who, &index), 2);
        assert_true(who >= 0 && who < SAYERS);
        assert_true(index >= next[who]); /* in order, none twice (a dropped one leaves a gap) */
        next[who] = index + 1;
        assert_non_null(strstr(line, "follows\n")); /* whole */
        written++;
    }
    fclose(f);
    unlink(path);
    print_message("%lu written, %lu dropped\n", written, dropped);
    assert_int_equal(written + dropped, SAYERS * LINES_EACH);
    assert_true(written >= 64); /* at least one ring's worth got through */
}

static void test_nothing_said_stops_at_once(void **state)
{
    (void)state;
    report_herald *h = herald_start();
    assert_non_null(h);
    assert_int_equal(herald_stop(h), 0);
    herald_say(NULL, "ignored\n"); /* no herald (--quiet): nothing */
    assert_int_equal(herald_stop(NULL), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lines_whole_once_in_order),
        cmocka_unit_test(test_nothing_said_stops_at_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
