"""hostile_registrant.py - a watched program that attacks its own agent, for
hangwatch's fault tests.  Run under `hangwatch run`; each mode ends with a
3 s hang the agent must still report, then exits 7.

  shrink    try to shrink the page the observer gave the agent (it is
            sealed: the kernel refuses)
  unsealed  a child registers an unsealed page of its own, then shrinks it
            to nothing
  dead      with the agent stopped, a child registers and exits, and (as
            root) its pid is handed to a new process without the observer
            (`sleep 3`, pid chosen with ns_last_pid): the agent reads the
            registration only when its pid is somebody else's, and must not
            trace that process
"""
import array
import fcntl
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import time

PAGE_SIZE = 4096


def page_header(pid):
    # hw_shared_page: magic, version, page_size, pid, slot_count, flags, ...
    return struct.pack("<QIIiII", 0x68616E6777746368, 1, PAGE_SIZE, pid, 63, 0)


def busy_main_slot(pid):
    # hw_loop_slot 0 (at 64): busy (odd seq) since the clock's start, so an
    # agent that took the page would capture its pid at once.
    return struct.pack("<QQIi", 1, 1, 4, pid)


def register(memfd):
    name = os.environ["HANGWATCH_AGENT_SOCKET"]
    address = "\0" + name[1:] if name.startswith("@") else name
    message = struct.pack("<IIii", 0x68777265, 1, os.getpid(), 0)
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s:
        s.connect(address)
        s.sendmsg([message], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [memfd]))])


def new_page(sealed):
    fd = os.memfd_create("hostile-page", os.MFD_CLOEXEC | (os.MFD_ALLOW_SEALING if sealed else 0))
    os.ftruncate(fd, PAGE_SIZE)
    os.pwrite(fd, page_header(os.getpid()), 0)
    os.pwrite(fd, busy_main_slot(os.getpid()), 64)
    if sealed:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
    return fd


def shrink_own_page():
    with open("/proc/self/maps") as f:
        for line in f:
            if "hangwatch-loop" in line:
                span = line.split()[0]
                try:
                    fd = os.open(f"/proc/self/map_files/{span}", os.O_RDWR)
                    os.ftruncate(fd, 0)
                    print("shrink: done", flush=True)
                except OSError as e:
                    print(f"shrink: refused ({e.strerror})", flush=True)
                return
    print("shrink: no page found", flush=True)


def unsealed_child():
    pid = os.fork()
    if pid == 0:
        fd = new_page(sealed=False)
        register(fd)
        time.sleep(0.5)
        os.ftruncate(fd, 0)
        time.sleep(0.5)
        os._exit(0)
    os.waitpid(pid, 0)
    print("unsealed: child done", flush=True)


def reuse_pid(pid):
    """Start `sleep 3`, without the observer, as pid `pid` if we can."""
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "HANGWATCH_AGENT_SOCKET")}
    try:
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(str(pid - 1))
    except OSError:
        return None
    return subprocess.Popen(["sleep", "3"], env=env)


def tracer_of(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("TracerPid:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def dead_sender():
    agent = os.getppid()
    os.kill(agent, signal.SIGSTOP)
    reused = None
    try:
        pid = os.fork()
        if pid == 0:
            register(new_page(sealed=True))
            os._exit(0)
        os.waitpid(pid, 0)  # reaped: its pid is free before the agent reads
        reused = reuse_pid(pid)
    finally:
        os.kill(agent, signal.SIGCONT)
    print(f"dead: sender {pid} gone", flush=True)
    if reused is None or reused.pid != pid:
        print("dead: pid not reused", flush=True)
        return
    traced = False
    while reused.poll() is None:
        traced = traced or tracer_of(pid) != 0
        select.select([], [], [], 0.02)
    print(f"dead: reused pid {'traced' if traced else 'never traced'}", flush=True)


def main():
    select.select([], [], [], 0.2)  # the loop starts
    {"shrink": shrink_own_page, "unsealed": unsealed_child, "dead": dead_sender}[sys.argv[1]]()
    select.select([], [], [], 0.5)
    time.sleep(3)  # a hang the agent must still see
    select.select([], [], [], 0.1)
    sys.exit(7)


if __name__ == "__main__":
    main()
