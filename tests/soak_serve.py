#!/usr/bin/python3
"""soak_serve.py - create / exec / destroy through the daemon, many times
over, then count what could have leaked: the daemon's open fds and its
RSS, mounts, cgroups (v1 and v2), network namespaces, processes, files in
the state directory.  Equal counts and flat memory, or it fails and says
what grew.

    tests/soak_serve.py CORRAL [CYCLES]    (make soak: 10,000; check: 300)

Ends with a line "soak (daemon): N passed, N failed".
"""
import glob
import http.client
import json
import os
import signal
import shutil
import socket
import subprocess
import sys
import tempfile
import time

CORRAL = os.path.abspath(sys.argv[1])
CYCLES = int(sys.argv[2]) if len(sys.argv) > 2 else 10000
RSS_SLACK_KB = 4096	# malloc arenas settle; a leak per cycle would not


class UnixConn(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("corral", timeout=60)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


class Api:
    """One keep-alive connection, as a busy client would hold."""

    def __init__(self, path):
        self.path = path
        self.c = UnixConn(path)

    def __call__(self, method, url, body=None):
        for attempt in (0, 1):
            try:
                self.c.request(method, url, body=json.dumps(body) if body is not None else None)
                r = self.c.getresponse()
                data = r.read()
                return r.status, json.loads(data) if data else None
            except (http.client.HTTPException, OSError):
                self.c.close()
                self.c = UnixConn(self.path)
                if attempt:
                    raise
        return None, None


def count(pattern):
    return len(glob.glob(pattern))


MY_PIDNS = os.readlink("/proc/self/ns/pid")


def corral_processes(dpid):
    """corral's processes, as {pid: comm}, whatever else the host runs
    meanwhile: the daemon's descendants, those in a pid namespace not ours
    (a sandbox's, also one whose parent is gone) and those running CORRAL
    (a helper that outlived the daemon's tree).  Not every process: a
    shell and a sleep started beside the run made it fail (ci50).  One
    gone while it is read is skipped."""
    procs, parent = {}, {}
    for d in glob.glob("/proc/[0-9]*"):
        pid = int(d[6:])
        try:
            with open(d + "/stat") as f:
                st = f.read()
        except OSError:
            continue
        parent[pid] = int(st[st.rindex(")") + 2:].split()[1])
        procs[pid] = "%s (ppid %d)" % (st[st.index("(") + 1:st.rindex(")")], parent[pid])

    def ours(pid):
        up = pid
        for _ in range(64):	# a chain up to the daemon, pid 1 or a gone parent
            if up == dpid:
                return True
            up = parent.get(up, 0)
            if up <= 1:
                break
        try:
            return (os.readlink("/proc/%d/ns/pid" % pid) != MY_PIDNS
                    or os.readlink("/proc/%d/exe" % pid) == CORRAL)
        except OSError:
            return False

    return {pid: comm for pid, comm in procs.items() if ours(pid)}


def snapshot(dpid, state):
    netns = set()
    for p in glob.glob("/proc/[0-9]*/ns/net"):
        try:
            netns.add(os.readlink(p))
        except OSError:
            pass
    rss = 0
    with open("/proc/%d/status" % dpid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
    return {
        "daemon fds": count("/proc/%d/fd/*" % dpid),
        "mounts": len(open("/proc/self/mountinfo").read().splitlines()),
        "cgroups": len([d for d in glob.glob("/sys/fs/cgroup/*/corral*/corral-*")
                        + glob.glob("/sys/fs/cgroup/corral*/corral-*") if os.path.isdir(d)]),
        "network namespaces": len(netns),
        "processes": len(corral_processes(dpid)),
        "files in the state directory": sum(len(fs) for _, _, fs in os.walk(state)),
        "daemon RSS (kB)": rss,
    }


def main():
    tmp = tempfile.mkdtemp(prefix="corral-soak-serve.")
    sock = os.path.join(tmp, "sock")
    state = os.path.join(tmp, "state")
    d = subprocess.Popen([CORRAL, "serve", "--socket", sock, "--state-dir", state],
                         stderr=open(os.path.join(tmp, "log"), "w"))
    passed = failed = 0
    try:
        for _ in range(100):
            if os.path.exists(sock):
                break
            time.sleep(0.05)
        api = Api(sock)
        net = {"policy": {"network": {"mode": "proxy", "allow": ["soak.test:80"],
                                      "hosts": {"soak.test": "127.0.0.1"}}}}

        def cycle(i):
            body = dict(net) if i % 10 == 0 else {}
            body["idle_freeze_ms"] = 50 if i % 7 == 0 else 0
            st, sb = api("POST", "/v1/sandboxes", body)
            if st != 201:
                return "create: %s %s" % (st, sb)
            sid = sb["id"]
            errs = []
            if i % 7 == 0:
                time.sleep(0.15)	# idle-frozen, then thawed by the exec
            call = {"argv": ["/bin/sh", "-c", "echo $0", str(i)]}
            if i % 5 == 0:
                call = {"command": "sleep 5", "timeout_seconds": 0.1}
            st, res = api("POST", "/v1/sandboxes/%s/exec" % sid, call)
            want = "timeout" if i % 5 == 0 else "exited"
            if st != 200 or res.get("status") != want:
                errs.append("exec: %s %s" % (st, str(res)[:200]))
            if i % 3 == 0:
                st, _ = api("POST", "/v1/sandboxes/%s/processes" % sid, {"argv": ["sleep", "60"]})
                if st != 201:
                    errs.append("process: %s" % st)
            st, _ = api("DELETE", "/v1/sandboxes/" + sid)
            if st != 200:
                errs.append("destroy: %s" % st)
            return "; ".join(errs)

        for i in range(3):	# warm-up: what the kernel and malloc keep
            cycle(i + 1)
        time.sleep(1)
        before = snapshot(d.pid, state)
        procs_before = corral_processes(d.pid)
        t0 = time.monotonic()
        bad = 0
        for i in range(CYCLES):
            why = cycle(i)
            if why:
                bad += 1
                print("cycle %d: %s" % (i, why))
                if bad > 5:
                    break
        wall = time.monotonic() - t0
        after = {}
        for _ in range(40):	# namespaces are freed by the kernel a little later
            after = snapshot(d.pid, state)
            if all(after[k] <= before[k] for k in before if "RSS" not in k):
                break
            time.sleep(0.25)
        print("%d cycles through the daemon in %.1f s (%.1f ms a cycle), %d failed"
              % (CYCLES, wall, wall * 1000 / max(CYCLES, 1), bad))
        if bad == 0:
            passed += 1
        else:
            failed += 1
        for k in before:
            slack = RSS_SLACK_KB if "RSS" in k else (2 if k == "processes" else 0)
            ok = after[k] <= before[k] + slack
            print("%s - %s: %d before, %d after" % ("ok" if ok else "not ok", k, before[k],
                                                    after[k]))
            passed += ok
            failed += not ok
            if not ok and k == "processes":
                now = corral_processes(d.pid)
                for pid in sorted(set(now) - set(procs_before)):
                    print("#   new since the start: %d %s" % (pid, now[pid]))
    finally:
        d.send_signal(signal.SIGTERM)
        try:
            rc = d.wait(60)
        except subprocess.TimeoutExpired:
            d.kill()
            rc = d.wait()
        if rc != 0:
            failed += 1
            print("not ok - the daemon exited %s:\n%s" % (rc, open(os.path.join(tmp, "log")).read()[-2000:]))
        shutil.rmtree(tmp, ignore_errors=True)
    print("soak (daemon): %d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


main()
