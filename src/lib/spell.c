/*
 * spell.c - a string as the encoders a server passes it through spell it
 * (spell.h).
 *
 * The text is read, not compared with a list of writings: what a position
 * may say (its byte, and if an escape begins there, the byte or character
 * the escape stands for, and where it ends) is decoded once, and each
 * word's unit is checked against that.  A try at one start follows every
 * reading at once: the ends of unit i's spellings are the starts of unit
 * i + 1's (a set: "&" raw and "&amp;" both spell "&", so both go on), and
 * the try ends when the set is empty.  Leading zeros and either case of
 * hex cost nothing more.
 */
#include "spell.h"

#include <string.h>

/* the ends one unit's spellings reach from one start; more are dropped */
#define ENDS_MAX	16
/* what one position of a text may read as; more are dropped */
#define TOKS_MAX	16
/* an escape's first byte, itself escaped: at most "&#x0000005C;" */
#define INTRO_MAX	12
/* how deep escapes nest: an escape whose first byte is escaped once */
#define NEST		1

struct ends {
	size_t at[ENDS_MAX];
	size_t n;
	bool more;		/* a spelling ran on past the text's end */
};

/* What the text at one position says: a byte, or a code point, and its end. */
struct toks {
	struct tok {
		uint32_t v;
		bool cp;	/* v is a code point (an escape of one), not a byte */
		size_t end;
	} v[TOKS_MAX];
	size_t n;
	bool more;		/* an escape there runs on past the text's end */
};

/* HTML's named references for the characters a token may hold */
static const struct {
	uint32_t cp;
	const char *name;	/* with its ';' */
	size_t len;
} named[] = {
#define N(c, s) { c, s, sizeof(s) - 1 }
	N('!', "excl;"), N('"', "quot;"), N('"', "QUOT;"), N('#', "num;"),
	N('$', "dollar;"), N('%', "percnt;"), N('&', "amp;"), N('&', "AMP;"),
	N('\'', "apos;"), N('(', "lpar;"), N(')', "rpar;"), N('*', "ast;"),
	N('*', "midast;"), N('+', "plus;"), N(',', "comma;"), N('.', "period;"),
	N('/', "sol;"), N(':', "colon;"), N(';', "semi;"), N('<', "lt;"),
	N('<', "LT;"), N('=', "equals;"), N('>', "gt;"), N('>', "GT;"),
	N('?', "quest;"), N('@', "commat;"), N('[', "lsqb;"), N('[', "lbrack;"),
	N('\\', "bsol;"), N(']', "rsqb;"), N(']', "rbrack;"), N('^', "Hat;"),
	N('_', "lowbar;"), N('_', "UnderBar;"), N('`', "grave;"),
	N('`', "DiacriticalGrave;"), N('{', "lcub;"), N('{', "lbrace;"),
	N('|', "verbar;"), N('|', "vert;"), N('|', "VerticalLine;"),
	N('}', "rcub;"), N('}', "rbrace;"),
#undef N
};

static void add(struct ends *e, size_t at)
{
	for (size_t i = 0; i < e->n; i++)
		if (e->at[i] == at)
			return;
	if (e->n < ENDS_MAX)
		e->at[e->n++] = at;
}

static void put(struct toks *o, uint32_t v, bool cp, size_t end)
{
	if (o->n < TOKS_MAX)
		o->v[o->n++] = (struct tok){ v, cp, end };
}

static int digit(unsigned char c, unsigned base)
{
	if (c >= '0' && c <= '9')
		return (unsigned)(c - '0') < base ? c - '0' : -1;
	if (base == 16 && c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (base == 16 && c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * min to max digits at t[at..), then `term` (0: none): where they end, 0:
 * not so; their value in *v.  Text that ends among them may go on (*more).
 */
static size_t number(const char *t, size_t n, size_t at, unsigned base, size_t min,
		     size_t max, char term, uint32_t *v, bool *more)
{
	size_t k = 0;
	int d;

	*v = 0;
	for (; k < max; k++) {
		if (at + k >= n) {
			*more = true;
			return 0;
		}
		if ((d = digit(t[at + k], base)) < 0)
			break;
		*v = *v * base + d;
	}
	if (k < min)
		return 0;
	if (!term)
		return at + k;
	if (at + k >= n) {
		*more = true;
		return 0;
	}
	return t[at + k] == term ? at + k + 1 : 0;
}

static bool introducer(uint32_t c)
{
	return c == '%' || c == '\\' || c == '&';
}

static void decode(const char *t, size_t n, size_t p, int nest, struct toks *o);

/* An escape's first byte at t[p]: raw, or while nest allows, escaped itself. */
static void intros(const char *t, size_t n, size_t p, int nest, struct toks *o)
{
	struct toks d;

	if (p >= n) {
		o->more = true;
		return;
	}
	if (introducer((unsigned char)t[p]))
		put(o, (unsigned char)t[p], false, p + 1);
	if (nest <= 0 || !introducer((unsigned char)t[p]))
		return;
	d.n = 0;
	d.more = false;
	decode(t, n, p, nest - 1, &d);
	o->more |= d.more;
	for (size_t i = 0; i < d.n; i++)
		if (d.v[i].end > p + 1 && introducer(d.v[i].v))
			put(o, d.v[i].v, false, d.v[i].end);
}

/* a byte a backslash before it stands for as it is: a space, ASCII punctuation */
static bool punct(uint32_t c)
{
	return (c >= ' ' && c <= '/') || (c >= ':' && c <= '@') || (c >= '[' && c <= '`') ||
	       (c >= '{' && c <= '~');
}

/*
 * after "\" and a digit: C's, JavaScript's and git's octal "\OOO" (a byte,
 * or a code point to U+00FF, as "\xHH"), CSS's "\H" (1 to 6 hex digits, a
 * code point, and one white space after them if there is one), each read
 * as far as its digits go, as their parsers read them
 */
static void digits(const char *t, size_t n, size_t q, struct toks *o)
{
	uint32_t v;
	size_t end;

	/* number() reads on to its last digit: what it returns ends the run */
	if ((end = number(t, n, q, 8, 1, 3, 0, &v, &o->more)) && v <= 0xff) {
		put(o, v, false, end);
		if (v >= 0x80)
			put(o, v, true, end);
	}
	if (!(end = number(t, n, q, 16, 1, 6, 0, &v, &o->more)) || v > 0x10ffff)
		return;
	put(o, v, true, end);
	if (end < n && (t[end] == ' ' || t[end] == '\t' || t[end] == '\n' || t[end] == '\f'))
		put(o, v, true, end + 1);
	else if (end + 1 < n && t[end] == '\r' && t[end + 1] == '\n')
		put(o, v, true, end + 2);
	else if (end + 1 >= n && (end >= n || t[end] == '\r'))
		o->more = true;
}

/*
 * after "\": "uHHHH" (a surrogate pair: two), ES6's "u{H}" (up to 8
 * digits), JavaScript's "xHH" (a code point to U+00FF, or a byte: what a
 * string of bytes escapes), octal and CSS escapes (digits()), or ASCII
 * punctuation as it is (JSON's "\/", "\"", "\\"; CSS's, a regular
 * expression's and a shell's "\-"), escaped once more
 */
static void json(const char *t, size_t n, size_t q, int nest, struct toks *o)
{
	struct toks in, d;
	uint32_t hi, lo;
	size_t end, e2;

	if (q >= n) {
		o->more = true;
		return;
	}
	if (digit(t[q], 16) >= 0) {
		digits(t, n, q, o);
		return;
	}
	if (t[q] == 'u' && q + 1 < n && t[q + 1] == '{') {
		if ((end = number(t, n, q + 2, 16, 1, 8, '}', &hi, &o->more)) && hi <= 0x10ffff &&
		    (hi < 0xd800 || hi > 0xdfff))
			put(o, hi, true, end);
		return;
	}
	if (t[q] == 'x') {
		if (!(end = number(t, n, q + 1, 16, 2, 2, 0, &hi, &o->more)))
			return;
		put(o, hi, false, end);
		if (hi >= 0x80)
			put(o, hi, true, end);
		return;
	}
	if (t[q] == 'u') {
		if (!(end = number(t, n, q + 1, 16, 4, 4, 0, &hi, &o->more)))
			return;
		if (hi < 0xd800 || hi > 0xdfff) {
			put(o, hi, true, end);
			return;
		}
		if (hi > 0xdbff)
			return;
		in.n = 0;
		in.more = false;
		intros(t, n, end, nest, &in);
		o->more |= in.more;
		for (size_t i = 0; i < in.n; i++) {
			if (in.v[i].v != '\\')
				continue;
			if (in.v[i].end >= n) {
				o->more = true;
				continue;
			}
			if (t[in.v[i].end] == 'u' &&
			    (e2 = number(t, n, in.v[i].end + 1, 16, 4, 4, 0, &lo, &o->more)) &&
			    lo >= 0xdc00 && lo <= 0xdfff)
				put(o, 0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00), true, e2);
		}
		return;
	}
	if (t[q] == 'u' && q + 1 >= n)
		o->more = true;
	if (nest <= 0) {
		if (punct((unsigned char)t[q]))
			put(o, (unsigned char)t[q], true, q + 1);
		return;
	}
	d.n = 0;
	d.more = false;
	decode(t, n, q, nest - 1, &d);
	o->more |= d.more;
	for (size_t i = 0; i < d.n; i++)
		if (punct(d.v[i].v))
			put(o, d.v[i].v, true, d.v[i].end);
}

/* after "&": "#D;", "#xH;" (up to 8 digits), a named reference */
static void html(const char *t, size_t n, size_t q, struct toks *o)
{
	uint32_t v;
	size_t end, k;

	if (q >= n) {
		o->more = true;
		return;
	}
	if (t[q] == '#') {
		if (q + 1 >= n)
			o->more = true;
		else if (t[q + 1] == 'x' || t[q + 1] == 'X')
			end = number(t, n, q + 2, 16, 1, 8, ';', &v, &o->more);
		else
			end = number(t, n, q + 1, 10, 1, 8, ';', &v, &o->more);
		if (q + 1 < n && end && v <= 0x10ffff)
			put(o, v, true, end);
		return;
	}
	for (size_t i = 0; i < sizeof(named) / sizeof(named[0]); i++) {
		if (t[q] != named[i].name[0])
			continue;
		for (k = 1; k < named[i].len && q + k < n && t[q + k] == named[i].name[k]; k++)
			;
		if (k == named[i].len)
			put(o, named[i].cp, true, q + k);
		else if (q + k == n)
			o->more = true;
	}
}

/*
 * What t[p] may read as: its byte; "+" a space; and while an escape begins
 * there, what it says.  Most bytes are no escape's first: one token.
 */
static void decode(const char *t, size_t n, size_t p, int nest, struct toks *o)
{
	unsigned char c;
	struct toks in;
	uint32_t v;
	size_t end;

	if (p >= n) {
		o->more = true;
		return;
	}
	c = t[p];
	put(o, c, false, p + 1);
	if (c == '+')
		put(o, ' ', true, p + 1);
	if (!introducer(c))
		return;
	in.n = 0;
	in.more = false;
	intros(t, n, p, nest, &in);
	o->more |= in.more;
	for (size_t i = 0; i < in.n; i++) {
		size_t q = in.v[i].end;

		if (in.v[i].v == '%' && (end = number(t, n, q, 16, 2, 2, 0, &v, &o->more)))
			put(o, v, false, end);
		else if (in.v[i].v == '\\')
			json(t, n, q, nest, o);
		else if (in.v[i].v == '&')
			html(t, n, q, o);
	}
}

/* does a token read at a unit's start spell it whole? */
static bool whole(const struct tok *k, const struct spell_unit *u)
{
	return k->cp ? k->v == u->cp : u->nraw == 1 && k->v == u->raw[0];
}

/*
 * Where unit u, read from t[p] as d says, ends: a token that is all of it,
 * or its bytes one token each (raw, "%HH", mixed).
 */
static void unit_ends(const struct spell_unit *u, const char *t, size_t n,
		      const struct toks *d, struct ends *e)
{
	struct ends cur, next;
	struct toks b;

	cur.n = 0;
	e->more |= d->more;
	for (size_t i = 0; i < d->n; i++) {
		if (whole(&d->v[i], u))
			add(e, d->v[i].end);
		else if (u->nraw > 1 && !d->v[i].cp && d->v[i].v == u->raw[0])
			add(&cur, d->v[i].end);
	}
	for (size_t k = 1; k < u->nraw && cur.n; k++) {
		next.n = 0;
		for (size_t j = 0; j < cur.n; j++) {
			b.n = 0;
			b.more = false;
			decode(t, n, cur.at[j], NEST, &b);
			e->more |= b.more;
			for (size_t i = 0; i < b.n; i++)
				if (!b.v[i].cp && b.v[i].v == u->raw[k])
					add(&next, b.v[i].end);
		}
		cur = next;
	}
	if (u->nraw > 1)
		for (size_t j = 0; j < cur.n; j++)
			add(e, cur.at[j]);
}

/* The rest of a word from the ends of its first unit: its longest end, 0: none. */
static size_t rest(const struct spell_unit *u, size_t nu, const char *t, size_t n,
		   const struct ends *first, bool *more)
{
	struct ends cur = *first, next;
	struct toks d;
	size_t best = 0;

	for (size_t i = 1; i < nu; i++) {
		size_t q = cur.at[0];

		/* one reading so far, and a byte no escape begins with: no sets */
		if (cur.n == 1 && q < n && u[i].nraw == 1 && !introducer((unsigned char)t[q]) &&
		    t[q] != '+') {
			if ((unsigned char)t[q] != u[i].raw[0])
				return 0;
			cur.at[0] = q + 1;
			continue;
		}
		next.n = 0;
		next.more = false;
		for (size_t k = 0; k < cur.n; k++) {
			q = cur.at[k];
			/* a byte no escape begins with reads as itself only */
			if (q < n && u[i].nraw == 1 && !introducer((unsigned char)t[q]) &&
			    t[q] != '+') {
				if ((unsigned char)t[q] == u[i].raw[0])
					add(&next, q + 1);
				continue;
			}
			d.n = 0;
			d.more = false;
			decode(t, n, q, NEST, &d);
			unit_ends(&u[i], t, n, &d, &next);
		}
		*more |= next.more;
		if (!next.n)
			return 0;
		cur = next;
	}
	for (size_t k = 0; k < cur.n; k++)
		best = cur.at[k] > best ? cur.at[k] : best;
	return best;
}

size_t spell_units(const char *s, size_t n, struct spell_unit *out)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t k = 0;

	for (size_t i = 0; i < n; k++) {
		size_t len = p[i] >= 0xf0 && p[i] <= 0xf4 ? 4 : p[i] >= 0xe0 && p[i] < 0xf0 ? 3 :
			     p[i] >= 0xc2 && p[i] < 0xe0 ? 2 : 1;
		uint32_t cp = len == 1 ? p[i] : p[i] & (0x3f >> (len - 1));
		bool ok = p[i] < 0x80 || (len > 1 && i + len <= n);

		for (size_t j = 1; ok && j < len; j++) {
			ok = (p[i + j] & 0xc0) == 0x80;
			cp = cp << 6 | (p[i + j] & 0x3f);
		}
		/* overlong, a surrogate, past U+10FFFF: not a character */
		if (ok && len > 1 && (cp < (len == 3 ? 0x800u : len == 4 ? 0x10000u : 0x80u) ||
				      (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff))
			ok = false;
		if (!ok) {
			len = 1;
			cp = SPELL_BYTE | p[i];
		}
		out[k].cp = cp;
		out[k].nraw = len;
		memcpy(out[k].raw, p + i, len);
		i += len;
	}
	return k;
}

/* the longest spelling of one unit */
static size_t unit_max(const struct spell_unit *u)
{
	/*
	 * An escape's first byte escaped ("&#x00000025;", INTRO_MAX), then:
	 * "HH" a byte; "uHHHH", or the escaped byte escaped again
	 * ("&#x0000002F;"); "#x", 8 digits, ";".
	 */
	size_t m = (INTRO_MAX + 3) * u->nraw, json = INTRO_MAX + 11, ref = INTRO_MAX + 11;

	if (u->cp & SPELL_BYTE)
		return m;
	/* a surrogate pair; "u{" 8 digits "}" (ES6); 6 digits, CR, LF (CSS) */
	if (u->cp > 0xffff)
		json = 2 * (INTRO_MAX + 5);
	if (punct(u->cp))
		json = json > 2 * INTRO_MAX ? json : 2 * INTRO_MAX;
	m = m > json ? m : json;
	m = m > ref ? m : ref;
	for (size_t k = 0; k < sizeof(named) / sizeof(named[0]); k++)
		if (named[k].cp == u->cp && INTRO_MAX + 1 + named[k].len > m)
			m = INTRO_MAX + 1 + named[k].len;
	return m;
}

size_t spell_max(const struct spell_unit *u, size_t n)
{
	size_t m = 0;

	for (size_t i = 0; i < n; i++)
		m += unit_max(&u[i]);
	return m;
}

static void start_add(struct spell_starts *s, unsigned char c)
{
	if (s->table[c])
		return;
	s->table[c] = true;
	if (s->n < SPELL_SET_MAX)
		memset(s->list[s->n], c, 16);
	if (s->n <= SPELL_SET_MAX)
		s->n++;
}

void spell_starts(const struct spell_unit *u, struct spell_starts *s)
{
	start_add(s, u->raw[0]);
	start_add(s, '%');
	start_add(s, '\\');
	start_add(s, '&');
	if (u->cp == ' ')
		start_add(s, '+');
}

typedef unsigned char bytes16 __attribute__((vector_size(16)));
typedef signed char mask16 __attribute__((vector_size(16)));

/*
 * 16 bytes at a time, each compared with every byte of the list (the
 * compiler's vector extension: SSE2, NEON); then byte by byte, by table.
 * A body with no start byte in it is read at memchr's pace, not a byte's.
 */
/*
 * Aligned: its inner loop's place in the cache lines is then the same
 * whatever code comes before it (moved by a change of spell.c above it,
 * the loop ran a body with no start byte at 6.7 GB/s instead of 9.2 on
 * an AMD EPYC: bench/mask_scan.c).
 */
__attribute__((aligned(64)))
size_t spell_next(const struct spell_starts *s, const char *t, size_t n, size_t p)
{
	if (s->n <= SPELL_SET_MAX) {
		for (; p + 16 <= n; p += 16) {
			bytes16 x, c;
			mask16 hit = { 0 };
			uint64_t half[2];

			memcpy(&x, t + p, 16);
			for (size_t k = 0; k < s->n; k++) {
				memcpy(&c, s->list[k], 16);
				hit |= (mask16)(x == c);
			}
			memcpy(half, &hit, 16);
			if (half[0] | half[1])
				break;
		}
	}
	while (p < n && !s->table[(unsigned char)t[p]])
		p++;
	return p;
}

bool spell_maybe(const struct spell_word *w, const char *t, size_t n, size_t at)
{
	const struct spell_unit *u = w->u;
	unsigned char c = t[at], d;

	/* an escape, or a character of more than a byte: only a try says */
	if (introducer(c) || c == '+' || u[0].nraw > 1 || w->n == 1 || at + 1 >= n)
		return true;
	if (c != u[0].raw[0])
		return false;
	d = t[at + 1];
	return d == u[1].raw[0] || introducer(d) || (d == '+' && u[1].cp == ' ');
}

/* could a token read at t[at] be the start of unit u (its first byte)? */
static bool may_begin(const struct toks *d, const struct spell_unit *u)
{
	if (d->more)
		return true;
	for (size_t i = 0; i < d->n; i++)
		if (d->v[i].cp ? d->v[i].v == u->cp : d->v[i].v == u->raw[0])
			return true;
	return false;
}

size_t spell_match(const struct spell_word *w, size_t nw, const char *t, size_t n,
		   size_t at, size_t *which, bool *more)
{
	struct ends first;
	struct toks d;
	size_t end;

	d.n = 0;
	d.more = false;
	/* read once what t[at] may say; each word's first unit is tried on that */
	decode(t, n, at, NEST, &d);
	for (size_t i = 0; i < nw; i++) {
		/* most often nothing t[at] reads as is this word's first */
		if (!may_begin(&d, &w[i].u[0]))
			continue;
		first.n = 0;
		first.more = false;
		unit_ends(&w[i].u[0], t, n, &d, &first);
		*more |= first.more;
		if (!first.n)
			continue;
		if ((end = rest(w[i].u, w[i].n, t, n, &first, more))) {
			*which = i;
			return end;
		}
	}
	return 0;
}
