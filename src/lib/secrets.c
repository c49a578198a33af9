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
 * never its value.
 *
 * What the upstream sends back may show the value again: a server that
 * echoes a request (TRACE, an /anything endpoint, an error page, a
 * redirect carrying the query on).  So a request that has a value swapped
 * in is never a TRACE, and asks for an identity-encoded answer; every
 * answer from a host a secret goes to is read on the way back (terminate.c,
 * httpresp.c) and each form of each such value in it (raw, percent-encoded,
 * in base64 at each of its three alignments: Basic credentials echoed) is
 * overwritten by a mask of its length, so that framing stays right.  The
 * real value, in any of those forms, in a request the proxy reads is
 * refused as a placeholder out of place is: the agent that learned it some
 * other way cannot send it on.  A server that transforms what it reflects
 * (reverses, hashes, truncates, encodes it otherwise) is not seen here.
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
/* a derived form (percent, base64) shorter than this would mask noise */
#define FORM_MIN		8
#define FORMS_MAX		9
#define MASK_BYTE		'*'


struct secret {
	const char *name;		/* the variable inside (policy's string) */
	char placeholder[PLACEHOLDER_LEN + 1];
	char *value;
	size_t value_len;
	struct egress_pattern *hosts;
	size_t nhosts;
	const char *header;		/* NULL: not in a header */
	const char *query;		/* NULL: not in the URL */
	/* the value as it may be written: raw first (in the vault, as it is) */
	struct form {
		char *s;
		size_t len;
	} forms[FORMS_MAX];
	size_t nforms;
};

struct secrets {
	json_t *doc;			/* the policy's array, for the strings */
	struct secret *v;
	size_t n;
	size_t form_max;		/* the longest form of any value */
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

/* ---- the forms a value may be written in --------------------------------- */

static int add_form(struct secret *s, const char *v, size_t n)
{
	if (n == 0 || s->nforms == FORMS_MAX)
		return 0;
	if (s->nforms && n < FORM_MIN)
		return 0;
	for (size_t i = 0; i < s->nforms; i++)
		if (s->forms[i].len == n && !memcmp(s->forms[i].s, v, n))
			return 0;
	s->forms[s->nforms].s = vault_memdup(v, n);
	if (!s->forms[s->nforms].s)
		return -ENOMEM;
	s->forms[s->nforms++].len = n;
	return 0;
}

/* Every byte but RFC 3986's unreserved ones as %XX, in hex of the case asked. */
static size_t percent_encode(const char *v, size_t n, char *out, bool upper)
{
	const char *hex = upper ? "0123456789ABCDEF" : "0123456789abcdef";
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		unsigned char c = v[i];

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    c == '-' || c == '.' || c == '_' || c == '~') {
			out[k++] = c;
		} else {
			out[k++] = '%';
			out[k++] = hex[c >> 4];
			out[k++] = hex[c & 15];
		}
	}
	return k;
}

/*
 * The base64 of a value behind `align` other bytes (a user name and its
 * colon, in Basic credentials): of its characters, those that depend on
 * the value's bits alone, which are the same whatever came before or after.
 */
static size_t base64_aligned(const char *v, size_t n, unsigned align, char *out, char *tmp)
{
	size_t total = align + n, first, last;

	memset(tmp, 0, align);
	memcpy(tmp + align, v, n);
	base64_encode_raw(out, total, (const uint8_t *)tmp);
	/* character i holds bits [6i, 6i + 6): wholly the value's in [8 align, 8 total) */
	first = (8 * align + 5) / 6;
	last = (8 * total) / 6;		/* one past the last whole one */
	if (last <= first)
		return 0;
	memmove(out, out + first, last - first);
	return last - first;
}

static int make_forms(struct secret *s)
{
	size_t n = s->value_len;
	char *buf = vault_alloc(3 * n + BASE64_ENCODE_RAW_LENGTH(n + 2) + n + 8);
	char *tmp = buf ? buf + 3 * n + BASE64_ENCODE_RAW_LENGTH(n + 2) + 4 : NULL;
	int r;

	if (!buf)
		return -ENOMEM;
	r = add_form(s, s->value, n);
	for (int upper = 1; r == 0 && upper >= 0; upper--)
		r = add_form(s, buf, percent_encode(s->value, n, buf, upper));
	for (unsigned a = 0; r == 0 && a < 3; a++) {
		size_t k = base64_aligned(s->value, n, a, buf, tmp);

		r = add_form(s, buf, k);
		/* the URL-safe alphabet (JWTs, many tokens' own encoding) */
		for (size_t i = 0; i < k; i++)
			buf[i] = buf[i] == '+' ? '-' : buf[i] == '/' ? '_' : buf[i];
		if (r == 0)
			r = add_form(s, buf, k);
	}
	explicit_bzero(buf, 3 * n + BASE64_ENCODE_RAW_LENGTH(n + 2) + n + 8);
	vault_free(buf);
	return r;
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
	if (make_forms(s) < 0)
		return corral_set_err(err, -ENOMEM, "secret %s: no memory for the forms "
				      "of its value", s->name);
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
		for (size_t k = 0; k < ss->v[i].nforms; k++)
			if (ss->v[i].forms[k].len > ss->form_max)
				ss->form_max = ss->v[i].forms[k].len;
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
		for (size_t k = 0; k < ss->v[i].nforms; k++)
			vault_free(ss->v[i].forms[k].s);
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
	size_t swaps;		/* placeholders that became values */
	const char *who;	/* the last one's secret */
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
		o->swaps++;
		o->who = s->name;
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
	o->swaps += plain.swaps;
	o->who = plain.who;
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

/* ---- the real values, found again ---------------------------------------- */

/* The first form of any value in p[0..n), and whose it is; NULL: none. */
static const struct secret *find_value(const struct secrets *ss, const char *p, size_t n)
{
	for (size_t i = 0; i < ss->n; i++)
		for (size_t k = 0; k < ss->v[i].nforms; k++)
			if (memmem(p, n, ss->v[i].forms[k].s, ss->v[i].forms[k].len))
				return &ss->v[i];
	return NULL;
}

static int refuse_value(const struct secret *s, const char *where, const char *host,
			char *why, size_t whylen)
{
	snprintf(why, whylen, "the value of secret %s in %s of a request to %.100s: "
		 "a value the sandbox should not know is never sent on", s->name, where, host);
	return -EACCES;
}

int secrets_rewrite_head(const struct secrets *ss, const char *head, size_t len,
			 const char *host, uint16_t port, bool swap, char **out,
			 size_t *outlen, char *why, size_t whylen)
{
	struct ctx c = { .host = host, .port = port, .swap = swap };
	const struct secret *s = NULL;
	const char *p = head, *end = head + len;
	/* what comes back from this host is scanned: it comes back as sent */
	bool identity = swap && secrets_bound(ss, host, port);
	struct out o = { 0 };
	int r = 0;

	*out = NULL;
	if ((s = find_value(ss, head, len)))
		return refuse_value(s, "the head", host, why, whylen);
	for (bool first = true; r == 0 && p < end; first = false) {
		const char *eol = memmem(p, end - p, "\r\n", 2);
		const char *colon;
		size_t n = eol ? (size_t)(eol - p) : (size_t)(end - p);
		bool done = false;

		if (first) {
			r = swap_in(ss, &o, p, n, in_query, &c, "the URL", host, why, whylen);
		} else if (identity && n >= 16 && !strncasecmp(p, "Accept-Encoding:", 16)) {
			p = eol ? eol + 2 : end;
			continue;
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
			if (identity && n == 0 && eol)
				r = put(&o, "Accept-Encoding: identity\r\n", 27) ? -ENOMEM : 0;
			if (r == 0)
				r = swap_in(ss, &o, p, n, in_query, &c, "the head", host, why, whylen);
		}
		if (r == 0 && eol)
			r = put(&o, "\r\n", 2) ? -ENOMEM : 0;
		p = eol ? eol + 2 : end;
	}
	/* TRACE answers with the request it got: the value, back inside */
	if (r == 0 && o.swaps && len > 6 && !memcmp(head, "TRACE ", 6)) {
		snprintf(why, whylen, "a TRACE request to %.100s with the value of secret %s "
			 "swapped in: the server would send it back", host, o.who);
		r = -EACCES;
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

/* a needle of up to this many bytes is found across two calls */
static size_t carry_len(const struct secrets *ss)
{
	return ss->form_max > PLACEHOLDER_LEN ? ss->form_max : PLACEHOLDER_LEN;
}

int secrets_scan(const struct secrets *ss, struct secrets_scan *st,
		 const void *buf, size_t len, char *why, size_t whylen)
{
	const struct secret *s = NULL;
	size_t carry, take;
	char *edge;

	if (!ss || ss->n == 0)
		return 0;
	carry = carry_len(ss);
	take = len < carry ? len : carry;
	/* the carry and an edge as long again, made at a body's first bytes */
	if (!st->tail && !(st->tail = malloc(3 * carry))) {
		snprintf(why, whylen, "out of memory scanning a request body");
		return -ENOMEM;
	}
	edge = st->tail + carry;
	/* across the previous call's end, then within this one */
	memcpy(edge, st->tail, st->ntail);
	memcpy(edge + st->ntail, buf, take);
	if (find_any(ss, edge, st->ntail + take, &s) || find_any(ss, buf, len, &s)) {
		snprintf(why, whylen, "the placeholder of secret %s in a request body, "
			 "where it may not go", s->name);
		return -EACCES;
	}
	if ((s = find_value(ss, edge, st->ntail + take)) || (s = find_value(ss, buf, len))) {
		snprintf(why, whylen, "the value of secret %s in a request body: a value the "
			 "sandbox should not know is never sent on", s->name);
		return -EACCES;
	}
	if (len >= carry) {
		memcpy(st->tail, (const char *)buf + len - carry, carry);
		st->ntail = carry;
	} else {
		size_t keep = st->ntail + len > carry ? carry - len : st->ntail;

		memmove(st->tail, st->tail + st->ntail - keep, keep);
		memcpy(st->tail + keep, buf, len);
		st->ntail = keep + len;
	}
	return 0;
}

void secrets_scan_free(struct secrets_scan *st)
{
	free(st->tail);
	st->tail = NULL;
	st->ntail = 0;
}

/* ---- masking what comes back ---------------------------------------------- */

struct secrets_mask {
	const struct secrets *ss;
	const struct secret **bound;	/* the secrets that go to this host */
	size_t nbound;
	size_t form_max;
	bool *seen;			/* per bound secret: masked at least once */
};

struct secrets_mask *secrets_mask_new(const struct secrets *ss, const char *host,
				      uint16_t port)
{
	struct secrets_mask *m;

	errno = 0;
	if (!ss || !ss->n)
		return NULL;
	m = calloc(1, sizeof(*m));
	if (!m || !(m->bound = calloc(ss->n, sizeof(*m->bound))) ||
	    !(m->seen = calloc(ss->n, sizeof(*m->seen))))
		goto fail;
	m->ss = ss;
	for (size_t i = 0; i < ss->n; i++) {
		if (!host_ok(&ss->v[i], host, port))
			continue;
		m->bound[m->nbound++] = &ss->v[i];
		for (size_t k = 0; k < ss->v[i].nforms; k++)
			if (ss->v[i].forms[k].len > m->form_max)
				m->form_max = ss->v[i].forms[k].len;
	}
	if (m->nbound)
		return m;
	errno = 0;
fail:
	if (m) {
		int e = errno;

		free(m->bound);
		free(m->seen);
		free(m);
		errno = e;
	}
	return NULL;
}

void secrets_mask_free(struct secrets_mask *m)
{
	if (!m)
		return;
	free(m->bound);
	free(m->seen);
	free(m);
}

size_t secrets_redact(const struct secrets *ss, char *p, size_t n)
{
	size_t count = 0;

	for (size_t i = 0; ss && i < ss->n; i++)
		for (size_t k = 0; k < ss->v[i].nforms; k++) {
			const struct form *f = &ss->v[i].forms[k];
			char *cur = p, *hit;

			while ((hit = memmem(cur, p + n - cur, f->s, f->len))) {
				memset(hit, MASK_BYTE, f->len);
				cur = hit + f->len;
				count++;
			}
		}
	return count;
}

bool secrets_bound(const struct secrets *ss, const char *host, uint16_t port)
{
	for (size_t i = 0; ss && i < ss->n; i++)
		if (host_ok(&ss->v[i], host, port))
			return true;
	return false;
}

/*
 * One pass of memmem a form over the buffer: linear, and a body that holds
 * none of them (nearly all) is read once per form and left as it was.
 */
size_t secrets_mask_apply(struct secrets_mask *m, char *p, size_t n)
{
	size_t count = 0;

	for (size_t i = 0; i < m->nbound; i++) {
		const struct secret *s = m->bound[i];

		for (size_t k = 0; k < s->nforms; k++) {
			const struct form *f = &s->forms[k];
			char *cur = p, *end = p + n, *hit;

			while ((hit = memmem(cur, end - cur, f->s, f->len))) {
				memset(hit, MASK_BYTE, f->len);
				cur = hit + f->len;
				count++;
				m->seen[i] = true;
			}
		}
	}
	return count;
}

/* The longest tail of p[0..n) that a form begins with, shorter than the form. */
size_t secrets_mask_partial(const struct secrets_mask *m, const char *p, size_t n)
{
	size_t best = 0;

	for (size_t i = 0; i < m->nbound; i++) {
		const struct secret *s = m->bound[i];

		for (size_t k = 0; k < s->nforms; k++) {
			const struct form *f = &s->forms[k];
			size_t span = f->len - 1 < n ? f->len - 1 : n;
			const char *cur = p + n - span, *end = p + n, *at;

			/* the leftmost start that fits is the longest tail */
			while (cur < end && (at = memchr(cur, f->s[0], end - cur))) {
				size_t tail = end - at;

				if (tail <= best)
					break;
				if (!memcmp(at, f->s, tail)) {
					best = tail;
					break;
				}
				cur = at + 1;
			}
		}
	}
	return best;
}

size_t secrets_mask_hold(const struct secrets_mask *m)
{
	return m->form_max;
}

json_t *secrets_mask_names(const struct secrets_mask *m)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < m->nbound; i++)
		if (m->seen[i])
			json_array_append_new(a, json_string(m->bound[i]->name));
	return a;
}
