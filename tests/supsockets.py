"""supsockets.py - the sockets a process holds, for tests that ask where
they are (SIOCGSKNS): taken with pidfd_getfd, which needs the right to
ptrace it (its own user's process, or root).

    from supsockets import sockets_of
    for sk in sockets_of(pid): ...   # each closed after its turn
"""
import ctypes
import os
import socket

SYS_PIDFD_GETFD = 438


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
