#!/bin/bash
# archive_in.sh - the daemon's peak memory (VmHWM) while N clients (default
# 8) each unpack an MiB-sized tar (default 60) through `corral cp -
# ID:/DIR/`, at once, into a sandbox each.  RUNS (default 3) runs; with
# BENCH_AB=OTHER_CORRAL that binary's daemon and client too, alternating
# run by run (this one first).  Its own daemons, in a temporary directory,
# stopped by their pids; loopback only (a unix socket).
#
#   bench/archive_in.sh CORRAL
set -u
A=$(readlink -f "$1")
B=${BENCH_AB:+$(readlink -f "$BENCH_AB")}
N=${N:-8}
MIB=${MIB:-60}
RUNS=${RUNS:-3}
W=$(mktemp -d "${TMPDIR:-/tmp}/archive_in.XXXXXX")
chmod 755 "$W"
DPID=""
cleanup() {
	[ -n "$DPID" ] && kill -TERM "$DPID" 2>/dev/null && wait "$DPID" 2>/dev/null
	rm -rf "$W"
}
trap cleanup EXIT
mkdir "$W/src"
head -c $((MIB << 20)) /dev/urandom > "$W/src/blob"
tar -C "$W/src" -cf "$W/in.tar" .

one_run() {	# one_run CORRAL: prints the peak in KiB
	local c=$1 i ids=() pids=() fails=0
	rm -rf "$W/state" "$W/s"
	"$c" serve --socket "$W/s" --state-dir "$W/state" > "$W/daemon.log" 2>&1 < /dev/null &
	DPID=$!
	for i in $(seq 100); do [ -S "$W/s" ] && break; sleep 0.1; done
	for i in $(seq "$N"); do
		ids+=("$("$c" create --socket "$W/s" < /dev/null)") || return 1
	done
	for i in $(seq 0 $((N - 1))); do
		timeout 300 "$c" cp --socket "$W/s" - "${ids[$i]}":/tmp/in/ < "$W/in.tar" \
			> /dev/null 2> "$W/cp.$i.err" &
		pids+=($!)
	done
	for i in "${pids[@]}"; do wait "$i" || fails=$((fails + 1)); done
	# each whole in its sandbox, or a failure
	for i in "${ids[@]}"; do
		[ "$("$c" exec --socket "$W/s" "$i" -- stat -c %s /tmp/in/blob < /dev/null 2>&1)" = \
		  $((MIB << 20)) ] || fails=$((fails + 1))
	done
	awk '$1 == "VmHWM:" { printf "%s", $2 }' "/proc/$DPID/status"
	echo " KiB peak, $fails of $N failed"
	[ "$fails" = 0 ] || cat "$W"/cp.*.err | sort | uniq -c | head -3
	kill -TERM "$DPID"
	wait "$DPID" 2>/dev/null
	DPID=""
}

for r in $(seq "$RUNS"); do
	echo "run $r A ($A): $(one_run "$A")"
	[ -n "$B" ] && echo "run $r B ($B): $(one_run "$B")"
done
