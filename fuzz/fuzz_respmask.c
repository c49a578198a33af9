/*
 * fuzz_respmask.c - libFuzzer target for httpresp.c and secrets.c's mask:
 * the answers of a host a secret goes to, read on their way back.
 *
 *   make fuzz FUZZ_TARGETS=respmask
 *
 * The first byte picks the size of the reads (1 to 64) and whether the
 * first request was a HEAD; "@" in the rest stands for the value, "#" for
 * it as PHP's JSON writes it (spell.c's readings, not a fixed form).  The
 * stream is played as proxy.c's mask_relay plays it, an answer it cannot
 * read cut off behind the whole ones before it.  Beyond memory
 * safety: what is not cut off goes on whole, no byte more or fewer, and
 * nothing is held back forever (the end flushes); read at once or in
 * pieces, the answer is cut off or not alike.
 */
#include "tls.h"
#include "httpresp.h"

#include <stdlib.h>
#include <string.h>

#define VALUE "the-real/value"
#define VALUE_JSON "the-real\\/value"

static struct corral_policy policy;
static struct secrets *sec;

static void setup(void)
{
	static const char text[] =
		"{\"network\": {\"mode\": \"proxy\"}, \"secrets\": ["
		"{\"name\": \"A\", \"from_env\": \"FUZZ_SECRET\", \"hosts\": [\"api.test\"], "
		"\"header\": \"Authorization\"}]}";
	struct corral_err err = { 0 };

	setenv("FUZZ_SECRET", VALUE, 1);
	corral_policy_init(&policy);
	if (corral_policy_load_string(&policy, text, strlen(text), "fuzz", &err) < 0)
		abort();
	sec = secrets_new(&policy, &err);
	if (!sec)
		abort();
}

/* the stream through the loop, `step` bytes a read; its bytes out, or -1: cut */
static long play(struct secrets_mask *m, bool head, const char *in, size_t len,
		 size_t step, char *out, size_t *sent)
{
	struct httpresp r;
	char *buf = malloc(len + 1);
	size_t held = 0, from = 0, nout = 0;
	long ret = 0;

	httpresp_init(&r);
	httpresp_sent(&r, head);
	for (int i = 0; i < 8; i++)
		httpresp_sent(&r, false);
	while (from < len || held) {
		size_t to = from + step < len ? from + step : len, rel;
		bool end = to == len;

		memcpy(buf + held, in + from, to - from);
		held += to - from;
		from = to;
		if (httpresp_feed(&r, buf, held) < 0) {
			/* the whole answers before it go on, masked (mask_cut) */
			if (r.start > held ||
			    secrets_mask_answer(m, &r, buf, r.start, true, &rel) < 0)
				abort();
			memcpy(out + nout, buf, rel);
			nout += rel;
			ret = -1;
			break;
		}
		if (secrets_mask_answer(m, &r, buf, held, end, &rel) < 0 || rel > held)
			abort();
		memcpy(out + nout, buf, rel);
		nout += rel;
		memmove(buf, buf + rel, held - rel);
		held -= rel;
		httpresp_release(&r, rel);
	}
	httpresp_free(&r);
	free(buf);
	*sent = nout;
	return ret < 0 ? ret : (long)nout;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct secrets_mask *m;
	size_t n = 0, vlen = strlen(VALUE_JSON);
	char *in, *a, *b;
	long ra, rb;
	size_t na, nb;

	if (!sec)
		setup();
	if (size < 2 || size > 4096)
		return 0;
	m = secrets_mask_new(sec, "api.test", 443);
	if (!m)
		abort();
	in = malloc(size * vlen);
	for (size_t i = 1; i < size; i++) {
		if (data[i] == '@') {
			memcpy(in + n, VALUE, strlen(VALUE));
			n += strlen(VALUE);
		} else if (data[i] == '#') {
			memcpy(in + n, VALUE_JSON, vlen);
			n += vlen;
		} else {
			in[n++] = data[i];
		}
	}
	a = malloc(n + 1);
	b = malloc(n + 1);
	ra = play(m, data[0] & 0x80, in, n, n ? n : 1, a, &na);
	rb = play(m, data[0] & 0x80, in, n, (data[0] & 63) + 1, b, &nb);
	/* what went on never shows the value as it is */
	if (memmem(a, na, VALUE, strlen(VALUE)) || memmem(b, nb, VALUE, strlen(VALUE)) ||
	    memmem(a, na, VALUE_JSON, vlen) || memmem(b, nb, VALUE_JSON, vlen))
		abort();
	if ((ra < 0) != (rb < 0) || (ra >= 0 && (size_t)ra != n) || (rb >= 0 && (size_t)rb != n))
		abort();
	secrets_mask_free(m);
	free(in);
	free(a);
	free(b);
	return 0;
}
