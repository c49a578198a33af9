/*
 * relay.c - a tunnel's bytes, moved by the kernel.
 *
 * Once a connection is judged and, where it matters, its first bytes read
 * (SNI), the supervisor has nothing more to learn from it: the bytes go
 * socket -> pipe -> socket with splice(2), up to a pipe's size at a time,
 * never through user space.  (libevent 2.1's bufferevents read 4 KiB at a
 * time, which cost 85% of the throughput.)  Each direction waits for its
 * source only while its pipe has room and for its sink only while the pipe
 * holds data, so a slow reader stops its writer instead of growing us.
 *
 * What a wakeup costs is what a short connection costs, so: the events
 * stay registered while wanted (EV_PERSIST: no epoll_ctl per chunk), a
 * readable source is drained for a few rounds while its sink keeps up, the
 * bytes read before the relay began are sent at once (straight to the
 * sink, not through the pipe) rather than after a trip through the loop,
 * and the pipes of a relay that ended empty are kept for the next one
 * instead of made and sized anew each connection.
 *
 * A tunnel whose first bytes must still be judged (a TLS hello's SNI) is
 * relayed from the start all the same: those bytes are read into user
 * space and shown to the owner's judge, and go on only when it passes
 * them; the upstream's side flows meanwhile.  The judge may let a first
 * part go and ask to see the upstream's answer to it before the rest (a
 * TLS HelloRetryRequest asks the client for a second hello in clear):
 * then the upstream's first bytes are read into user space too, and the
 * sandbox's wait, held, until the peer judge passed them.
 */
#include "relay.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define RELAY_PIPE_SIZE	(256 << 10)
#define RELAY_ROUNDS	8	/* reads a wakeup may make: other tunnels wait */
#define RELAY_READ_MORE	(64 << 10)	/* a read this big: the source may hold more */
#define PIPE_POOL_MAX	16	/* idle pipes kept, two fds each */
#define PENDING_IOV	8	/* chains of bytes read before the relay, a sendmsg */
#define RELAY_JUDGE_STACK	(16 << 10)	/* a judge's first read, on the stack */

struct relay_dir {
	struct relay *r;
	int from, to;
	int pipe[2];
	size_t queued;		/* bytes in the pipe */
	uint64_t moved;
	bool eof;		/* the source ended; shut the sink once empty */
	bool done;
	bool rd_on, wr_on;	/* which of rd, wr is added */
	struct event *rd, *wr;
	relay_judge_fn judge;	/* until its verdict: sees the first bytes */
	relay_judge_fn peer;	/* up only: the down side's judge, when judge asks */
	size_t judge_max;
	uint8_t *held;		/* first bytes the judge wants more after, or NULL */
	size_t nheld;
	bool peer_wait;		/* up: held until the peer judge passed the upstream's */
	bool rejudge;		/* held bytes to show the judge without a new read */
};

struct relay {
	struct relay_dir up, down;	/* up: sandbox -> upstream */
	relay_done_fn done;
	void *arg;
	bool finished;
};

/*
 * Empty pipes, already sized.  Only a pipe whose every byte we read back
 * goes here (our count of what it holds is exact: nobody else has it), so
 * a tunnel never sees another's bytes.  Per thread: an event loop's own.
 */
static __thread int pool[PIPE_POOL_MAX][2];
static __thread size_t npool;

static int pipe_get(int p[2])
{
	if (npool) {
		npool--;
		p[0] = pool[npool][0];
		p[1] = pool[npool][1];
		return 0;
	}
	if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
		return -errno;
	/*
	 * A pipe's pages are the host's kernel memory, charged to no cgroup
	 * of the sandbox's, and a tunnel whose sink stopped reading keeps
	 * its pipes full: 256 KiB each, not the 1 MiB they were, kept
	 * bench/proxy.py's throughput; the default 64 KiB halved its upload.
	 */
	(void)fcntl(p[1], F_SETPIPE_SZ, RELAY_PIPE_SIZE);
	return 0;
}

static void pipe_put(int p[2], bool empty)
{
	if (p[0] < 0)
		return;
	if (empty && npool < PIPE_POOL_MAX) {
		pool[npool][0] = p[0];
		pool[npool][1] = p[1];
		npool++;
	} else {
		close(p[0]);
		close(p[1]);
	}
	p[0] = p[1] = -1;
}

static void ev_want(struct event *ev, bool *on, bool want)
{
	if (want && !*on)
		*on = event_add(ev, NULL) == 0;
	else if (!want && *on) {
		event_del(ev);
		*on = false;
	}
}

static void dir_arm(struct relay_dir *d)
{
	if (d->done)
		return;
	/* a judge's full hold reads no more (it waits for the peer's verdict) */
	ev_want(d->rd, &d->rd_on, !d->eof && d->queued < RELAY_PIPE_SIZE &&
		!(d->judge && d->nheld >= d->judge_max));
	ev_want(d->wr, &d->wr_on, d->queued != 0);
}

static void dir_stop(struct relay_dir *d)
{
	d->done = true;
	ev_want(d->rd, &d->rd_on, false);
	ev_want(d->wr, &d->wr_on, false);
}

static void finish(struct relay *r)
{
	if (r->finished || !r->up.done || !r->down.done)
		return;
	r->finished = true;
	r->done(r->arg, r->up.moved, r->down.moved);
}

static void dir_end(struct relay_dir *d, bool error)
{
	struct relay_dir *other = d == &d->r->up ? &d->r->down : &d->r->up;

	dir_stop(d);
	if (error) {
		/* one side failed: the tunnel is over both ways */
		dir_stop(other);
	} else if (!other->done) {
		shutdown(d->to, SHUT_WR);
	}
	/*
	 * else the last direction ended: its sink's own source is at EOF, so
	 * closing it sends the FIN shutdown would, and done() is where the
	 * owner frees the relay (proxy.c at once), which closes it.
	 */
	finish(d->r);
}

/* Move what the pipe holds to the sink; 0, or -errno of a failed splice. */
static int dir_push(struct relay_dir *d)
{
	while (d->queued) {
		ssize_t n = splice(d->pipe[0], NULL, d->to, NULL, d->queued,
				   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);

		if (n < 0) {
			if (errno == EAGAIN)
				return 0;
			if (errno == EINTR)
				continue;
			return -errno;
		}
		d->queued -= n;
		d->moved += n;
	}
	return 0;
}

/* false: the direction ended (and the relay may be gone) */
static bool dir_flush(struct relay_dir *d)
{
	if (dir_push(d) < 0) {
		dir_end(d, true);
		return false;
	}
	if (d->eof && !d->queued) {
		dir_end(d, false);
		return false;
	}
	dir_arm(d);
	return true;
}

/*
 * Bytes judged good go to the sink now, the rest through the pipe (a
 * judge's bytes fit in it: judge_max is a ClientHello's bound).  Behind
 * bytes the pipe still holds (a first part let go before) they queue, in
 * order.  false: the direction failed and ended.
 */
static bool send_judged(struct relay_dir *d, const uint8_t *p, size_t n)
{
	while (n && !d->queued) {
		ssize_t k = send(d->to, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		p += k;
		n -= k;
		d->moved += k;
	}
	while (n) {
		ssize_t k = write(d->pipe[1], p, n);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			dir_end(d, true);
			return false;
		}
		p += k;
		n -= k;
		d->queued += k;
	}
	return true;
}

/*
 * Keep what the judge has not let go on the heap (buf may be the stack);
 * nothing left (a hello alone, its answer awaited) costs no allocation.
 */
static bool hold_rest(struct relay_dir *d, const uint8_t *buf, size_t from)
{
	if (d->nheld == from) {
		d->nheld = 0;
		return true;
	}
	if (!d->held) {
		d->held = malloc(d->judge_max);
		if (!d->held)
			return false;
	}
	memmove(d->held, buf + from, d->nheld - from);
	d->nheld -= from;
	return true;
}

/*
 * The upstream's first bytes passed the peer judge: the sandbox's side,
 * held meanwhile, is read again, and what it holds is shown to its judge
 * now (nothing new may come: the client may be waiting for the answer).
 */
static void peer_passed(struct relay *r)
{
	struct relay_dir *up = &r->up;

	up->peer_wait = false;
	if (up->done)
		return;
	if (up->nheld) {
		up->rejudge = true;
		event_active(up->rd, EV_READ, 1);
	}
	dir_arm(up);
}

/*
 * A direction's first bytes, read into user space for its judge: a first
 * read on the stack (most hellos, most first requests come whole), held
 * on the heap only while the judge asks for more or waits for the peer.
 */
static void judge_readable(struct relay_dir *d)
{
	uint8_t first[RELAY_JUDGE_STACK];
	uint8_t *buf = d->held ? d->held : first;
	size_t cap = d->held ? d->judge_max : sizeof(first);
	struct relay_dir *down = &d->r->down;
	enum relay_verdict v;
	size_t pass = 0;
	ssize_t n = 0;

	if (cap > d->judge_max)
		cap = d->judge_max;
	if (d->nheld < cap) {
		n = recv(d->from, buf + d->nheld, cap - d->nheld, MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			n = 0;
		else if (n <= 0) {
			/* ended or failed before a verdict: nothing of it goes on */
			dir_end(d, true);
			return;
		}
	}
	if (n == 0 && !d->rejudge)
		return;
	d->rejudge = false;
	d->nheld += n;
	v = d->judge(d->r->arg, buf, d->nheld, d->nheld >= d->judge_max, &pass);
	if (v == RELAY_JUDGE_GONE)
		return;
	if (v == RELAY_JUDGE_PEER && (d != &d->r->up || !d->peer))
		v = RELAY_JUDGE_PASS;	/* no one to ask: what it saw goes on */
	if (v == RELAY_JUDGE_MORE) {
		/* asked more than it may have: only a wait for the peer may be full */
		if ((d->nheld >= d->judge_max && !d->peer_wait) || !hold_rest(d, buf, 0)) {
			dir_end(d, true);
			return;
		}
		dir_arm(d);
		return;
	}
	if (v == RELAY_JUDGE_PEER) {
		if (pass > d->nheld)
			pass = d->nheld;
		if (!send_judged(d, buf, pass))
			return;
		if (!hold_rest(d, buf, pass)) {
			dir_end(d, true);
			return;
		}
		/* the upstream's answer is read for the peer judge before it goes on */
		d->peer_wait = true;
		down->judge = d->peer;
		down->judge_max = d->judge_max;
		dir_flush(d);
		return;
	}
	d->judge = NULL;
	if (!send_judged(d, buf, d->nheld))
		return;
	free(d->held);
	d->held = NULL;
	d->nheld = 0;
	/* before the flush, which may end the relay: this only arms events */
	if (d == down)
		peer_passed(d->r);
	dir_flush(d);
}

static void on_readable(evutil_socket_t fd, short what, void *arg)
{
	struct relay_dir *d = arg;

	(void)fd;
	(void)what;
	if (d->judge) {
		judge_readable(d);
		return;
	}
	for (int round = 0; round < RELAY_ROUNDS; round++) {
		ssize_t n = splice(d->from, NULL, d->pipe[1], NULL,
				   RELAY_PIPE_SIZE - d->queued,
				   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		bool more = false;

		if (n == 0) {
			d->eof = true;
		} else if (n < 0) {
			if (errno != EAGAIN && errno != EINTR) {
				dir_end(d, true);
				return;
			}
		} else {
			d->queued += n;
			/* a short read drained the socket: asking again is an EAGAIN */
			more = n >= RELAY_READ_MORE;
		}
		if (!dir_flush(d))
			return;
		/* again only while the source gave and the sink took it all */
		if (!more || d->queued)
			return;
	}
}

static void on_writable(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	dir_flush(arg);
}

/*
 * Send what was read before the relay began straight to the sink, as much
 * as it takes now: with the pipe still empty nothing can pass it, and the
 * bytes skip a write into the pipe and a splice out of it.  What the sink
 * does not take, or an error, is left to the pipe and the write event,
 * which meets the error again.  Returns the bytes sent.
 */
static size_t pending_send(struct evbuffer *pending, int to)
{
	size_t sent = 0;

	while (evbuffer_get_length(pending)) {
		struct evbuffer_iovec v[PENDING_IOV];
		struct iovec iov[PENDING_IOV];
		struct msghdr mh = { .msg_iov = iov };
		int nv = evbuffer_peek(pending, -1, NULL, v, PENDING_IOV);
		ssize_t n;

		if (nv > PENDING_IOV)
			nv = PENDING_IOV;
		for (int i = 0; i < nv; i++)
			iov[i] = (struct iovec){ v[i].iov_base, v[i].iov_len };
		mh.msg_iovlen = nv;
		n = sendmsg(to, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		evbuffer_drain(pending, n);
		sent += n;
	}
	return sent;
}

/*
 * Bytes read before the relay began, for a judge: held as if read by it,
 * and shown to it from the loop (never from relay_start: a verdict may free
 * the relay).  false: more than it may hold, or no memory.
 */
static bool judge_early(struct relay_dir *d, struct evbuffer *early)
{
	size_t n = evbuffer_get_length(early);

	if (!n)
		return true;
	if (n > d->judge_max || !(d->held = malloc(d->judge_max)))
		return false;
	if (evbuffer_remove(early, d->held, n) != (int)n)
		return false;
	d->nheld = n;
	d->rejudge = true;
	return true;
}

static int dir_init(struct relay *r, struct relay_dir *d, struct event_base *base,
		    int from, int to, struct evbuffer *pending)
{
	int e;

	d->r = r;
	d->from = from;
	d->to = to;
	e = pipe_get(d->pipe);
	if (e < 0)
		return e;
	d->rd = event_new(base, from, EV_READ | EV_PERSIST, on_readable, d);
	d->wr = event_new(base, to, EV_WRITE | EV_PERSIST, on_writable, d);
	if (!d->rd || !d->wr)
		return -ENOMEM;
	/* what was read before the relay began goes first: to the sink, the rest through the pipe */
	if (pending)
		d->moved += pending_send(pending, to);
	while (pending && evbuffer_get_length(pending)) {
		int n = evbuffer_write(pending, d->pipe[1]);

		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		d->queued += n;
	}
	return 0;
}

struct relay *relay_start(struct event_base *base, int down_fd, int up_fd,
			  struct evbuffer *to_up, struct evbuffer *to_down,
			  const struct relay_judges *judges,
			  relay_done_fn done, void *arg)
{
	struct relay *r = calloc(1, sizeof(*r));

	if (!r) {
		close(down_fd);
		close(up_fd);
		return NULL;
	}
	r->done = done;
	r->arg = arg;
	r->up.pipe[0] = r->up.pipe[1] = r->down.pipe[0] = r->down.pipe[1] = -1;
	r->up.from = down_fd;
	r->down.from = up_fd;
	if (judges && judges->first) {
		r->up.judge = judges->first;
		r->up.peer = judges->peer;
		r->up.judge_max = judges->max;
		/* bytes already read are the judge's too, shown from the loop */
		if (!judges->max || (to_up && !judge_early(&r->up, to_up))) {
			relay_free(r);
			return NULL;
		}
	}
	if (dir_init(r, &r->up, base, down_fd, up_fd, to_up) < 0 ||
	    dir_init(r, &r->down, base, up_fd, down_fd, to_down) < 0) {
		relay_free(r);
		return NULL;
	}
	/*
	 * Send what is pending now, not after a trip through the loop.  A
	 * failure here is left to the write event, which meets it again:
	 * nothing happens before the loop runs, done() never fires from here.
	 */
	(void)dir_push(&r->up);
	(void)dir_push(&r->down);
	dir_arm(&r->up);
	dir_arm(&r->down);
	if (r->up.rejudge)
		event_active(r->up.rd, EV_READ, 1);
	return r;
}

static void dir_free(struct relay_dir *d)
{
	if (d->rd)
		event_free(d->rd);
	if (d->wr)
		event_free(d->wr);
	pipe_put(d->pipe, d->queued == 0);
	free(d->held);
}

/*
 * A close that resets: SO_LINGER with no time drops what the socket still
 * queues instead of sending it after the close, and the peer gets RST.
 * Failing (not a TCP socket, say), the close is an ordinary one: nothing
 * more can be done for it.
 */
void relay_sock_reset(int fd)
{
	struct linger l = { .l_onoff = 1, .l_linger = 0 };

	if (fd >= 0 && setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l)) < 0)
		return;
}

void relay_reset(struct relay *r)
{
	if (!r)
		return;
	relay_sock_reset(r->up.from);
	relay_sock_reset(r->down.from);
}

void relay_counts(const struct relay *r, uint64_t *up, uint64_t *down)
{
	*up = r ? r->up.moved : 0;
	*down = r ? r->down.moved : 0;
}

void relay_free(struct relay *r)
{
	if (!r)
		return;
	dir_free(&r->up);
	dir_free(&r->down);
	/* each socket is the source of one direction */
	if (r->up.from >= 0)
		close(r->up.from);
	if (r->down.from >= 0)
		close(r->down.from);
	free(r);
}
