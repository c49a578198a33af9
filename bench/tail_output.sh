#!/bin/bash
# tail_output.sh CORRAL [SECONDS] [WRITERS] [BOXES] [CPUS]: what background
# processes that write a byte at a time cost the daemon.  BOXES sandboxes
# (1) each start WRITERS (1) `dd bs=1` as background processes (POST
# .../processes: their output kept as a live tail, outkeep.c's
# tail_only), with limits.cpus CPUS if given; then the daemon's CPU and
# reads (its loop's read(2)s) over SECONDS (5), the writers' CPU (their
# boxes' meters), and another box B's exec of `true` timed twenty times.
# Before the tail was trimmed an eighth of its cap at a time, each of the
# daemon's reads moved the whole 1 MiB kept, some 100 us of the loop a
# read: 9,000 reads a second, 88% of the daemon's time in memmove, 33-45%
# of a CPU, B's true 5-58 ms (5-16 before the writer); with it, 27,000
# reads a second of a few bytes each, none of it memmove, still 27-39% of
# a CPU (one read a write), B's 5-20 ms.  Read at a pace (outpace.c): one
# writer 35-37% -> 1% of a CPU, some 200 reads a second.  Two runs each;
# timings on a shared host: repeat.
set -eu
CORRAL=$(readlink -f "$1")
SECS=${2:-5}
WRITERS=${3:-1}
BOXES=${4:-1}
CPUS=${5:-}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/daemon.sh"
start_daemon tail

waits() {
	local t0 w=""
	for _ in $(seq 20); do
		t0=$(date +%s%N)
		"$CORRAL" exec --socket "$S" "$b" -- /bin/true
		w="$w $(( ($(date +%s%N) - t0) / 1000000 ))"
	done
	echo "B's true, ms:$w"
}

reads() { awk '$1 == "syscr:" { print $2 }' "/proc/$dpid/task/$dpid/io"; }
# the writers' boxes' CPU so far, in ms
box_cpu() {
	local id t=0
	for id in $boxes; do
		t=$(( t + $(curl -s --unix-socket "$S" "http://x/v1/sandboxes/$id" |
			    jq '.meters.cpu_seconds * 1000 | floor') ))
	done
	echo "$t"
}

pol=""
if [ -n "$CPUS" ]; then
	printf '{"limits": {"cpus": %s}}\n' "$CPUS" > "$TMP/cpus.json"
	pol="--policy $TMP/cpus.json"
fi
boxes=""
for _ in $(seq "$BOXES"); do
	# shellcheck disable=SC2086
	boxes="$boxes $("$CORRAL" create --socket "$S" --idle-freeze 0 $pol)"
done
b=$("$CORRAL" create --socket "$S")
waits
for a in $boxes; do
	for _ in $(seq "$WRITERS"); do
		"$CORRAL" exec --socket "$S" --background "$a" -- /bin/dd if=/dev/zero bs=1 status=none > /dev/null
	done
done
sleep 3		# past the cap: each read trims
c0=$(cpu) r0=$(reads) w0=$(box_cpu)
sleep "$SECS"
c1=$(cpu) r1=$(reads) w1=$(box_cpu)
echo "the daemon beside $BOXES x $WRITERS writer(s) of a byte a write${CPUS:+ (cpus $CPUS a box)}:" \
     "$(( (c1 - c0) * 100 / $(getconf CLK_TCK) / SECS ))% of a CPU," \
     "$(( (r1 - r0) / SECS )) reads a second; the writers $(( (w1 - w0) / 10 / SECS ))% of a CPU"
waits
# shellcheck disable=SC2086
"$CORRAL" rm --socket "$S" $boxes "$b" > /dev/null
