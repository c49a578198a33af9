/*
 * fuseroot.c - whether a root (--rootfs, an OCI bundle's rootfs, the
 * bundle) lies on a FUSE filesystem whose daemon is another user's,
 * judged without asking that filesystem anything.
 *
 * A stat, a statfs, a lookup beneath it are requests to the daemon, and
 * one that never answers holds the caller (a root supervisor, the OCI
 * runtime) in the kernel until it does: SIGTERM does not end the wait.
 * The mount at the name itself is reached without one (crossing into a
 * mount's root looks up nothing there, an O_PATH open opens nothing), and
 * its mount id is statx's with no field asked and AT_STATX_DONT_SYNC
 * (fuse_getattr answers from its cache then, or with st_dev alone), then
 * looked up in the mount table, whose FUSE lines say the daemon's user.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* "fuse", "fuseblk", "fuse.sshfs": a FUSE filesystem's type */
static bool fuse_type(const char *type)
{
	return !strcmp(type, "fuse") || !strcmp(type, "fuseblk") ||
	       !strncmp(type, "fuse.", 5);
}

/*
 * The mount table's line for mount id, its type and super options:
 * "id parent maj:min root mount-point options [optional...] - type
 * source super-options".  1 found (*owner its user_id=, or -1 when it
 * says none, FUSE or not: *fuse), 0 not found, -errno.
 */
static int mount_line(unsigned long long id, bool *fuse, long long *owner)
{
	char *line = NULL;
	size_t cap = 0;
	int r = 0;
	FILE *f = mountinfo_open(AT_FDCWD, "/proc/self/mountinfo");

	if (!f)
		return -errno;
	while (r == 0 && getline(&line, &cap, f) > 0) {
		char *sep = strstr(line, " - "), *type, *opts, *uid, *save = NULL;

		if (strtoull(line, NULL, 10) != id || !sep)
			continue;
		type = strtok_r(sep + 3, " ", &save);
		if (!type || !strtok_r(NULL, " ", &save) || !(opts = strtok_r(NULL, " \n", &save)))
			break;
		*fuse = fuse_type(type);
		uid = strstr(opts, "user_id=");
		*owner = uid && (uid == opts || uid[-1] == ',') ? strtoll(uid + 8, NULL, 10) : -1;
		r = 1;
	}
	free(line);
	fclose(f);
	return r;
}

int corral_root_fd_check(int fd, const char *what, struct corral_err *err)
{
	struct statx stx;
	long long owner = -1;
	bool fuse = false;
	int r;

	if (syscall(SYS_statx, fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW | AT_STATX_DONT_SYNC,
		    0, &stx) < 0)
		return corral_set_errno(err, errno, "%s: statx", what);
	if (!(stx.stx_mask & STATX_MNT_ID))
		return 0;	/* before Linux 5.8: not judged */
	r = mount_line(stx.stx_mnt_id, &fuse, &owner);
	if (r < 0)
		return corral_set_err(err, r, "%s: cannot read the mount table: %s", what,
				      strerror(-r));
	if (r == 0 || !fuse || owner == (long long)geteuid())
		return 0;
	return corral_set_err(err, -EPERM, "%s lies on a FUSE filesystem whose daemon is "
			      "uid %lld's, not this caller's (uid %u): refused before "
			      "anything there is asked, as a daemon that never answers "
			      "would hold corral in the kernel", what, owner,
			      (unsigned int)geteuid());
}
