#!/bin/bash
# identity.sh - ids inside a sandbox behave as on a normal host.
#
#   tests/identity.sh CORRAL [HELPERS_DIR] [TEST...]
#
# As root: corral's id range is mapped (chown to root and setuid to nobody
# answer EPERM, not EINVAL), the workspace and binds are idmapped (the
# agent owns them, writes land as their owner), host files owned by a
# range id stay out of reach; then, as uid 65534, the same with an
# /etc/subuid entry the test adds (and restores byte for byte, also on
# failure) and without one.  As an unprivileged caller: what that caller
# gets, per its /etc/subuid entry.  Only local files; no network.
set -u
CORRAL=$(readlink -f "$1")
shift
[ $# -gt 0 ] && [ -d "$1" ] && shift
TEST_TMP=$(mktemp -d "${TMPDIR:-/tmp}/corral-ids.XXXXXX")
chmod 755 "$TEST_TMP"
trap 'rm -rf "$TEST_TMP"' EXIT
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
ME=$(id -u)
PY=/usr/bin/python3
RANGE=1879048192	# CORRAL_IDS_BASE
AGENT=$((RANGE + 1000))
NOBODY=65534

# What a program learns of ids inside: one line "uid chown setreuid setpriv".
PROBE='import os, subprocess
def errno_of(f):
    try:
        f()
        return 0
    except OSError as e:
        return e.errno
open("f", "w").close()
sp = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "true"],
                    capture_output=True, text=True)
print(os.getuid(), errno_of(lambda: os.chown("f", 0, 0)),
      errno_of(lambda: os.setreuid(65534, 65534)),
      "EPERM" if "not permitted" in sp.stderr else "EINVAL" if "Invalid" in sp.stderr else sp.stderr.strip())'

# jr EXPR: a Python expression over the JSON result v in $T/out
jr() {
	$PY -c 'import json, sys
v = json.load(open(sys.argv[2]))
r = eval(sys.argv[1])
print(json.dumps(r) if isinstance(r, (dict, list, bool)) else r)' "$1" "$T/out"
}

# as WHO CMD...: run CMD as root (WHO=me) or as uid 65534 (WHO=nobody)
as() {
	local who=$1
	shift
	if [ "$who" = nobody ]; then
		setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups "$@"
	else
		"$@"
	fi
}

# crun WHO ARGS...: corral run --json as WHO, in $T (the result in $T/out)
crun() {
	local who=$1
	shift
	as "$who" timeout 60 "$STAGED" run --json "$@" > "$T/out" 2> "$T/err" < /dev/null || true
	[ -s "$T/out" ] || fail "no result: $(tail -3 "$T/err")"
}

# A copy of corral that uid 65534 can run, and a workspace it owns.
stage() {
	STAGED=$T/corral
	cp "$CORRAL" "$STAGED"
	chmod 755 "$STAGED"
	mkdir -p "$T/ws"
	echo hello > "$T/ws/f0"
	[ "$ME" != 0 ] || chown -R $NOBODY:$NOBODY "$T/ws"
}

# with_subid LINE CMD...: CMD with LINE added to /etc/subuid and /etc/subgid;
# both files are put back exactly (content, mode, times) whatever happens.
with_subid() {
	local line=$1 f rc=0
	shift
	for f in subuid subgid; do
		if [ -e "/etc/$f" ]; then cp -p "/etc/$f" "$T/$f.orig"; else : > "$T/$f.absent"; fi
	done
	restore_subid() {
		for f in subuid subgid; do
			if [ -e "$T/$f.absent" ]; then rm -f "/etc/$f"
			else cat "$T/$f.orig" > "/etc/$f" && touch -r "$T/$f.orig" "/etc/$f"; fi
		done
	}
	trap restore_subid EXIT
	for f in subuid subgid; do echo "$line" >> "/etc/$f"; done
	# the checks stop at their first failure, as a test's do
	set +e
	( set -e; "$@" )
	rc=$?
	set -e
	restore_subid
	trap - EXIT
	for f in subuid subgid; do
		[ -e "$T/$f.absent" ] || cmp -s "$T/$f.orig" "/etc/$f" || fail "/etc/$f not restored"
	done
	return $rc
}

# expect_ids MAPPING UID RANGE: the result names these host ids
expect_ids() {
	expect_eq "mapping" "$(jr 'v["layers"]["ids"]["mapping"]')" "$1"
	expect_eq "agent's host uid" "$(jr 'v["layers"]["ids"]["uid"]')" "$2"
	expect_eq "range" "$(jr 'v["layers"]["ids"]["range_uid"]')" "$3"
}

# mapped WHO: the probe inside a sandbox of WHO, ids mapped in full
probe_mapped() {
	crun "$1" --workspace "$T/ws" -- python3 -c "$PROBE"
	expect_eq "uid, chown to 0, setreuid 65534, setpriv" "$(jr 'v["stdout"].strip()')" "1000 1 1 EPERM"
}

# ---- as the caller ----------------------------------------------------------

t_ids_inside() {
	stage
	if [ "$ME" = 0 ]; then
		probe_mapped me
		expect_ids range $AGENT $RANGE
		expect_eq "count" "$(jr 'v["layers"]["ids"]["count"]')" 65536
		return 0
	fi
	crun me --workspace "$T/ws" -- python3 -c "$PROBE"
	if grep -q "^$(id -un):\|^$ME:" /etc/subuid 2>/dev/null; then
		expect_eq "probe" "$(jr 'v["stdout"].strip()')" "1000 1 1 EPERM"
		expect_eq "mapping" "$(jr 'v["layers"]["ids"]["mapping"]')" subuid
	else
		# one id: chown and setuid to others answer EINVAL, and the result says so
		expect_eq "probe" "$(jr 'v["stdout"].strip()')" "1000 22 22 EINVAL"
		expect_ids single "$ME" 0
		expect_contains "note" "$(jr 'v["layers"]["ids"]["note"]')" "/etc/subuid"
	fi
}

# /etc/passwd and /etc/group inside name only ids the map has.
t_passwd_matches_map() {
	stage
	crun me -- python3 -c '
import grp, pwd
m = [tuple(map(int, l.split())) for l in open("/proc/self/uid_map")]
g = [tuple(map(int, l.split())) for l in open("/proc/self/gid_map")]
inmap = lambda i, m: any(a <= i < a + n for a, _, n in m)
print(sorted(p.pw_uid for p in pwd.getpwall() if not inmap(p.pw_uid, m)),
      sorted(x.gr_gid for x in grp.getgrall() if not inmap(x.gr_gid, g)))'
	if [ "$ME" = 0 ]; then
		expect_eq "unmapped ids listed" "$(jr 'v["stdout"].strip()')" "[] []"
	else
		expect_eq "exit" "$(jr 'v["exit_code"]')" 0
	fi
}

# ---- as root: the workspace and binds --------------------------------------

# A root-owned workspace: the agent's all the way down, copy-on-write,
# and git inside does not stop on "dubious ownership".
t_workspace_root_owned() {
	[ "$ME" = 0 ] || { skip "only root can idmap"; return 77; }
	stage
	mkdir -p "$T/rw/deep/er"
	echo one > "$T/rw/deep/er/file"
	git -C "$T/rw" init -q
	git -C "$T/rw" -c user.email=t@t -c user.name=t add -A
	git -C "$T/rw" -c user.email=t@t -c user.name=t commit -qm one
	chown -R 0:0 "$T/rw"
	crun me --workspace "$T/rw" -- sh -c 'stat -c %u:%g deep/er/file .git/HEAD &&
		echo two >> deep/er/file && git status --porcelain 2>&1'
	expect_eq "exit" "$(jr 'v["exit_code"]')" 0
	expect_eq "owned by the agent, written, git clean of ownership" "$(jr 'v["stdout"]')" \
		"$(printf '1000:1000\n1000:1000\n M deep/er/file\n')"
	expect_ids range $AGENT $RANGE
	expect_eq "idmapped" "$(jr 'v["layers"]["ids"]["idmapped"]')" true
	expect_eq "host copy untouched" "$(cat "$T/rw/deep/er/file")" one
}

# A writable bind owned by another user: what the agent writes lands as
# that user; a host file there owned by the agent's own range id is not
# the agent's (the range is not the caller's users).
t_bind_other_owner() {
	[ "$ME" = 0 ] || { skip "only root can idmap"; return 77; }
	stage
	mkdir "$T/b"
	echo secret > "$T/b/range-owned"
	chmod 600 "$T/b/range-owned"
	chown $AGENT:$AGENT "$T/b/range-owned"
	chown 4321:4322 "$T/b"
	crun me --rw "$T/b:/mnt/b" -- sh -c 'stat -c %u /mnt/b; echo new > /mnt/b/new;
		cat /mnt/b/range-owned; echo x >> /mnt/b/range-owned; stat -c %u /mnt/b/range-owned'
	expect_eq "dir is the agent's, the range id's file is nobody's" \
		"$(jr 'v["stdout"]')" "$(printf '1000\n65534\n')"
	expect_contains "cannot read it" "$(jr 'v["stderr"]')" "Permission denied"
	expect_eq "lands as the owner" "$(stat -c %u:%g "$T/b/new")" 4321:4322
	expect_eq "range-owned file intact" "$(cat "$T/b/range-owned")" secret
}

# Binds of two owners in one run, and two of one: each maps its own
# owner (idmap.c makes one user namespace an owner, taken again for the
# next bind of that owner, never for another's).
t_binds_of_two_owners_each_mapped() {
	[ "$ME" = 0 ] || { skip "only root can idmap"; return 77; }
	stage
	mkdir "$T/b" "$T/c" "$T/d"
	chown 4321:4322 "$T/b" "$T/d"
	chown 4331:4332 "$T/c"
	crun me --rw "$T/b:/mnt/b" --rw "$T/c:/mnt/c" --rw "$T/d:/mnt/d" -- sh -c \
		'echo new > /mnt/b/new; echo new > /mnt/c/new; echo new > /mnt/d/new'
	expect_eq "the first owner's" "$(stat -c %u:%g "$T/b/new")" 4321:4322
	expect_eq "the second owner's" "$(stat -c %u:%g "$T/c/new")" 4331:4332
	expect_eq "the first owner's again" "$(stat -c %u:%g "$T/d/new")" 4321:4322
}

# A writable bind owned by root is never root's to the agent: it could
# leave a setuid-root file on the host.
t_bind_root_owned_not_mapped() {
	[ "$ME" = 0 ] || { skip "only root can idmap"; return 77; }
	stage
	mkdir "$T/rb"
	crun me --rw "$T/rb:/mnt/rb" -- sh -c 'stat -c %u /mnt/rb; touch /mnt/rb/x'
	expect_eq "root's dir is nobody's" "$(jr 'v["stdout"].strip()')" 65534
	expect_contains "and not writable" "$(jr 'v["stderr"]')" "Permission denied"
	[ ! -e "$T/rb/x" ] || fail "the agent wrote into root's directory"
}

# /etc/subuid is the host's: the sandbox sees neither it nor a way to it.
t_subuid_out_of_reach() {
	stage
	crun me -- sh -c 'echo "agent:1:4294967294" >> /etc/subuid; echo rc=$?; cat /oldroot/etc/subuid'
	expect_not_contains "no write" "$(jr 'v["stdout"]')" "rc=0"
	[ ! -e /etc/subuid ] || ! grep -q "^agent:1:" /etc/subuid || fail "the host's /etc/subuid was written"
}

# ---- as root: uid 65534 with and without an /etc/subuid entry -------------

SUBID=1342177280	# 0x50000000: no one's; not corral's range

nobody_with_entry() {
	probe_mapped nobody
	expect_ids subuid $NOBODY $SUBID
	crun nobody -- cat /proc/self/uid_map
	expect_eq "uid_map" "$(jr '" ".join(v["stdout"].split())')" \
		"0 $SUBID 1000 1000 $NOBODY 1 1001 $((SUBID + 1001)) 64535"
	# the caller's supplementary groups (adm here) stay outside: kept,
	# the kernel would still grant what they open (a docker.sock a bind
	# shows, to a member of docker)
	setpriv --reuid=$NOBODY --regid=$NOBODY --groups=4 timeout 60 "$STAGED" run --json \
		-- grep '^Groups:' /proc/self/status > "$T/out" 2> "$T/err" < /dev/null || true
	expect_eq "groups inside" "$(jr 'v["stdout"].split(":", 1)[1].split()')" "[]"
}

t_nobody_subuid_entry() {
	[ "$ME" = 0 ] || { skip "needs root to edit /etc/subuid"; return 77; }
	command -v newuidmap > /dev/null || { skip "no newuidmap (uidmap)"; return 77; }
	grep -q "^nobody:\|^$NOBODY:" /etc/subuid /etc/subgid 2>/dev/null &&
		{ skip "uid 65534 has an entry already"; return 77; }
	stage
	with_subid "nobody:$SUBID:65536" nobody_with_entry
	# and without one: today's single id, said so
	crun nobody --workspace "$T/ws" -- python3 -c "$PROBE"
	expect_eq "probe" "$(jr 'v["stdout"].strip()')" "1000 22 22 EINVAL"
	expect_ids single $NOBODY 0
}

# corral's range, once someone else's, is not used: one id, and why.
range_taken() {
	crun me -- python3 -c "$PROBE"
	expect_eq "probe" "$(jr 'v["stdout"].strip()')" "1000 22 22 EINVAL"
	expect_ids single $NOBODY 0
	expect_contains "why" "$(jr 'v["layers"]["ids"]["note"]')" "in use"
}

t_range_in_use_is_not_taken() {
	[ "$ME" = 0 ] || { skip "needs root to edit /etc/subuid"; return 77; }
	stage
	with_subid "corral-test-clash:$((RANGE + 5)):10" range_taken
}

# An image where the range is in use: a root import unpacks as 65534, as
# before, and says why; its sandbox runs (one id, 65534) on it.  Here, not
# in image.sh: it edits /etc/subuid, and this file runs alone.
range_taken_image() {
	"$STAGED" image import --state-dir "$T/state" "$T/bb" > "$T/imp" 2>&1 ||
		fail "import: $(cat "$T/imp")"
	expect_contains "said" "$(cat "$T/imp")" "unpacked as uid 65534: corral's id range is in use"
	expect_eq "the layers are 65534's" "$(find "$T/state/images/layers" -mindepth 2 \
		\( ! -uid $NOBODY -o ! -gid $NOBODY \) | head -3)" ""
	crun me --state-dir "$T/state" --image corral-test/busybox:1 -- 'id -u; cat /srv/app/hello.txt'
	expect_eq "runs" "$(jr 'v["stdout"]')" "$(printf '1000\nhello from the image\n')"
	expect_ids single $NOBODY 0
	expect_eq "not migrated" "$(find "$T/state/images/layers" -mindepth 2 \
		\( ! -uid $NOBODY -o ! -gid $NOBODY \) | head -3)" ""
}

t_range_in_use_image_unpacks_as_nobody() {
	[ "$ME" = 0 ] || { skip "needs root to edit /etc/subuid"; return 77; }
	stage
	$PY "$HERE/image_fixtures.py" busybox-oci "$T/bb" > /dev/null || fail "fixture"
	with_subid "corral-test-clash:$((AGENT + 5)):10" range_taken_image
}

START=$(date +%s)
run_tests "$@"
echo "identity ($(id -un 2>/dev/null || id -u)): $PASS passed, $FAIL failed, $SKIP skipped in $(( $(date +%s) - START )) s"
[ -n "$FAILED_NAMES" ] && echo "failed:$FAILED_NAMES"
[ "$FAIL" -eq 0 ]
