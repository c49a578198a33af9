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
 *   floor_relay UPSTREAM_PORT     (prints the port it listens on)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define HEAD_MAX	4096

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

static void serve(int c, const struct sockaddr_in *up)
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
	if (nodelay(u) == 0 && connect(u, (const struct sockaddr *)up, sizeof(*up)) == 0 &&
	    write(c, established, sizeof(established) - 1) == sizeof(established) - 1)
		relay(c, u);
	close(u);
}

int main(int argc, char **argv)
{
	struct sockaddr_in sa = { .sin_family = AF_INET }, up;
	socklen_t salen = sizeof(sa);
	int l;

	if (argc != 2) {
		fprintf(stderr, "usage: floor_relay UPSTREAM_PORT\n");
		return 2;
	}
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	up = sa;
	up.sin_port = htons((uint16_t)atoi(argv[1]));
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
		serve(c, &up);
		close(c);
	}
}
