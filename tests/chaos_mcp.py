#!/usr/bin/python3
"""chaos_mcp.py - `corral mcp` fed tool calls at random, as a model that
is wrong, or hostile, would write them: each tool's arguments drawn from
its own inputSchema (tools/list), mostly of the right types, sometimes of
the wrong ones, too large, with names it does not know, for sandboxes that
are gone; between them JSON-RPC the server must refuse.  Every choice comes
from one printed seed.

    tests/chaos_mcp.py CORRAL [CALLS [SEED]]     (check: 300 calls, 120 s at most;
                                                CHAOS_MAX_SECONDS=N: N s at most)

Half the seeds walk a shared daemon instead (`corral serve` of this
script's, over its unix socket or, drawn from the seed, TCP with TLS):
two or three sessions at once, each with calls in flight together, some
cancelled (notifications/cancelled) as they run or before they start,
sessions ended mid-call by stdin's end, SIGTERM or SIGKILL and replaced.
The daemon's leases must take a killed session's sandboxes.

Fails on: a request left without exactly one answer (result or error)
within TIMEOUT, an answer that is not JSON-RPC, the server dying, or not
ending with status 0 on its stdin's end, a sanitizer's report on its
stderr, and its private daemon or a sandbox of it left running.
Shared, also on: an answer to a request that has one already or was never
sent, a session that does not end with status 0 (SIGKILL aside), the
daemon's sandboxes left once every session ended, the daemon dying or not
stopping with status 0 on SIGTERM.
Ends with a line "chaos-mcp: N passed, N failed".
"""
import glob
import json
import os
import random
import select
import signal
import socket
import shutil
import subprocess
import sys
import tempfile
import time

from freeport import free_port

CORRAL = os.path.abspath(sys.argv[1])
CALLS = int(sys.argv[2]) if len(sys.argv) > 2 else 300
SEED = int(sys.argv[3]) if len(sys.argv) > 3 else random.SystemRandom().randrange(1 << 30)
TIMEOUT = 90
MAX_SECONDS = float(os.environ.get("CHAOS_MAX_SECONDS", "120"))  # whatever CALLS says (a starved check)
MAX_BOXES = 4
NUDGE = 20          # shared walk: a call owed this long, the session's sandboxes resumed
PIDS = []           # background processes' pids, from exec's answers
# a model mostly runs commands and moves files; it halts and destroys rarely
WEIGHTS = {"exec": 8, "file_read": 2, "file_write": 2, "file_list": 2, "process_output": 2,
           "process_stdin": 2, "sandbox_halt": 0.3, "sandbox_destroy": 0.5,
           "sandbox_pause": 0.5}


class Server:
    def __init__(self, tmp, args=("--private",), name="stderr"):
        env = dict(os.environ, TMPDIR=tmp)
        self.err = open(os.path.join(tmp, name), "w+")
        self.p = subprocess.Popen([CORRAL, "mcp"] + list(args), stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=self.err, env=env)
        self.buf = b""
        self.next_id = 0

    def send_raw(self, data):
        self.last = data
        self.p.stdin.write(data + b"\n")
        self.p.stdin.flush()

    def recv(self):
        deadline = time.monotonic() + TIMEOUT
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no answer within {TIMEOUT} s to {self.last[:300]!r}")
            r, _, _ = select.select([self.p.stdout], [], [], left)
            if r:
                chunk = os.read(self.p.stdout.fileno(), 1 << 20)
                if not chunk:
                    raise AssertionError("its stdout closed")
                self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def request(self, method, params=None):
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            msg["params"] = params
        self.send_raw(json.dumps(msg).encode())
        return self.answer(self.next_id)

    def answer(self, want):
        """The answer to id want; progress notifications skipped."""
        for _ in range(10000):
            r = self.recv()
            if "id" not in r and r.get("method", "").startswith("notifications/"):
                continue
            if r.get("id") != want or ("result" in r) == ("error" in r):
                raise AssertionError(f"for id {want!r} got {json.dumps(r)[:300]}")
            return r
        raise AssertionError("only notifications")


def wrong(rng):
    return rng.choice([None, 7, -1, 1e300, True, "", "x" * rng.choice([1, 5000, 200000]),
                       [], [1, "a"], {}, {"k": "v"}, "../../etc/passwd", "\u0000"])


PATHS = ["/workspace/a.txt", "/workspace", "/workspace/d/e", "/tmp/x", "/workspace/../etc",
         "/proc/self/environ", "/workspace/new/f", "relative", "/"]
COMMANDS = ["echo hi", "sleep 0.3", "true", "cat /etc/passwd; exit 3", "yes | head -c 100000",
            "mkdir -p /workspace/d/e && echo x > /workspace/d/e/f", "cat", "sleep 5",
            "for i in 1 2 3; do echo $i; sleep 0.1; done", "kill -9 $$"]
# a create's workspace: the host's socket directories, named or through a
# link in the operator's workspace (WS, set by the walk), are never shown
SOCKET_DIRS = ["/run", "/tmp", "/var/run", "/run/user", "WS/to-run", "WS/to-tmp", "WS/.."]
WORKSPACES = SOCKET_DIRS + ["WS", "WS/src", "WS/src/../src", "relative"]
STRINGS = {"workspace": WORKSPACES, "path": PATHS, "from": PATHS, "to": PATHS, "cwd": PATHS, "command": COMMANDS,
           "signal": ["TERM", "KILL", "INT", "HUP", "STOP", "CONT", "SIGKILL", "9", "BOGUS"],
           "content": ["hello\n", "", "x" * 70000, "aGVsbG8=", "not base64!"],
           "stdin": ["a\n", "", "y" * 10000]}


def value(rng, schema, boxes, depth=0, name=""):
    """A value for schema (property name): of its type most of the time."""
    if rng.random() < 0.04 or depth > 3:
        return wrong(rng)
    t = schema.get("type")
    if isinstance(t, list):
        t = rng.choice(t)
    if "enum" in schema:
        return rng.choice(schema["enum"])
    if t == "string":
        if name in STRINGS:
            return rng.choice(STRINGS[name])
        return rng.choice(["echo hi", "base64", "text", "x" * 300,
                           rng.choice(boxes) if boxes else "sb-nope"])
    if name in ("timeout_seconds", "ttl_seconds", "wait_seconds"):
        # a wait the server may honour is kept well under TIMEOUT
        return rng.choice([0, 0.5, 1, 3, -1, 2 ** 31])
    if t == "integer":
        return rng.choice([0, 1, 3, 100, 2 ** 31, -5])
    if t == "number":
        return rng.choice([0, 0.1, 1.5, 30, -1])
    if t == "boolean":
        return rng.random() < 0.5
    if t == "array":
        if name == "argv":
            return rng.choice([["/bin/echo", "x"], ["true"], ["/nonexistent"], ["sh", "-c", "exit 7"]])
        item = schema.get("items", {"type": "string"})
        return [value(rng, item, boxes, depth + 1) for _ in range(rng.randrange(4))]
    if t == "object" or "properties" in schema:
        return args_for(rng, schema, boxes, depth + 1)
    return wrong(rng)


def args_for(rng, schema, boxes, depth=0):
    props = schema.get("properties", {})
    out = {}
    for name in schema.get("required", []):
        if rng.random() < 0.98:
            out[name] = value(rng, props.get(name, {}), boxes, depth, name)
    for name, sub in props.items():
        if name not in out and rng.random() < 0.3:
            out[name] = value(rng, sub, boxes, depth, name)
    if "command" in out and "argv" in out and rng.random() < 0.9:
        del out[rng.choice(["command", "argv"])]
    if "command" in props and "command" not in out and "argv" not in out and rng.random() < 0.9:
        out["command"] = rng.choice(COMMANDS)
    if "sandbox_id" in props and boxes and rng.random() < 0.85:
        out["sandbox_id"] = rng.choice(boxes)
    if "pid" in props and PIDS and rng.random() < 0.8:
        out["pid"] = rng.choice(PIDS)
    if rng.random() < 0.05:
        out["no_such_argument"] = 1
    return out


GARBAGE = [b"{not json", b"[]", b"[{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"ping\"}]",
           b"{\"jsonrpc\": \"2.0\", \"id\": {}, \"method\": \"ping\"}",
           b"{\"jsonrpc\": \"1.0\", \"id\": 5, \"method\": \"ping\"}",
           b"{\"jsonrpc\": \"2.0\", \"id\": 6, \"method\": 7}",
           b"{\"jsonrpc\": \"2.0\", \"id\": 8, \"method\": \"tools/call\", \"params\": []}",
           b"\"" + b"a" * 100000 + b"\"", b"[" * 3000 + b"]" * 3000,
           # JSON's syntax, not its text: a lone surrogate
           b"{\"jsonrpc\": \"2.0\", \"id\": 9, \"method\": \"ping\", \"params\": {\"a\": \"\\ud800\"}}"]


class Session:
    """A `corral mcp` on the shared daemon with calls in flight: every
    answer matched to its request, at most one each."""

    def __init__(self, tmp, args, n, server):
        self.s = Server(tmp, args, f"session{n}.err")
        server.append(self.s)
        self.n = n
        self.inflight = {}      # id -> [tool, sent at, cancelled]
        self.answered = set()
        self.boxes = []
        self.ended = False
        self.garbage = 0        # garbage lines sent, answers owed

    def send(self, msg):
        self.s.send_raw(json.dumps(msg).encode())

    def call(self, name, args):
        self.s.next_id += 1
        i = f"call-{self.s.next_id}"     # no garbage line's id
        self.send({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                   "params": {"name": name, "arguments": args}})
        self.inflight[i] = [name, time.monotonic(), False, args]
        return i

    def cancel(self, i):
        self.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                   "params": {"requestId": i, "reason": "chaos"}})
        if i in self.inflight:
            self.inflight[i][2] = True

    def take(self, r, counts):
        """One message read: an answer to a call in flight, or a notification."""
        if "id" not in r and str(r.get("method", "")).startswith("notifications/"):
            return
        i = r.get("id")
        if not (isinstance(i, str) and i.startswith("call-")) and self.garbage > 0:
            self.garbage -= 1           # a garbage line's answer
            counts["garbage"] = counts.get("garbage", 0) + 1
            return
        if i in self.answered or i not in self.inflight or ("result" in r) == ("error" in r):
            raise AssertionError(f"session {self.n}: an answer to no call in flight "
                                 f"(or a second): {json.dumps(r)[:300]}")
        name, _, cancelled, args = self.inflight.pop(i)
        self.answered.add(i)
        res = r.get("result", {})
        ok = "result" in r and not res.get("isError")
        key = f"{name}:{'ok' if ok else 'error'}{' (cancelled)' if cancelled else ''}"
        counts[key] = counts.get(key, 0) + 1
        sc = res.get("structuredContent") or {}
        if name == "sandbox_create" and ok and sc.get("id"):
            self.boxes.append(sc["id"])
        if name == "sandbox_destroy" and ok:
            self.boxes = [b for b in self.boxes if b != args.get("sandbox_id")]

    def pump(self, counts, wait):
        """What the server has written; at most wait seconds for more."""
        deadline = time.monotonic() + wait
        while True:
            while b"\n" in self.s.buf:
                line, self.s.buf = self.s.buf.split(b"\n", 1)
                self.take(json.loads(line), counts)
            left = deadline - time.monotonic()
            r, _, _ = select.select([self.s.p.stdout], [], [], max(left, 0))
            if not r:
                return
            chunk = os.read(self.s.p.stdout.fileno(), 1 << 20)
            if not chunk:
                raise AssertionError(f"session {self.n}: its stdout closed")
            self.s.buf += chunk

    def owed(self):
        """Calls in flight that must be answered (a cancelled one need not)."""
        return [i for i, v in self.inflight.items() if not v[2]]

    def settle(self, counts, most):
        """Until at most `most` calls are owed; one owed past TIMEOUT fails.
        A call that waits long may be one a pause holds (a running exec
        is held until sandbox_resume, by design, and a walk's resume can
        come before its pause): the session resumes its sandboxes, as a
        person would, every NUDGE seconds of waiting."""
        nudged = time.monotonic()
        for _ in range(100000):
            owed = self.owed()
            if len(owed) <= most:
                return
            oldest = min(self.inflight[i][1] for i in owed)
            if time.monotonic() - max(oldest, nudged) > NUDGE:
                nudged = time.monotonic()
                for b in self.boxes:
                    self.call("sandbox_resume", {"sandbox_id": b})
                counts["resumed after a wait"] = counts.get("resumed after a wait", 0) + 1
            if time.monotonic() - oldest > TIMEOUT:
                i = min(owed, key=lambda k: self.inflight[k][1])
                raise AssertionError(f"session {self.n}: no answer within {TIMEOUT} s to "
                                     f"{self.inflight[i][0]} {json.dumps(self.inflight[i][3])[:200]}")
            self.pump(counts, 0.5)


def shared_daemon(tmp, rng):
    """-> (the daemon's Popen, its socket, the session's arguments)."""
    sock, state = os.path.join(tmp, "s"), os.path.join(tmp, "state")
    cmd = [CORRAL, "serve", "--socket", sock, "--state-dir", state,
           "--max-leases", str(rng.choice([64, 64, 2]))]
    args = ["--socket", sock]
    if rng.random() < 0.4:
        # a remote harness: TCP with TLS, the token in a file
        cert, key = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "cert.key")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:P-256", "-nodes", "-days", "2", "-subj", "/CN=localhost",
                        "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                        "-keyout", key, "-out", cert], check=True, capture_output=True, timeout=60)
        os.chmod(key, 0o600)
        tok = os.path.join(tmp, "token")
        with open(os.open(tok, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
            f.write(os.urandom(32).hex())
        port = free_port()
        cmd += ["--listen", f"127.0.0.1:{port}", "--token-file", tok,
                "--tls-cert", cert, "--tls-key", key]
        args = ["--url", f"https://127.0.0.1:{port}", "--token-file", tok, "--ca-file", cert]
    print("  " + " ".join(c.replace(tmp, "TMP") for c in cmd[1:]) + "; mcp "
          + " ".join(a.replace(tmp, "TMP") for a in args), flush=True)
    d = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=open(os.path.join(tmp, "daemon.err"), "w"))
    for _ in range(200):
        if os.path.exists(sock) or d.poll() is not None:
            break
        time.sleep(0.05)
    return d, sock, args


def daemon_boxes(sock):
    """The shared daemon's sandboxes, by its own API (None: no answer)."""
    try:
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.settimeout(30)
        c.connect(sock)
        c.sendall(b"GET /v1/sandboxes HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        got = b""
        for _ in range(10000):
            more = c.recv(65536)
            if not more:
                break
            got += more
        c.close()
        return json.loads(got.split(b"\r\n\r\n", 1)[1]).get("sandboxes")
    except (OSError, ValueError, IndexError):
        return None


def walk_shared(tmp, server):
    passed = failed = 0
    rng = random.Random(SEED)
    # a third of CALLS: a call here costs about three of a private walk's
    # (sessions started and ended, TLS, calls waited for together), and
    # the check's 300 calls must not take more of its CPU (ASan: 4-10 s
    # for 300 here, 3-4.5 s for 300 private)
    calls = max(1, CALLS // 3)
    print(f"chaos-mcp: seed {SEED}, {calls} calls, a shared daemon "
          f"(replay: tests/chaos_mcp.py CORRAL {CALLS} {SEED})", flush=True)

    def check(ok, what):
        nonlocal passed, failed
        print(("ok   " if ok else "FAIL ") + what, flush=True)
        passed, failed = passed + ok, failed + (not ok)

    d, sock, args = shared_daemon(tmp, rng)
    server.append(type("Daemon", (), {"p": d, "daemon": True})())
    sessions, counts, why, nsess, bad_ends = [], {}, "", 0, []
    tools = None

    def open_session():
        nonlocal nsess, tools
        nsess += 1
        se = Session(tmp, args, nsess, server)
        se.send({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                 "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                            "clientInfo": {"name": "chaos", "version": "1"}}})
        se.s.answer(0)
        se.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        t = se.s.request("tools/list")["result"]["tools"]
        tools = tools or t
        sessions.append(se)

    def end_session(se, how):
        """stdin's end, SIGTERM or SIGKILL, calls perhaps in flight."""
        se.ended = True
        sessions.remove(se)
        if how == "eof":
            se.s.p.stdin.close()
        else:
            se.s.p.send_signal(signal.SIGKILL if how == "kill" else signal.SIGTERM)
        try:
            rc = se.s.p.wait(90)
        except subprocess.TimeoutExpired:
            se.s.p.kill()
            rc = se.s.p.wait()
            bad_ends.append(f"session {se.n} did not end in 90 s on {how}")
        # what it said before it ended: answers to calls in flight or none
        se.s.buf += se.s.p.stdout.read()
        try:
            while b"\n" in se.s.buf:
                line, se.s.buf = se.s.buf.split(b"\n", 1)
                se.take(json.loads(line), counts)
        except (AssertionError, ValueError) as e:
            bad_ends.append(str(e))
        if how != "kill" and rc != 0:
            bad_ends.append(f"session {se.n} ended {rc} on {how}")
        counts["end:" + how] = counts.get("end:" + how, 0) + 1
        if os.environ.get("CHAOS_VERBOSE"):
            print(f"  session {se.n} ended by {how}: its sandboxes {se.boxes}, calls in flight "
                  f"{[(k, v[0], v[2]) for k, v in se.inflight.items()]}", flush=True)

    try:
        if d.poll() is not None:
            raise AssertionError(f"the daemon did not start (status {d.returncode})")
        for _ in range(rng.choice([2, 3])):
            open_session()
        deadline = time.monotonic() + MAX_SECONDS
        for _ in range(calls):
            if time.monotonic() > deadline:
                counts["stopped at the time bound"] = 1
                break
            se = rng.choice(sessions)
            r = rng.random()
            if r < 0.03:
                end_session(se, rng.choice(["eof", "term", "kill", "kill"]))
                open_session()
                continue
            t = rng.choices(tools, [WEIGHTS.get(x["name"], 1.0) for x in tools])[0]
            if not se.boxes and rng.random() < 0.7:
                t = next(x for x in tools if x["name"] == "sandbox_create")
            if t["name"] == "sandbox_create" and len(se.boxes) >= MAX_BOXES // 2:
                t = next(x for x in tools if x["name"] == "sandbox_destroy")
            args_ = args_for(rng, t.get("inputSchema", {}), se.boxes)
            if t["name"] == "sandbox_create" and (not se.boxes or rng.random() < 0.5):
                args_ = {}
            if rng.random() < 0.3:
                # another session's sandbox: not this session's to touch
                other = [b for o in sessions if o is not se for b in o.boxes]
                if other and "sandbox_id" in args_:
                    args_["sandbox_id"] = rng.choice(other)
            i = se.call(t["name"], args_)
            if rng.random() < 0.2:
                # cancelled at once, or after the call began
                time.sleep(rng.choice([0, 0, 0.05, 0.3]))
                se.cancel(i)
                if rng.random() < 0.2:
                    se.cancel(i)            # twice
            if rng.random() < 0.05:
                se.cancel(rng.choice([i + "0", 7, None]))     # no such call
            if rng.random() < 0.03:
                se.s.send_raw(rng.choice(GARBAGE[:7]))
                se.garbage += 1
            # calls in flight together: a few, now and then all drained
            for o in list(sessions):
                o.settle(counts, rng.choice([0, 2, 4, 8]) if o is se else 8)
    except (AssertionError, OSError, ValueError) as e:
        why = str(e)
    print("  " + ", ".join(f"{k} x{v}" for k, v in sorted(counts.items())))
    check(not why, f"every call had one answer, or a cancelled one none ({why or 'all'})")
    for se in list(sessions):
        try:
            se.settle(counts, 0)
        except (AssertionError, OSError, ValueError) as e:
            bad_ends.append(str(e))
        end_session(se, "eof")
    for b in bad_ends[:10]:
        print("     " + b)
    check(not bad_ends, "every session ended as it was told (status 0, SIGKILL aside)")
    left = None
    for _ in range(300):        # a lease's end is the daemon's to act on, at once
        left = daemon_boxes(sock)
        if left == []:
            break
        time.sleep(0.1)
    check(left == [], f"no session's sandbox left on the daemon: {json.dumps(left)[:300]}")
    if left and os.environ.get("CHAOS_VERBOSE"):
        for name in [f"session{k}.err" for k in range(1, nsess + 1)]:
            with open(os.path.join(tmp, name), errors="replace") as f:
                print(f"  {name}: " + f.read()[-600:].replace("\n", "\n    "))
    alive = d.poll() is None
    check(alive, f"the daemon outlived the sessions (status {d.poll()})")
    if alive:
        d.send_signal(signal.SIGTERM)
        try:
            rc = d.wait(60)
        except subprocess.TimeoutExpired:
            d.kill()
            rc = d.wait()
        check(rc == 0, f"the daemon stopped on SIGTERM with status 0 (got {rc})")
    report = []
    for name in ["daemon.err"] + [f"session{k}.err" for k in range(1, nsess + 1)]:
        with open(os.path.join(tmp, name), errors="replace") as f:
            report += [f"{name}: {l}" for l in f.read().splitlines()
                       if "Sanitizer" in l or "runtime error" in l]
    for l in report[:20]:
        print("     " + l)
    check(not report, "no sanitizer report from the daemon or a session")
    print(f"chaos-mcp: {passed} passed, {failed} failed")
    return 1 if failed else 0


def main():
    tmp = tempfile.mkdtemp(prefix="corral-chaos-mcp.")
    os.chmod(tmp, 0o755)
    server = []
    try:
        # the kind of walk drawn apart: a private walk's seed replays as before
        if random.Random(SEED ^ 0x5eed).random() < 0.5:
            return walk_shared(tmp, server)
        return walk(tmp, server)
    finally:
        # also when the walk itself fails: the server killed, its
        # directory gone (the private daemon may still be writing there)
        for s in reversed(server):      # the sessions before the daemon
            if s.p.poll() is None and getattr(s, "daemon", False):
                # the shared daemon: SIGTERM, for it to remove its sandboxes
                s.p.terminate()
                try:
                    s.p.wait(60)
                except subprocess.TimeoutExpired:
                    pass
            if s.p.poll() is None:
                s.p.kill()
                s.p.wait()
        for _ in range(50):
            shutil.rmtree(tmp, ignore_errors=True)
            if not os.path.exists(tmp):
                break
            time.sleep(0.1)


def walk(tmp, server):
    passed = failed = 0
    rng = random.Random(SEED)
    print(f"chaos-mcp: seed {SEED}, {CALLS} calls "
          f"(replay: tests/chaos_mcp.py CORRAL {CALLS} {SEED})", flush=True)

    def check(ok, what):
        nonlocal passed, failed
        print(("ok   " if ok else "FAIL ") + what, flush=True)
        passed, failed = passed + ok, failed + (not ok)

    # half the private walks (drawn apart, for the rest to replay as
    # before): the operator's policy shows a workspace, with links in it
    # to the host's socket directories for a model to name
    args = ("--private",)
    ws = os.path.join(tmp, "ws")
    if random.Random(SEED ^ 0x50c7).random() < 0.5:
        os.makedirs(os.path.join(ws, "src"))
        os.symlink("/run", os.path.join(ws, "to-run"))
        os.symlink("/tmp", os.path.join(ws, "to-tmp"))
        pol = os.path.join(tmp, "operator.json")
        with open(pol, "w") as f:
            json.dump({"filesystem": {"workspace": ws}}, f)
        args = ("--private", "--policy", pol)
        print("  the operator's policy shows TMP/ws", flush=True)
    s = Server(tmp, args)
    server.append(s)
    boxes, counts, why = [], {}, ""
    try:
        s.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                 "clientInfo": {"name": "chaos", "version": "1"}})
        s.send_raw(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
        tools = s.request("tools/list")["result"]["tools"]
        deadline = time.monotonic() + MAX_SECONDS
        for _ in range(CALLS):
            if time.monotonic() > deadline:
                counts["stopped at the time bound"] = 1
                break
            if rng.random() < 0.05:
                g = rng.choice(GARBAGE)
                s.send_raw(g)
                # an id it can read is answered; one it cannot, with id null
                r = s.recv()
                if ("result" in r) == ("error" in r):
                    raise AssertionError(f"garbage {g[:40]!r} got {json.dumps(r)[:200]}")
                counts["garbage"] = counts.get("garbage", 0) + 1
                continue
            t = rng.choices(tools, [WEIGHTS.get(x["name"], 1.0) for x in tools])[0]
            if not boxes and rng.random() < 0.7:
                t = next(x for x in tools if x["name"] == "sandbox_create")
            if t["name"] == "sandbox_create" and len(boxes) >= MAX_BOXES:
                t = next(x for x in tools if x["name"] == "sandbox_destroy")
            args = args_for(rng, t.get("inputSchema", {}), boxes)
            if t["name"] == "sandbox_create" and (not boxes or rng.random() < 0.5):
                args = {}       # most of the walk needs a sandbox to work in
            if rng.random() < 0.02:
                args = wrong(rng)
            if isinstance(args, dict) and isinstance(args.get("workspace"), str):
                args["workspace"] = args["workspace"].replace("WS", ws)
            r = s.request("tools/call", {"name": t["name"], "arguments": args})
            res = r.get("result", {})
            key = f"{t['name']}:{'error' if 'error' in r or res.get('isError') else 'ok'}"
            counts[key] = counts.get(key, 0) + 1
            if os.environ.get("CHAOS_VERBOSE") and key.endswith("error"):
                text = (r.get("error") or {}).get("message") or \
                    (res.get("content") or [{}])[0].get("text", "")
                print(f"  {t['name']} {json.dumps(args)[:150]}: {text[:150]}")
            sc = res.get("structuredContent") or {}
            ok = "result" in r and not res.get("isError")
            if t["name"] == "sandbox_create" and ok and sc.get("id"):
                boxes.append(sc["id"])
                w = args.get("workspace") if isinstance(args, dict) else None
                if w in [d.replace("WS", ws) for d in SOCKET_DIRS]:
                    raise AssertionError(f"a sandbox made on {w}: {json.dumps(sc)[:200]}")
            if t["name"] == "sandbox_destroy" and ok:
                boxes = [b for b in boxes if b != args.get("sandbox_id")]
            if t["name"] == "exec" and isinstance(sc.get("pid"), int) and len(PIDS) < 50:
                PIDS.append(sc["pid"])
    except (AssertionError, OSError, ValueError) as e:
        why = str(e)
    print("  " + ", ".join(f"{k} x{v}" for k, v in sorted(counts.items())))
    check(not why, f"every request had one answer ({why or 'all'})")
    check(s.p.poll() is None, f"the server outlived the calls (status {s.p.poll()})")
    try:
        s.p.stdin.close()
    except OSError:
        pass
    try:
        rc = s.p.wait(90)
    except subprocess.TimeoutExpired:
        s.p.kill()
        rc = s.p.wait()
    check(rc == 0, f"the server ended with status 0 on its stdin's end (got {rc})")
    # its private daemon and sandboxes: processes whose command line names its directory
    left = []
    for _ in range(100):
        left = []
        for p in glob.glob("/proc/[0-9]*/cmdline"):
            try:
                with open(p, "rb") as f:
                    if tmp.encode() in f.read():
                        left.append(int(p.split("/")[2]))
            except OSError:
                pass
        if not left:
            break
        time.sleep(0.1)
    check(not left, f"nothing of the session left running: {left[:5]}")
    s.err.seek(0)
    report = [l for l in s.err.read().splitlines()
              if "Sanitizer" in l or "runtime error" in l]
    for l in report[:20]:
        print("     " + l)
    check(not report, "no sanitizer report on its stderr")
    print(f"chaos-mcp: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
