/*
 * unit_nft.c - transparent mode's nftables batch (src/lib/nft.c), each
 * test in a user and network namespace of its own, never the host's:
 * the rules load; a refusal names the command the kernel refused, and
 * the batch commits nothing; without CAP_NET_ADMIN nothing loads.
 * tests/net.sh compares the loaded rules with nft's own listing.
 * The log rule (nft_log_rules) and what nfnetlink_log then reports of
 * a UDP packet and an ICMP echo sent off loopback (nflog.c), read as
 * the supervisor reads it; and messages made here that the kernel
 * would not make (extension headers, fragments, a short copy).
 */
#include "net.h"
#include "nflog.h"
#include "nft.h"
#include "unit.h"

#include <arpa/inet.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_log.h>
#include <sys/socket.h>

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

struct outcome {
	int r;		/* nft_redirect_rules' result */
	int listed;	/* what `nft list tables` found: bit 0 ip, bit 1 ip6 */
	char why[512];
};

static bool write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	bool ok = fd >= 0 && write(fd, s, strlen(s)) == (ssize_t)strlen(s);

	if (fd >= 0)
		close(fd);
	return ok;
}

/* Root of a new user namespace (mapped to us) with a netns of its own. */
static bool own_netns(void)
{
	char map[64];
	uid_t uid = geteuid();
	gid_t gid = getegid();

	if (unshare(CLONE_NEWUSER | CLONE_NEWNET) < 0)
		return false;
	snprintf(map, sizeof(map), "0 %u 1", (unsigned)uid);
	if (!write_file("/proc/self/uid_map", map))
		return false;
	snprintf(map, sizeof(map), "0 %u 1", (unsigned)gid);
	return write_file("/proc/self/setgroups", "deny") &&
	       write_file("/proc/self/gid_map", map);
}

static bool nft_present(void)
{
	return access("/usr/sbin/nft", X_OK) == 0;
}

/* Which corral tables nft lists in this netns (-1: nft not run). */
static int listed_tables(void)
{
	FILE *p = popen("/usr/sbin/nft list tables 2>/dev/null", "r");
	char line[128];
	int found = 0;

	if (!p)
		return -1;
	while (fgets(line, sizeof(line), p)) {
		found |= strcmp(line, "table ip corral\n") == 0;
		found |= (strcmp(line, "table ip6 corral\n") == 0) << 1;
	}
	pclose(p);
	return found;
}

static bool drop_net_admin(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];

	if (syscall(SYS_capget, &h, d) < 0)
		return false;
	d[0].effective &= ~(1u << CAP_NET_ADMIN);
	d[0].permitted &= ~(1u << CAP_NET_ADMIN);
	return syscall(SYS_capset, &h, d) == 0;
}

enum setup { PLAIN, CHAIN_IN_THE_WAY, NO_NET_ADMIN };

/*
 * fn(out, arg) in a child, in a user and network namespace of its own;
 * out (len bytes, whose first member is an int r) comes back over a pipe.
 * r = -ENOSYS: the namespaces could not be made; -EIO: nothing came back.
 */
static void in_own_netns(void (*fn)(void *out, const void *arg), const void *arg,
			 void *out, size_t len)
{
	int p[2], status;
	pid_t pid;

	*(int *)out = -ENOSYS;
	if (pipe(p) < 0)
		return;
	pid = fork();
	if (pid == 0) {
		close(p[0]);
		if (own_netns())
			fn(out, arg);
		_exit(write(p[1], out, len) == (ssize_t)len ? 0 : 1);
	}
	close(p[1]);
	if (pid < 0 || read(p[0], out, len) != (ssize_t)len)
		*(int *)out = -EIO;
	close(p[0]);
	if (pid > 0)
		waitpid(pid, &status, 0);
}

/* In the child: the setup asked for, then the rules. */
static void load_rules(void *out, const void *arg)
{
	enum setup setup = *(const enum setup *)arg;
	struct outcome *o = out;

	if (setup == CHAIN_IN_THE_WAY &&
	    system("/usr/sbin/nft 'add table ip corral; add chain ip corral out "
		   "{ type filter hook input priority 0; }'") != 0)
		_exit(2);
	if (setup == NO_NET_ADMIN && !drop_net_admin())
		_exit(3);
	o->r = nft_redirect_rules(3129, 53, 1024, o->why, sizeof(o->why));
	if (nft_present() && setup != NO_NET_ADMIN)
		o->listed = listed_tables();
}

static struct outcome attempt(enum setup setup)
{
	struct outcome o = { .listed = -1 };

	in_own_netns(load_rules, &setup, &o, sizeof(o));
	return o;
}

TEST(rules_load_in_both_families)
{
	struct outcome o = attempt(PLAIN);

	if (o.r == -ENOSYS) {
		printf("# skip: no user namespace here\n");
		return;
	}
	CHECK(o.r == 0);
	if (o.r)
		fprintf(stderr, "  why: %s\n", o.why);
	if (nft_present())
		CHECK(o.listed == 3);
}

TEST(a_refusal_names_the_command_and_commits_nothing)
{
	struct outcome o;

	if (!nft_present()) {
		printf("# skip: no /usr/sbin/nft to put a chain in the way\n");
		return;
	}
	o = attempt(CHAIN_IN_THE_WAY);
	if (o.r == -ENOSYS) {
		printf("# skip: no user namespace here\n");
		return;
	}
	CHECK(o.r < 0);
	CHECK_STR_CONTAINS(o.why, "nftables refused the nat chain of table ip corral: ");
	/* ip corral was there before; ip6 corral, in the same batch, is not */
	CHECK(o.listed == 1);
}

TEST(without_cap_net_admin_nothing_loads)
{
	struct outcome o = attempt(NO_NET_ADMIN);

	if (o.r == -ENOSYS) {
		printf("# skip: no user namespace here\n");
		return;
	}
	CHECK(o.r == -EPERM);
	CHECK_STR_CONTAINS(o.why, "nftables refused the batch: Operation not permitted");
}

/* ---- the log rule and nfnetlink_log ----------------------------------------- */

struct logged {
	int r;			/* -ENOSYS: no namespaces; else the first failure or 0 */
	char why[512];
	int n;			/* packets read back */
	struct nflog_packet p[4];
	int sent_errno[2];	/* what the UDP send and the ICMP echo got */
};

/*
 * A UDP datagram and an ICMP echo (a raw socket: ours in this netns) to
 * 198.18.0.9, which this netns routes over lo only: the rules drop both
 * in here, after logging them.
 */
static void send_two(struct logged *o)
{
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(4433) };
	const uint8_t echo[8] = { 8, 0, 0xf7, 0xff, 0, 0, 0, 0 };	/* type 8, checksum */
	int u = socket(AF_INET, SOCK_DGRAM, 0), raw = socket(AF_INET, SOCK_RAW, IPPROTO_ICMP);

	inet_pton(AF_INET, "198.18.0.9", &to.sin_addr);
	o->sent_errno[0] = sendto(u, "x", 1, 0, (struct sockaddr *)&to, sizeof(to)) < 0 ? errno : 0;
	to.sin_port = 0;
	o->sent_errno[1] = sendto(raw, echo, sizeof(echo), 0, (struct sockaddr *)&to,
				  sizeof(to)) < 0 ? errno : 0;
	close(u);
	close(raw);
}

static void read_logged(int fd, struct logged *o)
{
	char buf[8192] __attribute__((aligned(NLMSG_ALIGNTO)));

	for (int i = 0; i < 8 && o->n < 4; i++) {
		ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		struct nlmsghdr *nh = (struct nlmsghdr *)buf;

		if (n <= 0)
			break;
		for (int left = (int)n; NLMSG_OK(nh, left) && o->n < 4; nh = NLMSG_NEXT(nh, left))
			if (nflog_parse(nh, (size_t)left, &o->p[o->n]) == 1)
				o->n++;
	}
}

/* In the child: the sandbox's rules and the log's, a UDP packet and an echo. */
static void log_two(void *out, const void *arg)
{
	struct logged *o = out;
	int fd;

	(void)arg;
	o->r = net_lo_up();
	if (o->r == 0)
		o->r = net_transparent_setup(3129, 53, 1024, o->why, sizeof(o->why));
	fd = o->r == 0 ? nflog_open(NFLOG_GROUP, o->why, sizeof(o->why)) : -1;
	if (o->r == 0 && fd < 0)
		o->r = fd;
	if (o->r == 0)
		o->r = nft_log_rules(NFLOG_GROUP, o->why, sizeof(o->why));
	if (o->r == 0) {
		send_two(o);
		read_logged(fd, o);
	}
}

static struct logged log_attempt(void)
{
	struct logged o = { 0 };

	in_own_netns(log_two, NULL, &o, sizeof(o));
	return o;
}

static const char *dst_text(const struct nflog_packet *p, char *buf, size_t len)
{
	const void *a = p->family == AF_INET ?
		(const void *)&((const struct sockaddr_in *)&p->dst)->sin_addr :
		(const void *)&((const struct sockaddr_in6 *)&p->dst)->sin6_addr;

	return inet_ntop(p->family, a, buf, (socklen_t)len);
}

TEST(udp_and_icmp_off_loopback_are_logged_then_dropped)
{
	struct logged o = log_attempt();
	char a[INET6_ADDRSTRLEN];

	if (o.r == -ENOSYS) {
		printf("# skip: no user namespace here\n");
		return;
	}
	CHECK(o.r == 0);
	if (o.r)
		fprintf(stderr, "  why: %s\n", o.why);
	/* dropped: the sender hears EPERM, nothing went anywhere */
	CHECK(o.sent_errno[0] == EPERM);
	CHECK(o.sent_errno[1] == EPERM);
	CHECK(o.n == 2);
	if (o.n < 2)
		return;
	CHECK(o.p[0].family == AF_INET && o.p[0].proto == IPPROTO_UDP);
	CHECK(strcmp(dst_text(&o.p[0], a, sizeof(a)), "198.18.0.9") == 0);
	CHECK(o.p[0].port == 4433 && o.p[0].icmp_type == -1);
	CHECK(o.p[0].has_uid && o.p[0].uid == 0);	/* as this user namespace sees it */
	CHECK(o.p[1].proto == IPPROTO_ICMP && o.p[1].icmp_type == 8 && o.p[1].port == -1);
	CHECK(strcmp(dst_text(&o.p[1], a, sizeof(a)), "198.18.0.9") == 0);
}

/* ---- the bound on new tracked flows ---------------------------------------- */

#define FLOWS		2	/* a second, and as many at once */
#define FLOW_TRIES	12

struct flows {
	int r;			/* -ENOSYS: no namespaces; else the first failure or 0 */
	char why[512];
	int errs[FLOW_TRIES];	/* each connection's errno, 0 if it was made */
	long tracked;		/* nf_conntrack_count after them */
	/* with the log rules: what nfnetlink_log reported as over the rate */
	int over_tcp, over_dns, other;
	struct nflog_packet first;	/* the first of them */
};

/* DNS questions from new sockets, each a new flow: past FLOWS, dropped. */
static void send_questions(void)
{
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(53) };

	inet_pton(AF_INET, "198.18.0.9", &to.sin_addr);
	for (int i = 0; i < FLOW_TRIES; i++) {
		int u = socket(AF_INET, SOCK_DGRAM, 0);

		sendto(u, "q", 1, 0, (struct sockaddr *)&to, sizeof(to));
		close(u);
	}
}

static void read_over_rate(int fd, struct flows *o)
{
	char buf[8192] __attribute__((aligned(NLMSG_ALIGNTO)));
	struct nflog_packet p;

	for (int i = 0; i < 4 * FLOW_TRIES; i++) {
		ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		struct nlmsghdr *nh = (struct nlmsghdr *)buf;

		if (n <= 0)
			break;
		for (int left = (int)n; NLMSG_OK(nh, left); nh = NLMSG_NEXT(nh, left)) {
			if (nflog_parse(nh, (size_t)left, &p) != 1)
				continue;
			if (!p.over_rate) {
				o->other++;
				continue;
			}
			if (o->over_tcp + o->over_dns == 0)
				o->first = p;
			o->over_tcp += p.proto == IPPROTO_TCP;
			o->over_dns += p.proto == IPPROTO_UDP && p.port == 53;
		}
	}
}

/*
 * Connections to a bare address, redirected to a listener of ours on the
 * transparent port, each closed at once (TIME_WAIT keeps every one
 * tracked): past FLOWS in the same moment the next is refused, at once
 * (a reset: with an ICMP error the SYN went again a second later).
 */
static void flood_flows(void *out, const void *arg)
{
	struct sockaddr_in lst = { .sin_family = AF_INET, .sin_port = htons(3129) };
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(80) };
	struct flows *o = out;
	int l, logfd = -1;
	FILE *f;

	o->r = net_lo_up();
	if (o->r == 0)
		o->r = net_transparent_setup(3129, 53, FLOWS, o->why, sizeof(o->why));
	if (o->r == 0 && arg && (logfd = nflog_open(NFLOG_GROUP, o->why, sizeof(o->why))) < 0)
		o->r = logfd;
	if (o->r == 0 && arg)
		o->r = nft_log_rules(NFLOG_GROUP, o->why, sizeof(o->why));
	if (o->r < 0)
		return;
	inet_pton(AF_INET, "127.0.0.1", &lst.sin_addr);
	inet_pton(AF_INET, "198.18.0.9", &to.sin_addr);
	l = socket(AF_INET, SOCK_STREAM, 0);
	if (bind(l, (struct sockaddr *)&lst, sizeof(lst)) < 0 || listen(l, 64) < 0) {
		o->r = -errno;
		return;
	}
	for (int i = 0; i < FLOW_TRIES; i++) {
		int c = socket(AF_INET, SOCK_STREAM, 0), a;

		o->errs[i] = connect(c, (struct sockaddr *)&to, sizeof(to)) < 0 ? errno : 0;
		if (!o->errs[i] && (a = accept(l, NULL, NULL)) >= 0)
			close(a);
		close(c);
	}
	close(l);
	f = fopen("/proc/sys/net/netfilter/nf_conntrack_count", "r");
	if (!f || fscanf(f, "%ld", &o->tracked) != 1)
		o->tracked = -1;
	if (f)
		fclose(f);
	if (logfd >= 0) {
		send_questions();
		read_over_rate(logfd, o);
		close(logfd);
	}
}

/* flood_flows in a netns of its own: false if this host has none (skipped) */
static bool flood(struct flows *o, const int *with_log, int *made, int *refused)
{
	in_own_netns(flood_flows, with_log, o, sizeof(*o));
	if (o->r == -ENOSYS) {
		printf("# skip: no user namespace here\n");
		return false;
	}
	CHECK(o->r == 0);
	if (o->r)
		fprintf(stderr, "  why: %s (%d)\n", o->why, o->r);
	*made = *refused = 0;
	for (int i = 0; i < FLOW_TRIES; i++) {
		*made += o->errs[i] == 0;
		*refused += o->errs[i] == ECONNREFUSED;
	}
	return true;
}

TEST(tracked_flows_past_the_bound_are_refused)
{
	struct flows o = { 0 };
	int made, refused;

	if (!flood(&o, NULL, &made, &refused))
		return;
	/*
	 * The loop takes well under a millisecond; a stall of half a second
	 * (a loaded host) would earn one flow more, so two more are allowed.
	 */
	CHECK(made >= FLOWS && made <= FLOWS + 2);
	CHECK(refused == FLOW_TRIES - made);
	CHECK(o.tracked == made);
	if (made < FLOWS || made > FLOWS + 2 || refused != FLOW_TRIES - made ||
	    o.tracked != made)
		fprintf(stderr, "  made %d, refused %d, tracked %ld\n", made, refused, o.tracked);
}

/*
 * The flows the bound turned away reach nfnetlink_log, each marked as
 * such, with the address the sandbox asked for: the supervisor makes them
 * egress.denied events (nflog.c) the abort criteria count.  Before, a
 * sandbox past the rate left no trace of it.
 */
TEST(flows_over_the_rate_are_logged)
{
	struct flows o = { 0 };
	const int with_log = 1;
	char a[INET6_ADDRSTRLEN];
	int made, refused;

	if (!flood(&o, &with_log, &made, &refused))
		return;
	/* each refused connection is logged (fewer than the log's own limit) */
	CHECK(o.over_tcp == refused && refused == FLOW_TRIES - made);
	/* questions: the first FLOWS of them (in the same moment) went through */
	CHECK(o.over_dns >= FLOW_TRIES - FLOWS - 2 && o.over_dns <= FLOW_TRIES - FLOWS);
	CHECK(o.other == 0);
	CHECK(o.first.proto == IPPROTO_TCP && o.first.port == 80);
	CHECK(strcmp(dst_text(&o.first, a, sizeof(a)), "198.18.0.9") == 0);
	if (o.over_tcp != refused || o.other)
		fprintf(stderr, "  made %d, logged tcp %d dns %d other %d\n", made,
			o.over_tcp, o.over_dns, o.other);
}

/* A packet message as nfnetlink_log makes one, around a copy of len bytes. */
static size_t packet_msg(char *buf, size_t size, int family, const uint8_t *pkt, size_t len)
{
	struct nlmsghdr *nh = (struct nlmsghdr *)buf;
	struct nfgenmsg *g = NLMSG_DATA(nh);
	struct nlattr *na = (struct nlattr *)((char *)g + NLMSG_ALIGN(sizeof(*g)));

	memset(buf, 0, size);
	nh->nlmsg_type = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_PACKET;
	g->nfgen_family = (uint8_t)family;
	na->nla_type = NFULA_PAYLOAD;
	na->nla_len = (uint16_t)(NLA_HDRLEN + len);
	memcpy((char *)na + NLA_HDRLEN, pkt, len);
	nh->nlmsg_len = (uint32_t)(NLMSG_LENGTH(sizeof(*g)) + NLA_ALIGN(na->nla_len));
	return nh->nlmsg_len;
}

TEST(nflog_parse_walks_ipv6_extension_headers)
{
	uint8_t pkt[40 + 8 + 8] = { 0x60 };
	char buf[256] __attribute__((aligned(NLMSG_ALIGNTO))), a[INET6_ADDRSTRLEN];
	struct nflog_packet p;
	size_t n;

	pkt[6] = 0;			/* hop-by-hop options, 8 bytes, then UDP */
	inet_pton(AF_INET6, "2001:db8::9", pkt + 24);
	pkt[40] = IPPROTO_UDP;
	pkt[48 + 2] = 0x01;		/* destination port 443 */
	pkt[48 + 3] = 0xbb;
	n = packet_msg(buf, sizeof(buf), AF_INET6, pkt, sizeof(pkt));
	CHECK(nflog_parse((struct nlmsghdr *)buf, n, &p) == 1);
	CHECK(p.proto == IPPROTO_UDP && p.port == 443);
	CHECK(strcmp(dst_text(&p, a, sizeof(a)), "2001:db8::9") == 0);
}

TEST(nflog_parse_refuses_what_it_cannot_read)
{
	uint8_t v4[28] = { 0x45, [9] = IPPROTO_UDP, [16] = 198, 18, 0, 9, [22] = 0, 9 };
	char buf[256] __attribute__((aligned(NLMSG_ALIGNTO)));
	struct nflog_packet p;
	size_t n;

	/* a copy shorter than an IPv4 header */
	n = packet_msg(buf, sizeof(buf), AF_INET, v4, 12);
	CHECK(nflog_parse((struct nlmsghdr *)buf, n, &p) == -EINVAL);
	/* a message that says it is longer than what was read */
	n = packet_msg(buf, sizeof(buf), AF_INET, v4, sizeof(v4));
	CHECK(nflog_parse((struct nlmsghdr *)buf, n - 4, &p) == 0);
	/* a later fragment: no transport header, so no port */
	v4[7] = 0x10;
	n = packet_msg(buf, sizeof(buf), AF_INET, v4, sizeof(v4));
	CHECK(nflog_parse((struct nlmsghdr *)buf, n, &p) == 1);
	CHECK(p.proto == IPPROTO_UDP && p.port == -1);
	/* not a packet: a config answer */
	((struct nlmsghdr *)buf)->nlmsg_type = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_CONFIG;
	CHECK(nflog_parse((struct nlmsghdr *)buf, n, &p) == 0);
}

/* An attribute after the payload of a message packet_msg made. */
static size_t add_prefix(char *buf, size_t size, const char *prefix, size_t len)
{
	struct nlmsghdr *nh = (struct nlmsghdr *)buf;
	struct nlattr *na = (struct nlattr *)(buf + nh->nlmsg_len);

	if (nh->nlmsg_len + NLA_HDRLEN + NLA_ALIGN(len) > size)
		return nh->nlmsg_len;
	na->nla_type = NFULA_PREFIX;
	na->nla_len = (uint16_t)(NLA_HDRLEN + len);
	memcpy((char *)na + NLA_HDRLEN, prefix, len);
	nh->nlmsg_len += NLA_ALIGN(na->nla_len);
	return nh->nlmsg_len;
}

/* Only the over-rate rules' own prefix, whole, marks a packet theirs. */
TEST(nflog_parse_knows_the_over_rate_prefix)
{
	uint8_t v4[28] = { 0x45, [9] = IPPROTO_TCP, [16] = 198, 18, 0, 9, [22] = 0, 80 };
	char buf[256] __attribute__((aligned(NLMSG_ALIGNTO)));
	const char *ours = NFLOG_PREFIX_OVER_RATE;
	struct nflog_packet p;
	size_t n;

	packet_msg(buf, sizeof(buf), AF_INET, v4, sizeof(v4));
	n = add_prefix(buf, sizeof(buf), ours, strlen(ours) + 1);
	CHECK(nflog_parse((struct nlmsghdr *)buf, n, &p) == 1);
	CHECK(p.over_rate && p.proto == IPPROTO_TCP && p.port == 80);
	/* no prefix: the drop of what leaves loopback */
	n = packet_msg(buf, sizeof(buf), AF_INET, v4, sizeof(v4));
	CHECK(nflog_parse((struct nlmsghdr *)buf, n, &p) == 1 && !p.over_rate);
	/* its beginning only, and without its NUL */
	packet_msg(buf, sizeof(buf), AF_INET, v4, sizeof(v4));
	n = add_prefix(buf, sizeof(buf), ours, 6);
	CHECK(nflog_parse((struct nlmsghdr *)buf, n, &p) == 1 && !p.over_rate);
	packet_msg(buf, sizeof(buf), AF_INET, v4, sizeof(v4));
	n = add_prefix(buf, sizeof(buf), ours, strlen(ours));
	CHECK(nflog_parse((struct nlmsghdr *)buf, n, &p) == 1 && !p.over_rate);
}

int main(void)
{
	unit_run_all();
	UNIT_DONE();
}
