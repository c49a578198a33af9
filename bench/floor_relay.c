/*
 * floor_relay.c - the least a CONNECT relay can do for a new connection,
 * for bench/proxy.py to print beside the proxy's figure: one connection at
 * a time, blocking sockets, no event loop, no judging, no records.  Accept,
 * read the head, connect to 127.0.0.1:PORT whatever the head names, answer
 * 200, then poll(2) and read/write both ways until both ends have closed.
 * What it adds over a direct connection is what the kernel charges any
 * user-space relay here: a second TCP connection, a round trip for the 200,
 * and a wakeup of the relay on each leg of every exchange.
 *
 * With --sockmap the bytes never reach user space: the kernel moves them
 * from one socket to the other (a BPF_MAP_TYPE_SOCKHASH and an SK_SKB
 * verdict program that redirects each skb to its peer's send side), to
 * show whether taking the relay out of user space would lift the proxy's
 * ceiling on this kernel.  Both sockets go into the map before the 200 is
 * sent, so no byte of the tunnel passes user space; an end's EOF is passed
 * on once the other socket has sent, and had acknowledged, every byte the
 * kernel moved to it.  It needs CAP_BPF and CAP_NET_ADMIN (root); without,
 * it says why and exits 3.
 *
 *   floor_relay [--sockmap] UPSTREAM_PORT     (prints the port it listens on)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/bpf.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define HEAD_MAX	4096
#define DRAIN_MS	2000	/* --sockmap: at most, for moved bytes to be acknowledged */

static const char established[] = "HTTP/1.1 200 Connection established\r\n\r\n";

static int nodelay(int fd)
{
	int one = 1;

	return setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* Both ways until both ends closed; a failed write ends the tunnel. */
static void relay(int c, int u)
{
	struct pollfd p[2] = { { .fd = c, .events = POLLIN }, { .fd = u, .events = POLLIN } };
	char buf[64 << 10];
	int open = 2;

	while (open > 0 && poll(p, 2, -1) > 0) {
		for (int i = 0; i < 2; i++) {
			int to = i ? c : u;
			ssize_t n;

			if (p[i].fd < 0 || !p[i].revents)
				continue;
			n = read(p[i].fd, buf, sizeof(buf));
			if (n <= 0) {
				shutdown(to, SHUT_WR);
				p[i].fd = -1;
				open--;
			} else if (write(to, buf, n) != n) {
				return;
			}
		}
	}
}

static int map_fd = -1;

static int sys_bpf(int cmd, union bpf_attr *a)
{
	return syscall(__NR_bpf, cmd, a, sizeof(*a));
}

/*
 * The map is keyed by a socket's cookie and holds its peer: the verdict
 * program looks up the cookie of the socket an skb arrived on and sends
 * the skb out of the socket found (no entry: the skb is dropped, which
 * the order of map_pair rules out).
 */
static int load(void)
{
	static char log[16384];
	union bpf_attr a;
	int prog;

	memset(&a, 0, sizeof(a));
	a.map_type = BPF_MAP_TYPE_SOCKHASH;
	a.key_size = sizeof(uint64_t);
	a.value_size = sizeof(uint64_t);
	a.max_entries = 64;
	map_fd = sys_bpf(BPF_MAP_CREATE, &a);
	if (map_fd < 0) {
		perror("floor_relay --sockmap: BPF_MAP_CREATE of a sockhash");
		return -1;
	}
	struct bpf_insn insn[] = {
		/* r6 = ctx; fp[-8] = bpf_get_socket_cookie(ctx) */
		{ .code = BPF_ALU64 | BPF_MOV | BPF_X, .dst_reg = 6, .src_reg = 1 },
		{ .code = BPF_JMP | BPF_CALL, .imm = BPF_FUNC_get_socket_cookie },
		{ .code = BPF_STX | BPF_MEM | BPF_DW, .dst_reg = 10, .src_reg = 0, .off = -8 },
		/* return bpf_sk_redirect_hash(ctx, map, &fp[-8], 0): its peer's egress */
		{ .code = BPF_ALU64 | BPF_MOV | BPF_X, .dst_reg = 1, .src_reg = 6 },
		{ .code = BPF_LD | BPF_DW | BPF_IMM, .dst_reg = 2,
		  .src_reg = BPF_PSEUDO_MAP_FD, .imm = map_fd },
		{ 0 },
		{ .code = BPF_ALU64 | BPF_MOV | BPF_X, .dst_reg = 3, .src_reg = 10 },
		{ .code = BPF_ALU64 | BPF_ADD | BPF_K, .dst_reg = 3, .imm = -8 },
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = 4, .imm = 0 },
		{ .code = BPF_JMP | BPF_CALL, .imm = BPF_FUNC_sk_redirect_hash },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	memset(&a, 0, sizeof(a));
	a.prog_type = BPF_PROG_TYPE_SK_SKB;
	a.insns = (uint64_t)(uintptr_t)insn;
	a.insn_cnt = sizeof(insn) / sizeof(insn[0]);
	a.license = (uint64_t)(uintptr_t)"GPL";
	a.log_buf = (uint64_t)(uintptr_t)log;
	a.log_size = sizeof(log);
	a.log_level = 1;
	prog = sys_bpf(BPF_PROG_LOAD, &a);
	if (prog < 0) {
		fprintf(stderr, "floor_relay --sockmap: BPF_PROG_LOAD of the verdict: %s\n%s",
			strerror(errno), log);
		return -1;
	}
	memset(&a, 0, sizeof(a));
	a.target_fd = map_fd;
	a.attach_bpf_fd = prog;
	a.attach_type = BPF_SK_SKB_VERDICT;
	if (sys_bpf(BPF_PROG_ATTACH, &a) < 0) {
		perror("floor_relay --sockmap: BPF_PROG_ATTACH of the verdict to the sockhash");
		return -1;
	}
	return 0;
}

static uint64_t cookie(int fd)
{
	uint64_t c = 0;
	socklen_t len = sizeof(c);

	if (getsockopt(fd, SOL_SOCKET, SO_COOKIE, &c, &len) < 0)
		return 0;
	return c;
}

static int map_put(uint64_t key, int fd)
{
	uint64_t val = (uint64_t)fd;
	union bpf_attr a;

	memset(&a, 0, sizeof(a));
	a.map_fd = map_fd;
	a.key = (uint64_t)(uintptr_t)&key;
	a.value = (uint64_t)(uintptr_t)&val;
	return sys_bpf(BPF_MAP_UPDATE_ELEM, &a);
}

static void map_del(uint64_t key)
{
	union bpf_attr a;

	memset(&a, 0, sizeof(a));
	a.map_fd = map_fd;
	a.key = (uint64_t)(uintptr_t)&key;
	sys_bpf(BPF_MAP_DELETE_ELEM, &a);
}

static int tcp_info(int fd, struct tcp_info *ti)
{
	socklen_t len = sizeof(*ti);

	memset(ti, 0, sizeof(*ti));
	return getsockopt(fd, IPPROTO_TCP, TCP_INFO, ti, &len);
}

/*
 * Everything `from` received before its FIN (which counts one byte), less
 * what was read before the map took it, has left `to` and been
 * acknowledged: its EOF can follow.  `sent_before`: what `to` sent from
 * user space.
 */
static void drain(int from, uint64_t read_before, int to, uint64_t sent_before)
{
	struct timespec pause = { 0, 1000000 };
	struct tcp_info f, t;

	for (int i = 0; i < DRAIN_MS; i++) {
		if (tcp_info(from, &f) < 0 || tcp_info(to, &t) < 0)
			return;
		if (t.tcpi_bytes_acked >= f.tcpi_bytes_received - 1 - read_before + sent_before)
			return;
		nanosleep(&pause, NULL);
	}
}

/* Both ends into the map; wait for each EOF, pass it on when drained. */
static void relay_in_kernel(int c, int u, uint64_t head_len)
{
	uint64_t kc = cookie(c), ku = cookie(u);
	struct pollfd p[2] = { { .fd = c, .events = POLLRDHUP }, { .fd = u, .events = POLLRDHUP } };
	int open = 2;

	if (!kc || !ku || map_put(kc, u) < 0 || map_put(ku, c) < 0) {
		perror("floor_relay --sockmap: a tunnel into the sockhash");
		goto out;
	}
	if (write(c, established, sizeof(established) - 1) != sizeof(established) - 1)
		goto out;
	while (open > 0 && poll(p, 2, -1) > 0) {
		for (int i = 0; i < 2; i++) {
			if (p[i].fd < 0 || !(p[i].revents & (POLLRDHUP | POLLHUP | POLLERR)))
				continue;
			if (i == 0)
				drain(c, head_len, u, 0);
			else
				drain(u, 0, c, sizeof(established) - 1);
			shutdown(i ? c : u, SHUT_WR);
			p[i].fd = -1;
			open--;
		}
	}
out:
	map_del(kc);
	map_del(ku);
}

static void serve(int c, const struct sockaddr_in *up, bool in_kernel)
{
	char head[HEAD_MAX];
	size_t len = 0;
	int u;

	while (!memmem(head, len, "\r\n\r\n", 4)) {
		ssize_t n = len < sizeof(head) ? read(c, head + len, sizeof(head) - len) : 0;

		if (n <= 0)
			return;
		len += n;
	}
	u = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (u < 0)
		return;
	if (nodelay(u) == 0 && connect(u, (const struct sockaddr *)up, sizeof(*up)) == 0) {
		if (in_kernel)
			relay_in_kernel(c, u, len);
		else if (write(c, established, sizeof(established) - 1) ==
			 sizeof(established) - 1)
			relay(c, u);
	}
	close(u);
}

int main(int argc, char **argv)
{
	struct sockaddr_in sa = { .sin_family = AF_INET }, up;
	socklen_t salen = sizeof(sa);
	bool in_kernel = argc == 3 && !strcmp(argv[1], "--sockmap");
	int l;

	if (argc != 2 + in_kernel) {
		fprintf(stderr, "usage: floor_relay [--sockmap] UPSTREAM_PORT\n");
		return 2;
	}
	if (in_kernel && load() < 0)
		return 3;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	up = sa;
	up.sin_port = htons((uint16_t)atoi(argv[argc - 1]));
	l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	/* accepted sockets inherit TCP_NODELAY from the listener */
	if (l < 0 || nodelay(l) < 0 || bind(l, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(l, SOMAXCONN) < 0 || getsockname(l, (struct sockaddr *)&sa, &salen) < 0) {
		perror("floor_relay: listen");
		return 1;
	}
	printf("%u\n", ntohs(sa.sin_port));
	fflush(stdout);
	for (;;) {
		int c = accept4(l, NULL, NULL, SOCK_CLOEXEC);

		if (c < 0)
			continue;
		serve(c, &up, in_kernel);
		close(c);
	}
}
