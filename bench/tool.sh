# tool.sh - sourced by the by-hand bench scripts (kmem_hold.sh,
# seccomp_jit.sh): build_tool NAME compiles bench/NAME.c into TMP, a temp
# directory a sandbox may read (--ro "$TMP:..."); at exit the sandbox the
# script started ($pid) is killed and TMP removed.
HERE=$(cd "$(dirname "$0")" && pwd)
pid=""

cleanup() {
	[ -z "$pid" ] || { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; } || true
	rm -rf "$TMP"
}

build_tool() {
	TMP=$(mktemp -d "${TMPDIR:-/tmp}/corral-$1.XXXXXX")
	chmod 755 "$TMP"
	trap cleanup EXIT
	cc -O2 -Wall -o "$TMP/$1" "$HERE/$1.c"
	chmod 755 "$TMP/$1"
}
