#!/bin/bash
# plugin.sh - OpenSSL stays out of corral, and its TLS plugin is loaded
# only from beside the binary, only if it is safe to, only when needed.
#
#   tests/plugin.sh CORRAL [TEST...]
#
# corral-tls.so is expected next to CORRAL (make builds it there).  Each
# attack works on a copy of the two in a scratch directory: a plugin
# writable by its group or by others, owned by someone else (root only),
# or missing, must stop a terminating sandbox before its command runs.
set -u
CORRAL=$(realpath "$1")
shift
PLUGIN=$(dirname "$CORRAL")/corral-tls.so
HERE=$(cd "$(dirname "$0")" && pwd)
TEST_TMP=$(mktemp -d "${TMPDIR:-/tmp}/corral-plugin.XXXXXX")
chmod 755 "$TEST_TMP"
trap 'rm -rf "$TEST_TMP"' EXIT
. "$HERE/lib.sh"

# a policy that terminates TLS (nothing is connected to: the command echoes)
TLS_POLICY='{"network": {"mode": "proxy", "allow": [{"host": "api.test", "tls": "terminate"}]}}'
PLAIN_POLICY='{"network": {"mode": "proxy", "allow": ["api.test"]}}'

# stage: corral and its plugin copied to $T/bin, as make leaves them
stage() {
	mkdir -p "$T/bin"
	cp "$CORRAL" "$PLUGIN" "$T/bin/"
	chmod 755 "$T/bin" "$T/bin/corral" "$T/bin/corral-tls.so"
	printf '%s\n' "$TLS_POLICY" > "$T/tls.json"
	printf '%s\n' "$PLAIN_POLICY" > "$T/plain.json"
	chmod 644 "$T/tls.json" "$T/plain.json"
}

# srun POLICY: the staged corral runs `echo ran-$$` under POLICY; out, err, rc in $T
srun() {
	local rc=0
	timeout 60 "$T/bin/corral" run --policy "$T/$1.json" -- /bin/echo "ran-$$" \
		> "$T/out" 2> "$T/err" < /dev/null || rc=$?
	echo "$rc" > "$T/rc"
}

# refused WHAT: the run failed, said WHAT and the plugin's path, ran nothing
refused() {
	[ "$(cat "$T/rc")" != 0 ] || fail "the run succeeded: $(cat "$T/out")"
	expect_contains "error" "$(cat "$T/err")" "$T/bin/corral-tls.so"
	expect_contains "error" "$(cat "$T/err")" "$1"
	expect_not_contains "output" "$(cat "$T/out")" "ran-$$"
}

# ---- what the binary is made of -------------------------------------------

t_no_openssl_in_corral() {
	local syms
	# the symbols of the binary (it is built with them: -g, not stripped)
	nm "$CORRAL" > "$T/syms" || fail "nm $CORRAL"
	[ -s "$T/syms" ] || fail "nm read no symbols from $CORRAL"
	syms=$(grep -E ' ((SSL|SSL_CTX|EVP|OPENSSL|OSSL|X509|BIO|CRYPTO|PEM|BN|EC_KEY|ldns)_|ERR_get_error|RAND_bytes)' \
		"$T/syms" | head -5)
	[ -z "$syms" ] || fail "OpenSSL (or ldns, which needs it) is linked into corral: $syms"
	readelf -dW "$CORRAL" | grep NEEDED > "$T/needed"
	if grep -E 'libssl|libcrypto|libevent_openssl|libldns' "$T/needed"; then
		fail "corral needs OpenSSL at load time"
	fi
}

# Each relative relocation is a write the loader makes at every start, and
# a page it writes is a copy-on-write fault: with OpenSSL linked in there
# were 21166 of them over ~109 pages (18k OpenSSL's method, provider and
# error tables); without, under 2000.  A bound well above today's figure
# and far below OpenSSL's catches it, or anything as big, coming back.
t_few_relocations() {
	local n
	# the sanitizers' metadata for every global is relocated too
	if nm "$CORRAL" | grep -q ' __asan_init'; then
		skip "a sanitized build: its relocations are the sanitizers' as much as corral's"
	fi
	n=$(readelf -rW "$CORRAL" | grep -c '_RELATIVE ')
	echo "relative relocations in corral: $n"
	[ "$n" -gt 0 ] || fail "no relative relocations read: not a PIE?"
	[ "$n" -lt 6000 ] || fail "$n relative relocations (OpenSSL linked in had 21166)"
}

# Symbols bound at load (-z now), before the daemon forks anything: bound
# lazily, every process a sandbox forks from init resolved again, on a
# copied GOT page, each function it called first (a daemon exec of `true`
# measured 0.3 ms slower).  make check's builds once dropped the flag by
# giving LDFLAGS on the command line.
t_bound_at_load() {
	readelf -dW "$CORRAL" > "$T/dyn" || fail "readelf -d $CORRAL"
	grep -q 'FLAGS_1.*NOW' "$T/dyn" || fail "corral is not linked with -z now: $(grep FLAGS "$T/dyn")"
	grep -q 'BIND_NOW' "$T/dyn" || fail "no BIND_NOW in corral's dynamic section"
}

# libresolv (glibc's DNS message parser, dnsmsg.c) is opened at the first
# DNS message, not at every start: loading it cost each cold `corral run`
# about 0.25 ms (issue 17).  A run that looks nothing up never maps it; a
# run that does is answered (NXDOMAIN: the network is off), through it.
ASK_THEN_WAIT='import os, socket, sys, time
if sys.argv[1] == "yes":
    try:
        socket.getaddrinfo("registry.npmjs.org", 443)
        a = "answered"
    except socket.gaierror as e:
        a = str(e.errno)
    open("/m/answer", "w").write(a)
open("/m/up", "w").close()
for _ in range(600):
    if os.path.exists("/m/go"):
        break
    time.sleep(0.05)'

t_resolver_loaded_at_the_first_question() {
	local run sup i rc maps ask
	readelf -dW "$CORRAL" | grep NEEDED > "$T/needed" || fail "readelf -d $CORRAL"
	! grep libresolv "$T/needed" || fail "corral needs libresolv at load time"
	mkdir "$T/m" && chmod 777 "$T/m"
	for ask in no yes; do
		rm -f "$T/m/up" "$T/m/go" "$T/m/answer"
		timeout 60 "$CORRAL" run --rw "$T/m:/m" -- python3 -c "$ASK_THEN_WAIT" "$ask" \
			> "$T/out" 2> "$T/err" < /dev/null &
		run=$!
		i=0
		while [ ! -e "$T/m/up" ] && [ $i -lt 600 ]; do
			sleep 0.05; i=$((i + 1))
		done
		sup=$(pgrep -P "$run" -x corral || true)
		maps=$(grep -c libresolv "/proc/$sup/maps" 2>/dev/null || true)
		touch "$T/m/go"
		rc=0
		wait "$run" || rc=$?
		[ -n "$sup" ] && [ -e "$T/m/up" ] ||
			fail "asked=$ask: no command running under a supervisor ($(cat "$T/err"))"
		expect_eq "asked=$ask: rc ($(cat "$T/err"))" "$rc" 0
		if [ "$ask" = no ]; then
			expect_eq "libresolv mapped before any DNS message" "$maps" 0
		else
			[ "${maps:-0}" -gt 0 ] || fail "a DNS message parsed without libresolv mapped?"
			expect_eq "the lookup's answer" "$(cat "$T/m/answer")" -2
		fi
	done
}

# the plugin uses corral's one libevent, never a second
t_plugin_shares_corrals_libevent() {
	local mine theirs
	mine=$(readelf -dW "$CORRAL" | grep -o 'libevent-[^]]*' || true)
	theirs=$(readelf -dW "$PLUGIN" | grep -o 'libevent-[^]]*' || true)
	[ -n "$mine" ] || fail "corral does not need libevent shared"
	expect_eq "the plugin's libevent" "$theirs" "$mine"
	readelf -dW "$PLUGIN" | grep -q 'NEEDED.*libssl' || fail "the plugin does not need libssl"
	# one export: the ops table (and, under ASan, its __odr_asan marker)
	nm -D --defined-only "$PLUGIN" | awk '$2 ~ /^[A-Z]$/ && $3 !~ /^__/ { print $3 }' \
		> "$T/exports"
	expect_eq "the plugin's exports" "$(cat "$T/exports")" "corral_tls_ops"
}

# ---- loading -----------------------------------------------------------------

t_terminating_policy_runs_with_the_plugin() {
	stage
	srun tls
	expect_eq "rc" "$(cat "$T/rc")" 0
	expect_contains "output" "$(cat "$T/out")" "ran-$$"
}

# a policy that terminates nothing never looks for the plugin
t_plain_policy_needs_no_plugin() {
	stage
	rm "$T/bin/corral-tls.so"
	srun plain
	expect_eq "rc ($(cat "$T/err"))" "$(cat "$T/rc")" 0
	expect_contains "output" "$(cat "$T/out")" "ran-$$"
}

# never a sandbox whose TLS would go out unterminated, its secrets unkept
t_missing_plugin_refused() {
	stage
	rm "$T/bin/corral-tls.so"
	srun tls
	refused "cannot open it"
}

# Nowhere but beside the binary: not the working directory, not the
# library path.
t_plugin_only_from_beside_the_binary() {
	stage
	mv "$T/bin/corral-tls.so" "$T/corral-tls.so"
	cd "$T"
	local rc=0
	LD_LIBRARY_PATH=$T timeout 60 "$T/bin/corral" run --policy "$T/tls.json" -- \
		/bin/echo "ran-$$" > "$T/out" 2> "$T/err" < /dev/null || rc=$?
	echo "$rc" > "$T/rc"
	refused "cannot open it"
}

t_group_writable_plugin_refused() {
	stage
	chmod 775 "$T/bin/corral-tls.so"
	srun tls
	refused "writable by its group"
}

t_world_writable_plugin_refused() {
	stage
	chmod 757 "$T/bin/corral-tls.so"
	srun tls
	refused "writable by others"
}

# someone else's plugin would run their code in the supervisor
t_foreign_plugin_refused() {
	[ "$(id -u)" = 0 ] || skip "chown needs root"
	stage
	chown 65534 "$T/bin/corral-tls.so"
	srun tls
	refused "owned by uid 65534"
}

# a symlink is not followed: what is checked is what is loaded
t_symlinked_plugin_refused() {
	stage
	mv "$T/bin/corral-tls.so" "$T/real.so"
	ln -s "$T/real.so" "$T/bin/corral-tls.so"
	srun tls
	refused "cannot open it"
}

# A binary no longer at its path (replaced by an upgrade, or run from a
# memfd as here): no directory of its own, so no plugin, from anywhere.
t_binary_without_a_path_refused() {
	local rc=0
	stage
	# a plugin in / is the first wrong guess a memfd's "/memfd:..." invites
	/usr/bin/python3 -c 'import os, sys
fd = os.memfd_create("corral", 0)
os.write(fd, open(sys.argv[1], "rb").read())
os.execv("/proc/self/fd/%d" % fd, ["corral", "run", "--policy", sys.argv[2], "--",
         "/bin/echo", sys.argv[3]])' "$T/bin/corral" "$T/tls.json" "ran-$$" \
		> "$T/out" 2> "$T/err" < /dev/null || rc=$?
	[ "$rc" != 0 ] || fail "the run succeeded: $(cat "$T/out")"
	expect_contains "error" "$(cat "$T/err")" "is no longer at its path"
	expect_not_contains "output" "$(cat "$T/out")" "ran-$$"
}

# a file that is no plugin: dlopen's own reason, named
t_broken_plugin_refused() {
	stage
	printf 'not an ELF file\n' > "$T/bin/corral-tls.so"
	srun tls
	refused "cannot load TLS termination from"
}

echo "# relative relocations in $CORRAL: $(readelf -rW "$CORRAL" | grep -c '_RELATIVE ')"
# ---- the daemon: a box is refused, the daemon goes on ------------------------

# api METHOD PATH [BODY]: the staged daemon's answer, body in $T/body
api() {
	curl -sS --max-time 30 --unix-socket "$T/s" -o "$T/body" -w '%{http_code}' \
		-X "$1" "http://corral$2" ${3:+-H 'Content-Type: application/json' -d "$3"} \
		2> "$T/curl.err" || true
}

# daemon_start: the staged corral serves on $T/s; DPID
daemon_start() {
	local i=0
	"$T/bin/corral" serve --socket "$T/s" --state-dir "$T/state" > "$T/daemon.log" 2>&1 \
		< /dev/null &
	DPID=$!
	# shellcheck disable=SC2064
	trap "kill $DPID 2>/dev/null; wait $DPID 2>/dev/null" EXIT
	while [ $i -lt 200 ] && [ "$(api GET /v1/health)" != 200 ]; do
		kill -0 "$DPID" 2>/dev/null || break
		sleep 0.05
		i=$((i + 1))
	done
	expect_eq "health ($(tail -3 "$T/daemon.log"))" "$(api GET /v1/health)" 200
}

daemon_stop() {
	kill "$DPID"
	wait "$DPID" 2>/dev/null || true
	trap - EXIT
}

t_daemon_box_refused_without_plugin() {
	local code
	stage
	daemon_start
	rm "$T/bin/corral-tls.so"
	code=$(api POST /v1/sandboxes "{\"policy\": $TLS_POLICY}")
	[ "$code" != 201 ] || fail "a box that terminates TLS was made without the plugin"
	expect_contains "why" "$(cat "$T/body")" "$T/bin/corral-tls.so"
	expect_eq "health after" "$(api GET /v1/health)" 200
	daemon_stop
}

# the daemon loads it for its first such box; the box has its CA
t_daemon_box_terminates_with_plugin() {
	local code id
	stage
	daemon_start
	code=$(api POST /v1/sandboxes "{\"policy\": $TLS_POLICY}")
	expect_eq "create ($(cat "$T/body"))" "$code" 201
	id=$(json id < "$T/body")
	code=$(api POST "/v1/sandboxes/$id/exec" \
		'{"command": "echo $SSL_CERT_FILE; grep -c BEGIN /etc/corral/ca.pem"}')
	expect_eq "exec ($(cat "$T/body"))" "$code" 200
	expect_eq "inside" "$(json stdout < "$T/body")" "/etc/corral/bundle.pem
1"
	expect_eq "delete" "$(api DELETE "/v1/sandboxes/$id")" 200
	daemon_stop
}

run_tests "$@"
echo "plugin ($(id -un)): $PASS passed, $FAIL failed, $SKIP skipped"
[ "$FAIL" = 0 ]
