#!/bin/bash
# image_debian.sh - `make image-debian-test`: a real Debian image, and
# `apt-get install` inside its writable root through the egress proxy.
#
#   tests/image_debian.sh CORRAL
#
# A MANUAL target, NOT part of `make check`: it talks to Debian's package
# mirror (the one apt is configured with here, /etc/apt/sources.list*) and
# takes minutes.  `make check` runs the offline counterpart, tests/apt.sh
# (a tree of the host's apt and dpkg, a local .deb from a loopback
# repository, no mirror).
# Steps, each printed with its result:
#   1. debootstrap --variant=minbase bookworm into a scratch tree (as root;
#      DEBIAN_ROOTFS=DIR reuses a tree made before, and lets a non-root
#      user run the rest);
#   2. the tree as a one-layer OCI image (tests/image_fixtures.py rootfs),
#      `corral image import`;
#   3. `corral run --image ... --root-writable --net proxy --allow MIRROR`:
#      apt-get update and apt-get install --download-only hello through
#      the proxy as the agent, the .deb unpacked into the writable root
#      (dpkg -x) and run; the host's tree and the store's layer are
#      unchanged afterwards;
#   4. the same with --user root (uid 0 of the sandbox's user namespace,
#      a few file capabilities; needs ids 0-65535 mapped: root, or an
#      /etc/subuid entry): a plain `apt-get install hello`, asserted.  As
#      the agent it fails: dpkg fchowns every file to its owner in the .deb
#      (root), which needs CAP_CHOWN (see SECURITY.md, Known limits).
set -u
CORRAL=$(readlink -f "$1")
HERE=$(cd "$(dirname "$0")" && pwd)
TEST_TMP=$(mktemp -d "${TMPDIR:-/tmp}/corral-image-debian.XXXXXX")
chmod 755 "$TEST_TMP"
trap 'chmod -R u+rwX "$TEST_TMP" 2>/dev/null; rm -rf "$TEST_TMP"' EXIT
. "$HERE/lib.sh"

# the mirror apt uses here (deb822 or one-line sources), http only
mirror() {
	local m
	m=$(grep -hoE 'http://[^ ]+/debian/?( |$)' /etc/apt/sources.list \
		/etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null |
		head -1 | tr -d ' ')
	echo "${m:-http://deb.debian.org/debian}"
}
MIRROR=$(mirror)
MIRROR_HOST=$(echo "$MIRROR" | sed -E 's|^http://([^/:]+).*|\1|')

t_debian_apt_get_install() {
	local rootfs=${DEBIAN_ROOTFS:-}
	if [ -z "$rootfs" ]; then
		[ "$(id -u)" = 0 ] || { skip "debootstrap needs root (or give DEBIAN_ROOTFS)"; return 77; }
		command -v debootstrap > /dev/null || { skip "no debootstrap (scripts/install-deps.sh)"; return 77; }
		rootfs=$T/rootfs
		echo "debootstrap minbase bookworm from $MIRROR ..."
		timeout 1800 debootstrap --variant=minbase bookworm "$rootfs" "$MIRROR" \
			> "$T/debootstrap.log" 2>&1 || fail "debootstrap: $(tail -5 "$T/debootstrap.log")"
	fi
	# the image's sources: the same mirror, reachable through the proxy
	echo "deb $MIRROR bookworm main" > "$T/sources.list"
	CORRAL_ROOTFS=$rootfs /usr/bin/python3 "$HERE/image_fixtures.py" rootfs "$T/img" ||
		fail "image from $rootfs"
	timeout 600 "$CORRAL" image import --state-dir "$T/state" "$T/img" > "$T/out" 2>&1 ||
		fail "import: $(cat "$T/out")"
	chmod -R a+rX "$T/sources.list"
	rc=0
	out=$(timeout 1200 "$CORRAL" run --state-dir "$T/state" --image corral-test/debian:12 \
		--root-writable --disk 2G --memory 1G --timeout 20m --net proxy --allow "$MIRROR_HOST" \
		--ro "$T/sources.list:/etc/apt/sources.list" -- /bin/sh -c '
		set -e
		APT="-o Debug::NoLocking=1 -o APT::Sandbox::User=agent -o Dpkg::Options::=--force-not-root -o Dpkg::Options::=--force-bad-path"
		rm -f /etc/apt/sources.list.d/*
		apt-get $APT -q update
		apt-get $APT -q -y install --download-only --no-install-recommends hello
		dpkg-deb -x /var/cache/apt/archives/hello_*.deb /
		hello' 2>&1 < /dev/null) || rc=$?
	echo "$out" | tail -20
	expect_eq "apt-get download, dpkg-deb -x exit" "$rc" 0
	expect_contains "hello runs" "$out" "Hello, world!"
	rc=0
	out=$(timeout 1200 "$CORRAL" run --state-dir "$T/state" --image corral-test/debian:12 \
		--root-writable --user root --disk 2G --memory 1G --timeout 20m --net proxy \
		--allow "$MIRROR_HOST" --ro "$T/sources.list:/etc/apt/sources.list" -- /bin/sh -c '
		rm -f /etc/apt/sources.list.d/*
		apt-get -q update > /dev/null && apt-get -q -y install --no-install-recommends hello &&
		hello && stat -c "owner %u:%g" /usr/bin/hello' 2>&1 < /dev/null) || rc=$?
	echo "$out" | tail -5
	expect_eq "apt-get install as root inside: exit" "$rc" 0
	expect_contains "hello runs" "$out" "Hello, world!"
	expect_contains "root's inside" "$out" "owner 0:0"
	[ ! -e "$rootfs/usr/bin/hello" ] || fail "written into the host's tree"
	out=$("$CORRAL" run --state-dir "$T/state" --image corral-test/debian:12 -- /bin/sh -c 'command -v hello || echo gone')
	expect_eq "discarded with the sandbox" "$out" gone
}

run_test t_debian_apt_get_install
echo "image-debian ($(id -un 2>/dev/null || id -u)): $PASS passed, $FAIL failed, $SKIP skipped"
[ -n "$FAILED_NAMES" ] && echo "failed:$FAILED_NAMES"
[ "$FAIL" -eq 0 ]
