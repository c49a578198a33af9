/*
 * mask_scan.c - the mask's scan alone (secrets_mask_apply), in GB/s, on
 * the bodies bench/tls.py downloads: "d" repeated (a byte no spelling of
 * the value begins with), "pattern" (bytes 0 to 255 over and over) and
 * "text" (JSON and HTML dense in escapes and in the value's first bytes
 * going no further).  tls.py's terminated rows move with the machine's
 * other load; this is the scan's own cost, to compare a change of
 * spell.c before and after.
 *
 *   make build/bench/mask_scan && build/bench/mask_scan [MiB] [rounds]
 *
 * The median and the best of the rounds, each over the whole body, in
 * the thread's CPU time.
 */
#include "tls.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define VALUE "sk-bench-0123456789abcdef"

static double now(void)
{
	struct timespec t;

	/* the scan's own CPU time: the machine's other load adds little */
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static void fill(char *b, size_t n, const char *kind)
{
	static const char text[] =
		"{\"url\": \"https:\\/\\/api.test\\/v1\\/items?a=1&amp;b=2%2F3\", "
		"\"note\": \"s k- sk sk-b sk-be \\u0026lt;p\\u0026gt; &lt;b&gt;\", "
		"\"n\": 12345, \"path\": \"\\/a\\/b\\/c\"}\n";

	for (size_t i = 0; i < n; i++)
		b[i] = !strcmp(kind, "d") ? 'd' : !strcmp(kind, "pattern") ? (char)i :
		       text[i % (sizeof(text) - 1)];
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	static const char policy_text[] =
		"{\"network\": {\"mode\": \"proxy\", \"allow\": [\"api.test\"]}, "
		"\"secrets\": [{\"name\": \"K\", \"from_env\": \"MASK_SCAN_SECRET\", "
		"\"hosts\": [\"api.test\"], \"header\": \"Authorization\"}]}";
	static const char *const kinds[] = { "d", "pattern", "text" };
	size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 64;
	int rounds = argc > 2 ? atoi(argv[2]) : 5;
	struct corral_err err = { 0 };
	struct corral_policy p;
	struct secrets *ss;
	struct secrets_mask *m;
	size_t n = mib << 20;
	char *b = malloc(n);
	double t[64];

	if (!b || rounds < 1 || rounds > 64)
		return 2;
	setenv("MASK_SCAN_SECRET", VALUE, 1);
	corral_policy_init(&p);
	if (corral_policy_load_string(&p, policy_text, strlen(policy_text), "bench", &err) < 0 ||
	    !(ss = secrets_new(&p, &err)) || !(m = secrets_mask_new(ss, "api.test", 443))) {
		fprintf(stderr, "mask_scan: %s\n", err.msg);
		return 1;
	}
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		fill(b, n, kinds[k]);
		for (int r = 0; r < rounds; r++) {
			double t0 = now();

			if (secrets_mask_apply(m, b, n))
				return 1;
			t[r] = now() - t0;
		}
		qsort(t, rounds, sizeof(t[0]), cmp);
		printf("%-8s %6.2f GB/s (best %.2f)\n", kinds[k], n / t[rounds / 2] / 1e9,
		       n / t[0] / 1e9);
	}
	secrets_mask_free(m);
	secrets_free(ss);
	corral_policy_free(&p);
	free(b);
	return 0;
}
