/*
 * tls_plugin.c - find, check and load corral-tls.so (tls_plugin.h says
 * why it is a plugin).
 *
 * Only the directory of the running binary is looked in (/proc/self/exe):
 * the plugin is part of the installation, like the binary, and nothing a
 * caller controls (environment, policy, working directory) may choose code
 * for the supervisor.  The file is opened once (O_NOFOLLOW, O_CLOEXEC),
 * checked on that descriptor (a regular file, owned by root or by the
 * binary's owner, writable by neither group nor others), and that very
 * file is what dlopen() maps, through /proc/self/fd: a rename in between
 * changes nothing.  Once per process: the result, or the error, is kept.
 */
#include "internal.h"
#include "tls_plugin.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* what the kernel appends to /proc/self/exe's target once it is unlinked */
#define DELETED " (deleted)"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static const struct tls_ops *loaded;
static struct corral_err load_err;

/* dirname of /proc/self/exe + "/corral-tls.so"; the binary's owner */
static int plugin_path(char *path, size_t size, uid_t *owner, struct corral_err *err)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	struct stat st;
	char *slash;

	if (n < 0)
		return corral_set_errno(err, errno, "cannot find corral's own binary "
					"(readlink /proc/self/exe) to load " TLS_PLUGIN_NAME
					" beside it");
	exe[n] = '\0';
	/*
	 * gone from its path (replaced by an upgrade, or a memfd run with
	 * fexecve): what is there now, if anything, is not this build's
	 */
	if (n >= (ssize_t)strlen(DELETED) && !strcmp(exe + n - strlen(DELETED), DELETED))
		return corral_set_err(err, -ESTALE, "corral's own binary \"%s\" is no longer "
				      "at its path: no directory to load " TLS_PLUGIN_NAME
				      " from (restart corral)", exe);
	slash = strrchr(exe, '/');
	if (exe[0] != '/' || !slash)
		return corral_set_err(err, -ENOENT, "corral's own binary is \"%s\", not a "
				      "path: no directory to load " TLS_PLUGIN_NAME " from", exe);
	/* the binary that runs, whatever its name now */
	if (stat("/proc/self/exe", &st) < 0)
		return corral_set_errno(err, errno, "stat /proc/self/exe");
	*owner = st.st_uid;
	*slash = '\0';
	if ((size_t)snprintf(path, size, "%s/%s", exe, TLS_PLUGIN_NAME) >= size)
		return corral_set_err(err, -ENAMETOOLONG, "%s/%s: path too long", exe,
				      TLS_PLUGIN_NAME);
	return 0;
}

/* Whoever can write the plugin runs code in the supervisor: refuse that. */
static int plugin_check(int fd, const char *path, uid_t owner, struct corral_err *err)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return corral_set_errno(err, errno, "cannot load TLS termination: stat %s", path);
	if (!S_ISREG(st.st_mode))
		return corral_set_err(err, -EPERM, "cannot load TLS termination: %s is not a "
				      "regular file", path);
	if (st.st_uid != 0 && st.st_uid != owner)
		return corral_set_err(err, -EPERM, "cannot load TLS termination: %s is owned "
				      "by uid %u; it must be owned by root or by corral's "
				      "owner (uid %u)", path, (unsigned)st.st_uid, (unsigned)owner);
	if (st.st_mode & (S_IWGRP | S_IWOTH))
		return corral_set_err(err, -EPERM, "cannot load TLS termination: %s is "
				      "writable by %s (mode %04o); it must be writable by its "
				      "owner only", path, st.st_mode & S_IWOTH ? "others" : "its group",
				      (unsigned)(st.st_mode & 07777));
	return 0;
}

static const struct tls_ops *plugin_open(struct corral_err *err)
{
	char path[PATH_MAX], fdpath[64];
	const struct tls_ops *ops;
	uid_t owner = (uid_t)-1;
	void *h;
	int fd;

	if (plugin_path(path, sizeof(path), &owner, err) < 0)
		return NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		corral_set_errno(err, errno, "the policy terminates TLS, which needs %s "
				 "(built with corral, beside it): cannot open it", path);
		return NULL;
	}
	if (plugin_check(fd, path, owner, err) < 0) {
		close(fd);
		return NULL;
	}
	snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", fd);
	h = dlopen(fdpath, RTLD_NOW | RTLD_LOCAL);
	close(fd);
	if (!h) {
		corral_set_err(err, -ENOEXEC, "cannot load TLS termination from %s: %s",
			       path, dlerror());
		return NULL;
	}
	ops = dlsym(h, TLS_PLUGIN_SYMBOL);
	if (!ops || ops->abi != TLS_PLUGIN_ABI) {
		corral_set_err(err, -ENOEXEC, "cannot load TLS termination from %s: %s",
			       path, ops ? "built for another version of corral"
			       : "no " TLS_PLUGIN_SYMBOL " in it");
		dlclose(h);
		return NULL;
	}
	/* kept for the process's life: its code serves every later sandbox */
	return ops;
}

/* the process asked that no fork inherit OpenSSL's blocks (tls_plugin_unshared) */
static atomic_bool want_unshared;

static void load_once(void)
{
	int r;

	loaded = plugin_open(&load_err);
	if (loaded && atomic_load(&want_unshared) && (r = loaded->unshared()) < 0) {
		corral_set_errno(&load_err, -r, "cannot keep OpenSSL's memory from "
				 "this process's forks (MADV_WIPEONFORK)");
		loaded = NULL;	/* its code stays mapped, never called */
	}
}

const struct tls_ops *tls_plugin_load(struct corral_err *err)
{
	pthread_once(&once, load_once);
	if (!loaded)
		*err = load_err;
	return loaded;
}

void tls_plugin_forget(void)
{
	if (loaded)
		loaded->forget();
}

int tls_plugin_unshared(void)
{
	atomic_store(&want_unshared, true);
	/* loaded after this, load_once() asks (a daemon asks before its loop runs) */
	return loaded ? loaded->unshared() : 0;
}
