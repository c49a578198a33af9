/*
 * policy.c - what a sandbox may do: built-in defaults, JSON policy files,
 * and the command line's overrides, all checked before anything runs.
 *
 * Strict on purpose: a policy is a security boundary somebody wrote down,
 * and a typo ("memroy") that silently fell back to a default would be a
 * boundary nobody chose.  So unknown keys, wrong types and impossible
 * values are errors that say where (file:line:col), what (the dotted key),
 * why, and what was found.
 *
 * Here: the defaults, the loader that says where a value is wrong, paths
 * and binds, the command line's overrides, and reading a file.  The keys
 * a file may have are policy_schema.c's tables; sizes and durations are
 * parsed by units.c.
 */
#include "policy_int.h"
#include "egress.h"
#include "export.h"
#include "tls.h"
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define POLICY_FILE_MAX		(1 * MiB)
#define ENV_NAME_MAX		255

/* ---- rendering values for messages ----------------------------------- */

/* Cut at max bytes, on a UTF-8 boundary, and say that we cut. */
static void truncate_got(char *buf, size_t max)
{
	size_t n = strlen(buf);

	if (n <= max)
		return;
	while (max > 0 && ((unsigned char)buf[max] & 0xc0) == 0x80)
		max--;
	memcpy(buf + max, "...", 4);
}

/* The loader's quoting: a JSON literal, as the user wrote it in the file. */
void policy_quote(const char *s, size_t n, char *buf, size_t len)
{
	text_quote(s, n, buf, len, GOT_MAX, QUOTE_JSON);
}

static void render_got(const json_t *v, char *buf, size_t len)
{
	char *dump;

	if (json_is_string(v)) {
		policy_quote(json_string_value(v), json_string_length(v), buf, len);
		return;
	}
	dump = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	snprintf(buf, len, "%s", dump ? dump : "?");
	free(dump);
	truncate_got(buf, GOT_MAX);
}

/* ---- the loader: a policy being filled from one JSON document --------- */

static bool plain_key(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '_' || *s == '-'))
			return false;
	return true;
}

/* The same notation jsonpos_key_ending_at() writes: limits.memory, ro[2]. */
static void render_path(const struct loader *l, char *buf, size_t len)
{
	char part[GOT_MAX + 16];
	size_t i, off = 0;

	buf[0] = '\0';
	if (!l->depth)
		snprintf(buf, len, "top level");
	for (i = 0; i < l->depth && off < len; i++) {
		const struct jsonpos_step *s = &l->path[i];

		if (!s->key)
			snprintf(part, sizeof(part), "[%zu]", s->index);
		else if (plain_key(s->key))
			snprintf(part, sizeof(part), "%s%.*s", i ? "." : "",
				 GOT_MAX, s->key);
		else {
			part[0] = '.';
			policy_quote(s->key, strlen(s->key), part + !!i,
				     sizeof(part) - 1);
		}
		off += snprintf(buf + off, len - off, "%s", part);
	}
}

/* "NAME:LINE:COL: dotted.key: reason (got VALUE)" */
int loader_fail(struct loader *l, bool at_key, const json_t *got,
		const char *fmt, ...)
{
	char why[256], path[160], val[GOT_MAX + 16];
	struct jsonpos pos;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	render_path(l, path, sizeof(path));
	render_got(got, val, sizeof(val));
	if (jsonpos_locate(l->text, l->len, l->path, l->depth, at_key, &pos))
		return corral_set_err(l->err, -EINVAL, "%s: %s: %s (got %s)",
				      l->name, path, why, val);
	return corral_set_err(l->err, -EINVAL, "%s:%u:%u: %s: %s (got %s)",
			      l->name, pos.line, pos.col, path, why, val);
}

/*
 * A host path written relative in a policy ("workspace": "proj"): refused,
 * as there is nothing to take it from that means the same wherever the
 * policy is read (the file's directory, the caller's, a daemon's, an API
 * client's), and said so with what does take one: flag, on the command line.
 */
int loader_fail_relative(struct loader *l, const json_t *got, const char *what,
			 const char *flag)
{
	int r = loader_fail(l, false, got, "%s must be absolute", what);
	size_t n = strlen(l->err->msg);

	snprintf(l->err->msg + n, sizeof(l->err->msg) - n, ": a policy's paths are "
		 "taken relative to nothing, neither its file's directory nor the "
		 "working directory; write the whole path, or give it as %s on the "
		 "command line, which takes it from the working directory", flag);
	return r;
}

int loader_nomem(struct loader *l)
{
	return corral_set_err(l->err, -ENOMEM, "%s: out of memory", l->name);
}

int loader_push_key(struct loader *l, const char *key)
{
	if (l->depth >= LOADER_DEPTH)
		return corral_set_err(l->err, -EOVERFLOW,
				      "%s: policy nests deeper than its schema",
				      l->name);
	l->path[l->depth++] = (struct jsonpos_step){ .key = key };
	return 0;
}

int loader_push_index(struct loader *l, size_t index)
{
	if (l->depth >= LOADER_DEPTH)
		return corral_set_err(l->err, -EOVERFLOW,
				      "%s: policy nests deeper than its schema",
				      l->name);
	l->path[l->depth++] = (struct jsonpos_step){ .index = index };
	return 0;
}

void loader_pop(struct loader *l)
{
	l->depth--;
}

/* A string with no NUL inside: C code downstream would silently cut it. */
int loader_get_string(struct loader *l, const json_t *v, const char **s,
		      size_t *n)
{
	if (!json_is_string(v))
		return loader_fail(l, false, v, "expected a string");
	*s = json_string_value(v);
	*n = json_string_length(v);
	if (strlen(*s) != *n)
		return loader_fail(l, false, v, "contains a NUL byte");
	return 0;
}

/* ---- paths and binds ------------------------------------------------- */

/*
 * Collapse "//", drop "." and a trailing "/".  ".." is refused, not
 * resolved: a lexical ".." can disagree with the kernel's once symlinks
 * are involved, and a policy never needs to climb.  what names the path in
 * the reason written to why.
 */
int policy_normalise_path(const char *in, size_t n, const char *what,
			  char **out, char *why, size_t whylen)
{
	size_t i = 0, start, off = 0;
	char *p;

	if (!n)
		return snprintf(why, whylen, "%s is empty", what), -EINVAL;
	if (memchr(in, '\0', n))
		return snprintf(why, whylen, "%s contains a NUL byte", what),
		       -EINVAL;
	if (in[0] != '/')
		return snprintf(why, whylen, "%s must be absolute", what),
		       -EINVAL;
	if (n >= PATH_MAX)
		return snprintf(why, whylen, "%s is longer than %d bytes",
				what, PATH_MAX - 1), -EINVAL;
	p = malloc(n + 2);
	if (!p)
		return -ENOMEM;
	while (i < n) {
		while (i < n && in[i] == '/')
			i++;
		start = i;
		while (i < n && in[i] != '/')
			i++;
		if (i == start || (i - start == 1 && in[start] == '.'))
			continue;
		if (i - start == 2 && in[start] == '.' && in[start + 1] == '.') {
			free(p);
			snprintf(why, whylen,
				 "%s must not contain a \"..\" component", what);
			return -EINVAL;
		}
		p[off++] = '/';
		memcpy(p + off, in + start, i - start);
		off += i - start;
	}
	if (!off)
		p[off++] = '/';
	p[off] = '\0';
	*out = p;
	return 0;
}

int corral_path_normalise(const char *path, char **out, struct corral_err *err)
{
	char why[CORRAL_ERR_MAX];
	int r = policy_normalise_path(path, strlen(path), path, out, why, sizeof(why));

	if (r == -ENOMEM)
		return corral_set_err(err, r, "out of memory");
	return r < 0 ? corral_set_err(err, r, "%s", why) : 0;
}

/*
 * Where the sandbox keeps its own machinery: a bind may not cover it.
 * /.scratch holds everything writable while the view is built (mount.c):
 * a bind there failed only when init went to detach it.
 */
static const char *const reserved_dst[] = {
	"/proc", "/sys", "/dev", "/oldroot", "/.corral", "/.scratch",
};

bool policy_path_under(const char *path, const char *top)
{
	size_t n = strlen(top);

	return !strncmp(path, top, n) && (path[n] == '\0' || path[n] == '/');
}

int policy_check_dst(const char *dst, char *why, size_t whylen)
{
	size_t i;

	if (!strcmp(dst, "/"))
		return snprintf(why, whylen,
				"sandbox path cannot be \"/\", the sandbox's own root"),
		       -EINVAL;
	for (i = 0; i < sizeof(reserved_dst) / sizeof(reserved_dst[0]); i++)
		if (policy_path_under(dst, reserved_dst[i]))
			return snprintf(why, whylen,
					"sandbox path cannot be %s or lie under it",
					reserved_dst[i]), -EINVAL;
	return 0;
}

/* "HOST" or "HOST:PATH", PATH defaulting to HOST. */
int policy_parse_bind(const char *spec, size_t n, struct corral_bind *b,
		      char *why, size_t whylen)
{
	const char *colon;
	size_t hlen;
	int r;

	*b = (struct corral_bind){ 0 };
	if (!n)
		return snprintf(why, whylen,
				"empty bind, expected HOST or HOST:PATH"), -EINVAL;
	colon = memchr(spec, ':', n);
	if (colon && memchr(colon + 1, ':', n - (colon + 1 - spec))) {
		/* docker's -v HOST:PATH:ro is which list (or flag) it is in */
		bool mode = n > 3 && spec[n - 3] == ':' &&
			    (!memcmp(spec + n - 2, "ro", 2) || !memcmp(spec + n - 2, "rw", 2));

		return snprintf(why, whylen, "more than one ':', expected HOST or HOST:PATH%s",
				mode ? " (no :ro suffix: --ro or --rw says which)" : ""),
		       -EINVAL;
	}
	hlen = colon ? (size_t)(colon - spec) : n;
	r = policy_normalise_path(spec, hlen, "host path", &b->src, why, whylen);
	if (r)
		return r;
	if (colon)
		r = policy_normalise_path(colon + 1, n - hlen - 1, "sandbox path",
					  &b->dst, why, whylen);
	else
		r = (b->dst = strdup(b->src)) ? 0 : -ENOMEM;
	if (!r)
		r = policy_check_dst(b->dst, why, whylen);
	if (r) {
		free(b->src);
		free(b->dst);
		*b = (struct corral_bind){ 0 };
	}
	return r;
}

/* ---- growing the policy's arrays ------------------------------------- */

int policy_bind_append(struct corral_policy *p, struct corral_bind *b)
{
	struct corral_bind *nb;

	nb = reallocarray(p->binds, p->nbinds + 1, sizeof(*nb));
	if (!nb)
		return -ENOMEM;
	p->binds = nb;
	p->binds[p->nbinds++] = *b;
	return 0;
}

/* Set NAME to VALUE in a list of pairs, replacing an earlier value. */
int policy_pair_put(struct corral_env **pairs, size_t *n, const char *name,
		    size_t nlen, const char *value, size_t vlen)
{
	struct corral_env *ne;
	char *v, *k;
	size_t i;

	v = strndup(value, vlen);
	if (!v)
		return -ENOMEM;
	for (i = 0; i < *n; i++) {
		if (strlen((*pairs)[i].name) == nlen &&
		    !memcmp((*pairs)[i].name, name, nlen)) {
			free((*pairs)[i].value);
			(*pairs)[i].value = v;
			return 0;
		}
	}
	k = strndup(name, nlen);
	ne = k ? reallocarray(*pairs, *n + 1, sizeof(*ne)) : NULL;
	if (!ne) {
		free(k);
		free(v);
		return -ENOMEM;
	}
	*pairs = ne;
	(*pairs)[(*n)++] = (struct corral_env){ .name = k, .value = v };
	return 0;
}

/* Set NAME to VALUE, replacing an earlier value of the same name. */
int policy_env_put(struct corral_policy *p, const char *name, size_t nlen,
		   const char *value, size_t vlen)
{
	return policy_pair_put(&p->env, &p->nenv, name, nlen, value, vlen);
}

/* Append s[0..n) to a list of strings, once. */
int policy_strv_put(char ***v, size_t *count, const char *s, size_t n)
{
	char **nv, *k;
	size_t i;

	for (i = 0; i < *count; i++)
		if (strlen((*v)[i]) == n && !memcmp((*v)[i], s, n))
			return 0;
	k = strndup(s, n);
	nv = k ? reallocarray(*v, *count + 1, sizeof(*nv)) : NULL;
	if (!nv) {
		free(k);
		return -ENOMEM;
	}
	*v = nv;
	(*v)[(*count)++] = k;
	return 0;
}

static void strv_free(char **v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

static void pairs_free(struct corral_env *pairs, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		free(pairs[i].name);
		free(pairs[i].value);
	}
	free(pairs);
}

int policy_pass_put(struct corral_policy *p, const char *name)
{
	char **np, *k;
	size_t i;

	for (i = 0; i < p->nenv_pass; i++)
		if (!strcmp(p->env_pass[i], name))
			return 0;
	k = strdup(name);
	np = k ? reallocarray(p->env_pass, p->nenv_pass + 1, sizeof(*np)) : NULL;
	if (!np) {
		free(k);
		return -ENOMEM;
	}
	p->env_pass = np;
	p->env_pass[p->nenv_pass++] = k;
	return 0;
}

/*
 * A later layer's list replaces the one before (as corral_json_merge lays
 * one JSON document over another): these empty a list for it.
 */
void policy_strv_clear(char ***v, size_t *count)
{
	strv_free(*v, *count);
	*v = NULL;
	*count = 0;
}

/* The binds of one kind (ro or rw), with the fds of those that were pinned. */
void policy_binds_clear(struct corral_policy *p, bool writable)
{
	size_t i, n = 0;

	for (i = 0; i < p->nbinds; i++) {
		struct corral_bind *b = &p->binds[i];

		if (b->writable != writable) {
			p->binds[n++] = *b;
			continue;
		}
		free(b->src);
		free(b->dst);
		if (b->pinned)
			close(b->fd);
	}
	p->nbinds = n;
	if (!n) {
		free(p->binds);
		p->binds = NULL;
	}
}

const char *policy_env_name_problem(const char *s, size_t n)
{
	size_t i;

	if (!n)
		return "environment variable name is empty";
	if (n > ENV_NAME_MAX)
		return "environment variable name is longer than 255 characters";
	for (i = 0; i < n; i++) {
		char c = s[i];
		bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			      c == '_';

		if (!letter && !(i > 0 && c >= '0' && c <= '9'))
			return "not a valid environment variable name, expected [A-Za-z_][A-Za-z0-9_]*";
	}
	return NULL;
}

/* ---- the policy ------------------------------------------------------ */

static void hold_rules_free(struct corral_hold_rule *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].path);
		free(v[i].check);
	}
	free(v);
}

void policy_hold_clear(struct corral_export_policy *e)
{
	hold_rules_free(e->hold, e->nhold);
	e->hold = NULL;
	e->nhold = 0;
}

int policy_hold_rule_put(struct corral_export_policy *e, const char *path,
			 const char *check)
{
	struct corral_hold_rule *v = realloc(e->hold, (e->nhold + 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	e->hold = v;
	v[e->nhold].path = strdup(path);
	v[e->nhold].check = strdup(check);
	if (!v[e->nhold].path || !v[e->nhold].check) {
		free(v[e->nhold].path);
		free(v[e->nhold].check);
		return -ENOMEM;
	}
	e->nhold++;
	return 0;
}

void corral_policy_init(struct corral_policy *p)
{
	*p = (struct corral_policy){
		.memory_bytes = 2 * GiB,
		.pids = 1024,
		.cpus = 0,
		.disk_bytes = 1 * GiB,
		.timeout_ms = 0,
		/* a foreground server started by a call must not hold it forever */
		.call_timeout_ms = CORRAL_CALL_TIMEOUT_DEFAULT_MS,
		.output_bytes = 1 * MiB,
		/*
		 * A browser holds a few dozen, a package manager's parallel
		 * downloads as many; each may pin a few MiB of the host's
		 * kernel memory (sockets, pipes) that no cgroup of the
		 * sandbox's is charged for.
		 */
		.connections = 256,
		.net = CORRAL_NET_NONE,
		/* in proxy mode, also programs that ignore proxy variables */
		.net_transparent = true,
		/*
		 * No abort criteria; when a policy names some, a halted
		 * sandbox is killed: a one-shot run has no one to hold it for.
		 */
		.abort = { .kill = true },
		/* a flood of denials: 10 whole, then a count every 10 s */
		.events = { .budget_bytes = 16 * MiB, .verbatim = 10,
			    .interval_ms = 10000 },
		/* the built-in hold table always applies; hold only adds */
		.export = { .max_files = 100000, .max_bytes = 1 * GiB },
	};
}

void corral_policy_free(struct corral_policy *p)
{
	size_t i;

	if (!p)
		return;
	free(p->workspace);
	if (p->workspace_pinned)
		close(p->workspace_fd);
	for (i = 0; i < p->nbinds; i++) {
		free(p->binds[i].src);
		free(p->binds[i].dst);
		if (p->binds[i].pinned)
			close(p->binds[i].fd);
	}
	free(p->binds);
	for (i = 0; i < p->ntmpfs; i++)
		free(p->tmpfs[i].dst);
	free(p->tmpfs);
	pairs_free(p->env, p->nenv);
	strv_free(p->env_pass, p->nenv_pass);
	strv_free(p->net_allow, p->nnet_allow);
	strv_free(p->net_deny, p->nnet_deny);
	pairs_free(p->net_hosts, p->nnet_hosts);
	free(p->net_resolver);
	tls_policy_free(p);
	strv_free(p->abort.tripwires, p->abort.ntripwires);
	strv_free(p->hide, p->nhide);
	strv_free(p->abort.ignore_syscalls, p->abort.nignore_syscalls);
	strv_free(p->root_layers, p->nroot_layers);
	if (p->root_pinned)
		close(p->root_fd);
	free(p->workdir);
	hold_rules_free(p->export.hold, p->export.nhold);
	free(p->image);
	free(p->user_name);
	free(p->user_home);
	/* all zero: a second free, or init again, is safe */
	*p = (struct corral_policy){ 0 };
}

static int pins_dup(struct corral_policy *dst, const struct corral_policy *src);

/* A deep copy, so a load can fail half-way and leave the original alone. */
static int policy_copy(struct corral_policy *dst,
		       const struct corral_policy *src)
{
	struct corral_bind b;
	size_t i;
	int r;

	*dst = *src;
	dst->workspace = NULL;
	dst->workspace_pinned = false;	/* until its own fd is there (pins_dup) */
	dst->binds = NULL;
	dst->nbinds = 0;
	dst->tmpfs = NULL;
	dst->ntmpfs = 0;
	dst->env = NULL;
	dst->nenv = 0;
	dst->env_pass = NULL;
	dst->nenv_pass = 0;
	dst->net_allow = NULL;
	dst->nnet_allow = 0;
	dst->net_deny = NULL;
	dst->nnet_deny = 0;
	dst->net_hosts = NULL;
	dst->nnet_hosts = 0;
	dst->net_resolver = NULL;
	dst->net_tls = NULL;
	dst->abort.tripwires = NULL;
	dst->abort.ntripwires = 0;
	dst->hide = NULL;
	dst->nhide = 0;
	dst->abort.ignore_syscalls = NULL;
	dst->abort.nignore_syscalls = 0;
	dst->root_layers = NULL;
	dst->nroot_layers = 0;
	dst->root_pinned = false;	/* until its own fd is there (pins_dup) */
	dst->workdir = NULL;
	dst->export.hold = NULL;
	dst->export.nhold = 0;
	dst->image = NULL;
	dst->user_name = NULL;
	dst->user_home = NULL;
	if (src->user_name && !(dst->user_name = strdup(src->user_name)))
		goto nomem;
	if (src->user_home && !(dst->user_home = strdup(src->user_home)))
		goto nomem;
	if (src->image && !(dst->image = strdup(src->image)))
		goto nomem;
	if (src->workspace && !(dst->workspace = strdup(src->workspace)))
		goto nomem;
	if (src->workdir && !(dst->workdir = strdup(src->workdir)))
		goto nomem;
	for (i = 0; i < src->nroot_layers; i++)
		if (policy_strv_put(&dst->root_layers, &dst->nroot_layers, src->root_layers[i],
			     strlen(src->root_layers[i])))
			goto nomem;
	if (src->net_resolver && !(dst->net_resolver = strdup(src->net_resolver)))
		goto nomem;
	if (tls_policy_copy(dst, src))
		goto nomem;
	for (i = 0; i < src->nbinds; i++) {
		b = src->binds[i];
		b.pinned = false;	/* until its own fd is there (pins_dup) */
		b.src = strdup(src->binds[i].src);
		b.dst = strdup(src->binds[i].dst);
		if (!b.src || !b.dst || policy_bind_append(dst, &b)) {
			free(b.src);
			free(b.dst);
			goto nomem;
		}
	}
	if (src->ntmpfs && !(dst->tmpfs = calloc(src->ntmpfs, sizeof(*dst->tmpfs))))
		goto nomem;
	for (i = 0; i < src->ntmpfs; i++) {
		dst->tmpfs[i] = src->tmpfs[i];
		if (!(dst->tmpfs[i].dst = strdup(src->tmpfs[i].dst)))
			goto nomem;
		dst->ntmpfs = i + 1;
	}
	for (i = 0; i < src->nenv; i++)
		if (policy_env_put(dst, src->env[i].name, strlen(src->env[i].name),
				   src->env[i].value, strlen(src->env[i].value)))
			goto nomem;
	for (i = 0; i < src->nenv_pass; i++)
		if (policy_pass_put(dst, src->env_pass[i]))
			goto nomem;
	for (i = 0; i < src->nnet_allow; i++)
		if (policy_strv_put(&dst->net_allow, &dst->nnet_allow, src->net_allow[i],
				    strlen(src->net_allow[i])))
			goto nomem;
	for (i = 0; i < src->nnet_deny; i++)
		if (policy_strv_put(&dst->net_deny, &dst->nnet_deny, src->net_deny[i],
				    strlen(src->net_deny[i])))
			goto nomem;
	for (i = 0; i < src->nnet_hosts; i++)
		if (policy_pair_put(&dst->net_hosts, &dst->nnet_hosts,
				    src->net_hosts[i].name, strlen(src->net_hosts[i].name),
				    src->net_hosts[i].value,
				    strlen(src->net_hosts[i].value)))
			goto nomem;
	for (i = 0; i < src->nhide; i++)
		if (policy_strv_put(&dst->hide, &dst->nhide, src->hide[i], strlen(src->hide[i])))
			goto nomem;
	for (i = 0; i < src->abort.ntripwires; i++)
		if (policy_strv_put(&dst->abort.tripwires, &dst->abort.ntripwires,
				    src->abort.tripwires[i],
				    strlen(src->abort.tripwires[i])))
			goto nomem;
	for (i = 0; i < src->abort.nignore_syscalls; i++)
		if (policy_strv_put(&dst->abort.ignore_syscalls, &dst->abort.nignore_syscalls,
				    src->abort.ignore_syscalls[i],
				    strlen(src->abort.ignore_syscalls[i])))
			goto nomem;
	for (i = 0; i < src->export.nhold; i++)
		if (policy_hold_rule_put(&dst->export, src->export.hold[i].path,
				  src->export.hold[i].check))
			goto nomem;
	r = pins_dup(dst, src);
	if (r < 0)
		corral_policy_free(dst);
	return r;
nomem:
	corral_policy_free(dst);
	return -ENOMEM;
}

int corral_policy_copy(struct corral_policy *dst, const struct corral_policy *src,
		       struct corral_err *err)
{
	int r = policy_copy(dst, src);

	if (r < 0)
		return corral_set_errno(err, -r, "copying a policy");
	return 0;
}

/* ---- overrides from the command line --------------------------------- */

static int fail_arg(struct corral_err *err, int code, const char *why,
		    const char *arg, size_t n)
{
	char got[GOT_MAX + 16];

	if (code == -ENOMEM)
		return corral_set_err(err, code,
				      "out of memory reading the argument");
	policy_quote(arg, n, got, sizeof(got));
	return corral_set_err(err, code, "%s (got %s)", why, got);
}

int corral_policy_add_bind(struct corral_policy *p, const char *spec,
			   bool writable, struct corral_err *err)
{
	struct corral_bind b;
	char why[128];
	size_t n = spec ? strlen(spec) : 0;
	int r;

	r = policy_parse_bind(spec ? spec : "", n, &b, why, sizeof(why));
	if (r)
		return fail_arg(err, r, why, spec ? spec : "", n);
	b.writable = writable;
	r = policy_bind_append(p, &b);
	if (r) {
		free(b.src);
		free(b.dst);
		return corral_set_err(err, r, "out of memory adding the bind %s",
				      spec);
	}
	return 0;
}

/*
 * The path the kernel gives fd now, with no symlink in it: where init
 * looks for the object again (mount.c: it cannot mount the caller's fd),
 * to compare what it finds with fd's.
 */
static int pinned_path(int fd, char *buf, size_t len, struct corral_err *err)
{
	char self[64];
	ssize_t n;

	snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
	n = readlink(self, buf, len - 1);
	if (n < 0)
		return corral_set_err(err, -errno, "a pinned source (fd %d): %s", fd,
				      strerror(errno));
	buf[n] = '\0';
	if (buf[0] != '/' || (n > 10 && !strcmp(buf + n - 10, " (deleted)")))
		return corral_set_err(err, -ENOENT, "a pinned source, %s, is no path "
				      "on the host", buf);
	return 0;
}

int corral_policy_add_pinned_bind(struct corral_policy *p, int fd, const char *dst,
				  bool writable, struct corral_err *err)
{
	char src[PATH_MAX], spec[2 * PATH_MAX + 2];
	int r;

	r = pinned_path(fd, src, sizeof(src), err);
	if (r == 0 && (!dst || snprintf(spec, sizeof(spec), "%s:%s", src, dst) >=
		       (int)sizeof(spec)))
		r = corral_set_err(err, -EINVAL, "the bind of %s: no destination, or "
				   "one too long", src);
	if (r == 0)
		r = corral_policy_add_bind(p, spec, writable, err);
	if (r < 0) {
		close(fd);
		return r;
	}
	p->binds[p->nbinds - 1].pinned = true;
	p->binds[p->nbinds - 1].fd = fd;
	return 0;
}

int corral_policy_pin_bind(struct corral_policy *p, size_t i, int fd,
			   struct corral_err *err)
{
	char src[PATH_MAX], *dup = NULL;
	int r = i < p->nbinds ? pinned_path(fd, src, sizeof(src), err) :
		corral_set_err(err, -EINVAL, "no bind %zu to pin", i);

	if (r == 0 && !(dup = strdup(src)))
		r = corral_set_err(err, -ENOMEM, "out of memory pinning %s", src);
	if (r < 0) {
		close(fd);
		return r;
	}
	if (p->binds[i].pinned)
		close(p->binds[i].fd);
	free(p->binds[i].src);
	p->binds[i].src = dup;
	p->binds[i].pinned = true;
	p->binds[i].fd = fd;
	return 0;
}

int corral_policy_pin_workspace(struct corral_policy *p, int fd,
				struct corral_err *err)
{
	char ws[PATH_MAX];
	int r = pinned_path(fd, ws, sizeof(ws), err);

	if (r == 0)
		r = corral_policy_set_workspace(p, ws, err);	/* unpins */
	if (r < 0) {
		close(fd);
		return r;
	}
	p->workspace_pinned = true;
	p->workspace_fd = fd;
	return 0;
}

/* src's pinned sources in dst, its copy: fds of dst's own. */
static int pins_dup(struct corral_policy *dst, const struct corral_policy *src)
{
	for (size_t i = 0; i < src->nbinds && i < dst->nbinds; i++) {
		if (!src->binds[i].pinned)
			continue;
		dst->binds[i].fd = fcntl(src->binds[i].fd, F_DUPFD_CLOEXEC, 3);
		if (dst->binds[i].fd < 0)
			return -errno;
		dst->binds[i].pinned = true;
	}
	if (src->workspace_pinned) {
		dst->workspace_fd = fcntl(src->workspace_fd, F_DUPFD_CLOEXEC, 3);
		if (dst->workspace_fd < 0)
			return -errno;
		dst->workspace_pinned = true;
	}
	if (src->root_pinned) {
		dst->root_fd = fcntl(src->root_fd, F_DUPFD_CLOEXEC, 3);
		if (dst->root_fd < 0)
			return -errno;
		dst->root_pinned = true;
	}
	return 0;
}

int corral_policy_set_env(struct corral_policy *p, const char *assignment,
			  struct corral_err *err)
{
	const char *a = assignment ? assignment : "";
	const char *eq = strchr(a, '=');
	const char *why;
	size_t n = strlen(a);
	int r;

	if (!eq)
		return fail_arg(err, -EINVAL,
				"expected NAME=VALUE for an environment variable",
				a, n);
	why = policy_env_name_problem(a, eq - a);
	if (!why && strlen(eq + 1) > ENV_VALUE_MAX)
		why = "environment variable value is longer than 32 KiB";
	if (why)
		return fail_arg(err, -EINVAL, why, a, n);
	r = policy_env_put(p, a, eq - a, eq + 1, strlen(eq + 1));
	return r ? corral_set_err(err, r,
				  "out of memory adding the environment variable") : 0;
}

int corral_policy_pass_env(struct corral_policy *p, const char *name,
			   struct corral_err *err)
{
	const char *s = name ? name : "";
	const char *why = policy_env_name_problem(s, strlen(s));
	int r;

	if (why)
		return fail_arg(err, -EINVAL, why, s, strlen(s));
	r = policy_pass_put(p, s);
	return r ? corral_set_err(err, r, "out of memory adding the passed variable %s",
				  s) : 0;
}

int corral_policy_set_workspace(struct corral_policy *p, const char *dir,
				struct corral_err *err)
{
	const char *s = dir ? dir : "";
	char why[128], *ws;
	int r;

	r = policy_normalise_path(s, strlen(s), "workspace", &ws, why, sizeof(why));
	if (r)
		return fail_arg(err, r, why, s, strlen(s));
	free(p->workspace);
	p->workspace = ws;
	if (p->workspace_pinned)
		close(p->workspace_fd);
	p->workspace_pinned = false;
	return 0;
}

int corral_policy_set_root(struct corral_policy *p, char *const *layers, size_t n,
			   struct corral_err *err)
{
	char **v = NULL;
	size_t nv = 0;

	for (size_t i = 0; i < n; i++) {
		/* they go into overlay's options, where : , and \\ are syntax */
		if (layers[i][0] != '/' || strpbrk(layers[i], ":,\\")) {
			strv_free(v, nv);
			return corral_set_err(err, -EINVAL, "root layer \"%s\": not an absolute path without : , or \\",
					      layers[i]);
		}
		if (policy_strv_put(&v, &nv, layers[i], strlen(layers[i]))) {
			strv_free(v, nv);
			return corral_set_err(err, -ENOMEM, "out of memory for the root's layers");
		}
	}
	strv_free(p->root_layers, p->nroot_layers);
	p->root_layers = v;
	p->nroot_layers = nv;
	if (p->root_pinned)
		close(p->root_fd);
	p->root_pinned = false;
	return 0;
}

int corral_host_path_check(int fd, const char *path, struct corral_err *err)
{
	int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	int r;

	if (root < 0)
		return corral_set_errno(err, errno, "open /");
	r = mount_check_host_fd(root, fd, path, err);
	close(root);
	return r;
}

int corral_policy_pin_root(struct corral_policy *p, int fd, struct corral_err *err)
{
	char path[PATH_MAX], what[PATH_MAX + 16], *layer = path;
	struct stat st;
	int root, r;

	r = pinned_path(fd, path, sizeof(path), err);
	if (r == 0) {
		snprintf(what, sizeof(what), "the root %s", path);
		r = corral_root_fd_check(fd, what, err);
	}
	if (r == 0 && fstat(fd, &st) < 0)
		r = corral_set_errno(err, errno, "cannot stat the root %s", path);
	if (r == 0 && !S_ISDIR(st.st_mode))
		r = corral_set_err(err, -ENOTDIR, "the root %s: not a directory", path);
	/* the host's root, /proc, /sys, /dev: as a bind's source, never */
	if (r == 0) {
		root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
		r = root < 0 ? corral_set_errno(err, errno, "open /") :
		    mount_check_host_fd(root, fd, path, err);
		if (root >= 0)
			close(root);
	}
	if (r == 0)
		r = corral_policy_set_root(p, &layer, 1, err);	/* unpins */
	if (r < 0) {
		close(fd);
		return r;
	}
	p->root_pinned = true;
	p->root_fd = fd;
	return 0;
}

int corral_policy_set_workdir(struct corral_policy *p, const char *dir,
			      struct corral_err *err)
{
	char *d = NULL;

	if (dir && (dir[0] != '/' || strlen(dir) >= 4000 || strstr(dir, "/../") ||
		    strstr(dir, "//") || strstr(dir, "/./") ||
		    (strlen(dir) > 1 && (dir[strlen(dir) - 1] == '/' ||
					 !strcmp(dir + strlen(dir) - 2, "/.") ||
					 (strlen(dir) >= 3 && !strcmp(dir + strlen(dir) - 3, "/.."))))))
		return corral_set_err(err, -EINVAL, "working directory \"%.200s\": not a plain absolute path (no . .. // or trailing /)",
				      dir);
	if (dir && !(d = strdup(dir)))
		return corral_set_err(err, -ENOMEM, "out of memory");
	free(p->workdir);
	p->workdir = d;
	return 0;
}

int policy_net_mode(const char *s, enum corral_net_mode *mode)
{
	if (!strcmp(s, "none"))
		*mode = CORRAL_NET_NONE;
	else if (!strcmp(s, "proxy"))
		*mode = CORRAL_NET_PROXY;
	else
		return -EINVAL;
	return 0;
}

int corral_policy_set_net(struct corral_policy *p, const char *mode,
			  struct corral_err *err)
{
	const char *s = mode ? mode : "";

	if (policy_net_mode(s, &p->net))
		return fail_arg(err, -EINVAL,
				"unknown network mode, expected \"none\" or \"proxy\"",
				s, strlen(s));
	return 0;
}

static int add_pattern(char ***v, size_t *n, const char *pattern,
		       bool allow, struct corral_err *err)
{
	const char *s = pattern ? pattern : "";
	struct egress_pattern ep;
	size_t len = strlen(s);
	char why[256];
	int r;

	r = egress_pattern_parsen(s, len, &ep, allow, why, sizeof(why));
	if (r)
		return fail_arg(err, r, why, s, len);
	r = policy_strv_put(v, n, s, len);
	return r ? corral_set_err(err, r, "out of memory adding the egress pattern %s",
				  s) : 0;
}

int corral_policy_add_allow(struct corral_policy *p, const char *pattern,
			    struct corral_err *err)
{
	return add_pattern(&p->net_allow, &p->nnet_allow, pattern, true, err);
}

int corral_policy_add_deny(struct corral_policy *p, const char *pattern,
			   struct corral_err *err)
{
	return add_pattern(&p->net_deny, &p->nnet_deny, pattern, false, err);
}

/* ---- loading --------------------------------------------------------- */

/*
 * A trailing comma is what a person writing JSON by hand gets wrong most,
 * and jansson's "string or '}' expected near '}'" does not say it: true
 * when the token at the error is a } or ] with a comma before it.
 */
static bool comma_before_close(const struct loader *l, const json_error_t *je)
{
	size_t i = je->position > 0 ? (size_t)je->position : 0;

	if (i == 0 || i > l->len || (l->text[i - 1] != '}' && l->text[i - 1] != ']'))
		return false;
	for (i--; i > 0; i--) {
		char c = l->text[i - 1];

		if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
			return c == ',';
	}
	return false;
}

/*
 * A size or a duration written bare, "memory": 1G or "timeout": 30s: jansson
 * reads the number, then stops at the unit ("'}' expected near 'G'"), which
 * does not say that the value is a string.  When the token at the error is
 * letters right after digits, hint holds the value quoted, as it should be.
 */
static bool unit_unquoted(const struct loader *l, const json_error_t *je,
			  char *hint, size_t len)
{
	size_t end = je->position > 0 ? (size_t)je->position : 0, i, start;

	if (end == 0 || end > l->len)
		return false;
	for (i = end; i > 0 && ((l->text[i - 1] >= 'a' && l->text[i - 1] <= 'z') ||
				(l->text[i - 1] >= 'A' && l->text[i - 1] <= 'Z')); i--)
		;
	if (i == end || i == 0 || l->text[i - 1] < '0' || l->text[i - 1] > '9')
		return false;
	for (start = i; start > 0 && ((l->text[start - 1] >= '0' && l->text[start - 1] <= '9') ||
				      l->text[start - 1] == '.'); start--)
		;
	if (end - start > 32)
		return false;
	snprintf(hint, len, " (a size or a duration with its unit is a string: "
		 "\"%.*s\")", (int)(end - start), l->text + start);
	return true;
}

static int syntax_error(struct loader *l, json_error_t *je)
{
	char unit[96];

	char dotted[160];
	struct jsonpos pos;
	char *c;

	/* jansson quotes the input near the error: keep it off the terminal raw */
	for (c = je->text; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = '?';
	/* jansson knows a key was repeated, not which path: find it */
	if (json_error_code(je) == json_error_duplicate_key &&
	    je->position > 0 &&
	    !jsonpos_key_ending_at(l->text, l->len, je->position, &pos,
				   dotted, sizeof(dotted)))
		return corral_set_err(l->err, -EINVAL,
				      "%s:%u:%u: %s: duplicate key, each key may appear only once",
				      l->name, pos.line, pos.col, dotted);
	if (je->line < 1)
		return corral_set_err(l->err, -EINVAL, "%s: not valid JSON: %s",
				      l->name, je->text);
	if (unit_unquoted(l, je, unit, sizeof(unit)))
		return corral_set_err(l->err, -EINVAL, "%s:%d:%d: not valid JSON: %s%s",
				      l->name, je->line, je->column, je->text, unit);
	return corral_set_err(l->err, -EINVAL, "%s:%d:%d: not valid JSON: %s%s",
			      l->name, je->line, je->column, je->text,
			      comma_before_close(l, je) ?
			      " (a comma before a closing } or ]: JSON allows none)" : "");
}

/* A flag's text as the JSON value the policy would hold: a number if it is one. */
static json_t *flag_value(const char *text)
{
	char *end;

	if (*text && strspn(text, "0123456789.") == strlen(text) &&
	    strchr(text, '.') == strrchr(text, '.')) {
		if (!strchr(text, '.')) {
			unsigned long long n;

			errno = 0;
			n = strtoull(text, &end, 10);
			if (!errno && !*end && n <= (unsigned long long)INT64_MAX)
				return json_integer((json_int_t)n);
		} else if (text[strlen(text) - 1] != '.') {
			return json_real(strtod(text, NULL));
		}
	}
	return json_string(text);
}

/*
 * One limit from the command line, checked by the same code as the policy
 * file's: "--memory 12XB" fails with the file's reason and range.
 */
int corral_policy_set_limit(struct corral_policy *p, const char *key,
			    const char *value, struct corral_err *err)
{
	char name[64], *text, *pos, *colon;
	json_t *doc;
	int r;

	doc = json_pack("{s:{s:o}}", "limits", key, flag_value(value));
	text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
	json_decref(doc);
	if (!text)
		return corral_set_err(err, -ENOMEM,
				      "out of memory reading the limit %s",
				      key ? key : "");
	snprintf(name, sizeof(name), "--%s", key);
	r = corral_policy_load_string(p, text, strlen(text), name, err);
	free(text);
	/* no name or position of a document the user never wrote */
	pos = r < 0 ? strstr(err->msg, name) : NULL;
	colon = pos ? strstr(pos + strlen(name), ": ") : NULL;
	if (pos == err->msg && colon)
		memmove(err->msg, colon + 2, strlen(colon + 2) + 1);
	return r;
}

/*
 * One document over *p: its scalars replace p's, its objects are merged
 * key by key, and its lists replace p's (append: are added to them).
 */
int policy_load_layer(struct corral_policy *p, const char *text, size_t len,
		      const char *name, bool append, struct corral_err *err)
{
	struct corral_policy tmp;
	struct loader l = {
		.text = text ? text : "",
		.len = text ? len : 0,
		.name = name ? name : "policy",
		.p = &tmp,
		.err = err,
		.append = append,
	};
	json_error_t je;
	json_t *root;
	int r;

	/*
	 * JSON_ALLOW_NUL: a "\u0000" then reaches loader_get_string(), which says
	 * which key it is in, instead of a bare jansson syntax error.
	 */
	root = json_loadb(l.text, l.len,
			  JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
	if (!root)
		return syntax_error(&l, &je);
	r = policy_copy(&tmp, p);
	if (r) {
		json_decref(root);
		return loader_nomem(&l);
	}
	r = policy_schema_apply(&l, root);
	json_decref(root);
	if (r) {
		corral_policy_free(&tmp);
		return r;
	}
	corral_policy_free(p);
	*p = tmp;
	return 0;
}

int corral_policy_load_string(struct corral_policy *p, const char *text,
			      size_t len, const char *name,
			      struct corral_err *err)
{
	return policy_load_layer(p, text, len, name, false, err);
}

/* The whole file, refusing more than POLICY_FILE_MAX even if it grows. */
static int read_policy(int fd, const char *path, char **out, size_t *len,
		       struct corral_err *err)
{
	char *buf = malloc(POLICY_FILE_MAX + 1);
	size_t n = 0;
	ssize_t r;

	if (!buf)
		return corral_set_err(err, -ENOMEM, "%s: out of memory", path);
	while (n <= POLICY_FILE_MAX) {
		r = read(fd, buf + n, POLICY_FILE_MAX + 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			r = -errno;
			free(buf);
			return corral_set_errno(err, -r, "%s", path);
		}
		if (r == 0)
			break;
		n += r;
	}
	if (n > POLICY_FILE_MAX) {
		free(buf);
		return corral_set_err(err, -EFBIG,
				      "%s: larger than 1 MiB, too large for a policy",
				      path);
	}
	*out = buf;
	*len = n;
	return 0;
}

int corral_policy_load_file(struct corral_policy *p, const char *path,
			    struct corral_err *err)
{
	struct stat st;
	char *buf = NULL;
	size_t len = 0;
	int fd, r;

	/* O_NONBLOCK: a FIFO must be refused below, not block the open */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		r = -errno;
		return corral_set_errno(err, -r, "%s", path);
	}
	if (fstat(fd, &st) < 0) {
		r = -errno;
		corral_set_errno(err, -r, "%s", path);
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		r = corral_set_err(err, -EINVAL, "%s: not a regular file",
				   path);
		goto out;
	}
	if (st.st_size > (off_t)POLICY_FILE_MAX) {
		r = corral_set_err(err, -EFBIG,
				   "%s: larger than 1 MiB, too large for a policy",
				   path);
		goto out;
	}
	r = read_policy(fd, path, &buf, &len, err);
	if (!r)
		r = corral_policy_load_string(p, buf, len, path, err);
out:
	free(buf);
	close(fd);
	return r;
}
