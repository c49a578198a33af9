/*
 * units.c - sizes ("512M", "1.5GiB") and durations ("30s", "1.5h") as a
 * policy and the command line write them, parsed in exact integer
 * arithmetic; and a byte count as a person reads it.
 */
#include "policy_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

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

const char *units_size(const char *s, uint64_t *bytes)
{
	return size_problem(parse_scaled(s, size_suffix, bytes));
}

const char *units_duration(const char *s, uint64_t *ms)
{
	return duration_problem(parse_scaled(s, duration_suffix, ms));
}

int corral_parse_size(const char *s, uint64_t *bytes, struct corral_err *err)
{
	const char *why = units_size(s, bytes);
	char got[GOT_MAX + 16];

	if (!why)
		return 0;
	policy_quote(s ? s : "", s ? strlen(s) : 0, got, sizeof(got));
	return corral_set_err(err, -EINVAL, "%s (got %s)", why, got);
}

int corral_parse_duration(const char *s, uint64_t *ms, struct corral_err *err)
{
	const char *why = units_duration(s, ms);
	char got[GOT_MAX + 16];

	if (!why)
		return 0;
	policy_quote(s ? s : "", s ? strlen(s) : 0, got, sizeof(got));
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
