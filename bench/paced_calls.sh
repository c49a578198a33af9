#!/bin/bash
# paced_calls.sh CORRAL [SECONDS [CALLS [PERIOD]]]: what one sandbox's many
# slow writers cost the daemon once their output is read at a pace
# (outpace.c).  Box A starts CALLS (100) background processes, each
# writing a byte every PERIOD seconds (0.001), so each call is paced;
# then the daemon's CPU and reads over SECONDS (5), the writers' CPU, and
# another box B's exec of `true` timed ten times.  When every paced call
# resumed on each 5 ms tick, a call cost the loop a read and its pipes'
# epoll_ctl a tick: 100 calls 11-13% of a CPU, 16,000-21,000 reads a
# second (41-47%, 72,000-79,000, unpaced), 200 every 4 ms 28%, 42,800;
# a box's tick resuming 32 of them, in turn: 5%, 6,500 for either.  Two
# runs each; a shared host: repeat.
set -eu
CORRAL=$(readlink -f "$1")
SECS=${2:-5}
CALLS=${3:-100}
PERIOD=${4:-0.001}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/daemon.sh"
start_daemon paced

reads() { awk '$1 == "syscr:" { print $2 }' "/proc/$dpid/task/$dpid/io"; }
box_cpu() {
	curl -s --unix-socket "$S" "http://x/v1/sandboxes/$a" |
		jq '.meters.cpu_seconds * 1000 | floor'
}
waits() {
	local t0 w=""
	for _ in $(seq 10); do
		t0=$(date +%s%N)
		"$CORRAL" exec --socket "$S" "$b" -- /bin/true
		w="$w $(ms_since "$t0")"
	done
	echo "B's true, ms:$w"
}

# each writer one pid; the default memory leaves room for them
printf '{"limits": {"pids": %d}}\n' $((CALLS + 64)) > "$TMP/p.json"
a=$("$CORRAL" create --socket "$S" --idle-freeze 0 --policy "$TMP/p.json")
b=$("$CORRAL" create --socket "$S")
for _ in $(seq "$CALLS"); do
	"$CORRAL" exec --socket "$S" --background "$a" -- /usr/bin/perl -e \
		"\$| = 1; while (1) { print 'x'; select(undef, undef, undef, $PERIOD) }" > /dev/null
done
sleep 2
c0=$(cpu) r0=$(reads) w0=$(box_cpu)
sleep "$SECS"
c1=$(cpu) r1=$(reads) w1=$(box_cpu)
echo "the daemon beside $CALLS calls writing a byte every ${PERIOD} s:" \
     "$(( (c1 - c0) * 100 / $(getconf CLK_TCK) / SECS ))% of a CPU," \
     "$(( (r1 - r0) / SECS )) reads a second; the writers $(( (w1 - w0) / 10 / SECS ))% of a CPU"
waits
"$CORRAL" rm --socket "$S" "$a" "$b" > /dev/null
