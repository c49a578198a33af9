# lib.sh - the integration tests' harness, sourced by tests/integration.sh.
#
# Each test is a shell function named t_*; it fails by calling fail (or by
# any check returning non-zero).  Every test gets a fresh scratch directory
# in $T, removed afterwards whatever happened.

PASS=0
FAIL=0
SKIP=0
FAILED_NAMES=""

# The harness's own rm, mkdir, rmdir, mkfifo and sleep are bash's loadable
# builtins (Debian's bash-builtins) where the host has them: a fork and an
# exec cost 4-7 ms of CPU on a pti=on guest, and every test makes and
# removes its directory and waits.  What a sandbox runs is not the
# harness's: `corral run -- rm` still runs /bin/rm.  Without the package
# the programs are used, as before.
for b in rm mkdir rmdir mkfifo sleep; do
	[ -f "/usr/lib/bash/$b" ] && enable -f "/usr/lib/bash/$b" "$b" 2> /dev/null
done
unset b
HARNESS_UMASK=$(umask)

# mode_opt ARGS...: a -m (--mode) among the options of ARGS
mode_opt() {
	local a
	for a; do
		case $a in
		-m* | -[!-]*m* | --mode*) return 0 ;;
		--) return 1 ;;
		-*) ;;
		*) return 1 ;;
		esac
	done
	return 1
}

# The loadable mkdir and mkfifo apply the umask to -m's MODE, where
# coreutils' make the mode MODE (mkdir -m 777 made 755): with -m, the
# programs.
if [ "$(type -t mkdir)" = builtin ]; then
	mkdir() {
		if mode_opt "$@"; then /bin/mkdir "$@"; else builtin mkdir "$@"; fi
	}
fi
if [ "$(type -t mkfifo)" = builtin ]; then
	mkfifo() {
		if mode_opt "$@"; then /bin/mkfifo "$@"; else builtin mkfifo "$@"; fi
	}
fi

fail() {
	echo "    FAIL: $*" >&2
	return 1
}

skip() {
	echo "    skip: $*"
	return 77
}

# kill: the builtin, for processes this suite started only.  A test that
# signals a pid it saved ($!, a pidfile) after that process ended signals
# whichever process the kernel gave the number to since: pid_max is 32768
# on a two-core host, and make check starts hundreds of thousands, so a
# number comes round within minutes (CI once saw an image test of another
# lane end by SIGTERM, exit 143).  A pid is the suite's when its parents
# lead to the suite's shell, or when the suite's own_more says so (an OCI
# container's monitor detached itself); one that is neither is
# left alone, and kill says there is no such process, which is what the
# test meant.  A process group (-PID) is the suite's when its leader is
# (a group whose leader lives is that leader's: a number reused since
# the suite's group ended leads the new process's own, which `kill --
# -PID` signalled whole, as check.sh's cleanup does every lane's), or
# when no process has the number: the kernel keeps a group's number from
# reuse while any member lives, so the members left are the suite's
# group's.  KILL_AUDIT=FILE lists the pids left alone.
SUITE_PID=${SUITE_PID:-$$}
own_pid() {	# own_pid PID: PID descends from $SUITE_PID, or own_more PID says so
	local pid=$1 i s seen=" "
	for ((i = 0; i < 64; i++)); do
		[ "$pid" = "$SUITE_PID" ] && return 0
		[ "$pid" -gt 1 ] 2>/dev/null || break
		seen+="$pid "
		read -r s 2>/dev/null < "/proc/$pid/stat" || return 1
		s=${s##*) }
		s=${s#* }
		pid=${s%% *}
	done
	# own_more PID ANCESTORS (" PID PARENT ... ")
	declare -F own_more > /dev/null && own_more "$1" "$seen"
}
kill() {
	local a sig=() pids=() rc=0
	while [ $# -gt 0 ]; do
		case $1 in
		-l|-L) builtin kill "$@"; return ;;
		-s|-n) sig+=("$1" "$2"); shift 2 ;;
		--) shift; break ;;
		-*) [ ${#sig[@]} -eq 0 ] || break; sig+=("$1"); shift ;;
		*) break ;;
		esac
	done
	for a in "$@"; do
		if { [[ $a == [0-9]* ]] && ! own_pid "$a"; } ||
		   { [[ $a == -[0-9]* ]] && [ -e "/proc/${a#-}" ] && ! own_pid "${a#-}"; }; then
			[ -z "${KILL_AUDIT:-}" ] || echo "$(basename "$0") ${FUNCNAME[1]}: kill ${sig[*]} $a: $(tr '\0' ' ' < "/proc/${a#-}/cmdline" 2>/dev/null)" >> "$KILL_AUDIT"
			echo "kill: ($a) - No such process (none of this suite's)" >&2
			rc=1
			continue
		fi
		pids+=("$a")
	done
	[ ${#pids[@]} -eq 0 ] && return $rc
	builtin kill "${sig[@]}" -- "${pids[@]}" || rc=$?
	return $rc
}

# doze SECONDS: a poll's pause without a process: read's timeout on a FIFO
# no one writes, $TEST_TMP/doze (sleep was a fork and an exec every 50 ms
# of each poll).  Opened on first use in each shell that dozes.
doze() {
	if [ -z "${DOZE_FD:-}" ]; then
		[ -p "$TEST_TMP/doze" ] || mkfifo "$TEST_TMP/doze" 2>/dev/null || [ -p "$TEST_TMP/doze" ] ||
			{ sleep "$1"; return 0; }
		exec {DOZE_FD}<> "$TEST_TMP/doze"
	fi
	read -r -t "$1" -u "$DOZE_FD" _ || true
}

# free_port: a TCP port that no socket has bound (none in /proc/net/tcp
# or tcp6), for a daemon's --listen or one where nothing listens: a random one below the kernel's
# ephemeral range, which every connect draws from (one bind(0) had given
# the test, as a Python did here, a client's connect could take before
# the daemon bound it).  In bash: the Python's start, a test, was 30-50
# ms of CPU.  A Python's bind(0) where the range leaves no room below.
free_port() {
	local lo hi f p i row used=" "
	local -a rows cols
	read -r lo hi < /proc/sys/net/ipv4/ip_local_port_range
	if [ "$lo" -lt 12000 ]; then
		"${PY:-/usr/bin/python3}" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
		return
	fi
	# each file in one read: bash's read of a line is a read(2) and an
	# lseek back, and each lseek walked the kernel's whole TCP table again
	# (its hash's every bucket: 5-20 ms a call here, more with the lanes'
	# hundreds of sockets; a sixth of a serve.sh lane's CPU)
	for f in /proc/net/tcp /proc/net/tcp6; do
		[ -r "$f" ] || continue
		rows=()
		IFS=$'\n' read -r -d '' -a rows < "$f" || :
		for row in "${rows[@]:1}"; do
			cols=($row)
			used+="$((16#${cols[1]##*:})) "
		done
	done
	for ((i = 0; i < 50; i++)); do
		p=$(( lo - 1 - SRANDOM % (lo - 10000) ))
		[[ $used == *" $p "* ]] && continue
		port_reserve "$p" || continue
		echo "$p"
		return 0
	done
	fail "no free port below $lo"
}

# port_reserve P: P is this test's until it ends, against the other lanes
# of make check, which draw from the same ports: a port no socket has
# bound yet, or never will (a "dead" port a test expects refused), was
# another lane's pick one time in some 22,000.  mkdir is the lock; the
# directory is shared by every uid (sticky, as /tmp) and run_test removes
# the test's own after it.  Where it cannot be made, the pick stands
# unreserved, as before.
PORTS_HELD=/tmp/corral-ports
port_reserve() {
	[ -n "${T:-}" ] || return 0	# outside a test: no end to release it at
	[ -d "$PORTS_HELD" ] || mkdir -m 1777 "$PORTS_HELD" 2>/dev/null || [ -d "$PORTS_HELD" ] ||
		return 0
	mkdir "$PORTS_HELD/$1" 2>/dev/null || { [ -w "$PORTS_HELD" ] && return 1; return 0; }
	echo "$1" >> "$T.ports"
}

# ports_release FILE: the reservations port_reserve listed in FILE
ports_release() {
	local p
	[ -f "$1" ] || return 0
	while read -r p; do
		rmdir "$PORTS_HELD/$p" 2>/dev/null
	done < "$1"
	rm -f "$1"
}

# front_test: the first line of a test of the daemon's or the MCP server's
# front (HTTP and JSON-RPC framing, TLS, tokens, the bounds on what a
# client may make it hold), whose code is the same whatever uid runs it
# and which starts no sandbox of its own or only to have something to
# call.  It skips where TEST_FRONT=elsewhere: make check runs these in the
# root lane, under the sanitizers, and not again as uid 65534 (they were
# a third of that lane's serve.sh and mcp.sh CPU).
front_test() {
	[ "${TEST_FRONT:-}" != elsewhere ] ||
		skip "a test of the front: make check runs it once, as root, under ASan"
}

# bound_test: the first line of a test that floods the daemon or the MCP
# server (megabytes of output, a thousand calls) to show a bound on what
# it holds or a race that takes many rounds to meet.  It skips where
# TEST_BOUNDS=elsewhere: make check sets that for the suites it runs
# under the sanitizers, and runs these once, in the -O2 build, as uid
# 65534.  Under ASan the same rounds took four times the CPU (the three
# of mcp.sh and serve.sh's streamed TLS ends: 70 s of the check's), the
# quarantine holds what was freed, and a race's timing is not a real
# daemon's; the code these pass through is tested under ASan by the
# smaller tests around them.
bound_test() {
	[ "${TEST_BOUNDS:-}" != elsewhere ] ||
		skip "a flood's bound or a race's many rounds: make check runs it once, in the -O2 build"
}

# JGET and HTTPC: tests/helpers/jget, the JSON reader, and httpc, the HTTP
# client of serve.sh's and files.sh's API calls, beside the corral under
# test (build/tests/helpers, or a staged copy's helpers/).
jget_find() {
	local d=${CORRAL%/*}
	for d in "$d/tests/helpers" "$d/helpers"; do
		[ -x "$d/jget" ] && [ -x "$d/httpc" ] || continue
		JGET=$d/jget HTTPC=$d/httpc
		return
	done
	echo "no jget and httpc beside $CORRAL: build them (make)" >&2
	JGET=false HTTPC=false
}
# (not yet where CORRAL is not built: make check fetches mcp.sh's npm
# packages while it builds; json and pyjq look again when called)
[ -z "${CORRAL:-}" ] || [ ! -x "$CORRAL" ] || jget_find

# json FIELD < json: print a field of the result (dotted path; see jget.c)
json() {
	[ -n "${JGET:-}" ] || jget_find
	"$JGET" "$1"
}

# pyjq EXPR FILE: a Python expression over the JSON v of FILE, printed as
# json.dumps would (a string bare).  A plain subscript, v["a"][0]["b"], or
# len() of one, is read by jget; anything else starts a Python.
# jget is the last command, its file no redirection: in a $( ) bash execs
# it in the subshell's place, a fork less.
pyjq() {
	local e=$1 path="" len=""
	[ -n "${JGET:-}" ] || jget_find
	if [[ $e =~ ^len\((.*)\)$ ]]; then
		len=-l
		e=${BASH_REMATCH[1]}
	fi
	[[ $e == v\[* ]] || { pyjq_python "$1" "$2"; return; }
	e=${e#v}
	while [[ $e =~ ^\[\"([A-Za-z_][A-Za-z0-9_]*)\"\](.*)$ ||
		 $e =~ ^\[([0-9]+)\](.*)$ ]]; do
		path+=.${BASH_REMATCH[1]}
		e=${BASH_REMATCH[2]}
	done
	[ -z "$e" ] || { pyjq_python "$1" "$2"; return; }
	"$JGET" -n $len -f "$2" "${path#.}"
}

pyjq_python() {	# pyjq_python EXPR FILE: pyjq's Python, for any other EXPR
	/usr/bin/python3 -c '
import json, sys
v = json.load(open(sys.argv[2]))
r = eval(sys.argv[1])
print(json.dumps(r) if isinstance(r, (dict, list, bool)) or r is None else r)
' "$1" "$2"
}

expect_eq() {	# expect_eq WHAT GOT WANT
	[ "$2" = "$3" ] || fail "$1: got '$2', want '$3'"
}

expect_contains() {	# expect_contains WHAT HAYSTACK NEEDLE
	case "$2" in
	*"$3"*) return 0 ;;
	esac
	fail "$1: '$(printf '%s' "$2" | head -c 400)' does not contain '$3'"
}

expect_not_contains() {
	case "$2" in
	*"$3"*) fail "$1: '$(printf '%s' "$2" | head -c 400)' contains '$3'" ;;
	esac
	return 0
}

# kind_counts FILE KIND: how many KIND events FILE holds whole, and how
# many more its KIND.summary events counted, on one line
kind_counts() {
	local whole counted
	whole=$(grep -c "\"type\":\"$2\"" "$1" || true)
	counted=$(grep "\"type\":\"$2.summary\"" "$1" | grep -o '"count":[0-9]*' |
		  awk -F: '{ n += $2 } END { print n + 0 }')
	echo "$whole $counted"
}

# children_cpu FILE: CHILDREN_CPU_MS, the CPU time (user + system, in ms)
# of this shell's waited-for children so far, as the builtin `times`
# counts it: a test's subshell, and the sandboxes and daemons reaped by
# those it waited for.  A variable, not $( ): `times` must run in this
# shell, not in a copy of it.
children_cpu() {
	local u s user
	times > "$1"
	{ read -r _ _; read -r u s; } < "$1"
	tms_ms "$u"
	user=$TMS_MS
	tms_ms "$s"
	CHILDREN_CPU_MS=$(( user + TMS_MS ))
}

# tms_ms 1m2.345s: TMS_MS=62345 (a variable: every test asks four, and a
# $( ) is a fork, 4-7 ms of CPU on a pti=on guest)
tms_ms() {
	local m=${1%%m*} sec=${1#*m}
	sec=${sec%s}
	TMS_MS=$(( 10#$m * 60000 + 10#${sec%.*} * 1000 + 10#${sec#*.} ))
}

# proc_stat PID: PSTAT, the fields of /proc/PID/stat after the name (which
# may hold spaces and parentheses): [0] the state, [19] the start time in
# clock ticks after boot.  1 for a process gone.  No fork: every test
# reads it for each process its daemons ran.
proc_stat() {
	local s
	PSTAT=()
	read -r s 2>/dev/null < "/proc/$1/stat" || return 1
	read -r -a PSTAT <<< "${s##*) }"
}

run_test() {
	name=$1
	# $TEST_TMP is the suite's own: a count names each test's directory.
	# Here and at the end, as few processes as will do: a fork and an exec
	# cost some 3 ms of CPU each on this host, and a check runs 4,000 tests.
	TEST_SEQ=$(( ${TEST_SEQ:-0} + 1 ))
	T=$TEST_TMP/t.$TEST_SEQ
	# (mkdir without -m may be the builtin: 755 where the umask is 022)
	mkdir "$T" || return 1
	[ "$HARNESS_UMASK" = 0022 ] || chmod 755 "$T"
	export T
	local t0=$EPOCHREALTIME cpu0
	children_cpu "$T.times"
	cpu0=$CHILDREN_CPU_MS
	# A command failing under set -e ends the test with no FAIL line (CI
	# once showed a bare "not ok"): the ERR trap notes where, in a file,
	# as a test's own EXIT trap (a hundred set one) would replace one that
	# said it, and it is said below where no FAIL line says why.  fail's
	# own `return 1` is not noted: its line says why; nor what fails
	# where set -e is off (an EXIT trap's cleanup).
	( set -eE
	  trap 'TEST_RC=$?; [[ $- != *e* || $BASH_COMMAND == return* ]] || printf "%s\n" "${BASH_SOURCE[0]##*/}:$LINENO: $BASH_COMMAND (status $TEST_RC)" > "$T.stopped"' ERR
	  cd "$T"; [ -z "${TEST_TRACE:-}" ] || set -x; "$name" ) > "$T.log" 2>&1
	rc=$?
	if [ -s "$T.stopped" ]; then
		[ "$rc" = 0 ] || [ "$rc" = 77 ] || grep -q 'FAIL' "$T.log" ||
			echo "set -e stopped the test at $(< "$T.stopped")" >> "$T.log"
		rm -f "$T.stopped"
	fi
	# the time each test took, wall and CPU, so that a slow one is seen
	# (check.sh's tally ignores it; it lists the costliest at its end).  A
	# test's wall time is the machine's load as much as its own; its CPU
	# time is what it takes from the other lanes of make check.
	local ms=$(( (${EPOCHREALTIME/./} - ${t0/./}) / 1000 )) cpu
	children_cpu "$T.times"
	cpu=$(( CHILDREN_CPU_MS - cpu0 ))
	case $rc in
	0)  PASS=$((PASS + 1)); echo "ok - $name # ${ms} ms, cpu ${cpu} ms" ;;
	77) SKIP=$((SKIP + 1)); echo "ok - $name # SKIP $(grep 'skip:' "$T.log" | head -1)" ;;
	*)  FAIL=$((FAIL + 1)); FAILED_NAMES="$FAILED_NAMES $name"
	    echo "not ok - $name"; sed "s/^/    /" "$T.log" | tail -${TEST_LOG_LINES:-30} ;;
	esac
	# what the suite's test_cleanup, if it has one, ends while $T, which
	# may name it (oci.sh: containers by their state), is still there
	if declare -F test_cleanup > /dev/null; then
		test_cleanup
	fi
	ports_release "$T.ports"
	# what a test left without write permission, made writable first
	rm -rf "$T" "$T.log" "$T.times" 2>/dev/null || {
		chmod -R u+rwX "$T" 2>/dev/null
		rm -rf "$T"
	}
}

# run_tests [NAME...]: the named tests, or every t_* function the script
# defines: a test written is a test run, no list to keep.  TEST_SHARD=K/N
# runs the K-th of N interleaved parts (make check runs a long suite's
# parts in two lanes at once).
run_tests() {
	local t tests i=0 k=1 n=1

	tests=$(declare -F | awk '{print $3}' | grep '^t_')
	[ $# -gt 0 ] && tests="$*"
	if [ -n "${TEST_SHARD:-}" ]; then
		k=${TEST_SHARD%/*}
		n=${TEST_SHARD#*/}
	fi
	for t in $tests; do
		i=$((i + 1))
		[ $(( (i - 1) % n + 1 )) -eq "$k" ] && run_test "$t"
	done
}

# memscan_find: tests/helpers/memscan beside the corral under test ($CORRAL)
memscan_find() {
	local d=${CORRAL%/*}
	for d in "$d/tests/helpers" "$d/helpers"; do
		[ -x "$d/memscan" ] && { echo "$d/memscan"; return 0; }
	done
	return 0
}

# test_ca DIR SAN: a CA (DIR/ca.key, DIR/ca.pem) and a server certificate it
# signed for api.test with subjectAltName SAN (DIR/srv.key, DIR/srv.pem)
test_ca() {
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
		-subj /CN=corral-test-ca -keyout "$1/ca.key" -out "$1/ca.pem" 2>/dev/null &&
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=api.test \
		-keyout "$1/srv.key" -out "$1/srv.csr" 2>/dev/null &&
	printf 'subjectAltName=%s\n' "$2" > "$1/ext" &&
	openssl x509 -req -in "$1/srv.csr" -CA "$1/ca.pem" -CAkey "$1/ca.key" \
		-CAcreateserial -days 2 -extfile "$1/ext" -out "$1/srv.pem" 2>/dev/null
}

# strace_attached ERR TRACER: wait until strace -p (pid TRACER, its stderr
# in ERR, no -q) says "Process N attached".  It says so once it has asked
# the tracee to stop (PTRACE_INTERRUPT): every system call made after it is
# seen.  TracerPid in /proc turns non-zero a step before, at PTRACE_SEIZE,
# while the tracee still runs untraced: a call it makes then is missed.
# 1 if strace ended first (it could not attach), or after 1200 looks.
strace_attached() {
	local i
	for i in $(seq 1 1200); do
		grep -q '^strace: Process [0-9]* attached' "$1" 2>/dev/null && return 0
		kill -0 "$2" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}

# strace_held LOG WHILE [PID]: wait until strace's log (-o LOG) shows the
# SIGSTOP it injected has stopped the tracee (any, or PID's line under -f):
# "--- stopped by SIGSTOP ---".  /proc's "t (tracing stop)" is no such sign: a
# traced process shows it for a moment at every system call it makes, and
# at the attach.  Waits while WHILE (what is to make the held call, or
# strace) runs: a slow machine is waited for, an ended one not; 1 if it
# ended unheld, or after 2400 looks.
strace_held() {
	local i re="^([0-9]+ +)?--- stopped by SIGSTOP ---"
	[ -z "${3:-}" ] || re="^($3 +)?--- stopped by SIGSTOP ---"
	for i in $(seq 1 2400); do
		grep -Eq "$re" "$1" 2>/dev/null && return 0
		kill -0 "$2" 2>/dev/null || break
		sleep 0.05
	done
	grep -Eq "$re" "$1" 2>/dev/null
}

# new_file_open PID DIR: PID holds a new file in DIR open, unnamed
# (O_TMPFILE: "DIR/#INO (deleted)") or named beside its place
new_file_open() {
	local f
	for f in /proc/"$1"/fd/*; do
		case $(readlink "$f" 2>/dev/null) in
		"$2/#"*" (deleted)"|"$2/"*.corral-export.*) return 0 ;;
		esac
	done
	return 1
}

# fuse_stall_mount DIR UID: tests/fake_fuse.py's FUSE mount at DIR, of
# UID's, that no daemon answers; fuse_stall_umount DIR ends it (a lazy
# unmount, then its stdin closed), and is called before any assertion.
fuse_stall_mount() {
	mkfifo "$T/fuse.in"
	/usr/bin/python3 "$HERE/fake_fuse.py" "$1" "$2" < "$T/fuse.in" > "$T/fuse.out" 2>&1 &
	FUSE_PID=$!
	exec 8> "$T/fuse.in"
	for _ in $(seq 1 200); do
		grep -q mounted "$T/fuse.out" && return 0
		kill -0 "$FUSE_PID" 2>/dev/null || break
		sleep 0.05
	done
	fuse_stall_umount "$1"
	fail "the FUSE mount: $(cat "$T/fuse.out")"
}
fuse_stall_umount() {
	! grep -q " $1 " /proc/self/mountinfo || umount -l "$1"
	exec 8>&-
	wait "$FUSE_PID"
}

# end_traced ST [PID...]: what a test held under strace goes, on its
# failure too (from an EXIT trap): the PIDs it started (a held supervisor,
# its init) killed, then ST, the "timeout ... strace" it ran, told to end:
# timeout passes SIGTERM to strace, which ends its own command and lets
# the rest go.  KILL to timeout alone would leave strace and a stopped
# tracee behind with nothing to end them.
end_traced() {
	local st=$1 p
	shift
	for p in "$@"; do kill -KILL "$p" 2>/dev/null || true; done
	kill -TERM "$st" 2>/dev/null || true
	wait "$st" 2>/dev/null || true
}

# peak_rss OUT CMD...: CMD run with stdout to OUT, stderr to $T/err; its
# peak RSS (KiB: wait4's, its own and its waited-for children's) and its
# exit code, on stdout.  For a test that memory does not grow with a size.
peak_rss() {
	/usr/bin/python3 -c '
import os, subprocess, sys
p = subprocess.Popen(sys.argv[2:], stdin=subprocess.DEVNULL,
                     stdout=open(sys.argv[1], "wb"),
                     stderr=open(os.environ["T"] + "/err", "w"))
_, st, ru = os.wait4(p.pid, 0)
print(ru.ru_maxrss, os.waitstatus_to_exitcode(st))' "$@"
}

# strace_cloned LOG: the pid of the first child cloned with CLONE_NEWUSER in
# strace -f's log (-o LOG), or nothing.  The call is on one line, or split
# when another process's line came while it ran (the child's first call
# can come before its parent's clone returns): "clone(... <unfinished ...>"
# then, on the same pid's line, "<... clone resumed>, ...) = PID".
strace_cloned() {
	awk '
	$2 ~ /^clone3?\(/ && /CLONE_NEWUSER/ {
		if (match($0, /= [0-9]+$/)) { print substr($0, RSTART + 2); exit }
		if (/<unfinished \.\.\.>$/) split_[$1] = 1
		next
	}
	($1 in split_) && $2 == "<..." && $3 ~ /^clone3?$/ && match($0, /= [0-9]+$/) {
		print substr($0, RSTART + 2); exit
	}' "$1" 2>/dev/null || true	# no log yet: nothing
}

# SOCKBUF_PY: a Python program (for -c, so that a sandbox can run it) that
# queues what it can on 30 of its own loopback connections, never read,
# and prints "queued MIB": about 110 MiB where nothing bounds the buffers.
SOCKBUF_PY='
import socket, time
l = socket.socket()
l.bind(("127.0.0.1", 0))
l.listen(64)
held, total = [], 0
for i in range(30):
    c = socket.create_connection(l.getsockname())
    s, _ = l.accept()
    c.setblocking(False)
    held.append((c, s))
    end = time.monotonic() + 2
    while time.monotonic() < end:
        try:
            total += c.send(b"x" * 65536)
        except BlockingIOError:
            break
print("queued", total >> 20)
'

# ---- leases (serve.sh, snapshot.sh: $PY, $T and $SOCK are theirs) --------

# open_lease [flood] [PORT TOKEN]: a client in the background holds a lease
# on $SOCK (or 127.0.0.1:PORT with TOKEN) until it is killed (by its pid,
# in LPID, at most 120 s); the lease's id in LEASE.  With flood, it then
# sends a request head and 64 MiB of its body on the lease's connection,
# and never reads.
open_lease() {
	local i=0 mode=${1:-hold}
	rm -f "$T/lease" "$T/lease.sent"
	$PY - "$mode" "$T/lease" "$SOCK" "${2:-}" "${3:-}" <<'EOF' &
import json, os, socket, sys, time
mode, out, sock, port, token = sys.argv[1:6]
if port:
    s = socket.create_connection(("127.0.0.1", int(port)), timeout=10)
    auth = "Authorization: Bearer %s\r\n" % open(token).read().strip()
else:
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(10)
    s.connect(sock)
    auth = ""
s.sendall(("POST /v1/leases HTTP/1.1\r\nHost: x\r\n%sContent-Length: 0\r\n\r\n"
           % auth).encode())
data = b""
while b"}\n" not in data and len(data) < 65536:
    c = s.recv(4096)
    if not c:
        break
    data += c
head, _, body = data.partition(b"\r\n\r\n")
status = head.split(b"\r\n")[0].decode()
try:
    lease = json.loads(body.split(b"\r\n")[1])["lease"] if " 200 " in status else ""
except (ValueError, IndexError, KeyError):
    lease = ""
with open(out + ".tmp", "w") as f:
    f.write("%s\n%s\n%s\n" % (lease, status, body[:300].decode(errors="replace")))
os.rename(out + ".tmp", out)
if mode == "flood":
    s.sendall(b"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\n%s"
              b"Content-Length: 1000000000\r\n\r\n" % auth.encode())
    n = 0
    try:
        while n < 64 << 20:
            n += s.send(b"x" * 65536)
    except OSError:
        pass
    open(out + ".sent", "w").write("%d\n" % n)
time.sleep(120)
EOF
	LPID=$!
	echo "$LPID" >> "$T/watchdogs"
	while [ ! -s "$T/lease" ] && [ $i -lt 200 ]; do
		sleep 0.05; i=$((i + 1))
	done
	LEASE=$(head -1 "$T/lease" 2>/dev/null)
}

# close_lease: the holder SIGKILLed, as any client may die; waited for
close_lease() {
	kill -KILL "$LPID" 2>/dev/null
	wait "$LPID" 2>/dev/null || true
}

# run_swapping_at_opens NAME TARGET CMD...: CMD (a root `corral run`) in
# the background under strace, held at each of its clones: at the first
# of the supervisor's helpers (before it opens the binds' sources, to
# idmap them) NAME becomes a link to TARGET; at init's clone (before init
# walks to the mount points, which no link passes) NAME is itself again,
# as a sandbox writing NAME's directory could do.  CMD's output in
# $T/out and $T/err; 1 (failed) if corral was not held at both.
run_swapping_at_opens() {
	local name=$1 target=$2 tracer pid p n=0 seen=0 swapped=0 back=0 i last
	shift 2
	# not local: the EXIT trap runs after the test's function returns
	SWAP_HELD=""
	timeout 60 strace -o "$T/st" -e trace=clone,clone3 \
		-e inject=clone,clone3:signal=SIGSTOP:when=1+2 "$@" > "$T/out" 2> "$T/err" < /dev/null &
	tracer=$!
	# on any failure: the tracer ended, and corral let go on (a SIGSTOP
	# strace injected would hold it after strace is gone)
	# shellcheck disable=SC2064 # the tracer's pid, now
	trap "kill $tracer 2>/dev/null || true; sleep 0.2; "'[ -z "$SWAP_HELD" ] || kill -CONT $SWAP_HELD 2>/dev/null || true' EXIT
	for i in $(seq 1 600); do
		seen=$(grep -c -- '--- stopped by SIGSTOP ---' "$T/st" 2>/dev/null || true)
		if [ "${seen:-0}" -gt "$n" ]; then
			n=$seen
			last=$(grep '^clone' "$T/st" | tail -1)
			if [[ $last != *CLONE_NEWUSER* ]] && [ "$swapped" = 0 ]; then
				mv "$name" "$name.real" && ln -s "$target" "$name" && swapped=1
			elif [[ $last == *CLONE_NEWUSER* ]] && [ "$swapped" = 1 ] && [ "$back" = 0 ]; then
				rm "$name" && mv "$name.real" "$name" && back=1
			fi
			pid=$(pgrep -P "$(pgrep -P "$tracer" -x strace)" || true)
			SWAP_HELD=$pid
			for p in $pid; do kill -CONT "$p" 2>/dev/null || true; done
		fi
		kill -0 "$tracer" 2>/dev/null || break
		sleep 0.05
	done
	kill "$tracer" 2>/dev/null || true
	wait "$tracer" 2>/dev/null || true
	if [ "$swapped" != 1 ] || [ "$back" != 1 ]; then
		fail "not held before the sources were opened and again before init: $(head -c 600 "$T/st")"
		return 1
	fi
}
