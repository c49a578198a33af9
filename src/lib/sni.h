/*
 * sni.h - read the server name out of a TLS ClientHello without taking part
 * in TLS.
 *
 * The proxy peeks at the first bytes a client sends through a CONNECT tunnel
 * (or a transparent connection) and compares the name the client asks the
 * server for with the name it was allowed to reach.  Nothing here terminates
 * or alters TLS; the bytes go on to the server unchanged.
 *
 * Pure: no I/O, no global state.  Safe on hostile input.
 */
#ifndef CORRAL_SNI_H
#define CORRAL_SNI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A host_name is a DNS name: at most 253 characters, plus the NUL. */
#define SNI_HOST_MAX 254

/* Largest ClientHello handshake message accepted (header included). */
#define SNI_HELLO_MAX 65536
/* A hello split over more records than this is refused. */
#define SNI_RECORDS_MAX 16
/*
 * The most bytes a caller ever needs to buffer before sni_parse() stops
 * answering -EAGAIN: the largest hello plus the record headers around it.
 */
#define SNI_READ_MAX (SNI_HELLO_MAX + 5 * SNI_RECORDS_MAX)

struct sni_hello {
	char host[SNI_HOST_MAX];	/* "" when there is no server_name */
	bool has_sni;
	/*
	 * encrypted_client_hello present: the name above is only the
	 * client-facing "public name", the real one is encrypted.
	 */
	bool has_ech;
	uint16_t legacy_version;	/* client_version field of the hello */
	size_t hello_len;		/* handshake message, header included */
	size_t bytes;			/* input bytes (records) the hello used */
};

/*
 * Parse the ClientHello at the start of buf (a TLS record stream as the
 * client sent it; it may be cut short).  Returns
 *   1        a server_name host_name was found; *out filled;
 *   0        a complete, well-formed hello without SNI; *out filled;
 *  -EAGAIN   buf is a valid prefix, more bytes are needed;
 *  -EINVAL   not TLS, not a ClientHello, or malformed: inconsistent
 *            lengths, a name that is not a hostname, several names,
 *            duplicate server_name extensions ...;
 *  -ENOMEM   a hello split over several records could not be reassembled.
 */
int sni_parse_hello(const uint8_t *buf, size_t len, struct sni_hello *out);

/*
 * The same, copying only the name: 1 with host filled (NUL-terminated),
 * 0 without SNI (host = ""), -EAGAIN, -EINVAL, -ENOMEM as above, and
 * -ENOSPC when hostlen cannot hold the name.
 */
int sni_parse(const uint8_t *buf, size_t len, char *host, size_t hostlen);

/*
 * The client's bytes after the server's HelloRetryRequest (RFC 8446
 * 4.1.4): at most one ChangeCipherSpec record (middlebox compatibility,
 * D.4), then the second ClientHello, parsed as sni_parse_hello does;
 * out->bytes counts the ChangeCipherSpec too.  Same returns.
 */
int sni_parse_retry(const uint8_t *buf, size_t len, struct sni_hello *out);

/*
 * The bytes a server sent first, as far as they are in: 1 when they begin
 * with a HelloRetryRequest (a ServerHello whose random is the fixed value
 * of RFC 8446 4.1.3; its records may be split anywhere), 0 when they begin
 * with anything else (a ServerHello, an alert, not TLS), -EAGAIN when too
 * few bytes are in to tell.
 */
int sni_server_retries(const uint8_t *buf, size_t len);

/*
 * An SSLv2-format ClientHello at the start of buf (the record of a client
 * that could still speak SSL 2: a two-byte length with the high bit set,
 * then message type 1): 1, 0 when it is not one, -EAGAIN when too few
 * bytes are in to tell.  It has no extensions, so never a name; OpenSSL
 * 3.0 still answers one with a TLS 1.2 ServerHello.
 */
int sni_v2_hello(const uint8_t *buf, size_t len);

#endif
