#!/bin/bash
# lingering.sh CORRAL [CALLS]: what one sandbox's lingering call groups
# cost its neighbours in one daemon.  Sandbox A runs CALLS calls (1000 by
# default) that each leave a sleeper behind, so each leaves its group;
# then the daemon's CPU while both are idle (its ticks), A's 20 calls of
# `true` (the daemon's CPU for them), and B's exec of `true` timed ten
# times while A runs calls.  Before the groups were read a batch a pass
# (call.c's lingering_batch), every call's end and every tick read each
# of them: at 1000, 30-40 ms of the daemon's CPU a call of A's, 12-14 ms
# a second idle, B's exec 11-236 ms while A ran calls (7-16 ms alone);
# with it, 2-3 ms a call, 0-2 ms a second, B's 5-24 ms (two runs each,
# a shared host: repeat).
set -eu
CORRAL=$(readlink -f "$1")
CALLS=${2:-1000}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/daemon.sh"
start_daemon linger

a=$("$CORRAL" create --socket "$S")
b=$("$CORRAL" create --socket "$S")
t0=$(date +%s%N)
for _ in $(seq "$CALLS"); do
	"$CORRAL" exec --socket "$S" "$a" -- /bin/sh -c \
		'sleep 10000 < /dev/null > /dev/null 2>&1 &' > /dev/null
done
echo "A's $CALLS calls that leave a sleeper: $(ms_since "$t0") ms"
c0=$(cpu); sleep 5; c1=$(cpu)
echo "the daemon idle: $(( (c1 - c0) * 1000 / $(getconf CLK_TCK) / 5 )) ms of CPU a second"
c0=$(cpu); t0=$(date +%s%N)
for _ in $(seq 20); do "$CORRAL" exec --socket "$S" "$a" -- /bin/true; done
c1=$(cpu)
echo "A's 20 calls of true: $(ms_since "$t0") ms, the daemon's CPU $(( (c1 - c0) * 1000 / $(getconf CLK_TCK) )) ms"
( for _ in $(seq 40); do "$CORRAL" exec --socket "$S" "$a" -- /bin/true; done ) &
lpid=$!
sleep 1
echo -n "B's true while A runs calls, ms:"
for _ in $(seq 10); do
	t0=$(date +%s%N)
	"$CORRAL" exec --socket "$S" "$b" -- /bin/true
	echo -n " $(ms_since "$t0")"
done
echo
wait "$lpid"
"$CORRAL" rm --socket "$S" "$a" "$b" > /dev/null
