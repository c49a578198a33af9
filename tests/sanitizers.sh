#!/bin/bash
# sanitizers.sh - the sanitized build's flags and options catch what they
# are there for: three small programs built with them, each doing one thing
# wrong, must each end with exit 99 and a report naming its fault and line.
# UBSan's checks trap (check.sh: no libubsan), so its report is ASan's
# "ILL"; if that ever stopped working, UB would go by as a bare SIGILL.
#
#   SAN="..." ASAN_OPTIONS="..." tests/sanitizers.sh     (as check.sh sets them)
set -u
PASS=0
FAIL=0
T=$(mktemp -d /tmp/corral-sanitizers.XXXXXX)
trap 'rm -rf "$T"' EXIT

# expect NAME SOURCE WANT: built with $SAN, run, exit 99 and WANT in stderr
expect() {
	local name=$1 want=$3 rc=0
	printf '%s\n' "$2" > "$T/$name.c"
	# shellcheck disable=SC2086
	if ! ${CC:-cc} -g -O1 $SAN -o "$T/$name" "$T/$name.c" 2> "$T/$name.cc"; then
		echo "not ok - $name: does not build"
		sed 's/^/    /' "$T/$name.cc"
		FAIL=$((FAIL + 1))
		return
	fi
	# one argument: argc is 2, which the programs count on
	"$T/$name" 3 > /dev/null 2> "$T/$name.err" || rc=$?
	if [ "$rc" = 99 ] && grep -q -- "$want" "$T/$name.err" &&
	   grep -q "$name.c:" "$T/$name.err"; then
		echo "ok - $name"
		PASS=$((PASS + 1))
	else
		echo "not ok - $name: exit $rc, want 99 and '$want' with a line of $name.c"
		head -12 "$T/$name.err" | sed 's/^/    /'
		FAIL=$((FAIL + 1))
	fi
}

if [ -z "${SAN:-}" ]; then
	echo "sanitizers.sh: SAN is not set (run by tests/check.sh)" >&2
	echo "0 passed, 1 failed"
	exit 1
fi

expect heap_overflow '#include <stdlib.h>
int main(int argc, char **argv) { size_t n = 4 + (size_t)argc * 2; char *p = malloc(n); ((volatile char *)p)[n] = 1; (void)argv; free(p); return 0; }' \
	"AddressSanitizer: heap-buffer-overflow"
expect leak '#include <stdlib.h>
#include <string.h>
int main(int argc, char **argv) { char *p = malloc(64); memset(p, argc, 64); p = NULL; (void)argv; return 0; }' \
	"LeakSanitizer: detected memory leaks"
expect signed_overflow '#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) { int x = INT_MAX - 3 + argc; x += atoi(argv[1]); printf("%d\n", x); return 0; }' \
	"AddressSanitizer: ILL"
echo "$PASS passed, $FAIL failed"
[ "$FAIL" = 0 ]
