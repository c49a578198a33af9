/*
 * ns.c - the user namespace's identity.
 *
 * The sandbox has exactly one identity, uid/gid 1000 ("agent").  It maps to
 * the caller when the caller is unprivileged; when the caller is root it
 * maps to an unprivileged host user (the workspace's owner, or nobody), so
 * that a file the sandbox creates through a writable bind is never owned
 * by host root and no host check ever sees uid 0.
 */
#include "internal.h"
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int write_file(const char *path, const char *text, struct corral_err *err)
{
	size_t len = strlen(text);
	ssize_t n;
	int fd;

	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return corral_set_errno(err, errno, "cannot open %s", path);
	n = write(fd, text, len);
	if (n < 0 || (size_t)n != len) {
		int e = n < 0 ? errno : EIO;

		close(fd);
		return corral_set_errno(err, e, "cannot write \"%.*s\" to %s",
				      (int)strcspn(text, "\n"), text, path);
	}
	close(fd);
	return 0;
}

int ns_pick_ids(const struct corral_policy *p, uid_t *uid, gid_t *gid)
{
	struct stat st;

	if (geteuid() != 0) {
		*uid = geteuid();
		*gid = getegid();
		return 0;
	}
	*uid = 65534;
	*gid = 65534;
	if (!p->workspace || stat(p->workspace, &st) < 0 || st.st_uid == 0)
		return 0;
	/* a daemon's client names the workspace: its owner is no grant */
	if ((p->host_uid_min || p->host_uid_max) &&
	    (st.st_uid < p->host_uid_min || st.st_uid > p->host_uid_max))
		return 0;
	*uid = st.st_uid;
	*gid = st.st_gid ? st.st_gid : st.st_uid;
	return 0;
}

/*
 * Written by the supervisor for the child.  A privileged writer may leave
 * setgroups allowed: the child uses that once, to drop the caller's
 * supplementary groups (root's group 0 must not follow it in).
 */
int ns_write_id_maps(pid_t pid, uid_t host_uid, gid_t host_gid,
		     struct corral_err *err)
{
	char path[64], map[64];
	int r;

	snprintf(path, sizeof(path), "/proc/%d/setgroups", pid);
	r = write_file(path, geteuid() == 0 ? "allow" : "deny", err);
	if (r < 0 && r != -ENOENT)
		return r;

	snprintf(path, sizeof(path), "/proc/%d/gid_map", pid);
	snprintf(map, sizeof(map), "%d %u 1\n", CORRAL_AGENT_GID, host_gid);
	r = write_file(path, map, err);
	if (r < 0)
		return r;

	snprintf(path, sizeof(path), "/proc/%d/uid_map", pid);
	snprintf(map, sizeof(map), "%d %u 1\n", CORRAL_AGENT_UID, host_uid);
	return write_file(path, map, err);
}
