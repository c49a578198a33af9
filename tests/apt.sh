#!/bin/bash
# apt.sh - `apt-get install` inside a sandbox as root of its user namespace
# (identity.user root, --user root), offline, and what that root still
# cannot do.
#
#   tests/apt.sh CORRAL HELPERS_DIR [TEST...]
#
# Nothing here talks to a Debian mirror.  The image is built from the host's
# own apt and dpkg (their binaries and the libraries ldd names, busybox-static
# for the shell and tools), with an empty dpkg status; the package is a
# one-script .deb made by dpkg-deb --build (files owned by root); the
# repository is a flat one (dpkg-scanpackages, `[trusted=yes]`) served by
# python3 http.server on loopback, reached from the sandbox by a name of
# the policy's network.hosts through the egress proxy.  Root only: the test
# needs corral's id range (as root) for a full mapping.
set -u
CORRAL=$(readlink -f "$1")
HELPERS_SRC=$(readlink -f "$2")
shift 2
HERE=$(cd "$(dirname "$0")" && pwd)
TEST_TMP=$(mktemp -d "${TMPDIR:-/tmp}/corral-apt.XXXXXX")
chmod 755 "$TEST_TMP"
SERVER=""
cleanup() {
	[ -z "$SERVER" ] || { kill "$SERVER" 2>/dev/null; wait "$SERVER" 2>/dev/null; }
	[ -z "${DAEMON:-}" ] || { kill "$DAEMON" 2>/dev/null; wait "$DAEMON" 2>/dev/null; }
	chmod -R u+rwX "$TEST_TMP" 2>/dev/null
	rm -rf "$TEST_TMP"
}
trap cleanup EXIT
. "$HERE/lib.sh"

if [ "$(id -u)" != 0 ]; then
	echo "skip: apt.sh needs root (corral's id range maps ids 0-65535)"
	echo "apt: 0 passed, 0 failed, 1 skipped"
	exit 0
fi
for tool in apt-get dpkg dpkg-deb dpkg-scanpackages busybox; do
	command -v "$tool" > /dev/null || { echo "skip: no $tool (scripts/install-deps.sh)"; echo "apt: 0 passed, 0 failed, 1 skipped"; exit 0; }
done

ROOTFS=$TEST_TMP/rootfs
STATE=$TEST_TMP/state
REPO=$TEST_TMP/repo
IMAGE=corral-test/apt:1

# copy PATH...: files of the host into the tree, with the libraries they
# load (one ldd for all: each costs a dynamic loader's start)
copy() {
	cp -L --parents "$@" "$ROOTFS"
	# shellcheck disable=SC2046
	cp -L --parents $(ldd "$@" 2>/dev/null | grep -oE '/[^ :]+' | sort -u) "$ROOTFS"
}

build_rootfs() {
	local d
	mkdir -p "$ROOTFS"/{bin,sbin,etc,tmp,root} "$ROOTFS"/usr/{bin,sbin,lib} \
		"$ROOTFS"/etc/apt/{apt.conf.d,preferences.d,sources.list.d,trusted.gpg.d} \
		"$ROOTFS"/etc/dpkg/dpkg.cfg.d "$ROOTFS"/var/lib/apt/lists/partial \
		"$ROOTFS"/var/cache/apt/archives/partial "$ROOTFS"/var/log/apt \
		"$ROOTFS"/var/lib/dpkg/{info,updates,triggers,alternatives} \
		"$ROOTFS"/usr/share/doc
	cp /bin/busybox "$ROOTFS/bin/busybox"
	# what apt and dpkg exec or look for in PATH (busybox's sh runs its
	# other applets itself)
	for d in sh rm diff cat; do
		ln -sf busybox "$ROOTFS/bin/$d"
	done
	copy /usr/bin/apt-get /usr/bin/dpkg /usr/bin/dpkg-deb /usr/bin/dpkg-query \
		/usr/bin/dpkg-split /usr/lib/apt/methods/http /usr/lib/apt/methods/store \
		/usr/lib/apt/methods/copy /usr/lib/apt/methods/file \
		/usr/sbin/start-stop-daemon /usr/sbin/ldconfig /usr/bin/tar /usr/bin/setpriv
	# dpkg-deb runs GNU tar (busybox tar lacks its options) as "tar"
	ln -sf ../usr/bin/tar "$ROOTFS/bin/tar"
	# apt reads dpkg's architecture tables
	mkdir -p "$ROOTFS/usr/share/dpkg"
	cp /usr/share/dpkg/*table "$ROOTFS/usr/share/dpkg/"
	: > "$ROOTFS/var/lib/dpkg/status"
	: > "$ROOTFS/var/lib/dpkg/available"
	printf 'root:x:0:0:root:/root:/bin/sh\n_apt:x:42:65534::/nonexistent:/bin/false\n' \
		> "$ROOTFS/etc/passwd"
	printf 'root:x:0:\nnogroup:x:65534:\n' > "$ROOTFS/etc/group"
	# apt fetches as _apt (setgroups, setgid, setuid: CAP_SETUID/SETGID)
	echo 'APT::Sandbox::User "_apt";' > "$ROOTFS/etc/apt/apt.conf.d/00corral"
}

# the package: /usr/bin/thepkg, root's in the .deb
build_repo() {
	local p=$TEST_TMP/pkg
	mkdir -p "$p/DEBIAN" "$p/usr/bin" "$REPO"
	printf 'Package: thepkg\nVersion: 1.0\nArchitecture: all\nMaintainer: corral tests <t@example.invalid>\nDescription: a package for tests/apt.sh\n' \
		> "$p/DEBIAN/control"
	printf '#!/bin/sh\necho thepkg runs\n' > "$p/usr/bin/thepkg"
	chmod 755 "$p/usr/bin/thepkg"
	dpkg-deb --root-owner-group --build "$p" "$REPO/thepkg_1.0_all.deb" > /dev/null
	(cd "$REPO" && dpkg-scanpackages --multiversion . /dev/null > Packages 2> /dev/null)
	grep -q '^Package: thepkg' "$REPO/Packages" || { echo "no Packages entry" >&2; return 1; }
}

start_server() {
	local pf=$TEST_TMP/port
	/usr/bin/python3 -c '
import http.server, functools, sys
h = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[1])
h.log_message = lambda *a: None
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), h)
open(sys.argv[2] + ".tmp", "w").write(str(s.server_address[1]))
import os; os.rename(sys.argv[2] + ".tmp", sys.argv[2])
s.serve_forever()' "$REPO" "$pf" > /dev/null 2>&1 &
	SERVER=$!
	for _ in $(seq 1 100); do [ -s "$pf" ] && break; sleep 0.05; done
	[ -s "$pf" ] || { echo "repository server did not start" >&2; return 1; }
	PORT=$(cat "$pf")
}

t0=$EPOCHREALTIME
build_rootfs || { echo "cannot build the tree"; exit 1; }
build_repo || exit 1
start_server || exit 1
echo "# setup: tree+repo $(( (${EPOCHREALTIME/./} - ${t0/./}) / 1000 )) ms"
echo "deb [trusted=yes] http://repo.test:$PORT/ ./" > "$ROOTFS/etc/apt/sources.list"
CORRAL_ROOTFS=$ROOTFS CORRAL_IMAGE_NAME=$IMAGE CORRAL_LAYER_COMPRESS=none /usr/bin/python3 "$HERE/image_fixtures.py" \
	rootfs "$TEST_TMP/img" || { echo "image from the tree failed"; exit 1; }
timeout 120 "$CORRAL" image import --state-dir "$STATE" "$TEST_TMP/img" > /dev/null ||
	{ echo "import failed"; exit 1; }
echo "# setup: imported $(( (${EPOCHREALTIME/./} - ${t0/./}) / 1000 )) ms, $(du -sh "$ROOTFS" | cut -f1)"
LAYER=$("$CORRAL" image inspect --state-dir "$STATE" "$IMAGE" | json layers.0.path)
printf '{"network": {"mode": "proxy", "allow": ["repo.test:%s"], "hosts": {"repo.test": "127.0.0.1"}}}\n' \
	"$PORT" > "$TEST_TMP/p.json"
chmod 644 "$TEST_TMP/p.json"

# arun ARGS... -- CMD: corral run on the image as root inside; out/rc in $T
arun() {
	local rc=0
	timeout 120 "$CORRAL" run --state-dir "$STATE" --image "$IMAGE" --policy "$TEST_TMP/p.json" \
		--root-writable --user root "$@" > "$T/out" 2>&1 < /dev/null || rc=$?
	echo "$rc" > "$T/rc"
	cat "$T/out"
}
rc() { cat "$T/rc"; }

t_apt_get_install() {
	find "$LAYER" -printf '%p %U %G %m %s\n' | sort > "$T/layer.before"
	out=$(arun -- /bin/sh -c 'apt-get -q update && apt-get -q -y install thepkg && thepkg && stat -c "%u:%g %a" /usr/bin/thepkg && id -u && dpkg-query -W -f="\${Status}\n" thepkg')
	echo "$out" | tail -15
	expect_eq "exit" "$(rc)" 0
	expect_contains "installed and runs" "$out" "thepkg runs"
	expect_contains "root's inside" "$out" "0:0 755"
	expect_contains "dpkg knows it" "$out" "install ok installed"
	# the layer, the tree it came from and the host are as before
	find "$LAYER" -printf '%p %U %G %m %s\n' | sort > "$T/layer.after"
	expect_eq "layer unchanged" "$(diff "$T/layer.before" "$T/layer.after" | head -5)" ""
	[ ! -e "$LAYER/usr/bin/thepkg" ] || fail "installed into the shared layer"
	[ ! -e "$ROOTFS/usr/bin/thepkg" ] || fail "installed into the tree"
	[ ! -e /usr/bin/thepkg ] || fail "installed on the host"
	out=$(arun -- /bin/sh -c 'test -e /usr/bin/thepkg && echo still-there; echo done')
	expect_not_contains "discarded with the sandbox" "$out" "still-there"
}

# What the listed capabilities are, and nothing more: 0xdb is CHOWN (0),
# DAC_OVERRIDE (1), FOWNER (3), FSETID (4), SETGID (6), SETUID (7).
t_root_inside_capabilities() {
	out=$(arun -- /bin/sh -c 'id -u; grep -E "^Cap(Inh|Prm|Eff|Bnd|Amb)|^NoNewPrivs" /proc/self/status; /usr/bin/setpriv --reuid=42 --regid=65534 --clear-groups /bin/sh -c "id -u; grep ^CapEff /proc/self/status"')
	expect_eq "exit" "$(rc)" 0
	expect_contains "uid 0" "$out" $'0\nCapInh'
	expect_contains "permitted" "$out" $'CapPrm:\t00000000000000db'
	expect_contains "effective" "$out" $'CapEff:\t00000000000000db'
	expect_contains "bounding" "$out" $'CapBnd:\t00000000000000db'
	expect_contains "no inheritable" "$out" $'CapInh:\t0000000000000000'
	expect_contains "no ambient" "$out" $'CapAmb:\t0000000000000000'
	expect_contains "no_new_privs" "$out" $'NoNewPrivs:\t1'
	# leaving uid 0 leaves every capability
	expect_contains "setuid drops all" "$out" $'42\nCapEff:\t0000000000000000'
	# no_new_privs: a setuid-root file root leaves gives _apt nothing
	out=$(arun -- /bin/sh -c 'mkdir -p /opt/s && cp /bin/busybox /opt/s/id && chmod 4755 /opt/s/id &&
		stat -c "mode %a %u" /opt/s/id &&
		echo "euid $(/usr/bin/setpriv --reuid=42 --regid=65534 --clear-groups /opt/s/id -u)"')
	expect_contains "setuid file made" "$out" "mode 4755 0"
	expect_contains "setuid bit ignored" "$out" "euid 42"
	# the agent, as ever, has none
	out=$(timeout 60 "$CORRAL" run --state-dir "$STATE" --image "$IMAGE" --root-writable \
		-- /bin/sh -c 'id -u; grep ^CapEff /proc/self/status' 2>&1 < /dev/null)
	expect_contains "agent: none" "$out" $'1000\nCapEff:\t0000000000000000'
}

# The attack corpus as root inside: each one still blocked (or killed).
t_root_inside_attack_corpus() {
	local names
	names=$("$HELPERS_SRC/attack" list)
	[ "$(echo "$names" | wc -l)" -ge 30 ] || fail "attack list: $names"
	out=$(arun --ro "$HELPERS_SRC:/opt/helpers" -- /bin/sh -c '
		for a in $(/opt/helpers/attack list); do
			/opt/helpers/attack $a; echo "rc $a $?"
		done')
	expect_not_contains "nothing escaped" "$out" "ESCAPED"
	for a in $names; do
		expect_contains "$a ran" "$out" "rc $a "
	done
	expect_contains "mount blocked" "$out" "blocked: mount"
	expect_contains "init_module blocked" "$out" "blocked: init_module"
	expect_contains "ptrace blocked" "$out" "blocked: ptrace"
	expect_contains "open_by_handle_at blocked" "$out" "blocked: open_by_handle_at"
}

# Root inside meets the host only where the agent did: read-only binds stay
# read-only, the host's files (owned by unmapped ids) grant nothing to its
# capabilities, the workspace is copy-on-write, and an rw bind keeps its
# owner's ids: nothing there becomes root's or another host id's.
t_root_inside_host_untouched() {
	mkdir -p "$T/ws" "$T/rw" "$T/ro"
	echo ws > "$T/ws/f"
	echo rw > "$T/rw/f"
	echo secret > "$T/ro/secret"
	chmod 600 "$T/ro/secret"
	chown -R 4321:4321 "$T/ws" "$T/rw"
	chown -R 0:0 "$T/ro"
	chmod 700 "$T/ro"
	out=$(arun --workspace "$T/ws" --rw "$T/rw:/rw" --ro "$T/ro:/ro" --ro /usr/bin:/hostbin -- /bin/sh -c '
		chown 0:0 /workspace/f && chown 4242 /workspace/f && echo ws-chowned
		echo x > /ro/new 2>&1 || echo ro-refused
		echo x > /hostbin/new 2>&1 || echo hostbin-refused
		chown 0:0 /rw/f 2>&1 || echo rw-chown-root-refused
		chown 4242 /rw/f 2>&1 || echo rw-chown-other-refused
		echo new > /rw/byroot 2>&1 || echo rw-create-refused
		stat -c "%u:%g" /rw/f
		/bin/busybox mount -t tmpfs none /tmp 2>&1 || echo mount-refused
		test -r /etc/shadow && cat /etc/shadow; echo shadow-done')
	expect_eq "exit" "$(rc)" 0
	expect_contains "workspace: chown inside" "$out" "ws-chowned"
	expect_contains "ro bind" "$out" "ro-refused"
	expect_contains "host's /usr/bin" "$out" "hostbin-refused"
	expect_contains "rw bind: no chown to root" "$out" "rw-chown-root-refused"
	expect_contains "rw bind: no chown to another id" "$out" "rw-chown-other-refused"
	expect_contains "rw bind: root creates nothing" "$out" "rw-create-refused"
	expect_contains "rw bind: the owner's still" "$out" "1000:1000"
	expect_contains "no mount" "$out" "mount-refused"
	expect_not_contains "not the host's shadow" "$out" "$(head -1 /etc/shadow)"
	# the host's side: every file its owner's, as before the run
	expect_eq "workspace owners" "$(stat -c %u:%g "$T/ws/f")" "4321:4321"
	expect_eq "workspace content" "$(cat "$T/ws/f")" "ws"
	expect_eq "rw owners" "$(find "$T/rw" ! -uid 4321 -o ! -gid 4321 | head -3)" ""
	expect_eq "no new file in ro" "$(ls -A "$T/ro")" "secret"
	[ ! -e /usr/bin/new ] || fail "wrote into the host's /usr/bin"
}

# Refused with a reason: over the host's /usr, and with one mapped id.
t_root_inside_refusals() {
	out=$(timeout 60 "$CORRAL" run --user root -- /bin/true 2>&1 < /dev/null) && fail "ran: $out"
	expect_contains "needs an image" "$out" "needs an image or --rootfs"
	out=$(timeout 60 "$CORRAL" run --user nobody -- /bin/true 2>&1 < /dev/null) && fail "ran: $out"
	expect_contains "bad --user" "$out" "expected agent or root"
	echo '{"identity": {"user": "admin"}}' > "$T/bad.json"
	out=$("$CORRAL" policy check "$T/bad.json" 2>&1) && fail "accepted: $out"
	expect_contains "policy: bad user" "$out" "identity.user"
	# one mapped id: an unprivileged caller without an /etc/subuid entry
	if grep -qE '^(nobody|65534):' /etc/subuid 2>/dev/null; then
		skip "uid 65534 has an /etc/subuid entry here"
		return 77
	fi
	chmod 755 "$TEST_TMP" "$ROOTFS"
	out=$(cd / && timeout 60 setpriv --reuid=65534 --regid=65534 --clear-groups \
		"$CORRAL" run --rootfs "$ROOTFS" --root-writable --user root -- /bin/true 2>&1 < /dev/null) &&
		fail "ran: $out"
	expect_contains "one mapped id" "$out" "needs ids 0-65535 mapped"
	expect_contains "says why" "$out" "only uid 1000 is mapped"
}

# The daemon: 403 unless its operator allowed it; then calls run as root.
t_root_inside_daemon_gate() {
	local i
	for allow in "" --allow-root-inside; do
		rm -f "$T/s"
		"$CORRAL" serve --socket "$T/s" --state-dir "$STATE" $allow > "$T/daemon.log" 2>&1 < /dev/null &
		DAEMON=$!
		for i in $(seq 1 200); do [ -S "$T/s" ] && break; sleep 0.05; done
		[ -S "$T/s" ] || fail "no daemon: $(tail -3 "$T/daemon.log")"
		if [ -z "$allow" ]; then
			out=$(curl -sS --unix-socket "$T/s" -H 'Content-Type: application/json' \
				-d "{\"image\": \"$IMAGE\", \"user\": \"root\"}" http://x/v1/sandboxes -w ' %{http_code}')
			expect_contains "user root: 403" "$out" "forbidden"
			expect_contains "user root: status" "$out" " 403"
			expect_contains "names the flag" "$out" "--allow-root-inside"
			out=$(curl -sS --unix-socket "$T/s" -H 'Content-Type: application/json' \
				-d "{\"image\": \"$IMAGE\", \"policy\": {\"identity\": {\"user\": \"root\"}}}" \
				http://x/v1/sandboxes -w ' %{http_code}')
			expect_contains "policy identity.user root: 403" "$out" " 403"
			out=$("$CORRAL" create --socket "$T/s" --image "$IMAGE" --user root 2>&1) && fail "created: $out"
			expect_contains "corral create --user root" "$out" "403"
		else
			id=$("$CORRAL" create --socket "$T/s" --image "$IMAGE" --user root) || fail "create: $id"
			out=$("$CORRAL" exec --socket "$T/s" "$id" -- /bin/sh -c 'id -u; grep ^CapEff /proc/self/status' 2>&1)
			expect_contains "root inside, listed caps" "$out" $'0\nCapEff:\t00000000000000db'
			"$CORRAL" rm --socket "$T/s" "$id" > /dev/null || fail "rm"
		fi
		kill -TERM "$DAEMON"
		wait "$DAEMON" 2>/dev/null
		DAEMON=""
	done
}

run_tests "$@"
echo "apt ($(id -un 2>/dev/null || id -u)): $PASS passed, $FAIL failed, $SKIP skipped"
[ -n "$FAILED_NAMES" ] && echo "failed:$FAILED_NAMES"
[ "$FAIL" -eq 0 ]
