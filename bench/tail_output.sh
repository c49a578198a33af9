#!/bin/bash
# tail_output.sh CORRAL [SECONDS]: what a background process that writes
# a byte at a time costs the daemon.  Sandbox A starts `dd bs=1` as a
# background process (POST .../processes: its output kept as a live
# tail, outkeep.c's tail_only); then the daemon's CPU over SECONDS (5)
# and B's exec of `true` timed twenty times.  Before the tail was trimmed
# an eighth of its cap at a time, each of the daemon's reads moved the
# whole 1 MiB kept, some 100 us of the loop a read: 9,000 reads a second,
# 88% of the daemon's time in memmove, 33-45% of a CPU, B's true 5-58 ms
# (5-16 before the writer); with it, 27,000 reads a second of a few
# bytes each, none of it memmove, still 27-39% of a CPU (the daemon reads
# as fast as the writer writes: one read a write, not bounded), B's
# 5-20 ms.  Two runs each; timings on a shared host: repeat.
set -eu
CORRAL=$(readlink -f "$1")
SECS=${2:-5}
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

a=$("$CORRAL" create --socket "$S")
b=$("$CORRAL" create --socket "$S")
waits
"$CORRAL" exec --socket "$S" --background "$a" -- /bin/dd if=/dev/zero bs=1 status=none > /dev/null
sleep 3		# past the cap: each read trims
c0=$(cpu)
sleep "$SECS"
c1=$(cpu)
echo "the daemon beside a writer of a byte a write: $(( (c1 - c0) * 100 / $(getconf CLK_TCK) / SECS ))% of a CPU"
waits
"$CORRAL" rm --socket "$S" "$a" "$b" > /dev/null
