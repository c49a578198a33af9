/*
 * policy_bounds.c - a policy asked for by someone else (a model through
 * `corral mcp`, a client of `corral serve`), judged against the operator's:
 * it may narrow what the sandbox may do (lower limits, fewer hosts, more
 * denials), never widen it.  A widening is refused with the field, the
 * bound and what was asked, so the asker can ask again within it.
 *
 * What each front end gates its own way is not judged here: host paths
 * (binds, the workspace), the daemon's environment (env.pass), the root
 * (an image) and identity.user.  The MCP server bounds those by the
 * operator's policy too (src/cli/mcp_bounds.c); the daemon by
 * --allow-host-path, --allow-env and --allow-root-inside (api_access.c).
 */
#include "internal.h"
#include "policy_int.h"

#include <errno.h>
#include <jansson.h>
#include <string.h>

int corral_json_merge(struct json_t *dst, const struct json_t *src)
{
	const char *key;
	json_t *v, *old;

	if (!json_is_object(dst) || !json_is_object(src))
		return -EINVAL;
	json_object_foreach((json_t *)src, key, v) {
		old = json_object_get(dst, key);
		if (json_is_object(old) && json_is_object(v)) {
			if (corral_json_merge(old, v) < 0)
				return -ENOMEM;
		} else if (json_object_set_new(dst, key, json_deep_copy(v)) < 0) {
			return -ENOMEM;
		}
	}
	return 0;
}

static bool in_list(char **list, size_t n, const char *s)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(list[i], s))
			return true;
	return false;
}

/*
 * What a refusal calls the bound: the operator's policy, unless the front
 * end says it is another (corral serve's built-in default for a TCP client
 * when the operator gave none: "the operator's" would name a policy that
 * does not exist).
 */
static const struct corral_bound_name operators = {
	.policy = "the operator's policy", .owner = "the operator's",
};

/* A limit where 0 means none: got must be set and no more than lim. */
static int check_u64(const char *key, uint64_t got, uint64_t lim,
		     const struct corral_bound_name *n, struct corral_err *err)
{
	if (!lim || (got && got <= lim))
		return 0;
	if (!got)
		return corral_set_err(err, -EPERM, "%s: %s sets at most %llu; it cannot be removed",
				      key, n->policy, (unsigned long long)lim);
	return corral_set_err(err, -EPERM, "%s: %s allows at most %llu (got %llu)",
			      key, n->policy, (unsigned long long)lim, (unsigned long long)got);
}

static int check_limits(const struct corral_policy *p, const struct corral_policy *l,
			const struct corral_bound_name *n, struct corral_err *err)
{
	int r;

	if ((r = check_u64("limits.memory (bytes)", p->memory_bytes, l->memory_bytes, n, err)) ||
	    (r = check_u64("limits.pids", p->pids, l->pids, n, err)) ||
	    (r = check_u64("limits.disk (bytes)", p->disk_bytes, l->disk_bytes, n, err)) ||
	    (r = check_u64("limits.timeout (ms)", p->timeout_ms, l->timeout_ms, n, err)) ||
	    (r = check_u64("limits.call_timeout (ms)", p->call_timeout_ms, l->call_timeout_ms, n, err)) ||
	    (r = check_u64("limits.output (bytes)", p->output_bytes, l->output_bytes, n, err)) ||
	    (r = check_u64("limits.connections", p->connections, l->connections, n, err)) ||
	    /*
	     * Without the operator's open_files, the share of the host's
	     * file table over pids is the bound, and the sandbox's start
	     * refuses an open_files x pids past it (as a lower pids alone
	     * raises each process's share, within the same total).
	     */
	    (r = check_u64("limits.open_files", p->open_files, l->open_files, n, err)))
		return r;
	if (l->cpus > 0 && (p->cpus <= 0 || p->cpus > l->cpus)) {
		if (p->cpus > 0)
			return corral_set_err(err, -EPERM, "limits.cpus: %s allows at most %g (got %g)",
					      n->policy, l->cpus, p->cpus);
		return corral_set_err(err, -EPERM, "limits.cpus: %s allows at most %g (got unlimited)",
				      n->policy, l->cpus);
	}
	return 0;
}

static int check_network(const struct corral_policy *p, const struct corral_policy *l,
			 const struct corral_bound_name *n, struct corral_err *err)
{
	size_t i;

	if (p->net != CORRAL_NET_NONE && l->net == CORRAL_NET_NONE)
		return corral_set_err(err, -EPERM, "network.mode: %s allows no network (mode \"none\")",
				      n->policy);
	/*
	 * Transparent mode takes every TCP connection to the proxy, which
	 * judges it and records a denial (counted by the abort criteria);
	 * without it a connection to an address is refused by Landlock in
	 * silence: an agent probing the network would leave no event and
	 * never reach the operator's abort.max_distinct_denied_destinations.
	 */
	if (l->net == CORRAL_NET_PROXY && l->net_transparent && !p->net_transparent)
		return corral_set_err(err, -EPERM, "network.transparent: %s takes every TCP connection to the proxy, where each denial is recorded and counted; it cannot be turned off",
				      n->policy);
	for (i = 0; i < p->nnet_allow; i++)
		if (!in_list(l->net_allow, l->nnet_allow, p->net_allow[i]))
			return corral_set_err(err, -EPERM, "network.allow: \"%.200s\" is not in %s allowlist (%zu pattern(s)); ask only for hosts it has",
					      p->net_allow[i], n->owner, l->nnet_allow);
	if (p->nnet_hosts != l->nnet_hosts)
		return corral_set_err(err, -EPERM, "network.hosts: fixed by %s", n->policy);
	for (i = 0; i < p->nnet_hosts; i++)
		if (strcmp(p->net_hosts[i].name, l->net_hosts[i].name) ||
		    strcmp(p->net_hosts[i].value, l->net_hosts[i].value))
			return corral_set_err(err, -EPERM, "network.hosts: fixed by %s", n->policy);
	if ((p->net_resolver || l->net_resolver) &&
	    (!p->net_resolver || !l->net_resolver ||
	     strcmp(p->net_resolver, l->net_resolver)))
		return corral_set_err(err, -EPERM, "network.resolver: fixed by %s", n->policy);
	return policy_tls_check(p, l, n, err);
}

static bool hold_kept(const struct corral_hold_rule *r,
		      const struct corral_export_policy *e)
{
	for (size_t i = 0; i < e->nhold; i++)
		if (!strcmp(r->path, e->hold[i].path) && !strcmp(r->check, e->hold[i].check))
			return true;
	return false;
}

/* What leaves through an export (its hold rules: keeps_denials). */
static int check_export(const struct corral_policy *p, const struct corral_policy *l,
			const struct corral_bound_name *n, struct corral_err *err)
{
	const struct corral_export_policy *e = &p->export, *f = &l->export;
	int r;

	if ((r = check_u64("export.max_files", e->max_files, f->max_files, n, err)) ||
	    (r = check_u64("export.max_bytes", e->max_bytes, f->max_bytes, n, err)))
		return r;
	return 0;
}

static int check_abort(const struct corral_policy *p, const struct corral_policy *l,
		       const struct corral_bound_name *n, struct corral_err *err)
{
	const struct corral_abort *a = &p->abort, *b = &l->abort;
	int r;

	if ((r = check_u64("abort.max_denied_egress", a->max_denied_egress, b->max_denied_egress, n, err)) ||
	    (r = check_u64("abort.max_distinct_denied", a->max_distinct_denied, b->max_distinct_denied, n, err)) ||
	    (r = check_u64("abort.max_denied_syscalls", a->max_denied_syscalls, b->max_denied_syscalls, n, err)) ||
	    (r = check_u64("abort.max_cpu (ms)", a->max_cpu_ms, b->max_cpu_ms, n, err)) ||
	    (r = check_u64("abort.max_wall (ms)", a->max_wall_ms, b->max_wall_ms, n, err)))
		return r;
	/* a shorter window forgets denials sooner; 0 is the whole run */
	if (b->window_ms && a->window_ms && a->window_ms < b->window_ms)
		return corral_set_err(err, -EPERM, "abort.window_seconds: %s counts denials over at least %g s (got %g)",
				      n->policy, b->window_ms / 1000.0, a->window_ms / 1000.0);
	if (!b->window_ms && a->window_ms)
		return corral_set_err(err, -EPERM, "abort.window_seconds: %s counts denials over the whole run (got %g s)",
				      n->policy, a->window_ms / 1000.0);
	for (size_t i = 0; i < a->nignore_syscalls; i++)
		if (!in_list(b->ignore_syscalls, b->nignore_syscalls, a->ignore_syscalls[i]))
			return corral_set_err(err, -EPERM, "abort.ignore_syscalls: %.100s is not ignored by %s; its denials count",
					      a->ignore_syscalls[i], n->policy);
	if (a->kill && !b->kill)
		return corral_set_err(err, -EPERM, "abort.on_abort: %s holds a halted sandbox frozen (got \"kill\")",
				      n->policy);
	if (p->events.budget_bytes > l->events.budget_bytes ||
	    p->events.verbatim > l->events.verbatim ||
	    p->events.interval_ms < l->events.interval_ms)
		return corral_set_err(err, -EPERM, "events: %s bounds the log (budget %llu bytes, verbatim %llu, summary_interval %g s)",
				      n->policy, (unsigned long long)l->events.budget_bytes,
				      (unsigned long long)l->events.verbatim,
				      l->events.interval_ms / 1000.0);
	return 0;
}

/*
 * The lists of what the base denies, each entry of which must still be in
 * p: a later list replaces an earlier one (corral_json_merge,
 * corral_policy_load_*), so a layer that left one out would drop it.
 */
static int keeps_denials(const struct corral_policy *p, const struct corral_policy *base,
			 const struct corral_bound_name *n, struct corral_err *err)
{
	size_t i;

	for (i = 0; i < base->nnet_deny; i++)
		if (!in_list(p->net_deny, p->nnet_deny, base->net_deny[i]))
			return corral_set_err(err, -EPERM, "network.deny: %s denial \"%.200s\" cannot be removed",
					      n->owner, base->net_deny[i]);
	for (i = 0; i < base->abort.ntripwires; i++)
		if (!in_list(p->abort.tripwires, p->abort.ntripwires,
			     base->abort.tripwires[i]))
			return corral_set_err(err, -EPERM, "abort.tripwires: %s tripwire %.200s cannot be removed",
					      n->owner, base->abort.tripwires[i]);
	for (i = 0; i < base->nhide; i++)
		if (!in_list(p->hide, p->nhide, base->hide[i]))
			return corral_set_err(err, -EPERM, "filesystem.hide: %s hidden path %.200s cannot be shown",
					      n->owner, base->hide[i]);
	for (i = 0; i < base->export.nhold; i++)
		if (!hold_kept(&base->export.hold[i], &p->export))
			return corral_set_err(err, -EPERM, "export.hold: %s rule %.200s (%.100s) cannot be removed",
					      n->owner, base->export.hold[i].path,
					      base->export.hold[i].check);
	return 0;
}

int corral_policy_keeps_denials(const struct corral_policy *p,
				const struct corral_policy *base,
				struct corral_err *err)
{
	return keeps_denials(p, base, &operators, err);
}

int corral_policy_within_named(const struct corral_policy *p,
			       const struct corral_policy *bound,
			       const struct corral_bound_name *name,
			       struct corral_err *err)
{
	const struct corral_bound_name *n = name ? name : &operators;
	int r;

	if ((r = check_limits(p, bound, n, err)) ||
	    (r = check_network(p, bound, n, err)) ||
	    (r = check_export(p, bound, n, err)) ||
	    (r = check_abort(p, bound, n, err)) ||
	    (r = keeps_denials(p, bound, n, err)))
		return r;
	return 0;
}

int corral_policy_within(const struct corral_policy *p,
			 const struct corral_policy *bound, struct corral_err *err)
{
	return corral_policy_within_named(p, bound, NULL, err);
}
