/*
 * dnsoff.h - DNS with the network off: 127.0.0.1:53 inside the sandbox
 * answers every name NXDOMAIN at once, and each question is a denial of
 * the process (hence the call) that asked.
 */
#ifndef CORRAL_DNSOFF_H
#define CORRAL_DNSOFF_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct event_base;
struct events;
struct dnsoff;
struct child_msg;

/* What every question is told, in its denial event and in the docs. */
#define DNSOFF_REASON "the network is off by policy (network.mode none)"

/* In init: the sockets dnsoff_bind made, until READY hands them over (child.c). */
struct dnsoff_socks {
	int fd;			/* UDP, bound to 127.0.0.1:53 */
	int diag;		/* NETLINK_SOCK_DIAG of the same netns, or -1 */
	uint32_t netns;		/* its inode, 0 if unknown */
};

/*
 * In init, in the sandbox's netns, while it still holds its capabilities
 * and before anything untrusted runs: bind a UDP socket to 127.0.0.1:53
 * (and open a sock_diag socket of the same netns, to find who asks, and
 * note the netns's inode) into *o, for init to send with READY as
 * MSG_DNS_DIAG_FD and MSG_DNS_FD (sandbox.h, ready_fd_kinds).  No allocation:
 * called after fork.  Returns 0 or -errno (then *o holds no fd).
 */
int dnsoff_bind(struct dnsoff_socks *o);

/*
 * The answer to one packet: NXDOMAIN to any query (FORMERR, NOTIMP for
 * malformed ones, as dnsmsg says), into out (*outlen: the room on entry,
 * the length on return), and the name asked in name ("?" when it is no
 * hostname or the packet no query).  Returns 0 with an answer, -1 for a
 * packet not worth one (a response, shorter than a header).  No I/O.
 */
int dnsoff_reply(const uint8_t *pkt, size_t len, uint8_t *out, size_t *outlen,
		 char *name, size_t namelen);

/* The supervisor's half: answers on base, denials into ev. */
struct dnsoff *dnsoff_new(struct event_base *base, struct events *ev);
/*
 * An fd init sent with m (MSG_DNS_FD: the socket; MSG_DNS_DIAG_FD: the
 * diag, m->id the netns's inode); always taken.
 */
void dnsoff_take(struct dnsoff *d, const struct child_msg *m, int fd);
/*
 * The questions still queued, answered and recorded now: at the sandbox's
 * end, so that its last denials are counted before its result is made,
 * not lost when the loop stops.  NULL is fine.
 */
void dnsoff_drain(struct dnsoff *d);
void dnsoff_free(struct dnsoff *d);

#endif
