#!/bin/bash
# kmem_hold.sh CORRAL MODE COUNT [MEMORY]: run bench/kmem_hold.c's MODE in a
# sandbox (--memory MEMORY, 64M by default) and print what the host lost
# while it was held (/proc/meminfo: MemAvailable, SUnreclaim; TCP's pages
# from /proc/net/sockstat) beside what the sandbox's memory group was
# charged: the numbers of SECURITY.md's Known limits ("Kernel memory a
# sandbox holds ...").  The host's own activity moves MemAvailable by tens
# of MB: compare against a run with COUNT 0.  Needs cc.
set -eu
CORRAL=$(readlink -f "$1")
MODE=$2
COUNT=$3
MEM=${4:-64M}
. "$(dirname "$0")/tool.sh"
build_tool kmem_hold

meminfo() { awk -v k="$1:" '$1 == k { print $2 }' /proc/meminfo; }
tcp_pages() { awk '$1 == "TCP:" { for (i = 2; i < NF; i++) if ($i == "mem") print $(i + 1) }' /proc/net/sockstat; }

avail0=$(meminfo MemAvailable); sunr0=$(meminfo SUnreclaim); tcp0=$(tcp_pages)
"$CORRAL" run --memory "$MEM" --ro "$TMP:/opt/kmem" -- \
	/opt/kmem/kmem_hold "$MODE" "$COUNT" 5 > "$TMP/out" 2>&1 < /dev/null &
pid=$!
for _ in $(seq 1200); do	# at most 120 s: kmem_hold makes for 60 s at most
	grep -q '^held' "$TMP/out" && break
	kill -0 "$pid" 2>/dev/null || break
	sleep 0.1
done
avail1=$(meminfo MemAvailable); sunr1=$(meminfo SUnreclaim); tcp1=$(tcp_pages)
group=""
for f in $(find /sys/fs/cgroup -maxdepth 5 -type d -name "corral-$pid-*" 2>/dev/null); do
	for u in memory.usage_in_bytes memory.current; do
		[ -r "$f/$u" ] && group="$(( $(cat "$f/$u") / 1024 )) KiB" && break 2
	done
done
wait "$pid" || true
pid=""
echo "$MODE $COUNT under --memory $MEM: $(tr '\n' ' ' < "$TMP/out")"
echo "  the sandbox's group: ${group:-unknown}"
printf '  the host: MemAvailable %+d MiB, SUnreclaim %+d MiB, TCP %+d MiB\n' \
	$(( (avail1 - avail0) / 1024 )) $(( (sunr1 - sunr0) / 1024 )) $(( (tcp1 - tcp0) * 4 / 1024 ))
