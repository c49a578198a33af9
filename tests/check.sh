#!/bin/bash
# check.sh - the whole suite, as `make check` runs it:
#   1. a build with -Wall -Wextra -Werror, and one with AddressSanitizer +
#      UBSan; the unit tests of both, six at once
#   2. four lanes at once, and a fifth beside them (a sandbox test
#      waits on the kernel and on its clients; the lanes print how busy
#      the CPUs were):
#      - every suite as root, built with the sanitizers (serve.sh, the
#        longest, in two parts: the second in the third lane, with images,
#        snapshot.sh and the OCI runtime; abort.sh in the second; mcp.sh,
#        the OpenAPI check, files.sh and results.sh in the fourth);
#      - every suite as an unprivileged user (uid 65534), first with cgroups
#        delegated to it, then without (the rlimit fallback), built -O2
#        (serve.sh's second part, net.sh, snapshot.sh, abort.sh, export.sh,
#        results.sh and the Python client in the fourth lane), then
#        abort.sh as root under the sanitizers and apt-get inside;
#      - serve.sh's second part, images, snapshot.sh and the OCI runtime
#        under the sanitizers, CPython's tests inside, as root;
#      - serve.sh's second part, net.sh, snapshot.sh, abort.sh, export.sh,
#        results.sh and the Python client as uid 65534, then
#        mcp.sh, the OpenAPI check, files.sh and results.sh as root under
#        the sanitizers;
#      and beside them the fuzz targets' corpora replayed, then, at nice
#      19, the daemon's API and corral mcp's tools driven at random
#      (chaos_*.py), then tls.sh and floods.sh as root under the
#      sanitizers
#   3. identity, soak and load, alone (they edit or count what the whole
#      host holds)
# Each suite runs once as root, under the sanitizers, and once unprivileged
# as users run it, but for the tests of the daemon's and the MCP server's
# front (front_test in lib.sh), the same code whatever uid runs it, which
# run as root only, and the floods' bounds (bound_test), which run in the
# -O2 build as uid 65534 only; the lanes share nothing a test counts (their cgroups have
# different owners, their daemons different sockets and state directories).
# Ends with one line "N passed, N failed".
set -u
cd "$(dirname "$0")/.."
ROOT=$(pwd)
NOBODY=65534
STAGE=""
DELEGATED=""
TALLY=$(mktemp /tmp/corral-check-tally.XXXXXX)
# every step's and test's wall and CPU ms: "WALL CPU NAME (STEP)"
TIMES=$(mktemp /tmp/corral-check-times.XXXXXX)
LANES=""

# children_cpu: a step's CPU time
. tests/lib.sh
# the parent groups the check made go at its end (scripts/cgroup-parents.sh)
. scripts/cgroup-parents.sh
cg_parents_note

cleanup() {
	local pid
	for pid in $LANES ${NPM_PID:-}; do kill -- "-$pid" 2>/dev/null; done
	undelegate_cgroups
	cg_parents_remove check
	[ -n "$STAGE" ] && rm -rf "$STAGE"
	[ -n "${LANE_DIR:-}" ] && rm -rf "$LANE_DIR"
	# CHECK_TIMES=FILE keeps every step's and test's times, for trimming
	[ -n "${CHECK_TIMES:-}" ] && cp "$TIMES" "$CHECK_TIMES"
	rm -f "$TALLY" "$TIMES" "${NPM_LOG:-}"
}
trap cleanup EXIT
# a signal ends the check through its EXIT trap: the lanes go with it
trap 'exit 130' INT
trap 'exit 143' TERM

# tally LOGFILE: the "N passed, N failed" lines a step printed, to $TALLY
# (lanes run as other processes: a file is what they share).
tally() {
	sed -n 's/.*\b\([0-9]\+\) passed, \([0-9]\+\) failed.*/\1 \2/p' "$1" >> "$TALLY"
}

# step NAME CMD...: run, show, count; a step that dies without a tally line
# counts as one failure.
step() {
	local name=$1 log rc=0 t0 cpu0 secs
	shift
	log=$(mktemp)
	echo "== $name"
	t0=$(date +%s)
	children_cpu "$log.times"
	cpu0=$CHILDREN_CPU_MS
	"$@" > "$log" 2>&1 || rc=$?
	children_cpu "$log.times"
	secs=$(( $(date +%s) - t0 ))
	echo "   ($secs s, cpu $(( (CHILDREN_CPU_MS - cpu0) / 1000 )) s)"
	# each test's wall and CPU time (tests/lib.sh), for the list of the
	# costliest at the end
	printf '%d %d %s\n' "$(( secs * 1000 ))" "$(( CHILDREN_CPU_MS - cpu0 ))" "[step] $name" >> "$TIMES"
	sed -n 's/^ok - \([^ ]*\) # \([0-9]*\) ms, cpu \([0-9]*\) ms$/\2 \3 \1/p' "$log" |
		sed "s|\$| ($name)|" >> "$TIMES"
	grep -v '^ok - ' "$log" | tail -200
	if grep -q ' passed, [0-9]* failed' "$log"; then
		tally "$log"
		[ $rc -ne 0 ] && ! grep -q ' [1-9][0-9]* failed' "$log" && {
			echo "   (exit $rc)"; echo "0 1" >> "$TALLY"; }
	elif [ $rc -eq 0 ]; then
		echo "1 0" >> "$TALLY"
	else
		echo "   $name failed (exit $rc)"
		echo "0 1" >> "$TALLY"
	fi
	rm -f "$log" "$log.times"
}

build() {	# build DIR EXTRA_CFLAGS LDFLAGS
	# make rebuilds what changed, not what was built with other flags: a
	# tree built before a flag changed is compiled again whole (objects
	# made with libubsan's calls, then linked without it, did not link).
	# Only the objects go, and only the build's: build/ also holds the npm
	# packages, which the check fetches into it meanwhile (npm_wait).
	local flags="$2 | $3" d
	if [ -d "$1" ] && [ "$(cat "$1/.check-flags" 2>/dev/null)" != "$flags" ]; then
		for d in "$1"/*/; do
			case ${d%/} in
			*/mcp-sdk | */inspector | */node22) continue ;;
			esac
			find "$d" -name '*.o' -delete
		done
	fi
	make -s -j2 BUILD="$1" EXTRA_CFLAGS="$2" LDFLAGS="$3" all &&
		printf '%s\n' "$flags" > "$1/.check-flags"
}

# unit_tests BUILD...: the unit tests of every BUILD, six at once.  One
# after another they took 87 s (31 of them -O2, 56 under the sanitizers)
# for 21 s of CPU: unit_audit and unit_shell wait on the disk and their
# shells most of that time, and nothing else runs before the lanes.  Each
# names its cgroups and files by its pid: none sees another's.  Their
# reports are shown whole, one after another, in the order of their names.
unit_tests() {
	local out b t rc=0
	out=$(mktemp -d)
	for b in "$@"; do
		for t in "$b"/tests/unit_*; do
			[ -x "$t" ] && echo "$t"
		done
	done | xargs -P 6 -I{} sh -c 'log=$2/$(echo "$1" | tr / _).log
		"$1" > "$log" 2>&1 || echo "$1: exit $?" >> "$log.failed"' _ {} "$out"
	for t in "$out"/*.log; do
		cat "$t"
		[ -e "$t.failed" ] && { cat "$t.failed"; rc=1; }
	done
	rm -rf "$out"
	return $rc
}

# A copy that uid 65534 can reach whatever the checkout's permissions.
# With "npm", the MCP tests' packages too (only mcp.sh needs them): 520 MB
# and 25,000 files, 3 s of CPU and 8 of wall a copy, so hard links where
# /tmp is the checkout's file system (the modes a+rX sets are then the
# checkout's too: they were world-readable packages already).
stage() {	# stage BUILD [npm]
	STAGE=$(mktemp -d /tmp/corral-check.XXXXXX)
	chmod 755 "$STAGE"
	mkdir -p "$STAGE/helpers" "$STAGE/tests" "$STAGE/tmp"
	cp "$1/corral" "$STAGE/"
	# TLS termination is loaded from beside the binary only
	cp "$1/corral-tls.so" "$STAGE/"
	cp "$1/tests/serve_client" "$STAGE/"
	cp "$1"/tests/helpers/* "$STAGE/helpers/"
	# root-owned setuid copy: what an unprivileged agent might try to use
	cp "$1/tests/helpers/euid" "$STAGE/helpers/euid-setuid"
	chmod 4755 "$STAGE/helpers/euid-setuid"
	cp tests/*.sh tests/*.py tests/*.mjs "$STAGE/tests/"
	# Node 22 and the MCP Inspector, next to the SDK as tests/mcp.sh finds them
	if [ "${2:-}" = npm ]; then
		for d in mcp-sdk node22 inspector; do
			[ -d "build/$d" ] || continue
			cp -al "build/$d" "$STAGE/" 2>/dev/null ||
				{ rm -rf "${STAGE:?}/$d"; cp -r "build/$d" "$STAGE/"; }
		done
	fi
	cp -r clients "$STAGE/"
	cp -r tests/data "$STAGE/tests/"
	cp -r policies "$STAGE/"
	chown "$NOBODY:$NOBODY" "$STAGE/tmp"
	chmod -R a+rX "$STAGE"
}

# What root does for a user who may use cgroups (see `corral doctor`),
# with the user's sandboxes bounded together to half of the host's
# processes, three quarters of its memory and, on v1, half of its TCP
# buffers' pool (README), bounds root keeps.
delegate_cgroups() {
	local ctrl d
	for ctrl in memory pids cpu cpuacct freezer; do
		[ -d "/sys/fs/cgroup/$ctrl" ] || continue
		d="/sys/fs/cgroup/$ctrl/corral.$NOBODY"
		mkdir -p "$d" && chown -R "$NOBODY:$NOBODY" "$d" && DELEGATED="$DELEGATED $d"
		case $ctrl in
		pids)
			echo $(( $(cat /proc/sys/kernel/pid_max) / 2 )) > "$d/pids.max" &&
				chown 0:0 "$d/pids.max" ;;
		memory)
			echo $(( $(awk '/^MemTotal:/ { print $2 }' /proc/meminfo) * 768 )) \
				> "$d/memory.limit_in_bytes" &&
				chown 0:0 "$d/memory.limit_in_bytes" || continue
			[ -e "$d/memory.kmem.tcp.limit_in_bytes" ] || continue
			echo $(( $(awk '{ print $3 }' /proc/sys/net/ipv4/tcp_mem) / 2 * $(getconf PAGESIZE) )) \
				> "$d/memory.kmem.tcp.limit_in_bytes" &&
				chown 0:0 "$d/memory.kmem.tcp.limit_in_bytes" ;;
		esac
	done
}

undelegate_cgroups() {
	local d
	for d in $DELEGATED; do
		find "$d" -mindepth 1 -depth -type d -exec rmdir {} + 2>/dev/null
		rmdir "$d" 2>/dev/null
	done
	DELEGATED=""
}

# A parent left (a group with a process in it, another tool's run as the
# same uid) makes the lane without cgroups one with them: its failures
# then say "cgroup v1" where "rlimit" was wanted, so say why first.
cgroups_left_note() {
	local d
	for d in /sys/fs/cgroup/*/corral."$NOBODY"; do
		[ ! -d "$d" ] || echo "   (still there: $d; the lane without cgroups will use it)"
	done
}

as_nobody() {
	setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups \
		env -i PATH=/usr/bin:/bin HOME=/nonexistent TMPDIR="$STAGE/tmp" LANG=C.UTF-8 \
		SERVE_TEST_TIMEOUT="$SERVE_TEST_TIMEOUT" SERVE_MANY="$SERVE_MANY" ${KILL_AUDIT:+KILL_AUDIT="$KILL_AUDIT"} "$@"
}

# as_root_lane BUILD LABEL [K/N]: every suite as the calling user; with
# K/N, only that part of serve.sh, the longest suite (the rest in
# rest_lane), and of the daemon's clients only the Python client (mcp.sh
# and the OpenAPI check: in split_lane).
as_root_lane() {
	local b=$1 label=$2 shard=${3:-} me
	me=$(id -un)
	# the floods' bounds run in the -O2 build only (bound_test, lib.sh)
	[ "$b" != build-asan ] || export TEST_BOUNDS=elsewhere
	step "integration as $me ($label)" tests/integration.sh "$b/corral" "$b/tests/helpers"
	# its t_nothing_left_behind counts the caller's cgroups: rest_lane's
	# sandboxes wait for it
	touch "$LANE_DIR/.integration-done"
	step "egress as $me ($label)" tests/net.sh "$b/corral" "$b/tests/helpers"
	# with K/N, TLS termination and the floods as root run in fuzz_lane
	# (ci41b: this lane ended at 714 s, that one at 95)
	[ -z "$shard" ] && step "tls termination as $me ($label)" tests/tls.sh "$b/corral"
	step "no OpenSSL in corral, its TLS plugin as $me ($label)" tests/plugin.sh "$b/corral"
	step "seccomp as $me ($label)" tests/seccomp.sh "$b/corral" "$b/tests/helpers"
	step "audit as $me ($label)" tests/audit.sh "$b/corral" "$b/tests/helpers"
	# with K/N, abort as root runs at nobody_lane's end, the daemon's
	# snapshots as root in rest_lane
	[ -z "$shard" ] && step "abort as $me ($label)" tests/abort.sh "$b/corral" "$b/tests/helpers"
	[ -z "$shard" ] && step "floods as $me ($label)" tests/floods.sh "$b/corral" "$b/tests/helpers"
	step "export as $me ($label)" tests/export.sh "$b/corral"
	step "stdio as $me ($label)" tests/stdio.sh "$b/corral" "$b/tests/helpers"
	step "terminals through the daemon as $me ($label)" tests/tty.sh "$b/corral"
	[ -z "$shard" ] && step "daemon export and snapshots as $me ($label)" tests/snapshot.sh "$b/corral"
	step "serve as $me ($label)${shard:+, part $shard}" \
		env ${shard:+TEST_SHARD=$shard} tests/serve.sh "$b/corral" "$b/tests/serve_client"
	# with K/N, files and results as root run in split_lane (ci90: this
	# lane had 389 s of CPU, that one 221)
	[ -z "$shard" ] && root_files_results "$b" "$label"
	[ -z "$shard" ] && daemon_clients "$b" "$label"
	step "a misbehaving agent as $me ($label)" tests/agent.sh "$b/corral" "$b/tests/helpers"
	step "daemon faults as $me ($label)" tests/faults.sh "$b/corral" "$b/tests/helpers"
	# with K/N, images as root run in rest_lane (the root lane is the longest)
	[ -z "$shard" ] && step "images as $me ($label)" tests/image.sh "$b/corral"
	# with K/N, the OCI runtime as root runs in rest_lane
	[ -z "$shard" ] && step "oci runtime, containerd, podman, docker as $me ($label)" tests/oci.sh "$b/corral"
	# with K/N, the Python client here, not with the other clients in
	# split_lane (the baseline's lanes: this one 562 s, that one 586)
	[ -z "$shard" ] || step "python client as $me ($label)" tests/python_client.sh "$b/corral"
	return 0
}

# root_files_results BUILD LABEL: the daemon's files API and its results,
# as the calling user
root_files_results() {
	local b=$1 label=$2 me
	me=$(id -un)
	step "files and processes as $me ($label)" tests/files.sh "$b/corral"
	step "results as $me ($label)" tests/results.sh "$b/corral"
}

# daemon_clients BUILD LABEL [ELSEWHERE]: the suites of the daemon's
# clients, as the calling user; with ELSEWHERE, the Python client's not
# (as_root_lane runs it)
daemon_clients() {
	local b=$1 label=$2 me
	me=$(id -un)
	step "mcp as $me ($label)" tests/mcp.sh "$b/corral" "$ROOT/build/mcp-sdk"
	[ -n "${3:-}" ] || step "python client as $me ($label)" tests/python_client.sh "$b/corral"
	step "docs/openapi.json against the daemon ($label)" /usr/bin/python3 tests/openapi.py "$b/corral"
}

# lane_wait FLAG SECONDS: until $LANE_DIR/FLAG exists, at most SECONDS;
# 1 if it never came (the lane that makes it failed early or hangs)
lane_wait() {
	local i
	for i in $(seq 1 "$2"); do
		[ -e "$LANE_DIR/$1" ] && return 0
		sleep 1
	done
	echo "   no $1 after $2 s"
	return 1
}

# nobody_lane BUILD LABEL ASAN_BUILD: every suite again as uid 65534 (root
# only), with cgroups delegated to it, then the ones whose behaviour
# changes without; then two of rest_lane's as root.  serve.sh's second part
# as uid 65534 runs in split_lane meanwhile: the cgroups stay delegated
# until it is done.
nobody_lane() {
	local b=$1 label=$2 asan=$3
	stage "$b" npm
	delegate_cgroups
	step "integration as uid $NOBODY, cgroups delegated ($label)" \
		as_nobody "$STAGE/tests/integration.sh" "$STAGE/corral" "$STAGE/helpers"
	# its t_nothing_left_behind counts uid $NOBODY's cgroups: split_lane's
	# sandboxes of that uid wait for it (and take the staged copy)
	echo "$STAGE" > "$LANE_DIR/.nobody-stage"
	touch "$LANE_DIR/.nobody-integration-done"
	# egress and the daemon's snapshots as uid $NOBODY: in split_lane
	step "tls termination as uid $NOBODY ($label)" \
		as_nobody "$STAGE/tests/tls.sh" "$STAGE/corral"
	step "no OpenSSL in corral, its TLS plugin as uid $NOBODY ($label)" \
		as_nobody "$STAGE/tests/plugin.sh" "$STAGE/corral"
	step "seccomp as uid $NOBODY ($label)" \
		as_nobody "$STAGE/tests/seccomp.sh" "$STAGE/corral" "$STAGE/helpers"
	step "audit as uid $NOBODY ($label)" \
		as_nobody "$STAGE/tests/audit.sh" "$STAGE/corral" "$STAGE/helpers"
	# abort and export as uid $NOBODY: in split_lane too
	step "stdio as uid $NOBODY ($label)" \
		as_nobody "$STAGE/tests/stdio.sh" "$STAGE/corral" "$STAGE/helpers"
	step "terminals through the daemon as uid $NOBODY ($label)" \
		as_nobody "$STAGE/tests/tty.sh" "$STAGE/corral"
	# the longest step of the longest lane, its first part (the second in
	# split_lane); the tests of the daemon's front (front_test in lib.sh:
	# framing, TLS, tokens) ran in the root lane under ASan, not again here
	step "serve as uid $NOBODY, cgroups delegated ($label), part 1/2" \
		as_nobody TEST_SHARD=1/2 CORRAL_EXPECT_LIMITS=cgroup TEST_FRONT=elsewhere \
		"$STAGE/tests/serve.sh" "$STAGE/corral" "$STAGE/serve_client"
	step "files and processes as uid $NOBODY, cgroups delegated ($label)" \
		as_nobody "$STAGE/tests/files.sh" "$STAGE/corral"
	# results and the Python client as uid $NOBODY: in split_lane
	step "mcp as uid $NOBODY, cgroups delegated ($label)" \
		as_nobody TEST_FRONT=elsewhere "$STAGE/tests/mcp.sh" "$STAGE/corral" "$STAGE/mcp-sdk"
	step "a misbehaving agent as uid $NOBODY, cgroups delegated ($label)" \
		as_nobody "$STAGE/tests/agent.sh" "$STAGE/corral" "$STAGE/helpers"
	step "daemon faults as uid $NOBODY, cgroups delegated ($label)" \
		as_nobody "$STAGE/tests/faults.sh" "$STAGE/corral" "$STAGE/helpers"
	step "images as uid $NOBODY ($label)" \
		as_nobody "$STAGE/tests/image.sh" "$STAGE/corral"
	step "oci runtime refuses uid $NOBODY ($label)" \
		as_nobody "$STAGE/tests/oci.sh" "$STAGE/corral"
	# split_lane's part of serve.sh as uid $NOBODY ran with the cgroups
	lane_wait .nobody-serve-done 900
	undelegate_cgroups
	cgroups_left_note
	# no freezer: pause must answer why, idle sandboxes stay idle; no
	# cgroup to kill a call's tree by: timeouts, deletes, halts, a TTL and
	# a killed daemon must still leave nothing (the tests whose outcome
	# rests on cgroups; the rest were run just above)
	step "serve as uid $NOBODY, no cgroups ($label)" \
		as_nobody CORRAL_EXPECT_LIMITS=rlimit "$STAGE/tests/serve.sh" \
		"$STAGE/corral" "$STAGE/serve_client" \
		t_sandbox_lifecycle t_exec_timeout t_delete_during_exec t_exec_client_gone \
		t_background_process t_pause_resume t_idle_freeze t_ttl t_halt \
		t_daemon_killed t_daemon_killed_frozen_sandboxes t_ids_reported
	step "results as uid $NOBODY, no cgroups ($label)" \
		as_nobody CORRAL_EXPECT_LIMITS=rlimit "$STAGE/tests/results.sh" "$STAGE/corral"
	step "a misbehaving agent as uid $NOBODY, no cgroups ($label)" \
		as_nobody "$STAGE/tests/agent.sh" "$STAGE/corral" "$STAGE/helpers"
	# no cgroup to charge the files' kernel memory to: the disk bounds them
	step "floods as uid $NOBODY, no cgroups ($label)" \
		as_nobody "$STAGE/tests/floods.sh" "$STAGE/corral" "$STAGE/helpers"
	step "integration as uid $NOBODY, no cgroups: rlimit fallback ($label)" \
		as_nobody "$STAGE/tests/integration.sh" "$STAGE/corral" "$STAGE/helpers" \
		t_limit_memory t_limit_pids t_limit_timeout_kills_tree t_doctor t_workspace_copy_on_write
	rm -rf "$STAGE"; STAGE=""
	# rest_lane's, as root, long after the root lane's leftover count:
	# that lane was the longest (the baseline's: 602 s of 604, with its
	# wait for integration.sh; this one 534)
	step "abort as root (ASan+UBSan)" tests/abort.sh "$asan/corral" "$asan/tests/helpers"
	step "apt-get install as root inside an image as root (gcc -O2)" \
		tests/apt.sh "$b/corral" "$b/tests/helpers"
}

# fuzz_lane: in a lane of its own that no step waits behind, the fuzz
# targets' corpora (fuzz/corpus/NAME: the seeds and what the fuzzers once
# found), each input once through its target linked with the ASan build
# (fuzz/replay.c), then the daemon's API and corral mcp's tools at random.
#
# Not libFuzzer itself: `make fuzz` is where new inputs are looked for.
# Six seconds a target at nice 19 beside lanes that keep both cores 97%
# busy ran the api target 533 times (ci94), and the second build of the
# library it needed, by clang, was 71 s of the check's CPU: the suite is
# CPU-bound, and that was 45 s of its wall time for a search that barely
# started.  The corpora's replay is what of it guarded against a
# regression.
#
# The random walks (tests/chaos_*.py, a seed printed for a replay) run at
# nice 19: at the normal priority their four clients took the lanes' CPU,
# and the lanes grew from 664 s to 842 s (ci88).  Bounded in time, they
# make fewer requests when starved.  Under the sanitizers as root, then
# -O2 as uid 65534.
fuzz_lane() {
	if ! lane_wait .built 900; then
		echo "0 1" >> "$TALLY"
		return 0
	fi
	step "the fuzz targets' corpora, each input once (ASan+UBSan)" replay_corpora build-asan
	step "the daemon's API at random, 30 s, as $(id -un) (ASan+UBSan)" \
		nice -n 19 /usr/bin/python3 tests/chaos_serve.py build-asan/corral 30
	step "corral mcp's tools at random, 300 calls, as $(id -un) (ASan+UBSan)" \
		nice -n 19 /usr/bin/python3 tests/chaos_mcp.py build-asan/corral 300
	[ "$(id -u)" = 0 ] || return 0
	stage build
	step "the daemon's API at random, 30 s, as uid $NOBODY (gcc -O2)" \
		as_nobody nice -n 19 /usr/bin/python3 "$STAGE/tests/chaos_serve.py" "$STAGE/corral" 30
	step "corral mcp's tools at random, 300 calls, as uid $NOBODY (gcc -O2)" \
		as_nobody nice -n 19 /usr/bin/python3 "$STAGE/tests/chaos_mcp.py" "$STAGE/corral" 300
	rm -rf "$STAGE"; STAGE=""
	# two of the root lane's, at the normal priority, once its
	# t_nothing_left_behind has counted root's cgroups; the floods'
	# bounds in the -O2 build only, as there
	if lane_wait .integration-done 900; then
		step "tls termination as $(id -un) (ASan+UBSan)" tests/tls.sh build-asan/corral
		TEST_BOUNDS=elsewhere step "floods as $(id -un) (ASan+UBSan)" \
			tests/floods.sh build-asan/corral build-asan/tests/helpers
	else
		echo "0 1" >> "$TALLY"
	fi
}

# replay_corpora BUILD: every fuzz/fuzz_NAME.c's corpus through BUILD's
# replay_NAME, a target a test
replay_corpora() {
	local b=$1 src t pass=0 failed=0
	for src in fuzz/fuzz_*.c; do
		t=${src#fuzz/fuzz_}
		t=${t%.c}
		if "$b/fuzz/replay_$t" "fuzz/corpus/$t"; then
			pass=$((pass + 1))
		else
			echo "    FAIL: $t's corpus (fuzz/corpus/$t) through $b/fuzz/replay_$t"
			failed=$((failed + 1))
		fi
	done
	echo "fuzz corpora: $pass passed, $failed failed"
}

# rest_lane ASAN_BUILD BUILD: as root, serve.sh's second part under the
# sanitizers, and root's own tests that would make the first lane the
# longer one: what those check is the sandbox's behaviour, not corral's
# memory safety, which the first lane's suites cover under the sanitizers.
rest_lane() {
	local asan=$1 b=$2 i
	[ "$(id -u)" = 0 ] || return 0
	export TEST_BOUNDS=elsewhere	# as_nobody's env -i drops it
	for i in $(seq 1 600); do
		[ -e "$LANE_DIR/.integration-done" ] && break
		sleep 1
	done
	step "serve as root (ASan+UBSan), part 2/2" \
		env TEST_SHARD=2/2 tests/serve.sh "$asan/corral" "$asan/tests/serve_client"
	step "images as root (ASan+UBSan)" tests/image.sh "$asan/corral"
	# the scans of the unpackers' memory need root and a build without
	# ASan (whose runtime keeps its own copy of the environment): no
	# lane above is both, and they ran in none
	step "images: the unpackers' memory as root (gcc -O2)" \
		tests/image.sh "$b/corral" t_unpacker_holds_no_credentials t_archive_reader_holds_no_credentials
	# abort.sh and apt-get as root: at nobody_lane's end
	step "daemon export and snapshots as root (ASan+UBSan)" tests/snapshot.sh "$asan/corral"
	step "CPython's tests outside and inside as root (gcc -O2)" tests/cpython.sh "$b/corral"
	step "oci runtime, containerd, podman, docker as root (ASan+UBSan)" tests/oci.sh "$asan/corral"
	# its two bounds (bound_test), in the -O2 build, here: the runtime
	# refuses uid 65534, so the unprivileged lane, where the other bounds
	# run, never ran them, and they ran in no lane at all
	step "oci runtime's 64-exec bounds as root (gcc -O2)" env TEST_BOUNDS= \
		tests/oci.sh "$b/corral" t_exec_denials_after_many_execs t_exec_refused_when_unwatched
}

# split_lane ASAN_BUILD: as root only, beside the others, what made the
# root and unprivileged lanes the longest (700 s of lanes of 709 at stop
# 28, the CPUs 87% busy, much of the lanes' time spent waiting on
# sandboxes, clients and timeouts): serve.sh's second part as uid 65534
# (-O2, the staged copy), then the daemon's clients as root under the
# sanitizers.
split_lane() {
	local asan=$1
	export TEST_BOUNDS=elsewhere	# as_nobody's env -i drops it
	if lane_wait .nobody-integration-done 900; then
		STAGE=$(cat "$LANE_DIR/.nobody-stage")
		step "serve as uid $NOBODY, cgroups delegated (gcc -O2), part 2/2" \
			as_nobody TEST_SHARD=2/2 CORRAL_EXPECT_LIMITS=cgroup TEST_FRONT=elsewhere \
			"$STAGE/tests/serve.sh" "$STAGE/corral" "$STAGE/serve_client"
		# two of nobody_lane's, still with its cgroups (ci88: that lane
		# was the longest, 833 s of 842, this one 463)
		step "egress as uid $NOBODY (gcc -O2)" \
			as_nobody "$STAGE/tests/net.sh" "$STAGE/corral" "$STAGE/helpers"
		step "daemon export and snapshots as uid $NOBODY (gcc -O2)" \
			as_nobody "$STAGE/tests/snapshot.sh" "$STAGE/corral"
		# ci91: the lanes ended at 741 (root), 757 (nobody), 650 and 651 s
		step "abort as uid $NOBODY (gcc -O2)" \
			as_nobody "$STAGE/tests/abort.sh" "$STAGE/corral" "$STAGE/helpers"
		step "export as uid $NOBODY (gcc -O2)" \
			as_nobody "$STAGE/tests/export.sh" "$STAGE/corral"
		# ci97: this lane ended at 509 s, that one at 596, its mcp.sh
		# now with the floods' bounds (bound_test)
		step "results as uid $NOBODY, cgroups delegated (gcc -O2)" \
			as_nobody CORRAL_EXPECT_LIMITS=cgroup "$STAGE/tests/results.sh" "$STAGE/corral"
		step "python client as uid $NOBODY, cgroups delegated (gcc -O2)" \
			as_nobody "$STAGE/tests/python_client.sh" "$STAGE/corral" "$STAGE/clients/python"
		STAGE=""
	else
		echo "0 1" >> "$TALLY"
	fi
	touch "$LANE_DIR/.nobody-serve-done"
	# the root lane's t_nothing_left_behind counts root's cgroups
	lane_wait .integration-done 900 || echo "0 1" >> "$TALLY"
	daemon_clients "$asan" "ASan+UBSan" elsewhere
	root_files_results "$asan" "ASan+UBSan"
}

# cpu_busy LINE: the share of CPU time not idle since /proc/stat's LINE
cpu_busy() {
	local now
	now=$(head -1 /proc/stat)
	awk -v a="$1" -v b="$now" 'BEGIN {
		n = split(a, x); split(b, y); t = 0
		for (i = 2; i <= n; i++) t += y[i] - x[i]
		idle = (y[5] - x[5]) + (y[6] - x[6])
		printf "%d", (t > 0 ? 100 * (t - idle) / t : 0) }'
}

# lane NAME FUNC ARGS...: FUNC in the background, its output kept for later
# (in its own process group, so that an interrupted check stops it whole).
lane() {
	local name=$1
	shift
	set -m
	"$@" > "$LANE_DIR/$name" 2>&1 &
	set +m
	LANES="$LANES $!"
}

# a serve test's watchdog: two lanes on two cores, one under the
# sanitizers, make 200 sandboxes at once slower than on a quiet machine
export SERVE_TEST_TIMEOUT=${SERVE_TEST_TIMEOUT:-300}
# the lanes are bound by the CPU of two cores: 100 sandboxes alive at once
# through one daemon, not serve.sh's 200 (measured: 28 s under ASan alone)
export SERVE_MANY=${SERVE_MANY:-100}

# UBSan's checks trap (ud2) instead of calling libubsan, and ASan reports
# the SIGILL with its stack and exit code like any of its own errors.
# Linked, libubsan's 6 MB of .bss (its stack depot) was read page by page
# by LeakSanitizer's scan at every exit: `corral --version` took 94 ms,
# 49 ms without it, and the ASan lane starts thousands of processes.
SAN="-fsanitize=address,undefined -fsanitize-undefined-trap-on-error -fno-sanitize-recover=all -fno-omit-frame-pointer"
# allocation stacks of 10 frames, not 30: every malloc records one
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:exitcode=99:malloc_context_size=10:handle_sigill=1

# The fifth lane starts first and waits for the builds: its corpora and
# random walks then take the CPU that the unit tests and the npm step
# leave, rather than finish after the other lanes, alone.
LANE_DIR=$(mktemp -d /tmp/corral-check-lanes.XXXXXX)
lane 5-fuzz fuzz_lane

# The MCP tests' packages from npm (the SDK, the Inspector, Node 22 where
# the host's is older: 520 MB, 40 s on a fresh clone, waiting mostly on the
# registry and the disk) while the builds run: the lanes stage their
# copies at once, and no test of a lane may then need the registry.
# In a process group of its own, as a lane, for the EXIT trap to stop.
NPM_LOG=$(mktemp /tmp/corral-check-npm.XXXXXX)
set -m
tests/mcp.sh build/corral "$ROOT/build/mcp-sdk" --install > "$NPM_LOG" 2>&1 &
set +m
NPM_PID=$!
npm_wait() {
	local rc=0
	wait "$NPM_PID" || rc=$?
	NPM_PID=""
	cat "$NPM_LOG"
	rm -f "$NPM_LOG"
	return $rc
}

# No debug information (-g0): a quarter of this build's CPU (the library
# 35 s of CPU, not 46, measured side by side), which nothing of the check
# reads.  build/ stays so after the check (symbols, no lines): `make clean
# all` for a debugger's build.
# (The two builds at once took 86 s and 170 s of CPU where one after the
# other took 67 s and 130: four compilers on two cores of a pti=on guest
# lose more to switching than the idle core of a link gives back.)
step "build with -Wall -Wextra -Werror" build build "-Werror -g0" ""
step "the library exports only corral.h" tests/exports.sh build
# -O1 -g1, as ASan's own documentation suggests: the library compiled in
# 18 s of CPU, not 72 (-O2 -g; libcorral.a alone, user and system time,
# measured side by side), and the check is CPU-bound from its first build
# to its last lane.  The sanitizers find the same errors; a report still
# names file and line.
# What the sandboxes cost is the kernel's, not this code's speed (a
# profile of the whole check: 2% of its CPU in corral's own code).  -O0
# was tried: its build took 14 s of CPU less in make check (ci67b), its
# unit tests 19 s more (unit_tls's loops twice theirs), the lanes the same.
step "build with ASan+UBSan" build build-asan "-Werror -O1 -g1 $SAN" "$SAN"
step "the sanitizers' flags catch an overflow, a leak and UB" env SAN="$SAN" tests/sanitizers.sh
touch "$LANE_DIR/.built"	# the fuzzers' lane goes on with both builds
# the slower, sanitized ones started first
step "unit tests (ASan+UBSan, and gcc -O2)" unit_tests build-asan build

step "npm packages for the MCP tests" npm_wait

t0=$(date +%s)
cpu0=$(head -1 /proc/stat)
if [ "$(id -u)" = 0 ]; then
	lane 1-root as_root_lane build-asan "ASan+UBSan" 1/2
	lane 2-nobody nobody_lane build "gcc -O2" build-asan
	lane 4-split split_lane build-asan
else
	lane 1-user as_root_lane build-asan "ASan+UBSan"
	lane 2-user as_root_lane build "gcc -O2"
fi
lane 3-rest rest_lane build-asan build
for pid in $LANES; do wait "$pid"; done
LANES=""
for f in "$LANE_DIR"/*; do
	echo "== lane $(basename "$f")"
	cat "$f"
done
echo "== the lanes: $(( $(date +%s) - t0 )) s, the CPUs $(cpu_busy "$cpu0")% busy"
rm -rf "$LANE_DIR"

# /etc/subuid is the host's: the identity tests edit it (and put it back),
# which would change the ids of the other lane's sandboxes midway
step "identity as root (ASan+UBSan)" tests/identity.sh build-asan/corral
if [ "$(id -u)" = 0 ]; then
	stage build
	step "identity as uid $NOBODY (gcc -O2)" as_nobody "$STAGE/tests/identity.sh" "$STAGE/corral"
	rm -rf "$STAGE"; STAGE=""
fi

# alone, so one core idles through them: the check's are short (26 s of
# wall at 200 and 150), what leaks at every cycle shows in 100 or 75, and
# make soak runs 10,000
step "soak, 100 sandboxes (make soak for 10,000)" tests/soak.sh build/corral 100
step "soak through the daemon, 75 cycles" /usr/bin/python3 tests/soak_serve.py build/corral 75
step "load: 200 calls at once, 1,000 proxied connections" /usr/bin/python3 tests/load.py build/corral


# where the time went: what to look at first when the check grows slow
costliest() {	# costliest KEY TITLE: the 20 largest by sort key KEY (1 wall, 2 CPU)
	echo "== the 20 costliest $2"
	grep -v '^[0-9]* [0-9]* \[step\]' "$TIMES" | sort -rn -k"$1","$1" | head -20 |
		awk '{printf "   %6.1f s wall %6.1f s cpu  ", $1 / 1000, $2 / 1000; $1 = $2 = ""; print substr($0, 3)}'
}
costliest 1 "tests by wall time"
costliest 2 "tests by CPU time"
echo "== the steps by CPU time"
grep '^[0-9]* [0-9]* \[step\]' "$TIMES" | sort -rn -k2,2 |
	awk '{printf "   %5d s wall %5d s cpu  ", $1 / 1000, $2 / 1000; $1 = $2 = $3 = ""; print substr($0, 4)}'

read -r PASS FAIL < <(awk '{p += $1; f += $2} END {print p + 0, f + 0}' "$TALLY")
echo "check: $PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
