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
 * in is never a TRACE, and asks for an identity-encoded answer, whole
 * (no Range: a piece of an echo is no whole spelling of a value); every
 * answer from a host a secret goes to is read on the way back (terminate.c,
 * httpresp.c) and each form of each such value in it (raw, in base64 at
 * each of its three alignments: Basic credentials echoed), in any spelling
 * an encoder gives it (spell.c: percent-encoded, JSON- or HTML-escaped,
 * character by character), is overwritten by a mask of the spelling's
 * length, so that framing stays right.  The real value, so spelled, in a
 * request the proxy reads is refused as a placeholder out of place is: the
 * agent that learned it some other way cannot send it on.  A server that
 * transforms what it reflects (reverses, hashes, truncates, encodes it
 * otherwise) is not seen here.
 */
#include "tls.h"
#include "egress.h"
#include "spell.h"
#include "httpresp.h"

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
/* a derived form (base64) shorter than this would mask noise */
#define FORM_MIN		8
/* raw, base64 at three alignments in two alphabets, UTF-16 in two byte orders */
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
	/*
	 * The value as it may be written: raw first (in the vault, as it is),
	 * then its base64; each as units any escape may spell (spell.h).
	 */
	struct form {
		char *s;
		size_t len;
		struct spell_unit *u;	/* in the vault too: the value's bytes */
		size_t nu;
		size_t max;		/* its longest spelling */
	} forms[FORMS_MAX];
	size_t nforms;
};

/* The secrets a scan looks for, and the bytes their spellings begin with. */
struct spelled {
	const struct secret **v;
	size_t n;
	struct spell_word *w;		/* every form of each, in turn */
	size_t *who;			/* w[i]'s secret, an index in v */
	size_t nw;
	struct spell_starts starts;
	size_t max;			/* the longest spelling of any form */
};

struct secrets {
	json_t *doc;			/* the policy's array, for the strings */
	struct secret *v;
	size_t n;
	struct spelled all;		/* every secret: what a request may not hold */
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
	struct form *f = &s->forms[s->nforms];

	if (n == 0 || s->nforms == FORMS_MAX)
		return 0;
	if (s->nforms && n < FORM_MIN)
		return 0;
	for (size_t i = 0; i < s->nforms; i++)
		if (s->forms[i].len == n && !memcmp(s->forms[i].s, v, n))
			return 0;
	f->s = vault_memdup(v, n);
	f->u = vault_alloc(n * sizeof(*f->u));
	if (!f->s || !f->u) {
		vault_free(f->s);
		vault_free(f->u);
		f->s = NULL;
		f->u = NULL;
		return -ENOMEM;
	}
	f->len = n;
	f->nu = spell_units(v, n, f->u);
	f->max = spell_max(f->u, f->nu);
	s->nforms++;
	return 0;
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

/*
 * The value as UTF-16, little- and big-endian (a text a Windows program or
 * .NET's Encoding.Unicode wrote, Java's "UTF-16", a JSON file saved so): a
 * word of bytes, NULs among them.  A value of characters to U+00FF (every
 * API key's) has one form for both: its little-endian bytes but the last
 * NUL, which big-endian bytes hold from their second on ("s\0k\0-" in
 * "\0s\0k\0-"), so that no NUL begins a word, and a body without the
 * value's first byte is still read at memchr's pace.  A value that is no
 * UTF-8 text has none.
 */
static int utf16_forms(struct secret *s)
{
	const struct form *raw = &s->forms[0];
	size_t k = 0, cap = 4 * raw->nu;
	char *le = vault_alloc(2 * cap + 1), *be = le ? le + cap : NULL;
	bool narrow = true;
	int r;

	if (!le)
		return -ENOMEM;
	for (size_t i = 0; i < raw->nu; i++) {
		uint32_t c = raw->u[i].cp, unit[2];
		size_t m = 1;

		if (c & SPELL_BYTE) {
			vault_free(le);
			return 0;
		}
		unit[0] = c;
		if (c > 0xffff) {
			unit[0] = 0xd800 + ((c - 0x10000) >> 10);
			unit[1] = 0xdc00 + ((c - 0x10000) & 0x3ff);
			m = 2;
		}
		for (size_t j = 0; j < m; j++, k += 2) {
			le[k] = be[k + 1] = (char)(unit[j] & 0xff);
			le[k + 1] = be[k] = (char)(unit[j] >> 8);
			narrow &= unit[j] <= 0xff;
		}
	}
	r = add_form(s, le, narrow ? k - 1 : k);
	if (r == 0 && !narrow)
		r = add_form(s, be, k);
	explicit_bzero(le, 2 * cap);
	vault_free(le);
	return r;
}

static int make_forms(struct secret *s)
{
	size_t n = s->value_len;
	char *buf = vault_alloc(BASE64_ENCODE_RAW_LENGTH(n + 2) + n + 8);
	char *tmp = buf ? buf + BASE64_ENCODE_RAW_LENGTH(n + 2) + 4 : NULL;
	int r;

	if (!buf)
		return -ENOMEM;
	/* percent-encoded, escaped: spellings of these (spell.h), not forms */
	r = add_form(s, s->value, n);
	for (unsigned a = 0; r == 0 && a < 3; a++) {
		size_t k = base64_aligned(s->value, n, a, buf, tmp);

		r = add_form(s, buf, k);
		/* the URL-safe alphabet (JWTs, many tokens' own encoding) */
		for (size_t i = 0; i < k; i++)
			buf[i] = buf[i] == '+' ? '-' : buf[i] == '/' ? '_' : buf[i];
		if (r == 0)
			r = add_form(s, buf, k);
	}
	if (r == 0 && s->nforms)
		r = utf16_forms(s);
	explicit_bzero(buf, BASE64_ENCODE_RAW_LENGTH(n + 2) + n + 8);
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

/* s among what a scan looks for: its forms' first bytes, their longest */
static void spelled_add(struct spelled *sp, const struct secret *s)
{
	for (size_t k = 0; k < s->nforms; k++) {
		sp->w[sp->nw] = (struct spell_word){ s->forms[k].u, s->forms[k].nu };
		sp->who[sp->nw++] = sp->n;
		spell_starts(s->forms[k].u, &sp->starts);
		if (s->forms[k].max > sp->max)
			sp->max = s->forms[k].max;
	}
	sp->v[sp->n++] = s;
}

/* room in sp for n secrets; false: no memory */
static bool spelled_alloc(struct spelled *sp, size_t n)
{
	sp->v = calloc(n + 1, sizeof(*sp->v));
	sp->w = calloc((n + 1) * FORMS_MAX, sizeof(*sp->w));
	sp->who = calloc((n + 1) * FORMS_MAX, sizeof(*sp->who));
	return sp->v && sp->w && sp->who;
}

static void spelled_free(struct spelled *sp)
{
	free(sp->v);
	free(sp->w);
	free(sp->who);
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
	if (!ss->v || !spelled_alloc(&ss->all, json_array_size(arr))) {
		corral_set_err(err, -ENOMEM, "out of memory for the secrets");
		goto fail;
	}
	json_array_foreach(arr, i, o) {
		ss->n++;
		if (compile(&ss->v[i], o, err) < 0)
			goto fail;
		spelled_add(&ss->all, &ss->v[i]);
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
		for (size_t k = 0; k < ss->v[i].nforms; k++) {
			vault_free(ss->v[i].forms[k].s);
			vault_free(ss->v[i].forms[k].u);
		}
		free(ss->v[i].hosts);
	}
	free(ss->v);
	spelled_free(&ss->all);
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

/*
 * In the URL: only as the whole value of the secret's query parameter, as
 * the server reads the query: its parameters split at "&" from the first
 * "?" on.  A later "?" is a byte of the parameter before it: after
 * "?url=https://evil.test/?key=" the value would be url's, for a server
 * that fetches that URL to send on.
 */
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
	    (at - 2 - ql != q && *(at - 2 - ql) != '&'))
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

/*
 * The first spelling of a form of one of sp's values in t[from..n): its
 * start and end, and whose (an index in sp->v); false: none.  A byte no
 * spelling begins with costs one look in a table.
 */
static bool find_spelled(const struct spelled *sp, const char *t, size_t n, size_t from,
			 size_t *at, size_t *end, size_t *who)
{
	bool more = false;

	for (size_t p = spell_next(&sp->starts, t, n, from); p < n;
	     p = spell_next(&sp->starts, t, n, p + 1)) {
		size_t i = 0, which;

		/* a cheap look at two bytes first; then all words on one reading */
		while (i < sp->nw && !spell_maybe(&sp->w[i], t, n, p))
			i++;
		if (i == sp->nw || !(*end = spell_match(sp->w + i, sp->nw - i, t, n, p, &which,
							  &more)))
			continue;
		*at = p;
		*who = sp->who[i + which];
		return true;
	}
	return false;
}

/* Mask every spelling in t[0..n) (counted per value in seen, if given); how many. */
static size_t mask_spelled(const struct spelled *sp, char *t, size_t n, bool *seen)
{
	size_t from = 0, at, end, who, count = 0;

	while (find_spelled(sp, t, n, from, &at, &end, &who)) {
		memset(t + at, MASK_BYTE, end - at);
		if (seen)
			seen[who] = true;
		count++;
		from = end;
	}
	return count;
}

/* The first value spelled in p[0..n), and whose it is; NULL: none. */
static const struct secret *find_value(const struct secrets *ss, const char *p, size_t n)
{
	size_t at, end, who;

	return find_spelled(&ss->all, p, n, 0, &at, &end, &who) ? ss->all.v[who] : NULL;
}

static int refuse_value(const struct secret *s, const char *where, const char *host,
			char *why, size_t whylen)
{
	snprintf(why, whylen, "the value of secret %s in %s of a request to %.100s: "
		 "a value the sandbox should not know is never sent on", s->name, where, host);
	return -EACCES;
}

/*
 * A header a request to a secret's host goes without: what it asks for
 * would come back in a form the mask cannot read.  Accept-Encoding (a
 * compressed answer), Range and If-Range (a piece of one: a value cut at
 * the range's ends, or a few of its bytes alone, is no whole spelling, and
 * ranges at each offset give all of it back).  Their answer comes whole;
 * a piece sent anyway is cut off (httpresp.c).
 */
static bool dropped(const char *line, size_t n)
{
	static const char *const names[] = {
		"Accept-Encoding:", "Range:", "If-Range:",
		/* the draft's name, which Apache's httpd still reads */
		"Request-Range:",
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		size_t k = strlen(names[i]);

		if (n >= k && !strncasecmp(line, names[i], k))
			return true;
	}
	return false;
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
		} else if (identity && dropped(p, n)) {
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
	return ss->all.max > PLACEHOLDER_LEN ? ss->all.max : PLACEHOLDER_LEN;
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
	struct spelled bound;		/* the secrets that go to this host */
	bool *seen;			/* per bound secret: masked at least once */
	size_t held;			/* content bytes held at the last step's end */
	size_t guesses;			/* holds of GUESS_MIN or more that went no further */
};

/*
 * A hold of this many bytes or more that goes on unmasked (the bytes after
 * it spelled no value, or the answer ended) or that its connection left
 * waiting (secrets_mask_abandon) is counted as a guess: the agent learns
 * by the hold's delay that what it had echoed began a value.
 */
#define GUESS_MIN		8

struct secrets_mask *secrets_mask_new(const struct secrets *ss, const char *host,
				      uint16_t port)
{
	struct secrets_mask *m;

	errno = 0;
	if (!ss || !ss->n)
		return NULL;
	m = calloc(1, sizeof(*m));
	if (!m || !spelled_alloc(&m->bound, ss->n) ||
	    !(m->seen = calloc(ss->n, sizeof(*m->seen))))
		goto fail;
	for (size_t i = 0; i < ss->n; i++)
		if (host_ok(&ss->v[i], host, port))
			spelled_add(&m->bound, &ss->v[i]);
	if (m->bound.n)
		return m;
	errno = 0;
fail:
	if (m) {
		int e = errno;

		spelled_free(&m->bound);
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
	spelled_free(&m->bound);
	free(m->seen);
	free(m);
}

size_t secrets_redact(const struct secrets *ss, char *p, size_t n)
{
	return ss ? mask_spelled(&ss->all, p, n, NULL) : 0;
}

const char *secrets_value_in(const struct secrets *ss, const char *p, size_t n)
{
	const struct secret *s = ss && ss->n ? find_value(ss, p, n) : NULL;

	return s ? s->name : NULL;
}

bool secrets_bound(const struct secrets *ss, const char *host, uint16_t port)
{
	for (size_t i = 0; ss && i < ss->n; i++)
		if (host_ok(&ss->v[i], host, port))
			return true;
	return false;
}

/*
 * One pass over the buffer: a byte no spelling of a bound value begins
 * with costs a table look, one that may begins a try that most often ends
 * at the next byte.  A body that holds no value is left as it was.
 */
size_t secrets_mask_apply(struct secrets_mask *m, char *p, size_t n)
{
	return mask_spelled(&m->bound, p, n, m->seen);
}

/*
 * The longest tail of p[0..n) that a spelling of a form begins, and runs
 * on past: the leftmost start, in the last spelling's length, whose try
 * ran out of bytes rather than out of spellings.
 */
size_t secrets_mask_partial(const struct secrets_mask *m, const char *p, size_t n)
{
	const struct spelled *sp = &m->bound;

	size_t which;

	for (size_t at = spell_next(&sp->starts, p, n, n > sp->max ? n - sp->max : 0); at < n;
	     at = spell_next(&sp->starts, p, n, at + 1)) {
		bool more = false;

		/* a whole spelling was masked already: only one that runs on counts */
		spell_match(sp->w, sp->nw, p, n, at, &which, &more);
		if (more)
			return n - at;
	}
	return 0;
}

/*
 * The proxy's step (mask_relay), and the unit tests' and the fuzzer's:
 * a value whole in a chunk's extension goes to a client that reads the
 * bytes as they came, so those are masked as well as the content; and a
 * value's first bytes at the end of either are held for the next read.
 */
ssize_t secrets_mask_answer(struct secrets_mask *m, struct httpresp *r, char *buf,
			    size_t len, bool eof, size_t *rel)
{
	size_t n, masked, hold, partial = 0, held = m->held;
	char *content;
	bool framed;

	*rel = 0;
	if (!len)
		return 0;
	content = httpresp_content(r, buf, len, &n);
	if (!content)
		return -ENOMEM;
	masked = secrets_mask_apply(m, content, n);
	httpresp_content_back(r, buf, len, content);
	framed = content != buf || n != len;
	if (framed)
		masked += secrets_mask_apply(m, buf, len);
	if (eof) {
		*rel = len;
	} else {
		partial = secrets_mask_partial(m, content, n);
		*rel = httpresp_releasable(r, len, partial);
		hold = framed ? secrets_mask_partial(m, buf, len) : 0;
		if (hold && len - hold < *rel)
			*rel = len - hold > r->start ? len - hold : r->start;
	}
	/* what was held (at the buffer's start) goes on, and is no value */
	if (held >= GUESS_MIN && *rel && n && content[0] != MASK_BYTE)
		m->guesses++;
	m->held = partial && !r->in_head && *rel + partial <= len ? partial : 0;
	return masked;
}

void secrets_mask_abandon(struct secrets_mask *m)
{
	if (m->held >= GUESS_MIN)
		m->guesses++;
	m->held = 0;
}

size_t secrets_mask_take_guesses(struct secrets_mask *m)
{
	size_t n = m->guesses;

	m->guesses = 0;
	return n;
}

json_t *secrets_mask_names(const struct secrets_mask *m)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < m->bound.n; i++)
		if (m->seen[i])
			json_array_append_new(a, json_string(m->bound.v[i]->name));
	return a;
}
