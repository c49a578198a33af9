/*
 * fuzz_sni.c - libFuzzer target for sni.c.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE \
 *         -Iinclude -Isrc/lib fuzz/fuzz_sni.c src/lib/sni.c -o fuzz_sni
 *   ./fuzz_sni -max_total_time=60 fuzz/corpus/sni
 *
 * Beyond memory safety it checks what callers rely on: only the documented
 * results, a reported name is a hostname, a hello is decided by its own
 * bytes (the same answer from exactly those bytes, -EAGAIN from fewer);
 * a server's answer and an SSLv2 hello are told by their first bytes (an
 * answer, once given, stays with more bytes behind it).
 */
#include "sni.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void check_host(const char *h)
{
	size_t i, n = strlen(h);

	if (n == 0 || n >= SNI_HOST_MAX || h[0] == '.' || h[n - 1] == '.')
		abort();
	for (i = 0; i < n; i++) {
		char ch = h[i];

		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' || ch == '.'))
			abort();
	}
}

/* the readers of what comes after the first hello */
static void check_after(const uint8_t *data, size_t size)
{
	struct sni_hello h;
	int r, fewer;

	r = sni_parse_retry(data, size, &h);
	if (r != 1 && r != 0 && r != -EAGAIN && r != -EINVAL && r != -ENOMEM)
		abort();
	if (r == 1)
		check_host(h.host);
	if (r >= 0 && (h.bytes == 0 || h.bytes > size))
		abort();
	r = sni_server_retries(data, size);
	if (r != 1 && r != 0 && r != -EAGAIN)
		abort();
	fewer = size ? sni_server_retries(data, size - 1) : -EAGAIN;
	if (fewer != -EAGAIN && fewer != r)
		abort();
	r = sni_v2_hello(data, size);
	if (r != 1 && r != 0 && r != -EAGAIN)
		abort();
	fewer = size ? sni_v2_hello(data, size - 1) : -EAGAIN;
	if (fewer != -EAGAIN && fewer != r)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sni_hello h, again;
	char host[SNI_HOST_MAX];
	int r, r2;

	check_after(data, size);
	r = sni_parse_hello(data, size, &h);
	if (r != 1 && r != 0 && r != -EAGAIN && r != -EINVAL && r != -ENOMEM)
		abort();
	if (r < 0)
		return 0;
	if (r == 1)
		check_host(h.host);
	else if (h.host[0] || h.has_sni)
		abort();
	if (h.bytes == 0 || h.bytes > size || h.hello_len > SNI_HELLO_MAX)
		abort();

	/* exactly the hello's records give the same answer ... */
	r2 = sni_parse_hello(data, h.bytes, &again);
	if (r2 != r || strcmp(again.host, h.host) || again.bytes != h.bytes)
		abort();
	/* ... and one byte fewer is only short */
	if (sni_parse_hello(data, h.bytes - 1, &again) != -EAGAIN)
		abort();
	/* the copying wrapper agrees */
	if (sni_parse(data, size, host, sizeof(host)) != r || strcmp(host, h.host))
		abort();
	return 0;
}
