#!/bin/bash
# audit.sh - the events file as evidence: real runs write a hash chain,
# `corral audit verify` accepts it untouched and names the first bad line
# after a one-byte edit, a deleted line or a reordered pair; `corral audit
# show` filters the timeline.
#
#   tests/audit.sh CORRAL HELPERS_DIR [TEST...]
#
# Runs as whoever calls it (root or not).  Egress events come from a curl
# the proxy denies (--net proxy --allow x.test): no packet leaves the host.
set -u
CORRAL=$(readlink -f "$1")
shift 2
HERE=$(cd "$(dirname "$0")" && pwd)
TEST_TMP=$(mktemp -d "${TMPDIR:-/tmp}/corral-audit.XXXXXX")
chmod 755 "$TEST_TMP"
trap 'rm -rf "$TEST_TMP"' EXIT
. "$HERE/lib.sh"

# audit ARGS...: corral audit, stdout+stderr to $T/out, exit code to $T/rc.
audit() {
	local rc=0
	timeout 60 "$CORRAL" audit "$@" > "$T/out" 2>&1 < /dev/null || rc=$?
	echo "$rc" > "$T/rc"
	# by the shell, not cat: every check here reads these, a fork each
	printf '%s\n' "$(< "$T/out")"
}
rc() { local r; read -r r < "$T/rc"; echo "$r"; }

# A log from three real runs in $T/log: a plain one, then two whose curls
# the proxy denies (three egress.denied events in all).  The runs are the
# same for every test that asks: made by the first, kept whole in
# $TEST_TMP, and each later test (or a second ask) gets its own copy to
# read and tamper with (three sandboxes a test were most of this suite's
# CPU: 12 s a check).
mklog() {
	local rc
	if [ -s "$TEST_TMP/runs.jsonl" ]; then
		cp "$TEST_TMP/runs.jsonl" "$T/log"
	else
		for cmd in "/bin/true" \
			   "curl -sS -m 10 http://evil.test/" \
			   "curl -sS -m 10 http://evil.test/ http://x.test:8080/"; do
			rc=0
			timeout 120 "$CORRAL" run --net proxy --allow x.test --events "$T/log" \
				-- $cmd > /dev/null 2>&1 < /dev/null || rc=$?
			[ "$rc" -lt 124 ] || fail "corral run $cmd: exit $rc"
		done
		[ "$(grep -c '"type":"egress.denied"' "$T/log")" = 3 ] ||
			fail "want 3 egress.denied events: $(cat "$T/log")"
		cp "$T/log" "$TEST_TMP/runs.jsonl"
	fi
	NLINES=$(wc -l < "$T/log")
	MID=$(( (NLINES + 1) / 2 ))
}

# line N: the Nth line of the log; sandbox N: the id of the Nth run.
line() { sed -n "${1}p" "$T/log"; }
sandbox() { grep '"type":"exec.start"' "$T/log" | sed -n "${1}p" | json sandbox; }

# tamper OP N: edit the log in place.  edit: one byte of line N's "time"
# (the file stays JSON); delete: line N; swap: lines N and N+1.
tamper() {
	/usr/bin/python3 - "$T/log" "$1" "$2" <<'EOF'
import sys
path, op, n = sys.argv[1], sys.argv[2], int(sys.argv[3]) - 1
lines = open(path, "rb").read().split(b"\n")
if op == "edit":
    i = lines[n].index(b'"time":"') + len(b'"time":"') + 3   # last digit of the year
    lines[n] = lines[n][:i] + bytes([lines[n][i] ^ 1]) + lines[n][i + 1:]
elif op == "delete":
    del lines[n]
elif op == "swap":
    lines[n], lines[n + 1] = lines[n + 1], lines[n]
open(path, "wb").write(b"\n".join(lines))
EOF
}

t_real_runs_verify() {
	mklog
	out=$(audit verify "$T/log")
	expect_eq "exit" "$(rc)" 0
	expect_contains "verdict" "$out" "log: ok, $NLINES lines verified; head "
	# the chain, recomputed by another SHA-256 than corral's
	/usr/bin/python3 - "$T/log" <<'EOF' || fail "chain does not recompute"
import hashlib, json, sys
prev = "0" * 64
for raw in open(sys.argv[1], "rb").read().split(b"\n")[:-1]:
    assert json.loads(raw)["prev"] == prev, raw
    assert raw.endswith(b',"prev":"' + prev.encode() + b'"}'), "prev is not last"
    prev = hashlib.sha256(raw).hexdigest()
EOF
	expect_contains "head" "$out" "$(/usr/bin/python3 -c '
import hashlib, sys
print(hashlib.sha256(open(sys.argv[1], "rb").read().split(b"\n")[-2]).hexdigest())' "$T/log")"
	# the old layout is kept: type right after sandbox
	expect_contains "layout" "$(grep egress.denied "$T/log" | head -1)" \
		"\"sandbox\":\"$(sandbox 2)\",\"type\":\"egress.denied\",\"protocol\":\"http\",\"host\":\"evil.test\""
}

t_one_byte_edit_fails() {
	mklog
	cp "$T/log" "$T/orig"
	tamper edit "$MID"
	expect_eq "bytes changed" "$(cmp -l "$T/orig" "$T/log" | wc -l)" 1
	out=$(audit verify "$T/log")
	expect_eq "exit" "$(rc)" 1
	expect_contains "names the line" "$out" \
		"line $((MID + 1)): prev does not match the hash of line $MID (edited, deleted or reordered)"
	# in the denied host of a denial: same verdict, one line after it
	cp "$T/orig" "$T/log"
	n=$(grep -n egress.denied "$T/log" | head -1 | cut -d: -f1)
	sed -i "${n}s/evil\.test/evil.tesu/" "$T/log"
	out=$(audit verify "$T/log")
	expect_eq "exit (host)" "$(rc)" 1
	expect_contains "host edit" "$out" "line $((n + 1)): prev does not match the hash of line $n"
}

t_deleted_line_fails() {
	mklog
	sed -i "${MID}d" "$T/log"
	out=$(audit verify "$T/log")
	expect_eq "exit" "$(rc)" 1
	expect_contains "names the line" "$out" "line $MID: prev does not match the hash of line $((MID - 1))"
	sed -i 1d "$T/log"
	out=$(audit verify "$T/log")
	expect_eq "exit (first)" "$(rc)" 1
	expect_contains "first line" "$out" "line 1: prev is not 64 zeros"
}

t_reordered_pair_fails() {
	mklog
	tamper swap "$MID"
	out=$(audit verify "$T/log")
	expect_eq "exit" "$(rc)" 1
	expect_contains "names the line" "$out" "line $MID: prev does not match"
}

t_cut_short_then_continued() {
	mklog
	truncate -s -5 "$T/log"
	out=$(audit verify "$T/log")
	expect_eq "exit" "$(rc)" 0
	expect_contains "incomplete" "$out" \
		"verified up to line $((NLINES - 1)), the last complete line; line $NLINES has no newline"
	# a later run starts on a new line and chains to the torn bytes
	timeout 120 "$CORRAL" run --events "$T/log" -- /bin/true > /dev/null 2>&1
	expect_eq "lines" "$(wc -l < "$T/log")" $((NLINES + 2))
	out=$(audit verify "$T/log")
	expect_eq "exit (continued)" "$(rc)" 0
	expect_contains "crash" "$out" "1 line cut short by a crash (the first: line $NLINES)"
	# the torn bytes are in the chain: editing them is still caught
	sed -i "${NLINES}s/^./X/" "$T/log"
	out=$(audit verify "$T/log")
	expect_eq "exit (torn line edited)" "$(rc)" 1
	expect_contains "names it" "$out" "line $NLINES: not valid JSON"
	expect_contains "and why" "$out" "no line after it chains to it"
	# and a line that is not JSON, with nothing chaining to it, is bad
	rm -f "$T/log"
	mklog
	sed -i "3s/.*/not json/" "$T/log"
	out=$(audit verify "$T/log")
	expect_eq "exit (not JSON)" "$(rc)" 1
	expect_contains "says" "$out" "line 3: not valid JSON"
}

# A run whose events file did not take all of its lines says so, and a 0
# becomes 125: a sandbox with an rw bind on the log's file system fills
# it, and the record used to stop there in silence (the run "exited with
# status 0"; its denials after the fill and its exec.end in no line).
t_events_not_written_are_said() {
	local rc=0 reason
	timeout 120 "$CORRAL" run --events /dev/full -- /bin/true > /dev/null 2> "$T/err" \
		< /dev/null || rc=$?
	expect_eq "exit" "$rc" 125
	expect_contains "said" "$(< "$T/err")" \
		"could not be written to the events file /dev/full: No space left on device"
	[ "$(id -u)" = 0 ] || return 0
	# the sandbox fills the log's file system (a tmpfs of this test's own
	# mount namespace, gone with it) through its rw bind, then is denied
	printf '{"events": {"verbatim": 1000}}\n' > "$T/p.json"
	chmod 644 "$T/p.json"
	mkdir "$T/small"
	unshare -m --propagation private /bin/bash -c '
		mount -t tmpfs -o size=256k tmpfs "$1" && mkdir -m 777 "$1/rw" || exit 99
		rc=0
		timeout 120 "$2" run --json --policy "$3/p.json" --rw "$1/rw:/data" \
			--events "$1/ev" -- /bin/sh -c "head -c 300000 /dev/zero > /data/fill
				for i in \$(seq 40); do unshare -U true 2>/dev/null; done
				exit 0" > "$3/out" 2> "$3/err" < /dev/null || rc=$?
		echo "$rc" > "$3/rc"
		grep -c "\"type\":\"syscall.denied\"" "$1/ev" > "$3/written"' \
		_ "$T/small" "$CORRAL" "$T"
	expect_eq "filled, then denied: exit" "$(< "$T/rc")" 125
	reason=$(json reason < "$T/out")
	expect_contains "the run's own end" "$reason" "exited with status 0; denied: syscall unshare; 40 denials"
	expect_contains "the gap said" "$reason" "could not be written to the events file $T/small/ev: No space left on device"
	[ "$(< "$T/written")" -lt 40 ] || fail "the fill left room for every denial: $(< "$T/written") written"
}

# An events file in a writable bind is refused: the sandbox could replace
# its own record (unlink it, write a log of its making with a chain of its
# own: the chain has no key, `audit verify` said "ok").  Found by inode: a
# symlink to the directory or to the file, or the file bound itself, is
# refused as well.
FORGE_PY='
import hashlib, json, os
os.unlink("/data/ev.jsonl")
prev, out = "0" * 64, b""
for o in [{"seq": 1, "type": "exec.start"}, {"seq": 2, "type": "exec.end", "exit_code": 0}]:
    o["prev"] = prev
    t = json.dumps(o, separators=(",", ":")).encode()
    out += t + b"\n"
    prev = hashlib.sha256(t).hexdigest()
open("/data/ev.jsonl", "wb").write(out)
print("replaced")
'
t_events_file_out_of_the_sandboxs_reach() {
	local rc
	printf '%s' "$FORGE_PY" > "$T/forge.py"
	chmod 644 "$T/forge.py"
	mkdir -m 777 "$T/rw"
	mkdir "$T/safe"
	ln -s "$T/rw" "$T/alias"
	ln -s "$T/rw/ev.jsonl" "$T/safe/ev.jsonl"
	for events in "$T/rw/ev.jsonl" "$T/alias/ev.jsonl" "$T/safe/ev.jsonl"; do
		rc=0
		timeout 120 "$CORRAL" run --rw "$T/rw:/data" --events "$events" \
			--ro "$T/forge.py:/opt/forge.py" -- /usr/bin/python3 /opt/forge.py \
			> "$T/out" 2> "$T/err" < /dev/null || rc=$?
		expect_eq "$events: exit" "$rc" 125
		expect_contains "$events: why" "$(< "$T/err")" \
			"the events file $events lies in the writable bind $T/rw"
		expect_not_contains "$events: nothing ran" "$(< "$T/out")" replaced
	done
	: > "$T/file.jsonl"
	rc=0
	timeout 120 "$CORRAL" run --rw "$T/file.jsonl:/data/log" --events "$T/file.jsonl" \
		-- /bin/true > /dev/null 2> "$T/err" < /dev/null || rc=$?
	expect_eq "the file bound: exit" "$rc" 125
	expect_contains "the file bound: why" "$(< "$T/err")" "lies in the writable bind $T/file.jsonl"
	# outside every rw bind: runs, and the record is its own
	rc=0
	timeout 120 "$CORRAL" run --rw "$T/rw:/data" --events "$T/ev.jsonl" -- /bin/true \
		> /dev/null 2> "$T/err" < /dev/null || rc=$?
	expect_eq "outside: exit" "$rc" 0
	expect_contains "outside: recorded" "$(< "$T/ev.jsonl")" '"type":"exec.end"'
}

# The log's directory bind-mounted by the host beneath an rw bind's source:
# the bind is recursive, so the sandbox writes it there, though the walk
# up from the log never passes the source.
t_events_file_mounted_beneath_a_rw_bind() {
	[ "$(id -u)" = 0 ] || { skip "a host bind mount needs root"; return 77; }
	local rc=0
	# the forgery of t_events_file_out_of_the_sandboxs_reach, at /ws/data
	printf '%s' "${FORGE_PY//\/data\//\/ws\/data\/}" > "$T/forge.py"
	chmod 644 "$T/forge.py"
	mkdir -m 777 "$T/logs"
	mkdir -p "$T/ws/data"
	mount --bind "$T/logs" "$T/ws/data" || { fail "mount --bind"; return 1; }
	timeout 120 "$CORRAL" run --rw "$T/ws:/ws" --events "$T/logs/ev.jsonl" \
		--ro "$T/forge.py:/opt/forge.py" -- /usr/bin/python3 /opt/forge.py \
		> "$T/out" 2> "$T/err" < /dev/null || rc=$?
	umount "$T/ws/data" || fail "umount $T/ws/data"
	expect_not_contains "nothing ran" "$(< "$T/out")" replaced
	expect_eq "exit" "$rc" 125
	expect_contains "why" "$(< "$T/err")" \
		"the events file $T/logs/ev.jsonl lies in the writable bind $T/ws"
}

t_show_filters() {
	mklog
	out=$(audit show "$T/log")
	expect_eq "exit" "$(rc)" 0
	expect_eq "events shown" "$(grep -vc '^-- ' "$T/out")" "$NLINES"
	expect_contains "date" "$(head -1 "$T/out")" "-- $(date -u +%Y-)"

	out=$(audit show "$T/log" --type egress.denied)
	expect_eq "denials" "$(grep -c '  egress\.denied  ' "$T/out")" 3
	expect_eq "only denials" "$(grep -vc -e '^-- ' -e '  egress\.denied  ' "$T/out")" 0
	expect_contains "host and reason" "$out" "evil.test:80 protocol=http pid="
	expect_contains "host and reason" "$out" "method=GET / evil.test:80 is not in the allowlist"
	expect_contains "port" "$out" "x.test:8080"

	s2=$(sandbox 2)
	out=$(audit show --sandbox "$s2" "$T/log")
	expect_eq "sandbox events" "$(grep -c "  $s2  " "$T/out")" "$(grep -c "\"sandbox\":\"$s2\"" "$T/log")"
	expect_eq "only that sandbox" "$(grep -vc -e '^-- ' -e "  $s2  " "$T/out")" 0
	expect_contains "exec.start" "$out" "exec.start"

	out=$(audit show "$T/log" --sandbox "$(sandbox 3)" --type egress)
	expect_eq "sandbox 3 egress" "$(grep -c '  egress\.denied  ' "$T/out")" 2
	out=$(audit show "$T/log" --sandbox "$(sandbox 1)" --type egress.denied)
	expect_eq "sandbox 1 denials" "$(grep -vc '^-- ' "$T/out")" 0
	out=$(audit show "$T/log" --call no-such-call)
	expect_eq "call" "$(grep -vc '^-- ' "$T/out")" 0
}

t_usage_and_errors() {
	audit > /dev/null;			expect_eq "no args" "$(rc)" 2
	audit verify > /dev/null;		expect_eq "no file" "$(rc)" 2
	audit verify a b > /dev/null;		expect_eq "two files" "$(rc)" 2
	# an option is not a FILE: it was "--json: No such file or directory"
	out=$(audit verify --json);		expect_eq "verify --json" "$(rc)" 2
	expect_contains "verify --json: said" "$out" 'audit verify: unknown option "--json"'
	audit frobnicate x > /dev/null;		expect_eq "unknown" "$(rc)" 2
	audit show --bogus x > /dev/null;	expect_eq "bad option" "$(rc)" 2
	audit show x --type > /dev/null;	expect_eq "no value" "$(rc)" 2
	out=$(audit verify "$T/missing")
	expect_eq "missing" "$(rc)" 2
	expect_contains "names it" "$out" "$T/missing"
	out=$(audit show "$T/missing");		expect_eq "show missing" "$(rc)" 2
	: > "$T/empty"
	out=$(audit verify "$T/empty")
	expect_eq "empty" "$(rc)" 0
	expect_contains "empty says" "$out" "0 lines verified"
	for h in "--help" "verify --help" "show --help"; do
		out=$(audit $h)
		expect_eq "$h" "$(rc)" 0
		expect_contains "$h text" "$out" "Exit status"
	done
	expect_contains "listed" "$("$CORRAL" --help)" "audit verify FILE"
}

# A tampered log is what verify reads, and its reason quotes the bad
# line (jansson's "near '...'", up to 20 bytes): a line's U+009D
# "52;c;eA==" U+009C (OSC 52 in C1 controls, UTF-8) set the operator's
# clipboard through `corral audit verify`, U+009B "2J" (CSI) cleared the
# screen, a U+202E turned the rest around.  Shown as \xNN; the file's name
# too, which a directory's listing gave.
t_verify_quotes_a_tampered_line_as_text() {
	local f
	for f in $'osc\xc2\x9d52' $'csi\xe2\x80\xae'; do
		case $f in
		osc*) printf '{"seq":1,"a":"\xc2\x9d52;c;eA==\xc2\x9c\x01"}\n' > "$T/$f.jsonl" ;;
		*) printf '{"seq":1,"a":"\xc2\x9b2J\xe2\x80\xaegnp.sh\x01"}\n' > "$T/$f.jsonl" ;;
		esac
		out=$(audit verify "$T/$f.jsonl")
		expect_eq "$f: exit" "$(rc)" 1
		! LC_ALL=C grep -q $'\xc2[\x80-\x9f]\|\xe2\x80\xae' "$T/out" ||
			fail "$f: a control on the terminal: $(od -c "$T/out" | head)"
	done
	out=$(audit verify "$T/"$'osc\xc2\x9d52'.jsonl)
	expect_contains "osc: as text" "$out" \
		"osc\\xc2\\x9d52.jsonl: line 1: not valid JSON: control character 0x1 near '\"\\xc2\\x9d52;c;eA==\\xc2\\x9c'"
	out=$(audit verify "$T/"$'csi\xe2\x80\xae'.jsonl)
	expect_contains "csi: as text" "$out" \
		"csi\\xe2\\x80\\xae.jsonl: line 1: not valid JSON: control character 0x1 near '\"\\xc2\\x9b2J\\xe2\\x80\\xaegnp.sh'"
}

run_tests "$@"
echo "audit ($(id -un 2>/dev/null || id -u)): $PASS passed, $FAIL failed, $SKIP skipped"
[ -n "$FAILED_NAMES" ] && echo "failed:$FAILED_NAMES"
[ "$FAIL" -eq 0 ]
