/*
 * egress.h - which destinations a sandbox may reach, decided by name.
 *
 * The decision layer under the egress proxy, the DNS responder and
 * transparent mode.  No sockets here: a caller (the proxy) asks two
 * questions and acts on the answer.
 *
 *   1. egress_check_name(): a client asked for HOST:PORT, as it wrote it
 *      (a name, or an IP address in any spelling).  Deny entries win over
 *      allow entries; an IP address is allowed only by an IP/CIDR entry,
 *      never by a name.
 *   2. egress_check_addr(): an allowed name resolved to this address; may
 *      we connect?  Loopback, link-local (the cloud metadata address),
 *      private, unspecified, CGNAT, multicast, broadcast and reserved
 *      addresses, in IPv4, IPv6 and IPv4-mapped form, the addresses of
 *      this host's own interfaces and of the networks they are on (its LAN
 *      neighbours) are refused unless an allow entry names that address or
 *      network explicitly, or the policy's "hosts" map put
 *      the name there (DNS rebinding / SSRF guard).
 *
 * Both fill a struct egress_verdict whose reason is one sentence an agent
 * can act on, and both fail closed: any return but 0 means "do not connect".
 *
 * Patterns (policy "network.allow" / "network.deny", --allow / --deny):
 *   pypi.org               that name exactly (any case, one trailing dot ok)
 *   *.example.com          names under example.com, never example.com itself
 *   api.github.com:443     an explicit port (1-65535)
 *   10.1.2.0/24:5432       an IPv4 address or network (any inet_aton spelling
 *                          of the address: 2852039166, 0xa9fea9fe, 127.1 ...)
 *   [2001:db8::/32]:443    an IPv6 address or network, always in brackets
 *                          ("[2001:db8::]/32" is accepted too)
 *   *                      every host (deny lists only)
 * Without a port, an allow entry means ports 80 and 443 and a deny entry
 * means every port.  Allow lists refuse "*", "*.com" (a wildcard over one
 * label), a bare top-level domain ("com") and /0 networks.
 */
#ifndef CORRAL_EGRESS_H
#define CORRAL_EGRESS_H

#include "internal.h"

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define EGRESS_NAME_MAX		253	/* a host name, without its trailing dot */
#define EGRESS_LABEL_MAX	63
#define EGRESS_PATTERN_MAX	270	/* longest pattern text accepted */

enum egress_kind {
	EGRESS_NAME,		/* exactly name */
	EGRESS_SUBDOMAINS,	/* "*.name": names under name, not name itself */
	EGRESS_NET,		/* an IPv4/IPv6 address (full prefix) or network */
	EGRESS_ANY,		/* "*": every host, names and addresses (deny only) */
};

struct egress_pattern {
	enum egress_kind kind;
	bool allow;		/* parsed for an allow list */
	uint16_t port;		/* 0: none written: allow 80 and 443, deny every port */
	char name[EGRESS_NAME_MAX + 1];	/* NAME, SUBDOMAINS: canonical, no "*." */
	int family;		/* NET: AF_INET or AF_INET6 (IPv4-mapped -> AF_INET) */
	uint8_t addr[16];	/* NET: network, host bits zero; IPv4 in addr[0..3] */
	unsigned prefix;	/* NET: 0-32 or 0-128 */
	char text[EGRESS_PATTERN_MAX + 1];	/* as written, quoted in reasons */
};

/*
 * Parse one pattern.  Returns 0, or -EINVAL with err->msg
 * "reason (got \"PATTERN\")".
 */
int egress_pattern_parse(const char *text, struct egress_pattern *out,
			 bool for_allow, struct corral_err *err);
/*
 * The same for text[0..len) (a NUL inside is an error), with only the reason
 * written to why: the policy loader adds where and what itself.
 */
int egress_pattern_parsen(const char *text, size_t len,
			  struct egress_pattern *out, bool for_allow,
			  char *why, size_t whylen);

/*
 * Canonical host name for the "hosts" map: lowercase, one trailing dot
 * removed, labels of [a-z0-9_-], 1-63 bytes, at most 253 in all; an IP
 * address in any spelling is refused.  out holds EGRESS_NAME_MAX + 1 bytes.
 */
int egress_name_canon(const char *s, size_t len, char *out, char *why,
		      size_t whylen);
/*
 * Canonical text of a "hosts" address: strict IPv4 dotted quad or IPv6 (no
 * brackets), as inet_ntop writes it; IPv4-mapped IPv6 becomes IPv4.  out
 * holds INET6_ADDRSTRLEN bytes.
 */
int egress_addr_canon(const char *s, size_t len, char *out, char *why,
		      size_t whylen);

/* ---- a compiled rule set --------------------------------------------- */

struct egress;

/*
 * Compile p->net_allow, p->net_deny and p->net_hosts, and take the addresses
 * of this host's interfaces (getifaddrs, once, here: call it in the host's
 * network namespace).  Errors name the entry: "network.allow[2]: ...".
 */
struct egress *egress_new(const struct corral_policy *p,
			  struct corral_err *err);
void egress_free(struct egress *e);	/* NULL is fine */

struct egress_verdict {
	bool allowed;
	bool is_ip;			/* host is an address (a literal, any spelling) */
	char host[EGRESS_NAME_MAX + 1];	/* canonical: "example.org",
					   "169.254.169.254", "2001:db8::1" */
	uint16_t port;
	/*
	 * check_name with is_ip: the address to connect to (port set);
	 * check_addr: a copy of the address that was judged.
	 */
	struct sockaddr_storage addr;
	const struct egress_pattern *rule;	/* the entry that decided, or NULL;
						   valid while the egress lives */
	char reason[CORRAL_ERR_MAX];	/* one sentence, ASCII, no newline */
};

/*
 * May a client reach host:port?  host as the client wrote it: a name, or an
 * IP address in any spelling (IPv6 with or without brackets).  A host that
 * is not a host name ('@', '/', '%', spaces, NUL, ...) is refused.
 * Returns 0 if allowed, -EACCES if the policy refuses, -EINVAL if host or
 * port is not valid; *v is filled in every case.
 */
int egress_check_name(const struct egress *e, const char *host, uint16_t port,
		      struct egress_verdict *v);
/* The same for host[0..len), as read off the wire (SNI, Host header). */
int egress_check_namen(const struct egress *e, const char *host, size_t len,
		       uint16_t port, struct egress_verdict *v);

/*
 * host was allowed by egress_check_name() and resolved to sa (AF_INET or
 * AF_INET6; its port is the one to connect to, or 0 if not known, in which
 * case entries match by address only).  Returns 0 if the connection may be
 * made, -EACCES if not, -EINVAL / -EAFNOSUPPORT for bad input; *v is filled
 * in every case.  Deny entries for addresses apply here too.
 */
/* For the DNS responder: may this name resolve at all (any port)? */
int egress_check_dns(const struct egress *e, const char *name,
		     struct egress_verdict *v);
int egress_check_addr(const struct egress *e, const char *host,
		      const struct sockaddr *sa, struct egress_verdict *v);

/*
 * The policy's "hosts" address for name (any case, trailing dot), port 0.
 * Returns 0, -ENOENT if the map does not hold name, -EINVAL if name is not
 * a host name.
 */
int egress_hosts_lookup(const struct egress *e, const char *name,
			struct sockaddr_storage *out);

/*
 * Where host:port goes without asking DNS: an IP address (any spelling) is
 * itself, a name in the "hosts" map is its address; *out gets the port.
 * Returns 0, -ENOENT if host is a name to resolve, -EINVAL if it is not a
 * host.  Judge the result with egress_check_addr() like any other.
 */
int egress_resolve_static(const struct egress *e, const char *host,
			  uint16_t port, struct sockaddr_storage *out);

#endif
