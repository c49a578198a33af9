/*
 * secrets.c - credentials that never enter the sandbox.
 *
 * Each secret of the policy is read by the supervisor (its environment, or
 * a file it can read) when the sandbox is made; inside, its variable holds
 * a placeholder, random for this sandbox.  In a request head bound for an
 * allowed host over a terminated, verified connection, a placeholder in an
 * allowed position (the value of the named header, Basic credentials in
 * it, the named query parameter) becomes the real value.  A placeholder
 * anywhere else (another host, plain HTTP, another header, the URL, a body)
 * stops the request: the caller refuses it and says so, naming the secret,
 * never its value.  Responses are not rewritten.
 */
#include "tls.h"
#include "egress.h"

#include <errno.h>
#include <fcntl.h>
#include <nettle/base64.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define PLACEHOLDER_PREFIX	"corral-ph-"
#define PLACEHOLDER_LEN		(sizeof(PLACEHOLDER_PREFIX) - 1 + 32)
#define SECRET_FILE_MAX		(64 << 10)

_Static_assert(PLACEHOLDER_LEN < SECRETS_CARRY, "the carry holds a placeholder");

struct secret {
	const char *name;		/* the variable inside (policy's string) */
	char placeholder[PLACEHOLDER_LEN + 1];
	char *value;
	size_t value_len;
	struct egress_pattern *hosts;
	size_t nhosts;
	const char *header;		/* NULL: not in a header */
	const char *query;		/* NULL: not in the URL */
};

struct secrets {
	json_t *doc;			/* the policy's array, for the strings */
	struct secret *v;
	size_t n;
};

static int read_value(struct secret *s, json_t *o, struct corral_err *err)
{
	const char *env = json_string_value(json_object_get(o, "from_env"));
	const char *file = json_string_value(json_object_get(o, "from_file"));
	char *buf;
	ssize_t n;
	int fd;

	if (env) {
		const char *v = getenv(env);

		if (!v || !*v)
			return corral_set_err(err, -ENOENT, "secret %s: the variable %s is not set "
					      "in corral's environment", s->name, env);
		s->value_len = strlen(v);
		s->value = vault_memdup(v, s->value_len);
		return s->value ? 0 : corral_set_errno(err, errno, "secret %s: no memory "
						       "for its value", s->name);
	}
	fd = open(file, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return corral_set_errno(err, errno, "secret %s: cannot open %s", s->name, file);
	/* read in the vault too: a heap buffer, freed, would still be forked */
	buf = vault_alloc(SECRET_FILE_MAX + 1);
	n = buf ? read(fd, buf, SECRET_FILE_MAX + 1) : -1;
	close(fd);
	if (n < 0 || n > SECRET_FILE_MAX) {
		vault_free(buf);
		return corral_set_err(err, n < 0 ? -EIO : -EFBIG, "secret %s: cannot read %s "
				      "(at most 64 KiB)", s->name, file);
	}
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		n--;
	s->value = vault_memdup(buf, n);
	s->value_len = n;
	vault_free(buf);
	return s->value ? 0 : corral_set_errno(err, errno, "secret %s: no memory "
					       "for its value", s->name);
}

/* A value goes into a header line or a URL: no byte may end either early. */
static int check_value(const struct secret *s, struct corral_err *err)
{
	if (s->value_len == 0)
		return corral_set_err(err, -EINVAL, "secret %s: the value is empty", s->name);
	for (size_t i = 0; i < s->value_len; i++) {
		unsigned char c = s->value[i];

		if (c < 0x20 || c == 0x7f || (s->query && (c == ' ' || c == '&' || c == '#')))
			return corral_set_err(err, -EINVAL, "secret %s: the value has a byte "
					      "that cannot go in a %s (0x%02x at %zu)", s->name,
					      s->query ? "URL" : "header", c, i);
	}
	return 0;
}

static int make_placeholder(struct secret *s, struct corral_err *err)
{
	unsigned char r[16];
	int e = corral_random(r, sizeof(r));

	if (e < 0)
		return corral_set_errno(err, -e, "no random bytes for a placeholder");
	memcpy(s->placeholder, PLACEHOLDER_PREFIX, sizeof(PLACEHOLDER_PREFIX) - 1);
	for (size_t i = 0; i < sizeof(r); i++)
		snprintf(s->placeholder + sizeof(PLACEHOLDER_PREFIX) - 1 + 2 * i, 3, "%02x", r[i]);
	return 0;
}

static int compile(struct secret *s, json_t *o, struct corral_err *err)
{
	json_t *hosts = json_object_get(o, "hosts"), *h;
	size_t i;

	s->name = json_string_value(json_object_get(o, "name"));
	s->header = json_string_value(json_object_get(o, "header"));
	s->query = json_string_value(json_object_get(o, "query"));
	s->hosts = calloc(json_array_size(hosts) + 1, sizeof(*s->hosts));
	if (!s->hosts)
		return corral_set_err(err, -ENOMEM, "out of memory for a secret");
	json_array_foreach(hosts, i, h) {
		char why[256];
		const char *t = json_string_value(h);

		if (egress_pattern_parsen(t, strlen(t), &s->hosts[i], true, why, sizeof(why)))
			return corral_set_err(err, -EINVAL, "secret %s: %s", s->name, why);
		s->nhosts++;
	}
	if (read_value(s, o, err) < 0 || check_value(s, err) < 0)
		return err->code;
	return make_placeholder(s, err);
}

struct secrets *secrets_new(const struct corral_policy *p, struct corral_err *err)
{
	struct secrets *ss = calloc(1, sizeof(*ss));
	json_t *arr = p->net_tls ? p->net_tls->secrets : NULL, *o;
	size_t i;

	if (!ss) {
		corral_set_err(err, -ENOMEM, "out of memory for the secrets");
		return NULL;
	}
	ss->doc = json_incref(arr);
	ss->v = calloc(json_array_size(arr) + 1, sizeof(*ss->v));
	if (!ss->v) {
		corral_set_err(err, -ENOMEM, "out of memory for the secrets");
		goto fail;
	}
	json_array_foreach(arr, i, o) {
		ss->n++;
		if (compile(&ss->v[i], o, err) < 0)
			goto fail;
	}
	return ss;
fail:
	secrets_free(ss);
	return NULL;
}

void secrets_free(struct secrets *ss)
{
	if (!ss)
		return;
	for (size_t i = 0; i < ss->n; i++) {
		vault_free(ss->v[i].value);
		free(ss->v[i].hosts);
	}
	free(ss->v);
	json_decref(ss->doc);
	free(ss);
}

size_t secrets_count(const struct secrets *ss)
{
	return ss ? ss->n : 0;
}

const char *secrets_name(const struct secrets *ss, size_t i)
{
	return ss->v[i].name;
}

const char *secrets_placeholder(const struct secrets *ss, size_t i)
{
	return ss->v[i].placeholder;
}

static bool host_ok(const struct secret *s, const char *host, uint16_t port)
{
	for (size_t i = 0; i < s->nhosts; i++)
		if (httprules_host_matches(&s->hosts[i], host, port))
			return true;
	return false;
}

/* ---- the output, grown as needed ----------------------------------------- */

struct out {
	char *buf;
	size_t len, cap;
};

static int put(struct out *o, const void *p, size_t n)
{
	if (o->len + n + 1 > o->cap) {
		size_t cap = (o->len + n + 1) * 2;
		char *grown = realloc(o->buf, cap);

		if (!grown)
			return -ENOMEM;
		o->buf = grown;
		o->cap = cap;
	}
	memcpy(o->buf + o->len, p, n);
	o->len += n;
	/* a string as well, for whoever reads it as one */
	o->buf[o->len] = '\0';
	return 0;
}

/* The first placeholder in p[0..n), and whose it is; NULL: none. */
static const char *find_any(const struct secrets *ss, const char *p, size_t n,
			    const struct secret **who)
{
	const char *best = NULL;

	for (size_t i = 0; i < ss->n; i++) {
		const char *f = memmem(p, n, ss->v[i].placeholder, PLACEHOLDER_LEN);

		if (f && (!best || f < best)) {
			best = f;
			*who = &ss->v[i];
		}
	}
	return best;
}

static int refuse(const struct secret *s, const char *where, const char *host,
		  char *why, size_t whylen)
{
	snprintf(why, whylen, "the placeholder of secret %s in %s of a request to %.100s, "
		 "where it may not go", s->name, where, host);
	return -EACCES;
}

/*
 * Copy p[0..n) to o, swapping placeholders when allowed(s) says so for
 * this position; -EACCES with why at the first that may not be swapped.
 */
typedef bool (*allowed_fn)(const struct secret *s, const char *line, size_t n,
			   const char *at, const void *arg);

static int swap_in(const struct secrets *ss, struct out *o, const char *p, size_t n,
		   allowed_fn allowed, const void *arg, const char *where,
		   const char *host, char *why, size_t whylen)
{
	const char *end = p + n, *cur = p, *f;
	const struct secret *s = NULL;

	while ((f = find_any(ss, cur, end - cur, &s))) {
		if (!allowed(s, p, n, f, arg))
			return refuse(s, where, host, why, whylen);
		if (put(o, cur, f - cur) || put(o, s->value, s->value_len))
			return -ENOMEM;
		cur = f + PLACEHOLDER_LEN;
	}
	return put(o, cur, end - cur) ? -ENOMEM : 0;
}

struct ctx {
	const char *host;
	uint16_t port;
	bool swap;
	const char *header;	/* the line's header name */
	size_t header_len;
};

/* In the URL: only as the whole value of the secret's query parameter. */
static bool in_query(const struct secret *s, const char *line, size_t n,
		     const char *at, const void *arg)
{
	const struct ctx *c = arg;
	size_t ql = s->query ? strlen(s->query) : 0;
	const char *q = memchr(line, '?', n), *after = at + PLACEHOLDER_LEN;

	if (!c->swap || !s->query || !host_ok(s, c->host, c->port) || !q || at < q + ql + 2)
		return false;
	/* pointers, not at[-2 - ql]: ql is unsigned, the index would wrap */
	if (at[-1] != '=' || memcmp(at - 1 - ql, s->query, ql) ||
	    (*(at - 2 - ql) != '?' && *(at - 2 - ql) != '&'))
		return false;
	return after < line + n && (*after == '&' || *after == ' ' || *after == '#');
}

/* In a header: only in the value of the secret's header. */
static bool in_header(const struct secret *s, const char *line, size_t n,
		      const char *at, const void *arg)
{
	const struct ctx *c = arg;

	(void)line;
	(void)n;
	(void)at;
	return c->swap && s->header && host_ok(s, c->host, c->port) &&
	       strlen(s->header) == c->header_len &&
	       !strncasecmp(s->header, c->header, c->header_len);
}

/* "Authorization: Basic b64(user:pass)": the placeholder is encoded. */
static int basic_auth(const struct secrets *ss, struct out *o, const char *v, size_t n,
		      const struct ctx *c, char *why, size_t whylen, bool *done)
{
	const struct secret *s = NULL;
	char *dec = NULL, *enc = NULL;
	struct out plain = { 0 };
	size_t len = 0;
	int r = 0;

	*done = false;
	if (n < 7 || strncasecmp(v, "Basic ", 6) || (n - 6) % 4)
		return 0;
	/* not canonical base64: left as it is, so no placeholder is swapped */
	if (corral_base64_decode(v + 6, n - 6, &dec, &len) < 0 ||
	    !find_any(ss, dec, len, &s))
		goto out;
	r = swap_in(ss, &plain, dec, len, in_header, c, "Basic credentials", c->host,
		    why, whylen);
	if (r < 0)
		goto out;
	enc = malloc(BASE64_ENCODE_RAW_LENGTH(plain.len) + 1);
	if (!enc) {
		r = -ENOMEM;
		goto out;
	}
	base64_encode_raw(enc, plain.len, (const uint8_t *)plain.buf);
	if (put(o, "Basic ", 6) || put(o, enc, BASE64_ENCODE_RAW_LENGTH(plain.len)))
		r = -ENOMEM;
	*done = true;
out:
	if (plain.buf)
		explicit_bzero(plain.buf, plain.len);
	free(plain.buf);
	free(dec);
	if (enc)	/* the real value, encoded */
		explicit_bzero(enc, BASE64_ENCODE_RAW_LENGTH(plain.len));
	free(enc);
	return r;
}

int secrets_rewrite_head(const struct secrets *ss, const char *head, size_t len,
			 const char *host, uint16_t port, bool swap, char **out,
			 size_t *outlen, char *why, size_t whylen)
{
	struct ctx c = { .host = host, .port = port, .swap = swap };
	const struct secret *s = NULL;
	const char *p = head, *end = head + len;
	struct out o = { 0 };
	int r = 0;

	*out = NULL;
	for (bool first = true; r == 0 && p < end; first = false) {
		const char *eol = memmem(p, end - p, "\r\n", 2);
		const char *colon;
		size_t n = eol ? (size_t)(eol - p) : (size_t)(end - p);
		bool done = false;

		if (first) {
			r = swap_in(ss, &o, p, n, in_query, &c, "the URL", host, why, whylen);
		} else if (n && (colon = memchr(p, ':', n))) {
			const char *v = colon + 1;

			while (v < p + n && *v == ' ')
				v++;
			c.header = p;
			c.header_len = colon - p;
			r = put(&o, p, v - p) ? -ENOMEM : 0;
			if (r == 0 && c.header_len == 13 && !strncasecmp(p, "Authorization", 13))
				r = basic_auth(ss, &o, v, p + n - v, &c, why, whylen, &done);
			if (r == 0 && !done)
				r = swap_in(ss, &o, v, p + n - v, in_header, &c, "a header",
					    host, why, whylen);
			/* a placeholder in a name is never where it may go */
			if (r == 0 && find_any(ss, p, colon - p, &s))
				r = refuse(s, "a header name", host, why, whylen);
		} else {
			r = swap_in(ss, &o, p, n, in_query, &c, "the head", host, why, whylen);
		}
		if (r == 0 && eol)
			r = put(&o, "\r\n", 2) ? -ENOMEM : 0;
		p = eol ? eol + 2 : end;
	}
	if (r < 0) {
		if (o.buf)
			explicit_bzero(o.buf, o.len);
		free(o.buf);
		if (r == -ENOMEM)
			snprintf(why, whylen, "out of memory rewriting a request");
		return r;
	}
	*out = o.buf;
	*outlen = o.len;
	return 0;
}

int secrets_scan(const struct secrets *ss, struct secrets_scan *st,
		 const void *buf, size_t len, char *why, size_t whylen)
{
	char edge[2 * SECRETS_CARRY];
	const struct secret *s = NULL;
	size_t take = len < SECRETS_CARRY ? len : SECRETS_CARRY;

	if (!ss || ss->n == 0)
		return 0;
	/* across the previous call's end, then within this one */
	memcpy(edge, st->tail, st->ntail);
	memcpy(edge + st->ntail, buf, take);
	if (find_any(ss, edge, st->ntail + take, &s) || find_any(ss, buf, len, &s)) {
		snprintf(why, whylen, "the placeholder of secret %s in a request body, "
			 "where it may not go", s->name);
		return -EACCES;
	}
	if (len >= SECRETS_CARRY) {
		memcpy(st->tail, (const char *)buf + len - SECRETS_CARRY, SECRETS_CARRY);
		st->ntail = SECRETS_CARRY;
	} else {
		size_t keep = st->ntail + len > SECRETS_CARRY ? SECRETS_CARRY - len : st->ntail;

		memmove(st->tail, st->tail + st->ntail - keep, keep);
		memcpy(st->tail + keep, buf, len);
		st->ntail = keep + len;
	}
	return 0;
}
