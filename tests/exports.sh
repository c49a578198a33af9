#!/bin/bash
# exports.sh - the library exports its documented API and nothing else:
# src/lib is compiled with -fvisibility=hidden and include/corral.h marks
# each of its functions CORRAL_PUBLIC.  Read off the library's objects (what
# a shared build would export: their GLOBAL DEFAULT symbols).
#
#   tests/exports.sh [BUILD]      (default: build)
set -u
cd "$(dirname "$0")/.."
BUILD=${1:-build}
PASS=0
FAIL=0
T=$(mktemp -d /tmp/corral-exports.XXXXXX)
trap 'rm -rf "$T"' EXIT

check() {	# check NAME: pass when $T/diff is empty, else show it
	if [ -s "$T/diff" ]; then
		echo "not ok - $1"
		sed 's/^/    /' "$T/diff"
		FAIL=$((FAIL + 1))
	else
		echo "ok - $1"
		PASS=$((PASS + 1))
	fi
}

objs=$(ls "$BUILD"/src/lib/*.o 2>/dev/null)
if [ -z "$objs" ]; then
	echo "exports.sh: no objects in $BUILD/src/lib; run make first" >&2
	echo "0 passed, 1 failed"
	exit 1
fi
# shellcheck disable=SC2086
readelf -sW $objs | awk '$5 == "GLOBAL" && $6 == "DEFAULT" && $7 != "UND" { print $8 }' |
	sort -u > "$T/exported"
grep -o '\bcorral_[a-z0-9_]*(' include/corral.h | tr -d '(' | sort -u > "$T/declared"

comm -23 "$T/exported" "$T/declared" > "$T/diff"
check "nothing but corral.h's functions is exported"
comm -13 "$T/exported" "$T/declared" > "$T/diff"
check "every function of corral.h is exported (CORRAL_PUBLIC, and defined)"
: > "$T/diff"	# not the last check's: it failed this one too
[ -s "$T/exported" ] || echo "(no symbols read: readelf failed?)" > "$T/diff"
check "the objects could be read"
echo "$PASS passed, $FAIL failed"
[ "$FAIL" = 0 ]
