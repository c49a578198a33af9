#!/bin/sh
# bench.sh - `make bench`: corral against its peers, side by side, one run.
# BENCH_RUNS (default 200) and BENCH_BURST (default 100) size it; serve.py
# also reads BENCH_EXECS (500), BENCH_IDLE (1000) and BENCH_HTTPS (50, exec over
# the unix socket vs https), BENCH_ONLY (its sections by name) and BENCH_AB
# (another corral binary, its burst alternated with this one's: a
# before/after pair in one run); image.py BENCH_IMAGE_RUNS (50);
# tls.py BENCH_TLS_BYTES (256 MiB), BENCH_LAT and BENCH_REQS (2000).
# oci.py BENCH_OCI_RUNS (30); walks.py BENCH_WALK_FIFOS (240000),
# BENCH_WALK_FILES (100000), BENCH_WALK_RUNS (5) and BENCH_AB.  Not run here: exec_path.py (root and perf),
# a warm exec's time split where the daemon, init and the call mark it;
# cold_phases.py (root, tracefs), a cold `corral run`'s and bwrap's split
# phase by phase from the kernel's record of their tasks.
set -eu
CORRAL=${1:-build/corral}
here=$(dirname "$0")
# the parent groups the benches made go at the end, as check.sh's do
. "$here/../scripts/cgroup-parents.sh"
cg_parents_note
trap 'cg_parents_remove bench' EXIT
/usr/bin/python3 "$here/launch.py" "$CORRAL"
/usr/bin/python3 "$here/proxy.py" "$CORRAL"
/usr/bin/python3 "$here/tls.py" "$CORRAL"
/usr/bin/python3 "$here/serve.py" "$CORRAL"
/usr/bin/python3 "$here/stdio.py" "$CORRAL"
/usr/bin/python3 "$here/image.py" "$CORRAL"
/usr/bin/python3 "$here/snapshot.py" "$CORRAL"
/usr/bin/python3 "$here/walks.py" "$CORRAL"
/usr/bin/python3 "$here/oci.py" "$CORRAL"
