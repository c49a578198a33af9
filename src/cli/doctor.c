/* doctor.c - corral doctor: what this host gives the sandbox, and what not. */
#include "cli.h"

#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

static const char doctor_usage[] =
"Usage: corral doctor\n"
"\n"
"Probe this host's kernel for every feature corral's layers use (user\n"
"namespaces, overlayfs in a user namespace, seccomp, Landlock and its ABI,\n"
"openat2, cgroups v2 or v1 and which controllers, which host ids a sandbox\n"
"maps (corral's range as root, /etc/subuid otherwise) and whether the\n"
"workspace can be idmapped, and whether --net proxy's transparent mode can\n"
"load its nftables rules), and say which layers the default policy gets\n"
"for the user running it.  A \"note\" line is about speed or the host's own\n"
"settings, not a layer, and changes no verdict.  Exit 0 when the default\n"
"policy is enforced in full, 1 when a layer is weaker (each named), 2 when\n"
"no sandbox can be built at all (or bad usage).\n"
"\n"
"Example:\n"
"  corral doctor | grep WEAK    # what this host, as you, lacks\n";

static void line(const char *what, bool ok, const char *detail)
{
	printf("  %-12s %-5s %s\n", what, ok ? "ok" : "WEAK", detail);
}

/*
 * The filter as it would be loaded: its size, and the highest syscall
 * number it knows (above it every call is denied, so a newer kernel adds
 * nothing the sandbox can reach).
 */
static bool seccomp_line(const struct corral_features *f)
{
	char buf[160];
	bool ok = f->seccomp && f->seccomp_rules && f->seccomp_highest >= 0 &&
		  !f->seccomp_unresolved;

	if (!f->seccomp)
		snprintf(buf, sizeof(buf), "no seccomp: the kernel surface is not reduced");
	else if (!f->seccomp_rules)
		snprintf(buf, sizeof(buf), "the filter cannot be built here (see corral run's error)");
	else if (f->seccomp_highest < 0)
		snprintf(buf, sizeof(buf), "%u rules in force; no ceiling known for this "
			 "architecture: calls newer than the table are allowed", f->seccomp_rules);
	else
		snprintf(buf, sizeof(buf), "%u rules in force; highest syscall known %d, "
			 "every call above it denied%s", f->seccomp_rules, f->seccomp_highest,
			 f->seccomp_unresolved ? "; some table names unknown here" : "");
	line("seccomp", ok, buf);
	return ok;
}

/* How a share counted in bytes reads: "host memory", "host tcp". */
struct share_words {
	const char *name;
	const char *what;	/* after the size */
	const char *file;	/* the parent's bound, as a person names it */
	const char *lack;	/* ... where it has none */
	const char *whose;	/* after "all sandboxes" */
	const char *past;	/* what happens past the host's pool */
	const char *part;	/* the share, of that pool */
	/*
	 * With the parent's peak (corral_share.peak): what its meeting the
	 * share did, which no result says; NULL where the peak is not kept.
	 */
	const char *met;
};

static const struct share_words memory_words = {
	"host memory", "", "the memory limit", "memory limit", "",
	"past the host's memory its own OOM killer chooses", "three quarters",
	NULL,	/* an OOM kill in the share is said in the result */
};

static const struct share_words tcp_words = {
	"host tcp", " of TCP buffers", "memory.kmem.tcp", "memory.kmem.tcp limit",
	"' TCP buffers",
	"past the host's tcp_mem every TCP socket of the host is refused memory",
	"half of it",
	"every sandbox's connections were held back then, which no result says",
};

static void bytes_share_line(const struct corral_share *s, const struct share_words *w)
{
	char size[32], peak[32], buf[1024];
	bool met = s->value && s->peak >= s->value;
	size_t n;

	corral_format_size(s->value ? s->value : s->host, size, sizeof(size));
	if (s->value)
		n = (size_t)snprintf(buf, sizeof(buf), "all sandboxes together: at most "
				     "%s%s (%s of %s%s)", size, w->what, w->file, s->parent,
				     s->planned ? ", given when corral makes it" : "");
	else
		n = (size_t)snprintf(buf, sizeof(buf), "nothing bounds all sandboxes%s "
				     "together: %s has no %s, and %s; %s there (%s) leaves "
				     "the host the rest", w->whose, s->parent, w->lack,
				     w->past, size, w->part);
	corral_format_size(s->peak, peak, sizeof(peak));
	if (w->met && s->peak && n < sizeof(buf) && met)
		snprintf(buf + n, sizeof(buf) - n, "; they met it since it was made "
			 "(%s held at once): %s", peak, w->met);
	else if (w->met && s->peak && n < sizeof(buf))
		snprintf(buf + n, sizeof(buf) - n, "; they have held up to %s at once "
			 "since it was made", peak);
	printf("  %-12s %-5s %s\n", w->name, s->value && !met ? "ok" : "note", buf);
}

int cmd_doctor(int argc, char **argv)
{
	struct corral_features f;
	struct utsname u;
	char buf[512];
	bool sc_ok;
	int weak = 0;

	if (argc > 1) {
		bool help = !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h");

		if (help) {
			fputs(doctor_usage, stdout);
			return 0;
		}
		cli_error("doctor takes no arguments (got \"%s\"); see `corral doctor --help`",
			  argv[1]);
		return 2;
	}
	corral_probe(&f);
	uname(&u);
	printf("corral %s on Linux %s %s, as uid %d\n", CORRAL_VERSION, u.release,
	       u.machine, (int)geteuid());
	printf("layers of the default policy:\n");

	line("namespaces", f.userns, f.userns ?
	     "user, mount, pid, net, ipc, uts, cgroup" :
	     "cannot create a user namespace (disabled by sysctl or AppArmor?)");
	line("workspace", f.overlay_in_userns, f.overlay_in_userns ?
	     "overlayfs in a user namespace: copy-on-write workspace" :
	     "no overlayfs in a user namespace: --workspace cannot work");
	sc_ok = seccomp_line(&f);
	if (f.seccomp_log_to_host)
		printf("  %-12s %-5s %s\n", "host log", "note",
		       "a sandbox's own seccomp filter may log the calls it matches to "
		       "this host's audit or kernel log (kernel.seccomp.actions_logged "
		       "holds \"log\"); to keep sandboxes out of the host's logs, write "
		       "that file without \"log\"");
	line("syscall log", f.seccomp_notify, f.seccomp_notify ?
	     "denied syscalls reported to the supervisor (SECCOMP_RET_USER_NOTIF)" :
	     "no USER_NOTIF: denied syscalls fail with EPERM but are not recorded");
	if (f.landlock_abi >= 6)
		snprintf(buf, sizeof(buf), "ABI %d: files, abstract sockets, signals",
			 f.landlock_abi);
	else if (f.landlock_abi > 0)
		snprintf(buf, sizeof(buf), "ABI %d: files only (no socket/signal scoping before ABI 6)",
			 f.landlock_abi);
	else
		snprintf(buf, sizeof(buf), "not available: the mounts alone keep the host read-only");
	line("landlock", f.landlock_abi >= 6, buf);
	line("openat2", f.openat2, f.openat2 ? "paths resolved beneath a directory fd" :
	     "no openat2: host paths cannot be resolved safely");
	line("limits", strcmp(f.limits, "rlimit") != 0, f.limits_detail);
	if (f.ids.count)
		snprintf(buf, sizeof(buf), "%s: inside 0-%u are host %u-%u (1000 is host %u)",
			 f.ids.mapping, f.ids.count - 1, f.ids.range_uid,
			 f.ids.range_uid + f.ids.count - 1,
			 f.ids.uid);
	line("ids", f.ids.count > 0, f.ids.count ? buf : f.ids.note);
	line("idmap", f.idmap_mounts || geteuid() != 0, f.idmap_detail);
	if (strcmp(f.limits, "rlimit") != 0)
		printf("  %-12s %-5s %s\n", "cg moves", f.cg_moves_fast ? "ok" : "note",
		       f.cg_moves_fast ?
		       "favordynmods is set: moving a process into a group does not wait" :
		       "moving a process into a group waits for an RCU grace period after "
		       "a quiet spell (5-20 ms measured); corral serve pays it on its loop "
		       "for each new sandbox and call process, a one-shot run as root on "
		       "cgroup v1 does not. The cgroup "
		       "mount option favordynmods ends the wait host-wide, at a small cost "
		       "to every fork and exit (speed only: no layer depends on it)");
	if (f.cg_pids && f.pids_share.value)
		snprintf(buf, sizeof(buf), "all sandboxes together: at most %llu "
			 "processes (pids.max of %s%s)", f.pids_share.value,
			 f.pids_share.parent, f.pids_share.planned ?
			 ", given when corral makes it" : "");
	else if (f.cg_pids)
		snprintf(buf, sizeof(buf), "nothing bounds all sandboxes together: "
			 "the pids.max of %s is max, and each sandbox's own limit "
			 "bounds it alone; %llu there (half of the host's) leaves "
			 "the host the rest", f.pids_share.parent, f.pids_share.host);
	if (f.cg_pids)
		printf("  %-12s %-5s %s\n", "host pids", f.pids_share.value ? "ok" : "note", buf);
	if (f.cg_memory)
		bytes_share_line(&f.memory_share, &memory_words);
	if (f.tcp_share.parent[0])
		bytes_share_line(&f.tcp_share, &tcp_words);

	/* not a layer of the default policy (no network): no verdict of its own */
	printf("with --net proxy:\n");
	if (f.transparent) {
		line("transparent", true, f.transparent_detail);
		line("udp events", f.nflog, f.nflog_detail);
	} else
		printf("  %-12s %-5s %s: --net proxy fails here unless the policy sets "
		       "\"transparent\": false\n", "transparent", "WEAK",
		       f.userns ? f.transparent_detail : "no user namespace");

	if (!f.userns) {
		printf("verdict: no sandbox can be built on this host for this user\n");
		return 2;
	}
	weak = !f.overlay_in_userns || !sc_ok || f.landlock_abi < 6 ||
	       !f.openat2 || !strcmp(f.limits, "rlimit") || !f.ids.count ||
	       (!f.idmap_mounts && geteuid() == 0);
	printf("verdict: %s\n", weak ? "the default policy runs with the weaker layers marked WEAK" :
	       "the default policy is enforced in full");
	return weak ? 1 : 0;
}
