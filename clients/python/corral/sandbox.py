"""corral.sandbox - one sandbox of the daemon: run, files, processes, state."""
import json
import urllib.parse

from . import errors
from .client import wait_until


class Result(dict):
    """An exec's explained result (the daemon's object), with attributes for
    the common keys.  A command that failed is a Result, never an exception."""

    exit_code = property(lambda self: self.get("exit_code"))
    status = property(lambda self: self.get("status"))
    reason = property(lambda self: self.get("reason"))
    stdout = property(lambda self: self.get("stdout", ""))
    stderr = property(lambda self: self.get("stderr", ""))
    denials = property(lambda self: self.get("denials", []))

    @property
    def ok(self):
        return self.get("status") == "exited" and self.get("exit_code") == 0


def _exec_body(cmd, cwd, env, stdin, timeout, tool_call_id):
    body = {}
    if isinstance(cmd, str):
        body["command"] = cmd
    else:
        body["argv"] = list(cmd)
    for k, v in (("cwd", cwd), ("env", env), ("stdin", stdin),
                 ("timeout_seconds", timeout), ("tool_call_id", tool_call_id)):
        if v is not None:
            body[k] = v
    return body


class Process:
    """A background process (POST .../processes)."""

    def __init__(self, sandbox, pid, tool_call_id, result=None):
        self.sandbox = sandbox
        self.pid = pid
        self.tool_call_id = tool_call_id
        self.start_result = Result(result) if result else None

    def _path(self):
        return self.sandbox._path("/processes/%d" % self.pid)

    def info(self):
        """state, stdout/stderr so far (the last 64 KiB), result once ended."""
        return self.sandbox.client.call("GET", self._path())

    def kill(self):
        """Kill it and what it started; its record."""
        return self.sandbox.client.call("DELETE", self._path())

    def wait(self, timeout=60.0, interval=0.1):
        """Its Result once it ended; None when it still runs after timeout s."""
        info = wait_until(lambda: (lambda o: o if o.get("state") == "exited" else None)(
            self.info()), timeout, interval)
        return Result(info["result"]) if info else None


class Files:
    """A sandbox's files: absolute paths inside it."""

    def __init__(self, sandbox):
        self.sandbox = sandbox

    def _path(self, path, listing=False):
        q = "/files?path=" + urllib.parse.quote(path, safe="/")
        return self.sandbox._path(q + ("&list=1" if listing else ""))

    def write(self, path, data):
        """Create or replace a file; str is written as UTF-8."""
        if isinstance(data, str):
            data = data.encode()
        return json.loads(self.sandbox.client.request(
            "PUT", self._path(path), bytes(data), "application/octet-stream"))

    def read(self, path):
        return self.sandbox.client.request("GET", self._path(path))

    def read_text(self, path, encoding="utf-8"):
        return self.read(path).decode(encoding)

    def list(self, path):
        """The entries: name, type (file, dir, symlink, other), size, mode."""
        return self.sandbox.client.call("GET", self._path(path, True))["entries"]

    def delete(self, path):
        return self.sandbox.client.call("DELETE", self._path(path))


class Sandbox:
    """One sandbox; `with client.create() as sb:` destroys it on leaving."""

    def __init__(self, client, sandbox_id, info=None):
        self.client = client
        self.id = sandbox_id
        self.last_info = info
        self.files = Files(self)

    def __repr__(self):
        return "Sandbox(%r)" % self.id

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        try:
            self.destroy()
        except errors.NotFound:
            pass
        return False

    def _path(self, rest=""):
        return "/v1/sandboxes/" + urllib.parse.quote(self.id, safe="") + rest

    def info(self):
        self.last_info = self.client.call("GET", self._path())
        return self.last_info

    @property
    def state(self):
        return self.info()["state"]

    def run(self, cmd, cwd=None, env=None, stdin=None, timeout=None,
            on_stdout=None, on_stderr=None, tool_call_id=None):
        """Run cmd (a shell command line, or a list: argv) and wait for it.

        With on_stdout / on_stderr the output is streamed (NDJSON) and each
        is called with the text as it comes.  Returns the Result whatever
        the command did; raises only when the call could not be made."""
        body = _exec_body(cmd, cwd, env, stdin, timeout, tool_call_id)
        path = self._path("/exec")
        if not on_stdout and not on_stderr:
            return Result(self.client.call("POST", path, body))
        body["stream"] = True
        conn, resp = self.client.open("POST", path, json.dumps(body).encode())
        result = None
        try:
            for line in resp:
                if not line.strip():
                    continue
                ev = json.loads(line)
                kind = ev.get("type")
                if kind == "stdout" and on_stdout:
                    on_stdout(ev["data"])
                elif kind == "stderr" and on_stderr:
                    on_stderr(ev["data"])
                elif kind == "end":
                    result = ev["result"]
        except OSError as e:
            raise errors.ConnectionFailed("the daemon's stream broke off: %s" % e) from e
        finally:
            conn.close()
        if result is None:
            raise errors.ConnectionFailed("the daemon's stream ended without the result")
        return Result(result)

    def start(self, cmd, cwd=None, env=None, stdin=None, timeout=None,
              tool_call_id=None):
        """Start cmd in the background; its Process (pid 0 and start_result
        when it could not start)."""
        body = _exec_body(cmd, cwd, env, stdin, timeout, tool_call_id)
        o = self.client.call("POST", self._path("/processes"), body)
        return Process(self, o["pid"], o.get("tool_call_id"), o.get("result"))

    def processes(self):
        return [Process(self, o["pid"], o.get("tool_call_id"))
                for o in self.client.call("GET", self._path("/processes"))["processes"]]

    def pause(self):
        self.last_info = self.client.call("POST", self._path("/pause"))
        return self.last_info

    def resume(self):
        self.last_info = self.client.call("POST", self._path("/resume"))
        return self.last_info

    def halt(self, reason=None):
        body = {"reason": reason} if reason else {}
        self.last_info = self.client.call("POST", self._path("/halt"), body)
        return self.last_info

    def destroy(self):
        """Destroy it; the final {"id", "state": "destroyed", "meters"}."""
        return self.client.call("DELETE", self._path())

    def events(self):
        return self.client.events(self.id)
