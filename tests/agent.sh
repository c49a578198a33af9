#!/bin/bash
# agent.sh - the supervisor as authority, seen through the daemon: a
# misbehaving agent's calls are attributed, the abort criteria halt the
# sandbox by themselves (frozen, then killed), later calls are refused with
# the reason, and the audit log proves what happened.
#
#   tests/agent.sh CORRAL HELPERS_DIR [TEST...]
set -u
CORRAL=$(readlink -f "$1")
shift 2
HERE=$(cd "$(dirname "$0")" && pwd)
TEST_TMP=$(mktemp -d "${TMPDIR:-/tmp}/corral-agent.XXXXXX")
chmod 755 "$TEST_TMP"
trap 'rm -rf "$TEST_TMP"' EXIT
. "$HERE/lib.sh"
. "$HERE/daemon.sh"
ME=$(id -u)


events_of() { api GET "/v1/events?sandbox=$1"; }
count_type() { events_of "$1" | grep -c "\"type\":\"$2\"" || true; }
has_at_least() { [ "$(count_type "$1" "$2")" -ge "$3" ]; }
state_is() { [ "$(api GET "/v1/sandboxes/$1" | json state)" = "$2" ]; }

# the sandbox's cgroup directory in one v1 hierarchy (or nothing)
cg_dir() {	# cg_dir CONTROLLER ID
	find /sys/fs/cgroup/"$1" -maxdepth 2 -type d -name "corral-$DPID-$2" 2>/dev/null | head -1
}

create_misbehaving() {	# create_misbehaving ON_ABORT -> sandbox id
	local body
	body=$(printf '{"idle_freeze_ms": 0, "policy": {
		"network": {"mode": "proxy", "allow": ["web.test:80"],
			    "hosts": {"web.test": "127.0.0.1"}},
		"abort": {"max_distinct_denied_destinations": 8, "window_seconds": 60,
			  "tripwires": ["/home/agent/.aws/credentials"],
			  "on_abort": "%s"}}}' "$1")
	api POST /v1/sandboxes "$body" | json id
	[ "$(cat "$T/status")" = 201 ] || fail "create: $(cat "$T/status") $(cat "$T/body")"
}

# The issue's script: call 1 leaves a background process that probes five
# ports (under the limit) and then burns CPU; call 2 reads a tripwire.
# The burner counts to 2000 and naps a tenth of a second, over and over
# (a spin here cost each lane seconds of CPU until the halt): unfrozen it
# would take some CPU every tenth, all the "no CPU while frozen" needs.
t_misbehaving_agent() {
	trap stop_daemon EXIT
	start_daemon
	id=$(create_misbehaving freeze)
	api POST "/v1/sandboxes/$id/exec" '{"tool_call_id": "call-0", "argv": ["curl", "-s", "-m", "5", "http://evil.test:7/"]}' > "$T/r0"
	expect_contains "explained" "$(json reason < "$T/r0")" \
		"; denied: connection to evil.test:7 (evil.test:7 is not in the allowlist); 1 denial"
	expect_eq "listed" "$(json denials.0.call < "$T/r0")" call-0
	# the probes wait a second: a denial is "background" once the call has
	# ended, and under load the first probe could beat the call's end
	api POST "/v1/sandboxes/$id/exec" '{"tool_call_id": "call-1", "command":
		"( sleep 1; for p in 1 2 3 4 5; do curl -s -m 5 http://evil.test:$p/ >/dev/null; done; unshare -r true; while :; do i=0; while [ $i -lt 2000 ]; do i=$((i+1)); done; sleep 0.1; done ) >/dev/null 2>&1 &"}' > "$T/r1"
	expect_eq "call 1" "$(json status < "$T/r1")" exited
	wait_for "six denials" has_at_least "$id" egress.denied 6
	wait_for "the denied unshare" has_at_least "$id" syscall.denied 1
	api POST "/v1/sandboxes/$id/exec" '{"tool_call_id": "call-2", "argv": ["cat", "/home/agent/.aws/credentials"]}' > "$T/r2"
	wait_for "the halt" state_is "$id" halted

	# attribution: the background probes and the syscall are call 1's
	events_of "$id" > "$T/ev"
	grep '"type":"egress.denied"' "$T/ev" > "$T/denied"
	expect_eq "denials" "$(wc -l < "$T/denied")" 6
	expect_eq "denials of call 1" "$(grep -c '"call":"call-1"' "$T/denied")" 5
	expect_eq "marked background" "$(grep -c '"background":true' "$T/denied")" 5
	expect_contains "syscall of call 1" "$(grep '"type":"syscall.denied"' "$T/ev")" '"call":"call-1"'
	expect_contains "sandbox pid" "$(grep '"type":"syscall.denied"' "$T/ev")" '"sandbox_pid":'
	trip=$(grep '"type":"tripwire"' "$T/ev" | head -1)
	if [ "$ME" = 0 ]; then	# fanotify: the opener's pid, its call
		expect_contains "tripwire of call 2" "$trip" '"call":"call-2"'
	else	# inotify, no pid: call 1's leftover could have read it as well
		expect_not_contains "no call named" "$trip" '"call":'
		expect_contains "why not" "$trip" 'besides the one call running (call-2) other processes'
	fi
	abort=$(grep '"type":"abort"' "$T/ev")
	expect_contains "criterion" "$abort" '"criterion":"tripwire"'
	expect_contains "evidence" "$abort" '"evidence":{'
	expect_contains "evidence path" "$abort" '.aws/credentials'
	[ "$ME" = 0 ] && expect_contains "the decoy stayed shut" \
		"$(json stdout < "$T/r2")$(json status < "$T/r2")" halted
	# the call that tripped it hears of the halt, also when the command
	# (denied, or reading a decoy unprivileged) ended before the freeze
	expect_eq "call 2 halted" "$(json status < "$T/r2")" halted
	expect_contains "call 2 says why" "$(json reason < "$T/r2")" "halted: "
	# cat may read the decoy and exit 0 (inotify): never a success
	[ "$(json exit_code < "$T/r2")" != 0 ] || fail "a halted call's exit_code is 0"

	# frozen: the freezer says so and the CPU burner gets no CPU
	freezer=$(cg_dir freezer "$id")
	cpuacct=$(cg_dir cpuacct "$id")
	if [ -n "$freezer" ] && [ -n "$cpuacct" ]; then
		expect_eq "freezer" "$(cat "$freezer/freezer.state")" FROZEN
		pids=$(find "$freezer" -name cgroup.procs -exec cat {} + | sort -u)
		[ -n "$pids" ] || fail "no processes held"
		a=$(cat "$cpuacct/cpuacct.usage")
		sleep 1
		b=$(cat "$cpuacct/cpuacct.usage")
		expect_eq "CPU while frozen (ns)" "$b" "$a"
	else
		pids=""
		echo "no freezer here: the halt killed instead"
		expect_contains "killed" "$(grep '"type":"halt"' "$T/ev")" '"state":"killed"'
	fi

	# later calls are refused, with the reason
	api POST "/v1/sandboxes/$id/exec" '{"argv": ["true"]}' > /dev/null
	expect_eq "refused" "$(cat "$T/status")" 409
	expect_contains "reason" "$(json detail < "$T/body")" "tripwire"

	# then killed: destroy ends the hold, nothing of it is left.  The
	# DELETE answers once the tree is frozen; the kill and the groups'
	# removal are its helper's, off the daemon's loop (docs/API.md): up
	# to 10 s for them, then nothing may be left
	api DELETE "/v1/sandboxes/$id" > /dev/null
	expect_eq "destroy" "$(cat "$T/status")" 200
	for _ in $(seq 1 100); do
		left=$(cg_dir freezer "$id")
		for p in $pids; do
			[ -d "/proc/$p" ] && left="$left $p"
		done
		[ -z "$left" ] && break
		sleep 0.1
	done
	for p in $pids; do
		[ ! -d "/proc/$p" ] || fail "process $p outlived its sandbox"
	done
	[ -z "$(cg_dir freezer "$id")" ] || fail "the cgroup is left"
	"$CORRAL" audit verify "$T/state/audit.jsonl" > "$T/verify" 2>&1 ||
		fail "audit verify: $(cat "$T/verify")"
}

# py_call ID PROG: an exec's body that runs the Python PROG as tool call ID
py_call() {
	python3 -c 'import json, sys
print(json.dumps({"tool_call_id": sys.argv[1], "argv": ["python3", "-c", sys.argv[2]]}))' "$1" "$2"
}

# expect_evil_denied_to RESULT CALL: the result of a call whose GET of
# evil.test:7 through the proxy was refused, and the denial named CALL
expect_evil_denied_to() {
	expect_eq "refused by the proxy" "$(json stdout < "$1")" "HTTP/1.1 403 Forbidden"
	expect_contains "explained" "$(json reason < "$1")" \
		"; denied: connection to evil.test:7 (evil.test:7 is not in the allowlist); 1 denial"
	expect_eq "listed" "$(json denials.0.call < "$1")" "$2"
}

# A denial through a dual-stack socket (AF_INET6, connected to the
# proxy's v4-mapped address, ::ffff:127.0.0.1) names its call as an
# AF_INET socket's does.  The kernel lists such a socket among the
# AF_INET6 ones, and the search asked AF_INET's only: the denial named no
# pid and no call, and the call's result said "exited with status 0",
# with no denial in it (as root too: no socket found, no cgroup read).
t_dual_stack_denial_names_its_call() {
	local prog body
	trap stop_daemon EXIT
	start_daemon
	id=$(create_misbehaving freeze)
	prog='import os, socket, urllib.parse
u = urllib.parse.urlparse(os.environ["http_proxy"])
s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
s.connect(("::ffff:" + u.hostname, u.port))
s.sendall(b"GET http://evil.test:7/ HTTP/1.1\r\nHost: evil.test:7\r\n\r\n")
print(s.recv(100).split(b"\r\n")[0].decode())'
	body=$(py_call v6 "$prog")
	api POST "/v1/sandboxes/$id/exec" "$body" > "$T/r"
	expect_evil_denied_to "$T/r" v6
	api DELETE "/v1/sandboxes/$id" > /dev/null
}

# Sockets the sandbox closed on the asker's own port (SO_REUSEADDR):
# TIME_WAIT ones, and orphans in FIN_WAIT2 whose peer it holds open.  The
# kernel lists them with no inode, and the search took the first socket
# bound to the asker's address: with one of those ahead of the asker, a
# denial named neither pid nor call, and was in no call's result, for a
# few connections of the sandbox's own.
t_closed_sockets_on_the_askers_port_hide_no_asker() {
	local prog body
	trap stop_daemon EXIT
	start_daemon
	id=$(create_misbehaving freeze)
	prog='import os, socket, urllib.parse
u = urllib.parse.urlparse(os.environ["http_proxy"])
def bound(port):
    c = socket.socket()
    c.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    c.bind(("127.0.0.1", port))
    return c
s = bound(0)
port = s.getsockname()[1]
held = []
for i in range(200):
    l = socket.socket()
    l.bind(("127.0.0.1", 0))
    l.listen(1)
    c = bound(port)
    c.connect(l.getsockname())
    a, _ = l.accept()
    c.close()
    if i % 2:
        a.close()
    held += [l, a]
s.connect((u.hostname, u.port))
s.sendall(b"GET http://evil.test:7/ HTTP/1.1\r\nHost: evil.test:7\r\n\r\n")
print(s.recv(100).split(b"\r\n")[0].decode())'
	body=$(py_call tw "$prog")
	api POST "/v1/sandboxes/$id/exec" "$body" > "$T/r"
	expect_evil_denied_to "$T/r" tw
	api DELETE "/v1/sandboxes/$id" > /dev/null
}

# A decoy on the asker's own port: a background process of another call's
# that listens on 127.0.0.1:P with SO_REUSEADDR and SO_REUSEPORT, which
# lets the asker bind P too.  The search took the first socket bound to
# the asker's address that the kernel listed, the listener, and named
# its process: the denial went to the decoy's call, the asker's result
# said "exited with status 0" with no denial in it.  Only the socket
# connected to the proxy is the asker's now (its destination).
t_a_decoy_on_the_askers_port_names_no_other_call() {
	local prog body i
	trap stop_daemon EXIT
	start_daemon
	id=$(create_misbehaving freeze)
	prog='import os, socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
s.bind(("127.0.0.1", 0))
s.listen(1)
if os.fork():
    os._exit(0)
os.setsid()
for f in (0, 1, 2):
    os.dup2(os.open("/dev/null", os.O_RDWR), f)
open("/tmp/decoy.port.new", "w").write(str(s.getsockname()[1]))
os.rename("/tmp/decoy.port.new", "/tmp/decoy.port")
time.sleep(600)'
	body=$(py_call decoy "$prog")
	api POST "/v1/sandboxes/$id/exec" "$body" > "$T/r0"
	expect_eq "the decoy's call" "$(json status < "$T/r0")" exited
	prog='import os, socket, time, urllib.parse
u = urllib.parse.urlparse(os.environ["http_proxy"])
for _ in range(100):
    if os.path.exists("/tmp/decoy.port"):
        break
    time.sleep(0.1)
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
s.bind(("127.0.0.1", int(open("/tmp/decoy.port").read())))
s.connect((u.hostname, u.port))
s.sendall(b"GET http://evil.test:7/ HTTP/1.1\r\nHost: evil.test:7\r\n\r\n")
print(s.recv(100).split(b"\r\n")[0].decode())'
	body=$(py_call asker "$prog")
	api POST "/v1/sandboxes/$id/exec" "$body" > "$T/r"
	expect_evil_denied_to "$T/r" asker
	api DELETE "/v1/sandboxes/$id" > /dev/null
}

# Processes of another call's that hold more fds than a search reads
# (2048; three of 900, each within the default 1024), left running before
# the asker: the search read /proc's processes by pid, the hoarders'
# first, and spent its budget there; without a cgroup2 group that names
# the call by the socket (an unprivileged daemon without a delegated one,
# a v1 host without a cgroup2 mount), the denial named no pid, and a
# background asker's was given to the call then running.  The processes holding fewest fds are
# read first now.
t_an_fd_hoarder_hides_no_asker() {
	local prog body
	trap stop_daemon EXIT
	start_daemon
	id=$(create_misbehaving freeze)
	prog='import os, time
if os.fork():
    os._exit(0)
os.setsid()
for f in (0, 1, 2):
    os.dup2(os.open("/dev/null", os.O_RDWR), f)
for i in range(3):
    if os.fork() == 0:
        fds = [os.open("/dev/null", os.O_RDONLY) for _ in range(900)]
        open("/tmp/hoarded.%d" % i, "w").close()
        time.sleep(600)
        os._exit(0)
time.sleep(600)'
	body=$(py_call hoarder "$prog")
	api POST "/v1/sandboxes/$id/exec" "$body" > "$T/r0"
	expect_eq "the hoarders' call" "$(json status < "$T/r0")" exited
	api POST "/v1/sandboxes/$id/exec" '{"tool_call_id": "asker", "command":
		"for i in $(seq 100); do [ -e /tmp/hoarded.2 ] && break; sleep 0.1; done; ls /proc/*/fd | wc -l; ( for i in $(seq 100); do [ -e /tmp/go ] && break; sleep 0.1; done; curl -s -m 5 http://evil.test:7/; touch /tmp/asked ) >/dev/null 2>&1 &"}' > "$T/r1"
	[ "$(json stdout < "$T/r1")" -gt 2048 ] || fail "the hoarders' fds: $(json stdout < "$T/r1")"
	api POST "/v1/sandboxes/$id/exec" '{"tool_call_id": "other", "command":
		"touch /tmp/go; for i in $(seq 100); do [ -e /tmp/asked ] && break; sleep 0.1; done"}' > "$T/r2"
	wait_for "the denial" has_at_least "$id" egress.denied 1
	events_of "$id" | grep '"type":"egress.denied"' > "$T/denied"
	expect_contains "its pid" "$(cat "$T/denied")" '"pid":'
	expect_contains "the asker's call" "$(cat "$T/denied")" '"call":"asker","background":true'
	api DELETE "/v1/sandboxes/$id" > /dev/null
}

# on_abort "kill": a sweep past the limit; frozen first (the abort event
# says so), then killed.
t_sweep_is_frozen_then_killed() {
	trap stop_daemon EXIT
	start_daemon
	id=$(create_misbehaving kill)
	api POST "/v1/sandboxes/$id/exec" '{"tool_call_id": "sweep", "command":
		"( for p in $(seq 1 30); do curl -s -m 5 http://evil.test:$p/ >/dev/null; done ) >/dev/null 2>&1 & sleep 60"}' > "$T/r1"
	expect_eq "call" "$(json status < "$T/r1")" halted
	expect_contains "explained" "$(json reason < "$T/r1")" "halted: probing: 9 distinct destinations denied"
	events_of "$id" > "$T/ev"
	abort=$(grep '"type":"abort"' "$T/ev")
	expect_contains "criterion" "$abort" '"criterion":"max_distinct_denied_destinations"'
	expect_contains "evidence" "$abort" '"evidence":["evil.test:'
	if [ -n "$(cg_dir freezer "$id")" ]; then
		expect_contains "frozen first" "$abort" '"frozen":true'
	fi
	expect_contains "then killed" "$(grep '"type":"halt"' "$T/ev")" '"state":"killed"'
	api POST "/v1/sandboxes/$id/exec" '{"argv": ["true"]}' > /dev/null
	expect_eq "refused" "$(cat "$T/status")" 409
	expect_contains "why" "$(json detail < "$T/body")" "probing"
	api DELETE "/v1/sandboxes/$id" > /dev/null
}

# A limit that bites names the call it bit: limit.hit and timeout events
# carry the tool call id and a sentence.
t_limits_are_attributed_events() {
	trap stop_daemon EXIT
	start_daemon
	id=$(api POST /v1/sandboxes '{"idle_freeze_ms": 0, "policy": {"limits": {"disk": "8M"}}}' | json id)
	api POST "/v1/sandboxes/$id/exec" '{"tool_call_id": "fill", "command": "head -c 20000000 /dev/zero > /tmp/big"}' > /dev/null
	api POST "/v1/sandboxes/$id/exec" '{"tool_call_id": "slow", "argv": ["sleep", "30"], "timeout_seconds": 0.3}' > "$T/r"
	expect_eq "status" "$(json status < "$T/r")" timeout
	events_of "$id" > "$T/ev"
	expect_contains "disk" "$(grep '"type":"limit.hit"' "$T/ev")" '"limit":"disk"'
	expect_contains "disk's call" "$(grep '"type":"limit.hit"' "$T/ev")" '"call":"fill"'
	expect_contains "timeout's call" "$(grep '"type":"timeout"' "$T/ev")" '"call":"slow"'
	expect_eq "reasons" "$(grep -c '"reason":"' "$T/ev")" "$(wc -l < "$T/ev")"
	api DELETE "/v1/sandboxes/$id" > /dev/null
}

# `corral halt ID --reason`: a person's halt, the same authority.
t_halt_by_a_person() {
	trap stop_daemon EXIT
	start_daemon
	id=$(api POST /v1/sandboxes '{"idle_freeze_ms": 0}' | json id)
	api POST "/v1/sandboxes/$id/processes" '{"tool_call_id": "bg", "argv": ["sleep", "600"]}' > /dev/null
	expect_eq "started" "$(cat "$T/status")" 201
	CORRAL_SOCKET="$T/sock" "$CORRAL" halt "$id" --reason "reviewer saw a secret in the output" \
		> "$T/out" 2>&1 || fail "corral halt: $(cat "$T/out")"
	expect_eq "state" "$(api GET "/v1/sandboxes/$id" | json state)" halted
	api POST "/v1/sandboxes/$id/exec" '{"argv": ["true"]}' > /dev/null
	expect_eq "refused" "$(cat "$T/status")" 409
	expect_contains "reason" "$(json detail < "$T/body")" "reviewer saw a secret"
	h=$(count_type "$id" halt)
	expect_eq "one halt event" "$h" 1
	expect_contains "by whom" "$(events_of "$id" | grep '"type":"halt"')" '"by":"request"'
	api DELETE "/v1/sandboxes/$id" > /dev/null
}

# The chain breaks, and says where, after a one-byte edit, a deleted line
# or a reordered pair.
t_audit_log_tamper_evident() {
	trap stop_daemon EXIT
	start_daemon
	id=$(api POST /v1/sandboxes '{}' | json id)
	for i in 1 2 3; do
		api POST "/v1/sandboxes/$id/exec" "{\"tool_call_id\": \"c$i\", \"argv\": [\"true\"]}" > /dev/null
	done
	api DELETE "/v1/sandboxes/$id" > /dev/null
	stop_daemon
	log=$T/state/audit.jsonl
	[ "$(wc -l < "$log")" -ge 8 ] || fail "too few lines: $(wc -l < "$log")"
	"$CORRAL" audit verify "$log" > /dev/null 2>&1 || fail "the real log does not verify"
	sed '4s/"seq":/"seq": /' "$log" > "$T/edit.jsonl"
	sed '5d' "$log" > "$T/deleted.jsonl"
	awk 'NR==5 {held=$0; next} {print} NR==6 {print held}' "$log" > "$T/swapped.jsonl"
	for f in edit deleted swapped; do
		if "$CORRAL" audit verify "$T/$f.jsonl" > "$T/v.out" 2>&1; then
			fail "$f: verifies"
		fi
		expect_contains "$f names the line" "$(cat "$T/v.out")" "line"
	done
}

run_tests "$@"
echo "agent ($(id -un 2>/dev/null || id -u)): $PASS passed, $FAIL failed, $SKIP skipped"
[ -n "$FAILED_NAMES" ] && echo "failed:$FAILED_NAMES"
[ "$FAIL" -eq 0 ]
