/*
 * fuzz_socks.c - libFuzzer target for socks.c.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE \
 *         -Iinclude -Isrc/lib fuzz/fuzz_socks.c src/lib/socks.c -o fuzz_socks
 *
 * The input is fed twice, all at once and in pieces whose sizes the first
 * byte picks: a state machine must not care how the bytes arrive, so the
 * result, the target, the bytes consumed and the bytes written back must be
 * the same both ways.
 */
#include "socks.h"

#include <stdlib.h>
#include <string.h>

struct run {
	int r;
	size_t consumed;
	uint8_t out[4 * SOCKS_OUT_MAX];
	size_t outlen;
	struct socks_conn c;
};

static void feed(struct run *run, const uint8_t *data, size_t size, unsigned step)
{
	size_t off = 0;

	memset(run, 0, sizeof(*run));
	socks_init(&run->c);
	run->r = SOCKS_NEED_MORE;
	while (run->r == SOCKS_NEED_MORE && off < size) {
		uint8_t out[SOCKS_OUT_MAX];
		size_t chunk = step ? step : size, used, outlen = sizeof(out);

		if (chunk > size - off)
			chunk = size - off;
		run->r = socks_feed(&run->c, data + off, chunk, &used, out, &outlen);
		if (used > chunk || outlen > SOCKS_OUT_MAX)
			abort();
		if (run->r == SOCKS_NEED_MORE && used != chunk)
			abort();
		if (run->outlen + outlen > sizeof(run->out))
			abort();
		memcpy(run->out + run->outlen, out, outlen);
		run->outlen += outlen;
		off += used;
	}
	run->consumed = off;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct run whole, pieces;
	unsigned step;

	if (size < 1)
		return 0;
	step = 1 + data[0] % 8;
	data++;
	size--;
	feed(&whole, data, size, 0);
	feed(&pieces, data, size, step);
	if (whole.r != pieces.r || whole.consumed != pieces.consumed ||
	    whole.outlen != pieces.outlen ||
	    memcmp(whole.out, pieces.out, whole.outlen))
		abort();
	if (whole.r == SOCKS_REQUEST_READY) {
		if (strcmp(whole.c.host, pieces.c.host) ||
		    whole.c.port != pieces.c.port || whole.c.port == 0 ||
		    !whole.c.host[0])
			abort();
	} else if (whole.r == SOCKS_ERROR) {
		if (whole.c.err >= 0 || !whole.c.reason || whole.c.err != pieces.c.err)
			abort();
	}
	return 0;
}
