/*
 * policy_tmpfs.c - a container's tmpfs mounts (docker --tmpfs, a
 * config.json mount of type tmpfs) as a policy holds them: where, and
 * which of a mount's options can be honoured by a directory of the
 * sandbox's one scratch tmpfs (mount.c, build_tmpfs), which is what the
 * sandbox gets instead of a tmpfs of its own.
 */
#include "internal.h"
#include "policy_int.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/*
 * Where corral mounts or writes its own in every sandbox: a tmpfs on one,
 * or on a directory above one, would hide it (corral's /etc entries: the
 * user, names that resolve through its proxy; the workspace, its way out).
 */
static const char *const own_mounts[] = {
	"/tmp", "/home/agent", "/workspace", "/etc/hosts", "/etc/resolv.conf",
	"/etc/hostname", "/etc/passwd", "/etc/group", "/etc/nsswitch.conf",
};

/* Options that change nothing here: said in the header, and why. */
static const char *const taken[] = {
	"nosuid", "nodev", "suid", "dev",
	"private", "rprivate", "slave", "rslave", "shared", "rshared",
	"unbindable", "runbindable", "tmpcopyup", "notmpcopyup",
	/* the scratch's atime is the sandbox's (containerd writes strictatime) */
	"strictatime", "nostrictatime", "relatime", "norelatime", "noatime", "atime",
	"nodiratime", "diratime", "lazytime", "nolazytime",
};

static bool is_taken(const char *o)
{
	for (size_t i = 0; i < sizeof(taken) / sizeof(taken[0]); i++)
		if (!strcmp(o, taken[i]))
			return true;
	return false;
}

static int check_where(const struct corral_policy *p, const char *dst,
		       struct corral_err *err)
{
	char why[160];

	if (policy_check_dst(dst, why, sizeof(why)) < 0)
		return corral_set_err(err, -EINVAL, "a tmpfs on %s: %s", dst, why);
	for (size_t i = 0; i < sizeof(own_mounts) / sizeof(own_mounts[0]); i++)
		if (policy_path_under(own_mounts[i], dst))
			return corral_set_err(err, -EINVAL, "a tmpfs on %s: it would "
					      "hide corral's own %s", dst, own_mounts[i]);
	for (size_t i = 0; i < p->ntmpfs; i++)
		if (!strcmp(p->tmpfs[i].dst, dst))
			return corral_set_err(err, -EINVAL, "a tmpfs on %s: given "
					      "twice", dst);
	for (size_t i = 0; i < p->nbinds; i++)
		if (!strcmp(p->binds[i].dst, dst))
			return corral_set_err(err, -EINVAL, "a tmpfs on %s: a bind "
					      "is there already", dst);
	if (p->ntmpfs >= CORRAL_TMPFS_MAX)
		return corral_set_err(err, -E2BIG, "a tmpfs on %s: more than %d "
				      "tmpfs mounts", dst, CORRAL_TMPFS_MAX);
	return 0;
}

/* "1777" -> 01777: octal, all of it, permission and sticky bits only. */
static int parse_mode(const char *s, mode_t *mode, struct corral_err *err)
{
	size_t n = strspn(s, "01234567");
	unsigned long v = n && n <= 5 && !s[n] ? strtoul(s, NULL, 8) : ULONG_MAX;

	if (v > 07777)
		return corral_set_err(err, -EINVAL, "mode=%s: not an octal mode "
				      "(0 to 7777)", s);
	if (v & (S_ISUID | S_ISGID))
		return corral_set_err(err, -EINVAL, "mode=%s refused: a setuid or "
				      "setgid bit on the directory (only the "
				      "permissions and the sticky bit)", s);
	*mode = (mode_t)v;
	return 0;
}

/* uid=N / gid=N: the directory is the sandbox user's, made by init as it. */
static int check_owner(const char *o, const char *v, unsigned want,
		       struct corral_err *err)
{
	size_t n = strspn(v, "0123456789");
	unsigned long id = n && n <= 10 && !v[n] ? strtoul(v, NULL, 10) : ULONG_MAX;

	if (id > UINT32_MAX)
		return corral_set_err(err, -EINVAL, "%s=%s: not an id", o, v);
	if (id != want)
		return corral_set_err(err, -EINVAL, "%s=%s refused: the directory "
				      "is the sandbox user's (%u), the only id its "
				      "processes run as", o, v, want);
	return 0;
}

static int apply_option(struct corral_tmpfs *t, const char *o, struct corral_err *err)
{
	const char *eq = strchr(o, '=');
	uint64_t n;

	if (!strcmp(o, "ro") || !strcmp(o, "rw"))
		t->ro = o[1] == 'o';
	else if (!strcmp(o, "noexec") || !strcmp(o, "exec"))
		t->noexec = o[0] == 'n';
	else if (is_taken(o))
		return 0;
	else if (eq && !strncmp(o, "mode=", 5))
		return parse_mode(eq + 1, &t->mode, err);
	else if (eq && !strncmp(o, "uid=", 4))
		return check_owner("uid", eq + 1, CORRAL_AGENT_UID, err);
	else if (eq && !strncmp(o, "gid=", 4))
		return check_owner("gid", eq + 1, CORRAL_AGENT_GID, err);
	/* the scratch's size and files budget bound it, with all the rest */
	else if (eq && (!strncmp(o, "size=", 5) || !strncmp(o, "nr_inodes=", 10))) {
		size_t len = strlen(eq + 1);

		/* a tmpfs's "50%" too: of RAM, which the scratch's bound replaces */
		if (len > 1 && len < 64 && eq[len] == '%') {
			char num[64];

			memcpy(num, eq + 1, len - 1);
			num[len - 1] = '\0';
			return corral_parse_size(num, &n, err) < 0 ?
				corral_wrap_err(err, "%.*s", (int)(eq - o), o) : 0;
		}
		return corral_parse_size(eq + 1, &n, err) < 0 ?
			corral_wrap_err(err, "%.*s", (int)(eq - o), o) : 0;
	} else
		return corral_set_err(err, -EINVAL, "option \"%s\": not one a tmpfs "
				      "of corral's takes", o);
	return 0;
}

int corral_policy_add_tmpfs(struct corral_policy *p, const char *dst,
			    const char *const *options, size_t nopts,
			    struct corral_err *err)
{
	struct corral_tmpfs t = { .mode = 01777 }, *nt;
	char why[160];
	int r;

	if (!dst)
		return corral_set_err(err, -EINVAL, "a tmpfs with no destination");
	r = policy_normalise_path(dst, strlen(dst), "a tmpfs's destination", &t.dst,
				  why, sizeof(why));
	if (r == -ENOMEM)
		return corral_set_err(err, r, "out of memory for a tmpfs on %s", dst);
	if (r < 0)
		return corral_set_err(err, r, "%s (got %s)", why, dst);
	r = check_where(p, t.dst, err);
	for (size_t i = 0; r == 0 && i < nopts; i++)
		r = options[i] ? apply_option(&t, options[i], err) :
			corral_set_err(err, -EINVAL, "option %zu: none", i);
	if (r < 0) {
		if (strncmp(err->msg, "a tmpfs on ", 11))
			corral_wrap_err(err, "a tmpfs on %s", t.dst);
		free(t.dst);
		return r;
	}
	nt = reallocarray(p->tmpfs, p->ntmpfs + 1, sizeof(*nt));
	if (!nt) {
		free(t.dst);
		return corral_set_err(err, -ENOMEM, "out of memory for a tmpfs on %s", dst);
	}
	p->tmpfs = nt;
	p->tmpfs[p->ntmpfs++] = t;
	return 0;
}
