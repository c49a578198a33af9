#!/bin/bash
# stdio.sh - nothing of the caller's crosses into a sandbox as an fd: the
# command's stdin, stdout and stderr are pipes corral relays (or, with -t,
# a pty made inside), so what the sandbox does through fds 0-2 never
# reaches the caller's terminal, a host file behind a redirection, or the
# tree around a directory given as stdin.  The relay keeps pipe semantics
# (EOF, EPIPE, binary bytes, exit status); -t gives a working terminal and
# the caller's own comes back exactly as it was.
#
#   tests/stdio.sh CORRAL HELPERS_DIR [TEST...]
#
# Runs as whoever calls it (root or not).  Terminals come from
# tests/ptyrun.py, which bounds every wait.
set -u
CORRAL=$(readlink -f "$1")
shift 2
HERE=$(cd "$(dirname "$0")" && pwd)
TEST_TMP=$(mktemp -d "${TMPDIR:-/tmp}/corral-stdio.XXXXXX")
chmod 755 "$TEST_TMP"
trap 'rm -rf "$TEST_TMP"' EXIT
. "$HERE/lib.sh"

PTY="/usr/bin/python3 $HERE/ptyrun.py"

# What an agent tries through the fds it was given; prints what worked.
ATTACK_PY='
import errno, fcntl, os, struct, sys, termios
def tryit(what, f):
    try:
        f()
        print("did", what, file=sys.stderr)
    except (OSError, termios.error) as e:
        print("refused", what, errno.errorcode[e.args[0]], file=sys.stderr)
for fd in (0, 1, 2):
    tryit("fchmod %d" % fd, lambda: os.fchmod(fd, 0o777))
    tryit("futimens %d" % fd, lambda: os.utime(fd, ns=(10**9, 10**9)))
    tryit("fsetxattr %d" % fd, lambda: os.setxattr(fd, "user.corral", b"x"))
    tryit("TIOCSWINSZ %d" % fd, lambda: fcntl.ioctl(fd, termios.TIOCSWINSZ,
          struct.pack("HHHH", 3, 7, 0, 0)))
    def echo_off():
        a = termios.tcgetattr(fd)
        a[3] &= ~termios.ECHO
        termios.tcsetattr(fd, termios.TCSANOW, a)
    tryit("tcsetattr %d" % fd, echo_off)
try:
    fd = os.open("..", os.O_RDONLY | os.O_DIRECTORY, dir_fd=0)
    print("walked out:", sorted(os.listdir(fd))[:5])
except OSError as e:
    print("no way out:", errno.errorcode[e.errno])
print("stdin is a", "fifo" if os.path.stat.S_ISFIFO(os.fstat(0).st_mode) else "other")
'

file_state() {	# mode, mtime, xattrs of a host file
	stat -c '%a %Y' "$1"
	/usr/bin/python3 -c 'import os, sys; print(sorted(os.listxattr(sys.argv[1])))' "$1"
}

# stdout and stderr on host files: the sandbox writes bytes, nothing else.
t_host_file_behind_stdout() {
	echo before > "$T/out"
	: > "$T/err"
	chmod 640 "$T/out" "$T/err"
	touch -d '2020-01-02 03:04:05' "$T/out" "$T/err"
	want_out=$(file_state "$T/out")
	want_err=$(file_state "$T/err")
	"$CORRAL" run -- /usr/bin/python3 -c "$ATTACK_PY" </dev/null >>"$T/out" 2>>"$T/err" ||
		fail "the run failed: $(cat "$T/err")"
	# the relay wrote, so mtime moved: put it back, then compare the rest
	touch -d '2020-01-02 03:04:05' "$T/out" "$T/err"
	expect_eq "stdout's host file" "$(file_state "$T/out")" "$want_out"
	expect_eq "stderr's host file" "$(file_state "$T/err")" "$want_err"
	expect_contains "output relayed" "$(cat "$T/out")" "stdin is a fifo"
	expect_contains "attempts made" "$(cat "$T/err")" "fchmod 1"
}

# futimens on stdout: the host file's mtime is the relay's business only
# (nothing is printed, so it must not move at all).
t_host_file_mtime() {
	: > "$T/out"
	touch -d '2020-01-02 03:04:05' "$T/out"
	want=$(stat -c %Y "$T/out")
	"$CORRAL" run -- /usr/bin/python3 -c 'import os; os.utime(1, ns=(10**9, 10**9))' \
		</dev/null >>"$T/out" 2>"$T/err" || true
	expect_eq "the host file's mtime" "$(stat -c %Y "$T/out")" "$want"
}

# A directory as stdin: openat(0, "..") must not walk the host's tree.
t_directory_as_stdin() {
	mkdir -p "$T/dir"
	out=$("$CORRAL" run -- /usr/bin/python3 -c "$ATTACK_PY" < "$T/dir" 2>/dev/null)
	expect_contains "openat(0, ..)" "$out" "no way out"
	expect_not_contains "openat(0, ..)" "$out" "walked out"
	expect_contains "stdin" "$out" "stdin is a fifo"
}

# The caller's terminal, without -t: the sandbox sees pipes, not it.
t_terminal_untouched() {
	$PTY sleep:0.2 -- "$CORRAL" run -- /usr/bin/python3 -c "$ATTACK_PY" > "$T/r"
	expect_eq "exit" "$(json exit < "$T/r")" 0
	expect_eq "termios" "$(json termios_same < "$T/r")" true
	expect_eq "window" "$(json size_after < "$T/r")" "[24, 80]"
	expect_eq "pts mode" "$(json mode_after < "$T/r")" "$(json mode_before < "$T/r")"
	expect_contains "ran" "$(json output < "$T/r")" "stdin is a fifo"
}

# The command's output reaches the terminal raw (its own stream, as ssh
# and docker relay it), but corral's line after it must be seen: output
# that ended inside a DCS or OSC string had the terminal swallow "corral:
# signaled ..." whole, SGR 8 hid it, SO drew it as line-drawing glyphs.
# Before corral's words each such string is ended and the rendition reset
# (ST, SI, ESC ( B, SGR 0), on the terminal only.
t_end_reason_not_swallowed_by_the_output() {
	local open
	for open in '\033P' '\033]0;' '\033)0\016' '\033[8m'; do
		$PTY -- "$CORRAL" run -- /bin/sh -c "printf '$open'; kill -KILL \$\$" > "$T/r"
		expect_eq "exit" "$(json exit < "$T/r")" 137
		/usr/bin/python3 - "$T/r" "$open" <<'EOF2' || fail "$open: $(head -c 600 "$T/r")"
import codecs, json, sys
out = json.load(open(sys.argv[1]))["output"]
opened = codecs.decode(sys.argv[2], "unicode_escape")
i = out.rindex(opened) + len(opened)
j = out.index("corral: ", i)
# the string ended first, the rendition reset last (term_after.py: the rest)
sys.exit(not (out[i:j].startswith("\x1b\\") and out[i:j].endswith("\x0f\x1b(B\x1b[0m")))
EOF2
	done
	# a file gets corral's words as they are
	local rc=0
	"$CORRAL" run -- /bin/sh -c 'kill -KILL $$' 2> "$T/err" || rc=$?
	expect_eq "exit, to a file" "$rc" 137
	expect_eq "to a file" "$(< "$T/err")" "corral: killed by signal 9 (SIGKILL)"
}

# A command that set its terminal's modes and ended, killed or not, left
# them set on the caller's terminal after corral exited (seen in tmux: the
# alternate screen, a 5-line scroll region, no cursor, mouse clicks typed
# as bytes, keys in application mode, no wrap, inserting): each is reset
# after the output and before corral's words, with and without -t
# (tests/term_after.py lists them).  A file gets the output as it was.
t_terminal_modes_reset_after_output() {
	local attack t
	attack=$(/usr/bin/python3 "$HERE/term_after.py" --printf)
	for t in "" "-t"; do
		$PTY -- "$CORRAL" run $t -- /bin/sh -c "printf '$attack'; kill -KILL \$\$" > "$T/r"
		expect_eq "run $t, killed: exit" "$(json exit < "$T/r")" 137
		/usr/bin/python3 "$HERE/term_after.py" "$T/r" "killed by signal 9" ||
			fail "run $t, killed"
		$PTY -- "$CORRAL" run $t -- /bin/sh -c "printf '$attack'" > "$T/r"
		expect_eq "run $t: exit" "$(json exit < "$T/r")" 0
		/usr/bin/python3 "$HERE/term_after.py" "$T/r" || fail "run $t, exited"
	done
	"$CORRAL" run -- /bin/sh -c "printf '$attack'" > "$T/out" 2> "$T/err" ||
		fail "run to a file"
	expect_eq "to a file" "$(od -An -c "$T/out")" "$(printf "$attack" | od -An -c)"
	expect_eq "stderr, a file" "$(< "$T/err")" ""
}

# ^Z on `corral run` (a shell with job control: corral's own process
# group in the foreground) stopped corral with the command's modes still
# set, and the shell's prompt came on the alternate screen, mouse reports
# on (tmux: alternate_on 1 after ^Z until `fg`).  Reset before it stops;
# then it is stopped indeed (148), and once continued it runs on: the
# SIGINT sent to it while stopped is passed on to the command (130).
t_terminal_modes_reset_before_stop() {
	local attack
	attack=$(/usr/bin/python3 "$HERE/term_after.py" --printf)
	# shellcheck disable=SC2016  # $@ and %1 are the job shell's
	$PTY 'expect:set' 'send:\x1a' 'expect:[stopped' -- /bin/sh -c \
		'set -m; "$@"; echo "[stopped $?]"; kill -INT %1; fg' sh \
		"$CORRAL" run -- /bin/sh -c "printf '$attack'; exec sleep 61" > "$T/r"
	expect_contains "stopped" "$(json output < "$T/r")" "[stopped 148]"
	/usr/bin/python3 "$HERE/term_after.py" "$T/r" "=[stopped" || fail "run, ^Z"
	expect_eq "continued, then SIGINT: exit" "$(json exit < "$T/r")" 130
	expect_contains "passed on" "$(json output < "$T/r")" "killed by signal 2"
}

# `corral run -t` stopped by a SIGTSTP from elsewhere (kill -TSTP; ^Z is
# a byte for the pty) stayed raw under the shell: dash's prompt took no
# line (tmux), and the command's modes stayed set.  Now the terminal is
# cooked and the modes reset before it stops (the job shell's stty says
# icanon), and after `fg` raw again: an "x" typed with no newline
# reaches the command (a cooked terminal would keep it for a line).
t_tty_stopped_from_elsewhere_cooked() {
	local attack
	attack=$(/usr/bin/python3 "$HERE/term_after.py" --printf)
	# shellcheck disable=SC2016  # $@ is the job shell's
	$PTY 'expect:in-vim' 'signal-fg:TSTP' 'expect:[cooked' 'send:x' 'expect:got-x' -- \
		/bin/sh -c 'set -m; g=$(stty -g); "$@"; echo "[stopped $?]"
			[ "$(stty -g)" = "$g" ] && echo "[cooked]"; fg' sh "$CORRAL" run -t -- /bin/sh -c \
		"stty -icanon; printf '$attack'; echo in-vim; echo got-\$(head -c1)" > "$T/r"
	expect_contains "stopped" "$(json output < "$T/r")" "[stopped 148]"
	expect_contains "its settings back while stopped" "$(json output < "$T/r")" "[cooked]"
	/usr/bin/python3 "$HERE/term_after.py" "$T/r" "=[stopped" || fail "run -t, TSTP"
	expect_contains "raw again after fg" "$(json output < "$T/r")" "got-x"
	expect_eq "exit" "$(json exit < "$T/r")" 0
	expect_eq "termios restored" "$(json termios_same < "$T/r")" true
}

# -t: the same attacks land on the sandbox's own pty.
t_tty_attacks_stay_inside() {
	$PTY -- "$CORRAL" run -t -- /usr/bin/python3 -c "$ATTACK_PY" > "$T/r"
	expect_eq "exit" "$(json exit < "$T/r")" 0
	expect_contains "attacks ran" "$(json output < "$T/r")" "did TIOCSWINSZ 0"
	expect_eq "termios" "$(json termios_same < "$T/r")" true
	expect_eq "window" "$(json size_after < "$T/r")" "[24, 80]"
	expect_eq "pts mode" "$(json mode_after < "$T/r")" "$(json mode_before < "$T/r")"
}

t_tty_names_its_pty() {
	$PTY snap -- "$CORRAL" run -t -- /bin/sh -c 'tty; [ -t 0 ] && [ -t 1 ] && echo terminal; stty size' > "$T/r"
	out=$(json output < "$T/r")
	expect_contains "tty" "$out" "/dev/pts/0"
	expect_contains "stdin, stdout" "$out" "terminal"
	expect_contains "first size" "$out" "24 80"
	expect_eq "exit" "$(json exit < "$T/r")" 0
	expect_eq "termios restored" "$(json termios_same < "$T/r")" true
}

t_tty_window_follows() {
	$PTY 'expect:$ ' 'send:stty size\r' 'expect:24 80' resize:33,99 signal:WINCH \
		sleep:0.3 'send:stty size; exit 3\r' -- "$CORRAL" run -t -- /bin/sh -i > "$T/r"
	expect_contains "resized" "$(json output < "$T/r")" "33 99"
	expect_eq "exit" "$(json exit < "$T/r")" 3
	expect_eq "termios restored" "$(json termios_same < "$T/r")" true
	expect_eq "outer window" "$(json size_after < "$T/r")" "[33, 99]"
}

# ^C is a byte: the pty inside makes it SIGINT for the foreground job.
t_tty_ctrl_c() {
	$PTY 'expect:ready' snap 'send:\x03' -- "$CORRAL" run -t -- /bin/sh -c 'echo ready; exec sleep 100' > "$T/r"
	expect_eq "exit" "$(json exit < "$T/r")" 130
	expect_eq "raw while it ran" "$(json raw_during < "$T/r")" true
	expect_eq "termios restored" "$(json termios_same < "$T/r")" true
}

# A shell inside has job control: background jobs, ^Z, ^C.
t_tty_job_control() {
	# ^Z only once the foreground job runs (it says so: the echo of the
	# typed line shows $((3+4)), only the job prints 7), else the shell
	# would take it and the job would block the rest of the input.  The
	# stopped job is resumed (bg) before it is killed: dash's `wait` skips
	# a job it still thinks stopped, and its `exit` then refuses ("You have
	# stopped jobs") - seen without corral too
	$PTY 'expect:$ ' 'send:sleep 100 & jobs\r' 'expect:Running' \
		'send:sh -c "echo up-$((3+4)); exec sleep 200"\r' 'expect:up-7' \
		'send:\x1a' 'expect:Stopped' \
		'send:jobs; bg %2; kill -KILL %1 %2; wait; echo still-$((40+2))\r' 'expect:still-42' \
		'send:exit 0\r' -- "$CORRAL" run -t -- /bin/sh -i > "$T/r"
	out=$(json output < "$T/r")
	# what the terminal showed, should a step below fail
	printf '%s\n' "$out" | tail -c 1500 | sed 's/^/      | /'
	expect_not_contains "job control" "$out" "job control turned off"
	expect_contains "^Z stopped the job" "$out" "Stopped"
	expect_eq "exit" "$(json exit < "$T/r")" 0
	expect_eq "termios restored" "$(json termios_same < "$T/r")" true
}

t_tty_restored_after_sigterm() {
	$PTY 'expect:ready' snap signal:TERM -- "$CORRAL" run -t -- /bin/sh -c 'echo ready; exec sleep 100' > "$T/r"
	expect_eq "exit" "$(json exit < "$T/r")" 143
	expect_eq "raw while it ran" "$(json raw_during < "$T/r")" true
	expect_eq "termios restored" "$(json termios_same < "$T/r")" true
}

t_tty_restored_after_timeout() {
	$PTY 'expect:ready' snap -- "$CORRAL" run -t --timeout 1 -- /bin/sh -c 'echo ready; exec sleep 100' > "$T/r"
	expect_eq "exit" "$(json exit < "$T/r")" 124
	expect_eq "raw while it ran" "$(json raw_during < "$T/r")" true
	expect_eq "termios restored" "$(json termios_same < "$T/r")" true
}

# -t with an input that ends (a pipe, /dev/null): its end is typed on the
# pty as a user's ^D (script(1) does so).  An interactive shell waited for
# ever for input that could not come; now it reads EOF and ends, after
# the lines it was given.  A command that reads no input is untouched.
t_tty_input_end_typed() {
	local rc=0
	timeout -k 5 60 "$CORRAL" run -t -- bash --norc -i < /dev/null > "$T/o" 2>&1 || rc=$?
	expect_eq "bash -i on /dev/null: exit" "$rc" 0 || { cat -v "$T/o" | tail -3; return 1; }
	rc=0
	printf 'echo from-the-pipe-$((6 * 7))\n' |
		timeout -k 5 60 "$CORRAL" run -t -- bash --norc -i > "$T/o" 2>&1 || rc=$?
	expect_eq "bash -i on a pipe: exit" "$rc" 0 || return 1
	expect_contains "the piped line ran" "$(< "$T/o")" from-the-pipe-42
	rc=0
	timeout -k 5 60 "$CORRAL" run -t -- python3 -q < /dev/null > "$T/o" 2>&1 || rc=$?
	expect_eq "python3's prompt on /dev/null: exit" "$rc" 0 || return 1
	rc=0
	timeout -k 5 60 "$CORRAL" run -t -- /bin/sh -c 'sleep 0.3; echo untouched' < /dev/null > "$T/o" 2>&1 || rc=$?
	expect_eq "a command that reads nothing: exit" "$rc" 0
	expect_contains "its output" "$(< "$T/o")" untouched
}

# SIGINT, SIGHUP to corral: forwarded, the command ends, the terminal is back.
t_tty_restored_after_signals() {
	for sig in INT HUP; do
		$PTY 'expect:ready' snap "signal:$sig" -- "$CORRAL" run -t -- /bin/sh -c 'echo ready; exec sleep 100' > "$T/r"
		want=$((128 + $(kill -l "$sig")))
		expect_eq "exit after SIG$sig" "$(json exit < "$T/r")" "$want"
		expect_eq "raw while it ran ($sig)" "$(json raw_during < "$T/r")" true
		expect_eq "termios restored after SIG$sig" "$(json termios_same < "$T/r")" true
	done
}

# An abort criterion (the wall budget) halts the sandbox: the terminal is
# back all the same.
t_tty_restored_after_halt() {
	printf '{"abort": {"max_wall_seconds": 1}}\n' > "$T/p.json"
	chmod 644 "$T/p.json"
	$PTY 'expect:ready' snap -- "$CORRAL" run -t --policy "$T/p.json" -- \
		/bin/sh -c 'echo ready; exec sleep 100' > "$T/r"
	expect_eq "exit (halted)" "$(json exit < "$T/r")" 137
	expect_contains "said" "$(json output < "$T/r")" "halted"
	expect_eq "raw while it ran" "$(json raw_during < "$T/r")" true
	expect_eq "termios restored" "$(json termios_same < "$T/r")" true
}

# corral's own error after the terminal went raw: the command is not found.
t_tty_restored_after_exec_failure() {
	$PTY -- "$CORRAL" run -t -- /nonexistent > "$T/r"
	expect_eq "exit" "$(json exit < "$T/r")" 127
	expect_eq "termios restored" "$(json termios_same < "$T/r")" true
}

# ---- pipe semantics through the relay ----------------------------------

t_relay_binary_round_trip() {
	head -c 20000000 /dev/urandom > "$T/in"
	"$CORRAL" run -- /bin/cat < "$T/in" > "$T/out"
	cmp "$T/in" "$T/out" || fail "bytes changed on the way"
	"$CORRAL" run -- /bin/cat < "$T/in" | cmp - "$T/in" || fail "bytes changed through a pipe"
}

t_relay_reader_gone() {
	set +e
	"$CORRAL" run -- /usr/bin/yes 2>"$T/err" | head -1 > "$T/out"
	rc=${PIPESTATUS[0]}
	set -e
	expect_eq "output" "$(cat "$T/out")" "y"
	expect_eq "exit (SIGPIPE inside)" "$rc" 141
}

t_relay_stdin_eof_and_closed() {
	out=$(printf 'a\nb\n' | "$CORRAL" run -- /bin/sh -c 'cat; echo end')
	expect_eq "eof" "$out" "$(printf 'a\nb\nend')"
	out=$("$CORRAL" run -- /bin/sh -c 'cat; echo end' <&-)
	expect_eq "closed stdin" "$out" "end"
}

# init keeps its copies of stdout and stderr until it has reaped the
# command (child.c, init_loop): the run still ends with the command, and a
# command that closes its stdout early still has it closed.
# run_sh SCRIPT: corral run of sh -c SCRIPT, its stdout in $T/o, stderr in
# $T/e, its exit status in rc
run_sh() {
	set +e
	timeout 30 "$CORRAL" run -- /bin/sh -c "$1" > "$T/o" 2> "$T/e"
	rc=$?
	set -e
}

t_relay_ends_with_command_not_pipes() {
	# the user's: stdout closed early, stderr written after, the status kept
	run_sh 'echo a; exec >&-; sleep 0.2; echo b >&2; exit 3'
	expect_eq "exit" "$rc" 3
	expect_eq "stdout" "$(cat "$T/o")" a
	expect_eq "stderr" "$(cat "$T/e")" b
	# the attacker's: a process left behind holding both pipes does not
	# keep the run alive, nor write into it after the command's end
	local t0=$SECONDS
	run_sh '(sleep 20; echo late; echo late >&2) & echo early'
	expect_eq "exit (left-behind process)" "$rc" 0
	expect_eq "stdout (left-behind process)" "$(cat "$T/o")" early
	expect_eq "stderr (left-behind process)" "$(cat "$T/e")" ""
	[ $((SECONDS - t0)) -lt 10 ] || fail "the run waited for the left-behind process"
}

t_relay_stdin_never_read() {
	set +e
	timeout 30 sh -c "yes | '$CORRAL' run -- /bin/sh -c 'exit 4'"
	rc=$?
	set -e
	expect_eq "exit" "$rc" 4
}

t_relay_exit_status_and_stderr() {
	set +e
	"$CORRAL" run -- /bin/sh -c 'echo o; echo e >&2; exit 9' > "$T/o" 2> "$T/e"
	rc=$?
	set -e
	expect_eq "exit" "$rc" 9
	expect_eq "stdout" "$(cat "$T/o")" o
	expect_eq "stderr" "$(cat "$T/e")" e
}

t_relay_json_capture() {
	echo hello | "$CORRAL" run --json -- /bin/sh -c 'read a; echo "got $a"; ls -l /proc/self/fd/0' > "$T/r"
	expect_contains "stdin relayed" "$(json stdout < "$T/r")" "got hello"
	expect_contains "stdin is a pipe" "$(json stdout < "$T/r")" "pipe:"
	set +e
	"$CORRAL" run -t --json -- true 2>"$T/e"
	rc=$?
	set -e
	expect_eq "-t with --json" "$rc" 125
}

# A caller's RLIMIT_FSIZE (ulimit -f in a CI job): a write past it was
# SIGXFSZ to corral itself, which died mid-relay (153, the command's
# stderr after it lost) and mid-write of --patch's FILE.  Now the write
# fails with EFBIG and corral says so; output lost (EFBIG here, ENOSPC on
# /dev/full for --json's result) turns the command's 0 into 125.  4 KiB: each file the command
# writes in its sandbox fits (the limit is inherited there too).
t_caller_file_size_limit() {
	local rc=0
	mkdir "$T/ws"
	[ "$(id -u)" != 0 ] || chown 65534:65534 "$T/ws"
	echo before > "$T/p"
	( ulimit -f 4
	  exec "$CORRAL" run -- /bin/sh -c 'head -c 10000 /dev/zero; echo done >&2' \
		> "$T/o" 2> "$T/e" < /dev/null ) || rc=$?
	[ "$rc" != 153 ] || fail "corral died of SIGXFSZ relaying stdout"
	expect_contains "stderr relayed after stdout's limit" "$(cat "$T/e")" done
	# the command's 0, but not all it said came out: said, and not a 0
	expect_eq "stdout past the limit: exit" "$rc" 125
	expect_contains "stdout past the limit: said" "$(cat "$T/e")" \
		"its stdout could not all be written to corral's fd 1: File too large"
	rc=0
	"$CORRAL" run --json -- /bin/true > /dev/full 2> "$T/e" < /dev/null || rc=$?
	expect_eq "--json's result lost: exit" "$rc" 125
	expect_contains "--json's result lost: said" "$(cat "$T/e")" \
		"cannot write the result to stdout: No space left on device"
	rc=0
	( ulimit -f 4
	  exec "$CORRAL" run --workspace "$T/ws" --patch "$T/p" -- /bin/sh -c \
		'for f in a b c; do head -c 2000 /dev/zero | tr "\\0" x > $f; done' \
		> "$T/o" 2> "$T/e" < /dev/null ) || rc=$?
	expect_eq "--patch past the limit: exit" "$rc" 125
	expect_contains "--patch past the limit: said" "$(cat "$T/e")" "File too large"
	expect_eq "--patch past the limit: FILE as it was" "$(cat "$T/p")" before
}

tests=$(declare -F | awk '{print $3}' | grep '^t_')
[ $# -gt 0 ] && tests="$*"
for t in $tests; do
	run_test "$t"
done
echo "stdio ($(id -un 2>/dev/null || id -u)): $PASS passed, $FAIL failed, $SKIP skipped"
[ -n "$FAILED_NAMES" ] && echo "failed:$FAILED_NAMES"
[ "$FAIL" -eq 0 ]
