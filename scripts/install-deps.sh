#!/bin/sh
# Install what corral needs to build, test and benchmark on Debian 12 / Ubuntu.
# Idempotent: packages already present are left alone.
set -eu
PKGS="gcc make pkg-config libseccomp-dev libjansson-dev libevent-dev libssl-dev
      libcap-dev clang libclang-rt-14-dev bubblewrap hyperfine util-linux
      iproute2 nftables python3 git curl strace libhttp-parser-dev libldns-dev libnftables-dev
      libcurl4-openssl-dev zlib1g-dev nodejs npm"
missing=""
# images: archives and layers; a real tree and a real OCI tool for the tests
PKGS="$PKGS libarchive-dev busybox-static umoci"
# tests/apt.sh: dpkg-scanpackages for its offline repository
PKGS="$PKGS dpkg-dev"
# newuidmap/newgidmap: a full id range for users with an /etc/subuid entry
PKGS="$PKGS uidmap"
# make bench's image rows (podman with crun), make image-debian-test
PKGS="$PKGS podman crun debootstrap"
for p in $PKGS; do
	dpkg -s "$p" >/dev/null 2>&1 && continue
	# NodeSource's nodejs carries npm itself and conflicts with Debian's
	[ "$p" = npm ] && command -v npm >/dev/null && continue
	missing="$missing $p"
done
[ -z "$missing" ] && exit 0
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "installing:$missing"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
