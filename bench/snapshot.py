#!/usr/bin/python3
"""snapshot.py - `make bench`, the snapshot row: how long POST .../snapshot
and a fork (POST /v1/sandboxes {"from_snapshot"}) take for a workspace in
which the agent wrote 10,000 small files, beside a plain create of the same
workspace.  Its own daemon in a temporary directory, stopped by its pid.

    bench/snapshot.py CORRAL      (BENCH_SNAP_FILES, BENCH_SNAP_RUNS)
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
import time

FILES = int(os.environ.get("BENCH_SNAP_FILES", "10000"))
RUNS = int(os.environ.get("BENCH_SNAP_RUNS", "5"))


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=300)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(300)
        self.sock.connect(self.path)


def call(sock, method, path, body=None):
    c = UnixConnection(sock)
    c.request(method, path, body=None if body is None else json.dumps(body),
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, json.loads(data) if data else None


def timed(fn):
    t = time.monotonic()
    out = fn()
    return (time.monotonic() - t) * 1000, out


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if xs else float("nan")


def main():
    corral = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build/corral")
    tmp = tempfile.mkdtemp(prefix="corral-bench-snap.")
    os.chmod(tmp, 0o755)
    ws = os.path.join(tmp, "ws")
    os.mkdir(ws)
    with open(os.path.join(ws, "README"), "w") as f:
        f.write("bench\n")
    if os.geteuid() == 0:
        for p in (ws, os.path.join(ws, "README")):
            os.chown(p, 65534, 65534)
    sock = os.path.join(tmp, "s")
    d = subprocess.Popen([corral, "serve", "--socket", sock, "--state-dir",
                          os.path.join(tmp, "state"), "--snapshot-budget", "8G"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    made = []
    try:
        for _ in range(200):
            if os.path.exists(sock):
                break
            time.sleep(0.05)
        body = {"workspace": ws, "idle_freeze_ms": 0, "policy": {"limits": {"disk": "1G"}}}
        st, sb = call(sock, "POST", "/v1/sandboxes", body)
        assert st == 201, sb
        made.append(sb["id"])
        script = ("i=0; mkdir -p src; while [ $i -lt %d ]; do echo \"file $i\" > src/f$i.txt; "
                  "i=$((i+1)); done" % FILES)
        st, res = call(sock, "POST", "/v1/sandboxes/%s/exec" % sb["id"],
                       {"argv": ["/bin/sh", "-c", script], "cwd": "/workspace",
                        "timeout_seconds": 600})
        assert st == 200 and res["exit_code"] == 0, res
        snaps, forks, plain = [], [], []
        snap_ids = []
        for _ in range(RUNS):
            ms, (st, s) = timed(lambda: call(sock, "POST", "/v1/sandboxes/%s/snapshot" % sb["id"]))
            assert st == 201, s
            snaps.append(ms)
            snap_ids.append(s["id"])
        frozen = s["frozen"]
        for _ in range(RUNS):
            ms, (st, f) = timed(lambda: call(sock, "POST", "/v1/sandboxes",
                                             {"from_snapshot": snap_ids[0], "idle_freeze_ms": 0,
                                              "policy": body["policy"]}))
            assert st == 201, f
            forks.append(ms)
            call(sock, "DELETE", "/v1/sandboxes/%s" % f["id"])
        for _ in range(RUNS):
            ms, (st, p) = timed(lambda: call(sock, "POST", "/v1/sandboxes", body))
            assert st == 201, p
            plain.append(ms)
            call(sock, "DELETE", "/v1/sandboxes/%s" % p["id"])
        for i in snap_ids:
            call(sock, "DELETE", "/v1/snapshots/%s" % i)
        W = 58
        print()
        print("5. snapshots: %d small files the agent wrote, %d runs each (uid %d%s)"
              % (FILES, RUNS, os.geteuid(), "" if frozen else "; no freezer: copied running"))
        print(f"{'':{W}} {'median ms':>10} {'max ms':>9}")
        print(f"{'POST .../snapshot (freeze, copy the upper, thaw)':{W}} {median(snaps):10.1f} {max(snaps):9.1f}")
        print(f"{'fork: POST /v1/sandboxes from_snapshot (copy in)':{W}} {median(forks):10.1f} {max(forks):9.1f}")
        print(f"{'  a plain create of the same workspace':{W}} {median(plain):10.1f} {max(plain):9.1f}")
    finally:
        for i in made:
            try:
                call(sock, "DELETE", "/v1/sandboxes/%s" % i)
            except OSError:
                pass
        d.send_signal(signal.SIGTERM)
        try:
            d.wait(timeout=30)
        except subprocess.TimeoutExpired:
            d.kill()
            d.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
