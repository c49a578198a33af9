#!/usr/bin/python3
"""fixtures.py - the "outside world" of the network tests, on loopback or in
a namespace the test made.  Each server binds port 0 (or ADDR's ":PORT",
e.g. 198.18.77.2:443), writes the port it got to PORTFILE, serves until
killed, and exits by itself after 120 s.

  fixtures.py http PORTFILE [ADDR]            plain HTTP: "hello from upstream"
  fixtures.py tls PORTFILE CERT KEY [ADDR]    HTTPS with that certificate
  fixtures.py tls-p384 PORTFILE CERT KEY      the same, taking only the group
                                              P-384: a client offering an
                                              X25519 key share (curl's, Python's
                                              default) gets a HelloRetryRequest
  fixtures.py hrr PORTFILE LOG MODE           a TLS server's first answer only:
                                              reads a ClientHello, answers it
                                              (MODE retry: a HelloRetryRequest
                                              and a ChangeCipherSpec; split: the
                                              same, 3 bytes a record and a
                                              write; hello: a ServerHello and
                                              a ChangeCipherSpec;
                                              alert: an alert), then logs the
                                              SNI of the next hello ("second
                                              NAME", or "second none"), or
                                              "next N" bytes that are none, or
                                              "closed", to LOG; answers "done"
  fixtures.py dns PORTFILE LOG NAME=IP...     a resolver that answers NAME with
                                              IP and logs every question to LOG
  fixtures.py dns53 PORTFILE LOG NAME=IP...   the same on 127.0.0.1:53 (in a
                                              namespace the test made)
  fixtures.py mute PORTFILE                   a resolver that never answers: its
                                              questions stay pending
  fixtures.py web PORTFILE LOG [ADDR]         HTTP/1.1 that answers what it got
                                              ("GET /p host=H body=N"), logs the
                                              same to LOG, keeps connections
                                              alive; a WebSocket handshake gets
                                              101, then every byte echoed (but
                                              on /nows: 426, and HTTP goes on;
                                              /hold reads nothing, answers never)
"""
import http.server
import signal
import socket
import ssl
import struct
import sys
import threading
import time

signal.alarm(120)


class Hello(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        body = b"hello from upstream %s\n" % self.path.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET

    def log_message(self, *args):
        pass


class Server(http.server.ThreadingHTTPServer):
    # socketserver listens with a backlog of 5: a test's burst of tunnels
    # (40 at once) overflowed it, and each SYN dropped was a second's
    # retransmit (1-4 s of t_connection_cap_names_the_limit).  A server's
    # own, as nginx's 511, not what is tested.
    request_queue_size = 128


def serve_http(portfile, addr="127.0.0.1", wrap=None):
    host, _, port = addr.partition(":")     # "198.18.77.2:443": that port
    srv = Server((host, int(port or 0)), Hello)
    if wrap:
        srv.socket = wrap(srv.socket)
    open(portfile, "w").write(str(srv.server_address[1]))
    srv.serve_forever()


def qname(pkt):
    labels, i = [], 12
    while pkt[i]:
        n = pkt[i]
        labels.append(pkt[i + 1:i + 1 + n].decode())
        i += n + 1
    return ".".join(labels).lower(), i + 5


def serve_dns(portfile, log, answers, port=0):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", port))
    open(portfile, "w").write(str(s.getsockname()[1]))
    while True:
        pkt, peer = s.recvfrom(4096)
        name, end = qname(pkt)
        qtype = struct.unpack("!H", pkt[end - 4:end - 2])[0]
        with open(log, "a") as f:
            f.write(name + "\n")
        ip = answers.get(name)
        flags = 0x8180 if ip else 0x8183
        hdr = pkt[:2] + struct.pack("!HHHHH", flags, 1, 1 if ip and qtype == 1 else 0, 0, 0)
        resp = hdr + pkt[12:end]
        if ip and qtype == 1:
            resp += b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 60, 4) + socket.inet_aton(ip)
        s.sendto(resp, peer)


HRR_RANDOM = bytes.fromhex(
    "cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c")


def read_record(c):
    """One TLS record, b"" at the end."""
    head = b""
    while len(head) < 5:
        k = c.recv(5 - len(head))
        if not k:
            return b""
        head += k
    body = b""
    n = struct.unpack("!H", head[3:5])[0]
    while len(body) < n:
        k = c.recv(n - len(body))
        if not k:
            return b""
        body += k
    return head + body


def hello_sni(c):
    """Read a ClientHello (its records, after a ChangeCipherSpec): its SNI,
    "none", or None when what came is no ClientHello."""
    rec = read_record(c)
    if rec[:1] == b"\x14":
        rec = read_record(c)
    if rec[:1] != b"\x16" or rec[5:6] != b"\x01":
        return None, rec
    msg = rec[5:]
    need = 4 + int.from_bytes(msg[1:4], "big")
    while len(msg) < need:
        more = read_record(c)
        if not more:
            return None, rec
        msg += more[5:]
    p = 4 + 2 + 32
    p += 1 + msg[p]
    p += 2 + struct.unpack("!H", msg[p:p + 2])[0]
    p += 1 + msg[p]
    if p >= need:
        return "none", rec
    end = p + 2 + struct.unpack("!H", msg[p:p + 2])[0]
    p += 2
    while p < end:
        t, n = struct.unpack("!HH", msg[p:p + 4])
        if t == 0:
            return msg[p + 9:p + 4 + n].decode(), rec
        p += 4 + n
    return "none", rec


def server_hello(random):
    # legacy_version, random, empty session id, TLS_AES_128_GCM_SHA256, null
    # compression, supported_versions: TLS 1.3
    body = (b"\x03\x03" + random + b"\x00\x13\x01\x00" +
            struct.pack("!HHHH", 6, 0x002b, 2, 0x0304))
    msg = b"\x02" + struct.pack("!I", len(body))[1:] + body
    return msg


def hrr_conn(c, log, mode):
    c.settimeout(10)
    try:
        first, _ = hello_sni(c)
        if first is None:
            return
        if mode in ("retry", "split"):
            msg = server_hello(HRR_RANDOM)
            chunk = 3 if mode == "split" else len(msg)
            for i in range(0, len(msg), chunk):
                part = msg[i:i + chunk]
                c.sendall(b"\x16\x03\x03" + struct.pack("!H", len(part)) + part)
                if mode == "split":
                    time.sleep(0.01)
            c.sendall(b"\x14\x03\x03\x00\x01\x01")
            second, rec = hello_sni(c)
            line = "second %s" % second if second else "next %d" % len(rec)
            line = line if rec else "closed"
        else:
            if mode == "hello":
                msg = server_hello(bytes(range(32)))
                c.sendall(b"\x16\x03\x03" + struct.pack("!H", len(msg)) + msg +
                          b"\x14\x03\x03\x00\x01\x01")
            else:
                c.sendall(b"\x15\x03\x03\x00\x02\x02\x28")
            rec = read_record(c)
            line = "next %d" % len(rec) if rec else "closed"
        with open(log, "a") as f:
            f.write(line + "\n")
        c.sendall(b"done")
    except OSError:
        pass
    finally:
        c.close()


def serve_hrr(portfile, log, mode):
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    open(portfile, "w").write(str(srv.getsockname()[1]))
    while True:
        c, _ = srv.accept()
        threading.Thread(target=hrr_conn, args=(c, log, mode), daemon=True).start()


def serve_mute(portfile):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    open(portfile, "w").write(str(s.getsockname()[1]))
    while True:
        s.recvfrom(4096)


def web_head(f):
    """(method, path, headers) of the next request, None at EOF"""
    line = f.readline()
    while line in (b"\r\n", b"\n"):
        line = f.readline()
    if not line:
        return None
    method, path = line.split(b" ")[:2]
    hdrs = {}
    while True:
        h = f.readline()
        if h in (b"\r\n", b"\n", b""):
            return method, path, hdrs
        k, _, v = h.partition(b":")
        hdrs[k.strip().lower()] = v.strip()


def web_body(f, hdrs):
    if hdrs.get(b"transfer-encoding", b"").lower() == b"chunked":
        body = b""
        while True:
            n = int(f.readline().split(b";")[0], 16)
            if n == 0:
                while f.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return body
            body += f.read(n)
            f.readline()
    return f.read(int(hdrs.get(b"content-length", b"0")))


def web_conn(s, log):
    f = s.makefile("rb")
    while True:
        got = web_head(f)
        if got is None:
            return
        method, path, hdrs = got
        if path == b"/hold":    # a stalled upstream: reads no body
            time.sleep(30)
            return
        body = web_body(f, hdrs)
        said = b"%s %s host=%s body=%d" % (method, path, hdrs.get(b"host", b"-"), len(body))
        with open(log, "ab") as lf:
            lf.write(said + b"\n")
        if hdrs.get(b"upgrade", b"").lower() == b"websocket" and path != b"/nows":
            s.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                      b"Connection: Upgrade\r\n\r\n")
            while True:
                d = f.read1(65536)
                if not d:
                    return
                s.sendall(d)
        code = b"426 Upgrade Required" if path == b"/nows" else b"200 OK"
        s.sendall(b"HTTP/1.1 %s\r\nContent-Length: %d\r\n\r\n%s\n" % (code, len(said) + 1, said))


def serve_web(portfile, log, addr="127.0.0.1"):
    host, _, port = addr.partition(":")
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((host, int(port or 0)))
    srv.listen(64)
    open(portfile, "w").write(str(srv.getsockname()[1]))
    while True:
        c, _ = srv.accept()
        threading.Thread(target=web_conn, args=(c, log), daemon=True).start()


def main():
    kind, portfile = sys.argv[1], sys.argv[2]
    if kind == "http":
        serve_http(portfile, *(sys.argv[3:4] or ["127.0.0.1"]))
    elif kind == "tls":
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(sys.argv[3], sys.argv[4])
        addr = sys.argv[5] if len(sys.argv) > 5 else "127.0.0.1"
        serve_http(portfile, addr, lambda s: ctx.wrap_socket(s, server_side=True))
    elif kind == "tls-p384":
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(sys.argv[3], sys.argv[4])
        ctx.set_ecdh_curve("secp384r1")
        serve_http(portfile, "127.0.0.1", lambda s: ctx.wrap_socket(s, server_side=True))
    elif kind == "hrr":
        serve_hrr(portfile, sys.argv[3], sys.argv[4])
    elif kind == "dns":
        answers = dict(a.split("=", 1) for a in sys.argv[4:])
        serve_dns(portfile, sys.argv[3], answers)
    elif kind == "dns53":
        answers = dict(a.split("=", 1) for a in sys.argv[4:])
        serve_dns(portfile, sys.argv[3], answers, 53)
    elif kind == "mute":
        serve_mute(portfile)
    elif kind == "web":
        serve_web(portfile, *sys.argv[3:5])


if __name__ == "__main__":
    main()
