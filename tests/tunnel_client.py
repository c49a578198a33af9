#!/usr/bin/python3
"""tunnel_client.py - the sandbox's side of the tests of plain HTTP in
tunnels (tls.sh, net.sh): for each KIND (connect, socks, transparent;
http: absolute-form to the proxy, WebSocket cases only), a
few connections to HOST:PORT, each carrying requests one after another;
prints one line a connection: its name, then each answer's status (200
with the upstream's words, "echo=" what came back after a 101).  It runs
inside the sandbox (python3 -c "$(cat tunnel_client.py)" ...).

  tunnel_client.py KIND[,KIND...] [HOST [PORT]]   (default web.test 80)

Every request but the last of a connection names web.test; the last, on
some, names evil.test (or web.test on the wrong port): the attacker's.
"""
import re, socket, sys

def recv_exact(s, n):
    b = b""
    while len(b) < n:
        k = s.recv(n - len(b))
        if not k:
            raise EOFError
        b += k
    return b

def tunnel(kind, host="web.test", port=80):
    if kind == "connect":
        s = socket.create_connection(("127.0.0.1", 3128), 10)
        s.sendall(b"CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (host.encode(), port, host.encode(), port))
        h = b""
        while not h.endswith(b"\r\n\r\n"):
            h += recv_exact(s, 1)
        if b" 200 " not in h.split(b"\r\n")[0]:
            raise OSError("CONNECT answered " + h.decode())
        return s
    if kind == "socks":
        s = socket.create_connection(("127.0.0.1", 1080), 10)
        s.sendall(b"\x05\x01\x00")
        recv_exact(s, 2)
        s.sendall(b"\x05\x01\x00\x03" + bytes([len(host)]) + host.encode() + port.to_bytes(2, "big"))
        r = recv_exact(s, 4)
        if r[1] != 0:
            raise OSError("SOCKS5 answered %d" % r[1])
        recv_exact(s, {1: 6, 4: 18}.get(r[3], 6))
        return s
    if kind == "http":     # absolute-form requests to the proxy itself
        return socket.create_connection(("127.0.0.1", 3128), 10)
    # transparent: a name (our DNS's address) or a bare address
    return socket.create_connection((host, port), 10)

class Reader:
    def __init__(self, s):
        self.s, self.b = s, b""
    def resp(self):
        while b"\r\n\r\n" not in self.b:
            k = self.s.recv(65536)
            if not k:
                return "EOF", ""
            self.b += k
        head, self.b = self.b.split(b"\r\n\r\n", 1)
        m = re.search(rb"(?i)\r\ncontent-length: *(\d+)", head)
        n = int(m.group(1)) if m else 0
        while len(self.b) < n:
            k = self.s.recv(65536)
            if not k:
                break
            self.b += k
        body, self.b = self.b[:n], self.b[n:]
        return head.split(b" ")[1].decode(), body.decode().strip()

def req(path, host="web.test", body=None, chunked=False, extra=""):
    h = "GET" if body is None else "POST"
    r = "%s %s HTTP/1.1\r\nHost: %s\r\n%s" % (h, path, host, extra)
    if chunked:
        r += "Transfer-Encoding: chunked\r\n\r\n"
        return r.encode() + b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in body) + b"0\r\n\r\n"
    if body is not None:
        r += "Content-Length: %d\r\n" % len(body)
    return r.encode() + b"\r\n" + (body or b"")

WS = "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"

def case(name, kind, reqs, host="web.test", port=80, ws=None):
    """requests one after another on one connection; prints each status"""
    try:
        s = tunnel(kind, host, port)
        rd = Reader(s)
        out = []
        for r in reqs:
            s.sendall(r)
            st, body = rd.resp()
            out.append(st if st != "200" else "200[%s]" % body)
            if st == "101":
                s.sendall(ws)
                got = rd.b
                while len(got) < len(ws):
                    k = s.recv(65536)
                    if not k:
                        break
                    got += k
                out.append("echo=%s" % got.decode(errors="replace"))
            if st not in ("200", "426"):
                break
        print(name, " ".join(out))
    except Exception as e:
        print(name, "ERR", repr(e))

def halfclose(name, kind, r, host, port):
    """a request, then the client's end of sending (HTTP/1.0 style): the answer still comes"""
    try:
        s = tunnel(kind, host, port)
        s.sendall(r)
        s.shutdown(socket.SHUT_WR)
        st, body = Reader(s).resp()
        print(name, st if st != "200" else "200[%s]" % body)
    except Exception as e:
        print(name, "ERR", repr(e))

for kind in sys.argv[1].split(","):
    host = sys.argv[2] if len(sys.argv) > 2 else "web.test"
    port = int(sys.argv[3]) if len(sys.argv) > 3 else 80
    if kind == "http":
        url = "http://web.test:%d" % port
        case("http-ws", kind, [req(url + "/ws", "web.test:%d" % port, extra=WS)], host, port,
             ws=b"raw bytes after 101")
        case("http-nows", kind, [req(url + "/nows", "web.test:%d" % port, extra=WS),
             req(url + "/after", "web.test:%d" % port)], host, port)
        halfclose("http-halfclose", kind, req(url + "/half", "web.test:%d" % port,
                  extra="Connection: close\r\n"), host, port)
        continue
    case(kind + "-keepalive", kind, [req("/one"), req("/two", body=b"hello"),
         req("/three", body=[b"ab", b"cde"], chunked=True), req("/four", host="evil.test")], host, port)
    case(kind + "-spelling", kind, [req("/five", host="WEB.Test."), req("/six", host="web.test:%d" % port),
         req("/seven", host="web.test:81")], host, port)
    case(kind + "-ws", kind, [req("/ws", extra=WS)], host, port, ws=b"raw bytes after 101")
    case(kind + "-nows", kind, [req("/nows", extra=WS), req("/after"), req("/evil", host="evil.test")], host, port)
    halfclose(kind + "-halfclose", kind, req("/half", extra="Connection: close\r\n"), host, port)
