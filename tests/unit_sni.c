/*
 * unit_sni.c - the TLS ClientHello parser (sni.c) the egress layer reads a
 * tunnel's name from: real hellos from OpenSSL, and hostile ones: every
 * truncation, bit flips, crafted lengths and names.  Everything is bytes.
 */
#include "sni.h"
#include "unit.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/*
 * ClientHellos as OpenSSL 3.0 sends them: `openssl s_client -connect
 * 127.0.0.1:PORT -servername x.test` (TLS 1.3 and with -tls1_2) and with
 * -noservername, captured on loopback.
 */
static const uint8_t hello_tls13[] = {
	0x16, 0x03, 0x01, 0x01, 0x33, 0x01, 0x00, 0x01, 0x2f, 0x03, 0x03, 0x36,
	0x9f, 0x90, 0xd0, 0x83, 0xdb, 0xb9, 0x5a, 0xa8, 0x09, 0x1e, 0x76, 0x63,
	0xaa, 0x52, 0xa9, 0x56, 0x4d, 0x69, 0xd2, 0x9d, 0xbc, 0x21, 0xfd, 0x15,
	0x10, 0x82, 0x01, 0xa3, 0x1e, 0xca, 0xf5, 0x20, 0xbd, 0x00, 0x70, 0x58,
	0x0c, 0x6f, 0xf2, 0x49, 0xc2, 0xba, 0x41, 0x0d, 0xa9, 0xa0, 0xab, 0xae,
	0xea, 0xd5, 0x17, 0x0c, 0x76, 0x8f, 0xe2, 0xb7, 0xb9, 0x75, 0xf4, 0x19,
	0xc9, 0x95, 0xe0, 0x63, 0x00, 0x3e, 0x13, 0x02, 0x13, 0x03, 0x13, 0x01,
	0xc0, 0x2c, 0xc0, 0x30, 0x00, 0x9f, 0xcc, 0xa9, 0xcc, 0xa8, 0xcc, 0xaa,
	0xc0, 0x2b, 0xc0, 0x2f, 0x00, 0x9e, 0xc0, 0x24, 0xc0, 0x28, 0x00, 0x6b,
	0xc0, 0x23, 0xc0, 0x27, 0x00, 0x67, 0xc0, 0x0a, 0xc0, 0x14, 0x00, 0x39,
	0xc0, 0x09, 0xc0, 0x13, 0x00, 0x33, 0x00, 0x9d, 0x00, 0x9c, 0x00, 0x3d,
	0x00, 0x3c, 0x00, 0x35, 0x00, 0x2f, 0x00, 0xff, 0x01, 0x00, 0x00, 0xa8,
	0x00, 0x00, 0x00, 0x0b, 0x00, 0x09, 0x00, 0x00, 0x06, 0x78, 0x2e, 0x74,
	0x65, 0x73, 0x74, 0x00, 0x0b, 0x00, 0x04, 0x03, 0x00, 0x01, 0x02, 0x00,
	0x0a, 0x00, 0x16, 0x00, 0x14, 0x00, 0x1d, 0x00, 0x17, 0x00, 0x1e, 0x00,
	0x19, 0x00, 0x18, 0x01, 0x00, 0x01, 0x01, 0x01, 0x02, 0x01, 0x03, 0x01,
	0x04, 0x00, 0x23, 0x00, 0x00, 0x00, 0x16, 0x00, 0x00, 0x00, 0x17, 0x00,
	0x00, 0x00, 0x0d, 0x00, 0x2a, 0x00, 0x28, 0x04, 0x03, 0x05, 0x03, 0x06,
	0x03, 0x08, 0x07, 0x08, 0x08, 0x08, 0x09, 0x08, 0x0a, 0x08, 0x0b, 0x08,
	0x04, 0x08, 0x05, 0x08, 0x06, 0x04, 0x01, 0x05, 0x01, 0x06, 0x01, 0x03,
	0x03, 0x03, 0x01, 0x03, 0x02, 0x04, 0x02, 0x05, 0x02, 0x06, 0x02, 0x00,
	0x2b, 0x00, 0x09, 0x08, 0x03, 0x04, 0x03, 0x03, 0x03, 0x02, 0x03, 0x01,
	0x00, 0x2d, 0x00, 0x02, 0x01, 0x01, 0x00, 0x33, 0x00, 0x26, 0x00, 0x24,
	0x00, 0x1d, 0x00, 0x20, 0x80, 0x50, 0x21, 0xef, 0x1e, 0x69, 0x00, 0xec,
	0xd6, 0x56, 0x6c, 0x0b, 0xe5, 0xc1, 0x7e, 0x40, 0x07, 0xc9, 0xb6, 0xd5,
	0xfa, 0xd7, 0xf4, 0x5d, 0xb5, 0xfa, 0x34, 0x95, 0xbe, 0xa2, 0x98, 0x40,
};

static const uint8_t hello_tls12[] = {
	0x16, 0x03, 0x01, 0x00, 0xc6, 0x01, 0x00, 0x00, 0xc2, 0x03, 0x03, 0x29,
	0x6d, 0xf7, 0x6c, 0x84, 0x30, 0xda, 0x7e, 0x5e, 0x50, 0x14, 0x28, 0xa3,
	0x4f, 0xa5, 0x1f, 0xcf, 0x8e, 0x01, 0x4b, 0x13, 0x1b, 0x1f, 0xf4, 0xa9,
	0xdd, 0xe4, 0x5c, 0xe9, 0x04, 0x91, 0x9e, 0x00, 0x00, 0x38, 0xc0, 0x2c,
	0xc0, 0x30, 0x00, 0x9f, 0xcc, 0xa9, 0xcc, 0xa8, 0xcc, 0xaa, 0xc0, 0x2b,
	0xc0, 0x2f, 0x00, 0x9e, 0xc0, 0x24, 0xc0, 0x28, 0x00, 0x6b, 0xc0, 0x23,
	0xc0, 0x27, 0x00, 0x67, 0xc0, 0x0a, 0xc0, 0x14, 0x00, 0x39, 0xc0, 0x09,
	0xc0, 0x13, 0x00, 0x33, 0x00, 0x9d, 0x00, 0x9c, 0x00, 0x3d, 0x00, 0x3c,
	0x00, 0x35, 0x00, 0x2f, 0x00, 0xff, 0x01, 0x00, 0x00, 0x61, 0x00, 0x00,
	0x00, 0x0b, 0x00, 0x09, 0x00, 0x00, 0x06, 0x78, 0x2e, 0x74, 0x65, 0x73,
	0x74, 0x00, 0x0b, 0x00, 0x04, 0x03, 0x00, 0x01, 0x02, 0x00, 0x0a, 0x00,
	0x0c, 0x00, 0x0a, 0x00, 0x1d, 0x00, 0x17, 0x00, 0x1e, 0x00, 0x19, 0x00,
	0x18, 0x00, 0x23, 0x00, 0x00, 0x00, 0x16, 0x00, 0x00, 0x00, 0x17, 0x00,
	0x00, 0x00, 0x0d, 0x00, 0x2a, 0x00, 0x28, 0x04, 0x03, 0x05, 0x03, 0x06,
	0x03, 0x08, 0x07, 0x08, 0x08, 0x08, 0x09, 0x08, 0x0a, 0x08, 0x0b, 0x08,
	0x04, 0x08, 0x05, 0x08, 0x06, 0x04, 0x01, 0x05, 0x01, 0x06, 0x01, 0x03,
	0x03, 0x03, 0x01, 0x03, 0x02, 0x04, 0x02, 0x05, 0x02, 0x06, 0x02,
};

static const uint8_t hello_nosni[] = {
	0x16, 0x03, 0x01, 0x01, 0x24, 0x01, 0x00, 0x01, 0x20, 0x03, 0x03, 0xb6,
	0x1e, 0x27, 0x1a, 0xe2, 0xe7, 0xd4, 0xe4, 0x5d, 0x27, 0x61, 0x57, 0xdc,
	0x47, 0x0d, 0x5b, 0x79, 0x21, 0x65, 0x09, 0xdc, 0xdc, 0xa3, 0xf3, 0xdb,
	0x4f, 0xd1, 0xd0, 0xdb, 0xe6, 0xb3, 0x49, 0x20, 0x9b, 0xd7, 0x05, 0x82,
	0xf1, 0xd1, 0x54, 0x8d, 0x48, 0xea, 0x91, 0x6f, 0xba, 0xb2, 0xba, 0xe0,
	0x38, 0x86, 0x95, 0x6e, 0x30, 0x1c, 0xf2, 0x21, 0x71, 0x61, 0x12, 0x84,
	0x78, 0xa9, 0x9d, 0x11, 0x00, 0x3e, 0x13, 0x02, 0x13, 0x03, 0x13, 0x01,
	0xc0, 0x2c, 0xc0, 0x30, 0x00, 0x9f, 0xcc, 0xa9, 0xcc, 0xa8, 0xcc, 0xaa,
	0xc0, 0x2b, 0xc0, 0x2f, 0x00, 0x9e, 0xc0, 0x24, 0xc0, 0x28, 0x00, 0x6b,
	0xc0, 0x23, 0xc0, 0x27, 0x00, 0x67, 0xc0, 0x0a, 0xc0, 0x14, 0x00, 0x39,
	0xc0, 0x09, 0xc0, 0x13, 0x00, 0x33, 0x00, 0x9d, 0x00, 0x9c, 0x00, 0x3d,
	0x00, 0x3c, 0x00, 0x35, 0x00, 0x2f, 0x00, 0xff, 0x01, 0x00, 0x00, 0x99,
	0x00, 0x0b, 0x00, 0x04, 0x03, 0x00, 0x01, 0x02, 0x00, 0x0a, 0x00, 0x16,
	0x00, 0x14, 0x00, 0x1d, 0x00, 0x17, 0x00, 0x1e, 0x00, 0x19, 0x00, 0x18,
	0x01, 0x00, 0x01, 0x01, 0x01, 0x02, 0x01, 0x03, 0x01, 0x04, 0x00, 0x23,
	0x00, 0x00, 0x00, 0x16, 0x00, 0x00, 0x00, 0x17, 0x00, 0x00, 0x00, 0x0d,
	0x00, 0x2a, 0x00, 0x28, 0x04, 0x03, 0x05, 0x03, 0x06, 0x03, 0x08, 0x07,
	0x08, 0x08, 0x08, 0x09, 0x08, 0x0a, 0x08, 0x0b, 0x08, 0x04, 0x08, 0x05,
	0x08, 0x06, 0x04, 0x01, 0x05, 0x01, 0x06, 0x01, 0x03, 0x03, 0x03, 0x01,
	0x03, 0x02, 0x04, 0x02, 0x05, 0x02, 0x06, 0x02, 0x00, 0x2b, 0x00, 0x09,
	0x08, 0x03, 0x04, 0x03, 0x03, 0x03, 0x02, 0x03, 0x01, 0x00, 0x2d, 0x00,
	0x02, 0x01, 0x01, 0x00, 0x33, 0x00, 0x26, 0x00, 0x24, 0x00, 0x1d, 0x00,
	0x20, 0xbe, 0xda, 0xa6, 0xc1, 0x14, 0xd5, 0xbd, 0x33, 0xd2, 0xab, 0x25,
	0xd0, 0xe9, 0xf6, 0xf7, 0xac, 0x7b, 0xef, 0x59, 0x7f, 0xc8, 0xdc, 0xfb,
	0x84, 0x45, 0x69, 0x5f, 0x75, 0x64, 0x95, 0xd2, 0x77,
};

/* ---- SNI ---------------------------------------------------------------- */

/* A byte builder for crafted messages. */
struct bb {
	uint8_t b[80000];
	size_t n;
};

static void b8(struct bb *b, unsigned v)
{
	b->b[b->n++] = (uint8_t)v;
}

static void b16(struct bb *b, unsigned v)
{
	b8(b, v >> 8);
	b8(b, v);
}

static void b24(struct bb *b, unsigned v)
{
	b8(b, v >> 16);
	b16(b, v & 0xffff);
}

static void bmem(struct bb *b, const void *p, size_t n)
{
	memcpy(b->b + b->n, p, n);
	b->n += n;
}

/* server_name extension with the given list bytes. */
static void ext_raw(struct bb *e, unsigned type, const void *data, size_t n)
{
	b16(e, type);
	b16(e, (unsigned)n);
	bmem(e, data, n);
}

/* server_name extension with one host_name entry. */
static void ext_sni(struct bb *e, const void *name, size_t n)
{
	b16(e, 0x0000);
	b16(e, (unsigned)n + 5);
	b16(e, (unsigned)n + 3);
	b8(e, 0);
	b16(e, (unsigned)n);
	bmem(e, name, n);
}

/* A handshake message: ClientHello with these extensions (NULL: none). */
static void hello_msg(struct bb *hs, const struct bb *exts)
{
	static const uint8_t random[32] = { 1, 2, 3 };
	size_t body = 2 + 32 + 1 + 2 + 2 + 1 + 1 + (exts ? 2 + exts->n : 0);

	hs->n = 0;
	b8(hs, 0x01);
	b24(hs, (unsigned)body);
	b16(hs, 0x0303);
	bmem(hs, random, sizeof(random));
	b8(hs, 0);			/* session id */
	b16(hs, 2);
	b16(hs, 0x1301);		/* TLS_AES_128_GCM_SHA256 */
	b8(hs, 1);
	b8(hs, 0);			/* null compression */
	if (exts) {
		b16(hs, (unsigned)exts->n);
		bmem(hs, exts->b, exts->n);
	}
}

/* Wrap a handshake message into records of at most chunk bytes. */
static void records(struct bb *out, const uint8_t *hs, size_t n, size_t chunk)
{
	size_t off = 0;

	out->n = 0;
	while (off < n) {
		size_t k = n - off < chunk ? n - off : chunk;

		b8(out, 0x16);
		b16(out, 0x0301);
		b16(out, (unsigned)k);
		bmem(out, hs + off, k);
		off += k;
	}
}

/* A whole hello in one record, with one SNI extension naming name. */
static void hello_with_name(struct bb *rec, const void *name, size_t n)
{
	static struct bb exts, hs;

	exts.n = 0;
	ext_sni(&exts, name, n);
	hello_msg(&hs, &exts);
	records(rec, hs.b, hs.n, 16384);
}

static int sni_of(const struct bb *rec, char *host)
{
	return sni_parse(rec->b, rec->n, host, SNI_HOST_MAX);
}

TEST(sni_real_tls13_hello)
{
	struct sni_hello h;
	char host[SNI_HOST_MAX];

	CHECK(sni_parse(hello_tls13, sizeof(hello_tls13), host, sizeof(host)) == 1);
	CHECK(!strcmp(host, "x.test"));
	CHECK(sni_parse_hello(hello_tls13, sizeof(hello_tls13), &h) == 1);
	CHECK(h.bytes == sizeof(hello_tls13));
	CHECK(h.hello_len == sizeof(hello_tls13) - 5);
	CHECK(h.legacy_version == 0x0303);
	CHECK(!h.has_ech);
}

TEST(sni_real_tls12_hello)
{
	char host[SNI_HOST_MAX];

	CHECK(sni_parse(hello_tls12, sizeof(hello_tls12), host, sizeof(host)) == 1);
	CHECK(!strcmp(host, "x.test"));
}

TEST(sni_real_hello_without_sni)
{
	char host[SNI_HOST_MAX] = "junk";

	CHECK(sni_parse(hello_nosni, sizeof(hello_nosni), host, sizeof(host)) == 0);
	CHECK(host[0] == '\0');
}

TEST(sni_every_truncation_is_eagain)
{
	const struct { const uint8_t *p; size_t n; } f[] = {
		{ hello_tls13, sizeof(hello_tls13) },
		{ hello_tls12, sizeof(hello_tls12) },
		{ hello_nosni, sizeof(hello_nosni) },
	};
	char host[SNI_HOST_MAX];
	size_t i, len;

	/* a prefix of a valid hello is never wrong, only short */
	for (i = 0; i < ARRAY_LEN(f); i++)
		for (len = 0; len < f[i].n; len++)
			CHECK(sni_parse(f[i].p, len, host, sizeof(host)) == -EAGAIN);
}

TEST(sni_bit_flips_never_crash)
{
	uint8_t buf[sizeof(hello_tls13)];
	char host[SNI_HOST_MAX];
	size_t i;
	int bit, r, ok = 1;

	for (i = 0; i < sizeof(buf); i++) {
		for (bit = 0; bit < 8; bit++) {
			memcpy(buf, hello_tls13, sizeof(buf));
			buf[i] ^= (uint8_t)(1 << bit);
			r = sni_parse(buf, sizeof(buf), host, sizeof(host));
			if (r != 1 && r != 0 && r != -EAGAIN && r != -EINVAL)
				ok = 0;
			/* whatever is reported is a hostname */
			if (r == 1 && strspn(host, "abcdefghijklmnopqrstuvwxyz"
					     "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") != strlen(host))
				ok = 0;
		}
	}
	CHECK(ok);
}

TEST(sni_hello_split_over_records)
{
	struct bb rec;
	char host[SNI_HOST_MAX];
	size_t len;

	/* the real hello's handshake message, in 40-byte records */
	records(&rec, hello_tls13 + 5, sizeof(hello_tls13) - 5, 40);
	CHECK(sni_of(&rec, host) == 1);
	CHECK(!strcmp(host, "x.test"));
	for (len = 0; len < rec.n; len++)
		CHECK(sni_parse(rec.b, len, host, sizeof(host)) == -EAGAIN);
	/* the handshake header itself split: 1, then 3 bytes */
	records(&rec, hello_tls13 + 5, sizeof(hello_tls13) - 5, 1);
	CHECK(sni_of(&rec, host) == -EINVAL);	/* > SNI_RECORDS_MAX records */
	records(&rec, hello_tls13 + 5, sizeof(hello_tls13) - 5, 20);
	CHECK(sni_of(&rec, host) == 1);		/* exactly 16 records */
}

TEST(sni_too_many_records)
{
	struct bb rec;
	char host[SNI_HOST_MAX];

	records(&rec, hello_tls13 + 5, sizeof(hello_tls13) - 5, 19);
	CHECK(sni_of(&rec, host) == -EINVAL);
}

TEST(sni_large_hello)
{
	static struct bb exts, hs, rec;
	static uint8_t pad[30000];
	char host[SNI_HOST_MAX];

	/* fills one record to 16 KiB exactly */
	exts.n = 0;
	ext_sni(&exts, "big.test", 8);
	ext_raw(&exts, 0x0015, pad, 16384 - 68);
	hello_msg(&hs, &exts);
	CHECK(hs.n == 16384);
	records(&rec, hs.b, hs.n, 16384);
	CHECK(sni_of(&rec, host) == 1);
	CHECK(!strcmp(host, "big.test"));
	/* larger than a record: two records */
	exts.n = 0;
	ext_raw(&exts, 0x0015, pad, sizeof(pad));
	ext_sni(&exts, "bigger.test", 11);
	hello_msg(&hs, &exts);
	records(&rec, hs.b, hs.n, 16384);
	CHECK(sni_of(&rec, host) == 1);
	CHECK(!strcmp(host, "bigger.test"));
}

TEST(sni_record_and_handshake_limits)
{
	uint8_t rec[] = { 0x16, 0x03, 0x01, 0x40, 0x01, 0x01 };	/* 16385 */
	uint8_t zero[] = { 0x16, 0x03, 0x01, 0x00, 0x00 };
	uint8_t huge[] = { 0x16, 0x03, 0x01, 0x00, 0x04, 0x01, 0x01, 0x00, 0x00 };
	uint8_t tiny[] = { 0x16, 0x03, 0x01, 0x00, 0x04, 0x01, 0x00, 0x00, 0x10 };
	char host[SNI_HOST_MAX];

	CHECK(sni_parse(rec, sizeof(rec), host, sizeof(host)) == -EINVAL);
	CHECK(sni_parse(zero, sizeof(zero), host, sizeof(host)) == -EINVAL);
	/* a 64 KiB + hello is refused from its header, not waited for */
	CHECK(sni_parse(huge, sizeof(huge), host, sizeof(host)) == -EINVAL);
	CHECK(sni_parse(tiny, sizeof(tiny), host, sizeof(host)) == -EINVAL);
}

TEST(sni_not_tls)
{
	const char *http = "GET / HTTP/1.1\r\n";
	uint8_t v2[] = { 0x80, 0x2e, 0x01, 0x00, 0x02 };
	uint8_t alert[] = { 0x15, 0x03, 0x01, 0x00, 0x02, 0x02, 0x28 };
	uint8_t badver[] = { 0x16, 0x02 };
	uint8_t server_hello[] = { 0x16, 0x03, 0x03, 0x00, 0x04, 0x02 };
	char host[SNI_HOST_MAX];

	CHECK(sni_parse((const uint8_t *)http, 1, host, sizeof(host)) == -EINVAL);
	CHECK(sni_parse(v2, sizeof(v2), host, sizeof(host)) == -EINVAL);
	CHECK(sni_parse(alert, sizeof(alert), host, sizeof(host)) == -EINVAL);
	CHECK(sni_parse(badver, sizeof(badver), host, sizeof(host)) == -EINVAL);
	CHECK(sni_parse(server_hello, sizeof(server_hello), host, sizeof(host)) == -EINVAL);
	CHECK(sni_parse(NULL, 0, host, sizeof(host)) == -EAGAIN);
	CHECK(sni_parse(hello_tls13, sizeof(hello_tls13), NULL, 0) == -EINVAL);
}

TEST(sni_crafted_names)
{
	static struct bb rec;
	char host[SNI_HOST_MAX];
	char small[4];
	char n253[254];

	/* four labels: 63 + 63 + 63 + 61 letters and three dots */
	memset(n253, 'a', 253);
	n253[63] = n253[127] = n253[191] = '.';
	n253[253] = '\0';
	hello_with_name(&rec, n253, 253);
	CHECK(sni_of(&rec, host) == 1 && !strcmp(host, n253));
	hello_with_name(&rec, "Mixed-Case_host.Example", 23);
	CHECK(sni_of(&rec, host) == 1 && !strcmp(host, "Mixed-Case_host.Example"));
	CHECK(sni_parse(rec.b, rec.n, small, sizeof(small)) == -ENOSPC);

	hello_with_name(&rec, "allowed.test\0evil.test", 22);
	CHECK(sni_of(&rec, host) == -EINVAL);
	hello_with_name(&rec, "a b.test", 8);
	CHECK(sni_of(&rec, host) == -EINVAL);
	hello_with_name(&rec, "a/b.test", 8);
	CHECK(sni_of(&rec, host) == -EINVAL);
	hello_with_name(&rec, "x.test.", 7);
	CHECK(sni_of(&rec, host) == -EINVAL);
	hello_with_name(&rec, ".x.test", 7);
	CHECK(sni_of(&rec, host) == -EINVAL);
	hello_with_name(&rec, "x..test", 7);
	CHECK(sni_of(&rec, host) == -EINVAL);
	hello_with_name(&rec, "", 0);
	CHECK(sni_of(&rec, host) == -EINVAL);
	hello_with_name(&rec, "\xc3\xa9.test", 7);
	CHECK(sni_of(&rec, host) == -EINVAL);
	hello_with_name(&rec, "::1", 3);
	CHECK(sni_of(&rec, host) == -EINVAL);
}

TEST(sni_long_names_refused)
{
	static struct bb rec;
	char name[300];
	char host[SNI_HOST_MAX];

	memset(name, 'a', sizeof(name));
	hello_with_name(&rec, name, 64);		/* one 64-byte label */
	CHECK(sni_of(&rec, host) == -EINVAL);
	hello_with_name(&rec, name, 63);
	CHECK(sni_of(&rec, host) == 1);
	memcpy(name + 63, ".", 1);
	memcpy(name + 127, ".", 1);
	memcpy(name + 191, ".", 1);
	hello_with_name(&rec, name, 254);		/* 4 labels, too long */
	CHECK(sni_of(&rec, host) == -EINVAL);
}

TEST(sni_two_names_or_two_extensions)
{
	static struct bb exts, hs, rec;
	static const uint8_t two[] = {
		0x00, 0x0e,
		0x00, 0x00, 0x04, 'a', '.', 't', 't',
		0x00, 0x00, 0x04, 'b', '.', 't', 't',
	};
	static const uint8_t other_type[] = {
		0x00, 0x07, 0x01, 0x00, 0x04, 'a', '.', 't', 't',
	};
	static const uint8_t short_list[] = {
		0x00, 0x08, 0x00, 0x00, 0x04, 'a', '.', 't', 't',
	};
	static const uint8_t empty_list[] = { 0x00, 0x00 };
	char host[SNI_HOST_MAX];

	exts.n = 0;
	ext_raw(&exts, 0, two, sizeof(two));
	hello_msg(&hs, &exts);
	records(&rec, hs.b, hs.n, 16384);
	CHECK(sni_of(&rec, host) == -EINVAL);

	exts.n = 0;
	ext_sni(&exts, "a.test", 6);
	ext_sni(&exts, "b.test", 6);
	hello_msg(&hs, &exts);
	records(&rec, hs.b, hs.n, 16384);
	CHECK(sni_of(&rec, host) == -EINVAL);

	exts.n = 0;
	ext_raw(&exts, 0, other_type, sizeof(other_type));
	hello_msg(&hs, &exts);
	records(&rec, hs.b, hs.n, 16384);
	CHECK(sni_of(&rec, host) == -EINVAL);

	exts.n = 0;
	ext_raw(&exts, 0, short_list, sizeof(short_list));
	hello_msg(&hs, &exts);
	records(&rec, hs.b, hs.n, 16384);
	CHECK(sni_of(&rec, host) == -EINVAL);

	exts.n = 0;
	ext_raw(&exts, 0, empty_list, sizeof(empty_list));
	hello_msg(&hs, &exts);
	records(&rec, hs.b, hs.n, 16384);
	CHECK(sni_of(&rec, host) == -EINVAL);

	/* any repeated extension type */
	exts.n = 0;
	ext_raw(&exts, 0x002b, "\x02\x03\x04", 3);
	ext_sni(&exts, "a.test", 6);
	ext_raw(&exts, 0x002b, "\x02\x03\x04", 3);
	hello_msg(&hs, &exts);
	records(&rec, hs.b, hs.n, 16384);
	CHECK(sni_of(&rec, host) == -EINVAL);
}

TEST(sni_inconsistent_lengths)
{
	static struct bb exts, hs, rec;
	char host[SNI_HOST_MAX];
	size_t ext_at;

	exts.n = 0;
	ext_sni(&exts, "a.test", 6);
	hello_msg(&hs, &exts);
	ext_at = hs.n - exts.n - 2;

	/* extensions block longer than the hello */
	records(&rec, hs.b, hs.n, 16384);
	rec.b[5 + ext_at + 1] += 1;
	CHECK(sni_of(&rec, host) == -EINVAL);
	/* shorter: bytes left over */
	records(&rec, hs.b, hs.n, 16384);
	rec.b[5 + ext_at + 1] -= 1;
	CHECK(sni_of(&rec, host) == -EINVAL);
	/* one extension's length past the block */
	records(&rec, hs.b, hs.n, 16384);
	rec.b[5 + ext_at + 2 + 3] += 1;
	CHECK(sni_of(&rec, host) == -EINVAL);
	/* the name's length past the list */
	records(&rec, hs.b, hs.n, 16384);
	rec.b[rec.n - 7] = 0x10;
	CHECK(sni_of(&rec, host) == -EINVAL);
	/* handshake length shorter than the record: bytes after the hello */
	records(&rec, hs.b, hs.n, 16384);
	rec.b[8] -= 1;
	CHECK(sni_of(&rec, host) == -EINVAL);
	/* record carries the hello and one more byte */
	records(&rec, hs.b, hs.n, 16384);
	rec.b[4] += 1;
	rec.b[rec.n++] = 0x00;
	CHECK(sni_of(&rec, host) == -EINVAL);
}

TEST(sni_hello_fields)
{
	static struct bb hs, rec;
	char host[SNI_HOST_MAX];

	/* session id of 33 bytes */
	hello_msg(&hs, NULL);
	records(&rec, hs.b, hs.n, 16384);
	CHECK(sni_of(&rec, host) == 0);		/* no extensions at all */
	rec.b[5 + 4 + 34] = 33;
	CHECK(sni_of(&rec, host) == -EINVAL);
	/* odd cipher suite vector */
	records(&rec, hs.b, hs.n, 16384);
	rec.b[5 + 4 + 35 + 1] = 1;
	CHECK(sni_of(&rec, host) == -EINVAL);
	/* no compression method */
	records(&rec, hs.b, hs.n, 16384);
	rec.b[5 + 4 + 35 + 4] = 0;
	CHECK(sni_of(&rec, host) == -EINVAL);
	/* client_version not 3.x */
	records(&rec, hs.b, hs.n, 16384);
	rec.b[5 + 4] = 2;
	CHECK(sni_of(&rec, host) == -EINVAL);
}

TEST(sni_ech_and_data_after_hello)
{
	static struct bb exts, hs, rec;
	struct sni_hello h;
	size_t n;

	exts.n = 0;
	ext_sni(&exts, "public.test", 11);
	ext_raw(&exts, 0xfe0d, "\x00\x01\x02", 3);
	hello_msg(&hs, &exts);
	records(&rec, hs.b, hs.n, 16384);
	n = rec.n;
	/* early data in a record of its own after the hello: not ours */
	bmem(&rec, "\x17\x03\x03\x00\x02hi", 7);
	CHECK(sni_parse_hello(rec.b, rec.n, &h) == 1);
	CHECK(h.has_ech);
	CHECK(!strcmp(h.host, "public.test"));
	CHECK(h.bytes == n);
}

/* a hello's handshake message twice in one record: the second is not ours to skip */
TEST(sni_two_hellos_in_one_record)
{
	static struct bb exts, hs, two, rec;
	char host[SNI_HOST_MAX];

	exts.n = 0;
	ext_sni(&exts, "a.test", 6);
	hello_msg(&hs, &exts);
	two.n = 0;
	bmem(&two, hs.b, hs.n);
	exts.n = 0;
	ext_sni(&exts, "b.test", 6);
	hello_msg(&hs, &exts);
	bmem(&two, hs.b, hs.n);
	records(&rec, two.b, two.n, 16384);
	CHECK(sni_of(&rec, host) == -EINVAL);
}

/* a host_name entry and then one of another type: refused, not the first taken */
TEST(sni_host_name_then_other_types)
{
	static struct bb exts, hs, rec;
	static const uint8_t then_other[] = {
		0x00, 0x0e,
		0x00, 0x00, 0x04, 'a', '.', 't', 't',
		0x01, 0x00, 0x04, 'b', '.', 't', 't',
	};
	static const uint8_t type_255[] = {
		0x00, 0x07, 0xff, 0x00, 0x04, 'a', '.', 't', 't',
	};
	char host[SNI_HOST_MAX];

	exts.n = 0;
	ext_raw(&exts, 0, then_other, sizeof(then_other));
	hello_msg(&hs, &exts);
	records(&rec, hs.b, hs.n, 16384);
	CHECK(sni_of(&rec, host) == -EINVAL);
	exts.n = 0;
	ext_raw(&exts, 0, type_255, sizeof(type_255));
	hello_msg(&hs, &exts);
	records(&rec, hs.b, hs.n, 16384);
	CHECK(sni_of(&rec, host) == -EINVAL);
}

/* ---- the server's first answer, the client's second hello ---------------- */

static const uint8_t hrr_random[32] = {
	0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11, 0xbe, 0x1d, 0x8c, 0x02,
	0x1e, 0x65, 0xb8, 0x91, 0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e,
	0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c,
};

/* A ServerHello (TLS 1.3's: supported_versions) with this random, in records of chunk. */
static void server_hello(struct bb *out, const uint8_t random[32], size_t chunk)
{
	static struct bb hs;

	hs.n = 0;
	b8(&hs, 0x02);
	b24(&hs, 2 + 32 + 1 + 2 + 1 + 2 + 6);
	b16(&hs, 0x0303);
	bmem(&hs, random, 32);
	b8(&hs, 0);
	b16(&hs, 0x1301);
	b8(&hs, 0);
	b16(&hs, 6);
	b16(&hs, 0x002b);
	b16(&hs, 2);
	b16(&hs, 0x0304);
	records(out, hs.b, hs.n, chunk);
}

TEST(sni_server_retry_recognised)
{
	static struct bb rec;
	uint8_t other[32];
	size_t len;

	/* whole, one record: every prefix too short to tell, then a retry */
	server_hello(&rec, hrr_random, 16384);
	CHECK(sni_server_retries(rec.b, rec.n) == 1);
	for (len = 0; len < 5 + 4 + 2 + 32; len++)
		CHECK(sni_server_retries(rec.b, len) == -EAGAIN);
	CHECK(sni_server_retries(rec.b, len) == 1);
	/* one byte a record: put together */
	server_hello(&rec, hrr_random, 1);
	CHECK(sni_server_retries(rec.b, rec.n) == 1);
	/* the 38th byte of the message is the last of the random's */
	for (len = 0; len < 37 * 6 + 6; len++)
		CHECK(sni_server_retries(rec.b, len) == -EAGAIN);
	CHECK(sni_server_retries(rec.b, len) == 1);
	/* a ServerHello, even one a byte off the retry's random */
	memcpy(other, hrr_random, sizeof(other));
	other[31] ^= 1;
	server_hello(&rec, other, 16384);
	CHECK(sni_server_retries(rec.b, rec.n) == 0);
	other[0] ^= 1;
	server_hello(&rec, other, 7);
	CHECK(sni_server_retries(rec.b, rec.n) == 0);
	/* an alert, a ChangeCipherSpec, application data, not TLS: no retry */
	CHECK(sni_server_retries((const uint8_t *)"\x15\x03\x03\x00\x02\x02\x28", 7) == 0);
	CHECK(sni_server_retries((const uint8_t *)"\x14\x03\x03\x00\x01\x01", 6) == 0);
	CHECK(sni_server_retries((const uint8_t *)"\x17\x03\x03", 3) == 0);
	CHECK(sni_server_retries((const uint8_t *)"HTTP/1.1 400", 12) == 0);
	/* a handshake record whose message is not a ServerHello */
	CHECK(sni_server_retries((const uint8_t *)"\x16\x03\x03\x00\x04\x0b\x00\x00\x00", 9) == 0);
	/* empty records say nothing */
	CHECK(sni_server_retries((const uint8_t *)"\x16\x03\x03\x00\x00", 5) == -EAGAIN);
	CHECK(sni_server_retries(NULL, 0) == -EAGAIN);
}

TEST(sni_second_hello_after_a_retry)
{
	static const uint8_t ccs[] = { 0x14, 0x03, 0x03, 0x00, 0x01, 0x01 };
	static struct bb rec, in;
	struct sni_hello h;
	size_t len;

	hello_with_name(&rec, "a.test", 6);
	/* without a ChangeCipherSpec, and behind one */
	CHECK(sni_parse_retry(rec.b, rec.n, &h) == 1 && h.bytes == rec.n);
	CHECK(!strcmp(h.host, "a.test"));
	in.n = 0;
	bmem(&in, ccs, sizeof(ccs));
	bmem(&in, rec.b, rec.n);
	CHECK(sni_parse_retry(in.b, in.n, &h) == 1 && h.bytes == in.n);
	CHECK(!strcmp(h.host, "a.test"));
	for (len = 0; len < in.n; len++)
		CHECK(sni_parse_retry(in.b, len, &h) == -EAGAIN);
	/* two of them, one of another value or length, of no 3.x version */
	in.n = 0;
	bmem(&in, ccs, sizeof(ccs));
	bmem(&in, ccs, sizeof(ccs));
	bmem(&in, rec.b, rec.n);
	CHECK(sni_parse_retry(in.b, in.n, &h) == -EINVAL);
	CHECK(sni_parse_retry((const uint8_t *)"\x14\x03\x03\x00\x01\x02", 6, &h) == -EINVAL);
	CHECK(sni_parse_retry((const uint8_t *)"\x14\x03\x03\x00\x02", 5, &h) == -EINVAL);
	CHECK(sni_parse_retry((const uint8_t *)"\x14\x03\x05", 3, &h) == -EINVAL);
	CHECK(sni_parse_retry((const uint8_t *)"\x14\x02", 2, &h) == -EINVAL);
	/* behind it, anything but a hello */
	CHECK(sni_parse_retry((const uint8_t *)"\x14\x03\x03\x00\x01\x01\x17", 7, &h) == -EINVAL);
}

TEST(sni_sslv2_hello_detected)
{
	static const uint8_t v2[] = {
		0x80, 0x2e, 0x01, 0x03, 0x03, 0x00, 0x03, 0x00, 0x00, 0x00, 0x20,
		0x00, 0xc0, 0x2f,
	};
	char host[SNI_HOST_MAX];

	CHECK(sni_v2_hello(v2, sizeof(v2)) == 1);
	CHECK(sni_v2_hello(v2, 3) == 1);
	CHECK(sni_v2_hello(v2, 2) == -EAGAIN);
	CHECK(sni_v2_hello(v2, 1) == -EAGAIN);
	CHECK(sni_v2_hello(NULL, 0) == -EAGAIN);
	/* an SSL 2 message of another type, plaintext, a TLS record: not one */
	CHECK(sni_v2_hello((const uint8_t *)"\x80\x2e\x04", 3) == 0);
	CHECK(sni_v2_hello((const uint8_t *)"GET / HTTP/1.1", 14) == 0);
	CHECK(sni_v2_hello(hello_tls13, sizeof(hello_tls13)) == 0);
	/* and the hello parser never reads a name out of one */
	CHECK(sni_parse(v2, sizeof(v2), host, sizeof(host)) == -EINVAL);
}

int main(void)
{
	unit_run_all();
	UNIT_DONE();
}
