/*
 * peer.h - which process in a sandbox holds the other end of a connection
 * the supervisor accepted, so that egress events name a pid (and through
 * it, the tool call).
 */
#ifndef CORRAL_PEER_H
#define CORRAL_PEER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

/*
 * diag_fd: a NETLINK_SOCK_DIAG socket made in the sandbox's netns;
 * netns_ino: the inode of that netns; peer: the client's address as
 * accept() gave it; to: where the client sent it (peer_dst), or NULL if
 * not known (a wildcard address: its port alone).  Only a socket of
 * peer's port connected to to (for UDP: or to nothing) is taken: another
 * bound to the same port, in another call's process, was named instead.
 * Returns the host pid, or 0 if no process was found (a probe that
 * connected and left); *cgid is the cgroup2 id of the socket's maker,
 * which outlives it, or 0.
 */
pid_t peer_pid(int diag_fd, ino_t netns_ino, const struct sockaddr *peer,
	       const struct sockaddr *to, uint64_t *cgid);
/* The same for the UDP socket a datagram came from (a DNS query). */
pid_t peer_pid_udp(int diag_fd, ino_t netns_ino, const struct sockaddr *peer,
		   const struct sockaddr *to, uint64_t *cgid);
/*
 * Where the client of our accepted socket fd sent its connection: the
 * original destination of a redirected one, else fd's own address.
 * 0, or a negative errno.
 */
int peer_dst(int fd, struct sockaddr_storage *to);

/*
 * A search walks every process of the host (and dumps every socket of
 * the sandbox's netns): half a millisecond here with 100 processes, more
 * on a busy host, on the supervisor's loop and outside the sandbox's CPU
 * budget, for a denial that costs the sandbox a twentieth of that.  So a
 * sandbox's denials search at most this many times a second; past it a
 * denial names no pid (it is still recorded and counted).
 */
#define PEER_SEARCHES_PER_S	16

/*
 * And a search reads at most this many fds of the sandbox's processes
 * (each process one more): the sandbox chooses how many it holds, and a
 * search of a million (1024 processes of 1024) took the loop 2-3 s.
 * The processes holding the fewest fds are read first (peer.c).
 */
#define PEER_SEARCH_FDS		2048

/*
 * Each sandbox's count of searches bounds it alone, and every search walks
 * the same /proc, every process of the host, the other sandboxes' too, on
 * the loop of the process that supervises them all (a daemon's): k
 * sandboxes of P processes each that flood denials cost 16k searches of
 * kP entries a second.  Four of 900 held another box's exec 4.4-14.3 s
 * at a time (2-9 ms without them).  So the searches of one process
 * together read at most this many entries (a process walked, an fd read)
 * a second, about 50-150 ms of a core here; a search that would go past
 * it stops and names no pid (the socket's cgroup2 group still names the
 * call).  Past an equal share of it (among the sandboxes that searched
 * the second before) a sandbox's searches leave the rest to the others.
 */
#define PEER_WALK_PER_S		16384

/*
 * Why the last search of this process named no pid where it was cut
 * short (NULL: it was not; no process held the socket then), or, given
 * as PEER_MISSED_RATE by the caller, was not made: a denial says it in
 * "pid_missing".  A sandbox flooding denials spends the budget of every
 * sandbox each second, for as long as it floods, and its neighbours'
 * denials named no pid as if their asker had gone.
 */
const char *peer_missed(void);
#define PEER_MISSED_RATE	"not searched for: this sandbox's 16 searches of " \
				"the second were made (PEER_SEARCHES_PER_S)"

struct peer_rate {
	uint64_t since_ms;	/* this second's searches began at */
	unsigned n;
};

/* true: a search may be made at now_ms, and is counted. */
bool peer_rate_take(struct peer_rate *r, uint64_t now_ms);

#endif
