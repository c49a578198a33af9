#!/bin/sh
# bench.sh - `make bench`: corral against its peers, side by side, one run.
# BENCH_RUNS (default 200) and BENCH_BURST (default 100) size it; serve.py
# also reads BENCH_EXECS (500) and BENCH_IDLE (1000); image.py BENCH_IMAGE_RUNS (50);
# tls.py BENCH_TLS_BYTES (256 MiB), BENCH_LAT and BENCH_REQS (2000).
# oci.py BENCH_OCI_RUNS (30).
set -eu
CORRAL=${1:-build/corral}
here=$(dirname "$0")
# Root's parent groups "<hierarchy>/corral" stay after the last sandbox, by
# design (README): the ones the benches made go at the end, as check.sh does.
before=" $(ls -d /sys/fs/cgroup/*/corral /sys/fs/cgroup/corral 2>/dev/null | tr '\n' ' ') "
remove_new_parents() {
	[ "$(id -u)" = 0 ] || return 0
	for d in /sys/fs/cgroup/*/corral /sys/fs/cgroup/corral; do
		[ -d "$d" ] || continue
		case "$before" in *" $d "*) continue ;; esac
		rmdir "$d" 2>/dev/null || echo "bench: $d was made by the benches and is not empty: left"
	done
}
trap remove_new_parents EXIT
/usr/bin/python3 "$here/launch.py" "$CORRAL"
/usr/bin/python3 "$here/proxy.py" "$CORRAL"
/usr/bin/python3 "$here/tls.py" "$CORRAL"
/usr/bin/python3 "$here/serve.py" "$CORRAL"
/usr/bin/python3 "$here/stdio.py" "$CORRAL"
/usr/bin/python3 "$here/image.py" "$CORRAL"
/usr/bin/python3 "$here/snapshot.py" "$CORRAL"
/usr/bin/python3 "$here/oci.py" "$CORRAL"
