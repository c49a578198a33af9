/*
 * probe.c - what this host's kernel offers, found by trying, not by
 * reading version numbers: distributions patch and disable features.
 */
#include "internal.h"
#include "sandbox.h"
#include "nflog.h"
#include "nft.h"
#include "proxy.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* Fork a child that tries fn in fresh namespaces; true if it exits 0. */
static bool try_in_child(int (*fn)(void))
{
	int status;
	pid_t pid = fork();

	if (pid < 0)
		return false;
	if (pid == 0)
		_exit(fn() == 0 ? 0 : 1);
	if (waitpid(pid, &status, 0) < 0)
		return false;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static int probe_userns(void)
{
	return unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET |
		       CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP);
}

static int write_proc(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = write(fd, text, strlen(text));
	close(fd);
	return n < 0 ? -1 : 0;
}

static int probe_overlay(void)
{
	static const char *const dirs[] = { "/tmp/l", "/tmp/u", "/tmp/w", "/tmp/m" };

	char uid_map[32], gid_map[32];

	/* Map ourselves, or the tmpfs refuses files of an unmapped owner. */
	snprintf(uid_map, sizeof(uid_map), "0 %d 1\n", (int)geteuid());
	snprintf(gid_map, sizeof(gid_map), "0 %d 1\n", (int)getegid());
	if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0 ||
	    write_proc("/proc/self/setgroups", "deny") < 0 ||
	    write_proc("/proc/self/gid_map", gid_map) < 0 ||
	    write_proc("/proc/self/uid_map", uid_map) < 0)
		return -1;
	/* Private, and on a tmpfs of our own: the host's /tmp is not touched. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount("tmpfs", "/tmp", "tmpfs", 0, "size=1m") < 0)
		return -1;
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		if (mkdir(dirs[i], 0755) < 0)
			return -1;
	return mount("overlay", "/tmp/m", "overlay", 0,
		     "userxattr,lowerdir=/tmp/l,upperdir=/tmp/u,workdir=/tmp/w");
}

static bool probe_openat2(void)
{
	struct open_how how = { .flags = O_PATH | O_CLOEXEC,
				.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS };
	int fd = syscall(SYS_openat2, AT_FDCWD, ".", &how, sizeof(how));

	if (fd < 0)
		return false;
	close(fd);
	return true;
}

/*
 * Transparent mode's rules, loaded as init loads them, in a user and
 * network namespace of a child's own (nothing of the host's is touched),
 * and the log of what they drop (nflog.c), which a kernel without
 * nfnetlink_log refuses.
 */
struct transparent_probe {
	int r, log;
	char why[CORRAL_ERR_MAX], log_why[CORRAL_ERR_MAX];
};

static void probe_log(struct transparent_probe *got)
{
	int fd = nflog_open(NFLOG_GROUP, got->log_why, sizeof(got->log_why));

	got->log = fd < 0 ? fd : nft_log_rules(NFLOG_GROUP, got->log_why,
					       sizeof(got->log_why));
	if (fd >= 0)
		close(fd);
}

static void probe_transparent(struct corral_features *f)
{
	struct transparent_probe got = { -EIO, -EIO, "", "" };
	int p[2], status;
	pid_t pid;

	snprintf(f->transparent_detail, sizeof(f->transparent_detail),
		 "cannot try: no child process");
	snprintf(f->nflog_detail, sizeof(f->nflog_detail), "not tried: no transparent mode");
	if (pipe2(p, O_CLOEXEC) < 0)
		return;
	pid = fork();
	if (pid == 0) {
		close(p[0]);
		if (unshare(CLONE_NEWUSER | CLONE_NEWNET) < 0) {
			got.r = -errno;
			snprintf(got.why, sizeof(got.why), "no network namespace: %s",
				 strerror(errno));
		} else {
			got.r = nft_redirect_rules(PROXY_TRANSPARENT_PORT, PROXY_DNS_PORT,
						   PROXY_NEW_FLOWS_MIN, got.why,
						   sizeof(got.why));
			if (got.r == 0)
				probe_log(&got);
		}
		_exit(write(p[1], &got, sizeof(got)) == sizeof(got) ? 0 : 1);
	}
	close(p[1]);
	if (pid > 0 && read(p[0], &got, sizeof(got)) == sizeof(got)) {
		got.why[sizeof(got.why) - 1] = '\0';
		got.log_why[sizeof(got.log_why) - 1] = '\0';
		snprintf(f->transparent_detail, sizeof(f->transparent_detail), "%s",
			 got.r == 0 ? "nftables rules load in a sandbox's netns: programs "
			 "that ignore proxy variables still reach the proxy" : got.why);
		f->transparent = got.r == 0;
		f->nflog = f->transparent && got.log == 0;
		if (f->nflog)
			snprintf(f->nflog_detail, sizeof(f->nflog_detail), "UDP and ICMP to "
				 "outside addresses are egress.denied events (nfnetlink_log)");
		else if (f->transparent)
			snprintf(f->nflog_detail, sizeof(f->nflog_detail), "UDP and ICMP to "
				 "outside addresses are dropped, but are no events: %.200s",
				 got.log_why);
	}
	close(p[0]);
	if (pid > 0)
		waitpid(pid, &status, 0);
}

int corral_probe(struct corral_features *f)
{
	memset(f, 0, sizeof(*f));
	f->userns = try_in_child(probe_userns);
	f->overlay_in_userns = f->userns && try_in_child(probe_overlay);
	sc_probe(f);
	f->landlock_abi = landlock_abi();
	f->openat2 = probe_openat2();
	cg_probe(f);
	/* the ids a sandbox would get, and whether a workspace can be idmapped */
	{
		struct corral_policy p = { 0 };

		struct idmap_fds m;

		ns_plan_ids(&p, &f->ids);
		idmap_prepare(&p, &f->ids, &m);
		idmap_close(&m);
		f->idmap_mounts = idmap_probe("/tmp", f->idmap_detail,
					      sizeof(f->idmap_detail));
	}
	if (f->userns)
		probe_transparent(f);
	return 0;
}
