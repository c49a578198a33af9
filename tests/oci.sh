#!/bin/bash
# oci.sh - `corral oci`, the runc-compatible runtime: its CLI directly (the
# lifecycle, exec, ps, pause, the console socket, errors in the JSON log,
# config.json that asks for too much), then under a private containerd
# (`ctr run --runc-binary`), then podman where the host lets it run.
#
#   tests/oci.sh CORRAL [TEST...]
#
# Bundles and images are made offline from busybox-static.  As non-root
# only the CLI's refusal is checked: the runtime is root's, as runc is.
set -u
CORRAL=$(readlink -f "$1")
shift
HERE=$(cd "$(dirname "$0")" && pwd)
SHIM=$HERE/oci_shim.py
FIX=$HERE/image_fixtures.py
TEST_TMP=$(mktemp -d "${TMPDIR:-/tmp}/corral-oci.XXXXXX")
chmod 755 "$TEST_TMP"
CTRD_PID=""
ctrd_stop() {
	[ -n "$CTRD_PID" ] || return 0
	kill "$CTRD_PID" 2>/dev/null
	for _ in $(seq 1 100); do kill -0 "$CTRD_PID" 2>/dev/null || break; sleep 0.05; done
	kill -9 "$CTRD_PID" 2>/dev/null
	# the shims it started: 1.6's v2 shim writes no shim.pid, and each
	# names our containerd's socket in its command line
	for p in $(pgrep -f -- "containerd-shim-runc-v2 .*-address $TEST_TMP/ctrd/sock"); do
		kill -9 "$p" 2>/dev/null
	done
	# the containers' rootfs mounts, should a test have failed before delete
	grep -o "$TEST_TMP/ctrd/[^ ]*/rootfs" /proc/self/mountinfo | sort -u |
		while read -r m; do umount -l "$m"; done
	CTRD_PID=""
}
# every container our CLI tests made and did not delete (a test that
# failed midway, a create that should have been refused and was not): its
# monitor and init would outlive the suite.  After each test (run_test
# calls test_cleanup), while its state is there: $T goes next.
oci_stop_in() {
	local id
	[ -d "$1" ] || return 0
	for id in $(ls "$1"); do
		[ "$id" != audit ] || continue
		timeout 30 "$OCI" --root "$1" delete --force "$id" > /dev/null 2>&1
	done
}
test_cleanup() { oci_stop_in "$T/root"; }
oci_stop_all() {
	local r
	for r in "$TEST_TMP"/t.*/root; do
		oci_stop_in "$r"
	done
}
trap 'oci_stop_all; ctrd_stop; dockerd_stop; chmod -R u+rwX "$TEST_TMP" 2>/dev/null; rm -rf "$TEST_TMP"' EXIT
. "$HERE/lib.sh"
ME=$(id -u)
# corral-oci: the name containerd's BinaryName and podman's --runtime use
mkdir "$TEST_TMP/bin"
ln -s "$CORRAL" "$TEST_TMP/bin/corral-oci"
OCI=$TEST_TMP/bin/corral-oci

need_root() { [ "$ME" = 0 ] || skip "the OCI runtime is root's (as runc); not root"; }
# landlock_abi: the kernel's Landlock ABI (0: none)
landlock_abi() {
	/usr/bin/python3 -c 'import ctypes; l = ctypes.CDLL(None, use_errno=True); print(max(l.syscall(444, None, 0, 1), 0))'
}

# rootfs_template DIR: busybox and its commands, once a suite: copied whole
# into each bundle (its ten links one by one were eleven forks and execs
# a bundle, 4-7 ms of CPU each on a pti=on guest)
rootfs_template() {
	local c
	mkdir -p "$1/bin" "$1/etc"
	cp /bin/busybox "$1/bin/"
	for c in sh echo cat sleep ls id ps hostname true tty; do
		ln -sf busybox "$1/bin/$c"
	done
}

# bundle DIR ARGV_JSON [PYTHON]: a busybox-static rootfs (the suite's
# template's copy) and a config.json shaped as `runc spec` makes it;
# PYTHON edits c (the config) first.
bundle() {
	local dir=$1 argv=$2 edit=${3:-}
	# never through a symlink a test made (rootfs -> /): that is the host
	[ ! -L "$dir/rootfs" ] || { echo "bundle: $dir/rootfs is a symlink"; return 1; }
	# the rootfs of an earlier call stays (refused after refused: only
	# config.json changes)
	if [ ! -x "$dir/rootfs/bin/busybox" ]; then
		[ -x "$TEST_TMP/rootfs/bin/busybox" ] || rootfs_template "$TEST_TMP/rootfs"
		mkdir -p "$dir/rootfs"
		cp -a "$TEST_TMP/rootfs/." "$dir/rootfs/"
		chmod -R a+rX "$dir"
	fi
	/usr/bin/python3 - "$dir/config.json" "$argv" "$edit" <<'EOF'
import json, sys
path, argv, edit = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
caps = ["CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE"]
c = {
    "ociVersion": "1.0.2",
    "process": {"terminal": False, "user": {"uid": 0, "gid": 0}, "args": argv,
                "env": ["PATH=/bin", "TERM=xterm"], "cwd": "/",
                "capabilities": {k: caps for k in ("bounding", "effective", "permitted")},
                "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024}],
                "noNewPrivileges": True},
    "root": {"path": "rootfs", "readonly": True},
    "hostname": "oci-test",
    "mounts": [
        {"destination": "/proc", "type": "proc", "source": "proc"},
        {"destination": "/dev", "type": "tmpfs", "source": "tmpfs"},
        {"destination": "/dev/pts", "type": "devpts", "source": "devpts"},
        {"destination": "/dev/shm", "type": "tmpfs", "source": "shm"},
        {"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": ["ro"]},
    ],
    "linux": {"namespaces": [{"type": t} for t in
                             ("pid", "network", "ipc", "uts", "mount")],
              "resources": {"devices": [{"allow": False, "access": "rwm"}],
                            "memory": {"limit": 268435456}},
              "maskedPaths": ["/proc/kcore"], "readonlyPaths": ["/proc/sys"]},
}
exec(edit)
json.dump(c, open(path, "w"))
EOF
}

# oci ARGS...: the runtime with this test's root and JSON log; out in
# $T/out, stderr in $T/err, status in $T/rc.
oci() {
	local rc=0
	timeout 60 "$OCI" --root "$T/root" --log "$T/log.json" --log-format json "$@" \
		> "$T/out" 2> "$T/err" < /dev/null || rc=$?
	echo "$rc" > "$T/rc"
	# read by the shell, not cat: every call, every poll of a state, was
	# a fork and an exec for this (the text is JSON and words: no NUL)
	local out="" err=""
	IFS= read -r -d '' out < "$T/out" || :
	IFS= read -r -d '' err < "$T/err" || :
	printf '%s%s' "$out" "$err"
}
rc() { local r; read -r r < "$T/rc"; echo "$r"; }
# (the shell, not sed or python: wait_status polls it)
status_of() {
	local s=""
	oci state "$1" > /dev/null
	IFS= read -r -d '' s < "$T/out" || :
	[[ $s =~ (^|$'\n')'  "status": "'([a-z]*)'"' ]] && echo "${BASH_REMATCH[2]}"
	return 0
}
last_error() { tail -1 "$T/log.json" | json msg; }

# wait_status ID STATUS: bounded poll (the kernel's pace, not a timing test)
wait_status() {
	for _ in $(seq 1 200); do
		[ "$(status_of "$1")" = "$2" ] && return 0
		sleep 0.05
	done
	fail "$1 never became $2 (is $(status_of "$1"))"
}

# nothing_left ID INIT MONITOR: no state, process, cgroup or mount remains
nothing_left() {
	[ ! -e "$T/root/$1" ] || fail "state directory $T/root/$1 remains"
	# alive, not a zombie, and still corral's (not a pid reused since)
	for p in $2 $3; do
		if kill -0 "$p" 2>/dev/null && ! grep -q '^State:.*Z' "/proc/$p/status" &&
		   tr '\0' ' ' < "/proc/$p/cmdline" | grep -q corral; then
			fail "process $p remains: $(tr '\0' ' ' < "/proc/$p/cmdline")"
		fi
	done
	local cg
	# || true: a group of another suite vanishing mid-walk makes find exit 1
	cg=$(find /sys/fs/cgroup -maxdepth 4 -type d -name "corral-$3-oci" 2>/dev/null || true)
	[ -z "$cg" ] || fail "cgroup remains: $cg"
	! grep -q "$T" /proc/self/mountinfo || fail "a mount of $T remains"
}

# cpu_ticks PID: its user and system time so far, in clock ticks
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

monitor_of() { sed -n 's/.*"monitor": *\([0-9]*\).*/\1/p' "$T/root/$1/state.json"; }
# own_more PID ANCESTORS: lib.sh's kill asks of a pid not below the suite's
# shell: one of this test's containers' monitors (they detach) or below
# one, or in one of their pid namespaces (an exec'd process outlives its
# CLI, and its parent is then the host's init)
own_more() {
	local f s m p ns
	ns=$(readlink "/proc/$1/ns/pid" 2>/dev/null) || return 1
	# a container in the host's pid namespace says nothing of a pid's owner
	[ "$ns" != "$(readlink /proc/self/ns/pid)" ] || ns=none
	[ -n "${C1_MON:-}" ] && [[ $2 == *" $C1_MON "* ]] && return 0
	for f in "$T"/root/*/state.json; do
		[ -f "$f" ] || continue
		s=$(< "$f")
		[[ $s =~ \"monitor\":\ *([0-9]+) ]] && m=${BASH_REMATCH[1]} &&
			[[ $2 == *" $m "* ]] && return 0
		[[ $s =~ \"pid\":\ *([0-9]+) ]] && p=${BASH_REMATCH[1]} &&
			[ "$ns" = "$(readlink "/proc/$p/ns/pid" 2>/dev/null)" ] && return 0
	done
	return 1
}

# ---- as anyone ----------------------------------------------------------

t_cli_answers() {
	oci --version > /dev/null
	expect_contains "version" "$(cat "$T/out")" "corral-oci version"
	oci features > /dev/null
	expect_eq "features" "$(json ociVersionMax < "$T/out")" "1.0.2"
	oci state nosuch > /dev/null || true
	expect_eq "state rc" "$(rc)" 1
	expect_contains "runc's words" "$(last_error)" "container does not exist"
	if [ "$ME" != 0 ]; then
		oci create --bundle "$T" c1 > /dev/null || true
		expect_eq "create rc" "$(rc)" 1
		expect_contains "not root" "$(last_error)" "must run as root"
	fi
}

# `runc create --help` and the like: the usage, exit 0, root or not; a
# --help after an exec'd command's name is the command's own.
t_verb_help() {
	local verb
	for verb in create start state kill delete exec ps pause resume events; do
		oci "$verb" --help > /dev/null || true
		expect_eq "$verb --help rc" "$(rc)" 0 || return 1
		expect_contains "$verb --help" "$(cat "$T/out")" "Usage: corral oci" || return 1
	done
	oci exec nosuch ls --help > /dev/null || true
	[ "$(rc)" != 0 ] || { fail "exec ID ls --help: exit 0 (the usage?)"; return 1; }
	if [ "$ME" = 0 ]; then
		expect_contains "exec ID ls --help: the container looked for" \
			"$(last_error)" "container does not exist"
	else
		expect_contains "exec ID ls --help: refused as for any exec" \
			"$(last_error)" "must run as root"
	fi
}

# A usage error exits 1, as runc's (urfave/cli's), not the 2 of corral's
# other verbs: whoever drives `corral oci` as runc sees runc's status.
# The log still says what was wrong.  As root the verbs' own flags too.
usage_exits_1() {	# usage_exits_1 WANT ARGS...
	local want=$1
	shift
	rm -f "$T/log.json"
	oci "$@" > /dev/null || true
	expect_eq "corral oci $*: rc" "$(rc)" 1 || return 1
	[ -z "$want" ] || expect_contains "corral oci $*: said" "$(cat "$T/err")" "$want"
}
t_usage_exits_1() {
	usage_exits_1 "unknown global flag --bogus" --bogus state c1 || return 1
	usage_exits_1 'unknown command "nosuchverb"' nosuchverb c1 || return 1
	usage_exits_1 "Usage: corral oci" || return 1
	usage_exits_1 "--log-format yaml: json or text" --log-format yaml state c1 || return 1
	usage_exits_1 "state: expected one container id" state a b || return 1
	[ "$ME" = 0 ] || return 0
	usage_exits_1 "create: unknown flag --bogus" create --bogus c1 || return 1
	usage_exits_1 "create: expected one container id" create --bundle "$T" || return 1
	usage_exits_1 "kill: expected ID [SIGNAL]" kill || return 1
	usage_exits_1 "invalid signal" kill c1 NOSIG || return 1
	usage_exits_1 "delete: unknown flag --bogus" delete --bogus c1 || return 1
	usage_exits_1 "exec: --env FOO: expected NAME=VALUE" exec -e FOO c1 true || return 1
	usage_exits_1 "ps: --format json|table" ps --format yaml c1 || return 1
	usage_exits_1 "update: expected --resources FILE|- ID" update c1 || return 1
	usage_exits_1 "events: --interval x" events --interval x c1 || return 1
	# the rest of corral keeps its own rule: 2 is a usage error there
	local r=0
	"$CORRAL" version --bogus > /dev/null 2>&1 || r=$?
	expect_eq "corral version --bogus" "$r" 2
}

# ---- the CLI, as root ---------------------------------------------------

t_lifecycle() {
	need_root
	bundle "$T/b" '["sh", "-c", "echo hello from $(hostname); id -u; echo nofile $(ulimit -n); exit 3"]' \
		'c["process"]["rlimits"] = [{"type": "RLIMIT_NOFILE", "soft": 321, "hard": 321}]
c["annotations"] = {"io.kubernetes.cri.sandbox-name": "pod1",
                    "io.kubernetes.cri.sandbox-namespace": "agents"}'
	shim_c1
	expect_contains "created" "$(cat "$T/shim")" "state created"
	expect_contains "stdio passed through" "$(cat "$T/shim")" "hello from oci-test"
	expect_contains "agent's uid" "$(cat "$T/shim")" $'\n1000\n'
	expect_contains "process.rlimits" "$(cat "$T/shim")" "nofile 321"
	expect_contains "exit status" "$(cat "$T/shim")" "exit 3"
	expect_contains "stopped" "$(cat "$T/shim")" "state stopped"
	local mon out
	mon=$(monitor_of c1)
	oci delete c1 || true
	expect_eq "delete" "$(rc)" 0
	nothing_left c1 "" "$mon"
	# the events went to the audit log, chained
	out=$("$CORRAL" audit verify "$T/root/audit/c1.jsonl" 2>&1) || fail "audit verify: $out"
	expect_contains "events" "$(cat "$T/root/audit/c1.jsonl")" '"container.created"'
	expect_contains "the pod's name" "$(cat "$T/root/audit/c1.jsonl")" '"call":"agents/pod1"'
}

t_running_kill() {
	need_root
	bundle "$T/b" '["sleep", "30"]'
	/usr/bin/python3 "$SHIM" "$OCI" "$T/root" "$T/b" c1 > "$T/shim" 2>&1 &
	local shim=$! pid mon
	for _ in $(seq 1 200); do [ -f "$T/root/c1/state.json" ] && break; sleep 0.05; done
	wait_status c1 running
	pid=$(sed -n 's/^  "pid": \([0-9]*\).*/\1/p' "$T/out")
	mon=$(monitor_of c1)
	oci delete c1 || true
	expect_eq "delete refuses a running one" "$(rc)" 1
	expect_contains "not stopped" "$(last_error)" "that is not stopped: running"
	oci kill c1 TERM
	expect_eq "kill" "$(rc)" 0
	wait "$shim" || true
	cat "$T/shim"
	expect_contains "TERM reached the process" "$(cat "$T/shim")" "exit 143"
	oci kill c1 KILL || true
	expect_contains "runc's words" "$(last_error)" "container not running"
	oci delete c1
	nothing_left c1 "$pid" "$mon"
}

# exec and update judge by the config.json create read, kept in the
# container's state: the bundle's, rewritten after create (an env, the
# memory limit raised), or removed, changes nothing.  Before, exec read the
# bundle's file again: its process got the new env, and update's bound was
# the new limit; with the file gone, exec failed.
t_exec_judged_by_config_at_create() {
	need_root
	bundle "$T/b" '["sleep", "60"]' 'c["process"]["env"].append("FOO=created")'
	oci create --bundle "$T/b" c1
	expect_eq "create" "$(rc)" 0
	oci start c1
	bundle "$T/b" '["sleep", "60"]' 'c["process"]["env"].append("FOO=edited"); c["linux"]["resources"]["memory"]["limit"] = 1073741824'
	out=$(oci exec c1 sh -c 'echo "foo=$FOO"')
	expect_eq "exec: the env create read" "$out" "foo=created"
	echo '{"memory": {"limit": 536870912}}' > "$T/res.json"
	oci update --resources "$T/res.json" c1 || true
	expect_contains "update: bound by the limit create read" "$(last_error)" \
		"above what the container was created with"
	rm "$T/b/config.json"
	out=$(oci exec c1 sh -c 'echo "foo=$FOO"')
	expect_eq "exec with the bundle's file gone" "$out" "foo=created"
	oci kill c1 KILL
	wait_status c1 stopped
	oci delete c1
}

t_exec_ps_pause() {
	need_root
	bundle "$T/b" '["sleep", "60"]'
	oci create --bundle "$T/b" --pid-file "$T/pid" c1
	expect_eq "create" "$(rc)" 0
	expect_eq "created" "$(status_of c1)" created
	oci start c1
	expect_eq "running" "$(status_of c1)" running
	local pid mon
	pid=$(cat "$T/pid")
	mon=$(monitor_of c1)
	out=$(oci exec c1 sh -c 'echo in-exec $(hostname); id -u; ps')
	expect_eq "exec rc" "$(rc)" 0
	expect_contains "exec output" "$out" "in-exec oci-test"
	expect_contains "same pid namespace" "$out" "sleep 60"
	printf '{"args":["sh","-c","exit 7"],"env":["PATH=/bin"],"cwd":"/"}' > "$T/p.json"
	oci exec --process "$T/p.json" c1 > /dev/null || true
	expect_eq "exec status" "$(rc)" 7
	# -e: a name the process has takes the new value in its place, others
	# are added; beside --process too; a word without '=' is refused
	out=$(oci exec -e FOO=bar -e PATH=/bin:/usr/bin c1 \
		sh -c 'echo "foo=$FOO"; env | grep -c "^PATH="; echo "path=$PATH"')
	expect_eq "exec -e rc" "$(rc)" 0
	expect_contains "-e added" "$out" "foo=bar"
	expect_contains "-e replaced, not doubled" "$out" "$(printf '1\npath=/bin:/usr/bin')"
	printf '{"args":["sh","-c","echo \\"foo=$FOO\\""],"env":["PATH=/bin","FOO=old"],"cwd":"/"}' \
		> "$T/pe.json"
	out=$(oci exec -e FOO=new --process "$T/pe.json" c1)
	expect_eq "-e over --process" "$out" "foo=new"
	oci exec -e FOO c1 true > /dev/null || true
	expect_eq "-e without =" "$(rc)" 1
	expect_contains "-e without = named" "$(cat "$T/err")" "--env FOO: expected NAME=VALUE"
	# an exec'd process's denied calls reach the monitor's audit log too
	oci exec c1 busybox unshare -m true > /dev/null || true
	expect_contains "exec'd denial recorded" "$(cat "$T/root/audit/c1.jsonl")" \
		'"type":"syscall.denied","syscall":"unshare"'
	expect_contains "exec recorded" "$(cat "$T/root/audit/c1.jsonl")" '"type":"exec.join"' 
	# detached, as the shim runs it: the pid file names it
	printf '{"args":["sleep","30"],"env":["PATH=/bin"],"cwd":"/"}' > "$T/p2.json"
	oci exec --process "$T/p2.json" --detach --pid-file "$T/epid" c1
	expect_eq "exec -d" "$(rc)" 0
	local epid
	epid=$(cat "$T/epid")
	oci ps --format json c1
	expect_contains "ps: init" "$(cat "$T/out")" "$pid"
	expect_contains "ps: exec'd" "$(cat "$T/out")" "$epid"
	# a busy exec'd process: paused, its CPU time stands still (a frozen
	# task's State is "D" under v1 and "S" under v2, and "State" has an S).
	# Busy in bursts (about 10 ms of counting, a tenth of a second's nap):
	# unpaused it gains ticks every few tenths, all the checks read, where a
	# spin burnt a core until the kill
	printf '{"args":["sh","-c","while :; do i=0; while [ $i -lt 5000 ]; do i=$((i+1)); done; sleep 0.1; done"],"env":["PATH=/bin"],"cwd":"/"}' > "$T/p3.json"
	oci exec --process "$T/p3.json" --detach --pid-file "$T/bpid" c1
	local bpid t1 t2
	bpid=$(cat "$T/bpid")
	oci pause c1
	expect_eq "paused" "$(status_of c1)" paused
	t1=$(cpu_ticks "$bpid")
	sleep 0.5
	t2=$(cpu_ticks "$bpid")
	expect_eq "the exec'd process's CPU time while paused" "$t2" "$t1"
	oci resume c1
	expect_eq "resumed" "$(status_of c1)" running
	for _ in $(seq 1 40); do [ "$(cpu_ticks "$bpid")" -gt "$t2" ] && break; sleep 0.05; done
	[ "$(cpu_ticks "$bpid")" -gt "$t2" ] || fail "the exec'd process never ran again after resume"
	# update: lower is applied to the cgroup, higher than created is refused
	local memfile
	memfile=$(find /sys/fs/cgroup -maxdepth 4 -path "*/corral-$mon-oci/memory.*" \
		\( -name memory.limit_in_bytes -o -name memory.max \) | head -1)
	[ -n "$memfile" ] || fail "no memory limit file for corral-$mon-oci"
	echo '{"memory": {"limit": 134217728}}' > "$T/res.json"
	oci update --resources "$T/res.json" c1
	expect_eq "update" "$(rc)" 0
	expect_eq "memory limit" "$(cat "$memfile")" 134217728
	echo '{"memory": {"limit": 1073741824}}' > "$T/res.json"
	oci update --resources "$T/res.json" c1 || true
	expect_contains "raise refused" "$(last_error)" "above what the container was created with"
	expect_eq "memory limit kept" "$(cat "$memfile")" 134217728
	oci kill --all c1 KILL
	wait_status c1 stopped
	oci delete c1
	expect_eq "delete" "$(rc)" 0
	nothing_left c1 "$pid $epid $bpid" "$mon"
}

# ps lists every process of the container, as runc's does.  It listed
# the first 1000 before: a container of more hid the rest from the
# engine's `ps` (`ctr task ps`, `podman top`), on cgroup v1, which sorts
# the list, the newest of them (a process started last, say).  The
# count to compare is the host's: every process in its pid namespace.
t_ps_lists_every_process() {
	bound_test
	need_root
	local pid mon ns n=0
	c1_running
	pid=$C1_PID mon=$C1_MON
	# long sleeps: none ends between the count and the list
	oci exec --detach c1 sh -c 'i=0; while [ $i -lt 1010 ]; do sleep 600 & i=$((i + 1)); done
		exec sleep 600' > /dev/null
	expect_eq "exec" "$(rc)" 0
	ns=$(stat -L -c %i "/proc/$pid/ns/pid")
	for _ in $(seq 1 200); do
		n=$(stat -L -c %i /proc/[0-9]*/ns/pid 2>/dev/null | grep -c "^$ns\$" || true)
		[ "$n" -ge 1013 ] && break
		sleep 0.1
	done
	[ "$n" -ge 1013 ] || fail "the container never ran its 1013 processes ($n)"
	oci ps --format json c1 > /dev/null
	expect_eq "ps" "$(rc)" 0
	expect_eq "the processes ps lists" "$(pyjq "len(v)" "$T/out")" "$n"
	oci ps c1 > /dev/null
	expect_eq "ps's table: a header and a line each" "$(wc -l < "$T/out")" $((n + 1))
	c1_gone "$pid" "$mon"
}

# c1_running [ARGV_JSON]: c1, a bundle of ARGV_JSON (`sleep 60` by
# default), created and started; its init's pid in C1_PID, its monitor's
# in C1_MON
c1_running() {
	local argv='["sleep", "60"]'
	bundle "$T/b" "${1:-$argv}"
	oci create --bundle "$T/b" --pid-file "$T/pid" c1
	expect_eq "create" "$(rc)" 0
	oci start c1
	C1_PID=$(cat "$T/pid")
	C1_MON=$(monitor_of c1)
}

# c1_gone PIDS MONITOR: c1 killed, deleted, and nothing of it left
c1_gone() {
	oci kill --all c1 KILL
	wait_status c1 stopped
	oci delete c1
	nothing_left c1 "$1" "$2"
}

# exec: of the engine's fds only 0-2 go in.  One it left without O_CLOEXEC
# (a host directory, a host file) went in open; and corral's own until the
# exec (the pinned rootfs), which a cwd of /proc/self/fd/N (the image's
# WorkingDir) made the process's cwd: the host's rootfs directory, its
# `..` the host's (CVE-2024-21626)
t_exec_no_host_fds() {
	need_root
	local pid mon out n epid cwd epids=""
	c1_running
	pid=$C1_PID mon=$C1_MON
	echo host > "$T/hostlog"
	out=$(exec 7< "$T" 8>> "$T/hostlog"
	      oci exec c1 sh -c 'for f in /proc/self/fd/*; do echo "fd ${f##*/}"; done
	                          echo written >&8')
	expect_eq "exec rc" "$(rc)" 0 || echo "$out"
	expect_contains "stdio" "$out" "fd 2"
	expect_not_contains "the engine's directory fd" "$out" "fd 7"
	expect_not_contains "the engine's file fd" "$out" "fd 8"
	expect_not_contains "written through it" "$(cat "$T/hostlog")" "written"
	for n in 3 4 5 6 7 8 9 10; do
		rm -f "$T/epid"
		oci exec --detach --cwd "/proc/self/fd/$n" --pid-file "$T/epid" c1 sleep 30 > /dev/null
		[ "$(rc)" = 0 ] || continue
		epid=$(cat "$T/epid")
		epids="$epids $epid"
		cwd=$(readlink "/proc/$epid/cwd")
		kill -9 "$epid"
		case $cwd in
		"$T"*) fail "--cwd /proc/self/fd/$n: the exec's cwd is the host's $cwd" ;;
		esac
	done
	c1_gone "$pid$epids" "$mon"
}

# An exec's Landlock rules are opened in the running container, whose
# process may move a writable bind's parent away and leave a link in its
# place: followed, the rule made /proc writable to the exec'd process
# (its /proc/self files, where the container's own may write none).
# A bind whose parent the container can move lies beneath a writable
# path (Landlock lets it rename nothing else), whose rule covers it: it
# takes no rule of its own, and nothing is opened through the link.
t_exec_landlock_rules_not_through_container_links() {
	need_root
	local out pid mon
	mkdir -p "$T/share"
	printf '{"allow_bind": ["%s"]}' "$T/share" > "$T/op.json"
	export CORRAL_OCI_CONFIG=$T/op.json
	bundle "$T/b" '["sleep", "60"]' \
		"c['mounts'].append({'destination': '/home/agent/x/data', 'type': 'bind', 'source': '$T/share', 'options': ['rbind', 'rw']})"
	oci create --bundle "$T/b" --pid-file "$T/pid" c1
	expect_eq "create" "$(rc)" 0
	oci start c1
	pid=$(cat "$T/pid") mon=$(monitor_of c1)
	out=$(oci exec c1 sh -c 'echo x > /proc/self/comm && echo WROTE; echo ran')
	expect_contains "exec" "$out" "ran"
	expect_not_contains "/proc not writable (Landlock)" "$out" "WROTE"
	oci exec c1 sh -c 'busybox mv /home/agent/x /home/agent/y && busybox mkdir /home/agent/x &&
			    busybox ln -s /proc /home/agent/x/data' > /dev/null
	expect_eq "the container's link made" "$(rc)" 0
	out=$(oci exec c1 sh -c 'echo x > /proc/self/comm && echo WROTE; echo ran')
	expect_not_contains "/proc still not writable" "$out" "WROTE"
	expect_contains "runs, the bind covered by /home/agent's rule" "$out" "ran"
	unset CORRAL_OCI_CONFIG
	c1_gone "$pid" "$mon"
}

# runc's CVE-2019-5736 through exec: an image whose command is a
# `#!/proc/self/exe` script had the runtime's own binary run inside, and
# a process there reopened it through /proc/PID/exe to overwrite the
# host's runc.  Here the script's exec is refused (Landlock: the host's
# binary lies outside the container's root), and corral's code in the
# container's pid namespace, init and an exec held at its gate (host
# root there until it takes the agent's uid), is no file the container
# may read, write, list or enter through /proc; the binary unchanged.
t_exec_proc_self_exe_not_writable() {
	need_root
	command -v strace > /dev/null || skip "no strace to hold exec with"
	local pid mon own st cli="" out probe
	own=$(md5sum < "$CORRAL")
	c1_running
	pid=$C1_PID mon=$C1_MON
	printf '#!/proc/self/exe\n' > "$T/b/rootfs/bin/evil"
	chmod 755 "$T/b/rootfs/bin/evil"
	out=$(oci exec c1 /bin/evil)
	expect_eq "the exec of #!/proc/self/exe" "$(rc)" 255
	expect_contains "why" "$(last_error)" "exec /bin/evil: Permission denied"
	probe='for p in /proc/[0-9]*; do
		case $(cat $p/cmdline 2>/dev/null) in corral-*) ;; *) continue ;; esac
		echo "seen $(cat $p/cmdline)"
		cat $p/exe > /dev/null 2>&1 && echo "read ${p#/proc/}"
		echo x >> $p/exe 2>/dev/null && echo "wrote ${p#/proc/}"
		ls $p/fd > /dev/null 2>&1 && echo "fds ${p#/proc/}"
		ls $p/cwd/ > /dev/null 2>&1 && echo "cwd ${p#/proc/}"
	done'
	out=$(oci exec c1 sh -c "$probe")
	expect_contains "init seen" "$out" "seen corral-init"
	exec_held connect 2 c1 true
	st=$ST
	if strace_held "$T/held.strace" "$st"; then
		cli=$(cat "$T/held.pid")
		out="$out
$(oci exec c1 sh -c "$probe")"
		kill -CONT "$cli"
	fi
	wait "$st" || true
	[ -n "$cli" ] || fail "exec was never held: $(tail -c 300 "$T/held.strace")"
	echo "$out"
	expect_contains "the held exec seen" "$out" "seen corral-exec"
	expect_not_contains "a runtime's binary read" "$out" "read "
	expect_not_contains "a runtime's binary written" "$out" "wrote "
	expect_not_contains "a runtime's fds listed" "$out" "fds "
	expect_not_contains "a runtime's cwd entered" "$out" "cwd "
	expect_eq "corral's binary" "$(md5sum < "$CORRAL")" "$own"
	c1_gone "$pid" "$mon"
}

# execs racing a `delete --force`: each is refused or its process killed
# with the container (137), none hangs, and nothing of it is left: no
# process of theirs (each names $T in its command line), no cgroup, no
# state.  Whichever way each race goes is the kernel's; only what is left
# is judged.
t_exec_during_delete() {
	need_root
	local pid mon i p r pids="" left=""
	c1_running
	pid=$C1_PID mon=$C1_MON
	for i in $(seq 1 12); do
		timeout 60 "$OCI" --root "$T/root" --log "$T/log.json" exec c1 \
			sh -c "sleep 30; : $T" > "$T/e.$i" 2>&1 < /dev/null &
		pids="$pids $!"
	done
	oci delete --force c1
	expect_eq "delete" "$(rc)" 0
	for p in $pids; do
		r=0
		wait "$p" || r=$?
		case $r in
		1|137|255) ;;
		*) fail "an exec ended $r: $(cat "$T"/e.* 2>/dev/null)" ;;
		esac
	done
	for p in /proc/[0-9]*; do
		case $(tr '\0' ' ' < "$p/cmdline" 2>/dev/null) in
		*"$T"*) left="$left ${p#/proc/}" ;;
		esac
	done
	expect_eq "processes of the execs left" "$left" ""
	nothing_left c1 "$pid" "$mon"
}

# An exec'd process (the engine's probe, an operator's shell) is its own
# Landlock domain, which scopes signals (ABI 6): the container's
# processes may not stop or kill it, as they may one another (the same
# uid), nor it them.  The container's command waits for the exec'd
# process's pid in its /tmp, then sends SIGSTOP and SIGKILL.
t_exec_not_signalled_by_the_container() {
	need_root
	[ "$(landlock_abi)" -ge 6 ] || skip "Landlock ABI $(landlock_abi): no signal scoping (6)"
	local pid mon epid st out=""
	c1_running '["sh", "-c", "for i in $(seq 1 600); do [ -s /tmp/pid ] && break; sleep 0.05; done; p=$(cat /tmp/pid); kill -STOP $p; echo stop=$? > /tmp/out.new; kill -KILL $p; echo kill=$? >> /tmp/out.new; mv /tmp/out.new /tmp/out; exec sleep 60"]'
	pid=$C1_PID mon=$C1_MON
	oci exec --detach --pid-file "$T/epid" c1 sh -c 'echo $$ > /tmp/pid.new; mv /tmp/pid.new /tmp/pid; exec sleep 60'
	expect_eq "exec" "$(rc)" 0
	epid=$(cat "$T/epid")
	for _ in $(seq 1 200); do
		out=$(cat "/proc/$pid/root/tmp/out" 2>/dev/null) && break
		sleep 0.05
	done
	echo "$out"
	expect_contains "SIGSTOP from the container" "$out" "stop=1"
	expect_contains "SIGKILL from the container" "$out" "kill=1"
	st=$(awk '{print $3}' "/proc/$epid/stat")
	expect_eq "the exec'd process's state" "$st" S
	kill -9 "$epid"
	c1_gone "$pid $epid" "$mon"
}

# The monitor puts in the container's group only a process of the
# container's pid namespace.  An exec opens init's namespaces by its pid:
# had init exited, been reaped and its pid gone to a process of another
# container meanwhile, the exec's process would be in that one's
# namespaces, and a monitor busy with another request when init exited
# may hear the join before the exit: it took any pid in, and the CLI let
# the process run.  Asked here directly, as the CLI asks, for a host
# process: refused, and the process stays in its own group.
t_monitor_joins_only_its_pid_namespace() {
	need_root
	local pid mon host out cg
	c1_running
	pid=$C1_PID mon=$C1_MON
	sleep 60 &
	host=$!
	out=$(/usr/bin/python3 - "$T/root/c1/ctl" "$host" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.settimeout(30)
s.connect(sys.argv[1])
s.send(b"join " + sys.argv[2].encode())
print(s.recv(4096).decode())
PY
)
	cg=$(cat "/proc/$host/cgroup")
	kill "$host"
	wait "$host" 2>/dev/null || true
	expect_contains "the monitor's answer" "$out" "not in the container's pid namespace"
	expect_not_contains "the host process's groups" "$cg" "corral-$mon-oci"
	oci exec c1 true
	expect_eq "an exec still joins" "$(rc)" 0
	c1_gone "$pid" "$mon"
}

# A container's processes, its init's and an exec'd one alike, are the
# OOM killer's first choice over the runtime's and the engine's (oom.c):
# at least 500, never less than the caller's; process.oomScoreAdj ignored.
t_exec_oom_score() {
	need_root
	local pid mon out own want
	c1_running
	pid=$C1_PID mon=$C1_MON
	own=$(cat /proc/self/oom_score_adj)
	want=$(( own > 500 ? own : 500 ))
	expect_eq "init's" "$(cat /proc/"$pid"/oom_score_adj)" "$want"
	out=$(oci exec c1 cat /proc/self/oom_score_adj)
	expect_eq "exec rc" "$(rc)" 0
	expect_eq "an exec'd process's" "$out" "$want"
	c1_gone "$pid" "$mon"
}

# The monitor watches the listeners of 64 exec'd processes at once; one
# whose processes have exited gives its place up.  Kept, the 65th exec of
# a container's life (an engine's probes) and every one after it had its
# denied calls fail unrecorded.
t_exec_denials_after_many_execs() {
	bound_test
	need_root
	local pid mon i
	c1_running
	pid=$C1_PID mon=$C1_MON
	for i in $(seq 1 70); do
		oci exec c1 true > /dev/null
		[ "$(rc)" = 0 ] || { fail "exec $i: $(cat "$T/err")"; break; }
	done
	oci exec c1 busybox unshare -m true > /dev/null || true
	expect_contains "the 71st exec's denial recorded" "$(cat "$T/root/audit/c1.jsonl")" \
		'"type":"syscall.denied","syscall":"unshare"'
	c1_gone "$pid" "$mon"
}

# Past the 64 exec'd processes the monitor watches at once, an exec is
# refused: before, it ran with its denied calls failing unrecorded, so a
# container that kept 64 exec'd processes alive (a child left by each)
# made every later exec's probing invisible in its audit log.
t_exec_refused_when_unwatched() {
	bound_test
	need_root
	local pid mon i epids=""
	c1_running
	pid=$C1_PID mon=$C1_MON
	printf '{"args":["sleep","60"],"env":["PATH=/bin"],"cwd":"/"}' > "$T/p.json"
	for i in $(seq 1 64); do
		oci exec --process "$T/p.json" --detach --pid-file "$T/epid" c1 > /dev/null
		[ "$(rc)" = 0 ] || { fail "exec $i: $(cat "$T/err")"; break; }
		epids="$epids $(cat "$T/epid")"
	done
	oci exec c1 busybox unshare -m true > /dev/null || true
	expect_eq "the 65th exec" "$(rc)" 255
	expect_contains "why" "$(last_error)" "would go unrecorded"
	# one of them gone, its place is taken again
	local first
	first=$(echo $epids | cut -d' ' -f1)
	kill -9 "$first"
	for _ in $(seq 1 100); do
		kill -0 "$first" 2>/dev/null || break
		sleep 0.05
	done
	oci exec c1 busybox unshare -m true > /dev/null || true
	expect_eq "an exec in a freed place" "$(rc)" 1
	expect_contains "its denial recorded" "$(cat "$T/root/audit/c1.jsonl")" \
		'"type":"syscall.denied","syscall":"unshare"'
	c1_gone "$pid$epids" "$mon"
}

# An exec'd process is in the container's pid namespace from its clone on,
# corral's code until it execs: held there (strace stops the CLI at its
# "join" to the monitor, the process waiting at its gate), its command
# line is not the CLI's, whose host paths (--root, --log, --pid-file)
# /proc/PID/cmdline showed to the container.
# exec_held SYSCALL N EXEC_ARGS...: `oci exec EXEC_ARGS` run under strace,
# stopped (SIGSTOP) at its Nth SYSCALL; strace's pid in ST, the CLI's
# written to $T/held.pid, its output to $T/held
exec_held() {
	# LeakSanitizer cannot run under ptrace (an ASan build's exec)
	ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 \
	timeout 60 strace -qq -o "$T/held.strace" -e trace="$1" \
		-e inject="$1":signal=SIGSTOP:when="$2" \
		sh -c 'echo $$ > "$0"; exec "$@"' "$T/held.pid" "$OCI" --root "$T/root" \
		--log "$T/log.json" --log-format json exec "${@:3}" \
		> "$T/held" 2>&1 < /dev/null &
	ST=$!
}

t_exec_cmdline_not_shown() {
	need_root
	command -v strace > /dev/null || skip "no strace to hold exec with"
	local pid mon ns p st cli="" seen=""
	c1_running
	pid=$C1_PID mon=$C1_MON
	ns=$(readlink "/proc/$pid/ns/pid")
	exec_held connect 2 --pid-file "$T/epid" c1 true
	st=$ST
	if strace_held "$T/held.strace" "$st"; then
		cli=$(cat "$T/held.pid")
		for p in /proc/[0-9]*; do
			[ "$(readlink "$p/ns/pid" 2>/dev/null)" = "$ns" ] || continue
			[ "${p#/proc/}" != "$pid" ] || continue
			seen="$seen$(tr '\0' ' ' < "$p/cmdline" 2>/dev/null);"
		done
		kill -CONT "$cli"
	fi
	wait "$st" || true
	[ -n "$cli" ] || fail "exec was never held: $(tail -c 300 "$T/held.strace")"
	expect_contains "the held process" "$seen" "corral-exec"
	expect_not_contains "the CLI's host paths" "$seen" "$T"
	c1_gone "$pid" "$mon"
}

# An exec'd process that dies at its gate, after the monitor took it in
# and before the CLI opens the gate (the container stopped, the OOM
# killer): the CLI says so and exits, where its write to the gate raised
# SIGPIPE and it died without a word.  strace stops the CLI at the
# join's answer; the process is killed once it is in the container's
# group.
t_exec_dies_at_its_gate() {
	need_root
	command -v strace > /dev/null || skip "no strace to hold exec with"
	local pid mon ns p st cli="" child="" rc=0
	c1_running
	pid=$C1_PID mon=$C1_MON
	ns=$(readlink "/proc/$pid/ns/pid")
	exec_held recvfrom 3 c1 true
	st=$ST
	trap 'end_traced "$st" $child' EXIT
	strace_held "$T/held.strace" "$st" || fail "exec was never held: $(tail -c 300 "$T/held.strace")"
	cli=$(cat "$T/held.pid")
	for p in /proc/[0-9]*; do
		[ "$(readlink "$p/ns/pid" 2>/dev/null)" = "$ns" ] || continue
		[ "${p#/proc/}" != "$pid" ] || continue
		child=${p#/proc/}
	done
	[ -n "$child" ] || fail "no exec'd process at its gate"
	for _ in $(seq 1 100); do
		grep -q "corral-$mon-oci" "/proc/$child/cgroup" 2>/dev/null && break
		sleep 0.05
	done
	grep -q "corral-$mon-oci" "/proc/$child/cgroup" || fail "the monitor never took it in"
	kill -KILL "$child"
	for _ in $(seq 1 100); do
		[ "$(awk '{print $3}' "/proc/$child/stat" 2>/dev/null)" = R ] || break
		sleep 0.05
	done
	kill -CONT "$cli"
	wait "$st" || rc=$?
	trap - EXIT
	cat "$T/held"
	[ "$rc" != 141 ] || fail "the CLI died of SIGPIPE"
	expect_eq "exec's status" "$rc" 255
	expect_contains "why" "$(cat "$T/held")" "exited before it could start"
	c1_gone "$pid" "$mon"
}

# two_sleeps PID: until the container whose process is PID runs its two
# sleeps (5 s at most)
two_sleeps() {
	for _ in $(seq 1 100); do
		[ "$(pgrep -c --ns "$1" --nslist pid -x sleep)" = 2 ] && break
		sleep 0.05
	done
}

# trace_monitor MON STRACE-ARGS...: strace on the monitor MON (to
# $T/mon.strace, strace's pid in WATCH), returned once it is attached
trace_monitor() {
	local mon=$1
	shift
	timeout 60 strace -qq -p "$mon" "$@" -o "$T/mon.strace" &
	WATCH=$!
	for _ in $(seq 1 100); do
		[ "$(awk '/^TracerPid/ {print $2}' "/proc/$mon/status")" != 0 ] && break
		sleep 0.05
	done
}

# c1_sleeping: c1 running `sh` with two sleeps, strace watching its
# monitor's writes and kills (to $T/mon.strace, strace's pid in WATCH)
c1_sleeping() {
	bundle "$T/b" '["sh", "-c", "sleep 60 & sleep 60 & wait"]'
	oci create --bundle "$T/b" --pid-file "$T/pid" c1
	oci start c1
	C1_PID=$(cat "$T/pid") C1_MON=$(monitor_of c1)
	two_sleeps "$C1_PID"
	trace_monitor "$C1_MON" -e trace=write,kill
	trap 'kill -TERM $WATCH 2>/dev/null || true' EXIT
}

# monitor_order: once c1 stopped, the freezer's writes and the SIGTERMs
# its monitor made, in order, each run of kills as one "kill"
monitor_order() {
	wait_status c1 stopped
	kill -TERM "$WATCH" 2>/dev/null || true	# it ends with the monitor
	wait "$WATCH" || true
	trap - EXIT
	sed -n 's/.*write([0-9]*, "\(FROZEN\|THAWED\)".*/\1/p
		s/.*kill([0-9]*, SIGTERM).*/kill/p' "$T/mon.strace" | uniq | tr '\n' ' '
}

# kill --all with a signal other than KILL: each process gets it, and the
# group is frozen from the list's reading to the last kill(2), so none
# forks past the list and no listed pid is reused by a host process before
# its signal (strace on the monitor shows the order); a paused container
# stays paused, its signals pending
t_kill_all_freezes_first() {
	need_root
	command -v strace > /dev/null || skip "no strace to watch the monitor"
	local pids=""
	c1_sleeping
	pids="$C1_PID"
	oci kill --all c1 TERM
	expect_eq "kill --all TERM" "$(rc)" 0
	expect_eq "frozen around the kills" "$(monitor_order)" "FROZEN kill THAWED "
	expect_eq "init, sh and its two sleeps signalled" "$(grep -cE 'SIGTERM\) += 0' "$T/mon.strace")" 4
	oci delete c1
	c1_sleeping
	pids="$pids $C1_PID"
	oci pause c1
	oci kill --all c1 TERM
	expect_eq "kill --all TERM while paused" "$(rc)" 0
	expect_eq "still paused" "$(status_of c1)" paused
	oci resume c1
	expect_eq "paused: not thawed by the kill" "$(monitor_order)" "FROZEN kill THAWED "
	oci delete c1
	nothing_left c1 "$pids" "$C1_MON"
}

# kill --all where no freezer is usable: the monitor counts the group,
# then lists it into that many slots, and the group may grow in between.
# Only what fits is signalled.  Before, each pid the second listing
# counted was sent a kill(2) from past the end of the list: whatever lay
# there in memory, 0 (the monitor's own process group) and negative
# numbers (other process groups of the host).  The monitor is made in a
# mount namespace without the freezer's hierarchy; strace holds its
# second listing for 2 s while 20 host sleeps of ours join the group, and
# turns each of its kill(2)s into ESRCH, recorded and never sent.
t_kill_all_without_freezer_signals_only_listed() {
	need_root
	command -v strace > /dev/null || skip "no strace to hold the monitor"
	command -v unshare > /dev/null || skip "no unshare for a mount namespace"
	local fz mon procs="" listed hs="" pid bad=0 n
	fz=$(findmnt -rn -t cgroup -o TARGET,OPTIONS | awk '$2 ~ /(^|,)freezer(,|$)/ {print $1; exit}')
	[ -n "$fz" ] || skip "no cgroup v1 freezer mount to hide from the monitor"
	bundle "$T/b" '["sh", "-c", "sleep 60 & sleep 60 & wait"]'
	timeout 60 unshare -m --propagation private sh -c 'umount "$1" && shift && exec "$@"' \
		sh "$fz" "$OCI" --root "$T/root" --log "$T/log.json" --log-format json \
		create --bundle "$T/b" --pid-file "$T/pid" c1 > "$T/out" 2>&1 ||
		{ cat "$T/out"; fail "create without the freezer"; return 1; }
	oci start c1
	mon=$(monitor_of c1)
	two_sleeps "$(cat "$T/pid")"
	trace_monitor "$mon" -e trace=openat,kill -e inject=openat:delay_enter=2000000:when=3 \
		-e inject=kill:error=ESRCH
	trap 'kill -TERM $WATCH 2>/dev/null || true; kill $hs 2>/dev/null || true' EXIT
	timeout 60 "$OCI" --root "$T/root" kill --all c1 WINCH > "$T/kill.out" 2>&1 &
	pid=$!
	# the count's listing done (the first opens), the second one held
	for _ in $(seq 1 200); do
		[ "$(grep -c '^openat' "$T/mon.strace")" -ge 2 ] && break
		sleep 0.01
	done
	procs=$(sed -n '1s/^openat(AT_FDCWD, "\([^"]*\/cgroup.procs\)".*/\1/p' "$T/mon.strace")
	[ -n "$procs" ] || { cat "$T/mon.strace"; fail "the monitor listed no cgroup.procs"; }
	listed=$(cat "$procs")
	for _ in $(seq 1 20); do
		sleep 60 &
		hs="$hs $!"
		echo $! > "$procs"
	done
	wait "$pid" || fail "kill --all: $(cat "$T/kill.out")"
	kill -TERM "$WATCH" 2>/dev/null || true
	wait "$WATCH" || true
	n=$(grep -c '^kill(' "$T/mon.strace")
	for pid in $(sed -n 's/^kill(\(-\{0,1\}[0-9]*\),.*/\1/p' "$T/mon.strace"); do
		grep -qxF -- "$pid" <<< "$(printf '%s\n' $listed $hs)" || bad=$((bad + 1))
	done
	expect_eq "kill(2)s of pids neither listed nor joined" "$bad" 0 ||
		sed -n '/^kill(/p' "$T/mon.strace" | head -40
	[ "$n" -le $(( $(wc -w <<< "$listed") + 1 )) ] ||
		fail "$n kill(2)s for a list of $(wc -w <<< "$listed") + 1 slots"
	kill $hs 2>/dev/null || true
	trap - EXIT
	oci delete --force c1
	expect_eq "delete" "$(rc)" 0
}

# events: runc's JSON lines, from the container's cgroup
t_events() {
	need_root
	bundle "$T/b" '["sh", "-c", "sleep 30 & sleep 30 & wait"]' \
		'c["linux"]["resources"]["memory"]["limit"] = 32 << 20'
	oci events --stats nosuch > /dev/null || true
	expect_eq "unknown id rc" "$(rc)" 1
	expect_contains "runc's words" "$(last_error)" "container does not exist"
	oci events --interval 0s nosuch > /dev/null || true
	expect_contains "interval" "$(last_error)" "duration interval must be greater than 0"
	oci create --bundle "$T/b" c1
	oci start c1
	local mon line
	mon=$(monitor_of c1)
	# corral-init, the shell and its two sleeps, once forked (bounded)
	for _ in $(seq 1 100); do
		oci events --stats c1 > /dev/null
		[ "$(json data.pids.current < "$T/out")" = 4 ] && break
		sleep 0.05
	done
	line=$(head -1 "$T/out")
	echo "$line" | cut -c1-300
	expect_eq "--stats rc" "$(rc)" 0
	expect_eq "one line" "$(wc -l < "$T/out")" 1
	expect_eq "type" "$(echo "$line" | json type)" stats
	expect_eq "id" "$(echo "$line" | json id)" c1
	expect_eq "pids.current" "$(echo "$line" | json data.pids.current)" 4
	expect_eq "memory limit of config.json" "$(echo "$line" | json data.memory.usage.limit)" 33554432
	[ "$(echo "$line" | json data.memory.usage.usage)" -gt 0 ] ||
		fail "memory.usage.usage is not above 0"
	[ "$(echo "$line" | json data.cpu.usage.total)" -gt 0 ] ||
		fail "cpu.usage.total is not above 0"
	# --interval: lines until the container stops, then it ends by itself
	timeout 30 "$OCI" --root "$T/root" --log "$T/log.json" --log-format json \
		events --interval 50ms c1 > "$T/ev" 2> "$T/everr" &
	local ev=$! rc=0
	for _ in $(seq 1 200); do
		[ "$(wc -l < "$T/ev")" -ge 2 ] && break
		sleep 0.05
	done
	expect_contains "stats lines" "$(head -1 "$T/ev")" '"type":"stats","id":"c1"'
	# a process of the container past its 32 MiB: the kernel kills it
	oci exec c1 sh -c 'dd if=/dev/zero of=/dev/null bs=48M count=1 && echo survived' || true
	expect_not_contains "OOM-killed" "$(cat "$T/out")" survived
	for _ in $(seq 1 200); do
		grep -q '"type":"oom"' "$T/ev" && break
		sleep 0.05
	done
	expect_contains "an oom line" "$(grep oom "$T/ev")" '{"type":"oom","id":"c1"}'
	oci kill --all c1 KILL
	wait "$ev" || rc=$?
	expect_eq "events ends when the container stops" "$rc" 0
	cat "$T/everr"
	/usr/bin/python3 -c 'import json, sys
for l in open(sys.argv[1]):
    assert json.loads(l)["type"] in ("stats", "oom"), l' "$T/ev" ||
		fail "not runc's JSON lines: $(tail -1 "$T/ev")"
	wait_status c1 stopped
	oci events --stats c1 > /dev/null || true
	expect_eq "stopped rc" "$(rc)" 1
	expect_contains "stopped" "$(last_error)" "container with id c1 is not running"
	oci delete c1
	nothing_left c1 "" "$mon"
}

t_console_socket() {
	need_root
	bundle "$T/b" '["sh", "-c", "tty; echo on-the-pty"]' 'c["process"]["terminal"] = True'
	shim_c1 --console
	expect_contains "runc's name" "$(cat "$T/shim")" "console-name /dev/ptmx"
	expect_contains "a pty" "$(cat "$T/shim")" "/dev/pts/"
	expect_contains "output" "$(cat "$T/shim")" "on-the-pty"
	expect_contains "exit" "$(cat "$T/shim")" "exit 0"
	oci create --bundle "$T/b" c2 || true
	expect_eq "terminal without socket" "$(rc)" 1
	expect_contains "why" "$(last_error)" "--console-socket is required"
	oci delete c1
}

# process.consoleSize: the pty sized before its master goes to the
# engine, as runc sizes it (Docker 23 and later send the client's size,
# for run and exec); before, it was 0x0 until the engine's first resize,
# which comes once the process runs: `stty size` at once got none
t_console_size() {
	need_root
	bundle "$T/b" '["sh", "-c", "stty size; sleep 30"]' 'c["process"]["terminal"] = True
c["process"]["consoleSize"] = {"height": 33, "width": 101}'
	/usr/bin/python3 - "$OCI" "$T/root" "$T/b" <<'EOF' > "$T/out" 2>&1 || { cat "$T/out"; fail "console"; }
import json, os, select, socket, subprocess, sys, time
oci, root, bundle = sys.argv[1:4]
def runtime(args, path):
    """the runtime with --console-socket path: its process and the master"""
    l = socket.socket(socket.AF_UNIX)
    l.bind(path)
    l.listen(1)
    l.settimeout(30)
    p = subprocess.Popen([oci, "--root", root] + args[:1] + ["--console-socket", path] +
                         args[1:], stdin=subprocess.DEVNULL)
    c, _ = l.accept()
    _, fds, _, _ = socket.recv_fds(c, 64, 1)
    return p, fds[0]
def first_line(fd):
    """the master's first line, 20 s at most"""
    out, end = b"", time.monotonic() + 20
    while b"\n" not in out and time.monotonic() < end:
        if select.select([fd], [], [], 1)[0]:
            try:
                b = os.read(fd, 256)
            except OSError:
                break
            if not b:
                break
            out += b
    return out.decode(errors="replace").strip()
p, master = runtime(["create", "--bundle", bundle, "c1"], os.path.join(bundle, "c.sock"))
p.wait(30)
subprocess.run([oci, "--root", root, "start", "c1"], check=True, timeout=30)
print("init", first_line(master), flush=True)
proc = {"terminal": True, "args": ["sh", "-c", "stty size"], "cwd": "/",
        "env": ["PATH=/bin"], "user": {"uid": 0, "gid": 0}}
for name, size in (("exec", {"height": 44, "width": 120}), ("exec-none", None)):
    if size:
        proc["consoleSize"] = size
    else:
        proc.pop("consoleSize", None)
    json.dump(proc, open(os.path.join(bundle, name + ".json"), "w"))
    p, master = runtime(["exec", "--process", os.path.join(bundle, name + ".json"), "c1"],
                        os.path.join(bundle, name + ".sock"))
    print(name, first_line(master), flush=True)
    p.wait(30)
EOF
	cat "$T/out"
	expect_contains "init's pty" "$(cat "$T/out")" "init 33 101"
	expect_contains "an exec's pty" "$(cat "$T/out")" "exec 44 120"
	# an exec without one: none (never the container's)
	expect_not_contains "an exec's pty without a size" "$(cat "$T/out")" "exec-none 33 101"
	oci delete --force c1
	bundle "$T/b" '["true"]' 'c["process"]["consoleSize"] = {"height": -1, "width": 80}'
	oci create --bundle "$T/b" c2 || true
	expect_contains "a size out of range" "$(last_error)" "process.consoleSize: a height and a width"
	# past a winsize's 16 bits, or not a number: refused, never cut to fit
	local size
	for size in '{"height": 24, "width": 65536}' '{"height": "24", "width": 80}'; do
		bundle "$T/b" '["true"]' "c[\"process\"][\"consoleSize\"] = $size"
		oci create --bundle "$T/b" c2 || true
		expect_contains "a size refused: $size" "$(last_error)" "process.consoleSize: a height and a width"
		[ ! -e "$T/root/c2" ] || fail "state left behind for $size"
	done
}

# console_listener SOCK LOG: a unix socket at SOCK whose first caller's
# first message, fds and uid go to LOG; ended by a caller saying "done"
# (first or not), the test's own, so that nothing here waits on time.
# CONSOLE_LISTEN_AS=UID: bound as the caller, listened on as UID.
console_listener() {
	/usr/bin/python3 -c 'import os, socket, struct, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
if os.environ.get("CONSOLE_LISTEN_AS"):
    os.setresuid(*[int(os.environ["CONSOLE_LISTEN_AS"])] * 3)
s.listen(8)
s.settimeout(60)
print("listening", flush=True)
while True:
    c, _ = s.accept()
    uid = struct.unpack("3i", c.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[1]
    msg, fds, _, _ = socket.recv_fds(c, 256, 4)
    for fd in fds:
        import os; os.close(fd)
    if msg == b"done":
        break
    with open(sys.argv[2], "a") as f:
        f.write("connected: uid %d, %r, %d fds\n" % (uid, msg, len(fds)))' "$1" "$2"
}
console_done() {
	/usr/bin/python3 -c 'import socket, sys
c = socket.socket(socket.AF_UNIX); c.connect(sys.argv[1]); c.sendall(b"done")' "$1"
}

# --console-socket through a tenant's link: the engine's path, in a
# bundle the tenant writes, had root connect through the tenant's link to
# a socket of the tenant's choosing, here one in root's 0700 directory
# that the tenant cannot reach, and hand it the container's pty master.
# A link there is not followed as root now, on the way or as the last
# name (a socket the tenant bound at the name: the next test).
t_console_socket_not_through_a_tenants_link() {
	need_root
	bundle "$T/b" '["sh", "-c", "echo on-the-pty"]' 'c["process"]["terminal"] = True'
	chown 65534:65534 "$T/b"
	mkdir -m 0700 "$T/private"
	console_listener "$T/private/sock" "$T/heard" > "$T/listening" 2>&1 &
	local lpid=$! why1="" why2="" rc1 rc2
	for _ in $(seq 1 200); do [ -S "$T/private/sock" ] && break; sleep 0.05; done
	[ -S "$T/private/sock" ] || { kill "$lpid"; fail "no listener: $(cat "$T/listening")"; }
	ln -s "$T/private" "$T/b/tty"
	ln -s "$T/private/sock" "$T/b/console.sock"
	chown -h 65534:65534 "$T/b/tty" "$T/b/console.sock"
	oci create --bundle "$T/b" --console-socket "$T/b/tty/sock" c1 || true
	rc1=$(rc)
	[ ! -e "$T/log.json" ] || why1=$(last_error)
	oci delete --force c1 > /dev/null || true
	oci create --bundle "$T/b" --console-socket "$T/b/console.sock" c2 || true
	rc2=$(rc)
	[ ! -e "$T/log.json" ] || why2=$(last_error)
	oci delete --force c2 > /dev/null || true
	console_done "$T/private/sock"
	wait "$lpid" || fail "the listener: $(cat "$T/listening")"
	expect_eq "what root's socket heard" "$(cat "$T/heard" 2>/dev/null)" ""
	expect_eq "create, a link on the way" "$rc1" 1
	expect_contains "refused" "$why1" "tty is a link in a directory another user may write"
	expect_eq "create, a link at the name" "$rc2" 1
	expect_contains "refused" "$why2" "console.sock is a link in a directory another user may write"
	# a link of root's in root's own directory (/var/run -> /run) is followed
	mkdir -m 0700 "$T/ours"
	console_listener "$T/ours/sock" "$T/heard3" > "$T/listening3" 2>&1 &
	lpid=$!
	for _ in $(seq 1 200); do [ -S "$T/ours/sock" ] && break; sleep 0.05; done
	[ -S "$T/ours/sock" ] || { kill "$lpid"; fail "no listener: $(cat "$T/listening3")"; }
	chmod go-w "$T"
	ln -s ours "$T/ours.link"
	oci create --bundle "$T/b" --console-socket "$T/ours.link/sock" c3 || true
	local rc3
	rc3=$(rc)
	oci delete --force c3 > /dev/null || true
	console_done "$T/ours/sock"
	wait "$lpid" || fail "the listener: $(cat "$T/listening3")"
	expect_eq "create, root's link" "$rc3" 0
	expect_contains "what the engine's socket heard" "$(cat "$T/heard3" 2>/dev/null)" "/dev/ptmx', 1 fds"
}

# --console-socket at a socket another user bound: a tenant who writes
# the directory the engine's socket is in (its bundle) renames the
# engine's away and binds its own at the name, and root handed it the
# container's pty master (runc would: it dials the path).  The socket
# must be root's (or the caller's) now, judged on the fd connected; one
# of root's in the same tenant's directory is still the engine's.
t_console_socket_not_a_tenants_own() {
	need_root
	bundle "$T/b" '["sh", "-c", "echo on-the-pty"]' 'c["process"]["terminal"] = True'
	chown 65534:65534 "$T/b"
	setpriv --reuid=65534 --regid=65534 --clear-groups \
		bash -c "$(declare -f console_listener); console_listener \"\$1\" \"\$2\"" \
		_ "$T/b/console.sock" "$T/b/heard" > "$T/listening" 2>&1 &
	local lpid=$! why=""
	for _ in $(seq 1 200); do [ -S "$T/b/console.sock" ] && break; sleep 0.05; done
	[ -S "$T/b/console.sock" ] || { kill "$lpid"; fail "no listener: $(cat "$T/listening")"; return 1; }
	oci create --bundle "$T/b" --console-socket "$T/b/console.sock" c1 > /dev/null || true
	rc1=$(rc)
	[ ! -e "$T/log.json" ] || why=$(last_error)
	oci delete --force c1 > /dev/null || true
	console_done "$T/b/console.sock"
	wait "$lpid" || fail "the listener: $(cat "$T/listening")"
	expect_eq "what the tenant's socket heard" "$(cat "$T/b/heard" 2>/dev/null)" ""
	expect_eq "create, the tenant's socket" "$rc1" 1
	expect_contains "refused" "$why" "a socket of uid 65534, not the engine's"
	[ ! -e "$T/root/c1" ] || fail "state left behind by a refused create"
	# root's socket in the same directory: the terminal goes there
	console_listener "$T/b/root.sock" "$T/heard2" > "$T/listening2" 2>&1 &
	lpid=$!
	for _ in $(seq 1 200); do [ -S "$T/b/root.sock" ] && break; sleep 0.05; done
	[ -S "$T/b/root.sock" ] || { kill "$lpid"; fail "no listener: $(cat "$T/listening2")"; return 1; }
	oci create --bundle "$T/b" --console-socket "$T/b/root.sock" c2 > /dev/null || true
	rc2=$(rc)
	oci delete --force c2 > /dev/null || true
	console_done "$T/b/root.sock"
	wait "$lpid" || fail "the listener: $(cat "$T/listening2")"
	expect_eq "create, root's socket" "$rc2" 0
	expect_contains "what root's socket heard" "$(cat "$T/heard2" 2>/dev/null)" "/dev/ptmx', 1 fds"
}

no_terminal_heard() {	# no_terminal_heard WHO LOG: a console_listener's LOG has no fd
	local heard
	heard=$(cat "$2" 2>/dev/null) || true
	[[ $heard != *ptmx* && $heard != *" 1 fds"* ]] || fail "$1 was handed the terminal: $heard"
}
# create_on_foreign_console ID LPID LISTENING HEARD WHAT: container ID
# created on $T/b/console.sock, a socket of root's that LPID listens on
# (its output in LISTENING), then deleted; the listener was told no
# terminal (HEARD; WHAT says whose).  CC_RC: create's status, CC_WHY: its
# logged error.
create_on_foreign_console() {
	CC_WHY=""
	expect_eq "$5: the socket's owner" "$(stat -c %u "$T/b/console.sock")" 0
	oci create --bundle "$T/b" --console-socket "$T/b/console.sock" "$1" > /dev/null || true
	CC_RC=$(rc)
	[ ! -e "$T/log.json" ] || CC_WHY=$(last_error)
	oci delete --force "$1" > /dev/null || true
	console_done "$T/b/console.sock"
	wait "$2" || fail "the listener: $(cat "$3")"
	# connected (to ask the kernel who listens), then closed: no terminal
	no_terminal_heard "$5" "$4"
}

# --console-socket at a socket of root's whose listener is not the engine:
# root in another engine's container (its own pid namespace, no user
# namespace) with a host directory bound in binds a socket of uid 0, which
# a tenant who writes the engine's socket's directory (its bundle) puts
# at the name; root's socket passed, and root handed the container's pty
# master to that container.  The listener must be root (or the caller) in
# create's pid namespace now, as the kernel took it at listen(); and one
# root bound but a process of uid 65534 listens on is refused too.
t_console_socket_not_another_namespaces() {
	need_root
	bundle "$T/b" '["sh", "-c", "echo on-the-pty"]' 'c["process"]["terminal"] = True'
	chown 65534:65534 "$T/b"
	# root, in a pid namespace of its own
	unshare --pid --fork bash -c "$(declare -f console_listener); console_listener \"\$1\" \"\$2\"" \
		_ "$T/b/console.sock" "$T/b/heard" > "$T/listening" 2>&1 &
	local lpid=$!
	for _ in $(seq 1 200); do [ -S "$T/b/console.sock" ] && break; sleep 0.05; done
	[ -S "$T/b/console.sock" ] || { kill "$lpid"; fail "no listener: $(cat "$T/listening")"; return 1; }
	create_on_foreign_console c1 "$lpid" "$T/listening" "$T/b/heard" "the other namespace's socket"
	expect_eq "create, another pid namespace's listener" "$CC_RC" 1
	expect_contains "refused" "$CC_WHY" "listened on by pid"
	expect_contains "refused, why" "$CC_WHY" "of another pid namespace (a container's)"
	[ ! -e "$T/root/c1" ] || fail "state left behind by a refused create"
	# root bound it, uid 65534 listens on it
	rm -f "$T/b/console.sock" "$T/log.json"
	CONSOLE_LISTEN_AS=65534 console_listener "$T/b/console.sock" "$T/b/heard2" > "$T/listening2" 2>&1 &
	lpid=$!
	for _ in $(seq 1 200); do grep -q listening "$T/listening2" 2>/dev/null && break; sleep 0.05; done
	grep -q listening "$T/listening2" || { kill "$lpid"; fail "no listener: $(cat "$T/listening2")"; return 1; }
	create_on_foreign_console c2 "$lpid" "$T/listening2" "$T/b/heard2" "65534's listener"
	expect_eq "create, 65534's listener" "$CC_RC" 1
	expect_contains "refused" "$CC_WHY" "listened on by uid 65534, not the engine"
}

t_errors_in_json_log() {
	need_root
	bundle "$T/b" '["sleep", "30"]'
	oci start nosuch || true
	expect_contains "start" "$(last_error)" "container does not exist"
	expect_eq "level" "$(tail -1 "$T/log.json" | json level)" error
	oci create --bundle "$T/b" c1
	oci create --bundle "$T/b" c1 || true
	expect_contains "twice" "$(last_error)" "container with id exists"
	oci create --bundle "$T/b" ../evil || true
	expect_contains "id" "$(last_error)" "invalid container id"
	oci kill c1 NOSIG || true
	expect_contains "signal" "$(last_error)" "invalid signal"
	bundle "$T/nocmd" '["/bin/no-such-command"]'
	oci delete --force c1
	expect_eq "delete --force" "$(rc)" 0
	[ ! -e "$T/root/c1" ] || fail "state left"
}

# What config.json says (an image's author writes it through the engine)
# and an error quotes: on stderr and in a text log one line, its controls
# as \xNN (a '"' and a newline in a mount's destination wrote a line of its
# own, level=info msg="ok", into the log; ESC reached the terminal of
# whoever read the engine's error); in the JSON log whole.  And cut at the
# message's end inside a character it is still logged: json_pack refused
# the cut UTF-8 and the error had no line in the JSON log at all.
t_config_quoted_as_text_in_the_log() {
	need_root
	local dst='/m\"\nlevel=info msg=\"ok\x1b[2J'
	bundle "$T/b" '["true"]' "c['mounts'].append({'destination': '$dst', 'type': 'ext4', 'source': 'x'})"
	oci create --bundle "$T/b" bad || true
	expect_eq "rc" "$(rc)" 1
	expect_eq "the destination, whole" "$(last_error | grep -c 'level=info msg="ok')" 1
	expect_eq "stderr: one line" "$(wc -l < "$T/err")" 1
	! grep -q $'\x1b' "$T/err" || fail "an escape byte on stderr"
	expect_contains "stderr" "$(< "$T/err")" 'mount on /m"\x0alevel=info msg="ok\x1b[2J refused'
	timeout 60 "$OCI" --root "$T/root" --log "$T/log.txt" --log-format text create \
		--bundle "$T/b" bad > /dev/null 2>&1 < /dev/null && fail "created"
	expect_eq "text log: one line" "$(wc -l < "$T/log.txt")" 1
	expect_contains "text log" "$(< "$T/log.txt")" \
		'msg="mounts[5]: a ext4 mount on /m\"\\x0alevel=info msg=\"ok\\x1b[2J refused'
	for pad in "" x; do
		: > "$T/log.json"
		bundle "$T/b" '["true"]' \
			"c['mounts'].append({'destination': '/$pad' + '\\u00e9' * 400, 'type': 'ext4', 'source': 'x'})"
		oci create --bundle "$T/b" bad || true
		expect_eq "rc, pad '$pad'" "$(rc)" 1
		expect_contains "cut, pad '$pad'" "$(last_error)" "a ext4 mount on /$pad"$'\xc3\xa9'
	done
	[ ! -e "$T/root/bad" ] || fail "state left behind by a refused create"
}

# `state` shows config.json's annotations, keys and values: a C1 control
# (U+009B, CSI to xterm) and U+202E went to the terminal raw; ASCII JSON.
t_state_in_ascii() {
	need_root
	bundle "$T/b" '["sleep", "30"]' 'c["annotations"] = {"k\u009b": "\u009b2J \u202egnp.sh"}'
	oci create --bundle "$T/b" c1
	expect_eq "create" "$(rc)" 0
	oci state c1
	expect_eq "state" "$(rc)" 0
	! LC_ALL=C grep -q $'\xc2\x9b\|\xe2\x80\xae' "$T/out" || fail "raw on stdout: $(od -c "$T/out" | head)"
	expect_contains "kept, escaped" "$(< "$T/out")" '"k\u009B": "\u009B2J \u202Egnp.sh"'
	oci delete --force c1
	expect_eq "delete --force" "$(rc)" 0
}

# ---- config.json that asks for too much ---------------------------------

# shim_c1 [ARGS...]: the shim runs bundle $T/b as container c1, its
# output kept in $T/shim and shown; a run that failed fails the test,
# with what it printed
shim_c1() {
	/usr/bin/python3 "$SHIM" "$OCI" "$T/root" "$T/b" c1 "$@" > "$T/shim" 2>&1 ||
		{ cat "$T/shim"; fail "shim"; return 1; }
	cat "$T/shim"
}

refused() {	# refused EDIT WANT: create fails with WANT, leaves nothing
	bundle "$T/b" '["true"]' "$1"
	oci create --bundle "$T/b" bad || true
	expect_eq "rc" "$(rc)" 1
	expect_contains "refusal" "$(last_error)" "$2"
	[ ! -e "$T/root/bad" ] || fail "state left behind by a refused create"
}

t_refuses_privileged_caps() {
	need_root
	refused 'c["process"]["capabilities"]["bounding"].append("CAP_SYS_ADMIN")' \
		"CAP_SYS_ADMIN refused"
}

t_refuses_host_namespaces() {
	need_root
	refused 'c["linux"]["namespaces"] = [n for n in c["linux"]["namespaces"] if n["type"] != "network"]' \
		"the host's network namespace refused"
	refused 'c["linux"]["namespaces"][0]["path"] = "/proc/1/ns/pid"' \
		"joining the pid namespace /proc/1/ns/pid refused"
	# where pods may join theirs: a path that is no namespace (a device,
	# which is never opened for real) is refused
	echo '{"join_pod_network": true}' > "$T/op.json"
	CORRAL_OCI_CONFIG=$T/op.json refused \
		'c["linux"]["namespaces"][1]["path"] = "/dev/null"' \
		"/dev/null is not a network namespace"
}

# A type corral does not make: refused as runc refuses one it does not
# know, where create passed over it (exit 0: a "time" namespace's
# container had the host's clocks, a misspelt one ran as another).
t_refuses_unknown_namespaces() {
	need_root
	refused 'c["linux"]["namespaces"].append({"type": "bogus"})' \
		'linux.namespaces[5]: unknown namespace type "bogus"'
	refused 'c["linux"]["namespaces"].append({"type": "time"})' \
		"a time namespace refused"
	# the kinds corral makes anyway (containerd's spec lists cgroup)
	bundle "$T/b" '["true"]' 'c["linux"]["namespaces"] += [{"type": "cgroup"}, {"type": "user"}]'
	oci create --bundle "$T/b" c1 > /dev/null || true
	expect_eq "cgroup and user" "$(rc)" 0
	oci delete --force c1 > /dev/null
}

# Every failure of create, start, kill, delete and state exits 1, as
# runc's, with the error the last line of the JSON log (where the shim
# looks), and leaves no state: a missing bundle, a config.json that is
# not JSON, an unknown namespace type, a rootfs that is a file, a pid
# file in a missing directory, a console socket that refuses.
exits_one() {	# exits_one WHAT WANT ARGS...: exit 1, WANT logged, no c1 state
	local what=$1 want=$2
	shift 2
	rm -f "$T/log.json"
	oci "$@" > /dev/null || true
	expect_eq "$what: rc" "$(rc)" 1 || return 1
	expect_contains "$what: logged" "$(last_error)" "$want" || return 1
	[ ! -e "$T/root/c1" ] || { fail "$what: state left"; return 1; }
}
t_failures_exit_1() {
	need_root
	local verb
	bundle "$T/b" '["true"]'
	exits_one "missing bundle" "--bundle $T/nosuch" create --bundle "$T/nosuch" c1 || return 1
	mkdir "$T/nj"
	echo 'not json {' > "$T/nj/config.json"
	exits_one "config.json not JSON" "$T/nj/config.json:1" create --bundle "$T/nj" c1 || return 1
	bundle "$T/ns" '["true"]' 'c["linux"]["namespaces"].append({"type": "bogus"})'
	exits_one "unknown namespace" "unknown namespace type" create --bundle "$T/ns" c1 || return 1
	mkdir "$T/rf"
	cp "$T/b/config.json" "$T/rf/"
	touch "$T/rf/rootfs"
	exits_one "rootfs a file" "not a directory" create --bundle "$T/rf" c1 || return 1
	exits_one "pid file's directory missing" "cannot open nodir" \
		create --bundle "$T/b" --pid-file "$T/nodir/pid" c1 || return 1
	bundle "$T/tty" '["true"]' 'c["process"]["terminal"] = True'
	/usr/bin/python3 -c 'import socket, sys
socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$T/refusing.sock"
	exits_one "console socket refuses" "Connection refused" \
		create --bundle "$T/tty" --console-socket "$T/refusing.sock" c1 || return 1
	for verb in start state kill delete; do
		exits_one "$verb of no container" "container does not exist" "$verb" c1 || return 1
	done
	oci create --bundle "$T/b" c1 > /dev/null
	expect_eq "create" "$(rc)" 0 || return 1
	oci kill c1 KILL > /dev/null
	wait_status c1 stopped || return 1
	oci start c1 > /dev/null || true
	expect_eq "start of a stopped container: rc" "$(rc)" 1
	expect_contains "start of a stopped container" "$(last_error)" "stopped"
	oci kill c1 > /dev/null || true
	expect_eq "kill of a stopped container: rc" "$(rc)" 1
	expect_contains "kill of a stopped container" "$(last_error)" "not running"
	oci delete c1 > /dev/null
	expect_eq "delete" "$(rc)" 0
}

# A command that is not in the rootfs: create fails with runc's reason
# (its init looks the command up before it waits for start), where it
# exited 0, start too, and only the command's 127 said it.  A name is
# looked for in the command's PATH, a path as it is; a found one starts.
# The words are runc 1.1's (Debian's, run here on the same bundles).
t_create_fails_on_a_missing_command() {
	need_root
	bundle "$T/b" '["/bin/no-such-command"]'
	exits_one "a missing path" \
		'exec: "/bin/no-such-command": stat /bin/no-such-command: no such file or directory' \
		create --bundle "$T/b" c1 || return 1
	bundle "$T/b" '["no-such-command"]'
	exits_one "a name in no PATH directory" \
		'exec: "no-such-command": executable file not found in $PATH' \
		create --bundle "$T/b" c1 || return 1
	# found in PATH's second directory, and through a link
	bundle "$T/b" '["hello", "x"]' 'c["process"]["env"] = ["PATH=/nowhere:/bin"]'
	ln -sf busybox "$T/b/rootfs/bin/hello"
	oci create --bundle "$T/b" c1 > /dev/null
	expect_eq "create, found in PATH" "$(rc)" 0 || return 1
	oci delete --force c1 > /dev/null
	bundle "$T/b" '["/bin/true"]'
	oci create --bundle "$T/b" c1 > /dev/null
	expect_eq "create, a path found" "$(rc)" 0 || return 1
	oci delete --force c1 > /dev/null
}

# A command that is there but cannot run: a directory, a file without an
# execute bit, one whose bits let only others run it.  create passed the
# files (only existence was judged), start too, and the command's 127 said
# it; a directory it refused as "no such file" (podman: 127, not found);
# now create fails as runc's does, in its words: Go's LookPath judges the
# mode, then runc's eaccess() asks as the process that will exec it.  In
# PATH such a file is passed over, as exec.LookPath and execvp do.
t_create_fails_on_a_command_that_cannot_run() {
	need_root
	mkdir -p "$T/b/rootfs/dir"
	bundle "$T/b" '["/dir"]'
	exits_one "a directory" 'exec: "/dir": permission denied' \
		create --bundle "$T/b" c1 || return 1
	printf '#!/bin/sh\necho ran\n' > "$T/b/rootfs/bin/plain"
	chmod 0644 "$T/b/rootfs/bin/plain"
	bundle "$T/b" '["/bin/plain"]'
	exits_one "a file without an execute bit" 'exec: "/bin/plain": permission denied' \
		create --bundle "$T/b" c1 || return 1
	bundle "$T/b" '["plain"]'
	exits_one "only a file without an execute bit in PATH" \
		'exec: "plain": executable file not found in $PATH' \
		create --bundle "$T/b" c1 || return 1
	# root's, run by its owner only: the container's user is not its owner
	chmod 0700 "$T/b/rootfs/bin/plain"
	bundle "$T/b" '["/bin/plain"]'
	exits_one "an execute bit that is not the container's" \
		'exec /bin/plain: permission denied' create --bundle "$T/b" c1 || return 1
	bundle "$T/b" '["plain"]'
	exits_one "the same, found in PATH" 'exec /bin/plain: permission denied' \
		create --bundle "$T/b" c1 || return 1
	# passed over in PATH's first directory, found in its second
	mkdir -p "$T/b/rootfs/first"
	chmod 0644 "$T/b/rootfs/bin/plain"
	printf '#!/bin/sh\necho ran\n' > "$T/b/rootfs/first/hello"
	chmod 0644 "$T/b/rootfs/first/hello"
	ln -sf busybox "$T/b/rootfs/bin/hello"
	bundle "$T/b" '["hello", "x"]' 'c["process"]["env"] = ["PATH=/first:/bin"]'
	oci create --bundle "$T/b" c1 > /dev/null
	expect_eq "create, the runnable one in PATH" "$(rc)" 0 || return 1
	oci delete --force c1 > /dev/null
	# one the container's user may run starts
	chmod 0755 "$T/b/rootfs/bin/plain"
	bundle "$T/b" '["/bin/plain"]'
	oci create --bundle "$T/b" c1 > /dev/null
	expect_eq "create, runnable" "$(rc)" 0 || return 1
	oci start c1 > /dev/null
	wait_status c1 stopped || return 1
	oci delete c1 > /dev/null
}

# io.corral.policy: the bundle picks one of the operator's named policies,
# laid over the operator's base (its lists replacing the base's).  It may
# widen the base; it may not take away the base's denials (a tripwire,
# network.deny, an export hold rule), set for every container.
t_annotation_policy_keeps_base_denials() {
	need_root
	mkdir -p "$T/pol"
	echo '{"abort": {"tripwires": ["/home/agent/.aws/credentials"]},
	       "network": {"deny": ["evil.test"]}}' > "$T/pol/base.json"
	echo '{"abort": {"tripwires": []}}' > "$T/pol/notrip.json"
	echo '{"network": {"deny": ["other.test"]}}' > "$T/pol/nodeny.json"
	echo '{"abort": {"tripwires": ["/home/agent/.aws/credentials", "/tmp/.env"]},
	       "limits": {"pids": 2048}}' > "$T/pol/wider.json"
	printf '{"policy": "%s", "policies_dir": "%s"}\n' "$T/pol/base.json" "$T/pol" > "$T/op.json"
	chmod -R a+rX "$T/pol" "$T/op.json"
	CORRAL_OCI_CONFIG=$T/op.json refused 'c["annotations"] = {"io.corral.policy": "notrip"}' \
		"annotation io.corral.policy=notrip: $T/pol/notrip.json, over the base $T/pol/base.json: abort.tripwires: the operator's tripwire /home/agent/.aws/credentials cannot be removed"
	CORRAL_OCI_CONFIG=$T/op.json refused 'c["annotations"] = {"io.corral.policy": "nodeny"}' \
		"network.deny: the operator's denial \"evil.test\" cannot be removed"
	# the user's case: a named policy that keeps them and widens is taken
	bundle "$T/b" '["true"]' 'c["annotations"] = {"io.corral.policy": "wider"}'
	CORRAL_OCI_CONFIG=$T/op.json oci create --bundle "$T/b" c1 || true
	expect_eq "wider: created" "$(rc)" 0
	oci delete -f c1 || true
	[ ! -e "$T/root/c1" ] || fail "c1 left behind"
}

t_refuses_host_binds() {
	need_root
	refused 'c["mounts"].append({"destination": "/host", "type": "bind", "source": "/etc", "options": ["rbind", "ro"]})' \
		"the host's /etc bound on /host refused"
}

t_refuses_devices() {
	need_root
	refused 'c["linux"]["devices"] = [{"path": "/dev/sda", "type": "b", "major": 8, "minor": 0}]' \
		"device /dev/sda refused"
}

# Docker's state root for its runtime is <exec root>/runtime-runc/moby
# and its ids are 64 characters: the monitor's socket, <root>/<id>/ctl,
# is longer than a unix socket's 107 bytes under a dockerd --exec-root of
# 21 characters or more (a private dockerd's under /tmp, tests'), and
# every create failed ("socket path ... is too long"); every verb reaches
# it now
t_state_root_longer_than_a_socket_path() {
	need_root
	local root id out
	root=$T/runtime-runc-of-a-long-exec-root/moby
	id=$(printf 'c%.0s' $(seq 1 64))
	mkdir -p "$root"
	trap "timeout 30 '$OCI' --root '$root' delete --force '$id' > /dev/null 2>&1 || true" EXIT
	bundle "$T/b" '["sleep", "30"]'
	timeout 60 "$OCI" --root "$root" create --bundle "$T/b" "$id" < /dev/null ||
		fail "create under $root"
	timeout 60 "$OCI" --root "$root" start "$id" || fail "start"
	out=$(timeout 60 "$OCI" --root "$root" state "$id")
	expect_contains "state" "$out" '"status": "running"'
	out=$(timeout 60 "$OCI" --root "$root" exec "$id" echo exec-ok)
	expect_eq "exec" "$out" exec-ok
	timeout 60 "$OCI" --root "$root" pause "$id" || fail "pause"
	expect_contains "paused" "$(timeout 60 "$OCI" --root "$root" state "$id")" '"status": "paused"'
	timeout 60 "$OCI" --root "$root" resume "$id" || fail "resume"
	timeout 60 "$OCI" --root "$root" delete --force "$id" || fail "delete"
	[ ! -e "$root/$id" ] || fail "state left"
}

t_refuses_hooks() {
	need_root
	refused 'c["hooks"] = {"prestart": [{"path": "/bin/sh"}]}' "hooks.prestart refused"
}

# Docker's hook, in every config.json dockerd writes (`--network none`
# too): dockerd's own binary by its pid, to learn the container's netns.
# Not run, and the container runs; refused, no `docker run` ever ran.  Any
# other hook, or that one's shape changed, is refused as before.
DOCKER_HOOK="{'path': '/proc/$$/exe', 'args': ['libnetwork-setkey', '-exec-root=/run/docker', 'c0ffee', 'a8196938cc9e']}"
t_network_hook_of_docker_not_run() {
	need_root
	bundle "$T/b" '["sh", "-c", "echo ran; exit 3"]' "c['hooks'] = {'prestart': [$DOCKER_HOOK]}"
	shim_c1
	expect_contains "Docker's hook passed over" "$(cat "$T/shim")" "ran"
	expect_contains "its exit" "$(cat "$T/shim")" "exit 3"
	oci delete c1
	local h="$DOCKER_HOOK" edit
	for edit in "{'poststart': [$h]}" "{'createRuntime': [$h]}" \
		    "{'prestart': [$h, $h]}" "{'prestart': [$h, {'path': '/bin/sh'}]}" \
		    "{'prestart': [$h], 'poststop': [{'path': '/bin/sh'}]}" \
		    "{'prestart': [dict($h, path='/usr/sbin/dockerd')]}" \
		    "{'prestart': [dict($h, path='/proc/self/exe')]}" \
		    "{'prestart': [dict($h, path='/proc/1/exe/../../../bin/sh')]}" \
		    "{'prestart': [dict($h, args=['sh', '-exec-root=/run/docker', 'x', 'y'])]}" \
		    "{'prestart': [dict($h, args=$h['args'] + ['more'])]}" \
		    "{'prestart': [dict($h, env=['LD_PRELOAD=/tmp/x.so'])]}"; do
		refused "c['hooks'] = $edit" "refused: hooks run host programs as root"
	done
}

# The root a bundle names must be an image's tree, never the host's
t_refuses_rootfs_escape() {
	need_root
	bundle "$T/s" '["true"]'
	rm -rf "$T/s/rootfs"
	ln -s / "$T/s/rootfs"
	oci create --bundle "$T/s" bad || true
	expect_eq "rc" "$(rc)" 1
	expect_contains "a symlink rootfs" "$(last_error)" "root.path"
	expect_contains "why" "$(last_error)" "refused"
	/usr/bin/python3 -c 'import json, sys
c = json.load(open(sys.argv[1])); c["root"]["path"] = "rootfs/"
json.dump(c, open(sys.argv[1], "w"))' "$T/s/config.json"
	oci create --bundle "$T/s" bad || true
	expect_contains "a symlink rootfs, with a /" "$(last_error)" "is a symbolic link"
	refused 'c["root"]["path"] = "../../../../../../../.."' "the host's root refused"
	refused 'c["root"]["path"] = "/"' "the host's root refused"
}

# process.cwd and mount destinations: no ".." out of the rootfs, and a
# symlink in the image resolves inside it (or is refused), never on the host
t_refuses_path_escape() {
	need_root
	refused 'c["process"]["cwd"] = "/../../../etc"' "not a plain absolute path"
	# judged as written, not made plain by the walk through the image
	refused 'c["process"]["cwd"] = "/./etc"' "not a plain absolute path"
	refused 'c["process"]["cwd"] = "//etc"' "not a plain absolute path"
	mkdir -p "$T/share"
	ln -s /etc "$T/share/etc-link"
	printf '{"allow_bind": ["%s"]}' "$T/share" > "$T/op.json"
	export CORRAL_OCI_CONFIG=$T/op.json
	refused "c['mounts'].append({'destination': '/data/../../../../etc', 'type': 'bind', 'source': '$T/share', 'options': ['rbind', 'ro']})" \
		'".." component'
	# a source whose symlink leaves the allowlist
	refused "c['mounts'].append({'destination': '/data', 'type': 'bind', 'source': '$T/share/etc-link', 'options': ['rbind', 'ro']})" \
		"not beneath the operator's allow_bind"
	unset CORRAL_OCI_CONFIG
}

t_refuses_other_mounts() {
	need_root
	refused 'c["mounts"].append({"destination": "/mnt", "type": "ext4", "source": "/dev/sda1"})' \
		"a ext4 mount on /mnt refused"
	refused 'c["mounts"].append({"destination": "/hostproc", "type": "proc", "source": "proc"})' \
		"a proc mount on /hostproc refused"
}

# ---- tmpfs mounts (docker and podman --tmpfs) -----------------------------

# A config.json tmpfs mount: what the user expects of one, a writable,
# empty, private directory (refused before: "a tmpfs mount on /cache
# refused").  Not a tmpfs of its own but a directory of the container's
# scratch, bound there: empty over what the image has at that path, its
# mode and ro/noexec honoured, nosuid and nodev always, on a read-only
# root; gone with the container.
t_tmpfs_mount() {
	need_root
	bundle "$T/b" '["sh", "-c", "echo n=$(ls -A /cache | busybox wc -l); busybox stat -c \"mode %a %u\" /cache /ro; echo data > /cache/f && cat /cache/f; touch /ro/x; touch /etc/x; busybox grep -E \" /(cache|ro|nx) \" /proc/self/mountinfo; busybox cp /bin/busybox /nx/true && /nx/true && echo EXEC-nx; busybox cp /bin/busybox /cache/true && /cache/true && echo EXEC-cache"]' \
		"c['mounts'] += [{'destination': '/cache', 'type': 'tmpfs', 'source': 'tmpfs', 'options': ['nosuid', 'nodev', 'mode=750']},
{'destination': '/ro', 'type': 'tmpfs', 'source': 'tmpfs', 'options': ['ro', 'dev', 'suid']},
{'destination': '/nx', 'type': 'tmpfs', 'source': 'tmpfs', 'options': ['noexec']}]"
	mkdir -p "$T/b/rootfs/cache"
	echo image > "$T/b/rootfs/cache/old"
	for _ in 1 2; do
		shim_c1
		# every run starts empty: the last one's file went with it
		expect_contains "empty" "$(cat "$T/shim")" "n=0"
		expect_contains "mode= and its owner" "$(cat "$T/shim")" "mode 750 1000"
		expect_contains "a tmpfs's own mode" "$(cat "$T/shim")" "mode 1777 1000"
		expect_contains "written" "$(cat "$T/shim")" $'\ndata\n'
		expect_contains "ro" "$(cat "$T/shim")" "/ro/x: Read-only file system"
		expect_contains "the root read-only still" "$(cat "$T/shim")" "/etc/x: Read-only file system"
		expect_eq "nosuid, nodev: all three" \
			"$(grep -cE ' /(cache|ro|nx) .*nosuid,nodev' "$T/shim")" 3
		expect_not_contains "noexec" "$(cat "$T/shim")" "EXEC-nx"
		expect_contains "exec where not noexec" "$(cat "$T/shim")" "EXEC-cache"
		expect_contains "exit" "$(cat "$T/shim")" "exit 0"
		oci delete c1
	done
	[ "$(ls -A "$T/b/rootfs/cache")" = old ] || fail "the bundle's rootfs written: $(ls -A "$T/b/rootfs/cache")"
	nothing_left c1 "" ""
	# an exec'd process (its own Landlock rules, from the config) writes there too
	bundle "$T/b" '["sleep", "30"]' \
		"c['mounts'].append({'destination': '/cache', 'type': 'tmpfs', 'source': 'tmpfs'})"
	oci create --bundle "$T/b" c2 > /dev/null
	oci start c2 > /dev/null
	expect_eq "exec writes" "$(oci exec c2 sh -c 'echo by-exec > /cache/e && cat /cache/e')" by-exec
	oci delete --force c2
}

# A read-only tmpfs with another beneath it (docker --tmpfs /r:ro
# --tmpfs /r/w): the mount point of /r/w is made in /r before /r is made
# read-only (it failed: "cannot create /r/w: Read-only file system"), and
# only /r's own mount is; /r/w stays writable.
t_tmpfs_ro_with_one_beneath() {
	need_root
	bundle "$T/b" '["sh", "-c", "touch /r/x; echo w > /r/w/f && cat /r/w/f; busybox grep -E \" /r(/w)? \" /proc/self/mountinfo"]' \
		"c['mounts'] += [{'destination': '/r/w', 'type': 'tmpfs', 'source': 'tmpfs'},
{'destination': '/r', 'type': 'tmpfs', 'source': 'tmpfs', 'options': ['ro']}]"
	shim_c1
	expect_contains "/r read-only" "$(cat "$T/shim")" "/r/x: Read-only file system"
	expect_contains "/r/w written" "$(cat "$T/shim")" $'\nw\n'
	expect_contains "/r's mount ro" "$(cat "$T/shim")" " /r ro,nosuid,nodev"
	expect_contains "/r/w's mount rw" "$(cat "$T/shim")" " /r/w rw,nosuid,nodev"
	oci delete c1
}

# What a hostile config.json asks of a tmpfs: a way out of the rootfs
# (".."), onto corral's own trees and files, the root, a setuid mode,
# another owner, a thousand mounts.  Each refused with its reason, and
# nothing is left; on /proc/sys (corral's /proc, as /dev and /run) it is
# passed over, and /proc/sys stays read-only proc.
t_tmpfs_refused() {
	need_root
	local t="'type': 'tmpfs', 'source': 'tmpfs'" d w
	while IFS='|' read -r d w; do
		refused "c['mounts'].append({'destination': '$d', $t})" "$w"
	done <<-EOF
	/cache/../../../../etc|must not contain a ".." component
	/|cannot be "/", the sandbox's own root
	/.scratch|cannot be /.scratch or lie under it
	/.scratch/tmp|cannot be /.scratch or lie under it
	/oldroot/etc|cannot be /oldroot or lie under it
	/etc|it would hide corral's own /etc/hosts
	/etc/passwd|it would hide corral's own /etc/passwd
	/home|it would hide corral's own /home/agent
	/workspace|it would hide corral's own /workspace
	cache|destination must be an absolute path
	EOF
	while IFS='|' read -r o w; do
		refused "c['mounts'].append({'destination': '/cache', $t, 'options': [$o]})" "$w"
	done <<-EOF
	'mode=4777'|mode=4777 refused: a setuid or setgid bit
	'mode=2755'|mode=2755 refused: a setuid or setgid bit
	'mode=rwx'|mode=rwx: not an octal mode
	'mode=17777'|mode=17777: not an octal mode
	'uid=0'|uid=0 refused: the directory is the sandbox user's (1000)
	'gid=0'|gid=0 refused
	'size=lots'|size: not a size
	'remount'|option "remount": not one a tmpfs of corral's takes
	5|options[0]: not a string
	EOF
	refused "c['mounts'] += [{'destination': '/c', $t}, {'destination': '/c/', $t}]" \
		"mounts[6]: a tmpfs on /c: given twice"
	refused "c['mounts'] += [{'destination': '/m%d' % i, $t} for i in range(1000)]" \
		"mounts[21]: a tmpfs on /m16: more than 16 tmpfs mounts"
	# corral's own /proc: passed over, as any mount there is
	bundle "$T/b" '["sh", "-c", "busybox grep \" /proc/sys \" /proc/self/mountinfo; echo x > /proc/sys/kernel/hostname"]' \
		"c['mounts'].append({'destination': '/proc/sys', $t})"
	shim_c1
	expect_contains "/proc/sys: read-only" "$(cat "$T/shim")" " /proc/sys ro,"
	expect_contains "/proc/sys: proc" "$(cat "$T/shim")" " - proc proc "
	expect_not_contains "/proc/sys: no tmpfs" "$(cat "$T/shim")" "tmpfs"
	oci delete c1
}

# A destination through a link of the image that leads out of the rootfs
# on the host (cache -> ../../../../$T/host, an absolute one too, and one
# on the way): the mount point is a directory made in the root over the
# link, never the host's directory, which is neither mounted on nor written.
t_tmpfs_not_through_image_links() {
	need_root
	local up
	mkdir -p "$T/host"
	echo host > "$T/host/marker"
	up=$(echo "$T/b/rootfs" | sed 's|[^/]*|..|g; s|^/||')
	bundle "$T/b" '["sh", "-c", "for d in /cache /abs /via/sub; do ls -A $d; echo w-$d > $d/f; cat $d/f; done; echo end"]' \
		"c['mounts'] += [{'destination': d, 'type': 'tmpfs', 'source': 'tmpfs'} for d in ('/cache', '/abs', '/via/sub')]"
	ln -s "$up$T/host" "$T/b/rootfs/cache"
	ln -s "$T/host" "$T/b/rootfs/abs"
	ln -s "$up$T/host" "$T/b/rootfs/via"
	[ "$(cat "$T/b/rootfs/cache/marker")" = host ] || fail "the link does not lead to the host's directory"
	shim_c1
	expect_not_contains "the host's directory not seen" "$(cat "$T/shim")" "marker"
	expect_contains "written inside" "$(cat "$T/shim")" "w-/via/sub"
	expect_contains "ran" "$(cat "$T/shim")" "end"
	expect_eq "the host's directory" "$(ls -A "$T/host")" marker
	[ -L "$T/b/rootfs/cache" ] && [ -L "$T/b/rootfs/via" ] || fail "the image's links replaced"
	oci delete c1
}

# A mount's destination (and process.cwd) through a link of the image
# goes where runc puts it: the link followed inside the rootfs (/var/run
# -> ../run), the link itself kept.  Where it leads into corral's own trees it is judged
# there: /proc left out, /home/agent refused; and nothing of the host's
# tree is reached by a link that climbs out (t_tmpfs_not_through_image_links).
t_mounts_through_image_links() {
	need_root
	mkdir -p "$T/host"
	echo HOSTFILE > "$T/host/f"
	printf '{"allow_bind": ["%s"]}' "$T/host" > "$T/op.json"
	bundle "$T/b" '["sh", "-c", "echo cwd $(pwd); cat /run/y/f; echo w > /run/lock/f && cat /var/run/lock/f; for l in /var/run /abs /esc; do busybox readlink $l; done; echo o > /opt/cache/f && echo opt-written; ls -A /etc/corral-link-test; busybox grep -cE \" /p(roc)?/x \" /proc/self/mountinfo; echo end"]' \
		"c['mounts'] += [{'destination': '/var/run/y', 'type': 'bind', 'source': '$T/host', 'options': ['rbind', 'ro']},
{'destination': '/var/run/lock', 'type': 'tmpfs', 'source': 'tmpfs'},
{'destination': '/abs/cache', 'type': 'tmpfs', 'source': 'tmpfs'},
{'destination': '/esc/corral-link-test', 'type': 'tmpfs', 'source': 'tmpfs'},
{'destination': '/p/x', 'type': 'bind', 'source': '$T/host', 'options': ['rbind']}]
c['process']['cwd'] = '/var/run/lock'"
	mkdir -p "$T/b/rootfs/run" "$T/b/rootfs/var" "$T/b/rootfs/opt" "$T/b/rootfs/etc" \
		"$T/b/rootfs/proc" "$T/b/rootfs/home"
	ln -sfn ../run "$T/b/rootfs/var/run"
	ln -sfn /opt "$T/b/rootfs/abs"
	ln -sfn ../../../../../../../../etc "$T/b/rootfs/esc"
	ln -sfn /proc "$T/b/rootfs/p"
	CORRAL_OCI_CONFIG=$T/op.json shim_c1
	local out
	out=$(cat "$T/shim")
	expect_contains "the cwd through ../run" "$out" "cwd /run/lock"
	expect_contains "a bind through ../run" "$out" "HOSTFILE"
	expect_contains "a tmpfs through ../run" "$out" $'w\n../run\n/opt\n'
	expect_contains "a tmpfs through /opt" "$out" "opt-written"
	expect_contains "into corral's /proc: left out" "$out" $'\n0\nend'
	expect_contains "ran" "$out" "end"
	[ ! -e /etc/corral-link-test ] || fail "the host's /etc/corral-link-test made"
	[ -L "$T/b/rootfs/var/run" ] && [ -L "$T/b/rootfs/esc" ] || fail "the image's links replaced"
	[ -z "$(ls -A "$T/b/rootfs/run")" ] || fail "the rootfs written: $(ls -A "$T/b/rootfs/run")"
	oci delete c1
	ln -sfn /home "$T/b/rootfs/h"
	CORRAL_OCI_CONFIG=$T/op.json refused \
		"c['mounts'].append({'destination': '/h/agent', 'type': 'tmpfs', 'source': 'tmpfs'})" \
		"a tmpfs on /home/agent: it would hide corral's own /home/agent"
}

# What is written there counts against the container's disk, with /tmp
# and the rest: one scratch, no second pool.  Past limits.disk (8M, by an
# annotation's policy) the write fails ENOSPC, and /tmp is full too.
t_tmpfs_in_the_disk_budget() {
	need_root
	mkdir -p "$T/pol"
	echo '{"limits": {"disk": "8M"}}' > "$T/pol/small.json"
	printf '{"policies_dir": "%s"}\n' "$T/pol" > "$T/op.json"
	chmod -R a+rX "$T/pol" "$T/op.json"
	bundle "$T/b" '["sh", "-c", "busybox dd if=/dev/zero of=/cache/big bs=1M count=32 2>&1 | busybox tail -1; busybox du -k /cache/big; echo x > /tmp/y || echo tmp-full; echo end"]' \
		"c['annotations'] = {'io.corral.policy': 'small'}
c['mounts'].append({'destination': '/cache', 'type': 'tmpfs', 'source': 'tmpfs', 'options': ['size=1g']})"
	CORRAL_OCI_CONFIG=$T/op.json shim_c1
	expect_contains "ENOSPC" "$(cat "$T/shim")" "No space left on device"
	expect_contains "one pool: /tmp full too" "$(cat "$T/shim")" "tmp-full"
	local kb
	kb=$(awk '$2 == "/cache/big" {print $1}' "$T/shim")
	[ -n "$kb" ] && [ "$kb" -le 8192 ] || fail "/cache/big is ${kb:-?} KiB, past the 8M disk"
	oci delete c1
}

# An engine's init (docker and podman --init) is dropped only in its
# exact shape: a bind at /sbin/docker-init or /run/podman-init, the
# command starting with that path and "--".  Dropped, nothing of the
# bind's source enters, whatever it names.  Any other shape is an
# ordinary bind, refused without allow_bind.
t_engine_init() {
	need_root
	mkdir -p "$T/host"
	echo HOST-SECRET > "$T/host/secret"
	local init
	for init in /sbin/docker-init /run/podman-init; do
		bundle "$T/b" '["'$init'", "--", "sh", "-c", "echo ran \"$0\" \"$1\"; cat '$init'; cat /proc/1/cmdline", "a b", "c"]' \
			"c['mounts'].append({'destination': '$init', 'type': 'bind', 'source': '$T/host/secret', 'options': ['bind', 'ro']})"
		shim_c1
		expect_contains "$init: the command's args" "$(cat "$T/shim")" "ran a b c"
		expect_contains "$init: PID 1" "$(cat "$T/shim")" "corral-init"
		expect_not_contains "$init: the bind's source" "$(cat "$T/shim")" "HOST-SECRET"
		oci delete c1
	done
	local shapes=(
		'["/sbin/docker-init", "-s", "--", "true"]'	# an option of tini's
		'["/sbin/docker-init", "--"]'			# no command
		'["/sbin/docker-init", "true"]'			# no "--"
		'["/usr/bin/tini", "--", "true"]'		# not an engine's path
		'["/sbin//docker-init", "--", "true"]'		# another spelling
		'["/run/podman-init", "true"]'			# corral's /run no more
	)
	local a dst
	for a in "${shapes[@]}"; do
		dst=$(echo "$a" | sed 's/^\["\([^"]*\)".*/\1/')
		refused "c['process']['args'] = $a
c['mounts'].append({'destination': '$dst', 'type': 'bind', 'source': '$T/host/secret', 'options': ['bind', 'ro']})" \
			"bound on $dst refused: not beneath the operator's allow_bind"
	done
	# the shape without its bind: the image's own file, which is not there
	bundle "$T/b" '["/sbin/docker-init", "--", "true"]'
	oci create --bundle "$T/b" bad || true
	expect_contains "no bind: not dropped" "$(last_error)" "/sbin/docker-init"
	[ ! -e "$T/root/bad" ] || oci delete --force bad
}

# /run is the image's, not corral's: a bind beneath it is made when the
# operator allows its source and refused when not, as anywhere else (each
# was left out, unsaid, and the container ran without it); a tmpfs there
# is one.  Only the engines' own are left out: podman's /run/.containerenv
# and the tmpfs on /run itself (containerd's default spec: t_containerd_*).
t_mounts_under_run() {
	need_root
	mkdir -p "$T/host" "$T/other"
	echo HOSTFILE > "$T/host/f"
	echo OTHER > "$T/other/f"
	printf '{"allow_bind": ["%s"]}' "$T/host" > "$T/op.json"
	bundle "$T/b" '["sh", "-c", "cat /run/x/f; echo w > /run/x/g || echo ro-bind; ls -A /run/lock | busybox wc -l; echo w > /run/lock/f && echo tmpfs-written; ls /run/.containerenv; echo end"]' \
		"c['mounts'] += [{'destination': '/run/x', 'type': 'bind', 'source': '$T/host', 'options': ['rbind', 'ro']},
{'destination': '/run/lock', 'type': 'tmpfs', 'source': 'tmpfs'},
{'destination': '/run/.containerenv', 'type': 'bind', 'source': '$T/other/f', 'options': ['bind']},
{'destination': '/run', 'type': 'tmpfs', 'source': 'tmpfs', 'options': ['nosuid', 'strictatime', 'mode=755', 'size=65536k']}]"
	mkdir -p "$T/b/rootfs/run/lock"
	echo image > "$T/b/rootfs/run/lock/image-file"
	CORRAL_OCI_CONFIG=$T/op.json shim_c1
	expect_contains "the allowed bind" "$(cat "$T/shim")" "HOSTFILE"
	expect_contains "its ro" "$(cat "$T/shim")" "ro-bind"
	expect_contains "the tmpfs: empty" "$(cat "$T/shim")" $'\n0\n'
	expect_contains "the tmpfs: written" "$(cat "$T/shim")" "tmpfs-written"
	expect_contains "podman's note left out" "$(cat "$T/shim")" "/run/.containerenv: No such file"
	expect_not_contains "its source" "$(cat "$T/shim")" "OTHER"
	expect_contains "ran" "$(cat "$T/shim")" "end"
	expect_eq "the host's directory" "$(ls -A "$T/host")" f
	oci delete c1
	CORRAL_OCI_CONFIG=$T/op.json refused \
		"c['mounts'].append({'destination': '/run/y', 'type': 'bind', 'source': '$T/other', 'options': ['rbind']})" \
		"the host's $T/other bound on /run/y refused: not beneath the operator's allow_bind"
}

# rlimits below 0 (-1 would read as unlimited) or soft above hard
# maskedPaths and readonlyPaths beyond corral's own /proc and /sys: a file
# of the image the operator would hide, or a tree kept read-only, which
# corral does not do.  Ignored before, the container read and wrote them.
t_refuses_masks_outside_kernel_trees() {
	need_root
	refused 'c["linux"]["maskedPaths"].append("/etc/secret")' \
		"linux.maskedPaths[1] /etc/secret refused"
	refused 'c["linux"]["readonlyPaths"].append("/proc/../etc")' \
		"linux.readonlyPaths[1] /proc/../etc refused"
	# the engines' own lists are taken (corral's /proc, no /sys)
	bundle "$T/b" '["true"]' 'c["linux"]["maskedPaths"] += ["/proc/acpi", "/sys/firmware", "/proc"]
c["linux"]["readonlyPaths"] += ["/proc/sysrq-trigger", "/sys/fs/cgroup"]'
	oci create --bundle "$T/b" ok
	expect_eq "create" "$(rc)" 0
	oci delete --force ok
}

t_refuses_bad_rlimits() {
	need_root
	refused 'c["process"]["rlimits"] = [{"type": "RLIMIT_NPROC", "soft": -1, "hard": -1}]' \
		"RLIMIT_NPROC soft -1, hard -1 refused"
	refused 'c["process"]["rlimits"] = [{"type": "RLIMIT_NOFILE", "soft": 2048, "hard": 1024}]' \
		"RLIMIT_NOFILE soft 2048, hard 1024 refused"
}

# What config.json may ask for and is not refused, yet gets nothing past
# the boundary (one container for all, to keep the suite short):
# - a privileged engine's device rules (allow all): no node but corral's
#   own in /dev, no capability to make one;
# - RLIMIT_NOFILE 2^63-1: capped at the host's hard limit;
# - cwd and a bind's destination through the image's own symlinks to
#   /etc: each followed inside the rootfs, as runc's are, to the image's
#   /etc, never the host's.
t_hostile_but_contained() {
	need_root
	local hard got
	hard=$(ulimit -Hn)
	mkdir -p "$T/share"
	echo shared > "$T/share/f"
	chmod -R a+rX "$T/share"
	printf '{"allow_bind": ["%s"]}' "$T/share" > "$T/op.json"
	bundle "$T/b" '["sh", "-c", "echo nofile $(ulimit -Hn); mknod /tmp/sda b 8 0 && echo MADE; echo dev $(ls /dev); echo cwd $(pwd); ls /etc; cat /data/sub/f; echo end"]' \
		"c['linux']['resources']['devices'] = [{'allow': True, 'access': 'rwm'}]
c['root']['readonly'] = False
c['process']['rlimits'] = [{'type': 'RLIMIT_NOFILE', 'soft': 9223372036854775807, 'hard': 9223372036854775807}]
c['process']['cwd'] = '/work'
c['mounts'].append({'destination': '/data/sub', 'type': 'bind', 'source': '$T/share', 'options': ['rbind', 'ro']})"
	ln -s /etc "$T/b/rootfs/work"
	ln -s ../../../../../../etc "$T/b/rootfs/data"
	CORRAL_OCI_CONFIG=$T/op.json shim_c1
	expect_contains "ran" "$(cat "$T/shim")" "end"
	expect_not_contains "no mknod" "$(cat "$T/shim")" "MADE"
	expect_not_contains "no disk in /dev" "$(grep '^dev ' "$T/shim")" "sda"
	got=$(sed -n 's/^nofile \([0-9a-z]*\)$/\1/p' "$T/shim")
	[ -n "$got" ] && [ "$got" != unlimited ] && [ "$got" -le "$hard" ] ||
		fail "RLIMIT_NOFILE hard '$got', above the host's $hard"
	expect_contains "cwd, through the image's link" "$(cat "$T/shim")" "cwd /etc"
	# the image's /etc (corral's entries), where the host's has debian_version
	expect_contains "the image's /etc" "$(cat "$T/shim")" "resolv.conf"
	expect_not_contains "no host /etc" "$(cat "$T/shim")" "debian_version"
	expect_contains "the bind, inside the rootfs" "$(cat "$T/shim")" "shared"
	[ ! -e /etc/sub ] || fail "a bind landed on the host's /etc/sub"
	oci delete c1
}

# config.json is read whole: one far larger than any engine writes is
# refused before it is parsed
t_refuses_huge_config() {
	need_root
	bundle "$T/b" '["true"]' 'c["annotations"] = {"x": "y" * (5 << 20)}'
	oci create --bundle "$T/b" bad || true
	expect_eq "rc" "$(rc)" 1
	expect_contains "refusal" "$(last_error)" "not a regular file no larger than 4194304"
	[ ! -e "$T/root/bad" ] || fail "state left behind by a refused create"
}

# a FIFO for config.json is refused, not waited on
t_refuses_fifo_config() {
	need_root
	bundle "$T/b" '["true"]'
	rm "$T/b/config.json"
	mkfifo "$T/b/config.json"
	oci create --bundle "$T/b" bad || true
	expect_eq "rc" "$(rc)" 1
	expect_contains "refusal" "$(last_error)" "not a regular file"
	[ ! -e "$T/root/bad" ] || fail "state left behind by a refused create"
}

t_operator_allows_bind() {
	need_root
	mkdir -p "$T/share"
	echo shared > "$T/share/f"
	chmod -R a+rX "$T/share"
	printf '{"allow_bind": ["%s"]}' "$T/share" > "$T/op.json"
	bundle "$T/b" '["cat", "/data/f"]' \
		"c['mounts'].append({'destination': '/data', 'type': 'bind', 'source': '$T/share', 'options': ['rbind', 'ro']})"
	mkdir -p "$T/b/rootfs/data"
	CORRAL_OCI_CONFIG=$T/op.json /usr/bin/python3 "$SHIM" "$OCI" "$T/root" "$T/b" c1 \
		> "$T/shim" 2>&1 || { cat "$T/shim"; fail "shim"; }
	expect_contains "bound" "$(cat "$T/shim")" "shared"
	oci delete c1
}

# The container's events file (audit_dir/ID.jsonl) in a bind it writes:
# refused at create, as corral run's --events and the daemon's log are
# (events_check_reach), because the container could replace its own record
# with a chain that verifies.
t_events_file_in_rw_bind_refused() {
	need_root
	mkdir -p "$T/share/audit"
	chmod -R a+rwX "$T/share"
	printf '{"allow_bind": ["%s"], "audit_dir": "%s"}' "$T/share" "$T/share/audit" > "$T/op.json"
	bundle "$T/b" '["sh", "-c", "rm -f /data/audit/c1.jsonl; echo forged > /data/audit/c1.jsonl; ls -ln /data/audit"]' \
		"c['mounts'].append({'destination': '/data', 'type': 'bind', 'source': '$T/share', 'options': ['rbind', 'rw']})"
	mkdir -p "$T/b/rootfs/data"
	CORRAL_OCI_CONFIG=$T/op.json oci create --bundle "$T/b" c1 > /dev/null
	if [ "$(rc)" = 0 ]; then
		CORRAL_OCI_CONFIG=$T/op.json oci start c1 > /dev/null
		wait_status c1 stopped || true
		fail "created with its events file in its rw bind; the record now reads: $(head -c 200 "$T/share/audit/c1.jsonl")"
		return 1
	fi
	expect_contains "refused" "$(last_error)" "lies in the writable bind $T/share"
	[ ! -e "$T/root/c1" ] || fail "the refused create left its state"
	! grep -q "$T" /proc/self/mountinfo || fail "the refused create left a mount"
	# a read-only bind of the same directory is no way to rewrite it
	bundle "$T/b" '["cat", "/data/audit/c1.jsonl"]' \
		"c['mounts'].append({'destination': '/data', 'type': 'bind', 'source': '$T/share', 'options': ['rbind', 'ro']})"
	CORRAL_OCI_CONFIG=$T/op.json oci create --bundle "$T/b" c1 > /dev/null
	expect_eq "ro bind created" "$(rc)" 0
	oci delete --force c1 > /dev/null
}

# held_create ID SWAP: `create` held (stopped by strace at its first pipe2,
# after config.json was judged, before the container's mounts), SWAP run
# in that window, then create let go and the container started: what it
# printed in $T/held, create's status in $T/held.rc.
held_create() {
	local id=$1 swap=$2 pid="" rc=0
	command -v strace > /dev/null || skip "no strace to hold create with"
	rm -f "$T/held.pid" "$T/held.strace"
	# LeakSanitizer cannot run under ptrace (an ASan build's create)
	ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 \
	timeout 60 strace -qq -o "$T/held.strace" -e trace=pipe2 \
		-e inject=pipe2:signal=SIGSTOP:when=1 \
		sh -c 'echo $$ > "$0"; exec "$@"' "$T/held.pid" "$OCI" --root "$T/root" \
		--log "$T/log.json" --log-format json create --bundle "$T/b" "$id" \
		> "$T/held" 2>&1 < /dev/null &
	local strace_pid=$!
	# held: strace says its SIGSTOP stopped create (not /proc's "t", which
	# create shows for a moment at each of its system calls)
	strace_held "$T/held.strace" "$strace_pid" &&
		pid=$(cat "$T/held.pid" 2>/dev/null) && [ -n "$pid" ] ||
		{ kill "$strace_pid" 2>/dev/null; wait "$strace_pid"; oci delete --force "$id" > /dev/null
		  fail "create was never held: $(tail -c 300 "$T/held.strace")"; return 1; }
	eval "$swap"
	kill -CONT "$pid"
	wait "$strace_pid" || rc=$?
	echo "$rc" > "$T/held.rc"
	[ "$rc" = 0 ] || return 0
	oci start "$id" > /dev/null
	wait_status "$id" stopped || true	# the caller deletes it, then judges
}

# shared_source: the operator allows $T/share; u, beneath it, is a tenant's
# (uid 65534), who binds u/data and swaps it, once create has judged it,
# for a link to $T/secret (outside the allowlist) or to the host's /etc.
shared_source() {
	mkdir -p "$T/share/u/data" "$T/secret"
	echo checked > "$T/share/u/data/f"
	echo SECRET > "$T/secret/f"
	chmod -R a+rX "$T/share" "$T/secret"
	chown 65534:65534 "$T/share/u"
	printf '{"allow_bind": ["%s"]}' "$T/share" > "$T/op.json"
}
swap_to() { echo "mv '$T/share/u/data' '$T/share/u/data.checked' && ln -s '$1' '$T/share/u/data'"; }

# A bind's source swapped between the check and the mount: the container
# gets the object that was checked (read-only: the supervisor's idmapped
# copy of it), never the one swapped in.
t_bind_swapped_after_check() {
	need_root
	shared_source
	bundle "$T/b" '["sh", "-c", "cat /data/f; cat /data/shadow; ls /proc/self/fd"]' \
		"c['mounts'].append({'destination': '/data', 'type': 'bind', 'source': '$T/share/u/data', 'options': ['rbind', 'ro']})"
	mkdir -p "$T/b/rootfs/data"
	CORRAL_OCI_CONFIG=$T/op.json held_create c1 "$(swap_to /etc)"
	# gone before anything is judged: a failed check leaves no container
	oci delete --force c1 > /dev/null
	expect_not_contains "not the host's /etc" "$(cat "$T/held")" "root:"
	expect_eq "create" "$(cat "$T/held.rc")" 0
	expect_contains "the checked source" "$(cat "$T/held")" "checked"
}

# Writable and root's, the source is not idmapped (the agent could leave
# a setuid file): init opens it again, sees the swap and refuses.
t_bind_swapped_after_check_rw() {
	need_root
	shared_source
	bundle "$T/b" '["cat", "/data/f"]' \
		"c['mounts'].append({'destination': '/data', 'type': 'bind', 'source': '$T/share/u/data', 'options': ['rbind', 'rw']})"
	CORRAL_OCI_CONFIG=$T/op.json held_create c2 "$(swap_to "$T/secret")"
	cp "$T/log.json" "$T/log.held" 2>/dev/null || : > "$T/log.held"
	local left=no
	[ ! -e "$T/root/c2" ] || left=yes
	oci delete --force c2 > /dev/null
	expect_not_contains "not the swapped-in source" "$(cat "$T/held")" "SECRET"
	expect_eq "create" "$(cat "$T/held.rc")" 1
	expect_contains "refused" "$(tail -1 "$T/log.held" | json msg)" \
		"is not what was checked any more"
	expect_eq "state left behind by a refused create" "$left" no
}

# A bind takes what is mounted beneath its source: a kernel filesystem
# there (here a proc, as a chroot below allow_bind has) would show the
# host's processes.  Refused, read-only (the supervisor's idmapped copy) and
# writable (init's) alike.
t_bind_with_kernel_fs_beneath() {
	need_root
	shared_source
	mkdir -p "$T/share/u/data/p"
	mount -t proc proc "$T/share/u/data/p" || skip "cannot mount a proc to test with"
	# the test's subshell: gone before its directory is removed, failed or
	# not (a container made without the check would outlive its state)
	trap 'oci delete --force c-ro > /dev/null; oci delete --force c-rw > /dev/null; umount "$T/share/u/data/p"' EXIT
	local mode
	for mode in ro rw; do
		bundle "$T/b" '["ls", "/data/p/1"]' \
			"c['mounts'].append({'destination': '/data', 'type': 'bind', 'source': '$T/share/u/data', 'options': ['rbind', '$mode']})"
		mkdir -p "$T/b/rootfs/data"
		CORRAL_OCI_CONFIG=$T/op.json oci create --bundle "$T/b" "c-$mode" > /dev/null || true
		expect_eq "$mode: create" "$(rc)" 1
		expect_contains "$mode: why" "$(last_error)" \
			"holds a proc mount (at $T/share/u/data/p)"
	done
}

# The image's CA bundle, where corral lays its own over it under TLS
# termination, is resolved in the image: a link there within the image
# (RHEL's /etc/ssl/certs is one) still gets corral's bundle, and a link to
# "/oldroot/proc/self/mountinfo" covers nothing.  Followed as a path, it
# laid the bundle over init's view of the host's mount table before the
# writable bind's submounts were judged from it: the proc beneath the
# bind passed, and the container listed the host's processes.
t_image_bundle_link_covers_no_mount_table() {
	need_root
	shared_source
	echo '{"network": {"mode": "proxy", "allow": [{"host": "a.test", "tls": "terminate"}]}}' > "$T/p.json"
	printf '{"policy": "%s", "allow_bind": ["%s"]}' "$T/p.json" "$T/share" > "$T/op.json"
	bundle "$T/a" '["cat", "/etc/ssl/certs/ca-certificates.crt"]'
	mkdir -p "$T/a/rootfs/etc/pki/certs" "$T/a/rootfs/etc/ssl"
	echo "the image's own roots" > "$T/a/rootfs/etc/pki/certs/ca-certificates.crt"
	ln -s ../pki/certs "$T/a/rootfs/etc/ssl/certs"
	chmod -R a+rX "$T/a/rootfs/etc"
	CORRAL_OCI_CONFIG=$T/op.json /usr/bin/python3 "$SHIM" "$OCI" "$T/root" "$T/a" c1 \
		> "$T/shim" 2>&1 || { cat "$T/shim"; fail "shim"; }
	oci delete c1
	expect_contains "corral's bundle over the image's, through its link" \
		"$(cat "$T/shim")" "BEGIN CERTIFICATE"
	mkdir -p "$T/share/u/data/p"
	mount -t proc proc "$T/share/u/data/p" || skip "cannot mount a proc to test with"
	trap 'oci delete --force c2 > /dev/null; umount "$T/share/u/data/p"' EXIT
	bundle "$T/b" '["cat", "/data/p/1/cmdline"]' \
		"c['mounts'].append({'destination': '/data', 'type': 'bind', 'source': '$T/share/u/data', 'options': ['rbind', 'rw']})"
	mkdir -p "$T/b/rootfs/data" "$T/b/rootfs/etc/ssl/certs"
	ln -s /oldroot/proc/self/mountinfo "$T/b/rootfs/etc/ssl/certs/ca-certificates.crt"
	CORRAL_OCI_CONFIG=$T/op.json oci create --bundle "$T/b" c2 > /dev/null || true
	expect_eq "create" "$(rc)" 1
	expect_contains "why" "$(last_error)" "holds a proc mount (at $T/share/u/data/p)"
}

# The root's and binds' sources the CLI held never reach the container: its init,
# created and waiting for start, holds none (it is corral's code until
# then, and outlives the mounts), and the process has 0-2 and ls's own.
t_bind_source_fd_not_inside() {
	need_root
	shared_source
	bundle "$T/b" '["ls", "/proc/self/fd"]' \
		"c['mounts'].append({'destination': '/data', 'type': 'bind', 'source': '$T/share/u/data', 'options': ['rbind', 'ro']})"
	mkdir -p "$T/b/rootfs/data"
	CORRAL_OCI_CONFIG=$T/op.json timeout 60 "$OCI" --root "$T/root" create \
		--bundle "$T/b" c1 > "$T/c1.out" 2>&1 < /dev/null || fail "create: $(cat "$T/c1.out")"
	local init f fds=""
	init=$(sed -n 's/.*"pid": *\([0-9]*\).*/\1/p' "$T/root/c1/state.json")
	[ -n "$init" ] || fail "no init in the state"
	for f in /proc/"$init"/fd/*; do
		case $(readlink "$f") in "$T"/share*|"$T"/b/rootfs*) fds="$fds $f";; esac
	done
	oci start c1 > /dev/null
	wait_status c1 stopped || true
	oci delete --force c1 > /dev/null
	expect_eq "init's fds on the root or the bind's source" "$fds" ""
	expect_eq "the process's fds" "$(tr '\n' ' ' < "$T/c1.out")" "0 1 2 3 "
}

# Two containers share a volume: the first leaves in it a link to the
# host's tree as init sees it while it builds the view (/oldroot/...);
# the second binds the volume and another bind beneath it, through that
# link.  Refused: before, the second's init made the mount point on the
# host and mounted there (CVE-2024-45310 in runc).
t_bind_beneath_a_shared_volume_link() {
	need_root
	mkdir -p "$T/vol" "$T/in" "$T/host"
	echo data > "$T/in/f"
	chmod -R a+rX "$T/in"
	chmod 1777 "$T/host" "$T/vol"
	printf '{"allow_bind": ["%s", "%s"]}' "$T/vol" "$T/in" > "$T/op.json"
	bundle "$T/a" "[\"busybox\", \"ln\", \"-s\", \"/oldroot$T/host\", \"/data/x\"]" \
		"c['mounts'].append({'destination': '/data', 'type': 'bind', 'source': '$T/vol', 'options': ['rbind', 'rw']})"
	CORRAL_OCI_CONFIG=$T/op.json /usr/bin/python3 "$SHIM" "$OCI" "$T/root" "$T/a" c1 \
		> "$T/shim" 2>&1 || { cat "$T/shim"; fail "shim"; }
	oci delete c1
	[ -L "$T/vol/x" ] || fail "the first container left no link: $(cat "$T/shim")"
	bundle "$T/b" '["cat", "/data/x/made/f"]' \
		"c['mounts'].append({'destination': '/data', 'type': 'bind', 'source': '$T/vol', 'options': ['rbind', 'rw']})
c['mounts'].append({'destination': '/data/x/made', 'type': 'bind', 'source': '$T/in', 'options': ['rbind', 'ro']})"
	CORRAL_OCI_CONFIG=$T/op.json oci create --bundle "$T/b" c2 > /dev/null || true
	local left=no made=no rc why=""
	rc=$(rc)
	[ ! -e "$T/host/made" ] || made=yes
	[ ! -e "$T/log.json" ] || why=$(last_error)
	[ ! -e "$T/root/c2" ] || left=yes
	oci delete --force c2 > /dev/null || true
	expect_eq "the mount point made on the host ($T/host/made)" "$made" no
	expect_eq "create" "$rc" 1
	expect_contains "refused" "$why" "a symlink: not followed"
	expect_eq "state left behind by a refused create" "$left" no
}

# The bundle a tenant may write (uid 65534's): its rootfs, once create has
# judged it, swapped for a link to a tree the tenant may not read (root's,
# 0700) or renamed over by another tree.
tenant_bundle() {
	bundle "$T/b" '["sh", "-c", "cat /marker; echo end"]'
	echo checked > "$T/b/rootfs/marker"
	chmod a+r "$T/b/rootfs/marker"
	chown 65534:65534 "$T/b"
	mkdir -m 0700 "$T/hidden"
	cp -a "$T/b/rootfs" "$T/hidden/tree"
	echo HIDDEN > "$T/hidden/tree/marker"
}

# --pid-file in a directory a tenant writes (its bundle): a link it left at
# the name the pid is written to first had root truncate and write the
# host file it named; now that name is made new, and the link goes.
t_pid_file_not_through_a_tenants_link() {
	need_root
	tenant_bundle
	echo VICTIM > "$T/victim"
	ln -s "$T/victim" "$T/b/pid.corral-tmp"
	oci create --bundle "$T/b" --pid-file "$T/b/pid" c1
	expect_eq "create" "$(rc)" 0
	expect_eq "the host file the link named" "$(cat "$T/victim")" VICTIM
	local want
	want=$(sed -n 's/.*"pid": *\([0-9]*\).*/\1/p' "$T/root/c1/state.json")
	[ -n "$want" ] || fail "no pid in $(cat "$T/root/c1/state.json")"
	expect_eq "the pid file" "$(cat "$T/b/pid")" "$want"
	[ ! -L "$T/b/pid" ] || fail "the pid file is a link"
	oci delete --force c1
}

# --log in a directory a tenant writes: a link there had root append the
# error line (words of config.json's in it) to the host file it named, or
# make the file where none was.  The line is on stderr still.
t_log_not_through_a_tenants_link() {
	need_root
	tenant_bundle
	/usr/bin/python3 -c 'import json, sys
c = json.load(open(sys.argv[1])); c["hooks"] = {"prestart": [{"path": "/bin/sh"}]}
json.dump(c, open(sys.argv[1], "w"))' "$T/b/config.json"
	echo VICTIM > "$T/victim"
	local out
	for link in "$T/victim" "$T/made"; do
		ln -sfn "$link" "$T/b/log.json"
		out=$(timeout 60 "$OCI" --root "$T/root" --log "$T/b/log.json" --log-format json \
			create --bundle "$T/b" bad 2>&1 < /dev/null) && fail "create succeeded"
		expect_contains "the error, on stderr" "$out" "hooks.prestart refused"
	done
	expect_eq "the host file the link named" "$(cat "$T/victim")" VICTIM
	[ ! -e "$T/made" ] || fail "made $T/made through the link: $(cat "$T/made")"
}

# A tenant's link in a directory above the pid file or the log (its
# bundle's "run" to root's 0700 directory): root made the pid file and
# appended the error line there.  Refused now, said; a link in root's
# own directory (as /var/run -> /run) is still followed.
t_pid_file_and_log_not_through_a_tenants_dir_link() {
	need_root
	tenant_bundle
	mkdir -m 0700 "$T/victim" "$T/real"
	ln -s "$T/victim" "$T/b/run"
	chown -h 65534:65534 "$T/b/run"
	ln -s real "$T/runlink"
	oci create --bundle "$T/b" --pid-file "$T/b/run/pid" c1 > /dev/null
	local rc why=""
	rc=$(rc)
	[ ! -e "$T/log.json" ] || why=$(last_error)
	oci delete --force c1 > /dev/null || true
	[ ! -e "$T/victim/pid" ] || fail "the pid file made through the link: $(cat "$T/victim/pid")"
	expect_eq "create" "$rc" 1
	expect_contains "said" "$why" "run is a link in a directory another user may write"
	/usr/bin/python3 -c 'import json, sys
c = json.load(open(sys.argv[1])); c["hooks"] = {"prestart": [{"path": "/bin/sh"}]}
json.dump(c, open(sys.argv[1], "w"))' "$T/b/config.json"
	local out
	out=$(timeout 60 "$OCI" --root "$T/root" --log "$T/b/run/log.json" --log-format json \
		create --bundle "$T/b" bad 2>&1 < /dev/null) && fail "create succeeded"
	expect_contains "the error, on stderr" "$out" "hooks.prestart refused"
	expect_contains "the log refused" "$out" "--log $T/b/run/log.json: run is a link"
	[ ! -e "$T/victim/log.json" ] || fail "the log made through the link: $(cat "$T/victim/log.json")"
	# root's own link: followed
	out=$(timeout 60 "$OCI" --root "$T/root" --log "$T/runlink/log.json" --log-format json \
		create --bundle "$T/b" bad 2>&1 < /dev/null) && fail "create succeeded"
	expect_contains "root's link: the log" "$(cat "$T/real/log.json")" "hooks.prestart refused"
	bundle "$T/b2" '["true"]'
	oci create --bundle "$T/b2" --pid-file "$T/runlink/pid" c2 > /dev/null
	expect_eq "root's link: create" "$(rc)" 0
	local want
	want=$(sed -n 's/.*"pid": *\([0-9]*\).*/\1/p' "$T/root/c2/state.json")
	expect_eq "root's link: the pid file" "$(cat "$T/real/pid" 2>&1)" "$want"
	oci delete --force c2
}

# A FIFO a tenant made at the log's name held the runtime in open() until
# someone read it (it read root's lines, or never did: the shim waited).
t_log_not_a_tenants_fifo() {
	need_root
	tenant_bundle
	/usr/bin/python3 -c 'import json, sys
c = json.load(open(sys.argv[1])); c["hooks"] = {"prestart": [{"path": "/bin/sh"}]}
json.dump(c, open(sys.argv[1], "w"))' "$T/b/config.json"
	mkfifo "$T/b/log.json"
	chown 65534:65534 "$T/b/log.json"
	local out rc=0
	out=$(timeout 20 "$OCI" --root "$T/root" --log "$T/b/log.json" --log-format json \
		create --bundle "$T/b" bad 2>&1 < /dev/null) || rc=$?
	expect_eq "create: refused, not held" "$rc" 1
	expect_contains "the error, on stderr" "$out" "hooks.prestart refused"
}

# The same tree named outright: config.json is the tenant's too (its
# directory is), and the overlay's lower is opened as root, so a root.path
# below a directory of root's (0700) had the container read the tree with
# no race at all.  Refused now; the tenant's own rootfs still runs.
t_rootfs_of_a_tenants_bundle_only_what_it_reaches() {
	need_root
	tenant_bundle
	/usr/bin/python3 "$SHIM" "$OCI" "$T/root" "$T/b" c1 > "$T/shim" 2>&1 ||
		{ cat "$T/shim"; fail "the tenant's own rootfs: shim"; }
	oci delete c1
	expect_contains "the tenant's own rootfs" "$(cat "$T/shim")" "checked"
	/usr/bin/python3 -c 'import json, sys
c = json.load(open(sys.argv[1])); c["root"]["path"] = sys.argv[2]
json.dump(c, open(sys.argv[1], "w"))' "$T/b/config.json" "$T/hidden/tree"
	oci create --bundle "$T/b" c2 > /dev/null || true
	local rc why=""
	rc=$(rc)
	[ ! -e "$T/log.json" ] || why=$(last_error)
	oci delete --force c2 > /dev/null || true
	expect_eq "create" "$rc" 1
	expect_contains "refused" "$why" "not theirs to search"
}

# The bundle in a directory its tenant writes (a home): config.json read
# from the tenant's bundle, then the bundle's name swapped for a link to
# root's "/" before its writer was judged by that name.  Nothing of the
# tenant's was judged, and root.path named outright a tree below root's
# 0700 directory: the container read it.  The writer is judged by the
# directory and the file that were read (the name is not read again).
t_rootfs_of_a_tenants_bundle_swapped_before_its_writer_judged() {
	need_root
	command -v strace > /dev/null || skip "no strace to hold create with"
	mkdir -m 0755 "$T/home"
	bundle "$T/home/b" '["sh", "-c", "cat /marker; echo end"]'
	echo checked > "$T/home/b/rootfs/marker"
	chmod a+r "$T/home/b/rootfs/marker"
	mkdir -m 0700 "$T/hidden"
	cp -a "$T/home/b/rootfs" "$T/hidden/tree"
	echo HIDDEN > "$T/hidden/tree/marker"
	/usr/bin/python3 -c 'import json, sys
c = json.load(open(sys.argv[1])); c["root"]["path"] = sys.argv[2]
json.dump(c, open(sys.argv[1], "w"))' "$T/home/b/config.json" "$T/hidden/tree"
	chown -R 65534:65534 "$T/home"
	# held once the rootfs is opened, after config.json was read
	ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 \
	timeout 60 strace -qq -o "$T/held.strace" -P "$T/hidden/tree" -e trace=openat,open \
		-e inject=openat,open:signal=SIGSTOP:when=1 \
		sh -c 'echo $$ > "$0"; exec "$@"' "$T/held.pid" "$OCI" --root "$T/root" \
		--log "$T/log.json" --log-format json create --bundle "$T/home/b" c1 \
		> "$T/held" 2>&1 < /dev/null &
	local strace_pid=$! pid="" rc=0
	strace_held "$T/held.strace" "$strace_pid" && pid=$(cat "$T/held.pid") ||
		{ kill "$strace_pid" 2>/dev/null; wait "$strace_pid"
		  oci delete --force c1 > /dev/null; fail "create was never held: $(tail -c 300 "$T/held.strace")"; }
	# what the tenant may do in its own directory
	setpriv --reuid=65534 --regid=65534 --clear-groups \
		sh -c "mv '$T/home/b' '$T/home/b.read' && ln -s / '$T/home/b'" ||
		{ kill -CONT "$pid"; wait "$strace_pid"; oci delete --force c1 > /dev/null; fail "the tenant's swap"; }
	kill -CONT "$pid"
	wait "$strace_pid" || rc=$?
	local out=""
	if [ "$rc" = 0 ]; then
		oci start c1 > /dev/null
		wait_status c1 stopped || true
		out=$(cat "$T/held")
	fi
	local why=""
	[ ! -e "$T/log.json" ] || why=$(last_error)
	oci delete --force c1 > /dev/null || true
	expect_not_contains "the container's output" "$out" "HIDDEN"
	expect_eq "create" "$rc" 1
	expect_contains "refused" "$why" "not theirs to search"
}

# posix_acl DIR TAG:ID:PERM...: DIR's access ACL, written as the kernel
# stores it (system.posix_acl_access; u, g for the owner's and owning
# group's with no ID, m the mask, o others; PERM 0-7), so that no setfacl
# is needed.
posix_acl() {
	/usr/bin/python3 -c 'import os, struct, sys
tags = {"u": (1, 2), "g": (4, 8), "m": (16, 16), "o": (32, 32)}
ents = []
for a in sys.argv[2:]:
    t, i, p = a.split(":")
    ents.append((tags[t][1 if i else 0], int(p), int(i) if i else 0xffffffff))
ents.sort(key=lambda e: (e[0], e[2]))
os.setxattr(sys.argv[1], "system.posix_acl_access",
            struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *e) for e in ents))' "$@"
}

# An ACL is how the host says who may search a directory when its mode
# bits do not: one of root's directories that shows 0755 but whose ACL
# names the tenant with no rights, judged by the bits, let a tenant's
# bundle have the container read the tree below it (the container printed
# HIDDEN); and one that grants the tenant what the bits hide is the
# tenant's to reach.
t_rootfs_of_a_tenants_bundle_judged_by_its_acl() {
	need_root
	tenant_bundle
	chmod 0755 "$T/hidden"
	posix_acl "$T/hidden" u::7 u:65534:0 g::5 m::5 o::5 ||
		skip "no POSIX ACL on $T's filesystem"
	setpriv --reuid=65534 --regid=65534 --clear-groups ls "$T/hidden" > /dev/null 2>&1 &&
		fail "the ACL did not keep the tenant out of $T/hidden"
	/usr/bin/python3 -c 'import json, sys
c = json.load(open(sys.argv[1])); c["root"]["path"] = sys.argv[2]
json.dump(c, open(sys.argv[1], "w"))' "$T/b/config.json" "$T/hidden/tree"
	local rc why=""
	oci create --bundle "$T/b" c1 > /dev/null || true
	rc=$(rc)
	[ ! -e "$T/log.json" ] || why=$(last_error)
	oci delete --force c1 > /dev/null || true
	expect_eq "create, the ACL denying the tenant" "$rc" 1
	expect_contains "refused" "$why" "not theirs to search"
	# the other way: 0700, and an ACL that lets the tenant search it
	chmod 0700 "$T/hidden"
	posix_acl "$T/hidden" u::7 u:65534:5 g::0 m::5 o::0
	setpriv --reuid=65534 --regid=65534 --clear-groups ls "$T/hidden" > /dev/null ||
		fail "the ACL did not let the tenant into $T/hidden"
	/usr/bin/python3 "$SHIM" "$OCI" "$T/root" "$T/b" c2 > "$T/shim" 2>&1 ||
		{ cat "$T/shim"; oci delete --force c2 > /dev/null; fail "the ACL granting the tenant: shim"; }
	oci delete c2
	expect_contains "the tree the ACL lets the tenant reach" "$(cat "$T/shim")" "HIDDEN"
}

# ACL_CASES DIR, its stdin case numbers: for each, DIR's owner, mode and
# access ACL drawn from the number as a seed; "ok" a line
ACL_CASES='import os, random, struct, sys
d = sys.argv[1]
for line in sys.stdin:
    random.seed(int(line))
    os.chown(d, random.choice([0, 65534, 1234]), random.choice([0, 65534, 4321]))
    os.chmod(d, random.choice([0o700, 0o705, 0o750, 0o711, 0o755, 0o701, 0o770]))
    try:
        os.removexattr(d, "system.posix_acl_access")
    except OSError:
        pass
    if random.random() < 0.8:
        X = 0xffffffff
        ents = [(1, random.choice([0, 1, 5, 7]), X), (4, random.choice([0, 1, 5]), X),
                (32, random.choice([0, 1, 5]), X)]
        for tag, uid, p in ((2, 65534, 0.5), (2, 1234, 0.3), (8, 65534, 0.5), (8, 4321, 0.3)):
            if random.random() < p:
                ents.append((tag, random.choice([0, 1, 5]), uid))
        if len(ents) > 3:
            ents.append((16, random.choice([0, 1, 5, 7]), X))
        ents.sort(key=lambda e: (e[0], e[2]))
        os.setxattr(d, "system.posix_acl_access",
                    struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *e) for e in ents))
    print("ok", flush=True)
'

# The reach against the kernel's own answer: one directory on the way to
# the rootfs given 40 owners, modes and ACLs (seeded, named users and
# groups of the tenant's and others', masks), the tenant (65534, its
# groups as a login has them) trying to enter it, and create refusing
# exactly where the kernel does.  By the mode bits, 5 of these 40
# disagreed, 4 of them letting the tree through.
t_rootfs_reach_agrees_with_the_kernel() {
	need_root
	tenant_bundle
	/usr/bin/python3 -c 'import json, sys
c = json.load(open(sys.argv[1])); c["root"]["path"] = sys.argv[2]
json.dump(c, open(sys.argv[1], "w"))' "$T/b/config.json" "$T/hidden/tree"
	local i kernel ours wrong="" ans
	# one Python sets each case's owner, mode and ACL, its seed read from a
	# pipe (a Python a case was 40 starts, 3 of the test's 11 s of CPU)
	coproc ACL { /usr/bin/python3 -c "$ACL_CASES" "$T/hidden"; }
	for i in $(seq 1 40); do
		echo "$i" >&"${ACL[1]}"
		ans=""
		read -r -t 60 ans <&"${ACL[0]}" || :
		[ "$ans" = ok ] || fail "case $i: the ACL (${ans:-no answer})"
		kernel=refused
		setpriv --reuid=65534 --regid=65534 --init-groups sh -c 'cd "$0"' "$T/hidden" \
			2> /dev/null && kernel=reached
		oci create --bundle "$T/b" "c$i" > /dev/null || true
		ours=refused
		[ "$(rc)" = 0 ] && ours=reached
		oci delete --force "c$i" > /dev/null || true
		[ "$kernel" = "$ours" ] ||
			wrong="$wrong case $i ($(stat -c '%A %u:%g' "$T/hidden")): kernel $kernel, create $ours;"
	done
	# its input ended, the Python ends
	eval "exec ${ACL[1]}>&-"
	wait "$ACL_PID" 2> /dev/null || :
	expect_eq "cases where create and the kernel disagree" "$wrong" ""
}

# A tenant's groups decide which of a directory's classes it falls in:
# in root's 0705 directory of one of its groups, it may not search (the
# kernel reads the group's bits, never the others').  Its groups were read
# into 64 places: a tenant in more than 64 was judged by the others' bits
# and its bundle had the container read that tree.  /etc/passwd and
# /etc/group are the test's own, bound in a mount namespace of its own.
t_rootfs_of_a_tenant_in_many_groups() {
	need_root
	command -v unshare > /dev/null || skip "no unshare"
	tenant_bundle
	local g
	cp /etc/passwd "$T/passwd"
	cp /etc/group "$T/group"
	echo "tenant70:x:4242:4242::/nonexistent:/bin/false" >> "$T/passwd"
	echo "tenant70:x:4242:" >> "$T/group"
	for g in $(seq 4300 4369); do echo "h160g$g:x:$g:tenant70" >> "$T/group"; done
	chown -R 4242:4242 "$T/b"
	chown root:4369 "$T/hidden"
	chmod 0705 "$T/hidden"
	/usr/bin/python3 -c 'import json, sys
c = json.load(open(sys.argv[1])); c["root"]["path"] = sys.argv[2]
json.dump(c, open(sys.argv[1], "w"))' "$T/b/config.json" "$T/hidden/tree"
	local rc=0 why=""
	unshare -m --propagation private sh -c '
		mount --bind "$1/passwd" /etc/passwd && mount --bind "$1/group" /etc/group || exit 3
		[ "$(id -G tenant70 | wc -w)" -gt 64 ] || exit 4
		# the kernel, with those groups: no search
		setpriv --reuid=4242 --regid=4242 --init-groups ls "$1/hidden" > /dev/null 2>&1 && exit 5
		exec "$2" --root "$1/root" --log "$1/log.json" --log-format json 			create --bundle "$1/b" c1 > /dev/null 2>&1 < /dev/null' sh "$T" "$OCI" || rc=$?
	[ "$rc" != 3 ] && [ "$rc" != 4 ] && [ "$rc" != 5 ] ||
		fail "the test's own tenant in 70 groups (step $rc)"
	[ ! -e "$T/log.json" ] || why=$(last_error)
	oci delete --force c1 > /dev/null || true
	expect_eq "create, a tenant in 70 groups" "$rc" 1
	expect_contains "refused" "$why" "not theirs to search"
}

# A link swapped in between the check and the mount: the container runs on
# the tree that was checked, or not at all; never where the link leads.
# A bundle's rootfs that is a FUSE mount of its owner's whose daemon
# never answers (allow_other; emulated as root): create's fstat of the
# opened rootfs held the runtime in the kernel, the engine's call with
# it.  Refused now before anything there is asked, and nothing is left.
# create_on_stalled_fuse BUNDLE MOUNT WORDS: create of BUNDLE, MOUNT a
# stalled FUSE mount of uid 65534's on its way, refused with WORDS in the
# log and no state left; MOUNT unmounted whatever came of it.
create_on_stalled_fuse() {
	local rc=0
	timeout -s KILL 20 "$OCI" --root "$T/root" --log "$T/log.json" --log-format json \
		create --bundle "$1" c1 > "$T/out" 2>&1 < /dev/null || rc=$?
	fuse_stall_umount "$2"
	expect_eq "create" "$rc" 1
	expect_contains "refused" "$(last_error)" "$3"
	[ ! -e "$T/root/c1" ] || fail "state left behind by a refused create"
}

t_rootfs_on_a_tenants_fuse_refused() {
	need_root
	bundle "$T/b" '["true"]' 'c["root"]["path"] = "fuse"'
	mkdir "$T/b/fuse"
	chown 65534:65534 "$T/b" "$T/b/fuse"
	fuse_stall_mount "$T/b/fuse" 65534 || return 1
	create_on_stalled_fuse "$T/b" "$T/b/fuse" \
		"root.path $T/b/fuse lies on a FUSE filesystem whose daemon is uid 65534's"
}

# The bundle itself a FUSE mount of a tenant's whose daemon never
# answers: create's realpath() of --bundle held the runtime there, before
# config.json was read.  Refused now, judged as a rootfs is.
t_bundle_on_a_tenants_fuse_refused() {
	need_root
	mkdir "$T/fb"
	fuse_stall_mount "$T/fb" 65534 || return 1
	create_on_stalled_fuse "$T/fb" "$T/fb" \
		"--bundle $T/fb lies on a FUSE filesystem whose daemon is uid 65534's"
}

t_rootfs_swapped_after_check() {
	need_root
	tenant_bundle
	rootfs_replaced "ln -s '$T/hidden/tree' '$T/b/rootfs'" HIDDEN
}

# ... or another tree renamed over it: the same, told by its inode.
t_rootfs_renamed_after_check() {
	need_root
	tenant_bundle
	cp -a "$T/b/rootfs" "$T/b/other"
	echo OTHER > "$T/b/other/marker"
	rootfs_replaced "mv '$T/b/other' '$T/b/rootfs'" OTHER
}

# rootfs_replaced SHELL MARKER: create held after its check while SHELL puts
# something else at rootfs; the container must not start there
rootfs_replaced() {
	held_create c1 "mv '$T/b/rootfs' '$T/b/rootfs.checked' && $1"
	cp "$T/log.json" "$T/log.held" 2>/dev/null || : > "$T/log.held"
	oci delete --force c1 > /dev/null
	expect_not_contains "not the tree put there" "$(cat "$T/held")" "$2"
	expect_eq "create" "$(cat "$T/held.rc")" 1
	expect_contains "refused" "$(tail -1 "$T/log.held" | json msg)" \
		"is not what was checked any more"
}

# A pod's network namespace (here one the test makes, an address on its lo):
# refused by default, joined where the operator lets pods run; the pause
# container's ipc and uts are not joined, the container gets its own.
t_pod_network() {
	need_root
	command -v ip > /dev/null || skip "iproute2 is not installed"
	local ns=corral-oci-$$-$RANDOM
	ip netns add "$ns" || fail "ip netns add"
	trap "ip netns del $ns; umount '$T/hostnet' 2>/dev/null || true" EXIT
	ip -n "$ns" link set lo up && ip -n "$ns" addr add 10.123.45.67/32 dev lo ||
		fail "an address in $ns"
	local edit="
for n in c['linux']['namespaces']:
    if n['type'] == 'network': n['path'] = '/run/netns/$ns'
    if n['type'] in ('ipc', 'uts'): n['path'] = '/proc/1/ns/' + n['type']"
	refused "$edit" "joining the network namespace /run/netns/$ns refused"
	echo '{"join_pod_network": true}' > "$T/op.json"
	bundle "$T/b" '["sh", "-c", "cat /proc/net/fib_trie; echo host $(hostname); echo optmem $(cat /proc/sys/net/core/optmem_max); echo tw $(cat /proc/sys/net/ipv4/tcp_max_tw_buckets)"]' "$edit"
	local host_optmem; host_optmem=$(cat /proc/sys/net/core/optmem_max)
	local host_tw; host_tw=$(cat /proc/sys/net/ipv4/tcp_max_tw_buckets)
	local pod_tw; pod_tw=$(ip netns exec "$ns" cat /proc/sys/net/ipv4/tcp_max_tw_buckets)
	CORRAL_OCI_CONFIG=$T/op.json shim_c1
	expect_contains "the pod's network" "$(cat "$T/shim")" "10.123.45.67"
	expect_contains "its own uts" "$(cat "$T/shim")" "host oci-test"
	# socket options are bounded in a pod's netns as in a sandbox's own
	# (t_socket_options_bounded), the host keeping its value
	expect_eq "the host's optmem_max" "$(cat /proc/sys/net/core/optmem_max)" "$host_optmem"
	if [ "$host_optmem" -gt 20480 ]; then
		expect_contains "the pod's optmem_max" "$(cat "$T/shim")" "optmem 20480"
	else
		expect_contains "the pod's optmem_max" "$(cat "$T/shim")" "optmem $host_optmem"
	fi
	# but not its TIME_WAIT buckets: on a pod's real network that bound
	# changes TCP (net.c), so the pod keeps what its netns had
	expect_eq "the host's tcp_max_tw_buckets" "$(cat /proc/sys/net/ipv4/tcp_max_tw_buckets)" "$host_tw"
	expect_contains "the pod's tcp_max_tw_buckets" "$(cat "$T/shim")" "tw $pod_tw"

	# the host's own is never a pod's: Docker's `--network host` names it
	# by a path, a bind in its exec root (joined, the container was on the
	# host's interfaces); by /proc or by such a bind, it is refused
	local hostns
	for hostns in /proc/self/ns/net "$T/hostnet"; do
		[ "$hostns" != "$T/hostnet" ] || { touch "$T/hostnet" &&
			mount --bind "/proc/$$/ns/net" "$T/hostnet"; } || fail "bind the host's netns"
		bundle "$T/b" '["true"]' "$edit
for n in c['linux']['namespaces']:
    if n['type'] == 'network': n['path'] = '$hostns'"
		CORRAL_OCI_CONFIG=$T/op.json oci create --bundle "$T/b" hn || true
		expect_eq "the host's netns by $hostns: rc" "$(rc)" 1
		expect_contains "the host's netns by $hostns" "$(last_error)" \
			"network namespace $hostns refused: it is the host's"
		[ ! -e "$T/root/hn" ] || { oci delete --force hn; fail "state left"; }
	done
	umount "$T/hostnet"
	oci delete c1
	# exec joins it too (the user namespace last: inside it, no rights there)
	bundle "$T/b" '["sleep", "30"]' "$edit"
	CORRAL_OCI_CONFIG=$T/op.json oci create --bundle "$T/b" c3
	expect_eq "create c3" "$(rc)" 0
	oci start c3
	CORRAL_OCI_CONFIG=$T/op.json oci exec c3 cat /proc/net/fib_trie > /dev/null
	expect_contains "exec in the pod's network" "$(cat "$T/out")" "10.123.45.67"
	oci delete --force c3
	# and egress by name cannot come with it: the proxy needs its own netns
	bundle "$T/b" '["true"]' "$edit
c['annotations'] = {'io.corral.allow': 'example.com'}"
	CORRAL_OCI_CONFIG=$T/op.json oci create --bundle "$T/b" c2 || true
	expect_contains "no proxy in a pod's netns" "$(last_error)" "egress proxy needs"
}

# ---- containerd ---------------------------------------------------------

# One private containerd for the suite, started before the tests (each
# test runs in a subshell of its own) when one of them needs it; CTRD_SKIP
# says why not.
# Debian's ctr (containerd 1.6.20) closes a task's IO before it waits for
# it at the task's delete (fixed upstream in 1.6.22, 34a93a0c2): what the
# shim copies after ctr learns of the exit is lost, so a command here
# sleeps a little after its output, as one that ends at once could print
# nothing (helper-192; runc the same).
CTRD=$TEST_TMP/ctrd
CTRD_SKIP=""
ctr_() { timeout 60 ctr --address "$CTRD/sock" --namespace corral-test "$@"; }

ctrd_start() {
	[ "$ME" = 0 ] || { CTRD_SKIP="containerd needs root"; return; }
	command -v containerd > /dev/null ||
		{ CTRD_SKIP="containerd is not installed (scripts/install-deps.sh)"; return; }
	command -v containerd-shim-runc-v2 > /dev/null ||
		{ CTRD_SKIP="containerd-shim-runc-v2 missing"; return; }
	mkdir -p "$CTRD/root" "$CTRD/state"
	cat > "$CTRD/config.toml" <<EOF
version = 2
root = "$CTRD/root"
state = "$CTRD/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$CTRD/sock"
EOF
	containerd --config "$CTRD/config.toml" > "$CTRD/log" 2>&1 &
	CTRD_PID=$!
	for _ in $(seq 1 200); do
		ctr --address "$CTRD/sock" version > /dev/null 2>&1 && break
		kill -0 "$CTRD_PID" 2>/dev/null || break
		sleep 0.05
	done
	if ! ctr --address "$CTRD/sock" version > /dev/null 2>&1; then
		CTRD_SKIP="containerd did not start: $(tail -1 "$CTRD/log")"
		return
	fi
	/usr/bin/python3 "$FIX" busybox-oci "$CTRD/img" || { CTRD_SKIP="fixture failed"; return; }
	/usr/bin/python3 - "$CTRD/img/index.json" <<'EOF'
import json, sys
i = json.load(open(sys.argv[1]))
for m in i["manifests"]:
    m["annotations"] = {"org.opencontainers.image.ref.name": "docker.io/corral-test/busybox:1"}
json.dump(i, open(sys.argv[1], "w"))
EOF
	tar -C "$CTRD/img" -cf "$CTRD/img.tar" . &&
		ctr_ image import "$CTRD/img.tar" > /dev/null ||
		CTRD_SKIP="ctr image import failed: $(tail -1 "$CTRD/log")"
}

# in a test: skip where containerd cannot be, fail where it would not serve
ctrd_ready() {
	case $CTRD_SKIP in
	"") return 0 ;;
	*"needs root"* | *"not installed"* | *missing*) skip "$CTRD_SKIP" ;;
	*) fail "$CTRD_SKIP" ;;
	esac
}
IMAGE=docker.io/corral-test/busybox:1

t_containerd_run() {
	ctrd_ready
	local out rc=0
	out=$(ctr_ run --rm --runc-binary "$OCI" --runc-root "$T/root" "$IMAGE" c-run \
		sh -c 'echo hello from containerd; sleep 0.5; exit 5' 2>&1) || rc=$?
	echo "$out"
	expect_contains "output" "$out" "hello from containerd"
	expect_eq "exit status" "$rc" 5
	ctr_ containers ls -q | grep -qx c-run && fail "container left"
	# the shim's --root is ours plus the namespace; audit/ is evidence, kept
	[ -z "$(ls "$T/root/corral-test" | grep -v '^audit$')" ] ||
		fail "state left: $(ls "$T/root/corral-test")"
}

# ctr run -t: containerd's shim listens on the console socket and runs
# create as its child, in the same pid namespace: the socket's listener
# passes create's check and the container has its pty.  ptyrun.py gives
# ctr the terminal it asks for and, unlike script(1) with no stdin, types
# no EOF into it; it bounds the wait (20 s) and says ctr's exit.
t_containerd_run_tty() {
	ctrd_ready
	local r
	/usr/bin/python3 "$HERE/ptyrun.py" -- "$(command -v ctr)" --address "$CTRD/sock" \
		--namespace corral-test run -t --rm --runc-binary "$OCI" --runc-root "$T/root" \
		"$IMAGE" c-tty sh -c 'tty; sleep 0.5; exit 3' > "$T/r"
	cat "$T/r"
	r=$(pyjq 'v["exit"] == 3 and "/dev/pts/" in v["output"]' "$T/r")
	if [ "$r" != true ]; then
		ctr_ task ls || true
		tail -20 "$CTRD/log"
		fail "ctr run -t: not the container's pty and its exit status 3"
	fi
	ctr_ containers ls -q | grep -qx c-tty && fail "container left"
	return 0
}

# ctr run -t both ways: what the container prints is read before it may
# exit, and what is typed at ctr's terminal reaches the container's pty.
# Its exit waits for a keystroke: Debian's ctr (containerd 1.6.20, fixed
# in 1.6.22) closes a task's output at its exit before reading what the
# shim copies after it (runc's too), so output printed just before an
# exit is sometimes lost; nothing here asserts on such output.
t_containerd_run_tty_typed() {
	ctrd_ready
	local r
	/usr/bin/python3 "$HERE/ptyrun.py" expect:/dev/pts/ send:typed-in\\r expect:got-typed-in \
		send:\\r -- "$(command -v ctr)" --address "$CTRD/sock" --namespace corral-test \
		run -t --rm --runc-binary "$OCI" --runc-root "$T/root" "$IMAGE" c-typed \
		sh -c 'tty; read x; echo "got-$x"; read y; exit 3' > "$T/r"
	cat "$T/r"
	r=$(pyjq '"/dev/pts/" in v["output"] and "got-typed-in" in v["output"]' "$T/r")
	if [ "$r" != true ]; then
		tail -20 "$CTRD/log"
		fail "ctr run -t: the pty's name, then what was typed, not both"
	fi
	expect_eq "exit status" "$(pyjq 'v["exit"]' "$T/r")" 3
	ctr_ containers ls -q | grep -qx c-typed && fail "container left"
	return 0
}

t_containerd_task_verbs() {
	ctrd_ready
	ctr_ run -d --runc-binary "$OCI" --runc-root "$T/root" "$IMAGE" c-task busybox sleep 60 ||
		{ cat "$CTRD/log" | tail -20; fail "ctr run -d"; }
	local out pid mon
	out=$(ctr_ task exec --exec-id e1 c-task sh -c 'echo exec-ok; busybox ps; sleep 0.5' 2>&1)
	echo "$out"
	expect_contains "task exec" "$out" "exec-ok"
	expect_contains "same container" "$out" "sleep 60"
	out=$(ctr_ task ps c-task)
	echo "$out"
	pid=$(ctr_ task ls | awk '$1 == "c-task" {print $2}')
	expect_contains "task ps" "$out" "$pid"
	mon=$(monitor_of corral-test/c-task)
	ctr_ task pause c-task
	expect_contains "paused" "$(ctr_ task ls)" "PAUSED"
	ctr_ task resume c-task
	expect_contains "resumed" "$(ctr_ task ls)" "RUNNING"
	ctr_ task kill -s SIGKILL c-task
	for _ in $(seq 1 200); do
		ctr_ task ls | grep -q "c-task.*STOPPED" && break
		sleep 0.05
	done
	expect_contains "stopped" "$(ctr_ task ls)" "STOPPED"
	ctr_ task delete c-task
	ctr_ container delete c-task
	nothing_left corral-test/c-task "$pid" "$mon"
}

# ---- podman -------------------------------------------------------------

t_podman() {
	need_root
	command -v podman > /dev/null || skip "podman is not installed"
	local out img rc=0 P
	P="podman --root $T/pm/root --runroot $T/pm/run --runtime $OCI --runtime-flag corral-config=$T/op.json"
	# podman's cleanup (its conmon's exit command) calls the runtime without
	# --runtime-flag: so the default root, /run/corral-oci, where only what
	# was there before may remain
	printf '{"audit_dir": "%s"}' "$T/pm/audit" > "$T/op.json"
	local before had_root=false
	before=$(ls /run/corral-oci 2>/dev/null || true)
	[ -d /run/corral-oci ] && had_root=true
	# podman's storage mounts itself; gone with the test, passed or not
	trap "timeout 30 $P rm -af > /dev/null 2>&1
	      grep -o '$T/pm/[^ ]*' /proc/self/mountinfo | sort -ru |
		while read -r m; do umount -l \"\$m\"; done" EXIT
	/usr/bin/python3 "$FIX" busybox-archive "$T/bb.tar" || fail "fixture"
	out=$($P load -i "$T/bb.tar" 2>&1) || rc=$?
	if [ $rc -ne 0 ]; then
		skip "podman refuses on this host: $(echo "$out" | tail -1)"
	fi
	img=$(echo "$out" | awk '/Loaded image/ {print $NF}')
	# the image's entrypoint is sh -c: a command is one string
	out=$(timeout 60 $P run --rm --network none "$img" 'echo from-podman; exit 3' 2>&1) || rc=$?
	if [ $rc -ne 0 ] && [ $rc -ne 3 ]; then
		skip "podman refuses on this host: $(echo "$out" | grep -i error | tail -1)"
	fi
	expect_contains "podman run" "$out" "from-podman"
	expect_eq "podman run status" "$rc" 3
	# a command there that cannot run: create's words in runc's, which
	# podman maps to 126, as docker's "cannot invoke" (it said 127, not found)
	rc=0
	out=$(timeout 60 $P run --rm --network none --entrypoint /etc "$img" 2>&1) || rc=$?
	expect_eq "podman run of a directory: status" "$rc" 126
	expect_contains "podman run of a directory" "$out" 'exec: "/etc": permission denied'
	rc=0
	out=$(timeout 60 $P run --rm --network none -t "$img" 'tty; exit 4' 2>&1) || rc=$?
	expect_contains "podman run -t" "$out" "/dev/pts/"
	expect_eq "podman run -t status" "$rc" 4
	# --tmpfs: a writable directory (refused before: "a tmpfs mount on
	# /cache refused"); podman's tmpcopyup taken, the directory empty
	rc=0
	out=$(timeout 60 $P run --rm --network none --read-only --tmpfs /cache "$img" \
		'busybox stat -c "mode %a %u" /cache; echo pm-tmpfs > /cache/f && cat /cache/f;
		 busybox grep " /cache " /proc/self/mountinfo' 2>&1) || rc=$?
	echo "$out"
	expect_eq "podman --tmpfs: status" "$rc" 0
	expect_contains "podman --tmpfs: mode" "$out" "mode 1777 1000"
	expect_contains "podman --tmpfs: written" "$out" "pm-tmpfs"
	expect_contains "podman --tmpfs: nosuid, nodev" "$out" " /cache rw,nosuid,nodev"
	# --init: catatonit bound at /run/podman-init, before the command
	# ("not found" before: corral's /run is its own); corral's init is
	# PID 1 and does its work, so it is dropped and the command runs
	rc=0
	[ -x /usr/libexec/podman/catatonit ] ||
		fail "catatonit is not installed (scripts/install-deps.sh installs it)"
	out=$(timeout 60 $P run --rm --network none --init "$img" \
		'cat /proc/1/cmdline; echo; ls /run/podman-init; exit 6' 2>&1) || rc=$?
	echo "$out"
	expect_eq "podman --init: status" "$rc" 6
	expect_contains "podman --init: PID 1" "$out" "corral-init"
	expect_contains "podman --init: no catatonit" "$out" "/run/podman-init: No such file"
	rc=0
	timeout 60 $P run -d --name pm1 --network none "$img" 'busybox sleep 60' ||
		fail "podman run -d"
	out=$(timeout 60 $P exec pm1 sh -c 'echo exec-from-podman' 2>&1) || fail "podman exec: $out"
	expect_contains "podman exec" "$out" "exec-from-podman"
	timeout 60 $P rm -f pm1 || fail "podman rm"
	for _ in $(seq 1 100); do	# the last cleanup runs after podman returns
		[ "$(ls /run/corral-oci 2>/dev/null || true)" = "$before" ] && break
		sleep 0.05
	done
	expect_eq "state left in /run/corral-oci" "$(ls /run/corral-oci 2>/dev/null || true)" "$before"
	$had_root || rmdir /run/corral-oci
}

# ---- Docker -------------------------------------------------------------

# One private dockerd for the suite (Debian's docker.io), started by hand
# as root with nothing of the host's: its data and exec roots, socket and
# pid file in $DKR; no bridge, no iptables or ip6tables rule, no
# masquerade, no forwarding (the host's network stays as it was); its own
# containerd, which it starts beneath its exec root and stops with
# itself.  Its runtimes are corral-oci three ways: corral (no operator's
# file), corral-bind (allow_bind: $DKR/share) and corral-pod
# (join_pod_network).  dockerd 20.10 writes its trust key to
# /etc/docker/key.json and makes /run/docker/plugins whatever its roots
# say: removed after it where it made them.  DKR_SKIP says why not.
DKR=$TEST_TMP/dkr
DKR_PID=""
DKR_SKIP=""
DKR_MADE=""
DIMAGE=busybox-saved:1	# image_fixtures.py's busybox-docker: sh -c, user 1000
dk() { DOCKER_CONFIG=$DKR/cfg timeout 60 docker -H "unix://$DKR/sock" "$@"; }

dockerd_start() {
	[ "$ME" = 0 ] || { DKR_SKIP="dockerd needs root"; return; }
	command -v dockerd > /dev/null ||
		{ DKR_SKIP="dockerd is not installed (Debian's docker.io)"; return; }
	command -v docker > /dev/null || { DKR_SKIP="the docker client is not installed"; return; }
	mkdir -p "$DKR/share" "$DKR/cfg"
	[ -e /etc/docker/key.json ] || DKR_MADE+=" /etc/docker/key.json"
	[ -e /run/docker ] || DKR_MADE+=" /run/docker"
	echo from-the-host > "$DKR/share/f"
	# a bind maps its owner to the agent, never host root: 65534's, written
	chown -R 65534:65534 "$DKR/share"
	printf '{"allow_bind": ["%s"]}' "$DKR/share" > "$DKR/bind.json"
	echo '{"join_pod_network": true}' > "$DKR/pod.json"
	cat > "$DKR/daemon.json" <<EOF
{"runtimes": {
  "corral": {"path": "$OCI"},
  "corral-bind": {"path": "$OCI", "runtimeArgs": ["--corral-config", "$DKR/bind.json"]},
  "corral-pod": {"path": "$OCI", "runtimeArgs": ["--corral-config", "$DKR/pod.json"]}}}
EOF
	dockerd --data-root "$DKR/d" --exec-root "$DKR/x" --pidfile "$DKR/pid" \
		-H "unix://$DKR/sock" --config-file "$DKR/daemon.json" \
		--bridge=none --iptables=false --ip6tables=false --ip-masq=false \
		--ip-forward=false --storage-driver=overlay2 > "$DKR/log" 2>&1 &
	DKR_PID=$!
	for _ in $(seq 1 400); do
		dk version > /dev/null 2>&1 && break
		kill -0 "$DKR_PID" 2>/dev/null || break
		sleep 0.05
	done
	if ! dk version > /dev/null 2>&1; then
		DKR_SKIP="dockerd did not start: $(grep -m1 -E 'level=(error|fatal)' "$DKR/log" ||
			tail -1 "$DKR/log")"
		return
	fi
	/usr/bin/python3 "$FIX" busybox-docker "$DKR/bb.tar" || { DKR_SKIP="fixture failed"; return; }
	dk load -i "$DKR/bb.tar" > /dev/null 2>&1 ||
		DKR_SKIP="docker load failed: $(tail -1 "$DKR/log")"
}

dockerd_stop() {
	[ -n "$DKR_PID" ] || return 0
	local p m mons=""
	# its containers first: on SIGTERM dockerd stops each, 10 s apiece
	dk rm -f $(dk ps -aq 2>/dev/null) > /dev/null 2>&1
	kill "$DKR_PID" 2>/dev/null
	for _ in $(seq 1 200); do kill -0 "$DKR_PID" 2>/dev/null || break; sleep 0.05; done
	kill -9 "$DKR_PID" 2>/dev/null
	# what a failure left running (its containerd, a shim, a container's
	# corral monitor): each process whose command line names $DKR, this
	# suite's own directory, by its pid (lib.sh's kill leaves them: the
	# host's init is their parent), and a monitor's cgroups after it
	for p in /proc/[0-9]*; do
		[[ $({ tr '\0' ' ' < "$p/cmdline"; } 2>/dev/null) == *"$DKR/"* ]] || continue
		builtin kill -9 "${p#/proc/}" 2>/dev/null && mons+=" ${p#/proc/}"
	done
	for p in $mons; do
		for _ in $(seq 1 100); do [ -e "/proc/$p" ] || break; sleep 0.05; done
		find /sys/fs/cgroup -maxdepth 4 -type d -name "corral-$p-oci" -delete 2>/dev/null
	done
	grep -o "$DKR/[^ ]*" /proc/self/mountinfo | sort -ru |
		while read -r m; do umount -l "$m"; done
	for p in $DKR_MADE; do rm -rf "$p"; done
	DKR_PID=""
}

# in a test: skip where dockerd cannot be, fail where it would not serve
dkr_ready() {
	case $DKR_SKIP in
	"") return 0 ;;
	*"needs root"* | *"not installed"*) skip "$DKR_SKIP" ;;
	*) fail "$DKR_SKIP" ;;
	esac
}
# corral's state directory under dockerd (its --root for the runtime)
dk_root() { local r; for r in "$DKR"/x/runtime-*/moby; do echo "$r"; done; }

# dk_nothing_left NAME: the container gone from Docker, and its corral
# state, init, monitor and cgroups with it (its ID INIT MONITOR saved in
# $T/NAME by dk_ids while it ran)
dk_ids() {
	local id pid mon
	id=$(dk inspect -f '{{.Id}}' "$1")
	pid=$(dk inspect -f '{{.State.Pid}}' "$1")
	mon=$(sed -n 's/.*"monitor": *\([0-9]*\).*/\1/p' "$(dk_root)/$id/state.json")
	[ -n "$mon" ] || fail "no monitor in $(dk_root)/$id/state.json"
	echo "$id $pid $mon" > "$T/$1"
}
dk_nothing_left() {
	local id pid mon p cg
	read -r id pid mon < "$T/$1"
	[ -z "$(dk ps -aq --filter "name=^$1\$")" ] || fail "container $1 left"
	[ ! -e "$(dk_root)/$id" ] || fail "corral's state of $1 left: $(dk_root)/$id"
	for p in $pid $mon; do
		if kill -0 "$p" 2>/dev/null && ! grep -q '^State:.*Z' "/proc/$p/status" &&
		   tr '\0' ' ' < "/proc/$p/cmdline" | grep -q corral; then
			fail "process $p remains: $(tr '\0' ' ' < "/proc/$p/cmdline")"
		fi
	done
	cg=$(find /sys/fs/cgroup -maxdepth 4 -type d -name "corral-$mon-oci" 2>/dev/null || true)
	[ -z "$cg" ] || fail "cgroup remains: $cg"
}

# cg_limit PID v1-CONTROLLER v1-FILE v2-FILE: the value a limit has in
# PID's own group (v1's controller hierarchy, else the unified one)
cg_limit() {
	local path
	path=$(awk -F: -v c="$2" '$2 == c {print $3}' "/proc/$1/cgroup")
	if [ -n "$path" ] && [ -e "/sys/fs/cgroup/$2$path/$3" ]; then
		echo "$path $(cat "/sys/fs/cgroup/$2$path/$3")"
	else
		path=$(awk -F: '$1 == 0 {print $3}' "/proc/$1/cgroup")
		echo "$path $(cat "/sys/fs/cgroup$path/$4" 2>/dev/null)"
	fi
}

t_docker_run() {
	dkr_ready
	local out rc=0 r
	out=$(dk run --rm --runtime corral --network none "$DIMAGE" \
		'echo hello from docker; exit 5' 2>&1) || rc=$?
	echo "$out"
	expect_contains "output" "$out" "hello from docker"
	expect_eq "exit status" "$rc" 5
	# create's words, runc's, which Docker maps: 127 not found, 126 cannot run
	rc=0
	out=$(dk run --rm --runtime corral --network none --entrypoint /nonexistent \
		"$DIMAGE" 2>&1) || rc=$?
	expect_eq "a missing command: status" "$rc" 127
	expect_contains "a missing command" "$out" 'exec: "/nonexistent": stat /nonexistent: no such file'
	rc=0
	out=$(dk run --rm --runtime corral --network none --entrypoint /etc "$DIMAGE" 2>&1) || rc=$?
	expect_eq "a directory as the command: status" "$rc" 126
	expect_contains "a directory as the command" "$out" 'exec: "/etc": permission denied'
	[ -z "$(dk ps -aq)" ] || fail "containers left: $(dk ps -a)"
	# of corral's state, only audit/ (evidence, kept)
	r=$(dk_root)
	[ -z "$(ls "$r" | grep -v '^audit$')" ] || fail "state left in $r: $(ls "$r")"
}

# docker run -it and docker exec -it: dockerd's shim listens on the
# console socket; ptyrun.py is the terminal docker asks for (never
# script(1), which types an EOF where it has no stdin)
t_docker_tty() {
	dkr_ready
	trap 'dk rm -f dt1 > /dev/null 2>&1 || true' EXIT
	local d r
	d=$(command -v docker)
	# the size: dockerd 20.10 (API 1.41) sets it once the container has
	# started, under runc too (stty fails before): polled, 5 s at most
	DOCKER_CONFIG=$DKR/cfg /usr/bin/python3 "$HERE/ptyrun.py" -- "$d" -H "unix://$DKR/sock" \
		run -it --rm --runtime corral --network none "$DIMAGE" 'tty; i=0
		until [ "$(stty size 2>/dev/null)" = "24 80" ] || [ $i = 100 ]; do
			busybox sleep 0.05; i=$((i + 1)); done; stty size; exit 4' > "$T/r"
	cat "$T/r"
	r=$(pyjq 'v["exit"] == 4 and "/dev/pts/" in v["output"] and "24 80" in v["output"]' "$T/r")
	[ "$r" = true ] || fail "docker run -it: not the container's pty of 24x80 and exit 4"
	# typed into: the shell's answer, not the terminal's echo, says 42
	DOCKER_CONFIG=$DKR/cfg /usr/bin/python3 "$HERE/ptyrun.py" 'expect:$ ' \
		'send:echo typed-$((6*7))\r' expect:typed-42 'send:exit 6\r' -- \
		"$d" -H "unix://$DKR/sock" run -it --rm --runtime corral --network none \
		"$DIMAGE" sh > "$T/r"
	cat "$T/r"
	[ "$(pyjq 'v["exit"] == 6 and "typed-42" in v["output"]' "$T/r")" = true ] ||
		fail "docker run -it sh: typed-42 and exit 6"
	dk run -d --name dt1 --runtime corral --network none "$DIMAGE" 'busybox sleep 60' > /dev/null
	DOCKER_CONFIG=$DKR/cfg /usr/bin/python3 "$HERE/ptyrun.py" 'expect:$ ' \
		'send:tty; echo in-$((6*7))\r' expect:in-42 'send:exit 7\r' -- \
		"$d" -H "unix://$DKR/sock" exec -it dt1 sh > "$T/r"
	cat "$T/r"
	[ "$(pyjq 'v["exit"] == 7 and "/dev/pts/" in v["output"] and "in-42" in v["output"]' "$T/r")" = true ] ||
		fail "docker exec -it: a pty, in-42 and exit 7"
}

# The verbs a Docker user has, each through the runtime's: exec, top,
# stats, pause and unpause (corral's freezer), kill -s, stop (its
# SIGTERM, then SIGKILL), start again (create with the same id), logs
t_docker_verbs() {
	dkr_ready
	trap 'dk rm -f dv1 > /dev/null 2>&1 || true' EXIT
	local out rc=0 pid st
	dk run -d --name dv1 --runtime corral --network none "$DIMAGE" \
		'trap "echo got-term" TERM; trap "echo got-usr1" USR1; echo started
		 while :; do busybox sleep 0.1; done' > /dev/null
	dk_ids dv1
	read -r _ pid _ < "$T/dv1"
	out=$(dk exec dv1 sh -c 'echo exec-ok; busybox ps; exit 7' 2>&1) || rc=$?
	echo "$out"
	expect_contains "exec" "$out" "exec-ok"
	expect_contains "exec: the same container" "$out" "busybox sleep"
	expect_eq "exec's own status" "$rc" 7
	# the container's process, the host OOM killer's first choice, under a
	# dockerd and containerd that made themselves its last (-500, -999)
	[ "$(cat "/proc/$pid/oom_score_adj")" -ge 500 ] ||
		fail "oom_score_adj $(cat "/proc/$pid/oom_score_adj") under Docker"
	out=$(dk top dv1)
	echo "$out"
	expect_contains "top: the container's init" "$out" "$pid"
	expect_contains "top: its processes" "$out" "busybox sleep"
	out=$(dk stats --no-stream --format '{{.Name}} {{.MemUsage}} {{.PIDs}}' dv1)
	echo "$out"
	[[ $out =~ ^dv1\ [0-9.]+[KMG]i?B\ /\ [0-9.]+[KMG]i?B\ [1-9] ]] || fail "stats: '$out'"
	dk pause dv1 > /dev/null
	expect_eq "paused" "$(dk inspect -f '{{.State.Status}}' dv1)" paused
	st=$("$OCI" --root "$(dk_root)" state "$(cut -d' ' -f1 "$T/dv1")" |
		sed -n 's/.*"status": "\([a-z]*\)".*/\1/p')
	expect_eq "corral's state" "$st" paused
	dk unpause dv1 > /dev/null
	expect_eq "unpaused" "$(dk inspect -f '{{.State.Status}}' dv1)" running
	dk kill -s USR1 dv1 > /dev/null
	for _ in $(seq 1 100); do
		dk logs dv1 2>&1 | grep -q got-usr1 && break
		sleep 0.05
	done
	expect_contains "kill -s USR1 reached the command" "$(dk logs dv1 2>&1)" "got-usr1"
	# TERM is trapped: after its second, KILL
	dk stop -t 1 dv1 > /dev/null
	expect_eq "stop: TERM, then KILL" "$(dk inspect -f '{{.State.Status}} {{.State.ExitCode}}' dv1)" \
		"exited 137"
	expect_contains "stop's TERM reached the command" "$(dk logs dv1 2>&1)" "got-term"
	expect_contains "logs" "$(dk logs dv1 2>&1)" "started"
	[ ! -e "$(dk_root)/$(cut -d' ' -f1 "$T/dv1")" ] || fail "corral's state left after stop"
	dk start dv1 > /dev/null
	out=$(dk exec dv1 echo started-again)
	expect_eq "exec after a start again" "$out" started-again
	dk_ids dv1
	dk kill dv1 > /dev/null
	for _ in $(seq 1 100); do
		[ "$(dk inspect -f '{{.State.Status}}' dv1)" = exited ] && break
		sleep 0.05
	done
	expect_eq "kill" "$(dk inspect -f '{{.State.Status}} {{.State.ExitCode}}' dv1)" "exited 137"
	dk rm dv1 > /dev/null
	dk_nothing_left dv1
}

# --memory, --pids-limit and docker update reach corral's groups (not
# Docker's /docker/ID, which corral never makes); the OOM kill is Docker's
# OOMKilled
t_docker_limits() {
	dkr_ready
	trap 'dk rm -f dl1 dl2 > /dev/null 2>&1 || true' EXIT
	local pid got
	dk run -d --name dl1 --runtime corral --network none --memory 64m --pids-limit 50 \
		"$DIMAGE" 'busybox sleep 60' > /dev/null
	pid=$(dk inspect -f '{{.State.Pid}}' dl1)
	got=$(cg_limit "$pid" memory memory.limit_in_bytes memory.max)
	expect_contains "memory: corral's group" "$got" "/corral-"
	expect_contains "--memory 64m" "$got" " 67108864"
	got=$(cg_limit "$pid" pids pids.max pids.max)
	expect_contains "pids: corral's group" "$got" "/corral-"
	expect_contains "--pids-limit 50" "$got" " 50"
	expect_contains "stats: the limit" "$(dk stats --no-stream --format '{{.MemUsage}}' dl1)" "/ 64MiB"
	dk update --memory 32m --memory-swap 32m dl1 > /dev/null 2>&1
	expect_contains "docker update --memory 32m" \
		"$(cg_limit "$pid" memory memory.limit_in_bytes memory.max)" " 33554432"
	dk rm -f dl1 > /dev/null
	dk run --name dl2 --runtime corral --network none --memory 16m --memory-swap 16m \
		"$DIMAGE" 'x=$(busybox head -c 100000000 /dev/zero | busybox tr "\0" a); echo survived' \
		> "$T/out" 2>&1 || true
	expect_not_contains "over its memory" "$(cat "$T/out")" survived
	expect_eq "OOMKilled, 137" "$(dk inspect -f '{{.State.OOMKilled}} {{.State.ExitCode}}' dl2)" \
		"true 137"
}

# --user (not honoured: the agent's uid, docs/kubernetes.md), --read-only,
# -v: refused unless beneath the operator's allow_bind, then read and
# written through, or read-only with :ro
t_docker_user_readonly_binds() {
	dkr_ready
	local out rc=0
	out=$(dk run --rm --runtime corral --network none --user 1234:5678 "$DIMAGE" 'id -u')
	expect_eq "--user: the agent's uid" "$out" 1000
	out=$(dk run --rm --runtime corral --network none --read-only "$DIMAGE" \
		'touch /srv/x 2>&1; echo tmp > /tmp/y && cat /tmp/y')
	expect_contains "--read-only: the root" "$out" "Read-only file system"
	expect_contains "--read-only: its /tmp" "$out" "tmp"
	out=$(dk run --rm --runtime corral --network none -v "$DKR/share:/data" "$DIMAGE" \
		'cat /data/f' 2>&1) || rc=$?
	expect_eq "a bind outside allow_bind: status" "$rc" 125
	expect_contains "a bind outside allow_bind" "$out" "not beneath the operator's allow_bind"
	out=$(dk run --rm --runtime corral-bind --network none -v "$DKR/share:/data" "$DIMAGE" \
		'cat /data/f; echo from-the-container > /data/g')
	expect_eq "a bind, read" "$out" from-the-host
	expect_eq "a bind, written" "$(cat "$DKR/share/g")" from-the-container
	rc=0
	out=$(dk run --rm --runtime corral-bind --network none -v "$DKR/share:/data:ro" "$DIMAGE" \
		'echo x > /data/h' 2>&1) || rc=$?
	expect_eq "a bind with :ro: status" "$rc" 1
	expect_contains "a bind with :ro" "$out" "Read-only file system"
	[ ! -e "$DKR/share/h" ] || fail "written through a :ro bind"
}

# docker run --tmpfs (refused before: "a tmpfs mount on /cache
# refused"): Docker's options (noexec, nosuid, nodev, rprivate) and
# mode=, on a --read-only root; a fresh directory every run
t_docker_tmpfs() {
	dkr_ready
	local out rc=0 i
	for i in 1 2; do
		out=$(dk run --rm --runtime corral --network none --read-only \
			--tmpfs /cache:mode=1777 --tmpfs /r:ro,mode=0700 "$DIMAGE" \
			'busybox stat -c "mode %a %u" /cache /r; ls -A /cache | busybox wc -l;
			 echo dk-tmpfs > /cache/f && cat /cache/f; touch /r/x;
			 busybox cp /bin/busybox /cache/true && /cache/true && echo EXEC;
			 busybox grep -E " /(cache|r) " /proc/self/mountinfo' 2>&1) || rc=$?
		echo "$out"
		expect_eq "--tmpfs: status" "$rc" 0
		expect_contains "--tmpfs: mode=1777" "$out" "mode 1777 1000"
		expect_contains "--tmpfs: mode=0700" "$out" "mode 700 1000"
		expect_contains "--tmpfs: empty" "$out" $'\n0\n'
		expect_contains "--tmpfs: written" "$out" "dk-tmpfs"
		expect_contains "--tmpfs: ro" "$out" "/r/x: Read-only file system"
		expect_not_contains "--tmpfs: Docker's noexec" "$out" "EXEC"
		expect_contains "--tmpfs: nosuid, nodev" "$out" " /cache rw,nosuid,nodev,noexec"
	done
	rc=0
	out=$(dk run --rm --runtime corral --network none --tmpfs /x:mode=4777 "$DIMAGE" \
		'echo RAN' 2>&1) || rc=$?
	expect_not_contains "--tmpfs mode=4777" "$out" RAN
	expect_contains "--tmpfs mode=4777" "$out" "mode=4777 refused: a setuid or setgid bit"
}

# docker run --init: the host's tini bound at /sbin/docker-init and put
# before the command (refused before: "the host's /usr/bin/docker-init
# bound on /sbin/docker-init refused").  corral's init is PID 1 and does
# tini's work: the wrapper and its bind are dropped, and the command's
# status, and docker stop's SIGTERM, reach it as under tini.
t_docker_init() {
	dkr_ready
	local out rc=0
	out=$(dk run --rm --init --runtime corral --network none "$DIMAGE" \
		'cat /proc/1/cmdline; echo; ls /sbin/docker-init; exit 5' 2>&1) || rc=$?
	echo "$out"
	expect_eq "--init: status" "$rc" 5
	expect_contains "--init: PID 1" "$out" "corral-init"
	expect_contains "--init: no host tini" "$out" "/sbin/docker-init: No such file"
	dk run -d --init --name di1 --runtime corral --network none "$DIMAGE" \
		'busybox sleep 600' > /dev/null || fail "docker run -d --init"
	# the command is not PID 1, so SIGTERM's default ends it: 143, not
	# the 137 of a SIGKILL after docker's grace
	dk stop -t 30 di1 > /dev/null || fail "docker stop"
	expect_eq "--init: stopped by SIGTERM" "$(dk inspect -f '{{.State.ExitCode}}' di1)" 143
	dk rm -f di1 > /dev/null
}

# What corral denies, denied under Docker as under ctr: options that
# would weaken the boundary refused at create; inside, with Docker's own
# seccomp profile and AppArmor off, corral's filter still stops the
# calls (attack, tests/helpers, copied in before the start)
t_docker_denials() {
	dkr_ready
	trap 'dk rm -f dd1 > /dev/null 2>&1 || true' EXIT
	local out rc o want attack=${JGET%/*}/attack a
	[ -x "$attack" ] || fail "no tests/helpers/attack beside $CORRAL: make"
	while IFS='|' read -r o want; do
		rc=0
		out=$(dk run --rm --runtime corral-bind --network none $o "$DIMAGE" 'echo RAN' 2>&1) ||
			rc=$?
		expect_not_contains "$o" "$out" RAN
		expect_contains "$o" "$out" "$want"
	done <<-EOF
	--privileged|CAP_DAC_READ_SEARCH refused
	--cap-add SYS_ADMIN|CAP_SYS_ADMIN refused
	--pid host|the host's pid namespace refused
	--ipc host|the host's ipc namespace refused
	--device /dev/kmsg|device /dev/kmsg refused
	-v /:/host|the host's / bound on /host refused
	-v /etc:/data/etc|the host's /etc bound on /data/etc refused
	--sysctl kernel.shm_rmid_forced=1|linux.sysctl kernel.shm_rmid_forced refused
	EOF
	# the host's network: refused, and with join_pod_network too
	rc=0
	out=$(dk run --rm --runtime corral --network host "$DIMAGE" 'echo RAN' 2>&1) || rc=$?
	expect_contains "--network host" "$out" "refused: a corral container's namespaces are all its own"
	out=$(dk run --rm --runtime corral-pod --network host "$DIMAGE" 'echo RAN' 2>&1) || rc=$?
	expect_contains "--network host, join_pod_network" "$out" "refused: it is the host's"
	dk create --name dd1 --runtime corral --network none --security-opt seccomp=unconfined \
		--security-opt apparmor=unconfined "$DIMAGE" \
		'for a in mount ptrace unshare setns keyctl bpf io_uring; do /bin/attack $a; done
		 ls /; ls '"$DKR"' 2>&1; cat /proc/1/cmdline; echo' > /dev/null
	dk cp "$attack" dd1:/bin/attack
	out=$(dk start -a dd1 2>&1)
	echo "$out"
	for a in mount ptrace unshare setns keyctl bpf io_uring; do
		expect_contains "$a" "$out" "blocked: $a"
	done
	expect_contains "ptrace's errno" "$out" "ptrace(PTRACE_ATTACH) of a sibling: Operation not permitted"
	expect_contains "the host's paths" "$out" "$DKR: No such file or directory"
	expect_contains "corral's init" "$out" "corral-init"
}

case " ${*:-t_containerd} " in
*" t_containerd"*) ctrd_start ;;
esac
case " ${*:-t_docker} " in
*" t_docker"*) dockerd_start ;;
esac
run_tests "$@"
echo "oci ($(id -un 2>/dev/null || id -u)): $PASS passed, $FAIL failed, $SKIP skipped"
[ -n "$FAILED_NAMES" ] && echo "failed:$FAILED_NAMES"
[ "$FAIL" -eq 0 ]
