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
 */
#include "relay.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#define RELAY_PIPE_SIZE	(1 << 20)

struct relay_dir {
	struct relay *r;
	int from, to;
	int pipe[2];
	size_t queued;		/* bytes in the pipe */
	uint64_t moved;
	bool eof;		/* the source ended; shut the sink once empty */
	bool done;
	struct event *rd, *wr;
};

struct relay {
	struct relay_dir up, down;	/* up: sandbox -> upstream */
	relay_done_fn done;
	void *arg;
	bool finished;
};

static void dir_arm(struct relay_dir *d)
{
	if (d->done)
		return;
	if (!d->eof && d->queued < RELAY_PIPE_SIZE)
		event_add(d->rd, NULL);
	else
		event_del(d->rd);
	if (d->queued)
		event_add(d->wr, NULL);
	else
		event_del(d->wr);
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
	d->done = true;
	event_del(d->rd);
	event_del(d->wr);
	if (error) {
		/* one side failed: the tunnel is over both ways */
		struct relay_dir *o = d == &d->r->up ? &d->r->down : &d->r->up;

		o->done = true;
		event_del(o->rd);
		event_del(o->wr);
	} else {
		shutdown(d->to, SHUT_WR);
	}
	finish(d->r);
}

static void dir_flush(struct relay_dir *d)
{
	while (d->queued) {
		ssize_t n = splice(d->pipe[0], NULL, d->to, NULL, d->queued,
				   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);

		if (n < 0) {
			if (errno == EAGAIN)
				break;
			if (errno == EINTR)
				continue;
			dir_end(d, true);
			return;
		}
		d->queued -= n;
		d->moved += n;
	}
	if (d->eof && !d->queued) {
		dir_end(d, false);
		return;
	}
	dir_arm(d);
}

static void on_readable(evutil_socket_t fd, short what, void *arg)
{
	struct relay_dir *d = arg;
	ssize_t n;

	(void)fd;
	(void)what;
	n = splice(d->from, NULL, d->pipe[1], NULL, RELAY_PIPE_SIZE - d->queued,
		   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
	if (n == 0) {
		d->eof = true;
	} else if (n < 0) {
		if (errno != EAGAIN && errno != EINTR) {
			dir_end(d, true);
			return;
		}
	} else {
		d->queued += n;
	}
	dir_flush(d);
}

static void on_writable(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	dir_flush(arg);
}

static int dir_init(struct relay *r, struct relay_dir *d, struct event_base *base,
		    int from, int to, struct evbuffer *pending)
{
	d->r = r;
	d->from = from;
	d->to = to;
	d->pipe[0] = d->pipe[1] = -1;
	if (pipe2(d->pipe, O_CLOEXEC | O_NONBLOCK) < 0)
		return -errno;
	/* a smaller pipe only means more trips; the default is 64 KiB */
	fcntl(d->pipe[1], F_SETPIPE_SZ, RELAY_PIPE_SIZE);
	d->rd = event_new(base, from, EV_READ, on_readable, d);
	d->wr = event_new(base, to, EV_WRITE, on_writable, d);
	if (!d->rd || !d->wr)
		return -ENOMEM;
	/* what was read before the relay began goes first, through the pipe */
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
	if (dir_init(r, &r->up, base, down_fd, up_fd, to_up) < 0 ||
	    dir_init(r, &r->down, base, up_fd, down_fd, to_down) < 0) {
		relay_free(r);
		return NULL;
	}
	/* nothing happens before the loop runs: done() never fires from here */
	dir_arm(&r->up);
	dir_arm(&r->down);
	return r;
}

static void dir_free(struct relay_dir *d)
{
	if (d->rd)
		event_free(d->rd);
	if (d->wr)
		event_free(d->wr);
	if (d->pipe[0] >= 0)
		close(d->pipe[0]);
	if (d->pipe[1] >= 0)
		close(d->pipe[1]);
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
