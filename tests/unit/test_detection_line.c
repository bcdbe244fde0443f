/*
 * test_detection_line.c - the line at detection of a thread its capture
 * has not stopped yet (src/agent/report/report_line.c): its state says why
 * (waiting for a CPU, in uninterruptible sleep), a stop that came between
 * the deadline and the read of its state is said as late, not as "not
 * stopped yet", and an unreadable state says only that it is not stopped.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "agent/report/report_internal.h"

static report_request *hung_request(void)
{
    report_request *req = calloc(1, sizeof *req);
    assert_non_null(req);
    req->pid = req->tid = 4242;
    req->snap.pid = 4242;
    strcpy(req->snap.process_name, "my-server");
    req->check.busy_ns = 2000000000ull;
    req->threshold_ns = 2000000000ull;
    return req;
}

static void line_for_state(char state, char *line, size_t len)
{
    hw_agent_options opts = {0};
    report_request *req = hung_request();
    hw_time_section time = {0};
    assert_true(hw_detection_line_unstopped(&opts, req, &time, state, line, len));
    free(req);
    assert_non_null(strstr(line, "hangwatch: hang detected in my-server (pid 4242): main thread busy 2s "
                                 "(threshold 2s)"));
    assert_int_equal(line[strlen(line) - 1], '\n');
}

static void test_waiting_for_a_cpu(void **unused)
{
    (void)unused;
    char line[HW_DETECTION_LINE_MAX];
    line_for_state('R', line, sizeof line);
    assert_non_null(strstr(line, "(threshold 2s), not stopped yet (waiting for a CPU, state R)"));
    line_for_state('D', line, sizeof line);
    assert_non_null(strstr(line, "(threshold 2s), not stopped yet (in uninterruptible sleep, state D)"));
    line_for_state('S', line, sizeof line);
    assert_non_null(strstr(line, "(threshold 2s), not stopped yet (state S)"));
}

static void test_stopped_after_the_deadline(void **unused)
{
    (void)unused;
    char line[HW_DETECTION_LINE_MAX];
    line_for_state('t', line, sizeof line);
    assert_non_null(strstr(line, "(threshold 2s), stopped late (the report names where)"));
    assert_null(strstr(line, "not stopped"));
}

static void test_state_unknown(void **unused)
{
    (void)unused;
    char line[HW_DETECTION_LINE_MAX];
    line_for_state('?', line, sizeof line);
    assert_non_null(strstr(line, "(threshold 2s), not stopped yet"));
    assert_null(strstr(line, "state"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_waiting_for_a_cpu),
        cmocka_unit_test(test_stopped_after_the_deadline),
        cmocka_unit_test(test_state_unknown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
