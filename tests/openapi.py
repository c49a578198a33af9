#!/usr/bin/python3
"""openapi.py - docs/openapi.json against the daemon it describes.

    openapi.py CORRAL [REPO]

1. The document is OpenAPI 3.1 in shape: every operation answers, every
   $ref resolves, every path parameter is declared, operationIds unique.
2. Its paths and methods are the daemon's routing table (src/daemon/api.c),
   both ways.
3. A real daemon's answers to a session (every route, errors included) are
   each documented (path, method, status, content type) and validate
   against the document's schemas, with the small validator below; a
   field the daemon sends that its schema does not list is a failure.
4. docs/API.md, the prose, names every field and enum value of those
   schemas, shows every operation and has every error status in its
   table: what the daemon sends is documented in both, or the test fails.
Prints "ok - ..." per check and "openapi: N passed, N failed".
"""
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse

CORRAL = os.path.abspath(sys.argv[1])
REPO = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else
                       os.path.join(os.path.dirname(__file__), ".."))
DOC = json.load(open(os.path.join(REPO, "docs/openapi.json")))
METHODS = ("get", "put", "post", "delete", "patch", "head", "options")
PASS = FAIL = 0


def check(cond, what, detail=""):
    global PASS, FAIL
    if cond:
        PASS += 1
        print("ok - " + what)
    else:
        FAIL += 1
        print("not ok - %s%s" % (what, ": " + str(detail)[:600] if detail else ""))


# ---- a JSON Schema validator: the keywords the document uses ----------------

def resolve(ref):
    assert ref.startswith("#/"), ref
    node = DOC
    for part in ref[2:].split("/"):
        node = node[part]
    return node


TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool) or
    (isinstance(v, float) and v.is_integer()),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def errors(schema, v, where="$"):
    """The ways v breaks schema, as sentences (empty: valid)."""
    if "$ref" in schema:
        return errors(resolve(schema["$ref"]), v, where)
    out = []
    t = schema.get("type")
    if t is not None:
        ts = t if isinstance(t, list) else [t]
        if not any(TYPES[x](v) for x in ts):
            return ["%s: %r is not %s" % (where, v, t)]
    if "const" in schema and v != schema["const"]:
        out.append("%s: %r is not %r" % (where, v, schema["const"]))
    if "enum" in schema and v not in schema["enum"]:
        out.append("%s: %r is not one of %r" % (where, v, schema["enum"]))
    if "minimum" in schema and isinstance(v, (int, float)) and v < schema["minimum"]:
        out.append("%s: %r < %r" % (where, v, schema["minimum"]))
    if isinstance(v, dict):
        props = schema.get("properties", {})
        for k in schema.get("required", []):
            if k not in v:
                out.append("%s: %s is missing" % (where, k))
        for k, x in v.items():
            if k in props:
                out += errors(props[k], x, where + "." + k)
            elif schema.get("additionalProperties") is False or (
                    props and "additionalProperties" not in schema):
                # a field the server sends that the document does not name
                # is drift: an object schema with properties lists them all
                out.append("%s: %s is not in the schema" % (where, k))
            elif isinstance(schema.get("additionalProperties"), dict):
                out += errors(schema["additionalProperties"], x, where + "." + k)
    if isinstance(v, list):
        if len(v) < schema.get("minItems", 0):
            out.append("%s: fewer than %d items" % (where, schema["minItems"]))
        if "items" in schema:
            for i, x in enumerate(v):
                out += errors(schema["items"], x, "%s[%d]" % (where, i))
    if "oneOf" in schema:
        n = sum(1 for s in schema["oneOf"] if not errors(s, v, where))
        if n != 1:
            out.append("%s: matches %d of oneOf, not 1: %r" % (where, n, v))
    return out


# ---- 1. shape ------------------------------------------------------------------

def walk_refs(node, found):
    if isinstance(node, dict):
        if "$ref" in node:
            found.append(node["$ref"])
        for x in node.values():
            walk_refs(x, found)
    elif isinstance(node, list):
        for x in node:
            walk_refs(x, found)


def shape():
    check(str(DOC.get("openapi", "")).startswith("3.1."), "openapi is 3.1.x")
    check(DOC.get("info", {}).get("title") and DOC["info"].get("version"),
          "info has title and version")
    refs = []
    walk_refs(DOC, refs)
    bad = []
    for r in refs:
        try:
            resolve(r)
        except (KeyError, AssertionError):
            bad.append(r)
    check(refs and not bad, "every $ref resolves (%d)" % len(refs), bad)
    ids, problems = [], []
    for path, item in DOC["paths"].items():
        if not path.startswith("/"):
            problems.append(path + ": not absolute")
        names = set(re.findall(r"{(\w+)}", path))
        for m in METHODS:
            op = item.get(m)
            if not op:
                continue
            ids.append(op.get("operationId"))
            declared = {p["name"] for p in item.get("parameters", []) + op.get("parameters", [])
                        if p.get("in") == "path" and p.get("required") is True}
            if names != declared:
                problems.append("%s %s: path parameters %s declared %s" % (m, path, names, declared))
            codes = list(op.get("responses", {}))
            if not any(c.startswith("2") for c in codes):
                problems.append("%s %s: no 2xx response" % (m, path))
            for c, resp in op["responses"].items():
                if "$ref" in resp:
                    resp = resolve(resp["$ref"])
                if not resp.get("description"):
                    problems.append("%s %s %s: no description" % (m, path, c))
    check(not problems, "operations: path parameters, 2xx answers, descriptions", problems)
    check(len(ids) == len(set(ids)) and None not in ids, "operationIds are there and unique", ids)


# ---- 2. the routing table --------------------------------------------------------

def routes():
    src = open(os.path.join(REPO, "src/daemon/api.c")).read()
    found = set()

    def table(name, prefix):
        body = re.search(r"api_route %s\[\] = {(.*?)\n};" % name, src, re.S)
        check(body is not None, "api.c has the table %s" % name)
        for path, flags in re.findall(r'{\s*"([^"]*)",\s*([A-Z| ]+),', body.group(1) if body else ""):
            if path.endswith("/sandboxes/*") and name == "api_routes":
                continue    # the dispatch to api_sandbox_routes
            path = prefix + path.replace("processes/*", "processes/{pid}").replace("snapshots/*", "snapshots/{id}")
            for f in flags.replace(" ", "").split("|"):
                if f in ("GET", "HEAD", "POST", "PUT", "DELETE", "PATCH"):
                    found.add((path, f.lower()))
    table("api_routes", "")
    table("api_sandbox_routes", "/v1/sandboxes/{id}")
    documented = {(p, m) for p, item in DOC["paths"].items() for m in METHODS if m in item}
    check(len(found) > 10, "the routing table was read (%d routes)" % len(found))
    check(not found - documented, "every route of api.c is documented", sorted(found - documented))
    check(not documented - found, "every documented operation is a route of api.c",
          sorted(documented - found))


def error_words():
    """Every error word the daemon's source answers with is in Error's enum
    (one a session seldom meets, a TCP peer's 429, too)."""
    words = set()
    for name in sorted(os.listdir(os.path.join(REPO, "src/daemon"))):
        if name.endswith(".c"):
            src = open(os.path.join(REPO, "src/daemon", name)).read()
            words |= set(re.findall(r'(?:reply_error|api_fault)\([^,;]+,\s*[0-9]+,\s*"([a-z_]+)"', src))
            words |= set(re.findall(r'\berror = "([a-z_]+)"', src))
    enum = set(resolve("#/components/schemas/Error")["properties"]["error"]["enum"])
    check(len(words) > 10 and not words - enum,
          "every error word of src/daemon is in Error's enum (%d)" % len(words),
          sorted(words - enum))


def request_fields():
    """The fields the daemon's bodies take (each handler's known[] list) are
    the document's request properties, both ways."""
    taken = set()
    for name in sorted(os.listdir(os.path.join(REPO, "src/daemon"))):
        if name.endswith(".c"):
            src = open(os.path.join(REPO, "src/daemon", name)).read()
            for body in re.findall(r"\bknown\[\] = \{(.*?)\};", src, re.S):
                taken |= set(re.findall(r'"([a-z_]+)"', body))
            # processes' own field, taken off its body before exec's check
            if name == "api_procs.c" and '"stdin_open"' in src:
                taken.add("stdin_open")
    documented = set()
    for item in DOC["paths"].values():
        for m in METHODS:
            rb = item.get(m, {}).get("requestBody", {})
            for c in rb.get("content", {}).values():
                schema = c.get("schema", {})
                if "$ref" in schema:
                    schema = resolve(schema["$ref"])
                documented |= set(schema.get("properties", {}))
    check(len(taken) > 20 and taken == documented,
          "the request fields of src/daemon are the document's (%d)" % len(taken),
          "taken, not documented: %s; documented, not taken: %s" %
          (sorted(taken - documented), sorted(documented - taken)))


def query_parameters():
    """The query parameters the daemon reads are the document's, both ways."""
    read = set()
    for name in sorted(os.listdir(os.path.join(REPO, "src/daemon"))):
        if name.endswith(".c"):
            src = open(os.path.join(REPO, "src/daemon", name)).read()
            read |= set(re.findall(r'(?:find_header\(&\w+|query_has\(\w+), "([a-z_]+)"', src))
            read |= set(re.findall(r'strcmp\(h->key, "([a-z_]+)"\)', src))   # ?label=, repeated
    documented = set()
    for item in DOC["paths"].values():
        for m in METHODS:
            for prm in item.get(m, {}).get("parameters", []) + item.get("parameters", []):
                if "$ref" in prm:
                    prm = resolve(prm["$ref"])
                if prm.get("in") == "query":
                    documented.add(prm["name"])
    check(len(read) > 10 and read == documented,
          "the query parameters of src/daemon are the document's (%d)" % len(read),
          "read, not documented: %s; documented, not read: %s" %
          (sorted(read - documented), sorted(documented - read)))


# ---- 3. a real daemon -------------------------------------------------------------

class Unix(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=120)
        self.path_ = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(120)
        self.sock.connect(self.path_)


def template_of(path):
    """The document's path for a concrete one."""
    for t in DOC["paths"]:
        rx = "^" + re.sub(r"{\w+}", "[^/]+", t) + "$"
        if re.match(rx, path):
            return t
    return None


def exchange(sock, method, url, body=None, ctype=None, expect=None):
    """One request; its answer checked against the document.  The JSON."""
    c = Unix(sock)
    headers = {"Content-Type": ctype} if ctype else {}
    if isinstance(body, (dict, list)):
        body = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    c.request(method, url, body=body, headers=headers)
    r = c.getresponse()
    data = r.read()
    c.close()
    path = urllib.parse.urlsplit(url).path
    what = "%s %s -> %d" % (method, url[:70], r.status)
    if expect is not None and r.status != expect:
        check(False, what, "expected %d: %r" % (expect, data[:300]))
        return None
    t = template_of(path)
    op = DOC["paths"].get(t, {}).get(method.lower())
    if not op and method == "HEAD":
        check(False, what + " is documented", data[:100])
        return None
    if not op:
        # an undocumented method on a documented path: the Error shape
        errs = errors({"$ref": "#/components/schemas/Error"}, json.loads(data))
        check(r.status == 405 and not errs, what + " (not an operation: 405 Error)", errs)
        return None
    resp = op["responses"].get(str(r.status))
    if resp is None:
        check(False, what + " is documented", list(op["responses"]))
        return None
    if "$ref" in resp:
        resp = resolve(resp["$ref"])
    ctype = (r.getheader("Content-Type") or "").split(";")[0].strip()
    content = resp.get("content", {})
    if method == "HEAD":
        check(not data and not content, what + " has no body", data[:100])
        return None
    if ctype not in content:
        check(False, what + ": content type %s documented" % ctype, list(content))
        return None
    schema = content[ctype]["schema"]
    if ctype == "application/json":
        value = json.loads(data)
        errs = errors(schema, value)
    elif ctype == "application/x-ndjson":
        value = [json.loads(l) for l in data.splitlines() if l.strip()]
        errs = [e for v in value for e in errors(schema, v)]
    else:
        value, errs = data, []
    check(not errs, what + " validates", errs)
    return value


def session(sock):
    ex = lambda *a, **k: exchange(sock, *a, **k)
    ex("GET", "/v1/health", expect=200)
    ex("GET", "/v1/metrics", expect=200)
    ex("HEAD", "/v1/health", expect=200)
    ex("HEAD", "/v1/metrics", expect=200)
    ex("POST", "/v1/sandboxes", {"policy": {"limits": {"memory": "lots"}}}, expect=422)
    ex("POST", "/v1/sandboxes", {"bogus": 1}, expect=400)
    # an image the store does not hold, and a reference that is no image
    # name: the error word is "image", which Error did not list
    ex("POST", "/v1/sandboxes", {"image": "nosuch:1"}, expect=404)
    ex("POST", "/v1/sandboxes", {"image": "/tmp/x"}, expect=422)
    ex("POST", "/v1/sandboxes", {"policy": {"limits": {"open_files": 1000000, "pids": 1024}}},
       expect=400)
    sb = ex("POST", "/v1/sandboxes", {"labels": {"k": "v"}, "ttl_seconds": 600}, expect=201)
    if not sb:
        return
    base = "/v1/sandboxes/" + sb["id"]
    ex("GET", "/v1/sandboxes", expect=200)
    ex("GET", base, expect=200)
    ex("GET", "/v1/sandboxes/sb-nope", expect=404)
    ex("PATCH", base, b"", expect=405)
    ex("POST", base + "/exec", {"command": "echo hi; echo no >&2; exit 2"}, expect=200)
    ex("POST", base + "/exec", {"argv": ["/nonexistent"]})
    ex("POST", base + "/exec", {"command": "sleep 5", "timeout_seconds": 0.5}, expect=200)
    ex("POST", base + "/exec", {"command": "echo streamed", "stream": True}, expect=200)
    ex("POST", base + "/exec", {"cwd": "/"}, expect=400)
    p = ex("POST", base + "/processes", {"command": "sleep 100"}, expect=201)
    ex("POST", base + "/processes", {"argv": ["/nonexistent"]}, expect=201)
    ex("GET", base + "/processes", expect=200)
    if p:
        ex("GET", "%s/processes/%d" % (base, p["pid"]), expect=200)
        ex("DELETE", "%s/processes/%d" % (base, p["pid"]), expect=200)
    ex("GET", base + "/processes/99999", expect=404)
    ex("PUT", base + "/files?path=/tmp/a.txt", b"hello", "application/octet-stream", expect=201)
    ex("GET", base + "/files?path=/tmp/a.txt", expect=200)
    ex("GET", base + "/files?path=/tmp&list=1", expect=200)
    ex("GET", base + "/files?path=/tmp", expect=400)  # a directory: "type": "dir"
    ex("DELETE", base + "/files?path=/tmp/a.txt", expect=200)
    ex("GET", base + "/files?path=/tmp/a.txt", expect=404)
    ex("GET", base + "/files?path=/proc/1/status", expect=403)
    ex("GET", base + "/files?path=relative", expect=400)
    ex("POST", base + "/pause")        # 200, or 500 without a freezer
    ex("POST", base + "/resume")
    ex("POST", base + "/halt", {"reason": "enough"}, expect=200)
    ex("POST", base + "/exec", {"command": "true"}, expect=409)
    ex("GET", "/v1/events?sandbox=" + sb["id"], expect=200)
    ex("GET", "/v1/events", expect=200)
    ex("GET", "/v1/events?sandbox=sb-never", expect=404)
    ex("DELETE", base, expect=200)
    harness(ex)


def harness(ex):
    """The file channel and background processes, as harnesses use them."""
    sb = ex("POST", "/v1/sandboxes", {"labels": {"team": "a"}}, expect=201)
    if not sb:
        return
    base = "/v1/sandboxes/" + sb["id"]
    ex("GET", "/v1/sandboxes?label=team=a", expect=200)
    ex("GET", "/v1/sandboxes?nolabel=1", expect=400)
    ex("POST", base + "/keepalive", {"ttl_seconds": 600}, expect=200)
    ex("PUT", base + "/files?path=/tmp/d/e/f.txt&parents=1", b"x", "application/octet-stream",
       expect=201)
    ex("POST", base + "/files/mkdir", {"path": "/tmp/m/n", "parents": True}, expect=201)
    ex("POST", base + "/files/mkdir", {"path": "/tmp/m"}, expect=409)
    ex("POST", base + "/files/rename", {"from": "/tmp/d/e/f.txt", "to": "/tmp/m/f.txt"},
       expect=200)
    ex("POST", base + "/exec", {"command": "ln -s /etc /tmp/l"}, expect=200)
    ex("GET", base + "/files?path=/tmp&list=1&recursive=1", expect=200)
    tar = ex("GET", base + "/archive?path=/tmp/m", expect=200)
    if tar:
        ex("PUT", base + "/archive?path=/tmp/copy", tar, "application/x-tar", expect=201)
    ex("PUT", base + "/archive?path=/tmp/copy", b"no tar", "application/x-tar", expect=400)
    p = ex("POST", base + "/processes", {"command": "cat", "stdin_open": True}, expect=201)
    if not p:
        return
    pp = "%s/processes/%d" % (base, p["pid"])
    ex("POST", pp + "/stdin", b"hello", "application/octet-stream", expect=200)
    ex("GET", pp + "/wait?timeout_seconds=0", expect=200)
    ex("POST", pp + "/stdin?eof=1", b"", "application/octet-stream", expect=200)
    ex("GET", pp + "/wait?timeout_seconds=60", expect=200)
    ex("GET", pp + "/output?offset=2", expect=200)
    ex("GET", pp + "/output?follow=1&stream=stderr", expect=200)
    ex("POST", pp + "/stdin", b"late", "application/octet-stream", expect=409)
    ex("POST", pp + "/signal", {"signal": "TERM"}, expect=409)
    q = ex("POST", base + "/processes", {"command": "sleep 100"}, expect=201)
    if q:
        ex("POST", "%s/processes/%d/signal" % (base, q["pid"]), {"signal": "TERM"}, expect=200)
        ex("POST", "%s/processes/%d/signal" % (base, q["pid"]), {"signal": "NOPE"}, expect=400)
    ex("GET", base + "/processes/99999/wait", expect=404)
    ex("DELETE", base, expect=200)


def way_out(ex, tmp):
    """A workspace's diff, export and snapshot, and a fork of it: routes a
    harness uses after a run, whose answers the session above never read."""
    ws = os.path.join(tmp, "ws")
    os.mkdir(ws, 0o755)
    os.chmod(tmp, 0o755)    # opened as the sandbox's host user: mkdtemp's 0700 refuses it
    for name in ("a.txt", "m.txt", "t.txt"):
        with open(os.path.join(ws, name), "w") as f:
            f.write("one\n")
    os.symlink("a.txt", os.path.join(ws, "l"))
    sb = ex("POST", "/v1/sandboxes", {"workspace": ws}, expect=201)
    if not sb:
        return
    base = "/v1/sandboxes/" + sb["id"]
    # each kind of change, so that each field of a Change is sent: old_mode,
    # old_type and old_target too
    ex("POST", base + "/exec", {"command": "echo two >> a.txt; echo new > b.txt; "
                                "chmod 600 m.txt; rm t.txt; mkdir t.txt; "
                                "ln -sfn m.txt l; ln -s a.txt s; mkdir d"}, expect=200)
    changes = ex("GET", base + "/diff", expect=200) or []
    sent = {k for c in changes for k in c}
    check(sent >= {"old_mode", "old_type", "old_target", "target", "size"},
          "the diff sent every kind of change", sorted(sent))
    ex("GET", base + "/diff?path=b.txt", expect=200)
    ex("GET", base + "/diff?format=patch", expect=200)
    ex("GET", base + "/diff?format=nope", expect=400)
    ex("POST", base + "/export", {"to": os.path.join(tmp, "out")}, expect=200)
    ex("POST", base + "/export", {"patch": True}, expect=200)
    ex("POST", base + "/export", {"to": os.path.join(tmp, "out")}, expect=409)
    ex("POST", base + "/export", {}, expect=400)
    snap = ex("POST", base + "/snapshot", expect=201)
    ex("GET", "/v1/snapshots", expect=200)
    ex("GET", "/v1/snapshots/snap-nope", expect=404)
    if snap:
        ex("GET", "/v1/snapshots/" + snap["id"], expect=200)
        fork = ex("POST", "/v1/sandboxes", {"from_snapshot": snap["id"]}, expect=201)
        if fork:
            ex("DELETE", "/v1/sandboxes/" + fork["id"], expect=200)
        ex("DELETE", "/v1/snapshots/" + snap["id"], expect=200)
    ex("DELETE", base, expect=200)


def daemon():
    tmp = tempfile.mkdtemp(prefix="corral-openapi.", dir=os.environ.get("TMPDIR", "/tmp"))
    sock = os.path.join(tmp, "s")
    log = open(os.path.join(tmp, "log"), "w")
    d = subprocess.Popen([CORRAL, "serve", "--socket", sock, "--state-dir",
                          os.path.join(tmp, "state")], stdout=log, stderr=log,
                         stdin=subprocess.DEVNULL)
    try:
        for _ in range(200):
            if os.path.exists(sock):
                break
            time.sleep(0.05)
        check(os.path.exists(sock), "the daemon started")
        session(sock)
        way_out(lambda *a, **k: exchange(sock, *a, **k), tmp)
    finally:
        d.send_signal(signal.SIGTERM)
        try:
            d.wait(30)
        except subprocess.TimeoutExpired:
            d.kill()
            d.wait()
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)


# ---- 4. docs/API.md says what the document does ------------------------------

def fields(node, out):
    """Every property name and every enum value of the schemas, nested."""
    if isinstance(node, dict):
        for k, v in node.get("properties", {}).items():
            out.add(("field", k))
        for v in node.get("enum", []):
            out.add(("value", v))
        if "const" in node:
            out.add(("value", node["const"]))
        for v in node.values():
            fields(v, out)
    elif isinstance(node, list):
        for v in node:
            fields(v, out)


def prose():
    md = open(os.path.join(REPO, "docs/API.md")).read()
    names = set()
    fields(DOC["components"]["schemas"], names)
    missing = sorted("%s %s" % kv for kv in names if isinstance(kv[1], str) and
                     not re.search(r'[`"]%s[`"]' % re.escape(kv[1]), md))
    check(len(names) > 50 and not missing,
          "docs/API.md names every field and value of the answers (%d)" % len(names), missing)
    ops = []
    for path, item in DOC["paths"].items():
        for m in METHODS:
            if m in item and not re.search(r"\b%s\s+%s(?![/\w])" % (m.upper(), re.escape(path)), md):
                ops.append("%s %s" % (m.upper(), path))
    check(not ops, "docs/API.md shows every operation", ops)
    codes = {c for item in DOC["paths"].values() for m in METHODS if m in item
             for c in item[m]["responses"] if c[0] in "45"}
    undoc = sorted(c for c in codes if not re.search(r"^\| %s \|" % c, md, re.M))
    check(not undoc, "docs/API.md's error table has every error status", undoc)


shape()
routes()
error_words()
request_fields()
query_parameters()
prose()
daemon()
print("openapi: %d passed, %d failed" % (PASS, FAIL))
sys.exit(1 if FAIL else 0)
