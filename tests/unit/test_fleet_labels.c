/*
 * test_fleet_labels.c - who a process is for a fleet (core/parse/
 * container_id.h: docker, containerd, CRI-O, podman, Kubernetes pods and
 * systemd units from cgroup paths, both drivers) and which processes
 * `watch --all` takes (core/process_select.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/parse/container_id.h"
#include "core/process_select.h"

#define ID "3f2a9c1b7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a"

static void docker_both_drivers(void **state)
{
    (void)state;
    hw_container c;
    assert_true(hw_container_from_cgroup("/system.slice/docker-" ID ".scope", &c));
    assert_int_equal(c.kind, HW_CONTAINER_DOCKER);
    assert_string_equal(c.id, ID);
    assert_string_equal(c.runtime, "docker");
    assert_string_equal(c.unit, "");
    assert_true(hw_container_from_cgroup("/docker/" ID, &c));
    assert_int_equal(c.kind, HW_CONTAINER_DOCKER);
    assert_string_equal(c.runtime, "docker");
    char label[32];
    hw_container_label(&c, label, sizeof label);
    assert_string_equal(label, "3f2a9c1b7d6e");
}

static void kubernetes_pods(void **state)
{
    (void)state;
    hw_container c;
    assert_true(hw_container_from_cgroup("/kubepods/burstable/pod7e57c2a0-1b2c-4d3e-8f90-a1b2c3d4e5f6/" ID, &c));
    assert_int_equal(c.kind, HW_CONTAINER_KUBERNETES);
    assert_string_equal(c.pod_uid, "7e57c2a0-1b2c-4d3e-8f90-a1b2c3d4e5f6");
    assert_string_equal(c.id, ID);
    assert_true(hw_container_from_cgroup("/kubepods.slice/kubepods-burstable.slice/"
                                         "kubepods-burstable-pod7e57c2a0_1b2c_4d3e_8f90_a1b2c3d4e5f6.slice/"
                                         "cri-containerd-" ID ".scope",
                                         &c));
    assert_int_equal(c.kind, HW_CONTAINER_KUBERNETES);
    assert_string_equal(c.pod_uid, "7e57c2a0-1b2c-4d3e-8f90-a1b2c3d4e5f6");
    assert_string_equal(c.runtime, "containerd");
    assert_true(hw_container_from_cgroup("/kubepods.slice/kubepods-pod7e57c2a0_1b2c_4d3e_8f90_a1b2c3d4e5f6.slice/"
                                         "crio-" ID ".scope",
                                         &c));
    assert_string_equal(c.runtime, "cri-o");
    assert_int_equal(c.kind, HW_CONTAINER_KUBERNETES);
}

static void podman_and_units(void **state)
{
    (void)state;
    hw_container c;
    assert_true(hw_container_from_cgroup("/machine.slice/libpod-" ID ".scope/container", &c));
    assert_int_equal(c.kind, HW_CONTAINER_PODMAN);
    assert_true(hw_container_from_cgroup("/system.slice/nginx.service", &c));
    assert_int_equal(c.kind, HW_CONTAINER_SYSTEMD);
    assert_string_equal(c.unit, "nginx.service");
    assert_string_equal(c.slice, "system.slice");
    char label[32];
    hw_container_label(&c, label, sizeof label);
    assert_string_equal(label, "nginx.service");
    assert_true(hw_container_from_cgroup("/user.slice/user-1000.slice/session-2.scope", &c));
    assert_string_equal(c.unit, "session-2.scope");
    assert_string_equal(c.slice, "user-1000.slice");
}

static void what_is_not_a_container(void **state)
{
    (void)state;
    hw_container c;
    assert_false(hw_container_from_cgroup("/", &c));
    assert_false(hw_container_from_cgroup("", &c));
    assert_false(hw_container_from_cgroup("relative/docker-" ID ".scope", &c));
    /* an id one digit short, an upper-case one, a pod UID of the wrong shape */
    assert_false(hw_container_from_cgroup("/docker/3f2a9c1b7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0", &c));
    assert_false(hw_container_from_cgroup("/docker/3F2A9C1B7D6E5F4A3B2C1D0E9F8A7B6C5D4E3F2A1B0C9D8E7F6A5B4C3D2E1F0A", &c));
    hw_container_from_cgroup("/kubepods/podnot-a-uid/" ID, &c);
    assert_int_equal(c.kind, HW_CONTAINER_DOCKER); /* no pod: a container all the same */
    assert_string_equal(c.pod_uid, "");
    assert_false(hw_container_from_cgroup("/kubepods-burstable-pod.slice", &c));
    /* a path too long is refused whole */
    char longpath[5000];
    memset(longpath, 'a', sizeof longpath - 1);
    longpath[0] = '/';
    longpath[sizeof longpath - 1] = '\0';
    assert_false(hw_container_from_cgroup(longpath, &c));
}

static void selectors(void **state)
{
    (void)state;
    hw_process_facts f = {.comm = "nginx", .exe = "/usr/sbin/nginx", .cgroup_count = 1, .uid_known = true,
                          .uid = 33};
    f.cgroups[0] = "/system.slice/nginx.service";
    assert_true(hw_process_selected(NULL, 0, &f)); /* no selector: every process */
    hw_process_selector s[4] = {{.kind = HW_SELECT_COMM, .pattern = "python3"},
                                {.kind = HW_SELECT_COMM, .pattern = "nginx"}};
    assert_true(hw_process_selected(s, 2, &f)); /* one of a kind */
    s[2] = (hw_process_selector){.kind = HW_SELECT_USER, .uid = 0};
    assert_false(hw_process_selected(s, 3, &f)); /* and every kind */
    s[2] = (hw_process_selector){.kind = HW_SELECT_CGROUP, .pattern = "/system.slice/*"};
    assert_true(hw_process_selected(s, 3, &f));
    s[3] = (hw_process_selector){.kind = HW_SELECT_EXE, .exclude = true, .pattern = "/usr/sbin/*"};
    assert_false(hw_process_selected(s, 4, &f)); /* an exclusion wins */
    f.exe = NULL; /* unknown: the exclusion does not apply, an --exe would not match */
    assert_true(hw_process_selected(s, 4, &f));
    hw_select_kind kind;
    const char *value;
    assert_true(hw_select_exclusion_parse("cgroup=/kubepods/*", &kind, &value));
    assert_int_equal(kind, HW_SELECT_CGROUP);
    assert_string_equal(value, "/kubepods/*");
    assert_false(hw_select_exclusion_parse("comm=", &kind, &value));
    assert_false(hw_select_exclusion_parse("pid=3", &kind, &value));
    assert_true(hw_select_path_pattern_valid("/usr/bin/*"));
    assert_false(hw_select_path_pattern_valid("usr/bin"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(docker_both_drivers), cmocka_unit_test(kubernetes_pods),
        cmocka_unit_test(podman_and_units),    cmocka_unit_test(what_is_not_a_container),
        cmocka_unit_test(selectors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
