/*
 * policy.c - what a sandbox may do: built-in defaults, JSON policy files,
 * and the command line's overrides, all checked before anything runs.
 *
 * Strict on purpose: a policy is a security boundary somebody wrote down,
 * and a typo ("memroy") that silently fell back to a default would be a
 * boundary nobody chose.  So unknown keys, wrong types and impossible
 * values are errors that say where (file:line:col), what (the dotted key),
 * why, and what was found.
 */
#include "internal.h"
#include "egress.h"
#include "jsonpos.h"
#include "tripwire.h"
#include "export.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <event2/util.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define KiB (UINT64_C(1) << 10)
#define MiB (UINT64_C(1) << 20)
#define GiB (UINT64_C(1) << 30)
#define TiB (UINT64_C(1) << 40)

#define POLICY_FILE_MAX		(1 * MiB)
#define ENV_NAME_MAX		255
#define ENV_VALUE_MAX		(32 * KiB)
#define MEMORY_MIN		(4 * MiB)
#define PIDS_MAX		4194304		/* the kernel's PID_MAX_LIMIT */
#define CPUS_MAX		1024.0
#define DISK_MIN		(1 * MiB)
#define DISK_MAX		(1 * TiB)
#define OUTPUT_MIN		(1 * KiB)
#define OUTPUT_MAX		(1 * GiB)
#define TIMEOUT_MAX_S		(30ULL * 24 * 3600)
#define TIMEOUT_MAX_MS		(TIMEOUT_MAX_S * 1000)
#define ABORT_COUNT_MAX		1000000000	/* counts in "abort" */

/* How much of an offending value an error message quotes. */
#define GOT_MAX			60

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

/*
 * s[0..n) as a JSON string literal, at most GOT_MAX bytes of it: the user
 * sees exactly which bytes were wrong, and control characters never reach
 * their terminal raw.  len must be at least GOT_MAX + 8.
 */
static void render_str(const char *s, size_t n, char *buf, size_t len)
{
	bool cut = false;
	size_t off = 0, i, m;
	char esc[8];

	if (len < GOT_MAX + 8) {
		if (len)
			buf[0] = '\0';
		return;
	}
	buf[off++] = '"';
	for (i = 0; i < n; i++) {
		unsigned char c = s[i];

		if (c == '"' || c == '\\')
			snprintf(esc, sizeof(esc), "\\%c", c);
		else if (c < 0x20 || c == 0x7f)
			snprintf(esc, sizeof(esc), "\\u%04x", c);
		else
			snprintf(esc, sizeof(esc), "%c", c);
		m = strlen(esc);
		if (off + m > GOT_MAX + 1) {
			cut = true;
			break;
		}
		memcpy(buf + off, esc, m);
		off += m;
	}
	/* never end on half a UTF-8 character */
	if (cut && ((unsigned char)s[i] & 0xc0) == 0x80) {
		while (off > 1 && ((unsigned char)buf[off - 1] & 0xc0) == 0x80)
			off--;
		if (off > 1)
			off--;
	}
	buf[off++] = '"';
	if (cut) {
		memcpy(buf + off, "...", 3);
		off += 3;
	}
	buf[off] = '\0';
}

static void render_got(const json_t *v, char *buf, size_t len)
{
	char *dump;

	if (json_is_string(v)) {
		render_str(json_string_value(v), json_string_length(v), buf, len);
		return;
	}
	dump = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	snprintf(buf, len, "%s", dump ? dump : "?");
	free(dump);
	truncate_got(buf, GOT_MAX);
}

/* ---- the loader: a policy being filled from one JSON document --------- */

/* Deepest path the schema has: env.set.NAME, network.allow[N]. */
#define LOADER_DEPTH 4

struct loader {
	const char *text;
	size_t len;
	const char *name;
	struct corral_policy *p;		/* a copy; swapped in on success */
	struct corral_err *err;
	struct jsonpos_step path[LOADER_DEPTH];
	size_t depth;
};

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
			render_str(s->key, strlen(s->key), part + !!i,
				   sizeof(part) - 1);
		}
		off += snprintf(buf + off, len - off, "%s", part);
	}
}

static int fail(struct loader *l, bool at_key, const json_t *got,
		const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* "NAME:LINE:COL: dotted.key: reason (got VALUE)" */
static int fail(struct loader *l, bool at_key, const json_t *got,
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

static int fail_nomem(struct loader *l)
{
	return corral_set_err(l->err, -ENOMEM, "%s: out of memory", l->name);
}

static int push_key(struct loader *l, const char *key)
{
	if (l->depth >= LOADER_DEPTH)
		return corral_set_err(l->err, -EOVERFLOW,
				      "%s: policy nests deeper than its schema",
				      l->name);
	l->path[l->depth++] = (struct jsonpos_step){ .key = key };
	return 0;
}

static int push_index(struct loader *l, size_t index)
{
	if (l->depth >= LOADER_DEPTH)
		return corral_set_err(l->err, -EOVERFLOW,
				      "%s: policy nests deeper than its schema",
				      l->name);
	l->path[l->depth++] = (struct jsonpos_step){ .index = index };
	return 0;
}

static void pop(struct loader *l)
{
	l->depth--;
}

/* A string with no NUL inside: C code downstream would silently cut it. */
static int get_string(struct loader *l, const json_t *v, const char **s,
		      size_t *n)
{
	if (!json_is_string(v))
		return fail(l, false, v, "expected a string");
	*s = json_string_value(v);
	*n = json_string_length(v);
	if (strlen(*s) != *n)
		return fail(l, false, v, "contains a NUL byte");
	return 0;
}

/* ---- sizes and durations --------------------------------------------- */

enum scaled { SCALED_OK, SCALED_BAD, SCALED_NEGATIVE, SCALED_TOO_LARGE };

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static char lower(char c)
{
	return (c >= 'A' && c <= 'Z') ? c - 'A' + 'a' : c;
}

/* "", "B", and K/M/G/T with an optional "i" and an optional "B". */
static int size_suffix(const char *s, uint64_t *mult)
{
	static const char letters[] = "kmgt";
	const char *l;

	*mult = 1;
	if (!*s)
		return 0;
	if (lower(*s) == 'b')
		return s[1] ? -EINVAL : 0;
	l = memchr(letters, lower(*s), sizeof(letters) - 1);
	if (!l)
		return -EINVAL;
	*mult = UINT64_C(1) << (10 * (l - letters + 1));
	s++;
	if (lower(*s) == 'i')
		s++;
	if (lower(*s) == 'b')
		s++;
	return *s ? -EINVAL : 0;
}

/* A bare number is seconds; the result is in milliseconds. */
static int duration_suffix(const char *s, uint64_t *mult)
{
	static const struct {
		const char *name;
		uint64_t ms;
	} units[] = {
		{ "", 1000 }, { "ms", 1 }, { "s", 1000 }, { "m", 60 * 1000 },
		{ "h", 3600 * 1000 }, { "d", 24 * 3600 * 1000 },
	};
	size_t i;

	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (!strcasecmp(s, units[i].name)) {
			*mult = units[i].ms;
			return 0;
		}
	}
	return -EINVAL;
}

/*
 * DIGITS[.DIGITS]SUFFIX -> value * unit, in exact integer arithmetic (so
 * "1.1G" is the same byte count on every machine) and rounded up (so a
 * non-zero limit never becomes 0, which means "no limit").
 */
static enum scaled parse_scaled(const char *s,
				int (*suffix)(const char *, uint64_t *),
				uint64_t *out)
{
	uint64_t whole = 0, frac = 0, mult, v;
	const char *digits = NULL;
	bool too_large = false, inexact = false;
	size_t nfrac = 0, i;

	if (!s)
		return SCALED_BAD;
	if (s[0] == '-' && is_digit(s[1]))
		return SCALED_NEGATIVE;
	if (!is_digit(*s))
		return SCALED_BAD;
	for (; is_digit(*s); s++)
		if (__builtin_mul_overflow(whole, 10, &whole) ||
		    __builtin_add_overflow(whole, *s - '0', &whole))
			too_large = true;
	if (*s == '.') {
		digits = ++s;
		while (is_digit(*s))
			s++;
		nfrac = s - digits;
		if (!nfrac)
			return SCALED_BAD;
	}
	if (suffix(s, &mult))
		return SCALED_BAD;
	if (too_large)
		return SCALED_TOO_LARGE;

	/*
	 * 0.d1d2...dn * mult, from the last digit back: r = (d * mult + r) / 10.
	 * Flooring each step floors the whole; a remainder anywhere means
	 * the exact result had a fraction, so round up once at the end.
	 */
	for (i = nfrac; i-- > 0;) {
		uint64_t t = (uint64_t)(digits[i] - '0') * mult + frac;

		if (t % 10)
			inexact = true;
		frac = t / 10;
	}
	frac += inexact;
	if (__builtin_mul_overflow(whole, mult, &v) ||
	    __builtin_add_overflow(v, frac, &v))
		return SCALED_TOO_LARGE;
	*out = v;
	return SCALED_OK;
}

static const char *size_problem(enum scaled r)
{
	switch (r) {
	case SCALED_OK:
		return NULL;
	case SCALED_NEGATIVE:
		return "a size cannot be negative";
	case SCALED_TOO_LARGE:
		return "too large, sizes end at 16 EiB";
	default:
		return "not a size, expected a number with an optional K/M/G/T suffix";
	}
}

static const char *duration_problem(enum scaled r)
{
	switch (r) {
	case SCALED_OK:
		return NULL;
	case SCALED_NEGATIVE:
		return "a duration cannot be negative";
	case SCALED_TOO_LARGE:
		return "too large";
	default:
		return "not a duration, expected a number with an optional ms/s/m/h/d suffix";
	}
}

int corral_parse_size(const char *s, uint64_t *bytes, struct corral_err *err)
{
	const char *why = size_problem(parse_scaled(s, size_suffix, bytes));
	char got[GOT_MAX + 16];

	if (!why)
		return 0;
	render_str(s ? s : "", s ? strlen(s) : 0, got, sizeof(got));
	return corral_set_err(err, -EINVAL, "%s (got %s)", why, got);
}

int corral_parse_duration(const char *s, uint64_t *ms, struct corral_err *err)
{
	const char *why = duration_problem(parse_scaled(s, duration_suffix, ms));
	char got[GOT_MAX + 16];

	if (!why)
		return 0;
	render_str(s ? s : "", s ? strlen(s) : 0, got, sizeof(got));
	return corral_set_err(err, -EINVAL, "%s (got %s)", why, got);
}

void corral_format_size(uint64_t bytes, char *buf, size_t len)
{
	static const char *const units[] = {
		"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB",
	};
	unsigned u = 0;
	double v;

	if (!buf || !len)
		return;
	while (u + 1 < sizeof(units) / sizeof(units[0]) &&
	       bytes >> (10 * (u + 1)))
		u++;
	if (!(bytes & ((UINT64_C(1) << (10 * u)) - 1))) {
		snprintf(buf, len, "%" PRIu64 " %s", bytes >> (10 * u), units[u]);
		return;
	}
	v = (double)bytes / (double)(UINT64_C(1) << (10 * u));
	/* 1048575 bytes is "1.0 MiB", not "1024.0 KiB" */
	if (v >= 1023.95 && u + 1 < sizeof(units) / sizeof(units[0])) {
		v /= 1024;
		u++;
	}
	snprintf(buf, len, "%.1f %s", v, units[u]);
}

/* ---- paths and binds ------------------------------------------------- */

/*
 * Collapse "//", drop "." and a trailing "/".  ".." is refused, not
 * resolved: a lexical ".." can disagree with the kernel's once symlinks
 * are involved, and a policy never needs to climb.  what names the path in
 * the reason written to why.
 */
static int normalise_path(const char *in, size_t n, const char *what,
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

/* Where the sandbox keeps its own machinery: a bind may not cover it. */
static const char *const reserved_dst[] = {
	"/proc", "/sys", "/dev", "/oldroot", "/.corral",
};

static bool path_under(const char *path, const char *top)
{
	size_t n = strlen(top);

	return !strncmp(path, top, n) && (path[n] == '\0' || path[n] == '/');
}

static int check_dst(const char *dst, char *why, size_t whylen)
{
	size_t i;

	if (!strcmp(dst, "/"))
		return snprintf(why, whylen,
				"sandbox path cannot be \"/\", the sandbox's own root"),
		       -EINVAL;
	for (i = 0; i < sizeof(reserved_dst) / sizeof(reserved_dst[0]); i++)
		if (path_under(dst, reserved_dst[i]))
			return snprintf(why, whylen,
					"sandbox path cannot be %s or lie under it",
					reserved_dst[i]), -EINVAL;
	return 0;
}

/* "HOST" or "HOST:PATH", PATH defaulting to HOST. */
static int parse_bind(const char *spec, size_t n, struct corral_bind *b,
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
	if (colon && memchr(colon + 1, ':', n - (colon + 1 - spec)))
		return snprintf(why, whylen,
				"more than one ':', expected HOST or HOST:PATH"),
		       -EINVAL;
	hlen = colon ? (size_t)(colon - spec) : n;
	r = normalise_path(spec, hlen, "host path", &b->src, why, whylen);
	if (r)
		return r;
	if (colon)
		r = normalise_path(colon + 1, n - hlen - 1, "sandbox path",
				   &b->dst, why, whylen);
	else
		r = (b->dst = strdup(b->src)) ? 0 : -ENOMEM;
	if (!r)
		r = check_dst(b->dst, why, whylen);
	if (r) {
		free(b->src);
		free(b->dst);
		*b = (struct corral_bind){ 0 };
	}
	return r;
}

/* ---- growing the policy's arrays ------------------------------------- */

static int bind_append(struct corral_policy *p, struct corral_bind *b)
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
static int pair_put(struct corral_env **pairs, size_t *n, const char *name,
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
static int env_put(struct corral_policy *p, const char *name, size_t nlen,
		   const char *value, size_t vlen)
{
	return pair_put(&p->env, &p->nenv, name, nlen, value, vlen);
}

/* Append s[0..n) to a list of strings, once. */
static int strv_put(char ***v, size_t *count, const char *s, size_t n)
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

static int pass_put(struct corral_policy *p, const char *name)
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

static const char *env_name_problem(const char *s, size_t n)
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

		if (!letter && !(i > 0 && is_digit(c)))
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

static int hold_rule_put(struct corral_export_policy *e, const char *path,
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
		.output_bytes = 1 * MiB,
		.net = CORRAL_NET_NONE,
		/* in proxy mode, also programs that ignore proxy variables */
		.net_transparent = true,
		/*
		 * No abort criteria; when a policy names some, a halted
		 * sandbox is killed: a one-shot run has no one to hold it for.
		 */
		.abort = { .kill = true },
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
	for (i = 0; i < p->nbinds; i++) {
		free(p->binds[i].src);
		free(p->binds[i].dst);
	}
	free(p->binds);
	pairs_free(p->env, p->nenv);
	strv_free(p->env_pass, p->nenv_pass);
	strv_free(p->net_allow, p->nnet_allow);
	strv_free(p->net_deny, p->nnet_deny);
	pairs_free(p->net_hosts, p->nnet_hosts);
	free(p->net_resolver);
	strv_free(p->abort.tripwires, p->abort.ntripwires);
	hold_rules_free(p->export.hold, p->export.nhold);
	/* all zero: a second free, or init again, is safe */
	*p = (struct corral_policy){ 0 };
}

/* A deep copy, so a load can fail half-way and leave the original alone. */
static int policy_copy(struct corral_policy *dst,
		       const struct corral_policy *src)
{
	struct corral_bind b;
	size_t i;

	*dst = *src;
	dst->workspace = NULL;
	dst->binds = NULL;
	dst->nbinds = 0;
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
	dst->abort.tripwires = NULL;
	dst->abort.ntripwires = 0;
	dst->export.hold = NULL;
	dst->export.nhold = 0;
	if (src->workspace && !(dst->workspace = strdup(src->workspace)))
		goto nomem;
	if (src->net_resolver && !(dst->net_resolver = strdup(src->net_resolver)))
		goto nomem;
	for (i = 0; i < src->nbinds; i++) {
		b.writable = src->binds[i].writable;
		b.src = strdup(src->binds[i].src);
		b.dst = strdup(src->binds[i].dst);
		if (!b.src || !b.dst || bind_append(dst, &b)) {
			free(b.src);
			free(b.dst);
			goto nomem;
		}
	}
	for (i = 0; i < src->nenv; i++)
		if (env_put(dst, src->env[i].name, strlen(src->env[i].name),
			    src->env[i].value, strlen(src->env[i].value)))
			goto nomem;
	for (i = 0; i < src->nenv_pass; i++)
		if (pass_put(dst, src->env_pass[i]))
			goto nomem;
	for (i = 0; i < src->nnet_allow; i++)
		if (strv_put(&dst->net_allow, &dst->nnet_allow, src->net_allow[i],
			     strlen(src->net_allow[i])))
			goto nomem;
	for (i = 0; i < src->nnet_deny; i++)
		if (strv_put(&dst->net_deny, &dst->nnet_deny, src->net_deny[i],
			     strlen(src->net_deny[i])))
			goto nomem;
	for (i = 0; i < src->nnet_hosts; i++)
		if (pair_put(&dst->net_hosts, &dst->nnet_hosts,
			     src->net_hosts[i].name, strlen(src->net_hosts[i].name),
			     src->net_hosts[i].value,
			     strlen(src->net_hosts[i].value)))
			goto nomem;
	for (i = 0; i < src->abort.ntripwires; i++)
		if (strv_put(&dst->abort.tripwires, &dst->abort.ntripwires,
			     src->abort.tripwires[i],
			     strlen(src->abort.tripwires[i])))
			goto nomem;
	for (i = 0; i < src->export.nhold; i++)
		if (hold_rule_put(&dst->export, src->export.hold[i].path,
				  src->export.hold[i].check))
			goto nomem;
	return 0;
nomem:
	corral_policy_free(dst);
	return -ENOMEM;
}

/* ---- overrides from the command line --------------------------------- */

static int fail_arg(struct corral_err *err, int code, const char *why,
		    const char *arg, size_t n)
{
	char got[GOT_MAX + 16];

	if (code == -ENOMEM)
		return corral_set_err(err, code, "out of memory");
	render_str(arg, n, got, sizeof(got));
	return corral_set_err(err, code, "%s (got %s)", why, got);
}

int corral_policy_add_bind(struct corral_policy *p, const char *spec,
			   bool writable, struct corral_err *err)
{
	struct corral_bind b;
	char why[128];
	size_t n = spec ? strlen(spec) : 0;
	int r;

	r = parse_bind(spec ? spec : "", n, &b, why, sizeof(why));
	if (r)
		return fail_arg(err, r, why, spec ? spec : "", n);
	b.writable = writable;
	r = bind_append(p, &b);
	if (r) {
		free(b.src);
		free(b.dst);
		return corral_set_err(err, r, "out of memory");
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
	why = env_name_problem(a, eq - a);
	if (!why && strlen(eq + 1) > ENV_VALUE_MAX)
		why = "environment variable value is longer than 32 KiB";
	if (why)
		return fail_arg(err, -EINVAL, why, a, n);
	r = env_put(p, a, eq - a, eq + 1, strlen(eq + 1));
	return r ? corral_set_err(err, r, "out of memory") : 0;
}

int corral_policy_pass_env(struct corral_policy *p, const char *name,
			   struct corral_err *err)
{
	const char *s = name ? name : "";
	const char *why = env_name_problem(s, strlen(s));
	int r;

	if (why)
		return fail_arg(err, -EINVAL, why, s, strlen(s));
	r = pass_put(p, s);
	return r ? corral_set_err(err, r, "out of memory") : 0;
}

int corral_policy_set_workspace(struct corral_policy *p, const char *dir,
				struct corral_err *err)
{
	const char *s = dir ? dir : "";
	char why[128], *ws;
	int r;

	r = normalise_path(s, strlen(s), "workspace", &ws, why, sizeof(why));
	if (r)
		return fail_arg(err, r, why, s, strlen(s));
	free(p->workspace);
	p->workspace = ws;
	return 0;
}

static int net_mode(const char *s, enum corral_net_mode *mode)
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

	if (net_mode(s, &p->net))
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
	r = strv_put(v, n, s, len);
	return r ? corral_set_err(err, r, "out of memory") : 0;
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

/* ---- the JSON schema ------------------------------------------------- */

struct field {
	const char *key;
	int (*apply)(struct loader *l, json_t *v);
};

static int unknown_key(struct loader *l, json_t *v, const struct field *fields)
{
	char known[160];
	size_t off = 0;

	known[0] = '\0';
	for (; fields->key && off < sizeof(known); fields++)
		off += snprintf(known + off, sizeof(known) - off, "%s%s",
				off ? ", " : "", fields->key);
	return fail(l, true, v, "unknown key, expected one of: %s", known);
}

static int apply_fields(struct loader *l, json_t *obj,
			const struct field *fields)
{
	const struct field *f;
	const char *key;
	json_t *v;
	int r;

	if (!json_is_object(obj))
		return fail(l, false, obj, "expected an object");
	json_object_foreach(obj, key, v) {
		for (f = fields; f->key && strcmp(f->key, key); f++)
			;
		r = push_key(l, key);
		if (r)
			return r;
		r = f->key ? f->apply(l, v) : unknown_key(l, v, fields);
		pop(l);
		if (r)
			return r;
	}
	return 0;
}

static int apply_description(struct loader *l, json_t *v)
{
	const char *s;
	size_t n;

	return get_string(l, v, &s, &n);
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
		return fail(l, false, v, "expected an absolute path or null");
	r = get_string(l, v, &s, &n);
	if (r)
		return r;
	r = normalise_path(s, n, "workspace", &ws, why, sizeof(why));
	if (r == -ENOMEM)
		return fail_nomem(l);
	if (r)
		return fail(l, false, v, "%s", why);
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
		return fail(l, false, arr,
			    "expected an array of \"HOST[:PATH]\" strings");
	json_array_foreach(arr, i, v) {
		r = push_index(l, i);
		if (r)
			return r;
		r = get_string(l, v, &s, &n);
		if (!r) {
			r = parse_bind(s, n, &b, why, sizeof(why));
			if (r == -ENOMEM)
				r = fail_nomem(l);
			else if (r)
				r = fail(l, false, v, "%s", why);
		}
		if (!r) {
			b.writable = writable;
			if (bind_append(l->p, &b)) {
				free(b.src);
				free(b.dst);
				r = fail_nomem(l);
			}
		}
		pop(l);
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

static const struct field filesystem_fields[] = {
	{ "workspace", apply_workspace },
	{ "ro", apply_ro },
	{ "rw", apply_rw },
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
			return fail(l, false, v, "a size cannot be negative");
		*bytes = json_integer_value(v);
		return 0;
	}
	if (!json_is_string(v))
		return fail(l, false, v, unlimited ?
			    "expected a size such as \"512M\", a number of bytes, or \"unlimited\"" :
			    "expected a size such as \"512M\" or a number of bytes");
	r = get_string(l, v, &s, &n);
	if (r)
		return r;
	if (unlimited && !strcmp(s, "unlimited")) {
		*bytes = 0;
		return 0;
	}
	why = size_problem(parse_scaled(s, size_suffix, bytes));
	return why ? fail(l, false, v, "%s", why) : 0;
}

static int check_size_range(struct loader *l, json_t *v, uint64_t b,
			    uint64_t min, uint64_t max)
{
	char lim[32];

	if (b < min) {
		corral_format_size(min, lim, sizeof(lim));
		return fail(l, false, v, "too small, the minimum is %s", lim);
	}
	if (b > max) {
		corral_format_size(max, lim, sizeof(lim));
		return fail(l, false, v, "too large, the maximum is %s", lim);
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
		return fail(l, false, v,
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
		return fail(l, false, v,
			    "expected an integer from 1 to %d, or 0 or \"unlimited\"",
			    PIDS_MAX);
	n = json_integer_value(v);
	if (n < 0)
		return fail(l, false, v, "cannot be negative");
	if (n > PIDS_MAX)
		return fail(l, false, v, "too large, the maximum is %d",
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
		return fail(l, false, v,
			    "expected a number of CPUs such as 1.5, or 0 or \"unlimited\"");
	n = json_number_value(v);
	if (n < 0)
		return fail(l, false, v, "cannot be negative");
	if (n > CPUS_MAX)
		return fail(l, false, v, "too large, the maximum is %g",
			    CPUS_MAX);
	/* The kernel refuses a CFS quota under 1 ms per 100 ms period. */
	if (n > 0 && n < 0.01)
		return fail(l, false, v, "too small, the minimum is 0.01 (or 0 for no limit)");
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
		return fail(l, false, v, "must be more than 0, %s", what);
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
		r = get_string(l, v, &s, &n);
		if (r)
			return r;
		if (!strcmp(s, "none")) {
			ms = 0;
		} else {
			why = duration_problem(parse_scaled(s, duration_suffix, &ms));
			if (why)
				return fail(l, false, v, "%s", why);
		}
	} else if (json_is_number(v)) {
		sec = json_number_value(v);
		if (sec < 0)
			return fail(l, false, v, "a duration cannot be negative");
		if (sec > TIMEOUT_MAX_S)
			return fail(l, false, v, "too long, the maximum is 30 days");
		ms = (uint64_t)(sec * 1000);
		if ((double)ms < sec * 1000)
			ms++;
	} else {
		return fail(l, false, v,
			    "expected a duration such as \"30s\", a number of seconds, or \"none\"");
	}
	if (ms > TIMEOUT_MAX_MS)
		return fail(l, false, v, "too long, the maximum is 30 days");
	*out = ms;
	return 0;
}

static int apply_timeout(struct loader *l, json_t *v)
{
	return get_duration(l, v, &l->p->timeout_ms);
}

static const struct field limits_fields[] = {
	{ "memory", apply_memory },
	{ "pids", apply_pids },
	{ "cpus", apply_cpus },
	{ "disk", apply_disk },
	{ "timeout", apply_timeout },
	{ "output", apply_output },
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

	why = env_name_problem(name, strlen(name));
	if (why)
		return fail(l, true, v, "%s", why);
	r = get_string(l, v, &s, &n);
	if (r)
		return r;
	if (n > ENV_VALUE_MAX)
		return fail(l, false, v, "longer than 32 KiB");
	return env_put(l->p, name, strlen(name), s, n) ? fail_nomem(l) : 0;
}

/* An object of "key": value pairs, each applied by fn under its own key. */
static int apply_pairs(struct loader *l, json_t *obj, const char *expected,
		       int (*fn)(struct loader *l, const char *key, json_t *v))
{
	const char *key;
	json_t *v;
	int r;

	if (!json_is_object(obj))
		return fail(l, false, obj, "expected an object of %s pairs", expected);
	json_object_foreach(obj, key, v) {
		r = push_key(l, key);
		if (r)
			return r;
		r = fn(l, key, v);
		pop(l);
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
		return fail(l, false, arr,
			    "expected an array of environment variable names");
	json_array_foreach(arr, i, v) {
		r = push_index(l, i);
		if (r)
			return r;
		r = get_string(l, v, &s, &n);
		if (!r && (why = env_name_problem(s, n)))
			r = fail(l, false, v, "%s", why);
		if (!r && pass_put(l->p, s))
			r = fail_nomem(l);
		pop(l);
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

	r = get_string(l, v, &s, &n);
	if (r)
		return r;
	if (net_mode(s, &l->p->net))
		return fail(l, false, v,
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
		return fail(l, false, arr,
			    "expected an array of patterns such as \"example.com\", \"*.example.com:443\" or \"10.0.0.0/8\"");
	json_array_foreach(arr, i, v) {
		r = push_index(l, i);
		if (r)
			return r;
		r = get_string(l, v, &s, &n);
		if (!r && egress_pattern_parsen(s, n, &ep, allow, why,
						 sizeof(why)))
			r = fail(l, false, v, "%s", why);
		if (!r && strv_put(list, count, s, n))
			r = fail_nomem(l);
		pop(l);
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
		return fail(l, false, v, "expected true or false");
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
			return fail_nomem(l);
		r = fail(l, true, key, "%s", why);
		json_decref(key);
		return r;
	}
	r = get_string(l, v, &s, &n);
	if (r)
		return r;
	if (egress_addr_canon(s, n, caddr, why, sizeof(why)))
		return fail(l, false, v, "%s", why);
	if (pair_put(&l->p->net_hosts, &l->p->nnet_hosts, cname, strlen(cname),
		     caddr, strlen(caddr)))
		return fail_nomem(l);
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

	r = get_string(l, v, &s, &n);
	if (r)
		return r;
	if (evutil_parse_sockaddr_port(s, (struct sockaddr *)&ss, &sslen) < 0)
		return fail(l, false, v,
			    "expected an address such as \"127.0.0.1:5353\" or \"[::1]:53\"");
	copy = strndup(s, n);
	if (!copy)
		return fail_nomem(l);
	free(l->p->net_resolver);
	l->p->net_resolver = copy;
	return 0;
}

static const struct field network_fields[] = {
	{ "mode", apply_net_mode },
	{ "allow", apply_net_allow },
	{ "deny", apply_net_deny },
	{ "transparent", apply_net_transparent },
	{ "hosts", apply_net_hosts },
	{ "resolver", apply_net_resolver },
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
		return fail(l, false, v,
			    "expected an integer from 0 to %d (0: no such criterion)",
			    ABORT_COUNT_MAX);
	n = json_integer_value(v);
	if (n < 0)
		return fail(l, false, v, "cannot be negative");
	if (n > ABORT_COUNT_MAX)
		return fail(l, false, v, "too large, the maximum is %d",
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
	return get_count(l, v, &l->p->abort.max_distinct_denied);
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

	r = get_string(l, v, &s, &n);
	if (r)
		return r;
	if (!strcmp(s, "kill"))
		l->p->abort.kill = true;
	else if (!strcmp(s, "freeze"))
		l->p->abort.kill = false;
	else
		return fail(l, false, v,
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
		if (path_under(path, tripwire_tops[i]))
			under = true;
	}
	if (!under)
		return "a tripwire must lie under /home/agent, /tmp or /workspace, where the sandbox's writable files are";
	for (i = 0; i < a->ntripwires; i++) {
		if (path_under(path, a->tripwires[i])) {
			snprintf(why, whylen, "lies under the tripwire %.120s, which is a file",
				 a->tripwires[i]);
			return why;
		}
		if (path_under(a->tripwires[i], path)) {
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

	r = get_string(l, v, &s, &n);
	if (r)
		return r;
	if (n > TRIPWIRE_PATH_MAX)
		return fail(l, false, v, "tripwire path is longer than %d bytes",
			    TRIPWIRE_PATH_MAX);
	r = normalise_path(s, n, "tripwire path", &path, reason, sizeof(reason));
	if (r == -ENOMEM)
		return fail_nomem(l);
	if (r)
		return fail(l, false, v, "%s", reason);
	for (i = 0; i < a->ntripwires; i++)
		if (!strcmp(a->tripwires[i], path))
			goto out;		/* named twice: planted once */
	problem = tripwire_problem(a, path, why, sizeof(why));
	if (problem)
		r = fail(l, false, v, "%s", problem);
	else if (a->ntripwires >= TRIPWIRE_MAX_FILES)
		r = fail(l, false, v, "too many tripwires, at most %d", TRIPWIRE_MAX_FILES);
	else if (strv_put(&a->tripwires, &a->ntripwires, path, strlen(path)))
		r = fail_nomem(l);
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
		return fail(l, false, arr,
			    "expected an array of absolute paths such as \"/home/agent/.aws/credentials\"");
	json_array_foreach(arr, i, v) {
		r = push_index(l, i);
		if (r)
			return r;
		r = apply_tripwire(l, v);
		pop(l);
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
	int r = push_key(l, key);

	if (r)
		return r;
	r = fail(l, false, json_object_get(obj, key), "%s", why);
	pop(l);
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
				r = push_key(l, key);
				if (!r)
					r = fail(l, true, x, "unknown key, expected one of: path, check");
				pop(l);
				return r;
			}
		}
		pv = json_object_get(v, "path");
		cv = json_object_get(v, "check");
		if (!pv)
			return fail(l, false, v, "a rule needs \"path\"");
	}
	r = get_string(l, pv, &path, &n);
	if (!r && cv)
		r = get_string(l, cv, &name, &n);
	if (r)
		return r;
	if (!*path || path[0] == '/')
		return fail(l, false, pv, "a glob relative to the workspace, such as \".envrc\" or \"**/.git/hooks/**\"");
	if (hold_check_parse(name, &check) < 0)
		return fail(l, false, cv, "unknown check, expected always, git-config, git-bare-config, gitattributes, gitmodules, vscode-tasks, vscode-settings or vscode-workspace");
	return hold_rule_put(&l->p->export, path, name) ? fail_nomem(l) : 0;
}

static int apply_export_hold(struct loader *l, json_t *arr)
{
	size_t i;
	json_t *v;
	int r;

	if (!json_is_array(arr))
		return fail(l, false, arr, "expected an array of globs or {\"path\", \"check\"} rules");
	json_array_foreach(arr, i, v) {
		r = push_index(l, i);
		if (r)
			return r;
		r = apply_hold_rule(l, v);
		pop(l);
		if (r)
			return r;
	}
	return 0;
}

static int apply_export_max_files(struct loader *l, json_t *v)
{
	if (!json_is_integer(v) || json_integer_value(v) < 1)
		return fail(l, false, v, "expected a count of entries, at least 1");
	l->p->export.max_files = json_integer_value(v);
	return 0;
}

static int apply_export_max_bytes(struct loader *l, json_t *v)
{
	uint64_t b;
	int r = get_size(l, v, false, &b);

	if (!r && b == 0)
		return fail(l, false, v, "must be more than 0");
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

static const struct field top_fields[] = {
	{ "description", apply_description },
	{ "filesystem", apply_filesystem },
	{ "limits", apply_limits },
	{ "env", apply_env },
	{ "network", apply_network },
	{ "abort", apply_abort },
	{ "export", apply_export },
	{ NULL, NULL },
};

/* ---- loading --------------------------------------------------------- */

static int syntax_error(struct loader *l, json_error_t *je)
{
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
		return corral_set_err(l->err, -EINVAL, "%s: %s", l->name,
				      je->text);
	return corral_set_err(l->err, -EINVAL, "%s:%d:%d: %s", l->name,
			      je->line, je->column, je->text);
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
		return corral_set_err(err, -ENOMEM, "out of memory");
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

int corral_policy_load_string(struct corral_policy *p, const char *text,
			      size_t len, const char *name,
			      struct corral_err *err)
{
	struct corral_policy tmp;
	struct loader l = {
		.text = text ? text : "",
		.len = text ? len : 0,
		.name = name ? name : "policy",
		.p = &tmp,
		.err = err,
	};
	json_error_t je;
	json_t *root;
	int r;

	/*
	 * JSON_ALLOW_NUL: a "\u0000" then reaches get_string(), which says
	 * which key it is in, instead of a bare jansson syntax error.
	 */
	root = json_loadb(l.text, l.len,
			  JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
	if (!root)
		return syntax_error(&l, &je);
	r = policy_copy(&tmp, p);
	if (r) {
		json_decref(root);
		return fail_nomem(&l);
	}
	r = apply_fields(&l, root, top_fields);
	json_decref(root);
	if (r) {
		corral_policy_free(&tmp);
		return r;
	}
	corral_policy_free(p);
	*p = tmp;
	return 0;
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
			return corral_set_err(err, r, "%s: %s", path,
					      strerror(-r));
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
		return corral_set_err(err, r, "%s: %s", path, strerror(-r));
	}
	if (fstat(fd, &st) < 0) {
		r = -errno;
		corral_set_err(err, r, "%s: %s", path, strerror(-r));
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
