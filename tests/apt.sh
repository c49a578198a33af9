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
	local f lib
	for f in "$@"; do
		mkdir -p "$ROOTFS$(dirname "$f")"
		cp -L "$f" "$ROOTFS$f"
	done
	for lib in $(ldd "$@" 2>/dev/null | grep -oE '/[^ :]+' | sort -u); do
		[ -e "$ROOTFS$lib" ] && continue
		mkdir -p "$ROOTFS$(dirname "$lib")"
		cp -L "$lib" "$ROOTFS$lib"
	done
}

build_rootfs() {
	local d
	mkdir -p "$ROOTFS"/{bin,sbin,etc,tmp,root,lib64}
	for d in usr/bin usr/sbin usr/lib etc/apt/apt.conf.d etc/apt/preferences.d \
		etc/apt/sources.list.d etc/apt/trusted.gpg.d etc/dpkg/dpkg.cfg.d \
		var/lib/apt/lists/partial var/cache/apt/archives/partial var/log/apt \
		var/lib/dpkg/info var/lib/dpkg/updates var/lib/dpkg/triggers \
		var/lib/dpkg/alternatives usr/share/doc; do
		mkdir -p "$ROOTFS/$d"
	done
	cp /bin/busybox "$ROOTFS/bin/busybox"
	for d in sh rm diff cat ls ln mkdir stat id echo test grep sed \
		cp mv chmod chown find head readlink touch true false env; do
		ln -sf busybox "$ROOTFS/bin/$d"
	done
	copy /usr/bin/apt-get /usr/bin/dpkg /usr/bin/dpkg-deb /usr/bin/dpkg-query \
		/usr/bin/dpkg-split /usr/lib/apt/methods/http /usr/lib/apt/methods/store \
		/usr/lib/apt/methods/copy /usr/lib/apt/methods/file \
		/usr/sbin/start-stop-daemon /usr/sbin/ldconfig /usr/bin/tar
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

run_tests "$@"
echo "apt ($(id -un 2>/dev/null || id -u)): $PASS passed, $FAIL failed, $SKIP skipped"
[ -n "$FAILED_NAMES" ] && echo "failed:$FAILED_NAMES"
[ "$FAIL" -eq 0 ]
