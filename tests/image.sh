#!/bin/bash
# image.sh - the image store: import (OCI layout, oci-archive, docker save),
# ls, inspect, rm, dedupe, digests, and every hostile layer we know of.
#
#   tests/image.sh CORRAL [TEST...]
#
# Images are written offline by tests/image_fixtures.py (python3 tarfile +
# hashlib, busybox-static for a real tree); each test has its own store in
# its scratch directory ($T/state/images).
set -u
CORRAL=$(readlink -f "$1")
shift
HERE=$(cd "$(dirname "$0")" && pwd)
FIX=$HERE/image_fixtures.py
TEST_TMP=$(mktemp -d "${TMPDIR:-/tmp}/corral-image.XXXXXX")
chmod 755 "$TEST_TMP"
trap 'chmod -R u+rwX "$TEST_TMP" 2>/dev/null; rm -rf "$TEST_TMP"' EXIT
. "$HERE/lib.sh"
ME=$(id -u)
# the static attack helper: beside a staged corral (check.sh) or in the build
HELPERS=${CORRAL_HELPERS:-$(dirname "$CORRAL")/helpers}
[ -x "$HELPERS/attack" ] || HELPERS=$(dirname "$CORRAL")/tests/helpers


# say_out_err: $T/out then $T/err, as cat of them printed them (read -d ''
# takes a whole file, its newlines too), without cat's fork and exec at
# each of some 150 img and crun calls a lane
say_out_err() {
	local o="" e=""
	IFS= read -r -d '' o < "$T/out" || true
	IFS= read -r -d '' e < "$T/err" || true
	printf '%s%s' "$o" "$e"
}

# img ARGS...: corral image ARGS on this test's store; out in $T/out,
# stderr in $T/err, exit status in $T/rc.
img() {
	local rc=0 verb=$1
	shift
	timeout 120 "$CORRAL" image "$verb" --state-dir "$T/state" "$@" > "$T/out" 2> "$T/err" \
		< /dev/null || rc=$?
	echo "$rc" > "$T/rc"
	say_out_err
}
# (img and crun write it before any test reads it: no cat needed)
rc() { echo "$(< "$T/rc")"; }
# fixture KIND NAME: KIND's image at $T/NAME.  The busybox ones are the
# same bytes whenever they are made (fixed times, gzip's without a name or
# time; diffed): made once a run and copied, as gzip -9 of busybox was
# 0.4 s of CPU each of 27 times a lane.  The others are made each time
# (some read the test's environment).
fixture() {
	local cache=$TEST_TMP/fixtures/$1
	case $1 in
	busybox-oci|busybox-docker|busybox-user|busybox-rootuser|busybox-zstd|busybox-archive)
		[ -e "$cache" ] || {
			mkdir -p "$TEST_TMP/fixtures" && rm -rf "$cache.new" &&
			/usr/bin/python3 "$FIX" "$1" "$cache.new" && mv "$cache.new" "$cache"
		} || { fail "fixture $1"; return 1; }
		cp -a "$cache" "$T/$2" || fail "fixture $1: copy"
		;;
	*)
		/usr/bin/python3 "$FIX" "$1" "$T/$2" || fail "fixture $1"
		;;
	esac
}
store() { echo "$T/state/images"; }
nlayers() { find "$(store)/layers" -mindepth 1 -maxdepth 1 | wc -l; }
nblobs() { find "$(store)/blobs/sha256" -type f | wc -l; }
layer_of() {	# layer_of REF N: the unpacked root of layer N
	img inspect "$1" > /dev/null
	json "layers.$2.path" < "$T/out"
}

# refused KIND MESSAGE [OPTIONS]: the import fails, says why, leaves nothing
refused() {
	local kind=$1 msg=$2
	shift 2
	fixture "$kind" img
	out=$(img import "$@" "$T/img")
	expect_eq "$kind: exit" "$(rc)" 1
	expect_contains "$kind: why" "$out" "$msg"
	img ls > /dev/null
	expect_eq "$kind: no image" "$(wc -l < "$T/out")" 1
	expect_eq "$kind: no layer left" "$(nlayers)" 0
	expect_eq "$kind: no blob left" "$(nblobs)" 0
	expect_eq "$kind: tmp empty" "$(ls -A "$(store)/tmp")" ""
}

t_help() {
	"$CORRAL" image --help > "$T/h" || fail "--help exit"
	for w in "import FILE|DIR" "docker save" "--max-size" "--state-dir" "Exit status"; do
		expect_contains "help" "$(< "$T/h")" "$w"
	done
	rc=0
	"$CORRAL" image frob > /dev/null 2>&1 || rc=$?
	expect_eq "unknown verb" "$rc" 2
	rc=0
	"$CORRAL" image import --state-dir "$T/state" > /dev/null 2>&1 || rc=$?
	expect_eq "import without a file" "$rc" 2
	"$CORRAL" --help | grep -q "image import|ls|rm|inspect" || fail "not in corral --help"
}

# An option image does not take is named by image, with where to look:
# getopt's own said "ls: unrecognized option", as if of ls(1).
t_usage_names_the_option() {
	local rc
	rc=0; out=$("$CORRAL" image ls --bogus 2>&1) || rc=$?
	expect_eq "ls --bogus: exit" "$rc" 2
	expect_eq "ls --bogus: said" "$out" 'corral: image: unknown option "--bogus"; see `corral image --help`'
	rc=0; out=$("$CORRAL" image import --name 2>&1) || rc=$?
	expect_eq "import --name: exit" "$rc" 2
	expect_contains "import --name: said" "$out" 'option "--name" needs a value'
}

# A store that cannot be made is named, with the way around it: as a
# service user (HOME=/nonexistent) import, ls and run --image said
# "mkdir /nonexistent: Permission denied" alone, with an exit status
# image --help did not list.
t_store_not_made_is_named() {
	local rc
	rc=0; out=$("$CORRAL" image ls --state-dir /dev/null/state 2>&1) || rc=$?
	expect_eq "ls: exit" "$rc" 125
	expect_eq "ls: said" "$out" "corral: cannot make the image store /dev/null/state/images (--state-dir DIR keeps it in DIR/images): mkdir /dev/null/state: Not a directory"
	rc=0; out=$(timeout 60 "$CORRAL" run --state-dir /dev/null/state --image busybox -- /bin/true 2>&1) || rc=$?
	expect_eq "run --image: exit" "$rc" 125
	expect_contains "run --image: said" "$out" "cannot make the image store /dev/null/state/images"
	expect_contains "help" "$("$CORRAL" image --help)" "125 the store cannot be made or
opened"
}

t_import_oci_layout() {
	fixture busybox-oci bb
	out=$(img import "$T/bb")
	expect_eq "exit" "$(rc)" 0
	expect_contains "named" "$out" "named docker.io/corral-test/busybox:1"
	expect_contains "counts" "$out" "layers: 2 unpacked, 0 already in the store; blobs: 4 new"
	out=$(img ls)
	expect_contains "ls" "$out" "docker.io/corral-test/busybox:1"
	img inspect corral-test/busybox:1 > /dev/null
	expect_eq "inspect exit" "$(rc)" 0
	expect_eq "env" "$(json config.env < "$T/out")" '["PATH=/bin", "GREETING=hello"]'
	expect_eq "workdir" "$(json config.working_dir < "$T/out")" /srv/app
	expect_eq "user" "$(json config.user < "$T/out")" 1000:1000
	expect_eq "entrypoint" "$(json config.entrypoint < "$T/out")" '["/bin/sh", "-c"]'
	expect_eq "cmd" "$(json config.cmd < "$T/out")" '["cat hello.txt"]'
	expect_eq "layers" "$(json layers < "$T/out" | grep -o diff_id | wc -l)" 2
	d=$(json digest < "$T/out")
	# the same image by digest, by a prefix, by its full name
	for ref in "$d" "${d:7:12}" docker.io/corral-test/busybox:1 "corral-test/busybox@$d"; do
		img inspect "$ref" > /dev/null
		expect_eq "inspect $ref" "$(json digest < "$T/out")" "$d"
	done
	expect_eq "store mode" "$(stat -c %a "$(store)")" 700
	"$CORRAL" image ls --json --state-dir "$T/state" | json 0.names.0 > "$T/j"
	expect_eq "ls --json" "$(< "$T/j")" docker.io/corral-test/busybox:1
}

t_import_oci_archive() {
	fixture busybox-archive bbarch.tar
	out=$(img import "$T/bbarch.tar")
	expect_eq "exit" "$(rc)" 0
	# an OCI ref.name that is a bare tag names the file's base name
	expect_contains "named" "$out" "named localhost/bbarch:latest"
	img inspect localhost/bbarch > /dev/null
	expect_eq "inspect" "$(rc)" 0
}

t_import_docker_save() {
	fixture busybox-docker saved.tar
	out=$(img import "$T/saved.tar")
	expect_eq "exit" "$(rc)" 0
	expect_contains "tag 1" "$out" "named docker.io/library/busybox-saved:1"
	expect_contains "tag 2" "$out" "named docker.io/library/busybox-saved:2"
	# with or without the docker.io/ and library/ prefixes
	for ref in busybox-saved:1 docker.io/busybox-saved:2 docker.io/library/busybox-saved:1; do
		img inspect "$ref" > /dev/null
		expect_eq "inspect $ref" "$(rc)" 0
	done
	expect_eq "cmd" "$(json config.cmd < "$T/out")" '["cat hello.txt"]'
	# a layer the archive held as a symlink to another is read through it
	l0=$(layer_of busybox-saved:1 0)
	[ -x "$l0/bin/busybox" ] || fail "busybox missing from layer 0"
}

# umoci (Debian's) writes "/" for the layer's root and a bare tag
t_import_umoci() {
	command -v umoci > /dev/null || skip "no umoci"
	mkdir -p "$T/rootfs/bin"
	cp /bin/busybox "$T/rootfs/bin/"
	ln -s busybox "$T/rootfs/bin/sh"
	(cd "$T" && umoci init --layout um && umoci new --image um:latest &&
	 umoci insert --rootless --image um:latest rootfs / &&
	 umoci config --image um:latest --config.cmd=/bin/sh \
		--config.workingdir=/tmp --config.env=A=b) > "$T/u" 2>&1 ||
		fail "umoci: $(< "$T/u")"
	out=$(img import "$T/um")
	expect_eq "exit" "$(rc)" 0
	expect_not_contains "no note for the root" "$out" "absolute"
	img inspect localhost/um > /dev/null
	expect_eq "inspect" "$(rc)" 0
	expect_eq "cmd" "$(json config.cmd < "$T/out")" '["/bin/sh"]'
	expect_eq "workdir" "$(json config.working_dir < "$T/out")" /tmp
	l0=$(json layers.0.path < "$T/out")
	[ -x "$l0/bin/busybox" ] || fail "no busybox in the layer"
}

t_import_not_an_archive() {
	head -c 4096 /dev/urandom > "$T/junk.tar"
	out=$(img import "$T/junk.tar")
	expect_eq "exit" "$(rc)" 1
	expect_contains "why" "$out" "not a tar archive"
	mkdir "$T/empty"
	out=$(img import "$T/empty")
	expect_eq "exit dir" "$(rc)" 1
	expect_contains "why dir" "$out" "neither an OCI image layout (index.json) nor a docker save archive"
	expect_eq "tmp empty" "$(ls -A "$(store)/tmp")" ""
}

t_import_fifo_refused() {
	# the archive given is a FIFO: refused, not waited on with the store held
	mkfifo "$T/img.tar"
	out=$(img import "$T/img.tar")
	expect_eq "exit" "$(rc)" 1
	expect_contains "why" "$out" "is neither a directory nor a file"
}

t_import_zstd() {
	fixture busybox-zstd z
	img import "$T/z" > /dev/null
	expect_eq "exit" "$(rc)" 0
	l0=$(layer_of corral-test/zstd:1 0)
	expect_eq "content" "$(cat "$l0/srv/app/hello.txt")" "hello from the image"
}

t_reimport_dedupes() {
	fixture busybox-oci bb
	fixture busybox-docker saved.tar
	img import "$T/bb" > /dev/null
	blobs=$(nblobs)
	out=$(img import "$T/bb")
	expect_eq "exit" "$(rc)" 0
	expect_contains "again" "$out" "layers: 0 unpacked, 2 already in the store; blobs: 0 new, 4 already"
	expect_eq "blobs" "$(nblobs)" "$blobs"
	# the same layers in another format are the same layers
	out=$(img import "$T/saved.tar")
	expect_contains "docker" "$out" "layers: 0 unpacked, 2 already in the store"
	expect_eq "layers" "$(nlayers)" 2
}

# ls, inspect and rm only read: before the first import they say there
# are no images and make nothing (`image ls` made the store, its lock and
# four directories, under the caller's home when no --state-dir is
# given).  An option after an operand is an option: "+" read `inspect
# NAME --state-dir DIR` as three names, and `rm NAME --state-dir DIR`
# removed NAME from the default store, not DIR's.
t_reads_make_no_store() {
	out=$(img ls)
	expect_eq "ls: exit" "$(rc)" 0
	expect_contains "ls: said" "$(< "$T/err")" "corral: no images: no image store at $T/state/images yet"
	expect_contains "ls: the header" "$(< "$T/out")" "NAME"
	img ls --json > /dev/null
	expect_eq "ls --json: exit" "$(rc)" 0
	expect_eq "ls --json" "$(< "$T/out")" "[]"
	out=$(img inspect busybox)
	expect_eq "inspect: exit" "$(rc)" 1
	expect_contains "inspect: said" "$out" "image inspect busybox: no such image (no image store at $T/state/images)"
	out=$(img rm busybox)
	expect_eq "rm: exit" "$(rc)" 1
	[ -e "$T/state" ] && fail "a read made $(find "$T/state" | head -3)"
	if [ "$ME" != 0 ]; then
		rc=0; HOME=$T/home XDG_DATA_HOME='' "$CORRAL" image ls > /dev/null 2>&1 || rc=$?
		expect_eq "ls in HOME: exit" "$rc" 0
		[ -e "$T/home" ] && fail "ls in HOME made $(find "$T/home" | head -3)"
	fi
	fixture busybox-oci bb
	img import "$T/bb" > /dev/null
	rc=0; "$CORRAL" image inspect corral-test/busybox:1 --state-dir "$T/state" > "$T/out" 2> "$T/err" < /dev/null || rc=$?
	expect_eq "inspect NAME --state-dir: exit" "$rc" 0
	expect_eq "inspect NAME --state-dir: that store's" "$(json names.0 < "$T/out")" \
		docker.io/corral-test/busybox:1
}

t_rm() {
	fixture busybox-oci bb
	fixture busybox-docker saved.tar
	img import "$T/bb" > /dev/null
	img import "$T/saved.tar" > /dev/null
	# one of two names: the image stays
	img rm busybox-saved:1 > /dev/null
	expect_eq "rm name" "$(rc)" 0
	img inspect busybox-saved:2 > /dev/null
	expect_eq "other name kept" "$(rc)" 0
	out=$(img inspect busybox-saved:1)
	expect_eq "name gone" "$(rc)" 1
	expect_contains "why" "$out" "no image named docker.io/library/busybox-saved:1"
	# by digest: the image with all its names; the shared layers stay
	img inspect busybox-saved:2 > /dev/null
	d=$(json digest < "$T/out")
	img rm "$d" > /dev/null
	expect_eq "rm digest" "$(rc)" 0
	expect_eq "layers kept for the other image" "$(nlayers)" 2
	img rm corral-test/busybox:1 > /dev/null
	expect_eq "rm last" "$(rc)" 0
	expect_eq "layers collected" "$(nlayers)" 0
	expect_eq "blobs collected" "$(nblobs)" 0
	out=$(img rm corral-test/busybox:1)
	expect_eq "rm missing" "$(rc)" 1
}

# The unpacked layers stacked as overlay lower layers, as a run will: the
# whiteout hides a file, the opaque dir its lower contents, and the
# busybox in it runs.
t_overlay_form() {
	command -v unshare > /dev/null || skip "no unshare"
	unshare -Urm true 2> /dev/null || skip "no user namespaces"
	chroot=$(PATH=$PATH:/usr/sbin:/sbin command -v chroot) || skip "no chroot"
	fixture busybox-oci bb
	img import "$T/bb" > /dev/null
	l0=$(layer_of corral-test/busybox:1 0)
	l1=$(layer_of corral-test/busybox:1 1)
	mkdir "$T/m"
	unshare -Urm sh -c "mount -t overlay -o userxattr,lowerdir=$l1:$l0 none $T/m &&
		$chroot $T/m /bin/sh -c 'ls /srv; echo --; ls /srv/cache; echo --; cat /srv/app/hello.txt /etc/motd'" \
		> "$T/o" 2>&1 || fail "overlay: $(< "$T/o")"
	out=$(< "$T/o")
	expect_not_contains "whiteout" "$out" "old.txt"
	expect_not_contains "opaque" "$out" "stale"
	expect_contains "upper file" "$out" "fresh"
	expect_contains "lower file" "$out" "hello from the image"
	expect_contains "layer two" "$out" "layer two"
}

# As root the unpacking runs as the agent's host uid in corral's range
# (never a host account's: not 65534, nobody's): what it creates is owned
# so; unprivileged, by the caller.  The owners the tar named are kept beside.
t_unpack_least_privilege() {
	fixture busybox-oci bb
	img import "$T/bb" > /dev/null
	l0=$(layer_of corral-test/busybox:1 0)
	want=$ME
	[ "$ME" = 0 ] && want=1879049192
	expect_eq "tree owner" "$(stat -c %u "$l0/bin/busybox")" "$want"
	expect_eq "dir owner" "$(stat -c %u "$l0/etc")" "$want"
	expect_eq "owners kept" "$(cat "$(dirname "$l0")/owners")" "1000 1000 srv/app/hello.txt"
}

t_store_default_path() {
	[ "$ME" = 0 ] && skip "root's store is /var/lib/corral/images: not written by a test"
	# an import makes the store (ls only reads one: t_reads_make_no_store)
	fixture busybox-oci bb
	HOME=$T/home XDG_DATA_HOME= "$CORRAL" image import "$T/bb" > /dev/null || fail "import"
	[ -d "$T/home/.local/share/corral/images/blobs/sha256" ] || fail "not under HOME"
	HOME=$T/home XDG_DATA_HOME= "$CORRAL" image ls --json > "$T/j" || fail "ls"
	expect_eq "ls reads it" "$(json 0.names.0 < "$T/j")" docker.io/corral-test/busybox:1
	HOME=$T/home XDG_DATA_HOME=$T/xdg "$CORRAL" image import "$T/bb" > /dev/null || fail "import xdg"
	[ -d "$T/xdg/corral/images/layers" ] || fail "not under XDG_DATA_HOME"
}

t_digest_mismatch_refused() {
	refused tampered "digest mismatch"
}

t_diff_id_mismatch_refused() {
	refused bad-diff-id "diff-id"
}

t_hostile_absolute_path() {
	# taken relative to the layer (as docker and containerd do), reported
	fixture hostile-absolute img
	out=$(img import "$T/img")
	expect_eq "exit" "$(rc)" 0
	expect_contains "reported" "$out" "1 absolute name(s) taken relative to the layer, e.g. /etc/corral-evil"
	[ ! -e /etc/corral-evil ] || fail "written on the host"
	l0=$(layer_of corral-test/hostile-absolute:1 0)
	expect_eq "in the layer" "$(cat "$l0/etc/corral-evil")" x
}

t_hostile_dotdot() {
	refused hostile-dotdot '".." in the name "a/../../corral-evil"'
}

t_hostile_symlink_escape() {
	mkdir "$T/target"
	CORRAL_TARGET=$T/target refused hostile-symlink-escape \
		"esc is a symlink (nothing is written through one)"
	expect_eq "target untouched" "$(ls -A "$T/target")" ""
}

t_hostile_symlink_kept() {
	fixture hostile-symlink-kept img
	img import "$T/img" > /dev/null
	expect_eq "exit" "$(rc)" 0
	l0=$(layer_of corral-test/hostile-symlink-kept:1 0)
	expect_eq "relative" "$(readlink "$l0/up")" ../../../../../etc
	expect_eq "absolute" "$(readlink "$l0/abs")" /etc/passwd
}

t_hostile_hardlink_escape() {
	refused hostile-hardlink-escape '".." in the name "../../../../etc/passwd"'
}

t_hostile_hardlink_through_symlink() {
	refused hostile-hardlink-through-symlink "s is a symlink"
}

t_hostile_devices_dropped() {
	fixture hostile-devices img
	out=$(img import "$T/img")
	expect_eq "exit" "$(rc)" 0
	expect_contains "reported" "$out" "3 device node(s) dropped, e.g. dev/null (char 1:3)"
	l0=$(layer_of corral-test/hostile-devices:1 0)
	expect_eq "dev/ empty" "$(ls -A "$l0/dev")" ""
	expect_eq "the rest kept" "$(cat "$l0/ok")" kept
}

t_hostile_setuid_stripped() {
	fixture hostile-setuid img
	out=$(img import "$T/img")
	expect_eq "exit" "$(rc)" 0
	expect_contains "setid" "$out" "2 setuid/setgid bit(s) stripped, e.g. suid (mode 4755)"
	expect_contains "caps" "$out" "1 file capabilities stripped, e.g. capped"
	l0=$(layer_of corral-test/hostile-setuid:1 0)
	expect_eq "suid" "$(stat -c %a "$l0/suid")" 755
	expect_eq "sgid" "$(stat -c %a "$l0/sgid")" 755
	expect_eq "setgid dir kept" "$(stat -c %a "$l0/shared")" 2775
	/usr/bin/python3 -c 'import os,sys; sys.exit("security.capability" in os.listxattr(sys.argv[1]))' \
		"$l0/capped" || fail "capability kept"
}

t_hostile_sparse_file() {
	refused hostile-sparse "huge declares 1 TiB (sparse or not), over the import's budget of 16 GiB"
}

t_hostile_sparse_archive_file() {
	# an archive's file counts at its declared size, holes and all: it is
	# copied whole into the store
	refused sparse-archive "holds more than 1 MiB (--max-size): big/layer.tar declares 67108864 bytes" \
		--max-size 1M
}

t_hostile_link_body_archive() {
	# a hard link's body in the archive counts too: it is inflated to be
	# skipped (64 MiB of gzip'd zeros held the import for minutes)
	refused link-body-archive "holds more than 1 MiB (--max-size): the body of link declares 1073741824 bytes" \
		--max-size 1M
}

# More layers than a sandbox can stack (overlay's options, one page) are
# refused at the config, before any is copied: 50,000 fitted in an 8 MiB
# manifest, each copied into the store in turn.
t_hostile_too_many_layers() {
	refused too-many-layers "201 layers, more than the 200 a sandbox can stack"
}

# A config whose diff-ids do not match its layers (the config's list was
# freed twice on this refusal, as on the one above: ASan's build)
t_hostile_short_diff_ids() {
	refused short-diff-ids "lists 1 layers' diff-ids for 2 layers"
}

# A blob the manifest lists again is copied once: each copy was written
# and fsync'd whole, under the store's lock, as often as it was listed.
t_hostile_repeated_layer() {
	command -v strace > /dev/null || skip "no strace to count the copies with"
	fixture repeated-layer img
	# LeakSanitizer cannot run under ptrace
	ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" strace -f -qq -e trace=fsync -o "$T/strace" timeout 120 "$CORRAL" image import \
		--state-dir "$T/state" "$T/img" > "$T/out" 2> "$T/err" < /dev/null ||
		fail "import: $(< "$T/err")"
	expect_contains "counted" "$(< "$T/out")" \
		"layers: 1 unpacked, 149 already in the store; blobs: 3 new, 149 already"
	n=$(grep -c 'fsync(' "$T/strace")
	[ "$n" -lt 20 ] || fail "$n fsyncs: the layer's blob was copied as often as it was listed"
}

t_hostile_layout_fifo() {
	# a FIFO for a blob of a layout directory: refused, not waited on
	# (the import holds the store's lock, which every run with an image takes)
	fixture busybox-oci img
	blob=$(ls -S "$T/img/blobs/sha256" | head -1)
	rm "$T/img/blobs/sha256/$blob"
	mkfifo "$T/img/blobs/sha256/$blob"
	out=$(img import "$T/img")
	expect_eq "exit" "$(rc)" 1
	expect_contains "why" "$out" "blobs/sha256/$blob: not a regular file"
	img ls > /dev/null
	expect_eq "no image" "$(wc -l < "$T/out")" 1
}

t_hostile_huge_index() {
	# index.json is read whole (and jansson holds it several times over):
	# one past 8 MiB is refused before it is parsed
	fixture busybox-oci img
	python3 -c 'import json, sys
p = sys.argv[1] + "/index.json"
d = json.load(open(p))
open(p, "w").write(json.dumps(d) + " " * (9 << 20))' "$T/img"
	out=$(img import "$T/img")
	expect_eq "exit" "$(rc)" 1
	expect_contains "why" "$out" "index.json: not a file of at most 8388608 bytes"
}

t_hostile_sparse_blob() {
	# a layout's blob is copied whole, holes and all: one larger than any
	# layer the budget takes is not copied
	refused sparse-blob "is 64 MiB, larger than any layer the import's budget takes" \
		--max-size 1M --max-files 100
}

t_hostile_config_escapes() {
	# what an image says reaches the operator's terminal as text, never
	# as escape sequences
	refused escape-env 'Env[0] "\x1b]0;owned\x07\x1b[2Jhidden" is not NAME=VALUE'
	! grep -q $'\x1b' "$T/err" || fail "an escape byte on stderr"
}

# A name the image gives is quoted in a note when it is not used: as text.
# The notes went to stderr as they were, the title and the screen the
# image's (OSC 0, ED 2) on an operator's terminal.
t_hostile_name_escapes() {
	fixture escape-name img
	out=$(img import "$T/img")
	expect_eq "exit" "$(rc)" 0
	expect_contains "why" "$out" 'not used: image name "localhost/img:\x1b]0;owned\x07'
	! grep -q $'\x1b' "$T/err" || fail "an escape byte on stderr"
	! grep -q $'\x07' "$T/err" || fail "a BEL byte on stderr"
}

# and a C1 control (CSI as U+009B, which xterm takes as ESC [) as text
# too, its bytes as printable() shows them (cli_error said "\u009b")
t_hostile_config_c1_escapes() {
	refused escape-c1-env 'Env[0] "\xc2\x9b2Jhidden" is not NAME=VALUE'
	! grep -q $'\xc2\x9b' "$T/err" || fail "a C1 control on stderr"
}

# A newline an image wrote, quoted in an error, is text too: it began a
# line of the image's own on stderr ("corral: imported sha256:feed" under
# the real "corral: import ...: image config: Env[0] ..."), one the
# operator reads as corral's.
t_hostile_config_newline() {
	refused newline-env 'Env[0] "x\x0acorral: imported sha256:feed\x0anamed ok" is not NAME=VALUE'
	expect_eq "one line on stderr" "$(printf '%s\n' "$out" | wc -l)" 1
}

# The same of the characters that draw nothing or break a line where a
# terminal does not (a log in an editor or a browser): each as its bytes.
t_hostile_config_separators() {
	refused separator-env 'Env[0] "x\xe2\x80\xa8corral: ok\xe2\x80\xa9y\xe2\x80\x8bz\xe2\x81\xa0\xef\xbb\xbf\xf3\xa0\x81\x81" is not NAME=VALUE'
	! LC_ALL=C grep -q $'\xe2\x80\xa8' "$T/err" || fail "U+2028 on stderr"
}

# What `image inspect` and `image ls --json` show of an image's config is
# JSON in ASCII: a C1 control (CSI as U+009B, raw UTF-8 c2 9b, which
# xterm takes as ESC [) and a right-to-left override (U+202E, which shows
# "/tmp/<RLO>gnp.sh" as "/tmp/hs.png") went to the terminal as they were.
t_inspect_config_in_ascii() {
	fixture c1-config img
	img import "$T/img" > /dev/null
	expect_eq "import exit" "$(rc)" 0
	for verb in "inspect corral-test/c1-config:1" "ls --json"; do
		img $verb > /dev/null
		expect_eq "$verb: exit" "$(rc)" 0
		! LC_ALL=C grep -q $'\xc2\x9b' "$T/out" || fail "$verb: a C1 control on stdout"
		! LC_ALL=C grep -q $'\xe2\x80\xae' "$T/out" || fail "$verb: U+202E on stdout"
		expect_contains "$verb: kept, escaped" "$(< "$T/out")" 'A=\u009B2Jhidden'
		expect_contains "$verb: kept, escaped" "$(< "$T/out")" '/tmp/\u202Egnp.sh'
	done
	img inspect corral-test/c1-config:1 > /dev/null
	expect_eq "the value, whole" "$(json config.working_dir < "$T/out")" $'/tmp/\xe2\x80\xaegnp.sh'
}

t_hostile_decompression_bomb() {
	refused bomb "decompression bomb"
}

# A pax header is read whole into memory before its entry: libarchive
# refuses one past its own limit ("Special header too large": a 1 MB
# record was read here, a 60 MB one refused), so 60 KB gzip'd cost the
# unpacker nothing and refuse the layer.  A guard: nothing of ours bounds it.
t_hostile_pax_header_bomb() {
	refused hostile-pax-header "the layer's tar is damaged"
}

t_hostile_too_many_files() {
	refused hostile-many "more than 50 files in the image (--max-files)" --max-files 50
}

t_hostile_size_budget() {
	refused busybox-oci "over the import's budget of 100 KiB (--max-size)" --max-size 100K
}

t_hostile_control_bytes() {
	refused hostile-control 'a control byte in the name "bad\x0aname"'
}

# A layer's names are bytes, not UTF-8: quoted in an error, a lone 0x9b
# (CSI to a terminal that takes 8-bit controls, as ESC [ is) and a
# character cut short (e2 80, which joins what is written next) went to
# the operator's stderr as they were; they are \xNN, as printable()
# shows them, and a whole character (é) stays itself.
t_hostile_c1_byte_in_a_name() {
	refused hostile-c1-byte 'in the name "a/\x9b2J\xe2\x80/café/../../../corral-evil"'
	! LC_ALL=C grep -q $'\x9b' "$T/err" || fail "a lone 0x9b on stderr"
	! LC_ALL=C grep -q $'\xe2' "$T/err" || fail "a character cut short on stderr"
}

# The unpacker is a fork of `corral image import` (no daemon and no run
# imports: only it unpacks) that runs libarchive on a hostile layer: of
# what import holds, it must have nothing but the layer.  What import may
# hold is its environment (a daemon's token a client keeps there, the
# value a policy's from_env secret would read, any variable) and its
# command line (where its archive is, the name it was run by).  The
# unpacker is held by strace mid-archive and scanned from the host, with
# its parent (a fork too, between it and import); import is scanned first,
# and the unpacker for the layer's first file, to show the scan finds
# what is there.
t_unpacker_holds_no_credentials() {
	held_scan held "img" openat2 hold-here "corral-test/held:1"
}

# The same of the fork that reads a `docker save` tar (also hostile: the
# layers' tars, manifest.json) into tmp/, held as it makes its last file,
# e6 ("repositories", the one import never opens: a hold on a name import
# reads back would hold import too), the positive control in its first.
t_archive_reader_holds_no_credentials() {
	held_scan held-docker "img.tar" openat e6 "corral-test/held-docker:1"
}

# held_scan FIXTURE NAME SYSCALL HOLD REF: FIXTURE imported from $T/NAME
# (its path and corral's name carry a marker: the command line's), under
# strace that stops the child at its SYSCALL on HOLD (-P); the scans; then
# the child let go, and REF imported.
held_scan() {
	local fixture=$1 name=$2 syscall=$3 hold=$4 ref=$5
	[ "$ME" = 0 ] || skip "reading another process's memory needs root"
	command -v strace > /dev/null || skip "no strace to hold the unpacker with"
	# AddressSanitizer's runtime keeps a copy of the environment it
	# started with, out of corral's reach: nothing left to check there
	! ldd "$CORRAL" 2>/dev/null | grep -q libasan ||
		skip "ASan's runtime holds a copy of the environment"
	local scan=$HELPERS/memscan hex token secret marker arg positive st pid=""
	local unpacker="" between="" v
	[ -x "$scan" ] || fail "no memscan helper in $HELPERS"
	# long and random: a freed copy keeps all but its first bytes, so the
	# forks are scanned for each one's tail
	hex=$(head -c 160 /dev/urandom | od -An -tx1 | tr -d ' \n')
	token=corral-token-${hex:0:64}
	secret=env-secret-${hex:64:64}
	marker=corral-env-${hex:128:64}
	positive=layer-content-${hex:192:64}
	arg=corral-arg-${hex:256:64}
	CORRAL_POSITIVE=$positive fixture "$fixture" "$arg-$name"
	ln -s "$CORRAL" "$T/$arg"
	st=$T/strace
	CORRAL_TEST_TOKEN=$token CORRAL_TEST_SECRET=$secret \
		CORRAL_TEST_ONLY_ENV=$marker timeout 120 strace -f -qq -o "$st" -P "$hold" \
		-e trace="$syscall" -e inject="$syscall":signal=SIGSTOP:when=1 \
		"$T/$arg" image import --state-dir "$T/state" "$T/$arg-$name" \
		> "$T/out" 2>&1 < /dev/null &
	pid=$!
	! strace_held "$st" "$pid" ||
		unpacker=$(sed -n 's/^\([0-9]*\) *--- stopped by SIGSTOP.*/\1/p' "$st")
	if [ -z "$unpacker" ]; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" || true
		fail "the unpacker was never held: $(< "$T/out")"
		return 1
	fi
	# judged once it is let go: a failed check must not leave it stopped
	local import bad=""
	between=$(awk '{ print $4 }' "/proc/$unpacker/stat" || true)
	import=$(awk '{ print $4 }' "/proc/$between/stat" || true)
	for v in "$token" "$secret" "$marker" "$arg"; do
		"$scan" "$import" "$v" > /dev/null ||
			bad="$bad; the scan did not find $v in import"
		! "$scan" "$unpacker" "${v: -40}" > "$T/scan" ||
			bad="$bad; the unpacker holds $v: $(< "$T/scan")"
		! "$scan" "$between" "${v: -40}" > "$T/scan" ||
			bad="$bad; its parent holds $v: $(< "$T/scan")"
	done
	for v in cmdline environ; do
		! tr '\0' '\n' < "/proc/$unpacker/$v" | grep -q "${arg: -40}\|${marker: -40}" ||
			bad="$bad; the unpacker's $v shows import's: $(tr '\0' ' ' < "/proc/$unpacker/$v" | head -c 300)"
	done
	"$scan" "$unpacker" "$positive" > /dev/null ||
		bad="$bad; the scan did not find the layer's file in the unpacker"
	kill -CONT "$unpacker"
	wait "$pid" || bad="$bad; import: $(< "$T/out")"
	[ -z "$bad" ] || fail "${bad#; }"
	expect_contains "imported" "$(< "$T/out")" "$ref"
}

t_layer_modes_links_fifos() {
	fixture hostile-modes img
	img import "$T/img" > /dev/null
	expect_eq "exit" "$(rc)" 0
	l0=$(layer_of corral-test/hostile-modes:1 0)
	expect_eq "0555 dir" "$(stat -c %a "$l0/ro")" 555
	expect_eq "file in it" "$(cat "$l0/ro/inside")" "in a 0555 dir"
	expect_eq "hard link" "$(stat -c %i "$l0/data")" "$(stat -c %i "$l0/data-link")"
	expect_eq "fifo" "$(stat -c %F "$l0/fifo")" fifo
	# removal copes with the read-only dir
	img rm corral-test/hostile-modes:1 > /dev/null
	expect_eq "rm" "$(rc)" 0
	expect_eq "collected" "$(nlayers)" 0
}

t_later_entries_replace() {
	fixture hostile-replace img
	img import "$T/img" > /dev/null
	l0=$(layer_of corral-test/hostile-replace:1 0)
	expect_eq "file over dir" "$(cat "$l0/x")" "now a file"
	expect_eq "dir over file" "$(cat "$l0/y/in")" 2
}

# ---- running on an image ---------------------------------------------------

# crun ARGS...: corral run with this test's store; out in $T/out, err in
# $T/err, exit status in $T/rc
crun() {
	local rc=0
	timeout 120 "$CORRAL" run --state-dir "$T/state" "$@" > "$T/out" 2> "$T/err" \
		< /dev/null || rc=$?
	echo "$rc" > "$T/rc"
	say_out_err
}

busybox_image() {
	fixture busybox-oci bb
	img import "$T/bb" > /dev/null
	expect_eq "import" "$(rc)" 0
}

# An Entrypoint that is not there ends the run with "not found: NAME" on
# stderr: NAME is the image's, and reaches the operator's terminal as text.
# It went as it was, the title and the screen the image's (OSC 0, ED 2).
t_run_entrypoint_not_found_escaped() {
	fixture escape-entrypoint img
	img import "$T/img" > /dev/null
	expect_eq "import" "$(rc)" 0
	crun --image corral-test/escape-entry:1 > /dev/null
	expect_eq "exit" "$(rc)" 127
	expect_contains "named as text" "$(< "$T/err")" 'not found: /no\x1b]0;owned\x07\x1b[2Jhidden'
	! grep -q $'\x1b' "$T/err" || fail "an escape byte on stderr"
	! grep -q $'\x07' "$T/err" || fail "a BEL byte on stderr"
}

# `corral run ubuntu bash`, docker's order: the image's name is looked up
# as a command and is not found.  With an image of that name in the store,
# corral says --image NAME is what runs on it; with none, how one comes
# in.  It said "not found: NAME" alone.  A path is no image's name.
t_run_image_name_as_command() {
	fixture busybox-oci bb
	img import --name bbhint "$T/bb" > /dev/null
	expect_eq "import" "$(rc)" 0
	out=$(crun bbhint sh)
	expect_eq "image named: exit" "$(rc)" 127
	expect_contains "image named: not found" "$out" "not found: bbhint"
	expect_contains "image named: what to run" "$out" 'corral run --image bbhint -- COMMAND'
	out=$(crun corral-test/busybox:1 sh)
	expect_eq "its full name: exit" "$(rc)" 127
	expect_contains "its full name: what to run" "$out" 'corral run --image corral-test/busybox:1 -- COMMAND'
	out=$(crun nosuchimage sh)
	expect_eq "none: exit" "$(rc)" 127
	expect_contains "none: how images come in" "$out" "no image of that name is in the store"
	expect_contains "none: the verb" "$out" 'corral image import FILE'
	out=$(crun ./bbhint)
	expect_eq "a path: exit" "$(rc)" 127
	expect_not_contains "a path: no image hint" "$out" "image"
	# the store is only read: a run without one makes none
	out=$(timeout 60 "$CORRAL" run --state-dir "$T/none" ubuntu bash 2>&1 < /dev/null) || true
	expect_contains "no store: how images come in" "$out" 'corral image import FILE'
	[ ! -e "$T/none" ] || fail "the hint made a store at $T/none"
}

t_run_image_config() {
	busybox_image
	# no command: Entrypoint + Cmd, in WorkingDir, with Env
	out=$(crun --image corral-test/busybox:1)
	expect_eq "exit" "$(rc)" 0
	expect_eq "cmd ran in workdir" "$out" "hello from the image"
	# a command replaces Cmd, not Entrypoint (/bin/sh -c)
	out=$(crun --image corral-test/busybox:1 -- 'pwd; echo $GREETING $PATH; id -u; cat /etc/motd')
	expect_eq "exit" "$(rc)" 0
	expect_eq "output" "$out" "/srv/app
hello /bin
1000
layer two"
	# --env and a policy's env win over the image's
	out=$(crun --image corral-test/busybox:1 --env GREETING=mine -- 'echo $GREETING')
	expect_eq "env override" "$out" mine
}

t_run_image_layers_stacked() {
	busybox_image
	out=$(crun --image corral-test/busybox:1 -- 'ls /srv; echo --; ls /srv/cache; echo --; ls /usr 2>&1; cat /etc/passwd')
	expect_eq "exit" "$(rc)" 0
	expect_not_contains "whiteout" "$out" "old.txt"
	expect_not_contains "opaque" "$out" "stale"
	expect_contains "upper layer" "$out" "fresh"
	# the host's /usr is not there; corral's /etc entries are
	expect_contains "no host /usr" "$out" "No such file"
	# the image's User 1000 is "user" in its /etc/passwd: the sandbox's name
	expect_contains "image's user" "$out" "user:x:1000:1000:user:/home/user:/bin/sh"
}

# The store's index.json is read whole in a few reads: jansson's
# json_loadfd() took a byte a read(), 836 of them for one image's index on
# every run, and more with every image imported (image_read_fd).
t_run_image_reads_its_index_whole() {
	command -v strace > /dev/null || skip "no strace to count the reads with"
	local fd n
	busybox_image
	ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" timeout 120 strace -qq \
		-e trace=openat,read,close -o "$T/strace" "$CORRAL" run --state-dir "$T/state" \
		--image corral-test/busybox:1 -- true > "$T/out" 2> "$T/err" ||
		fail "run: $(cat "$T/err")"
	fd=$(sed -n 's/^openat([^"]*"index.json".* = \([0-9]*\)$/\1/p' "$T/strace" | head -1)
	[ -n "$fd" ] || fail "no open of index.json in the trace"
	n=$(awk -v fd="$fd" '/"index.json"/ { on = 1; next }
		on && $0 ~ "^close\\(" fd "\\)" { exit }
		on && $0 ~ "^read\\(" fd "," { n++ } END { print n + 0 }' "$T/strace")
	[ "$(stat -c %s "$(store)/index.json")" -gt 400 ] || fail "the index is too small to tell"
	[ "$n" -le 4 ] || fail "index.json took $n reads"
}

t_run_image_relative_state_dir() {
	# a relative --state-dir: the layers' paths are made absolute
	busybox_image
	out=$(cd "$T" && timeout 120 "$CORRAL" run --state-dir state --image corral-test/busybox:1 \
		-- 'cat /etc/motd' 2>&1 < /dev/null) || fail "run: $out"
	expect_eq "ran" "$out" "layer two"
}

t_run_image_read_only() {
	busybox_image
	out=$(crun --image corral-test/busybox:1 -- 'echo x > /bin/new; echo x > /srv/app/hello.txt; echo x > /tmp/ok && echo tmp-ok')
	expect_contains "bin" "$out" "Read-only file system"
	expect_contains "tmp writable" "$out" "tmp-ok"
	l0=$(layer_of corral-test/busybox:1 0)
	expect_eq "layer untouched" "$(cat "$l0/srv/app/hello.txt")" "hello from the image"
}

t_run_image_root_writable() {
	busybox_image
	out=$(crun --image corral-test/busybox:1 --root-writable -- 'echo new > /bin/new && cat /bin/new && echo changed >> /srv/app/hello.txt && cat /srv/app/hello.txt')
	expect_eq "exit" "$(rc)" 0
	expect_contains "new file" "$out" "new"
	expect_contains "copied up" "$out" "changed"
	# discarded with the sandbox; the shared layers never change
	l0=$(layer_of corral-test/busybox:1 0)
	expect_eq "layer untouched" "$(cat "$l0/srv/app/hello.txt")" "hello from the image"
	[ ! -e "$l0/bin/new" ] || fail "written into the layer"
	out=$(crun --image corral-test/busybox:1 -- 'cat /bin/new')
	expect_contains "gone next run" "$out" "No such file"
	# within the disk budget
	out=$(crun --image corral-test/busybox:1 --root-writable --disk 4M -- 'dd if=/dev/zero of=/bin/big bs=1M count=16')
	expect_contains "budget" "$out" "No space left on device"
	# one budget: the root's writes and /tmp's share --disk
	out=$(crun --image corral-test/busybox:1 --root-writable --disk 8M -- 'dd if=/dev/zero of=/bin/a bs=1M count=5 2>/dev/null && echo root-ok; dd if=/dev/zero of=/tmp/b bs=1M count=5')
	expect_contains "root wrote" "$out" "root-ok"
	expect_contains "one budget" "$out" "No space left on device"
	out=$(crun --image corral-test/busybox:1 --root-writable --disk 8M -- 'dd if=/dev/zero of=/tmp/b bs=1M count=5 2>/dev/null && echo tmp-ok; dd if=/dev/zero of=/srv/c bs=1M count=5')
	expect_contains "tmp wrote" "$out" "tmp-ok"
	expect_contains "one budget, other way" "$out" "No space left on device"
}

# host_dir: a directory of the host's that a sandbox's init could reach
# at /oldroot (not under /tmp: the stacked root covers the host's there),
# writable and readable by the sandbox's host user; removed by the test.
host_dir() {
	HOST_DIR=$(mktemp -d /var/tmp/corral-image-host.XXXXXX) || fail "mktemp"
	chmod 777 "$HOST_DIR"
	trap 'rm -rf "$HOST_DIR"' EXIT
}

t_run_image_tls_links_stay_in() {
	# an image's /etc/corral and CA bundle as links to the host: corral's
	# CA is written in the image, and no host file is read into it
	host_dir
	echo "host secret" > "$HOST_DIR/secret"
	chmod 644 "$HOST_DIR/secret"
	CORRAL_TARGET=$HOST_DIR fixture links-out img
	img import "$T/img" > /dev/null
	expect_eq "import" "$(rc)" 0
	echo '{"network": {"mode": "proxy", "allow": [{"host": "a.test", "tls": "terminate"}]}}' > "$T/p.json"
	out=$(crun --image corral-test/links-out:1 --policy "$T/p.json" -- 'cat /etc/corral/bundle.pem')
	expect_eq "exit" "$(rc)" 0
	expect_contains "corral's CA" "$out" "BEGIN CERTIFICATE"
	expect_not_contains "no host file read" "$out" "host secret"
	expect_eq "nothing written on the host" "$(ls -A "$HOST_DIR")" secret
}

t_run_image_dirs_made_in_the_image() {
	# an image's "opt" links to the host: the user's home under it, and a
	# bind's mount point, are made in the image, not on the host
	host_dir
	mkdir "$T/src"
	echo bound > "$T/src/f"
	chmod -R a+rX "$T/src"
	CORRAL_TARGET=$HOST_DIR fixture dirs-out img
	img import "$T/img" > /dev/null
	expect_eq "import" "$(rc)" 0
	out=$(crun --image corral-test/dirs-out:1 --ro "$T/src:/opt/b/dir" --ro "$T/src/f:/opt/c/file" \
		-- 'echo $HOME; echo mine > ~/f && cat ~/f; cat /opt/b/dir/f /opt/c/file')
	expect_eq "exit" "$(rc)" 0
	expect_eq "home, binds" "$out" "/opt/app/home
mine
bound
bound"
	expect_eq "nothing made on the host" "$(ls -A "$HOST_DIR")" ""
}

t_run_image_fifo_etc() {
	# an image's FIFOs where corral reads its files are not waited on
	# (the supervisor's would hold a daemon's event loop; init's the run)
	fixture fifo-etc img
	img import "$T/img" > /dev/null
	expect_eq "import" "$(rc)" 0
	echo '{"network": {"mode": "proxy", "allow": [{"host": "a.test", "tls": "terminate"}]}}' > "$T/p.json"
	out=$(timeout 60 "$CORRAL" run --state-dir "$T/state" --image corral-test/fifo-etc:1 \
		--policy "$T/p.json" -- 'echo ran; id -un' 2>&1 < /dev/null) || fail "run: $out"
	expect_eq "ran, as the image's User" "$out" "ran
app"
}

t_run_rootfs_dir() {
	mkdir -p "$T/tree/bin" "$T/tree/data"
	cp /bin/busybox "$T/tree/bin/"
	ln -s busybox "$T/tree/bin/sh"
	echo "from the tree" > "$T/tree/data/f"
	chmod -R a+rX "$T/tree"
	out=$(crun --rootfs "$T/tree" -- /bin/sh -c 'cat /data/f; /bin/busybox ls /')
	expect_eq "exit" "$(rc)" 0
	expect_contains "tree" "$out" "from the tree"
	expect_contains "workspace" "$out" "workspace"
	out=$(crun --rootfs "$T/tree" -- /bin/sh -c 'echo x > /data/f')
	expect_contains "read-only" "$out" "Read-only file system"
	expect_eq "tree untouched" "$(cat "$T/tree/data/f")" "from the tree"
}

# A --rootfs tree with a mount beneath (here a tmpfs at data/): the
# sandbox's overlay cannot take it as a lower layer (the host's mounts are
# locked in the sandbox's namespace; the kernel logs "failed to clone
# lowerpath"), and the run failed with a bare "Invalid argument" of the
# overlay's mount.  Now it says which tree and which mount.  Root only:
# another user cannot mount a tmpfs in the host's namespace.
t_run_rootfs_mount_beneath_said() {
	[ "$ME" = 0 ] || { skip "mounting in the host's namespace needs root"; return 77; }
	mkdir -p "$T/tree/bin" "$T/tree/data"
	cp /bin/busybox "$T/tree/bin/"
	ln -s busybox "$T/tree/bin/sh"
	chmod -R a+rX "$T/tree"
	mount -t tmpfs -o size=1m tmpfs "$T/tree/data" || { fail "mount"; return 1; }
	out=$(crun --rootfs "$T/tree" -- /bin/sh -c 'echo ran')
	umount "$T/tree/data"
	expect_eq "exit" "$(rc)" 125
	expect_contains "said" "$out" "$T/tree has a mount beneath it, at $T/tree/data, which a sandbox's overlay cannot take"
	out=$(crun --rootfs "$T/tree" -- /bin/sh -c 'echo ran')
	expect_eq "without the mount" "$out" "ran"
}

# A --rootfs that is a FUSE mount whose daemon (a tenant's, with
# allow_other; emulated as root) never answers: realpath()'s lstat there
# held corral in the kernel past SIGTERM (SIGKILL ends it).
# Now refused before anything of it is asked: the mount's line in the
# table says whose daemon it is.
t_run_rootfs_on_a_tenants_fuse_refused() {
	[ "$ME" = 0 ] || { skip "mounting in the host's namespace needs root"; return 77; }
	local rc=0
	mkdir "$T/tree"
	fuse_stall_mount "$T/tree" 65534 || return 1
	timeout -s KILL 20 "$CORRAL" run --state-dir "$T/state" --rootfs "$T/tree" -- true \
		> "$T/out" 2>&1 < /dev/null || rc=$?
	fuse_stall_umount "$T/tree"
	expect_eq "exit" "$rc" 125
	expect_contains "said" "$(cat "$T/out")" \
		"--rootfs $T/tree lies on a FUSE filesystem whose daemon is uid 65534's"
}

t_run_image_host_tmp_binds() {
	# the supervisor stacks the root on a tmpfs at /tmp in the sandbox's
	# mount namespace: the host's /tmp must still be there for binds
	busybox_image
	mkdir -p /tmp/corral-image-bind.$$
	echo "from the host's tmp" > /tmp/corral-image-bind.$$/f
	chmod -R a+rX /tmp/corral-image-bind.$$
	out=$(crun --image corral-test/busybox:1 --ro /tmp/corral-image-bind.$$:/data -- 'cat /data/f')
	rm -rf /tmp/corral-image-bind.$$
	expect_eq "bind from /tmp" "$out" "from the host's tmp"
}

t_run_image_refusals() {
	out=$(crun --image corral-test/none:1 -- true)
	expect_eq "exit" "$(rc)" 125
	expect_contains "missing" "$out" "no image named docker.io/corral-test/none:1"
	expect_contains "the way in" "$out" "then \`corral image import FILE\`"
	out=$(crun --image x --rootfs /tmp -- true)
	expect_contains "both" "$out" "one root, not two"
	busybox_image
	# an image's policy still applies: no network, seccomp, the agent's uid
	out=$(crun --image corral-test/busybox:1 -- 'cat /proc/self/status | grep -E "^(Uid|CapEff|NoNewPrivs|Seccomp):"')
	expect_contains "uid" "$out" "1000"
	expect_contains "no caps" "$out" "CapEff:	0000000000000000"
	expect_contains "nnp" "$out" "NoNewPrivs:	1"
	expect_contains "seccomp" "$out" "Seccomp:	2"
}

t_run_image_user_workdir() {
	fixture busybox-user u
	img import "$T/u" > /dev/null
	expect_eq "import" "$(rc)" 0
	out=$(crun --image corral-test/user:1 -- 'id -u; id -un; echo $USER $HOME; pwd; cat job.txt; echo mine > ~/f && cat /home/agent/f; grep -c . /etc/passwd; cat /etc/passwd /etc/group /etc/hosts /etc/resolv.conf')
	expect_eq "exit" "$(rc)" 0
	expect_eq "uid, name, env, workdir" "$(echo "$out" | head -6)" "1000
app
app /home/app
/opt/work
the job
mine"
	expect_contains "passwd: the user" "$out" "app:x:1000:1000:app:/home/app:/bin/sh"
	expect_contains "passwd: image's accounts kept" "$out" "daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin"
	expect_not_contains "passwd: image's clashing 1000 dropped" "$out" "user:x:1000"
	expect_not_contains "passwd: image's app line dropped" "$out" "The App"
	expect_contains "group" "$out" "staff:x:50:app"
	expect_contains "hosts: corral's" "$out" "localhost corral"
	expect_contains "hosts: image's" "$out" "10.1.2.3 db.internal db"
	expect_not_contains "hosts: no image loopback" "$out" "evil-loopback"
	expect_contains "resolv: search kept" "$out" "search corp.example"
	expect_not_contains "resolv: nameserver is corral's" "$out" "8.8.8.8"
	# User root: the sandbox never runs as 0; the agent it is
	fixture busybox-rootuser r
	img import "$T/r" > /dev/null
	out=$(crun --image corral-test/rootuser:1 -- 'id -u; id -un; echo $HOME')
	expect_eq "root image" "$out" "1000
agent
/home/agent"
}

# verdict_of FILE: the verdict in a JSON result.
# corpus_run FILE [ARGS...]: the whole attack corpus in one sandbox made by
# `corral run ARGS`, each attack a child of the shell, its output and its
# exit status ("rc NAME N": 128 + N for a signal, as a seccomp kill).  On
# an image the command is the argument of its Entrypoint, /bin/sh -c.
CORPUS='for a in $(/opt/helpers/attack list); do /opt/helpers/attack $a; echo "rc $a $?"; done'
corpus_run() {
	local out=$1
	shift
	if [ $# = 0 ]; then
		set -- -- /bin/sh -c "$CORPUS"
	else
		set -- "$@" -- "$CORPUS"
	fi
	timeout 120 "$CORRAL" run --state-dir "$T/state" --ro "$HELPERS:/opt/helpers" "$@" \
		> "$out" 2> "$out.err" < /dev/null ||
		fail "corral run (exit $?): $(tail -3 "$out.err")"
}

# The corpus on an image, and on a writable image, gives what it gives on
# the host's /usr, attack by attack, and no attack escapes.  One sandbox a
# mode, the three at once (sandboxes on one image share its layers by
# design): a sandbox an attack cost 100 runs, 28 s of the ASan lane's CPU.
t_attack_corpus_same_on_image() {
	local a names
	[ -x "$HELPERS/attack" ] || fail "no attack helper in $HELPERS"
	busybox_image
	names=$("$HELPERS/attack" list)
	[ "$(echo "$names" | wc -l)" -ge 30 ] || fail "attack list: $names"
	corpus_run "$T/v.host" &
	corpus_run "$T/v.img" --image corral-test/busybox:1 &
	corpus_run "$T/v.rw" --image corral-test/busybox:1 --root-writable &
	wait
	for a in $names; do
		grep -q "^rc $a " "$T/v.host" || fail "$a did not run on the host's /usr"
	done
	expect_eq "the corpus on an image" "$(< "$T/v.img")" "$(< "$T/v.host")"
	expect_eq "the corpus on a writable image" "$(< "$T/v.rw")" "$(< "$T/v.host")"
	expect_not_contains "nothing escaped" "$(cat "$T/v.host" "$T/v.img" "$T/v.rw")" ESCAPED
	# each attack blocked, or killed (a signal: 128 + N); none merely ended
	/usr/bin/python3 - "$T/v.host" > "$T/v.why" <<'EOF2' || fail "$(< "$T/v.why")"
import re, sys
said = []
for line in open(sys.argv[1]).read().split("\n"):
    m = re.match(r"rc (\S+) (\d+)$", line)
    if not m:
        said.append(line)
        continue
    if int(m.group(2)) <= 128 and not any(l.startswith("blocked:") for l in said):
        print("%s: not blocked on the host's /usr: %r, exit %s" % (m.group(1), said, m.group(2)))
    said = []
EOF2
	[ ! -s "$T/v.why" ] || fail "$(< "$T/v.why")"
}

t_run_policy_image() {
	busybox_image
	echo '{"filesystem": {"image": "corral-test/busybox:1"}}' > "$T/p.json"
	out=$(crun --policy "$T/p.json" -- 'pwd; cat /etc/motd; ls /usr 2>&1; true')
	expect_eq "exit" "$(rc)" 0
	expect_contains "workdir" "$out" "/srv/app"
	expect_contains "image's files" "$out" "layer two"
	expect_contains "no host /usr" "$out" "No such file"
	# a flag wins over the policy's image
	out=$(crun --policy "$T/p.json" --image corral-test/none:1 -- true)
	expect_contains "flag wins" "$out" "no image named docker.io/corral-test/none:1"
	# a path is not a reference
	echo '{"filesystem": {"image": "/tmp/x.tar"}}' > "$T/bad.json"
	out=$("$CORRAL" policy check "$T/bad.json" 2>&1) && fail "a path accepted: $out"
	expect_contains "refused" "$out" "filesystem.image"
}

# A daemon of this test (its state and store in $T/state), stopped by pid.
image_daemon() {	# image_daemon [SERVE ARGS...]
	local i=0
	"$CORRAL" serve --socket "$T/s" --state-dir "$T/state" "$@" > "$T/daemon.log" 2>&1 < /dev/null &
	echo $! > "$T/dpid"
	while [ $i -lt 200 ] && [ ! -S "$T/s" ]; do
		doze 0.05
		i=$((i + 1))
	done
	[ -S "$T/s" ] || fail "no daemon: $(tail -3 "$T/daemon.log")"
}
stop_image_daemon() {
	local pid i=0
	pid=$(cat "$T/dpid" 2>/dev/null) || return 0
	kill -TERM "$pid" 2>/dev/null || return 0
	while [ $i -lt 200 ] && kill -0 "$pid" 2>/dev/null; do
		doze 0.05
		i=$((i + 1))
	done
	kill -KILL "$pid" 2>/dev/null || true
}

t_daemon_create_image() {
	busybox_image
	trap stop_image_daemon EXIT
	image_daemon
	id=$("$CORRAL" create --socket "$T/s" --image corral-test/busybox:1) || fail "create: $id"
	out=$("$CORRAL" exec --socket "$T/s" "$id" -- /bin/sh -c 'cat /etc/motd; echo $GREETING; ls /usr 2>&1' 2>&1) || true
	expect_contains "image's files" "$out" "layer two"
	expect_contains "image's env" "$out" "hello"
	expect_contains "no host /usr" "$out" "No such file"
	"$CORRAL" rm --socket "$T/s" "$id" > /dev/null || fail "rm"
	# the policy's key, through the API
	echo '{"filesystem": {"image": "corral-test/busybox:1"}}' > "$T/p.json"
	id=$("$CORRAL" create --socket "$T/s" --policy "$T/p.json") || fail "create: $id"
	out=$("$CORRAL" exec --socket "$T/s" "$id" -- /bin/cat /srv/app/hello.txt 2>&1) || true
	expect_eq "policy image" "$out" "hello from the image"
	"$CORRAL" rm --socket "$T/s" "$id" > /dev/null || fail "rm"
	# unknown, and never a host path to import
	out=$("$CORRAL" create --socket "$T/s" --image corral-test/none:1 2>&1) && fail "created: $out"
	expect_contains "unknown" "$out" "no image named docker.io/corral-test/none:1"
	expect_contains "404" "$out" "HTTP 404"
	fixture busybox-archive arch.tar
	chmod 644 "$T/arch.tar"
	out=$("$CORRAL" create --socket "$T/s" --image "$T/arch.tar" 2>&1) && fail "created: $out"
	expect_contains "path refused" "$out" "HTTP 422"
	img ls > /dev/null
	expect_eq "nothing imported" "$(wc -l < "$T/out")" 2
	stop_image_daemon
}

t_daemon_create_image_store_busy() {
	# an import holds the store's lock for as long as it takes: a create
	# on an image says the store is busy, and the daemon goes on serving
	busybox_image
	trap 'stop_image_daemon; [ -z "${HOLDER:-}" ] || kill "$HOLDER" 2>/dev/null' EXIT
	image_daemon
	( exec 9> "$(store)/lock"; flock -x 9; exec sleep 120 ) &
	HOLDER=$!
	i=0
	while [ $i -lt 100 ] && flock -n -s "$(store)/lock" true; do
		doze 0.05
		i=$((i + 1))
	done
	out=$(timeout 20 "$CORRAL" create --socket "$T/s" --image corral-test/busybox:1 2>&1) &&
		fail "created: $out"
	expect_contains "503" "$out" "HTTP 503"
	expect_contains "why" "$out" "is busy (an import or a removal holds it)"
	out=$(timeout 20 "$CORRAL" ls --socket "$T/s" 2>&1) || fail "ls while the store is held: $out"
	kill "$HOLDER"
	wait "$HOLDER" 2>/dev/null || true
	HOLDER=
	id=$(timeout 20 "$CORRAL" create --socket "$T/s" --image corral-test/busybox:1) ||
		fail "create after: $id"
	"$CORRAL" rm --socket "$T/s" "$id" > /dev/null || fail "rm"
	stop_image_daemon
}

# ---- whose host ids an image's sandbox and layers use ----------------------

AGENT_HOST=1879049192	# corral's range (0x70000000) + 1000: the agent's host uid
NOBODY=65534

# sandbox_procs PID: "pid uid comm" of PID's descendants not run by root
sandbox_procs() {
	/usr/bin/python3 - "$1" <<'PY'
import os, sys
todo, seen = [int(sys.argv[1])], []
while todo and len(seen) < 200:
    p = todo.pop()
    seen.append(p)
    try:
        tasks = os.listdir(f"/proc/{p}/task")
    except OSError:
        continue
    # a thread that ended since the listing has no children; the rest
    # of p's threads are still read
    for t in tasks:
        try:
            todo += [int(c) for c in open(f"/proc/{p}/task/{t}/children").read().split()]
        except OSError:
            pass
for p in seen[1:]:
    try:
        st = dict(l.split(":", 1) for l in open(f"/proc/{p}/status").read().splitlines())
    except OSError:
        continue
    if st["Uid"].split()[0] != "0":
        print(p, st["Uid"].split()[0], st["Name"].strip())
PY
}

# The attacker: a host process running as nobody (65534), the id an older
# corral gave an image's agent, cannot signal a process of a root-run
# sandbox on an image.
t_run_image_agent_not_nobody() {
	[ "$ME" = 0 ] || { skip "unprivileged, the sandbox is the caller's own"; return 77; }
	busybox_image
	timeout 60 "$CORRAL" run --state-dir "$T/state" --image corral-test/busybox:1 \
		-- 'sleep 30 & wait' > "$T/run.out" 2>&1 < /dev/null &
	RUNNER=$!
	trap 'kill "$RUNNER" 2>/dev/null; wait "$RUNNER" 2>/dev/null || true' EXIT
	local i=0 procs=""
	while [ $i -lt 200 ]; do
		procs=$(sandbox_procs "$RUNNER")
		echo "$procs" | grep -q " sleep$" && break
		kill -0 "$RUNNER" 2>/dev/null || break
		doze 0.05
		i=$((i + 1))
	done
	echo "$procs" | grep -q " sleep$" || fail "no sleep in the sandbox: $procs $(< "$T/run.out")"
	while read -r pid uid comm; do
		expect_eq "$comm's host uid" "$uid" $AGENT_HOST
		got=$(setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups /usr/bin/python3 -c '
import errno, os, sys
try:
    os.kill(int(sys.argv[1]), 0)
    print("signalled")
except OSError as e:
    print(errno.errorcode[e.errno])' "$pid")
		expect_eq "nobody signals $comm ($pid)" "$got" EPERM
	done <<< "$procs"
}

# As root inside (--user root) on an image: uid 0 of the sandbox's
# namespace, owning the image's files as the agent does.
t_run_image_root_inside() {
	[ "$ME" = 0 ] || { skip "root inside needs ids 0-65535 mapped (an /etc/subuid entry)"; return 77; }
	busybox_image
	out=$(crun --image corral-test/busybox:1 --root-writable --user root -- \
		'id -u; stat -c %u /srv/app/hello.txt; chown 0:0 /srv/app/hello.txt && stat -c %u:%g /srv/app/hello.txt; echo w >> /etc/motd && echo wrote')
	expect_eq "exit" "$(rc)" 0
	expect_eq "root, the image's files the agent's, chown, copy-up" "$out" "0
1000
0:0
wrote"
}

# The daemon on an image: a workspace's export and a snapshot, and a fork
# from it that writes its files (they are the same agent's).
t_daemon_image_snapshot_export() {
	busybox_image
	mkdir "$T/ws"
	echo one > "$T/ws/f"
	[ "$ME" != 0 ] || chown -R $NOBODY:$NOBODY "$T/ws"
	trap stop_image_daemon EXIT
	image_daemon --allow-root-inside
	api() {	# api METHOD PATH [BODY]: the status; the body in $T/body
		curl -sS --max-time 60 --unix-socket "$T/s" -X "$1" -o "$T/body" -w '%{http_code}' \
			${3:+-d "$3"} "http://localhost$2" 2> "$T/curl.err" || true
	}
	expect_eq "create" "$(api POST /v1/sandboxes "{\"image\": \"corral-test/busybox:1\", \"workspace\": \"$T/ws\", \"policy\": {\"filesystem\": {\"root_writable\": true}}, \"idle_freeze_ms\": 0}")" 201
	id=$(json id < "$T/body")
	expect_eq "exec" "$(api POST "/v1/sandboxes/$id/exec" '{"argv": ["/bin/sh", "-c", "echo two >> f && echo new > new.txt && echo r > /srv/app/r && id -u"], "cwd": "/workspace"}')" 200
	expect_eq "exec's output" "$(json stdout < "$T/body")" 1000
	expect_eq "export" "$(api POST "/v1/sandboxes/$id/export" "{\"to\": \"$T/out-dir\"}")" 200
	expect_eq "exported" "$(cat "$T/out-dir/f" "$T/out-dir/new.txt")" "one
two
new"
	expect_eq "snapshot" "$(api POST "/v1/sandboxes/$id/snapshot")" 201
	snap=$(json id < "$T/body")
	expect_eq "fork" "$(api POST /v1/sandboxes "{\"from_snapshot\": \"$snap\", \"image\": \"corral-test/busybox:1\", \"idle_freeze_ms\": 0}")" 201
	fork=$(json id < "$T/body")
	expect_eq "exec in the fork" "$(api POST "/v1/sandboxes/$fork/exec" '{"argv": ["/bin/sh", "-c", "echo three >> new.txt && cat f new.txt && cat /etc/motd"], "cwd": "/workspace"}')" 200
	expect_eq "the fork's files are its own" "$(json stdout < "$T/body")" "one
two
new
three
layer two"
	# identity.user root, which this daemon allows: root of the namespace
	[ "$ME" = 0 ] || { stop_image_daemon; return 0; }
	expect_eq "create as root inside" "$(api POST /v1/sandboxes '{"image": "corral-test/busybox:1", "user": "root", "policy": {"filesystem": {"root_writable": true}}, "idle_freeze_ms": 0}')" 201
	id=$(json id < "$T/body")
	expect_eq "exec as root" "$(api POST "/v1/sandboxes/$id/exec" '{"argv": ["/bin/sh", "-c", "id -u; chown 0:0 /srv/app/hello.txt && stat -c %u:%g /srv/app/hello.txt"]}')" 200
	expect_eq "root's output" "$(json stdout < "$T/body")" "0
0:0"
	stop_image_daemon
}

# A root layer still 65534's (a --rootfs tree chowned so for the agent of
# an older corral, or a layer not migrated): the agent is its owner, as it
# was, so the tree stays its own (copy-up), and the result says why.
t_run_rootfs_nobodys_tree() {
	[ "$ME" = 0 ] || { skip "unprivileged, the agent is the caller"; return 77; }
	mkdir -p "$T/tree/bin" "$T/tree/data"
	cp /bin/busybox "$T/tree/bin/"
	ln -s busybox "$T/tree/bin/sh"
	echo "from the tree" > "$T/tree/data/f"
	chmod 600 "$T/tree/data/f"
	chown -R -h $NOBODY:$NOBODY "$T/tree"
	crun --json --rootfs "$T/tree" --root-writable -- /bin/sh -c 'echo x >> /data/f && cat /data/f' > /dev/null
	expect_eq "exit" "$(json exit_code < "$T/out")" 0
	expect_eq "copied up" "$(json stdout < "$T/out")" "from the tree
x"
	expect_eq "agent" "$(json layers.ids.uid < "$T/out")" $NOBODY
	expect_contains "why" "$(json layers.ids.note < "$T/out")" "the owner of the root layer $T/tree"
	expect_eq "tree untouched" "$(cat "$T/tree/data/f")" "from the tree"
}

# legacy_store: the test's store as an older corral left it as root: every
# layer's tree and owners file uid/gid 65534's (the layer directory root's)
legacy_store() {
	local l
	for l in "$(store)"/layers/*; do
		chown -R -h $NOBODY:$NOBODY "$l/root" "$l/owners"
	done
}
# not_owned ID: up to 3 entries of the store's layers not ID:ID's
not_owned() {
	find "$(store)/layers" -mindepth 2 \( ! -uid "$1" -o ! -gid "$1" \) | head -3
}
# a_layer: the tree of the layer with busybox (found on disk: inspect
# would migrate the store)
a_layer() {
	for l in "$(store)"/layers/*; do
		[ ! -e "$l/root/bin/busybox" ] || { echo "$l/root"; return; }
	done
}

# A store made by an older corral (layers 65534's) is migrated before its
# first use: a run on it is the range's agent, the image's files its own;
# nothing a symlink of a layer names is touched.
t_legacy_store_migrated() {
	[ "$ME" = 0 ] || { skip "an unprivileged store is the caller's own: nothing to migrate"; return 77; }
	busybox_image
	legacy_store
	l=$(a_layer)
	echo v > "$T/victim"
	mkdir "$T/victim-dir"
	echo v > "$T/victim-dir/f"
	chown -R $NOBODY:$NOBODY "$T/victim" "$T/victim-dir"
	ln -s "$T/victim" "$l/trap-file"
	ln -s "$T/victim-dir" "$l/trap-dir"
	ln -s "$T/victim-dir/f" "$l/trap-deep"
	chown -h $NOBODY:$NOBODY "$l/trap-file" "$l/trap-dir" "$l/trap-deep"
	expect_eq "the fixture: 65534's" "$(not_owned $NOBODY)" ""
	crun --json --image corral-test/busybox:1 --root-writable -- \
		'id -u; echo changed >> /srv/app/hello.txt && cat /srv/app/hello.txt' > /dev/null
	expect_eq "exit" "$(json exit_code < "$T/out")" 0
	expect_eq "agent" "$(json layers.ids.uid < "$T/out")" $AGENT_HOST
	expect_eq "output" "$(json stdout < "$T/out")" "1000
hello from the image
changed"
	expect_eq "every layer entry migrated" "$(not_owned $AGENT_HOST)" ""
	expect_eq "links not followed" \
		"$(stat -c %u:%g "$T/victim" "$T/victim-dir" "$T/victim-dir/f" | sort -u)" \
		"$NOBODY:$NOBODY"
	expect_eq "link itself migrated" "$(stat -c %u "$l/trap-dir")" $AGENT_HOST
	out=$(crun --image corral-test/busybox:1 --root-writable --user root -- 'id -u; chown 0 /srv/app/hello.txt && echo chowned')
	expect_eq "root inside on the migrated store" "$out" "0
chowned"
	# a new import beside the migrated layers
	fixture busybox-user u
	img import "$T/u" > /dev/null
	expect_eq "import" "$(rc)" 0
	expect_eq "one owner" "$(not_owned $AGENT_HOST)" ""
}

# The daemon's create on an older corral's store: migrated first (the
# lock is free), the sandbox is the range's agent.
t_legacy_store_daemon() {
	[ "$ME" = 0 ] || { skip "an unprivileged store is the caller's own: nothing to migrate"; return 77; }
	busybox_image
	legacy_store
	trap stop_image_daemon EXIT
	image_daemon
	id=$("$CORRAL" create --socket "$T/s" --image corral-test/busybox:1) || fail "create: $id"
	expect_eq "migrated" "$(not_owned $AGENT_HOST)" ""
	out=$("$CORRAL" exec --socket "$T/s" "$id" -- /bin/sh -c 'id -u; cat /srv/app/hello.txt' 2>&1) || true
	expect_eq "runs" "$out" "1000
hello from the image"
	"$CORRAL" rm --socket "$T/s" "$id" > /dev/null || fail "rm"
	stop_image_daemon
}

# A walk that was killed midway (part of a layer done, its root directory
# not yet) is taken up by the next open, and then not walked again.
t_legacy_store_resumed() {
	[ "$ME" = 0 ] || { skip "an unprivileged store is the caller's own: nothing to migrate"; return 77; }
	busybox_image
	legacy_store
	l=$(a_layer)
	chown -R -h $AGENT_HOST:$AGENT_HOST "$l/bin" "$(dirname "$l")/owners"
	img ls > /dev/null
	expect_eq "ls" "$(rc)" 0
	expect_eq "migrated" "$(not_owned $AGENT_HOST)" ""
	before=$(stat -c %z "$l" "$l/bin/busybox")
	img ls > /dev/null
	expect_eq "not walked again (ctime)" "$(stat -c %z "$l" "$l/bin/busybox")" "$before"
}

# The walk waits for the store's lock: while another holds it (an import
# of an older corral's, say), nothing is changed.
t_legacy_store_waits_for_lock() {
	[ "$ME" = 0 ] || { skip "an unprivileged store is the caller's own: nothing to migrate"; return 77; }
	busybox_image
	legacy_store
	trap '[ -z "${HOLDER:-}" ] || kill "$HOLDER" 2>/dev/null' EXIT
	( exec 9> "$(store)/lock"; flock -x 9; exec sleep 120 ) &
	HOLDER=$!
	local i=0 ino
	ino=$(stat -c %i "$(store)/lock")
	while [ $i -lt 100 ] && ! grep -q "FLOCK .*:$ino " /proc/locks; do
		doze 0.05
		i=$((i + 1))
	done
	img ls > /dev/null &
	LS=$!
	i=0
	while [ $i -lt 200 ] && ! grep -q -- "-> FLOCK .*:$ino " /proc/locks; do
		doze 0.05
		i=$((i + 1))
	done
	grep -q -- "-> FLOCK .*:$ino " /proc/locks || fail "ls does not wait for the lock"
	expect_eq "untouched while held" "$(not_owned $NOBODY)" ""
	kill "$HOLDER"
	wait "$HOLDER" 2>/dev/null || true
	HOLDER=
	wait "$LS" || true
	expect_eq "ls" "$(rc)" 0
	expect_eq "migrated once the lock was free" "$(not_owned $AGENT_HOST)" ""
}

run_tests "$@"
echo "image ($(id -un 2>/dev/null || id -u)): $PASS passed, $FAIL failed, $SKIP skipped"
[ -n "$FAILED_NAMES" ] && echo "failed:$FAILED_NAMES"
[ "$FAIL" -eq 0 ]
