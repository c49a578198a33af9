/*
 * cgroup_none.c - no cgroup could be made (unprivileged, nothing
 * delegated): the limits become rlimits in the child, there is no freezer
 * and nothing to kill by group.  The manager of a NULL handle too.
 */
#include "cgroup_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <sys/resource.h>

static int none_plan(struct cg *cg, const struct cg_mounts *m, uid_t euid,
		     bool v2_id, char *why, size_t len)
{
	(void)v2_id;
	(void)cg;
	cg_explain_none(m, euid, why, len);
	return 1;	/* always possible: the last resort */
}

static int none_nothing(struct cg *cg, struct corral_err *err)
{
	(void)cg;
	(void)err;
	return 0;
}

static int none_set_limits(struct cg *cg, const struct corral_policy *p,
			   struct corral_err *err)
{
	(void)cg;
	(void)p;
	(void)err;
	return 0;	/* cg_apply_rlimits() in the child */
}

static int none_attach(struct cg *cg, pid_t pid, struct corral_err *err)
{
	(void)cg;
	(void)pid;
	(void)err;
	return 0;
}

static int none_stats(struct cg *cg, unsigned want, struct cg_stats *st)
{
	(void)cg;
	(void)want;
	(void)st;
	return 0;	/* st stays zero and not valid */
}

static int none_freeze(struct cg *cg, bool frozen, struct corral_err *err)
{
	return cg_no_freezer(cg, frozen, err);
}

static int none_kill(struct cg *cg)
{
	(void)cg;
	return -ENOTSUP;
}

static uint64_t none_id(struct cg *cg)
{
	(void)cg;
	return 0;
}

const struct cg_manager cg_none_manager = {
	.mode = CG_NONE,
	.name = "rlimit",
	.plan = none_plan,
	.prepare = none_nothing,
	.set_limits = none_set_limits,
	.attach = none_attach,
	.stats = none_stats,
	.freeze_request = none_freeze,
	.freeze_reached = none_freeze,
	.kill = none_kill,
	.id = none_id,
};

/* ---- rlimits, in the child ---------------------------------------------- */

static int lower_rlimit(int res, const char *name, uint64_t v,
			struct corral_err *err)
{
	struct rlimit rl;
	int r;

	if (getrlimit(res, &rl) < 0) {
		r = -errno;
		return corral_set_errno(err, -r, "getrlimit(%s)", name);
	}
	/* never raise: keep a lower hard limit the caller already had */
	if (rl.rlim_max != RLIM_INFINITY && (uint64_t)rl.rlim_max < v)
		v = rl.rlim_max;
	rl.rlim_cur = rl.rlim_max = (rlim_t)v;
	if (setrlimit(res, &rl) < 0) {
		r = -errno;
		return corral_set_errno(err, -r, "setrlimit(%s, %" PRIu64 ")",
				      name, v);
	}
	return 0;
}

int cg_apply_rlimits(const struct corral_policy *p, struct corral_err *err)
{
	int r;

	/*
	 * RLIMIT_DATA, not RLIMIT_AS: since Linux 4.7 it counts the private
	 * writable mappings, what can cost memory, and not what cannot: a
	 * file mapped shared (a 4 GiB mmap of a file costs page cache, not
	 * the process's memory), code, PROT_NONE reservations (Go, V8, the
	 * JVM reserve gigabytes up front).  RLIMIT_AS counted all of these
	 * and failed ordinary programs.  What neither counts: shared
	 * anonymous memory (bounded here by nothing but the pids limit, as
	 * every per-process rlimit is multiplied by it); only a cgroup
	 * bounds a sandbox's memory as a whole.
	 */
	if (p->memory_bytes) {
		r = lower_rlimit(RLIMIT_DATA, "RLIMIT_DATA", p->memory_bytes, err);
		if (r < 0)
			return r;
	}
	if (p->pids)
		return lower_rlimit(RLIMIT_NPROC, "RLIMIT_NPROC", p->pids, err);
	return 0;
}
