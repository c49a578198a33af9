/*
 * mcp_bounds.c - what a model may ask of `corral mcp`, bounded by the
 * operator's policy (`--policy FILE`, else the built-in default).
 *
 * A model's sandbox_create may name a policy, give one inline, a list of
 * hosts and limits.  They are merged over the operator's policy object
 * (objects key by key, anything else replaced), and the result is loaded
 * exactly as the daemon will load it (over the built-in default).  Then
 * every field that could widen what the sandbox may do is compared with
 * the operator's: the model may narrow (lower limits, fewer hosts, more
 * denials), never widen; a request that widens is refused with the field,
 * the bound and what was asked, so the model can ask again within it.
 */
#include "mcp.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char *say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *say(const char *fmt, ...)
{
	va_list ap;
	char *s;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	return n < 0 ? NULL : s;
}

int mcp_bounds_load(struct mcp_bounds *b, const char *file)
{
	struct corral_err err = { 0 };
	json_error_t jerr;

	corral_policy_init(&b->limit);
	if (!file) {
		b->policy = json_object();
		return b->policy ? 0 : out_of_memory("the operator's policy");
	}
	if (corral_policy_load_file(&b->limit, file, &err) < 0) {
		cli_error("mcp: --policy %s", err.msg);
		return 2;
	}
	b->policy = json_load_file(file, JSON_REJECT_DUPLICATES, &jerr);
	if (!json_is_object(b->policy)) {
		cli_error("mcp: --policy %s: not a JSON object", file);
		return 2;
	}
	return 0;
}

void mcp_bounds_free(struct mcp_bounds *b)
{
	json_decref(b->policy);
	corral_policy_free(&b->limit);
	free(b->policy_dirs);
}

/* src over dst: objects merged key by key, anything else replaced. */
static int merge(json_t *dst, const json_t *src)
{
	const char *key;
	json_t *v, *old;

	json_object_foreach((json_t *)src, key, v) {
		old = json_object_get(dst, key);
		if (json_is_object(old) && json_is_object(v)) {
			if (merge(old, v) < 0)
				return -1;
		} else if (json_object_set_new(dst, key, json_deep_copy(v)) < 0) {
			return -1;
		}
	}
	return 0;
}

/* "policy": NAME -> NAME.json in one of the --policy-dir directories. */
static json_t *named_policy(const struct mcp_bounds *b, const char *name,
			    char **why)
{
	json_error_t jerr;
	char path[PATH_MAX];

	if (!strcmp(name, "default"))
		return json_object();
	for (const char *c = name; *c; c++)
		if (!isalnum((unsigned char)*c) && *c != '-' && *c != '_') {
			*why = say("policy: a policy name is letters, digits, - and _ (got \"%.64s\")",
				   name);
			return NULL;
		}
	for (size_t i = 0; i < b->npolicy_dirs; i++) {
		json_t *o;

		if (snprintf(path, sizeof(path), "%s/%s.json", b->policy_dirs[i],
			     name) >= (int)sizeof(path))
			continue;
		if (access(path, R_OK) < 0)
			continue;
		o = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
		if (!json_is_object(o)) {
			json_decref(o);
			*why = say("policy \"%s\": %s is not a JSON object", name, path);
			return NULL;
		}
		json_object_del(o, "description");
		return o;
	}
	*why = say("policy: no policy named \"%.64s\"%s; give \"default\" or an inline policy object",
		   name, b->npolicy_dirs ? " in the operator's policy directories" :
		   " (the operator gave no --policy-dir)");
	return NULL;
}

/* The model's asks as one policy object: policy, allow_hosts, limits. */
static json_t *asked_policy(const struct mcp_bounds *b, const json_t *args,
			    char **why)
{
	json_t *p = json_object_get(args, "policy"), *asked, *v;

	if (json_is_string(p))
		asked = named_policy(b, json_string_value(p), why);
	else if (json_is_object(p))
		asked = json_deep_copy(p);
	else if (!p)
		asked = json_object();
	else {
		*why = say("policy: a policy name (string) or a policy object");
		return NULL;
	}
	if (!asked)
		return NULL;
	v = json_object_get(args, "allow_hosts");
	if (v) {
		json_t *net = json_pack("{s:{s:s,s:O}}", "network", "mode", "proxy",
					"allow", v);

		if (!json_is_array(v) || !net || merge(asked, net) < 0) {
			json_decref(net);
			json_decref(asked);
			*why = say("allow_hosts: a list of host patterns");
			return NULL;
		}
		json_decref(net);
	}
	v = json_object_get(args, "limits");
	if (v) {
		json_t *lim = json_pack("{s:O}", "limits", v);

		if (!json_is_object(v) || !lim || merge(asked, lim) < 0) {
			json_decref(lim);
			json_decref(asked);
			*why = say("limits: an object like {\"memory\": \"512M\", \"pids\": 64}");
			return NULL;
		}
		json_decref(lim);
	}
	return asked;
}

static bool in_list(char **list, size_t n, const char *s)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(list[i], s))
			return true;
	return false;
}

/* A limit where 0 means none: got must be set and no more than lim. */
static char *check_u64(const char *key, uint64_t got, uint64_t lim)
{
	if (!lim || (got && got <= lim))
		return NULL;
	if (!got)
		return say("%s: the operator's policy sets at most %llu; it cannot be removed",
			   key, (unsigned long long)lim);
	return say("%s: the operator's policy allows at most %llu (got %llu)", key,
		   (unsigned long long)lim, (unsigned long long)got);
}

static char *check_limits(const struct corral_policy *p,
			  const struct corral_policy *l)
{
	char *why;

	if ((why = check_u64("limits.memory (bytes)", p->memory_bytes, l->memory_bytes)) ||
	    (why = check_u64("limits.pids", p->pids, l->pids)) ||
	    (why = check_u64("limits.disk (bytes)", p->disk_bytes, l->disk_bytes)) ||
	    (why = check_u64("limits.timeout (ms)", p->timeout_ms, l->timeout_ms)) ||
	    (why = check_u64("limits.call_timeout (ms)", p->call_timeout_ms, l->call_timeout_ms)) ||
	    (why = check_u64("limits.output (bytes)", p->output_bytes, l->output_bytes)) ||
	    (why = check_u64("limits.connections", p->connections, l->connections)) ||
	    /*
	     * Without the operator's open_files, the share of the host's
	     * file table over pids is the bound, and the sandbox's start
	     * refuses a model's open_files x pids past it (as a lower pids
	     * alone raises each process's share, within the same total).
	     */
	    (why = check_u64("limits.open_files", p->open_files, l->open_files)))
		return why;
	if (l->cpus > 0 && (p->cpus <= 0 || p->cpus > l->cpus))
		return say("limits.cpus: the operator's policy allows at most %g (got %s)",
			   l->cpus, p->cpus > 0 ? "more" : "unlimited");
	return NULL;
}

static char *check_network(const struct corral_policy *p,
			   const struct corral_policy *l)
{
	size_t i;

	if (p->net != CORRAL_NET_NONE && l->net == CORRAL_NET_NONE)
		return say("network.mode: the operator's policy allows no network (mode \"none\"); allow_hosts cannot be used");
	/*
	 * Transparent mode takes every TCP connection to the proxy, which
	 * judges it and records a denial (counted by the abort criteria);
	 * without it a connection to an address is refused by Landlock in
	 * silence: an agent probing the network would leave no event and
	 * never reach the operator's abort.max_distinct_denied_destinations.
	 */
	if (l->net == CORRAL_NET_PROXY && l->net_transparent && !p->net_transparent)
		return say("network.transparent: the operator's policy takes every TCP connection to the proxy, where each denial is recorded and counted; it cannot be turned off");
	for (i = 0; i < p->nnet_allow; i++)
		if (!in_list(l->net_allow, l->nnet_allow, p->net_allow[i]))
			return say("network.allow: \"%s\" is not in the operator's allowlist (%zu pattern(s)); ask only for hosts it has",
				   p->net_allow[i], l->nnet_allow);
	for (i = 0; i < l->nnet_deny; i++)
		if (!in_list(p->net_deny, p->nnet_deny, l->net_deny[i]))
			return say("network.deny: the operator's denial \"%s\" cannot be removed",
				   l->net_deny[i]);
	if (p->nnet_hosts != l->nnet_hosts)
		return say("network.hosts: fixed by the operator's policy");
	for (i = 0; i < p->nnet_hosts; i++)
		if (strcmp(p->net_hosts[i].name, l->net_hosts[i].name) ||
		    strcmp(p->net_hosts[i].value, l->net_hosts[i].value))
			return say("network.hosts: fixed by the operator's policy");
	if ((p->net_resolver || l->net_resolver) &&
	    (!p->net_resolver || !l->net_resolver ||
	     strcmp(p->net_resolver, l->net_resolver)))
		return say("network.resolver: fixed by the operator's policy");
	if (corral_policy_tls_within(p, l))
		return say("%s", corral_policy_tls_within(p, l));
	return NULL;
}

static bool bind_allowed(const struct corral_bind *b, const struct corral_policy *l)
{
	for (size_t i = 0; i < l->nbinds; i++)
		if (!strcmp(b->src, l->binds[i].src) && !strcmp(b->dst, l->binds[i].dst) &&
		    (!b->writable || l->binds[i].writable))
			return true;
	return false;
}

void mcp_pin_close(struct mcp_pin *pin)
{
	if (pin->fd >= 0)
		close(pin->fd);
	pin->fd = -1;
}

/* path is lim or inside it (lim is the operator's: resolved by name). */
static bool path_within(const char *path, const char *lim)
{
	char b[PATH_MAX];
	size_t n;

	if (!realpath(lim, b))
		return false;
	n = strlen(b);
	if (n == 1)
		return true;
	return !strncmp(path, b, n) && (path[n] == '\0' || path[n] == '/');
}

/*
 * The directory dir names, opened once (symlinks followed, as the model
 * named it) and judged by where what was opened is: a name checked and
 * handed on could be swapped between the check and the daemon's open.
 */
static char *pin_workspace(const char *dir, const char *lim, struct mcp_pin *pin)
{
	char self[64];
	struct stat st;
	ssize_t n;

	pin->fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (pin->fd < 0)
		return say("workspace: %s: %s", dir, strerror(errno));
	snprintf(self, sizeof(self), "/proc/self/fd/%d", pin->fd);
	n = readlink(self, pin->path, sizeof(pin->path) - 1);
	if (n < 0 || fstat(pin->fd, &st) < 0) {
		int e = errno;

		mcp_pin_close(pin);
		return say("workspace: %s: %s", dir, strerror(e));
	}
	pin->path[n] = '\0';
	pin->dev = st.st_dev;
	pin->ino = st.st_ino;
	if (pin->path[0] != '/' || !path_within(pin->path, lim)) {
		mcp_pin_close(pin);
		return say("workspace: %s (%s) is not the operator's workspace %s or inside it",
			   dir, pin->path, lim);
	}
	return NULL;
}

static char *check_files(const struct corral_policy *p,
			 const struct corral_policy *l, const char *workspace,
			 struct mcp_pin *pin)
{
	size_t i;

	for (i = 0; i < p->nbinds; i++)
		if (!bind_allowed(&p->binds[i], l))
			return say("filesystem: the host path %s (%s at %s) is not one the operator's policy shows",
				   p->binds[i].src, p->binds[i].writable ? "writable" :
				   "read-only", p->binds[i].dst);
	/*
	 * The root the operator chose: an image of the store holds what the
	 * operator imported for other uses (its tools, its files), and the
	 * host's /usr is not the model's to swap for one either.
	 */
	if (p->image && (!l->image || strcmp(p->image, l->image)))
		return say("filesystem.image: the operator's policy runs on %s%s; the model cannot pick another root (got %s)",
			   l->image ? "the image " : "the host's /usr",
			   l->image ? l->image : "", p->image);
	for (i = 0; i < p->nenv_pass; i++)
		if (!in_list(l->env_pass, l->nenv_pass, p->env_pass[i]))
			return say("env.pass: %s is not passed by the operator's policy",
				   p->env_pass[i]);
	/* the daemon takes the create's workspace over the policy's: that one last */
	for (i = 0; i < 2; i++) {
		const char *w = i ? workspace : p->workspace;
		char *why;

		if (!w)
			continue;
		if (!l->workspace)
			return say("workspace: the operator's policy shows no host directory as a workspace (got %s)",
				   w);
		mcp_pin_close(pin);
		why = pin_workspace(w, l->workspace, pin);
		if (why)
			return why;
	}
	return NULL;
}

static bool hold_kept(const struct corral_hold_rule *r,
		      const struct corral_export_policy *e)
{
	for (size_t i = 0; i < e->nhold; i++)
		if (!strcmp(r->path, e->hold[i].path) && !strcmp(r->check, e->hold[i].check))
			return true;
	return false;
}

/*
 * What leaves through an export, and the root inside: an inline policy's
 * "export": {"hold": []} replaces the operator's list, so each of its
 * rules must still be there.
 */
static char *check_export(const struct corral_policy *p,
			  const struct corral_policy *l)
{
	const struct corral_export_policy *e = &p->export, *f = &l->export;
	char *why;

	for (size_t i = 0; i < f->nhold; i++)
		if (!hold_kept(&f->hold[i], e))
			return say("export.hold: the operator's rule %s (%s) cannot be removed",
				   f->hold[i].path, f->hold[i].check);
	if ((why = check_u64("export.max_files", e->max_files, f->max_files)) ||
	    (why = check_u64("export.max_bytes", e->max_bytes, f->max_bytes)))
		return why;
	if (p->root_inside && !l->root_inside)
		return say("identity.user: the operator's policy runs commands as \"agent\" (got \"root\")");
	return NULL;
}

static char *check_abort(const struct corral_policy *p,
			 const struct corral_policy *l)
{
	const struct corral_abort *a = &p->abort, *b = &l->abort;
	char *why;

	if ((why = check_u64("abort.max_denied_egress", a->max_denied_egress, b->max_denied_egress)) ||
	    (why = check_u64("abort.max_distinct_denied", a->max_distinct_denied, b->max_distinct_denied)) ||
	    (why = check_u64("abort.max_denied_syscalls", a->max_denied_syscalls, b->max_denied_syscalls)) ||
	    (why = check_u64("abort.max_cpu (ms)", a->max_cpu_ms, b->max_cpu_ms)) ||
	    (why = check_u64("abort.max_wall (ms)", a->max_wall_ms, b->max_wall_ms)))
		return why;
	/* a shorter window forgets denials sooner; 0 is the whole run */
	if (b->window_ms && a->window_ms && a->window_ms < b->window_ms)
		return say("abort.window_seconds: the operator's policy counts denials over at least %g s (got %g)",
			   b->window_ms / 1000.0, a->window_ms / 1000.0);
	if (!b->window_ms && a->window_ms)
		return say("abort.window_seconds: the operator's policy counts denials over the whole run (got %g s)",
			   a->window_ms / 1000.0);
	for (size_t i = 0; i < a->nignore_syscalls; i++)
		if (!in_list(b->ignore_syscalls, b->nignore_syscalls, a->ignore_syscalls[i]))
			return say("abort.ignore_syscalls: %s is not ignored by the operator's policy; its denials count",
				   a->ignore_syscalls[i]);
	for (size_t i = 0; i < b->ntripwires; i++)
		if (!in_list(a->tripwires, a->ntripwires, b->tripwires[i]))
			return say("abort.tripwires: the operator's tripwire %s cannot be removed",
				   b->tripwires[i]);
	if (a->kill && !b->kill)
		return say("abort.on_abort: the operator's policy holds a halted sandbox frozen");
	if (p->events.budget_bytes > l->events.budget_bytes ||
	    p->events.verbatim > l->events.verbatim ||
	    p->events.interval_ms < l->events.interval_ms)
		return say("events: the operator's policy bounds the log (budget, verbatim, summary_interval)");
	return NULL;
}

json_t *mcp_bounds_policy(const struct mcp_bounds *b, const json_t *args,
			  const char *workspace, struct mcp_pin *pin, char **why)
{
	struct corral_err err = { 0 };
	struct corral_policy p;
	json_t *asked, *eff;
	char *text;

	pin->fd = -1;
	asked = asked_policy(b, args, why);
	if (!asked)
		return NULL;
	eff = json_deep_copy(b->policy);
	if (!eff || merge(eff, asked) < 0) {
		json_decref(asked);
		json_decref(eff);
		*why = say("out of memory");
		return NULL;
	}
	json_decref(asked);
	text = json_dumps(eff, JSON_COMPACT);
	corral_policy_init(&p);
	if (!text) {
		*why = say("out of memory");
	} else if (corral_policy_load_string(&p, text, strlen(text), "policy", &err) < 0) {
		*why = say("%s", err.msg);
	} else if (!(*why = check_limits(&p, &b->limit)) &&
		   !(*why = check_network(&p, &b->limit)) &&
		   !(*why = check_files(&p, &b->limit, workspace, pin)) &&
		   !(*why = check_export(&p, &b->limit))) {
		*why = check_abort(&p, &b->limit);
	}
	corral_policy_free(&p);
	free(text);
	if (*why) {
		mcp_pin_close(pin);
		json_decref(eff);
		return NULL;
	}
	return eff;
}

int mcp_bounds_timeout(const struct mcp_bounds *b, double asked, double *out,
		       char **why)
{
	double lim = b->limit.timeout_ms / 1000.0;

	*why = NULL;
	if (asked < 0) {
		*out = MCP_EXEC_TIMEOUT_DEFAULT;
		if (lim > 0 && lim < *out)
			*out = lim;
		return 0;
	}
	if (asked == 0 || (lim > 0 && asked > lim)) {
		*why = lim > 0 ? say("timeout_seconds: the operator's policy allows at most %g seconds (got %g)",
				     lim, asked) :
				 say("timeout_seconds: must be more than 0 (got %g)", asked);
		return -1;
	}
	*out = asked;
	return 0;
}
