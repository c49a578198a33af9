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
DPID2=""
stop() {
	[ -n "$1" ] || return 0
	kill -TERM "$1" 2>/dev/null
	for _ in $(seq 100); do
		kill -0 "$1" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$1" 2>/dev/null
	wait "$1" 2>/dev/null
}
cleanup() {
	stop "$DPID"
	stop "$DPID2"
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
PORT=$($PY "$HERE/freeport.py")
# serve NAME ARG...: `corral serve` on $T/NAME.sock, its log in $T/NAME.log,
# its pid in SERVED; exits the script if it does not come up
serve() {
	local name=$1
	shift
	"$CORRAL" serve --socket "$T/$name.sock" --state-dir "$T/$name.state" "$@" \
		> "$T/$name.log" 2>&1 < /dev/null &
	SERVED=$!
	for _ in $(seq 100); do
		[ -S "$T/$name.sock" ] && return 0
		sleep 0.1
	done
	stop "$SERVED"
	cat "$T/$name.log"
	echo "python client: 0 passed, 1 failed (no $name)"
	exit 1
}
serve daemon --listen "127.0.0.1:$PORT" --token-file "$T/token"
DPID=$SERVED

# a second daemon over https, asking for a client certificate: a CA that
# signed the server's (for 127.0.0.1) and the client's, and another CA
mkdir "$T/tls"
(
	cd "$T/tls" || exit 1
	for ca in ca other; do
		openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
			-subj "/CN=corral-test-$ca" -keyout $ca.key -out $ca.pem 2>/dev/null || exit 1
	done
	for who in srv client; do
		openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$who" \
			-keyout $who.key -out $who.csr 2>/dev/null || exit 1
	done
	echo "subjectAltName=IP:127.0.0.1" > srv.ext
	echo "extendedKeyUsage=clientAuth" > client.ext
	for who in srv client; do
		openssl x509 -req -in $who.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
			-extfile $who.ext -out $who.pem 2>/dev/null || exit 1
	done
	chmod 600 ./*.key
) || { echo "python client: 0 passed, 1 failed (no test certificates)"; exit 1; }
PORT2=$($PY "$HERE/freeport.py")
serve daemon2 --listen "127.0.0.1:$PORT2" --token-file "$T/token" \
	--tls-cert "$T/tls/srv.pem" --tls-key "$T/tls/srv.key" --tls-client-ca "$T/tls/ca.pem"
DPID2=$SERVED

cd "$T"
rc=0
CORRAL_TEST_BIN=$CORRAL CORRAL_TEST_SOCKET=$T/daemon.sock CORRAL_TEST_URL=http://127.0.0.1:$PORT CORRAL_TEST_TOKEN_FILE=$T/token \
	CORRAL_TEST_HTTPS=https://127.0.0.1:$PORT2 CORRAL_TEST_TLS=$T/tls \
	PYTHONPATH=$T/site timeout 600 $PY "$HERE/python_client.py" 2>&1 || rc=$?
# a daemon that died midway: say how (a sanitizer's report, else its end)
for d in "$DPID:daemon" "$DPID2:daemon2"; do
	kill -0 "${d%%:*}" 2>/dev/null && continue
	echo "the ${d#*:} died during the tests:"
	grep -m1 -A20 -E 'ERROR: (Address|Leak)Sanitizer|runtime error' "$T/${d#*:}.log" ||
		tail -20 "$T/${d#*:}.log"
	rc=1
done
exit $rc
