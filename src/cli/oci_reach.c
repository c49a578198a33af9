/*
 * oci_reach.c - whether the user who may write a tenant's bundle could
 * reach a tree of the host: each directory from it up to "/" searchable
 * by them, as the kernel judges a search (generic_permission, then
 * posix_acl_permission where the directory has an ACL).
 *
 * The overlay's lower is opened as root, so a root.path of the tenant's
 * naming a tree below one of root's 0700 directories had the container
 * read it.  Judged by the mode bits alone, a directory whose ACL names
 * the tenant with no rights (0755 to the bits) let the tree through, and
 * one whose ACL grants what the bits hide was refused; judged with at
 * most 64 of the tenant's groups, a tenant in more was taken for one in
 * none of them, and a directory whose group's bits shut that group out
 * let it through.  Where the writer is not one known user (a bundle of
 * root's that a group or anyone may write), or their groups cannot be
 * read, every class such a user could fall in must allow the search.
 */
#include "oci.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/posix_acl.h>
#include <linux/posix_acl_xattr.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

/* The kernel's bound on a process's groups (NGROUPS_MAX) */
#define REACH_GROUPS_MAX 65536
/* An xattr's value is at most 64 KiB (XATTR_SIZE_MAX) */
#define REACH_ACL_MAX 65536

struct writer {
	bool set;
	bool anyone;		/* not one known user: any user but root */
	uid_t uid;
	gid_t *groups;
	int ngroups;
	bool groups_known;	/* else any group may be theirs */
};

struct acl {
	struct posix_acl_xattr_entry *e;
	size_t n;		/* 0: none, the mode bits decide */
};

/* uid's groups, however many: getgrouplist says how many it needed. */
static void read_groups(struct writer *w)
{
	struct passwd *pw = getpwuid(w->uid);
	int want = 64;

	if (!pw)
		return;		/* no name, no group list: unknown */
	for (int tries = 0; tries < 4 && want <= REACH_GROUPS_MAX; tries++) {
		gid_t *g = realloc(w->groups, (size_t)want * sizeof(*g));
		int got = want;

		if (!g)
			return;
		w->groups = g;
		if (getgrouplist(pw->pw_name, pw->pw_gid, g, &got) >= 0) {
			w->ngroups = got;
			w->groups_known = true;
			return;
		}
		want = got > want ? got : 2 * want;
	}
}

/* Who besides root may write st (the bundle or its config.json)? */
static void writer_of(const struct stat *st, struct writer *w)
{
	if (w->set || !st)
		return;
	if (st->st_uid != 0) {
		w->set = true;
		w->uid = st->st_uid;
		read_groups(w);
	} else if (st->st_mode & (S_IWGRP | S_IWOTH)) {
		w->set = true;
		w->anyone = true;	/* a group's members: any user may be one */
	}
}

/* fd's access ACL; -errno where it has one that cannot be read. */
static int read_acl(int fd, void *buf, struct acl *a)
{
	const struct posix_acl_xattr_header *h = buf;
	char path[64];
	ssize_t n;

	a->n = 0;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = getxattr(path, "system.posix_acl_access", buf, REACH_ACL_MAX);
	if (n < 0)
		return errno == ENODATA || errno == EOPNOTSUPP ? 0 : -errno;
	if ((size_t)n < sizeof(*h) || (n - sizeof(*h)) % sizeof(*a->e) ||
	    le32toh(h->a_version) != POSIX_ACL_XATTR_VERSION)
		return -EINVAL;
	a->e = (struct posix_acl_xattr_entry *)(h + 1);
	a->n = (n - sizeof(*h)) / sizeof(*a->e);
	return 0;
}

static bool in_groups(const struct writer *w, gid_t gid)
{
	for (int i = 0; i < w->ngroups; i++)
		if (w->groups[i] == gid)
			return true;
	return false;
}

static unsigned int acl_mask(const struct acl *a)
{
	for (size_t i = 0; i < a->n; i++)
		if (le16toh(a->e[i].e_tag) == ACL_MASK)
			return le16toh(a->e[i].e_perm);
	return 7;	/* a minimal ACL has none: nothing masked */
}

/*
 * posix_acl_permission's walk for search, the owner already passed: a
 * named user's entry decides; else a group entry of theirs that grants
 * (the owning group's by the directory's gid), and one that does not
 * shuts them out; else the others' entry.  Named users and groups count
 * only under the mask.
 */
static bool acl_may_search(const struct acl *a, const struct writer *w, gid_t owning)
{
	bool mask = acl_mask(a) & ACL_EXECUTE, in_group = false;

	for (size_t i = 0; i < a->n; i++) {
		unsigned int tag = le16toh(a->e[i].e_tag);
		bool x = le16toh(a->e[i].e_perm) & ACL_EXECUTE;
		uint32_t id = le32toh(a->e[i].e_id);

		if (tag == ACL_USER && id == w->uid)
			return x && mask;
		if ((tag == ACL_GROUP_OBJ && in_groups(w, owning)) ||
		    (tag == ACL_GROUP && in_groups(w, id))) {
			if (x)
				return mask;
			in_group = true;
		}
		if (tag == ACL_OTHER)
			return !in_group && x;
	}
	return false;	/* no others' entry: not an ACL the kernel keeps */
}

/*
 * The same for whoever is not one user with known groups: only where
 * every entry that could be theirs grants (each named user's too, when
 * the writer is anyone).
 */
static bool acl_all_search(const struct acl *a, const struct writer *w)
{
	bool mask = acl_mask(a) & ACL_EXECUTE, all = true;

	for (size_t i = 0; i < a->n; i++) {
		unsigned int tag = le16toh(a->e[i].e_tag);
		bool x = le16toh(a->e[i].e_perm) & ACL_EXECUTE;
		uint32_t id = le32toh(a->e[i].e_id);

		if (tag == ACL_USER && !w->anyone && id == w->uid)
			return x && mask;
		if ((tag == ACL_USER && w->anyone) || tag == ACL_GROUP_OBJ || tag == ACL_GROUP)
			all = all && x && mask;
		if (tag == ACL_OTHER)
			return all && x;
	}
	return false;
}

/* Whether w may search the directory st, whose ACL is a. */
static bool may_search(const struct stat *st, const struct acl *a, const struct writer *w)
{
	bool strict = w->anyone || !w->groups_known;
	/* the kernel reads an ACL only where the group's bits are not 0 */
	bool use_acl = a->n && (st->st_mode & S_IRWXG);

	if (!w->anyone && st->st_uid == w->uid)
		return st->st_mode & S_IXUSR;
	/* anyone: the directory's owner too, root aside */
	if (w->anyone && st->st_uid != 0 && !(st->st_mode & S_IXUSR))
		return false;
	if (use_acl)
		return strict ? acl_all_search(a, w) : acl_may_search(a, w, st->st_gid);
	if (strict)
		return (st->st_mode & S_IXGRP) && (st->st_mode & S_IXOTH);
	return st->st_mode & (in_groups(w, st->st_gid) ? S_IXGRP : S_IXOTH);
}

static const char *who(const struct writer *w)
{
	if (w->anyone)
		return "a group's or anyone's";
	return w->groups_known ? "another user's" : "another user's (whose groups "
	       "could not be read: every group's class must allow it)";
}

int oci_writer_reaches(int fd, const struct stat *dir_st, const struct stat *cfg_st,
		       const char *joined, struct corral_err *err)
{
	struct writer w = { 0 };
	struct stat st, up;
	struct acl a;
	void *buf = NULL;
	int cur, parent, r = 0;

	writer_of(dir_st, &w);
	writer_of(cfg_st, &w);
	if (!w.set)
		return 0;
	buf = malloc(REACH_ACL_MAX);
	if (!buf) {
		free(w.groups);
		return corral_set_err(err, -ENOMEM, "root.path %s: out of memory for "
				      "the ACLs on the way", joined);
	}
	cur = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	for (int depth = 0; cur >= 0 && depth < 4096; depth++) {
		if (fstat(cur, &st) < 0)
			break;
		r = read_acl(cur, buf, &a);
		if (r < 0) {
			corral_set_err(err, r, "root.path %s: the bundle is %s to write, and "
				       "the ACL of a directory on the way to that tree "
				       "cannot be read (%s): refused", joined, who(&w),
				       strerror(-r));
			goto out;
		}
		if (!may_search(&st, &a, &w)) {
			r = corral_set_err(err, -EPERM, "root.path %s: the bundle is %s "
					   "to write, and a directory on the way to that "
					   "tree is not theirs to search: refused, a "
					   "container gets no tree its bundle's writer "
					   "could not reach", joined, who(&w));
			goto out;
		}
		parent = openat(cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (parent < 0 || fstat(parent, &up) < 0) {
			if (parent >= 0)
				close(parent);
			break;
		}
		close(cur);
		cur = parent;
		if (up.st_dev == st.st_dev && up.st_ino == st.st_ino)
			goto out;	/* "/", searched */
	}
	r = corral_set_errno(err, errno ? errno : ELOOP, "root.path %s: cannot "
			     "walk up from it", joined);
out:
	if (cur >= 0)
		close(cur);
	free(buf);
	free(w.groups);
	return r;
}
