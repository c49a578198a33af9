#!/usr/bin/python3
"""ttyapi.py - drive the daemon's terminal protocol (docs/API.md, Terminals).

    ttyapi.py SOCKET|HOST:PORT SANDBOX [--token T] [--size R,C] STEP... -- ARGV...

Sends POST /v1/sandboxes/SANDBOX/exec with "tty": true and the Upgrade
headers, then runs the steps, each bounded in time:
    expect:TEXT     wait (10 s at most) until the output holds TEXT
    send:TEXT       an input frame (Python escapes: \\r, \\x03 ...)
    resize:R,C      a window size frame
    fill:N          N bytes of "x" as input, in frames of 4 KiB
    raw:HEX         these bytes as they are (a frame of one's own making)
    resizes:N       N window size frames at once, of sizes from 0x0 to
                    65535x65535, the last one 40x100
    stall:SECONDS   read nothing for that long (the socket's receive
                    buffer is small: the daemon's writes back up)
    close           close the connection now (the steps end)
    sleep:SECONDS
Then waits (20 s) for the exit frame, unless closed.  Prints one JSON
object: status (the HTTP status), output, result (of the 'x' frame), error
(of an 'e' frame), eof (the daemon closed the connection).
"""
import codecs, json, socket, struct, sys, time


def connect(where):
    if where.startswith("/"):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(where)
    else:
        host, port = where.rsplit(":", 1)
        s = socket.create_connection((host, int(port)))
    s.settimeout(10)
    return s


class Conn:
    def __init__(self, s):
        self.s, self.buf, self.eof = s, b"", False
        self.out, self.result, self.error = bytearray(), None, None

    def fill(self, deadline):
        self.s.settimeout(max(0.01, deadline - time.time()))
        try:
            d = self.s.recv(65536)
        except socket.timeout:
            return
        except ConnectionResetError:
            d = b""
        if not d:
            self.eof = True
        self.buf += d

    def frames(self):
        while len(self.buf) >= 5:
            kind, n = self.buf[0:1], struct.unpack(">I", self.buf[1:5])[0]
            if len(self.buf) < 5 + n:
                return
            data, self.buf = self.buf[5:5 + n], self.buf[5 + n:]
            if kind == b"o":
                self.out += data
            elif kind == b"x":
                self.result = json.loads(data)
            elif kind == b"e":
                self.error = json.loads(data)

    def pump(self, seconds, done):
        # frames already read first: the first output often comes in the
        # same segment as the 101, and waiting on recv for it stalled the
        # whole step (10 s) with the answer in hand
        deadline = time.time() + seconds
        self.frames()
        while not done() and not self.eof and time.time() < deadline:
            self.fill(deadline)
            self.frames()


def main():
    args = sys.argv[1:]
    sep = args.index("--")
    where, sandbox, opts, argv = args[0], args[1], args[2:sep], args[sep + 1:]
    token, size, steps = None, None, []
    i = 0
    while i < len(opts):
        if opts[i] == "--token":
            token, i = opts[i + 1], i + 2
        elif opts[i] == "--size":
            size, i = [int(x) for x in opts[i + 1].split(",")], i + 2
        else:
            steps.append(opts[i])
            i += 1
    body = {"argv": argv, "tty": True}
    if size:
        body["rows"], body["cols"] = size
    data = json.dumps(body).encode()
    head = ("POST /v1/sandboxes/%s/exec HTTP/1.1\r\nHost: corral\r\n"
            "Connection: Upgrade\r\nUpgrade: corral-tty\r\n"
            "Content-Type: application/json\r\nContent-Length: %d\r\n"
            % (sandbox, len(data)))
    if token:
        head += "Authorization: Bearer %s\r\n" % token
    s = connect(where)
    if any(st.startswith("stall:") for st in steps):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(head.encode() + b"\r\n" + data)
    c = Conn(s)
    deadline = time.time() + 10
    while b"\r\n\r\n" not in c.buf and not c.eof and time.time() < deadline:
        c.fill(deadline)
    status_line, _, rest = c.buf.partition(b"\r\n")
    status = int(status_line.split()[1]) if status_line.startswith(b"HTTP/") else 0
    hdrs, _, c.buf = rest.partition(b"\r\n\r\n")
    rep = {"status": status}
    if status != 101:
        rep["body"] = c.buf.decode(errors="replace")
        print(json.dumps(rep))
        return
    closed = False
    for st in steps:
        kind, _, arg = st.partition(":")
        if kind == "expect":
            want = codecs.decode(arg, "unicode_escape").encode()
            c.pump(10, lambda: want in c.out)
        elif kind == "send":
            b = codecs.decode(arg, "unicode_escape").encode("latin-1")
            s.sendall(b"i" + struct.pack(">I", len(b)) + b)
        elif kind == "resize":
            r, col = (int(x) for x in arg.split(","))
            s.sendall(b"w" + struct.pack(">IHH", 4, r, col))
        elif kind == "fill":
            left = int(arg)
            while left:
                n = min(left, 4096)
                s.sendall(b"i" + struct.pack(">I", n) + b"x" * n)
                left -= n
        elif kind == "resizes":
            sizes = [(0, 0), (65535, 65535), (1, 65535), (65535, 1)]
            frames = b"".join(b"w" + struct.pack(">IHH", 4, *sizes[k % 4])
                              for k in range(int(arg) - 1))
            s.sendall(frames + b"w" + struct.pack(">IHH", 4, 40, 100))
        elif kind == "stall":
            time.sleep(float(arg))
        elif kind == "raw":
            try:
                s.sendall(bytes.fromhex(arg))
            except OSError:
                pass
        elif kind == "close":
            s.close()
            closed = True
            break
        elif kind == "sleep":
            c.pump(float(arg), lambda: False)
    if not closed:
        c.pump(20, lambda: c.result is not None or c.error is not None)
        c.pump(5, lambda: False)	# then the daemon closes
        s.close()
    rep.update(output=c.out.decode(errors="replace"), result=c.result,
               error=c.error, eof=c.eof)
    print(json.dumps(rep))


main()
