/*
 * cgroup_v1.c - the manager for legacy and hybrid hosts: one hierarchy a
 * controller (co-mounted controllers share one), a directory in each, the
 * freezer as a controller of its own (freezer.state) and no cgroup.kill.
 *
 * On a hybrid host (v1 controllers beside a cgroup2 tree that holds none
 * of ours, as systemd's "hybrid" layout) a
 * group can also have a directory in the cgroup2 tree, with no controller:
 * a socket records the cgroup2 group of its maker, so a connection can be
 * traced to its tool call even after the process is gone.
 */
#include "cgroup_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#define CG_CFS_PERIOD	100000		/* us */

static int v1_plan(struct cg *cg, const struct cg_mounts *m, uid_t euid,
		   bool v2_id, char *why, size_t len)
{
	char *parent;
	bool create;
	int r;

	if (!m->v1[C_MEMORY] || !m->v1[C_PIDS])
		return 0;
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
		r = cg_pick_parent(m->v1[c], euid, &parent, &create);
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
		r = cg_add_hier(cg, m->v1[c], parent, create, C_BIT(c));
		if (r < 0)
			return r;
	}
	if ((cg->ctrls & C_REQUIRED) != C_REQUIRED)
		goto no;
	/* hybrid: the controller-less directory in the cgroup2 tree */
	if (v2_id && m->v2 && cg_pick_parent(m->v2, euid, &parent, &create) == 0) {
		if (euid != 0 && !cg_v2_can_attach(m, parent)) {
			free(parent);	/* we could not move our children in */
		} else {
			r = cg_add_hier(cg, m->v2, parent, create, 0);
			if (r < 0)
				return r;
		}
	}
	return 1;
no:
	cg_free_hiers(cg);
	cg->ctrls = 0;
	return 0;
}

static int v1_prepare(struct cg *cg, struct corral_err *err)
{
	(void)cg;
	(void)err;
	return 0;	/* a v1 controller serves every directory of its mount */
}

/*
 * v1 charges TCP buffers to no group unless the group's TCP counter is
 * switched on, by a write to its limit, and a socket to the group of the
 * process that made it: unlimited, a sandbox of 100M held 372 MiB of its
 * own loopback connections' buffers, and the host's tcp_mem (2.2 GiB on
 * 24) is one pool for every socket of the host.  The sandbox's group
 * gets its memory limit again for them, but never more than a quarter of
 * what all sandboxes share (half of tcp_mem, cg_host_tcp_share): one
 * sandbox of the default 2 GiB could otherwise take all of it from the
 * others.  With no memory limit, that quarter still, so that its sockets
 * are charged at all.  Each call's group, below it, gets an unlimited
 * counter that switches its charging on (the parent's bounds it).
 * cgroup v2 charges them to memory.current already.  The kernel logs once
 * a boot that kmem.tcp is deprecated; where it is gone, nothing is
 * written.
 */
#define V1_TCP_LIMIT	"memory.kmem.tcp.limit_in_bytes"
#define V1_TCP_PEAK	"memory.kmem.tcp.max_usage_in_bytes"
#define TCP_SANDBOX_PART	4

static int set_tcp(const char *dir, uint64_t bytes, struct corral_err *err)
{
	return cg_write_u64_if_there(dir, V1_TCP_LIMIT, bytes, err);
}

/* The sandbox's own, kept as the kernel does: in whole pages. */
static int set_own_tcp(struct cg *cg, uint64_t bytes, struct corral_err *err)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	int r = set_tcp(cg_hier_of(cg, C_MEMORY)->dir, bytes, err);

	if (r == 0)
		cg->tcp_limit = bytes / page * page;
	return r;
}

/* memory: the sandbox's limit, 0 for none */
static uint64_t tcp_limit(uint64_t memory)
{
	uint64_t part = cg_host_tcp_share() / TCP_SANDBOX_PART;

	if (!part)	/* /proc does not say */
		return memory ? memory : UINT64_MAX;
	return memory && memory < part ? memory : part;
}

static int set_memory(struct cg *cg, uint64_t bytes, struct corral_err *err)
{
	const char *dir = cg_hier_of(cg, C_MEMORY)->dir;
	int r;

	r = cg_write_u64(dir, "memory.limit_in_bytes", bytes, err);
	if (r == 0)	/* no swap accounting in this kernel: nothing to bound */
		r = cg_write_u64_if_there(dir, "memory.memsw.limit_in_bytes", bytes,
					  err);
	if (r == 0)
		r = set_own_tcp(cg, tcp_limit(bytes), err);
	return r;
}

/* A call's group: its sockets charged, under the sandbox's TCP limit. */
static int v1_child(struct cg *cg, struct corral_err *err)
{
	struct cg_hier *h = cg_hier_of(cg, C_MEMORY);

	return h ? set_tcp(h->dir, UINT64_MAX, err) : 0;
}

static int set_cpu(struct cg *cg, double cpus, struct corral_err *err)
{
	struct cg_hier *h = cg_hier_of(cg, C_CPU);
	double q = cpus * CG_CFS_PERIOD;
	int r;

	if (!h)
		return 0;	/* no cpu controller: reported by cg_probe */
	if (!(q < 1e15))
		return corral_set_err(err, -EINVAL, "cpus limit %g is too "
				      "large", cpus);
	r = cg_write_u64(h->dir, "cpu.cfs_period_us", CG_CFS_PERIOD, err);
	if (r < 0)
		return r;
	return cg_write_u64(h->dir, "cpu.cfs_quota_us", (uint64_t)(q + 0.5),
			    err);
}

static int v1_set_limits(struct cg *cg, const struct corral_policy *p,
			 struct corral_err *err)
{
	int r;

	if (p->memory_bytes) {
		r = set_memory(cg, p->memory_bytes, err);
		if (r < 0)
			return r;
	} else if (cg_hier_of(cg, C_MEMORY)) {
		r = set_own_tcp(cg, tcp_limit(0), err);
		if (r < 0)
			return r;
	}
	if (p->pids) {
		r = cg_write_u64(cg_hier_of(cg, C_PIDS)->dir, "pids.max",
				 p->pids, err);
		if (r < 0)
			return r;
	}
	if (p->cpus > 0)
		return set_cpu(cg, p->cpus, err);
	return 0;
}

/* Where v1 keeps each counter; key NULL: the file is the number. */
static const struct v1_counter {
	unsigned bit;
	enum cg_ctrl ctrl;
	const char *file, *key;
	size_t off;
	bool optional;		/* no such hierarchy, or unreadable: left 0 */
} v1_counters[] = {
	{ CG_ST_CPU, C_CPUACCT, "cpuacct.usage", NULL,
	  offsetof(struct cg_stats, cpu_ns), false },
	{ CG_ST_MEM_PEAK, C_MEMORY, "memory.max_usage_in_bytes", NULL,
	  offsetof(struct cg_stats, mem_peak), false },
	{ CG_ST_MEM_NOW, C_MEMORY, "memory.usage_in_bytes", NULL,
	  offsetof(struct cg_stats, mem_current), false },
	{ CG_ST_OOM, C_MEMORY, "memory.oom_control", "oom_kill",
	  offsetof(struct cg_stats, oom_kills), false },
	{ CG_ST_PIDS, C_PIDS, "pids.events", "max",
	  offsetof(struct cg_stats, pids_max_hits), false },
	/* no quota, no throttling */
	{ CG_ST_THROTTLED, C_CPU, "cpu.stat", "nr_throttled",
	  offsetof(struct cg_stats, throttled), true },
	/* gone where the kernel dropped kmem.tcp */
	{ CG_ST_TCP, C_MEMORY, V1_TCP_PEAK, NULL,
	  offsetof(struct cg_stats, tcp_peak), true },
};

_Static_assert(sizeof(v1_counters) / sizeof(v1_counters[0]) <= CG_COUNTERS_MAX,
	       "a slot for each counter file");

static int v1_stats(struct cg *cg, unsigned want, struct cg_stats *st)
{
	for (size_t i = 0; i < sizeof(v1_counters) / sizeof(v1_counters[0]); i++) {
		const struct v1_counter *k = &v1_counters[i];
		struct cg_hier *h = cg_hier_of(cg, k->ctrl);
		int r;

		if (!(want & k->bit) || !h)
			continue;	/* a call's group has no cpu hierarchy */
		r = cg_counter_kv(cg, i, h->dir, k->file, k->key,
			       (uint64_t *)((char *)st + k->off));
		if (r < 0 && !k->optional)
			return r;
	}
	if (want & CG_ST_TCP)
		st->tcp_limit = cg->tcp_limit;
	return 0;
}

static int v1_freeze_request(struct cg *cg, bool frozen,
			     struct corral_err *err)
{
	return cg_write_file(cg_hier_of(cg, C_FREEZER)->dir, "freezer.state",
			     frozen ? "FROZEN" : "THAWED", err);
}

static int v1_freeze_reached(struct cg *cg, bool frozen,
			     struct corral_err *err)
{
	const char *dir = cg_hier_of(cg, C_FREEZER)->dir;
	const char *want = frozen ? "FROZEN" : "THAWED";
	char state[64];
	ssize_t n;

	n = cg_read_file(dir, "freezer.state", state, sizeof(state));
	if (n < 0)
		return corral_set_errno(err, (int)-n, "cannot read %s/"
					"freezer.state", dir);
	state[strcspn(state, "\n")] = '\0';
	if (!strcmp(state, want))
		return 1;
	/* FREEZING: the v1 freezer may need the request repeated (runc does) */
	n = v1_freeze_request(cg, frozen, err);
	return n < 0 ? (int)n : 0;
}

static int v1_kill(struct cg *cg)
{
	(void)cg;
	return -EOPNOTSUPP;	/* no cgroup.kill: freeze, SIGKILL each, thaw */
}

/* The id of the controller-less directory in the cgroup2 tree (hybrid). */
static uint64_t v1_id(struct cg *cg)
{
	struct stat st;

	for (size_t i = 0; i < cg->nhier; i++) {
		if (cg->hier[i].ctrls)
			continue;
		if (cg->hier[i].dir && stat(cg->hier[i].dir, &st) == 0)
			return st.st_ino;
	}
	return 0;
}

/*
 * A process may move itself alone: "0" written to a hierarchy's tasks
 * file moves the writing thread, and the kernel then skips the global
 * lock (cgroup_threadgroup_rwsem) that moving another process takes for
 * writing, with its wait for an RCU grace period: 5-20 ms measured here
 * after a quiet spell, 0.03 ms for the move of oneself.  Root only: the
 * kernel checks the opener's credentials (ours) against the mover's, and
 * root's always pass.  Not with a hybrid plan's cgroup2 directory: it has
 * no tasks file.
 */
static int v1_entry_fds(struct cg *cg, int *fds, size_t max,
			struct corral_err *err)
{
	char path[PATH_MAX];
	int r;

	if (!cg->root || cg->nhier > max)
		return -ENOTSUP;
	for (size_t i = 0; i < cg->nhier; i++)
		if (!cg->hier[i].ctrls || !cg->hier[i].dir)
			return -ENOTSUP;
	for (size_t i = 0; i < cg->nhier; i++) {
		r = cg_file_path(path, sizeof(path), cg->hier[i].dir, "tasks");
		if (r == 0)
			fds[i] = open(path, O_WRONLY | O_CLOEXEC);
		if (r < 0 || fds[i] < 0) {
			r = r < 0 ? r : -errno;
			corral_set_errno(err, -r, "cannot open %s/tasks",
					 cg->hier[i].dir);
			while (i)
				close(fds[--i]);
			return r;
		}
	}
	return (int)cg->nhier;
}

void cg_tcp_rearm(struct cg *cg)
{
	struct cg_hier *h = cg_mode(cg) == CG_V1 ? cg_hier_of(cg, C_MEMORY) : NULL;
	struct corral_err err;

	/* v1 takes any write to a max_usage file as "start from now" */
	if (h && h->dir)
		cg_write_u64_if_there(h->dir, V1_TCP_PEAK, 0, &err);
}

void cg_mem_rearm(struct cg *cg)
{
	struct cg_hier *h = cg_mode(cg) == CG_V1 ? cg_hier_of(cg, C_MEMORY) : NULL;
	struct corral_err err;

	if (h && h->dir)
		cg_write_u64_if_there(h->dir, "memory.max_usage_in_bytes", 0, &err);
}

/*
 * v1's OOM notification (cgroup.event_control on memory.oom_control): the
 * kernel signals the eventfd each time its OOM killer is called for this
 * group's limit or an ancestor's (it notifies the whole subtree of the
 * group whose limit was met), just before it picks and kills.  So the
 * box's eventfd counts the OOMs of its limit whichever call's group the
 * victim is in, and no other group's: v1's oom_kill counts in the
 * victim's group alone, and /proc/vmstat's in the host's.  Measured on
 * 6.18: a kill in a call's group signalled the box's eventfd once, a kill
 * in a group beside the box none; the victim's count moved 0.2-32 ms
 * after the signal (17 of 20 reads right after it were early), and
 * under_oom was 0 again before it moved.  The registration lasts as long
 * as the eventfd (or the group); oom_control's fd only names the group.
 */
int cg_oom_events_open(struct cg *cg, struct corral_err *err)
{
	struct cg_hier *h = cg_mode(cg) == CG_V1 ? cg_hier_of(cg, C_MEMORY) : NULL;
	char path[PATH_MAX], val[32];
	int efd, cfd, r;

	if (!h || !h->dir)
		return corral_set_err(err, -EOPNOTSUPP, "no cgroup v1 memory "
				      "group to watch for OOM kills");
	r = cg_file_path(path, sizeof(path), h->dir, "memory.oom_control");
	if (r < 0)
		return corral_set_err(err, r, "%s/memory.oom_control: path too "
				      "long", h->dir);
	efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (efd < 0)
		return corral_set_errno(err, errno, "cannot make an eventfd for "
					"the OOM kills of %s", h->dir);
	cfd = open(path, O_RDONLY | O_CLOEXEC);
	if (cfd < 0) {
		r = corral_set_errno(err, errno, "cannot open %s", path);
		close(efd);
		return r;
	}
	snprintf(val, sizeof(val), "%d %d", efd, cfd);
	r = cg_write_file(h->dir, "cgroup.event_control", val, err);
	close(cfd);
	if (r < 0) {
		close(efd);
		return r;
	}
	return efd;
}

const struct cg_manager cg_v1_manager = {
	.mode = CG_V1,
	.name = "cgroup v1",
	.plan = v1_plan,
	.prepare = v1_prepare,
	.set_limits = v1_set_limits,
	.child = v1_child,
	.attach = cg_attach_procs,
	.entry_fds = v1_entry_fds,
	.stats = v1_stats,
	.freeze_request = v1_freeze_request,
	.freeze_reached = v1_freeze_reached,
	.kill = v1_kill,
	.id = v1_id,
};
