# shellcheck shell=bash
# daemon.sh - sourced by the by-hand bench scripts that time what one
# sandbox costs its neighbours in one daemon (halt_kill.sh, lingering.sh,
# peer_search.sh, tail_output.sh): start_daemon NAME makes TMP (a temp
# directory a sandbox may read), starts `corral serve` on $S with its
# state there, its pid in dpid, and waits for its socket; at exit the
# daemon and a background loop of the script's ($lpid) are stopped, by
# pid, and TMP removed.  cpu: the daemon's CPU so far, in clock ticks;
# ms_since T0: milliseconds since a `date +%s%N`.
dpid=""
lpid=""

cleanup() {
	[ -z "$lpid" ] || { kill "$lpid" 2>/dev/null; wait "$lpid" 2>/dev/null; } || true
	[ -z "$dpid" ] || { kill "$dpid" 2>/dev/null; wait "$dpid" 2>/dev/null; } || true
	rm -rf "$TMP"
}

start_daemon() {
	TMP=$(mktemp -d "${TMPDIR:-/tmp}/corral-$1.XXXXXX")
	chmod 755 "$TMP"
	trap cleanup EXIT
	S=$TMP/s
	"$CORRAL" serve --socket "$S" --state-dir "$TMP/state" > "$TMP/log" 2>&1 < /dev/null &
	dpid=$!
	for _ in $(seq 100); do [ -S "$S" ] && break; sleep 0.1; done
}

cpu() { awk '{ print $14 + $15 }' "/proc/$dpid/stat"; }
ms_since() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
