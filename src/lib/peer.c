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
#include "internal.h"
#include "peer.h"

/* before the kernel headers, which defer to it (linux/libc-compat.h) */
#include <netinet/in.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <linux/inet_diag.h>
#include <linux/netfilter_ipv4.h>
#include <linux/netfilter_ipv6/ip6_tables.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
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
 * A socket's rank as the asker, 0 for none: an exact binding first
 * (same_addr), then one connected to where the asker sent (a UDP socket
 * may also be unconnected: it reaches the kernel's filter either way),
 * then one with an inode, which a live process holds, before one closed
 * (TIME_WAIT, or an orphan in FIN_WAIT2: inode 0): the first listed won
 * before, and a socket the sandbox had closed on the asker's port, listed
 * ahead of it, left the denial with neither pid nor call.
 */
#define RANK_BEST	8

/* The best socket seen yet: its rank, inode, maker's cgroup2 group. */
struct match {
	int best;
	ino_t ino;
	uint64_t cgid;
	bool tied;	/* another live one of that rank: neither is named */
};

static int match_rank(int how, bool connected, uint32_t inode)
{
	return how ? ((how - 1) << 2 | connected << 1 | (inode != 0)) + 1 : 0;
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

/* sa's port, in network order (one field for both families) */
static uint16_t port_of(const struct sockaddr *sa)
{
	_Static_assert(offsetof(struct sockaddr_in, sin_port) ==
		       offsetof(struct sockaddr_in6, sin6_port), "one port field");
	return ((const struct sockaddr_in *)sa)->sin_port;
}

#define BC_MAX	(8 + 4 + sizeof(struct inet_diag_hostcond) + 16 + 4 + 8)

static size_t put_op(unsigned char *bc, size_t at, uint8_t code, uint8_t yes,
		     uint16_t no)
{
	struct inet_diag_bc_op op = { .code = code, .yes = yes, .no = no };

	memcpy(bc + at, &op, sizeof(op));
	return at + sizeof(op);
}

/*
 * The kernel's filter (inet_diag bytecode), into bc: the source port is
 * the asker's, and, where to is known, the destination is to (its port
 * alone where its address is a wildcard), or, for UDP, none (a socket
 * that sends without connect).  Without the destination, any socket of
 * the sandbox's bound to the asker's port matched as well as the asker's:
 * a listener there (SO_REUSEPORT), another call's process, was listed
 * first and named instead.  Each op jumps by yes on a match, by no else;
 * past the end by 4 drops the socket, the end exactly keeps it; an "or"
 * is a JMP over its second half, so that the kernel's check, which walks
 * the yes chain, reaches every op.  Its length.
 */
static size_t diag_filter(unsigned char *bc, const struct sockaddr *peer,
			  const struct sockaddr *to, int proto)
{
	struct inet_diag_hostcond hc = { .port = to ? ntohs(port_of(to)) : 0 };
	const void *addr = NULL;
	size_t alen = 0, cond, len, at = 0;

	if (to && to->sa_family == AF_INET &&
	    ((const struct sockaddr_in *)to)->sin_addr.s_addr != htonl(INADDR_ANY)) {
		addr = &((const struct sockaddr_in *)to)->sin_addr;
		alen = 4;
	} else if (to && to->sa_family == AF_INET6 &&
		   !IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)to)->sin6_addr)) {
		addr = &((const struct sockaddr_in6 *)to)->sin6_addr;
		alen = 16;
	}
	hc.family = addr ? to->sa_family : AF_UNSPEC;
	hc.prefix_len = alen * 8;
	cond = sizeof(struct inet_diag_bc_op) + sizeof(hc) + alen;
	len = 8 + (to ? cond : 0) + (to && proto == IPPROTO_UDP ? 4 + 8 : 0);
	/* the port, in host order: the kernel compares inet_num */
	at = put_op(bc, at, INET_DIAG_BC_S_EQ, 8, len + 4);
	at = put_op(bc, at, 0, 0, ntohs(port_of(peer)));
	if (!to)
		return at;
	/* a mismatch: past the end (TCP), or over the JMP to D_EQ (UDP) */
	at = put_op(bc, at, INET_DIAG_BC_D_COND, cond, cond + 4);
	memcpy(bc + at, &hc, sizeof(hc));
	if (alen)	/* a wildcard has no address (and memcpy no NULL) */
		memcpy(bc + at + sizeof(hc), addr, alen);
	at += sizeof(hc) + alen;
	if (proto != IPPROTO_UDP)
		return at;
	/* or not connected at all: a destination port of 0 */
	at = put_op(bc, at, INET_DIAG_BC_JMP, 4, 4 + 8);
	at = put_op(bc, at, INET_DIAG_BC_D_EQ, 8, 8 + 4);
	return put_op(bc, at, 0, 0, 0);
}

/*
 * The socket bound to sa in the diag socket's netns (and sending to
 * to, if known: diag_filter) into o, if it matches better than o's.
 * The kernel is asked only for sockets on sa's port: a dump of them all
 * was the sandbox's to lengthen, and past DIAG_ROUNDS reads of it (some
 * 8,000 sockets) the asker was not found, so that a sandbox holding
 * 60,000 UDP sockets left its denials unattributed.  Two live sockets
 * of the best rank (UDP sockets of one address and port, SO_REUSEADDR,
 * both unconnected) cannot be told apart: neither is named, and their
 * call only where both have the same group, rather than the first
 * listed, which may be a decoy of another call's.
 */
static void socket_inode(int fd, const struct sockaddr *sa,
			 const struct sockaddr *to, int proto, struct match *o)
{
	struct {
		struct nlmsghdr nlh;
		struct inet_diag_req_v2 r;
		struct nlattr bc;
		unsigned char ops[BC_MAX];
	} req = {
		.nlh = {
			.nlmsg_type = SOCK_DIAG_BY_FAMILY,
			.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP,
		},
		.r = {
			.sdiag_family = sa->sa_family,
			.sdiag_protocol = proto,
			.idiag_states = ~0U,
		},
		.bc = { .nla_type = INET_DIAG_REQ_BYTECODE },
	};
	size_t bclen = diag_filter(req.ops, sa, to, proto);
	struct timeval tv = { 0, 200 * 1000 };
	bool done = false;
	char *buf;

	_Static_assert(offsetof(typeof(req), ops) == NLMSG_LENGTH(sizeof(req.r)) +
		       NLA_HDRLEN, "no padding in the request");
	req.bc.nla_len = NLA_HDRLEN + bclen;
	req.nlh.nlmsg_len = offsetof(typeof(req), ops) + bclen;
	if (send(fd, &req, req.nlh.nlmsg_len, 0) != (ssize_t)req.nlh.nlmsg_len)
		return;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	buf = malloc(DIAG_BUF);
	for (int round = 0; buf && !done && round < DIAG_ROUNDS; round++) {
		ssize_t n = recv(fd, buf, DIAG_BUF, 0);
		struct nlmsghdr *h = (struct nlmsghdr *)buf;

		if (n <= 0)
			break;
		for (; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
			struct inet_diag_msg *m = NLMSG_DATA(h);
			int how;

			if (h->nlmsg_type == NLMSG_DONE || h->nlmsg_type == NLMSG_ERROR) {
				done = true;
				break;
			}
			how = match_rank(same_addr(m, sa), to && m->id.idiag_dport,
					 m->idiag_inode);
			if (how > o->best) {
				o->best = how;
				o->ino = m->idiag_inode;
				o->cgid = msg_cgroup(h, m);
				o->tied = false;
			} else if (how == o->best && o->ino && m->idiag_inode != o->ino) {
				o->tied = true;
				if (msg_cgroup(h, m) != o->cgid)
					o->cgid = 0;
			}
		}
	}
	/* a dump cut short leaves the rest queued: drain it for the next ask */
	while (buf && !done && recv(fd, buf, DIAG_BUF, MSG_DONTWAIT) > 0)
		;
	free(buf);
}

/*
 * An IPv4 peer may be an AF_INET6 socket of the sandbox's: one not
 * IPV6_V6ONLY that connected (or sent) to ::ffff:127.0.0.1 reaches an
 * IPv4 listener as IPv4, but the kernel lists it among the AF_INET6
 * sockets only, bound to the mapped address (or to ::).  Asked of
 * AF_INET alone, such a denial named neither pid nor call (no socket,
 * no cgroup), and was in no call's denials: one flag of the socket's.
 */
static void mapped_inode(int fd, const struct sockaddr_in *sin,
			 const struct sockaddr *to, int proto, struct match *o)
{
	struct sockaddr_in6 m = { .sin6_family = AF_INET6, .sin6_port = sin->sin_port };

	m.sin6_addr.s6_addr[10] = 0xff;
	m.sin6_addr.s6_addr[11] = 0xff;
	memcpy(&m.sin6_addr.s6_addr[12], &sin->sin_addr, 4);
	socket_inode(fd, (const struct sockaddr *)&m, to, proto, o);
}

#define WALK_SLOTS	64

/*
 * What this process's searches may still read this second (peer.h,
 * PEER_WALK_PER_S): one budget for every sandbox it supervises, as the
 * loop they stall is one.  Searches run on that loop's thread only (a
 * count without a lock, as box.c's boxes_starting).
 */
static struct {
	uint64_t since_ms;
	unsigned left;
	/*
	 * The sandboxes (network namespaces) that searched this second, what
	 * each read, and how many searched the second before: one that
	 * floods denials took the whole budget each second, for as long as
	 * it flooded, and every other sandbox's denials named no pid
	 * (bench/peer_starve.sh: 0-15 of 75).  Past its equal share of the
	 * second's budget (of those that searched the second before) a
	 * sandbox leaves what the others' shares still lack (owed): it once
	 * left only one share, which the k - 1 others then split, and past
	 * it theirs named no pid (unit_peer's
	 * a_flood_leaves_each_other_sandbox_its_share); what the others leave
	 * it still may.  More than WALK_SLOTS share the last slot.
	 */
	ino_t ns[WALK_SLOTS];
	unsigned used[WALK_SLOTS];
	unsigned n, n_before, slot, share, owed;
} walk;

#define PEER_STR_(x)	#x
#define PEER_STR(x)	PEER_STR_(x)

/* peer_missed's: set by each search */
static const char *missed;

const char *peer_missed(void)
{
	return missed;
}

/* This second's budget, and the slot of netns_ino's searches in it. */
static unsigned *walk_budget(ino_t netns_ino)
{
	uint64_t now = corral_now_ms();
	unsigned i;

	if (!walk.since_ms || now - walk.since_ms >= 1000) {
		walk.n_before = walk.since_ms && now - walk.since_ms < 2000 ? walk.n : 0;
		walk.since_ms = now ? now : 1;
		walk.left = PEER_WALK_PER_S;
		walk.n = 0;
		walk.share = PEER_WALK_PER_S / (walk.n_before > 1 ? walk.n_before : 1);
		/* each of the second before's, whoever comes first */
		walk.owed = walk.n_before > 1 ? walk.n_before * walk.share : 0;
	}
	for (i = 0; i < walk.n && walk.ns[i] != netns_ino; i++)
		;
	if (i == walk.n && walk.n < WALK_SLOTS) {
		walk.ns[walk.n] = netns_ino;
		walk.used[walk.n++] = 0;
		/* one more than were expected: its share is owed too */
		if (walk.n > walk.n_before && walk.n_before > 1)
			walk.owed += walk.share;
	}
	walk.slot = i < WALK_SLOTS ? i : WALK_SLOTS - 1;
	return &walk.left;
}

/*
 * One entry more read of the process's budget, by the search's sandbox
 * (walk.slot); false once it is spent, or its share is and what is left
 * is owed to the others' shares.
 */
static bool walk_take(unsigned *left)
{
	unsigned share = walk.share ? walk.share : PEER_WALK_PER_S;
	bool mine = walk.used[walk.slot] < share;

	if (!*left) {
		missed = "not searched for to the end: the searches of every sandbox "
			 "this supervisor watches read their " PEER_STR(PEER_WALK_PER_S)
			 " entries of /proc this second (PEER_WALK_PER_S)";
		return false;
	}
	if (!mine && *left <= walk.owed) {
		missed = "not searched for to the end: this sandbox's searches read "
			 "their share of the " PEER_STR(PEER_WALK_PER_S) " entries of "
			 "/proc every sandbox's may read a second, and the rest is the "
			 "others' (PEER_WALK_PER_S)";
		return false;
	}
	--*left;
	walk.used[walk.slot]++;
	if (mine && walk.owed)
		walk.owed--;
	return true;
}

/*
 * Does process pid hold an fd on want?  Each fd read is one of *budget,
 * which the whole search shares, and of the process's *left: stops,
 * false, when either is spent.
 */
static bool holds_socket(const char *pid, const char *want, unsigned *budget,
			 unsigned *left)
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
		if (!walk_take(left))
			break;
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
 * A process of the sandbox's netns to read, and how many fds it holds
 * (the kernel says it as /proc/PID/fd's size, since 6.2; 0 before).
 */
struct cand {
	pid_t pid;
	unsigned nfds;
};

/* Whether a is read before b: fewer fds first, then the newer pid. */
static bool before(const struct cand *a, const struct cand *b)
{
	return a->nfds != b->nfds ? a->nfds < b->nfds : a->pid > b->pid;
}

/*
 * Keep c among the PEER_SEARCH_FDS candidates read first (no more can be
 * read: each costs the budget one): h is a heap whose top is the one read
 * last, which c replaces when c comes before it.
 */
static void keep_cand(struct cand *h, size_t *n, struct cand c)
{
	size_t i = *n, k;

	if (*n == PEER_SEARCH_FDS) {
		if (!before(&c, &h[0]))
			return;
		/* sift c down from the top, the last read leaving */
		for (i = 0; (k = 2 * i + 1) < *n; i = k) {
			if (k + 1 < *n && before(&h[k], &h[k + 1]))
				k++;
			if (!before(&c, &h[k]))
				break;
			h[i] = h[k];
		}
		h[i] = c;
		return;
	}
	for (++*n; i && before(&h[(i - 1) / 2], &c); i = (i - 1) / 2)
		h[i] = h[(i - 1) / 2];
	h[i] = c;
}

static int cand_order(const void *a, const void *b)
{
	return before(a, b) ? -1 : before(b, a);
}

/*
 * The processes of the netns netns_ino, into h (PEER_SEARCH_FDS at
 * most), in the order they are read: by how many fds each holds, fewest
 * first, the newest first among equals.  In /proc's order, a process that
 * held 2048 fds ahead of the asker (an earlier call's, left running)
 * spent the whole budget: without a cgroup2 group to name the call by (an
 * unprivileged daemon without a delegated one, a v1 host), the denial
 * named neither pid nor call.  Each process here is a stat or two, as
 * every process of the host was already (its netns), and one of *left:
 * false once that is spent, the walk cut short.
 */
static bool netns_processes(ino_t netns_ino, struct cand *h, size_t *np,
			    unsigned *left)
{
	struct dirent *de;
	size_t n = 0;
	bool whole = true;
	DIR *d = opendir("/proc");

	while (d && (de = readdir(d))) {
		char path[300];
		struct stat st;
		struct cand c;

		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		if (!walk_take(left)) {
			whole = false;
			break;
		}
		snprintf(path, sizeof(path), "/proc/%s/ns/net", de->d_name);
		if (stat(path, &st) < 0 || st.st_ino != netns_ino)
			continue;
		snprintf(path, sizeof(path), "/proc/%s/fd", de->d_name);
		c.pid = atoi(de->d_name);
		c.nfds = stat(path, &st) == 0 && st.st_size > 0 &&
			 st.st_size < UINT_MAX ? (unsigned)st.st_size : 0;
		keep_cand(h, &n, c);
	}
	if (d)
		closedir(d);
	qsort(h, n, sizeof(*h), cand_order);
	*np = n;
	return whole;
}

/*
 * The sandbox's processes and their fds are the sandbox's to multiply
 * (1024 processes of 1024 fds by default), and each fd is a readlink
 * here, on the supervisor's loop: so a search reads at most
 * PEER_SEARCH_FDS of them, a process of the netns counting as one, and
 * past that names no pid (the socket's cgroup still names the call); and
 * every entry it reads is one of the process's PEER_WALK_PER_S, past
 * which it names no pid either.
 */
static pid_t peer_pid_of(int diag_fd, ino_t netns_ino, const struct sockaddr *peer,
			 const struct sockaddr *to, int proto, uint64_t *cgid)
{
	unsigned budget = PEER_SEARCH_FDS, *left;
	struct match o = { 0 };
	struct cand *h;
	char want[64];
	pid_t pid = 0;
	size_t n;

	*cgid = 0;
	missed = NULL;
	if (diag_fd < 0 || (peer->sa_family != AF_INET && peer->sa_family != AF_INET6))
		return 0;
	if (to && to->sa_family != AF_INET && to->sa_family != AF_INET6)
		to = NULL;
	socket_inode(diag_fd, peer, to, proto, &o);
	if (o.best < RANK_BEST && peer->sa_family == AF_INET)
		mapped_inode(diag_fd, (const struct sockaddr_in *)peer, to, proto, &o);
	*cgid = o.cgid;
	left = walk_budget(netns_ino);
	/* spent: walk_take says so (it takes nothing then) */
	if (!o.ino || o.tied || (!*left && !walk_take(left)))
		return 0;
	h = malloc(PEER_SEARCH_FDS * sizeof(*h));
	if (!h)
		return 0;
	snprintf(want, sizeof(want), "socket:[%lu]", (unsigned long)o.ino);
	if (!netns_processes(netns_ino, h, &n, left))
		n = 0;	/* the asker may be among the processes not walked */
	for (size_t i = 0; i < n && !pid && budget && walk_take(left); i++) {
		char name[16];

		budget--;
		snprintf(name, sizeof(name), "%d", (int)h[i].pid);
		if (holds_socket(name, want, &budget, left))
			pid = h[i].pid;
	}
	free(h);
	if (!pid && !missed && !budget)
		missed = "not found in the " PEER_STR(PEER_SEARCH_FDS) " fds a search "
			 "reads (PEER_SEARCH_FDS)";
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

int peer_dst(int fd, struct sockaddr_storage *to)
{
	socklen_t len = sizeof(*to);

	if (fd < 0)
		return -EBADF;
	/* redirected (transparent mode): where the asker sent it */
	if (getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, to, &len) == 0)
		return 0;
	len = sizeof(*to);
	if (getsockopt(fd, SOL_IPV6, IP6T_SO_ORIGINAL_DST, to, &len) == 0)
		return 0;
	len = sizeof(*to);
	return getsockname(fd, (struct sockaddr *)to, &len) < 0 ? -errno : 0;
}

pid_t peer_pid(int diag_fd, ino_t netns_ino, const struct sockaddr *peer,
	       const struct sockaddr *to, uint64_t *cgid)
{
	return peer_pid_of(diag_fd, netns_ino, peer, to, IPPROTO_TCP, cgid);
}

pid_t peer_pid_udp(int diag_fd, ino_t netns_ino, const struct sockaddr *peer,
		   const struct sockaddr *to, uint64_t *cgid)
{
	return peer_pid_of(diag_fd, netns_ino, peer, to, IPPROTO_UDP, cgid);
}
