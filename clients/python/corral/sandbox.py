"""corral.sandbox - one sandbox of the daemon: run, files, processes, state."""
import errno
import http.client
import json
import os
import stat
import urllib.parse

from . import errors


class Result(dict):
    """An exec's explained result (the daemon's object), with attributes for
    the common keys.  A command that failed is a Result, never an exception."""

    exit_code = property(lambda self: self.get("exit_code"))
    status = property(lambda self: self.get("status"))
    reason = property(lambda self: self.get("reason"))
    stdout = property(lambda self: self.get("stdout", ""))
    stderr = property(lambda self: self.get("stderr", ""))
    denials = property(lambda self: self.get("denials", []))
    # lines of the sandbox's record the daemon's audit log lost meanwhile
    events_lost = property(lambda self: self.get("events_lost", 0))

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


_LINKS_MAX = 40      # the kernel's own bound on a path's symlinks
_DEPTH_MAX = 4096


def _in_rw(rw, fd):
    """Whether the directory fd is, or lies below, one of rw's (dev, ino)."""
    cur = os.dup(fd)
    try:
        for _ in range(_DEPTH_MAX):
            st = os.fstat(cur)
            if (st.st_dev, st.st_ino) in rw:
                return True
            try:
                up = os.open("..", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=cur)
            except OSError:
                return True     # one that cannot be walked up is taken for the sandbox's
            os.close(cur)
            cur = up
            ust = os.fstat(cur)
            if (ust.st_dev, ust.st_ino) == (st.st_dev, st.st_ino):
                return False
        return True
    finally:
        os.close(cur)


def _judged_dir(rw, path):
    """The directory path names, opened (O_PATH) one component at a time,
    its symlinks followed as the kernel would, but none that lies in one of
    the sandbox's rw directories (rw_dirs): the sandbox may have left it
    there to lead our write into a directory of its choosing."""
    rest = [c for c in path.split("/")]
    cur = os.open("/" if path.startswith("/") else ".",
                  os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    links = 0
    try:
        while rest:
            comp = rest.pop(0)
            if comp in ("", "."):
                continue
            fd = os.open(comp, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=cur)
            if not stat.S_ISLNK(os.fstat(fd).st_mode):
                os.close(cur)
                cur = fd
                continue
            try:
                target = os.readlink("", dir_fd=fd)
            finally:
                os.close(fd)
            links += 1
            if links > _LINKS_MAX:
                raise OSError(40, "too many levels of symbolic links", path)
            if _in_rw(rw, cur):
                raise PermissionError(1, "the symlink %s on the way lies in a --rw "
                                      "bind, where the sandbox writes: refused, as it "
                                      "could lead the caller anywhere it may write or "
                                      "read (name what it points to)" % comp, path)
            rest = target.split("/") + rest
            if target.startswith("/"):
                os.close(cur)
                cur = os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        if not stat.S_ISDIR(os.fstat(cur).st_mode):
            raise NotADirectoryError(20, "not a directory", path)
        return cur
    except BaseException:
        os.close(cur)
        raise


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

    def wait(self, timeout=60.0):
        """Its Result once it ended; None when it still runs after timeout s
        (the daemon holds the request until then: no polling)."""
        info = self.sandbox.client.call(
            "GET", self._path() + "/wait?timeout_seconds=%g" % timeout,
            timeout=timeout + self.sandbox.client.timeout)
        return Result(info["result"]) if info.get("state") == "exited" else None

    def write_stdin(self, data, eof=False):
        """Give it more input (started with stdin_open=True); str as UTF-8.
        eof=True closes its stdin once written."""
        if isinstance(data, str):
            data = data.encode()
        return json.loads(self.sandbox.client.request(
            "POST", self._path() + "/stdin" + ("?eof=1" if eof else ""),
            bytes(data), "application/octet-stream"))

    def close_stdin(self):
        return self.write_stdin(b"", eof=True)

    def signal(self, sig):
        """Send a signal to it and all it started: "TERM", "SIGINT", 9 ..."""
        if not isinstance(sig, (str, int)):
            sig = int(sig)      # a signal.Signals member
        return self.sandbox.client.call("POST", self._path() + "/signal", {"signal": sig})

    def output(self, offset=0, stream=None, follow=False, on_stdout=None,
               on_stderr=None):
        """Its output from byte offset of each stream (stream: "stdout",
        "stderr" or both); with follow=True until it ends, each piece to
        on_stdout / on_stderr as it comes.  Returns a dict: "stdout",
        "stderr" (text from offset), "next_offset" {"stdout": N, "stderr": N},
        "dropped" (bytes from offset no longer kept), "result" (a Result
        once it ended, else None)."""
        q = "/output?offset=%d" % offset
        if stream:
            q += "&stream=" + stream
        if follow:
            q += "&follow=1"
        out = {"stdout": [], "stderr": [], "next_offset": {"stdout": offset, "stderr": offset},
               "dropped": 0, "result": None}
        calls = {"stdout": on_stdout, "stderr": on_stderr}
        conn, resp = self.sandbox.client.open("GET", self._path() + q, timeout=None)
        try:
            for line in resp:
                if not line.strip():
                    continue
                ev = json.loads(line)
                kind = ev.get("type")
                if kind in ("stdout", "stderr"):
                    out[kind].append(ev["data"])
                    out["next_offset"][kind] = ev["offset"] + len(ev["data"].encode())
                    if calls[kind]:
                        calls[kind](ev["data"])
                elif kind == "dropped":
                    out["dropped"] += ev["bytes"]
                elif kind == "end":
                    out["result"] = Result(ev["result"])
        except OSError as e:
            raise errors.ConnectionFailed("the daemon's stream broke off: %s" % e) from e
        finally:
            conn.close()
        out["stdout"] = "".join(out["stdout"])
        out["stderr"] = "".join(out["stderr"])
        return out


class Files:
    """A sandbox's files: absolute paths inside it."""

    def __init__(self, sandbox):
        self.sandbox = sandbox

    def _path(self, path, listing=False, route="/files"):
        q = route + "?path=" + urllib.parse.quote(path, safe="/")
        return self.sandbox._path(q + ("&list=1" if listing else ""))

    def write(self, path, data, parents=False):
        """Create or replace a file; str is written as UTF-8.  parents=True
        makes its missing directories first."""
        if isinstance(data, str):
            data = data.encode()
        return json.loads(self.sandbox.client.request(
            "PUT", self._path(path) + ("&parents=1" if parents else ""), bytes(data),
            "application/octet-stream"))

    def read(self, path):
        return self.sandbox.client.request("GET", self._path(path))

    def read_text(self, path, encoding="utf-8"):
        return self.read(path).decode(encoding)

    def list(self, path, recursive=False):
        """The entries: name (relative to path), type (file, dir, symlink,
        other), size, mode ("0644"), mtime, target (symlinks, not followed);
        recursive=True: the whole tree.  The first 100,000 only: walk() for
        all of them."""
        return self.sandbox.client.call(
            "GET", self._path(path, True) + ("&recursive=1" if recursive else ""))["entries"]

    def page(self, path, recursive=False, cursor=None):
        """One page of a listing: {"path", "entries", "truncated", "next"};
        "next" (when truncated) is the cursor of the page after.  A page
        holds at most 100,000 entries (docs/API.md)."""
        q = self._path(path, True) + ("&recursive=1" if recursive else "")
        if cursor:
            q += "&cursor=" + urllib.parse.quote(cursor, safe="")
        return self.sandbox.client.call("GET", q)

    def walk(self, path, recursive=False, max_pages=100):
        """Every entry, page after page (a generator): past max_pages pages
        (a tree still growing as it is read) it raises CorralError rather
        than page forever."""
        cursor = None
        for _ in range(max_pages):
            p = self.page(path, recursive, cursor)
            yield from p["entries"]
            cursor = p.get("next") if p.get("truncated") else None
            if not cursor:
                return
        raise errors.CorralError("the listing of %s has more than %d pages "
                                 "(max_pages)" % (path, max_pages))

    def mkdir(self, path, parents=False, mode=None):
        body = {"path": path, "parents": parents}
        if mode is not None:
            body["mode"] = mode if isinstance(mode, str) else "%04o" % mode
        return self.sandbox.client.call("POST", self.sandbox._path("/files/mkdir"), body)

    def rename(self, src, dst, overwrite=False):
        return self.sandbox.client.call("POST", self.sandbox._path("/files/rename"),
                                        {"from": src, "to": dst, "overwrite": overwrite})

    def archive(self, path):
        """The directory path as a tar archive (bytes)."""
        return self.sandbox.client.request("GET", self._path(path, route="/archive"))

    def unpack(self, path, tar):
        """A tar archive (bytes, plain or gzip'd) unpacked into path: its
        {"path", "entries", "bytes"}.  The daemon refuses a harmful archive
        whole (Forbidden, BadRequest, NoSpace)."""
        return json.loads(self.sandbox.client.request(
            "PUT", self._path(path, route="/archive"), bytes(tar), "application/x-tar"))

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
              tool_call_id=None, stdin_open=False):
        """Start cmd in the background; its Process (pid 0 and start_result
        when it could not start).  stdin_open=True keeps its stdin open for
        Process.write_stdin."""
        body = _exec_body(cmd, cwd, env, stdin, timeout, tool_call_id)
        if stdin_open:
            body["stdin_open"] = True
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

    def keepalive(self, ttl_seconds=None):
        """Restart its TTL from now (ttl_seconds: a new one, 0: none)."""
        body = {} if ttl_seconds is None else {"ttl_seconds": ttl_seconds}
        self.last_info = self.client.call("POST", self._path("/keepalive"), body)
        return self.last_info

    def diff(self, path=None, patch=False):
        """What it changed under its workspace: a list of changes, or with
        patch=True the git patch (text) of what an export lets out."""
        q = []
        if path:
            q.append("path=" + urllib.parse.quote(path, safe="/"))
        if patch:
            q.append("format=patch")
        data = self.client.request("GET", self._path("/diff") + ("?" + "&".join(q) if q else ""))
        return data.decode() if patch else json.loads(data)

    EXPORT_STREAM = "application/vnd.corral.export-patch"
    REPORT_MAX = 256 << 20      # the report's line, before the patch

    def export(self, to=None, apply=False, patch=False, allow_risky=None,
               patch_to=None):
        """Let its workspace changes out: to= a new host directory, apply=True
        onto the host workspace, patch=True (the patch in the report), or
        patch_to= a path or a binary file: the patch written there as it
        comes, never held whole (it may be as large as the policy's
        export.max_bytes), and the report without it.  A path is written
        beside itself, without a name until complete (O_TMPFILE; else
        PATH.corral-export.PID), and then takes the patch's name: a failed
        or killed export leaves it as it was."""
        if sum((to is not None, bool(apply), bool(patch), patch_to is not None)) != 1:
            raise ValueError("give exactly one of to=, apply=True, patch=True, patch_to=")
        body = {"to": to} if to is not None else {"apply": True} if apply else {"patch": True}
        if allow_risky:
            body["allow_risky"] = list(allow_risky)
        if patch_to is not None:
            return self._export_patch_to(body, patch_to)
        return self.client.call("POST", self._path("/export"), body)

    def _export_patch_to(self, body, dest):
        conn, resp = self.client.open("POST", self._path("/export"),
                                      json.dumps(body).encode(), "application/json",
                                      accept=self.EXPORT_STREAM)
        try:
            kind = (resp.getheader("Content-Type") or "").split(";")[0].strip().lower()
            if kind != self.EXPORT_STREAM:
                raise errors.ConnectionFailed("the daemon answered the patch export "
                                              "with %r, not the patch (is it older "
                                              "than this client?)" % kind)
            line = self._read(resp.readline, self.REPORT_MAX)
            if not line.endswith(b"\n"):
                raise errors.ConnectionFailed("the daemon's answer ended before its "
                                              "report did")
            report = json.loads(line)
            if isinstance(dest, (str, bytes, os.PathLike)):
                self._patch_to_path(resp, os.fsdecode(dest))
            else:
                self._copy(resp, dest)
            return report
        finally:
            conn.close()

    @staticmethod
    def _read(fn, n):
        try:
            return fn(n)
        except (OSError, http.client.HTTPException) as e:
            raise errors.ConnectionFailed("the daemon's answer broke off: %s" % e) from e

    def _copy(self, resp, f):
        while True:
            chunk = self._read(resp.read, 1 << 20)
            if not chunk:
                return
            f.write(chunk)

    def rw_dirs(self):
        """The directories its --rw binds share on the host, as (st_dev,
        st_ino) pairs: a symlink in them may be the sandbox's."""
        out = set()
        for s in self.info().get("rw_dirs") or []:
            dev, ino = s.split(":")
            out.add((int(dev), int(ino)))
        return out

    def _judged_parent(self, path):
        """path's directory, judged (_judged_dir), and its last name."""
        head, name = os.path.split(path)
        if name in ("", ".", ".."):
            raise ValueError("%r names no new file in a directory" % path)
        return _judged_dir(self.rw_dirs(), head or "."), name

    def _patch_to_path(self, resp, path):
        dirfd, name = self._judged_parent(path)
        tmp = "%s.corral-export.%d" % (name, os.getpid())
        named = False
        try:
            # unnamed while written: a SIGKILL midway leaves nothing
            try:
                fd = os.open(".", os.O_TMPFILE | os.O_WRONLY | os.O_CLOEXEC, 0o666,
                             dir_fd=dirfd)
            except OSError as e:
                if e.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
                    raise
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW |
                             os.O_CLOEXEC, 0o666, dir_fd=dirfd)
                named = True
            try:
                with os.fdopen(fd, "wb") as f:
                    self._copy(resp, f)
                    f.flush()
                    if not named:
                        os.link("/proc/self/fd/%d" % f.fileno(), tmp,
                                dst_dir_fd=dirfd, follow_symlinks=True)
                        named = True
                os.replace(tmp, name, src_dir_fd=dirfd, dst_dir_fd=dirfd)
            except BaseException:
                if named:
                    try:
                        os.unlink(tmp, dir_fd=dirfd)
                    except OSError:
                        pass
                raise
        finally:
            os.close(dirfd)

    def destroy(self):
        """Destroy it; the final {"id", "state": "destroyed", "meters"}."""
        return self.client.call("DELETE", self._path())

    def events(self):
        return self.client.events(self.id)
