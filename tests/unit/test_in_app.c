/*
 * test_in_app.c - whose code a frame is (core/in_app.h): the default rules
 * on the paths real programs show (Debian's and pyenv's Pythons, venvs,
 * node, system libraries, hangwatch's own objects), the user's rules, and
 * the culprit a stack gets.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/in_app.h"

static hw_frame_origin native(const char *object, const char *executable)
{
    hw_frame_place p = {.native = true, .object_path = object, .executable = executable};
    return hw_frame_origin_of(&p);
}

static hw_frame_origin python(const char *file)
{
    hw_frame_place p = {.source_file = file};
    return hw_frame_origin_of(&p);
}

static hw_frame_origin javascript(const char *file)
{
    hw_frame_place p = {.javascript = true, .source_file = file};
    return hw_frame_origin_of(&p);
}

static void test_python_files(void **state)
{
    (void)state;
    assert_int_equal(python("/srv/shop/aio_fetch.py"), HW_ORIGIN_APP);
    assert_int_equal(python("aio_fetch.py"), HW_ORIGIN_APP); /* a script run by a relative path */
    assert_int_equal(python("/usr/lib/python3.11/socket.py"), HW_ORIGIN_STDLIB);
    assert_int_equal(python("/usr/lib/python3.11/urllib/request.py"), HW_ORIGIN_STDLIB);
    assert_int_equal(python("/root/.pyenv/versions/3.12.1/lib/python3.12/asyncio/base_events.py"),
                     HW_ORIGIN_STDLIB);
    assert_int_equal(python("/usr/lib/python3/dist-packages/aiohttp/web_protocol.py"), HW_ORIGIN_PACKAGE);
    assert_int_equal(python("/home/ann/venv/lib/python3.12/site-packages/flask/app.py"), HW_ORIGIN_PACKAGE);
    assert_int_equal(python("<frozen importlib._bootstrap>"), HW_ORIGIN_RUNTIME);
    assert_int_equal(python(NULL), HW_ORIGIN_RUNTIME);
    /* "python" in a directory's name is not a library directory */
    assert_int_equal(python("/home/ann/lib/python-tools/job.py"), HW_ORIGIN_APP);
    assert_int_equal(python("/home/ann/lib/python3x/job.py"), HW_ORIGIN_APP);
}

static void test_javascript_files(void **state)
{
    (void)state;
    assert_int_equal(javascript("/srv/app/server.js"), HW_ORIGIN_APP);
    assert_int_equal(javascript("node:internal/timers"), HW_ORIGIN_RUNTIME);
    assert_int_equal(javascript("internal/streams/readable.js"), HW_ORIGIN_RUNTIME);
    assert_int_equal(javascript("/srv/app/node_modules/express/lib/router/index.js"), HW_ORIGIN_PACKAGE);
    assert_int_equal(javascript(NULL), HW_ORIGIN_RUNTIME); /* V8's builtins */
}

static void test_native_objects(void **state)
{
    (void)state;
    const char *exe = "/srv/app/bin/orders";
    assert_int_equal(native(exe, exe), HW_ORIGIN_APP);
    /* the program's executable is its own wherever it is installed */
    assert_int_equal(native("/usr/lib/orders/orders", "/usr/lib/orders/orders"), HW_ORIGIN_APP);
    assert_int_equal(native("/usr/lib/x86_64-linux-gnu/libc.so.6", exe), HW_ORIGIN_SYSTEM);
    assert_int_equal(native("/lib/x86_64-linux-gnu/libcrypto.so.3", exe), HW_ORIGIN_SYSTEM);
    assert_int_equal(native("/usr/lib64/libglib-2.0.so.0", exe), HW_ORIGIN_SYSTEM);
    assert_int_equal(native("[vdso]", exe), HW_ORIGIN_SYSTEM);
    assert_int_equal(native("/usr/local/lib/libpricing.so.2", exe), HW_ORIGIN_APP);
    assert_int_equal(native("/srv/app/build/libpricing.so", exe), HW_ORIGIN_APP);
    assert_int_equal(native(NULL, exe), HW_ORIGIN_UNKNOWN);
    /* the interpreters, even as the executable */
    assert_int_equal(native("/usr/bin/python3.11", "/usr/bin/python3.11"), HW_ORIGIN_RUNTIME);
    assert_int_equal(native("/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0", exe), HW_ORIGIN_RUNTIME);
    assert_int_equal(native("/usr/local/bin/node", "/usr/local/bin/node"), HW_ORIGIN_RUNTIME);
    assert_int_equal(native("/usr/lib/x86_64-linux-gnu/libnode.so.108", exe), HW_ORIGIN_RUNTIME);
    /* a program whose name has "python" or "node" in it is not one */
    assert_int_equal(native("/srv/app/mypython", "/srv/app/mypython"), HW_ORIGIN_APP);
    assert_int_equal(native("/srv/app/nodes", "/srv/app/nodes"), HW_ORIGIN_APP);
    /* C extensions: as their directory says */
    assert_int_equal(native("/usr/lib/python3.11/lib-dynload/_ssl.cpython-311-x86_64-linux-gnu.so", exe),
                     HW_ORIGIN_STDLIB);
    assert_int_equal(native("/usr/lib/python3/dist-packages/numpy/core/_multiarray_umath.so", exe),
                     HW_ORIGIN_PACKAGE);
    assert_int_equal(native("/srv/app/node_modules/bcrypt/build/Release/bcrypt_lib.node", exe), HW_ORIGIN_PACKAGE);
    /* hangwatch's own, wherever installed */
    assert_int_equal(native("/usr/local/lib/hangwatch/libhangwatch-preload.so", exe), HW_ORIGIN_HANGWATCH);
    assert_int_equal(native("/usr/lib/libhangwatch.so.1", exe), HW_ORIGIN_HANGWATCH);
    assert_int_equal(native("/opt/hw/lib/libhangwatch-glib.so", exe), HW_ORIGIN_HANGWATCH);
}

static void test_origin_names(void **state)
{
    (void)state;
    for (int i = 0; i < HW_ORIGIN_COUNT; i++) {
        hw_frame_origin back = HW_ORIGIN_COUNT;
        assert_true(hw_frame_origin_parse(hw_frame_origin_name((hw_frame_origin)i), &back));
        assert_int_equal(back, i);
    }
    hw_frame_origin o;
    assert_false(hw_frame_origin_parse("apps", &o));
    assert_false(hw_frame_origin_parse(NULL, &o));
    assert_string_equal(hw_frame_origin_name((hw_frame_origin)99), "unknown");
}

static void test_rules(void **state)
{
    (void)state;
    /* prefixes hold what lies under them, not their namesakes */
    assert_true(hw_in_app_rule_matches("/srv/app/vendor", "/srv/app/vendor/chart.py"));
    assert_true(hw_in_app_rule_matches("/srv/app/vendor", "/srv/app/vendor"));
    assert_true(hw_in_app_rule_matches("/srv/app/vendor/", "/srv/app/vendor/chart.py"));
    assert_false(hw_in_app_rule_matches("/srv/app/vendor", "/srv/app/vendors/chart.py"));
    /* globs: '*' crosses '/' */
    assert_true(hw_in_app_rule_matches("/srv/app/vendor/*", "/srv/app/vendor/lib/chart.py"));
    assert_true(hw_in_app_rule_matches("*/flask/*", "/usr/lib/python3/dist-packages/flask/app.py"));
    assert_false(hw_in_app_rule_matches("/srv/app/vendor/*", "/srv/app/main.py"));
    assert_false(hw_in_app_rule_matches("/srv", NULL));
    assert_false(hw_in_app_rule_matches("/srv", ""));

    const char *why = NULL;
    assert_true(hw_in_app_rule_valid("/srv/app/vendor/*", &why));
    assert_false(hw_in_app_rule_valid("", &why));
    assert_non_null(why);
    assert_false(hw_in_app_rule_valid("/srv/[abc", &why));
    assert_false(hw_in_app_rule_valid("/srv/\tx", &why));
    char long_pattern[1100];
    memset(long_pattern, 'a', sizeof long_pattern - 1);
    long_pattern[sizeof long_pattern - 1] = '\0';
    assert_false(hw_in_app_rule_valid(long_pattern, &why));
}

static void test_rule_verdicts(void **state)
{
    (void)state;
    hw_frame_place vendored = {.source_file = "/srv/app/vendor/chart.py"};
    hw_frame_place own = {.source_file = "/srv/app/dashboard.py"};
    hw_frame_place flask = {.source_file = "/usr/lib/python3/dist-packages/flask/app.py"};
    hw_frame_place lib = {.native = true, .object_path = "/usr/lib/x86_64-linux-gnu/libpricing.so.1"};
    hw_frame_place preload = {.native = true, .object_path = "/usr/lib/hangwatch/libhangwatch-preload.so"};
    bool by_rule = true;

    /* defaults */
    assert_true(hw_frame_in_app(&own, hw_frame_origin_of(&own), NULL, 0, &by_rule));
    assert_false(by_rule);
    assert_false(hw_frame_in_app(&flask, hw_frame_origin_of(&flask), NULL, 0, NULL));
    assert_false(hw_frame_in_app(&lib, hw_frame_origin_of(&lib), NULL, 0, NULL));

    hw_in_app_rule rules[] = {
        {"/srv/app/vendor/*", false},
        {"*/flask/*", true},
        {"/usr/lib/x86_64-linux-gnu/libpricing.so.1", true},
        {"*", true}, /* even "everything" leaves hangwatch's frames out */
    };
    assert_false(hw_frame_in_app(&vendored, hw_frame_origin_of(&vendored), rules, 1, &by_rule));
    assert_true(by_rule);
    assert_true(hw_frame_in_app(&own, hw_frame_origin_of(&own), rules, 1, &by_rule));
    assert_false(by_rule);
    assert_true(hw_frame_in_app(&flask, hw_frame_origin_of(&flask), rules, 2, NULL));
    assert_true(hw_frame_in_app(&lib, hw_frame_origin_of(&lib), rules, 3, NULL));
    assert_false(hw_frame_in_app(&preload, hw_frame_origin_of(&preload), rules, 4, NULL));
    /* the last rule that matches wins */
    hw_in_app_rule order[] = {{"/srv/app/vendor", true}, {"/srv/app/vendor/*", false}};
    assert_false(hw_frame_in_app(&vendored, HW_ORIGIN_APP, order, 2, NULL));
    hw_in_app_rule reversed[] = {{"/srv/app/vendor/*", false}, {"/srv/app/vendor", true}};
    assert_true(hw_frame_in_app(&vendored, HW_ORIGIN_APP, reversed, 2, NULL));
    /* a native frame's source file counts too (a vendored C library
     * compiled into the program) */
    hw_frame_place c_vendored = {.native = true, .object_path = "/srv/app/bin/orders",
                                 .source_file = "/srv/app/vendor/zstd/zstd.c", .executable = "/srv/app/bin/orders"};
    assert_false(hw_frame_in_app(&c_vendored, hw_frame_origin_of(&c_vendored), rules, 1, NULL));
}

#define APP(named) {HW_ORIGIN_APP, true, false, named, false, false}
#define PY(origin, in_app) {origin, in_app, true, true, false, false}
#define SYS {HW_ORIGIN_SYSTEM, false, false, true, false, false}
#define RUNTIME(machinery) {HW_ORIGIN_RUNTIME, false, false, true, machinery, false}
#define HW {HW_ORIGIN_HANGWATCH, false, false, true, false, false}
#define STUB(origin, in_app) {origin, in_app, false, true, false, true}

static void test_culprit(void **state)
{
    (void)state;
    /* urllib under the user's handler: the handler */
    hw_culprit_facts urllib[] = {SYS, RUNTIME(false), PY(HW_ORIGIN_STDLIB, false), PY(HW_ORIGIN_STDLIB, false),
                                 RUNTIME(true), PY(HW_ORIGIN_APP, true), PY(HW_ORIGIN_PACKAGE, false)};
    assert_int_equal(hw_culprit_index(urllib, 7), 5);
    /* qsort's comparator sleeping: the comparator (the program's) */
    hw_culprit_facts qsort_stack[] = {SYS, SYS, SYS, APP(true), SYS, SYS, APP(true), APP(true)};
    assert_int_equal(hw_culprit_index(qsort_stack, 8), 3);
    /* a Python stack of nothing but the standard library: its innermost
     * Python frame */
    hw_culprit_facts stdlib_only[] = {SYS, RUNTIME(true), PY(HW_ORIGIN_STDLIB, false), PY(HW_ORIGIN_STDLIB, false)};
    assert_int_equal(hw_culprit_index(stdlib_only, 4), 2);
    /* an interpreter whose frames were not read: its innermost frame that
     * is not machinery (time_sleep), never hangwatch's wrapper */
    hw_culprit_facts unread[] = {SYS, HW, RUNTIME(false), RUNTIME(true), RUNTIME(true)};
    assert_int_equal(hw_culprit_index(unread, 5), 2);
    /* nothing but system frames and hangwatch's: the innermost system one */
    hw_culprit_facts system_only[] = {HW, SYS, SYS};
    assert_int_equal(hw_culprit_index(system_only, 3), 1);
    hw_culprit_facts own_only[] = {HW, HW};
    assert_int_equal(hw_culprit_index(own_only, 2), SIZE_MAX);
    assert_int_equal(hw_culprit_index(NULL, 0), SIZE_MAX);
    /* unnamed frames come last */
    hw_culprit_facts unnamed[] = {{HW_ORIGIN_UNKNOWN, false, false, false, false, false}, SYS};
    assert_int_equal(hw_culprit_index(unnamed, 2), 1);
    /* stopped in the program's PLT stub on its way to clock_gettime: the
     * caller, not the stub (the program's file, in_app by its object) */
    hw_culprit_facts in_stub[] = {STUB(HW_ORIGIN_APP, true), APP(true), APP(true), SYS};
    assert_int_equal(hw_culprit_index(in_stub, 4), 1);
    /* a library's stub under a system caller: that caller */
    hw_culprit_facts library_stub[] = {STUB(HW_ORIGIN_SYSTEM, false), SYS, HW};
    assert_int_equal(hw_culprit_index(library_stub, 3), 1);
    /* nothing but a stub: the stub, as the last resort */
    hw_culprit_facts stub_only[] = {HW, STUB(HW_ORIGIN_APP, true)};
    assert_int_equal(hw_culprit_index(stub_only, 2), 1);
}

static void test_call_stub_names(void **state)
{
    (void)state;
    assert_true(hw_frame_is_call_stub("clock_gettime@plt"));
    assert_true(hw_frame_is_call_stub("[plt]"));
    assert_false(hw_frame_is_call_stub("@plt"));
    assert_false(hw_frame_is_call_stub("plt"));
    assert_false(hw_frame_is_call_stub("compute_invoice"));
    assert_false(hw_frame_is_call_stub("foo@plt2"));
    assert_false(hw_frame_is_call_stub(NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_python_files), cmocka_unit_test(test_javascript_files),
        cmocka_unit_test(test_native_objects), cmocka_unit_test(test_origin_names),
        cmocka_unit_test(test_rules), cmocka_unit_test(test_rule_verdicts), cmocka_unit_test(test_culprit),
        cmocka_unit_test(test_call_stub_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
