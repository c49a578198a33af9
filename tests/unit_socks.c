/*
 * unit_socks.c - the SOCKS5 parser (socks.c): real requests at every split
 * point, refusals, reply encoding, random input.  Everything is bytes.
 */
#include "socks.h"
#include "unit.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- SOCKS5 -------------------------------------------------------------- */

/* greeting (no auth, user/pass) + CONNECT example.test:443 */
static const uint8_t socks_domain_req[] = {
	0x05, 0x02, 0x00, 0x02,
	0x05, 0x01, 0x00, 0x03, 12,
	'e', 'x', 'a', 'm', 'p', 'l', 'e', '.', 't', 'e', 's', 't',
	0x01, 0xbb,
};
#define SOCKS_GREETING_LEN 4

/* Feed everything at once; returns the result, fills consumed/out. */
static int socks_all(struct socks_conn *c, const uint8_t *in, size_t len,
		     size_t *consumed, uint8_t *out, size_t *outlen)
{
	*outlen = SOCKS_OUT_MAX;
	socks_init(c);
	return socks_feed(c, in, len, consumed, out, outlen);
}

TEST(socks_domain_connect)
{
	uint8_t out[SOCKS_OUT_MAX];
	struct socks_conn c;
	size_t used, outlen;

	CHECK(socks_all(&c, socks_domain_req, sizeof(socks_domain_req), &used,
			out, &outlen) == SOCKS_REQUEST_READY);
	CHECK(used == sizeof(socks_domain_req));
	CHECK(outlen == 2 && out[0] == 5 && out[1] == 0);
	CHECK(c.atyp == SOCKS_ATYP_DOMAIN);
	CHECK(!strcmp(c.host, "example.test"));
	CHECK(c.port == 443);
	/* later calls change nothing */
	outlen = sizeof(out);
	CHECK(socks_feed(&c, (const uint8_t *)"x", 1, &used, out, &outlen) ==
	      SOCKS_REQUEST_READY);
	CHECK(used == 0 && outlen == 0);
}

TEST(socks_byte_by_byte)
{
	uint8_t out[SOCKS_OUT_MAX], all[64];
	struct socks_conn c;
	size_t i, used, outlen, total = 0;
	int r = SOCKS_NEED_MORE;

	socks_init(&c);
	for (i = 0; i < sizeof(socks_domain_req); i++) {
		outlen = sizeof(out);
		r = socks_feed(&c, socks_domain_req + i, 1, &used, out, &outlen);
		CHECK(used == 1);
		memcpy(all + total, out, outlen);
		total += outlen;
		if (i + 1 < sizeof(socks_domain_req))
			CHECK(r == SOCKS_NEED_MORE);
		/* the method reply goes out as soon as the greeting is whole */
		if (i + 1 == SOCKS_GREETING_LEN)
			CHECK(outlen == 2);
	}
	CHECK(r == SOCKS_REQUEST_READY);
	CHECK(total == 2 && all[1] == 0);
	CHECK(!strcmp(c.host, "example.test") && c.port == 443);
}

TEST(socks_every_split_point)
{
	uint8_t out[SOCKS_OUT_MAX];
	struct socks_conn c;
	size_t cut, used, used2, outlen;
	int r, ok = 1;

	for (cut = 0; cut <= sizeof(socks_domain_req); cut++) {
		socks_init(&c);
		outlen = sizeof(out);
		r = socks_feed(&c, socks_domain_req, cut, &used, out, &outlen);
		if (used != cut)
			ok = 0;
		if (r != SOCKS_REQUEST_READY) {
			outlen = sizeof(out);
			r = socks_feed(&c, socks_domain_req + cut,
				       sizeof(socks_domain_req) - cut, &used2,
				       out, &outlen);
		}
		if (r != SOCKS_REQUEST_READY || strcmp(c.host, "example.test"))
			ok = 0;
	}
	CHECK(ok);
}

TEST(socks_tunnel_bytes_not_consumed)
{
	uint8_t in[sizeof(socks_domain_req) + 5], out[SOCKS_OUT_MAX];
	struct socks_conn c;
	size_t used, outlen;

	memcpy(in, socks_domain_req, sizeof(socks_domain_req));
	memcpy(in + sizeof(socks_domain_req), "\x16\x03\x01\x00\x10", 5);
	CHECK(socks_all(&c, in, sizeof(in), &used, out, &outlen) ==
	      SOCKS_REQUEST_READY);
	CHECK(used == sizeof(socks_domain_req));
}

TEST(socks_ipv4_and_ipv6)
{
	static const uint8_t v4[] = {
		0x05, 0x01, 0x00, 0x05, 0x01, 0x00, 0x01, 192, 0, 2, 7, 0x00, 0x50,
	};
	static const uint8_t v6[] = {
		0x05, 0x01, 0x00, 0x05, 0x01, 0x00, 0x04,
		0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01,
		0x1f, 0x90,
	};
	const struct sockaddr_in6 *sin6;
	const struct sockaddr_in *sin;
	uint8_t out[SOCKS_OUT_MAX];
	struct socks_conn c;
	size_t used, outlen;

	CHECK(socks_all(&c, v4, sizeof(v4), &used, out, &outlen) == SOCKS_REQUEST_READY);
	sin = (const struct sockaddr_in *)&c.addr;
	CHECK(c.atyp == SOCKS_ATYP_IPV4 && !strcmp(c.host, "192.0.2.7"));
	CHECK(sin->sin_family == AF_INET && ntohs(sin->sin_port) == 80);

	CHECK(socks_all(&c, v6, sizeof(v6), &used, out, &outlen) == SOCKS_REQUEST_READY);
	sin6 = (const struct sockaddr_in6 *)&c.addr;
	CHECK(c.atyp == SOCKS_ATYP_IPV6 && !strcmp(c.host, "2001:db8::1"));
	CHECK(sin6->sin6_family == AF_INET6 && c.port == 8080);
}

TEST(socks_no_acceptable_method)
{
	static const uint8_t userpass[] = { 0x05, 0x01, 0x02 };
	static const uint8_t none[] = { 0x05, 0x00 };
	uint8_t out[SOCKS_OUT_MAX];
	struct socks_conn c;
	size_t used, outlen;

	CHECK(socks_all(&c, userpass, sizeof(userpass), &used, out, &outlen) ==
	      SOCKS_ERROR);
	CHECK(outlen == 2 && out[0] == 5 && out[1] == 0xff);
	CHECK(c.err == -EACCES);
	CHECK(socks_all(&c, none, sizeof(none), &used, out, &outlen) == SOCKS_ERROR);
	CHECK(outlen == 2 && out[1] == 0xff);
	/* a failed connection stays failed */
	outlen = sizeof(out);
	CHECK(socks_feed(&c, none, 1, &used, out, &outlen) == SOCKS_ERROR);
	CHECK(used == 0 && outlen == 0);
}

TEST(socks_wrong_version)
{
	static const uint8_t socks4[] = { 0x04, 0x01, 0x00, 0x50, 1, 2, 3, 4, 0 };
	static const uint8_t http[] = "CONNECT a:443 HTTP/1.1\r\n";
	uint8_t out[SOCKS_OUT_MAX];
	struct socks_conn c;
	size_t used, outlen;

	CHECK(socks_all(&c, socks4, sizeof(socks4), &used, out, &outlen) == SOCKS_ERROR);
	CHECK(outlen == 0 && used == 1 && c.err == -EPROTO);
	CHECK(socks_all(&c, http, sizeof(http) - 1, &used, out, &outlen) == SOCKS_ERROR);
	CHECK(outlen == 0 && used == 1);
}

/* Greeting, then this request; the reply code the client got. */
static int socks_request(const uint8_t *req, size_t n, struct socks_conn *c,
			 uint8_t *rep)
{
	uint8_t in[300], out[SOCKS_OUT_MAX];
	size_t used, outlen;
	int r;

	memcpy(in, "\x05\x01\x00", 3);
	memcpy(in + 3, req, n);
	r = socks_all(c, in, n + 3, &used, out, &outlen);
	*rep = outlen >= 4 ? out[3] : 0xee;
	return r;
}

TEST(socks_unsupported_commands)
{
	static const uint8_t bind[] = { 0x05, 0x02, 0x00, 0x01, 1, 2, 3, 4, 0, 80 };
	static const uint8_t udp[] = { 0x05, 0x03, 0x00, 0x01, 1, 2, 3, 4, 0, 80 };
	struct socks_conn c;
	uint8_t rep;

	CHECK(socks_request(bind, sizeof(bind), &c, &rep) == SOCKS_ERROR);
	CHECK(rep == SOCKS_REP_CMD_UNSUPPORTED && c.err == -ENOTSUP);
	CHECK(socks_request(udp, sizeof(udp), &c, &rep) == SOCKS_ERROR);
	CHECK(rep == SOCKS_REP_CMD_UNSUPPORTED);
	/* refused on the command byte, before the address arrives */
	CHECK(socks_request(udp, 2, &c, &rep) == SOCKS_ERROR);
	CHECK(rep == SOCKS_REP_CMD_UNSUPPORTED);
}

TEST(socks_bad_requests)
{
	static const uint8_t atyp[] = { 0x05, 0x01, 0x00, 0x05, 1, 2, 3, 4, 0, 80 };
	static const uint8_t rsv[] = { 0x05, 0x01, 0x01, 0x01, 1, 2, 3, 4, 0, 80 };
	static const uint8_t ver[] = { 0x04, 0x01, 0x00, 0x01, 1, 2, 3, 4, 0, 80 };
	static const uint8_t port0[] = { 0x05, 0x01, 0x00, 0x01, 1, 2, 3, 4, 0, 0 };
	static const uint8_t nul[] = { 0x05, 0x01, 0x00, 0x03, 8,
		'a', '.', 't', '\0', 'e', 'v', 'i', 'l', 0, 80 };
	static const uint8_t colon[] = { 0x05, 0x01, 0x00, 0x03, 5,
		'a', ':', '4', '4', '3', 0, 80 };
	static const uint8_t empty[] = { 0x05, 0x01, 0x00, 0x03, 0, 0, 80 };
	static const uint8_t at[] = { 0x05, 0x01, 0x00, 0x03, 5,
		'a', '@', 'b', '.', 'c', 0, 80 };
	struct socks_conn c;
	uint8_t rep;

	CHECK(socks_request(atyp, sizeof(atyp), &c, &rep) == SOCKS_ERROR);
	CHECK(rep == SOCKS_REP_ATYP_UNSUPPORTED);
	CHECK(socks_request(rsv, sizeof(rsv), &c, &rep) == SOCKS_ERROR);
	CHECK(rep == SOCKS_REP_GENERAL_FAILURE);
	CHECK(socks_request(ver, sizeof(ver), &c, &rep) == SOCKS_ERROR);
	CHECK(socks_request(port0, sizeof(port0), &c, &rep) == SOCKS_ERROR);
	CHECK(socks_request(nul, sizeof(nul), &c, &rep) == SOCKS_ERROR);
	CHECK(rep == SOCKS_REP_GENERAL_FAILURE && c.host[0] == '\0');
	CHECK(socks_request(colon, sizeof(colon), &c, &rep) == SOCKS_ERROR);
	CHECK(socks_request(empty, sizeof(empty), &c, &rep) == SOCKS_ERROR);
	CHECK(socks_request(at, sizeof(at), &c, &rep) == SOCKS_ERROR);
}

/*
 * Found by fuzz_socks: a refusal took a different number of bytes when the
 * request came whole than when it came in pieces.  It must end on the
 * offending byte either way (fuzz/corpus/socks/bind).
 */
TEST(socks_refusal_independent_of_chunking)
{
	static const uint8_t in[] = {
		0x05, 0x01, 0x00,
		0x05, 0x02, 0x00, 0x01, 0x01, 0x02, 0x03, 0x04, 0x00, 0x50,
	};
	uint8_t out[SOCKS_OUT_MAX], all[2 * SOCKS_OUT_MAX];
	struct socks_conn c;
	size_t used, outlen, off = 0, total = 0, whole_used, whole_out;
	int r;

	CHECK(socks_all(&c, in, sizeof(in), &whole_used, all, &whole_out) == SOCKS_ERROR);
	CHECK(whole_used == 5);		/* greeting, then VER CMD */
	socks_init(&c);
	do {
		size_t chunk = sizeof(in) - off < 2 ? sizeof(in) - off : 2;

		outlen = sizeof(out);
		r = socks_feed(&c, in + off, chunk, &used, out, &outlen);
		memcpy(all + total, out, outlen);
		total += outlen;
		off += used;
	} while (r == SOCKS_NEED_MORE && off < sizeof(in));
	CHECK(r == SOCKS_ERROR && off == whole_used && total == whole_out);
	CHECK(all[3] == SOCKS_REP_CMD_UNSUPPORTED);
}

TEST(socks_longest_domain)
{
	uint8_t req[4 + 1 + 255 + 2];
	struct socks_conn c;
	uint8_t rep;
	size_t i;

	memcpy(req, "\x05\x01\x00\x03", 4);
	req[4] = 255;
	for (i = 0; i < 255; i++)
		req[5 + i] = (i % 64 == 63) ? '.' : 'a';
	req[5 + 255] = 0x01;
	req[5 + 256] = 0xbb;
	CHECK(socks_request(req, sizeof(req), &c, &rep) == SOCKS_REQUEST_READY);
	CHECK(strlen(c.host) == 255);
}

TEST(socks_reply_encoding)
{
	struct sockaddr_in6 sin6 = { .sin6_family = AF_INET6, .sin6_port = htons(1080) };
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(8080) };
	uint8_t out[SOCKS_REPLY_MAX];

	CHECK(socks_reply(out, SOCKS_REP_NOT_ALLOWED, NULL) == 10);
	CHECK(!memcmp(out, "\x05\x02\x00\x01\x00\x00\x00\x00\x00\x00", 10));
	inet_pton(AF_INET, "10.0.0.1", &sin.sin_addr);
	CHECK(socks_reply(out, 0, (struct sockaddr *)&sin) == 10);
	CHECK(!memcmp(out, "\x05\x00\x00\x01\x0a\x00\x00\x01\x1f\x90", 10));
	inet_pton(AF_INET6, "::1", &sin6.sin6_addr);
	CHECK(socks_reply(out, 0, (struct sockaddr *)&sin6) == 22);
	CHECK(out[3] == 4 && out[19] == 1 && out[20] == 0x04 && out[21] == 0x38);
}

TEST(socks_reply_codes)
{
	CHECK(socks_reply_code(0) == SOCKS_REP_SUCCEEDED);
	CHECK(socks_reply_code(-ECONNREFUSED) == SOCKS_REP_REFUSED);
	CHECK(socks_reply_code(ENETUNREACH) == SOCKS_REP_NET_UNREACHABLE);
	CHECK(socks_reply_code(-EHOSTUNREACH) == SOCKS_REP_HOST_UNREACHABLE);
	CHECK(socks_reply_code(-EACCES) == SOCKS_REP_NOT_ALLOWED);
	CHECK(socks_reply_code(-EIO) == SOCKS_REP_GENERAL_FAILURE);
}

TEST(socks_bad_arguments)
{
	uint8_t out[4];
	struct socks_conn c;
	size_t used, outlen = sizeof(out);

	socks_init(&c);
	CHECK(socks_feed(&c, socks_domain_req, 4, &used, out, &outlen) == SOCKS_ERROR);
	CHECK(c.err == -EINVAL && used == 0);
}

TEST(socks_random_input_invariants)
{
	uint8_t in[600], out[SOCKS_OUT_MAX];
	struct socks_conn c;
	unsigned seed = 1;
	size_t used, outlen, off;
	int i, r, ok = 1;

	for (i = 0; i < 20000; i++) {
		size_t n = (size_t)(rand_r(&seed) % sizeof(in)), k;

		for (k = 0; k < n; k++)
			in[k] = (uint8_t)rand_r(&seed);
		/* mostly well-formed heads so the deeper states are reached */
		if (n > 3 && i % 2) {
			in[0] = 5;
			in[1] = 1;
			in[2] = 0;
			in[3] = 5;
		}
		socks_init(&c);
		off = 0;
		do {
			size_t chunk = 1 + (size_t)rand_r(&seed) % 7;

			if (chunk > n - off)
				chunk = n - off;
			outlen = sizeof(out);
			r = socks_feed(&c, in + off, chunk, &used, out, &outlen);
			if (used > chunk || outlen > SOCKS_OUT_MAX)
				ok = 0;
			off += used;
		} while (r == SOCKS_NEED_MORE && off < n);
		if (r == SOCKS_REQUEST_READY && (c.port == 0 || !c.host[0]))
			ok = 0;
	}
	CHECK(ok);
}

int main(void)
{
	unit_run_all();
	UNIT_DONE();
}
