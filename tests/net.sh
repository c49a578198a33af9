#!/bin/bash
# net.sh - egress tests: what leaves the sandbox, by name, and what does not.
#
#   tests/net.sh CORRAL HELPERS_DIR [TEST...]
#
# The "outside world" is servers this script starts on loopback (and, as
# root, in a network namespace it makes, over a veth pair with addresses
# from the 198.18.0.0/15 benchmark range).  Names reach them only through
# the policy's "hosts" map or a fake resolver of ours.  No packet goes to
# any other address.
set -u
CORRAL=$(readlink -f "$1")
HELPERS_SRC=$(readlink -f "$2")
shift 2
HERE=$(cd "$(dirname "$0")" && pwd)
TEST_TMP=$(mktemp -d "${TMPDIR:-/tmp}/corral-net.XXXXXX")
chmod 755 "$TEST_TMP"
trap 'rm -rf "$TEST_TMP"' EXIT
. "$HERE/lib.sh"
ME=$(id -u)
FIX=$HERE/fixtures.py

# Certificates for api.test (and a CA file the sandbox can read).
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=api.test \
	-addext subjectAltName=DNS:api.test -keyout "$TEST_TMP/key.pem" \
	-out "$TEST_TMP/cert.pem" 2>/dev/null
chmod 644 "$TEST_TMP"/*.pem

PIDS=""
stop_fixtures() {
	for p in $PIDS; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
	PIDS=""
}

# start VAR KIND ARGS...: start a fixture (in this shell, so its pid is
# remembered for stop_fixtures), put its port in VAR.
start() {
	local var=$1 pf
	shift
	pf=$(mktemp "$T/port.XXXXXX")
	rm -f "$pf"
	/usr/bin/python3 "$FIX" "$1" "$pf" "${@:2}" >/dev/null 2>&1 &
	PIDS="$PIDS $!"
	for _ in $(seq 1 100); do [ -s "$pf" ] && break; sleep 0.05; done
	[ -s "$pf" ] || { echo "fixture $1 did not start" >&2; return 1; }
	printf -v "$var" '%s' "$(< "$pf")"
}

policy() {	# policy ALLOW_JSON_LIST HOSTS_JSON_OBJ [EXTRA]: write $T/p.json
	printf '{"network": {"mode": "proxy", "allow": %s, "hosts": %s%s}}\n' \
		"$1" "$2" "${3:-}" > "$T/p.json"
	chmod 644 "$T/p.json"
}

# nrun ARGS...: corral run in proxy mode with events; out/err/rc/events in $T.
nrun() {
	local rc=0
	: > "$T/events"
	timeout 120 "$CORRAL" run --json --policy "$T/p.json" --events "$T/events" \
		--ro "$TEST_TMP/cert.pem:/ca.pem" "$@" > "$T/out" 2> "$T/err" < /dev/null || rc=$?
	echo "$rc" > "$T/rc"
}
stdout() { json stdout < "$T/out"; }
denials() { grep -c '"type":"egress.denied"' "$T/events" || true; }
denial_field() { grep '"type":"egress.denied"' "$T/events" | head -1 | json "$1"; }

t_http_allowed() {
	trap stop_fixtures EXIT
	start port http
	policy "[\"web.test:$port\"]" '{"web.test": "127.0.0.1"}'
	nrun -- curl -sS -m 10 "http://web.test:$port/a"
	expect_contains "body" "$(stdout)" "hello from upstream /a"
	expect_eq "denials" "$(denials)" 0
	expect_contains "allowed event" "$(< "$T/events")" '"type":"egress.allowed","protocol":"http","host":"web.test"'
	expect_contains "closed event" "$(< "$T/events")" '"bytes_down"'
}

t_http_keepalive_and_pipelining() {
	trap stop_fixtures EXIT
	start port http
	policy "[\"web.test:$port\"]" '{"web.test": "127.0.0.1"}'
	# two requests on one connection, written at once (pipelined)
	nrun -- /usr/bin/python3 -c "
import socket
s = socket.create_connection(('127.0.0.1', 3128))
req = 'GET http://web.test:$port/%s HTTP/1.1\r\nHost: web.test:$port\r\n\r\n'
s.sendall((req % 'one' + req % 'two').encode())
data = b''
while data.count(b'hello from upstream') < 2:
    chunk = s.recv(65536)
    if not chunk: break
    data += chunk
print(data.decode())"
	expect_contains "first" "$(stdout)" "upstream /one"
	expect_contains "second" "$(stdout)" "upstream /two"
	# a pipelined request for another host ends the connection, with an event
	nrun -- /usr/bin/python3 -c "
import socket
s = socket.create_connection(('127.0.0.1', 3128))
s.sendall(b'GET http://web.test:$port/one HTTP/1.1\r\nHost: web.test:$port\r\n\r\nGET http://evil.test/ HTTP/1.1\r\nHost: evil.test\r\n\r\n')
data = b''
while True:
    chunk = s.recv(65536)
    if not chunk: break
    data += chunk
print(data.count(b'hello from upstream'))"
	expect_eq "denials" "$(denials)" 1
	expect_contains "reason" "$(denial_field reason)" "evil.test"
}

t_https_connect_allowed() {
	trap stop_fixtures EXIT
	start port tls "$TEST_TMP/cert.pem" "$TEST_TMP/key.pem"
	policy "[\"api.test:$port\"]" '{"api.test": "127.0.0.1"}'
	nrun -- curl -sS -m 10 --cacert /ca.pem "https://api.test:$port/x"
	expect_contains "body" "$(stdout)" "hello from upstream /x"
	expect_contains "connect event" "$(< "$T/events")" '"protocol":"connect","host":"api.test"'
	expect_eq "denials" "$(denials)" 0
}

t_sni_mismatch_denied() {
	trap stop_fixtures EXIT
	start port tls "$TEST_TMP/cert.pem" "$TEST_TMP/key.pem"
	policy "[\"api.test:$port\"]" '{"api.test": "127.0.0.1"}'
	# domain fronting: CONNECT to the allowed name, SNI of another
	nrun -- curl -sS -m 10 -k --connect-to "evil.test:$port:api.test:$port" "https://evil.test:$port/"
	[ "$(json exit_code < "$T/out")" != 0 ] || fail "fronted request succeeded"
	expect_eq "denials" "$(denials)" 1
	expect_contains "reason" "$(denial_field reason)" "TLS SNI evil.test does not match the CONNECT name api.test"
	expect_eq "sni field" "$(denial_field sni)" "evil.test"
}

t_denied_name_gets_403_and_event() {
	policy '["web.test:80"]' '{"web.test": "127.0.0.1"}'
	nrun -- curl -sS -m 10 -D - http://evil.test/
	expect_contains "status" "$(stdout)" "403"
	expect_contains "header" "$(stdout)" "X-Corral-Denied: evil.test:80 is not in the allowlist"
	expect_contains "body" "$(stdout)" "corral: evil.test:80 is not in the allowlist"
	expect_eq "denials" "$(denials)" 1
	expect_eq "protocol" "$(denial_field protocol)" http
	expect_eq "host" "$(denial_field host)" evil.test
	expect_eq "port" "$(denial_field port)" 80
	expect_eq "method" "$(denial_field method)" GET
	expect_eq "json lists it" "$(json denials.0.host < "$T/out")" evil.test
	expect_contains "the result says so" "$(json reason < "$T/out")" "; denied: connection to evil.test:80 (evil.test:80 is not in the allowlist); 1 denial"
	nrun -- curl -sS -m 10 https://evil.test/
	expect_eq "connect denials" "$(denials)" 1
	expect_eq "connect protocol" "$(denial_field protocol)" connect
}

t_denied_port() {
	policy '["web.test:8080"]' '{"web.test": "127.0.0.1"}'
	nrun -- curl -sS -m 10 http://web.test:9090/
	expect_contains "reason" "$(denial_field reason)" "port 9090 of web.test is not allowed"
	expect_eq "denials" "$(denials)" 1
}

t_ip_literals_and_spellings() {
	trap stop_fixtures EXIT
	start port http
	policy "[\"web.test:$port\"]" '{"web.test": "127.0.0.1"}'
	for h in 127.0.0.1 2130706433 0x7f000001 0177.0.0.1 127.1 "[::ffff:127.0.0.1]" 169.254.169.254 0xa9fea9fe; do
		nrun -- env -u no_proxy -u NO_PROXY curl -sS -m 10 "http://$h:$port/"
		expect_not_contains "$h reached" "$(stdout)" "hello from upstream"
		expect_eq "$h denials" "$(denials)" 1
	done
}

t_userinfo_trick() {
	trap stop_fixtures EXIT
	start port http
	policy "[\"web.test:$port\"]" '{"web.test": "127.0.0.1"}'
	nrun -- /usr/bin/python3 -c "
import socket
s = socket.create_connection(('127.0.0.1', 3128))
s.sendall(b'GET http://web.test:$port@evil.test/ HTTP/1.1\r\nHost: evil.test\r\n\r\n')
print(s.recv(4096).decode(errors='replace'))"
	expect_not_contains "reached" "$(stdout)" "hello from upstream"
	expect_contains "refused" "$(stdout)" "HTTP/1.1 4"
	expect_eq "denials" "$(denials)" 1
}

t_socks5() {
	trap stop_fixtures EXIT
	start port http
	policy "[\"web.test:$port\"]" '{"web.test": "127.0.0.1"}'
	nrun -- curl -sS -m 10 --socks5-hostname 127.0.0.1:1080 "http://web.test:$port/s"
	expect_contains "allowed" "$(stdout)" "hello from upstream /s"
	nrun -- curl -sS -m 10 --socks5-hostname 127.0.0.1:1080 "http://evil.test/"
	expect_eq "denials" "$(denials)" 1
	expect_eq "protocol" "$(denial_field protocol)" socks
}

# A SOCKS5 tunnel is judged as CONNECT's is: the TLS hello's SNI must name
# the host the tunnel was allowed for (no domain fronting through 1080).
t_socks5_sni_must_match() {
	trap stop_fixtures EXIT
	start port tls "$TEST_TMP/cert.pem" "$TEST_TMP/key.pem"
	policy "[\"api.test:$port\"]" '{"api.test": "127.0.0.1"}'
	nrun -- /bin/sh -c "
curl -sS -m 10 --socks5-hostname 127.0.0.1:1080 --cacert /ca.pem https://api.test:$port/ok; echo
curl -sS -m 10 --socks5-hostname 127.0.0.1:1080 -k --connect-to evil.test:$port:api.test:$port https://evil.test:$port/fronted; echo rc=\$?"
	expect_contains "allowed" "$(stdout)" "hello from upstream /ok"
	expect_not_contains "fronted" "$(stdout)" "upstream /fronted"
	expect_eq "denials" "$(denials)" 1
	expect_contains "reason" "$(denial_field reason)" "TLS SNI evil.test does not match the SOCKS5 name api.test"
	expect_eq "protocol" "$(denial_field protocol)" socks
}

# A ClientHello naming name (none: no SNI), with an ECH extension if asked;
# and what a socket gives until it closes (64 KiB at most).
tls_hello_py='
import socket, struct, sys, time
def hello(name, ech=False):
    ext = b""
    if name:
        sni = struct.pack("!HBH", len(name) + 3, 0, len(name)) + name
        ext = struct.pack("!HH", 0, len(sni)) + sni
    if ech:
        # outer ECHClientHello: type, kdf, aead, config id, enc, payload
        body = struct.pack("!BHHB", 0, 1, 1, 7) + struct.pack("!H", 32) + bytes(32) + struct.pack("!H", 64) + bytes(64)
        ext += struct.pack("!HH", 0xfe0d, len(body)) + body
    b = struct.pack("!H", 0x0303) + bytes(32) + b"\x00" + struct.pack("!HH", 2, 0x1301) + b"\x01\x00" + struct.pack("!H", len(ext)) + ext
    hs = b"\x01" + struct.pack("!I", len(b))[1:] + b
    return b"\x16\x03\x01" + struct.pack("!H", len(hs)) + hs
def rest(s):
    got = b""
    while len(got) < 65536:
        try:
            k = s.recv(4096)
        except OSError:
            break
        if not k:
            break
        got += k
    return got
'

# A TLS hello with Encrypted Client Hello names in clear only the public
# name of the server that decrypts it; the server acts on the encrypted
# inner name (a CDN serves any of its sites so).  Refused on every path
# that judges a hello without terminating it: CONNECT, SOCKS5, and a
# transparent connection to a bare address; the same hello without ECH
# goes on.  ~0.6 s.
t_ech_hello_refused() {
	trap stop_fixtures EXIT
	start tport tls "$TEST_TMP/cert.pem" "$TEST_TMP/key.pem"
	policy "[\"api.test:$tport\"]" '{"api.test": "127.0.0.1"}'
	nrun -- /usr/bin/python3 -c "$tls_hello_py
for ech in (False, True):
    s = socket.create_connection(('127.0.0.1', 3128), 10)
    s.sendall(b'CONNECT api.test:$tport HTTP/1.1\r\n\r\n')
    s.recv(39)
    s.sendall(hello(b'api.test', ech))
    print('connect', ech, len(rest(s)) > 0)
    s = socket.create_connection(('127.0.0.1', 1080), 10)
    s.sendall(b'\x05\x01\x00')
    s.recv(2)
    s.sendall(b'\x05\x01\x00\x03\x08api.test' + struct.pack('!H', $tport))
    s.recv(10)
    s.sendall(hello(b'api.test', ech))
    print('socks', ech, len(rest(s)) > 0)"
	expect_contains "connect: no ECH, the server answers" "$(stdout)" "connect False True"
	expect_contains "socks: no ECH, the server answers" "$(stdout)" "socks False True"
	expect_contains "connect: ECH refused" "$(stdout)" "connect True False"
	expect_contains "socks: ECH refused" "$(stdout)" "socks True False"
	expect_eq "denials" "$(denials)" 2
	expect_contains "reason" "$(denial_field reason)" "TLS Encrypted Client Hello to api.test:$tport"
	policy "[\"api.test:$tport\"]" '{"api.test": "127.0.0.1"}' ', "transparent": true'
	nrun -- /usr/bin/python3 -c "$tls_hello_py
s = socket.create_connection(('198.18.5.5', $tport), 10)
s.sendall(hello(b'api.test', True))
print('transparent', len(rest(s)) > 0)"
	expect_contains "transparent: ECH refused" "$(stdout)" "transparent False"
	expect_eq "transparent denials" "$(denials)" 1
	expect_contains "transparent reason" "$(denial_field reason)" "Encrypted Client Hello"
}

# A TLS 1.3 server that wants another key share answers the first hello
# with a HelloRetryRequest, and the client sends a second hello, in clear,
# which is the one the server goes on with: judged as the first was (its
# SNI the first's, no ECH), whether it follows the server's answer, comes
# behind a ChangeCipherSpec, in pieces, or was sent at once with the first; the
# server's answer split over records and writes is read whole.  After a
# ServerHello (or an alert) the tunnel is blind: what follows passes, and
# so do bytes sent at once behind the hello (0-RTT early data), held until
# the server answered.
# The server is fixtures.py's hrr, which logs the name of the second hello
# it got; CONNECT, SOCKS5, transparent to an address and to a name.  ~2 s.
hrr_client_py='
CCS = b"\x14\x03\x03\x00\x01\x01"
ALERT = b"\x15\x03\x03\x00\x02\x02\x28"
def tunnel(how, port):
    if how == "connect":
        s = socket.create_connection(("127.0.0.1", 3128), 10)
        s.sendall(b"CONNECT api.test:%d HTTP/1.1\r\n\r\n" % port)
        head = b""
        while b"\r\n\r\n" not in head:
            head += s.recv(1)
        return s
    if how == "socks":
        s = socket.create_connection(("127.0.0.1", 1080), 10)
        s.sendall(b"\x05\x01\x00")
        s.recv(2)
        s.sendall(b"\x05\x01\x00\x03\x08api.test" + struct.pack("!H", port))
        s.recv(10)
        return s
    return socket.create_connection((how, port), 10)
def upto(s, end):
    got = b""
    while not got.endswith(end) and len(got) < 65536:
        try:
            k = s.recv(4096)
        except OSError:
            k = b""
        if not k:
            return False
        got += k
    return True
def case(label, how, port, first, second, end=CCS, together=False, pieces=False):
    s = tunnel(how, port)
    if together:
        s.sendall(first + second)
    else:
        s.sendall(first)
        if upto(s, end):
            for i in range(0, len(second), 7 if pieces else len(second) or 1):
                s.sendall(second[i:i + 7] if pieces else second)
                if pieces:
                    time.sleep(0.01)
    print(label, "done" if rest(s).endswith(b"done") else "closed", flush=True)
'

t_hello_retry_second_hello_judged() {
	trap stop_fixtures EXIT
	: > "$T/hrr.log"
	start rport hrr "$T/hrr.log" retry
	start sport hrr "$T/hrr.log" split
	start hport hrr "$T/hrr.log" hello
	start aport hrr "$T/hrr.log" alert
	policy "[\"api.test:$rport\", \"api.test:$sport\", \"api.test:$hport\", \"api.test:$aport\"]" \
		'{"api.test": "127.0.0.1"}' ', "transparent": true'
	nrun -- /usr/bin/python3 -c "$tls_hello_py$hrr_client_py
A, E = b'api.test', b'evil.test'
case('same', 'connect', $rport, hello(A), CCS + hello(A))
case('same-no-ccs', 'connect', $rport, hello(A), hello(A))
case('other', 'connect', $rport, hello(A), CCS + hello(E))
case('together', 'connect', $rport, hello(A), hello(E), together=True)
case('pieces-same', 'connect', $rport, hello(A), CCS + hello(A), pieces=True)
case('pieces-other', 'connect', $rport, hello(A), CCS + hello(E), pieces=True)
case('nosni', 'connect', $rport, hello(A), CCS + hello(None))
case('ech', 'connect', $rport, hello(A), CCS + hello(A, ech=True))
case('two-ccs', 'connect', $rport, hello(A), CCS + CCS + hello(E))
case('split', 'connect', $sport, hello(A), CCS + hello(E))
case('socks', 'socks', $rport, hello(A), CCS + hello(E))
case('address-same', '198.18.5.5', $rport, hello(A), CCS + hello(A))
case('address-other', '198.18.5.5', $rport, hello(A), CCS + hello(E))
case('name-other', 'api.test', $rport, hello(A), CCS + hello(E))
case('after-hello', 'connect', $hport, hello(A), hello(E))
case('early-data', 'connect', $hport, hello(A) + b'\x17\x03\x03\x00\x05early', b'', together=True)
case('after-alert', 'connect', $aport, hello(A), hello(E), end=ALERT)"
	for c in same same-no-ccs pieces-same address-same after-hello early-data after-alert; do
		expect_contains "$c: passed" "$(stdout)" "$c done"
	done
	for c in other together pieces-other nosni ech two-ccs split socks address-other name-other; do
		expect_contains "$c: refused" "$(stdout)" "$c closed"
	done
	# the upstream got the good second hellos, none naming another host
	expect_eq "second hellos upstream" "$(grep -c '^second api.test$' "$T/hrr.log")" 4
	expect_not_contains "no other name upstream" "$(grep '^second' "$T/hrr.log")" evil
	expect_not_contains "no nameless hello upstream" "$(< "$T/hrr.log")" none
	# after a ServerHello or an alert, and early data held until the server answered
	expect_eq "blind after the answer" "$(grep -c '^next' "$T/hrr.log")" 3
	expect_contains "early data went on" "$(< "$T/hrr.log")" "next 10"
	expect_eq "denials" "$(denials)" 10
	expect_contains "reason" "$(< "$T/events")" \
		"a second TLS hello (after a HelloRetryRequest) names evil.test, the first named api.test"
	expect_contains "reason without sni" "$(< "$T/events")" \
		"a second TLS hello (after a HelloRetryRequest) names no host, the first named api.test"
	expect_contains "reason ech" "$(< "$T/events")" "TLS Encrypted Client Hello to api.test:$rport"
	expect_contains "reason two ccs" "$(< "$T/events")" \
		"whose second hello (after a HelloRetryRequest) is not a readable ClientHello"
}

# A real TLS 1.3 server that takes only P-384 asks curl (whose first hello
# offers an X25519 key share) for a second hello: the handshake completes
# through CONNECT, SOCKS5 and transparent mode, with no denial.  The same
# server's HelloRetryRequest, as OpenSSL writes it (with a
# ChangeCipherSpec behind it), is recognised: a second hello from another
# OpenSSL context, for another name, is refused.  ~1 s.
t_hello_retry_real_server() {
	trap stop_fixtures EXIT
	start tport tls-p384 "$TEST_TMP/cert.pem" "$TEST_TMP/key.pem"
	policy "[\"api.test:$tport\"]" '{"api.test": "127.0.0.1"}' ', "transparent": true'
	nrun -- /bin/sh -c "
curl -sS -m 10 --cacert /ca.pem https://api.test:$tport/connect; echo
curl -sS -m 10 --socks5-hostname 127.0.0.1:1080 --cacert /ca.pem https://api.test:$tport/socks; echo
env -u https_proxy -u HTTPS_PROXY -u all_proxy -u ALL_PROXY curl -sS -m 10 --cacert /ca.pem https://api.test:$tport/transparent; echo"
	expect_contains "connect" "$(stdout)" "hello from upstream /connect"
	expect_contains "socks" "$(stdout)" "hello from upstream /socks"
	expect_contains "transparent" "$(stdout)" "hello from upstream /transparent"
	expect_eq "no denials" "$(denials)" 0
	nrun -- /usr/bin/python3 -c "$tls_hello_py$hrr_client_py
import ssl
def first_flight(name, curve=None):
    ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
    if curve:
        ctx.set_ecdh_curve(curve)
    o = ssl.MemoryBIO(); t = ctx.wrap_bio(ssl.MemoryBIO(), o, server_hostname=name)
    try: t.do_handshake()
    except ssl.SSLWantReadError: pass
    return o.read()
case('openssl-other', 'connect', $tport, first_flight('api.test'), CCS + first_flight('evil.test', 'secp384r1'))"
	expect_contains "refused" "$(stdout)" "openssl-other closed"
	expect_eq "denials" "$(denials)" 1
	expect_contains "reason" "$(denial_field reason)" "names evil.test, the first named api.test"
}

# A hello without SNI to a host reached by name leaves the server to pick
# the site (its default, or the Host inside, which is never seen): refused,
# also as an SSLv2-format hello (no extensions, no name; OpenSSL 3.0 still
# answers one).  Clients name the host they reach by name (curl, Python
# and Node all do); to an address the policy allows there is no name to
# send, and none is asked for.  ~1 s.
t_hello_without_sni_refused_by_name() {
	trap stop_fixtures EXIT
	start tport tls "$TEST_TMP/cert.pem" "$TEST_TMP/key.pem"
	policy "[\"api.test:$tport\", \"127.0.0.1:$tport\"]" '{"api.test": "127.0.0.1"}' \
		', "transparent": true'
	nrun -- /usr/bin/python3 -c "$tls_hello_py$hrr_client_py
V2 = bytes([0x80, 56, 1, 3, 3, 0, 15, 0, 0, 0, 32]) + bytes([0, 0xc0, 0x2f, 0, 0xc0, 0x30, 0, 0, 0x9c, 0, 0, 0x2f, 0, 0, 0x35]) + bytes(range(32))
def answered(s, first):
    s.sendall(first)
    try:
        k = s.recv(1)
    except OSError:
        k = b''
    return 'answered' if k in (b'\x15', b'\x16') else 'closed'
for how in ('connect', 'socks', 'api.test'):
    print(how, 'sni', answered(tunnel(how, $tport), hello(b'api.test')))
    print(how, 'nosni', answered(tunnel(how, $tport), hello(None)))
    print(how, 'v2', answered(tunnel(how, $tport), V2))
s = socket.create_connection(('127.0.0.1', 3128), 10)
s.sendall(b'CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n' % $tport)
head = b''
while b'\r\n\r\n' not in head:
    head += s.recv(1)
print('address nosni', answered(s, hello(None)))"
	for how in connect socks api.test; do
		expect_contains "$how: with sni" "$(stdout)" "$how sni answered"
		expect_contains "$how: without sni" "$(stdout)" "$how nosni closed"
		expect_contains "$how: sslv2" "$(stdout)" "$how v2 closed"
	done
	expect_contains "an address: no name to send" "$(stdout)" "address nosni answered"
	expect_eq "denials" "$(denials)" 6
	expect_contains "reason" "$(denial_field reason)" "a TLS hello without SNI to api.test:$tport"
	# what real clients send to an address: no SNI, and they get through
	nrun -- env -u no_proxy -u NO_PROXY curl -sS -m 10 -k https://127.0.0.1:$tport/curl
	expect_contains "curl to an address" "$(stdout)" "hello from upstream /curl"
	expect_eq "no denials" "$(denials)" 0
}

# A CONNECT written at once with the tunnel's first bytes (the proxy reads
# both when it accepts, and sends the bytes on without the pipe): they
# reach the upstream, once, counted; an upstream that refuses is a 502 for
# CONNECT and "connection refused" for SOCKS, not an open tunnel.
t_connect_with_first_bytes_and_refused_upstream() {
	trap stop_fixtures EXIT
	start port http
	dead=$(free_port)
	policy "[\"web.test:$port\", \"web.test:$dead\"]" '{"web.test": "127.0.0.1"}'
	nrun -- /usr/bin/python3 -c "
import socket, struct
req = b'GET /first HTTP/1.1\r\nHost: web.test\r\nConnection: close\r\n\r\n'
s = socket.create_connection(('127.0.0.1', 3128), 10)
s.sendall(b'CONNECT web.test:$port HTTP/1.1\r\nHost: web.test:$port\r\n\r\n' + req)
data = b''
while len(data) < 65536:
    k = s.recv(4096)
    if not k: break
    data += k
print('tunnel', data.split(b' ')[1].decode(), data.count(b'hello from upstream /first'), len(req))
s = socket.create_connection(('127.0.0.1', 3128), 10)
s.sendall(b'CONNECT web.test:$dead HTTP/1.1\r\nHost: web.test:$dead\r\n\r\n')
print('refused', s.recv(4096).split(b' ')[1].decode())
s = socket.create_connection(('127.0.0.1', 1080), 10)
s.sendall(b'\x05\x01\x00')
s.recv(2)
s.sendall(b'\x05\x01\x00\x03\x08web.test' + struct.pack('!H', $dead))
print('socks', s.recv(10)[1])"
	expect_contains "bytes with the request: one answer" "$(stdout)" "tunnel 200 1 58"
	expect_contains "refused upstream: 502" "$(stdout)" "refused 502"
	expect_contains "refused upstream: SOCKS reply 5" "$(stdout)" "socks 5"
	expect_contains "counted once" "$(grep '"type":"egress.closed"' "$T/events" | grep "\"port\":$port,")" '"bytes_up":58,'
	expect_eq "no denials" "$(denials)" 0
}

# A CONNECT tunnel's first bytes are read by the relay and judged before
# any goes upstream: a TLS hello split across reads is put together and
# its SNI judged (a fronted one refused, nothing passed on); and tunnels
# opened one after another, their relays' pipes reused, some sending their
# request only after the proxy took the connection, one leaving without a
# word, each get only their own answer.
t_connect_hello_in_pieces_and_tunnels_in_sequence() {
	trap stop_fixtures EXIT
	start port http
	start tport tls "$TEST_TMP/cert.pem" "$TEST_TMP/key.pem"
	policy "[\"web.test:$port\", \"api.test:$tport\"]" \
		'{"web.test": "127.0.0.1", "api.test": "127.0.0.1"}'
	nrun -- /usr/bin/python3 -c "
import socket, ssl, time
def tunnel(name, port, late=False):
    s = socket.create_connection(('127.0.0.1', 3128), 10)
    if late:    # the request after the proxy took the connection
        time.sleep(0.05)
    s.sendall(b'CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n' % (name, port, name, port))
    head = b''
    while b'\r\n\r\n' not in head:
        k = s.recv(4096)
        if not k: return None
        head += k
    return s if head.split(b' ')[1] == b'200' else None
def hello(sni):
    ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
    o = ssl.MemoryBIO(); t = ctx.wrap_bio(ssl.MemoryBIO(), o, server_hostname=sni)
    try: t.do_handshake()
    except ssl.SSLWantReadError: pass
    return o.read()
for sni in ('api.test', 'evil.test'):
    s = tunnel(b'api.test', $tport)
    h = hello(sni)
    s.sendall(h[:3]); time.sleep(0.2); s.sendall(h[3:])
    try: k = s.recv(1)
    except OSError: k = b''
    print(sni, 'answered' if k == b'\x16' else 'closed', len(h))
for sni in ('api.test', 'evil.test'):   # the hello in the CONNECT's own write
    s = socket.create_connection(('127.0.0.1', 3128), 10)
    s.sendall(b'CONNECT api.test:%d HTTP/1.1\r\nHost: api.test:%d\r\n\r\n' % ($tport, $tport) + hello(sni))
    data = b''
    while b'\r\n\r\n' not in data or len(data) <= data.index(b'\r\n\r\n') + 4:
        try: k = s.recv(4096)
        except OSError: k = b''
        if not k: break
        data += k
    end = data.find(b'\r\n\r\n') + 4
    print('together', sni, 'answered' if data[end:end + 1] == b'\x16' else 'closed')
socket.create_connection(('127.0.0.1', 3128), 10).close()   # says nothing, leaves
ok = 0
for i in range(40):
    s = tunnel(b'web.test', $port, i % 8 == 0)
    s.sendall(b'GET /n%d HTTP/1.1\r\nHost: web.test\r\nConnection: close\r\n\r\n' % i)
    data = b''
    while True:
        k = s.recv(65536)
        if not k: break
        data += k
    s.close()
    ok += data.count(b'hello from upstream /n%d\n' % i) == 1 and data.count(b'hello from upstream') == 1
print('own answers', ok)"
	expect_contains "split hello, right SNI: the server answers" "$(stdout)" "api.test answered"
	expect_contains "split hello, fronted SNI: closed" "$(stdout)" "evil.test closed"
	expect_contains "hello with the CONNECT, right SNI" "$(stdout)" "together api.test answered"
	expect_contains "hello with the CONNECT, fronted SNI" "$(stdout)" "together evil.test closed"
	expect_eq "a denial each fronted hello" "$(denials)" 2
	expect_contains "reason" "$(denial_field reason)" "TLS SNI evil.test does not match the CONNECT name api.test"
	expect_contains "each tunnel its own answer" "$(stdout)" "own answers 40"
	expect_eq "every tunnel recorded" "$(grep -c '"type":"egress.allowed"' "$T/events")" 44
	expect_eq "every tunnel's end recorded" "$(grep -c '"type":"egress.closed"' "$T/events")" 44
}

t_dns_never_leaves_and_guard() {
	trap stop_fixtures EXIT
	log=$T/dns.log
	: > "$log"
	start dport dns "$log" meta.test=169.254.169.254 ok.test=127.0.0.1
	start hport http
	# ok.test's address is loopback: usable only because it is allowed explicitly
	policy "[\"meta.test:$hport\", \"ok.test:$hport\", \"127.0.0.1:$hport\"]" '{}' \
		", \"resolver\": \"127.0.0.1:$dport\", \"transparent\": false"
	nrun -- /bin/sh -c "getent hosts unlisted.test; echo rc=\$?; getent hosts ok.test; curl -sS -m 10 http://meta.test:$hport/; echo; curl -sS -m 10 http://ok.test:$hport/ok"
	expect_contains "unlisted" "$(stdout)" "rc=2"
	expect_contains "allowed name resolves" "$(stdout)" "127.0.0.1"
	expect_contains "via resolver" "$(stdout)" "hello from upstream /ok"
	expect_contains "metadata refused" "$(< "$T/events")" "169.254.169.254"
	if grep -q unlisted "$log"; then fail "the unlisted name reached the upstream resolver"; fi
	grep -q '^ok.test$' "$log" || fail "the allowed name was never resolved upstream"
	expect_contains "dns denial" "$(< "$T/events")" '"protocol":"dns","host":"unlisted.test"'
}

# An allowed name no resolver knows: the 502 says which resolver was asked
# and points at network.hosts, over HTTP and SOCKS5 (inside the tunnel);
# a CONNECT tunnel whose TLS has begun gets it only in the record, on its
# egress.closed.  The resolver is the test's own on loopback (the host's
# may not be), and says NXDOMAIN for every name.
t_unresolved_allowed_name_points_at_hosts() {
	trap stop_fixtures EXIT
	log=$T/dns.log
	: > "$log"
	start dport dns "$log"
	policy '["gone.invalid:80", "gone.invalid:443"]' '{}' \
		", \"resolver\": \"127.0.0.1:$dport\", \"transparent\": false"
	nrun -- /bin/sh -c 'curl -sS -m 10 http://gone.invalid/; echo; curl -sS -m 10 --socks5-hostname 127.0.0.1:1080 http://gone.invalid/s; echo; curl -sS -m 10 -p -x http://127.0.0.1:3128 https://gone.invalid/ 2>&1 && echo TLS-OK'
	want="cannot resolve gone.invalid: nodename nor servname provided, or not known (asked network.resolver 127.0.0.1:$dport); to give it an address, map it in the policy's network.hosts: {\"gone.invalid\": \"ADDRESS\"}"
	expect_eq "HTTP and SOCKS5: what to do" "$(stdout | grep -c -F "corral: $want")" 2
	case $(stdout) in *TLS-OK*) fail "the CONNECT tunnel's request succeeded" ;; esac
	expect_contains "the record: the tunnel's end says it" \
		"$(grep '"type":"egress.closed","protocol":"connect"' "$T/events")" \
		"\"reason\":\"$(printf '%s' "$want" | sed 's/"/\\"/g')\""
	grep -q '^gone.invalid$' "$log" || fail "the test's resolver was not asked"
}

# An allowed name is resolved as written, never with the host's search
# domains behind it: "gone.test" that does not exist must not become
# "gone.test.corp.test", a name the policy does not name.  The host's
# resolv.conf is a test's own, bound over /etc/resolv.conf in a mount
# namespace, its resolver on 127.0.0.1:53 in a network namespace the
# test made; corral runs in both.  Root only; ~1 s.
t_search_domains_never_appended() {
	[ "$ME" = 0 ] || { skip "needs root to make a network and a mount namespace"; return 77; }
	command -v ip >/dev/null && command -v nsenter >/dev/null ||
		{ skip "no iproute2 or nsenter"; return 77; }
	ns=corral-s$$
	cleanup() {
		stop_fixtures
		ip netns del "$ns" 2>/dev/null || true
	}
	trap cleanup EXIT
	ip netns add "$ns"
	ip -n "$ns" link set lo up
	log=$T/dns.log
	: > "$log"
	printf 'nameserver 127.0.0.1\nsearch corp.test\noptions ndots:1 attempts:1 timeout:2\n' > "$T/resolv.conf"
	pf=$T/dns.port
	nsenter --net="/run/netns/$ns" /usr/bin/python3 "$FIX" dns53 "$pf" "$log" \
		gone.test.corp.test=127.0.0.1 here.test=127.0.0.1 >/dev/null 2>&1 &
	PIDS="$PIDS $!"
	for _ in $(seq 1 100); do [ -s "$pf" ] && break; sleep 0.05; done
	policy '["gone.test", "here.test", "127.0.0.1"]' '{}' ', "transparent": false'
	: > "$T/events"
	nsenter --net="/run/netns/$ns" unshare -m --propagation private /bin/sh -c '
		mount --bind "$1" /etc/resolv.conf && shift && exec "$@"' sh "$T/resolv.conf" \
		timeout 60 "$CORRAL" run --json --policy "$T/p.json" --events "$T/events" -- \
		/bin/sh -c 'getent hosts here.test; getent hosts gone.test; echo rc=$?' \
		> "$T/out" 2> "$T/err" < /dev/null
	expect_contains "an existing name resolves" "$(stdout)" "127.0.0.1       here.test"
	expect_contains "a name that does not exist does not" "$(stdout)" "rc=2"
	grep -q '^gone.test$' "$log" || fail "gone.test was never asked: $(< "$log")"
	if grep -q 'corp.test' "$log"; then fail "a search domain was appended: $(< "$log")"; fi
}

# Only A and AAAA questions for an allowed name are asked of the host's
# resolver: TXT (the classic tunnel), ANY, MX, and AXFR over TCP are
# answered here, empty, whatever EDNS size they offer, and never leave.
# A guard (this held already); ~0.4 s.
t_dns_other_types_never_leave() {
	trap stop_fixtures EXIT
	log=$T/dns.log
	: > "$log"
	start dport dns "$log" ok.test=198.18.9.9
	policy '["ok.test"]' '{}' ", \"resolver\": \"127.0.0.1:$dport\", \"transparent\": false"
	nrun -- /usr/bin/python3 -c '
import socket, struct
def q(qtype, edns=False):
    m = struct.pack("!HHHHHH", 9, 0x100, 1, 0, 0, 1 if edns else 0)
    m += b"\x02ok\x04test\x00" + struct.pack("!HH", qtype, 1)
    if edns:
        m += b"\x00" + struct.pack("!HHIH", 41, 65535, 0, 0)
    return m
out = []
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.settimeout(5)
for t, e in ((16, False), (16, True), (255, True), (15, False)):
    u.sendto(q(t, e), ("127.0.0.1", 53))
    r = u.recv(65535)
    out.append("%d:rcode=%d,answers=%d" % (t, r[3] & 15, struct.unpack("!H", r[6:8])[0]))
s = socket.create_connection(("127.0.0.1", 53), 5)
m = q(252)
s.sendall(struct.pack("!H", len(m)) + m)
n = struct.unpack("!H", s.recv(2))[0]
r = s.recv(n)
out.append("252:rcode=%d,answers=%d" % (r[3] & 15, struct.unpack("!H", r[6:8])[0]))
print(" ".join(out))'
	expect_eq "answered here, empty" "$(stdout)" \
		"16:rcode=0,answers=0 16:rcode=0,answers=0 255:rcode=0,answers=0 15:rcode=0,answers=0 252:rcode=0,answers=0"
	[ ! -s "$log" ] || fail "questions reached the resolver: $(< "$log")"
}

t_udp_icmp_raw_go_nowhere() {
	for tr in false true; do
		policy '["web.test:80"]' '{"web.test": "127.0.0.1"}' ", \"transparent\": $tr"
		nrun -- /usr/bin/python3 -c '
import socket, errno
def attempt(name, fn):
    try:
        fn(); print(name, "SENT")
    except OSError as e:
        print(name, "blocked", errno.errorcode.get(e.errno, e.errno))
attempt("udp", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("198.18.0.9", 9)))
attempt("udp6", lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM).sendto(b"x", ("2001:db8::9", 9)))
attempt("icmp", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP))
attempt("raw", lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP))
attempt("tcp-lo", lambda: socket.create_connection(("127.0.0.1", 9999), 2))'
		out=$(stdout)
		expect_not_contains "nothing sent (transparent $tr)" "$out" "SENT"
		expect_contains "udp ($tr)" "$out" "udp blocked"
		expect_contains "udp6 ($tr)" "$out" "udp6 blocked"
		expect_contains "icmp ($tr)" "$out" "icmp blocked"
		expect_contains "raw ($tr)" "$out" "raw blocked"
	done
	# a TCP connection to an outside address reaches only the supervisor,
	# which finds no name in it and refuses
	policy '["web.test:80"]' '{"web.test": "127.0.0.1"}'
	nrun -- /usr/bin/python3 -c '
import socket
s = socket.create_connection(("198.18.0.9", 80), 5)
s.sendall(b"\x00\x01 not a protocol\r\n\r\n")
s.settimeout(5)
print("reply", s.recv(100))'
	expect_eq "denials" "$(denials)" 1
	expect_contains "reason" "$(denial_field reason)" "names no host"
}

# UDP to an outside address (QUIC's 443 too) is dropped inside the
# sandbox's netns, whose only interface is lo: no packet leaves it.  Each
# is an egress.denied event with its protocol and destination, and the
# result's reason names the first.
# The nat rules turn conntrack on in the sandbox's netns: each entry is
# host kernel memory no cgroup of the sandbox's is charged for, up to the
# host's nf_conntrack_max in every netns (67 MB for a loopback UDP spray
# under --memory 32M).  Loopback's own traffic is left untracked; the
# answers of the transparent listener and of DNS, loopback to loopback
# too, are still translated back (a bare address's request, a question to
# an outside server).
t_loopback_traffic_untracked() {
	trap stop_fixtures EXIT
	start port web "$T/web.log"
	policy "[\"web.test:$port\"]" '{"web.test": "127.0.0.1"}' ', "transparent": true'
	nrun -- /usr/bin/env -i PATH=/usr/bin:/bin /usr/bin/python3 -c '
import socket, struct, sys
for fam, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
    srv = socket.socket(fam, socket.SOCK_DGRAM)
    srv.bind((host, 0))
    for _ in range(1500):
        s = socket.socket(fam, socket.SOCK_DGRAM)
        s.sendto(b"x", srv.getsockname()[:2])
        s.close()
    lst = socket.socket(fam, socket.SOCK_STREAM)
    lst.bind((host, 0)); lst.listen(64)
    for _ in range(50):
        c = socket.create_connection(lst.getsockname()[:2]); lst.accept()[0].close(); c.close()
c = socket.create_connection(("198.18.5.5", int(sys.argv[1])), timeout=10)
c.sendall(b"GET /a HTTP/1.1\r\nHost: web.test\r\nConnection: close\r\n\r\n")
got = b""
for _ in range(1000):
    d = c.recv(65536)
    got += d
    if not d or b"\r\n" in got:
        break
print("transparent", got.split(b"\r\n")[0].decode())
q = struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0) + b"\x03web\x04test\x00" + struct.pack(">HH", 1, 1)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.settimeout(5)
u.connect(("198.18.0.53", 53))
u.send(q)
print("dns", "answered" if u.recv(512)[:2] == b"\x12\x34" else "misanswered")
print("tracked", open("/proc/sys/net/netfilter/nf_conntrack_count").read().strip())' "$port"
	expect_eq "exit" "$(< "$T/rc")" 0 || { cat "$T/err"; cat "$T/out"; return 1; }
	out=$(stdout)
	expect_contains "a bare address's request" "$out" "transparent HTTP/1.1 200"
	expect_contains "a question to an outside server" "$out" "dns answered"
	n=$(sed -n 's/^tracked //p' <<< "$out")
	[ -n "$n" ] && [ "$n" -lt 100 ] || fail "loopback traffic tracked: $n entries for 3,100 flows"
}

# What stays tracked (the proxy's redirects) ends in seconds once closed
# or unanswered, in this netns alone: a flood of them holds a tenth of the
# entries.  The sandbox cannot set them back (/proc/sys is read-only).
t_conntrack_timeouts_short() {
	policy '["web.test:80"]' '{"web.test": "127.0.0.1"}'
	nrun -- /bin/sh -c 'cd /proc/sys/net/netfilter && for f in nf_conntrack_tcp_timeout_time_wait \
		nf_conntrack_tcp_timeout_syn_sent nf_conntrack_udp_timeout; do echo "$f $(cat $f)"; done
echo 120 > nf_conntrack_tcp_timeout_time_wait || echo "refused"'
	out=$(stdout)
	expect_contains "time_wait" "$out" "nf_conntrack_tcp_timeout_time_wait 10"
	expect_contains "syn_sent" "$out" "nf_conntrack_tcp_timeout_syn_sent 20"
	expect_contains "udp" "$out" "nf_conntrack_udp_timeout 10"
	expect_contains "the sandbox's write" "$out" "refused"
	[ "$(cat /proc/sys/net/netfilter/nf_conntrack_tcp_timeout_time_wait 2>/dev/null || echo 120)" != 10 ] ||
		fail "the host's own timeout changed"
}

t_udp_off_loopback_is_an_event() {
	policy '["web.test:80"]' '{"web.test": "127.0.0.1"}'
	nrun -- /usr/bin/python3 -c '
import socket, errno
print("ifaces", sorted(l.split(":")[0].strip() for l in open("/proc/net/dev").readlines()[2:]))
def send(fam, addr):
    s = socket.socket(fam, socket.SOCK_DGRAM)
    try:
        s.sendto(b"x", addr); print(addr[0], "SENT")
    except OSError as e:
        print(addr[0], "blocked", errno.errorcode.get(e.errno, e.errno))
send(socket.AF_INET, ("198.18.0.9", 9))
send(socket.AF_INET, ("203.0.113.1", 443))
send(socket.AF_INET6, ("2001:db8::9", 4433))'
	out=$(stdout)
	expect_contains "only lo" "$out" "ifaces ['lo']"
	expect_not_contains "nothing sent" "$out" "SENT"
	expect_contains "dropped" "$out" "198.18.0.9 blocked EPERM"
	ev=$(< "$T/events")
	expect_contains "udp event" "$ev" '"type":"egress.denied","protocol":"udp","host":"198.18.0.9","port":9,'
	expect_contains "quic event" "$ev" '"type":"egress.denied","protocol":"udp","host":"203.0.113.1","port":443,'
	expect_contains "udp6 event" "$ev" '"type":"egress.denied","protocol":"udp","host":"2001:db8::9","port":4433,'
	expect_eq "denials" "$(denials)" 3
	expect_contains "result names it" "$(json reason < "$T/out")" "denied: udp to 198.18.0.9:9 ("
	expect_contains "result's denials" "$(json denials < "$T/out")" '"host": "203.0.113.1", "port": 443'
}

# New flows past the sandbox's rate (4 a second for each of
# limits.connections, at least 256: nft.c) are turned away inside its
# netns, before the proxy sees them.  They used to leave no trace; now a
# sample of them (the log's own limit) are egress.denied events naming
# the bound, which the result and the abort criteria count.
t_flows_over_the_rate_are_denials() {
	# every event whole (the first 10 of a destination by default, and the
	# proxy's own denials of the flows let through share this one)
	policy '["web.test:80"]' '{"web.test": "127.0.0.1"}' \
		'}, "limits": {"connections": 16}, "events": {"verbatim": 5000'
	nrun -- /usr/bin/python3 -c '
import errno, socket
refused = 0
for i in range(1000):
    s = socket.socket()
    s.setblocking(False)
    try:
        s.connect(("198.18.0.9", 80))
    except BlockingIOError:
        pass
    except ConnectionRefusedError:
        refused += 1
    s.close()
for i in range(1000):
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        u.sendto(b"q", ("198.18.0.9", 53))
    except PermissionError:     # past the rate: dropped, in here
        pass
    u.close()
print("sent")'
	expect_eq "run ended normally" "$(< "$T/rc")" 0
	expect_contains "ran" "$(stdout)" "sent"
	ev=$(grep '"type":"egress.denied"' "$T/events")
	expect_contains "a refused connection" "$ev" \
		'"protocol":"tcp","host":"198.18.0.9","port":80,"reason":"refused: more than 256 new connections a second (4 for each of limits.connections, at least 256)"'
	expect_contains "a dropped question" "$ev" \
		'"protocol":"udp","host":"198.18.0.9","port":53,"reason":"dropped: more than 256 new DNS questions a second'
	# sampled: the log rules' own limit (25 a second each, as many at once)
	n=$(grep -c 'more than 256 new' <<< "$ev")
	[ "$n" -le 120 ] || fail "$n over-rate denials logged: the log's limit is 25 a second a rule"
	expect_contains "the result lists them" "$(json denials < "$T/out")" "more than 256 new connections"
}

# DNS to any server on udp/53 is still answered by the supervisor's
# resolver (an allowed name, and a refusal as a dns denial), not dropped
# and logged as UDP.
t_udp_dns_still_goes_to_the_resolver() {
	policy '["web.test:80"]' '{"web.test": "127.0.0.1"}'
	nrun -- /usr/bin/python3 -c '
import socket, struct
def ask(server, name, fam=socket.AF_INET):
    q = struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0)
    q += b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0"
    q += struct.pack(">HH", 1, 1)
    s = socket.socket(fam, socket.SOCK_DGRAM); s.settimeout(5)
    s.sendto(q, (server, 53))
    r = s.recv(512)
    print(name, "via", server, "rcode", r[3] & 15, "answers", struct.unpack(">H", r[6:8])[0])
ask("198.18.0.9", "web.test")
ask("198.18.0.9", "unlisted.test")
ask("2001:db8::9", "web.test", socket.AF_INET6)'
	out=$(stdout)
	expect_contains "allowed name answered" "$out" "web.test via 198.18.0.9 rcode 0 answers 1"
	expect_contains "over IPv6 too" "$out" "web.test via 2001:db8::9 rcode 0 answers 1"
	expect_contains "refused name answered" "$out" "unlisted.test via 198.18.0.9 rcode"
	expect_contains "dns denial" "$(< "$T/events")" '"protocol":"dns","host":"unlisted.test"'
	expect_not_contains "not logged as udp" "$(< "$T/events")" '"protocol":"udp"'
}

# A spray of UDP at 60000 random destinations, IPv4 and IPv6, from one
# socket each and from a fresh socket now and then: the rule's limit
# bounds what is logged, the first KINDS_MAX destinations are named one by
# one and each of the rest (one kind, "other") written whole once while
# those lines take under a quarter of the budget, and the counting stays
# exact (what the log says adds up to the result's denials).  The IPv4 and
# IPv6 rules have a limit each: together at most 200 a second, not 400.
t_udp_spray_to_many_destinations_is_bounded() {
	policy '["web.test:80"]' '{"web.test": "127.0.0.1"}'
	nrun -- /usr/bin/python3 -c '
import socket, random, time
s4 = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s6 = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
t = time.monotonic(); n = 0
while n < 60000:
    try:
        if n % 1000 == 0:
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"z", ("198.18.0.%d" % (n // 1000 + 1), 53 + n))
        elif n % 2:
            s4.sendto(b"x" * 1400, ("%d.%d.%d.%d" % (random.randint(1, 223), random.randint(0, 255),
                       random.randint(0, 255), random.randint(1, 254)), random.randint(1, 65535)))
        else:
            s6.sendto(b"y", ("2001:db8::%x" % random.randint(1, 65535), random.randint(1, 65535)))
    except OSError:
        pass
    n += 1
print("sent", n, "seconds", int(time.monotonic() - t) + 1)'
	read -r _ sent _ secs <<< "$(stdout | grep '^sent ')"
	[ "${sent:-}" = 60000 ] || { fail "the spray did not run: $(head -c 600 "$T/out") $(< "$T/err")"; return; }
	read -r whole dests total lines unnamed <<< "$(/usr/bin/python3 -c '
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
whole = [e for e in lines if e["type"] == "egress.denied"]
sums = [e for e in lines if e["type"] == "egress.denied.summary"]
named = {"%s:%s" % (e["host"], e["port"]) for e in whole}
named |= {n for e in sums for n in e.get("names", [])}
kept = {"%s:%s" % (e["host"], e["port"]) for e in json.load(open(sys.argv[2]))["denials"]}
print(len(whole), len({(e["host"], e["port"]) for e in whole}),
      len(whole) + sum(e["count"] for e in sums), len(lines), len(kept - named))' "$T/events" "$T/out")"
	denied=$(json reason < "$T/out" | sed -n 's/.*; \([0-9]*\) denials$/\1/p')
	[ -n "$denied" ] || fail "the result counts no denials: $(json reason < "$T/out")"
	expect_eq "the log adds up to the result's count" "$total" "$denied"
	[ "$denied" -le $((200 + 200 * secs)) ] ||
		fail "$denied udp events for $sent packets in $secs s: past the rule's limit"
	# every destination the result kept (the first 1000) named in the log;
	# before, past the first 128 kinds, at most 140 were named, the rest counted
	expect_eq "destinations the log does not name" "$unnamed" 0
	[ "$dests" -gt 140 ] || fail "only $dests destinations named one by one"
	# a few of the 128 kinds written whole more than once (its packet to
	# port 53 is also a malformed DNS query), each of the rest once: the
	# rule's limit bounds the lines, not KINDS_MAX any more (160 lines)
	[ "$((whole - dests))" -le 40 ] || fail "$((whole - dests)) repeats written whole"
	[ "$lines" -le $((denied + 40)) ] || fail "$lines events for one spray ($whole written whole)"
}

# A flood of UDP to an outside address: nftables logs at most 100 packets
# a second (a burst of 100; as many more for IPv6) and drops the rest
# unseen, events.c writes the first few of the destination whole and
# counts the rest, and what the run does next is still recorded.  20000
# packets, fifty times what the rule lets through in the flood's first
# second (200000 were a second of the sandbox's CPU and the supervisor's)
t_udp_flood_is_bounded() {
	policy '["web.test:80"]' '{"web.test": "127.0.0.1"}'
	nrun -- /usr/bin/python3 -c '
import socket, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
t = time.monotonic(); n = 0
while n < 20000 and time.monotonic() - t < 10:
    try:
        s.sendto(b"x", ("198.18.0.9", 9))
    except OSError:
        pass
    n += 1
print("sent", n, "seconds", int(time.monotonic() - t) + 1)
c = socket.create_connection(("198.18.0.9", 80), 5)
c.sendall(b"\x00\x01 not a protocol\r\n\r\n")
c.settimeout(5)
print("reply", c.recv(100))'
	read -r _ sent _ secs <<< "$(stdout | grep '^sent ')"
	[ -n "${sent:-}" ] || { fail "the flood did not run: $(stdout) $(< "$T/err")"; return; }
	# every event of the flood's destination: its last summary's total
	logged=$(/usr/bin/python3 -c '
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
dest = [e for e in lines if e.get("host") == "198.18.0.9" and e.get("port") == 9]
whole = sum(1 for e in dest if e["type"] == "egress.denied")
totals = [e["total"] for e in dest if e["type"] == "egress.denied.summary"]
print(totals[-1] if totals else whole, whole, len(lines))' "$T/events")
	read -r total whole lines <<< "$logged"
	[ "$total" -ge 1 ] || fail "no udp event among $sent packets"
	[ "$total" -le $((200 + 200 * secs)) ] ||
		fail "$total udp events for $sent packets in $secs s: past the rule's limit"
	[ "$whole" -le 10 ] || fail "$whole udp events written whole"
	[ "$lines" -le 40 ] || fail "$lines events for one flood"
	expect_contains "the next denial" "$(< "$T/events")" '"protocol":"transparent","host":"198.18.0.9","port":80'
}

# A kernel without nfnetlink_log refuses init's bind of the log group:
# here strace makes that sendto fail as such a kernel's answer would.  The
# run goes on as before (UDP dropped, no event; TCP still judged).
t_udp_events_off_without_nfnetlink_log() {
	local n
	command -v strace > /dev/null || { skip "no strace"; return 77; }
	policy '["web.test:80"]' '{"web.test": "127.0.0.1"}'
	# which of its process's sendto calls binds the group (NFULNL_MSG_CONFIG)
	ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" timeout 60 strace -f -o "$T/st" \
		-e trace=sendto "$CORRAL" run --policy "$T/p.json" -- /bin/true
	n=$(awk '{c[$1]++} /nlmsg_type=0x401/ {print c[$1]; exit}' "$T/st")
	[ -n "$n" ] || { fail "init never bound an nfnetlink_log group"; return; }
	: > "$T/events"
	rc=0
	ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" timeout 120 strace -f -o /dev/null \
		-e trace=sendto -e inject=sendto:error=ENOENT:when="$n" \
		"$CORRAL" run --json --policy "$T/p.json" --events "$T/events" -- /usr/bin/python3 -c '
import socket, errno
try:
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("198.18.0.9", 9)); print("udp SENT")
except OSError as e:
    print("udp blocked", errno.errorcode.get(e.errno, e.errno))
c = socket.create_connection(("198.18.0.9", 80), 5)
c.sendall(b"\x00\x01 not a protocol\r\n\r\n")
c.settimeout(5)
print("reply", c.recv(100))' > "$T/out" 2> "$T/err" < /dev/null || rc=$?
	expect_eq "the run works" "$rc" 0
	expect_contains "udp dropped" "$(stdout)" "udp blocked EPERM"
	expect_not_contains "no udp event" "$(< "$T/events")" '"protocol":"udp"'
	expect_contains "tcp still judged" "$(< "$T/events")" '"protocol":"transparent","host":"198.18.0.9","port":80'
}

t_landlock_tcp_only_proxy_ports() {
	# explicit proxy mode: Landlock lets TCP reach only our listeners
	policy '["web.test:80"]' '{"web.test": "127.0.0.1"}' ', "transparent": false'
	nrun -- /usr/bin/python3 -c '
import socket, errno
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen()
try:
    socket.create_connection(srv.getsockname(), 2); print("connected")
except OSError as e:
    print("blocked", errno.errorcode.get(e.errno))'
	abi=$(json layers.landlock_abi < "$T/out")
	[ "$abi" -ge 4 ] || { skip "Landlock ABI $abi has no TCP rules"; return 77; }
	expect_contains "loopback port" "$(stdout)" "blocked EACCES"
}

# Transparent mode: a probe of any port reaches the proxy and is seen (and
# counted by the abort criteria), not refused unseen by Landlock.
t_transparent_port_probe_is_seen() {
	policy '["web.test:80"]' '{"web.test": "127.0.0.1"}'
	nrun -- /usr/bin/python3 -c '
import socket
for port in (4444, 4445):
    try:
        s = socket.create_connection(("198.51.100.7", port), 2); s.send(b"x\n"); s.recv(1)
    except OSError as e:
        pass'
	expect_eq "denials" "$(denials)" 2
	ports=$(grep '"type":"egress.denied"' "$T/events" | while read -r l; do echo "$l" | json port; done | tr '\n' ' ')
	expect_eq "ports" "$ports" "4444 4445 "
	expect_contains "pid" "$(grep '"type":"egress.denied"' "$T/events" | head -1)" '"pid":'
}

# ... and so is a connect() scan, which sends nothing: each port read as
# open, and each connection ended unjudged, with no event and no count.
# One that names no host before it ends is a denial of its address.
t_transparent_connect_scan_is_seen() {
	policy '["web.test:80"]' '{"web.test": "127.0.0.1"}'
	nrun -- /usr/bin/python3 -c '
import socket, time
for port in (4444, 4445, 4446):
    s = socket.create_connection(("198.51.100.7", port), 2)
    s.close()
    time.sleep(0.05)
# the last one half-sent: a head cut short by its end
s = socket.create_connection(("198.51.100.7", 4447), 2)
s.send(b"GE")
s.close()
time.sleep(0.5)'
	expect_eq "exit" "$(< "$T/rc")" 0
	expect_eq "denials" "$(denials)" 4
	ports=$(grep '"type":"egress.denied"' "$T/events" | while read -r l; do echo "$l" | json port; done | tr '\n' ' ')
	expect_eq "ports" "$ports" "4444 4445 4446 4447 "
	expect_contains "why" "$(grep '"type":"egress.denied"' "$T/events" | head -1)" \
		"ended before it named a host"
	# a named connection that ends is no denial
	nrun -- /usr/bin/python3 -c '
import socket
s = socket.create_connection(("web.test", 80), 2)
s.close()'
	expect_eq "a named one ended: no denial" "$(denials)" 0
}

t_proxy_env_inside() {
	policy '["web.test:80"]' '{"web.test": "127.0.0.1"}'
	nrun -- /usr/bin/env
	for v in HTTP_PROXY=http://127.0.0.1:3128 HTTPS_PROXY=http://127.0.0.1:3128 \
		 ALL_PROXY=socks5h://127.0.0.1:1080 no_proxy=localhost https_proxy=; do
		expect_contains "$v" "$(stdout)" "$v"
	done
	nrun -- /bin/cat /etc/resolv.conf
	expect_contains "resolv" "$(stdout)" "nameserver 127.0.0.1"
}

t_external_host_over_veth() {
	[ "$ME" = 0 ] || { skip "needs root to make a network namespace"; return 77; }
	command -v ip >/dev/null || { skip "no iproute2"; return 77; }
	ns=corral-t$$
	cleanup() {
		stop_fixtures
		ip link del "v$$a" 2>/dev/null || true
		ip netns del "$ns" 2>/dev/null || true
	}
	trap cleanup EXIT
	ip netns add "$ns"
	ip link add "v$$a" type veth peer name "v$$b"
	ip link set "v$$b" netns "$ns"
	ip addr add 198.18.77.1/30 dev "v$$a"
	ip link set "v$$a" up
	ip -n "$ns" addr add 198.18.77.2/30 dev "v$$b"
	ip -n "$ns" link set "v$$b" up
	ip -n "$ns" link set lo up
	pf=$T/ext.port
	ip netns exec "$ns" /usr/bin/python3 "$FIX" tls "$pf" "$TEST_TMP/cert.pem" "$TEST_TMP/key.pem" 198.18.77.2 >/dev/null 2>&1 &
	PIDS="$PIDS $!"
	for _ in $(seq 1 100); do [ -s "$pf" ] && break; sleep 0.05; done
	port=$(< "$pf")
	policy "[\"api.test:$port\"]" '{"api.test": "198.18.77.2"}'
	nrun -- curl -sS -m 10 --cacert /ca.pem "https://api.test:$port/ext"
	expect_contains "external host" "$(stdout)" "hello from upstream /ext"
	# the same host by an address, not by name: refused
	nrun -- curl -sS -m 10 -k "https://198.18.77.2:$port/"
	expect_eq "address refused" "$(denials)" 1
	# port 443: the hello is judged before the upstream is dialled, then
	# the tunnel is spliced; its bytes are counted once
	pf=$T/ext443.port
	ip netns exec "$ns" /usr/bin/python3 "$FIX" tls "$pf" "$TEST_TMP/cert.pem" "$TEST_TMP/key.pem" 198.18.77.2:443 >/dev/null 2>&1 &
	PIDS="$PIDS $!"
	for _ in $(seq 1 100); do [ -s "$pf" ] && break; sleep 0.05; done
	policy '["api.test:443"]' '{"api.test": "198.18.77.2"}'
	nrun -- /usr/bin/python3 -c '
import socket, ssl
ctx = ssl.create_default_context(cafile="/ca.pem")
o = ssl.MemoryBIO(); t = ctx.wrap_bio(ssl.MemoryBIO(), o, server_hostname="api.test")
try:
    t.do_handshake()
except ssl.SSLWantReadError:
    pass
h = o.read()
s = socket.create_connection(("127.0.0.1", 3128), 10)
s.sendall(b"CONNECT api.test:443 HTTP/1.1\r\nHost: api.test:443\r\n\r\n")
head = b""
while not head.endswith(b"\r\n\r\n"):
    head += s.recv(1)
s.sendall(h)
print("hello", len(h), "answered" if s.recv(1) == b"\x16" else "closed")'
	n=$(stdout | sed -n 's/^hello \([0-9]*\) .*/\1/p')
	expect_contains "443: the server answers the hello" "$(stdout)" "answered"
	expect_contains "443: the hello counted once" \
		"$(grep '"type":"egress.closed"' "$T/events" | grep '"port":443,')" "\"bytes_up\":$n,"
}

t_every_denial_one_event() {
	policy '["web.test:80"]' '{"web.test": "127.0.0.1"}'
	nrun -- /usr/bin/python3 -c '
import socket, subprocess
for h in ("a.test", "b.test", "c.test"):
    subprocess.run(["curl", "-s", "-m", "5", "http://%s/" % h], stdout=subprocess.DEVNULL)
subprocess.run(["curl", "-s", "-m", "5", "--socks5-hostname", "127.0.0.1:1080", "http://d.test/"],
               stdout=subprocess.DEVNULL)
try:
    socket.gethostbyname("e.test")
except OSError:
    pass'
	expect_eq "denials" "$(denials)" 5
	expect_eq "in the result" "$(json denials < "$T/out" | /usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" 5
	for f in seq time sandbox type protocol host port reason; do
		denial_field "$f" >/dev/null || fail "no $f in a denial event"
	done
}

t_transparent_programs_ignoring_proxy() {
	trap stop_fixtures EXIT
	start port http
	start tport tls "$TEST_TMP/cert.pem" "$TEST_TMP/key.pem"
	policy "[\"web.test:$port\", \"api.test:$tport\"]" \
		'{"web.test": "127.0.0.1", "api.test": "127.0.0.1"}' ', "transparent": true'
	# no proxy variables at all: DNS gives a token address, nftables does the rest
	nrun -- /usr/bin/env -i PATH=/usr/bin:/bin /bin/sh -c "
		getent hosts web.test
		getent ahostsv4 web.test | head -1
		curl -sS -m 10 http://web.test:$port/plain; echo
		curl -sS -m 10 --cacert /ca.pem https://api.test:$tport/tls; echo
		getent hosts evil.test || echo evil-nxdomain"
	expect_contains "synthetic address" "$(stdout)" "100.64.0."
	expect_contains "AI_ADDRCONFIG lookup" "$(stdout)" "STREAM web.test"
	expect_contains "plain" "$(stdout)" "hello from upstream /plain"
	expect_contains "tls" "$(stdout)" "hello from upstream /tls"
	expect_contains "nxdomain" "$(stdout)" "evil-nxdomain"
	expect_contains "transparent event" "$(< "$T/events")" '"protocol":"transparent","host":"web.test"'
}

t_transparent_judges_host_and_sni() {
	trap stop_fixtures EXIT
	start port http
	start tport tls "$TEST_TMP/cert.pem" "$TEST_TMP/key.pem"
	policy "[\"web.test:$port\", \"api.test:$tport\"]" \
		'{"web.test": "127.0.0.1", "api.test": "127.0.0.1"}' ', "transparent": true'
	# an address no name maps to: the Host header decides, and the name (not
	# the address) is where the connection goes
	nrun -- /usr/bin/env -i PATH=/usr/bin:/bin /bin/sh -c "
		curl -sS -m 10 -H 'Host: web.test' http://198.18.5.5:$port/byhost; echo
		curl -sS -m 10 -H 'Host: evil.test' http://198.18.5.5:$port/evil; echo rc=\$?
		curl -sS -m 10 -k --resolve evil.test:$tport:198.18.5.5 https://evil.test:$tport/; echo rc=\$?"
	expect_contains "host decides" "$(stdout)" "hello from upstream /byhost"
	expect_not_contains "evil host" "$(stdout)" "upstream /evil"
	expect_eq "denials" "$(denials)" 2
	expect_contains "evil host event" "$(< "$T/events")" '"protocol":"transparent","host":"evil.test"'
	# UDP DNS to any server is answered by ours
	nrun -- /usr/bin/python3 -c '
import socket, struct
q = struct.pack("!HHHHHH", 7, 0x100, 1, 0, 0, 0) + b"\x03web\x04test\x00" + struct.pack("!HH", 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(5)
s.sendto(q, ("198.18.9.9", 53))
r = s.recv(512)
print("answer", socket.inet_ntoa(r[-4:]))'
	expect_contains "dns redirected" "$(stdout)" "answer 100.64.0."
}

# A chunk's data must end in CRLF.  http-parser as Debian builds it skips
# any two bytes there, and an upstream that reads the rest of that line
# instead (as fixtures.py's does) takes the next chunk for a different
# length: a request hidden in the proxy's idea of a body is one the
# upstream serves, its Host never judged (another site on the address).
# ~0.3 s.
t_chunk_without_crlf_refused() {
	trap stop_fixtures EXIT
	start port web "$T/web.log"
	policy "[\"web.test:$port\"]" '{"web.test": "127.0.0.1"}'
	nrun -- /usr/bin/python3 -c "
import socket
hidden = b'0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: evil.test\r\n\r\n'
body = b'5\r\nhello' + b'ab' + b'%x\r\n' % len(hidden) + hidden + b'\r\n0\r\n\r\n'
s = socket.create_connection(('127.0.0.1', 3128), 10)
s.sendall(b'POST http://web.test:$port/a HTTP/1.1\r\nHost: web.test:$port\r\n'
          b'Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n' + body)
s.settimeout(5)
got = b''
while True:
    try:
        k = s.recv(4096)
    except OSError:
        break
    if not k: break
    got += k
print(got.split(b'\r\n')[0].decode())"
	# the upstream closes only after the requests it read: they are in its log
	if grep -q smuggled "$T/web.log"; then fail "the hidden request reached the upstream: $(< "$T/web.log")"; fi
	expect_contains "refused" "$(stdout)" "HTTP/1.1 400"
	expect_eq "denials" "$(denials)" 1
	expect_contains "reason" "$(denial_field reason)" "chunk data not followed by CRLF"
}

# Transparent mode, a bare address: the first request's Host names the
# host it is judged for, and every later request on the connection must
# name it too (the rest used to go on unread).  A WebSocket handshake's
# upgrade reaches the upstream; after its 101 the bytes are not HTTP and go
# on unread; without a 101 the connection stays HTTP.  Also through the
# proxy port, absolute-form.
t_plain_http_every_request_for_its_host() {
	trap stop_fixtures EXIT
	start port web "$T/web.log"
	policy "[\"web.test:$port\"]" '{"web.test": "127.0.0.1"}' ', "transparent": true'
	nrun -- /usr/bin/env -i PATH=/usr/bin:/bin /usr/bin/python3 -c "$(< "$HERE/tunnel_client.py")" \
		transparent 198.18.5.5 "$port"
	expect_contains "keep-alive" "$(stdout)" \
		"transparent-keepalive 200[GET /one host=web.test body=0] 200[POST /two host=web.test body=5] 200[POST /three host=web.test body=5] 403"
	expect_contains "spellings" "$(stdout)" \
		"transparent-spelling 200[GET /five host=WEB.Test. body=0] 200[GET /six host=web.test:$port body=0] 403"
	expect_contains "websocket" "$(stdout)" "transparent-ws 101 echo=raw bytes after 101"
	expect_contains "no upgrade" "$(stdout)" "transparent-nows 426 200[GET /after host=web.test body=0] 403"
	expect_contains "half-closed" "$(stdout)" "transparent-halfclose 200[GET /half host=web.test body=0]"
	expect_eq "denials" "$(denials)" 3
	expect_contains "said why" "$(< "$T/events")" \
		"a request for evil.test on a transparent connection to web.test:$port (its Host must name"
	nrun -- /usr/bin/python3 -c "$(< "$HERE/tunnel_client.py")" http web.test "$port"
	expect_contains "absolute-form websocket" "$(stdout)" "http-ws 101 echo=raw bytes after 101"
	expect_contains "absolute-form, no upgrade" "$(stdout)" \
		"http-nows 426 200[GET /after host=web.test:$port body=0]"
	expect_contains "absolute-form, half-closed" "$(stdout)" \
		"http-halfclose 200[GET /half host=web.test:$port body=0]"
	expect_not_contains "no other name reached the upstream" "$(< "$T/web.log")" "evil.test"
}

# A body the upstream does not take is not taken from the sandbox either:
# what the supervisor holds for a parsed connection (plain HTTP, a port-80
# tunnel) is bounded, as a spliced tunnel's is.  128 MiB offered to an
# upstream that reads none: the client's sends block after the buffers on
# the way (some MiB each) and the relay's high water fill.
t_body_to_a_stalled_upstream_is_bounded() {
	trap stop_fixtures EXIT
	start port web "$T/web.log"
	policy "[\"web.test:$port\"]" '{"web.test": "127.0.0.1"}'
	nrun -- /usr/bin/python3 -c "
import socket
s = socket.create_connection(('127.0.0.1', 3128), 10)
n = 128 << 20
s.sendall(b'POST http://web.test:$port/hold HTTP/1.1\r\nHost: web.test:$port\r\nContent-Length: %d\r\n\r\n' % n)
s.settimeout(3)
chunk, sent = b'x' * 65536, 0
try:
    while sent < n:
        sent += s.send(chunk)
except socket.timeout:
    pass
print('sent_mib', sent >> 20)"
	local mib
	mib=$(stdout | sed -n 's/^sent_mib //p')
	[ -n "$mib" ] || { fail "no count: $(stdout) $(< "$T/err")"; return; }
	echo "sent $mib MiB"
	[ "$mib" -lt 48 ] || fail "the supervisor took $mib MiB for an upstream that reads nothing"
}

t_transparent_ipv6_and_dns_tcp() {
	trap stop_fixtures EXIT
	start port http
	policy "[\"web.test:$port\"]" '{"web.test": "127.0.0.1"}'
	nrun -- /usr/bin/python3 -c "
import socket, struct
# IPv6 is no way around: an address dialled over v6 is judged by its Host
s = socket.socket(socket.AF_INET6); s.settimeout(10)
s.connect(('2001:db8::1', $port))
s.sendall(b'GET /v6 HTTP/1.0\\r\\nHost: web.test\\r\\n\\r\\n')
data = b''
while len(data) < 65536:
    chunk = s.recv(4096)
    if not chunk: break
    data += chunk
print(data.decode().split()[-1])
# DNS over TCP, length-prefixed, to the responder
q = struct.pack('!HHHHHH', 9, 0x100, 1, 0, 0, 0) + b'\\x04evil\\x04test\\x00' + struct.pack('!HH', 1, 1)
t = socket.create_connection(('127.0.0.1', 53), 5)
t.sendall(struct.pack('!H', len(q)) + q)
r = t.recv(512)
print('rcode', r[5] & 15)"
	expect_contains "v6 by host" "$(stdout)" "/v6"
	expect_contains "tcp dns nxdomain" "$(stdout)" "rcode 3"
}

# A DNS message over TCP may come in pieces (the length, part of the
# header, the rest): the responder answers once all of it is in, and
# until then waits for the rest instead of going round on what it has.
t_dns_tcp_message_in_pieces() {
	policy '["web.test:80"]' '{"web.test": "127.0.0.1"}'
	: > "$T/events"
	local rc=0
	timeout -k 5 60 "$CORRAL" run --json --policy "$T/p.json" --events "$T/events" \
		-- /usr/bin/python3 -c '
import socket, struct, time
q = struct.pack("!HHHHHH", 9, 0x100, 1, 0, 0, 0) + b"\x03web\x04test\x00" + struct.pack("!HH", 1, 1)
m = struct.pack("!H", len(q)) + q
t = socket.create_connection(("127.0.0.1", 53), 5)
t.settimeout(10)
for cuts in ((1, 5), (3, 20)):
    a, b = cuts
    for piece in (m[:a], m[a:b], m[b:]):
        t.sendall(piece)
        time.sleep(0.2)
    r = t.recv(512)
    print("rcode", r[5] & 15, "answers", r[9])' > "$T/out" 2> "$T/err" < /dev/null || rc=$?
	expect_eq "exit" "$rc" 0
	expect_eq "both answered" "$(json stdout < "$T/out" | grep -c 'rcode 0 answers 1')" 2
}

# A client that asks over TCP and never reads its answers is not answered
# into the supervisor's memory: past a bound the responder stops reading
# it (its sends stall), and goes on once the answers are read.
t_dns_tcp_unread_answers_are_bounded() {
	policy '["web.test:80"]' '{"web.test": "127.0.0.1"}'
	: > "$T/events"
	local rc=0
	timeout -k 5 120 "$CORRAL" run --json --policy "$T/p.json" --events /dev/null \
		-- /usr/bin/python3 -c '
import socket, struct
q = struct.pack("!HHHHHH", 9, 0x100, 1, 0, 0, 0) + b"\x03web\x04test\x00" + struct.pack("!HH", 1, 1)
chunk = (struct.pack("!H", len(q)) + q) * 4096
t = socket.create_connection(("127.0.0.1", 53), 5)
t.settimeout(3)
sent = 0
while sent < (64 << 20):
    try:
        sent += t.send(chunk)
    except socket.timeout:
        break
print("stalled" if sent < (64 << 20) else "all %d MiB taken" % (sent >> 20))
got = 0
while got < (1 << 20):
    try:
        k = t.recv(65536)
    except socket.timeout:
        break
    if not k:
        break
    got += len(k)
print("answers read" if got >= (1 << 20) else "answers stopped at %d" % got)' > "$T/out" 2> "$T/err" < /dev/null || rc=$?
	expect_eq "exit" "$rc" 0
	expect_contains "stalled" "$(json stdout < "$T/out")" "stalled"
	expect_contains "answers go on as they are read" "$(json stdout < "$T/out")" "answers read"
}

# A name still being resolved when whoever asked goes (a proxy client that
# closes, a sandbox that ends with DNS questions pending) is cancelled; the
# resolver says "cancelled" later, and that must reach nothing freed.
t_resolution_cancelled_when_asker_goes() {
	trap stop_fixtures EXIT
	start rport mute
	printf '{"network": {"mode": "proxy", "transparent": false, "allow": ["*.web.test"], "resolver": "127.0.0.1:%s"}}\n' \
		"$rport" > "$T/p.json"
	chmod 644 "$T/p.json"
	nrun -- /usr/bin/python3 -c '
import socket, struct, time
for i in range(200):	# proxy clients that leave while their names resolve
    s = socket.create_connection(("127.0.0.1", 3128), 5)
    s.sendall(b"GET http://h%d.web.test/ HTTP/1.1\r\nHost: h%d.web.test\r\n\r\n" % (i, i))
    s.close()
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(2000):	# DNS questions pending when the sandbox ends
    q = struct.pack("!HHHHHH", i, 0x100, 1, 0, 0, 0) + b"\x05q%04d\x03web\x04test\x00" % i
    u.sendto(q + struct.pack("!HH", 1, 1), ("127.0.0.1", 53))
time.sleep(1)
print("done")'
	expect_eq "the run ends normally" "$(< "$T/rc")" 0
	expect_contains "its result" "$(stdout)" "done"
}

# Questions over UDP cost the sandbox nothing: those waiting for the host's
# resolver at once are bounded, past that SERVFAIL (ask again), said once
# in an event; the supervisor does not hold one for each.
t_dns_questions_waiting_are_bounded() {
	trap stop_fixtures EXIT
	start rport mute
	printf '{"network": {"mode": "proxy", "transparent": false, "allow": ["*.web.test"], "resolver": "127.0.0.1:%s"}}\n' \
		"$rport" > "$T/p.json"
	chmod 644 "$T/p.json"
	nrun -- /usr/bin/python3 -c '
import socket, struct
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.settimeout(10)
def ask(i, name):
    q = struct.pack("!HHHHHH", i, 0x100, 1, 0, 0, 0) + name
    u.sendto(q + struct.pack("!HH", 1, 1), ("127.0.0.1", 53))
servfail = 0
for i in range(3000):
    ask(i, b"\x05q%04d\x03web\x04test\x00" % i)
    if i % 50 == 49:
        # a name answered at once, after the others: once its answer is
        # here, all before it were taken (none lost to a full socket)
        ask(60000 + i, b"\x04evil\x04test\x00")
        while True:
            r = u.recv(512)
            if struct.unpack("!H", r[:2])[0] == 60000 + i:
                break
            servfail += r[3] & 15 == 2
print("servfail", "some" if servfail else "none")'
	expect_eq "the run ends normally" "$(< "$T/rc")" 0
	expect_contains "past the bound: SERVFAIL" "$(stdout)" "servfail some"
	expect_contains "said" "$(< "$T/events")" "too many DNS questions waiting for the resolver at once"
}

# hoard PORT COUNT: a run under a supervisor of 300 fds opens up to COUNT
# connections to 127.0.0.1:PORT inside and holds them; its events in
# $T/events, its status in $rc.
hoard() {
	: > "$T/events"
	rc=0
	timeout 60 prlimit --nofile=300:300 "$CORRAL" run --json --policy "$T/p.json" \
		--events "$T/events" --ro "$T/events:/events" -- /usr/bin/python3 -c '
import socket, sys, time
# open before the connections take every fd the sandbox may have
events = open("/events")
held = []
for i in range(int(sys.argv[2])):
    try:
        held.append(socket.create_connection(("127.0.0.1", int(sys.argv[1])), 2))
    except OSError:
        break
# held until the supervisor, accepting them, has refused one (its event,
# read through /events), at most 2 s: a fixed 2 s was 4 s of the test
for _ in range(40):
    events.seek(0)
    if any(sys.argv[3] in l and "too many connections open at once" in l
           for l in events.read().splitlines()):
        break
    time.sleep(0.05)
print("opened", len(held))' "$1" "$2" "$3" > "$T/out" 2> "$T/err" < /dev/null || rc=$?
}

t_connection_hoarding_is_bounded() {
	policy '["web.test:80"]' '{"web.test": "127.0.0.1"}'
	# the supervisor gets 300 fds: room for (300 - 128) / 6 = 28 connections
	hoard 3128 200 '"protocol":"'
	expect_eq "run ended normally" "$rc" 0
	expect_contains "refused beyond the budget" "$(< "$T/events")" "too many connections open at once"
	# DNS over TCP is held to the same budget: each is an fd of ours too
	hoard 53 250 '"protocol":"dns"'
	expect_eq "run ended normally (dns)" "$rc" 0
	expect_contains "dns refused beyond the budget" \
		"$(grep '"protocol":"dns"' "$T/events")" "too many connections open at once"
}

# The agent opens up to COUNT CONNECT tunnels to web.test:PORT and holds
# them; then, the cap met, closes one and opens another (5 s for the
# proxy to see the close).  Prints "held N
# refused FIRST-LINE" and "again OK|FIRST-LINE".
TUNNELS='
import socket, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
def tunnel():
    s = socket.create_connection(("127.0.0.1", 3128), 10)
    s.settimeout(10)
    s.sendall(b"CONNECT web.test:%d HTTP/1.1\r\nHost: web.test:%d\r\n\r\n" % (port, port))
    head = b""
    while b"\r\n\r\n" not in head:
        k = s.recv(4096)
        if not k: break
        head += k
    line = head.split(b"\r\n")[0].decode(errors="replace")
    return (s, "") if line.startswith("HTTP/1.1 200") else (None, line or "closed")
held, refused = [], ""
for i in range(n):
    try:
        s, refused = tunnel()
    except OSError as e:
        s, refused = None, str(e)
    if not s:
        break
    held.append(s)
print("held", len(held), "refused", refused)
held.pop().close()
for _ in range(50):     # the proxy sees the close when its loop comes to it
    try:
        s, again = tunnel()
    except OSError as e:
        s, again = None, str(e)
    if s:
        break
    time.sleep(0.1)
print("again", "OK" if s else again)
'

# limits.connections: the agent meets it, is told which limit bit (the
# answer and the event), and once it closes one it may open another.
t_connection_cap_names_the_limit() {
	trap stop_fixtures EXIT
	start port http
	policy "[\"web.test:$port\"]" '{"web.test": "127.0.0.1"}' '}, "limits": {"connections": 6'
	nrun -- /usr/bin/python3 -c "$TUNNELS" "$port" 40
	expect_eq "run ended normally" "$(< "$T/rc")" 0
	expect_contains "six held, the seventh refused" "$(stdout)" "held 6 refused HTTP/1.1 503"
	expect_contains "one closed, one more opens" "$(stdout)" "again OK"
	expect_contains "the event names the limit" "$(grep '"type":"egress.denied"' "$T/events")" \
		'"reason":"limits.connections (6) reached: too many connections open at once, one more refused","limit":"connections","value":6'
	# a user's number of connections, under the default limit, all open
	policy "[\"web.test:$port\"]" '{"web.test": "127.0.0.1"}'
	nrun -- /usr/bin/python3 -c "$TUNNELS" "$port" 40
	expect_contains "40 at once under the default" "$(stdout)" "held 40 refused"
	expect_eq "no denial" "$(denials)" 0
}

# Tunnels that never drain, both ways (the agent and the upstream each
# write all they can and read nothing): what the supervisor then holds for
# them in the kernel, read from its own fds (pidfd_getfd): bytes in the
# relay's pipes and in its sockets' queues, in and out.  Unbounded, each
# held 27 MiB here (sockets grown by autotuning, 1 MiB pipes).
t_undrained_tunnels_hold_bounded_memory() {
	local rc=0
	/usr/bin/python3 - "$CORRAL" "$T" > "$T/probe" 2>&1 <<'PY' || rc=$?
import ctypes, fcntl, json, os, socket, subprocess, sys, termios, time
corral, t = sys.argv[1], sys.argv[2]
N = 8
up = socket.socket()
up.bind(("127.0.0.1", 0)); up.listen(N); up.settimeout(30)
port = up.getsockname()[1]
json.dump({"network": {"mode": "proxy", "allow": ["web.test:%d" % port],
                       "hosts": {"web.test": "127.0.0.1"}}}, open(t + "/p.json", "w"))
os.chmod(t + "/p.json", 0o644)
inside = r"""
import socket, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
held = []
for i in range(n):
    s = socket.create_connection(("127.0.0.1", 3128), 10)
    s.sendall(b"CONNECT web.test:%d HTTP/1.1\r\nHost: web.test\r\n\r\n" % port)
    s.settimeout(10)
    assert s.recv(4096).split()[1] == b"200"
    s.setblocking(False)
    held.append(s)
blob = b"y" * (1 << 20)
gone = set()
for _ in range(300):    # write all it can, read nothing, until the tunnels end (30 s)
    for s in held:
        try: s.send(blob)
        except BlockingIOError: pass
        except OSError: gone.add(s)
    if len(gone) == n:
        break
    time.sleep(0.1)
"""
p = subprocess.Popen([corral, "run", "--policy", t + "/p.json", "--timeout", "60", "--",
                      "/usr/bin/python3", "-c", inside, str(port), str(N)], stdin=subprocess.DEVNULL)
held = []
libc = ctypes.CDLL(None, use_errno=True)
def queued(fd, req):
    n = ctypes.c_int(0)
    fcntl.ioctl(fd, req, n)
    return n.value
def held_by_supervisor(pidfd):
    """bytes in its relay pipes and TCP sockets' queues; the pipes' sizes"""
    total, sizes, seen = 0, [], set()
    for name in os.listdir("/proc/%d/fd" % p.pid):
        try:
            link = os.readlink("/proc/%d/fd/%s" % (p.pid, name))
        except OSError:
            continue
        if link in seen or not link.startswith(("pipe:", "socket:")):
            continue
        seen.add(link)
        fd = libc.syscall(438, pidfd, int(name), 0)     # pidfd_getfd
        if fd < 0:
            if ctypes.get_errno() == 1:
                print("skip: pidfd_getfd of the supervisor: EPERM"); sys.exit(77)
            continue
        try:
            if link.startswith("pipe:"):
                total += queued(fd, termios.FIONREAD)
                sizes.append(fcntl.fcntl(fd, 1032))     # F_GETPIPE_SZ
                continue
            s = socket.socket(fileno=os.dup(fd))
            try:
                if s.type == socket.SOCK_STREAM and s.family == socket.AF_INET and \
                        not s.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
                    total += queued(fd, termios.FIONREAD) + queued(fd, termios.TIOCOUTQ)
            finally:
                s.close()
        finally:
            os.close(fd)
    return total, sizes
try:
    for _ in range(N):
        c, _ = up.accept()
        c.setblocking(False)
        held.append(c)
    pidfd = os.pidfd_open(p.pid)
    blob = b"x" * (1 << 20)
    last, most, sizes = -1, 0, []
    for _ in range(100):        # until what it holds stops growing, 20 s at most
        for c in held:
            try: c.send(blob)
            except OSError: pass
        time.sleep(0.2)
        total, sizes = held_by_supervisor(pidfd)
        most = max(most, total)
        if total == last:
            break
        last = total
    print("per tunnel MiB %.1f" % (most / N / 2**20))
    # the relay's two a tunnel, beside the supervisor's own (stdio)
    print("pipes of at most 256 KiB", sum(1 for z in sizes if z <= 256 << 10) >= 2 * N)
finally:
    for c in held:      # the tunnels end, and so does the run
        c.close()
    try:
        p.wait(60)
    except subprocess.TimeoutExpired:
        p.terminate(); p.wait()
PY
	[ "$rc" != 77 ] || skip "$(grep '^skip:' "$T/probe")"
	[ "$rc" = 0 ] || { cat "$T/probe"; fail "the probe failed ($rc)"; }
	cat "$T/probe"
	expect_contains "the relay's pipes" "$(< "$T/probe")" "pipes of at most 256 KiB True"
	mib=$(grep '^per tunnel MiB' "$T/probe" | awk '{print $4}')
	[ -n "$mib" ] && awk "BEGIN { exit !($mib > 0.5 && $mib <= 24) }" ||
		fail "a tunnel that never drains holds $mib MiB, want 0.5 to 24 (27 unbounded)"
}

# Both legs of a relayed connection send at once (TCP_NODELAY): read from
# the supervisor's own sockets (pidfd_getfd), for a spliced CONNECT tunnel
# and a plain HTTP request on bufferevents, while both are held open.
t_relay_legs_nodelay() {
	local rc=0
	/usr/bin/python3 - "$CORRAL" "$T" > "$T/probe" 2>&1 <<'PY' || rc=$?
import ctypes, json, os, socket, subprocess, sys, time
corral, t = sys.argv[1], sys.argv[2]
up = socket.socket()
up.bind(("127.0.0.1", 0)); up.listen(8); up.settimeout(30)
port = up.getsockname()[1]
json.dump({"network": {"mode": "proxy", "allow": ["web.test:%d" % port],
                       "hosts": {"web.test": "127.0.0.1"}}}, open(t + "/p.json", "w"))
os.chmod(t + "/p.json", 0o644)
inside = r"""
import socket, sys
port = int(sys.argv[1])
a = socket.create_connection(("127.0.0.1", 3128), 10)
a.sendall(b"CONNECT web.test:%d HTTP/1.1\r\nHost: web.test\r\n\r\n" % port)
head = b""
while b"\r\n\r\n" not in head:
    k = a.recv(4096)
    if not k: sys.exit("no CONNECT answer")
    head += k
assert head.split()[1] == b"200", head
a.sendall(b"x")
b = socket.create_connection(("127.0.0.1", 3128), 10)
b.sendall(b"GET http://web.test:%d/ HTTP/1.1\r\nHost: web.test:%d\r\n\r\n" % (port, port))
for s in (a, b):
    s.settimeout(30)
    while s.recv(4096):
        pass
"""
p = subprocess.Popen([corral, "run", "--policy", t + "/p.json", "--timeout", "60", "--",
                      "/usr/bin/python3", "-c", inside, str(port)], stdin=subprocess.DEVNULL)
held = []
try:
    for _ in range(2):
        c, _ = up.accept()
        c.settimeout(30)
        held.append(c)
        c.recv(4096)            # the tunnel's byte, or the request: both legs are up
    libc = ctypes.CDLL(None, use_errno=True)
    pidfd = os.pidfd_open(p.pid)
    legs = {}
    for _ in range(100):        # the relay is set up in the callback that forwarded
        legs = {}
        for name in os.listdir("/proc/%d/fd" % p.pid):
            try:
                if not os.readlink("/proc/%d/fd/%s" % (p.pid, name)).startswith("socket:"):
                    continue
            except OSError:
                continue
            fd = libc.syscall(438, pidfd, int(name), 0)     # pidfd_getfd
            if fd < 0:
                e = ctypes.get_errno()
                if e == 1:
                    print("skip: pidfd_getfd of the supervisor: EPERM"); sys.exit(77)
                continue
            s = socket.socket(fileno=fd)
            try:
                if s.type != socket.SOCK_STREAM or s.family not in (socket.AF_INET, socket.AF_INET6) \
                        or s.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
                    continue
                try:
                    peer = s.getpeername()
                except OSError:
                    continue
                leg = "down" if s.getsockname()[1] == 3128 else "up" if peer[1] == port else None
                if leg:
                    legs.setdefault(leg, []).append(s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            finally:
                s.close()
        if len(legs.get("down", [])) == 2 and len(legs.get("up", [])) == 2:
            break
        time.sleep(0.05)
    print("legs", json.dumps(legs, sort_keys=True))
finally:
    for c in held:
        c.close()
    try:
        p.wait(30)
    except subprocess.TimeoutExpired:
        p.kill(); p.wait()
PY
	[ "$rc" != 77 ] || skip "$(grep '^skip:' "$T/probe")"
	[ "$rc" = 0 ] || { cat "$T/probe"; fail "the probe failed ($rc)"; }
	expect_eq "both legs of both connections" "$(grep '^legs' "$T/probe")" \
		'legs {"down": [1, 1], "up": [1, 1]}'
}

# The listeners' accept queues are as long as listen(2) was asked for
# (SOMAXCONN), not libevent's default of 128: with the supervisor stopped,
# 300 connections from inside all complete their handshake and wait in the
# queue; with 128 the rest are SYNs dropped, each a 1 s retransmit.
t_listener_backlog_is_somaxconn() {
	local rc=0
	mkdir "$T/shared" && chmod 777 "$T/shared"
	policy '["web.test:80"]' '{"web.test": "127.0.0.1"}'
	/usr/bin/python3 - "$CORRAL" "$T" > "$T/probe" 2>&1 <<'PY' || rc=$?
import os, signal, subprocess, sys, time
corral, t = sys.argv[1], sys.argv[2]
inside = r"""
import errno, os, selectors, socket, sys, time
print("ready", flush=True)
for _ in range(400):            # bounded: 20 s
    if os.path.exists("/shared/go"):
        break
    time.sleep(0.05)
else:
    sys.exit("no go")
socks = []
for _ in range(300):
    s = socket.socket()
    s.setblocking(False)
    if s.connect_ex(("127.0.0.1", 3128)) in (0, errno.EINPROGRESS):
        socks.append(s)
# loopback's handshake is done inside connect(): a queued one is writable now
sel = selectors.DefaultSelector()
for s in socks:
    sel.register(s, selectors.EVENT_WRITE)
up = sum(1 for k, ev in sel.select(0)
         if not k.fileobj.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR))
open("/shared/count.tmp", "w").write(str(up))
os.rename("/shared/count.tmp", "/shared/count")
"""
p = subprocess.Popen([corral, "run", "--policy", t + "/p.json", "--timeout", "60",
                      "--rw", t + "/shared:/shared", "--", "/usr/bin/python3", "-c", inside],
                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
stopped = False
try:
    if p.stdout.readline().strip() != "ready":
        sys.exit("the sandbox did not start")
    os.kill(p.pid, signal.SIGSTOP)      # nothing is accepted from here on
    stopped = True
    open(t + "/shared/go", "w").close()
    for _ in range(400):                # bounded: 20 s
        if os.path.exists(t + "/shared/count"):
            break
        time.sleep(0.05)
    print("completed", open(t + "/shared/count").read())
finally:
    if stopped:
        os.kill(p.pid, signal.SIGCONT)
    try:
        p.wait(30)
    except subprocess.TimeoutExpired:
        p.kill(); p.wait()
PY
	[ "$rc" = 0 ] || { cat "$T/probe"; fail "the probe failed ($rc)"; }
	expect_eq "handshakes completed with nothing accepted" "$(grep '^completed' "$T/probe")" \
		"completed 300"
}

# The sandbox's loopback carries big packets (IPv4 BIG TCP: per-packet
# costs are the relay's own on the sandbox's side): read from its netns,
# entered as the helper does (its user namespace first), over rtnetlink.
t_sandbox_lo_big_packets() {
	local rc=0
	policy '["web.test:80"]' '{"web.test": "127.0.0.1"}'
	/usr/bin/python3 - "$CORRAL" "$T" "$HERE" > "$T/probe" 2>&1 <<'PY' || rc=$?
import ctypes, fcntl, os, socket, struct, sys
corral, t = sys.argv[1], sys.argv[2]
sys.path.insert(0, sys.argv[3])
from sandbox_probe import running_sandbox, sandbox_ns
def gso_ipv4(fds):
    libc = ctypes.CDLL(None, use_errno=True)
    for fd in fds:
        if libc.setns(fd, 0) != 0:
            return "setns: errno %d" % ctypes.get_errno()
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
    ifi = struct.pack("BxHiII", socket.AF_UNSPEC, 0, socket.if_nametoindex("lo"), 0, 0)
    s.send(struct.pack("IHHII", 16 + len(ifi), 18, 1, 1, 0) + ifi)     # RTM_GETLINK
    r = s.recv(65536)
    at = 16 + 16
    while at + 4 <= len(r):
        ln, ty = struct.unpack_from("HH", r, at)
        if ln < 4:
            break
        if ty == 63:                    # IFLA_GSO_IPV4_MAX_SIZE
            return "gso_ipv4_max_size %d" % struct.unpack_from("I", r, at + 4)[0]
        at += (ln + 3) & ~3
    return "skip: the kernel reports no IFLA_GSO_IPV4_MAX_SIZE"
with running_sandbox(corral, t + "/p.json") as p:
    fds = sandbox_ns(p.pid)
    rd, wr = os.pipe()
    child = os.fork()
    if child == 0:          # setns changes this process: a child of its own does it
        try:
            os.close(rd)
            os.write(wr, gso_ipv4(fds).encode())
        except Exception as e:
            os.write(wr, repr(e).encode())
        finally:
            os._exit(0)
    os.close(wr)
    out = os.read(rd, 4096).decode()
    os.waitpid(child, 0)
    print(out)
PY
	[ "$rc" = 0 ] || { cat "$T/probe"; fail "the probe failed ($rc)"; }
	! grep -q '^skip:' "$T/probe" || skip "$(grep '^skip:' "$T/probe")"
	expect_eq "the sandbox's lo" "$(< "$T/probe")" "gso_ipv4_max_size 262144"
}

# What nft lists of transparent mode's rules for one family (handles left
# out): its expressions (FAMILY, the load of the destination, loopback as
# compared), then its table (FAMILY, loopback as nft writes it).
# nft_keep FAMILY SADDR_LOAD SADDR PROTO PORT: raw_out's rule that keeps
# the answers of one of our listeners tracked (nft's --debug=netlink form)
nft_keep() {
	cat <<EOF
$1 corral raw_out
  [ payload load $2 => reg 1 ]
  [ cmp eq reg 1 $3 ]
  [ meta load l4proto => reg 1 ]
  [ cmp eq reg 1 $4 ]
  [ payload load 2b @ transport header + 0 => reg 1 ]
  [ cmp eq reg 1 $5 ]
  [ immediate reg 0 return ]

EOF
}

nft_expressions() {
	nft_keep "$1" "$4" "$5" 0x00000006 0x0000390c
	nft_keep "$1" "$4" "$5" 0x00000011 0x00003500
	cat <<EOF
$1 corral raw_out
  [ payload load $2 => reg 1 ]
  [ cmp eq reg 1 $3 ]
  [ notrack ]

$1 corral tcp_over_rate
  [ limit rate 25/second burst 25 type packets flags 0x0 ]
  [ log prefix corral over rate group 7 snaplen 0 qthreshold 0 ]

$1 corral tcp_over_rate
  [ reject type 1 code 0 ]

$1 corral dns_over_rate
  [ limit rate 25/second burst 25 type packets flags 0x0 ]
  [ log prefix corral over rate group 7 snaplen 0 qthreshold 0 ]

$1 corral dns_over_rate
  [ immediate reg 0 drop ]

$1 corral out
  [ payload load $2 => reg 1 ]
  [ cmp eq reg 1 $3 ]
  [ immediate reg 0 return ]

$1 corral out
  [ meta load l4proto => reg 1 ]
  [ cmp eq reg 1 0x00000006 ]
  [ ct load state => reg 1 ]
  [ bitwise reg 1 = ( reg 1 & 0x00000008 ) ^ 0x00000000 ]
  [ cmp neq reg 1 0x00000000 ]
  [ limit rate $6/second burst $6 type packets flags 0x1 ]
  [ immediate reg 0 jump -> tcp_over_rate ]

$1 corral out
  [ meta load l4proto => reg 1 ]
  [ cmp eq reg 1 0x00000011 ]
  [ payload load 2b @ transport header + 2 => reg 1 ]
  [ cmp eq reg 1 0x00003500 ]
  [ ct load state => reg 1 ]
  [ bitwise reg 1 = ( reg 1 & 0x00000008 ) ^ 0x00000000 ]
  [ cmp neq reg 1 0x00000000 ]
  [ limit rate $6/second burst $6 type packets flags 0x1 ]
  [ immediate reg 0 jump -> dns_over_rate ]

$1 corral out
  [ meta load l4proto => reg 1 ]
  [ cmp eq reg 1 0x00000006 ]
  [ immediate reg 1 0x0000390c ]
  [ redir proto_min reg 1 proto_max reg 1 flags 0x2 ]

$1 corral out
  [ meta load l4proto => reg 1 ]
  [ cmp eq reg 1 0x00000011 ]
  [ payload load 2b @ transport header + 2 => reg 1 ]
  [ cmp eq reg 1 0x00003500 ]
  [ immediate reg 1 0x00003500 ]
  [ redir proto_min reg 1 proto_max reg 1 flags 0x2 ]

$1 corral filter_out
  [ payload load $2 => reg 1 ]
  [ cmp neq reg 1 $3 ]
  [ limit rate 100/second burst 100 type packets flags 0x0 ]
  [ log group 7 snaplen 0 qthreshold 0 ]

$1 corral filter_out
  [ payload load $2 => reg 1 ]
  [ cmp neq reg 1 $3 ]
  [ immediate reg 0 drop ]

EOF
}
nft_table() {
	cat <<EOF
table $1 corral {
  chain raw_out {
    type filter hook output priority raw; policy accept;
    $1 saddr $3 tcp sport 3129 return
    $1 saddr $3 udp sport 53 return
    $1 daddr $2 notrack
  }

  chain tcp_over_rate {
    limit rate 25/second burst 25 packets log prefix "corral over rate" group 7
    reject with tcp reset
  }

  chain dns_over_rate {
    limit rate 25/second burst 25 packets log prefix "corral over rate" group 7
    drop
  }

  chain out {
    type nat hook output priority -100; policy accept;
    $1 daddr $2 return
    meta l4proto tcp ct state new limit rate over $4/second burst $4 packets jump tcp_over_rate
    udp dport 53 ct state new limit rate over $4/second burst $4 packets jump dns_over_rate
    meta l4proto tcp redirect to :3129
    udp dport 53 redirect to :53
  }

  chain filter_out {
    type filter hook output priority filter; policy accept;
    $1 daddr != $2 limit rate 100/second burst 100 packets log group 7
    $1 daddr != $2 drop
  }
}
EOF
}

# Transparent mode's rules go to the kernel as one netlink batch built by
# hand (src/lib/nft.c), no longer through libnftables from their text.
# What the kernel holds must be what nft made from that text, expression
# by expression: nft itself lists it, from inside the sandbox's netns
# (rule handles left out).
t_transparent_rules_as_nft_lists_them() {
	local rc=0
	[ -x /usr/sbin/nft ] || { skip "no /usr/sbin/nft"; return 77; }
	printf '{"network": {"mode": "proxy", "allow": ["web.test:80"], "hosts": %s},
	  "limits": {"connections": 300}}\n' '{"web.test": "127.0.0.1"}' > "$T/p.json"
	chmod 644 "$T/p.json"
	/usr/bin/python3 - "$CORRAL" "$T" "$HERE" > "$T/probe" 2>&1 <<'PY' || rc=$?
import ctypes, fcntl, os, socket, struct, sys
corral, t = sys.argv[1], sys.argv[2]
sys.path.insert(0, sys.argv[3])
from sandbox_probe import running_sandbox, sandbox_ns
CAP_NET_ADMIN = 12
def nft_inside(fds):
    """In the sandbox's user and net namespaces, nft run with
    CAP_NET_ADMIN there as an ambient capability (uid 0 is not ours)."""
    libc = ctypes.CDLL(None, use_errno=True)
    for fd in fds:
        if libc.setns(fd, 0) != 0:
            sys.exit("setns: errno %d" % ctypes.get_errno())
    hdr = struct.pack("II", 0x20080522, 0)
    data = ctypes.create_string_buffer(24)
    if libc.capget(hdr, data) != 0:
        sys.exit("capget: errno %d" % ctypes.get_errno())
    eff, perm, inh = struct.unpack_from("III", data.raw)
    struct.pack_into("III", data, 0, eff, perm, inh | (1 << CAP_NET_ADMIN))
    if libc.capset(hdr, data) != 0 or \
            libc.prctl(47, 2, CAP_NET_ADMIN, 0, 0) != 0:    # PR_CAP_AMBIENT_RAISE
        sys.exit("ambient CAP_NET_ADMIN: errno %d" % ctypes.get_errno())
    os.execv("/usr/sbin/nft", ["nft", "--debug=netlink", "list", "ruleset"])
with running_sandbox(corral, t + "/p.json") as p:
    fds = sandbox_ns(p.pid)
    child = os.fork()
    if child == 0:          # setns changes this process: a child of its own does it
        try:
            nft_inside(fds)
        finally:
            os._exit(127)
    _, status = os.waitpid(child, 0)
    sys.exit(os.waitstatus_to_exitcode(status))
PY
	[ "$rc" = 0 ] || { cat "$T/probe"; fail "nft in the sandbox's netns failed ($rc)"; return; }
	sed -E 's/^(ip6? corral [a-z_]+) [0-9 ]+$/\1/; s/\t/  /g' "$T/probe" > "$T/rules"
	# new flows a second: 4 for each of limits.connections (proxy.c)
	{
		nft_expressions ip "1b @ network header + 16" 0x0000007f \
			"4b @ network header + 12" 0x0100007f 1200
		nft_expressions ip6 "16b @ network header + 24" \
			"0x00000000 0x00000000 0x00000000 0x01000000" \
			"16b @ network header + 8" "0x00000000 0x00000000 0x00000000 0x01000000" 1200
		nft_table ip 127.0.0.0/8 127.0.0.1 1200
		nft_table ip6 ::1 ::1 1200
	} > "$T/want"
	diff -u "$T/want" "$T/rules" > "$T/rules.diff" ||
		{ cat "$T/rules.diff"; fail "the sandbox's nftables rules are not nft's"; }
}

# init opens the proxy's listeners in the sandbox's netns and hands them to
# the supervisor (proxy_listeners_send): the command must hold none of
# them, nor see init's fds, and they must still be the supervisor's, which
# answers on them.
t_listeners_not_the_commands() {
	policy '["web.test:80"]' '{"web.test": "127.0.0.1"}'
	nrun -- /usr/bin/python3 -c '
import os, socket
def link(f):
    try:
        return os.readlink("/proc/self/fd/" + f)
    except OSError:         # the fd listdir used, closed by now
        return ""
print("sockets", [l for l in map(link, os.listdir("/proc/self/fd")) if l.startswith("socket:")])
try:
    print("init fds", os.listdir("/proc/1/fd"))
except OSError as e:
    print("init fds closed", e.errno)
s = socket.create_connection(("127.0.0.1", 3128), 5)
s.sendall(b"GET http://evil.test/ HTTP/1.0\r\nHost: evil.test\r\n\r\n")
s.settimeout(5)
print("proxy", s.recv(12).decode())'
	expect_contains "no socket" "$(stdout)" "sockets []"
	expect_contains "init's fds" "$(stdout)" "init fds closed 13"
	expect_contains "the supervisor answers" "$(stdout)" "proxy HTTP/1.1 403"
	expect_contains "denial event" "$(< "$T/events")" '"host":"evil.test"'
}

# When init cannot open a listener, the run fails before its command, and
# says which and why: the supervisor's words for what init sent.
t_listener_failure_is_said() {
	local rc=0
	command -v strace > /dev/null || { skip "no strace"; return 77; }
	policy '["web.test:80"]' '{"web.test": "127.0.0.1"}'
	# LeakSanitizer cannot run under ptrace
	ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" \
	timeout 60 strace -f -o /dev/null -e trace=listen -e inject=listen:error=EADDRINUSE:when=1 \
		"$CORRAL" run --policy "$T/p.json" -- /bin/echo ran > "$T/out" 2> "$T/err" || rc=$?
	expect_eq "exit status" "$rc" 125
	expect_contains "why" "$(< "$T/err")" \
		"cannot listen on 127.0.0.1:3128 in the sandbox: Address already in use"
	expect_not_contains "the command" "$(< "$T/out")" "ran"
}

# The agent cannot take transparent mode's rules away: neither nft nor a
# batch of its own on a netfilter socket, and a connection to an outside
# address afterwards still ends at the supervisor.
t_agent_cannot_undo_the_redirect() {
	policy '["web.test:80"]' '{"web.test": "127.0.0.1"}'
	nrun -- /bin/sh -c '
		[ -x /usr/sbin/nft ] && { /usr/sbin/nft flush ruleset 2>&1; echo nft rc=$?; }
		/usr/bin/python3 -c "
import socket, struct, errno
def msg(t, flags, fam, res, payload=b\"\"):
    body = struct.pack(\"BBH\", fam, 0, socket.htons(res)) + payload
    return struct.pack(\"IHHII\", 16 + len(body), t, flags, 0, 0) + body
name = b\"corral\\x00\"
attr = struct.pack(\"HH\", 4 + len(name), 1) + name + b\"\\x00\"
# NFT_MSG_DELTABLE ip corral, in a batch
batch = msg(0x10, 1, 0, 10) + msg((10 << 8) | 2, 1 | 4, 2, 0, attr) + msg(0x11, 1, 0, 10)
try:
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 12)
    s.send(batch)
    s.settimeout(2)
    r = s.recv(4096)
    print(\"batch answered\", struct.unpack_from(\"i\", r, 16)[0])
except OSError as e:
    print(\"batch blocked\", errno.errorcode.get(e.errno))
s = socket.create_connection((\"198.51.100.7\", 80), 5)
s.sendall(b\"\\x00 junk\\r\\n\\r\\n\")
s.settimeout(5)
print(\"after\", s.recv(12).decode())
"'
	out=$(stdout)
	case "$out" in
	*"nft rc=0"*) fail "nft flushed the sandbox's rules: $out" ;;
	esac
	expect_contains "the batch" "$out" "batch blocked"
	expect_contains "still redirected" "$out" "after HTTP/1.1 403"
	expect_eq "the denial" "$(denials)" 1
}

# The proxy's listeners are opened in the sandbox's network namespace,
# which init makes after the clone: opened a moment early, they would be on
# the host's loopback, where any local process could use corral's egress.
# Every listening socket the supervisor holds (TCP, and UDP on port 53)
# must sit in one namespace, not the host's.
t_listeners_never_on_the_host() {
	local rc=0 i
	policy '["web.test:80"]' '{"web.test": "127.0.0.1"}'
	for i in 1 2 3; do
		/usr/bin/python3 - "$CORRAL" "$T" "$HERE" > "$T/probe" 2>&1 <<'PY' || rc=$?
import fcntl, os, socket, sys
corral, t = sys.argv[1], sys.argv[2]
sys.path.insert(0, sys.argv[3])
from sandbox_probe import running_sandbox, sockets_of
with running_sandbox(corral, t + "/p.json") as p:
    host = os.stat("/proc/self/ns/net").st_ino
    where, ports = set(), set()
    for sk in sockets_of(p.pid):
        if sk.family not in (socket.AF_INET, socket.AF_INET6):
            continue
        # its own connections out, and its resolver's, are the host's
        listens = sk.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN) \
            if sk.type == socket.SOCK_STREAM else sk.getsockname()[1] == 53
        if not listens:
            continue
        net = fcntl.ioctl(sk.fileno(), 0x894C)      # SIOCGSKNS
        where.add(os.fstat(net).st_ino)
        os.close(net)
        ports.add(sk.getsockname()[1])
    print("listening on", " ".join(str(x) for x in sorted(ports)))
    print("namespaces", len(where), "the host's" if host in where else "not the host's")
PY
		[ "$rc" = 0 ] || { cat "$T/probe"; fail "the probe failed ($rc)"; }
		expect_contains "the proxy's listeners" "$(< "$T/probe")" "3128"
		expect_contains "where they are" "$(< "$T/probe")" "namespaces 1 not the host's"
	done
	# init's unshare made slow (strace): the supervisor waits for it
	command -v strace >/dev/null || return 0
	rc=0
	ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" \
	timeout 60 strace -f -qq -o /dev/null -e trace=unshare \
		-e inject=unshare:delay_enter=300000:when=1 \
		"$CORRAL" run --policy "$T/p.json" -- /bin/true > "$T/out" 2>&1 || rc=$?
	expect_eq "a slow namespace, waited for: $(< "$T/out")" "$rc" 0
}

run_tests "$@"
echo "net ($(id -un 2>/dev/null || id -u)): $PASS passed, $FAIL failed, $SKIP skipped"
[ -n "$FAILED_NAMES" ] && echo "failed:$FAILED_NAMES"
[ "$FAIL" -eq 0 ]
