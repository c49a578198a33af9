"""sandbox_probe.py - a sandbox held open while a test looks at its
supervisor from outside, and the sockets that supervisor holds (for where
they are: SIOCGSKNS), taken with pidfd_getfd, which needs the right to
ptrace it (its own user's process, or root).

    from sandbox_probe import running_sandbox, sockets_of, sandbox_ns
    with running_sandbox(corral, policy) as p:      # p: the supervisor's Popen
        for sk in sockets_of(p.pid): ...            # each closed after its turn
        userns, netns = sandbox_ns(p.pid)           # fds, for setns
"""
import contextlib
import ctypes
import fcntl
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


def sandbox_ns(sup):
    """The sandbox's user namespace and netns, as fds, from the socket of
    the supervisor's listening on 3128 in it (SIOCGSKNS, NS_GET_USERNS):
    the sandbox's own processes are not dumpable, their /proc/PID/ns closed."""
    for sk in sockets_of(sup):
        if sk.family == socket.AF_INET and sk.type == socket.SOCK_STREAM and \
                sk.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN) and \
                sk.getsockname()[1] == 3128:
            net = fcntl.ioctl(sk.fileno(), 0x894C)      # SIOCGSKNS
            return fcntl.ioctl(net, 0xb701), net        # NS_GET_USERNS
    sys.exit("no listener of the sandbox's in the supervisor")
