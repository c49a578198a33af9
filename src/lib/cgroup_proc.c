/*
 * cgroup_proc.c - what /proc says about cgroups: the cgroup filesystems
 * mounted (/proc/self/mountinfo) and where a process is
 * (/proc/PID/cgroup).  The library's one reader of each.
 */
#include "cgroup_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- /proc/self/mountinfo -------------------------------------------- */

static bool opt_has(const char *opts, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = opts; *p;) {
		const char *e = strchrnul(p, ',');

		if ((size_t)(e - p) == n && !strncmp(p, name, n))
			return true;
		p = *e ? e + 1 : e;
	}
	return false;
}

void cg_mounts_free(struct cg_mounts *m)
{
	free(m->v2);
	free(m->v2_root);
	for (int c = 0; c < C_COUNT; c++)
		free(m->v1[c]);
	memset(m, 0, sizeof(*m));
}

/*
 * One line: "id parent maj:min root mountpoint opts [optional...] - fstype
 * source superopts".  The first mount of each kind wins.
 */
int cg_mounts_add_line(struct cg_mounts *m, char *line)
{
	char *f[5], *fstype, *super, *save = NULL, *tok;
	int i;

	for (i = 0; i < 5; i++) {
		f[i] = strtok_r(i ? NULL : line, " \n", &save);
		if (!f[i])
			return 0;
	}
	do
		tok = strtok_r(NULL, " \n", &save);
	while (tok && strcmp(tok, "-"));
	fstype = strtok_r(NULL, " \n", &save);
	if (!tok || !fstype || !strtok_r(NULL, " \n", &save))
		return 0;
	super = strtok_r(NULL, " \n", &save);
	if (!super)
		return 0;
	mountinfo_unescape(f[3]);
	mountinfo_unescape(f[4]);

	if (!strcmp(fstype, "cgroup2") || !strcmp(fstype, "cgroup"))
		m->favordynmods |= opt_has(super, "favordynmods");
	if (!strcmp(fstype, "cgroup2")) {
		if (m->v2)
			return 0;
		m->v2 = strdup(f[4]);
		m->v2_root = strdup(f[3]);
		return m->v2 && m->v2_root ? 0 : -ENOMEM;
	}
	if (strcmp(fstype, "cgroup"))
		return 0;
	for (int c = 0; c < C_COUNT; c++) {
		if (m->v1[c] || !opt_has(super, cg_ctrl_name[c]))
			continue;
		m->v1[c] = strdup(f[4]);
		if (!m->v1[c])
			return -ENOMEM;
	}
	return 0;
}

/*
 * From an fd the caller keeps open (cgroup.c's watch on the mount table):
 * read with pread from offset 0, which a seq_file starts afresh, so the
 * fd's own position and its poll(2) state are left alone; no open, fstat
 * or close of a second copy.
 */
int cg_mounts_read_fd(struct cg_mounts *m, int fd, struct corral_err *err)
{
	const char *path = "/proc/self/mountinfo";
	size_t cap = 8192, len = 0;
	char *buf = malloc(cap), *line, *nl;
	ssize_t n;
	int r = 0;

	memset(m, 0, sizeof(*m));
	if (!buf)
		return corral_set_errno(err, ENOMEM, "reading %s", path);
	for (;;) {
		if (len + 1 == cap) {
			char *more = cap > (64u << 20) ? NULL : realloc(buf, cap * 2);

			if (!more) {
				free(buf);
				return corral_set_errno(err, ENOMEM, "reading %s",
						      path);
			}
			buf = more;
			cap *= 2;
		}
		n = pread(fd, buf + len, cap - 1 - len, (off_t)len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			free(buf);
			return corral_set_errno(err, -r, "cannot read %s", path);
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	for (line = buf; r == 0 && *line; line = nl ? nl + 1 : line + strlen(line)) {
		nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		r = cg_mounts_add_line(m, line);
	}
	free(buf);
	if (r < 0) {
		cg_mounts_free(m);
		return corral_set_errno(err, -r, "reading %s", path);
	}
	return 0;
}

/* The same from a fresh open (cgroup_doctor.c; a plan without a watch). */
int cg_mounts_read(struct cg_mounts *m, struct corral_err *err)
{
	int fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC), r;

	if (fd < 0) {
		memset(m, 0, sizeof(*m));
		return corral_set_errno(err, errno, "cannot read /proc/self/mountinfo");
	}
	r = cg_mounts_read_fd(m, fd, err);
	close(fd);
	return r;
}

/* ---- /proc/PID/cgroup ------------------------------------------------- */

/* "N:ctrls:/path" in place: true and *e filled, or false for garbage. */
static bool proc_line(char *line, struct cg_proc_entry *e)
{
	char *c1 = strchr(line, ':'), *c2, *end;
	unsigned long id;

	if (!c1 || c1 == line)
		return false;
	/* the controllers never hold ':'; the path may */
	c2 = strchr(c1 + 1, ':');
	if (!c2 || c2[1] != '/')
		return false;
	*c1 = *c2 = '\0';
	errno = 0;
	id = strtoul(line, &end, 10);
	if (errno || *end || line[0] == '-' || line[0] == '+' || id > 0xffffu)
		return false;
	e->hier = (unsigned)id;
	e->ctrls = c1 + 1;
	e->path = c2 + 1;
	return true;
}

int cg_proc_parse(struct cg_proc *out, const char *text, size_t len)
{
	char *p, *nl;

	out->n = 0;
	if (len >= sizeof(out->buf))
		len = sizeof(out->buf) - 1;
	memcpy(out->buf, text, len);
	out->buf[len] = '\0';
	for (p = out->buf; *p && out->n < CG_PROC_MAX; p = nl + 1) {
		nl = strchr(p, '\n');
		if (!nl)
			break;	/* no end: cut short, not trusted */
		*nl = '\0';
		if (proc_line(p, &out->e[out->n]))
			out->n++;
	}
	return out->n ? 0 : -EINVAL;
}

int cg_proc_read(struct cg_proc *out, pid_t pid)
{
	char path[64], text[sizeof(out->buf)];
	ssize_t n, got = 0;
	int fd, r;

	out->n = 0;
	if (pid > 0)
		snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	else
		snprintf(path, sizeof(path), "/proc/self/cgroup");
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	/* procfs hands out a seq_file: read until EOF or the buffer is full */
	do {
		n = read(fd, text + got, sizeof(text) - 1 - (size_t)got);
		if (n > 0)
			got += n;
	} while ((n > 0 && (size_t)got < sizeof(text) - 1) ||
		 (n < 0 && errno == EINTR));
	r = n < 0 ? -errno : 0;
	close(fd);
	if (r < 0)
		return r;
	return cg_proc_parse(out, text, (size_t)got);
}

const char *cg_proc_v2_path(const struct cg_proc *p)
{
	for (size_t i = 0; i < p->n; i++)
		if (p->e[i].hier == 0 && !p->e[i].ctrls[0])
			return p->e[i].path;
	return NULL;
}

const char *cg_path_leaf(const char *path)
{
	const char *s = strrchr(path, '/');

	return s ? s + 1 : path;
}

const char *cg_proc_group(const struct cg_proc *p)
{
	const char *v2 = cg_proc_v2_path(p);

	/* hybrid: the v1 lines come first, and not every hierarchy is ours */
	for (size_t i = 0; i < p->n; i++) {
		const char *leaf = cg_path_leaf(p->e[i].path);

		if (!strncmp(leaf, CG_PREFIX, strlen(CG_PREFIX)))
			return leaf;
	}
	if (v2)
		return cg_path_leaf(v2);
	return p->n ? cg_path_leaf(p->e[0].path) : "";
}
