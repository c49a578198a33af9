#!/bin/sh
# Install what corral needs to build, test and benchmark on Debian 12 / Ubuntu.
# Idempotent: packages already present are left alone.
set -eu
PKGS="gcc make pkg-config libseccomp-dev libjansson-dev libevent-dev libssl-dev
      libcap-dev clang libclang-rt-14-dev bubblewrap hyperfine util-linux
      iproute2 nftables python3 git curl strace libhttp-parser-dev libldns-dev
      libcurl4-openssl-dev zlib1g-dev nodejs npm"
missing=""
# images: archives and layers; a real tree and a real OCI tool for the tests
PKGS="$PKGS libarchive-dev busybox-static umoci"
# tests/apt.sh: dpkg-scanpackages for its offline repository
PKGS="$PKGS dpkg-dev"
# newuidmap/newgidmap: a full id range for users with an /etc/subuid entry
PKGS="$PKGS uidmap"
# TLS termination, build/corral-tls.so, links libssl (libssl-dev above) and
# libevent_openssl (in libevent-dev); tests/tls.sh and bench/tls.py make
# their CA with openssl
PKGS="$PKGS openssl"
# SHA-256, SHA-1 and base64 in corral itself (audit chain, images, patches)
PKGS="$PKGS nettle-dev"
# make bench's image rows (podman with crun), make image-debian-test
PKGS="$PKGS podman crun debootstrap"
# tests/oci.sh t_podman: `podman run --init` needs its catatonit on the host
PKGS="$PKGS catatonit"
# tests/cpython.sh: CPython's own test suite for /usr/bin/python3, inside and out
PKGS="$PKGS libpython3.11-testsuite"
# tests/oci.sh: corral as the runtime of a private containerd (its runc shim)
PKGS="$PKGS containerd"
# tests/oci.sh t_docker_*: corral as a runtime of a private dockerd, started
# by the tests (no bridge, no iptables rule); 147 MB installed.  Only where
# an install starts no services (CI's policy-rc.d, no systemd): elsewhere
# the package's own dockerd would start, with its bridge and NAT rules on
# the host, which this script is not asked for; it says so, the Docker
# tests skip, and CORRAL_INSTALL_DOCKER=1 installs it anyway.  Not where a
# dockerd is already (docker-ce's packages conflict with it)
PKGS="$PKGS docker.io"
services_held() {
	[ -x /usr/sbin/policy-rc.d ] && { /usr/sbin/policy-rc.d docker start >/dev/null 2>&1; [ $? -eq 101 ]; } && return 0
	[ ! -d /run/systemd/system ]
}
# the static libarchive's own dependencies (.a files): corral links the
# run path's libraries in (Makefile, LINK=static) for its cold start
PKGS="$PKGS libzstd-dev liblz4-dev libacl1-dev"
# the test harness's rm, mkdir, rmdir, mkfifo and sleep as bash builtins
# (tests/lib.sh): a fork and an exec each cost 4-7 ms of CPU on a pti=on
# guest, and the suite runs tens of thousands
PKGS="$PKGS bash-builtins"
for p in $PKGS; do
	dpkg -s "$p" >/dev/null 2>&1 && continue
	# NodeSource's nodejs carries npm itself and conflicts with Debian's
	[ "$p" = npm ] && command -v npm >/dev/null && continue
	[ "$p" = docker.io ] && command -v dockerd >/dev/null && continue
	if [ "$p" = docker.io ] && [ "${CORRAL_INSTALL_DOCKER:-}" != 1 ] && ! services_held; then
		echo "install-deps: docker.io left out: its install would start a dockerd with a bridge here (CORRAL_INSTALL_DOCKER=1 installs it; tests/oci.sh's Docker tests skip without it)"
		continue
	fi
	missing="$missing $p"
done
if [ -n "$missing" ]; then
	SUDO=""
	[ "$(id -u)" -eq 0 ] || SUDO="sudo"
	echo "installing:$missing"
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
fi
# The MCP tests' npm packages (the official SDK and Inspector, Node 22 for
# them where the host's is older) are make check's to fetch, into build/,
# while it builds: half a gigabyte and 40 s that the compiler need not wait
# for (tests/check.sh).
