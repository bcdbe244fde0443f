/* test_sentry.c - Sentry events from reports (sentry_event.c: the event's
 * fields, frame order, images and their debug ids, the envelope) and the
 * spool they wait in (sentry_spool.c: names, bounds, the lock, claims and
 * a claim left by a sender that stopped). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <fcntl.h>

#include <cmocka.h>
#include <jansson.h>

#include "agent/exports/sentry_event.h"
#include "agent/exports/sentry_spool.h"

static void test_debug_id(void **state)
{
    (void)state;
    char out[37];
    /* As Sentry derives it for ELF (checked against Python's
     * uuid.UUID(bytes_le=...) in tests/integration/test_exports.py). */
    assert_true(hw_sentry_debug_id("3bdbc3f84aedee72ac1d0d520e838ba37125f64a", out));
    assert_string_equal(out, "f8c3db3b-ed4a-72ee-ac1d-0d520e838ba3");
    assert_true(hw_sentry_debug_id("0102", out)); /* short: zero-padded */
    assert_string_equal(out, "00000201-0000-0000-0000-000000000000");
    assert_false(hw_sentry_debug_id("xyz1", out));
    assert_false(hw_sentry_debug_id("123", out));
    assert_false(hw_sentry_debug_id("", out));
    assert_false(hw_sentry_debug_id(NULL, out));
}

static const char *report_text =
    "{\"report\":{\"id\":\"0C5E7A4B-3F0D-4B8E-9C51-6D2F0A9B1E77\",\"timestamp\":1796060462,\"type\":\"standard\","
    "\"process_name\":\"my-server\",\"pid\":4242,\"version\":\"hangwatch 0.1.0\"},"
    "\"crash\":{\"threads\":[{\"index\":0,\"name\":\"my-server\",\"thread_identifier\":4242,\"crashed\":true,"
    "\"backtrace\":{\"contents\":["
    "{\"instruction_addr\":4096,\"symbol_name\":\"clock_nanosleep\",\"object_name\":\"libc.so.6\",\"object_addr\":4096},"
    "{\"instruction_addr\":65600,\"symbol_name\":\"flush_cache\",\"object_name\":\"my-server\",\"object_addr\":65536,"
    "\"source_file\":\"/src/cache.c\",\"source_line\":88},"
    "{\"instruction_addr\":1234,\"symbol_name\":\"handle\",\"source_file\":\"/srv/app.py\",\"source_line\":5,"
    "\"language\":\"python\"},"
    "{\"instruction_addr\":65700,\"symbol_name\":\"main\",\"object_name\":\"my-server\",\"object_addr\":65536}]}},"
    "{\"index\":1,\"name\":\"worker\",\"thread_identifier\":4243,\"crashed\":false,"
    "\"backtrace\":{\"contents\":[{\"instruction_addr\":4100,\"symbol_name\":\"futex_wait\"}]}}]},"
    "\"binary_images\":[{\"image_addr\":4096,\"image_size\":4096,\"name\":\"/lib/libc.so.6\",\"build_id\":\"0102\"},"
    "{\"image_addr\":65536,\"image_size\":8192,\"name\":\"/srv/my-server\","
    "\"build_id\":\"3bdbc3f84aedee72ac1d0d520e838ba37125f64a\"}],"
    "\"hangwatch\":{\"detector\":\"runloop\",\"hang_type\":\"hang\",\"block_duration_us\":2004108,"
    "\"final_duration_us\":2504000,\"runloop_threshold_us\":2000000,\"grouping_key\":\"918a25cd328bb434\","
    "\"executable\":\"/srv/my-server\",\"detected_at_unix_ms\":1796060462513,"
    "\"hung_thread\":{\"thread_identifier\":4242,\"report_array_index\":0}}}";

/* Frames that say whose code they are (written since in_app is): Sentry
 * gets their word, not the guess made for older reports. */
static void test_event_takes_the_reports_in_app(void **state)
{
    (void)state;
    json_t *report = json_loads(report_text, 0, NULL);
    assert_non_null(report);
    json_t *contents = json_object_get(
        json_object_get(json_array_get(json_object_get(json_object_get(report, "crash"), "threads"), 0), "backtrace"),
        "contents");
    json_object_set_new(json_array_get(contents, 0), "in_app", json_true());  /* libc, by a rule */
    json_object_set_new(json_array_get(contents, 2), "in_app", json_false()); /* Python, a package's */
    const char *why = NULL;
    json_t *ev = hw_sentry_event_from_report(report, "host1", &why);
    assert_non_null(ev);
    json_t *exc = json_array_get(json_object_get(json_object_get(ev, "exception"), "values"), 0);
    json_t *frames = json_object_get(json_object_get(exc, "stacktrace"), "frames");
    assert_true(json_is_true(json_object_get(json_array_get(frames, 3), "in_app")));
    assert_true(json_is_false(json_object_get(json_array_get(frames, 1), "in_app")));
    /* the frames that do not say keep the guess */
    assert_true(json_is_true(json_object_get(json_array_get(frames, 2), "in_app")));
    json_decref(ev);
    json_decref(report);
}

static void test_event_from_report(void **state)
{
    (void)state;
    json_t *report = json_loads(report_text, 0, NULL);
    assert_non_null(report);
    const char *why = NULL;
    json_t *ev = hw_sentry_event_from_report(report, "host1", &why);
    assert_non_null(ev);
    assert_string_equal(json_string_value(json_object_get(ev, "event_id")), "0c5e7a4b3f0d4b8e9c516d2f0a9b1e77");
    assert_string_equal(json_string_value(json_object_get(ev, "server_name")), "host1");
    json_t *exc = json_array_get(json_object_get(json_object_get(ev, "exception"), "values"), 0);
    assert_string_equal(json_string_value(json_object_get(exc, "type")), "AppHang");
    assert_string_equal(json_string_value(json_object_get(json_object_get(exc, "mechanism"), "type")), "AppHang");
    assert_string_equal(json_string_value(json_object_get(exc, "value")), "App hanging for 2.504 s in my-server (pid 4242)");
    assert_int_equal(json_integer_value(json_object_get(exc, "thread_id")), 4242);
    /* Innermost last. */
    json_t *frames = json_object_get(json_object_get(exc, "stacktrace"), "frames");
    assert_int_equal(json_array_size(frames), 4);
    assert_true(json_is_true(json_object_get(json_object_get(exc, "stacktrace"), "snapshot")));
    assert_string_equal(json_string_value(json_object_get(json_array_get(frames, 0), "function")), "main");
    json_t *top = json_array_get(frames, 3);
    assert_string_equal(json_string_value(json_object_get(top, "function")), "clock_nanosleep");
    assert_string_equal(json_string_value(json_object_get(top, "instruction_addr")), "0x1000");
    assert_string_equal(json_string_value(json_object_get(top, "package")), "/lib/libc.so.6");
    assert_true(json_is_false(json_object_get(top, "in_app")));
    json_t *mine = json_array_get(frames, 2);
    assert_string_equal(json_string_value(json_object_get(mine, "filename")), "cache.c");
    assert_string_equal(json_string_value(json_object_get(mine, "abs_path")), "/src/cache.c");
    assert_int_equal(json_integer_value(json_object_get(mine, "lineno")), 88);
    assert_true(json_is_true(json_object_get(mine, "in_app")));
    json_t *py = json_array_get(frames, 1);
    assert_string_equal(json_string_value(json_object_get(py, "platform")), "python");
    assert_null(json_object_get(py, "instruction_addr"));
    /* Both threads; the worker's stack too. */
    json_t *threads = json_object_get(json_object_get(ev, "threads"), "values");
    assert_int_equal(json_array_size(threads), 2);
    assert_true(json_is_true(json_object_get(json_array_get(threads, 0), "crashed")));
    assert_true(json_is_true(json_object_get(json_array_get(threads, 0), "main")));
    assert_true(json_is_false(json_object_get(json_array_get(threads, 1), "crashed")));
    assert_non_null(json_object_get(json_array_get(threads, 1), "stacktrace"));
    json_t *images = json_object_get(json_object_get(ev, "debug_meta"), "images");
    json_t *exe = json_array_get(images, 1);
    assert_string_equal(json_string_value(json_object_get(exe, "code_id")), "3bdbc3f84aedee72ac1d0d520e838ba37125f64a");
    assert_string_equal(json_string_value(json_object_get(exe, "debug_id")), "f8c3db3b-ed4a-72ee-ac1d-0d520e838ba3");
    assert_string_equal(json_string_value(json_object_get(exe, "image_addr")), "0x10000");
    json_t *tags = json_object_get(ev, "tags");
    assert_string_equal(json_string_value(json_object_get(tags, "hangwatch.grouping_key")), "918a25cd328bb434");
    assert_string_equal(json_string_value(json_object_get(tags, "hangwatch.detector")), "runloop");
    assert_string_equal(json_string_value(json_object_get(tags, "hangwatch.hang_type")), "hang");
    assert_string_equal(json_string_value(json_array_get(json_object_get(ev, "fingerprint"), 1)), "918a25cd328bb434");
    json_decref(ev);

    /* Without a final duration: "at least". */
    json_object_del(json_object_get(report, "hangwatch"), "final_duration_us");
    ev = hw_sentry_event_from_report(report, NULL, &why);
    exc = json_array_get(json_object_get(json_object_get(ev, "exception"), "values"), 0);
    assert_string_equal(json_string_value(json_object_get(exc, "value")),
                        "App hanging for at least 2.004 s in my-server (pid 4242)");
    json_decref(ev);
    /* Not a report, or an id that is no UUID: no event. */
    json_object_set_new(json_object_get(report, "report"), "id", json_string("not-an-id"));
    assert_null(hw_sentry_event_from_report(report, NULL, &why));
    assert_non_null(why);
    json_t *junk = json_pack("{s:i}", "x", 1);
    assert_null(hw_sentry_event_from_report(junk, NULL, &why));
    json_decref(junk);
    json_decref(report);
}

static const char *exception_value(const json_t *ev)
{
    json_t *exc = json_array_get(json_object_get(json_object_get(ev, "exception"), "values"), 0);
    return json_string_value(json_object_get(exc, "value"));
}

/* The title and culprit name the user's code where the hang is: the hung
 * thread's culprit, or, when it waits for the GIL or a mutex, the holder's. */
static void test_event_names_the_culprit(void **state)
{
    (void)state;
    json_t *report = json_loads(report_text, 0, NULL);
    assert_non_null(report);
    json_t *apm = json_object_get(report, "hangwatch");
    json_object_set_new(json_object_get(apm, "hung_thread"), "culprit_frame", json_integer(1));
    const char *why = NULL;
    json_t *ev = hw_sentry_event_from_report(report, NULL, &why);
    assert_string_equal(exception_value(ev), "App hanging for 2.504 s in my-server (pid 4242) in flush_cache (cache.c:88)");
    assert_string_equal(json_string_value(json_object_get(ev, "culprit")), "flush_cache");
    assert_string_equal(json_string_value(json_object_get(json_object_get(ev, "tags"), "hangwatch.culprit")),
                        "flush_cache");
    json_decref(ev);

    /* the GIL's holder: its culprit, and who holds it */
    json_object_set_new(apm, "gil_holder", json_pack("{s:i, s:i, s:i}", "thread_identifier", 4243,
                                                     "report_array_index", 1, "culprit_frame", 0));
    ev = hw_sentry_event_from_report(report, NULL, &why);
    assert_string_equal(exception_value(ev), "App hanging for 2.504 s in my-server (pid 4242), waiting for the GIL "
                                             "held by thread 4243 in futex_wait");
    assert_string_equal(json_string_value(json_object_get(ev, "culprit")), "futex_wait");
    json_decref(ev);

    /* a holder whose frame is not there: the hung thread's culprit */
    json_object_set_new(json_object_get(apm, "gil_holder"), "culprit_frame", json_integer(7));
    ev = hw_sentry_event_from_report(report, NULL, &why);
    assert_string_equal(json_string_value(json_object_get(ev, "culprit")), "flush_cache");
    json_decref(ev);

    /* a name too long for the title is cut at a character's start: the
     * event stays valid UTF-8 (jansson refuses anything else) */
    char name[700];
    size_t n = 0;
    while (n + 2 < sizeof name - 1) {
        name[n++] = (char)0xc3; /* U+00E9 */
        name[n++] = (char)0xa9;
    }
    name[n] = '\0';
    json_t *thread0 = json_array_get(json_object_get(json_object_get(report, "crash"), "threads"), 0);
    json_t *frame1 = json_array_get(json_object_get(json_object_get(thread0, "backtrace"), "contents"), 1);
    json_object_set_new(frame1, "symbol_name", json_string(name));
    json_object_del(apm, "gil_holder");
    ev = hw_sentry_event_from_report(report, NULL, &why);
    assert_non_null(ev);
    const char *value = exception_value(ev);
    assert_non_null(value);
    assert_true(strlen(value) < 512);
    const char *culprit = json_string_value(json_object_get(ev, "culprit"));
    assert_non_null(culprit);
    assert_true(strlen(culprit) <= 199 && strlen(culprit) % 2 == 0);
    json_decref(ev);
    json_decref(report);
}

/* A report of a process in a Kubernetes pod's container: its event is
 * tagged with the pod and container, the fleet's way to find it. */
static void test_event_tags_the_container(void **state)
{
    (void)state;
    json_t *report = json_loads(report_text, 0, NULL);
    assert_non_null(report);
    json_object_set_new(json_object_get(report, "hangwatch"), "container",
                        json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "kind", "kubernetes", "runtime", "containerd",
                                  "pod_uid", "7e57c2a0-1b2c-4d3e-8f90-a1b2c3d4e5f6", "pod_name", "cart-5d9f",
                                  "namespace", "shop", "label", "3f2a9c1b7d6e"));
    const char *why = NULL;
    json_t *ev = hw_sentry_event_from_report(report, "host1", &why);
    assert_non_null(ev);
    json_t *tags = json_object_get(ev, "tags");
    assert_string_equal(json_string_value(json_object_get(tags, "container")), "3f2a9c1b7d6e");
    assert_string_equal(json_string_value(json_object_get(tags, "container.kind")), "kubernetes");
    assert_string_equal(json_string_value(json_object_get(tags, "k8s.pod.uid")), "7e57c2a0-1b2c-4d3e-8f90-a1b2c3d4e5f6");
    assert_string_equal(json_string_value(json_object_get(tags, "k8s.pod.name")), "cart-5d9f");
    assert_string_equal(json_string_value(json_object_get(tags, "k8s.namespace")), "shop");
    assert_null(json_object_get(tags, "systemd.unit"));
    json_decref(ev);
    json_decref(report);
}

static void test_envelope(void **state)
{
    (void)state;
    json_t *report = json_loads(report_text, 0, NULL);
    char id[33];
    size_t len = 0;
    const char *why = NULL;
    char *env = hw_sentry_envelope_from_report(report, "http://k@h/1", NULL, id, &len, &why);
    assert_non_null(env);
    assert_int_equal(strlen(env), len);
    assert_string_equal(id, "0c5e7a4b3f0d4b8e9c516d2f0a9b1e77");
    /* header \n item header \n payload \n, the item's length exact */
    char *l1 = strchr(env, '\n'), *l2 = strchr(l1 + 1, '\n');
    assert_non_null(l2);
    assert_true(strncmp(env, "{\"event_id\":\"0c5e7a4b3f0d4b8e9c516d2f0a9b1e77\",\"dsn\":\"http://k@h/1\"}", (size_t)(l1 - env)) == 0);
    json_t *item = json_loadb(l1 + 1, (size_t)(l2 - l1 - 1), 0, NULL);
    assert_string_equal(json_string_value(json_object_get(item, "type")), "event");
    size_t payload = (size_t)json_integer_value(json_object_get(item, "length"));
    json_decref(item);
    assert_int_equal(payload, len - (size_t)(l2 + 1 - env) - 1);
    assert_int_equal(env[len - 1], '\n');
    char *dsn = hw_sentry_envelope_dsn(env, len);
    assert_string_equal(dsn, "http://k@h/1");
    free(dsn);
    size_t len2 = 0;
    char *moved = hw_sentry_envelope_with_dsn(env, len, "https://other@h2/9", &len2);
    dsn = hw_sentry_envelope_dsn(moved, len2);
    assert_string_equal(dsn, "https://other@h2/9");
    assert_string_equal(moved + len2 - (len - (size_t)(l1 - env)), l1); /* the rest unchanged */
    free(dsn);
    free(moved);
    assert_null(hw_sentry_envelope_with_dsn("not json\n", 9, "x", &len2));
    free(env);
    json_decref(report);
}

static char dir[] = "/tmp/hw-test-spool-XXXXXX";

static int make_dir(void **state)
{
    (void)state;
    return mkdtemp(dir) ? 0 : -1;
}

static int remove_dir(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_spool(void **state)
{
    (void)state;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    assert_true(dfd >= 0);
    hw_sentry_spool *s = NULL, *other = NULL;
    char why[160];
    assert_int_equal(hw_sentry_spool_open(dfd, false, &s, why, sizeof why), -2); /* -ENOENT: none yet */
    assert_int_equal(hw_sentry_spool_open(dfd, true, &s, why, sizeof why), 0);
    const char *a = "0c5e7a4b3f0d4b8e9c516d2f0a9b1e77", *b = "1111111111111111111111111111111b";
    assert_int_equal(hw_sentry_spool_add(s, a, "envelope a\n", 11), 0);
    assert_int_equal(hw_sentry_spool_add(s, a, "envelope a\n", 11), -17); /* -EEXIST: one per event */
    assert_int_equal(hw_sentry_spool_add(s, "0C5E7A4B3F0D4B8E9C516D2F0A9B1E77", "x", 1), -22); /* upper case */
    assert_int_equal(hw_sentry_spool_add(s, "../../etc/passwd", "x", 1), -22);
    assert_int_equal(hw_sentry_spool_add(s, b, "", 0), -22);
    /* Bounds: events and bytes. */
    hw_sentry_spool_set_bounds(s, 2, 20);
    assert_int_equal(hw_sentry_spool_add(s, b, "0123456789", 10), -28); /* -ENOSPC: 11 + 10 > 20 */
    hw_sentry_spool_set_bounds(s, 1, 1000);
    assert_int_equal(hw_sentry_spool_add(s, b, "b", 1), -28); /* 2 events > 1 */
    hw_sentry_spool_set_bounds(s, HW_SPOOL_MAX_EVENTS, HW_SPOOL_MAX_BYTES);
    assert_int_equal(hw_sentry_spool_add(s, b, "envelope b\n", 11), 0);
    char ids[4][33];
    size_t total = 0;
    uint64_t bytes = 0;
    assert_int_equal(hw_sentry_spool_list(s, ids, 4, &total, &bytes), 2);
    assert_int_equal(total, 2);
    assert_int_equal(bytes, 22);

    /* Claims need the lock; the lock is one sender's at a time. */
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(hw_sentry_spool_claim(s, a, &text, &len), -22);
    assert_int_equal(hw_sentry_spool_lock(s, 0), 0);
    assert_int_equal(hw_sentry_spool_open(dfd, false, &other, why, sizeof why), 0);
    assert_int_equal(hw_sentry_spool_lock(other, 0), -11); /* -EWOULDBLOCK */
    assert_int_equal(hw_sentry_spool_claim(s, a, &text, &len), 0);
    assert_int_equal(len, 11);
    assert_string_equal(text, "envelope a\n");
    free(text);
    struct stat st;
    char path[128];
    snprintf(path, sizeof path, "%s/sentry-spool/%s.sending", dir, a);
    assert_int_equal(stat(path, &st), 0);
    hw_sentry_spool_unclaim(s, a); /* not sent: waits again */
    assert_int_not_equal(stat(path, &st), 0);
    assert_int_equal(hw_sentry_spool_claim(s, b, &text, &len), 0);
    free(text);
    hw_sentry_spool_sent(s, b);
    assert_int_equal(hw_sentry_spool_list(s, ids, 4, &total, NULL), 1);
    assert_string_equal(ids[0], a);
    hw_sentry_spool_unlock(s);

    /* A sender that stopped between its post and its delete left a
     * claim: the lock's next holder sends it again, as it is. */
    assert_int_equal(hw_sentry_spool_lock(other, 0), 0);
    assert_int_equal(hw_sentry_spool_claim(other, a, &text, &len), 0);
    free(text);
    hw_sentry_spool_close(other); /* "crashed": the claim stays, the lock goes */
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(hw_sentry_spool_lock(s, 0), 0);
    assert_int_equal(hw_sentry_spool_list(s, ids, 4, &total, NULL), 1);
    assert_int_equal(hw_sentry_spool_claim(s, a, &text, &len), 0);
    assert_string_equal(text, "envelope a\n");
    free(text);
    hw_sentry_spool_sent(s, a);
    assert_int_equal(hw_sentry_spool_list(s, ids, 4, &total, NULL), 0);
    assert_int_equal(hw_sentry_spool_claim(s, a, &text, &len), -2);

    /* Files that are not ours to send are ignored. */
    snprintf(path, sizeof path, "%s/sentry-spool/notes.txt", dir);
    FILE *f = fopen(path, "w");
    fputs("x", f);
    fclose(f);
    snprintf(path, sizeof path, "%s/sentry-spool/%s.envelope", dir, b);
    assert_int_equal(symlink("/etc/passwd", path), 0);
    assert_int_equal(hw_sentry_spool_list(s, ids, 4, &total, NULL), 0);
    assert_int_equal(hw_sentry_spool_claim(s, b, &text, &len), -2);
    hw_sentry_spool_close(s);
    close(dfd);

    char id[33];
    bool sending = false;
    assert_true(hw_spool_name_valid("0c5e7a4b3f0d4b8e9c516d2f0a9b1e77.sending", id, &sending));
    assert_true(sending);
    assert_false(hw_spool_name_valid("0c5e7a4b3f0d4b8e9c516d2f0a9b1e77.json", id, &sending));
    assert_false(hw_spool_name_valid("0c5e7a4b3f0d4b8e9c516d2f0a9b1e7.envelope", id, &sending));
    assert_false(hw_spool_name_valid(".tmp-abc", id, &sending));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_debug_id),
        cmocka_unit_test(test_event_from_report),
        cmocka_unit_test(test_event_takes_the_reports_in_app),
        cmocka_unit_test(test_event_names_the_culprit),
        cmocka_unit_test(test_event_tags_the_container), cmocka_unit_test(test_envelope),
        cmocka_unit_test_setup_teardown(test_spool, make_dir, remove_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
