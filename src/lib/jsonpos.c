/*
 * jsonpos.c - find where a value sits in JSON text.
 *
 * A second, much smaller reader than jansson, used only to turn a path into
 * a line and column for an error message.  It trusts nothing about the
 * text: every read is checked against len, nesting deeper than
 * JSONPOS_MAX_DEPTH is skipped (iteratively) rather than descended into,
 * and anything it does not understand ends the search with -ENOENT.
 */
#include "jsonpos.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Result of walking one value: done with it, found the target, or lost. */
enum { WALK_DONE = 0, WALK_FOUND = 1, WALK_LOST = -1 };

struct scan {
	const char *s;
	size_t len;
	size_t i;
	unsigned line;
	unsigned col;			/* characters consumed on this line */

	/* What we look for: the value (or key) at a path ... */
	const struct jsonpos_step *path;
	size_t npath;
	bool at_key;
	/* ... or the key that ends at byte offset end (SIZE_MAX: not this). */
	size_t end;

	struct jsonpos *pos;
	char *dotted;
	size_t dotted_len;
};

/* The way down to the value being walked, innermost first. */
struct frame {
	const struct frame *up;
	size_t depth;			/* steps from the top-level value */
	bool on_path;			/* every step so far matches scan.path */
	bool is_key;
	size_t key, keylen;		/* raw key text between the quotes */
	size_t index;
};

static int peek(const struct scan *sc)
{
	return sc->i < sc->len ? (unsigned char)sc->s[sc->i] : -1;
}

static void advance(struct scan *sc)
{
	unsigned char c;

	if (sc->i >= sc->len)
		return;
	c = sc->s[sc->i++];
	if (c == '\n') {
		sc->line++;
		sc->col = 0;
	} else if ((c & 0xc0) != 0x80) {
		/* jansson counts characters, not UTF-8 continuation bytes */
		sc->col++;
	}
}

static void here(const struct scan *sc, struct jsonpos *p)
{
	p->line = sc->line;
	p->col = sc->col + 1;
}

static void skip_ws(struct scan *sc)
{
	int c;

	while ((c = peek(sc)) == ' ' || c == '\t' || c == '\n' || c == '\r')
		advance(sc);
}

/* From the opening quote to just past the closing one. */
static int skip_string(struct scan *sc)
{
	int c;

	advance(sc);
	while ((c = peek(sc)) >= 0) {
		advance(sc);
		if (c == '"')
			return WALK_DONE;
		if (c == '\\')
			advance(sc);
	}
	return WALK_LOST;
}

static bool is_delim(int c)
{
	return c < 0 || c == ',' || c == ':' || c == ']' || c == '}' ||
	       c == '[' || c == '{' || c == '"' ||
	       c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/*
 * Skip one value without descending: brackets are only counted, so depth
 * costs nothing here, however deep the text nests.
 */
static int skip_value(struct scan *sc)
{
	size_t depth = 0;
	int c = peek(sc);

	if (c == '"')
		return skip_string(sc);
	if (c != '{' && c != '[') {
		if (is_delim(c))
			return WALK_LOST;
		while (!is_delim(peek(sc)))
			advance(sc);
		return WALK_DONE;
	}
	while ((c = peek(sc)) >= 0) {
		if (c == '"') {
			if (skip_string(sc))
				return WALK_LOST;
			continue;
		}
		advance(sc);
		if (c == '{' || c == '[')
			depth++;
		else if ((c == '}' || c == ']') && --depth == 0)
			return WALK_DONE;
	}
	return WALK_LOST;
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static long hex4(const char *s, size_t n, size_t at)
{
	long v = 0;
	size_t k;

	if (at > n || n - at < 4)
		return -1;
	for (k = 0; k < 4; k++) {
		int h = hexval((unsigned char)s[at + k]);

		if (h < 0)
			return -1;
		v = v * 16 + h;
	}
	return v;
}

static size_t utf8_put(unsigned long cp, char *out)
{
	if (cp < 0x80) {
		out[0] = cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = 0xc0 | (cp >> 6);
		out[1] = 0x80 | (cp & 0x3f);
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = 0xe0 | (cp >> 12);
		out[1] = 0x80 | ((cp >> 6) & 0x3f);
		out[2] = 0x80 | (cp & 0x3f);
		return 3;
	}
	out[0] = 0xf0 | (cp >> 18);
	out[1] = 0x80 | ((cp >> 12) & 0x3f);
	out[2] = 0x80 | ((cp >> 6) & 0x3f);
	out[3] = 0x80 | (cp & 0x3f);
	return 4;
}

/*
 * Decode the escape at s[*i] (a backslash) into out; 0 if it is not one.
 * Keys are compared decoded because jansson hands them out decoded, and
 * "\u006demory" is the key "memory".
 */
static size_t unescape(const char *s, size_t n, size_t *i, char *out)
{
	static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
	const char *e;
	long cp, lo;

	if (*i + 1 >= n)
		return 0;
	if (s[*i + 1] != 'u') {
		e = memchr(from, s[*i + 1], sizeof(from) - 1);
		if (!e)
			return 0;
		out[0] = to[e - from];
		*i += 2;
		return 1;
	}
	cp = hex4(s, n, *i + 2);
	if (cp < 0)
		return 0;
	*i += 6;
	if (cp >= 0xd800 && cp <= 0xdbff && *i + 1 < n &&
	    s[*i] == '\\' && s[*i + 1] == 'u') {
		lo = hex4(s, n, *i + 2);
		if (lo >= 0xdc00 && lo <= 0xdfff) {
			cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
			*i += 6;
		}
	}
	return utf8_put(cp, out);
}

static bool key_equals(const struct scan *sc, size_t at, size_t n,
		       const char *key)
{
	const char *s = sc->s + at;
	size_t i = 0, k = 0, m, j;
	char buf[4];

	while (i < n) {
		if (s[i] == '\\') {
			m = unescape(s, n, &i, buf);
			if (!m)
				return false;
		} else {
			buf[0] = s[i++];
			m = 1;
		}
		for (j = 0; j < m; j++, k++)
			if (key[k] == '\0' || key[k] != buf[j])
				return false;
	}
	return key[k] == '\0';
}

static void put(struct scan *sc, size_t *off, const char *s, size_t n)
{
	size_t room;

	if (*off + 1 >= sc->dotted_len)
		return;
	room = sc->dotted_len - 1 - *off;
	if (n > room)
		n = room;
	memcpy(sc->dotted + *off, s, n);
	*off += n;
	sc->dotted[*off] = '\0';
}

static bool plain_key(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		unsigned char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '_' || c == '-'))
			return false;
	}
	return n > 0;
}

/* "a.b[2].c"; keys that are not plain words stay quoted, as written. */
static void render_dotted(struct scan *sc, const struct frame *leaf)
{
	const struct frame *chain[JSONPOS_MAX_DEPTH + 1];
	size_t n = 0, off = 0, k, j;
	char num[32];

	if (!sc->dotted || !sc->dotted_len)
		return;
	sc->dotted[0] = '\0';
	for (; leaf && leaf->depth > 0 && n < JSONPOS_MAX_DEPTH + 1;
	     leaf = leaf->up)
		chain[n++] = leaf;
	while (n-- > 0) {
		const struct frame *f = chain[n];
		const char *key = sc->s + f->key;

		if (!f->is_key) {
			snprintf(num, sizeof(num), "[%zu]", f->index);
			put(sc, &off, num, strlen(num));
			continue;
		}
		if (off)
			put(sc, &off, ".", 1);
		if (plain_key(key, f->keylen)) {
			put(sc, &off, key, f->keylen);
			continue;
		}
		put(sc, &off, "\"", 1);
		for (k = 0; k < f->keylen; k++) {
			char c = key[k];

			j = (unsigned char)c;
			put(sc, &off, (j < 0x20 || j == 0x7f) ? "?" : &c, 1);
		}
		put(sc, &off, "\"", 1);
	}
}

static int walk_value(struct scan *sc, const struct frame *f);

static int walk_object(struct scan *sc, const struct frame *f)
{
	struct frame kf = { .up = f, .depth = f->depth + 1, .is_key = true };
	const struct jsonpos_step *step = NULL;
	struct jsonpos kpos;
	int c, r;

	if (f->on_path && f->depth < sc->npath && sc->path[f->depth].key)
		step = &sc->path[f->depth];
	advance(sc);
	skip_ws(sc);
	if (peek(sc) == '}') {
		advance(sc);
		return WALK_DONE;
	}
	for (;;) {
		if (peek(sc) != '"')
			return WALK_LOST;
		here(sc, &kpos);
		kf.key = sc->i + 1;
		if (skip_string(sc))
			return WALK_LOST;
		kf.keylen = sc->i - 1 - kf.key;
		kf.on_path = step && key_equals(sc, kf.key, kf.keylen, step->key);
		if ((kf.on_path && kf.depth == sc->npath && sc->at_key) ||
		    sc->i == sc->end) {
			*sc->pos = kpos;
			render_dotted(sc, &kf);
			return WALK_FOUND;
		}
		skip_ws(sc);
		if (peek(sc) != ':')
			return WALK_LOST;
		advance(sc);
		r = walk_value(sc, &kf);
		if (r)
			return r;
		skip_ws(sc);
		c = peek(sc);
		advance(sc);
		if (c == '}')
			return WALK_DONE;
		if (c != ',')
			return WALK_LOST;
		skip_ws(sc);
	}
}

static int walk_array(struct scan *sc, const struct frame *f)
{
	struct frame ef = { .up = f, .depth = f->depth + 1 };
	const struct jsonpos_step *step = NULL;
	int c, r;

	if (f->on_path && f->depth < sc->npath && !sc->path[f->depth].key)
		step = &sc->path[f->depth];
	advance(sc);
	skip_ws(sc);
	if (peek(sc) == ']') {
		advance(sc);
		return WALK_DONE;
	}
	for (ef.index = 0;; ef.index++) {
		ef.on_path = step && step->index == ef.index;
		r = walk_value(sc, &ef);
		if (r)
			return r;
		skip_ws(sc);
		c = peek(sc);
		advance(sc);
		if (c == ']')
			return WALK_DONE;
		if (c != ',')
			return WALK_LOST;
	}
}

static int walk_value(struct scan *sc, const struct frame *f)
{
	bool descend;
	int c;

	skip_ws(sc);
	if (f->on_path && f->depth == sc->npath && !(sc->at_key && f->is_key)) {
		here(sc, sc->pos);
		render_dotted(sc, f);
		return WALK_FOUND;
	}
	/* Looking by path, only the branch on the path needs walking. */
	descend = f->depth < JSONPOS_MAX_DEPTH &&
		  (sc->end != SIZE_MAX || f->on_path);
	c = peek(sc);
	if (descend && c == '{')
		return walk_object(sc, f);
	if (descend && c == '[')
		return walk_array(sc, f);
	return skip_value(sc);
}

static int walk(struct scan *sc)
{
	/* Looking by offset, no frame is ever on a path. */
	struct frame top = { .on_path = sc->end == SIZE_MAX };

	sc->line = 1;
	return walk_value(sc, &top) == WALK_FOUND ? 0 : -ENOENT;
}

int jsonpos_locate(const char *text, size_t len,
		   const struct jsonpos_step *path, size_t n, bool at_key,
		   struct jsonpos *pos)
{
	struct scan sc = {
		.s = text, .len = text ? len : 0,
		.path = path, .npath = n, .at_key = at_key,
		.end = SIZE_MAX, .pos = pos,
	};

	if (n > JSONPOS_MAX_DEPTH || (n && !path))
		return -ENOENT;
	return walk(&sc);
}

int jsonpos_key_ending_at(const char *text, size_t len, size_t end,
			  struct jsonpos *pos, char *dotted, size_t dotted_len)
{
	struct scan sc = {
		.s = text, .len = text ? len : 0,
		.end = end, .pos = pos,
		.dotted = dotted, .dotted_len = dotted_len,
	};

	if (end == SIZE_MAX)
		return -ENOENT;
	return walk(&sc);
}
