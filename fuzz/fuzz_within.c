/*
 * fuzz_within.c - libFuzzer target for policy_bounds.c (and tls_policy.c's
 * part of it): a policy asked for by someone else (a model through
 * `corral mcp`, a TCP client of `corral serve`) judged against the
 * operator's by corral_policy_within.  The input is two policy layers
 * separated by the first NUL byte, each laid over the built-in default:
 * A (what is asked) and B (a bound; the default where there is no NUL).
 * Whatever the bytes, "within" is an order, as a bound must be:
 *
 *   - every policy is within itself (a bound never refuses its own
 *     policy asked again);
 *   - A within B and B within the default make A within the default,
 *     and the same with A and B swapped: what narrows a narrowing
 *     narrows the first bound too, so no chain of asks widens;
 *   - a refusal is -EPERM and says which field.
 *
 *   make fuzz FUZZ_SECONDS=60 FUZZ_TARGETS=within
 */
#include "corral.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int within(const struct corral_policy *p, const struct corral_policy *bound)
{
	struct corral_err err = { 0 };
	int r = corral_policy_within(p, bound, &err);

	if (r != 0 && (r != -EPERM || err.code != -EPERM || !err.msg[0]))
		abort();
	return r;
}

static void must_be_within(const struct corral_policy *p,
			   const struct corral_policy *bound, const char *what)
{
	struct corral_err err = { 0 };

	if (corral_policy_within(p, bound, &err) != 0) {
		fprintf(stderr, "fuzz_within: %s: %s\n", what, err.msg);
		abort();
	}
}

static void chain(const struct corral_policy *a, const struct corral_policy *b,
		  const struct corral_policy *d, const char *what)
{
	if (within(a, b) == 0 && within(b, d) == 0)
		must_be_within(a, d, what);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	const char *nul = memchr(text, '\0', size);
	size_t alen = nul ? (size_t)(nul - text) : size;
	struct corral_policy a, b, d;
	struct corral_err err = { 0 };

	corral_policy_init(&a);
	corral_policy_init(&b);
	corral_policy_init(&d);
	if (corral_policy_load_string(&a, text, alen, "asked", &err) < 0 ||
	    (nul && corral_policy_load_string(&b, nul + 1, size - alen - 1,
					       "bound", &err) < 0))
		goto out;
	must_be_within(&a, &a, "A is not within itself");
	must_be_within(&b, &b, "B is not within itself");
	must_be_within(&d, &d, "the default is not within itself");
	chain(&a, &b, &d, "A within B within the default, not within the default");
	chain(&b, &a, &d, "B within A within the default, not within the default");
out:
	corral_policy_free(&a);
	corral_policy_free(&b);
	corral_policy_free(&d);
	return 0;
}
