#!/bin/bash
# throttle_walk.sh CORRAL [PEERS [CONNS]]: what bodies waiting for room
# (api_gate.c's throttle) cost every other request of a daemon.  PEERS TCP
# peers (8; 127.0.0.1, .2, ...) each open CONNS connections (31, the
# per-peer cap's 32 less one) announcing a 16 MiB body past
# --answer-memory 16M, and send a little of it; then a unix-socket client
# asks for /v1/health 400 times on one connection, each timed, with the
# daemon's CPU.  Each request answered walks the waiting connections:
# when each of them summed every connection's holdings (247 x 248), a
# health request took 1,400-1,700 us and the 400 took 540-560 ms of the
# daemon's CPU (21-28 us each, 0 ms, with no peer); summed once a pass,
# by peer, 140-180 us and 50-60 ms.  Two runs each, a shared host: repeat.
set -eu
CORRAL=$(readlink -f "$1")
PEERS=${2:-8}
CONNS=${3:-31}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/daemon.sh"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/corral-throttle.XXXXXX")
trap cleanup EXIT
S=$TMP/s
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
( umask 077; head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$TMP/token" )
"$CORRAL" serve --socket "$S" --state-dir "$TMP/state" --listen "127.0.0.1:$port" \
	--token-file "$TMP/token" --answer-memory 16M > "$TMP/log" 2>&1 < /dev/null &
dpid=$!
for _ in $(seq 100); do [ -S "$S" ] && break; sleep 0.1; done
c0=$(cpu)
python3 - "$port" "$TMP/token" "$S" "$PEERS" "$CONNS" <<'PYEOF'
import socket, sys, time
port, tok, sock = int(sys.argv[1]), open(sys.argv[2]).read().strip(), sys.argv[3]
peers, per = int(sys.argv[4]), int(sys.argv[5])
held = []
for p in range(peers):
    for i in range(per):
        s = socket.socket()
        s.bind(("127.0.0.%d" % (p + 1), 0))
        s.connect(("127.0.0.1", port))
        s.sendall(("PUT /v1/sandboxes/none/files?path=/tmp/x HTTP/1.1\r\nHost: x\r\n"
                   "Authorization: Bearer %s\r\nContent-Length: %d\r\n\r\n"
                   % (tok, 16 << 20)).encode() + b"x" * 1000)
        held.append(s)
time.sleep(1)
u = socket.socket(socket.AF_UNIX)
u.connect(sock)
n = 400
t0 = time.perf_counter()
for i in range(n):
    u.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
    d = b""
    while b"\r\n\r\n" not in d:
        d += u.recv(65536)
    h, _, rest = d.partition(b"\r\n\r\n")
    ln = int([l for l in h.split(b"\r\n")
              if l.lower().startswith(b"content-length")][0].split(b":")[1])
    while len(rest) < ln:
        rest += u.recv(65536)
print("%d bodies waiting: a health request %.0f us" % (len(held), (time.perf_counter() - t0) / n * 1e6))
PYEOF
c1=$(cpu)
echo "the daemon's CPU for the 400: $(( (c1 - c0) * 1000 / $(getconf CLK_TCK) )) ms"
