#!/usr/bin/python3
"""chaos_mcp.py - `corral mcp` fed tool calls at random, as a model that
is wrong, or hostile, would write them: each tool's arguments drawn from
its own inputSchema (tools/list), mostly of the right types, sometimes of
the wrong ones, too large, with names it does not know, for sandboxes that
are gone; between them JSON-RPC the server must refuse.  Every choice comes
from one printed seed.

    tests/chaos_mcp.py CORRAL [CALLS [SEED]]     (check: 300 calls, 120 s at most)

Fails on: a request left without exactly one answer (result or error)
within TIMEOUT, an answer that is not JSON-RPC, the server dying, or not
ending with status 0 on its stdin's end, a sanitizer's report on its
stderr, and its private daemon or a sandbox of it left running.
Ends with a line "chaos-mcp: N passed, N failed".
"""
import glob
import json
import os
import random
import select
import shutil
import subprocess
import sys
import tempfile
import time

CORRAL = os.path.abspath(sys.argv[1])
CALLS = int(sys.argv[2]) if len(sys.argv) > 2 else 300
SEED = int(sys.argv[3]) if len(sys.argv) > 3 else random.SystemRandom().randrange(1 << 30)
TIMEOUT = 90
MAX_SECONDS = 120   # the walk stops here whatever CALLS says (a starved check)
MAX_BOXES = 4
PIDS = []           # background processes' pids, from exec's answers
# a model mostly runs commands and moves files; it halts and destroys rarely
WEIGHTS = {"exec": 8, "file_read": 2, "file_write": 2, "file_list": 2, "process_output": 2,
           "process_stdin": 2, "sandbox_halt": 0.3, "sandbox_destroy": 0.5,
           "sandbox_pause": 0.5}


class Server:
    def __init__(self, tmp):
        env = dict(os.environ, TMPDIR=tmp)
        self.err = open(os.path.join(tmp, "stderr"), "w+")
        self.p = subprocess.Popen([CORRAL, "mcp", "--private"], stdin=subprocess.PIPE,
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
STRINGS = {"path": PATHS, "from": PATHS, "to": PATHS, "cwd": PATHS, "command": COMMANDS,
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


def main():
    tmp = tempfile.mkdtemp(prefix="corral-chaos-mcp.")
    os.chmod(tmp, 0o755)
    server = []
    try:
        return walk(tmp, server)
    finally:
        # also when the walk itself fails: the server killed, its
        # directory gone (the private daemon may still be writing there)
        for s in server:
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

    s = Server(tmp)
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
