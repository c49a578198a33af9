/*
 * cgroup.c - resource limits for one sandbox: cgroup v2, cgroup v1 (legacy
 * and hybrid hosts), or rlimits when no cgroup can be created.
 *
 * A sandbox gets one fresh directory "corral-<name>" below a parent:
 *   root:          <mount>/corral, created on first use;
 *   unprivileged:  <mount>/corral.<uid> if root delegated it (chown), else
 *                  <mount>/corral if that is writable, else no cgroup.
 * On v2 that is one directory; on v1 one per hierarchy in use (memory, pids,
 * cpu, cpuacct, freezer; co-mounted controllers share a hierarchy).
 *
 * Processes enter through cgroup.procs, never clone3(CLONE_INTO_CGROUP):
 * see KERNEL-NOTES.md.  A group is never reused: mkdir of an existing name
 * is an error.
 */
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

enum cg_ctrl { C_MEMORY, C_PIDS, C_CPU, C_CPUACCT, C_FREEZER, C_COUNT };

#define C_BIT(c)	(1u << (c))
#define C_REQUIRED	(C_BIT(C_MEMORY) | C_BIT(C_PIDS))

static const char *const ctrl_name[C_COUNT] = {
	[C_MEMORY] = "memory",
	[C_PIDS] = "pids",
	[C_CPU] = "cpu",
	[C_CPUACCT] = "cpuacct",
	[C_FREEZER] = "freezer",
};

#define CG_PARENT		"corral"
#define CG_PREFIX		"corral-"
#define CG_CFS_PERIOD		100000		/* us */
#define CG_FREEZE_WAIT_MS	2000
#define CG_KILL_FREEZE_MS	500
#define CG_EMPTY_WAIT_MS	2000
#define CG_KILL_ROUNDS		8
#define CG_RMDIR_TRIES		20
#define CG_PARENT_TRIES		5
#define CG_MAX_DEPTH		16

#define FALLBACK_SENTENCE \
	"limits fall back to rlimits (memory as address space, pids per user)"

/* One hierarchy the sandbox uses: the v2 tree, or one v1 mount. */
struct cg_hier {
	char *mount;		/* where the hierarchy is mounted */
	char *parent;		/* <mount>/corral or <mount>/corral.<uid> */
	char *dir;		/* <parent>/corral-<name>, once we created it */
	unsigned ctrls;		/* C_BIT()s this hierarchy serves */
	bool create_parent;	/* root: parent does not exist yet */
};

struct cg {
	enum cg_mode mode;
	bool hybrid;		/* a cgroup2 tree and v1 hierarchies side by side */
	unsigned ctrls;		/* union of the hierarchies' controllers */
	size_t nhier;
	struct cg_hier hier[C_COUNT + 1];	/* + hybrid: the cgroup2 tree */
};

/* What /proc/self/mountinfo says about cgroup filesystems. */
struct cg_mounts {
	char *v2;		/* first cgroup2 mount point */
	char *v2_root;		/* its root inside the hierarchy */
	char *v1[C_COUNT];	/* mount point of each v1 controller */
};

/* ---- small helpers --------------------------------------------------- */

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {
		.tv_sec = ms / 1000,
		.tv_nsec = (long)(ms % 1000) * 1000000,
	};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static char *path_join(const char *a, const char *b)
{
	char *p;

	if (asprintf(&p, "%s/%s", a, b) < 0)
		return NULL;
	return p;
}

/* Append to a NUL-terminated sentence in buf; truncates quietly. */
__attribute__((format(printf, 3, 4)))
static void appendf(char *buf, size_t len, const char *fmt, ...)
{
	size_t used = strnlen(buf, len);
	va_list ap;

	if (used + 1 >= len)
		return;
	va_start(ap, fmt);
	vsnprintf(buf + used, len - used, fmt, ap);
	va_end(ap);
}

static int file_path(char *buf, size_t len, const char *dir, const char *file)
{
	int n = snprintf(buf, len, "%s/%s", dir, file);

	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	return 0;
}

static bool file_exists(const char *dir, const char *file)
{
	char path[PATH_MAX];

	if (file_path(path, sizeof(path), dir, file) < 0)
		return false;
	return access(path, F_OK) == 0;
}

static bool dir_writable(const char *path)
{
	struct stat st;

	if (stat(path, &st) < 0 || !S_ISDIR(st.st_mode))
		return false;
	return faccessat(AT_FDCWD, path, W_OK | X_OK, AT_EACCESS) == 0;
}

/* Read a small file into buf (NUL-terminated); length or -errno. */
static ssize_t read_file(const char *dir, const char *file, char *buf,
			 size_t len)
{
	char path[PATH_MAX];
	ssize_t n;
	int fd, r;

	r = file_path(path, sizeof(path), dir, file);
	if (r < 0)
		return r;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	do
		n = read(fd, buf, len - 1);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	close(fd);
	buf[n] = '\0';
	return n;
}

static int write_file(const char *dir, const char *file, const char *val,
		      struct corral_err *err)
{
	char path[PATH_MAX];
	size_t len = strlen(val);
	ssize_t n;
	int fd, r;

	r = file_path(path, sizeof(path), dir, file);
	if (r < 0)
		return corral_set_err(err, r, "cgroup path %s/%s is too long",
				      dir, file);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		return corral_set_err(err, r, "cannot open %s: %s", path,
				      strerror(-r));
	}
	do
		n = write(fd, val, len);
	while (n < 0 && errno == EINTR);
	r = n < 0 ? -errno : 0;
	close(fd);
	if (r < 0)
		return corral_set_err(err, r, "cannot write \"%s\" to %s: %s",
				      val, path, strerror(-r));
	if ((size_t)n != len)
		return corral_set_err(err, -EIO,
				      "short write of \"%s\" to %s", val, path);
	return 0;
}

static int write_u64(const char *dir, const char *file, uint64_t v,
		     struct corral_err *err)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%" PRIu64, v);
	return write_file(dir, file, buf, err);
}

/* "key value" lines (cpu.stat, memory.events, ...): value of key, or -ENOENT. */
static int kv_get(const char *buf, const char *key, uint64_t *val)
{
	size_t klen = strlen(key);
	const char *p = buf;

	while (*p) {
		if (!strncmp(p, key, klen) && p[klen] == ' ') {
			*val = strtoull(p + klen + 1, NULL, 10);
			return 0;
		}
		p = strchrnul(p, '\n');
		if (*p)
			p++;
	}
	return -ENOENT;
}

/* Read one counter into *val; a missing file or key leaves it alone. */
static int read_kv(const char *dir, const char *file, const char *key,
		   uint64_t *val)
{
	char buf[4096];
	ssize_t n;

	n = read_file(dir, file, buf, sizeof(buf));
	if (n == -ENOENT)
		return 0;
	if (n < 0)
		return (int)n;
	if (!key) {
		*val = strtoull(buf, NULL, 10);
		return 0;
	}
	kv_get(buf, key, val);
	return 0;
}

/* Words of a cgroup.controllers / cgroup.subtree_control file as C_BIT()s. */
static unsigned read_ctrl_list(const char *dir, const char *file)
{
	char buf[1024], *tok, *save = NULL;
	unsigned bits = 0;

	if (read_file(dir, file, buf, sizeof(buf)) < 0)
		return 0;
	for (tok = strtok_r(buf, " \n", &save); tok;
	     tok = strtok_r(NULL, " \n", &save)) {
		for (int c = 0; c < C_COUNT; c++)
			if (!strcmp(tok, ctrl_name[c]))
				bits |= C_BIT(c);
	}
	return bits;
}

static struct cg_hier *hier_of(struct cg *cg, enum cg_ctrl c)
{
	for (size_t i = 0; i < cg->nhier; i++)
		if (cg->hier[i].ctrls & C_BIT(c))
			return &cg->hier[i];
	return NULL;
}

static void cg_free_hiers(struct cg *cg)
{
	for (size_t i = 0; i < cg->nhier; i++) {
		free(cg->hier[i].mount);
		free(cg->hier[i].parent);
		free(cg->hier[i].dir);
	}
	cg->nhier = 0;
}

/* ---- /proc/self/mountinfo -------------------------------------------- */

static void unescape_octal(char *s)
{
	char *w = s;

	for (const char *r = s; *r;) {
		if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' &&
		    r[2] >= '0' && r[2] <= '7' && r[3] >= '0' && r[3] <= '7') {
			*w++ = (char)(((r[1] - '0') << 6) |
				      ((r[2] - '0') << 3) | (r[3] - '0'));
			r += 4;
		} else {
			*w++ = *r++;
		}
	}
	*w = '\0';
}

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

static void mounts_free(struct cg_mounts *m)
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
static int mounts_add_line(struct cg_mounts *m, char *line)
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
	unescape_octal(f[3]);
	unescape_octal(f[4]);

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
		if (m->v1[c] || !opt_has(super, ctrl_name[c]))
			continue;
		m->v1[c] = strdup(f[4]);
		if (!m->v1[c])
			return -ENOMEM;
	}
	return 0;
}

static int mounts_read(struct cg_mounts *m, struct corral_err *err)
{
	const char *path = "/proc/self/mountinfo";
	char *line = NULL;
	size_t cap = 0;
	FILE *f;
	int r = 0;

	memset(m, 0, sizeof(*m));
	f = fopen(path, "re");
	if (!f) {
		r = -errno;
		return corral_set_err(err, r, "cannot read %s: %s", path,
				      strerror(-r));
	}
	while (r == 0 && getline(&line, &cap, f) > 0)
		r = mounts_add_line(m, line);
	free(line);
	fclose(f);
	if (r < 0) {
		mounts_free(m);
		return corral_set_err(err, r, "reading %s: %s", path,
				      strerror(-r));
	}
	return 0;
}

/* ---- planning: which hierarchies and parents (reads only) ------------ */

/*
 * The parent for this uid in one hierarchy.  Root: <mount>/corral, existing
 * and writable, or creatable.  Others: <mount>/corral.<uid> or <mount>/corral,
 * whichever exists and is writable first.  -EACCES when there is none.
 */
static int pick_parent(const char *mount, uid_t euid, char **parent,
		       bool *create)
{
	char name[64];
	char *p;

	*create = false;
	if (euid == 0) {
		p = path_join(mount, CG_PARENT);
		if (!p)
			return -ENOMEM;
		if (dir_writable(p)) {
			*parent = p;
			return 0;
		}
		if (access(p, F_OK) < 0 && errno == ENOENT &&
		    dir_writable(mount)) {
			*create = true;
			*parent = p;
			return 0;
		}
		free(p);
		return -EACCES;
	}
	snprintf(name, sizeof(name), CG_PARENT ".%u", (unsigned)euid);
	for (int i = 0; i < 2; i++) {
		p = path_join(mount, i ? CG_PARENT : name);
		if (!p)
			return -ENOMEM;
		if (dir_writable(p)) {
			*parent = p;
			return 0;
		}
		free(p);
	}
	return -EACCES;
}

static int add_hier(struct cg *cg, const char *mount, char *parent,
		    bool create, unsigned ctrls)
{
	struct cg_hier *h = &cg->hier[cg->nhier];

	h->mount = strdup(mount);
	if (!h->mount) {
		free(parent);
		return -ENOMEM;
	}
	h->parent = parent;
	h->create_parent = create;
	h->ctrls = ctrls;
	cg->ctrls |= ctrls;
	cg->nhier++;
	return 0;
}

/*
 * v2, unprivileged: moving a process needs write access to cgroup.procs of
 * the common ancestor of its current cgroup and the target.  The processes
 * we move are our children, so they start in our own cgroup.
 */
static bool v2_can_attach(const struct cg_mounts *m, const char *parent)
{
	char *line = NULL, *own = NULL, anc[PATH_MAX];
	size_t cap = 0, rootlen, i, last = 0;
	FILE *f;

	f = fopen("/proc/self/cgroup", "re");
	if (!f)
		return false;
	while (getline(&line, &cap, f) > 0) {
		if (!strncmp(line, "0::", 3)) {
			line[strcspn(line, "\n")] = '\0';
			own = line + 3;
			break;
		}
	}
	fclose(f);
	if (!own)
		goto no;
	/* own is relative to the cgroup namespace; the mount shows v2_root */
	rootlen = strcmp(m->v2_root, "/") ? strlen(m->v2_root) : 0;
	if (strncmp(own, m->v2_root, rootlen) ||
	    (own[rootlen] != '/' && own[rootlen] != '\0'))
		goto no;
	if (snprintf(anc, sizeof(anc), "%s%s", m->v2, own + rootlen) >=
	    (int)sizeof(anc))
		goto no;
	free(line);
	/* longest common prefix of anc and parent, on a path component */
	for (i = 0; anc[i] && anc[i] == parent[i]; i++)
		if (anc[i] == '/')
			last = i;
	if ((anc[i] == '\0' || anc[i] == '/') &&
	    (parent[i] == '\0' || parent[i] == '/'))
		last = i;
	anc[last] = '\0';
	if (strlen(anc) < strlen(m->v2))
		return false;
	if (file_path(anc + last, sizeof(anc) - last, "", "cgroup.procs") < 0)
		return false;
	return faccessat(AT_FDCWD, anc, W_OK, AT_EACCESS) == 0;
no:
	free(line);
	return false;
}

/*
 * Unprivileged v2: the delegated parent must offer memory and pids to its
 * children (or let us enable them), and we must be allowed to move our
 * children into it.  why says which of these is missing.
 */
static bool v2_user_ok(const struct cg_mounts *m, const char *parent,
		       uid_t euid, char *why, size_t len)
{
	unsigned avail, enabled;
	char sc[PATH_MAX];

	avail = read_ctrl_list(parent, "cgroup.controllers");
	if ((avail & C_REQUIRED) != C_REQUIRED)
		return false;
	enabled = read_ctrl_list(parent, "cgroup.subtree_control");
	if ((enabled & C_REQUIRED) != C_REQUIRED &&
	    (file_path(sc, sizeof(sc), parent, "cgroup.subtree_control") < 0 ||
	     faccessat(AT_FDCWD, sc, W_OK, AT_EACCESS) < 0)) {
		snprintf(why, len, "%s is writable but memory and pids are not "
			 "enabled in its cgroup.subtree_control", parent);
		return false;
	}
	if (!v2_can_attach(m, parent)) {
		snprintf(why, len, "%s is writable but uid %u may not move "
			 "processes into it (run corral inside that cgroup)",
			 parent, (unsigned)euid);
		return false;
	}
	return true;
}

/* 1: v2 chosen; 0: not usable (why may say why); <0: error */
static int plan_v2(struct cg *cg, const struct cg_mounts *m, uid_t euid,
		   char *why, size_t len)
{
	const unsigned want = C_BIT(C_MEMORY) | C_BIT(C_PIDS) | C_BIT(C_CPU);
	char *parent = NULL;
	unsigned avail;
	bool create;
	int r;

	r = pick_parent(m->v2, euid, &parent, &create);
	if (r == -ENOMEM)
		return r;
	if (r < 0)
		return 0;
	/* root enables what the tree has; others get what the parent offers */
	if (euid == 0) {
		avail = read_ctrl_list(m->v2, "cgroup.controllers");
	} else {
		avail = read_ctrl_list(parent, "cgroup.controllers");
		if (!v2_user_ok(m, parent, euid, why, len))
			avail = 0;
	}
	if ((avail & C_REQUIRED) != C_REQUIRED) {
		free(parent);
		return 0;
	}
	/* v2 has no cpuacct (cpu.stat is always there) and a freezer in core */
	r = add_hier(cg, m->v2, parent, create,
		     (avail & want) | C_BIT(C_CPUACCT) | C_BIT(C_FREEZER));
	if (r < 0)
		return r;
	cg->mode = CG_V2;
	return 1;
}

/* 1: v1 chosen; 0: not usable (why may say why); <0: error */
static int plan_v1(struct cg *cg, const struct cg_mounts *m, uid_t euid,
		   bool v2_id, char *why, size_t len)
{
	char *parent;
	bool create;
	int r;

	for (int c = 0; c < C_COUNT; c++) {
		bool shared = false;

		if (!m->v1[c])
			continue;
		for (size_t i = 0; i < cg->nhier; i++) {
			if (!strcmp(cg->hier[i].mount, m->v1[c])) {
				cg->hier[i].ctrls |= C_BIT(c);
				cg->ctrls |= C_BIT(c);
				shared = true;
			}
		}
		if (shared)
			continue;
		r = pick_parent(m->v1[c], euid, &parent, &create);
		if (r == -ENOMEM)
			return r;
		if (r < 0 && (C_BIT(c) & C_REQUIRED)) {
			if (euid == 0)
				snprintf(why, len, "root cannot create cgroups "
					 "in %s", m->v1[c]);
			goto no;
		}
		if (r < 0)
			continue;	/* optional controller, not delegated */
		r = add_hier(cg, m->v1[c], parent, create, C_BIT(c));
		if (r < 0)
			return r;
	}
	if ((cg->ctrls & C_REQUIRED) != C_REQUIRED)
		goto no;
	/*
	 * Hybrid: a directory in the cgroup2 tree too, with no controller.
	 * A socket records the cgroup2 group of its maker, so a connection
	 * can be traced to its tool call even after the process is gone.
	 */
	if (v2_id && m->v2 && pick_parent(m->v2, euid, &parent, &create) == 0) {
		if (euid != 0 && !v2_can_attach(m, parent)) {
			free(parent);	/* we could not move our children in */
		} else {
			r = add_hier(cg, m->v2, parent, create, 0);
			if (r < 0)
				return r;
		}
	}
	cg->mode = CG_V1;
	return 1;
no:
	cg_free_hiers(cg);
	cg->ctrls = 0;
	return 0;
}

static void explain_none(const struct cg_mounts *m, uid_t euid, char *why,
			 size_t len)
{
	char reason[CORRAL_ERR_MAX];
	unsigned uid = (unsigned)euid;

	memcpy(reason, why, sizeof(reason) < len ? sizeof(reason) : len);
	reason[sizeof(reason) - 1] = '\0';
	why[0] = '\0';
	if (reason[0])
		appendf(why, len, "%s", reason);
	else if (!(m->v1[C_MEMORY] && m->v1[C_PIDS]) && !m->v2)
		appendf(why, len, "no cgroup filesystem is mounted");
	else
		appendf(why, len, "no writable cgroup for uid %u", uid);
	appendf(why, len, ": " FALLBACK_SENTENCE);
	if (euid == 0)
		return;
	if (m->v1[C_MEMORY] && m->v1[C_PIDS])
		appendf(why, len, "; ask root to delegate %s/" CG_PARENT ".%u "
			"and %s/" CG_PARENT ".%u (mkdir, chown %u; the same in "
			"the cpu, cpuacct and freezer hierarchies for CPU "
			"limits and pause)", m->v1[C_MEMORY], uid,
			m->v1[C_PIDS], uid, uid);
	else if (m->v2)
		appendf(why, len, "; ask root to delegate %s/" CG_PARENT ".%u "
			"(mkdir, chown -R %u, +memory +pids in its "
			"cgroup.subtree_control) and run corral inside it",
			m->v2, uid, uid);
}

/*
 * Decide mode, hierarchies and parents without changing anything.  When the
 * result is CG_NONE, why holds a sentence for corral doctor.
 */
static int cg_plan(struct cg *cg, char *why, size_t len, bool v2_id,
		   struct corral_err *err)
{
	uid_t euid = geteuid();
	struct cg_mounts m;
	int r = 0;

	why[0] = '\0';
	cg->mode = CG_NONE;
	r = mounts_read(&m, err);
	if (r < 0)
		return r;
	cg->hybrid = m.v2 && (m.v1[C_MEMORY] || m.v1[C_PIDS]);
	if (m.v2)
		r = plan_v2(cg, &m, euid, why, len);
	if (r == 0 && m.v1[C_MEMORY] && m.v1[C_PIDS])
		r = plan_v1(cg, &m, euid, v2_id, why, len);
	if (r == 0)
		explain_none(&m, euid, why, len);
	mounts_free(&m);
	if (r < 0)
		return corral_set_err(err, r, "planning cgroups: %s",
				      strerror(-r));
	return 0;
}

/* ---- creating -------------------------------------------------------- */

static int check_name(const char *name, struct corral_err *err)
{
	size_t n = name ? strlen(name) : 0;

	if (n == 0 || n > NAME_MAX - strlen(CG_PREFIX) || strchr(name, '/') ||
	    !strcmp(name, ".") || !strcmp(name, ".."))
		return corral_set_err(err, -EINVAL, "bad cgroup name \"%s\": "
				      "1 to %zu characters, no '/'",
				      name ? name : "(null)",
				      NAME_MAX - strlen(CG_PREFIX));
	return 0;
}

/* v2: "+ctrl" into dir's cgroup.subtree_control for each wanted bit missing. */
static int v2_enable(struct cg *cg, const char *dir, struct corral_err *err)
{
	unsigned enabled = read_ctrl_list(dir, "cgroup.subtree_control");
	static const enum cg_ctrl order[] = { C_MEMORY, C_PIDS, C_CPU };
	char val[16];
	int r;

	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		enum cg_ctrl c = order[i];

		if (!(cg->ctrls & C_BIT(c)) || (enabled & C_BIT(c)))
			continue;
		snprintf(val, sizeof(val), "+%s", ctrl_name[c]);
		r = write_file(dir, "cgroup.subtree_control", val, err);
		if (r < 0 && c == C_CPU) {
			/* optional: the cpus limit is then not enforced */
			cg->ctrls &= ~C_BIT(C_CPU);
			cg->hier[0].ctrls &= ~C_BIT(C_CPU);
			continue;
		}
		if (r < 0)
			return r;
	}
	return 0;
}

/*
 * Root's "<mount>/corral" belongs to corral: made by the first sandbox that
 * needs it, removed by the last one to leave it empty.  A delegated
 * "corral.<uid>" belongs to whoever delegated it and stays.
 */
static bool parent_is_ours(const struct cg_hier *h)
{
	const char *slash = strrchr(h->parent, '/');

	return geteuid() == 0 && slash && !strcmp(slash + 1, CG_PARENT);
}

static int make_parents(struct cg *cg, struct corral_err *err)
{
	bool root = geteuid() == 0;
	int r;

	for (size_t i = 0; i < cg->nhier; i++) {
		struct cg_hier *h = &cg->hier[i];

		/* ours may have been removed since the plan: make it again */
		if ((h->create_parent || parent_is_ours(h)) &&
		    mkdir(h->parent, 0755) < 0 && errno != EEXIST) {
			r = -errno;
			return corral_set_err(err, r, "cannot create cgroup "
					      "%s: %s", h->parent,
					      strerror(-r));
		}
	}
	if (cg->mode != CG_V2)
		return 0;
	if (root) {
		r = v2_enable(cg, cg->hier[0].mount, err);
		if (r < 0)
			return r;
	}
	return v2_enable(cg, cg->hier[0].parent, err);
}

static int make_dirs(struct cg *cg, const char *name, struct corral_err *err)
{
	char leaf[NAME_MAX + 1];
	char *dir;
	int r;

	snprintf(leaf, sizeof(leaf), CG_PREFIX "%s", name);
	for (size_t i = 0; i < cg->nhier; i++) {
		struct cg_hier *h = &cg->hier[i];

		dir = path_join(h->parent, leaf);
		if (!dir)
			return corral_set_err(err, -ENOMEM, "out of memory");
		if (mkdir(dir, 0755) < 0) {
			r = -errno;
			if (r == -EEXIST)
				corral_set_err(err, r, "cgroup %s already "
					       "exists: sandbox names must be "
					       "unique", dir);
			else
				corral_set_err(err, r, "cannot create cgroup "
					       "%s: %s", dir, strerror(-r));
			free(dir);
			return r;
		}
		h->dir = dir;
	}
	return 0;
}

static int set_memory(struct cg *cg, uint64_t bytes, struct corral_err *err)
{
	const char *dir = hier_of(cg, C_MEMORY)->dir;
	int r;

	if (cg->mode == CG_V2) {
		r = write_u64(dir, "memory.max", bytes, err);
		if (r == 0 && file_exists(dir, "memory.swap.max"))
			r = write_file(dir, "memory.swap.max", "0", err);
		return r;
	}
	r = write_u64(dir, "memory.limit_in_bytes", bytes, err);
	if (r == 0 && file_exists(dir, "memory.memsw.limit_in_bytes"))
		r = write_u64(dir, "memory.memsw.limit_in_bytes", bytes, err);
	return r;
}

static int set_cpu(struct cg *cg, double cpus, struct corral_err *err)
{
	struct cg_hier *h = hier_of(cg, C_CPU);
	double q = cpus * CG_CFS_PERIOD;
	uint64_t quota;
	char buf[64];
	int r;

	if (!h)
		return 0;	/* no cpu controller: reported by cg_probe */
	if (!(q < 1e15))
		return corral_set_err(err, -EINVAL, "cpus limit %g is too "
				      "large", cpus);
	quota = (uint64_t)(q + 0.5);
	if (cg->mode == CG_V2) {
		snprintf(buf, sizeof(buf), "%" PRIu64 " %d", quota,
			 CG_CFS_PERIOD);
		return write_file(h->dir, "cpu.max", buf, err);
	}
	r = write_u64(h->dir, "cpu.cfs_period_us", CG_CFS_PERIOD, err);
	if (r < 0)
		return r;
	return write_u64(h->dir, "cpu.cfs_quota_us", quota, err);
}

static int set_limits(struct cg *cg, const struct corral_policy *p,
		      struct corral_err *err)
{
	int r;

	if (p->memory_bytes) {
		r = set_memory(cg, p->memory_bytes, err);
		if (r < 0)
			return r;
	}
	if (p->pids) {
		r = write_u64(hier_of(cg, C_PIDS)->dir, "pids.max", p->pids,
			      err);
		if (r < 0)
			return r;
	}
	if (p->cpus > 0)
		return set_cpu(cg, p->cpus, err);
	return 0;
}

static void remove_dirs(struct cg *cg);

int cg_create(struct cg **out, const char *name, const struct corral_policy *p,
	      unsigned int flags, struct corral_err *err)
{
	char why[CORRAL_ERR_MAX];
	struct cg *cg;
	int r;

	*out = NULL;
	r = check_name(name, err);
	if (r < 0)
		return r;
	cg = calloc(1, sizeof(*cg));
	if (!cg)
		return corral_set_err(err, -ENOMEM, "out of memory");
	r = cg_plan(cg, why, sizeof(why), flags & CG_V2_ID, err);
	if (r < 0)
		goto fail;
	if (cg->mode == CG_NONE) {
		*out = cg;
		return 0;
	}
	/*
	 * Another sandbox leaving may remove an empty parent between the two
	 * steps (ENOENT): make it again, a few times at most.
	 */
	for (int tries = 0; tries < CG_PARENT_TRIES; tries++) {
		r = make_parents(cg, err);
		if (r == 0)
			r = make_dirs(cg, name, err);
		if (r != -ENOENT)
			break;
		remove_dirs(cg);
	}
	if (r == 0)
		r = set_limits(cg, p, err);
	if (r < 0)
		goto fail;
	*out = cg;
	return 0;
fail:
	cg_destroy(cg);		/* removes what make_dirs created */
	return r;
}

/*
 * A handle on the same hierarchies as from, each with parent under_dir's
 * directory (a group below from's) or else from's own parent (a sibling),
 * and dir "<parent>/corral-<name>", not created.  NULL: out of memory.
 */
static struct cg *cg_beside(const struct cg *from, bool under_dir,
			    const char *name)
{
	struct cg *cg = calloc(1, sizeof(*cg));
	char leaf[NAME_MAX + 1];

	if (!cg)
		return NULL;
	cg->mode = from->mode;
	cg->hybrid = from->hybrid;
	cg->ctrls = from->ctrls;
	snprintf(leaf, sizeof(leaf), "%s%s", under_dir ? CG_PREFIX : "", name);
	for (size_t i = 0; i < from->nhier && cg->mode != CG_NONE; i++) {
		const struct cg_hier *f = &from->hier[i];
		struct cg_hier *h;

		/* a call's bandwidth limit is its sandbox's: no cpu group */
		if (under_dir && cg->mode == CG_V1 && f->ctrls == C_BIT(C_CPU))
			continue;
		h = &cg->hier[cg->nhier++];
		h->ctrls = f->ctrls;
		h->mount = strdup(f->mount);
		h->parent = strdup(under_dir ? f->dir : f->parent);
		h->dir = h->parent ? path_join(h->parent, leaf) : NULL;
		if (!h->mount || !h->parent || !h->dir) {
			cg_destroy(cg);
			return NULL;
		}
	}
	return cg;
}

int cg_create_child(struct cg *parent, const char *name, struct cg **out,
		    struct corral_err *err)
{
	struct cg *cg;
	int r;

	*out = NULL;
	r = check_name(name, err);
	if (r < 0)
		return r;
	cg = cg_beside(parent, true, name);
	if (!cg)
		return corral_set_err(err, -ENOMEM, "out of memory");
	for (size_t i = 0; i < cg->nhier; i++) {
		if (mkdir(cg->hier[i].dir, 0755) < 0) {
			r = corral_set_err(err, -errno, "cannot create cgroup %s: %s",
					   cg->hier[i].dir, strerror(errno));
			/* not ours: none of it may be removed by destroy */
			for (size_t j = i; j < cg->nhier; j++) {
				free(cg->hier[j].dir);
				cg->hier[j].dir = NULL;
			}
			cg_destroy(cg);
			return r;
		}
	}
	*out = cg;
	return 0;
}

enum cg_mode cg_mode(const struct cg *cg)
{
	return cg ? cg->mode : CG_NONE;
}

static const char *mode_name(enum cg_mode mode)
{
	switch (mode) {
	case CG_V2:
		return "cgroup v2";
	case CG_V1:
		return "cgroup v1";
	case CG_NONE:
	default:
		return "rlimit";
	}
}

const char *cg_mode_name(const struct cg *cg)
{
	return mode_name(cg_mode(cg));
}

int cg_attach(struct cg *cg, pid_t pid, struct corral_err *err)
{
	char buf[32];
	int r;

	if (!cg || cg->mode == CG_NONE)
		return 0;
	snprintf(buf, sizeof(buf), "%d", (int)pid);
	for (size_t i = 0; i < cg->nhier; i++) {
		r = write_file(cg->hier[i].dir, "cgroup.procs", buf, err);
		if (r < 0)
			return r;
	}
	return 0;
}

/* ---- stats ----------------------------------------------------------- */

int cg_stats(struct cg *cg, struct cg_stats *st)
{
	struct cg_hier *h;
	uint64_t usec = 0;
	int r = 0;

	memset(st, 0, sizeof(*st));
	if (!cg || cg->mode == CG_NONE)
		return 0;
	if (cg->mode == CG_V2) {
		const char *dir = cg->hier[0].dir;

		r = read_kv(dir, "cpu.stat", "usage_usec", &usec);
		st->cpu_ns = usec * 1000;
		if (r == 0)
			r = read_kv(dir, "memory.peak", NULL, &st->mem_peak);
		if (r == 0)
			r = read_kv(dir, "memory.current", NULL, &st->mem_current);
		if (r == 0)
			r = read_kv(dir, "memory.events", "oom_kill",
				    &st->oom_kills);
		if (r == 0)
			r = read_kv(dir, "pids.events", "max",
				    &st->pids_max_hits);
		read_kv(dir, "cpu.stat", "nr_throttled", &st->throttled);
	} else {
		h = hier_of(cg, C_CPUACCT);
		if (h)
			r = read_kv(h->dir, "cpuacct.usage", NULL, &st->cpu_ns);
		h = hier_of(cg, C_MEMORY);
		if (r == 0)
			r = read_kv(h->dir, "memory.max_usage_in_bytes", NULL,
				    &st->mem_peak);
		if (r == 0)
			r = read_kv(h->dir, "memory.usage_in_bytes", NULL,
				    &st->mem_current);
		if (r == 0)
			r = read_kv(h->dir, "memory.oom_control", "oom_kill",
				    &st->oom_kills);
		h = hier_of(cg, C_PIDS);
		if (r == 0)
			r = read_kv(h->dir, "pids.events", "max",
				    &st->pids_max_hits);
		h = hier_of(cg, C_CPU);
		if (h)	/* optional: no quota, no throttling */
			read_kv(h->dir, "cpu.stat", "nr_throttled", &st->throttled);
	}
	st->valid = r == 0;
	return r;
}

/* ---- freezer --------------------------------------------------------- */

static int v2_freeze(const char *dir, bool frozen, unsigned wait_ms,
		     struct corral_err *err)
{
	uint64_t deadline = now_ms() + wait_ms, state = !frozen;
	unsigned delay = 1;
	int r;

	r = write_file(dir, "cgroup.freeze", frozen ? "1" : "0", err);
	if (r < 0)
		return r;
	for (;;) {
		r = read_kv(dir, "cgroup.events", "frozen", &state);
		if (r < 0)
			return corral_set_err(err, r, "cannot read %s/"
					      "cgroup.events: %s", dir,
					      strerror(-r));
		if (state == (uint64_t)frozen)
			return 0;
		if (now_ms() >= deadline)
			break;
		sleep_ms(delay);
		if (delay < 20)
			delay *= 2;
	}
	if (frozen)	/* do not leave it half frozen */
		write_file(dir, "cgroup.freeze", "0", &(struct corral_err){0});
	return corral_set_err(err, -ETIMEDOUT, "cgroup %s did not %s within "
			      "%u ms", dir, frozen ? "freeze" : "thaw",
			      wait_ms);
}

static int v1_freeze(const char *dir, bool frozen, unsigned wait_ms,
		     struct corral_err *err)
{
	const char *want = frozen ? "FROZEN" : "THAWED";
	uint64_t deadline = now_ms() + wait_ms;
	unsigned delay = 1;
	char state[64] = "";
	ssize_t n;
	int r;

	for (;;) {
		/* the v1 freezer may need the request repeated (runc does) */
		r = write_file(dir, "freezer.state", want, err);
		if (r < 0)
			return r;
		n = read_file(dir, "freezer.state", state, sizeof(state));
		if (n < 0)
			return corral_set_err(err, (int)n, "cannot read %s/"
					      "freezer.state: %s", dir,
					      strerror((int)-n));
		state[strcspn(state, "\n")] = '\0';
		if (!strcmp(state, want))
			return 0;
		if (now_ms() >= deadline)
			break;
		sleep_ms(delay);
		if (delay < 20)
			delay *= 2;
	}
	if (frozen)
		write_file(dir, "freezer.state", "THAWED",
			   &(struct corral_err){0});
	return corral_set_err(err, -ETIMEDOUT, "cgroup %s did not reach %s "
			      "within %u ms (state %s)", dir, want, wait_ms,
			      state);
}

static int freeze_wait(struct cg *cg, bool frozen, unsigned wait_ms,
		       struct corral_err *err)
{
	struct cg_hier *h = hier_of(cg, C_FREEZER);

	if (!h)
		return corral_set_err(err, -ENOTSUP, "cannot %s the sandbox: "
				      "no freezer cgroup is usable here (%s)",
				      frozen ? "freeze" : "thaw",
				      mode_name(cg->mode));
	if (cg->mode == CG_V2)
		return v2_freeze(h->dir, frozen, wait_ms, err);
	return v1_freeze(h->dir, frozen, wait_ms, err);
}

int cg_freeze(struct cg *cg, bool frozen, struct corral_err *err)
{
	if (!cg || cg->mode == CG_NONE)
		return corral_set_err(err, -ENOTSUP, "cannot %s the sandbox: "
				      "it has no cgroup (limits are rlimits), "
				      "so there is no freezer",
				      frozen ? "freeze" : "thaw");
	return freeze_wait(cg, frozen, CG_FREEZE_WAIT_MS, err);
}

/* ---- killing and removal --------------------------------------------- */

/*
 * Call fn for dir and every cgroup below it (a sandbox that owns its
 * directory could have made children).  Post-order when post is set.
 */
static int walk(const char *dir, bool post, int depth,
		int (*fn)(const char *dir, void *arg), void *arg)
{
	struct dirent *de;
	DIR *d;
	int r = 0, rr;

	if (!post) {
		r = fn(dir, arg);
		if (r < 0)
			return r;
	}
	d = depth < CG_MAX_DEPTH ? opendir(dir) : NULL;
	while (d && (de = readdir(d))) {
		char *sub;

		if (de->d_type != DT_DIR || !strcmp(de->d_name, ".") ||
		    !strcmp(de->d_name, ".."))
			continue;
		sub = path_join(dir, de->d_name);
		if (!sub) {
			r = -ENOMEM;
			break;
		}
		rr = walk(sub, post, depth + 1, fn, arg);
		free(sub);
		if (rr < 0 && r == 0)
			r = rr;
	}
	if (d)
		closedir(d);
	if (post) {
		rr = fn(dir, arg);
		if (rr < 0 && r == 0)
			r = rr;
	}
	return r;
}

struct procs_walk {
	bool kill;
	pid_t self;
	size_t count;
};

/* Count (and maybe SIGKILL) the processes listed in dir/cgroup.procs. */
static int procs_one(const char *dir, void *arg)
{
	struct procs_walk *w = arg;
	char path[PATH_MAX];
	FILE *f;
	int pid, r;

	r = file_path(path, sizeof(path), dir, "cgroup.procs");
	if (r < 0)
		return r;
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? 0 : -errno;
	while (fscanf(f, "%d", &pid) == 1) {
		if (pid <= 1 || pid == w->self)
			continue;
		w->count++;
		if (w->kill && kill(pid, SIGKILL) < 0 && errno != ESRCH) {
			r = -errno;
			break;
		}
	}
	fclose(f);
	return r;
}

/* Number of processes left in the group's tree, SIGKILLing them if kill. */
static ssize_t procs_all(struct cg *cg, bool kill)
{
	struct procs_walk w = { .kill = kill, .self = getpid() };
	int r;

	for (size_t i = 0; i < cg->nhier; i++) {
		if (!cg->hier[i].dir)
			continue;
		r = walk(cg->hier[i].dir, false, 0, procs_one, &w);
		if (r < 0)
			return r;
	}
	return (ssize_t)w.count;
}

/* v1 (and v2 before cgroup.kill): freeze, SIGKILL each, thaw, repeat. */
static int kill_rounds(struct cg *cg)
{
	struct corral_err e;
	unsigned delay = 1;
	ssize_t n;
	bool frozen;

	n = procs_all(cg, false);
	if (n <= 0)
		return (int)n;	/* empty (the common case at destroy) */
	for (int round = 0; round < CG_KILL_ROUNDS; round++) {
		/*
		 * Frozen, nothing can fork between reading cgroup.procs and
		 * the kill, so one frozen round reaches everyone; later
		 * rounds only repeat the signal to processes still exiting.
		 */
		frozen = round == 0 && hier_of(cg, C_FREEZER) &&
			 freeze_wait(cg, true, CG_KILL_FREEZE_MS, &e) == 0;
		n = procs_all(cg, true);
		if (frozen)
			freeze_wait(cg, false, CG_KILL_FREEZE_MS, &e);
		if (n <= 0)
			return (int)n;
		sleep_ms(delay);
		delay *= 2;
	}
	return procs_all(cg, false) > 0 ? -EBUSY : 0;
}

int cg_try_remove(struct cg *cg)
{
	for (size_t i = 0; cg && cg->mode != CG_NONE && i < cg->nhier; i++) {
		struct cg_hier *h = &cg->hier[i];

		if (!h->dir)
			continue;
		/* EBUSY: someone is still in it (in every hierarchy, then) */
		if (rmdir(h->dir) < 0 && errno != ENOENT)
			return -errno;
		free(h->dir);
		h->dir = NULL;
	}
	return 0;
}

uint64_t cg_id(struct cg *cg)
{
	struct stat st;

	for (size_t i = 0; cg && cg->mode != CG_NONE && i < cg->nhier; i++) {
		if (cg->mode == CG_V1 && cg->hier[i].ctrls)
			continue;
		if (cg->hier[i].dir && stat(cg->hier[i].dir, &st) == 0)
			return st.st_ino;
	}
	return 0;
}

ssize_t cg_nprocs(struct cg *cg)
{
	struct procs_walk w = { .self = getpid() };
	int r;

	if (!cg || cg->mode == CG_NONE)
		return -ENOTSUP;
	if (!cg->nhier || !cg->hier[0].dir)
		return 0;
	/* every hierarchy holds the same processes: count them in one */
	r = walk(cg->hier[0].dir, false, 0, procs_one, &w);
	return r < 0 ? r : (ssize_t)w.count;
}

int cg_kill(struct cg *cg)
{
	struct corral_err e;
	const char *dir;

	if (!cg || cg->mode == CG_NONE)
		return -ENOTSUP;
	dir = cg->hier[0].dir;
	if (!dir)
		return 0;
	if (cg->mode == CG_V2 && file_exists(dir, "cgroup.kill"))
		return write_file(dir, "cgroup.kill", "1", &e);
	return kill_rounds(cg);
}

static int wait_empty(struct cg *cg, unsigned wait_ms)
{
	uint64_t start = now_ms();
	unsigned delay = 1;
	ssize_t n;

	for (;;) {
		/* stragglers that slipped past cg_kill get the signal too */
		n = procs_all(cg, now_ms() - start > 100);
		if (n <= 0)
			return (int)n;
		if (now_ms() - start >= wait_ms)
			return -EBUSY;
		sleep_ms(delay);
		if (delay < 20)
			delay *= 2;
	}
}

static int rmdir_one(const char *dir, void *arg)
{
	(void)arg;
	for (int i = 0; i < CG_RMDIR_TRIES; i++) {
		if (rmdir(dir) == 0 || errno == ENOENT)
			return 0;
		if (errno != EBUSY)
			return -errno;
		/* the last task can still be leaving the cgroup */
		sleep_ms(10);
	}
	return -EBUSY;
}

/* The sandbox's own directories, deepest first, in every hierarchy. */
static void remove_dirs(struct cg *cg)
{
	for (size_t i = 0; i < cg->nhier; i++) {
		if (cg->hier[i].dir)
			walk(cg->hier[i].dir, true, 0, rmdir_one, NULL);
		free(cg->hier[i].dir);
		cg->hier[i].dir = NULL;
	}
}

void cg_destroy(struct cg *cg)
{
	if (!cg)
		return;
	if (cg->mode != CG_NONE) {
		cg_kill(cg);
		wait_empty(cg, CG_EMPTY_WAIT_MS);
		remove_dirs(cg);
		/* the last sandbox out removes our parent (EBUSY: others remain) */
		for (size_t i = 0; i < cg->nhier; i++)
			if (parent_is_ours(&cg->hier[i]))
				rmdir(cg->hier[i].parent);
	}
	cg_free_hiers(cg);
	free(cg);
}

/* ---- rlimits --------------------------------------------------------- */

static int lower_rlimit(int res, const char *name, uint64_t v,
			struct corral_err *err)
{
	struct rlimit rl;
	int r;

	if (getrlimit(res, &rl) < 0) {
		r = -errno;
		return corral_set_err(err, r, "getrlimit(%s): %s", name,
				      strerror(-r));
	}
	/* never raise: keep a lower hard limit the caller already had */
	if (rl.rlim_max != RLIM_INFINITY && (uint64_t)rl.rlim_max < v)
		v = rl.rlim_max;
	rl.rlim_cur = rl.rlim_max = (rlim_t)v;
	if (setrlimit(res, &rl) < 0) {
		r = -errno;
		return corral_set_err(err, r, "setrlimit(%s, %" PRIu64 "): %s",
				      name, v, strerror(-r));
	}
	return 0;
}

int cg_apply_rlimits(const struct corral_policy *p, struct corral_err *err)
{
	int r;

	if (p->memory_bytes) {
		r = lower_rlimit(RLIMIT_AS, "RLIMIT_AS", p->memory_bytes, err);
		if (r < 0)
			return r;
	}
	if (p->pids)
		return lower_rlimit(RLIMIT_NPROC, "RLIMIT_NPROC", p->pids, err);
	return 0;
}

/* ---- corral doctor --------------------------------------------------- */

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');

	return s ? s + 1 : path;
}

static size_t dir_len(const char *path)
{
	const char *s = strrchr(path, '/');

	return s ? (size_t)(s - path) : 0;
}

/* "/sys/fs/cgroup/{memory,pids,cpu}/corral" when the layout allows it. */
static void describe_parents(const struct cg *cg, char *buf, size_t len)
{
	const struct cg_hier *h0 = &cg->hier[0];
	const char *base = base_name(h0->parent);
	size_t plen = dir_len(h0->mount);
	bool uniform = cg->nhier > 1;

	for (size_t i = 0; uniform && i < cg->nhier; i++) {
		const struct cg_hier *h = &cg->hier[i];
		size_t mlen = strlen(h->mount);

		uniform = dir_len(h->mount) == plen &&
			  !strncmp(h->mount, h0->mount, plen) &&
			  !strncmp(h->parent, h->mount, mlen) &&
			  h->parent[mlen] == '/' &&
			  !strcmp(h->parent + mlen + 1, base);
	}
	if (!uniform) {
		for (size_t i = 0; i < cg->nhier; i++)
			appendf(buf, len, "%s%s", i ? ", " : "",
				cg->hier[i].parent);
		return;
	}
	appendf(buf, len, "%.*s/{", (int)plen, h0->mount);
	for (size_t i = 0; i < cg->nhier; i++)
		appendf(buf, len, "%s%s", i ? "," : "",
			base_name(cg->hier[i].mount));
	appendf(buf, len, "}/%s", base);
}

static void describe(const struct cg *cg, char *buf, size_t len)
{
	const char *sep = ": ";

	buf[0] = '\0';
	appendf(buf, len, "%s", mode_name(cg->mode));
	if (cg->mode == CG_V1)
		appendf(buf, len, cg->hybrid ? " (hybrid host)" :
			" (legacy host)");
	for (int c = 0; c < C_COUNT; c++) {
		if (!(cg->ctrls & C_BIT(c)) ||
		    (cg->mode == CG_V2 && c == C_CPUACCT))
			continue;
		appendf(buf, len, "%s%s", sep, ctrl_name[c]);
		sep = ", ";
	}
	appendf(buf, len, " under ");
	describe_parents(cg, buf, len);
	for (size_t i = 0; i < cg->nhier; i++) {
		if (cg->hier[i].create_parent) {
			appendf(buf, len, " (created on first use)");
			break;
		}
	}
	if (!(cg->ctrls & C_BIT(C_CPU)))
		appendf(buf, len, "; no usable cpu controller: the cpus limit "
			"is not enforced");
	if (!(cg->ctrls & C_BIT(C_FREEZER)))
		appendf(buf, len, "; no usable freezer: sandboxes cannot be "
			"paused (halt kills without freezing)");
}

void cg_probe(struct corral_features *f)
{
	struct cg cg = { .mode = CG_NONE };
	char why[CORRAL_ERR_MAX];
	struct corral_err err = { 0 };

	if (cg_plan(&cg, why, sizeof(why), false, &err) < 0) {
		why[0] = '\0';
		appendf(why, sizeof(why), "cannot detect cgroups (%s): "
			FALLBACK_SENTENCE, err.msg);
	}
	f->limits = mode_name(cg.mode);
	f->cg_memory = cg.mode != CG_NONE && (cg.ctrls & C_BIT(C_MEMORY));
	f->cg_pids = cg.mode != CG_NONE && (cg.ctrls & C_BIT(C_PIDS));
	f->cg_cpu = cg.mode != CG_NONE && (cg.ctrls & C_BIT(C_CPU));
	f->cg_freezer = cg.mode != CG_NONE && (cg.ctrls & C_BIT(C_FREEZER));
	if (cg.mode == CG_NONE)
		snprintf(f->limits_detail, sizeof(f->limits_detail), "%s",
			 why);
	else
		describe(&cg, f->limits_detail, sizeof(f->limits_detail));
	cg_free_hiers(&cg);
}

/* ---- what a dead supervisor left -------------------------------------- */

/* "corral-<pid>-<rest>": the pid of the supervisor that made it. */
static pid_t owner_pid(const char *name)
{
	char *end;
	long pid;

	if (strncmp(name, CG_PREFIX, strlen(CG_PREFIX)) != 0)
		return 0;
	pid = strtol(name + strlen(CG_PREFIX), &end, 10);
	if (pid <= 0 || pid > INT_MAX || *end != '-')
		return 0;
	return (pid_t)pid;
}

/* Remove one stale group, the same name in every hierarchy of the plan. */
static void remove_stale(const struct cg *plan, const char *name)
{
	cg_destroy(cg_beside(plan, false, name));
}

/* only > 0: the groups of that supervisor; else those of dead ones */
static int cleanup(pid_t only)
{
	struct corral_err err;
	char why[CORRAL_ERR_MAX];
	struct cg plan = { 0 };
	struct dirent *de;
	int removed = 0;
	DIR *d;

	if (cg_plan(&plan, why, sizeof(why), true, &err) < 0)
		return 0;
	if (plan.mode != CG_NONE && plan.nhier > 0 &&
	    (d = opendir(plan.hier[0].parent))) {
		while ((de = readdir(d))) {
			pid_t pid = owner_pid(de->d_name);

			if (pid <= 0 || (only > 0 && pid != only))
				continue;
			/* Only groups whose supervisor is gone: never a live one's. */
			if (only <= 0 && (kill(pid, 0) == 0 || errno != ESRCH))
				continue;
			remove_stale(&plan, de->d_name);
			removed++;
		}
		closedir(d);
	}
	cg_free_hiers(&plan);
	return removed;
}

int cg_cleanup_stale(void)
{
	return cleanup(0);
}

int cg_cleanup_owner(pid_t pid)
{
	return pid > 0 ? cleanup(pid) : 0;
}
