#!/bin/bash
# halt_kill.sh CORRAL [CALLS]: what one sandbox's halt costs its
# neighbours in one daemon when its policy kills on abort (the default)
# and its CALLS calls (1000 by default) each left a sleeper, a group
# each.  Sandbox A meets its own criterion (a second denied syscall)
# while B runs `true` 300 times, each timed: B's five longest waits, then
# its three shortest.  Without cgroup.kill (v1, v2 before 5.14) the kill
# read cgroup.procs in every group of every hierarchy, some rounds of it,
# on the daemon's loop: B's longest wait 481-1326 ms (four runs), the
# daemon's CPU from the halt on 750-780 ms with B's 300 calls (460-490
# with 60); in a helper process (cgroup_reap.c's cg_kill_async), B's
# longest 27-215 ms (27-131 in three of four), the daemon's 260-280 ms
# (10-20).  Timings on a shared host: repeat.
set -eu
CORRAL=$(readlink -f "$1")
CALLS=${2:-1000}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/daemon.sh"
start_daemon haltkill

echo '{"abort": {"max_denied_syscalls": 1, "on_abort": "kill"}}' > "$TMP/policy.json"
a=$("$CORRAL" create --socket "$S" --policy "$TMP/policy.json")
b=$("$CORRAL" create --socket "$S")
for _ in $(seq "$CALLS"); do
	"$CORRAL" exec --socket "$S" "$a" -- /bin/sh -c \
		'sleep 10000 < /dev/null > /dev/null 2>&1 &' > /dev/null
done
(
	for _ in $(seq 300); do
		t0=$(date +%s%N)
		"$CORRAL" exec --socket "$S" "$b" -- /bin/true
		ms_since "$t0"
	done
) > "$TMP/waits" &
lpid=$!
sleep 1
c0=$(cpu)
t0=$(date +%s%N)
# keyctl (250 on x86_64) three times: denied, and the second halts A
"$CORRAL" exec --socket "$S" "$a" -- /usr/bin/python3 -c 'import ctypes, time
l = ctypes.CDLL(None)
for _ in range(3): l.syscall(250, 0, 0, 0, 0, 0)
time.sleep(5)' > /dev/null 2>&1 || :
echo "A's call that halts it: $(ms_since "$t0") ms"
sleep 3
c1=$(cpu)
echo "the daemon's CPU from then: $(( (c1 - c0) * 1000 / $(getconf CLK_TCK) )) ms"
wait "$lpid"
echo "B's longest waits, ms: $(sort -n "$TMP/waits" | tail -5 | tr '\n' ' ')"
echo "B's shortest, ms: $(sort -n "$TMP/waits" | head -3 | tr '\n' ' ')"
"$CORRAL" rm --socket "$S" "$a" "$b" > /dev/null
