"""corral.client - the daemon's API (docs/API.md) over http.client.

A Client may be shared by threads.  A request whose answer is read whole
leaves its connection to a few kept for the next (over TLS a new one is a
handshake, ~2-3 ms); a streamed exec holds its own connection for as long
as the command runs.
"""
import http.client
import json
import os
import select
import socket
import ssl
import struct
import threading
import time
import urllib.parse

from . import errors

DEFAULT_TIMEOUT = 600.0     # seconds a request may wait for its answer
KEEP_MAX = 4                # idle connections kept: a TCP peer has 32 at most
KEEP_IDLE = 30.0            # seconds one is kept (the daemon closes at 60)
# A 503 that says Retry-After was refused before anything was done (the
# daemon's workers, or the memory for answers, all taken): asked again at
# most BUSY_TRIES times in all, waiting as it says, within BUSY_TIME seconds
BUSY_TRIES = 5
BUSY_TIME = 30.0


# A request's head and a body of at most this many bytes go in one write.
# http.client sends them in two, and a daemon woken by the head alone reads
# it, finds no body and sleeps, to be woken again by the body: a wakeup
# more on every call's path, tens of us where the daemon's CPU was idle
# (a paced agent's calls).  The CLI sends them together too (sockhttp.c).
ONE_WRITE_MAX = 64 * 1024


class _OneWrite:
    """An http.client connection that holds a request's head back until
    its body (bytes, at most ONE_WRITE_MAX) comes, and sends both at once."""
    _held = False
    _head = None

    def request(self, method, url, body=None, headers=None, **kw):
        self._held = isinstance(body, (bytes, bytearray)) and 0 < len(body) <= ONE_WRITE_MAX
        self._head = None
        try:
            super().request(method, url, body=body, headers=headers or {}, **kw)
        except BaseException:
            self._held, self._head = False, None
            raise
        head, self._held, self._head = self._head, False, None
        if head is not None:
            # no body came after it (http.client sends one): the head alone
            super().send(head)

    def send(self, data):
        if self._held:
            if self._head is None:
                self._head = bytes(data)
                return
            data, self._held, self._head = self._head + bytes(data), False, None
        super().send(data)


class HTTPConnection(_OneWrite, http.client.HTTPConnection):
    """http.client's, a request in one write."""


class HTTPSConnection(_OneWrite, http.client.HTTPSConnection):
    """http.client's, a request in one write (one TLS record)."""


class UnixHTTPConnection(_OneWrite, http.client.HTTPConnection):
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
            _, uid, _ = struct.unpack("3i", s.getsockopt(
                socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
        except OSError:
            s.close()
            raise
        # the daemon's socket is its user's (0600): another user's listener
        # at this path would get every command and file, and answer at will
        if uid not in (os.geteuid(), 0):
            s.close()
            raise errors.ConnectionFailed(
                "the socket at %s is served by uid %d, not by you (uid %d) or root: "
                "refusing to send it anything" % (self.unix_path, uid, os.geteuid()))
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


def _readable(sock):
    """Something to read, an end or an error on an idle socket (poll(2):
    select(2) fails on an fd past 1023)."""
    p = select.poll()
    p.register(sock, select.POLLIN)
    return bool(p.poll(0))


class Client:
    """The daemon: socket= (default as the CLI finds it), or url= with
    token= / token_file= for TCP.  Over https, ca_file= names the PEM
    certificates to trust (else the system's), and cert_file= / key_file=
    the client's own, for a daemon run with --tls-client-ca."""

    def __init__(self, socket=None, url=None, token=None, token_file=None,
                 timeout=DEFAULT_TIMEOUT, ca_file=None, cert_file=None, key_file=None):
        if url and socket:
            raise ValueError("socket and url exclude each other")
        if token_file:
            with open(token_file) as f:
                token = f.readline().strip()
        if url and not token:
            raise ValueError("over TCP the daemon needs its token: token= or token_file=")
        self.tls = None
        self.timeout = timeout
        self.token = token
        self._lock = threading.Lock()
        self._idle = []         # (connection, when it was left)
        self._pid = os.getpid()
        if url:
            u = urllib.parse.urlsplit(url)
            if u.scheme not in ("http", "https") or not u.hostname:
                raise ValueError("url: expected http://HOST:PORT (got %r)" % url)
            self.url = u
            self.socket = None
            if u.scheme != "https" and (ca_file or cert_file or key_file):
                raise ValueError("ca_file, cert_file and key_file are for https:// (got %r)" % url)
            if bool(cert_file) != bool(key_file):
                raise ValueError("cert_file and key_file go together")
            if u.scheme == "https":
                # the system's defaults: a verified chain naming the host, TLS 1.2+
                self.tls = ssl.create_default_context(cafile=ca_file)
                if cert_file:
                    self.tls.load_cert_chain(cert_file, key_file)
        else:
            self.url = None
            self.socket = socket or default_socket()

    # ---- transport -------------------------------------------------------

    def _connection(self, timeout):
        if self.socket:
            return UnixHTTPConnection(self.socket, timeout=timeout)
        if self.url.scheme == "https":
            return HTTPSConnection(self.url.hostname, self.url.port,
                                   timeout=timeout, context=self.tls)
        return HTTPConnection(self.url.hostname, self.url.port, timeout=timeout)

    def _kept(self):
        """An idle connection left by an earlier request, still good, or None.
        Not one the daemon has closed (--idle-timeout; readable while idle
        means its end or garbage), nor one of the process this was forked
        from (two processes on one connection would mix their answers)."""
        with self._lock:
            if self._pid != os.getpid():
                # the parent's: closing this process's fds leaves its
                # connections open (and TLS sends no close_notify here)
                for conn, _ in self._idle:
                    conn.close()
                self._idle, self._pid = [], os.getpid()
            while self._idle:
                conn, at = self._idle.pop()
                try:
                    fresh = (time.monotonic() - at < KEEP_IDLE and conn.sock is not None
                             and not _readable(conn.sock))
                except (OSError, ValueError):
                    fresh = False
                if fresh:
                    return conn
                conn.close()
        return None

    def _leave(self, conn):
        with self._lock:
            if self._pid == os.getpid() and len(self._idle) < KEEP_MAX:
                self._idle.append((conn, time.monotonic()))
                return
        conn.close()

    def open(self, method, path, body=None, content_type=None, timeout=None,
             kept=False, accept=None):
        """Send a request; the open connection and its response (the caller
        closes the connection).  Error answers raise their exception.
        kept: an idle kept connection may carry it.  accept: the media type
        asked for, where the daemon has more than one."""
        headers = {}
        if accept:
            headers["Accept"] = accept
        if self.token and not self.socket:
            headers["Authorization"] = "Bearer " + self.token
        if body is not None:
            headers["Content-Type"] = content_type or "application/json"
        t = self.timeout if timeout is None else timeout
        conn = self._kept() if kept else None
        if conn is not None:
            conn.sock.settimeout(t)
            try:
                conn.request(method, path, body=body, headers=headers)
                resp = conn.getresponse()
            except (ConnectionError, ssl.SSLEOFError, ssl.SSLZeroReturnError):
                # the daemon closed it as it was taken (its idle timeout),
                # with the request unread: sent again on a new one.  Not
                # after a timeout, which may be a call still running.
                conn.close()
                conn = None
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                where = self.socket or self.url.geturl()
                raise errors.ConnectionFailed("cannot talk to the corral daemon at %s: %s"
                                              % (where, e)) from e
        if conn is None:
            conn = self._connection(t)
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
            raise errors.from_answer(resp.status, data, resp.getheader("Retry-After"))
        return conn, resp

    def _busy_wait(self, e, tries, deadline):
        """Whether e (an error answer) is a 503 worth asking again, after
        its Retry-After (slept here); not when that is past deadline."""
        wait = getattr(e, "retry_after", None)
        if e.status != 503 or wait is None or tries >= BUSY_TRIES:
            return False
        if time.monotonic() + wait > deadline:
            return False
        time.sleep(wait)
        return True

    def open_retried(self, method, path, body=None, content_type=None, timeout=None,
                     kept=False, accept=None):
        """open(), asked again after a 503 that says Retry-After (BUSY_TRIES,
        BUSY_TIME): the daemon did nothing of that request."""
        tries, deadline = 1, time.monotonic() + BUSY_TIME
        while True:
            try:
                return self.open(method, path, body, content_type, timeout, kept, accept)
            except errors.Busy as e:
                if not self._busy_wait(e, tries, deadline):
                    raise
                tries += 1

    def request(self, method, path, body=None, content_type=None, timeout=None):
        """The whole answer's bytes."""
        conn, resp = self.open_retried(method, path, body, content_type, timeout, kept=True)
        try:
            data = resp.read()
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise errors.ConnectionFailed("the daemon's answer broke off: %s" % e) from e
        if resp.will_close:
            conn.close()
        else:
            self._leave(conn)
        return data

    def close(self):
        """Close the kept connections (they close when the Client is collected too)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for conn, _ in idle:
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
