#!/bin/bash
# python_client.sh - clients/python against a real daemon.
#
#   tests/python_client.sh CORRAL [CLIENT_SRC]
#
# Installs the package with pip, offline (--no-index, the system's
# setuptools), into a scratch directory, starts `corral serve` on a socket
# there and on 127.0.0.1 with a token, runs tests/python_client.py, stops
# the daemon by its pid and removes everything.  CLIENT_SRC defaults to
# clients/python of this checkout.
set -u
CORRAL=$(readlink -f "$1")
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=${2:-$HERE/../clients/python}
PY=/usr/bin/python3
T=$(mktemp -d "${TMPDIR:-/tmp}/corral-py.XXXXXX")
DPID=""
cleanup() {
	if [ -n "$DPID" ]; then
		kill -TERM "$DPID" 2>/dev/null
		for _ in $(seq 100); do
			kill -0 "$DPID" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$DPID" 2>/dev/null
		wait "$DPID" 2>/dev/null
	fi
	rm -rf "$T"
}
trap cleanup EXIT

# a copy: pip builds in the source tree, which may be read-only here
cp -r "$SRC" "$T/src"
if ! $PY -m pip install --quiet --no-index --no-build-isolation --no-cache-dir \
	--target "$T/site" "$T/src" > "$T/pip.log" 2>&1; then
	cat "$T/pip.log"
	echo "python client: 0 passed, 1 failed (pip install clients/python)"
	exit 1
fi

head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$T/token"
PORT=$($PY -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$CORRAL" serve --socket "$T/s" --state-dir "$T/state" --listen "127.0.0.1:$PORT" \
	--token-file "$T/token" > "$T/daemon.log" 2>&1 < /dev/null &
DPID=$!
for _ in $(seq 100); do
	[ -S "$T/s" ] && break
	sleep 0.1
done
[ -S "$T/s" ] || { cat "$T/daemon.log"; echo "python client: 0 passed, 1 failed (no daemon)"; exit 1; }

cd "$T"
rc=0
CORRAL_TEST_SOCKET=$T/s CORRAL_TEST_URL=http://127.0.0.1:$PORT CORRAL_TEST_TOKEN_FILE=$T/token \
	PYTHONPATH=$T/site timeout 600 $PY "$HERE/python_client.py" 2>&1 || rc=$?
# a daemon that died midway: say how (a sanitizer's report, else its end)
if ! kill -0 "$DPID" 2>/dev/null; then
	echo "the daemon died during the tests:"
	grep -m1 -A20 -E 'ERROR: (Address|Leak)Sanitizer|runtime error' "$T/daemon.log" ||
		tail -20 "$T/daemon.log"
	rc=1
fi
exit $rc
