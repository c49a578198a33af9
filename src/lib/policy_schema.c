/*
 * policy_schema.c - the policy file's schema, as tables: each section a
 * list of keys, each key a function that checks its value and writes it
 * into the policy being loaded (policy.c's loader, which says where a
 * value was wrong).  A section is a table and an apply_ function; the top
 * level (top_fields, at the end) lists the sections.
 */
#include "policy_int.h"
#include "export.h"
#include "egress.h"
#include "tripwire.h"
#include "image.h"
#include "tls.h"

#include <errno.h>
#include <event2/util.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MEMORY_MIN		(4 * MiB)
#define PIDS_MAX		4194304		/* the kernel's PID_MAX_LIMIT */
#define CPUS_MAX		1024.0
#define DISK_MIN		(1 * MiB)
#define DISK_MAX		(1 * TiB)
#define OUTPUT_MIN		(1 * KiB)
#define OUTPUT_MAX		(1 * GiB)
#define CONNECTIONS_MAX		65536
/*
 * A shell, the dynamic loader and a pipe or two take a few dozen fds;
 * under 64 programs fail in ways that look like their own bugs.  The
 * most is the most fs.nr_open can be on a 64-bit kernel
 * (sysctl_nr_open_max); the host's own nr_open and file table are
 * checked when a sandbox starts (sandbox_nofile_cap), not here: a policy
 * file is read on one host and run on another.
 */
#define OPEN_FILES_MIN		64
#define OPEN_FILES_MAX		2147483584LL
#define TIMEOUT_MAX_S		(30ULL * 24 * 3600)
#define TIMEOUT_MAX_MS		(TIMEOUT_MAX_S * 1000)
#define ABORT_COUNT_MAX		1000000000	/* counts in "abort" */
/* the supervisor remembers each distinct destination: this many, plus one */
#define ABORT_DISTINCT_MAX	4096

struct field {
	const char *key;
	int (*apply)(struct loader *l, json_t *v);
};

static void where_key_belongs(const char *key, const struct field *here,
			      char *buf, size_t len);

static int unknown_key(struct loader *l, const char *key, json_t *v,
		       const struct field *fields)
{
	char known[200], hint[96];
	size_t off = 0;

	known[0] = '\0';
	where_key_belongs(key, fields, hint, sizeof(hint));
	for (; fields->key && off < sizeof(known); fields++)
		off += snprintf(known + off, sizeof(known) - off, "%s%s",
				off ? ", " : "", fields->key);
	return loader_fail(l, true, v, "unknown key, expected one of: %s%s",
			   known, hint);
}

static int apply_fields(struct loader *l, json_t *obj,
			const struct field *fields)
{
	const struct field *f;
	const char *key;
	json_t *v;
	int r;

	if (!json_is_object(obj))
		return loader_fail(l, false, obj, "expected an object");
	json_object_foreach(obj, key, v) {
		for (f = fields; f->key && strcmp(f->key, key); f++)
			;
		r = loader_push_key(l, key);
		if (r)
			return r;
		r = f->key ? f->apply(l, v) : unknown_key(l, key, v, fields);
		loader_pop(l);
		if (r)
			return r;
	}
	return 0;
}

static int apply_description(struct loader *l, json_t *v)
{
	const char *s;
	size_t n;

	return loader_get_string(l, v, &s, &n);
}

static int apply_workspace(struct loader *l, json_t *v)
{
	char why[128], *ws;
	const char *s;
	size_t n;
	int r;

	if (json_is_null(v)) {
		free(l->p->workspace);
		l->p->workspace = NULL;
		return 0;
	}
	if (!json_is_string(v))
		return loader_fail(l, false, v, "expected an absolute path or null");
	r = loader_get_string(l, v, &s, &n);
	if (r)
		return r;
	if (n && s[0] != '/')
		return loader_fail_relative(l, v, "workspace", "--workspace");
	r = policy_normalise_path(s, n, "workspace", &ws, why, sizeof(why));
	if (r == -ENOMEM)
		return loader_nomem(l);
	if (r)
		return loader_fail(l, false, v, "%s", why);
	free(l->p->workspace);
	l->p->workspace = ws;
	return 0;
}

static int apply_binds(struct loader *l, json_t *arr, bool writable)
{
	struct corral_bind b;
	char why[128];
	const char *s;
	size_t i, n;
	json_t *v;
	int r = 0;

	if (!json_is_array(arr))
		return loader_fail(l, false, arr,
				   "expected an array of \"HOST[:PATH]\" strings");
	if (!l->append)
		policy_binds_clear(l->p, writable);
	json_array_foreach(arr, i, v) {
		r = loader_push_index(l, i);
		if (r)
			return r;
		r = loader_get_string(l, v, &s, &n);
		if (!r && n && s[0] != '/' && s[0] != ':')
			r = loader_fail_relative(l, v, "host path", writable ? "--rw" : "--ro");
		else if (!r) {
			r = policy_parse_bind(s, n, &b, why, sizeof(why));
			if (r == -ENOMEM)
				r = loader_nomem(l);
			else if (r)
				r = loader_fail(l, false, v, "%s", why);
		}
		if (!r) {
			b.writable = writable;
			if (policy_bind_append(l->p, &b)) {
				free(b.src);
				free(b.dst);
				r = loader_nomem(l);
			}
		}
		loader_pop(l);
		if (r)
			return r;
	}
	return 0;
}

static int apply_ro(struct loader *l, json_t *v)
{
	return apply_binds(l, v, false);
}

static int apply_rw(struct loader *l, json_t *v)
{
	return apply_binds(l, v, true);
}

static int apply_root_writable(struct loader *l, json_t *v)
{
	if (!json_is_boolean(v))
		return loader_fail(l, false, v, "expected true or false");
	l->p->root_writable = json_is_true(v);
	return 0;
}

/* A reference into the store, checked as `corral image` reads one. */
static int apply_image(struct loader *l, json_t *v)
{
	struct corral_err e = { 0 };
	char name[512];
	const char *s;
	size_t n;
	int r;

	if (!json_is_string(v))
		return loader_fail(l, false, v, "expected an image name such as \"debian:12\" or a digest");
	r = loader_get_string(l, v, &s, &n);
	if (r)
		return r;
	if (!image_looks_like_digest(s) &&
	    corral_image_ref_normalize(s, name, sizeof(name), &e) < 0)
		return loader_fail(l, false, v, "%s", e.msg);
	free(l->p->image);
	l->p->image = strdup(s);
	return l->p->image ? 0 : loader_nomem(l);
}

/*
 * filesystem.hide: a path as the sandbox sees it, masked after the binds
 * (mount.c hide_paths).  The sandbox's own machinery (/proc, /dev ...)
 * is corral's to mask, and the root would leave nothing to run.
 */
#define HIDE_MAX 64

static int apply_hide_one(struct loader *l, json_t *v)
{
	static const char *const reserved[] = {
		"/proc", "/sys", "/dev", "/oldroot", "/.corral",
	};
	char why[160], *path = NULL;
	const char *s;
	size_t n, i;
	int r = loader_get_string(l, v, &s, &n);

	if (r)
		return r;
	r = policy_normalise_path(s, n, "hidden path", &path, why, sizeof(why));
	if (r == -ENOMEM)
		return loader_nomem(l);
	if (r)
		return loader_fail(l, false, v, "%s", why);
	if (!strcmp(path, "/"))
		r = loader_fail(l, false, v, "the root cannot be hidden");
	for (i = 0; !r && i < sizeof(reserved) / sizeof(reserved[0]); i++)
		if (policy_path_under(path, reserved[i]))
			r = loader_fail(l, false, v, "%s is corral's own (it masks what is there)",
					reserved[i]);
	for (i = 0; !r && i < l->p->nhide; i++)
		if (!strcmp(l->p->hide[i], path))
			goto out;
	if (!r && l->p->nhide >= HIDE_MAX)
		r = loader_fail(l, false, v, "too many hidden paths, at most %d", HIDE_MAX);
	else if (!r && policy_strv_put(&l->p->hide, &l->p->nhide, path, strlen(path)))
		r = loader_nomem(l);
out:
	free(path);
	return r;
}

static int apply_hide(struct loader *l, json_t *arr)
{
	size_t i;
	json_t *v;
	int r;

	if (!json_is_array(arr))
		return loader_fail(l, false, arr,
				   "expected an array of absolute paths such as \"/workspace/.env\"");
	if (!l->append)
		policy_strv_clear(&l->p->hide, &l->p->nhide);
	json_array_foreach(arr, i, v) {
		r = loader_push_index(l, i);
		if (r)
			return r;
		r = apply_hide_one(l, v);
		loader_pop(l);
		if (r)
			return r;
	}
	return 0;
}

static const struct field filesystem_fields[] = {
	{ "workspace", apply_workspace },
	{ "image", apply_image },
	{ "root_writable", apply_root_writable },
	{ "ro", apply_ro },
	{ "rw", apply_rw },
	{ "hide", apply_hide },
	{ NULL, NULL },
};

static int apply_filesystem(struct loader *l, json_t *v)
{
	return apply_fields(l, v, filesystem_fields);
}

/* A size string, a number of bytes, or (if allowed) "unlimited" for 0. */
static int get_size(struct loader *l, json_t *v, bool unlimited,
		    uint64_t *bytes)
{
	const char *s, *why;
	size_t n;
	int r;

	if (json_is_integer(v)) {
		if (json_integer_value(v) < 0)
			return loader_fail(l, false, v, "a size cannot be negative");
		*bytes = json_integer_value(v);
		return 0;
	}
	if (!json_is_string(v))
		return loader_fail(l, false, v, unlimited ?
				   "expected a size such as \"512M\", a number of bytes, or \"unlimited\"" :
				   "expected a size such as \"512M\" or a number of bytes");
	r = loader_get_string(l, v, &s, &n);
	if (r)
		return r;
	if (unlimited && !strcmp(s, "unlimited")) {
		*bytes = 0;
		return 0;
	}
	why = units_size(s, bytes);
	return why ? loader_fail(l, false, v, "%s", why) : 0;
}

static int check_size_range(struct loader *l, json_t *v, uint64_t b,
			    uint64_t min, uint64_t max)
{
	char lim[32];

	if (b < min) {
		corral_format_size(min, lim, sizeof(lim));
		return loader_fail(l, false, v, "too small, the minimum is %s", lim);
	}
	if (b > max) {
		corral_format_size(max, lim, sizeof(lim));
		return loader_fail(l, false, v, "too large, the maximum is %s", lim);
	}
	return 0;
}

static int apply_memory(struct loader *l, json_t *v)
{
	uint64_t b;
	int r;

	r = get_size(l, v, true, &b);
	if (r)
		return r;
	if (b && b < MEMORY_MIN)
		return loader_fail(l, false, v,
				   "too small, the minimum is 4 MiB (0 or \"unlimited\" for no limit)");
	l->p->memory_bytes = b;
	return 0;
}

static int apply_pids(struct loader *l, json_t *v)
{
	json_int_t n;

	if (json_is_string(v) && !strcmp(json_string_value(v), "unlimited") &&
	    json_string_length(v) == strlen("unlimited")) {
		l->p->pids = 0;
		return 0;
	}
	if (!json_is_integer(v))
		return loader_fail(l, false, v,
				   "expected an integer from 1 to %d, or 0 or \"unlimited\"",
				   PIDS_MAX);
	n = json_integer_value(v);
	if (n < 0)
		return loader_fail(l, false, v, "cannot be negative");
	if (n > PIDS_MAX)
		return loader_fail(l, false, v, "too large, the maximum is %d",
				   PIDS_MAX);
	l->p->pids = n;
	return 0;
}

static int apply_cpus(struct loader *l, json_t *v)
{
	double n;

	if (json_is_string(v) && !strcmp(json_string_value(v), "unlimited") &&
	    json_string_length(v) == strlen("unlimited")) {
		l->p->cpus = 0;
		return 0;
	}
	if (!json_is_number(v))
		return loader_fail(l, false, v,
				   "expected a number of CPUs such as 1.5, or 0 or \"unlimited\"");
	n = json_number_value(v);
	if (n < 0)
		return loader_fail(l, false, v, "cannot be negative");
	if (n > CPUS_MAX)
		return loader_fail(l, false, v, "too large, the maximum is %g",
				   CPUS_MAX);
	/* The kernel refuses a CFS quota under 1 ms per 100 ms period. */
	if (n > 0 && n < 0.01)
		return loader_fail(l, false, v, "too small, the minimum is 0.01 (or 0 for no limit)");
	l->p->cpus = n > 0 ? n : 0;	/* not -0.0 */
	return 0;
}

/* A size that must be set (0 is not "unlimited" here), within min..max. */
static int apply_required_size(struct loader *l, json_t *v, uint64_t min,
			       uint64_t max, const char *what, uint64_t *out)
{
	uint64_t b;
	int r;

	r = get_size(l, v, false, &b);
	if (r)
		return r;
	if (!b)
		return loader_fail(l, false, v, "must be more than 0, %s", what);
	r = check_size_range(l, v, b, min, max);
	if (r)
		return r;
	*out = b;
	return 0;
}

static int apply_disk(struct loader *l, json_t *v)
{
	return apply_required_size(l, v, DISK_MIN, DISK_MAX,
				   "it is the size of the sandbox's writable tmpfs",
				   &l->p->disk_bytes);
}

static int apply_output(struct loader *l, json_t *v)
{
	return apply_required_size(l, v, OUTPUT_MIN, OUTPUT_MAX,
				   "it caps each captured stream", &l->p->output_bytes);
}

/*
 * A duration: a string such as "30s" or "1.5h", a number of seconds, or
 * "none" for 0; at most 30 days.  Rounded up to whole milliseconds, so a
 * non-zero duration never becomes 0 ("none").
 */
static int get_duration(struct loader *l, json_t *v, uint64_t *out)
{
	const char *s, *why;
	uint64_t ms;
	double sec;
	size_t n;
	int r;

	if (json_is_string(v)) {
		r = loader_get_string(l, v, &s, &n);
		if (r)
			return r;
		if (!strcmp(s, "none")) {
			ms = 0;
		} else {
			why = units_duration(s, &ms);
			if (why)
				return loader_fail(l, false, v, "%s", why);
		}
	} else if (json_is_number(v)) {
		sec = json_number_value(v);
		if (sec < 0)
			return loader_fail(l, false, v, "a duration cannot be negative");
		if (sec > TIMEOUT_MAX_S)
			return loader_fail(l, false, v, "too long, the maximum is 30 days");
		ms = (uint64_t)(sec * 1000);
		if ((double)ms < sec * 1000)
			ms++;
	} else {
		return loader_fail(l, false, v,
				   "expected a duration such as \"30s\", a number of seconds, or \"none\"");
	}
	if (ms > TIMEOUT_MAX_MS)
		return loader_fail(l, false, v, "too long, the maximum is 30 days");
	*out = ms;
	return 0;
}

static int apply_timeout(struct loader *l, json_t *v)
{
	return get_duration(l, v, &l->p->timeout_ms);
}

static int apply_call_timeout(struct loader *l, json_t *v)
{
	return get_duration(l, v, &l->p->call_timeout_ms);
}

/* Always bounded: each one costs the host fds and kernel memory (proxy.c). */
static int apply_connections(struct loader *l, json_t *v)
{
	json_int_t n;

	if (!json_is_integer(v))
		return loader_fail(l, false, v, "expected an integer from 1 to %d",
				   CONNECTIONS_MAX);
	n = json_integer_value(v);
	if (n < 1)
		return loader_fail(l, false, v, "must be at least 1: it is how many "
				   "connections the egress proxy holds at once");
	if (n > CONNECTIONS_MAX)
		return loader_fail(l, false, v, "too large, the maximum is %d",
				   CONNECTIONS_MAX);
	l->p->connections = n;
	return 0;
}

static int apply_open_files(struct loader *l, json_t *v)
{
	json_int_t n;

	if (!json_is_integer(v))
		return loader_fail(l, false, v, "expected an integer from %d to %lld",
				   OPEN_FILES_MIN, OPEN_FILES_MAX);
	n = json_integer_value(v);
	if (n < OPEN_FILES_MIN)
		return loader_fail(l, false, v, "too small, the minimum is %d: a "
				   "command's processes each need a few dozen fds",
				   OPEN_FILES_MIN);
	if (n > OPEN_FILES_MAX)
		return loader_fail(l, false, v, "too large, the maximum is %lld "
				   "(the most fs.nr_open can be)", OPEN_FILES_MAX);
	l->p->open_files = n;
	return 0;
}

static const struct field limits_fields[] = {
	{ "memory", apply_memory },
	{ "pids", apply_pids },
	{ "cpus", apply_cpus },
	{ "disk", apply_disk },
	{ "timeout", apply_timeout },
	{ "call_timeout", apply_call_timeout },
	{ "output", apply_output },
	{ "connections", apply_connections },
	{ "open_files", apply_open_files },
	{ NULL, NULL },
};

static int apply_limits(struct loader *l, json_t *v)
{
	return apply_fields(l, v, limits_fields);
}

static int apply_env_var(struct loader *l, const char *name, json_t *v)
{
	const char *why, *s;
	size_t n;
	int r;

	why = policy_env_name_problem(name, strlen(name));
	if (why)
		return loader_fail(l, true, v, "%s", why);
	r = loader_get_string(l, v, &s, &n);
	if (r)
		return r;
	if (n > ENV_VALUE_MAX)
		return loader_fail(l, false, v, "longer than 32 KiB");
	return policy_env_put(l->p, name, strlen(name), s, n) ? loader_nomem(l) : 0;
}

/* An object of "key": value pairs, each applied by fn under its own key. */
static int apply_pairs(struct loader *l, json_t *obj, const char *expected,
		       int (*fn)(struct loader *l, const char *key, json_t *v))
{
	const char *key;
	json_t *v;
	int r;

	if (!json_is_object(obj))
		return loader_fail(l, false, obj, "expected an object of %s pairs", expected);
	json_object_foreach(obj, key, v) {
		r = loader_push_key(l, key);
		if (r)
			return r;
		r = fn(l, key, v);
		loader_pop(l);
		if (r)
			return r;
	}
	return 0;
}

static int apply_env_set(struct loader *l, json_t *obj)
{
	return apply_pairs(l, obj, "\"NAME\": \"VALUE\"", apply_env_var);
}

static int apply_env_pass(struct loader *l, json_t *arr)
{
	const char *s, *why;
	size_t i, n;
	json_t *v;
	int r = 0;

	if (!json_is_array(arr))
		return loader_fail(l, false, arr,
				   "expected an array of environment variable names");
	if (!l->append)
		policy_strv_clear(&l->p->env_pass, &l->p->nenv_pass);
	json_array_foreach(arr, i, v) {
		r = loader_push_index(l, i);
		if (r)
			return r;
		r = loader_get_string(l, v, &s, &n);
		if (!r && (why = policy_env_name_problem(s, n)))
			r = loader_fail(l, false, v, "%s", why);
		if (!r && policy_pass_put(l->p, s))
			r = loader_nomem(l);
		loader_pop(l);
		if (r)
			return r;
	}
	return 0;
}

static const struct field env_fields[] = {
	{ "set", apply_env_set },
	{ "pass", apply_env_pass },
	{ NULL, NULL },
};

static int apply_env(struct loader *l, json_t *v)
{
	return apply_fields(l, v, env_fields);
}

static int apply_net_mode(struct loader *l, json_t *v)
{
	const char *s;
	size_t n;
	int r;

	r = loader_get_string(l, v, &s, &n);
	if (r)
		return r;
	if (policy_net_mode(s, &l->p->net))
		return loader_fail(l, false, v,
				   "unknown network mode, expected \"none\" or \"proxy\"");
	return 0;
}

static int apply_patterns(struct loader *l, json_t *arr, bool allow,
			  char ***list, size_t *count)
{
	struct egress_pattern ep;
	const char *s;
	char why[256];
	size_t i, n;
	json_t *v;
	int r = 0;

	if (!json_is_array(arr))
		return loader_fail(l, false, arr,
				   "expected an array of patterns such as \"example.com\", \"*.example.com:443\" or \"10.0.0.0/8\"");
	if (!l->append) {
		policy_strv_clear(list, count);
		/* the allowlist's objects go with it (tls_policy.c) */
		if (allow)
			tls_policy_clear_rules(l->p);
	}
	json_array_foreach(arr, i, v) {
		r = loader_push_index(l, i);
		if (r)
			return r;
		/* an allow entry may be an object: a host narrowed (tls_policy.c) */
		if (allow && json_is_object(v))
			r = tls_policy_apply_rule(l, v, &s, &n);
		else
			r = loader_get_string(l, v, &s, &n);
		if (!r && egress_pattern_parsen(s, n, &ep, allow, why,
						 sizeof(why)))
			r = loader_fail(l, false, v, "%s", why);
		if (!r && policy_strv_put(list, count, s, n))
			r = loader_nomem(l);
		loader_pop(l);
		if (r)
			return r;
	}
	return 0;
}

static int apply_net_allow(struct loader *l, json_t *v)
{
	return apply_patterns(l, v, true, &l->p->net_allow, &l->p->nnet_allow);
}

static int apply_net_deny(struct loader *l, json_t *v)
{
	return apply_patterns(l, v, false, &l->p->net_deny, &l->p->nnet_deny);
}

static int apply_net_transparent(struct loader *l, json_t *v)
{
	if (!json_is_boolean(v))
		return loader_fail(l, false, v, "expected true or false");
	l->p->net_transparent = json_is_true(v);
	return 0;
}

/* "name": "address", both stored canonical (a later file replaces). */
static int apply_net_host(struct loader *l, const char *name, json_t *v)
{
	char cname[EGRESS_NAME_MAX + 1], caddr[INET6_ADDRSTRLEN], why[256];
	const char *s;
	json_t *key;
	size_t n;
	int r;

	if (egress_name_canon(name, strlen(name), cname, why, sizeof(why))) {
		key = json_string(name);
		if (!key)
			return loader_nomem(l);
		r = loader_fail(l, true, key, "%s", why);
		json_decref(key);
		return r;
	}
	r = loader_get_string(l, v, &s, &n);
	if (r)
		return r;
	if (egress_addr_canon(s, n, caddr, why, sizeof(why)))
		return loader_fail(l, false, v, "%s", why);
	if (policy_pair_put(&l->p->net_hosts, &l->p->nnet_hosts, cname, strlen(cname),
			    caddr, strlen(caddr)))
		return loader_nomem(l);
	return 0;
}

static int apply_net_hosts(struct loader *l, json_t *obj)
{
	return apply_pairs(l, obj, "\"name\": \"address\"", apply_net_host);
}

/*
 * The resolver the supervisor asks for allowed names (tests point it at a
 * server of their own); the sandbox's questions never go there as such.
 */
static int apply_net_resolver(struct loader *l, json_t *v)
{
	struct sockaddr_storage ss;
	int sslen = sizeof(ss);
	const char *s;
	char *copy;
	size_t n;
	int r;

	r = loader_get_string(l, v, &s, &n);
	if (r)
		return r;
	if (evutil_parse_sockaddr_port(s, (struct sockaddr *)&ss, &sslen) < 0)
		return loader_fail(l, false, v,
				   "expected an address such as \"127.0.0.1:5353\" or \"[::1]:53\"");
	copy = strndup(s, n);
	if (!copy)
		return loader_nomem(l);
	free(l->p->net_resolver);
	l->p->net_resolver = copy;
	return 0;
}

/* request caps on what is parsed (plain HTTP, terminated TLS) */
static int apply_net_max_url(struct loader *l, json_t *v)
{
	return tls_policy_apply_cap(l, "max_url", v);
}

static int apply_net_max_headers(struct loader *l, json_t *v)
{
	return tls_policy_apply_cap(l, "max_headers", v);
}

static int apply_net_max_body(struct loader *l, json_t *v)
{
	return tls_policy_apply_cap(l, "max_body", v);
}

static const struct field network_fields[] = {
	{ "mode", apply_net_mode },
	{ "allow", apply_net_allow },
	{ "deny", apply_net_deny },
	{ "transparent", apply_net_transparent },
	{ "hosts", apply_net_hosts },
	{ "resolver", apply_net_resolver },
	{ "tls", tls_policy_apply_mode },
	{ "tls_upstream_ca", tls_policy_apply_upstream_ca },
	{ "max_url", apply_net_max_url },
	{ "max_headers", apply_net_max_headers },
	{ "max_body", apply_net_max_body },
	{ NULL, NULL },
};

static int apply_network(struct loader *l, json_t *v)
{
	return apply_fields(l, v, network_fields);
}

/* ---- abort criteria ---------------------------------------------------- */

/* Where tripwires can be planted: the sandbox's own writable tmpfs. */
static const char *const tripwire_tops[] = {
	"/home/agent", "/tmp", "/workspace",
};

/* A count of events, 0 meaning "no such criterion". */
static int get_count(struct loader *l, json_t *v, uint64_t *out)
{
	json_int_t n;

	if (!json_is_integer(v))
		return loader_fail(l, false, v,
				   "expected an integer from 0 to %d (0: no such criterion)",
				   ABORT_COUNT_MAX);
	n = json_integer_value(v);
	if (n < 0)
		return loader_fail(l, false, v, "cannot be negative");
	if (n > ABORT_COUNT_MAX)
		return loader_fail(l, false, v, "too large, the maximum is %d",
				   ABORT_COUNT_MAX);
	*out = n;
	return 0;
}

static int apply_max_denied_egress(struct loader *l, json_t *v)
{
	return get_count(l, v, &l->p->abort.max_denied_egress);
}

static int apply_max_distinct_denied(struct loader *l, json_t *v)
{
	int r = get_count(l, v, &l->p->abort.max_distinct_denied);

	if (r == 0 && l->p->abort.max_distinct_denied > ABORT_DISTINCT_MAX)
		return loader_fail(l, false, v, "too large, the maximum is %d (each "
				   "destination is remembered until the count is met)",
				   ABORT_DISTINCT_MAX);
	return r;
}

static int apply_window(struct loader *l, json_t *v)
{
	return get_duration(l, v, &l->p->abort.window_ms);
}

static int apply_max_denied_syscalls(struct loader *l, json_t *v)
{
	return get_count(l, v, &l->p->abort.max_denied_syscalls);
}

static int apply_max_cpu(struct loader *l, json_t *v)
{
	return get_duration(l, v, &l->p->abort.max_cpu_ms);
}

static int apply_max_wall(struct loader *l, json_t *v)
{
	return get_duration(l, v, &l->p->abort.max_wall_ms);
}

static int apply_on_abort(struct loader *l, json_t *v)
{
	const char *s;
	size_t n;
	int r;

	r = loader_get_string(l, v, &s, &n);
	if (r)
		return r;
	if (!strcmp(s, "kill"))
		l->p->abort.kill = true;
	else if (!strcmp(s, "freeze"))
		l->p->abort.kill = false;
	else
		return loader_fail(l, false, v,
				   "unknown action, expected \"freeze\" (halt and hold) or \"kill\"");
	return 0;
}

/*
 * Why path (normalised) cannot be a tripwire, or NULL.  A tripwire is a
 * file planted in the sandbox's own writable tmpfs, never on a host path,
 * and one tripwire cannot be the directory of another.
 */
static const char *tripwire_problem(const struct corral_abort *a,
				    const char *path, char *why, size_t whylen)
{
	bool under = false;
	size_t i;

	for (i = 0; path[i]; i++)
		if ((unsigned char)path[i] < 0x20 || path[i] == 0x7f)
			return "tripwire path contains a control character";
	for (i = 0; i < sizeof(tripwire_tops) / sizeof(tripwire_tops[0]); i++) {
		if (!strcmp(path, tripwire_tops[i]))
			return "a tripwire is a file: name one under this directory, not the directory itself";
		if (policy_path_under(path, tripwire_tops[i]))
			under = true;
	}
	if (!under)
		return "a tripwire must lie under /home/agent, /tmp or /workspace, where the sandbox's writable files are";
	for (i = 0; i < a->ntripwires; i++) {
		if (policy_path_under(path, a->tripwires[i])) {
			snprintf(why, whylen, "lies under the tripwire %.120s, which is a file",
				 a->tripwires[i]);
			return why;
		}
		if (policy_path_under(a->tripwires[i], path)) {
			snprintf(why, whylen, "the tripwire %.120s lies under it: a tripwire is a file, not a directory",
				 a->tripwires[i]);
			return why;
		}
	}
	return NULL;
}

static int apply_tripwire(struct loader *l, json_t *v)
{
	struct corral_abort *a = &l->p->abort;
	char reason[256], why[256], *path = NULL;
	const char *s, *problem;
	size_t n, i;
	int r;

	r = loader_get_string(l, v, &s, &n);
	if (r)
		return r;
	if (n > TRIPWIRE_PATH_MAX)
		return loader_fail(l, false, v, "tripwire path is longer than %d bytes",
				   TRIPWIRE_PATH_MAX);
	r = policy_normalise_path(s, n, "tripwire path", &path, reason, sizeof(reason));
	if (r == -ENOMEM)
		return loader_nomem(l);
	if (r)
		return loader_fail(l, false, v, "%s", reason);
	for (i = 0; i < a->ntripwires; i++)
		if (!strcmp(a->tripwires[i], path))
			goto out;		/* named twice: planted once */
	problem = tripwire_problem(a, path, why, sizeof(why));
	if (problem)
		r = loader_fail(l, false, v, "%s", problem);
	else if (a->ntripwires >= TRIPWIRE_MAX_FILES)
		r = loader_fail(l, false, v, "too many tripwires, at most %d", TRIPWIRE_MAX_FILES);
	else if (policy_strv_put(&a->tripwires, &a->ntripwires, path, strlen(path)))
		r = loader_nomem(l);
out:
	free(path);
	return r;
}

static int apply_tripwires(struct loader *l, json_t *arr)
{
	size_t i;
	json_t *v;
	int r;

	if (!json_is_array(arr))
		return loader_fail(l, false, arr,
				   "expected an array of absolute paths such as \"/home/agent/.aws/credentials\"");
	if (!l->append)
		policy_strv_clear(&l->p->abort.tripwires, &l->p->abort.ntripwires);
	json_array_foreach(arr, i, v) {
		r = loader_push_index(l, i);
		if (r)
			return r;
		r = apply_tripwire(l, v);
		loader_pop(l);
		if (r)
			return r;
	}
	return 0;
}

/* A syscall's name as the kernel's table has it ("fanotify_init"). */
static int apply_ignore_syscall(struct loader *l, json_t *v)
{
	struct corral_abort *a = &l->p->abort;
	const char *s;
	size_t n;
	int r;

	r = loader_get_string(l, v, &s, &n);
	if (r)
		return r;
	if (n == 0 || n > 63 || sc_resolve(SCMP_ARCH_NATIVE, s) < 0)
		return loader_fail(l, false, v, "not the name of a syscall");
	if (a->nignore_syscalls >= 512)
		return loader_fail(l, false, v, "too many syscalls, at most 512");
	return policy_strv_put(&a->ignore_syscalls, &a->nignore_syscalls, s, n) ?
	       loader_nomem(l) : 0;
}

static int apply_ignore_syscalls(struct loader *l, json_t *arr)
{
	size_t i;
	json_t *v;
	int r;

	if (!json_is_array(arr))
		return loader_fail(l, false, arr,
				   "expected an array of syscall names such as \"fanotify_init\"");
	if (!l->append)
		policy_strv_clear(&l->p->abort.ignore_syscalls,
				  &l->p->abort.nignore_syscalls);
	json_array_foreach(arr, i, v) {
		r = loader_push_index(l, i);
		if (r)
			return r;
		r = apply_ignore_syscall(l, v);
		loader_pop(l);
		if (r)
			return r;
	}
	return 0;
}

static const struct field abort_fields[] = {
	{ "max_denied_egress", apply_max_denied_egress },
	{ "max_distinct_denied_destinations", apply_max_distinct_denied },
	{ "window_seconds", apply_window },
	{ "max_denied_syscalls", apply_max_denied_syscalls },
	{ "ignore_syscalls", apply_ignore_syscalls },
	{ "tripwires", apply_tripwires },
	{ "max_cpu_seconds", apply_max_cpu },
	{ "max_wall_seconds", apply_max_wall },
	{ "on_abort", apply_on_abort },
	{ NULL, NULL },
};

/* An error about the key of obj, pointed at its value. */
static int fail_at(struct loader *l, json_t *obj, const char *key,
		   const char *why)
{
	int r = loader_push_key(l, key);

	if (r)
		return r;
	r = loader_fail(l, false, json_object_get(obj, key), "%s", why);
	loader_pop(l);
	return r;
}

/*
 * A window is the span in which distinct denied destinations are counted:
 * it means nothing without that count.  Checked on the merged result, and
 * blamed on whichever of the two keys this section wrote.
 */
static int apply_abort(struct loader *l, json_t *v)
{
	const struct corral_abort *a = &l->p->abort;
	int r;

	r = apply_fields(l, v, abort_fields);
	if (r || !a->window_ms || a->max_distinct_denied)
		return r;
	if (json_object_get(v, "window_seconds"))
		return fail_at(l, v, "window_seconds",
			       "a window needs max_distinct_denied_destinations, the count it applies to");
	if (json_object_get(v, "max_distinct_denied_destinations"))
		return fail_at(l, v, "max_distinct_denied_destinations",
			       "cannot be 0 while window_seconds is set: the window would count nothing");
	return 0;
}

/* ---- what a sandbox may write to its log ------------------------------ */

#define EVENTS_BUDGET_MIN	(16 * KiB)
#define EVENTS_BUDGET_MAX	(1 * GiB)	/* per sandbox: a daemon holds many */
#define EVENTS_VERBATIM_MAX	1000000
#define EVENTS_INTERVAL_MIN_MS	100
#define EVENTS_INTERVAL_MAX_MS	(24 * 3600 * 1000)

static int apply_events_budget(struct loader *l, json_t *v)
{
	return apply_required_size(l, v, EVENTS_BUDGET_MIN, EVENTS_BUDGET_MAX,
				   "nothing a sandbox does may grow its log without bound",
				   &l->p->events.budget_bytes);
}

static int apply_events_verbatim(struct loader *l, json_t *v)
{
	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    json_integer_value(v) > EVENTS_VERBATIM_MAX)
		return loader_fail(l, false, v,
				   "expected an integer from 0 to %d (0: every repeat is counted, none written whole)",
				   EVENTS_VERBATIM_MAX);
	l->p->events.verbatim = json_integer_value(v);
	return 0;
}

static int apply_events_interval(struct loader *l, json_t *v)
{
	uint64_t ms;
	int r;

	r = get_duration(l, v, &ms);
	if (r)
		return r;
	if (ms < EVENTS_INTERVAL_MIN_MS || ms > EVENTS_INTERVAL_MAX_MS)
		return loader_fail(l, false, v, "expected from 0.1 s to 24 h");
	l->p->events.interval_ms = ms;
	return 0;
}

static const struct field events_fields[] = {
	{ "budget", apply_events_budget },
	{ "verbatim", apply_events_verbatim },
	{ "summary_interval", apply_events_interval },
	{ NULL, NULL },
};

static int apply_events(struct loader *l, json_t *v)
{
	return apply_fields(l, v, events_fields);
}

/*
 * export: what may leave the workspace.  hold adds rules to the built-in
 * table of files that make host tools run code (hold.c): "GLOB" holds any
 * change there, {"path": GLOB, "check": NAME} holds what that check finds.
 */
static int apply_hold_rule(struct loader *l, json_t *v)
{
	enum hold_check check;
	const char *path, *name = "always";
	size_t n;
	json_t *pv = v, *cv = NULL;
	int r;

	if (json_is_object(v)) {
		const char *key;
		json_t *x;

		json_object_foreach(v, key, x) {
			if (strcmp(key, "path") && strcmp(key, "check")) {
				r = loader_push_key(l, key);
				if (!r)
					r = loader_fail(l, true, x, "unknown key, expected one of: path, check");
				loader_pop(l);
				return r;
			}
		}
		pv = json_object_get(v, "path");
		cv = json_object_get(v, "check");
		if (!pv)
			return loader_fail(l, false, v, "a rule needs \"path\"");
	}
	r = loader_get_string(l, pv, &path, &n);
	if (!r && cv)
		r = loader_get_string(l, cv, &name, &n);
	if (r)
		return r;
	if (!*path || path[0] == '/')
		return loader_fail(l, false, pv, "a glob relative to the workspace, such as \".envrc\" or \"**/.git/hooks/**\"");
	if (hold_check_parse(name, &check) < 0)
		return loader_fail(l, false, cv, "unknown check, expected always, git-config, git-bare-config, gitattributes, gitmodules, vscode-tasks, vscode-settings or vscode-workspace");
	return policy_hold_rule_put(&l->p->export, path, name) ? loader_nomem(l) : 0;
}

static int apply_export_hold(struct loader *l, json_t *arr)
{
	size_t i;
	json_t *v;
	int r;

	if (!json_is_array(arr))
		return loader_fail(l, false, arr, "expected an array of globs or {\"path\", \"check\"} rules");
	if (!l->append)
		policy_hold_clear(&l->p->export);
	json_array_foreach(arr, i, v) {
		r = loader_push_index(l, i);
		if (r)
			return r;
		r = apply_hold_rule(l, v);
		loader_pop(l);
		if (r)
			return r;
	}
	return 0;
}

static int apply_export_max_files(struct loader *l, json_t *v)
{
	if (!json_is_integer(v) || json_integer_value(v) < 1)
		return loader_fail(l, false, v, "expected a count of entries, at least 1");
	l->p->export.max_files = json_integer_value(v);
	return 0;
}

static int apply_export_max_bytes(struct loader *l, json_t *v)
{
	uint64_t b;
	int r = get_size(l, v, false, &b);

	if (!r && b == 0)
		return loader_fail(l, false, v, "must be more than 0");
	if (!r)
		l->p->export.max_bytes = b;
	return r;
}

static const struct field export_fields[] = {
	{ "hold", apply_export_hold },
	{ "max_files", apply_export_max_files },
	{ "max_bytes", apply_export_max_bytes },
	{ NULL, NULL },
};

static int apply_export(struct loader *l, json_t *v)
{
	return apply_fields(l, v, export_fields);
}


/*
 * identity.user: "agent" (uid 1000, no capabilities, the default) or
 * "root" (uid 0 of the sandbox's user namespace, child.c's short list of
 * capabilities; the daemon takes it only with --allow-root-inside).
 */
static int apply_user(struct loader *l, json_t *v)
{
	const char *s;
	size_t n;
	int r;

	if (!json_is_string(v))
		return loader_fail(l, false, v, "expected \"agent\" or \"root\"");
	r = loader_get_string(l, v, &s, &n);
	if (r)
		return r;
	if (strcmp(s, "agent") && strcmp(s, "root"))
		return loader_fail(l, false, v, "expected \"agent\" or \"root\"");
	l->p->root_inside = !strcmp(s, "root");
	return 0;
}

static const struct field identity_fields[] = {
	{ "user", apply_user },
	{ NULL, NULL },
};

static int apply_identity(struct loader *l, json_t *v)
{
	return apply_fields(l, v, identity_fields);
}

static const struct field top_fields[] = {
	{ "description", apply_description },
	{ "filesystem", apply_filesystem },
	{ "limits", apply_limits },
	{ "env", apply_env },
	{ "network", apply_network },
	{ "abort", apply_abort },
	{ "events", apply_events },
	{ "export", apply_export },
	{ "secrets", tls_policy_apply_secrets },
	{ "identity", apply_identity },
	{ NULL, NULL },
};

/* Every section, for where_key_belongs(); top_fields is the file itself. */
static const struct {
	const char *name;
	const struct field *fields;
} sections[] = {
	{ "filesystem", filesystem_fields },
	{ "limits", limits_fields },
	{ "env", env_fields },
	{ "network", network_fields },
	{ "abort", abort_fields },
	{ "events", events_fields },
	{ "export", export_fields },
	{ "identity", identity_fields },
};

static bool has_key(const struct field *fields, const char *key)
{
	for (; fields->key; fields++)
		if (!strcmp(fields->key, key))
			return true;
	return false;
}

/*
 * A key known elsewhere, put in the wrong place ("secrets" under network,
 * "memory" at the top, "tripwires" in limits): the list of what is
 * expected here does not say where it goes, and the user had the name
 * right.  Say it, "" when the key is no section's.
 */
static void where_key_belongs(const char *key, const struct field *here,
			      char *buf, size_t len)
{
	buf[0] = '\0';
	if (here != top_fields && has_key(top_fields, key)) {
		snprintf(buf, len, "; %s belongs at the top level", key);
		return;
	}
	for (size_t i = 0; i < sizeof(sections) / sizeof(sections[0]); i++)
		if (sections[i].fields != here && has_key(sections[i].fields, key)) {
			snprintf(buf, len, "; %s belongs in %s (%s.%s)", key,
				 sections[i].name, sections[i].name, key);
			return;
		}
}

int policy_schema_apply(struct loader *l, json_t *root)
{
	return apply_fields(l, root, top_fields);
}
