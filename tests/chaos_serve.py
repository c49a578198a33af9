#!/usr/bin/python3
"""chaos_serve.py - the daemon's API driven at random by several clients at
once, the way no test orders it: sandboxes deleted under a streaming exec,
paused during a file upload, snapshotted while a background process writes,
requests cut off mid-body, bodies that are not JSON.  Two of the four
clients are on the unix socket, two over TCP with the daemon's token (a
remote party: now and then a wrong token).  Every choice comes from one
seed, printed, so a failure can be replayed (as far as timing allows).

    tests/chaos_serve.py CORRAL [SECONDS [SEED]]   (check: 40 s; make chaos: 600)

The daemon's own flags come from the seed too: a pool, a low sandbox cap,
a small snapshot budget; TLS on its TCP listener (then a TCP client also
stalls handshakes, cuts records short, sends close_notify mid-request,
asks to renegotiate, and the certificate is reloaded under it by
SIGHUP); an image in its store (some sandboxes are made of it, and
snapshotted and forked like the rest); as root, --uid-range for the
workspace's owner.  Exports write onto the host too, over the unix
socket: `to` a new directory and `apply` onto the shared workspace.

Fails on: a 500 (the daemon's own fault, never the client's), a request
with no answer within REQ_TIMEOUT, the daemon dying or not stopping on
SIGTERM with status 0, a sanitizer's report in its stderr (run it on the
ASan build), and anything left behind once every sandbox is deleted
(its cgroups and the processes in them, its sandboxes' state files).
Ends with a line "chaos: N passed, N failed".
"""
import glob
import http.client
import http.server
import json
import os
import random
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

from freeport import free_port

CORRAL = os.path.abspath(sys.argv[1])
SECONDS = float(sys.argv[2]) if len(sys.argv) > 2 else 40
SEED = int(sys.argv[3]) if len(sys.argv) > 3 else random.SystemRandom().randrange(1 << 30)
CLIENTS = 4
MAX_OPS = 20000             # per client: the loop ends at SECONDS or here
MAX_BOXES = 6               # live sandboxes the clients share
REQ_TIMEOUT = float(os.environ.get("CHAOS_REQ_TIMEOUT", "60"))
ALLOWED_5XX = {503, 507}    # documented: busy, and over a budget


class UnixConn(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("corral", timeout=REQ_TIMEOUT)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


class Shared:
    def __init__(self):
        self.lock = threading.Lock()
        self.boxes = []
        self.snaps = []
        self.pids = {}          # box id -> [background pid]
        self.sock = None
        self.dpid = 0
        self.ws = None
        self.up_port = 0
        self.bad_tokens = 0
        self.tls = None         # the TCP clients' context, when the daemon has TLS
        self.certs = None       # (cert, key, the other cert, the other key) to swap in
        self.port = 0
        self.image = None       # an image of the daemon's store
        self.exports = None     # where `to` exports go, each to a new name
        self.per_peer = 100     # --max-sandboxes-per-peer
        self.nexport = 0
        self.bad = []           # what failed, one line each
        self.ops = {}           # op name -> count
        self.status = {}        # status -> count
        self.by_op = {}         # op name -> {status: count}

    def note(self, op, status):
        with self.lock:
            self.by_op.setdefault(op, {})
            self.by_op[op][status] = self.by_op[op].get(status, 0) + 1
            self.ops[op] = self.ops.get(op, 0) + 1
            self.status[status] = self.status.get(status, 0) + 1

    def fail(self, what):
        with self.lock:
            if len(self.bad) < 50:
                self.bad.append(what)

    def diagnose(self, url):
        """What the daemon says of the sandbox, and its process tree."""
        parts = url.split("/")
        out = []
        if len(parts) > 3 and parts[2] == "sandboxes":
            c = UnixConn(self.sock)
            c.timeout = 5
            try:
                c.request("GET", "/v1/sandboxes/" + parts[3])
                out.append(c.getresponse().read().decode(errors="replace")[:1500])
            except (http.client.HTTPException, OSError) as e:
                out.append(f"GET of the sandbox: {e}")
            c.close()
        try:
            out.append(subprocess.run(["pstree", "-p", "-a", str(self.dpid)], capture_output=True,
                                      text=True, timeout=10).stdout[-3000:])
        except (OSError, subprocess.SubprocessError) as e:
            out.append(f"pstree: {e}")
        return "\n".join(out)

    def take_bad_token(self):
        with self.lock:
            self.bad_tokens += 1
            return self.bad_tokens <= 5

    def pick(self, rng, lst):
        with self.lock:
            return rng.choice(lst) if lst else None


class Client:
    """tcp: (port, token) for a client over TCP with the daemon's token,
    None for one on the unix socket (the operator's side)."""

    def __init__(self, sock, sh, rng, n, tcp=None):
        self.sock, self.sh, self.rng, self.n, self.tcp = sock, sh, rng, n, tcp
        self.abandoned = []     # terminal sessions left open, unread (op_tty)
        self.c = self.conn()

    def conn(self):
        if self.tcp and self.sh.tls:
            return http.client.HTTPSConnection("127.0.0.1", self.tcp[0], timeout=REQ_TIMEOUT,
                                               context=self.sh.tls)
        if self.tcp:
            return http.client.HTTPConnection("127.0.0.1", self.tcp[0], timeout=REQ_TIMEOUT)
        return UnixConn(self.sock)

    def raw(self):
        """A socket of its own to the daemon, and the header lines it needs."""
        if self.tcp:
            s = socket.create_connection(("127.0.0.1", self.tcp[0]), timeout=10)
            if self.sh.tls:
                try:
                    s = self.sh.tls.wrap_socket(s, server_hostname="127.0.0.1")
                except OSError:
                    s.close()
                    raise
            return s, f"Authorization: Bearer {self.tcp[1]}\r\n".encode()
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(10)
        s.connect(self.sock)
        return s, b""

    def auth(self, headers):
        if self.tcp:
            # now and then a wrong token: a 401, and nothing done; a few
            # only, as 10 a minute lock the address out (api_gate.c)
            bad = self.rng.random() < 0.02 and self.sh.take_bad_token()
            headers["Authorization"] = "Bearer " + self.tcp[1] + ("x" if bad else "")
        return headers

    def reconnect(self):
        self.c.close()
        self.c = self.conn()

    def req(self, op, method, url, body=None, raw=None, headers=None):
        """-> (status, decoded JSON or bytes); None status: no answer."""
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        try:
            self.c.request(method, url, body=data, headers=self.auth(headers or {}))
            r = self.c.getresponse()
            out = r.read()
        except socket.timeout:
            self.sh.fail(f"client {self.n}: {method} {url} {(data or b'')[:200]!r}: "
                         f"no answer in {REQ_TIMEOUT} s; then:\n" + self.sh.diagnose(url))
            self.reconnect()
            return None, None
        except (http.client.HTTPException, OSError) as e:
            self.reconnect()
            self.sh.note(op, "conn:" + type(e).__name__)
            if os.environ.get("CHAOS_VERBOSE"):
                print(f"  {time.monotonic():.2f} client {self.n}: {method} {url}: {e!r}", flush=True)
            return None, None
        self.sh.note(op, r.status)
        # docs/API.md: pause without a freezer is a 501 that says why
        documented = r.status == 501 and url.endswith("/pause") and b"no freezer" in out
        if r.status >= 500 and r.status not in ALLOWED_5XX and not documented:
            self.sh.fail(f"client {self.n}: {method} {url} -> {r.status}: {out[:300]!r}")
        if r.getheader("Content-Type", "").startswith("application/json"):
            try:
                return r.status, json.loads(out)
            except ValueError:
                self.sh.fail(f"client {self.n}: {method} {url}: a body that is not JSON: {out[:200]!r}")
        return r.status, out

    def cut(self, op, head, send_bytes, read_some=False):
        """A request on a connection of its own, cut off: after part of
        its body, or after part of the answer."""
        s = None
        try:
            s, auth = self.raw()
            line = head.index(b"\r\n") + 2
            s.sendall(head[:line] + auth + head[line:] + send_bytes)
            if read_some:
                s.recv(self.rng.choice([1, 100, 4096]))
        except OSError:
            pass
        finally:
            if s:
                s.close()
        self.sh.note(op, "cut")

    # ---- the operations ----------------------------------------------------
    def box(self):
        return self.sh.pick(self.rng, self.sh.boxes)

    def op_create(self):
        with self.sh.lock:
            if len(self.sh.boxes) >= MAX_BOXES:
                return
        body = {"labels": {"chaos": str(self.n)}}
        if self.rng.random() < 0.5:
            body["idle_freeze_ms"] = self.rng.choice([0, 5, 50, 1000])
        if self.rng.random() < 0.2:
            body["ttl_seconds"] = self.rng.choice([1, 3, 30])
        if self.rng.random() < 0.3:
            # small limits, for the calls to meet them: OOM, pids, a full disk
            body["policy"] = {"limits": self.rng.choice([
                {"memory": "32M"}, {"pids": 8}, {"disk": "8M"},
                {"memory": "48M", "pids": 16, "disk": "16M"}])}
        if self.rng.random() < 0.5:
            body["workspace"] = self.sh.ws     # diff, export and snapshot need one
        elif self.rng.random() < 0.1:
            # the host's socket directories: a 403, never a sandbox (nor a 500)
            where = self.rng.choice(["/run", "/var/run", "/tmp", "/run/user", "/run/."])
            if self.rng.random() < 0.5:
                body["workspace"] = where
            else:
                body["policy"] = {"filesystem": {self.rng.choice(["ro", "rw"]): [where + ":/mnt/h"]}}
        if self.rng.random() < 0.4:
            body.setdefault("policy", {})["network"] = {
                "mode": "proxy", "allow": [f"up.test:{self.sh.up_port}"],
                "hosts": {"up.test": "127.0.0.1"}}
        if self.sh.image and self.rng.random() < 0.3:
            body["image"] = self.sh.image
        lease = None
        if self.rng.random() < 0.1:
            lease = self.open_lease()
            body["lease"] = lease[1] if lease else "ls-nope"
        snap = self.sh.pick(self.rng, self.sh.snaps)
        if snap and self.rng.random() < 0.3:
            body["from_snapshot"] = snap
        st, out = self.req("create" + ("-image" if "image" in body else ""), "POST",
                           "/v1/sandboxes", body)
        if st in (200, 201) and ("/run" in json.dumps(body) or body.get("workspace") == "/tmp"):
            self.sh.fail(f"client {self.n}: a create on the host's sockets -> {st}: {str(body)[:200]}")
        if st == 201 or (st == 200 and isinstance(out, dict) and "id" in out):
            with self.sh.lock:
                self.sh.boxes.append(out["id"])
        # without --policy a TCP client is held to the built-in default,
        # which has no network: its networked creates are never made (403,
        # or refused before the policy is judged: a lease, --max-sandboxes)
        if self.tcp and "network" in body.get("policy", {}) and st in (200, 201):
            self.sh.fail(f"client {self.n}: a TCP create with a network -> {st}: {str(out)[:300]}")
        if lease:
            # the lease's end takes its sandbox, whoever is using it
            time.sleep(self.rng.choice([0, 0.05, 0.5]))
            lease[0].close()
            self.sh.note("lease-closed", "cut")

    def open_lease(self):
        """-> (its socket, held open; its id), or None."""
        s = None
        try:
            s, auth = self.raw()
            s.sendall(b"POST /v1/leases HTTP/1.1\r\nHost: x\r\n" + auth + b"Content-Length: 0\r\n\r\n")
            got = b""
            while b'"lease"' not in got or not got.rstrip(b"\r\n").endswith(b"}"):
                more = s.recv(4096)
                if not more:
                    break
                got += more
            i = got.find(b'"ls-')
            if i < 0:
                self.sh.note("lease", "no lease")
                s.close()
                return None
            self.sh.note("lease", 200)
            return s, got[i + 1:got.index(b'"', i + 1)].decode()
        except OSError:
            if s:
                s.close()
            self.sh.note("lease", "conn")
            return None

    def op_delete(self):
        b = self.box()
        if not b:
            return
        with self.sh.lock:
            if b in self.sh.boxes:
                self.sh.boxes.remove(b)
        self.req("delete", "DELETE", f"/v1/sandboxes/{b}")

    COMMANDS = [
        "true", "echo hi", "exit 3", "head -c 300000 /dev/zero",
        "for i in 1 2 3; do echo $i > /workspace/f$i; done",
        "mkdir -p /workspace/d/e && echo x > /workspace/d/e/g",
        "rm -rf /workspace/d", "sleep 0.2", "kill -9 $$",
        "sh -c 'sleep 5 &' ; echo bg", "cat /workspace/f1",
        "yes | head -c 100000 >&2", "ln -sf /etc/passwd /workspace/link",
        "dd if=/dev/zero of=/workspace/big bs=1M count=4 2>/dev/null",
        "python3 -c 'x = bytearray(64 << 20)'",
        "for i in $(seq 20); do sleep 1 & done; wait",
        "dd if=/dev/zero of=/tmp/fill bs=1M count=40 2>/dev/null; rm -f /tmp/fill",
        "cat > /workspace/in.txt",
        "curl -s -m 5 http://up.test:UP/x", "curl -s -m 20 -o /dev/null http://up.test:UP/big",
        "curl -s -m 20 http://up.test:UP/slow", "curl -s -m 3 http://evil.test/",
        "for i in 1 2 3 4 5 6; do curl -s -m 10 -o /dev/null http://up.test:UP/big & done; wait",
    ]

    def op_exec(self):
        b = self.box()
        if not b:
            return
        body = {"command": self.rng.choice(self.COMMANDS).replace("UP", str(self.sh.up_port))}
        if self.rng.random() < 0.3:
            body["timeout_seconds"] = self.rng.choice([0.05, 0.5, 5])
        if self.rng.random() < 0.3:
            body["tool_call_id"] = f"c{self.n}-{self.rng.randrange(1000)}"
        if self.rng.random() < 0.25:
            body["stream"] = True
        if self.rng.random() < 0.2:
            body["stdin"] = "x" * self.rng.choice([1, 5000, 300000])
        if self.rng.random() < 0.15:
            raw = json.dumps(body).encode()
            head = (f"POST /v1/sandboxes/{b}/exec HTTP/1.1\r\nHost: x\r\n"
                    f"Content-Type: application/json\r\nContent-Length: {len(raw)}\r\n\r\n").encode()
            if self.rng.random() < 0.5:
                self.cut("exec-cut-body", head, raw[:self.rng.randrange(len(raw))])
            else:
                self.cut("exec-cut-answer", head, raw, read_some=True)
            return
        self.req("exec", "POST", f"/v1/sandboxes/{b}/exec", body)

    def op_process(self):
        b = self.box()
        if not b:
            return
        r = self.rng.random()
        pids = self.sh.pids.get(b) or []
        if r < 0.35 or not pids:
            st, out = self.req("proc-start", "POST", f"/v1/sandboxes/{b}/processes",
                               {"command": self.rng.choice(["sleep 3", "cat", "yes | head -c 2000000",
                                                            "while :; do echo t; sleep 0.1; done"]),
                                "stdin_open": self.rng.random() < 0.5})
            if st in (200, 201) and isinstance(out, dict) and "pid" in out:
                with self.sh.lock:
                    self.sh.pids.setdefault(b, []).append(out["pid"])
            return
        pid = self.rng.choice(pids)
        what = self.rng.choice(["get", "list", "output", "wait", "stdin", "signal", "delete"])
        base = f"/v1/sandboxes/{b}/processes"
        if what == "get":
            self.req("proc-get", "GET", f"{base}/{pid}")
        elif what == "list":
            self.req("proc-list", "GET", base)
        elif what == "output":
            self.req("proc-output", "GET", f"{base}/{pid}/output")
        elif what == "wait":
            self.req("proc-wait", "GET", f"{base}/{pid}/wait?timeout_seconds=0.2")
        elif what == "stdin":
            self.req("proc-stdin", "POST", f"{base}/{pid}/stdin" + self.rng.choice(["", "?eof=1"]),
                     raw=b"x" * self.rng.choice([1, 1000, 100000]))
        elif what == "signal":
            self.req("proc-signal", "POST", f"{base}/{pid}/signal",
                     {"signal": self.rng.choice(["TERM", "KILL", "STOP", "CONT", "HUP"])})
        else:
            self.req("proc-delete", "DELETE", f"{base}/{pid}")

    PATHS = ["/workspace/a.txt", "/workspace/d/e/g", "/workspace", "/workspace/link",
             "/workspace/big", "/tmp/x", "/workspace/../etc/passwd", "/workspace/f1",
             "/proc/self/environ", "/workspace/new/deep/file"]

    def op_files(self):
        b = self.box()
        if not b:
            return
        path = self.rng.choice(self.PATHS)
        what = self.rng.choice(["put", "get", "list", "rlist", "mkdir", "rename", "delete",
                                "archive", "put-cut"])
        base = f"/v1/sandboxes/{b}"
        if what == "put":
            self.req("file-put", "PUT", f"{base}/files?path={path}&parents=1",
                     raw=os.urandom(self.rng.choice([0, 10, 70000, 2000000])))
        elif what == "put-cut":
            head = (f"PUT {base}/files?path={path} HTTP/1.1\r\nHost: x\r\n"
                    f"Content-Length: 1000000\r\n\r\n").encode()
            self.cut("file-put-cut", head, b"y" * self.rng.randrange(100000))
        elif what == "get":
            self.req("file-get", "GET", f"{base}/files?path={path}")
        elif what == "list":
            self.req("file-list", "GET", f"{base}/files?path={path}&list=1")
        elif what == "rlist":
            self.req("file-list", "GET", f"{base}/files?path=/workspace&list=1&recursive=1")
        elif what == "mkdir":
            self.req("file-mkdir", "POST", f"{base}/files/mkdir", {"path": path})
        elif what == "rename":
            self.req("file-rename", "POST", f"{base}/files/rename",
                     {"from": path, "to": self.rng.choice(self.PATHS)})
        elif what == "delete":
            self.req("file-delete", "DELETE", f"{base}/files?path={path}")
        else:
            self.req("archive", "GET", f"{base}/archive?path=/workspace")

    def op_state(self):
        b = self.box()
        if not b:
            return
        what = self.rng.choice(["pause", "resume", "keepalive", "get", "halt", "diff",
                                "patch", "export", "snapshot"])
        base = f"/v1/sandboxes/{b}"
        if what == "pause":
            # a person's pause holds a running call until resume: held
            # briefly here, as no client of this walk would wait longer
            st, _ = self.req("pause", "POST", f"{base}/pause")
            time.sleep(self.rng.choice([0, 0.01, 0.2]))
            self.req("resume", "POST", f"{base}/resume")
        elif what in ("resume", "keepalive"):
            self.req(what, "POST", f"{base}/{what}")
        elif what == "get":
            self.req("get", "GET", base)
        elif what == "halt":
            if self.rng.random() < 0.2:
                self.req("halt", "POST", f"{base}/halt", {"reason": "chaos"})
        elif what == "diff":
            self.req("diff", "GET", f"{base}/diff")
        elif what == "patch":
            if self.rng.random() < 0.3:
                self.cut("diff-cut", f"GET {base}/diff?format=patch HTTP/1.1\r\nHost: x\r\n\r\n"
                         .encode(), b"", read_some=self.rng.random() < 0.5)
                return
            self.req("diff", "GET", f"{base}/diff?format=patch")
        elif what == "export":
            body = self.export_body()
            if self.rng.random() < 0.3:
                # a build's client gone: its worker is killed, nothing kept
                # (an apply cut short keeps what it wrote: host edits next time)
                raw = json.dumps(body).encode()
                head = (f"POST {base}/export HTTP/1.1\r\nHost: x\r\n"
                        f"Content-Length: {len(raw)}\r\n\r\n").encode()
                self.cut("export-cut", head, raw, read_some=self.rng.random() < 0.5)
                return
            if "patch" in body and self.rng.random() < 0.5:
                self.export_stream(base, body)
                return
            self.req("export-" + next(iter(body)), "POST", f"{base}/export", body)
        else:
            if self.rng.random() < 0.3:
                self.cut("snapshot-cut", f"POST {base}/snapshot HTTP/1.1\r\nHost: x\r\n"
                         "Content-Length: 0\r\n\r\n".encode(), b"")
                return
            st, out = self.req("snapshot", "POST", f"{base}/snapshot")
            if st in (200, 201) and isinstance(out, dict) and "id" in out:
                with self.sh.lock:
                    self.sh.snaps.append(out["id"])

    STREAM = "application/vnd.corral.export-patch"

    def export_stream(self, base, body):
        """The patch as it is (docs/API.md): a 200 is the report's line,
        JSON with no "patch" in it, then the patch; an error is JSON."""
        st, out = self.req("export-stream", "POST", f"{base}/export", body,
                           headers={"Accept": self.STREAM})
        if st != 200:
            return
        line, nl, patch = out.partition(b"\n") if isinstance(out, bytes) else (b"", b"", b"")
        try:
            rep = json.loads(line) if nl else None
        except ValueError:
            rep = None
        if not isinstance(rep, dict) or "patch" in rep or rep.get("mode") != "patch":
            self.sh.fail(f"client {self.n}: POST {base}/export as a stream: not a "
                         f"report's line, then the patch: {out[:300]!r}")

    def export_body(self):
        """patch, or onto the host: `to` a new directory (now and then
        one that exists, or a relative path), `apply` onto the workspace
        the sandbox was made on.  Over TCP those two are a 403."""
        r = self.rng.random()
        if r < 0.4:
            body = {"patch": True}
        elif r < 0.7:
            with self.sh.lock:
                self.sh.nexport += 1
                n = self.sh.nexport
            to = os.path.join(self.sh.exports, f"e{self.n}-{n}")
            body = {"to": self.rng.choice([to] * 8 + [self.sh.exports, "rel/x", to + "/../.."])}
        else:
            body = {"apply": True}
        if self.rng.random() < 0.2:
            body["allow_risky"] = self.rng.choice([["*"], [".git/hooks/*"], [], ["**"]])
        if self.rng.random() < 0.1:
            body["path"] = self.rng.choice(["src", "/workspace/d", "../x", "f1"])
        return body

    def op_misc(self):
        what = self.rng.choice(["health", "metrics", "list", "events", "events-cut",
                                "snaps", "snap-delete", "garbage", "bad-json", "lease",
                                "lease-share"])
        if what == "health":
            self.req("health", "GET", "/v1/health")
        elif what == "metrics":
            self.req("metrics", "GET", "/v1/metrics")
        elif what == "list":
            self.req("list", "GET", "/v1/sandboxes?label=chaos")
        elif what == "events":
            self.req("events", "GET", "/v1/events")
        elif what == "events-cut":
            self.cut("events-follow-cut", b"GET /v1/events?follow=1 HTTP/1.1\r\nHost: x\r\n\r\n",
                     b"", read_some=True)
        elif what == "snaps":
            self.req("snapshots", "GET", "/v1/snapshots")
        elif what == "snap-delete":
            s = self.sh.pick(self.rng, self.sh.snaps)
            if s and self.rng.random() < 0.5:
                with self.sh.lock:
                    if s in self.sh.snaps:
                        self.sh.snaps.remove(s)
                self.req("snapshot-delete", "DELETE", f"/v1/snapshots/{s}")
        elif what == "garbage":
            b = self.box() or "nope"
            self.req("garbage", self.rng.choice(["POST", "PUT", "PATCH", "GET"]),
                     self.rng.choice([f"/v1/sandboxes/{b}/exec/x", "/v1/%00", "/v1/sandboxes/..%2f",
                                      f"/v1/sandboxes/{b}/files?path=", "/" + "a" * 5000]),
                     raw=os.urandom(self.rng.randrange(64)))
        elif what == "bad-json":
            b = self.box() or "nope"
            self.req("bad-json", "POST", f"/v1/sandboxes/{b}/exec",
                     raw=self.rng.choice([b"{", b"[]", b'{"command": 7}', b'{"argv": []}',
                                          b'{"command": "true", "env": {"A": 1}}',
                                          b"[" * 5000, b'{"argv": ["' + b"a" * 300000 + b'"]}']))
        elif what == "lease-share":
            self.lease_share()
        else:
            lease = self.open_lease()
            if lease:
                time.sleep(self.rng.choice([0, 0.1]))
                lease[0].close()

    def lease_share(self):
        """Creates bound to one lease past its share: no more than
        --max-sandboxes-per-peer of them made, the rest a 429 (or the
        daemon's other bounds' 503/429); then the lease's end takes them."""
        with self.sh.lock:
            if len(self.sh.boxes) >= MAX_BOXES or self.sh.per_peer > 2:
                return
        lease = self.open_lease()
        if not lease:
            return
        made = []
        for _ in range(self.sh.per_peer + 1):
            st, out = self.req("create-leased", "POST", "/v1/sandboxes",
                               {"lease": lease[1], "labels": {"chaos": str(self.n)}})
            if st in (200, 201) and isinstance(out, dict) and "id" in out:
                made.append(out["id"])
            elif st == 429 and not (isinstance(out, dict) and "per-peer" in str(out)):
                self.sh.fail(f"client {self.n}: a leased create past the share -> 429 "
                             f"that does not name the bound: {str(out)[:300]}")
        if len(made) > self.sh.per_peer:
            self.sh.fail(f"client {self.n}: {len(made)} sandboxes bound to one lease, "
                         f"--max-sandboxes-per-peer {self.sh.per_peer}")
        with self.sh.lock:
            self.sh.boxes.extend(made)
        time.sleep(self.rng.choice([0, 0.05, 0.5]))
        lease[0].close()
        self.sh.note("lease-closed", "cut")

    def op_tty(self):
        """A terminal: exec with "tty", plain or upgraded to frames, the
        session fed, resized, sent a bad frame or cut off."""
        b = self.box()
        if not b:
            return
        body = {"command": self.rng.choice(["cat", "sh", "sleep 1", "stty size; read x"]),
                "tty": True, "rows": 24, "cols": 80, "timeout_seconds": 5}
        # abandoned: a client that goes quiet, or stops reading a command
        # that writes on, with a call's timeout past --tty-idle-timeout
        abandon = self.rng.random() < 0.25
        if abandon:
            body["command"] = self.rng.choice(["cat", "sleep 30", "yes", "sh"])
            body["timeout_seconds"] = 60
        if not abandon and self.rng.random() < 0.3:
            body["stdin"] = "echo hi\nexit\n"
            self.req("tty-plain", "POST", f"/v1/sandboxes/{b}/exec", body)
            return
        raw = json.dumps(body).encode()
        head = (f"POST /v1/sandboxes/{b}/exec HTTP/1.1\r\nHost: x\r\n"
                "Connection: Upgrade\r\nUpgrade: corral-tty\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(raw)}\r\n\r\n").encode()
        s = None
        try:
            s, auth = self.raw()
            line = head.index(b"\r\n") + 2
            s.sendall(head[:line] + auth + head[line:] + raw)
            got = s.recv(4096)
            if not got.startswith(b"HTTP/1.1 101"):
                self.sh.note("tty", got[9:12].decode(errors="replace") or "closed")
                return
            if abandon:
                self.abandon(s)
                s = None
                return
            for _ in range(self.rng.randrange(6)):
                k = self.rng.choice(["i", "i", "w", "bad", "long"])
                if k == "i":
                    p = self.rng.choice([b"ls\n", b"\x03", b"\x1a", b"exit\n", os.urandom(100)])
                    s.sendall(b"i" + len(p).to_bytes(4, "big") + p)
                elif k == "w":
                    s.sendall(b"w" + (4).to_bytes(4, "big") + self.rng.choice(
                        [b"\x00\x10\x00\x20", b"\x00\x00\x00\x00", b"\xff\xff\xff\xff"]))
                elif k == "bad":
                    s.sendall(b"q" + (1).to_bytes(4, "big") + b"q")
                else:
                    s.sendall(b"i" + (70000).to_bytes(4, "big") + b"z" * 100)
                s.settimeout(0.2)
                try:
                    s.recv(65536)
                except socket.timeout:
                    pass
            self.sh.note("tty", "session")
        except OSError:
            self.sh.note("tty", "conn")
        finally:
            if s:
                s.close()

    def abandon(self, s):
        """A terminal session's connection kept open, neither fed nor
        read, until the client has three more (or its walk ends): the
        daemon's --tty-idle-timeout ends it, a delete, or the close."""
        self.abandoned.append(s)
        self.sh.note("tty", "abandoned")
        while len(self.abandoned) > 3:
            self.abandoned.pop(0).close()

    def hello(self):
        """A real ClientHello's bytes, and the half-done TLS object that made it."""
        inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
        obj = self.sh.tls.wrap_bio(inc, out, server_hostname="127.0.0.1")
        try:
            obj.do_handshake()
        except ssl.SSLWantReadError:
            pass
        return obj, inc, out

    def handshake(self, s):
        """The handshake over s, by hand (memory BIOs): the session's
        object, whose records the caller then sends as it likes."""
        obj, inc, out = self.hello()
        s.sendall(out.read())
        for _ in range(50):
            try:
                obj.do_handshake()
                break
            except ssl.SSLWantReadError:
                pending = out.read()
                if pending:
                    s.sendall(pending)
                got = s.recv(65536)
                if not got:
                    raise ConnectionError("closed in the handshake")
                inc.write(got)
        pending = out.read()
        if pending:
            s.sendall(pending)
        return obj, inc, out

    def op_tls(self):
        """The TLS listener's edges, each on a connection of its own:
        handshakes stalled or cut, records cut short or forged,
        close_notify mid-request, renegotiation asked for, the
        certificate reloaded (SIGHUP) under all of it."""
        if not (self.tcp and self.sh.tls):
            return
        what = self.rng.choice(["stall", "stall", "hello-cut", "record-cut", "record-cut",
                                "forged", "notify-mid", "notify-after", "plain", "reneg",
                                "sighup"])
        if what == "reneg":
            return self.renegotiate()
        if what == "sighup":
            return self.reload()
        b = self.box() or "nope"
        req = (f"POST /v1/sandboxes/{b}/exec HTTP/1.1\r\nHost: x\r\n"
               f"Authorization: Bearer {self.tcp[1]}\r\nContent-Type: application/json\r\n")
        body = json.dumps({"command": self.rng.choice(["echo hi", "head -c 300000 /dev/zero",
                                                       "sleep 0.5"]),
                           "stream": self.rng.random() < 0.5}).encode()
        req = req.encode() + f"Content-Length: {len(body)}\r\n\r\n".encode() + body
        s = None
        try:
            s = socket.create_connection(("127.0.0.1", self.tcp[0]), timeout=10)
            if what == "stall":
                # a ClientHello's first bytes, then nothing for a while
                _, _, out = self.hello()
                h = out.read()
                s.sendall(h[:self.rng.choice([1, 5, 6, len(h) // 2, len(h) - 1])])
                time.sleep(self.rng.choice([0, 0.1, 1]))
            elif what == "hello-cut":
                # the whole hello, the server's first flight half read
                _, _, out = self.hello()
                s.sendall(out.read())
                s.recv(self.rng.choice([1, 100]))
            elif what == "plain":
                # HTTP in clear on the TLS port
                s.sendall(req)
                s.settimeout(2)
                s.recv(4096)
            else:
                obj, inc, out = self.handshake(s)
                if what == "record-cut":
                    # a request's records, cut short mid-record
                    obj.write(req)
                    rec = out.read()
                    s.sendall(rec[:self.rng.randrange(1, len(rec))])
                elif what == "forged":
                    # an application-data record the key did not seal
                    n = self.rng.choice([1, 40, 16401, 18000])
                    s.sendall(b"\x17\x03\x03" + min(n, 65535).to_bytes(2, "big")
                              + os.urandom(min(n, 20000)))
                    s.settimeout(2)
                    s.recv(4096)
                elif what == "notify-mid":
                    # half a request, then close_notify
                    obj.write(req[:self.rng.randrange(1, len(req))])
                    s.sendall(out.read())
                    try:
                        obj.unwrap()
                    except ssl.SSLError:
                        pass
                    s.sendall(out.read())
                    s.settimeout(2)
                    s.recv(4096)
                else:
                    # a whole request, close_notify at once, the answer read a bit
                    obj.write(req)
                    try:
                        obj.unwrap()
                    except ssl.SSLError:
                        pass
                    s.sendall(out.read())
                    s.settimeout(2)
                    s.recv(self.rng.choice([1, 4096]))
            self.sh.note("tls-" + what, "cut")
        except (OSError, ssl.SSLError, ValueError):
            self.sh.note("tls-" + what, "conn")
        finally:
            if s:
                s.close()

    def renegotiate(self):
        """TLS 1.2, a request, then "R": openssl s_client asks for a
        renegotiation (the daemon allows none) mid-connection."""
        if not self.rng.random() < 0.2:
            return
        req = (f"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\nR\nGET /v1/health HTTP/1.1\r\n"
               f"Host: x\r\n\r\n")
        try:
            subprocess.run(["openssl", "s_client", "-quiet", "-tls1_2", "-connect",
                            f"127.0.0.1:{self.tcp[0]}", "-CAfile", self.sh.certs[4]],
                           input=req.encode(), capture_output=True, timeout=10)
            self.sh.note("tls-reneg", "ran")
        except (OSError, subprocess.SubprocessError):
            self.sh.note("tls-reneg", "conn")

    def reload(self):
        """The certificate swapped for the other one (both trusted), and
        SIGHUP: new connections take it, open ones keep the old."""
        if not self.rng.random() < 0.3:
            return
        cert, key, ocert, okey, _ = self.sh.certs
        with self.sh.lock:
            if self.rng.random() < 0.5:
                for a, b in ((cert, ocert), (key, okey)):
                    tmp = a + ".swap"
                    shutil.copy(b, tmp)
                    shutil.copy(a, b)
                    os.rename(tmp, a)
            os.kill(self.sh.dpid, signal.SIGHUP)
        self.sh.note("tls-sighup", "sent")

    def run(self, deadline):
        ops = [(self.op_exec, 30), (self.op_files, 20), (self.op_process, 12), (self.op_tty, 5),
               (self.op_state, 12), (self.op_misc, 10), (self.op_create, 8), (self.op_delete, 4),
               (self.op_tls, 6 if self.tcp and self.sh.tls else 0)]
        fns, weights = zip(*ops)
        for _ in range(MAX_OPS):
            if time.monotonic() > deadline:
                break
            self.rng.choices(fns, weights)[0]()
        for s in self.abandoned:
            s.close()
        self.c.close()


class Upstream(http.server.ThreadingHTTPServer):
    """The "external" host the sandboxes reach through the proxy: a thread
    of this script on loopback, named up.test in their policy."""
    daemon_threads = True


class UpstreamHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        n = {"/big": 4 << 20, "/slow": 100}.get(self.path, 10)
        self.send_response(200)
        self.send_header("Content-Length", str(n))
        self.end_headers()
        try:
            if self.path == "/slow":
                for _ in range(n):
                    self.wfile.write(b"s")
                    self.wfile.flush()
                    time.sleep(0.05)
            else:
                self.wfile.write(b"u" * n)
        except OSError:
            pass

    do_POST = do_GET

    def log_message(self, *args):
        pass


def left_of(dpid):
    """The daemon's cgroups still there, and the processes in them."""
    groups = [d for d in glob.glob(f"/sys/fs/cgroup/*/corral*/corral-{dpid}-*")
              + glob.glob(f"/sys/fs/cgroup/corral*/corral-{dpid}-*") if os.path.isdir(d)]
    procs = []
    for d in glob.glob("/proc/[0-9]*/cgroup"):
        try:
            with open(d) as f:
                if f"/corral-{dpid}-" in f.read():
                    procs.append(int(d.split("/")[2]))
        except OSError:
            pass
    return groups, procs


def make_cert(tmp, name):
    """A self-signed certificate for 127.0.0.1 (tests/serve.sh's tls_files)."""
    cert, key = os.path.join(tmp, name + ".pem"), os.path.join(tmp, name + ".key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                    "-keyout", key, "-out", cert], check=True, capture_output=True, timeout=60)
    os.chmod(key, 0o600)
    return cert, key


def prepare(tmp, state, drng, sh):
    """The daemon's flags the seed draws that need files made first:
    -> the arguments to add."""
    opts = []
    if drng.random() < 0.5:
        cert, key = make_cert(tmp, "cert")
        ocert, okey = make_cert(tmp, "other")
        both = os.path.join(tmp, "both.pem")
        with open(both, "w") as f:
            for c in (cert, ocert):
                with open(c) as g:
                    f.write(g.read())
        sh.certs = (cert, key, ocert, okey, both)
        sh.tls = ssl.create_default_context(cafile=both)
        # every cut request is a handshake: the default 200 a second a
        # peer refuses some (a refusal is fine, a drawn low rate tests it)
        opts += ["--tls-cert", cert, "--tls-key", key,
                 "--tls-handshake-rate", str(drng.choice([1000, 1000, 5]))]
    if drng.random() < 0.4:
        img = os.path.join(tmp, "img")
        subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "image_fixtures.py"),
                        "busybox-oci", img], check=True, capture_output=True, timeout=60)
        subprocess.run([CORRAL, "image", "import", "--state-dir", state, img], check=True,
                       capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
        shutil.rmtree(img)
        sh.image = "corral-test/busybox:1"
    if os.geteuid() == 0 and drng.random() < 0.5:
        # the workspace's owner in the range: its sandboxes run as 1000
        for r, ds, fs in os.walk(sh.ws):
            for n in [r] + [os.path.join(r, x) for x in ds + fs]:
                os.lchown(n, 1000, 1000)
        opts += ["--uid-range", "1000-1000"]
    return opts


def main():
    passed = failed = 0
    started = time.monotonic()      # whatever the seed makes first counts in SECONDS
    tmp = tempfile.mkdtemp(prefix="corral-chaos.")
    os.chmod(tmp, 0o755)
    sock, state, log = (os.path.join(tmp, n) for n in ("sock", "state", "log"))
    print(f"chaos: seed {SEED}, {CLIENTS} clients (2 over TCP), {SECONDS:.0f} s "
          f"(replay: tests/chaos_serve.py CORRAL {SECONDS:.0f} {SEED})", flush=True)
    wrap = os.environ.get("CHAOS_WRAP", "").split()    # e.g. "gdb -batch -ex run -ex bt --args"
    port = free_port()
    token = os.urandom(32).hex()
    tokfile = os.path.join(tmp, "token")
    with open(os.open(tokfile, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
        f.write(token)
    # the daemon's own bounds, from the seed too: a pool to take from,
    # creates refused at a few sandboxes, snapshots over their budget
    drng = random.Random(SEED)
    opts = ["--pool", str(drng.choice([0, 0, 2])),
            "--max-sandboxes", str(drng.choice([1000, 1000, 4])),
            "--snapshot-budget", drng.choice(["1G", "1G", "64K"])]
    sh = Shared()
    sh.ws = os.path.join(tmp, "ws")
    os.makedirs(os.path.join(sh.ws, "src"))
    for i in range(20):
        with open(os.path.join(sh.ws, "src", f"m{i}.py"), "w") as f:
            f.write(f"x = {i}\n" * 50)
    sh.exports = os.path.join(tmp, "exports")
    os.mkdir(sh.exports)
    try:
        opts += prepare(tmp, state, drng, sh)
        # drawn after prepare's, for an older seed's draws to stay theirs:
        # terminal sessions a quiet client leaves end in a second; a
        # lease (or a TCP peer) holds two sandboxes, and a third is a 429
        sh.per_peer = drng.choice([100, 100, 2])
        opts += ["--tty-idle-timeout", str(drng.choice([900, 900, 1])),
                 "--max-sandboxes-per-peer", str(sh.per_peer)]
    except (OSError, subprocess.SubprocessError) as e:
        shutil.rmtree(tmp, ignore_errors=True)
        print(f"chaos: cannot prepare the daemon's files: {e} {getattr(e, 'stderr', '')}")
        print("chaos: 0 passed, 1 failed")
        return 1
    print(f"  corral serve {' '.join(o.replace(tmp, 'TMP') for o in opts)}", flush=True)
    d = subprocess.Popen(wrap + [CORRAL, "serve", "--socket", sock, "--state-dir", state,
                                 "--listen", f"127.0.0.1:{port}", "--token-file", tokfile]
                         + opts,
                         stdout=open(log + ".out", "w") if wrap else subprocess.DEVNULL,
                         stderr=open(log, "w"))
    sh.sock, sh.dpid, sh.port = sock, d.pid, port
    up = Upstream(("127.0.0.1", 0), UpstreamHandler)
    threading.Thread(target=up.serve_forever, daemon=True).start()
    sh.up_port = up.server_address[1]
    try:
        for _ in range(200):
            if os.path.exists(sock) or d.poll() is not None:
                break
            time.sleep(0.05)
        # a request over TLS costs the daemon more (ASan, seed 2, 30 s:
        # 12.0 s of CPU, 9.2 s in clear): a TLS walk is shorter, for the
        # check's CPU to stay what it was
        deadline = started + SECONDS * (0.75 if sh.tls else 1)
        # clients 1 and 3 over TCP, as a remote party would be
        ths = [threading.Thread(target=Client(sock, sh, random.Random(SEED + i), i,
                                              (port, token) if i % 2 else None).run,
                                args=(deadline,)) for i in range(CLIENTS)]
        for t in ths:
            t.start()
        for t in ths:
            t.join(SECONDS + 4 * REQ_TIMEOUT)
        alive = d.poll() is None
        if os.environ.get("CHAOS_VERBOSE"):
            for op, st in sorted(sh.by_op.items()):
                print(f"  {op:18s} " + ", ".join(f"{k} x{v}" for k, v in sorted(st.items(), key=str)))
        print(f"  {sum(sh.ops.values())} requests; statuses: "
              + ", ".join(f"{k} x{v}" for k, v in sorted(sh.status.items(), key=str)))
        def check(ok, what):
            nonlocal passed, failed
            print(("ok   " if ok else "FAIL ") + what, flush=True)
            passed, failed = passed + ok, failed + (not ok)
        check(not any(t.is_alive() for t in ths), "every client finished")
        check(alive, "the daemon outlived the chaos" + ("" if alive else f" (status {d.returncode})"))
        if not alive:
            with open(log + (".out" if wrap else ""), errors="replace") as f:
                for line in f.read().splitlines()[-40:]:
                    print("     " + line)
        for b in sh.bad:
            print("     " + b)
        check(not sh.bad, f"no 500 and no request left unanswered ({len(sh.bad)} bad)")
        if alive:
            api = Client(sock, Shared(), random.Random(0), -1)
            st, out = api.req("list", "GET", "/v1/sandboxes")
            for b in (out.get("sandboxes", out) if isinstance(out, dict) else out or []):
                bid = b.get("id") if isinstance(b, dict) else b
                api.req("delete", "DELETE", f"/v1/sandboxes/{bid}")
            st, out = api.req("list", "GET", "/v1/sandboxes")
            left = out.get("sandboxes", out) if isinstance(out, dict) else out
            check(st == 200 and not left, f"every sandbox deleted (left: {left!r:.200})")
            api.c.close()
            dpid = d.pid
            d.send_signal(signal.SIGTERM)
            try:
                rc = d.wait(60)
            except subprocess.TimeoutExpired:
                d.kill()
                rc = d.wait()
            check(rc == 0, f"the daemon stopped on SIGTERM with status 0 (got {rc})")
            for _ in range(100):      # a pid namespace's last processes go after its init
                groups, procs = left_of(dpid)
                if not groups and not procs:
                    break
                time.sleep(0.1)
            check(not groups and not procs,
                  f"nothing of the daemon's left: groups {groups[:3]}, processes {procs[:5]}")
            files = [os.path.join(r, f) for r, _, fs in os.walk(os.path.join(state, "sandboxes"))
                     for f in fs]
            check(not files, f"no sandbox state left: {files[:5]}")
        with open(log, errors="replace") as f:
            text = f.read()
        report = [l for l in text.splitlines()
                  if "Sanitizer" in l or "runtime error" in l or "LeakSanitizer" in l]
        for l in report[:20]:
            print("     " + l)
        check(not report, "no sanitizer report in the daemon's stderr")
    finally:
        if d.poll() is None:
            d.kill()
            d.wait()
        up.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"chaos: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
