#!/usr/bin/python3
"""tls.py - terminated TLS against the tunnel, side by side.

An HTTPS upstream runs in this process on 127.0.0.1 (threads, HTTP/1.1
keep-alive, a certificate from a CA this script makes with openssl).  The
same client runs three times inside `corral run`, through the proxy's
CONNECT to bench.test (the policy's "hosts" map points it at 127.0.0.1):

  tunnelled   "tls": "tunnel": the client's TLS goes to the upstream, the
              proxy checks the SNI and splices bytes;
  terminated  {"host": ..., "tls": "terminate"}: the proxy answers the
              handshake with a certificate it minted, parses each request,
              and opens its own verified TLS upstream;
  secret      the same, with a secret for bench.test: each request carries
              its placeholder in Authorization (swapped in), and each
              answer is framed and scanned for the value's forms on its
              way back (secrets.c, httpresp.c).

It measures, timing inside the client:

  1. throughput: download and upload of BENCH_TLS_BYTES (default 256 MiB)
     in one request each, median of BENCH_REPEAT (default 3);
  2. latency: BENCH_LAT (default 200) sequential new connections, each a
     full handshake and one small GET;
  3. requests: BENCH_REQS (default 2000) small GETs on one connection.

The download's bytes are BENCH_TLS_BODY: "d" (default) repeated, a byte no
spelling of the value begins with; "pattern", bytes 0 to 255 over and over
(tests/tls.sh's /big); "text", JSON and HTML dense in escapes ("\/",
"&amp;", "%2F") and in starts of the value that go no further (the mask's
costliest answer short of the value itself).

  tls.py [CORRAL]     (default build/corral)
"""
import http.server
import json
import os
import shutil
import socketserver
import ssl
import subprocess
import sys
import tempfile
import threading

CORRAL = sys.argv[1] if len(sys.argv) > 1 else "build/corral"
NBYTES = int(os.environ.get("BENCH_TLS_BYTES", str(256 << 20)))
REPEAT = int(os.environ.get("BENCH_REPEAT", "3"))
NLAT = int(os.environ.get("BENCH_LAT", "200"))
NREQS = int(os.environ.get("BENCH_REQS", "2000"))
NAME = "bench.test"
CHUNK = 1 << 20
BODY = os.environ.get("BENCH_TLS_BODY", "d")
RUN_TIMEOUT = 600

# ---- the client, inside the sandbox: prints JSON ---------------------------
CLIENT = r'''
import http.client, json, os, ssl, statistics, sys, time
host, port, nbytes, reps, nlat, nreqs = sys.argv[1], int(sys.argv[2]), *map(int, sys.argv[3:])
now = time.perf_counter
hdrs = {"Authorization": "Bearer " + os.environ["BENCH_KEY"]} if "BENCH_KEY" in os.environ else {}
ctx = ssl.create_default_context(cafile="/bench-ca.pem")
if os.path.exists("/etc/corral/ca.pem"):
    ctx.load_verify_locations("/etc/corral/ca.pem")
CHUNK = 1 << 20

def conn():
    c = http.client.HTTPSConnection("127.0.0.1", 3128, context=ctx, timeout=60)
    c.set_tunnel(host, port)
    return c

def down():
    c = conn()
    t0 = now()
    c.request("GET", "/bytes/%d" % nbytes, headers=hdrs)
    r = c.getresponse()
    got = 0
    while True:
        b = r.read(CHUNK)
        if not b:
            break
        got += len(b)
    t = now() - t0
    c.close()
    assert got == nbytes, (got, nbytes)
    return t

def up():
    c = conn()
    block = b"u" * CHUNK
    def body():
        left = nbytes
        while left:
            k = min(left, CHUNK)
            yield block[:k]
            left -= k
    t0 = now()
    c.request("POST", "/sink", body=body(), headers=dict(hdrs, **{"Content-Length": str(nbytes)}))
    r = c.getresponse()
    got = int(r.read())
    t = now() - t0
    c.close()
    assert got == nbytes, (got, nbytes)
    return t

def latency():
    ms = []
    for i in range(nlat + 5):
        t0 = now()
        c = conn()
        c.request("GET", "/ping", headers=hdrs)
        c.getresponse().read()
        c.close()
        if i >= 5:
            ms.append((now() - t0) * 1000)
    return ms

def requests():
    c = conn()
    c.request("GET", "/ping", headers=hdrs)
    c.getresponse().read()
    t0 = now()
    for _ in range(nreqs):
        c.request("GET", "/ping", headers=hdrs)
        c.getresponse().read()
    t = now() - t0
    c.close()
    return nreqs / t

print(json.dumps({"down": [down() for _ in range(reps)], "up": [up() for _ in range(reps)],
                  "ms": latency(), "rps": requests()}))
'''


def body_block():
    """CHUNK bytes of the BENCH_TLS_BODY kind"""
    unit = {"pattern": bytes(range(256)),
            "text": b'{"key": "bench-secret-valu\\/e", "html": "&amp;&lt;%2F\\u0062ench-'
                    b'secret", "b": "YmVuY2gtc2Vj", "n": 12345},\n'}.get(BODY, b"d")
    return (unit * (CHUNK // len(unit) + 1))[:CHUNK]


BLOCK = body_block()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def do_GET(self):
        if self.path.startswith("/bytes/"):
            n = int(self.path[7:])
            self.send_response(200)
            self.send_header("Content-Length", str(n))
            self.end_headers()
            while n:
                k = min(n, CHUNK)
                self.wfile.write(BLOCK[:k])
                n -= k
            return
        self.send_response(200)
        self.send_header("Content-Length", "1")
        self.end_headers()
        self.wfile.write(b"x")

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        got = 0
        while got < n:
            b = self.rfile.read(min(CHUNK, n - got))
            if not b:
                break
            got += len(b)
        body = str(got).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


def make_certs(d):
    def ossl(*args):
        subprocess.run(["openssl", *args], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    ossl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
         "-days", "2", "-subj", "/CN=bench-ca", "-keyout", d + "/ca.key", "-out", d + "/ca.pem")
    ossl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
         "-subj", "/CN=" + NAME, "-keyout", d + "/srv.key", "-out", d + "/srv.csr")
    with open(d + "/ext", "w") as f:
        f.write("subjectAltName=DNS:%s\n" % NAME)
    ossl("x509", "-req", "-in", d + "/srv.csr", "-CA", d + "/ca.pem", "-CAkey", d + "/ca.key",
         "-CAcreateserial", "-days", "2", "-extfile", d + "/ext", "-out", d + "/srv.pem")
    os.chmod(d + "/ca.pem", 0o644)


SECRET_VALUE = "bench-secret-value-0123456789abcdef"


def run(corral, tmp, port, mode):
    """mode 0: tunnel, 1: terminated, 2: terminated with a secret"""
    allow = {"host": "%s:%d" % (NAME, port), "tls": "terminate" if mode else "tunnel"}
    pol = os.path.join(tmp, "policy-%d.json" % mode)
    doc = {"network": {"mode": "proxy", "allow": [allow], "hosts": {NAME: "127.0.0.1"},
                       "tls_upstream_ca": tmp + "/ca.pem"}}
    if mode == 2:
        doc["secrets"] = [{"name": "BENCH_KEY", "from_env": "BENCH_TLS_SECRET_VALUE",
                           "hosts": ["%s:%d" % (NAME, port)], "header": "Authorization"}]
    with open(pol, "w") as f:
        json.dump(doc, f)
    os.chmod(pol, 0o644)
    cmd = [corral, "run", "--policy", pol, "--timeout", str(RUN_TIMEOUT),
           "--ro", tmp + "/ca.pem:/bench-ca.pem", "--",
           "/usr/bin/python3", "-c", CLIENT, NAME, str(port), str(NBYTES), str(REPEAT),
           str(NLAT), str(NREQS)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT + 30,
                       env=dict(os.environ, BENCH_TLS_SECRET_VALUE=SECRET_VALUE))
    if p.returncode != 0:
        return None, (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]
    return json.loads(p.stdout), None


def median_p95(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2], xs[min(len(xs) - 1, int(len(xs) * 0.95))]


def main():
    if not shutil.which(CORRAL):
        sys.exit("tls.py: no corral at %s" % CORRAL)
    corral = os.path.abspath(CORRAL)
    tmp = tempfile.mkdtemp(prefix="corral-bench-tls-")
    os.chmod(tmp, 0o755)
    try:
        make_certs(tmp)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(tmp + "/srv.pem", tmp + "/srv.key")
        srv = Server(("127.0.0.1", 0), Handler)
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
        port = srv.server_address[1]
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        res = [run(corral, tmp, port, m) for m in (0, 1, 2)]
        srv.shutdown()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"terminated TLS vs the tunnel (uid {os.geteuid()}, {os.cpu_count()} cpus)")
    print()
    print(f"throughput, {NBYTES / 2**20:.0f} MiB in one request, median of {REPEAT}, "
          f"body {BODY!r}")
    print(f"{'':34} {'tunnel MB/s':>12} {'terminated':>12} {'term/tunnel':>12} "
          f"{'secret':>12} {'secret/term':>12}")
    for key, label in (("up", "upload (client -> upstream)"),
                       ("down", "download (upstream -> client)")):
        cells = [NBYTES / sorted(r[key])[len(r[key]) // 2] / 1e6 if r else err for r, err in res]
        if all(isinstance(c, float) for c in cells):
            print(f"{label:34} {cells[0]:12.0f} {cells[1]:12.0f} {cells[1] / cells[0]:12.0%} "
                  f"{cells[2]:12.0f} {cells[2] / cells[1]:12.0%}")
        else:
            print(f"{label:34} " + " | ".join(str(c) for c in cells))
    print()
    print(f"new connection, {NLAT} sequential: CONNECT, TLS handshake, one GET")
    print(f"{'':34} {'median ms':>12} {'p95 ms':>12}")
    for (r, err), label in zip(res, ("tunnelled", "terminated", "terminated, secret")):
        if r:
            m, p = median_p95(r["ms"])
            print(f"{label:34} {m:12.3f} {p:12.3f}")
        else:
            print(f"{label:34} {err}")
    print()
    print(f"{NREQS} small GETs on one connection")
    print(f"{'':34} {'requests/s':>12}")
    for (r, err), label in zip(res, ("tunnelled", "terminated", "terminated, secret")):
        print(f"{label:34} {r['rps']:12.0f}" if r else f"{label:34} {err}")
    return 0 if all(r for r, _ in res) else 1


if __name__ == "__main__":
    sys.exit(main())
