/*
 * sni.c - the server_name of a TLS ClientHello, read without TLS.
 *
 * A small parser by hand: there is no maintained library that peeks at a
 * ClientHello without terminating the connection.  Every read goes through
 * a cursor that knows how many bytes are left, every length is checked
 * against the bytes that enclose it, and nothing recurses.
 *
 * Strictness is on purpose.  The proxy decides on the name it reads here
 * and the server decides on the name it reads from the same bytes; where
 * two parsers could disagree (two names, two server_name extensions, bytes
 * after the hello, a name with a NUL in it) the hello is refused instead of
 * guessed at.
 */
#include "sni.h"
#include "hostname.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define TLS_CT_CCS		0x14	/* change_cipher_spec */
#define TLS_CT_HANDSHAKE	0x16
#define TLS_HS_CLIENT_HELLO	0x01
#define TLS_HS_SERVER_HELLO	0x02
#define TLS_RECORD_HDR		5
#define TLS_HS_HDR		4
#define TLS_RECORD_MAX		16384	/* plaintext fragment limit, RFC 8446 5.1 */
#define TLS_RANDOM_LEN		32
#define TLS_SESSION_ID_MAX	32

/* version(2) random(32) session_id(1+0) suites(2+2) compression(1+1) */
#define HELLO_BODY_MIN		41

#define EXT_SERVER_NAME		0x0000
#define EXT_ECH			0xfe0d	/* encrypted_client_hello */
#define SNI_TYPE_HOST_NAME	0

struct cur {
	const uint8_t *p;
	size_t left;
};

static bool cur_u8(struct cur *c, uint8_t *v)
{
	if (c->left < 1)
		return false;
	*v = c->p[0];
	c->p++;
	c->left--;
	return true;
}

static bool cur_u16(struct cur *c, uint16_t *v)
{
	if (c->left < 2)
		return false;
	*v = (uint16_t)(c->p[0] << 8 | c->p[1]);
	c->p += 2;
	c->left -= 2;
	return true;
}

/* Take the next n bytes as a cursor of their own. */
static bool cur_take(struct cur *c, size_t n, struct cur *sub)
{
	if (c->left < n)
		return false;
	sub->p = c->p;
	sub->left = n;
	c->p += n;
	c->left -= n;
	return true;
}

/* A vector with a one-byte length in front (opaque x<0..255>). */
static bool cur_vec8(struct cur *c, struct cur *sub)
{
	uint8_t n;

	return cur_u8(c, &n) && cur_take(c, n, sub);
}

/* A vector with a two-byte length in front (opaque x<0..2^16-1>). */
static bool cur_vec16(struct cur *c, struct cur *sub)
{
	uint16_t n;

	return cur_u16(c, &n) && cur_take(c, n, sub);
}

/*
 * Check as much of a record header as is there, so that a client talking
 * something else than TLS is refused on its first byte.  Returns 0 with
 * *rlen set, -EAGAIN for a short header, -EINVAL.
 */
static int record_header(const uint8_t *p, size_t avail, size_t *rlen)
{
	if (avail >= 1 && p[0] != TLS_CT_HANDSHAKE)
		return -EINVAL;
	/* record version 3.0 .. 3.4; SSLv2 hellos carry no SNI */
	if (avail >= 2 && p[1] != 3)
		return -EINVAL;
	if (avail >= 3 && p[2] > 4)
		return -EINVAL;
	if (avail < TLS_RECORD_HDR)
		return -EAGAIN;
	*rlen = (size_t)p[3] << 8 | p[4];
	/* empty handshake fragments are forbidden (RFC 8446 5.1) */
	if (*rlen == 0 || *rlen > TLS_RECORD_MAX)
		return -EINVAL;
	return 0;
}

/* The handshake header, once its 4 bytes are known: the hello's size. */
static int hello_size(const uint8_t hdr[TLS_HS_HDR], size_t *need)
{
	size_t body = (size_t)hdr[1] << 16 | (size_t)hdr[2] << 8 | hdr[3];

	if (hdr[0] != TLS_HS_CLIENT_HELLO)
		return -EINVAL;
	if (body < HELLO_BODY_MIN || body + TLS_HS_HDR > SNI_HELLO_MAX)
		return -EINVAL;
	*need = body + TLS_HS_HDR;
	return 0;
}

/*
 * Walk the records until they hold the whole hello.  On 0, *need is the
 * hello's length, *nrec the records it spans and *used the input bytes
 * those records take.  The records must end exactly where the hello does:
 * a client sends nothing else before the server answers.
 */
static int scan_records(const uint8_t *buf, size_t len, size_t *need,
			size_t *nrec, size_t *used)
{
	uint8_t hdr[TLS_HS_HDR] = { 0 };
	size_t off = 0, got = 0, declared = 0;
	int r;

	*need = 0;
	*nrec = 0;
	for (;;) {
		size_t rlen = 0, frag, i;

		r = record_header(buf + off, len - off, &rlen);
		if (r)
			return r;
		if (++*nrec > SNI_RECORDS_MAX)
			return -EINVAL;
		frag = len - off - TLS_RECORD_HDR;
		if (frag > rlen)
			frag = rlen;
		for (i = 0; got + i < TLS_HS_HDR && i < frag; i++)
			hdr[got + i] = buf[off + TLS_RECORD_HDR + i];
		got += frag;
		declared += rlen;
		if (got >= 1 && hdr[0] != TLS_HS_CLIENT_HELLO)
			return -EINVAL;
		if (!*need && got >= TLS_HS_HDR) {
			r = hello_size(hdr, need);
			if (r)
				return r;
		}
		if (*need && declared > *need)
			return -EINVAL;
		if (frag < rlen)
			return -EAGAIN;
		off += TLS_RECORD_HDR + rlen;
		if (*need && declared == *need) {
			*used = off;
			return 0;
		}
		if (off == len)
			return -EAGAIN;
	}
}

/* Copy the fragments of a hello that spans records into one buffer. */
static int reassemble(const uint8_t *buf, size_t need, uint8_t **own)
{
	size_t off = 0, copied = 0;
	uint8_t *p;

	p = malloc(need);
	if (!p)
		return -ENOMEM;
	/* scan_records() checked every header and that the sizes add up */
	while (copied < need) {
		size_t rlen = (size_t)buf[off + 3] << 8 | buf[off + 4];

		memcpy(p + copied, buf + off + TLS_RECORD_HDR, rlen);
		copied += rlen;
		off += TLS_RECORD_HDR + rlen;
	}
	*own = p;
	return 0;
}

/* server_name (RFC 6066 3): exactly one entry, of type host_name. */
static int parse_server_name(struct cur *ext, struct sni_hello *out)
{
	struct cur list, name;
	uint8_t type;

	if (!cur_vec16(ext, &list) || ext->left != 0)
		return -EINVAL;
	if (!cur_u8(&list, &type) || type != SNI_TYPE_HOST_NAME)
		return -EINVAL;
	/* a second entry would leave bytes in the list */
	if (!cur_vec16(&list, &name) || list.left != 0)
		return -EINVAL;
	if (!hostname_valid(name.p, name.left, SNI_HOST_MAX - 1, false))
		return -EINVAL;
	memcpy(out->host, name.p, name.left);
	out->host[name.left] = '\0';
	out->has_sni = true;
	return 0;
}

static int parse_extensions(struct cur *exts, struct sni_hello *out)
{
	/* one bit per extension type: duplicates are illegal (RFC 8446 4.2) */
	uint8_t seen[65536 / 8];
	int r;

	memset(seen, 0, sizeof(seen));
	while (exts->left) {
		struct cur data;
		uint16_t type;

		if (!cur_u16(exts, &type) || !cur_vec16(exts, &data))
			return -EINVAL;
		if (seen[type / 8] & (1u << (type % 8)))
			return -EINVAL;
		seen[type / 8] |= (uint8_t)(1u << (type % 8));
		if (type == EXT_SERVER_NAME) {
			r = parse_server_name(&data, out);
			if (r)
				return r;
		} else if (type == EXT_ECH) {
			out->has_ech = true;
		}
	}
	return 0;
}

static int parse_hello(const uint8_t *msg, size_t len, struct sni_hello *out)
{
	struct cur c = { msg + TLS_HS_HDR, len - TLS_HS_HDR };
	struct cur v, exts;
	uint16_t version;

	if (!cur_u16(&c, &version) || version >> 8 != 3)
		return -EINVAL;
	out->legacy_version = version;
	if (!cur_take(&c, TLS_RANDOM_LEN, &v))
		return -EINVAL;
	if (!cur_vec8(&c, &v) || v.left > TLS_SESSION_ID_MAX)
		return -EINVAL;
	if (!cur_vec16(&c, &v) || v.left < 2 || v.left % 2)
		return -EINVAL;
	if (!cur_vec8(&c, &v) || v.left < 1)
		return -EINVAL;
	/* an SSL 3.0-style hello ends here: no extensions, no SNI */
	if (c.left == 0)
		return 0;
	if (!cur_vec16(&c, &exts) || c.left != 0)
		return -EINVAL;
	return parse_extensions(&exts, out);
}

int sni_parse_hello(const uint8_t *buf, size_t len, struct sni_hello *out)
{
	size_t need, nrec, used;
	uint8_t *own = NULL;
	const uint8_t *msg;
	int r;

	memset(out, 0, sizeof(*out));
	if (!buf && len)
		return -EINVAL;
	if (len == 0)
		return -EAGAIN;
	r = scan_records(buf, len, &need, &nrec, &used);
	if (r)
		return r;
	if (nrec == 1) {
		msg = buf + TLS_RECORD_HDR;
	} else {
		r = reassemble(buf, need, &own);
		if (r)
			return r;
		msg = own;
	}
	r = parse_hello(msg, need, out);
	free(own);
	if (r) {
		memset(out, 0, sizeof(*out));
		return r;
	}
	out->hello_len = need;
	out->bytes = used;
	return out->has_sni ? 1 : 0;
}

/*
 * A middlebox-compatible client's ChangeCipherSpec is one record holding
 * one byte, 1 (RFC 8446 5; its version byte is any 3.x record's).  What is
 * in of it must match; the rest may still come.
 */
static int ccs_record(const uint8_t *p, size_t len)
{
	static const uint8_t ccs[] = { TLS_CT_CCS, 3, 0, 0, 1, 1 };

	for (size_t i = 0; i < len && i < sizeof(ccs); i++)
		if (i != 2 && p[i] != ccs[i])
			return -EINVAL;
	if (len >= 3 && (p[2] < 1 || p[2] > 4))
		return -EINVAL;
	return len < sizeof(ccs) ? -EAGAIN : (int)sizeof(ccs);
}

int sni_parse_retry(const uint8_t *buf, size_t len, struct sni_hello *out)
{
	size_t skip = 0;
	int r;

	memset(out, 0, sizeof(*out));
	if (!buf && len)
		return -EINVAL;
	if (len && buf[0] == TLS_CT_CCS) {
		r = ccs_record(buf, len);
		if (r < 0)
			return r;
		skip = (size_t)r;
	}
	r = sni_parse_hello(buf + skip, len - skip, out);
	if (r >= 0)
		out->bytes += skip;
	return r;
}

/* the random of a HelloRetryRequest: SHA-256("HelloRetryRequest") */
static const uint8_t hrr_random[TLS_RANDOM_LEN] = {
	0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11, 0xbe, 0x1d, 0x8c, 0x02,
	0x1e, 0x65, 0xb8, 0x91, 0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e,
	0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c,
};

/* a ServerHello's first bytes: header, legacy_version, random */
#define SERVER_HELLO_HEAD	(TLS_HS_HDR + 2 + TLS_RANDOM_LEN)

int sni_server_retries(const uint8_t *buf, size_t len)
{
	uint8_t head[SERVER_HELLO_HEAD];
	size_t off = 0, got = 0;

	if (!buf && len)
		return -EINVAL;
	/* gather the message's head out of as many records as carry it */
	while (got < sizeof(head)) {
		size_t rlen, take;

		if (len - off < 1)
			return -EAGAIN;
		/* an alert, an answer that is not TLS: no second hello follows */
		if (buf[off] != TLS_CT_HANDSHAKE)
			return 0;
		if (len - off < TLS_RECORD_HDR)
			return -EAGAIN;
		rlen = (size_t)buf[off + 3] << 8 | buf[off + 4];
		take = len - off - TLS_RECORD_HDR;
		if (take > rlen)
			take = rlen;
		if (take > sizeof(head) - got)
			take = sizeof(head) - got;
		memcpy(head + got, buf + off + TLS_RECORD_HDR, take);
		got += take;
		if (got >= 1 && head[0] != TLS_HS_SERVER_HELLO)
			return 0;
		if (got == sizeof(head))
			break;
		if (len - off - TLS_RECORD_HDR < rlen)
			return -EAGAIN;
		off += TLS_RECORD_HDR + rlen;
	}
	return memcmp(head + TLS_HS_HDR + 2, hrr_random, sizeof(hrr_random)) == 0;
}

int sni_v2_hello(const uint8_t *buf, size_t len)
{
	if (!buf || len < 1)
		return -EAGAIN;
	if (!(buf[0] & 0x80))
		return 0;
	if (len < 3)
		return -EAGAIN;
	return buf[2] == TLS_HS_CLIENT_HELLO;
}

int sni_parse(const uint8_t *buf, size_t len, char *host, size_t hostlen)
{
	struct sni_hello h;
	size_t n;
	int r;

	if (!host || hostlen == 0)
		return -EINVAL;
	host[0] = '\0';
	r = sni_parse_hello(buf, len, &h);
	if (r < 0)
		return r;
	n = strlen(h.host);
	if (n >= hostlen)
		return -ENOSPC;
	memcpy(host, h.host, n + 1);
	return r;
}
