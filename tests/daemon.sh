# daemon.sh - a `corral serve` for one test, sourced by agent.sh and
# faults.sh after lib.sh: started on $T/sock with its state in $T/state,
# talked to with curl, stopped by pid.

# start_daemon: corral serve on $T/sock, its state in $STATE_DIR (default
# $T/state); returns once it answers.
start_daemon() {
	"$CORRAL" serve --socket "$T/sock" --state-dir "${STATE_DIR:-$T/state}" >> "$T/daemon.log" 2>&1 &
	DPID=$!
	echo "$DPID" > "$T/daemon.pid"
	for _ in $(seq 1 100); do
		curl -s -m 1 --unix-socket "$T/sock" http://corral/v1/health > /dev/null && return 0
		sleep 0.05
	done
	fail "the daemon did not start: $(cat "$T/daemon.log")"
}

# stop_daemon: SIGTERM, and it must stop cleanly (under ASan: no leak).
stop_daemon() {
	[ -f "$T/daemon.pid" ] || return 0
	local pid rc=0
	pid=$(cat "$T/daemon.pid")
	rm -f "$T/daemon.pid"
	kill -TERM "$pid" 2>/dev/null || true
	for _ in $(seq 1 200); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	if kill -0 "$pid" 2>/dev/null; then
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
		fail "the daemon did not stop on SIGTERM"
		return 1
	fi
	wait "$pid" 2>/dev/null || rc=$?
	[ "$rc" = 0 ] || { fail "the daemon exited $rc: $(tail -40 "$T/daemon.log")"; return 1; }
	return 0
}

# kill_daemon: SIGKILL, as a crash would.
kill_daemon() {
	kill -KILL "$DPID"
	wait "$DPID" 2>/dev/null || true
	rm -f "$T/daemon.pid"
}

# api METHOD PATH [BODY]: the body of the answer; its status in $T/status.
api() {
	curl -s -m 30 --unix-socket "$T/sock" -X "$1" -o "$T/body" -w '%{http_code}' \
		${3:+-d "$3"} "http://corral$2" > "$T/status"
	cat "$T/body"
}

# wait_for WHAT CMD...: until CMD succeeds, 10 s at most.
wait_for() {
	local what=$1
	shift
	for _ in $(seq 1 200); do
		"$@" && return 0
		sleep 0.05
	done
	fail "timed out waiting for $what"
}
