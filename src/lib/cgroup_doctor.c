/*
 * cgroup_doctor.c - what corral doctor says about limits: the manager a
 * sandbox would get here, its controllers and parents, and when there is
 * none, why and what root could delegate.
 */
#include "cgroup_internal.h"

#include <stdio.h>
#include <string.h>

void cg_explain_none(const struct cg_mounts *m, uid_t euid, char *why,
		     size_t len)
{
	char reason[CORRAL_ERR_MAX];
	unsigned uid = (unsigned)euid;

	memcpy(reason, why, sizeof(reason) < len ? sizeof(reason) : len);
	reason[sizeof(reason) - 1] = '\0';
	why[0] = '\0';
	if (reason[0])
		cg_appendf(why, len, "%s", reason);
	else if (!(m->v1[C_MEMORY] && m->v1[C_PIDS]) && !m->v2)
		cg_appendf(why, len, "no cgroup filesystem is mounted");
	else
		cg_appendf(why, len, "no writable cgroup for uid %u", uid);
	cg_appendf(why, len, ": " CG_FALLBACK_SENTENCE);
	if (euid == 0)
		return;
	if (m->v1[C_MEMORY] && m->v1[C_PIDS])
		cg_appendf(why, len, "; ask root to delegate %s/" CG_PARENT ".%u "
			   "and %s/" CG_PARENT ".%u (mkdir, chown %u; the same "
			   "in the cpu, cpuacct and freezer hierarchies for CPU "
			   "limits and pause)", m->v1[C_MEMORY], uid,
			   m->v1[C_PIDS], uid, uid);
	else if (m->v2)
		cg_appendf(why, len, "; ask root to delegate %s/" CG_PARENT ".%u "
			   "(mkdir, chown -R %u, +memory +pids in its "
			   "cgroup.subtree_control) and run corral inside it",
			   m->v2, uid, uid);
}

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
			cg_appendf(buf, len, "%s%s", i ? ", " : "",
				   cg->hier[i].parent);
		return;
	}
	cg_appendf(buf, len, "%.*s/{", (int)plen, h0->mount);
	for (size_t i = 0; i < cg->nhier; i++)
		cg_appendf(buf, len, "%s%s", i ? "," : "",
			   base_name(cg->hier[i].mount));
	cg_appendf(buf, len, "}/%s", base);
}

static void describe(const struct cg *cg, char *buf, size_t len)
{
	const char *sep = ": ";
	enum cg_mode mode = cg->ops->mode;

	buf[0] = '\0';
	cg_appendf(buf, len, "%s", cg->ops->name);
	if (mode == CG_V1)
		cg_appendf(buf, len, cg->hybrid ? " (hybrid host)" :
			   " (legacy host)");
	for (int c = 0; c < C_COUNT; c++) {
		if (!(cg->ctrls & C_BIT(c)) ||
		    (mode == CG_V2 && c == C_CPUACCT))
			continue;
		cg_appendf(buf, len, "%s%s", sep, cg_ctrl_name[c]);
		sep = ", ";
	}
	cg_appendf(buf, len, " under ");
	describe_parents(cg, buf, len);
	for (size_t i = 0; i < cg->nhier; i++) {
		if (cg->hier[i].create_parent) {
			cg_appendf(buf, len, " (created on first use)");
			break;
		}
	}
	if (!(cg->ctrls & C_BIT(C_CPU)))
		cg_appendf(buf, len, "; no usable cpu controller: the cpus "
			   "limit is not enforced");
	if (!(cg->ctrls & C_BIT(C_FREEZER)))
		cg_appendf(buf, len, "; no usable freezer: sandboxes cannot be "
			   "paused (halt kills without freezing)");
}

/* Whether moves skip the grace period: see struct cg_mounts. */
static bool favor_dynmods(void)
{
	struct corral_err err;
	struct cg_mounts m;
	bool on;

	if (cg_mounts_read(&m, &err) < 0)
		return false;
	on = m.favordynmods;
	cg_mounts_free(&m);
	return on;
}

/* What bounds all sandboxes together: their parent's limit, or to be. */
static void share_of(struct cg *cg, enum cg_ctrl c, uint64_t (*now)(struct cg *),
		     struct corral_share *s)
{
	struct cg_hier *h = cg->ops->mode == CG_V1 ? cg_hier_of(cg, c) :
			    &cg->hier[0];

	if (!h || !h->parent)
		return;
	snprintf(s->parent, sizeof(s->parent), "%s", h->parent);
	s->planned = h->create_parent;
	s->value = h->create_parent ? s->host : now(cg);
}

void cg_probe(struct corral_features *f)
{
	struct cg cg = { .ops = &cg_none_manager };
	char why[CORRAL_ERR_MAX];
	struct corral_err err = { 0 };
	bool have;

	if (cg_plan(&cg, why, sizeof(why), false, &err) < 0) {
		why[0] = '\0';
		cg_appendf(why, sizeof(why), "cannot detect cgroups (%s): "
			   CG_FALLBACK_SENTENCE, err.msg);
	}
	have = cg.ops->mode != CG_NONE;
	f->limits = cg.ops->name;
	f->cg_memory = have && (cg.ctrls & C_BIT(C_MEMORY));
	f->cg_pids = have && (cg.ctrls & C_BIT(C_PIDS));
	f->cg_cpu = have && (cg.ctrls & C_BIT(C_CPU));
	f->cg_freezer = have && (cg.ctrls & C_BIT(C_FREEZER));
	f->cg_moves_fast = have && favor_dynmods();
	f->pids_share.host = cg_host_pids_share();
	if (f->cg_pids)
		share_of(&cg, C_PIDS, cg_pids_share, &f->pids_share);
	f->memory_share.host = cg_host_memory_share();
	if (f->cg_memory)
		share_of(&cg, C_MEMORY, cg_memory_share, &f->memory_share);
	f->tcp_share.host = cg_host_tcp_share();
	if (f->cg_memory && cg.ops->mode == CG_V1) {
		share_of(&cg, C_MEMORY, cg_tcp_share, &f->tcp_share);
		if (!f->tcp_share.planned)
			f->tcp_share.peak = cg_tcp_share_peak(&cg);
	}
	if (!have)
		snprintf(f->limits_detail, sizeof(f->limits_detail), "%s", why);
	else
		describe(&cg, f->limits_detail, sizeof(f->limits_detail));
	cg_free_hiers(&cg);
}
