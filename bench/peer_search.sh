#!/bin/bash
# peer_search.sh CORRAL [PROCS [FDS [SECONDS]]]: what one sandbox's denied
# DNS questions cost its neighbours in one daemon when its processes hold
# many fds (PROCS processes of FDS each, 1000 and 1000 by default), the
# asker's pid last: each denial's search for its asker (peer.c) runs on
# the daemon's loop.  Sandbox A asks for an unlisted name over and over
# for SECONDS (25); meanwhile B runs `echo` six times, each timed (the
# numbers of SECURITY.md's "a denial names the connecting pid").  Before
# the search's fd budget the first echo waited for A's flood to end
# (22-25 s); with it, 5-30 ms.  Timings on a shared host: repeat.
set -eu
CORRAL=$(readlink -f "$1")
PROCS=${2:-1000}
FDS=${3:-1000}
SECS=${4:-25}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/daemon.sh"
start_daemon peer

cat > "$TMP/policy.json" <<'EOF'
{"network": {"mode": "proxy", "allow": ["web.test:80"], "hosts": {"web.test": "127.0.0.1"}}}
EOF
# PROCS holders of FDS fds each, then an asker forked last (the highest
# pid: the search reads every holder first), asking for SECS seconds
cat > "$TMP/flood.py" <<'EOF'
import os, resource, socket, sys, time
procs, fds, secs = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
r, w = os.pipe()
for i in range(procs):
    if os.fork() == 0:
        fd = os.open("/dev/null", os.O_RDONLY)
        for j in range(min(fds, hard - 8)):
            os.dup(fd)
        os.close(w)
        os.read(r, 1)
        os._exit(0)
os.close(r)
if os.fork():		# the asker: the last process made
    os.wait()
    sys.exit(0)
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
print("%d questions in %.0f s" % (n, secs))
EOF

a=$("$CORRAL" create --socket "$S" --policy "$TMP/policy.json")
b=$("$CORRAL" create --socket "$S")
"$CORRAL" cp --socket "$S" "$TMP/flood.py" "$a:/tmp/flood.py"
"$CORRAL" exec --socket "$S" --background "$a" -- /usr/bin/python3 /tmp/flood.py \
	"$PROCS" "$FDS" "$SECS" > /dev/null
sleep 5	# the holders' fds made
for i in 1 2 3 4 5 6; do
	t0=$(date +%s%N)
	"$CORRAL" exec --socket "$S" "$b" -- /bin/echo > /dev/null
	echo "B's echo $i: $(( ($(date +%s%N) - t0) / 1000000 )) ms"
done
echo "A's denials recorded: $("$CORRAL" events --socket "$S" "$a" | grep -c '"egress.denied"' || :)"
"$CORRAL" rm --socket "$S" "$a" "$b" > /dev/null
