#!/usr/bin/python3
"""walks.py - the daemon's loop while a sandbox's tree is walked for
another client: an archive out (GET .../archive) and a recursive listing
(GET .../files?list=1&recursive=1) of a tree the sandbox chose, while a
second connection sends GET /v1/health every 2 ms.  Its longest wait is
what the walk held the one loop every sandbox is served from.

The trees: BENCH_WALK_FIFOS (default 240000) FIFOs in directories of
10000 (left out of an archive: no byte of it, so its size cap never stops
the walk), BENCH_WALK_FILES (default 100000) empty files likewise (a
listing's whole entry limit), and BENCH_WALK_FLAT (default 100000) empty
files in one directory, named by BENCH_WALK_FLAT_BYTES (default 250)
bytes that are not UTF-8 (six bytes each of the answer) and a number,
for a plain one-directory listing
(GET .../files?list=1).  BENCH_WALK_ONLY=WORD runs only the requests
whose name holds WORD.  BENCH_WALK_RUNS (default 5) requests of
each kind, one after the other; BENCH_AB=OTHER_CORRAL runs the same with
that binary too, alternating daemons run by run (this one first).  Its
own daemons in temporary directories, stopped by their pids.

    bench/walks.py CORRAL
"""
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

FIFOS = int(os.environ.get("BENCH_WALK_FIFOS", "240000"))
FILES = int(os.environ.get("BENCH_WALK_FILES", "100000"))
FLAT = int(os.environ.get("BENCH_WALK_FLAT", "100000"))
FLAT_BYTES = os.environ.get("BENCH_WALK_FLAT_BYTES", "250")
ONLY = os.environ.get("BENCH_WALK_ONLY", "")
RUNS = int(os.environ.get("BENCH_WALK_RUNS", "5"))


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=600)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(600)
        self.sock.connect(self.path)


def call(sock, method, path, body=None, conn=None):
    c = conn or UnixConnection(sock)
    c.request(method, path, body=None if body is None else json.dumps(body),
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    if conn is None:
        c.close()
    return r.status, data


class Daemon:
    def __init__(self, corral, tmp, name):
        self.dir = os.path.join(tmp, name)
        os.mkdir(self.dir)
        self.sock = os.path.join(self.dir, "s")
        self.log = open(os.path.join(self.dir, "log"), "w")
        self.proc = subprocess.Popen([corral, "serve", "--socket", self.sock,
                                      "--state-dir", os.path.join(self.dir, "state")],
                                     stdout=self.log, stderr=self.log,
                                     stdin=subprocess.DEVNULL)
        for _ in range(200):
            try:
                if call(self.sock, "GET", "/v1/health")[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.05)
        else:
            raise RuntimeError(f"daemon {name} did not start")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


MAKE = """import os, sys
top, n, kind = sys.argv[1], int(sys.argv[2]), sys.argv[3]
for i in range(n):
    d = "%s/%03d" % (top, i // 10000)
    if i % 10000 == 0:
        os.makedirs(d)
    p = "%s/%06d" % (d, i)
    if kind == "fifo":
        os.mkfifo(p)
    else:
        open(p, "w").close()
"""

FLAT_MAKE = """import os, sys
top, n, k = sys.argv[1].encode(), int(sys.argv[2]), int(sys.argv[3])
os.makedirs(top)
for i in range(n):
    open(top + b"/" + b"\\xff" * k + b"%05d" % i, "w").close()
"""


def sandbox(d):
    st, body = call(d.sock, "POST", "/v1/sandboxes", {"idle_freeze_ms": 0,
                                                       "policy": {"limits": {"disk": "4G"}}})
    if st != 201:
        raise RuntimeError(f"create: {st} {body[:300]}")
    sid = json.loads(body)["id"]
    for top, n, kind in (("/tmp/fifos", FIFOS, "fifo"), ("/tmp/files", FILES, "file")):
        st, body = call(d.sock, "POST", f"/v1/sandboxes/{sid}/exec",
                        {"argv": ["python3", "-c", MAKE, top, str(n), kind],
                         "timeout_seconds": 600})
        if st != 200 or json.loads(body)["exit_code"] != 0:
            raise RuntimeError(f"making {top}: {st} {body[:300]}")
    st, body = call(d.sock, "POST", f"/v1/sandboxes/{sid}/exec",
                    {"argv": ["python3", "-c", FLAT_MAKE, "/tmp/flat", str(FLAT), FLAT_BYTES],
                     "timeout_seconds": 600})
    if st != 200 or json.loads(body)["exit_code"] != 0:
        raise RuntimeError(f"making /tmp/flat: {st} {body[:300]}")
    return sid


def health_waits(sock, stop, waits):
    c = UnixConnection(sock)
    while not stop.is_set():
        t = time.monotonic()
        call(sock, "GET", "/v1/health", conn=c)
        waits.append(time.monotonic() - t)
        time.sleep(0.002)
    c.close()


def one(d, sid, path):
    stop, waits = threading.Event(), []
    th = threading.Thread(target=health_waits, args=(d.sock, stop, waits))
    th.start()
    time.sleep(0.05)
    t = time.monotonic()
    st, body = call(d.sock, "GET", f"/v1/sandboxes/{sid}{path}")
    took = time.monotonic() - t
    time.sleep(0.05)
    stop.set()
    th.join()
    return st, len(body), took * 1000, max(waits) * 1000


def main():
    corral = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build/corral")
    other = os.environ.get("BENCH_AB")
    bins = [("this", corral)] + ([("other", os.path.abspath(other))] if other else [])
    tmp = tempfile.mkdtemp(prefix="corral-walks.")
    os.chmod(tmp, 0o755)
    daemons = []
    paths = (("archive of FIFOs", "/archive?path=/tmp/fifos"),
             ("archive of empty files", "/archive?path=/tmp/files"),
             ("recursive listing", "/files?path=/tmp/files&list=1&recursive=1"),
             ("plain listing", "/files?path=/tmp/flat&list=1"))
    paths = tuple(p for p in paths if ONLY in p[0])
    try:
        sids = []
        for name, b in bins:
            daemons.append(Daemon(b, tmp, name))
            sids.append(sandbox(daemons[-1]))
        rows = {}
        for _ in range(RUNS):
            for (name, _), d, sid in zip(bins, daemons, sids):
                for what, path in paths:
                    rows.setdefault((name, what), []).append(one(d, sid, path))
        print(f"walks: {FIFOS} FIFOs, {FILES} empty files, {FLAT} in one directory; {RUNS} runs; "
              "the longest GET /v1/health wait meanwhile (ms), and the request's")
        for (name, what), rs in rows.items():
            waits = sorted(r[3] for r in rs)
            took = sorted(r[2] for r in rs)
            print(f"  {name:5} {what:24} status {rs[0][0]} {rs[0][1]:>10} bytes  "
                  f"health max median {waits[len(waits) // 2]:7.1f} "
                  f"[{waits[0]:.1f}..{waits[-1]:.1f}]  "
                  f"request median {took[len(took) // 2]:7.1f} [{took[0]:.1f}..{took[-1]:.1f}]")
        for (name, _), d in zip(bins, daemons):
            with open(f"/proc/{d.proc.pid}/status") as f:
                hwm = [l.split()[1] for l in f if l.startswith("VmHWM")][0]
            print(f"  {name:5} daemon's peak resident memory (VmHWM) {int(hwm) // 1024} MiB")
    finally:
        for d in daemons:
            d.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
