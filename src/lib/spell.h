/*
 * spell.h - a string as the encoders a server passes it through spell it.
 *
 * A server that reflects a request rarely writes it back byte for byte:
 * JSON writes "/" as "\/" (PHP) or "+" as "\u002B" (.NET), HTML as "&#x2F;"
 * or "&amp;", a URL as "%2f".  A word here is a string cut into units (a
 * character: one UTF-8 sequence, or a byte that is none of one); a text
 * spells a unit as its raw bytes or in any of those escapes, and a word
 * as one spelling per unit, each chosen on its own: "a\/b/c" spells
 * "a/b/c", and so does any other mix, with no list of whole forms.
 *
 * Spellings of a unit: its bytes, each raw or "%HH" (either case); "+"
 * for a space (a query's form encoding); JSON's "\uHHHH" (a surrogate
 * pair past U+FFFF), "\/", "\"", "\\"; JavaScript's "\xHH" (a character
 * to U+00FF, or a byte of one: OWASP ESAPI's JavaScript encoder, a string
 * of bytes escaped) and ES6's "\u{H}"; octal "\OOO" (a byte, as "\xHH":
 * C, old JavaScript, git's quoted paths); CSS's "\H" (1 to 6 digits, and
 * the one white space after them); a backslash before a space or ASCII
 * punctuation (Perl's quotemeta, a regular expression's, a shell's);
 * HTML's and XML's "&#D;" and
 * "&#xH;" (up to 8 digits, either case) and the named references of the
 * characters a token may hold ("&amp;", "&lt;", "&sol;", ...).  The
 * first byte of an escape ("%", "\", "&") may itself be escaped once:
 * "%252F" (a URL encoded twice), "&amp;#47;" (HTML escaped twice),
 * "\u0026#47;" (HTML inside .NET's JSON), "\\/" (JSON inside JSON).
 *
 * Pure: no allocation, no global state.  Cost: a start is tried where its
 * first byte may begin a spelling (spell_starts), and a try stops at the
 * first unit that is not spelled there.
 */
#ifndef CORRAL_SPELL_H
#define CORRAL_SPELL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct spell_unit {
	uint32_t cp;			/* code point; SPELL_BYTE | b: a lone byte */
	uint8_t nraw;
	unsigned char raw[4];
};

#define SPELL_BYTE	0x80000000u

struct spell_word {
	const struct spell_unit *u;
	size_t n;			/* at least one */
};

/* s[0..n) as units into out (n of them at most); how many. */
size_t spell_units(const char *s, size_t n, struct spell_unit *out);
/* The longest spelling of u[0..n), in bytes: a match is never longer. */
size_t spell_max(const struct spell_unit *u, size_t n);
/*
 * The bytes a spelling of any of a set of words may begin with: a table,
 * and while they are few, a list that spell_next() compares 16 bytes at a
 * time against.
 */
#define SPELL_SET_MAX	24
struct spell_starts {
	bool table[256];
	unsigned char list[SPELL_SET_MAX][16];	/* each byte 16 times */
	size_t n;			/* SPELL_SET_MAX + 1: too many for the list */
};
/* Add the bytes a spelling of u[0] may begin with. */
void spell_starts(const struct spell_unit *u, struct spell_starts *s);
/* The first p' >= p where t[p'] may begin a spelling; n: none. */
size_t spell_next(const struct spell_starts *s, const char *t, size_t n, size_t p);
/*
 * The first of w[0..nw) spelled from t[at]: where its longest spelling
 * ends (its index in *which), 0: none there.  *more is set when a spelling
 * of one runs on past t[n - 1]: t's end may be a spelling's start.
 */
size_t spell_match(const struct spell_word *w, size_t nw, const char *t, size_t n,
		   size_t at, size_t *which, bool *more);
/* Could w be spelled from t[at], by its first two bytes?  false: surely not. */
bool spell_maybe(const struct spell_word *w, const char *t, size_t n, size_t at);

#endif
