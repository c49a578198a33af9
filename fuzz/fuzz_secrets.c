/*
 * fuzz_secrets.c - libFuzzer target for secrets.c: request heads and bodies
 * from the sandbox, with placeholders where they may and may not go.
 *
 *   make fuzz FUZZ_TARGETS=secrets
 *
 * The first byte picks the host (allowed or not) and whether the connection
 * is terminated; "@0" and "@1" in the rest stand for the two placeholders.
 * Beyond memory safety it checks what the proxy relies on: 0 or -EACCES
 * only; a head that was let through holds no placeholder; with no swap
 * allowed, what goes through is the input itself; a body scan, however the
 * bytes are split, refuses exactly when the whole holds a placeholder or a
 * form of the value ("the-real-value", its base64 ...).
 */
#include "tls.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static struct corral_policy policy;
static struct secrets *sec;

static void setup(void)
{
	static const char text[] =
		"{\"network\": {\"mode\": \"proxy\"}, \"secrets\": ["
		"{\"name\": \"A\", \"from_env\": \"FUZZ_SECRET\", \"hosts\": [\"api.test\"], "
		"\"header\": \"Authorization\"}, "
		"{\"name\": \"B\", \"from_env\": \"FUZZ_SECRET\", \"hosts\": [\"api.test\"], "
		"\"query\": \"key\"}]}";
	struct corral_err err = { 0 };

	setenv("FUZZ_SECRET", "the-real-value", 1);
	corral_policy_init(&policy);
	if (corral_policy_load_string(&policy, text, strlen(text), "fuzz", &err) < 0)
		abort();
	sec = secrets_new(&policy, &err);
	if (!sec)
		abort();
}

/* data with "@0"/"@1" replaced by the placeholders; *n its length */
static char *expand(const uint8_t *data, size_t size, size_t *n)
{
	size_t ph = strlen(secrets_placeholder(sec, 0));
	char *out = malloc(size * ph + 1);
	size_t o = 0;

	for (size_t i = 0; i < size; i++) {
		if (data[i] == '@' && i + 1 < size && (data[i + 1] == '0' || data[i + 1] == '1')) {
			memcpy(out + o, secrets_placeholder(sec, data[i + 1] - '0'), ph);
			o += ph;
			i++;
		} else {
			out[o++] = data[i];
		}
	}
	*n = o;
	return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct secrets_scan whole = { 0 }, split = { 0 };
	char why[256], *head, *out = NULL;
	size_t n, outlen = 0, cut;
	bool swap, has;
	int r, r1, r2;

	if (!sec)
		setup();
	if (size < 2)
		return 0;
	swap = data[0] & 1;
	head = expand(data + 1, size - 1, &n);
	has = memmem(head, n, "corral-ph-", 10) &&
	      (memmem(head, n, secrets_placeholder(sec, 0), strlen(secrets_placeholder(sec, 0))) ||
	       memmem(head, n, secrets_placeholder(sec, 1), strlen(secrets_placeholder(sec, 1))));
	/* a form of the value: secrets_redact finds the same ones the scan does */
	if (!has) {
		char *copy = malloc(n + 1);

		memcpy(copy, head, n);
		has = secrets_redact(sec, copy, n) > 0;
		free(copy);
	}
	r = secrets_rewrite_head(sec, head, n, data[0] & 2 ? "api.test" : "other.test", 443,
				 swap, &out, &outlen, why, sizeof(why));
	if (r != 0 && r != -EACCES && r != -ENOMEM)
		abort();
	if (r == 0) {
		if (memmem(out, outlen, secrets_placeholder(sec, 0), strlen(secrets_placeholder(sec, 0))) ||
		    memmem(out, outlen, secrets_placeholder(sec, 1), strlen(secrets_placeholder(sec, 1))))
			abort();
		if ((!swap || !(data[0] & 2)) && (outlen != n || memcmp(out, head, n)))
			abort();
	}
	free(out);
	/* the body: one scan, or two at any cut, agree */
	cut = n ? data[0] % (n + 1) : 0;
	r1 = secrets_scan(sec, &whole, head, n, why, sizeof(why));
	r2 = secrets_scan(sec, &split, head, cut, why, sizeof(why));
	if (r2 == 0)
		r2 = secrets_scan(sec, &split, head + cut, n - cut, why, sizeof(why));
	if (r1 != r2 || (r1 == -EACCES) != has)
		abort();
	secrets_scan_free(&whole);
	secrets_scan_free(&split);
	free(head);
	return 0;
}
