#!/usr/bin/python3
"""shrink_get.py - a file the sandbox truncates while the daemon sends it.

  shrink_get.py SOCK SANDBOX SHA256 SIZE [PORT CA TOKEN_FILE]

GETs /tmp/shrinks of SANDBOX (SIZE bytes whose SHA-256 is SHA256) over the
daemon's unix socket SOCK, or over https on 127.0.0.1:PORT; reads the
answer's head only, truncates the file by an exec (on the unix socket),
then reads the rest: no race, no timing.  Exits 0 when the body is the
SIZE bytes read, whole; else says what came.  files.sh and serve.sh's
t_*get_truncated_while_sent.
"""
import hashlib
import json
import socket
import ssl
import sys


def unix(sock):
    c = socket.socket(socket.AF_UNIX)
    c.settimeout(60)
    c.connect(sock)
    return c


def request(method, path, body=b"", extra=b""):
    return (b"%s %s HTTP/1.1\r\nHost: l\r\n%sContent-Length: %d\r\n"
            b"Connection: close\r\n\r\n%s" % (method.encode(), path.encode(),
                                              extra, len(body), body))


def read_all(s):
    got = bytearray()	# bytes += bytes is quadratic
    while True:
        try:
            b = s.recv(1 << 20)
        except (ssl.SSLEOFError, ConnectionResetError) as e:
            sys.exit("the connection broke after %d bytes: %r" % (len(got), e))
        if not b:
            return got
        got += b


def main():
    sock, sid, want, size = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    path = "/v1/sandboxes/%s/files?path=/tmp/shrinks" % sid
    if len(sys.argv) > 5:
        port, ca, token = int(sys.argv[5]), sys.argv[6], open(sys.argv[7]).read()
        # a window set before connecting (a tiny one is 40 ms a segment):
        # most of the file stays in the daemon, past the kernel's buffers
        raw = socket.socket()
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 128 << 10)
        raw.settimeout(60)
        raw.connect(("127.0.0.1", port))
        s = ssl.create_default_context(cafile=ca).wrap_socket(
            raw, server_hostname="localhost")
        s.sendall(request("GET", path, extra=b"Authorization: Bearer %s\r\n"
                          % token.encode()))
    else:
        s = unix(sock)
        s.sendall(request("GET", path))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    got = b""
    while b"\r\n\r\n" not in got:
        b = s.recv(4096)
        assert b, "closed before the headers: %r" % got
        got += b
    head, first = got.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 200"), head
    x = unix(sock)
    x.sendall(request("POST", "/v1/sandboxes/%s/exec" % sid,
                      json.dumps({"command": "truncate -s 0 /tmp/shrinks"}).encode()))
    r = read_all(x)
    assert b'"exit_code":0' in r, r
    body = bytearray(first) + read_all(s)
    assert len(body) == size, "a body of %d bytes, not %d" % (len(body), size)
    assert hashlib.sha256(body).hexdigest() == want, "not the bytes read"


if __name__ == "__main__":
    main()
