#!/usr/bin/python3
"""lease_creates.py SOCK N [GATE]: N creates bound to a lease whose
connection then closes; each create's HTTP status, one a line.

It opens a lease on the daemon's socket SOCK, sends N POST /v1/sandboxes
naming it (each with a pids limit of its own), and closes the lease at
once, or, with GATE, once the file GATE exists (at most 30 s) or a create
is answered first (then nothing held it).  It then reads every answer
to its end.  tests/serve.sh's lease tests; every wait is bounded.
"""
import json
import os
import select
import socket
import sys


def main():
    sock, n = sys.argv[1], int(sys.argv[2])
    gate = sys.argv[3] if len(sys.argv) > 3 else None
    lease = socket.socket(socket.AF_UNIX)
    lease.connect(sock)
    lease.settimeout(10)
    lease.sendall(b"POST /v1/leases HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
    got = b""
    while b"}\n" not in got:
        more = lease.recv(4096)
        if not more:
            sys.exit("the lease's connection closed before its id")
        got += more
    lid = got.split(b'"lease":"')[1].split(b'"')[0].decode()
    creates = []
    for i in range(n):
        c = socket.socket(socket.AF_UNIX)
        c.connect(sock)
        c.settimeout(60)
        b = json.dumps({"lease": lid, "policy": {"limits": {"pids": 64 + i}}}).encode()
        c.sendall(b"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(b) + b)
        creates.append(c)
    for _ in range(600 if gate else 0):
        if os.path.exists(gate) or select.select(creates, [], [], 0.05)[0]:
            break
    lease.close()
    for c in creates:
        r = b""
        while True:
            x = c.recv(65536)
            if not x:
                break
            r += x
        print(r.split(b"\r\n")[0].decode().split(" ")[1], flush=True)


if __name__ == "__main__":
    main()
