# cgroup-parents.sh - sourced (sh or bash) by tests/check.sh and
# bench/bench.sh.  Root's parent groups "<hierarchy>/corral" stay after the
# last sandbox, by design (README): a script that ran sandboxes removes the
# ones it made, so that it leaves the host's cgroups as it found them.
#
#   cg_parents_note            before any sandbox
#   cg_parents_remove WHO      at the end (WHO names the script in a warning)

cg_parents_note() {
	CG_PARENTS_BEFORE=" $(ls -d /sys/fs/cgroup/*/corral /sys/fs/cgroup/corral 2>/dev/null | tr '\n' ' ') "
}

cg_parents_remove() {
	[ "$(id -u)" = 0 ] || return 0
	for cg_parent in /sys/fs/cgroup/*/corral /sys/fs/cgroup/corral; do
		[ -d "$cg_parent" ] || continue
		case "$CG_PARENTS_BEFORE" in *" $cg_parent "*) continue ;; esac
		rmdir "$cg_parent" 2>/dev/null ||
			echo "$1: $cg_parent was made by the $1 and is not empty: left"
	done
}
