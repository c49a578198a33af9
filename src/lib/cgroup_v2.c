/*
 * cgroup_v2.c - the manager for the unified hierarchy: one directory a
 * group, controllers enabled from above (cgroup.subtree_control), the
 * freezer in core (cgroup.freeze, cgroup.events) and cgroup.kill.
 */
#include "cgroup_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CG_CFS_PERIOD	100000		/* us */

/* ---- planning ---------------------------------------------------------- */

bool cg_v2_can_attach(const struct cg_mounts *m, const char *parent)
{
	char anc[PATH_MAX];
	struct cg_proc self;
	const char *own;
	size_t rootlen, i, last = 0;

	/*
	 * Unprivileged, moving a process needs write access to cgroup.procs
	 * of the common ancestor of its current cgroup and the target.  The
	 * processes we move are our children, so they start in our own.
	 */
	if (cg_proc_read(&self, 0) < 0)
		return false;
	own = cg_proc_v2_path(&self);
	if (!own)
		return false;
	/* own is relative to the cgroup namespace; the mount shows v2_root */
	rootlen = strcmp(m->v2_root, "/") ? strlen(m->v2_root) : 0;
	if (strncmp(own, m->v2_root, rootlen) ||
	    (own[rootlen] != '/' && own[rootlen] != '\0'))
		return false;
	if (snprintf(anc, sizeof(anc), "%s%s", m->v2, own + rootlen) >=
	    (int)sizeof(anc))
		return false;
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
	if (cg_file_path(anc + last, sizeof(anc) - last, "", "cgroup.procs") < 0)
		return false;
	return faccessat(AT_FDCWD, anc, W_OK, AT_EACCESS) == 0;
}

/*
 * Unprivileged: the delegated parent must offer memory and pids to its
 * children (or let us enable them), and we must be allowed to move our
 * children into it.  why says which of these is missing.
 */
static bool user_ok(const struct cg_mounts *m, const char *parent,
		    uid_t euid, char *why, size_t len)
{
	unsigned avail, enabled;
	char sc[PATH_MAX];

	avail = cg_read_ctrl_list(parent, "cgroup.controllers");
	if ((avail & C_REQUIRED) != C_REQUIRED)
		return false;
	enabled = cg_read_ctrl_list(parent, "cgroup.subtree_control");
	if ((enabled & C_REQUIRED) != C_REQUIRED &&
	    (cg_file_path(sc, sizeof(sc), parent, "cgroup.subtree_control") < 0 ||
	     faccessat(AT_FDCWD, sc, W_OK, AT_EACCESS) < 0)) {
		snprintf(why, len, "%s is writable but memory and pids are not "
			 "enabled in its cgroup.subtree_control", parent);
		return false;
	}
	if (!cg_v2_can_attach(m, parent)) {
		snprintf(why, len, "%s is writable but uid %u may not move "
			 "processes into it (run corral inside that cgroup)",
			 parent, (unsigned)euid);
		return false;
	}
	return true;
}

static int v2_plan(struct cg *cg, const struct cg_mounts *m, uid_t euid,
		   bool v2_id, char *why, size_t len)
{
	const unsigned want = C_BIT(C_MEMORY) | C_BIT(C_PIDS) | C_BIT(C_CPU);
	char *parent = NULL;
	unsigned avail;
	bool create;
	int r;

	(void)v2_id;	/* the group is in the cgroup2 tree already */
	if (!m->v2)
		return 0;
	/*
	 * root enables what the tree has; others get what the parent offers.
	 * root asks the tree first: on a hybrid host (no memory, no pids in
	 * it) the parent is not probed here and then again by v1's plan.
	 */
	if (euid == 0) {
		avail = cg_read_ctrl_list(m->v2, "cgroup.controllers");
		if ((avail & C_REQUIRED) != C_REQUIRED)
			return 0;
	}
	r = cg_pick_parent(m->v2, euid, &parent, &create);
	if (r == -ENOMEM)
		return r;
	if (r < 0)
		return 0;
	if (euid != 0) {
		avail = cg_read_ctrl_list(parent, "cgroup.controllers");
		if (!user_ok(m, parent, euid, why, len))
			avail = 0;
	}
	if ((avail & C_REQUIRED) != C_REQUIRED) {
		free(parent);
		return 0;
	}
	/* v2 has no cpuacct (cpu.stat is always there) and a freezer in core */
	r = cg_add_hier(cg, m->v2, parent, create,
			(avail & want) | C_BIT(C_CPUACCT) | C_BIT(C_FREEZER));
	return r < 0 ? r : 1;
}

/* ---- creating ---------------------------------------------------------- */

/* "+ctrl" into dir's cgroup.subtree_control for each wanted bit missing. */
static int enable(struct cg *cg, const char *dir, struct corral_err *err)
{
	unsigned enabled = cg_read_ctrl_list(dir, "cgroup.subtree_control");
	static const enum cg_ctrl order[] = { C_MEMORY, C_PIDS, C_CPU };
	char val[16];
	int r;

	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		enum cg_ctrl c = order[i];

		if (!(cg->ctrls & C_BIT(c)) || (enabled & C_BIT(c)))
			continue;
		snprintf(val, sizeof(val), "+%s", cg_ctrl_name[c]);
		r = cg_write_file(dir, "cgroup.subtree_control", val, err);
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

static int v2_prepare(struct cg *cg, struct corral_err *err)
{
	int r;

	if (geteuid() == 0) {
		r = enable(cg, cg->hier[0].mount, err);
		if (r < 0)
			return r;
	}
	return enable(cg, cg->hier[0].parent, err);
}

static int v2_set_limits(struct cg *cg, const struct corral_policy *p,
			 struct corral_err *err)
{
	const char *dir = cg->hier[0].dir;
	double q = p->cpus * CG_CFS_PERIOD;
	char buf[64];
	int r;

	if (p->memory_bytes) {
		r = cg_write_u64(dir, "memory.max", p->memory_bytes, err);
		if (r == 0)	/* no swap accounting in this kernel: no swap to bar */
			r = cg_write_u64_if_there(dir, "memory.swap.max", 0, err);
		if (r < 0)
			return r;
	}
	if (p->pids) {
		r = cg_write_u64(dir, "pids.max", p->pids, err);
		if (r < 0)
			return r;
	}
	/* no cpu controller: reported by cg_probe */
	if (!(p->cpus > 0) || !(cg->ctrls & C_BIT(C_CPU)))
		return 0;
	if (!(q < 1e15))
		return corral_set_err(err, -EINVAL, "cpus limit %g is too "
				      "large", p->cpus);
	snprintf(buf, sizeof(buf), "%" PRIu64 " %d", (uint64_t)(q + 0.5),
		 CG_CFS_PERIOD);
	return cg_write_file(dir, "cpu.max", buf, err);
}

/* ---- running ----------------------------------------------------------- */

static int v2_stats(struct cg *cg, unsigned want, struct cg_stats *st)
{
	const char *dir = cg->hier[0].dir;
	char buf[4096];
	uint64_t usec = 0;
	ssize_t n;
	int r = 0;

	/* cpu.stat holds both: read once */
	if (want & (CG_ST_CPU | CG_ST_THROTTLED)) {
		n = cg_counter_file(cg, 0, dir, "cpu.stat", buf, sizeof(buf));
		if (n >= 0) {
			cg_kv_get(buf, "usage_usec", &usec);
			cg_kv_get(buf, "nr_throttled", &st->throttled);
		} else if (n != -ENOENT && (want & CG_ST_CPU)) {
			r = (int)n;	/* throttling alone is optional */
		}
		st->cpu_ns = usec * 1000;
	}
	if (r == 0 && (want & CG_ST_MEM_PEAK))
		r = cg_counter_kv(cg, 1, dir, "memory.peak", NULL, &st->mem_peak);
	if (r == 0 && (want & CG_ST_MEM_NOW))
		r = cg_counter_kv(cg, 2, dir, "memory.current", NULL, &st->mem_current);
	if (r == 0 && (want & CG_ST_OOM))
		r = cg_counter_kv(cg, 3, dir, "memory.events", "oom_kill", &st->oom_kills);
	if (r == 0 && (want & CG_ST_PIDS))
		r = cg_counter_kv(cg, 4, dir, "pids.events", "max", &st->pids_max_hits);
	return r;
}

static int v2_freeze_request(struct cg *cg, bool frozen,
			     struct corral_err *err)
{
	return cg_write_file(cg->hier[0].dir, "cgroup.freeze",
			     frozen ? "1" : "0", err);
}

static int v2_freeze_reached(struct cg *cg, bool frozen,
			     struct corral_err *err)
{
	const char *dir = cg->hier[0].dir;
	uint64_t state = !frozen;
	int r;

	r = cg_read_kv(dir, "cgroup.events", "frozen", &state);
	if (r < 0)
		return corral_set_errno(err, -r, "cannot read %s/cgroup.events",
					dir);
	return state == (uint64_t)frozen;
}

static int v2_kill(struct cg *cg)
{
	struct corral_err e;
	const char *dir = cg->hier[0].dir;

	/* cgroup.kill came with Linux 5.14 */
	if (!cg_file_exists(dir, "cgroup.kill"))
		return -EOPNOTSUPP;
	return cg_write_file(dir, "cgroup.kill", "1", &e);
}

static uint64_t v2_id(struct cg *cg)
{
	struct stat st;

	if (cg->hier[0].dir && stat(cg->hier[0].dir, &st) == 0)
		return st.st_ino;
	return 0;
}

const struct cg_manager cg_v2_manager = {
	.mode = CG_V2,
	.name = "cgroup v2",
	.plan = v2_plan,
	.prepare = v2_prepare,
	.set_limits = v2_set_limits,
	.attach = cg_attach_procs,
	.stats = v2_stats,
	.freeze_request = v2_freeze_request,
	.freeze_reached = v2_freeze_reached,
	.kill = v2_kill,
	.id = v2_id,
};
