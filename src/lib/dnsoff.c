/*
 * dnsoff.c - DNS with the network off (network.mode "none").
 *
 * Nothing answered DNS inside such a sandbox: glibc asked 127.0.0.1:53
 * all the same, met ICMP port unreachable and said EAI_AGAIN, "Temporary
 * failure in name resolution", a network down for a while and worth a
 * retry (npm retries it), with no word of a policy.  Now init binds
 * 127.0.0.1:53 in the sandbox's netns before anything untrusted runs and
 * hands the socket to the supervisor, which answers each question at
 * once, here, on its own event loop (no process, no thread), and records
 * it as an egress.denied event of the process that asked: the call's
 * result lists it and says why.  No resolver outside is ever asked.
 *
 * NXDOMAIN, not REFUSED (measured with glibc 2.36, Node 20, curl): glibc
 * takes REFUSED for a server's failure, asks again (17 queries for one
 * getent instead of 9) and still reports EAI_AGAIN, the very message this
 * replaces; NXDOMAIN is EAI_NONAME, Node's ENOTFOUND ("Name or service not
 * known"), which npm, pip and curl do not retry.  A name the proxy mode
 * denies is answered the same way (dnsd.c).
 *
 * The sandbox is hostile: a flood is read a bounded batch per turn of the
 * loop, the search for the asking process is rationed, and every packet
 * goes through dnsmsg.c (fuzzed: fuzz/fuzz_dns.c).  Over TCP nothing
 * listens: glibc, musl and c-ares use TCP only for an answer truncated
 * over UDP, and an NXDOMAIN never is; a connect is refused at once.
 */
#include "internal.h"
#include "dnsoff.h"
#include "dnsmsg.h"
#include "events.h"
#include "fdpass.h"
#include "peer.h"
#include "sandbox.h"

#include <errno.h>
#include <event2/event.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define DNSOFF_BATCH		32	/* packets read per turn of the loop */
#define DNSOFF_DRAIN_MAX	8192	/* read at the end, at most */
#define DNSOFF_LOOKUPS		32	/* searches for the asker per second */
#define DNSOFF_PORT		53

struct dnsoff {
	struct events *ev;
	struct event_base *base;
	struct event *read_ev;
	int fd;			/* UDP 127.0.0.1:53 in the sandbox's netns */
	int diag;		/* sock_diag in that netns: who asked */
	ino_t netns_ino;	/* which /proc/PID/ns/net is the sandbox's */
	/* a search walks /proc: rationed, and the last answer reused */
	uint64_t window_ms;
	unsigned searches;
	struct sockaddr_in last;
	pid_t last_pid;
	uint64_t last_cgid;
	const char *last_missed;	/* why last_pid is 0 (peer_missed), or NULL */
	uint64_t last_ms;
};

/* ---- init's half --------------------------------------------------------- */

int dnsoff_bind(struct dnsoff_socks *o)
{
	struct sockaddr_in a = {
		.sin_family = AF_INET,
		.sin_port = htons(DNSOFF_PORT),
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK),
	};
	struct stat st;
	int r;

	o->fd = o->diag = -1;
	o->netns = 0;
	/* no SO_REUSEADDR/SO_REUSEPORT: no other socket can share the port */
	o->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (o->fd < 0)
		return -errno;
	if (bind(o->fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		r = -errno;
		close(o->fd);
		o->fd = -1;
		return r;
	}
	/* without it the denials only lack a pid: not worth failing for */
	o->diag = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	/*
	 * ... and which netns the askers are in: the supervisor cannot stat
	 * our /proc/PID/ns/net once we are not dumpable (unprivileged, it
	 * has no CAP_SYS_PTRACE over us).  A namespace's inode fits in 32 bits.
	 */
	if (stat("/proc/self/ns/net", &st) == 0)
		o->netns = (uint32_t)st.st_ino;
	return 0;
}

/* ---- answers ----------------------------------------------------------- */

int dnsoff_reply(const uint8_t *pkt, size_t len, uint8_t *out, size_t *outlen,
		 char *name, size_t namelen)
{
	struct dns_query q = { 0 };
	int r, rcode;

	snprintf(name, namelen, "?");
	r = dnsmsg_parse_query(pkt, len, &q);
	if (r == 0) {
		snprintf(name, namelen, "%s", q.name[0] ? q.name : ".");
		return dnsmsg_error(&q, NULL, 0, DNS_RCODE_NXDOMAIN, out, outlen) ? -1 : 0;
	}
	if (r == -EILSEQ)	/* a question, but for no hostname */
		return dnsmsg_error(&q, NULL, 0, DNS_RCODE_NXDOMAIN, out, outlen) ? -1 : 0;
	rcode = dnsmsg_rcode_for(r);
	if (rcode < 0)
		return -1;
	return dnsmsg_error(NULL, pkt, len, rcode, out, outlen) ? -1 : 0;
}

/* ---- the supervisor's half ---------------------------------------------- */

/*
 * The process that asked, found while it waits for our answer (its
 * socket is still there), as dnsd.c does.  A flood must not turn each
 * packet into a walk of /proc: the same client socket (A and AAAA come
 * from one) reuses the last answer for a second, and at most
 * DNSOFF_LOOKUPS searches run a second; past that a denial has no pid.
 */
static pid_t asker(struct dnsoff *d, const struct sockaddr_in *peer, uint64_t *cgid,
		   const char **missed)
{
	/* it sent to 127.0.0.1:53, connected or not */
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(DNSOFF_PORT),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	uint64_t now = corral_now_ms();
	pid_t pid;

	*cgid = 0;
	*missed = NULL;
	if (d->diag < 0 || !d->netns_ino)
		return 0;
	if (now - d->last_ms < 1000 && d->last.sin_port == peer->sin_port &&
	    d->last.sin_addr.s_addr == peer->sin_addr.s_addr) {
		*cgid = d->last_cgid;
		*missed = d->last_missed;
		return d->last_pid;
	}
	if (now - d->window_ms >= 1000) {
		d->window_ms = now;
		d->searches = 0;
	}
	if (d->searches >= DNSOFF_LOOKUPS) {
		*missed = "not searched for: this sandbox's 32 searches of the second "
			  "were made (DNSOFF_LOOKUPS)";
		return 0;
	}
	d->searches++;
	pid = peer_pid_udp(d->diag, d->netns_ino, (const struct sockaddr *)peer,
			   (const struct sockaddr *)&to, cgid);
	d->last = *peer;
	d->last_pid = pid;
	d->last_cgid = *cgid;
	*missed = d->last_missed = peer_missed();
	d->last_ms = now;
	return pid;
}

static void denied(struct dnsoff *d, const struct sockaddr_in *peer, const char *name)
{
	json_t *o = json_pack("{s:s, s:s, s:i, s:s}", "protocol", "dns", "host",
			      name, "port", DNSOFF_PORT, "reason", DNSOFF_REASON);
	const char *missed;
	uint64_t cgid;
	pid_t pid;

	if (!o)
		return;
	pid = asker(d, peer, &cgid, &missed);
	if (pid > 0)
		json_object_set_new(o, "pid", json_integer(pid));
	else if (missed)
		json_object_set_new(o, "pid_missing", json_string(missed));
	/* for attribution only: events.c turns it into "call" */
	if (cgid)
		json_object_set_new(o, EVENTS_KEY_CGROUP, json_integer(cgid));
	events_emit(d->ev, "egress.denied", o);
}

/* Answers up to max questions; false once the socket has no more. */
static bool answer(struct dnsoff *d, int max)
{
	uint8_t pkt[DNS_UDP_MAX + 1], out[DNS_UDP_MAX];
	char name[DNS_NAME_MAX + 2];

	for (int i = 0; i < max; i++) {
		struct sockaddr_in peer = { 0 };
		socklen_t peerlen = sizeof(peer);
		size_t outlen = sizeof(out);
		ssize_t n;

		/* a larger datagram is cut: no query is, and dnsmsg rejects the rest */
		n = recvfrom(d->fd, pkt, sizeof(pkt), MSG_DONTWAIT,
			     (struct sockaddr *)&peer, &peerlen);
		if (n < 0)
			return false;
		if (peer.sin_family != AF_INET ||
		    dnsoff_reply(pkt, n, out, &outlen, name, sizeof(name)) < 0)
			continue;
		denied(d, &peer, name);	/* before the answer: the asker waits */
		if (sendto(d->fd, out, outlen, MSG_DONTWAIT, (struct sockaddr *)&peer,
			   peerlen) < 0) {
			/* a full buffer drops it; the client asks again */
		}
	}
	return true;
}

static void on_question(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	/* a bounded batch: the rest waits for the next turn, behind the others */
	answer(arg, DNSOFF_BATCH);
}

void dnsoff_drain(struct dnsoff *d)
{
	/* the queue holds what the socket's buffer does: a few hundred at most */
	for (int i = 0; d && d->fd >= 0 && i < DNSOFF_DRAIN_MAX / DNSOFF_BATCH; i++)
		if (!answer(d, DNSOFF_BATCH))
			return;
}

struct dnsoff *dnsoff_new(struct event_base *base, struct events *ev)
{
	struct dnsoff *d = calloc(1, sizeof(*d));

	if (!d)
		return NULL;
	d->base = base;
	d->ev = ev;
	d->fd = d->diag = -1;
	return d;
}

void dnsoff_take(struct dnsoff *d, const struct child_msg *m, int fd)
{
	if (m->kind != MSG_DNS_FD) {
		if (d->diag >= 0) {
			close(fd);
			return;
		}
		d->diag = fd;
		d->netns_ino = m->id;	/* init's word, sent before anything ran */
		return;
	}
	if (d->fd >= 0) {
		close(fd);
		return;
	}
	d->fd = fd;
	d->read_ev = event_new(d->base, fd, EV_READ | EV_PERSIST, on_question, d);
	if (!d->read_ev || event_add(d->read_ev, NULL) < 0) {
		/*
		 * Out of memory: closed, a lookup fails at once as it did
		 * before (EAI_AGAIN) instead of waiting on a socket nobody
		 * reads.  The port stays out of the sandbox's reach: binding
		 * below 1024 takes a capability no process there has.
		 */
		if (d->read_ev)
			event_free(d->read_ev);
		d->read_ev = NULL;
		close(fd);
		d->fd = -1;
	}
}

void dnsoff_free(struct dnsoff *d)
{
	if (!d)
		return;
	if (d->read_ev)
		event_free(d->read_ev);
	if (d->fd >= 0)
		close(d->fd);
	if (d->diag >= 0)
		close(d->diag);
	free(d);
}
