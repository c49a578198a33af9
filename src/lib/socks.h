/*
 * socks.h - the server side of a SOCKS5 handshake (RFC 1928), sans I/O.
 *
 * Method 0x00 (no authentication) only, command CONNECT only, addresses as
 * domain names (what the policy judges best), IPv4 or IPv6.  The event loop
 * feeds whatever bytes arrived and sends back whatever socks_feed() wrote;
 * once the request is ready it decides, connects, and sends socks_reply().
 *
 * Pure: no I/O, no allocation, no global state.  Safe on hostile input.
 */
#ifndef CORRAL_SOCKS_H
#define CORRAL_SOCKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* Return values of socks_feed(). */
#define SOCKS_NEED_MORE		0	/* everything consumed, send out, read more */
#define SOCKS_REQUEST_READY	1	/* c->host / c->port hold the target */
#define SOCKS_ERROR		(-1)	/* send out, then close; c->err, c->reason */

/* Reply codes (RFC 1928 6). */
#define SOCKS_REP_SUCCEEDED		0x00
#define SOCKS_REP_GENERAL_FAILURE	0x01
#define SOCKS_REP_NOT_ALLOWED		0x02	/* "connection not allowed by ruleset" */
#define SOCKS_REP_NET_UNREACHABLE	0x03
#define SOCKS_REP_HOST_UNREACHABLE	0x04
#define SOCKS_REP_REFUSED		0x05
#define SOCKS_REP_TTL_EXPIRED		0x06
#define SOCKS_REP_CMD_UNSUPPORTED	0x07
#define SOCKS_REP_ATYP_UNSUPPORTED	0x08

/* Address types. */
#define SOCKS_ATYP_IPV4		0x01
#define SOCKS_ATYP_DOMAIN	0x03
#define SOCKS_ATYP_IPV6		0x04

/* Largest reply: VER REP RSV ATYP + 16-byte address + port. */
#define SOCKS_REPLY_MAX		22
/* socks_feed() may write a method reply and a request reply in one call. */
#define SOCKS_OUT_MAX		(2 + SOCKS_REPLY_MAX)

/* Greeting: 2 + 255 methods; request: 4 + 1 + 255 name + 2 port. */
#define SOCKS_MSG_MAX		262

enum socks_state {
	SOCKS_ST_GREETING = 0,
	SOCKS_ST_REQUEST,
	SOCKS_ST_READY,
	SOCKS_ST_FAILED,
};

struct socks_conn {
	enum socks_state state;
	uint8_t msg[SOCKS_MSG_MAX];	/* the message being assembled */
	size_t have;

	/* the request, valid once socks_feed() returned SOCKS_REQUEST_READY */
	uint8_t atyp;			/* SOCKS_ATYP_*: how the client named it */
	char host[256];			/* domain name as sent, or numeric IPv4/IPv6 */
	uint16_t port;			/* host byte order, never 0 */
	struct sockaddr_storage addr;	/* for SOCKS_ATYP_IPV4/IPV6: the literal */

	/* after SOCKS_ERROR */
	int err;			/* -EPROTO, -ENOTSUP, -EACCES, -EINVAL */
	uint8_t rep;			/* reply code sent, or 0xff for none */
	const char *reason;		/* static text, for the event */
};

void socks_init(struct socks_conn *c);

/*
 * Feed len bytes from the client.  *consumed is how many were part of the
 * handshake: after SOCKS_REQUEST_READY the rest belong to the tunnel.
 * out must hold SOCKS_OUT_MAX bytes; *outlen is its size on entry and the
 * bytes to send to the client on return (send them in every case, also
 * with SOCKS_ERROR: they say why).  Returns SOCKS_NEED_MORE,
 * SOCKS_REQUEST_READY or SOCKS_ERROR.  Calls after READY or ERROR change
 * nothing and return the same again with nothing consumed.
 */
int socks_feed(struct socks_conn *c, const uint8_t *in, size_t len,
	       size_t *consumed, uint8_t *out, size_t *outlen);

/*
 * The final reply to a request: code is SOCKS_REP_*, bound the address the
 * tunnel's outgoing socket is bound to (NULL, or a family other than
 * AF_INET/AF_INET6, gives 0.0.0.0:0).  out holds SOCKS_REPLY_MAX bytes.
 * Returns the reply's length.
 */
size_t socks_reply(uint8_t *out, uint8_t code, const struct sockaddr *bound);

/* The reply code for a failed connect(): errno (positive or negative). */
uint8_t socks_reply_code(int err);

#endif
