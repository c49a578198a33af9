#!/bin/bash
# check.sh - the whole suite, as `make check` runs it:
#   1. a build with -Wall -Wextra -Werror
#   2. unit tests
#   3. integration tests as the calling user
#   4. as root: again as an unprivileged user (uid 65534), first with
#      cgroups delegated to it, then without (the rlimit fallback)
#   5. all of it again built with AddressSanitizer + UBSan
# Ends with one line "N passed, N failed".
set -u
cd "$(dirname "$0")/.."
ROOT=$(pwd)
NOBODY=65534
PASS=0
FAIL=0
STAGE=""
DELEGATED=""

cleanup() {
	undelegate_cgroups
	[ -n "$STAGE" ] && rm -rf "$STAGE"
}
trap cleanup EXIT

# tally LOGFILE: add the "N passed, N failed" lines a step printed.
tally() {
	local p f
	while read -r p f; do
		PASS=$((PASS + p)); FAIL=$((FAIL + f))
	done < <(sed -n 's/.*\b\([0-9]\+\) passed, \([0-9]\+\) failed.*/\1 \2/p' "$1")
}

# step NAME CMD...: run, show, count; a step that dies without a tally line
# counts as one failure.
step() {
	local name=$1 log rc=0 t0
	shift
	log=$(mktemp)
	echo "== $name"
	t0=$(date +%s)
	"$@" > "$log" 2>&1 || rc=$?
	echo "   ($(( $(date +%s) - t0 )) s)"
	grep -v '^ok - ' "$log" | tail -200
	if grep -q ' passed, [0-9]* failed' "$log"; then
		tally "$log"
		[ $rc -ne 0 ] && ! grep -q ' [1-9][0-9]* failed' "$log" && {
			echo "   (exit $rc)"; FAIL=$((FAIL + 1)); }
	elif [ $rc -eq 0 ]; then
		PASS=$((PASS + 1))
	else
		echo "   $name failed (exit $rc)"
		FAIL=$((FAIL + 1))
	fi
	rm -f "$log"
}

build() {	# build DIR EXTRA_CFLAGS LDFLAGS
	make -s -j2 BUILD="$1" EXTRA_CFLAGS="$2" LDFLAGS="$3" all
}

unit_tests() {	# unit_tests BUILD
	local rc=0
	for t in "$1"/tests/unit_*; do
		[ -x "$t" ] || continue
		"$t" || rc=1
	done
	return $rc
}

# A copy that uid 65534 can reach whatever the checkout's permissions.
stage() {	# stage BUILD
	STAGE=$(mktemp -d /tmp/corral-check.XXXXXX)
	chmod 755 "$STAGE"
	mkdir -p "$STAGE/helpers" "$STAGE/tests" "$STAGE/tmp"
	cp "$1/corral" "$STAGE/"
	cp "$1/tests/serve_client" "$STAGE/"
	cp "$1"/tests/helpers/* "$STAGE/helpers/"
	# root-owned setuid copy: what an unprivileged agent might try to use
	cp "$1/tests/helpers/euid" "$STAGE/helpers/euid-setuid"
	chmod 4755 "$STAGE/helpers/euid-setuid"
	cp tests/*.sh tests/*.py tests/*.mjs "$STAGE/tests/"
	[ -d build/mcp-sdk ] && cp -r build/mcp-sdk "$STAGE/"
	cp -r clients "$STAGE/"
	cp -r tests/data "$STAGE/tests/"
	cp -r policies "$STAGE/"
	chown "$NOBODY:$NOBODY" "$STAGE/tmp"
	chmod -R a+rX "$STAGE"
}

# What root does for a user who may use cgroups (see `corral doctor`).
delegate_cgroups() {
	local ctrl d
	for ctrl in memory pids cpu cpuacct freezer; do
		[ -d "/sys/fs/cgroup/$ctrl" ] || continue
		d="/sys/fs/cgroup/$ctrl/corral.$NOBODY"
		mkdir -p "$d" && chown -R "$NOBODY:$NOBODY" "$d" && DELEGATED="$DELEGATED $d"
	done
}

undelegate_cgroups() {
	for d in $DELEGATED; do
		find "$d" -mindepth 1 -depth -type d -exec rmdir {} + 2>/dev/null
		rmdir "$d" 2>/dev/null
	done
	DELEGATED=""
}

as_nobody() {
	setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups \
		env -i PATH=/usr/bin:/bin HOME=/nonexistent TMPDIR="$STAGE/tmp" LANG=C.UTF-8 "$@"
}

# suite BUILD LABEL [brief]: brief is the sanitizers' pass: every suite
# that drives corral's C code, as root; the uid 65534 pass and the clients
# written in Python (the API they see was checked in the first pass) are
# left to the first pass, which keeps make check near its time budget
suite() {
	local b=$1 label=$2 brief=${3:-}
	step "unit tests ($label)" unit_tests "$b"
	step "integration as $(id -un) ($label)" tests/integration.sh "$b/corral" "$b/tests/helpers"
	step "egress as $(id -un) ($label)" tests/net.sh "$b/corral" "$b/tests/helpers"
	step "seccomp as $(id -un) ($label)" tests/seccomp.sh "$b/corral" "$b/tests/helpers"
	step "audit as $(id -un) ($label)" tests/audit.sh "$b/corral" "$b/tests/helpers"
	step "abort as $(id -un) ($label)" tests/abort.sh "$b/corral" "$b/tests/helpers"
	step "floods as $(id -un) ($label)" tests/floods.sh "$b/corral" "$b/tests/helpers"
	step "export as $(id -un) ($label)" tests/export.sh "$b/corral"
	step "stdio as $(id -un) ($label)" tests/stdio.sh "$b/corral" "$b/tests/helpers"
	step "daemon export and snapshots as $(id -un) ($label)" tests/snapshot.sh "$b/corral"
	step "serve as $(id -un) ($label)" tests/serve.sh "$b/corral" "$b/tests/serve_client"
	step "mcp as $(id -un) ($label)" tests/mcp.sh "$b/corral" "$ROOT/build/mcp-sdk"
	[ -z "$brief" ] && step "python client as $(id -un) ($label)" tests/python_client.sh "$b/corral"
	[ -z "$brief" ] && step "docs/openapi.json against the daemon ($label)" \
		/usr/bin/python3 tests/openapi.py "$b/corral"
	step "a misbehaving agent as $(id -un) ($label)" tests/agent.sh "$b/corral" "$b/tests/helpers"
	step "daemon faults as $(id -un) ($label)" tests/faults.sh "$b/corral" "$b/tests/helpers"
	step "images as $(id -un) ($label)" tests/image.sh "$b/corral"
	[ -z "$brief" ] && step "oci runtime, containerd, podman as $(id -un) ($label)" \
		tests/oci.sh "$b/corral"
	if [ "$(id -u)" = 0 ] && [ -z "$brief" ]; then
		stage "$b"
		delegate_cgroups
		step "integration as uid $NOBODY, cgroups delegated ($label)" \
			as_nobody "$STAGE/tests/integration.sh" "$STAGE/corral" "$STAGE/helpers"
		step "egress as uid $NOBODY ($label)" \
			as_nobody "$STAGE/tests/net.sh" "$STAGE/corral" "$STAGE/helpers"
		step "seccomp as uid $NOBODY ($label)" \
			as_nobody "$STAGE/tests/seccomp.sh" "$STAGE/corral" "$STAGE/helpers"
		step "audit as uid $NOBODY ($label)" \
			as_nobody "$STAGE/tests/audit.sh" "$STAGE/corral" "$STAGE/helpers"
		step "abort as uid $NOBODY ($label)" \
			as_nobody "$STAGE/tests/abort.sh" "$STAGE/corral" "$STAGE/helpers"
		step "export as uid $NOBODY ($label)" \
			as_nobody "$STAGE/tests/export.sh" "$STAGE/corral"
		step "stdio as uid $NOBODY ($label)" \
			as_nobody "$STAGE/tests/stdio.sh" "$STAGE/corral" "$STAGE/helpers"
		step "daemon export and snapshots as uid $NOBODY ($label)" \
			as_nobody "$STAGE/tests/snapshot.sh" "$STAGE/corral"
		[ -z "$brief" ] && step "serve as uid $NOBODY, cgroups delegated ($label)" \
			as_nobody CORRAL_EXPECT_LIMITS=cgroup "$STAGE/tests/serve.sh" \
			"$STAGE/corral" "$STAGE/serve_client"
		[ -z "$brief" ] && step "mcp as uid $NOBODY, cgroups delegated ($label)" \
			as_nobody "$STAGE/tests/mcp.sh" "$STAGE/corral" "$STAGE/mcp-sdk"
		[ -z "$brief" ] && step "python client as uid $NOBODY, cgroups delegated ($label)" \
			as_nobody "$STAGE/tests/python_client.sh" "$STAGE/corral" "$STAGE/clients/python"
		step "a misbehaving agent as uid $NOBODY, cgroups delegated ($label)" \
			as_nobody "$STAGE/tests/agent.sh" "$STAGE/corral" "$STAGE/helpers"
		step "daemon faults as uid $NOBODY, cgroups delegated ($label)" \
			as_nobody "$STAGE/tests/faults.sh" "$STAGE/corral" "$STAGE/helpers"
		step "images as uid $NOBODY ($label)" \
			as_nobody "$STAGE/tests/image.sh" "$STAGE/corral"
		step "oci runtime refuses uid $NOBODY ($label)" \
			as_nobody "$STAGE/tests/oci.sh" "$STAGE/corral"
		undelegate_cgroups
		# no freezer: pause must answer why, idle sandboxes stay idle
		[ -z "$brief" ] && step "serve as uid $NOBODY, no cgroups ($label)" \
			as_nobody CORRAL_EXPECT_LIMITS=rlimit "$STAGE/tests/serve.sh" \
			"$STAGE/corral" "$STAGE/serve_client"
		step "a misbehaving agent as uid $NOBODY, no cgroups ($label)" \
			as_nobody "$STAGE/tests/agent.sh" "$STAGE/corral" "$STAGE/helpers"
		# no cgroup to charge the files' kernel memory to: the disk bounds them
		step "floods as uid $NOBODY, no cgroups ($label)" \
			as_nobody "$STAGE/tests/floods.sh" "$STAGE/corral" "$STAGE/helpers"
		step "integration as uid $NOBODY, no cgroups: rlimit fallback ($label)" \
			as_nobody "$STAGE/tests/integration.sh" "$STAGE/corral" "$STAGE/helpers" \
			t_limit_memory t_limit_pids t_limit_timeout_kills_tree t_doctor t_workspace_copy_on_write
		rm -rf "$STAGE"; STAGE=""
	fi
}

step "build with -Wall -Wextra -Werror" build build -Werror ""
step "the library exports only corral.h" tests/exports.sh build
suite build "gcc -O2"
step "soak, 300 sandboxes (make soak for 10,000)" tests/soak.sh build/corral 300
step "soak through the daemon, 200 cycles" /usr/bin/python3 tests/soak_serve.py build/corral 200
step "load: 200 calls at once, 1,000 proxied connections" /usr/bin/python3 tests/load.py build/corral

SAN="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:exitcode=99
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
step "build with ASan+UBSan" build build-asan "-Werror $SAN" "$SAN"
suite build-asan "ASan+UBSan" brief

# every parser on hostile bytes, briefly (`make fuzz` for longer runs)
if command -v clang >/dev/null; then
	step "fuzz, 10 s a target, two at a time" make -s -j2 fuzz FUZZ_SECONDS=10 FUZZ_JOBS=2
fi

echo "check: $PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
