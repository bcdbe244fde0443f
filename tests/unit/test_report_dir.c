/*
 * test_report_dir.c - the report directory held by descriptor: what
 * hw_report_dir_open refuses (a regular file, symlinks as the last
 * component, a directory others may write to or own) and creates (missing
 * directories, 0700); that writes are private, atomic and never follow a
 * planted symlink; that reads refuse symlinks, other files and oversized
 * ones; and that only our own hang-*.json files count toward the limits.
 * The checks about other users' files need root and are skipped otherwise.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/common/report_dir.h"

#define NOBODY_UID 65534

typedef struct scratch {
    char base[64]; /* a private temporary directory, removed afterwards */
} scratch;

static int make_scratch(void **state)
{
    scratch *s = calloc(1, sizeof *s);
    assert_non_null(s);
    strcpy(s->base, "/tmp/hw-report-dir-test-XXXXXX");
    assert_non_null(mkdtemp(s->base));
    *state = s;
    return 0;
}

static int remove_scratch(void **state)
{
    scratch *s = *state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", s->base);
    int rc = system(cmd);
    free(s);
    return rc == 0 ? 0 : -1;
}

static const char *in(const scratch *s, const char *name, char buf[256])
{
    snprintf(buf, 256, "%s/%s", s->base, name);
    return buf;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
}

static char *read_whole(const char *path)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    static char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

/* Entries other than . and .., and how many of them are temporary files. */
static int count_entries(const char *dir, int *temporaries)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    *temporaries = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        n++;
        if (strstr(e->d_name, ".tmp"))
            (*temporaries)++;
    }
    closedir(d);
    return n;
}

/* Expect hw_report_dir_open(path) to fail with `err` and a reason naming `needle`. */
static void expect_refused(const char *path, int err, const char *needle)
{
    hw_report_dir *d = (hw_report_dir *)0x1;
    char why[512] = "";
    int rc = hw_report_dir_open(path, &d, why, sizeof why);
    if (rc != -err || !strstr(why, needle))
        fail_msg("open(%s): %d '%s', expected %d and a reason with '%s'", path, rc, why, -err, needle);
    assert_null(d);
}

static hw_report_dir *open_or_fail(const char *path)
{
    hw_report_dir *d = NULL;
    char why[512] = "";
    int rc = hw_report_dir_open(path, &d, why, sizeof why);
    if (rc != 0)
        fail_msg("open(%s): %d %s", path, rc, why);
    assert_non_null(d);
    return d;
}

static void test_open_refuses_a_regular_file(void **state)
{
    scratch *s = *state;
    char file[256];
    write_file(in(s, "plain", file), "x");
    expect_refused(file, ENOTDIR, "regular file");
    char below[300];
    snprintf(below, sizeof below, "%s/reports", file);
    expect_refused(below, ENOTDIR, "not a directory");
}

static void test_open_refuses_symlinks_as_last_component(void **state)
{
    scratch *s = *state;
    char dangling[256], real[256], link[256], with_slash[300];
    assert_int_equal(symlink("/nonexistent/hangwatch-reports", in(s, "dangling", dangling)), 0);
    expect_refused(dangling, ELOOP, "symbolic link");
    /* Nothing was created where the dangling link points. */
    struct stat st;
    assert_int_not_equal(lstat("/nonexistent/hangwatch-reports", &st), 0);

    assert_int_equal(mkdir(in(s, "real", real), 0700), 0);
    assert_int_equal(symlink(real, in(s, "link", link)), 0);
    expect_refused(link, ELOOP, "symbolic link");
    /* A trailing slash would make the kernel follow it: refused all the same. */
    snprintf(with_slash, sizeof with_slash, "%s//", link);
    expect_refused(with_slash, ELOOP, "symbolic link");

    /* A symlink among the parents is fine. */
    char through_parent[300];
    snprintf(through_parent, sizeof through_parent, "%s/reports", link);
    hw_report_dir *d = open_or_fail(through_parent);
    assert_string_equal(hw_report_dir_path(d), through_parent);
    hw_report_dir_close(d);
    char created[300];
    snprintf(created, sizeof created, "%s/reports", real);
    assert_int_equal(lstat(created, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
}

static void test_open_refuses_directories_others_can_write(void **state)
{
    scratch *s = *state;
    char open_to_all[256], open_to_group[256];
    assert_int_equal(mkdir(in(s, "all", open_to_all), 0700), 0);
    assert_int_equal(chmod(open_to_all, 0777), 0);
    expect_refused(open_to_all, EPERM, "chmod go-w");
    assert_int_equal(chmod(open_to_all, 01777), 0); /* sticky like /tmp: still others' */
    /* a shared directory is never to be changed: a directory of one's own
     * is the advice */
    expect_refused(open_to_all, EPERM, "hangwatch-reports (hangwatch makes it, mode 0700)");
    char why[512];
    hw_report_dir *d = NULL;
    assert_true(hw_report_dir_open(open_to_all, &d, why, sizeof why) < 0);
    assert_null(strstr(why, "chmod"));
    assert_int_equal(mkdir(in(s, "group", open_to_group), 0700), 0);
    assert_int_equal(chmod(open_to_group, 0770), 0);
    expect_refused(open_to_group, EPERM, "its group");
    /* Readable by others is not a risk. */
    assert_int_equal(chmod(open_to_group, 0755), 0);
    hw_report_dir_close(open_or_fail(open_to_group));
}

static void test_open_refuses_another_users_directory(void **state)
{
    if (geteuid() != 0)
        skip(); /* making a directory another user owns needs root */
    scratch *s = *state;
    char theirs[256];
    assert_int_equal(mkdir(in(s, "theirs", theirs), 0700), 0);
    assert_int_equal(chown(theirs, NOBODY_UID, NOBODY_UID), 0);
    expect_refused(theirs, EPERM, "owned by uid 65534");
    expect_refused(theirs, EPERM, "chown");
}

static void test_open_creates_missing_directories_private(void **state)
{
    scratch *s = *state;
    char nested[256];
    in(s, "a/b/c", nested);
    mode_t old = umask(0);
    hw_report_dir *d = open_or_fail(nested);
    umask(old);
    const char *levels[] = {"a", "a/b", "a/b/c"};
    for (size_t i = 0; i < 3; i++) {
        char p[256];
        struct stat st;
        assert_int_equal(lstat(in(s, levels[i], p), &st), 0);
        assert_true(S_ISDIR(st.st_mode));
        assert_int_equal(st.st_mode & 07777, 0700);
    }
    int temporaries;
    assert_int_equal(count_entries(nested, &temporaries), 0); /* the writability probe is gone */
    hw_report_dir_close(d);
    /* An existing fit directory opens again. */
    hw_report_dir_close(open_or_fail(nested));
}

static void test_write_is_private_and_leaves_no_temporaries(void **state)
{
    scratch *s = *state;
    char dir[256], path[256];
    mode_t old = umask(0);
    hw_report_dir *d = open_or_fail(in(s, "reports", dir));
    assert_int_equal(hw_report_dir_write(d, "hang-1.json", "{\"a\": 1}\n", 9), 0);
    umask(old);
    struct stat st;
    assert_int_equal(lstat(in(s, "reports/hang-1.json", path), &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0600);
    assert_string_equal(read_whole(path), "{\"a\": 1}\n");
    assert_int_equal(hw_report_dir_write(d, "hang-1.json", "{\"a\": 2}\n", 9), 0); /* replaced whole */
    assert_string_equal(read_whole(path), "{\"a\": 2}\n");
    int temporaries;
    assert_int_equal(count_entries(dir, &temporaries), 1);
    assert_int_equal(temporaries, 0);

    /* A failed rename (a directory has the name) removes its temporary file. */
    char blocker[256], inside[256];
    assert_int_equal(mkdir(in(s, "reports/hang-2.json", blocker), 0700), 0);
    write_file(in(s, "reports/hang-2.json/keep", inside), "x");
    int rc = hw_report_dir_write(d, "hang-2.json", "{}", 2);
    assert_true(rc == -EISDIR || rc == -ENOTEMPTY || rc == -EEXIST);
    assert_int_equal(count_entries(dir, &temporaries), 2);
    assert_int_equal(temporaries, 0);

    /* Names with a slash are not names in the directory. */
    assert_int_equal(hw_report_dir_write(d, "../escape.json", "{}", 2), -EINVAL);
    assert_int_equal(hw_report_dir_write(d, "", "{}", 2), -EINVAL);
    hw_report_dir_close(d);
}

static void test_write_replaces_a_planted_symlink_without_following_it(void **state)
{
    scratch *s = *state;
    char dir[256], victim[256], planted[256];
    hw_report_dir *d = open_or_fail(in(s, "reports", dir));
    write_file(in(s, "victim", victim), "precious\n");
    assert_int_equal(symlink(victim, in(s, "reports/hang-9.json", planted)), 0);
    assert_int_equal(hw_report_dir_write(d, "hang-9.json", "{\"report\": 1}\n", 14), 0);
    struct stat st;
    assert_int_equal(lstat(planted, &st), 0);
    assert_true(S_ISREG(st.st_mode)); /* the link itself was replaced */
    assert_string_equal(read_whole(planted), "{\"report\": 1}\n");
    assert_string_equal(read_whole(victim), "precious\n");
    hw_report_dir_close(d);
}

static void test_read_refuses_symlinks_and_oversized_files(void **state)
{
    scratch *s = *state;
    char dir[256], p[256];
    hw_report_dir *d = open_or_fail(in(s, "reports", dir));
    assert_int_equal(hw_report_dir_write(d, "hang-1.json", "{\"x\": 1}", 8), 0);
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(hw_report_dir_read(d, "hang-1.json", &text, &len), 0);
    assert_int_equal(len, 8);
    assert_string_equal(text, "{\"x\": 1}");
    free(text);

    write_file(in(s, "outside.json", p), "{\"planted\": true}");
    char link[256];
    assert_int_equal(symlink(p, in(s, "reports/hang-link.json", link)), 0);
    text = (char *)0x1;
    assert_int_equal(hw_report_dir_read(d, "hang-link.json", &text, &len), -ELOOP);
    assert_null(text);

    /* One byte over the cap (sparse: no disk space used). */
    char big[256];
    int fd = open(in(s, "reports/hang-big.json", big), O_WRONLY | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)HW_REPORT_MAX_BYTES + 1), 0);
    close(fd);
    assert_int_equal(hw_report_dir_read(d, "hang-big.json", &text, &len), -EFBIG);
    assert_null(text);

    /* A FIFO is refused at once instead of waiting for a writer. */
    char fifo[256];
    assert_int_equal(mkfifo(in(s, "reports/hang-fifo.json", fifo), 0600), 0);
    assert_int_equal(hw_report_dir_read(d, "hang-fifo.json", &text, &len), -EINVAL);

    if (geteuid() == 0) {
        char theirs[256];
        write_file(in(s, "reports/hang-theirs.json", theirs), "{}");
        assert_int_equal(chown(theirs, NOBODY_UID, NOBODY_UID), 0);
        assert_int_equal(hw_report_dir_read(d, "hang-theirs.json", &text, &len), -EPERM);
    }
    assert_int_equal(hw_report_dir_read(d, "hang-missing.json", &text, &len), -ENOENT);
    hw_report_dir_close(d);
}

static void test_usage_counts_only_our_own_reports(void **state)
{
    scratch *s = *state;
    char dir[256], p[256];
    hw_report_dir *d = open_or_fail(in(s, "reports", dir));
    hw_report_dir_usage u = hw_report_dir_usage_now(d);
    assert_int_equal(u.reports_last_day, 0);
    assert_int_equal(u.bytes, 0);

    assert_int_equal(hw_report_dir_write(d, "hang-a.json", "0123456789", 10), 0);
    assert_int_equal(hw_report_dir_write(d, "hang-b.json", "01234", 5), 0);
    /* An old report: counts toward the size, not toward today's. */
    assert_int_equal(hw_report_dir_write(d, "hang-old.json", "012", 3), 0);
    struct timeval two_days_ago[2];
    gettimeofday(&two_days_ago[0], NULL);
    two_days_ago[0].tv_sec -= 2 * 24 * 3600;
    two_days_ago[1] = two_days_ago[0];
    assert_int_equal(utimes(in(s, "reports/hang-old.json", p), two_days_ago), 0);

    /* Not ours to count: a symlink with a report's name, other names. */
    char target[256];
    write_file(in(s, "big-outside", target), "a file outside, pointed at by a planted link");
    assert_int_equal(symlink(target, in(s, "reports/hang-x.json", p)), 0);
    assert_int_equal(mkdir(in(s, "reports/hang-dir.json", p), 0700), 0);
    write_file(in(s, "reports/notes.json", p), "not a report");
    write_file(in(s, "reports/hang-1.txt", p), "not a report");
    write_file(in(s, "reports/.hang-0123456789abcdef.tmp", p), "a temporary");
    if (geteuid() == 0) {
        write_file(in(s, "reports/hang-theirs.json", p), "planted by another user");
        assert_int_equal(chown(p, NOBODY_UID, NOBODY_UID), 0);
    }

    u = hw_report_dir_usage_now(d);
    assert_int_equal(u.reports_last_day, 2);
    assert_int_equal(u.bytes, 18);
    /* Counting twice gives the same (the listing starts over). */
    u = hw_report_dir_usage_now(d);
    assert_int_equal(u.reports_last_day, 2);
    hw_report_dir_close(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_open_refuses_a_regular_file, make_scratch, remove_scratch),
        cmocka_unit_test_setup_teardown(test_open_refuses_symlinks_as_last_component, make_scratch, remove_scratch),
        cmocka_unit_test_setup_teardown(test_open_refuses_directories_others_can_write, make_scratch, remove_scratch),
        cmocka_unit_test_setup_teardown(test_open_refuses_another_users_directory, make_scratch, remove_scratch),
        cmocka_unit_test_setup_teardown(test_open_creates_missing_directories_private, make_scratch, remove_scratch),
        cmocka_unit_test_setup_teardown(test_write_is_private_and_leaves_no_temporaries, make_scratch,
                                        remove_scratch),
        cmocka_unit_test_setup_teardown(test_write_replaces_a_planted_symlink_without_following_it, make_scratch,
                                        remove_scratch),
        cmocka_unit_test_setup_teardown(test_read_refuses_symlinks_and_oversized_files, make_scratch, remove_scratch),
        cmocka_unit_test_setup_teardown(test_usage_counts_only_our_own_reports, make_scratch, remove_scratch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
