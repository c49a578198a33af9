#!/bin/bash
# faults.sh - the daemon killed at the worst moments, and its disk full.
# No sandbox may keep running unsupervised, the next start removes what
# was left, the audit log still verifies, and a full state directory is
# reported while the sandboxes the daemon has keep being served.
#
#   tests/faults.sh CORRAL HELPERS_DIR [TEST...]
set -u
CORRAL=$(readlink -f "$1")
shift 2
HERE=$(cd "$(dirname "$0")" && pwd)
TEST_TMP=$(mktemp -d "${TMPDIR:-/tmp}/corral-faults.XXXXXX")
chmod 755 "$TEST_TMP"
trap 'rm -rf "$TEST_TMP"' EXIT
. "$HERE/lib.sh"
. "$HERE/daemon.sh"
ME=$(id -u)

# daemon.sh's start_daemon and api, by httpc (lib.sh) instead of curl:
# curl's start was 40-55 ms of CPU, and these tests' requests and health
# polls some 150 a lane.  The same requests, answers and files.
start_daemon() {
	"$CORRAL" serve --socket "$T/sock" --state-dir "${STATE_DIR:-$T/state}" >> "$T/daemon.log" 2>&1 &
	DPID=$!
	echo "$DPID" > "$T/daemon.pid"
	for _ in $(seq 1 100); do
		"$HTTPC" -s --max-time 1 --unix-socket "$T/sock" -o /dev/null \
			http://corral/v1/health 2> /dev/null && return 0
		sleep 0.05
	done
	fail "the daemon did not start: $(cat "$T/daemon.log")"
}

api() {
	"$HTTPC" -s --max-time 30 --unix-socket "$T/sock" -X "$1" -o "$T/body" -w '%{http_code}' \
		${3:+-d "$3"} "http://corral$2" > "$T/status" 2> /dev/null
	cat "$T/body"
}

# The sandboxes' processes are forks of the daemon: their command line
# names its socket.  None may outlive it.
orphans() { pgrep -f -- "--socket $T/sock" || true; }
no_orphans() { [ -z "$(orphans)" ]; }
stale_cgroups() {	# stale_cgroups PID: groups named for that daemon
	find /sys/fs/cgroup -maxdepth 4 -type d -name "corral-$1-*" 2>/dev/null | wc -l
}

# After a crash: nothing runs, a restart clears the rest, the log verifies.
after_crash() {	# after_crash OLD_PID LOST_AT_LEAST [LOST_AT_MOST]
	local old=$1
	# what outlived it, named, so that a rare failure says which process
	wait_for "the sandboxes to die with the daemon" no_orphans || {
		ps -o pid,ppid,stat,wchan:24,args -p "$(orphans | paste -sd, -)" >&2
		return 1
	}
	start_daemon
	expect_eq "stale cgroups after restart" "$(stale_cgroups "$old")" 0
	expect_eq "the sandbox log, said lost" "$(wc -l < "$T/state/sandboxes.log")" 0
	lost=$(api GET /v1/events | grep -c '"type":"sandbox.lost"' || true)
	# a create may be recorded and then killed before its answer left
	[ "$lost" -ge "$2" ] && [ "$lost" -le "${3:-$2}" ] ||
		fail "lost sandboxes recorded: $lost, want $2..${3:-$2}"
	expect_eq "health" "$(api GET /v1/health | json status)" ok
	"$CORRAL" audit verify "$T/state/audit.jsonl" > "$T/verify" 2>&1 ||
		fail "audit verify: $(cat "$T/verify")"
	id=$(api POST /v1/sandboxes '{}' | json id)
	expect_eq "serves again" "$(api POST "/v1/sandboxes/$id/exec" '{"argv": ["echo", "up"]}' | json stdout)" up
	stop_daemon
}

t_kill_during_create() {
	trap stop_daemon EXIT
	start_daemon
	api POST /v1/sandboxes '{}' > /dev/null
	for i in $(seq 1 12); do
		"$HTTPC" -s --max-time 20 --unix-socket "$T/sock" -X POST -d '{}' \
			http://corral/v1/sandboxes > "$T/c$i" 2>&1 &
	done
	sleep 0.05
	old=$DPID
	kill_daemon
	wait
	# each answered create is recorded; the others may or may not be
	after_crash "$old" "$(grep -l '"id"' "$T"/c* 2>/dev/null | wc -l | awk '{print $1 + 1}')" 13
}

t_kill_during_exec() {
	# a duration no other test (or the other lane of make check) sleeps
	mark="1000.$$"
	trap stop_daemon EXIT
	start_daemon
	id=$(api POST /v1/sandboxes '{"idle_freeze_ms": 0}' | json id)
	curl -s -m 30 --unix-socket "$T/sock" -X POST \
		-d "{\"command\": \"sleep $mark & sleep $mark\"}" \
		"http://corral/v1/sandboxes/$id/exec" > "$T/exec.out" 2>&1 &
	cpid=$!
	wait_for "the call" sh -c "pgrep -f 'sleep $mark' > /dev/null"
	sleeps=$(pgrep -f "sleep $mark" | tr '\n' ' ')
	old=$DPID
	kill_daemon
	wait "$cpid" 2>/dev/null || true
	for p in $sleeps; do
		wait_for "the call's process $p to die" sh -c "[ ! -d /proc/$p ]"
	done
	after_crash "$old" 1
}

t_kill_during_upload() {
	trap stop_daemon EXIT
	start_daemon
	id=$(api POST /v1/sandboxes '{"policy": {"limits": {"disk": "256M"}}}' | json id)
	head -c 30000000 /dev/urandom > "$T/big"
	curl -s -m 60 --limit-rate 4M --unix-socket "$T/sock" -X PUT --data-binary "@$T/big" \
		"http://corral/v1/sandboxes/$id/files?path=/workspace/big" > /dev/null 2>&1 &
	cpid=$!
	sleep 0.7
	old=$DPID
	kill_daemon
	wait "$cpid" 2>/dev/null || true
	after_crash "$old" 1
}

# The daemon's loop slowed (strace delays each of its reads by 100 ms)
# while a command writes 1 MB into a pipe it made 1 MiB long and ends:
# all it wrote before it ended is in the result.  The drain time after a
# call's end (BOX_DRAIN_MS) is for background children that keep the
# pipes open; what was already in them was cut there, said nowhere
# (131072 of 1000000 bytes here, truncated false).
t_slow_loop_keeps_the_last_output() {
	command -v strace > /dev/null || { skip "no strace to slow the daemon with"; return 77; }
	trap 'stop_tracer; stop_daemon' EXIT
	start_daemon
	local id
	id=$(api POST /v1/sandboxes '{}' | json id)
	strace -qq -p "$DPID" -e trace=read -e inject=read:delay_exit=100000 \
		-o /dev/null 2> "$T/strace.err" &
	SPID=$!
	traced() { [ "$(awk '/^TracerPid/ {print $2}' "/proc/$DPID/status")" != 0 ]; }
	wait_for "strace to attach" traced ||
		{ stop_tracer; skip "strace cannot attach: $(cat "$T/strace.err")"; return 77; }
	/usr/bin/python3 -c 'import json; print(json.dumps({"argv": ["/usr/bin/python3", "-c",
"import fcntl, os\nfcntl.fcntl(1, 1031, 1 << 20)\nos.write(1, b\"x\" * 1000000)"]}))' > "$T/body"
	curl -s -m 120 --unix-socket "$T/sock" -X POST -d "@$T/body" \
		"http://corral/v1/sandboxes/$id/exec" > "$T/out"
	stop_tracer
	expect_eq "status" "$(json status < "$T/out")" exited
	expect_eq "the output written before the end" \
		"$(/usr/bin/python3 -c 'import json, sys; print(len(json.load(sys.stdin)["stdout"]))' < "$T/out")" 1000000
	stop_daemon
}

stop_tracer() {
	[ -n "${SPID:-}" ] || return 0
	kill "$SPID" 2>/dev/null || true
	wait "$SPID" 2>/dev/null || true
	SPID=
}

# The audit log torn in the middle of a line (a crash while writing):
# the next daemon goes on from it and the whole file still verifies.
t_torn_audit_log() {
	trap stop_daemon EXIT
	start_daemon
	id=$(api POST /v1/sandboxes '{}' | json id)
	api POST "/v1/sandboxes/$id/exec" '{"argv": ["true"]}' > /dev/null
	old=$DPID
	kill_daemon
	printf '{"seq":99,"time":"2026-01-01T00:00:00Z","sandbox":"%s","type":"exec.st' "$id" \
		>> "$T/state/audit.jsonl"
	after_crash "$old" 1
}

# The state directory's disk fills: the daemon says so, refuses new
# sandboxes, and goes on serving the one it has.  Its name is not UTF-8
# (a host path is bytes): health's detail, which names it, was dropped.
t_state_disk_full() {
	[ "$ME" = 0 ] || { skip "mounting a small tmpfs needs root"; return 77; }
	STATE_DIR=$T/$'st\xffate'	# not local: the EXIT trap's umount reads it
	mkdir "$STATE_DIR"
	mount -t tmpfs -o size=256k,mode=0700 corral-test "$STATE_DIR" || { skip "no tmpfs"; return 77; }
	cleanup() { stop_daemon; umount "$STATE_DIR" 2>/dev/null; return 0; }
	trap cleanup EXIT
	start_daemon
	id=$(api POST /v1/sandboxes '{"idle_freeze_ms": 0}' | json id)
	dd if=/dev/zero of="$STATE_DIR/filler" bs=4k 2>/dev/null || true
	# the log's last page may still hold a few lines: call until it is full
	for i in $(seq 1 40); do
		api POST "/v1/sandboxes/$id/exec" '{"argv": ["echo", "still served"]}' > "$T/r"
		expect_eq "exec $i while full" "$(cat "$T/status")" 200
		expect_eq "output" "$(json stdout < "$T/r")" "still served"
		[ "$(api GET /v1/health | json status)" = degraded ] && break
	done
	h=$(api GET /v1/health)
	expect_eq "health" "$(echo "$h" | json status)" degraded
	expect_contains "says why" "$(echo "$h" | json detail)" "No space left on device"
	api POST /v1/sandboxes '{}' > /dev/null
	expect_eq "create while full" "$(cat "$T/status")" 507
	expect_contains "create says why" "$(cat "$T/body")" "cannot be written"
	expect_eq "nothing half-created" "$(api GET /v1/sandboxes | json sandboxes | grep -o '"id"' | wc -l)" 1
	rm -f "$STATE_DIR/filler"
	api POST "/v1/sandboxes/$id/exec" '{"argv": ["true"]}' > /dev/null
	expect_eq "healthy again" "$(api GET /v1/health | json status)" ok
	id2=$(api POST /v1/sandboxes '{}' | json id)
	expect_eq "create again" "$(cat "$T/status")" 201
	api DELETE "/v1/sandboxes/$id2" > /dev/null
	api DELETE "/v1/sandboxes/$id" > /dev/null
	stop_daemon
	"$CORRAL" audit verify "$STATE_DIR/audit.jsonl" > "$T/verify" 2>&1 ||
		fail "audit verify: $(cat "$T/verify")"
}

run_tests "$@"
echo "faults ($(id -un 2>/dev/null || id -u)): $PASS passed, $FAIL failed, $SKIP skipped"
[ -n "$FAILED_NAMES" ] && echo "failed:$FAILED_NAMES"
[ "$FAIL" -eq 0 ]
