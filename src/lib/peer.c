/*
 * peer.c - from a connection's client address to the process holding it.
 *
 * Two steps, both read-only: sock_diag, asked inside the sandbox's netns,
 * gives the inode of the TCP (or UDP: a DNS query) socket whose source is
 * the client's address;
 * then the processes of that netns are searched for an fd on that inode.
 * Only denied connections ask (the abort criteria count them per call),
 * so the cost of a /proc walk is paid rarely.
 */
#include "peer.h"

#include <dirent.h>
#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#define DIAG_BUF	16384
#define DIAG_ROUNDS	64	/* bounded: a sandbox with more sockets is not searched further */

/*
 * 2: m is bound to exactly sa; 1: to its port on the wildcard address (an
 * unconnected UDP socket that sent without bind, as dnspython's does);
 * 0: neither.
 */
static int same_addr(const struct inet_diag_msg *m, const struct sockaddr *sa)
{
	static const uint32_t any[4];

	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *sin = (const struct sockaddr_in *)sa;

		if (m->id.idiag_sport != sin->sin_port)
			return 0;
		return m->id.idiag_src[0] == sin->sin_addr.s_addr ? 2 :
		       m->id.idiag_src[0] == 0;
	}
	const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)sa;

	if (m->id.idiag_sport != sin6->sin6_port)
		return 0;
	return !memcmp(m->id.idiag_src, &sin6->sin6_addr, 16) ? 2 :
	       !memcmp(m->id.idiag_src, any, 16);
}

/*
 * A socket's rank as the asker: an exact binding first (same_addr), and
 * among equals one with an inode, which a live process holds, before one
 * closed (TIME_WAIT, or an orphan in FIN_WAIT2: inode 0): the first listed won
 * before, and a socket the sandbox had closed on the asker's port, listed
 * ahead of it, left the denial with neither pid nor call.
 */
#define RANK_BEST	5

static int match_rank(int how, uint32_t inode)
{
	return how ? 2 * how + (inode != 0) : 0;
}

/* INET_DIAG_CGROUP_ID among the attributes after m, or 0. */
static uint64_t msg_cgroup(struct nlmsghdr *h, struct inet_diag_msg *m)
{
	int len = h->nlmsg_len - NLMSG_LENGTH(sizeof(*m));
	struct rtattr *a = (struct rtattr *)(m + 1);
	uint64_t id = 0;

	for (; RTA_OK(a, len); a = RTA_NEXT(a, len))
		if (a->rta_type == INET_DIAG_CGROUP_ID && RTA_PAYLOAD(a) >= sizeof(id))
			memcpy(&id, RTA_DATA(a), sizeof(id));
	return id;
}

/*
 * The inode of the TCP socket bound to sa in the diag socket's netns, and
 * the cgroup2 group of the process that made it, if it matches better
 * than *best (match_rank's, raised to it), else 0.  The kernel is asked
 * only for sockets on sa's port (a filter of INET_DIAG_BC_S_EQ): a dump
 * of them all was the sandbox's to lengthen, and past DIAG_ROUNDS reads
 * of it (some 8,000 sockets) the asker was not found, so that a sandbox
 * holding 60,000 UDP sockets left its denials unattributed.
 */
static ino_t socket_inode(int fd, const struct sockaddr *sa, int proto,
			  uint64_t *cgid, int *best)
{
	const struct sockaddr_in *sin = (const struct sockaddr_in *)sa;
	struct {
		struct nlmsghdr nlh;
		struct inet_diag_req_v2 r;
		struct nlattr bc;
		struct inet_diag_bc_op op[2];
	} req = {
		.nlh = {
			.nlmsg_len = sizeof(req),
			.nlmsg_type = SOCK_DIAG_BY_FAMILY,
			.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP,
		},
		.r = {
			.sdiag_family = sa->sa_family,
			.sdiag_protocol = proto,
			.idiag_states = ~0U,
		},
		.bc = {
			.nla_len = NLA_HDRLEN + sizeof(req.op),
			.nla_type = INET_DIAG_REQ_BYTECODE,
		},
		/* a match runs off the end (kept), a mismatch 4 past it (dropped) */
		.op = {
			{ .code = INET_DIAG_BC_S_EQ, .yes = sizeof(req.op),
			  .no = sizeof(req.op) + 4 },
			/* the port, in host order: the kernel compares inet_num */
			{ .no = ntohs(sin->sin_port) },
		},
	};
	struct timeval tv = { 0, 200 * 1000 };
	char *buf;
	ino_t ino = 0;
	bool done = false;

	_Static_assert(offsetof(struct sockaddr_in, sin_port) ==
		       offsetof(struct sockaddr_in6, sin6_port), "one port field");
	_Static_assert(sizeof(req) == NLMSG_LENGTH(sizeof(req.r)) + NLA_HDRLEN +
		       sizeof(req.op), "no padding in the request");
	if (send(fd, &req, sizeof(req), 0) != sizeof(req))
		return 0;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	buf = malloc(DIAG_BUF);
	for (int round = 0; buf && !done && round < DIAG_ROUNDS; round++) {
		ssize_t n = recv(fd, buf, DIAG_BUF, 0);
		struct nlmsghdr *h = (struct nlmsghdr *)buf;

		if (n <= 0)
			break;
		for (; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
			struct inet_diag_msg *m = NLMSG_DATA(h);

			if (h->nlmsg_type == NLMSG_DONE || h->nlmsg_type == NLMSG_ERROR) {
				done = true;
				break;
			}
			int how = match_rank(same_addr(m, sa), m->idiag_inode);

			if (how > *best) {
				*best = how;
				ino = m->idiag_inode;
				*cgid = msg_cgroup(h, m);
			}
		}
	}
	/* a dump cut short leaves the rest queued: drain it for the next ask */
	while (buf && !done && recv(fd, buf, DIAG_BUF, MSG_DONTWAIT) > 0)
		;
	free(buf);
	return ino;
}

/*
 * An IPv4 peer may be an AF_INET6 socket of the sandbox's: one not
 * IPV6_V6ONLY that connected (or sent) to ::ffff:127.0.0.1 reaches an
 * IPv4 listener as IPv4, but the kernel lists it among the AF_INET6
 * sockets only, bound to the mapped address (or to ::).  Asked of
 * AF_INET alone, such a denial named neither pid nor call (no socket,
 * no cgroup), and was in no call's denials: one flag of the socket's.
 */
static ino_t mapped_inode(int fd, const struct sockaddr_in *sin, int proto,
			  uint64_t *cgid, int *best)
{
	struct sockaddr_in6 m = { .sin6_family = AF_INET6, .sin6_port = sin->sin_port };

	m.sin6_addr.s6_addr[10] = 0xff;
	m.sin6_addr.s6_addr[11] = 0xff;
	memcpy(&m.sin6_addr.s6_addr[12], &sin->sin_addr, 4);
	return socket_inode(fd, (const struct sockaddr *)&m, proto, cgid, best);
}

/*
 * Does process pid hold an fd on want?  Each fd read is one of *budget,
 * which the whole search shares: stops, false, when it is spent.
 */
static bool holds_socket(const char *pid, const char *want, unsigned *budget)
{
	char path[300], link[64];
	struct dirent *de;
	bool found = false;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%s/fd", pid);
	d = opendir(path);
	while (d && !found && *budget && (de = readdir(d))) {
		char fdpath[600];
		ssize_t n;

		if (de->d_name[0] == '.')
			continue;
		--*budget;
		snprintf(fdpath, sizeof(fdpath), "%s/%s", path, de->d_name);
		n = readlink(fdpath, link, sizeof(link) - 1);
		if (n > 0) {
			link[n] = '\0';
			found = !strcmp(link, want);
		}
	}
	if (d)
		closedir(d);
	return found;
}

/*
 * The sandbox's processes and their fds are the sandbox's to multiply
 * (1024 processes of 1024 fds by default), and each fd is a readlink
 * here, on the supervisor's loop: so a search reads at most
 * PEER_SEARCH_FDS of them, a process of the netns counting as one, and
 * past that names no pid (the socket's cgroup still names the call).
 */
static pid_t peer_pid_of(int diag_fd, ino_t netns_ino, const struct sockaddr *peer,
			 int proto, uint64_t *cgid)
{
	unsigned budget = PEER_SEARCH_FDS;
	int best = 0;
	char want[64];
	struct dirent *de;
	pid_t pid = 0;
	ino_t ino;
	DIR *d;

	*cgid = 0;
	if (diag_fd < 0 || (peer->sa_family != AF_INET && peer->sa_family != AF_INET6))
		return 0;
	ino = socket_inode(diag_fd, peer, proto, cgid, &best);
	if (best < RANK_BEST && peer->sa_family == AF_INET)
		ino = mapped_inode(diag_fd, (const struct sockaddr_in *)peer, proto,
				   cgid, &best) ?: ino;
	if (!ino)
		return 0;
	snprintf(want, sizeof(want), "socket:[%lu]", (unsigned long)ino);
	d = opendir("/proc");
	while (d && !pid && budget && (de = readdir(d))) {
		char path[300];
		struct stat st;

		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/ns/net", de->d_name);
		if (stat(path, &st) < 0 || st.st_ino != netns_ino)
			continue;
		budget--;
		if (holds_socket(de->d_name, want, &budget))
			pid = atoi(de->d_name);
	}
	if (d)
		closedir(d);
	return pid;
}

bool peer_rate_take(struct peer_rate *r, uint64_t now_ms)
{
	if (now_ms - r->since_ms >= 1000) {
		r->since_ms = now_ms;
		r->n = 0;
	}
	if (r->n >= PEER_SEARCHES_PER_S)
		return false;
	r->n++;
	return true;
}

pid_t peer_pid(int diag_fd, ino_t netns_ino, const struct sockaddr *peer,
	       uint64_t *cgid)
{
	return peer_pid_of(diag_fd, netns_ino, peer, IPPROTO_TCP, cgid);
}

pid_t peer_pid_udp(int diag_fd, ino_t netns_ino, const struct sockaddr *peer,
		   uint64_t *cgid)
{
	return peer_pid_of(diag_fd, netns_ino, peer, IPPROTO_UDP, cgid);
}
