"""kernel_observer_vm - the kernel observer's tests on the kernel users run.

This machine's kernel may lack what the fentry attachment needs (BPF
tracing programs), so the tests boot Debian's stock kernel
(linux-image-amd64, fetched with `apt-get download` and unpacked in the
build tree, never installed) under QEMU, on an initramfs of busybox, hangwatch, bpftool and the test
loops with the shared libraries they need.  tests/vm/guest_tests.sh is its
/init: it runs the tests and prints a line per test on the serial console.
Besides the kernel observer's tests, the machine is where a hang's `time`
section meets cgroup v2 (this project's machine has v1).

KVM is used only when it works: /dev/kvm can be there and still not run a
guest (a nested hypervisor's: QEMU aborts at once, or the guest never
prints), so a tiny guest (busybox, one echo) is booted with KVM first,
under a deadline; when it does not say it ran, the machine is emulated in
software (TCG), and the results say which, and why.

    kernel_observer_vm.py boot BUILD_DIR SOURCE_DIR
        boots the machine once and writes BUILD_DIR/vm/results: one line per
        test ("NAME pass WHAT WAS SEEN" or "NAME fail WHY"; HW_VM_TESTS=a,b
        in the environment runs only those), or "unavailable WHY" when
        QEMU or the kernel package cannot be had (exit 0 then: the tests
        report themselves skipped, by name)
    kernel_observer_vm.py check BUILD_DIR NAME
        the result of one test: exit 0 (passed), 1 (failed, with why), or
        77 (skipped, with why)
"""
import glob
import os
import shutil
import subprocess
import sys
import time

SKIP = 77
BOOT_DEADLINE_S = 300  # software emulation on a loaded machine
# A working KVM boots the probe guest in 1-3 s, on a loaded machine too; a
# broken one aborts at once or prints nothing for minutes.
KVM_PROBE_DEADLINE_S = 30
KVM_PROBE_WORD = "HANGWATCH-KVM-PROBE-RAN"
TESTS = ["watch_auto", "not_watched", "follow", "raw_syscall", "least_privilege", "cgroup_v2_throttled",
         "first_hang_after_attach", "asyncio_first_hang_after_attach", "other_user_idle"]
# What goes in the initramfs's /bin, from the build tree's bin/.
BUILT_PROGRAMS = ["hangwatch", "kernel-loop", "time-scenarios"]
# Debian's Python, for the asyncio loop of the coverage matrix
# (tests/coverage/loop_cell.py, put in the initramfs as /loop_cell.py):
# the interpreter and the files of the modules that program's asyncio row
# imports, found by importing them here.
PYTHON = "/usr/bin/python3"
PYTHON_IMPORTS = "asyncio, encodings.idna, selectors, subprocess, tempfile, threading, urllib.request, zlib"


def log(message):
    print(f"kernel_observer_vm: {message}", flush=True)


def run(args, **kwargs):
    return subprocess.run(args, capture_output=True, text=True, **kwargs)


def stock_kernel(cache):
    """Debian's stock kernel image, unpacked under `cache` (downloaded once):
    its path, or raise RuntimeError with why it cannot be had."""
    depends = run(["apt-cache", "depends", "linux-image-amd64"])
    package = None
    for line in depends.stdout.splitlines():
        line = line.strip()
        if line.startswith("Depends:") and line.split()[1].startswith("linux-image-"):
            package = line.split()[1]
            break
    if package is None:
        raise RuntimeError("apt knows no linux-image-amd64 (run apt-get update)")
    unpacked = os.path.join(cache, package)
    images = glob.glob(os.path.join(unpacked, "boot", "vmlinuz-*"))
    if images:
        return images[0]
    os.makedirs(cache, exist_ok=True)
    for old in glob.glob(os.path.join(cache, "*.deb")):
        os.unlink(old)
    got = run(["apt-get", "download", package], cwd=cache)
    debs = glob.glob(os.path.join(cache, package + "_*.deb"))
    if not debs:
        raise RuntimeError(f"apt-get download {package} failed: {got.stderr.strip()[-300:]}")
    shutil.rmtree(unpacked, ignore_errors=True)
    x = run(["dpkg-deb", "-x", debs[0], unpacked])
    images = glob.glob(os.path.join(unpacked, "boot", "vmlinuz-*"))
    if x.returncode != 0 or not images:
        raise RuntimeError(f"{debs[0]} could not be unpacked: {x.stderr.strip()}")
    os.unlink(debs[0])  # the image is kept, not the 70 MB package
    return images[0]


def shared_libraries(program):
    """The files `program` loads (ldd's paths, the dynamic loader too)."""
    out = run(["ldd", program]).stdout
    paths = []
    for line in out.splitlines():
        for word in line.split():
            if word.startswith("/") and os.path.exists(word):
                paths.append(word)
    return paths


def copy_into(root, path, where=None):
    target = os.path.join(root, (where or path).lstrip("/"))
    os.makedirs(os.path.dirname(target), exist_ok=True)
    if os.path.lexists(target):
        os.unlink(target)  # a busybox applet's link: replaced, never written through
    shutil.copy2(os.path.realpath(path), target)


def python_files():
    """Debian's Python (its real path, first) and the source, compiled and
    extension files of every module PYTHON_IMPORTS loads, or [] when it is
    not installed."""
    if not os.access(PYTHON, os.X_OK):
        return []
    listing = run([PYTHON, "-c", f"import sys, {PYTHON_IMPORTS}\n"
                   "for m in list(sys.modules.values()):\n"
                   "    for f in (getattr(m, '__file__', None), getattr(m, '__cached__', None)):\n"
                   "        print(f or '')"])
    if listing.returncode != 0:
        raise RuntimeError(f"{PYTHON} could not import what the guest's asyncio loop needs: {listing.stderr[-300:]}")
    modules = {f for f in listing.stdout.splitlines() if f.startswith("/") and os.path.isfile(f)}
    return [os.path.realpath(PYTHON)] + sorted(modules)


def build_initramfs(vm_dir, build_dir, init_script, programs=BUILT_PROGRAMS, with_python=False):
    """The initramfs (newc cpio, uncompressed) with `init_script` as its
    /init (which sources /guest_common.sh, tests/vm/guest_common.sh) and
    `programs` from the build tree's bin/, and with Python and
    /loop_cell.py if `with_python` and Debian's Python is installed: its
    path."""
    root = os.path.join(vm_dir, "root")
    shutil.rmtree(root, ignore_errors=True)
    for d in ("bin", "sbin", "proc", "sys", "dev", "tmp", "lib64", "etc"):
        os.makedirs(os.path.join(root, d))
    busybox = shutil.which("busybox") or "/bin/busybox"
    copy_into(root, busybox, "/bin/busybox")
    applets = run([busybox, "--list"]).stdout.split()
    for applet in applets:
        link = os.path.join(root, "bin", applet)
        if not os.path.exists(link):
            os.symlink("busybox", link)
    programs = [os.path.join(build_dir, "bin", p) for p in programs]
    programs.append(shutil.which("bpftool", path="/usr/sbin:/sbin:/usr/bin") or "/usr/sbin/bpftool")
    libraries = set()
    # util-linux's setpriv, to become another user with capabilities
    # (busybox's cannot change users, and its shell runs its own applet for
    # the bare name: the guest calls it as /usr/bin/setpriv).
    copy_into(root, "/usr/bin/setpriv")
    libraries.update(shared_libraries("/usr/bin/setpriv"))
    for program in programs:
        copy_into(root, program, "/bin/" + os.path.basename(program))
        libraries.update(shared_libraries(program))
    # Python at its own paths (it finds its library from where it is), its
    # extension modules' libraries too, and the program it runs.
    python = python_files() if with_python else []
    for path in python:
        copy_into(root, path)
        if path.endswith(".so") or path == python[0]:
            libraries.update(shared_libraries(path))
    if python:
        os.symlink(os.path.basename(os.path.realpath(PYTHON)), os.path.join(root, PYTHON.lstrip("/")))
        copy_into(root, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "coverage", "loop_cell.py"),
                  "/loop_cell.py")
    for library in libraries:
        copy_into(root, library)
    init = os.path.join(root, "init")
    shutil.copy(init_script, init)
    shutil.copy(os.path.join(os.path.dirname(os.path.abspath(__file__)), "guest_common.sh"),
                os.path.join(root, "guest_common.sh"))
    os.chmod(init, 0o755)
    image = os.path.join(vm_dir, "initramfs.cpio")
    names = run(["find", "."], cwd=root).stdout
    with open(image, "wb") as out:
        cpio = subprocess.run(["cpio", "-o", "-H", "newc", "--quiet"], cwd=root, input=names.encode(), stdout=out,
                              stderr=subprocess.PIPE)
    if cpio.returncode != 0:
        raise RuntimeError(f"cpio failed: {cpio.stderr.decode().strip()}")
    return image


def prepare(vm_dir, build_dir, init_script, programs=BUILT_PROGRAMS, with_python=False):
    """(qemu, kernel, initramfs), or raise RuntimeError saying what is missing."""
    qemu = shutil.which("qemu-system-x86_64")
    if qemu is None:
        raise RuntimeError("qemu-system-x86_64 is not installed (Debian's qemu-system-x86)")
    for tool in ("busybox", "cpio", "apt-get", "dpkg-deb"):
        if shutil.which(tool) is None:
            raise RuntimeError(f"{tool} is not installed")
    kernel = stock_kernel(os.path.join(vm_dir, "kernel"))
    return qemu, kernel, build_initramfs(vm_dir, build_dir, init_script, programs, with_python)


KVM = ["-accel", "kvm", "-cpu", "host"]
TCG = ["-accel", "tcg,thread=multi", "-cpu", "max"]


def boot_qemu(qemu, kernel, initramfs, accel, console_path, append="", cpus=1, memory_mb=1024,
              deadline_s=BOOT_DEADLINE_S):
    """One boot until the guest powers off or `deadline_s` passes: the
    console's lines (QEMU's own errors among them), how it ended and how
    long it ran."""
    args = [qemu, "-nodefaults", "-no-user-config", "-display", "none", "-serial", "stdio", "-no-reboot",
            "-m", str(memory_mb), "-smp", str(cpus), *accel, "-kernel", kernel, "-initrd", initramfs,
            "-append", ("console=ttyS0 quiet panic=-1 rdinit=/init " + append).strip()]
    start = time.monotonic()
    with open(console_path, "w") as console:
        try:
            vm = subprocess.run(args, stdout=console, stderr=subprocess.STDOUT, timeout=deadline_s)
            ended = f"exit {vm.returncode}"
        except subprocess.TimeoutExpired:
            ended = f"killed after {deadline_s} s"
    elapsed = time.monotonic() - start
    with open(console_path, errors="replace") as f:
        return [line.strip() for line in f.read().splitlines()], ended, elapsed


def probe_initramfs(vm_dir):
    """An initramfs whose /init only says it ran and powers off."""
    root = os.path.join(vm_dir, "probe-root")
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(os.path.join(root, "bin"))
    copy_into(root, shutil.which("busybox") or "/bin/busybox", "/bin/busybox")
    init = os.path.join(root, "init")
    with open(init, "w") as f:
        f.write(f"#!/bin/busybox sh\n/bin/busybox echo {KVM_PROBE_WORD}\n/bin/busybox reboot -f\n")
    os.chmod(init, 0o755)
    image = os.path.join(vm_dir, "probe.cpio")
    with open(image, "wb") as out:
        cpio = subprocess.run(["cpio", "-o", "-H", "newc", "--quiet"], cwd=root, input=b"./bin\n./bin/busybox\n./init\n",
                              stdout=out, stderr=subprocess.PIPE)
    if cpio.returncode != 0:
        raise RuntimeError(f"cpio failed: {cpio.stderr.decode().strip()}")
    return image


def choose_accelerator(qemu, kernel, vm_dir):
    """(QEMU's accelerator arguments, why they were chosen): KVM if a probe
    guest booted with it said it ran within KVM_PROBE_DEADLINE_S, software
    emulation otherwise."""
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return TCG, "software emulation: no usable /dev/kvm"
    try:
        image = probe_initramfs(vm_dir)
    except (OSError, RuntimeError) as e:
        return TCG, f"software emulation: the KVM probe guest could not be built ({e})"
    console, ended, elapsed = boot_qemu(qemu, kernel, image, KVM, os.path.join(vm_dir, "kvm-probe.log"),
                                        memory_mb=256, deadline_s=KVM_PROBE_DEADLINE_S)
    if any(KVM_PROBE_WORD in line for line in console):
        return KVM, f"KVM: a probe guest booted with it in {elapsed:.1f} s"
    said = next((line for line in console if "qemu" in line.lower() or "kvm" in line.lower()), "")
    return TCG, (f"software emulation: /dev/kvm is there but a probe guest booted with KVM did not run "
                 f"({ended} after {elapsed:.1f} s{'; ' + said if said else ', nothing printed'})")


def run_vm(machine, console_path, append="", cpus=1, deadline_s=BOOT_DEADLINE_S):
    """Boot `machine` (from prepare) until it powers off, on the
    accelerator that works here: the console's lines, how it ended, how
    long it ran and which accelerator it had, and why."""
    qemu, kernel, initramfs = machine
    accel, why = choose_accelerator(qemu, kernel, os.path.dirname(os.path.abspath(console_path)))
    log(f"accelerator: {why}")
    log(f"booting {os.path.basename(kernel)} ({' '.join(accel)}, {cpus} cpu)")
    console, ended, elapsed = boot_qemu(qemu, kernel, initramfs, accel, console_path, append, cpus,
                                        deadline_s=deadline_s)
    return console, ended, elapsed, why


def boot(build_dir, source_dir):
    vm_dir = os.path.join(build_dir, "vm")
    os.makedirs(vm_dir, exist_ok=True)
    results = os.path.join(vm_dir, "results")
    try:
        machine = prepare(vm_dir, build_dir, os.path.join(source_dir, "tests", "vm", "guest_tests.sh"),
                          with_python=True)
    except RuntimeError as e:
        with open(results, "w") as f:
            f.write(f"unavailable {e}\n")
        log(f"unavailable: {e}")
        return 0
    wanted = os.environ.get("HW_VM_TESTS", "")
    tests = [t for t in wanted.split(",") if t] or TESTS
    console_path = os.path.join(vm_dir, "console.log")
    console, ended, elapsed, accelerator = run_vm(machine, console_path, "HW_VM_TESTS=" + ",".join(tests))
    lines = [f"accelerator {accelerator}"]
    for line in console:
        if line.startswith("VMRESULT "):
            lines.append(line[len("VMRESULT "):])
        elif line.startswith("VMINFO "):
            log(line[len("VMINFO "):])
    seen = {line.split()[0] for line in lines[1:]}
    for name in tests:
        if name not in seen:
            lines.append(f"{name} fail no result: the machine ended ({ended}) before it; see {console_path}")
    with open(results, "w") as f:
        f.write("\n".join(lines) + "\n")
    log(f"the machine ran {elapsed:.1f} s ({ended}); results in {results}")
    for line in lines:
        log(line)
    return 0


def check(build_dir, name):
    results = os.path.join(build_dir, "vm", "results")
    try:
        with open(results) as f:
            lines = f.read().splitlines()
    except OSError as e:
        print(f"{name}: no results ({e}): the vm_boot test did not run")
        return 1
    accelerator = ""
    for line in lines:
        word, _, rest = line.partition(" ")
        if word == "accelerator":
            accelerator = rest
        elif word == "unavailable":
            print(f"{name}: skipped: {rest}")
            return SKIP
        if word == name:
            verdict, _, why = rest.partition(" ")
            print(f"{name} in the virtual machine ({accelerator}): {verdict} {why}".rstrip())
            return 0 if verdict == "pass" else 1
    print(f"{name}: no result in {results}")
    return 1


def main(argv):
    if len(argv) == 4 and argv[1] == "boot":
        return boot(argv[2], argv[3])
    if len(argv) == 4 and argv[1] == "check":
        return check(argv[2], argv[3])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
