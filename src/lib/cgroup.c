/*
 * cgroup.c - resource limits for one sandbox, the common part: which
 * manager (cgroup v2, cgroup v1 on legacy and hybrid hosts, or rlimits
 * when no cgroup can be made), and what every manager does the same way:
 * the directories, moving a process in, killing, removing, and the groups
 * a dead supervisor left.
 *
 * A sandbox gets one fresh directory "corral-<name>" below a parent:
 *   root:          <mount>/corral, created on first use and kept;
 *   unprivileged:  <mount>/corral.<uid> if root delegated it (chown), else
 *                  <mount>/corral if that is writable, else no cgroup.
 * On v2 that is one directory; on v1 one per hierarchy in use (memory, pids,
 * cpu, cpuacct, freezer; co-mounted controllers share a hierarchy), or
 * only those a one-shot run uses (CG_LIMITS_ONLY).
 *
 * Processes enter through cgroup.procs, never clone3(CLONE_INTO_CGROUP):
 * on the kernel it was measured on (6.18), a child cloned into a group
 * that ever received cgroup.kill, or by a parent in such a group, is
 * SIGKILLed at birth.  A group is never reused: mkdir of an existing name
 * is an error.
 */
#include "cgroup_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <sys/types.h>
#include <unistd.h>

#define CG_EMPTY_WAIT_MS	2000
#define CG_RMDIR_TRIES		20
#define CG_PARENT_TRIES		5
#define CG_MAX_DEPTH		16

/* The managers, in the order they are tried; the last always applies. */
static const struct cg_manager *const managers[] = {
	&cg_v2_manager,
	&cg_v1_manager,
	&cg_none_manager,
};

static const struct cg_manager *ops_of(const struct cg *cg)
{
	return cg ? cg->ops : &cg_none_manager;
}

struct cg_hier *cg_hier_of(struct cg *cg, enum cg_ctrl c)
{
	for (size_t i = 0; i < cg->nhier; i++)
		if (cg->hier[i].ctrls & C_BIT(c))
			return &cg->hier[i];
	return NULL;
}

void cg_free_hiers(struct cg *cg)
{
	for (size_t i = 0; i < cg->nhier; i++) {
		free(cg->hier[i].mount);
		free(cg->hier[i].parent);
		free(cg->hier[i].dir);
	}
	cg->nhier = 0;
}

/* ---- planning: which manager, hierarchies and parents (reads only) ---- */

int cg_pick_parent(const char *mount, uid_t euid, char **parent, bool *create)
{
	char name[64];
	char *p;

	*create = false;
	if (euid == 0) {
		p = cg_path_join(mount, CG_PARENT);
		if (!p)
			return -ENOMEM;
		if (cg_dir_writable(p)) {
			*parent = p;
			return 0;
		}
		/* the errno of cg_dir_writable's stat: not there (yet) */
		if (errno == ENOENT && cg_dir_writable(mount)) {
			*create = true;
			*parent = p;
			return 0;
		}
		free(p);
		return -EACCES;
	}
	snprintf(name, sizeof(name), CG_PARENT ".%u", (unsigned)euid);
	for (int i = 0; i < 2; i++) {
		p = cg_path_join(mount, i ? CG_PARENT : name);
		if (!p)
			return -ENOMEM;
		if (cg_dir_writable(p)) {
			*parent = p;
			return 0;
		}
		free(p);
	}
	return -EACCES;
}

int cg_add_hier(struct cg *cg, const char *mount, char *parent, bool create,
		unsigned ctrls)
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
 * The plan for v2_id, afresh: mountinfo (through watch, the open copy
 * that tells of changes, when there is one), then a probe of every
 * hierarchy.
 */
static int plan_fresh(struct cg *cg, char *why, size_t len, bool v2_id,
		      int watch, struct corral_err *err)
{
	uid_t euid = geteuid();
	struct cg_mounts m;
	int r = 0;

	why[0] = '\0';
	cg->ops = &cg_none_manager;
	r = watch >= 0 ? cg_mounts_read_fd(&m, watch, err) : cg_mounts_read(&m, err);
	if (r < 0)
		return r;
	cg->hybrid = m.v2 && (m.v1[C_MEMORY] || m.v1[C_PIDS]);
	for (size_t i = 0; i < sizeof(managers) / sizeof(managers[0]); i++) {
		r = managers[i]->plan(cg, &m, euid, v2_id, why, len);
		if (r != 0) {
			if (r > 0)
				cg->ops = managers[i];
			break;
		}
	}
	cg_mounts_free(&m);
	if (r < 0)
		return corral_set_errno(err, -r, "planning cgroups");
	return 0;
}

/*
 * The last plan that found cgroups (made with v2_id: the other is it
 * without the controller-less cgroup2 directory), kept while the mount
 * table stays as it was: a daemon making sandboxes, and `corral run`
 * (the stale groups, then its own), read mountinfo and probe every
 * hierarchy once, not once a group.  A change of the table is seen by
 * poll(2) on an open /proc/self/mountinfo (POLLPRI); a parent removed or
 * made unwritable since is seen by the mkdir that needs it, and the
 * group is planned afresh then (create_groups).
 */
static struct {
	pthread_mutex_t lock;
	int watch;		/* /proc/self/mountinfo, or -1 */
	pid_t owner;		/* who opened watch: a fork's copy is not its */
	bool valid;
	uid_t euid;
	struct cg plan;
} kept = { .lock = PTHREAD_MUTEX_INITIALIZER, .watch = -1 };

static void kept_drop(void)
{
	kept.valid = false;
	cg_free_hiers(&kept.plan);
	memset(&kept.plan, 0, sizeof(kept.plan));
}

/* Lock held.  False: the kept plan may be stale (or nothing watches). */
static bool mounts_unchanged(void)
{
	struct pollfd pfd;

	if (kept.watch >= 0 && kept.owner != getpid()) {
		kept.watch = -1;	/* the parent's: maybe closed, or another file now */
		kept_drop();
	}
	if (kept.watch < 0) {
		kept.watch = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
		kept.owner = getpid();
		return false;
	}
	pfd = (struct pollfd){ .fd = kept.watch, .events = POLLPRI };
	return poll(&pfd, 1, 0) == 0;
}

/* src's hierarchies into dst (no directories yet); for !v2_id without the
 * controller-less one of a v1 hybrid plan. */
static int plan_copy(struct cg *dst, const struct cg *src, bool v2_id)
{
	dst->ops = src->ops;
	dst->hybrid = src->hybrid;
	for (size_t i = 0; i < src->nhier; i++) {
		const struct cg_hier *h = &src->hier[i];
		char *parent;

		if (!v2_id && src->ops->mode == CG_V1 && !h->ctrls)
			continue;
		/* a hierarchy none of whose controllers is wanted */
		if (src->ops->mode == CG_V1 && h->ctrls && !(h->ctrls & ~dst->skip))
			continue;
		parent = strdup(h->parent);
		if (!parent || cg_add_hier(dst, h->mount, parent,
					   h->create_parent, h->ctrls) < 0) {
			cg_free_hiers(dst);
			return -ENOMEM;
		}
	}
	return 0;
}

/*
 * Decide the manager, hierarchies and parents without changing anything.
 * When the result is CG_NONE, why holds a sentence for corral doctor.
 */
int cg_plan(struct cg *cg, char *why, size_t len, bool v2_id,
	    struct corral_err *err)
{
	uid_t euid = geteuid();
	struct cg fresh = { 0 };
	int r;

	why[0] = '\0';
	cg->ops = &cg_none_manager;
	cg->kept_plan = false;
	cg->root = euid == 0;
	pthread_mutex_lock(&kept.lock);
	if (mounts_unchanged() && kept.valid && kept.euid == euid) {
		r = plan_copy(cg, &kept.plan, v2_id);
		cg->kept_plan = r == 0;
		pthread_mutex_unlock(&kept.lock);
		return r < 0 ? corral_set_errno(err, -r, "planning cgroups") : 0;
	}
	kept_drop();
	r = plan_fresh(&fresh, why, len, true, kept.watch, err);
	if (r == 0 && fresh.ops->mode != CG_NONE) {
		r = plan_copy(cg, &fresh, v2_id);
		if (r < 0)
			corral_set_errno(err, -r, "planning cgroups");
		if (r == 0 && kept.watch >= 0) {
			kept.plan = fresh;
			kept.euid = euid;
			kept.valid = true;
			memset(&fresh, 0, sizeof(fresh));
		}
	}
	pthread_mutex_unlock(&kept.lock);
	cg_free_hiers(&fresh);
	return r;
}

void cg_plan_forget(void)
{
	pthread_mutex_lock(&kept.lock);
	kept_drop();
	pthread_mutex_unlock(&kept.lock);
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

/*
 * Root's "<mount>/corral" is made by the first sandbox that needs it and
 * then stays, as docker's and systemd's slices do: its limits (an
 * operator's ceiling for all sandboxes together) outlive the sandboxes,
 * and no run pays a mkdir and an rmdir a hierarchy for it.  A delegated
 * "corral.<uid>" belongs to whoever delegated it.
 */
static bool parent_is_ours(const struct cg *cg, const struct cg_hier *h)
{
	const char *slash = strrchr(h->parent, '/');

	/* euid as planned: one geteuid() a plan, not one a hierarchy and step */
	return cg->root && slash && !strcmp(slash + 1, CG_PARENT);
}

/*
 * Each sandbox's pids.max bounds it alone, and the host's pids are one
 * pool: 32 sandboxes of the default 1024 fill this host's kernel.pid_max
 * of 32768, and then every fork of the host fails, root's too (at
 * kernel.threads-max, where pid_max is larger, the same).  A parent made
 * here holds all of root's sandboxes, the daemon's and each `corral
 * run`'s: it gets half of the pool as its pids.max, and the host keeps the
 * other half.  An operator may set another value; a parent that exists
 * is left as it is (a delegated one is its owner's).
 */
#define PIDS_HOST_SHARE		2

/*
 * Memory is one pool too: each sandbox's limit bounds it alone, and a TCP
 * peer's 100 sandboxes of 2 GiB are 200 GiB.  Past the host's memory the
 * kernel's own OOM killer chooses, host-wide, after a reclaim that stalls
 * every process of the host.  A parent made here gets three quarters of
 * the host's memory as its limit: the sandboxes together then meet their
 * own OOM killer, inside that group, and the host keeps a quarter.
 */
#define MEM_HOST_KEEP		4

uint64_t cg_host_memory_share(void)
{
	struct sysinfo si;
	uint64_t total;

	if (sysinfo(&si) < 0)
		return 0;
	total = (uint64_t)si.totalram * si.mem_unit;
	/* whole pages: what the kernel would keep of it */
	return (total - total / MEM_HOST_KEEP) & ~(uint64_t)4095;
}

/*
 * v1 charges a sandbox's TCP buffers to its group's kmem.tcp counter
 * (cgroup_v1.c), bounded by its memory limit and in sum by nothing: the
 * host's tcp_mem is one pool for every TCP socket of the host (2.2 GiB
 * here), past which every one of them is refused memory, and two
 * sandboxes of the default 2 GiB could take it.  A v1 parent made here
 * gets half of tcp_mem's hard limit as its kmem.tcp limit; v2 charges
 * the buffers to memory.current, within the memory share.
 */
#define TCP_HOST_SHARE		2

uint64_t cg_host_tcp_share(void)
{
	char buf[96];
	unsigned long long lo, mid, max = 0;
	long page = sysconf(_SC_PAGESIZE);
	/* a second old at most (hostsysctl.c): read on each sandbox's create */
	ssize_t n = host_sysctl_read("/proc/sys/net/ipv4/tcp_mem", buf, sizeof(buf));

	/* "min pressure max", in pages */
	if (n <= 0 || page <= 0 || sscanf(buf, "%llu %llu %llu", &lo, &mid, &max) != 3)
		return 0;
	return max / TCP_HOST_SHARE * (uint64_t)page;
}

uint64_t cg_host_pids_share(void)
{
	uint64_t pids = cg_read_u64("/proc/sys/kernel", "pid_max");
	uint64_t threads = cg_read_u64("/proc/sys/kernel", "threads-max");

	if (!pids || (threads && threads < pids))
		pids = threads;
	return pids / PIDS_HOST_SHARE;
}

/* again: a group's mkdir met ENOENT, ours was removed since the plan */
static int make_parents(struct cg *cg, bool again, struct corral_err *err)
{
	bool made[C_COUNT + 1] = { false }, any = false;
	uint64_t pids, mem, tcp;
	int r;

	for (size_t i = 0; i < cg->nhier; i++) {
		struct cg_hier *h = &cg->hier[i];

		if (!h->create_parent && !(again && parent_is_ours(cg, h)))
			continue;
		if (mkdir(h->parent, 0755) == 0) {
			made[i] = any = true;
		} else if (errno != EEXIST) {
			r = -errno;
			return corral_set_errno(err, -r, "cannot create cgroup "
					      "%s", h->parent);
		}
	}
	r = cg->ops->prepare(cg, err);
	if (r < 0 || !any)
		return r;
	pids = cg_host_pids_share();
	mem = cg_host_memory_share();
	tcp = cg->ops->mode == CG_V1 ? cg_host_tcp_share() : 0;
	for (size_t i = 0; i < cg->nhier; i++) {
		const char *dir = cg->hier[i].parent;

		if (!made[i])
			continue;
		r = 0;
		/* each file is in one hierarchy's parent only, or in v2's */
		if (pids)
			r = cg_write_u64_if_there(dir, "pids.max", pids, err);
		if (r == 0 && mem)
			r = cg_write_u64_if_there(dir, cg->ops->mode == CG_V1 ?
						  "memory.limit_in_bytes" :
						  "memory.max", mem, err);
		if (r == 0 && tcp)
			r = cg_write_u64_if_there(dir, "memory.kmem.tcp.limit_in_bytes",
						  tcp, err);
		if (r < 0)
			return r;
	}
	return 0;
}

/*
 * A fork the shared parent's pids.max refused (the host's pool, above) is
 * counted on v1 as the forker's own group's, as if its own limit had: only
 * the reason can say that it may have been the parent's.
 */
const char *cg_pids_share_said(const struct cg_stats *st,
			       char buf[CG_SHARE_SAID])
{
	buf[0] = '\0';
	if (st->pids_share)
		snprintf(buf, CG_SHARE_SAID, " (or all sandboxes together "
			 "held the %llu processes they may share)",
			 (unsigned long long)st->pids_share);
	return buf;
}

const char *cg_memory_share_said(const struct cg_stats *st,
				 char buf[CG_SHARE_SAID])
{
	char size[32];

	buf[0] = '\0';
	if (st->mem_share) {
		corral_format_size(st->mem_share, size, sizeof(size));
		snprintf(buf, CG_SHARE_SAID, " (or all sandboxes together "
			 "held the %s they may share)", size);
	}
	return buf;
}

bool cg_tcp_reached(const struct cg_stats *st)
{
	return st->valid && st->tcp_limit && st->tcp_peak >= st->tcp_limit;
}

/*
 * "TCP buffer limit 16 MiB reached ...": the result's and the limit.hit
 * event's words, from a group whose cg_tcp_reached().
 */
const char *cg_tcp_said(const struct cg_stats *st, char *buf, size_t len)
{
	char size[32], peak[32];

	corral_format_size(st->tcp_limit, size, sizeof(size));
	corral_format_size(st->tcp_peak, peak, sizeof(peak));
	snprintf(buf, len, "TCP buffer limit %s reached (the sandbox's sockets held "
		 "up to %s): the kernel holds back a connection whose buffers are "
		 "full, and kills nothing", size, peak);
	return buf;
}

/* A number in file of c's top parent (<mount>/corral[.uid]); 0 for none. */
static uint64_t top_value(struct cg *cg, enum cg_ctrl c, const char *file)
{
	struct cg_hier *h;
	char top[PATH_MAX];
	const char *rest;
	size_t n;

	if (cg_mode(cg) == CG_NONE)
		return 0;
	h = cg_mode(cg) == CG_V1 ? cg_hier_of(cg, c) : &cg->hier[0];
	if (!h || !h->parent)
		return 0;
	/* <mount>/corral[.uid]: the first directory below the mount */
	n = strlen(h->mount);
	if (strncmp(h->parent, h->mount, n) || h->parent[n] != '/')
		return 0;
	rest = h->parent + n + 1;
	n += 1 + strcspn(rest, "/");
	if (n >= sizeof(top))
		return 0;
	memcpy(top, h->parent, n);
	top[n] = '\0';
	return cg_read_u64(top, file);
}

uint64_t cg_pids_share(struct cg *cg)
{
	return top_value(cg, C_PIDS, "pids.max");
}

/*
 * A refused fork's other cause, "(or all sandboxes together held the N
 * processes they may share)": said unless the top parent's pids.peak
 * (6.1 on, v1 and v2) is below its pids.max, a share never reached.
 * Every pids hit under a sandbox's own limit offered this host's 16384,
 * of which all sandboxes together had held 1027 at most.  No peak to
 * read (an older kernel): said, as before.
 */
uint64_t cg_pids_share_met(struct cg *cg)
{
	uint64_t share = cg_pids_share(cg), peak;

	if (!share)
		return 0;
	peak = top_value(cg, C_PIDS, "pids.peak");
	return peak && peak < share ? 0 : share;
}

/* A v1 memory limit of the top parent; v1 says "none" as the largest
 * page-aligned 63-bit number, 0 here. */
static uint64_t top_v1_bytes(struct cg *cg, const char *file)
{
	uint64_t v = top_value(cg, C_MEMORY, file);

	return v >= (1ULL << 62) ? 0 : v;
}

uint64_t cg_memory_share(struct cg *cg)
{
	if (cg_mode(cg) != CG_V1)
		return top_value(cg, C_MEMORY, "memory.max");
	return top_v1_bytes(cg, "memory.limit_in_bytes");
}

/*
 * What an OOM kill's reason offers as its other cause, "(or all sandboxes
 * together held the SIZE they may share)": said where the top parent's
 * limit has refused a charge.  v1 counts each one it refused, there and
 * not below, in its memory.failcnt, for ever after: every OOM kill under
 * a sandbox's own limit offered the 17.7 GiB share of this host, which
 * all sandboxes together had never held more than 228 MiB of.  v2 offers
 * it as before, where it has a limit (not measured: this host is v1).
 */
uint64_t cg_memory_share_met(struct cg *cg)
{
	uint64_t share = cg_memory_share(cg);

	if (!share || cg_mode(cg) != CG_V1)
		return share;
	return top_value(cg, C_MEMORY, "memory.failcnt") ? share : 0;
}

uint64_t cg_tcp_share(struct cg *cg)
{
	return cg_mode(cg) == CG_V1 ? top_v1_bytes(cg, "memory.kmem.tcp.limit_in_bytes") : 0;
}

uint64_t cg_tcp_share_peak(struct cg *cg)
{
	return cg_mode(cg) == CG_V1 ? top_value(cg, C_MEMORY,
						"memory.kmem.tcp.max_usage_in_bytes") : 0;
}

static int make_dirs(struct cg *cg, const char *name, struct corral_err *err)
{
	char leaf[NAME_MAX + 1];
	char *dir;
	int r;

	snprintf(leaf, sizeof(leaf), CG_PREFIX "%s", name);
	for (size_t i = 0; i < cg->nhier; i++) {
		struct cg_hier *h = &cg->hier[i];

		dir = cg_path_join(h->parent, leaf);
		if (!dir)
			return corral_set_err(err, -ENOMEM, "out of memory "
					      "for the path of cgroup %s",
					      leaf);
		if (mkdir(dir, 0755) < 0) {
			r = -errno;
			if (r == -EEXIST)
				corral_set_err(err, r, "cgroup %s already "
					       "exists: sandbox names must be "
					       "unique", dir);
			else
				corral_set_errno(err, -r, "cannot create cgroup "
					       "%s", dir);
			free(dir);
			return r;
		}
		h->dir = dir;
	}
	return 0;
}

static void remove_dirs(struct cg *cg);

/* A handle on the hierarchies this host offers for name, nothing made. */
static int cg_alloc(struct cg **out, const char *name, unsigned flags,
		    const struct corral_policy *p, struct corral_err *err)
{
	char why[CORRAL_ERR_MAX];
	struct cg *cg;
	int r;

	r = check_name(name, err);
	if (r < 0)
		return r;
	cg = calloc(1, sizeof(*cg));
	if (!cg)
		return corral_set_err(err, -ENOMEM, "out of memory for the "
				      "cgroup handle of %s", name);
	if (flags & CG_LIMITS_ONLY)
		cg->skip = C_BIT(C_FREEZER) | (p->cpus > 0 ? 0 : C_BIT(C_CPU));
	cg->ops = &cg_none_manager;
	/* planned by cg_make, beside the sandbox's first steps */
	r = flags & CG_LATER ? 0 :
	    cg_plan(cg, why, sizeof(why), flags & CG_V2_ID, err);
	if (r < 0) {
		cg_free_hiers(cg);
		free(cg);
		return r;
	}
	*out = cg;
	return 0;
}

/*
 * The parents, then the groups.  A parent of ours removed since the plan
 * (by hand: no sandbox removes it) fails the group's mkdir with ENOENT:
 * make it again, a few times at most.
 */
static int make_tree(struct cg *cg, const char *name, struct corral_err *err)
{
	int r = -ENOENT;

	for (int tries = 0; tries < CG_PARENT_TRIES; tries++) {
		r = make_parents(cg, tries > 0, err);
		if (r == 0)
			r = make_dirs(cg, name, err);
		if (r != -ENOENT)
			break;
		remove_dirs(cg);
	}
	return r;
}

/*
 * A plan kept from an earlier group named what the host no longer has
 * (a parent removed or no longer ours to write): true when cg was such a
 * plan and its tree could not be made; the next plan is made afresh.
 */
static bool kept_plan_failed(struct cg *cg, int r)
{
	if (r == 0 || r == -EEXIST || !cg->kept_plan)
		return false;
	cg_plan_forget();
	return true;
}

/*
 * The tree, and if the plan was a kept one that names what the host no
 * longer has, the tree of a plan made afresh, in place.  The manager may
 * not change on the way: a caller may have acted on it (cg_mode).
 */
static int make_planned(struct cg *cg, const char *name, bool v2_id,
			struct corral_err *err)
{
	const struct cg_manager *ops = cg->ops;
	char why[CORRAL_ERR_MAX];
	int r;

	r = make_tree(cg, name, err);
	if (!kept_plan_failed(cg, r))
		return r;
	remove_dirs(cg);
	cg_free_hiers(cg);
	if (cg_plan(cg, why, sizeof(why), v2_id, err) < 0)
		return err->code;
	if (cg->ops != ops) {
		cg_free_hiers(cg);
		cg->ops = ops;
		return r;
	}
	return make_tree(cg, name, err);
}

int cg_create(struct cg **out, const char *name, const struct corral_policy *p,
	      unsigned int flags, struct corral_err *err)
{
	struct cg *cg;
	int r;

	*out = NULL;
	r = cg_alloc(&cg, name, flags, p, err);
	if (r < 0)
		return r;
	if (flags & CG_LATER) {
		cg->later.name = strdup(name);
		if (!cg->later.name) {
			cg_destroy(cg);
			return corral_set_err(err, -ENOMEM, "out of memory for "
					      "the cgroup handle of %s", name);
		}
		cg->later.p = p;
		cg->later.v2_id = flags & CG_V2_ID;
		*out = cg;
		return 0;
	}
	if (cg->ops->mode != CG_NONE) {
		r = make_planned(cg, name, flags & CG_V2_ID, err);
		if (r == 0)
			r = cg->ops->set_limits(cg, p, err);
	}
	if (r < 0) {
		cg_destroy(cg);		/* removes what make_dirs created */
		return r;
	}
	*out = cg;
	return 0;
}

int cg_make(struct cg *cg, struct corral_err *err)
{
	char why[CORRAL_ERR_MAX];
	char *name;
	int r;

	if (!cg || !cg->later.name)
		return 0;
	name = cg->later.name;
	cg->later.name = NULL;
	r = cg_plan(cg, why, sizeof(why), cg->later.v2_id, err);
	if (r == 0 && cg->ops->mode != CG_NONE)
		r = make_planned(cg, name, cg->later.v2_id, err);
	if (r == 0 && cg->ops->mode != CG_NONE)
		r = cg->ops->set_limits(cg, cg->later.p, err);
	free(name);
	return r;
}

/*
 * On v1 the kernel turns a global switch (the freezer_active static key)
 * on when the first group of the host starts freezing and off when the
 * last one thaws; each flip patches the kernel's text on every CPU, and
 * measured here a freeze or thaw that flips it takes 5-30 ms instead of
 * 0.2.  An empty group held FROZEN keeps the switch on, so the sandboxes'
 * freezes and thaws never flip it: the cost every task pays is then that
 * of a host where some group is frozen (a flag test on the freezer's
 * slow path), the state of a daemon with one idle sandbox anyway.
 */
static void keep_freezer_only(struct cg *cg)
{
	struct cg_hier keep = *cg_hier_of(cg, C_FREEZER);

	for (size_t i = 0; i < cg->nhier; i++) {
		if (cg->hier[i].mount == keep.mount)
			continue;
		free(cg->hier[i].mount);
		free(cg->hier[i].parent);
		free(cg->hier[i].dir);
	}
	memset(cg->hier, 0, sizeof(cg->hier));
	cg->hier[0] = keep;
	cg->nhier = 1;
	cg->ctrls = keep.ctrls;
	cg->hybrid = false;
}

int cg_freezer_hold(struct cg **out, const char *name, struct corral_err *err)
{
	struct cg *cg;
	int r;

	*out = NULL;
	for (int again = 0; again < 2; again++) {
		r = cg_alloc(&cg, name, 0, NULL, err);
		if (r < 0)
			return r;
		if (cg->ops->mode != CG_V1 || !cg_hier_of(cg, C_FREEZER)) {
			cg_free_hiers(cg);	/* v2 and none have no such switch */
			free(cg);
			return 0;
		}
		keep_freezer_only(cg);
		r = make_tree(cg, name, err);
		if (!kept_plan_failed(cg, r))
			break;
		cg_destroy(cg);
	}
	if (r == 0)
		r = cg->ops->freeze_request(cg, true, err);
	if (r < 0) {
		cg_destroy(cg);
		return r;
	}
	*out = cg;
	return 0;
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
	cg->ops = from->ops;
	cg->hybrid = from->hybrid;
	cg->ctrls = from->ctrls;
	cg->root = from->root;
	snprintf(leaf, sizeof(leaf), "%s%s", under_dir ? CG_PREFIX : "", name);
	for (size_t i = 0; i < from->nhier && cg->ops->mode != CG_NONE; i++) {
		const struct cg_hier *f = &from->hier[i];
		struct cg_hier *h;

		/* a call's bandwidth limit is its sandbox's: no cpu group */
		if (under_dir && cg->ops->mode == CG_V1 &&
		    f->ctrls == C_BIT(C_CPU))
			continue;
		h = &cg->hier[cg->nhier++];
		h->ctrls = f->ctrls;
		h->mount = strdup(f->mount);
		h->parent = strdup(under_dir ? f->dir : f->parent);
		h->dir = h->parent ? cg_path_join(h->parent, leaf) : NULL;
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
		return corral_set_err(err, -ENOMEM, "out of memory for the "
				      "cgroup handle of %s", name);
	for (size_t i = 0; i < cg->nhier; i++) {
		if (mkdir(cg->hier[i].dir, 0755) < 0) {
			r = corral_set_errno(err, errno, "cannot create cgroup %s",
					   cg->hier[i].dir);
			/* not ours: none of it may be removed by destroy */
			for (size_t j = i; j < cg->nhier; j++) {
				free(cg->hier[j].dir);
				cg->hier[j].dir = NULL;
			}
			cg_destroy(cg);
			return r;
		}
	}
	if (cg->ops->child) {
		r = cg->ops->child(cg, err);
		if (r < 0) {
			cg_destroy(cg);
			return r;
		}
	}
	*out = cg;
	return 0;
}

/* ---- the interface, through the manager ------------------------------ */

enum cg_mode cg_mode(const struct cg *cg)
{
	return ops_of(cg)->mode;
}

const char *cg_mode_name(const struct cg *cg)
{
	return ops_of(cg)->name;
}

void cg_hold_for_test(const char *var)
{
	const char *fifo = getenv(var);
	char c;
	int fd;

	if (!fifo || !fifo[0])
		return;
	fd = open(fifo, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	while (read(fd, &c, 1) < 0 && errno == EINTR)
		;
	close(fd);
}

void cg_helper_signals(void)
{
	sigset_t none;

	signal(SIGTERM, SIG_IGN);
	signal(SIGINT, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	signal(SIGCHLD, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

int cg_attach_procs(struct cg *cg, pid_t pid, struct corral_err *err)
{
	char buf[32];
	int r;

	snprintf(buf, sizeof(buf), "%d", (int)pid);
	for (size_t i = 0; i < cg->nhier; i++) {
		r = cg_write_file(cg->hier[i].dir, "cgroup.procs", buf, err);
		if (r < 0)
			return r;
	}
	return 0;
}

int cg_attach(struct cg *cg, pid_t pid, struct corral_err *err)
{
	return ops_of(cg)->attach(cg, pid, err);
}

int cg_entry_fds(struct cg *cg, int *fds, size_t max, struct corral_err *err)
{
	const struct cg_manager *ops = ops_of(cg);

	return ops->entry_fds ? ops->entry_fds(cg, fds, max, err) : -ENOTSUP;
}

int cg_enter(int *fds, size_t n, struct corral_err *err)
{
	int r = 0;

	for (size_t i = 0; i < n; i++) {
		/* "0": the writer's process, every thread of it */
		if (r == 0 && write(fds[i], "0", 1) != 1)
			r = corral_set_errno(err, errno, "cannot move into the "
					   "sandbox's cgroup (hierarchy %zu of %zu)",
					   i + 1, n);
		close(fds[i]);
	}
	return r;
}

int cg_stats_some(struct cg *cg, unsigned want, struct cg_stats *st)
{
	int r;

	memset(st, 0, sizeof(*st));
	if (cg_mode(cg) == CG_NONE)
		return 0;
	r = cg->ops->stats(cg, want, st);
	st->valid = r == 0;
	return r;
}

int cg_stats(struct cg *cg, struct cg_stats *st)
{
	return cg_stats_some(cg, CG_ST_ALL, st);
}

void cg_keep_counters(struct cg *cg, unsigned want)
{
	struct cg_stats st;

	if (cg_mode(cg) == CG_NONE || cg->counters_kept)
		return;
	for (size_t i = 0; i < CG_COUNTERS_MAX; i++)
		cg->counter_fd[i] = -1;
	cg->counters_kept = true;
	/* a read opens each file; what it says now is nobody's */
	cg_stats_some(cg, want, &st);
}

void cg_drop_counters(struct cg *cg)
{
	/* NULL: a box's group handed to the reaper already (call_counters_rest) */
	if (!cg || !cg->counters_kept)
		return;
	for (size_t i = 0; i < CG_COUNTERS_MAX; i++)
		if (cg->counter_fd[i] >= 0)
			close(cg->counter_fd[i]);
	cg->counters_kept = false;
}

bool cg_counts_cpu(struct cg *cg)
{
	switch (cg_mode(cg)) {
	case CG_V2:
		return true;	/* cpu.stat's usage_usec, with or without cpu */
	case CG_V1:
		return cg_hier_of(cg, C_CPUACCT) != NULL;
	default:
		return false;
	}
}

int cg_cpu_ns(struct cg *cg, pid_t init, uint64_t *ns)
{
	struct cg_stats st = { 0 };

	*ns = 0;
	if (cg_counts_cpu(cg)) {
		if (cg_stats_some(cg, CG_ST_CPU, &st) < 0 || !st.valid)
			return -EIO;
		*ns = st.cpu_ns;
		return 0;
	}
	/* a walk of /proc a reading: only where no cgroup counts CPU */
	return init > 0 ? proc_tree_cpu_ns(init, ns) : -ESRCH;
}

uint64_t cg_id(struct cg *cg)
{
	/* a directory's inode: a stat, once (cg_create_child's caller may ask ahead) */
	if (cg && !cg->id)
		cg->id = ops_of(cg)->id(cg);
	return cg ? cg->id : ops_of(cg)->id(cg);
}

/* ---- freezer (waiting; the loop's way is in cgroup_freeze.c) --------- */

int cg_no_freezer(struct cg *cg, bool frozen, struct corral_err *err)
{
	if (cg_mode(cg) == CG_NONE)
		return corral_set_err(err, -ENOTSUP, "cannot %s the sandbox: "
				      "it has no cgroup (limits are rlimits), "
				      "so there is no freezer",
				      frozen ? "freeze" : "thaw");
	return corral_set_err(err, -ENOTSUP, "cannot %s the sandbox: no "
			      "freezer cgroup is usable here (%s)",
			      frozen ? "freeze" : "thaw", cg->ops->name);
}

int cg_freeze_timeout(struct cg *cg, bool frozen, unsigned wait_ms,
		      struct corral_err *err)
{
	struct corral_err ignored;

	if (frozen)	/* do not leave it half frozen */
		cg->ops->freeze_request(cg, false, &ignored);
	return corral_set_err(err, -ETIMEDOUT, "cgroup %s did not %s within "
			      "%u ms", cg_hier_of(cg, C_FREEZER)->dir,
			      frozen ? "freeze" : "thaw", wait_ms);
}

int cg_freeze_wait(struct cg *cg, bool frozen, unsigned wait_ms,
		   struct corral_err *err)
{
	uint64_t deadline = corral_now_ms() + wait_ms;
	unsigned delay = 1;
	int r;

	if (cg_mode(cg) == CG_NONE || !cg_hier_of(cg, C_FREEZER))
		return cg_no_freezer(cg, frozen, err);
	r = cg->ops->freeze_request(cg, frozen, err);
	while (r == 0) {
		r = cg->ops->freeze_reached(cg, frozen, err);
		if (r != 0 || corral_now_ms() >= deadline)
			break;
		cg_sleep_ms(delay);
		if (delay < 20)
			delay *= 2;
	}
	if (r == 0)
		return cg_freeze_timeout(cg, frozen, wait_ms, err);
	return r < 0 ? r : 0;
}

int cg_freeze(struct cg *cg, bool frozen, struct corral_err *err)
{
	if (cg)
		cg_op_cancel(cg);
	return cg_freeze_wait(cg, frozen, CG_FREEZE_WAIT_MS, err);
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
		sub = cg_path_join(dir, de->d_name);
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
	pid_t *pids;		/* cg_pids: the first max pids found */
	size_t max;
};

/* Count (and maybe SIGKILL) the processes listed in dir/cgroup.procs. */
static int procs_one(const char *dir, void *arg)
{
	struct procs_walk *w = arg;
	char path[PATH_MAX];
	FILE *f;
	int pid, r;

	r = cg_file_path(path, sizeof(path), dir, "cgroup.procs");
	if (r < 0)
		return r;
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? 0 : -errno;
	while (fscanf(f, "%d", &pid) == 1) {
		if (pid <= 1 || pid == w->self)
			continue;
		if (w->pids && w->count < w->max)
			w->pids[w->count] = pid;
		w->count++;
		if (w->kill && kill(pid, SIGKILL) < 0 && errno != ESRCH) {
			r = -errno;
			break;
		}
	}
	fclose(f);
	return r;
}

ssize_t cg_procs_all(struct cg *cg, bool kill)
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

int cg_set_limits(struct cg *cg, const struct corral_policy *p,
		  struct corral_err *err)
{
	if (cg_mode(cg) == CG_NONE)
		return corral_set_err(err, -ENOTSUP, "no cgroup to change the "
				      "limits of (%s)", cg_mode_name(cg));
	return cg->ops->set_limits(cg, p, err);
}

ssize_t cg_pids(struct cg *cg, pid_t *pids, size_t max)
{
	struct procs_walk w = { .self = getpid(), .pids = pids, .max = max };

	/* every hierarchy lists the same processes: the first one says it */
	for (size_t i = 0; i < cg->nhier; i++) {
		if (!cg->hier[i].dir)
			continue;
		int r = walk(cg->hier[i].dir, false, 0, procs_one, &w);

		return r < 0 ? r : (ssize_t)w.count;
	}
	return -ENOTSUP;
}

int cg_kill_rounds(struct cg *cg)
{
	struct corral_err e;
	unsigned delay = 1;
	ssize_t n;
	bool frozen;

	n = cg_procs_all(cg, false);
	if (n <= 0)
		return (int)n;	/* empty (the common case at destroy) */
	for (int round = 0; round < CG_KILL_ROUNDS; round++) {
		/*
		 * Frozen, nothing can fork between reading cgroup.procs and
		 * the kill, so one frozen round reaches everyone; later
		 * rounds only repeat the signal to processes still exiting.
		 */
		frozen = round == 0 && cg_hier_of(cg, C_FREEZER) &&
			 cg_freeze_wait(cg, true, CG_KILL_FREEZE_MS, &e) == 0;
		n = cg_procs_all(cg, true);
		if (frozen)
			cg_freeze_wait(cg, false, CG_KILL_FREEZE_MS, &e);
		if (n <= 0)
			return (int)n;
		cg_sleep_ms(delay);
		delay *= 2;
	}
	return cg_procs_all(cg, false) > 0 ? -EBUSY : 0;
}

/*
 * Groups are made in the order of the plan's hierarchies and removed in
 * the reverse order, so that while a group has a directory anywhere it
 * has one in the first hierarchy: what a killed supervisor leaves, even
 * half made or half removed, is listed there (cg_cleanup_stale_groups).
 */
int cg_try_remove(struct cg *cg)
{
	for (size_t i = cg_mode(cg) != CG_NONE ? cg->nhier : 0; i-- > 0;) {
		struct cg_hier *h = &cg->hier[i];

		if (!h->dir)
			continue;
		/* EBUSY: someone is still in it (in every hierarchy, then) */
		if (rmdir(h->dir) < 0 && errno != ENOENT)
			return -errno;
		free(h->dir);
		h->dir = NULL;
	}
	if (cg)
		cg_op_cancel(cg);	/* nothing left to freeze or kill */
	return 0;
}

ssize_t cg_nprocs(struct cg *cg)
{
	struct procs_walk w = { .self = getpid() };
	int r;

	if (cg_mode(cg) == CG_NONE)
		return -ENOTSUP;
	if (!cg->nhier || !cg->hier[0].dir)
		return 0;
	/* every hierarchy holds the same processes: count them in one */
	r = walk(cg->hier[0].dir, false, 0, procs_one, &w);
	return r < 0 ? r : (ssize_t)w.count;
}

int cg_kill(struct cg *cg)
{
	int r;

	if (cg_mode(cg) == CG_NONE)
		return -ENOTSUP;
	if (!cg->hier[0].dir)
		return 0;
	cg_op_cancel(cg);
	r = cg->ops->kill(cg);
	return r == -EOPNOTSUPP ? cg_kill_rounds(cg) : r;
}

static int wait_empty(struct cg *cg, unsigned wait_ms)
{
	uint64_t start = corral_now_ms();
	unsigned delay = 1;
	ssize_t n;

	for (;;) {
		/* stragglers that slipped past cg_kill get the signal too */
		n = cg_procs_all(cg, corral_now_ms() - start > 100);
		if (n <= 0)
			return (int)n;
		if (corral_now_ms() - start >= wait_ms)
			return -EBUSY;
		cg_sleep_ms(delay);
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
		cg_sleep_ms(10);
	}
	return -EBUSY;
}

/* The sandbox's own directories, deepest first, in every hierarchy. */
static void remove_dirs(struct cg *cg)
{
	for (size_t i = cg->nhier; i-- > 0;) {	/* the first last: cg_try_remove */
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
	free(cg->later.name);
	cg_op_cancel(cg);
	cg_drop_counters(cg);
	if (cg->ops->mode != CG_NONE) {
		/*
		 * Empty, the common case (a sandbox's PID 1 takes every
		 * process with it): one rmdir a hierarchy.  A task is in one
		 * group of every hierarchy, so a first rmdir that succeeds
		 * means none is left; what fails (children the sandbox made,
		 * a task still leaving) takes the careful way.
		 */
		if (cg_try_remove(cg) < 0) {
			cg_kill(cg);
			wait_empty(cg, CG_EMPTY_WAIT_MS);
			remove_dirs(cg);
		}
	}
	cg_free_hiers(cg);
	free(cg);
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

static bool in_dir(const char *dir, const char *name)
{
	char path[PATH_MAX];

	return snprintf(path, sizeof(path), "%s/%s", dir, name) < (int)sizeof(path) &&
	       access(path, F_OK) == 0;
}

/*
 * only > 0: the groups of that supervisor; else those of dead ones.
 * every: the parents of all hierarchies, else the first one's alone.
 */
static int cleanup(pid_t only, bool every)
{
	struct corral_err err;
	char why[CORRAL_ERR_MAX];
	struct cg plan = { 0 };
	struct dirent *de;
	int removed = 0;
	DIR *d;

	if (cg_plan(&plan, why, sizeof(why), true, &err) < 0)
		return 0;
	/*
	 * A sandbox's group has a directory in the first hierarchy while it
	 * has one anywhere (cg_try_remove), so the first one lists them all;
	 * the others are read for what lives in one only (the freezer hold,
	 * cg_freezer_hold) and what an older corral removed in another order.
	 */
	for (size_t h = 0; plan.ops->mode != CG_NONE && h < plan.nhier &&
	     (every || h == 0); h++) {
		/* not there when planned just now: nobody's groups in it */
		if (plan.hier[h].create_parent && !plan.kept_plan)
			continue;
		d = opendir(plan.hier[h].parent);
		while (d && (de = readdir(d))) {
			pid_t pid = owner_pid(de->d_name);

			if (pid <= 0 || (only > 0 && pid != only))
				continue;
			/* Only groups whose supervisor is gone: never a live one's. */
			if (only <= 0 && (kill(pid, 0) == 0 || errno != ESRCH))
				continue;
			if (h > 0 && in_dir(plan.hier[0].parent, de->d_name))
				continue;	/* the first hierarchy's turn did it */
			remove_stale(&plan, de->d_name);
			removed++;
		}
		if (d)
			closedir(d);
	}
	cg_free_hiers(&plan);
	return removed;
}

int cg_cleanup_stale(void)
{
	return cleanup(0, true);
}

int cg_cleanup_stale_groups(void)
{
	return cleanup(0, false);
}

int cg_cleanup_owner(pid_t pid)
{
	return pid > 0 ? cleanup(pid, true) : 0;
}
