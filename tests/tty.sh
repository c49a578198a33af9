#!/bin/bash
# tty.sh - terminals through the daemon: `corral exec -t` and the API's
# terminal protocol (an exec upgraded to frames, docs/API.md "Terminals").
# A shell inside gets a pty of the sandbox's own devpts, job control, the
# window's size and its changes, ^C for its foreground job; the caller's
# terminal comes back as it was.  And what a hostile client tries: an
# upgrade without the token, frames too large or of no known kind, going
# away mid-session (hang-up inside, nothing left running, the daemon still
# answers).
#
#   tests/tty.sh CORRAL [TEST...]
#
# Runs as whoever calls it (root or not).  One daemon (unix socket and
# loopback TCP with a token) serves every test, a second one (loopback TLS,
# a test CA's certificate) the t_exec_tty_tls* tests; each daemon has one
# sandbox the tests share.  t_tty_idle_timeout and t_tty_client_stops_reading
# start one each of their own (own_daemon), with a short --tty-idle-timeout.
# Terminals come from tests/ptyrun.py and
# tests/ttyapi.py, which bound every wait.
set -u
CORRAL=$(readlink -f "$1")
shift 1
HERE=$(cd "$(dirname "$0")" && pwd)
TEST_TMP=$(mktemp -d "${TMPDIR:-/tmp}/corral-tty.XXXXXX")
chmod 755 "$TEST_TMP"
. "$HERE/lib.sh"

PY=/usr/bin/python3
D="$TEST_TMP/daemon"
SOCK="$D/sock"
DPID=
TPID=

stop_daemon() {	# stop_daemon PID: SIGTERM, 10 s, then SIGKILL
	[ -n "$1" ] || return 0
	kill -TERM "$1" 2>/dev/null
	for _ in $(seq 1 200); do
		kill -0 "$1" 2>/dev/null || break
		sleep 0.05
	done
	kill -KILL "$1" 2>/dev/null
	wait "$1" 2>/dev/null
}

stop() {
	stop_daemon "$DPID"
	stop_daemon "$TPID"
	rm -rf "$TEST_TMP"
}
trap stop EXIT

# await_daemon SOCK PID: until the daemon PID answers on SOCK, 30 s at
# most, or it has ended.  Not 5 s: a daemon that took 6 s to start (a
# wrapper's sleep standing for a loaded host) failed the whole suite,
# "the daemon did not come up", and the TLS one every tls test.
await_daemon() {
	for _ in $(seq 1 600); do
		[ -S "$1" ] && curl -s -m 5 --unix-socket "$1" http://corral/v1/health > /dev/null && return 0
		kill -0 "$2" 2> /dev/null || return 1
		sleep 0.05
	done
	return 1
}

mkdir -p "$D"
# two free ports, the daemons' (lib.sh's free_port, below the ephemeral
# range: another lane's connect() never takes them)
PORT=$(free_port)
for _ in 1 2 3 4 5; do
	TPORT=$(free_port)
	[ "$TPORT" != "$PORT" ] && break
done
head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$D/token"
chmod 600 "$D/token"
"$CORRAL" serve --socket "$SOCK" --state-dir "$D/state" --listen "127.0.0.1:$PORT" \
	--token-file "$D/token" > "$D/log" 2>&1 < /dev/null &
DPID=$!
await_daemon "$SOCK" "$DPID"
# every test needs it: without it, one failure that says why, not a
# page of tracebacks
if ! curl -s -m 5 --unix-socket "$SOCK" http://corral/v1/health > /dev/null; then
	echo "not ok - the daemon did not come up (port $PORT); its log:"
	sed 's/^/    /' "$D/log"
	echo "0 passed, 1 failed"
	exit 1
fi

api() {	# api METHOD PATH [BODY]
	curl -s -m 20 --unix-socket "$SOCK" -X "$1" "http://corral$2" ${3:+-d "$3"}
}

# One sandbox for every test (each names its own files and processes).
BOX=$(api POST /v1/sandboxes '{}' | json id)

# The second daemon: the API over TLS on loopback, its certificate from a
# CA of the test's own (lib.sh's test_ca); the clients reach it as
# `corral ... --url https://127.0.0.1:TPORT --ca-file ca.pem`.
TD="$TEST_TMP/tls"
mkdir -p "$TD"
TURL=https://127.0.0.1:$TPORT
TLS_CA=$TD/ca.pem
TBOX=
if test_ca "$TD" "IP:127.0.0.1"; then
	chmod 600 "$TD/srv.key"
	head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$TD/token"
	chmod 600 "$TD/token"
	"$CORRAL" serve --socket "$TD/sock" --state-dir "$TD/state" \
		--listen "127.0.0.1:$TPORT" --token-file "$TD/token" \
		--tls-cert "$TD/srv.pem" --tls-key "$TD/srv.key" > "$TD/log" 2>&1 < /dev/null &
	TPID=$!
	await_daemon "$TD/sock" "$TPID"
	# made over TLS too: the tests' first call through it
	TBOX=$(timeout -k 5 30 "$CORRAL" create --url "$TURL" --token-file "$TD/token" \
		--ca-file "$TLS_CA" 2>> "$TD/log")
fi

# tls_needs: the TLS daemon and its sandbox are there (else why not)
tls_needs() {
	[ -n "$TBOX" ] && return 0
	fail "no sandbox on the TLS daemon: $(tail -3 "$TD/log" 2>/dev/null)"
}

inside() {	# inside BOX SHELL-TEXT: its stdout (TBOX's through its daemon, over TLS)
	if [ -n "$TBOX" ] && [ "$1" = "$TBOX" ]; then
		# bounded: over https a call's answer has been seen to stall
		# (about 1 in 500), and a test must end
		timeout -k 5 30 "$CORRAL" exec --url "$TURL" --token-file "$TD/token" \
			--ca-file "$TLS_CA" "$1" -c "$2"
		return
	fi
	"$CORRAL" exec --socket "$SOCK" "$1" -c "$2"
}

# fields KEY... < json: each (dotted) key's value on a line of its own,
# as json.dumps has it (a string bare), null for one missing.  By jget -n,
# one a key: a Python here was 25-60 ms of CPU a call, some twenty a lane.
fields() {
	local doc="" k
	IFS= read -r -d '' doc || :
	for k; do
		"$JGET" -n "$k" <<< "$doc" 2>/dev/null || echo null
	done
}

healthy() {
	expect_eq "the daemon answers" "$(curl -s -m 5 --unix-socket "$SOCK" -o /dev/null -w '%{http_code}' http://corral/v1/health)" 200
}

# wait_inside BOX SHELL-TEXT WANT: until its output is WANT (10 s at most)
wait_inside() {
	local got
	for _ in $(seq 1 100); do
		# not there yet is an answer too (under set -e, a failing
		# command would end the test)
		got=$(inside "$1" "$2") || true
		[ "$got" = "$3" ] && return 0
		sleep 0.1
	done
	fail "inside $1, '$2' gave '$got', want '$3'"
}

# own_daemon DIR SERVE_ARG...: a daemon of the test's own, on DIR/sock,
# stopped when the test ends, with one sandbox made in it (OWN_BOX);
# own_tty drives a terminal there as tty_api does on the shared one.
own_daemon() {
	local dir=$1
	shift
	OWN_PID=
	OWN_SOCK=$dir/sock
	trap 'stop_daemon "$OWN_PID" || true' EXIT
	mkdir -p "$dir"
	"$CORRAL" serve --socket "$dir/sock" --state-dir "$dir/state" "$@" \
		> "$dir/log" 2>&1 < /dev/null &
	OWN_PID=$!
	await_daemon "$dir/sock" "$OWN_PID"
	OWN_BOX=$(curl -s -m 20 --unix-socket "$dir/sock" -X POST http://corral/v1/sandboxes -d '{}' | json id)
	[ -n "$OWN_BOX" ] || fail "no sandbox: $(tail -3 "$dir/log")"
}

tty_api() {	# tty_api BOX STEP... -- ARGV...: ttyapi.py's JSON
	$PY "$HERE/ttyapi.py" "$SOCK" "$@"
}

own_tty() {	# own_tty STEP... -- ARGV...: ttyapi.py's JSON, in OWN_BOX
	$PY "$HERE/ttyapi.py" "$OWN_SOCK" "$OWN_BOX" "$@"
}

# A shell through corral exec -t: job control, its pty, sizes, ^C, ^Z, exit.
t_exec_tty_shell() {
	box=$BOX
	# markers the shell computes: what is typed is echoed, and must not
	# match; exit twice: dash refuses the first while a job is stopped
	out=$($PY "$HERE/ptyrun.py" 'expect:$ ' 'snap' \
		'send:tty; stty size; echo M$((1+1))\r' 'expect:M2' \
		'resize:30,91' 'send:stty size; echo M$((2+1))\r' 'expect:M3' \
		'send:python3 -c \x27import time; print("P"+"Y"); time.sleep(101)\x27\r' \
		'expect:PY' 'send:\x03' 'again:KeyboardInterrupt' \
		'send:echo Z$((1+1)); sleep 102\r' 'expect:Z2' 'sleep:0.3' 'send:\x1a' \
		'expect:Stopped' 'send:kill -9 %1; echo K$((1+1))\r' 'expect:K2' \
		'send:exit 7\r' 'sleep:0.3' 'send:exit 7\r' \
		-- "$CORRAL" exec -t --socket "$SOCK" "$box" -- /bin/sh -i)
	# the output as JSON text: what is looked for has nothing to escape
	o=$out
	expect_contains "tty names a pty of the sandbox's devpts" "$o" "/dev/pts/"
	expect_contains "the first size" "$o" "24 80"
	expect_contains "the size after SIGWINCH" "$o" "30 91"
	expect_contains "^C reached the foreground job" "$o" "KeyboardInterrupt"
	# Once in CI (ASan, both lanes busy) a first ^C never reached python,
	# and a later ^Z did; not seen outside corral in 8 runs, cause not yet
	# found.  A second ^C is sent then, and said, not hidden.
	[ "$(printf '%s' "$out" | fields resent)" = 0 ] ||
		echo "note: t_exec_tty_shell: the first ^C was lost; the second reached the job" \
			>> "$TEST_TMP/notes"
	expect_contains "^Z stopped the foreground job" "$o" "Stopped"
	mapfile -t f < <(printf '%s' "$out" | fields exit raw_during termios_same size_after)
	expect_eq "corral exec -t exits as the shell did" "${f[0]}" 7
	expect_eq "raw while it ran" "${f[1]}" true
	expect_eq "the terminal restored" "${f[2]}" true
	expect_eq "the window size left alone" "${f[3]}" "[30, 91]"
}

# The API side: tty without an upgrade is a pty too, output in the result.
t_api_tty_plain() {
	box=$BOX
	res=$(api POST "/v1/sandboxes/$box/exec" '{"argv": ["/bin/sh", "-c", "tty; stty size; test -t 0 && echo in-tty"], "tty": true, "rows": 33, "cols": 101}')
	o=$res
	expect_contains "a pty" "$o" "/dev/pts/"
	expect_contains "its first size" "$o" "33 101"
	expect_contains "stdin is the terminal" "$o" "in-tty"
	code=$(curl -s -m 10 --unix-socket "$SOCK" -o /dev/null -w '%{http_code}' \
		-X POST "http://corral/v1/sandboxes/$box/processes" -d '{"argv": ["true"], "tty": true}')
	expect_eq "tty for a background process" "$code" 400
	code=$(curl -s -m 10 --unix-socket "$SOCK" -o /dev/null -w '%{http_code}' \
		-X POST "http://corral/v1/sandboxes/$box/exec" -d '{"argv": ["true"], "rows": 3}')
	expect_eq "rows without tty" "$code" 400
}

# The window size from the first frame and a later one, seen by stty.
t_api_sizes_and_exit() {
	box=$BOX
	out=$(tty_api "$box" --size 40,120 'expect:$ ' 'send:stty size\r' 'expect:40 120' \
		'resize:50,132' 'send:stty size; exit 3\r' -- /bin/sh -i)
	expect_contains "sizes" "$out" "50 132"
	mapfile -t f < <(printf '%s' "$out" | fields result.exit_code eof)
	expect_eq "the exit frame's status" "${f[0]}" 3
	expect_eq "the daemon closed after it" "${f[1]}" true
}

# Attacker (a client): after the last frame the daemon waits for the
# client's close, reading what it still sends (api_tty.c's linger); a
# client that never closes, and keeps typing, is closed 2 s later all
# the same: its typing then meets a closed connection (EPIPE or a reset),
# and the daemon's end came as an EOF first.
t_tty_linger_bounded() {
	local out
	out=$($PY - "127.0.0.1:$PORT" "$BOX" "$(cat "$D/token")" <<'PYEND'
import json, socket, struct, sys, time
host, port = sys.argv[1].rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=10)
body = json.dumps({"argv": ["/bin/sh", "-c", "exit 5"], "tty": True}).encode()
s.sendall(("POST /v1/sandboxes/%s/exec HTTP/1.1\r\nHost: corral\r\n"
           "Connection: Upgrade\r\nUpgrade: corral-tty\r\nAuthorization: Bearer %s\r\n"
           "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n"
           % (sys.argv[2], sys.argv[3], len(body))).encode() + body)
buf, eof, t0 = b"", False, time.time()
while not eof and time.time() - t0 < 20:
    d = s.recv(65536)
    eof = not d
    buf += d
res = "x" if b"\r\n\r\nx" in buf or b"x\0\0\0" in buf else "no x"
# typing after the end, 0.2 s apart for 5 s at most, till the daemon is gone
t1, gone = time.time(), None
while gone is None and time.time() - t1 < 5:
    try:
        s.sendall(b"i\0\0\0\x01\x04")
    except (BrokenPipeError, ConnectionResetError):
        gone = time.time() - t1
    time.sleep(0.2)
print(res, "eof" if eof else "no-eof", "gone" if gone is not None else "kept",
      "%.1f" % (gone or 0))
PYEND
)
	read -r -a f <<< "$out"
	expect_eq "the exit frame came" "${f[0]}" x
	expect_eq "then the daemon's end, at once" "${f[1]}" eof
	expect_eq "a client that does not close is closed all the same" "${f[2]}" gone
}

# Over TCP without the token: 401, no terminal.
t_upgrade_needs_token() {
	box=$BOX
	out=$($PY "$HERE/ttyapi.py" "127.0.0.1:$PORT" "$box" 'expect:x' -- /bin/sh -c 'echo ran > /tmp/ran')
	expect_contains "no token" "$out" '"status": 401,'
	expect_eq "nothing ran" "$(inside "$box" 'cat /tmp/ran 2>/dev/null || echo none')" none
	out=$($PY "$HERE/ttyapi.py" "127.0.0.1:$PORT" "$box" --token "$(cat "$D/token")" \
		'expect:$ ' 'send:exit 4\r' -- /bin/sh -i)
	expect_contains "with the token" "$out" '"exit_code": 4,'
}

# A frame longer than the protocol allows, and one of no known kind: the
# session ends with an error frame, the call is killed, the daemon answers.
t_bad_frames() {
	box=$BOX
	out=$(tty_api "$box" 'expect:ready' 'raw:69ffffffff41414141' 'sleep:0.2' \
		-- /bin/sh -c 'echo ready; exec sleep 999')
	expect_contains "a 4 GiB frame" "$out" '"result": null, "error": {"error": "too_large"'
	out=$(tty_api "$box" 'expect:ready' "raw:5a00000010$(head -c 2000 /dev/urandom | od -An -tx1 | tr -d ' \n')" \
		-- /bin/sh -c 'echo ready; exec sleep 999')
	expect_contains "garbage" "$out" '"error": {"error": "bad_request"'
	out=$(tty_api "$box" 'expect:ready' 'raw:7700000003010203' -- /bin/sh -c 'echo ready; exec sleep 999')
	expect_contains "a short window size" "$out" '"error": {"error": "bad_request"'
	healthy
	wait_inside "$box" 'ps -e -o args= | grep -c "^sleep 999$" || true' 0
}

# A client that sends 100000 window sizes at once, 0x0 and 65535x65535
# among them: each is a size, the session goes on with the last one, and
# the daemon answers.
t_resize_flood() {
	box=$BOX
	out=$(tty_api "$box" 'expect:ready' 'resizes:100000' 'sleep:0.5' 'send:stty size\r' \
		'expect:40 100' 'send:exit\r' -- /bin/sh -i -c 'echo ready; exec /bin/sh -i')
	expect_contains "the last size holds" "$out" "40 100"
	expect_contains "it ends as asked" "$out" '"exit_code": 0'
	healthy
}

# A program that writes without end to a client that reads nothing: the
# call's output waits for the client (the daemon holds at most its queue,
# not what the program wrote: the program's writes block), and when the
# client goes away the program is gone too.  Without the hold the daemon
# read on: it grew by 78 MB in 3 s.
t_client_never_reads() {
	box=$BOX
	local written
	tty_api "$box" 'expect:ready' 'stall:4' 'close' -- /usr/bin/python3 -c '
import os
print("ready", flush=True)
n, b = 0, b"0123456789abcdef" * 4096
while True:
    os.write(1, b)
    n += len(b)
    with open("/tmp/stalled-written", "w") as f:
        f.write(str(n))' > "$T/out"
	healthy
	wait_inside "$box" 'ps -e -o args= | grep -c "^/usr/bin/python3 -c" || true' 0
	written=$(inside "$box" 'cat /tmp/stalled-written')
	[ "${written:-0}" -gt 0 ] || fail "the program wrote nothing: $(cat "$T/out")"
	[ "$written" -lt $((16 << 20)) ] ||
		fail "the program wrote $written bytes to a client that read nothing"
}


# Input larger than the pty takes at once waits for it; nothing is lost.
t_input_backpressure() {
	box=$BOX
	# the command waits for the last byte: done with the 300000 first, it
	# ended the session before the client's newline went (ci38d: EPIPE)
	out=$(tty_api "$box" 'expect:ready' 'fill:300000' 'send:\n' \
		-- /bin/sh -c 'stty -icanon -echo; echo ready; sleep 1; head -c 300000 | wc -c; head -c 1 > /dev/null')
	expect_contains "all of it arrived" "$out" "300000"
	healthy
}

# The client goes away: SIGHUP inside, and what ignores it is killed.
t_disconnect_hangs_up() {
	box=$BOX
	tty_api "$box" 'expect:ready' 'close' -- /bin/sh -c \
		'trap "echo hup > /tmp/hup; exit 0" HUP; echo ready; while :; do sleep 0.1; done' > /dev/null
	wait_inside "$box" 'cat /tmp/hup 2>/dev/null' hup
	tty_api "$box" 'expect:ready' 'close' -- /bin/sh -c \
		'trap "" HUP; echo ready; exec sleep 1000' > /dev/null
	healthy
	wait_inside "$box" 'ps -e -o args= | grep -c "^sleep 1000$" || true' 0
	# a job of an interactive shell, in a group of its own, deaf to SIGHUP:
	# gone with the call's cgroup (without cgroups only the group is named)
	case $(api GET "/v1/sandboxes/$box") in
	*'"limits":"cgroup'*) ;;
	*) return 0 ;;
	esac
	tty_api "$box" 'expect:$ ' 'send:(trap "" HUP; exec sleep 1002) \x26 echo B$((1+1))\r' \
		'expect:B2' 'close' -- /bin/sh -i > /dev/null
	wait_inside "$box" 'ps -e -o args= | grep -c "^sleep 1002$" || true' 0
}

# A client that takes none of the output queued for it for
# --tty-idle-timeout seconds is closed, and its call killed, as one that
# went away: a timed-out session waits for its client to take its output,
# and so held the connection, the call and their fds for as long as the
# client kept it open without reading.  One that pauses for less, again and
# again, keeps its session to the end and gets its last frame.  A daemon
# of its own (1 s); the two sessions at once.
t_tty_client_stops_reading() {
	LAST_D=$TEST_TMP/last
	own_daemon "$LAST_D" --tty-idle-timeout 1
	box=$OWN_BOX
	# 2 MB: more than the daemon queues (1 MiB) and the socket holds, so a client
	# that stops reading stops the writes; then a quiet end, timed out
	local cmd='echo ready; head -c 2000000 /dev/zero; echo done; exec sleep 999'
	own_tty 'expect:ready' 'stall:4' \
		-- /bin/sh -c "$cmd" > "$LAST_D/gone" &
	g=$!
	set -- 'expect:ready'
	for _ in $(seq 1 6); do
		set -- "$@" 'stall:0.4' 'sleep:0.05'
	done
	own_tty "$@" 'expect:done' \
		-- /bin/sh -c "$cmd" > "$LAST_D/slow" &
	s=$!
	wait "$g" "$s" || true
	mapfile -t f < <(fields result eof < "$LAST_D/gone")
	expect_eq "a client that stopped reading: no last frame" "${f[0]}" null
	expect_eq "its connection closed" "${f[1]}" true
	mapfile -t f < <(fields result.status eof < "$LAST_D/slow")
	expect_eq "a client that paused: its session to its end" "${f[0]}" timeout
	expect_eq "then the close" "${f[1]}" true
	expect_eq "nothing of either runs" "$("$CORRAL" exec --socket "$LAST_D/sock" "$box" -c \
		'ps -e -o args= | grep -c "^sleep 999$" || true')" 0
}

# --tty-idle-timeout: a session neither side uses ends as a timeout (its
# client gets the result, the record a "timeout" event, nothing is left
# running); one kept busy by its client's frames, by its output, or by its
# command's work (CPU), does not.  A daemon of its own with a 2 s bound;
# the four sessions at once.
t_tty_idle_timeout() {
	IDLE_D=$TEST_TMP/idle
	own_daemon "$IDLE_D" --tty-idle-timeout 2
	box=$OWN_BOX
	own_tty 'expect:ready' \
		-- /bin/sh -c 'echo ready; exec sleep 999' > "$IDLE_D/quiet" &
	q=$!
	# a frame every 0.25 s for 3 s (a window size: no output comes of it)
	set -- 'expect:ready'
	for _ in $(seq 1 12); do
		set -- "$@" 'sleep:0.25' 'resize:24,80'
	done
	own_tty "$@" 'send:x\n' \
		-- /bin/sh -c 'echo ready; read x; exit 6' > "$IDLE_D/typing" &
	t=$!
	own_tty \
		-- /bin/sh -c 'for i in 1 2 3 4 5 6 7 8 9 10 11 12; do echo t; sleep 0.25; done; exit 5' \
		> "$IDLE_D/talking" &
	o=$!
	# silent, but at work: a build that prints nothing.  It spends 0.4 s
	# of CPU (40 ticks of its own, four times the daemon's 100 ms of
	# work), then waits, quiet, to its 3 s.  At the daemon's look, 2 s in,
	# it has used all the CPU it got, as the endless loop it replaces had
	# (that spun 3 s of CPU a lane), up to those 0.4 s.
	work='while [ "$(cut -d" " -f14 /proc/$$/stat)" -lt 40 ]; do i=0; while [ $i -lt 20000 ]; do i=$((i + 1)); done; done; exec sleep 9'
	own_tty \
		-- /bin/sh -c "timeout 3 sh -c '$work'; exit 7" > "$IDLE_D/working" &
	w=$!
	wait "$q" "$t" "$o" "$w" || true
	mapfile -t f < <(fields result.status result.reason eof < "$IDLE_D/quiet")
	expect_eq "a quiet session ends as a timeout" "${f[0]}" timeout
	expect_contains "its result says why" "${f[1]}" "no input from its client and no output, and its command no work, for 2 s (corral serve --tty-idle-timeout)"
	expect_eq "the daemon closed after it" "${f[2]}" true
	expect_eq "a client's frames keep it" "$(fields result.exit_code < "$IDLE_D/typing")" 6
	expect_eq "output keeps it" "$(fields result.exit_code < "$IDLE_D/talking")" 5
	expect_eq "its command's work keeps it" "$(fields result.exit_code < "$IDLE_D/working")" 7
	expect_contains "the record says why" "$(grep '"timeout"' "$IDLE_D/state/audit.jsonl")" \
		'"limit_ms":2000,"reason":"its terminal had no input from its client and no output, and its command no work, for 2 s'
	expect_eq "nothing of it runs" "$("$CORRAL" exec --socket "$IDLE_D/sock" "$box" -c \
		'ps -e -o args= | grep -c "^sleep 999$" || true')" 0
	# a pause (a person's) holds the clock: a quiet session outlives a
	# pause longer than the bound, and ends only once resumed and quiet
	idle_api() { curl -s -m 20 --unix-socket "$IDLE_D/sock" -X "$1" "http://corral$2"; }
	own_tty 'expect:ready' \
		-- /bin/sh -c 'echo ready; exec sleep 999' > "$IDLE_D/paused" &
	p=$!
	# polled by httpc (lib.sh), which starts in a millisecond: curl's
	# start is 40-55 ms of CPU, every 50 ms
	for _ in $(seq 1 100); do
		[ "$("$HTTPC" -sS --max-time 20 --unix-socket "$IDLE_D/sock" \
			"http://corral/v1/sandboxes/$box" | json running)" = 1 ] && break
		sleep 0.05
	done
	n0=$(grep -c '"timeout"' "$IDLE_D/state/audit.jsonl")
	expect_eq "paused" "$(idle_api POST "/v1/sandboxes/$box/pause" | json state)" paused
	sleep 3
	# (a kill sent during the pause would land only at the thaw: the
	# record says whether one was)
	expect_eq "a paused session is not timed out past the bound" \
		"$(grep -c '"timeout"' "$IDLE_D/state/audit.jsonl")" "$n0"
	expect_eq "resumed" "$(idle_api POST "/v1/sandboxes/$box/resume" | json state)" running
	wait "$p" || true
	expect_eq "quiet once resumed: it ends" "$(fields result.status < "$IDLE_D/paused")" timeout
}

# corral exec -t with an input that ends (a pipe, /dev/null): its end is
# typed on the pty as a user's ^D, as `corral run -t` does.  An
# interactive shell waited for its wall-clock timeout (600 s); now it ends
# after the lines it was given.
t_exec_tty_input_end_typed() {
	local box=$BOX rc=0
	timeout -k 5 60 "$CORRAL" exec -t --socket "$SOCK" "$box" -- bash --norc -i \
		< /dev/null > "$T/o" 2>&1 || rc=$?
	expect_eq "bash -i on /dev/null: exit" "$rc" 0 || { cat -v "$T/o" | tail -3; return 1; }
	rc=0
	printf 'echo from-the-pipe-$((6 * 7))\n' | timeout -k 5 60 "$CORRAL" exec -t \
		--socket "$SOCK" "$box" -- bash --norc -i > "$T/o" 2>&1 || rc=$?
	expect_eq "bash -i on a pipe: exit" "$rc" 0 || return 1
	expect_contains "the piped line ran" "$(< "$T/o")" from-the-pipe-42
}

# corral exec with -t, streamed and --no-stream: what stdio.sh's
# t_terminal_modes_reset_after_output checks of corral run, through the
# daemon.  A command that set its terminal's modes (the alternate screen,
# mouse reports, ...: tests/term_after.py) and was killed left them set
# on the caller's terminal; each is reset before corral's words.
t_exec_terminal_modes_reset() {
	local attack t
	attack=$($PY "$HERE/term_after.py" --printf)
	for t in -t --stream --no-stream; do
		$PY "$HERE/ptyrun.py" -- "$CORRAL" exec ${t#--stream} --socket "$SOCK" "$BOX" \
			-- /bin/sh -c "printf '$attack'; kill -KILL \$\$" > "$T/r"
		expect_eq "exec $t: exit" "$(fields exit < "$T/r")" 137
		$PY "$HERE/term_after.py" "$T/r" "killed by signal 9" || fail "exec $t, killed"
	done
}

# corral exec streamed, ended by the caller's ^C (SIGINT) or a SIGTERM
# while the command runs: the modes its output set are reset before
# corral ends by that signal.  They were left set (the reset came only
# after the stream's end): the alternate screen, mouse reports, no
# cursor, ... and the shell's prompt went there (tmux: alternate_on 1
# after ^C).  A SIGINT the caller ignores stays ignored: the TERM after
# it ends corral.  The call ends with its client (nothing left running).
t_exec_terminal_modes_reset_on_signal() {
	local attack sig
	attack=$($PY "$HERE/term_after.py" --printf)
	for sig in INT TERM; do
		$PY "$HERE/ptyrun.py" 'expect:set' "signal:$sig" -- "$CORRAL" exec \
			--socket "$SOCK" "$BOX" -- /bin/sh -c "printf '$attack'; exec sleep 61" > "$T/r"
		expect_eq "$sig: exit" "$(fields exit < "$T/r")" $((128 + $(kill -l "$sig")))
		$PY "$HERE/term_after.py" "$T/r" || fail "exec, ended by SIG$sig"
	done
	# shellcheck disable=SC2016  # $0 and $@ are the inner shell's
	$PY "$HERE/ptyrun.py" 'expect:set' 'signal:INT' 'signal:TERM' -- /bin/sh -c \
		'trap "" INT; exec "$0" "$@"' "$CORRAL" exec --socket "$SOCK" "$BOX" \
		-- /bin/sh -c "printf '$attack'; exec sleep 61" > "$T/r"
	expect_eq "INT ignored, then TERM: exit" "$(fields exit < "$T/r")" 143
	$PY "$HERE/term_after.py" "$T/r" || fail "exec, INT ignored, then TERM"
	wait_inside "$BOX" 'pgrep -fx "sleep 61" | wc -l' 0
}

# ^Z on `corral exec` streamed, from a shell with job control: corral
# stopped with the command's modes still set, the shell's prompt on the
# alternate screen until `fg`.  Reset before it stops (148); continued,
# the SIGINT sent while it was stopped ends it, the modes reset again.
t_exec_terminal_modes_reset_before_stop() {
	local attack
	attack=$($PY "$HERE/term_after.py" --printf)
	# shellcheck disable=SC2016  # $@ and %1 are the job shell's
	$PY "$HERE/ptyrun.py" 'expect:set' 'send:\x1a' 'expect:[stopped' -- /bin/sh -c \
		'set -m; "$@"; echo "[stopped $?]"; kill -INT %1; fg' sh \
		"$CORRAL" exec --socket "$SOCK" "$BOX" -- /bin/sh -c "printf '$attack'; exec sleep 61" > "$T/r"
	expect_contains "stopped" "$(fields output < "$T/r")" "[stopped 148]"
	$PY "$HERE/term_after.py" "$T/r" "=[stopped" || fail "exec, ^Z"
	expect_eq "continued, then SIGINT: exit" "$(fields exit < "$T/r")" 130
	wait_inside "$BOX" 'pgrep -fx "sleep 61" | wc -l' 0
}

# `corral exec -t` ignored a SIGTSTP from elsewhere (a stop would have
# left the terminal raw).  Now it stops as asked, its terminal cooked and
# the command's modes reset first (the job shell's stty says so), and
# after `fg` raw again: an "x" typed with no newline reaches the command.
t_exec_tty_stopped_from_elsewhere_cooked() {
	local attack
	attack=$($PY "$HERE/term_after.py" --printf)
	# shellcheck disable=SC2016  # $@ is the job shell's
	$PY "$HERE/ptyrun.py" 'expect:in-vim' 'signal-fg:TSTP' 'expect:[cooked' 'send:x' \
		'expect:got-x' -- /bin/sh -c 'set -m; g=$(stty -g); "$@"; echo "[stopped $?]"
			[ "$(stty -g)" = "$g" ] && echo "[cooked]"; fg' sh \
		"$CORRAL" exec -t --socket "$SOCK" "$BOX" -- /bin/sh -c \
		"stty -icanon; printf '$attack'; echo in-vim; echo got-\$(head -c1)" > "$T/r"
	expect_contains "stopped" "$(fields output < "$T/r")" "[stopped 148]"
	expect_contains "its settings back while stopped" "$(fields output < "$T/r")" "[cooked]"
	$PY "$HERE/term_after.py" "$T/r" "=[stopped" || fail "exec -t, TSTP"
	expect_contains "raw again after fg" "$(fields output < "$T/r")" "got-x"
	expect_eq "exit" "$(fields exit < "$T/r")" 0
	expect_eq "termios restored" "$(fields termios_same < "$T/r")" true
}

# corral exec -t killed by SIGHUP (its terminal closed): the shell inside
# hears it too, and the caller's terminal is restored.
t_exec_tty_sighup() {
	box=$BOX
	out=$($PY "$HERE/ptyrun.py" 'expect:ready' 'signal:HUP' \
		-- "$CORRAL" exec -t --socket "$SOCK" "$box" -- /bin/sh -c \
		'trap "echo hup > /tmp/hup2; exit 0" HUP; echo ready; while :; do sleep 0.1; done')
	mapfile -t f < <(printf '%s' "$out" | fields exit termios_same)
	expect_eq "corral's status" "${f[0]}" 129
	expect_eq "the terminal restored" "${f[1]}" true
	wait_inside "$box" 'cat /tmp/hup2 2>/dev/null' hup
}

# corral exec -t over https: what t_exec_tty_shell checks on the unix
# socket, through the TLS daemon: typed input reaches the shell (it
# computes the markers), its pty and window sizes, its exit status, and
# the caller's terminal raw while it runs and restored after.
t_exec_tty_tls() {
	tls_needs
	out=$($PY "$HERE/ptyrun.py" 'expect:$ ' 'snap' \
		'send:tty; stty size; echo M$((1+1))\r' 'expect:M2' \
		'resize:30,91' 'send:stty size; echo M$((2+1))\r' 'expect:M3' \
		'send:read x; echo "got:$x:$((3+1))"\r' 'send:typed\r' 'expect:got:typed:4' \
		'send:exit 7\r' \
		-- "$CORRAL" exec -t --url "$TURL" --token-file "$TD/token" --ca-file "$TLS_CA" \
		"$TBOX" -- /bin/sh -i)
	o=$out
	expect_contains "tty names a pty of the sandbox's devpts" "$o" "/dev/pts/"
	expect_contains "the first size" "$o" "24 80"
	expect_contains "the size after SIGWINCH" "$o" "30 91"
	expect_contains "a typed line read by the shell" "$o" "got:typed:4"
	mapfile -t f < <(printf '%s' "$out" | fields exit raw_during termios_same size_after)
	# (ci59d: 125 once, unexplained: what the terminal showed, to say why)
	expect_eq "corral exec -t exits as the shell did" "${f[0]}" 7 ||
		echo "    # the terminal's end: $(printf '%s' "$out" | tail -c 800)" >&2
	expect_eq "raw while it ran" "${f[1]}" true
	expect_eq "the terminal restored" "${f[2]}" true
	expect_eq "the window size left alone" "${f[3]}" "[30, 91]"
}

# CUTTER: python3 -c "$CUTTER" PORT MODE -- ARGV...: a TCP relay on
# 127.0.0.1 to PORT that runs ARGV ("{port}" in it becomes the relay's
# port) on its own terminal, and on SIGUSR1 cuts every connection it
# relays, both sides, and takes no more: MODE fin closes them (a TCP end
# with no TLS close_notify), rst resets them.  Exits as ARGV did, or 99 if
# it had not ended 15 s after the cut (then it is killed); 60 s in all.
CUTTER='
import os, select, signal, socket, struct, sys, time
target, mode, argv = int(sys.argv[1]), sys.argv[2], sys.argv[4:]
l = socket.socket()
l.bind(("127.0.0.1", 0))
l.listen(8)
argv = [a.replace("{port}", str(l.getsockname()[1])) for a in argv]
cut = []
signal.signal(signal.SIGUSR1, lambda *_: cut.append(time.monotonic()))
pid = os.fork()
if pid == 0:
    l.close()
    os.execv(argv[0], argv)
peer, status, end = {}, None, time.monotonic() + 60
while status is None and time.monotonic() < end:
    if cut and l is not None:
        l.close()
        l = None
        for s in peer:
            if mode == "rst":
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            else:
                s.shutdown(socket.SHUT_RDWR)
            s.close()
        peer = {}
        end = min(end, cut[0] + 15)
    try:
        r, _, _ = select.select(list(peer) + ([l] if l else []), [], [], 0.05)
    except InterruptedError:
        r = []
    for s in r:
        if s is l:
            c, _ = l.accept()
            u = socket.create_connection(("127.0.0.1", target))
            peer[c], peer[u] = u, c
            continue
        if s not in peer:
            continue
        try:
            d = s.recv(65536)
        except OSError:
            d = b""
        if d:
            try:
                peer[s].sendall(d)
                continue
            except OSError:
                pass
        o = peer.pop(s)
        peer.pop(o, None)
        s.close()
        o.close()
    p, st = os.waitpid(pid, os.WNOHANG)
    if p == pid:
        status = os.waitstatus_to_exitcode(st)
if status is None:
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    sys.exit(99)
sys.exit(status if status >= 0 else 128 - status)
'

# The TLS connection cut mid-session, by a TCP end with no close_notify and
# by a reset: corral exec -t ends with an error (125, said), does not hang,
# and gives the terminal back; the shell inside hears SIGHUP; the daemon
# goes on.
t_exec_tty_tls_cut() {
	local mode
	tls_needs
	for mode in fin rst; do
		out=$($PY "$HERE/ptyrun.py" 'expect:ready' 'snap' 'send:abc\r' 'expect:got abc' \
			'signal:USR1' \
			-- $PY -c "$CUTTER" "$TPORT" "$mode" -- "$CORRAL" exec -t \
			--url "https://127.0.0.1:{port}" --token-file "$TD/token" --ca-file "$TLS_CA" \
			"$TBOX" -- /bin/sh -c "trap 'echo hup > /tmp/cut-$mode; exit 0' HUP; echo ready; read x; echo got \$x; while :; do sleep 0.1; done")
		o=$out
		expect_contains "$mode: typed input reached it before the cut" "$o" "got abc"
		mapfile -t f < <(printf '%s' "$out" | fields exit raw_during termios_same)
		[ "${f[0]}" != 99 ] || fail "$mode: corral exec -t still ran 15 s after the cut"
		expect_eq "$mode: corral's status" "${f[0]}" 125
		expect_contains "$mode: it says why" "$o" "corral: "
		# said once the terminal is cooked again: each line ends \r\n
		expect_eq "$mode: why, on the restored terminal" "$(printf '%s' "$out" | $PY -c '
import json, re, sys
said = re.findall(r"corral: [^\n]*\n", json.load(sys.stdin)["output"])
print("cooked" if said and all(l.endswith("\r\n") for l in said) else "raw: %r" % said)')" cooked
		expect_eq "$mode: raw while it ran" "${f[1]}" true
		expect_eq "$mode: the terminal restored" "${f[2]}" true
		wait_inside "$TBOX" "cat /tmp/cut-$mode 2>/dev/null" hup
	done
	expect_eq "the TLS daemon answers" "$(inside "$TBOX" 'echo M$((4+1))')" M5
}

run_tests "$@"
cat "$TEST_TMP/notes" 2>/dev/null
echo "$PASS passed, $FAIL failed"
[ "$FAIL" = 0 ]
