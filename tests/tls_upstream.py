#!/usr/bin/python3
# tls_upstream.py - an HTTPS upstream for tests/tls.sh that keeps every byte.
#
#   tls_upstream.py PORTFILE LOG CERT KEY [ADDR]
#
# Listens on ADDR (127.0.0.1) at a free port (written to PORTFILE), speaks
# TLS with CERT/KEY, reads each request (head, then Content-Length bytes)
# and appends exactly what it received, decrypted, to LOG before answering
# "hello from upstream PATH" and closing.  The test reads LOG to see what
# left the sandbox, and what never did.
import socket
import ssl
import sys
import threading


def handle(conn, log, lock):
    data = b""
    try:
        conn.settimeout(10)
        while b"\r\n\r\n" not in data and len(data) < 1 << 20:
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip())
        while len(body) < length:
            chunk = conn.recv(65536)
            if not chunk:
                break
            body += chunk
            data += chunk
        path = head.split(b" ")[1] if b" " in head else b"?"
        reply = b"hello from upstream " + path + b"\n"
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n"
                     b"Connection: close\r\n\r\n" % len(reply) + reply)
    except (OSError, ValueError):
        pass
    finally:
        with lock:
            with open(log, "ab") as f:
                f.write(data + b"\n--end--\n")
        conn.close()


def main():
    portfile, log, cert, key = sys.argv[1:5]
    addr = sys.argv[5] if len(sys.argv) > 5 else "127.0.0.1"
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    srv = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((addr, 0))
    srv.listen(64)
    with open(portfile + ".tmp", "w") as f:
        f.write(str(srv.getsockname()[1]))
    import os
    os.rename(portfile + ".tmp", portfile)
    lock = threading.Lock()
    while True:
        raw, _ = srv.accept()
        raw.settimeout(10)
        try:
            conn = ctx.wrap_socket(raw, server_side=True)
        except (OSError, ssl.SSLError):
            raw.close()
            continue
        threading.Thread(target=handle, args=(conn, log, lock), daemon=True).start()


if __name__ == "__main__":
    main()
