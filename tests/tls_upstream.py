#!/usr/bin/python3
# tls_upstream.py - an HTTPS upstream for tests/tls.sh that keeps every byte.
#
#   tls_upstream.py PORTFILE LOG CERT KEY [ADDR]
#
# Listens on ADDR (127.0.0.1) at a free port (written to PORTFILE), speaks
# TLS with CERT/KEY, reads each request (head, then Content-Length bytes)
# and appends exactly what it received, decrypted, to LOG before answering
# and closing.  The test reads LOG to see what left the sandbox, and what
# never did.  Most paths get "hello from upstream PATH"; some answer as the
# servers that reflect a request do, for the tests of what comes back:
#
#   TRACE ...          200 message/http, the request head echoed (RFC 9110)
#   /echo...           the request head and body, as httpbin's /anything
#   /echo-chunked...   the same, chunked 7 bytes a chunk (a value spans chunks)
#   /echo-gzip...      the same, gzip-encoded whatever Accept-Encoding said
#   /echo-br...        the same, labelled "br" (a coding nobody here decodes)
#   /error...          401 "invalid key: " and the Authorization header's value
#   /redirect?Q        302 to https://other.test:PORT/landing?Q
#   /prefix            keep-alive: 200, a body ending with the Authorization
#                      value but its last byte; the next request is read
#   /big?n=N           N bytes of a fixed pattern, Content-Length framed
#   /echo-range...     /echo's answer, a byte range of it if the request
#                      asked for one (Range: bytes=A-B, Request-Range, as
#                      Apache still reads it, or ?range=A-B): 206, as a
#                      cache in front of a reflecting server answers
#   /echo-ext          chunked, the Authorization header echoed in the second
#                      chunk's extension (framing: 3;echo="...")
#   /echo-trailer      chunked, the Authorization header echoed in a trailer
#                      written in two parts, the second 0.2 s later (a
#                      trailer the proxy reads in two)
#   /coding-echo       the Authorization value (past its scheme) as the
#                      answer's Content-Encoding, /te-echo as its
#                      Transfer-Encoding: a header the proxy cannot read
#   /pipe-echo...      keep-alive: /echo's answer, held and sent in one write
#                      with the next request's (a server that answers
#                      pipelined requests together, as nginx's writev does)
#   /escaped?key=Q     the Authorization value (past its scheme) and Q, each
#                      as encoders escape it: JSON (Python's, PHP's "\/",
#                      .NET's and Go's "\u003C", every character "\uXXXX"),
#                      HTML and XML references, percent-encoding (either
#                      case, "+" for a space, twice), mixes of them
#   /escaped-chunked   the same, chunked 7 bytes a chunk
#   /redirect-escaped?key=Q  302 to a Location that carries Q percent-encoded
#                      twice and the Authorization value once, lower case
#   /frame-echo?pre=Q  keep-alive: Q percent-decoded, then the Authorization
#                      header, as a body; to a HEAD too, as every path here
#                      (a do_HEAD = do_GET server)
#   /no-content        keep-alive: 204, nothing after it
#   /short-echo?pre=Q  keep-alive: "x", Q percent-decoded, the Authorization
#                      header, in one write, said to be 1 byte long (a
#                      Content-Length short of the body: a length in
#                      characters, UTF-8 written)
#   /stream-echo?g=Q   chunked: Q percent-decoded, then 0.2 s later "!" (a
#                      streaming echo: a model's answer that repeats a prompt)
#   /no-content-echo?pre=Q  keep-alive: 204, then /frame-echo's body anyway
#                      (Python's http.server writes what a handler gives it)
import gzip
import html
import json
import os
import re
import socket
import ssl
import sys
import threading
import time
import urllib.parse


def read_request(conn, data):
    while b"\r\n\r\n" not in data and len(data) < 1 << 20:
        chunk = conn.recv(65536)
        if not chunk:
            return None, None, data
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
    return head, body[:length], body[length:]


def header(head, want):
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == want:
            return value.strip()
    return b""


def pct_lower(s):
    return re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), s)


def js_hex(v):
    """each character but ASCII letters and digits escaped, "\\xHH" to U+00FF"""
    out = ""
    for c in v:
        if c.isalnum() and ord(c) < 128:
            out += c
        elif ord(c) < 256:
            out += "\\x%02X" % ord(c)
        else:
            units = c.encode("utf-16-be")
            out += "".join("\\u%02X%02X" % (units[i], units[i + 1])
                           for i in range(0, len(units), 2))
    return out


def css(v, six=False):
    """CSS's escapes of each character but ASCII letters and digits"""
    return "".join(c if c.isalnum() and ord(c) < 128 else
                   ("\\%06x" % ord(c) if six else "\\%x " % ord(c)) for c in v)


def octal(v):
    """each byte but ASCII letters and digits "\\OOO", as git quotes a path"""
    return "".join(chr(b) if chr(b).isalnum() and b < 128 else "\\%03o" % b
                   for b in v.encode())


def escapes(v):
    """v as the encoders a reflecting server uses write it, one a line"""
    plain = json.dumps(v)[1:-1]
    dotnet = re.sub(r"\\u([0-9a-f]{4})", lambda m: "\\u" + m.group(1).upper(),
                    plain.replace('\\"', "\\u0022"))
    for c in "+<>&'":
        dotnet = dotnet.replace(c, "\\u%04X" % ord(c))
    go = plain.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    units = v.encode("utf-16-be")
    every = "".join("\\u%02x%02x" % (units[i], units[i + 1]) for i in range(0, len(units), 2))
    quoted = urllib.parse.quote(v, safe="")
    lines = [
        ("json", json.dumps(v)),
        ("json-php", json.dumps(v).replace("/", "\\/")),
        ("json-php-first-slash", json.dumps(v).replace("/", "\\/", 1)),
        ("json-dotnet", dotnet),
        ("json-go", go),
        ("json-every", every),
        ("json-in-json", json.dumps(json.dumps(v).replace("/", "\\/"))),
        ("html", html.escape(v)),
        ("html-xml", html.escape(v).encode("ascii", "xmlcharrefreplace").decode()),
        ("html-dec", "".join(c if c.isalnum() else "&#%d;" % ord(c) for c in v)),
        ("html-hex", "".join(c if c.isalnum() else "&#x%X;" % ord(c) for c in v)),
        ("html-hex-lower", "".join(c if c.isalnum() else "&#x%x;" % ord(c) for c in v)),
        ("html-twice", html.escape(html.escape(v))),
        ("html-in-dotnet-json", html.escape(v).replace("&", "\\u0026")),
        ("pct", quoted),
        ("pct-lower", pct_lower(quoted)),
        ("pct-plus", urllib.parse.quote_plus(v, safe="")),
        ("pct-twice", urllib.parse.quote(quoted, safe="")),
        ("pct-mixed", quoted.replace("%2F", "/", 1)),
        # JavaScript's "\xHH", as OWASP ESAPI's encodeForJavaScript writes it
        ("js-hex", js_hex(v)),
        # CSS.escape's hex with a space after, and six digits without one
        ("css", css(v)),
        ("css-six", css(v, True)),
        ("octal", octal(v)),
        # ES6's code point escape
        ("js-es6", "".join("\\u{%x}" % ord(c) for c in v)),
        # Perl's quotemeta, Python's re.escape: a backslash before punctuation
        ("quotemeta", re.sub(r"([^A-Za-z0-9_\x80-\U0010ffff])", r"\\\1", v)),
    ]
    return "".join("%s: %s\n" % (k, e) for k, e in lines).encode()


def raw_key(path):
    """the query's key as it came, not decoded: a "+" in it stays one"""
    q = path.partition(b"?")[2]
    return q.partition(b"key=")[2].partition(b"&")[0].decode("utf-8", "replace")


def escaped(head, path):
    """/escaped's body: the Authorization value, then the query's key"""
    auth = header(head, b"authorization").decode("utf-8", "replace").partition(" ")[2]
    key = raw_key(path)
    out = b"== auth\n" + escapes(auth)
    if key:
        out += b"== key\n" + escapes(key)
    return out


def answer(head, body):
    """(status line, extra headers, body, keep the connection)"""
    method = head.split(b" ")[0]
    path = head.split(b" ")[1] if b" " in head else b"?"
    echo = head + b"\r\n\r\n" + body
    if method == b"TRACE":
        return b"200 OK", b"Content-Type: message/http\r\n", head + b"\r\n\r\n", False
    if path.startswith(b"/escaped-chunked"):
        return b"200 OK", None, escaped(head, path), False
    if path.startswith(b"/escaped"):
        return b"200 OK", b"Content-Type: text/plain\r\n", escaped(head, path), False
    if path.startswith(b"/redirect-escaped"):
        q = raw_key(path)
        auth = header(head, b"authorization").decode("utf-8", "replace").partition(" ")[2]
        inner = urllib.parse.quote("/cb?key=" + q, safe="")
        loc = "https://other.test/landing?next=%s&auth=%s" % (
            urllib.parse.quote(inner, safe=""), pct_lower(urllib.parse.quote(auth, safe="")))
        return b"302 Found", b"Location: " + loc.encode() + b"\r\n", b"", False
    if path.startswith(b"/echo-chunked"):
        return b"200 OK", None, echo, False
    if path.startswith(b"/echo-gzip"):
        return b"200 OK", b"Content-Encoding: gzip\r\n", gzip.compress(echo), False
    if path.startswith(b"/echo-br"):
        return b"200 OK", b"Content-Encoding: br\r\n", echo, False
    if path.startswith(b"/echo-ext"):
        return b"200 OK", b"ext", header(head, b"authorization"), False
    if path.startswith(b"/echo-trailer"):
        return b"200 OK", b"trailer", header(head, b"authorization"), False
    if path.startswith(b"/echo-range"):
        # Range, Apache's old Request-Range, or a range in the query
        want = (header(head, b"range") or header(head, b"request-range") or
                b"bytes=" + path.partition(b"range=")[2].partition(b"&")[0])
        m = re.fullmatch(rb"bytes=(\d+)-(\d+)", want)
        if not m or int(m.group(1)) > int(m.group(2)) or int(m.group(1)) >= len(echo):
            return b"200 OK", b"Accept-Ranges: bytes\r\n", echo, False
        a, b = int(m.group(1)), min(int(m.group(2)), len(echo) - 1)
        return (b"206 Partial Content", b"Content-Range: bytes %d-%d/%d\r\n" % (a, b, len(echo)),
                echo[a:b + 1], False)
    if path.startswith(b"/coding-echo"):
        auth = header(head, b"authorization").partition(b" ")[2]
        return b"200 OK", b"Content-Encoding: " + auth + b"\r\n", b"x", False
    if path.startswith(b"/te-echo"):
        auth = header(head, b"authorization").partition(b" ")[2]
        return b"200 OK", b"Transfer-Encoding: " + auth + b", chunked\r\n", b"x", False
    if path.startswith(b"/frame-echo") or path.startswith(b"/no-content-echo"):
        pre = urllib.parse.unquote_to_bytes(path.partition(b"pre=")[2].partition(b"&")[0])
        body = pre + header(head, b"authorization") + b"\n"
        if path.startswith(b"/no-content"):
            return b"204 No Content", b"nolength", body, True
        return b"200 OK", b"Content-Type: text/plain\r\n", body, True
    if path.startswith(b"/no-content"):
        return b"204 No Content", b"nolength", b"", True
    if path.startswith(b"/short-echo"):
        pre = urllib.parse.unquote_to_bytes(path.partition(b"pre=")[2].partition(b"&")[0])
        return b"200 OK", b"short", b"x" + pre + header(head, b"authorization") + b"\n", True
    if path.startswith(b"/stream-echo"):
        return b"200 OK", b"stream", urllib.parse.unquote_to_bytes(
            path.partition(b"g=")[2].partition(b"&")[0]), False
    if path.startswith(b"/pipe-echo"):
        return b"200 OK", b"Content-Type: text/plain\r\n", echo, True
    if path.startswith(b"/echo"):
        return b"200 OK", b"Content-Type: text/plain\r\n", echo, False
    if path.startswith(b"/error"):
        return (b"401 Unauthorized", b"",
                b"invalid key: " + header(head, b"authorization") + b"\n", False)
    if path.startswith(b"/redirect"):
        q = path.partition(b"?")[2]
        return (b"302 Found", b"Location: https://other.test:%s/landing?%s\r\n" %
                (header(head, b"host").rpartition(b":")[2], q), b"", False)
    if path.startswith(b"/prefix"):
        return b"200 OK", b"", b"tail " + header(head, b"authorization")[:-1], True
    if path.startswith(b"/big"):
        return b"200 OK", b"", int(path.partition(b"n=")[2]), False
    return b"200 OK", b"", b"hello from upstream " + path + b"\n", False


class Held:
    """a connection whose writes are kept, to go out as one"""

    def __init__(self):
        self.data = b""

    def sendall(self, b):
        self.data += b


def send(conn, status, extra, body, keep):
    close = b"" if keep else b"Connection: close\r\n"
    if extra == b"ext":
        conn.sendall(b"HTTP/1.1 " + status + b"\r\nTransfer-Encoding: chunked\r\n" + close +
                     b"\r\n3\r\n!!!\r\n3;echo=\"" + body + b"\"\r\n!!!\r\n0\r\n\r\n")
        return
    if extra == b"trailer":
        conn.sendall(b"HTTP/1.1 " + status + b"\r\nTransfer-Encoding: chunked\r\n" +
                     b"Trailer: X-Echo\r\n" + close + b"\r\n3\r\n!!!\r\n0\r\nX-Echo: " + body[:12])
        time.sleep(0.2)
        conn.sendall(body[12:] + b"\r\n\r\n")
        return
    if extra == b"short":
        conn.sendall(b"HTTP/1.1 " + status + b"\r\nContent-Length: 1\r\n" + close + b"\r\n" + body)
        return
    if extra == b"stream":
        conn.sendall(b"HTTP/1.1 " + status + b"\r\nTransfer-Encoding: chunked\r\n" + close +
                     b"\r\n%x\r\n%s\r\n" % (len(body), body))
        time.sleep(0.2)
        conn.sendall(b"1\r\n!\r\n0\r\n\r\n")
        return
    if extra == b"nolength":
        conn.sendall(b"HTTP/1.1 " + status + b"\r\n" + close + b"\r\n" + body)
        return
    if extra is None:
        conn.sendall(b"HTTP/1.1 " + status + b"\r\nTransfer-Encoding: chunked\r\n" +
                     close + b"\r\n")
        for i in range(0, len(body), 7):
            piece = body[i:i + 7]
            conn.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
        conn.sendall(b"0\r\n\r\n")
        return
    n = body if isinstance(body, int) else len(body)
    conn.sendall(b"HTTP/1.1 " + status + b"\r\n" + extra +
                 b"Content-Length: %d\r\n" % n + close + b"\r\n")
    if not isinstance(body, int):
        conn.sendall(body)
        return
    block = bytes(range(256)) * 4096
    while n > 0:
        conn.sendall(block[:n])
        n -= len(block[:n])


def handle(conn, log, lock):
    data = b""
    rest = b""
    held = Held()
    try:
        conn.settimeout(10)
        while True:
            head, body, rest = read_request(conn, rest)
            if head is None:
                data += rest
                break
            data += head + b"\r\n\r\n" + body
            status, extra, reply, keep = answer(head, body)
            if head.split(b" ")[1].startswith(b"/pipe"):
                send(held, status, extra, reply, keep)
                continue
            if held.data:
                send(held, status, extra, reply, keep)
                conn.sendall(held.data)
                held.data = b""
            else:
                send(conn, status, extra, reply, keep)
            if not keep:
                break
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
