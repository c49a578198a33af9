/*
 * tls_policy.c - the policy's TLS part, checked as it is loaded:
 *
 *   "network": {"tls": "terminate" | "tunnel",
 *               "tls_upstream_ca": "/path/ca.pem",
 *               "max_url": 2048, "max_headers": "16k", "max_body": "1m",
 *               "allow": ["pypi.org", {"host": "api.github.com",
 *                         "tls": "terminate", "methods": ["GET"],
 *                         "paths": ["/repos/acme-*"], "max_body": "64k"}]}
 *   "secrets": [{"name": "API_KEY", "from_env": "HOST_VAR",
 *                "hosts": ["api.example.com"], "header": "Authorization"}]
 *
 * Kept as JSON once valid (copied and freed whole); httprules.c and
 * secrets.c compile it for each sandbox.
 */
#include "tls.h"
#include "policy_int.h"
#include "egress.h"

#include <errno.h>
#include <string.h>

static json_t *net_obj(struct loader *l)
{
	struct corral_policy *p = l->p;

	if (!p->net_tls) {
		p->net_tls = calloc(1, sizeof(*p->net_tls));
		if (!p->net_tls)
			return NULL;
	}
	if (!p->net_tls->net)
		p->net_tls->net = json_object();
	return p->net_tls->net;
}

static int tls_mode(struct loader *l, json_t *v, bool *terminate)
{
	const char *s = json_string_value(v);

	if (!s || (strcmp(s, "terminate") && strcmp(s, "tunnel")))
		return loader_fail(l, false, v, "expected \"terminate\" or \"tunnel\"");
	*terminate = !strcmp(s, "terminate");
	return 0;
}

int tls_policy_apply_mode(struct loader *l, json_t *v)
{
	json_t *net;
	bool t;
	int r = tls_mode(l, v, &t);

	if (r)
		return r;
	net = net_obj(l);
	if (!net || json_object_set_new(net, "terminate", json_boolean(t)))
		return loader_nomem(l);
	return 0;
}

/* Roots the upstream check trusts besides the host's: a private CA, a test's. */
int tls_policy_apply_upstream_ca(struct loader *l, json_t *v)
{
	const char *s;
	json_t *net;
	size_t n;
	int r = loader_get_string(l, v, &s, &n);

	if (r)
		return r;
	if (s[0] != '/')
		return loader_fail(l, false, v, "expected an absolute path to PEM certificates");
	net = net_obj(l);
	if (!net || json_object_set_new(net, "upstream_ca", json_stringn(s, n)))
		return loader_nomem(l);
	return 0;
}

static int get_bytes(struct loader *l, json_t *v, uint64_t *out)
{
	const char *why, *s;
	size_t n;
	int r;

	if (json_is_integer(v) && json_integer_value(v) > 0) {
		*out = json_integer_value(v);
		return 0;
	}
	if (!json_is_string(v))
		return loader_fail(l, false, v, "expected a size such as \"16k\" or a number of bytes");
	r = loader_get_string(l, v, &s, &n);
	if (r)
		return r;
	why = units_size(s, out);
	if (!why && *out == 0)
		why = "a cap of 0 bytes would refuse everything";
	return why ? loader_fail(l, false, v, "%s", why) : 0;
}

int tls_policy_apply_cap(struct loader *l, const char *key, json_t *v)
{
	uint64_t b;
	json_t *net;
	int r = get_bytes(l, v, &b);

	if (r)
		return r;
	net = net_obj(l);
	if (!net || json_object_set_new(net, key, json_integer((json_int_t)b)))
		return loader_nomem(l);
	return 0;
}

/* Why s is not acceptable (written to buf if need be), or NULL. */
typedef const char *(*problem_fn)(const char *s, char *buf, size_t len);

/* An array of strings, each checked by problem(). */
static int strings(struct loader *l, json_t *arr, const char *what, problem_fn problem)
{
	size_t i;
	json_t *v;

	if (!json_is_array(arr) || json_array_size(arr) == 0)
		return loader_fail(l, false, arr, "expected a non-empty array of %s", what);
	json_array_foreach(arr, i, v) {
		const char *s, *why;
		char buf[256];
		size_t n;
		int r = loader_push_index(l, i);

		if (!r)
			r = loader_get_string(l, v, &s, &n);
		if (!r && (why = problem(s, buf, sizeof(buf))))
			r = loader_fail(l, false, v, "%s", why);
		loader_pop(l);
		if (r)
			return r;
	}
	return 0;
}

static const char *method_problem(const char *s, char *buf, size_t len)
{
	if (!*s || strlen(s) > 15)
		return "a method is 1 to 15 capital letters";
	for (; *s; s++)
		if (*s < 'A' || *s > 'Z')
			return "a method is 1 to 15 capital letters, such as \"GET\"";
	return NULL;
}

static const char *path_problem(const char *s, char *buf, size_t len)
{
	if (s[0] != '/')
		return "a path starts with \"/\" (a prefix, or a glob with *)";
	return NULL;
}

static const char *pattern_problem(const char *s, char *buf, size_t len)
{
	struct egress_pattern ep;

	if (egress_pattern_parsen(s, strlen(s), &ep, true, buf, len))
		return buf;
	return NULL;
}

/* Apply fn to obj[key] with the key pushed, if present. */
static int keyed(struct loader *l, json_t *obj, const char *key,
		 int (*fn)(struct loader *l, json_t *v, const char *what,
			   problem_fn problem),
		 const char *what, problem_fn problem)
{
	json_t *v = json_object_get(obj, key);
	int r;

	if (!v)
		return 0;
	r = loader_push_key(l, key);
	if (!r)
		r = fn(l, v, what, problem);
	loader_pop(l);
	return r;
}

static int only_keys(struct loader *l, json_t *obj, const char *const *keys)
{
	const char *key;
	json_t *v;

	json_object_foreach(obj, key, v) {
		size_t i;

		for (i = 0; keys[i] && strcmp(keys[i], key); i++)
			;
		if (!keys[i]) {
			int r = loader_push_key(l, key);

			if (!r)
				r = loader_fail(l, true, v, "unknown key");
			loader_pop(l);
			return r;
		}
	}
	return 0;
}

int tls_policy_apply_rule(struct loader *l, json_t *obj, const char **host,
			  size_t *hostlen)
{
	static const char *const keys[] = { "host", "tls", "methods", "paths",
					    "max_body", NULL };
	json_t *h = json_object_get(obj, "host"), *net, *rules, *v;
	char why[256];
	uint64_t b;
	bool t;
	int r;

	r = only_keys(l, obj, keys);
	if (r)
		return r;
	if (!json_is_string(h))
		return loader_fail(l, false, obj, "an allowlist object needs \"host\": a pattern");
	r = loader_push_key(l, "host");
	if (!r && (r = loader_get_string(l, h, host, hostlen)) == 0 &&
	    pattern_problem(*host, why, sizeof(why)))
		r = loader_fail(l, false, h, "%s", why);
	loader_pop(l);
	if (!r && (v = json_object_get(obj, "tls"))) {
		r = loader_push_key(l, "tls");
		if (!r)
			r = tls_mode(l, v, &t);
		/* methods and paths of an HTTPS host are seen only terminated */
		if (!r && !t && (json_object_get(obj, "methods") ||
				 json_object_get(obj, "paths") ||
				 json_object_get(obj, "max_body")))
			r = loader_fail(l, false, v, "methods, paths and max_body are "
					"enforced on terminated connections: \"tunnel\" cannot have them");
		if (!r && json_object_set_new(obj, "terminate", json_boolean(t)))
			r = loader_nomem(l);
		loader_pop(l);
	}
	if (!r)
		r = keyed(l, obj, "methods", strings, "methods such as \"GET\"", method_problem);
	if (!r)
		r = keyed(l, obj, "paths", strings, "paths such as \"/repos/acme/*\"", path_problem);
	if (!r && (v = json_object_get(obj, "max_body"))) {
		r = loader_push_key(l, "max_body");
		if (!r && (r = get_bytes(l, v, &b)) == 0 &&
		    json_object_set_new(obj, "max_body", json_integer((json_int_t)b)))
			r = loader_nomem(l);
		loader_pop(l);
	}
	if (r)
		return r;
	net = net_obj(l);
	rules = net ? json_object_get(net, "rules") : NULL;
	if (net && !rules) {
		rules = json_array();
		if (json_object_set_new(net, "rules", rules))
			rules = NULL;
	}
	if (!rules || json_array_append(rules, obj))
		return loader_nomem(l);
	return 0;
}

static const char *env_problem(const char *s, char *buf, size_t len)
{
	return policy_env_name_problem(s, strlen(s));
}

static const char *file_problem(const char *s, char *buf, size_t len)
{
	return s[0] == '/' ? NULL : "expected an absolute path";
}

static const char *any_problem(const char *s, char *buf, size_t len)
{
	return *s ? NULL : "expected a non-empty string";
}

static int one_string(struct loader *l, json_t *v, const char *what,
		      problem_fn problem)
{
	const char *s, *why;
	char buf[256];
	size_t n;
	int r = loader_get_string(l, v, &s, &n);

	(void)what;
	if (!r && (why = problem(s, buf, sizeof(buf))))
		r = loader_fail(l, false, v, "%s", why);
	return r;
}

static int apply_secret(struct loader *l, json_t *obj)
{
	static const char *const keys[] = { "name", "from_env", "from_file", "hosts",
					    "header", "query", NULL };
	int r;

	if (!json_is_object(obj))
		return loader_fail(l, false, obj, "expected an object such as {\"name\": \"API_KEY\", "
				   "\"from_env\": \"HOST_VAR\", \"hosts\": [\"api.example.com\"], "
				   "\"header\": \"Authorization\"}");
	r = only_keys(l, obj, keys);
	if (r)
		return r;
	if (!json_object_get(obj, "name"))
		return loader_fail(l, false, obj, "a secret needs \"name\", the variable inside");
	if (!json_object_get(obj, "from_env") == !json_object_get(obj, "from_file"))
		return loader_fail(l, false, obj, "a secret needs one of \"from_env\" and \"from_file\"");
	if (!json_object_get(obj, "hosts"))
		return loader_fail(l, false, obj, "a secret needs \"hosts\", where it may be sent");
	if (!json_object_get(obj, "header") && !json_object_get(obj, "query"))
		return loader_fail(l, false, obj, "a secret needs \"header\" (a header name, "
				   "e.g. \"Authorization\") or \"query\" (a parameter name): "
				   "where it may appear");
	r = keyed(l, obj, "name", one_string, NULL, env_problem);
	if (!r)
		r = keyed(l, obj, "from_env", one_string, NULL, env_problem);
	if (!r)
		r = keyed(l, obj, "from_file", one_string, NULL, file_problem);
	if (!r)
		r = keyed(l, obj, "hosts", strings, "host patterns", pattern_problem);
	if (!r)
		r = keyed(l, obj, "header", one_string, NULL, any_problem);
	if (!r)
		r = keyed(l, obj, "query", one_string, NULL, any_problem);
	return r;
}

int tls_policy_apply_secrets(struct loader *l, json_t *v)
{
	struct corral_policy *p = l->p;
	size_t i;
	json_t *s;

	if (!json_is_array(v))
		return loader_fail(l, false, v, "expected an array of secrets");
	json_array_foreach(v, i, s) {
		int r = loader_push_index(l, i);

		if (!r)
			r = apply_secret(l, s);
		loader_pop(l);
		if (r)
			return r;
	}
	if (!p->net_tls && !(p->net_tls = calloc(1, sizeof(*p->net_tls))))
		return loader_nomem(l);
	/* a later layer's list replaces the earlier one's (policy_int.h) */
	if (!l->append) {
		json_decref(p->net_tls->secrets);
		p->net_tls->secrets = NULL;
	}
	if (!p->net_tls->secrets)
		p->net_tls->secrets = json_array();
	if (!p->net_tls->secrets || json_array_extend(p->net_tls->secrets, v))
		return loader_nomem(l);
	return 0;
}

/* The allowlist's objects, when a later layer's network.allow replaces it. */
void tls_policy_clear_rules(struct corral_policy *p)
{
	if (p->net_tls && p->net_tls->net)
		json_object_del(p->net_tls->net, "rules");
}

int tls_policy_copy(struct corral_policy *dst, const struct corral_policy *src)
{
	dst->net_tls = NULL;
	if (!src->net_tls)
		return 0;
	dst->net_tls = calloc(1, sizeof(*dst->net_tls));
	if (!dst->net_tls)
		return -ENOMEM;
	if (src->net_tls->net && !(dst->net_tls->net = json_deep_copy(src->net_tls->net)))
		return -ENOMEM;
	if (src->net_tls->secrets &&
	    !(dst->net_tls->secrets = json_deep_copy(src->net_tls->secrets)))
		return -ENOMEM;
	return 0;
}

void tls_policy_free(struct corral_policy *p)
{
	if (!p->net_tls)
		return;
	json_decref(p->net_tls->net);
	json_decref(p->net_tls->secrets);
	free(p->net_tls);
	p->net_tls = NULL;
}

bool tls_policy_active(const struct corral_policy *p)
{
	const struct corral_tls_policy *t = p->net_tls;
	json_t *rules, *r;
	size_t i;

	if (!t)
		return false;
	if (json_array_size(t->secrets))
		return true;
	if (json_is_true(json_object_get(t->net, "terminate")))
		return true;
	rules = json_object_get(t->net, "rules");
	json_array_foreach(rules, i, r)
		if (json_object_get(r, "methods") || json_object_get(r, "paths") ||
		    json_object_get(r, "max_body") ||
		    json_is_true(json_object_get(r, "terminate")))
			return true;
	return json_object_get(t->net, "max_url") || json_object_get(t->net, "max_headers") ||
	       json_object_get(t->net, "max_body");
}

int corral_policy_host_read(const struct corral_policy *p, size_t i,
			    const char **kind, const char **name)
{
	const struct corral_tls_policy *t = p->net_tls;
	json_t *ca = t ? json_object_get(t->net, "upstream_ca") : NULL;
	size_t n = t ? json_array_size(t->secrets) : 0;

	if (i < n) {
		json_t *s = json_array_get(t->secrets, i);
		const char *env = json_string_value(json_object_get(s, "from_env"));

		*kind = env ? "env" : "file";
		*name = env ? env : json_string_value(json_object_get(s, "from_file"));
		return 0;
	}
	if (i == n && ca) {
		*kind = "file";
		*name = json_string_value(ca);
		return 0;
	}
	return -1;
}

static json_t *part(const struct corral_policy *p, const char *key)
{
	if (!p->net_tls)
		return NULL;
	return key ? json_object_get(p->net_tls->net, key) : p->net_tls->secrets;
}

static bool same(json_t *a, json_t *b)
{
	return (!a && !b) || (a && b && json_equal(a, b));
}

/*
 * Where p's TLS part is wider than bound's, the first place: the field,
 * what is said of it around the bound's name (the operator's policy, or
 * corral serve's built-in default), and the whole sentence for the
 * operator's, which corral_policy_tls_within returns as static text.
 */
struct tls_refusal {
	const char *field;
	const char *before;	/* then the bound's name */
	bool owner;		/* the name is .owner ("the operator's"), not .policy */
	const char *after;
	const char *operators;
};

enum { TLS_SECRETS, TLS_UPSTREAM_CA, TLS_TERMINATE, TLS_RULES, TLS_CAPS };

static const struct tls_refusal tls_refusals[] = {
	[TLS_SECRETS] = { "secrets", "fixed by ", false, "",
			  "secrets: fixed by the operator's policy" },
	[TLS_UPSTREAM_CA] = { "network.tls_upstream_ca", "fixed by ", false, "",
			      "network.tls_upstream_ca: fixed by the operator's policy" },
	[TLS_TERMINATE] = { "network.tls", "", true, " \"terminate\" cannot be turned off",
			    "network.tls: the operator's \"terminate\" cannot be turned off" },
	/* a host's methods and paths are a union: one more entry could widen */
	[TLS_RULES] = { "network.allow", "entries that are objects (tls, methods, paths, "
			"max_body) are fixed by ", false, "",
			"network.allow: entries that are objects (tls, methods, paths, "
			"max_body) are fixed by the operator's policy" },
	[TLS_CAPS] = { "network.max_url, max_headers, max_body", "at most ", true, "",
		       "network.max_url, max_headers, max_body: at most the operator's" },
};

static const struct tls_refusal *tls_refusal(const struct corral_policy *p,
					     const struct corral_policy *bound)
{
	static const char *const caps[] = { "max_url", "max_headers", "max_body" };

	if (!same(part(p, NULL), part(bound, NULL)))
		return &tls_refusals[TLS_SECRETS];
	if (!same(part(p, "upstream_ca"), part(bound, "upstream_ca")))
		return &tls_refusals[TLS_UPSTREAM_CA];
	if (json_is_true(part(bound, "terminate")) && !json_is_true(part(p, "terminate")))
		return &tls_refusals[TLS_TERMINATE];
	if (!same(part(p, "rules"), part(bound, "rules")))
		return &tls_refusals[TLS_RULES];
	for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
		json_t *b = part(bound, caps[i]), *v = part(p, caps[i]);

		if (b && (!v || json_integer_value(v) > json_integer_value(b)))
			return &tls_refusals[TLS_CAPS];
	}
	return NULL;
}

int policy_tls_check(const struct corral_policy *p, const struct corral_policy *bound,
		     const struct corral_bound_name *n, struct corral_err *err)
{
	const struct tls_refusal *r = tls_refusal(p, bound);

	if (!r)
		return 0;
	return corral_set_err(err, -EPERM, "%s: %s%s%s", r->field, r->before,
			      r->owner ? n->owner : n->policy, r->after);
}

const char *corral_policy_tls_within(const struct corral_policy *p,
				     const struct corral_policy *bound)
{
	const struct tls_refusal *r = tls_refusal(p, bound);

	return r ? r->operators : NULL;
}
