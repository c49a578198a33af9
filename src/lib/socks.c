/*
 * socks.c - SOCKS5 server handshake (RFC 1928) as a state machine.
 *
 * Two client messages matter: the greeting (VER NMETHODS METHODS) and the
 * request (VER CMD RSV ATYP DST.ADDR DST.PORT).  Each is copied into a
 * fixed buffer exactly as far as it goes, never further, so a client that
 * sends its tunnel data right behind the request loses none of it and one
 * that dribbles a byte at a time is served the same.  A message is judged
 * as soon as its leading bytes say it is wrong, not when it is complete.
 */
#include "socks.h"
#include "hostname.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>

#define SOCKS_VERSION		0x05
#define SOCKS_METHOD_NONE	0x00
#define SOCKS_METHOD_REFUSED	0xff
#define SOCKS_CMD_CONNECT	0x01
#define SOCKS_NO_REPLY		0xff

/* Where socks_feed() puts the bytes for the client. */
struct sout {
	uint8_t *p;
	size_t cap;
	size_t len;
};

static void emit(struct sout *o, const uint8_t *b, size_t n)
{
	/* socks_feed() checked cap >= SOCKS_OUT_MAX, the most ever written */
	if (n > o->cap - o->len)
		return;
	memcpy(o->p + o->len, b, n);
	o->len += n;
}

void socks_init(struct socks_conn *c)
{
	memset(c, 0, sizeof(*c));
	c->state = SOCKS_ST_GREETING;
	c->rep = SOCKS_NO_REPLY;
}

/* Enter the failed state; rep is the reply code already emitted, if any. */
static int fail(struct socks_conn *c, int err, uint8_t rep, const char *reason)
{
	c->state = SOCKS_ST_FAILED;
	c->err = err;
	c->rep = rep;
	c->reason = reason;
	return SOCKS_ERROR;
}

/* Refuse a request with a reply the client can read, then fail. */
static int refuse(struct socks_conn *c, struct sout *o, int err, uint8_t rep,
		  const char *reason)
{
	uint8_t r[SOCKS_REPLY_MAX];

	emit(o, r, socks_reply(r, rep, NULL));
	return fail(c, err, rep, reason);
}

/* How long the message being assembled is, as far as its bytes tell. */
static size_t msg_need(const struct socks_conn *c)
{
	if (c->state == SOCKS_ST_GREETING)
		return c->have < 2 ? 2 : 2 + (size_t)c->msg[1];
	if (c->have < 5)
		return 5;
	switch (c->msg[3]) {
	case SOCKS_ATYP_IPV4:
		return 4 + 4 + 2;
	case SOCKS_ATYP_IPV6:
		return 4 + 16 + 2;
	case SOCKS_ATYP_DOMAIN:
		return 4 + 1 + (size_t)c->msg[4] + 2;
	default:
		/* check_partial() refused it at 4 bytes; keep the bound */
		return c->have;
	}
}

/* Refuse a message on its first wrong byte. */
static int check_partial(struct socks_conn *c, struct sout *o)
{
	static const uint8_t no_method[2] = { SOCKS_VERSION, SOCKS_METHOD_REFUSED };

	if (c->state == SOCKS_ST_GREETING) {
		/* SOCKS4 or not SOCKS at all: nothing it would understand */
		if (c->have >= 1 && c->msg[0] != SOCKS_VERSION)
			return fail(c, -EPROTO, SOCKS_NO_REPLY, "not a SOCKS5 greeting");
		if (c->have >= 2 && c->msg[1] == 0) {
			emit(o, no_method, sizeof(no_method));
			return fail(c, -EPROTO, SOCKS_METHOD_REFUSED,
				    "SOCKS5 greeting offers no method");
		}
		return 0;
	}
	if (c->have >= 1 && c->msg[0] != SOCKS_VERSION)
		return refuse(c, o, -EPROTO, SOCKS_REP_GENERAL_FAILURE,
			      "SOCKS5 request with a wrong version");
	if (c->have >= 2 && c->msg[1] != SOCKS_CMD_CONNECT)
		return refuse(c, o, -ENOTSUP, SOCKS_REP_CMD_UNSUPPORTED,
			      "SOCKS5 command other than CONNECT");
	if (c->have >= 3 && c->msg[2] != 0)
		return refuse(c, o, -EPROTO, SOCKS_REP_GENERAL_FAILURE,
			      "SOCKS5 request with a non-zero reserved byte");
	if (c->have >= 4 && c->msg[3] != SOCKS_ATYP_IPV4 &&
	    c->msg[3] != SOCKS_ATYP_DOMAIN && c->msg[3] != SOCKS_ATYP_IPV6)
		return refuse(c, o, -ENOTSUP, SOCKS_REP_ATYP_UNSUPPORTED,
			      "SOCKS5 address type not supported");
	return 0;
}

static int finish_greeting(struct socks_conn *c, struct sout *o)
{
	static const uint8_t none[2] = { SOCKS_VERSION, SOCKS_METHOD_NONE };
	static const uint8_t refused[2] = { SOCKS_VERSION, SOCKS_METHOD_REFUSED };
	size_t i;

	for (i = 0; i < c->msg[1]; i++) {
		if (c->msg[2 + i] == SOCKS_METHOD_NONE) {
			emit(o, none, sizeof(none));
			c->state = SOCKS_ST_REQUEST;
			c->have = 0;
			return 0;
		}
	}
	emit(o, refused, sizeof(refused));
	return fail(c, -EACCES, SOCKS_METHOD_REFUSED,
		    "SOCKS5 client does not offer \"no authentication\"");
}

static void set_ipv4(struct socks_conn *c, const uint8_t *a)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)&c->addr;

	sin->sin_family = AF_INET;
	memcpy(&sin->sin_addr, a, 4);
	sin->sin_port = htons(c->port);
	/* cannot fail: the buffer fits any IPv4 address */
	inet_ntop(AF_INET, &sin->sin_addr, c->host, sizeof(c->host));
}

static void set_ipv6(struct socks_conn *c, const uint8_t *a)
{
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&c->addr;

	sin6->sin6_family = AF_INET6;
	memcpy(&sin6->sin6_addr, a, 16);
	sin6->sin6_port = htons(c->port);
	inet_ntop(AF_INET6, &sin6->sin6_addr, c->host, sizeof(c->host));
}

static int finish_request(struct socks_conn *c, struct sout *o)
{
	const uint8_t *pp = c->msg + c->have - 2;
	size_t n;

	c->atyp = c->msg[3];
	c->port = (uint16_t)(pp[0] << 8 | pp[1]);
	if (c->port == 0)
		return refuse(c, o, -EPROTO, SOCKS_REP_GENERAL_FAILURE,
			      "SOCKS5 request for port 0");
	switch (c->atyp) {
	case SOCKS_ATYP_IPV4:
		set_ipv4(c, c->msg + 4);
		break;
	case SOCKS_ATYP_IPV6:
		set_ipv6(c, c->msg + 4);
		break;
	default:
		n = c->msg[4];
		if (!hostname_valid(c->msg + 5, n, 255, true))
			return refuse(c, o, -EPROTO, SOCKS_REP_GENERAL_FAILURE,
				      "SOCKS5 domain name is not a hostname");
		memcpy(c->host, c->msg + 5, n);
		c->host[n] = '\0';
		break;
	}
	c->state = SOCKS_ST_READY;
	return SOCKS_REQUEST_READY;
}

int socks_feed(struct socks_conn *c, const uint8_t *in, size_t len,
	       size_t *consumed, uint8_t *out, size_t *outlen)
{
	struct sout o = { out, *outlen, 0 };
	size_t used = 0;
	int r = SOCKS_NEED_MORE;

	*consumed = 0;
	*outlen = 0;
	if (c->state == SOCKS_ST_READY)
		return SOCKS_REQUEST_READY;
	if (c->state == SOCKS_ST_FAILED)
		return SOCKS_ERROR;
	if (!out || o.cap < SOCKS_OUT_MAX || (!in && len))
		return fail(c, -EINVAL, SOCKS_NO_REPLY, "socks_feed: bad arguments");

	while (used < len && r == SOCKS_NEED_MORE) {
		size_t take = msg_need(c) - c->have;

		/*
		 * The fixed leading bytes one at a time, so that a refusal
		 * always ends on the offending byte, however the input was cut.
		 */
		if (c->have < (c->state == SOCKS_ST_GREETING ? 2u : 4u))
			take = 1;
		if (take > len - used)
			take = len - used;
		memcpy(c->msg + c->have, in + used, take);
		c->have += take;
		used += take;
		r = check_partial(c, &o);
		if (r)
			break;
		if (c->have < msg_need(c))
			continue;
		if (c->state == SOCKS_ST_GREETING)
			r = finish_greeting(c, &o);
		else
			r = finish_request(c, &o);
	}
	*consumed = used;
	*outlen = o.len;
	return r;
}

size_t socks_reply(uint8_t *out, uint8_t code, const struct sockaddr *bound)
{
	const struct sockaddr_in6 *sin6;
	const struct sockaddr_in *sin;
	size_t n = 4;

	out[0] = SOCKS_VERSION;
	out[1] = code;
	out[2] = 0;
	if (bound && bound->sa_family == AF_INET6) {
		sin6 = (const struct sockaddr_in6 *)bound;
		out[3] = SOCKS_ATYP_IPV6;
		memcpy(out + n, &sin6->sin6_addr, 16);
		n += 16;
		memcpy(out + n, &sin6->sin6_port, 2);	/* already big-endian */
	} else if (bound && bound->sa_family == AF_INET) {
		sin = (const struct sockaddr_in *)bound;
		out[3] = SOCKS_ATYP_IPV4;
		memcpy(out + n, &sin->sin_addr, 4);
		n += 4;
		memcpy(out + n, &sin->sin_port, 2);
	} else {
		out[3] = SOCKS_ATYP_IPV4;
		memset(out + n, 0, 4 + 2);
		n += 4;
	}
	return n + 2;
}

uint8_t socks_reply_code(int err)
{
	switch (err < 0 ? -err : err) {
	case 0:
		return SOCKS_REP_SUCCEEDED;
	case EACCES:
	case EPERM:
		return SOCKS_REP_NOT_ALLOWED;
	case ENETUNREACH:
	case ENETDOWN:
		return SOCKS_REP_NET_UNREACHABLE;
	case EHOSTUNREACH:
	case EHOSTDOWN:
	case ENOENT:		/* the name does not resolve */
	case ETIMEDOUT:
		return SOCKS_REP_HOST_UNREACHABLE;
	case ECONNREFUSED:
		return SOCKS_REP_REFUSED;
	case EAFNOSUPPORT:
		return SOCKS_REP_ATYP_UNSUPPORTED;
	default:
		return SOCKS_REP_GENERAL_FAILURE;
	}
}
