#!/bin/bash
# floods.sh - nothing a sandbox repeats grows the host's disk without bound:
# denied syscalls and denied names are summarised in the events file and in
# the daemon's audit log (first few whole, then counts), every log has a
# budget, the abort criteria still count every denial; and the sandbox's
# writable space is one budget of bytes and of files (/dev/shm included).
#
#   tests/floods.sh CORRAL HELPERS_DIR [TEST...]
#
# Runs as whoever calls it (root or not).  Every flood is bounded in time
# (seconds, inside the sandbox) and in count.
set -u
CORRAL=$(readlink -f "$1")
shift 2
HERE=$(cd "$(dirname "$0")" && pwd)
TEST_TMP=$(mktemp -d "${TMPDIR:-/tmp}/corral-floods.XXXXXX")
chmod 755 "$TEST_TMP"
trap 'rm -rf "$TEST_TMP"' EXIT
. "$HERE/lib.sh"
. "$HERE/daemon.sh"

# Denied mount() calls for SECONDS, as fast as one thread can but no more
# than RATE a second (ahead of it, a 10 ms nap); prints how many were made
# (each one reached the supervisor and was denied).  Unbounded, a flood
# made 25,000 in 3 s (-O2), 25 to 125 times the most a test here needs,
# and burnt a core for it; a loaded host below the rate floods as before.
FLOOD_PY='
import ctypes, sys, time
libc = ctypes.CDLL(None, use_errno=True)
rate = float(sys.argv[2])
start = time.monotonic()
n, end = 0, start + float(sys.argv[1])
while time.monotonic() < end and n < 10000000:
    if n >= rate * (time.monotonic() - start):
        time.sleep(0.01)
        continue
    libc.mount(b"none", b"/tmp", b"tmpfs", 0, None)
    n += 1
print(n)
'

# N DNS questions for made-up names to the supervisor's responder, then
# three for each NAME given after N.
DNS_PY='
import random, socket, struct, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(2)
n, answered = int(sys.argv[1]), 0
names = ["r%d-%d.evil.test" % (i, random.randrange(1 << 30)) for i in range(n)]
names += [m for m in sys.argv[2:] for _ in range(3)]
for i, name in enumerate(names):
    q = struct.pack(">HHHHHH", i & 0xffff, 0x0100, 1, 0, 0, 0)
    q += b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0"
    s.sendto(q + struct.pack(">HH", 1, 1), ("127.0.0.1", 53))
    try:
        s.recv(512)
        answered += 1
    except socket.timeout:
        pass
print(answered)
'

policy() {	# policy JSON_BODY: $T/p.json
	printf '{%s}\n' "$1" > "$T/p.json"
	chmod 644 "$T/p.json"
}

frun() {	# frun ARGS...: corral run --json with $T/p.json and $T/events
	local rc=0
	timeout 120 "$CORRAL" run --json --policy "$T/p.json" --events "$T/events" \
		"$@" > "$T/out" 2> "$T/err" < /dev/null || rc=$?
	echo "$rc" > "$T/rc"
}

# counts FILE TYPE: "WHOLE COUNTED" - lines of TYPE, and the sum of the
# counts of its summaries (the true number is their sum).
counts() {
	/usr/bin/python3 - "$1" "$2" <<'EOF'
import json, sys
whole = counted = 0
for raw in open(sys.argv[1], "rb"):
    e = json.loads(raw)
    if e["type"] == sys.argv[2]:
        whole += 1
    elif e["type"] == sys.argv[2] + ".summary":
        counted += e["count"]
print(whole, counted)
EOF
}

size_of() { stat -c %s "$1"; }

verified() {	# verified FILE: the hash chain holds
	local out
	out=$("$CORRAL" audit verify "$1" 2>&1) || fail "audit verify $1: $out"
	expect_contains "verify" "$out" "ok,"
}

# false only when the run says its denials are plain EPERM; a run that
# failed goes on to fail the test
notify_here() {	# notify_here [RESULT]
	local v
	v=$(json layers.seccomp_notify < "${1:-$T/out}" 2>/dev/null) || return 0
	[ "$v" = true ]
}

t_denied_mount_flood_is_summarised() {
	printf '%s' "$FLOOD_PY" > "$T/flood.py"
	chmod 644 "$T/flood.py"
	policy '"events": {"budget": "256K", "verbatim": 10, "summary_interval": "1s"}'
	frun --ro "$T/flood.py:/opt/flood.py" -- /usr/bin/python3 /opt/flood.py 3 1000
	notify_here || { skip "no USER_NOTIF: denials are plain EPERM, not events"; return 77; }
	expect_eq "status" "$(json status < "$T/out")" exited
	made=$(json stdout < "$T/out")
	# far past the ten written whole; a loaded host makes fewer in its 3 s
	# (982 in a CI run beside other work), so not a figure of speed
	[ "$made" -gt 200 ] || fail "only $made mount() calls in 3 s"
	# a few lines: ten whole, about one summary a second, start and end
	size=$(size_of "$T/events")
	[ "$size" -lt $((64 * 1024)) ] || fail "$size bytes of events for $made denials"
	read -r whole counted < <(counts "$T/events" syscall.denied)
	expect_eq "written whole" "$whole" 10
	expect_eq "all counted" "$((whole + counted))" "$made"
	n=$(grep -c '"type":"syscall.denied.summary"' "$T/events")
	[ "$n" -ge 1 ] && [ "$n" -le 6 ] || fail "$n summaries in 3 s at one a second"
	expect_contains "summary" "$(grep -m1 syscall.denied.summary "$T/events")" \
		'"of":"syscall.denied","syscall":"mount","count":'
	verified "$T/events"
	expect_contains "show lists the counts" \
		"$("$CORRAL" audit show "$T/events" --type syscall.denied)" "syscall.denied.summary"
}

# Numbers above the filter's ceiling (ENOSYS) are one kind whatever the
# number: 200 made-up numbers used to fill the 128 kinds named one by one,
# and the mount, unshare and ptrace after them were in the log only as a
# count of "kinds beyond the first 128", their names and arguments lost.
UNNAMED_PY='
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
enosys = 0
for i in range(200):
    if libc.syscall(ctypes.c_long(1000 + i)) == -1 and ctypes.get_errno() == 38:
        enosys += 1
libc.mount(b"none", b"/tmp/probe-after-the-numbers", b"tmpfs", 0, None)
libc.unshare(0x10000000)
libc.ptrace(16, 1, None, None)
print(enosys)
'
t_unnamed_syscalls_leave_the_named_ones_named() {
	local ev
	printf '%s' "$UNNAMED_PY" > "$T/sc.py"
	chmod 644 "$T/sc.py"
	policy '"events": {"verbatim": 10}'
	frun --ro "$T/sc.py:/opt/sc.py" -- /usr/bin/python3 /opt/sc.py
	notify_here || { skip "no USER_NOTIF: denials are plain EPERM, not events"; return 77; }
	expect_eq "status" "$(json status < "$T/out")" exited
	expect_eq "every number answered ENOSYS" "$(json stdout < "$T/out")" 200
	ev=$(< "$T/events")
	expect_contains "mount named" "$ev" '"syscall":"mount","nr":'
	expect_contains "its target" "$ev" '"target":"/tmp/probe-after-the-numbers"'
	expect_contains "unshare named" "$ev" '"syscall":"unshare","nr":'
	expect_contains "ptrace named" "$ev" '"syscall":"ptrace","nr":'
	expect_not_contains "no kinds beyond the named" "$ev" '"other":true'
	read -r whole counted < <(counts "$T/events" syscall.denied)
	expect_eq "written whole: ten numbers and the three" "$whole" 13
	expect_eq "all counted" "$((whole + counted))" 203
	expect_contains "the numbers' summary" "$(grep syscall.denied.summary "$T/events")" \
		'"syscall":"syscall N","count":190,'
	verified "$T/events"
}

# Past the budget: one log.budget event, then counts only; still exact.
t_event_budget_reached() {
	printf '%s' "$FLOOD_PY" > "$T/flood.py"
	chmod 644 "$T/flood.py"
	policy '"events": {"budget": "16K", "verbatim": 1000000, "summary_interval": "0.5s"}'
	frun --ro "$T/flood.py:/opt/flood.py" -- /usr/bin/python3 /opt/flood.py 2 1000
	notify_here || { skip "no USER_NOTIF: denials are plain EPERM, not events"; return 77; }
	made=$(json stdout < "$T/out")
	expect_eq "one budget event" "$(grep -c '"type":"log.budget"' "$T/events")" 1
	expect_contains "says why" "$(grep log.budget "$T/events")" \
		"reached their budget of 16 KiB (events.budget)"
	size=$(size_of "$T/events")
	# the budget, an eighth more for summaries, a line past each, the end
	[ "$size" -lt $((16 * 1024 + 2048 + 4096)) ] || fail "$size bytes on a 16 KiB budget"
	read -r whole counted < <(counts "$T/events" syscall.denied)
	expect_eq "all counted" "$((whole + counted))" "$made"
	expect_contains "the run's end" "$(tail -2 "$T/events")" '"type":"exec.end"'
	verified "$T/events"
}

# The criterion counts every denial, written or not: it fires at 51.
t_abort_counts_summarised_denials() {
	printf '%s' "$FLOOD_PY" > "$T/flood.py"
	chmod 644 "$T/flood.py"
	policy '"abort": {"max_denied_syscalls": 50}, "events": {"verbatim": 5}'
	frun --ro "$T/flood.py:/opt/flood.py" -- /usr/bin/python3 /opt/flood.py 30 1000
	notify_here || { skip "no USER_NOTIF: denied syscalls are not counted"; return 77; }
	expect_eq "status" "$(json status < "$T/out")" halted
	expect_contains "reason" "$(json reason < "$T/out")" "51 syscalls denied (limit 50), the last mount"
	read -r whole counted < <(counts "$T/events" syscall.denied)
	expect_eq "written whole" "$whole" 5
	# what was counted is written before the abort, with the running total;
	# without a freezer a denial or two may come between the abort and the kill
	before=$(/usr/bin/python3 - "$T/events" <<'EOF'
import json, sys
total = None
for raw in open(sys.argv[1], "rb"):
    e = json.loads(raw)
    if e["type"] == "abort":
        break
    if e["type"] == "syscall.denied.summary":
        total = e["total"]
print(total)
EOF
)
	expect_eq "counted up to the abort" "$before" 51
	[ "$((whole + counted))" -ge 51 ] || fail "$((whole + counted)) denials in the log"
	a=$(grep '"type":"abort"' "$T/events")
	expect_contains "abort" "$a" '"criterion":"max_denied_syscalls"'
	verified "$T/events"
}

# Made-up names: 128 kinds named one by one, the rest one kind, "other",
# whose names are each written whole once while those lines take less
# than a quarter of the budget, then listed in its summaries (32 a
# summary) and counted.  1000 names under a 128K budget, past the quarter
# (32K, about 80 lines) and within the budget (3000 cost a quarter more
# CPU).  The bound was 128 + 10 lines whole, and the 140th name was
# nowhere in the log: t_name_after_made_up_ones_is_named.
t_dns_names_flood_is_bounded() {
	printf '%s' "$DNS_PY" > "$T/dns.py"
	chmod 644 "$T/dns.py"
	policy '"network": {"mode": "proxy", "allow": ["x.test"]}, "events": {"verbatim": 10, "budget": "128K"}'
	frun --ro "$T/dns.py:/opt/dns.py" -- /usr/bin/python3 /opt/dns.py 1000
	expect_eq "status" "$(json status < "$T/out")" exited
	expect_eq "all answered" "$(json stdout < "$T/out")" 1000
	read -r whole counted < <(counts "$T/events" egress.denied)
	# 128 kinds, then "other"'s lines to a quarter of the budget, each over
	# 300 bytes
	[ "$whole" -le $((128 + 128 * 1024 / 4 / 300 + 1)) ] || fail "$whole denials written whole"
	[ "$whole" -gt 128 ] || fail "only $whole denials written whole: none of \"other\""
	expect_eq "all counted" "$((whole + counted))" 1000
	expect_contains "the rest as one kind" "$(grep egress.denied.summary "$T/events")" '"other":true'
	read -r names distinct budget < <(/usr/bin/python3 -c '
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
hosts = [e["host"] for e in lines if e["type"] == "egress.denied"]
names = [n for e in lines if e["type"] == "egress.denied.summary" for n in e.get("names", [])]
print(max([len(e.get("names", [])) for e in lines] + [0]), int(len(set(hosts)) == len(hosts)),
      sum(e["type"] == "log.budget" for e in lines))' "$T/events")
	expect_eq "at most 32 new names a summary" "$names" 32
	expect_eq "each name written whole once" "$distinct" 1
	expect_eq "within the budget" "$budget" 0
	[ "$(size_of "$T/events")" -lt $((128 * 1024)) ] || fail "$(size_of "$T/events") bytes of events"
	verified "$T/events"
}

# 140 made-up names, then three lookups of the one that mattered: a line
# names it.  Past the 128 kinds a type names one by one, it was counted
# among "other" and named nowhere in the log (the result's denials and an
# abort's evidence named it).
t_name_after_made_up_ones_is_named() {
	printf '%s' "$DNS_PY" > "$T/dns.py"
	chmod 644 "$T/dns.py"
	policy '"network": {"mode": "proxy", "allow": ["x.test"]}, "events": {"verbatim": 10}'
	frun --ro "$T/dns.py:/opt/dns.py" -- /usr/bin/python3 /opt/dns.py 140 metadata.target.test
	expect_eq "status" "$(json status < "$T/out")" exited
	expect_eq "all answered" "$(json stdout < "$T/out")" 143
	expect_eq "named once" "$(grep -c '"type":"egress.denied",.*"host":"metadata.target.test"' "$T/events")" 1
	read -r whole counted < <(counts "$T/events" egress.denied)
	expect_eq "every name once" "$whole $counted" "141 2"
	verified "$T/events"
}

# A daemon's sandbox flooding denials: its share of STATE/audit.jsonl is
# bounded, the counts exact, the chain whole.
t_daemon_flood_keeps_audit_log_bounded() {
	trap stop_daemon EXIT
	start_daemon
	id=$(api POST /v1/sandboxes '{"idle_freeze_ms": 0, "policy": {"events":
		{"budget": "32K", "verbatim": 10, "summary_interval": "1s"}}}' | json id)
	expect_eq "create" "$(cat "$T/status")" 201
	body=$(/usr/bin/python3 -c 'import json, sys
print(json.dumps({"tool_call_id": "flood-1",
                  "argv": ["/usr/bin/python3", "-c", sys.argv[1], "4", "1000"]}))' "$FLOOD_PY")
	api POST "/v1/sandboxes/$id/exec" "$body" > "$T/r1"
	expect_eq "exec" "$(cat "$T/status")" 200
	notify_here "$T/r1" ||
		{ stop_daemon; skip "no USER_NOTIF: denials are plain EPERM, not events"; return 77; }
	made=$(json stdout < "$T/r1")
	[ "$made" -gt 1000 ] || fail "only $made mount() calls"
	api DELETE "/v1/sandboxes/$id" > /dev/null
	stop_daemon
	log=$T/state/audit.jsonl
	size=$(size_of "$log")
	[ "$size" -lt $((32 * 1024 + 4096 + 8192)) ] || fail "audit.jsonl is $size bytes after $made denials"
	grep "\"sandbox\":\"$id\"" "$log" > "$T/mine"
	read -r whole counted < <(counts "$T/mine" syscall.denied)
	expect_eq "written whole" "$whole" 10
	expect_eq "all counted" "$((whole + counted))" "$made"
	verified "$log"
}

# A flood's denials in the result: every one counted in the reason, the
# first ones listed, and how many were not (denials_dropped); from corral
# run (1000 kept) and a daemon's call (100 kept).  The reason said "1000
# denials" after 1500, and nothing said the list was cut.  1200 past the
# run's 1000 show the same (was 1500: a quarter of the flood for nothing),
# and jget reads the result where two Pythons started.
COUNT_PY='
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
for i in range(int(sys.argv[1])):
    libc.mount(b"none", b"/tmp", b"tmpfs", 0, None)
'
t_result_counts_every_denial() {
	policy '"events": {"budget": "64K"}'
	frun -- /usr/bin/python3 -c "$COUNT_PY" 1200
	notify_here || { skip "no USER_NOTIF: denials are plain EPERM, not events"; return 77; }
	expect_contains "run: all counted" "$(json reason < "$T/out")" "denied: syscall mount; 1200 denials"
	expect_eq "run: the first kept" "$(pyjq 'len(v["denials"])' "$T/out") $(json denials_dropped < "$T/out")" "1000 200"
	trap stop_daemon EXIT
	start_daemon
	id=$(api POST /v1/sandboxes '{"idle_freeze_ms": 0}' | json id)
	expect_eq "create" "$(cat "$T/status")" 201
	body=$(/usr/bin/python3 -c 'import json, sys
print(json.dumps({"tool_call_id": "count-1",
                  "argv": ["/usr/bin/python3", "-c", sys.argv[1], "150"]}))' "$COUNT_PY")
	api POST "/v1/sandboxes/$id/exec" "$body" > "$T/r1"
	expect_eq "exec" "$(cat "$T/status")" 200
	expect_contains "daemon: all counted" "$(json reason < "$T/r1")" "denied: syscall mount; 150 denials"
	expect_eq "daemon: the first kept" "$(pyjq 'len(v["denials"])' "$T/r1") $(json denials_dropped < "$T/r1")" "100 50"
	api DELETE "/v1/sandboxes/$id" > /dev/null
	stop_daemon
}

# A daemon's sandbox that floods denials costs the daemon its calls'
# results, not a copy of its first 1000 denials for as long as it lives
# (about 3 MB a sandbox, read by no one, before).  Measured against as
# many sandboxes whose call is denied nothing (what a sandbox costs anyway,
# more under ASan).  A thousand denials a call: the copy was of the first
# 1000, so more cost CPU and showed nothing more (with the copy back, 1000
# and 1500 both measured 12264 KiB over, -O2).  A flood's bound on what
# the daemon holds, which no uid changes (bound_test): make check's ASan
# run of it was 5 s of CPU, and the denial path it floods runs under ASan
# in t_result_counts_every_denial and t_daemon_flood_keeps_audit_log_bounded.
flood_boxes() {	# flood_boxes N COUNT: N sandboxes, each a call of COUNT denied mounts
	local k id body
	body=$(/usr/bin/python3 -c 'import json, sys
print(json.dumps({"argv": ["/usr/bin/python3", "-c", sys.argv[1], sys.argv[2]]}))' '
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
for i in range(int(sys.argv[1])):
    libc.mount(b"none", b"/tmp/" + b"x" * 200, b"tmpfs", 0, None)
' "$2")
	for k in $(seq 1 "$1"); do
		id=$(api POST /v1/sandboxes '{"idle_freeze_ms": 0}' | json id)
		expect_eq "create $k" "$(cat "$T/status")" 201 || return 1
		echo "$id" >> "$T/ids"
		api POST "/v1/sandboxes/$id/exec" "$body" > "$T/r$k"
		expect_contains "call $k" "$(json reason < "$T/r$k")" "exited with status 0" ||
			return 1
	done
}
rss() { awk '/^VmRSS/ {print $2}' "/proc/$DPID/status"; }
t_daemon_keeps_no_copy_of_denials() {
	bound_test
	local r0 r1 r2 id
	trap stop_daemon EXIT
	# under ASan what is freed waits in a quarantine before it is reused:
	# the bound is about what is live, so a small one here
	ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=1 start_daemon
	: > "$T/ids"
	# a first flood: what the allocator takes once (ASan's, megabytes)
	flood_boxes 1 1000 || return 1
	r0=$(rss)
	flood_boxes 4 0 || return 1
	r1=$(rss)
	flood_boxes 4 1000 || return 1
	r2=$(rss)
	expect_contains "flooded" "$(json reason < "$T/r4")" "1000 denials"
	[ $(( (r2 - r1) - (r1 - r0) )) -lt 4096 ] ||
		fail "4 sandboxes' 4000 denials cost the daemon $(( (r2 - r1) - (r1 - r0) )) KiB more than 4 without"
	while read -r id; do api DELETE "/v1/sandboxes/$id" > /dev/null; done < "$T/ids"
	stop_daemon
}

# /dev/shm and /tmp are one tmpfs: together no more than --disk.
t_shm_and_tmp_share_the_disk() {
	policy '"limits": {"disk": "16M"}'
	frun -- /bin/sh -c 'dd if=/dev/zero of=/dev/shm/a bs=1M count=12 2>/dev/null; echo shm=$?
		dd if=/dev/zero of=/tmp/b bs=1M count=12 2>/dev/null; echo tmp=$?
		du -sk /dev/shm/a /tmp/b | awk "{s += \$1} END {print \"kib=\" s}"'
	out=$(json stdout < "$T/out")
	expect_contains "shm written" "$out" "shm=0"
	expect_contains "tmp full" "$out" "tmp=1"
	kib=$(echo "$out" | sed -n 's/^kib=//p')
	[ "$kib" -le 16384 ] || fail "$kib KiB written with --disk 16M"
	expect_contains "said" "$(json reason < "$T/out")" "disk limit 16 MiB reached"
	expect_contains "event" "$(cat "$T/events")" '"type":"limit.hit","limit":"disk"'
}

# Files cost host kernel memory with or without data: --disk bounds them.
t_disk_bounds_files() {
	policy '"limits": {"disk": "1M", "memory": "64M"}'
	frun -- /usr/bin/python3 -c '
import errno, os
n = 0
try:
    while n < 300000:
        os.close(os.open("/tmp/f%d" % n, os.O_CREAT | os.O_WRONLY, 0o600))
        n += 1
    print("made", n)
except OSError as e:
    print("made", n, errno.errorcode[e.errno])'
	out=$(json stdout < "$T/out")
	expect_contains "refused" "$out" "ENOSPC"
	n=$(echo "$out" | awk '{print $2}')
	[ "$n" -lt 10000 ] || fail "$n files on a 1 MiB disk"
	expect_contains "said" "$(json reason < "$T/out")" "disk limit 1 MiB reached: no room or no file left"
}

run_tests "$@"
echo "floods ($(id -un 2>/dev/null || id -u)): $PASS passed, $FAIL failed, $SKIP skipped"
[ -n "$FAILED_NAMES" ] && echo "failed:$FAILED_NAMES"
[ "$FAIL" -eq 0 ]
