#!/bin/bash
# oci_validation.sh - the OCI runtime-tools validation suite
# (github.com/opencontainers/runtime-tools: validation/*, cmd/runtimetest)
# against `corral oci`, as `make oci-validation` runs it.
#
#   tests/oci_validation.sh CORRAL
#
# The suite's sources: $RUNTIME_TOOLS_SRC (a checkout with vendor/, e.g.
# of the commit Debian packages), else Debian's
# golang-github-opencontainers-runtime-tools-dev.  Debian ships only the
# library part of runtime-tools (generate/, validate/, specerror/, ...),
# not validation/ nor cmd/runtimetest, and the Go module proxy is what
# would fetch them; where neither is there this says exactly what is
# missing and exits 2: no count is made up.
#
# With the sources: the programs are built with the vendored modules
# (GOFLAGS=-mod=vendor GOPROXY=off: nothing is downloaded) in a copy, or
# taken from $RUNTIME_TOOLS_BIN (runtimetest and the programs, built
# before); each runs with RUNTIME=corral-oci (a TAP stream; state in a
# root of its own), and the tally is printed.  Root only, as the runtime is.
set -u
CORRAL=$(readlink -f "${1:?usage: tests/oci_validation.sh CORRAL}")
PKG=golang-github-opencontainers-runtime-tools-dev
DEB_SRC=/usr/share/gocode/src/github.com/opencontainers/runtime-tools
SRC=${RUNTIME_TOOLS_SRC:-$DEB_SRC}
PER_TEST_S=${OCI_VALIDATION_TIMEOUT:-60}

missing=()
[ -d "$SRC/validation" ] || missing+=("$SRC/validation/ (the test programs)")
[ -d "$SRC/cmd/runtimetest" ] || missing+=("$SRC/cmd/runtimetest/ (the in-container checker)")
[ -f "$SRC/rootfs-amd64.tar.gz" ] || missing+=("$SRC/rootfs-amd64.tar.gz (the tests' rootfs)")
[ -d "$SRC/vendor" ] || missing+=("$SRC/vendor/ (the modules, for an offline build)")
if [ ${#missing[@]} -gt 0 ]; then
	echo "oci-validation: cannot run: the OCI runtime-tools validation suite is not on this machine." >&2
	if [ "$SRC" = "$DEB_SRC" ]; then
		if dpkg -s "$PKG" > /dev/null 2>&1; then
			echo "  $PKG $(dpkg-query -W -f='${Version}' "$PKG") is installed, but ships only" \
			     "$(ls "$DEB_SRC" 2>/dev/null | tr '\n' ' ')" >&2
		else
			echo "  $PKG is not installed (scripts/install-deps.sh)" >&2
		fi
	fi
	echo "  missing:" >&2
	printf '    %s\n' "${missing[@]}" >&2
	if ! getent hosts proxy.golang.org > /dev/null 2>&1; then
		echo "  and the Go module proxy (proxy.golang.org) does not resolve here, so" \
		     "go cannot fetch github.com/opencontainers/runtime-tools either." >&2
	fi
	echo "  Point RUNTIME_TOOLS_SRC at a checkout of opencontainers/runtime-tools with" \
	     "vendor/ (Debian packages commit 0105384, which builds with Debian's go 1.19)." >&2
	exit 2
fi
[ "$(id -u)" = 0 ] || { echo "oci-validation: the runtime is root's; run as root" >&2; exit 2; }
command -v go > /dev/null || { echo "oci-validation: go is not installed (golang-go)" >&2; exit 2; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/corral-oci-validation.XXXXXX")
# containers a test left behind (a failed one may), then the copy
cleanup() {
	for d in "$WORK"/state/*/; do
		[ -f "$d/state.json" ] &&
			"$CORRAL" oci --root "$WORK/state" delete --force "$(basename "$d")" 2>/dev/null
	done
	rm -rf "$WORK"
}
trap cleanup EXIT
cp -a "$SRC/." "$WORK/rt" || exit 2
# the runtime the suite calls: corral oci with a state root of its own
mkdir "$WORK/bin"
printf '#!/bin/sh\nexec %q oci --root %q "$@"\n' "$CORRAL" "$WORK/state" > "$WORK/bin/corral-oci"
chmod 755 "$WORK/bin/corral-oci"
cd "$WORK/rt" || exit 2
mkdir "$WORK/t"
if [ -n "${RUNTIME_TOOLS_BIN:-}" ]; then
	# built before (a build takes minutes): runtimetest and the programs
	cp "$RUNTIME_TOOLS_BIN/runtimetest" . && find "$RUNTIME_TOOLS_BIN" -maxdepth 1 \
		-type f -perm -u+x ! -name runtimetest -exec cp {} "$WORK/t/" \; || exit 2
else
	export GOFLAGS=-mod=vendor GOPROXY=off GOCACHE=${GOCACHE:-$WORK/gocache}
	echo "== building runtimetest and the validation programs (offline, vendored)"
	# static, as upstream's Makefile builds it: it runs inside a busybox rootfs
	CGO_ENABLED=0 go build -tags "netgo osusergo" -o runtimetest ./cmd/runtimetest ||
		{ echo "oci-validation: runtimetest did not build" >&2; exit 2; }
	# one go build for all: the packages they share are compiled once
	go build -o "$WORK/t/" ./validation/... ||
		{ echo "oci-validation: the validation programs did not build" >&2; exit 2; }
fi
tests=("$WORK"/t/*)

ok=0 notok=0 skipped=0 whole=0 crashed=0 empty=0
for t in "${tests[@]}"; do
	out=$(RUNTIME=$WORK/bin/corral-oci timeout "$PER_TEST_S" "$t" 2>&1)
	rc=$?
	o=$(grep -cE '^ok ' <<< "$out")
	n=$(grep -cE '^not ok ' <<< "$out")
	s=$(grep -cE '^ok .*# (SKIP|skip)' <<< "$out")
	ok=$((ok + o - s)); notok=$((notok + n)); skipped=$((skipped + s))
	if [ "$rc" -eq 0 ] && [ "$n" -eq 0 ] && [ "$o" -gt 0 ]; then
		whole=$((whole + 1)); verdict=pass
	elif [ "$o" -eq 0 ] && [ "$n" -eq 0 ] && grep -q '^1\.\.0' <<< "$out"; then
		empty=$((empty + 1)); verdict="no assertion (plan 1..0, exit $rc)"
	elif [ "$o" -eq 0 ] && [ "$n" -eq 0 ]; then
		crashed=$((crashed + 1)); verdict="no TAP (exit $rc)"
	else
		verdict="$o ok, $n not ok (exit $rc)"
	fi
	printf '%-50s %s\n' "$(basename "$t")" "$verdict"
	grep -E '^not ok ' <<< "$out" | head -5 | sed 's/^/    /'
	[ "$o" -eq 0 ] && [ "$n" -eq 0 ] && tail -2 <<< "$out" | sed 's/^/    /'
done
echo "oci-validation: $ok assertions passed, $notok failed, $skipped skipped;" \
     "$whole of ${#tests[@]} programs passed whole, $empty asserted nothing (1..0)," \
     "$crashed gave no TAP"
[ "$notok" -eq 0 ] && [ "$crashed" -eq 0 ]
