"""corral.client - the daemon's API (docs/API.md) over http.client.

One connection a request: a Client may be shared by threads, and a streamed
exec holds its own connection for as long as the command runs.
"""
import http.client
import json
import os
import socket
import time
import urllib.parse

from . import errors

DEFAULT_TIMEOUT = 600.0     # seconds a request may wait for its answer


class UnixHTTPConnection(http.client.HTTPConnection):
    """http.client over a unix socket: the host is only the Host header."""

    def __init__(self, path, timeout=None):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if self.timeout is not None:
            s.settimeout(self.timeout)
        try:
            s.connect(self.unix_path)
        except OSError:
            s.close()
            raise
        self.sock = s


def default_socket():
    """Where `corral serve` listens when no option says: as docs/API.md."""
    env = os.environ.get("CORRAL_SOCKET")
    if env:
        return env
    if os.geteuid() == 0:
        return "/run/corral/corral.sock"
    run = os.environ.get("XDG_RUNTIME_DIR")
    if not run or not run.startswith("/"):
        raise errors.CorralError(
            "cannot tell where the daemon's socket is: XDG_RUNTIME_DIR is not set; "
            "pass socket= or set CORRAL_SOCKET")
    return os.path.join(run, "corral.sock")


class Client:
    """The daemon: socket= (default as the CLI finds it), or url= with
    token= / token_file= for TCP."""

    def __init__(self, socket=None, url=None, token=None, token_file=None,
                 timeout=DEFAULT_TIMEOUT):
        if url and socket:
            raise ValueError("socket and url exclude each other")
        if token_file:
            with open(token_file) as f:
                token = f.readline().strip()
        if url and not token:
            raise ValueError("over TCP the daemon needs its token: token= or token_file=")
        self.timeout = timeout
        self.token = token
        if url:
            u = urllib.parse.urlsplit(url)
            if u.scheme not in ("http", "https") or not u.hostname:
                raise ValueError("url: expected http://HOST:PORT (got %r)" % url)
            self.url = u
            self.socket = None
        else:
            self.url = None
            self.socket = socket or default_socket()

    # ---- transport -------------------------------------------------------

    def _connection(self, timeout):
        if self.socket:
            return UnixHTTPConnection(self.socket, timeout=timeout)
        cls = http.client.HTTPSConnection if self.url.scheme == "https" else \
            http.client.HTTPConnection
        return cls(self.url.hostname, self.url.port, timeout=timeout)

    def open(self, method, path, body=None, content_type=None, timeout=None):
        """Send a request; the open connection and its response (the caller
        closes the connection).  Error answers raise their exception."""
        headers = {}
        if self.token and not self.socket:
            headers["Authorization"] = "Bearer " + self.token
        if body is not None:
            headers["Content-Type"] = content_type or "application/json"
        conn = self._connection(self.timeout if timeout is None else timeout)
        try:
            conn.request(method, path, body=body, headers=headers)
            resp = conn.getresponse()
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            where = self.socket or self.url.geturl()
            raise errors.ConnectionFailed("cannot talk to the corral daemon at %s: %s"
                                          % (where, e)) from e
        if resp.status >= 300:
            data = resp.read()
            conn.close()
            raise errors.from_answer(resp.status, data)
        return conn, resp

    def request(self, method, path, body=None, content_type=None, timeout=None):
        """The whole answer's bytes."""
        conn, resp = self.open(method, path, body, content_type, timeout)
        try:
            return resp.read()
        except (OSError, http.client.HTTPException) as e:
            raise errors.ConnectionFailed("the daemon's answer broke off: %s" % e) from e
        finally:
            conn.close()

    def call(self, method, path, obj=None, timeout=None):
        """A JSON request and its JSON answer."""
        body = None if obj is None else json.dumps(obj).encode()
        data = self.request(method, path, body, "application/json", timeout)
        return json.loads(data) if data else None

    # ---- sandboxes -------------------------------------------------------

    def create(self, policy=None, workspace=None, ttl_seconds=None,
               idle_freeze_ms=None, labels=None, lease=None):
        """A new sandbox (POST /v1/sandboxes); a context manager that
        destroys it on leaving.  lease= (a Lease, or its id) binds it to
        that lease: it goes when the lease does."""
        from .sandbox import Sandbox
        body = {}
        if isinstance(lease, Lease):
            lease = lease.id
        for k, v in (("policy", policy), ("workspace", workspace),
                     ("ttl_seconds", ttl_seconds), ("idle_freeze_ms", idle_freeze_ms),
                     ("labels", labels), ("lease", lease)):
            if v is not None:
                body[k] = v
        info = self.call("POST", "/v1/sandboxes", body)
        return Sandbox(self, info["id"], info)

    def lease(self):
        """A lease (POST /v1/leases): the sandboxes created with it are
        destroyed by the daemon when it ends, at close(), on leaving a
        with-block, or when this process dies however it dies (the kernel
        closes its connection).  Over TCP, a peer gone without a word is
        found after the daemon's --lease-timeout."""
        return Lease(self)

    def sandbox(self, sandbox_id):
        """An existing sandbox by id (nothing is asked yet)."""
        from .sandbox import Sandbox
        return Sandbox(self, sandbox_id)

    def list(self, labels=None):
        """The sandboxes; labels={"k": "v"} keeps those with all of them
        (a value of None: the key present, whatever its value)."""
        from .sandbox import Sandbox
        path = "/v1/sandboxes"
        if labels:
            path += "?" + "&".join(
                "label=" + urllib.parse.quote(k if v is None else "%s=%s" % (k, v), safe="")
                for k, v in labels.items())
        return [Sandbox(self, o["id"], o)
                for o in self.call("GET", path)["sandboxes"]]

    def health(self):
        return self.call("GET", "/v1/health")

    def events(self, sandbox_id=None):
        """The audit log's events (of one sandbox), as dicts."""
        path = "/v1/events"
        if sandbox_id:
            path += "?sandbox=" + urllib.parse.quote(sandbox_id, safe="")
        data = self.request("GET", path)
        return [json.loads(line) for line in data.splitlines() if line.strip()]


class Lease:
    """An open lease: its connection is held, and read no more, until
    close().  create() makes a sandbox bound to it."""

    LINE_MAX = 4096     # the first line: {"lease": ..., "max_sandboxes": N}

    def __init__(self, client):
        self.client = client
        self._conn, resp = client.open("POST", "/v1/leases", b"", "application/json")
        try:
            line = resp.readline(self.LINE_MAX)
            info = json.loads(line)
            self.id = info["lease"]
        except (OSError, http.client.HTTPException, ValueError, KeyError, TypeError) as e:
            self._conn.close()
            raise errors.ConnectionFailed("the daemon's lease answer broke off or is "
                                          "not a lease: %s" % e) from e
        self.max_sandboxes = info.get("max_sandboxes")
        self._resp = resp

    def create(self, **kw):
        """A new sandbox bound to this lease (Client.create's arguments)."""
        return self.client.create(lease=self.id, **kw)

    @property
    def closed(self):
        return self._conn is None

    def close(self):
        """End the lease: the daemon destroys every sandbox still bound."""
        if self._conn is not None:
            self._conn.close()
            self._conn = self._resp = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        return "<corral.Lease %s%s>" % (self.id, " closed" if self.closed else "")


def wait_until(fn, timeout, interval=0.1):
    """fn() until it is true or timeout seconds passed; its last value."""
    end = time.monotonic() + timeout
    while True:
        v = fn()
        if v or time.monotonic() >= end:
            return v
        time.sleep(interval)
