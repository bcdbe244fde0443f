/* test_config_file.c - watch --config's file (src/cli/config_file.c): the
 * lines it takes, the lines and files it refuses with their reason, the
 * command line winning over the file, and a reload's options. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent_options.h"
#include "config_file.h"

static char path[64];

static int make_file(void **state)
{
    (void)state;
    snprintf(path, sizeof path, "/tmp/hw-config-test-XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0)
        return -1;
    close(fd);
    return 0;
}

static int remove_file(void **state)
{
    (void)state;
    unlink(path);
    return 0;
}

static void write_file(const char *text, size_t len, mode_t mode)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, len, f), len);
    fclose(f);
    assert_int_equal(chmod(path, mode), 0);
}

static void write_text(const char *text, mode_t mode)
{
    write_file(text, strlen(text), mode);
}

/* The file's words joined by '|', or "ERR: why". */
static const char *read_back(const char *text, mode_t mode)
{
    static char out[4096];
    write_text(text, mode);
    hw_config_words w;
    char why[256];
    if (hw_config_read(path, &w, why, sizeof why) != 0) {
        snprintf(out, sizeof out, "ERR: %s", why);
        return out;
    }
    out[0] = '\0';
    for (size_t i = 0; i < w.count; i++)
        snprintf(out + strlen(out), sizeof out - strlen(out), "%s%s", i ? "|" : "", w.words[i]);
    hw_config_words_free(&w);
    return out;
}

static void test_lines_taken(void **state)
{
    (void)state;
    assert_string_equal(read_back("# comment\n\n  all\nthreshold   1500ms  \r\n\tcomm python3\n"
                                  "sentry-dsn https://k@host/1 # not a comment\nexclude comm=cron", 0600),
                        "--all|--threshold|1500ms|--comm|python3|--sentry-dsn|https://k@host/1 # not a comment|"
                        "--exclude|comm=cron");
    assert_string_equal(read_back("", 0644), "");
}

static void test_lines_refused(void **state)
{
    (void)state;
    assert_string_equal(read_back("all\nfrobnicate 1\n", 0600),
                        "ERR: line 2: 'frobnicate' is not an option of hangwatch watch");
    assert_string_equal(read_back("--threshold 1s\n", 0600),
                        "ERR: line 1: '--threshold': write the option without its leading '--'");
    assert_string_equal(read_back("threshold\n", 0600), "ERR: line 1: 'threshold' needs a value");
    assert_string_equal(read_back("\nall yes\n", 0600), "ERR: line 2: 'all' takes no value");
    assert_string_equal(read_back("config /etc/other\n", 0600),
                        "ERR: line 1: 'config' is not an option of hangwatch watch");
    assert_string_equal(read_back("comm a\x01b\n", 0600), "ERR: line 1 holds a control character");
    write_file("all\n\0threshold 1s\n", 17, 0600);
    hw_config_words w;
    char why[256];
    assert_int_equal(hw_config_read(path, &w, why, sizeof why), -1);
    assert_string_equal(why, "it holds a NUL byte: not a text file");
}

static void test_bounds(void **state)
{
    (void)state;
    char *text = malloc(HW_CONFIG_MAX_BYTES + 2);
    assert_non_null(text);
    memset(text, '#', HW_CONFIG_MAX_LINE + 1);
    text[HW_CONFIG_MAX_LINE + 1] = '\0';
    assert_string_equal(read_back(text, 0600), "ERR: line 1 is longer than 4096 characters");
    size_t n = 0;
    for (int i = 0; i <= HW_CONFIG_MAX_LINES; i++)
        text[n++] = '\n';
    text[n] = '\0';
    assert_string_equal(read_back(text, 0600), "ERR: more than 1024 lines");
    memset(text, '\n', HW_CONFIG_MAX_BYTES + 1);
    text[HW_CONFIG_MAX_BYTES + 1] = '\0';
    assert_string_equal(read_back(text, 0600), "ERR: longer than 65536 bytes");
    free(text);
}

static void test_files_refused(void **state)
{
    (void)state;
    assert_string_equal(read_back("all\n", 0620), "ERR: writable by its group or by others (chmod go-w)");
    assert_string_equal(read_back("all\n", 0602), "ERR: writable by its group or by others (chmod go-w)");
    hw_config_words w;
    char why[256];
    assert_int_equal(hw_config_read("/nonexistent/hangwatch.conf", &w, why, sizeof why), -1);
    assert_string_equal(why, "No such file or directory");
    assert_int_equal(hw_config_read("/tmp", &w, why, sizeof why), -1);
    assert_string_equal(why, "not a regular file");
}

/* The command line's options come after the file's: its value wins; a
 * reload gives the file's new options with the command line's again. */
static void test_command_line_wins_and_reload(void **state)
{
    (void)state;
    write_text("all\nthreshold 3s\ncomm first\n", 0600);
    char *argv[] = {"watch", "--config", path, "--check-period", "500ms", NULL};
    hw_agent_command_line line;
    int argc = 5;
    assert_ptr_equal(hw_config_path_in(argc, argv), path);
    hw_config_session *session = NULL;
    assert_int_equal(hw_config_parse_watch(path, argc, argv, &line, &session), -1);
    assert_non_null(session);
    assert_true(line.opts.watch_all);
    assert_int_equal(line.opts.detector.threshold_ns, 3000000000ull);
    assert_int_equal(line.opts.detector.check_period_ns, 500000000ull);
    assert_int_equal(line.opts.selector_count, 1);
    assert_string_equal(line.opts.selectors[0].pattern, "first");
    assert_int_equal(line.operands, argc); /* no operand: the file's words do not count */
    assert_non_null(line.opts.reload_config);

    write_text("all\nthreshold 1s\ncomm second\nexclude user=0\n", 0600);
    const hw_agent_options *fresh = line.opts.reload_config(line.opts.config_ctx);
    assert_non_null(fresh);
    assert_int_equal(fresh->detector.threshold_ns, 1000000000ull);
    assert_int_equal(fresh->detector.check_period_ns, 500000000ull);
    assert_int_equal(fresh->selector_count, 2);
    assert_string_equal(fresh->selectors[0].pattern, "second");
    assert_true(fresh->selectors[1].exclude);
    line.opts.release_config(line.opts.config_ctx, fresh);

    write_text("all\nthreshold abc\n", 0600);
    assert_null(line.opts.reload_config(line.opts.config_ctx));
    write_text("all\nthreshold 2s\n", 0666);
    assert_null(line.opts.reload_config(line.opts.config_ctx));
    /* the start's options are untouched by the reloads */
    assert_int_equal(line.opts.detector.threshold_ns, 3000000000ull);
    assert_string_equal(line.opts.selectors[0].pattern, "first");
    hw_config_session_free(session);
}

/* A command line that needs the file's options (a selector without --all
 * of its own) is parsed only with them; --config=FILE is found too. */
static void test_command_line_needs_the_file(void **state)
{
    (void)state;
    write_text("all\n", 0600);
    char option[96];
    snprintf(option, sizeof option, "--config=%s", path);
    char *argv[] = {"watch", "--comm", "nginx", option, NULL};
    assert_string_equal(hw_config_path_in(4, argv), path);
    hw_agent_command_line line;
    hw_config_session *session = NULL;
    assert_int_equal(hw_config_parse_watch(path, 4, argv, &line, &session), -1);
    assert_true(line.opts.watch_all);
    assert_int_equal(line.opts.selector_count, 1);
    hw_config_session_free(session);
    char *none[] = {"watch", "--all", "--", "--config", "x", NULL};
    assert_null(hw_config_path_in(5, none));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_lines_taken, make_file, remove_file),
        cmocka_unit_test_setup_teardown(test_lines_refused, make_file, remove_file),
        cmocka_unit_test_setup_teardown(test_bounds, make_file, remove_file),
        cmocka_unit_test_setup_teardown(test_files_refused, make_file, remove_file),
        cmocka_unit_test_setup_teardown(test_command_line_wins_and_reload, make_file, remove_file),
        cmocka_unit_test_setup_teardown(test_command_line_needs_the_file, make_file, remove_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
