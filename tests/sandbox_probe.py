"""sandbox_probe.py - a sandbox held open while a test looks at its
supervisor from outside, and the sockets that supervisor holds (for where
they are: SIOCGSKNS), taken with pidfd_getfd, which needs the right to
ptrace it (its own user's process, or root).

    from sandbox_probe import running_sandbox, sockets_of
    with running_sandbox(corral, policy) as p:      # p: the supervisor's Popen
        for sk in sockets_of(p.pid): ...            # each closed after its turn
"""
import contextlib
import ctypes
import os
import socket
import subprocess
import sys

SYS_PIDFD_GETFD = 438
WAITING = "import sys; print('ready', flush=True); sys.stdin.read()"


@contextlib.contextmanager
def running_sandbox(corral, policy):
    """corral run --policy POLICY, its command started and waiting on stdin;
    ended (stdin closed, then killed after 30 s) when the block ends."""
    p = subprocess.Popen([corral, "run", "--policy", policy, "--timeout", "60", "--",
                          "/usr/bin/python3", "-c", WAITING],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        if p.stdout.readline().strip() != "ready":
            sys.exit("the sandbox did not start")
        yield p
    finally:
        p.stdin.close()
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def sockets_of(pid):
    libc = ctypes.CDLL(None, use_errno=True)
    pidfd = os.pidfd_open(pid)
    try:
        for name in os.listdir("/proc/%d/fd" % pid):
            fd = libc.syscall(SYS_PIDFD_GETFD, pidfd, int(name), 0)
            if fd < 0:
                continue
            try:
                sk = socket.socket(fileno=fd)
            except OSError:
                os.close(fd)
                continue
            with sk:
                yield sk
    finally:
        os.close(pidfd)
