#!/usr/bin/python3
"""load.py - the daemon under load: 200 exec calls at once across 50
sandboxes, and 1,000 proxied connections held open at once from one
sandbox, with no error; prints the latency distributions.  A box's proxy
may hold an eighth of the daemon's open-files limit (six a tunnel): where
the hard limit is too low for 1,000 and cannot be raised (no
CAP_SYS_RESOURCE), the proxied part holds what one box may, and says so.

    tests/load.py CORRAL [EXECS SANDBOXES CONNS]

Everything runs on loopback: the "external" server is a thread of this
script on 127.0.0.1, reached from the sandbox by a name the policy maps.
Ends with a line "load: N passed, N failed".
"""
import http.client
import json
import os
import resource
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

CORRAL = os.path.abspath(sys.argv[1])
EXECS = int(sys.argv[2]) if len(sys.argv) > 2 else 200
SANDBOXES = int(sys.argv[3]) if len(sys.argv) > 3 else 50
CONNS = int(sys.argv[4]) if len(sys.argv) > 4 else 1000

passed = failed = 0


def result(ok, what):
    global passed, failed
    if ok:
        passed += 1
        print("ok - " + what)
    else:
        failed += 1
        print("not ok - " + what)


class UnixConn(http.client.HTTPConnection):
    def __init__(self, path, timeout=120):
        super().__init__("corral", timeout=timeout)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


def api(sock, method, path, body=None):
    c = UnixConn(sock)
    try:
        c.request(method, path, body=json.dumps(body) if body is not None else None)
        r = c.getresponse()
        data = r.read()
        return r.status, json.loads(data) if data else None
    finally:
        c.close()


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p / 100))]


def table(name, ms):
    print("  %-34s n=%-5d p50 %7.1f ms  p90 %7.1f ms  p99 %7.1f ms  max %7.1f ms"
          % (name, len(ms), pct(ms, 50), pct(ms, 90), pct(ms, 99), max(ms)))


def parallel(n, fn):
    """Run fn(i) for i < n in n threads at once; the list of results."""
    out = [None] * n
    gate = threading.Barrier(n)

    def run(i):
        try:
            gate.wait(30)
            out[i] = fn(i)
        except Exception as e:  # noqa: BLE001 - reported as a failure
            out[i] = e
    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    return out


def exec_load(sock):
    ids = parallel(SANDBOXES, lambda i: api(sock, "POST", "/v1/sandboxes",
                                           {"idle_freeze_ms": 0}))
    good = [r[1]["id"] for r in ids if isinstance(r, tuple) and r[0] == 201]
    result(len(good) == SANDBOXES, "%d sandboxes created at once (%d)" % (SANDBOXES, len(good)))
    if not good:
        return

    def one(i):
        sb = good[i % len(good)]
        t0 = time.monotonic()
        st, res = api(sock, "POST", "/v1/sandboxes/%s/exec" % sb,
                      {"argv": ["/bin/sh", "-c", "echo call-$0", str(i)]})
        return st, res, (time.monotonic() - t0) * 1000

    t0 = time.monotonic()
    out = parallel(EXECS, one)
    wall = time.monotonic() - t0
    errors = [o for o in out if not isinstance(o, tuple) or o[0] != 200 or
              o[1].get("stdout") != "call-%d\n" % out.index(o)]
    ms = [o[2] for o in out if isinstance(o, tuple)]
    result(not errors, "%d exec calls at once across %d sandboxes, %.2f s (%d errors%s)"
           % (EXECS, len(good), wall, len(errors),
              ": " + repr(errors[0])[:200] if errors else ""))
    if ms:
        table("exec round trip under load", ms)
    for sb in good:
        api(sock, "DELETE", "/v1/sandboxes/" + sb)
    st, body = api(sock, "GET", "/v1/sandboxes")
    result(st == 200 and body["sandboxes"] == [], "all destroyed")


class EchoServer(threading.Thread):
    """Line echo on 127.0.0.1: one thread, every connection held open."""

    def __init__(self):
        super().__init__(daemon=True)
        self.ls = socket.socket()
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(4096)
        self.port = self.ls.getsockname()[1]
        self.sel = selectors.DefaultSelector()
        self.stop = False
        self.peak = 0
        self.open = 0

    def run(self):
        self.ls.setblocking(False)
        self.sel.register(self.ls, selectors.EVENT_READ)
        while not self.stop:
            for key, _ in self.sel.select(0.2):
                if key.fileobj is self.ls:
                    try:
                        c, _ = self.ls.accept()
                    except OSError:
                        continue
                    c.setblocking(False)
                    self.sel.register(c, selectors.EVENT_READ)
                    self.open += 1
                    self.peak = max(self.peak, self.open)
                    continue
                c = key.fileobj
                try:
                    data = c.recv(4096)
                except OSError:
                    data = b""
                if data:
                    c.send(data)
                else:
                    self.sel.unregister(c)
                    c.close()
                    self.open -= 1


INSIDE = r'''
import socket, sys, time, json, resource
n, host, port = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
resource.setrlimit(resource.RLIMIT_NOFILE, (n + 64, n + 64))
socks, ms, errors = [], [], []
for i in range(n):
    t0 = time.monotonic()
    try:
        s = socket.create_connection((host, port), 30)
        s.sendall(b"line %d\n" % i)
        got = b""
        while not got.endswith(b"\n"):
            chunk = s.recv(100)
            if not chunk:
                break
            got += chunk
        if got != b"line %d\n" % i:
            errors.append("echo %d: %r" % (i, got))
        socks.append(s)
        ms.append((time.monotonic() - t0) * 1000)
    except OSError as e:
        errors.append("conn %d: %s" % (i, e))
        if len(errors) > 20:
            break
# all open at once, then each answers again
for i, s in enumerate(socks):
    try:
        s.sendall(b"again\n")
        if s.recv(100) != b"again\n":
            errors.append("again %d" % i)
    except OSError as e:
        errors.append("again %d: %s" % (i, e))
print(json.dumps({"open": len(socks), "ms": ms, "errors": errors[:5], "nerrors": len(errors)}))
'''


def proxy_load(sock, conns):
    srv = EchoServer()
    srv.start()
    try:
        st, body = api(sock, "POST", "/v1/sandboxes", {
            "idle_freeze_ms": 0,
            "policy": {"network": {"mode": "proxy", "allow": ["load.test:%d" % srv.port],
                                   "hosts": {"load.test": "127.0.0.1"}},
                       # past the default cap of 256 (limits.connections)
                       "limits": {"timeout": "300s", "connections": conns + 16}}})
        result(st == 201, "a proxied sandbox (%s)" % st)
        if st != 201:
            return
        sb = body["id"]
        t0 = time.monotonic()
        st, res = api(sock, "POST", "/v1/sandboxes/%s/exec" % sb,
                      {"argv": ["/usr/bin/python3", "-c", INSIDE, str(conns), "load.test",
                                str(srv.port)], "timeout_seconds": 240})
        wall = time.monotonic() - t0
        out = {}
        try:
            out = json.loads(res["stdout"])
        except (ValueError, KeyError, TypeError):
            pass
        ok = st == 200 and out.get("open") == conns and out.get("nerrors") == 0
        result(ok, "%d proxied connections held open at once, %.2f s (open %s, server saw %d "
               "at once, errors %s)%s" % (conns, wall, out.get("open"), srv.peak,
                                          out.get("nerrors"),
                                          "" if ok else ": %s %s" % (out.get("errors"),
                                                                     repr(res)[:400])))
        if out.get("ms"):
            table("proxied connect + first echo", out["ms"])
        api(sock, "DELETE", "/v1/sandboxes/" + sb)
    finally:
        srv.stop = True
        srv.join(5)


FD_SHARES = 8          # src/lib/box.c: BOX_FD_SHARES
FDS_A_TUNNEL = 6       # two sockets, two pipes (proxy.c: conn_budget)


def daemon_fds():
    """CONNS in one box needs about 48 * CONNS of the daemon's open-files
    limit: raised where the caller may."""
    want = FD_SHARES * FDS_A_TUNNEL * CONNS + 4096
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < want:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, want))
        except (ValueError, OSError):
            pass


def box_conns(daemon_pid):
    """What one box of the daemon may hold (its fd share), CONNS at most."""
    with open("/proc/%d/limits" % daemon_pid) as f:
        for line in f:
            if line.startswith("Max open files"):
                soft = line.split()[3]
                if soft == "unlimited":
                    return CONNS
                share = (int(soft) - 128) // FDS_A_TUNNEL // FD_SHARES
                return min(CONNS, share - 16)
    return CONNS


def main():
    tmp = tempfile.mkdtemp(prefix="corral-load.")
    sock = os.path.join(tmp, "sock")
    d = subprocess.Popen([CORRAL, "serve", "--socket", sock, "--state-dir",
                          os.path.join(tmp, "state")], stderr=open(os.path.join(tmp, "log"), "w"),
                         preexec_fn=daemon_fds)
    try:
        for _ in range(100):
            if os.path.exists(sock):
                break
            time.sleep(0.05)
        conns = box_conns(d.pid)
        print("load: %d exec calls across %d sandboxes; %d proxied connections%s"
              % (EXECS, SANDBOXES, conns, "" if conns == CONNS else
                 " (of %d: what one box may hold of this daemon's open-files "
                 "limit, which cannot be raised here)" % CONNS))
        exec_load(sock)
        proxy_load(sock, conns)
    finally:
        d.send_signal(signal.SIGTERM)
        try:
            rc = d.wait(30)
        except subprocess.TimeoutExpired:
            d.kill()
            rc = d.wait()
        result(rc == 0, "the daemon stopped cleanly (exit %s)" % rc)
        if rc != 0:
            print(open(os.path.join(tmp, "log")).read()[-2000:])
        shutil.rmtree(tmp, ignore_errors=True)
    print("load: %d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


main()
