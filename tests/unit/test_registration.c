/*
 * test_registration.c - hw_registration_parse, the agent's check of the
 * datagram any local process can send it: a well-formed registration is
 * accepted; a wrong size, magic or version, missing credentials, zero or two
 * page descriptors, truncation, a header longer than the buffer, a second
 * pidfd, a negative or one descriptor too many are refused; and whatever the
 * verdict, every descriptor that arrived is listed for the caller to close.
 * Messages are built with the CMSG macros, as the kernel lays them out.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "core/abi/registration.h"
#include "core/abi/shared_page.h"

/* A control buffer being filled, header after header. */
typedef struct control {
    struct {
        _Alignas(struct cmsghdr) char buf[512];
    } u;
    size_t len;
} control;

static void add(control *c, int type, const void *body, size_t body_len)
{
    assert_true(c->len + CMSG_SPACE(body_len) <= sizeof c->u.buf);
    struct cmsghdr *cm = (struct cmsghdr *)(void *)(c->u.buf + c->len);
    memset(cm, 0, CMSG_SPACE(body_len));
    cm->cmsg_len = CMSG_LEN(body_len);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = type;
    memcpy(CMSG_DATA(cm), body, body_len);
    c->len += CMSG_SPACE(body_len);
}

static void add_cred(control *c, pid_t pid)
{
    struct ucred cred = {.pid = pid, .uid = 1000, .gid = 1001};
    add(c, SCM_CREDENTIALS, &cred, sizeof cred);
}

static void add_fds(control *c, const int *fds, size_t n)
{
    add(c, SCM_RIGHTS, fds, n * sizeof(int));
}

static void add_fd(control *c, int fd)
{
    add_fds(c, &fd, 1);
}

static void add_pidfd(control *c, int fd)
{
    add(c, SCM_PIDFD, &fd, sizeof fd);
}

static hw_registration message(void)
{
    hw_registration m = {.magic = HW_REGISTRATION_MAGIC, .version = HW_PAGE_VERSION, .pid = 4242};
    return m;
}

/* The usual message: credentials, the page, the pidfd. */
static void well_formed(control *c)
{
    memset(c, 0, sizeof *c);
    add_cred(c, 4242);
    add_fd(c, 7);
    add_pidfd(c, 9);
}

static int parse(const hw_registration *m, size_t len, int flags, const control *c, hw_registration_parsed *p)
{
    return hw_registration_parse(m, len, flags, c ? c->u.buf : NULL, c ? c->len : 0, p);
}

static bool listed(const hw_registration_parsed *p, int fd)
{
    for (size_t i = 0; i < p->fd_count; i++)
        if (p->fds[i] == fd)
            return true;
    return false;
}

static void test_well_formed_is_accepted(void **state)
{
    (void)state;
    control c;
    well_formed(&c);
    hw_registration m = message();
    hw_registration_parsed p;
    assert_int_equal(parse(&m, sizeof m, 0, &c, &p), 0);
    assert_true(p.have_cred);
    assert_int_equal(p.pid, 4242);
    assert_int_equal(p.uid, 1000);
    assert_int_equal(p.gid, 1001);
    assert_int_equal(p.page_fd, 7);
    assert_int_equal(p.pidfd, 9);
    assert_int_equal(p.fd_count, 2);
    assert_true(listed(&p, 7) && listed(&p, 9));
}

static void test_without_pidfd_is_accepted(void **state)
{
    (void)state;
    control c = {0};
    add_fd(&c, 7);
    add_cred(&c, 4242); /* order does not matter */
    hw_registration m = message();
    hw_registration_parsed p;
    assert_int_equal(parse(&m, sizeof m, 0, &c, &p), 0);
    assert_int_equal(p.page_fd, 7);
    assert_int_equal(p.pidfd, -1);
    assert_int_equal(p.fd_count, 1);
}

static void test_wrong_size_is_refused(void **state)
{
    (void)state;
    control c;
    well_formed(&c);
    struct {
        hw_registration m;
        char extra[4];
    } longer = {message(), {0}};
    hw_registration_parsed p;
    assert_int_equal(parse(&longer.m, sizeof longer.m - 1, 0, &c, &p), -EBADMSG);
    assert_int_equal(hw_registration_parse(&longer, sizeof longer, 0, c.u.buf, c.len, &p), -EBADMSG);
    assert_int_equal(hw_registration_parse(NULL, 0, 0, c.u.buf, c.len, &p), -EBADMSG);
    /* refused, but what came is still listed */
    assert_true(listed(&p, 7) && listed(&p, 9));
}

static void test_wrong_magic_or_version_is_refused(void **state)
{
    (void)state;
    control c;
    well_formed(&c);
    hw_registration_parsed p;
    hw_registration m = message();
    m.magic ^= 1;
    assert_int_equal(parse(&m, sizeof m, 0, &c, &p), -EBADMSG);
    m = message();
    m.version = HW_PAGE_VERSION + 1;
    assert_int_equal(parse(&m, sizeof m, 0, &c, &p), -EBADMSG);
    assert_int_equal(p.fd_count, 2);
}

static void test_no_credentials_is_refused(void **state)
{
    (void)state;
    control c = {0};
    add_fd(&c, 7);
    add_pidfd(&c, 9);
    hw_registration m = message();
    hw_registration_parsed p;
    assert_int_equal(parse(&m, sizeof m, 0, &c, &p), -EBADMSG);
    assert_false(p.have_cred);
    assert_true(listed(&p, 7) && listed(&p, 9));
    /* credentials of pid 0 are no credentials */
    memset(&c, 0, sizeof c);
    add_cred(&c, 0);
    add_fd(&c, 7);
    assert_int_equal(parse(&m, sizeof m, 0, &c, &p), -EBADMSG);
    /* no control buffer at all */
    assert_int_equal(parse(&m, sizeof m, 0, NULL, &p), -EBADMSG);
    assert_int_equal(p.fd_count, 0);
    assert_int_equal(p.page_fd, -1);
}

static void test_zero_or_two_page_descriptors_are_refused(void **state)
{
    (void)state;
    hw_registration m = message();
    hw_registration_parsed p;
    control c = {0};
    add_cred(&c, 4242);
    add_pidfd(&c, 9);
    assert_int_equal(parse(&m, sizeof m, 0, &c, &p), -EBADMSG);
    assert_int_equal(p.page_fd, -1);

    int two[] = {7, 8};
    memset(&c, 0, sizeof c);
    add_cred(&c, 4242);
    add_fds(&c, two, 2);
    assert_int_equal(parse(&m, sizeof m, 0, &c, &p), -EBADMSG);
    assert_true(listed(&p, 7) && listed(&p, 8));

    memset(&c, 0, sizeof c); /* two SCM_RIGHTS of one each */
    add_cred(&c, 4242);
    add_fd(&c, 7);
    add_fd(&c, 8);
    assert_int_equal(parse(&m, sizeof m, 0, &c, &p), -EBADMSG);
    assert_int_equal(p.fd_count, 2);
    assert_true(listed(&p, 7) && listed(&p, 8));
}

static void test_truncation_is_refused(void **state)
{
    (void)state;
    control c;
    well_formed(&c);
    hw_registration m = message();
    hw_registration_parsed p;
    assert_int_equal(parse(&m, sizeof m, MSG_TRUNC, &c, &p), -EBADMSG);
    assert_int_equal(parse(&m, sizeof m, MSG_CTRUNC, &c, &p), -EBADMSG);
    assert_true(listed(&p, 7) && listed(&p, 9));
}

static void test_header_longer_than_the_buffer_is_refused(void **state)
{
    (void)state;
    control c;
    well_formed(&c);
    struct cmsghdr *last = (struct cmsghdr *)(void *)(c.u.buf + c.len - CMSG_SPACE(sizeof(int)));
    last->cmsg_len = c.len + 64; /* the pidfd header claims more than there is */
    hw_registration m = message();
    hw_registration_parsed p;
    assert_int_equal(parse(&m, sizeof m, 0, &c, &p), -EBADMSG);
    assert_false(listed(&p, 9)); /* not read from beyond the buffer */
    assert_true(listed(&p, 7));

    well_formed(&c);
    ((struct cmsghdr *)(void *)c.u.buf)->cmsg_len = sizeof(struct cmsghdr) - 1; /* shorter than a header */
    assert_int_equal(parse(&m, sizeof m, 0, &c, &p), -EBADMSG);
    assert_false(p.have_cred);
}

static void test_second_pidfd_is_refused(void **state)
{
    (void)state;
    control c;
    well_formed(&c);
    add_pidfd(&c, 10);
    hw_registration m = message();
    hw_registration_parsed p;
    assert_int_equal(parse(&m, sizeof m, 0, &c, &p), -EBADMSG);
    assert_int_equal(p.fd_count, 3);
    assert_true(listed(&p, 7) && listed(&p, 9) && listed(&p, 10));
}

/* Found by fuzz_registration: a forged first pidfd of -9 passed for "no
 * pidfd yet", so further pidfds were taken without complaint, filled the
 * list, and a message whose page descriptor was no longer listed was
 * accepted. */
static void test_negative_descriptors_are_refused(void **state)
{
    (void)state;
    control c = {0};
    add_cred(&c, 4242);
    add_pidfd(&c, -9);
    add_pidfd(&c, 10);
    add_fd(&c, 7);
    hw_registration m = message();
    hw_registration_parsed p;
    assert_int_equal(parse(&m, sizeof m, 0, &c, &p), -EBADMSG);
    assert_false(listed(&p, -9));
    assert_true(listed(&p, 10)); /* still closed by the caller */
    /* A negative pidfd is how the kernel says the sender is gone. */
    assert_true(p.pidfd_failed);
    assert_int_equal(p.pidfd, -1);

    memset(&c, 0, sizeof c);
    add_cred(&c, 4242);
    add_fd(&c, -1);
    assert_int_equal(parse(&m, sizeof m, 0, &c, &p), -EBADMSG);
    assert_int_equal(p.fd_count, 0);
}

static void test_too_many_descriptors_are_refused_and_listed(void **state)
{
    (void)state;
    int many[HW_REGISTRATION_MAX_FDS + 2];
    for (size_t i = 0; i < sizeof many / sizeof many[0]; i++)
        many[i] = 20 + (int)i;
    control c = {0};
    add_cred(&c, 4242);
    add_pidfd(&c, 9);
    add_fds(&c, many, sizeof many / sizeof many[0]);
    hw_registration m = message();
    hw_registration_parsed p;
    assert_int_equal(parse(&m, sizeof m, 0, &c, &p), -EBADMSG);
    assert_int_equal(p.fd_count, HW_REGISTRATION_MAX_FDS);
    assert_true(listed(&p, 9));
    for (size_t i = 0; i + 1 < HW_REGISTRATION_MAX_FDS; i++)
        assert_true(listed(&p, many[i]));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_well_formed_is_accepted),
        cmocka_unit_test(test_without_pidfd_is_accepted),
        cmocka_unit_test(test_wrong_size_is_refused),
        cmocka_unit_test(test_wrong_magic_or_version_is_refused),
        cmocka_unit_test(test_no_credentials_is_refused),
        cmocka_unit_test(test_zero_or_two_page_descriptors_are_refused),
        cmocka_unit_test(test_truncation_is_refused),
        cmocka_unit_test(test_header_longer_than_the_buffer_is_refused),
        cmocka_unit_test(test_second_pidfd_is_refused),
        cmocka_unit_test(test_negative_descriptors_are_refused),
        cmocka_unit_test(test_too_many_descriptors_are_refused_and_listed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
