#!/bin/bash
# peer_starve.sh CORRAL [PROCS [SECONDS]]: whether one sandbox's flood of
# denied DNS questions leaves a neighbour's denials without their pid in
# one daemon.  Every search for an asker walks the whole host's /proc, and
# the searches of every sandbox share one budget of PEER_WALK_PER_S
# entries a second (peer.c): A holds PROCS idle processes (1000 by
# default) and floods for SECONDS (20), so 16 of its searches a second
# spend the budget; meanwhile B asks for an unlisted name every 0.2 s.
# Said: how many of B's denials named their pid, and why the others did
# not ("pid_missing"), with and then without A's flood.  Before each
# sandbox had a share of the budget, 0-15 of 75 named their pid; now
# 69-70 of 72 (those of B's first second not).
set -eu
CORRAL=$(readlink -f "$1")
PROCS=${2:-1000}
SECS=${3:-20}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/daemon.sh"
start_daemon peer-starve

cat > "$TMP/policy.json" <<EOF
{"limits": {"pids": $((PROCS + 64))},
 "network": {"mode": "proxy", "allow": ["web.test:80"], "hosts": {"web.test": "127.0.0.1"}}}
EOF
cat > "$TMP/ask.py" <<'EOF'
import os, socket, sys, time
procs, secs, pause = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
r, w = os.pipe()
for i in range(procs):
    if os.fork() == 0:
        os.close(w)
        os.read(r, 1)
        os._exit(0)
os.close(r)
end = time.time() + secs
n = 0
while time.time() < end:
    n += 1
    q = os.urandom(2) + b"\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00"
    q += b"%c" % len(b"h%d" % n) + b"h%d" % n + b"\x04evil\x04test\x00\x00\x01\x00\x01"
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(5)
    s.sendto(q, ("127.0.0.1", 53))
    try:
        s.recv(512)
    except OSError:
        pass
    s.close()
    time.sleep(pause)
print("%d questions" % n)
EOF

# count ID: B's denials, those naming a pid, and each pid_missing said
count() {
	"$CORRAL" events --socket "$S" "$1" | /usr/bin/python3 -c '
import collections, json, sys
den = [e for e in map(json.loads, sys.stdin) if e.get("type") == "egress.denied"]
why = collections.Counter(e.get("pid_missing", "(nothing said)") for e in den if "pid" not in e)
print("  %d denials, %d naming their pid" % (len(den), sum("pid" in e for e in den)))
for w, n in why.most_common():
    print("  %d without: %s" % (n, w))'
}

for flood in yes no; do
	a=$("$CORRAL" create --socket "$S" --policy "$TMP/policy.json")
	b=$("$CORRAL" create --socket "$S" --policy "$TMP/policy.json")
	"$CORRAL" cp --socket "$S" "$TMP/ask.py" "$a:/tmp/ask.py"
	"$CORRAL" cp --socket "$S" "$TMP/ask.py" "$b:/tmp/ask.py"
	if [ $flood = yes ]; then
		"$CORRAL" exec --socket "$S" --background "$a" -- /usr/bin/python3 /tmp/ask.py \
			"$PROCS" "$SECS" 0 > /dev/null
		sleep 3	# its processes made
	fi
	"$CORRAL" exec --socket "$S" "$b" -- /usr/bin/python3 /tmp/ask.py 0 $((SECS - 5)) 0.2 \
		> /dev/null
	echo "B, A flooding: $flood"
	count "$b"
	"$CORRAL" rm --socket "$S" "$a" "$b" > /dev/null
done
