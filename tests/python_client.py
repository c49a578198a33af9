#!/usr/bin/python3
"""python_client.py - clients/python (the `corral` package) against a real
daemon: tests/python_client.sh starts it and passes its socket (and a TCP
address and token file) in CORRAL_TEST_SOCKET, CORRAL_TEST_URL and
CORRAL_TEST_TOKEN_FILE.  unittest; the last line is "N passed, N failed"."""
import io
import os
import select
import sys
import tempfile
import time
import unittest

import corral
from corral.client import wait_until

SOCK = os.environ["CORRAL_TEST_SOCKET"]


class ClientTest(unittest.TestCase):
    def setUp(self):
        self.client = corral.Client(socket=SOCK)

    def tearDown(self):
        self.client.close()

    def test_health(self):
        self.assertEqual(self.client.health()["status"], "ok")

    def test_run_results(self):
        with self.client.create(labels={"who": "python"}) as sb:
            r = sb.run("echo hello")
            self.assertTrue(r.ok)
            self.assertEqual(r.stdout, "hello\n")
            r = sb.run(["/bin/sh", "-c", "echo no >&2; exit 3"])
            self.assertEqual((r.status, r.exit_code, r.stderr), ("exited", 3, "no\n"))
            self.assertFalse(r.ok)
            r = sb.run("cat; pwd", stdin="in\n", cwd="/tmp", env={"K": "V"})
            self.assertEqual(r.stdout, "in\n/tmp\n")
            r = sb.run("sleep 30", timeout=1)
            self.assertEqual(r.status, "timeout")
            self.assertIn(sb.id, [s.id for s in self.client.list()])

    def test_streaming_callbacks(self):
        out, err = [], []
        with self.client.create() as sb:
            r = sb.run("echo one; echo two >&2; sleep 1", on_stdout=out.append,
                       on_stderr=err.append)
            self.assertEqual(r.exit_code, 0)
            self.assertEqual("".join(out), "one\n")
            self.assertEqual("".join(err), "two\n")

    def test_files(self):
        with self.client.create() as sb:
            self.assertEqual(sb.files.write("/tmp/a.txt", "héllo")["size"], 6)
            sb.files.write("/tmp/b.bin", b"\x00\xff")
            self.assertEqual(sb.files.read_text("/tmp/a.txt"), "héllo")
            self.assertEqual(sb.files.read("/tmp/b.bin"), b"\x00\xff")
            names = sorted(e["name"] for e in sb.files.list("/tmp"))
            self.assertEqual(names, ["a.txt", "b.bin"])
            sb.files.delete("/tmp/a.txt")
            with self.assertRaises(corral.NotFound) as cm:
                sb.files.read("/tmp/a.txt")
            self.assertEqual(cm.exception.status, 404)
            self.assertEqual(cm.exception.code, "not_found")
            with self.assertRaises(corral.BadRequest):
                sb.files.read("relative")

    def test_background(self):
        with self.client.create() as sb:
            p = sb.start("echo started; sleep 300")
            self.assertGreater(p.pid, 0)
            self.assertIn(p.pid, [q.pid for q in sb.processes()])
            self.assertEqual(p.info()["state"], "running")
            rec = p.kill()
            self.assertEqual(rec["state"], "exited")
            q = sb.start(["sh", "-c", "exit 4"])
            r = q.wait(timeout=30)
            self.assertIsNotNone(r)
            self.assertEqual(r.exit_code, 4)

    def test_files_tree_and_archives(self):
        import io
        import tarfile
        with self.client.create() as sb:
            sb.files.write("/tmp/t/a/b.txt", "b", parents=True)
            sb.files.mkdir("/tmp/t/c", mode=0o700)
            sb.files.rename("/tmp/t/a/b.txt", "/tmp/t/c/b.txt")
            tree = [(e["name"], e["type"], e["mode"]) for e in sb.files.list("/tmp/t", recursive=True)]
            self.assertEqual(tree, [("a", "dir", "0755"), ("c", "dir", "0700"),
                                    ("c/b.txt", "file", "0644")])
            with self.assertRaises(corral.Conflict):
                sb.files.mkdir("/tmp/t/c")
            tar = sb.files.archive("/tmp/t")
            names = sorted(tarfile.open(fileobj=io.BytesIO(tar)).getnames())
            self.assertEqual(names, ["a", "c", "c/b.txt"])
            self.assertEqual(sb.files.unpack("/tmp/u", tar)["entries"], 3)
            self.assertEqual(sb.files.read_text("/tmp/u/c/b.txt"), "b")
            bad = io.BytesIO()
            with tarfile.open(fileobj=bad, mode="w") as t:
                i = tarfile.TarInfo("../escape")
                i.size = 1
                t.addfile(i, io.BytesIO(b"x"))
            with self.assertRaises(corral.Forbidden):
                sb.files.unpack("/tmp/v", bad.getvalue())

    def test_files_walk_pages(self):
        """A listing past its first page of 100,000: walk() gives every
        entry once, in order; page() the cursor; max_pages bounds it."""
        with self.client.create() as sb:
            r = sb.run("python3 -c \"import os\nos.mkdir('/tmp/w')\n"
                       "for i in range(100002): open('/tmp/w/%06d' % i, 'w').close()\"")
            self.assertEqual(r.exit_code, 0, r.stderr)
            first = sb.files.page("/tmp/w")
            self.assertTrue(first["truncated"])
            self.assertEqual(len(first["entries"]), 100000)
            second = sb.files.page("/tmp/w", cursor=first["next"])
            self.assertEqual([e["name"] for e in second["entries"]], ["100000", "100001"])
            self.assertFalse(second["truncated"])
            names = [e["name"] for e in sb.files.walk("/tmp/w")]
            self.assertEqual(names, ["%06d" % i for i in range(100002)])
            with self.assertRaises(corral.CorralError):
                list(sb.files.walk("/tmp/w", max_pages=1))
            with self.assertRaises(corral.BadRequest):
                sb.files.page("/tmp/w", recursive=True, cursor=first["next"])

    def test_process_stdin_signal_output(self):
        with self.client.create() as sb:
            p = sb.start("cat", stdin_open=True)
            p.write_stdin("one\n")
            p.write_stdin(b"two\n", eof=True)
            seen = []
            out = p.output(follow=True, on_stdout=seen.append)
            self.assertEqual(out["stdout"], "one\ntwo\n")
            self.assertEqual("".join(seen), "one\ntwo\n")
            self.assertEqual(out["next_offset"]["stdout"], 8)
            self.assertEqual(out["result"].exit_code, 0)
            self.assertEqual(p.output(offset=4, stream="stdout")["stdout"], "two\n")
            with self.assertRaises(corral.Conflict):
                p.write_stdin("late")
            q = sb.start('trap "exit 9" USR1; echo ready; while :; do sleep 0.05; done')
            wait_until(lambda: "ready" in q.info()["stdout"], 30)
            q.signal("USR1")
            self.assertEqual(q.wait(timeout=30).exit_code, 9)
            with self.assertRaises(corral.Conflict):
                q.signal("TERM")

    def test_keepalive_labels_diff_export(self):
        ws = os.path.join(os.environ.get("TMPDIR", "/tmp"), "py-ws-%d" % os.getpid())
        out = ws + ".patch"
        os.mkdir(ws)
        try:
            with open(os.path.join(ws, "a.txt"), "w") as f:
                f.write("a\n")
            with self.client.create(workspace=ws, ttl_seconds=600,
                                    labels={"suite": "py-%d" % os.getpid()}) as sb:
                self.assertTrue(sb.keepalive(3600)["expires_at"])
                self.assertEqual([s.id for s in self.client.list(
                    labels={"suite": "py-%d" % os.getpid()})], [sb.id])
                self.assertEqual(self.client.list(labels={"suite": "none"}), [])
                self.assertTrue(sb.run("echo new > /workspace/n.txt").ok)
                changes = {c["path"]: c["change"] for c in sb.diff()}
                self.assertEqual(changes, {"n.txt": "added"})
                self.assertIn("+++ b/n.txt", sb.diff(patch=True))
                rep = sb.export(patch=True)
                self.assertIn("n.txt", rep["patch"])
                with self.assertRaises(ValueError):
                    sb.export()
                # the patch as it comes, to a path (renamed on once whole) or a file
                with open(out, "w") as f:
                    f.write("before\n")
                got = sb.export(patch_to=out)
                self.assertNotIn("patch", got)
                self.assertEqual([e["path"] for e in got["exported"]], ["n.txt"])
                with open(out) as f:
                    self.assertEqual(f.read(), rep["patch"])
                buf = io.BytesIO()
                sb.export(patch_to=buf)
                self.assertEqual(buf.getvalue().decode(), rep["patch"])
                # refused (a halted sandbox exports nothing): the path as it was
                with open(out, "w") as f:
                    f.write("before\n")
                sb.halt("the test")
                with self.assertRaises(corral.Conflict):
                    sb.export(patch_to=out)
                with open(out) as f:
                    self.assertEqual(f.read(), "before\n")
                self.assertEqual([n for n in os.listdir(os.path.dirname(out))
                                  if n.startswith(os.path.basename(out) + ".")], [])
        finally:
            import shutil
            shutil.rmtree(ws)
            if os.path.exists(out):
                os.unlink(out)

    def test_patch_to_killed_leaves_nothing(self):
        # a client SIGKILLed while it writes the patch (its copy slowed, so
        # that it is midway): no handler runs, and the new file, unnamed
        # until whole (O_TMPFILE), goes with it; the path keeps what it had
        import signal
        import subprocess
        top = tempfile.mkdtemp(dir=os.environ.get("TMPDIR", "/tmp"))
        ws, out = os.path.join(top, "ws"), os.path.join(top, "p.diff")
        os.mkdir(ws)
        if os.getuid() == 0:
            os.chown(ws, 65534, 65534)
        with open(out, "w") as f:
            f.write("before\n")
        kid = None
        try:
            with self.client.create(workspace=ws) as sb:
                self.assertTrue(sb.run("head -c 4194304 /dev/urandom > /workspace/b.bin").ok)
                prog = """
import sys, time, corral
from corral.sandbox import Sandbox
copy = Sandbox._copy
def slow(self, resp, f):
    def read(n, r=resp.read):
        time.sleep(0.2)
        return r(n)
    class R: pass
    r = R(); r.read = read
    print("writing", flush=True)
    copy(self, r, f)
Sandbox._copy = slow
sb = corral.Client(socket=sys.argv[1]).sandbox(sys.argv[2])
sb.export(patch_to=sys.argv[3])
"""
                kid = subprocess.Popen([sys.executable, "-c", prog, SOCK, sb.id, out],
                                       stdout=subprocess.PIPE)
                ready, _, _ = select.select([kid.stdout], [], [], 60)
                self.assertTrue(ready, "the client never started its copy")
                self.assertEqual(kid.stdout.readline(), b"writing\n")
                deadline = time.monotonic() + 30
                held = ""
                while time.monotonic() < deadline and not held:
                    for fd in os.listdir("/proc/%d/fd" % kid.pid):
                        try:
                            t = os.readlink("/proc/%d/fd/%s" % (kid.pid, fd))
                        except OSError:
                            continue
                        if t.startswith(top + "/"):
                            held = t
                    time.sleep(0.02)
                self.assertTrue(held, "the client held no new file")
                kid.send_signal(signal.SIGKILL)
                self.assertEqual(kid.wait(60), -signal.SIGKILL)
                with open(out) as f:
                    self.assertEqual(f.read(), "before\n")
                self.assertEqual(sorted(os.listdir(top)), ["p.diff", "ws"])
        finally:
            if kid and kid.poll() is None:
                kid.kill()
                kid.wait()
            import shutil
            shutil.rmtree(top)

    def test_patch_to_not_through_a_bind_link(self):
        # the sandbox leaves share/sub -> a directory of the user's in its
        # --rw bind; patch_to= through it is refused, the directory empty
        top = tempfile.mkdtemp(dir=os.environ.get("TMPDIR", "/tmp"))
        os.chmod(top, 0o755)
        ws, share, victim = (os.path.join(top, n) for n in ("ws", "share", "victim"))
        try:
            for d in (ws, share, os.path.join(share, "real"), victim):
                os.mkdir(d)
            os.chmod(victim, 0o700)
            if os.getuid() == 0:
                os.chown(share, 65534, 65534)
            policy = {"filesystem": {"rw": ["%s:/share" % share]}}
            with self.client.create(workspace=ws, policy=policy) as sb:
                self.assertTrue(sb.run("echo new > /workspace/n.txt && "
                                       "ln -s %s /share/sub" % victim).ok)
                with self.assertRaises(PermissionError) as e:
                    sb.export(patch_to=os.path.join(share, "sub", "p.diff"))
                self.assertIn("lies in a --rw bind", str(e.exception))
                self.assertEqual(os.listdir(victim), [])
                sb.export(patch_to=os.path.join(share, "real", "p.diff"))
                with open(os.path.join(share, "real", "p.diff")) as f:
                    self.assertIn("+new", f.read())
        finally:
            import shutil
            shutil.rmtree(top)

    def test_pause_resume_halt(self):
        sb = self.client.create()
        try:
            try:
                self.assertEqual(sb.pause()["state"], "paused")
            except corral.NotSupported as e:
                # no freezer (unprivileged, no delegated cgroups): said so
                self.assertEqual(e.status, 501)
                self.assertIn("freez", e.detail)
            else:
                with self.assertRaises(corral.Conflict):
                    sb.run("true")
                self.assertNotEqual(sb.resume()["state"], "paused")
            self.assertTrue(sb.run("true").ok)
            self.assertEqual(sb.halt("enough")["state"], "halted")
            with self.assertRaises(corral.Conflict) as cm:
                sb.run("true")
            self.assertIn("enough", cm.exception.detail)
        finally:
            self.assertEqual(sb.destroy()["state"], "destroyed")
        with self.assertRaises(corral.NotFound):
            sb.info()

    def test_context_manager_destroys(self):
        with self.client.create() as sb:
            sid = sb.id
        self.assertNotIn(sid, [s.id for s in self.client.list()])
        with self.assertRaises(corral.NotFound):
            self.client.sandbox(sid).info()

    def alive(self, sid):
        return sid in [s.id for s in self.client.list()]

    def test_lease_ends_its_sandboxes(self):
        free = self.client.create()
        try:
            with self.client.lease() as lease:
                self.assertRegex(lease.id, r"^ls-[0-9a-f]{32}$")
                self.assertGreater(lease.max_sandboxes, 0)
                a = lease.create(labels={"who": "lease"})
                b = self.client.create(lease=lease)
                self.assertTrue(self.alive(a.id) and self.alive(b.id))
            self.assertTrue(lease.closed)
            self.assertTrue(wait_until(lambda: not self.alive(a.id) and not self.alive(b.id), 20),
                            "the lease's sandboxes outlived it")
            self.assertIn("lease.closed", [e["type"] for e in self.client.events(a.id)])
            self.assertTrue(self.alive(free.id), "a sandbox of no lease went with it")
        finally:
            free.destroy()

    def test_lease_of_a_killed_process(self):
        """The promise leases exist for: a process SIGKILLed holding one
        leaves nothing behind (no finally, no atexit runs in it)."""
        import signal
        import subprocess
        code = ("import corral, sys, time\n"
                "l = corral.Client(socket=sys.argv[1]).lease()\n"
                "print(l.create().id, flush=True)\n"
                "time.sleep(60)\n")
        p = subprocess.Popen([sys.executable, "-c", code, SOCK], stdout=subprocess.PIPE,
                             env=dict(os.environ))
        try:
            sid = p.stdout.readline().decode().strip()
            self.assertTrue(sid.startswith("sb-"), "no sandbox from the child: %r" % sid)
            self.assertTrue(self.alive(sid))
        finally:
            p.send_signal(signal.SIGKILL)
            p.wait()
            p.stdout.close()
        self.assertTrue(wait_until(lambda: not self.alive(sid), 20),
                        "a SIGKILLed lease holder's sandbox was left")

    def test_lease_refused(self):
        with self.assertRaises(corral.NotFound):
            self.client.create(lease="ls-" + "0" * 32)
        with self.assertRaises(corral.BadRequest):
            self.client.create(lease=7)
        url, tok = os.environ.get("CORRAL_TEST_URL"), os.environ.get("CORRAL_TEST_TOKEN_FILE")
        if not url:
            return
        # the TCP clients' lease is not the unix socket's user's to bind to
        with corral.Client(url=url, token_file=tok).lease() as theirs:
            with self.assertRaises(corral.Forbidden):
                self.client.create(lease=theirs)

    def kept(self, c):
        self.assertEqual(len(c._idle), 1, "no connection kept")
        return c._idle[0][0]

    def test_connection_kept(self):
        url, tok = os.environ.get("CORRAL_TEST_URL"), os.environ.get("CORRAL_TEST_TOKEN_FILE")
        for c in [self.client] + ([corral.Client(url=url, token_file=tok)] if url else []):
            c.health()
            first = self.kept(c)
            c.health()
            self.assertIs(self.kept(c), first, "a second connection for the next request")
            c.close()
            self.assertEqual(c._idle, [])

    def test_request_in_one_write(self):
        """A request's head and its body go to the daemon in one write:
        in two (http.client's way) they woke it twice on every call."""
        writes = []

        class Recorder:
            def __init__(self, sock):
                self._sock = sock

            def __getattr__(self, name):
                return getattr(self._sock, name)

            def sendall(self, data, *flags):
                writes.append(bytes(data))
                return self._sock.sendall(data, *flags)

        class Recording(corral.Client):
            def _connection(self, timeout):
                conn = super()._connection(timeout)
                connect = conn.connect

                def recorded():
                    connect()
                    conn.sock = Recorder(conn.sock)
                conn.connect = recorded
                return conn

        url, tok = os.environ.get("CORRAL_TEST_URL"), os.environ.get("CORRAL_TEST_TOKEN_FILE")
        clients = [Recording(socket=SOCK)]
        if url:
            clients.append(Recording(url=url, token_file=tok))
        if os.environ.get("CORRAL_TEST_HTTPS"):
            tls = os.environ["CORRAL_TEST_TLS"]
            clients.append(Recording(url=os.environ["CORRAL_TEST_HTTPS"], token_file=tok,
                                     ca_file=tls + "/ca.pem", cert_file=tls + "/client.pem",
                                     key_file=tls + "/client.key"))
        for c in clients:
            with c.create() as sb:
                del writes[:]
                self.assertEqual(sb.run(["true"]).exit_code, 0)
                self.assertEqual(sb.files.write("/tmp/one", "x" * 100)["size"], 100)
            c.close()
            posts = [w for w in writes if w.startswith((b"POST ", b"PUT "))]
            self.assertGreaterEqual(len(posts), 2, writes)
            for w in posts:
                head, sep, body = w.partition(b"\r\n\r\n")
                self.assertTrue(sep and body, "a request's head sent without its body: %r" % w)
            self.assertEqual(len(writes), len(posts) + 1,
                             "writes other than the requests and the DELETE: %r" % writes)

    def test_kept_connection_past_fd_1023(self):
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard != resource.RLIM_INFINITY and hard < 1100:
            self.skipTest("the open-files hard limit is %d" % hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1100), hard))
        fds = []
        try:
            while not fds or fds[-1] < 1030:
                fds.append(os.open("/dev/null", os.O_RDONLY))
            c = corral.Client(socket=SOCK)
            c.health()
            first = self.kept(c)
            self.assertGreater(first.sock.fileno(), 1023)
            c.health()
            self.assertIs(self.kept(c), first, "a connection past fd 1023 was not kept")
            c.close()
        finally:
            for fd in fds:
                os.close(fd)
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    def test_kept_connection_not_in_a_fork(self):
        self.client.health()
        pid = os.fork()
        if pid == 0:
            ok = self.client._kept() is None and self.client.health()["status"] == "ok"
            os._exit(0 if ok else 1)
        _, st = os.waitpid(pid, 0)
        self.assertEqual(os.waitstatus_to_exitcode(st), 0, "the fork took its parent's connection")
        self.assertEqual(self.client.health()["status"], "ok")

    def test_call_that_times_out_not_sent_again(self):
        """A timeout may be a call still running: never sent again."""
        with self.client.create() as sb:
            sb.run("true")
            slow = corral.Client(socket=SOCK, timeout=2)
            slow._idle = list(self.client._idle)
            self.client._idle = []
            with self.assertRaises(corral.ConnectionFailed):
                slow.call("POST", sb._path("/exec"), {"command": "echo x >> /tmp/n; sleep 5"})
            # a call sent again would have been sent before the raise
            self.assertTrue(wait_until(lambda: "/tmp/n" in [
                "/tmp/" + e["name"] for e in sb.files.list("/tmp")], 10), "the call never ran")
            time.sleep(0.5)
            self.assertEqual(sb.files.read_text("/tmp/n"), "x\n")

    def test_daemon_closed_kept_connection(self):
        """The daemon's --idle-timeout closes a kept connection: the next
        request goes on a new one, whether the close is seen before
        (readable while idle) or only when the request is sent."""
        import shutil
        import subprocess
        import tempfile
        d = tempfile.mkdtemp()
        sock = os.path.join(d, "s")
        p = subprocess.Popen([os.environ["CORRAL_TEST_BIN"], "serve", "--socket", sock,
                              "--state-dir", os.path.join(d, "state"), "--idle-timeout", "1"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            self.assertTrue(wait_until(lambda: os.path.exists(sock), 20), "no daemon")
            c = corral.Client(socket=sock)
            for blind in (False, True):
                c.health()
                conn = self.kept(c)
                self.assertTrue(wait_until(lambda: select.select([conn.sock], [], [], 0)[0], 10),
                                "the daemon did not close the idle connection")
                if blind:
                    # as if it closed between the look and the request
                    c._kept = lambda: c._idle.pop()[0] if c._idle else None
                self.assertEqual(c.health()["status"], "ok")
                self.assertIsNot(self.kept(c), conn)
        finally:
            p.terminate()
            p.wait()
            shutil.rmtree(d, ignore_errors=True)

    def https(self, **kw):
        tls = os.environ["CORRAL_TEST_TLS"]
        args = dict(url=os.environ["CORRAL_TEST_HTTPS"],
                    token_file=os.environ["CORRAL_TEST_TOKEN_FILE"],
                    ca_file=tls + "/ca.pem", cert_file=tls + "/client.pem",
                    key_file=tls + "/client.key")
        args.update(kw)
        return corral.Client(**args)

    def test_https_with_a_client_certificate(self):
        c = self.https()
        try:
            self.assertEqual(c.health()["status"], "ok")
            first = self.kept(c)
            with c.create() as sb:
                self.assertEqual(sb.run("echo tls").stdout, "tls\n")
            self.assertIs(self.kept(c), first, "a new handshake for each request")
            with c.lease() as lease:
                self.assertTrue(lease.id.startswith("ls-"))
        finally:
            c.close()

    def test_https_refusals(self):
        tls = os.environ["CORRAL_TEST_TLS"]
        url = os.environ["CORRAL_TEST_HTTPS"]
        for what, kw in [("the system's roots only", dict(ca_file=None)),
                         ("another CA", dict(ca_file=tls + "/other.pem")),
                         ("a name the certificate does not give",
                          dict(url=url.replace("127.0.0.1", "localhost"))),
                         ("no client certificate", dict(cert_file=None, key_file=None))]:
            with self.subTest(what):
                with self.assertRaises(corral.ConnectionFailed):
                    self.https(**kw).health()
        with self.assertRaises(ValueError):
            self.https(cert_file=None)
        with self.assertRaises(ValueError):
            corral.Client(url="http://127.0.0.1:1", token="t" * 20, ca_file=tls + "/ca.pem")

    def test_policy_error(self):
        with self.assertRaises(corral.PolicyRejected) as cm:
            self.client.create(policy={"limits": {"memory": "lots"}})
        self.assertEqual(cm.exception.status, 422)
        self.assertIn("limits.memory", cm.exception.detail)
        with self.assertRaises(corral.BadRequest):
            self.client.create(policy={"no_such_key": 1}, labels="x")

    def test_events(self):
        with self.client.create() as sb:
            sb.run("true")
            types = [e["type"] for e in sb.events()]
            self.assertIn("sandbox.create", types)
            self.assertIn("exec.end", types)

    def test_no_daemon(self):
        c = corral.Client(socket=SOCK + ".nothing")
        with self.assertRaises(corral.ConnectionFailed):
            c.health()

    def test_another_users_socket_refused(self):
        """A listener of another uid at the path gets no request."""
        import subprocess
        if os.geteuid() != 0:
            self.skipTest("only root can listen as another uid")
        d = tempfile.mkdtemp(prefix="corral-py-other.")
        os.chmod(d, 0o777)
        path, got = os.path.join(d, "s"), os.path.join(d, "got")
        prog = ("import os, select, socket, sys\n"
                "s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])\n"
                "os.chmod(sys.argv[1], 0o666); s.listen(1); n = 0\n"
                "if select.select([s], [], [], 20)[0]:\n"
                "    c, _ = s.accept()\n"
                "    if select.select([c], [], [], 3)[0]: n = len(c.recv(65536))\n"
                "open(sys.argv[2], 'w').write(str(n))\n")
        p = subprocess.Popen(["setpriv", "--reuid=4242", "--regid=4242", "--clear-groups",
                              sys.executable, "-c", prog, path, got])
        try:
            self.assertTrue(wait_until(lambda: os.path.exists(path), 10), "no listener")
            with self.assertRaises(corral.ConnectionFailed) as cm:
                corral.Client(socket=path).health()
            self.assertIn("is served by uid 4242", str(cm.exception))
            self.assertEqual(p.wait(30), 0)
            with open(got) as f:
                self.assertEqual(f.read(), "0")
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            for f in (path, got):
                if os.path.exists(f):
                    os.unlink(f)
            os.rmdir(d)

    def test_tcp_token(self):
        url, tok = os.environ.get("CORRAL_TEST_URL"), os.environ.get("CORRAL_TEST_TOKEN_FILE")
        if not url:
            self.skipTest("no TCP listener")
        c = corral.Client(url=url, token_file=tok)
        self.assertEqual(c.health()["status"], "ok")
        with c.create() as sb:
            self.assertEqual(sb.run("echo tcp").stdout, "tcp\n")
        bad = corral.Client(url=url, token="wrong-token-wrong-token")
        with self.assertRaises(corral.Unauthorized):
            bad.list()


if __name__ == "__main__":
    res = unittest.main(exit=False, verbosity=2).result
    failed = len(res.failures) + len(res.errors)
    print("python client: %d passed, %d failed" % (res.testsRun - failed, failed))
    sys.exit(1 if failed else 0)
