#!/bin/bash
# export.sh - the workspace's way out: corral run --export-to, --apply and
# --patch, against a hostile agent and an ordinary one.
#
#   tests/export.sh CORRAL [TEST...]
#
# The hostile agent plants every trap a host tool would spring later (git
# config keys that run programs, hooks, filter and textconv drivers, a
# pager, an alias, .gitmodules, editor tasks, .envrc, .devcontainer) and
# every trick on the way out (symlinks to /etc/shadow and out of the tree,
# a fifo, a setuid file, a hardlink); the host's git then runs on the
# result, and a marker file each trap would create must not appear.  The
# same traps planted straight on the host show that the markers work.
set -u
# EXPORT_LIB=1: sourced for its helpers (tests/snapshot.sh), nothing run
if [ -z "${EXPORT_LIB:-}" ]; then
CORRAL=$(readlink -f "$1")
shift
TEST_TMP=$(mktemp -d "${TMPDIR:-/tmp}/corral-export.XXXXXX")
chmod 755 "$TEST_TMP"
trap 'chmod -R u+rwX "$TEST_TMP" 2>/dev/null; rm -rf "$TEST_TMP"' EXIT
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
ME=$(id -u)
fi


# A git repository owned by the user the sandbox maps to (see ns.c).
mkrepo() {	# mkrepo DIR
	mkdir -p "$1"
	(
		cd "$1"
		git init -q .
		printf 'one\ntwo\nthree\n' > edit.txt
		echo gone > gone.txt
		echo rename > old-name.txt
		printf '#!/bin/sh\necho hi\n' > script.sh
		seq 1 100 | gzip -n > data.gz
		mkdir olddir && echo o > olddir/o
		HOME=$T/home GIT_CONFIG_NOSYSTEM=1 git add -A
		HOME=$T/home GIT_CONFIG_NOSYSTEM=1 git -c user.name=t -c user.email=t@t commit -qm init
	)
	if [ "$ME" = 0 ]; then chown -R 65534:65534 "$1"; fi
}

# The host's git, with no config of the host's own; any owner is fine.
hostgit() {	# hostgit DIR ARGS...
	local d=$1
	shift
	(cd "$d" && HOME=$T/home GIT_CONFIG_NOSYSTEM=1 timeout 20 git -c safe.directory='*' "$@") \
		>/dev/null 2>&1 || true
}

# What a person does next in the repository: each trap has a command that
# springs it (status: fsmonitor, filters; diff: external, textconv;
# log -p on a terminal: the pager, textconv; commit and checkout: hooks).
use_repo() {	# use_repo DIR
	hostgit "$1" status
	hostgit "$1" diff
	# PAGER=cat: where no core.pager was planted (or it was held back), git
	# would start less, which waits for a key until the timeout; a planted
	# core.pager still wins over PAGER
	(cd "$1" && HOME=$T/home GIT_CONFIG_NOSYSTEM=1 PAGER=cat timeout 20 \
		script -qec "git -c safe.directory='*' log -p" /dev/null) >/dev/null 2>&1 || true
	hostgit "$1" add -A
	hostgit "$1" -c user.name=t -c user.email=t@t commit -qm next
	hostgit "$1" checkout -q -b other
	hostgit "$1" st
}

# The hostile agent: run in DIR (the sandbox's /workspace, or a control
# copy on the host).  Its traps write markers into MARKS.
write_agent() {
	cat > "$T/agent.sh" <<'AGENT'
#!/bin/sh
cd "$1"; M=$2
cat >> .git/config <<EOF
[core]
	fsmonitor = "touch $M/fsmonitor; false"
	pager = "touch $M/pager; cat"
	hooksPath = .git/hooks
[diff]
	external = "touch $M/diffext; true"
[diff "tc"]
	textconv = "touch $M/textconv; cat"
[filter "f"]
	clean = "touch $M/clean; cat"
	smudge = "touch $M/smudge; cat"
[alias]
	st = "!touch $M/alias"
EOF
mkdir -p .git/hooks .git/info
for h in pre-commit post-commit post-checkout; do
	printf '#!/bin/sh\ntouch %s/hook-%s\n' "$M" "$h" > .git/hooks/$h
	chmod +x .git/hooks/$h
done
echo '* filter=f diff=tc' > .gitattributes
echo '* filter=f' > .git/info/attributes
printf '[submodule "s"]\n\tpath = s\n\turl = ./s\n\tupdate = !touch %s/submodule\n' "$M" > .gitmodules
mkdir -p .vscode .devcontainer
printf '{"version": "2.0.0", "tasks": [{"label": "x", "command": "touch %s/vscode",\n  "runOptions": {"runOn": "folderOpen"}}]}\n' "$M" > .vscode/tasks.json
printf '{ // JSONC\n "python.defaultInterpreterPath": "%s/py",}\n' "$M" > .vscode/settings.json
echo "touch $M/envrc" > .envrc
printf '{"initializeCommand": "touch %s/devcontainer"}\n' "$M" > .devcontainer/devcontainer.json
ln -s /etc/shadow shadow
ln -s ../../outside out
mkfifo fifo
echo s > suid && chmod 4755 suid
echo h > hard && ln hard hard2
echo ok > ok.txt && ln -s ok.txt goodlink
echo edited >> edit.txt
AGENT
	chmod 755 "$T/agent.sh"
}

# Every trap held back, each with its reason (the result's JSON, in $1).
# One Python for the list, not one a path (13 starts, 0.4 s of CPU a call).
check_held() {	# check_held FILE [KEY]: KEY the list's path (export.held)
	local out=$1 key=${2:-export.held} p why got
	local -A reason=()
	while IFS= read -r -d '' p && IFS= read -r -d '' why; do
		reason[$p]+=$why$'\n'
	done < <(json "$key" < "$out" | /usr/bin/python3 -c '
import json, sys
for e in json.load(sys.stdin):
    sys.stdout.write(e["path"] + "\0" + e["reason"] + "\0")')
	while IFS='|' read -r p why; do
		got=${reason[$p]:-}
		expect_contains "held $p" "${got%$'\n'}" "$why"
	done <<EOF
.git/config|core.fsmonitor
.git/hooks/pre-commit|githooks(5)
.git/hooks/post-checkout|githooks(5)
.git/info/attributes|filter=f
.gitattributes|filter=f
.gitmodules|submodule.s.update
.vscode/tasks.json|runOn = folderOpen
.vscode/settings.json|python.defaultInterpreterPath
.envrc|direnv
.devcontainer/devcontainer.json|initializeCommand
shadow|leaves the tree
out|leaves the tree
fifo|fifo never leaves
EOF
}

t_hostile_control() {
	# the traps, planted straight on the host, do spring: the markers work
	mkrepo "$T/control"
	mkdir -p "$T/marks" "$T/home"
	write_agent
	"$T/agent.sh" "$T/control" "$T/marks"
	use_repo "$T/control"
	for m in fsmonitor pager clean textconv diffext alias hook-pre-commit hook-post-commit hook-post-checkout; do
		[ -e "$T/marks/$m" ] || fail "control: the $m trap did not fire on the host"
	done
}

t_hostile_export_to() {
	mkrepo "$T/ws"
	mkdir -p "$T/marks" "$T/home" "$T/outside"
	write_agent
	crun --json --events "$T/ev" --ro "$T/agent.sh:/opt/agent.sh" --workspace "$T/ws" \
		--export-to "$T/result" -- /opt/agent.sh /workspace "$T/marks"
	expect_eq "exit" "$(rc)" 0
	check_held "$T/out"
	expect_contains "suid note" "$(json export.exported < "$T/out")" "setuid/setgid bits dropped"
	expect_eq "suid mode" "$(stat -c %a "$T/result/suid")" 755
	expect_eq "hardlink" "$(stat -c %h "$T/result/hard2")" 1
	[ -L "$T/result/goodlink" ] || fail "a symlink inside the tree did not come out"
	[ ! -e "$T/result/shadow" ] && [ ! -L "$T/result/shadow" ] || fail "shadow link came out"
	[ ! -e "$T/result/fifo" ] || fail "fifo came out"
	[ ! -e "$T/result/.envrc" ] || fail ".envrc came out"
	[ -z "$(find "$T/result" ! -user "$ME" | head -1)" ] || fail "a file is not the caller's"
	[ -z "$(find "$T/result" -perm /6000 | head -1)" ] || fail "a setuid/setgid bit came out"
	expect_not_contains "config" "$(cat "$T/result/.git/config")" fsmonitor
	expect_contains "edit" "$(cat "$T/result/edit.txt")" edited
	grep -q '"type":"export.held"' "$T/ev" || fail "no export.held events"
	use_repo "$T/result"
	[ -z "$(ls -A "$T/marks")" ] || fail "a trap ran on the host: $(ls "$T/marks")"
	[ -z "$(ls -A "$T/outside")" ] || fail "something was written outside"
}

t_hostile_apply() {
	mkrepo "$T/ws"
	mkdir -p "$T/marks" "$T/home"
	write_agent
	before=$(cat "$T/ws/.git/config")
	crun --json --ro "$T/agent.sh:/opt/agent.sh" --workspace "$T/ws" --apply \
		-- /opt/agent.sh /workspace "$T/marks"
	expect_eq "exit" "$(rc)" 0
	check_held "$T/out"
	expect_eq "the host's .git/config" "$(cat "$T/ws/.git/config")" "$before"
	[ ! -e "$T/ws/.git/hooks/pre-commit" ] || fail "a hook came out"
	[ ! -L "$T/ws/shadow" ] || fail "shadow link came out"
	expect_contains "edit" "$(cat "$T/ws/edit.txt")" edited
	use_repo "$T/ws"
	[ -z "$(ls -A "$T/marks")" ] || fail "a trap ran on the host: $(ls "$T/marks")"
	[ ! -e "$T/outside" ] || fail "something was written outside"
}

t_hostile_patch() {
	mkrepo "$T/ws"
	mkdir -p "$T/marks" "$T/home"
	write_agent
	crun --json --ro "$T/agent.sh:/opt/agent.sh" --workspace "$T/ws" --patch "$T/p.diff" \
		-- /opt/agent.sh /workspace "$T/marks"
	expect_eq "exit" "$(rc)" 0
	check_held "$T/out"
	for bad in fsmonitor shadow fifo envrc folderOpen; do
		expect_not_contains "patch" "$(cat "$T/p.diff")" "$bad"
	done
	cp -a "$T/ws" "$T/applied"
	(cd "$T/applied" && HOME=$T/home git -c safe.directory='*' apply "$T/p.diff") ||
		fail "git apply refused the patch"
	use_repo "$T/applied"
	[ -z "$(ls -A "$T/marks")" ] || fail "a trap ran on the host: $(ls "$T/marks")"
}

# The modes the sandbox chose come out less the caller's umask and never
# writable by others: a 0777 directory or a 0666 file (made by root, with
# --export-to or onto the workspace) let any local user change what the
# host runs next.  Each one masked says so in its note.
t_modes_keep_the_umask() {
	local mk='mkdir open; chmod 1777 open; echo w > open/w; chmod 0666 open/w
echo x > run.sh; chmod 0777 run.sh; echo p > private; chmod 0600 private
chmod 0666 edit.txt; chmod 0777 olddir'
	mkrepo "$T/ws"
	(umask 022; crun --json --workspace "$T/ws" --export-to "$T/result" -- /bin/sh -c "$mk")
	expect_eq "exit" "$(rc)" 0 || { cat "$T/err"; return 1; }
	expect_eq "dir" "$(stat -c %a "$T/result/open")" 755
	expect_eq "file" "$(stat -c %a "$T/result/open/w")" 644
	expect_eq "script" "$(stat -c %a "$T/result/run.sh")" 755
	expect_eq "private" "$(stat -c %a "$T/result/private")" 600
	expect_eq "modified" "$(stat -c %a "$T/result/edit.txt")" 644
	expect_eq "a directory of the host's" "$(stat -c %a "$T/result/olddir")" 755
	expect_contains "note" "$(json export.exported < "$T/out")" "mode 1777 written as 0755"
	[ -z "$(find "$T/result" -perm /o+w | head -1)" ] || fail "writable by others: $(find "$T/result" -perm /o+w)"
	(umask 077; crun --workspace "$T/ws" --apply -- /bin/sh -c "$mk")
	expect_eq "apply: exit" "$(rc)" 0 || { cat "$T/err"; return 1; }
	expect_eq "apply: dir" "$(stat -c %a "$T/ws/open")" 700
	expect_eq "apply: file" "$(stat -c %a "$T/ws/open/w")" 600
	expect_eq "apply: script" "$(stat -c %a "$T/ws/run.sh")" 700
	expect_eq "apply: modified" "$(stat -c %a "$T/ws/edit.txt")" 600
	expect_eq "apply: a directory of the host's" "$(stat -c %a "$T/ws/olddir")" 700
}

# On a case-insensitive host (a casefold directory, vfat, an SMB share,
# WSL's drvfs) ".GIT/hooks/post-checkout" is git's hook and ".ENVRC" is
# direnv's file: the hold table reads every name in any case, and ".git."
# and "git~1" as ".git", as git's own verify_path does.
t_hold_ignores_case() {
	local mk='mkdir -p .GIT/hooks .Git git~1/hooks .VSCODE
printf "#!/bin/sh\ntouch /tmp/m\n" > .GIT/hooks/post-checkout
printf "[core]\n\tfsmonitor = touch /tmp/m\n" > .Git/config
echo x > git~1/hooks/pre-commit
echo "touch /tmp/m" > .ENVRC
echo "* filter=f" > .GITATTRIBUTES
echo "gitdir: /tmp/evil" > .GiT
printf "{\"tasks\": [{\"command\": \"touch /tmp/m\", \"runOptions\": {\"runOn\": \"folderOpen\"}}]}\n" > .VSCODE/tasks.json
echo plain > .GIT/description'
	mkrepo "$T/ws"
	crun --json --workspace "$T/ws" --export-to "$T/result" -- /bin/sh -c "$mk"
	expect_eq "exit" "$(rc)" 0 || { cat "$T/err"; return 1; }
	for p in .GIT/hooks/post-checkout .Git/config git~1/hooks/pre-commit .ENVRC \
		.GITATTRIBUTES .GiT .VSCODE/tasks.json; do
		[ ! -e "$T/result/$p" ] || fail "$p came out"
		expect_contains "held $p" "$(json export.held < "$T/out")" "\"$p\""
	done
	expect_eq "a plain file beside them" "$(cat "$T/result/.GIT/description")" plain
	crun --json --workspace "$T/ws" --apply -- /bin/sh -c "$mk"
	expect_eq "apply: exit" "$(rc)" 0 || { cat "$T/err"; return 1; }
	[ ! -e "$T/ws/.GIT/hooks/post-checkout" ] || fail "apply: the hook came out"
	[ ! -e "$T/ws/.ENVRC" ] || fail "apply: .ENVRC came out"
}

# --export-to's and --patch's directory is opened before the sandbox runs:
# a directory on the way that the sandbox may write (a --rw bind), swapped
# for a symlink to one only the caller may write, no longer leads the
# export, made as the caller, there.  It lands where the caller said.
t_export_dest_opened_before_the_run() {
	local swap='echo evil > /workspace/x; mv /share/sub /share/sub2 && ln -s "$1" /share/sub'
	mkrepo "$T/ws"
	mkdir -p "$T/share/sub" "$T/victim"
	chmod 700 "$T/victim"
	if [ "$ME" = 0 ]; then chown -R 65534:65534 "$T/share"; fi
	crun --rw "$T/share:/share" --workspace "$T/ws" --patch "$T/share/sub/p.diff" \
		-- /bin/sh -c "$swap" sh "$T/victim"
	expect_eq "patch: exit" "$(rc)" 0 || { cat "$T/err"; return 1; }
	[ -L "$T/share/sub" ] || fail "the sandbox did not swap the directory"
	[ -z "$(ls -A "$T/victim")" ] || fail "the patch followed the swapped link: $(ls "$T/victim")"
	expect_contains "patch: where asked" "$(cat "$T/share/sub2/p.diff")" "+evil"
	rm -f "$T/share/sub" && mv "$T/share/sub2" "$T/share/sub"
	crun --rw "$T/share:/share" --workspace "$T/ws" --export-to "$T/share/sub/out" \
		-- /bin/sh -c "$swap" sh "$T/victim"
	expect_eq "to: exit" "$(rc)" 0 || { cat "$T/err"; return 1; }
	[ -z "$(ls -A "$T/victim")" ] || fail "the export followed the swapped link: $(ls "$T/victim")"
	expect_eq "to: where asked" "$(cat "$T/share/sub2/out/x")" evil
	# a link an earlier run left in the bind is not followed either
	rm -rf "$T/share/sub2"
	crun --rw "$T/share:/share" --workspace "$T/ws" --patch "$T/share/sub/p.diff" \
		-- /bin/sh -c 'echo evil > /workspace/x'
	expect_eq "a link already there: exit" "$(rc)" 125
	expect_contains "a link already there: said" "$(< "$T/err")" "the symlink sub on the way lies in a --rw bind"
	[ -z "$(ls -A "$T/victim")" ] || fail "the patch followed the link: $(ls "$T/victim")"
	# one outside the binds is the caller's own, followed as ever
	ln -s "$T/victim" "$T/mine"
	crun --rw "$T/share:/share" --workspace "$T/ws" --patch "$T/mine/p.diff" \
		-- /bin/sh -c 'echo evil > /workspace/x'
	expect_eq "the caller's link: exit" "$(rc)" 0 || { cat "$T/err"; return 1; }
	[ -f "$T/victim/p.diff" ] || fail "the caller's own link was not followed"
	# nor one that --apply's workspace is reached through
	ln -s "$T/victim" "$T/share/ws"
	crun --rw "$T/share:/share" --workspace "$T/share/ws" --apply -- /bin/sh -c 'echo evil > x'
	expect_eq "apply through the bind's link: exit" "$(rc)" 125
	expect_contains "apply: said" "$(< "$T/err")" "the symlink ws on the way lies in a --rw bind"
	[ ! -e "$T/victim/x" ] || fail "the apply followed the link"
	crun --workspace "$T/ws" --patch "$T/nodir/p.diff" -- /bin/true
	expect_eq "no directory: exit" "$(rc)" 125
	expect_contains "no directory: said before the run" "$(< "$T/err")" "nodir: No such file"
}

# The table reads .vscode/tasks.json and .git/modules/*/config by those
# names: a symlink .vscode -> d (d/tasks.json, runOn folderOpen) or
# .git/modules -> ../m (m/sub/config, core.fsmonitor) let a host's VS
# Code or git read, through the link, what the table checked under other
# names, or not at all.  Such a link is held; an ordinary one is not.
t_hold_links_it_would_read_through() {
	local mk='mkdir -p d m/sub s
printf "{\"tasks\": [{\"command\": \"touch /tmp/m\", \"runOptions\": {\"runOn\": \"folderOpen\"}}]}\n" > d/tasks.json
printf "[core]\n\tfsmonitor = touch /tmp/m\n" > m/sub/config
ln -s d .vscode; ln -s ../d s/.VSCode; ln -s ../m .git/modules; ln -s d plain'
	mkrepo "$T/ws"
	crun --json --workspace "$T/ws" --export-to "$T/result" -- /bin/sh -c "$mk"
	expect_eq "exit" "$(rc)" 0 || { cat "$T/err"; return 1; }
	for p in .vscode s/.VSCode .git/modules; do
		[ ! -L "$T/result/$p" ] || fail "the link $p came out"
		expect_contains "held $p" "$(json export.held < "$T/out")" "\"$p\""
	done
	[ -L "$T/result/plain" ] || fail "an ordinary link inside the tree was held"
	crun --json --workspace "$T/ws" --apply -- /bin/sh -c "$mk"
	expect_eq "apply: exit" "$(rc)" 0 || { cat "$T/err"; return 1; }
	[ ! -L "$T/ws/.vscode" ] && [ ! -L "$T/ws/.git/modules" ] || fail "apply: a link came out"
}

# A repository whose .git/config names a hooks directory in the working
# tree (core.hooksPath = .githooks, committed with the project; husky's
# .husky): git runs what the sandbox wrote there on the next commit.
t_hold_hooks_path() {
	mkrepo "$T/ws"
	mkdir -p "$T/marks" "$T/home"
	hostgit "$T/ws" config core.hooksPath ./.githooks
	crun --json --workspace "$T/ws" --apply -- /bin/sh -c "mkdir -p .githooks .husky
printf '#!/bin/sh\ntouch $T/marks/hook\n' > .githooks/pre-commit; chmod 755 .githooks/pre-commit
echo 'touch $T/marks/husky' > .husky/pre-commit; echo ok > other.txt"
	expect_eq "exit" "$(rc)" 0 || { cat "$T/err"; return 1; }
	expect_contains "held" "$(json export.held < "$T/out")" "core.hooksPath"
	expect_contains "held husky" "$(json export.held < "$T/out")" ".husky/pre-commit"
	expect_eq "the rest applied" "$(cat "$T/ws/other.txt")" ok
	use_repo "$T/ws"
	[ -z "$(ls -A "$T/marks")" ] || fail "a hook ran on the host: $(ls "$T/marks")"
}

# What the tools beside the sandbox read and run on the host without being
# asked (the agents' hooks and MCP servers, pre-commit, lefthook,
# Mercurial, mise): held, each with its reason; the rest comes out.
t_hold_agents_and_hook_tools() {
	local want=".claude/settings.json:Claude Code
sub/.claude/settings.local.json:Claude Code
.mcp.json:MCP servers
.vscode/mcp.json:VS Code
.cursor/mcp.json:Cursor
.cursor/hooks.json:Cursor
.gemini/settings.json:Gemini CLI
.pre-commit-config.yaml:pre-commit
lefthook.yml:lefthook
.lefthook-local.yaml:lefthook
.hg/hgrc:Mercurial
mise.toml:mise
.mise.local.toml:mise
.config/mise/config.toml:mise" line path why held
	mkrepo "$T/ws"
	crun --json --workspace "$T/ws" --export-to "$T/result" -- /bin/sh -c '
for p in .claude/settings.json sub/.claude/settings.local.json .mcp.json \
	.vscode/mcp.json .cursor/mcp.json .cursor/hooks.json .gemini/settings.json \
	.pre-commit-config.yaml lefthook.yml .lefthook-local.yaml .hg/hgrc mise.toml \
	.mise.local.toml .config/mise/config.toml; do
	mkdir -p "$(dirname "$p")"; echo "{\"run\": \"touch /tmp/x\"}" > "$p"
done
echo ok > settings.json; mkdir -p claude; echo ok > claude/settings.json'
	expect_eq "exit" "$(rc)" 0 || { cat "$T/err"; return 1; }
	held=$(pyjq '"\n".join(e["path"] + ":" + e["reason"] for e in v["export"]["held"])' "$T/out")
	while IFS= read -r line; do
		path=${line%%:*} why=${line#*:}
		expect_contains "held $path" "$(grep -F "$path:" <<< "$held" || true)" "$why"
		[ ! -e "$T/result/$path" ] || fail "$path came out"
	done <<< "$want"
	expect_eq "a settings.json elsewhere" "$(cat "$T/result/settings.json")" ok
	expect_eq "claude/ without the dot" "$(cat "$T/result/claude/settings.json")" ok
}

# The user's own .git/config runs programs from the working tree (an
# fsmonitor hook, an alias, a textconv through an interpreter): the
# sandbox's new versions of them are held, and git status, diff and the
# alias run nothing of the sandbox's afterwards.
t_hold_programs_the_config_runs() {
	mkrepo "$T/ws"
	mkdir -p "$T/marks" "$T/home" "$T/ws/tools"
	printf '#!/bin/sh\nexit 0\n' > "$T/ws/tools/fsmon"
	chmod 755 "$T/ws/tools/fsmon"
	if [ "$ME" = 0 ]; then chown -R 65534:65534 "$T/ws/tools"; fi
	hostgit "$T/ws" config core.fsmonitor ./tools/fsmon
	hostgit "$T/ws" config alias.t '!tools/al.sh x'
	hostgit "$T/ws" config diff.z.textconv 'sh "tools/conv [1].sh"'
	crun --json --workspace "$T/ws" --apply -- /bin/sh -c "
printf '#!/bin/sh\ntouch $T/marks/fsmon\n' > tools/fsmon
printf '#!/bin/sh\ntouch $T/marks/alias\n' > tools/al.sh; chmod 755 tools/al.sh
printf 'touch $T/marks/conv\n' > 'tools/conv [1].sh'
echo '*.gz diff=z' > .gitattributes.not; echo ok > other.txt"
	expect_eq "exit" "$(rc)" 0 || { cat "$T/err"; return 1; }
	held=$(json export.held < "$T/out")
	expect_contains "fsmonitor held" "$held" '"tools/fsmon"'
	expect_contains "alias held" "$held" '"tools/al.sh"'
	expect_contains "textconv held" "$held" '"tools/conv [1].sh"'
	expect_eq "the rest applied" "$(cat "$T/ws/other.txt")" ok
	use_repo "$T/ws"
	hostgit "$T/ws" t
	[ -z "$(ls -A "$T/marks")" ] || fail "the host ran the sandbox's: $(ls "$T/marks")"
}

t_allow_risky_is_logged() {
	mkrepo "$T/ws"
	crun --json --events "$T/ev" --workspace "$T/ws" --export-to "$T/result" \
		--allow-risky .envrc -- /bin/sh -c 'echo "export X=1" > .envrc; echo "[core]" > x.cfg'
	expect_eq "exit" "$(rc)" 0
	expect_eq "envrc" "$(cat "$T/result/.envrc")" "export X=1"
	grep '"type":"export.allow_risky"' "$T/ev" | grep -q '"pattern":".envrc"' ||
		fail "no export.allow_risky event"
}

# ---- an ordinary session round-trips exactly ---------------------------

write_session() {
	cat > "$T/session.sh" <<'EOF'
#!/bin/sh
set -e
cd "$1"
printf 'one\nTWO\nthree\nfour\n' > edit.txt
echo added > added.txt
rm gone.txt
mv old-name.txt new-name.txt
chmod +x script.sh
seq 1 3000 | gzip -n > data.gz
printf 'bin\000ary' > new.bin
rm -r olddir
mkdir -p newdir/deeper && echo n > newdir/deeper/n
EOF
	chmod 755 "$T/session.sh"
}

# Files, links and modes of a tree, .git aside.
tree_of() {
	(cd "$1" && find . -path ./.git -prune -o ! -name . -printf '%p %y %m\n' | sort &&
	 find . -path ./.git -prune -o -type f -print | sort | xargs md5sum)
}

t_session_round_trips() {
	mkrepo "$T/ws"
	write_session
	cp -a "$T/ws" "$T/ref"
	"$T/session.sh" "$T/ref"
	want=$(tree_of "$T/ref")

	crun --json --ro "$T/session.sh:/opt/session.sh" --workspace "$T/ws" \
		--export-to "$T/result" -- /opt/session.sh /workspace
	expect_eq "exit" "$(rc)" 0
	expect_eq "held" "$(json export.held < "$T/out")" "[]"
	expect_eq "--export-to" "$(tree_of "$T/result")" "$want"

	crun --json --ro "$T/session.sh:/opt/session.sh" --workspace "$T/ws" \
		--patch "$T/p.diff" -- /opt/session.sh /workspace
	expect_eq "exit" "$(rc)" 0
	grep -q "GIT binary patch" "$T/p.diff" || fail "no binary patch"
	cp -a "$T/ws" "$T/patched"
	(cd "$T/patched" && HOME=$T/home git -c safe.directory='*' apply "$T/p.diff") ||
		fail "git apply refused the patch"
	expect_eq "--patch + git apply" "$(tree_of "$T/patched")" "$want"

	crun --json --ro "$T/session.sh:/opt/session.sh" --workspace "$T/ws" \
		--apply -- /opt/session.sh /workspace
	expect_eq "exit" "$(rc)" 0
	expect_eq "conflicts" "$(json export.conflicts < "$T/out")" "[]"
	expect_eq "--apply" "$(tree_of "$T/ws")" "$want"
}

# The names the agent chose, reported on the operator's terminal: a held
# hook and a link out of the tree named with escape sequences (a window
# title, a screen clear) are shown as \xNN, never sent as they are.
t_held_names_do_not_reach_the_terminal() {
	mkrepo "$T/ws"
	rc=0
	timeout 120 "$CORRAL" run --workspace "$T/ws" --apply -- /bin/sh -c \
		'mkdir -p .git/hooks && echo x > ".git/hooks/a$(printf "\033]2;pwned\007")" &&
		 ln -s /etc/passwd "b$(printf "\033[2J")"' \
		< /dev/null > "$T/stdout" 2> "$T/stderr" || rc=$?
	expect_eq "exit" "$rc" 0
	expect_contains "the hook, held and named" "$(< "$T/stderr")" \
		'held back .git/hooks/a\x1b]2;pwned\x07: '
	expect_contains "the link, held and named" "$(< "$T/stderr")" 'held back b\x1b[2J: '
	! grep -q "$(printf '\033')" "$T/stderr" || fail "an escape reached stderr: $(od -c "$T/stderr" | head -5)"
	! grep -q "$(printf '\007')" "$T/stderr" || fail "a BEL reached stderr"
}

# A right-to-left override (U+202E) in a held name turned the rest of it
# around on the terminal: ".git/hooks/x<RLO>gnp.sh" read as "xhs.png".
# Its bytes are shown as \xNN, as a control's are.
t_held_names_bidi_shown() {
	mkrepo "$T/ws"
	rc=0
	timeout 120 "$CORRAL" run --workspace "$T/ws" --apply -- /bin/sh -c \
		'mkdir -p .git/hooks && echo x > ".git/hooks/x$(printf "\342\200\256")gnp.sh"' \
		< /dev/null > "$T/stdout" 2> "$T/stderr" || rc=$?
	expect_eq "exit" "$rc" 0
	expect_contains "the hook, held and named" "$(< "$T/stderr")" \
		'held back .git/hooks/x\xe2\x80\xaegnp.sh: '
	! LC_ALL=C grep -q $'\xe2\x80\xae' "$T/stderr" || fail "U+202E reached stderr"
}

# An export.held event a file held back, and the sandbox writes as many
# hooks as it likes: past the events budget they are counted, not written
# one by one (500 hooks were 500 lines, 176 KB, past a budget of 16K).
# The report and stderr still name every one.
t_held_files_keep_the_events_budget() {
	mkrepo "$T/ws"
	printf '{"events": {"budget": "16K", "verbatim": 2, "summary_interval": "60s"}}\n' > "$T/p.json"
	crun --json --policy "$T/p.json" --events "$T/ev" --workspace "$T/ws" \
		--export-to "$T/result" -- /bin/sh -c \
		'mkdir -p .git/hooks; for i in $(seq 1 500); do echo x > .git/hooks/h$i; done'
	expect_eq "exit" "$(rc)" 0
	expect_eq "all held" "$(json export.held < "$T/out" | grep -o '"path"' | wc -l)" 500
	local whole counted
	read -r whole counted < <(kind_counts "$T/ev" export.held)
	[ "$whole" -lt 100 ] || fail "$whole export.held lines past a budget of 16K"
	expect_eq "each one counted" "$((whole + counted))" 500
	"$CORRAL" audit verify "$T/ev" > /dev/null || fail "the log does not verify"
}

# A finding the hold table quotes from what the sandbox wrote (a filter's
# name in .gitattributes) need not be UTF-8: the held file's event and
# entry still name it and say why, the bytes as U+FFFD.  json_string() of
# them was NULL, and the event said only "recorded by the supervisor".
t_held_reason_not_utf8_keeps_the_record() {
	mkrepo "$T/ws"
	crun --json --events "$T/ev" --workspace "$T/ws" --export-to "$T/result" -- \
		/bin/sh -c 'printf "* filter=\377\033[2Jx\n" > .gitattributes'
	expect_eq "exit" "$(rc)" 0
	local ev reason
	ev=$(grep '"type":"export.held"' "$T/ev")
	expect_contains "the event names the file" "$ev" '"path":".gitattributes"'
	expect_contains "the event says why" "$ev" 'filter=\uFFFD\u001B[2Jx: attributes name'
	reason=$(json export.held < "$T/out" | /usr/bin/python3 -c '
import json, sys
print(json.load(sys.stdin)[0].get("reason"))')
	expect_contains "the entry says why" "$reason" "attributes name the filter"
	"$CORRAL" audit verify "$T/ev" > /dev/null || fail "the log does not verify"
}

t_apply_conflict() {
	mkrepo "$T/ws"
	mkfifo "$T/in"
	exec 3<>"$T/in"
	# the command says "ready" once it changed both files, then waits for
	# the host to change one of them
	( timeout 120 "$CORRAL" run --workspace "$T/ws" --apply -- /bin/sh -c \
		'echo sandbox > edit.txt; echo sandbox > gone.txt; echo ready; read x' \
		< "$T/in" > "$T/stdout" 2> "$T/stderr"; echo $? > "$T/rc" ) &
	pid=$!
	for ((i = 0; i < 1200; i++)); do
		# (-f first: $(< F) of no F ends the test, where cat said nothing)
		[[ -f $T/stdout && $(< "$T/stdout") == *ready* ]] && break
		kill -0 $pid 2>/dev/null || break
		doze 0.1
	done
	echo host > "$T/ws/edit.txt"
	echo go >&3
	wait $pid
	exec 3>&-
	expect_eq "exit" "$(< "$T/rc")" 0
	expect_contains "conflict" "$(< "$T/stderr")" "conflict at edit.txt: changed on the host since the sandbox started"
	expect_eq "the host's change kept" "$(cat "$T/ws/edit.txt")" host
	expect_eq "the other change applied" "$(cat "$T/ws/gone.txt")" sandbox
}

t_export_limits() {
	mkrepo "$T/ws"
	echo '{"export": {"max_files": 3}}' > "$T/policy.json"
	crun --policy "$T/policy.json" --workspace "$T/ws" --export-to "$T/result" \
		-- /bin/sh -c 'for i in 1 2 3 4 5 6; do echo $i > f$i; done'
	expect_eq "exit" "$(rc)" 125
	expect_contains "error" "$(< "$T/err")" "export.max_files (3"
	crun --workspace "$T/ws" --export-to "$T/ws/inside" -- /bin/true
	expect_eq "inside" "$(rc)" 125
	expect_contains "inside msg" "$(< "$T/err")" "inside the workspace"
	crun --apply -- /bin/true
	expect_eq "no workspace" "$(rc)" 125
	expect_contains "no workspace msg" "$(< "$T/err")" "needs a workspace"
	mkdir "$T/exists"
	crun --workspace "$T/ws" --export-to "$T/exists" -- /bin/true
	expect_eq "exists" "$(rc)" 125
	expect_contains "exists msg" "$(< "$T/err")" "exists already"
}

# The changes' paths are bounded in bytes, whatever max_files says: 9000
# empty files (no disk) 15 directories of 250 bytes deep name 36 MB; the
# diff stops at 32 MiB with a sentence.  99000 such were a 400 MB diff, an
# 800 MB patch and 2 GB of the daemon's memory.  A tree as deep with a few
# files in it still comes out.
t_export_name_bytes() {
	local mk='import os, sys
d = "/workspace/deep/" + "/".join(["d" * 250] * 15)
os.makedirs(d)
for i in range(int(sys.argv[1])):
    open(d + "/%06d" % i + "f" * 240, "w").close()'
	mkrepo "$T/ws"
	crun --workspace "$T/ws" --patch "$T/p" -- python3 -c "$mk" 9000
	expect_eq "exit" "$(rc)" 125
	expect_contains "error" "$(< "$T/err")" "more than 32 MiB of paths"
	crun --workspace "$T/ws" --export-to "$T/result" -- python3 -c "$mk" 3
	expect_eq "a few: exit" "$(rc)" 0 || { cat "$T/err"; return 1; }
	expect_eq "a few: exported" "$(find "$T/result/deep" -type f | wc -l)" 3
}

# --patch FILE is written as it is made: the CLI's memory does not grow
# with what the sandbox wrote (24 MiB of random bytes, a 30 MB patch, was
# all in memory at once), the patch still applies, and a failed export
# leaves FILE as it was, with nothing of its own beside it.
t_patch_streamed_to_its_file() {
	local mk='import os, sys
with open("/workspace/blob.bin", "wb") as f:
    for _ in range(int(sys.argv[1])):
        f.write(os.urandom(1 << 20))'
	maxrss() { peak_rss /dev/null timeout 120 "$CORRAL" run "$@"; }
	mkrepo "$T/ws"
	read -r small rc < <(maxrss --workspace "$T/ws" --patch "$T/small.diff" -- \
		python3 -c "$mk" 1)
	expect_eq "1 MiB: exit" "$rc" 0
	read -r big rc < <(maxrss --workspace "$T/ws" --patch "$T/p.diff" -- \
		python3 -c "$mk" 24)
	expect_eq "24 MiB: exit" "$rc" 0 || { cat "$T/err"; return 1; }
	[ "$(stat -c %s "$T/p.diff")" -gt 25000000 ] || fail "the patch is $(stat -c %s "$T/p.diff") bytes"
	[ "$big" -lt $(( small + 16384 )) ] ||
		fail "corral's peak RSS grew with the patch: $big KiB, $small KiB for 1 MiB"
	cp -a "$T/ws" "$T/patched"
	(cd "$T/patched" && HOME=$T/home GIT_CONFIG_NOSYSTEM=1 timeout 60 git apply "$T/p.diff") ||
		fail "the patch does not apply"
	expect_eq "the applied blob's size" "$(stat -c %s "$T/patched/blob.bin")" $(( 24 << 20 ))

	# over export.max_bytes: FILE keeps what it had
	echo '{"export": {"max_bytes": 1048576}}' > "$T/policy.json"
	echo before > "$T/p.diff"
	crun --policy "$T/policy.json" --workspace "$T/ws" --patch "$T/p.diff" -- \
		python3 -c "$mk" 2
	expect_eq "too big: exit" "$(rc)" 125
	expect_contains "too big: said" "$(< "$T/err")" "export.max_bytes"
	expect_eq "FILE as it was" "$(cat "$T/p.diff")" before
	expect_eq "nothing beside it" "$(find "$T" -maxdepth 1 -name 'p.diff.*' | wc -l)" 0
}

# A signal to corral once the command has ended, while its patch is
# being made (strace slows each write, so that it comes midway): the
# export is cut short at once, not finished first nor left half-written.
# FILE keeps what it had, nothing is left beside it, and corral exits
# 128+N saying why.  Before, the export went on to its end (a 258 MB
# patch: 6.3 s after the SIGTERM), then exited as if nothing had come.
t_export_cut_short_by_a_signal() {
	command -v strace >/dev/null || { skip "no strace"; return 77; }
	local mk='import os
with open("/workspace/blob.bin", "wb") as f:
    for _ in range(16):
        f.write(os.urandom(1 << 20))'
	local rc=0
	mkrepo "$T/ws"
	echo before > "$T/p.diff"
	signal_midway TERM "$T" --workspace "$T/ws" --patch "$T/p.diff" -- \
		python3 -c "$mk" || rc=$?
	expect_eq "exit" "$rc" 143
	expect_contains "said" "$(< "$T/err")" "the export was cut short by SIGTERM"
	expect_eq "FILE as it was" "$(cat "$T/p.diff")" before
	expect_eq "nothing beside it" "$(compgen -G "$T/p.diff.*" || true)" ""
	# SIGKILL, which no handler sees: the new file, unnamed until whole
	# (O_TMPFILE), goes with corral; named, it stayed beside FILE
	rc=0
	signal_midway KILL "$T" --workspace "$T/ws" --patch "$T/p.diff" -- \
		python3 -c "$mk" || rc=$?
	expect_eq "KILL: exit" "$rc" 137
	expect_eq "KILL: FILE as it was" "$(cat "$T/p.diff")" before
	expect_eq "KILL: nothing beside it" "$(compgen -G "$T/p.diff.*" || true)" ""
}

# One large file must not hold a signal until it is whole: --export-to
# stops within it, and leaves no part of it under either name.
t_export_cut_short_within_a_file() {
	command -v strace >/dev/null || { skip "no strace"; return 77; }
	local rc=0
	mkdir -p "$T/ws"
	head -c 16777216 /dev/urandom > "$T/ws/blob.bin"
	signal_midway TERM "$T/result" --workspace "$T/ws" --export-to "$T/result" -- \
		true || rc=$?
	expect_eq "exit" "$rc" 143
	expect_contains "said" "$(< "$T/err")" \
		"the export was cut short by SIGTERM while writing blob.bin"
	expect_eq "no part of the file" "$(ls -A "$T/result")" ""
	# SIGKILL: no handler; the file is unnamed until whole (O_TMPFILE)
	rm -rf "$T/result"
	rc=0
	signal_midway KILL "$T/result" --workspace "$T/ws" --export-to "$T/result" -- \
		true || rc=$?
	expect_eq "KILL: exit" "$rc" 137
	expect_eq "KILL: no part of the file" "$(ls -A "$T/result")" ""
}

# signal_midway SIG DIR RUN_ARGS...: corral run with each of its writes
# slowed by strace, sent SIG once it holds a new file of the export's in
# DIR (an unnamed one, or named .corral-export.*); returns corral's exit
# status, 1 (and fails) if it never did.
signal_midway() {
	local sig=$1 dir=$2 st sup="" i rc=0 forks="" delay=100000
	shift 2
	# MIDWAY_WRITER=1: the export is written by a child of corral's (as
	# root, the destination's owner's writer): it is traced and looked at
	# too, each write 50 ms (the run's own writes are then traced as well):
	# 256 writes of 64 KiB, a 13 s window (at 20 ms, a loaded check once
	# missed its 5 s and saw the export end whole); the signal goes as soon
	# as the writer is seen, so a wider window costs nothing
	[ -z "${MIDWAY_WRITER:-}" ] || { forks=-f; delay=50000; }
	# LeakSanitizer cannot run under ptrace
	ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" \
	timeout 120 strace $forks -qq -o /dev/null -e trace=write \
		-e inject=write:delay_enter=$delay \
		"$CORRAL" run "$@" > "$T/out" 2> "$T/err" < /dev/null &
	st=$!
	trap "end_traced $st" EXIT
	# looked at every 50 ms, with no process a look (pgrep read all of
	# /proc twice a round, readlink was a fork an fd, sleep one a round:
	# the test's CPU was more the looking than corral's)
	i=0
	until [ -n "$sup" ] && writing "$sup" "$dir" || [ $i -ge 1200 ]; do
		kill -0 "$st" 2>/dev/null || break
		# timeout's strace's corral, found once
		[ -n "$sup" ] || { child_named "$st" strace && child_named "$KID" corral &&
			sup=$KID; } || true
		doze 0.05
		i=$((i + 1))
	done
	[ -n "$sup" ] && writing "$sup" "$dir" || {
		end_traced "$st" $sup; trap - EXIT
		fail "no export being written: $(tail -3 "$T/err")"; return 1; }
	kill -"$sig" "$sup"
	wait "$st" || rc=$?
	trap - EXIT
	return $rc
}

# children PID: KIDS, PID's children (by /proc, no fork)
children() {
	local f more
	KIDS=()
	for f in /proc/"$1"/task/*/children; do
		more=()	# (no newline in the file: read says 1 and fills it)
		read -r -a more 2>/dev/null < "$f" || true
		KIDS+=("${more[@]}")
	done
	return 0
}

# child_named PID NAME: KID, PID's child whose comm is NAME; 1 if none
child_named() {
	local p comm
	children "$1"
	for p in "${KIDS[@]}"; do
		comm=
		read -r comm 2>/dev/null < /proc/"$p"/comm || true
		[ "$comm" != "$2" ] || { KID=$p; return 0; }
	done
	return 1
}

# writing PID DIR: PID, or with MIDWAY_WRITER a child of it, holds a new
# file in DIR open (as lib.sh's new_file_open, with one find a process,
# not a readlink an fd)
writing() {
	local p l pids=("$1")
	if [ -n "${MIDWAY_WRITER:-}" ]; then
		children "$1"
		pids+=("${KIDS[@]}")
	fi
	for p in "${pids[@]}"; do
		while IFS= read -r l; do
			case $l in
			"$2/#"*" (deleted)"|"$2/"*.corral-export.*) return 0 ;;
			esac
		done < <(find /proc/"$p"/fd -mindepth 1 -maxdepth 1 -printf '%l\n' 2>/dev/null)
	done
	return 1
}

# As root into a user's directory the export is written by a forked writer
# with that user's ids: a signal to corral midway reaches it (corral sends
# it on) and cuts it short as in line: 143, said, nothing left in the new
# directory.  Root only (unprivileged corral writes in line).
t_export_as_owner_cut_short_by_a_signal() {
	[ "$ME" = 0 ] || { skip "the writer is root's way of writing as another user"; return 77; }
	command -v strace >/dev/null || { skip "no strace"; return 77; }
	local rc=0
	mkdir -p "$T/ws" "$T/u"
	chown 1000:1000 "$T/u"
	head -c 16777216 /dev/urandom > "$T/ws/blob.bin"
	MIDWAY_WRITER=1 signal_midway TERM "$T/u/result" --workspace "$T/ws" \
		--export-to "$T/u/result" -- true || rc=$?
	expect_eq "exit" "$rc" 143
	expect_contains "whom" "$(< "$T/err")" "written as uid 1000 gid 1000"
	expect_contains "said" "$(< "$T/err")" \
		"the export was cut short by SIGTERM while writing blob.bin"
	expect_eq "nothing in the new directory" "$(ls -A "$T/u/result")" ""
	expect_eq "no writer left" "$(pgrep -f -x "$CORRAL run --workspace $T/ws --export-to $T/u/result -- true" || true)" ""
}

t_halted_exports_nothing() {
	mkrepo "$T/ws"
	echo '{"abort": {"max_wall_seconds": 1}}' > "$T/policy.json"
	crun --policy "$T/policy.json" --workspace "$T/ws" --export-to "$T/result" \
		-- /bin/sh -c 'echo x > new.txt; sleep 30'
	expect_eq "exit" "$(rc)" 137
	expect_contains "said" "$(< "$T/err")" "the sandbox was halted: nothing is exported"
	[ ! -e "$T/result" ] || fail "a halted sandbox's work came out"
}

# A tripwire under /workspace is planted through the overlay before the
# agent runs, so the upper layer holds it; it is corral's decoy, not a
# change of the agent's.  It came out with the rest: its bytes in the
# patch, and the decoy written into the host's workspace by --apply,
# after which every run with the same policy failed to start ("a tripwire
# is planted only where nothing is").  A directory made for it stays in
# the sandbox too, unless it holds something of the agent's.
t_tripwires_stay_in_the_sandbox() {
	local mk='echo region > .aws/config; echo new > new.txt'
	mkrepo "$T/ws"
	echo '{"abort": {"tripwires": ["/workspace/.aws/credentials", "/workspace/deep/er/key.pem"]}}' \
		> "$T/policy.json"
	crun --policy "$T/policy.json" --workspace "$T/ws" --patch "$T/p.diff" -- /bin/sh -c "$mk"
	expect_eq "patch: exit" "$(rc)" 0 || { cat "$T/err"; return 1; }
	expect_not_contains "the patch" "$(< "$T/p.diff")" "aws_access_key_id"
	expect_not_contains "the patch's names" "$(< "$T/p.diff")" "credentials"
	expect_not_contains "the patch's names" "$(< "$T/p.diff")" "key.pem"
	expect_contains "the agent's file" "$(< "$T/p.diff")" "+++ b/.aws/config"
	crun --json --policy "$T/policy.json" --workspace "$T/ws" --export-to "$T/result" \
		-- /bin/sh -c "$mk"
	expect_eq "to: exit" "$(rc)" 0 || { cat "$T/err"; return 1; }
	[ ! -e "$T/result/.aws/credentials" ] || fail "the decoy was exported: $(cat "$T/result/.aws/credentials")"
	[ ! -e "$T/result/deep" ] || fail "the tripwire's directory was exported"
	expect_eq "to: the agent's file" "$(cat "$T/result/.aws/config")" region
	crun --policy "$T/policy.json" --workspace "$T/ws" --apply -- /bin/sh -c "$mk"
	expect_eq "apply: exit" "$(rc)" 0 || { cat "$T/err"; return 1; }
	[ ! -e "$T/ws/.aws/credentials" ] || fail "the decoy was written on the host"
	[ ! -e "$T/ws/deep" ] || fail "the tripwire's directory was made on the host"
	expect_eq "apply: the agent's file" "$(cat "$T/ws/.aws/config")" region
	# stat, not open: the decoys are there again, and nothing is touched
	crun --policy "$T/policy.json" --workspace "$T/ws" -- /bin/sh -c \
		'test -s .aws/credentials && test -s deep/er/key.pem && echo planted'
	expect_eq "the next run: exit" "$(rc)" 0 || { cat "$T/err"; return 1; }
	expect_eq "planted anew" "$(< "$T/out")" planted
}

# crun ARGS... : corral run, stdout to $T/out, stderr to $T/err, exit to $T/rc.
crun() {
	local rc=0
	timeout 120 "$CORRAL" run "$@" > "$T/out" 2> "$T/err" < /dev/null || rc=$?
	echo "$rc" > "$T/rc"
	return 0
}
# (crun writes it before any test reads it: no cat needed)
rc() { echo "$(< "$T/rc")"; }

[ -z "${EXPORT_LIB:-}" ] || return 0
run_tests "$@"
echo "export ($(id -un 2>/dev/null || id -u)): $PASS passed, $FAIL failed, $SKIP skipped"
[ -n "$FAILED_NAMES" ] && echo "failed:$FAILED_NAMES"
[ "$FAIL" -eq 0 ]
