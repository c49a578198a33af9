#!/usr/bin/python3
"""mcp_raw.py - `corral mcp` at the wire: JSON-RPC lines written by hand.

    mcp_raw.py CHECK CORRAL [MCP ARGS...]

CHECK is one of: protocol, bounds, open_files, output, whole, big, many, shared, signal, swap,
progress, flood, sandboxes, records, reap-eof, reap-TERM, reap-INT, reap-HUP, reap-KILL, reap-KILLTREE,
reap-hung.
Prints "ok - ..." per check and
exits non-zero on the first failure.  Every read is bounded (select with a
timeout); the server is killed by pid when a check fails.
"""
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time

TIMEOUT = 60


class Server:
    def __init__(self, argv, **kw):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, **kw)
        self.buf = bytearray()
        self.next_id = 100

    def send_raw(self, line):
        self.p.stdin.write(line.encode() + b"\n")
        self.p.stdin.flush()

    def send(self, obj):
        self.send_raw(json.dumps(obj))

    def recv(self):
        # a line can be tens of MB, and one read hundreds of lines: the
        # buffer is a bytearray (deleting its head is cheap), searched only
        # where it was not yet
        deadline = time.monotonic() + TIMEOUT
        buf = self.buf
        i = buf.find(b"\n")
        while i < 0:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError("no answer within %d s" % TIMEOUT)
            r, _, _ = select.select([self.p.stdout], [], [], left)
            if r:
                chunk = os.read(self.p.stdout.fileno(), 1 << 20)
                if not chunk:
                    raise AssertionError("stdout closed")
                i = chunk.find(b"\n")
                if i >= 0:
                    i += len(buf)
                buf += chunk
        line = bytes(buf[:i])
        del buf[:i + 1]
        self.last_len = len(line) + 1
        self.last_raw = line
        return json.loads(line)

    def request(self, method, params=None):
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        r = self.recv()
        check(r.get("id") == self.next_id, "answer to id %d (got %r)" % (self.next_id, r))
        return r

    def call(self, name, args):
        r = self.request("tools/call", {"name": name, "arguments": args})
        check("result" in r, "%s answered a result: %r" % (name, r))
        return r["result"]

    def close(self):
        self.p.stdin.close()
        try:
            rc = self.p.wait(TIMEOUT)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            raise AssertionError("corral mcp did not exit at stdin's end")
        return rc, self.p.stderr.read().decode()


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    print("ok - " + what.split(":")[0])


def private_dirs():
    tmp = os.environ.get("TMPDIR", "/tmp")
    return sorted(d for d in os.listdir(tmp) if d.startswith("corral-mcp."))


def daemon_pid(stderr):
    for word in stderr.replace("(", " ").replace(")", " ").split("pid ")[1:]:
        return int(word.split()[0])
    return 0


def gone(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # a zombie is gone for our purposes, but nobody here is its parent
    with open("/proc/%d/stat" % pid) as f:
        return f.read().split(") ")[1].split()[0] == "Z"


def protocol(s):
    r = s.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                 "clientInfo": {"name": "raw", "version": "1"}})
    check(r["result"]["protocolVersion"] == "2025-06-18", "initialize echoes 2025-06-18")
    check(r["result"]["capabilities"]["tools"] == {"listChanged": False}, "tools capability")
    r = s.request("initialize", {"protocolVersion": "2025-11-25"})
    check(r["result"]["protocolVersion"] == "2025-11-25", "initialize echoes 2025-11-25")
    r = s.request("initialize", {"protocolVersion": "1999-01-01"})
    check(r["result"]["protocolVersion"] == "2025-11-25", "an unknown version gets the latest")
    s.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    s.send({"jsonrpc": "2.0", "method": "notifications/whatever", "params": {}})
    s.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 999}})
    r = s.request("ping")
    check(r["result"] == {}, "notifications get no answer: the next answer is the ping's")
    s.send({"jsonrpc": "2.0", "id": "str-id", "method": "ping"})
    r = s.recv()
    check(r["id"] == "str-id" and r["result"] == {}, "a string id is echoed")
    s.send_raw("{not json")
    r = s.recv()
    check(r["id"] is None and r["error"]["code"] == -32700, "parse error -32700")
    s.send_raw('[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]')
    r = s.recv()
    check(r["id"] is None and r["error"]["code"] == -32600, "a batch is refused -32600")
    # "\u0000" is JSON (chaos_mcp.py's): the request is answered by its id,
    # refused, not a parse error with id null that leaves the client waiting
    s.send({"jsonrpc": "2.0", "id": "nul", "method": "tools/call",
            "params": {"name": "file_write", "arguments": {"sandbox": "sb-x",
                       "path": "/workspace/a\u0000/../../x", "content": "a"}}})
    r = s.recv()
    check(r["id"] == "nul" and r["error"]["code"] == -32602 and "NUL" in r["error"]["message"],
          "a string holding NUL is refused -32602 with the request's id: %.200r" % r)
    # a number past 2^63 - 1 is JSON too: answered by the id, not id null
    for rid in ("big", 7):
        s.send_raw('{"jsonrpc": "2.0", "id": %s, "method": "tools/call", "params": '
                   '{"name": "sandbox_create", "arguments": {"limits": {"pids": '
                   '9223372036854775808}}}}' % json.dumps(rid))
        r = s.recv()
        check(r["id"] == rid and r["error"]["code"] == -32602 and
              "past 2^63 - 1" in r["error"]["message"],
              "a number past 2^63 - 1 is refused -32602 with the request's id: %.200r" % r)
    s.send_raw('{"jsonrpc": "2.0", "id": 1e400, "method": "ping", "x": 9223372036854775808}')
    r = s.recv()
    check(r["id"] is None and r["error"]["code"] == -32700,
          "without an id to answer by, a parse error: %.200r" % r)
    # an id past int64 (itself the overflow, or a real beside one): no id
    # to answer by either, and never cast to an integer it does not fit
    # (undefined: a build with -fsanitize=float-cast-overflow trapped here)
    for rid in ("9223372036854775808", "1e30", "-1e30"):
        s.send_raw('{"jsonrpc": "2.0", "id": %s, "method": "ping", "x": 9223372036854775808}' % rid)
        r = s.recv()
        check(r is not None and r["id"] is None and r["error"]["code"] == -32700,
              "an id of %s past int64: a parse error: %.200r" % (rid, r))
    # one line of 40 MiB, a valid ping: longer than MCP_LINE_MAX (8 MiB), it
    # is refused once, not kept (the buffer stays within 16 MiB: 19 MB at its
    # peak here, 155 MB without the bound), its rest skipped, and the next
    # answered; one answer for the one message, not one for each 8 MiB of it
    s.p.stdin.write(b'{"jsonrpc": "2.0", "id": "long", "method": "ping", "x": "' +
                    b"x" * (40 << 20) + b'"}\n')
    s.send({"jsonrpc": "2.0", "id": "after-long", "method": "ping"})
    got = []
    for _ in range(12):     # bounded: without the fix an error for each 8 MiB
        r = s.recv()
        if r.get("id") == "after-long":
            break
        got.append(r)
    check(r["id"] == "after-long" and len(got) == 1 and
          all(g["id"] is None and g["error"]["code"] == -32700 and
              "longer than 8 MiB" in g["error"]["message"] for g in got),
          "a 40 MiB line is refused -32700 once, the next answered: %.300r" % (got + [r]))
    with open("/proc/%d/status" % s.p.pid) as f:
        hwm = [int(l.split()[1]) for l in f if l.startswith("VmHWM")][0] // 1024
    check(hwm < 48, "a 40 MiB line is not kept whole: peak %d MB" % hwm)
    s.send({"id": 5, "method": "ping"})
    r = s.recv()
    check(r["id"] == 5 and r["error"]["code"] == -32600, "no jsonrpc member: -32600")
    s.send({"jsonrpc": "2.0", "id": {"x": 1}, "method": "ping"})
    r = s.recv()
    check(r["id"] is None and r["error"]["code"] == -32600, "an object id: -32600")
    s.send_raw('"just a string"')
    r = s.recv()
    check(r["error"]["code"] == -32600, "a JSON value that is no request: -32600")
    r = s.request("no/such/method")
    check(r["error"]["code"] == -32601, "unknown method -32601")
    r = s.request("tools/call", {"arguments": {}})
    check(r["error"]["code"] == -32602, "tools/call without a name -32602")
    r = s.request("tools/call", {"name": "no_such_tool", "arguments": {}})
    check(r["error"]["code"] == -32602, "unknown tool -32602")
    r = s.request("tools/list", [])
    check(r["error"]["code"] == -32602, "params that are no object -32602")
    r = s.request("server/discover", {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}}})
    res = r["result"]
    check(res["resultType"] == "complete" and "2025-11-25" in res["supportedVersions"] and
          res["serverInfo"]["name"] == "corral" and "tools" in res["capabilities"],
          "server/discover: versions, capabilities, serverInfo")
    r = s.request("tools/list")
    tools = {t["name"]: t for t in r["result"]["tools"]}
    for name in ("sandbox_create", "sandbox_list", "sandbox_info", "exec", "process_output",
                 "process_kill", "process_list", "process_wait", "file_read", "file_write", "file_list",
                 "file_delete", "sandbox_pause", "sandbox_resume", "sandbox_halt",
                 "sandbox_destroy", "sandbox_events", "sandbox_keepalive", "process_stdin",
                 "process_signal", "file_mkdir", "file_rename", "archive_read", "archive_write",
                 "workspace_diff", "workspace_export"):
        t = tools.get(name)
        check(t and t["inputSchema"]["type"] == "object" and t["outputSchema"]["type"] == "object"
              and t["description"] and "readOnlyHint" in t["annotations"],
              "tool %s: schemas, description, annotations" % name)
    check(tools["exec"]["inputSchema"]["properties"].get("stdin_open", {}).get("type") == "boolean" and
          "follow" in tools["process_output"]["inputSchema"]["properties"] and
          "recursive" in tools["file_list"]["inputSchema"]["properties"] and
          "to" not in tools["workspace_export"]["inputSchema"]["properties"],
          "the new arguments: stdin_open, follow, recursive; no host path for export")
    # a model reads the words of a change here: the daemon's (change_kind_name),
    # not "type" and "mode", which it said while the daemon sent type_changed
    check("added/modified/deleted/type_changed/mode_changed" in
          tools["workspace_diff"]["description"], "workspace_diff names the daemon's words")
    check(tools["sandbox_list"]["annotations"]["readOnlyHint"] is True and
          tools["sandbox_destroy"]["annotations"]["destructiveHint"] is True,
          "read-only and destructive hints")
    res = s.call("sandbox_info", {"sandbox_id": "sb-nope"})
    check(res.get("isError") is True and "no sandbox sb-nope in this session" in
          res["content"][0]["text"], "no such sandbox: isError saying so: %r" % res)
    res = s.call("sandbox_info", {"sandbox_id": "../x"})
    check(res.get("isError") is True, "a bad id: isError")
    res = s.call("sandbox_list", {"bogus": 1})
    check(res.get("isError") is True and "bogus" in res["content"][0]["text"],
          "an unknown argument: isError naming it")
    res = s.call("exec", {"sandbox": "sb-x", "command": "true"})
    check(res.get("isError") is True and "unknown argument \"sandbox\"; exec takes sandbox_id, " in
          res["content"][0]["text"], "an unknown argument: the names the tool takes: %r" % res)
    # two calls in flight, answered each by its id
    res = s.call("sandbox_create", {})
    sid = res["structuredContent"]["id"]
    s.send({"jsonrpc": "2.0", "id": "slow", "method": "tools/call", "params": {
        "name": "exec", "arguments": {"sandbox_id": sid, "command": "sleep 1; echo slow"}}})
    s.send({"jsonrpc": "2.0", "id": "fast", "method": "ping"})
    first, second = s.recv(), s.recv()
    check(first["id"] == "fast" and second["id"] == "slow" and
          second["result"]["structuredContent"]["stdout"] == "slow\n",
          "a ping is answered while a call runs")
    res = s.call("exec", {"sandbox_id": sid, "command": "exit 7"})
    check(not res.get("isError") and res["structuredContent"]["exit_code"] == 7,
          "a non-zero exit is a result, not an error")
    s.call("sandbox_destroy", {"sandbox_id": sid})


def bounds(s, workspace):
    s.request("initialize", {"protocolVersion": "2025-06-18"})
    res = s.call("sandbox_create", {"allow_hosts": ["evil.example"]})
    check(res.get("isError") and "allowlist" in res["content"][0]["text"],
          "a host beyond the operator's allowlist is refused")
    res = s.call("sandbox_create", {"limits": {"memory": "8G"}})
    check(res.get("isError") and "limits.memory" in res["content"][0]["text"],
          "more memory than the operator's is refused")
    res = s.call("sandbox_create", {"limits": {"pids": 0}})
    check(res.get("isError"), "removing the operator's pids limit is refused")
    res = s.call("sandbox_create", {"limits": {"open_files": 1024, "pids": 16}})
    check(res.get("isError") and "limits.open_files: the operator's policy allows "
          "at most 512 (got 1024)" in res["content"][0]["text"],
          "more open files than the operator's is refused, fewer pids or not: %r" % res)
    res = s.call("sandbox_create", {"workspace": "/etc"})
    check(res.get("isError") and "workspace" in res["content"][0]["text"],
          "a workspace outside the operator's is refused")
    res = s.call("sandbox_create", {"policy": {"filesystem": {"rw": ["/etc"]}}})
    check(res.get("isError") and "/etc" in res["content"][0]["text"],
          "a host path the operator does not show is refused")
    res = s.call("sandbox_create", {"policy": {"env": {"pass": ["HOME"]}}})
    check(res.get("isError") and "env.pass" in res["content"][0]["text"],
          "passing the server's environment in is refused")
    res = s.call("sandbox_create", {"policy": {"network": {"allow": ["*"]}}})
    check(res.get("isError"), "widening the allowlist in an inline policy is refused")
    res = s.call("sandbox_create", {"policy": {"export": {"hold": []}}})
    check(res.get("isError") and "deploy/**" in res["content"][0]["text"],
          "the operator's export hold cannot be replaced by an empty list: %r" % res)
    res = s.call("sandbox_create", {"policy": {"export": {"hold": ["deploy/**", "x"],
                                                          "max_files": 501}}})
    check(res.get("isError") and "export.max_files" in res["content"][0]["text"],
          "an export bound beyond the operator's is refused: %r" % res)
    res = s.call("sandbox_create", {"policy": {"filesystem": {"image": "debian:12"}}})
    check(res.get("isError") and "filesystem.image" in res["content"][0]["text"],
          "an image in place of the operator's root is refused: %r" % res)
    res = s.call("sandbox_create", {"policy": {"identity": {"user": "root"}}})
    check(res.get("isError") and "runs commands as" in res["content"][0]["text"],
          "root inside, which the operator's policy does not give, is refused: %r" % res)
    res = s.call("sandbox_create", {"limits": {"call_timeout": "1h"}})
    check(res.get("isError") and "call_timeout" in res["content"][0]["text"],
          "a call timeout beyond the operator's is refused: %r" % res)
    res = s.call("sandbox_create", {"policy": {"abort": {"ignore_syscalls": ["mount", "ptrace"]}}})
    check(res.get("isError") and "ptrace" in res["content"][0]["text"],
          "a syscall whose denials the operator counts cannot be ignored: %r" % res)
    res = s.call("sandbox_create", {"policy": {"abort": {"window_seconds": 1}}})
    check(res.get("isError") and "abort.window_seconds" in res["content"][0]["text"],
          "a window shorter than the operator's is refused: %r" % res)
    res = s.call("sandbox_create", {"policy": "offline"})
    check(res.get("isError") and "policy" in res["content"][0]["text"],
          "a named policy that is not offered is refused")
    res = s.call("sandbox_create", {"allow_hosts": ["web.test:80"], "limits": {"memory": "64M"},
                                    "workspace": workspace + "/sub"})
    check(not res.get("isError"), "narrowing is allowed: %r" % res)
    sid = res["structuredContent"]["id"]
    res = s.call("exec", {"sandbox_id": sid, "argv": ["true"], "timeout_seconds": 99})
    check(res.get("isError") and "timeout_seconds" in res["content"][0]["text"],
          "a timeout beyond the operator's is refused")
    res = s.call("exec", {"sandbox_id": sid, "command": "cat /workspace/f; ulimit -Hn"})
    check(res["structuredContent"]["stdout"] == "inside\n512\n",
          "the narrowed workspace is there, and the operator's open_files: %r" % res)
    # the hold table stands whatever the model asks: it lets no held change out
    s.call("exec", {"sandbox_id": sid, "command": "echo 'touch /tmp/m' > /workspace/.envrc"})
    res = s.call("workspace_export", {"sandbox_id": sid, "mode": "apply", "allow_risky": ["**"]})
    check(res.get("isError") and "allow_risky" in res["content"][0]["text"],
          "a model's allow_risky is refused: %r" % res)
    res = s.call("workspace_export", {"sandbox_id": sid, "mode": "apply"})
    check(not res.get("isError") and
          [h["path"] for h in res["structuredContent"]["held"]] == [".envrc"],
          "the apply holds .envrc back: %r" % res)
    check(not os.path.exists(workspace + "/sub/.envrc"), "no .envrc on the host")
    res = s.call("workspace_export", {"sandbox_id": sid, "mode": "patch",
                                      "allow_risky": [".envrc"]})
    check(res.get("isError") and "allow_risky" in res["content"][0]["text"],
          "allow_risky from the model is refused for a patch too: %r" % res)
    s.call("sandbox_destroy", {"sandbox_id": sid})


def transparent(s):
    """The operator's transparent mode stays: without it, a connection to an
    address is refused in silence, no denial recorded or counted."""
    s.request("initialize", {"protocolVersion": "2025-06-18"})
    res = s.call("sandbox_create", {"policy": {"network": {"transparent": False}}})
    check(res.get("isError") and "network.transparent" in res["content"][0]["text"],
          "turning the operator's transparent mode off is refused: %r" % res)
    res = s.call("sandbox_create", {"allow_hosts": ["web.test:80"]})
    check(not res.get("isError"), "narrowing the hosts keeps it, and is allowed: %r" % res)
    s.call("sandbox_destroy", {"sandbox_id": res["structuredContent"]["id"]})


def open_files(s):
    """Without the operator's open_files, the share of the host's file table
    over pids bounds a model's: the daemon refuses a sandbox past it."""
    s.request("initialize", {"protocolVersion": "2025-06-18"})
    res = s.call("sandbox_create", {"limits": {"open_files": 1000000}})
    check(res.get("isError") and "limits.open_files 1000000" in res["content"][0]["text"],
          "open files past the share (or past what init keeps) are refused: %r" % res)
    res = s.call("sandbox_create", {"limits": {"open_files": 2 ** 63 - 1}})
    check(res.get("isError") and "(got 9223372036854775807)" in res["content"][0]["text"],
          "2^63-1 open files are refused, the value named: %r" % res)
    res = s.call("sandbox_create", {"limits": {"open_files": -1}})
    check(res.get("isError") and "limits.open_files" in res["content"][0]["text"] and
          "(got -1)" in res["content"][0]["text"], "negative open files are refused: %r" % res)


def output(s):
    """A follow of a process that writes more than one answer holds."""
    s.request("initialize", {"protocolVersion": "2025-06-18"})
    sid = s.call("sandbox_create", {})["structuredContent"]["id"]
    res = s.call("exec", {"sandbox_id": sid, "background": True, "command":
                          "sleep 2; head -c 6000000 /dev/zero | tr '\\0' a; sleep 600"})
    pid = res["structuredContent"]["pid"]
    res = s.call("process_output", {"sandbox_id": sid, "pid": pid, "follow": True,
                                    "stream": "stdout", "timeout_seconds": 30})
    out = res["structuredContent"]
    check(not res.get("isError") and 0 < len(out["stdout"]) <= 1 << 20,
          "a follow keeps at most limits.output (1M) of a stream: got %d bytes" %
          len(out.get("stdout", "")))
    check(out.get("more") is True and out["state"] == "running" and
          out["stdout_next_offset"] >= len(out["stdout"]),
          "it says there is more, and where to go on: %r" %
          {k: v for k, v in out.items() if k not in ("stdout", "stderr")})
    # a NUL in the output is a byte like any other, not a line lost
    pid = s.call("exec", {"sandbox_id": sid, "background": True, "command":
                          "printf 'a\\000b'"})["structuredContent"]["pid"]
    s.call("process_wait", {"sandbox_id": sid, "pid": pid})
    res = s.call("process_output", {"sandbox_id": sid, "pid": pid})
    out = res["structuredContent"]
    check(out["stdout"] == "a\0b" and out["stdout_next_offset"] == 3,
          "output with a NUL is kept whole: %r" % out)
    # a flood of denials: the first 100 listed, the rest counted and said
    res = s.call("exec", {"sandbox_id": sid, "argv": ["python3", "-c",
                 "import ctypes\nl = ctypes.CDLL(None)\n"
                 "for i in range(150): l.mount(b'none', b'/tmp', b'tmpfs', 0, None)"]})
    out = res["structuredContent"]
    check(len(out["denials"]) == 100 and out.get("denials_dropped") == 50 and
          "(and 50 more, not listed)" in res["content"][0]["text"],
          "denials past the first 100 are said: %r" %
          {k: v for k, v in out.items() if k != "denials"})
    s.call("sandbox_destroy", {"sandbox_id": sid})


def whole(s):
    """What a program wrote reaches the model whole: a NUL in its output
    does not end the exec's text, and a progress message cut at its
    bound is cut between characters, not dropped."""
    s.request("initialize", {"protocolVersion": "2025-06-18"})
    sid = s.call("sandbox_create", {})["structuredContent"]["id"]
    res = s.call("exec", {"sandbox_id": sid, "command":
                          "printf 'tests passed\\000HIDDEN'; echo oops >&2"})
    text = res["content"][0]["text"]
    check("tests passed\0HIDDEN\n--- stderr ---\noops" in text,
          "a NUL in stdout does not hide what follows it from the text: %r" % text[-80:])
    # one write of 9000 bytes, read by the daemon at once: one piece of
    # three-byte characters, whose first 4096 bytes end inside one
    s.send({"jsonrpc": "2.0", "id": "p", "method": "tools/call", "params": {
        "name": "exec", "_meta": {"progressToken": "t"}, "arguments": {
            "sandbox_id": sid, "argv": ["python3", "-c",
                                        "import os; os.write(1, '\u20ac'.encode() * 3000)"]}}})
    progress = []
    while True:
        m = s.recv()
        if m.get("id") == "p":
            break
        progress.append(m["params"]["message"])
    check(m["result"]["structuredContent"]["stdout"] == "\u20ac" * 3000, "the output is whole")
    check(progress and progress[0].startswith("stdout: \u20ac") and
          len(progress[0].encode()) <= 4096 + 8 and set(progress[0][8:]) == {"\u20ac"},
          "a piece cut to the progress bound is cut between characters: %r" %
          [p[:20] for p in progress])
    # output made to look like a JSON-RPC answer of ours, with terminal
    # escapes (OSC 52 would set the clipboard), bytes that are no UTF-8 and
    # U+2028: it stays inside the strings of the exec's answer and of its
    # progress, each one line with no raw control byte
    forged = ('\\n{"jsonrpc":"2.0","id":"forged","result":{"forged":1}}\\n'
              '\\x1b]52;c;ZXZpbA==\\x07\\x1b[2J\\xff\\xfe\\xe2\\x80\\xa8end\\r\\n')
    s.send({"jsonrpc": "2.0", "id": "f", "method": "tools/call", "params": {
        "name": "exec", "_meta": {"progressToken": "t"}, "arguments": {
            "sandbox_id": sid, "argv": ["python3", "-c",
                                        "import os; os.write(1, b'%s')" % forged]}}})
    msgs, raws = [], []
    for _ in range(100):    # bounded: the answer comes after its progress
        m = s.recv()
        msgs.append(m)
        raws.append(s.last_raw)
        if m.get("id") == "f":
            break
    out = m.get("result", {}).get("structuredContent", {}).get("stdout")
    check(out == ('\n{"jsonrpc":"2.0","id":"forged","result":{"forged":1}}\n'
                  '\x1b]52;c;ZXZpbA==\x07\x1b[2J\ufffd\ufffd\u2028end\r\n') and
          not any(x.get("id") == "forged" for x in msgs) and
          not any(c < 0x20 for r in raws for c in r),
          "output that looks like JSON-RPC, escapes, no UTF-8 stay inside the answer: %r" %
          (msgs[-1],))
    s.call("sandbox_destroy", {"sandbox_id": sid})


def big(s):
    """Reads of whole files at once take turns: the server's memory stays bounded."""
    s.request("initialize", {"protocolVersion": "2025-06-18"})
    sid = s.call("sandbox_create", {})["structuredContent"]["id"]
    s.call("exec", {"sandbox_id": sid, "command": "head -c 10000000 /dev/urandom > /tmp/big"})
    n = 6
    for k in range(n):
        s.send({"jsonrpc": "2.0", "id": "big%d" % k, "method": "tools/call", "params": {
            "name": "file_read", "arguments": {"sandbox_id": sid, "path": "/tmp/big"}}})
    sizes, hwm = big_lines(s, n)
    check(len(sizes) == n and min(sizes) > 13000000, "%d reads of 10 MB answered: %r" % (n, sizes))
    # one such answer costs the server about 100 MB; six at once were 570
    check(hwm < 400, "the server's peak memory is bounded: %d MB" % hwm)
    s.call("sandbox_destroy", {"sandbox_id": sid})


def big_lines(s, n):
    """The lengths of the server's next n lines, read without copying each
    whole (an answer can be a line of 27 MB), within 240 s; and the
    server's peak memory (VmHWM) in MB after them."""
    buf, sizes, deadline = s.buf, [], time.monotonic() + 240
    fd = s.p.stdout.fileno()
    while len(sizes) < n and time.monotonic() < deadline:
        r, _, _ = select.select([fd], [], [], 1)
        chunk = os.read(fd, 1 << 22) if r else b""
        if r and not chunk:
            break
        seen = len(buf)
        buf += chunk
        i = buf.find(b"\n", seen)
        while i >= 0:
            sizes.append(i)
            del buf[:i + 1]
            i = buf.find(b"\n")
    with open("/proc/%d/status" % s.p.pid) as f:
        hwm = [int(l.split()[1]) for l in f if l.startswith("VmHWM")][0] // 1024
    return sizes, hwm


def many(s):
    """Answers that hold much of a program's output take turns too: 16
    execs at once, each writing 256 KiB of \\x01 (six bytes each in JSON)
    to stdout and to stderr, are answered whole (6 MB each) without the
    server building all 16 at once."""
    s.request("initialize", {"protocolVersion": "2025-06-18"})
    sid = s.call("sandbox_create", {})["structuredContent"]["id"]
    n = 16
    cmd = ("sleep 1; head -c 262144 /dev/zero | tr '\\0' '\\1'; "
           "head -c 262144 /dev/zero | tr '\\0' '\\1' >&2")
    for k in range(n):
        s.send({"jsonrpc": "2.0", "id": "many%d" % k, "method": "tools/call", "params": {
            "name": "exec", "arguments": {"sandbox_id": sid, "command": cmd}}})
    sizes, hwm = big_lines(s, n)
    check(len(sizes) == n and min(sizes) > 6000000, "%d execs answered whole: %r" % (n, sizes))
    # 301 MB when all 16 were built at once (MCP_BIG_CALLS 32), 107-127
    # taking turns, ASan or not (what is left: each call's end line from
    # the daemon while it comes); 32 execs took twice the CPU to show it
    check(hwm < 210, "the server's peak memory is bounded: %d MB" % hwm)
    s.call("sandbox_destroy", {"sandbox_id": sid})


def records(s):
    """process_list's answer holds every record's argv, as the model gave
    it (56 KB each, six bytes a control character in JSON, twelve in the
    text): 8 lists at once of 20 processes take turns as whole files do,
    not all built at once."""
    s.request("initialize", {"protocolVersion": "2025-06-18"})
    sid = s.call("sandbox_create", {})["structuredContent"]["id"]
    arg = "\u0001" * 8000
    # 60 processes were 53 s of CPU on a pti=on guest (8 lists of 60 MB);
    # a third of them shows the same: the peak is about answers at once
    procs = 20
    for k in range(procs):
        res = s.call("exec", {"sandbox_id": sid, "argv": ["sleep", "600"] + [arg] * 7,
                              "background": True})
        check(res.get("structuredContent", {}).get("status") == "running",
              "a background process with a long argv: %.200r" % res)
    n = 8
    for k in range(n):
        s.send({"jsonrpc": "2.0", "id": "list%d" % k, "method": "tools/call", "params": {
            "name": "process_list", "arguments": {"sandbox_id": sid}}})
    sizes, hwm = big_lines(s, n)
    check(len(sizes) == n and min(sizes) > procs * 830000,
          "%d lists answered whole: %r" % (n, sizes))
    # 241-262 MB taking turns, 673 when all 8 were built at once (for 60
    # processes: 512-601 and 1378-1674, the bound 1000)
    check(hwm < procs * 22, "the server's peak memory is bounded (%d MB)" % hwm)
    s.call("sandbox_destroy", {"sandbox_id": sid})


def shared(s, other):
    """A shared daemon: another client's sandbox is not the model's."""
    s.request("initialize", {"protocolVersion": "2025-06-18"})
    mine = s.call("sandbox_create", {})["structuredContent"]["id"]
    res = s.call("sandbox_list", {})
    ids = [b["id"] for b in res["structuredContent"]["sandboxes"]]
    check(ids == [mine], "sandbox_list shows only this session's sandboxes: %r" % ids)
    for tool, args in (("exec", {"command": "echo reached"}), ("sandbox_info", {}),
                       ("file_read", {"path": "/etc/hostname"}), ("sandbox_events", {}),
                       ("workspace_export", {"mode": "apply"}), ("sandbox_destroy", {})):
        args = dict(args, sandbox_id=other)
        res = s.call(tool, args)
        check(res.get("isError") is True and "in this session" in res["content"][0]["text"],
              "%s on another client's sandbox is refused: %r" % (tool, res))
    res = s.call("exec", {"sandbox_id": mine, "command": "echo mine"})
    check(res["structuredContent"]["stdout"] == "mine\n", "its own sandbox still works")
    s.call("sandbox_destroy", {"sandbox_id": mine})


def sandboxes(s):
    """A model that makes sandboxes in a loop holds at most --max-sandboxes
    (16 by default) at once: each has the operator's limits, 1000 of them
    (the private daemon's cap, 60 a second) a thousand times its memory
    and pids.  A place comes back with a destroy or a TTL's end, and
    creates at once take one each, never all passing one count."""
    s.request("initialize", {"protocolVersion": "2025-06-18"})
    ids = []
    for _ in range(16):
        ids.append(s.call("sandbox_create", {})["structuredContent"]["id"])
    res = s.call("sandbox_create", {})
    check(res.get("isError") is True and "holds 16 sandboxes" in res["content"][0]["text"] and
          "--max-sandboxes 16" in res["content"][0]["text"],
          "the 17th create is refused, saying the limit: %.300r" % res)
    listed = s.call("sandbox_list", {})["structuredContent"]["sandboxes"]
    check(len(listed) == 16, "nothing was made for it: %d listed" % len(listed))
    for sid in ids[:2]:
        s.call("sandbox_destroy", {"sandbox_id": sid})
    ids = ids[2:]
    # 8 at once for the 2 places: each holds one while it is made
    for k in range(8):
        s.send({"jsonrpc": "2.0", "id": "at-once%d" % k, "method": "tools/call",
                "params": {"name": "sandbox_create", "arguments": {}}})
    made = []
    for _ in range(8):
        r = s.recv()
        check(str(r.get("id", "")).startswith("at-once") and "result" in r,
              "a create at once is answered: %.200r" % r)
        if not r["result"].get("isError"):
            made.append(r["result"]["structuredContent"]["id"])
    check(len(made) == 2, "8 creates at once for 2 places: %d made" % len(made))
    ids += made
    s.call("sandbox_destroy", {"sandbox_id": ids.pop(0)})
    res = s.call("sandbox_create", {"ttl_seconds": 1})
    check(not res.get("isError"), "a destroy gives the place back: %.200r" % res)
    # the daemon ends that one at its TTL, and the place is found free
    res = None
    for _ in range(60):     # bounded: 30 s, a TTL of 1 s
        res = s.call("sandbox_create", {})
        if not res.get("isError"):
            break
        time.sleep(0.5)
    check(not res.get("isError"), "a TTL's end gives the place back: %.200r" % res)
    ids.append(res["structuredContent"]["id"])
    for sid in ids:
        s.call("sandbox_destroy", {"sandbox_id": sid})


def answer(s, params):
    """A tools/call's answer, and the progressTokens of the notifications
    that came before it."""
    s.next_id += 1
    s.send({"jsonrpc": "2.0", "id": s.next_id, "method": "tools/call", "params": params})
    tokens = []
    for _ in range(100):    # bounded: the answer comes after its progress
        m = s.recv()
        if m.get("id") == s.next_id:
            return m, tokens
        tokens.append(m["params"]["progressToken"])
    raise AssertionError("no answer after 100 notifications")


def progress(s):
    """params._meta.progressToken is a string (at most 256 bytes) or an
    integer, as the spec and the TypeScript SDK type it: anything else is
    refused -32602 naming it, not echoed in every progress notification."""
    s.request("initialize", {"protocolVersion": "2025-06-18"})
    sid = s.call("sandbox_create", {})["structuredContent"]["id"]
    args = {"sandbox_id": sid, "command": "echo out"}
    for what, token in (("an object", {"a": [1] * 1000}), ("an array", [1, 2]),
                        ("a float", 1.5), ("a boolean", True), ("null", None),
                        ("a 257-byte string", "x" * 257),
                        ("a 1 MB string", "y" * (1 << 20))):
        r, echoed = answer(s, {"name": "exec", "arguments": args,
                               "_meta": {"progressToken": token}})
        err = r.get("error", {})
        check(err.get("code") == -32602 and "progressToken" in err.get("message", "") and
              len(err.get("message", "")) < 200 and not echoed,
              "a progressToken that is %s is refused -32602 naming it: %.200r, %d echoed" %
              (what, r, len(echoed)))
    r = s.request("tools/call", {"name": "exec", "arguments": args, "_meta": "t"})
    check(r.get("error", {}).get("code") == -32602 and "_meta" in r["error"]["message"],
          "a _meta that is no object is refused -32602: %r" % r)
    for what, token in (("a string", "tok-1"), ("an integer", 42),
                        ("a negative integer", -7), ("a 256-byte string", "z" * 256)):
        m, tokens = answer(s, {"name": "exec", "arguments": args,
                               "_meta": {"progressToken": token}})
        check("result" in m and m["result"]["structuredContent"]["stdout"] == "out\n" and
              tokens and all(t == token and type(t) is type(token) for t in tokens),
              "a progressToken that is %s is echoed as it came: %r" % (what, tokens[:3]))
    s.call("sandbox_destroy", {"sandbox_id": sid})


def flood(s):
    """A program that writes much, or a byte at a time, or bytes
    that JSON escapes six times over, does not decide how much the client
    reads: a call's progress carries at most the operator's limits.output
    (1 MiB by default; one notification more), then one notification says
    it stopped, and the result is whole as always."""
    s.request("initialize", {"protocolVersion": "2025-06-18"})
    sid = s.call("sandbox_create", {})["structuredContent"]["id"]
    bound = (1 << 20) + 64 * 1024
    for what, size, cmd in (
            ("40 MB at once", 40000000, "head -c 40000000 /dev/zero | tr '\\0' x"),
            ("1200000 writes of a byte", 1200000,
             "python3 -c 'import os\nfor i in range(1200000): os.write(1, b\"x\")'"),
            ("4 MB of \\x01", 4000000, "head -c 4000000 /dev/zero | tr '\\0' '\\1'")):
        s.next_id += 1
        s.send({"jsonrpc": "2.0", "id": s.next_id, "method": "tools/call",
                "params": {"name": "exec", "_meta": {"progressToken": "f"},
                           "arguments": {"sandbox_id": sid, "command": cmd}}})
        sent, count, last = 0, 0, ""
        for _ in range(2000000):    # bounded: without the bound, a million come
            m = s.recv()
            if m.get("id") == s.next_id:
                break
            sent += s.last_len
            count += 1
            last = m["params"]["message"]
        else:
            raise AssertionError("no answer after 2000000 notifications")
        res = m["result"]["structuredContent"]
        # the bytes a write come a few a read (how many is the scheduler's):
        # it may stay within the bound, and then it need not say so
        check(sent <= bound and ("no more output as progress" in last or
                                 (size == 1200000 and sent < 1200000)),
              "%s: at most %d bytes of progress, then said (%d bytes in %d, last %.80r)" %
              (what, bound, sent, count, last))
        check(res["status"] == "exited" and res["exit_code"] == 0 and
              len(res["stdout"]) == min(size, 1 << 20) and
              res["stdout_truncated"] is (size > 1 << 20),
              "%s: the result holds it, up to limits.output: %.200r" % (what, m))
    s.call("sandbox_destroy", {"sandbox_id": sid})


def daemon_get(sock, path):
    """GET path from the daemon at sock, over HTTP/1.0: its head, its body."""
    c = socket.socket(socket.AF_UNIX)
    c.settimeout(TIMEOUT)
    try:
        c.connect(sock)
        c.sendall(("GET %s HTTP/1.0\r\nHost: corral\r\n\r\n" % path).encode())
        data = b""
        while True:
            chunk = c.recv(65536)
            if not chunk:
                break
            data += chunk
    finally:
        c.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return head, body


def daemon_sandboxes(sock):
    """The ids of the sandboxes the daemon at sock has, asked over HTTP."""
    head, body = daemon_get(sock, "/v1/sandboxes")
    check(head.startswith(b"HTTP/1.1 200") or head.startswith(b"HTTP/1.0 200"),
          "the daemon lists its sandboxes: %r" % head[:80])
    return {b["id"] for b in json.loads(body)["sandboxes"]}


def daemon_events(sock, sid):
    """The audit lines of sandbox sid, from the daemon at sock."""
    return daemon_get(sock, "/v1/events?sandbox=%s" % sid)[1].decode(errors="replace")


def process_tree(pid):
    """pid and every descendant of it, as /proc says now."""
    kids = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            ppid = int(open("/proc/%s/stat" % d).read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        kids.setdefault(ppid, []).append(int(d))
    tree, todo = [], [pid]
    while todo:
        p = todo.pop()
        tree.append(p)
        todo.extend(kids.get(p, []))
    return tree


def reap(argv, how):
    """A session on a shared daemon ends (stdin's end, a signal, SIGKILL of
    its process group, a daemon that no longer answers): the sandboxes it
    made and did not destroy are removed, and only those: another
    client's, and another session's, are not."""
    sock = argv[argv.index("--socket") + 1]
    other = os.environ["MCP_OTHER"]
    # its own process group, as a harness may start it: killed as a group
    s = Server(argv[:1] + ["mcp"] + argv[1:], start_new_session=(how in ("KILL", "KILLTREE")))
    peer = Server(argv[:1] + ["mcp"] + argv[1:]) if how == "eof" else None
    try:
        s.request("initialize", {"protocolVersion": "2025-06-18"})
        mine = [s.call("sandbox_create", {})["structuredContent"]["id"] for _ in range(3)]
        res = s.call("sandbox_destroy", {"sandbox_id": mine[2]})
        check(not res.get("isError"), "the model destroys one itself: %r" % res)
        destroyed, mine = mine[2], mine[:2]
        theirs = None
        if peer:
            peer.request("initialize", {"protocolVersion": "2025-06-18"})
            theirs = peer.call("sandbox_create", {})["structuredContent"]["id"]
        listed = daemon_sandboxes(sock)
        check(set(mine) <= listed and other in listed and destroyed not in listed,
              "the daemon has the session's two and the other client's: %r" % listed)
        if how == "eof":
            s.p.stdin.close()
        elif how == "cancel-create":
            # a create cancelled while the daemon holds it (stopped): the
            # daemon makes the sandbox once it runs again, and the session
            # must know it to remove it
            dpid = int(os.environ["MCP_DAEMON_PID"])
            os.kill(dpid, signal.SIGSTOP)
            try:
                s.send({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                        "params": {"name": "sandbox_create", "arguments": {}}})
                time.sleep(0.5)
                s.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                        "params": {"requestId": 7, "reason": "test"}})
                time.sleep(0.5)
            finally:
                os.kill(dpid, signal.SIGCONT)
            s.p.stdin.close()
        elif how == "hung":
            os.kill(int(os.environ["MCP_DAEMON_PID"]), signal.SIGSTOP)
            s.p.stdin.close()
        elif how == "KILL":
            os.killpg(s.p.pid, signal.SIGKILL)
        elif how == "KILLTREE":
            # as a cgroup's kill or the OOM killer: the session and every
            # process it started (a reaper too), whatever their groups
            tree = process_tree(s.p.pid)
            for pid in tree:
                os.kill(pid, signal.SIGSTOP)
            for pid in tree:
                os.kill(pid, signal.SIGKILL)
        else:
            s.p.send_signal(getattr(signal, "SIG" + how))
        try:
            rc = s.p.wait(120 if how == "hung" else TIMEOUT)
        finally:
            if how == "hung":
                os.kill(int(os.environ["MCP_DAEMON_PID"]), signal.SIGCONT)
        killed = how in ("KILL", "KILLTREE")
        err = s.p.stderr.read().decode() if not killed else ""
        sys.stderr.write(err)
        if how == "hung":
            check(rc == 125, "a daemon that does not answer: the session still ends, "
                  "exit 125 (got %d)" % rc)
            for sid in mine:
                check("could not remove sandbox %s, made by this session" % sid in err,
                      "it names the sandbox it could not remove: %s" % sid)
            # one wait of 10 s for a silent daemon, not one for each sandbox
            check(err.count("had not answered the DELETE before") == len(mine) - 1,
                  "after one DELETE unanswered, the others are given 1 s each")
            # the daemon, answering again, may have done the DELETEs it had
            for sid in daemon_sandboxes(sock) & set(mine):
                subprocess.run([argv[0], "rm", "--socket", sock, sid], timeout=TIMEOUT,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            check(other in daemon_sandboxes(sock), "the other client's sandbox is there")
            return
        if not killed:
            check(rc == 0, "the session ends cleanly on %s (exit %d)" % (how, rc))
            listed = daemon_sandboxes(sock)
        else:
            # nobody waits for the reaper: it ends within MCP_REAP_SECONDS;
            # the daemon, told by the lease's end, at once
            deadline = time.monotonic() + (90 if how == "KILL" else 30)
            while True:
                listed = daemon_sandboxes(sock)
                if not set(mine) & listed or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
        check(not set(mine) & listed,
              "after %s the session's sandboxes are gone: %r" % (how, listed))
        made = listed - set(mine) - {other, theirs}
        check(not made, "no sandbox the session made is left: %r" % made)
        check(other in listed, "another client's sandbox is not touched: %r" % listed)
        if how == "KILLTREE":
            for sid in mine:
                check('"type":"lease.closed"' in daemon_events(sock, sid),
                      "the daemon says why %s went: its lease closed" % sid)
        if not killed:
            for sid in mine:
                check("removed sandbox %s" % sid in err, "it says it removed %s" % sid)
            check(destroyed not in err, "it says nothing of the one already destroyed")
        if peer:
            check(theirs in listed, "another session's sandbox is not touched: %r" % listed)
            rc, err = peer.close()
            check(rc == 0 and theirs not in daemon_sandboxes(sock),
                  "that session's end removes its own (exit %d)" % rc)
    except BaseException:
        for srv in (s, peer):
            if srv and srv.p.poll() is None:
                srv.p.kill()
                srv.p.wait()
        raise


def held_swap(s, workspace):
    """The model's workspace swapped for a link out of the operator's
    between the server's check and the daemon's open: the server is held
    by strace at its connect() for the create (after its check), the
    directory renamed away and a link to $OUTSIDE put in its place.  The
    sandbox gets the directory that was checked, or the create is refused;
    never what is outside the operator's workspace."""
    mine, outside = workspace + "/mine", os.environ["OUTSIDE"]
    s.request("initialize", {"protocolVersion": "2025-06-18"})
    log = os.environ["TMPDIR"] + "/strace.log"
    err = open(os.environ["TMPDIR"] + "/strace.err", "w+")
    # no -q: strace says "Process N attached" once it has stopped the
    # server to trace it; TracerPid is set a step before, while the server
    # still runs untraced and a connect() would go unseen
    tracer = subprocess.Popen(["strace", "-f", "-o", log, "-p", str(s.p.pid),
                               "-e", "trace=connect", "-e", "signal=SIGSTOP",
                               "-e", "inject=connect:signal=SIGSTOP:when=1"],
                              stderr=err)
    try:
        for _ in range(1200):    # bounded: attached, or refused
            err.seek(0)
            if "attached" in err.read() or tracer.poll() is not None:
                break
            time.sleep(0.05)
        else:
            raise AssertionError("strace never attached")
        err.seek(0)
        if "attached" not in err.read():
            err.seek(0)
            print("skip: strace cannot attach: " + err.read().strip())
            return 77
        s.send({"jsonrpc": "2.0", "id": "held", "method": "tools/call", "params": {
            "name": "sandbox_create", "arguments": {"workspace": mine}}})
        for _ in range(2400):    # bounded: held, or answered
            if os.path.exists(log) and "stopped by SIGSTOP" in open(log).read():
                break
            if select.select([s.p.stdout], [], [], 0.05)[0]:
                break
        check("stopped by SIGSTOP" in open(log).read(),
              "the server was held at its connect() for the create")
        os.rename(mine, mine + ".checked")
        os.symlink(outside, mine)
    finally:
        tracer.terminate()
        tracer.wait()
        err.close()
        os.kill(s.p.pid, signal.SIGCONT)
    r = s.recv()
    check(r.get("id") == "held" and "result" in r, "the create answered: %r" % r)
    res = r["result"]
    if res.get("isError"):
        check("not the directory the client checked" in res["content"][0]["text"] or
              "is not what was checked any more" in res["content"][0]["text"],
              "the swapped workspace is refused, saying why: %r" % res)
        return 0
    sid = res["structuredContent"]["id"]
    res = s.call("exec", {"sandbox_id": sid, "command": "cat /workspace/f"})
    check(res["structuredContent"]["stdout"] == "checked\n",
          "the sandbox has the workspace that was checked, not what is outside: %r" %
          res["structuredContent"]["stdout"])
    s.call("sandbox_destroy", {"sandbox_id": sid})
    return 0


def main():
    what, argv = sys.argv[1], sys.argv[2:]
    before = private_dirs()
    if what.startswith("reap-"):
        reap(argv, what[5:])
        print("mcp_raw %s: done" % what)
        return
    if what == "signal":
        s = Server(argv[:1] + ["mcp"] + argv[1:])
        s.request("initialize", {"protocolVersion": "2025-06-18"})
        sid = s.call("sandbox_create", {})["structuredContent"]["id"]
        s.call("exec", {"sandbox_id": sid, "command": "sleep 600", "background": True})
        s.p.send_signal(signal.SIGTERM)
        rc = s.p.wait(TIMEOUT)
        err = s.p.stderr.read().decode()
        sys.stderr.write(err)
        check(rc == 0, "SIGTERM ends the session cleanly (exit %d)" % rc)
    else:
        s = Server(argv[:1] + ["mcp"] + argv[1:])
        try:
            if what == "protocol":
                protocol(s)
            elif what == "output":
                output(s)
            elif what == "big":
                big(s)
            elif what == "many":
                many(s)
            elif what == "whole":
                whole(s)
            elif what == "progress":
                progress(s)
            elif what == "flood":
                flood(s)
            elif what == "sandboxes":
                sandboxes(s)
            elif what == "records":
                records(s)
            elif what == "transparent":
                transparent(s)
            elif what == "open_files":
                open_files(s)
            elif what == "shared":
                shared(s, os.environ["MCP_OTHER"])
            elif what == "swap":
                if held_swap(s, os.environ["MCP_WORKSPACE"]) == 77:
                    s.close()
                    sys.exit(77)
            else:
                bounds(s, os.environ["MCP_WORKSPACE"])
        except BaseException:
            s.p.terminate()     # SIGTERM: it stops its private daemon
            try:
                s.p.wait(TIMEOUT)
            except subprocess.TimeoutExpired:
                s.p.kill()
                s.p.wait()
            sys.stderr.write(s.p.stderr.read().decode())
            raise
        rc, err = s.close()
        check(rc == 0, "exit 0 at stdin's end (got %d)" % rc)
    if what != "signal":
        sys.stderr.write(err)
    pid = daemon_pid(err)
    if "--private" in argv or what == "signal":
        check(pid > 0, "a private daemon was started: " + err[:300])
        check(gone(pid), "the private daemon is gone with the session")
        check(private_dirs() == before, "its private directory is removed")
    print("mcp_raw %s: done" % what)


if __name__ == "__main__":
    main()
