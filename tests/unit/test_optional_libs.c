/*
 * test_optional_libs.c - the libraries hangwatch opens only when a feature
 * needs them (src/agent/common/optional_libs.c) load by their sonames, with
 * every function the features call, and each call goes to the real
 * library; and `hangwatch` itself is not linked against any of them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "agent/common/optional_libs.h"

static void test_curl_loads_and_answers(void **state)
{
    (void)state;
    char why[256] = "";
    const hw_curl_api *curl = hw_curl_api_load(why, sizeof why);
    assert_non_null(curl);
    assert_string_equal(why, "");
    assert_ptr_equal(hw_curl_api_load(NULL, 0), curl); /* loaded once */
    assert_string_equal(curl->easy_strerror(CURLE_OK), "No error");
    assert_int_equal(curl->global_init(CURL_GLOBAL_DEFAULT), CURLE_OK);
    CURL *handle = curl->easy_init();
    assert_non_null(handle);
    assert_int_equal(curl->easy_setopt(handle, CURLOPT_URL, "http://127.0.0.1:1/"), CURLE_OK);
    struct curl_slist *list = curl->slist_append(NULL, "X-Test: 1");
    assert_non_null(list);
    assert_string_equal(list->data, "X-Test: 1");
    curl->slist_free_all(list);
    curl->easy_cleanup(handle);
    curl->global_cleanup();
}

static void test_microhttpd_loads(void **state)
{
    (void)state;
    const hw_mhd_api *mhd = hw_mhd_api_load(NULL, 0);
    assert_non_null(mhd);
    char text[] = "hello";
    struct MHD_Response *r = mhd->create_response_from_buffer(strlen(text), text, MHD_RESPMEM_PERSISTENT);
    assert_non_null(r);
    assert_int_equal(mhd->add_response_header(r, "X-Test", "1"), MHD_YES);
    mhd->destroy_response(r);
}

static void test_systemd_loads(void **state)
{
    (void)state;
    const hw_systemd_api *sd = hw_systemd_api_load(NULL, 0);
    assert_non_null(sd);
    unsetenv("NOTIFY_SOCKET");
    assert_int_equal(sd->notify(0, "READY=1"), 0); /* no service manager: nothing to tell */
}

static void test_capstone_decodes(void **state)
{
    (void)state;
    const hw_capstone_api *cs = hw_capstone_api_load(NULL, 0);
    assert_non_null(cs);
    csh handle;
    assert_int_equal(cs->open(CS_ARCH_X86, CS_MODE_64, &handle), CS_ERR_OK);
    const uint8_t code[] = {0x0f, 0x05, 0xc3}; /* syscall; ret */
    cs_insn *insn = NULL;
    size_t n = cs->disasm(handle, code, sizeof code, 0x1000, 0, &insn);
    assert_int_equal(n, 2);
    assert_int_equal(insn[0].id, X86_INS_SYSCALL);
    assert_int_equal(insn[1].address, 0x1002);
    cs->free(insn, n);
    assert_int_equal(cs->close(&handle), CS_ERR_OK);
}

/* The point of loading them late: the binary does not need them. */
static void test_hangwatch_does_not_link_them(void **state)
{
    (void)state;
    const char *binary = getenv("HANGWATCH_BIN"); /* tests/CMakeLists.txt gives it */
    assert_non_null(binary);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "readelf -d '%s'", binary);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char line[512];
    int needed = 0;
    while (fgets(line, sizeof line, p)) {
        if (!strstr(line, "(NEEDED)"))
            continue;
        needed++;
        assert_null(strstr(line, "libcurl"));
        assert_null(strstr(line, "libmicrohttpd"));
        assert_null(strstr(line, "libsystemd"));
        assert_null(strstr(line, "libcapstone"));
    }
    assert_int_equal(pclose(p), 0);
    assert_true(needed > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_curl_loads_and_answers),
        cmocka_unit_test(test_microhttpd_loads),
        cmocka_unit_test(test_systemd_loads),
        cmocka_unit_test(test_capstone_decodes),
        cmocka_unit_test(test_hangwatch_does_not_link_them),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
