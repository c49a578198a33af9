/*
 * httprules.c - holes narrower than a host: which hosts are terminated,
 * and for each request the proxy parses (plain HTTP, terminated TLS), the
 * methods and paths it may use and how large its URL, head and body may be.
 *
 * A host named by several allowlist objects may use what any one of them
 * allows; a host that no object names is limited by the caps alone.
 * A path is a prefix ("/repos/") or, with a '*', a glob over the whole
 * path without its query ("/repos/acme-*", a star crossing slashes too).
 */
#include "tls.h"
#include "egress.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct rule {
	struct egress_pattern host;
	int terminate;		/* 1 yes, 0 no, -1 as network.tls says */
	json_t *methods;	/* NULL: any */
	json_t *paths;		/* NULL: any */
	uint64_t max_body;
};

struct httprules {
	bool terminate_all;
	uint64_t max_url, max_headers, max_body;
	struct rule *rules;
	size_t nrules;
	struct egress_pattern *secret_hosts;	/* terminated: a secret may go there */
	size_t nsecret_hosts;
};

/* The pattern matches host:port (host canonical, as egress judged it). */
bool httprules_host_matches(const struct egress_pattern *p, const char *host,
			    uint16_t port)
{
	size_t hl = strlen(host), nl = strlen(p->name);

	if (p->port ? p->port != port : (port != 80 && port != 443))
		return false;
	if (p->kind == EGRESS_NAME)
		return !strcasecmp(p->name, host);
	if (p->kind == EGRESS_SUBDOMAINS)
		return hl > nl + 1 && host[hl - nl - 1] == '.' &&
		       !strcasecmp(host + hl - nl, p->name);
	if (p->kind == EGRESS_NET) {
		struct egress_pattern lit;
		char why[64];

		/* an address literal: equal to the pattern's full-prefix address */
		return egress_pattern_parsen(host, hl, &lit, true, why, sizeof(why)) == 0 &&
		       lit.kind == EGRESS_NET && lit.family == p->family &&
		       lit.prefix == p->prefix && !memcmp(lit.addr, p->addr, 16);
	}
	return false;
}

static int parse_host(const char *s, struct egress_pattern *out, struct corral_err *err)
{
	char why[256];

	if (egress_pattern_parsen(s, strlen(s), out, true, why, sizeof(why)))
		return corral_set_err(err, -EINVAL, "%s (got \"%.100s\")", why, s);
	return 0;
}

static uint64_t cap(json_t *net, const char *key)
{
	json_t *v = json_object_get(net, key);

	return json_is_integer(v) ? (uint64_t)json_integer_value(v) : 0;
}

static int add_secret_hosts(struct httprules *r, json_t *secrets,
			    struct corral_err *err)
{
	size_t i, j;
	json_t *s, *h;

	json_array_foreach(secrets, i, s) {
		json_t *hosts = json_object_get(s, "hosts");

		json_array_foreach(hosts, j, h) {
			struct egress_pattern *grown = realloc(r->secret_hosts,
				(r->nsecret_hosts + 1) * sizeof(*grown));

			if (!grown)
				return corral_set_err(err, -ENOMEM, "out of memory for the secrets' hosts");
			r->secret_hosts = grown;
			if (parse_host(json_string_value(h), &grown[r->nsecret_hosts], err) < 0)
				return err->code;
			r->nsecret_hosts++;
		}
	}
	return 0;
}

struct httprules *httprules_new(const struct corral_policy *p, struct corral_err *err)
{
	struct httprules *r = calloc(1, sizeof(*r));
	json_t *net = p->net_tls ? p->net_tls->net : NULL, *rules, *o;
	size_t i;

	if (!r) {
		corral_set_err(err, -ENOMEM, "out of memory for the HTTP rules");
		return NULL;
	}
	r->terminate_all = json_is_true(json_object_get(net, "terminate"));
	r->max_url = cap(net, "max_url");
	r->max_headers = cap(net, "max_headers");
	r->max_body = cap(net, "max_body");
	rules = json_object_get(net, "rules");
	r->rules = calloc(json_array_size(rules) + 1, sizeof(*r->rules));
	if (!r->rules) {
		corral_set_err(err, -ENOMEM, "out of memory for the HTTP rules");
		goto fail;
	}
	json_array_foreach(rules, i, o) {
		struct rule *ru = &r->rules[r->nrules];
		json_t *t = json_object_get(o, "terminate");

		if (parse_host(json_string_value(json_object_get(o, "host")), &ru->host, err) < 0)
			goto fail;
		ru->methods = json_object_get(o, "methods");
		ru->paths = json_object_get(o, "paths");
		ru->max_body = cap(o, "max_body");
		/* narrowed by method or path: only terminated can it be seen */
		ru->terminate = t ? json_is_true(t) :
				(ru->methods || ru->paths || ru->max_body) ? 1 : -1;
		json_incref(ru->methods);
		json_incref(ru->paths);
		r->nrules++;
	}
	if (p->net_tls && add_secret_hosts(r, p->net_tls->secrets, err) < 0)
		goto fail;
	return r;
fail:
	httprules_free(r);
	return NULL;
}

void httprules_free(struct httprules *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->nrules; i++) {
		json_decref(r->rules[i].methods);
		json_decref(r->rules[i].paths);
	}
	free(r->rules);
	free(r->secret_hosts);
	free(r);
}

/*
 * TLS is terminated on 443, and on a port a pattern names outright; never
 * on 80, which a pattern without a port also covers (it is plain HTTP).
 */
bool httprules_terminate(const struct httprules *r, const char *host, uint16_t port)
{
	int decided = -1;

	if (!r || port == 80)
		return false;
	for (size_t i = 0; i < r->nsecret_hosts; i++)
		if (httprules_host_matches(&r->secret_hosts[i], host, port))
			return true;
	for (size_t i = 0; i < r->nrules; i++) {
		const struct rule *ru = &r->rules[i];

		if (ru->terminate >= 0 && httprules_host_matches(&ru->host, host, port))
			decided = decided == 1 ? 1 : ru->terminate;
	}
	return decided >= 0 ? decided == 1 : r->terminate_all && port == 443;
}

bool httprules_narrowed(const struct httprules *r, const char *host, uint16_t port)
{
	for (size_t i = 0; r && i < r->nrules; i++) {
		const struct rule *ru = &r->rules[i];

		if ((ru->methods || ru->paths || ru->max_body) &&
		    httprules_host_matches(&ru->host, host, port))
			return true;
	}
	return false;
}

static bool method_ok(const struct rule *ru, const char *method)
{
	size_t i;
	json_t *m;

	if (!ru->methods)
		return true;
	json_array_foreach(ru->methods, i, m)
		if (!strcmp(json_string_value(m), method))
			return true;
	return false;
}

static bool path_ok(const struct rule *ru, const char *path)
{
	size_t i;
	json_t *v;

	if (!ru->paths)
		return true;
	json_array_foreach(ru->paths, i, v) {
		const char *pat = json_string_value(v);

		if (strchr(pat, '*') ? fnmatch(pat, path, 0) == 0 :
		    !strncmp(path, pat, strlen(pat)))
			return true;
	}
	return false;
}

/* "%2e" and "%2E" are '.', as a server decodes them; n: bytes taken */
static bool dot_at(const char *p, size_t *n)
{
	if (p[0] == '.') {
		*n = 1;
		return true;
	}
	if (p[0] == '%' && p[1] == '2' && (p[2] == 'e' || p[2] == 'E')) {
		*n = 3;
		return true;
	}
	return false;
}

/*
 * A path a server may read as another than the one judged: a "." or ".."
 * segment (also percent-encoded, or with a ";param" after it), an encoded
 * '/' or '\\', or a '\\' (some servers take it for '/').
 * "/repos/acme/../../admin" starts with the prefix "/repos/acme/" and is
 * /admin once the upstream resolves it.
 */
static bool path_ambiguous(const char *path)
{
	const char *seg = path;

	if (strchr(path, '\\') || strcasestr(path, "%2f") || strcasestr(path, "%5c"))
		return true;
	while (seg) {
		const char *p = *seg == '/' ? seg + 1 : seg;
		size_t n, dots = 0;

		while (dots < 3 && dot_at(p, &n)) {
			p += n;
			dots++;
		}
		if ((dots == 1 || dots == 2) && (*p == '/' || *p == ';' || *p == '\0'))
			return true;
		seg = strchr(seg + 1, '/');
	}
	return false;
}

/* The path without its query, NUL-terminated, into buf; false: too long. */
static bool plain_path(const struct httpreq *rq, char *buf, size_t len)
{
	size_t n = rq->path_len;
	const char *q = rq->path_len ? memchr(rq->path, '?', rq->path_len) : NULL;

	if (q)
		n = q - rq->path;
	if (n == 0) {
		snprintf(buf, len, "/");
		return true;
	}
	if (n >= len)
		return false;
	memcpy(buf, rq->path, n);
	buf[n] = 0;
	return true;
}

uint64_t httprules_max_body(const struct httprules *r, const char *host, uint16_t port)
{
	uint64_t m = r ? r->max_body : 0;

	for (size_t i = 0; r && i < r->nrules; i++)
		if (r->rules[i].max_body && httprules_host_matches(&r->rules[i].host, host, port) &&
		    (m == 0 || r->rules[i].max_body < m))
			m = r->rules[i].max_body;
	return m;
}

int httprules_check(const struct httprules *r, const char *host, uint16_t port,
		    const struct httpreq *rq, char *why, size_t whylen)
{
	char path[HTTPREQ_URL_MAX + 1];
	uint64_t max_body = httprules_max_body(r, host, port);
	bool named = false, ambiguous;

	if (!r)
		return 0;
	if (r->max_url && rq->path_len > r->max_url) {
		snprintf(why, whylen, "URL of %zu bytes to %.100s, over network.max_url (%llu)",
			 rq->path_len, host, (unsigned long long)r->max_url);
		return 414;
	}
	if (r->max_headers && rq->head_len > r->max_headers) {
		snprintf(why, whylen, "request head of %zu bytes to %.100s, over network.max_headers (%llu)",
			 rq->head_len, host, (unsigned long long)r->max_headers);
		return 431;
	}
	/* a chunked body is counted as it flows (proxy.c's body_ok) */
	if (max_body && rq->has_content_length && rq->content_length > max_body) {
		snprintf(why, whylen, "a body to %.100s over its cap of %llu bytes",
			 host, (unsigned long long)max_body);
		return 413;
	}
	if (!plain_path(rq, path, sizeof(path))) {
		snprintf(why, whylen, "a path too long to judge");
		return 414;
	}
	ambiguous = path_ambiguous(path);
	for (size_t i = 0; i < r->nrules; i++) {
		const struct rule *ru = &r->rules[i];

		if (!httprules_host_matches(&ru->host, host, port))
			continue;
		if (!ru->methods && !ru->paths)
			return 0;
		named = true;
		/* judged as written, it could be another path upstream */
		if (ru->paths && ambiguous)
			continue;
		if (method_ok(ru, rq->method_name) && path_ok(ru, path))
			return 0;
	}
	if (!named)
		return 0;
	snprintf(why, whylen, "%s %.200s on %.100s is outside the methods and paths the allowlist gives it%s",
		 rq->method_name, path, host, ambiguous ?
		 " (a path with a dot segment or an encoded slash matches no path rule)" : "");
	return 403;
}
