#!/bin/bash
# seccomp_jit.sh CORRAL PROCS: PROCS processes in one sandbox each stack as
# much seccomp filter of divisions as the kernel lets them (bench/
# seccomp_jit.c fill), and the host's BPF JIT packs (2 MiB each, in
# /proc/vmallocinfo: root) are counted before and while they are held: the
# pool one sandbox of PROCS processes takes (SECURITY.md's seccomp row).
# Keep PROCS small: 20 took 9 MiB of the 504 MiB pool before corral's
# chain was filled.  Other loads on the host meanwhile blur it by a pack.
set -eu
CORRAL=$(readlink -f "$1")
PROCS=$2
. "$(dirname "$0")/tool.sh"
build_tool seccomp_jit

packs() { grep -c bpf_prog_pack_alloc /proc/vmallocinfo; }

p0=$(packs)
"$CORRAL" run --ro "$TMP:/opt/jit" -- /opt/jit/seccomp_jit fill "$PROCS" 10 \
	> "$TMP/out" 2>&1 < /dev/null &
pid=$!
for _ in $(seq 600); do	# at most 60 s
	grep -q '^held' "$TMP/out" && break
	kill -0 "$pid" 2>/dev/null || break
	sleep 0.1
done
p1=$(packs)
wait "$pid" || true
pid=""
echo "$PROCS processes: $(tr '\n' ' ' < "$TMP/out")"
echo "  the host's BPF JIT packs: $p0 before, $p1 while held: $(( (p1 - p0) * 2 )) MiB"
