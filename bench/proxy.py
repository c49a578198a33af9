#!/usr/bin/python3
"""proxy.py - the egress proxy against a direct connection, side by side.

An "upstream" runs in this process, on 127.0.0.1 only (a thread with one
selectors loop: sink, source and echo).  The same client program runs once
on the host, straight to it, and once inside `corral run` through a CONNECT
tunnel on 127.0.0.1:3128 to bench.test, which the policy's "hosts" map
points at 127.0.0.1.  It measures, timing inside the client:

  1. throughput, upload and download of BENCH_BYTES (default 1 GiB),
     median of BENCH_REPEAT (default 3) transfers on one connection each,
     also through a bare splice relay on the host (the floor any relay
     meets here), with the CPU seconds per GiB of each process;
  2. latency of BENCH_LAT (default 200) sequential new connections, each
     with a 1-byte echo round trip, also through a bare C relay on the
     host (bench/floor_relay.c, built with cc: the floor any relay meets);
     both 1 and 2 also through a relay whose bytes stay in the kernel
     (floor_relay.c --sockmap: a sockmap and a BPF verdict; root only), to
     show what leaving user space would buy on this kernel;
  3. BENCH_CONNS (default 1000) tunnels opened at once, all held open,
     then one small echo on each.

  proxy.py [CORRAL]     (default build/corral)

BENCH_OPEN_FILES and BENCH_PIDS, if set, are the policy's limits.open_files
and limits.pids: under the default policy a command has 1024 fds on most
hosts (a quarter of fs.file-max over 1024 pids, not below 1024), fewer
than part 3's tunnels need.
"""
import json
import os
import resource
import selectors
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

CORRAL = sys.argv[1] if len(sys.argv) > 1 else "build/corral"
NBYTES = int(os.environ.get("BENCH_BYTES", str(1 << 30)))
REPEAT = int(os.environ.get("BENCH_REPEAT", "3"))
NLAT = int(os.environ.get("BENCH_LAT", "200"))
NCONNS = int(os.environ.get("BENCH_CONNS", "1000"))
LIMITS = {k: int(os.environ[e]) for k, e in (("open_files", "BENCH_OPEN_FILES"),
                                                ("pids", "BENCH_PIDS")) if os.environ.get(e)}
NAME = "bench.test"
CHUNK = 1 << 20
AIM_RATIO = 0.90        # issue 17: proxy throughput at least 90% of direct
AIM_ADDED_MS = 0.1      # issue 17: at most 0.1 ms added per new connection
RUN_TIMEOUT = 600       # seconds, for each client run (corral --timeout too)

# ---- the client: runs on the host and inside the sandbox, prints JSON ------
# argv: MODE HOST PORT PROXY(- for direct) ARG REPEAT
CLIENT = r'''
import errno, json, resource, selectors, socket, statistics, struct, sys, time
mode, host, port, proxy, arg, reps = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
CHUNK = 1 << 20
TIMEOUT = 30.0
now = time.perf_counter
req = b"CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (host.encode(), port, host.encode(), port)
if proxy != "-":
    ph, pp = proxy.rsplit(":", 1)
    paddr = (ph, int(pp))

def check_head(head):
    status = head.split(b"\r\n", 1)[0]
    if status.split()[1:2] != [b"200"]:
        raise OSError("CONNECT answered: " + status.decode(errors="replace"))

def recv_exact(s, n):
    out = b""
    while len(out) < n:
        k = s.recv(n - len(out))
        if not k:
            raise OSError("connection closed after %d of %d bytes" % (len(out), n))
        out += k
    return out

def open_conn():
    if proxy == "-":
        s = socket.create_connection((host, port), timeout=TIMEOUT)
    else:
        s = socket.create_connection(paddr, timeout=TIMEOUT)
        s.sendall(req)
        buf = b""
        while b"\r\n\r\n" not in buf:
            k = s.recv(4096)
            if not k or len(buf) > 65536:
                raise OSError("no CONNECT answer")
            buf += k
        head, rest = buf.split(b"\r\n\r\n", 1)
        check_head(head)
        if rest:
            raise OSError("bytes before the request")
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s

def upload(n):
    s = open_conn()
    mv = memoryview(bytearray(CHUNK))
    t0 = now()
    s.sendall(b"U" + struct.pack("!Q", n))
    left = n
    while left:
        k = min(left, CHUNK)
        s.sendall(mv[:k])
        left -= k
    got = struct.unpack("!Q", recv_exact(s, 8))[0]
    t = now() - t0
    s.close()
    if got != n:
        raise OSError("server got %d of %d bytes" % (got, n))
    return t

def download(n):
    s = open_conn()
    mv = memoryview(bytearray(CHUNK))
    t0 = now()
    s.sendall(b"D" + struct.pack("!Q", n))
    got = 0
    while got < n:
        k = s.recv_into(mv, min(CHUNK, n - got))
        if not k:
            raise OSError("download ended after %d of %d bytes" % (got, n))
        got += k
    t = now() - t0
    s.close()
    return t

def latency(count):
    times = []
    for i in range(count + 5):          # 5 warm-up connections, not counted
        t0 = now()
        s = open_conn()
        s.sendall(b"Ex")
        if recv_exact(s, 1) != b"x":
            raise OSError("bad echo")
        t = now() - t0
        s.close()
        if i >= 5:
            times.append(t * 1000)
    return times

def listen_overflows():
    # this netns's TcpExt ListenOverflows: SYNs a full accept queue dropped
    try:
        lines = [l.split() for l in open("/proc/net/netstat") if l.startswith("TcpExt:")]
        return int(dict(zip(lines[0], lines[1]))["ListenOverflows"])
    except (OSError, IndexError, KeyError, ValueError):
        return -1

def concurrent(count):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = count + 64
    if soft != resource.RLIM_INFINITY and soft < want:
        new = want if hard == resource.RLIM_INFINITY else min(want, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    n = count if soft == resource.RLIM_INFINITY else min(count, soft - 32)
    errors = {}
    def fail(st, why):
        errors[why] = errors.get(why, 0) + 1
        if st["sock"] is not None:
            try:
                sel.unregister(st["sock"])
            except (KeyError, ValueError):
                pass
            st["sock"].close()
            st["sock"] = None
        st["phase"] = "failed"
    sel = selectors.DefaultSelector()
    target = paddr if proxy != "-" else (host, port)
    conns = []
    lo0 = listen_overflows()
    t0 = now()
    deadline = t0 + 60
    for i in range(n):
        st = {"sock": None, "phase": "connecting", "buf": b"", "i": i}
        conns.append(st)
        try:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        except OSError as e:
            fail(st, "socket: " + errno.errorcode.get(e.errno, str(e.errno)))
            continue
        s.setblocking(False)
        st["sock"] = s
        e = s.connect_ex(target)
        if e not in (0, errno.EINPROGRESS):
            fail(st, "connect: " + errno.errorcode.get(e, str(e)))
            continue
        sel.register(s, selectors.EVENT_WRITE, st)
    def pending(phase):
        return sum(1 for st in conns if st["phase"] == phase)
    # phase 1: every connection up (and, through the proxy, its tunnel)
    while (pending("connecting") or pending("head")) and now() < deadline:
        for key, ev in sel.select(timeout=1.0):
            st, s = key.data, key.fileobj
            if st["phase"] == "connecting":
                e = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if e:
                    fail(st, "connect: " + errno.errorcode.get(e, str(e)))
                elif proxy == "-":
                    st["phase"] = "open"
                    sel.modify(s, selectors.EVENT_READ, st)
                else:
                    try:
                        s.send(req)     # small: goes out whole on a fresh socket
                    except OSError as ex:
                        fail(st, "send CONNECT: " + str(ex))
                        continue
                    st["phase"] = "head"
                    sel.modify(s, selectors.EVENT_READ, st)
            elif st["phase"] == "head":
                try:
                    k = s.recv(4096)
                except OSError as ex:
                    fail(st, "CONNECT: " + str(ex))
                    continue
                if not k:
                    fail(st, "closed during CONNECT")
                    continue
                st["buf"] += k
                if b"\r\n\r\n" in st["buf"]:
                    try:
                        check_head(st["buf"].split(b"\r\n\r\n", 1)[0])
                    except OSError as ex:
                        fail(st, str(ex))
                        continue
                    st["phase"] = "open"
                    st["buf"] = b""
            else:                       # "open": nothing may arrive yet
                fail(st, "closed while held open")
    for st in conns:
        if st["phase"] in ("connecting", "head"):
            fail(st, "timed out opening")
    t_open = now()
    held = pending("open")
    deadline = t_open + 60
    # phase 2: all of them are held open; one echo on each
    for st in conns:
        if st["phase"] != "open":
            continue
        st["want"] = b"%06d" % st["i"]
        try:
            st["sock"].send(b"E" + st["want"])
        except OSError as ex:
            fail(st, "send: " + str(ex))
            continue
        st["phase"] = "echo"
    while pending("echo") and now() < deadline:
        for key, ev in sel.select(timeout=1.0):
            st, s = key.data, key.fileobj
            if st["phase"] != "echo":
                continue
            try:
                k = s.recv(4096)
            except OSError as ex:
                fail(st, "echo: " + str(ex))
                continue
            if not k:
                fail(st, "closed before the echo")
                continue
            st["buf"] += k
            if len(st["buf"]) >= len(st["want"]):
                if st["buf"] != st["want"]:
                    fail(st, "wrong echo")
                else:
                    st["phase"] = "done"
    for st in conns:
        if st["phase"] == "echo":
            fail(st, "timed out waiting for the echo")
    t_end = now()
    ok = pending("done")
    for st in conns:
        if st["sock"] is not None:
            st["sock"].close()
    sel.close()
    lo1 = listen_overflows()
    return {"asked": count, "tried": n, "held": held, "ok": ok, "errors": errors,
            "overflows": lo1 - lo0 if lo0 >= 0 and lo1 >= 0 else None,
            "open_s": t_open - t0, "echo_s": t_end - t_open, "total_s": t_end - t0,
            "nofile": [soft, hard]}

if mode == "tput":
    up = [upload(arg) for _ in range(reps)]
    down = [download(arg) for _ in range(reps)]
    ru = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"up": up, "down": down, "cpu": ru.ru_utime + ru.ru_stime}))
elif mode == "lat":
    print(json.dumps({"ms": latency(arg)}))
elif mode == "conc":
    print(json.dumps(concurrent(arg)))
'''


# ---- the upstream: one selectors loop on 127.0.0.1 ------------------------
class Upstream:
    """Per connection, the first byte says what it wants:
    U<u64 n>  sink n bytes, then answer the count as a u64;
    D<u64 n>  send n bytes;
    E         echo everything after it."""

    SLICE = 64          # reads or writes per readiness event, for fairness

    def __init__(self):
        self.lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(4096)
        self.lsock.setblocking(False)
        self.port = self.lsock.getsockname()[1]
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.lsock, selectors.EVENT_READ, None)
        self.wake_r, self.wake_w = socket.socketpair()
        self.sel.register(self.wake_r, selectors.EVENT_READ, "wake")
        self.stopping = False
        self.buf = memoryview(bytearray(CHUNK))
        self.zeros = memoryview(bytes(CHUNK))
        self.conns = {}
        self.cpu = 0.0
        self.thread = threading.Thread(target=self.run, name="upstream")

    def start(self):
        self.thread.start()

    def stop(self):
        self.stopping = True
        self.wake_w.send(b"x")
        self.thread.join(30)
        for s in list(self.conns):
            self.close(s)
        self.sel.close()
        for s in (self.lsock, self.wake_r, self.wake_w):
            s.close()

    def close(self, s):
        self.conns.pop(s, None)
        try:
            self.sel.unregister(s)
        except (KeyError, ValueError):
            pass
        s.close()

    def run(self):
        while not self.stopping:
            self.cpu = time.thread_time()   # this thread's CPU seconds so far
            for key, ev in self.sel.select(timeout=1.0):
                if key.data is None:
                    self.accept()
                elif key.data == "wake":
                    return
                elif key.fileobj in self.conns:
                    try:
                        if ev & selectors.EVENT_READ:
                            self.readable(key.fileobj, key.data)
                        if key.fileobj in self.conns and ev & selectors.EVENT_WRITE:
                            self.writable(key.fileobj, key.data)
                    except (OSError, ValueError, struct.error):
                        self.close(key.fileobj)

    def accept(self):
        for _ in range(self.SLICE):
            try:
                s, _ = self.lsock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:     # EMFILE and the like: the client sees it
                return
            s.setblocking(False)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            st = {"mode": None, "head": b"", "n": 0, "got": 0, "left": 0, "out": b""}
            self.conns[s] = st
            self.sel.register(s, selectors.EVENT_READ, st)

    def readable(self, s, st):
        if st["mode"] == "U":
            for _ in range(self.SLICE):
                try:
                    k = s.recv_into(self.buf)
                except BlockingIOError:
                    return
                if not k:
                    return self.close(s)
                self.sunk(s, st, k)
            return
        try:
            data = s.recv(65536)
        except BlockingIOError:
            return
        if not data:
            return self.close(s)
        if st["mode"] == "E":
            return self.echo(s, st, data)
        if st["mode"] == "D":
            return              # the client says nothing more
        st["head"] += data
        head = st["head"]
        if head[:1] == b"E":
            st["mode"] = "E"
            if len(head) > 1:
                self.echo(s, st, head[1:])
        elif head[:1] in (b"U", b"D") and len(head) >= 9:
            st["mode"] = head[:1].decode()
            st["n"] = struct.unpack("!Q", head[1:9])[0]
            if st["mode"] == "U":
                if st["n"] == 0 or len(head) > 9:
                    self.sunk(s, st, len(head) - 9)
            else:
                st["left"] = st["n"]
                self.sel.modify(s, selectors.EVENT_READ | selectors.EVENT_WRITE, st)
        elif head[:1] not in (b"U", b"D"):
            self.close(s)

    def sunk(self, s, st, k):
        st["got"] += k
        if st["got"] >= st["n"] and st["n"] >= 0:
            s.send(struct.pack("!Q", st["got"]))   # 8 bytes: always fits
            st["n"] = -1                            # answered; wait for EOF

    def echo(self, s, st, data):
        st["out"] += data
        self.flush(s, st)

    def flush(self, s, st):
        try:
            k = s.send(st["out"])
        except BlockingIOError:
            k = 0
        st["out"] = st["out"][k:]
        self.sel.modify(s, selectors.EVENT_READ |
                        (selectors.EVENT_WRITE if st["out"] else 0), st)

    def writable(self, s, st):
        if st["mode"] == "E":
            return self.flush(s, st)
        if st["mode"] != "D":
            return
        for _ in range(self.SLICE):
            if not st["left"]:
                break
            try:
                k = s.send(self.zeros[:min(st["left"], CHUNK)])
            except BlockingIOError:
                return
            st["left"] -= k
        if not st["left"]:
            self.sel.modify(s, selectors.EVENT_READ, st)


# ---- running the client ----------------------------------------------------
# The upstream in this process may raise its own fd limit; corral and the
# direct client get the limit this benchmark was started with, as a user's
# command would.
NOFILE = resource.getrlimit(resource.RLIMIT_NOFILE)
WITH_NOFILE = ("import os, resource, sys; resource.setrlimit(resource.RLIMIT_NOFILE, (%d, %d)); "
               "os.execv(sys.argv[1], sys.argv[1:])" % NOFILE)


def raise_nofile(want):
    soft, hard = NOFILE
    if soft != resource.RLIM_INFINITY and soft < want:
        new = want if hard == resource.RLIM_INFINITY else min(want, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def children_cpu():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def client(argv_prefix, mode, host, port, proxy, arg, upstream=None):
    """The client's JSON; with it "tree_cpu": the CPU seconds of all it ran
    (through the proxy: corral's supervisor and the sandbox), "up_cpu": the
    upstream thread's meanwhile."""
    argv = ["/usr/bin/python3", "-c", WITH_NOFILE] + argv_prefix + [
        "/usr/bin/python3", "-c", CLIENT, mode, host, str(port), proxy, str(arg), str(REPEAT)]
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    tree0, up0 = children_cpu(), upstream.cpu if upstream else 0.0
    try:
        p = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, env=env, timeout=RUN_TIMEOUT + 30)
    except subprocess.TimeoutExpired:
        return None, "timed out"
    if p.returncode != 0:
        last = (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]
        return None, "failed (%d): %s" % (p.returncode, last[:200])
    try:
        r = json.loads(p.stdout.strip().splitlines()[-1])
        r["tree_cpu"] = children_cpu() - tree0
        r["up_cpu"] = (upstream.cpu if upstream else 0.0) - up0
        return r, None
    except (ValueError, IndexError):
        return None, "no result: %r" % p.stdout[-200:]


# ---- the floor: the least a user-space relay can do, for comparison -------
# A CONNECT relay with nothing else in it: blocking sockets, a thread a
# direction, splice(2) through a 1 MiB pipe, TCP_NODELAY.  It runs in the
# host's netns, judges nothing and has no event loop: what it reaches is
# what any relay between two loopback TCP connections can reach here.
BARE = r"""
import fcntl, os, socket, sys, threading
up_port = int(sys.argv[1])
l = socket.socket()
l.bind(("127.0.0.1", 0))
l.listen(64)
print(l.getsockname()[1], flush=True)

def pump(a, b):
    r, w = os.pipe()
    fcntl.fcntl(w, 1031, 1 << 20)           # F_SETPIPE_SZ
    try:
        while True:
            n = os.splice(a.fileno(), w, 1 << 20)
            if n == 0:
                break
            while n:
                n -= os.splice(r, b.fileno(), n)
    except OSError:
        pass
    finally:
        try:
            b.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        os.close(r)
        os.close(w)

def serve(c):
    head = b""
    while b"\r\n\r\n" not in head:
        k = c.recv(4096)
        if not k:
            return c.close()
        head += k
    u = socket.create_connection(("127.0.0.1", up_port))
    for s in (c, u):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    c.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
    t = threading.Thread(target=pump, args=(u, c))
    t.start()
    pump(c, u)
    t.join()
    c.close()
    u.close()

while True:
    c, _ = l.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"""


def bare_tput(port, upstream):
    """tput through BARE: (client result with "relay_cpu", None) or (None, why)."""
    p = subprocess.Popen(["/usr/bin/python3", "-c", BARE, str(port)], stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, text=True)
    try:
        relay_port = int(p.stdout.readline())
        r, err = client([], "tput", "127.0.0.1", port, "127.0.0.1:%d" % relay_port, NBYTES,
                        upstream)
    except ValueError:
        r, err = None, "the bare relay did not start"
    p.kill()
    ru = os.wait4(p.pid, 0)[2]
    p.returncode = -9       # reaped here: Popen must not wait for it again
    p.stdout.close()
    if r:
        r["relay_cpu"] = ru.ru_utime + ru.ru_stime
    return r, err


BENCH_DIR = os.path.dirname(os.path.abspath(__file__))


def floor_run(flags, port, upstream, tmp, runs):
    """The client's modes through bench/floor_relay.c (built here with cc)
    with flags, a C relay on the host: [(result, None) or (None, why)], one
    per (mode, arg)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    src, exe = os.path.join(BENCH_DIR, "floor_relay.c"), os.path.join(tmp, "floor_relay")
    if not cc or not os.path.exists(src):
        return [(None, "no C compiler or no %s" % src)] * len(runs)
    if not os.path.exists(exe):
        b = subprocess.run([cc, "-O2", "-o", exe, src], capture_output=True, text=True)
        if b.returncode != 0:
            return [(None, "cannot build floor_relay.c: " + b.stderr.strip()[-200:])] * len(runs)
    p = subprocess.Popen([exe] + flags + [str(port)], stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        relay_port = int(p.stdout.readline())
        out = [client([], mode, "127.0.0.1", port, "127.0.0.1:%d" % relay_port, arg, upstream)
               for mode, arg in runs]
    except ValueError:
        p.kill()
        why = (p.stderr.read().strip().splitlines() or ["it did not start"])[0]
        out = [(None, why[:120])] * len(runs)
    p.kill()
    p.wait()
    p.stdout.close()
    p.stderr.close()
    return out


def median_p95(xs):
    xs = sorted(xs)
    return statistics.median(xs), xs[max(0, int(len(xs) * 0.95) - 1)]


def main():
    if not shutil.which(CORRAL):
        sys.exit("proxy.py: no corral at %s" % CORRAL)
    corral = os.path.abspath(CORRAL)
    own = raise_nofile(2 * NCONNS + 256)
    tmp = tempfile.mkdtemp(prefix="corral-bench-")
    up = Upstream()
    up.start()
    try:
        os.chmod(tmp, 0o755)
        pol = os.path.join(tmp, "policy.json")
        with open(pol, "w") as f:
            # part 3 holds NCONNS tunnels, past the default limit of 256
            json.dump({"network": {"mode": "proxy",
                                   "allow": ["%s:%d" % (NAME, up.port)],
                                   "hosts": {NAME: "127.0.0.1"}},
                       "limits": dict(connections=max(NCONNS + 8, 256), **LIMITS)}, f)
        os.chmod(pol, 0o644)
        direct = ([], "127.0.0.1", "-")
        boxed = ([corral, "run", "--policy", pol, "--timeout", str(RUN_TIMEOUT), "--"],
                 NAME, "127.0.0.1:3128")

        def both(mode, arg):
            return [client(pre, mode, host, up.port, px, arg, up) for pre, host, px in (direct, boxed)]

        tput = both("tput", NBYTES)
        floor = bare_tput(up.port, up)
        lat = both("lat", NLAT)
        lat_floor = floor_run([], up.port, up, tmp, [("lat", NLAT)])[0]
        kernel = floor_run(["--sockmap"], up.port, up, tmp, [("tput", NBYTES), ("lat", NLAT)])
        conc = both("conc", NCONNS)
    finally:
        up.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    soft, hard = NOFILE
    inf = resource.RLIM_INFINITY
    print(f"egress proxy vs direct on loopback (uid {os.geteuid()}, {os.cpu_count()} cpus, "
          f"RLIMIT_NOFILE of corral and clients {soft}/{hard}, of the upstream {own}"
          f"{''.join(f', limits.{k} {v}' for k, v in LIMITS.items())})")
    if soft != inf and soft < 2 * NCONNS + 64:
        print(f"note: corral's soft fd limit {soft} is below 2 per tunnel for {NCONNS} tunnels")
    if own != inf and own < NCONNS + 64:
        print(f"note: the upstream's fd limit {own} is below {NCONNS} connections")
    print()
    print(f"throughput, {NBYTES / 2**20:.0f} MiB a transfer, median of {REPEAT}")
    print(f"{'':34} {'direct MB/s':>12} {'proxy MB/s':>12} {'proxy/direct':>13}"
          f"   {'':20} {'bare relay/direct':>17}")
    for key, label in (("up", "upload (client -> upstream)"),
                       ("down", "download (upstream -> client)")):
        cells = []
        for r, err in tput:
            cells.append(NBYTES / statistics.median(r[key]) / 1e6 if r else err)
        line = f"{label:34}"
        if all(isinstance(c, float) for c in cells):
            ratio = cells[1] / cells[0]
            mark = "" if ratio >= AIM_RATIO else "   missed"
            fl = floor[0]
            bare = (f"{NBYTES / statistics.median(fl[key]) / 1e6 / cells[0]:17.0%}"
                    if fl else f"  {floor[1]}")
            print(f"{line} {cells[0]:12.0f} {cells[1]:12.0f} {ratio:12.0%}   "
                  f"{'aim >= %.0f%%%s' % (AIM_RATIO * 100, mark):20} {bare}")
        else:
            print(f"{line} " + " | ".join(c if isinstance(c, str) else f"{c:.0f}" for c in cells))
    # the relay out of user space: what the kernel's own moving of bytes
    # between two sockets (floor_relay.c --sockmap) reaches, in the proxy's column
    r, err = kernel[0]
    d = tput[0][0]
    for key, label in (("up", "  upload, kernel relay (sockmap)"),
                       ("down", "  download, kernel relay (sockmap)")):
        if r and d:
            mbs = NBYTES / statistics.median(r[key]) / 1e6
            ratio = mbs / (NBYTES / statistics.median(d[key]) / 1e6)
            print(f"{label:34} {'':12} {mbs:12.0f} {ratio:12.0%}   no user-space relay at all")
        else:
            print(f"{label:34} {err or 'no direct figure'}")
            break
    # CPU seconds per GiB moved (both ways, every repeat): what load does not
    # bend.  "proxy" is corral's supervisor and the sandbox's init (corral's
    # whole tree less the client inside).  On 2 cores, three busy processes
    # share what two had: the proxy's column is what the ratio pays for.
    if all(r for r, _ in tput):
        gib = 2 * REPEAT * NBYTES / 2**30
        print(f"{'CPU s per GiB moved':34} {'client':>12} {'proxy':>12} {'upstream':>13}")
        rows = list(zip(tput, ("direct", "through the proxy")))
        if floor[0]:
            rows.append((floor, "through the bare relay"))
        for (r, _), label in rows:
            if label == "direct":
                proxy_cpu = 0.0
            elif "relay_cpu" in r:
                proxy_cpu = r["relay_cpu"]
            else:
                proxy_cpu = max(0.0, r["tree_cpu"] - r["cpu"])
            print(f"{label:34} {r['cpu'] / gib:12.3f} {proxy_cpu / gib:12.3f} "
                  f"{r['up_cpu'] / gib:13.3f}")
    print()
    print(f"new connection, {NLAT} sequential, connect + (CONNECT + 200) + 1-byte echo")
    print(f"{'':34} {'median ms':>12} {'p95 ms':>12}")
    stats = []
    for (r, err), label in zip(lat, ("direct", "through the proxy")):
        if r:
            m, p = median_p95(r["ms"])
            stats.append((m, p))
            print(f"{label:34} {m:12.3f} {p:12.3f}")
        else:
            print(f"{label:34} {err}")
    if len(stats) == 2:
        added = stats[1][0] - stats[0][0]
        print(f"{'added by the proxy':34} {added:12.3f} "
              f"{stats[1][1] - stats[0][1]:12.3f}   aim <= {AIM_ADDED_MS} ms (median)"
              f"{'' if added <= AIM_ADDED_MS else '   missed'}")
    # the floor: the least any user-space CONNECT relay adds here (floor_relay.c)
    r, err = lat_floor
    if r and stats:
        m, p = median_p95(r["ms"])
        print(f"{'through a bare C relay (floor)':34} {m:12.3f} {p:12.3f}")
        print(f"{'added by the bare relay':34} {m - stats[0][0]:12.3f} {p - stats[0][1]:12.3f}"
              f"   what the kernel charges any relay here")
    elif err:
        print(f"{'through a bare C relay (floor)':34} {err}")
    r, err = kernel[1]
    if r and stats:
        m, p = median_p95(r["ms"])
        print(f"{'through the kernel relay (sockmap)':34} {m:12.3f} {p:12.3f}")
        print(f"{'added by the kernel relay':34} {m - stats[0][0]:12.3f} {p - stats[0][1]:12.3f}")
    elif err:
        print(f"{'through the kernel relay (sockmap)':34} {err}")
    print()
    print(f"{NCONNS} connections opened at once, held open, one echo on each")
    print(f"{'':34} {'ok':>6} {'failed':>7} {'open s':>8} {'echo s':>8} {'total s':>8} "
          f"{'overflows':>10}  client nofile")
    for (r, err), label in zip(conc, ("direct", "through the proxy")):
        if not r:
            print(f"{label:34} {err}")
            continue
        failed = r["asked"] - r["ok"]
        lo = "?" if r["overflows"] is None else r["overflows"]
        print(f"{label:34} {r['ok']:6d} {failed:7d} {r['open_s']:8.2f} {r['echo_s']:8.2f} "
              f"{r['total_s']:8.2f} {lo:>10}  {r['nofile'][0]}/{r['nofile'][1]}")
        if r["tried"] < r["asked"]:
            print(f"{'':34} only {r['tried']} tried: the fd limit inside allows no more")
        for why, n in sorted(r["errors"].items(), key=lambda kv: -kv[1])[:5]:
            print(f"{'':34} {n} x {why}")
    print("(overflows: SYNs dropped by a full accept queue, in the netns of the listener "
          "the client dials; each costs a 1 s retransmit)")
    ok = all(r for r, _ in tput + lat + conc)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
