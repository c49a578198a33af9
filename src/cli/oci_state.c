/*
 * oci_state.c - a container's state directory, <root>/<id>: state.json
 * (what create learnt: bundle, init's pid, the monitor's pid, when) and
 * ctl, the monitor's socket.  The status is never stored: the monitor
 * says it, and a monitor that is gone means a container that stopped.
 */
#include "oci.h"

#include <dirent.h>
#include <stdbool.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int oci_check_id(const char *id, struct corral_err *err)
{
	size_t n = strlen(id);

	/* runc: ^[\w+-\.]+$; '.' and '..' would name the root or its parent */
	if (n == 0 || n > 200 || !strcmp(id, ".") || !strcmp(id, ".."))
		return corral_set_err(err, -EINVAL, "invalid container id \"%s\"", id);
	for (size_t i = 0; i < n; i++) {
		char c = id[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '_' || c == '+' || c == '-' ||
		      c == '.'))
			return corral_set_err(err, -EINVAL, "invalid container id "
					      "\"%s\": only [A-Za-z0-9_+.-]", id);
	}
	return 0;
}

static int fill_paths(const struct oci_global *g, const char *id,
		      struct oci_state *s, struct corral_err *err)
{
	int r = oci_check_id(id, err);

	if (r < 0)
		return r;
	snprintf(s->id, sizeof(s->id), "%s", id);
	if ((size_t)snprintf(s->dir, sizeof(s->dir), "%s/%s", g->root, id) >=
	    sizeof(s->dir))
		return corral_set_err(err, -ENAMETOOLONG, "--root %s: too long", g->root);
	snprintf(s->ctl, sizeof(s->ctl), "%s/ctl", s->dir);
	return 0;
}

/* --root and its parents, as runc makes them (the shim adds a namespace) */
static int mkdir_parents(const char *path, struct corral_err *err)
{
	char buf[4096];

	if ((size_t)snprintf(buf, sizeof(buf), "%s", path) >= sizeof(buf))
		return corral_set_err(err, -ENAMETOOLONG, "--root %s: too long", path);
	for (char *p = buf + 1; ; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		char c = *p;

		*p = '\0';
		if (mkdir(buf, 0700) < 0 && errno != EEXIST)
			return corral_set_errno(err, errno, "cannot make --root %s", buf);
		*p = c;
		if (!c)
			return 0;
	}
}

int oci_state_new(const struct oci_global *g, const char *id, struct oci_state *s,
		  struct corral_err *err)
{
	int r;

	memset(s, 0, sizeof(*s));
	r = fill_paths(g, id, s, err);
	if (r < 0)
		return r;
	r = mkdir_parents(g->root, err);
	if (r < 0)
		return r;
	if (mkdir(s->dir, 0700) < 0)
		return errno == EEXIST ?
		       corral_set_err(err, -EEXIST, "container with id exists: %s", id) :
		       corral_set_errno(err, errno, "cannot make %s", s->dir);
	return 0;
}

int oci_state_write(const struct oci_state *s, struct corral_err *err)
{
	char path[4300], tmp[4300];
	json_t *o;
	int r;

	o = json_pack("{s:s, s:s, s:s, s:s, s:i, s:i, s:O, s:O*}", "id", s->id,
		      "bundle", s->bundle, "rootfs", s->rootfs ? s->rootfs : "",
		      "created", s->created, "pid", (int)s->pid,
		      "monitor", (int)s->monitor, "annotations",
		      s->annotations ? s->annotations : json_object(),
		      "config", s->config);
	if (!o)
		return corral_set_err(err, -ENOMEM, "out of memory for %s's state", s->id);
	snprintf(path, sizeof(path), "%s/state.json", s->dir);
	snprintf(tmp, sizeof(tmp), "%s/.state.json", s->dir);
	r = json_dump_file(o, tmp, JSON_COMPACT);
	json_decref(o);
	if (r < 0 || rename(tmp, path) < 0)
		return corral_set_errno(err, errno ? errno : EIO, "cannot write %s", path);
	return 0;
}

int oci_state_load(const struct oci_global *g, const char *id, struct oci_state *s,
		   struct corral_err *err)
{
	char path[4300];
	const char *bundle = NULL, *rootfs = NULL, *created = NULL;
	json_error_t je;
	json_t *o, *ann = NULL, *config = NULL;
	int pid = 0, mon = 0, r;

	memset(s, 0, sizeof(*s));
	r = fill_paths(g, id, s, err);
	if (r < 0)
		return r;
	snprintf(path, sizeof(path), "%s/state.json", s->dir);
	o = json_load_file(path, 0, &je);
	if (!o)	/* runc's words: the shims match "does not exist" */
		return corral_set_err(err, -ENOENT, "container does not exist: %s", id);
	if (json_unpack(o, "{s:s, s?s, s:s, s:i, s:i, s?o, s?o}", "bundle", &bundle,
			"rootfs", &rootfs, "created", &created, "pid", &pid,
			"monitor", &mon, "annotations", &ann, "config", &config) < 0) {
		json_decref(o);
		return corral_set_err(err, -EINVAL, "%s: not corral's state", path);
	}
	s->bundle = strdup(bundle);
	s->rootfs = strdup(rootfs ? rootfs : "");
	s->created = strdup(created);
	s->pid = pid;
	s->monitor = mon;
	s->annotations = json_incref(ann ? ann : json_object());
	s->config = json_incref(config);
	json_decref(o);
	if (!s->bundle || !s->rootfs || !s->created)
		return corral_set_err(err, -ENOMEM, "out of memory reading %s", path);
	return 0;
}

/* Init has exited (reaped by the shim, or a zombie it has yet to reap). */
static bool init_gone(pid_t pid)
{
	char path[64], buf[512], *p;
	FILE *f;
	bool gone;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT;
	gone = !fgets(buf, sizeof(buf), f) || !(p = strrchr(buf, ')')) ||
	       p[1] != ' ' || p[2] == 'Z' || p[2] == 'X';
	fclose(f);
	return gone;
}

const char *oci_state_status(const struct oci_state *s)
{
	static char status[32];
	struct corral_err err;
	char reply[128];

	if (corral_container_ctl(s->ctl, "state", reply, sizeof(reply), &err) < 0 ||
	    sscanf(reply, "ok %31s", status) != 1)
		return "stopped";
	/*
	 * The engine hears of init's exit (it reaps it) before the monitor
	 * does (the pidfd, on its loop): then it is stopped already, as
	 * runc, which looks at the process, would say.
	 */
	if (init_gone(s->pid))
		return "stopped";
	return status;
}

json_t *oci_state_json(const struct oci_state *s, const char *status)
{
	bool live = strcmp(status, "stopped") != 0;

	return json_pack("{s:s, s:s, s:s, s:i, s:s, s:s, s:s, s:s, s:O}",
			 "ociVersion", OCI_VERSION, "id", s->id, "status", status,
			 "pid", live ? (int)s->pid : 0, "bundle", s->bundle,
			 "rootfs", s->rootfs, "created", s->created, "owner", "",
			 "annotations", s->annotations);
}

int oci_state_remove(const struct oci_state *s, struct corral_err *err)
{
	DIR *d = opendir(s->dir);
	struct dirent *de;
	char path[4400];

	if (!d)
		return errno == ENOENT ? 0 : corral_set_errno(err, errno, "%s", s->dir);
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(path, sizeof(path), "%s/%s", s->dir, de->d_name);
		if (unlink(path) < 0 && errno != ENOENT) {
			closedir(d);
			return corral_set_errno(err, errno, "cannot remove %s", path);
		}
	}
	closedir(d);
	if (rmdir(s->dir) < 0 && errno != ENOENT)
		return corral_set_errno(err, errno, "cannot remove %s", s->dir);
	return 0;
}

void oci_state_free(struct oci_state *s)
{
	free(s->bundle);
	free(s->rootfs);
	free(s->created);
	json_decref(s->annotations);
	json_decref(s->config);
	s->bundle = s->rootfs = s->created = NULL;
	s->annotations = s->config = NULL;
}

int oci_write_pid_file(const char *path, pid_t pid, struct corral_err *err)
{
	char tmp[NAME_MAX + 1];
	const char *base;
	int dir, fd, r = 0;
	FILE *f;

	/* its directory by fd: no tenant's link above it leads elsewhere */
	dir = oci_open_parent("--pid-file", path, &base, err);
	if (dir < 0)
		return dir;
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.corral-tmp", base) >= sizeof(tmp)) {
		close(dir);
		return corral_set_err(err, -ENAMETOOLONG, "--pid-file %s: too long", path);
	}
	/*
	 * Made new, as runc makes its own: the directory may be a bundle's
	 * that a tenant writes, and a link left at the temporary name had
	 * root truncate and write the file it named (a stale one of ours
	 * goes: unlink takes the link, not its target).
	 */
	fd = openat(dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0 && errno == EEXIST && unlinkat(dir, tmp, 0) == 0)
		fd = openat(dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	f = fd < 0 ? NULL : fdopen(fd, "w");
	if (!f) {
		int e = errno;

		if (fd >= 0)
			close(fd);
		close(dir);
		return corral_set_errno(err, e, "cannot write --pid-file %s (made "
					"new at %s)", path, tmp);
	}
	fprintf(f, "%d", (int)pid);
	if (fclose(f) != 0 || renameat(dir, tmp, dir, base) < 0) {
		int e = errno;

		unlinkat(dir, tmp, 0);
		r = corral_set_errno(err, e, "cannot write --pid-file %s", path);
	}
	close(dir);
	return r;
}
