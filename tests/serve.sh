#!/bin/bash
# serve.sh - corral serve end to end: a real daemon per test, real
# sandboxes, the HTTP API of docs/API.md over its unix socket (and TCP on
# 127.0.0.1 for the token test).
#
#   tests/serve.sh CORRAL [HELPERS_DIR] [SERVE_CLIENT] [TEST...]
#
# SERVE_CLIENT is build/tests/serve_client (tests/serve_client.c); without
# it t_c_client is skipped.  HELPERS_DIR (as the other suites take it) is
# accepted and not needed.  Runs as whoever calls it: root, or an
# unprivileged user with or without delegated cgroups.  Without cgroups
# pause and idle-freeze cannot work: the tests check for a clear error
# instead.  CORRAL_EXPECT_LIMITS=cgroup|rlimit makes the lifecycle test
# insist on one.  SERVE_MANY (default 200): sandboxes alive at once.
#
# Every test starts its own daemon (socket and --state-dir in its $T),
# stops it at the end, also when it fails, and then checks that nothing is
# left: no process the daemon ran (its descendants and every pid its
# events reported, each identified by pid and start time), no cgroup named
# corral-<daemon pid>-*.  Every wait is bounded.  Only loopback is used.
set -u
CORRAL=$(readlink -f "$1")
shift
CLIENT=""
while [ $# -gt 0 ] && [ "${1#t_}" = "$1" ]; do
	if [ -f "$1" ] && [ -x "$1" ]; then
		CLIENT=$(readlink -f "$1")
	elif [ ! -d "$1" ]; then
		echo "serve.sh: $1: neither the client program nor a test name" >&2
		exit 2
	fi
	shift
done
HERE=$(cd "$(dirname "$0")" && pwd)
TEST_TMP=$(mktemp -d "${TMPDIR:-/tmp}/corral-serve.XXXXXX")
chmod 755 "$TEST_TMP"
trap 'rm -rf "$TEST_TMP"' EXIT
. "$HERE/lib.sh"
ME=$(id -u)
PY=/usr/bin/python3
MANY=${SERVE_MANY:-200}

# ---- the daemon ------------------------------------------------------------

# start_daemon [SERVE ARGS...]: a daemon on $SOCK with its state in $STATE
# (defaults $T/s and $T/state); its pid in DPID.  Fails unless it answers
# /v1/health within 10 s.
start_daemon() {
	local i code
	launch_daemon "$@"
	i=0
	while [ $i -lt 1000 ]; do
		# (api's status to a file, not by $( ): a fork less a poll)
		if [ -S "$SOCK" ]; then
			api GET /v1/health > "$T/health.code"
			read -r code < "$T/health.code" || :
			[ "$code" = 200 ] && return 0
		fi
		kill -0 "$DPID" 2>/dev/null || break
		nap 0.01
		i=$((i + 1))
	done
	fail "the daemon did not answer on $SOCK: $(tail -5 "$DLOG")"
}

# nap SECONDS: a sleep without a process, where a test's daemon is waited
# for at its start and its end, in steps of 10 ms: read -t on the
# watchdog's FIFO, which no one writes (a sleep 0.1 there was some 0.15 s
# of every test's wall, a sleep(1) 2-3 ms of CPU each)
nap() {
	if [ -p "$T/watchdog.fifo" ]; then
		read -r -t "$1" _ <> "$T/watchdog.fifo" || :
	else
		sleep "$1"
	fi
}

# launch_daemon [SERVE ARGS...]: start_daemon's daemon, not waited for
launch_daemon() {
	SOCK=${SOCK:-$T/s}
	STATE=${STATE:-$T/state}
	N_DAEMONS=$(( ${N_DAEMONS:-0} + 1 ))
	${DAEMON_WRAP:-} "$CORRAL" serve --socket "$SOCK" --state-dir "$STATE" "$@" \
		> "$T/daemon.$N_DAEMONS.log" 2>&1 < /dev/null &
	DPID=$!
	DLOG=$T/daemon.$N_DAEMONS.log
	echo "$DPID $STATE $DLOG" >> "$T/daemons"
	[ -n "${IN_EXIT:-}" ] || trap on_test_exit EXIT
	[ -s "$T/t0" ] || starttime "$DPID" > "$T/t0"
	# a test that hangs is stopped: its daemon gets SIGTERM, so that every
	# request ends and the test goes on to fail.  One subshell, waiting in
	# read -t on a FIFO no one writes (opened both ways, so the open does
	# not wait): not a Python (30 ms of CPU a daemon), and no child for
	# on_test_exit's SIGTERM to leave behind.  It closes what it inherits
	# but an exec would have closed: a test's fd that a function call's
	# redirection (start_daemon 7>&-) saved aside, kept open, would keep
	# a FIFO's writer for the test's whole length.
	[ -p "$T/watchdog.fifo" ] || mkfifo "$T/watchdog.fifo"
	(
		for fd in /proc/"$BASHPID"/fd/*; do
			fd=${fd##*/}
			[ "$fd" -le 2 ] || exec {fd}>&-
		done
		read -r -t "${SERVE_TEST_TIMEOUT:-120}" _ <> "$T/watchdog.fifo" || :
		echo "the test ran over ${SERVE_TEST_TIMEOUT:-120} s: its daemon was stopped" > "$T/watchdog"
		kill -TERM "$DPID"
	) > /dev/null 2>&1 &
	echo $! >> "$T/watchdogs"
}

# starttime PID: field 22 of /proc/PID/stat (clock ticks after boot), 0
# for a process gone.  In bash, as procs_alive: every test runs them, and
# a Python's start cost 30 ms of CPU each time, in every lane.
starttime() {
	proc_stat "$1" || { echo 0; return; }
	echo "${PSTAT[19]}"
}

# snapshot PID: add "pid starttime" of every live process that is the
# daemon's descendant, or that its audit log reported (started since this
# test's first daemon), to $T/pids.  In bash, by /proc/PID/task/*/children
# and a grep of the log: a Python here was 90 ms of CPU each daemon.
snapshot() {
	local t0=0 p c s f ev="" st
	local -a todo
	local -A want
	[ -s "$T/t0" ] && read -r t0 < "$T/t0"
	todo=("$1")
	while [ ${#todo[@]} -gt 0 ]; do
		p=${todo[-1]}
		unset 'todo[-1]'
		for s in /proc/"$p"/task/*/children; do
			# one line of pids, without a newline: read says EOF
			f=()
			read -r -a f 2>/dev/null < "$s" || :
			for c in "${f[@]}"; do
				[ -n "${want[$c]:-}" ] && continue
				want[$c]=child
				todo+=("$c")
			done
		done
	done
	# every event's "pid" is the host's, at the top level of the event
	# (one grep: the want map makes them unique), in the log of the state
	# directory daemon $1 was started with (a test may have set STATE for
	# its start alone)
	st=${STATE:-}
	[ ! -s "$T/daemons" ] || while read -r p s _; do
		[ "$p" != "$1" ] || st=$s
	done < "$T/daemons"
	[ -z "$st" ] || out_of ev grep -o '"pid":[0-9][0-9]*' "$st/audit.jsonl"
	while IFS=: read -r _ p; do
		[ -z "$p" ] || [ -n "${want[$p]:-}" ] || want[$p]=event
	done <<< "$ev"
	for p in "${!want[@]}"; do
		proc_stat "$p" && [ "${PSTAT[0]}" != Z ] || continue
		[ "${want[$p]}" = child ] || [ "${PSTAT[19]}" -ge "$t0" ] || continue
		echo "$p ${PSTAT[19]}"
	done >> "$T/pids"
}

# procs_alive: the processes of $T/pids still alive (zombies are dead).
procs_alive() {
	local pid t
	[ -s "$T/pids" ] || return 0
	while read -r pid t; do
		proc_stat "$pid" || continue
		[ "${PSTAT[19]}" = "$t" ] && [ "${PSTAT[0]}" != Z ] && printf '%s ' "$pid"
	done < "$T/pids"
	return 0
}

cgroups_of() {	# cgroups_of PID: the cgroup directories of daemon PID
	find /sys/fs/cgroup -maxdepth 4 -type d -name "corral-$1-*" 2>/dev/null
}

# cgroups_left PID: cgroups_of's directories by globs in this shell (no
# find: every test's end asks it twice), each hierarchy once (not again
# through the cpu -> cpu,cpuacct links).  For whether any is left: their
# order is the globs', not find's, and a test that takes the first of
# cgroups_of's for its calls' groups found none in the first of these.
cgroups_left() {
	local d top
	for d in /sys/fs/cgroup/corral-"$1"-*/ /sys/fs/cgroup/*/corral-"$1"-*/ \
		 /sys/fs/cgroup/*/*/corral-"$1"-*/ /sys/fs/cgroup/*/*/*/corral-"$1"-*/; do
		[ -d "$d" ] || continue
		d=${d%/}
		top=${d#/sys/fs/cgroup/}
		[ ! -L "/sys/fs/cgroup/${top%%/*}" ] || continue
		printf '%s\n' "$d"
	done
}

# out_of VAR CMD...: what CMD prints (its errors dropped) in VAR, CMD run
# in this shell by way of a file in $T: a $( ) is a fork, 4-7 ms of CPU
# on a pti=on guest, and every test's end asks several.  By $( ) where $T
# takes no file (what is left must not read as nothing).
out_of() {
	local -n out_of_var=$1
	local file=$T/out_of.${#FUNCNAME[@]}	# (a CMD may ask out_of too)
	shift
	out_of_var=""
	if { : > "$file"; } 2> /dev/null; then
		"$@" >> "$file" 2> /dev/null || :
		IFS= read -r -d '' out_of_var < "$file" || :
	else
		out_of_var=$("$@" 2> /dev/null) || :
	fi
}

# wait_gone WHAT SECONDS CMD...: until CMD prints nothing, at most SECONDS.
wait_gone() {
	local what=$1 n=$(( $2 * 10 )) i=0 left
	shift 2
	while :; do
		out_of left "$@"
		[ -z "$left" ] && return 0
		[ $i -ge $n ] && break
		sleep 0.1
		i=$((i + 1))
	done
	fail "$what still there after ${n}00 ms: $(echo $left | head -c 600)"
}

# log_digest LOG: a sanitizer's report (what and where), else the log's end.
log_digest() {
	grep -m1 -A40 -E 'ERROR: (Address|Leak)Sanitizer|runtime error' "$1" |
		grep -v -E '^ *$|libsanitizer|libevent|libc_start|_start ' | sed '/SUMMARY/q' | head -14 |
		grep . || tail -20 "$1"
}

# stop_daemon [KILL]: SIGTERM (default: a clean exit 0 is expected, every
# process and cgroup of it gone) or SIGKILL (its processes must die with
# it; its cgroups are for the next start to remove) the daemon DPID.
stop_daemon() {
	local sig=${1:-TERM} pid=${DPID:-} i=0 rc=0
	[ -n "$pid" ] || return 0
	snapshot "$pid"
	if ! alive "$pid"; then
		wait "$pid" 2>/dev/null || rc=$?
		echo "$pid" >> "$T/stopped"
		DPID=""
		fail "the daemon died during the test (exit $rc): $(log_digest "$DLOG")"
		return 1
	fi
	kill -"$sig" "$pid" 2>/dev/null
	# a zombie child is done: only wait can reap it
	while alive "$pid" && [ $i -lt 1500 ]; do
		nap 0.01
		i=$((i + 1))
	done
	if alive "$pid"; then
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null || true
		DPID=""
		echo "$pid" >> "$T/stopped"
		fail "the daemon $pid did not exit within 15 s of SIG$sig: $(tail -5 "$DLOG")"
		return 1
	fi
	wait "$pid" 2>/dev/null || rc=$?
	echo "$pid" >> "$T/stopped"
	DPID=""
	if [ "$sig" = TERM ]; then
		[ "$rc" = 0 ] || { fail "the daemon exited $rc on SIGTERM: $(log_digest "$DLOG")"; return 1; }
		[ ! -e "$SOCK" ] || { fail "the socket $SOCK is still there"; return 1; }
		wait_gone "cgroups of the daemon $pid" 5 cgroups_left "$pid" || return 1
	fi
	wait_gone "processes of the daemon $pid" 5 procs_alive
}

# EXIT trap of a test's subshell: stop what is still running, then nothing
# any daemon of this test ran may be left.  A daemon killed with SIGKILL
# leaves stale cgroups (and frozen sandboxes) to the next start on its
# state directory: one is started to sweep them, then its leftovers checked.
on_test_exit() {
	local rc=$? pid state log left="" stopped="" d
	set +e
	trap - EXIT
	IN_EXIT=1
	# a failed test's hold on the reap helpers (reap_held_daemon) let go,
	# and none for those its daemon's stop forks: else the stop waits on
	# a held helper until its SIGKILL
	exec 7>&-
	[ ! -e "$T/reap" ] || rm -f "$T/reap"
	# a process the test stopped and alone may continue (its pid is not
	# had by another while it is stopped)
	[ ! -s "$T/stopped_by_test" ] || while read -r pid; do
		builtin kill -CONT "$pid" 2>/dev/null
	done < "$T/stopped_by_test"
	while read -r pid; do
		kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
	done < "$T/watchdogs"
	if [ -s "$T/watchdog" ]; then
		echo "    FAIL: $(< "$T/watchdog")" >&2
		rc=1
	fi
	# a tracer a failed test left (hold_daemon_at) may hold its daemon
	# stopped, deaf to SIGTERM: the tracer goes first, then SIGCONT
	[ ! -s "$T/tracers" ] || while read -r pid; do
		kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
	done < "$T/tracers"
	# a fixture a failed test left (an upstream of its own), by pid
	[ ! -s "$T/fixtures" ] || while read -r pid; do
		kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
	done < "$T/fixtures"
	[ -z "${DPID:-}" ] || kill -CONT "$DPID" 2>/dev/null
	if [ -n "${DPID:-}" ]; then
		stop_daemon || rc=1
	fi
	# (files read by redirection, not cat: every test runs this)
	[ ! -s "$T/stopped" ] || IFS= read -r -d '' stopped < "$T/stopped"
	stopped=" ${stopped//$'\n'/ } "
	[ ! -s "$T/daemons" ] || while read -r pid state log; do
		case $stopped in
		*" $pid "*) continue ;;
		esac
		kill -KILL "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
	done < "$T/daemons"
	[ ! -s "$T/daemons" ] || while read -r pid state log; do
		out_of d cgroups_left "$pid"
		left+=$d
	done < "$T/daemons"
	# the test's network namespaces, with what ran in them gone
	[ ! -s "$T/netns" ] || while read -r ns; do
		ip netns del "$ns" 2>/dev/null || [ ! -e "/run/netns/$ns" ] ||
			{ echo "    FAIL: network namespace $ns left" >&2; rc=1; }
	done < "$T/netns"
	out_of d procs_alive
	left+=$d
	if [ -n "$left" ]; then
		[ "$rc" = 0 ] && rc=1
		echo "    FAIL: left behind by this test's daemons: $(echo $left | head -c 600)" >&2
		# sweep: the next daemon on the state directory removes them
		read -r pid state log < <(tail -1 "$T/daemons")
		SOCK=$T/sweep.sock STATE=$state DPID=""
		start_daemon >/dev/null 2>&1 && stop_daemon >/dev/null 2>&1
		wait_gone "after a sweep" 5 procs_alive
	fi
	exit "$rc"
}

# ---- requests --------------------------------------------------------------

# api METHOD PATH [CURL ARGS...]: by httpc (lib.sh), the status code on
# stdout; the body in $T/body, the headers in $T/headers.
# (httpc last, with no redirection and no "|| true": in a $( ) bash execs
# it in the subshell's place, a fork less a call)
api() {
	local m=$1 p=$2
	shift 2
	"$HTTPC" -sS --max-time "${API_TIMEOUT:-60}" --unix-socket "$SOCK" -X "$m" \
		-D "$T/headers" -o "$T/body" -w '%{http_code}' --stderr "$T/curl.err" --exit-0 "$@" \
		"http://localhost$p"
}

body() { head -c "${1:-400}" "$T/body"; }

# jq EXPR [FILE]: a Python expression over the JSON v of FILE ($T/body),
# by lib.sh's pyjq
jq() { pyjq "$1" "${2:-$T/body}"; }

# jbody KEY VALUE [KEY VALUE...]: a JSON object of strings; a VALUE that
# starts with "json:" is raw JSON.  By jget -o, which writes what
# Python's json.dumps did (a Python's start was 60 ms of CPU a request).
jbody() { "$JGET" -o "$@"; }

expect_code() {	# expect_code WHAT GOT WANT: on failure, show the body
	[ "$2" = "$3" ] || fail "$1: status $2, want $3: $(body) $(< "$T/curl.err")"
}

# expect_error WHAT CODE STATUS ERROR: an error answer as docs/API.md has
# it: the status; a JSON content type; "error" the string ERROR; "detail"
# a string, not empty.  Three jget's and no other process: a grep,
# subshells and jget's were seven processes a call, 50-80 ms of CPU on a
# busy host, for some 300 refusals a lane.  "error" is a string because
# jget -n prints it as ERROR, a lower-case word that no other JSON value
# prints as.
expect_error() {
	local l ct="" got
	expect_code "$1" "$2" "$3" || return 1
	[[ $4 =~ ^[a-z_]+$ && $4 != true && $4 != false && $4 != null ]] ||
		{ fail "expect_error: '$4' is no error code"; return 1; }
	while IFS= read -r l || [ -n "$l" ]; do
		[[ ${l,,} != content-type:* ]] || ct+=$l
	done < "$T/headers"
	expect_contains "$1 content type" "$ct" application/json || return 1
	{ got=$("$JGET" -n error < "$T/body") && [ "$got" = "$4" ] &&
	  got=$("$JGET" -t detail < "$T/body") && [ "$got" = string ] &&
	  got=$("$JGET" -l detail < "$T/body") && [ "$got" -gt 0 ]
	} 2>/dev/null || fail "$1: not {\"error\": \"$4\", \"detail\": ...}: $(body)"
}

# mksb [BODY]: create a sandbox, its id on stdout.
mksb() {
	local b='{}' code
	[ $# -gt 0 ] && b=$1
	code=$(api POST /v1/sandboxes -d "$b")
	expect_code "create $b" "$code" 201 || return 1
	jq 'v["id"]'
}

sbget() {	# sbget ID EXPR: a field of GET /v1/sandboxes/ID
	local code
	code=$(api GET "/v1/sandboxes/$1")
	expect_code "get $1" "$code" 200 || return 1
	jq "$2"
}

# ex ID BODY: POST exec; the status code on stdout, the result in $T/body.
ex() { api POST "/v1/sandboxes/$1/exec" -d "$2"; }

# sleepers ID N: N calls in box ID, one after another, each leaving a
# sleeper (and its call's group lingering), made by one httpc --repeat:
# a process of bash's for each was 3-4 forks, 15-25 ms of CPU on a pti=on
# guest, most of such a test's.  A failure says which call and why.
sleepers() {
	local code
	code=$(api POST "/v1/sandboxes/$1/exec" --repeat "$2" \
		-d '{"command": "sleep 600 </dev/null >/dev/null 2>&1 &"}')
	expect_code "$2 calls that each leave a sleeper" "$code" 200
}

# sbsh ID COMMAND: run a shell command in the sandbox: its stdout, or a
# failure unless it exited 0.
sbsh() {
	local code
	code=$(ex "$1" "$(jbody command "$2")")
	expect_code "exec $2" "$code" 200 || return 1
	[ "$(jq 'v["exit_code"]')" = 0 ] ||
		{ fail "exec $2: $(jq 'v["reason"]'): $(jq 'v["stderr"]')"; return 1; }
	jq 'v["stdout"]'
}

# host_pid ID CALL: the host pid of a call, from its exec.start event.
host_pid() {
	local p
	p=$(grep '"type":"exec.start"' "$STATE/audit.jsonl" | grep "\"call\":\"$2\"" |
		head -1 | jq 'v["pid"]' /dev/stdin)
	[ -n "$p" ] || { fail "no exec.start event for $2"; return 1; }
	echo "$p"
}

# alive PID: not gone and not a zombie.
alive() {
	proc_stat "$1" && [ "${PSTAT[0]}" != Z ]
}

now_ms() { local t=${EPOCHREALTIME/./}; echo $(( t / 1000 )); }

cgroup_mode() { [ "$(sbget "$1" 'v["limits"]')" != rlimit ]; }

# expect_limits LIMITS: LIMITS (a box's "limits") is what
# CORRAL_EXPECT_LIMITS=cgroup|rlimit insists on, if set.  The daemon takes
# cgroups wherever root delegated a parent to this uid (cgroup.c), and
# that is the host's state, not this suite's: a run beside check.sh's "no
# cgroups" lane that delegated to the same uid meanwhile made it
# "cgroup v1" (ci59a, ci60a).  A mismatch names those parents, so that
# the log says which it was.
expect_limits() {
	local d delegated=""
	case "${CORRAL_EXPECT_LIMITS:-}" in
	cgroup) [ "$1" != rlimit ] && return 0 ;;
	rlimit) [ "$1" = rlimit ] && return 0 ;;
	*) return 0 ;;
	esac
	for d in /sys/fs/cgroup/*/corral{."$ME",} /sys/fs/cgroup/corral{."$ME",}; do
		[ -d "$d" ] && [ -w "$d" ] &&
			delegated="$delegated $d (uid $(stat -c %u "$d" 2>/dev/null))"
	done
	fail "limits: got '$1', want '$CORRAL_EXPECT_LIMITS'; parents uid $ME may use now:${delegated:- none}"
}

# READ_ANSWER_PY: Python, put before a test's own: read_answer(sock), one
# HTTP/1.1 answer framed by its Content-Length, as (status, head, body).
READ_ANSWER_PY='
def read_answer(s):
    data = b""
    while b"\r\n\r\n" not in data:
        data += s.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    n = int([l.split(b":")[1] for l in head.split(b"\r\n")
             if l.lower().startswith(b"content-length:")][0])
    while len(body) < n:
        c = s.recv(1 << 20)
        if not c:
            break
        body += c
    return head.split(b" ")[1].decode(), head, body
'

# take_pid PID [setsid]: a stopped process of the test's at host pid PID
# (tests/helpers/pidat, forking round pid_max if need be), for a test that
# a pid some process left gets nothing meant for that process.  Sets HP
# (pidat's pid, a fixture) and VP (the pid had, "" if another took it);
# $T/continued appears if the process is ever continued.
take_pid() {
	local i=0
	VP=""
	"${JGET%/*}/pidat" "$1" "$T/continued" ${2:-} > "$T/victim" & HP=$!
	echo "$HP" >> "$T/fixtures"
	while [ ! -s "$T/victim" ] && kill -0 "$HP" 2> /dev/null && [ $i -lt 1400 ]; do
		nap 0.05
		i=$((i + 1))
	done
	[ ! -s "$T/victim" ] || VP=$(< "$T/victim")
}

# taken_pid_untouched PID WHAT: after take_pid PID and what the daemon
# then did, the process of ours at PID (WHAT) still stopped and never
# continued by the daemon; pidat ended.  A skip (77, the daemon stopped)
# where another process took PID first, or the counter came round too
# slowly (a loaded host: 4 ms a fork, and pidat stops at 60 s).
taken_pid_untouched() {
	local st
	if [ "$VP" != "$1" ]; then
		# pidat gave up (exit 1) and is gone: kill fails, and must not
		# end the test under set -e before it says why it skips
		kill "$HP" 2> /dev/null || :
		wait "$HP" 2> /dev/null || :
		stop_daemon
		skip "pid $1 was not had: another process took it, or pid_max did not come round within pidat's 60 s"
		return 77
	fi
	read -r _ _ st _ 2> /dev/null < "/proc/$VP/stat" || st=gone
	expect_eq "$2, still stopped" "$st" T
	[ ! -e "$T/continued" ] || fail "the daemon continued $2 ($VP), no process of its"
	kill "$HP"
	wait "$HP" 2> /dev/null || true
}

# tests/results.sh runs its own tests with this harness
[ -z "${SERVE_HARNESS_ONLY:-}" ] || return 0

# ---- health and the sandbox lifecycle --------------------------------------

t_health() {
	start_daemon
	code=$(api GET /v1/health)
	expect_code "health" "$code" 200
	expect_eq "status" "$(jq 'v["status"]')" ok
	expect_eq "sandboxes" "$(jq 'v["sandboxes"]')" 0
	[ -n "$(jq 'v["version"]')" ] || fail "no version"
	expect_contains "content type" "$(grep -i '^content-type:' "$T/headers")" application/json
	expect_eq "socket mode" "$(stat -c %a "$SOCK")" 600
	code=$(api GET /v1/metrics)
	expect_code "metrics" "$code" 200
	expect_contains "metrics" "$(body 4000)" 'corral_sandboxes{state="idle"} 0'
	expect_contains "metrics" "$(body 4000)" "corral_requests_total"
	stop_daemon
}

# The open-files limit is said at the start when it, not --max-sandboxes,
# would cap the sandboxes: a busy sandbox holds some 13 fds of the
# daemon's (its counters' files kept while it has calls), so 1000 allows
# about 67 of them, fewer than 100 and more than 50.
t_fd_limit_warned() {
	DAEMON_WRAP="prlimit --nofile=1000:1000 --" start_daemon --max-sandboxes 100
	stop_daemon
	expect_contains "warning" "$(cat "$DLOG")" "the open-files limit (1000) allows about 67 busy sandboxes, fewer than --max-sandboxes 100"
	DAEMON_WRAP="prlimit --nofile=1000:1000 --" start_daemon --max-sandboxes 50
	stop_daemon
	if grep -q "open-files limit" "$DLOG"; then
		fail "a warning where 1000 fds are enough for 50: $(cat "$DLOG")"
	fi
}

# The socket appears only once it listens: a daemon held between its bind
# and its listen (strace delays the listen 1 s) shows no socket yet, and
# the first connect to the socket, once it is there, is answered.
t_socket_appears_listening() {
	command -v strace >/dev/null || { skip "no strace"; return 77; }
	local sock=$T/ls.sock st dpid i seen=0
	ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" \
	strace -qq -o /dev/null -e trace=listen -e inject=listen:delay_enter=1000000 \
		"$CORRAL" serve --socket "$sock" --state-dir "$T/ls-state" > "$T/ls.log" 2>&1 < /dev/null &
	st=$!
	# strace's child once it is corral: strace forks short-lived children
	# of its own first (its checks of ptrace), and the test once took one
	# for the daemon, killed nothing, and left strace and the daemon
	for i in $(seq 1 250); do
		dpid=$(pgrep -P "$st" | head -1 || true)
		[ -n "$dpid" ] && [ "$(cat "/proc/$dpid/comm" 2>/dev/null)" = corral ] && break
		dpid=""
		sleep 0.02
	done
	# whatever strace's children are by then, they are ours: none is left
	trap "for p in \$(pgrep -P $st); do kill -TERM \$p 2>/dev/null; done
	      wait $st 2>/dev/null || true" EXIT
	[ -n "$dpid" ] || { fail "no daemon under strace: $(< "$T/ls.log")"; return 1; }
	# inside the delayed listen (50 on x86_64) now: read from the daemon,
	# not guessed by a sleep, which a loaded host (load 14) outlasted
	for i in $(seq 1 500); do
		[[ $(< "/proc/$dpid/syscall") == "50 "* ]] 2>/dev/null && break
		grep -q 'inject=' "$T/ls.log" && { skip "strace cannot inject"; return 77; }
		sleep 0.01
	done
	[[ $(< "/proc/$dpid/syscall") == "50 "* ]] 2>/dev/null ||
		{ fail "the daemon never waited in listen: $(< "/proc/$dpid/syscall")"; return 1; }
	[ -e "$sock" ] && fail "the socket is there before it listens"
	for i in $(seq 1 200); do [ -S "$sock" ] && { seen=1; break; }; sleep 0.01; done
	expect_eq "the socket appeared" "$seen" 1
	curl -s -m 5 -o /dev/null -w '%{http_code}' --unix-socket "$sock" http://corral/v1/health > "$T/ls.code" || true
	expect_eq "its first connect answered" "$(< "$T/ls.code")" 200
	expect_eq "socket mode" "$(stat -c %a "$sock")" 600
	[ ! -e "$sock.new" ] || fail "the name it was bound under is left"
	kill -TERM "$dpid"
	wait "$st" 2>/dev/null || true
	trap - EXIT
	[ ! -e "$sock" ] || fail "the socket is left after the daemon's stop"
}

# --socket naming a file that is not a socket (a typo) is refused: only a
# dead daemon's socket is removed to make room, never a file.
t_socket_path_not_a_socket() {
	local rc=0
	echo precious > "$T/notsock"
	timeout 20 "$CORRAL" serve --socket "$T/notsock" --state-dir "$T/ns-state" \
		> "$T/ns.log" 2>&1 < /dev/null || rc=$?
	[ "$rc" != 0 ] && [ "$rc" != 124 ] || fail "serve on a regular file: exit $rc: $(< "$T/ns.log")"
	expect_eq "the file is kept" "$(cat "$T/notsock" 2>&1)" precious
	expect_contains "why" "$(< "$T/ns.log")" "is not a socket"
	# nor the name it binds under first
	rc=0
	echo precious > "$T/s2.new"
	timeout 20 "$CORRAL" serve --socket "$T/s2" --state-dir "$T/ns-state" \
		> "$T/ns.log" 2>&1 < /dev/null || rc=$?
	[ "$rc" != 0 ] && [ "$rc" != 124 ] || fail "serve beside a regular file: exit $rc: $(< "$T/ns.log")"
	expect_eq "the .new file is kept" "$(cat "$T/s2.new" 2>&1)" precious
}

# As root, a daemon without --uid-range maps no workspace's owner: its
# files are nobody's to the agent, and the first exec that edits one got
# "Permission denied", the reason only in the sandbox's JSON.  create says
# it on stderr, with what to do; stdout stays the id alone.  Unprivileged,
# the caller's own workspace is mapped, and nothing is said.
t_create_says_workspace_not_mapped() {
	local id
	start_daemon
	mkdir "$T/ws"
	echo orig > "$T/ws/f"
	id=$("$CORRAL" create --socket "$SOCK" --workspace "$T/ws" 2> "$T/e") || fail "create: $(cat "$T/e")"
	expect_eq "stdout: the id alone" "$(printf '%s' "$id" | wc -l)" 0
	case $id in sb-*) ;; *) fail "not an id: $id" ;; esac
	if [ "$ME" = 0 ]; then
		expect_contains "said" "$(cat "$T/e")" "corral: note: ${T:0:40}"
		expect_contains "why" "$(cat "$T/e")" "is host uid 0's, outside the daemon's --uid-range"
		expect_contains "what to do" "$(cat "$T/e")" "corral serve --uid-range FROM-TO"
	else
		expect_eq "nothing said" "$(cat "$T/e")" ""
		out=$("$CORRAL" exec --socket "$SOCK" "$id" -- /bin/sh -c 'echo new > f && cat f' 2>&1) ||
			fail "the owner's workspace is not writable: $out"
	fi
	stop_daemon
}

# A bad option to serve is named in one line, not followed by the 150
# lines of its help (on stderr, scrolling the error off the screen).
t_serve_usage_names_the_option() {
	local rc
	rc=0; out=$("$CORRAL" serve --socket "$T/s" --bogus 2>&1 < /dev/null) || rc=$?
	expect_eq "--bogus: exit" "$rc" 2
	expect_eq "--bogus: said" "$out" 'corral: serve: unknown option "--bogus"; see `corral serve --help`'
	rc=0; out=$("$CORRAL" serve --socket "$T/s" --policy 2>&1 < /dev/null) || rc=$?
	expect_eq "--policy: exit" "$rc" 2
	expect_eq "--policy: said" "$out" 'corral: serve: option "--policy" needs a value; see `corral serve --help`'
	[ ! -e "$T/s" ] || fail "a socket was made"
}

# $CORRAL_SOCKET, where the clients look first, is where a user's daemon
# listens when no --socket says: one setting for both ends (it listened at
# its own default, and `corral ls` with the same setting found nothing).
# Not root's: a root daemon takes no path from its environment.
t_socket_from_corral_socket() {
	local i rc=0
	[ "$ME" != 0 ] || { skip "root's daemon takes --socket, not CORRAL_SOCKET"; return 77; }
	env -u XDG_RUNTIME_DIR -u CORRAL_SOCKET "$CORRAL" serve \
		--state-dir "$T/es-state" > "$T/es0.log" 2>&1 < /dev/null || rc=$?
	expect_eq "no socket path: usage" "$rc" 2
	expect_contains "what to set" "$(< "$T/es0.log")" "CORRAL_SOCKET or XDG_RUNTIME_DIR"
	SOCK=$T/env.sock STATE=$T/es-state
	CORRAL_SOCKET=$SOCK env -u XDG_RUNTIME_DIR "$CORRAL" serve --state-dir "$STATE" \
		> "$T/es.log" 2>&1 < /dev/null &
	DPID=$! DLOG=$T/es.log
	echo "$DPID $STATE $DLOG" >> "$T/daemons"
	: >> "$T/watchdogs"	# none: on_test_exit reads the list
	trap on_test_exit EXIT
	for i in $(seq 1 500); do
		[ -S "$SOCK" ] || ! kill -0 "$DPID" 2>/dev/null && break
		nap 0.02
	done
	[ -S "$SOCK" ] || { fail "no socket at \$CORRAL_SOCKET: $(< "$T/es.log")"; return 1; }
	rc=0
	CORRAL_SOCKET=$SOCK env -u XDG_RUNTIME_DIR "$CORRAL" ls > "$T/es.ls" 2>&1 || rc=$?
	expect_eq "a client with the same setting: ls" "$rc" 0
}

# Root's daemon does not take $CORRAL_SOCKET, but root's clients still
# look there first: `CORRAL_SOCKET=X corral serve &`, then `corral ls`,
# found no daemon, and nothing had said the socket was elsewhere.  It is
# said before anything starts (a state directory that cannot be made
# stops this one there, so no socket is made at root's default path).
t_root_serve_says_corral_socket_unused() {
	local rc=0
	[ "$ME" = 0 ] || { skip "a user's daemon listens at \$CORRAL_SOCKET"; return 77; }
	CORRAL_SOCKET=$T/env.sock "$CORRAL" serve --state-dir /dev/null/state \
		> "$T/es.log" 2>&1 < /dev/null || rc=$?
	expect_eq "exit" "$rc" 125
	expect_contains "said" "$(< "$T/es.log")" \
		"corral: note: CORRAL_SOCKET=$T/env.sock is not taken as root (a root daemon takes no path from its environment): the socket is /run/corral/corral.sock, where clients with CORRAL_SOCKET set do not look; --socket $T/env.sock puts it there"
	rc=0
	CORRAL_SOCKET=$T/env.sock "$CORRAL" serve --socket "$T/env.sock" \
		--state-dir /dev/null/state > "$T/es.log" 2>&1 < /dev/null || rc=$?
	expect_eq "--socket given: exit" "$rc" 125
	expect_not_contains "--socket given: nothing said" "$(< "$T/es.log")" "note:"
	[ ! -e "$T/env.sock" ] || fail "a socket was made"
}

# --listen's token: what the daemon asks of it is in --help (it said
# only "its first line", and a first token of "secret" was refused), and
# a file its group may read is warned about as such (the warning said
# "readable by others" of a 0640 file).
t_serve_token_file_rules() {
	local rc=0
	expect_contains "help" "$("$CORRAL" serve --help)" "with --listen.  At least 16 characters"
	echo secret > "$T/tok"
	chmod 640 "$T/tok"
	"$CORRAL" serve --socket "$T/s" --state-dir "$T/tok-state" \
		--listen 127.0.0.1:0 --token-file "$T/tok" > "$T/tok.log" 2>&1 < /dev/null || rc=$?
	expect_eq "short token: exit" "$rc" 125
	expect_contains "short token: said" "$(< "$T/tok.log")" \
		"corral: the token in $T/tok is shorter than 16 characters"
	expect_contains "group-readable: said" "$(< "$T/tok.log")" \
		"corral: warning: token file $T/tok is open to its group or others (mode 640)"
	[ ! -e "$T/s" ] || fail "a socket was made"
}

t_sandbox_lifecycle() {
	start_daemon
	id=$(mksb '{"labels": {"team": "infra", "run": "42"}, "ttl_seconds": 3600, "idle_freeze_ms": 5000}')
	expect_contains "id" "$id" "sb-"
	code=$(api GET "/v1/sandboxes/$id")
	expect_code "get" "$code" 200
	expect_eq "id" "$(jq 'v["id"]')" "$id"
	expect_eq "labels" "$(jq 'v["labels"]')" '{"team": "infra", "run": "42"}'
	expect_eq "ttl" "$(jq 'v["ttl_seconds"]')" 3600.0
	expect_eq "idle_freeze_ms" "$(jq 'v["idle_freeze_ms"]')" 5000
	expect_eq "halt_reason" "$(jq 'v["halt_reason"]')" null
	# (by jget, as every check of this test: a Python's start, 25-60 ms
	# of CPU, was six of them a lane)
	st=$(jq 'v["state"]')
	case $st in
	idle|running) ;;
	*) fail "state: got '$st', want idle or running" ;;
	esac
	created=$(jq 'v["created"]')
	[[ $created == *Z ]] || fail "created: '$created' does not end in Z"
	for k in active_seconds cpu_seconds frozen_seconds memory_byte_seconds memory_peak_bytes; do
		"$JGET" -t "meters.$k" < "$T/body" > /dev/null || fail "meters: no $k: $(body)"
	done
	limits=$(jq 'v["limits"]')
	[ "$ME" != 0 ] || [ "$limits" != rlimit ] || fail "root got no cgroup limits"
	# the meters read the box's cgroup (meter.c): a box that ran has used memory
	if [ "$limits" != rlimit ]; then
		expect_eq "echo" "$(sbsh "$id" 'echo metered')" metered
		code=$(api GET "/v1/sandboxes/$id")
		expect_eq "memory peak" "$(jq 'v["meters"]["memory_peak_bytes"] > 0')" true
	fi
	expect_limits "$limits"
	grep -qx "+$id" "$STATE/sandboxes.log" || fail "$id not in the sandbox log"
	# a client's limits.open_files (below the default 1024, so that it
	# fits any host): its commands' limit, and the audit's create event
	id2=$(mksb '{"policy": {"limits": {"open_files": 512, "pids": 64}}}')
	expect_eq "open_files" "$(sbsh "$id2" 'echo $(ulimit -Hn) $(ulimit -Sn)')" "512 512"
	expect_contains "open_files in the create event" \
		"$(grep "\"sandbox\":\"$id2\"" "$STATE/audit.jsonl" | grep '"type":"sandbox.create"')" '"open_files":512'
	code=$(api GET /v1/sandboxes)
	expect_code "list" "$code" 200
	expect_eq "list: two" "$(jq 'len(v["sandboxes"])')" 2
	ids="$(jq 'v["sandboxes"][0]["id"]') $(jq 'v["sandboxes"][1]["id"]')"
	[ "$ids" = "$id $id2" ] || [ "$ids" = "$id2 $id" ] || fail "list: $ids, want $id and $id2"
	code=$(api GET /v1/health)
	expect_eq "health count" "$(jq 'v["sandboxes"]')" 2
	code=$(api DELETE "/v1/sandboxes/$id")
	expect_code "delete" "$code" 200
	expect_eq "deleted id" "$(jq 'v["id"]')" "$id"
	expect_eq "deleted state" "$(jq 'v["state"]')" destroyed
	"$JGET" -t meters.active_seconds < "$T/body" > /dev/null || fail "deleted meters: $(body)"
	code=$(api GET "/v1/sandboxes/$id")
	expect_error "get deleted" "$code" 404 not_found
	code=$(api DELETE "/v1/sandboxes/$id")
	expect_error "delete again" "$code" 404 not_found
	grep -qx -- "-$id" "$STATE/sandboxes.log" || fail "$id's end not in the sandbox log"
	code=$(api GET /v1/sandboxes)
	expect_eq "list after delete" "$(jq 'len(v["sandboxes"])') $(jq 'v["sandboxes"][0]["id"]')" "1 $id2"
	ev=$(grep "\"sandbox\":\"$id\"" "$STATE/audit.jsonl")
	expect_contains "create event" "$ev" '"type":"sandbox.create"'
	expect_contains "destroy event" "$ev" '"type":"sandbox.destroy"'
	stop_daemon
}

# A sandbox that cannot be built: 500 with the reason, every time (the
# sandbox fails while the daemon may still be writing its setup to it:
# never a bare "Broken pipe"), and nothing left behind.
# A client that goes before its sandbox is ready (a create timed out on its
# side) never learns its id: the sandbox goes too, not left without a TTL.
t_create_client_gone() {
	local i n
	start_daemon
	$PY - "$SOCK" <<'EOF'
import socket, sys
for _ in range(3):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    s.sendall(b"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
    s.close()
EOF
	# health counts the sandboxes being built too
	for i in $(seq 100); do
		code=$(api GET /v1/health)
		n=$(jq 'v["sandboxes"]')
		[ "$n" = 0 ] && [ "$(grep -c '"type":"sandbox.create"' "$STATE/audit.jsonl")" -ge 3 ] && break
		sleep 0.1
	done
	expect_eq "no sandbox left for the gone clients" "$n" 0
	expect_eq "a create still answers" "$(api POST /v1/sandboxes -d '{}')" 201
	stop_daemon
}

t_create_failure_explained() {
	start_daemon
	code=$(api POST /v1/sandboxes -d '{"workspace": "/nonexistent/corral-serve-x"}')
	expect_error "bad workspace" "$code" 400 bad_request
	expect_contains "bad workspace detail" "$(jq 'v["detail"]')" \
		"workspace /nonexistent/corral-serve-x: No such file or directory"
	# a host path is resolved before anything is built (api_access.c):
	# its reason, every time
	for i in 1 2 3 4 5 6 7 8 9 10; do
		code=$(api POST /v1/sandboxes -d '{"policy": {"filesystem": {"ro": ["/nonexistent/corral-serve-x"]}}}')
		expect_error "bad bind ($i)" "$code" 400 bad_request
		expect_contains "bad bind detail ($i)" "$(jq 'v["detail"]')" \
			"ro bind /nonexistent/corral-serve-x: No such file or directory"
	done
	code=$(api GET /v1/sandboxes)
	expect_eq "none listed" "$(jq 'len(v["sandboxes"])')" 0
	code=$(api GET /v1/health)
	expect_eq "none counted" "$(jq 'v["sandboxes"]')" 0
	expect_eq "none in the sandbox log" "$(grep -c '^+' "$STATE/sandboxes.log" || true)" 0
	expect_eq "sandbox works after" "$(sbsh "$(mksb)" 'echo ok')" ok
	stop_daemon
}

# --pool N: creates take a sandbox built ahead, and the pool fills again.
# Calls running hold the refill back (registry.c), but only for a while: a
# background process that runs on must not keep the pool empty.
# pool_count: the pooled sandboxes (health counts them, the list does not)
pool_count() {
	local n listed
	api GET /v1/health >/dev/null
	n=$(jq 'v["sandboxes"]')
	api GET /v1/sandboxes >/dev/null
	listed=$(jq 'len(v["sandboxes"])')
	echo $((n - listed))
}

t_pool() {
	local i
	start_daemon --pool 2
	i=0
	while [ $i -lt 100 ] && [ "$(pool_count)" != 2 ]; do sleep 0.1; i=$((i + 1)); done
	expect_eq "pool full" "$(pool_count)" 2
	# the process starts at once, before the pool's quiet time is over
	id=$(mksb)
	[ -n "$id" ] || return 1
	code=$(api POST "/v1/sandboxes/$id/processes" -d '{"command": "sleep 60"}')
	expect_code "background process" "$code" 201
	expect_eq "it works" "$(sbsh "$id" 'echo ok')" ok
	i=0
	while [ $i -lt 100 ] && [ "$(pool_count)" != 2 ]; do sleep 0.1; i=$((i + 1)); done
	expect_eq "pool full again while a process runs on" "$(pool_count)" 2
	code=$(api DELETE "/v1/sandboxes/$id")
	expect_code "delete" "$code" 200
	stop_daemon
}

t_max_sandboxes() {
	start_daemon --max-sandboxes 2
	mksb >/dev/null
	mksb >/dev/null
	code=$(api POST /v1/sandboxes)
	expect_error "third" "$code" 503 busy
	code=$(api GET /v1/sandboxes)
	expect_eq "count" "$(jq 'len(v["sandboxes"])')" 2
	stop_daemon
}

# ---- exec ------------------------------------------------------------------

# What a process inside a daemon's sandbox may stack of seccomp filter of
# its own is bounded as in `corral run`'s (seccomp.sh,
# t_stacked_filters_bounded): 1024 to 1033 eBPF instructions.  As root the
# daemon filled its own chain ahead (corral_seccomp_prefill), so each
# sandbox's init loads only what its program and the margin leave: the
# bound must come out the same through that arithmetic, in the first
# sandbox and the next.  Unprivileged the daemon's main thread fills
# nothing (it would need no_new_privs, and newuidmap is setuid): a thread
# of its own does, with no_new_privs on it alone, and clones the inits
# (launcher.c); the main thread keeps neither.
# launcher_filled: a thread of the daemon's (not the main one), named
# corral-launch once it has filled (at most 10 s after the daemon's
# start), holds the filling, 7 filters or more, with no_new_privs.
launcher_filled() {
	local i=0 t f
	while [ $i -lt 200 ]; do
		for t in /proc/$DPID/task/*; do
			[ "$(cat "$t/comm" 2>/dev/null)" = corral-launch ] || continue
			f=$(awk '$1 == "Seccomp_filters:" { print $2 }' "$t/status")
			[ "${f:-0}" -ge 7 ] ||
				{ fail "the daemon's launcher holds ${f:-no} filters"; return 1; }
			expect_eq "no_new_privs on the launcher" \
				"$(awk '$1 == "NoNewPrivs:" { print $2 }' "$t/status")" 1
			return
		done
		nap 0.05
		i=$((i + 1))
	done
	fail "no thread of the daemon's filled the chain ahead:" \
		$(grep -h Seccomp_filters /proc/$DPID/task/*/status)
}

t_stacked_filters_bounded_in_the_daemons_sandboxes() {
	local id body left filters
	start_daemon
	filters=$(awk '$1 == "Seccomp_filters:" { print $2 }' "/proc/$DPID/status")
	if [ "$(id -u)" = 0 ]; then
		[ "${filters:-0}" -ge 7 ] || fail "the daemon filled nothing ahead: $filters filters"
	else
		expect_eq "no filling on the main thread" "${filters:-0}" 0
		expect_eq "no no_new_privs on the main thread" \
			"$(awk '$1 == "NoNewPrivs:" { print $2 }' "/proc/$DPID/status")" 0
		launcher_filled || return 1
	fi
	body=$(python3 -c 'import json, sys
print(json.dumps({"argv": ["/usr/bin/python3", "-c", open(sys.argv[1]).read()]}))' \
		"$HERE/data/seccomp_stack_left.py")
	for i in 1 2; do
		id=$(mksb) || return 1
		expect_code "exec" "$(ex "$id" "$body")" 200 || return 1
		left=$(jq 'v["stdout"]' | awk '$1 == "left" { print $2 }')
		[ "${left:-0}" -ge 1024 ] && [ "$left" -le 1033 ] ||
			fail "sandbox $i: a process inside may stack ${left:-nothing} eBPF instructions, not 1024-1033: $(body)"
		expect_contains "no 4096 stacked" "$(jq 'v["stdout"]')" "stacked 0 Cannot allocate memory"
	done
}

# An unprivileged daemon fills once, on a thread of its own that clones
# the inits (launcher.c), and each sandbox's init loads its filter over
# that and the margin left over its filter (seccomp_stack.c), so init's
# chain, as the kernel lists it, holds the launcher's filling first, then
# corral's filter, then one filter of the margin (filled by init's own
# thread, the filter would be last; in line, first).  Read as root, which
# a chain's reader must be, from uid 65534's daemon.
t_unprivileged_daemons_sandbox_filled_beside_init() {
	[ "$ME" = 0 ] ||
		{ skip "reading a chain (PTRACE_SECCOMP_GET_FILTER) needs CAP_SYS_ADMIN"; return 77; }
	local init="" p chain fills
	mkdir -m 777 "$T/nb"
	SOCK=$T/nb/s
	STATE=$T/nb/state
	# no cgroup file system for it: make check's lane of uid 65534 has its
	# groups delegated meanwhile, and counts what is in them
	printf '%s\n' '#!/bin/sh' \
		'mount -t tmpfs -o mode=755 corral-test /sys/fs/cgroup || exit 9' \
		'exec setpriv --reuid=65534 --regid=65534 --clear-groups env -u TMPDIR HOME=/nonexistent "$@"' \
		> "$T/as65534"
	chmod 755 "$T/as65534"
	DAEMON_WRAP="unshare --mount --propagation private $T/as65534" start_daemon
	launcher_filled || return 1
	mksb > /dev/null || return 1
	# the sandbox's init: the daemon's child in a pid namespace of its own
	for p in $(pgrep -P "$DPID"); do
		if [ "$(readlink "/proc/$p/ns/pid")" != "$(readlink "/proc/$DPID/ns/pid")" ]; then
			init=$p
		fi
	done
	[ -n "$init" ] || { fail "no sandbox's init among the daemon's children"; return 1; }
	chain=$(/usr/bin/python3 "$HERE/data/seccomp_chain.py" "$init")
	fills=$(grep -c '^fill ' <<< "$chain" || :)
	[ "$fills" -ge 8 ] && [ "$(grep -c . <<< "$chain")" = $((fills + 1)) ] &&
		[[ $(tail -2 <<< "$chain" | head -1) == "other "* ]] &&
		[[ $(tail -1 <<< "$chain") == "fill "* ]] ||
		fail "not the launcher's filling, corral's filter, the margin:" $chain
	stop_daemon
}

# A call's argv and envp reach its process packed; it splits them into a
# page of its own when they fit (512 pointers: the strings and their two
# NULLs, child.c's call_vec), else into calloc's.  Around that edge, and
# far past it, each call gets every argument and variable, the last ones
# too, and its environment ends where it should.
t_exec_argv_env_around_the_vectors_page() {
	local id base code slots a want
	start_daemon
	id=$(mksb) || return 1
	# the variables every call brings (the box's), as its process has them
	code=$(ex "$id" '{"argv": ["/bin/cat", "/proc/self/environ"]}')
	expect_code "environ" "$code" 200 || return 1
	base=$(jq 'v["stdout"].count("\0")')
	for slots in 510 511 512 513 514 4000; do
		a=$((slots - 2 - base - 20))
		[ "$a" -ge 5 ] || { fail "the box brings $base variables: no room"; return 1; }
		"$PY" -c 'import json, sys
a = int(sys.argv[1])
script = "eval \"last=\\${$#}\"; echo \"$# $last $E1 $E20\"; tr -cd \"\\0\" < /proc/$$/environ | wc -c"
argv = ["/bin/sh", "-c", script, "sh"] + ["a%d" % i for i in range(1, a - 3)]
print(json.dumps({"argv": argv, "env": {"E%d" % i: "v%d" % i for i in range(1, 21)}}))' \
			"$a" > "$T/vec.json"
		code=$(ex "$id" "@$T/vec.json")
		expect_code "$slots slots" "$code" 200 || return 1
		want="$((a - 4)) a$((a - 4)) v1 v20
$((base + 20))"
		expect_eq "$slots slots: \$#, the last argument, E1, E20, the count" \
			"$(jq 'v["stdout"].strip()')" "$want"
	done
	stop_daemon
}

t_exec_argv_and_command() {
	start_daemon
	id=$(mksb)
	code=$(ex "$id" '{"argv": ["/bin/echo", "a  b", "c"], "tool_call_id": "call-7"}')
	expect_code "argv" "$code" 200
	expect_eq "argv stdout" "$(jq 'v["stdout"]')" "a  b c"
	expect_eq "status" "$(jq 'v["status"]')" exited
	expect_eq "tool_call_id" "$(jq 'v["tool_call_id"]')" call-7
	# (by jget where a Python's start, 25-60 ms of CPU, was each check)
	! "$JGET" -t tool_call < "$T/body" > /dev/null 2>&1 ||
		fail "a second name for the id: $(body)"
	expect_eq "sandbox" "$(jq 'v["sandbox"]')" "$id"
	code=$(ex "$id" '{"command": "echo $((6 * 7)) | tr 4 X"}')
	expect_code "command" "$code" 200
	expect_eq "command stdout" "$(jq 'v["stdout"]')" X2
	expect_contains "generated call id" "$(jq 'v["tool_call_id"]')" "$id"
	# exit codes and signals
	ex "$id" '{"command": "exit 3"}' >/dev/null
	expect_eq "exit 3" "$(jq 'v["exit_code"]') $(jq 'v["status"]')" "3 exited"
	ex "$id" '{"command": "kill -TERM $$"}' >/dev/null
	expect_eq "sigterm" "$(jq 'v["status"]') $(jq 'v["signal"]') $(jq 'v["exit_code"]')" "signaled 15 143"
	code=$(ex "$id" '{"argv": ["/no/such/cmd"]}')
	expect_code "not found" "$code" 200
	expect_eq "not found" "$(jq 'v["exit_code"]')" 127
	# stdout, stderr, stdin, env, cwd
	code=$(ex "$id" '{"command": "echo out; echo err >&2; exit 5"}')
	expect_eq "stdout" "$(jq 'v["stdout"]')" out
	expect_eq "stderr" "$(jq 'v["stderr"]')" err
	expect_eq "exit 5" "$(jq 'v["exit_code"]')" 5
	code=$(ex "$id" '{"argv": ["/bin/cat"], "stdin": "line 1\nh\u00e9llo \u2603\n"}')
	expect_eq "stdin" "$(jq 'v["stdout"] == "line 1\nh\u00e9llo \u2603\n"')" true
	code=$(ex "$id" '{"command": "wc -c", "stdin": ""}')
	out=$(jq 'v["stdout"]')
	expect_eq "empty stdin" "${out#"${out%%[![:space:]]*}"}" 0
	code=$(ex "$id" '{"command": "echo \"$GREETING|$EMPTY|$HOME\"", "env": {"GREETING": "hi there", "EMPTY": ""}}')
	expect_eq "env" "$(jq 'v["stdout"]')" "hi there||/home/agent"
	code=$(ex "$id" '{"command": "pwd"}')
	expect_eq "default cwd" "$(jq 'v["stdout"]')" /workspace
	code=$(ex "$id" '{"command": "pwd", "cwd": "/tmp"}')
	expect_eq "cwd" "$(jq 'v["stdout"]')" /tmp
	code=$(ex "$id" '{"command": "pwd", "cwd": "/no/such/dir"}')
	expect_code "missing cwd" "$code" 200
	[ "$(jq 'v["exit_code"]')" != 0 ] || fail "missing cwd status: exit 0"
	expect_contains "missing cwd reason" "$(jq 'v["reason"]')" /no/such/dir
	# the sandbox lives across calls: what one call wrote, the next reads
	sbsh "$id" 'echo kept > /workspace/state; echo tmp > /tmp/t' >/dev/null
	expect_eq "state kept" "$(sbsh "$id" 'cat /workspace/state /tmp/t')" "kept
tmp"
	# calls at once in one sandbox run side by side: each says when it
	# began and ended, and all three were running at one moment (no
	# stopwatch: a busy machine makes any wall-clock bound a guess)
	pids=""
	for i in 1 2 3; do
		"$HTTPC" -sS --max-time 30 --unix-socket "$SOCK" -X POST -o "$T/par.$i" \
			-d '{"command": "date +%s%N; sleep 1; date +%s%N"}' "http://localhost/v1/sandboxes/$id/exec" &
		pids="$pids $!"
	done
	for p in $pids; do wait "$p" || true; done	# not a bare wait: the daemon is a child too
	for i in 1 2 3; do
		# (its stdout, its last newline once: what .strip() printed)
		printf '%s\n' "$(jq 'v["stdout"]' "$T/par.$i")" > "$T/span.$i"
		expect_eq "parallel $i" "$(wc -l < "$T/span.$i")" 2
	done
	last_start=$(for i in 1 2 3; do head -1 "$T/span.$i"; done | sort -n | tail -1)
	first_end=$(for i in 1 2 3; do tail -1 "$T/span.$i"; done | sort -n | head -1)
	[ "$last_start" -lt "$first_end" ] ||
		fail "the 3 calls never ran at once: $(cat "$T/span.1" "$T/span.2" "$T/span.3" | tr '\n' ' ')"
	n=$(sbget "$id" 'v["meters"]["calls"]')
	[ "$n" -ge 14 ] || fail "calls metered: $n, want 14 or more"
	stop_daemon
}

# A call's argv, environment and cwd go to its process in one message of
# at most 60 KiB (src/lib/call.c, build_exec: its block as long as what
# it carries).  Just under the bound all of it arrives, the cwd after the
# argv too; over it the call is refused, saying why, and the sandbox
# takes the next call.
t_exec_message_bound() {
	local big
	start_daemon
	id=$(mksb)
	big=$(head -c 61000 /dev/zero | tr '\0' x)
	code=$(ex "$id" "$(jbody argv "json:[\"/bin/sh\", \"-c\", \"pwd; printf %s \\\"\$1\\\" | wc -c\", \"sh\", \"$big\"]" cwd /tmp)")
	expect_code "61000 bytes of argv" "$code" 200
	expect_eq "all of it, and the cwd" "$(jq 'v["stdout"]')" "/tmp
61000"
	code=$(ex "$id" "$(jbody argv "json:[\"/bin/true\", \"$big$big\"]")")
	expect_error "122000 bytes of argv" "$code" 400 bad_request
	expect_contains "why" "$(jq 'v["detail"]')" "over 60 KiB"
	expect_eq "the next call runs" "$(sbsh "$id" 'echo ok')" ok
	stop_daemon
}

# A command line that dash would only split and exec (with "cd DIR &&"
# before it and "2>&1" after it, or not) runs without the shell
# (src/lib/shell.c): one process, not sh and a child.  Whatever the
# line, the answer is the one /bin/sh -c gives: stdout (the environment
# sorted: dash orders it by its own hash), stderr and exit code, for lines
# taken and lines left to the shell, for failing execs (the shell's own
# words), and for environments dash changes.
# A call starts with every signal at its default and none blocked, whatever
# the daemon inherited (nohup, a service manager, GNU make: glibc's own two
# ignored) or set for itself: init resets in each call only what it does
# not leave at SIG_DFL, read once.  The daemon's own: SIGCHLD ignored (the
# kernel reaped every call's process for init, and no call ended) and
# SIGTERM blocked (it could not be stopped) are not kept.
t_exec_signals_default() {
	cat > "$T/ign" <<'PY'
#!/usr/bin/python3
import ctypes, os, signal, sys
for s in (signal.SIGHUP, signal.SIGINT, signal.SIGUSR2, signal.SIGRTMIN + 5,
          signal.SIGCHLD):
    signal.signal(s, signal.SIG_IGN)
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM, signal.SIGCHLD])
# glibc's own two, which its sigaction refuses (GNU make's children have them ignored)
libc = ctypes.CDLL(None, use_errno=True)
ign = ctypes.create_string_buffer(bytes([1] + [0] * 31))     # SIG_IGN, no flags
for s in (32, 33):
    if libc.syscall(13, s, ign, None, 8) != 0:              # rt_sigaction
        sys.exit("rt_sigaction %d: errno %d" % (s, ctypes.get_errno()))
os.execv(sys.argv[1], sys.argv[1:])
PY
	chmod 755 "$T/ign"
	DAEMON_WRAP=$T/ign start_daemon
	local ign
	ign=$(awk '/^SigIgn:/ { print $2 }' "/proc/$DPID/status")
	# 33 (SIGSETXID) glibc catches once the daemon has a thread (an
	# unprivileged daemon's launcher, launcher.c): reset at exec all the same
	[ $(( (0x$ign >> 31) & 1 )) = 1 ] ||
		fail "the daemon does not ignore 32: SigIgn $ign"
	id=$(mksb)
	local i out
	# cat sets no handler of its own (grep catches SIGSEGV)
	for i in 1 2 3; do	# the first call's process and later ones
		code=$(ex "$id" '{"argv": ["/bin/cat", "/proc/self/status"]}')
		expect_code "exec ($i)" "$code" 200
		out=$(jq 'v["stdout"]' | grep '^Sig')
		expect_contains "nothing blocked ($i)" "$out" "SigBlk:	0000000000000000"
		expect_contains "nothing ignored ($i)" "$out" "SigIgn:	0000000000000000"
		expect_contains "nothing caught ($i)" "$out" "SigCgt:	0000000000000000"
	done
	# through sh -c too
	out=$(sbsh "$id" 'cat /proc/self/status' | grep '^Sig')
	expect_contains "sh: nothing ignored" "$out" "SigIgn:	0000000000000000"
	# SIGTERM stops it (stop_daemon: within 15 s, exit 0, nothing left)
	stop_daemon
}

# A call's process leads a session of its own, its first and later ones,
# with a terminal too (the pty its controlling one): made while it waits
# for its call (child.c's call_child), and with a terminal not made again,
# which setsid refuses to a session's leader.
t_exec_own_session() {
	start_daemon
	id=$(mksb)
	local i out
	for i in 1 2 3; do
		code=$(ex "$id" '{"argv": ["/bin/cat", "/proc/self/stat"]}')
		expect_code "exec ($i)" "$code" 200
		# pid (comm) state ppid pgrp session
		out=$(jq 'v["stdout"]' | awk 'NR == 1 { print ($1 == $5 && $1 == $6) ? "leads" : "pid " $1 " group " $5 " session " $6 }')
		expect_eq "its session and its group ($i)" "$out" leads
	done
	code=$(ex "$id" '{"argv": ["/bin/sh", "-c", "tty; cut -d\" \" -f1,5,6,7 /proc/$$/stat"], "tty": true}')
	expect_code "exec with a terminal" "$code" 200
	out=$(jq 'v["stdout"]' | tr -d '\r')
	expect_contains "its terminal" "$out" "/dev/pts/"
	expect_eq "its session leads, the pty its own" \
		"$(echo "$out" | awk 'NR == 2 { print ($1 == $2 && $1 == $3 && $4 != 0) ? "leads" : $0 }')" leads
	stop_daemon
}

# The CLI started with fd 0, 1 or 2 closed: the number stays held, so its
# connection to the daemon does not take it.  It did: \`corral create >&-\`
# wrote the new id into its own request stream (or lost it), and a
# sandbox no one could name stayed.  Now create says the id could not be
# written, removes the sandbox and exits 125; exec's output, with nowhere
# to go, is a failure said on stderr, as with a full disk.
t_cli_with_stdio_closed() {
	local rc=0 id
	start_daemon
	"$CORRAL" create --socket "$SOCK" >&- 2> "$T/e" < /dev/null || rc=$?
	expect_eq "create >&-: exit" "$rc" 125
	expect_contains "create >&-: said" "$(cat "$T/e")" "to stdout: Bad file descriptor; it was removed"
	code=$(api GET /v1/sandboxes)
	expect_eq "create >&-: no sandbox left" "$(jq 'len(v["sandboxes"])')" 0
	id=$("$CORRAL" create --socket "$SOCK" <&- 2>&-) || fail "create with 0 and 2 closed"
	rc=0
	"$CORRAL" exec --socket "$SOCK" "$id" -- /bin/sh -c 'echo out; echo err >&2; exit 3' \
		>&- 2> "$T/e" < /dev/null || rc=$?
	expect_eq "exec >&-: exit" "$rc" 125
	expect_contains "exec >&-: said" "$(cat "$T/e")" "writing the command's output: Bad file descriptor"
	rc=0
	"$CORRAL" exec --socket "$SOCK" "$id" -- /bin/sh -c 'echo out; exit 3' \
		> "$T/o" 2>&- <&- || rc=$?
	expect_eq "exec 2>&- <&-: exit" "$rc" 3
	expect_eq "exec 2>&- <&-: stdout" "$(cat "$T/o")" out
}

# `corral logs` on a terminal wrote a background process's output as it
# was: its OSC 52 set the operator's clipboard, its CSI 21 t asked for the
# window's title as typed input, its DECRQSS for a reply, its ESC [ 1 A
# ESC [ 2 K erased the "== pid" header above, its U+009B (CSI as xterm
# takes it in UTF-8) cleared the screen, an open DCS swallowed the next
# header.  On a terminal the output is shown as `cp ID:FILE -` shows a
# file (controls as \xNN, line breaks and tabs kept); to a file or a
# pipe the bytes are as the process wrote them.
t_cli_logs_shown_on_a_terminal() {
	local id
	start_daemon
	id=$("$CORRAL" create --socket "$SOCK" 2> "$T/e" < /dev/null) || fail "create: $(cat "$T/e")"
	printf 'one\033]52;c;b3duZWQ=\007\033[21t\033P$qm\033\\\tx\n\033[1A\033[2K\302\2332J\342\200\256r\rcut\033P' > "$T/one"
	"$CORRAL" cp --socket "$SOCK" "$T/one" "$id":/tmp/one > /dev/null 2> "$T/e" < /dev/null || fail "cp: $(cat "$T/e")"
	timeout 30 "$CORRAL" exec --background --socket "$SOCK" "$id" -- /bin/cat /tmp/one \
		> /dev/null 2>&1 < /dev/null || fail "exec one"
	timeout 30 "$CORRAL" exec --background --socket "$SOCK" "$id" -- /bin/echo two \
		> /dev/null 2>&1 < /dev/null || fail "exec two"
	# both written (bounded: 100 looks)
	for _ in $(seq 1 100); do
		"$CORRAL" logs --socket "$SOCK" "$id" > "$T/logs" 2>&1 < /dev/null
		[ "$(grep -c '^== pid.*exited with status 0' "$T/logs")" = 2 ] && break
		nap 0.05
	done
	# to a file: the bytes, the header before them
	$PY - "$T/logs" "$T/one" <<'EOF2' || fail "to a file: $(od -c "$T/logs" | head -20)"
import sys
logs, one = (open(f, "rb").read() for f in sys.argv[1:])
# the newest first: the header of one after two's output
assert logs.endswith(b"/bin/cat /tmp/one\n-- stdout\n" + one + b"\n"), logs
EOF2
	/usr/bin/python3 "$HERE/ptyrun.py" -- "$CORRAL" logs --socket "$SOCK" "$id" > "$T/r"
	expect_eq "on a terminal: exit" "$(json exit < "$T/r")" 0
	$PY - "$T/r" <<'EOF2' || fail "on a terminal: $(head -c 900 "$T/r")"
import json, sys
out = json.load(open(sys.argv[1]))["output"]
for c in "\x1b\x07\x9b\u202e":
    assert c not in out, (c, out)
assert "\r" not in out.replace("\r\n", ""), out
want = "-- stdout\r\ntwo\r\n== pid "
assert want in out, out
want = ("/bin/cat /tmp/one\r\n-- stdout\r\n"
        "one\\x1b]52;c;b3duZWQ=\\x07\\x1b[21t\\x1bP$qm\\x1b\\\tx\r\n"
        "\\x1b[1A\\x1b[2K\\xc2\\x9b2J\\xe2\\x80\\xaer\\x0dcut\\x1bP\r\n")
assert out.endswith(want), out
EOF2
	"$CORRAL" rm --socket "$SOCK" "$id" > /dev/null 2>&1 < /dev/null || fail "rm $id"
	stop_daemon
}

# A label is what its sandbox's creator chose (an MCP agent's
# sandbox_create too): `corral ls` shows KEY=VALUE,... and a value
# "ci,approved=yes" read as two labels; each "," and "=" in a key or a
# value is \x2c and \x3d now, its controls \xNN as before.
t_cli_ls_labels_keep_their_separators() {
	start_daemon
	code=$(api POST /v1/sandboxes -d '{"labels": {"owner": "ci,approved=yes", "k=\u001b]0;t\u0007": "\u009b2J\u202e"}}')
	expect_code "create" "$code" 201 || return 1
	"$CORRAL" ls --socket "$SOCK" > "$T/o" 2> "$T/e" < /dev/null || fail "ls: $(cat "$T/e")"
	expect_contains "a value's separators" "$(< "$T/o")" 'owner=ci\x2capproved\x3dyes'
	expect_contains "a key's" "$(< "$T/o")" 'k\x3d\x1b]0;t\x07=\xc2\x9b2J\xe2\x80\xae'
	! LC_ALL=C grep -q $'\x1b\|\x07\|\xc2\x9b\|\xe2\x80\xae' "$T/o" || fail "raw: $(od -c "$T/o" | head)"
	stop_daemon
}

# A sandbox id the daemon does not know (mistyped, or of one gone): each
# client verb says the daemon's 404 and points to `corral ls`, which lists
# what there is; it said 'no sandbox "x" (HTTP 404)' alone.  The daemon's
# JSON is as it was.
t_cli_unknown_id_points_to_ls() {
	local verb rc
	start_daemon
	for verb in "exec sb-nope -- /bin/true" "rm sb-nope" "pause sb-nope" "halt sb-nope" \
		    "logs sb-nope" "events sb-nope" "diff sb-nope" "cp sb-nope:/etc/hostname -"; do
		rc=0
		# shellcheck disable=SC2086  # VERB is split as a user typed it
		out=$(set -- $verb; timeout 30 "$CORRAL" "$1" --socket "$SOCK" "${@:2}" 2>&1 < /dev/null) || rc=$?
		expect_eq "$verb: exit" "$rc" 125
		expect_contains "$verb: the daemon's word" "$out" 'no sandbox "sb-nope"'
		expect_contains "$verb: where to look" "$out" '(HTTP 404); `corral ls` lists the sandboxes'
	done
	code=$(api GET /v1/sandboxes/sb-nope)
	expect_eq "api: 404" "$code" 404
	expect_not_contains "api: body as it was" "$(body)" "corral ls"
	stop_daemon
}

# A docker user's options to exec and create: refused (nothing asked of
# the daemon: create's 2, exec's 125, as docker exec's, since its command
# may exit 2) with corral's spelling, not "unknown option" alone; docker's
# -it is -t here, and the refusal says so.
t_cli_docker_options() {
	local id verb args want rc
	start_daemon
	id=$(mksb)
	while IFS='|' read -r verb args want; do
		rc=0
		# shellcheck disable=SC2086  # ARGS is split as a user typed it
		if [ "$verb" = exec ]; then
			out=$("$CORRAL" exec --socket "$SOCK" "$id" $args -- /bin/sh -c 'echo the-command-ran' 2>&1 < /dev/null) || rc=$?
		else
			out=$("$CORRAL" create --socket "$SOCK" $args 2>&1 < /dev/null) || rc=$?
		fi
		expect_eq "$verb $args: exit" "$rc" "$([ "$verb" = exec ] && echo 125 || echo 2)"
		expect_not_contains "$verb $args: not run" "$out" the-command-ran
		expect_contains "$verb $args: corral's way" "$out" "$want"
		expect_contains "$verb $args: help" "$out" "see \`corral $verb --help\`"
	done <<-'EOF'
	exec|-e X=1|--env NAME=VALUE
	exec|-w /tmp|--cwd DIR
	exec|-d|--background
	exec|-it|-t alone
	exec|-u root|corral create --user root|agent
	create|--name web|--label name=VALUE
	create|-v /tmp:/x|--workspace DIR
	create|--memory 1G|"limits" section
	create|--rm|drop --rm
	EOF
	code=$(api GET /v1/sandboxes)
	expect_eq "no sandbox made" "$(jq 'len(v["sandboxes"])')" 1
	stop_daemon
}

# An exec's usage error is 125, never 2: its status is otherwise the
# command's own, and a command that exits 2 (grep's error, a shell's bad
# usage) read as corral's bad usage, or the other way round.  Every other
# verb's usage error is 2, as each --help says.
t_cli_usage_status() {
	local id rc
	start_daemon
	id=$(mksb)
	rc=0; "$CORRAL" exec --socket "$SOCK" "$id" -- /bin/sh -c 'exit 2' < /dev/null || rc=$?
	expect_eq "the command's 2" "$rc" 2
	for args in "--bogus $id -- /bin/true" "$id" "--timeout xx $id -- /bin/true" \
		    "-t --json $id -- /bin/true" "--tool-cal x $id -- /bin/true"; do
		# shellcheck disable=SC2086  # ARGS is split as a user typed it
		rc=0; out=$("$CORRAL" exec --socket "$SOCK" $args 2>&1 < /dev/null) || rc=$?
		expect_eq "exec $args: exit" "$rc" 125
		expect_contains "exec $args: said" "$out" 'see `corral exec --help`'
	done
	for verb in create cp pause resume halt rm ls logs events diff export snapshot; do
		rc=0; out=$("$CORRAL" "$verb" --socket "$SOCK" --bogus 2>&1 < /dev/null) || rc=$?
		expect_eq "$verb --bogus: exit" "$rc" 2
		expect_contains "$verb --help says it" "$("$CORRAL" "$verb" --help)" "2 bad usage"
	done
	expect_contains "exec --help says it" "$("$CORRAL" exec --help | tr '\n' ' ')" \
		"125 if corral could not run it: bad usage (not 2"
	stop_daemon
}

# With --json an error of the CLI's is one JSON object on stdout as well as
# its line on stderr: a program that parses stdout got nothing before (a
# usage error, the daemon's refusal, no daemon), and stdout that is not
# JSON.  The daemon's refusals keep its word and sentence; an answer the
# verb printed (a result whose command failed) is never followed by one.
t_cli_json_errors() {
	local id rc
	start_daemon
	id=$(mksb)
	# one object: ERROR DETAIL [HTTP_STATUS]
	json_error_is() {
		expect_eq "$1: one line" "$(wc -l < "$T/o")" 1
		expect_eq "$1: error" "$(pyjq 'v["error"]' "$T/o")" "$2"
		expect_contains "$1: detail" "$(pyjq 'v["detail"]' "$T/o")" "$3"
		expect_eq "$1: http_status" "$(pyjq 'v.get("http_status")' "$T/o")" "${4:-null}"
		expect_contains "$1: stderr too" "$(< "$T/e")" "corral: $3"
	}
	rc=0; "$CORRAL" ls --json x --socket "$SOCK" > "$T/o" 2> "$T/e" < /dev/null || rc=$?
	expect_eq "ls x: exit" "$rc" 2
	json_error_is "ls x" usage 'ls takes no operands'
	rc=0; "$CORRAL" exec --socket "$SOCK" --bogus --json "$id" -- /bin/true > "$T/o" 2> "$T/e" < /dev/null || rc=$?
	expect_eq "exec --bogus: exit" "$rc" 125
	json_error_is "exec --bogus" usage 'unknown option "--bogus"'
	rc=0; "$CORRAL" exec --socket "$SOCK" --json sb-nope -- /bin/true > "$T/o" 2> "$T/e" < /dev/null || rc=$?
	expect_eq "exec 404: exit" "$rc" 125
	json_error_is "exec 404" not_found 'no sandbox "sb-nope"' 404
	rc=0; "$CORRAL" pause --json --socket "$T/nothing" "$id" > "$T/o" 2> "$T/e" < /dev/null || rc=$?
	expect_eq "no daemon: exit" "$rc" 125
	json_error_is "no daemon" unreachable "no daemon socket at $T/nothing"
	rc=0; "$CORRAL" create --json --socket "$SOCK" --memory 1G > "$T/o" 2> "$T/e" < /dev/null || rc=$?
	expect_eq "create --memory: exit" "$rc" 2
	json_error_is "create --memory" usage 'unknown option "--memory"'
	# rm of many: each id's line, its answer or its error
	rc=0; "$CORRAL" rm --json --socket "$SOCK" sb-nope "$id" sb-nope2 > "$T/o" 2> "$T/e" < /dev/null || rc=$?
	expect_eq "rm: exit" "$rc" 125
	expect_eq "rm: lines" "$(wc -l < "$T/o")" 3
	expect_eq "rm: first" "$(sed -n 1p "$T/o" | json error)" not_found
	expect_eq "rm: second" "$(sed -n 2p "$T/o" | json id)" "$id"
	expect_eq "rm: third" "$(sed -n 3p "$T/o" | json detail)" 'no sandbox "sb-nope2"'
	# a result is the answer, whatever the command's status
	id=$(mksb)
	rc=0; "$CORRAL" exec --socket "$SOCK" --json "$id" -- /bin/sh -c 'exit 3' > "$T/o" 2> "$T/e" < /dev/null || rc=$?
	expect_eq "exit 3: exit" "$rc" 3
	expect_eq "exit 3: one line" "$(wc -l < "$T/o")" 1
	expect_eq "exit 3: the result" "$(json exit_code < "$T/o")" 3
	# the command's own --json is not corral's
	rc=0; "$CORRAL" exec --socket "$SOCK" "$id" -- /bin/sh -c 'exit 4' --json > "$T/o" 2> "$T/e" < /dev/null || rc=$?
	expect_eq "its --json: exit" "$rc" 4
	expect_eq "its --json: nothing of corral's" "$(cat "$T/o")" ""
	stop_daemon
}

# fake_daemon SOCK FILE: a socket that is no corral daemon; one
# connection, answered with FILE's bytes (a whole HTTP answer), within 30 s.
# Its pid in FPID.
fake_daemon() {
	$PY - "$1" "$2" <<'EOF2' &
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(1)
s.settimeout(30)
c, _ = s.accept()
c.settimeout(30)
c.recv(65536)
c.sendall(open(sys.argv[2], "rb").read())
c.close()
EOF2
	FPID=$!
	for _ in $(seq 100); do [ -S "$1" ] && break; nap 0.1; done
}

# A failure of the CLI's own had "failed" as its --json code while the
# daemon's carried its word: a program could not tell a daemon that is not
# there from a local file that is missing, a bad policy or a path refused.
# Each now has its word (docs/API.md, "The CLI's own errors"), the
# daemon's where it means the same, and no http_status: one test a class.
t_cli_json_local_codes() {
	local id rc
	start_daemon
	id=$(mksb)
	# local_code NAME EXIT CODE DETAIL: $T/o is one such object, no http_status
	local_code() {
		expect_eq "$1: exit" "$rc" "$2"
		expect_eq "$1: one line" "$(wc -l < "$T/o")" 1
		expect_eq "$1: error" "$(pyjq 'v["error"]' "$T/o")" "$3"
		expect_contains "$1: detail" "$(pyjq 'v["detail"]' "$T/o")" "$4"
		expect_eq "$1: no http_status" "$(pyjq 'v.get("http_status")' "$T/o")" null
	}
	# no daemon: nothing at the path, or a file that is not a socket
	rc=0; "$CORRAL" ls --json --socket "$T/nothing" > "$T/o" 2> "$T/e" < /dev/null || rc=$?
	local_code "no socket" 125 unreachable "no daemon socket at $T/nothing"
	: > "$T/plain"
	rc=0; "$CORRAL" rm --json --socket "$T/plain" "$id" > "$T/o" 2> "$T/e" < /dev/null || rc=$?
	local_code "not a socket" 125 unreachable "$T/plain (--socket) is not a socket"
	# a local file that is not there
	rc=0; "$CORRAL" cp --json --socket "$SOCK" "$T/missing" "$id":/tmp/x > "$T/o" 2> "$T/e" < /dev/null || rc=$?
	local_code "cp: no such local file" 125 not_found "$T/missing"
	rc=0; "$CORRAL" create --json --socket "$SOCK" --policy "$T/missing.json" > "$T/o" 2> "$T/e" < /dev/null || rc=$?
	local_code "create: no such policy file" 125 not_found "--policy $T/missing.json"
	# a local path refused: a symlink to nothing is not written through
	sbsh "$id" 'echo hi > /tmp/f' > /dev/null
	ln -s "$T/nowhere/x" "$T/dangling"
	rc=0; "$CORRAL" cp --json --socket "$SOCK" "$id":/tmp/f "$T/dangling" > "$T/o" 2> "$T/e" < /dev/null || rc=$?
	local_code "cp: a symlink to nothing" 125 forbidden "a symlink to nothing, not written through"
	[ -e "$T/nowhere" ] && fail "cp: $T/nowhere made"
	# a bad policy, here and in the daemon's create
	echo '{"limits": {"memory": "lots"}}' > "$T/bad.json"
	rc=0; "$CORRAL" run --json --policy "$T/bad.json" -- /bin/true > "$T/o" 2> "$T/e" < /dev/null || rc=$?
	local_code "run: a bad policy" 125 policy "limits.memory: not a size"
	echo '{"limits": ' > "$T/cut.json"
	rc=0; "$CORRAL" create --json --socket "$SOCK" --policy "$T/cut.json" > "$T/o" 2> "$T/e" < /dev/null || rc=$?
	local_code "create: policy not JSON" 125 policy "--policy $T/cut.json:"
	# a local directory as cp's SRC
	mkdir "$T/dir"
	rc=0; "$CORRAL" cp --json --socket "$SOCK" "$T/dir" "$id":/tmp/x > "$T/o" 2> "$T/e" < /dev/null || rc=$?
	local_code "cp: a local directory" 125 not_supported "$T/dir is a directory"
	# an answer that is not the daemon's JSON
	printf 'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 8\r\n\r\nnot json' > "$T/answer"
	fake_daemon "$T/fake.sock" "$T/answer"
	rc=0; timeout 30 "$CORRAL" ls --json --socket "$T/fake.sock" > "$T/o" 2> "$T/e" < /dev/null || rc=$?
	wait "$FPID"
	local_code "an answer not JSON" 125 bad_answer "the daemon's answer is not JSON"
	stop_daemon
}

# snapshot prints the daemon's "id": an answer without one went to
# puts(NULL) (a crash), one with a control to the terminal as it was.
t_cli_snapshot_id_is_the_daemons_checked() {
	local rc
	snapshot_answered() {	# snapshot_answered BODY: corral snapshot's rc, its out and err in $T
		printf 'HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s' \
			"${#1}" "$1" > "$T/answer"
		rm -f "$T/fake.sock"
		fake_daemon "$T/fake.sock" "$T/answer"
		rc=0; timeout 30 "$CORRAL" snapshot --socket "$T/fake.sock" sb1 > "$T/o" 2> "$T/e" < /dev/null || rc=$?
		wait "$FPID"
	}
	snapshot_answered '{"sandbox": "sb1"}'
	expect_eq "no id: exit" "$rc" 125
	expect_contains "no id: said" "$(< "$T/e")" "the daemon's answer holds no \"id\""
	snapshot_answered '{"id": "s\u001b]0;x"}'
	expect_eq "an id with ESC: exit" "$rc" 0
	expect_eq "an id with ESC: shown as text" "$(< "$T/o")" 's\x1b]0;x'
}

# corral events had no --json: its lines are the daemon's, but one it did
# not write as JSON (a socket that is no corral daemon) came out with
# \xNN in it, which no JSON parser takes, and its errors were no JSON.
# With --json every line is one JSON object in ASCII: the daemon's byte
# for byte (the chain still verifies), a name of the sandbox's with a
# newline, a quote, a control and invalid UTF-8 in it escaped on its line.
t_events_json() {
	local id rc code
	start_daemon
	id=$(mksb)
	# a program of that name makes a denied syscall: its exe is in the event
	code=$(ex "$id" "$(jbody command 'cp /usr/bin/unshare "$(printf "/tmp/a\nb\"c\033]2;owned\007d\377e")"; "$(printf "/tmp/a\nb\"c\033]2;owned\007d\377e")" -U true; echo done')")
	expect_code "the denied call" "$code" 200
	rc=0; "$CORRAL" events --json --socket "$SOCK" "$id" > "$T/o" 2> "$T/e" < /dev/null || rc=$?
	expect_eq "events --json: exit" "$rc" 0
	$PY - "$T/o" <<'EOF2' || fail "events --json: $(head -c 2000 "$T/o")"
import json, sys
raw = open(sys.argv[1], "rb").read()
assert raw.endswith(b"\n"), "no last newline"
exes = []
for line in raw.split(b"\n")[:-1]:
    assert all(0x20 <= b < 0x7f for b in line), ("not ASCII", line)
    o = json.loads(line)
    assert isinstance(o, dict) and "type" in o and "seq" in o, line
    if o["type"] == "syscall.denied":
        exes.append(o.get("exe"))
assert "/tmp/a\nb\"c\x1b]2;owned\x07d\ufffde" in exes, exes
EOF2
	# the whole log, --json or not, is the same and verifies
	"$CORRAL" events --json --socket "$SOCK" > "$T/all.json" 2> "$T/e" < /dev/null || fail "events --json: $(cat "$T/e")"
	"$CORRAL" events --socket "$SOCK" > "$T/all" 2> "$T/e" < /dev/null || fail "events: $(cat "$T/e")"
	cmp -s "$T/all.json" "$T/all" || fail "events --json is not the daemon's lines"
	"$CORRAL" audit verify "$T/all.json" > "$T/v" 2>&1 || fail "audit verify: $(cat "$T/v")"
	# an error is JSON too
	rc=0; "$CORRAL" events --json --socket "$SOCK" sb-nope > "$T/o" 2> "$T/e" < /dev/null || rc=$?
	expect_eq "no such sandbox: exit" "$rc" 125
	expect_eq "no such sandbox: error" "$(pyjq 'v["error"]' "$T/o")" not_found
	stop_daemon
}

# A socket that is no corral daemon sends "events" with a raw ESC and BEL,
# invalid UTF-8, a C1 control, a line that is no JSON: with --json each is
# still one JSON object a line in ASCII (jq -c reads them), a JSON line's
# raw characters escaped, one that no JSON parser takes (raw controls,
# invalid UTF-8) said as a bad_answer holding its text, and the verb ends 125.
t_events_json_of_a_hostile_daemon() {
	local rc
	$PY - "$T/answer" <<'EOF2'
import sys
body = (b'{"seq":1,"type":"x\x1b]2;owned\x07","path":"a\xffb"}\n'
        b'{"seq":2,"type":"plain"}\n'
        b'not "json\x1b[2J\n'
        b'{"seq":3,"type":"\xc2\x9b2J"}\n'
        b'{"seq":4,"name":"caf\xc3\xa9"}\n')
open(sys.argv[1], "wb").write(b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\n"
                              b"Content-Length: %d\r\n\r\n" % len(body) + body)
EOF2
	fake_daemon "$T/fake.sock" "$T/answer"
	rc=0; timeout 30 "$CORRAL" events --json --socket "$T/fake.sock" > "$T/o" 2> "$T/e" < /dev/null || rc=$?
	wait "$FPID"
	expect_eq "exit" "$rc" 125
	$PY - "$T/o" <<'EOF2' || fail "not one JSON object a line: $(od -c "$T/o" | head -20)"
import json, sys
raw = open(sys.argv[1], "rb").read()
lines = raw.split(b"\n")
assert lines[-1] == b"", "no last newline"
v = []
for line in lines[:-1]:
    assert all(0x20 <= b < 0x7f for b in line), ("not ASCII", line)
    v.append(json.loads(line))
bad = {"error": "bad_answer", "detail": "a line of the daemon's events that is not a JSON object"}
want = [dict(bad, line='{"seq":1,"type":"x\\x1b]2;owned\\x07","path":"a\\xffb"}'),
        {"seq": 2, "type": "plain"},
        dict(bad, line='not "json\\x1b[2J'),
        {"seq": 3, "type": "\x9b2J"},
        {"seq": 4, "name": "caf\u00e9"},
        {"error": "bad_answer", "detail": "a line of the daemon's events was not a JSON object (said as a bad_answer line)"}]
assert v == want, v
assert lines[3] == b'{"seq":3,"type":"\\u009B2J"}', lines[3]
EOF2
	expect_contains "said on stderr" "$(< "$T/e")" "a line of the daemon's events was not a JSON object"
}

# `corral cp ID:/FILE -` on a terminal wrote the sandbox's bytes to it raw:
# a file's OSC 52 set the operator's clipboard, its OSC 0 the window's
# title, its CSI 2 J cleared the screen.  On a terminal the file is shown
# as a patch is (controls as \xNN, line breaks and tabs kept); to a pipe
# its bytes are unchanged.
t_cp_file_to_a_terminal() {
	local id
	start_daemon
	id=$(mksb)
	printf 'one\033]52;c;b3duZWQ=\007\033[2J\ttwo\n\302\233three\377\n' > "$T/f"
	"$CORRAL" cp --socket "$SOCK" "$T/f" "$id":/tmp/f > /dev/null 2> "$T/e" < /dev/null || fail "cp in: $(cat "$T/e")"
	"$CORRAL" cp --socket "$SOCK" "$id":/tmp/f - > "$T/back" 2> "$T/e" < /dev/null || fail "cp out: $(cat "$T/e")"
	cmp -s "$T/f" "$T/back" || fail "to a file: not the bytes: $(od -c "$T/back" | head)"
	/usr/bin/python3 "$HERE/ptyrun.py" -- "$CORRAL" cp --socket "$SOCK" "$id":/tmp/f - > "$T/r"
	expect_eq "to a terminal: exit" "$(json exit < "$T/r")" 0
	$PY - "$T/r" <<'EOF2' || fail "to a terminal: $(cat "$T/r")"
import json, sys
out = json.load(open(sys.argv[1]))["output"]
assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out, repr(out)
want = "one\\x1b]52;c;b3duZWQ=\\x07\\x1b[2J\ttwo\r\n\\xc2\\x9bthree\\xff\r\n"
assert out == want, repr(out)
EOF2
	stop_daemon
}

# A directory is copied as docker cp users expect it to be: as a tar,
# given ("-" as DST) and taken ("-" as SRC, into a DST that ends in "/"),
# through the daemon's archive; named, with that way, when it is asked
# for as a file.  It was "not a regular file; one file is copied at a
# time" one way and "not a regular file (HTTP 400)" the other.
t_cp_directory() {
	local id rc
	start_daemon
	id=$(mksb)
	mkdir -p "$T/tree/sub"
	echo one > "$T/tree/a"
	echo two > "$T/tree/sub/b"
	rc=0; out=$("$CORRAL" cp --socket "$SOCK" "$T/tree" "$id":/tmp/in 2>&1 < /dev/null) || rc=$?
	expect_eq "dir in: exit" "$rc" 125
	expect_contains "dir in: said" "$out" "$T/tree is a directory: cp copies one file; \`tar -C $T/tree -cf - . | corral cp - $id:/tmp/in/\` unpacks it there"
	rc=0; tar -C "$T/tree" -cf - . | "$CORRAL" cp --json --socket "$SOCK" - "$id":/tmp/in/ > "$T/o" 2> "$T/e" || rc=$?
	expect_eq "tar in: exit" "$rc" 0
	expect_eq "tar in: entries" "$(json entries < "$T/o")" 4
	expect_eq "tar in: a file of it" "$("$CORRAL" cp --socket "$SOCK" "$id":/tmp/in/sub/b - < /dev/null)" two
	rc=0; out=$("$CORRAL" cp --socket "$SOCK" "$id":/tmp/in "$T/back" 2>&1 < /dev/null) || rc=$?
	expect_eq "dir out: exit" "$rc" 125
	expect_contains "dir out: said" "$out" "$id:/tmp/in is a directory: cp copies one file; \`corral cp $id:/tmp/in - > FILE.tar\` writes it as a tar"
	[ -e "$T/back" ] && fail "dir out: $T/back made"
	rc=0; "$CORRAL" cp --socket "$SOCK" "$id":/tmp/in - > "$T/back.tar" 2> "$T/e" < /dev/null || rc=$?
	expect_eq "tar out: exit" "$rc" 0
	mkdir "$T/back"
	tar -C "$T/back" -xf "$T/back.tar" || fail "tar out: not a tar"
	diff -r "$T/tree" "$T/back" > /dev/null || fail "tar out: not the tree: $(diff -r "$T/tree" "$T/back")"
	# a tar is no copy on a terminal, and its names and bytes are the sandbox's
	/usr/bin/python3 "$HERE/ptyrun.py" -- "$CORRAL" cp --socket "$SOCK" "$id":/tmp/in - > "$T/r"
	expect_eq "tar to a terminal: exit" "$(json exit < "$T/r")" 2
	expect_contains "tar to a terminal: said" "$(json output < "$T/r")" "its tar goes to a file or a pipe, not a terminal"
	# a file is still a file, either way
	rc=0; out=$("$CORRAL" cp --socket "$SOCK" "$id":/tmp/in/a - 2>&1 < /dev/null) || rc=$?
	expect_eq "a file out" "$rc:$out" 0:one
	rc=0; "$CORRAL" cp --socket "$SOCK" --json "$id":/tmp/in "$T/back2" > "$T/o" 2> /dev/null < /dev/null || rc=$?
	expect_eq "--json dir out: error" "$(json error < "$T/o")" not_supported
	stop_daemon
}

# `corral cp ID:/DIR -` learned that DIR is a directory by listing it
# whole, only to ask for its archive next (100000 names: a 15.8 MB
# listing, 0.45 s of the copy's 1.7), and the refusal of `cp ID:/DIR
# FILE` likewise: the daemon's 400 for a directory asked for as a file
# says "type": "dir" now, and no listing is asked for (strace: no list=1
# request).  A device is still refused with the daemon's words.
t_cp_directory_not_listed() {
	local id rc
	start_daemon
	id=$(mksb)
	"$CORRAL" exec --socket "$SOCK" "$id" -- /bin/sh -c 'mkdir /tmp/d && echo x > /tmp/d/a' ||
		fail "the directory not made"
	# LeakSanitizer cannot work under ptrace: the rest of ASan does
	rc=0; ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" strace -f \
		-e trace=sendmsg,sendto,write -s 300 -o "$T/st" "$CORRAL" cp \
		--socket "$SOCK" "$id":/tmp/d - > "$T/d.tar" 2> "$T/e" < /dev/null || rc=$?
	expect_eq "tar out: exit" "$rc" 0
	expect_contains "tar out: its file" "$(tar -tf "$T/d.tar")" a
	grep -q 'list=1' "$T/st" && fail "tar out: listed: $(grep -o 'GET [^ ]*list=1' "$T/st")"
	rc=0; ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" strace -f \
		-e trace=sendmsg,sendto,write -s 300 -o "$T/st" "$CORRAL" cp \
		--socket "$SOCK" "$id":/tmp/d "$T/back" 2> "$T/e" < /dev/null || rc=$?
	expect_eq "dir out: exit" "$rc" 125
	expect_contains "dir out: said" "$(< "$T/e")" "$id:/tmp/d is a directory: cp copies one file"
	grep -q 'list=1' "$T/st" && fail "dir out: listed: $(grep -o 'GET [^ ]*list=1' "$T/st")"
	rc=0; "$CORRAL" cp --socket "$SOCK" "$id":/dev/null - > /dev/null 2> "$T/e" < /dev/null || rc=$?
	expect_eq "a device: exit" "$rc" 125
	expect_contains "a device: said" "$(< "$T/e")" "/dev/null: not a regular file"
	stop_daemon
}

# exec's reader gone (`corral exec ... | head`): the caller's choice, as
# for any filter: exit 141 (128 + SIGPIPE), nothing said, and the call
# does not run on (a `yes` writing for ever is gone).  It was exit 125
# and "Broken pipe" twice.  Output that cannot be written elsewhere (ulimit
# -f) is said once, exit 125, streamed or not: it was said twice.
t_exec_reader_gone() {
	local id pst
	start_daemon
	id=$(mksb)
	"$CORRAL" exec --socket "$SOCK" "$id" -c 'yes' 2> "$T/e" | head -c 2 > /dev/null
	pst=("${PIPESTATUS[@]}")
	expect_eq "| head: exit" "${pst[0]}" 141
	expect_eq "| head: nothing said" "$(cat "$T/e")" ""
	wait_gone "yes, its reader gone," 10 sbsh "$id" 'pgrep -x yes'
	"$CORRAL" exec --no-stream --socket "$SOCK" "$id" -c 'seq 100000' 2> "$T/e" | head -c 2 > /dev/null
	pst=("${PIPESTATUS[@]}")
	expect_eq "--no-stream | head: exit" "${pst[0]}" 141
	expect_eq "--no-stream | head: nothing said" "$(cat "$T/e")" ""
	for mode in streamed --no-stream; do
		rc=0
		(ulimit -f 1; exec "$CORRAL" exec ${mode#streamed} --socket "$SOCK" "$id" -c 'seq 100000') \
			> "$T/o" 2> "$T/e" || rc=$?
		expect_eq "ulimit -f, $mode: exit" "$rc" 125
		expect_eq "ulimit -f, $mode: said once" "$(cat "$T/e")" \
			"corral: writing the command's output: File too large"
	done
	stop_daemon
}

# Over the unix socket the verbs speak HTTP themselves (sockhttp.c): libcurl
# and the thirty libraries it loads are left out of their start.  An exec
# in flight shows what its process mapped.
t_socket_client_loads_no_libcurl() {
	local id pid i maps
	start_daemon
	id=$(mksb)
	"$CORRAL" exec --socket "$SOCK" "$id" -c 'echo started; sleep 30' > "$T/o" 2> "$T/e" &
	pid=$!
	for i in $(seq 100); do grep -q started "$T/o" && break; sleep 0.1; done
	maps=$(cat "/proc/$pid/maps" 2>/dev/null)
	kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true
	expect_eq "its output came" "$(cat "$T/o")" started
	expect_contains "it was mapped" "$maps" "libc.so"
	expect_not_contains "libcurl" "$maps" "libcurl"
	expect_not_contains "OpenSSL" "$maps" "libssl"
	stop_daemon
}

t_command_without_the_shell() {
	start_daemon
	id=$(mksb)
	sbsh "$id" 'printf "echo from a script\n" > /workspace/noshebang; chmod +x /workspace/noshebang; mkdir -p /workspace/real; ln -s real /workspace/link' >/dev/null
	# one Python for every line: its requests go over $SOCK itself
	$PY - "$SOCK" "$id" > "$T/cmp" <<'PYEOF' || fail "comparison: $(tail -3 "$T/cmp")"
import http.client, json, socket, sys

class Unix(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=60)
        self.path = path
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(60)
        self.sock.connect(self.path)

conn, sid = Unix(sys.argv[1]), sys.argv[2]
def run(body):
    conn.request("POST", f"/v1/sandboxes/{sid}/exec", body=json.dumps(body))
    r = conn.getresponse()
    v = json.loads(r.read())
    assert r.status == 200, (r.status, v)
    return sorted(v["stdout"].split("\n")), v["stderr"], v["exit_code"]

LINES = r"""
/usr/bin/env
env @@ {"env": {"PWD": "/"}}
env @@ {"env": {"PWD": "/workspace/link"}, "cwd": "/workspace/link"}
env @@ {"cwd": "/workspace/link"}
env @@ {"env": {"IFS": ":", "OPTIND": "3"}}
env @@ {"env": {"PPID": "5"}}
env @@ {"env": {"PATH": "/usr/bin"}}
env @@ {"env": {"A-B": "1"}}
ls -d /workspace /tmp
printf '%s|' a 'b c' "d e" '' x''y
/usr/bin/printf '%s|' a 'b c' "d e" '' x''y
'/usr/bin/printf' "" y
no-such-command arg
/no/such/file
/etc/passwd
/workspace
./noshebang
noshebang @@ {"env": {"PATH": "/workspace:/usr/bin:/bin"}}
ls /no/such/dir
echo $HOME "$PATH"
cat /proc/self/cmdline
FOO=1 env
sh -c 'exit 7'
cd /tmp && env
cd /workspace/link && env
cd link/.. && env
cd .. && env @@ {"cwd": "/workspace/link"}
cd real/../link && /bin/pwd -L
cd link && /bin/pwd -L
cd //tmp && env
cd /no/such/dir && ls
cd noshebang && ls
cd /workspace && ls -d real 2>&1
cd real && env @@ {"env": {"CDPATH": "/tmp"}}
ls /no/such/dir 2>&1
cd /tmp && no-such-command 2>&1
cd /tmp && ls /no/such/dir  2>&1
"""
n = bad = 0
for line in LINES.strip().split("\n"):
    cmd, _, extra = line.partition(" @@ ")
    o = json.loads(extra or "{}")
    fast = run(dict(o, command=cmd))
    shell = run(dict(o, argv=["/bin/sh", "-c", cmd]))
    n += 1
    if fast != shell:
        bad += 1
        print(f"{line}: without the shell {fast!r}, with it {shell!r}")
print(f"{n} lines, {bad} differ")
sys.exit(1 if bad or n < 20 else 0)
PYEOF
	grep -v ' lines, 0 differ$' "$T/cmp" | while IFS= read -r l; do fail "$l"; done
	# taken: its parent is the sandbox's init; left to the shell: sh
	expect_eq "simple line" "$(sbsh "$id" 'grep PPid /proc/self/status')" "PPid:	1"
	expect_eq "cd and 2>&1" "$(sbsh "$id" 'cd /tmp && grep PPid /proc/self/status 2>&1')" "PPid:	1"
	out=$(sbsh "$id" 'grep PPid /proc/self/status; true')
	[ "$out" != "PPid:	1" ] || fail "a compound line ran without the shell: $out"
	# a background process started by a simple line is the command itself
	code=$(api POST "/v1/sandboxes/$id/processes" -d '{"command": "sleep 31"}')
	expect_code "background" "$code" 201
	pid=$(jq 'v["pid"]')
	expect_eq "its pid is the command's" "$(sbsh "$id" "cat /proc/$pid/comm")" sleep
	code=$(api GET "/v1/sandboxes/$id/processes/$pid")
	expect_eq "its recorded argv" "$(jq 'v["argv"]')" '["/bin/sh", "-c", "sleep 31"]'
	code=$(api DELETE "/v1/sandboxes/$id/processes/$pid")
	expect_code "kill" "$code" 200
	# a command killed by a signal: exit code 128 + N as from the shell,
	# and the signal named
	code=$(ex "$id" '{"command": "python3 -c \"import os; os.kill(os.getpid(), 11)\""}')
	expect_eq "killed" "$(jq 'v["status"]') $(jq 'v["signal"]') $(jq 'v["exit_code"]')" "signaled 11 139"
	stop_daemon
}

t_exec_timeout() {
	start_daemon
	id=$(mksb)
	t0=$(now_ms)
	code=$(ex "$id" '{"command": "sleep 30 & sleep 30", "timeout_seconds": 1, "tool_call_id": "slow"}')
	ms=$(( $(now_ms) - t0 ))
	expect_code "timeout" "$code" 200
	expect_eq "status" "$(jq 'v["status"]')" timeout
	expect_eq "exit code" "$(jq 'v["exit_code"]')" 124
	expect_contains "reason" "$(jq 'v["reason"]')" "timeout of 1 s"
	# not before its time, and long before the 30 s the command wanted
	[ "$ms" -ge 900 ] && [ "$ms" -lt 20000 ] || fail "the 1 s timeout answered after $ms ms"
	hp=$(host_pid "$id" slow)
	wait_gone "the timed-out call's process" 5 alive_pid "$hp"
	out=$(sbsh "$id" 'ps -eo args')
	expect_not_contains "sleep left" "$out" "sleep 30"
	# a fraction of a second
	t0=$(now_ms)
	ex "$id" '{"command": "sleep 30", "timeout_seconds": 0.3}' >/dev/null
	ms=$(( $(now_ms) - t0 ))
	expect_eq "0.3 s" "$(jq 'v["status"]')" timeout
	[ "$ms" -lt 20000 ] || fail "a 0.3 s timeout took $ms ms"
	stop_daemon
}

# DELETE while calls run: each caller gets its answer, the processes go,
# and the daemon lives on (what the destroy left armed must not fire on
# freed memory: ASan builds catch that).
t_delete_during_exec() {
	start_daemon
	id=$(mksb '{"idle_freeze_ms": 0}')
	curl -sS --max-time 30 --unix-socket "$SOCK" -X POST -o "$T/cut" \
		-d '{"command": "sleep 38", "tool_call_id": "cut"}' \
		"http://localhost/v1/sandboxes/$id/exec" 2>/dev/null &
	c1=$!
	curl -sS -N --max-time 30 --unix-socket "$SOCK" -X POST -o "$T/cut-stream" \
		-d '{"command": "sleep 39", "tool_call_id": "cut-stream", "stream": true}' \
		"http://localhost/v1/sandboxes/$id/exec" 2>/dev/null &
	c2=$!
	# until both have started (30 s at most, or a caller ended): two
	# process starts and their moves, which 5 s did not bound on a host
	# with three sanitizer lanes (a daemon held 6 s here: "no exec.start
	# event for cut")
	i=0
	while [ $i -lt 300 ] && [ "$(grep -c '"type":"exec.start"' "$STATE/audit.jsonl")" -lt 2 ] &&
		kill -0 "$c1" "$c2" 2> /dev/null; do
		sleep 0.1; i=$((i + 1))
	done
	h1=$(host_pid "$id" cut)
	h2=$(host_pid "$id" cut-stream)
	code=$(api DELETE "/v1/sandboxes/$id")
	expect_code "delete" "$code" 200
	wait "$c1" || true
	wait "$c2" || true
	expect_eq "the call's answer" "$(jq 'v["status"]' "$T/cut") $(jq 'v["reason"]' "$T/cut")" "error the sandbox was destroyed while the call ran: destroyed by request"
	expect_contains "the stream's end" "$(tail -1 "$T/cut-stream")" destroyed
	wait_gone "the cut calls" 5 alive_pid "$h1" "$h2"
	sleep 0.5
	code=$(api GET /v1/health)
	expect_code "the daemon after the delete" "$code" 200
	stop_daemon
}

# client_gone ID BODY CALL: a caller of box ID's exec that goes away once
# its call CALL has started (its exec.start in the audit log, 10 s at
# most), not after a time: one that left after 1 s found no exec.start
# when the daemon was that slow to start the call or to log it
client_gone() {
	local c i=0
	curl -sS -N --max-time 60 --unix-socket "$SOCK" -X POST -d "$2" -o /dev/null \
		"http://localhost/v1/sandboxes/$1/exec" 2> /dev/null &
	c=$!
	while [ $i -lt 100 ] && ! grep '"type":"exec.start"' "$STATE/audit.jsonl" |
		grep -q "\"call\":\"$3\""; do
		sleep 0.1
		i=$((i + 1))
	done
	kill "$c" 2> /dev/null || true
	wait "$c" 2> /dev/null || true
}

# A caller that goes away takes its call with it, streamed or not.
t_exec_client_gone() {
	start_daemon
	id=$(mksb)
	client_gone "$id" '{"command": "sleep 36", "stream": true, "tool_call_id": "gone-streamed"}' gone-streamed
	hp=$(host_pid "$id" gone-streamed)
	wait_gone "the streamed call whose caller left" 5 alive_pid "$hp"
	client_gone "$id" '{"command": "sleep 31", "tool_call_id": "gone"}' gone
	hp=$(host_pid "$id" gone)
	wait_gone "the call whose caller left" 5 alive_pid "$hp"
	stop_daemon
}

alive_pid() {	# alive_pid PID...: those alive
	local p
	for p; do alive "$p" && echo "$p"; done
	return 0
}

t_exec_stream() {
	start_daemon
	id=$(mksb)
	curl -sS -N --max-time 30 --unix-socket "$SOCK" -X POST -D "$T/headers" \
		-d '{"command": "echo a; sleep 1; echo b; echo e >&2; exit 4", "stream": true, "tool_call_id": "s-1"}' \
		"http://localhost/v1/sandboxes/$id/exec" |
		while IFS= read -r line; do printf '%s %s\n' "$EPOCHREALTIME" "$line"; done > "$T/stream"
	expect_contains "content type" "$(grep -i '^content-type:' "$T/headers")" application/x-ndjson
	$PY - "$T/stream" <<'EOF' || fail "stream: $(< "$T/stream")"
import json, sys
lines = [l.split(" ", 1) for l in open(sys.argv[1]).read().splitlines()]
ev = [(float(t), json.loads(j)) for t, j in lines]
types = [e["type"] for _, e in ev]
assert types[0] == "start", types
assert types[-1] == "end" and types.count("end") == 1, types
assert set(types) <= {"start", "stdout", "stderr", "end"}, types
assert ev[0][1]["tool_call_id"] == "s-1" and ev[0][1]["pid"] > 0, ev[0]
out = "".join(e["data"] for _, e in ev if e["type"] == "stdout")
err = "".join(e["data"] for _, e in ev if e["type"] == "stderr")
assert out == "a\nb\n", out
assert err == "e\n", err
res = ev[-1][1]["result"]
assert res["exit_code"] == 4 and res["stdout"] == "a\nb\n" and res["tool_call_id"] == "s-1", res
t_a = next(t for t, e in ev if e["type"] == "stdout" and e["data"].startswith("a"))
t_end = ev[-1][0]
assert t_end - t_a >= 0.7, "the first output came %.3f s before the end" % (t_end - t_a)
EOF
	stop_daemon
}

# A client that reads slower than the command writes: the command waits
# (its output pipe fills), the daemon does not buffer for it, and nothing
# is lost once the client reads.
t_exec_stream_slow_client() {
	start_daemon
	id=$(mksb)
	slow_stream_client "$id" 60 unix || fail "slow stream client"
	stop_daemon
}

# The same over https: there the connection's write callback runs deferred,
# and a stale one must not let the call's output past the hold.
t_tcp_tls_stream_slow_client() {
	front_test
	local port token id
	start_tls_daemon || return 1
	id=$(mksb)
	slow_stream_client "$id" 16 tls "$port" "$T/cert.pem" "$T/token" ||
		fail "slow stream client over https"
	stop_daemon
}

# slow_stream_client ID MB unix | tls PORT CA TOKENFILE: an exec of MB
# million bytes, not read for 1.5 s, then all read.  Meanwhile the command
# must be waiting (asked over the unix socket) and, over the unix socket,
# the daemon may not grow.
slow_stream_client() {
	$PY - "$DPID" "$SOCK" "$@" <<'EOF'
import http.client, json, socket, ssl, sys, time
dpid, sock, sid, mb, how = sys.argv[1:3] + [sys.argv[3], int(sys.argv[4]), sys.argv[5]]
def rss():
    return int(open("/proc/%s/status" % dpid).read().split("VmRSS:")[1].split()[0])
class Unix(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(sock)
def finished():
    c = Unix("x", timeout=20)
    c.request("POST", "/v1/sandboxes/%s/exec" % sid,
              json.dumps({"command": "cat /tmp/slow.done 2>/dev/null || echo waiting"}))
    return json.loads(c.getresponse().read())["stdout"].strip()
n = mb * 1000 * 1000
body = json.dumps({"argv": ["sh", "-c", "head -c %d /dev/zero | tr '\\0' x; echo done > /tmp/slow.done" % n],
                   "stream": True, "timeout_seconds": 60})
auth = ""
if how == "unix":
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock)
else:
    ctx = ssl.create_default_context(cafile=sys.argv[7])
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", int(sys.argv[6]))),
                        server_hostname="localhost")
    auth = "Authorization: Bearer %s\r\n" % open(sys.argv[8]).read()
s.sendall(("POST /v1/sandboxes/%s/exec HTTP/1.1\r\nHost: x\r\n%sContent-Length: %d\r\n\r\n%s"
           % (sid, auth, len(body), body)).encode())
before = rss()
time.sleep(1.5)			# not reading
grown = rss() - before
# unbounded, it grew 140 MB a second; ASan alone adds some 20 MB (over TLS
# 50 MB: there only the command's wait tells)
assert how != "unix" or grown < 64 * 1024, \
    "the daemon grew by %d kB for a client that does not read" % grown
# unheld, it wrote all of it in well under a second
state = finished()
assert state == "waiting", "the command did not wait for its reader: %r" % state
s.settimeout(60)
# read into one scratch buffer, de-chunk by views: a fresh 1 MiB object a
# recv, and the copies of a split, slices and a join, were 2.7 s of this
# Python's CPU for 60 MB, more than the daemon's
data, scratch = bytearray(), memoryview(bytearray(1 << 20))
while not data.endswith(b"\r\n0\r\n\r\n"):
    k = s.recv_into(scratch)
    assert k, "the stream ended early"
    data += scratch[:k]
out, i = bytearray(), data.index(b"\r\n\r\n") + 4	# de-chunk, then NDJSON
view = memoryview(data)
while True:
    j = data.index(b"\r\n", i)
    size = int(data[i:j], 16)
    if size == 0:
        break
    out += view[j + 2:j + 2 + size]
    i = j + 2 + size + 2
view.release()
ev = [json.loads(l) for l in out.splitlines()]
got = sum(len(e["data"]) for e in ev if e["type"] == "stdout")
assert got == n, "got %d of %d bytes" % (got, n)
assert finished() == "done", "the command's mark is not seen once it ended"
assert ev[-1]["type"] == "end" and ev[-1]["result"]["exit_code"] == 0, ev[-1]["type"]
EOF
}

# ---- background processes --------------------------------------------------

t_background_process() {
	start_daemon
	id=$(mksb)
	code=$(api POST "/v1/sandboxes/$id/processes" -d '{"command": "i=0; while :; do echo tick$i; i=$((i+1)); sleep 0.1; done", "tool_call_id": "bg-1"}')
	expect_code "start" "$code" 201
	pid=$(jq 'v["pid"]')
	[ "$pid" -gt 1 ] || fail "pid $pid"
	expect_eq "call id" "$(jq 'v["tool_call_id"]')" bg-1
	code=$(api GET "/v1/sandboxes/$id/processes")
	expect_code "list" "$code" 200
	expect_eq "listed" "$(jq "[(p['pid'], p['state'], p['tool_call_id']) for p in v['processes']]")" "[[$pid, \"running\", \"bg-1\"]]"
	i=0
	while [ $i -lt 50 ]; do
		api GET "/v1/sandboxes/$id/processes/$pid" >/dev/null
		case "$(jq 'v["stdout"]')" in *tick3*) break ;; esac
		sleep 0.1; i=$((i + 1))
	done
	expect_contains "output" "$(jq 'v["stdout"]')" "tick0
tick1
tick2
tick3"
	expect_eq "argv" "$(jq 'v["argv"][:2]')" '["/bin/sh", "-c"]'
	# other calls run while it does
	out=$(sbsh "$id" "ps -eo pid,args")
	expect_contains "seen by ps" "$out" "while :"
	expect_eq "sandbox running" "$(sbget "$id" 'v["running"] >= 1 and v["processes"] == 1')" true
	hp=$(host_pid "$id" bg-1)
	alive "$hp" || fail "no host process $hp"
	code=$(api DELETE "/v1/sandboxes/$id/processes/$pid")
	expect_code "kill" "$code" 200
	expect_eq "killed" "$(jq 'v["state"]') $(jq 'v["result"]["signal"]')" "exited 9"
	out=$(sbsh "$id" "test -e /proc/$pid && echo alive || echo gone; ps -eo args")
	expect_contains "gone inside" "$out" gone
	expect_not_contains "gone from ps" "$out" "while :"
	wait_gone "the killed process on the host" 5 alive_pid "$hp"
	code=$(api DELETE "/v1/sandboxes/$id/processes/$pid")
	expect_code "kill again" "$code" 200
	# one that ends by itself keeps its result and output
	code=$(api POST "/v1/sandboxes/$id/processes" -d '{"argv": ["/bin/sh", "-c", "echo done; echo oops >&2; exit 5"]}')
	expect_code "short" "$code" 201
	pid2=$(jq 'v["pid"]')
	i=0
	while [ $i -lt 50 ]; do
		api GET "/v1/sandboxes/$id/processes/$pid2" >/dev/null
		[ "$(jq 'v["state"]')" = exited ] && break
		sleep 0.1; i=$((i + 1))
	done
	expect_eq "ended" "$(jq 'v["state"]') $(jq 'v["result"]["exit_code"]')" "exited 5"
	expect_eq "its output" "$(jq 'v["stdout"]')|$(jq 'v["stderr"]')" "done|oops"
	code=$(api GET "/v1/sandboxes/$id/processes")
	expect_eq "both listed" "$(jq 'sorted(p["pid"] for p in v["processes"])')" "[$pid, $pid2]"
	code=$(api GET "/v1/sandboxes/$id/processes/99999")
	expect_error "unknown pid" "$code" 404 not_found
	# a process still running when its sandbox goes is killed with it
	code=$(api POST "/v1/sandboxes/$id/processes" -d '{"command": "sleep 32", "tool_call_id": "bg-2"}')
	expect_code "third" "$code" 201
	hp=$(host_pid "$id" bg-2)
	alive "$hp" || fail "no host process $hp"
	code=$(api DELETE "/v1/sandboxes/$id")
	expect_code "delete sandbox" "$code" 200
	wait_gone "a process of the deleted sandbox" 5 alive_pid "$hp"
	stop_daemon
}

# wait_for_file FILE: a shell loop inside a sandbox until FILE is there (30 s
# at most: a test that fails must not hang on it).
wait_for_file() {
	echo "i=0; while [ ! -e $1 ] && [ \$i -lt 600 ]; do sleep 0.05; i=\$((i+1)); done"
}

# A client that gives a tool_call_id a running call has: refused (409,
# the id named), never two calls under one name in the record, each
# denial in the result of the call that made it.  A client's id that is
# the name the daemon would generate next is not taken twice either.
t_tool_call_id_in_use() {
	local pid code gen
	start_daemon
	id=$(mksb)
	code=$(api POST "/v1/sandboxes/$id/processes" -d "$(jbody tool_call_id dup command \
		"$(wait_for_file /tmp/go); unshare -U true; touch /tmp/a-denied; echo A")")
	expect_code "the first call" "$code" 201
	pid=$(jq 'v["pid"]')
	# were it taken, this one would run while the first is denied
	code=$(ex "$id" "$(jbody tool_call_id dup command \
		"touch /tmp/go; $(wait_for_file /tmp/a-denied); echo B")")
	expect_error "the same id, as an exec" "$code" 409 conflict
	expect_contains "names the id" "$(jq 'v["detail"]')" '"dup" is in use'
	expect_eq "no denial of the first in a result of the second" \
		"$(jq 'v.get("denials")' 2>/dev/null)" null
	code=$(api POST "/v1/sandboxes/$id/processes" -d '{"tool_call_id": "dup", "command": "true"}')
	expect_error "the same id, as a process" "$code" 409 conflict
	sbsh "$id" "touch /tmp/go" > /dev/null
	code=$(api GET "/v1/sandboxes/$id/processes/$pid/wait?timeout_seconds=60")
	expect_code "wait" "$code" 200
	expect_eq "the first ended" "$(jq 'v["state"]') $(jq 'v["result"]["stdout"]')" "exited A"
	expect_eq "its denial is its own" \
		"$(jq '[d["syscall"] for d in v["result"]["denials"]]')" '["unshare"]'
	expect_eq "one call named dup in the record" \
		"$(grep -c '"type":"exec.start".*"call":"dup"' "$STATE/audit.jsonl")" 1
	# the daemon's names for calls without one: SANDBOX-N, N counting calls
	code=$(ex "$id" '{"argv": ["true"]}')
	gen=$(jq 'v["tool_call_id"]')
	gen="$id-$(( ${gen##*-} + 2 ))"
	code=$(api POST "/v1/sandboxes/$id/processes" -d "$(jbody tool_call_id "$gen" command \
		"$(wait_for_file /tmp/squat-end)")")
	expect_code "a process named as the next generated id" "$code" 201
	pid=$(jq 'v["pid"]')
	code=$(ex "$id" '{"command": "touch /tmp/squat-end"}')
	expect_code "a call without an id" "$code" 200
	[ "$(jq 'v["tool_call_id"]')" != "$gen" ] ||
		fail "the daemon named a call $gen, as a running call is named"
	expect_eq "its name is the generated one, made unique" "$(jq 'v["tool_call_id"]')" "$gen-2"
	api GET "/v1/sandboxes/$id/processes/$pid/wait?timeout_seconds=60" > /dev/null
	stop_daemon
}

# An id may be given again once its call has ended (an agent's retry): a
# denial of the ended call's background process is the ended call's, in
# the record ("background": true), not in the new call's result.
t_tool_call_id_reused_after_end() {
	local code
	start_daemon
	id=$(mksb)
	code=$(ex "$id" "$(jbody tool_call_id retry command \
		"($(wait_for_file /tmp/go); unshare -U true; touch /tmp/bg-denied) > /dev/null 2>&1 & echo first")")
	expect_code "the first call" "$code" 200
	expect_eq "it ended" "$(jq 'v["stdout"]')" first
	code=$(ex "$id" "$(jbody tool_call_id retry command \
		"touch /tmp/go; $(wait_for_file /tmp/bg-denied); echo second")")
	expect_code "the id again, once its call ended" "$code" 200
	expect_eq "the second ran" "$(jq 'v["stdout"]')" second
	expect_eq "its result has no denial of the first's background" \
		"$(jq 'len(v["denials"])'):$(jq 'v["reason"]')" "0:exited with status 0"
	expect_contains "the record: the first call's, in the background" \
		"$(grep '"type":"syscall.denied"' "$STATE/audit.jsonl")" '"call":"retry","background":true'
	stop_daemon
}

# ---- files -----------------------------------------------------------------

t_files_roundtrip() {
	start_daemon
	id=$(mksb)
	F=/v1/sandboxes/$id/files
	{ $PY -c 'import sys; sys.stdout.buffer.write(bytes(range(256)) * 4)'
	  head -c 300000 /dev/urandom; } > "$T/bin"
	code=$(api PUT "$F?path=/workspace/data.bin" --data-binary @"$T/bin")
	expect_code "put" "$code" 201
	expect_eq "put answer" "$(jq 'v["path"]') $(jq 'v["size"]')" "/workspace/data.bin $(stat -c %s "$T/bin")"
	code=$(api GET "$F?path=/workspace/data.bin")
	expect_code "get" "$code" 200
	cmp "$T/bin" "$T/body" || fail "the bytes read back differ"
	expect_contains "octet-stream" "$(grep -i '^content-type:' "$T/headers")" application/octet-stream
	# the sandbox sees the same bytes, owned by its user
	expect_eq "inside" "$(sbsh "$id" 'md5sum < /workspace/data.bin; stat -c %U /workspace/data.bin')" \
		"$(md5sum < "$T/bin")
agent"
	# what a call wrote, the API reads
	sbsh "$id" 'mkdir -p /workspace/sub && printf "made inside" > /workspace/sub/made && ln -s made /workspace/sub/link' >/dev/null
	code=$(api GET "$F?path=/workspace/sub/made")
	expect_eq "made inside" "$(body)" "made inside"
	# overwrite truncates; an empty file is a file
	api PUT "$F?path=/workspace/sub/made" --data-binary "short" >/dev/null
	code=$(api GET "$F?path=/workspace/sub/made")
	expect_eq "overwritten" "$(body)" short
	code=$(api PUT "$F?path=/workspace/empty" --data-binary "")
	expect_code "empty put" "$code" 201
	code=$(api GET "$F?path=/workspace/empty")
	expect_code "empty get" "$code" 200
	expect_eq "empty" "$(stat -c %s "$T/body")" 0
	# list
	code=$(api GET "$F?path=/workspace/sub&list=1")
	expect_code "list" "$code" 200
	expect_eq "list" "$(jq 'sorted((e["name"], e["type"], e["size"]) for e in v["entries"])')" \
		'[["link", "symlink", 4], ["made", "file", 5]]'
	code=$(api GET "$F?path=/workspace&list=1")
	expect_eq "list dirs" "$(jq 'sorted((e["name"], e["type"]) for e in v["entries"])')" \
		'[["data.bin", "file"], ["empty", "file"], ["sub", "dir"]]'
	# delete
	code=$(api DELETE "$F?path=/workspace/data.bin")
	expect_code "delete" "$code" 200
	expect_eq "deleted" "$(jq 'v["deleted"]')" true
	code=$(api GET "$F?path=/workspace/data.bin")
	expect_error "get deleted" "$code" 404 not_found
	code=$(api DELETE "$F?path=/workspace/data.bin")
	expect_error "delete again" "$code" 404 not_found
	expect_eq "gone inside" "$(sbsh "$id" 'test -e /workspace/data.bin && echo there || echo gone')" gone
	# a directory: only an empty one (chaos_serve.py's walk had a 500)
	code=$(api DELETE "$F?path=/workspace/sub")
	expect_error "delete a directory that is not empty" "$code" 409 conflict
	expect_contains "why" "$(jq 'v["detail"]')" "not empty"
	# what is not a regular file, or not there
	code=$(api GET "$F?path=/workspace/sub")
	expect_error "get a dir" "$code" 400 bad_request
	code=$(api PUT "$F?path=/workspace/sub" --data-binary x)
	expect_error "put a dir" "$code" 400 bad_request
	code=$(api GET "$F?path=/dev/zero")
	expect_error "get a device" "$code" 400 bad_request
	code=$(api PUT "$F?path=/workspace/no/such/f" --data-binary x)
	expect_error "put in a missing dir" "$code" 404 not_found
	code=$(api GET "$F?path=/workspace/sub/made&list=1")
	expect_error "list a file" "$code" 400 bad_request
	code=$(api PUT "$F?path=/usr/bin/corral-x" --data-binary x)
	[ "${code:0:1}" = 4 ] || fail "write to the read-only /usr: $code $(body)"
	[ ! -e /usr/bin/corral-x ] || fail "/usr/bin/corral-x reached the host"
	stop_daemon
}

t_files_symlink_not_followed() {
	start_daemon
	id=$(mksb)
	F=/v1/sandboxes/$id/files
	secret="host secret $$ $RANDOM"
	mkdir "$T/hostdir"
	echo "$secret" > "$T/hostdir/secret"
	chmod 755 "$T/hostdir"; chmod 666 "$T/hostdir/secret"
	sbsh "$id" "cd /workspace && ln -s $T/hostdir/secret abs && ln -s /etc/shadow shadow &&
		ln -s ../../../../../../../..$T/hostdir/secret rel && ln -s $T/hostdir dirlink &&
		echo inside > real && ln -s /workspace/real inner && ln -s /proc/1/root/etc/hostname procroot" >/dev/null
	for p in abs shadow rel inner procroot dirlink/secret; do
		code=$(api GET "$F?path=/workspace/$p")
		expect_error "get $p" "$code" 400 bad_request
		expect_contains "get $p detail" "$(jq 'v["detail"]')" symlink
		expect_not_contains "get $p leak" "$(body 2000)" "$secret"
		expect_not_contains "get $p shadow" "$(body 2000)" "root:x:0"
	done
	for p in abs rel dirlink/secret dirlink/new; do
		code=$(api PUT "$F?path=/workspace/$p" --data-binary "overwritten")
		expect_error "put $p" "$code" 400 bad_request
	done
	code=$(api DELETE "$F?path=/workspace/dirlink/secret")
	expect_error "delete through a link" "$code" 400 bad_request
	code=$(api GET "$F?path=/workspace/dirlink&list=1")
	expect_error "list through a link" "$code" 400 bad_request
	expect_eq "host file intact" "$(< "$T/hostdir/secret")" "$secret"
	[ ! -e "$T/hostdir/new" ] || fail "a file was created on the host"
	code=$(api GET "$F?path=/workspace&list=1")
	expect_eq "listed as links" "$(jq 'sorted(e["name"] for e in v["entries"] if e["type"] == "symlink")')" \
		'["abs", "dirlink", "inner", "procroot", "rel", "shadow"]'
	# deleting a link removes the link, never what it points at
	code=$(api DELETE "$F?path=/workspace/abs")
	expect_code "delete the link" "$code" 200
	expect_eq "host file still there" "$(< "$T/hostdir/secret")" "$secret"
	# a link swapped in for a file between calls is refused too
	sbsh "$id" "rm /workspace/real && ln -s $T/hostdir/secret /workspace/real" >/dev/null
	code=$(api GET "$F?path=/workspace/real")
	expect_error "swapped" "$code" 400 bad_request
	stop_daemon
}

t_files_dotdot_stays_inside() {
	start_daemon
	id=$(mksb)
	F=/v1/sandboxes/$id/files
	code=$(api GET "$F?path=/workspace/../../../../../../etc/hostname")
	expect_code "get ../etc/hostname" "$code" 200
	expect_eq "the sandbox's hostname" "$(body)" corral
	code=$(api GET "$F?path=/..%2f..%2f..%2fetc/passwd")
	expect_code "get encoded" "$code" 200
	expect_contains "the sandbox's passwd" "$(body 4000)" "agent:x:1000"
	name=corral-serve-dotdot-$$-$RANDOM
	code=$(api PUT "$F?path=/workspace/../../../../../../tmp/$name" --data-binary inside)
	expect_code "put ../tmp" "$code" 201
	[ ! -e "/tmp/$name" ] || { rm -f "/tmp/$name"; fail "/tmp/$name written on the host"; }
	expect_eq "in the sandbox's /tmp" "$(sbsh "$id" "cat /tmp/$name")" inside
	code=$(api GET "$F?path=/workspace/..&list=1")
	expect_code "list /workspace/.." "$code" 200
	expect_eq "the sandbox's root" "$(jq '"workspace" in [e["name"] for e in v["entries"]]')" true
	code=$(api DELETE "$F?path=/workspace/..")
	expect_error "delete .." "$code" 400 bad_request
	stop_daemon
}

# A walk through ".." beneath the sandbox's root fails with EAGAIN when
# any mount or rename on the host raced it (openat2(2): "may be retried");
# a host that starts containers does that all the time.  The daemon tries
# again: three EAGAINs injected in a row, and the listing still answers.
t_files_retry_a_raced_walk() {
	local st i
	command -v strace >/dev/null || { skip "no strace"; return 77; }
	start_daemon
	id=$(mksb)
	strace -o /dev/null -e trace=openat2 -e inject=openat2:error=EAGAIN:when=1..3 \
		-p "$DPID" 2> "$T/strace.err" &
	st=$!
	echo "$st" >> "$T/tracers"
	strace_attached "$T/strace.err" "$st" ||
		fail "strace did not attach: $(head -c 300 "$T/strace.err")"
	code=$(api GET "/v1/sandboxes/$id/files?path=/workspace/..&list=1")
	kill "$st" 2>/dev/null || true
	wait "$st" 2>/dev/null || true
	expect_code "list /workspace/.. through three EAGAINs" "$code" 200
	expect_eq "the sandbox's root" "$(jq '"workspace" in [e["name"] for e in v["entries"]]')" true
	stop_daemon
}

t_files_nul_refused() {
	start_daemon
	id=$(mksb)
	F=/v1/sandboxes/$id/files
	sbsh "$id" 'echo x > /workspace/a' >/dev/null
	code=$(api GET "$F?path=/workspace/a%00.txt")
	expect_error "get NUL" "$code" 400 bad_request
	code=$(api PUT "$F?path=/workspace/b%00/../a" --data-binary y)
	expect_error "put NUL" "$code" 400 bad_request
	code=$(api DELETE "$F?path=/workspace/a%00")
	expect_error "delete NUL" "$code" 400 bad_request
	code=$(api GET "$F?path=%00")
	expect_error "only NUL" "$code" 400 bad_request
	expect_eq "nothing touched" "$(sbsh "$id" 'ls /workspace; cat /workspace/a')" "a
x"
	stop_daemon
}

# Attacker (found by tests/chaos_serve.py, seed 186631937, as uid 65534):
# names that are not UTF-8.  A sandbox names its files in any bytes: the
# archive of its workspace failed whole, a 500, at libarchive's warning
# that such a name has no UTF-8 form.  A client names a path in any bytes:
# an error quoting it could not be made JSON, a 500 again.  The archive
# carries the bytes as they are (hdrcharset=BINARY); an error shows each
# stray byte as U+FFFD.
t_names_not_utf8() {
	local id code
	start_daemon || return 1
	id=$(mksb) || return 1
	sbsh "$id" 'mkdir "/workspace/$(printf "d\377")" &&
		echo hi > "/workspace/$(printf "d\377/n\376")"' > /dev/null || return 1
	code=$(api GET "/v1/sandboxes/$id/archive?path=/workspace")
	expect_code "an archive of names that are not UTF-8" "$code" 200 || return 1
	LC_ALL=C tar --quoting-style=literal -tf "$T/body" > "$T/names" 2> /dev/null
	LC_ALL=C grep -qxF "$(printf 'd\377/n\376')" "$T/names" ||
		fail "the name's bytes are not in the archive: $(od -c "$T/names" | head -3)"
	code=$(api GET "/v1/sandboxes/$id/files?path=/workspace/%FFnope")
	expect_error "a path that is not UTF-8, not there" "$code" 404 not_found || return 1
	expect_contains "its stray byte" "$(body)" '\uFFFDnope'
	stop_daemon
}

t_files_size_limits() {
	start_daemon
	id=$(mksb '{"policy": {"limits": {"disk": "256M"}}}')
	F=/v1/sandboxes/$id/files
	head -c $((64 * 1024 * 1024)) /dev/zero > "$T/big"
	code=$(api PUT "$F?path=/workspace/max" --data-binary @"$T/big")
	expect_code "put 64 MiB" "$code" 201
	code=$(api GET "$F?path=/workspace/max")
	expect_code "get 64 MiB" "$code" 200
	expect_eq "64 MiB back" "$(stat -c %s "$T/body")" 67108864
	printf x >> "$T/big"
	code=$(api PUT "$F?path=/workspace/over" --data-binary @"$T/big")
	expect_error "put 64 MiB + 1" "$code" 413 too_large
	sbsh "$id" 'rm /workspace/max; head -c 70M /dev/zero > /workspace/made; ls /workspace' >/dev/null
	code=$(api GET "$F?path=/workspace/made")
	expect_error "get 70 MiB" "$code" 413 too_large
	code=$(api GET "$F?path=/workspace&list=1")
	expect_eq "listed" "$(jq '[(e["name"], e["size"]) for e in v["entries"]]')" '[["made", 73400320]]'
	stop_daemon
}

# Beyond 64 MiB + 1 the body is refused by evhttp before it is read (with
# its own HTML 413, as docs/API.md says); nothing is written, the daemon
# goes on.
t_files_put_far_over_limit() {
	start_daemon
	id=$(mksb)
	head -c 70M /dev/zero > "$T/big"
	code=$(api PUT "/v1/sandboxes/$id/files?path=/workspace/over" --data-binary @"$T/big")
	expect_code "put 70 MiB" "$code" 413
	code=$(api POST /v1/sandboxes --data-binary @"$T/big")
	expect_code "a 70 MiB JSON body" "$code" 413
	code=$(api GET /v1/health)
	expect_code "still up" "$code" 200
	expect_eq "one sandbox" "$(jq 'v["sandboxes"]')" 1
	code=$(api GET "/v1/sandboxes/$id/files?path=/workspace/over")
	expect_error "nothing written" "$code" 404 not_found
	stop_daemon
}

# The file API has the sandbox user's rights, not the daemon's: a host file
# bound in that the agent cannot read (0640 root:root) is refused to it too.
t_files_with_the_agents_rights() {
	[ "$(id -u)" = 0 ] || { skip "needs a root-owned file"; return 77; }
	# as root usually is: in group 0, whose read bit the file has
	DAEMON_WRAP="setpriv --groups 0" start_daemon
	printf 'root only\n' > "$T/secret"
	chown 0:0 "$T/secret"
	chmod 0640 "$T/secret"
	id=$(mksb "{\"policy\": {\"filesystem\": {\"ro\": [\"$T/secret:/opt/secret\"]}}}")
	code=$(ex "$id" "$(jbody command 'cat /opt/secret')")
	expect_eq "the agent cannot" "$(jq 'v["exit_code"]')" 1
	code=$(api GET "/v1/sandboxes/$id/files?path=/opt/secret")
	expect_error "nor the file API" "$code" 403 forbidden
	expect_not_contains "no content" "$(body)" "root only"
	stop_daemon
}

# A daemon's sandbox with a host directory bound writable leaves no
# set-id file there (seccomp.c, hostw_table: the filter is the policy's,
# whoever asked for it); one without such a bind keeps its own modes.
t_no_setid_in_a_writable_host_bind() {
	start_daemon
	mkdir "$T/share"
	chmod 0777 "$T/share"
	id=$(mksb "{\"policy\": {\"filesystem\": {\"rw\": [\"$T/share:/share\"]}}}") || return 1
	code=$(ex "$id" "$(jbody command 'cp /bin/true /share/t && chmod 4755 /share/t; echo rc=$?; chmod 2755 /share/t; echo rc=$?')")
	expect_code "exec" "$code" 200
	expect_eq "refused" "$(echo $(jq 'v["stdout"]'))" "rc=1 rc=1"
	expect_eq "nothing set-id on the host" "$(find "$T/share" -perm /6000 | wc -l)" 0
	expect_contains "the denial said" "$(jq 'v["reason"]')" "denied: syscall fchmodat"
	id=$(mksb "{\"policy\": {\"filesystem\": {\"ro\": [\"$T/share:/share\"]}}}") || return 1
	code=$(ex "$id" "$(jbody command 'cp /bin/true /tmp/t && chmod 4755 /tmp/t && stat -c %a /tmp/t')")
	expect_eq "no writable bind: its own" "$(jq 'v["stdout"]')" "4755"
	stop_daemon
}

t_files_proc_refused() {
	start_daemon
	id=$(mksb)
	F=/v1/sandboxes/$id/files
	for p in /proc/version /proc/1/cmdline /proc/1/environ /proc/self/environ /proc/1/root/etc/hostname /proc/../proc/version; do
		code=$(api GET "$F?path=$p")
		case "$code" in
		400|403) expect_error "get $p" "$code" "$code" "$(jq 'v.get("error")')" ;;
		*) fail "get $p: $code, want a refusal: $(body)" ;;
		esac
	done
	code=$(api GET "$F?path=/proc&list=1")
	[ "$code" = 400 ] || [ "$code" = 403 ] || fail "list /proc: $code $(body)"
	code=$(api PUT "$F?path=/proc/1/comm" --data-binary x)
	[ "$code" = 400 ] || [ "$code" = 403 ] || fail "put /proc/1/comm: $code $(body)"
	code=$(api DELETE "$F?path=/proc/1/comm")
	[ "$code" = 400 ] || [ "$code" = 403 ] || fail "delete /proc/1/comm: $code $(body)"
	code=$(api GET "$F?path=/sys/kernel/hostname")
	[ "${code:0:1}" = 4 ] || fail "get /sys: $code $(body)"
	stop_daemon
}

# An archive's walk stats a name, then reads it: an agent that swaps a hard
# link of a tripwire in between must not make the daemon open the tripwire
# (as root the open waits for the daemon's own fanotify answer, for good;
# without the fix the daemon hung here on the first try).
t_archive_tripwire_swapped_in() {
	local helpers=${JGET%/*} id code pid i
	start_daemon
	id=$(mksb "{\"idle_freeze_ms\": 0, \"policy\": {\"abort\": {\"tripwires\": [\"/tmp/x/zz-wire\"], \"on_abort\": \"freeze\"}, \"filesystem\": {\"ro\": [\"$helpers:/opt/helpers\"]}}}") || return 1
	code=$(api POST "/v1/sandboxes/$id/processes" -d '{"argv": ["/opt/helpers/wireswap", "/tmp/x", "zz-wire", "20000"]}')
	expect_code "the swapper" "$code" 201 || return 1
	pid=$(jq 'v["pid"]')
	for i in $(seq 300); do
		code=$(api GET "/v1/sandboxes/$id/processes/$pid")
		expect_contains "ready" "$(jq 'v["stdout"]')" ready 2>/dev/null && break
		sleep 0.1
	done
	expect_contains "the swapper is ready" "$(jq 'v["stdout"]')" ready || return 1
	code=$(API_TIMEOUT=60 api GET "/v1/sandboxes/$id/archive?path=/tmp/x")
	case "$code" in
	200|409) ;;	# whole, or "changed while it was archived"
	*) fail "archive: $code $(body)" ;;
	esac
	code=$(API_TIMEOUT=10 api GET /v1/health)
	expect_code "the daemon still answers" "$code" 200
	stop_daemon
}

# ---- pause, idle freeze, TTL, halt -----------------------------------------

cpu() { sbget "$1" 'v["meters"]["cpu_seconds"]'; }
# ticks PID: utime + stime of host PID (fields 14 and 15 of its stat)
ticks() { proc_stat "$1" && echo $(( PSTAT[11] + PSTAT[12] )); }
# holds EXPR: an arithmetic comparison of meters' numbers (0.25, 1.5e-05)
# is true; by awk, where a Python's start was 25-60 ms of CPU each
holds() { awk "BEGIN { exit !($1) }"; }

t_pause_resume() {
	start_daemon
	id=$(mksb)
	code=$(api POST "/v1/sandboxes/$id/processes" -d '{"command": "while :; do :; done", "tool_call_id": "burn"}')
	expect_code "burner" "$code" 201
	if ! cgroup_mode "$id"; then
		code=$(api POST "/v1/sandboxes/$id/pause")
		# not the daemon's fault (500), nor the request's: this host's
		expect_error "pause without cgroups" "$code" 501 not_supported
		expect_contains "a clear reason" "$(jq 'v["detail"]')" "no freezer"
		expect_eq "not paused" "$(sbget "$id" 'v["state"]')" running
		expect_eq "calls still run" "$(sbsh "$id" 'echo yes')" yes
		stop_daemon
		return 0
	fi
	hp=$(host_pid "$id" burn)
	i=0
	while [ $i -lt 50 ] && ! holds "$(cpu "$id") > 0.2"; do
		nap 0.1; i=$((i + 1))
	done
	code=$(api POST "/v1/sandboxes/$id/pause")
	expect_code "pause" "$code" 200
	expect_eq "paused" "$(jq 'v["state"]')" paused
	c1=$(cpu "$id"); k1=$(ticks "$hp")
	sleep 1
	c2=$(cpu "$id"); k2=$(ticks "$hp")
	holds "$c2 - $c1 < 0.05" || fail "CPU while paused (meter $c1 -> $c2)"
	[ $((k2 - k1)) -le 2 ] || fail "the burner used $((k2 - k1)) ticks while paused"
	expect_eq "still paused" "$(sbget "$id" 'v["state"]')" paused
	code=$(ex "$id" '{"command": "true"}')
	expect_error "exec while paused" "$code" 409 conflict
	expect_contains "says paused" "$(jq 'v["detail"]')" "sandbox $id is paused"
	# the CLI names the verb that resumes it
	expect_contains "the CLI's words" "$("$CORRAL" exec --socket "$SOCK" "$id" -- true 2>&1)" \
		"sandbox $id is paused; resume it first (HTTP 409); \`corral resume $id\` resumes it"
	code=$(api POST "/v1/sandboxes/$id/processes" -d '{"command": "true"}')
	expect_error "process while paused" "$code" 409 conflict
	# a frozen process cannot end: its DELETE waited for the resume, and
	# an MCP client's process_kill with it (chaos_mcp.py)
	api GET "/v1/sandboxes/$id/processes" >/dev/null
	pid=$(jq 'v["processes"][0]["pid"]')
	code=$(API_TIMEOUT=20 api DELETE "/v1/sandboxes/$id/processes/$pid")
	expect_error "delete a process while paused" "$code" 409 conflict
	expect_contains "says paused" "$(jq 'v["detail"]')" paused
	code=$(api POST "/v1/sandboxes/$id/resume")
	expect_code "resume" "$code" 200
	expect_eq "resumed" "$(jq 'v["state"]')" running
	# it burns again: more than 0.1 s of CPU (meter and ticks), looked
	# at every 0.1 s for 10 s at most, then it is stopped (it burned a
	# whole second here and on to the daemon's stop)
	c3=$(cpu "$id"); k3=$(ticks "$hp")
	i=0
	while :; do
		nap 0.1; i=$((i + 1))
		c4=$(cpu "$id"); k4=$(ticks "$hp")
		holds "$c4 - $c3 > 0.1" && [ $((k4 - k3)) -gt 10 ] && break
		[ $i -lt 100 ] || break
	done
	holds "$c4 - $c3 > 0.1" || fail "no CPU after resume (meter $c3 -> $c4)"
	[ $((k4 - k3)) -gt 10 ] || fail "the burner used only $((k4 - k3)) ticks after resume"
	code=$(api DELETE "/v1/sandboxes/$id/processes/$pid")
	expect_code "the burner stopped" "$code" 200
	expect_eq "calls run again" "$(sbsh "$id" 'echo yes')" yes
	ev=$(grep "\"sandbox\":\"$id\"" "$STATE/audit.jsonl")
	expect_contains "pause event" "$ev" '"type":"pause"'
	expect_contains "resume event" "$ev" '"type":"resume"'
	stop_daemon
}

t_idle_freeze() {
	start_daemon
	id=$(mksb '{"idle_freeze_ms": 1000}')
	expect_eq "echo" "$(sbsh "$id" 'echo one')" one
	if ! cgroup_mode "$id"; then
		# no freezer: the sandbox stays idle and keeps working
		sleep 1
		expect_eq "idle, not frozen" "$(sbget "$id" 'v["state"]')" idle
		expect_eq "still works" "$(sbsh "$id" 'echo two')" two
		stop_daemon
		return 0
	fi
	i=0
	while [ $i -lt 50 ] && [ "$(sbget "$id" 'v["state"]')" != frozen ]; do
		sleep 0.1; i=$((i + 1))
	done
	expect_eq "frozen" "$(sbget "$id" 'v["state"]')" frozen
	sleep 0.3
	expect_eq "frozen time metered" "$(sbget "$id" 'v["meters"]["frozen_seconds"] > 0')" true
	# the answer is the proof of the thaw; the state read after it may
	# already be the next freeze on a busy machine
	expect_eq "thawed by a call" "$(sbsh "$id" 'echo two')" two
	ev=$(grep "\"sandbox\":\"$id\"" "$STATE/audit.jsonl")
	expect_contains "freeze event" "$ev" '"type":"freeze"'
	expect_contains "thaw event" "$ev" '"type":"thaw"'
	# files are served from a frozen sandbox too
	i=0
	while [ $i -lt 50 ] && [ "$(sbget "$id" 'v["state"]')" != frozen ]; do
		sleep 0.1; i=$((i + 1))
	done
	code=$(api PUT "/v1/sandboxes/$id/files?path=/workspace/f" --data-binary frozen-put)
	expect_code "put while frozen" "$code" 201
	expect_eq "read by a call" "$(sbsh "$id" 'cat /workspace/f')" frozen-put
	# never: idle_freeze_ms 0; not while a process runs
	id0=$(mksb '{"idle_freeze_ms": 0}')
	code=$(api POST "/v1/sandboxes/$id/processes" -d '{"command": "sleep 33"}')
	sleep 1
	expect_eq "0: never frozen" "$(sbget "$id0" 'v["state"]')" idle
	expect_eq "busy: not frozen" "$(sbget "$id" 'v["state"]')" running
	stop_daemon
}

# helper_on FIFO: the pid of a child of the daemon that has FIFO open.
# Without a fork (test -ef: an fd's link is the FIFO's inode): the waits
# below ask it every 50-100 ms, and a readlink a descriptor of each child
# was some 3 ms of CPU each.
helper_on() {
	local s p f
	local -a kids
	for s in /proc/"$DPID"/task/*/children; do
		kids=()
		read -r -a kids 2>/dev/null < "$s" || :
		for p in "${kids[@]}"; do
			for f in /proc/"$p"/fd/*; do
				[ "$f" -ef "$1" ] && { echo "$p"; return 0; }
			done
		done
	done
	return 0
}

# reap_held_daemon: a daemon whose helper that removes a box's groups
# waits, once started, for a line on $T/reap (CORRAL_TEST_REAP_FIFO, the
# daemon's environment: no client reaches it), which reap_release sends
reap_held_daemon() {
	mkfifo "$T/reap"
	exec 7<>"$T/reap"	# read-write: the helper's open does not wait for us
	# not the daemon's: a writer there would hold every helper for ever
	# once a failed test's shell, the other writer, has gone
	CORRAL_TEST_REAP_FIFO=$T/reap start_daemon 7>&-
}

reap_release() {
	echo x >&7
	exec 7>&-
	rm -f "$T/reap"
}

# reap_needs_cgroups ID: skips, the daemon stopped, where the box has none
reap_needs_cgroups() {
	cgroup_mode "$1" && return 0
	reap_release
	stop_daemon
	skip "no cgroups: nothing of a box's is removed off the loop"
}

# reap_helper_seen: the helper waiting on $T/reap, within 10 s
reap_helper_seen() {
	local i=0
	while [ $i -lt 100 ] && [ -z "$(helper_on "$T/reap")" ]; do
		nap 0.1; i=$((i + 1))
	done
	[ -n "$(helper_on "$T/reap")" ] || fail "no helper of the daemon removes a's groups"
}

# A box's groups are removed off the loop: while that removal is held,
# another box's requests are answered, and once let go nothing is left.
t_teardown_off_loop() {
	reap_held_daemon
	a=$(mksb '{"idle_freeze_ms": 0}')
	b=$(mksb '{"idle_freeze_ms": 0}')
	expect_eq "a runs" "$(sbsh "$a" 'echo a')" a
	reap_needs_cgroups "$a" || return $?
	code=$(api DELETE "/v1/sandboxes/$a")
	expect_code "delete a" "$code" 200
	reap_helper_seen
	# a's removal is held right now: b is served all the same
	expect_eq "b answers while a's teardown is held" "$(sbsh "$b" 'echo b')" b
	code=$(api GET "/v1/sandboxes/$b")
	expect_code "get b" "$code" 200
	[ -n "$(cgroups_of "$DPID" | grep -- "-$a\$")" ] ||
		fail "a's groups went before the helper was let go: the hold did not hold"
	reap_release
	wait_gone "a's groups" 10 eval "cgroups_of $DPID | grep -- '-$a\$'"
	expect_eq "b still runs" "$(sbsh "$b" 'echo b2')" b2
	stop_daemon
}

# What a box's calls left running (each in its call's group) is removed
# off the loop with the box, however many: past a fixed 129 the groups
# were destroyed on the loop, each a freeze, a kill and a wait (900 held
# every other request 246 s).  While the helper is held, every call group
# of a's is still there: none was removed on the loop.  136 calls: past
# the 128 calls' groups the old reaper kept (its bound put back, this
# test fails: 0 of 137 left, the box's group went too); 160 were 15% more
# of the test's 10-16 s of CPU.
t_teardown_of_lingering_calls_off_loop() {
	local n=136 i d left before
	reap_held_daemon
	a=$(mksb '{"idle_freeze_ms": 0}')
	b=$(mksb '{"idle_freeze_ms": 0}')
	reap_needs_cgroups "$a" || return $?
	sleepers "$a" $n
	d=$(cgroups_of "$DPID" | grep -- "-$a\$" | head -1)
	[ -n "$d" ] || fail "no group of a's"
	# the calls' groups, and the one made ahead for the next call
	before=$(find "$d" -mindepth 1 -maxdepth 1 -type d -name 'c*' | wc -l)
	[ "$before" -ge $n ] || fail "a's calls' groups: $before, want $n or more"
	code=$(api DELETE "/v1/sandboxes/$a")
	expect_code "delete a" "$code" 200
	reap_helper_seen
	expect_eq "b answers while a's teardown is held" "$(sbsh "$b" 'echo b')" b
	left=$(find "$d" -mindepth 1 -maxdepth 1 -type d -name 'c*' 2>/dev/null | wc -l)
	expect_eq "a's calls' groups left to the held helper, none removed on the loop" "$left" "$before"
	reap_release
	# the box's own group goes last: until then, a look without a find of
	# every hierarchy (some 20 ms of CPU each, every 0.1 s of the removal)
	i=0
	while [ -d "$d" ] && [ $i -lt 300 ]; do nap 0.1; i=$((i + 1)); done
	wait_gone "a's groups" 30 eval "cgroups_of $DPID | grep -- '-$a\$'"
	stop_daemon
}

# A call's OOM and fork counters are read at its end and once more by
# the sweep before its group's removal (background_hits), from one fd
# kept from the first read.  A quick call ended before on_start_due kept
# them, and each read was an open, a read and a close (issue 17): 12
# opens a call where 10 do.  Counted by strace over 20 calls of `true`:
# no group's OOM counter file opened twice.
t_call_counters_opened_once() {
	local st i code groups most
	command -v strace >/dev/null || { skip "no strace"; return 77; }
	start_daemon
	a=$(mksb '{"idle_freeze_ms": 0}')
	if ! cgroup_mode "$a"; then
		stop_daemon
		skip "no cgroups: no counters to read"
		return 77
	fi
	sbsh "$a" true > /dev/null || fail "a's first call"
	strace -o "$T/opens" -e trace=openat -p "$DPID" 2> "$T/strace.err" &
	st=$!
	echo "$st" >> "$T/tracers"
	strace_attached "$T/strace.err" "$st" ||
		fail "strace did not attach: $(head -c 300 "$T/strace.err")"
	for i in $(seq 1 20); do
		code=$(ex "$a" '{"argv": ["true"]}')
		expect_code "call $i of true" "$code" 200 || break
	done
	kill "$st" 2>/dev/null || true
	wait "$st" 2>/dev/null || true
	# v1's memory.oom_control, v2's memory.events, opened, by group
	grep -v '= -1' "$T/opens" |
		grep -oE 'corral-c[0-9]+/memory\.(oom_control|events)"' |
		sort | uniq -c > "$T/oom_opens"
	groups=$(wc -l < "$T/oom_opens")
	most=$(awk '$1 > m { m = $1 } END { print m + 0 }' "$T/oom_opens")
	[ "$groups" -ge 10 ] ||
		fail "the OOM counter of $groups calls' groups opened, want 10 or more: $(head -c 300 "$T/opens")"
	expect_eq "the most opens of one group's OOM counter" "$most" 1
	code=$(api DELETE "/v1/sandboxes/$a")
	expect_code "delete a" "$code" 200
	stop_daemon
}

# A foreground call's counters are read from fds opened while it runs
# (its answer waits on no open): the fds go with the call.  10 calls that
# each leave a sleeper, 10 that do not: the daemon holds no more fds after
# than before, give or take (a lingering group kept five each: 50).
t_calls_leave_no_fds_in_the_daemon() {
	local i fds0 fds1 code
	start_daemon
	a=$(mksb '{"idle_freeze_ms": 0}')
	sbsh "$a" true > /dev/null || { stop_daemon; return 1; }
	fds0=$(ls /proc/"$DPID"/fd | wc -l)
	for i in $(seq 1 10); do
		code=$(ex "$a" "$(jbody command 'sleep 600 </dev/null >/dev/null 2>&1 &')")
		expect_code "call $i leaves a sleeper" "$code" 200 || break
		sbsh "$a" true > /dev/null || break
	done
	fds1=$(ls /proc/"$DPID"/fd | wc -l)
	[ "$fds1" -le $((fds0 + 10)) ] ||
		fail "the daemon's fds: $fds0 before 20 calls, $fds1 after"
	code=$(api DELETE "/v1/sandboxes/$a")
	expect_code "delete a" "$code" 200
	stop_daemon
}

# loop_reads: the read(2)s of the daemon's loop, its main thread's own:
# /proc/PID/io adds those of each child it reaps (a helper's walks)
loop_reads() {
	awk '$1 == "syscr:" { print $2 }' /proc/"$DPID"/task/"$DPID"/io
}

# syscr_of_call ID: the loop's reads over one call of box ID, the least
# of three: a tick's reads may fall in one
syscr_of_call() {
	local i r0 r1 least=""
	for i in 1 2 3; do
		r0=$(loop_reads) || return 1
		sbsh "$1" true > /dev/null || return 1
		r1=$(loop_reads) || return 1
		[ -n "$least" ] && [ $((r1 - r0)) -ge "$least" ] || least=$((r1 - r0))
	done
	echo "$least"
}

# The groups a box's finished calls left (each call that leaves a sleeper
# leaves one, up to the pids limit: the sandbox chooses how many) are read
# a batch at a time (LINGER_VISIT_MAX, 32), at each call's end and each
# tick.  All of them were read at each call's end and again by the sweep
# right after it, each two files or more and an rmdir, on the loop every
# other box's calls wait on: 1000 held it some 40 ms a call and 14 ms a
# second.  Counted by the loop's reads over one call of a box with n
# lingering groups, less those of a box with none: fewer than n now (68
# as root, 126 as 65534, for n = 300), 606 and 604 before.
t_lingering_groups_read_in_batches() {
	# a bound with 300 groups lingering (14 s of CPU under ASan): once,
	# -O2; under ASan t_teardown_of_lingering_calls_off_loop's 136 are
	# read in the same batches at its calls' ends
	bound_test
	local n=300 code ra rb
	start_daemon
	a=$(mksb '{"idle_freeze_ms": 0}')
	b=$(mksb '{"idle_freeze_ms": 0}')
	if ! cgroup_mode "$a"; then
		stop_daemon
		skip "no cgroups: without them a box keeps $n calls' records at most 64"
		return
	fi
	sleepers "$a" $n
	ra=$(syscr_of_call "$a") || fail "no count of the daemon's reads over a's call"
	rb=$(syscr_of_call "$b") || fail "no count of the daemon's reads over b's call"
	[ $((ra - rb)) -lt $n ] ||
		fail "one call of a box with $n lingering groups: $ra reads, of one with none $rb"
	code=$(api DELETE "/v1/sandboxes/$a")
	expect_code "delete a" "$code" 200
	code=$(api DELETE "/v1/sandboxes/$b")
	expect_code "delete b" "$code" 200
	stop_daemon
}

# A halt whose policy kills (on_abort "kill", a criterion the sandbox
# can meet at will) kills the tree off the loop: without cgroup.kill (v1)
# the kill read cgroup.procs in every group of every hierarchy, twice and
# more, on the loop: a sandbox whose 1000 calls each left a sleeper held
# another's exec 0.5-1.3 s.  Counted by the loop's reads from the halt
# to the last process's end: fewer than n now (16 for n = 300), 6392 as
# 65534 and 9385 as root before (cgroup.kill, v2 since 5.14, reads none).
t_halt_kill_off_loop() {
	# a bound with 300 groups lingering (10 s of CPU under ASan): once,
	# -O2; under ASan abort.sh's daemon halts (on_abort "kill") take
	# the same path
	bound_test
	local n=300 code d r0 r1
	start_daemon
	a=$(mksb '{"idle_freeze_ms": 0, "policy": {"abort": {"on_abort": "kill"}}}')
	if ! cgroup_mode "$a"; then
		stop_daemon
		skip "no cgroups: init's death alone ends the tree"
		return
	fi
	sleepers "$a" $n
	d=$(cgroups_of "$DPID" | grep -- "-$a\$" | head -1)
	[ "$(tree_procs "$d" | wc -l)" -ge $n ] || fail "a's processes: fewer than $n in $d"
	r0=$(loop_reads)
	code=$(api POST "/v1/sandboxes/$a/halt" -d "$(jbody reason "enough")")
	expect_code "halt a" "$code" 200
	wait_gone "a's processes" 30 tree_procs "$d"
	r1=$(loop_reads)
	[ $((r1 - r0)) -lt $n ] ||
		fail "a halt's kill of $n lingering groups: $((r1 - r0)) reads on the loop"
	code=$(api DELETE "/v1/sandboxes/$a")
	expect_code "delete a" "$code" 200
	stop_daemon
}

# A process writing a byte a write(2): the daemon read a byte a read, as
# fast as it wrote (188,000 reads a second for one dd bs=1, 26-38% of a
# CPU, every other sandbox's loop), and a follower or a streamed call got
# a line a byte.  Now its reads are paced (outpace.c): bytes gather in the
# pipe and are read together, a read every 5 ms at most while they come
# short.  Counted, for N bytes written one at a time some 0.2 ms apart
# (some 0.5 s): the loop's reads over a background process followed to
# its end and the follower's lines, then a streamed call's lines: fewer
# than N / 2 each (a pace's count holds until the writes take 5 s), with
# every byte there, in order.
t_output_read_by_bytes_not_writes() {
	local n=2000 code pid r0 r1 lines w
	w="import os, time
for i in range($n):
    os.write(1 + i % 2, b'%d' % (i // 2 % 10))
    time.sleep(0.0002)"
	start_daemon
	id=$(mksb '{"idle_freeze_ms": 0}')
	r0=$(loop_reads)
	code=$(api POST "/v1/sandboxes/$id/processes" \
		-d "$(jbody argv "json:$("$JGET" -a python3 -c "$w")")")
	expect_code "a writer" "$code" 201
	pid=$(jq 'v["pid"]')
	code=$(api GET "/v1/sandboxes/$id/processes/$pid/output?follow=1")
	r1=$(loop_reads)
	expect_code "its output, followed" "$code" 200
	$PY - "$T/body" $n > "$T/check" 2>&1 <<'PYEOF' || fail "followed: $(< "$T/check")"
import json, sys
n = int(sys.argv[2])
ev = [json.loads(l) for l in open(sys.argv[1])]
want = "".join(str(i % 10) for i in range(n // 2))
for name in ("stdout", "stderr"):
    got = "".join(e["data"] for e in ev if e["type"] == name)
    assert got == want, (name, len(got), got[:80])
assert ev[-1]["type"] == "end" and ev[-1]["result"]["exit_code"] == 0, ev[-1]
print(sum(e["type"] in ("stdout", "stderr") for e in ev))
PYEOF
	lines=$(< "$T/check")
	[ "$((r1 - r0))" -lt $((n / 2)) ] ||
		fail "$n bytes written one at a time: the loop read $((r1 - r0)) times"
	[ "$lines" -lt $((n / 2)) ] ||
		fail "$n bytes written one at a time: $lines lines to their follower"
	code=$(ex "$id" "$(jbody argv "json:$("$JGET" -a python3 -c "$w")" stream json:true)")
	expect_code "a streamed writer" "$code" 200
	$PY - "$T/body" $n > "$T/check" 2>&1 <<'PYEOF' || fail "streamed: $(< "$T/check")"
import json, sys
n = int(sys.argv[2])
ev = [json.loads(l) for l in open(sys.argv[1])]
want = "".join(str(i % 10) for i in range(n // 2))
res = ev[-1]["result"]
for name in ("stdout", "stderr"):
    got = "".join(e["data"] for e in ev if e["type"] == name)
    assert got == want and res[name] == want, (name, len(got), got[:80])
assert res["exit_code"] == 0, res
print(sum(e["type"] in ("stdout", "stderr") for e in ev))
PYEOF
	lines=$(< "$T/check")
	[ "$lines" -lt $((n / 2)) ] ||
		fail "$n bytes written one at a time: $lines lines to the call's stream"
	code=$(api DELETE "/v1/sandboxes/$id")
	expect_code "delete" "$code" 200
	stop_daemon
}

# tree_procs DIR: "pid starttime" of each process in DIR's group and below
# (proc_stat: a sed and an awk a process were 5 ms of CPU, each look)
tree_procs() {
	local p
	for p in $(find "$1" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -un); do
		proc_stat "$p" && echo "$p ${PSTAT[19]}"
	done
	return 0
}

# cpu_of "PID START"...: "pid utime+stime" of those still alive (the same
# start time: not a stranger that took a dead one's pid)
cpu_of() {
	local pid st
	while read -r pid st; do
		[ -n "$pid" ] || continue
		proc_stat "$pid" && [ "${PSTAT[19]}" = "$st" ] &&
			echo "$pid $(( PSTAT[11] + PSTAT[12] ))"
	done <<< "$1"
	return 0
}

# held_teardown: a daemon whose reap helper is held (reap_held_daemon),
# sandboxes $a and $b, and a call of a's that left a sleeper behind
held_teardown() {
	reap_held_daemon
	a=$(mksb '{"idle_freeze_ms": 0}')
	b=$(mksb '{"idle_freeze_ms": 0}')
	reap_needs_cgroups "$a" || return $?
	code=$(ex "$a" "$(jbody command 'sleep 600 </dev/null >/dev/null 2>&1 &')")
	expect_code "a call leaves a sleeper" "$code" 200
}

# A DELETE stops the box's tree on the loop (one freezer write, or
# cgroup.kill) and answers; the SIGKILL of each process, the thaw and the
# removal are the helper's, off the loop.  Held before its kill here: the
# DELETE has its 200, and nothing of a's runs (a busy loop's CPU time does
# not move), yet every process is still there, frozen, so the loop made
# none of the kill's walks (each read every group's cgroup.procs in every
# hierarchy: 0.5-1 s for 900 lingering calls, every other client waiting).
# Meanwhile b's exec is answered; once let go, nothing of a's is left and
# the audit log has its end.
t_teardown_kill_off_loop() {
	local d procs left p st t0 t1 code i
	held_teardown || return $?
	code=$(ex "$a" "$(jbody command 'while :; do :; done </dev/null >/dev/null 2>&1 &')")
	expect_code "a call leaves a busy loop" "$code" 200
	d=$(cgroups_of "$DPID" | grep -- "-$a\$" | head -1)
	procs=$(tree_procs "$d")
	[ "$(wc -l <<< "$procs")" -ge 3 ] || fail "a's processes: $(echo $procs)"
	t0=$(cpu_of "$procs")
	# until the loop has run (a tick of CPU; 30 s at most), not for 0.3 s:
	# a loaded host gave the box none in that time
	i=0
	while [ "$(cpu_of "$procs")" = "$t0" ] && [ $i -lt 300 ]; do
		sleep 0.1; i=$((i + 1))
	done
	[ "$(cpu_of "$procs")" != "$t0" ] || fail "a's busy loop does not run: the check below would prove nothing"
	# what the calls left, not corral's own (init; the process forked
	# ahead for the next call, which the destroy lets exit)
	left=$(while read -r p st; do
		[ "$(cat /proc/"$p"/comm 2>/dev/null)" = corral ] || echo "$p $st"
	done <<< "$procs")
	[ "$(wc -l <<< "$left")" = 2 ] || fail "what a's calls left: $(echo $left)"
	code=$(api DELETE "/v1/sandboxes/$a")
	expect_code "delete a" "$code" 200
	reap_helper_seen
	t0=$(cpu_of "$procs")
	sleep 0.5
	t1=$(cpu_of "$procs")
	expect_eq "nothing of a's runs once the DELETE is answered" "$t1" "$t0"
	if [ -e /sys/fs/cgroup/cgroup.controllers ]; then
		# cgroup v2: cgroup.kill killed them in the write, on the loop
		wait_gone "a's processes, cgroup.kill" 10 cpu_of "$procs"
	else
		expect_eq "what a's calls left, frozen, for the held helper to kill" \
			"$(cpu_of "$left" | wc -l)" 2
	fi
	expect_eq "b answers while a's kill is held" "$(sbsh "$b" 'echo b')" b
	code=$(api GET /v1/health)
	expect_code "health while a's kill is held" "$code" 200
	reap_release
	wait_gone "a's processes" 10 cpu_of "$procs"
	wait_gone "a's groups" 10 eval "cgroups_of $DPID | grep -- '-$a\$'"
	expect_contains "a's end in the audit log" \
		"$(grep "\"sandbox\":\"$a\"" "$STATE/audit.jsonl")" '"type":"sandbox.destroy"'
	expect_eq "b still runs" "$(sbsh "$b" 'echo b2')" b2
	stop_daemon
}

# The helper killed before its kill (the OOM killer, a person): the
# DELETE had left a's tree frozen, init too, and nothing else would end
# it; the loop, told by the helper's pidfd, kills and removes it itself.
# Else a's processes stayed frozen for the daemon's life, and its stop
# waited on a's init for ever.
t_teardown_when_the_reaper_dies() {
	local d procs h code
	held_teardown || return $?
	d=$(cgroups_of "$DPID" | grep -- "-$a\$" | head -1)
	procs=$(tree_procs "$d")
	code=$(api DELETE "/v1/sandboxes/$a")
	expect_code "delete a" "$code" 200
	reap_helper_seen
	h=$(helper_on "$T/reap")
	kill -KILL "$h"		# the daemon's child, of this test's daemon
	wait_gone "a's processes" 10 cpu_of "$procs"
	wait_gone "a's groups" 10 eval "cgroups_of $DPID | grep -- '-$a\$'"
	expect_eq "b still runs" "$(sbsh "$b" 'echo b')" b
	reap_release
	stop_daemon
}

# box_procs ID: the host pids in the box's own group (not its calls').
box_procs() {
	local f
	for f in /sys/fs/cgroup/unified/corral/corral-"$DPID-$1"/cgroup.procs \
		 /sys/fs/cgroup/corral*/corral-"$DPID-$1"/cgroup.procs \
		 /sys/fs/cgroup/pids/corral*/corral-"$DPID-$1"/cgroup.procs; do
		[ -r "$f" ] && { cat "$f"; return 0; }
	done
}

# held_spare ID: the box's process forked ahead for its next call, while
# it waits in the box's own group for its move (a child of init there).
held_spare() {
	local procs p
	procs=" $(box_procs "$1" | tr '\n' ' ') "
	for p in $procs; do
		case "$procs" in
		*" $(awk '{print $4}' /proc/"$p"/stat 2>/dev/null) "*) echo "$p"; return 0 ;;
		esac
	done
}

# await_hold: until the daemon's mover holds a move on $T/move (its pid),
# or CMD's pid $2 ended first (then nothing).
await_hold() {
	local i=0
	while [ $i -lt 200 ] && [ -z "$(helper_on "$T/move")" ]; do
		[ -n "${1:-}" ] && ! kill -0 "$1" 2>/dev/null && return 0
		sleep 0.05; i=$((i + 1))
	done
	helper_on "$T/move"
}

# A process is moved into its groups by a helper of the daemon
# (cgroup_move.c), not on its loop: a write to cgroup.procs may wait
# 20-30 ms for the kernel, and the loop serves every box.  Each move is
# held here until the test lets it go: while a new box's init waits, the
# daemon answers and the create does not; while a call's process waits,
# the call does not run.
t_moves_off_loop() {
	local hp cr cp
	mkfifo "$T/move"
	exec 7<>"$T/move"	# read-write: the helper's open does not wait for us
	# not the daemon's: our close is the helper's EOF
	CORRAL_TEST_MOVE_FIFO=$T/move start_daemon 7>&-
	"$HTTPC" -sS --max-time 60 --unix-socket "$SOCK" -X POST -d '{"idle_freeze_ms": 0}' \
		-o "$T/a.json" -w '%{http_code}' http://localhost/v1/sandboxes > "$T/a.code" 2>&1 &
	cr=$!
	hp=$(await_hold "$cr")
	if [ -z "$hp" ]; then
		wait "$cr" || true
		rm -f "$T/move"; exec 7>&-
		a=$(pyjq 'v["id"]' "$T/a.json")
		if [ "$(< "$T/a.code")" = 201 ] && ! cgroup_mode "$a"; then
			stop_daemon
			skip "no cgroups: no process is moved"
			return 77
		fi
		fail "no helper of the daemon moves a's init: $(< "$T/a.code")"
		stop_daemon
		return 1
	fi
	expect_eq "the helper's name" "$(cat /proc/"$hp"/comm)" corral-move
	code=$(api GET /v1/health)
	expect_code "health while a's init waits for its move" "$code" 200
	kill -0 "$cr" 2>/dev/null || fail "a was created before its init was moved: $(< "$T/a.code")"
	printf x >&7
	wait "$cr" || true
	expect_eq "a, once its init is moved" "$(< "$T/a.code")" 201
	a=$(pyjq 'v["id"]' "$T/a.json")
	# now its next call's process, forked ahead, waits for its move
	[ -n "$(await_hold)" ] || fail "a's next process is not held"
	[ -n "$(held_spare "$a")" ] || fail "no process of a waits in a's own group"
	"$HTTPC" -sS --max-time 30 --unix-socket "$SOCK" -X POST \
		-d "$(jbody command 'echo ran')" -o "$T/held.out" -w '%{http_code}' \
		"http://localhost/v1/sandboxes/$a/exec" > "$T/held.code" 2>&1 &
	cp=$!
	sleep 0.5
	kill -0 "$cp" 2>/dev/null ||
		fail "a's call answered while its process's move was held: $(< "$T/held.code")"
	[ -n "$(held_spare "$a")" ] || fail "the held process left a's own group before its move"
	code=$(api GET "/v1/sandboxes/$a")
	expect_code "get a while its call's move is held" "$code" 200
	printf x >&7
	wait "$cp" || true
	expect_eq "a's call, once moved" "$(< "$T/held.code")" 200
	expect_eq "its stdout" "$(pyjq 'v["stdout"]' "$T/held.out")" ran
	# no more holds: the helper reads EOF, and finds no FIFO after
	rm -f "$T/move"
	exec 7>&-
	b=$(mksb '{"idle_freeze_ms": 0}')
	expect_eq "b runs" "$(sbsh "$b" 'echo b')" b
	expect_eq "one helper for every box" "$(cg_mover_of "$DPID")" "$hp"
	stop_daemon
}

# An ended call's empty group is removed by the daemon's cgroup mover, not
# on its loop: an rmdir in the cgroup2 tree waits on RCU now and then
# (7.3 ms seen) and held every request meanwhile.  The removal is held
# here (CORRAL_TEST_RMDIR_FIFO): the group is still there and the daemon
# answers; let go, the box runs another call and the ended calls' groups go.
t_call_group_removed_off_loop() {
	local a hp i
	mkfifo "$T/rmdir"
	exec 8<>"$T/rmdir"	# read-write: the helper's open does not wait for us
	# not the daemon's: our close is the helper's EOF
	CORRAL_TEST_RMDIR_FIFO=$T/rmdir start_daemon 8>&-
	a=$(mksb '{"idle_freeze_ms": 0}')
	if ! cgroup_mode "$a"; then
		rm -f "$T/rmdir"; exec 8>&-
		stop_daemon
		skip "no cgroups: no group to remove"
		return 77
	fi
	expect_eq "a's first call" "$(sbsh "$a" 'echo one')" one
	for i in $(seq 200); do
		hp=$(helper_on "$T/rmdir")
		[ -n "$hp" ] && break
		sleep 0.05
	done
	if [ -z "$hp" ]; then
		fail "no helper of the daemon holds the removal of a's first call's group"
	else
		expect_eq "the remover's name" "$(cat /proc/"$hp"/comm)" corral-move
	fi
	[ -n "$(find /sys/fs/cgroup -maxdepth 5 -type d -path "*/corral-$DPID-$a/corral-c1" \
		2>/dev/null)" ] || fail "the first call's group went before its removal was let go"
	code=$(api GET /v1/health)
	expect_code "health while a group's removal is held" "$code" 200
	code=$(api GET "/v1/sandboxes/$a")
	expect_code "get a while its call's group's removal is held" "$code" 200
	# no more holds: the helper reads EOF, and finds no FIFO after
	rm -f "$T/rmdir"
	exec 8>&-
	expect_eq "a's next call" "$(sbsh "$a" 'echo two')" two
	wait_gone "the ended calls' groups" 10 find /sys/fs/cgroup -maxdepth 5 -type d \
		\( -path "*/corral-$DPID-$a/corral-c1" -o -path "*/corral-$DPID-$a/corral-c2" \)
	stop_daemon
}

# A call's group still in use when the mover first tries to remove it (a
# background process) is kept, charged, and removed on a later tick, once
# its last process has ended.
t_call_group_in_use_removed_once_empty() {
	local a g
	start_daemon
	a=$(mksb '{"idle_freeze_ms": 0}')
	if ! cgroup_mode "$a"; then
		stop_daemon
		skip "no cgroups: no group to remove"
		return 77
	fi
	# the process lives until let go (/tmp/go, put below; 30 s at most),
	# not for a time: a test shell stalled past it on a loaded host saw
	# the group go with its ended process
	expect_eq "a call that leaves a process" \
		"$(sbsh "$a" 'i=0; while [ ! -e /tmp/go ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done >/dev/null 2>&1 & echo left')" left
	# the mover's first try comes at the call's end: past it by now, most often
	sleep 0.5
	# find exits 1 where another lane's group went while it looked
	g=$(find /sys/fs/cgroup -maxdepth 5 -type d -path "*/corral-$DPID-$a/corral-c1" 2>/dev/null) || true
	[ -n "$g" ] || fail "the first call's group went while its process ran"
	code=$(api PUT "/v1/sandboxes/$a/files?path=/tmp/go" --data-binary go)
	expect_code "put /tmp/go: the process may end" "$code" 201
	wait_gone "the first call's group, its process ended" 10 find /sys/fs/cgroup \
		-maxdepth 5 -type d -path "*/corral-$DPID-$a/corral-c1"
	expect_eq "a's next call" "$(sbsh "$a" 'echo two')" two
	stop_daemon
}

# box_files_open ID: the daemon's fds on files of box ID's own group (not
# of its calls' groups), one line each
box_files_open() {
	local f l
	for f in /proc/"$DPID"/fd/*; do
		l=$(readlink "$f" 2>/dev/null) || continue
		case "$l" in
		*/corral-"$DPID-$1"/*/*) ;;
		*/corral-"$DPID-$1"/*) echo "$l" ;;
		esac
	done
}

# The box's counters' files are kept open while it has calls (a pread
# each at a call's start and end, no open and close on its path), and
# closed once it is frozen: a daemon's many idle boxes hold no more fds.
# The freeze comes 2 s after the call: with 300 ms, CI's slower host
# (a fault 12 us, a syscall 1 us, three lanes) froze the box before the
# scan of the daemon's fds that follows the call's answer.
t_box_counters_kept_while_busy() {
	local a
	start_daemon
	a=$(mksb '{"idle_freeze_ms": 2000}')
	if ! cgroup_mode "$a"; then
		stop_daemon
		skip "no cgroups: no counters to keep"
		return 77
	fi
	expect_eq "a call" "$(sbsh "$a" 'echo one')" one
	[ -n "$(box_files_open "$a")" ] ||
		fail "no file of a's group kept open right after its call"
	wait_gone "a's group's files, a frozen" 20 box_files_open "$a"
	expect_eq "a's state" "$(sbget "$a" 'v["state"]')" frozen
	expect_eq "a call after the freeze" "$(sbsh "$a" 'echo two')" two
	[ -n "$(box_files_open "$a")" ] ||
		fail "no file of a's group open again after its next call"
	stop_daemon
}

# hold_a_spare: a daemon whose cgroup moves wait on $T/move (fd 7, a byte
# lets one go), a box $a whose init was let go, and $sp, the process its
# next call will take, held in its move.  77: no cgroups, nothing moved.
hold_a_spare() {
	local cr
	mkfifo "$T/move"
	exec 7<>"$T/move"
	# not the daemon's: our close is the helper's EOF
	CORRAL_TEST_MOVE_FIFO=$T/move start_daemon 7>&-
	"$HTTPC" -sS --max-time 60 --unix-socket "$SOCK" -X POST -d '{"idle_freeze_ms": 0}' \
		-o "$T/a.json" -w '%{http_code}' http://localhost/v1/sandboxes > "$T/a.code" 2>&1 &
	cr=$!
	if [ -z "$(await_hold "$cr")" ]; then
		wait "$cr" || true
		rm -f "$T/move"; exec 7>&-
		stop_daemon
		skip "no cgroups: no process is moved"
		return 77
	fi
	printf x >&7	# a's init
	wait "$cr" || true
	a=$(pyjq 'v["id"]' "$T/a.json")
	[ -n "$(await_hold)" ] || fail "a's next process is not held"
	sp=$(held_spare "$a")
	[ -n "$sp" ] || { fail "no process of a waits for its move"; stop_daemon; return 1; }
}

# held_other ID PID: a process of box ID other than init and PID, waiting
# for its move (within 10 s)
held_other() {
	local i=0 p
	while [ $i -lt 100 ]; do
		p=$(held_spare "$1")
		[ -n "$p" ] && [ "$p" != "$2" ] && { echo "$p"; return 0; }
		sleep 0.1
		i=$((i + 1))
	done
	return 1
}

# Attacker: the sandbox kills its next call's process after the call took
# it and before the call reached it (here while its move is held).  The
# call read "killed by signal 9 (SIGKILL)", its command never run.  Now
# the loss is an exec.lost naming the call, and the call runs in a
# process forked anew; a second loss ends it "not started", never as a
# command that died.  (The clients here close fd 7, the FIFO's other end:
# the held move waits for its last writer.)
t_call_process_killed_before_the_call() {
	local cp sp2 i=0
	hold_a_spare || return $?
	"$HTTPC" -sS --max-time 30 --unix-socket "$SOCK" -X POST \
		-d "$(jbody tool_call_id first command 'echo ran')" -o "$T/first.json" \
		"http://localhost/v1/sandboxes/$a/exec" 2>/dev/null 7>&- &
	cp=$!
	until [ "$(sbget "$a" 'v["running"]')" = 1 ] || [ $i -ge 100 ]; do
		sleep 0.05; i=$((i + 1))
	done
	kill -KILL "$sp"
	sp2=$(held_other "$a" "$sp") || fail "no process forked anew for the call"
	rm -f "$T/move"
	exec 7>&-
	wait "$cp" || true
	expect_eq "the call ran in the new one" "$(pyjq '(v["status"], v["stdout"], v["reason"])' "$T/first.json")" \
		"('exited', 'ran\n', 'exited with status 0')"
	expect_contains "the loss said, the call named" "$(grep '"type":"exec.lost"' "$STATE/audit.jsonl")" \
		'"reason":"the process forked for call first was killed by signal 9 (SIGKILL) before the call reached it; the call runs in a new one"'
	expect_contains "... by its call" "$(grep '"type":"exec.lost"' "$STATE/audit.jsonl")" '"call":"first"'
	# twice: not started, and said so
	stop_daemon
	hold_a_spare || return $?
	"$HTTPC" -sS --max-time 30 --unix-socket "$SOCK" -X POST \
		-d "$(jbody tool_call_id second command 'echo ran')" -o "$T/second.json" \
		"http://localhost/v1/sandboxes/$a/exec" 2>/dev/null 7>&- &
	cp=$!
	i=0
	until [ "$(sbget "$a" 'v["running"]')" = 1 ] || [ $i -ge 100 ]; do
		sleep 0.05; i=$((i + 1))
	done
	kill -KILL "$sp"
	sp2=$(held_other "$a" "$sp") || fail "no process forked anew for the call"
	kill -KILL "$sp2"
	# dead before its move is let go: killed but not yet exited, its gate
	# still open, it is moved and sent the call, which then ends as a
	# command killed (CI saw that once, under load).  Out of the group's
	# list once it exits, its files closed before.
	wait_gone "the second process" 10 eval "box_procs $a | grep -x $sp2"
	rm -f "$T/move"
	exec 7>&-
	wait "$cp" || true
	expect_eq "not started, said" "$(pyjq '(v["status"], v["signal"], v["stdout"], v["reason"])' "$T/second.json")" \
		"('signaled', 9, '', 'not started: the 2 processes forked for the call died before the call reached them, the last killed by signal 9 (SIGKILL)')"
	expect_contains "the second loss ends it" "$(grep '"type":"exec.lost"' "$STATE/audit.jsonl")" \
		'before the call reached it; the call is not run"'
	expect_eq "the box still runs calls" "$(sbsh "$a" 'echo after')" after
	stop_daemon
}

# A process the daemon cannot put in its groups is killed rather than run
# unaccounted (cgroup_move.c: move_end).  That kill is the daemon's, and
# it was said nowhere: a spare so killed left no event, and a call whose
# two processes were read "not started: ... the last killed by signal 9",
# as if something in the sandbox had killed them (CI saw that once, in
# mcp.sh's SDK session as 65534).  Here the mover dies holding the
# spare's move, then the call's group is removed under a held move.
t_moves_that_fail_said() {
	local hp cp dirs i=0
	hold_a_spare || return $?
	hp=$(helper_on "$T/move")
	[ -n "$hp" ] || { fail "no mover holds the spare's move"; stop_daemon; return 1; }
	kill -KILL "$hp"
	rm -f "$T/move"
	exec 7>&-
	wait_gone "the spare" 10 eval "box_procs $a | grep -x $sp"
	expect_eq "a runs" "$(sbsh "$a" 'echo a')" a
	expect_contains "the spare's kill said" "$(grep '"type":"exec.lost"' "$STATE/audit.jsonl")" \
		'"reason":"the daemon killed the process forked ahead for the next call, as it could not be moved into its group (the cgroup mover ended before process '
	stop_daemon
	hold_a_spare || return $?
	"$HTTPC" -sS --max-time 30 --unix-socket "$SOCK" -X POST \
		-d "$(jbody tool_call_id ungrouped command 'echo ran')" -o "$T/call.json" \
		"http://localhost/v1/sandboxes/$a/exec" 2>/dev/null 7>&- &
	cp=$!
	until [ "$(sbget "$a" 'v["running"]')" = 1 ] || [ $i -ge 100 ]; do
		sleep 0.05; i=$((i + 1))
	done
	# the spare's group, now the call's (the box's first: c1), empty until
	# the held move; not the next call's, made meanwhile
	dirs=$(find /sys/fs/cgroup -mindepth 3 -maxdepth 5 -type d -path "*/corral-$DPID-$a/*" \
		\( -name c1 -o -name corral-c1 \) 2>/dev/null) || true	# another lane's group gone meanwhile
	[ -n "$dirs" ] || fail "no group of a's call"
	for d in $dirs; do rmdir "$d" || fail "cannot remove $d"; done
	rm -f "$T/move"
	exec 7>&-
	wait "$cp" || true
	expect_eq "not started" "$(pyjq '(v["status"], v["signal"], v["stdout"])' "$T/call.json")" \
		"('signaled', 9, '')"
	expect_contains "the reason names the daemon's kill" "$(pyjq 'v["reason"]' "$T/call.json")" \
		"the last killed by signal 9 (SIGKILL) (the daemon killed it: it could not be moved into the call's group: "
	expect_contains "an exec.error names the call" "$(grep '"type":"exec.error"' "$STATE/audit.jsonl")" \
		'"call":"ungrouped"'
	expect_eq "a still runs calls" "$(sbsh "$a" 'echo after')" after
	stop_daemon
}

# Attacker: the daemon's watchdog removes its cgroups, found by the pid in
# their names, once the daemon is gone.  A pid is anyone's once its
# process is reaped, and a sandbox wraps this host's pid_max in seconds:
# a watchdog whose daemon's pipe ended late removed the groups of
# whatever process had the pid by then (another daemon's sandboxes).
# Here the watchdog is held while its daemon is killed and reaped, a
# process of the test's takes the pid, and a group named by it waits.
t_watchdog_leaves_a_reused_pids_groups() {
	local wd pid parent="" g vp hp
	[ "$(id -u)" = 0 ] || { skip "a process at a chosen pid quickly: root (ns_last_pid)"; return 77; }
	start_daemon
	mksb > /dev/null || { stop_daemon; return 1; }
	for g in /sys/fs/cgroup/pids/corral /sys/fs/cgroup/corral; do
		[ -d "$g" ] && { parent=$g; break; }
	done
	[ -n "$parent" ] || { stop_daemon; skip "no parent cgroup of root's sandboxes"; return 77; }
	wd=$(ps -o pid=,comm= --ppid "$DPID" | awk '$2 == "corral-watchdog" {print $1}')
	[ -n "$wd" ] || { fail "no watchdog of the daemon"; stop_daemon; return 1; }
	kill -STOP "$wd"
	echo "$wd" > "$T/stopped_by_test"	# on_test_exit continues it if the test fails
	# Orphaned by its daemon's kill below, the watchdog is no longer
	# below this suite's shell (lib.sh's kill would leave it alone); it
	# is stopped until CONT, so its pid cannot have gone to anyone else.
	pid=$DPID
	kill -KILL "$pid"
	wait "$pid" 2> /dev/null || true
	echo "$pid" >> "$T/stopped"
	DPID=""
	take_pid "$pid"
	hp=$HP vp=$VP
	if [ "$vp" != "$pid" ]; then
		kill "$hp" 2> /dev/null; wait "$hp" 2> /dev/null || true
		builtin kill -CONT "$wd"; : > "$T/stopped_by_test"
		skip "pid $pid not had again (another process took it)"
		return 77
	fi
	g=$parent/corral-$pid-reused
	mkdir "$g" || fail "cannot make $g"
	builtin kill -CONT "$wd"; : > "$T/stopped_by_test"
	wait_gone "the watchdog" 10 eval "[ -e /proc/$wd ] && echo $wd"
	[ -d "$g" ] || fail "the watchdog removed $g, the group of the process now at pid $pid"
	rmdir "$g" 2> /dev/null
	kill "$hp" 2> /dev/null
	wait "$hp" 2> /dev/null || true
	expect_contains "said in the daemon's log" "$(< "$DLOG")" \
		"corral-watchdog: pid $pid is another process's now"
	# the pid nobody's again: the next start on the state sweeps them
	SOCK=$T/sweep.sock
	start_daemon
	stop_daemon
	wait_gone "the killed daemon's groups, after the next start" 5 cgroups_of "$pid"
}

# Attacker (a client, found by tests/chaos_serve.py): a caller that goes
# away while its call's process still waits for its move.  The call is
# killed before it was sent (its message dropped); the move that ends
# after must not send it: the daemon died of SIGSEGV there, every box
# with it.
t_caller_gone_while_its_move_waits() {
	local cp fds i
	hold_a_spare || return $?
	# stopped, it reads its gate's EOF only once the move has ended
	kill -STOP "$sp"
	"$HTTPC" -sS --max-time 30 --unix-socket "$SOCK" -X POST \
		-d "$(jbody command 'echo ran')" -o /dev/null \
		"http://localhost/v1/sandboxes/$a/exec" 2>/dev/null &
	cp=$!
	i=0
	until [ "$(sbget "$a" 'v["running"]')" = 1 ] || [ $i -ge 100 ]; do
		sleep 0.05; i=$((i + 1))
	done
	fds=$(ls /proc/"$DPID"/fd | wc -l)
	kill "$cp" 2>/dev/null || true
	wait "$cp" 2>/dev/null || true
	# the daemon hears its caller leave: the connection and the gate close
	i=0
	while [ "$(ls /proc/"$DPID"/fd | wc -l)" -gt $((fds - 2)) ] && [ $i -lt 100 ]; do
		sleep 0.05; i=$((i + 1))
	done
	printf x >&7	# the move of a call that was killed
	rm -f "$T/move"
	exec 7>&-
	code=$(api GET /v1/health)
	expect_code "health once the killed call's move ended" "$code" 200
	kill -CONT "$sp" 2>/dev/null
	alive "$DPID" || fail "the daemon died: $(log_digest "$DLOG")"
	expect_eq "a still runs calls" "$(sbsh "$a" 'echo after')" after
	stop_daemon
}

cg_mover_of() {	# cg_mover_of PID: the daemon's cgroup mover
	local p
	for p in $(cat /proc/"$1"/task/*/children 2>/dev/null); do
		[ "$(cat /proc/"$p"/comm 2>/dev/null)" = corral-move ] && echo "$p"
	done
	return 0
}

# Attacker: the process a move waits for dies (a sandbox can signal its
# own), and its pid may be anyone's by the time the helper writes.  The
# helper asks the process's pidfd first and writes nothing; the box forks
# a new one for its next call.  And a helper that was killed is replaced.
t_move_of_a_dead_process() {
	local hp st i
	command -v strace >/dev/null || { skip "no strace"; return 77; }
	hold_a_spare || return $?
	kill -KILL "$sp"
	wait_gone "the killed process" 10 eval "box_procs $a | grep -x $sp"
	hp=$(helper_on "$T/move")
	strace -f -e trace=pidfd_send_signal,write -p "$hp" \
		-o "$T/mover.strace" 2> "$T/strace.err" 7>&- &
	st=$!
	echo "$st" >> "$T/tracers"
	strace_attached "$T/strace.err" "$st" ||
		fail "strace did not attach: $(head -c 300 "$T/strace.err")"
	rm -f "$T/move"
	exec 7>&-
	expect_eq "a runs, in a process of its own" "$(sbsh "$a" 'echo a')" a
	kill "$st" 2>/dev/null || true
	wait "$st" 2>/dev/null || true
	grep -q 'pidfd_send_signal(.*ESRCH' "$T/mover.strace" ||
		fail "the helper did not ask the dead process's pidfd: $(head -c 600 "$T/mover.strace")"
	! grep -qE "^[0-9]+ +write\\([0-9]+, \"$sp\"" "$T/mover.strace" ||
		fail "the helper wrote the dead process's pid $sp: $(grep -E "\"$sp\"" "$T/mover.strace" | head -3)"
	kill -KILL "$hp"
	wait_gone "the killed mover" 10 eval "cg_mover_of $DPID | grep -x $hp"
	expect_eq "a runs after its mover was killed" "$(sbsh "$a" 'echo a2')" a2
	expect_eq "and again" "$(sbsh "$a" 'echo a3')" a3
	[ -n "$(cg_mover_of "$DPID")" ] || fail "no new mover"
	b=$(mksb '{"idle_freeze_ms": 0}')
	expect_eq "a new box after it" "$(sbsh "$b" 'echo b')" b
	stop_daemon
}

# Attacker: the mover dies while a new box's init waits for its move (it
# was killed, or ran out of memory).  init must not go on outside its
# groups: it is killed, the create fails and says why, nothing of it is
# left, and the next create gets a new mover.
t_create_when_the_mover_dies() {
	local hp cr
	mkfifo "$T/move"
	exec 7<>"$T/move"
	CORRAL_TEST_MOVE_FIFO=$T/move start_daemon 7>&-
	"$HTTPC" -sS --max-time 60 --unix-socket "$SOCK" -X POST -d '{"idle_freeze_ms": 0}' \
		-o "$T/a.json" -w '%{http_code}' http://localhost/v1/sandboxes > "$T/a.code" 2>&1 7>&- &
	cr=$!
	hp=$(await_hold "$cr")
	if [ -z "$hp" ]; then
		wait "$cr" || true
		rm -f "$T/move"; exec 7>&-
		stop_daemon
		skip "no cgroups, or init moves itself in: no move to lose"
		return 77
	fi
	# killed while it holds: our close first would be its EOF, and it
	# could move init and answer before the kill (ci57 got a 201 so)
	kill -KILL "$hp"
	rm -f "$T/move"
	exec 7>&-
	wait "$cr" || true
	code=$(< "$T/a.code")
	expect_eq "no box whose init was never moved" "$code" 500
	expect_contains "the create says why" "$(< "$T/a.json")" "the cgroup mover ended before"
	code=$(api GET /v1/sandboxes)
	expect_eq "none listed" "$(jq 'len(v["sandboxes"])')" 0
	wait_gone "the failed box's groups" 10 eval "cgroups_of $DPID | grep -v freezer-hold"
	b=$(mksb '{"idle_freeze_ms": 0}')
	expect_eq "the next box runs" "$(sbsh "$b" 'echo b')" b
	[ -n "$(cg_mover_of "$DPID")" ] || fail "no new mover for the next box"
	stop_daemon
}

# v1: an empty group held FROZEN while the daemon has a box, so that no
# box's freeze or thaw is the host's first or last (cgroup.c says why).
t_freezer_hold() {
	start_daemon
	id=$(mksb '{"idle_freeze_ms": 0}')
	hold=$(find /sys/fs/cgroup/freezer -maxdepth 3 -type d -name "corral-$DPID-.freezer-hold-*" 2>/dev/null || true)
	if ! cgroup_mode "$id" || [ -z "$(find /sys/fs/cgroup/freezer -maxdepth 3 \
	     -type d -name "corral-$DPID-$id" 2>/dev/null)" ]; then
		stop_daemon
		skip "no v1 freezer for the daemon here"
		return 77
	fi
	[ -n "$hold" ] || { fail "no freezer hold while a box lives"; stop_daemon; return 1; }
	expect_eq "held frozen" "$(< "$hold/freezer.state")" FROZEN
	expect_eq "empty" "$(< "$hold/cgroup.procs")" ""
	code=$(api POST "/v1/sandboxes/$id/pause")
	expect_code "pause" "$code" 200
	code=$(api POST "/v1/sandboxes/$id/resume")
	expect_code "resume" "$code" 200
	expect_eq "the box is not frozen by the hold" "$(sbsh "$id" 'echo up')" up
	code=$(api DELETE "/v1/sandboxes/$id")
	expect_code "delete the last box" "$code" 200
	wait_gone "the hold after the last box" 10 find /sys/fs/cgroup/freezer -maxdepth 3 \
		-type d -name "corral-$DPID-.freezer-hold-*"
	stop_daemon
}

# A delete while the freeze of a pause is under way leaves nothing.
t_delete_during_freeze() {
	start_daemon
	id=$(mksb '{"idle_freeze_ms": 0}')
	code=$(api POST "/v1/sandboxes/$id/processes" -d '{"command": "for i in 1 2 3 4; do (while :; do :; done) & done; wait", "tool_call_id": "burn"}')
	expect_code "burners" "$code" 201
	if ! cgroup_mode "$id"; then
		stop_daemon
		skip "no freezer without cgroups"
		return 77
	fi
	hp=$(host_pid "$id" burn)
	code=$(api POST "/v1/sandboxes/$id/pause")
	expect_code "pause" "$code" 200
	code=$(api DELETE "/v1/sandboxes/$id")
	expect_code "delete during the freeze" "$code" 200
	code=$(api GET "/v1/sandboxes/$id")
	expect_code "gone" "$code" 404
	wait_gone "the burner" 10 alive_pid "$hp"
	wait_gone "its groups" 10 eval "cgroups_of $DPID | grep -- '-$id\$'"
	code=$(api GET /v1/health)
	expect_code "the daemon after" "$code" 200
	stop_daemon
}

t_ttl() {
	start_daemon
	t0=$(now_ms)
	id=$(mksb '{"ttl_seconds": 1}')
	expect_eq "ttl" "$(sbget "$id" 'v["ttl_seconds"]')" 1.0
	init=$(grep "\"sandbox\":\"$id\"" "$STATE/audit.jsonl" | grep '"type":"sandbox.ready"' | jq 'v["pid"]' /dev/stdin)
	i=0
	while [ $i -lt 200 ]; do
		code=$(api GET "/v1/sandboxes/$id")
		[ "$code" = 404 ] && break
		sleep 0.1; i=$((i + 1))
	done
	ms=$(( $(now_ms) - t0 ))
	expect_error "gone" "$code" 404 not_found
	[ "$ms" -ge 900 ] || fail "a 1 s TTL ended after $ms ms"
	code=$(api GET "/v1/events?sandbox=$id")
	expect_code "events" "$code" 200
	expect_contains "ttl event" "$(< "$T/body")" '"type":"ttl.expired"'
	expect_contains "destroy event" "$(< "$T/body")" '"type":"sandbox.destroy"'
	wait_gone "the expired sandbox's init" 5 alive_pid "$init"
	# a call running when the TTL ends gets an answer, not a hang
	id=$(mksb '{"ttl_seconds": 1}')
	t0=$(now_ms)
	code=$(ex "$id" '{"command": "sleep 34"}')
	ms=$(( $(now_ms) - t0 ))
	expect_code "call cut by the TTL" "$code" 200
	expect_eq "status" "$(jq 'v["status"] != "exited"')" true
	# and says which limit ended it (it said only "the sandbox was destroyed")
	expect_eq "reason" "$(jq 'v["reason"]')" \
		"the sandbox was destroyed while the call ran: the sandbox's TTL expired"
	[ "$ms" -lt 20000 ] || fail "the call answered after $ms ms (its command sleeps 34 s)"
	sleep 0.5
	code=$(api GET /v1/health)
	expect_code "the daemon after the TTL" "$code" 200
	stop_daemon
}

# Within one sandbox, the seq of its events only grows: the notes the
# daemon writes for it (ttl.expired, sandbox.lost) are part of its sequence.
t_events_seq_per_sandbox() {
	start_daemon
	id=$(mksb '{"ttl_seconds": 1}')
	# a call for events of its own; on a busy machine the TTL may win the
	# race, which this test does not judge
	api POST "/v1/sandboxes/$id/exec" -d '{"command": "true"}' >/dev/null
	i=0
	while [ $i -lt 200 ] && [ "$(api GET "/v1/sandboxes/$id")" != 404 ]; do
		sleep 0.1; i=$((i + 1))
	done
	code=$(api GET "/v1/events?sandbox=$id")
	$PY - "$T/body" <<'EOF' || fail "seq of $id: $(cut -c1-120 "$T/body")"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
seq = [e["seq"] for e in ev]
assert any(e["type"] == "ttl.expired" for e in ev), ev
assert all(a < b for a, b in zip(seq, seq[1:])), "seq %s (types %s)" % (seq, [e["type"] for e in ev])
EOF
	stop_daemon
}

t_halt() {
	start_daemon
	id=$(mksb)
	reason="stopped by the operator: the agent read ~/.ssh (test $$)"
	api PUT "/v1/sandboxes/$id/files?path=/workspace/evidence" --data-binary evidence >/dev/null
	code=$(api POST "/v1/sandboxes/$id/processes" -d '{"command": "sleep 35", "tool_call_id": "bg"}')
	pid=$(jq 'v["pid"]')
	hp=$(host_pid "$id" bg)
	code=$(api POST "/v1/sandboxes/$id/halt" -d "$(jbody reason "$reason")")
	expect_code "halt" "$code" 200
	expect_eq "halted" "$(jq 'v["state"]')" halted
	expect_eq "reason" "$(jq 'v["halt_reason"]')" "$reason"
	for what in exec processes; do
		code=$(api POST "/v1/sandboxes/$id/$what" -d '{"command": "echo no"}')
		expect_error "$what after halt" "$code" 409 conflict
		expect_contains "$what detail" "$(jq 'v["detail"]')" "$reason"
	done
	for what in resume pause; do
		code=$(api POST "/v1/sandboxes/$id/$what")
		expect_error "$what after halt" "$code" 409 conflict
	done
	expect_eq "still halted" "$(sbget "$id" 'v["state"]')" halted
	wait_gone "the halted sandbox's process $hp" 5 alive_pid "$hp"
	code=$(api GET "/v1/sandboxes/$id/processes/$pid")
	expect_eq "process result" "$(jq 'v["state"]') $(jq 'v["result"]["status"]')" "exited halted"
	ev=$(grep "\"sandbox\":\"$id\"" "$STATE/audit.jsonl" | grep '"type":"halt"')
	expect_contains "halt event" "$ev" "$reason"
	code=$(api DELETE "/v1/sandboxes/$id")
	expect_code "delete halted" "$code" 200
	stop_daemon
}

# A halt's reason is kept in 511 bytes: 300 "é" (600 bytes, under the API's
# 1000) were cut inside a character, and json_pack("s") of the cut one
# failed: the sandbox's GET answered no JSON and `corral ls` lost it, as
# the halted sandbox it was meant to show.  The whole reason still goes
# into the halt event; the sandbox's is cut at a character.
t_halt_reason_cut_keeps_the_sandbox() {
	start_daemon
	id=$(mksb)
	reason=$($PY -c 'print("\u00e9" * 300)')
	code=$(api POST "/v1/sandboxes/$id/halt" -d "$(jbody reason "$reason")")
	expect_code "halt" "$code" 200
	expect_eq "halted" "$(sbget "$id" 'v["state"]')" halted
	expect_eq "the reason, cut at a character" "$(sbget "$id" 'v["halt_reason"]')" \
		"$($PY -c 'print("\u00e9" * 255)')"
	"$CORRAL" ls --socket "$SOCK" > "$TEST_TMP/ls.out" 2>&1 || fail "ls: $(cat "$TEST_TMP/ls.out")"
	expect_contains "ls shows it" "$(cat "$TEST_TMP/ls.out")" "$id"
	ev=$(grep "\"sandbox\":\"$id\"" "$STATE/audit.jsonl" | grep '"type":"halt"')
	expect_eq "the halt event, whole" "$(printf '%s' "$ev" | $PY -c '
import json, sys; print(json.load(sys.stdin)["reason"] == "\u00e9" * 300)')" True
	code=$(api DELETE "/v1/sandboxes/$id")
	expect_code "delete halted" "$code" 200
	stop_daemon
}

# A halted sandbox refuses every call with its halt reason (409), files
# included: a file written before the halt is either still served or
# refused with the reason, never a 404 "No such file"; a write is refused
# with the reason, not a 403 "Read-only file system".
t_halt_refuses_files() {
	start_daemon
	id=$(mksb)
	reason="halted for files (test $$)"
	api PUT "/v1/sandboxes/$id/files?path=/workspace/evidence" --data-binary evidence >/dev/null
	code=$(api POST "/v1/sandboxes/$id/halt" -d "$(jbody reason "$reason")")
	expect_code "halt" "$code" 200
	code=$(api GET "/v1/sandboxes/$id/files?path=/workspace/evidence")
	if [ "$code" = 200 ]; then
		expect_eq "evidence" "$(body)" evidence
	else
		expect_error "get after halt" "$code" 409 conflict
		expect_contains "get detail" "$(jq 'v["detail"]')" "$reason"
	fi
	code=$(api PUT "/v1/sandboxes/$id/files?path=/workspace/new" --data-binary x)
	expect_error "put after halt" "$code" 409 conflict
	expect_contains "put detail" "$(jq 'v["detail"]')" "$reason"
	stop_daemon
}

# ---- events and the audit log ----------------------------------------------

t_events_and_audit() {
	start_daemon
	a=$(mksb '{"idle_freeze_ms": 0}')
	b=$(mksb '{"idle_freeze_ms": 0}')
	sbsh "$a" 'echo from-a' >/dev/null
	sbsh "$b" 'echo from-b' >/dev/null
	code=$(api GET /v1/events)
	expect_code "events" "$code" 200
	expect_contains "content type" "$(grep -i '^content-type:' "$T/headers")" application/x-ndjson
	cmp "$T/body" "$STATE/audit.jsonl" || fail "GET /v1/events is not the audit log"
	code=$(api GET "/v1/events?sandbox=$a")
	expect_code "events of a" "$code" 200
	$PY - "$T/body" "$a" <<'EOF' || fail "events of $a: $(cut -c1-150 "$T/body")"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
assert ev and all(e["sandbox"] == sys.argv[2] for e in ev), ev
types = [e["type"] for e in ev]
for t in ("sandbox.create", "sandbox.ready", "exec.start", "exec.end"):
    assert t in types, (t, types)
ready = [e for e in ev if e["type"] == "sandbox.ready"][0]
# init: its host pid, 1 in its own pid namespace, and no call's
assert ready["pid"] > 1 and ready["sandbox_pid"] == 1 and "call" not in ready, ready
for e in ev:
    for k in ("seq", "time", "type", "prev"):
        assert k in e, (k, e)
EOF
	code=$(api GET "/v1/events?sandbox=sb-000000000000")
	expect_error "events of nobody" "$code" 404 not_found
	# follow: the stream stays open and gets what happens next
	curl -sS -N --max-time 20 --unix-socket "$SOCK" \
		"http://localhost/v1/events?sandbox=$b&follow=1" > "$T/follow" 2>/dev/null &
	fpid=$!
	i=0
	while [ $i -lt 50 ] && ! grep -q '"type":"exec.end"' "$T/follow"; do sleep 0.1; i=$((i + 1)); done
	lines_before=$(wc -l < "$T/follow")
	code=$(ex "$b" '{"command": "echo followed", "tool_call_id": "followed-call"}')
	i=0
	while [ $i -lt 50 ] && ! grep -q '"call":"followed-call".*"type":"exec.end"\|"type":"exec.end".*"call":"followed-call"' "$T/follow"; do
		sleep 0.1; i=$((i + 1))
	done
	kill "$fpid" 2>/dev/null; wait "$fpid" 2>/dev/null || true
	[ "$(wc -l < "$T/follow")" -gt "$lines_before" ] || fail "follow got nothing new"
	grep -q 'followed-call' "$T/follow" || fail "follow missed the call: $(tail -3 "$T/follow")"
	! grep -q "\"sandbox\":\"$a\"" "$T/follow" || fail "follow of $b got $a's events"
	api DELETE "/v1/sandboxes/$a" >/dev/null
	stop_daemon
	out=$("$CORRAL" audit verify "$STATE/audit.jsonl" 2>&1) || fail "audit verify: $out"
	expect_contains "verify" "$out" "ok"
	expect_contains "destroy recorded" "$(< "$STATE/audit.jsonl")" "\"sandbox\":\"$b\",\"type\":\"sandbox.destroy\""
}

# foreign_listener PATH GOT N: a unix socket at PATH that uid 4242 listens
# on (mode 666), in the background (its pid in LPID), for at most N
# connections, each read for 2 s; GOT holds the bytes they sent in all,
# written after each, and is there once one came.  Gone after 30 s idle,
# or when the test ends.
foreign_listener() {
	setpriv --reuid=4242 --regid=4242 --clear-groups $PY - "$1" "$2" "$3" <<'EOF' &
import os, select, socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1]); os.chmod(sys.argv[1], 0o666); s.listen(8)
got = 0
for _ in range(int(sys.argv[3])):
    if not select.select([s], [], [], 30)[0]:
        break
    c, _ = s.accept()
    if select.select([c], [], [], 2)[0]:
        got += len(c.recv(65536))
    c.close()
    open(sys.argv[2] + ".new", "w").write(str(got))
    os.rename(sys.argv[2] + ".new", sys.argv[2])
EOF
	LPID=$!
	echo "$LPID" >> "$T/fixtures"	# ended by on_test_exit if a check fails
	[ -n "${IN_EXIT:-}" ] || trap on_test_exit EXIT
	for _ in $(seq 100); do [ -S "$1" ] && break; sleep 0.05; done
}

# A socket another user listens on, at a path the client was given (a /tmp
# one, taken before the daemon came up), gets nothing: neither a verb's
# request nor corral mcp's; both end 125 and say whose it is.
t_cli_refuses_another_users_socket() {
	[ "$ME" = 0 ] || { skip "only root can listen as another uid"; return 77; }
	local lpid rc
	mkdir -m 777 "$T/other"
	foreign_listener "$T/other/s" "$T/other/got" 2
	lpid=$LPID
	rc=0; "$CORRAL" ls --socket "$T/other/s" > /dev/null 2> "$T/e" || rc=$?
	expect_eq "ls: exit" "$rc" 125
	expect_contains "ls: said" "$(cat "$T/e")" \
		"is served by uid 4242, not by you (uid 0) or root: refusing to send it anything"
	rc=0; timeout 30 "$CORRAL" mcp --socket "$T/other/s" < /dev/null > /dev/null 2> "$T/e" || rc=$?
	expect_eq "mcp: exit" "$rc" 125
	expect_contains "mcp: said" "$(cat "$T/e")" "is served by uid 4242"
	wait "$lpid" || true
	expect_eq "nothing sent to it" "$(cat "$T/other/got" 2>/dev/null)" 0
}

# corral mcp checks who listens at its start, and again on every
# connection libcurl makes: a socket another user put at the path since
# gets nothing of a tool call, whose answer is an error.
t_mcp_refuses_a_socket_swapped_under_it() {
	[ "$ME" = 0 ] || { skip "only root can listen as another uid"; return 77; }
	local lpid mpid rc i
	start_daemon
	mkdir -m 777 "$T/sw"
	ln -s "$SOCK" "$T/sw/s"
	mkfifo "$T/mcp.in"
	timeout 60 "$CORRAL" mcp --socket "$T/sw/s" < "$T/mcp.in" > "$T/mcp.out" 2> "$T/mcp.err" &
	mpid=$!
	echo "$mpid" >> "$T/fixtures"
	exec 7> "$T/mcp.in"
	for i in $(seq 200); do grep -qs "using the daemon" "$T/mcp.err" && break; sleep 0.05; done
	expect_contains "started against root's daemon" "$(cat "$T/mcp.err")" "using the daemon at $T/sw/s"
	foreign_listener "$T/sw/s2" "$T/sw/got" 8 7>&-
	lpid=$LPID
	mv -T "$T/sw/s2" "$T/sw/s"
	printf '%s\n' '{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "sandbox_create", "arguments": {}}}' >&7
	exec 7>&-
	rc=0; wait "$mpid" || rc=$?
	for i in $(seq 100); do [ -e "$T/sw/got" ] && break; sleep 0.05; done
	kill "$lpid" 2>/dev/null || true
	wait "$lpid" || true
	expect_eq "mcp ended with its stdin" "$rc" 0
	# it was connected to, and got nothing
	expect_eq "nothing sent to it" "$(cat "$T/sw/got" 2>/dev/null || echo "no connection")" 0
	expect_contains "the call failed, saying why" "$(cat "$T/mcp.out")" \
		"is served by uid 4242, not by this session's uid 0 or root: nothing was sent to it\"}],\"isError\":true}"
	expect_contains "its answer" "$(cat "$T/mcp.out")" '"id":3,'
	expect_not_contains "no sandbox made" "$(cat "$T/mcp.out")" '"structuredContent":{"id":"sb-'
	expect_contains "said why" "$(cat "$T/mcp.err")" "is served by uid 4242, not by you (uid 0) or root"
	stop_daemon
}

# A socket that is no corral daemon: its "events" carry a window title and
# a BEL; corral events shows them escaped.
t_events_of_a_hostile_daemon() {
	printf '{"seq":1,"type":"x\033]2;owned\007"}\n' > "$T/body"
	{ printf 'HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nContent-Length: %d\r\n\r\n' \
		"$(wc -c < "$T/body")"; cat "$T/body"; } > "$T/answer"
	fake_daemon "$T/fake.sock" "$T/answer"
	timeout 30 "$CORRAL" events --socket "$T/fake.sock" > "$T/out" 2> "$T/err" < /dev/null
	wait "$FPID"
	expect_eq "escaped" "$(< "$T/out")" '{"seq":1,"type":"x\x1b]2;owned\x07"}'
}

# big_log FILE MB: an audit log of about MB MiB, chained as the daemon
# chains it, of sandboxes sb-0000000000a1 (most lines), ...a2 (one line in
# a thousand, one of them 200 KiB long) and ...a3 (the first line only)
big_log() {
	$PY - "$1" "$2" "${3:-sb-0000000000a2}" <<'EOF'
import hashlib, sys
path, mb, a2 = sys.argv[1], int(sys.argv[2]), sys.argv[3]
prev = "0" * 64
pad = "x" * 160
with open(path, "w") as f:
    n = 0
    size = 0
    while size < mb << 20:
        sb = "sb-0000000000a3" if n == 0 else a2 if n % 1000 == 7 else "sb-0000000000a1"
        reason = "y" * (200 << 10) if n == 5007 else pad
        line = '{"seq":%d,"time":"2026-01-01T00:00:00.000Z","sandbox":"%s","type":"test.filler","reason":"%s","prev":"%s"}' % (n, sb, reason, prev)
        f.write(line + "\n")
        prev = hashlib.sha256(line.encode()).hexdigest()
        size += len(line) + 1
        n += 1
EOF
}

# vm PID FIELD: a /proc/PID/status field (VmRSS, VmHWM) in KiB
vm() { awk -v f="$2:" '$1 == f { print $2 }' "/proc/$1/status"; }

# GET /v1/events on a log far larger than a step: every line, byte for
# byte; a filter's lines, one of them longer than a step; follow after it
t_events_big_log() {
	mkdir -p -m 700 "$T/state"
	big_log "$T/state/audit.jsonl" 24
	start_daemon
	code=$(api GET /v1/events)
	expect_code "events" "$code" 200
	cmp "$T/body" <(head -c "$(stat -c %s "$T/body")" "$STATE/audit.jsonl") ||
		fail "GET /v1/events is not the audit log"
	[ "$(stat -c %s "$T/body")" -ge $((24 << 20)) ] || fail "short: $(stat -c %s "$T/body") bytes"
	out=$("$CORRAL" audit verify "$T/body" 2>&1) || fail "audit verify of what was served: $out"
	code=$(api GET "/v1/events?sandbox=sb-0000000000a2")
	expect_code "events of a2" "$code" 200
	expect_eq "a2's lines" "$(grep -c '"sandbox":"sb-0000000000a2"' "$T/body")" \
		"$(grep -c '"sandbox":"sb-0000000000a2"' "$STATE/audit.jsonl")"
	expect_eq "only a2's" "$(grep -vc '"sandbox":"sb-0000000000a2"' "$T/body")" 0
	grep '"sandbox":"sb-0000000000a2"' "$STATE/audit.jsonl" | cmp - "$T/body" ||
		fail "a2's lines are not the log's, byte for byte"
	code=$(api GET "/v1/events?sandbox=sb-0000000000a3")
	expect_code "events of a3" "$code" 200
	expect_eq "a3's one line" "$(wc -l < "$T/body")" 1
	code=$(api GET "/v1/events?sandbox=sb-0000000000a4")
	expect_error "a sandbox in no line" "$code" 404 not_found
	# follow a2 through the whole log, then follow everything: a sandbox
	# made now is in the second stream once, after the log as it was
	want=$(grep -c '"sandbox":"sb-0000000000a2"' "$STATE/audit.jsonl")
	curl -sS -N --max-time 60 --unix-socket "$SOCK" \
		"http://localhost/v1/events?sandbox=sb-0000000000a2&follow=1" > "$T/follow" 2>/dev/null &
	fpid=$!
	curl -sS -N --max-time 60 --unix-socket "$SOCK" \
		"http://localhost/v1/events?follow=1" > "$T/follow-all" 2>/dev/null &
	apid=$!
	id=$(mksb '{"idle_freeze_ms": 0}')
	i=0
	while [ $i -lt 200 ] && { [ "$(wc -l < "$T/follow")" -lt "$want" ] ||
		! grep -q "\"sandbox\":\"$id\",\"type\":\"sandbox.ready\"" "$T/follow-all"; }; do
		sleep 0.1
		i=$((i + 1))
	done
	kill "$fpid" "$apid" 2>/dev/null; wait "$fpid" "$apid" 2>/dev/null || true
	grep '"sandbox":"sb-0000000000a2"' "$STATE/audit.jsonl" | cmp - "$T/follow" ||
		fail "follow of a2 is not a2's lines"
	grep -q "\"sandbox\":\"$id\"" "$T/follow-all" || fail "follow of all missed $id's create"
	cmp "$T/follow-all" <(head -c "$(stat -c %s "$T/follow-all")" "$STATE/audit.jsonl") ||
		fail "follow of all: not the log, byte for byte (a line twice or missed?)"
	api DELETE "/v1/sandboxes/$id" > /dev/null
}

# A client pipelines requests behind an answer that streams (an events
# follow, an exec's output): evhttp reads nothing until the stream ends,
# and the socket is read only so far (what the largest request needs, 64
# MiB and a head), so the client's sends block instead of the daemon
# growing (it grew 300 MiB for 300 MiB).
t_pipelined_behind_a_stream() {
	front_test
	DAEMON_WRAP="env ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=1" \
		start_daemon
	id=$(mksb)
	$PY - "$SOCK" "$DPID" "$id" > "$T/pipe" 2>&1 <<'EOF' ||
import json, socket, sys, time
sock, dpid, sid = sys.argv[1:4]
def rss():
    return int(open("/proc/%s/status" % dpid).read().split("VmRSS:")[1].split()[0])
body = b"x" * (1 << 20)
req = b"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body
heads = [b"GET /v1/events?follow=1 HTTP/1.1\r\nHost: x\r\n\r\n"]
cmd = json.dumps({"command": "sleep 30", "stream": True}).encode()
heads.append(b"POST /v1/sandboxes/%s/exec HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s"
             % (sid.encode(), len(cmd), cmd))
conns, before = [], rss()
for head in heads:
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock)
    s.sendall(head)
    time.sleep(0.3)
    s.settimeout(1)
    sent = 0
    try:
        while sent < (160 << 20):	# unbounded, the daemon takes all of it
            s.sendall(req)
            sent += len(req)
    except socket.timeout:
        pass
    conns.append(s)
    what = head.split(b" ")[1].decode()
    print("%s: %d MiB taken" % (what, sent >> 20), flush=True)
    assert sent < (80 << 20), "%s: the daemon took %d MiB behind it" % (what, sent >> 20)
grown = rss() - before
print("grown %d kB" % grown)
# two connections' 64 MiB, with ASan's shadow and chains (187 MB there);
# unbounded it is all 320 MiB sent and more
assert grown < 256 * 1024, "the daemon grew by %d kB for requests behind a stream" % grown
EOF
		fail "$(< "$T/pipe")"
	cat "$T/pipe"
	code=$(api GET /v1/health)
	expect_code "health after the pipelined floods" "$code" 200
	expect_eq "the sandbox still answers" "$(sbsh "$id" 'echo up')" up
	api DELETE "/v1/sandboxes/$id" > /dev/null
	stop_daemon
}

# Many clients read a large log at once, half of them not reading at all:
# the daemon's memory grows by about one step (64 KiB) and one queued
# chunk a client, not by the log.  Checked: the daemon's peak (VmHWM)
# grows by less than 24 MiB for 12 clients of a 32 MiB log (the whole log
# each, as it was read before, would be 384 MiB).
# A TCP client's GET /v1/events is the log without a local sandbox's
# lines (SANDBOX_LOCAL_PREFIX: its id says so, also after it is gone or
# in an earlier daemon's log), byte for byte but for each line's "prev",
# a line longer than a step among them; and that sandbox's own events
# are a 404 to it.
t_events_big_log_over_tcp() {
	local port U
	port=$(free_port)
	new_token > /dev/null
	U=http://127.0.0.1:$port
	mkdir -p -m 700 "$T/state"
	big_log "$T/state/audit.jsonl" 8 sb-h000000000a2
	# a log of a daemon that tells local sandboxes apart: all of it judged
	echo 0 > "$T/state/tcp-since"
	start_daemon --listen "127.0.0.1:$port" --token-file "$T/token"
	code=$(tcp_request -H "Authorization: Bearer $(< "$T/token")" "$U/v1/events")
	expect_code "events over TCP" "$code" 200
	[ "$(stat -c %s "$T/body")" -ge $((6 << 20)) ] || fail "short: $(stat -c %s "$T/body") bytes"
	expect_eq "no local line" "$(grep -c '"sandbox":"sb-h' "$T/body")" 0
	grep -v '"sandbox":"sb-h000000000a2"' "$STATE/audit.jsonl" | sed -E 's/,"prev":"[0-9a-f]{64}"\}$/}/' |
		head -c "$(stat -c %s "$T/body")" |
		cmp - "$T/body" || fail "GET /v1/events over TCP is not the log without the local lines and their prev"
	code=$(tcp_request -H "Authorization: Bearer $(< "$T/token")" "$U/v1/events?sandbox=sb-h000000000a2")
	expect_error "a local sandbox's events over TCP" "$code" 404 not_found
	code=$(api GET /v1/events)
	expect_code "events on the socket" "$code" 200
	cmp "$T/body" <(head -c "$(stat -c %s "$T/body")" "$STATE/audit.jsonl") ||
		fail "GET /v1/events on the socket is not the audit log"
	stop_daemon
}

# A line longer than a step goes to a TCP client from the file again, a
# step at a time, without its "prev" as any other (its tail found there):
# one sandbox's lines and all of them, and the lines across the steps'
# edges, each the log's but for that.
t_events_long_line_over_tcp() {
	local port U
	port=$(free_port)
	new_token > /dev/null
	U=http://127.0.0.1:$port
	mkdir -p -m 700 "$T/state"
	big_log "$T/state/audit.jsonl" 2
	echo 0 > "$T/state/tcp-since"
	start_daemon --listen "127.0.0.1:$port" --token-file "$T/token"
	code=$(tcp_request -H "Authorization: Bearer $(< "$T/token")" "$U/v1/events?sandbox=sb-0000000000a2")
	expect_code "a2's events over TCP" "$code" 200
	[ "$(stat -c %s "$T/body")" -gt $((200 << 10)) ] || fail "short: $(stat -c %s "$T/body") bytes"
	grep '"sandbox":"sb-0000000000a2"' "$STATE/audit.jsonl" | sed -E 's/,"prev":"[0-9a-f]{64}"\}$/}/' |
		cmp - "$T/body" || fail "a2's lines over TCP are not the log's without their prev"
	code=$(tcp_request -H "Authorization: Bearer $(< "$T/token")" "$U/v1/events")
	expect_code "events over TCP" "$code" 200
	sed -E 's/,"prev":"[0-9a-f]{64}"\}$/}/' "$STATE/audit.jsonl" | head -c "$(stat -c %s "$T/body")" |
		cmp - "$T/body" || fail "the lines over TCP are not the log's without their prev"
	[ "$(stat -c %s "$T/body")" -gt $((1 << 20)) ] || fail "short: $(stat -c %s "$T/body") bytes"
	stop_daemon
}

t_events_readers_bounded() {
	# a flood's bound (12 readers of 32 MiB, 3 s of CPU under ASan): no
	# sandbox, and what the daemon holds for a reader is the same for any
	# uid; under ASan t_events_big_log streams through the same reader
	bound_test
	mkdir -p -m 700 "$T/state"
	big_log "$T/state/audit.jsonl" 32
	# under ASan what is freed waits in a quarantine (256 MiB) before it
	# is reused: the bound is about what is live, so a small one here
	DAEMON_WRAP="env ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=1" \
		start_daemon
	api GET /v1/health > /dev/null
	before=$(vm "$DPID" VmHWM)
	$PY - "$SOCK" > "$T/readers" 2>&1 <<'EOF' &
import socket, sys, time
socks = []
for i in range(12):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(sys.argv[1])
    q = "/v1/events" if i % 2 else "/v1/events?sandbox=sb-0000000000a1"
    s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % q).encode())
    socks.append(s)
# half read all of it; the other half never read
total = 0
for s in socks[:6]:
    s.settimeout(60)
    while True:
        b = s.recv(1 << 16)
        if not b:
            break
        total += len(b)
print("read", total, flush=True)
time.sleep(1)
for s in socks:
    s.close()
EOF
	rpid=$!
	i=0
	while [ $i -lt 600 ] && ! grep -q '^read' "$T/readers"; do sleep 0.1; i=$((i + 1)); done
	code=$(api GET /v1/health)
	expect_code "health while readers stall" "$code" 200
	after=$(vm "$DPID" VmHWM)
	wait "$rpid" 2>/dev/null
	echo "VmHWM before $before KiB, after $after KiB; $(< "$T/readers")"
	grep -q '^read [1-9]' "$T/readers" || fail "the readers read nothing: $(< "$T/readers")"
	[ $((after - before)) -lt $((24 << 10)) ] ||
		fail "the daemon's peak grew by $(( (after - before) >> 10 )) MiB for 12 readers"
}

# ---- lean requests ---------------------------------------------------------

# apic METHOD PATH [CURL ARGS...]: api's request, its status in $code:
# code=$(api ...) forked a subshell to run httpc from
apic() {
	api "$@" > "$T/code"
	read -r code < "$T/code" || :
}

# tcp_request CURL ARGS...: a request over plain TCP, as curl's command
# line has it; the status on stdout, the answer in $T/body and
# $T/headers.  By httpc (curl's start was 40-55 ms of CPU, and these
# tests make some 150 requests a lane), but where the client is bound to
# another address (--interface), which only curl does.
tcp_request() {
	local c=$HTTPC a
	for a; do
		[ "$a" != --interface ] || c=curl
	done
	"$c" -sS --max-time 30 -o "$T/body" -D "$T/headers" -w '%{http_code}' "$@" \
		2> "$T/curl.err" || true
}

# ---- the daemon dies -------------------------------------------------------

t_daemon_killed() {
	start_daemon
	id=$(mksb)
	code=$(api POST "/v1/sandboxes/$id/processes" -d "{\"command\": \"sleep 1$$.5\", \"tool_call_id\": \"sleeper\"}")
	expect_code "sleeper" "$code" 201
	hp=$(host_pid "$id" sleeper)
	alive "$hp" || fail "no sleeper"
	old=$DPID
	stop_daemon KILL	# its processes die with it
	wait_gone "the sleeper, after the daemon's death" 5 alive_pid "$hp"
	grep -qx "+$id" "$STATE/sandboxes.log" || fail "$id not in the sandbox log for the next start"
	start_daemon
	wait_gone "stale cgroups of the killed daemon $old" 5 cgroups_of "$old"
	code=$(api GET "/v1/events?sandbox=$id")
	expect_contains "lost" "$(< "$T/body")" '"type":"sandbox.lost"'
	! grep -q -- "$id" "$STATE/sandboxes.log" || fail "the lost sandbox is still in the sandbox log"
	code=$(api GET /v1/sandboxes)
	expect_eq "none listed" "$(jq 'len(v["sandboxes"])')" 0
	code=$(api GET "/v1/sandboxes/$id")
	expect_error "lost" "$code" 404 not_found
	# a second daemon on the same state directory or socket is refused
	rc=0; "$CORRAL" serve --socket "$T/other.sock" --state-dir "$STATE" > "$T/second" 2>&1 || rc=$?
	expect_eq "second on the state dir" "$rc" 125
	expect_contains "why" "$(< "$T/second")" "another corral serve"
	rc=0; "$CORRAL" serve --socket "$SOCK" --state-dir "$T/other-state" > "$T/second" 2>&1 || rc=$?
	expect_eq "second on the socket" "$rc" 125
	expect_contains "why" "$(< "$T/second")" "already listening"
	code=$(api GET /v1/health)
	expect_code "the first still answers" "$code" 200
	stop_daemon
	out=$("$CORRAL" audit verify "$STATE/audit.jsonl" 2>&1) || fail "audit verify: $out"
}

# The sandbox log (state.c: STATE/sandboxes.log, a line as a sandbox is
# handed out and one as it goes): after a crash, the sandboxes that were
# live are said lost, those destroyed before it are not, nor are the
# many a long-running daemon made and destroyed (the log is written
# afresh without them: it stays short).  A daemon before the log left a
# file a sandbox in STATE/sandboxes: those are said lost too.
sandbox_lost() {	# sandbox_lost ID: whether the audit log says ID was lost
	grep "\"sandbox\":\"$1\"" "$STATE/audit.jsonl" | grep -q '"type":"sandbox.lost"'
}

t_daemon_killed_record() {
	local live gone ids=() i n code
	start_daemon
	live=$(mksb) || return
	gone=$(mksb) || return
	code=$(api DELETE "/v1/sandboxes/$gone")
	expect_code "delete $gone" "$code" 200
	# 2 lines a sandbox, 70 of them: past the 128 lines a log is written afresh at
	for ((i = 0; i < 70; i++)); do
		ids+=("$(mksb)") || return
		code=$(api DELETE "/v1/sandboxes/${ids[i]}")
		expect_code "delete ${ids[i]}" "$code" 200 || return
	done
	n=$(wc -l < "$STATE/sandboxes.log")
	[ "$n" -lt 128 ] || fail "the sandbox log has $n lines for 1 live sandbox"
	grep -qx "+$live" "$STATE/sandboxes.log" || fail "$live not in the sandbox log after its rewrite"
	stop_daemon KILL
	# what a daemon before the log left
	mkdir -p "$STATE/sandboxes"
	echo '{}' > "$STATE/sandboxes/sb-0ld0ne0f1le0.json"
	start_daemon
	sandbox_lost "$live" || fail "$live, live at the crash, not said lost"
	sandbox_lost sb-0ld0ne0f1le0 || fail "the old daemon's sandbox not said lost"
	[ ! -e "$STATE/sandboxes" ] || fail "the old daemon's STATE/sandboxes left: $(ls "$STATE/sandboxes")"
	! sandbox_lost "$gone" || fail "$gone, destroyed before the crash, said lost"
	for i in "${ids[@]}"; do
		! sandbox_lost "$i" || fail "$i, destroyed before the crash, said lost"
	done
	[ ! -s "$STATE/sandboxes.log" ] || fail "the sandbox log after the start: $(head -c 200 "$STATE/sandboxes.log")"
	stop_daemon
}

# The sandboxes die with the daemon whatever their state: an idle-frozen
# or paused one cannot act on its parent's death until thawed.
t_daemon_killed_frozen_sandboxes() {
	start_daemon
	idle=$(mksb '{"idle_freeze_ms": 200}')
	paused=$(mksb '{"idle_freeze_ms": 0}')
	code=$(api POST "/v1/sandboxes/$paused/processes" -d "{\"command\": \"sleep 2$$.5\", \"tool_call_id\": \"sleeper\"}")
	hp=$(host_pid "$paused" sleeper)
	if cgroup_mode "$idle"; then
		i=0
		while [ $i -lt 50 ] && [ "$(sbget "$idle" 'v["state"]')" != frozen ]; do
			sleep 0.1; i=$((i + 1))
		done
		expect_eq "frozen" "$(sbget "$idle" 'v["state"]')" frozen
		code=$(api POST "/v1/sandboxes/$paused/pause")
		expect_code "pause" "$code" 200
	fi
	old=$DPID
	snapshot "$DPID"
	kill -KILL "$DPID"; wait "$DPID" 2>/dev/null || true; echo "$DPID" >> "$T/stopped"; DPID=""
	# checked after the sweep below, so that a failure leaves nothing
	gone=ok
	wait_gone "sandboxes of the killed daemon $old (idle-frozen, paused)" 5 procs_alive || gone=no
	alive "$hp" && gone=no
	start_daemon	# sweeps whatever is left
	wait_gone "stale cgroups of the killed daemon $old" 5 cgroups_of "$old"
	stop_daemon
	expect_eq "sandboxes died with the daemon" "$gone" ok
}

# A daemon killed while a CLI call waits on it: the call ends at once with
# 125 and says that the answer broke off (sockhttp.c), not a result it did
# not get; the sandbox goes with the daemon.
t_cli_daemon_killed_mid_call() {
	local id old cpid rc=0 i
	start_daemon
	id=$(mksb)
	"$CORRAL" exec --socket "$SOCK" "$id" -c 'echo started; sleep 2$$.5' > "$T/o" 2> "$T/e" &
	cpid=$!
	for i in $(seq 100); do grep -q started "$T/o" && break; sleep 0.1; done
	expect_eq "the call began" "$(cat "$T/o")" started
	old=$DPID
	snapshot "$DPID"
	kill -KILL "$DPID"; wait "$DPID" 2>/dev/null || true; echo "$DPID" >> "$T/stopped"; DPID=""
	for i in $(seq 100); do alive "$cpid" || break; sleep 0.1; done
	if alive "$cpid"; then
		kill "$cpid" 2>/dev/null || true
		fail "corral exec still waits 10 s after its daemon was killed"
	fi
	wait "$cpid" || rc=$?
	expect_eq "exit" "$rc" 125
	expect_eq "said" "$(cat "$T/e")" \
		"corral: the daemon at $SOCK closed the connection before its answer was whole"
	wait_gone "the sleep of the killed daemon $old" 5 pgrep -f "sleep 2$$.5"
	start_daemon	# sweeps whatever is left
	wait_gone "stale cgroups of the killed daemon $old" 5 cgroups_of "$old"
	stop_daemon
}

# ---- many at once ----------------------------------------------------------

# the daemon's children but its watchdog (which stays until it stops)
sandbox_children() {
	ps -o pid=,comm= --ppid "$1" | awk '$2 != "corral-watchdog" {print $1}'
}

# all_codes CODE: $T/codes, what $MANY calls of httpc -w printed (three
# digits each, no newline), is $MANY times CODE
all_codes() {
	local codes
	codes=$(< "$T/codes")
	[[ $codes =~ ^($1)+$ ]] && [ ${#codes} = $((MANY * 3)) ] ||
		fail "not $MANY times $1: $(printf '%s' "$codes" | fold -w 3 | sort | uniq -c | tr '\n' ' ')"
}

t_many_sandboxes() {
	start_daemon
	t0=$(now_ms)
	# (by httpc, the harness's client: curl's start was 40-55 ms of CPU,
	# two a sandbox, more than half of this test's CPU in the -O2 lanes)
	seq "$MANY" | xargs -P 16 -I{} "$HTTPC" -sS --max-time 120 --unix-socket "$SOCK" \
		-o "$T/c.{}" -w '%{http_code}' -X POST -d '{"labels": {"n": "{}"}, "idle_freeze_ms": 0}' \
		http://localhost/v1/sandboxes > "$T/codes"
	all_codes 201
	code=$(api GET /v1/sandboxes)
	expect_eq "listed" "$(jq 'len(v["sandboxes"])')" "$MANY"
	expect_eq "unique ids" "$(jq 'len(set(s["id"] for s in v["sandboxes"]))')" "$MANY"
	expect_eq "labels" "$(jq 'sorted(int(s["labels"]["n"]) for s in v["sandboxes"]) == list(range(1, len(v["sandboxes"]) + 1))')" true
	jq '"\n".join(s["id"] for s in v["sandboxes"])' > "$T/ids"
	code=$(api GET /v1/health)
	expect_eq "health" "$(jq 'v["sandboxes"]')" "$MANY"
	for id in $(sed -n '1p;$p' "$T/ids"); do
		expect_eq "works ($id)" "$(sbsh "$id" 'echo alive')" alive
	done
	xargs -P 16 -I{} "$HTTPC" -sS --max-time 120 --unix-socket "$SOCK" -o /dev/null \
		-w '%{http_code}' -X DELETE http://localhost/v1/sandboxes/{} < "$T/ids" > "$T/codes"
	all_codes 200
	code=$(api GET /v1/sandboxes)
	expect_eq "none listed" "$(jq 'len(v["sandboxes"])')" 0
	expect_eq "no state files" "$(ls "$STATE/sandboxes" | wc -l)" 0
	wait_gone "processes under the daemon" 5 sandbox_children "$DPID"
	wait_gone "cgroups of the daemon" 5 cgroups_of "$DPID"
	echo "$MANY sandboxes in $(( $(now_ms) - t0 )) ms"
	stop_daemon
}

# ---- bad requests ----------------------------------------------------------

# METHOD | PATH (@ = the sandbox) | BODY (- none, <file) | STATUS | ERROR
BAD_REQUESTS='
POST|/v1/sandboxes|{|400|bad_request
POST|/v1/sandboxes|[1, 2]|400|bad_request
POST|/v1/sandboxes|"a string"|400|bad_request
POST|/v1/sandboxes|{"bogus": 1}|400|bad_request
POST|/v1/sandboxes|{"a": 1, "a": 2}|400|bad_request
POST|/v1/sandboxes|{"ttl_seconds": "10"}|400|bad_request
POST|/v1/sandboxes|{"ttl_seconds": -1}|400|bad_request
POST|/v1/sandboxes|{"ttl_seconds": 1e12}|400|bad_request
POST|/v1/sandboxes|{"idle_freeze_ms": 1.5}|400|bad_request
POST|/v1/sandboxes|{"idle_freeze_ms": -5}|400|bad_request
POST|/v1/sandboxes|{"labels": {"k": 1}}|400|bad_request
POST|/v1/sandboxes|{"labels": ["a"]}|400|bad_request
POST|/v1/sandboxes|{"policy": "strict"}|400|bad_request
POST|/v1/sandboxes|{"workspace": ""}|400|bad_request
POST|/v1/sandboxes|{"workspace": 5}|400|bad_request
POST|/v1/sandboxes|{"workspace": "relative/dir"}|400|bad_request
POST|/v1/sandboxes|{"policy": {"bogus": 1}}|422|policy
POST|/v1/sandboxes|{"policy": {"limits": {"memory": "12XB"}}}|422|policy
POST|/v1/sandboxes|{"policy": {"limits": {"open_files": 4096.5}}}|422|policy
POST|/v1/sandboxes|{"policy": {"limits": {"open_files": -1}}}|422|policy
POST|/v1/sandboxes|{"policy": {"limits": {"open_files": 1000000, "pids": 1024}}}|400|bad_request
POST|/v1/sandboxes|{"policy": {"limits": {"open_files": 9223372036854775808}}}|400|bad_request
POST|/v1/sandboxes|<big.json|413|too_large
PUT|/v1/sandboxes|{}|405|method_not_allowed
DELETE|/v1/sandboxes|-|405|method_not_allowed
PATCH|/v1/sandboxes|{}|405|method_not_allowed
POST|/v1/health|-|405|method_not_allowed
DELETE|/v1/metrics|-|405|method_not_allowed
POST|/v1/events|-|405|method_not_allowed
GET|/v1/nope|-|404|not_found
GET|/|-|404|not_found
GET|/v1/sandboxes/sb-000000000000|-|404|not_found
DELETE|/v1/sandboxes/sb-000000000000|-|404|not_found
POST|/v1/sandboxes/sb-000000000000/exec|{"command": "true"}|404|not_found
PUT|/v1/sandboxes/@|{}|405|method_not_allowed
GET|/v1/sandboxes/@/nope|-|404|not_found
POST|/v1/sandboxes/@/exec|-|400|bad_request
POST|/v1/sandboxes/@/exec|{}|400|bad_request
POST|/v1/sandboxes/@/exec|{"argv": ["ls"], "command": "ls"}|400|bad_request
POST|/v1/sandboxes/@/exec|{"argv": []}|400|bad_request
POST|/v1/sandboxes/@/exec|{"argv": "ls"}|400|bad_request
POST|/v1/sandboxes/@/exec|{"argv": ["ls", 1]}|400|bad_request
POST|/v1/sandboxes/@/exec|{"argv": [""]}|400|bad_request
POST|/v1/sandboxes/@/exec|{"command": ""}|400|bad_request
POST|/v1/sandboxes/@/exec|{"command": ["ls"]}|400|bad_request
POST|/v1/sandboxes/@/exec|{"command": "a\u0000b"}|400|bad_request
POST|/v1/sandboxes/@/exec|{"command": "true", "timeout_seconds": -1}|400|bad_request
POST|/v1/sandboxes/@/exec|{"command": "true", "timeout_seconds": 1e9}|400|bad_request
POST|/v1/sandboxes/@/exec|{"command": "true", "timeout_seconds": "5"}|400|bad_request
POST|/v1/sandboxes/@/exec|{"command": "true", "env": {"A": 1}}|400|bad_request
POST|/v1/sandboxes/@/exec|{"command": "true", "env": {"A=B": "x"}}|400|bad_request
POST|/v1/sandboxes/@/exec|{"command": "true", "env": ["A=B"]}|400|bad_request
POST|/v1/sandboxes/@/exec|{"command": "true", "stdin": 5}|400|bad_request
POST|/v1/sandboxes/@/exec|{"command": "true", "stream": "yes"}|400|bad_request
POST|/v1/sandboxes/@/exec|{"command": "true", "cwd": "tmp"}|400|bad_request
POST|/v1/sandboxes/@/exec|{"command": "true", "tool_call_id": ""}|400|bad_request
POST|/v1/sandboxes/@/exec|{"command": "true", "bogus": 1}|400|bad_request
POST|/v1/sandboxes/@/exec|<big-exec.json|413|too_large
GET|/v1/sandboxes/@/exec|-|405|method_not_allowed
POST|/v1/sandboxes/@/processes|{"command": "true", "stream": true}|400|bad_request
PUT|/v1/sandboxes/@/processes|{}|405|method_not_allowed
GET|/v1/sandboxes/@/processes/12x|-|404|not_found
GET|/v1/sandboxes/@/files|-|400|bad_request
GET|/v1/sandboxes/@/files?path=relative/path|-|400|bad_request
GET|/v1/sandboxes/@/files?path=|-|400|bad_request
POST|/v1/sandboxes/@/files?path=/workspace/x|x|405|method_not_allowed
POST|/v1/sandboxes/@/halt|{"reason": 5}|400|bad_request
POST|/v1/sandboxes/@/halt|{"reason": ""}|400|bad_request
POST|/v1/sandboxes/@/halt|{"why": "x"}|400|bad_request
GET|/v1/sandboxes/@/pause|-|405|method_not_allowed
GET|/v1/events?sandbox=a%22b|-|400|bad_request
'

t_bad_requests() {
	front_test
	start_daemon
	id=$(mksb)
	$PY -c 'import json; print(json.dumps({"labels": {"x": "a" * (1100 * 1024)}}))' > "$T/big.json"
	$PY -c 'import json; print(json.dumps({"command": "true", "stdin": "a" * (1100 * 1024)}))' > "$T/big-exec.json"
	rows=0 bad=0
	while IFS='|' read -r m p b st err; do
		[ -n "$m" ] || continue
		rows=$((rows + 1))
		p=${p//@/$id}
		case "$b" in
		-) apic "$m" "$p" ;;
		\<*) apic "$m" "$p" --data-binary @"$T/${b#<}" ;;
		*) apic "$m" "$p" --data-binary "$b" ;;
		esac
		expect_error "$m $p $b" "$code" "$st" "$err" || bad=$((bad + 1))
	done <<< "$BAD_REQUESTS"
	echo "$rows rows, $bad wrong"
	[ "$rows" -ge 30 ] || fail "only $rows rows"
	# a client's open files past the host's share (or init's half): the
	# numbers in the refusal, and nothing left of the sandbox begun
	code=$(api POST /v1/sandboxes --data-binary '{"policy": {"limits": {"open_files": 1000000, "pids": 1024}}}')
	expect_contains "open_files refused" "$(jq 'v["detail"]')" "limits.open_files 1000000"
	# none of them changed anything
	code=$(api GET /v1/sandboxes)
	expect_eq "one sandbox" "$(jq '[s["id"] for s in v["sandboxes"]]')" "[\"$id\"]"
	expect_eq "no calls ran" "$(jq 'v["sandboxes"][0]["meters"]["calls"]')" 0
	expect_eq "not halted" "$(jq 'v["sandboxes"][0]["halt_reason"]')" null
	expect_eq "still works" "$(sbsh "$id" 'echo fine')" fine
	stop_daemon
	[ "$bad" = 0 ]
}

# ---- TCP and its token -----------------------------------------------------

t_tcp_token() {
	port=$(free_port)
	rc=0; "$CORRAL" serve --socket "$T/t.sock" --state-dir "$T/t.state" --listen "127.0.0.1:$port" > "$T/out" 2>&1 || rc=$?
	expect_eq "--listen without --token-file" "$rc" 2
	expect_contains "why" "$(< "$T/out")" "--token-file"
	[ ! -e "$T/t.sock" ] || fail "it created its socket"
	code=$(curl -sS -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$port/v1/health" 2>/dev/null || true)
	expect_eq "nothing on the port" "$code" 000
	echo short > "$T/short"
	chmod 600 "$T/short"
	rc=0; "$CORRAL" serve --socket "$T/t.sock" --state-dir "$T/t.state" --listen "127.0.0.1:$port" --token-file "$T/short" > "$T/out" 2>&1 || rc=$?
	expect_eq "short token" "$rc" 125
	token=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
	echo "$token" > "$T/token"
	chmod 600 "$T/token"
	start_daemon --listen "127.0.0.1:$port" --token-file "$T/token"
	U=http://127.0.0.1:$port
	tcp() { tcp_request "$@"; }
	code=$(tcp "$U/v1/health")
	expect_error "no token" "$code" 401 unauthorized
	code=$(tcp -H "Authorization: Bearer ${token}x" "$U/v1/health")
	expect_error "wrong token" "$code" 401 unauthorized
	code=$(tcp -H "Authorization: Bearer ${token:0:31}" "$U/v1/health")
	expect_error "a prefix" "$code" 401 unauthorized
	code=$(tcp -H "Authorization: Basic $token" "$U/v1/health")
	expect_error "not bearer" "$code" 401 unauthorized
	code=$(tcp -X POST "$U/v1/sandboxes")
	expect_error "create without a token" "$code" 401 unauthorized
	code=$(api GET /v1/sandboxes)
	expect_eq "nothing created" "$(jq 'len(v["sandboxes"])')" 0
	code=$(tcp -H "Authorization: Bearer $token" "$U/v1/health")
	expect_code "with the token" "$code" 200
	expect_eq "health" "$(jq 'v["status"]')" ok
	code=$(tcp -H "Authorization: Bearer $token" -X POST "$U/v1/sandboxes")
	expect_code "create over TCP" "$code" 201
	id=$(jq 'v["id"]')
	# a TCP client's sandbox that names no TTL gets --max-ttl's default, a day
	expect_eq "the default TTL over TCP" "$(jq 'v["ttl_seconds"]')" 86400.0
	code=$(tcp -H "Authorization: Bearer $token" -X POST -d '{"argv": ["echo", "tcp"]}' "$U/v1/sandboxes/$id/exec")
	expect_eq "exec over TCP" "$(jq 'v["stdout"]')" tcp
	# the unix socket needs no token
	code=$(api GET "/v1/sandboxes/$id")
	expect_code "unix" "$code" 200
	# without --policy a TCP client may narrow the built-in default, never
	# widen it; the unix socket's client (the operator's user) may
	code=$(tcp -H "Authorization: Bearer $token" -X POST -d '{"policy": {"limits": {"pids": 2000}}}' "$U/v1/sandboxes")
	expect_error "more pids over TCP" "$code" 403 forbidden
	# the refusal names the bound it is: no operator's policy was given
	expect_contains "why" "$(jq 'v["detail"]')" "limits.pids: the daemon's default bound for TCP clients (no --policy) allows at most 1024 (got 2000)"
	code=$(tcp -H "Authorization: Bearer $token" -X POST -d '{"policy": {"network": {"mode": "proxy", "allow": ["a.test"]}}}' "$U/v1/sandboxes")
	expect_error "a network over TCP" "$code" 403 forbidden
	expect_contains "why" "$(jq 'v["detail"]')" "network.mode: the daemon's default bound for TCP clients (no --policy) allows no network (mode \"none\")"
	expect_not_contains "no operator's policy named" "$(jq 'v["detail"]')" "operator's"
	code=$(api POST /v1/sandboxes -d '{"policy": {"limits": {"pids": 2000}}}')
	expect_code "more pids over the unix socket" "$code" 201
	# a second daemon on the port says why it cannot have it
	rc=0; timeout -k 5 20 "$CORRAL" serve --socket "$T/t2.sock" --state-dir "$T/t2.state" \
		--listen "127.0.0.1:$port" --token-file "$T/token" > "$T/out" 2>&1 || rc=$?
	expect_eq "the port is taken" "$rc" 125
	expect_contains "why" "$(< "$T/out")" "cannot listen on 127.0.0.1:$port: Address already in use"
	[ ! -e "$T/t2.sock" ] || fail "the second daemon left its socket"
	stop_daemon
	code=$(curl -sS -o /dev/null -w '%{http_code}' --max-time 5 "$U/v1/health" 2>/dev/null || true)
	expect_eq "port closed after stop" "$code" 000
}

# Guessing the token: ten wrong ones from an address within a minute, and
# that address is refused for a minute, right token or not; another
# address, and the unix socket, are served.
t_tcp_token_guessing_locked_out() {
	front_test
	local port token code i
	port=$(free_port)
	token=$(new_token)
	start_daemon --listen "127.0.0.1:$port" --token-file "$T/token"
	U=http://127.0.0.1:$port
	tcp() { tcp_request "$@"; }
	for i in 1 2 3 4 5 6 7 8 9; do
		code=$(tcp -H "Authorization: Bearer guess$i$token" "$U/v1/health")
		expect_error "guess $i" "$code" 401 unauthorized
	done
	code=$(tcp -H "Authorization: Bearer $token" "$U/v1/health")
	expect_code "the right token after nine guesses" "$code" 200
	code=$(tcp -H "Authorization: Bearer guess10$token" "$U/v1/health")
	expect_error "guess 10" "$code" 401 unauthorized
	code=$(tcp -H "Authorization: Bearer $token" "$U/v1/health")
	expect_error "the right token, locked out" "$code" 429 too_many_requests
	expect_contains "why" "$(body)" "too many wrong tokens from 127.0.0.1"
	code=$(tcp -H "Authorization: Bearer guess11$token" "$U/v1/health")
	expect_error "a guess, locked out" "$code" 429 too_many_requests
	expect_eq "said once" "$(grep -c 'wrong tokens within 60 s' "$DLOG")" 1
	expect_contains "the log names the address" "$(< "$DLOG")" "corral serve: 127.0.0.1: 10 wrong tokens"
	code=$(tcp --interface 127.0.0.2 -H "Authorization: Bearer $token" "$U/v1/health")
	expect_code "another address" "$code" 200
	code=$(api GET /v1/health)
	expect_code "the unix socket" "$code" 200
	stop_daemon
}

# test_netns NAME: a network namespace of the test's own, removed when the
# test ends however it ends (on_test_exit), after its daemons
test_netns() {
	ip netns add "$1" || { fail "ip netns add $1"; return 1; }
	echo "$1" >> "$T/netns"
	[ -n "${IN_EXIT:-}" ] || trap on_test_exit EXIT
}

# Over IPv6 a host is given a /64: its addresses guess as one.  In a
# network namespace of the test's own, with four addresses on its lo.
t_tcp_token_guessing_by_ipv6_64() {
	front_test
	[ "$ME" = 0 ] || { skip "a network namespace of its own: as root"; return; }
	command -v ip > /dev/null || { skip "no ip(8)"; return; }
	local ns=corral-guess-$$-$RANDOM
	test_netns "$ns" || return 1
	guessing_by_64 "$ns"
}

guessing_by_64() {
	local ns=$1 port token code i a U6
	inns() { ip netns exec "$ns" "$@"; }
	inns ip link set lo up
	for a in fd00:0:0:1::1 fd00:0:0:1::2 fd00:0:0:1::3 fd00:0:0:2::1; do
		inns ip -6 addr add "$a/64" dev lo nodad || return 1
	done
	port=$(free_port)
	tls_files "$T" || return 1
	token=$(new_token)
	DAEMON_WRAP="ip netns exec $ns" start_daemon --listen "[fd00:0:0:1::1]:$port" \
		--token-file "$T/token" --tls-cert "$T/cert.pem" --tls-key "$T/cert.key" || return 1
	U6="https://[fd00:0:0:1::1]:$port"
	from() {	# from ADDRESS CURL-ARG...: the status (the certificate names 127.0.0.1: -k)
		local at=$1
		shift
		inns curl -sS -k --max-time 30 --interface "$at" -o "$T/body" -D "$T/headers" \
			-w '%{http_code}' "$@" 2> "$T/curl.err" || true
	}
	for i in 1 2 3 4 5 6 7 8 9 10; do
		code=$(from fd00:0:0:1::2 -H "Authorization: Bearer guess$i$token" "$U6/v1/health")
		expect_error "guess $i" "$code" 401 unauthorized || return 1
	done
	code=$(from fd00:0:0:1::3 -H "Authorization: Bearer $token" "$U6/v1/health")
	expect_error "another address of that /64" "$code" 429 too_many_requests || return 1
	expect_contains "why" "$(body)" "fd00:0:0:1::/64" || return 1
	code=$(from fd00:0:0:2::1 -H "Authorization: Bearer $token" "$U6/v1/health")
	expect_code "another /64" "$code" 200 || return 1
	stop_daemon
}

# PEERCAP: argv host port cap ca token-file A B C.  cap connections from
# address A, each served a health check and kept; then one from B, which
# must be closed at once (the cap), and one from C, which must be served.
PEERCAP='
import socket, ssl, sys
host, port, cap, ca, token = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), \
    sys.argv[4], open(sys.argv[5]).read().encode()
a, b, c = sys.argv[6:9]
ctx = ssl.create_default_context(cafile=ca)
ctx.check_hostname = False
def conn(src):
    s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    s.settimeout(10)
    s.bind((src, 0))
    s.connect((host, port))
    return s
def health(src):
    s = ctx.wrap_socket(conn(src))
    s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n" % token)
    return s, s.recv(100)[:12].decode()
held = [health(a) for _ in range(cap)]
print("held:", " ".join(h[1] for h in held))
s = conn(b)
try:
    print("same peer:", "open" if s.recv(100) else "closed")
except socket.timeout:
    print("same peer: open")
except OSError:
    print("same peer: closed")
print("another peer:", health(c)[1])
'

# HELLOS: argv port ca token n addr...: n TLS handshakes from the first
# address as fast as they go, then one from each further address; prints
# "ok" or "refused" for each, a line an address.  A refused one must have
# been refused at its first message: the client saw no certificate.
HELLOS='
import socket, ssl, sys
port, ca, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[4])
token = open(sys.argv[3]).read().strip().encode()
ctx = ssl.create_default_context(cafile=ca)
ctx.check_hostname = False
def hello(src):
    s = socket.socket()
    s.settimeout(10)
    s.bind((src, 0))
    s.connect(("127.0.0.1", port))
    try:
        t = ctx.wrap_socket(s)
    except ssl.SSLError as e:
        s.close()
        return "refused" if "HANDSHAKE_FAILURE" in str(e).upper() else "error: %s" % e
    except OSError as e:
        s.close()
        return "error: %s" % e
    t.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n" % token)
    r = t.recv(100)[:12].decode()
    t.close()
    return "ok" if r.endswith("200") else "answer: %r" % r
srcs = sys.argv[5:]
print(" ".join(hello(srcs[0]) for _ in range(n)))
for a in srcs[1:]:
    print(hello(a))
'

# --tls-handshake-rate: a peer's handshakes over its rate are refused at
# their ClientHello, before the server signs anything; another peer is
# served meanwhile, and the first again once it has slowed down.  Said in
# the log once.
t_tcp_tls_handshake_rate() {
	front_test
	local out first
	# 1 a second: the burst's handshakes would each have to take a second
	# (a slow host, a sanitizer) for none to be refused
	start_tls_daemon --tls-handshake-rate 1 || return 1
	out=$($PY -c "$HELLOS" "$port" "$T/cert.pem" "$T/token" 20 127.0.0.1 127.0.0.2 2>&1)
	first=$(echo "$out" | head -1)
	expect_eq "the first of a burst" "${first%% *}" ok || return 1
	expect_contains "the burst past the rate" "$first" "refused" || return 1
	expect_not_contains "nothing else" "$first" "error" || return 1
	expect_eq "another peer meanwhile" "$(echo "$out" | sed -n 2p)" ok || return 1
	sleep 1.2
	out=$($PY -c "$HELLOS" "$port" "$T/cert.pem" "$T/token" 1 127.0.0.1 2>&1)
	expect_eq "the first peer, slowed down" "$out" ok || return 1
	expect_eq "said once" "$(grep -c 'TLS handshakes faster than' "$DLOG")" 1
	# a reload's new listener keeps the rate
	kill -HUP "$DPID"
	await_log "SIGHUP: TLS reloaded" 1 || return 1
	out=$($PY -c "$HELLOS" "$port" "$T/cert.pem" "$T/token" 20 127.0.0.1 2>&1)
	expect_contains "a burst after a reload" "$out" "refused" || return 1
	expect_contains "naming the peer and the option" "$(< "$DLOG")" \
		"127.0.0.1: TLS handshakes faster than 1 a second on 127.0.0.1:$port (--tls-handshake-rate)"
	stop_daemon
}

# --max-connections-per-peer: a peer at its cap has its next connection
# closed at once, another peer is served; an IPv6 peer is its /64 (a host
# is commonly given one whole, and an address a connection would make the
# cap nothing), as for token guessing.
t_tcp_per_peer_cap() {
	front_test
	local port token out ns
	start_tls_daemon --max-connections-per-peer 2 || return 1
	out=$($PY -c "$PEERCAP" 127.0.0.1 "$port" 2 "$T/cert.pem" "$T/token" \
		127.0.0.1 127.0.0.1 127.0.0.2 2>&1)
	expect_eq "IPv4" "$out" "$(printf 'held: HTTP/1.1 200 HTTP/1.1 200\nsame peer: closed\nanother peer: HTTP/1.1 200')"
	stop_daemon
	[ "$ME" = 0 ] || { skip "IPv6 addresses of a /64: a network namespace, as root"; return; }
	command -v ip > /dev/null || { skip "no ip(8)"; return; }
	ns=corral-peer-$$-$RANDOM
	test_netns "$ns" || return 1
	peer_cap_by_64 "$ns"
}

# peer_cap_by_64 NS: t_tcp_per_peer_cap's IPv6 half, in NS (removed when
# the test ends); stops at the first failure
peer_cap_by_64() {
	local ns=$1 a
	ip -n "$ns" link set lo up || return 1
	for a in fd00:0:0:1::1 fd00:0:0:1::2 fd00:0:0:1::3 fd00:0:0:2::1; do
		ip -n "$ns" -6 addr add "$a/64" dev lo nodad || return 1
	done
	port=$(free_port)
	DAEMON_WRAP="ip netns exec $ns" start_daemon --listen "[fd00:0:0:1::1]:$port" \
		--token-file "$T/token" --tls-cert "$T/cert.pem" --tls-key "$T/cert.key" \
		--max-connections-per-peer 2 || return 1
	out=$(ip netns exec "$ns" $PY -c "$PEERCAP" fd00:0:0:1::1 "$port" 2 "$T/cert.pem" \
		"$T/token" fd00:0:0:1::2 fd00:0:0:1::3 fd00:0:0:2::1 2>&1)
	expect_eq "IPv6, another address of the /64" "$out" \
		"$(printf 'held: HTTP/1.1 200 HTTP/1.1 200\nsame peer: closed\nanother peer: HTTP/1.1 200')" || return 1
	stop_daemon
}

# ---- TCP over TLS ------------------------------------------------------------

# tls_files DIR [NAME]: a self-signed certificate for 127.0.0.1 and
# localhost, DIR/NAME.pem, and its key, DIR/NAME.key (mode 600)
tls_files() {
	local n=${2:-cert}
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
		-subj /CN=localhost -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
		-keyout "$1/$n.key" -out "$1/$n.pem" 2> "$1/openssl.err" ||
		{ fail "openssl: $(< "$1/openssl.err")"; return 1; }
	chmod 600 "$1/$n.key"
}

# A streamed exec over https gets the whole of its answer.  evhttp ends a
# request when the connection's write callback runs; a TLS connection's
# runs deferred, and one scheduled as the start line drained ran after the
# end was queued: the request was over for evhttp, the end never sent, and
# the client waited with the call long finished: one exec in 200 to 600
# here, so 1200 find it about 9 runs in 10 (the CLI's loop found it in
# every run of 700).  Each on a new connection, given 20 s; all, 240 s.
t_tcp_tls_streamed_ends() {
	bound_test
	local port token id
	# a handshake an exec, back to back: past the default rate of 200 a
	# second once an exec takes under 5 ms, whose refusals this is not about
	start_tls_daemon --tls-handshake-rate 100000 || return 1
	id=$(mksb)
	$PY - "$port" "$T/cert.pem" "$T/token" "$id" "${TLS_EXECS:-1200}" > "$T/out" 2>&1 <<'EOF2' ||
import http.client, json, ssl, sys, time
port, ca, sb, n = int(sys.argv[1]), sys.argv[2], sys.argv[4], int(sys.argv[5])
token = open(sys.argv[3]).read()
ctx = ssl.create_default_context(cafile=ca)
body = json.dumps({"argv": ["true"], "stream": True})
head = {"Authorization": "Bearer " + token, "Content-Type": "application/json"}
short, t0, done = [], time.monotonic(), 0
for i in range(n):
    if time.monotonic() - t0 > 240:
        break
    c = http.client.HTTPSConnection("localhost", port, context=ctx, timeout=20)
    try:
        c.request("POST", "/v1/sandboxes/%s/exec" % sb, body, head)
        r = c.getresponse()
        last = (r.read().decode().splitlines() or ["{}"])[-1]
        if r.status != 200 or json.loads(last).get("type") != "end":
            short.append((i, r.status, last[:200]))
    except OSError as e:
        short.append((i, repr(e)))
    finally:
        c.close()
    done += 1
print("%d execs, %d without their end: %s" % (done, len(short), short[:3]))
sys.exit(1 if short or done < min(n, 50) else 0)
EOF2
		fail "streamed execs over https: $(tail -3 "$T/out")"
	stop_daemon
}

# An archive streamed in over https ends with a close_notify before its
# FIN: the daemon shut its socket bare, and a strict client (OpenSSL 3
# without SSL_OP_IGNORE_UNEXPECTED_EOF, which Debian's Python sets and
# others do not) read the end of the answer as "EOF occurred in violation
# of protocol", a truncation it cannot tell from an attacker's.
t_tcp_tls_upload_ends_with_close_notify() {
	front_test
	local port token id
	start_tls_daemon || return 1
	id=$(mksb) || return 1
	$PY - "$port" "$T/cert.pem" "$T/token" "$id" > "$T/out" 2>&1 <<'EOF2' ||
import io, json, socket, ssl, struct, sys, tarfile
port, ca, token, sb = int(sys.argv[1]), sys.argv[2], open(sys.argv[3]).read(), sys.argv[4]
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w") as t:
    data = b"over tls\n"
    i = tarfile.TarInfo("f")
    i.size = len(data)
    t.addfile(i, io.BytesIO(data))
tar = buf.getvalue()
ctx = ssl.create_default_context(cafile=ca)
ctx.options &= ~ssl.OP_IGNORE_UNEXPECTED_EOF	# Debian's Python sets it
s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=20),
                    server_hostname="localhost", suppress_ragged_eofs=False)
s.sendall(("PUT /v1/sandboxes/%s/archive?path=/tmp/tlsin HTTP/1.1\r\nHost: c\r\n"
           "Authorization: Bearer %s\r\nConnection: Upgrade\r\n"
           "Upgrade: corral-tar\r\nContent-Length: 0\r\n\r\n" % (sb, token)).encode())
got = b""
while b"\r\n\r\n" not in got:
    b = s.recv(4096)
    if not b:
        sys.exit("no 101: %r" % got)
    got += b
if not got.startswith(b"HTTP/1.1 101 "):
    sys.exit("no 101: %r" % got)
s.sendall(struct.pack(">I", len(tar)) + tar + bytes(4))
answer = got.split(b"\r\n\r\n", 1)[1]
while not answer.endswith(b"\n"):
    b = s.recv(65536)
    if not b:
        sys.exit("no whole answer: %r" % answer)
    answer += b
print(json.loads(answer)["status"])
# the end: b"" after a close_notify; a bare FIN raises
try:
    b = s.recv(65536)
except ssl.SSLError as e:
    sys.exit("after %r, no close_notify: %s" % (answer, e))
if b:
    sys.exit("after the answer: %r" % b)
EOF2
		fail "the upload's end over https: $(tail -3 "$T/out")"
	expect_eq "its answer" "$(< "$T/out")" 201
	expect_eq "unpacked" "$(sbsh "$id" 'cat /tmp/tlsin/f')" "over tls"
	stop_daemon
}

# strict_tls_end MODE [ID]: a strict TLS client (OpenSSL 3 without
# SSL_OP_IGNORE_UNEXPECTED_EOF, which Debian's Python sets by default)
# asks start_tls_daemon's daemon for one kind of answer that ends with the
# connection, reads it to the end, and says how it ended: "close_notify"
# (b"" after the peer's close_notify), or the SSLError a bare FIN is.
# MODE: close (a Connection: close answer), http10 (a streamed exec to an
# HTTP/1.0 request: no chunks, delimited by the close), idle (nothing
# sent: the daemon's idle timeout), refused (no token: the gate's 401).
strict_tls_end() {
	$PY - "$port" "$T/cert.pem" "$T/token" "$1" "${2:-}" <<'EOF2'
import json, socket, ssl, sys
port, ca, token, mode, sb = int(sys.argv[1]), sys.argv[2], open(sys.argv[3]).read(), sys.argv[4], sys.argv[5]
ctx = ssl.create_default_context(cafile=ca)
ctx.options &= ~ssl.OP_IGNORE_UNEXPECTED_EOF	# Debian's Python sets it
s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=20),
                    server_hostname="localhost", suppress_ragged_eofs=False)
auth = "Authorization: Bearer %s\r\n" % token
if mode == "close":
    s.sendall(("GET /v1/health HTTP/1.1\r\nHost: c\r\n%sConnection: close\r\n\r\n" % auth).encode())
elif mode == "http10":
    body = json.dumps({"argv": ["seq", "3"], "stream": True})
    s.sendall(("POST /v1/sandboxes/%s/exec HTTP/1.0\r\nHost: c\r\n%s"
               "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
               % (sb, auth, len(body), body)).encode())
elif mode == "refused":
    s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: c\r\n\r\n")
got = b""
try:
    while True:
        b = s.recv(65536)
        if not b:
            break
        got += b
    end = "close_notify"
except ssl.SSLError as e:
    end = "no close_notify: %s" % e
head, _, body = got.partition(b"\r\n\r\n")
print((head.split(b"\r\n")[0].decode() or "nothing") + " | " +
      (body.decode(errors="replace").splitlines() or [""])[-1][:120] + " | " + end)
EOF2
}

# An answer that asks to close ends with a close_notify before the FIN:
# the daemon's were bare FINs (libevent frees its SSL without one), which
# a strict client reads as "EOF occurred in violation of protocol".
t_tcp_tls_close_answer_ends_with_close_notify() {
	front_test
	local port token out
	start_tls_daemon || return 1
	out=$(strict_tls_end close 2>&1)
	expect_contains "Connection: close" "$out" 'HTTP/1.1 200 OK | {"status":"ok"'
	expect_contains "its end" "$out" "| close_notify"
	stop_daemon
}

# An answer streamed to an HTTP/1.0 request has no chunks and no length:
# evhttp delimits it by the close, so only a close_notify tells its end
# from a cut (an attacker's FIN, or the daemon's own on a write timeout).
t_tcp_tls_http10_stream_ends_with_close_notify() {
	front_test
	local port token id out
	start_tls_daemon || return 1
	id=$(mksb) || return 1
	out=$(strict_tls_end http10 "$id" 2>&1)
	expect_contains "a streamed exec to HTTP/1.0" "$out" "HTTP/1.0 200 OK | "
	expect_contains "its last line" "$out" '"type":"end"'
	expect_contains "its end" "$out" "| close_notify"
	stop_daemon
}

# A connection idle past --idle-timeout is closed with a close_notify.
t_tcp_tls_idle_timeout_ends_with_close_notify() {
	front_test
	local port token out
	start_tls_daemon --idle-timeout 1 || return 1
	out=$(strict_tls_end idle 2>&1)
	expect_eq "idle, timed out" "$out" "nothing |  | close_notify"
	stop_daemon
}

# The gate's refusal of a head (here no token: 401, then the close) ends
# with a close_notify too.
t_tcp_tls_refusal_ends_with_close_notify() {
	front_test
	local port token out
	start_tls_daemon || return 1
	out=$(strict_tls_end refused 2>&1)
	expect_contains "refused at the door" "$out" "HTTP/1.1 401 "
	expect_contains "its end" "$out" "| close_notify"
	stop_daemon
}

# An Upgrade in an HTTP/1.0 request is ignored (RFC 9110 7.8: a server
# MUST): the daemon switched an HTTP/1.0 client to corral-tar or
# corral-tty with a 101 its version has no such thing as.  The same
# request in HTTP/1.1 is still upgraded.
t_upgrade_in_http10_ignored() {
	front_test
	local id out
	start_daemon || return 1
	id=$(mksb) || return 1
	out=$($PY - "$SOCK" "$id" 2>&1 <<'EOF2'
import json, socket, sys
sock, sb = sys.argv[1:3]
def first_line(req):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(20)
    s.connect(sock)
    s.sendall(req.encode())
    got = b""
    while b"\r\n" not in got:
        b = s.recv(4096)
        if not b:
            break
        got += b
    s.close()
    return got.split(b"\r\n")[0].decode() or "nothing"
tar = ("PUT /v1/sandboxes/%s/archive?path=/tmp/up HTTP/1.%%d\r\nHost: c\r\n"
       "Connection: Upgrade\r\nUpgrade: corral-tar\r\nContent-Length: 0\r\n\r\n" % sb)
body = json.dumps({"argv": ["true"], "tty": True})
tty = ("POST /v1/sandboxes/%s/exec HTTP/1.%%d\r\nHost: c\r\nConnection: Upgrade\r\n"
       "Upgrade: corral-tty\r\nContent-Type: application/json\r\n"
       "Content-Length: %d\r\n\r\n%s" % (sb, len(body), body))
for what, req in (("tar", tar), ("tty", tty)):
    for minor in (0, 1):
        print("%s 1.%d: %s" % (what, minor, first_line(req % minor)))
EOF2
)
	expect_contains "corral-tar in HTTP/1.1" "$out" "tar 1.1: HTTP/1.1 101 "
	expect_contains "corral-tty in HTTP/1.1" "$out" "tty 1.1: HTTP/1.1 101 "
	expect_not_contains "no 101 to HTTP/1.0" "$out" "1.0: HTTP/1.1 101"
	expect_contains "corral-tar in HTTP/1.0: a plain PUT" "$out" "tar 1.0: HTTP/1.0 "
	expect_contains "corral-tty in HTTP/1.0: a plain exec" "$out" "tty 1.0: HTTP/1.0 "
	stop_daemon
}

# A file the sandbox truncates while it is sent over https: the daemon
# lives, and the body is the bytes it read.  The body was a mapping of the
# file, and TLS's copy of a page past the new end was a SIGBUS that ended
# the daemon and every sandbox with it.  The client reads the head, the
# file is truncated by an exec (over the unix socket), then the rest is
# read: no race (files.sh has the same over the unix socket).
t_tcp_tls_get_truncated_while_sent() {
	front_test
	local port token id sum code
	start_tls_daemon || return 1
	id=$(mksb) || return 1
	code=$(api POST "/v1/sandboxes/$id/exec" -d '{"command": "head -c 32000000 /dev/urandom > /tmp/shrinks && sha256sum < /tmp/shrinks"}')
	expect_code "a file made" "$code" 200 || return 1
	sum=$(jq 'v["stdout"]')
	$PY "$HERE/shrink_get.py" "$SOCK" "$id" "${sum%% *}" 32000000 \
		"$port" "$T/cert.pem" "$T/token" > "$T/out" 2>&1 || fail "$(tail -5 "$T/out")"
	stop_daemon
}

# A request with "Expect: 100-continue" whose body follows its head at
# once, over https: evhttp writes "100 Continue", the body is read and
# answered in the same turn of the loop, and the write callback the
# Continue's draining scheduled (deferred, for TLS) then ended the request
# with its answer unsent: on a kept connection the client waited for ever,
# on one to close the answer was dropped.  Every one of 50 gave no answer
# before api_send_reply() (api.c).  20 on one connection, 5 that close.
t_tcp_tls_expect_continue() {
	front_test
	local port token out
	start_tls_daemon || return 1
	out=$($PY - "$port" "$T/cert.pem" "$T/token" <<'EOF2'
import socket, ssl, sys, time
port, ca, token = int(sys.argv[1]), sys.argv[2], open(sys.argv[3]).read()
ctx = ssl.create_default_context(cafile=ca)
def conn():
    return ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=5),
                           server_hostname="localhost")
def ask(s, close):
    body = b'{"argv": ["true"]}'
    s.sendall(b"POST /v1/sandboxes/none/exec HTTP/1.1\r\nHost: x\r\n"
              b"Authorization: Bearer %s\r\nExpect: 100-continue\r\n%s"
              b"Content-Length: %d\r\n\r\n" % (token.encode(),
              b"Connection: close\r\n" if close else b"", len(body)))
    time.sleep(0.001)
    s.sendall(body)
    got = b""
    try:
        while not (b"HTTP/1.1 404" in got and got.endswith(b"}\n")):
            d = s.recv(4096)
            if not d:
                break
            got += d
    except OSError:
        pass
    return b"HTTP/1.1 404" in got
s, ok = conn(), 0
for i in range(20):
    if not ask(s, False):
        break
    ok += 1
s.close()
for i in range(5):
    s = conn()
    ok += ask(s, True)
    s.close()
print("%d of 25 answered" % ok)
EOF2
)
	expect_eq "answers after 100 Continue" "$out" "25 of 25 answered"
	stop_daemon
}

# Every TCP connection the daemon takes sends at once (TCP_NODELAY): over
# TLS an answer's head and body are two writes, and under Nagle the second
# waited for the client's delayed ACK, 40 ms of each new connection (make
# bench, section 6).  The option is read on the daemon's own socket.
t_tcp_nodelay() {
	front_test
	[ "$ME" = 0 ] || { skip "taking a daemon's socket needs root"; return; }
	local port token out
	start_tls_daemon || return 1
	out=$($PY - "$DPID" "$port" "$T/cert.pem" "$T/token" <<'EOF2'
import ctypes, os, socket, ssl, sys
pid, port, ca, token = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], open(sys.argv[4]).read()
s = ssl.create_default_context(cafile=ca).wrap_socket(
    socket.create_connection(("127.0.0.1", port), timeout=20), server_hostname="localhost")
s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n" % token.encode())
if not s.recv(100).startswith(b"HTTP/1.1 200"):
    sys.exit("no 200 from the daemon")
# the daemon's end: local port `port`, remote the client's
me = "%04X" % s.getsockname()[1]
ino = [l.split()[9] for l in open("/proc/net/tcp").readlines()[1:]
       if l.split()[1].endswith(":%04X" % port) and l.split()[2].endswith(":" + me)]
fds = [f for f in os.listdir("/proc/%d/fd" % pid)
       if ino and os.readlink("/proc/%d/fd/%s" % (pid, f)) == "socket:[%s]" % ino[0]]
if not fds:
    sys.exit("the daemon's socket was not found (inode %s)" % ino)
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.syscall(438, os.pidfd_open(pid), int(fds[0]), 0)   # pidfd_getfd
if fd < 0:
    sys.exit("pidfd_getfd: %s" % os.strerror(ctypes.get_errno()))
print(socket.socket(fileno=fd).getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
EOF2
) || { fail "reading the daemon's socket: $out"; stop_daemon; return 1; }
	expect_eq "TCP_NODELAY on the daemon's end" "$out" 1
	stop_daemon
}

# start_tls_daemon [ARG...]: a daemon listening on 127.0.0.1:$port too,
# over TLS ($T/cert.pem and .key), its token in $T/token and $token
start_tls_daemon() {
	port=$(free_port)
	tls_files "$T" || return 1
	token=$(new_token)
	start_daemon --listen "127.0.0.1:$port" --token-file "$T/token" \
		--tls-cert "$T/cert.pem" --tls-key "$T/cert.key" "$@"
}

# new_token: 64 hex digits from the kernel's random bytes (bash's
# SRANDOM is getrandom(2)), in $T/token (mode 600) and on stdout; a
# pipe of four processes and a chmod before
new_token() {
	local t="" i
	for i in 1 2 3 4 5 6 7 8; do
		printf -v t '%s%08x' "$t" "$SRANDOM"
	done
	rm -f "$T/token"
	( umask 077; printf '%s' "$t" > "$T/token" )
	printf '%s\n' "$t"
}

tls_curl() {	# tls_curl ARG...: the status; the body in $T/body
	curl -sS --max-time 30 --cacert "$T/cert.pem" -o "$T/body" -D "$T/headers" \
		-w '%{http_code}' "$@" 2> "$T/curl.err" || true
}

# create_echo WHAT URL TOKEN WORD: a sandbox made over TCP, `echo WORD`
# run in it; its id
create_echo() {
	local code id
	code=$(tls_curl -H "Authorization: Bearer $3" -X POST "$2/v1/sandboxes")
	expect_code "$1: create" "$code" 201 || return 1
	id=$(jq 'v["id"]')
	code=$(tls_curl -H "Authorization: Bearer $3" -X POST \
		-d "{\"argv\": [\"echo\", \"$4\"]}" "$2/v1/sandboxes/$id/exec")
	expect_eq "$1: exec" "$(jq 'v["stdout"]')" "$4" || return 1
	echo "$id"
}

t_tcp_tls() {
	local port token code id out rc
	start_tls_daemon || return 1
	expect_contains "the log says TLS" "$(< "$DLOG")" "127.0.0.1:$port (TLS)"
	U=https://127.0.0.1:$port
	code=$(tls_curl "$U/v1/health")
	expect_error "no token" "$code" 401 unauthorized
	code=$(tls_curl -H "Authorization: Bearer $token" "$U/v1/health")
	expect_code "health over TLS" "$code" 200
	id=$(create_echo "over TLS" "$U" "$token" "over tls")
	# the client verbs: --ca-file says who signed; the system's roots did not
	out=$("$CORRAL" exec --url "$U" --token-file "$T/token" --ca-file "$T/cert.pem" \
		"$id" -- echo cli 2>&1) || true
	expect_eq "corral exec over TLS" "$out" cli
	rc=0; out=$("$CORRAL" ls --url "$U" --token-file "$T/token" 2>&1) || rc=$?
	expect_eq "without --ca-file" "$rc" 125
	expect_contains "why" "$out" "certificate"
	rc=0; out=$("$CORRAL" ls --url "http://127.0.0.1:$port" --token-file "$T/token" \
		--ca-file "$T/cert.pem" 2>&1) || rc=$?
	expect_eq "--ca-file with http://" "$rc" 2
	# plain HTTP to the TLS port is no request, and the daemon goes on
	code=$(curl -sS --max-time 5 -o /dev/null -w '%{http_code}' \
		-H "Authorization: Bearer $token" "http://127.0.0.1:$port/v1/health" 2>/dev/null || true)
	expect_eq "plain HTTP on the TLS port" "$code" 000
	code=$(tls_curl -H "Authorization: Bearer $token" "$U/v1/health")
	expect_code "health after it" "$code" 200
	stop_daemon
}

# A TCP relay on 127.0.0.1 to argv[1] that appends every byte, both ways,
# to argv[2]; prints its port; gives up after 60 s.  What a network sees.
RECORDER='
import socket, sys, threading, time
target, path = int(sys.argv[1]), sys.argv[2]
l = socket.socket()
l.bind(("127.0.0.1", 0))
l.listen(8)
l.settimeout(60)
print(l.getsockname()[1], flush=True)
out, lock = open(path, "ab"), threading.Lock()
def pump(a, b):
    while True:
        try:
            d = a.recv(65536)
        except OSError:
            d = b""
        if not d:
            break
        with lock:
            out.write(d)
            out.flush()
        try:
            b.sendall(d)
        except OSError:
            break
    try:
        b.shutdown(socket.SHUT_WR)
    except OSError:
        pass
end = time.time() + 60
while time.time() < end:
    try:
        c, _ = l.accept()
    except socket.timeout:
        break
    u = socket.create_connection(("127.0.0.1", target))
    for a, b in ((c, u), (u, c)):
        threading.Thread(target=pump, args=(a, b), daemon=True).start()
'

# Over TLS, what crosses the network holds neither the token nor what a
# call prints; in clear (loopback only, the control) it holds both.
t_tcp_tls_hides_the_token() {
	local port token code id rpid rport marker="corral-tls-$$-$RANDOM-out" mode url
	tls_files "$T" || return 1
	for mode in clear tls; do
		port=$(free_port)
		token=$(new_token)
		: > "$T/wire.$mode"
		if [ "$mode" = tls ]; then
			start_daemon --listen "127.0.0.1:$port" --token-file "$T/token" \
				--tls-cert "$T/cert.pem" --tls-key "$T/cert.key"
		else
			start_daemon --listen "127.0.0.1:$port" --token-file "$T/token"
		fi
		# a file of its own: the background job truncates the file itself,
		# maybe after the loop below has read the last recorder's port
		$PY -c "$RECORDER" "$port" "$T/wire.$mode" > "$T/rport.$mode" &
		rpid=$!
		# killed by on_test_exit if a check below ends the test
		echo "$rpid" >> "$T/watchdogs"
		# 5 s was not enough for Python to start under a loaded check (ci88)
		for _ in $(seq 1 600); do [ -s "$T/rport.$mode" ] && break; nap 0.05; done
		rport=$(< "$T/rport.$mode")
		[ -n "$rport" ] || fail "$mode: the recorder never said its port"
		[ "$mode" = tls ] && url=https://127.0.0.1:$rport || url=http://127.0.0.1:$rport
		create_echo "$mode, through the recorder" "$url" "$token" "$marker" > /dev/null
		kill "$rpid" 2>/dev/null || true
		wait "$rpid" 2>/dev/null || true
		stop_daemon
		[ -s "$T/wire.$mode" ] || fail "$mode: the recorder saw nothing"
		if [ "$mode" = tls ]; then
			grep -qaF "$token" "$T/wire.$mode" && fail "the token crossed in clear over TLS"
			grep -qaF "$marker" "$T/wire.$mode" && fail "a call's output crossed in clear over TLS"
		else
			grep -qaF "$token" "$T/wire.$mode" || fail "control: the recorder did not see the token in clear"
			grep -qaF "$marker" "$T/wire.$mode" || fail "control: the recorder did not see the output"
		fi
	done
	return 0
}

# Off loopback, TCP needs TLS; the certificate and key are checked before
# anything listens.
t_tcp_tls_refusals() {
	front_test
	local port rc
	port=$(free_port)
	new_token > /dev/null
	tls_files "$T" || return 1
	tls_files "$T" other || return 1
	serve_fails() {	# serve_fails WHAT STATUS TEXT ARG...
		local what=$1 want=$2 text=$3
		shift 3
		# bounded: a daemon that does not refuse would serve on
		rc=0; timeout 20 "$CORRAL" serve --socket "$T/t.sock" --state-dir "$T/t.state" "$@" \
			> "$T/out" 2>&1 < /dev/null || rc=$?
		expect_eq "$what" "$rc" "$want"
		expect_contains "$what: why" "$(< "$T/out")" "$text"
		[ ! -e "$T/t.sock" ] || fail "$what: it left its socket"
	}
	serve_fails "0.0.0.0 in clear" 125 "not a loopback address" \
		--listen "0.0.0.0:$port" --token-file "$T/token"
	code=$(curl -sS -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$port/v1/health" 2>/dev/null || true)
	expect_eq "nothing on the port" "$code" 000
	serve_fails "a certificate without its key" 2 "--tls-key" \
		--listen "127.0.0.1:$port" --token-file "$T/token" --tls-cert "$T/cert.pem"
	serve_fails "TLS without --listen" 2 "--listen" \
		--tls-cert "$T/cert.pem" --tls-key "$T/cert.key"
	serve_fails "another certificate's key" 125 "not the key of the certificate" \
		--listen "127.0.0.1:$port" --token-file "$T/token" \
		--tls-cert "$T/cert.pem" --tls-key "$T/other.key"
	serve_fails "a key for a certificate" 125 "not a PEM certificate" \
		--listen "127.0.0.1:$port" --token-file "$T/token" \
		--tls-cert "$T/cert.key" --tls-key "$T/cert.key"
	# a chain whose tail is cut (read through a buffer now, whole lines
	# at a time): refused, not served with the certificates before it
	{ cat "$T/cert.pem"; head -n 4 "$T/cert.pem"; } > "$T/cut.pem"
	serve_fails "a chain cut short" 125 "$T/cut.pem: not a PEM certificate (chain)" \
		--listen "127.0.0.1:$port" --token-file "$T/token" \
		--tls-cert "$T/cut.pem" --tls-key "$T/cert.key"
	# a daemon has no one to give a passphrase: it must not wait for one
	openssl pkey -in "$T/cert.key" -aes128 -passout pass:secret -out "$T/locked.key"
	chmod 600 "$T/locked.key"
	serve_fails "a key with a passphrase" 125 "without a passphrase" \
		--listen "127.0.0.1:$port" --token-file "$T/token" \
		--tls-cert "$T/cert.pem" --tls-key "$T/locked.key"
	chmod 644 "$T/cert.key"
	serve_fails "a key anyone may read" 125 "anyone may read it" \
		--listen "127.0.0.1:$port" --token-file "$T/token" \
		--tls-cert "$T/cert.pem" --tls-key "$T/cert.key"
	return 0
}

# A client that connects and never finishes its handshake, or speaks
# something else, is closed by the gate's timers; others are served.
t_tcp_tls_stalled_handshakes() {
	front_test
	local port token code
	start_tls_daemon --idle-timeout 1 --header-timeout 1 || return 1
	out=$($PY - "$port" <<'PYEOF'
import socket, sys, time
port = int(sys.argv[1])
for what, first in (("silent", b""), ("half a hello", b"\x16\x03\x01\x02\x00\x01"),
                    ("not TLS", b"GET / HTTP/1.1\r\n")):
    s = socket.create_connection(("127.0.0.1", port))
    if first:
        s.sendall(first)
    s.settimeout(15)
    t = time.time()
    try:
        while s.recv(4096):
            pass
        got = "closed"
    except socket.timeout:
        got = "open"
    except OSError:
        got = "closed"
    print("%s: %s" % (what, got))
    s.close()
PYEOF
)
	expect_contains "a silent client" "$out" "silent: closed"
	expect_contains "half a hello" "$out" "half a hello: closed"
	expect_contains "not TLS" "$out" "not TLS: closed"
	code=$(tls_curl -H "Authorization: Bearer $token" "https://127.0.0.1:$port/v1/health")
	expect_code "health after them" "$code" 200
	stop_daemon
}

# The socket is there only once the daemon is whole: a client that sees
# it may at once reach --listen, or send SIGHUP (a reload) or SIGTERM.
# It was made before the TLS files were read, and a SIGHUP then took its
# default action: the daemon died, status 129, without a word (found by
# tests/chaos_serve.py, seed 2, its TCP clients refused).  A chain of 1024
# certificates (600 KB, each decoded by OpenSSL in about 0.15 ms) holds
# that window open for about 0.2 s here, 20 times the poll's.  (It was
# 512, read a byte per read(2): 0.45 s, 1.5 s with the reload.)
t_tcp_tls_ready_when_socket_seen() {
	front_test
	local port token i=0 code
	port=$(free_port)
	tls_files "$T" || return 1
	token=$(new_token)
	cp "$T/cert.pem" "$T/chain.pem"
	for _ in 1 2 3 4 5 6 7 8 9 10; do
		cat "$T/chain.pem" "$T/chain.pem" > "$T/chain2.pem"
		mv "$T/chain2.pem" "$T/chain.pem"
	done
	launch_daemon --listen "127.0.0.1:$port" --token-file "$T/token" \
		--tls-cert "$T/chain.pem" --tls-key "$T/cert.key"
	while [ ! -S "$SOCK" ] && [ $i -lt 3000 ] && kill -0 "$DPID" 2>/dev/null; do
		nap 0.01
		i=$((i + 1))
	done
	[ -S "$SOCK" ] || { fail "no socket: $(tail -3 "$DLOG")"; return 1; }
	$PY -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 10).close()' \
		"$port" 2> "$T/connect.err" || fail "TCP refused with the socket there: $(tail -1 "$T/connect.err")"
	kill -HUP "$DPID"
	code=$(api GET /v1/health)
	expect_code "health after SIGHUP" "$code" 200
	await_log "SIGHUP: TLS reloaded" 1
	stop_daemon
}

# A client that offers TLS 1.0 or 1.1 only is told "protocol version" by
# the daemon's floor (SSL_CTX_set_min_proto_version): OpenSSL 3 alone
# would refuse too, with "internal error" (no signature its security level
# allows), and that would hold only as long as the library's defaults do.
# TLS 1.2 and 1.3 are served.
t_tcp_tls_no_old_versions() {
	front_test
	local port token v out
	start_tls_daemon || return 1
	for v in tls1 tls1_1; do
		out=$(timeout 20 openssl s_client -connect "127.0.0.1:$port" "-$v" \
			-cipher 'DEFAULT@SECLEVEL=0' < /dev/null 2>&1 || true)
		expect_contains "-$v: refused" "$out" "alert protocol version"
	done
	for v in tls1_2 tls1_3; do
		out=$(timeout 20 openssl s_client -connect "127.0.0.1:$port" "-$v" \
			-CAfile "$T/cert.pem" -verify_return_error < /dev/null 2>&1 || true)
		expect_contains "-$v: served" "$out" "Verify return code: 0 (ok)"
	done
	stop_daemon
}

# ---- TLS: SIGHUP reloads the certificate and key -----------------------------

# await_log TEXT N: until the daemon's log has N lines with TEXT (10 s)
await_log() {
	local i
	for i in $(seq 1 100); do
		[ "$(grep -cF -- "$1" "$DLOG")" -ge "$2" ] && return 0
		nap 0.1
	done
	fail "the daemon's log has no $2 line(s) with \"$1\": $(tail -3 "$DLOG")"
}

# served_fingerprint PORT: the SHA-256 fingerprint of the certificate a new
# connection to 127.0.0.1:PORT is served
served_fingerprint() {
	timeout 20 openssl s_client -connect "127.0.0.1:$1" -servername localhost \
		< /dev/null 2> /dev/null | openssl x509 -noout -fingerprint -sha256 2> /dev/null
}

fingerprint() { openssl x509 -in "$1" -noout -fingerprint -sha256; }

# A connection made before a reload, kept open: argv port, CA file, token,
# a file whose appearance says "ask again" (30 s at most).  Prints each
# answer's status, then the fingerprint of the certificate it was served.
KEEPALIVE='
import hashlib, os, socket, ssl, sys, time
port, ca, token, go = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
ctx = ssl.create_default_context(cafile=ca)
s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=30),
                    server_hostname="localhost")
def ask():
    s.sendall(("GET /v1/health HTTP/1.1\r\nHost: localhost\r\n"
               "Authorization: Bearer %s\r\n\r\n" % token).encode())
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(4096)
        if not d:
            return "closed"
        buf += d
    head, body = buf.split(b"\r\n\r\n", 1)
    n = [int(l.split(b":")[1]) for l in head.split(b"\r\n")
         if l.lower().startswith(b"content-length:")][0]
    while len(body) < n:
        d = s.recv(4096)
        if not d:
            return "closed"
        body += d
    return head.split(b" ")[1].decode()
print(ask(), flush=True)
end = time.time() + 30
while not os.path.exists(go) and time.time() < end:
    time.sleep(0.05)
print(ask(), flush=True)
print(hashlib.sha256(s.getpeercert(binary_form=True)).hexdigest())
'

# A renewed certificate and key, swapped in under the same names and
# SIGHUP: new connections are served the new one, a connection open since
# before goes on with the old.
t_tcp_tls_reload() {
	front_test
	local port token code pypid fp
	tls_files "$T" new || return 1
	start_tls_daemon || return 1
	cp "$T/cert.pem" "$T/old.pem"
	expect_eq "served before" "$(served_fingerprint "$port")" "$(fingerprint "$T/old.pem")"
	$PY -c "$KEEPALIVE" "$port" "$T/old.pem" "$token" "$T/go" > "$T/keepalive" 2>&1 &
	pypid=$!
	echo "$pypid" >> "$T/watchdogs"
	for _ in $(seq 1 200); do [ -s "$T/keepalive" ] && break; nap 0.05; done
	expect_eq "the open connection's first answer" "$(head -1 "$T/keepalive")" 200
	cp "$T/new.pem" "$T/cert.pem"
	cp "$T/new.key" "$T/cert.key"
	kill -HUP "$DPID"
	await_log "SIGHUP: TLS reloaded" 1
	expect_eq "served after SIGHUP" "$(served_fingerprint "$port")" "$(fingerprint "$T/new.pem")"
	code=$(tls_curl -H "Authorization: Bearer $token" "https://127.0.0.1:$port/v1/health")
	expect_code "a new client that trusts the new certificate" "$code" 200
	code=$(curl -sS --max-time 30 --cacert "$T/old.pem" -o /dev/null -w '%{http_code}' \
		-H "Authorization: Bearer $token" "https://127.0.0.1:$port/v1/health" 2>/dev/null || true)
	expect_eq "a new client that trusts only the old one" "$code" 000
	touch "$T/go"
	wait "$pypid" || fail "the open connection's client: $(< "$T/keepalive")"
	expect_eq "the open connection, asked again" "$(sed -n 2p "$T/keepalive")" 200
	# its certificate is the one its handshake had
	expect_eq "the open connection's certificate" "$(sed -n 3p "$T/keepalive")" \
		"$(openssl x509 -in "$T/old.pem" -outform DER | sha256sum | cut -d' ' -f1)"
	stop_daemon
}

# A reload that fails says why in one line naming the file, and the pair
# that served goes on serving: another certificate's key, a key anyone may
# read (also behind a symlink), a FIFO (which must not stop the loop).  A
# symlink to a good key of the operator's is followed, as at the start.
t_tcp_tls_reload_refused() {
	front_test
	local port token code n=0 fp
	port=$(free_port)
	tls_files "$T" || return 1
	tls_files "$T" other || return 1
	tls_files "$T" new || return 1
	token=$(new_token)
	start_daemon --listen "127.0.0.1:$port" --token-file "$T/token" \
		--tls-cert "$T/cert.pem" --tls-key "$T/cert.key"
	fp=$(fingerprint "$T/cert.pem")
	cp "$T/cert.key" "$T/good.key"
	cp "$T/cert.pem" "$T/served.pem"
	reload_fails() {	# reload_fails WHAT TEXT: SIGHUP, and the old pair serves
		n=$((n + 1))
		kill -HUP "$DPID"
		await_log "SIGHUP: TLS not reloaded" "$n"
		expect_contains "$1: why" "$(grep -F "SIGHUP" "$DLOG" | tail -1)" "$2"
		expect_eq "$1: one line" "$(grep -c "SIGHUP" "$DLOG")" "$n"
		expect_eq "$1: still served" "$(served_fingerprint "$port")" "$fp"
		code=$(tls_curl --cacert "$T/served.pem" -H "Authorization: Bearer $token" \
			"https://127.0.0.1:$port/v1/health")
		expect_code "$1: health" "$code" 200
	}
	cp "$T/other.key" "$T/cert.key"
	reload_fails "another certificate's key" "$T/cert.key: not the key of the certificate"
	cp "$T/good.key" "$T/cert.key"
	chmod 644 "$T/cert.key"
	reload_fails "a key anyone may read" "TLS key $T/cert.key: anyone may read it"
	rm "$T/cert.key"
	cp "$T/good.key" "$T/open.key"
	chmod 644 "$T/open.key"
	ln -s "$T/open.key" "$T/cert.key"
	reload_fails "a symlink to a key anyone may read" "TLS key $T/cert.key: anyone may read it"
	rm "$T/cert.key"
	mkfifo -m 600 "$T/cert.key"
	reload_fails "a FIFO" "TLS key $T/cert.key: not a regular file"
	rm "$T/cert.key"
	echo "not PEM" > "$T/cert.pem.new"
	cp "$T/cert.pem" "$T/cert.pem.good"
	mv "$T/cert.pem.new" "$T/cert.pem"
	cp "$T/good.key" "$T/cert.key"
	chmod 600 "$T/cert.key"
	reload_fails "a broken certificate" "$T/cert.pem: not a PEM certificate"
	# the operator's own file through a symlink, as renewal tools link it
	cp "$T/new.pem" "$T/cert.pem"
	rm "$T/cert.key"
	ln -s "$T/new.key" "$T/cert.key"
	kill -HUP "$DPID"
	await_log "SIGHUP: TLS reloaded" 1
	expect_eq "the symlinked key: served" "$(served_fingerprint "$port")" "$(fingerprint "$T/new.pem")"
	stop_daemon
}

# ---- TLS: client certificates ------------------------------------------------

# client_cas: the server's CA and key in $T, the clients' CA in $T/c and
# another in $T/o, each with a leaf for agent.test
client_cas() {
	test_ca "$T" "DNS:localhost,IP:127.0.0.1" || { fail "openssl: the server's CA"; return 1; }
	chmod 600 "$T/srv.key"
	mkdir "$T/c" "$T/o"
	test_ca "$T/c" "DNS:agent.test" || { fail "openssl: the clients' CA"; return 1; }
	test_ca "$T/o" "DNS:agent.test" || { fail "openssl: another CA"; return 1; }
}

# With --tls-client-ca, a TLS client needs a certificate that CA signed
# (current, for client use, itself no CA) and the token: the handshake
# fails without one, and nothing of the API is answered.
t_tcp_tls_client_cert() {
	front_test
	local port token code out rc U
	port=$(free_port)
	client_cas || return
	# an expired one, from the clients' CA
	openssl x509 -req -in "$T/c/srv.csr" -CA "$T/c/ca.pem" -CAkey "$T/c/ca.key" \
		-CAcreateserial -days -1 -out "$T/c/expired.pem" 2> /dev/null ||
		{ fail "openssl: an expired certificate"; return; }
	# one for servers only
	printf 'extendedKeyUsage=serverAuth\n' > "$T/c/ext.srv"
	openssl x509 -req -in "$T/c/srv.csr" -CA "$T/c/ca.pem" -CAkey "$T/c/ca.key" \
		-CAcreateserial -days 2 -extfile "$T/c/ext.srv" -out "$T/c/server-only.pem" 2> /dev/null ||
		{ fail "openssl: a server certificate"; return; }
	# a CA's certificate as a client's: one CA:TRUE the clients' CA signed,
	# and one that the CA:TRUE one signed (sent with it, a chain to the
	# clients' CA): verify_client() refuses both, OpenSSL takes them.  A
	# self-signed one (CA:TRUE, as openssl req -x509 makes it) that the
	# file lists is taken: the operator pinned it.
	printf 'basicConstraints=critical,CA:TRUE\n' > "$T/c/ext.ca"
	openssl x509 -req -in "$T/c/srv.csr" -CA "$T/c/ca.pem" -CAkey "$T/c/ca.key" \
		-CAcreateserial -days 2 -extfile "$T/c/ext.ca" -out "$T/c/ca-true.pem" 2> /dev/null &&
	openssl x509 -req -in "$T/o/srv.csr" -CA "$T/c/ca-true.pem" -CAkey "$T/c/srv.key" \
		-CAcreateserial -days 2 -out "$T/c/sub.pem" 2> /dev/null &&
	cat "$T/c/ca-true.pem" >> "$T/c/sub.pem" &&
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
		-subj /CN=pinned -keyout "$T/c/pinned.key" -out "$T/c/pinned.pem" 2> /dev/null &&
	cat "$T/c/ca.pem" "$T/c/pinned.pem" > "$T/c/clients.pem" ||
		{ fail "openssl: CA certificates for clients"; return; }
	token=$(new_token)
	start_daemon --listen "127.0.0.1:$port" --token-file "$T/token" \
		--tls-cert "$T/srv.pem" --tls-key "$T/srv.key" --tls-client-ca "$T/c/clients.pem"
	U=https://127.0.0.1:$port
	mtls() {	# mtls ARG...: the status; the body in $T/body
		rm -f "$T/body"
		curl -sS --max-time 30 --cacert "$T/ca.pem" -o "$T/body" -D "$T/headers" \
			-w '%{http_code}' "$@" 2> "$T/curl.err" || true
	}
	code=$(mtls --cert "$T/c/srv.pem" --key "$T/c/srv.key" \
		-H "Authorization: Bearer $token" "$U/v1/health")
	expect_code "a good certificate and the token" "$code" 200
	code=$(mtls --cert "$T/c/srv.pem" --key "$T/c/srv.key" "$U/v1/health")
	expect_error "a good certificate, no token" "$code" 401 unauthorized
	for what in "no certificate" "another CA's" "an expired one" "one for servers only" \
		"a CA:TRUE one" "one a CA:TRUE one signed"; do
		case $what in
		"no certificate") set -- ;;
		"another CA's") set -- --cert "$T/o/srv.pem" --key "$T/o/srv.key" ;;
		"an expired one") set -- --cert "$T/c/expired.pem" --key "$T/c/srv.key" ;;
		"one for servers only") set -- --cert "$T/c/server-only.pem" --key "$T/c/srv.key" ;;
		"a CA:TRUE one") set -- --cert "$T/c/ca-true.pem" --key "$T/c/srv.key" ;;
		*) set -- --cert "$T/c/sub.pem" --key "$T/o/srv.key" ;;
		esac
		code=$(mtls "$@" -H "Authorization: Bearer $token" "$U/v1/health")
		expect_eq "$what: no answer" "$code" 000
		[ ! -s "$T/body" ] || fail "$what: an answer came: $(body)"
	done
	code=$(mtls --cert "$T/c/srv.pem" --key "$T/c/srv.key" \
		-H "Authorization: Bearer $token" "$U/v1/health")
	expect_code "a good certificate after them" "$code" 200
	code=$(mtls --cert "$T/c/pinned.pem" --key "$T/c/pinned.key" \
		-H "Authorization: Bearer $token" "$U/v1/health")
	expect_code "a pinned self-signed certificate" "$code" 200
	# the client verbs and corral mcp
	out=$("$CORRAL" ls --url "$U" --token-file "$T/token" --ca-file "$T/ca.pem" \
		--cert-file "$T/c/srv.pem" --key-file "$T/c/srv.key" 2>&1) ||
		fail "corral ls with a client certificate: $out"
	rc=0; out=$("$CORRAL" ls --url "$U" --token-file "$T/token" --ca-file "$T/ca.pem" 2>&1) || rc=$?
	expect_eq "corral ls without one" "$rc" 125
	expect_contains "corral ls without one: the hint" "$out" "give --cert-file and --key-file"
	req='{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "sandbox_list", "arguments": {}}}'
	out=$(printf '%s\n' "$req" | timeout 60 "$CORRAL" mcp --url "$U" --token-file "$T/token" \
		--ca-file "$T/ca.pem" --cert-file "$T/c/srv.pem" --key-file "$T/c/srv.key" 2> "$T/err") || true
	expect_contains "corral mcp with a client certificate" "$out" '"structuredContent":{"sandboxes":[]}'
	rc=0
	printf '%s\n' "$req" | timeout 60 "$CORRAL" mcp --url "$U" --token-file "$T/token" \
		--ca-file "$T/ca.pem" > "$T/out" 2> "$T/err" || rc=$?
	expect_eq "corral mcp without one" "$rc" 125
	expect_contains "corral mcp without one: the hint" "$(< "$T/err")" "give --cert-file and --key-file"
	stop_daemon
}

# SIGHUP reads --tls-client-ca again: a CA taken out is no longer trusted
# (the reload makes a new store, it does not add to the old), the one put
# in is; a client CA swapped for a symlink to /dev/zero is refused with a
# line, and the CA before it goes on.
t_tcp_tls_client_ca_reload() {
	front_test
	local port token code
	port=$(free_port)
	client_cas || return
	cp "$T/c/ca.pem" "$T/clients.pem"
	token=$(new_token)
	start_daemon --listen "127.0.0.1:$port" --token-file "$T/token" \
		--tls-cert "$T/srv.pem" --tls-key "$T/srv.key" --tls-client-ca "$T/clients.pem"
	as() {	# as DIR: the status of a health call with DIR's client certificate
		curl -sS --max-time 30 --cacert "$T/ca.pem" --cert "$1/srv.pem" --key "$1/srv.key" \
			-o /dev/null -w '%{http_code}' -H "Authorization: Bearer $token" \
			"https://127.0.0.1:$port/v1/health" 2> /dev/null || true
	}
	expect_eq "the first CA's client" "$(as "$T/c")" 200
	expect_eq "the other CA's client" "$(as "$T/o")" 000
	cp "$T/o/ca.pem" "$T/clients.pem"
	kill -HUP "$DPID"
	await_log "SIGHUP: TLS reloaded" 1
	expect_eq "after the swap: the first CA's client" "$(as "$T/c")" 000
	expect_eq "after the swap: the other CA's client" "$(as "$T/o")" 200
	rm "$T/clients.pem"
	ln -s /dev/zero "$T/clients.pem"
	kill -HUP "$DPID"
	await_log "SIGHUP: TLS not reloaded" 1
	expect_contains "/dev/zero: why" "$(grep -F "not reloaded" "$DLOG")" \
		"TLS client CA $T/clients.pem: not a regular file"
	expect_eq "after /dev/zero: the other CA's client" "$(as "$T/o")" 200
	expect_eq "after /dev/zero: the first CA's client" "$(as "$T/c")" 000
	stop_daemon
}

# The options' errors: each names its file, before anything listens or is sent.
t_tcp_tls_client_cert_options() {
	front_test
	local port rc out
	port=$(free_port)
	new_token > /dev/null
	tls_files "$T" || return 1
	rc=0; out=$(timeout 20 "$CORRAL" serve --socket "$T/t.sock" --state-dir "$T/t.state" \
		--listen "127.0.0.1:$port" --token-file "$T/token" --tls-client-ca "$T/cert.pem" \
		2>&1 < /dev/null) || rc=$?
	expect_eq "--tls-client-ca without --tls-cert" "$rc" 2
	expect_contains "why" "$out" "--tls-client-ca needs --tls-cert"
	rc=0; out=$(timeout 20 "$CORRAL" serve --socket "$T/t.sock" --state-dir "$T/t.state" \
		--listen "127.0.0.1:$port" --token-file "$T/token" --tls-cert "$T/cert.pem" \
		--tls-key "$T/cert.key" --tls-client-ca "$T/nothing.pem" 2>&1 < /dev/null) || rc=$?
	expect_eq "a client CA that is not there" "$rc" 125
	expect_contains "why" "$out" "TLS client CA $T/nothing.pem: No such file"
	rc=0; out=$(timeout 20 "$CORRAL" serve --socket "$T/t.sock" --state-dir "$T/t.state" \
		--listen "127.0.0.1:$port" --token-file "$T/token" --tls-cert "$T/cert.pem" \
		--tls-key "$T/cert.key" --tls-client-ca "$T/cert.key" 2>&1 < /dev/null) || rc=$?
	expect_eq "a client CA with no certificate" "$rc" 125
	expect_contains "why" "$out" "$T/cert.key: no PEM CA certificate in it"
	[ ! -e "$T/t.sock" ] || fail "it left its socket"
	client() {	# client WHAT STATUS TEXT ARG...
		local what=$1 want=$2 text=$3
		shift 3
		rc=0; out=$("$CORRAL" ls --token-file "$T/token" "$@" 2>&1) || rc=$?
		expect_eq "$what" "$rc" "$want"
		expect_contains "$what: why" "$out" "$text"
	}
	client "no such --cert-file" 125 "--cert-file $T/nothing.pem: No such file" \
		--url "https://127.0.0.1:$port" --cert-file "$T/nothing.pem" --key-file "$T/cert.key"
	client "no such --key-file" 125 "--key-file $T/nothing.key: No such file" \
		--url "https://127.0.0.1:$port" --cert-file "$T/cert.pem" --key-file "$T/nothing.key"
	client "--cert-file alone" 2 "--cert-file needs --key-file" \
		--url "https://127.0.0.1:$port" --cert-file "$T/cert.pem"
	client "--key-file alone" 2 "--key-file needs --cert-file" \
		--url "https://127.0.0.1:$port" --key-file "$T/cert.key"
	client "--cert-file over http://" 2 "goes with an https:// --url" \
		--url "http://127.0.0.1:$port" --cert-file "$T/cert.pem" --key-file "$T/cert.key"
	rc=0; out=$("$CORRAL" ls --socket "$T/t.sock" --cert-file "$T/cert.pem" \
		--key-file "$T/cert.key" 2>&1) || rc=$?
	expect_eq "--cert-file with --socket" "$rc" 2
	expect_contains "why" "$out" "the unix socket needs no certificate"
}

# KEYSCAN: argv memscan, then KEY-FILE PID WANT...: whether process PID
# holds the key's P-256 scalar, as OpenSSL holds it (little-endian words)
# and as the file has it (a 12-byte window of each without a NUL); WANT is
# "yes" (in either form) or "no" (in neither).  Prints what differs.
KEYSCAN='
import re, subprocess, sys
scan, a = sys.argv[1], sys.argv[2:]
def scalar(key):
    text = subprocess.run(["openssl", "pkey", "-in", key, "-text", "-noout"],
                          capture_output=True, text=True, check=True).stdout
    m = re.search(r"priv:\s*\n((?:\s+[0-9a-f:]+\n)+)", text)
    return bytes.fromhex(re.sub(r"[\s:]", "", m.group(1)))[-32:]
def window(x):
    return next(x[i:i + 12] for i in range(len(x) - 11) if 0 not in x[i:i + 12])
def holds(pid, w):
    return subprocess.run([scan, pid, w], capture_output=True).returncode == 0
bad = 0
for key, pid, want in zip(a[::3], a[1::3], a[2::3]):
    b = scalar(key)
    got = [form for form, w in (("as held", window(b[::-1])), ("as filed", window(b)))
           if holds(pid, w)]
    if want == "yes" and not got:
        print("the scan did not find %s in %s" % (key, pid))
        bad = 1
    if want == "no" and got:
        print("%s holds %s (%s)" % (pid, key, ", ".join(got)))
        bad = 1
sys.exit(bad)
'

# The listener's private key is in the daemon (the scan finds its scalar
# there) and in no box's init, a fork of the daemon; after SIGHUP swaps in
# a new key, neither key is in any box's init, and the old one is gone
# from the daemon (zeroed) once no connection uses it.
t_tls_key_not_in_a_box() {
	[ "$ME" = 0 ] || { skip "reading another process's memory needs root"; return; }
	local scan="" port token code id pid inits specs i gone
	scan=$(memscan_find)
	[ -n "$scan" ] || { fail "no memscan helper beside $CORRAL"; return; }
	tls_files "$T" new || return 1
	start_tls_daemon || return 1
	cp "$T/cert.key" "$T/old.key"
	box_over_tls() {
		code=$(tls_curl -H "Authorization: Bearer $token" -X POST "https://127.0.0.1:$port/v1/sandboxes")
		expect_code "create over TLS" "$code" 201
		id=$(jq 'v["id"]')
		code=$(tls_curl -H "Authorization: Bearer $token" -X POST -d '{"argv": ["true"]}' \
			"https://127.0.0.1:$port/v1/sandboxes/$id/exec")
		expect_code "exec over TLS" "$code" 200
	}
	box_over_tls
	inits=$(box_inits)
	[ -n "$inits" ] || fail "no box init to scan"
	specs="$T/old.key $DPID yes"
	for pid in $inits; do specs="$specs $T/old.key $pid no"; done
	$PY -c "$KEYSCAN" "$scan" $specs > "$T/scan" 2>&1 || fail "$(< "$T/scan")"
	# the renewed pair, read after the secure heap exists as the first was
	cp "$T/new.pem" "$T/cert.pem"
	cp "$T/new.key" "$T/cert.key"
	kill -HUP "$DPID"
	await_log "SIGHUP: TLS reloaded" 1
	box_over_tls
	inits=$(box_inits)
	expect_eq "two boxes' inits" "$(echo $inits | wc -w)" 2
	specs="$T/new.key $DPID yes"
	for pid in $inits; do specs="$specs $T/old.key $pid no $T/new.key $pid no"; done
	$PY -c "$KEYSCAN" "$scan" $specs > "$T/scan" 2>&1 || fail "$(< "$T/scan")"
	# every connection of the old pair is closed: when the daemon has seen it, the key is gone
	gone=no
	for i in $(seq 1 50); do
		$PY -c "$KEYSCAN" "$scan" "$T/old.key" "$DPID" no > "$T/scan" 2>&1 &&
			{ gone=yes; break; }
		nap 0.2
	done
	[ "$gone" = yes ] || fail "after the reload: $(< "$T/scan")"
	stop_daemon
}

# One sandbox against another in one daemon: B holds what a neighbour
# could reach (a file in /tmp and /dev/shm, SysV shared memory and a
# message queue (POSIX queues: EACCES inside), an abstract unix socket, a TCP
# port on loopback, a file lock; a process whose host pid A is told),
# and A, in one exec, looks for each.  Each must be B's alone: the
# sandboxes' own tmpfs, ipc, net and pid namespaces, whatever their
# shared host uid.  And every process of both is the OOM killer's
# choice before the daemon (oom.c).
NEIGHBOUR_B='
import ctypes, fcntl, os, socket, sys, time
libc = ctypes.CDLL(None, use_errno=True)
open("/tmp/b-secret", "w").write("b")
open("/dev/shm/b-shm", "w").write("b")
assert libc.shmget(0x4242, 4096, 0o1600) >= 0
assert libc.msgget(0x4242, 0o1600) >= 0
u = socket.socket(socket.AF_UNIX); u.bind("\0corral-neighbour-b"); u.listen()
t = socket.socket(); t.bind(("127.0.0.1", 7077)); t.listen()
lk = open("/tmp/b-lock", "w"); fcntl.lockf(lk, fcntl.LOCK_EX)
print("ready", flush=True)
time.sleep(60)
'
NEIGHBOUR_A='
import ctypes, errno, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
def err(r):
    return "ok" if r >= 0 else errno.errorcode[ctypes.get_errno()]
mine = {os.getpid(), os.getppid(), 1}
seen = [p for p in os.listdir("/proc") if p.isdigit() and int(p) not in mine]
print("procs", " ".join(open("/proc/%s/cmdline" % p).read().replace("\0", " ") for p in seen) or "-")
print("tmp", os.path.exists("/tmp/b-secret"), os.path.exists("/dev/shm/b-shm"))
print("sysv", err(libc.shmget(0x4242, 0, 0)), err(libc.msgget(0x4242, 0)))
for name, fam, addr in (("abstract", socket.AF_UNIX, "\0corral-neighbour-b"),
                        ("tcp", socket.AF_INET, ("127.0.0.1", 7077))):
    s = socket.socket(fam)
    try:
        s.connect(addr); print(name, "connected")
    except OSError as e:
        print(name, errno.errorcode[e.errno])
try:
    os.kill(int(sys.argv[1]), 0); print("signal", "delivered")
except OSError as e:
    print("signal", errno.errorcode[e.errno])
print("locks", len(open("/proc/locks").read()))
print("oom", open("/proc/self/oom_score_adj").read().strip())
'
t_neighbours_apart() {
	local a b code pid i=0 hostpid="" name="b-$$-$RANDOM.py" want
	start_daemon
	a=$(mksb) && b=$(mksb) || return 1
	code=$(api PUT "/v1/sandboxes/$b/files?path=/tmp/$name" --data-binary "$NEIGHBOUR_B")
	expect_code "put B's script" "$code" 201
	code=$(api POST "/v1/sandboxes/$b/processes" -d "{\"argv\": [\"python3\", \"/tmp/$name\"]}")
	expect_code "B's holder" "$code" 201
	pid=$(jq 'v["pid"]')
	while [ $i -lt 500 ]; do
		api GET "/v1/sandboxes/$b/processes/$pid/output" > /dev/null
		grep -q ready "$T/body" && break
		grep -q '"type":"end"' "$T/body" && break
		nap 0.02
		i=$((i + 1))
	done
	grep -q ready "$T/body" || { fail "B's holder never ready: $(body)"; return 1; }
	hostpid=$(pgrep -f "^python3 /tmp/$name\$" | head -1)
	[ -n "$hostpid" ] || { fail "no host pid for B's holder"; return 1; }
	code=$(api PUT "/v1/sandboxes/$a/files?path=/tmp/a.py" --data-binary "$NEIGHBOUR_A")
	expect_code "put A's probe" "$code" 201
	code=$(ex "$a" "{\"argv\": [\"python3\", \"/tmp/a.py\", \"$hostpid\"]}")
	expect_code "A's probe" "$code" 200
	own=$(cat /proc/"$DPID"/oom_score_adj)
	want="procs -
tmp False False
sysv ENOENT ENOENT
abstract ECONNREFUSED
tcp ECONNREFUSED
signal ESRCH
locks 0
oom $(( own > 500 ? own : 500 ))"
	expect_eq "what A sees of B" "$(jq 'v["stdout"]')" "$want" ||
		echo "stderr: $(jq 'v["stderr"]')"
	expect_eq "the daemon's own oom_score_adj" "$(cat /proc/"$DPID"/oom_score_adj)" "$own"
	stop_daemon
}

# box_inits: the pids of the daemon's boxes' inits; a thread of the
# daemon's that ends between the glob and the read has no children, which
# is no error (cat's complaint went to the test's log, and under set -eE
# its ERR trap fired in the substitution)
box_inits() {
	local pid
	for pid in $(cat /proc/"$DPID"/task/*/children 2>/dev/null || true); do
		[ "$(tr -d '\0' < /proc/"$pid"/cmdline 2>/dev/null)" = corral-init ] && echo "$pid"
	done
	return 0
}

# A box's init is the daemon's own binary, forked: the agent, the same uid
# inside, reaches neither it (/proc/1/exe, runc's CVE-2019-5736) nor init's
# fds and memory, which the daemon's were.
t_box_init_out_of_the_agents_reach() {
	local id out own
	own=$(md5sum < "$CORRAL")
	start_daemon
	id=$(mksb)
	out=$(sbsh "$id" 'echo x >> /proc/1/exe 2>/dev/null; echo w=$?
		head -c 4 /proc/1/exe > /dev/null 2>&1; echo r=$?
		ls /proc/1/fd > /dev/null 2>&1; echo fd=$?
		head -c 1 /proc/1/mem > /dev/null 2>&1; echo mem=$?
		awk "/^Uid:/ {print \"uid=\" \$2}" /proc/1/status; id -u')
	expect_eq "init out of reach" "$(echo $out)" "w=2 r=1 fd=2 mem=1 uid=1000 1000"
	expect_eq "the daemon's binary" "$(md5sum < "$CORRAL")" "$own"
	stop_daemon
}

# A daemon's sandbox sees none of the host's devices under /proc (as a
# `corral run` does not: t_proc_devices_masked): bus/ (PCI cards, input
# devices with a Bluetooth one's address) and driver/ (a GPU's UUID) are
# empty, read-only tmpfs of the box's own, and interrupts reads empty
# (t_proc_interrupts_masked).
t_box_proc_devices_masked() {
	local id out d
	start_daemon
	id=$(mksb) || return 1
	out=$(sbsh "$id" 'for d in /proc/bus /proc/driver; do
			[ -d $d ] && echo "$d $(ls -A $d | wc -l) $(stat -f -c %T $d)"; done
		echo "bytes $(cat /proc/bus/pci/devices /proc/bus/input/devices 2>/dev/null | wc -c)"
		echo "interrupts $(cat /proc/interrupts 2>/dev/null | wc -c)"')
	for d in /proc/bus /proc/driver; do
		[ -d "$d" ] || continue
		expect_contains "$d empty, the box's" "$out" "$d 0 tmpfs"
	done
	expect_contains "no device listed" "$out" "bytes 0"
	expect_contains "no interrupts counted" "$out" "interrupts 0"
	stop_daemon
}

# A box's init catches no signal: the daemon's handlers (libevent's, for
# SIGTERM, SIGINT and, with TLS, SIGHUP) came with the fork, and a caught
# signal from inside the namespace would reach PID 1 and run them there.
t_box_init_catches_no_signal() {
	local port token code id pid inits cgt
	start_tls_daemon || return 1
	[ $(( 0x$(awk '/^SigCgt:/ {print $2}' /proc/"$DPID"/status) & 1 )) = 1 ] ||
		fail "the daemon does not catch SIGHUP: the check below would show nothing"
	code=$(api POST /v1/sandboxes)
	expect_code "create" "$code" 201
	id=$(jq 'v["id"]')
	code=$(api POST "/v1/sandboxes/$id/exec" -d '{"argv": ["sh", "-c", "kill -HUP 1; kill -TERM 1; echo alive"]}')
	expect_code "exec" "$code" 200
	expect_eq "signals to init from inside" "$(jq 'v["stdout"]')" "alive"
	inits=$(box_inits)
	[ -n "$inits" ] || fail "no box init"
	for pid in $inits; do
		cgt=$(awk '/^SigCgt:/ {print $2}' /proc/"$pid"/status)
		expect_eq "init $pid's caught signals" "$cgt" 0000000000000000
	done
	code=$(api POST "/v1/sandboxes/$id/exec" -d '{"argv": ["echo", "after"]}')
	expect_code "exec after" "$code" 200
	expect_contains "the daemon did not reload" "$(< "$DLOG")" "listening on"
	expect_not_contains "the daemon did not reload" "$(< "$DLOG")" "SIGHUP"
	stop_daemon
}

# A box's init is a fork of the daemon that never execs.  It must hold
# neither the daemon's token (read from its file, and shown by every TCP
# request) nor the daemon's environment.  Scanned from the host
# (tests/helpers/memscan), the daemon first: the scan finds them there.
t_box_init_holds_no_token() {
	[ "$ME" = 0 ] || { skip "reading another process's memory needs root"; return; }
	local scan="" d token marker="corral-env-$$-$RANDOM-marker" pid inits="" id first second
	local callenv="corral-call-$$-$RANDOM-env-$(head -c 600 /dev/urandom | od -An -tx1 | tr -d " \n")"
	scan=$(memscan_find)
	[ -n "$scan" ] || { fail "no memscan helper beside $CORRAL"; return; }
	port=$(free_port)
	token=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
	echo "$token" > "$T/token"
	chmod 600 "$T/token"
	CORRAL_TEST_ONLY_ENV=$marker start_daemon --listen "127.0.0.1:$port" --token-file "$T/token"
	code=$(curl -sS --max-time 30 -o "$T/body" -w '%{http_code}' -H "Authorization: Bearer $token" \
		-X POST "http://127.0.0.1:$port/v1/sandboxes" 2> "$T/curl.err" || true)
	expect_code "create over TCP" "$code" 201
	id=$(jq 'v["id"]')
	code=$(curl -sS --max-time 30 -o "$T/body" -w '%{http_code}' -H "Authorization: Bearer $token" \
		-X POST -d '{"argv": ["true"]}' "http://127.0.0.1:$port/v1/sandboxes/$id/exec" 2> "$T/curl.err" || true)
	expect_code "exec over TCP" "$code" 200
	# a call's environment is its client's, for that call only
	code=$(api POST "/v1/sandboxes/$id/exec" -d "{\"argv\": [\"true\"], \"env\": {\"K\": \"$callenv\"}}")
	expect_code "exec with an environment" "$code" 200
	first=$(box_inits)
	# and one made after those requests, over the unix socket
	code=$(api POST /v1/sandboxes)
	expect_code "create" "$code" 201
	inits=$(box_inits)
	second=$(echo " $inits " | sed "s/ $first / /; s/ //g")
	expect_eq "two boxes' inits" "$(echo $inits | wc -w)" 2
	# AddressSanitizer's runtime keeps a copy of the environment it
	# started with, out of corral's reach: there, only the token
	local values="$token $marker"
	! ldd "$CORRAL" 2>/dev/null | grep -q libasan || values=$token
	for v in $values; do
		"$scan" "$DPID" "$v" > /dev/null || fail "the scan did not find $v in the daemon"
		for pid in $inits; do
			"$scan" "$pid" "$v" > "$T/scan" && fail "box init $pid holds $v: $(< "$T/scan")"
		done
	done
	# the first box's call: never in the second box.  Its tail is looked
	# for: a free overwrites a block's first bytes, not the rest
	"$scan" "$second" "${callenv: -64}" > "$T/scan" &&
		fail "box init $second holds another box's call's environment: $(< "$T/scan")"
	stop_daemon
}

random_hex() { head -c 300 /dev/urandom | od -An -tx1 | tr -d ' \n'; }

# Nothing one client's requests left in the daemon's heap is in a box made
# after them: a policy's env.set value, a call's argv, environment and
# stdin, each freed with its box (corral's free zeroes a block,
# src/cli/zerofree.c).  Long and random, looked for by their tails: a free
# overwrites a block's first bytes, not the rest.
t_box_init_holds_no_earlier_request() {
	[ "$ME" = 0 ] || { skip "reading another process's memory needs root"; return; }
	local scan="" d id first second v n
	scan=$(memscan_find)
	[ -n "$scan" ] || { fail "no memscan helper beside $CORRAL"; return; }
	local envset="envset-$(random_hex)" argv="argv-$(random_hex)"
	local callenv="callenv-$(random_hex)" stdin="stdin-$(random_hex)"
	start_daemon
	id=$(mksb "{\"policy\": {\"env\": {\"set\": {\"TOKEN\": \"$envset\"}}}}")
	code=$(api POST "/v1/sandboxes/$id/exec" -d "{\"argv\": [\"true\", \"$argv\"], \"env\": {\"K\": \"$callenv\"}, \"stdin\": \"$stdin\"}")
	expect_code "exec with argv, env and stdin" "$code" 200
	first=$(box_inits)
	code=$(api DELETE "/v1/sandboxes/$id")
	expect_code "delete" "$code" 200
	mksb > /dev/null
	second=$(box_inits)
	[ -n "$second" ] && [ "$second" != "$first" ] || { fail "no second box init: $second"; stop_daemon; return; }
	for v in "$envset" "$argv" "$callenv" "$stdin"; do
		n=${v%%-*}
		"$scan" "$second" "${v: -64}" > "$T/scan" &&
			fail "the next box's init holds the first's $n: $(< "$T/scan")"
	done
	stop_daemon
}

# Nor the body of a request still arriving (libevent's buffers, live:
# src/lib/livemem.c): a client sends a file's first bytes and holds.
t_box_init_holds_no_request_arriving() {
	[ "$ME" = 0 ] || { skip "reading another process's memory needs root"; return; }
	local scan="" d id first init="" i held marker="arriving-$(random_hex)"
	scan=$(memscan_find)
	[ -n "$scan" ] || { fail "no memscan helper beside $CORRAL"; return; }
	start_daemon
	id=$(mksb)
	$PY - "$SOCK" "$id" "$marker" <<'EOF2' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b"PUT /v1/sandboxes/%s/files?path=/tmp/up HTTP/1.1\r\nHost: x\r\n"
          b"Content-Length: 100000\r\n\r\n%s" % (sys.argv[2].encode(), sys.argv[3].encode()))
time.sleep(120)
EOF2
	held=$!
	for i in $(seq 1 100); do "$scan" "$DPID" "${marker: -64}" > /dev/null && break; nap 0.05; done
	"$scan" "$DPID" "${marker: -64}" > /dev/null || fail "the scan did not find the arriving body in the daemon"
	first=$(echo $(box_inits))
	mksb > /dev/null
	for i in $(box_inits); do
		echo " $first " | grep -q " $i " || init=$i
	done
	if [ -z "$init" ]; then
		fail "no second box"
	else
		"$scan" "$init" "${marker: -64}" > "$T/scan" &&
			fail "the next box's init holds a request still arriving: $(< "$T/scan")"
	fi
	kill "$held" 2>/dev/null || true
	wait "$held" 2>/dev/null || true
	stop_daemon
}

# A box's init holds nothing of another box's live terminated connection:
# neither its TLS secrets (OpenSSL's blocks, src/tls/memory.c) nor the
# plaintext of the request under way (the proxy's parser and libevent's
# buffers, src/lib/livemem.c), zeroed first thing in the fork.  Box A's
# client writes its keylog and holds the connection open, a request's head
# and a body's first bytes (random, made inside) sent, while box B is made.
TLS_HOLDER='import os, socket, ssl, sys, time, urllib.parse
proxy = urllib.parse.urlsplit(os.environ["HTTPS_PROXY"])
s = socket.create_connection((proxy.hostname, proxy.port))
s.sendall(b"CONNECT api.test:%s HTTP/1.1\r\nHost: api.test\r\n\r\n" % sys.argv[1].encode())
r = b""
while b"\r\n\r\n" not in r:
    r += s.recv(1)
ctx = ssl.create_default_context()
ctx.keylog_filename = "/tmp/keylog.tmp"
t = ctx.wrap_socket(s, server_hostname="api.test")
body = b"held-body-" + os.urandom(300).hex().encode()
t.sendall(b"POST /held HTTP/1.1\r\nHost: api.test\r\nContent-Length: 100000\r\n\r\n" + body)
open("/tmp/marker", "wb").write(body)
os.rename("/tmp/keylog.tmp", "/tmp/keylog")
time.sleep(float(sys.argv[2]))'

t_box_init_holds_no_live_tls() {
	[ "$ME" = 0 ] || { skip "reading another process's memory needs root"; return; }
	local scan="" d id port up i init="" kind secret n=0 marker
	scan=$(memscan_find)
	[ -n "$scan" ] || { fail "no memscan helper beside $CORRAL"; return; }
	test_ca "$T" DNS:api.test &&
	chmod 644 "$T"/ca.pem "$T"/srv.* || { fail "openssl could not make the certificates"; return; }
	$PY "$HERE/tls_upstream.py" "$T/up.port" "$T/up.log" "$T/srv.pem" "$T/srv.key" \
		> /dev/null 2>&1 &
	up=$!
	# a failure ends the test at once: on_test_exit ends it then
	echo "$up" > "$T/fixtures"
	for i in $(seq 1 100); do [ -s "$T/up.port" ] && break; nap 0.05; done
	port=$(cat "$T/up.port" 2>/dev/null)
	start_daemon
	id=$(mksb "{\"policy\": {\"network\": {\"mode\": \"proxy\", \"allow\": [{\"host\": \"api.test:$port\", \"tls\": \"terminate\"}], \"hosts\": {\"api.test\": \"127.0.0.1\"}, \"tls_upstream_ca\": \"$T/ca.pem\"}}}")
	printf '%s' "$TLS_HOLDER" > "$T/holder.py"
	code=$(api PUT "/v1/sandboxes/$id/files?path=/tmp/holder.py" --data-binary "@$T/holder.py")
	expect_code "the client's script" "$code" 201
	# held 60 s: a loaded host took more than 10 to reach the scans (ci80);
	# the test ends it when done (the client gone, the daemon stopped)
	"$HTTPC" -sS --max-time 90 --unix-socket "$SOCK" -X POST -o "$T/held.out" \
		-d "{\"argv\": [\"/usr/bin/python3\", \"/tmp/holder.py\", \"$port\", \"60\"]}" \
		"http://localhost/v1/sandboxes/$id/exec" 2> "$T/held.err" &
	local held=$!
	for i in $(seq 1 100); do
		code=$(API_TIMEOUT=5 api GET "/v1/sandboxes/$id/files?path=/tmp/keylog")
		[ "$code" = 200 ] && break
		nap 0.1
	done
	cp "$T/body" "$T/keylog"
	# made inside: no request to the daemon carried it
	API_TIMEOUT=5 api GET "/v1/sandboxes/$id/files?path=/tmp/marker" > /dev/null
	marker=$(< "$T/body")
	# until the proxy has read the body's first bytes
	for i in $(seq 1 100); do "$scan" "$DPID" "${marker: -64}" > /dev/null && break; nap 0.05; done
	local first
	first=$(echo $(box_inits))
	mksb > /dev/null
	for i in $(box_inits); do
		echo " $first " | grep -q " $i " || init=$i
	done
	if [ "$code" != 200 ] || [ -z "$init" ]; then
		fail "no keylog ($code) or no second box: $(cat "$T/held.out" "$T/held.err" 2>/dev/null | head -c 300)"
	else
		while read -r kind _ secret; do
			case $kind in CLIENT_TRAFFIC_SECRET_0|SERVER_TRAFFIC_SECRET_0|EXPORTER_SECRET) ;; *) continue ;; esac
			n=$((n + 1))
			"$scan" "$DPID" -x "$secret" > /dev/null ||
				fail "the scan did not find A's $kind in the daemon"
			"$scan" "$init" -x "$secret" > "$T/scan" &&
				fail "box B's init holds box A's $kind: $(< "$T/scan")"
		done < "$T/keylog"
		expect_eq "secrets in the keylog" "$n" 3
		"$scan" "$DPID" "${marker: -64}" > /dev/null ||
			fail "the scan did not find the held body in the daemon"
		"$scan" "$init" "${marker: -64}" > "$T/scan" &&
			fail "box B's init holds box A's request under way: $(< "$T/scan")"
	fi
	kill "$held" 2>/dev/null || true
	wait "$held" 2>/dev/null || true
	stop_daemon
	kill "$up" 2>/dev/null || true
	wait "$up" 2>/dev/null || true
	: > "$T/fixtures"
}

# ---- hostile clients: the daemon's own tripwires, the gate, the host ------

TRIP_POLICY='{"abort": {"tripwires": ["/home/agent/.aws/credentials", "/home/agent/.ssh/id_ed25519", "/tmp/.env", "/workspace/.git-credentials"], "on_abort": "freeze"}}'

t_tripwires_read_through_api() {
	# the daemon never opens a tripwire: no wait on its own fanotify
	# answer (root), no inotify hit counted as the agent's (unprivileged)
	start_daemon
	id=$(mksb "{\"policy\": $TRIP_POLICY}")
	for p in /home/agent/.aws/credentials /home/agent/.ssh/id_ed25519 /tmp/.env /workspace/.git-credentials; do
		code=$(API_TIMEOUT=10 api GET "/v1/sandboxes/$id/files?path=$p")
		expect_error "read $p" "$code" 403 forbidden
		expect_contains "read $p: why" "$(body)" "tripwire"
		code=$(API_TIMEOUT=10 api PUT "/v1/sandboxes/$id/files?path=$p" --data-binary x)
		expect_error "write $p" "$code" 403 forbidden
		code=$(API_TIMEOUT=10 api DELETE "/v1/sandboxes/$id/files?path=$p")
		expect_error "delete $p" "$code" 403 forbidden
		code=$(API_TIMEOUT=10 api GET /v1/health)
		expect_code "health after $p" "$code" 200
	done
	state=$(sbget "$id" 'v["state"]')
	[ "$state" != halted ] || fail "halted by the API's reads: $(sbget "$id" 'v["halt_reason"]')"
	expect_eq "no tripwire event" "$(grep -c '"type":"tripwire"' "$STATE/audit.jsonl")" 0
	# an ordinary file still reads
	sbsh "$id" 'echo plain > /tmp/plain' > /dev/null
	code=$(api GET "/v1/sandboxes/$id/files?path=/tmp/plain")
	expect_code "plain file" "$code" 200
	# the agent's read while the API reads the same file: still caught
	( for i in 1 2 3 4 5 6 7 8 9 10; do
		API_TIMEOUT=10 api GET "/v1/sandboxes/$id/files?path=/tmp/.env" > /dev/null
	  done ) &
	reader=$!
	ex "$id" '{"argv": ["cat", "/tmp/.env"]}' > /dev/null
	wait "$reader"
	expect_eq "halted by the agent's read" "$(sbget "$id" 'v["state"]')" halted
	expect_contains "reason" "$(sbget "$id" 'v["halt_reason"]')" "tripwire /tmp/.env"
	code=$(API_TIMEOUT=10 api GET /v1/health)
	expect_code "health at the end" "$code" 200
	stop_daemon
}

vmrss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }

t_gate_no_body_before_token() {
	front_test
	port=$(free_port)
	new_token > /dev/null
	start_daemon --listen "127.0.0.1:$port" --token-file "$T/token"
	before=$(vmrss_kb "$DPID")
	# three clients without a token each send most of a 64 MiB body
	$PY - "$port" > "$T/clients" <<'EOF'
import socket, sys
port = int(sys.argv[1])
socks, sent = [], []
for i in range(3):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"PUT /v1/sandboxes/x/files?path=/a HTTP/1.1\r\nHost: x\r\n"
              b"Content-Length: 67108864\r\n\r\n")
    n = 0
    try:
        while n < 60 << 20:
            n += s.send(b"x" * 65536)
    except OSError:
        pass
    socks.append(s)
    sent.append(n)
for s in socks:
    s.settimeout(10)
    try:
        print(s.recv(200).split(b"\r\n")[0].decode())
    except OSError as e:
        print("no answer:", e)
EOF
	after=$(vmrss_kb "$DPID")
	expect_eq "three 401s" "$(grep -c ' 401 ' "$T/clients")" 3
	[ $((after - before)) -lt 16384 ] ||
		fail "the daemon grew from $before to $after kB on bodies without a token"
	stop_daemon
}

# raw SOCKET_ARGS REQUEST [detail]: send a request as written, print the
# status line (with "detail", the first 4 KiB of the answer).
raw() {
	$PY - "$@" <<'EOF'
import socket, sys
a = sys.argv[1]
if a.startswith("/"):
    s = socket.socket(socket.AF_UNIX)
    s.connect(a)
else:
    s = socket.create_connection(("127.0.0.1", int(a)))
s.settimeout(10)
s.sendall(sys.argv[2].encode().decode("unicode_escape").encode("latin-1"))
try:
    got = s.recv(4096)
    print(got.decode(errors="replace") if sys.argv[3:] == ["detail"] else got.split(b"\r\n")[0].decode())
except OSError as e:
    print("no answer:", e)
EOF
}

t_gate_framing() {
	front_test
	port=$(free_port)
	new_token > /dev/null
	start_daemon --listen "127.0.0.1:$port" --token-file "$T/token"
	auth="Authorization: Bearer $(< "$T/token")\\r\\n"
	for where in "$SOCK" "$port"; do
		a=""; [ "$where" = "$port" ] && a=$auth
		out=$(raw "$where" "POST /v1/sandboxes HTTP/1.1\\r\\nHost: x\\r\\n${a}Content-Length: 2\\r\\nContent-Length: 40\\r\\n\\r\\n{}")
		expect_contains "two lengths ($where)" "$out" " 400 "
		out=$(raw "$where" "POST /v1/sandboxes HTTP/1.1\\r\\nHost: x\\r\\n${a}Content-Length: 2\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n{}")
		expect_contains "length and chunked ($where)" "$out" " 400 "
		# a head let through, its body's framing then bad: the verdict, not
		# an answer to the placeholder (404 on the socket, 401 over TCP)
		out=$(raw "$where" "POST /v1/sandboxes HTTP/1.1\\r\\nHost: x\\r\\n${a}Transfer-Encoding: chunked\\r\\n\\r\\nzz\\r\\n")
		expect_contains "a bad chunk size ($where)" "$out" " 400 "
		# a chunk's data not ended by CRLF: the lenient http-parser skips
		# any two bytes there, evhttp reads the line's rest as the next
		# size (31 bytes to one, 0xab1f to the other)
		out=$(raw "$where" "POST /v1/sandboxes HTTP/1.1\\r\\nHost: x\\r\\n${a}Transfer-Encoding: chunked\\r\\n\\r\\n2\\r\\n{}ab1f\\r\\n" \
			detail)
		expect_contains "chunk data without CRLF ($where)" "$out" "chunk data not followed by CRLF"
		# what evhttp reads as no body and http-parser as a chunked one
		# ("gzip, chunked", or as two headers), and a CONNECT, whose body
		# http-parser takes for another protocol: the gate judged body
		# bytes that evhttp then read as the next head, or the reverse
		out=$(raw "$where" "POST /v1/sandboxes HTTP/1.1\\r\\nHost: x\\r\\n${a}Transfer-Encoding: gzip, chunked\\r\\n\\r\\n2\\r\\n{}\\r\\n0\\r\\n\\r\\n")
		expect_contains "gzip, chunked ($where)" "$out" " 400 "
		out=$(raw "$where" "POST /v1/sandboxes HTTP/1.1\\r\\nHost: x\\r\\n${a}Transfer-Encoding: gzip\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n2\\r\\n{}\\r\\n0\\r\\n\\r\\n")
		expect_contains "gzip, then chunked ($where)" "$out" " 400 "
		out=$(raw "$where" "CONNECT 127.0.0.1:1 HTTP/1.1\\r\\nHost: x\\r\\n${a}Content-Length: 5\\r\\n\\r\\nGET /")
		expect_contains "CONNECT with a body ($where)" "$out" " 400 "
		# a chunk larger than the API takes: 413 at its size line, before
		# its bytes (evhttp_set_max_body_size; the gate checks only a
		# declared Content-Length)
		out=$(raw "$where" "PUT /v1/sandboxes/x/files?path=/a HTTP/1.1\\r\\nHost: x\\r\\n${a}Transfer-Encoding: chunked\\r\\n\\r\\n4000002\\r\\n" \
			detail)
		expect_contains "a chunk over 64 MiB ($where)" "$out" "larger than the API takes"
		# a flood of headers: cut at the gate's 64 KiB (http-parser's own
		# bound, 80 KiB, says "request head too large")
		out=$(raw "$where" "GET /v1/health HTTP/1.1\\r\\n$(printf 'X-a: b\\r\\n%.0s' $(seq 8300))\\r\\n" \
			detail)
		expect_contains "8300 headers ($where)" "$out" "request head larger than 64 KiB"
		# a folded header (obs-fold): http-parser and evhttp join the
		# lines each their own way (a folded Transfer-Encoding was read
		# by the two differently)
		out=$(raw "$where" "POST /v1/sandboxes HTTP/1.1\\r\\nHost: x\\r\\n${a}Transfer-Encoding:\\r\\n chunked\\r\\n\\r\\n2\\r\\n{}\\r\\n0\\r\\n\\r\\n" \
			detail)
		expect_contains "a folded Transfer-Encoding ($where)" "$out" "obs-fold"
		out=$(raw "$where" "GET /v1/health HTTP/1.1\\r\\nHost: x\\r\\nX-a: b\\r\\n\\tc\\r\\n${a}\\r\\n" detail)
		expect_contains "a folded header with a tab ($where)" "$out" "obs-fold"
		out=$(raw "$where" "GET /v1/health HTTP/1.1\\r\\nHost: x\\r\\n${a}\\r\\n")
		expect_contains "plain ($where)" "$out" " 200 "
	done
	code=$(api GET /v1/sandboxes)
	expect_eq "nothing created" "$(jq 'len(v["sandboxes"])')" 0
	# pipelined: the request before a refused one is answered as usual
	$PY - "$SOCK" > "$T/piped" <<'EOF'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.settimeout(15)
s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n"
          b"GET /v1/health HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab")
d = b""
while True:
    x = s.recv(65536)
    if not x:
        break
    d += x
print(" ".join(l.split(" ")[1] for l in d.decode().splitlines() if l.startswith("HTTP/1.1")))
EOF
	expect_eq "pipelined answers" "$(< "$T/piped")" "200 400"
	stop_daemon
}

# "Content-Length : N" (a blank before the colon): http-parser, lenient
# as Debian builds it, framed N bytes of body where evhttp found no such
# header and read them as the next request's head, which the gate never
# judged (a body it announced so was held past every bound of the gate's).
# Refused at the head (RFC 9112 5.1), on either socket, nothing made.
t_gate_blank_before_colon() {
	local port out a where h
	port=$(free_port)
	new_token > /dev/null
	start_daemon --listen "127.0.0.1:$port" --token-file "$T/token"
	for where in "$SOCK" "$port"; do
		a=""; [ "$where" = "$port" ] && a="Authorization: Bearer $(< "$T/token")\\r\\n"
		for h in "Content-Length : 2\\r\\n\\r\\n{}" \
			 "Transfer-Encoding : chunked\\r\\n\\r\\n2\\r\\n{}\\r\\n0\\r\\n\\r\\n" \
			 "X-Other : 1\\r\\nContent-Length: 2\\r\\n\\r\\n{}"; do
			out=$(raw "$where" "POST /v1/sandboxes HTTP/1.1\\r\\nHost: x\\r\\n${a}${h}" detail)
			expect_contains "$h ($where)" "$out" "a blank between a header's name and its colon"
		done
	done
	code=$(api GET /v1/sandboxes)
	expect_eq "nothing created" "$(jq 'len(v["sandboxes"])')" 0
	stop_daemon
}

# An answer to HEAD is its head alone (RFC 9112 6.3), with the length a
# GET would have: evhttp wrote the body too, without a Content-Length, and
# a client reading the next answer on the connection read that body first.
t_head_answers_no_body() {
	front_test
	start_daemon
	$PY - "$SOCK" > "$T/heads" <<'PYEOF'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.settimeout(10)
s.sendall(b"HEAD /v1/health HTTP/1.1\r\nHost: x\r\n\r\n"
          b"HEAD /v1/sandboxes/nope HTTP/1.1\r\nHost: x\r\n\r\n"
          b"GET /v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
d = b""
while True:
    x = s.recv(65536)
    if not x:
        break
    d += x
parts = d.split(b"\r\n\r\n")
# two heads with nothing after them, then the GET's head and body
print(len(parts), " ".join(p.split(b"\r\n")[0].decode().split(" ")[1] for p in parts[:3]))
heads = [dict(l.split(": ", 1) for l in p.decode().split("\r\n")[1:]) for p in parts[:3]]
print(heads[0].get("Content-Length"), heads[2].get("Content-Length"), len(parts[3]))
PYEOF
	expect_eq "three answers, two heads alone" "$(sed -n 1p "$T/heads")" \
		"4 200 404 200"
	read -r head_len get_len got < <(sed -n 2p "$T/heads")
	expect_eq "HEAD's length is GET's" "$head_len" "$get_len"
	expect_eq "GET's body" "$got" "$get_len"
	stop_daemon
}

t_gate_timeouts() {
	front_test
	start_daemon --header-timeout 1 --idle-timeout 2
	# a head that never ends, and a client that never asks: both closed
	$PY - "$SOCK" <<'EOF' || fail "a connection was not closed"
import socket, sys
for first in (b"GET /v1/health HTTP/1.1\r\nHost: x\r\n", b""):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    s.sendall(first)
    s.settimeout(15)
    assert s.recv(100) == b"", "an answer instead of a close"
EOF
	code=$(api GET /v1/health)
	expect_code "health" "$code" 200
	stop_daemon
}

# hold_conns PORT N: N idle TCP connections from 127.0.0.2.., held until
# stdin ends
HOLD_PY='
import resource, socket, sys, errno
port, n = int(sys.argv[1]), int(sys.argv[2])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
if hard != resource.RLIM_INFINITY and hard < n + 64:
    print("skip: the open-files hard limit is", hard, flush=True)
    sys.exit(0)
want = n + 256 if hard == resource.RLIM_INFINITY else min(hard, n + 256)
resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
socks = []
for i in range(n):
    s = socket.socket()
    s.bind(("127.0.0.%d" % (2 + i % 40), 0))
    s.setblocking(False)
    e = s.connect_ex(("127.0.0.1", port))
    if e not in (0, errno.EINPROGRESS):
        print("connect:", errno.errorcode.get(e, e), flush=True)
        break
    socks.append(s)
print("held", len(socks), flush=True)
sys.stdin.read()
'
hold_conns() { $PY -c "$HOLD_PY" "$1" "$2"; }

t_gate_connection_flood() {
	front_test
	command -v prlimit > /dev/null || { skip "no prlimit"; return 77; }
	port=$(free_port)
	new_token > /dev/null
	for extra in "" "--max-connections 5000 --max-connections-per-peer 5000"; do
		# shellcheck disable=SC2086
		start_daemon --listen "127.0.0.1:$port" --token-file "$T/token" $extra
		prlimit --pid "$DPID" --nofile=1024:1024
		mkfifo "$T/hold"
		# the last round's: the job below truncates it, maybe after a look
		rm -f "$T/held"
		hold_conns "$port" 1100 < "$T/hold" > "$T/held" &
		holder=$!
		exec 7> "$T/hold"
		i=0
		until grep -q "held\|skip" "$T/held" 2>/dev/null || [ $i -ge 300 ]; do
			sleep 0.1; i=$((i + 1))
		done
		if grep -q skip "$T/held"; then
			exec 7>&-; wait "$holder"; stop_daemon
			skip "$(< "$T/held")"; return 77
		fi
		sleep 2
		if [ -z "$extra" ]; then
			# capped: the unix socket is still served
			code=$(API_TIMEOUT=10 api GET /v1/health)
			expect_code "unix while TCP is full ($(< "$T/held"))" "$code" 200
			n=$(grep -c "its cap" "$DLOG" || true)
			expect_eq "the cap said once" "$n" 1
		fi
		exec 7>&-
		wait "$holder"
		rm -f "$T/hold"
		# out of fds or not, the daemon serves again once they are gone
		i=0
		until [ "$(API_TIMEOUT=5 api GET /v1/health)" = 200 ] || [ $i -ge 50 ]; do
			sleep 0.2; i=$((i + 1))
		done
		code=$(API_TIMEOUT=10 api GET /v1/health)
		expect_code "health after the flood ${extra:-(defaults)}" "$code" 200
		size=$(stat -c %s "$DLOG")
		[ "$size" -lt 65536 ] || fail "the log grew to $size bytes: $(sort "$DLOG" | uniq -c | sort -rn | head -3)"
		n=$(grep -c "cannot accept" "$DLOG" || true)
		[ "$n" -le 4 ] || fail "\"cannot accept\" said $n times"
		expect_eq "no libevent accept warnings" "$(grep -c 'Error from accept' "$DLOG")" 0
		stop_daemon
	done
}

# A box's init opens the proxy's listeners and hands them to the daemon
# (proxy_listeners_send): no call holds one or sees init's, and the
# daemon answers on them.
t_box_proxy_listeners_are_the_daemons() {
	start_daemon
	id=$(mksb '{"policy": {"network": {"mode": "proxy", "allow": ["web.test:80"]}}}')
	out=$(sbsh "$id" 'ls -l /proc/self/fd/ | grep -c socket: ; ls /proc/1/fd 2>&1 | head -1; curl -sS -m 10 -o /dev/null -w "code %{http_code}\n" -x http://127.0.0.1:3128 http://evil.test/; true')
	expect_contains "no socket in a call" "$out" "0"
	expect_contains "init's fds closed to calls" "$out" "Permission denied"
	expect_contains "the daemon's proxy answers" "$out" "code 403"
	stop_daemon
}

# An agent's CONNECT tunnels to web.test:PORT, up to COUNT, held: prints
# "held N refused FIRST-LINE", then holds them until /tmp/release is there
# (60 s at most).
TUNNELS='
import os, socket, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
held, refused = [], ""
for i in range(n):
    try:
        s = socket.create_connection(("127.0.0.1", 3128), 10)
        s.settimeout(10)
        s.sendall(b"CONNECT web.test:%d HTTP/1.1\r\nHost: web.test:%d\r\n\r\n" % (port, port))
        line = s.recv(4096).split(b"\r\n")[0].decode(errors="replace")
    except OSError as e:
        line = str(e)
    if not line.startswith("HTTP/1.1 200"):
        refused = line or "closed"
        break
    held.append(s)
print("held", len(held), "refused", refused, flush=True)
for _ in range(600):
    if os.path.exists("/tmp/release"):
        break
    time.sleep(0.1)
'

# upstream_listener: a loopback server that takes connections and holds
# them (90 s at most, and killed with the test's watchdogs); port in UPORT.
upstream_listener() {
	$PY -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1024); s.settimeout(1)
open(sys.argv[1], "w").write(str(s.getsockname()[1]))
held, end = [], time.time() + 90
while time.time() < end:
    try: held.append(s.accept()[0])
    except OSError: pass' "$T/uport" > /dev/null 2>&1 &
	echo $! >> "$T/watchdogs"
	for _ in $(seq 1 100); do [ -s "$T/uport" ] && break; nap 0.05; done
	UPORT=$(< "$T/uport")
	[ -n "$UPORT" ] || fail "the upstream listener did not start"
}

# hog ID COUNT: sandbox ID's agent opens COUNT tunnels in a background
# process and holds them; its "held ..." line in HELD, its pid in HOG.
hog() {
	local code i
	code=$(api POST "/v1/sandboxes/$1/processes" \
		-d "$(jbody argv "json:[\"/usr/bin/python3\", \"-c\", $($PY -c 'import json, sys; print(json.dumps(sys.argv[1]))' "$TUNNELS"), \"$UPORT\", \"$2\"]")")
	expect_code "hog" "$code" 201 || return 1
	HOG=$(jq 'v["pid"]')
	HELD=""
	for i in $(seq 1 300); do
		api GET "/v1/sandboxes/$1/processes/$HOG" > /dev/null
		HELD=$(jq 'v["stdout"]')
		[ -n "$HELD" ] && return 0
		nap 0.1
	done
	fail "the hog said nothing in 30 s: $(body)"
}

# One sandbox's connections, at its policy's limit or at its share of the
# daemon's fds, leave the others theirs; each refusal names the limit.
t_box_connections_bounded() {
	local a b c n
	# room for (1100 - 128) / 6 / 8 = 20 connections a sandbox; the
	# whole limit would let one take 162, every fd the daemon has
	DAEMON_WRAP="prlimit --nofile=1100:1100" start_daemon
	upstream_listener
	pol='{"network": {"mode": "proxy", "allow": ["web.test:'$UPORT'"], "hosts": {"web.test": "127.0.0.1"}}'
	a=$(mksb "{\"policy\": $pol, \"limits\": {\"connections\": 5}}}")
	b=$(mksb "{\"policy\": $pol, \"limits\": {\"connections\": 1000}}}")
	c=$(mksb "{\"policy\": $pol}}")
	hog "$a" 50
	expect_contains "a: its policy's limit" "$HELD" "held 5 refused HTTP/1.1 503"
	hog "$b" 400
	n=$(echo "$HELD" | awk '{print $2}')
	[ "$n" -ge 8 ] && [ "$n" -le 20 ] || fail "b held $n tunnels, want its share, 8 to 20: $HELD"
	expect_contains "b: refused" "$HELD" "refused HTTP/1.1 503"
	# both hold theirs while c connects as usual
	hog "$c" 10
	expect_contains "c connects" "$HELD" "held 10 refused"
	grep '"type":"egress.denied"' "$STATE/audit.jsonl" > "$T/denied"
	expect_contains "a's refusal names limits.connections" "$(grep "\"sandbox\":\"$a\"" "$T/denied")" \
		'"reason":"limits.connections (5) reached: too many connections open at once, one more refused","limit":"connections","value":5'
	expect_contains "b's names its share of the fds" "$(grep "\"sandbox\":\"$b\"" "$T/denied")" \
		"\"limit\":\"open_files\",\"value\":$n"
	expect_eq "c was refused nothing" "$(grep -c "\"sandbox\":\"$c\"" "$T/denied")" 0
	for id in "$a" "$b" "$c"; do
		code=$(api PUT "/v1/sandboxes/$id/files?path=/tmp/release" --data-binary x)
		expect_code "release $id" "$code" 201
	done
	stop_daemon
}

# One client's calls in a sandbox, at the sandbox's share of the daemon's
# fds, leave the other sandboxes theirs: 328 background processes of one
# took every fd (limit 1024), and another's calls were refused ("pipe:
# Too many open files"), killed unmoved ("pidfd of N"), or not accepted.
t_box_calls_bounded() {
	local a b n i code pid last
	# (1100 - 128) / 4 / 8 = 30 calls at once a sandbox
	DAEMON_WRAP="prlimit --nofile=1100:1100" start_daemon
	a=$(mksb) && b=$(mksb) || return 1
	n=0
	for i in $(seq 1 400); do
		code=$(api POST "/v1/sandboxes/$a/processes" -d '{"argv": ["sleep", "120"]}')
		[ "$code" = 201 ] || break
		[ -n "${pid:-}" ] || pid=$(jq 'v["pid"]')
		n=$((n + 1))
	done
	last=$(body)
	# the other sandbox's calls run as before
	for i in 1 2 3; do
		code=$(ex "$b" '{"argv": ["echo", "b"]}')
		expect_code "b's call $i beside a's $n" "$code" 200
		expect_eq "b's call $i ran" "$(jq 'v["stdout"]')" b
	done
	[ "$n" -ge 8 ] && [ "$n" -le 30 ] || fail "a ran $n calls at once, want its share, 8 to 30"
	expect_contains "a's call past its share refused" "$last" \
		'"error":"busy","detail":"30 calls of this sandbox are running, what its share of the open files allows'
	# one of a's ended: its next runs
	code=$(api DELETE "/v1/sandboxes/$a/processes/$pid")
	expect_code "end one of a's" "$code" 200
	for i in $(seq 1 100); do
		code=$(ex "$a" '{"argv": ["true"]}')
		[ "$code" = 503 ] || break
		nap 0.1
	done
	expect_code "a's call once one ended" "$code" 200
	stop_daemon
}

t_env_pass_over_tcp() {
	port=$(free_port)
	new_token > /dev/null
	U=http://127.0.0.1:$port
	tcp() { tcp_request -H "Authorization: Bearer $(< "$T/token")" "$@"; }
	DAEMON_WRAP="env CORRAL_TEST_SECRET=s3cr3t" start_daemon --listen "127.0.0.1:$port" --token-file "$T/token"
	code=$(tcp -X POST -d '{"policy": {"env": {"pass": ["CORRAL_TEST_SECRET"]}}}' "$U/v1/sandboxes")
	expect_error "env.pass over TCP" "$code" 403 forbidden
	expect_contains "why" "$(body)" "--allow-env"
	# a secret is the daemon's environment or files sent out: a TCP
	# client of a daemon without --policy is bounded by the built-in
	# default, which has no network and so no secret (with --policy only
	# the operator's secrets, which api_access.c still gates)
	sec='"network": {"mode": "proxy", "allow": ["api.test:443"]}, "secrets": [{"name": "K",'
	code=$(tcp -X POST -d "{\"policy\": {$sec \"from_env\": \"CORRAL_TEST_SECRET\", \"hosts\": [\"api.test\"], \"header\": \"Authorization\"}]}}" "$U/v1/sandboxes")
	expect_error "secrets.from_env over TCP" "$code" 403 forbidden
	expect_contains "why" "$(body)" "network.mode"
	echo s3cr3t > "$T/secret.txt"
	code=$(tcp -X POST -d "{\"policy\": {$sec \"from_file\": \"$T/secret.txt\", \"hosts\": [\"api.test\"], \"header\": \"Authorization\"}]}}" "$U/v1/sandboxes")
	expect_error "secrets.from_file over TCP" "$code" 403 forbidden
	expect_contains "why" "$(body)" "network.mode"
	# the daemon's own user on the unix socket may
	id=$(mksb '{"policy": {"env": {"pass": ["CORRAL_TEST_SECRET"]}}}')
	expect_eq "unix, same user" "$(sbsh "$id" 'echo $CORRAL_TEST_SECRET')" s3cr3t
	stop_daemon
	DAEMON_WRAP="env CORRAL_TEST_SECRET=s3cr3t" start_daemon \
		--listen "127.0.0.1:$port" --token-file "$T/token" --allow-env CORRAL_TEST_SECRET
	code=$(tcp -X POST -d '{"policy": {"env": {"pass": ["CORRAL_TEST_SECRET"]}}}' "$U/v1/sandboxes")
	expect_code "allowed over TCP" "$code" 201
	id=$(jq 'v["id"]')
	code=$(tcp -X POST -d '{"command": "echo $CORRAL_TEST_SECRET"}' "$U/v1/sandboxes/$id/exec")
	expect_eq "passed" "$(jq 'v["stdout"]')" s3cr3t
	code=$(tcp -X POST -d '{"policy": {"env": {"pass": ["HOME"]}}}' "$U/v1/sandboxes")
	expect_error "another name" "$code" 403 forbidden
	stop_daemon
	# the operator's own secret (--policy) is still the daemon's
	# environment sent out: a TCP client gets it only by --allow-env
	printf '{%s "from_env": "CORRAL_TEST_SECRET", "hosts": ["api.test"], "header": "Authorization"}]}\n' \
		"$sec" > "$T/op.json"
	DAEMON_WRAP="env CORRAL_TEST_SECRET=s3cr3t" start_daemon \
		--listen "127.0.0.1:$port" --token-file "$T/token" --policy "$T/op.json"
	code=$(tcp -X POST "$U/v1/sandboxes")
	expect_error "the operator's secret over TCP" "$code" 403 forbidden
	expect_contains "why" "$(body)" "--allow-env"
	stop_daemon
}

t_host_paths_over_tcp() {
	port=$(free_port)
	new_token > /dev/null
	U=http://127.0.0.1:$port
	tcp() { tcp_request -H "Authorization: Bearer $(< "$T/token")" "$@"; }
	mkdir -p "$T/allowed/ws" "$T/other"
	echo hi > "$T/allowed/ws/f"
	chmod -R a+rX "$T/allowed" "$T/other"
	start_daemon --listen "127.0.0.1:$port" --token-file "$T/token"
	code=$(tcp -X POST -d "{\"workspace\": \"$T/allowed/ws\"}" "$U/v1/sandboxes")
	expect_error "workspace over TCP" "$code" 403 forbidden
	code=$(tcp -X POST -d "{\"policy\": {\"filesystem\": {\"ro\": [\"$T/other:/mnt/o\"]}}}" "$U/v1/sandboxes")
	expect_error "bind over TCP" "$code" 403 forbidden
	stop_daemon
	ln -s "$T/allowed" "$T/link"
	start_daemon --listen "127.0.0.1:$port" --token-file "$T/token" --allow-host-path "$T/link"
	code=$(tcp -X POST -d "{\"workspace\": \"$T/allowed/ws\"}" "$U/v1/sandboxes")
	expect_code "under an allowed prefix" "$code" 201
	id=$(jq 'v["id"]')
	code=$(tcp -X POST -d '{"command": "cat /workspace/f"}' "$U/v1/sandboxes/$id/exec")
	expect_eq "its file" "$(jq 'v["stdout"]')" hi
	code=$(tcp -X POST -d "{\"policy\": {\"filesystem\": {\"ro\": [\"$T/other:/mnt/o\"]}}}" "$U/v1/sandboxes")
	expect_error "outside the prefix" "$code" 403 forbidden
	ln -s "$T/other" "$T/allowed/out"
	code=$(tcp -X POST -d "{\"policy\": {\"filesystem\": {\"ro\": [\"$T/allowed/out:/mnt/o\"]}}}" "$U/v1/sandboxes")
	expect_error "a link out of the prefix" "$code" 403 forbidden
	stop_daemon
}

# A TCP client's host path outside every --allow-host-path is refused
# unopened, in the same words whatever the host holds there: its answer
# once said which paths exist ("No such file or directory", "Not a
# directory") and where a /proc link led.  A path named under a prefix
# as the operator wrote it (a symlink) is still judged by what it opens.
t_host_paths_over_tcp_tell_nothing() {
	front_test
	port=$(free_port)
	new_token > /dev/null
	U=http://127.0.0.1:$port
	tcp() { tcp_request -H "Authorization: Bearer $(< "$T/token")" "$@"; }
	mkdir -p "$T/allowed/ws"
	touch "$T/file"
	chmod -R a+rX "$T/allowed"
	ln -s "$T/allowed" "$T/link"
	start_daemon --listen "127.0.0.1:$port" --token-file "$T/token" --allow-host-path "$T/link"
	local p first="" b
	for p in "$T/file" "$T/nothing-here" "$T/file/x" /proc/1/cwd; do
		code=$(tcp -X POST -d "{\"workspace\": \"$p\"}" "$U/v1/sandboxes")
		expect_error "workspace $p" "$code" 403 forbidden
		b=$(body | sed "s|$p|PATH|")
		[ -n "$first" ] || first=$b
		expect_eq "workspace $p: the same answer" "$b" "$first"
		code=$(tcp -X POST -d "{\"policy\": {\"filesystem\": {\"ro\": [\"$p:/mnt/o\"]}}}" "$U/v1/sandboxes")
		expect_error "ro bind $p" "$code" 403 forbidden
		expect_contains "ro bind $p: why" "$(body)" "host paths are off for TCP clients"
	done
	code=$(tcp -X POST -d "{\"workspace\": \"$T/link/ws\"}" "$U/v1/sandboxes")
	expect_code "named under the prefix as given" "$code" 201
	code=$(tcp -X POST -d "{\"workspace\": \"$T/allowed/nothing\"}" "$U/v1/sandboxes")
	expect_error "under the resolved prefix, missing" "$code" 400 bad_request
	stop_daemon
}

# A sandbox a unix-socket client made with more of the host than a TCP
# client may have (a workspace or bind outside every --allow-host-path)
# is not there for TCP clients: once made, any client drove it, and a
# TCP client read and wrote those host paths through its files and exec.
# 404 on every route of it, left out of listings, events, metrics, and
# its snapshots with it; one within a prefix stays theirs, as before.
t_local_sandboxes_unseen_over_tcp() {
	local port U far near bind snap snap_in fpid i id r
	port=$(free_port)
	new_token > /dev/null
	U=http://127.0.0.1:$port
	tcp() { tcp_request -H "Authorization: Bearer $(< "$T/token")" "$@"; }
	mkdir -p "$T/allowed/ws" "$T/home/proj"
	echo inside > "$T/allowed/ws/f"
	echo host-secret > "$T/home/proj/f"
	chmod -R a+rX "$T/allowed" "$T/home"
	start_daemon --listen "127.0.0.1:$port" --token-file "$T/token" --allow-host-path "$T/allowed"
	far=$(mksb "{\"workspace\": \"$T/home/proj\", \"idle_freeze_ms\": 0}")
	near=$(mksb "{\"workspace\": \"$T/allowed/ws\", \"idle_freeze_ms\": 0}")
	bind=$(mksb "{\"workspace\": \"$T/allowed/ws\", \"idle_freeze_ms\": 0, \"policy\": {\"filesystem\": {\"ro\": [\"$T/home/proj:/mnt/p\"]}}}")
	[ -n "$far" ] && [ -n "$near" ] && [ -n "$bind" ] || { stop_daemon; return 1; }
	code=$(api POST "/v1/sandboxes/$far/snapshot")
	expect_code "its snapshot, on the socket" "$code" 201
	snap=$(jq 'v["id"]')
	code=$(api POST "/v1/sandboxes/$near/snapshot")
	expect_code "the other's snapshot" "$code" 201
	snap_in=$(jq 'v["id"]')
	for id in "$far" "$bind"; do
		for r in "GET /v1/sandboxes/$id" "GET /v1/sandboxes/$id/files?path=/workspace/f" \
			 "GET /v1/sandboxes/$id/files?path=/mnt/p/f" "PUT /v1/sandboxes/$id/files?path=/workspace/g" \
			 "POST /v1/sandboxes/$id/exec" "GET /v1/sandboxes/$id/diff" \
			 "POST /v1/sandboxes/$id/export" "GET /v1/sandboxes/$id/processes" \
			 "GET /v1/sandboxes/$id/archive?path=/workspace" "POST /v1/sandboxes/$id/snapshot" \
			 "POST /v1/sandboxes/$id/pause" "POST /v1/sandboxes/$id/halt" \
			 "POST /v1/sandboxes/$id/keepalive" "DELETE /v1/sandboxes/$id" \
			 "GET /v1/events?sandbox=$id"; do
			code=$(tcp -X "${r%% *}" -d '{"command": "cat /workspace/f /mnt/p/f", "patch": true}' "$U${r#* }")
			expect_error "over TCP: $r" "$code" 404 not_found
			expect_not_contains "over TCP: $r: nothing of it" "$(body 4000)" host-secret
		done
	done
	for r in "GET /v1/snapshots/$snap" "DELETE /v1/snapshots/$snap"; do
		code=$(tcp -X "${r%% *}" "$U${r#* }")
		expect_error "over TCP: $r" "$code" 404 not_found
	done
	code=$(tcp -X POST -d "{\"from_snapshot\": \"$snap\"}" "$U/v1/sandboxes")
	expect_error "over TCP: a fork of its snapshot" "$code" 404 not_found
	code=$(tcp "$U/v1/sandboxes")
	expect_eq "over TCP: listed" "$(jq '" ".join(s["id"] for s in v["sandboxes"])')" "$near"
	code=$(tcp "$U/v1/snapshots")
	expect_eq "over TCP: snapshots" "$(jq '" ".join(s["id"] for s in v["snapshots"])')" "$snap_in"
	code=$(tcp "$U/v1/metrics")
	expect_contains "over TCP: metrics" "$(body 100000)" "id=\"$near\""
	expect_not_contains "over TCP: metrics of the others" "$(body 100000)" "id=\"$far\""
	expect_not_contains "over TCP: metrics of the others" "$(body 100000)" "id=\"$bind\""
	code=$(tcp "$U/v1/events")
	expect_contains "over TCP: events" "$(body 10000000)" "\"sandbox\":\"$near\""
	expect_not_contains "over TCP: events of the others" "$(body 10000000)" "\"sandbox\":\"$far\""
	expect_not_contains "over TCP: events of the others" "$(body 10000000)" "\"sandbox\":\"$bind\""
	# within the prefix: the TCP client's as before
	code=$(tcp -X POST -d '{"command": "cat /workspace/f"}' "$U/v1/sandboxes/$near/exec")
	expect_eq "over TCP: within the prefix" "$(jq 'v["stdout"]')" inside
	code=$(tcp "$U/v1/sandboxes/$near/files?path=/workspace/f")
	expect_eq "over TCP: its file" "$(body)" inside
	# a global follow over TCP: the log so far, then the calls below
	curl -sS -N --max-time 120 -H "Authorization: Bearer $(< "$T/token")" \
		"$U/v1/events?follow=1" > "$T/follow" 2>/dev/null &
	fpid=$!
	i=0
	while [ $i -lt 600 ] && ! grep -q "\"sandbox\":\"$near\"" "$T/follow"; do nap 0.05; i=$((i + 1)); done
	# the unix client's own, as before; then the follow's last word
	code=$(api POST "/v1/sandboxes/$far/exec" -d '{"command": "cat /workspace/f"}')
	expect_eq "on the socket" "$(jq 'v["stdout"]')" host-secret
	code=$(api GET /v1/sandboxes)
	expect_eq "on the socket: listed" "$(jq 'len(v["sandboxes"])')" 3
	code=$(api POST "/v1/sandboxes/$near/exec" -d '{"command": "true", "tool_call_id": "last-word"}')
	i=0
	while [ $i -lt 1200 ] && ! grep -q last-word "$T/follow"; do nap 0.05; i=$((i + 1)); done
	kill "$fpid" 2>/dev/null; wait "$fpid" 2>/dev/null || true
	grep -q last-word "$T/follow" || fail "the TCP follow missed $near's call"
	! grep -q "\"sandbox\":\"$far\"\|\"sandbox\":\"$bind\"" "$T/follow" ||
		fail "the TCP follow got a local sandbox's lines: $(grep "\"sandbox\":\"$far\"" "$T/follow" | head -c 300)"
	# nor, of the lines it gets, the hash of the one before (a local one's?)
	! grep -q '"prev"' "$T/follow" || fail "the TCP follow got a prev: $(grep '"prev"' "$T/follow" | head -c 300)"
	code=$(api GET "/v1/snapshots/$snap")
	expect_code "on the socket: its snapshot" "$code" 200
	stop_daemon
}

# What a TCP client is told of the daemon counts a local sandbox no more
# than the listings show it: /v1/health's sandboxes, /v1/metrics' states,
# execs and requests (those over TCP), /v1/snapshots' bytes.  Before, each
# said when the socket's clients made a sandbox, ran a call or kept a
# snapshot, and how much: the host user's work, timed.  A fork of a local
# sandbox's snapshot is local (its tree holds what that one had of the
# host: here a bind's file copied in), and the lines a TCP client reads
# carry no "prev", which was the hash of the line before in the file and
# so said where a local line was left out.
t_local_work_uncounted_over_tcp() {
	local port U far bind fork near n
	port=$(free_port)
	new_token > /dev/null
	U=http://127.0.0.1:$port
	tcp() { tcp_request -H "Authorization: Bearer $(< "$T/token")" "$@"; }
	mkdir -p "$T/allowed/ws" "$T/allowed/ws2" "$T/home/proj"
	echo host-secret > "$T/home/proj/f"
	chmod -R a+rwX "$T/allowed"
	chmod -R a+rX "$T/home"
	start_daemon --listen "127.0.0.1:$port" --token-file "$T/token" --allow-host-path "$T/allowed"
	near=$(mksb "{\"workspace\": \"$T/allowed/ws\", \"idle_freeze_ms\": 0}")
	far=$(mksb "{\"workspace\": \"$T/home/proj\", \"idle_freeze_ms\": 0}")
	bind=$(mksb "{\"workspace\": \"$T/allowed/ws2\", \"idle_freeze_ms\": 0, \"policy\": {\"filesystem\": {\"ro\": [\"$T/home/proj:/mnt/p\"]}}}")
	[ -n "$near" ] && [ -n "$far" ] && [ -n "$bind" ] || { stop_daemon; return 1; }
	code=$(api POST "/v1/sandboxes/$far/exec" -d '{"command": "echo written > /workspace/g"}')
	expect_code "a local sandbox's call" "$code" 200
	code=$(api POST "/v1/sandboxes/$far/snapshot")
	expect_code "a local sandbox's snapshot" "$code" 201
	# the first TCP request; the metrics' below the second
	code=$(tcp "$U/v1/health")
	expect_eq "over TCP: health's sandboxes" "$(jq 'v["sandboxes"]')" 1
	code=$(tcp "$U/v1/metrics")
	n=$(awk '/^corral_sandboxes\{/ { n += $2 } END { print n + 0 }' "$T/body")
	expect_eq "over TCP: metrics' sandboxes by state" "$n" 1
	expect_contains "over TCP: no call of the sandboxes it sees" "$(body 100000)" "corral_execs_total 0"
	expect_contains "over TCP: its own requests" "$(body 100000)" "corral_requests_total 2"
	code=$(tcp "$U/v1/snapshots")
	expect_eq "over TCP: no snapshot, no bytes" "$(jq 'len(v["snapshots"])') $(jq 'v["bytes"]')" "0 0"
	code=$(tcp -X POST -d '{"command": "true"}' "$U/v1/sandboxes/$near/exec")
	expect_code "over TCP: a call" "$code" 200
	code=$(tcp "$U/v1/metrics")
	expect_contains "over TCP: its call counted" "$(body 100000)" "corral_execs_total 1"
	# on the socket: all of it, as before
	code=$(api GET /v1/health)
	expect_eq "on the socket: health's sandboxes" "$(jq 'v["sandboxes"]')" 3
	code=$(api GET /v1/metrics)
	n=$(awk '/^corral_sandboxes\{/ { n += $2 } END { print n + 0 }' "$T/body")
	expect_eq "on the socket: metrics' sandboxes by state" "$n" 3
	expect_contains "on the socket: every call" "$(body 100000)" "corral_execs_total 2"
	code=$(api GET /v1/snapshots)
	[ "$(jq 'v["bytes"]')" -gt 0 ] || fail "on the socket: the snapshots' bytes: $(body)"
	# the lines a TCP client reads: the log's without a local sandbox's,
	# and without their prev
	code=$(tcp "$U/v1/events")
	expect_code "over TCP: events" "$code" 200
	grep -v '"sandbox":"sb-h' "$STATE/audit.jsonl" | sed -E 's/,"prev":"[0-9a-f]{64}"\}$/}/' |
		head -c "$(stat -c %s "$T/body")" | cmp - "$T/body" ||
		fail "over TCP: not the log's lines without the local ones and their prev: $(head -c 600 "$T/body")"
	expect_not_contains "over TCP: no prev" "$(< "$T/body")" '"prev"'
	code=$(tcp "$U/v1/events?sandbox=$near")
	expect_code "over TCP: one sandbox's events" "$code" 200
	expect_not_contains "over TCP: one sandbox's, no prev" "$(< "$T/body")" '"prev"'
	expect_contains "over TCP: its lines" "$(< "$T/body")" "\"sandbox\":\"$near\""
	code=$(api GET "/v1/events?sandbox=$near")
	expect_contains "on the socket: its prev" "$(< "$T/body")" '"prev":"'
	code=$(api POST "/v1/sandboxes/$bind/exec" -d '{"command": "cp /mnt/p/f /workspace/copied"}')
	expect_code "the bind's file copied into the workspace" "$code" 200
	code=$(api POST "/v1/sandboxes/$bind/snapshot")
	expect_code "its snapshot" "$code" 201
	fork=$(mksb "{\"from_snapshot\": \"$(jq 'v["id"]')\", \"idle_freeze_ms\": 0}")
	expect_contains "a fork of a local sandbox's snapshot: a local id" "$fork" sb-h
	code=$(tcp "$U/v1/sandboxes/$fork/files?path=/workspace/copied")
	expect_error "over TCP: the fork's copy of the bind's file" "$code" 404 not_found
	expect_not_contains "nothing of it" "$(body 4000)" host-secret
	stop_daemon
}

# A daemon before local sandboxes had ids of their own wrote their lines
# and snapshots under plain ids ("sb-" and hex): nothing says whose, and a
# TCP client read them all.  The first daemon that tells them apart notes
# where the log was and the newest snapshot (STATE/tcp-since): a TCP
# client gets neither (a fork of that snapshot is local), the socket's
# clients all, and the note holds across restarts.
t_earlier_daemons_work_not_over_tcp() {
	local port U near fork snap=snap-0000000000b1
	port=$(free_port)
	new_token > /dev/null
	U=http://127.0.0.1:$port
	tcp() { tcp_request -H "Authorization: Bearer $(< "$T/token")" "$@"; }
	mkdir -p "$T/allowed/ws" "$T/state/snapshots/$snap/tree"
	chmod 700 "$T/state"
	chmod -R a+rwX "$T/allowed"
	echo host-secret > "$T/state/snapshots/$snap/tree/f"
	printf '{"id":"%s","sandbox":"sb-0000000000a1","workspace":"%s","created":"2026-01-01T00:00:00Z","bytes":1000,"files":1,"skipped":0,"frozen":true}\n' \
		"$snap" "$T/allowed/ws" > "$T/state/snapshots/$snap/meta.json"
	big_log "$T/state/audit.jsonl" 1
	cp "$T/state/audit.jsonl" "$T/before"
	start_daemon --listen "127.0.0.1:$port" --token-file "$T/token" --allow-host-path "$T/allowed"
	near=$(mksb "{\"workspace\": \"$T/allowed/ws\", \"idle_freeze_ms\": 0}")
	for round in first restarted; do
		code=$(tcp "$U/v1/events")
		expect_code "$round: events over TCP" "$code" 200
		expect_eq "$round: no line of before" "$(grep -c '"sandbox":"sb-0000000000a' "$T/body")" 0
		grep -q "\"sandbox\":\"$near\"" "$T/body" || fail "$round: no line of now: $(body)"
		code=$(tcp "$U/v1/events?sandbox=sb-0000000000a1")
		expect_error "$round: a sandbox of before over TCP" "$code" 404 not_found
		code=$(tcp "$U/v1/snapshots")
		expect_eq "$round: the snapshot of before over TCP" "$(jq 'len(v["snapshots"])') $(jq 'v["bytes"]')" "0 0"
		code=$(tcp "$U/v1/snapshots/$snap")
		expect_error "$round: the snapshot of before over TCP" "$code" 404 not_found
		code=$(tcp -X POST -d "{\"from_snapshot\": \"$snap\"}" "$U/v1/sandboxes")
		expect_error "$round: a fork of it over TCP" "$code" 404 not_found
		code=$(api GET /v1/events)
		expect_contains "$round: on the socket: the lines of before" "$(body 1000)" '"sandbox":"sb-0000000000a3"'
		code=$(api GET /v1/snapshots)
		expect_eq "$round: on the socket: the snapshot" "$(jq 'v["snapshots"][0]["id"]')" "$snap"
		[ "$round" = restarted ] || { stop_daemon; start_daemon --listen "127.0.0.1:$port" \
			--token-file "$T/token" --allow-host-path "$T/allowed"; }
	done
	fork=$(mksb "{\"from_snapshot\": \"$snap\", \"idle_freeze_ms\": 0}")
	expect_contains "a fork of the snapshot of before: a local id" "$fork" sb-h
	code=$(tcp "$U/v1/sandboxes/$fork/files?path=/workspace/f")
	expect_error "over TCP: the fork" "$code" 404 not_found
	expect_eq "the note" "$(< "$STATE/tcp-since")" "$(stat -c %s "$T/before") 2026-01-01T00:00:00Z"
	stop_daemon
}

# The pool's sandboxes are of the operator's --policy, never judged as a
# client's: one that binds a host path outside every --allow-host-path
# was handed to a TCP create that named nothing (and so the bind a TCP
# client's create is refused).  Now it is for unix-socket clients only,
# and the TCP create is judged as without a pool: 403.
t_pool_with_a_host_path_not_for_tcp() {
	local port U i id
	port=$(free_port)
	new_token > /dev/null
	U=http://127.0.0.1:$port
	mkdir -p "$T/home/proj"
	echo host-secret > "$T/home/proj/f"
	chmod -R a+rX "$T/home"
	printf '{"filesystem": {"ro": ["%s:/mnt/p"]}}\n' "$T/home/proj" > "$T/op.json"
	start_daemon --listen "127.0.0.1:$port" --token-file "$T/token" --policy "$T/op.json" --pool 1
	i=0
	while [ $i -lt 100 ] && ! grep -q '"type":"sandbox.ready"' "$STATE/audit.jsonl"; do
		nap 0.1; i=$((i + 1))
	done
	expect_eq "the pool is full" "$(pool_count)" 1
	code=$(tcp_request -H "Authorization: Bearer $(< "$T/token")" -X POST -d '{}' "$U/v1/sandboxes")
	expect_error "a TCP create, the pool's bind outside the prefixes" "$code" 403 forbidden
	expect_not_contains "nothing of it" "$(body 4000)" host-secret
	expect_eq "the pool kept" "$(pool_count)" 1
	id=$(mksb '{}')
	expect_contains "the socket's create: a local id" "$id" sb-h
	code=$(api POST "/v1/sandboxes/$id/exec" -d '{"command": "cat /mnt/p/f"}')
	expect_eq "the socket's create: the bind" "$(jq 'v["stdout"]')" host-secret
	stop_daemon
}

t_kernel_and_daemon_paths_never_bound() {
	mkdir -p "$T/run"
	SOCK=$T/run/s
	start_daemon
	ln -s /proc/self/.. "$T/to-proc"
	ln -s /sys "$T/to-sys"
	ln -s "$T/state" "$T/to-state"
	# the socket itself: a sandbox that connects is a client as the daemon's user
	ln -s "$SOCK" "$T/to-sock"
	ln "$SOCK" "$T/sock-link" || fail "a hard link to the socket"
	for src in /proc /proc/1 "$T/to-proc" /sys "$T/to-sys" /dev /dev/shm / "$T/state" "$T/to-state" "$T/run" "$T" \
		   "$SOCK" "$T/to-sock" "$T/sock-link"; do
		create_refused ro "$src"
		create_refused workspace "$src"
	done
	code=$(api GET /v1/sandboxes)
	expect_eq "nothing created" "$(jq 'len(v["sandboxes"])')" 0
	stop_daemon
}

# create_refused ro|rw|workspace SRC [WHY]: a create binding SRC (at
# /mnt/x) or with SRC as its workspace is a 403, saying WHY if given
create_refused() {
	local body
	if [ "$1" = workspace ]; then
		body="{\"workspace\": \"$2\"}"
	else
		body="{\"policy\": {\"filesystem\": {\"$1\": [\"$2:/mnt/x\"]}}}"
	fi
	apic POST /v1/sandboxes -d "$body"
	expect_error "$1 $2" "$code" 403 forbidden
	[ -z "${3:-}" ] || expect_contains "$1 $2: why" "$(body 600)" "$3"
}

# The host's /run, /tmp, /var/tmp, /run/user and a session's directory there
# hold its unix sockets (a read-only bind does not stop connect(2)): a create naming
# one, however spelled, is the client's 403 with why, refused before any
# build, as the other host paths never shown (it was a failed build's 500).
t_socket_dirs_never_bound() {
	mkdir -p "$T/run"
	SOCK=$T/run/s
	# a session's directory where one exists (integration.sh's
	# t_host_socket_dirs_never_bound makes one: start_daemon's EXIT trap
	# would leave it here)
	session=$(ls -d /run/user/[0-9]* 2>/dev/null | head -1)
	start_daemon
	ln -s /run "$T/to-run"
	ln -s /var/run "$T/to-var-run"
	for src in /run /var/run /run/. //run /run/user /var/tmp "$T/to-run" "$T/to-var-run" \
		   ${session:+"$session"}; do
		create_refused ro "$src" "unix sockets of the host"
		create_refused rw "$src"
		create_refused workspace "$src" "unix sockets of the host"
	done
	# /var holds /var/tmp as a directory: a bind of it shows that
	if [ -d /var/tmp ] && [ ! -L /var/tmp ]; then
		create_refused ro /var "holds the host's /var/tmp"
		create_refused workspace /var "holds the host's /var/tmp"
	fi
	# /tmp (or the socket's directory's ancestor): refused too
	for src in /tmp /tmp/.; do
		create_refused workspace "$src"
	done
	code=$(api GET /v1/sandboxes)
	expect_eq "nothing created" "$(jq 'len(v["sandboxes"])')" 0
	stop_daemon
}

t_unix_client_reads_only_its_own() {
	mkdir -p "$T/run" "$T/secret" "$T/open"
	echo s > "$T/secret/f"
	chmod 700 "$T/secret"
	chmod 755 "$T/open"
	SOCK=$T/run/s
	start_daemon
	if [ "$ME" = 0 ]; then
		# the operator let uid 65534 in; it gets what it could read itself
		chmod 755 "$T/run"
		chmod 666 "$SOCK"
		as65534() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
	else
		# unprivileged: the client is the daemon's user, refused what it
		# cannot read (a root-only directory)
		as65534() { "$@"; }
		[ -r /root ] && { stop_daemon; skip "/root is readable"; return 77; }
		rm -rf "$T/secret"
		ln -s /root "$T/secret"
	fi
	mkdir -p "$T/c"
	chmod 777 "$T/c"
	cl() {
		as65534 curl -sS --max-time 30 --unix-socket "$SOCK" -o "$T/c/body" \
			-D "$T/c/headers" -w '%{http_code}' "$@" 2>"$T/curl.err" || true
		cp "$T/c/body" "$T/body"; cp "$T/c/headers" "$T/headers"
	}
	code=$(cl -X POST -d "{\"policy\": {\"filesystem\": {\"ro\": [\"$T/secret:/mnt/s\"]}}}" http://localhost/v1/sandboxes)
	expect_error "a 0700 dir not its own" "$code" 403 forbidden
	code=$(cl -X POST -d "{\"workspace\": \"$T/secret\"}" http://localhost/v1/sandboxes)
	expect_error "as workspace" "$code" 403 forbidden
	code=$(cl -X POST -d "{\"policy\": {\"filesystem\": {\"ro\": [\"$T/open:/mnt/o\"]}}}" http://localhost/v1/sandboxes)
	expect_code "a dir it can read" "$code" 201
	if [ "$ME" = 0 ]; then
		code=$(cl -X POST -d "{\"policy\": {\"filesystem\": {\"rw\": [\"$T/open:/mnt/o\"]}}}" http://localhost/v1/sandboxes)
		expect_error "rw where it cannot write" "$code" 403 forbidden
		code=$(cl -X POST -d '{"policy": {"env": {"pass": ["PATH"]}}}' http://localhost/v1/sandboxes)
		expect_error "env.pass by another user" "$code" 403 forbidden
	fi
	stop_daemon
}

t_workspace_owner_is_no_uid_grant() {
	[ "$ME" = 0 ] || { skip "only a root daemon picks a host uid"; return 77; }
	mkdir -p "$T/theirs"
	echo private > "$T/theirs/key"
	chmod 600 "$T/theirs/key"
	chmod 755 "$T/theirs"
	chown -R 4321:4321 "$T/theirs"
	start_daemon
	id=$(mksb "{\"workspace\": \"$T/theirs\"}")
	code=$(ex "$id" '{"command": "cat /workspace/key"}')
	expect_code "exec" "$code" 200
	expect_eq "its 0600 file is not ours" "$(jq 'v["stdout"]')" ""
	expect_contains "refused" "$(jq 'v["stderr"]')" "Permission denied"
	stop_daemon
	start_daemon --uid-range 4000-5000
	id=$(mksb "{\"workspace\": \"$T/theirs\"}")
	expect_eq "within the range" "$(sbsh "$id" 'cat /workspace/key')" private
	stop_daemon
}

# A file of another host user in a workspace idmapped for its owner (an
# apply written by root, say): the agent cannot name its owner, and
# neither can the file API working as the agent.  The kernel's EOVERFLOW
# was a 500 (found by tests/chaos_serve.py, seed 27: a DELETE after an
# export's apply); it is a 403, as for the agent inside.
t_uid_range_unmapped_owner() {
	local code
	[ "$ME" = 0 ] || { skip "only root idmaps"; return 77; }
	mkdir "$T/w"
	echo theirs > "$T/w/root-file"
	echo mine > "$T/w/mine"
	chown 4321:4321 "$T/w" "$T/w/mine"
	chmod 755 "$T/w"
	start_daemon --uid-range 4000-5000
	id=$(mksb "{\"workspace\": \"$T/w\"}")
	code=$(api DELETE "/v1/sandboxes/$id/files?path=/workspace/root-file")
	expect_error "DELETE of root's file" "$code" 403 forbidden
	code=$(api POST "/v1/sandboxes/$id/files/rename" -d '{"from": "/workspace/root-file", "to": "/workspace/x"}')
	expect_code "rename of root's file" "$code" 403
	expect_eq "the agent inside is refused too" \
		"$(sbsh "$id" 'rm -f /workspace/root-file 2>&1 >/dev/null | grep -c .; cat /workspace/root-file')" \
		"$(printf '1\ntheirs')"
	code=$(api DELETE "/v1/sandboxes/$id/files?path=/workspace/mine")
	expect_code "DELETE of the owner's file" "$code" 200
	[ -e "$T/w/root-file" ] || fail "root's file is gone from the host"
	stop_daemon
}

# workspace_inode: the directory the client judged is the one the sandbox
# gets, or the create is refused; a malformed one is a 400.
t_workspace_inode() {
	local ino code
	mkdir -p "$T/w" "$T/other"
	echo judged > "$T/w/f"
	chmod -R a+rX "$T/w" "$T/other"
	ino=$(stat -c '%d:%i' "$T/w")
	start_daemon
	id=$(mksb "{\"workspace\": \"$T/w\", \"workspace_inode\": \"$ino\"}")
	expect_eq "the directory judged" "$(sbsh "$id" 'cat /workspace/f')" judged
	code=$(api POST /v1/sandboxes -d "{\"workspace\": \"$T/other\", \"workspace_inode\": \"$ino\"}")
	expect_error "another directory at the path" "$code" 409 conflict
	expect_contains "says so" "$(jq 'v["detail"]')" "is not the directory the client checked"
	for bad in "" ":1" "1:" "1:2:3" "-1:2" " 1:2" "1:2x" "99999999999999999999:1"; do
		code=$(api POST /v1/sandboxes -d "{\"workspace\": \"$T/w\", \"workspace_inode\": \"$bad\"}")
		expect_error "workspace_inode \"$bad\"" "$code" 400 bad_request
	done
	code=$(api POST /v1/sandboxes -d "{\"workspace_inode\": \"$ino\"}")
	expect_error "without a workspace" "$code" 400 bad_request
	stop_daemon
}

# held_swap BODY: as uid 4321 (within --uid-range, as is 4500), create a
# sandbox from BODY, which names its own directory $T/u/mine; while the
# daemon is held (strace stops it at its first mkdir, the sandbox's
# cgroup: after the request was judged, before anything is mounted) swap
# it for a link to 4500's 0700 $T/theirs.  The answer in $T/body, its
# status in $T/code.
held_swap() {
	mkdir -p "$T/run" "$T/u/mine" "$T/theirs" "$T/c"
	chmod 777 "$T/c"
	echo checked > "$T/u/mine/f"
	echo private > "$T/theirs/f"
	chmod 700 "$T/theirs"
	chmod 600 "$T/theirs/f"
	chown -R 4500:4500 "$T/theirs"
	chown -R 4321:4321 "$T/u"
	chmod 755 "$T/run" "$T"
	SOCK=$T/run/s
	start_daemon --uid-range 4000-5000 || return 1
	chmod 666 "$SOCK"
	hold_daemon_at mkdir || return $?
	setpriv --reuid=4321 --regid=4321 --clear-groups curl -sS --max-time 60 \
		--unix-socket "$SOCK" -o "$T/c/body" -w '%{http_code}' -X POST \
		-d "$1" http://localhost/v1/sandboxes > "$T/c/code" 2> "$T/curl.err" &
	swap_while_held $! "$T/theirs" || return 1
	cp "$T/c/body" "$T/body"
	cp "$T/c/code" "$T/code"
}

# hold_daemon_at SYSCALL: strace (pid in TRACER, listed in $T/tracers for
# on_test_exit) stops the daemon with SIGSTOP at its next SYSCALL (a list:
# "clone,clone3"); returns once strace has attached (its "Process N
# attached": from then on no call of the daemon goes unseen).  77 (a skip)
# if strace cannot attach.
hold_daemon_at() {
	strace -o "$T/strace.out" -p "$DPID" -e trace="$1" \
		-e inject="$1":signal=SIGSTOP:when=1 2> "$T/strace.err" &
	TRACER=$!
	echo "$TRACER" >> "$T/tracers"
	strace_attached "$T/strace.err" "$TRACER" && return 0
	kill "$TRACER" 2>/dev/null
	wait "$TRACER" 2>/dev/null
	kill -CONT "$DPID"
	stop_daemon
	skip "strace cannot attach to the daemon: $(head -c 300 "$T/strace.err")"
}

# swap_while_held CLIENT TARGET: once the daemon is held (strace says the
# SIGSTOP stopped it; waited for while the client's request runs),
# $T/u/mine becomes a link to TARGET; then the daemon goes on, the client
# ends, the tracer goes, and the daemon is let on once more (stopped after
# the wait, it is held no more).  Fails if it was never held.
swap_while_held() {
	local client=$1 held=0
	strace_held "$T/strace.out" "$client" && held=1
	if [ "$held" = 1 ]; then
		mv "$T/u/mine" "$T/u/mine.checked"
		ln -s "$2" "$T/u/mine"
	fi
	kill -CONT "$DPID"
	wait "$client" || true
	kill "$TRACER" 2>/dev/null
	wait "$TRACER" 2>/dev/null || true
	kill -CONT "$DPID"
	[ "$held" = 1 ] || { fail "the daemon was never held: $(tail -c 300 "$T/strace.out")"; return 1; }
}

# expect_checked WHAT CMD WANT: the sandbox made ($T/code 201) shows WANT
# for CMD, what was checked; or init saw the swap and refused it.
expect_checked() {
	local id
	if [ "$(< "$T/code")" = 201 ]; then
		id=$(jq 'v["id"]')
		expect_eq "$1" "$(sbsh "$id" "$2")" "$3"
	else	# init saw the swap
		expect_contains "refused" "$(body)" "is not what was checked any more"
	fi
}

# A client's host path swapped between the daemon's check and the mount:
# the sandbox gets the directory that was checked, or none; never the
# other user's files as the agent's (idmapped: their owner is the agent).
t_workspace_swapped_after_check() {
	[ "$ME" = 0 ] || { skip "only a root daemon maps another owner"; return 77; }
	command -v strace > /dev/null || { skip "no strace to hold the daemon with"; return 77; }
	held_swap "{\"workspace\": \"$T/u/mine\"}"
	expect_checked "the checked workspace" 'cat /workspace/f' checked
	stop_daemon
}

t_ro_bind_swapped_after_check() {
	[ "$ME" = 0 ] || { skip "only a root daemon maps another owner"; return 77; }
	command -v strace > /dev/null || { skip "no strace to hold the daemon with"; return 77; }
	held_swap "{\"policy\": {\"filesystem\": {\"ro\": [\"$T/u/mine:/mnt/m\"]}}}"
	expect_checked "the checked bind" 'cat /mnt/m/f' checked
	stop_daemon
}

# The daemon's own directories, swapped in after the check: a client
# binds its directory, and while the daemon is held (stopped by strace
# once it has cloned the sandbox's init, which waits for it before any
# mount) swaps it for a link to the state directory, where the socket is.
# The sandbox gets the directory that was checked, or none.  (As root,
# the sandbox's host user could not open the state directory anyway.)
t_state_dir_swapped_after_check() {
	command -v strace > /dev/null || { skip "no strace to hold the daemon with"; return 77; }
	mkdir -p "$T/u/mine"
	echo checked > "$T/u/mine/f"
	chmod -R a+rX "$T/u"
	start_daemon
	hold_daemon_at clone,clone3 || return $?
	api POST /v1/sandboxes -d "{\"policy\": {\"filesystem\": {\"ro\": [\"$T/u/mine:/mnt/m\"]}}}" \
		> "$T/code" &
	swap_while_held $! "$STATE" || return 1
	expect_checked "the checked bind" 'ls /mnt/m' f
	stop_daemon
}

# The daemon's token and TLS key, in a directory a client binds or makes
# the workspace (`--token-file ./token` in the project): an unprivileged
# daemon's sandbox is the daemon's uid and read them, so its code could be
# a TCP client (every sandbox, the allowed host paths) or pass for the
# daemon, wherever it sent them.  Refused, as the state directory is.
t_token_and_tls_key_never_shown() {
	local port code b
	mkdir -p "$T/proj" && mkdir -m 700 "$T/proj/conf" && mkdir -m 755 "$T/pub" && ln -s proj/conf "$T/link" || return 1
	tls_files "$T/proj/conf" || return 1
	( umask 077; printf '%s' "$(new_token)" > "$T/proj/conf/token" )
	cp "$T/proj/conf/cert.pem" "$T/pub/" && chmod 644 "$T/pub/cert.pem"
	port=$(free_port)
	start_daemon --listen "127.0.0.1:$port" --token-file "$T/proj/conf/token" \
		--tls-cert "$T/proj/conf/cert.pem" --tls-key "$T/proj/conf/cert.key" || return 1
	for b in "{\"workspace\": \"$T/proj/conf\"}" "{\"workspace\": \"$T/link\"}" \
		"{\"workspace\": \"$T/proj\"}" \
		"{\"policy\": {\"filesystem\": {\"ro\": [\"$T/link/token:/t\"]}}}" \
		"{\"policy\": {\"filesystem\": {\"ro\": [\"$T/proj/conf/cert.key:/k\"]}}}"; do
		code=$(api POST /v1/sandboxes -d "$b")
		expect_error "$b" "$code" 403 forbidden
		expect_contains "$b: why" "$(body)" "token and TLS key are never shown"
	done
	# beside them, a copy of the certificate (public) is any file
	b="{\"policy\": {\"filesystem\": {\"ro\": [\"$T/pub:/p\"]}}}"
	id=$(mksb "$b") || return 1
	expect_eq "a bind beside" "$(sbsh "$id" 'ls /p')" cert.pem
	stop_daemon
}

# The operator's secret read from a file: a client whose workspace or bind
# holds that file would have its sandbox read the value, which the
# sandbox is to see only as a placeholder.  Refused before the build.
t_operator_secret_file_never_shown() {
	local b code id
	mkdir -p "$T/proj/keys" "$T/other" && echo "op-secret-$$" > "$T/proj/keys/k" &&
	chmod -R a+rX "$T/proj" "$T/other" || return 1
	printf '{"network": {"mode": "proxy", "allow": ["api.test"]}, "secrets": [{"name": "K", "from_file": "%s", "hosts": ["api.test"], "header": "Authorization"}]}\n' \
		"$T/proj/keys/k" > "$T/op.json"
	start_daemon --policy "$T/op.json" || return 1
	for b in "{\"workspace\": \"$T/proj\"}" \
		"{\"policy\": {\"filesystem\": {\"ro\": [\"$T/proj/keys:/k\"]}}}"; do
		code=$(api POST /v1/sandboxes -d "$b")
		expect_error "$b" "$code" 403 forbidden
		expect_contains "$b: why" "$(body)" "secret K: its file $T/proj/keys/k lies in the"
	done
	id=$(mksb "{\"workspace\": \"$T/other\"}") || return 1
	expect_eq "a workspace beside: a placeholder" "$(sbsh "$id" 'echo ${K%%-*}')" corral
	stop_daemon
}

# Which host ids a sandbox uses, in GET /v1/sandboxes/{id} and in each
# result; a workspace of an allowed owner is the agent's (idmapped, as
# root), and git inside finds no "dubious ownership".
t_ids_reported() {
	local want_uid=$ME want_map mapping
	mkdir "$T/w"
	echo k > "$T/w/key"
	git -C "$T/w" init -q
	if [ "$ME" = 0 ]; then
		chown -R 4321:4321 "$T/w"
		want_uid=$((0x70000000 + 1000))
		start_daemon --uid-range 4000-5000
	else
		start_daemon
	fi
	id=$(mksb "{\"workspace\": \"$T/w\"}")
	mapping=$(sbget "$id" 'v["ids"]["mapping"]')
	want_map=single
	[ "$ME" = 0 ] && want_map=range
	[ "$ME" != 0 ] && grep -q "^$(id -un):\|^$ME:" /etc/subuid 2>/dev/null && want_map=subuid
	expect_eq "mapping" "$mapping" "$want_map"
	expect_eq "agent's host uid" "$(sbget "$id" 'v["ids"]["uid"]')" "$want_uid"
	[ "$ME" != 0 ] || expect_eq "idmapped" "$(sbget "$id" 'v["ids"]["idmapped"]')" true
	expect_eq "owner inside, git" "$(sbsh "$id" 'stat -c %u /workspace/key; git -C /workspace status --porcelain 2>&1')" \
		"$(printf '1000\n?? key')"
	expect_eq "in the result" "$(jq 'v["layers"]["ids"]["uid"]')" "$want_uid"
	stop_daemon
}

# ---- the operator's policy (--policy): every create's base and bound -------

# OP_POLICY: what the operator gives clients at most (a.test only, small
# limits, abort criteria, a tripwire and an export hold).
OP_POLICY='{"limits": {"memory": "256M", "pids": 64, "cpus": 1, "timeout": "60s",
            "open_files": 512, "output": "4K"},
 "network": {"mode": "proxy", "allow": ["a.test"]},
 "abort": {"max_denied_egress": 5, "max_distinct_denied_destinations": 5,
           "window_seconds": 60,
           "tripwires": ["/home/agent/.ssh/id_ed25519"], "on_abort": "freeze"},
 "export": {"hold": ["deploy/**"]},
 "filesystem": {"hide": ["/home/agent/.netrc"]}}'

# A create that names no policy gets the operator's, the pool's sandboxes
# too; one that narrows it gets what it asked.
t_operator_policy_is_the_base() {
	local id i before
	echo "$OP_POLICY" > "$T/op.json"
	start_daemon --policy "$T/op.json" --pool 1
	i=0
	while [ $i -lt 100 ] && [ "$(pool_count)" != 1 ]; do sleep 0.1; i=$((i + 1)); done
	expect_eq "the pool is full" "$(pool_count)" 1
	# counted from its start, taken once ready: on a loaded host a create
	# between the two built one of its own (CI, as 65534)
	i=0
	while [ $i -lt 100 ] && ! grep -q '"type":"sandbox.ready"' "$STATE/audit.jsonl"; do
		sleep 0.1; i=$((i + 1))
	done
	before=$(wc -l < "$STATE/audit.jsonl")
	id=$(mksb) || return 1
	# built before it was asked for (the pool refills at once: no count)
	head -n "$before" "$STATE/audit.jsonl" |
		grep -q "\"sandbox\":\"$id\",\"type\":\"sandbox.create\"" ||
		fail "$id was not taken from the pool"
	expect_eq "the operator's open_files" "$(sbsh "$id" 'ulimit -Hn')" 512
	expect_eq "the operator's network" "$(sbsh "$id" 'echo "$HTTP_PROXY"')" "http://127.0.0.1:3128"
	code=$(ex "$id" '{"command": "head -c 10000 /dev/zero | tr \"\\0\" x"}')
	expect_code "a long output" "$code" 200
	expect_eq "cut at the operator's limits.output" "$(jq 'str(len(v["stdout"]) <= 4096) + " " + str(v["stdout_truncated"])')" "True True"
	id=$(mksb '{"policy": {"limits": {"pids": 32, "open_files": 256}, "network": {"mode": "none"}}}') || return 1
	expect_eq "narrowed: open_files" "$(sbsh "$id" 'ulimit -Hn')" 256
	expect_eq "narrowed: no network" "$(sbsh "$id" 'echo "${HTTP_PROXY:-none}"')" none
	stop_daemon
}

# The pooled sandbox a daemon builds at its start becomes ready, start
# after start.  An unprivileged daemon's launcher thread (launcher.c) was
# still being created when the first pooled init was cloned from the main
# thread, and that init waited for ever in glibc's setresgid for a thread
# that does not exist in it: about one start in five as 65534 here.
t_pool_ready_at_every_start() {
	local r i
	for r in $(seq 20); do
		STATE=$T/state$r start_daemon --pool 1
		i=0
		while [ $i -lt 300 ] && ! grep -q '"type":"sandbox.ready"' "$T/state$r/audit.jsonl" 2>/dev/null; do
			nap 0.01; i=$((i + 1))
		done
		[ $i -lt 300 ] || fail "start $r: the pooled sandbox was not ready within 3 s: $(cut -c1-160 "$T/state$r/audit.jsonl")"
		stop_daemon
		[ $i -lt 300 ] || return 1
	done
}

# A --policy no sandbox of this host could start with (a file-table share
# past a quarter of fs.file-max) stops the daemon at its start, saying
# why; it used to start, and fail every create and every pool step.
t_operator_policy_checked_at_start() {
	local rc=0
	echo '{"limits": {"open_files": 2147483584, "pids": 1024}}' > "$T/op.json"
	timeout 30 "$CORRAL" serve --socket "$T/s" --state-dir "$T/st" --pool 1 \
		--policy "$T/op.json" > /dev/null 2> "$T/serve.err" < /dev/null || rc=$?
	expect_eq "exit" "$rc" 125
	expect_contains "why" "$(cat "$T/serve.err")" \
		"--policy $T/op.json: no sandbox of it can start on this host: limits.open_files 2147483584 x limits.pids 1024"
	[ ! -e "$T/s" ] || fail "a socket was made"
}

# A remote client with the token asks for more than the operator gives,
# in every way it can: each is refused, naming the field.
t_operator_policy_bounds_tcp_client() {
	front_test || return
	local port id code body want
	port=$(free_port)
	new_token > /dev/null
	U=http://127.0.0.1:$port
	tcp() { tcp_request -H "Authorization: Bearer $(< "$T/token")" "$@"; }
	echo "$OP_POLICY" > "$T/op.json"
	start_daemon --policy "$T/op.json" --listen "127.0.0.1:$port" --token-file "$T/token"
	while IFS='|' read -r body want; do
		code=$(tcp -X POST -d "$body" "$U/v1/sandboxes")
		expect_error "$body" "$code" 403 forbidden
		expect_contains "$body: why" "$(jq 'v["detail"]')" "$want"
	done <<-'EOF'
	{"policy": {"limits": {"pids": "unlimited"}}}|limits.pids: the operator's policy sets at most 64; it cannot be removed
	{"policy": {"limits": {"pids": 65}}}|limits.pids: the operator's policy allows at most 64 (got 65)
	{"policy": {"limits": {"memory": "unlimited"}}}|limits.memory (bytes): the operator's policy sets at most 268435456
	{"policy": {"limits": {"memory": "1G"}}}|limits.memory (bytes): the operator's policy allows at most 268435456 (got 1073741824)
	{"policy": {"limits": {"cpus": "unlimited"}}}|limits.cpus: the operator's policy allows at most 1 (got unlimited)
	{"policy": {"limits": {"cpus": 2}}}|limits.cpus: the operator's policy allows at most 1 (got 2)
	{"policy": {"limits": {"timeout": "none"}}}|limits.timeout (ms): the operator's policy sets at most 60000
	{"policy": {"limits": {"timeout": "1h"}}}|limits.timeout (ms): the operator's policy allows at most 60000
	{"policy": {"limits": {"open_files": 1024}}}|limits.open_files: the operator's policy allows at most 512 (got 1024)
	{"policy": {"network": {"allow": ["evil.test"]}}}|network.allow: "evil.test" is not in the operator's allowlist
	{"policy": {"network": {"allow": ["a.test", "*.evil.test"]}}}|network.allow: "*.evil.test" is not in the operator's allowlist
	{"policy": {"network": {"transparent": false}}}|network.transparent: the operator's policy takes every TCP connection to the proxy
	{"policy": {"abort": {"max_denied_egress": 0}}}|abort.max_denied_egress: the operator's policy sets at most 5; it cannot be removed
	{"policy": {"abort": {"max_denied_egress": 500}}}|abort.max_denied_egress: the operator's policy allows at most 5 (got 500)
	{"policy": {"abort": {"window_seconds": 1}}}|abort.window_seconds: the operator's policy counts denials over at least 60 s (got 1)
	{"policy": {"abort": {"tripwires": []}}}|abort.tripwires: the operator's tripwire /home/agent/.ssh/id_ed25519 cannot be removed
	{"policy": {"export": {"hold": []}}}|export.hold: the operator's rule deploy/**
	{"policy": {"filesystem": {"hide": []}}}|filesystem.hide: the operator's hidden path /home/agent/.netrc cannot be shown
	{"image": "no-such-image", "policy": {"limits": {"pids": 100}}}|limits.pids: the operator's policy allows at most 64 (got 100)
	{"from_snapshot": "snap-nope", "policy": {"limits": {"pids": 100}}}|limits.pids: the operator's policy allows at most 64 (got 100)
	EOF
	expect_eq "no sandbox was built" "$(grep -c '"type":"sandbox.create"' "$STATE/audit.jsonl")" 0
	# within the bound: made, and a call's own timeout no longer than its
	code=$(tcp -X POST -d '{"policy": {"limits": {"pids": 32}}}' "$U/v1/sandboxes")
	expect_code "a narrowing create" "$code" 201
	id=$(jq 'v["id"]')
	code=$(tcp -X POST -d '{"argv": ["true"], "timeout_seconds": 61}' "$U/v1/sandboxes/$id/exec")
	expect_error "exec past the operator's timeout" "$code" 403 forbidden
	expect_contains "why" "$(jq 'v["detail"]')" "timeout_seconds: the operator's policy allows at most 60 seconds (got 61)"
	code=$(tcp -X POST -d '{"argv": ["sleep", "1"], "timeout_seconds": 3600}' "$U/v1/sandboxes/$id/processes")
	expect_error "a background process past it" "$code" 403 forbidden
	code=$(tcp -X POST -d '{"argv": ["true"], "timeout_seconds": 60}' "$U/v1/sandboxes/$id/exec")
	expect_code "exec within it" "$code" 200
	# the unix socket's client is bounded the same: the bound is the daemon's
	code=$(api POST /v1/sandboxes -d '{"policy": {"limits": {"pids": 65}}}')
	expect_error "over the unix socket" "$code" 403 forbidden
	stop_daemon
}

# ---- a client in C ---------------------------------------------------------

# ---- leases: sandboxes bound to a client's connection ---------------------

# present ID: ID, unless the daemon says 404
present() { [ "$(api GET "/v1/sandboxes/$1")" = 404 ] || echo "$1"; }

nsandboxes() { api GET /v1/sandboxes > /dev/null; jq 'len(v["sandboxes"])'; }

# The user's lease: two sandboxes bound to it go when its connection does,
# each saying why; one DELETEd before, one of no lease, and one whose TTL
# ends while the lease is open are no concern of it.
t_lease_closed_destroys_bound() {
	start_daemon
	open_lease
	[ -n "$LEASE" ] || fail "no lease: $(cat "$T/lease" 2>/dev/null)"
	[[ $LEASE =~ ^ls-[0-9a-f]{32}$ ]] || fail "lease id $LEASE: not ls- and 32 hex digits"
	a=$(mksb "{\"lease\": \"$LEASE\"}")
	b=$(mksb "{\"lease\": \"$LEASE\", \"policy\": {\"limits\": {\"pids\": 64}}}")
	early=$(mksb "{\"lease\": \"$LEASE\"}")
	short=$(mksb "{\"lease\": \"$LEASE\", \"ttl_seconds\": 1}")
	free=$(mksb)
	code=$(api DELETE "/v1/sandboxes/$early")
	expect_code "a bound sandbox deleted first" "$code" 200
	# the lease gives no sandbox more life than its TTL
	wait_gone "the 1 s TTL sandbox under an open lease" 20 present "$short"
	initb=$(grep "\"sandbox\":\"$b\"" "$STATE/audit.jsonl" | grep '"type":"sandbox.ready"' | jq 'v["pid"]' /dev/stdin)
	expect_eq "both still there" "$(present "$a")$(present "$b")" "$a$b"
	close_lease
	wait_gone "the lease's sandboxes" 10 eval 'present "$a"; present "$b"'
	wait_gone "the init of one" 5 alive_pid "$initb"
	code=$(api GET "/v1/events?sandbox=$a")
	expect_contains "why, in its events" "$(< "$T/body")" '"type":"lease.closed"'
	expect_contains "naming the lease" "$(< "$T/body")" "$LEASE"
	code=$(api GET "/v1/events?sandbox=$early")
	expect_not_contains "the one deleted first" "$(< "$T/body")" 'lease.closed'
	code=$(api GET "/v1/sandboxes/$free")
	expect_code "a sandbox of no lease stays" "$code" 200
	# a closed lease binds nothing more
	code=$(api POST /v1/sandboxes -d "{\"lease\": \"$LEASE\"}")
	expect_error "the closed lease" "$code" 404 not_found
	expect_contains "saying so" "$(< "$T/body")" "no open lease"
	stop_daemon
}

# A lease's sandboxes count as one client's (--max-sandboxes-per-peer), as
# a TCP peer's do: one corral mcp session on a shared daemon took every
# place --max-sandboxes allows, and every other session's create was
# refused meanwhile.  A sandbox of no lease (the unix socket's own user)
# is not bounded by it, and the lease's place comes back with a DELETE.
t_lease_holds_a_peers_share() {
	start_daemon --max-sandboxes-per-peer 2
	open_lease
	[ -n "$LEASE" ] || { fail "no lease: $(cat "$T/lease" 2>/dev/null)"; return 1; }
	a=$(mksb "{\"lease\": \"$LEASE\"}") && mksb "{\"lease\": \"$LEASE\"}" > /dev/null || return 1
	code=$(api POST /v1/sandboxes -d "{\"lease\": \"$LEASE\"}")
	expect_error "a third of the lease's" "$code" 429 too_many_requests
	expect_contains "why" "$(jq 'v["detail"]')" "2 sandboxes of this lease's are alive, the limit (--max-sandboxes-per-peer)"
	mksb > /dev/null || fail "a sandbox of no lease, meanwhile"
	code=$(api DELETE "/v1/sandboxes/$a")
	expect_code "one of the lease's deleted" "$code" 200
	mksb "{\"lease\": \"$LEASE\"}" > /dev/null || fail "the lease's, once one was deleted"
	close_lease
	stop_daemon
}

# A lease outlives evhttp's read and write timeout (900 s; 2 s here,
# CORRAL_TEST_HTTP_TIMEOUT): its request has no body, so evhttp went on
# reading the connection, and its client sends nothing after it: every
# lease was closed that long after it opened, its sandboxes destroyed.
# The shortened timeout is shown to bite (a body that stalls is cut).
t_lease_outlives_the_http_timeout() {
	front_test
	local sb out
	DAEMON_WRAP="env CORRAL_TEST_HTTP_TIMEOUT=2" start_daemon
	out=$($PY - "$SOCK" <<'PYEOF'
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.settimeout(20)
s.sendall(b"PUT /v1/sandboxes/x/files?path=/a HTTP/1.1\r\nHost: x\r\n"
          b"Content-Length: 10\r\n\r\nab")
t = time.time()
try:
    s.recv(4096)
except OSError:
    pass
print("cut" if time.time() - t < 10 else "not cut")
PYEOF
)
	expect_eq "a stalled body, under the short timeout" "$out" cut
	open_lease
	[ -n "$LEASE" ] || fail "no lease: $(cat "$T/lease" 2>/dev/null)"
	sb=$(mksb "{\"lease\": \"$LEASE\"}")
	sleep 5
	expect_eq "the lease's sandbox, past the timeout" "$(present "$sb")" "$sb"
	kill -0 "$LPID" 2>/dev/null || fail "the lease's holder is gone"
	expect_not_contains "no lease.closed" "$(< "$STATE/audit.jsonl")" lease.closed
	close_lease
	wait_gone "the lease's sandbox, once it closed" 10 present "$sb"
	stop_daemon
}

# A client that waits in silence on a GET (an events follow, a process's
# wait) outlives evhttp's read timeout (900 s; 2 s here): with no body,
# evhttp kept reading its connection while it was answered, and cut it
# off that long after it asked, whatever had been sent.  The next
# request's body is still bounded by it.
t_follow_outlives_the_http_timeout() {
	front_test
	local id pid out
	DAEMON_WRAP="env CORRAL_TEST_HTTP_TIMEOUT=2" start_daemon
	id=$(mksb)
	code=$(api POST "/v1/sandboxes/$id/processes" -d '{"command": "sleep 5; echo done"}')
	expect_code "a process" "$code" 201
	pid=$(jq 'v["pid"]')
	out=$($PY - "$SOCK" "$id" "$pid" <<'PYEOF'
import socket, sys, time
sock, sb, pid = sys.argv[1:4]
def ask(path):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock)
    s.settimeout(20)
    s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % path).encode())
    return s
follow = ask("/v1/events?follow=1")
wait = ask("/v1/sandboxes/%s/processes/%s/wait" % (sb, pid))
got = b""
try:
    while b"done" not in got:
        x = wait.recv(65536)
        if not x:
            break
        got += x
except OSError:
    pass
print("wait:", "answered" if b'"state":"exited"' in got else "cut: %r" % got[-200:])
follow.setblocking(False)
try:
    while follow.recv(65536):
        pass
    print("follow: closed")
except BlockingIOError:
    print("follow: open")
# on the same connection as the wait, a body that stalls is still cut
wait.settimeout(20)
wait.sendall(b"PUT /v1/sandboxes/x/files?path=/a HTTP/1.1\r\nHost: x\r\n"
             b"Content-Length: 10\r\n\r\nab")
t = time.time()
try:
    while wait.recv(4096):
        pass
except OSError:
    pass
print("stalled body:", "cut" if time.time() - t < 10 else "not cut")
PYEOF
)
	expect_contains "a wait past the timeout" "$out" "wait: answered"
	expect_contains "an events follow past the timeout" "$out" "follow: open"
	expect_contains "a stalled body after them" "$out" "stalled body: cut"
	stop_daemon
}

# A create still building when its lease closes is answered 410 gone, as
# a request whose sandbox was destroyed under it: it was a 500, the
# daemon's own fault by the API's table, for the client's own close.
t_create_pending_when_its_lease_closes() {
	front_test
	local out
	start_daemon
	out=$($PY "$HERE/lease_creates.py" "$SOCK" 3)
	# each was answered: 410 if it was still building, 201 if it was not
	expect_eq "three answers" "$(echo "$out" | grep -c .)" 3
	expect_not_contains "no 500" "$out" 500
	echo "$out" | grep -qx 410 || skip "every create was ready before the lease closed"
	wait_gone "the lease's sandboxes" 10 eval '[ "$(nsandboxes)" = 0 ] || echo left'
	stop_daemon
}

# The same, made certain: the create is held at its init's move into its
# cgroups (CORRAL_TEST_MOVE_FIFO, as t_moves_off_loop) when the lease is
# closed; its answer is 410 at once, without waiting for the move, and
# nothing of it is left once the move is let go.
t_create_held_when_its_lease_closes() {
	local cr hp i
	mkfifo "$T/move"
	exec 7<>"$T/move"	# read-write: the helper's open does not wait for us
	CORRAL_TEST_MOVE_FIFO=$T/move start_daemon 7>&-
	$PY "$HERE/lease_creates.py" "$SOCK" 1 "$T/close" > "$T/create.out" 2>&1 7>&- &
	cr=$!
	echo "$cr" >> "$T/fixtures"
	hp=$(await_hold "$cr")
	if [ -z "$hp" ]; then
		touch "$T/close"
		wait "$cr" || true
		rm -f "$T/move"; exec 7>&-
		stop_daemon
		skip "no cgroups: no init is moved, nothing holds a create"
		return 77
	fi
	touch "$T/close"
	for i in $(seq 200); do
		grep -qs '"type":"lease.closed"' "$STATE/audit.jsonl" && break
		sleep 0.05
	done
	expect_contains "the lease's end noted" "$(cat "$STATE/audit.jsonl")" '"type":"lease.closed"'
	# answered at once, its init still waiting for the move
	for i in $(seq 200); do kill -0 "$cr" 2>/dev/null || break; sleep 0.05; done
	expect_eq "the create's answer, the move still held" "$(cat "$T/create.out")" 410
	printf x >&7
	rm -f "$T/move"
	exec 7>&-
	wait "$cr" || true
	wait_gone "the lease's sandbox" 10 eval '[ "$(nsandboxes)" = 0 ] || echo left'
	stop_daemon
}

# A lease closed with many sandboxes bound, the daemon stopped while it
# destroys them (a few a turn of its loop): a clean stop, nothing left.
t_lease_closed_as_the_daemon_stops() {
	start_daemon
	open_lease
	[ -n "$LEASE" ] || fail "no lease: $(cat "$T/lease" 2>/dev/null)"
	for i in $(seq 12); do
		mksb "{\"lease\": \"$LEASE\"}" > /dev/null || return 1
	done
	close_lease
	stop_daemon
}

# The attacker's: a lease id guessed, a lease of another principal
# (another uid on the unix socket, the TCP clients'), the cap.
t_lease_refused() {
	port=$(free_port)
	new_token > /dev/null
	mkdir -p "$T/run"
	SOCK=$T/run/s
	start_daemon --max-leases 2 --listen "127.0.0.1:$port" --token-file "$T/token"
	code=$(api POST /v1/sandboxes -d '{"lease": "ls-00000000000000000000000000000000"}')
	expect_error "a guessed lease" "$code" 404 not_found
	code=$(api POST /v1/sandboxes -d '{"lease": 7}')
	expect_error "a lease that is no string" "$code" 400 bad_request
	code=$(api POST /v1/leases -d '{"ttl": 5}')
	expect_error "a lease asked with a field it does not know" "$code" 400 bad_request
	expect_eq "nothing made by the refusals" "$(nsandboxes)" 0
	open_lease
	mine=$LEASE lp1=$LPID
	[ -n "$mine" ] || fail "no lease: $(cat "$T/lease" 2>/dev/null)"
	tcpc() { tcp_request -H "Authorization: Bearer $(< "$T/token")" "$@"; }
	# a TCP client (the token's) is not the unix socket's user
	code=$(tcpc -X POST -d "{\"lease\": \"$mine\"}" "http://127.0.0.1:$port/v1/sandboxes")
	expect_error "a unix client's lease over TCP" "$code" 403 forbidden
	expect_contains "saying whose" "$(< "$T/body")" "another client"
	if [ "$ME" = 0 ]; then
		chmod 755 "$T/run"
		chmod 666 "$SOCK"
		mkdir -p "$T/c" && chmod 777 "$T/c"
		code=$(setpriv --reuid=65534 --regid=65534 --clear-groups curl -sS --max-time 30 \
			--unix-socket "$SOCK" -o "$T/c/body" -D "$T/c/headers" -w '%{http_code}' \
			-X POST -d "{\"lease\": \"$mine\"}" http://localhost/v1/sandboxes 2>"$T/curl.err" || true)
		cp "$T/c/body" "$T/body"; cp "$T/c/headers" "$T/headers"
		expect_error "root's lease, by uid 65534" "$code" 403 forbidden
	fi
	expect_eq "nothing made by the refusals" "$(nsandboxes)" 0
	# over TCP a lease is the token's
	open_lease hold "$port" "$T/token"
	theirs=$LEASE lp2=$LPID
	[ -n "$theirs" ] || fail "no lease over TCP: $(cat "$T/lease" 2>/dev/null)"
	code=$(tcpc -X POST -d "{\"lease\": \"$theirs\"}" "http://127.0.0.1:$port/v1/sandboxes")
	expect_code "the token's lease over TCP" "$code" 201
	code=$(api POST /v1/sandboxes -d "{\"lease\": \"$theirs\"}")
	expect_error "a TCP client's lease on the unix socket" "$code" 403 forbidden
	# the cap: a third lease is refused while two are open
	code=$(api POST /v1/leases)
	expect_error "a lease over --max-leases" "$code" 503 busy
	expect_contains "naming the option" "$(< "$T/body")" "--max-leases"
	mksb "{\"lease\": \"$mine\"}" > /dev/null
	LPID=$lp1 close_lease
	LPID=$lp2 close_lease
	# both closes seen: each lease's sandbox gone
	wait_gone "the leases' sandboxes" 10 eval 'nsandboxes | grep -v "^0$"'
	# and one opens once they are closed
	open_lease
	[ -n "$LEASE" ] || fail "no lease once the others closed: $(< "$T/lease")"
	close_lease
	stop_daemon
}

# A lease holder that sends a request's worth of bytes on its lease and
# never reads: the daemon neither grows nor waits for it, and still sees
# the connection end.
t_lease_holder_floods_and_never_reads() {
	# under ASan what is freed waits in a quarantine (256 MiB) before it
	# is reused: the bound is about what is live, so a small one here
	DAEMON_WRAP="env ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=1" \
		start_daemon
	before=$(vmrss_kb "$DPID")
	open_lease flood
	[ -n "$LEASE" ] || fail "no lease: $(cat "$T/lease" 2>/dev/null)"
	id=$(mksb "{\"lease\": \"$LEASE\"}")
	i=0
	while [ ! -s "$T/lease.sent" ] && [ $i -lt 600 ]; do
		sleep 0.1; i=$((i + 1))
	done
	sent=$(cat "$T/lease.sent" 2>/dev/null || echo 0)
	[ "$sent" -ge $((60 << 20)) ] || fail "the daemon took only $sent bytes of the flood"
	code=$(api GET /v1/health)
	expect_code "the daemon answers others meanwhile" "$code" 200
	after=$(vmrss_kb "$DPID")
	[ $((after - before)) -lt 16384 ] ||
		fail "the daemon grew from $before to $after kB on a lease's flood"
	code=$(api GET "/v1/sandboxes/$id")
	expect_code "its sandbox lives while the lease does" "$code" 200
	close_lease
	wait_gone "the flooding lease's sandbox" 10 present "$id"
	stop_daemon
}

# A lease over TLS: corral mcp on an https daemon holds one; SIGKILLed
# after a create, its sandbox is destroyed all the same.
t_lease_over_tls() {
	start_tls_daemon || return 1
	U=https://localhost:$port
	$PY - "$CORRAL" "$U" "$T/token" "$T/cert.pem" > "$T/mcp.out" 2> "$T/mcp.err" <<'EOF'
import json, os, signal, subprocess, sys
corral, url, token, ca = sys.argv[1:5]
p = subprocess.Popen([corral, "mcp", "--url", url, "--token-file", token, "--ca-file", ca],
                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
try:
    for i, (m, a) in enumerate([("initialize", {"protocolVersion": "2025-06-18"}),
                                ("tools/call", {"name": "sandbox_create", "arguments": {}})]):
        p.stdin.write((json.dumps({"jsonrpc": "2.0", "id": i, "method": m, "params": a}) + "\n").encode())
        p.stdin.flush()
        r = json.loads(p.stdout.readline())
    print(r["result"]["structuredContent"]["id"])
finally:
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    sys.stderr.write(p.stderr.read().decode())
EOF
	id=$(head -1 "$T/mcp.out")
	[ -n "$id" ] || fail "no sandbox from corral mcp over https: $(< "$T/mcp.err")"
	expect_contains "it holds a lease over TLS" "$(< "$T/mcp.err")" "bound to its lease"
	wait_gone "the SIGKILLed session's sandbox" 10 present "$id"
	code=$(api GET "/v1/events?sandbox=$id")
	expect_contains "why" "$(< "$T/body")" '"type":"lease.closed"'
	stop_daemon
}

# A TCP lease holder gone without a word: no FIN, no RST (powered off, or
# a firewall between that drops its packets).  In a network namespace of
# the test's own, nft drops everything the holder sends once its sandbox is
# bound; the holder itself stays, its socket open.  The daemon finds it by
# keepalive within --lease-timeout (the default's 120 s, before, 2 min).
t_lease_holder_vanishes() {
	in_vanish_netns holder_vanishes
}

# holder_said FILE: until $HOLDER has written FILE (10 s at most)
holder_said() {
	local i=0
	while [ ! -s "$1" ] && [ $i -lt 100 ] && kill -0 "$HOLDER" 2>/dev/null; do
		nap 0.1
		i=$((i + 1))
	done
}

# drop_from NETNS PORT: the client at PORT vanishes, its packets dropped
drop_from() {
	ip netns exec "$1" nft -f - <<EOF || { fail "nft: no drop rule in $1"; return 1; }
table inet corral_vanish {
	chain in {
		type filter hook input priority 0;
		tcp sport $2 drop
	}
}
EOF
}

# in_vanish_netns FN: FN NETNS PORT, in a network namespace of the test's
# own where a daemon listens on PORT with a --lease-timeout of 4 s, and
# FN's client ($HOLDER) is cut off by a drop rule; $HOLDER is killed after,
# whatever FN said.
in_vanish_netns() {
	[ "$ME" = 0 ] || { skip "a network namespace of its own: as root"; return; }
	command -v ip > /dev/null || { skip "no ip(8)"; return; }
	command -v nft > /dev/null || { skip "no nft(8)"; return; }
	local ns=corral-vanish-$$-$RANDOM port rc=0
	test_netns "$ns" || return 1
	HOLDER=
	port=$(free_port)
	new_token > /dev/null
	if ip netns exec "$ns" ip link set lo up &&
	   DAEMON_WRAP="ip netns exec $ns" start_daemon --listen "127.0.0.1:$port" \
		--token-file "$T/token" --lease-timeout 4; then
		"$1" "$ns" "$port" || rc=$?
	else
		rc=1
	fi
	if [ -n "$HOLDER" ]; then
		kill "$HOLDER" 2>/dev/null || true
		wait "$HOLDER" 2>/dev/null || true
	fi
	return $rc
}

# Answers read whole (a file, an archive) that their clients do not read
# share one budget (--answer-memory): a client that asks and never reads,
# over as many connections as it may open, cannot hold 64 MiB a
# connection of the daemon's memory; once it has read, the next is served.
t_answers_held_bounded() {
	local id out
	start_daemon --answer-memory 8M
	id=$(mksb) || return 1
	head -c $((6 << 20)) /dev/urandom > "$T/big"
	code=$(api PUT "/v1/sandboxes/$id/files?path=/tmp/big" --data-binary @"$T/big")
	expect_code "put" "$code" 201 || return 1
	out=$({ printf '%s\n' "$READ_ANSWER_PY"; cat <<'EOF'
import socket, sys, time
sock, sb = sys.argv[1:3]
def ask(path):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock)
    s.settimeout(20)
    s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % path).encode())
    return s
path = "/v1/sandboxes/%s/files?path=/tmp/big" % sb
held = ask(path)
time.sleep(1)
code, head, body = read_answer(ask(path))
print("second:", code, b"retry-after: 1" in head.lower(), b"--answer-memory" in body)
code, _, body = read_answer(held)
print("first:", code, len(body))
code, _, body = read_answer(ask(path))
print("third:", code, len(body))
EOF
	} | $PY - "$SOCK" "$id")
	expect_contains "a second answer while the first is unread" "$out" "second: 503 True True"
	expect_contains "the first, read" "$out" "first: 200 6291456"
	expect_contains "the next, once read" "$out" "third: 200 6291456"
	stop_daemon
}

# The answers a unix-socket client has not read count against
# --answer-memory as any other's, and a TCP client's answer past it is a
# 503 as before; but its detail no longer says how many bytes the daemon
# holds (it said "6291xxx bytes": what the socket's clients had asked
# for and not read, to the byte).
t_answer_memory_unsaid_over_tcp() {
	local id out port
	port=$(free_port)
	new_token > /dev/null
	start_daemon --listen "127.0.0.1:$port" --token-file "$T/token" --answer-memory 8M
	id=$(mksb) || return 1
	head -c $((6 << 20)) /dev/urandom > "$T/big"
	code=$(api PUT "/v1/sandboxes/$id/files?path=/tmp/big" --data-binary @"$T/big")
	expect_code "put" "$code" 201 || return 1
	out=$({ printf '%s\n' "$READ_ANSWER_PY"; cat <<'EOF'
import select, socket, sys
sock, sb, port, token = sys.argv[1:5]
path = "/v1/sandboxes/%s/files?path=/tmp/big" % sb
def ask(s, auth=""):
    s.settimeout(20)
    s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\n%s\r\n" % (path, auth)).encode())
    return s
u = socket.socket(socket.AF_UNIX)
u.connect(sock)
held = ask(u)
# its answer begun: the rest held by the daemon, unread
assert select.select([u], [], [], 20)[0], "no answer on the socket"
t = socket.create_connection(("127.0.0.1", int(port)))
code, _, body = read_answer(ask(t, "Authorization: Bearer %s\r\n" % token))
print("tcp:", code, body.decode()[:300])
code, _, body = read_answer(held)
print("held:", code, len(body))
EOF
	} | $PY - "$SOCK" "$id" "$port" "$(< "$T/token")")
	expect_contains "over TCP, while the socket's answer is unread" "$out" "tcp: 503"
	expect_contains "over TCP: why" "$out" "the daemon holds too many answers not read yet for this one (--answer-memory 8388608)"
	expect_not_contains "over TCP: not how many bytes" "$out" "bytes of answers"
	expect_contains "the socket's, read" "$out" "held: 200 6291456"
	stop_daemon
}

# Over TCP a token holder is a remote party: the answers it asks for and
# never reads, and the bodies it announces and sends slowly, are held by
# the daemon for it.  A peer (an address, an IPv6 /64) holds at most half
# of --answer-memory of either, so another peer is still answered; a
# body past that is not read (past 64 KiB) until there is room for it.  Before, one peer's 32 connections each sending 64 MiB
# less a byte held 2 GiB of the daemon for the 900 s of evhttp's timeout
# (the listener's 256 from 8 addresses, 16 GiB), and 3 unread answers of
# one peer had every other client's file a 503.
TCP_SHARE_PY='
import socket, sys, time
port, tok, sb, what = int(sys.argv[1]), open(sys.argv[2]).read().strip(), sys.argv[3], sys.argv[4]
def conn(src):
    s = socket.socket()
    # a small window: the answer stays in the daemon, not in the kernel
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.bind((src, 0))
    s.connect(("127.0.0.1", port))
    s.settimeout(10)
    return s
def head(method, path, extra=""):
    return ("%s %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n%s\r\n"
            % (method, path, tok, extra)).encode()
def answer(s):
    d = b""
    try:
        while b"\r\n\r\n" not in d:
            c = s.recv(4096)
            if not c:
                return "closed", b""
            d += c
    except socket.timeout:
        return "none", b""
    h, _, body = d.partition(b"\r\n\r\n")
    return h.split(b" ")[1].decode() + (" retry" if b"\r\nretry-after: 1" in h.lower() else ""), body
def put(src, name, n, send):
    s = conn(src)
    s.sendall(head("PUT", "/v1/sandboxes/%s/files?path=/tmp/%s" % (sb, name),
                   "Content-Length: %d\r\n" % n))
    s.sendall(b"x" * send)
    return s
files = "/v1/sandboxes/%s/files?path=/tmp/big" % sb
if what == "bodies":
    import threading
    mib = 1 << 20
    # a body as large as the half of the peer, alone: what its own connection
    # holds (its head) is not held against it
    s = put("127.0.0.1", "z", 8 * mib, 8 * mib)
    s.settimeout(10)
    print("alone, its half:", answer(s)[0])
    first = put("127.0.0.1", "a", 6 * mib, 6 * mib - 1)
    time.sleep(0.5)
    # the same peer, its next body: not read past a little while the first
    # holds its share, so neither written nor answered
    second = put("127.0.0.1", "b", 6 * mib, 0)
    sender = threading.Thread(target=second.sendall, args=(b"x" * (6 * mib),))
    sender.start()
    second.settimeout(3)
    print("same peer, while the first stalls:", answer(second)[0])
    s = put("127.0.0.2", "c", 2 * mib, 2 * mib)
    print("another peer:", answer(s)[0])
    first.sendall(b"x")
    print("the first:", answer(first)[0])
    second.settimeout(10)
    print("the second, after it:", answer(second)[0])
    sender.join(10)
else:
    held = []
    for i in range(8):
        s = conn("127.0.0.1")
        s.sendall(head("GET", files))
        time.sleep(0.3)
        code = answer(s)[0]
        if code != "200":
            break
        held.append(s)
    print("same peer:", len(held), "held, then", code)
    s = conn("127.0.0.2")
    s.sendall(head("GET", files))
    print("another peer:", answer(s)[0])
'

t_tcp_peer_bodies_bounded() {
	local id out port
	port=$(free_port)
	new_token > /dev/null
	start_daemon --listen "127.0.0.1:$port" --token-file "$T/token" --answer-memory 16M
	id=$(mksb) || return 1
	out=$($PY -c "$TCP_SHARE_PY" "$port" "$T/token" "$id" bodies 2>&1)
	expect_eq "bodies" "$out" "$(printf 'alone, its half: 201\nsame peer, while the first stalls: none\nanother peer: 201\nthe first: 201\nthe second, after it: 201')"
	stop_daemon
}

# The TCP peers together hold at most three quarters of --answer-memory
# (bodies arriving, answers unread): two peers, each within its half,
# announcing bodies and sending all but their last byte, held all of it,
# and a unix-socket client's 4 MiB upload was not read for as long as they
# liked (a TCP client's bodies judged against the total only).  Here the
# second peer's bodies wait instead, and are read once the first's end.
TCP_QUARTER_PY='
import socket, sys, threading, time
port, tok, sb, sock = int(sys.argv[1]), open(sys.argv[2]).read().strip(), sys.argv[3], sys.argv[4]
mib = 1 << 20
def answer(s):
    d = b""
    try:
        while b"\r\n\r\n" not in d:
            c = s.recv(4096)
            if not c:
                return "closed"
            d += c
    except socket.timeout:
        return "none"
    return d.split(b" ")[1].decode()
def put(src, name, n, send):
    s = socket.socket()
    s.bind((src, 0))
    s.connect(("127.0.0.1", port))
    s.settimeout(10)
    s.sendall(("PUT /v1/sandboxes/%s/files?path=/tmp/%s HTTP/1.1\r\nHost: x\r\n"
               "Authorization: Bearer %s\r\nContent-Length: %d\r\n\r\n"
               % (sb, name, tok, n)).encode() + b"x" * send)
    return s
a = [put("127.0.0.1", "a1", 6 * mib, 6 * mib - 1), put("127.0.0.1", "a2", 2 * mib, 2 * mib - 1)]
time.sleep(0.5)
b = [put("127.0.0.2", "b1", 6 * mib, 0), put("127.0.0.2", "b2", 2 * mib, 0)]
time.sleep(0.5)
u = socket.socket(socket.AF_UNIX)
u.connect(sock)
u.settimeout(5)
try:
    u.sendall(("PUT /v1/sandboxes/%s/files?path=/tmp/u HTTP/1.1\r\nHost: x\r\n"
               "Content-Length: %d\r\n\r\n" % (sb, 4 * mib)).encode() + b"u" * (4 * mib))
    print("the unix socket upload:", answer(u))
except socket.timeout:
    print("the unix socket upload: not read")
for s in a:
    s.sendall(b"x")
print("the first peer:", " ".join(answer(s) for s in a))
senders = [threading.Thread(target=s.sendall, args=(b"x" * n,)) for s, n in zip(b, (6 * mib, 2 * mib))]
for t in senders:
    t.start()
print("the second peer, after:", " ".join(answer(s) for s in b))
for t in senders:
    t.join(10)
'

t_tcp_peers_leave_the_socket_room() {
	local id out port
	port=$(free_port)
	new_token > /dev/null
	start_daemon --listen "127.0.0.1:$port" --token-file "$T/token" --answer-memory 16M
	id=$(mksb) || return 1
	out=$($PY -c "$TCP_QUARTER_PY" "$port" "$T/token" "$id" "$SOCK" 2>&1)
	expect_eq "bodies" "$out" "$(printf 'the unix socket upload: 201\nthe first peer: 201 201\nthe second peer, after: 201 201')"
	stop_daemon
}

t_tcp_peer_answers_share() {
	local id out port code
	port=$(free_port)
	new_token > /dev/null
	start_daemon --listen "127.0.0.1:$port" --token-file "$T/token" --answer-memory 24M
	id=$(mksb) || return 1
	head -c $((8 << 20)) /dev/urandom > "$T/big"
	code=$(api PUT "/v1/sandboxes/$id/files?path=/tmp/big" --data-binary @"$T/big")
	expect_code "put" "$code" 201 || return 1
	out=$($PY -c "$TCP_SHARE_PY" "$port" "$T/token" "$id" answers 2>&1)
	expect_eq "answers" "$out" "$(printf 'same peer: 1 held, then 503 retry\nanother peer: 200')"
	stop_daemon
}

# An events follow over TCP has no read timeout (it waits in silence by
# design): a follower that vanishes without a word (its packets dropped)
# is found by keepalive within --lease-timeout, and its connection closed,
# rather than held for ever against the listener's and the peer's caps.
t_follower_vanishes() {
	command -v ss > /dev/null || { skip "no ss(8)"; return; }
	in_vanish_netns follower_vanishes
}

follower_vanishes() {
	local ns=$1 port=$2 hport i
	inns() { ip netns exec "$ns" "$@"; }
	conn() { inns ss -Htn state established "( dport = :$hport )" | grep -c . || true; }
	inns $PY - "$port" "$T/token" "$T/follower" <<'EOF' &
import os, socket, sys, time
port, token, out = int(sys.argv[1]), open(sys.argv[2]).read().strip(), sys.argv[3]
s = socket.create_connection(("127.0.0.1", port), timeout=10)
s.sendall(("GET /v1/events?follow=1 HTTP/1.1\r\nHost: x\r\n"
           "Authorization: Bearer %s\r\n\r\n" % token).encode())
head = b""
while b"\r\n\r\n" not in head and len(head) < 65536:
    c = s.recv(4096)
    if not c:
        break
    head += c
with open(out + ".tmp", "w") as f:
    f.write("%d %s\n" % (s.getsockname()[1], head.split(b" ")[1].decode()))
os.rename(out + ".tmp", out)
time.sleep(60)
EOF
	HOLDER=$!
	holder_said "$T/follower"
	read -r hport code < "$T/follower" || { fail "no follow answered"; return 1; }
	expect_code "the follow" "$code" 200 || return 1
	expect_eq "the daemon's end is open" "$(conn)" 1 || return 1
	drop_from "$ns" "$hport" || return 1
	i=0
	while [ "$(conn)" != 0 ] && [ $i -lt 300 ]; do
		nap 0.1
		i=$((i + 1))
	done
	expect_eq "the daemon closed its end within 30 s" "$(conn)" 0 || return 1
	kill -0 "$HOLDER" 2>/dev/null || { fail "the follower ended (it should have stayed, silent)"; return 1; }
	stop_daemon
}

holder_vanishes() {
	local ns=$1 port=$2 id hport
	inns() { ip netns exec "$ns" "$@"; }
	# the holder: a lease, a sandbox bound to it, then 60 s of silence
	inns $PY - "$port" "$T/token" "$T/holder" <<'EOF' &
import json, os, socket, sys, time
port, token, out = int(sys.argv[1]), open(sys.argv[2]).read().strip(), sys.argv[3]
def ask(s, method, path, body):
    s.sendall(("%s %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
               "Content-Length: %d\r\n\r\n%s" % (method, path, token, len(body), body)).encode())
    data = b""
    while b"}" not in data.partition(b"\r\n\r\n")[2] and len(data) < 65536:
        c = s.recv(4096)
        if not c:
            break
        data += c
    body = data.partition(b"\r\n\r\n")[2]
    return json.loads(body[body.index(b"{"):body.rindex(b"}") + 1])
lease = socket.create_connection(("127.0.0.1", port), timeout=10)
lid = ask(lease, "POST", "/v1/leases", "")["lease"]
c = socket.create_connection(("127.0.0.1", port), timeout=10)
sid = ask(c, "POST", "/v1/sandboxes", json.dumps({"lease": lid}))["id"]
c.close()
with open(out + ".tmp", "w") as f:
    f.write("%s %d\n" % (sid, lease.getsockname()[1]))
os.rename(out + ".tmp", out)
time.sleep(60)
EOF
	HOLDER=$!
	holder_said "$T/holder"
	read -r id hport < "$T/holder" || { fail "the holder made no bound sandbox"; return 1; }
	expect_eq "its sandbox is there" "$(present "$id")" "$id" || return 1
	drop_from "$ns" "$hport" || return 1
	wait_gone "a vanished holder's sandbox" 30 present "$id" || return 1
	kill -0 "$HOLDER" 2>/dev/null || { fail "the holder ended (it should have stayed, silent)"; return 1; }
	code=$(api GET "/v1/events?sandbox=$id")
	expect_contains "why, in its events" "$(< "$T/body")" '"type":"lease.closed"' || return 1
	stop_daemon
}

# The gate's and the leases' numbers: each out of range is a usage error
# (2) naming the option and the value, before anything is made.
t_serve_limit_options_refused() {
	front_test
	local o v rc
	for o in max-connections max-connections-per-peer max-leases tls-handshake-rate \
		 header-timeout idle-timeout lease-timeout tty-idle-timeout; do
		for v in 0 1x 999999999999; do
			rc=0
			"$CORRAL" serve --socket "$T/s" --state-dir "$T/st" "--$o" "$v" \
				> "$T/out" 2>&1 || rc=$?
			expect_eq "--$o $v: exit status" "$rc" 2
			expect_contains "--$o $v: why" "$(< "$T/out")" "--$o: expected a number"
			expect_contains "--$o $v: the value" "$(< "$T/out")" "\"$v\""
		done
	done
	[ ! -e "$T/s" ] && [ ! -e "$T/st" ] || fail "a refused daemon made $(ls "$T")"
}

t_c_client() {
	[ -n "$CLIENT" ] || { skip "no serve_client given"; return 77; }
	start_daemon
	out=$(timeout 60 "$CLIENT" "$SOCK" 2>&1) || fail "serve_client: $out"
	expect_eq "client" "$out" "serve_client: ok"
	code=$(api GET /v1/sandboxes)
	expect_eq "it deleted its sandbox" "$(jq 'len(v["sandboxes"])')" 0
	expect_contains "its call is in the log" "$(< "$STATE/audit.jsonl")" '"call":"client-1"'
	stop_daemon
}

# ---- what a TCP client may hold: a sandbox's life, its idle freeze, how many

# tcpc ARG...: tcp_request with the token ($T/token)
tcpc() { tcp_request -H "Authorization: Bearer $(< "$T/token")" "$@"; }

# The user's TCP client gets a sandbox that lives and sleeps within
# --max-ttl and --max-idle-freeze, and keeps it alive; the attacker's asks
# for no TTL, a longer one, no idle freeze or a longer one, at create and
# at keepalive: each refused (403) naming the field, the bound and what
# was asked, before anything is built (an image, a fork, a lease's create
# too); the unix socket's client is not bounded.
t_tcp_client_life_bounded() {
	local port id code why n body
	port=$(free_port)
	new_token > /dev/null
	start_daemon --listen "127.0.0.1:$port" --token-file "$T/token" \
		--max-ttl 60 --max-idle-freeze 5
	U=http://127.0.0.1:$port
	# the user's: no TTL named gets the bound; one within it is kept
	code=$(tcpc -X POST "$U/v1/sandboxes")
	expect_code "a TCP create naming no TTL" "$code" 201
	id=$(jq 'v["id"]')
	expect_eq "its TTL: --max-ttl" "$(jq 'v["ttl_seconds"]')" 60.0
	expect_eq "an expiry" "$(jq 'str(bool(v["expires_at"]))')" True
	code=$(tcpc -X POST -d '{"ttl_seconds": 30, "idle_freeze_ms": 5000}' "$U/v1/sandboxes")
	expect_code "a TCP create within the bounds" "$code" 201
	expect_eq "its TTL" "$(jq 'v["ttl_seconds"]')" 30.0
	expect_eq "its idle freeze" "$(jq 'v["idle_freeze_ms"]')" 5000
	code=$(tcpc -X POST -d '{"ttl_seconds": 60}' "$U/v1/sandboxes/$id/keepalive")
	expect_code "a keepalive within --max-ttl" "$code" 200
	code=$(tcpc -X POST "$U/v1/sandboxes/$id/keepalive")
	expect_code "a keepalive of its own TTL" "$code" 200
	# the attacker's
	while IFS='|' read -r body why; do
		code=$(tcpc -X POST -d "$body" "$U/v1/sandboxes")
		expect_error "TCP create $body" "$code" 403 forbidden
		expect_contains "why ($body)" "$(jq 'v["detail"]')" "$why"
	done <<'EOF'
{"ttl_seconds": 0}|ttl_seconds: the daemon gives a TCP client's sandbox a TTL of at most 60 s (--max-ttl); it cannot be removed (got 0: none)
{"ttl_seconds": 61}|ttl_seconds: the daemon gives a TCP client's sandbox a TTL of at most 60 s (--max-ttl) (got 61)
{"ttl_seconds": 2592000}|(--max-ttl) (got 2592000)
{"idle_freeze_ms": 0}|idle_freeze_ms: the daemon freezes a TCP client's idle sandbox within 5000 ms (--max-idle-freeze 5 s); it cannot be turned off (got 0: never)
{"idle_freeze_ms": 5001}|idle_freeze_ms: the daemon freezes a TCP client's idle sandbox within 5000 ms (--max-idle-freeze 5 s) (got 5001)
{"idle_freeze_ms": 86400000, "ttl_seconds": 10}|(--max-idle-freeze 5 s) (got 86400000)
{"ttl_seconds": 0, "image": "no-such-image"}|(--max-ttl); it cannot be removed (got 0: none)
{"ttl_seconds": 0, "from_snapshot": "snap-nope"}|(--max-ttl); it cannot be removed (got 0: none)
{"idle_freeze_ms": 0, "lease": "ls-00000000000000000000000000000000"}|(got 0: never)
EOF
	for body in '{"ttl_seconds": 0}' '{"ttl_seconds": 61}' '{"ttl_seconds": 2592000}'; do
		code=$(tcpc -X POST -d "$body" "$U/v1/sandboxes/$id/keepalive")
		expect_error "TCP keepalive $body" "$code" 403 forbidden
		expect_contains "why ($body)" "$(jq 'v["detail"]')" "ttl_seconds: the daemon gives a TCP client's sandbox a TTL of at most 60 s (--max-ttl)"
	done
	expect_eq "the TTL unchanged by the refusals" "$(sbget "$id" 'v["ttl_seconds"]')" 60.0
	expect_eq "nothing built by the refusals" "$(nsandboxes)" 2
	# the unix socket's client: no TTL and no idle freeze, as before
	n=$(mksb '{"ttl_seconds": 0, "idle_freeze_ms": 0}')
	expect_eq "a unix client's sandbox without a TTL" "$(sbget "$n" 'v["ttl_seconds"]')" 0.0
	code=$(api POST "/v1/sandboxes/$id/keepalive" -d '{"ttl_seconds": 0}')
	expect_code "a unix client's keepalive to no TTL" "$code" 200
	# a TCP keepalive of a sandbox that has no TTL gives it no life
	code=$(tcpc -X POST "$U/v1/sandboxes/$n/keepalive")
	expect_code "a TCP keepalive of a sandbox without a TTL" "$code" 200
	expect_eq "still none" "$(jq 'v["ttl_seconds"]')" 0.0
	stop_daemon
}

# A TCP create naming no idle_freeze_ms gets the daemon's default (2 s)
# only within --max-idle-freeze: under --max-idle-freeze 1 it was 2000 ms,
# past the bound the option promises.
t_tcp_idle_freeze_default_bounded() {
	local port
	port=$(free_port)
	new_token > /dev/null
	start_daemon --listen "127.0.0.1:$port" --token-file "$T/token" --max-idle-freeze 1
	U=http://127.0.0.1:$port
	code=$(tcpc -X POST "$U/v1/sandboxes")
	expect_code "a TCP create naming no idle freeze" "$code" 201
	expect_eq "its idle freeze: --max-idle-freeze" "$(jq 'v["idle_freeze_ms"]')" 1000
	# the unix socket's client keeps the default
	n=$(mksb '{}')
	expect_eq "a unix client's idle freeze" "$(sbget "$n" 'v["idle_freeze_ms"]')" 2000
	stop_daemon
}

# count_peer_refused WHAT ARG...: a TCP create (curl ARG...) refused for
# this peer's count, naming the option
count_peer_refused() {
	local what=$1 code
	shift
	code=$(tcpc -X POST "$@" "$U/v1/sandboxes")
	expect_error "$what" "$code" 429 too_many_requests
	expect_contains "$what: why" "$(jq 'v["detail"]')" "2 sandboxes of this peer's (127.0.0.1) are alive, the limit (--max-sandboxes-per-peer)"
}

# One TCP peer holds at most --max-sandboxes-per-peer sandboxes: the
# attacker's next create is refused (429) and builds nothing, while another
# peer (127.0.0.2) and the unix socket's client still create; every way a
# sandbox goes (DELETE, its TTL, its lease's end) gives its place back.
t_tcp_sandboxes_per_peer() {
	local port code a b c d e other n lp
	port=$(free_port)
	new_token > /dev/null
	start_daemon --listen "127.0.0.1:$port" --token-file "$T/token" \
		--max-sandboxes-per-peer 2
	U=http://127.0.0.1:$port
	code=$(tcpc -X POST "$U/v1/sandboxes")
	expect_code "the peer's first" "$code" 201
	a=$(jq 'v["id"]')
	code=$(tcpc -X POST "$U/v1/sandboxes")
	expect_code "the peer's second" "$code" 201
	b=$(jq 'v["id"]')
	count_peer_refused "the peer's third"
	count_peer_refused "the peer's third, a narrower one" -d '{"policy": {"limits": {"pids": 8}}}'
	expect_eq "nothing built by the refusals" "$(nsandboxes)" 2
	# another peer, and the unix socket's client, are not this one's count
	code=$(tcpc --interface 127.0.0.2 -X POST "$U/v1/sandboxes")
	expect_code "another peer's" "$code" 201
	other=$(jq 'v["id"]')
	for n in 1 2 3; do
		mksb > /dev/null || break
	done
	expect_eq "all made" "$(nsandboxes)" 6
	count_peer_refused "the peer's third, others' made"
	# a DELETE gives its place back
	code=$(api DELETE "/v1/sandboxes/$a")
	expect_code "delete one" "$code" 200
	code=$(tcpc -X POST -d '{"ttl_seconds": 1}' "$U/v1/sandboxes")
	expect_code "one more after a delete" "$code" 201
	c=$(jq 'v["id"]')
	count_peer_refused "full again"
	# so does a TTL's end
	wait_gone "the 1 s TTL sandbox" 20 present "$c"
	open_lease hold "$port" "$T/token"
	lp=$LPID
	[ -n "$LEASE" ] || fail "no lease over TCP: $(cat "$T/lease" 2>/dev/null)"
	code=$(tcpc -X POST -d "{\"lease\": \"$LEASE\"}" "$U/v1/sandboxes")
	expect_code "one more after a TTL, under a lease" "$code" 201
	d=$(jq 'v["id"]')
	count_peer_refused "full again, a lease open"
	# and a lease's end
	LPID=$lp close_lease
	wait_gone "the lease's sandbox" 10 present "$d"
	code=$(tcpc -X POST "$U/v1/sandboxes")
	expect_code "one more after the lease closed" "$code" 201
	e=$(jq 'v["id"]')
	expect_eq "the peer's two and the other's" "$(present "$b")$(present "$e")$(present "$other")" "$b$e$other"
	stop_daemon
}

# A call's loopback connections, their buffers left unread, stay within
# the box's memory limit: a call has a cgroup of its own below the box's,
# and on cgroup v1 its sockets are charged only once it is told to
# (SOCKBUF_PY, lib.sh).
t_call_socket_buffers_in_memory_limit() {
	local id code n why
	start_daemon
	id=$(mksb '{"policy": {"limits": {"memory": "64M"}}}')
	cgroup_mode "$id" || { stop_daemon; skip "rlimits bound no kernel memory"; return; }
	code=$(ex "$id" "$($PY -c 'import json, sys
print(json.dumps({"tool_call_id": "fill", "argv": ["/usr/bin/python3", "-c", sys.argv[1]]}))' "$SOCKBUF_PY")")
	expect_code "exec" "$code" 200
	# cgroup v2 may end it as oom instead; either way not past the limit
	if [ "$(jq 'v["status"]')" != oom ]; then
		expect_eq "status" "$(jq 'v["status"]')" exited
		n=$(jq 'v["stdout"]' | awk '$1 == "queued" { print $2 }')
		[ -n "$n" ] && [ "$n" -le 72 ] || fail "queued $n MiB in a box of 64 MiB"
	fi
	why=$(jq 'v["reason"]')
	if [ "$(sbget "$id" 'v["limits"]')" = "cgroup v1" ] &&
	   [ -e /sys/fs/cgroup/memory/memory.kmem.tcp.limit_in_bytes ]; then
		# v1's TCP limit slows and kills nothing: the call's result says it
		expect_contains "the TCP limit said" "$why" \
			"exited with status 0; TCP buffer limit 64 MiB reached"
		expect_contains "and its event, the call's" \
			"$(grep '"type":"limit.hit"' "$STATE/audit.jsonl" | grep '"limit":"tcp"')" \
			'"call":"fill"'
		# the next call starts from what the box holds now: nothing
		code=$(ex "$id" '{"argv": ["/bin/true"]}')
		expect_code "exec" "$code" 200
		expect_eq "the next call's" "$(jq 'v["reason"]')" "exited with status 0"
	fi
	stop_daemon
}

# ---- the record lost: the audit log's file system full ---------------------

# The daemon's audit log cannot take lines (its file system full; here
# /dev/full, which any uid can use): a call's result says that its
# sandbox's record lost lines while it ran (events_lost, and the reason),
# a background process's record says it as well, and `corral exec` exits
# 125 for the command's 0.  They read "exited with status 0" alone, with
# a record that seemed whole.
t_audit_log_full_said_in_each_call() {
	local id rc=0 pid i lost
	mkdir -p "$T/state"
	ln -s /dev/full "$T/state/audit.jsonl"
	# open in the daemon from its start; gone before anything here reads
	# it (the harness greps the log for pids: /dev/full reads without end)
	start_daemon || { rm "$T/state/audit.jsonl"; return 1; }
	rm "$T/state/audit.jsonl"
	id=$(mksb) || return 1
	code=$(ex "$id" '{"argv": ["/bin/true"], "tool_call_id": "c1"}')
	expect_code "exec" "$code" 200
	expect_eq "the command's own end" "$(jq 'v["status"]') $(jq 'v["exit_code"]')" "exited 0"
	expect_contains "said" "$(jq 'v["reason"]')" "events of this sandbox could not be written to $STATE/audit.jsonl while the call ran: No space left on device"
	lost=$(jq 'v["events_lost"]')
	# exec.start and exec.end at least
	[ "${lost:-0}" -ge 2 ] || fail "events_lost: '$lost'"
	expect_contains "said, counted" "$(jq 'v["reason"]')" "exited with status 0; $lost events of this sandbox could not"
	code=$(api POST "/v1/sandboxes/$id/processes" -d '{"argv": ["/bin/true"], "tool_call_id": "bg-1"}')
	expect_code "background" "$code" 201
	pid=$(jq 'v["pid"]')
	i=0
	while [ $i -lt 200 ]; do
		api GET "/v1/sandboxes/$id/processes/$pid" > /dev/null
		[ "$(jq 'v["state"]')" = exited ] && break
		nap 0.05
		i=$((i + 1))
	done
	expect_eq "background: ended" "$(jq 'v["state"]') $(jq 'v["result"]["exit_code"]')" "exited 0"
	expect_contains "background: said" "$(jq 'v["result"]["reason"]')" \
		"events of this sandbox could not be written to $STATE/audit.jsonl while the call ran"
	lost=$(jq 'v["result"]["events_lost"]')
	[ "${lost:-0}" -ge 2 ] || fail "background: events_lost: '$lost'"
	"$CORRAL" exec --socket "$SOCK" "$id" -- /bin/true > /dev/null 2> "$T/e" < /dev/null || rc=$?
	expect_eq "corral exec: exit" "$rc" 125
	expect_contains "corral exec: said" "$(< "$T/e")" "events of this sandbox could not be written to"
	rc=0
	"$CORRAL" exec --socket "$SOCK" "$id" -- /bin/sh -c 'exit 3' > /dev/null 2>&1 < /dev/null || rc=$?
	expect_eq "corral exec: the command's own failure" "$rc" 3
	stop_daemon
}

# The attacker's: a sandbox fills the file system of the daemon's audit
# log through its writable bind, is denied 40 times, and frees the space
# (fill, probe, free: its denials were in no line, and nothing said so).
# The record says it has a gap, and where: before any line after it, a
# log.gap line names the sandbox, how many of its lines were lost, their
# seq and types, the calls they named, between when; the denials written
# and those lost count all 40; the call's result and its exec.end say it;
# `corral audit verify` says the gap.
LOG_GAP_PY='
import json, sys
mine, torn = [], 0
for l in open(sys.argv[1]):
    try:
        o = json.loads(l)
    except ValueError:
        torn += 1	# a write cut short by the full disk: its own line
        continue
    if o.get("sandbox") == sys.argv[2]:
        mine.append(o)
lost = int(sys.argv[3])
gaps = [i for i, o in enumerate(mine) if o["type"] == "log.gap"]
assert len(gaps) == 1, "log.gap lines: %d" % len(gaps)
g = mine[gaps[0]]
assert g["lost"] == lost and g["calls"] == ["probe"], g
assert g["error"] == sys.argv[4], g
assert g["denied"] == ["syscall unshare"], g
denied = sum(1 for o in mine if o["type"] == "syscall.denied")
assert g["types"].get("syscall.denied", 0) > 0, g["types"]
assert denied + g["types"]["syscall.denied"] == 40, (denied, g["types"])
end = [i for i, o in enumerate(mine) if o["type"] == "exec.end" and o["call"] == "probe"]
if sys.argv[5] == "written":	# the space freed before the call ended
    assert end and end[0] > gaps[0], "the call ended before the gap was said"
    said = mine[end[0]]["reason"]
    assert "%d event" % lost in said and "of this sandbox could not be written" in said, said
else:
    assert not end and g["types"]["exec.end"] == 1, g["types"]
seqs = {o["seq"] for o in mine if "seq" in o}
seqs |= set(range(g["seq_first"], g["seq_last"] + 1))
assert seqs == set(range(1, max(seqs) + 1)), "seq not whole: %s" % sorted(seqs)
assert g["since"] <= g["until"] <= g["time"], g
print(g["reason"])
'
t_audit_log_gap_said() {
	[ "$ME" = 0 ] || { skip "a small tmpfs needs root (this lane has t_audit_log_gap_said_past_a_file_size_limit)"; return 77; }
	local id lost reason
	mkdir "$T/small"
	STATE=$T/small/state
	# the tmpfs in the daemon's own mount namespace, gone with it
	printf '%s\n' '#!/bin/sh' \
		"mount -t tmpfs -o size=256k,mode=755 corral-test '$T/small' || exit 9" \
		"mkdir -m 777 '$T/small/rw' || exit 9" 'exec "$@"' > "$T/small.sh"
	chmod 755 "$T/small.sh"
	DAEMON_WRAP="unshare --mount --propagation private $T/small.sh" start_daemon
	id=$(mksb "{\"idle_freeze_ms\": 0, \"policy\": {\"filesystem\": {\"rw\": [\"$T/small/rw:/data\"]}, \"events\": {\"verbatim\": 1000}}}") || return 1
	code=$(ex "$id" "$(jbody tool_call_id probe command 'head -c 300000 /dev/zero > /data/fill 2>/dev/null
		for i in $(seq 40); do unshare -U true 2>/dev/null; done
		rm /data/fill; exit 0')")
	expect_code "exec" "$code" 200
	reason=$(jq 'v["reason"]')
	expect_eq "the command's own end" "$(jq 'v["exit_code"]')" 0
	expect_contains "the denials" "$reason" "denied: syscall unshare; 40 denials"
	expect_contains "the gap said" "$reason" "events of this sandbox could not be written to"
	lost=$(jq 'v["events_lost"]')
	[ "${lost:-0}" -gt 0 ] || fail "no line lost: the fill left room ($reason)"
	expect_contains "the gap" "$reason" "$lost events of this sandbox could not be written to $STATE/audit.jsonl while the call ran: No space left on device"
	code=$(api GET /v1/health)
	expect_eq "healthy again" "$(jq 'v["status"]')" ok
	code=$(ex "$id" '{"argv": ["/bin/true"]}')
	expect_eq "the next call: whole" "$(jq 'v["events_lost"]') $(jq 'v["reason"]')" "0 exited with status 0"
	# the log as the daemon's mount namespace has it
	cp "/proc/$DPID/root$STATE/audit.jsonl" "$T/audit.jsonl" || fail "no log"
	"$PY" -c "$LOG_GAP_PY" "$T/audit.jsonl" "$id" "$lost" "No space left on device" \
		written > "$T/gap" 2>&1 ||
		fail "the record: $(tail -3 "$T/gap")"
	expect_contains "the gap line says" "$(< "$T/gap")" "event lines of this sandbox"
	"$CORRAL" audit verify "$T/audit.jsonl" > "$T/verify" 2>&1 || fail "audit verify: $(< "$T/verify")"
	expect_contains "the verifier" "$(< "$T/verify")" "1 gap said (log.gap, the first: line"
	stop_daemon
}

# The same for any uid: the log's file size limit (RLIMIT_FSIZE, set on the
# running daemon by prlimit; corral ignores SIGXFSZ) stands for the full
# disk, then is lifted.  The call ends inside the gap: its exec.end is
# among the lines lost, and the next call's lines come after the gap's.
# Another sandbox's call in the gap has its own count and its own line.
t_audit_log_gap_said_past_a_file_size_limit() {
	command -v prlimit > /dev/null || { skip "no prlimit"; return 77; }
	local id lost reason
	start_daemon
	local other
	id=$(mksb '{"idle_freeze_ms": 0, "policy": {"events": {"verbatim": 1000}}}') || return 1
	other=$(mksb '{"idle_freeze_ms": 0}') || return 1
	sbsh "$id" true > /dev/null || return 1
	prlimit --pid "$DPID" --fsize="$(stat -c %s "$STATE/audit.jsonl"):unlimited" ||
		{ fail "prlimit --fsize on the daemon"; return 1; }
	# another sandbox's call in the gap: its own line, its own count
	code=$(ex "$other" '{"argv": ["/bin/true"], "tool_call_id": "beside"}')
	expect_eq "the other sandbox's call" "$(jq 'v["events_lost"]')" 2
	code=$(ex "$id" "$(jbody tool_call_id probe command 'for i in $(seq 40); do unshare -U true 2>/dev/null; done; exit 0')")
	prlimit --pid "$DPID" --fsize=unlimited:unlimited || fail "prlimit: the limit lifted"
	expect_code "exec" "$code" 200
	reason=$(jq 'v["reason"]')
	expect_eq "the command's own end" "$(jq 'v["exit_code"]')" 0
	expect_contains "the denials" "$reason" "denied: syscall unshare; 40 denials"
	expect_contains "the gap" "$reason" "42 events of this sandbox could not be written to $STATE/audit.jsonl while the call ran: File too large"
	lost=$(jq 'v["events_lost"]')
	# exec.start, 40 denials, exec.end
	expect_eq "lost" "$lost" 42
	code=$(ex "$id" '{"argv": ["/bin/true"], "tool_call_id": "after"}')
	expect_eq "the next call: whole" "$(jq 'v["events_lost"]') $(jq 'v["reason"]')" "0 exited with status 0"
	"$PY" -c "$LOG_GAP_PY" "$STATE/audit.jsonl" "$id" "$lost" "File too large" lost \
		> "$T/gap" 2>&1 || fail "the record: $(tail -3 "$T/gap")"
	expect_contains "the gap line says" "$(< "$T/gap")" "42 event lines of this sandbox (seq"
	expect_contains "the other sandbox's gap" \
		"$(grep '"type":"log.gap"' "$STATE/audit.jsonl" | grep "\"sandbox\":\"$other\"")" \
		'"lost":2,"since"'
	expect_contains "the other sandbox's call named" \
		"$(grep '"type":"log.gap"' "$STATE/audit.jsonl" | grep "\"sandbox\":\"$other\"")" \
		'"calls":["beside"]'
	"$CORRAL" audit verify "$STATE/audit.jsonl" > "$T/verify" 2>&1 || fail "audit verify: $(< "$T/verify")"
	expect_contains "the verifier" "$(< "$T/verify")" "2 gaps said (log.gap, the first: line"
	expect_contains "the verifier's count" "$(< "$T/verify")" "): 44 event lines could not be written"
	stop_daemon
}

START=$(date +%s)
run_tests "$@"
echo "serve ($(id -un 2>/dev/null || id -u)): $PASS passed, $FAIL failed, $SKIP skipped in $(( $(date +%s) - START )) s"
[ -n "$FAILED_NAMES" ] && echo "failed:$FAILED_NAMES"
[ "$FAIL" -eq 0 ]
