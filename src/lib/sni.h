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

#endif
