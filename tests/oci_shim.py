#!/usr/bin/python3
"""oci_shim.py - what containerd's runc shim does with a runtime, for
tests/oci.sh: it is a subreaper, runs `create` (with a console socket
when asked), `start`, and reaps the container's init, whose pid the pid
file names, printing its exit status as the shim reports it.

  oci_shim.py RUNTIME ROOT BUNDLE ID [--console]

RUNTIME: corral-oci (a link to corral by that name).

Prints "state <status>" after create and after start, "console <text>"
(what the pty's master read), and "exit <N>" (128+signal when killed).
"""
import ctypes
import os
import socket
import subprocess
import sys

PR_SET_CHILD_SUBREAPER = 36


def oci(runtime, root, *args, **kw):
    return subprocess.run([runtime, "--root", root] + list(args),
                          timeout=60, **kw)


def state(corral, root, cid):
    import json
    out = oci(corral, root, "state", cid, capture_output=True, check=True).stdout
    return json.loads(out)["status"]


def recv_master(listener):
    listener.settimeout(30)
    conn, _ = listener.accept()
    with conn:
        msg, fds, _, _ = socket.recv_fds(conn, 4096, 1)
    if len(fds) != 1:
        sys.exit("console socket: no fd received")
    return msg.decode(), fds[0]


def read_all(fd):
    out = b""
    for _ in range(10000):       # bounded: until EIO, the last slave gone
        try:
            b = os.read(fd, 4096)
        except OSError:
            break
        if not b:
            break
        out += b
    return out.decode(errors="replace").replace("\r", "")


def main():
    corral, root, bundle, cid = sys.argv[1:5]
    console = "--console" in sys.argv[5:]
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        sys.exit("prctl(PR_SET_CHILD_SUBREAPER) failed")
    pidfile = os.path.join(os.path.dirname(root.rstrip("/")), cid + ".pid")
    args = ["create", "--bundle", bundle, "--pid-file", pidfile]
    listener = None
    if console:
        path = os.path.join(os.path.dirname(root.rstrip("/")), cid + ".console")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        listener.listen(1)
        args += ["--console-socket", path]
    r = oci(corral, root, *args, cid)
    if r.returncode != 0:
        print("create failed %d" % r.returncode, flush=True)
        sys.exit(1)
    master = None
    if console:
        name, master = recv_master(listener)
        print("console-name " + name, flush=True)
    pid = int(open(pidfile).read())
    print("state " + state(corral, root, cid), flush=True)
    oci(corral, root, "start", cid, check=True)
    if master is not None:
        print("console " + read_all(master).strip(), flush=True)
    # the container's init is ours now (its parent, create, has exited)
    _, ws = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(ws)
    print("exit %d" % (code if code >= 0 else 128 - code), flush=True)
    # and the monitor, also adopted, once it has cleaned up
    for _ in range(100):
        try:
            p, _ = os.waitpid(-1, 0)
        except ChildProcessError:
            break
    print("state " + state(corral, root, cid), flush=True)


if __name__ == "__main__":
    main()
